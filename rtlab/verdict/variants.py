"""What a kernel variant costs against another (a campaign's question):
:func:`compare_variants` gives the shift of a tail quantile between two sets of runs with
its interval, as :class:`Shift` (``costs``, ``saves``, ``no measurable change``,
``inconclusive``). The model is that of :mod:`rtlab.verdict.comparison`, made symmetric
(the comment below; docs/verdicts.md, "The statistics behind the verdict")."""

import math
from collections.abc import Sequence
from fractions import Fraction

import attr
import numpy as np

from rtlab.verdict.comparison import (
    INCONCLUSIVE,
    MIN_WAKEUPS_BEYOND,
    _categories,
    _check_bootstrap,
    _value,
    log_quantile_variance,
    quantile_name,
    resampled_quantiles,
)
from rtlab.verdict.histogram import Histogram

# A campaign asks what a kernel variant costs against another, per load: the shift of
# each tail quantile, candidate minus baseline, with its confidence interval. It is the
# regression test of rtlab.verdict.comparison made symmetric: each variant is a set of
# runs (fresh boots), the sampling noise of each comes from a multinomial bootstrap of its
# runs' merged histogram, and the run-to-run spread from the runs' log quantiles, pooled
# over both variants (each around its own mean: a shift between them is what is measured,
# not spread) with N_a + N_b - 2 degrees of freedom, each replicate drawing the variance
# from its fiducial distribution and each variant's mean carrying 1/N of it. Why not a plain
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
    ``confidence`` interval (see the comment at the top of this module for the model).

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
        return resampled_quantiles(hist.samples, probs, q, values, count, rng)

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
        within = float(np.mean([log_quantile_variance(h.samples, probs, q, values)
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
