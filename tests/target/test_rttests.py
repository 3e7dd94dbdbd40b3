"""The rt-tests besides cyclictest, one test case per tool (suite.yaml's ``rt_tests``).

Latency tools (ptsematest, pmqtest, sigwaittest, signaltest, oslat) are judged by
thresholds.yaml under the tool's name like a cyclictest scenario; pi_stress and pip_stress
by whether priority inheritance resolved their inversions. A run that did not set up an
inversion proves nothing either way and is skipped with that reason, never passed.
"""

import shlex

import pytest

from rtlab import rttests
from rtlab.errors import InfrastructureError
from rtlab.measure import ProgramFailed, run_window
from rtlab.thresholds import check

JSON_ON_BOARD = "/tmp/rtlab-rttest.json"


@pytest.fixture
def rt_run(request, begin_case, board_name, flavour, thresholds, record, suite, rt_test,
           progress):
    """Run one tool on the idle board; anything that goes wrong here is an error."""
    duration_s = request.config.option.rt_duration
    case = begin_case(rt_test, scenario=rt_test, loads={})
    shell = request.getfixturevalue("shell")
    system_info = request.getfixturevalue("system_info")
    run = rttests.board_run(rt_test, duration_s=duration_s, cpus=system_info.cpus,
                            priority=suite.priority, json_path=JSON_ON_BOARD)
    record.facts["command"] = list(run.argv)
    shell.run_check(f"rm -f {JSON_ON_BOARD}")
    # pip_stress has no duration of its own: its repeated runs take well under a second
    wait_s = duration_s if rttests.TESTS[rt_test].duration else 1
    try:
        window = run_window(shell, program=run.argv, parts=(), cpus=system_info.cpus,
                            duration_s=wait_s, progress=lambda text: progress(f"{case}: {text}"))
    except ProgramFailed as error:
        raise InfrastructureError(str(error)) from error
    json_text = None
    if run.json_path is not None:
        lines = shell.run_check(f"cat {shlex.quote(run.json_path)} 2>/dev/null "
                                "|| echo rtlab-no-json")
        json_text = None if lines == ["rtlab-no-json"] else "\n".join(lines)
    try:
        result = rttests.judge(run, exit_status=window.exit_code, output=window.output,
                               json_text=json_text, source=case)
    except rttests.ToolUnsupported as error:
        pytest.skip(str(error))
    except rttests.RtTestsParseError as error:
        raise InfrastructureError(str(error)) from error
    if isinstance(result, rttests.FunctionalResult):
        return result, {}
    limits = _latency_limits(rt_test, thresholds.lookup(board_name, flavour, rt_test))
    record.facts["thresholds"] = {m: {"value": t.value, "source": t.source}
                                  for m, t in limits.items()}
    return result, limits


def test_rt_tool(rt_run, record, record_property):
    result, limits = rt_run
    if isinstance(result, rttests.FunctionalResult):
        record.facts["functional"] = {"verdict": result.verdict.value,
                                      "inversions": result.inversions,
                                      "reason": result.reason,
                                      "evidence": list(result.evidence[-5:])}
        record_property("inversions", result.inversions)
        if result.verdict is rttests.Verdict.INCONCLUSIVE:
            pytest.skip(f"priority inheritance not exercised: {result.reason}")
        assert result.verdict is rttests.Verdict.PASS, f"{result.tool}: {result.reason}"
        return

    gated = [result.threads[index] for index in result.gated]
    record.facts["threads"] = [
        {"thread": t.thread, "cpu": t.cpu, "samples": t.samples, "min_us": t.min_us,
         "avg_us": t.avg_us, "max_us": t.max_us, "gated": t.thread in result.gated}
        for t in result.threads]
    for thread in gated:
        record_property(f"thread{thread.thread}_max_us", thread.max_us)
        record_property(f"thread{thread.thread}_avg_us", thread.avg_us)
    # judged per measuring thread; a thread without a known CPU is named by its number
    violations = [v for t in gated
                  for v in check({"max": t.max_us, "avg": t.avg_us}, limits,
                                 t.cpu if t.cpu is not None else t.thread)]
    assert not violations, "; ".join(v.message for v in violations)


def _latency_limits(tool, limits):
    """These tools keep no histogram: a p99.9 limit they inherit is cyclictest's (the
    thresholds file refuses one set for the tool itself)."""
    return {metric: limit for metric, limit in limits.items() if metric != "p99_9_us"}
