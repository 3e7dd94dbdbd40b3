"""One case plan, every door: the same window, judged through every door to the judge with
the pipeline's own case count (`--pipeline-jobs 4`, as .gitlab-ci.yml's test jobs run),
against the same results store, gets the same verdict, message and record facts.

The window is a recorded LAVA job's (tests/data/lava): its log goes through
`rtlab lava records`; the same cyclictest JSON is the stand-in board's answer to the
on-board suite (tests/target/test_latency.py under rtlab's plugin, tests/standin_board.py);
its record is pooled alone (rtlab.run.pooling) and read as a bisection step reads it."""

import json

import attr
import pytest
from ruamel.yaml import YAML

from rtlab.bisect.step import case_histogram
from rtlab.cli import main
from rtlab.lava.joblog import read_log
from rtlab.lava.plan import METADATA_KEY, plan_of_job
from rtlab.measure.cyclictest import parse_json
from rtlab.measure.suite import load_suite
from rtlab.run.pooling import Judging, Replica, pool_case
from rtlab.util.paths import REPO_ROOT
from rtlab.verdict.case import case_confidence, pipeline_case_count
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.thresholds import load_thresholds
from tests.sqlite_store import ingested
from tests.standin_board import Behaviour, run_board

DATA = REPO_ROOT / "tests" / "data" / "lava"
CASE = "cpu50/1000us"
JOBS = 4
THRESHOLDS = """\
defaults:
  max_us: 10000000
  statistics: {baseline_runs: 3, baseline_boots: 2}
boards:
  qemu-imx6q:
    flavours:
      rt: {}
"""
# what a record keeps of how its case was judged (rtlab.verdict.case)
JUDGED = ("thresholds", "statistics", "pipeline_cases", "case_confidence", "baseline",
          "comparison", "broke", "judged", "verdict", "message")


def _through_every_door(tmp_path, bases, before_judging=None):
    """The job's window judged through the one-board, LAVA and pooled doors against a
    store of ``bases`` earlier runs (``before_judging(url)`` may change the store first):
    each door's record of the case, the one board's folder and the window."""
    job_text = (DATA / "qemu-imx6q-rt-job.yaml").read_text()
    plan = plan_of_job(job_text, "job")
    log_text = (DATA / "qemu-imx6q-rt-lava-run.log").read_text()
    window = log_text and read_log(log_text, "lava.log").evidence().files[
        "cpu50-1000us"]["result.json"].decode()
    latency = [case.name for case in plan.cases if case.tool is None]
    # the pipeline's count, as every door counts it: the job's latency cases x its jobs
    cases = pipeline_case_count(len(latency), JOBS)
    assert cases == 16

    # the results store: earlier runs of the series on the stand-in boards, two boots
    for index, place in enumerate(bases):
        _, folder = run_board(tmp_path, place,
                              {name: Behaviour(json=window if name == CASE else None,
                                               seed=index) for name in latency},
                              board="qemu-imx6q", thresholds=THRESHOLDS,
                              duration_s=plan.duration_s)
        url = ingested(folder / "results", tmp_path / "store.db")
    if before_judging is not None:
        before_judging(url)

    # the one-board door: the suite on a stand-in board answering with the job's window
    boards, folder = run_board(tmp_path, "q1",
                               {name: Behaviour(json=window if name == CASE else None)
                                for name in latency},
                               board="qemu-imx6q", thresholds=THRESHOLDS,
                               duration_s=plan.duration_s,
                               extra=("--rt-baseline", url, "--rt-baseline-ref", "",
                                      "--rt-pipeline-jobs", str(JOBS)))
    on_board = boards[CASE]

    # the LAVA door: the job rendered for a pipeline of 4 jobs, its log read back
    job = YAML(typ="safe").load(job_text)
    job["metadata"][METADATA_KEY] = attr.evolve(plan, pipeline_jobs=JOBS).to_json()
    job_file = tmp_path / "job.yaml"
    with job_file.open("w") as out:
        YAML().dump(job, out)
    (tmp_path / "lava.log").write_text(log_text)
    # the file the on-board suite judged by (the limits' sources name it)
    thresholds_file = tmp_path / "thresholds.yaml"
    assert main(["lava", "records", "--job", str(job_file), "--log",
                 str(tmp_path / "lava.log"), "--out", str(tmp_path / "lava"),
                 "--thresholds", str(thresholds_file), "--baseline-db", url,
                 "--baseline-ref", ""]) in (0, 1)
    [lava] = [json.loads(path.read_text())
              for path in (tmp_path / "lava" / "results").glob("*.json")
              if json.loads(path.read_text())["name"].endswith(f"/{CASE}")]

    # the pooled door: the one board's record pooled alone, compared as the pool compares
    thresholds = load_thresholds(thresholds_file, load_suite())
    pooled = pool_case(CASE, [Replica("q1", "done", on_board)], board="qemu-imx6q",
                       boards_planned=1, plan="p", thresholds=thresholds,
                       judging=Judging(cap_s=plan.duration_s, baseline_url=url,
                                       baseline_ref="", pipeline_jobs=JOBS),
                       cases=cases)

    return on_board, lava, pooled, folder, window


def test_every_door_judges_the_same_window_alike_with_the_pipelines_case_count(tmp_path):
    on_board, lava, pooled, folder, window = _through_every_door(
        tmp_path, ("base1", "base2", "base3"))

    # the case was compared, at the pipeline's confidence, on every door
    assert on_board["baseline"]["eligible"] and on_board["baseline"]["runs"] == 3
    assert on_board["comparison"] is not None
    assert on_board["case_confidence"] == pytest.approx(case_confidence(0.01, 16))
    assert on_board["pipeline_cases"] == 16
    for key in JUDGED:
        assert lava[key] == on_board[key], key
    assert [{k: v for k, v in cpu.items()} for cpu in lava["cpus"]] == on_board["cpus"]
    assert pooled["message"] == f"judged on 1 of 1 board (q1): {on_board['message']}"
    for key in JUDGED:
        if key not in ("message", "judged"):
            assert pooled[key] == on_board[key], key
    assert [{k: v for k, v in cpu.items() if k != "place"} for cpu in pooled["cpus"]] == \
        on_board["cpus"]

    # the bisection step's door reads the same wake-ups
    histogram, why = case_histogram(folder, CASE)
    assert why is None
    expected = Histogram.merged(Histogram.from_cpu_result(cpu)
                                for cpu in parse_json(window, "w").cpus)
    assert histogram is not None and histogram.samples == expected.samples
    assert (histogram.counts == expected.counts).all()


def test_an_accepted_change_point_bounds_every_doors_baseline(tmp_path):
    """A change point of the series accepted in the store (rtlab report --accept-change):
    every door's baseline starts after it, so each takes the same three of the four
    earlier runs and judges alike."""
    from sqlalchemy import select

    from rtlab.store import open_store
    from rtlab.store.changes import accept_change
    from rtlab.store.models import Case, ChangePoint

    def accept(url: str) -> None:
        store = open_store(url)
        try:
            with store.session() as session:
                series = list(session.scalars(select(Case).where(
                    Case.scenario == "cpu50", Case.interval_us == 1000)
                    .order_by(Case.started)))
                assert len(series) == 4
                before, after = series[0], series[1]
                row = ChangePoint(
                    board=after.board, flavour=after.flavour, scenario="cpu50",
                    interval_us=1000, ref_name=after.run.ref_name or "",
                    last_before_case=before.id, first_after_case=after.id,
                    good_commit=None, bad_commit=None, first_after_started=after.started,
                    direction="regression", quantile=0.999, before_us=100.0,
                    after_us=130.0, ci_low_us=20.0, ci_high_us=40.0, p_value=0.001,
                    steps=1, found_at=after.started)
                session.add(row)
                session.flush()
                accept_change(session, row.id, "!7 merged: the new normal")
        finally:
            store.close()

    on_board, lava, pooled, _, _ = _through_every_door(
        tmp_path, ("base1", "base2", "base3", "base4"), before_judging=accept)
    # three runs, from three boots: the first run, before the change point, is not one
    assert on_board["baseline"]["eligible"] and on_board["baseline"]["runs"] == 3
    assert on_board["baseline"]["considered"] == 3
    assert on_board["comparison"] is not None
    for key in JUDGED:
        assert lava[key] == on_board[key], key
        if key not in ("message", "judged"):
            assert pooled[key] == on_board[key], key
