"""A CI job cancelled mid-measurement (SIGTERM on `rtlab run`): the board is powered off,
the place released, the JUnit complete and the interrupted case recorded as an error."""

import json
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from conftest import PLACE, assert_cleaned_up
from rtlab.util.paths import REPO_ROOT


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


# in make test FULL=1: tests/unit/test_suite_interrupt.py interrupts the suite's own process;
# make test's minutes went to the bisection (tests/integration/test_bisect_rack.py)
@pytest.mark.full
def test_sigterm_mid_measurement_cleans_up_and_records(vlab, image, tmp_path, monkeypatch):
    monkeypatch.setenv("RTLAB_HEALTH_DIR", str(tmp_path / "health"))
    out = tmp_path / "out"
    runner = subprocess.Popen(
        [sys.executable, "-m", "rtlab.cli", "run", "--place", PLACE,
         "--image", str(image("imx6q", "rt")), "--out", str(out), "--duration", "120",
         "--scenarios", "cpu100", "--intervals", "1000", "--rt-tests", "none"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # the window has opened once the host prints the measurement's progress
        console = out / "console" / PLACE
        wait_for(lambda: any("cyclictest" in p.read_text(errors="replace")
                             for p in console.glob("console_*")), 300, "the measurement")
        time.sleep(10)
        runner.send_signal(signal.SIGTERM)
        output, _ = runner.communicate(timeout=180)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode != 0, output[-3000:]

    [record_file] = (out / "results").glob("*.json")
    record = json.loads(record_file.read_text())
    assert record["verdict"] == "error"
    assert record["message"].startswith("interrupted before the case finished")
    assert record["name"] == "qemu-imx6q/rt/cpu100/1000us"
    # the report is whole (and holds no case: none finished)
    ET.parse(out / f"junit-{PLACE}.xml")
    assert_cleaned_up(vlab, sdmux="dut")
