"""The results store's tables: one row per run (one place, one image, one ``rtlab run``),
per test case, and per measured CPU or rt-test thread, with the histogram kept whole.

Figures are columns, so that trends and threshold replays are queries; the record itself
is kept too (``cases.record``), so nothing a record said is lost to the schema. Changing a
table means a new alembic revision in ``rtlab/store/migrations/versions``.
"""

import datetime
import zlib
from typing import Any

import numpy as np
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# histogram counts as stored: little-endian unsigned 64-bit, one per 1 µs bucket, zlib'd
_COUNT_DTYPE = np.dtype("<u8")


class Base(DeclarativeBase):
    pass


class Run(Base):
    """One run of the suite on one place with one image: a CI job, or a person's
    ``rtlab run``. ``run_key`` is unique: the record's ``run_id`` (set by ``rtlab run``)."""

    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_campaign_run", "campaign", "campaign_run"),
                      # a merge request's report reads its pipeline's cases, trends a ref's
                      Index("ix_runs_pipeline_id", "pipeline_id"),
                      Index("ix_runs_ref_name", "ref_name"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_key: Mapped[str] = mapped_column(String(200), unique=True)
    place: Mapped[str | None] = mapped_column(String(100))
    board: Mapped[str] = mapped_column(String(100))
    flavour: Mapped[str] = mapped_column(String(100))
    kernel_release: Mapped[str | None] = mapped_column(String(200))
    kernel_version: Mapped[str | None] = mapped_column(String(300))
    preemption: Mapped[str | None] = mapped_column(String(50))
    realtime: Mapped[bool | None] = mapped_column(Boolean)
    image_id: Mapped[str | None] = mapped_column(String(100))
    sd_image_sha256: Mapped[str | None] = mapped_column(String(64))
    # GitLab's CI variables, when the run was a pipeline job
    pipeline_id: Mapped[str | None] = mapped_column(String(50))
    job_id: Mapped[str | None] = mapped_column(String(50))
    commit_sha: Mapped[str | None] = mapped_column(String(64))
    ref_name: Mapped[str | None] = mapped_column(String(255))
    merge_request_iid: Mapped[str | None] = mapped_column(String(50))
    # a campaign's kernel variant (rtlab.campaign): its name (the run's flavour), what it
    # is built from (a kernel/flavours.yaml flavour and extra fragments; neither for a
    # Debian kernel), the thresholds.yaml flavour it was judged by, and which campaign
    # execution measured it
    campaign: Mapped[str | None] = mapped_column(String(100))
    campaign_run: Mapped[str | None] = mapped_column(String(200))
    variant: Mapped[str | None] = mapped_column(String(100))
    kernel_flavour: Mapped[str | None] = mapped_column(String(100))
    fragments: Mapped[list[str] | None] = mapped_column(JSON)
    thresholds_flavour: Mapped[str | None] = mapped_column(String(100))
    started: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True))
    finished: Mapped[datetime.datetime | None] = mapped_column(DateTime(timezone=True))
    ingested_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True))

    cases: Mapped[list["Case"]] = relationship(back_populates="run",
                                               cascade="all, delete-orphan")


class Case(Base):
    """One test case of a run: ``name`` is board/flavour/scenario/interval or
    board/flavour/tool. Board and flavour are repeated from the run so that a trend is a
    query on one indexed table."""

    __tablename__ = "cases"
    __table_args__ = (
        UniqueConstraint("run_id", "name", "started", name="uq_cases_run_name_started"),
        Index("ix_cases_series", "board", "flavour", "scenario", "interval_us", "started"),
        # a report's count of every series' cases, from the index alone
        Index("ix_cases_series_verdicts", "board", "flavour", "scenario", "interval_us",
              "kind", "verdict"),
        # the few cases whose CPUs may have exceeded max_us (the exposure reads those)
        Index("ix_cases_over_limit", "cpus_over_limit"),
        # everything a kernel's exposure pools, in its groups' order (revision 0007)
        Index("ix_cases_exposure", "board", "kind", "kernel_source", "kernel_sha256",
              "kernel_package", "kernel_version", "scenario", "interval_us", "flavour",
              "judged_as", "verdict", "limit_max_us", "run_id", "pipeline_id", "wakeups",
              "duration_s", "started"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(300))
    node_id: Mapped[str] = mapped_column(String(500))
    board: Mapped[str] = mapped_column(String(100))
    flavour: Mapped[str] = mapped_column(String(100))
    # a suite scenario (cyclictest) or an rt-test's name
    scenario: Mapped[str | None] = mapped_column(String(100))
    # None for rt-tests other than cyclictest
    interval_us: Mapped[int | None] = mapped_column(Integer)
    # cyclictest | rt-test | functional | unknown (a case that never got that far)
    kind: Mapped[str] = mapped_column(String(20))
    verdict: Mapped[str] = mapped_column(String(10))
    message: Mapped[str] = mapped_column(Text)
    started: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True))
    finished: Mapped[datetime.datetime | None] = mapped_column(DateTime(timezone=True))
    duration_s: Mapped[int | None] = mapped_column(Integer)
    # the suite.yaml tier the case ran in (gate, full), when the run named one
    tier: Mapped[str | None] = mapped_column(String(50))
    # the record as written on the runner, whole
    record: Mapped[dict[str, Any]] = mapped_column(JSON)
    # the judged CPUs' tail together (rtlab.verdict.tailsummary), kept at ingest so that a
    # series' history is read without its histograms; None without histograms
    tail_samples: Mapped[int | None] = mapped_column(BigInteger)
    tail_first: Mapped[int | None] = mapped_column(Integer)
    tail_counts: Mapped[bytes | None] = mapped_column(LargeBinary)
    # the judged CPUs' figures as a trend and the table read them (CaseRow.worst), kept at
    # ingest so that a series' history is one narrow query of this table
    worst_max_us: Mapped[float | None] = mapped_column(Float)
    worst_avg_us: Mapped[float | None] = mapped_column(Float)
    # None when unknown on any judged CPU (past the histogram's range, or not measured)
    worst_p99_9_us: Mapped[float | None] = mapped_column(Float)
    p99_9_past_range: Mapped[int | None] = mapped_column(Integer)
    range_us: Mapped[int | None] = mapped_column(Integer)
    overflows: Mapped[int | None] = mapped_column(BigInteger)
    wakeups: Mapped[int | None] = mapped_column(BigInteger)
    # what pools it per kernel (rtlab.store.exposure): the record's image.kernel fields
    # and its max_us limit
    kernel_source: Mapped[str | None] = mapped_column(String(20))
    kernel_sha256: Mapped[str | None] = mapped_column(String(64))
    kernel_package: Mapped[str | None] = mapped_column(String(200))
    kernel_version: Mapped[str | None] = mapped_column(String(200))
    limit_max_us: Mapped[float | None] = mapped_column(Float)
    # judged CPUs whose maximum passed limit_max_us or is unknown: the only ones whose
    # histogram the exposure reads
    cpus_over_limit: Mapped[int | None] = mapped_column(Integer)
    # the run's, repeated so that a kernel's exposure is read from one index
    pipeline_id: Mapped[str | None] = mapped_column(String(50))
    judged_as: Mapped[str | None] = mapped_column(String(100))

    run: Mapped[Run] = relationship(back_populates="cases")
    cpus: Mapped[list["CpuResult"]] = relationship(back_populates="case",
                                                   cascade="all, delete-orphan",
                                                   order_by="CpuResult.position")
    limits: Mapped[list["CaseThreshold"]] = relationship(back_populates="case",
                                                         cascade="all, delete-orphan")


class CpuResult(Base):
    """One measuring thread: a cyclictest CPU or an rt-test's thread. Percentiles are
    None where they fell among the histogram's overflows (only ">= range" is known)."""

    __tablename__ = "cpu_results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id", ondelete="CASCADE"),
                                         index=True)
    # order in the record
    position: Mapped[int] = mapped_column(Integer)
    cpu: Mapped[int | None] = mapped_column(Integer)
    thread: Mapped[int | None] = mapped_column(Integer)
    samples: Mapped[int] = mapped_column(BigInteger)
    min_us: Mapped[float | None] = mapped_column(Float)
    avg_us: Mapped[float | None] = mapped_column(Float)
    max_us: Mapped[float | None] = mapped_column(Float)
    overflows: Mapped[int | None] = mapped_column(BigInteger)
    no_wakeup: Mapped[bool] = mapped_column(Boolean, default=False)
    # rt-tests: whether thresholds judge this thread
    gated: Mapped[bool | None] = mapped_column(Boolean)
    p50_us: Mapped[float | None] = mapped_column(Float)
    p99_us: Mapped[float | None] = mapped_column(Float)
    p99_9_us: Mapped[float | None] = mapped_column(Float)
    p99_99_us: Mapped[float | None] = mapped_column(Float)
    histogram_range_us: Mapped[int | None] = mapped_column(Integer)
    histogram: Mapped[bytes | None] = mapped_column(LargeBinary)

    case: Mapped[Case] = relationship(back_populates="cpus")

    def counts(self) -> np.ndarray | None:
        """The histogram as dense counts per 1 µs bucket (None: run without one)."""
        if self.histogram is None:
            return None
        return np.frombuffer(zlib.decompress(self.histogram), dtype=_COUNT_DTYPE).astype(
            np.int64)


class CaseThreshold(Base):
    """A limit a case was judged by, with the thresholds.yaml line it came from."""

    __tablename__ = "case_thresholds"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    case_id: Mapped[int] = mapped_column(ForeignKey("cases.id", ondelete="CASCADE"),
                                         index=True)
    metric: Mapped[str] = mapped_column(String(20))
    value: Mapped[float] = mapped_column(Float)
    source: Mapped[str | None] = mapped_column(String(300))

    case: Mapped[Case] = relationship(back_populates="limits")


class QueuedCase(Base):
    """A case of a plan (one board type × flavour of one pipeline job, or of one
    ``rtlab run --boards N``) that any place of the plan may measure: ``queued`` until one
    claims it, ``claimed`` while its place measures it, ``done`` with the verdict. The
    claim is one conditional UPDATE, so that two places never measure one case
    (rtlab.run.queue)."""

    __tablename__ = "queued_cases"
    __table_args__ = (UniqueConstraint("plan", "name", name="uq_queued_cases_plan_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    plan: Mapped[str] = mapped_column(String(200), index=True)
    # the case's part of its name: scenario/interval (hackbench/100us) or an rt-test
    name: Mapped[str] = mapped_column(String(300))
    position: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(12))
    place: Mapped[str | None] = mapped_column(String(100))
    claimed_at: Mapped[datetime.datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime.datetime | None] = mapped_column(DateTime(timezone=True))
    verdict: Mapped[str | None] = mapped_column(String(10))


class PlanWorker(Base):
    """A place working on a plan: ``active`` while it takes cases, ``stopped`` when it
    left the rest to the others after an infrastructure error, ``finished`` when it found
    nothing left to take."""

    __tablename__ = "plan_workers"
    __table_args__ = (UniqueConstraint("plan", "place", name="uq_plan_workers_plan_place"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    plan: Mapped[str] = mapped_column(String(200), index=True)
    place: Mapped[str] = mapped_column(String(100))
    state: Mapped[str] = mapped_column(String(12))
    reason: Mapped[str | None] = mapped_column(Text)
    updated: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True))


def pack_counts(sparse: dict[str, int], range_us: int) -> bytes:
    """A record's sparse histogram ({"bucket": count}) as stored."""
    dense = np.zeros(range_us, dtype=_COUNT_DTYPE)
    for bucket, count in sparse.items():
        dense[int(bucket)] = count
    return zlib.compress(dense.tobytes(), 6)


class Bisection(Base):
    """One ``rtlab bisect run``: what it bisected and what it found (rtlab.bisect.result:
    the whole result, the culprit's diff included, is kept in ``result``)."""

    __tablename__ = "bisections"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bisection_key: Mapped[str] = mapped_column(String(200), unique=True)
    board: Mapped[str] = mapped_column(String(100))
    flavour: Mapped[str] = mapped_column(String(100))
    case_name: Mapped[str] = mapped_column(String(100))
    good_commit: Mapped[str] = mapped_column(String(64))
    bad_commit: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(30))
    culprit_commit: Mapped[str | None] = mapped_column(String(64))
    culprit_option: Mapped[str | None] = mapped_column(String(200))
    reason: Mapped[str] = mapped_column(Text)
    board_s: Mapped[float] = mapped_column(Float)
    started: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True))
    result: Mapped[dict[str, Any]] = mapped_column(JSON)

    steps: Mapped[list["BisectionStep"]] = relationship(back_populates="bisection",
                                                         cascade="all, delete-orphan",
                                                         order_by="BisectionStep.step")


class BisectionStep(Base):
    """One step of a bisection: the point measured, its outcome and what it cost."""

    __tablename__ = "bisection_steps"
    __table_args__ = (UniqueConstraint("bisection_id", "step"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bisection_id: Mapped[int] = mapped_column(ForeignKey("bisections.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(20))
    commit_sha: Mapped[str] = mapped_column(String(64))
    options: Mapped[list[str]] = mapped_column(JSON)
    outcome: Mapped[str] = mapped_column(String(20))
    decided_by: Mapped[str] = mapped_column(String(20))
    rounds: Mapped[int] = mapped_column(Integer)
    good_boots: Mapped[int] = mapped_column(Integer)
    step_boots: Mapped[int] = mapped_column(Integer)
    board_s: Mapped[float] = mapped_column(Float)
    confidence: Mapped[float | None] = mapped_column(Float)
    difference_us: Mapped[float | None] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(Text)

    bisection: Mapped[Bisection] = relationship(back_populates="steps")


class ChangePoint(Base):
    """Where a series' tail changed across the default branch's runs
    (rtlab.verdict.changepoints), as first found: kept so that a change point found once
    is known, not new, at the next report, starts one bisection, and, accepted, bounds
    the series' baselines."""

    __tablename__ = "change_points"
    __table_args__ = (
        UniqueConstraint("board", "flavour", "scenario", "interval_us", "ref_name",
                         "first_after_case", name="uq_change_points_series_case"),
        Index("ix_change_points_series", "board", "flavour", "scenario", "interval_us"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    board: Mapped[str] = mapped_column(String(100))
    flavour: Mapped[str] = mapped_column(String(100))
    scenario: Mapped[str] = mapped_column(String(100))
    interval_us: Mapped[int] = mapped_column(Integer)
    ref_name: Mapped[str] = mapped_column(String(255))
    # the last case before and the first after (a creep: its first step's last before)
    last_before_case: Mapped[int] = mapped_column(Integer)
    first_after_case: Mapped[int] = mapped_column(Integer)
    good_commit: Mapped[str | None] = mapped_column(String(64))
    bad_commit: Mapped[str | None] = mapped_column(String(64))
    # the first run after: "the night of"
    first_after_started: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True))
    direction: Mapped[str] = mapped_column(String(20))
    quantile: Mapped[float] = mapped_column(Float)
    before_us: Mapped[float] = mapped_column(Float)
    after_us: Mapped[float] = mapped_column(Float)
    ci_low_us: Mapped[float] = mapped_column(Float)
    ci_high_us: Mapped[float] = mapped_column(Float)
    p_value: Mapped[float] = mapped_column(Float)
    steps: Mapped[int] = mapped_column(Integer)
    found_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True))
    # accepted (a merged tuning merge request, a label: docs/verdicts.md): why and when
    accepted: Mapped[str | None] = mapped_column(Text)
    accepted_at: Mapped[datetime.datetime | None] = mapped_column(DateTime(timezone=True))
    # the bisection started for it (the pipeline it triggered), once
    bisection: Mapped[str | None] = mapped_column(String(300))
