"""Change points on the trends (rtlab.verdict.changepoints, rtlab.store.changes,
rtlab.report.changes): where a series' tail changed across nightly runs, kept once,
shown in the report, the summary and ``rtlab report --changes``, and bounding the
baselines once accepted."""

import argparse
import datetime
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import func, select

from rtlab.report.build import write_report
from rtlab.report.changes import find
from rtlab.report.cli import register
from rtlab.report.selection import Selection
from rtlab.store import ingest_folder, open_store
from rtlab.store.changes import accept_change, series_runs
from rtlab.store.models import ChangePoint
from rtlab.store.query import baseline_runs
from rtlab.verdict.changepoints import IMPROVEMENT, REGRESSION, find_changes
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.tailsummary import TailSummary, counts_matrix, pooled_quantile
from tests.unit.test_report import _cpu, _record

NIGHT = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.UTC)
CIVCODE = Path(__file__).resolve().parents[1] / "data" / "cyclictest" / \
    "real-civcode-4core-h400.hist"


def _run(rng: np.random.Generator, *, scale: float = 1.0, boot_sd: float = 0.05,
         samples: int = 100_000, burst: bool = False) -> TailSummary:
    """One run of a board: a lognormal body and a GPD tail (1 %), every wake-up × the
    run's scale and a boot's own offset (boot-to-boot spread); a burst run carries five
    times the tail weight."""
    boot = scale * np.exp(rng.normal(0.0, boot_sd))
    values = rng.lognormal(np.log(15), 0.12, samples)
    tail = rng.random(samples) < (0.05 if burst else 0.01)
    values[tail] = 25 + 3.0 / 0.1 * ((1 - rng.random(int(tail.sum()))) ** -0.1 - 1)
    latencies = np.floor(values * boot).astype(np.int64)
    inside = latencies[latencies < 400]
    return TailSummary.of([Histogram(np.bincount(inside, minlength=400)[:400],
                                     int((latencies >= 400).sum()), float(latencies.max()))])


@pytest.mark.parametrize("seed", range(4))
def test_an_unchanged_series_has_no_change_point_whatever_its_spread(seed):
    """Boot-to-boot spread (10 % of scale, twice the model's), and bursts in a fifth of
    the runs at random: the runs are exchangeable, the permutation test holds."""
    rng = np.random.default_rng(seed)
    spread = [_run(rng, boot_sd=0.10) for _ in range(30)]
    bursts = [_run(rng, burst=bool(rng.random() < 0.2)) for _ in range(30)]
    assert find_changes(spread) == []
    assert find_changes(bursts) == []


def test_resampled_real_recording_has_no_change_point():
    """Runs drawn from a real board's recorded histogram (civcode, 4 CPUs): unchanged."""
    from rtlab.measure.cyclictest import parse_histogram

    dump = parse_histogram(CIVCODE.read_text(), str(CIVCODE))
    counts = np.sum([np.asarray(c.counts, dtype=np.float64) for c in dump.columns], axis=0)
    rng = np.random.default_rng(3)
    runs = []
    for _ in range(24):
        drawn = rng.multinomial(400_000, counts / counts.sum())
        runs.append(TailSummary.of([Histogram(drawn, 0, float(np.nonzero(drawn)[0][-1]))]))
    assert find_changes(runs) == []


@pytest.mark.parametrize("seed", range(3))
def test_a_step_is_found_at_its_night_with_its_size(seed):
    rng = np.random.default_rng(10 + seed)
    runs = [_run(rng) for _ in range(15)] + [_run(rng, scale=1.3) for _ in range(15)]
    [change] = find_changes(runs)
    assert change.first_after == 15 and change.steps == 1
    assert change.direction == REGRESSION
    counts, samples = counts_matrix(runs)
    # the size is the quantile's after against before, and its interval holds it
    assert change.before_us == pytest.approx(
        pooled_quantile(counts[:15], samples[:15], change.quantile))
    assert change.ci_us[0] <= change.difference_us <= change.ci_us[1]
    assert 0.2 < change.relative < 0.4
    better = find_changes([_run(rng) for _ in range(15)]
                          + [_run(rng, scale=0.8) for _ in range(15)])
    assert [(c.first_after, c.direction) for c in better] == [(15, IMPROVEMENT)]


@pytest.mark.parametrize("seed", range(6))
def test_a_creep_of_three_in_margin_steps_is_one_change(seed):
    """× 1.08 three times, seven nights apart: each inside the comparison's 20 % margin,
    together 26 %."""
    rng = np.random.default_rng(20 + seed)
    runs = [_run(rng, scale=1.08 ** (0 if night < 12 else 1 + (night - 12) // 7))
            for night in range(33)]
    [change] = find_changes(runs)
    assert change.direction == REGRESSION
    # within the creep's nights (a step the test missed starts or ends it later)
    assert 10 <= change.first_step <= change.first_after <= 28
    assert change.relative > 0.1


def _nightlies(folder: Path) -> dict[str, list[str]]:
    """Nightly pipelines on main: cpu100/1000us unchanged for 12 nights, then a step (the
    tail 8 µs later from night 12), then unchanged; idle/1000us creeps by 4 µs three
    times, seven nights apart, from night 10. Returns each series' commits by night."""
    rng = np.random.default_rng(7)
    commits: dict[str, list[str]] = {"cpu100": [], "idle": []}
    for night in range(28):
        pipeline = str(300 + night)
        started = NIGHT + datetime.timedelta(days=night)
        for slot, scenario in enumerate(("cpu100", "idle")):
            loc = (12 + (8 if night >= 12 else 0) if scenario == "cpu100"
                   else 12 + 4 * (0 if night < 10 else min(3, 1 + (night - 10) // 7)))
            cpus = [_cpu(c, rng, loc=loc) for c in range(4)]
            _record(folder, scenario=scenario, interval=1000,
                    started=started + datetime.timedelta(minutes=2 * slot), verdict="pass",
                    pipeline=pipeline, ref="main", cpus=cpus)
            commits[scenario].append(f"{int(pipeline):08x}" + "ab" * 16)
    return commits


@pytest.fixture(scope="module")
def nightly_store(tmp_path_factory):
    base = tmp_path_factory.mktemp("changes")
    (base / "records").mkdir()
    commits = _nightlies(base / "records")
    store = open_store(f"sqlite:///{base / 'results.db'}")
    ingest_folder(store, base / "records")
    yield store, commits, base
    store.close()


def _report_args(db: str, *args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["report", "--db", db, *args])


def test_the_report_marks_the_step_and_the_creep_once_and_keeps_them(nightly_store,
                                                                     capsys):
    store, commits, base = nightly_store
    written = write_report(store, base / "out", Selection())
    changes = {c.key[2]: c for c in written.data.changes.found}
    assert set(changes) == {"cpu100", "idle"}, [c.describe() for c in changes.values()]
    step = changes["cpu100"]
    assert step.night.date() == (NIGHT + datetime.timedelta(days=12)).date()
    assert (step.good_commit, step.bad_commit) == (commits["cpu100"][11],
                                                   commits["cpu100"][12])
    assert step.direction == REGRESSION and step.steps == 1 and step.new
    creep = changes["idle"]
    assert creep.direction == REGRESSION
    assert creep.good_commit in commits["idle"][8:12]
    assert creep.bad_commit in commits["idle"][17:26]
    html = written.html.read_text()
    summary = written.summary.read_text()
    for change in (step, creep):
        assert change.commits in html and change.commits in summary
        assert change.size() in html
    assert f"{step.night:%Y-%m-%d}" in summary and "**new**" in summary
    # the trend of the series marks it (its label is in the figure's legend)
    [trend] = [t for g in written.data.groups for t in g.trends if t.key[2] == "cpu100"]
    assert trend.changes == (step,)

    # again: the same change points, known, not new; none added to the store
    db = str(store.engine.url)
    assert _report_args(db, "--changes").func(_report_args(db, "--changes")) == 0
    printed = capsys.readouterr().out
    assert "2 open change point(s) on main (0 new)" in printed
    assert f"#{step.change_id} imx6q/rt/cpu100/1000us: {step.size()}" in printed
    assert step.commits in printed
    with store.session() as session:
        assert session.scalar(select(func.count()).select_from(ChangePoint)) == 2


def test_an_accepted_change_point_bounds_the_baselines(nightly_store):
    store, _commits, _base = nightly_store
    with store.session() as session:
        [step] = [c for c in find(session, "main").found if c.key[2] == "cpu100"]
        before = baseline_runs(session, board="imx6q", flavour="rt", scenario="cpu100",
                               interval_us=1000, ref="main", runs=20)
        assert len(before) == 20  # nights 8 .. 27: both sides
        accept_change(session, step.change_id, "!42 merged: the tail is the new normal")
    with store.session() as session:
        after = baseline_runs(session, board="imx6q", flavour="rt", scenario="cpu100",
                              interval_us=1000, ref="main", runs=20)
        assert len(after) == 16  # nights 12 .. 27 only
        assert [c.key[2] for c in find(session, "main").found] == ["idle"]
        [series] = [s for s in series_runs(session, ref="main") if s.key[2] == "cpu100"]
        assert len(series.runs) == 28
        # a report reads each series' newest runs, oldest first
        newest = {s.key[2]: s.runs for s in series_runs(session, ref="main", newest=5)}
        assert [r.case_id for r in newest["cpu100"]] == [r.case_id for r in series.runs[-5:]]
        assert len(newest["idle"]) == 5
    data = write_report(store, _base / "out2", Selection()).data
    [row] = [r for r in data.rows if r.key[2] == "cpu100"]
    assert row.comparison is not None and row.comparison.baseline_runs == 15
    with pytest.raises(ValueError, match="needs a reason"), store.session() as session:
        accept_change(session, step.change_id, " ")


def test_a_refused_trigger_token_is_an_error_that_names_it_and_starts_nothing(
        nightly_store, tmp_path):
    import subprocess

    from rtlab.report.bisect_trigger import TriggerError, start_bisections
    from rtlab.vlab.gitlab import StandInGitLab

    store, _commits, _base = nightly_store
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    with StandInGitLab(origin, token="api", trigger_token="right") as gitlab:
        with pytest.raises(TriggerError, match=r"RTLAB_BISECT_TRIGGER_TOKEN") as error:
            start_bisections(store, "main", url=gitlab.url, project=gitlab.project_path,
                             token="wrong-token", progress=lambda line: None)
        assert "wrong-token" not in str(error.value)
        assert gitlab.triggered == []
    with store.session() as session:
        assert all(c.bisection is None for c in find(session, "main").found)
