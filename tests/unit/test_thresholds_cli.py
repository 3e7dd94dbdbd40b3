"""rtlab.verdict.cli (``rtlab thresholds check|show``) on the repository's files."""

import re

import pytest
from ruamel.yaml import YAML

from rtlab import cli
from rtlab.measure.suite import load_suite
from rtlab.util.paths import REPO_ROOT
from rtlab.verdict.cli import check, show
from rtlab.verdict.thresholds import ThresholdsError, load_thresholds

THRESHOLDS = REPO_ROOT / "thresholds.yaml"
SUITE = REPO_ROOT / "suite.yaml"


def raw() -> dict:
    """The file as plain YAML, read without rtlab."""
    return YAML(typ="safe").load(THRESHOLDS.read_text(encoding="utf-8"))


def raw_boards() -> dict[str, list[str]]:
    return {board: list(level["flavours"]) for board, level in raw()["boards"].items()}


def raw_limit(board: str, flavour: str, metric: str) -> int:
    return raw()["boards"][board]["flavours"][flavour][metric]


def line_number(pattern: str, *after: str) -> int:
    """1-based line of the first match of ``pattern`` past lines matching each of ``after``
    in turn."""
    lines = THRESHOLDS.read_text(encoding="utf-8").splitlines()
    start = 0
    for anchor in after:
        start = next(i for i in range(start, len(lines)) if re.search(anchor, lines[i])) + 1
    return next(i + 1 for i in range(start, len(lines)) if re.search(pattern, lines[i]))


def rows(table: str) -> list[list[str]]:
    return [re.split(r" {2,}", line.rstrip()) for line in table.splitlines()]


def test_check_counts_every_case_of_every_board():
    suite = load_suite(SUITE)
    boards = raw_boards()
    cases = (sum(len(flavours) for flavours in boards.values())
             * (len(suite.scenarios) * len(suite.intervals_us) + len(suite.rt_tests)))
    # the physical boards' limits all come from elsewhere so far: each flavour is listed
    provisional = ", ".join(sorted(f"{board}/{flavour}" for board in ("imx6q", "rpi3")
                                   for flavour in boards[board]))
    assert check(THRESHOLDS, SUITE) == (
        f"thresholds.yaml: valid; {len(boards)} boards, {cases} "
        "test cases (board/flavour/scenario/interval and rt-tests) resolve to limits; "
        f"provisional (not measured on this lab's boards): {provisional}")


def test_check_names_are_those_of_the_suite_given(tmp_path):
    # a limit for an rt-test is valid; one for a scenario the suite lacks is not
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text(
        "boards:\n  b:\n    flavours:\n      rt:\n        max_us: 100\n        scenarios:\n"
        "          ptsematest: {max_us: 200}\n          cpu75: {max_us: 300}\n",
        encoding="utf-8")
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE.read_text(encoding="utf-8"), encoding="utf-8")
    cases = len(load_suite(suite).scenarios) * 3 + len(load_suite(suite).rt_tests)
    assert check(thresholds, suite) == (f"{thresholds}: valid; 1 boards, {cases} test cases "
                                        "(board/flavour/scenario/interval and rt-tests) "
                                        "resolve to limits")
    suite.write_text(SUITE.read_text(encoding="utf-8").replace(
        "  cpu75:\n    loads: {cpu: {percent: 75}}\n", ""), encoding="utf-8")
    with pytest.raises(ThresholdsError, match=rf"^{re.escape(str(thresholds))}:8: unknown "
                                              r"scenario 'cpu75' \(expected one of: idle, "):
        check(thresholds, suite)


def test_show_prints_every_limit_with_its_line_and_reason():
    table = show(THRESHOLDS, SUITE, "imx6q", None, None, None)
    header, *body = rows(table)
    assert header == ["board", "flavour", "scenario", "interval", "metric", "limit", "from",
                      "provisional", "reason"]
    suite = load_suite(SUITE)
    # one max_us per flavour, scenario and interval, and per rt-test (which runs at no
    # interval of the suite's): the i.MX6Q sets nothing else
    assert len(body) == len(raw_boards()["imx6q"]) * (len(suite.scenarios) * 3
                                                       + len(suite.rt_tests))
    flavours = raw_boards()["imx6q"]
    limits = {flavour: raw_limit("imx6q", flavour, "max_us") for flavour in flavours}
    lines = {flavour: line_number(rf"^\s+max_us: {limits[flavour]}$", r"^  imx6q:",
                                  rf"^      {flavour}:") for flavour in flavours}
    reasons = {flavour: load_thresholds(THRESHOLDS).lookup("imx6q", flavour, "idle")[
        "max_us"].reason for flavour in flavours}
    for row in body:
        board, flavour, scenario, interval, metric, limit, source, provisional, reason = row
        # every i.MX6Q limit comes from elsewhere so far (thresholds.yaml provisional:)
        assert provisional == "yes"
        assert (board, metric) == ("imx6q", "max_us")
        if scenario in suite.rt_tests:
            assert interval == "-"
        else:
            assert scenario in suite.scenarios
            assert interval in ("100 µs", "1000 µs", "10000 µs")
        assert (limit, source) == (f"{limits[flavour]} µs",
                                   f"thresholds.yaml:{lines[flavour]}")
        # long reasons are cut to 70 characters
        full = reasons[flavour]
        assert reason == (full if len(full) <= 70 else full[:67] + "...")
    assert body[0][:4] == ["imx6q", "rt", "idle", "100 µs"]
    assert body[0][8].startswith("seed study: PREEMPT_RT on the i.MX6Q")
    # the columns line up
    start = table.splitlines()[0].index("from")
    assert {line.index("thresholds.yaml:") for line in table.splitlines()[1:]} == {start}


def test_show_one_case_of_an_emulated_board():
    table = show(THRESHOLDS, SUITE, "qemu-imx6q", "rt", "cpu50", 1000)
    max_us, avg_us = (raw_limit("qemu-imx6q", "rt", metric) for metric in ("max_us", "avg_us"))
    max_line = line_number(rf"^\s+max_us: {max_us}$", r"^  qemu-imx6q:", r"^      rt:")
    avg_line = line_number(rf"^\s+avg_us: {avg_us}$", r"^  qemu-imx6q:", r"^      rt:")
    reason = load_thresholds(THRESHOLDS).lookup("qemu-imx6q", "rt", "cpu50")["max_us"].reason
    assert rows(table)[1:] == [
        ["qemu-imx6q", "rt", "cpu50", "1000 µs", "max_us", f"{max_us} µs",
         f"thresholds.yaml:{max_line}", "-", reason[:67] + "..."],
        ["qemu-imx6q", "rt", "cpu50", "1000 µs", "avg_us", f"{avg_us} µs",
         f"thresholds.yaml:{avg_line}", "-", reason[:67] + "..."],
    ]


def test_show_one_rt_test_gives_its_limits_without_an_interval(tmp_path):
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text(
        "defaults: {p99_9_us: 90}\nboards:\n  b:\n    flavours:\n      rt:\n"
        "        max_us: 100\n        scenarios:\n"
        "          ptsematest: {avg_us: 20, reason: mutex hand-over}\n", encoding="utf-8")
    assert rows(show(thresholds, SUITE, "b", "rt", "ptsematest", None))[1:] == [
        ["b", "rt", "ptsematest", "-", "max_us", "100 µs", f"{thresholds}:6", "-", "-"],
        ["b", "rt", "ptsematest", "-", "avg_us", "20 µs", f"{thresholds}:8", "-",
         "mutex hand-over"],
    ]


def test_show_unknown_board_lists_the_valid_ones():
    with pytest.raises(ThresholdsError) as raised:
        show(THRESHOLDS, SUITE, "imx8", None, None, None)
    assert str(raised.value) == (f"thresholds.yaml: no board 'imx8' "
                                 f"(valid: {', '.join(raw_boards())})")


def test_show_unknown_flavour_or_scenario():
    with pytest.raises(ThresholdsError, match=re.escape(
            "thresholds.yaml: board 'imx6q' has no flavour 'preempt-lazy' (valid: "
            f"{', '.join(raw_boards()['imx6q'])})")):
        show(THRESHOLDS, SUITE, "imx6q", "preempt-lazy", None, None)
    with pytest.raises(ValueError, match=re.escape(
            "suite.yaml: no scenario or rt-test 'cpu60' (valid: ")):
        show(THRESHOLDS, SUITE, "imx6q", "rt", "cpu60", None)


def test_the_command_line(capsys):
    assert cli.main(["thresholds", "check"]) == 0
    assert capsys.readouterr().out == check(THRESHOLDS, SUITE) + "\n"
    assert cli.main(["thresholds", "show", "--board", "rpi3", "--flavour", "rt",
                     "--scenario", "idle", "--interval", "100"]) == 0
    out = capsys.readouterr().out
    assert out == show(THRESHOLDS, SUITE, "rpi3", "rt", "idle", 100) + "\n"
    assert len(out.splitlines()) == 2
    assert cli.main(["thresholds", "show", "--board", "imx8"]) == 2
    assert capsys.readouterr().err == (f"rtlab: error: thresholds.yaml: no board 'imx8' "
                                       f"(valid: {', '.join(raw_boards())})\n")


def test_a_file_outside_the_repository_is_named_as_given(tmp_path):
    copy = tmp_path / "gate.yaml"
    copy.write_text(THRESHOLDS.read_text(encoding="utf-8"), encoding="utf-8")
    assert check(copy, SUITE).startswith(f"{copy}: valid; ")
    assert f"  {copy}:" in show(copy, SUITE, "rpi3", "std", "idle", 100)
