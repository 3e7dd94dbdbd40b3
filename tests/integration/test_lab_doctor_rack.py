"""``rtlab lab doctor`` against the virtual rack: all ✓ as it stands, then each fault a lab
makes injected on it (a place whose SD mux is not matched, an exporter stopped, a missing
and a malformed tag, an unmigrated SQLite store, a board type with no limits), each
reported with its fix and the exit code it deserves.

The faults live on places of their own (board tag ``qemu-doctor``, matched to imx6q-02's
resources or to an exporter this test starts), so the rack the other tests use is never
changed; a thresholds file that gives ``qemu-doctor`` the virtual i.MX6Q's limits keeps
each fault the only problem of its run.
"""

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from sqlalchemy import create_engine

from rtlab.lab import client
from rtlab.store import open_store
from rtlab.store.migrate import downgrade, head
from rtlab.util import paths

pytestmark = pytest.mark.vlab

BOARD = "qemu-doctor"
RTLAB = [str(Path(sys.executable).parent / "rtlab")]
ALL_FOUR = ("NetworkSerialPort", "NetworkPowerPort", "VirtualSDMuxDevice",
            "VirtualMassStorage")


@pytest.fixture(scope="module")
def setting(vlab, tmp_path_factory):
    """A migrated store, a thresholds file that knows ``qemu-doctor``, the coordinator."""
    folder = tmp_path_factory.mktemp("doctor")
    database = folder / "results.db"
    open_store(f"sqlite:///{database}").close()
    yaml = YAML()
    data = yaml.load(paths.REPO_ROOT / "thresholds.yaml")
    data["boards"][BOARD] = copy.deepcopy(data["boards"]["qemu-imx6q"])
    thresholds = folder / "thresholds.yaml"
    with thresholds.open("w") as out:
        yaml.dump(data, out)
    return {"coordinator": vlab.coordinator_address, "db": f"sqlite:///{database}",
            "thresholds": thresholds, "folder": folder}


def doctor(setting, *extra: str, boards: tuple[str, ...] = (BOARD,),
           thresholds: Path | None = None, db: str | None = None) -> tuple[int, dict, str]:
    """The doctor's exit code, its JSON, and its text (two runs: --json FILE prints the
    text and writes the JSON)."""
    out = setting["folder"] / "doctor.json"
    out.unlink(missing_ok=True)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("CI", "RTLAB_", "LG_"))}
    proc = subprocess.run(
        [*RTLAB, "lab", "doctor", "--coordinator", setting["coordinator"], "--env",
         "env/virtual.yaml", "--db", db or setting["db"], "--thresholds",
         str(thresholds or setting["thresholds"]), "--boards", *boards, "--json", str(out),
         *extra], cwd=paths.REPO_ROOT, env=env, capture_output=True, text=True,
        timeout=120, check=False)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(out.read_text()), proc.stdout


def problems(report: dict) -> list[dict]:
    return [c for c in report["checks"] if c["status"] != "ok"]


def lg(setting, *args: str, place: str | None = None) -> str:
    return client.run(setting["coordinator"], *args, place=place)


def make_place(setting, name: str, matches: list[str], tags: dict[str, str]) -> None:
    lg(setting, "create", place=name)
    for match in matches:
        lg(setting, "add-match", match, place=name)
    lg(setting, "set-tags", *(f"{k}={v}" for k, v in tags.items()), place=name)


@pytest.fixture
def places(setting):
    """Places this test makes, deleted after it whatever happens."""
    made: list[str] = []

    def make(name: str, matches: list[str], tags: dict[str, str]) -> str:
        made.append(name)
        make_place(setting, name, matches, tags)
        return name

    yield make
    for name in made:
        client.run(setting["coordinator"], "delete", place=name)


NET = {"board": BOARD, "net_ping": "10.0.2.2", "net_stream": "127.0.0.1:20603"}


def test_the_virtual_rack_is_all_ticks(setting):
    code, report, text = doctor(setting, boards=("qemu-imx6q", "qemu-rpi3"))
    assert (code, problems(report)) == (0, []), text
    checks = {c["check"] for c in report["checks"]}
    assert {"coordinator", "labgrid-version", "places", "resources", "tags", "tools",
            "database", "thresholds", "env-file"} <= checks
    resources = [c for c in report["checks"] if c["check"] == "resources"]
    assert {c["subject"] for c in resources} == {"imx6q-01", "imx6q-02", "rpi3-01"}
    assert all("✓" in line for line in text.splitlines()[:-1] if not line.startswith(" "))


def test_a_place_without_its_sd_mux(setting, places):
    places("doctor-mux", [f"vlab/imx6q-02/{cls}" for cls in ALL_FOUR
                          if cls != "VirtualSDMuxDevice"], NET)
    code, report, text = doctor(setting)
    assert code == 1, text
    (found,) = problems(report)
    assert (found["check"], found["subject"], found["status"]) == (
        "resources", "doctor-mux", "error")
    assert "no SD mux resource matched" in found["message"]
    assert found["fix"] == "labgrid-client -p doctor-mux add-match " \
                           "vlab/imx6q-02/VirtualSDMuxDevice"
    assert "✗ resources doctor-mux: no SD mux" in text
    assert "    fix: labgrid-client -p doctor-mux add-match" in text


def test_a_stopped_exporter(setting, places, tmp_path):
    config = tmp_path / "exporter.yaml"
    config.write_text("doctor-exp:\n"
                      "  NetworkSerialPort: {host: 127.0.0.1, port: 20599}\n"
                      "  NetworkPowerPort: {model: simplerest, host: "
                      "'http://127.0.0.1:20480/pdu/{index}/{value}', index: 9}\n"
                      "  VirtualSDMuxDevice: {url: 'http://127.0.0.1:20480/sdmux/none'}\n"
                      "  VirtualMassStorage: {path: /nonexistent}\n")
    exporter = subprocess.Popen(
        [Path(sys.executable).parent / "labgrid-exporter", "--coordinator",
         setting["coordinator"], "--name", "doctor", "--hostname", "127.0.0.1",
         str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(setting, lambda listed: "doctor/doctor-exp/VirtualMassStorage" in listed)
        places("doctor-exp", ["doctor/doctor-exp/*"], NET)
        code, report, text = doctor(setting)
        assert (code, problems(report)) == (0, []), text
        exporter.terminate()
        exporter.wait(timeout=30)
        wait_for(setting, lambda listed: "doctor/" not in listed)
        code, report, text = doctor(setting)
    finally:
        if exporter.poll() is None:
            exporter.kill()
    assert code == 1, text
    (found,) = problems(report)
    assert (found["check"], found["subject"]) == ("exporter", "doctor-exp")
    assert "exporter 'doctor'" in found["message"] and "not connected" in found["message"]
    assert "start labgrid-exporter" in found["fix"]


def wait_for(setting, ready, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready(lg(setting, "resources")):
        assert time.monotonic() < deadline, "the coordinator did not see the change"
        time.sleep(0.5)


def test_missing_and_malformed_network_tags(setting, places):
    place = places("doctor-tag", [f"vlab/imx6q-02/{cls}" for cls in ALL_FOUR],
                   {"board": BOARD})
    code, report, text = doctor(setting)
    # the network scenario is skipped there, not failed: a warning, exit 0
    assert code == 0, text
    (found,) = problems(report)
    assert (found["check"], found["status"]) == ("tags", "warning")
    assert "no net_ping, net_stream tag" in found["message"]
    assert f"labgrid-client -p {place} set-tags net_ping=" in found["fix"]
    assert "! tags doctor-tag" in text

    lg(setting, "set-tags", "net_ping=10.0.2.2", "net_stream=nowhere", place=place)
    code, report, text = doctor(setting)
    # a malformed tag makes the scenario an error: a pipeline would fail
    assert code == 1, text
    (found,) = problems(report)
    assert (found["check"], found["status"]) == ("tags", "error")
    assert "net_stream='nowhere' is not HOST:PORT" in found["message"]


def test_an_unmigrated_store(setting, places, tmp_path):
    places("doctor-db", [f"vlab/imx6q-02/{cls}" for cls in ALL_FOUR], NET)
    url = f"sqlite:///{tmp_path / 'old.db'}"
    open_store(url).close()
    engine = create_engine(url)
    downgrade(engine, "0004")
    engine.dispose()
    code, report, text = doctor(setting, db=url)
    assert code == 1, text
    (found,) = problems(report)
    assert (found["check"], found["status"]) == ("migrations", "error")
    assert f"schema at revision 0004, this rtlab's is {head()}" in found["message"]
    assert found["fix"].startswith(f"rtlab results migrate --db {url}")
    # the doctor changed nothing; the fix it names does the work
    code, report, _ = doctor(setting, db=url)
    assert code == 1
    subprocess.run([*RTLAB, "results", "migrate", "--db", url], cwd=paths.REPO_ROOT,
                   check=True, capture_output=True)
    code, report, text = doctor(setting, db=url)
    assert (code, problems(report)) == (0, []), text


def test_a_board_type_with_no_limits(setting, places):
    places("doctor-lim", [f"vlab/imx6q-02/{cls}" for cls in ALL_FOUR], NET)
    code, report, text = doctor(setting, thresholds=paths.REPO_ROOT / "thresholds.yaml")
    assert code == 1, text
    (found,) = problems(report)
    assert (found["check"], found["subject"]) == ("thresholds", f"board={BOARD}")
    assert "has no limits for this board type" in found["message"]
    assert f"add boards: {BOARD}:" in found["fix"]
