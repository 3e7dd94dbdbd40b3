"""`rtlab run` stops the on-board suite with SIGINT; the suite must stop even when its
launcher ignored SIGINT (a background job of a non-interactive shell, as a CI script's
`cmd &` starts it), or a cancelled case runs on and passes."""

import signal
import subprocess
import sys
import time

SLOW_CASE = """
import pathlib, time

import pytest


@pytest.mark.rtlab_kind("cyclictest")
def test_slow(tmp_path_factory):
    pathlib.Path({started!r}).write_text("started")
    time.sleep(60)
"""


def test_the_suite_stops_on_sigint_even_when_its_launcher_ignored_it(tmp_path):
    started = tmp_path / "started"
    case = tmp_path / "test_slow.py"
    case.write_text(SLOW_CASE.format(started=str(started)), encoding="utf-8")
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(case), "-q", "-p", "no:cacheprovider",
         "-p", "rtlab.pytestplugin.hooks", "--rt-results", str(tmp_path / "results")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        # what `cmd &` in a shell without job control does to its job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert time.monotonic() < deadline and child.poll() is None, child.stdout.read()
            time.sleep(0.1)
        child.send_signal(signal.SIGINT)
        output, _ = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    # pytest's exit status for an interrupted session, not a pass after the sleep
    assert child.returncode == 2, output
    assert "KeyboardInterrupt" in output
