"""How good and how quick is an adaptive case (rtlab.verdict.sequential, judged by
rtlab.verdict.case) next to the fixed hour per case, what false-fail rate does a pipeline
of gated cases get, and how large must a baseline be before it may decide early?

For each latency source of bench/verdict_quality.py, and each family of
bench/latency_families.py that the verdict was not built on (bursts, one noisy CPU, a
rare mode, three real boards' recorded shapes), and each interval it simulates a board's
runs (4 CPUs, every CPU's wake-ups together, as the reports compare runs) in 1-minute
windows up to the hour's cap, with the decision rtlab makes after each window: a max_us
exceeded stops the case at once; at the looks (4, 8, 16, 32 min and the cap) the run is
compared with the baseline at the look's share of the case's confidence, and stops on a
regression, or on no change when the tail also bounds the rest of the hour under max_us.
max_us is what `rtlab thresholds suggest` would set from A/A hours (the 0.99 quantile of
their maxima × 1.2). Each baseline run is a full hour with its own run-to-run (boot-to-
boot) variation (model.run_variation), so N baseline runs stand for N boots.

The verdict is rtlab.verdict.case's (LatencyCase.outcome, statistics gating on, the
default): the case FAILS when max_us is exceeded or when a look finds a regression (an
early stop or at the cap); it passes otherwise: a stop on no change, and a cap reached
inconclusive or on no change, are passes. "Detected" counts the case fails of a run with
a tail regression, a "false fail" the case fails of an A/A run (nothing changed): a
false regression, or an A/A hour past max_us (a quantile of A/A maxima, which the
comparison's confidence does not budget for). Not simulated: the tail-bound gate (a
CPU's tail bound whose lower confidence limit lies above max_us, rtlab.verdict.judge)
and a CPU without a wake-up; both can only add fails.

Each case is held at ``case_confidence(pipeline_false_fail, K)`` = 1 - 2 × 0.01 / K
(rtlab.verdict.case, Bonferroni over the pipeline's cases). K (``--cases``) defaults to
16, the gated latency cases of a push's pipeline: suite.yaml's ``tiers: gate`` has 4
latency cases (hackbench and combined at 100 µs and 1000 µs) in each test job, and
.gitlab-ci.yml's test matrix has 4 jobs (boards imx6q and rpi3 × flavours std and rt;
``rtlab run --pipeline-jobs 4``), so 4 × 4 = 16.

It prints:

* per source and interval, against a baseline of 20 runs (the newest 20 that the runner
  asks the store for, ``--rt-baseline-runs``): the A/A false fails and the detection of
  a tail regression (the tail's scale × 1.5 and × 1.3), each with the mean and 95th
  percentile of the board time to a decision (a run that reaches the cap counts the
  whole hour) and the share that stopped before the cap, against the fixed hour (one
  window of an hour, one look at the case's confidence, and its max_us); how many A/A
  passes that stopped early had a later window of their hour over max_us (what the
  early pass's bound on the rest of the hour missed); and whether the × 1.5 detection
  reaches the target, 95 % at a mean board time ≤ 6 min;
* the pipeline's A/A false-fail rate for K cases: from the per-case rate p as
  1 - (1 - p)^K, and directly, by grouping the A/A runs into pipelines of K cases (per
  source, half at each interval, every case on its own board and boot: independent
  runs) and counting the pipelines with at least one fail; each with its 95 %
  Clopper-Pearson interval and whether the estimate, and the interval's upper limit,
  are ≤ 1 %;
* per baseline size N in 2, 3, 5, 10, 20 runs (each its own boot; N treated as eligible
  even below the default minimum of thresholds.yaml, 10 runs from 2 boots, to show what
  an early decision on it would do): the A/A false fails, the pipeline's rate from them,
  the × 1.5 detection (and its lowest source × interval cell), and the mean time to a
  decision, pooled over the sources and intervals; and how many looks had no finite
  interval (a baseline of 2 runs knows its spread to 1 degree of freedom, whose draws can
  overflow in rtlab.verdict.comparison.compare: such a look is inconclusive).

--quick runs few trials (rough figures: 8 unchanged and 4 regressed trials per cell,
about 18 CPU-minutes for the 11 sources: estimated from the run below, not timed). The
full size (160 and 40) is meant for 16 workers (``--workers 16``); ``--trials 48,12,8,8
--workers 2`` took 4681 CPU-s, 66 min on 2 cores, 2026-11-26. The last line says the wall
time and the workers' CPU time. All figures are printed, none asserted.

    .venv/bin/python bench/adaptive_quality.py [--quick] [--workers 2] [--cases 16]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import attr
import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latency_families as lf  # noqa: E402  (bursts, a noisy CPU, rare modes, real boards)
import verdict_quality as vq  # noqa: E402  (the sources and their sampling)

from rtlab.verdict.case import FAIL, PASS, case_confidence  # noqa: E402
from rtlab.verdict.histogram import Histogram  # noqa: E402
from rtlab.verdict.sequential import (  # noqa: E402
    CAP,
    REGRESSION,
    Decision,
    SequentialPolicy,
    decide,
)
from rtlab.verdict.thresholds import StatisticsPolicy  # noqa: E402

CPUS = 4
WINDOW_S = 60
CAP_S = 3600
INTERVALS_US = (1000, 100)
BASELINE_RUNS = 20
BASELINE_SIZES = (2, 3, 5, 10, 20)
REGRESSIONS = (1.5, 1.3)
# the gated latency cases of a push's pipeline: 4 gate-tier cases × 4 test jobs
CASES = 16
DEFAULTS = StatisticsPolicy()
PIPELINE_FALSE_FAIL = DEFAULTS.pipeline_false_fail
TARGET_DETECTION = 0.95
TARGET_TIME = CAP_S / 10
INTERVAL_LEVEL = 0.95
# trials per task of the pool: small enough to spread a cell over the workers
CHUNK = 10


@attr.frozen
class Trial:
    """How one simulated case ended: its verdict, why it stopped and the board time it
    took, and the verdict of the fixed hour on the same windows (None: not judged)."""

    verdict: str  # pass or fail (rtlab.verdict.case)
    how: str  # max_us, regression, no change, cap: <the comparison's outcome>
    seconds: float
    fixed: str | None
    nonfinite: int = 0
    """The looks whose comparison's interval was not finite (inconclusive for that)."""
    missed: bool = False
    """A pass that stopped early although a later window of the hour went over max_us:
    what the early decision's bound on the rest of the hour got wrong."""


def sources() -> list[vq.Model | lf.Family]:
    """verdict_quality's sources, then the families they were not built on."""
    return [*vq.sources(), *lf.families()]


def case_verdict(limit_exceeded: bool, decisions: Sequence[Decision]) -> str:
    """LatencyCase.outcome's verdict on what this bench simulates, statistics gating on:
    a limit exceeded, or a regression at any look (early or at the cap), fails."""
    if limit_exceeded or any(d.outcome == REGRESSION for d in decisions):
        return FAIL
    return PASS


def limit_for(model: vq.Model, n_hour: int, rng: np.random.Generator) -> float:
    """What tuning would set: the 0.99 quantile of A/A hours' maxima (the worst CPU's, so
    the max over all wake-ups of the hour), × 1.2."""
    maxima = model.maxima(n_hour, 2000, rng)
    return float(math.ceil(np.quantile(maxima, 0.99) * 1.2))


def one_run(model: vq.Model, policy: SequentialPolicy, fixed: SequentialPolicy | None,
            interval_us: int, tail: float, baseline: list[Histogram], limit_us: float,
            rng: np.random.Generator) -> Trial:
    scale, weight = (float(v[0]) for v in model.run_variation(rng, 1))
    per_window = int(WINDOW_S * 1e6 / interval_us) * CPUS
    windows = [model.run_histogram(per_window, rng, scale, weight, tail)
               for _ in range(int(CAP_S / WINDOW_S))]
    fixed_verdict = None
    if fixed is not None:
        # the fixed hour: every window as one, judged at one look at the case's confidence
        hour = Histogram.merged(windows)
        exceeded = (hour.known_max_us or 0) > limit_us
        looks = [] if exceeded else [decide(fixed, CAP_S, hour, baseline, limit_us=limit_us,
                                            interval_us=interval_us, cpus=CPUS)]
        fixed_verdict = case_verdict(exceeded, looks)
    run = None
    decisions: list[Decision] = []

    def nonfinite() -> int:
        return sum(not all(map(math.isfinite, d.comparison.ci_us))
                   for d in decisions if d.comparison is not None)

    for count, window in enumerate(windows, start=1):
        run = window if run is None else run.merge(window)
        measured = count * WINDOW_S
        if (window.known_max_us or 0) > limit_us:
            return Trial(case_verdict(True, decisions), "max_us", measured, fixed_verdict,
                         nonfinite())
        decision = decide(policy, measured, run, baseline, limit_us=limit_us,
                          interval_us=interval_us, cpus=CPUS, windows=windows[:count])
        decisions.append(decision)
        if decision.stop:
            verdict = case_verdict(False, decisions)
            missed = verdict == PASS and any((later.known_max_us or 0) > limit_us
                                             for later in windows[count:])
            how = decision.outcome
            if how == CAP:
                how = (f"cap: {decision.comparison.outcome}" if decision.comparison
                       else "cap: no baseline")
            return Trial(verdict, how, measured, fixed_verdict, nonfinite(), missed)
    raise AssertionError("the cap is a look: a run always stops there")


Key = tuple[int, int, float, int]  # source, interval, tail, baseline runs


def cell(args: tuple[int, int, float, int, int, int, float, bool]) -> tuple[
        Key, int, list[Trial], float]:
    """``trials`` cases of one source, interval, tail and baseline size (one chunk), and
    the CPU seconds they took."""
    cpu = time.process_time()
    source, interval_us, tail, runs, trials, chunk, confidence, with_fixed = args
    model = sources()[source]
    rng = np.random.default_rng([source, interval_us, round(tail * 10), runs, chunk])
    policy = SequentialPolicy(window_s=WINDOW_S, cap_s=CAP_S, confidence=confidence)
    fixed = (SequentialPolicy(window_s=CAP_S, cap_s=CAP_S, confidence=confidence)
             if with_fixed else None)
    n_hour = int(CAP_S * 1e6 / interval_us) * CPUS
    limit = limit_for(model, n_hour, np.random.default_rng(source * 100 + interval_us))
    results = []
    # a small baseline's variance draws can overflow in rtlab.verdict.comparison.compare; the
    # looks they leave without a finite interval are counted (Trial.nonfinite) instead
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(trials):
            baseline = [model.histogram(n_hour, rng) for _ in range(runs)]
            results.append(one_run(model, policy, fixed, interval_us, tail, baseline, limit,
                                   rng))
    return (source, interval_us, tail, runs), chunk, results, time.process_time() - cpu


def interval(k: int, n: int, level: float = INTERVAL_LEVEL) -> tuple[float, float]:
    """The Clopper-Pearson ``level`` interval of a rate of k in n."""
    alpha = 1 - level
    low = 0.0 if k == 0 else float(sps.beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(sps.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return low, high


def rate(k: int, n: int) -> str:
    low, high = interval(k, n)
    return f"{k / n:6.2%} [{low:.2%}, {high:.2%}]"


def fails(trials: Sequence[Trial]) -> int:
    return sum(t.verdict == FAIL for t in trials)


def times(trials: Sequence[Trial]) -> tuple[float, float, float]:
    """The mean and 95th percentile board time (min), and the share stopped early."""
    seconds = np.array([t.seconds for t in trials])
    return (float(seconds.mean()) / 60, float(np.quantile(seconds, 0.95)) / 60,
            float(np.mean(seconds < CAP_S)))


def pipelines(by_interval: Sequence[Sequence[Trial]], cases: int) -> list[list[Trial]]:
    """The A/A runs of one source as pipelines of ``cases`` cases, the intervals' shares
    as even as ``cases`` allows (runs are independent: each its own board and boot)."""
    shares = [cases // len(by_interval) + (i < cases % len(by_interval))
              for i in range(len(by_interval))]
    count = min(len(runs) // share for runs, share in zip(by_interval, shares, strict=True)
                if share)
    return [[t for runs, share in zip(by_interval, shares, strict=True)
             for t in runs[p * share:(p + 1) * share]] for p in range(count)]


def pipeline_lines(label: str, aa: dict[int, list[list[Trial]]], cases: int) -> None:
    """The pipeline's A/A false-fail rate for ``cases`` cases, from the per-case rate and
    directly, over the sources in ``aa`` (source -> its A/A runs per interval)."""
    runs = [t for by_interval in aa.values() for trials in by_interval for t in trials]
    k, n = fails(runs), len(runs)
    low, high = interval(k, n)
    share = PIPELINE_FALSE_FAIL

    def pipeline(p: float) -> float:
        return -math.expm1(cases * math.log1p(-p)) if p < 1 else 1.0

    estimate = pipeline(k / n)
    verdict = "yes" if estimate <= share else "NO"
    bound = "yes" if pipeline(high) <= share else "not shown"
    print(f"  {label}: per case {rate(k, n)} of {n}")
    print(f"  {'':>{len(label)}}  pipeline of {cases}, 1 - (1 - p)^{cases}: {estimate:6.2%} "
          f"[{pipeline(low):.2%}, {pipeline(high):.2%}]; ≤ {share:.0%}: {verdict} "
          f"(upper limit ≤ {share:.0%}: {bound})")
    grouped = [p for by_interval in aa.values() for p in pipelines(by_interval, cases)]
    if grouped:
        failed = sum(any(t.verdict == FAIL for t in p) for p in grouped)
        low, high = interval(failed, len(grouped))
        verdict = "yes" if failed / len(grouped) <= share else "NO"
        bound = "yes" if high <= share else "not shown"
        print(f"  {'':>{len(label)}}  pipeline of {cases}, directly: {failed} of "
              f"{len(grouped)} pipelines failed, {rate(failed, len(grouped))}; ≤ "
              f"{share:.0%}: {verdict} (upper limit ≤ {share:.0%}: {bound})")
    else:
        print(f"  {'':>{len(label)}}  pipeline of {cases}, directly: too few runs for one")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials (rough figures)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sources", help="comma-separated source numbers (default: all)")
    parser.add_argument("--trials",
                        help="A/A,regression trials per cell of the table, then A/A,× 1.5 "
                             "per cell of each smaller baseline (overrides --quick)")
    parser.add_argument("--cases", type=int, default=CASES,
                        help=f"gated latency cases per pipeline (default {CASES}: 4 gate-tier "
                             "cases × 4 test jobs)")
    options = parser.parse_args()
    aa_trials, reg_trials, size_aa, size_reg = (8, 4, 2, 2) if options.quick else (
        160, 40, 24, 16)
    if options.trials:
        aa_trials, reg_trials, size_aa, size_reg = (int(n) for n in options.trials.split(","))
    cases = options.cases
    confidence = case_confidence(PIPELINE_FALSE_FAIL, cases)
    models = sources()
    chosen = ([int(i) for i in options.sources.split(",")] if options.sources
              else list(range(len(models))))
    policy = SequentialPolicy(window_s=WINDOW_S, cap_s=CAP_S, confidence=confidence)
    print(f"adaptive cases: {WINDOW_S} s windows up to {CAP_S // 60} min, looks at "
          f"{', '.join(f'{t / 60:g}' for t in policy.looks)} min; each case at "
          f"case_confidence({PIPELINE_FALSE_FAIL:g}, {cases}) = {confidence:.4%} "
          f"(a pipeline of {cases} gated cases), each look at {policy.look_confidence:.4%}; "
          f"margin {policy.margin:.0%}, exceedance risk {policy.exceedance_risk:g}; "
          f"{CPUS} CPUs")
    print(f"verdict (rtlab.verdict.case): fail = max_us exceeded or a regression at a look "
          f"(early or at the cap); a stop on no change and a cap reached without a regression "
          f"are passes. "
          f"{aa_trials} A/A and {reg_trials} trials per regression against {BASELINE_RUNS} "
          f"baseline hours; {size_aa} A/A and {size_reg} × {REGRESSIONS[0]} per smaller "
          "baseline")
    print("columns: the case-fail rate [95 % interval], mean / 95th percentile board time "
          "to the decision, the runs that stopped before the cap, the fixed hour's "
          "case-fail rate (one look at the case's confidence, and max_us)\n")
    started = time.monotonic()
    specs: list[tuple[int, int, float, int, int, bool]] = []
    for i in chosen:
        for interval_us in INTERVALS_US:
            specs += [(i, interval_us, tail, BASELINE_RUNS,
                       aa_trials if tail == 1.0 else reg_trials, True)
                      for tail in (1.0, *REGRESSIONS)]
            specs += [(i, interval_us, tail, runs, size_aa if tail == 1.0 else size_reg, False)
                      for runs in BASELINE_SIZES if runs != BASELINE_RUNS
                      for tail in (1.0, REGRESSIONS[0])]
    jobs = [(i, interval_us, tail, runs, min(CHUNK, trials - start), start // CHUNK,
             confidence, fixed)
            for i, interval_us, tail, runs, trials, fixed in specs
            for start in range(0, trials, CHUNK)]
    # the costliest first (each look's cost grows with the baseline's runs; regressions
    # compare wider tails; the fixed hour is one more comparison), so that none is last
    jobs.sort(key=lambda job: -job[4] * (1 + job[3] / 10) * (2 if job[2] > 1 else 1)
              * (1.5 if job[7] else 1))
    with multiprocessing.Pool(options.workers) as pool:
        chunks = pool.map(cell, jobs, chunksize=1)
    results: dict[Key, list[Trial]] = {}
    for key, _, trials, _ in sorted(chunks, key=lambda c: (c[0], c[1])):
        results.setdefault(key, []).extend(trials)
    elapsed = time.monotonic() - started
    cpu = sum(c[3] for c in chunks)

    met = []
    for i in chosen:
        print(f"== {models[i].name}")
        for interval_us in INTERVALS_US:
            aa = results[(i, interval_us, 1.0, BASELINE_RUNS)]
            mean, p95, early = times(aa)
            fixed = sum(t.fixed == FAIL for t in aa)
            print(f"  {interval_us:>5} µs  A/A false fails (case fails) {rate(fails(aa), len(aa))}"
                  f"  time {mean:5.1f} / {p95:5.1f} min  early {early:6.1%}  | fixed hour "
                  f"{fixed / len(aa):6.2%}")
            how = {h: sum(t.how == h for t in aa) for h in sorted({t.how for t in aa})}
            print(f"  {'':>8} A/A stopped by: "
                  + ", ".join(f"{h} {n}" for h, n in how.items()))
            passed_early = [t for t in aa if t.verdict == PASS and t.seconds < CAP_S]
            print(f"  {'':>8} A/A early passes the rest of the hour would have failed "
                  f"(a later window over max_us): {sum(t.missed for t in aa)} of "
                  f"{len(passed_early)}")
            for tail in REGRESSIONS:
                reg = results[(i, interval_us, tail, BASELINE_RUNS)]
                mean, p95, early = times(reg)
                fixed = sum(t.fixed == FAIL for t in reg)
                by = {h: sum(t.how == h and t.verdict == FAIL for t in reg)
                      for h in ("max_us", REGRESSION)}
                print(f"  {'':>8} ×{tail} detected (case fails) "
                      f"{rate(fails(reg), len(reg))}  time {mean:5.1f} / {p95:5.1f} min  "
                      f"early {early:6.1%}  | fixed hour {fixed / len(reg):6.1%}  "
                      f"(max_us {by['max_us']}, regression {by[REGRESSION]})")
            main_reg = results[(i, interval_us, REGRESSIONS[0], BASELINE_RUNS)]
            detection = fails(main_reg) / len(main_reg)
            ok = detection >= TARGET_DETECTION and times(main_reg)[0] <= TARGET_TIME / 60
            met.append(ok)
            print(f"  {'':>8} target (×{REGRESSIONS[0]} detected ≥ 95 % at a mean ≤ "
                  f"{TARGET_TIME / 60:g} min): {'met' if ok else 'NOT met'}")
        print()

    print(f"== a pipeline of {cases} unchanged gated cases ({BASELINE_RUNS} baseline runs; "
          f"target: fails at most {PIPELINE_FALSE_FAIL:.0%} of the time)")
    per_source = {i: [results[(i, interval_us, 1.0, BASELINE_RUNS)]
                      for interval_us in INTERVALS_US] for i in chosen}
    for i in chosen:
        pipeline_lines(models[i].name, {i: per_source[i]}, cases)
    pipeline_lines("all sources", per_source, cases)
    print()

    print(f"== baseline size: N runs of an hour, each its own boot (thresholds.yaml default: "
          f"an early decision needs {DEFAULTS.baseline_runs} runs from "
          f"{DEFAULTS.baseline_boots} boots), pooled over the sources and intervals")
    print(f"  {'N':>3}  {'A/A false fails [95 %]':<30} {'pipeline of ' + str(cases):<14} "
          f"{'mean time':>9}  {'×' + str(REGRESSIONS[0]) + ' detected [95 %]':<30} "
          f"{'lowest cell':>11} {'mean time':>9}")
    for runs in BASELINE_SIZES:
        aa = [t for i in chosen for interval_us in INTERVALS_US
              for t in results[(i, interval_us, 1.0, runs)]]
        cells = [results[(i, interval_us, REGRESSIONS[0], runs)]
                 for i in chosen for interval_us in INTERVALS_US]
        reg = [t for trials in cells for t in trials]
        p = fails(aa) / len(aa)
        pipeline = -math.expm1(cases * math.log1p(-p)) if p < 1 else 1.0
        lowest = min(fails(trials) / len(trials) for trials in cells)
        note = ("" if runs >= DEFAULTS.baseline_runs
                else "  (below the default: rtlab compares nothing, runs to the cap)")
        print(f"  {runs:>3}  {rate(fails(aa), len(aa)):<30} {pipeline:<14.2%} "
              f"{times(aa)[0]:6.1f} min  {rate(fails(reg), len(reg)):<30} {lowest:>11.1%} "
              f"{times(reg)[0]:6.1f} min{note}")
        bad = sum(t.nonfinite for t in aa + reg)
        if bad:
            print(f"  {'':>3}  {bad} looks had no finite interval (rtlab.verdict.comparison: the "
                  f"spread of {runs} runs drawn from {runs - 1} degree"
                  f"{'s' if runs != 2 else ''} of freedom overflows): inconclusive there")
    print()
    print(f"target met in {sum(met)} of {len(met)} source × interval cells "
          f"({elapsed:.0f} s, {cpu:.0f} CPU-s in {options.workers} workers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
