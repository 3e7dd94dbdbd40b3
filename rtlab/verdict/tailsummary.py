"""A run's tail in a few hundred bytes: how many of its wake-ups (every judged CPU's
together) reached each level of one fixed grid, from about its 90th percentile up.

The results store keeps it beside every measured case when it is ingested, so that
reading a series' whole history (rtlab.verdict.changepoints, on every series at every
report) is one narrow query of the cases, not every CPU's histogram. One grid for every
run makes the runs' counts add up: a series' pooled tail at a level is the sum of its
runs' counts there, each against its own wake-ups (its exposure).

The grid is every µs up to 20 µs, then steps of 5 % up to one second: a quantile read from
it between two levels is interpolated (log-linear), within 2.5 % of the histogram's own.
"""

from collections.abc import Iterable, Sequence

import attr
import numpy as np

from rtlab.verdict.histogram import Histogram

LEVELS_US: np.ndarray = np.unique(np.concatenate([
    np.arange(1, 21, dtype=np.float64),
    np.round(20 * 1.05 ** np.arange(1, int(np.log(50_000) / np.log(1.05)) + 2), 3)]))
LEVELS_US.setflags(write=False)
"""Level ``j``: wake-ups of ``LEVELS_US[j]`` µs or more."""

KEPT_FROM = 0.10
"""A summary starts at the first level at most this share of the run's wake-ups reached."""


@attr.frozen(eq=False)
class TailSummary:
    """``counts[j]``: the run's wake-ups of ``LEVELS_US[first + j]`` µs or more; past the
    last, none. Below ``first`` the count is more than :data:`KEPT_FROM` of ``samples``
    (read as the count at ``first``: a lower bound)."""

    samples: int
    first: int
    counts: np.ndarray = attr.field(converter=lambda c: np.asarray(c, dtype=np.int64))

    @classmethod
    def of(cls, histograms: Iterable[Histogram]) -> "TailSummary":
        """The summary of the CPUs' histograms together. Levels past a histogram's range
        count its overflows up to its maximum (an upper bound: where in between they lie
        is unknown) and none above it; with no maximum known, every level above counts
        them."""
        merged = np.zeros(len(LEVELS_US), dtype=np.int64)
        samples = 0
        for histogram in histograms:
            samples += histogram.samples
            # wake-ups at or above bucket b, per bucket, plus the overflows
            above = np.cumsum(histogram.counts[::-1])[::-1] + histogram.overflows
            index = np.ceil(LEVELS_US).astype(np.int64)
            inside = index < histogram.range_us
            merged[inside] += above[index[inside]]
            past = ~inside
            if histogram.max_us is not None:
                past &= histogram.max_us >= LEVELS_US
            merged[past] += histogram.overflows
        if samples == 0:
            raise ValueError("a tail summary needs wake-ups: the histograms hold none")
        first = int(np.argmax(merged <= KEPT_FROM * samples))
        nonzero = np.nonzero(merged)[0]
        last = int(nonzero[-1]) + 1 if nonzero.size else first
        # at least the first level's count: below it, a level counts as much (a bound)
        return cls(samples, first, merged[first:max(first + 1, last)])

    def dense(self) -> np.ndarray:
        """The count at every level of the grid (below ``first``: its count there)."""
        out = np.zeros(len(LEVELS_US), dtype=np.int64)
        out[:self.first] = self.counts[0]
        out[self.first:self.first + self.counts.size] = self.counts
        return out

    def __attrs_post_init__(self) -> None:
        if self.counts.ndim != 1 or self.counts.size == 0:
            raise ValueError("a tail summary keeps at least its first level's count")

    def to_bytes(self) -> bytes:
        return self.counts.astype("<i8").tobytes()

    @classmethod
    def from_stored(cls, samples: int, first: int, counts: bytes) -> "TailSummary":
        return cls(samples, first, np.frombuffer(counts, dtype="<i8"))


def counts_matrix(summaries: Sequence[TailSummary]) -> tuple[np.ndarray, np.ndarray]:
    """Every run's count at every level (runs × levels) and every run's wake-ups."""
    if not summaries:
        return np.zeros((0, len(LEVELS_US)), dtype=np.int64), np.zeros(0, dtype=np.int64)
    return (np.stack([s.dense() for s in summaries]),
            np.array([s.samples for s in summaries], dtype=np.int64))


def pooled_quantile(counts: np.ndarray, samples: np.ndarray, quantile: float) -> float | None:
    """The ``quantile`` of the runs' wake-ups together, read from their counts: where the
    pooled share above a level crosses ``1 - quantile``, log-linear between two levels.
    None where the runs hold too few wake-ups to reach it (fewer than 1 above it), or
    where it lies past the grid."""
    total = float(samples.sum())
    wanted = 1.0 - quantile
    if total * wanted < 1.0:
        return None
    share = counts.sum(axis=0) / total
    crossed = np.nonzero(share <= wanted)[0]
    if crossed.size == 0:
        return None
    j = int(crossed[0])
    if j == 0:
        return float(LEVELS_US[0])
    high, low = share[j - 1], share[j]
    if low <= 0:
        # past the last wake-up: the level below holds it
        return float(LEVELS_US[j - 1])
    fraction = (np.log(high) - np.log(wanted)) / (np.log(high) - np.log(low))
    return float(np.exp(np.log(LEVELS_US[j - 1]) + fraction
                        * (np.log(LEVELS_US[j]) - np.log(LEVELS_US[j - 1]))))
