"""rtlab report: from result records (the virtual rack's real ones and synthetic ones of a
physical board) through the results store to the HTML page, PNGs, metrics and summary."""

import argparse
import datetime
import json
import re
import shutil
from html import escape
from pathlib import Path

import numpy as np
import pytest

from rtlab.artifacts.record import SCHEMA, record_file_name
from rtlab.measure.cyclictest import percentiles
from rtlab.report.build import write_report
from rtlab.report.cli import register
from rtlab.report.data import CpuHistogram, collect, compare_histograms, series_name
from rtlab.report.selection import Selection
from rtlab.report.summary import md
from rtlab.store import ingest_folder, open_store
from rtlab.store.query import case_figures, history, last_measured, latest
from rtlab.verdict.thresholds import load_thresholds

RECORDS = Path(__file__).resolve().parents[1] / "data" / "records" / "vlab-imx6q-rt"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_SOURCE = load_thresholds().lookup("imx6q", "rt", "cpu100", 100)["max_us"].source
ERROR_MESSAGE = "load not effective: hackbench <defunct> & 0 runs started"
MR_PIPELINE = "200"


def _cpu(cpu: int, rng: np.random.Generator, *, loc: float, samples: int = 20_000,
         spike: int | None = None, range_us: int = 400) -> dict:
    """A physical board's CPU: tens of µs, a gamma tail, optionally one late wake-up."""
    latencies = (loc + rng.gamma(2.0, 4.0, size=samples)).astype(int)
    if spike is not None:
        latencies[0] = spike
    counts = np.bincount(np.minimum(latencies, range_us), minlength=range_us + 1)
    overflows = int(counts[range_us])
    counts = counts[:range_us]
    found = percentiles(counts.tolist(), overflows)
    return {
        "cpu": cpu, "thread": cpu, "samples": samples, "min_us": int(latencies.min()),
        "avg_us": round(float(latencies.mean()), 2), "max_us": int(latencies.max()),
        "overflows": overflows, "histogram_range_us": range_us,
        "histogram": {str(b): int(c) for b, c in enumerate(counts) if c},
        "percentiles_us": {name: p.value_us if p.value_us is not None else f">={range_us}"
                           for name, p in found.items()},
    }


def _record(folder: Path, *, scenario: str, interval: int, started: datetime.datetime,
            verdict: str, pipeline: str, ref: str, message: str = "",
            cpus: list[dict] | None = None, mr: str | None = None) -> None:
    name = f"imx6q/rt/{scenario}/{interval}us"
    ci = {"CI_PIPELINE_ID": pipeline, "CI_JOB_ID": f"{pipeline}1",
          "CI_COMMIT_SHA": f"{int(pipeline):08x}" + "ab" * 16, "CI_COMMIT_REF_NAME": ref}
    if mr:
        ci["CI_MERGE_REQUEST_IID"] = mr
    record = {
        "schema": SCHEMA, "kind": "cyclictest",
        "case": f"tests/target/test_latency.py::test_latency[{scenario}-{interval}us]",
        "name": name, "run_id": f"run-{pipeline}", "board": "imx6q", "flavour": "rt",
        "place": "imx6q-01", "scenario": scenario, "interval_us": interval,
        "duration_s": 60, "tier": "gate", "verdict": verdict, "message": message,
        "started": started.isoformat(),
        "finished": (started + datetime.timedelta(seconds=70)).isoformat(),
        "system": {"kernel_release": "6.12.0-rt-armmp", "realtime": True},
        "thresholds": {"max_us": {"value": 150, "source": MAX_SOURCE}}, "ci": ci,
    }
    if cpus is not None:
        record["cpus"] = cpus
    (folder / record_file_name(record)).write_text(json.dumps(record), encoding="utf-8")


def synthetic_records(folder: Path) -> None:
    """Six pipelines on main (one failed case, one error among them), then a merge
    request's pipeline: a fail (187 µs > 150 µs), a p99.9 regression that still passes,
    an unchanged case, and an error whose record carries (meaningless) figures."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    day = datetime.datetime(2026, 11, 1, 6, 0, tzinfo=datetime.UTC)
    for index in range(6):
        pipeline, started = str(101 + index), day + datetime.timedelta(days=index)
        for slot, (scenario, interval) in enumerate(
                (("cpu100", 100), ("cpu100", 1000), ("idle", 1000), ("hackbench", 1000))):
            when = started + datetime.timedelta(minutes=2 * slot)
            if pipeline == "104" and scenario == "idle":
                _record(folder, scenario=scenario, interval=interval, started=when,
                        verdict="error", pipeline=pipeline, ref="main",
                        message="serial lost during the test: read failed")
                continue
            spike = 163 if pipeline == "103" and interval == 100 else None
            cpus = [_cpu(c, rng, loc=12, spike=spike if c == 1 else None) for c in range(4)]
            _record(folder, scenario=scenario, interval=interval, started=when,
                    verdict="fail" if spike else "pass", pipeline=pipeline, ref="main",
                    message=f"CPU1 max 163 µs > max_us 150 µs ({MAX_SOURCE})" if spike else "",
                    cpus=cpus)
    started = day + datetime.timedelta(days=9)
    mr = {"pipeline": MR_PIPELINE, "ref": "feature/irq-rework", "mr": "7"}
    _record(folder, scenario="cpu100", interval=100, started=started, verdict="fail",
            message=f"CPU2 max 187 µs > max_us 150 µs ({MAX_SOURCE}: seed study)",
            cpus=[_cpu(c, rng, loc=12, spike=187 if c == 2 else None) for c in range(4)],
            **mr)
    _record(folder, scenario="cpu100", interval=1000,
            started=started + datetime.timedelta(minutes=2), verdict="pass",
            cpus=[_cpu(c, rng, loc=40) for c in range(4)], **mr)
    _record(folder, scenario="idle", interval=1000,
            started=started + datetime.timedelta(minutes=4), verdict="pass",
            cpus=[_cpu(c, rng, loc=12) for c in range(4)], **mr)
    bogus = [_cpu(c, rng, loc=12, spike=9999) for c in range(4)]
    _record(folder, scenario="hackbench", interval=1000,
            started=started + datetime.timedelta(minutes=6), verdict="error",
            message=ERROR_MESSAGE, cpus=bogus, **mr)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    base = tmp_path_factory.mktemp("report")
    synthetic_records(base / "records")
    store = open_store(f"sqlite:///{base / 'results.db'}")
    ingest_folder(store, RECORDS)
    ingest_folder(store, base / "records")
    yield store
    store.close()


@pytest.fixture(scope="module")
def report(store, tmp_path_factory):
    return write_report(store, tmp_path_factory.mktemp("out"), Selection())


def test_page_is_self_contained_with_embedded_figures(report):
    page = report.html.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "http://" not in page and "https://" not in page
    images = re.findall(r'<img src="([^"]*)"', page)
    assert len(images) == len(report.pngs)
    assert all(src.startswith("data:image/png;base64,") for src in images)
    # the same bytes as the file beside the page
    import base64

    embedded = {base64.b64decode(src.split(",", 1)[1]) for src in images}
    assert embedded == {path.read_bytes() for path in report.pngs}


def test_page_has_verdict_counts_and_the_failing_case_with_figure_and_limit(report):
    page = report.html.read_text(encoding="utf-8")
    counts = re.search(r'<p class="counts" id="verdict-counts">(.*?)</p>', page).group(1)
    shown = dict(re.findall(r"v-(\w+)\">\w+</span> (\d+)", counts))
    # imx6q: 4 series (fail, pass, pass, error); qemu-imx6q: 4 series, all pass
    assert shown == {"fail": "1", "error": "1", "pass": "6", "skipped": "0"}
    assert page.count('<span class="verdict v-') == 4 + 8  # counts + one per table row
    failing = page.split("<h2>Failing cases</h2>", 1)[1].split("<h2>", 1)[0]
    assert "imx6q/rt/cpu100/100us" in failing
    assert f"max 187 µs &gt; max_us 150 µs ({MAX_SOURCE})" in failing
    assert "imx6q/rt/cpu100/1000us" not in failing
    # each row names the place that measured it (the places of a type share a plan)
    row = page.split('id="case-imx6q-rt-cpu100-100us"', 1)[1].split("</tr>", 1)[0]
    assert "on imx6q-01" in row
    # and the suite tier its run was
    assert "tier gate" in row


def test_page_escapes_text_from_the_store(report):
    page = report.html.read_text(encoding="utf-8")
    assert "hackbench &lt;defunct&gt; &amp; 0 runs" in page
    assert "<defunct>" not in page


def test_each_png_is_a_valid_png_and_every_expected_figure_is_drawn(report):
    names = sorted(path.name for path in report.pngs)
    # imx6q: cpu100 and idle have histograms, trend and comparison; hackbench's candidate
    # is an error (nothing to compare). qemu-imx6q: no baseline on main; ptsematest keeps
    # no histogram; pi_stress has no figure at all.
    assert names == sorted([
        "histogram-imx6q-rt-cpu100.png", "trend-imx6q-rt-cpu100.png",
        "compare-imx6q-rt-cpu100.png", "histogram-imx6q-rt-idle.png",
        "trend-imx6q-rt-idle.png", "compare-imx6q-rt-idle.png",
        "histogram-imx6q-rt-hackbench.png", "trend-imx6q-rt-hackbench.png",
        "histogram-qemu-imx6q-rt-cpu100.png", "trend-qemu-imx6q-rt-cpu100.png",
        "histogram-qemu-imx6q-rt-idle.png", "trend-qemu-imx6q-rt-idle.png",
        "trend-qemu-imx6q-rt-ptsematest.png",
    ])
    for path in report.pngs:
        data = path.read_bytes()
        assert data.startswith(PNG_SIGNATURE), path
        width, height = (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big"))
        assert width >= 500 and height >= 300, path


def _metrics(text: str) -> dict[tuple[str, frozenset], float]:
    samples = {}
    sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
    label = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    lines = text.splitlines()
    assert lines[-1] == "# EOF"
    for line in lines[:-1]:
        if line.startswith("#"):
            assert re.match(r"^# (TYPE \S+ gauge|HELP \S+ .+)$", line), line
            continue
        match = sample.match(line)
        assert match, line
        labels = frozenset(label.findall(match.group(3) or ""))
        assert (match.group(1), labels) not in samples, f"duplicate sample {line}"
        samples[(match.group(1), labels)] = float(match.group(4))
    return samples


def _series(board, scenario, interval, **extra):
    labels = {"board": board, "flavour": "rt", "scenario": scenario,
              "interval_us": str(interval) if interval is not None else "", **extra}
    return frozenset(labels.items())


def test_metrics_file_is_openmetrics_with_the_stored_figures(report):
    samples = _metrics(report.metrics.read_text(encoding="utf-8"))
    names = {name for name, _ in samples}
    assert {"rtlab_latency_max_us", "rtlab_latency_p99_9_us", "rtlab_latency_avg_us",
            "rtlab_latency_overflow_samples", "rtlab_limit_us", "rtlab_case_verdict",
            "rtlab_compare_shift_us", "rtlab_compare_regression", "rtlab_cases"} <= names
    assert samples[("rtlab_latency_max_us", _series("imx6q", "cpu100", 100))] == 187
    # the virtual rack's record as captured: CPU0's 23483 µs is the worst
    assert samples[("rtlab_latency_max_us", _series("qemu-imx6q", "cpu100", 1000))] == 23483
    assert samples[("rtlab_latency_overflow_samples",
                    _series("qemu-imx6q", "cpu100", 1000))] == 694 + 674 + 659 + 577
    # its p99.9 lies among the overflows: unknown, so not written at all
    assert ("rtlab_latency_p99_9_us", _series("qemu-imx6q", "cpu100", 1000)) not in samples
    assert samples[("rtlab_limit_us", _series("imx6q", "cpu100", 100,
                                             metric="max_us"))] == 150
    assert samples[("rtlab_case_verdict", _series("imx6q", "hackbench", 1000,
                                                 verdict="error"))] == 1
    # an error's figures are not figures
    assert ("rtlab_latency_max_us", _series("imx6q", "hackbench", 1000)) not in samples
    assert samples[("rtlab_compare_regression", _series("imx6q", "cpu100", 1000,
                                                       quantile="0.999"))] == 1
    assert samples[("rtlab_cases", frozenset({("verdict", "fail")}))] == 1
    assert samples[("rtlab_cases", frozenset({("verdict", "pass")}))] == 6
    with_store = {row.key: row for row in report.data.rows}
    stored = with_store[("imx6q", "rt", "idle", 1000)].case
    assert samples[("rtlab_latency_p99_9_us", _series("imx6q", "idle", 1000))] == \
        stored.worst("p99_9_us")


def test_summary_names_the_failing_case_and_the_regression(report):
    text = report.summary.read_text(encoding="utf-8")
    assert "**1 fail**" in text and "**1 error**" in text
    failing = text.split("#### Failing", 1)[1].split("####", 1)[0]
    assert "`imx6q/rt/cpu100/100us`" in failing
    assert f"max 187 µs > max\\_us 150 µs ({MAX_SOURCE})" in failing
    errors = text.split("#### Errors", 1)[1].split("####", 1)[0]
    assert "`imx6q/rt/hackbench/1000us`" in errors and "\\<defunct>" in errors
    compared = text.split("#### Against main", 1)[1]
    assert re.search(r"`imx6q/rt/cpu100/1000us` \| regression \| p99\.9 \|", compared)
    assert "1 regression(s)" in compared


def test_an_error_is_never_a_point_of_a_trend(store, report):
    groups = {group.key: group for group in report.data.groups}
    trend, = groups[("imx6q", "rt", "hackbench")].trends
    # five passing runs on main; the MR's error carried a 9999 µs maximum in its record
    assert len(trend.points) == 6 and len(trend.errors) == 1
    assert all(point.max_us is not None and point.max_us < 150 for point in trend.points)
    assert trend.errors[0].started == datetime.datetime(2026, 11, 10, 6, 6, tzinfo=datetime.UTC)
    assert trend.errors[0].label == f"#{MR_PIPELINE}"
    idle, = groups[("imx6q", "rt", "idle")].trends
    assert len(idle.errors) == 1 and len(idle.points) == 6
    cpu100 = {t.key[3]: t for t in groups[("imx6q", "rt", "cpu100")].trends}
    assert [p.failed for p in cpu100[100].points].count(True) == 2  # pipeline 103, the MR
    # the limit drawn is the thresholds file's, with its line
    assert cpu100[100].limits["max_us"].source == MAX_SOURCE
    assert cpu100[100].limits["max_us"].current


def test_candidate_pipeline_and_its_baseline(store):
    with store.session() as session:
        # six runs of main before the MR: the newest five are the baseline
        data = collect(session, Selection(candidate_pipeline=MR_PIPELINE, baseline_runs=5))
    assert [series_name(row.key) for row in data.rows] == [
        "imx6q/rt/cpu100/100us", "imx6q/rt/cpu100/1000us", "imx6q/rt/hackbench/1000us",
        "imx6q/rt/idle/1000us"]
    assert data.counts() == {"fail": 1, "error": 1, "pass": 2, "skipped": 0}
    rows = {row.key: row for row in data.rows}
    assert rows[("imx6q", "rt", "cpu100", 1000)].comparison.outcome == "regression"
    assert rows[("imx6q", "rt", "idle", 1000)].comparison.outcome != "regression"
    assert rows[("imx6q", "rt", "hackbench", 1000)].comparison is None
    overlay, = [o for g in data.groups for o in g.overlays if o.key[2:] == ("cpu100", 1000)]
    assert len(overlay.baseline) == 5
    assert {case.pipeline_id for case in overlay.baseline} == {"102", "103", "104", "105",
                                                               "106"}


def test_a_candidate_on_the_baseline_ref_is_compared_with_the_runs_before_it(store):
    with store.session() as session:
        data = collect(session, Selection(candidate_ref="main", baseline_runs=3,
                                          boards=("imx6q",)))
    overlays = {o.key: o for g in data.groups for o in g.overlays}
    overlay = overlays[("imx6q", "rt", "cpu100", 1000)]
    assert overlay.candidate.pipeline_id == "106"
    assert [case.pipeline_id for case in overlay.baseline] == ["103", "104", "105"]


def test_aggregated_figures_match_the_per_cpu_rows(store):
    with store.session() as session:
        rows = {row.case_id: row for row in history(session)}
        figures = case_figures(session)
        newest = latest(session, boards=["imx6q"], per_series=2)
    assert len(figures) == len(rows)
    for point in figures:
        row = rows[point.case_id]
        assert point.max_us == row.worst("max_us")
        assert point.p99_9_us == row.worst("p99_9_us")
        assert point.started == row.started
    assert len(newest) == 8
    assert {row.pipeline_id for row in newest} == {"106", MR_PIPELINE}
    # a trend's newest runs only: the same figures, each series' last two
    with store.session() as session:
        capped = case_figures(session, newest=2)
    by_series: dict = {}
    for point in figures:
        by_series.setdefault(point.series, []).append(point.case_id)
    assert sorted(p.case_id for p in capped) == sorted(
        case_id for ids in by_series.values() for case_id in ids[-2:])
    assert [p.started for p in capped] == sorted(p.started for p in capped)


def test_a_trend_says_how_many_older_runs_it_left_out(store, tmp_path, monkeypatch):
    from rtlab.report import data

    monkeypatch.setattr(data, "TREND_RUNS", 3)
    written = write_report(store, tmp_path, Selection())
    [trend] = [t for g in written.data.groups for t in g.trends
               if t.key == ("imx6q", "rt", "cpu100", 1000)]
    # 6 nightly runs and the merge request's: the newest 3 drawn, 4 left out
    assert len(trend.points) + len(trend.errors) == 3 and trend.older == 4


def test_the_cap_on_figures_is_reported(store, tmp_path):
    written = write_report(store, tmp_path, Selection(max_series=1))
    groups = [group.key for group in written.data.groups]
    # failures first
    assert groups == [("imx6q", "rt", "cpu100")]
    assert ("qemu-imx6q", "rt", "idle") in written.data.left_out
    assert "Not plotted" in written.html.read_text(encoding="utf-8")
    assert "Not plotted" in written.summary.read_text(encoding="utf-8")


def test_empty_store(tmp_path):
    empty = open_store(f"sqlite:///{tmp_path / 'empty.db'}")
    try:
        written = write_report(empty, tmp_path / "out", Selection())
    finally:
        empty.close()
    assert "No stored cases match" in written.html.read_text(encoding="utf-8")
    assert written.metrics.read_text(encoding="utf-8").endswith("# EOF\n")
    assert written.pngs == ()


def test_cli(store, tmp_path, capsys):
    top = argparse.ArgumentParser(prog="rtlab")
    register(top.add_subparsers(dest="command", required=True))
    url = str(store.engine.url)
    args = top.parse_args(["report", "--db", url, "--out", str(tmp_path / "r"),
                           "--board", "imx6q", "--candidate-pipeline", MR_PIPELINE,
                           "--baseline-runs", "4", "--max-series", "3"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "4 series (1 fail, 1 error, 2 pass); 1 regression(s) against main" in out
    assert "not plotted (--max-series 3): imx6q/rt/idle" in out
    assert (tmp_path / "r" / "report.html").is_file()
    with pytest.raises(SystemExit):
        top.parse_args(["report", "--candidate-ref", "x", "--candidate-pipeline", "1"])


def test_every_panel_has_a_title_axis_labels_with_units_and_a_legend(report):
    from rtlab.report import plots

    for group in report.data.groups:
        for name, figure in plots.figure_files(group).items():
            assert figure._suptitle is not None and figure._suptitle.get_text(), name
            for axes in figure.axes:
                assert axes.get_title() or axes.get_title(loc="left"), name
                assert "(µs" in axes.get_xlabel() or "run" in axes.get_xlabel(), name
                assert axes.get_ylabel(), name
                assert axes.get_legend() is not None and axes.get_legend().get_texts(), name


def test_parallel_map_keeps_the_order():
    from rtlab.report.pool import parallel_map

    assert parallel_map(abs, [-3, 1, -2, 5], workers=2) == [3, 1, 2, 5]
    assert parallel_map(abs, [-3], workers=2) == [3]


def test_tail_estimates_when_asked(store, tmp_path):
    written = write_report(store, tmp_path, Selection(candidate_pipeline=MR_PIPELINE,
                                                      tail_estimates=True, max_series=0))
    rows = {row.key: row for row in written.data.rows}
    failing = rows[("imx6q", "rt", "cpu100", 100)]
    # the worst CPU's tail, against the 150 µs it was judged by
    assert failing.tail is not None and failing.tail.cpu == 2
    assert failing.tail.bound_us is not None
    assert rows[("imx6q", "rt", "hackbench", 1000)].tail is None  # an error
    page = written.html.read_text(encoding="utf-8")
    assert "<th>tail estimate</th>" in page and "CPU2: " in page
    assert written.pngs == ()


def test_the_report_repeats_the_cases_verdicts_and_judges_nothing_again(store, tmp_path,
                                                                       capsys):
    """One judge: the cases were judged when they ran (rtlab.verdict.case), their test
    jobs failed the pipeline; the report's own comparison is a trend, and its exit status
    never turns a pipeline red or green on its own."""
    top = argparse.ArgumentParser(prog="rtlab")
    register(top.add_subparsers(dest="command", required=True))
    args = top.parse_args(["report", "--db", str(store.engine.url), "--board", "imx6q",
                           "--candidate-pipeline", MR_PIPELINE, "--baseline-runs", "4",
                           "--out", str(tmp_path / "report")])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    with store.session() as session:
        data = collect(session, Selection(candidate_pipeline=MR_PIPELINE, baseline_runs=4))
    # the report's trend comparison finds a regression, which judges nothing
    assert [row.case.name for row in data.regressions] == ["imx6q/rt/cpu100/1000us"]
    failed = [row for row in data.rows if row.verdict == "fail"]
    assert failed and "imx6q/rt/cpu100/1000us" not in [row.case.name for row in failed]
    assert [line for line in out.splitlines() if line.startswith("fail: ")] == [
        f"fail: {row.case.name}: {row.case.message}" for row in failed]


def _long_histogram(rng: np.random.Generator, samples: int, loc: float) -> CpuHistogram:
    """All CPUs' wake-ups of one run, as _cpu draws them."""
    latencies = (loc + rng.gamma(2.0, 4.0, size=samples)).astype(int)
    counts = np.bincount(np.minimum(latencies, 400), minlength=401)
    return CpuHistogram("run", counts[:400], int(counts[400]), samples,
                        float(latencies.max()))


def test_a_long_run_is_compared_at_the_higher_decades_too():
    rng = np.random.default_rng(5)
    baseline = [_long_histogram(rng, 2_000_000, 20) for _ in range(3)]
    result = compare_histograms(_long_histogram(rng, 2_000_000, 20), baseline, 0.999)
    # 2·10^6 wake-ups: 2000 beyond p99.9, 200 beyond p99.99, 20 beyond p99.999
    assert [q for q, _, _ in result.compared] == [0.999, 0.9999]
    assert result.quantile in (0.999, 0.9999)
    short = compare_histograms(_long_histogram(rng, 20_000, 20), baseline, 0.999)
    assert [q for q, _, _ in short.compared] == [0.999] and short.quantile == 0.999


def test_the_last_measured_run_of_a_series_tells_a_rerun_to_trace(store):
    """A re-run of a series whose last stored run failed keeps its trace (tests/target's
    trace_choice): the newest pass or fail of the series on the branch, errors skipped."""
    with store.session() as session:
        on_branch = last_measured(session, board="imx6q", flavour="rt", scenario="cpu100",
                                  interval_us=100, ref="feature/irq-rework")
        on_main = last_measured(session, board="imx6q", flavour="rt", scenario="cpu100",
                                interval_us=100, ref="main")
        # pipeline 104's idle case was an error: the last measured one is 106's pass
        idle = last_measured(session, board="imx6q", flavour="rt", scenario="idle",
                             interval_us=1000, ref="main")
        hackbench = last_measured(session, board="imx6q", flavour="rt", scenario="hackbench",
                                  interval_us=1000, ref="feature/irq-rework")
        unknown = last_measured(session, board="imx6q", flavour="rt", scenario="memory",
                                interval_us=100, ref=None)
    assert (on_branch.verdict, on_branch.pipeline_id) == ("fail", MR_PIPELINE)
    assert (on_main.verdict, on_main.pipeline_id) == ("pass", "106")
    assert (idle.verdict, idle.pipeline_id) == ("pass", "106")
    # the merge request's hackbench case was an error: no measured run on its branch
    assert hackbench is None and unknown is None


TRACED = Path(__file__).resolve().parents[1] / "data" / "trace" / "record"


def traced_report(tmp_path: Path, *, ci: dict | None = None,
                  keep_file: bool = True) -> tuple[dict, str, str]:
    """The report of the virtual board's failing case that kept its trace (a record and
    trace recorded by tests/integration/test_trace_on_breach.py), the trace named as a
    job in ``tmp_path`` names it."""
    folder = tmp_path / "results"
    shutil.copytree(TRACED, folder)
    [path] = folder.glob("*.json")
    record = json.loads(path.read_text())
    record["trace"]["path"] = f"results/{record['trace']['file']}"
    record["ci"] = ci or {}
    path.write_text(json.dumps(record))
    if not keep_file:
        (folder / record["trace"]["file"]).unlink()
    store = open_store(f"sqlite:///{tmp_path / 'results.db'}")
    try:
        ingest_folder(store, folder)
        written = write_report(store, tmp_path / "report", Selection())
    finally:
        store.close()
    page = written.html.read_text()
    failing = page.split("<h2>Failing cases</h2>", 1)[1].split("<h2>", 1)[0]
    return record, failing, written.summary.read_text()


def test_a_failing_case_shows_its_breach_and_excerpt_and_links_its_trace(tmp_path,
                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    record, failing, summary = traced_report(tmp_path)
    breach = record["trace"]["breach"]
    assert record["verdict"] == "fail" and breach["cpu"] is not None
    assert escape(breach["summary"]) in failing
    assert f"on CPU{breach['cpu']}" in breach["summary"]
    # the excerpt, line by line, ending with cyclictest's mark on that CPU
    for line in breach["excerpt"]:
        assert escape(line) in failing
    assert "hit latency threshold" in breach["excerpt"][-1]
    assert f"[{breach['cpu']:03d}]" in breach["excerpt"][-1]
    # the whole trace, beside the results, linked from the report's folder
    assert f'<a href="../results/{record["trace"]["file"]}">the whole trace</a>' in failing
    assert f"{record['trace']['lines']} lines" in failing
    # the merge request's summary names the breach and where the trace is
    assert md(breach["summary"]) in summary
    assert f"`results/{record['trace']['file']}`" in summary


@pytest.mark.parametrize("keep_file", [True, False])
def test_in_gitlab_a_trace_is_linked_as_its_test_jobs_artifact(tmp_path, monkeypatch,
                                                               keep_file):
    """The report job's artifacts hold the page, not the test jobs' traces: a relative link
    would lead nowhere there, whether or not the report job had the trace at hand."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CI_PROJECT_URL", "https://gitlab.example.com/lab/rtlab")
    record, failing, _ = traced_report(tmp_path, ci={"CI_JOB_ID": "4242"},
                                       keep_file=keep_file)
    assert ('<a href="https://gitlab.example.com/lab/rtlab/-/jobs/4242/artifacts/file/'
            f'results/{record["trace"]["file"]}">the whole trace</a>') in failing


def test_a_trace_neither_here_nor_in_gitlab_is_named_unlinked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI_PROJECT_URL", raising=False)
    _, failing, _ = traced_report(tmp_path, keep_file=False)
    assert "the whole trace: <code>results/" in failing and "the whole trace</a>" not in failing


def test_a_case_that_could_not_trace_says_why_in_the_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "results"
    shutil.copytree(TRACED, folder)
    [path] = folder.glob("*.json")
    record = json.loads(path.read_text())
    reason = ("no tracefs with a writable tracing_on at /sys/kernel/tracing or "
              "/sys/kernel/debug/tracing: the kernel has no tracing (CONFIG_FTRACE) or it "
              "is locked down")
    record["trace"] = {"requested": True, "why": "--rt-trace always", "available": False,
                       "reason": reason}
    path.write_text(json.dumps(record))
    store = open_store(f"sqlite:///{tmp_path / 'results.db'}")
    try:
        ingest_folder(store, folder)
        page = write_report(store, tmp_path / "report", Selection()).html.read_text()
    finally:
        store.close()
    assert f"No trace: {escape(reason)}" in page
