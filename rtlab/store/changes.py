"""Change points in the store (``change_points``): every series' runs as change detection
reads them (their tail summaries, one narrow query), the change points found kept once,
accepted, and linked to the bisection they started."""

import datetime
from collections.abc import Iterable, Sequence
from typing import Any

import attr
from sqlalchemy import select
from sqlalchemy.orm import Session

from rtlab.store.ingest import _utc
from rtlab.store.models import Case, ChangePoint, Run
from rtlab.verdict.changepoints import Change
from rtlab.verdict.tailsummary import TailSummary

SeriesKey = tuple[str, str, str, int]


@attr.frozen
class SeriesRun:
    """One measured run of a series: what change detection reads and how a change point
    names it (the night, the commit, the pipeline)."""

    case_id: int
    started: datetime.datetime
    commit_sha: str | None
    pipeline_id: str | None
    tail: TailSummary


@attr.frozen
class SeriesRuns:
    key: SeriesKey
    runs: tuple[SeriesRun, ...]
    without_summary: int
    """Measured runs that kept no tail summary (no histogram): not read."""


NEWEST_RUNS = 200
"""The runs of a series a report reads for change points: its newest (half a year of
nightlies). A change is found while it lies among them, and kept once found."""


def series_runs(session: Session, *, ref: str, boards: Sequence[str] | None = None,
                flavours: Sequence[str] | None = None,
                newest: int | None = NEWEST_RUNS,
                series: Iterable[tuple[str, str, str | None, int | None]] | None = None
                ) -> list[SeriesRuns]:
    """Every cyclictest series' newest ``newest`` measured runs on ``ref`` (None: all),
    oldest first: each series read newest first along its index (``ix_cases_series``),
    as far as ``newest``, with what change detection needs and nothing else.
    ``series``: those of ``boards`` and ``flavours`` where the caller knows them."""
    from rtlab.store.query import _series_of, newest_per_series

    every = sorted((board, flavour, scenario, interval_us) for board, flavour, scenario,
                   interval_us in _series_of(session, boards, flavours, series)
                   if scenario is not None and interval_us is not None)
    query = (select(Case.id, Case.board, Case.flavour, Case.scenario, Case.interval_us,
                    Case.started, Case.tail_samples, Case.tail_first, Case.tail_counts,
                    Run.commit_sha, Run.pipeline_id)
             .join(Run, Case.run_id == Run.id)
             .where(Run.ref_name == ref, Case.kind == "cyclictest",
                    Case.verdict.in_(("pass", "fail"))))
    by_series: dict[SeriesKey, list[Any]] = {}
    for row in newest_per_series(session, query, every, newest):
        by_series.setdefault((row.board, row.flavour, row.scenario, row.interval_us),
                             []).append(row)
    found = []
    for key in every:
        rows = by_series.get(key)
        if not rows:
            continue
        rows.sort(key=lambda row: (row.started, row.id))
        runs = [SeriesRun(row.id, _utc(row.started), row.commit_sha, row.pipeline_id,
                          TailSummary.from_stored(row.tail_samples, row.tail_first,
                                                  row.tail_counts))
                for row in rows if row.tail_counts is not None]
        found.append(SeriesRuns(key, tuple(runs), len(rows) - len(runs)))
    return found


@attr.frozen
class Recorded:
    """A change point as the store keeps it, and whether this report found it first."""

    row: ChangePoint
    new: bool


def record_changes(session: Session, series: SeriesRuns, ref: str,
                   changes: Sequence[Change], *, near_runs: int = 3,
                   now: datetime.datetime | None = None) -> list[Recorded]:
    """Keep the change points found on ``series``: one the store already holds (same
    direction, within ``near_runs`` runs of where it was: more runs can move a split a
    little) is that one, not a new one."""
    board, flavour, scenario, interval_us = series.key
    stored = list(session.scalars(select(ChangePoint).where(
        ChangePoint.board == board, ChangePoint.flavour == flavour,
        ChangePoint.scenario == scenario, ChangePoint.interval_us == interval_us,
        ChangePoint.ref_name == ref)))
    position = {run.case_id: index for index, run in enumerate(series.runs)}
    recorded = []
    for change in changes:
        before = series.runs[change.first_step - 1]
        after = series.runs[change.first_after]
        known = next((row for row in stored if row.direction == change.direction
                      and row.first_after_case in position
                      and abs(position[row.first_after_case] - change.first_after) <= near_runs),
                     None)
        if known is not None:
            recorded.append(Recorded(known, False))
            continue
        row = ChangePoint(
            board=board, flavour=flavour, scenario=scenario, interval_us=interval_us,
            ref_name=ref, last_before_case=before.case_id, first_after_case=after.case_id,
            good_commit=before.commit_sha, bad_commit=after.commit_sha,
            first_after_started=after.started, direction=change.direction,
            quantile=change.quantile, before_us=change.before_us, after_us=change.after_us,
            ci_low_us=change.ci_us[0], ci_high_us=change.ci_us[1], p_value=change.p_value,
            steps=change.steps, found_at=now or datetime.datetime.now(datetime.UTC))
        session.add(row)
        stored.append(row)
        recorded.append(Recorded(row, True))
    session.flush()
    return recorded


def open_changes(session: Session, *, ref: str, boards: Sequence[str] | None = None,
                 flavours: Sequence[str] | None = None) -> list[ChangePoint]:
    """The change points not accepted, oldest first."""
    query = select(ChangePoint).where(ChangePoint.ref_name == ref,
                                      ChangePoint.accepted.is_(None))
    if boards:
        query = query.where(ChangePoint.board.in_(list(boards)))
    if flavours:
        query = query.where(ChangePoint.flavour.in_(list(flavours)))
    return list(session.scalars(query.order_by(ChangePoint.first_after_started,
                                               ChangePoint.id)))


def accept_change(session: Session, change_id: int, why: str,
                  now: datetime.datetime | None = None) -> ChangePoint:
    """Accept a change point (docs/verdicts.md): the series' baselines start after it."""
    if not why.strip():
        raise ValueError("accepting a change point needs a reason (a merge request, a label)")
    row = session.get(ChangePoint, change_id)
    if row is None:
        raise ValueError(f"no change point {change_id} in the store")
    row.accepted = why
    row.accepted_at = now or datetime.datetime.now(datetime.UTC)
    session.flush()
    return row


def accepted_since(session: Session, *, board: str, flavour: str, scenario: str,
                   interval_us: int, ref: str | None) -> datetime.datetime | None:
    """When the series' newest accepted change point's first run after it started: a
    baseline takes no run from before it (None: none accepted)."""
    query = select(ChangePoint.first_after_started).where(
        ChangePoint.board == board, ChangePoint.flavour == flavour,
        ChangePoint.scenario == scenario, ChangePoint.interval_us == interval_us,
        ChangePoint.accepted.is_not(None))
    if ref is not None:
        query = query.where(ChangePoint.ref_name == ref)
    newest = session.scalar(query.order_by(ChangePoint.first_after_started.desc()).limit(1))
    return _utc(newest) if newest is not None else None


def accepted_times(session: Session, *, ref: str | None) -> dict[SeriesKey, datetime.datetime]:
    """:func:`accepted_since` of every series that has an accepted change point, at once."""
    query = select(ChangePoint.board, ChangePoint.flavour, ChangePoint.scenario,
                   ChangePoint.interval_us, ChangePoint.first_after_started).where(
        ChangePoint.accepted.is_not(None))
    if ref is not None:
        query = query.where(ChangePoint.ref_name == ref)
    newest: dict[SeriesKey, datetime.datetime] = {}
    for board, flavour, scenario, interval_us, started in session.execute(query):
        key, when = (board, flavour, scenario, interval_us), _utc(started)
        if key not in newest or when > newest[key]:
            newest[key] = when
    return newest
