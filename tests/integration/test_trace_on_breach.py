"""A breach's trace on the virtual rack: a case with a deliberately low limit and
``trace: true`` fails with the kernel's trace beside its record, attached to its JUnit case,
read into the events that name the CPU where cyclictest's thread woke late; the same case
on a kernel locked down (no tracefs) runs and records that no trace was possible."""

import gzip
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from rtlab.measure.trace import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES
from rtlab.util.paths import REPO_ROOT
from rtlab.vlab import control

# in make test FULL=1: the trace's capture, parsing and choice are unit-tested
# (tests/unit/test_trace.py); make test's minutes went to the bisection
# (tests/integration/test_bisect_rack.py)
pytestmark = [pytest.mark.vlab, pytest.mark.full]
PLACE = "imx6q-01"
CLIENT = str(Path(sys.executable).parent / "labgrid-client")
# far below what an emulated board wakes in (milliseconds): the first wake-ups break
LIMIT_US = 50


def low_limit_with_trace(tmp_path: Path) -> Path:
    """The repository's thresholds, with the virtual i.MX6Q's idle RT case at LIMIT_US and
    ``trace: true`` (round-trip: the rest of the file as it is)."""
    yaml = YAML(typ="rt")
    data = yaml.load((REPO_ROOT / "thresholds.yaml").read_text())
    rt = data["boards"]["qemu-imx6q"]["flavours"]["rt"]
    rt.setdefault("scenarios", {})["idle"] = {
        "max_us": LIMIT_US, "trace": True,
        "reason": "deliberately low: the test of the trace on breach"}
    path = tmp_path / "thresholds.yaml"
    with path.open("w") as out:
        yaml.dump(data, out)
    return path


# what the board's shell answers labgrid with: a marker and exit code, the prompt and the
# command typed at it (with the terminal query busybox's line editing sends), a marker
_SHELL_LINE = re.compile(r"^(?:[A-Z]{10}(?: \d+)?|root@rtlab:\S* (?:\x1b\[6n)?.*)$")


def assert_quiet_window(out: Path) -> None:
    [log] = (out / "console").rglob("console_*")
    text = log.read_bytes().decode(errors="replace").replace("\r", "")
    start = text.index("rtlab-evidence:started\n") + len("rtlab-evidence:started\n")
    between = text[start:text.index("sh /tmp/rtlab-window.sh end", start)]
    lines = [line for line in between.split("\n") if line.strip()]
    assert lines and all(_SHELL_LINE.match(line) for line in lines), lines


def run_case(image: Path, thresholds: Path, out: Path) -> tuple[subprocess.CompletedProcess,
                                                                 dict, ET.Element]:
    proc = subprocess.run(
        [sys.executable, "-m", "rtlab.cli", "run", "--place", PLACE, "--image", str(image),
         "--out", str(out), "--duration", "10", "--cases", "idle/1000us",
         "--thresholds", str(thresholds)],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=600, check=False,
        env={**os.environ})
    [record_path] = (out / "results").glob("*.json")
    junit = out / f"junit-{PLACE}.xml"
    [case] = ET.parse(junit).getroot().findall(".//testcase")
    return proc, json.loads(record_path.read_text()), case


def test_a_breach_keeps_its_trace_and_a_locked_down_kernel_says_why_it_has_none(
        vlab, image, tmp_path):
    thresholds = low_limit_with_trace(tmp_path)
    sd_image = image("imx6q", "rt")

    proc, record, case = run_case(sd_image, thresholds, tmp_path / "traced")
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    assert record["verdict"] == "fail", record["message"]
    assert f"max_us {LIMIT_US} µs" in record["message"]
    # cyclictest ended every thread at the breach: a CPU that had not woken by then is
    # no failure of its own
    assert "no wake-up" not in record["message"], record["message"]
    trace = record["trace"]
    assert trace["requested"] and trace["available"], trace
    assert trace["why"].startswith("trace: true (") and "thresholds.yaml:" in trace["why"]
    breach = trace["breach"]
    # cyclictest's mark is written by the thread that woke late: its CPU is the breach's
    cpu = breach["cpu"]
    assert breach["marked"] and cpu in range(4), breach
    assert breach["comm"] == "cyclictest" and breach["limit_us"] == LIMIT_US
    assert breach["latency_us"] > LIMIT_US
    assert f"on CPU{cpu} woke {breach['latency_us']} µs late" in breach["summary"]
    assert any(f"[{cpu:03d}]" in line and "hit latency threshold" in line
               for line in breach["excerpt"]), breach["excerpt"]
    assert all(f"[{cpu:03d}]" in line for line in breach["excerpt"]
               if f"-{breach['thread']} " in line)
    # the whole trace beside the record: bounded, compressed, the breach at its end
    path = tmp_path / "traced" / "results" / trace["file"]
    # named as the job names it: within its folder (the repository, where `rtlab run`
    # runs pytest), else absolute, as this test's folder is
    named = path.resolve()
    named = named.relative_to(REPO_ROOT) if named.is_relative_to(REPO_ROOT) else named
    assert trace["path"] == named.as_posix()
    data = path.read_bytes()
    assert len(data) == trace["bytes"] <= DEFAULT_MAX_BYTES
    text = gzip.decompress(data).decode()
    assert len(text.splitlines()) == trace["lines"] <= DEFAULT_MAX_LINES
    assert f"hit latency threshold ({breach['latency_us']} > {LIMIT_US})" in text
    # GitLab's attachment, and the breach in the failure's text
    assert f"[[ATTACHMENT|{trace['path']}]]" in (case.findtext("system-out") or "")
    failure = case.find("failure")
    assert failure is not None and f"trace: {breach['summary']}" in (failure.text or "")
    # the console stayed quiet while cyclictest measured: from the window's start to the
    # command that ends it, the board printed nothing but its shell's answers to labgrid
    # (the start command's exit marker, the prompt, labgrid's own echo before the next
    # command): no kernel message, no trace
    assert_quiet_window(tmp_path / "traced")

    control.inject_fault(vlab, PLACE, "trace-lockdown", times=0)
    try:
        proc, record, case = run_case(sd_image, thresholds, tmp_path / "locked")
    finally:
        control.clear_faults(vlab, PLACE)
        subprocess.run([CLIENT, "-x", vlab.coordinator_address, "-p", PLACE, "release"],
                       capture_output=True, check=False)
    # the case ran and was judged by its figures: a fail, never an error
    assert record["verdict"] == "fail", (record["message"], (proc.stdout + proc.stderr)[-3000:])
    assert "lockdown=confidentiality" in record["system"]["cmdline"].split()
    trace = record["trace"]
    assert trace["requested"] and not trace["available"]
    assert "no tracefs" in trace["reason"], trace["reason"]
    assert "Lockdown: swapper: use of tracefs is restricted" in trace["reason"]
    assert "breach" not in trace and "file" not in trace
    assert "--breaktrace" not in " ".join(record["command"])
    assert "[[ATTACHMENT|" not in (case.findtext("system-out") or "")
    assert list((tmp_path / "locked" / "results").glob("*.trace.gz")) == []
