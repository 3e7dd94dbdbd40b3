"""Reading the store: the history of one series (board × flavour × scenario × interval),
newest last, as plain values that reports, statistics and threshold tuning work on."""

import datetime
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attr
import numpy as np
from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    case,
    false,
    func,
    or_,
    select,
    union_all,
)
from sqlalchemy.orm import Session, selectinload

from rtlab.store.changes import accepted_since
from rtlab.store.ingest import _utc
from rtlab.store.models import Case, CpuResult, Run
from rtlab.verdict.baseline import Baseline, StoredRun, eligible_baseline
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.thresholds import StatisticsPolicy

SeriesKey = tuple[str, str, str | None, int | None]
"""board, flavour, scenario, interval_us (scenario and interval None: an rt-test)."""


@attr.frozen
class CpuRow:
    cpu: int | None
    thread: int | None
    samples: int
    min_us: float | None
    avg_us: float | None
    max_us: float | None
    overflows: int | None
    no_wakeup: bool
    gated: bool | None
    p99_us: float | None
    p99_9_us: float | None
    p99_99_us: float | None
    histogram_range_us: int | None
    # dense counts per 1 µs bucket; None when not asked for or not measured
    histogram: np.ndarray | None = attr.field(default=None, eq=False)


@attr.frozen(kw_only=True)
class CaseIdentity:
    """What names a stored case and the run it belongs to, in every view of it."""

    case_id: int
    board: str
    flavour: str
    scenario: str | None
    interval_us: int | None
    kind: str
    verdict: str
    started: datetime.datetime
    pipeline_id: str | None
    commit_sha: str | None
    ref_name: str | None

    @property
    def series(self) -> tuple[str, str, str | None, int | None]:
        return (self.board, self.flavour, self.scenario, self.interval_us)

    @property
    def measured(self) -> bool:
        """A verdict on figures: pass or fail, not an error or a skip."""
        return self.verdict in ("pass", "fail")


@attr.frozen(kw_only=True)
class CaseRow(CaseIdentity):
    """A case with its run's details and every CPU's figures."""

    run_key: str
    name: str
    message: str
    place: str | None
    kernel_release: str | None
    realtime: bool | None
    merge_request_iid: str | None
    cpus: tuple[CpuRow, ...]
    tier: str | None = None
    # metric -> (value, thresholds.yaml:LINE) the case was judged by
    limits: dict[str, tuple[float, str | None]] = attr.field(factory=dict, eq=False)
    # the record's trace on breach (rtlab.measure.trace), when the case asked for one
    trace: dict[str, Any] | None = attr.field(default=None, eq=False)
    job_id: str | None = None
    # the record's plan (rtlab.verdict.case.CasePlan): the pipeline's gated cases it shared
    # the budget with (None: a record from before the budget), and whether this door judged
    # the tail gate (a pooled case's replica did not)
    pipeline_cases: int | None = None
    tail_gate: bool = True

    def worst(self, figure: str) -> float | None:
        """The worst CPU's figure (``max_us``, ``avg_us``, ``p99_9_us``...), None when no
        CPU has it. A percentile unknown on any CPU (past the histogram) is unknown for the
        case: the worst CPU may be that one."""
        values = [getattr(cpu, figure) for cpu in self.cpus
                  if not cpu.no_wakeup and (cpu.gated is None or cpu.gated)]
        if not values or (figure.startswith("p") and any(v is None for v in values)):
            return None
        known = [v for v in values if v is not None]
        return max(known) if known else None


def series_query(*, board: str | None = None, flavour: str | None = None,
                 scenario: str | None = None, interval_us: int | None = None,
                 ref: str | None = None, since: datetime.datetime | None = None,
                 verdicts: Sequence[str] | None = None) -> Select:
    query = select(Case).join(Case.run).order_by(Case.started, Case.id)
    for column, value in ((Case.board, board), (Case.flavour, flavour),
                          (Case.scenario, scenario), (Case.interval_us, interval_us),
                          (Run.ref_name, ref)):
        if value is not None:
            query = query.where(column == value)
    if since is not None:
        query = query.where(Case.started >= since)
    if verdicts is not None:
        query = query.where(Case.verdict.in_(list(verdicts)))
    return query


def history(session: Session, *, board: str | None = None, flavour: str | None = None,
            scenario: str | None = None, interval_us: int | None = None,
            ref: str | None = None, since: datetime.datetime | None = None,
            verdicts: Sequence[str] | None = None, last: int | None = None,
            histograms: bool = False) -> list[CaseRow]:
    """The stored cases that match, oldest first (``last``: only the newest N). Each
    filter left None matches everything; ``ref`` is the branch (CI_COMMIT_REF_NAME) the
    run was made for, e.g. the default branch for a baseline."""
    query = series_query(board=board, flavour=flavour, scenario=scenario,
                         interval_us=interval_us, ref=ref, since=since, verdicts=verdicts)
    if last is not None:
        newest = query.order_by(None).order_by(Case.started.desc(), Case.id.desc()).limit(last)
        query = select(Case).where(Case.id.in_(newest.with_only_columns(Case.id).scalar_subquery())
                                   ).order_by(Case.started, Case.id)
    query = query.options(selectinload(Case.run), selectinload(Case.cpus),
                          selectinload(Case.limits))
    return [_row(case, histograms) for case in session.scalars(query)]


def series(session: Session) -> list[tuple[str, str, str | None, int | None]]:
    """Every (board, flavour, scenario, interval_us) the store has cases of."""
    query = select(Case.board, Case.flavour, Case.scenario, Case.interval_us).distinct()
    # plain tuples (Result.tuples() is deprecated in SQLAlchemy 2.1)
    return sorted((tuple(row) for row in session.execute(query)),
                  key=lambda s: (s[0], s[1], s[2] or "", s[3] or 0))


def _pooled_places(record: Any) -> str | None:  # noqa: ANN401 - JSON
    """The places a case measured on several boards at once was judged on (rtlab.run.pooling),
    as one place is named: ``imx6q-01+imx6q-02``."""
    if not isinstance(record, dict) or not record.get("replicated"):
        return None
    places = [str(b.get("place")) for b in record.get("boards") or []
              if isinstance(b, dict) and b.get("judged")]
    return "+".join(places) or None


def _row(case: Case, histograms: bool) -> CaseRow:
    run = case.run
    return CaseRow(
        case_id=case.id, run_key=run.run_key, name=case.name, board=case.board,
        flavour=case.flavour, scenario=case.scenario, interval_us=case.interval_us,
        kind=case.kind, verdict=case.verdict, message=case.message,
        started=_utc(case.started), place=run.place or _pooled_places(case.record),
        kernel_release=run.kernel_release,
        realtime=run.realtime, pipeline_id=run.pipeline_id, commit_sha=run.commit_sha,
        ref_name=run.ref_name, merge_request_iid=run.merge_request_iid, tier=case.tier,
        cpus=tuple(_cpu(cpu, histograms) for cpu in case.cpus),
        limits={limit.metric: (limit.value, limit.source) for limit in case.limits},
        trace=_trace(case.record), job_id=run.job_id,
        pipeline_cases=_whole(case.record, "pipeline_cases"),
        tail_gate=not (isinstance(case.record, dict) and case.record.get("tail_gate") is False),
    )


def _whole(record: object, key: str) -> int | None:
    value = record.get(key) if isinstance(record, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _trace(record: object) -> dict[str, Any] | None:
    trace = record.get("trace") if isinstance(record, dict) else None
    return trace if isinstance(trace, dict) else None


def _cpu(cpu: CpuResult, histograms: bool) -> CpuRow:
    return CpuRow(
        cpu=cpu.cpu, thread=cpu.thread, samples=cpu.samples, min_us=cpu.min_us,
        avg_us=cpu.avg_us, max_us=cpu.max_us, overflows=cpu.overflows,
        no_wakeup=cpu.no_wakeup, gated=cpu.gated, p99_us=cpu.p99_us, p99_9_us=cpu.p99_9_us,
        p99_99_us=cpu.p99_99_us, histogram_range_us=cpu.histogram_range_us,
        histogram=cpu.counts() if histograms else None,
    )


def _series_is(board: str, flavour: str, scenario: str | None,
               interval_us: int | None) -> ColumnElement[bool]:
    return and_(Case.board == board, Case.flavour == flavour,
                Case.scenario.is_(None) if scenario is None else Case.scenario == scenario,
                Case.interval_us.is_(None) if interval_us is None
                else Case.interval_us == interval_us)


def _series_of(session: Session, boards: Sequence[str] | None,
               flavours: Sequence[str] | None,
               known: Iterable[SeriesKey] | None) -> list[SeriesKey]:
    """The series of ``boards`` and ``flavours``: ``known``, else from the cases' index."""
    if known is not None:
        return list(known)
    every = _filtered(select(Case.board, Case.flavour, Case.scenario, Case.interval_us)
                      .distinct(), boards=boards, flavours=flavours)
    return [(board, flavour, scenario, interval_us)
            for board, flavour, scenario, interval_us in session.execute(every)]


def newest_ids(session: Session, *, boards: Sequence[str] | None = None,
               flavours: Sequence[str] | None = None, ref: str | None = None,
               pipeline_id: str | None = None, verdicts: Sequence[str] | None = None,
               kinds: Sequence[str] | None = None, per_series: int = 1,
               series: Iterable[SeriesKey] | None = None) -> list[int]:
    """The ids of the newest ``per_series`` matching cases of every series. A pipeline's
    cases are few: ranked at once. Otherwise each series is read newest first along its
    index (``ix_cases_series``) until it has enough: a store's size does not matter, only
    the series' count. ``series``: the series of ``boards`` and ``flavours``, where the
    caller knows them already (series_counts): else read here, a scan of every case."""
    if pipeline_id is not None:
        # found along the pipeline's runs, ranked here: with the boards in the query, a
        # planner without statistics walks a board's every case instead
        query = _filtered(select(Case.id, Case.board, Case.flavour, Case.scenario,
                                 Case.interval_us, Case.started), flavours=flavours,
                          ref=ref, pipeline_id=pipeline_id, verdicts=verdicts)
        if kinds is not None:
            query = query.where(Case.kind.in_(list(kinds)))
        newest: dict[tuple[Any, ...], list[tuple[Any, int]]] = {}
        for case_id, board, flavour, scenario, interval_us, started in session.execute(query):
            if not boards or board in boards:
                newest.setdefault((board, flavour, scenario, interval_us), []).append(
                    (started, case_id))
        return [case_id for cases in newest.values()
                for _, case_id in sorted(cases, reverse=True)[:per_series]]
    found: list[int] = []
    query = _filtered(select(Case.id), ref=ref, verdicts=verdicts)
    if kinds is not None:
        query = query.where(Case.kind.in_(list(kinds)))
    found.extend(row.id for row in newest_per_series(
        session, query, _series_of(session, boards, flavours, series), per_series))
    return found


SERIES_PER_STATEMENT = 100
"""Series read by one statement (:func:`newest_per_series`): below SQLite's limit of 500
terms of a compound SELECT."""


def newest_per_series(session: Session, query: Select, series: Sequence[SeriesKey],
                      newest: int | None) -> list[Any]:
    """The rows of ``query`` (over cases) of each of ``series``, its newest ``newest``
    (None: all), in no promised order: every series read along its index
    (``ix_cases_series``) as far as it needs, all of them in one statement (a UNION ALL
    of one limited SELECT each) rather than one round trip per series, which cost more
    than the reading on PostgreSQL (3 ms a series, 0.2 ms of it the server's)."""
    rows: list[Any] = []
    for statement in newest_statements(query, series, newest):
        rows.extend(session.execute(statement))
    return rows


def newest_statements(query: Select, series: Sequence[SeriesKey],
                      newest: int | None) -> list[Select]:
    """The statements of :func:`newest_per_series`, SERIES_PER_STATEMENT series each."""
    statements = []
    for start in range(0, len(series), SERIES_PER_STATEMENT):
        parts = []
        for key in series[start:start + SERIES_PER_STATEMENT]:
            # the series' own columns lead the order, as they lead the index: constant
            # within it, they change nothing, but PostgreSQL does not take a column
            # fixed by IS NULL (an rt-test's interval) as ordered, and sorted an rt-test's
            # every case (30 ms) instead of reading its newest along the index
            one = query.where(_series_is(*key)).order_by(None).order_by(
                Case.board.desc(), Case.flavour.desc(), Case.scenario.desc(),
                Case.interval_us.desc(), Case.started.desc(), Case.id.desc())
            parts.append(select(one.limit(newest).subquery() if newest is not None
                                else one.subquery()))
        statements.append(union_all(*parts) if len(parts) > 1 else parts[0])
    return statements


def latest(session: Session, *, boards: Sequence[str] | None = None,
           flavours: Sequence[str] | None = None, ref: str | None = None,
           pipeline_id: str | None = None, verdicts: Sequence[str] | None = None,
           per_series: int = 1, histograms: bool = False,
           series: Iterable[SeriesKey] | None = None) -> list[CaseRow]:
    """The newest ``per_series`` cases of every series (board × flavour × scenario ×
    interval) that match, without reading every stored run (:func:`newest_ids`): a
    report's current state and its baselines. Ordered by series, then oldest first.
    ``pipeline_id`` is GitLab's CI_PIPELINE_ID of the run."""
    newest = newest_ids(session, boards=boards, flavours=flavours, ref=ref,
                        pipeline_id=pipeline_id, verdicts=verdicts, per_series=per_series,
                        series=series)
    if not newest:
        return []
    query = (select(Case).where(Case.id.in_(newest))
             .order_by(Case.board, Case.flavour, Case.scenario, Case.interval_us,
                       Case.started, Case.id)
             .options(selectinload(Case.run), selectinload(Case.cpus),
                      selectinload(Case.limits)))
    return [_row(case, histograms) for case in session.scalars(query)]


@attr.frozen(kw_only=True)
class CaseFigures(CaseIdentity):
    """One case's headline figures, the worst judged CPU's (as :meth:`CaseRow.worst`
    takes them), from one aggregated query: a trend over thousands of runs needs no
    per-CPU objects. Figures are as stored: an error case may carry some, and only its
    verdict says whether they mean anything."""

    max_us: float | None
    avg_us: float | None
    # None when unknown on any judged CPU (past the histogram's range, or not measured)
    p99_9_us: float | None
    # judged CPUs whose p99.9 lay among the overflows (only ">= range" is known)
    p99_9_past_range: int
    histogram_range_us: int | None
    overflows: int


def series_counts(session: Session, *, boards: Sequence[str] | None = None,
                  flavours: Sequence[str] | None = None
                  ) -> dict[tuple[str, str, str | None, int | None], tuple[int, int]]:
    """Per series: how many cases the store has, and how many of them are measured
    figures (a cyclictest or rt-test case that passed or failed)."""
    figures = func.sum(case((and_(Case.verdict.in_(("pass", "fail")),
                                  Case.kind.in_(("cyclictest", "rt-test"))), 1), else_=0))
    query = _filtered(select(Case.board, Case.flavour, Case.scenario, Case.interval_us,
                             func.count(Case.id), figures), boards=boards, flavours=flavours
                      ).group_by(Case.board, Case.flavour, Case.scenario, Case.interval_us)
    return {(board, flavour, scenario, interval): (int(count), int(measured or 0))
            for board, flavour, scenario, interval, count, measured in session.execute(query)}


def case_figures(session: Session, *, boards: Sequence[str] | None = None,
                 flavours: Sequence[str] | None = None,
                 groups: Sequence[tuple[str, str, str | None]] | None = None,
                 since: datetime.datetime | None = None,
                 newest: int | None = None,
                 series: Iterable[SeriesKey] | None = None) -> list[CaseFigures]:
    """Every matching case's worst-CPU figures, oldest first: as ingest kept them on the
    case (rtlab.store.ingest.worst_figures), so no CPU row is read. ``groups``: only these
    (board, flavour, scenario); ``newest``: only each series' newest so many, of
    ``series`` where the caller knows which there are (else they are read here)."""
    query = (select(Case.id, Case.board, Case.flavour, Case.scenario, Case.interval_us,
                    Case.kind, Case.verdict, Case.started, Run.pipeline_id, Run.commit_sha,
                    Run.ref_name, Case.worst_max_us, Case.worst_avg_us, Case.worst_p99_9_us,
                    Case.p99_9_past_range, Case.range_us, Case.overflows)
             .select_from(Case).join(Run, Case.run_id == Run.id)
             .order_by(Case.started, Case.id))
    query = _filtered(query, boards=boards, flavours=flavours, since=since)
    in_groups = (None if groups is None else or_(false(), *(
        and_(Case.board == board, Case.flavour == flavour,
             Case.scenario.is_(None) if scenario is None else Case.scenario == scenario)
        for board, flavour, scenario in groups)))
    if in_groups is not None:
        query = query.where(in_groups)
    rows: list[Any] = []
    if newest is None:
        rows = list(session.execute(query))
    else:
        # each series newest first along its index, as far as ``newest``; the series
        # from the cases' own index (joined to the runs, SQLite read a board's every run)
        if series is None:
            every = _filtered(select(Case.board, Case.flavour, Case.scenario,
                                     Case.interval_us).distinct(),
                              boards=boards, flavours=flavours, since=since)
            if in_groups is not None:
                every = every.where(in_groups)
            series = [tuple(row) for row in session.execute(every)]
        rows = newest_per_series(session, query, list(series), newest)
        rows.sort(key=lambda row: (row.started, row.id))
    return [CaseFigures(case_id=case_id, board=board, flavour=flavour, scenario=scenario,
                        interval_us=interval_us, kind=kind, verdict=verdict,
                        started=_utc(started), pipeline_id=pipeline_id, commit_sha=commit_sha,
                        ref_name=ref_name, max_us=max_us, avg_us=avg_us, p99_9_us=p99_9,
                        p99_9_past_range=int(past or 0), histogram_range_us=range_us,
                        overflows=int(overflows or 0))
            for (case_id, board, flavour, scenario, interval_us, kind, verdict, started,
                 pipeline_id, commit_sha, ref_name, max_us, avg_us, p99_9, past, range_us,
                 overflows) in rows]


def _filtered(query: Select, *, boards: Sequence[str] | None = None,
              flavours: Sequence[str] | None = None, ref: str | None = None,
              pipeline_id: str | None = None, verdicts: Sequence[str] | None = None,
              since: datetime.datetime | None = None) -> Select:
    """``query`` (over cases) narrowed; the run is joined where a filter needs it."""
    if ref is not None:
        query = query.join(Run, Case.run_id == Run.id)
    if boards:
        query = query.where(Case.board.in_(list(boards)))
    if flavours:
        query = query.where(Case.flavour.in_(list(flavours)))
    if ref is not None:
        query = query.where(Run.ref_name == ref)
    if pipeline_id is not None:
        # a pipeline's few runs along their index, then their cases along the run's: a
        # join would let the planner walk a board's every case first
        query = query.where(Case.run_id.in_(select(Run.id).where(
            Run.pipeline_id == pipeline_id).scalar_subquery()))
    if verdicts is not None:
        query = query.where(Case.verdict.in_(list(verdicts)))
    if since is not None:
        query = query.where(Case.started >= since)
    return query


def baseline_runs(session: Session, *, board: str, flavour: str, scenario: str,
                  interval_us: int, ref: str | None, runs: int) -> list[StoredRun]:
    """The newest ``runs`` measured cases of one series on ``ref`` (None: any), whatever
    their verdict, each with every CPU's wake-ups as one histogram, as
    rtlab.verdict.baseline.eligible_baseline sorts them into a case's baseline and the
    runs left out (a failed run, other options, another length). None from before the
    series' newest accepted change point (rtlab.store.changes): a baseline never pools
    both sides of one."""
    since = accepted_since(session, board=board, flavour=flavour, scenario=scenario,
                           interval_us=interval_us, ref=ref)
    series = series_query(board=board, flavour=flavour, scenario=scenario,
                          interval_us=interval_us, ref=ref, verdicts=("pass", "fail"),
                          since=since)
    newest = (series.order_by(None).order_by(Case.started.desc(), Case.id.desc())
              .limit(runs))
    query = (select(Case).where(Case.id.in_(newest.with_only_columns(Case.id)
                                             .scalar_subquery()))
             .order_by(Case.started, Case.id)
             .options(selectinload(Case.run), selectinload(Case.cpus)))
    found = []
    for stored in session.scalars(query):
        record = stored.record if isinstance(stored.record, dict) else {}
        cpus = [cpu for cpu in stored.cpus if not cpu.no_wakeup and cpu.samples > 0]
        histograms = [Histogram(counts, cpu.overflows or 0, cpu.max_us) for cpu in cpus
                      if (counts := cpu.counts()) is not None]
        command = record.get("command")
        found.append(StoredRun(
            run_key=stored.run.run_key, verdict=stored.verdict, duration_s=stored.duration_s,
            command=tuple(map(str, command)) if isinstance(command, list) else None,
            boot=boot_of(record, stored.run.run_key),
            histogram=(Histogram.merged(histograms)
                       if histograms and len(histograms) == len(cpus) else None),
            pooled_boots=pooled_boots(record)))
    return found


def case_baseline(url: str, *, board: str, flavour: str, scenario: str, interval_us: int,
                  command: Sequence[str], cap_s: float, policy: StatisticsPolicy,
                  ref: str | None, runs: int) -> Baseline:
    """A case's eligible baseline (rtlab.verdict.baseline) among the newest ``runs`` of its
    series on ``ref`` in the store at ``url``: how the on-board suite and the LAVA path
    both find it."""
    from rtlab.store import open_store

    store = open_store(url)
    try:
        with store.session() as session:
            stored = baseline_runs(session, board=board, flavour=flavour, scenario=scenario,
                                   interval_us=interval_us, ref=ref, runs=runs)
    finally:
        store.close()
    return eligible_baseline(stored, command=command, length_s=cap_s,
                             min_runs=policy.baseline_runs, min_boots=policy.baseline_boots)


def pooled_boots(record: Mapping[str, Any]) -> tuple[str, ...]:
    """The boots a case measured on several boards at once pooled (rtlab.run.pooling: its
    ``boards`` that were judged); empty for a case of one board."""
    boards = record.get("boards") if record.get("replicated") else None
    if not isinstance(boards, list):
        return ()
    return tuple(str(board["boot"]) for board in boards
                 if isinstance(board, Mapping) and board.get("judged") and board.get("boot"))


def boot_of(record: Mapping[str, Any], run_key: str) -> str:
    """Which boot measured a stored case: its run (a pipeline job's session, a LAVA job),
    its place, and the boot of that session (``infrastructure.boots_in_session``)."""
    infrastructure = record.get("infrastructure")
    boots = (infrastructure.get("boots_in_session")
             if isinstance(infrastructure, dict) else None)
    return f"{run_key}/{record.get('place')}/{boots}"


def last_measured(session: Session, *, board: str, flavour: str, scenario: str,
                  interval_us: int, ref: str | None) -> CaseRow | None:
    """The newest measured (pass or fail) case of one series on ``ref`` (None: any): a
    re-run of a series whose last run failed keeps its trace (rtlab.measure.trace)."""
    for row in latest(session, boards=[board], flavours=[flavour], ref=ref,
                      verdicts=("pass", "fail"), per_series=1):
        if (row.scenario, row.interval_us) == (scenario, interval_us):
            return row
    return None


def last_failed_run(url: str | None, *, board: str, flavour: str, scenario: str,
                    interval_us: int, ref: str | None) -> str | None:
    """The series' last stored measured run (on ``ref``; None: anywhere), as "run key,
    start", when it failed; None when it passed, there is none, or there is no store
    (``url``, else ``$RTLAB_RESULTS_DB``)."""
    from rtlab.store import URL_VARIABLE, open_store

    url = url or os.environ.get(URL_VARIABLE)
    if not url:
        return None
    store = open_store(url)
    try:
        with store.session() as session:
            last = last_measured(session, board=board, flavour=flavour, scenario=scenario,
                                 interval_us=interval_us, ref=ref)
    finally:
        store.close()
    if last is None or last.verdict != "fail":
        return None
    return f"{last.run_key}, {last.started:%Y-%m-%d %H:%M}"
