"""One CPU's cyclictest histogram (``cyclictest -h RANGE``): 1 µs buckets, the overflows
past the range and the true maximum, read from a result record or cyclictest's JSON,
clipped and merged. Every statistical verdict works on it, never on expanded samples
(docs/verdicts.md, "The statistics behind the verdict")."""

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

import attr
import numpy as np

from rtlab.measure.cyclictest import CpuResult, Percentile, nearest_rank, percentiles


def _counts_array(value: object) -> np.ndarray:
    counts = np.array(value, dtype=np.int64, copy=True)
    if counts.ndim != 1 or counts.size == 0:
        raise ValueError(f"histogram counts must be a non-empty 1-D sequence, got shape "
                         f"{counts.shape}")
    if (counts < 0).any():
        raise ValueError("histogram counts must not be negative")
    # frozen means frozen: a shared array changed in place would change every verdict
    counts.setflags(write=False)
    return counts


def _non_negative(instance: object, attribute: "attr.Attribute[int]", value: int) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must not be negative, got {value}")


@attr.frozen(eq=False)
class Histogram:
    """One CPU's ``-h`` histogram: ``counts[b]`` wake-ups took ``b`` µs (``b .. b+0.999``),
    ``overflows`` took ``range_us`` µs or more, and the longest took ``max_us`` (None when
    unknown)."""

    counts: np.ndarray = attr.field(converter=_counts_array)
    overflows: int = attr.field(converter=int, validator=_non_negative, default=0)
    max_us: float | None = None

    @classmethod
    def from_record_cpu(cls, cpu: Mapping[str, Any]) -> "Histogram":
        """From one entry of a result record's ``cpus`` (sparse ``{"bucket": count}``)."""
        range_us = cpu.get("histogram_range_us")
        sparse = cpu.get("histogram")
        if not isinstance(range_us, int) or range_us <= 0 or not isinstance(sparse, Mapping):
            raise ValueError("the CPU has no histogram (cyclictest ran without -h)")
        counts = np.zeros(range_us, dtype=np.int64)
        for key, count in sparse.items():
            bucket = int(key)
            if not 0 <= bucket < range_us:
                raise ValueError(f"histogram bucket {key!r} outside 0..{range_us - 1}")
            counts[bucket] = count
        overflows = cpu.get("overflows") or 0
        histogram = cls(counts, overflows, cpu.get("max_us"))
        samples = cpu.get("samples")
        if samples is not None and samples != histogram.samples:
            raise ValueError(f"samples {samples} but the histogram and its overflows hold "
                             f"{histogram.samples}")
        return histogram

    @classmethod
    def from_cpu_result(cls, cpu: CpuResult) -> "Histogram":
        """From one thread of parsed ``cyclictest --json`` output."""
        if cpu.histogram is None or cpu.histogram_range_us is None:
            raise ValueError(f"thread {cpu.thread} has no histogram (run without -h)")
        counts = np.zeros(cpu.histogram_range_us, dtype=np.int64)
        for bucket, count in cpu.histogram.items():
            counts[bucket] = count
        return cls(counts, cpu.overflows or 0, cpu.max_us)

    def to_record_cpu(self) -> dict[str, Any]:
        """The histogram fields of a result record's CPU entry."""
        (buckets,) = np.nonzero(self.counts)
        return {
            "samples": self.samples, "max_us": self.max_us, "overflows": self.overflows,
            "histogram_range_us": self.range_us,
            "histogram": {str(b): int(self.counts[b]) for b in buckets},
        }

    @property
    def range_us(self) -> int:
        return int(self.counts.size)

    @property
    def samples(self) -> int:
        return int(self.counts.sum()) + self.overflows

    @property
    def known_max_us(self) -> float | None:
        """The maximum, or the highest bucket when nothing overflowed (the JSON's maximum
        is that bucket then)."""
        if self.max_us is not None:
            return self.max_us
        if self.overflows:
            return None
        (buckets,) = np.nonzero(self.counts)
        return float(buckets[-1]) if buckets.size else None

    def quantile(self, quantile: float | Fraction) -> int | None:
        """The quantile by nearest rank over all samples, overflows included, as
        :func:`rtlab.measure.cyclictest.percentiles` takes it; None when it lies among the
        overflows (its value is then only known to be ``>= range_us``)."""
        if self.samples == 0:
            raise ValueError("no samples to take a quantile of")
        rank = nearest_rank(quantile, self.samples)
        bucket = int(np.searchsorted(np.cumsum(self.counts), rank))
        return bucket if bucket < self.range_us else None

    def percentiles(self) -> dict[str, Percentile]:
        """p50, p99, p99.9 and p99.99 exactly as the gate reports them."""
        return percentiles(self.counts.tolist(), self.overflows)

    def clipped(self, range_us: int) -> "Histogram":
        """The histogram a ``-h range_us`` run would have kept: buckets from ``range_us``
        on become overflows."""
        if range_us >= self.range_us:
            return self
        if range_us <= 0:
            raise ValueError(f"range_us must be positive, got {range_us}")
        moved = int(self.counts[range_us:].sum())
        return Histogram(self.counts[:range_us], self.overflows + moved, self.known_max_us)

    @classmethod
    def merged(cls, histograms: Iterable["Histogram"]) -> "Histogram":
        """All samples of several runs (or CPUs) in one histogram, at the smallest range
        among them."""
        items = list(histograms)
        if not items:
            raise ValueError("nothing to merge")
        range_us = min(h.range_us for h in items)
        clipped = [h.clipped(range_us) for h in items]
        maxima = [h.known_max_us for h in clipped]
        return cls(
            np.sum([h.counts for h in clipped], axis=0),
            sum(h.overflows for h in clipped),
            None if any(m is None for m in maxima) else max(m for m in maxima if m is not None),
        )

    def merge(self, *others: "Histogram") -> "Histogram":
        return Histogram.merged([self, *others])
