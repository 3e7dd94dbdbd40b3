"""Does the tail estimate say what real boards' wake-ups say? (issue 44, point 3)

Every cyclictest ``-h`` dump under REAL_DATA (../shared/data/real-cyclictest, provenance in
each folder's PROVENANCE.md) that parses; each CPU column with at least 1 M wake-ups and a
known maximum. Per column, with N its wake-ups:

1. **Where the data reach.** The 1e-6 quantile (asked of every CPU by the tail gate) from
   the whole column: with N >= 1 M the wake-ups reach it, so the answer must be their
   own quantile (``bound_from`` empirical) with its exact binomial interval; printed beside
   what the fixed-p99 GPD fit of before (``tail_fraction=0.01``, extrapolating from the
   top 1 %) would have said.
2. **Where they do not.** The column thinned to 1 % (each wake-up kept with probability
   0.01: a run 100 times shorter of the same board), asked for the quantile p = 10 / N,
   which the thinned run does not reach (N p / 100 = 0.1) and the whole column measures
   with 10 wake-ups above it. The fit from the threshold chosen where the tail begins
   (the default) and from the fixed p99, each with its 95 % interval, against the measured
   value: inside the interval, or above it (the fit underrates the tail: a gate on it
   could fail nothing or pass too much), or below. 5 thinnings per column.

Prints one line per column and a tally per method (how often the measured quantile lies
inside, above and below the interval; the median ratio of the estimate to the measured).
Nothing is asserted; the figures go to docs/measured.md with the date.

    .venv/bin/python bench/tail_fit_real.py [--thinnings 5] [--min-samples 1000000]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latency_families as lf  # noqa: E402  (REAL_DATA, real_dumps)

from rtlab.verdict.histogram import Histogram  # noqa: E402
from rtlab.verdict.tail import tail_estimate  # noqa: E402

P_GATE = 1e-6
KEEP = 0.01


def columns(min_samples: int) -> tuple[list[tuple[str, Histogram]], list[str]]:
    found = []
    dumps, left_out = lf.real_dumps()
    for name, dump in dumps:
        for column in dump.columns:
            hist = Histogram(np.array(column.counts, dtype=np.int64), column.overflows,
                             float(column.max_us) if column.max_us is not None else None)
            label = f"{name} thread {column.thread}"
            if hist.samples < min_samples:
                left_out.append(f"{label}: {hist.samples} wake-ups")
                continue
            found.append((label, hist))
    return found, left_out


def measured(hist: Histogram, p: float) -> float | None:
    rank = math.ceil(hist.samples * (1 - p))
    return hist.quantile(Fraction(rank, hist.samples))


def thinned(hist: Histogram, rng: np.random.Generator) -> Histogram:
    counts = rng.binomial(hist.counts, KEEP)
    overflows = int(rng.binomial(hist.overflows, KEEP))
    top = np.nonzero(counts)[0]
    return Histogram(counts, overflows,
                     hist.known_max_us if overflows else (float(top[-1]) if top.size else None))


def where(value: float | None, interval: tuple[float, float] | None) -> str:
    if value is None or interval is None:
        return "n/a"
    if value < interval[0]:
        return "below"
    if value > interval[1]:
        return "above"
    return "inside"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--thinnings", type=int, default=5)
    parser.add_argument("--min-samples", type=int, default=1_000_000)
    args = parser.parse_args()
    began = time.monotonic()
    found, left_out = columns(args.min_samples)
    print(f"{len(found)} CPU columns of >= {args.min_samples:,} wake-ups under {lf.REAL_DATA}; "
          f"{len(left_out)} left out (shorter, or not a -h dump)")
    print("\n1. where the wake-ups reach p = 1e-6: the measured quantile, and what the fixed "
          "p99 fit alone said")
    reach: dict[str, list[float]] = {"chosen": [], "p99": []}
    for label, hist in found:
        truth = measured(hist, P_GATE)
        ours = tail_estimate(hist, None, P_GATE)
        old = tail_estimate(hist, None, P_GATE, tail_fraction=0.01, empirical=False)
        interval = ours.bound_ci_us
        old_text = ("no fit" if old.bound_us is None else
                    f"{old.bound_us:.0f} [{old.bound_ci_us[0]:.0f}, {old.bound_ci_us[1]:.0f}]"
                    f" from {old.pot_threshold_us} µs ({where(truth, old.bound_ci_us)})")
        print(f"  {label}: {hist.samples / 1e6:.3g} M, measured {truth} µs; rtlab "
              f"{ours.bound_from} {ours.bound_us:.0f} [{interval[0]:.0f}, {interval[1]:.0f}]; "
              f"fixed-p99 fit {old_text}")
        if truth and old.bound_us is not None:
            reach["p99"].append(old.bound_us / truth)
        if truth and ours.bound_us is not None:
            reach["chosen"].append(ours.bound_us / truth)
    print("\n2. thinned to 1 %, asked p = 10/N (10× beyond the thinned run), against the "
          "whole column's measured quantile")
    tally: dict[str, dict[str, int]] = {m: {"inside": 0, "above": 0, "below": 0, "n/a": 0,
                                            "warned": 0}
                                        for m in ("chosen", "p99")}
    ratios: dict[str, list[float]] = {"chosen": [], "p99": []}
    rng = np.random.default_rng(44)
    for label, hist in found:
        p = 10 / hist.samples
        truth = measured(hist, p)
        parts = []
        for _ in range(args.thinnings):
            short = thinned(hist, rng)
            for method, fraction in (("chosen", None), ("p99", 0.01)):
                fit = tail_estimate(short, None, p, tail_fraction=fraction)
                # a fit that warned (heavy, poor, censored) fails no case and sets no
                # limit: counted apart (the extrapolation warning is the question asked)
                warned = [w for w in fit.warnings if "extrapolates" not in w]
                side = "warned" if warned else where(truth, fit.bound_ci_us)
                tally[method][side] += 1
                if fit.bound_us is not None and truth and not warned:
                    ratios[method].append(fit.bound_us / truth)
                if method == "chosen":
                    parts.append(f"{fit.bound_us or float('nan'):.0f}"
                                 f"@{fit.pot_threshold_us}({side[0]})")
        print(f"  {label}: measured q(1-{p:.2g}) = {truth} µs; chosen-threshold fits "
              f"{' '.join(parts)}")
    print("\ntally (measured quantile against the fit's 95 % interval):")
    for method, counts in tally.items():
        total = sum(counts.values())
        ratio = statistics.median(ratios[method]) if ratios[method] else float("nan")
        name = "threshold where the tail begins" if method == "chosen" else "fixed p99"
        print(f"  {name:32} inside {counts['inside']}/{total}, above {counts['above']}, "
              f"below {counts['below']}, warned {counts['warned']}, no fit {counts['n/a']}; "
              f"median estimate/measured of the unwarned {ratio:.2f}")
    for method, values in reach.items():
        if values:
            print(f"  at p = 1e-6 on the whole columns, {method}: median estimate/measured "
                  f"{statistics.median(values):.2f} (min {min(values):.2f}, max "
                  f"{max(values):.2f})")
    print(f"\n{time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
