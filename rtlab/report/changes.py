"""The change points of a report: every series of the default branch read by
rtlab.verdict.changepoints, each change point kept once in the store (rtlab.store.changes),
the open ones listed (new ones marked) for the page, the summary, the trends and
``rtlab report --changes``."""

import contextlib
import datetime
import hashlib
from collections.abc import Iterable, Sequence

import attr
from sqlalchemy.orm import Session

from rtlab.store.changes import SeriesKey, open_changes, record_changes, series_runs
from rtlab.store.models import ChangePoint
from rtlab.verdict.changepoints import ChangePolicy, find_changes
from rtlab.verdict.thresholds import Thresholds, ThresholdsError


@attr.frozen
class ChangeView:
    """An open change point as a report shows it."""

    change_id: int
    key: SeriesKey
    direction: str
    quantile: float
    before_us: float
    after_us: float
    ci_us: tuple[float, float]
    night: datetime.datetime
    good_commit: str | None
    bad_commit: str | None
    steps: int
    new: bool
    bisection: str | None

    @property
    def series(self) -> str:
        board, flavour, scenario, interval_us = self.key
        return f"{board}/{flavour}/{scenario}/{interval_us}us"

    @property
    def commits(self) -> str:
        """``abc1234..def5678``: the last commit before and the first after."""
        return f"{(self.good_commit or '?')[:12]}..{(self.bad_commit or '?')[:12]}"

    def size(self) -> str:
        """``p99.99 +18 µs [9, 27]``."""
        low, high = self.ci_us
        return (f"p{100 * self.quantile:.10g} {self.after_us - self.before_us:+.0f} µs "
                f"[{low:+.0f}, {high:+.0f}]")

    def describe(self) -> str:
        steps = f", in {self.steps} steps" if self.steps > 1 else ""
        return (f"{self.size()} from the night of {self.night:%Y-%m-%d} ({self.direction}"
                f"{steps}; {self.before_us:.0f} → {self.after_us:.0f} µs; commits "
                f"{self.commits})")


@attr.frozen
class Changes:
    ref: str | None
    found: tuple[ChangeView, ...]
    """Every open change point, oldest first."""
    series: int
    """Series read."""
    without_summary: int
    """Measured runs read without a tail summary (no histogram)."""

    @property
    def new(self) -> tuple[ChangeView, ...]:
        return tuple(change for change in self.found if change.new)

    def of(self, key: SeriesKey) -> tuple[ChangeView, ...]:
        return tuple(change for change in self.found if change.key == key)


NO_CHANGES = Changes(None, (), 0, 0)


def find(session: Session, ref: str | None, *, boards: Sequence[str] = (),
         flavours: Sequence[str] = (), thresholds: Thresholds | None = None,
         now: datetime.datetime | None = None,
         series: Iterable[tuple[str, str, str | None, int | None]] | None = None) -> Changes:
    """Read every series of ``ref``, keep the change points found, list the open ones.
    ``series``: those of ``boards`` and ``flavours``, where the caller knows them."""
    if ref is None:
        return NO_CHANGES
    new_ids: set[int] = set()
    every = series_runs(session, ref=ref, boards=boards or None, flavours=flavours or None,
                        series=series)
    for series in every:
        found = find_changes([run.tail for run in series.runs], _policy(series.key,
                                                                         thresholds))
        for recorded in record_changes(session, series, ref, found, now=now):
            if recorded.new:
                new_ids.add(recorded.row.id)
    views = tuple(_view(row, row.id in new_ids) for row in open_changes(
        session, ref=ref, boards=boards or None, flavours=flavours or None))
    return Changes(ref, views, len(every), sum(s.without_summary for s in every))


def _policy(key: SeriesKey, thresholds: Thresholds | None) -> ChangePolicy:
    """The series' quantile from thresholds.yaml (as its comparison's), and a seed of its
    own: the same store gives the same change points."""
    seed = int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest(),
                          "big") >> 1
    quantile = ChangePolicy().quantile
    if thresholds is not None:
        # a series the file cannot resolve (an unknown board) reads the default quantile
        with contextlib.suppress(ThresholdsError):
            quantile = thresholds.statistics(*key).quantile
    return ChangePolicy(quantile=quantile, seed=seed)


def _view(row: ChangePoint, new: bool) -> ChangeView:
    started = row.first_after_started
    if started.tzinfo is None:
        started = started.replace(tzinfo=datetime.UTC)
    return ChangeView(
        row.id, (row.board, row.flavour, row.scenario, row.interval_us), row.direction,
        row.quantile, row.before_us, row.after_us, (row.ci_low_us, row.ci_high_us),
        started, row.good_commit, row.bad_commit, row.steps, new, row.bisection)


def terminal(changes: Changes) -> str:
    """``rtlab report --changes``: one line per open change point."""
    if changes.ref is None:
        return "change points: no default branch to read (--baseline-ref)\n"
    lines = [f"{len(changes.found)} open change point(s) on {changes.ref} "
             f"({len(changes.new)} new) over {changes.series} series"]
    for change in changes.found:
        mark = "new  " if change.new else "     "
        lines.append(f"{mark}#{change.change_id} {change.series}: {change.describe()}"
                     + (f"; bisection {change.bisection}" if change.bisection else ""))
    if changes.without_summary:
        lines.append(f"not read: {changes.without_summary} measured run(s) without a "
                     "histogram")
    return "\n".join(lines) + "\n"
