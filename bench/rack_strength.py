"""How strong is a case's verdict at one board-hour when it is measured on one board (the
adaptive run, the fixed hour) or on every board of the type at once (replication), where
boots differ (issue 31, points 4 and 5)?

Every strategy spends one board-hour on a case and is judged by rtlab's own code:

* **(a) adaptive**, one board: 1-minute windows up to the hour's cap, looks at 4, 8, 16,
  32 min and the cap (rtlab.verdict.sequential.decide, bench/adaptive_quality.py's
  ``one_run``): a window past max_us fails at once, a regression at a look fails, a stop on
  no change (where the early-pass gates allow it) or the cap without a regression passes;
* **(b) the fixed hour**, one board: the same hour's windows as one, one look at the case's
  confidence, and max_us (``one_run``'s fixed verdict);
* **(c) replication**, k = 4 boards × 15 min, each board its own boot: any board past
  max_us fails the case; the pooled histogram (every board's wake-ups) is compared with the
  baseline once, at the end, as rtlab.run.pooling judges it: one look at the case's
  confidence, ``decide(..., candidate_boots=k, candidate_runs=<each board's histogram>)``
  (rtlab.verdict.comparison.compare: the boot a level of the comparison, the candidate's
  offset the mean of k boots', never surer than the boards' own spread allows).

Each case is held at ``case_confidence(0.01, 16)`` (16 gated cases per pipeline: the gate
tier's 4 latency cases × 4 test jobs), statistics gating on (a regression fails); the
baseline is 20 single-board hours, each its own boot, drawn from the same family with its
boot variation; max_us is what ``rtlab thresholds suggest`` would set from A/A hours (the
0.99 quantile of their maxima × 1.2, adaptive_quality.limit_for). 4 CPUs per board, every
CPU's wake-ups together, at 1 ms and 100 µs.

The families (bench/latency_families.py, ``rack_families``): the light synthetic source,
bursts, one noisy CPU among four, the real civcode 4-core board's recorded shape, and the
light source whose every boot also scales its tail by its own offset (log-sd 0.05 and
0.10): each run (boot) of every family varies its latency scale (3 %) and tail weight
(10 %) as well. The changes (latency_families.Change), the candidate's only: nothing (A/A),
the tail's scale × 1.5 and × 1.3, the body + 10 % (inside the 20 % margin) and + 50 %
(the tail's excesses unchanged in µs), on every family; a rare second mode above max_us at
0.5, 2 and 10 events per board-hour (independent Poisson events, each one wake-up between
max_us and 1.5 × max_us) on the plain light source and the light source with boot log-sd
0.10 (the exposure decides it, not the shape: two families suffice).

It prints, per strategy and pooled over the families and both intervals, with 95 %
Clopper-Pearson intervals: the A/A case-fail rate and the pipeline's (K = 16: 1 - (1 -
p)^16, and directly by grouping the A/A trials into pipelines of 16, as
adaptive_quality does); the fail rates of × 1.5, × 1.3, the rare mode at 0.5, 2 (against
1 - e^-2, what one board-hour of exposure allows) and 10 per hour, and the body shifts;
for (a) the early passes and how many the rest of their hour contradicted (a later window
past max_us, or the fixed hour's regression on the same windows) against the stated risk
(exceedance_risk, 5 %); the mean board time to a decision on an unchanged kernel (the
wall time: the adaptive run's stop, the fixed hour, replication's share of 15 min). Then
the targets (A/A pipeline ≤ 1 %; × 1.5 ≥ 95 %; × 1.3 ≥ 80 %; rare 2/h ≥ 86 %; early passes
contradicted ≤ the stated risk; unchanged ≤ 15 min), met or missed by how much, with the
reasons it can show: per family, and the information limit: the × 1.3 (and × 1.5)
detection of the pooled comparison at one board-hour spread over k = 1, 2, 4, 8 boards,
measured (k = 1 is the fixed hour, k = 4 replication; 2 and 8 on the same trials) and by
an ideal test of each compared quantile on the light families (endless runs, each boot's
exact quantile: only the boots' spread is left; the spread known, or learnt from the 20
baseline boots as the comparison learns it).

``--calibrate N`` adds N A/A trials per family compared at 80 % confidence, on one board
and on 4 boards × 15 min (max_us left out), where a comparison that underrates the
candidate's spread shows: at the cases' 99.875 % a false fail is too rare to count
(``--trials 0,0 --calibrate N``: that alone).

Not simulated, as in adaptive_quality: the tail-bound gate and a CPU without a wake-up
(both only add fails), and a board failing mid-case (replication then judges on the
others). All figures are printed, none asserted.

--quick: 8 A/A and 4 trials per change per family × interval (the rare modes 4 each), the
k-sweep on the A/A and × 1.3 trials: 1164 CPU-s, about 10 min on 2 free cores (22 min on
a host loaded by others, 2026-11-26). The full size (96 and 48) is meant for 16 workers
(about 12 times the CPU). The last line says the wall time and the workers' CPU time.

    .venv/bin/python bench/rack_strength.py [--quick] [--workers 2] [--trials AA,CHANGE]
                                            [--families 0,1,...] [--calibrate N]
"""

from __future__ import annotations

import argparse
import functools
import math
import multiprocessing
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attr
import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent))
import adaptive_quality as aq  # noqa: E402  (one_run, limit_for, the intervals' figures)
import latency_families as lf  # noqa: E402  (the families and the changes)

from rtlab.verdict.case import FAIL, PASS, case_confidence  # noqa: E402
from rtlab.verdict.comparison import quantile_name, tail_quantiles  # noqa: E402
from rtlab.verdict.histogram import Histogram  # noqa: E402
from rtlab.verdict.sequential import REGRESSION, SequentialPolicy, decide  # noqa: E402

CAP_S = aq.CAP_S
WINDOW_S = aq.WINDOW_S
CPUS = aq.CPUS
INTERVALS_US = aq.INTERVALS_US
BASELINE_RUNS = aq.BASELINE_RUNS
CASES = aq.CASES
PIPELINE_FALSE_FAIL = aq.PIPELINE_FALSE_FAIL
BOARDS = 4
SWEEP = (1, 2, 4, 8)
SPIKE_RATES = (0.5, 2.0, 10.0)
AA = lf.UNCHANGED
CHANGES = (
    AA,
    lf.Change("tail × 1.5", tail=1.5),
    lf.Change("tail × 1.3", tail=1.3),
    lf.Change("body + 10 %", body=1.1),
    lf.Change("body + 50 %", body=1.5),
    *(lf.Change(f"rare mode {rate:g}/h", spikes_per_hour=rate) for rate in SPIKE_RATES),
)
X15, X13, BODY10, BODY50 = (CHANGES.index(c) for c in CHANGES[1:5])
RARE = {rate: 5 + i for i, rate in enumerate(SPIKE_RATES)}
# the rare modes' families: the plain light source and the one with boot log-sd 0.10
RARE_FAMILIES = (0, 5)
# the light families, whose quantiles the ideal test takes exactly (one CPU, no bursts)
LIGHT_FAMILIES = (0, 4, 5)
TARGETS = {"pipeline": PIPELINE_FALSE_FAIL, "x15": 0.95, "x13": 0.80,
           "rare2": 0.86, "minutes": 15.0}
CHUNK = 6


@attr.frozen
class Verdict:
    """One strategy's verdict on a trial, and why."""

    verdict: str
    how: str


@attr.frozen
class Result:
    """One trial: the adaptive run (with the fixed hour on its windows), and the pooled
    comparison at each board count k (k = 1 is not run: it is the fixed hour)."""

    adaptive: aq.Trial
    pooled: dict[int, Verdict]


Key = tuple[int, int, int]  # family, interval, change


@functools.cache
def families() -> tuple[lf.Family, ...]:
    return tuple(lf.rack_families())


@functools.cache
def limit_of(family: int, interval_us: int) -> float:
    n_hour = int(CAP_S * 1e6 / interval_us) * CPUS
    return aq.limit_for(families()[family], n_hour,
                        np.random.default_rng(family * 100 + interval_us))


def replicate(family: lf.Family, change: lf.Change, boards: int, interval_us: int,
              baseline: Sequence[Histogram], limit_us: float, confidence: float,
              rng: np.random.Generator) -> Verdict:
    """The case on ``boards`` boards, each a fresh boot measuring the cap's share in
    1-minute windows (as near as the share allows), judged as rtlab.run.pooling judges it:
    a board past max_us fails; else one look at the pooled wake-ups, at the case's
    confidence, with the boards' boots as the candidate's."""
    share_s = CAP_S / boards
    count = max(1, round(share_s / WINDOW_S))
    per_window = int(share_s * 1e6 / interval_us) * CPUS // count
    parts = []
    per_board = []
    for _ in range(boards):
        board = lf.boot(family, change, rng, limit_us=limit_us, interval_us=interval_us,
                        cpus=CPUS)
        scale, weight = (float(v[0]) for v in board.run_variation(rng, 1))
        windows = [board.run_histogram(per_window, rng, scale, weight) for _ in range(count)]
        parts += windows
        per_board.append(Histogram.merged(windows))
    if any((part.known_max_us or 0) > limit_us for part in parts):
        return Verdict(FAIL, "max_us")
    policy = SequentialPolicy(window_s=CAP_S, cap_s=CAP_S, confidence=confidence)
    decision = decide(policy, CAP_S, Histogram.merged(parts), baseline, limit_us=limit_us,
                      interval_us=interval_us, cpus=CPUS * boards, candidate_boots=boards,
                      candidate_runs=per_board)
    if decision.comparison is not None and decision.comparison.outcome == REGRESSION:
        return Verdict(FAIL, REGRESSION)
    return Verdict(PASS, decision.comparison.outcome if decision.comparison else "none")


def cell(args: tuple[int, int, int, int, int, float, tuple[int, ...]]) -> tuple[
        Key, int, list[Result], float]:
    """``trials`` trials of one family, interval and change (one chunk), and their CPU
    seconds."""
    cpu = time.process_time()
    index, interval_us, change_index, trials, chunk, confidence, sweep = args
    family, change = families()[index], CHANGES[change_index]
    rng = np.random.default_rng([index, interval_us, change_index, chunk])
    policy = SequentialPolicy(window_s=WINDOW_S, cap_s=CAP_S, confidence=confidence)
    fixed = SequentialPolicy(window_s=CAP_S, cap_s=CAP_S, confidence=confidence)
    n_hour = int(CAP_S * 1e6 / interval_us) * CPUS
    limit = limit_of(index, interval_us)
    results = []
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(trials):
            baseline = [family.histogram(n_hour, rng) for _ in range(BASELINE_RUNS)]
            board = lf.boot(family, change, rng, limit_us=limit, interval_us=interval_us,
                            cpus=CPUS)
            adaptive = aq.one_run(board, policy, fixed, interval_us, 1.0,  # type: ignore[arg-type]
                                  baseline, limit, rng)
            pooled = {k: replicate(family, change, k, interval_us, baseline, limit,
                                   confidence, rng)
                      for k in sorted({BOARDS, *sweep}) if k > 1}
            results.append(Result(adaptive, pooled))
    return (index, interval_us, change_index), chunk, results, time.process_time() - cpu


CALIBRATION_CONFIDENCE = 0.80
CALIBRATION_INTERVAL_US = 1000


def calibration_cell(args: tuple[int, int, int]) -> tuple[int, dict[int, int], int, float]:
    """A/A comparisons of one family at CALIBRATION_CONFIDENCE, on 1 and on BOARDS boards
    at one board-hour (max_us left out): how often each finds a regression, against the
    (1 - confidence) / 2 it may. At the cases' 99.875 % a false fail is too rare to count
    in a bench; at 80 % a comparison that underrates the candidate's spread shows."""
    cpu = time.process_time()
    index, trials, chunk = args
    family = families()[index]
    rng = np.random.default_rng([index, 80, chunk])
    n_hour = int(CAP_S * 1e6 / CALIBRATION_INTERVAL_US) * CPUS
    found = {1: 0, BOARDS: 0}
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(trials):
            baseline = [family.histogram(n_hour, rng) for _ in range(BASELINE_RUNS)]
            for k in found:
                found[k] += replicate(family, AA, k, CALIBRATION_INTERVAL_US, baseline,
                                      math.inf, CALIBRATION_CONFIDENCE, rng).verdict == FAIL
    return index, found, trials, time.process_time() - cpu


# ------------------------------------------------------------------ the figures ----

Strategy = Callable[[Result], Verdict]


def adaptive(result: Result) -> Verdict:
    return Verdict(result.adaptive.verdict, result.adaptive.how)


def fixed_hour(result: Result) -> Verdict:
    """The fixed hour's verdict; a fail's reason is max_us where the adaptive run's view of
    the same windows saw one past it (it stops at the first; after an early stop on a
    regression a later one is not looked for, and counts as the regression)."""
    verdict = result.adaptive.fixed
    assert verdict is not None
    if verdict == PASS:
        return Verdict(PASS, "")
    exceeded = result.adaptive.how == "max_us" or result.adaptive.missed
    return Verdict(FAIL, "max_us" if exceeded else REGRESSION)


def pooled(boards: int) -> Strategy:
    def verdict(result: Result) -> Verdict:
        return fixed_hour(result) if boards == 1 else result.pooled[boards]
    return verdict


STRATEGIES: tuple[tuple[str, Strategy, float | None], ...] = (
    ("(a) adaptive, 1 board", adaptive, None),
    ("(b) fixed hour, 1 board", fixed_hour, CAP_S / 60),
    (f"(c) {BOARDS} boards × {CAP_S // 60 // BOARDS} min", pooled(BOARDS),
     CAP_S / 60 / BOARDS),
)


def fails(results: Sequence[Result], strategy: Strategy) -> int:
    return sum(strategy(r).verdict == FAIL for r in results)


def early(result: Result) -> bool:
    return result.adaptive.verdict == PASS and result.adaptive.seconds < CAP_S


def contradicted(result: Result) -> str | None:
    """Why the rest of an early pass's hour contradicts it (None: it does not): a later
    window past max_us, or the fixed hour on the same windows finds a regression."""
    if not early(result):
        return None
    if result.adaptive.missed:
        return "max_us"
    return REGRESSION if result.adaptive.fixed == FAIL else None


def minutes(result: Result, strategy: int) -> float:
    """The board time to the decision, which is also its wall time, in minutes."""
    wall = STRATEGIES[strategy][2]
    return result.adaptive.seconds / 60 if wall is None else wall


def short(k: int, n: int) -> str:
    low, high = aq.interval(k, n)
    return f"{k / n:6.1%} [{low:5.1%}, {high:5.1%}]"


def pipeline(p: float, cases: int = CASES) -> float:
    return -math.expm1(cases * math.log1p(-p)) if p < 1 else 1.0


def ideal_detection(family: lf.Family, tail: float, boards: int, confidence: float,
                    samples: int, draws: int = 200_000) -> tuple[float, float, str]:
    """The detection of the tail's scale × ``tail`` by an ideal test of the best single
    quantile that compare_tail compares (each at its Bonferroni share of the case's
    confidence): every boot's exact quantile (endless runs, no sampling noise), the
    candidate the mean log quantile of ``boards`` boots, the baseline of BASELINE_RUNS.
    Returns the detection with the boots' spread known (normal) and learnt from the
    baseline's boots (Student t, BASELINE_RUNS - 1 degrees of freedom, as the comparison's
    fiducial spread), and the quantile."""
    (model,) = family.cpus
    rng = np.random.default_rng(11)
    quantiles = tail_quantiles(0.999, samples)
    alpha = (1 - confidence) / 2 / len(quantiles)
    best = (0.0, 0.0, "")

    def logs(q: float, factor: float) -> np.ndarray:
        scale, weight = family.run_variation(rng, draws)
        tails = factor * family.boot_tail(rng, draws)
        return np.log(model.quantile_sf(np.array(1 - q), scale, weight, tails))

    for q in quantiles:
        same, changed = logs(q, 1.0), logs(q, tail)
        shift = float(changed.mean() - same.mean())
        spread = float(same.std()) * math.sqrt(1 / boards + 1 / BASELINE_RUNS)
        known = float(sps.norm.sf(sps.norm.isf(alpha) - shift / spread))
        dof = BASELINE_RUNS - 1
        learnt = float(sps.nct.sf(sps.t.isf(alpha, dof), dof, shift / spread))
        if learnt > best[1]:
            best = (known, learnt, quantile_name(q))
    return best


def max_exceedance(family: lf.Family, interval_us: int, boards: int, limit_us: float,
                   trials: int = 20_000) -> float:
    """The chance that an unchanged case exceeds max_us on ``boards`` boards, each a fresh
    boot measuring the cap's k-th share, from the exact maxima (Family.maxima; for the
    bursts, the share of wake-ups in burst minutes is drawn for an hour)."""
    rng = np.random.default_rng([boards, interval_us, 7])
    n = int(CAP_S * 1e6 / interval_us) * CPUS // boards
    maxima = family.maxima(n, trials * boards, rng).reshape(trials, boards).max(axis=1)
    return float(np.mean(maxima > limit_us))


def body_shift(family: lf.Family, body: float) -> str:
    """How far a body × ``body`` moves the compared quantiles of a one-CPU family."""
    (model,) = family.cpus
    shifts = []
    for q in tail_quantiles(0.999, 10**9):
        s = np.array(1 - q)
        before = float(model.quantile_sf(s, 1.0, 1.0, 1.0))
        after = float(model.quantile_sf(s, body, 1.0, 1.0 / body))
        shifts.append(f"{quantile_name(q)} {before:.0f} → {after:.0f} µs "
                      f"({after / before - 1:+.1%})")
    return ", ".join(shifts)


def calibration(trials: int, chosen: Sequence[int], workers: int) -> tuple[float, float]:
    """Runs and prints the calibration (calibration_cell) of the chosen families; returns
    its wall and CPU seconds."""
    started = time.monotonic()
    tasks = [(i, min(CHUNK, trials - start), start // CHUNK)
             for i in chosen for start in range(0, trials, CHUNK)]
    with multiprocessing.Pool(workers) as pool:
        done = pool.map(calibration_cell, tasks, chunksize=1)
    print(f"\n== calibration: A/A comparisons at {CALIBRATION_CONFIDENCE:.0%} (a regression "
          f"at most {(1 - CALIBRATION_CONFIDENCE) / 2:.0%} of the time), one board-hour at "
          f"{CALIBRATION_INTERVAL_US} µs, max_us left out: regressions found [95 %]")
    for i in chosen:
        mine = [d for d in done if d[0] == i]
        n = sum(d[2] for d in mine)
        print(f"  {families()[i].name[:57]:<58}" + "   ".join(
            f"{k} board{'s' if k > 1 else ''}: {short(sum(d[1][k] for d in mine), n)}"
            for k in (1, BOARDS)) + f"  of {n}")
    return time.monotonic() - started, sum(d[3] for d in done)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials (rough figures)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trials", help="A/A,change trials per family × interval "
                                         "(overrides --quick; default 96,48, --quick 8,4)")
    parser.add_argument("--families", help="comma-separated family numbers (default: all)")
    parser.add_argument("--calibrate", type=int, default=0, metavar="N",
                        help=f"also N A/A trials per family at {CALIBRATION_CONFIDENCE:.0%} "
                             f"confidence, on 1 and {BOARDS} boards (default 0: none)")
    options = parser.parse_args()
    aa_trials, change_trials = (8, 4) if options.quick else (96, 48)
    if options.trials:
        aa_trials, change_trials = (int(n) for n in options.trials.split(","))
    confidence = case_confidence(PIPELINE_FALSE_FAIL, CASES)
    names = [f.name for f in families()]
    chosen = ([int(i) for i in options.families.split(",")] if options.families
              else list(range(len(names))))
    if not aa_trials:
        # --trials 0,0: the calibration alone
        wall, cpu = calibration(options.calibrate, chosen, options.workers)
        print(f"\n({wall:.0f} s, {cpu:.0f} CPU-s in {options.workers} workers)")
        return 0
    sweep = tuple(k for k in SWEEP if k not in (1, BOARDS))
    policy = SequentialPolicy(window_s=WINDOW_S, cap_s=CAP_S, confidence=confidence)
    print(f"one board-hour a case; each case at case_confidence({PIPELINE_FALSE_FAIL:g}, "
          f"{CASES}) = {confidence:.4%}; {CPUS} CPUs a board; {BASELINE_RUNS} baseline hours, "
          "each its own boot; max_us: 1.2 × the 0.99 quantile of A/A hours' maxima")
    print(f"(a) adaptive: {WINDOW_S} s windows, looks at "
          f"{', '.join(f'{t / 60:g}' for t in policy.looks)} min, each at "
          f"{policy.look_confidence:.4%}, margin {policy.margin:.0%}, exceedance risk "
          f"{policy.exceedance_risk:g}, {policy.resamples} resamples; (b) the same hour as "
          f"one window, one look; (c) {BOARDS} boards × {CAP_S // 60 // BOARDS} min, each its "
          f"own boot, a board past max_us fails, one look at the pooled wake-ups "
          f"(candidate_boots={BOARDS})")
    print(f"{aa_trials} A/A and {change_trials} trials per change per family × interval; "
          f"the rare modes on {', '.join(names[i] for i in RARE_FAMILIES)}; the boards "
          f"sweep (k = {', '.join(map(str, sweep))}) on the A/A and × 1.3 trials\n")
    for i in chosen:
        print(f"  family {i}: {names[i]}; max_us "
              + ", ".join(f"{limit_of(i, us):g} µs at {us} µs" for us in INTERVALS_US))
    print()

    started = time.monotonic()
    specs = []
    for i in chosen:
        for interval_us in INTERVALS_US:
            for c, change in enumerate(CHANGES):
                if change.spikes_per_hour and i not in RARE_FAMILIES:
                    continue
                trials = aa_trials if change.unchanged else change_trials
                specs.append((i, interval_us, c, trials,
                              sweep if c in (0, X13) else ()))
    jobs = [(i, interval_us, c, min(CHUNK, trials - start), start // CHUNK, confidence, ks)
            for i, interval_us, c, trials, ks in specs for start in range(0, trials, CHUNK)]
    # the costliest first: the unchanged and the small changes run to later looks, and
    # the sweep adds its comparisons
    jobs.sort(key=lambda job: -job[3] * (1 + len(job[6])) * (0.6 if job[2] in (X15, BODY50)
                                                              else 1.0))
    with multiprocessing.Pool(options.workers) as pool:
        chunks = pool.map(cell, jobs, chunksize=1)
    results: dict[Key, list[Result]] = {}
    for key, _, trials, _ in sorted(chunks, key=lambda c: (c[0], c[1])):
        results.setdefault(key, []).extend(trials)
    elapsed = time.monotonic() - started
    cpu = sum(c[3] for c in chunks)

    def pooled_over(change: int, only: Sequence[int] | None = None) -> list[Result]:
        return [r for i in (only or chosen) for us in INTERVALS_US
                for r in results.get((i, us, change), [])]

    width = 26
    print("== pooled over the families and both intervals: case-fail rate [95 %]")
    print(f"  {'':<28}" + "".join(f"{label:<{width}}" for label, _, _ in STRATEGIES))
    rows: list[tuple[str, int, Sequence[int] | None]] = [
        ("A/A (false fails)", 0, None), ("tail × 1.5", X15, None), ("tail × 1.3", X13, None),
        ("body + 10 % (as A/A)", BODY10, None), ("body + 50 %", BODY50, None),
        *((f"rare {rate:g}/h (limit {-math.expm1(-rate):.1%})", RARE[rate], RARE_FAMILIES)
          for rate in SPIKE_RATES)]
    measured: dict[tuple[int, int], tuple[int, int]] = {}
    for label, change, only in rows:
        trials = pooled_over(change, only)
        if not trials:
            continue
        cells = []
        for s, (_, strategy, _) in enumerate(STRATEGIES):
            k = fails(trials, strategy)
            measured[(s, change)] = (k, len(trials))
            cells.append(short(k, len(trials)))
        print(f"  {label:<28}" + "".join(f"{c:<{width}}" for c in cells) + f"of {len(trials)}")
    aa = pooled_over(0)
    print(f"  {'A/A pipeline of ' + str(CASES) + ', 1-(1-p)^' + str(CASES):<28}"
          + "".join(f"{pipeline(measured[(s, 0)][0] / len(aa)):6.1%} "
                    f"[{pipeline(aq.interval(*measured[(s, 0)])[0]):4.1%}, "
                    f"{pipeline(aq.interval(*measured[(s, 0)])[1]):4.1%}]".ljust(width)
                    for s in range(len(STRATEGIES))))
    grouped = [p for i in chosen for p in aq.pipelines(
        [results[(i, us, 0)] for us in INTERVALS_US], CASES)]
    direct = []
    for _, strategy, _ in STRATEGIES:
        failed = sum(any(strategy(r).verdict == FAIL for r in p) for p in grouped)
        direct.append(f"{failed} of {len(grouped)}" if grouped else "too few")
    print(f"  {'A/A pipelines, directly':<28}" + "".join(f"{d:<{width}}" for d in direct)
          + f"(each {CASES} A/A trials of one family, half at each interval)")
    print(f"  {'A/A mean minutes (wall)':<28}" + "".join(
        f"{np.mean([minutes(r, s) for r in aa]):6.1f}".ljust(width)
        for s in range(len(STRATEGIES))))
    how = []
    for _, strategy, _ in STRATEGIES:
        reasons = [strategy(r).how for r in aa if strategy(r).verdict == FAIL]
        how.append(", ".join(f"{h} {reasons.count(h)}" for h in sorted(set(reasons)))
                   or "none")
    print(f"  {'A/A fails by':<28}" + "".join(f"{h:<{width}}" for h in how))
    print()

    print("== (a)'s early passes: how many the rest of their hour contradicted (a later "
          "window past max_us, or the fixed hour's regression on the same windows); "
          f"stated risk {policy.exceedance_risk:.0%} (of max_us, to the cap)")
    all_early = 0
    all_against = 0
    for label, change, only in rows:
        trials = pooled_over(change, only)
        passed = [r for r in trials if early(r)]
        against = [contradicted(r) for r in passed]
        by_limit, by_regression = against.count("max_us"), against.count(REGRESSION)
        all_early += len(passed)
        all_against += by_limit + by_regression
        share = short(by_limit + by_regression, len(passed)) if passed else "-"
        print(f"  {label:<28} early passes {len(passed):>3} of {len(trials):<4} "
              f"contradicted {by_limit + by_regression:>3}: {share}  (max_us {by_limit}, "
              f"regression {by_regression})")
    print(f"  {'all':<28} early passes {all_early:>3}, contradicted {all_against}: "
          + (short(all_against, all_early) if all_early else "-"))
    print()

    print("== per family, both intervals: fails of (a) / (b) / (c), and (a)'s mean minutes "
          "on A/A")
    print(f"  {'family':<58}{'A/A':>12}{'× 1.5':>12}{'× 1.3':>12}{'+ 10 %':>12}"
          f"{'+ 50 %':>12}{'(a) A/A min':>12}")
    for i in chosen:
        cells = []
        for change in (0, X15, X13, BODY10, BODY50):
            trials = [r for us in INTERVALS_US for r in results[(i, us, change)]]
            cells.append("/".join(str(fails(trials, s)) for _, s, _ in STRATEGIES)
                         + f" ({len(trials)})")
        mean = np.mean([r.adaptive.seconds for us in INTERVALS_US
                        for r in results[(i, us, 0)]]) / 60
        print(f"  {names[i][:57]:<58}" + "".join(f"{c:>12}" for c in cells) + f"{mean:>12.1f}")
    print()

    print("== the information limit: one board-hour over k boards, each its own boot, "
          "pooled (candidate_boots=k); case fails [95 %] over the families")
    x13, aa_sweep = pooled_over(X13), pooled_over(0)
    print(f"  {'k':>2} {'minutes each':>12}   {'A/A':<24} {'× 1.3':<24} {'× 1.5 (k = 1, 4)':<24}")
    for k in SWEEP:
        strategy = pooled(k)
        if k != 1 and k not in x13[0].pooled:
            continue
        x15 = (short(fails(pooled_over(X15), strategy), len(pooled_over(X15)))
               if k in (1, BOARDS) else "")
        print(f"  {k:>2} {CAP_S / 60 / k:>12g}   "
              f"{short(fails(aa_sweep, strategy), len(aa_sweep)):<24} "
              f"{short(fails(x13, strategy), len(x13)):<24} {x15:<24}")
    light = [i for i in LIGHT_FAMILIES if i in chosen]
    if light:
        print("  an ideal test of the best single compared quantile (every boot's exact "
              "quantile, endless runs; only the boots' spread is left), × 1.3 / × 1.5: the "
              "spread known | learnt from the 20 baseline boots (t, 19 dof)")
        for i in light:
            samples = int(CAP_S * 1e6 / max(INTERVALS_US)) * CPUS
            cells = []
            for k in SWEEP:
                a = ideal_detection(families()[i], 1.3, k, confidence, samples)
                b = ideal_detection(families()[i], 1.5, k, confidence, samples)
                cells.append(f"k={k}: {a[0]:.0%}/{b[0]:.0%} | {a[1]:.0%}/{b[1]:.0%} ({a[2]})")
            print(f"    {names[i]}: " + "; ".join(cells))
    print()

    exceed = {k: [max_exceedance(families()[i], us, k, limit_of(i, us))
                  for i in chosen for us in INTERVALS_US] for k in SWEEP}
    print("== targets")
    print(f"  {'target':<36}" + "".join(f"{label:<{width + 8}}" for label, _, _ in STRATEGIES))

    def verdict(value: float, goal: float, higher: bool, unit: str = "%") -> str:
        ok = value >= goal if higher else value <= goal
        scale = 100 if unit == "%" else 1
        gap = abs(value - goal) * scale
        shown = f"{value * scale:.1f}{' ' + unit if unit != '%' else ' %'}"
        return (f"met ({shown})" if ok
                else f"MISSED by {gap:.1f}{' points' if unit == '%' else ' ' + unit} ({shown})")

    lines: dict[str, list[str]] = {}
    for s, (_, _, wall) in enumerate(STRATEGIES):
        k, n = measured[(s, 0)]
        lines.setdefault(f"A/A pipeline of {CASES} ≤ {TARGETS['pipeline']:.0%}", []).append(
            verdict(pipeline(k / n), TARGETS["pipeline"], False))
        # max_us alone, from the exact maxima (the adaptive run measures at most the hour)
        boards = BOARDS if wall == CAP_S / 60 / BOARDS else 1
        alone = pipeline(float(np.mean(exceed[boards])))
        lines.setdefault("  the same, max_us alone (exact)", []).append(
            "at most (b)'s (it measures ≤ 1 h)" if wall is None
            else verdict(alone, TARGETS["pipeline"], False))
        for key, change, goal in (("x15", X15, "× 1.5 fails ≥ 95 %"),
                                  ("x13", X13, "× 1.3 fails ≥ 80 %"),
                                  ("rare2", RARE[2.0], "rare 2/h fails ≥ 86 %")):
            if (s, change) in measured:
                k, n = measured[(s, change)]
                lines.setdefault(goal, []).append(verdict(k / n, TARGETS[key], True))
        goal = f"early passes contradicted ≤ {policy.exceedance_risk:.0%}"
        lines.setdefault(goal, []).append(
            verdict(all_against / all_early, policy.exceedance_risk, False)
            if wall is None and all_early else "met (no early pass)")
        mean = float(np.mean([minutes(r, s) for r in aa]))
        lines.setdefault("unchanged: mean ≤ 15 min", []).append(
            verdict(mean, TARGETS["minutes"], False, "min"))
    for goal, cells in lines.items():
        print(f"  {goal:<36}" + "".join(f"{c:<{width + 8}}" for c in cells))
    print()
    print("  reasons, where a target is missed:")
    budget = -math.expm1(math.log1p(-TARGETS["pipeline"]) / CASES)
    for s, (label, strategy, _) in enumerate(STRATEGIES):
        k, n = measured[(s, 0)]
        reasons = [strategy(r).how for r in aa if strategy(r).verdict == FAIL]
        if pipeline(k / n) > TARGETS["pipeline"]:
            print(f"  - {label}: A/A {k} of {n} fail per case, {reasons.count('max_us')} of "
                  "them on max_us, the rest false regressions; the pipeline's 1 % needs "
                  f"p ≤ {budget:.3%} per case")
    print("  - max_us on unchanged kernels (every strategy): from the families' exact maxima "
          "(20 000 draws per family × interval), a case exceeds it with "
          + ", ".join(f"{np.mean(exceed[k]):.2%} on {k} board{'s' if k > 1 else ''} × "
                      f"{CAP_S / 60 / k:g} min" for k in SWEEP)
          + f" (mean over the cells; the worst cell {max(max(v) for v in exceed.values()):.2%}): "
          "max_us set as tuning sets it (1.2 × the 0.99 quantile of A/A hours' maxima) is "
          "outside the comparison's error budget, and alone would need ≤ "
          f"{budget:.3%} per case for the pipeline's 1 %")
    if BODY10 in {c for _, _, c in results} and 0 in chosen:
        print(f"  - body + 10 %: on the light source it moves {body_shift(families()[0], 1.1)}: "
              "the p99.9 by more than the comparison's tolerance (5 %; the 20 % margin only "
              "lets an adaptive run stop early on no change), so a strategy that proves that "
              "shift fails the case: the stronger, the more often")
    against = {label: sum(contradicted(r) is not None for r in pooled_over(change, only))
               for label, change, only in rows}
    if all_against:
        print("  - early passes contradicted: "
              + ", ".join(f"{label} {n}" for label, n in against.items() if n)
              + "; a second mode that the first minutes' tail does not show is outside the "
              "early pass's bound (rtlab.verdict.sequential.early_pass: only the exposure "
              "bounds it)")
    rare = pooled_over(RARE[2.0], RARE_FAMILIES)
    if rare:
        # what the adaptive run's exposure allows: its A/A stop times on the same families
        stops = np.array([r.adaptive.seconds for r in pooled_over(0, RARE_FAMILIES)]) / 3600
        print(f"  - rare 2/h: any strategy sees a mode at r per board-hour with 1 - e^-r·t in "
              f"t board-hours: {-math.expm1(-2):.1%} in one hour, the most any strategy at "
              f"one board-hour can reach; (a) stops unchanged kernels after "
              f"{stops.mean() * 60:.1f} min on average on these families, which allows "
              f"{np.mean(-np.expm1(-2 * stops)):.1%}")
    print(f"  - × 1.3 and × 1.5: a single board-hour compares one boot's offset with the "
          f"baseline's; the boots' spread is the floor, whatever the length (the table "
          f"above: the ideal test at k = 1 against k = {BOARDS}); more boards at the same "
          "board-hour divide the candidate's share of that spread by k")
    if options.calibrate:
        more = calibration(options.calibrate, chosen, options.workers)
        elapsed, cpu = elapsed + more[0], cpu + more[1]
    print(f"\n({elapsed:.0f} s, {cpu:.0f} CPU-s in {options.workers} workers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
