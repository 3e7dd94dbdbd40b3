"""Every board outcome has one meaning, on every door to the judge (docs/verdicts.md, the
board-outcome table; rtlab.verdict.outcome): the same stand-in boards (tests/standin_board.py:
the suite's own fixtures and record plugin, the board stood in) through one board's run,
replicas pooled over one to four boards with mixed outcomes, and a bisection step."""

import xml.etree.ElementTree as ET

import pytest

from rtlab.bisect.step import case_histogram
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

pytest_plugins = ["pytester"]

CASE = "cpu50/1000us"
NETWORK = "network/1000us"
LOST = "the board's console: Timeout exceeded."


def one_board(pytester, monkeypatch, place, behaviour=None, *, cleanup=None,
              extra=(), cases=(CASE,)):
    behaviour = behaviour or Behaviour()
    return run_board(pytester, monkeypatch, place, {case: behaviour for case in cases},
                     cleanup=cleanup, extra=extra)


# ------------------------------------------------------------ one board's run ----


def test_a_clean_board_passes_and_its_record_keeps_the_judges_verdict(pytester, monkeypatch):
    records, _ = one_board(pytester, monkeypatch, "b1")
    record = records[CASE]
    assert record["verdict"] == "pass", record["message"]
    assert record["judged"] == {"verdict": "pass", "message": record["message"]}
    assert board_outcome("b1", record).row == MEASURED
    # the case's confidence is the pipeline's, decided when the case was planned
    assert record["pipeline_cases"] == 1 and record["case_confidence"] == pytest.approx(0.98)


def test_a_breach_fails(pytester, monkeypatch):
    records, _ = one_board(pytester, monkeypatch, "b1", Behaviour(spike_us=500))
    record = records[CASE]
    assert record["verdict"] == "fail" and "CPU2 max 500 µs > max_us 150 µs" in record["message"]
    assert board_outcome("b1", record).row == BREACHED


def test_a_case_the_board_cannot_run_is_skipped(pytester, monkeypatch):
    records, _ = one_board(pytester, monkeypatch, "b1", cases=(NETWORK,))
    record = records[NETWORK]
    assert record["verdict"] == "skipped" and "no network" in record["message"]
    assert board_outcome("b1", record).row == LEFT_OUT


def test_a_console_lost_before_measuring_is_an_error_with_nothing_measured(pytester, monkeypatch):
    records, _ = one_board(pytester, monkeypatch, "b1", Behaviour(before="console lost"))
    record = records[CASE]
    assert record["verdict"] == "error" and "console lost" in record["message"]
    assert "judged" not in record and "cpus" not in record
    assert board_outcome("b1", record).row == ERRED_BEFORE


def test_a_breach_survives_a_console_lost_while_its_trace_comes_back(pytester, monkeypatch):
    """The issue's case: max_us exceeded, then pexpect's timeout while the trace is
    collected. The record keeps fail, the error beside it; JUnit says failure."""
    records, results = one_board(pytester, monkeypatch, "b1",
                                 Behaviour(spike_us=500, broke=True, trace="console lost"),
                                 extra=("--rt-trace", "always"))
    record = records[CASE]
    assert record["verdict"] == "fail", record
    assert "CPU2 max 500 µs > max_us 150 µs" in record["message"]
    assert record["error"].startswith("the trace could not be brought back: TIMEOUT")
    assert record["trace"]["error"].startswith("the trace could not be brought back")
    assert board_outcome("b1", record).row == BREACHED
    [case] = ET.parse(pytester.path / "junit-b1.xml").getroot().iter("testcase")
    assert [child.tag for child in case if child.tag in ("failure", "error")] == ["failure"]


def test_a_breach_survives_a_cleanup_that_fails_after_the_last_case(pytester, monkeypatch):
    records, _ = one_board(pytester, monkeypatch, "b1", Behaviour(spike_us=500),
                           cleanup="PDU did not answer")
    record = records[CASE]
    assert record["verdict"] == "fail" and "max_us 150" in record["message"]
    assert "PDU did not answer" in record["error"]


def test_a_pass_then_a_failed_cleanup_is_an_error_whose_windows_still_count(pytester, monkeypatch):
    records, _ = one_board(pytester, monkeypatch, "b1", cleanup="PDU did not answer")
    record = records[CASE]
    assert record["verdict"] == "error" and "PDU did not answer" in record["message"]
    assert record["judged"]["verdict"] == "pass" and len(record["cpus"]) == 4
    assert board_outcome("b1", record).row == ERRED_AFTER


def test_a_condition_mismatch_voids_the_run(pytester, monkeypatch):
    records, _ = one_board(pytester, monkeypatch, "b1", Behaviour(conditions="mismatch"))
    record = records[CASE]
    assert record["verdict"] == "error" and "RT throttling is on" in record["message"]
    assert record["conditions"]["checks"]["rt_throttling"]["status"] == "mismatch"
    assert board_outcome("b1", record).row == ERRED_BEFORE


def test_a_run_whose_conditions_were_never_checked_is_no_pass(pytester, monkeypatch):
    records, _ = one_board(pytester, monkeypatch, "b1", Behaviour(conditions="never"))
    record = records[CASE]
    assert record["verdict"] == "error"
    assert record["message"].startswith("the run's conditions were never checked")
    assert "judged" not in record
    assert board_outcome("b1", record).row == ERRED_BEFORE


def test_a_breach_that_ended_the_run_before_its_checks_still_fails(pytester, monkeypatch):
    records, _ = one_board(pytester, monkeypatch, "b1",
                           Behaviour(spike_us=500, broke=True, conditions="never"),
                           extra=("--rt-trace", "always"))
    record = records[CASE]
    assert record["verdict"] == "fail" and "not_checked" in record["conditions"]
    assert board_outcome("b1", record).row == BREACHED


# ---------------------------------------------- pooled, and a bisection step ----

BREACH = Behaviour(spike_us=500)
BEFORE = Behaviour(before="console lost")
VOID = Behaviour(conditions="mismatch")
UNCHECKED = Behaviour(conditions="never")
TRACE_LOST = Behaviour(spike_us=500, broke=True, trace="console lost")
CLEAN = Behaviour()
# case -> each board's row (b1..b4); the session's last case is the one whose cleanup fails
MATRIX = {
    "idle/1000us": (CLEAN, CLEAN, CLEAN, CLEAN),
    "cpu25/1000us": (CLEAN, BREACH, CLEAN, CLEAN),
    "cpu50/1000us": (CLEAN, BEFORE, CLEAN, VOID),
    "cpu75/1000us": (BEFORE, UNCHECKED, BEFORE, VOID),
    "cpu100/1000us": (TRACE_LOST, CLEAN, CLEAN, CLEAN),
    NETWORK: (CLEAN, CLEAN, CLEAN, CLEAN),
    "hackbench/1000us": (CLEAN, CLEAN, CLEAN, CLEAN),
}
PLACES = ("b1", "b2", "b3", "b4")


def pooled(replicas, thresholds, boards_planned=None):
    name = next(iter(replicas)).record["name"].split("/", 2)[2]
    return pool_case(name, replicas, board="imx6q",
                     boards_planned=boards_planned or len(replicas), plan="p",
                     thresholds=thresholds, judging=Judging(cap_s=40), cases=len(MATRIX))


def test_every_board_outcome_means_the_same_alone_pooled_and_in_a_bisection_step(
        pytester, monkeypatch):
    from rtlab.measure.suite import load_suite

    runs = {place: run_board(pytester, monkeypatch, place,
                             {case: rows[index] for case, rows in MATRIX.items()},
                             extra=("--rt-trace", "always"))
            for index, place in enumerate(PLACES)}
    # a fifth board whose session's cleanup fails after its one case: a network case
    # comes last in the suite's order, so the others' last case is a skip
    runs["b5"] = run_board(pytester, monkeypatch, "b5", {"hackbench/1000us": CLEAN},
                           cleanup="PDU did not answer", extra=("--rt-trace", "always"))
    assert runs["b5"][0]["hackbench/1000us"]["verdict"] == "error"
    # the skip that came last on the others stays a skip
    assert {runs[p][0][NETWORK]["verdict"] for p in PLACES} == {"skipped"}
    thresholds_path = pytester.path / "thresholds.yaml"
    thresholds_path.write_text(THRESHOLDS)
    thresholds = load_thresholds(thresholds_path, load_suite())

    for case in MATRIX:
        places = ("b1", "b2", "b5", "b4") if case == "hackbench/1000us" else PLACES
        replicas = [Replica(place, "done", runs[place][0][case]) for place in places]
        # one board pooled alone means what that board's own run means; a bisection step
        # counts exactly the boards whose windows count
        for replica in replicas:
            folder = runs[replica.place][1]
            alone = pooled([replica], thresholds)
            assert alone["verdict"] == replica.record["verdict"], (case, replica.place, alone)
            histogram, why = case_histogram(folder, case)
            # (a run cut short at its breach is no boot of a step, which never traces)
            counts = replica.outcome.counts and not replica.record.get("broke")
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
        else:
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
            short["verdict"] == "fail", short["message"]
