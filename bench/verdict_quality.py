"""How good is the statistical regression verdict (rtlab.verdict.comparison.compare_tail) next to a
gate on the single worst wake-up?

For each latency source and run length (samples per CPU) it prints:

* the A/A false-fail rate of ``compare_tail`` (candidate and a 20-run baseline from the
  same source: every "regression" is false) and its detection rate for an injected tail
  regression (the tail's scale × 1.3 and × 1.5). It compares p99.9 and, where every run
  has 100 wake-ups beyond them, p99.99 and p99.999;
* the same for a single-max gate: fail when the candidate's max exceeds the baseline's
  max-of-maxes × a margin. The margin is calibrated on simulated A/A runs to give 1 %
  false fails at each length, which is more than a real max gate gets (it would need
  that calibration for every board and length);
* the shortest run length at which each method has ≥ 95 % detection with ≤ 1 % false
  fails, and their ratio (the target: the max gate needs ≥ 10× longer);
* what an ideal test of each single quantile would detect (every run's exact quantile,
  the spread known): the ceiling the run-to-run spread sets, whatever the run length;
* the A/A false fails of ``compare_tail`` when runs differ more than in the sources (the
  latency scale's sd 6 %, 10 % and 20 %): a false-fail rate that holds only at the
  spread the sources happen to have would not hold on a noisier board.

Sources: two synthetic RT-board-like latency distributions (a lognormal body around
15-20 µs, a generalised Pareto tail for the top 3 %) and two recorded cyclictest
histograms of tests/data/cyclictest (their body as recorded, their tail above the 95th
percentile the GPD that rtlab.verdict.tail fits to it, since 3000 samples say nothing about
10^-6). The recordings of the emulated boards are left out: their p99.9 lies past the
400 µs range, where compare_tail() is inconclusive by design. Every run varies: the whole
latency scale by a lognormal factor (3 % sd) and the tail's weight by 10 % sd, so that
run-to-run spread is part of every comparison; the last source is the first without it,
to show what that spread costs. Runs are histograms of ``cyclictest -h 400`` drawn as
multinomials from the bucket probabilities (with the max drawn for the overflows), the
max gate's maxima exactly (the max of n samples from the model), so run lengths cost
nothing.

    .venv/bin/python bench/verdict_quality.py [--quick] [--baseline-runs N] [--quantile Q]
                                              [--decades D]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
import time
from collections.abc import Callable
from pathlib import Path

import attr
import numpy as np
from scipy import special
from scipy import stats as sps

from rtlab.measure.cyclictest import parse_json
from rtlab.verdict.comparison import (
    REGRESSION,
    TAIL_DECADES,
    compare_tail,
    quantile_name,
    tail_quantiles,
)
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.tail import tail_estimate

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "cyclictest"
RANGE_US = 400
BASELINE_RUNS = 20
QUANTILE = 0.999
DECADES = TAIL_DECADES
SPREADS = (0.06, 0.10, 0.20)
SPREAD_LENGTH = 10**6
RUN_SCALE_SD = 0.03
RUN_TAIL_WEIGHT_SD = 0.10
REGRESSIONS = (1.3, 1.5)
COMPARE_LENGTHS = (10**4, 10**5, 10**6, 10**7, 10**8)
MAX_LENGTHS = tuple(10**k for k in range(4, 14))
TARGET_FALSE_FAILS = 0.01
TARGET_DETECTION = 0.95


def gpd_log_sf(y: np.ndarray, shape: float, scale: np.ndarray | float) -> np.ndarray:
    y = np.maximum(y, 0.0)
    if abs(shape) < 1e-9:
        return -y / scale
    z = np.maximum(1 + shape * y / scale, 1e-300)
    return -np.log(z) / shape


def gpd_isf(s: np.ndarray, shape: float, scale: np.ndarray | float) -> np.ndarray:
    if abs(shape) < 1e-9:
        return -scale * np.log(s)
    return scale * np.expm1(-shape * np.log(s)) / shape


@attr.frozen
class Model:
    """A latency distribution: ``body_cdf`` below ``u0`` (1 at u0), a GPD above it that
    holds ``zeta`` of the samples."""

    name: str
    body_cdf: Callable[[np.ndarray], np.ndarray]
    body_ppf: Callable[[np.ndarray], np.ndarray]
    u0: float
    zeta: float
    shape: float
    scale: float
    # run-to-run variation: sd of the latency scale's and the tail weight's log
    scale_sd: float = RUN_SCALE_SD
    weight_sd: float = RUN_TAIL_WEIGHT_SD

    def cdf(self, x: np.ndarray, scale: float, weight: float, tail: float) -> np.ndarray:
        y = np.asarray(x, dtype=float) / scale
        zeta = min(self.zeta * weight, 0.5)
        body = (1 - zeta) * self.body_cdf(np.minimum(y, self.u0))
        upper = 1 - zeta * np.exp(gpd_log_sf(y - self.u0, self.shape, self.scale * tail))
        return np.where(y < self.u0, body, upper)

    def histogram(self, n: int, rng: np.random.Generator, tail: float = 1.0) -> Histogram:
        scale, weight = self.run_variation(rng, 1)
        return self.run_histogram(n, rng, float(scale[0]), float(weight[0]), tail)

    def run_histogram(self, n: int, rng: np.random.Generator, scale: float, weight: float,
                      tail: float = 1.0) -> Histogram:
        """n samples of one run, whose variation (``scale``, ``weight``) is given: the
        windows of one run share it."""
        cdf = self.cdf(np.arange(RANGE_US + 1), scale, weight, tail)
        probs = np.append(np.diff(cdf), 1 - cdf[-1])
        probs[0] += cdf[0]
        counts = rng.multinomial(n, np.maximum(probs, 0) / np.maximum(probs, 0).sum())
        overflows = int(counts[-1])
        if overflows:
            # the largest of the overflows: S(max) = S(range) * (1 - U^(1/k))
            beyond = 1 - cdf[-1]
            s = beyond * -np.expm1(np.log(rng.random()) / overflows)
            max_us = float(math.floor(self.quantile_sf(np.array([s]), scale, weight, tail)[0]))
        else:
            max_us = float(np.nonzero(counts[:-1])[0][-1])
        return Histogram(counts[:-1], overflows, max_us)

    def quantile_sf(self, s: np.ndarray, scale: np.ndarray | float,
                    weight: np.ndarray | float, tail: float) -> np.ndarray:
        """The latency exceeded with probability ``s`` (per run parameters)."""
        zeta = np.minimum(self.zeta * weight, 0.5)
        in_tail = s < zeta
        y = np.where(
            in_tail,
            self.u0 + gpd_isf(np.where(in_tail, s / zeta, 0.5), self.shape, self.scale * tail),
            self.body_ppf(np.clip((1 - s) / (1 - zeta), 0, 1)),
        )
        return y * scale

    def maxima(self, n: int, trials: int, rng: np.random.Generator,
               tail: float = 1.0) -> np.ndarray:
        """The max of n samples, exactly, for ``trials`` runs (each its own variation)."""
        scale, weight = self.run_variation(rng, trials)
        s = -np.expm1(np.log(rng.random(trials)) / n)
        return np.floor(self.quantile_sf(s, scale, weight, tail))

    def run_variation(self, rng: np.random.Generator,
                      size: int) -> tuple[np.ndarray, np.ndarray]:
        return (np.exp(rng.normal(0, self.scale_sd, size)),
                np.exp(rng.normal(0, self.weight_sd, size)))


def synthetic(name: str, median: float, spread: float, zeta: float, shape: float,
              scale: float) -> Model:
    """A lognormal body up to its 1 - zeta quantile, a GPD tail from there."""
    body = sps.lognorm(spread, scale=median)
    u0 = float(body.ppf(1 - zeta))
    top = 1 - zeta

    def body_cdf(x: np.ndarray) -> np.ndarray:
        return np.minimum(special.ndtr(np.log(np.maximum(x, 1e-9) / median) / spread) / top, 1)

    def body_ppf(p: np.ndarray) -> np.ndarray:
        return median * np.exp(spread * special.ndtri(np.clip(p * top, 1e-300, top)))

    return Model(name, body_cdf, body_ppf, u0, zeta, shape, scale)


def recorded(name: str, file: str, thread: int) -> Model:
    """The recorded histogram below its 95th percentile, and the GPD rtlab.verdict.tail fits to
    its top 5 % above it."""
    result = parse_json((DATA / file).read_text(encoding="utf-8"), file)
    return histogram_model(name, Histogram.from_cpu_result(result.cpus[thread]), 0.05,
                           f"{file} thread {thread}")


def histogram_model(name: str, hist: Histogram, tail_fraction: float,
                    source: str | None = None) -> Model:
    """A histogram's body as recorded below the tail fit's threshold, and the GPD that
    rtlab.verdict.tail fits to its top ``tail_fraction`` above it."""
    fit = tail_estimate(hist, None, tail_fraction=tail_fraction)
    if not fit.fitted or fit.pot_threshold_us is None or fit.scale_us is None:
        raise SystemExit(f"{source or name}: no tail fit: {'; '.join(fit.warnings)}")
    u0 = fit.pot_threshold_us
    below = hist.counts[:u0].astype(float)
    # the body's CDF, linear within each 1 µs bucket, at the bucket edges 0..u0
    edges_cdf = np.concatenate(([0.0], np.cumsum(below) / below.sum()))
    edges = np.arange(u0 + 1, dtype=float)

    def body_cdf(x: np.ndarray) -> np.ndarray:
        return np.interp(x, edges, edges_cdf)

    def body_ppf(p: np.ndarray) -> np.ndarray:
        return np.interp(p, edges_cdf, edges)

    assert fit.shape is not None
    return Model(name, body_cdf, body_ppf, float(u0), fit.tail_samples / hist.samples,
                 fit.shape, fit.scale_us)


def sources() -> list[Model]:
    light = synthetic("synthetic ξ=0.1", median=15, spread=0.12, zeta=0.03, shape=0.1,
                      scale=3.0)
    return [
        light,
        synthetic("synthetic ξ=0.25", median=20, spread=0.15, zeta=0.03, shape=0.25,
                  scale=2.5),
        recorded("recorded x86 cpu", "host-x86-cpu-h400-3s.json", 0),
        recorded("recorded x86 idle", "host-x86-idle-h400-3s.json", 0),
        # the same board, were its runs as alike as their sampling noise allows
        attr.evolve(light, name="synthetic ξ=0.1, runs alike", scale_sd=0.0, weight_sd=0.0),
    ]


# ------------------------------------------------------------------ the trials ----


def compare_cell(args: tuple[int, int, int, int, int]) -> tuple[int, int, list[float]]:
    """A/A false fails and detection rates of compare_tail() for one source and length."""
    source_index, n, aa_trials, reg_trials, seed = args
    model = sources()[source_index]
    rng = np.random.default_rng(seed)
    rates = []
    for tail, trials in ((1.0, aa_trials), *((k, reg_trials) for k in REGRESSIONS)):
        fails = 0
        for trial in range(trials):
            baseline = [model.histogram(n, rng) for _ in range(BASELINE_RUNS)]
            candidate = model.histogram(n, rng, tail)
            fails += compare_tail(candidate, baseline, quantile=QUANTILE, decades=DECADES,
                                  seed=trial).outcome == REGRESSION
        rates.append(fails / trials)
    return source_index, n, rates


def spread_cell(args: tuple[float, int, int]) -> tuple[float, float]:
    """A/A false fails of compare_tail() on the first source with a wider run-to-run spread."""
    scale_sd, trials, seed = args
    model = attr.evolve(sources()[0], scale_sd=scale_sd)
    rng = np.random.default_rng(seed)
    fails = 0
    for trial in range(trials):
        baseline = [model.histogram(SPREAD_LENGTH, rng) for _ in range(BASELINE_RUNS)]
        candidate = model.histogram(SPREAD_LENGTH, rng)
        fails += compare_tail(candidate, baseline, quantile=QUANTILE, decades=DECADES,
                              seed=trial).outcome == REGRESSION
    return scale_sd, fails / trials


def ideal_detection(model: Model, quantile: float, trials: int,
                    rng: np.random.Generator) -> list[float]:
    """Detection of each regression by an ideal test of one quantile: every run's exact
    quantile (endless runs, no sampling noise), the A/A distribution of log candidate -
    mean log baseline known exactly and cut at its 99th percentile. What remains is the
    run-to-run spread, which no run length and no test of that quantile gets past."""

    def log_quantiles(tail: float, size: int) -> np.ndarray:
        scale, weight = model.run_variation(rng, size)
        return np.log(model.quantile_sf(np.array(1 - quantile), scale, weight, tail))

    def shifts(tail: float) -> np.ndarray:
        baseline = log_quantiles(1.0, trials * BASELINE_RUNS).reshape(trials, -1)
        return log_quantiles(tail, trials) - baseline.mean(axis=1)

    cut = float(np.quantile(shifts(1.0), 1 - TARGET_FALSE_FAILS))
    return [float(np.mean(shifts(k) > cut)) for k in REGRESSIONS]


def max_gate(model: Model, n: int, trials: int, rng: np.random.Generator) -> list[float]:
    """False fails (1 % by calibration) and detection rates of the calibrated max gate."""

    def ratios(tail: float) -> np.ndarray:
        baseline = model.maxima(n, trials * BASELINE_RUNS, rng).reshape(trials, -1).max(axis=1)
        return model.maxima(n, trials, rng, tail) / baseline

    margin = float(np.quantile(ratios(1.0), 1 - TARGET_FALSE_FAILS))
    return [float(np.mean(ratios(1.0) > margin)),
            *(float(np.mean(ratios(k) > margin)) for k in REGRESSIONS)]


def first_length(lengths: tuple[int, ...], rates: dict[int, list[float]],
                 regression: int) -> int | None:
    for n in lengths:
        if (rates[n][0] <= TARGET_FALSE_FAILS
                and rates[n][1 + regression] >= TARGET_DETECTION):
            return n
    return None


def samples(n: int | None) -> str:
    return "-" if n is None else f"1e{round(math.log10(n))}"


def duration(n: int) -> str:
    """How long a run of n samples takes at cyclictest -i 1000."""
    seconds = n / 1000
    for unit, size in (("y", 365.25 * 86400), ("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def main() -> int:
    # the workers are forked after the options set these, so they see them too
    global BASELINE_RUNS, QUANTILE, DECADES
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials (rough figures)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--baseline-runs", type=int, default=BASELINE_RUNS,
                        help=f"runs in each baseline (default {BASELINE_RUNS}; rtlab report "
                             "--baseline-runs)")
    parser.add_argument("--quantile", type=float, default=QUANTILE,
                        help=f"the lowest quantile compared (default {QUANTILE}; "
                             "thresholds.yaml statistics: quantile)")
    parser.add_argument("--decades", type=int, default=DECADES,
                        help=f"decades above it compared as well where the runs are long "
                             f"enough (default {DECADES}; 0: that quantile alone)")
    options = parser.parse_args()
    BASELINE_RUNS = options.baseline_runs
    QUANTILE = options.quantile
    DECADES = options.decades
    aa_trials, reg_trials, max_trials = (150, 60, 4000) if options.quick else (500, 150, 20000)
    started = time.monotonic()
    models = sources()
    compared = ", ".join(quantile_name(q) for q in
                         tail_quantiles(QUANTILE, 10**18, decades=DECADES, min_beyond=1))
    print(f"compare_tail(): {compared} (each where every run has 100 wake-ups beyond it), "
          f"default tolerance and confidence, against {BASELINE_RUNS} baseline runs; "
          f"{aa_trials} A/A and {reg_trials} trials per regression and length")
    print(f"max gate: candidate max > baseline max-of-maxes × margin, the margin calibrated "
          f"to 1 % A/A false fails per length; {max_trials} trials per length")
    print(f"injected regressions: the tail's scale × "
          f"{' and × '.join(str(k) for k in REGRESSIONS)}")
    print("columns: false fails on A/A, then detection of each regression; one standard "
          f"error of a 1 % false-fail rate over {aa_trials} trials is "
          f"{math.sqrt(0.01 * 0.99 / aa_trials):.2%}\n")

    jobs = [(i, n, aa_trials, reg_trials, 1000 * i + k)
            for i in range(len(models)) for k, n in enumerate(COMPARE_LENGTHS)]
    spread_jobs = [(sd, aa_trials, 9000 + k) for k, sd in enumerate(SPREADS)]
    with multiprocessing.Pool(options.workers) as pool:
        cells = pool.map(compare_cell, jobs, chunksize=1)
        spread_rates = pool.map(spread_cell, spread_jobs, chunksize=1)
    stat: dict[int, dict[int, list[float]]] = {i: {} for i in range(len(models))}
    for i, n, rates in cells:
        stat[i][n] = rates

    rng = np.random.default_rng(7)
    outcomes = []
    width = 7 * (1 + len(REGRESSIONS))
    for i, model in enumerate(models):
        gate = {n: max_gate(model, n, max_trials, rng) for n in MAX_LENGTHS}
        print(f"== {model.name}: tail from {model.u0:.1f} µs holds {model.zeta:.1%}, "
              f"GPD ξ={model.shape:.2f} σ={model.scale:.2f} µs; run-to-run sd: scale "
              f"{model.scale_sd:.0%}, tail weight {model.weight_sd:.0%}")
        labels = "".join(f"{label:>7}" for label in
                         ("A/A", *(f"×{k}" for k in REGRESSIONS)))
        print(f"  {'samples':>7} {'at 1 ms':>9} | {'compare_tail()':<{width}} | max gate")
        print(f"  {'':>7} {'':>9} | {labels} | {labels}")
        for n in MAX_LENGTHS:
            left = stat[i].get(n)
            ours = "".join(f"{r:>7.1%}" for r in left) if left else " " * width
            theirs = "".join(f"{r:>7.1%}" for r in gate[n])
            print(f"  {samples(n):>7} {duration(n):>9} | {ours} | {theirs}")
        if model.scale_sd or model.weight_sd:
            print("  an ideal test of one quantile (endless runs, spread known) detects: "
                  + "; ".join(f"{quantile_name(q)} " + ", ".join(
                      f"×{k} {rate:.1%}" for k, rate in
                      zip(REGRESSIONS, ideal_detection(model, q, max_trials * 10, rng),
                          strict=True))
                      for q in tail_quantiles(QUANTILE, 10**18, decades=DECADES, min_beyond=1)))
        for r, k in enumerate(REGRESSIONS):
            ours_n = first_length(COMPARE_LENGTHS, stat[i], r)
            theirs_n = first_length(MAX_LENGTHS, gate, r)
            if ours_n is None:
                verdict, met = "NOT MET: compare_tail() does not get there by " \
                    f"{samples(COMPARE_LENGTHS[-1])}", False
            elif theirs_n is None:
                verdict, met = (f"met: the max gate does not get there by "
                                f"{samples(MAX_LENGTHS[-1])} (ratio > "
                                f"{MAX_LENGTHS[-1] / ours_n:.0e})"), True
            else:
                met = theirs_n >= 10 * ours_n
                verdict = (f"{'met' if met else 'NOT MET'}: ratio {theirs_n / ours_n:.0f}")
            outcomes.append(met)
            print(f"  ×{k}: ≥{TARGET_DETECTION:.0%} detection at ≤{TARGET_FALSE_FAILS:.0%} "
                  f"false fails: compare_tail() {samples(ours_n)}, max gate {samples(theirs_n)} "
                  f"samples — {verdict}")
        print()
    print(f"compare_tail() A/A false fails when runs differ more ({models[0].name}, "
          f"{samples(SPREAD_LENGTH)} samples, {aa_trials} trials each): "
          + ", ".join(f"scale sd {sd:.0%}: {rate:.1%}" for sd, rate in spread_rates))
    print(f"target (≤1 % false fails and ≥95 % detection at a tenth of the max gate's run "
          f"length) met in {sum(outcomes)} of {len(outcomes)} source × regression pairs")
    for r, k in enumerate(REGRESSIONS):
        met = all(outcomes[i * len(REGRESSIONS) + r] for i in range(len(models)))
        print(f"  tail scale ×{k}: {'met' if met else 'NOT met'} for every source")
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
