"""The bootstrap distribution of a tail quantile, computed exactly
(rtlab.verdict.comparison.quantile_distribution), against the multinomial resampling it
replaces: on shapes it was not built on (a smooth body, a burst, one noisy CPU's
histogram merged in, a rare mode sitting right at the quantile, the real Raspberry Pi
recording), the exact distribution and a brute-force bootstrap agree within the brute
force's own sampling error, and so do the replicates drawn from it and the variance of
their logarithm. Would fail if the rank, the binomial tail or the category order were off
by one."""

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from rtlab.verdict.comparison import (
    _categories,
    log_quantile_variance,
    quantile_distribution,
    resampled_quantiles,
)
from rtlab.verdict.histogram import Histogram
from tests.unit.test_error_budget import REAL, _real_cpu_histograms

RANGE = 400
DRAWS = 20_000


def _shape(name: str, rng: np.random.Generator) -> Histogram:
    buckets = np.arange(RANGE)
    body = np.exp(-((buckets - 20) / 4.0) ** 2)
    if name == "body":
        probs = body
    elif name == "burst":
        # a burst: 2 % of the wake-ups 30-40 µs later
        probs = body + 0.02 * np.exp(-((buckets - 55) / 3.0) ** 2)
    elif name == "noisy-cpu":
        # three quiet CPUs merged with one whose tail is ten times heavier
        probs = body + 1e-3 * np.exp(-(buckets - 20) / 25.0) * (buckets >= 20)
    elif name == "rare-mode":
        # a mode of 1e-3 of the wake-ups at 150 µs: right at p99.9
        probs = body.copy()
        probs = probs / probs.sum() * (1 - 1e-3)
        probs[150] += 1e-3
    else:
        raise ValueError(name)
    samples = 20_000 if name == "rare-mode" else 200_000
    counts = rng.multinomial(samples, probs / probs.sum())
    return Histogram(counts[:RANGE].astype(np.int64), 0)


def _brute_force(hist: Histogram, probs: np.ndarray, q: Fraction, values: np.ndarray,
                 rng: np.random.Generator) -> np.ndarray:
    """The category index of the quantile of each of DRAWS multinomial resamples, as
    the comparison computed it before."""
    resampled = rng.multinomial(hist.samples, probs, size=DRAWS)
    rank = int(np.ceil(q * hist.samples))
    return (np.cumsum(resampled, axis=1) < rank).sum(axis=1)


@pytest.mark.parametrize("name", ["body", "burst", "noisy-cpu", "rare-mode", "real"])
@pytest.mark.parametrize("quantile", [Fraction(999, 1000), Fraction(9999, 10000)])
def test_the_exact_distribution_is_the_bootstraps(name, quantile):
    rng = np.random.default_rng(7)
    # the real one: civcode's 4-core board, 11 M wake-ups of one CPU
    hist = (_real_cpu_histograms(REAL)[1] if name == "real" else _shape(name, rng))
    values, (probs,) = _categories([hist], quantile)
    exact = quantile_distribution(hist.samples, probs, quantile)
    assert exact.min() >= 0 and exact.sum() == pytest.approx(1.0, abs=1e-9)
    index = _brute_force(hist, probs, quantile, values, rng)
    observed = np.bincount(index, minlength=len(values)) / DRAWS
    # every category's share within 5 binomial standard errors (and one draw)
    tolerance = 5 * np.sqrt(exact * (1 - exact) / DRAWS) + 1 / DRAWS
    assert np.all(np.abs(observed - exact) <= tolerance), (observed, exact)
    # a chi-square test of the brute force against it, over the categories it can reach
    reach = exact * DRAWS >= 5
    if reach.sum() >= 2:
        counts = np.bincount(index, minlength=len(values))
        expected = exact[reach] / exact[reach].sum() * counts[reach].sum()
        assert stats.chisquare(counts[reach], expected).pvalue > 1e-4
    # the replicates drawn from it, and the variance of their logarithm
    drawn = resampled_quantiles(hist.samples, probs, quantile, values, DRAWS, rng)
    brute = values[index].astype(float)
    assert stats.ks_2samp(drawn, brute).pvalue > 1e-4
    variance = log_quantile_variance(hist.samples, probs, quantile, values)
    mc = float(np.var(np.log(brute + 0.5)))
    # the brute force's variance estimate is off by about sqrt(2 / DRAWS) of itself
    assert variance == pytest.approx(mc, rel=0.1, abs=1e-6)


def test_a_histogram_whose_quantile_cannot_move():
    hist = Histogram(np.array([0, 0, 1000, 0], dtype=np.int64), 0)
    values, (probs,) = _categories([hist], Fraction(999, 1000))
    exact = quantile_distribution(hist.samples, probs, Fraction(999, 1000))
    assert values[np.argmax(exact)] == 2 and exact.max() == pytest.approx(1.0)
    assert log_quantile_variance(hist.samples, probs, Fraction(999, 1000), values) == \
        pytest.approx(0.0, abs=1e-12)


def test_a_pooled_baseline_of_billions_of_wake_ups():
    """Twenty four-board hours at 100 µs pool 3e9 wake-ups, past the 2^31 where scipy's
    binomial tail gives NaN: the distribution is still the bootstrap's (it was NaN, and
    every replicate the top of the quantile's band, which hid regressions from the
    gate)."""
    rng = np.random.default_rng(3)
    buckets = np.arange(RANGE)
    probs = np.exp(-((buckets - 20) / 4.0) ** 2) + 3e-3 * np.exp(-(buckets - 20) / 8.0) * (
        buckets >= 20)
    samples = 20 * 144_000_000
    hist = Histogram(rng.multinomial(samples, probs / probs.sum()).astype(np.int64), 0)
    assert hist.samples > 2**31
    quantile = Fraction(999, 1000)
    values, (category_probs,) = _categories([hist], quantile)
    exact = quantile_distribution(hist.samples, category_probs, quantile)
    assert np.isfinite(exact).all() and exact.sum() == pytest.approx(1.0, abs=1e-9)
    index = _brute_force(hist, category_probs, quantile, values, rng)
    observed = np.bincount(index, minlength=len(values)) / DRAWS
    tolerance = 5 * np.sqrt(exact * (1 - exact) / DRAWS) + 1 / DRAWS
    assert np.all(np.abs(observed - exact) <= tolerance), (observed, exact)
    drawn = resampled_quantiles(hist.samples, category_probs, quantile, values, DRAWS, rng)
    # the replicates sit at the histogram's own quantile, not at the top of its band
    assert abs(float(np.median(drawn)) - hist.quantile(quantile)) <= 1
