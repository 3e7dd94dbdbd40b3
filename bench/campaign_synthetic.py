"""A campaign's report on synthetic results with a known answer: how close the report's
shifts come to the cost each load was given, and whether an unchanged load is called
"no measurable change".

Result records are written as the on-board suite writes them (every CPU's histogram, the
load's proof, the variant's identity), for every board × variant × load × interval ×
repeat of a campaign file, from a latency model per load (a log-normal body and a
generalised Pareto tail; every run's latencies scaled by its own factor, the run-to-run
spread). The candidate of each pair gets a known cost per load, added to every wake-up.
The records are ingested into a fresh store and ``rtlab report --campaign`` is written;
the script prints, per pair and load, the cost given and the report's verdict.

    .venv/bin/python bench/campaign_synthetic.py hardening --out out/campaign-synthetic \
        [--duration 600] [--repeat 2] [--spread 0.02]

The hardening campaign's figure in the README comes from this script (synthetic data:
it shows what the report says, not what hardening costs any kernel).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy import special

from rtlab.artifacts.record import SCHEMA, write_record
from rtlab.campaign.spec import Campaign, load_campaign

RANGE_US = 400
CPUS = 4
# the latency model per load: the body's median (µs), the tail's weight, scale and shape
LOADS = {"idle": (9.0, 0.01, 2.0, 0.05), "cpu25": (11.0, 0.02, 3.0, 0.08),
         "cpu50": (12.0, 0.025, 3.5, 0.1), "cpu75": (13.0, 0.03, 4.0, 0.1),
         "cpu100": (14.0, 0.03, 4.5, 0.12), "hackbench": (18.0, 0.05, 7.0, 0.15)}
# the candidate's known cost per load (µs added to every wake-up)
COSTS = {"idle": 0, "cpu25": 2, "cpu50": 3, "cpu75": 4, "cpu100": 5, "hackbench": 12}
UTILISATION = {"idle": 0.03, "cpu25": 0.27, "cpu50": 0.52, "cpu75": 0.77, "cpu100": 0.99,
               "hackbench": 0.92}


def tail_latency(load: str, shift_us: int, scale: float, survival: float) -> float:
    """The latency one wake-up exceeds with probability ``survival`` (in the GPD tail)."""
    median, weight, tail_scale, shape = LOADS[load]
    excess = tail_scale / shape * ((survival / weight) ** -shape - 1)
    return (median * 1.6 + excess) * scale + shift_us


def probabilities(load: str, shift_us: int, scale: float) -> np.ndarray:
    """P(bucket 0..RANGE-1) and P(overflow) of one run's wake-ups."""
    median, weight, tail_scale, shape = LOADS[load]
    edges = (np.arange(RANGE_US + 1, dtype=float) - shift_us) / scale
    start = median * 1.6
    body = special.ndtr(np.log(np.maximum(edges, 1e-9) / median) / 0.15) / special.ndtr(
        np.log(start / median) / 0.15)
    tail = 1 - weight * (1 + shape * np.maximum(edges - start, 0) / tail_scale) ** (-1 / shape)
    cdf = np.where(edges < start, (1 - weight) * body, tail)
    probs = np.append(np.diff(cdf), 1 - cdf[-1])
    probs[0] += cdf[0]
    return np.maximum(probs, 0) / np.maximum(probs, 0).sum()


def cpu_entry(rng: np.random.Generator, cpu: int, samples: int, probs: np.ndarray,
              overflow_max: Callable[[int], float], outlier_us: int | None = None
              ) -> dict[str, Any]:
    counts = rng.multinomial(samples, probs)
    histogram, overflows = counts[:-1], int(counts[-1])
    if outlier_us is not None:
        histogram[min(outlier_us, RANGE_US - 1)] += 1
        histogram[int(np.argmax(histogram))] -= 1
    (buckets,) = np.nonzero(histogram)
    top = float(buckets[-1]) if buckets.size else 0.0
    # past the range the largest of the overflows, drawn from the model's tail
    maximum = top if not overflows else float(math.floor(overflow_max(overflows)))
    avg = float((histogram * (np.arange(RANGE_US) + 0.5)).sum() + overflows * maximum) / samples
    return {"cpu": cpu, "thread": cpu, "samples": samples, "min_us": float(buckets[0]),
            "avg_us": round(avg, 2), "max_us": maximum, "overflows": overflows,
            "histogram_range_us": RANGE_US,
            "histogram": {str(b): int(histogram[b]) for b in buckets}}


def records(campaign: Campaign, *, duration_s: int, repeat: int, spread: float,
            seed: int = 1, board_prefix: str = "", costs: dict[str, int] | None = None
            ) -> list[dict[str, Any]]:
    costs = COSTS if costs is None else costs
    rng = np.random.default_rng(seed)
    run_id = f"{campaign.name}:synthetic"
    start = datetime.datetime(2026, 11, 25, 8, 0, tzinfo=datetime.UTC)
    candidates = {pair.candidate for pair in campaign.pairs} - {
        pair.baseline for pair in campaign.pairs}
    found = []
    clock = start
    for board in campaign.boards:
        for round_ in range(1, repeat + 1):
            for variant in campaign.variants.values():
                scale = math.exp(rng.normal(0, spread))
                for scenario in campaign.scenarios:
                    for interval in campaign.intervals_us:
                        cost = costs.get(scenario, 0) if variant.name in candidates else 0
                        probs = probabilities(scenario, cost, scale)
                        samples = duration_s * 1_000_000 // interval

                        def overflow_max(count: int, scenario: str = scenario,
                                         cost: int = cost, scale: float = scale,
                                         beyond: float = float(probs[-1])) -> float:
                            # the largest of `count` wake-ups past the range: P(X > x) is
                            # beyond * (1 - U^(1/count)) for a uniform U
                            return tail_latency(scenario, cost, scale, beyond * -math.expm1(
                                math.log(rng.random()) / count))
                        outlier = (300 if (scenario, round_, variant.name)
                                   == ("cpu75", 1, next(iter(campaign.variants))) else None)
                        cpus = [cpu_entry(rng, cpu, samples, probs, overflow_max,
                                          outlier if cpu == 2 else None)
                                for cpu in range(CPUS)]
                        tag = f"{board_prefix}{board}"
                        load = ({"cpu": {"percent": int(scenario[3:])}}
                                if scenario.startswith("cpu") else
                                {} if scenario == "idle" else {scenario: {}})
                        needed = (0.5 * int(scenario[3:]) / 100 if scenario.startswith("cpu")
                                  else 0.25 if scenario == "hackbench" else 0.0)
                        busy = UTILISATION[scenario] + rng.normal(0, 0.005)
                        found.append({
                            "schema": SCHEMA, "kind": "cyclictest",
                            "case": f"tests/target/test_latency.py::test_latency[{scenario}-"
                                    f"{interval}us]",
                            "name": f"{tag}/{variant.name}/{scenario}/{interval}us",
                            "board": tag, "flavour": variant.name, "place": f"{board}-01",
                            "scenario": scenario, "interval_us": interval,
                            "duration_s": duration_s, "started": clock.isoformat(),
                            "finished": (clock + datetime.timedelta(seconds=duration_s))
                            .isoformat(),
                            "verdict": "pass", "message": "", "loads": load, "cpus": cpus,
                            "load_check": {
                                "cpu_utilisation": round(busy, 3),
                                "min_utilisation": needed,
                                "loadavg_before": f"{3.9 * busy:.2f} 3.1 2.0 5/98 1200",
                                "loadavg": f"{4.0 * busy:.2f} 3.2 2.1 5/98 1234",
                                "temperatures_mc": [[45000 + 9000 * int(busy * 10) // 10],
                                                    [46000 + 9000 * int(busy * 10) // 10]]},
                            "system": {"kernel_release": "6.12.100-rt15"},
                            "thresholds_flavour": variant.thresholds,
                            "variant": variant.identity(campaign.name),
                            "campaign_run": run_id,
                            "run_id": f"{run_id}:{board}:{variant.name}:{round_}",
                        })
                        clock += datetime.timedelta(seconds=duration_s + 20)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("campaign", help="a campaign's name or file (e.g. hardening)")
    parser.add_argument("--out", default="out/campaign-synthetic")
    parser.add_argument("--duration", type=int, default=600, help="seconds per case")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--spread", type=float, default=0.02,
                        help="run-to-run spread: the sd of each run's log scale factor")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-cost", action="store_true",
                        help="A/A: the candidate costs nothing anywhere (every 'costs' or "
                             "'saves' the report says is a false one)")
    args = parser.parse_args(argv)
    costs = {load: 0 for load in COSTS} if args.no_cost else COSTS
    from rtlab.campaign.page import write_campaign_report
    from rtlab.store import ingest_folder, open_store

    campaign = load_campaign(args.campaign)
    out = Path(args.out)
    folder = out / "results"
    for old in folder.glob("*.json"):
        old.unlink()
    for record in records(campaign, duration_s=args.duration, repeat=args.repeat,
                          spread=args.spread, seed=args.seed, costs=costs):
        write_record(folder, {k: v for k, v in record.items() if k != "schema"})
    db = out / "results.db"
    db.unlink(missing_ok=True)
    store = open_store(f"sqlite:///{db.resolve()}")
    try:
        print(ingest_folder(store, folder))
        written = write_campaign_report(store, campaign, out / "report")
    finally:
        store.close()
    tables = json.loads(written.json.read_text())
    print(f"{'pair':40} {'board':6} {'load':10} {'cost given':>10}  report")
    outcomes: dict[tuple[bool, str], int] = {}
    held = compared = 0
    for pair in tables["pairs"]:
        given = costs.get(pair["scenario"], 0)
        for shift in pair["shifts"]:
            print(f"{pair['candidate'] + ' vs ' + pair['baseline']:40} {pair['board']:6} "
                  f"{pair['scenario']:10} {given:>7} µs  {shift['verdict']}")
            key = (given > 0, shift["outcome"])
            outcomes[key] = outcomes.get(key, 0) + 1
            if shift["ci_us"] is not None:
                compared += 1
                held += shift["ci_us"][0] <= given <= shift["ci_us"][1]
    print("\nverdicts (cost given > 0, outcome): " + ", ".join(
        f"{'cost' if cost else 'none'} -> {outcome}: {count}"
        for (cost, outcome), count in sorted(outcomes.items())))
    print(f"intervals holding the cost given: {held} of {compared}")
    print(f"report: {written.html}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
