"""A virtual board through the whole path, via the coordinator and exporter: flash with
bmaptool through the SD mux, power on through the PDU, log in on the serial console, run
cyclictest under load, and judge it. (Boards that cannot boot are faults/test_fault_boot*'s;
a person's labgrid-client session is test_manual_session's.)"""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

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


# in make test FULL=1: the suite matrix and the pipeline pass the same suite on the same
# board; make test's minutes went to the bisection (tests/integration/test_bisect_rack.py)
@pytest.mark.full
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
