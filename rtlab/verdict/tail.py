"""The tail estimate of one CPU's histogram: the latency one wake-up exceeds with a small
probability, read from the wake-ups where they reach it (the empirical quantile and its
exact binomial interval), else extrapolated by a generalised Pareto fit (binned,
overflow-censored likelihood, profile-likelihood interval) from a threshold chosen where
the tail begins (:func:`_choose_threshold`); the probability of crossing a limit; and the
maximum a run of that length should have (:func:`expected_max`). The model and its
assumptions: docs/verdicts.md, "The statistics behind the verdict"."""

import math
from fractions import Fraction

import attr
import numpy as np
from scipy import optimize
from scipy import stats as sps

from rtlab.verdict.histogram import Histogram

DEFAULT_EXCEEDANCE_PROBABILITY = 1e-6
# the shapes a fit may take: below -0.5 the likelihood is irregular, and above 1.5 a tail
# is too heavy for any bound derived from it to mean anything
_SHAPE_BOUNDS = (-0.5, 1.5)
_US_PER_HOUR = 3.6e9
# the negative log-likelihood of parameters the data rule out, finite for the optimisers
_IMPOSSIBLE = 1e300
EMPIRICAL_REACH = 1.0
"""The wake-ups reach a probability p when n p is at least this: the quantile is then
among the measured wake-ups, and read there rather than extrapolated."""
THRESHOLD_FRACTIONS = (0.01, 0.005, 0.002, 0.001, 5e-4, 2e-4, 1e-4)
"""The tail shares tried as the fit's threshold, lowest threshold first: from the p99 (the
fixed threshold before, which lies in the body when the tail is rarer) upwards."""
THRESHOLD_COUNTS = (20_000, 10_000, 5_000, 2_000, 1_000, 500, 200)
"""The tail sample counts tried as well, so that the search goes on up where the shares
stop: a series' pooled history of 10^9 wake-ups puts every share of THRESHOLD_FRACTIONS
at the ``max_exceedances`` cap, one threshold in the body of a mixture of CPUs (each with
a tail of its own), whose fit the chi-square test rejects (the real civcode board's
history: p = 1e-54 at its top 20 000, accepted at its top 200)."""
THRESHOLD_FIT_P = 0.01
"""A threshold's fit is accepted when its chi-square test does not reject it at this level,
the level below which a fit is warned poor (the lowest accepted threshold is where the
tail begins)."""
HEAVY_SHAPE = 0.5
"""Above this shape a fit is warned heavy: its bound is unreliable."""
EMPIRICAL = "empirical"
GPD = "gpd"


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
    # where the bound comes from: the wake-ups themselves (``empirical``) or the fit (``gpd``)
    bound_from: str | None = None
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


def _candidates(hist: Histogram, min_exceedances: int,
                max_exceedances: int) -> list[tuple[int | None, int]]:
    """The thresholds tried, lowest first: each of THRESHOLD_FRACTIONS and
    THRESHOLD_COUNTS (those within the p99 and ``max_exceedances``) that leaves at least
    twice ``min_exceedances`` above it, each distinct, and at least the p99's."""
    found: dict[int | None, int] = {}
    ceiling = min(max(round(THRESHOLD_FRACTIONS[0] * hist.samples), 1), max_exceedances)
    targets = {min(max(round(fraction * hist.samples), 1), max_exceedances)
               for fraction in THRESHOLD_FRACTIONS}
    targets.update(count for count in THRESHOLD_COUNTS if count <= ceiling)
    for target in sorted(targets, reverse=True):
        if target < 2 * min_exceedances and found:
            break
        u, target = _pot_threshold(hist, target / hist.samples, max_exceedances)
        found.setdefault(u, target)
    if not found:
        u, target = _pot_threshold(hist, 0.01, max_exceedances)
        found[u] = target
    return sorted(found.items(), key=lambda item: (item[0] is None, item[0] or 0))


@attr.frozen
class _Fit:
    """One threshold's fit: its tail, the maximum-likelihood shape and scale, the
    likelihood's optimum and the chi-square p-value (None: too few to test)."""

    tail: _Tail
    shape: float
    scale: float
    best: float
    fit_p: float | None

    @property
    def accepted(self) -> bool:
        """Neither warned heavy nor at a shape limit, nor rejected by the chi-square test:
        a threshold in the body mixes the body's slope into the tail and reads it heavy."""
        inside = _SHAPE_BOUNDS[0] + 1e-3 < self.shape <= HEAVY_SHAPE
        return inside and (self.fit_p is None or self.fit_p >= THRESHOLD_FIT_P)


def _tail_above(hist: Histogram, u: int) -> _Tail:
    exceedances = int(hist.counts[u:].sum()) + hist.overflows
    (buckets,) = np.nonzero(hist.counts[u:])
    max_us = hist.known_max_us
    return _Tail(
        u=u, n=hist.samples, exceedances=exceedances, lower=buckets.astype(float),
        counts=hist.counts[u:][buckets].astype(float), overflow_at=float(hist.range_us - u),
        overflows=hist.overflows,
        max_at=(float(math.floor(max_us)) - u
                if hist.overflows and max_us is not None and max_us >= hist.range_us else None),
    )


def _fit_at(hist: Histogram, tail: _Tail) -> _Fit:
    shape, scale, best = _fit(tail)
    return _Fit(tail, shape, scale, best, _goodness_of_fit(tail, shape, scale, hist.range_us))


def _distinct(hist: Histogram, u: int) -> int:
    return int(np.count_nonzero(hist.counts[u:])) + (1 if hist.overflows else 0)


def tail_estimate(
    hist: Histogram,
    threshold_us: float | None,
    exceedance_probability: float = DEFAULT_EXCEEDANCE_PROBABILITY,
    *,
    interval_us: float | None = None,
    confidence: float = 0.95,
    tail_fraction: float | None = None,
    min_exceedances: int = 50,
    max_exceedances: int = 20_000,
    empirical: bool = True,
) -> TailEstimate:
    """Fit a GPD to the histogram's tail and estimate:

    * ``probability``: that one wake-up's latency is above ``threshold_us`` (reported in
      whole µs as cyclictest does, so above means ``>= floor(threshold_us) + 1``), and
      ``per_hour``: how often that happens in an hour of wake-ups every ``interval_us``;
    * ``bound_us``: the latency one wake-up exceeds with ``exceedance_probability``, with
      an interval at ``confidence``. Where the wake-ups reach that probability (``n p >=
      EMPIRICAL_REACH``) it is their quantile with the exact binomial interval of the order
      statistics; beyond them the fit's, with its profile-likelihood interval.

    The fit's threshold is where the tail begins: the lowest of the shares
    THRESHOLD_FRACTIONS and counts THRESHOLD_COUNTS whose fit the chi-square test accepts
    (the best-fitting one with a warning where none is); ``tail_fraction`` fixes it
    instead (the sample that many from the top, at most ``max_exceedances``).
    ``empirical=False``: the fit's bound even where the wake-ups reach p
    (bench/tail_fit_real.py compares the two).
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
    candidates = ([_pot_threshold(hist, tail_fraction, max_exceedances)]
                  if tail_fraction is not None
                  else _candidates(hist, min_exceedances, max_exceedances))
    usable = [(u, target) for u, target in candidates if u is not None]
    if not usable:
        target = candidates[0][1]
        return attr.evolve(base, warnings=(
            f"the tail lies past the histogram range: {hist.overflows} of {n} samples are "
            f">= {hist.range_us} µs, so the {target} largest, which the fit starts from, "
            "all overflowed; rerun cyclictest with a larger -h",))
    fits: list[_Fit] = []
    refused: TailEstimate | None = None
    for u, _ in usable:
        assert u is not None
        tail = _tail_above(hist, u)
        if tail.exceedances < min_exceedances:
            refused = refused or attr.evolve(
                base, pot_threshold_us=u, tail_samples=tail.exceedances, warnings=(
                    f"too few tail samples ({tail.exceedances}) for a fit: {min_exceedances} "
                    f"needed at or above the {u} µs threshold; run longer",))
            continue
        distinct = _distinct(hist, u)
        if distinct < 3:
            refused = refused or attr.evolve(
                base, pot_threshold_us=u, tail_samples=tail.exceedances, warnings=(
                    f"the tail spans only {distinct} distinct latencies above {u} µs: too "
                    "coarse for a fit",))
            continue
        fit = _fit_at(hist, tail)
        fits.append(fit)
        if fit.accepted:
            break
    if not fits:
        assert refused is not None
        return refused
    chosen = next((f for f in fits if f.accepted), None)
    if chosen is None:
        chosen = max(fits, key=lambda f: -1.0 if f.fit_p is None else f.fit_p)
    tail, shape, scale, best, fit_p = (chosen.tail, chosen.shape, chosen.scale, chosen.best,
                                       chosen.fit_p)
    u, exceedances = tail.u, tail.exceedances
    warnings: list[str] = []
    if hist.overflows * 2 > exceedances:
        warnings.append(f"{hist.overflows} of the {exceedances} tail samples overflowed the "
                        f"{hist.range_us} µs histogram: the fit rests mostly on censored data;"
                        " rerun with a larger -h")
    if shape >= _SHAPE_BOUNDS[1] - 1e-3 or shape <= _SHAPE_BOUNDS[0] + 1e-3:
        warnings.append(f"the shape hit its limit (ξ = {shape:.2f}): the fit is unreliable")
    elif shape > HEAVY_SHAPE:
        warnings.append(f"heavy tail (shape ξ = {shape:.2f} > {HEAVY_SHAPE:g}): the bound is "
                        "unreliable")
    if fit_p is not None and fit_p < THRESHOLD_FIT_P:
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
    reached = (_empirical_bound(hist, p, confidence)
               if (empirical and n * p >= EMPIRICAL_REACH) or p >= rate else None)
    if reached is not None and math.isfinite(reached[1][0]):
        # the wake-ups reach p: their own quantile, whatever the fit says (unless it lies
        # past the histogram's range, where only the censored fit says anything)
        bound, interval = reached
        bound_from = EMPIRICAL
    else:
        bound_from = GPD
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
        bound_from=bound_from, fit_p_value=fit_p, warnings=tuple(warnings),
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

    def crossing(inside: float, outside: float) -> float:
        """Where the profile crosses the limit between a bound inside the interval and one
        outside; the outside end where the profile's own optimisation left no sign change
        between them (a shape the bounded search missed): wider, never narrower."""
        try:
            return float(optimize.brentq(profile, inside, outside, xtol=1e-3 * excess))
        except ValueError:
            return outside

    low_end = excess * 1e-6
    low = crossing(excess, low_end) if profile(low_end) > 0 else low_end
    high = math.inf
    step = excess
    for _ in range(40):
        if profile(excess + step) > 0:
            high = crossing(excess + step / 2 if step > excess else excess, excess + step)
            break
        step *= 2
    return (tail.u + low, tail.u + high)


def _empirical_bound(hist: Histogram, p: float, confidence: float) -> tuple[float,
                                                                         tuple[float, float]]:
    """The nearest-rank quantile 1 - p, and the order statistics that bracket it with
    ``confidence``, exactly: the count of wake-ups above the true quantile is binomial
    (n, p), so the j-th largest lies above it with P(count >= j); overflows read as inf,
    and an upper limit past the largest wake-up is inf (the data cannot bound it)."""
    n = hist.samples
    alpha = 1 - confidence
    # the j-th largest is the ((n - j + 1) / n) quantile
    def largest(j: int) -> float:
        if j < 1:
            return math.inf
        bucket = hist.quantile(Fraction(max(n - j + 1, 1), n))
        return math.inf if bucket is None else float(bucket)

    # lower: P(j-th largest <= true) = P(count <= j - 1) >= 1 - alpha / 2
    low_rank = int(sps.binom.ppf(1 - alpha / 2, n, p)) + 1
    # upper: P(i-th largest >= true) = P(count >= i) >= 1 - alpha / 2
    high_rank = int(sps.binom.ppf(alpha / 2, n, p))
    centre = hist.quantile(Fraction(min(max(math.ceil(n * (1 - p)), 1), n), n))
    return (math.inf if centre is None else float(centre),
            (largest(low_rank), largest(high_rank)))


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
    # what the fitted tail says of a run's maximum, not the wake-ups' own quantiles (the
    # range's lower end lies among them)
    median = tail_estimate(hist, threshold, level(0.5), confidence=confidence,
                           empirical=False)
    if median.bound_us is None:
        why = median.warnings[0] if median.warnings else "no fit"
        return ExpectedMax(observed, n, None, None, None, False, f"no tail estimate: {why}")
    low = tail_estimate(hist, None, level(_MAX_RANGE[0]), confidence=confidence,
                        empirical=False)
    high = tail_estimate(hist, None, level(_MAX_RANGE[1]), confidence=confidence,
                         empirical=False)
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
