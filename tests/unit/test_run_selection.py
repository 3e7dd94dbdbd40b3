"""What part of the suite `rtlab run` asks pytest for: the matrix options, or the cases
one by one (--cases), never both."""

import subprocess
import sys

import pytest

from rtlab.cli import main, parser
from rtlab.run.cli import _run_argv
from rtlab.run.runner import Selection
from rtlab.util.paths import REPO_ROOT


def test_cases_go_to_pytest_as_they_are():
    selection = Selection(cases="hackbench/100us,pi_stress")
    assert selection.pytest_args() == ["--rt-cases", "hackbench/100us,pi_stress"]


def test_matrix_options_go_to_pytest():
    selection = Selection(scenarios="idle,cpu100", intervals="1000", rt_tests="none")
    assert selection.pytest_args() == ["--rt-scenarios", "idle,cpu100", "--rt-intervals",
                                       "1000", "--rt-tests", "none"]


@pytest.mark.parametrize("matrix", [{"scenarios": "idle"}, {"intervals": "100"},
                                    {"rt_tests": "none"}])
def test_cases_and_a_matrix_option_are_refused(matrix):
    with pytest.raises(ValueError, match="--cases names the cases itself"):
        Selection(cases="idle/1000us", **matrix)


def test_a_tier_goes_to_pytest_and_excludes_the_other_selections():
    assert Selection(tier="gate").pytest_args() == ["--rt-tier", "gate"]
    with pytest.raises(ValueError, match="--tier names the cases itself: give it without "
                                         "--scenarios"):
        Selection(tier="gate", scenarios="idle")
    with pytest.raises(ValueError, match="--cases and --tier both name the cases"):
        Selection(tier="gate", cases="idle/1000us")


def test_the_command_refuses_both_before_touching_the_lab(capsys, tmp_path):
    # no coordinator listens at this address: the refusal comes first
    code = main(["run", "--place", "imx6q-01", "--image", str(tmp_path / "sdcard.img"),
                 "--coordinator", "127.0.0.1:9", "--cases", "idle/1000us",
                 "--scenarios", "idle", "--out", str(tmp_path)])
    assert code == 2
    assert "--cases names the cases itself" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def collected(selection: Selection) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *selection.test_paths(), "--collect-only", "-q",
         "-p", "no:cacheprovider", *selection.pytest_args()],
        capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_an_adaptive_run_measures_the_rt_tests_first_and_a_fixed_one_in_suite_order():
    """In an adaptive run the rt-tests take the whole duration and most latency cases
    less: longest first, so that no board of a shared plan ends with an hour alone."""
    adaptive = collected(Selection(cases="idle/1000us,pi_stress", window_s=60))
    assert adaptive == ["tests/target/test_rttests.py::test_rt_tool[pi_stress]",
                        "tests/target/test_latency.py::test_latency[idle-1000us]"]
    fixed = collected(Selection(cases="idle/1000us,pi_stress"))
    assert fixed == ["tests/target/test_latency.py::test_latency[idle-1000us]",
                     "tests/target/test_rttests.py::test_rt_tool[pi_stress]"]


def test_the_trace_choice_goes_to_pytest_and_a_shared_plan_passes_it_on():
    assert Selection(cases="idle/1000us", trace="always").pytest_args() == [
        "--rt-cases", "idle/1000us", "--rt-trace", "always"]
    assert Selection(cases="idle/1000us").pytest_args() == ["--rt-cases", "idle/1000us"]
    with pytest.raises(ValueError, match="--trace must be one of auto, always, never"):
        Selection(trace="sometimes")
    # each place of a shared plan runs `rtlab run` again: the choice must reach it
    args = parser().parse_args(["run", "--board", "imx6q", "--image", "i.img",
                                      "--boards", "2", "--trace", "always",
                                      "--trace-tracer", "function"])
    assert _run_argv(args)[-4:] == ["--trace", "always", "--trace-tracer", "function"]
    assert Selection(trace="always", trace_tracer="function").pytest_args() == [
        "--rt-trace", "always", "--rt-trace-tracer", "function"]
    with pytest.raises(ValueError, match="--trace-tracer must be one of nop, function"):
        Selection(trace_tracer="irqsoff")
