"""Two rows of the board-outcome table on the virtual rack (docs/verdicts.md; the whole
table is held on stand-in boards, tests/unit/test_board_outcomes.py), through
`rtlab run --tier gate` replicated over both i.MX6Q places, pooled, filed in a results
store:

- places without network tags: the gate's combined cases are skipped on both places, the
  pooled cases are skipped and the run is green (it went red on every push: a case every
  board skipped pooled into an error). No board is booted for a skip the tags decide.
- a breach, then the console lost while its trace comes back: the board's record keeps
  `fail` with the error beside it, and the pooled case is `fail` in its JUnit and in the
  results store.
"""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from rtlab.lab.health import ERRORS_TAG_KEY, TAG_KEY
from rtlab.measure.trace import TRACE_SCRIPT
from rtlab.store import open_store
from rtlab.store.query import history
from rtlab.util.paths import REPO_ROOT
from rtlab.vlab import control
from tests.sqlite_store import ingested

pytestmark = pytest.mark.vlab

CLIENT = str(Path(sys.executable).parent / "labgrid-client")
PLACES = ("imx6q-01", "imx6q-02")
LOSES_CONSOLE = "imx6q-02"
NETWORK_TAGS = ("net_ping", "net_stream", "net_stream_board_port")


def gate_suite(folder: Path, cases: list[str]) -> Path:
    text = (REPO_ROOT / "suite.yaml").read_text()
    gate = "    cases: [hackbench/100us, hackbench/1000us, combined/100us, combined/1000us]\n"
    assert text.count(gate) == 1
    path = folder / "suite.yaml"
    path.write_text(text.replace(gate, f"    cases: [{', '.join(cases)}]\n"))
    return path


def gate_run(image: Path, out: Path, suite: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rtlab.cli", "run", "--board", "qemu-imx6q", "--boards", "2",
         "--tier", "gate", "--image", str(image), "--out", str(out), "--suite", str(suite),
         *extra],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "CI_PIPELINE_ID": "903"})


def pooled(out: Path) -> dict[str, dict]:
    return {r["name"].split("/", 2)[2]: r for r in
            (json.loads(p.read_text()) for p in sorted((out / "results").glob("*.json")))}


def junit_verdicts(out: Path) -> dict[str, str]:
    [junit] = out.glob("junit-pooled-*.xml")
    verdicts = {}
    for case in ET.parse(junit).iter("testcase"):
        tags = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        verdicts[case.get("name")] = tags[0] if tags else "pass"
    return verdicts


def test_a_rack_without_network_tags_skips_the_combined_cases_and_stays_green(
        vlab, image, tmp_path):
    tags = {place: vlab.board(place).place_tags() for place in PLACES}
    for place in PLACES:
        subprocess.run([CLIENT, "-x", vlab.coordinator_address, "-p", place, "set-tags",
                        *(f"{tag}=" for tag in NETWORK_TAGS)], capture_output=True,
                       check=True)
    try:
        suite = gate_suite(tmp_path, ["combined/100us", "combined/1000us"])
        run = gate_run(image("imx6q", "rt"), tmp_path / "out", suite, "--duration", "4")
    finally:
        for place in PLACES:
            subprocess.run([CLIENT, "-x", vlab.coordinator_address, "-p", place, "set-tags",
                            *(f"{tag}={tags[place][tag]}" for tag in NETWORK_TAGS
                              if tag in tags[place])], capture_output=True, check=True)
    records = pooled(tmp_path / "out")
    assert sorted(records) == ["combined/1000us", "combined/100us"], run.stdout[-3000:]
    for record in records.values():
        assert record["verdict"] == "skipped", record["message"]
        assert record["message"].startswith("skipped on every board: ")
        assert "no net_ping/net_stream tags" in record["message"]
        # decided by the tags: no board was booted for it
        assert all("infrastructure" not in json.loads(p.read_text())
                   for p in (tmp_path / "out" / "replicas" / "results").glob("*.json"))
    assert set(junit_verdicts(tmp_path / "out").values()) == {"skipped"}
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


def low_limit_with_trace(folder: Path) -> Path:
    yaml = YAML(typ="rt")
    data = yaml.load((REPO_ROOT / "thresholds.yaml").read_text())
    rt = data["boards"]["qemu-imx6q"]["flavours"]["rt"]
    rt.setdefault("scenarios", {})["idle"] = {
        "max_us": 50, "trace": True,
        "reason": "deliberately low: a breach on every board (emulated wake-ups take ms)"}
    path = folder / "thresholds.yaml"
    with path.open("w") as out:
        yaml.dump(data, out)
    return path


def test_a_breach_then_a_console_lost_during_its_trace_is_a_pooled_fail(vlab, image,
                                                                        tmp_path):
    suite = gate_suite(tmp_path, ["idle/1000us"])
    # the console drops as the board is asked to pack its trace
    control.inject_fault(vlab, LOSES_CONSOLE, "serial-disconnect",
                         on_console=f"{TRACE_SCRIPT} collect", after_s=0, seconds=5)
    try:
        run = gate_run(image("imx6q", "rt"), tmp_path / "out", suite, "--duration", "8",
                       "--thresholds", str(low_limit_with_trace(tmp_path)))
    finally:
        control.clear_faults(vlab)
        for place in PLACES:
            subprocess.run([CLIENT, "-x", vlab.coordinator_address, "-p", place, "set-tags",
                            f"{TAG_KEY}=", f"{ERRORS_TAG_KEY}="], capture_output=True,
                           check=False)
    out = tmp_path / "out"
    replicas = {r["place"]: r for r in (json.loads(p.read_text()) for p in
                                        (out / "replicas" / "results").glob("*.json"))}
    lost = replicas[LOSES_CONSOLE]
    # the board's own record: the breach, with the lost console beside it
    assert lost["verdict"] == "fail", (lost["message"], run.stdout[-3000:])
    assert "> max_us 50 µs" in lost["message"]
    assert "the trace could not be brought back" in lost["error"]
    record = pooled(out)["idle/1000us"]
    assert record["verdict"] == "fail", record["message"]
    boards = {b["place"]: b for b in record["boards"]}
    assert boards[LOSES_CONSOLE]["outcome"] == "breached"
    assert f"{LOSES_CONSOLE}: CPU" in record["message"]
    assert junit_verdicts(out) == {"qemu-imx6q/rt/idle/1000us": "failure"}
    assert run.returncode != 0
    # and so in the results store
    store = open_store(ingested(out, tmp_path / "results.db"))
    try:
        with store.session() as session:
            [stored] = history(session, board="qemu-imx6q")
    finally:
        store.close()
    assert (stored.name, stored.verdict) == ("qemu-imx6q/rt/idle/1000us", "fail")
