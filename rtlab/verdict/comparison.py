"""The regression test of a candidate run against its baseline runs: :func:`compare` (a
bootstrap of a tail quantile over the histograms' buckets, with the runs' spread as a
factor drawn from its fiducial distribution), :func:`compare_tail` (that quantile and the
decades above it, Bonferroni), the outcomes, and the resampling helpers
:mod:`rtlab.verdict.variants` shares. The model and its assumptions: docs/verdicts.md,
"The statistics behind the verdict"."""

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import attr
import numpy as np
from scipy.special import betainc

from rtlab.measure.cyclictest import nearest_rank
from rtlab.verdict.histogram import Histogram

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
    candidate_boots: int = 1,
    baseline_boots: Sequence[int] | None = None,
    candidate_runs: Sequence[Histogram] = (),
) -> Comparison:
    """Compare the ``quantile`` (nearest rank) of ``candidate`` with that of the baseline
    runs, merged, by a bootstrap of the difference with the runs' spread as a factor (see
    docs/verdicts.md, "The statistics behind the verdict"). ``regression``: the
    ``confidence`` interval lies above 0 and the difference exceeds the tolerance
    ``max(tolerance_us, tolerance_relative * baseline)``, so that an A/A comparison fails
    with probability (1 - confidence) / 2 at most; ``no change``: the interval lies below
    the tolerance, or below ``margin_relative * baseline`` where that is given and wider
    (an adaptive run's equivalence margin: the shift it need not tell from none,
    rtlab.verdict.sequential).
    Histograms of different ranges are compared at the smallest one.

    ``candidate_windows``: the windows the candidate was measured in so far (an adaptive
    run), each baseline run being ``baseline_windows`` such windows long. A run's minutes
    are not alike (a burst, a periodic job): a few of them vary more than the baseline's
    whole runs do, whose spread already holds that variation at their length. The
    windows' spread beyond their sampling noise, drawn from its fiducial distribution
    like the runs', enters the candidate as ``1 / w - 1 / baseline_windows`` of it.
    Without two windows that spread is unknown, and nothing is added: an adaptive run
    compares from several windows on (rtlab.verdict.sequential).

    ``candidate_boots``: the candidate is pooled from that many boots (a case measured on
    several boards at once, rtlab.run.pooling); ``baseline_boots``: the boots each
    baseline run pooled (default one each). The boot is a level of the comparison: each
    boot scales its latencies by an offset of its own, so a run pooled from ``b`` boots
    carries the mean of ``b`` offsets. The runs' spread is read as a per-boot spread
    (divided by the mean of ``1 / b`` over the runs), and the candidate's offset is drawn
    with a ``k``-th of it: k boots tell a kernel change from a boot better than one.

    ``candidate_runs``: the boards' own histograms when the candidate pools several (each
    a share of the baseline's run length). Part of the runs' spread is the hour's, not the
    boot's (how many burst minutes an hour holds): pooling does not divide it, and a
    board's share of the hour varies more than a whole hour does. The boards' own spread
    (its point estimate, each board a ``k``-th of the candidate) is therefore a floor
    under the candidate's: the pooled comparison is never surer than its boards agree
    (bench/rack_strength.py --calibrate)."""
    _check_bootstrap(quantile, confidence, resamples)
    runs = [baseline] if isinstance(baseline, Histogram) else list(baseline)
    if not runs:
        raise ValueError("the baseline has no runs")
    if not isinstance(candidate_boots, int) or candidate_boots < 1:
        raise ValueError(f"candidate_boots must be a whole number >= 1, got {candidate_boots!r}")
    boots = [1] * len(runs) if baseline_boots is None else list(baseline_boots)
    if len(boots) != len(runs) or any(not isinstance(b, int) or b < 1 for b in boots):
        raise ValueError(f"baseline_boots must give a whole number >= 1 for each of the "
                         f"{len(runs)} runs, got {boots}")
    # the spread of one boot's offset: a run pooled from b boots varies with 1/b of it
    per_boot = 1 / float(np.mean([1 / b for b in boots]))
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

    cand_rep = resampled_quantiles(cand.samples, probs_c, q, values, resamples, rng)
    # the baseline's sampling noise: a bootstrap of all its samples together; its runs'
    # spread comes in below, as factors
    probs_merged = np.sum([probs * size for probs, size in zip(probs_runs, sizes,
                                                              strict=True)], axis=0)
    base_rep = resampled_quantiles(total_size, probs_merged / total_size, q, values,
                                   resamples, rng)

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
        base_factor = _factor(draws[1] * np.sqrt(between / len(runs)))
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
                windows, probs_windows, q, window_values, range_us, resamples, rng)[0] * share
    # the candidate is one more run, with an offset of its own, and a few windows vary
    # more than a whole run
    boards_spread = 0.0
    boards = [h.clipped(range_us) for h in candidate_runs if h.samples]
    if len(boards) >= 2:
        board_values, probs_boards = _categories(boards, q)
        boards_spread = _between_run_variance(
            boards, probs_boards, q, board_values, range_us, resamples, rng)[1] / len(boards)
    if len(runs) < 2 and (windows or boards_spread):
        draws = rng.standard_normal((2, resamples))
    if len(runs) >= 2 or windows or boards_spread:
        cand_factor = _factor(draws[0] * np.sqrt(
            np.maximum(between * per_boot / candidate_boots, boards_spread) + within_run))
    unbounded = float(np.mean((np.abs(np.log(cand_factor)) >= MAX_LOG_FACTOR)
                              | (np.abs(np.log(base_factor)) >= MAX_LOG_FACTOR)))
    if unbounded > alpha / 2:
        warnings.append(f"the {len(runs)} baseline run(s) bound their run-to-run spread too "
                        f"loosely for this confidence ({unbounded:.1%} of the draws scale a "
                        f"run's latencies by more than e^{MAX_LOG_FACTOR:g}): the interval "
                        "says nothing; compare against more baseline runs")
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
        elif unbounded > alpha / 2:
            # no length of the candidate bounds the baseline's own spread
            longer = math.inf
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


# a run's latencies scaled by more than e^40 is no latency any more: the draws of a spread
# known to few degrees of freedom reach that (two runs: one), and exp() would overflow to
# inf, whose differences are NaN; capped, the interval is finite and says it is unbounded
MAX_LOG_FACTOR = 40.0


def _factor(log_factor: np.ndarray) -> np.ndarray:
    return np.exp(np.clip(log_factor, -MAX_LOG_FACTOR, MAX_LOG_FACTOR))


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
    # each quantile its own resamples: one draw shared by all would move them together
    seed = options.pop("seed", 0)
    streams = (np.random.SeedSequence(seed).spawn(len(quantiles)) if isinstance(seed, int)
               else [seed] * len(quantiles))
    results = [compare(candidate, runs, quantile=q, confidence=each,
                       seed=np.random.default_rng(stream) if isinstance(seed, int) else stream,
                       **options)
               for q, stream in zip(quantiles, streams, strict=True)]
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
                          rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Draws of the variance of log(quantile) between runs beyond their sampling noise.

    Run-to-run effects (clock, cache and memory placement) scale a run's latencies, so
    the spread is taken on the log scale, where a factor is a shift and its distribution
    is not skewed. N runs know their variance to N - 1 degrees of freedom only: taking
    the sample variance as exact (a normal interval) would fail a candidate far more
    often than alpha / 2 when N is small, so each replicate draws it from its fiducial
    distribution, ``(N-1) s^2 / chi2(N-1)``, which makes the interval a Student t one
    where the spread dominates. The runs' own sampling noise (the mean bootstrap
    variance of their log quantile, computed exactly: :func:`quantile_distribution`) is
    taken as known and subtracted. Also returns the point estimate.
    """
    logs = np.log(np.array([_value(h.quantile(q), range_us) for h in runs], dtype=float)
                  + 0.5)
    within = float(np.mean([log_quantile_variance(h.samples, probs, q, values)
                            for h, probs in zip(runs, probs_runs, strict=True)]))
    dof = len(runs) - 1
    variance = float(np.var(logs, ddof=1))
    total = dof * variance / rng.chisquare(dof, size=resamples)
    return np.maximum(total - within, 0.0), max(variance - within, 0.0)


def quantile_distribution(samples: int, probs: np.ndarray, q: Fraction) -> np.ndarray:
    """The bootstrap distribution of a histogram's nearest-rank ``q`` quantile, exactly:
    the probability that a resample of ``samples`` wake-ups (multinomial over the
    categories' ``probs``, in order of value) has its quantile in each category.

    The quantile lies at or below category j exactly when at least rank(q) of the
    resample fall in categories 0..j, a binomial count with the categories' cumulative
    probability: so no resample need be drawn, and the distribution costs the same for
    any number of wake-ups and of draws from it.
    """
    samples = int(samples)
    rank = nearest_rank(q, samples)
    cumulative = np.clip(np.cumsum(probs), 0.0, 1.0)
    cumulative[-1] = 1.0
    # P(binomial count >= rank) is the regularised incomplete beta function, in floats
    # that hold any count (scipy's bdtrc gives NaN past 2^31 wake-ups: a pooled
    # baseline of 20 four-board hours has 3e9); rising with j, a rounding wiggle never
    # makes it fall
    at_or_below = np.maximum.accumulate(betainc(float(rank), float(samples - rank + 1),
                                                cumulative))
    if not np.isfinite(at_or_below).all():
        raise ValueError(f"no bootstrap distribution of the {float(q)} quantile of "
                         f"{samples} wake-ups")
    return np.diff(at_or_below, prepend=0.0)


def resampled_quantiles(samples: int, probs: np.ndarray, q: Fraction, values: np.ndarray,
                        count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` bootstrap replicates of the ``q`` quantile (µs), drawn from
    :func:`quantile_distribution`: distributed exactly as the quantiles of ``count``
    multinomial resamples, at the cost of ``count`` uniform draws."""
    distribution = quantile_distribution(samples, probs, q)
    cumulative = np.cumsum(distribution)
    index = np.searchsorted(cumulative, rng.random(count) * cumulative[-1], side="right")
    return values[np.minimum(index, len(values) - 1)].astype(float)


def log_quantile_variance(samples: int, probs: np.ndarray, q: Fraction,
                          values: np.ndarray) -> float:
    """The bootstrap variance of log(quantile + 0.5 µs), exactly."""
    distribution = quantile_distribution(samples, probs, q)
    logs = np.log(values.astype(float) + 0.5)
    mean = float(distribution @ logs)
    return float(distribution @ (logs - mean) ** 2)


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
