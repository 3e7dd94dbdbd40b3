"""What part of the suite `rtlab run` asks pytest for: the matrix options, or the cases
one by one (--cases), never both."""

import pytest

from rtlab.cli import main
from rtlab.lab.runner import Selection


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
