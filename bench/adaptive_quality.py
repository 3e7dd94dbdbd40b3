"""How good and how quick is an adaptive run (rtlab.verdict.sequential) next to the fixed
hour per case?

For each latency source of bench/verdict_quality.py and each interval it simulates a
board's runs (4 CPUs, every CPU's wake-ups together, as the reports compare runs) in
1-minute windows up to the hour's cap, with the decision rtlab makes after each window:
a max_us exceeded fails at once; at the looks (1, 2, 4, …, 32 min and the cap) the run is
compared with 20 baseline runs of a full hour (the default branch's nightly runs) at the
look's share of the confidence, and stops on a regression, or on no change when the tail
also bounds the rest of the hour under max_us. max_us is what `rtlab thresholds suggest`
would set from A/A hours (the 0.99 quantile of their maxima × 1.2).

It prints per source and interval: the A/A false fails (a regression or a fail where
nothing changed) and the detection of a tail regression (the tail's scale × 1.5 and
× 1.3), each with the mean and 95th percentile of the board time to a decision (a run
that reaches the cap counts the whole hour), against the fixed hour judged by
compare_tail at 98 % (the report's verdict on a fixed run) and its max_us.

    .venv/bin/python bench/adaptive_quality.py [--quick] [--workers 2]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
import time
from pathlib import Path

import attr
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import verdict_quality as vq  # noqa: E402  (the sources and their sampling)

from rtlab.verdict.sequential import (  # noqa: E402
    CAP,
    NO_CHANGE,
    REGRESSION,
    SequentialPolicy,
    decide,
)
from rtlab.verdict.stats import Histogram, compare_tail  # noqa: E402

CPUS = 4
WINDOW_S = 60
CAP_S = 3600
INTERVALS_US = (1000, 100)
BASELINE_RUNS = 20
REGRESSIONS = (1.5, 1.3)
TARGET_FALSE_FAILS = 0.01
TARGET_DETECTION = 0.95
TARGET_TIME = CAP_S / 10


@attr.frozen
class Trial:
    """How one simulated run ended: its verdict and the board time it took."""

    verdict: str  # fail, regression, no change, cap
    seconds: float
    fixed_regression: bool
    fixed_fail: bool


def limit_for(model: vq.Model, n_hour: int, rng: np.random.Generator) -> float:
    """What tuning would set: the 0.99 quantile of A/A hours' maxima (the worst CPU's, so
    the max over all wake-ups of the hour), × 1.2."""
    maxima = model.maxima(n_hour, 2000, rng)
    return float(math.ceil(np.quantile(maxima, 0.99) * 1.2))


def one_run(model: vq.Model, policy: SequentialPolicy, interval_us: int, tail: float,
            baseline: list[Histogram], limit_us: float, rng: np.random.Generator,
            seed: int) -> Trial:
    scale, weight = (float(v[0]) for v in model.run_variation(rng, 1))
    per_window = int(WINDOW_S * 1e6 / interval_us) * CPUS
    windows = [model.run_histogram(per_window, rng, scale, weight, tail)
               for _ in range(int(CAP_S / WINDOW_S))]
    # the fixed hour: every window, judged once at the report's 98 %
    hour = Histogram.merged(windows)
    fixed_fail = (hour.known_max_us or 0) > limit_us
    fixed_regression = compare_tail(hour, baseline, seed=seed).outcome == REGRESSION
    run = None
    for count, window in enumerate(windows, start=1):
        run = window if run is None else run.merge(window)
        measured = count * WINDOW_S
        if (window.known_max_us or 0) > limit_us:
            return Trial("fail", measured, fixed_regression, fixed_fail)
        decision = decide(policy, measured, run, baseline, limit_us=limit_us,
                          interval_us=interval_us, cpus=CPUS)
        if decision.stop:
            outcome = decision.outcome
            if outcome == CAP:
                outcome = decision.comparison.outcome if decision.comparison else CAP
            return Trial(outcome, measured, fixed_regression, fixed_fail)
    raise AssertionError("the cap is a look: a run always stops there")


def cell(args: tuple[int, int, float, int, int]) -> tuple[int, int, float, list[Trial]]:
    source, interval_us, tail, trials, seed = args
    model = vq.sources()[source]
    rng = np.random.default_rng(seed)
    policy = SequentialPolicy(window_s=WINDOW_S, cap_s=CAP_S)
    n_hour = int(CAP_S * 1e6 / interval_us) * CPUS
    limit = limit_for(model, n_hour, np.random.default_rng(source * 100 + interval_us))
    results = []
    for trial in range(trials):
        baseline = [model.histogram(n_hour, rng) for _ in range(BASELINE_RUNS)]
        results.append(one_run(model, policy, interval_us, tail, baseline, limit, rng, trial))
    return source, interval_us, tail, results


def summary(trials: list[Trial], bad: set[str]) -> tuple[float, float, float, float, float]:
    """The rate of verdicts in ``bad``, the mean and 95th percentile board time, and the
    fixed hour's rate (regression or fail)."""
    rate = sum(t.verdict in bad for t in trials) / len(trials)
    seconds = np.array([t.seconds for t in trials])
    fixed = sum(t.fixed_regression or t.fixed_fail for t in trials) / len(trials)
    early = sum(t.seconds < CAP_S for t in trials) / len(trials)
    return rate, float(seconds.mean()), float(np.quantile(seconds, 0.95)), fixed, early


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials (rough figures)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sources", help="comma-separated source numbers (default: all)")
    parser.add_argument("--trials", help="A/A,regression trials per cell (overrides --quick)")
    options = parser.parse_args()
    aa_trials, reg_trials = (80, 40) if options.quick else (300, 120)
    if options.trials:
        aa_trials, reg_trials = (int(n) for n in options.trials.split(","))
    models = vq.sources()
    chosen = ([int(i) for i in options.sources.split(",")] if options.sources
              else list(range(len(models))))
    policy = SequentialPolicy(window_s=WINDOW_S, cap_s=CAP_S)
    print(f"adaptive runs: {WINDOW_S} s windows up to {CAP_S // 60} min, looks at "
          f"{', '.join(f'{t / 60:g}' for t in policy.looks)} min, each at "
          f"{policy.look_confidence:.3%}; margin {policy.margin:.0%}, exceedance risk "
          f"{policy.exceedance_risk:g}; {CPUS} CPUs, {BASELINE_RUNS} baseline hours; "
          f"{aa_trials} A/A and {reg_trials} trials per regression")
    print("columns: verdict rate, mean / 95th percentile board time to it, the runs that "
          "stopped before the cap, the fixed hour's rate (compare_tail at 98 % or max_us)\n")
    started = time.monotonic()
    jobs = [(i, interval, tail, aa_trials if tail == 1.0 else reg_trials,
             10_000 * i + interval + int(tail * 10))
            for i in chosen for interval in INTERVALS_US for tail in (1.0, *REGRESSIONS)]
    with multiprocessing.Pool(options.workers) as pool:
        cells = pool.map(cell, jobs, chunksize=1)
    results = {(i, interval, tail): trials for i, interval, tail, trials in cells}
    met = []
    for i in chosen:
        print(f"== {models[i].name}")
        for interval in INTERVALS_US:
            aa = summary(results[(i, interval, 1.0)], {"fail", REGRESSION})
            print(f"  {interval:>5} µs  A/A false fails {aa[0]:6.1%}  time {aa[1] / 60:5.1f} / "
                  f"{aa[2] / 60:5.1f} min  early {aa[4]:6.1%}  | fixed hour {aa[3]:6.1%}")
            nochange = sum(t.verdict == NO_CHANGE for t in results[(i, interval, 1.0)])
            print(f"  {'':>8} A/A stopped on no change: {nochange} of "
                  f"{len(results[(i, interval, 1.0)])}")
            for tail in REGRESSIONS:
                reg = summary(results[(i, interval, tail)], {"fail", REGRESSION})
                print(f"  {'':>8} ×{tail} detected {reg[0]:6.1%}  time {reg[1] / 60:5.1f} / "
                      f"{reg[2] / 60:5.1f} min  early {reg[4]:6.1%}  | fixed hour "
                      f"{reg[3]:6.1%}")
            main_reg = summary(results[(i, interval, REGRESSIONS[0])], {"fail", REGRESSION})
            ok = (aa[0] <= TARGET_FALSE_FAILS and main_reg[0] >= TARGET_DETECTION
                  and main_reg[1] <= TARGET_TIME)
            met.append(ok)
            print(f"  {'':>8} target (A/A ≤ 1 %, ×{REGRESSIONS[0]} ≥ 95 % at a mean ≤ "
                  f"{TARGET_TIME / 60:g} min): {'met' if ok else 'NOT met'}")
        print()
    print(f"target met in {sum(met)} of {len(met)} source × interval cells "
          f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
