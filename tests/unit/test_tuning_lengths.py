"""Threshold suggestions from runs of one length: a case's hour-long runs and the minute
an adaptive run measured before it stopped are not samples of one maximum, so ``rtlab
thresholds suggest`` takes each case's runs of its longest measured length, leaves the
others out and says so. The stores here hold imx6q/rt cpu100 at 1 ms only, made with
tests/unit/test_tuning.py's record of the suite's kind."""

import datetime
import json
import shutil
from pathlib import Path

import pytest

from rtlab.store import open_store
from rtlab.store.query import CaseRow, CpuRow, history
from rtlab.tuning import Method, suggest
from rtlab.tuning.evidence import comparable, evidence, format_length
from rtlab.verdict.thresholds import load_thresholds
from tests.sqlite_store import ingested
from tests.unit.test_tuning import SUITE, THRESHOLDS, TODAY, record, table_row

CASE = ("cpu100", 1000)
QUANTILE_5 = Method(min_runs=5, max_from="quantile")
NAME = "imx6q/rt/cpu100/1000us"
HOUR = 3600
# twelve hour-long runs, the worst CPU's max 40 + 4·i µs: max 84 × 1.2 → 110 µs
HOUR_MAXIMA = {run: 40 + 4 * run for run in range(12)}
# two hundred adaptive runs that stopped after one or two minutes, all newer than the
# hour's: 20…30 µs. Mixed in, 212 runs make the 0.99 quantile the 210th figure, an hour
# run's 76 µs (× 1.2 → 92 µs): the minute runs would pull the limit down
MINUTE_MAXIMA = {12 + run: 20 + run % 11 for run in range(200)}


def minute_length(run: int) -> int:
    return 60 if run % 2 else 120


def timed(run: int, worst: float, length_s: int | None) -> dict:
    item = record("imx6q", "rt", *CASE, run, worst)
    if length_s is None:
        del item["duration_s"]
    else:
        item["duration_s"] = length_s
    if length_s is not None and length_s < HOUR:
        # what an adaptive case that stopped early records beside its measured length
        item["adaptive"] = {"window_s": 60, "cap_s": HOUR, "measured_s": length_s,
                            "stopped": f"stopped after {length_s // 60} min: no change"}
    return item


def make_store(tmp_path: Path, items: list[dict]) -> str:
    folder = tmp_path / "records"
    folder.mkdir()
    for index, item in enumerate(items):
        (folder / f"{index:05d}.json").write_text(json.dumps(item), encoding="utf-8")
    return ingested(folder, tmp_path / "results.db")


def hour_runs(maxima: dict[int, float] = HOUR_MAXIMA) -> list[dict]:
    return [timed(run, worst, HOUR) for run, worst in maxima.items()]


def minute_runs(maxima: dict[int, float] = MINUTE_MAXIMA) -> list[dict]:
    return [timed(run, worst, minute_length(run)) for run, worst in maxima.items()]


def suggested(tmp_path: Path, name: str, items: list[dict], **options):
    """``suggest`` for imx6q/rt on a store of ``items`` and a copy of the repository's
    thresholds.yaml (edited, unless ``write=False``); the suggestion and the file."""
    folder = tmp_path / name
    folder.mkdir()
    url = make_store(folder, items)
    gate = folder / "thresholds.yaml"
    shutil.copyfile(THRESHOLDS, gate)
    store = open_store(url)
    # the lengths' bookkeeping on the quantile rule (the exposure rule reads histograms)
    options.setdefault("method", Method(max_from="quantile"))
    try:
        with store.session() as session:
            result = suggest(session, gate, board="imx6q", flavour="rt", today=TODAY,
                             **options)
    finally:
        store.close()
    return result, gate


def case_rows(result) -> list:
    """What the suggestion makes of the case, the length bookkeeping aside."""
    return [(row.series, row.metric, row.new, row.where, row.evidence.values,
             row.evidence.observed, row.evidence.suggested, row.evidence.missing)
            for row in result.rows if row.series.short() == "cpu100/1000us"]


def test_minute_runs_do_not_move_the_limits_of_hour_runs(tmp_path):
    mixed, mixed_file = suggested(tmp_path, "mixed", hour_runs() + minute_runs())
    alone, alone_file = suggested(tmp_path, "hour", hour_runs())

    # the same suggestion as from the hour's runs alone: max 84 µs × 1.2 → 110 µs
    assert case_rows(mixed) == case_rows(alone)
    [row] = [r for r in mixed.rows if r.series.short() == "cpu100/1000us"
             and r.metric == "max_us"]
    assert (row.evidence.runs, row.evidence.observed, row.evidence.suggested) == (12, 84, 110)
    limits = load_thresholds(mixed_file, SUITE).lookup("imx6q", "rt", *CASE)
    assert limits["max_us"].value == 110
    assert limits["max_us"].value == load_thresholds(alone_file, SUITE).lookup(
        "imx6q", "rt", *CASE)["max_us"].value

    # and they would have: every run of the case side by side suggests less
    again = tmp_path / "mixed" / "again"
    again.mkdir()
    store = open_store(make_store(again, hour_runs() + minute_runs()))
    try:
        with store.session() as session:
            runs = history(session, board="imx6q", scenario=CASE[0], interval_us=CASE[1],
                           verdicts=("pass", "fail"))
    finally:
        store.close()
    assert len(runs) == 212
    assert evidence(runs, "max_us", Method()).suggested == 92

    # what was left out, and why, in the table, the notes under it and the reason
    table = mixed.markdown()
    cells = table_row(table, NAME)
    assert cells[6:8] == ["12", "60 min (200 left out)"]
    assert (f"- {NAME}: 200 run(s) of 1..2 min left out, limits from 12 run(s) of 60 min"
            in table)
    assert "a maximum grows with the number of wake-ups" in table
    assert "200 run(s) of other lengths left out" in table
    assert mixed.left_out == 200 and alone.left_out == 0
    assert table_row(alone.markdown(), NAME)[7] == "60 min"
    assert "left out" not in alone.markdown()
    reason = next(reason for reason, _ in mixed.reasons.values() if "110 µs" in reason)
    assert "runs of 60 min, 200 of other lengths left out" in reason


def test_min_runs_counts_the_runs_of_the_longest_length_only(tmp_path):
    # five hour runs and two hundred of a minute or two: too few, whatever the rest
    result, gate = suggested(tmp_path, "few", hour_runs({run: 90 for run in range(5)})
                             + minute_runs(), write=True)
    [row] = [r for r in result.rows if r.series.short() == "cpu100/1000us"
             and r.metric == "max_us"]
    assert row.evidence.suggested is None and row.evidence.runs == 5
    assert row.evidence.missing == (
        "too few runs of 60 min (5, need 10; 200 run(s) of 1..2 min left out: a maximum "
        "grows with the number of wake-ups)")
    assert row.new == row.old.value == 150
    assert load_thresholds(gate, SUITE).lookup("imx6q", "rt", *CASE)["max_us"].value == 150

    # --min-runs 5: the five hour runs are enough, the minute runs still no part of it
    result, _ = suggested(tmp_path, "enough", hour_runs({run: 90 for run in range(5)})
                          + minute_runs(), method=QUANTILE_5, write=False)
    [row] = [r for r in result.rows if r.series.short() == "cpu100/1000us"
             and r.metric == "max_us"]
    assert (row.evidence.runs, row.evidence.suggested) == (5, 110)


def test_last_takes_the_newest_runs_of_the_longest_length(tmp_path):
    # the minute runs are the newest; --last 5 still means five hour runs (8…11: 72…84 µs)
    result, _ = suggested(tmp_path, "last", hour_runs() + minute_runs(), last=5,
                          method=QUANTILE_5, write=False)
    [row] = [r for r in result.rows if r.series.short() == "cpu100/1000us"
             and r.metric == "max_us"]
    assert row.evidence.values == (68, 72, 76, 80, 84)
    assert result.lengths[row.series].used == 5
    assert result.lengths[row.series].shorter == 200


def test_runs_within_ten_percent_are_one_length(tmp_path):
    # adaptive runs that reached the cap measure a little less or more than the hour:
    # they are hour runs; 50 minutes (83 %) is not
    lengths = {0: 3600, 1: 3300, 2: 3400, 3: 3500, 4: 3590, 5: 3650, 6: 3600, 7: 3600,
               8: 3600, 9: 3600, 10: 3000, 11: 3600}
    items = [timed(run, HOUR_MAXIMA[run], length) for run, length in lengths.items()]
    result, _ = suggested(tmp_path, "near", items, method=QUANTILE_5, write=False)
    [row] = [r for r in result.rows if r.series.short() == "cpu100/1000us"
             and r.metric == "max_us"]
    # the longest is 3650 s: 3300 s is 9.6 % short of it, 3000 s 18 %
    assert len(row.evidence.values) == 11 and 80 not in row.evidence.values
    assert result.lengths[row.series].length_s == 3650
    assert result.lengths[row.series].shorter_s == (3000, 3000)


def cpu_row(max_us: float) -> CpuRow:
    return CpuRow(cpu=0, thread=None, samples=1000, min_us=3, avg_us=20, max_us=max_us,
                  overflows=0, no_wakeup=False, gated=None, p99_us=20, p99_9_us=30,
                  p99_99_us=35, histogram_range_us=400)


def case_row(case_id: int, max_us: float) -> CaseRow:
    return CaseRow(case_id=case_id, board="imx6q", flavour="rt", scenario="cpu100",
                   interval_us=1000, kind="cyclictest", verdict="pass",
                   started=datetime.datetime(2026, 10, 1, tzinfo=datetime.UTC) +
                   datetime.timedelta(days=case_id), pipeline_id=None, commit_sha=None,
                   ref_name="main", run_key=f"run{case_id}", name=NAME, message="",
                   place=None, kernel_release=None, realtime=True, merge_request_iid=None,
                   cpus=(cpu_row(max_us),))


def test_runs_without_a_recorded_length():
    cases = [case_row(i, 40 + i) for i in range(6)]
    # none recorded: every run is used, as before lengths were stored
    used, lengths = comparable(cases, {})
    assert used == cases and (lengths.length_s, lengths.left_out) == (None, 0)
    assert lengths.cell() == "not recorded"
    # beside runs that have one they are no evidence of it; nor is a length of 0 or junk
    used, lengths = comparable(cases, {0: 3600, 1: 3600, 2: None, 3: 0, 4: "an hour",
                                       5: 60})
    assert [c.case_id for c in used] == [0, 1]
    assert (lengths.shorter, lengths.unrecorded, lengths.left_out) == (1, 3, 4)
    assert lengths.left_out_text() == ("1 run(s) of 1 min and 3 run(s) without a recorded "
                                       "length")
    assert lengths.cell() == "60 min (4 left out)"


def test_every_run_of_one_length_changes_nothing(tmp_path):
    result, _ = suggested(tmp_path, "one", hour_runs(), write=False)
    assert [(lengths.length_s, lengths.used, lengths.left_out)
            for lengths in result.lengths.values()] == [(HOUR, 12, 0)]
    assert "Runs of one length" not in result.markdown()


@pytest.mark.parametrize("seconds, text", [(3, "3 s"), (60, "1 min"), (90, "1.5 min"),
                                            (3598.4, "60 min"), (1920, "32 min")])
def test_lengths_read_as_people_say_them(seconds, text):
    assert format_length(seconds) == text
