"""rtlab.measure.window: one measurement window against a fake board shell that records what it is
sent and answers as a 4-CPU Linux 6.1 board would, and the window script run by a real sh.

The loads are proven by the CPUs' utilisation from the board's two /proc/stat readings (and
each load's own evidence), never by the loads' own CPU time: on an emulated board that runs
on another clock than /proc/stat and the uptime."""

import base64
import contextlib
import ctypes
import gzip
import hashlib
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import attr
import pytest
from proc_samples import ICMP_HEADER_6_1, STAT_AFTER, STAT_BEFORE, TCP_HEADER, TRAFFIC

from rtlab.measure import window as measure
from rtlab.measure.conditions import CaseConditions, MeasuringThreads, Requirements, RunNotValid
from rtlab.measure.loads import (
    PROGRESS_LINE,
    CpuLoad,
    CpuTimes,
    DiskLoad,
    Evidence,
    HackbenchLoad,
    LoadNotEffective,
    MemoryLoad,
    NetworkLoad,
    tally,
)
from rtlab.measure.window import (
    CONDITIONS_OUT,
    LOAD_MARGIN_S,
    LOAD_OVERRUN_S,
    LOADAVG_MIN_UTILISATION,
    LOADAVG_MIN_WINDOW_S,
    MARK,
    PROGRAM_OUT,
    PROGRAM_OVERRUN_S,
    PROGRAM_RC,
    THERMAL,
    WINDOW_SCRIPT,
    HostStream,
    ProgramFailed,
    StartedLoad,
    Window,
    _verify,
    evidence_command,
    parse_evidence,
    parse_probes,
    run_window,
    window_script,
)

# the ICMP and TCP counters of a 6.1 board before and after the network load (as in
# test_loads.py): 41234 echo requests, 41230 replies, 38468 TCP segments in
SNMP_START = (f"{ICMP_HEADER_6_1}\n"
              "Icmp: 7 0 0 3 0 0 0 0 0 4 0 0 0 0 8 0 4 0 0 0 0 4 0 0 0 0 0\n"
              f"{TCP_HEADER}\nTcp: 1 200 120000 -1 12 3 0 1 2 1402 1380 0 0 5 0")
SNMP_END = (f"{ICMP_HEADER_6_1}\n"
            "Icmp: 41237 0 0 3 0 0 0 0 0 41234 0 0 0 0 41242 0 4 0 0 0 0 41238 0 0 0 0 0\n"
            f"{TCP_HEADER}\nTcp: 1 200 120000 -1 12 4 0 1 3 39870 21012 3 0 5 0")
NETWORK_FACTS = {"ping_bytes": 1400, "echo_requests": 41234, "echo_replies": 41230,
                 "tcp_segments_in": 38468}

# CPUs 0 and 1 busy 490 of 500 ticks each, 2 and 3 nearly idle: 992 of 1992 ticks in all
ALL_CPUS = (685 + 305 + 2) / (992 + 1000)
CPUS_0_1 = 980 / 1000

# the same board read 1 s apart with every CPU busy 80 of its 100 ticks: 400 ticks in all
STAT_BUSY_BEFORE = """\
cpu  4000 0 1600 32000 400 0 0 0 0 0
cpu0 1000 0 400 8000 100 0 0 0 0 0
cpu1 1000 0 400 8000 100 0 0 0 0 0
cpu2 1000 0 400 8000 100 0 0 0 0 0
cpu3 1000 0 400 8000 100 0 0 0 0 0
ctxt 401236
"""
STAT_BUSY_AFTER = """\
cpu  4240 0 1680 32080 400 0 0 0 0 0
cpu0 1060 0 420 8020 100 0 0 0 0 0
cpu1 1060 0 420 8020 100 0 0 0 0 0
cpu2 1060 0 420 8020 100 0 0 0 0 0
cpu3 1060 0 420 8020 100 0 0 0 0 0
ctxt 412001
"""
BUSY = {"stat_before": STAT_BUSY_BEFORE, "stat_after": STAT_BUSY_AFTER}

# ... and nearly idle instead: 4 of its 400 ticks busy (user, system and softirq), 1 %
STAT_IDLE_AFTER = """\
cpu  4002 0 1601 32396 400 0 1 0 0 0
cpu0 1002 0 400 8098 100 0 0 0 0 0
cpu1 1000 0 401 8099 100 0 0 0 0 0
cpu2 1000 0 400 8099 100 0 1 0 0 0
cpu3 1000 0 400 8100 100 0 0 0 0 0
ctxt 402001
"""
IDLE = {"stat_before": STAT_BUSY_BEFORE, "stat_after": STAT_IDLE_AFTER}

# a board that also runs virtual machines, read 1 s apart: every CPU busy 40 of its 100
# ticks (user 30, nice 10), of which 20 ran a guest and 10 a niced guest; the kernel counts
# guest time in user and nice already, so 40 % (counted twice it would be 70 of 130 ticks)
STAT_GUEST_BEFORE = """\
cpu  400 200 0 3600 0 0 0 0 240 160
cpu0 100 50 0 900 0 0 0 0 60 40
cpu1 100 50 0 900 0 0 0 0 60 40
cpu2 100 50 0 900 0 0 0 0 60 40
cpu3 100 50 0 900 0 0 0 0 60 40
ctxt 77001
"""
STAT_GUEST_AFTER = """\
cpu  520 240 0 3840 0 0 0 0 320 200
cpu0 130 60 0 960 0 0 0 0 80 50
cpu1 130 60 0 960 0 0 0 0 80 50
cpu2 130 60 0 960 0 0 0 0 80 50
cpu3 130 60 0 960 0 0 0 0 80 50
ctxt 79312
"""
GUEST = {"stat_before": STAT_GUEST_BEFORE, "stat_after": STAT_GUEST_AFTER}

PROGRAM = ["cyclictest", "-q", "-m", "-p", "90", "-i", "1000", "-D", "5s"]
CYCLICTEST_OUT = ["# /dev/cpu_dma_latency set to 0us"]
LOADAVG = "3.91 1.32 0.48 6/98 1234"
LOADAVG_BEFORE = "3.02 1.10 0.41 5/97 1201"
START, END, STOP = (f"sh {WINDOW_SCRIPT} {action}" for action in ("start", "end", "stop"))
TAIL = f"tail -n 60 {PROGRAM_OUT}"
STRESS_LOG = "stress-ng: info:  [812] dispatching hogs: 4 cpu"


class ExecutionError(Exception):
    """What labgrid's run_check raises on a non-zero exit status."""


def sections(script: str) -> dict[str, list[str]]:
    """The actions of a window script (its case branches), as lists of lines."""
    result: dict[str, list[str]] = {}
    name = None
    for line in script.splitlines():
        if re.fullmatch(r"(start|loads|begin|end|stop)\)", line):
            name = line[:-1]
            result[name] = []
        elif line == ";;":
            name = None
        elif name is not None:
            result[name].append(line)
    return result


# a mark the window script prints before a part of its output, as the script spells it
# (echo rtlab-evidence:stat, echo "rtlab-evidence:0 probe-end", rtlab-evidence:rc=$(...))
SCRIPT_MARK = re.compile(rf"{re.escape(MARK)}(rc=|\d+ [a-z-]+|[a-z-]+)")


def marks(lines: list[str]) -> set[str]:
    """The marks among the board's output lines, spelled as :data:`SCRIPT_MARK` finds them."""
    return {"rc=" if line.startswith(f"{MARK}rc=") else line.removeprefix(MARK)
            for line in lines if line.startswith(MARK)}


@attr.define
class BoardLoad:
    """What the fake board shows of one load."""

    alive: bool = True
    log: str = ""
    probe_before: str = ""
    probe: str = ""


def take_upload(staged: dict[str, str], cmd: str) -> tuple[str, bytes] | None:
    """One of rtlab.measure.upload's commands, done as the board's shell would: the chunks
    gathered; at the last, the file decoded and its SHA-256 checked (remote path, data)."""
    chunk, mode, staging = re.match(r"printf %s (\S*) (>>?) (\S+)", cmd).groups()
    staged[staging] = (staged.get(staging, "") if mode == ">>" else "") + chunk
    if "base64 -d" not in cmd:
        return None
    data = gzip.decompress(base64.b64decode(staged.pop(staging)))
    assert hashlib.sha256(data).hexdigest() == re.search(r'"\$1" = ([0-9a-f]{64})',
                                                         cmd).group(1)
    return staging.removesuffix(".b64"), data


@attr.define
class FakeBoard:
    """The board's shell: records every command and answers those of run_window as the
    script it was given asks (and only that: every mark the script prints, no other)."""

    loads: list[BoardLoad] = attr.Factory(list)
    stat_before: str = STAT_BEFORE
    stat_after: str = STAT_AFTER
    rc: str = "0"
    loadavg: str = LOADAVG
    loadavg_before: str = LOADAVG_BEFORE
    thermal_before: tuple[str, ...] = ("41250", "40800")
    thermal_after: tuple[str, ...] = ("47900", "46120")
    start_output: list[str] | None = None
    conditions: list[str] = attr.Factory(list)
    """What the window's checks wrote (rtlab.measure.conditions), as ``end`` prints it."""
    end_error: Exception | None = None
    stop_error: Exception | None = None
    commands: list[str] = attr.Factory(list)
    uploads: dict[str, str] = attr.Factory(dict)

    staged: dict[str, str] = attr.Factory(dict)

    def run_check(self, cmd, *, timeout=30.0, codec="utf-8", decodeerrors="strict"):
        if cmd.startswith("printf %s "):
            done = take_upload(self.staged, cmd)
            if done is not None:
                self.commands.append(f"upload {done[0]}")
                self.uploads[done[0]] = done[1].decode("utf-8")
            return []
        out, _, code = self._answer(cmd)
        if code != 0:
            raise ExecutionError(f"{cmd!r} exited {code}")
        return out

    def run(self, cmd, *, timeout=30.0, codec="utf-8", decodeerrors="strict"):
        return self._answer(cmd)

    def script(self) -> dict[str, list[str]]:
        return sections(self.uploads[WINDOW_SCRIPT])

    def _answer(self, cmd: str) -> tuple[list[str], list[str], int]:
        self.commands.append(cmd)
        if cmd == START:
            if self.start_output is not None:
                return self.start_output, [], 0
            return self._checked("start", [
                *self._probes("start", "probe_before"), f"{MARK}loadavg-before",
                self.loadavg_before, f"{MARK}thermal",
                *self.thermal_before, f"{MARK}stat", *self.stat_before.splitlines(),
                f"{MARK}started"]), [], 0
        if cmd == END:
            if self.end_error is not None:
                raise self.end_error
            return self._checked("end", self._end()), [], 0
        if cmd == STOP and self.stop_error is not None:
            raise self.stop_error
        if cmd in (STOP, TAIL):
            return list(CYCLICTEST_OUT) if cmd == TAIL else [], [], 0
        raise AssertionError(f"the board was not expected to get {cmd!r}")

    def _checked(self, action: str, lines: list[str]) -> list[str]:
        """``lines``, after checking that the real script's action would print them."""
        script = self.script()[action]
        # the checks' marks are written to a file in the background by start and read
        # back by end (cat): neither action prints them itself
        asked = {mark for mark in SCRIPT_MARK.findall("\n".join(script))
                 if not mark.startswith("conditions-")}
        printed = {mark for mark in marks(lines) if not mark.startswith("conditions-")}
        # a load is either alive or gone
        either = {f"{index} {state}" for index in range(len(self.loads))
                  for state in ("alive", "gone")}
        assert printed <= asked and asked - printed <= either, (asked, lines)
        assert script.count("cat /proc/stat") == 1 and script.count(THERMAL) == 1
        assert script.count("cat /proc/loadavg") == 1
        return lines

    def _probes(self, action: str, field: str) -> list[str]:
        script = "\n".join(self.script()[action])
        lines = []
        for index, load in enumerate(self.loads):
            tag = f"{MARK}{index}"
            if f'echo "{tag} probe"; ' in script:
                assert f'; echo "{tag} probe-end"' in script
                lines += [f"{tag} probe", *getattr(load, field).splitlines(),
                          f"{tag} probe-end"]
        return lines

    def _end(self) -> list[str]:
        script = "\n".join(self.script()["end"])
        assert "cat /proc/loadavg" in script
        if self.conditions:
            assert f"cat {CONDITIONS_OUT}" in script
        lines = [f"{MARK}rc={self.rc}", *self.conditions, f"{MARK}stat",
                 *self.stat_after.splitlines(), f"{MARK}stat-end"]
        for index, load in enumerate(self.loads):
            tag = f"{MARK}{index}"
            # the board only answers what the script asks
            assert f"kill -0 $(cat /tmp/rtlab-load-{index}.pid) 2>/dev/null" in script
            assert re.search(rf"tail -n 40 /tmp/rtlab-load-{index}-\w+\.log", script)
            assert re.search(rf"'{re.escape(PROGRESS_LINE)}' /tmp/rtlab-load-{index}-\w+\.log "
                             r"\| sort \| uniq -c", script)
            # as busybox's uniq -c prints it
            counted = [f"{n:7d} {line}" for line, n in sorted(tally(load.log).items())]
            lines += [f"{tag} alive" if load.alive else f"{tag} gone", f"{tag} log",
                      *load.log.splitlines(), f"{tag} tally", *counted, f"{tag} end"]
        return [*lines, *self._probes("end", "probe"), f"{MARK}loadavg", self.loadavg,
                f"{MARK}thermal", *self.thermal_after]


@pytest.fixture
def slept(monkeypatch):
    """Instant windows: what the host would have slept, in seconds."""
    waits: list[float] = []
    monkeypatch.setattr(measure.time, "sleep", waits.append)
    return waits


def window(board, parts, *, duration_s=5, cpus=4, **kwargs):
    progress: list[str] = []
    result = run_window(board, program=PROGRAM, parts=parts, cpus=cpus, duration_s=duration_s,
                        progress=progress.append, **kwargs)
    return result, progress


# ----------------------------------------------------------- run_window ----


@pytest.mark.parametrize("stat_text", [STAT_BEFORE, STAT_AFTER, STAT_BUSY_BEFORE,
                                       STAT_BUSY_AFTER, STAT_IDLE_AFTER, STAT_GUEST_BEFORE,
                                       STAT_GUEST_AFTER])
def test_the_fake_boards_proc_stat_is_consistent_like_the_kernels(stat_text):
    # the aggregate line is the sum of the per-CPU lines, as the kernel prints it
    rows = [line.split() for line in stat_text.splitlines() if line.startswith("cpu")]
    assert [row[0] for row in rows] == ["cpu", "cpu0", "cpu1", "cpu2", "cpu3"]
    assert all(len(row) == 11 for row in rows)
    assert [int(value) for value in rows[0][1:]] == [
        sum(int(row[column]) for row in rows[1:]) for column in range(1, 11)]


def test_healthy_window(slept):
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)])
    result, progress = window(board, [CpuLoad(50)])
    assert result == Window(
        exit_code=0, output=CYCLICTEST_OUT[0], utilisation=pytest.approx(ALL_CPUS),
        loadavg=LOADAVG, temperatures_mc=((41250, 40800), (47900, 46120)),
        # 992 of the 1992 ticks of four CPUs in 5 s were busy; 50 % asks for 25 %
        load_facts={"cpu_utilisation": 0.498, "loadavg": LOADAVG, "min_utilisation": 0.25,
                    "loads": {"cpu": {"percent": 50}}},
        # the load average as the window opened, beside the one it closed with
        loadavg_before=LOADAVG_BEFORE)
    # nothing is said on the console while the window runs, and only short commands
    assert slept == [5] and progress == []
    assert board.commands == [f"upload {WINDOW_SCRIPT}", START, END, STOP, TAIL]
    assert board.script()["start"] == [
        f"rm -f {PROGRAM_RC} {PROGRAM_RC}.tmp {PROGRAM_OUT}",
        "setsid sh -c 'exec stress-ng --cpu 4 --cpu-load 50 --timeout "
        f"{5 + LOAD_OVERRUN_S}s --metrics-brief' >/tmp/rtlab-load-0-cpu.log 2>&1 "
        "</dev/null & echo $! >/tmp/rtlab-load-0.pid",
        f"sleep {LOAD_MARGIN_S}",
        f"echo {MARK}loadavg-before", "cat /proc/loadavg",
        f"echo {MARK}thermal", THERMAL, f"echo {MARK}stat", "cat /proc/stat",
        f"({shlex.join(PROGRAM)}; echo $? >{PROGRAM_RC}.tmp; mv {PROGRAM_RC}.tmp {PROGRAM_RC}) "
        f">{PROGRAM_OUT} 2>&1 </dev/null &",
        f"echo {MARK}started"]
    # "kill -SIG -PGID": busybox takes "--" for a bad number, dash "-s SIG -PGID" for one
    assert board.script()["stop"] == [
        "for f in /tmp/rtlab-load-0.pid; do kill -TERM -$(cat $f) 2>/dev/null; done",
        "for f in /tmp/rtlab-load-0.pid; do p=$(cat $f); n=0; while kill -0 $p 2>/dev/null "
        "&& [ $n -lt 50 ]; do sleep 0.2; n=$((n+1)); done; kill -KILL -$p 2>/dev/null; done",
        "true"]


def test_window_without_loads_starts_and_stops_none(slept):
    board = FakeBoard(thermal_before=(), thermal_after=())
    result, _ = window(board, [])
    assert result.load_facts == {"cpu_utilisation": 0.498, "loadavg": LOADAVG,
                                 "min_utilisation": 0.0, "loads": {}}
    assert result.temperatures_mc == ((), ())
    assert board.commands == [f"upload {WINDOW_SCRIPT}", START, END, TAIL]
    script = board.script()
    # no margin to wait for either
    assert not any("setsid" in line or line.startswith("sleep") for line in script["start"])
    assert script["stop"] == ["true"]


def test_every_load_is_started_with_its_own_files_and_all_are_stopped(slept):
    parts = [CpuLoad(60), HackbenchLoad(2, 10, 100, 512), MemoryLoad(3, "10%"),
             DiskLoad("/data", 1024, 8)]
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG), BoardLoad(log="start\nrc=0\nstart"),
                             BoardLoad(log="stress-ng: info:  [1012] dispatching hogs: 3 vm"),
                             BoardLoad(log="wrote\nwrote")], **BUSY)
    result, _ = window(board, parts)
    files = [re.search(r" >(\S+) 2>&1 </dev/null & echo \$! >(\S+)$", line).groups()
             for line in board.script()["start"] if line.startswith("setsid")]
    assert files == [(f"/tmp/rtlab-load-{i}-{kind}.log", f"/tmp/rtlab-load-{i}.pid")
                     for i, kind in enumerate(["cpu", "hackbench", "memory", "disk"])]
    pidfiles = " ".join(pidfile for _, pidfile in files)
    assert all(line.startswith(f"for f in {pidfiles}; do ")
               for line in board.script()["stop"][:2])
    assert board.commands.count(STOP) == 1
    assert result.load_facts["loads"] == {
        "cpu": {"percent": 60}, "hackbench": {"started": 2, "completed": 1},
        "memory": {"workers": 3, "bytes": "10%"}, "disk": {"written_kib": 2 * 8 * 1024}}
    # the board is judged against the most demanding load: three memory workers on four
    # CPUs (37.5 %), not the CPU load's 30 %, hackbench's 25 % or the disk's nothing
    assert result.load_facts["cpu_utilisation"] == 0.8
    assert result.load_facts["min_utilisation"] == 0.375


def test_program_that_was_not_started_is_a_program_failure(slept):
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)],
                      start_output=["sh: can't fork: Resource temporarily unavailable"])
    with pytest.raises(ProgramFailed) as raised:
        window(board, [CpuLoad(50)])
    assert str(raised.value) == ("cyclictest was not started: "
                                 "[\"sh: can't fork: Resource temporarily unavailable\"]")
    # the loads that did start are stopped
    assert board.commands[-1] == STOP and slept == []


def test_program_that_never_finished_is_a_program_failure(slept):
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)], rc="none")
    with pytest.raises(ProgramFailed, match=re.escape(
            f"cyclictest did not finish within {PROGRAM_OVERRUN_S} s of its window: "
            "['rtlab-evidence:loadavg', ")):
        window(board, [CpuLoad(100)])
    # stopped, and its output not fetched
    assert board.commands[-1] == STOP and TAIL not in board.commands


def test_empty_rc_file_is_a_program_failure(slept):
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)], rc="")
    with pytest.raises(ProgramFailed):
        window(board, [CpuLoad(50)])


def test_program_exit_status_is_reported(slept):
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)], rc="255")
    result, _ = window(board, [CpuLoad(50)])
    assert result.exit_code == 255


def test_end_that_fails_still_stops_the_loads(slept):
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)], end_error=TimeoutError("no prompt"))
    with pytest.raises(TimeoutError):
        window(board, [CpuLoad(50)])
    assert board.commands[-2:] == [END, STOP]


def test_a_stop_that_fails_after_a_failed_end_leaves_the_first_error(slept, caplog):
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)], end_error=TimeoutError("no prompt"),
                      stop_error=OSError("console gone"))
    with pytest.raises(TimeoutError, match="no prompt"):
        window(board, [CpuLoad(50)])
    assert board.commands[-2:] == [END, STOP]
    assert "stopping the loads after a failed window failed too" in caplog.text


def test_a_stop_that_fails_after_a_good_window_is_reported(slept):
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)], stop_error=OSError("console gone"))
    with pytest.raises(OSError, match="console gone"):
        window(board, [CpuLoad(50)])


def test_load_gone_at_the_end_is_not_effective_and_still_stopped(slept):
    log = "stress-ng: info:  [812] dispatching hogs: 4 cpu\nstress-ng: error: [812] killed"
    board = FakeBoard(loads=[BoardLoad(alive=False, log=log)])
    with pytest.raises(LoadNotEffective) as raised:
        window(board, [CpuLoad(50)])
    assert str(raised.value) == ("load not effective: stress-ng --cpu was not running when the "
                                 f"measurement ended: {log!r}")
    assert board.commands.count(STOP) == 1


def test_utilisation_too_low_is_not_effective_and_still_stopped(slept):
    # the CPU load is alive, but the board's CPUs were 1 % busy, not the 50 % of 100 %
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)], **IDLE)
    with pytest.raises(LoadNotEffective) as raised:
        window(board, [CpuLoad(100)])
    assert str(raised.value) == ("load not effective: CPU utilisation 1.0% during the "
                                 "measurement, expected at least 50.0% for cpu")
    assert board.commands.count(STOP) == 1


def test_utilisation_too_low_names_every_load_and_the_most_demanding_minimum(slept):
    # hackbench's 25 %, not the CPU load's 5 % (the last) or the disk's nothing (the first)
    board = FakeBoard(loads=[BoardLoad(log="wrote"), BoardLoad(log="start"),
                             BoardLoad(log=STRESS_LOG)], **IDLE)
    with pytest.raises(LoadNotEffective) as raised:
        window(board, [DiskLoad("/data", 1024, 8), HackbenchLoad(2, 10, 100, 512),
                       CpuLoad(10)])
    assert str(raised.value) == ("load not effective: CPU utilisation 1.0% during the "
                                 "measurement, expected at least 25.0% for disk+hackbench+cpu")


def test_a_busy_board_proves_the_load(slept):
    # 80 % of the four CPUs' time: enough for a CPU load of 100 % (50 %)
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)], **BUSY)
    result, _ = window(board, [CpuLoad(100)])
    assert result.utilisation == pytest.approx(0.8)
    assert (result.load_facts["cpu_utilisation"], result.load_facts["min_utilisation"]) == (
        0.8, 0.5)


@pytest.mark.parametrize(("percent", "effective"), [(80, True), (81, False), (100, False)])
def test_guest_time_on_the_board_is_not_counted_twice(slept, percent, effective):
    # 40 % of the CPUs' time, guests included once: enough for 80 %, too little for more
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)], **GUEST)
    if effective:
        result, _ = window(board, [CpuLoad(percent)])
        assert result.utilisation == pytest.approx(0.4)
        assert result.load_facts["cpu_utilisation"] == 0.4
        return
    with pytest.raises(LoadNotEffective) as raised:
        window(board, [CpuLoad(percent)])
    assert str(raised.value).startswith("load not effective: CPU utilisation 40.0% during the "
                                        "measurement, expected at least ")


def test_load_cpus_restrict_the_utilisation_to_them(slept):
    # the same board output with CPUs 2 and 3 isolated for the measurement: CPUs 0 and 1
    # were nearly all busy, and the load is proven on them
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)])
    result, _ = window(board, [CpuLoad(100)], cpus=2, load_cpus=[0, 1])
    assert result.utilisation == pytest.approx(CPUS_0_1)
    assert result.load_facts["cpu_utilisation"] == 0.98
    assert result.load_facts["min_utilisation"] == 0.5
    assert "exec stress-ng --cpu 2 --cpu-load 100 " in board.script()["start"][1]


def test_load_cpus_that_were_idle_do_not_prove_the_load(slept):
    # the load ran on the wrong CPUs: the two it was given were idle
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)])
    with pytest.raises(LoadNotEffective) as raised:
        window(board, [CpuLoad(100)], cpus=2, load_cpus=[2, 3])
    assert str(raised.value) == ("load not effective: CPU utilisation 1.2% during the "
                                 "measurement, expected at least 50.0% for cpu")


def test_without_load_cpus_the_whole_board_is_judged(slept):
    # the same output judged on all four CPUs: 49.8 %, short of the 50 % of a 100 % load
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)])
    with pytest.raises(LoadNotEffective, match=r"^load not effective: CPU utilisation \d+\.\d% "
                                               r"during the measurement, expected at least "
                                               r"50.0% for cpu$"):
        window(board, [CpuLoad(100)], cpus=2)


def test_disk_window_needs_no_utilisation(slept):
    # waiting for the card is not CPU time: a nearly idle board, and the writes prove it
    board = FakeBoard(loads=[BoardLoad(log="wrote\nwrote")], **IDLE)
    result, _ = window(board, [DiskLoad("/data", 1024, 8)])
    assert result.load_facts == {"cpu_utilisation": 0.01, "loadavg": LOADAVG,
                                 "min_utilisation": 0.0,
                                 "loads": {"disk": {"written_kib": 2 * 8 * 1024}}}


def test_load_cpus_the_board_does_not_have_are_refused(slept):
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)])
    with pytest.raises(ValueError, match=r"^no cpu4 line in /proc/stat output$"):
        window(board, [CpuLoad(100)], load_cpus=[0, 4])
    assert board.commands[-1] == STOP


def test_long_window_reports_progress_and_checks_the_load_average(slept):
    # the utilisation is enough (80 %); the load average is not
    board = FakeBoard(loads=[BoardLoad(log=STRESS_LOG)], loadavg="0.42 0.30 0.12 2/98 1234",
                      **BUSY)
    with pytest.raises(LoadNotEffective) as raised:
        window(board, [CpuLoad(100)], duration_s=LOADAVG_MIN_WINDOW_S)
    assert str(raised.value) == ("load not effective: 1-minute load average 0.42 after 60 s "
                                 "under load")
    assert slept == [10] * 6
    assert f"--timeout {60 + LOAD_OVERRUN_S}s" in board.script()["start"][1]


def test_long_disk_window_needs_no_load_average(slept):
    board = FakeBoard(loads=[BoardLoad(log="wrote")], loadavg="0.12 0.30 0.12 1/98 1234",
                      **IDLE)
    result, _ = window(board, [DiskLoad("/data", 1024, 8)], duration_s=LOADAVG_MIN_WINDOW_S)
    assert result.load_facts["loadavg"] == "0.12 0.30 0.12 1/98 1234"


def test_progress_steps_of_a_long_window(slept):
    _, progress = window(FakeBoard(), [], duration_s=35)
    assert slept == [10, 10, 10, 5]
    assert progress == ["10/35 s", "20/35 s", "30/35 s", "35/35 s"]
    _, progress = window(FakeBoard(), [], duration_s=250)
    assert progress[0] == "25/250 s" and progress[-1] == "250/250 s" and len(progress) == 10


def test_network_load_without_traffic_sends_nothing(slept):
    board = FakeBoard()
    with pytest.raises(ValueError, match="the network load needs the board's traffic"):
        window(board, [NetworkLoad(1400, traffic=TRAFFIC)], traffic=None)
    assert board.commands == []


@pytest.fixture
def stream_sink():
    """The board's stream listener, as the emulator's port forward reaches it."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            while conn.recv(65536):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    server.close()
    thread.join(timeout=5)


def test_network_window_reads_the_counters_at_its_edges(monkeypatch, stream_sink):
    streams: list[HostStream] = []

    class RecordedStream(HostStream):
        def start(self) -> None:
            streams.append(self)
            super().start()
            # as the board's margin does: connected before the window opens
            for _ in range(1000):
                if self.connections:
                    return
                threading.Event().wait(0.01)

    def wait(duration_s, progress):
        # the window lasts until the host has streamed something in it
        for _ in range(1000):
            if streams[0].sent > streams[0].at_open[0]:
                return
            threading.Event().wait(0.01)

    monkeypatch.setattr(measure, "HostStream", RecordedStream)
    monkeypatch.setattr(measure, "_wait_quietly", wait)
    traffic = attr.evolve(TRAFFIC, stream_port=stream_sink)
    # ping and the listener keep the board nearly idle: the counters prove the load
    board = FakeBoard(loads=[BoardLoad(probe_before=SNMP_START, probe=SNMP_END)], **IDLE)
    result, _ = window(board, [NetworkLoad(1400, traffic=traffic)], traffic=traffic)
    (stream,) = streams
    # the stream is stopped with the window
    assert stream._thread is not None and not stream._thread.is_alive()
    assert result.load_facts == {
        "cpu_utilisation": 0.01, "loadavg": LOADAVG, "min_utilisation": 0.0,
        "loads": {"network": {**NETWORK_FACTS,
                              "host_stream_bytes": stream.sent - stream.at_open[0],
                              "host_stream_connections": 1}}}
    assert stream.at_open[1] == 1 and stream.sent > stream.at_open[0]
    start, end = board.script()["start"], board.script()["end"]
    assert "/bin/ping -f -q -s 1400 -w 125 10.0.2.2" in start[1]
    # the counters are read after the margin, before the first /proc/stat reading, and
    # again last of the evidence
    probe = ('echo "rtlab-evidence:0 probe"; grep -E \'^(Icmp|Tcp):\' /proc/net/snmp; '
             'echo "rtlab-evidence:0 probe-end"')
    assert start[2:6] == [f"sleep {LOAD_MARGIN_S}", probe, f"echo {MARK}loadavg-before",
                          "cat /proc/loadavg"]
    assert end[2:5] == [f"echo {MARK}stat", "cat /proc/stat", f"echo {MARK}stat-end"]
    assert end[5].endswith(f"; {probe}")


def test_network_window_without_the_start_counters_is_a_program_failure(slept):
    board = FakeBoard(loads=[BoardLoad(probe_before=SNMP_START, probe=SNMP_END)],
                      start_output=[f"{MARK}thermal", f"{MARK}stat", *STAT_BEFORE.splitlines(),
                                    f"{MARK}started"])
    traffic = attr.evolve(TRAFFIC, stream_port=1)
    with pytest.raises(ProgramFailed, match=r"^the probe of load network is missing from the "
                                            r"board's output: "):
        window(board, [NetworkLoad(1400, traffic=traffic)], traffic=traffic)
    assert board.commands[-1] == STOP


# ---------------------------------------------------------- window script ----


COMBINED = [CpuLoad(50), HackbenchLoad(15, 25, 200, 512), MemoryLoad(2, "10%"),
            DiskLoad("/data", 1024, 8), NetworkLoad(1400, traffic=TRAFFIC)]


def loads_of(parts):
    return [StartedLoad(index, part) for index, part in enumerate(parts)]


def test_window_script_is_valid_sh_with_its_actions(tmp_path):
    path = tmp_path / "rtlab-window.sh"
    path.write_text(window_script(PROGRAM, loads_of(COMBINED), 4, 125), encoding="utf-8")
    syntax = subprocess.run(["sh", "-n", str(path)], capture_output=True, text=True,
                            check=False)
    assert (syntax.returncode, syntax.stderr) == (0, "")
    usage = subprocess.run(["sh", str(path), "restart"], capture_output=True, text=True,
                           check=False)
    assert (usage.returncode, usage.stdout, usage.stderr) == (
        2, "", f"usage: {path} start|loads|begin|end|stop\n")
    actions = sections(path.read_text())
    assert set(actions) == {"start", "loads", "begin", "end", "stop"}
    # start is an adaptive run's loads and its first window's begin, in that order
    assert actions["start"] == actions["loads"] + actions["begin"][1:]


def test_window_script_reads_only_proc_stat_for_the_cpu_time():
    script = window_script(PROGRAM, loads_of(COMBINED), 4, 125)
    assert script.startswith("#!/bin/sh\n# rtlab measurement window, uploaded by rtlab.measure: "
                             'start | end | stop\ncase "$1" in\nstart)\n')
    # no task's own CPU time and no uptime: on an emulated board they run on other clocks
    # than /proc/stat, whose two readings alone are compared
    assert set(re.findall(r"/proc/[\w/$]+", script)) == {
        "/proc/stat", "/proc/loadavg", "/proc/net/snmp"}
    assert "ticks" not in script and "uptime" not in script
    actions = sections(script)
    assert actions["start"].count("cat /proc/stat") == actions["end"].count("cat /proc/stat") == 1
    # after the margin the probes, then the temperatures and the first /proc/stat reading
    assert actions["start"][6:14] == [
        f"sleep {LOAD_MARGIN_S}",
        'echo "rtlab-evidence:4 probe"; grep -E \'^(Icmp|Tcp):\' /proc/net/snmp; '
        'echo "rtlab-evidence:4 probe-end"', f"echo {MARK}loadavg-before", "cat /proc/loadavg",
        f"echo {MARK}thermal", THERMAL, f"echo {MARK}stat", "cat /proc/stat"]


def test_window_script_end_waits_for_the_program_then_gathers_the_evidence():
    loads = loads_of(COMBINED)
    end = sections(window_script(PROGRAM, loads, 4, 125))["end"]
    assert end == [
        f"n=0; while [ ! -e {PROGRAM_RC} ] && [ $n -lt {2 * PROGRAM_OVERRUN_S} ]; "
        "do sleep 0.5; n=$((n+1)); done",
        f"echo {MARK}rc=$(cat {PROGRAM_RC} 2>/dev/null || echo none)",
        f"echo {MARK}stat", "cat /proc/stat", f"echo {MARK}stat-end",
        evidence_command(loads), f"echo {MARK}loadavg", "cat /proc/loadavg",
        f"echo {MARK}thermal", THERMAL]


@pytest.fixture
def subreaper():
    """Orphans of the script's sh come to this process, as they go to init on a board, so
    that the test can reap them (and `kill -0` sees them gone)."""
    if not sys.platform.startswith("linux") or not shutil.which("setsid"):
        pytest.skip("needs Linux and setsid")
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_child_subreaper = 36
    if libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) != 0:
        pytest.skip("cannot become a subreaper")
    yield
    libc.prctl(pr_set_child_subreaper, 0, 0, 0, 0)
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def with_fake_stress_ng(tmp_path: Path, before: str = "", *, busy: bool = False
                        ) -> dict[str, str]:
    """The environment of a shell whose stress-ng is a fake that says it dispatched its
    hogs and then sleeps, or with ``busy`` spins as a hog does (``before``: lines of its
    own first); its folder is tmp_path/bin."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "stress-ng"
    # a window's load is proven from the host's /proc/stat: a sleeping fake passes only when
    # something else happens to run on the host meanwhile (make test once met an idle moment)
    work = "while :; do :; done\n" if busy else "exec sleep 300\n"
    fake.write_text(f'#!/bin/sh\n{before}echo "stress-ng: info:  [$$] dispatching hogs: $2 cpu"\n'
                    f"{work}", encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_window_script_runs_and_stops_the_loads_whole_session(tmp_path, subreaper):
    """The script's three actions in a real shell: the host's /bin/sh (dash on Debian),
    which takes fewer spellings of `kill` to a process group than the boards' busybox sh."""
    # a load with a child of its own, as hackbench and stress-ng have
    env = with_fake_stress_ng(tmp_path, before='sleep 300 &\necho "child $!"\n')
    loads = loads_of([CpuLoad(50)])
    program = ["sh", "-c", "echo measuring; exit 3"]
    # the board's /tmp is this test's folder
    script = window_script(program, loads, 2, 125).replace("/tmp/", f"{tmp_path}/")
    (tmp_path / "rtlab-window.sh").write_text(script, encoding="utf-8")

    def action(name: str) -> list[str]:
        done = subprocess.run(["sh", str(tmp_path / "rtlab-window.sh"), name], env=env,
                              capture_output=True, text=True, timeout=60, check=True)
        return done.stdout.splitlines()

    start = action("start")
    pid = int((tmp_path / "rtlab-load-0.pid").read_text())
    statuses: list[int] = []
    reaper = threading.Thread(target=lambda: statuses.append(os.waitpid(pid, 0)[1]),
                              daemon=True)
    reaper.start()
    try:
        assert start[-1] == f"{MARK}started"
        # this machine's /proc/stat, read by the script
        assert re.match(r"cpu  \d+ \d+ \d+ \d+", start[start.index(f"{MARK}stat") + 1])
        end = action("end")
        assert f"{MARK}rc=3" in end
        # the marks, in the order the fake board above prints them, and no other
        assert [line for line in start if line.startswith(MARK)] == [
            f"{MARK}loadavg-before", f"{MARK}thermal", f"{MARK}stat", f"{MARK}started"]
        assert [line for line in end if line.startswith(MARK)] == [
            f"{MARK}rc=3", f"{MARK}stat", f"{MARK}stat-end", f"{MARK}0 alive", f"{MARK}0 log",
            f"{MARK}0 tally", f"{MARK}0 end", f"{MARK}loadavg", f"{MARK}thermal"]
        # both readings of this machine's /proc/stat are what run_window parses
        before = CpuTimes.parse("\n".join(start[start.index(f"{MARK}stat") + 1:]))
        after = CpuTimes.parse("\n".join(end))
        assert 0 < before.busy <= after.busy
        (evidence,) = parse_evidence(end, loads)
        child_line, stress_line = evidence.log.splitlines()
        assert evidence.alive and stress_line == (
            f"stress-ng: info:  [{pid}] dispatching hogs: 2 cpu")
        child = int(child_line.removeprefix("child "))
        assert (tmp_path / "rtlab-program.out").read_text() == "measuring\n"
        action("stop")
        reaper.join(timeout=10)
        assert os.WIFSIGNALED(statuses[0]) and os.WTERMSIG(statuses[0]) == signal.SIGTERM
        # the load's child went with it (the whole session was signalled)
        for _ in range(100):
            if _gone(child):
                break
            threading.Event().wait(0.05)
        assert _gone(child)
        end = action("end")
        (evidence,) = parse_evidence(end, loads)
        assert not evidence.alive
        assert f"{MARK}0 gone" in end
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)



# --------------------------------------------------------------- evidence ----


def test_evidence_command():
    loads = loads_of([CpuLoad(50), NetworkLoad(1400, traffic=TRAFFIC)])
    assert evidence_command(loads) == (
        'if kill -0 $(cat /tmp/rtlab-load-0.pid) 2>/dev/null; then echo "rtlab-evidence:0 '
        'alive"; else echo "rtlab-evidence:0 gone"; fi; echo "rtlab-evidence:0 log"; '
        'tail -n 40 /tmp/rtlab-load-0-cpu.log; echo; echo "rtlab-evidence:0 tally"; '
        "grep -E -x '[a-z]+(=[0-9]+)?' /tmp/rtlab-load-0-cpu.log | sort | uniq -c; "
        'echo "rtlab-evidence:0 end"; '
        'if kill -0 $(cat /tmp/rtlab-load-1.pid) 2>/dev/null; then echo "rtlab-evidence:1 '
        'alive"; else echo "rtlab-evidence:1 gone"; fi; echo "rtlab-evidence:1 log"; '
        'tail -n 40 /tmp/rtlab-load-1-network.log; echo; echo "rtlab-evidence:1 tally"; '
        "grep -E -x '[a-z]+(=[0-9]+)?' /tmp/rtlab-load-1-network.log | sort | uniq -c; "
        'echo "rtlab-evidence:1 end"; '
        'echo "rtlab-evidence:1 probe"; grep -E \'^(Icmp|Tcp):\' /proc/net/snmp; '
        'echo "rtlab-evidence:1 probe-end"')
    assert evidence_command([]) == "true"


def test_parse_evidence_of_two_loads_with_a_probe():
    loads = loads_of([HackbenchLoad(2, 10, 100, 512), NetworkLoad(1400, traffic=TRAFFIC)])
    lines = [f"{MARK}rc=0", *STAT_AFTER.splitlines(),
             f"{MARK}0 alive", f"{MARK}0 log", "start", "rc=0", "start", f"{MARK}0 tally",
             "      1 rc=0", "      2 start", f"{MARK}0 end",
             f"{MARK}1 gone", f"{MARK}1 log", "ping: sendmsg: No buffer space available",
             "ping-rc=1", f"{MARK}1 tally", f"{MARK}1 end",
             f"{MARK}1 probe", *SNMP_END.splitlines(), f"{MARK}1 probe-end",
             f"{MARK}loadavg", LOADAVG]
    hackbench, network = parse_evidence(lines, loads, {1: SNMP_START})
    assert hackbench == Evidence(alive=True, log="start\nrc=0\nstart",
                                 tally={"rc=0": 1, "start": 2})
    assert network == Evidence(alive=False, probe=SNMP_END, probe_before=SNMP_START,
                               log="ping: sendmsg: No buffer space available\nping-rc=1")
    # without the window's start, nothing was before
    assert parse_evidence(lines, loads)[1].probe_before == ""


def test_parse_probes():
    loads = loads_of([CpuLoad(50), NetworkLoad(1400, traffic=TRAFFIC)])
    lines = [f"{MARK}1 probe", *SNMP_START.splitlines(), f"{MARK}1 probe-end",
             f"{MARK}thermal", "41250"]
    assert parse_probes(lines, loads) == {1: SNMP_START}
    assert parse_probes(lines, loads_of([CpuLoad(50)])) == {}


@pytest.mark.parametrize("drop", [f"{MARK}0 probe", f"{MARK}0 probe-end"])
def test_missing_probe_is_a_program_failure(drop):
    lines = [f"{MARK}0 alive", f"{MARK}0 log", f"{MARK}0 end",
             f"{MARK}0 probe", *SNMP_END.splitlines(), f"{MARK}0 probe-end"]
    lines.remove(drop)
    with pytest.raises(ProgramFailed, match=re.escape(
            "the probe of load network is missing from the board's output: ")):
        parse_evidence(lines, loads_of([NetworkLoad(1400, traffic=TRAFFIC)]))


def test_parse_evidence_of_an_empty_log():
    (evidence,) = parse_evidence([f"{MARK}0 gone", f"{MARK}0 log", f"{MARK}0 tally",
                                  f"{MARK}0 end"], loads_of([CpuLoad(50)]))
    assert evidence == Evidence(alive=False, log="", tally={})


def test_the_tally_counts_the_whole_log_beyond_its_last_lines():
    # an hour of hackbench: the log's end shows only the last runs, the tally all of them
    lines = [f"{MARK}0 alive", f"{MARK}0 log", *["start", "rc=0"] * 20, "start",
             f"{MARK}0 tally", "   1801 rc=0", "      1 rc=1", "   1803 start", f"{MARK}0 end"]
    (evidence,) = parse_evidence(lines, loads_of([HackbenchLoad(2, 10, 100, 512)]))
    assert evidence.tally == {"rc=0": 1801, "rc=1": 1, "start": 1803}
    with pytest.raises(LoadNotEffective, match=r"^load not effective: hackbench failed \(rc=1\)"):
        HackbenchLoad(2, 10, 100, 512).verify(evidence)


def test_a_garbled_tally_is_a_program_failure():
    lines = [f"{MARK}0 alive", f"{MARK}0 log", "wrote", f"{MARK}0 tally", "   3 wrote",
             "wrote wrote", f"{MARK}0 end"]
    with pytest.raises(ProgramFailed, match=r"the tally of load disk is garbled: 'wrote wrote'"):
        parse_evidence(lines, loads_of([DiskLoad("/data", 1024, 8)]))


@pytest.mark.parametrize("drop", [f"{MARK}0 alive", f"{MARK}0 log", f"{MARK}0 tally",
                                  f"{MARK}0 end"])
def test_missing_evidence_is_a_program_failure(drop):
    lines = [f"{MARK}0 alive", f"{MARK}0 log", "wrote", f"{MARK}0 tally", "      1 wrote",
             f"{MARK}0 end",
             f"{MARK}loadavg", LOADAVG]
    lines.remove(drop)
    with pytest.raises(ProgramFailed, match=re.escape(
            "the evidence of load disk is missing from the board's output: ")):
        parse_evidence(lines, loads_of([DiskLoad("/data", 1024, 8)]))


def test_evidence_of_another_load_does_not_count():
    lines = [f"{MARK}1 alive", f"{MARK}1 log", f"{MARK}1 end"]
    with pytest.raises(ProgramFailed, match="the evidence of load cpu is missing"):
        parse_evidence(lines, loads_of([CpuLoad(50)]))


def _evidence_through_sh(tmp_path: Path, cpu_log: str) -> list[Evidence]:
    """The evidence command run by sh, with a live and a finished load and real log files;
    the probe reads this machine's own /proc/net/snmp."""
    loads = loads_of([CpuLoad(50), NetworkLoad(1400, traffic=TRAFFIC)])
    alive = subprocess.Popen(["sleep", "30"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        (tmp_path / "rtlab-load-0.pid").write_text(f"{alive.pid}\n")
        (tmp_path / "rtlab-load-1.pid").write_text(f"{gone.pid}\n")
        (tmp_path / "rtlab-load-0-cpu.log").write_text(cpu_log)
        (tmp_path / "rtlab-load-1-network.log").write_text("ping-rc=1\n")
        command = evidence_command(loads).replace("/tmp/", f"{tmp_path}/")
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                              timeout=30, check=True)
    finally:
        alive.kill()
        alive.wait()
    return parse_evidence(done.stdout.splitlines(), loads)


def test_evidence_command_round_trip_through_a_real_shell(tmp_path):
    cpu, network = _evidence_through_sh(tmp_path, f"{STRESS_LOG}\n")
    assert cpu == Evidence(alive=True, log=STRESS_LOG)
    assert (network.alive, network.log) == (False, "ping-rc=1")
    assert re.fullmatch(r"Icmp: [A-Za-z ]+\nIcmp: [0-9 ]+\nTcp: [A-Za-z ]+\nTcp: [-0-9 ]+",
                        network.probe)


def test_evidence_of_a_log_without_a_final_newline(tmp_path):
    cpu, _ = _evidence_through_sh(tmp_path, STRESS_LOG)
    assert cpu == Evidence(alive=True, log=STRESS_LOG)


# ----------------------------------------------------------------- _verify ----


LOW_LOADAVG = "0.40 0.30 0.10 2/98 7"


def test_verify_passes_an_effective_load_and_records_the_facts():
    facts = _verify([CpuLoad(100)], [Evidence(True, STRESS_LOG)], 0.95127, LOADAVG, 4, 5, None)
    assert facts == {"cpu_utilisation": 0.951, "loadavg": LOADAVG, "min_utilisation": 0.5,
                     "loads": {"cpu": {"percent": 100}}}


def test_verify_records_the_minimum_rounded():
    # one memory worker on three CPUs: half of a third of their time at least
    facts = _verify([MemoryLoad(1, "10%")], [Evidence(True, "")], 0.20049, LOADAVG, 3, 5, None)
    assert (facts["cpu_utilisation"], facts["min_utilisation"]) == (0.2, 0.167)
    assert facts["loads"] == {"memory": {"workers": 1, "bytes": "10%"}}


def test_verify_without_loads_needs_no_utilisation():
    assert _verify([], [], 0.0, LOADAVG, 4, 600, None) == {
        "cpu_utilisation": 0.0, "loadavg": LOADAVG, "min_utilisation": 0.0, "loads": {}}


def test_verify_utilisation_below_the_minimum_names_the_loads():
    # the disk load needs no CPU time; the CPU load with it does
    with pytest.raises(LoadNotEffective) as raised:
        _verify([DiskLoad("/data", 1024, 8), CpuLoad(100)],
                [Evidence(True, "wrote"), Evidence(True, STRESS_LOG)], 0.412, LOADAVG, 4, 5,
                None)
    assert str(raised.value) == ("load not effective: CPU utilisation 41.2% during the "
                                 "measurement, expected at least 50.0% for disk+cpu")


@pytest.mark.parametrize(("load", "evidence", "cpus", "utilisation", "message"), [
    (CpuLoad(30), Evidence(True, STRESS_LOG), 4, 0.1,
     "load not effective: CPU utilisation 10.0% during the measurement, expected at least 15.0% "
     "for cpu"),
    (HackbenchLoad(2, 10, 100, 512), Evidence(True, "start"), 2, 0.2,
     "load not effective: CPU utilisation 20.0% during the measurement, expected at least 25.0% "
     "for hackbench"),
    # two workers on two CPUs
    (MemoryLoad(2, "10%"), Evidence(True, ""), 2, 0.49,
     "load not effective: CPU utilisation 49.0% during the measurement, expected at least 50.0% "
     "for memory"),
    # ... and on four
    (MemoryLoad(2, "10%"), Evidence(True, ""), 4, 0.24,
     "load not effective: CPU utilisation 24.0% during the measurement, expected at least 25.0% "
     "for memory"),
])
def test_verify_judges_every_load_by_its_own_minimum(load, evidence, cpus, utilisation,
                                                    message):
    with pytest.raises(LoadNotEffective) as raised:
        _verify([load], [evidence], utilisation, LOADAVG, cpus, 5, None)
    assert str(raised.value) == message


def test_verify_passes_a_utilisation_that_is_just_the_minimum():
    facts = _verify([CpuLoad(50)], [Evidence(True, STRESS_LOG)], 0.25, LOADAVG, 4, 5, None)
    assert (facts["cpu_utilisation"], facts["min_utilisation"]) == (0.25, 0.25)
    # judged unrounded: 24.99 % is too little, although it is recorded as 25 %
    with pytest.raises(LoadNotEffective, match=r"utilisation 24\.9% during the measurement, "
                                               r"expected at least 25\.0% for cpu$"):
        _verify([CpuLoad(50)], [Evidence(True, STRESS_LOG)], 0.2499, LOADAVG, 4, 5, None)


@pytest.mark.parametrize(("load", "cpus", "utilisation"), [
    (CpuLoad(100), 4, 0.498),
    # one memory worker on four CPUs asks for 12.5 %
    (MemoryLoad(1, "10%"), 4, 0.124),
])
def test_verify_message_shows_a_utilisation_below_the_minimum(load, cpus, utilisation):
    with pytest.raises(LoadNotEffective) as raised:
        _verify([load], [Evidence(True, STRESS_LOG)], utilisation, LOADAVG, cpus, 5, None)
    shown, asked = re.fullmatch(r"load not effective: CPU utilisation (\S+)% during the "
                                r"measurement, expected at least (\S+)% for \w+",
                                str(raised.value)).groups()
    assert float(shown) < float(asked)


@pytest.mark.parametrize(("parts", "evidence"), [
    ([DiskLoad("/data", 1024, 8)], [Evidence(True, "wrote")]),
    ([NetworkLoad(1400, traffic=TRAFFIC)],
     [Evidence(True, "", probe=SNMP_END, probe_before=SNMP_START)]),
    ([DiskLoad("/data", 1024, 8), NetworkLoad(1400, traffic=TRAFFIC)],
     [Evidence(True, "wrote"), Evidence(True, "", probe=SNMP_END, probe_before=SNMP_START)]),
])
def test_verify_disk_and_network_loads_need_no_utilisation(parts, evidence):
    # an idle board, for 10 minutes, with a load average of nothing
    facts = _verify(parts, evidence, 0.0, "0.00 0.00 0.00 1/98 7", 4, 600, None)
    assert (facts["cpu_utilisation"], facts["min_utilisation"]) == (0.0, 0.0)
    assert set(facts["loads"]) == {part.kind for part in parts}


def test_verify_judges_the_network_load_over_the_window():
    evidence = [Evidence(True, "", probe=SNMP_END, probe_before=SNMP_START)]
    parts = [NetworkLoad(1400, traffic=TRAFFIC)]
    # SNMP_START..SNMP_END: 41234 echo requests, a flood in 10 minutes but not in an hour
    assert _verify(parts, evidence, 0.0, LOADAVG, 4, 600, None)["loads"]["network"][
        "echo_requests"] == 41234
    with pytest.raises(LoadNotEffective, match=r"41234 echo requests in 3600 s \(11\.5/s\)"):
        _verify(parts, evidence, 0.0, LOADAVG, 4, 3600, None)


def test_verify_checks_the_load_evidence_before_the_utilisation():
    with pytest.raises(LoadNotEffective, match="hackbench failed"):
        _verify([HackbenchLoad(2, 10, 100, 512)], [Evidence(True, "start\nrc=1")], 0.1,
                LOADAVG, 4, 5, None)


def test_verify_checks_the_utilisation_before_the_load_average():
    with pytest.raises(LoadNotEffective, match="^load not effective: CPU utilisation 10.0% "):
        _verify([CpuLoad(100)], [Evidence(True, STRESS_LOG)], 0.1, LOW_LOADAVG, 4, 600, None)


@pytest.mark.parametrize("duration_s", [5, LOADAVG_MIN_WINDOW_S - 1])
def test_verify_ignores_the_load_average_of_short_windows(duration_s):
    facts = _verify([CpuLoad(100)], [Evidence(True, STRESS_LOG)], 0.93,
                    "0.20 0.05 0.01 1/98 1234", 4, duration_s, None)
    assert facts["loadavg"] == "0.20 0.05 0.01 1/98 1234"


def test_verify_checks_the_load_average_of_long_windows():
    with pytest.raises(LoadNotEffective) as raised:
        _verify([CpuLoad(100)], [Evidence(True, STRESS_LOG)], 0.93,
                "0.97 0.51 0.20 5/98 1234", 4, LOADAVG_MIN_WINDOW_S, None)
    assert str(raised.value) == ("load not effective: 1-minute load average 0.97 after 60 s "
                                 "under load")
    facts = _verify([CpuLoad(100)], [Evidence(True, STRESS_LOG)], 0.93,
                    "1.00 0.51 0.20 5/98 1234", 4, LOADAVG_MIN_WINDOW_S, None)
    assert facts["loadavg"] == "1.00 0.51 0.20 5/98 1234"


@pytest.mark.parametrize(("load", "needed", "checked"), [
    (CpuLoad(39), 0.195, False),
    (CpuLoad(40), 0.2, True),
    (CpuLoad(100), 0.5, True),
    (HackbenchLoad(2, 10, 100, 512), 0.25, True),
    # one and two workers on four CPUs
    (MemoryLoad(1, "10%"), 0.125, False),
    (MemoryLoad(2, "10%"), 0.25, True),
    (DiskLoad("/data", 1024, 8), 0.0, False),
])
def test_verify_asks_for_a_load_average_from_a_minimum_of_20_percent(load, needed, checked):
    # less is too little to move the load average reliably
    assert LOADAVG_MIN_UTILISATION == 0.2
    evidence = Evidence(True, "start\nwrote")
    if checked:
        with pytest.raises(LoadNotEffective, match="1-minute load average 0.4 after 600 s"):
            _verify([load], [evidence], 0.9, LOW_LOADAVG, 4, 600, None)
    else:
        facts = _verify([load], [evidence], 0.9, LOW_LOADAVG, 4, 600, None)
        assert facts["min_utilisation"] == needed


def test_verify_the_most_demanding_load_asks_for_the_load_average():
    # the disk load alone would not; the CPU load with it does
    with pytest.raises(LoadNotEffective, match="1-minute load average 0.4 after 600 s"):
        _verify([DiskLoad("/data", 1024, 8), CpuLoad(100)],
                [Evidence(True, "wrote"), Evidence(True, STRESS_LOG)], 0.9, LOW_LOADAVG, 4,
                600, None)
    # the loads' minima are not added up: 10 % and 12.5 % stay below 20 %
    facts = _verify([CpuLoad(20), MemoryLoad(1, "10%")],
                    [Evidence(True, STRESS_LOG), Evidence(True, "")], 0.9, LOW_LOADAVG, 4, 600,
                    None)
    assert facts["min_utilisation"] == 0.125


NETWORK_EVIDENCE = Evidence(True, "", probe=SNMP_END, probe_before=SNMP_START)


def test_verify_records_what_the_host_stream_sent_during_the_window():
    stream = HostStream("127.0.0.1", 15001, sent=655360, connections=2, at_open=(65536, 2))
    facts = _verify([NetworkLoad(1400, traffic=TRAFFIC)], [NETWORK_EVIDENCE], 0.05, LOADAVG, 4,
                    5, stream)
    assert facts["loads"]["network"] == {**NETWORK_FACTS, "host_stream_bytes": 589824,
                                         "host_stream_connections": 2}
    assert facts["min_utilisation"] == 0.0


REFUSED = "ConnectionRefusedError: [Errno 111] Connection refused"
RESET = "ConnectionResetError: [Errno 104] Connection reset by peer"


@pytest.mark.parametrize(("stream", "why"), [
    (HostStream("127.0.0.1", 15001, error=REFUSED),
     f"had no connection that lasted the window (0 made before it, 0 during it; last error: "
     f"{REFUSED})"),
    # accepted by the emulator, reset because nothing listened on the board: again and again
    (HostStream("127.0.0.1", 15001, sent=262144, connections=5, at_open=(131072, 2),
                error=RESET),
     f"had no connection that lasted the window (2 made before it, 3 during it; last error: "
     f"{RESET})"),
    (HostStream("127.0.0.1", 15001, sent=65536, connections=1, at_open=(65536, 1)),
     "sent nothing during the window (last error: None)"),
])
def test_verify_host_stream_that_did_not_stream_through_the_window_is_not_effective(stream,
                                                                                    why):
    with pytest.raises(LoadNotEffective) as raised:
        _verify([NetworkLoad(1400, traffic=TRAFFIC)], [NETWORK_EVIDENCE], 0.05, LOADAVG, 4, 5,
                stream)
    assert str(raised.value) == (
        f"load not effective: the host's TCP stream to 127.0.0.1:15001 {why}")


def test_host_stream_against_a_closed_port_reports_the_error():
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    stream = HostStream("127.0.0.1", port)
    stream.start()
    for _ in range(500):
        if stream.error:
            break
        threading.Event().wait(0.01)
    stream.stop()
    assert (stream.sent, stream.connections) == (0, 0)
    assert stream.error is not None and stream.error.startswith("ConnectionRefusedError: ")


class LocalShell:
    """The board's shell as this machine's /bin/sh, its /tmp this test's folder."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env, self.sent = root, env, []
        self.staged: dict[str, str] = {}

    def _local(self, text: str) -> str:
        return text.replace("/tmp/", f"{self.root}/")

    def run(self, cmd, *, timeout=30.0, codec="utf-8", decodeerrors="strict"):
        self.sent.append(cmd)
        done = subprocess.run(["sh", "-c", self._local(cmd)], env=self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)
        return done.stdout.splitlines(), done.stderr.splitlines(), done.returncode

    def run_check(self, cmd, *, timeout=30.0, codec="utf-8", decodeerrors="strict"):
        if cmd.startswith("printf %s "):
            # the script's /tmp/ paths are this test's folder (test_upload.py runs the
            # upload's own commands in a real sh)
            done = take_upload(self.staged, cmd)
            if done is not None:
                Path(self._local(done[0])).write_text(self._local(done[1].decode()))
            return []
        out, err, code = self.run(cmd, timeout=timeout)
        if code != 0:
            raise ExecutionError(f"{cmd}: {err}")
        return out



def test_windows_run_under_one_load_until_the_caller_stops_them(tmp_path, subreaper):
    shell = LocalShell(tmp_path, with_fake_stress_ng(tmp_path, busy=True))
    pids = []

    def after(index: int, window: Window) -> str | None:
        # the load started once: the same process in every window
        pids.append((tmp_path / "rtlab-load-0.pid").read_text())
        assert window.exit_code == 0 and window.load_facts["loads"]["cpu"]["percent"] == 10
        return "decided" if index == 2 else None

    run = measure.run_windows(shell, program=["sh", "-c", "sleep 1"], parts=[CpuLoad(10, 0.01)],
                              cpus=2, window_s=1, cap_s=10, after_window=after,
                              progress=lambda text: None)
    assert (len(run.windows), run.stopped) == (3, "decided")
    assert len(set(pids)) == 1
    assert len(run.gaps_s) == 2 and all(0 <= gap < 30 for gap in run.gaps_s)
    actions = [cmd.split()[-1] for cmd in shell.sent if cmd.startswith("sh ")]
    assert actions == ["loads", "begin", "end", "begin", "end", "begin", "end", "stop"]
    assert _gone(int(pids[0]))


def test_an_adaptive_runs_loads_outlast_every_gap_the_host_may_take(tmp_path, subreaper):
    """A load bound to the cap ran out on a loaded virtual board whose gaps between windows
    took half a minute each, and voided the last window."""
    shell = LocalShell(tmp_path, with_fake_stress_ng(
        tmp_path, before='echo "$@" >"$(dirname "$0")/args"\n', busy=True))
    measure.run_windows(shell, program=["true"], parts=[CpuLoad(10, 0.01)], cpus=1,
                        window_s=1, cap_s=3, after_window=lambda index, window: "decided",
                        progress=lambda text: None)
    args = (tmp_path / "bin" / "args").read_text().split()
    timeout_s = int(args[args.index("--timeout") + 1].rstrip("s"))
    # three windows, each gap allowed the program's overrun and three loaded commands
    assert timeout_s >= 3 + 3 * (measure.PROGRAM_OVERRUN_S + 3 * measure.LOADED_SHELL_TIMEOUT_S)


def test_windows_end_at_the_cap(tmp_path):
    shell = LocalShell(tmp_path, dict(os.environ))
    run = measure.run_windows(shell, program=["true"], parts=[], cpus=1, window_s=1, cap_s=2,
                              after_window=lambda index, window: None,
                              progress=lambda text: None)
    assert (len(run.windows), run.stopped) == (2, "the cap of 2 s")


# ------------------------------------------------- the conditions of a window ----

CONDITIONS = CaseConditions(Requirements(governor=None, throttled=None),
                            MeasuringThreads("cyclictest", 90, (0, 1, 2, 3)), "rt")


def board_report(tag: str, *, policy: int = 1, priority: int = 90,
                 rt_runtime_us: int = -1) -> list[str]:
    """A board's report of its conditions (rtlab.measure.conditions.snapshot_command):
    cyclictest's main thread and a measuring thread on each CPU at ``policy``
    ``priority``, the kernel an RT one."""
    def stat(tid: int, cpu: int, policy: int, priority: int) -> str:
        fields = ["S"] + ["0"] * 49
        fields[9 - 3], fields[39 - 3], fields[40 - 3], fields[41 - 3] = (
            "4194560", str(cpu), str(priority), str(policy))
        return f"task 500 {tid} {tid} (cyclictest) " + " ".join(fields)

    lines = [stat(500, 0, 1, 90), "allowed 500 500 0-3"]
    for cpu in range(4):
        lines += [stat(501 + cpu, cpu, policy, priority), f"allowed 500 {501 + cpu} {cpu}"]
    return [f"{MARK}conditions-{tag}", *lines, "dma 0", "rt_runtime_us " + str(rt_runtime_us),
            "realtime 1", "version #1 SMP PREEMPT_RT", "cmdline console=ttymxc1",
            "isolated ", f"{MARK}conditions-{tag}-end"]


def test_a_window_sets_the_board_and_checks_it_while_the_program_runs(slept):
    board = FakeBoard(conditions=[*board_report("early"), *board_report("late")])
    result, _ = window(board, [], duration_s=20, conditions=CONDITIONS)
    assert result.conditions is not None and result.conditions.valid
    facts = result.conditions.facts()
    assert facts["checks"]["measuring_policy"]["status"] == "met"
    assert facts["checks"]["rt_throttling"]["found"] == "sched_rt_runtime_us -1"
    begin = "\n".join(board.script()["begin"])
    # throttling turned off before the program starts; the checks, started first at
    # SCHED_FIFO 1 (the loads must not hold them off), run as soon as its threads
    # appeared and again 5 s before its 20 s end
    program_at = begin.index(f"({shlex.join(PROGRAM)} & echo $! >")
    assert begin.index("echo -1 >/proc/sys/kernel/sched_rt_runtime_us") < program_at
    assert begin.index("chrt -f 1 sh -c ") < program_at
    assert re.search(r"\[ \$# -gt 4 \] && break.*sleep 0\.2.*conditions-early.*"
                     r"rtlab_rest=\$\(\(rtlab_t0 \+ 15 - .*"
                     r"if \[ -d /proc/\$program_pid \]; then .*conditions-late", begin)
    # a window without conditions asks for none
    plain = FakeBoard()
    assert window(plain, [])[0].conditions is None
    assert "conditions" not in plain.uploads[WINDOW_SCRIPT]


def test_a_measuring_thread_reniced_while_the_window_ran_voids_it(slept):
    board = FakeBoard(conditions=[*board_report("early"), *board_report("late", policy=0,
                                                                        priority=0)])
    with pytest.raises(RunNotValid, match="ran at SCHED_OTHER 0, case requires SCHED_FIFO 90"
                       ) as raised:
        window(board, [], duration_s=20, conditions=CONDITIONS)
    assert raised.value.conditions.facts()["checks"]["measuring_policy"]["status"] == "mismatch"
    throttled = FakeBoard(conditions=[*board_report("early", rt_runtime_us=950000),
                                      *board_report("late")])
    with pytest.raises(RunNotValid, match="sched_rt_runtime_us 950000"):
        window(throttled, [], duration_s=20, conditions=CONDITIONS)


def test_a_window_whose_checks_are_missing_is_a_program_failure_not_a_pass(slept):
    board = FakeBoard(conditions=board_report("early"))
    with pytest.raises(ProgramFailed, match="late"):
        window(board, [], duration_s=20, conditions=CONDITIONS)
    # a program that ended before either check (a breach at once) leaves none, not a
    # board without its threads
    ended = FakeBoard(conditions=[f"{MARK}conditions-early-missed",
                                  f"{MARK}conditions-late-missed"])
    assert window(ended, [], duration_s=20, conditions=CONDITIONS)[0].conditions is None
    late_only = FakeBoard(conditions=[*board_report("early"), f"{MARK}conditions-late-missed"])
    assert window(late_only, [], duration_s=20, conditions=CONDITIONS)[0].conditions.snapshots \
        == ("early",)
    # a program that was ending at the late check (its threads gone, its main thread
    # writing the results) is judged on the early one
    ending = FakeBoard(conditions=[*board_report("early"), *board_report("late")[:3],
                                   *board_report("late")[-7:]])
    assert window(ending, [], duration_s=20, conditions=CONDITIONS)[0].conditions.snapshots \
        == ("early",)
    # a program that failed says so; the checks it cut short are not the error
    failed = FakeBoard(conditions=board_report("early"), rc="1")
    assert window(failed, [], duration_s=20, conditions=CONDITIONS)[0].exit_code == 1
