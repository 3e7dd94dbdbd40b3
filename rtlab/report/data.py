"""What a report shows, read from the results store: the current case of every series
(the candidate), its baseline and their comparison, the trend points of the series it
plots, and the histograms of their newest measured cases.

Reading is shaped for a store of many thousands of runs: trend points are one aggregated
query over the drawn series (the worst CPU's figures per case, no per-CPU objects),
histograms are decompressed only for the newest measured case of each series and its
baseline runs, and the figures are capped per report (the report names what it left out).
"""

import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path

import attr
import numpy as np
from sqlalchemy import URL, Engine
from sqlalchemy.orm import Session

from rtlab.report.changes import NO_CHANGES, Changes, ChangeView
from rtlab.report.changes import find as find_changes
from rtlab.report.pool import Later, Pool, parallel_map
from rtlab.report.selection import DEFAULT_QUANTILE, Selection
from rtlab.store.changes import accepted_times
from rtlab.store.exposure import Exposure, kernel_exposure
from rtlab.store.query import (
    CaseFigures,
    CaseIdentity,
    CaseRow,
    CpuRow,
    case_figures,
    latest,
    series_counts,
)
from rtlab.verdict.comparison import compare_tail
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.tail import tail_estimate
from rtlab.verdict.thresholds import DEFAULT_PATH as DEFAULT_THRESHOLDS
from rtlab.verdict.thresholds import (
    StatisticsPolicy,
    Thresholds,
    ThresholdsError,
    format_us,
    load_thresholds,
)

MEASURED = ("pass", "fail")
VERDICT_ORDER = ("fail", "error", "pass", "skipped")
# figures (as CaseRow.worst and thresholds.yaml name them) and how a summary names them
FIGURE_METRICS = {"max_us": "max", "p99_9_us": "p99.9", "avg_us": "avg"}

SeriesKey = tuple[str, str, str | None, int | None]
GroupKey = tuple[str, str, str | None]


def series_name(key: SeriesKey) -> str:
    board, flavour, scenario, interval = key
    parts = [board, flavour, scenario or "?"]
    if interval is not None:
        parts.append(f"{interval}us")
    return "/".join(parts)


def group_name(key: GroupKey) -> str:
    return "/".join((key[0], key[1], key[2] or "?"))


def group_of(key: SeriesKey) -> GroupKey:
    return key[:3]


def _sort_key(key: SeriesKey) -> tuple[str, str, str, int]:
    return (key[0], key[1], key[2] or "", key[3] if key[3] is not None else -1)


@attr.frozen
class Limit:
    metric: str
    value: float
    # thresholds.yaml:LINE (None when the record did not say)
    source: str | None
    # True: from the thresholds file in force now; False: the limit the case was judged by
    current: bool = True


@attr.frozen
class Exceeded:
    """A figure of a failing case against the limit it was judged by."""

    figure: str
    value: float | None
    limit: Limit

    def __str__(self) -> str:
        shown = ("past the histogram's range" if self.value is None
                 else format_us(self.value))
        where = f" ({self.limit.source})" if self.limit.source else ""
        return (f"{self.figure} {shown} > {self.limit.metric} "
                f"{format_us(self.limit.value)}{where}")


@attr.frozen
class CompareResult:
    """The candidate's tail quantile against its baseline's
    (rtlab.verdict.comparison.compare), or why there is none."""

    outcome: str | None
    message: str
    baseline_runs: int
    # "run about K× longer" for an inconclusive outcome (inf: longer cannot settle it)
    longer: float | None = None
    difference_us: float | None = None
    ci_us: tuple[float, float] | None = None
    candidate_us: int | None = None
    baseline_us: int | None = None
    range_us: int | None = None
    warnings: tuple[str, ...] = ()
    # the quantile the outcome comes from, and (quantile, outcome, difference µs) of
    # every quantile compared (rtlab.verdict.comparison.compare_tail)
    quantile: float | None = None
    compared: tuple[tuple[float, str, float], ...] = ()


@attr.frozen
class TailResult:
    """The worst CPU's tail estimate (rtlab.verdict.tail.tail_estimate)."""

    cpu: int | None
    # the max_us limit the probability is of crossing
    threshold_us: float | None
    probability: float | None
    per_hour: float | None
    bound_us: float | None
    bound_ci_us: tuple[float, float] | None
    exceedance_probability: float
    warnings: tuple[str, ...] = ()


@attr.frozen
class Row:
    """One series in the summary table: its current case and what it says."""

    key: SeriesKey
    case: CaseRow
    max_us: float | None
    p99_9_us: float | None
    avg_us: float | None
    overflows: int
    range_us: int | None
    # the limits the case was judged by, by metric
    judged: Mapping[str, Limit]
    exceeded: tuple[Exceeded, ...] = ()
    comparison: CompareResult | None = None
    tail: TailResult | None = None

    @property
    def verdict(self) -> str:
        return self.case.verdict

    @property
    def p99_9_past_range(self) -> bool:
        """The p99.9 is only known to be ``>= range`` (among the overflows)."""
        return (self.case.measured and self.p99_9_us is None and self.range_us is not None
                and self.overflows > 0)


@attr.frozen
class TrendPoint:
    started: datetime.datetime
    # pipeline id or short commit, when the run was a pipeline's
    label: str | None
    max_us: float | None
    p99_9_us: float | None
    p99_9_past_range: bool
    failed: bool


@attr.frozen
class TrendError:
    started: datetime.datetime
    label: str | None


@attr.frozen
class Trend:
    """A series over time: measured cases as points, errors apart (an error has no figure
    and is never a point of the max or p99.9 line)."""

    key: SeriesKey
    points: tuple[TrendPoint, ...]
    errors: tuple[TrendError, ...]
    range_us: int | None
    # the limits drawn as lines, by metric: the thresholds file's now, else the newest
    # case's as judged
    limits: Mapping[str, Limit]
    # the series' open change points, marked on the trend with their commit range
    changes: tuple[ChangeView, ...] = ()
    # older runs of the series than the trend draws (TREND_RUNS)
    older: int = 0


@attr.frozen
class CpuHistogram:
    label: str
    counts: np.ndarray = attr.field(eq=False)
    overflows: int
    samples: int
    max_us: float | None
    cpu: int | None = None

    @property
    def range_us(self) -> int:
        return int(self.counts.size)


@attr.frozen
class LatencyPlot:
    """One series' newest measured case, CPU by CPU: the field's latency plot."""

    key: SeriesKey
    case: CaseRow
    cpus: tuple[CpuHistogram, ...]
    limits: Mapping[str, Limit]


@attr.frozen
class Overlay:
    """Candidate and baseline histograms of one series, all CPUs of a case together."""

    key: SeriesKey
    candidate: CaseRow
    candidate_hist: CpuHistogram
    baseline: tuple[CaseRow, ...]
    baseline_hists: tuple[CpuHistogram, ...]
    comparison: CompareResult | None


@attr.frozen
class Group:
    """Board × flavour × scenario: one histogram, trend and overlay figure each, a panel
    per interval."""

    key: GroupKey
    latency: tuple[LatencyPlot, ...]
    trends: tuple[Trend, ...]
    overlays: tuple[Overlay, ...]

    @property
    def kinds(self) -> list[str]:
        """The figures the group has, in the page's order (rtlab.report.plots.KINDS): a
        rt-test keeps no histogram; no baseline, no overlay."""
        return [kind for kind, panels in (("histogram", self.latency), ("trend", self.trends),
                                          ("compare", self.overlays)) if panels]


@attr.frozen
class ReportData:
    selection: Selection
    generated: datetime.datetime
    rows: tuple[Row, ...]
    groups: tuple[Group, ...]
    # groups with something to draw that the cap on figures left out
    left_out: tuple[GroupKey, ...]
    cases_in_store: int
    # every stored run of each kernel on one board type under one load, pooled
    # (rtlab.store.exposure), within the selection's boards and flavours
    exposure: Exposure | None = None
    # the open change points of the default branch's series (rtlab.report.changes)
    changes: Changes = NO_CHANGES

    def counts(self) -> dict[str, int]:
        """Verdict counts over the current cases, every verdict named."""
        counts = dict.fromkeys(VERDICT_ORDER, 0)
        for row in self.rows:
            counts[row.verdict] = counts.get(row.verdict, 0) + 1
        return counts

    @property
    def failing(self) -> tuple[Row, ...]:
        return tuple(row for row in self.rows if row.verdict == "fail")

    @property
    def errors(self) -> tuple[Row, ...]:
        return tuple(row for row in self.rows if row.verdict == "error")

    @property
    def regressions(self) -> tuple[Row, ...]:
        return tuple(row for row in self.rows
                     if row.comparison is not None and row.comparison.outcome == "regression")


def collect(session: Session, selection: Selection, *, thresholds: Thresholds | None = None,
            thresholds_path: Path | None = None, now: datetime.datetime | None = None,
            workers: Pool | None = None,
            draw: Callable[[Group, Sequence[str]], object] | None = None) -> ReportData:
    """Everything a report shows, from the store. ``thresholds`` (else the file at
    ``thresholds_path``, else the repository's) gives the limits drawn in the trends; a
    series the file cannot resolve (an unknown board) gets the limits its newest case was
    judged by. The comparisons run on ``workers`` (else on processes of their own);
    ``draw(group, kinds)`` is handed each drawn group as soon as its figures of those
    kinds (``Group.kinds``) can be drawn: the rest is read meanwhile."""
    # without the repository's file (an installed rtlab), the limits cases were judged by
    if thresholds is None and (thresholds_path is not None or DEFAULT_THRESHOLDS.is_file()):
        thresholds = load_thresholds(thresholds_path)
    filters = {"boards": selection.boards or None, "flavours": selection.flavours or None}
    # the exposure pools every stored case, the longest of the report's queries (on
    # PostgreSQL, the server's work): on a worker, on a connection of its own, while the
    # rest is read here
    exposure = _exposure_beside(session, workers, filters, thresholds)
    # every series once, for each query below that reads series by series
    counts = series_counts(session, **filters)
    current = {case.series: case for case in latest(
        session, **filters, ref=selection.candidate_ref,
        pipeline_id=selection.candidate_pipeline, series=counts)}
    if not current:
        return ReportData(selection, now or _now(), (), (), (), 0)
    # the newest measured candidate of every series: its histograms are the latency plot
    # and the candidate of the comparison (an error has nothing to compare)
    measured = {case.series: case for case in latest(
        session, **filters, ref=selection.candidate_ref,
        pipeline_id=selection.candidate_pipeline, verdicts=MEASURED, histograms=True,
        series=counts)}
    baselines: dict[SeriesKey, list[CaseRow]] = {}
    if selection.baseline_runs > 0:
        for case in latest(session, **filters, ref=selection.baseline_ref, verdicts=MEASURED,
                           per_series=selection.baseline_runs + 1, histograms=True,
                           series=counts):
            baselines.setdefault(case.series, []).append(case)
        # a baseline never pools both sides of an accepted change point
        for key, since in accepted_times(session, ref=selection.baseline_ref).items():
            if key in baselines:
                baselines[key] = [case for case in baselines[key] if case.started >= since]

    keys = sorted(current, key=_sort_key)
    policies = {key: _policy(thresholds, key) for key in keys}
    tasks = [_stats_task(key, measured.get(key) if current[key].measured else None,
                         baselines.get(key, []), selection) for key in keys]
    # each series compares the tail quantile its thresholds entry names
    tasks = [attr.evolve(task, quantile=policies[task.key].quantile)
             if policies[task.key] is not None else task for task in tasks]
    # the bootstraps and fits are the costly part: one task per series, over every core
    busy = [task for task in tasks if task.busy]
    results = dict(zip([task.key for task in busy],
                       workers.map(_run_stats, busy) if workers is not None
                       else parallel_map(_run_stats, busy), strict=True))
    rows, overlays = [], {}
    for key, task in zip(keys, tasks, strict=True):
        comparison, tail = results.get(key, (task.note, None))
        row = _summary_row(key, current[key], comparison, tail)
        rows.append(row)
        if task.baseline_hists and task.cand_hist is not None:
            overlays[key] = Overlay(key, task.candidate, task.cand_hist, task.baseline,
                                    task.baseline_hists, comparison)

    chosen, left_out = _chosen(rows, counts, selection)
    # each group's histograms and overlays are drawn while the rest is read
    groups = [_group(key, chosen[key], measured, overlays, thresholds) for key in chosen]
    if draw is not None:
        for group in groups:
            # no trends yet: its histograms and overlays
            draw(group, group.kinds)
    changes = (find_changes(session, selection.baseline_ref, boards=selection.boards,
                            flavours=selection.flavours, thresholds=thresholds, now=now,
                            series=counts)
               if selection.changes else NO_CHANGES)
    groups = _with_trends(session, filters, groups, chosen, counts, thresholds, changes)
    if draw is not None:
        for group in groups:
            draw(group, [kind for kind in group.kinds if kind == "trend"])
    return ReportData(selection, now or _now(), tuple(rows), tuple(groups), left_out,
                      sum(total for total, _ in counts.values()), exposure.result(), changes)


def _exposure_beside(session: Session, workers: Pool | None,
                     filters: Mapping[str, Sequence[str] | None],
                     thresholds: Thresholds | None) -> "Future[Exposure] | Later[Exposure]":
    """The kernels' exposure, begun on a worker where one can open the store again (not a
    session bound to one connection, nor an in-memory SQLite database, one per
    connection); else read here when its result is asked for."""
    bind = session.get_bind()
    if workers is None or not workers.forks or not isinstance(bind, Engine) or (
            bind.url.get_backend_name() == "sqlite"
            and bind.url.database in (None, "", ":memory:")):
        return Later(lambda _: kernel_exposure(session, **filters, thresholds=thresholds),
                     None)
    return workers.submit(_exposure_on_worker, (bind.url, dict(filters), thresholds))


def _exposure_on_worker(task: tuple[URL, dict[str, Sequence[str] | None],
                                    Thresholds | None]) -> Exposure:
    from rtlab.store import connect

    url, filters, thresholds = task
    # the engine inherited from the parent is the parent's: never used in a fork
    engine = connect(url.render_as_string(hide_password=False), upgrade=False)
    try:
        with Session(engine) as session:
            return kernel_exposure(session, **filters, thresholds=thresholds)
    finally:
        engine.dispose()


def _policy(thresholds: Thresholds | None, key: SeriesKey) -> StatisticsPolicy | None:
    """The statistics policy of a cyclictest series (None: an rt-test, or a series the
    thresholds file does not know; both then compare at the default quantile and never
    gate)."""
    board, flavour, scenario, interval = key
    if thresholds is None or scenario is None or interval is None:
        return None
    try:
        return thresholds.statistics(board, flavour, scenario, interval)
    except ThresholdsError:
        return None


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


def _judged(case: CaseRow) -> dict[str, Limit]:
    return {metric: Limit(metric, value, source, current=False)
            for metric, (value, source) in case.limits.items()}


def _summary_row(key: SeriesKey, case: CaseRow, comparison: CompareResult | None,
                 tail: TailResult | None) -> Row:
    judged = _judged(case)
    figures = {figure: case.worst(figure) if case.measured else None
               for figure in FIGURE_METRICS}
    exceeded = []
    if case.verdict == "fail":
        for figure, name in FIGURE_METRICS.items():
            limit = judged.get(figure)
            value = figures[figure]
            if limit is None:
                continue
            # a percentile among the overflows is only known to be >= the range
            if value is None and figure.startswith("p") and any(
                    cpu.histogram_range_us for cpu in _judged_cpus(case)):
                exceeded.append(Exceeded(name, None, limit))
            elif value is not None and value > limit.value:
                exceeded.append(Exceeded(name, value, limit))
    # an error's figures, if its record kept any, are not figures
    cpus = _judged_cpus(case) if case.measured else []
    ranges = [cpu.histogram_range_us for cpu in cpus if cpu.histogram_range_us]
    return Row(key=key, case=case, max_us=figures["max_us"], p99_9_us=figures["p99_9_us"],
               avg_us=figures["avg_us"], overflows=sum(cpu.overflows or 0 for cpu in cpus),
               range_us=min(ranges) if ranges else None, judged=judged,
               exceeded=tuple(exceeded), comparison=comparison, tail=tail)


def _judged_cpus(case: CaseRow) -> list[CpuRow]:
    return [cpu for cpu in case.cpus if not cpu.no_wakeup and (cpu.gated is None or cpu.gated)]


def _histogram_cpus(case: CaseRow) -> list[CpuRow]:
    return [cpu for cpu in _judged_cpus(case)
            if cpu.histogram is not None and cpu.histogram_range_us]


def _cpu_histograms(case: CaseRow) -> tuple[CpuHistogram, ...]:
    return tuple(CpuHistogram(f"CPU{cpu.cpu if cpu.cpu is not None else cpu.thread}",
                              cpu.histogram, cpu.overflows or 0, cpu.samples, cpu.max_us,
                              cpu.cpu)
                 for cpu in _histogram_cpus(case) if cpu.samples > 0)


def merged(hists: Iterable[CpuHistogram], label: str) -> CpuHistogram | None:
    """All samples of several CPUs (or runs) in one histogram, at the smallest range."""
    items = [h for h in hists if h.samples > 0]
    if not items:
        return None
    size = min(h.range_us for h in items)
    counts = np.zeros(size, dtype=np.int64)
    overflows = 0
    for h in items:
        counts += h.counts[:size]
        overflows += h.overflows + int(h.counts[size:].sum())
    maxima = [h.max_us for h in items]
    return CpuHistogram(label, counts, overflows, int(counts.sum()) + overflows,
                        None if any(m is None for m in maxima)
                        else max(m for m in maxima if m is not None))


@attr.frozen
class _StatsTask:
    """What the statistics of one series need, prepared before the workers fork."""

    key: SeriesKey
    candidate: CaseRow | None = None
    cand_hist: CpuHistogram | None = None
    baseline: tuple[CaseRow, ...] = ()
    baseline_hists: tuple[CpuHistogram, ...] = ()
    # the CPU with the worst maximum, for a tail estimate
    tail_cpu: CpuHistogram | None = None
    tail_limit_us: float | None = None
    # no comparison, and why (None: nothing to say, e.g. an rt-test without histograms)
    note: CompareResult | None = None
    quantile: float = DEFAULT_QUANTILE

    @property
    def busy(self) -> bool:
        return bool(self.baseline_hists) or self.tail_cpu is not None


def _stats_task(key: SeriesKey, candidate: CaseRow | None, baseline_cases: list[CaseRow],
                selection: Selection) -> _StatsTask:
    cpus = _cpu_histograms(candidate) if candidate is not None else ()
    cand = merged(cpus, "candidate")
    if candidate is None or cand is None:
        return _StatsTask(key)
    tail_cpu = tail_limit = None
    if selection.tail_estimates:
        tail_cpu = max(cpus, key=lambda h: h.max_us if h.max_us is not None else -1.0)
        limit = candidate.limits.get("max_us")
        tail_limit = limit[0] if limit else None
    # the newest N of the baseline ref, the candidate itself left out (when the candidate
    # is on the baseline ref, its baseline is the runs before it)
    runs = [case for case in baseline_cases if case.case_id != candidate.case_id]
    runs = runs[-selection.baseline_runs:] if selection.baseline_runs else []
    used = [(case, h) for case, h in ((case, merged(_cpu_histograms(case), _run_label(case)))
                                      for case in runs) if h is not None]
    note = (None if used or selection.baseline_runs == 0 else
            CompareResult(None, f"no measured baseline on {selection.baseline_name}", 0))
    return _StatsTask(key, candidate, cand, tuple(case for case, _ in used),
                      tuple(h for _, h in used), tail_cpu, tail_limit, note,
                      selection.quantile)


def _run_stats(task: _StatsTask) -> tuple[CompareResult | None, TailResult | None]:
    comparison = task.note
    if task.baseline_hists and task.cand_hist is not None:
        comparison = compare_histograms(task.cand_hist, task.baseline_hists, task.quantile)
    tail = None
    if task.tail_cpu is not None and task.candidate is not None:
        tail = tail_result(task.tail_cpu, task.tail_limit_us, task.candidate.interval_us)
    return comparison, tail


def compare_histograms(candidate: CpuHistogram, baseline: Sequence[CpuHistogram],
                       quantile: float) -> CompareResult:
    """rtlab.verdict.comparison.compare_tail of all the candidate's wake-ups against the baseline
    runs': ``quantile`` and the higher decades the runs are long enough for."""
    try:
        result = compare_tail(_stats_histogram(candidate),
                              [_stats_histogram(h) for h in baseline],
                              quantile=quantile)
    except ValueError as error:
        return CompareResult(None, f"not compared: {error}", len(baseline))
    return CompareResult(
        outcome=result.outcome, message=result.message, baseline_runs=result.baseline_runs,
        longer=result.longer, difference_us=result.difference_us, ci_us=result.ci_us,
        candidate_us=result.candidate_us, baseline_us=result.baseline_us,
        range_us=result.range_us, warnings=result.warnings, quantile=result.quantile,
        compared=result.compared or ((result.quantile, result.outcome,
                                      result.difference_us),))


def _stats_histogram(hist: CpuHistogram) -> Histogram:
    return Histogram(hist.counts, hist.overflows, hist.max_us)


def tail_result(hist: CpuHistogram, limit_us: float | None,
                interval_us: int | None) -> TailResult:
    """rtlab.verdict.tail.tail_estimate of one CPU against the max_us limit."""
    estimate = tail_estimate(_stats_histogram(hist), limit_us, interval_us=interval_us)
    return TailResult(hist.cpu, limit_us, estimate.probability, estimate.per_hour,
                      estimate.bound_us, estimate.bound_ci_us,
                      estimate.exceedance_probability, estimate.warnings)


def run_parts(case: CaseRow) -> list[str]:
    """When, in which pipeline and on which place a case ran, as the table and the summary
    name its run (the places of a board type share a plan's cases: each says its own)."""
    parts = [case.started.strftime("%Y-%m-%d %H:%M")]
    if case.pipeline_id:
        parts.append(f"pipeline {case.pipeline_id}")
    if case.commit_sha:
        parts.append(case.commit_sha[:8])
    if case.place:
        parts.append(f"on {case.place}")
    if case.tier:
        parts.append(f"tier {case.tier}")
    return parts


def _run_label(case: CaseRow) -> str:
    if case.pipeline_id:
        return f"pipeline {case.pipeline_id}"
    if case.commit_sha:
        return case.commit_sha[:8]
    return case.started.strftime("%Y-%m-%d %H:%M")


def point_label(point: CaseIdentity) -> str | None:
    """How a trend names a run: its pipeline, else its commit."""
    if point.pipeline_id:
        return f"#{point.pipeline_id}"
    if point.commit_sha:
        return point.commit_sha[:8]
    return None


def trend(key: SeriesKey, points: Sequence[CaseFigures],
          limits: Mapping[str, Limit]) -> Trend:
    """The series' measured cases as points and its errors as times. Skipped cases are
    left out; an error's figures (if its record has any) are never a point."""
    shown = tuple(TrendPoint(p.started, point_label(p), p.max_us, p.p99_9_us,
                             p.p99_9_us is None and p.p99_9_past_range > 0,
                             p.verdict == "fail")
                  for p in points if p.verdict in MEASURED)
    errors = tuple(TrendError(p.started, point_label(p)) for p in points
                   if p.verdict == "error")
    ranges = [p.histogram_range_us for p in points if p.histogram_range_us]
    return Trend(key, shown, errors, min(ranges) if ranges else None, limits)


def current_limits(thresholds: Thresholds | None, key: SeriesKey,
                   fallback: CaseRow | None) -> dict[str, Limit]:
    """The limits in force now for a series; when the file cannot say (an unknown board,
    flavour or scenario), the ones its newest case was judged by."""
    board, flavour, scenario, interval = key
    if thresholds is not None and scenario is not None:
        try:
            found = thresholds.lookup(board, flavour, scenario, interval)
        except ThresholdsError:
            pass
        else:
            return {metric: Limit(metric, limit.value, limit.source)
                    for metric, limit in found.items()}
    return _judged(fallback) if fallback is not None else {}


def _changes_of(changes: Changes, key: SeriesKey) -> tuple[ChangeView, ...]:
    board, flavour, scenario, interval = key
    if scenario is None or interval is None:
        return ()
    return changes.of((board, flavour, scenario, interval))


TREND_RUNS = 1000
"""A trend draws each series' newest so many runs (a year of three nightlies): a lab's
store of 100 000 runs is read in a fraction of a second, and the figure says how many
older runs it left out."""


def _has_figures(points: Iterable[CaseFigures]) -> bool:
    return any(p.verdict in MEASURED and p.max_us is not None for p in points)


def _priority(rows: Sequence[Row]) -> int:
    """Which groups a capped report draws first: failures, then errors, then
    regressions and inconclusive comparisons, then the rest."""
    if any(row.verdict == "fail" for row in rows):
        return 0
    if any(row.verdict == "error" for row in rows):
        return 1
    if any(row.comparison and row.comparison.outcome == "regression" for row in rows):
        return 2
    return 3


def _chosen(rows: Sequence[Row], counts: Mapping[SeriesKey, tuple[int, int]],
            selection: Selection) -> tuple[dict[GroupKey, list[Row]], tuple[GroupKey, ...]]:
    """The groups a report draws (whole groups, in priority order, as many series as
    ``max_series`` allows, the first one even if it alone is more), each with its rows,
    in page order; and those it leaves out."""
    rows_by_group: dict[GroupKey, list[Row]] = {}
    for row in rows:
        rows_by_group.setdefault(group_of(row.key), []).append(row)
    # a group has something to draw when one of its series has a measured figure (a
    # functional rt-test such as pi_stress has a verdict only)
    drawable = [key for key, group_rows in rows_by_group.items()
                if any(counts.get(row.key, (0, 0))[1] for row in group_rows)]
    drawable.sort(key=lambda g: (_priority(rows_by_group[g]), g[0], g[1], g[2] or ""))
    chosen, left_out, budget = [], [], selection.max_series
    for group_key in drawable:
        size = len(rows_by_group[group_key])
        if budget > 0 and (size <= budget or not chosen):
            chosen.append(group_key)
            budget -= size
        else:
            left_out.append(group_key)
    chosen.sort(key=lambda g: (g[0], g[1], g[2] or ""))
    left_out.sort(key=lambda g: (g[0], g[1], g[2] or ""))
    return {key: rows_by_group[key] for key in chosen}, tuple(left_out)


def _group(key: GroupKey, rows: Sequence[Row], measured: Mapping[SeriesKey, CaseRow],
           overlays: Mapping[SeriesKey, Overlay], thresholds: Thresholds | None) -> Group:
    """A drawn group's histograms and overlays (its trends come later: their query is
    the longer one)."""
    latency, group_overlays = [], []
    for row in rows:
        newest = measured.get(row.key)
        if newest is not None:
            cpus = _cpu_histograms(newest)
            if cpus:
                latency.append(LatencyPlot(row.key, newest, cpus,
                                           current_limits(thresholds, row.key, row.case)))
        if row.key in overlays:
            group_overlays.append(overlays[row.key])
    return Group(key, tuple(latency), (), tuple(group_overlays))


def _with_trends(session: Session, filters: Mapping[str, Sequence[str] | None],
                 groups: Sequence[Group], chosen: Mapping[GroupKey, Sequence[Row]],
                 counts: Mapping[SeriesKey, tuple[int, int]], thresholds: Thresholds | None,
                 changes: Changes) -> list[Group]:
    """``groups`` with their series' trends: one query over the drawn groups' newest
    TREND_RUNS runs, no per-CPU rows."""
    by_series: dict[SeriesKey, list[CaseFigures]] = {}
    if groups:
        drawn = {group.key for group in groups}
        for point in case_figures(session, **filters, groups=list(drawn), newest=TREND_RUNS,
                                  series=[key for key in counts if group_of(key) in drawn]):
            by_series.setdefault(point.series, []).append(point)
    complete = []
    for group in groups:
        trends = []
        for row in chosen[group.key]:
            points = by_series.get(row.key, ())
            if _has_figures(points):
                trends.append(attr.evolve(
                    trend(row.key, points, current_limits(thresholds, row.key, row.case)),
                    changes=_changes_of(changes, row.key),
                    older=max(0, counts.get(row.key, (0, 0))[0] - len(points))))
        complete.append(attr.evolve(group, trends=tuple(trends)))
    return complete
