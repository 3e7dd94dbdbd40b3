"""Time of the statistics of one run: 4 CPUs × 100 M cycles of ``cyclictest -h 400``.

Per CPU: the histogram read from its result record entry, the gate's percentiles and the
tail estimate (GPD fit and profile-likelihood interval); then one regression test of
CPU 0 against a baseline of 5 runs of 100 M cycles (hierarchical bootstrap, 1000
resamples). The target is under 1 s in all. The histograms are drawn once beforehand
(a lognormal body around 15 µs and a generalised Pareto tail, as in
bench/verdict_quality.py); the figures are the median and best of several repetitions.

    .venv/bin/python bench/stats_speed.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
from scipy import special

from rtlab.verdict.comparison import compare
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.tail import tail_estimate

CPUS = 4
CYCLES = 100_000_000
RANGE_US = 400
BASELINE_RUNS = 5


def record_cpu(rng: np.random.Generator, cpu: int) -> dict[str, object]:
    """A result record's CPU entry with a histogram of CYCLES samples."""
    edges = np.arange(RANGE_US + 1, dtype=float)
    u0, zeta, shape, scale = 19.0, 0.03, 0.1, 3.0
    body = special.ndtr(np.log(np.maximum(edges, 1e-9) / 15) / 0.12) / special.ndtr(
        np.log(u0 / 15) / 0.12)
    tail = 1 - zeta * (1 + shape * np.maximum(edges - u0, 0) / scale) ** (-1 / shape)
    cdf = np.where(edges < u0, (1 - zeta) * body, tail)
    probs = np.append(np.diff(cdf), 1 - cdf[-1])
    probs[0] += cdf[0]
    counts = rng.multinomial(CYCLES, probs / probs.sum())
    (buckets,) = np.nonzero(counts[:-1])
    return {"cpu": cpu, "samples": CYCLES, "overflows": int(counts[-1]),
            "max_us": int(buckets[-1]) if not counts[-1] else RANGE_US + 50,
            "histogram_range_us": RANGE_US,
            "histogram": {str(b): int(counts[b]) for b in buckets}}


def one_run(cpus: list[dict[str, object]],
            baseline: list[Histogram]) -> tuple[float, float, float, float]:
    started = time.perf_counter()
    hists = [Histogram.from_record_cpu(cpu) for cpu in cpus]
    read = time.perf_counter()
    for hist in hists:
        hist.percentiles()
    percentiles = time.perf_counter()
    for hist in hists:
        estimate = tail_estimate(hist, 150, interval_us=1000)
        assert estimate.fitted, estimate.warnings
    tails = time.perf_counter()
    compare(hists[0], baseline)
    compared = time.perf_counter()
    return (read - started, percentiles - read, tails - percentiles, compared - tails)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    rng = np.random.default_rng(1)
    cpus = [record_cpu(rng, cpu) for cpu in range(CPUS)]
    baseline = [Histogram.from_record_cpu(record_cpu(rng, 0)) for _ in range(BASELINE_RUNS)]
    one_run(cpus, baseline)  # warm up imports and caches
    runs = [one_run(cpus, baseline) for _ in range(options.repeat)]
    totals = [sum(run) for run in runs]
    names = ("read records", "percentiles", "tail estimates", f"compare vs {BASELINE_RUNS} runs")
    print(f"{CPUS} CPUs × {CYCLES:,} cycles (-h {RANGE_US}), {options.repeat} repetitions")
    for index, name in enumerate(names):
        times = [run[index] for run in runs]
        print(f"  {name:<22} median {statistics.median(times) * 1000:7.1f} ms   "
              f"best {min(times) * 1000:7.1f} ms")
    median = statistics.median(totals)
    print(f"  {'total':<22} median {median * 1000:7.1f} ms   best {min(totals) * 1000:7.1f} ms"
          f"   — target < 1000 ms: {'met' if median < 1 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
