"""A kernel's exposure: every stored run of one kernel on boards of one type under one load
pooled, so that the evidence about it grows with every pipeline that measures it.

A pooled group is (kernel, board type, scenario, interval_us). The kernel is the image's:
a kernel built from source (``image.kernel.source == "build"``) is its build's
``kernel_sha256``; a Debian kernel (``source`` ``debian`` or absent) is its package and
version. Every stored cyclictest case counts, whatever its pipeline, ref or tier (the
nightly full tier and every push's gate alike), when its verdict is ``pass`` or ``fail``:
an error measured nothing trustworthy and a skipped case nothing, so both are left out and
counted. A measured case whose record names no kernel is listed apart, never pooled with
another kernel's and never silently dropped; one without a ``max_us`` limit is counted
apart too (its wake-ups cannot say what exceeded).

Per group: the board time (the cases' ``duration_s``; a case measured on several boards at
once has the sum of its boards' seconds and their histograms summed, so it needs nothing
apart), the wake-ups (the measuring CPUs' samples) and the exceedances of each case's own
``max_us``: wake-ups of ``floor(max_us) + 1`` µs or more (cyclictest reports whole µs),
counted from the histogram where it reaches that far (its buckets from there on and its
overflows, which took the range or more); where ``max_us`` lies at or past the histogram's
range, or a CPU kept no histogram, a maximum above the limit says only "at least 1", and
the count is marked as a lower bound. One exceedance anywhere fails the kernel's series.

The bound: the exact Poisson upper limit of the exceedances' mean at the group's
confidence (:func:`poisson_upper`, ``chi2.ppf(confidence, 2k + 2) / 2``) over the
board-hours and over the wake-ups. The confidence is that of the thresholds file the
report reads (``statistics: exposure_confidence``, inherited like the other statistics
keys) for the group's board, flavour (the one its cases were judged by), scenario and
interval; :data:`DEFAULT_CONFIDENCE` where the file cannot resolve the series (an unknown
board or flavour) or there is no file. Where a group's flavours differ, the highest
confidence (the widest bound) is taken.

The pooling is done in the database: one grouped query over the cases (the kernel's
fields read from each record's JSON there, once, in a materialized CTE: SQLite 3.35 or
PostgreSQL 12 and later; the wake-ups summed per case), and one over only the CPUs whose
maximum lies above their case's limit, the one place a histogram is decompressed; the
names of cases without a kernel are a third, when there are any. A store of 10 000 runs
(25 000 cases of 20 KB records) pools in about a second on SQLite, reading the records
being most of it (docs/results.md).
"""

import datetime
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attr
import numpy as np
from scipy import stats as sps
from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    case,
    distinct,
    false,
    func,
    or_,
    select,
    true,
)
from sqlalchemy.orm import Session

from rtlab.store.ingest import _utc
from rtlab.store.models import Case, CpuResult, Run
from rtlab.verdict.thresholds import STATISTICS_DEFAULTS, Thresholds, ThresholdsError

DEFAULT_CONFIDENCE = float(STATISTICS_DEFAULTS["exposure_confidence"])
MEASURED = ("pass", "fail")
HOUR_S = 3600.0
# how many cases without a kernel identity an Exposure names (it counts them all)
NAMED = 20
KIND = "cyclictest"
LIMIT_METRIC = "max_us"
# what a record's image.kernel identifies a kernel by (kernel_id_of)
KERNEL_FIELDS = ("source", "kernel_sha256", "package", "version")

GroupKey = tuple["KernelId", str, str | None, int | None]


@attr.frozen(order=True)
class KernelId:
    """Which kernel a case measured: ``source`` ``build`` with the build's SHA-256, or
    ``debian`` with ``package=version``."""

    source: str
    identity: str

    @property
    def short(self) -> str:
        """``sha256:abcdef123456`` for a built kernel, ``package=version`` for Debian's."""
        if self.source == "build":
            return f"sha256:{self.identity[:12]}"
        return self.identity


def kernel_id(kernel: object) -> KernelId | None:
    """The identity of a record's ``image.kernel`` (None: it names none)."""
    if not isinstance(kernel, Mapping):
        return None
    return kernel_id_of(kernel.get("source"), kernel.get("kernel_sha256"),
                        kernel.get("package"), kernel.get("version"))


def kernel_id_of(source: object, sha256: object, package: object,
                 version: object) -> KernelId | None:
    """The identity from ``image.kernel``'s fields: a built kernel by its SHA-256, any
    other (``debian``, or a record from before ``source`` existed) by package and
    version; None when the fields that identify it are missing or empty."""
    if source == "build":
        return KernelId("build", str(sha256)) if _text(sha256) else None
    if source not in (None, "", "debian"):
        return None
    if _text(package) and _text(version):
        return KernelId("debian", f"{package}={version}")
    return None


def _text(value: object) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool) and str(value) != ""


def exceedances(counts: np.ndarray | None, overflows: int | None, max_us: float | None,
                limit_us: float) -> tuple[int, bool]:
    """One CPU's wake-ups above ``limit_us``, i.e. of ``floor(limit_us) + 1`` µs or more,
    and whether that count is exact (False: at least that many). From the histogram
    (``counts``, 1 µs buckets; ``overflows`` took its range or more) where its range
    reaches ``floor(limit_us) + 1``; otherwise its maximum above the limit says at least
    one."""
    first = math.floor(limit_us) + 1
    above = max_us is not None and max_us >= first
    if counts is not None and first <= counts.size:
        count = int(counts[first:].sum()) + int(overflows or 0)
        if above and count == 0:
            # a maximum the histogram does not hold: at least that wake-up
            return 1, False
        return count, True
    if above:
        return 1, False
    # nothing known of a CPU with neither maximum nor a histogram that reaches the limit
    return 0, max_us is not None


def poisson_upper(events: int, confidence: float) -> float:
    """The exact (Garwood) upper confidence limit of a Poisson mean, ``events`` seen:
    ``chi2.ppf(confidence, 2 * events + 2) / 2`` (3.0 for none at 95 %)."""
    if events < 0:
        raise ValueError(f"events must not be negative, got {events}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return float(sps.chi2.ppf(confidence, 2 * events + 2)) / 2


@attr.frozen(kw_only=True)
class KernelExposure:
    """One kernel on one board type under one scenario and interval: its stored measured
    cases pooled."""

    kernel: KernelId
    board: str
    scenario: str | None
    interval_us: int | None
    # the flavours its cases ran as (one, unless a campaign named a variant otherwise)
    flavours: tuple[str, ...]
    # measured cases, and the distinct runs and pipelines they came from
    cases: int
    runs: int
    pipelines: int
    board_seconds: float
    wakeups: int
    exceedances: int
    # some case's count is only "at least" (the limit at or past its histogram's range)
    lower_bound: bool
    # the lowest and highest max_us its cases were judged by (each against its own)
    limits_us: tuple[float, ...]
    confidence: float
    # thresholds.yaml:LINE, or "default"
    confidence_source: str
    # error cases of this kernel, board and load, left out of the figures
    errors: int = 0
    # measured cases without a duration_s: their wake-ups count, no board time
    without_duration: int = 0
    first: datetime.datetime | None = None
    last: datetime.datetime | None = None

    @property
    def board_hours(self) -> float:
        return self.board_seconds / HOUR_S

    @property
    def failed(self) -> bool:
        """One exceedance anywhere fails the kernel's series."""
        return self.exceedances > 0

    @property
    def status(self) -> str:
        return "FAIL" if self.failed else "pass"

    @property
    def upper_events(self) -> float:
        """The Poisson upper limit of the exceedances at :attr:`confidence`."""
        return poisson_upper(self.exceedances, self.confidence)

    @property
    def per_hour_bound(self) -> float | None:
        """Upper bound on exceedances per board-hour (None: no board time)."""
        return self.upper_events / self.board_hours if self.board_seconds > 0 else None

    @property
    def per_wakeup_bound(self) -> float | None:
        """Upper bound on exceedances per wake-up (None: no wake-ups)."""
        return self.upper_events / self.wakeups if self.wakeups > 0 else None


@attr.frozen
class Unidentified:
    """A measured case whose record names no kernel."""

    name: str
    run_key: str
    started: datetime.datetime
    board_seconds: float


@attr.frozen
class Exposure:
    """Every kernel's pooled exposure, and what was left out of it."""

    rows: tuple[KernelExposure, ...]
    # the newest NAMED measured cases without a kernel identity, and how many there are
    unidentified: tuple[Unidentified, ...] = ()
    unidentified_count: int = 0
    unidentified_seconds: float = 0.0
    # cyclictest cases left out: errors and skipped ones, wherever their kernel
    errors: int = 0
    skipped: int = 0
    # measured cases of a known kernel without a max_us limit
    without_limit: int = 0

    @property
    def failing(self) -> tuple[KernelExposure, ...]:
        return tuple(row for row in self.rows if row.failed)


@attr.define
class _Pool:
    """A group's figures as its subgroups (one per flavour) add up."""

    flavours: set[str] = attr.field(factory=set)
    judged_as: set[str] = attr.field(factory=set)
    cases: int = 0
    runs: int = 0
    pipelines: int = 0
    seconds: float = 0.0
    wakeups: int = 0
    exceedances: int = 0
    lower_bound: bool = False
    limits: set[float] = attr.field(factory=set)
    errors: int = 0
    without_duration: int = 0
    first: datetime.datetime | None = None
    last: datetime.datetime | None = None


KERNEL_COLUMN = {"source": Case.kernel_source, "kernel_sha256": Case.kernel_sha256,
                 "package": Case.kernel_package, "version": Case.kernel_version}
"""The case's columns that keep its record's kernel fields (rtlab.store.ingest)."""


def _scoped(query: Select, boards: Sequence[str] | None,
            flavours: Sequence[str] | None) -> Select:
    query = query.where(Case.kind == KIND)
    if boards:
        query = query.where(Case.board.in_(list(boards)))
    if flavours:
        query = query.where(Case.flavour.in_(list(flavours)))
    return query


def _judged_cpu() -> ColumnElement[bool]:
    return and_(CpuResult.no_wakeup == false(),
                or_(CpuResult.gated.is_(None), CpuResult.gated == true()))


def _cases(boards: Sequence[str] | None, flavours: Sequence[str] | None) -> Select:
    """One row per stored cyclictest case, with what pools it: the kernel's fields of its
    record, its max_us limit and its judged CPUs' wake-ups, as ingest kept them on the
    case (rtlab.store.ingest: no record and no CPU is read here)."""
    return _scoped(select(
        Case.id.label("case_id"), Case.name.label("name"), Case.board.label("board"),
        Case.flavour.label("flavour"), Run.thresholds_flavour.label("judged_as"),
        Case.scenario.label("scenario"), Case.interval_us.label("interval_us"),
        Case.verdict.label("verdict"),
        case((Case.verdict.in_(MEASURED), 1), else_=0).label("measured"),
        Case.started.label("started"), Case.duration_s.label("duration_s"),
        Case.run_id.label("run_id"), Run.run_key.label("run_key"),
        Run.pipeline_id.label("pipeline_id"),
        *(KERNEL_COLUMN[field].label(field) for field in KERNEL_FIELDS),
        Case.limit_max_us.label("limit_us"),
        case((Case.limit_max_us.is_(None), 0), else_=1).label("limited"),
        func.coalesce(Case.wakeups, 0).label("wakeups"),
    ).join(Run, Case.run_id == Run.id), boards, flavours)


def exposure_groups(boards: Sequence[str] | None = None,
                    flavours: Sequence[str] | None = None) -> Select:
    """Every case counted per kernel, board, load, flavour, verdict and limit.

    Grouped in the order of ix_cases_exposure, which holds every column read: the
    database reads that index alone (a board's part of it as one range) and sorts
    nothing (tests/unit/test_exposure.py reads SQLite's plan). A verdict and a limit are
    groups of their own, folded by the caller; a run whose retried case passed once and
    failed once counts in both (runs are shown, never judged by)."""
    key = (Case.board, Case.kind, *(KERNEL_COLUMN[field] for field in KERNEL_FIELDS),
           Case.scenario, Case.interval_us, Case.flavour, Case.judged_as, Case.verdict,
           Case.limit_max_us)
    groups = select(
        # count(*): PostgreSQL's index-only scan has no ids
        *key, func.count(), func.count(distinct(Case.run_id)),
        func.count(distinct(Case.pipeline_id)), func.coalesce(func.sum(Case.duration_s), 0),
        func.sum(case((Case.duration_s.is_(None), 1), else_=0)),
        func.coalesce(func.sum(Case.wakeups), 0), func.min(Case.started),
        func.max(Case.started)).group_by(*key)
    # the kind is taken by the caller: filtered here, SQLite sorts what the index orders
    if boards:
        groups = groups.where(Case.board.in_(list(boards)))
    if flavours:
        groups = groups.where(Case.flavour.in_(list(flavours)))
    return groups


def kernel_exposure(session: Session, *, boards: Sequence[str] | None = None,
                    flavours: Sequence[str] | None = None,
                    thresholds: Thresholds | None = None) -> Exposure:
    """Every stored cyclictest case (of ``boards`` and ``flavours`` when given), pooled per
    kernel × board × scenario × interval, in the database: one row per kernel, board,
    load and flavour comes back (a run has one flavour, so adding its flavours' distinct
    runs counts none twice); the confidence as the module says, from ``thresholds``."""
    groups = exposure_groups(boards, flavours)

    pools: dict[GroupKey, _Pool] = {}
    # a store holds few kernels and many cases of each
    kernels: dict[tuple[Any, ...], KernelId | None] = {}
    unidentified: set[tuple[Any, ...]] = set()
    unidentified_count = errors = skipped = without_limit = 0
    unidentified_seconds = 0.0
    for (board, kind, source, sha256, package, version, scenario, interval_us, flavour,
         judged_as, verdict, limit_us, count, runs, pipelines, seconds, without_duration,
         wakeups, first, last) in session.execute(groups):
        if kind != KIND:
            continue
        fields = (source, sha256, package, version)
        if fields not in kernels:
            kernels[fields] = kernel_id_of(*fields)
        kernel = kernels[fields]
        if verdict not in MEASURED:
            error_count = int(count) if verdict == "error" else 0
            errors += error_count
            skipped += int(count) - error_count
            if kernel is not None:
                pools.setdefault((kernel, board, scenario, interval_us), _Pool()).errors += \
                    error_count
            continue
        if kernel is None:
            unidentified.add(fields)
            unidentified_count += int(count)
            unidentified_seconds += float(seconds or 0)
            continue
        if limit_us is None:
            without_limit += int(count)
            continue
        pool = pools.setdefault((kernel, board, scenario, interval_us), _Pool())
        pool.flavours.add(flavour)
        pool.judged_as.add(judged_as or flavour)
        pool.cases += int(count)
        pool.runs += int(runs)
        pool.pipelines += int(pipelines)
        pool.seconds += float(seconds or 0)
        pool.without_duration += int(without_duration or 0)
        pool.wakeups += int(wakeups or 0)
        pool.limits.add(float(limit_us))
        # as stored (SQLite's are naive): made UTC once per group, below
        pool.first = first if pool.first is None else min(pool.first, first)
        pool.last = last if pool.last is None else max(pool.last, last)

    # the only CPUs that can have exceeded: a maximum above the limit (or none known); the
    # one place a histogram is read, and the records' JSON only for these few
    suspects = _scoped(
        select(CpuResult, Case.limit_max_us, *(KERNEL_COLUMN[f] for f in KERNEL_FIELDS),
               Case.board, Case.scenario, Case.interval_us)
        .join(Case, CpuResult.case_id == Case.id)
        .where(Case.verdict.in_(MEASURED), Case.limit_max_us.is_not(None),
               # from the few cases that may have (their index), not from every CPU row
               CpuResult.case_id.in_(select(Case.id).where(Case.cpus_over_limit > 0)
                                     .scalar_subquery()),
               _judged_cpu(), CpuResult.samples > 0,
               or_(CpuResult.max_us.is_(None), CpuResult.max_us > Case.limit_max_us)),
        # the boards are taken here: in the query, they would lead the planner along a
        # board's every case instead of the few suspects
        None, flavours)
    for cpu, limit_us, *fields, board, scenario, interval_us in session.execute(suspects):
        if boards and board not in boards:
            continue
        kernel = kernel_id_of(*fields)
        found = pools.get((kernel, board, scenario, interval_us)) if kernel else None
        if found is None:
            continue
        count, exact = exceedances(cpu.counts(), cpu.overflows, cpu.max_us, limit_us)
        found.exceedances += count
        found.lower_bound |= not exact

    rows = []
    for (kernel, board, scenario, interval_us), pool in pools.items():
        if not pool.cases:
            # only errors: nothing measured to pool, the errors are counted above
            continue
        confidence, confidence_source = _confidence(thresholds, board, pool.judged_as,
                                                    scenario, interval_us)
        rows.append(KernelExposure(
            kernel=kernel, board=board, scenario=scenario, interval_us=interval_us,
            flavours=tuple(sorted(pool.flavours)), cases=pool.cases, runs=pool.runs,
            pipelines=pool.pipelines, board_seconds=pool.seconds, wakeups=pool.wakeups,
            exceedances=pool.exceedances, lower_bound=pool.lower_bound,
            limits_us=tuple(sorted(pool.limits)), confidence=confidence,
            confidence_source=confidence_source, errors=pool.errors,
            without_duration=pool.without_duration,
            first=None if pool.first is None else _utc(pool.first),
            last=None if pool.last is None else _utc(pool.last)))
    return Exposure(rows=tuple(sorted(rows, key=_row_order)),
                    unidentified=_unidentified(session, boards, flavours, unidentified),
                    unidentified_count=unidentified_count,
                    unidentified_seconds=unidentified_seconds, errors=errors,
                    skipped=skipped, without_limit=without_limit)


def _unidentified(session: Session, boards: Sequence[str] | None,
                  flavours: Sequence[str] | None,
                  fields: Iterable[tuple[Any, ...]]) -> tuple[Unidentified, ...]:
    """The newest NAMED measured cases whose kernel fields are one of ``fields`` (those
    that identify no kernel)."""
    c = _cases(boards, flavours).subquery("unidentified_cases").c
    matches = [and_(*(c[name].is_(None) if value is None else c[name] == value
                      for name, value in zip(KERNEL_FIELDS, values, strict=True)))
               for values in fields]
    if not matches:
        return ()
    query = (select(c.name, c.run_key, c.started, c.duration_s)
             .where(c.measured == 1, or_(*matches))
             .order_by(c.started.desc(), c.case_id.desc()).limit(NAMED))
    return tuple(Unidentified(name, run_key, _utc(started), float(duration_s or 0))
                 for name, run_key, started, duration_s in session.execute(query))


def _row_order(row: KernelExposure) -> tuple[str, str, int, float, str]:
    """By board, scenario and interval; the newest kernel first within them."""
    last = row.last.timestamp() if row.last is not None else 0.0
    return (row.board, row.scenario or "", row.interval_us or 0, -last, row.kernel.identity)


def _confidence(thresholds: Thresholds | None, board: str, flavours: Iterable[str],
                scenario: str | None, interval_us: int | None) -> tuple[float, str]:
    """The group's confidence and where it came from: thresholds.yaml's for the series
    (the highest of its flavours'), else the default."""
    found: list[tuple[float, str]] = []
    if thresholds is not None and scenario is not None:
        for flavour in sorted(flavours):
            try:
                policy = thresholds.statistics(board, flavour, scenario, interval_us)
            except ThresholdsError:
                continue
            found.append((policy.exposure_confidence,
                          policy.sources.get("exposure_confidence") or "default"))
    if found:
        return max(found, key=lambda item: item[0])
    return DEFAULT_CONFIDENCE, "default"


__all__ = ["DEFAULT_CONFIDENCE", "Exposure", "KernelExposure", "KernelId", "Unidentified",
           "exceedances", "kernel_exposure", "kernel_id", "kernel_id_of", "poisson_upper"]
