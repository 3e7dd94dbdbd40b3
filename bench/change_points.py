"""How well do the trends' change points see a change, against the nightly comparison
alone (issue 46, point 6)?

A series is a default branch's nightly runs of one case on one board: each night a fresh
boot of a family of bench/latency_families.py's ``rack_families`` (the light synthetic
source, bursts, one noisy CPU, the real civcode 4-core board's recorded shape, boots that
scale the tail by their own offset: log-sd 0.05 and 0.10), each run its own latency scale
(3 %) and tail weight (10 %). The kernel changes on a random night between
``--nights / 3`` and ``--nights / 2`` (latency_families.Change, from that night on):

* **unchanged** (A/A);
* **step × 1.2** and **step × 1.5**: the tail's scale;
* **creep 5 %/night**: the tail's scale × 1.05 more each night;
* **rare mode**: a second mode of 2 events per board-hour above max_us appears (each one
  wake-up between 150 and 225 µs).

Every night both are judged as a lab would see them:

* **change points** (rtlab.verdict.changepoints.find_changes, as a report runs it: on the
  series so far): found when a regression change point spans the change's night (± 3);
  a false one is a change point of an unchanged series, counted once however many
  nights find it again;
* **the comparison alone** (rtlab.verdict.comparison.compare_tail, the gate's confidence
  for a pipeline of 16 cases: ``case_confidence(0.01, 16)``), the night's run against
  the newest 10 nights that it did not find regressed (a regressed run never joins a
  baseline; an in-margin step does).

It prints per family and change: how many series found it within the nights left, the
median nights until found (1: the night it came), and for the unchanged series the false
change points and false regressions per 100 nightlies. A regression is counted found
only when it is reported as one.

    .venv/bin/python bench/change_points.py [--quick] [--trials 20] [--nights 60]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import latency_families as lf  # noqa: E402

from rtlab.verdict.case import case_confidence  # noqa: E402
from rtlab.verdict.changepoints import REGRESSION, find_changes  # noqa: E402
from rtlab.verdict.comparison import compare_tail  # noqa: E402
from rtlab.verdict.tailsummary import TailSummary  # noqa: E402

CHANGES = ("unchanged", "step × 1.2", "step × 1.5", "creep 5 %/night", "rare mode 2/h")
BASELINE_RUNS = 10
NEAR = 3
INTERVAL_US = 1000
CPUS = 4
RARE_LIMIT_US = 150.0


def _night_run(family: lf.Family, change: str, nights_since: int, rng: np.random.Generator,
               wakeups: int):
    """One night's run: a fresh boot, changed from the change's night on."""
    tail, spikes = 1.0, 0.0
    if nights_since >= 0:
        if change == "step × 1.2":
            tail = 1.2
        elif change == "step × 1.5":
            tail = 1.5
        elif change == "creep 5 %/night":
            tail = 1.05 ** (nights_since + 1)
        elif change == "rare mode 2/h":
            spikes = 2.0
    boot = lf.boot(family, lf.Change(change, tail=tail, spikes_per_hour=spikes), rng,
                   limit_us=RARE_LIMIT_US, interval_us=INTERVAL_US, cpus=CPUS)
    scale, weight = (float(v[0]) for v in family.run_variation(rng, 1))
    return boot.run_histogram(wakeups, rng, scale, weight)


def one_series(task: tuple[int, str, int, int, int, int]) -> dict:
    family_index, change, trial, nights, wakeups, seed = task
    family = lf.rack_families()[family_index]
    rng = np.random.default_rng([seed, family_index, CHANGES.index(change), trial])
    start = int(rng.integers(nights // 3, nights // 2 + 1))
    changed = change != "unchanged"
    histograms, summaries = [], []
    confidence = case_confidence(0.01, 16)
    baseline: list = []
    found_cp = found_cmp = None
    false_cp: list[tuple[int, str]] = []
    false_cmp = 0
    looked = 0
    for night in range(nights):
        hist = _night_run(family, change, night - start if changed else -1, rng, wakeups)
        histograms.append(hist)
        summaries.append(TailSummary.of([hist]))
        if len(baseline) >= 3:
            looked += 1
            comparison = compare_tail(hist, baseline[-BASELINE_RUNS:], quantile=0.999,
                                      confidence=confidence, seed=int(rng.integers(2**62)))
            regressed = comparison.outcome == "regression"
            if regressed:
                if changed and night >= start and found_cmp is None:
                    found_cmp = night - start + 1
                elif not changed or night < start:
                    false_cmp += 1
            else:
                baseline.append(hist)
        else:
            baseline.append(hist)
        if len(summaries) < 6 or (changed and found_cp is not None):
            continue
        for found in find_changes(summaries):
            spans = found.first_step - NEAR <= start <= found.first_after + NEAR
            if changed and night >= start and found.direction == REGRESSION and spans:
                if found_cp is None:
                    found_cp = night - start + 1
            elif not (changed and spans):
                key = (found.first_after, found.direction)
                if not any(abs(k[0] - key[0]) <= NEAR and k[1] == key[1] for k in false_cp):
                    false_cp.append(key)
    return {"family": family.name, "change": change, "found_cp": found_cp,
            "found_cmp": found_cmp, "false_cp": len(false_cp), "false_cmp": false_cmp,
            "nights": nights, "looked": looked, "nights_after": nights - start}


def _median(values: list[int]) -> str:
    return f"{statistics.median(values):g}" if values else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="4 series per family and change, 36 s runs (a smoke test)")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--nights", type=int, default=60)
    parser.add_argument("--wakeups", type=int, default=3_600_000 * CPUS,
                        help="a night's run, every CPU's wake-ups (default: an hour at "
                             "1 ms on 4 CPUs)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    if args.quick:
        args.trials, args.wakeups = 4, 360_000 * CPUS // 10
    families = lf.rack_families()
    tasks = [(f, change, t, args.nights, args.wakeups, args.seed)
             for f in range(len(families)) for change in CHANGES for t in range(args.trials)]
    began = time.perf_counter()
    with multiprocessing.Pool(args.workers) as pool:
        results = pool.map(one_series, tasks, chunksize=1)
    print(f"{len(tasks)} nightly series of {args.nights} nights, {args.wakeups} wake-ups "
          f"a night, {time.perf_counter() - began:.0f} s on {args.workers} worker(s)")
    print("| family | change | change points: found, median nights | comparison alone: "
          "found, median nights |")
    print("| --- | --- | --- | --- |")
    for family in families:
        for change in CHANGES[1:]:
            rows = [r for r in results if r["family"] == family.name and r["change"] == change]
            cp = [r["found_cp"] for r in rows if r["found_cp"] is not None]
            cmp = [r["found_cmp"] for r in rows if r["found_cmp"] is not None]
            print(f"| {family.name} | {change} | {len(cp)}/{len(rows)}, {_median(cp)} | "
                  f"{len(cmp)}/{len(rows)}, {_median(cmp)} |")
    print()
    print("| family | unchanged: false change points per 100 nightlies | false regressions "
          "per 100 nightly comparisons |")
    print("| --- | --- | --- |")
    total_cp = total_cmp = total_nights = total_looked = 0
    for family in families:
        rows = [r for r in results if r["family"] == family.name and r["change"] == "unchanged"]
        nights = sum(r["nights"] for r in rows)
        looked = sum(r["looked"] for r in rows)
        fcp, fcmp = sum(r["false_cp"] for r in rows), sum(r["false_cmp"] for r in rows)
        total_cp, total_cmp = total_cp + fcp, total_cmp + fcmp
        total_nights, total_looked = total_nights + nights, total_looked + looked
        print(f"| {family.name} | {100 * fcp / nights:.2f} ({fcp} in {nights}) | "
              f"{100 * fcmp / max(looked, 1):.2f} ({fcmp} in {looked}) |")
    print(f"| all | {100 * total_cp / total_nights:.2f} ({total_cp} in {total_nights}) | "
          f"{100 * total_cmp / max(total_looked, 1):.2f} ({total_cmp} in {total_looked}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
