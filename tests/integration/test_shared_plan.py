"""Two places of one board type on one plan (`rtlab run --board qemu-imx6q --boards 2`):
they share the cases, each measured once, and when one board fails mid-run (a kernel
panic injected into its second window) it leaves the rest to the other; nothing is lost,
and the report over the run names which place measured each case."""

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rtlab.lab.health import ERRORS_TAG_KEY, TAG_KEY
from rtlab.measure.window import MARK
from rtlab.util.paths import REPO_ROOT
from rtlab.vlab import control

pytestmark = pytest.mark.vlab

CLIENT = str(Path(sys.executable).parent / "labgrid-client")
CASES = ["idle/1000us", "cpu25/1000us", "cpu50/1000us", "cpu75/1000us", "cpu100/1000us",
         "hackbench/1000us"]
FAILING = "imx6q-02"


def records_of(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


@pytest.fixture
def places_restored(vlab):
    yield
    control.clear_faults(vlab, FAILING)
    for place in ("imx6q-01", FAILING):
        subprocess.run([CLIENT, "-x", vlab.coordinator_address, "-p", place, "set-tags",
                        f"{TAG_KEY}=", f"{ERRORS_TAG_KEY}="], capture_output=True, check=True)


@pytest.fixture
def shared_run(vlab, image, tmp_path, places_restored):
    out = tmp_path / "out"
    runner = subprocess.Popen(
        [sys.executable, "-m", "rtlab.cli", "run", "--board", "qemu-imx6q", "--boards", "2",
         "--image", str(image("imx6q", "rt")), "--out", str(out), "--duration", "10",
         "--cases", ",".join(CASES)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # once the failing place has measured a case, its next window panics
        deadline = time.monotonic() + 600
        while not any(r.get("place") == FAILING for r in records_of(out / "results")):
            assert runner.poll() is None, runner.communicate()[0][-3000:]
            assert time.monotonic() < deadline, f"{FAILING} measured nothing in 10 min"
            time.sleep(1)
        control.inject_fault(vlab, FAILING, "panic", on_console=f"{MARK}started", after_s=3)
        output, _ = runner.communicate(timeout=900)
    finally:
        if runner.poll() is None:
            runner.kill()
    return runner.returncode, output, out


def test_two_places_share_the_cases_and_a_failing_one_leaves_the_rest(shared_run, tmp_path):
    code, output, out = shared_run
    records = records_of(out / "results")
    names = [r["name"] for r in records]
    # every case measured exactly once, none lost
    assert sorted(names) == sorted(f"qemu-imx6q/rt/{case}" for case in CASES), output[-3000:]
    by_place = {place: [r for r in records if r["place"] == place]
                for place in ("imx6q-01", FAILING)}
    # both places measured; the failing one passed before its panic, then left
    assert any(r["verdict"] == "pass" for r in by_place[FAILING]), by_place
    [panicked] = [r for r in records if r["verdict"] == "error"]
    assert panicked["place"] == FAILING
    assert panicked["message"].startswith("kernel panic during the test"), panicked
    assert all(r["verdict"] == "pass" for r in by_place["imx6q-01"]), by_place["imx6q-01"]
    # the cases after the panic went to the other place
    assert max(r["started"] for r in by_place["imx6q-01"]) > panicked["started"]
    assert code != 0, "an infrastructure error is no pass"
    # the JUnit of each place holds its own cases, together every case once
    junit_cases = [c.get("name") for junit in sorted(out.glob("junit-*.xml"))
                   for c in ET.parse(junit).iter("testcase")]
    assert sorted(junit_cases) == sorted(names)
    # into one store and one report, which names the place of each case
    db = f"sqlite:///{tmp_path / 'results.db'}"
    for args in (["results", "ingest", str(out), "--db", db],
                 ["report", "--db", db, "--out", str(tmp_path / "report")]):
        done = subprocess.run([sys.executable, "-m", "rtlab.cli", *args], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode in (0, 1), done.stderr[-2000:]
    page = (tmp_path / "report" / "report.html").read_text()
    assert "on imx6q-01" in page and f"on {FAILING}" in page
    for case in CASES:
        assert page.count(f"<code>qemu-imx6q/rt/{case}</code></td>") == 1, case
