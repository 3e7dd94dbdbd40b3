"""rtlab.verdict.variants.compare_variants (what a kernel variant costs against another, per
quantile, with its confidence interval) and expected_max (a run's maximum beside what its
tail expects), on histograms with a known answer: synthetic ones drawn from a known
distribution, and the recorded cyclictest histograms of tests/data/cyclictest shifted by a
known amount."""

import math
from pathlib import Path

import numpy as np
import pytest

from rtlab.measure.cyclictest import parse_json
from rtlab.verdict.comparison import INCONCLUSIVE, MIN_WAKEUPS_BEYOND
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.tail import expected_max
from rtlab.verdict.variants import COSTS, NO_MEASURABLE_CHANGE, SAVES, compare_variants

DATA = Path(__file__).resolve().parents[1] / "data" / "cyclictest"


def run(n: int, seed: int, *, shift_us: int = 0, range_us: int = 400,
        scale: float = 1.0) -> Histogram:
    """One run of ``n`` wake-ups: a normal body (12 µs, sd 2) and 3 % in a generalised
    Pareto tail above 20 µs (shape 0.1, scale 3 µs); every latency times ``scale`` (a
    slower boot) and plus ``shift_us`` (a variant that costs that much)."""
    rng = np.random.default_rng(seed)
    tail = rng.random(n) < 0.03
    body = rng.normal(12.0, 2.0, n)
    excess = 3.0 * (rng.random(n) ** -0.1 - 1) / 0.1
    latencies = np.where(tail, 20.0 + excess, np.clip(body, 0, 20)) * scale + shift_us
    buckets = np.floor(latencies).astype(int)
    inside = buckets[buckets < range_us]
    counts = np.bincount(inside, minlength=range_us)[:range_us]
    return Histogram(counts, int((buckets >= range_us).sum()), float(buckets.max()))


def runs(count: int, n: int, first_seed: int, **kwargs) -> list[Histogram]:
    return [run(n, first_seed + i, **kwargs) for i in range(count)]


def shifted(hist: Histogram, by: int) -> Histogram:
    """Every wake-up ``by`` µs later (what a variant that costs ``by`` µs would show)."""
    counts = np.concatenate([np.zeros(by, dtype=np.int64), hist.counts])
    moved = int(counts[hist.range_us:].sum())
    return Histogram(counts[:hist.range_us], hist.overflows + moved,
                     None if hist.max_us is None else hist.max_us + by)


def recorded() -> list[Histogram]:
    """Each CPU of the recorded host runs (idle and under CPU load, -h 400) as one run."""
    found = []
    for name in ("host-x86-idle-h400-3s.json", "host-x86-cpu-h400-3s.json"):
        result = parse_json((DATA / name).read_text(encoding="utf-8"), name)
        found += [Histogram.from_cpu_result(cpu) for cpu in result.cpus]
    return found


# ---------------------------------------------------------------- a known shift ----

@pytest.mark.parametrize("quantile", [0.99, 0.999])
def test_a_known_cost_is_found_with_an_interval_around_it(quantile):
    baseline = runs(3, 200_000, 1)
    candidate = runs(3, 200_000, 101, shift_us=15)
    shift = compare_variants(baseline, candidate, quantile=quantile)
    assert shift.outcome == COSTS
    low, high = shift.ci_us
    assert low <= 15 <= high
    assert abs(shift.shift_us - 15) <= 2
    name = "p99" if quantile == 0.99 else "p99.9"
    assert shift.verdict == f"costs {shift.shift_us:.0f} µs at {name} [{low:.0f}, {high:.0f}]"
    assert shift.warnings == ()


def test_the_same_shift_the_other_way_is_a_saving():
    baseline = runs(3, 200_000, 1, shift_us=15)
    candidate = runs(3, 200_000, 101)
    shift = compare_variants(baseline, candidate, quantile=0.99)
    assert shift.outcome == SAVES
    assert shift.verdict.startswith(f"saves {-shift.shift_us:.0f} µs at p99 [")
    assert shift.ci_us[1] < 0


def test_no_shift_is_no_measurable_change():
    shift = compare_variants(runs(3, 200_000, 1), runs(3, 200_000, 101), quantile=0.99)
    assert shift.outcome == NO_MEASURABLE_CHANGE
    assert -shift.tolerance_us <= shift.ci_us[0] <= shift.ci_us[1] <= shift.tolerance_us
    assert shift.verdict.startswith("no measurable change at p99: ")


def test_a_known_shift_of_recorded_histograms_is_found_and_none_is_not():
    """The recorded host runs (two CPUs idle, two under load: a spread a real campaign's
    runs would not have) against themselves moved by 30 µs, and against themselves."""
    baseline = recorded()
    cost = compare_variants(baseline, [shifted(h, 30) for h in baseline], quantile=0.99)
    assert cost.outcome == COSTS
    assert cost.shift_us == 30 and cost.ci_us[0] <= 30 <= cost.ci_us[1]
    same = compare_variants(baseline, baseline, quantile=0.99)
    # the same runs: a shift of 0 exactly, and nothing claimed
    assert same.shift_us == 0
    assert same.outcome in (NO_MEASURABLE_CHANGE, INCONCLUSIVE)
    assert same.outcome != COSTS and same.ci_us[0] <= 0 <= same.ci_us[1]


# -------------------------------------------------------------- inconclusive ----

def test_a_run_too_short_for_the_quantile_says_how_much_longer():
    # 4 runs of 20 000 wake-ups: 8 beyond each variant's p99.99, 100 needed
    shift = compare_variants(runs(2, 20_000, 1), runs(2, 20_000, 11), quantile=0.9999)
    assert shift.outcome == INCONCLUSIVE and shift.ci_us is None
    assert shift.longer == pytest.approx(MIN_WAKEUPS_BEYOND / (1e-4 * 40_000))
    assert shift.verdict.startswith("inconclusive: run 25× longer (the p99.99 needs 100 "
                                    "wake-ups beyond it, the runs have 4)")


def test_short_runs_are_asked_to_run_longer_and_that_settles_it():
    # 1 µs later at the p99 (about 25 µs): within the tolerance (two 1 µs buckets: the
    # quantiles are known to their bucket only), so the answer is "no measurable change",
    # which 15 000 wake-ups a variant cannot tell yet
    shift = compare_variants([run(15_000, 1)], [run(15_000, 11, shift_us=1)], quantile=0.99)
    assert shift.outcome == INCONCLUSIVE
    assert shift.longer is not None and math.isfinite(shift.longer) and shift.longer > 1
    times = math.ceil(shift.longer)
    assert shift.verdict.startswith(f"inconclusive: run {times}× longer (p99 +1.0 µs [")
    # as asked: each run that many times longer (the same kernels)
    longer = compare_variants([run(15_000 * times, 1)],
                              [run(15_000 * times, 11, shift_us=1)], quantile=0.99)
    assert longer.outcome == NO_MEASURABLE_CHANGE
    assert longer.ci_us[1] <= longer.tolerance_us


def test_runs_that_differ_more_than_the_variants_ask_for_more_runs():
    # boots that differ by ±15 % in scale: no length of run tells 1 µs from that
    baseline = [run(200_000, 1, scale=0.85), run(200_000, 2, scale=1.15)]
    candidate = [run(200_000, 3, scale=0.85, shift_us=1), run(200_000, 4, scale=1.15,
                                                                shift_us=1)]
    shift = compare_variants(baseline, candidate, quantile=0.99)
    assert shift.outcome == INCONCLUSIVE
    assert shift.longer == math.inf
    assert "measure more runs of each (repeat), not longer ones" in shift.verdict


def test_one_run_each_is_compared_and_says_the_spread_is_unknown():
    shift = compare_variants([run(200_000, 1)], [run(200_000, 2, shift_us=15)],
                             quantile=0.99)
    assert shift.outcome == COSTS
    assert shift.warnings == ("one run of each variant: their run-to-run spread is unknown, "
                              "so the interval allows for sampling noise only (repeat: 2 or "
                              "more)",)


def test_a_quantile_past_the_histogram_range():
    # the candidate's p99 lies past a 60 µs range: only ">= 60" is known of it, which
    # still proves a cost against a baseline far below; the other way round nothing is
    baseline = runs(2, 200_000, 1, range_us=60)
    candidate = runs(2, 200_000, 11, shift_us=80, range_us=60)
    cost = compare_variants(baseline, candidate, quantile=0.99)
    assert cost.candidate_us is None and cost.outcome == COSTS
    unknown = compare_variants(candidate, candidate, quantile=0.99)
    assert unknown.outcome == INCONCLUSIVE
    assert unknown.verdict == ("inconclusive: the p99 lies past the 60 µs histogram range "
                               "(rerun with a larger -h)")


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="each variant needs at least one run"):
        compare_variants([], [run(1000, 1)], quantile=0.99)
    with pytest.raises(ValueError, match="quantile must be in"):
        compare_variants([run(1000, 1)], [run(1000, 2)], quantile=1.0)


# ----------------------------------------------------------- the max, not alone ----

def test_a_maximum_within_the_tail_is_shown_with_what_the_tail_expects():
    hist = run(500_000, 5)
    seen = expected_max(hist)
    assert not seen.outlier
    low, high = seen.range_us
    assert low <= seen.expected_us <= high
    assert seen.note == (f"the tail expects {seen.expected_us:.0f} µs ({low:.0f}-{high:.0f} "
                         "in 95 % of runs of 5e+05 wake-ups)")


def test_the_expected_range_holds_the_maxima_of_runs_from_the_same_tail():
    """Runs of one distribution: their maxima fall in the range the tail gives for that
    many wake-ups about as often as it says (95 %), and none is called an outlier."""
    seen = [expected_max(run(200_000, seed)) for seed in range(20)]
    inside = sum(e.range_us[0] <= e.observed_us <= e.range_us[1] for e in seen)
    assert inside >= 17
    assert not any(e.outlier for e in seen)


def test_a_single_outlier_is_named_as_one():
    hist = run(500_000, 5)
    counts = hist.counts.copy()
    counts[350] += 1
    outlier = expected_max(Histogram(counts, hist.overflows, 350.0))
    assert outlier.outlier and outlier.observed_us == 350
    assert outlier.range_us[1] < 350 and outlier.chance < 0.01
    assert outlier.note.startswith("a single outlier: the tail expects ")
    assert outlier.note.endswith(f"a max of 350 µs has a {outlier.chance:.2g} chance")
