"""A tool's run on a board (:func:`board_run`: the argv, run in the background, and what its
JSON must show) and its result from what the board gave back (:func:`judge`); the verdict on
a functional tool that had to be killed (:func:`hung`) and on repeated runs (:func:`combine`).
"""

from collections.abc import Sequence

import attr

from rtlab.measure.cyclictest import KERNEL_LOG, fifo_from_start, require_int
from rtlab.measure.rttests import (
    TESTS,
    FunctionalResult,
    LatencyResult,
    RtTestsParseError,
    Verdict,
    _lines,
    check_console,
)
from rtlab.measure.rttests.oslat import oslat_command, parse_oslat_json
from rtlab.measure.rttests.pairs import _pair_command, parse_pair_json
from rtlab.measure.rttests.pi_stress import _pi_total, parse_pi_stress, pi_stress_command
from rtlab.measure.rttests.pip_stress import _PIP_PASS, parse_pip_stress, pip_stress_command
from rtlab.measure.rttests.signaltest import parse_signaltest_json, signaltest_command

# ------------------------------------------------- hung and repeated runs ----


def hung(tool: str, source: str, *, timeout_s: float, stdout: str = "") -> FunctionalResult:
    """The verdict on a functional tool that had to be killed after ``timeout_s``: without
    priority inheritance its high-priority thread never gets the mutex."""
    if tool not in TESTS or not TESTS[tool].functional:
        raise ValueError(f"{tool!r} is not a functional test")
    out, kernel = _lines(stdout)
    return FunctionalResult(
        source=source, tool=tool, verdict=Verdict.FAIL, inversions=_pi_total(out),
        exit_status=None,
        reason=f"no result within {timeout_s:g} s: deadlocked (priority inheritance?)",
        evidence=tuple(line for _, line in out[-5:]), kernel_log_lines=tuple(kernel),
    )


def combine(results: Sequence[FunctionalResult]) -> FunctionalResult:
    """One verdict from repeated runs of one tool (pip_stress sets up its inversion only
    some of the time): any FAIL fails, else any PASS passes, else inconclusive."""
    if not results:
        raise ValueError("no results to combine")
    tools = {result.tool for result in results}
    if len(tools) != 1:
        raise ValueError(f"results of several tools: {sorted(tools)}")
    by_verdict = {verdict: [r for r in results if r.verdict == verdict] for verdict in Verdict}
    verdict = next(v for v in (Verdict.FAIL, Verdict.PASS, Verdict.INCONCLUSIVE)
                   if by_verdict[v])
    counts = [result.inversions for result in results]
    inversions = None if None in counts else sum(c for c in counts if c is not None)
    decisive = by_verdict[verdict]
    return FunctionalResult(
        source=", ".join(result.source for result in results), tool=tools.pop(),
        verdict=verdict, inversions=inversions, exit_status=decisive[0].exit_status,
        reason=f"{len(decisive)} of {len(results)} runs {verdict.value}: {decisive[0].reason}",
        evidence=tuple(line for result in decisive for line in result.evidence),
        kernel_log_lines=tuple(line for r in results for line in r.kernel_log_lines),
    )


# -------------------------------------------------------------- on a board ----

# pip_stress sets up its inversion only now and then (1 of 23 runs on the emulated
# i.MX6Q): it is repeated until one run uses priority inheritance, at most this often
PIP_STRESS_RUNS = 20
PIP_STRESS_OUT = "/tmp/rtlab-pip_stress.out"
# a functional tool still running this long past its duration is deadlocked
HANG_MARGIN_S = 60
RUN_MARK = "rtlab-run-rc="
KILLED = 128 + 9


# where a board's rt-tests write their JSON (board_run's json_path)
RT_JSON_ON_BOARD = "/tmp/rtlab-rttest.json"


def rt_tool_wait_s(tool: str, duration_s: int) -> int:
    """How long a window of ``tool`` lasts: pip_stress has no duration of its own, and its
    repeated runs take well under a second."""
    return duration_s if TESTS[tool].duration else 1


@attr.frozen
class BoardRun:
    """How a tool runs on a board of ``cpus`` CPUs: the argv run in the background (its
    output goes to a file, nothing to the console), the tool's own command inside it, and
    what its JSON file must show."""

    tool: str
    argv: tuple[str, ...]
    tool_argv: tuple[str, ...]
    json_path: str | None
    expected_threads: int | None
    """None: the tool decides (signaltest's ring, pi_stress's groups)."""
    timeout_s: int | None = None
    """After how long the board kills a functional tool as deadlocked (None: never)."""


def board_run(tool: str, *, duration_s: int, cpus: int, priority: int,
              json_path: str) -> BoardRun:
    """The run of ``tool`` on a board. oslat measures CPUs 1.. (its main thread lives on
    CPU 0); pi_stress runs in a session of its own, because on a deadlock it kills its
    whole process group; the functional tools run under a ``timeout`` that turns a
    deadlock into exit status 137 (SIGKILL)."""
    if tool not in TESTS:
        raise ValueError(f"unknown rt-test {tool!r} (valid: {', '.join(TESTS)})")
    require_int("cpus", cpus, 1, None)
    timeout = ["timeout", "-s", "KILL", str(duration_s + HANG_MARGIN_S)]
    # the measuring tools start under SCHED_FIFO (fifo_from_start): no thread of theirs
    # is ever an ordinary task the loads could keep off its CPU
    if tool in ("ptsematest", "pmqtest", "sigwaittest"):
        argv = _pair_command(tool, duration_s, json_path, priority, 1000)
        return BoardRun(tool, tuple(fifo_from_start(argv, priority)), tuple(argv),
                        json_path, cpus)
    if tool == "signaltest":
        argv = signaltest_command(duration_s=duration_s, json_path=json_path,
                                  priority=priority)
        return BoardRun(tool, tuple(fifo_from_start(argv, priority)), tuple(argv),
                        json_path, None)
    if tool == "oslat":
        if cpus < 2:
            raise ValueError("oslat needs a CPU besides CPU 0, where its main thread runs")
        argv = oslat_command(duration_s=duration_s, json_path=json_path,
                             cpus=f"1-{cpus - 1}" if cpus > 2 else "1", priority=priority)
        return BoardRun(tool, tuple(fifo_from_start(argv, priority)), tuple(argv),
                        json_path, cpus - 1)
    if tool == "pi_stress":
        argv = pi_stress_command(duration_s=duration_s, json_path=json_path)
        return BoardRun(tool, ("setsid", *timeout, *argv), tuple(argv), json_path, None,
                        duration_s + HANG_MARGIN_S)
    argv = pip_stress_command()
    # Stop at the first run that used priority inheritance, failed or hung. Each run gets
    # a session of its own: deadlocked, its three processes (one spinning at SCHED_FIFO)
    # must all be killed, and timeout kills only the first; the rest would block the
    # loop (they hold its output) and spin beside the next cases.
    out, leader = PIP_STRESS_OUT, f"{PIP_STRESS_OUT}.pid"
    loop = (f"i=0; while [ $i -lt {PIP_STRESS_RUNS} ]; do i=$((i+1)); "
            f"{' '.join(timeout[:3])} {HANG_MARGIN_S} "
            f"setsid sh -c 'echo $$ >{leader}; exec {argv[0]}' >{out} 2>&1; rc=$?; "
            f"kill -KILL -$(cat {leader}) 2>/dev/null; "
            f'cat {out}; echo "{RUN_MARK}$rc"; '
            f'[ $rc -ne 0 ] && break; if grep -q "{_PIP_PASS}" {out}; then break; fi; done')
    return BoardRun(tool, ("sh", "-c", loop), tuple(argv), None, None, HANG_MARGIN_S)


def judge(run: BoardRun, *, exit_status: int, output: str, json_text: str | None,
          source: str) -> LatencyResult | FunctionalResult:
    """The result of a board run from its exit status, its console output (stdout and
    stderr together) and its JSON file. Raises :class:`RtTestsParseError` (or
    :class:`ToolUnsupported`) for anything that is not a complete run."""
    tool = run.tool
    if tool == "pip_stress":
        return combine(_pip_stress_runs(output, source))
    if tool == "pi_stress":
        if exit_status == KILLED:
            return hung(tool, source, timeout_s=run.timeout_s or HANG_MARGIN_S, stdout=output)
        # stdout and stderr come merged from the board
        result = parse_pi_stress(output, source, exit_status=exit_status,
                                 json_text=json_text, argv=run.tool_argv)
        if result.verdict is not Verdict.FAIL and json_text is None:
            # its JSON must agree with its summary before the run is called anything
            raise RtTestsParseError(f"{source}: pi_stress wrote no JSON file")
        return result
    check_console(tool, output, source)
    if exit_status != 0:
        raise RtTestsParseError(f"{source}: {tool} exited with status {exit_status}: "
                                f"{output.strip()[-200:]!r}")
    if json_text is None:
        raise RtTestsParseError(f"{source}: {tool} wrote no JSON file")
    where = f"{source}: {run.json_path}"
    if tool == "signaltest":
        return parse_signaltest_json(json_text, where, argv=run.tool_argv)
    if tool == "oslat":
        return parse_oslat_json(json_text, where, argv=run.tool_argv,
                                expected_threads=run.expected_threads)
    return parse_pair_json(tool, json_text, where, argv=run.tool_argv,
                           expected_threads=run.expected_threads)


def _pip_stress_runs(output: str, source: str) -> list[FunctionalResult]:
    results = []
    chunk: list[str] = []
    for line in output.replace("\r\n", "\n").split("\n"):
        if not line.startswith(RUN_MARK):
            chunk.append(line)
            continue
        status = line.removeprefix(RUN_MARK)
        if not status.isdigit():
            raise RtTestsParseError(f"{source}: garbled exit status line {line!r}")
        where = f"{source} (run {len(results) + 1})"
        text = "\n".join(chunk)
        if int(status) == KILLED:
            results.append(hung("pip_stress", where, timeout_s=HANG_MARGIN_S, stdout=text))
        else:
            results.append(parse_pip_stress(text, where, exit_status=int(status)))
        chunk = []
    trailing = [line for line in chunk if line.strip() and not KERNEL_LOG.match(line)]
    if trailing:
        raise RtTestsParseError(f"{source}: output after the last run's exit status "
                                f"(truncated?): {trailing[-1][:80]!r}")
    if not results:
        raise RtTestsParseError(f"{source}: no pip_stress run completed")
    return results
