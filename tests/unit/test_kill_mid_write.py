"""A runner killed while it writes leaves no corrupt file: result records and JUnit are
either complete or absent (or the previous complete version)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from rtlab.artifacts.record import read_record

# a report big enough that writing it takes a while, so the kill lands during the write
CASES = 3000
OUTPUT_PER_CASE = 4096


def kill_when_file_appears(proc: subprocess.Popen, folder: Path, timeout_s: float) -> str:
    """SIGKILL the process as soon as a new file shows up in ``folder``; the name seen."""
    before = set(os.listdir(folder))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        new = set(os.listdir(folder)) - before
        if new:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return sorted(new)[0]
        if proc.poll() is not None:
            raise AssertionError(f"the process ended (exit {proc.returncode}) before writing")
        time.sleep(0.0005)
    proc.kill()
    raise AssertionError(f"no file appeared in {folder} within {timeout_s} s")


def test_junit_killed_mid_write_keeps_the_previous_report(tmp_path):
    tests = tmp_path / "suite"
    tests.mkdir()
    (tests / "test_many.py").write_text(textwrap.dedent(f"""
        import pytest

        @pytest.mark.parametrize("n", range({CASES}))
        def test_case(n):
            print("x" * {OUTPUT_PER_CASE})
    """))
    reports = tmp_path / "reports"
    reports.mkdir()
    junit = reports / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "rtlab.pytestplugin.junit",
           "-p", "no:cacheprovider", "-o", "junit_logging=system-out",
           f"--junitxml={junit}", "--rootdir", str(tests), str(tests / "test_many.py")]

    subprocess.run(cmd, capture_output=True, check=True, cwd=tmp_path, timeout=300)
    complete = junit.read_bytes()
    assert len(ET.fromstring(complete).findall(".//testcase")) == CASES

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=tmp_path)
    seen = kill_when_file_appears(proc, reports, timeout_s=300)
    # the writer was killed while its file was new: the report in place is the old one,
    # whole; the partial write is a hidden temporary file nothing reads
    assert seen.startswith(".junit.xml.") and seen.endswith(".tmp"), seen
    assert junit.read_bytes() == complete
    visible = [name for name in os.listdir(reports) if not name.startswith(".")]
    assert visible == ["junit.xml"]


def test_result_records_killed_mid_write_are_whole_or_absent(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    writer = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from rtlab.artifacts.record import write_record

        folder = Path({str(results)!r})
        for n in range(100000):
            write_record(folder, {{"kind": "cyclictest", "case": f"case-{{n}}",
                                  "name": f"b/f/s/{{n}}",
                                  "started": f"2026-11-23T10:00:{{n:06d}}",
                                  "finished": None, "verdict": "pass", "message": "",
                                  "padding": "y" * 2_000_000}})
    """)
    proc = subprocess.Popen([sys.executable, "-c", writer], cwd=Path(__file__).parents[2])
    time.sleep(1.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    records = sorted(results.glob("*.json"))
    assert records, "the writer wrote nothing before the kill"
    for path in records:
        record = read_record(path)
        assert len(record["padding"]) == 2_000_000
    leftovers = [p.name for p in results.iterdir() if p.name.startswith(".")]
    assert all(name.endswith(".tmp") for name in leftovers)
    assert json.loads(records[-1].read_text())["verdict"] == "pass"
