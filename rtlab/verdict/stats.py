"""Statistical verdicts from cyclictest histograms: a tail estimate per CPU, and a
regression test of one run against the runs before it.

A threshold on the single worst wake-up (``max_us``) stays the gate. The figures here are
reported beside it, because the maximum of one run is the noisiest figure a run has: it is
one sample, and it grows with the run's length. Both verdicts work on the histogram that
``cyclictest -h RANGE`` keeps (1 µs buckets ``0..RANGE-1``, a count of overflows at
``RANGE`` µs or more, and the true maximum from the JSON), never on expanded samples, so
that a run of 10^8 wake-ups costs the same as one of 10^4.

**Tail estimate: peaks over threshold.** Extreme-value theory says that, for almost any
latency distribution, the excesses over a high enough threshold ``u`` follow a generalised
Pareto distribution (GPD) with shape ξ and scale σ (Pickands–Balkema–de Haan). That is the
only part of the distribution that decides how often a limit is crossed, and it lets the
estimate reach probabilities (10^-6 per wake-up, hours of running) that one run has not
seen. ``u`` is the latency with about 1 % of the samples at or above it (at most
``max_exceedances`` of them, so that a long run fits its far tail rather than its
shoulder); fewer than ``min_exceedances`` (50) there, and there is no fit: a run needs
5000 wake-ups for one.

*Binned likelihood.* The samples are only known to 1 µs: a count in bucket ``b`` is a
latency in ``[b, b+1)``. Taking bucket numbers for exact values would bias σ low by up
to half a bucket (by a third for an exponential tail 1.2 µs wide), so each bucket
contributes
``count * log(F(b+1-u) - F(b-u))`` (an interval-censored likelihood), and the fit costs one
term per non-empty bucket whatever the run's length. Samples past the range are only known
to be ``>= RANGE``: they are right-censored at ``RANGE``, and since the JSON gives the true
maximum ``M``, the ``k`` overflows contribute ``log((S(R)-S(M+1))^k - (S(R)-S(M))^k)``
(all of them in ``[RANGE, M+1)``, the largest in ``[M, M+1)``). Dropping them, or counting
them at ``RANGE``, would make a bad tail look good.

The bound (the latency exceeded with a chosen probability per wake-up) gets a
profile-likelihood confidence interval: for each candidate bound the likelihood is
maximised over the shape with the scale tied to the bound, and the interval holds the
bounds within ``chi2(1)`` of the best. Profile intervals follow the asymmetry of return
levels (much longer above than below), which a normal approximation misses. The rate of
exceedances ``N_u / n`` is taken as known; its relative error ``1/sqrt(N_u)`` is small
beside the shape's. A chi-square test on the exceedances (grouped into bins of equal fitted
probability) warns when the tail is not a GPD, e.g. a second mode of latencies from one
rare source, where the bound extrapolates the wrong shape.

**Regression test: bootstrap of a tail quantile, with the runs' spread.** A high
quantile (p99.9 by default) of the candidate run is compared with that of the baseline
(the last runs of the same board, flavour and scenario), by nearest rank as the gate
reports percentiles. Its sampling distribution comes from resampling the histograms: a
multinomial draw of the bucket counts is exactly a bootstrap resample of the samples, at
a cost that does not grow with the sample count. Runs differ by more than their sampling
noise (boot-time placement, caches, firmware), so a bootstrap of one merged baseline
histogram would call ordinary run-to-run variation a regression. Such effects scale a
run's latencies, so the candidate and the baseline each get a factor, log-normal with
the variance the baseline runs' log quantiles show beyond their own sampling noise (the
candidate the whole of it, the merged baseline 1/N of it). N runs know that variance to
N - 1 degrees of freedom only, and taking it as exact fails an unchanged candidate more
often than the interval's level says when N is small and the spread large (6 % instead
of at most 1 % with 4 runs and a 12 % spread): each replicate draws it from its fiducial
distribution, which makes the interval a Student t one where the spread dominates.

The difference candidate − baseline is a ``regression`` when its confidence interval
lies above 0 and the difference exceeds a practical tolerance, ``no change`` when the
interval lies below the tolerance (an improvement is no regression), and
``inconclusive`` otherwise, with how much longer the candidate would have to run for the
interval to resolve the difference seen: the candidate's share of the variance shrinks as
``1/n`` while the baseline's share and the run-to-run spread stay (when they alone are
too wide, no length will do, and the message says so). The default 98 % interval holds
false fails to 1 % whatever the spread. The tolerance (5 % of the baseline's quantile,
at least 1 µs) is not asked of the interval's lower end: it once was, and then it, not
the interval, kept false fails down, only at the spread ``bench/verdict_quality.py``
happened to use (2-4 % false fails at 2-3 times that spread), at a cost in detection.

What one candidate run can detect is bounded by the run-to-run spread, not by the test
(``bench/verdict_quality.py``, see docs/measured.md): with 3 % spread of the
latency scale, even a test that knew the spread exactly would find a tail 30 % wider in
only 47-88 % of single runs against 5 baseline runs. Knowing the spread from 5 runs only
costs detection too; 20 baseline runs know it well enough to find a tail 50 % wider in
95 % of runs or more. When runs are alike, a tail 30 % wider is found in 10^5 wake-ups.

**Further out: compare_tail.** The run-to-run spread moves every quantile alike, while a
tail that grows moves its far quantiles more than its p99.9: against 20 baseline runs of
the bench's sources, an ideal test of the p99.9 (exact quantiles, the spread known) finds
a tail 30 % wider in 68-92 % of runs, of the p99.99 in 97-99.5 %, of the p99.999 in
99.7-100 %. :func:`compare_tail` therefore compares the asked quantile and each decade
above it that every run has at least 100 wake-ups beyond (fewer, and a bootstrap of so
high an order statistic says little), each at a Bonferroni share of the confidence, so
that the false fails of all of them together stay at (1 - confidence) / 2.

A quantile among the overflows is only known to be ``>= RANGE``. The bootstrap then uses
``RANGE``, a lower bound for the candidate's quantile and so for the difference (a
``regression`` can still be proven) and an upper bound for the difference when it is the
baseline's (``no change`` can still be proven); any other outcome is inconclusive, and a
longer run does not help (a larger ``-h`` does).
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import attr
import numpy as np
from scipy import optimize
from scipy import stats as sps

from rtlab.measure.cyclictest import CpuResult, Percentile, nearest_rank, percentiles

DEFAULT_EXCEEDANCE_PROBABILITY = 1e-6
DEFAULT_QUANTILE = 0.999
# compare_tail: how many decades above the lowest quantile it may add, and how many
# wake-ups beyond a quantile every run needs for it (fewer, and the bootstrap of so high
# an order statistic says little)
TAIL_DECADES = 2
MIN_WAKEUPS_BEYOND = 100
REGRESSION = "regression"
NO_CHANGE = "no change"
INCONCLUSIVE = "inconclusive"
OUTCOMES = (REGRESSION, NO_CHANGE, INCONCLUSIVE)
# the shapes a fit may take: below -0.5 the likelihood is irregular, and above 1.5 a tail
# is too heavy for any bound derived from it to mean anything
_SHAPE_BOUNDS = (-0.5, 1.5)
_US_PER_HOUR = 3.6e9
# the negative log-likelihood of parameters the data rule out, finite for the optimisers
_IMPOSSIBLE = 1e300


# ------------------------------------------------------------------ histogram ----


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


# ----------------------------------------------------------------- tail fit ----


@attr.frozen
class TailEstimate:
    """What the tail of one CPU's histogram says beyond what the run saw.

    Every figure is None when there was no fit; ``warnings`` then says why.
    """

    samples: int
    observed_max_us: float | None
    # the latency whose crossing ``probability`` is about (the gate's max_us)
    threshold_us: float | None
    # the per-wake-up probability the bound is given at
    exceedance_probability: float
    confidence: float
    # u: the fit uses the samples of u µs or more
    pot_threshold_us: int | None = None
    tail_samples: int = 0
    shape: float | None = None
    scale_us: float | None = None
    # P(one wake-up's latency is above threshold_us)
    probability: float | None = None
    # expected crossings of threshold_us per hour at interval_us
    per_hour: float | None = None
    # the latency one wake-up exceeds with exceedance_probability, and its interval
    # (the upper end is inf when the data allow any tail)
    bound_us: float | None = None
    bound_ci_us: tuple[float, float] | None = None
    # the chi-square test of the fit on the exceedances (None when too few bins to test)
    fit_p_value: float | None = None
    warnings: tuple[str, ...] = ()

    @property
    def fitted(self) -> bool:
        return self.shape is not None


@attr.frozen
class _Tail:
    """The exceedances of one histogram over u, in units of excess over u."""

    u: int
    n: int
    exceedances: int
    # non-empty in-range buckets: lower edges (b - u) and counts
    lower: np.ndarray
    counts: np.ndarray
    overflow_at: float
    overflows: int
    # the maximum's lower edge (M - u), when overflows exist and M is known
    max_at: float | None

    def log_survival(self, y: np.ndarray | float, shape: float, scale: float) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        if abs(shape) < 1e-9:
            return -y / scale
        z = shape * y / scale
        with np.errstate(divide="ignore", invalid="ignore"):
            result = -np.log1p(z) / shape
        # past the end point of a bounded tail (shape < 0) nothing survives
        return np.where(1 + z > 0, result, -np.inf)

    def nll(self, shape: float, scale: float) -> float:
        """Negative log-likelihood of the exceedances, interval-censored per bucket and
        right-censored (or bounded by the maximum) past the range."""
        if not scale > 0 or not math.isfinite(scale):
            return math.inf
        low = self.log_survival(self.lower, shape, scale)
        if np.isneginf(low).any():
            return math.inf
        high = self.log_survival(self.lower + 1.0, shape, scale)
        with np.errstate(divide="ignore"):
            log_p = low + np.log(-np.expm1(high - low))
        total = float(self.counts @ log_p) if self.counts.size else 0.0
        if self.overflows:
            total += self._overflow_log_likelihood(shape, scale)
        return -total if math.isfinite(total) else math.inf

    def _overflow_log_likelihood(self, shape: float, scale: float) -> float:
        at_range = float(self.log_survival(self.overflow_at, shape, scale))
        if self.max_at is None:
            return self.overflows * at_range
        at_max, past_max = (float(v) for v in
                            self.log_survival([self.max_at, self.max_at + 1.0], shape, scale))
        # A: all k in [R, M+1); B: all k in [R, M); the largest in [M, M+1) is A^k - B^k
        log_a = _log_difference(at_range, past_max)
        log_b = _log_difference(at_range, at_max)
        if log_a == -math.inf or at_max == -math.inf:
            return -math.inf
        ratio = math.exp(self.overflows * (log_b - log_a)) if log_b > -math.inf else 0.0
        if ratio >= 1.0:
            return -math.inf
        return self.overflows * log_a + math.log1p(-ratio)

    def expected_counts(self, shape: float, scale: float, range_us: int) -> np.ndarray:
        """Fitted counts in every bucket from u to the range, and past it (last entry)."""
        edges = np.arange(0, range_us - self.u + 1, dtype=float)
        surv = np.exp(self.log_survival(edges, shape, scale))
        return self.exceedances * np.append(-np.diff(surv), surv[-1])


def _log_difference(log_x: float, log_y: float) -> float:
    """log(x - y) from log x and log y, -inf when y >= x."""
    if not log_y < log_x:
        return -math.inf
    return log_x + math.log(-math.expm1(log_y - log_x)) if log_y > -math.inf else log_x


def _pot_threshold(hist: Histogram, tail_fraction: float,
                   max_exceedances: int) -> tuple[int | None, int]:
    """u: the latency of the sample ranked ``tail_fraction * samples`` (at most
    ``max_exceedances``) from the top, so that at least that many samples are u or more
    (None when that sample overflowed); and that rank."""
    target = min(max(round(tail_fraction * hist.samples), 1), max_exceedances)
    return hist.quantile(Fraction(hist.samples - target + 1, hist.samples)), target


def tail_estimate(
    hist: Histogram,
    threshold_us: float | None,
    exceedance_probability: float = DEFAULT_EXCEEDANCE_PROBABILITY,
    *,
    interval_us: float | None = None,
    confidence: float = 0.95,
    tail_fraction: float = 0.01,
    min_exceedances: int = 50,
    max_exceedances: int = 20_000,
) -> TailEstimate:
    """Fit a GPD to the histogram's samples above its ~99th percentile (binned,
    overflow-censored likelihood) and estimate:

    * ``probability``: that one wake-up's latency is above ``threshold_us`` (reported in
      whole µs as cyclictest does, so above means ``>= floor(threshold_us) + 1``), and
      ``per_hour``: how often that happens in an hour of wake-ups every ``interval_us``;
    * ``bound_us``: the latency one wake-up exceeds with ``exceedance_probability``, with
      a profile-likelihood confidence interval at ``confidence``.

    A bound inside the data (``exceedance_probability`` at or above the fraction fitted)
    is the empirical quantile, with the order-statistics interval.
    """
    if not 0 < exceedance_probability < 1:
        raise ValueError(f"exceedance_probability must be in (0, 1), got "
                         f"{exceedance_probability}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n = hist.samples
    base = TailEstimate(samples=n, observed_max_us=hist.known_max_us, threshold_us=threshold_us,
                        exceedance_probability=exceedance_probability, confidence=confidence)
    if n == 0:
        return attr.evolve(base, warnings=("no samples",))
    u, target = _pot_threshold(hist, tail_fraction, max_exceedances)
    if u is None:
        return attr.evolve(base, warnings=(
            f"the tail lies past the histogram range: {hist.overflows} of {n} samples are "
            f">= {hist.range_us} µs, so the {target} largest, which the fit starts from, "
            "all overflowed; rerun cyclictest with a larger -h",))
    exceedances = int(hist.counts[u:].sum()) + hist.overflows
    if exceedances < min_exceedances:
        return attr.evolve(base, pot_threshold_us=u, tail_samples=exceedances, warnings=(
            f"too few tail samples ({exceedances}) for a fit: {min_exceedances} needed "
            f"at or above the {u} µs threshold; run longer",))
    (buckets,) = np.nonzero(hist.counts[u:])
    max_us = hist.known_max_us
    tail = _Tail(
        u=u, n=n, exceedances=exceedances, lower=buckets.astype(float),
        counts=hist.counts[u:][buckets].astype(float), overflow_at=float(hist.range_us - u),
        overflows=hist.overflows,
        max_at=(float(math.floor(max_us)) - u
                if hist.overflows and max_us is not None and max_us >= hist.range_us else None),
    )
    distinct = buckets.size + (1 if hist.overflows else 0)
    if distinct < 3:
        return attr.evolve(base, pot_threshold_us=u, tail_samples=exceedances, warnings=(
            f"the tail spans only {distinct} distinct latencies above {u} µs: too coarse "
            "for a fit",))
    warnings: list[str] = []
    if hist.overflows * 2 > exceedances:
        warnings.append(f"{hist.overflows} of the {exceedances} tail samples overflowed the "
                        f"{hist.range_us} µs histogram: the fit rests mostly on censored data;"
                        " rerun with a larger -h")
    shape, scale, best = _fit(tail)
    if shape >= _SHAPE_BOUNDS[1] - 1e-3 or shape <= _SHAPE_BOUNDS[0] + 1e-3:
        warnings.append(f"the shape hit its limit (ξ = {shape:.2f}): the fit is unreliable")
    elif shape > 0.5:
        warnings.append(f"heavy tail (shape ξ = {shape:.2f} > 0.5): the bound is unreliable")
    fit_p = _goodness_of_fit(tail, shape, scale, hist.range_us)
    if fit_p is not None and fit_p < 0.01:
        warnings.append(f"poor fit: the tail above {u} µs does not follow a generalised "
                        f"Pareto distribution (chi-square p = {fit_p:.2g})")
    rate = exceedances / n

    probability = per_hour = None
    if threshold_us is not None:
        above = math.floor(threshold_us) + 1
        if above >= u:
            probability = rate * float(np.exp(tail.log_survival(above - u, shape, scale)))
        else:
            probability = (int(hist.counts[above:].sum()) + hist.overflows) / n
        if interval_us is not None:
            per_hour = probability * _US_PER_HOUR / interval_us

    p = exceedance_probability
    if p >= rate:
        bound, interval = _empirical_bound(hist, p, confidence)
    else:
        bound = u + _gpd_excess(shape, scale, rate / p)
        interval = _profile_interval(tail, bound, best, rate / p, confidence)
        if math.isinf(interval[1]):
            warnings.append("the bound's upper confidence limit is unbounded: the data allow "
                            "an arbitrarily heavy tail")
        if 1 / p >= 100 * n:
            warnings.append(f"the bound extrapolates {1 / (p * n):.0f}× beyond the run's "
                            f"{n} samples")
    return attr.evolve(
        base, pot_threshold_us=u, tail_samples=exceedances, shape=shape, scale_us=scale,
        probability=probability, per_hour=per_hour, bound_us=bound, bound_ci_us=interval,
        fit_p_value=fit_p, warnings=tuple(warnings),
    )


def _gpd_excess(shape: float, scale: float, ratio: float) -> float:
    """The excess over u exceeded with probability 1/ratio within the tail."""
    log_ratio = math.log(ratio)
    if abs(shape) < 1e-9:
        return scale * log_ratio
    return scale * math.expm1(shape * log_ratio) / shape


def _fit(tail: _Tail) -> tuple[float, float, float]:
    """Maximum likelihood (shape, scale, nll), starting from the exponential fit."""
    mean_excess = (float(tail.counts @ (tail.lower + 0.5)) + tail.overflows * (
        tail.max_at if tail.max_at is not None else tail.overflow_at)) / tail.exceedances
    start_scale = max(mean_excess, 0.5)

    def objective(theta: np.ndarray) -> float:
        # finite, so that Nelder-Mead's convergence test (differences) stays defined
        return min(tail.nll(float(theta[0]), math.exp(float(theta[1]))), _IMPOSSIBLE)

    best: optimize.OptimizeResult | None = None
    # the likelihood can have a second, worse optimum at a bounded tail: two starts
    for start_shape in (0.1, -0.2):
        result = optimize.minimize(
            objective, np.array([start_shape, math.log(start_scale)]), method="Nelder-Mead",
            bounds=[_SHAPE_BOUNDS, (math.log(1e-3), math.log(1e7))],
            options={"xatol": 1e-5, "fatol": 1e-7, "maxiter": 2000},
        )
        if best is None or result.fun < best.fun:
            best = result
    assert best is not None
    return float(best.x[0]), math.exp(float(best.x[1])), float(best.fun)


def _profile_interval(tail: _Tail, bound: float, best: float, ratio: float,
                      confidence: float) -> tuple[float, float]:
    """The bounds whose profile likelihood is within chi2(1, confidence)/2 of the best:
    for a bound x the scale is fixed by x and the shape, and the shape is optimised."""
    limit = best + sps.chi2.ppf(confidence, 1) / 2
    log_ratio = math.log(ratio)
    # the profile is flat in tiny steps of the bound: search in excess over u
    excess = bound - tail.u

    def profile(x: float) -> float:
        def nll(shape: float) -> float:
            tied = (x * shape / math.expm1(shape * log_ratio) if abs(shape) > 1e-9
                    else x / log_ratio)
            return tail.nll(shape, tied)

        result = optimize.minimize_scalar(nll, bounds=_SHAPE_BOUNDS, method="bounded",
                                          options={"xatol": 1e-4})
        return min(float(result.fun), _IMPOSSIBLE) - limit

    low_end = excess * 1e-6
    low = optimize.brentq(profile, low_end, excess, xtol=1e-3 * excess) \
        if profile(low_end) > 0 else low_end
    high = math.inf
    step = excess
    for _ in range(40):
        if profile(excess + step) > 0:
            high = optimize.brentq(profile, excess + step / 2 if step > excess else excess,
                                   excess + step, xtol=1e-3 * excess)
            break
        step *= 2
    return (tail.u + low, tail.u + high)


def _empirical_bound(hist: Histogram, p: float, confidence: float) -> tuple[float,
                                                                         tuple[float, float]]:
    """The nearest-rank quantile 1 - p, and the order statistics that bracket it with
    ``confidence`` (binomial, normal approximation); overflows read as inf."""
    n = hist.samples
    z = sps.norm.ppf((1 + confidence) / 2)
    spread = z * math.sqrt(n * p * (1 - p))
    centre = n * (1 - p)

    def value(rank: float) -> float:
        bucket = hist.quantile(Fraction(min(max(math.ceil(rank), 1), n), n))
        return math.inf if bucket is None else float(bucket)

    return value(centre), (value(centre - spread), value(centre + spread))


def _goodness_of_fit(tail: _Tail, shape: float, scale: float, range_us: int) -> float | None:
    """Chi-square p-value of observed against fitted exceedance counts, in up to 10
    groups of about equal fitted count (each at least 5), the overflows one of them."""
    expected = tail.expected_counts(shape, scale, range_us)
    observed = np.zeros_like(expected)
    observed[(tail.lower).astype(int)] = tail.counts
    observed[-1] = tail.overflows
    groups = int(min(10, tail.exceedances // 5))
    if groups < 4:
        return None
    size = max(tail.exceedances / groups, 5.0)
    # group consecutive buckets; the overflow entry joins the last group if too small
    cum = np.cumsum(expected)
    group_of = np.minimum((cum - expected / 2) // size, groups - 1).astype(int)
    obs = np.bincount(group_of, weights=observed)
    exp = np.bincount(group_of, weights=expected)
    keep = exp > 0
    obs, exp = obs[keep], exp[keep]
    # a small last group (little fitted mass left past the range) joins the one before
    while exp.size > 1 and exp[-1] < 5:
        obs = np.append(obs[:-2], obs[-2:].sum())
        exp = np.append(exp[:-2], exp[-2:].sum())
    dof = exp.size - 1 - 2
    if dof < 1:
        return None
    statistic = float(((obs - exp) ** 2 / exp).sum())
    return float(sps.chi2.sf(statistic, dof))


# ----------------------------------------------------------------- comparison ----


@attr.frozen
class Comparison:
    """A candidate run's tail quantile against its baseline's."""

    outcome: str
    quantile: float
    # the quantiles in µs; None: past the histogram's range (only known to be >= range_us)
    candidate_us: int | None
    baseline_us: int | None
    range_us: int
    # candidate - baseline, a quantile past the range taken at range_us
    difference_us: float
    ci_us: tuple[float, float]
    confidence: float
    tolerance_us: float
    baseline_runs: int
    # the baseline's run-to-run spread (standard deviation) beyond sampling noise
    run_spread_us: float
    # inconclusive: run the candidate about this many times longer (inf: more samples of
    # the candidate cannot settle it); None otherwise
    longer: float | None
    message: str
    warnings: tuple[str, ...] = ()
    # compare_tail: (quantile, outcome, difference µs) of every quantile it compared
    compared: tuple[tuple[float, str, float], ...] = ()


def quantile_name(quantile: float) -> str:
    """0.999 -> "p99.9"."""
    return f"p{float(Fraction(repr(float(quantile))) * 100):g}"


def _check_bootstrap(quantile: float, confidence: float, resamples: int) -> None:
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 100:
        raise ValueError(f"resamples must be at least 100, got {resamples}")


def compare(
    candidate: Histogram,
    baseline: Histogram | Sequence[Histogram],
    *,
    quantile: float = DEFAULT_QUANTILE,
    tolerance_relative: float = 0.05,
    tolerance_us: float = 1.0,
    confidence: float = 0.98,
    resamples: int = 4000,
    seed: int | np.random.Generator = 0,
    margin_relative: float | None = None,
    candidate_windows: Sequence[Histogram] = (),
    baseline_windows: float | None = None,
) -> Comparison:
    """Compare the ``quantile`` (nearest rank) of ``candidate`` with that of the baseline
    runs, merged, by a bootstrap of the difference with the runs' spread as a factor (see
    the module's docstring). ``regression``: the ``confidence`` interval lies above 0 and
    the difference exceeds the tolerance ``max(tolerance_us, tolerance_relative *
    baseline)``, so that an A/A comparison fails with probability (1 - confidence) / 2 at
    most; ``no change``: the interval lies below the tolerance, or below
    ``margin_relative * baseline`` where that is given and wider (an adaptive run's
    equivalence margin: the shift it need not tell from none, rtlab.verdict.sequential).
    Histograms of different ranges are compared at the smallest one.

    ``candidate_windows``: the windows the candidate was measured in so far (an adaptive
    run), each baseline run being ``baseline_windows`` such windows long. A run's minutes
    are not alike (a burst, a periodic job): a few of them vary more than the baseline's
    whole runs do, whose spread already holds that variation at their length. The
    windows' spread beyond their sampling noise, drawn from its fiducial distribution
    like the runs', enters the candidate as ``1 / w - 1 / baseline_windows`` of it.
    Without two windows that spread is unknown, and nothing is added: an adaptive run
    compares from several windows on (rtlab.verdict.sequential)."""
    _check_bootstrap(quantile, confidence, resamples)
    runs = [baseline] if isinstance(baseline, Histogram) else list(baseline)
    if not runs:
        raise ValueError("the baseline has no runs")
    range_us = min(h.range_us for h in (candidate, *runs))
    cand = candidate.clipped(range_us)
    runs = [h.clipped(range_us) for h in runs]
    if cand.samples == 0 or any(h.samples == 0 for h in runs):
        raise ValueError("a histogram without samples cannot be compared")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    q = Fraction(repr(float(quantile)))
    alpha = 1 - confidence
    name = quantile_name(quantile)

    windows = [h.clipped(range_us) for h in candidate_windows if h.samples]
    if len(windows) < 2 or not baseline_windows:
        windows = []
    values, (probs_c, *probs_runs) = _categories([cand, *runs], q)
    sizes = np.array([h.samples for h in runs], dtype=np.int64)
    total_size = int(sizes.sum())

    cand_rep = _quantiles(rng.multinomial(cand.samples, probs_c, size=resamples),
                          np.full(resamples, cand.samples), q, values)
    # the baseline's sampling noise: a bootstrap of all its samples together; its runs'
    # spread comes in below, as factors
    probs_merged = np.sum([probs * size for probs, size in zip(probs_runs, sizes,
                                                              strict=True)], axis=0)
    base_rep = _quantiles(rng.multinomial(total_size, probs_merged / total_size,
                                          size=resamples),
                          np.full(resamples, total_size), q, values)

    merged = Histogram.merged(runs)
    cand_q, base_q = cand.quantile(q), merged.quantile(q)
    # censored replicates make the difference a lower bound (candidate) or an upper bound
    # (baseline); a verdict may rest only on the end of the interval they cannot move
    cand_censored = cand_q is None or float(np.mean(cand_rep >= range_us)) > alpha / 2
    base_censored = (base_q is None or float(np.mean(base_rep >= range_us)) > alpha / 2
                     or any(h.quantile(q) is None for h in runs))

    warnings: list[str] = []
    spread = 0.0
    cand_factor: np.ndarray | float = 1.0
    base_factor: np.ndarray | float = 1.0
    between: np.ndarray | float = 0.0
    draws = np.zeros((2, resamples))
    if len(runs) >= 2:
        between, estimate = _between_run_variance(runs, probs_runs, q, values, range_us,
                                                  resamples, rng)
        spread = math.sqrt(estimate) * (_value(base_q, range_us) + 0.5)
        draws = rng.standard_normal((2, resamples))
        # the merged baseline carries the mean of its N runs' offsets
        base_factor = np.exp(draws[1] * np.sqrt(between / len(runs)))
    else:
        warnings.append("one baseline run: its run-to-run spread is unknown, so the verdict "
                        "allows for sampling noise only")
    within_run: np.ndarray | float = 0.0
    if windows and baseline_windows:
        share = max(1 / len(windows) - 1 / baseline_windows, 0.0)
        if share:
            # the windows' own grid: their quantiles scatter further than the runs'
            window_values, probs_windows = _categories(windows, q)
            within_run = _between_run_variance(
                windows, probs_windows, q, window_values, range_us, resamples, rng,
                per_run=max(resamples // (4 * len(windows)), 200))[0] * share
    # the candidate is one more run, with an offset of its own, and a few windows vary
    # more than a whole run
    if len(runs) < 2 and windows:
        draws = rng.standard_normal((2, resamples))
    if len(runs) >= 2 or windows:
        cand_factor = np.exp(draws[0] * np.sqrt(between + within_run))
    # +0.5: a bucket's value is the middle of its 1 µs, which also keeps 0 µs scalable
    diffs = (cand_rep + 0.5) * cand_factor - (base_rep + 0.5) * base_factor
    low, high = (float(v) for v in np.quantile(diffs, [alpha / 2, 1 - alpha / 2]))
    difference = float(_value(cand_q, range_us) - _value(base_q, range_us))
    tolerance = max(tolerance_us, tolerance_relative * _value(base_q, range_us))

    longer = None
    # a regression must be proven (the interval above 0) and matter (the difference
    # beyond the tolerance). The tolerance is not asked of the interval's lower end: the
    # interval's level alone holds the false fails to alpha / 2, and a margin on top of
    # it would cost detection for nothing
    if low > 0 and difference > tolerance and not base_censored:
        outcome = REGRESSION
    elif high <= max(tolerance, (margin_relative or 0.0) * _value(base_q, range_us)) \
            and not cand_censored:
        outcome = NO_CHANGE
    else:
        outcome = INCONCLUSIVE
        if cand_censored or base_censored:
            warnings.append(f"the {name} lies past the {range_us} µs histogram range: rerun "
                            "with a larger -h, or compare a lower quantile")
        else:
            longer = _longer(difference, tolerance, low, high, float(np.var(cand_rep)),
                             float(np.var(diffs)))

    def shown(value: int | None) -> str:
        return f">= {range_us} µs" if value is None else f"{value} µs"

    verdict = outcome
    if longer is not None:
        verdict += (f" — run about {math.ceil(longer)}× longer" if math.isfinite(longer)
                    else " — a longer run cannot settle it: the baseline's run-to-run spread "
                         "dominates; compare against more baseline runs")
    message = (f"{verdict}: {name} {shown(cand_q)} vs baseline {shown(base_q)} "
               f"({len(runs)} run{'s' if len(runs) != 1 else ''}): {difference:+g} µs, "
               f"{confidence:.0%} CI {low:+.1f} to {high:+.1f} µs, tolerance "
               f"{tolerance:.1f} µs")
    return Comparison(
        outcome=outcome, quantile=quantile, candidate_us=cand_q, baseline_us=base_q,
        range_us=range_us, difference_us=difference, ci_us=(low, high),
        confidence=confidence, tolerance_us=tolerance, baseline_runs=len(runs),
        run_spread_us=spread, longer=longer, message=message, warnings=tuple(warnings),
    )


def tail_quantiles(lowest: float, samples: int, *, decades: int = TAIL_DECADES,
                   min_beyond: int = MIN_WAKEUPS_BEYOND) -> tuple[float, ...]:
    """``lowest`` and the next ``decades`` decades above it (p99.9 -> p99.99, p99.999)
    that a run of ``samples`` wake-ups has at least ``min_beyond`` wake-ups beyond;
    ``lowest`` always."""
    exact = Fraction(repr(float(lowest)))
    chosen = [float(exact)]
    for decade in range(1, decades + 1):
        q = 1 - (1 - exact) / 10**decade
        if (1 - q) * samples < min_beyond:
            break
        chosen.append(float(q))
    return tuple(chosen)


def compare_tail(
    candidate: Histogram,
    baseline: Histogram | Sequence[Histogram],
    *,
    quantile: float = DEFAULT_QUANTILE,
    confidence: float = 0.98,
    decades: int = TAIL_DECADES,
    min_beyond: int = MIN_WAKEUPS_BEYOND,
    **options: Any,
) -> Comparison:
    """:func:`compare` at ``quantile`` and at each higher decade that every run is long
    enough for (:func:`tail_quantiles`), each at confidence ``1 - (1 - confidence) / k``
    for ``k`` quantiles (Bonferroni), so that an A/A comparison still fails with
    probability (1 - confidence) / 2 at most in all. A tail that grows moves its higher
    quantiles further than its lower ones while the run-to-run spread moves them alike,
    so a long run's p99.99 or p99.999 tells a wider tail from an ordinary run far sooner
    than its p99.9 (``bench/verdict_quality.py``).

    The outcome: ``regression`` when any quantile shows one (the largest relative
    difference is reported); else ``no change`` when ``quantile`` shows no change (the
    higher ones, known less precisely, are there to find regressions sooner, not to hold
    back a verdict on the quantile asked for); else ``inconclusive``, reported at the
    highest inconclusive quantile."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    runs = [baseline] if isinstance(baseline, Histogram) else list(baseline)
    samples = min(h.samples for h in (candidate, *runs)) if runs else candidate.samples
    quantiles = tail_quantiles(quantile, samples, decades=decades, min_beyond=min_beyond)
    each = 1 - (1 - confidence) / len(quantiles)
    results = [compare(candidate, runs, quantile=q, confidence=each, **options)
               for q in quantiles]
    regressions = [r for r in results if r.outcome == REGRESSION]
    if regressions:
        chosen = max(regressions, key=lambda r: r.difference_us
                     / (_value(r.baseline_us, r.range_us) + 0.5))
    elif results[0].outcome == NO_CHANGE:
        chosen = results[0]
    else:
        chosen = [r for r in results if r.outcome == INCONCLUSIVE][-1]
    if len(results) == 1:
        return chosen
    names = ", ".join(quantile_name(r.quantile) for r in results)
    others = "; ".join(f"{quantile_name(r.quantile)} {r.outcome} {r.difference_us:+g} µs"
                       for r in results if r is not chosen)
    return attr.evolve(
        chosen, compared=tuple((r.quantile, r.outcome, r.difference_us) for r in results),
        message=f"{chosen.message} [{names} compared, each at {each:.2%}; {others}]")


def _value(bucket: int | None, range_us: int) -> int:
    return range_us if bucket is None else bucket


def _between_run_variance(runs: Sequence[Histogram], probs_runs: Sequence[np.ndarray],
                          q: Fraction, values: np.ndarray, range_us: int, resamples: int,
                          rng: np.random.Generator,
                          per_run: int | None = None) -> tuple[np.ndarray, float]:
    """Draws of the variance of log(quantile) between runs beyond their sampling noise.

    Run-to-run effects (clock, cache and memory placement) scale a run's latencies, so
    the spread is taken on the log scale, where a factor is a shift and its distribution
    is not skewed. N runs know their variance to N - 1 degrees of freedom only: taking
    the sample variance as exact (a normal interval) would fail a candidate far more
    often than alpha / 2 when N is small, so each replicate draws it from its fiducial
    distribution, ``(N-1) s^2 / chi2(N-1)``, which makes the interval a Student t one
    where the spread dominates. The runs' own sampling noise (the mean bootstrap
    variance of their log quantile) is taken as known and subtracted. Also returns the
    point estimate. ``per_run``: the resamples of each run's sampling noise (default a
    quarter of ``resamples``; a run's many windows need fewer each for the same mean).
    """
    logs = np.log(np.array([_value(h.quantile(q), range_us) for h in runs], dtype=float)
                  + 0.5)
    count = per_run or max(resamples // 4, 100)
    within = float(np.mean([
        np.var(np.log(_quantiles(rng.multinomial(h.samples, probs, size=count),
                                 np.full(count, h.samples), q, values) + 0.5))
        for h, probs in zip(runs, probs_runs, strict=True)]))
    dof = len(runs) - 1
    variance = float(np.var(logs, ddof=1))
    total = dof * variance / rng.chisquare(dof, size=resamples)
    return np.maximum(total - within, 0.0), max(variance - within, 0.0)


def _categories(hists: Sequence[Histogram], q: Fraction) -> tuple[np.ndarray,
                                                                list[np.ndarray]]:
    """The histograms' bucket probabilities, reduced to the buckets a resampled quantile
    can land in, and the value (µs; ``range_us`` for the overflows) of each.

    A resample's quantile stays within 8 binomial standard deviations of q, so the
    buckets below (and above) that band are pooled into one category each: pooling
    categories leaves the multinomial distribution of the others exactly as it was, and
    the resampling then costs the same for 10^4 samples as for 10^8. Buckets empty in
    every histogram are dropped.
    """
    range_us = hists[0].range_us
    counts = np.array([np.append(h.counts, h.overflows) for h in hists], dtype=float)
    sizes = counts.sum(axis=1)
    margin = 8 * np.sqrt(float(q) * (1 - float(q)) / sizes)
    fraction = np.cumsum(counts, axis=1) / sizes[:, None]
    # low: every bucket up to it holds too little for the quantile in every histogram;
    # high: every bucket from it on lies beyond it
    (low_ok,) = np.nonzero((fraction <= (float(q) - margin)[:, None]).all(axis=0))
    low = int(low_ok[-1]) + 1 if low_ok.size else 0
    (high_ok,) = np.nonzero((fraction[:, :-1] >= (float(q) + margin)[:, None]).all(axis=0))
    high = int(high_ok[0]) + 1 if high_ok.size else range_us + 1
    high = max(high, low + 1)
    middle = np.arange(low, high)
    middle = middle[counts[:, low:high].any(axis=0)]
    # a pooled category's value is never the answer; below and above the band if it were
    values = np.concatenate(([max(low - 1, 0)], middle, [high])).astype(float)
    pooled = np.column_stack((counts[:, :low].sum(axis=1), counts[:, middle],
                              counts[:, high:].sum(axis=1)))
    return values, list(pooled / sizes[:, None])


def _quantiles(resampled: np.ndarray, totals: np.ndarray, q: Fraction,
               values: np.ndarray) -> np.ndarray:
    """The nearest-rank quantile of each resampled histogram (one per row)."""
    ranks = np.empty(totals.shape, dtype=np.int64)
    for total in np.unique(totals):
        ranks[totals == total] = nearest_rank(q, int(total))
    index = (np.cumsum(resampled, axis=1) < ranks[:, None]).sum(axis=1)
    return values[index].astype(float)


def _longer(difference: float, tolerance: float, low: float, high: float,
            candidate_var: float, total_var: float) -> float:
    """How many times longer the candidate must run for the interval to settle the
    verdict, if the difference stays: only the candidate's share of the variance shrinks
    (as 1/n). A regression needs the interval above 0, no change needs it below the
    tolerance."""
    if difference > tolerance:
        # quantiles move in whole buckets, so an interval that only touches 0 has to
        # clear about half of one more
        half, room = difference - low, difference - 0.5
    else:
        half, room = high - difference, tolerance - difference
    if half <= 0 or room <= 0 or candidate_var <= 0 or total_var <= 0:
        return math.inf
    allowed = total_var * (room / half) ** 2 - (total_var - candidate_var)
    if allowed <= 0:
        return math.inf
    return max(1.0, candidate_var / allowed)


# ----------------------------------------------------------- two variants ----
#
# A campaign asks what a kernel variant costs against another, per load: the shift of
# each tail quantile, candidate minus baseline, with its confidence interval. It is the
# regression test above made symmetric: each variant is a set of runs (fresh boots), the
# sampling noise of each comes from a multinomial bootstrap of its runs' merged
# histogram, and the run-to-run spread from the runs' log quantiles, pooled over both
# variants (each around its own mean: a shift between them is what is measured, not
# spread) with N_a + N_b - 2 degrees of freedom, each replicate drawing the variance from
# its fiducial distribution and each variant's mean carrying 1/N of it. Why not a plain
# bootstrap over runs: a campaign has two or three runs per variant and load, far too few
# for resampling runs to say anything, while this model needs two and is exact for the
# sampling part (bench/verdict_quality.py measured its false fails for compare).

COSTS = "costs"
# cyclictest's histogram resolution
BUCKET_US = 1.0
SAVES = "saves"
NO_MEASURABLE_CHANGE = "no measurable change"
SHIFT_OUTCOMES = (COSTS, SAVES, NO_MEASURABLE_CHANGE, INCONCLUSIVE)


@attr.frozen
class Shift:
    """The candidate variant's quantile against the baseline variant's."""

    quantile: float
    outcome: str
    # the merged runs' quantiles (None: past the histogram's range) and candidate - baseline
    baseline_us: int | None
    candidate_us: int | None
    shift_us: float | None
    ci_us: tuple[float, float] | None
    confidence: float
    tolerance_us: float
    range_us: int
    baseline_runs: int
    candidate_runs: int
    samples: tuple[int, int]
    """The wake-ups of the baseline and of the candidate (all runs and CPUs)."""
    # inconclusive: how many times longer both would have to run (inf: longer runs cannot
    # settle it, more runs can); None otherwise
    longer: float | None
    verdict: str
    """In plain words: ``costs 12 µs at p99.99 [5, 19]``, ``no measurable change``,
    ``inconclusive: run 4× longer``."""
    warnings: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return quantile_name(self.quantile)


def _signed(value: float) -> str:
    return f"{value:+.0f}" if abs(value) >= 10 else f"{value:+.1f}"


def _plain(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 10 else f"{value:.1f}"


def compare_variants(
    baseline: Sequence[Histogram],
    candidate: Sequence[Histogram],
    *,
    quantile: float,
    confidence: float = 0.95,
    tolerance_relative: float = 0.05,
    tolerance_us: float = 2 * BUCKET_US,
    resamples: int = 4000,
    seed: int | np.random.Generator = 0,
    min_beyond: int = MIN_WAKEUPS_BEYOND,
) -> Shift:
    """The shift of ``quantile`` (nearest rank) from the ``baseline`` variant's runs to the
    ``candidate``'s (one histogram per run, its CPUs merged), with a two-sided
    ``confidence`` interval (see the section comment for the model).

    ``costs`` / ``saves``: the interval excludes 0 and the shift reaches the tolerance
    ``max(tolerance_us, tolerance_relative * baseline)``; ``no measurable change``: the
    interval lies within ± the tolerance; else ``inconclusive``, with how much longer
    both variants would have to run (the runs' spread does not shrink with length: when
    it alone is too wide, more runs are needed, and the verdict says so). The interval is
    widened by the histogram's 1 µs bucket each way (both quantiles are known to their
    bucket only), which is why the tolerance is two buckets at least: a shift of one
    bucket can then still be shown to be none. A quantile that fewer than ``min_beyond``
    wake-ups of either variant lie beyond is not estimated at all: the verdict says how
    much longer the runs must be for it."""
    _check_bootstrap(quantile, confidence, resamples)
    runs_a, runs_b = list(baseline), list(candidate)
    if not runs_a or not runs_b:
        raise ValueError("each variant needs at least one run")
    range_us = min(h.range_us for h in (*runs_a, *runs_b))
    runs_a = [h.clipped(range_us) for h in runs_a]
    runs_b = [h.clipped(range_us) for h in runs_b]
    if any(h.samples == 0 for h in (*runs_a, *runs_b)):
        raise ValueError("a run without samples cannot be compared")
    merged_a, merged_b = Histogram.merged(runs_a), Histogram.merged(runs_b)
    q = Fraction(repr(float(quantile)))
    name = quantile_name(quantile)
    alpha = 1 - confidence
    qa, qb = merged_a.quantile(q), merged_b.quantile(q)
    tolerance = max(tolerance_us, tolerance_relative * _value(qa, range_us))
    common = {"quantile": float(quantile), "baseline_us": qa, "candidate_us": qb,
              "confidence": confidence, "tolerance_us": tolerance, "range_us": range_us,
              "baseline_runs": len(runs_a), "candidate_runs": len(runs_b),
              "samples": (merged_a.samples, merged_b.samples)}
    beyond = float(1 - q) * min(merged_a.samples, merged_b.samples)
    if beyond < min_beyond:
        longer = min_beyond / beyond
        return Shift(outcome=INCONCLUSIVE, shift_us=None, ci_us=None, longer=longer,
                     verdict=f"inconclusive: run {math.ceil(longer)}× longer (the {name} "
                             f"needs {min_beyond} wake-ups beyond it, the runs have "
                             f"{beyond:.0f})", **common)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    values, categories = _categories([merged_a, merged_b, *runs_a, *runs_b], q)
    probs_a, probs_b, *probs_runs = categories

    def bootstrap(hist: Histogram, probs: np.ndarray, count: int) -> np.ndarray:
        return _quantiles(rng.multinomial(hist.samples, probs, size=count),
                          np.full(count, hist.samples), q, values)

    rep_a, rep_b = bootstrap(merged_a, probs_a, resamples), bootstrap(merged_b, probs_b,
                                                                      resamples)
    warnings: list[str] = []
    factor_a: np.ndarray | float = 1.0
    factor_b: np.ndarray | float = 1.0
    dof = len(runs_a) + len(runs_b) - 2
    if dof >= 1:
        logs = [np.log(np.array([_value(h.quantile(q), range_us) for h in runs], float) + 0.5)
                for runs in (runs_a, runs_b)]
        pooled = sum(float(np.sum((x - x.mean()) ** 2)) for x in logs) / dof
        count = max(resamples // 4, 100)
        within = float(np.mean([np.var(np.log(bootstrap(h, probs, count) + 0.5))
                                for h, probs in zip((*runs_a, *runs_b), probs_runs,
                                                    strict=True)]))
        between = np.maximum(dof * pooled / rng.chisquare(dof, size=resamples) - within, 0.0)
        draws = rng.standard_normal((2, resamples))
        factor_a = np.exp(draws[0] * np.sqrt(between / len(runs_a)))
        factor_b = np.exp(draws[1] * np.sqrt(between / len(runs_b)))
    else:
        warnings.append("one run of each variant: their run-to-run spread is unknown, so "
                        "the interval allows for sampling noise only (repeat: 2 or more)")
    diffs = (rep_b + 0.5) * factor_b - (rep_a + 0.5) * factor_a
    low, high = (float(v) for v in np.quantile(diffs, [alpha / 2, 1 - alpha / 2]))
    # Both quantiles are known to their 1 µs bucket only (b means [b, b + 1)), so the true
    # shift lies within one bucket of the buckets' difference: a long run's bootstrap
    # that never leaves its buckets would otherwise claim the bucket grid's precision.
    low, high = low - BUCKET_US, high + BUCKET_US
    shift = float(_value(qb, range_us) - _value(qa, range_us))
    # a quantile past the range is only known to be >= range: the candidate's makes the
    # shift a lower bound (a cost can still be proven), the baseline's an upper bound
    censored_b = qb is None or float(np.mean(rep_b >= range_us)) > alpha / 2
    censored_a = qa is None or float(np.mean(rep_a >= range_us)) > alpha / 2
    ci = f"[{_plain(low)}, {_plain(high)}]"
    longer = None
    if low > 0 and shift >= tolerance and not censored_a:
        outcome, verdict = COSTS, f"costs {_plain(shift)} µs at {name} {ci}"
    elif high < 0 and -shift >= tolerance and not censored_b:
        outcome, verdict = SAVES, f"saves {_plain(-shift)} µs at {name} [{_plain(-high)}, " \
                                  f"{_plain(-low)}]"
    elif -tolerance <= low and high <= tolerance and not (censored_a or censored_b):
        outcome = NO_MEASURABLE_CHANGE
        verdict = (f"no measurable change at {name}: {_signed(shift)} µs {ci}, within "
                   f"±{_plain(tolerance)} µs")
    else:
        outcome = INCONCLUSIVE
        if censored_a or censored_b:
            verdict = (f"inconclusive: the {name} lies past the {range_us} µs histogram "
                       "range (rerun with a larger -h)")
        else:
            longer = _variants_longer(abs(shift), tolerance, (high - low) / 2 - BUCKET_US,
                                      float(np.var(rep_a) + np.var(rep_b)),
                                      float(np.var(diffs)))
            verdict = (f"inconclusive: run {math.ceil(longer)}× longer"
                       if math.isfinite(longer) else
                       "inconclusive: the runs differ more than the variants; measure more "
                       "runs of each (repeat), not longer ones")
            verdict += f" ({name} {_signed(shift)} µs {ci})"
    return Shift(outcome=outcome, shift_us=shift, ci_us=(low, high), longer=longer,
                 verdict=verdict, warnings=tuple(warnings), **common)


def _variants_longer(shift: float, tolerance: float, half: float, sampling_var: float,
                     total_var: float) -> float:
    """How many times longer both variants must run for the interval to settle the verdict
    if the shift stays (``shift`` >= 0; ``half``: the interval's half-width before the
    bucket's widening): only the sampling share of the variance shrinks, as 1/n. A cost
    needs the interval's low end above 0, no change its high end within the tolerance;
    as the bootstrap's quantiles settle on their buckets, half a bucket is the room a
    shift just inside the tolerance needs."""
    room = shift - BUCKET_US if shift >= tolerance else tolerance - shift - BUCKET_US / 2
    if room <= 0 or half <= 0 or sampling_var <= 0 or total_var <= 0:
        return math.inf
    allowed = total_var * (room / half) ** 2 - (total_var - sampling_var)
    if allowed <= 0:
        return math.inf
    return max(1.0, sampling_var / allowed)


@attr.frozen
class ExpectedMax:
    """A run's maximum beside what its tail says the maximum of that many wake-ups should
    be. The maximum of n wake-ups is itself random: with the fitted tail's exceedance
    probability p(x) per wake-up, P(max <= x) = (1 - p(x))^n. ``expected_us`` is its
    median, ``range_us`` the interval 95 % of runs of that length would show (its upper
    end at the fit's upper confidence limit, so that a tail the data know little about
    calls nothing an outlier). Shown alone, one wake-up far out reads like a property of
    the kernel; beside this, it reads as what it is."""

    observed_us: float | None
    samples: int
    expected_us: float | None
    range_us: tuple[float, float] | None
    chance: float | None
    """P(a run this long has a maximum at least the observed one), by the fit."""
    outlier: bool
    """The observed maximum lies above ``range_us`` and has under 1 % chance."""
    note: str

    @property
    def ci_us(self) -> tuple[float, float] | None:
        return self.range_us


# the share of runs of that length whose maximum lies below the range's ends
_MAX_RANGE = (0.025, 0.975)
OUTLIER_CHANCE = 0.01


def expected_max(hist: Histogram, *, confidence: float = 0.95) -> ExpectedMax:
    observed = hist.known_max_us
    n = hist.samples
    if n < 2:
        return ExpectedMax(observed, n, None, None, None, False, "no tail: too few wake-ups")
    # P(max <= x) = q  <=>  p(x) = 1 - q^(1/n)
    def level(q: float) -> float:
        return -math.expm1(math.log(q) / n)

    threshold = observed - 1 if observed is not None and observed >= 1 else None
    median = tail_estimate(hist, threshold, level(0.5), confidence=confidence)
    if median.bound_us is None:
        why = median.warnings[0] if median.warnings else "no fit"
        return ExpectedMax(observed, n, None, None, None, False, f"no tail estimate: {why}")
    low = tail_estimate(hist, None, level(_MAX_RANGE[0]), confidence=confidence)
    high = tail_estimate(hist, None, level(_MAX_RANGE[1]), confidence=confidence)
    assert low.bound_us is not None and high.bound_ci_us is not None
    span = (float(low.bound_us), float(high.bound_ci_us[1]))
    chance = None
    if median.probability is not None:
        chance = -math.expm1(n * math.log1p(-min(median.probability, 1 - 1e-16)))
    outlier = (observed is not None and observed > span[1]
               and chance is not None and chance < OUTLIER_CHANCE)
    shown = "∞" if math.isinf(span[1]) else f"{span[1]:.0f}"
    expected = (f"the tail expects {median.bound_us:.0f} µs ({span[0]:.0f}-{shown} in 95 % "
                f"of runs of {n:.3g} wake-ups)")
    if observed is None:
        note = f"max past the histogram; {expected}"
    elif outlier:
        note = (f"a single outlier: {expected}; a max of {observed:.0f} µs has a "
                f"{chance:.2g} chance")
    else:
        note = expected
    return ExpectedMax(observed, n, float(median.bound_us), span, chance, outlier, note)
