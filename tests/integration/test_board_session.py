"""A virtual board through the whole path, via the coordinator and exporter: flash with
bmaptool through the SD mux, power on through the PDU, log in on the serial console, run
cyclictest under load, and judge it; and a board that cannot boot. (A person's
labgrid-client session is test_manual_session's.)"""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from sdcard import copy_image, replace_boot_file

from rtlab.store import open_store
from rtlab.store.query import history
from rtlab.util.paths import REPO_ROOT

RTLAB = [sys.executable, "-m", "rtlab.cli"]


def run_rtlab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*RTLAB, *args], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=900, check=False)


def only_case(junit: Path) -> ET.Element:
    cases = ET.parse(junit).getroot().findall(".//testcase")
    assert len(cases) == 1, [c.attrib for c in cases]
    return cases[0]


def properties(case: ET.Element) -> dict[str, str]:
    return {p.get("name"): p.get("value") for p in case.iter("property")}


# one case of the suite, where a test is about the path rather than the matrix
ONE_CASE = ("--scenarios", "cpu100", "--intervals", "1000", "--rt-tests", "none")


def test_latency_suite_passes_on_the_virtual_rt_imx6q(vlab, image, tmp_path):
    sd_image = image("imx6q", "rt")
    proc = run_rtlab("run", "--place", "imx6q-01", "--image", str(sd_image),
                     "--out", str(tmp_path), "--duration", "3", *ONE_CASE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    case = only_case(tmp_path / "junit-imx6q-01.xml")
    assert case.get("name") == "qemu-imx6q/rt/cpu100/1000us"
    assert case.find("failure") is None and case.find("error") is None
    props = properties(case)
    assert {f"cpu{n}_max_us" for n in range(4)} <= set(props), props
    assert all(int(props[f"cpu{n}_max_us"]) > 0 for n in range(4))
    assert float(props["cpu_utilisation"]) >= 0.8

    [record_file] = (tmp_path / "results").glob("*.json")
    record = json.loads(record_file.read_text())
    assert record["verdict"] == "pass"
    assert record["board"] == "qemu-imx6q" and record["flavour"] == "rt"
    # the kernel that ran is the one written to the card
    assert record["system"]["realtime"] is True
    assert record["system"]["preemption"] == "PREEMPT_RT"
    manifest = json.loads((sd_image.parent / "manifest.json").read_text())
    assert record["system"]["kernel_release"] == manifest["kernel"]["release"]
    assert [c["cpu"] for c in record["cpus"]] == [0, 1, 2, 3]
    assert all(c["samples"] > 0 for c in record["cpus"])
    # the JUnit case names its record, and the run's records carry one run id
    assert Path(props["result_record"]) == record_file
    assert record["run_id"].startswith("run:imx6q-01:")

    # into the results store (records and JUnit of the run folder): one case, and
    # ingesting the same folder again adds nothing
    db = f"sqlite:///{tmp_path / 'results.db'}"
    first = run_rtlab("results", "ingest", str(tmp_path), "--db", db)
    again = run_rtlab("results", "ingest", str(tmp_path), "--db", db)
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    store = open_store(db)
    try:
        with store.session() as session:
            [stored] = history(session, board="qemu-imx6q")
    finally:
        store.close()
    assert stored.run_key == record["run_id"] and stored.verdict == "pass"
    assert stored.worst("max_us") == max(c["max_us"] for c in record["cpus"])


def broken_copy(sd_image: Path, dest: Path) -> Path:
    """The image with its kernel overwritten by garbage: it boots nothing, like a board
    with a bad kernel build."""
    broken = copy_image(sd_image, dest)
    replace_boot_file(broken, "zImage", os.urandom(256 * 1024))
    return broken


def short_boot_env(tmp_path: Path) -> Path:
    """env/virtual.yaml with a short login timeout and two boot attempts, so the test
    waits less for a board that will never boot."""
    yaml = YAML(typ="rt")
    data = yaml.load((REPO_ROOT / "env" / "virtual.yaml").read_text())
    data["targets"]["main"]["drivers"]["ShellDriver"]["login_timeout"] = 30
    data["targets"]["main"]["drivers"]["RTLabStrategy"]["boot_attempts"] = 2
    env = tmp_path / "virtual-short.yaml"
    with env.open("w") as out:
        yaml.dump(data, out)
    return env


@pytest.fixture(scope="module")
def broken_board_run(vlab, image, tmp_path_factory):
    """One run of the suite on an image that cannot boot, shared by the tests below."""
    tmp_path = tmp_path_factory.mktemp("broken")
    broken = broken_copy(image("imx6q", "rt"), tmp_path / "broken")
    proc = run_rtlab("run", "--place", "imx6q-01", "--image", str(broken),
                     "--env", str(short_boot_env(tmp_path)), "--out", str(tmp_path / "out"),
                     "--duration", "3", *ONE_CASE)
    return proc, tmp_path / "out"


def test_board_that_cannot_boot_is_an_error(broken_board_run):
    proc, out = broken_board_run
    assert proc.returncode != 0

    case = only_case(out / "junit-imx6q-01.xml")
    assert case.find("failure") is None, "an infrastructure fault must never be a fail"
    error = case.find("error")
    assert error is not None
    # the rack's bootloader printed, the kernel never did: each of the strategy's boot
    # attempts (a power cycle each) waited for the login prompt
    assert "no login prompt after 30 s (last console line: 'rtlab-vboot:" in error.get(
        "message", "")
    assert "(boot attempt 2 of 2)" in error.get("message", "")

    [record_file] = (out / "results").glob("*.json")
    record = json.loads(record_file.read_text())
    assert record["verdict"] == "error"
    assert record["message"].startswith("no login prompt after 30 s")
    assert [a["ok"] for a in record["infrastructure"]["attempts"]
            if a["step"] == "boot"] == [False, False]
    # what was to run is known although the board never answered
    assert record["name"] == "qemu-imx6q/rt/cpu100/1000us"
    assert record["place"] == "imx6q-01"
    assert record["loads"] == {"cpu": {"percent": 100, "min_busy_fraction": 0.3}}


def test_boot_failure_carries_the_console_log(broken_board_run):
    _, out = broken_board_run
    system_out = only_case(out / "junit-imx6q-01.xml").findtext("system-out") or ""
    assert "console log" in system_out and "rtlab-vboot: imx6q power on" in system_out
