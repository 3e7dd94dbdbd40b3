"""rtlab.verdict.histogram, .tail and .comparison: histograms, the GPD tail estimate and the
bootstrap regression test, on histograms drawn from known distributions (so the right answer
is known) and on the real cyclictest outputs of tests/data/cyclictest."""

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import special

from rtlab.measure.cyclictest import PERCENTILES, parse_json
from rtlab.verdict import tail
from rtlab.verdict.comparison import (
    INCONCLUSIVE,
    NO_CHANGE,
    REGRESSION,
    compare,
    compare_tail,
    quantile_name,
    tail_quantiles,
)
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.tail import tail_estimate

DATA = Path(__file__).resolve().parents[1] / "data" / "cyclictest"


def gpd_sf(y, shape, scale):
    y = np.maximum(y, 0.0)
    if shape == 0:
        return np.exp(-y / scale)
    return np.maximum(1 + shape * y / scale, 0.0) ** (-1 / shape)


def model_cdf(x, *, u0=20.0, zeta=0.03, shape=0.1, scale=3.0, stretch=1.0):
    """A normal body (mean 12 µs, sd 2) below u0, a GPD holding ``zeta`` above it; every
    latency times ``stretch`` (a slower run)."""
    y = np.asarray(x, dtype=float) / stretch
    body = special.ndtr((np.minimum(y, u0) - 12) / 2) / special.ndtr((u0 - 12) / 2)
    return np.where(y < u0, (1 - zeta) * body, 1 - zeta * gpd_sf(y - u0, shape, scale))


def draw(n, rng, range_us=400, **model):
    """A cyclictest -h histogram of n samples from the model, with its true max."""
    cdf = model_cdf(np.arange(range_us + 1), **model)
    probs = np.append(np.diff(cdf), 1 - cdf[-1])
    probs[0] += cdf[0]
    counts = rng.multinomial(n, probs / probs.sum())
    overflows = int(counts[-1])
    if overflows:
        # the largest overflow, by bisection on the CDF: F(max) = F(range) + (1-F(range)) U^(1/k)
        target = cdf[-1] + (1 - cdf[-1]) * rng.random() ** (1 / overflows)
        low, high = float(range_us), float(range_us)
        while model_cdf(high, **model) < target:
            high *= 2
        for _ in range(60):
            middle = (low + high) / 2
            low, high = (middle, high) if model_cdf(middle, **model) < target else (low, middle)
        max_us = float(math.floor(low))
    else:
        max_us = float(np.nonzero(counts[:-1])[0][-1])
    return Histogram(counts[:-1], overflows, max_us)


def true_quantile(q, **model):
    """The continuous model's q quantile, by bisection."""
    low, high = 0.0, 10_000.0
    for _ in range(80):
        middle = (low + high) / 2
        low, high = (middle, high) if model_cdf(middle, **model) < q else (low, middle)
    return low


def real_histograms():
    for path in sorted(DATA.glob("*.json")):
        if path.name.startswith("broken-"):
            continue
        result = parse_json(path.read_text(encoding="utf-8"), path.name)
        for cpu in result.cpus:
            if cpu.histogram is not None:
                yield path.name, cpu


# ------------------------------------------------------------------ histogram ----


def test_record_cpu_round_trip_keeps_every_figure():
    cpu = {"cpu": 1, "samples": 1010, "min_us": 3, "avg_us": 9.5, "max_us": 517,
           "overflows": 2, "histogram_range_us": 400,
           "histogram": {"3": 8, "9": 990, "17": 7, "399": 3}}
    hist = Histogram.from_record_cpu(cpu)
    assert hist.range_us == 400 and hist.samples == 1010 and hist.overflows == 2
    assert hist.counts[9] == 990 and hist.counts.sum() == 1008 and hist.max_us == 517
    back = hist.to_record_cpu()
    assert back == {key: cpu[key] for key in back}
    assert Histogram.from_record_cpu(back).counts.tolist() == hist.counts.tolist()


def test_record_cpu_without_histogram_or_with_wrong_total_is_refused():
    with pytest.raises(ValueError, match="no histogram"):
        Histogram.from_record_cpu({"samples": 10, "max_us": 5, "overflows": None})
    with pytest.raises(ValueError, match="samples 11 but"):
        Histogram.from_record_cpu({"samples": 11, "max_us": 5, "overflows": 0,
                                   "histogram_range_us": 10, "histogram": {"5": 10}})
    with pytest.raises(ValueError, match="bucket '10' outside"):
        Histogram.from_record_cpu({"overflows": 0, "histogram_range_us": 10,
                                   "histogram": {"10": 1}})
    with pytest.raises(ValueError, match="negative"):
        Histogram([1, -1, 2])


def test_counts_cannot_be_changed_behind_a_verdict():
    source = np.array([1, 2, 3])
    hist = Histogram(source, 0, 2)
    source[0] = 100
    assert hist.counts[0] == 1
    with pytest.raises(ValueError):
        hist.counts[0] = 5


@pytest.mark.parametrize("name, cpu", list(real_histograms()),
                         ids=lambda v: v if isinstance(v, str) else f"thread{v.thread}")
def test_quantiles_are_the_gates_percentiles_on_real_output(name, cpu):
    hist = Histogram.from_cpu_result(cpu)
    assert hist.samples == cpu.cycles
    assert hist.percentiles() == cpu.percentiles()
    for key, fraction in PERCENTILES.items():
        assert hist.quantile(fraction) == cpu.percentiles()[key].value_us
        assert hist.quantile(float(fraction)) == cpu.percentiles()[key].value_us


def test_quantile_by_nearest_rank_and_among_the_overflows():
    # 10 samples: 0 1 1 1 2 2 3 and three overflows at >= 4 µs
    hist = Histogram([1, 3, 2, 1], 3, 9)
    expanded = [0, 1, 1, 1, 2, 2, 3, None, None, None]
    for tenth in range(1, 11):
        assert hist.quantile(tenth / 10) == expanded[tenth - 1], tenth
    # 0.9 * 10 is 9 exactly: the float's binary excess must not take the 10th sample
    assert hist.quantile(0.7) == 3 and hist.quantile(0.71) is None
    assert quantile_name(0.999) == "p99.9" and quantile_name(0.9999) == "p99.99"


def test_merge_and_clip():
    a = Histogram([0, 5, 1, 0, 2], 0, None)
    b = Histogram([1, 1, 0, 0, 0, 4], 2, 30)
    merged = a.merge(b)
    # at the smaller range: b's bucket 5 becomes overflows
    assert merged.counts.tolist() == [1, 6, 1, 0, 2]
    assert merged.overflows == 6
    assert merged.samples == a.samples + b.samples
    # a's max is its top bucket, since nothing of it overflowed
    assert a.known_max_us == 4 and merged.max_us == 30
    assert Histogram.merged([a]).counts.tolist() == a.counts.tolist()
    clipped = b.clipped(2)
    assert (clipped.counts.tolist(), clipped.overflows, clipped.max_us) == ([1, 1], 6, 30)
    unknown = Histogram([1, 1], 3, None)
    assert unknown.known_max_us is None and a.merge(unknown).max_us is None


# ----------------------------------------------------------------- tail fit ----


def test_fit_recovers_shape_and_scale_of_a_binned_tail():
    rng = np.random.default_rng(11)
    hist = draw(2_000_000, rng, shape=0.2, scale=4.0)
    estimate = tail_estimate(hist, 150)
    u = estimate.pot_threshold_us
    assert u is not None and u > 20 and estimate.warnings == ()
    # above u the tail is still a GPD, with the scale grown by shape * (u - u0)
    assert estimate.shape == pytest.approx(0.2, abs=0.04)
    assert estimate.scale_us == pytest.approx(4.0 + 0.2 * (u - 20), rel=0.06)
    assert estimate.fit_p_value > 0.01


def test_the_likelihood_knows_the_buckets_are_1_us_wide():
    # a tail 1.2 µs wide: taking bucket numbers for exact values would make its scale
    # 0.77 µs; the interval-censored likelihood does not
    rng = np.random.default_rng(5)
    hist = draw(2_000_000, rng, shape=0.0, scale=1.2)
    estimate = tail_estimate(hist, 60)
    assert estimate.shape == pytest.approx(0.0, abs=0.04)
    assert estimate.scale_us == pytest.approx(1.2, rel=0.06)


def test_exceedance_probability_matches_the_empirical_rate():
    rng = np.random.default_rng(3)
    model = {"shape": 0.1, "scale": 3.0}
    hist = draw(20_000_000, rng, **model)
    # past the fit's threshold, with ~2000 samples above it: the empirical rate is exact
    # to a few %
    threshold = 44
    estimate = tail_estimate(hist, threshold, interval_us=500)
    empirical = (hist.counts[threshold + 1:].sum() + hist.overflows) / hist.samples
    true = 1 - float(model_cdf(threshold + 1, **model))
    assert threshold > estimate.pot_threshold_us
    assert empirical == pytest.approx(true, rel=0.08)
    assert estimate.probability == pytest.approx(empirical, rel=0.1)
    assert estimate.per_hour == pytest.approx(estimate.probability * 3.6e9 / 500)
    # the bound at 1e-6 and its interval bracket the model's 1 - 1e-6 quantile
    low, high = estimate.bound_ci_us
    assert low < true_quantile(1 - 1e-6, **model) < high
    assert low < estimate.bound_us < high


def test_the_bound_interval_is_wider_above_than_below_and_shrinks_with_data():
    rng = np.random.default_rng(8)
    # 1e-8: beyond both runs' wake-ups, so both bounds are the fit's
    short = tail_estimate(draw(100_000, rng), 150, 1e-8)
    long = tail_estimate(draw(10_000_000, rng), 150, 1e-8)
    for estimate in (short, long):
        assert estimate.bound_from == "gpd"
        low, high = estimate.bound_ci_us
        # a return level's profile interval is skewed towards heavier tails
        assert high - estimate.bound_us > estimate.bound_us - low > 0
    assert (long.bound_ci_us[1] - long.bound_ci_us[0]
            < (short.bound_ci_us[1] - short.bound_ci_us[0]) / 3)
    assert short.observed_max_us == short.observed_max_us


def test_a_profile_without_a_sign_change_widens_the_bound_interval(monkeypatch):
    """The profile's own shape search can miss its optimum and leave a bracket without a
    sign change (a real recording did: bench/early_pass_backtest.py). The interval then
    takes the bracket's outside end, wider, instead of raising."""
    rng = np.random.default_rng(8)
    hist = draw(100_000, rng)
    found = tail_estimate(hist, 150)

    def no_sign_change(*args, **kwargs):
        raise ValueError("f(a) and f(b) must have different signs")

    monkeypatch.setattr(tail.optimize, "brentq", no_sign_change)
    widened = tail_estimate(hist, 150)
    assert widened.bound_us == found.bound_us
    low, high = widened.bound_ci_us
    assert low <= found.bound_ci_us[0] and high >= found.bound_ci_us[1]
    assert low < widened.bound_us < high


def test_overflows_are_censored_at_the_range_not_dropped():
    # -h 26 keeps only the start of the tail: two in five of its samples overflow
    rng = np.random.default_rng(4)
    model = {"shape": 0.1, "scale": 3.0}
    hist = draw(1_000_000, rng, range_us=26, **model)
    estimate = tail_estimate(hist, 60)
    assert hist.overflows > 0.4 * estimate.tail_samples
    assert estimate.shape == pytest.approx(0.1, abs=0.05)
    true = 1 - float(model_cdf(61, **model))
    # three buckets and the max say less than the whole tail: a factor of 3 is the 90 %
    # spread of this estimate over seeds (against 0.8-1.2 with -h 400)
    assert true / 3 < estimate.probability < 3 * true
    assert estimate.bound_ci_us[0] < true_quantile(1 - 1e-6, **model) < estimate.bound_ci_us[1]
    # the same samples without their overflows look like a tail that ends at the range
    dropped = tail_estimate(Histogram(hist.counts, 0, None), 60)
    assert dropped.probability < true / 100


def test_a_tail_mostly_in_the_overflows_says_so():
    rng = np.random.default_rng(6)
    hist = draw(1_000_000, rng, range_us=25)
    estimate = tail_estimate(hist, 100)
    assert estimate.fitted
    assert any(f"{hist.overflows} of the {estimate.tail_samples} tail samples overflowed the "
               "25 µs histogram" in w for w in estimate.warnings)
    # one bucket in range and the overflows are too little to fit two parameters to
    coarse = tail_estimate(draw(1_000_000, rng, range_us=24), 100)
    assert not coarse.fitted
    assert coarse.warnings == ("the tail spans only 2 distinct latencies above 23 µs: too "
                               "coarse for a fit",)


def test_too_few_tail_samples_give_a_warning_and_no_estimate():
    rng = np.random.default_rng(1)
    estimate = tail_estimate(draw(3000, rng), 150, interval_us=1000)
    assert not estimate.fitted
    assert (estimate.probability, estimate.bound_us, estimate.bound_ci_us, estimate.per_hour,
            estimate.shape) == (None, None, None, None, None)
    (warning,) = estimate.warnings
    assert warning.startswith(f"too few tail samples ({estimate.tail_samples}) for a fit")
    assert estimate.samples == 3000 and estimate.observed_max_us is not None


def test_everything_past_the_range_gives_a_warning_and_no_estimate():
    hist = Histogram([0] * 5, 3000, 302)
    estimate = tail_estimate(hist, 150)
    assert not estimate.fitted and estimate.observed_max_us == 302
    assert estimate.warnings == ("the tail lies past the histogram range: 3000 of 3000 samples "
                                 "are >= 5 µs, so the 30 largest, which the fit starts from, "
                                 "all overflowed; rerun cyclictest with a larger -h",)


def test_a_second_mode_in_the_tail_is_a_poor_fit():
    rng = np.random.default_rng(2)
    hist = draw(1_000_000, rng, shape=0.0, scale=2.0)
    counts = hist.counts.copy()
    # 0.3 % of the wake-ups hit a second source of latency at 60-62 µs
    counts[60:63] += 1000
    estimate = tail_estimate(Histogram(counts, hist.overflows, hist.max_us), 150)
    assert estimate.fit_p_value < 0.01
    assert any(w.startswith("poor fit: the tail above") for w in estimate.warnings)
    assert not any(w.startswith("poor fit") for w in tail_estimate(hist, 150).warnings)


def test_a_heavy_tail_is_flagged():
    rng = np.random.default_rng(9)
    estimate = tail_estimate(draw(1_000_000, rng, range_us=1000, shape=0.7, scale=3.0), 150)
    assert estimate.shape > 0.5
    assert any(w.startswith("heavy tail (shape ξ = ") for w in estimate.warnings)


def test_a_bound_inside_the_data_is_the_empirical_quantile():
    rng = np.random.default_rng(12)
    hist = draw(1_000_000, rng)
    estimate = tail_estimate(hist, None, exceedance_probability=0.05)
    assert estimate.bound_us == hist.quantile(0.95)
    assert estimate.bound_ci_us[0] <= estimate.bound_us <= estimate.bound_ci_us[1]
    assert estimate.probability is None


def test_a_short_run_warns_how_far_the_bound_extrapolates():
    rng = np.random.default_rng(13)
    estimate = tail_estimate(draw(10_000, rng), 150)
    assert estimate.fitted
    assert "the bound extrapolates 100× beyond the run's 10000 samples" in estimate.warnings


def test_bad_arguments():
    hist = Histogram([1, 2], 0, 1)
    with pytest.raises(ValueError, match="exceedance_probability"):
        tail_estimate(hist, 10, 0)
    with pytest.raises(ValueError, match="quantile"):
        compare(hist, hist, quantile=1.0)
    with pytest.raises(ValueError, match="no runs"):
        compare(hist, [])


# ----------------------------------------------------------------- comparison ----


def runs(count, n, rng, stretches=None, **model):
    stretches = stretches or [1.0] * count
    return [draw(n, rng, stretch=s, **model) for s in stretches]


def test_a_clear_tail_regression_is_a_regression():
    rng = np.random.default_rng(21)
    baseline = runs(5, 1_000_000, rng)
    candidate = draw(1_000_000, rng, scale=6.0)
    verdict = compare(candidate, baseline)
    assert verdict.outcome == REGRESSION
    assert verdict.ci_us[0] > verdict.tolerance_us
    assert verdict.candidate_us - verdict.baseline_us == verdict.difference_us > 5
    assert verdict.message.startswith(f"regression: p99.9 {verdict.candidate_us} µs vs "
                                      f"baseline {verdict.baseline_us} µs (5 runs): +")
    assert verdict.longer is None and verdict.baseline_runs == 5


def test_a_a_comparison_is_no_change_and_reproducible():
    rng = np.random.default_rng(22)
    baseline = runs(5, 1_000_000, rng)
    candidate = draw(1_000_000, rng)
    verdict = compare(candidate, baseline, seed=3)
    assert verdict.outcome == NO_CHANGE
    assert verdict.ci_us[1] <= verdict.tolerance_us
    assert compare(candidate, baseline, seed=3) == verdict
    # an improvement is no regression either
    assert compare(draw(1_000_000, rng, scale=1.5), baseline).outcome == NO_CHANGE


def test_a_short_run_with_a_moderate_shift_is_inconclusive_and_says_how_much_longer():
    rng = np.random.default_rng(23)
    baseline = runs(5, 1_000_000, rng)
    candidate = draw(20_000, rng, scale=4.0)
    verdict = compare(candidate, baseline)
    assert verdict.outcome == INCONCLUSIVE
    assert verdict.longer is not None and 1 < verdict.longer < 1000
    assert verdict.message.startswith(
        f"inconclusive — run about {math.ceil(verdict.longer)}× longer: p99.9")
    # running that much longer does settle it
    longer = draw(math.ceil(verdict.longer * 2) * 20_000, rng, scale=4.0)
    assert compare(longer, baseline).outcome != INCONCLUSIVE


def test_run_to_run_spread_of_the_baseline_is_not_a_regression():
    # baseline runs differ by ±10 % in speed; the candidate is as fast as the slowest.
    # Sampling noise of 10^6 samples is far below that spread, so a bootstrap of one
    # merged baseline would call it a regression: the hierarchical one must not
    rng = np.random.default_rng(24)
    stretches = [0.9, 0.95, 1.0, 1.05, 1.1]
    baseline = runs(5, 1_000_000, rng, stretches)
    candidate = draw(1_000_000, rng, stretch=1.1)
    verdict = compare(candidate, baseline)
    assert verdict.outcome != REGRESSION
    assert verdict.run_spread_us > 1
    merged = compare(candidate, Histogram.merged(baseline))
    assert merged.outcome == REGRESSION
    assert merged.warnings == ("one baseline run: its run-to-run spread is unknown, so the "
                               "verdict allows for sampling noise only",)
    # and a regression well beyond the spread is still found
    assert compare(draw(1_000_000, rng, stretch=1.0, scale=7.0), baseline).outcome == REGRESSION


def test_a_candidate_quantile_past_the_range_can_still_be_a_regression():
    rng = np.random.default_rng(25)
    baseline = runs(5, 1_000_000, rng, range_us=60)
    candidate = draw(1_000_000, rng, range_us=60, scale=12.0)
    verdict = compare(candidate, baseline)
    assert verdict.candidate_us is None and verdict.baseline_us is not None
    assert verdict.outcome == REGRESSION
    assert verdict.message.startswith("regression: p99.9 >= 60 µs vs baseline")


def test_a_quantile_past_the_range_cannot_be_called_no_change():
    rng = np.random.default_rng(26)
    baseline = runs(5, 1_000_000, rng, range_us=28)
    candidate = draw(1_000_000, rng, range_us=28)
    verdict = compare(candidate, baseline)
    # both p99.9 lie past 28 µs: their difference is unknown, and a longer run won't tell
    assert verdict.candidate_us is None and verdict.baseline_us is None
    assert verdict.outcome == INCONCLUSIVE and verdict.longer is None
    assert "lies past the 28 µs histogram range" in verdict.warnings[-1]
    # the baseline past the range, the candidate well inside: the difference is at most
    # what the range says, and that is enough for no change
    better = compare(draw(1_000_000, rng, range_us=28, scale=0.5), baseline)
    assert better.candidate_us is not None and better.baseline_us is None
    assert better.outcome == NO_CHANGE


def test_different_ranges_are_compared_at_the_smaller_one():
    rng = np.random.default_rng(27)
    baseline = runs(5, 200_000, rng, range_us=400)
    candidate = draw(200_000, rng, range_us=100)
    verdict = compare(candidate, baseline)
    assert verdict.range_us == 100


def test_a_hundred_million_samples_per_cpu_cost_no_more_than_ten_thousand():
    # the histogram is never expanded: counts of 10^8 are resampled as multinomials
    rng = np.random.default_rng(28)
    big = [draw(100_000_000, rng) for _ in range(3)]
    estimate = tail_estimate(big[0], 150, interval_us=1000)
    assert estimate.fitted and estimate.samples == 100_000_000
    assert compare(big[0], big[1:]).outcome == NO_CHANGE
    assert big[0].quantile(Fraction(999, 1000)) == big[0].percentiles()["p99_9"].value_us


def test_a_spread_known_from_few_runs_is_not_taken_as_exact():
    # three baseline runs know their spread to 2 degrees of freedom: a candidate 4 of
    # their standard deviations out is within what such runs allow (Student t, not normal)
    rng = np.random.default_rng(29)
    candidate = draw(1_000_000, rng, stretch=1.12)
    few = compare(candidate, runs(3, 1_000_000, rng, [0.97, 1.0, 1.03]))
    assert few.outcome != REGRESSION and few.ci_us[0] < 0 < few.run_spread_us
    assert few.longer == math.inf
    # twenty runs of the same spread know it well enough to call it
    many = compare(candidate, runs(20, 1_000_000, rng, list(np.linspace(0.97, 1.03, 20))))
    assert many.outcome == REGRESSION and many.ci_us[0] > 0


def test_a_regression_needs_the_interval_above_zero_and_the_difference_beyond_the_tolerance():
    rng = np.random.default_rng(30)
    baseline = runs(5, 1_000_000, rng)
    # proven (the interval above 0) and larger than the tolerance, though the interval's
    # lower end is not: a regression
    verdict = compare(draw(1_000_000, rng, stretch=1.06), baseline)
    assert 0 < verdict.ci_us[0] < verdict.tolerance_us < verdict.difference_us
    assert verdict.outcome == REGRESSION
    # proven but within the tolerance: no change
    small = compare(draw(1_000_000, rng, stretch=1.04), baseline)
    assert 0 < small.difference_us < small.tolerance_us
    assert small.outcome == NO_CHANGE
    assert small.confidence == 0.98


def test_a_a_false_fails_stay_below_the_level_when_runs_differ_widely():
    # 12 % run-to-run spread of the latency scale against 4 baseline runs: a normal
    # interval around the runs' sample spread fails several percent of such candidates
    rng = np.random.default_rng(31)
    fails = 0
    for trial in range(150):
        stretches = np.exp(rng.normal(0, 0.12, 5))
        baseline = runs(4, 20_000, rng, list(stretches[:4]))
        candidate = draw(20_000, rng, stretch=float(stretches[4]))
        fails += compare(candidate, baseline, seed=trial, resamples=1000).outcome == REGRESSION
    assert fails <= 3


# ------------------------------------------------------- higher tail quantiles ----


def test_tail_quantiles_add_the_decades_every_run_is_long_enough_for():
    assert tail_quantiles(0.999, 10_000) == (0.999,)
    # p99.99 needs 100 wake-ups beyond it: 10^6 samples
    assert tail_quantiles(0.999, 999_999) == (0.999,)
    assert tail_quantiles(0.999, 1_000_000) == (0.999, 0.9999)
    assert tail_quantiles(0.999, 10**7) == (0.999, 0.9999, 0.99999)
    assert tail_quantiles(0.999, 10**9) == (0.999, 0.9999, 0.99999)
    assert tail_quantiles(0.999, 10**9, decades=0) == (0.999,)
    assert tail_quantiles(0.99, 10**5, min_beyond=10) == (0.99, 0.999, 0.9999)


def test_a_short_run_compares_one_quantile_as_compare_does():
    rng = np.random.default_rng(31)
    baseline = runs(5, 50_000, rng)
    candidate = draw(50_000, rng, scale=6.0)
    # the one quantile draws from the seed's first stream (each quantile has its own)
    stream = np.random.default_rng(np.random.SeedSequence(4).spawn(1)[0])
    assert compare_tail(candidate, baseline, seed=4) == compare(candidate, baseline,
                                                                seed=stream)


def test_a_wider_tail_hidden_at_p99_9_by_the_run_to_run_spread_is_found_further_out():
    # baseline runs differ by ±6 % in speed; the candidate's tail is 30 % wider. At
    # p99.9 that is within the spread; further out the tail has grown beyond it
    rng = np.random.default_rng(32)
    stretches = [0.94, 0.97, 1.0, 1.03, 1.06] * 2
    baseline = runs(10, 10**7, rng, stretches)
    candidate = draw(10**7, rng, stretch=1.03, scale=3.9)
    alone = compare(candidate, baseline)
    assert alone.outcome != REGRESSION, alone.message
    verdict = compare_tail(candidate, baseline)
    assert verdict.outcome == REGRESSION, verdict.message
    assert verdict.quantile > 0.999
    assert [q for q, _, _ in verdict.compared] == [0.999, 0.9999, 0.99999]
    # each quantile at its share of the confidence, so that all three together fail an
    # unchanged candidate no more often than one would
    assert verdict.confidence == pytest.approx(1 - 0.02 / 3)
    assert "[p99.9, p99.99, p99.999 compared, each at 99.33%; p99.9 " in verdict.message


def test_an_unchanged_long_run_is_no_change_at_every_quantile():
    rng = np.random.default_rng(33)
    baseline = runs(5, 10**7, rng)
    verdict = compare_tail(draw(10**7, rng), baseline)
    assert verdict.outcome == NO_CHANGE, verdict.message
    assert verdict.quantile == 0.999
    assert [q for q, _, _ in verdict.compared] == [0.999, 0.9999, 0.99999]
    outcomes = [outcome for _, outcome, _ in verdict.compared]
    assert REGRESSION not in outcomes
    # with 5 baseline runs the far quantiles are known too loosely to say no change here:
    # the verdict rests on p99.9, the quantile asked for
    assert INCONCLUSIVE in outcomes[1:], verdict.message


def test_no_change_rests_on_the_quantile_asked_for():
    # the baseline's p99.9 past the range: it cannot say no change, whatever the higher
    # quantiles say
    rng = np.random.default_rng(34)
    baseline = runs(5, 10**6, rng, range_us=28)
    verdict = compare_tail(draw(10**6, rng, range_us=28), baseline)
    assert verdict.outcome == INCONCLUSIVE, verdict.message


def test_two_baseline_runs_that_disagree_give_a_finite_interval_that_says_so():
    """Two runs know their spread to one degree of freedom: its fiducial draws reach
    factors past e^709, where exp() overflowed to inf and the interval became NaN
    ("CI +nan to +nan", "run about 1x longer")."""
    rng = np.random.default_rng(5)

    def run(scale: float) -> Histogram:
        values = np.minimum(rng.gamma(2.0, scale, 200_000).astype(int), 3999)
        return Histogram(np.bincount(values, minlength=4000))

    result = compare(run(10.0), [run(3.0), run(300.0)], quantile=0.99)
    assert all(math.isfinite(v) for v in result.ci_us), result.ci_us
    assert "nan" not in result.message
    assert result.outcome == INCONCLUSIVE and result.longer == math.inf
    assert any("bound their run-to-run spread too loosely" in w for w in result.warnings)
