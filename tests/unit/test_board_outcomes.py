"""Every board outcome has one meaning, on every door to the judge (docs/verdicts.md, the
board-outcome table; rtlab.verdict.outcome): the same stand-in boards (tests/standin_board.py:
the suite's own fixtures and record plugin, the board stood in) through one board's run,
replicas pooled over one to four boards with mixed outcomes, and a bisection step."""

import xml.etree.ElementTree as ET

import pytest

from rtlab.bisect.step import case_histogram
from rtlab.measure.suite import load_suite
from rtlab.run.pooling import Judging, Replica, pool_case
from rtlab.verdict.outcome import (
    BREACHED,
    ERRED_AFTER,
    ERRED_BEFORE,
    LEFT_OUT,
    MEASURED,
    board_outcome,
)
from rtlab.verdict.thresholds import load_thresholds
from tests.standin_board import THRESHOLDS, Behaviour, run_board

CASE = "cpu50/1000us"
NETWORK = "network/1000us"
CLEAN = Behaviour()
BREACH = Behaviour(spike_us=500)
BEFORE = Behaviour(before="console lost")
VOID = Behaviour(conditions="mismatch")
UNCHECKED = Behaviour(conditions="never")
TRACE_LOST = Behaviour(spike_us=500, broke=True, trace="console lost")
BROKE_UNCHECKED = Behaviour(spike_us=500, broke=True, conditions="never")
VOID_BREACH = Behaviour(spike_us=500, conditions="mismatch")
UNCHECKED_ONCE = Behaviour(conditions="once-never")
# case -> each board's row (b1..b4), one session per board; a network case comes last in
# the suite's order, so a session's cleanup that fails lands on a skip (b1..b4) or, on
# boards of one case (b5, b6), on a measured case
MATRIX = {
    "idle/1000us": (CLEAN, CLEAN, CLEAN, CLEAN),
    "cpu25/1000us": (CLEAN, BREACH, CLEAN, CLEAN),
    CASE: (CLEAN, BEFORE, CLEAN, VOID),
    "cpu75/1000us": (BEFORE, UNCHECKED, BEFORE, VOID),
    "cpu100/1000us": (TRACE_LOST, CLEAN, CLEAN, CLEAN),
    "memory/1000us": (BROKE_UNCHECKED, CLEAN, UNCHECKED_ONCE, CLEAN),
    "hackbench/1000us": (CLEAN, CLEAN, CLEAN, CLEAN),
    "disk/1000us": (CLEAN, VOID_BREACH, CLEAN, CLEAN),
    NETWORK: (CLEAN, CLEAN, CLEAN, CLEAN),
}
PLACES = ("b1", "b2", "b3", "b4")
HACKBENCH = "hackbench/1000us"


@pytest.fixture(scope="module")
def boards(tmp_path_factory):
    """place -> (its records by case, its output folder): the suite's own fixtures and
    record plugin on stand-in boards, one pytest session each."""
    folder = tmp_path_factory.mktemp("boards")
    runs = {place: run_board(folder, place,
                             {case: rows[index] for case, rows in MATRIX.items()},
                             cleanup="PDU did not answer" if place == "b4" else None,
                             extra=("--rt-trace", "always"))
            for index, place in enumerate(PLACES)}
    runs["b5"] = run_board(folder, "b5", {HACKBENCH: CLEAN}, cleanup="PDU did not answer")
    runs["b6"] = run_board(folder, "b6", {HACKBENCH: BREACH}, cleanup="PDU did not answer")
    return runs


def record_of(boards, place, case=CASE):
    return boards[place][0][case]


# ------------------------------------------------------------ one board's run ----


def test_a_clean_board_passes_and_its_record_keeps_the_judges_verdict(boards):
    record = record_of(boards, "b1")
    assert record["verdict"] == "pass", record["message"]
    assert record["judged"] == {"verdict": "pass", "message": record["message"]}
    assert board_outcome("b1", record).row == MEASURED
    # the case's confidence is the pipeline's, decided when the case was planned, and so
    # are its trace choice and its run requirements (rtlab.verdict.case.CasePlan)
    assert record["pipeline_cases"] == len(MATRIX)
    assert record["case_confidence"] == pytest.approx(1 - 0.01 / len(MATRIX))
    assert record["trace"]["requested"] is True and record["trace"]["why"] == "--rt-trace always"
    assert record["conditions"]["requirements"] == load_suite().requirements_for(
        "imx6q", "cpu50").as_dict()
    assert record_of(boards, "b5", HACKBENCH)["trace"]["requested"] is False


def test_a_breach_fails(boards):
    record = record_of(boards, "b2", "cpu25/1000us")
    assert record["verdict"] == "fail" and "CPU2 max 500 µs > max_us 150 µs" in record["message"]
    assert board_outcome("b2", record).row == BREACHED


def test_a_case_the_board_cannot_run_is_skipped_before_any_boot(boards):
    record = record_of(boards, "b1", NETWORK)
    assert record["verdict"] == "skipped" and "no network" in record["message"]
    assert "infrastructure" not in record and "system" not in record
    assert board_outcome("b1", record).row == LEFT_OUT


def test_a_console_lost_before_measuring_is_an_error_with_nothing_measured(boards):
    record = record_of(boards, "b2")
    assert record["verdict"] == "error" and "console lost" in record["message"]
    assert "judged" not in record and "cpus" not in record
    assert board_outcome("b2", record).row == ERRED_BEFORE


def test_a_breach_survives_a_console_lost_while_its_trace_comes_back(boards):
    """The issue's case: max_us exceeded, then pexpect's timeout while the trace is
    collected. The record keeps fail, the error beside it; JUnit says failure."""
    record = record_of(boards, "b1", "cpu100/1000us")
    assert record["verdict"] == "fail", record
    assert "CPU2 max 500 µs > max_us 150 µs" in record["message"]
    assert record["error"].startswith("the trace could not be brought back: TIMEOUT")
    assert record["trace"]["error"].startswith("the trace could not be brought back")
    assert board_outcome("b1", record).row == BREACHED
    junit = boards["b1"][1] / "junit-b1.xml"
    [case] = [c for c in ET.parse(junit).getroot().iter("testcase")
              if "cpu100-1000us" in c.get("name", "") + c.get("classname", "")
              or c.get("name") == "imx6q/rt/cpu100/1000us"]
    assert [child.tag for child in case if child.tag in ("failure", "error")] == ["failure"]


def test_a_breach_survives_a_cleanup_that_fails_after_the_last_case(boards):
    record = record_of(boards, "b6", HACKBENCH)
    assert record["verdict"] == "fail" and "max_us 150" in record["message"]
    assert "PDU did not answer" in record["error"]
    assert board_outcome("b6", record).row == BREACHED


def test_a_pass_then_a_failed_cleanup_is_an_error_whose_windows_still_count(boards):
    record = record_of(boards, "b5", HACKBENCH)
    assert record["verdict"] == "error" and "PDU did not answer" in record["message"]
    assert record["judged"]["verdict"] == "pass" and len(record["cpus"]) == 4
    assert board_outcome("b5", record).row == ERRED_AFTER


def test_a_skip_stays_a_skip_when_the_cleanup_fails_after_it(boards):
    record = record_of(boards, "b4", NETWORK)
    assert record["verdict"] == "skipped" and "PDU did not answer" in record["error"]


def test_a_condition_mismatch_voids_the_run(boards):
    record = record_of(boards, "b4")
    assert record["verdict"] == "error" and "RT throttling is on" in record["message"]
    assert record["conditions"]["checks"]["rt_throttling"]["status"] == "mismatch"
    assert board_outcome("b4", record).row == ERRED_BEFORE


def test_a_breach_in_a_void_window_fails_with_the_void_beside_it(boards):
    """A condition mismatch may well cause the breach; it never hides it."""
    record = record_of(boards, "b2", "disk/1000us")
    assert record["verdict"] == "fail", record["message"]
    assert "CPU2 max 500 µs > max_us 150 µs" in record["message"]
    assert "RT throttling is on" in record["error"]
    assert board_outcome("b2", record).row == BREACHED


def test_a_run_whose_conditions_were_never_checked_is_measured_again_then_no_pass(boards):
    record = record_of(boards, "b2", "cpu75/1000us")
    assert record["verdict"] == "error"
    assert record["message"].startswith("the run's conditions were never checked twice")
    assert record["measured_again"].startswith("the first run's conditions were never checked")
    assert "judged" not in record
    # a second run whose checks ran is judged as any run
    again = record_of(boards, "b3", "memory/1000us")
    assert again["verdict"] == "pass", again["message"]
    assert "measured_again" in again and again["conditions"]["checks"]
    assert board_outcome("b2", record).row == ERRED_BEFORE


def test_a_board_declared_too_slow_to_check_is_judged_on_what_it_measured(tmp_path):
    """suite.yaml's `checked: null` (the emulated boards, qemu-*): no second run, a pass
    that says it was not checked."""
    thresholds = THRESHOLDS.replace("  imx6q:\n", "  qemu-imx6q:\n")
    records, _ = run_board(tmp_path, "q1", {CASE: UNCHECKED}, board="qemu-imx6q",
                           thresholds=thresholds)
    record = records[CASE]
    assert record["verdict"] == "pass", record["message"]
    assert "not_checked" in record["conditions"] and "measured_again" not in record
    assert record["conditions"]["requirements"]["checked"] is None


def test_a_breach_that_ended_the_run_before_its_checks_still_fails(boards):
    record = record_of(boards, "b1", "memory/1000us")
    assert record["verdict"] == "fail" and "not_checked" in record["conditions"]
    assert record["broke"] is True
    assert board_outcome("b1", record).row == BREACHED


# ---------------------------------------------- pooled, and a bisection step ----


def pooled(replicas, thresholds, boards_planned=None):
    name = next(iter(replicas)).record["name"].split("/", 2)[2]
    return pool_case(name, replicas, board="imx6q",
                     boards_planned=boards_planned or len(replicas), plan="p",
                     thresholds=thresholds, judging=Judging(cap_s=40), cases=len(MATRIX))


def test_every_board_outcome_means_the_same_alone_pooled_and_in_a_bisection_step(
        boards, tmp_path):
    thresholds_path = tmp_path / "thresholds.yaml"
    thresholds_path.write_text(THRESHOLDS)
    thresholds = load_thresholds(thresholds_path, load_suite())
    runs = boards

    for case in MATRIX:
        places = ("b1", "b2", "b5", "b4") if case == HACKBENCH else PLACES
        replicas = [Replica(place, "done", runs[place][0][case]) for place in places]
        # one board pooled alone means what that board's own run means; a bisection step
        # counts exactly the boards whose windows count
        for replica in replicas:
            folder = runs[replica.place][1]
            alone = pooled([replica], thresholds)
            assert alone["verdict"] == replica.record["verdict"], (case, replica.place, alone)
            histogram, why = case_histogram(folder, case)
            # (a run cut short at its breach is no boot of a step, which never traces, and
            # a void run's breach fails a gate case but measures no kernel)
            counts = (replica.outcome.counts and not replica.record.get("broke")
                      and replica.record is not record_of(boards, "b2", "disk/1000us"))
            assert (histogram is not None) == counts, (case, replica.place, why)
        everyone = pooled(replicas, thresholds)
        rows = [board["outcome"] for board in everyone["boards"]]
        if case == "idle/1000us":
            assert everyone["verdict"] == "pass", everyone["message"]
            assert everyone["message"].startswith("judged on 4 of 4 boards (b1, b2, b3, b4): ")
            # every board's CPUs their own: 4 boards x 4 CPUs
            assert [(c["place"], c["cpu"]) for c in everyone["cpus"]] == [
                (p, cpu) for p in PLACES for cpu in range(4)]
        elif case == "cpu25/1000us":
            assert everyone["verdict"] == "fail"
            assert "b2: CPU2 max 500 µs > max_us 150 µs" in everyone["message"]
        elif case == "cpu50/1000us":
            assert everyone["verdict"] == "pass", everyone["message"]
            assert everyone["message"].startswith(
                "judged on 2 of 4 boards (b1, b3); b2 ended in an error: console lost; "
                "b4 ended in an error: the run is not what it claims")
            assert rows == [MEASURED, ERRED_BEFORE, MEASURED, ERRED_BEFORE]
        elif case == "cpu75/1000us":
            # nobody measured it cleanly: never a pass, never a skip
            assert everyone["verdict"] == "error"
            assert everyone["message"].startswith("not measured cleanly on any board")
        elif case == "cpu100/1000us":
            # the breach survives the console lost while its trace came back
            assert everyone["verdict"] == "fail"
            assert "b1: CPU2 max 500 µs > max_us 150 µs" in everyone["message"]
            assert "then: the trace could not be brought back" in everyone["message"]
            assert rows[0] == BREACHED
        elif case == NETWORK:
            # a rack without network tags: skipped on every board is skipped, not an error
            assert everyone["verdict"] == "skipped", everyone["message"]
            assert everyone["message"] == ("skipped on every board: Skipped: the board has "
                                           "no network: no net_ping/net_stream tags on the "
                                           "place")
        elif case == "disk/1000us":
            assert everyone["verdict"] == "fail" and rows[1] == BREACHED
            assert "then: the run is not what it claims" in everyone["message"]
        elif case == "memory/1000us":
            # a breach that ended the run before its checks: a fail, pooled too
            assert everyone["verdict"] == "fail" and rows[0] == BREACHED
        else:
            assert case == HACKBENCH
            # b5's cleanup failed after it measured: its windows count, the case passes on
            # the clean boards and names it
            assert everyone["verdict"] == "pass", everyone["message"]
            assert rows == [MEASURED, MEASURED, ERRED_AFTER, MEASURED]
            assert "judged on 4 of 4 boards" in everyone["message"]
            assert "b5 erred after measuring" in everyone["message"]
            assert everyone["replicated"]["boards_judged"] == 4
            # b5 alone: measured, but not cleanly: an error
            assert pooled([replicas[2]], thresholds)["verdict"] == "error"
        # a board that never began the plan is named, and leaves the rest to the others
        short = pooled(replicas[:2], thresholds, boards_planned=3)
        assert "1 place(s) never began the plan" in short["message"] or \
            short["verdict"] in ("fail", "skipped"), short["message"]
    # a breach and a cleanup that failed after it, pooled with a clean board
    both = pooled([Replica("b1", "done", record_of(boards, "b1", HACKBENCH)),
                   Replica("b6", "done", record_of(boards, "b6", HACKBENCH))], thresholds)
    assert both["verdict"] == "fail"
    assert "b6: CPU2 max 500 µs > max_us 150 µs" in both["message"]
    assert "(then: cleanup of the place failed: PDU did not answer)" in both["message"]
