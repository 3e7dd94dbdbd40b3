"""Latency sources that the verdict was not built on, for bench/adaptive_quality.py: bursts,
one noisy CPU, a rare independent mode, and boards modelled on the real cyclictest outputs of
../shared/data/real-cyclictest/ (each CPU its own recorded shape).

bench/verdict_quality.py's sources are one distribution for every CPU and every minute: a
body and one GPD tail, the whole run varied by one scale and tail weight. A board is not
like that, and each family here breaks one of those assumptions:

* **bursts**: some minutes are worse than others (a periodic job, a log flush). 5 % of
  the one-minute windows carry 5 × the tail weight at 2 × its scale; a run's number of
  burst minutes is binomial, so hours differ by more than their scale and weight say.
* **one noisy CPU**: three CPUs like the light synthetic source, the fourth (the one that
  takes the interrupts) with twice the tail weight and a heavier tail (ξ = 0.25). The
  case merges the CPUs' wake-ups, so its tail is a mixture no single GPD was fitted to.
* **rare mode**: the light synthetic source plus an independent mode the tail never
  shows: one wake-up in 10^9 takes 150-400 µs (an SMI, a firmware call). An hour at
  100 µs (144 M wake-ups on 4 CPUs) meets it 13 % of the time, at 1000 µs 1.4 %.
* **real** boards: each CPU's column of a recorded ``-h`` dump is its own component, its
  body as recorded and its top 0.1 % (at most 20,000 samples) the GPD that
  rtlab.verdict.tail fits, overflows censored; the case's wake-ups come from every
  column equally. A recording is one boot, so the run-to-run spread is the same assumed
  3 % scale and 10 % tail weight as the synthetic sources.

A family samples exactly as a verdict_quality Model (``run_variation``, ``run_histogram``
for one window of a run, ``histogram`` for a whole run of WINDOWS windows, ``maxima``
exactly for the max gate and the tuned max_us), so the benches take either.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import attr
import numpy as np
import verdict_quality as vq

from rtlab.measure.cyclictest import parse_histogram
from rtlab.verdict.histogram import Histogram

# RTLAB_REAL_DATA: the recordings elsewhere (a machine without ../shared)
REAL_DATA = Path(os.environ.get(
    "RTLAB_REAL_DATA",
    Path(__file__).resolve().parents[2] / "shared" / "data" / "real-cyclictest"))
# a whole run is this many one-minute windows (bench/adaptive_quality.py's hour)
WINDOWS = 60
REAL_TAIL_FRACTION = 0.001


@attr.frozen
class Family:
    """A board whose wake-ups come from ``cpus`` (each a verdict_quality Model, sharing the
    run's variation), in bursts, and with a rare independent mode."""

    name: str
    cpus: tuple[vq.Model, ...]
    # the share of windows that are bursts, and what a burst does to the tail
    burst_share: float = 0.0
    burst_weight: float = 1.0
    burst_tail: float = 1.0
    # one wake-up in 1/rare_rate takes uniformly rare_low_us..rare_high_us (× the run's
    # scale); a regression of the tail does not touch it
    rare_rate: float = 0.0
    rare_low_us: float = 0.0
    rare_high_us: float = 0.0
    scale_sd: float = vq.RUN_SCALE_SD
    weight_sd: float = vq.RUN_TAIL_WEIGHT_SD

    def run_variation(self, rng: np.random.Generator,
                      size: int) -> tuple[np.ndarray, np.ndarray]:
        return (np.exp(rng.normal(0, self.scale_sd, size)),
                np.exp(rng.normal(0, self.weight_sd, size)))

    def run_histogram(self, n: int, rng: np.random.Generator, scale: float, weight: float,
                      tail: float = 1.0) -> Histogram:
        """One window of n wake-ups of a run whose variation is given."""
        burst = rng.random() < self.burst_share
        return self._part(n, rng, scale, weight, tail, burst)

    def histogram(self, n: int, rng: np.random.Generator, tail: float = 1.0) -> Histogram:
        """A whole run of n wake-ups: WINDOWS windows, a binomial number of them bursts."""
        scale, weight = (float(v[0]) for v in self.run_variation(rng, 1))
        bursts = int(rng.binomial(WINDOWS, self.burst_share)) if self.burst_share else 0
        in_bursts = n * bursts // WINDOWS
        parts = [self._part(n - in_bursts, rng, scale, weight, tail, False)]
        if in_bursts:
            parts.append(self._part(in_bursts, rng, scale, weight, tail, True))
        return Histogram.merged(parts)

    def _part(self, n: int, rng: np.random.Generator, scale: float, weight: float,
              tail: float, burst: bool) -> Histogram:
        if burst:
            weight, tail = weight * self.burst_weight, tail * self.burst_tail
        shares = self._shares(n)
        parts = [cpu.run_histogram(share, rng, scale, weight, tail)
                 for cpu, share in zip(self.cpus, shares, strict=True) if share]
        hist = Histogram.merged(parts)
        rare = int(rng.poisson(n * self.rare_rate)) if self.rare_rate else 0
        if not rare:
            return hist
        values = np.floor(rng.uniform(self.rare_low_us, self.rare_high_us, rare) * scale)
        counts = hist.counts.copy()
        inside = values[values < vq.RANGE_US].astype(int)
        np.add.at(counts, inside, 1)
        overflows = hist.overflows + int((values >= vq.RANGE_US).sum())
        # the window's max stays unknown where an overflow of the tail left it unknown
        known = hist.known_max_us
        max_us = (None if known is None and hist.overflows
                  else max(known or 0.0, float(values.max())))
        return Histogram(counts, overflows, max_us)

    def _shares(self, n: int) -> list[int]:
        base, extra = divmod(n, len(self.cpus))
        return [base + (i < extra) for i in range(len(self.cpus))]

    def maxima(self, n: int, trials: int, rng: np.random.Generator,
               tail: float = 1.0) -> np.ndarray:
        """The max of a run of n wake-ups, exactly, for ``trials`` runs (each its own
        variation and its own count of burst windows)."""
        scale, weight = self.run_variation(rng, trials)
        bursts = (rng.binomial(WINDOWS, self.burst_share, trials) if self.burst_share
                  else np.zeros(trials, dtype=int))
        # each CPU's max, then the rare mode's (its count is Poisson, its largest value
        # the max of that many uniforms)
        best = np.zeros(trials)
        for cpu, share in zip(self.cpus, self._shares(n), strict=True):
            if not share:
                continue
            in_bursts = share * bursts // WINDOWS
            for count, w, t in ((share - in_bursts, weight, tail),
                                (in_bursts, weight * self.burst_weight,
                                 tail * self.burst_tail)):
                s = -np.expm1(np.log(rng.random(trials)) / np.maximum(count, 1))
                value = np.floor(cpu.quantile_sf(s, scale, w, t))
                best = np.maximum(best, np.where(count > 0, value, 0.0))
        if self.rare_rate:
            rare = rng.poisson(n * self.rare_rate, trials)
            top = self.rare_low_us + (self.rare_high_us - self.rare_low_us) * (
                rng.random(trials) ** (1 / np.maximum(rare, 1)))
            best = np.maximum(best, np.where(rare > 0, np.floor(top * scale), 0.0))
        return best


def real_cpu(name: str, counts: np.ndarray, overflows: int, max_us: float | None) -> vq.Model:
    """One recorded column: its body as recorded below u0, the GPD rtlab.verdict.tail fits
    to the samples at u0 or more above it. u0 is the lowest bucket with at most
    REAL_TAIL_FRACTION of the samples (and at most 20,000) at or above it: the fit's own
    threshold, the sample ranked that far from the top, would sit on the crowded buckets of
    a sharp body (civcode: 15 % of a CPU's samples in its threshold bucket, a fitted ξ of 1)."""
    hist = Histogram(counts, overflows, max_us)
    at_or_above = np.cumsum(counts[::-1])[::-1] + overflows
    limit = min(REAL_TAIL_FRACTION * hist.samples, 20_000)
    u0 = int(np.argmax(at_or_above <= limit))
    return vq.histogram_model(name, hist, float(at_or_above[u0]) / hist.samples)


def real(name: str, file: str, columns: tuple[int, ...] | None = None) -> Family:
    """The board of one recorded ``-h`` dump under REAL_DATA, each column a CPU."""
    path = REAL_DATA / file
    dump = parse_histogram(path.read_text(encoding="utf-8"), str(path))
    chosen = [c for c in dump.columns if columns is None or c.thread in columns]
    cpus = tuple(real_cpu(f"{name} thread {c.thread}", np.array(c.counts, dtype=np.int64),
                          c.overflows, float(c.max_us)) for c in chosen)
    return Family(f"{name} ({len(cpus)} CPUs, {min(c.samples for c in chosen) / 1e6:.3g} M "
                  "wake-ups each)", cpus)


def families() -> list[Family]:
    light = vq.synthetic("light", median=15, spread=0.12, zeta=0.03, shape=0.1, scale=3.0)
    noisy = vq.synthetic("noisy", median=15, spread=0.12, zeta=0.06, shape=0.25, scale=3.0)
    return [
        Family("bursts (5 % of minutes: tail weight × 5, scale × 2)", (light,),
               burst_share=0.05, burst_weight=5.0, burst_tail=2.0),
        Family("one noisy CPU (3 light, 1 with ξ=0.25 and twice the tail weight)",
               (light, light, light, noisy)),
        Family("rare mode (1 in 10^9 wake-ups takes 150-400 µs)", (light,),
               rare_rate=1e-9, rare_low_us=150.0, rare_high_us=400.0),
        real("real civcode 4-core", "civcode-4core-h400/output.txt"),
        real("real J1900 (luminize)", "luminize-machinekit-x86/2017-01-02_17-49-41"),
        real("real Core i7 (ebots)", "ebots-hung-i7-12thr/output"),
    ]


def check() -> None:
    """Each family's whole-run sampler and its exact maxima agree (a smoke check for
    ``python bench/latency_families.py``): the median max of 200 short runs of each."""
    rng = np.random.default_rng(1)
    for family in families():
        n = 10**5
        sampled = [family.histogram(n, rng).known_max_us for _ in range(200)]
        exact = family.maxima(n, 2000, rng)
        medians = (float(np.median([m for m in sampled if m is not None])),
                   float(np.median(exact)))
        print(f"{family.name}: median max of {n} wake-ups, sampled {medians[0]:.0f} µs, "
              f"exact {medians[1]:.0f} µs; p99.9 of a run "
              f"{family.histogram(n * 10, rng).quantile(0.999)} µs")
        assert math.isclose(*medians, rel_tol=0.15, abs_tol=2), family.name


if __name__ == "__main__":
    check()
