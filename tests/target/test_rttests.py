"""The rt-tests besides cyclictest, one test case per tool (suite.yaml's ``rt_tests``).

Latency tools (ptsematest, pmqtest, sigwaittest, signaltest, oslat) are judged by
thresholds.yaml under the tool's name like a cyclictest scenario; pi_stress and pip_stress
by whether priority inheritance resolved their inversions. A run that did not set up an
inversion proves nothing either way and is skipped with that reason, never passed.
"""

import shlex

import pytest

from rtlab.measure import rttests
from rtlab.measure.rttests.board import RT_JSON_ON_BOARD as JSON_ON_BOARD
from rtlab.measure.rttests.board import board_run, judge, rt_tool_wait_s
from rtlab.measure.window import ProgramFailed, run_window
from rtlab.util.errors import InfrastructureError
from rtlab.verdict.judge import judge_rt_tool, rt_tool_limits

pytestmark = pytest.mark.rtlab_kind("rt-test")


@pytest.fixture
def rt_run(request, begin_case, board_name, thresholds_flavour, thresholds, record, suite,
           rt_test, progress):
    """Run one tool on the idle board; anything that goes wrong here is an error."""
    duration_s = request.config.option.rt_duration
    case = begin_case(rt_test, scenario=rt_test, loads={})
    shell = request.getfixturevalue("shell")
    system_info = request.getfixturevalue("system_info")
    run = board_run(rt_test, duration_s=duration_s, cpus=system_info.cpus,
                            priority=suite.priority, json_path=JSON_ON_BOARD)
    record.facts["command"] = list(run.argv)
    shell.run_check(f"rm -f {JSON_ON_BOARD}")
    wait_s = rt_tool_wait_s(rt_test, duration_s)
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
        result = judge(run, exit_status=window.exit_code, output=window.output,
                               json_text=json_text, source=case)
    except rttests.ToolUnsupported as error:
        pytest.skip(str(error))
    except rttests.RtTestsParseError as error:
        raise InfrastructureError(str(error)) from error
    if isinstance(result, rttests.FunctionalResult):
        return result, {}
    limits = rt_tool_limits(thresholds.lookup(board_name, thresholds_flavour, rt_test))
    record.facts["thresholds"] = {m: {"value": t.value, "source": t.source}
                                  for m, t in limits.items()}
    return result, limits


def test_rt_tool(rt_run, record, record_property):
    result, limits = rt_run
    judged = judge_rt_tool(result, limits)
    record.facts.update(judged.facts)
    if isinstance(result, rttests.FunctionalResult):
        record_property("inversions", result.inversions)
        if judged.skip is not None:
            pytest.skip(judged.skip)
        assert not judged.violations, judged.violations[0]
        return
    for thread in (result.threads[index] for index in result.gated):
        record_property(f"thread{thread.thread}_max_us", thread.max_us)
        record_property(f"thread{thread.thread}_avg_us", thread.avg_us)
    assert not judged.violations, "; ".join(judged.violations)
