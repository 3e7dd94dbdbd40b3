"""One measurement window on the board: loads started, a test program run under them, and
the evidence that the loads covered the whole window.

Nothing is sent to the board's console while the measurement runs: the program is started
in the background and the host only waits (printing progress on its own side), because
console traffic is itself a load on the board. What the board runs for the window is one
script, uploaded before it starts (rtlab.measure.upload: a few short commands of base64), so
that only short commands cross the console: a busybox shell cuts input lines at 1024
characters, and a loaded board is slow to take even those.
"""

import logging
import math
import re
import shlex
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attr

from rtlab.measure.conditions import (
    MEASURING_POLICIES,
    CaseConditions,
    Conditions,
    ConditionsUnreadable,
    RunNotValid,
    check_job,
    prepare_command,
)
from rtlab.measure.loads import (
    PROGRESS_LINE,
    CpuTimes,
    Evidence,
    HostTraffic,
    LoadNotEffective,
    LoadPart,
)
from rtlab.measure.upload import put_file

# the loads run well past the window and are stopped afterwards, so that they provably
# covered all of it; the margin lets them reach full swing before the window opens
LOAD_MARGIN_S = 2
LOAD_OVERRUN_S = 120
# a window longer than this is long enough for the 1-minute load average to show the load
LOADAVG_MIN_WINDOW_S = 60
# ... for loads that keep at least this share of the CPUs busy
LOADAVG_MIN_UTILISATION = 0.2
# a command sent while the loads run can take long to echo on an emulated board
LOADED_SHELL_TIMEOUT_S = 120
# how long the program may overrun its window before the window is given up
PROGRAM_OVERRUN_S = 600
# the longest gap between an adaptive run's windows before one of the host's own timeouts
# ends the run: the program's overrun, reading the window back and starting the next
WINDOW_GAP_ALLOWANCE_S = PROGRAM_OVERRUN_S + 3 * LOADED_SHELL_TIMEOUT_S
MARK = "rtlab-evidence:"
log = logging.getLogger(__name__)
WINDOW_SCRIPT = "/tmp/rtlab-window.sh"
PROGRAM_RC = "/tmp/rtlab-program.rc"
PROGRAM_OUT = "/tmp/rtlab-program.out"
THERMAL = "cat /sys/class/thermal/thermal_zone*/temp 2>/dev/null || true"
CONDITIONS_OUT = "/tmp/rtlab-conditions.out"
CONDITIONS_DONE = "/tmp/rtlab-conditions.done"
PROGRAM_PID = "/tmp/rtlab-program.pid"



class Shell(Protocol):
    def run(self, cmd: str, *, timeout: float = 30.0, codec: str = "utf-8",
            decodeerrors: str = "strict") -> tuple[list[str], list[str], int]: ...

    def run_check(self, cmd: str, *, timeout: float = 30.0, codec: str = "utf-8",
                  decodeerrors: str = "strict") -> list[str]: ...


class ProgramFailed(Exception):
    """The measured program did not complete; the message carries its exit status/output."""


@attr.frozen
class StartedLoad:
    """A load of the window: its files on the board (the pid file holds the pid of its
    session leader, written when it starts)."""

    index: int
    part: LoadPart

    @property
    def log(self) -> str:
        return f"/tmp/rtlab-load-{self.index}-{self.part.kind}.log"

    @property
    def pidfile(self) -> str:
        return f"/tmp/rtlab-load-{self.index}.pid"


@attr.frozen
class Window:
    """What one measurement window produced."""

    exit_code: int
    output: str
    utilisation: float
    loadavg: str
    temperatures_mc: tuple[tuple[int, ...], tuple[int, ...]]
    load_facts: dict[str, Any]
    loadavg_before: str | None = None
    """/proc/loadavg as the window opened (None: a runner's log from before it was read)."""
    conditions: Conditions | None = None
    """The board's conditions while the window ran, checked (None: none were asked for)."""


def window_script(program: Sequence[str], loads: Sequence[StartedLoad], cpus: int,
                  seconds: int, *, conditions: CaseConditions | None = None,
                  window_s: int = 0) -> str:
    """The board's side of a window, one shell script with three actions: ``start`` (the
    loads, the margin, the first /proc/stat reading, the program in the background),
    ``end`` (wait for the program, then the evidence) and ``stop`` (the loads). An
    adaptive run starts the loads once (``loads``, for ``seconds``) and then each window
    (``begin``: the rest of ``start``) under them.

    ``conditions``: the board is set as they require before the program starts, and their
    early and late checks run in the background while the program's ``window_s`` last
    (rtlab.measure.conditions), read back by ``end``."""
    start = [f"rm -f {PROGRAM_RC} {PROGRAM_RC}.tmp {PROGRAM_OUT}"]
    for load in loads:
        # its own session, so that stopping it takes every process it started with it
        start.append(f"setsid sh -c {shlex.quote(load.part.script(cpus, seconds))} "
                     f">{load.log} 2>&1 </dev/null & echo $! >{load.pidfile}")
    start.append(f"sleep {LOAD_MARGIN_S}" if loads else "true")
    begin = [f"rm -f {PROGRAM_RC} {PROGRAM_RC}.tmp {PROGRAM_OUT}"]
    begin += [probe_command(load) for load in loads if load.part.probe]
    checks: list[str] = []
    # written whole or not at all: the end action waits for the file to exist
    started = (f"({shlex.join(program)}; echo $? >{PROGRAM_RC}.tmp; mv {PROGRAM_RC}.tmp "
               f"{PROGRAM_RC}) >{PROGRAM_OUT} 2>&1 </dev/null &")
    if conditions is not None:
        begin += [f"rm -f {PROGRAM_PID} {CONDITIONS_OUT} {CONDITIONS_DONE}",
                  prepare_command(conditions.requirements)]
        # its pid for the checks, which wait for its threads
        started = (f"({shlex.join(program)} & echo $! >{PROGRAM_PID}; wait $!; "
                   f"echo $? >{PROGRAM_RC}.tmp; mv {PROGRAM_RC}.tmp {PROGRAM_RC}) "
                   f">{PROGRAM_OUT} 2>&1 </dev/null &")
        # beside the program, quiet: nothing crosses the console while it measures
        checks = [check_job(conditions.measuring, window_s, pidfile=PROGRAM_PID,
                            out=CONDITIONS_OUT, done=CONDITIONS_DONE,
                            policy=MEASURING_POLICIES.get(
                                conditions.requirements.measuring_policy or "", 1))]
    # the board's state as the window opens, against which its end is read: the load
    # average (a window should start as loaded as it ends) and the temperatures
    begin += [f"echo {MARK}loadavg-before", "cat /proc/loadavg",
              f"echo {MARK}thermal", THERMAL, f"echo {MARK}stat",
              "cat /proc/stat", *checks, started, f"echo {MARK}started"]
    polls = PROGRAM_OVERRUN_S * 2
    end = [f"n=0; while [ ! -e {PROGRAM_RC} ] && [ $n -lt {polls} ]; do sleep 0.5; "
           "n=$((n+1)); done",
           f"echo {MARK}rc=$(cat {PROGRAM_RC} 2>/dev/null || echo none)",
           *([f"n=0; while [ ! -e {CONDITIONS_DONE} ] && [ $n -lt 60 ]; do sleep 0.5; "
              f"n=$((n+1)); done; cat {CONDITIONS_OUT} 2>/dev/null"] if checks else []),
           f"echo {MARK}stat", "cat /proc/stat", f"echo {MARK}stat-end",
           evidence_command(loads), f"echo {MARK}loadavg", "cat /proc/loadavg",
           f"echo {MARK}thermal", THERMAL]
    pidfiles = " ".join(load.pidfile for load in loads)
    # "kill -SIG -PGID": the one spelling busybox ash, dash and bash all take ("--" is
    # an invalid number to busybox, "-s SIG -PGID" an illegal option to dash)
    stop = [f"for f in {pidfiles}; do kill -TERM -$(cat $f) 2>/dev/null; done",
            f"for f in {pidfiles}; do p=$(cat $f); n=0; "
            "while kill -0 $p 2>/dev/null && [ $n -lt 50 ]; do sleep 0.2; n=$((n+1)); done; "
            "kill -KILL -$p 2>/dev/null; done"] if loads else []
    return "\n".join([
        "#!/bin/sh",
        "# rtlab measurement window, uploaded by rtlab.measure: start | end | stop",
        'case "$1" in',
        "start)", *start, *begin[1:], ";;",
        "loads)", *start, ";;",
        "begin)", *begin, ";;",
        "end)", *end, ";;",
        "stop)", *stop, "true", ";;",
        '*) echo "usage: $0 start|loads|begin|end|stop" >&2; exit 2;;',
        "esac", "",
    ])


def probe_command(load: StartedLoad) -> str:
    tag = f"{MARK}{load.index}"
    return f'echo "{tag} probe"; {load.part.probe}; echo "{tag} probe-end"'


def parse_probes(lines: Sequence[str], loads: Sequence[StartedLoad]) -> dict[int, str]:
    """What :func:`probe_command` printed, by load index."""
    lines = list(lines)
    result = {}
    for load in loads:
        if not load.part.probe:
            continue
        tag = f"{MARK}{load.index}"
        try:
            begin = lines.index(f"{tag} probe")
            end = lines.index(f"{tag} probe-end", begin)
        except ValueError:
            raise ProgramFailed(f"the probe of load {load.part.kind} is missing from the "
                                f"board's output: {lines[-10:]}") from None
        result[load.index] = "\n".join(lines[begin + 1:end]).strip()
    return result


def evidence_command(loads: Sequence[StartedLoad]) -> str:
    parts = []
    for load in loads:
        tag = f"{MARK}{load.index}"
        parts.append(f'if kill -0 $(cat {load.pidfile}) 2>/dev/null; then echo "{tag} alive"; '
                     f'else echo "{tag} gone"; fi; echo "{tag} log"; tail -n 40 {load.log}; '
                     # a log's last line may lack its newline
                     f'echo; echo "{tag} tally"; '
                     f"grep -E -x '{PROGRESS_LINE}' {load.log} | sort | uniq -c; "
                     f'echo "{tag} end"')
    parts += [probe_command(load) for load in loads if load.part.probe]
    return "; ".join(parts) if parts else "true"


def parse_evidence(lines: Sequence[str], started: Sequence[StartedLoad],
                   probes_before: dict[int, str] | None = None) -> list[Evidence]:
    """The evidence of each load from the window's end output; ``probes_before`` is what
    the probes printed when the window opened (:func:`parse_probes` of its start)."""
    lines = list(lines)
    probes = parse_probes(lines, started)
    result = []
    for load in started:
        tag = f"{MARK}{load.index}"
        try:
            state = next(line for line in lines if line in (f"{tag} alive", f"{tag} gone"))
            begin = lines.index(f"{tag} log")
            counted = lines.index(f"{tag} tally", begin)
            end = lines.index(f"{tag} end", counted)
        except (StopIteration, ValueError):
            raise ProgramFailed(f"the evidence of load {load.part.kind} is missing from the "
                                f"board's output: {lines[-10:]}") from None
        result.append(Evidence(alive=state.endswith("alive"),
                               log="\n".join(lines[begin + 1:counted]).strip(),
                               probe=probes.get(load.index, ""),
                               probe_before=(probes_before or {}).get(load.index, ""),
                               tally=_uniq_counts(lines[counted + 1:end], load)))
    return result


def _uniq_counts(lines: Sequence[str], load: StartedLoad) -> dict[str, int]:
    """``uniq -c``'s output as a mapping."""
    counts = {}
    for line in lines:
        match = re.fullmatch(rf"\s*(\d+) ({PROGRESS_LINE})\s*", line)
        if match is None:
            raise ProgramFailed(f"the tally of load {load.part.kind} is garbled: {line!r}")
        counts[match.group(2)] = int(match.group(1))
    return counts


def _temperatures(lines: Sequence[str]) -> tuple[int, ...]:
    return tuple(int(line) for line in lines if re.fullmatch(r"-?\d+", line.strip()))


@attr.define
class HostStream:
    """The lab host's side of the network load: a TCP stream into the board for as long
    as the window lasts, counting what it sent.

    It connects again whenever the connection fails: the board's listener starts with
    the loads, and an emulator's forwarded port accepts (then resets) a connection before
    anything listens behind it. A send that waits for a busy board is not a failure."""

    host: str
    port: int
    sent: int = 0
    connections: int = 0
    error: str | None = None
    at_open: tuple[int, int] = (0, 0)
    """``sent`` and ``connections`` when the measurement window opened."""
    _stop: threading.Event = attr.Factory(threading.Event)
    _thread: threading.Thread | None = None

    def window_opened(self) -> None:
        self.at_open = (self.sent, self.connections)

    def judge(self) -> dict[str, int]:
        """What the stream sent during the window; it must have sent something over one
        connection that lasted the whole window. A connection that is cut and made again
        is what a board without a listener looks like behind an emulator's forwarded port
        (accepted, then reset), so it proves nothing."""
        sent = self.sent - self.at_open[0]
        cut = self.connections - self.at_open[1]
        where = f"the host's TCP stream to {self.host}:{self.port}"
        if self.at_open[1] == 0 or cut:
            raise LoadNotEffective(
                f"load not effective: {where} had no connection that lasted the window "
                f"({self.at_open[1]} made before it, {cut} during it; last error: "
                f"{self.error})")
        if sent == 0:
            raise LoadNotEffective(f"load not effective: {where} sent nothing during the "
                                   f"window (last error: {self.error})")
        return {"host_stream_bytes": sent, "host_stream_connections": self.connections}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._send, daemon=True)
        self._thread.start()

    def _send(self) -> None:
        block = bytes(64 * 1024)
        while not self._stop.is_set():
            try:
                with socket.create_connection((self.host, self.port), timeout=5) as conn:
                    self.connections += 1
                    while not self._stop.is_set():
                        try:
                            self.sent += conn.send(block)
                        except TimeoutError:
                            continue
            except OSError as error:
                self.error = f"{type(error).__name__}: {error}"
                self._stop.wait(0.5)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)


def run_window(shell: Shell, *, program: Sequence[str], parts: Sequence[LoadPart], cpus: int,
               duration_s: int, progress: Callable[[str], None],
               traffic: HostTraffic | None = None,
               load_cpus: Sequence[int] | None = None,
               conditions: CaseConditions | None = None) -> Window:
    """Run ``program`` (which lasts ``duration_s``) under ``parts`` and prove the loads.

    ``cpus`` is how many CPUs the loads are sized for; ``load_cpus`` the CPUs they can run
    on, when that is not all of them (the rest isolated for the measurement): their
    utilisation is the proof.

    Raises :class:`LoadNotEffective` when a load did not run throughout,
    :class:`RunNotValid` when the board's ``conditions`` did not match while it ran, and
    :class:`ProgramFailed` when the program did not complete."""
    loads = started_loads(parts)
    if any(part.kind == "network" for part in parts) and traffic is None:
        raise ValueError("the network load needs the board's traffic addresses")
    script = window_script(program, loads, cpus, duration_s + LOAD_OVERRUN_S,
                           conditions=conditions, window_s=duration_s)
    put_file(shell, script.encode(), WINDOW_SCRIPT)
    stream = None
    try:
        if traffic is not None and any(part.kind == "network" for part in parts):
            stream = HostStream(traffic.stream_host, traffic.stream_port)
            stream.start()
        before_lines = shell.run_check(f"sh {WINDOW_SCRIPT} start",
                                       timeout=LOADED_SHELL_TIMEOUT_S)
        opened = WindowStart.parse(program, before_lines, loads, load_cpus)
        if stream is not None:
            stream.window_opened()
        _wait_quietly(duration_s, progress)
        end_lines = shell.run_check(f"sh {WINDOW_SCRIPT} end",
                                    timeout=PROGRAM_OVERRUN_S + LOADED_SHELL_TIMEOUT_S)
    except BaseException:
        # the failure that got here is the one to report; a console that fails the stop
        # too is already lost, and the strategy powers the board off after the case
        _stop(shell, stream, loads, quiet=True)
        raise
    _stop(shell, stream, loads, quiet=False)
    exit_code = program_exit_code(program, end_lines)
    output = "\n".join(shell.run_check(f"tail -n 60 {PROGRAM_OUT}"))
    return judge_window(program, parts, opened, end_lines, exit_code, output, cpus=cpus,
                        duration_s=duration_s, load_cpus=load_cpus, stream=stream,
                        conditions=conditions)


@attr.frozen
class WindowRun:
    """The windows of an adaptive run, the gaps between them (the time the program did not
    measure while the host read a window back and started the next, the load running on),
    and why it stopped."""

    windows: tuple[Window, ...]
    gaps_s: tuple[float, ...]
    stopped: str


def run_windows(shell: Shell, *, program: Sequence[str], parts: Sequence[LoadPart], cpus: int,
                window_s: int, cap_s: int, after_window: Callable[[int, Window], str | None],
                progress: Callable[[str], None], traffic: HostTraffic | None = None,
                load_cpus: Sequence[int] | None = None,
                conditions: CaseConditions | None = None) -> WindowRun:
    """``program`` (which lasts ``window_s``) in consecutive windows under ``parts``, which
    start once and run on until the last window ends, up to ``cap_s`` of measurement.
    After each window ``after_window(index, window)`` reads what it needs from the board
    and says why to stop (None: go on); the console is quiet while a window runs.

    Each window's loads are proven as :func:`run_window` proves them (over that window);
    raises :class:`LoadNotEffective`, :class:`RunNotValid` or :class:`ProgramFailed` as it
    does."""
    loads = started_loads(parts)
    if any(part.kind == "network" for part in parts) and traffic is None:
        raise ValueError("the network load needs the board's traffic addresses")
    if not 0 < window_s <= cap_s:
        raise ValueError(f"the window ({window_s} s) must be positive and at most the cap "
                         f"({cap_s} s)")
    put_file(shell, window_script(program, loads, cpus, adaptive_load_seconds(window_s, cap_s),
                                  conditions=conditions, window_s=window_s).encode(),
             WINDOW_SCRIPT)
    stream = None
    windows: list[Window] = []
    gaps: list[float] = []
    stopped = f"the cap of {cap_s} s"
    try:
        if traffic is not None and any(part.kind == "network" for part in parts):
            stream = HostStream(traffic.stream_host, traffic.stream_port)
            stream.start()
        shell.run_check(f"sh {WINDOW_SCRIPT} loads", timeout=LOADED_SHELL_TIMEOUT_S)
        ended = None
        for index in range(math.ceil(cap_s / window_s)):
            before = shell.run_check(f"sh {WINDOW_SCRIPT} begin", timeout=LOADED_SHELL_TIMEOUT_S)
            if ended is not None:
                gaps.append(round(time.monotonic() - ended, 3))
            opened = WindowStart.parse(program, before, loads, load_cpus)
            if stream is not None:
                stream.window_opened()
            _wait_quietly(window_s, progress)
            ended = time.monotonic()
            end_lines = shell.run_check(f"sh {WINDOW_SCRIPT} end",
                                        timeout=PROGRAM_OVERRUN_S + LOADED_SHELL_TIMEOUT_S)
            exit_code = program_exit_code(program, end_lines)
            output = "\n".join(shell.run_check(f"tail -n 60 {PROGRAM_OUT}"))
            window = judge_window(program, parts, opened, end_lines, exit_code, output,
                                  cpus=cpus, duration_s=window_s, load_cpus=load_cpus,
                                  stream=stream, conditions=conditions)
            windows.append(window)
            reason = after_window(index, window)
            if reason is not None:
                stopped = reason
                break
    except BaseException:
        _stop(shell, stream, loads, quiet=True)
        raise
    _stop(shell, stream, loads, quiet=False)
    return WindowRun(tuple(windows), tuple(gaps), stopped)


def adaptive_load_seconds(window_s: int, cap_s: int) -> int:
    """How long an adaptive run's loads run unless stopped: through every window and every
    gap the host may take before a timeout of its own ends the run. The gaps are not known
    in advance (on a loaded emulated board, half a minute each): a load bound to the cap
    alone ran out before the last window and voided it. The host stops the loads after
    the last window; this bound only ends them if it never comes back."""
    return cap_s + LOAD_OVERRUN_S + math.ceil(cap_s / window_s) * WINDOW_GAP_ALLOWANCE_S


def started_loads(parts: Sequence[LoadPart]) -> list[StartedLoad]:
    """The loads of a window, numbered as :func:`window_script` numbers their files."""
    return [StartedLoad(index, part) for index, part in enumerate(parts)]


@attr.frozen
class WindowStart:
    """What the window's ``start`` action printed: the board's state as the window opened."""

    probes: dict[int, str]
    temperatures_mc: tuple[int, ...]
    cpu_times: CpuTimes
    loadavg: str | None = None

    @classmethod
    def parse(cls, program: Sequence[str], lines: Sequence[str],
              loads: Sequence[StartedLoad],
              load_cpus: Sequence[int] | None = None) -> "WindowStart":
        lines = list(lines)
        if f"{MARK}started" not in lines:
            raise ProgramFailed(f"{program[0]} was not started: {lines[-5:]}")
        split = lines.index(f"{MARK}stat")
        loadavg = None
        if f"{MARK}loadavg-before" in lines:
            at = lines.index(f"{MARK}loadavg-before") + 1
            loadavg = lines[at].strip() if at < len(lines) else None
        return cls(probes=parse_probes(lines, loads),
                   temperatures_mc=_temperatures(lines[lines.index(f"{MARK}thermal") + 1:split]),
                   cpu_times=CpuTimes.parse("\n".join(lines[split + 1:]), load_cpus),
                   loadavg=loadavg)


def program_exit_code(program: Sequence[str], end_lines: Sequence[str]) -> int:
    """The program's exit status from the window's ``end`` output."""
    rc_line = next((line for line in end_lines if line.startswith(f"{MARK}rc=")), None)
    if rc_line is None or rc_line == f"{MARK}rc=none":
        raise ProgramFailed(f"{program[0]} did not finish within {PROGRAM_OVERRUN_S} s of its "
                            f"window: {list(end_lines)[-5:]}")
    exit_text = rc_line.removeprefix(f"{MARK}rc=")
    if not exit_text.isdigit():
        raise ProgramFailed(f"{program[0]}: garbled exit status {exit_text!r}")
    return int(exit_text)


def judge_window(program: Sequence[str], parts: Sequence[LoadPart], opened: WindowStart,
                 end_lines: Sequence[str], exit_code: int, output: str, *, cpus: int,
                 duration_s: int, load_cpus: Sequence[int] | None = None,
                 stream: "HostStream | None" = None,
                 conditions: CaseConditions | None = None) -> Window:
    """The window from what the board printed (by whichever runner read it: labgrid's
    shell here, a LAVA job's log in rtlab.lava), with its ``conditions`` checked
    (:class:`RunNotValid` when they did not match) and the loads proven or refused."""
    found = None
    # a program that failed reports that (the caller's error), not the checks it cut short
    if conditions is not None and exit_code == 0:
        try:
            found = conditions.judge(end_lines)
        except ConditionsUnreadable as error:
            raise ProgramFailed(str(error)) from None
        if found is not None and not found.valid:
            raise RunNotValid(found)
    loads = started_loads(parts)
    after = CpuTimes.parse("\n".join(_section(end_lines, "stat", "stat-end")), load_cpus)
    utilisation = after.utilisation_since(opened.cpu_times)
    loadavg = "\n".join(_section(end_lines, "loadavg", "thermal")).strip()
    temps_after = _temperatures(_section(end_lines, "thermal"))
    evidence = parse_evidence(end_lines, loads, opened.probes)
    facts = _verify(parts, evidence, utilisation, loadavg, cpus, duration_s, stream)
    return Window(exit_code, output, utilisation, loadavg,
                  (opened.temperatures_mc, temps_after), facts, opened.loadavg, found)


def _stop(shell: Shell, stream: "HostStream | None", loads: Sequence[StartedLoad],
          *, quiet: bool) -> None:
    if stream is not None:
        stream.stop()
    if not loads:
        return
    try:
        shell.run(f"sh {WINDOW_SCRIPT} stop", timeout=LOADED_SHELL_TIMEOUT_S)
    except Exception:
        if not quiet:
            raise
        log.exception("stopping the loads after a failed window failed too")


def _section(lines: Sequence[str], begin: str, end: str | None = None) -> list[str]:
    """The board's output between the markers ``begin`` and ``end`` (or the last line)."""
    lines = list(lines)
    try:
        first = lines.index(f"{MARK}{begin}") + 1
        last = lines.index(f"{MARK}{end}", first) if end is not None else len(lines)
    except ValueError:
        raise ProgramFailed(f"the board's output lacks its {begin!r} section: "
                            f"{lines[-5:]}") from None
    return lines[first:last]


def _wait_quietly(duration_s: int, progress: Callable[[str], None]) -> None:
    step = max(10, duration_s // 10)
    waited = 0
    while waited < duration_s:
        chunk = min(step, duration_s - waited)
        time.sleep(chunk)
        waited += chunk
        if duration_s >= 30:
            progress(f"{waited}/{duration_s} s")


def _verify(parts: Sequence[LoadPart], evidence: Sequence[Evidence], utilisation: float,
            loadavg: str, cpus: int, duration_s: int,
            stream: HostStream | None) -> dict[str, Any]:
    facts: dict[str, Any] = {"cpu_utilisation": round(utilisation, 3), "loadavg": loadavg,
                             "loads": {}}
    for part, proof in zip(parts, evidence, strict=True):
        facts["loads"][part.kind] = part.verify(attr.evolve(proof, window_s=float(duration_s)))
    if stream is not None:
        # the emulator's user network takes megabytes into its buffers whether the board
        # reads them or not: what reached the board is judged from its own counters too
        facts["loads"]["network"].update(stream.judge())
    # the field's proof: the CPUs the loads may use were as busy as the loads ask. The
    # tasks' own CPU times cannot stand in: on an emulated board they run on another clock
    # (several times faster than its uptime), so only /proc/stat's ratio is comparable
    needed = max((part.min_utilisation(cpus) for part in parts), default=0.0)
    facts["min_utilisation"] = round(needed, 3)
    if utilisation < needed:
        kinds = "+".join(part.kind for part in parts)
        # rounded down, so that a figure short of the minimum never reads as reaching it
        shown = math.floor(utilisation * 1000) / 1000
        raise LoadNotEffective(f"load not effective: CPU utilisation {shown:.1%} during "
                               f"the measurement, expected at least {needed:.1%} for {kinds}")
    if duration_s >= LOADAVG_MIN_WINDOW_S and needed >= LOADAVG_MIN_UTILISATION:
        one_minute = float(loadavg.split()[0])
        if one_minute < 1.0:
            raise LoadNotEffective(f"load not effective: 1-minute load average {one_minute} "
                                   f"after {duration_s} s under load")
    return facts
