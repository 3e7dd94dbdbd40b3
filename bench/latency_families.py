"""Latency sources that the verdict was not built on, for bench/adaptive_quality.py and
bench/rack_strength.py: bursts, one noisy CPU, a rare independent mode, boards modelled on
the real cyclictest outputs of ../shared/data/real-cyclictest/ (each CPU its own recorded
shape), and boots that vary the tail's scale; and the changes a kernel makes to them.

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
* **boot-to-boot tail** (``tail_sd``, bench/rack_strength.py): each boot (each run) also
  scales the tail's GPD scale by its own lognormal offset (log-sd 0.05 or 0.10), on top of
  the run's latency scale and tail weight: the spread a rack's boards and boots showed
  (issue 31), which one board's hour cannot average away.

A kernel's change to a family is a :class:`Change`: the tail's scale × a factor, the body
(below the tail's threshold) × a factor with the tail's excesses unchanged in µs, and a
rare second mode that lands above max_us at so many events per board-hour (independent
Poisson events, the candidate's only). :func:`boot` draws one board's boot of a family
running a changed kernel; it samples windows as a Model does, so that
bench/adaptive_quality.py's ``one_run`` takes it.

A family samples exactly as a verdict_quality Model (``run_variation``, ``run_histogram``
for one window of a run, ``histogram`` for a whole run of WINDOWS windows, ``maxima``
exactly for the max gate and the tuned max_us), so the benches take either. A family with
``tail_sd`` draws its boot's tail offset inside ``histogram`` and ``maxima``; a caller that
samples the windows of a run itself (``run_histogram``) draws it with ``boot_tail`` (or
uses :func:`boot`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import attr
import numpy as np
import verdict_quality as vq

from rtlab.measure.cyclictest import CyclictestParseError, parse_histogram
from rtlab.measure.cyclictest import Histogram as HistogramDump
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
    # boot to boot, the sd of the log of a factor on the tail's scale (0: none)
    tail_sd: float = 0.0

    def boot_tail(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Each boot's factor on the tail's scale (ones, drawing nothing, without
        ``tail_sd``: the families before it keep their random streams)."""
        if not self.tail_sd:
            return np.ones(size)
        return np.exp(rng.normal(0, self.tail_sd, size))

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
        tail = tail * float(self.boot_tail(rng, 1)[0])
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
        return with_values(hist, values)

    def _shares(self, n: int) -> list[int]:
        base, extra = divmod(n, len(self.cpus))
        return [base + (i < extra) for i in range(len(self.cpus))]

    def maxima(self, n: int, trials: int, rng: np.random.Generator,
               tail: float = 1.0) -> np.ndarray:
        """The max of a run of n wake-ups, exactly, for ``trials`` runs (each its own
        variation and its own count of burst windows)."""
        scale, weight = self.run_variation(rng, trials)
        tails = tail * self.boot_tail(rng, trials)
        bursts = (rng.binomial(WINDOWS, self.burst_share, trials) if self.burst_share
                  else np.zeros(trials, dtype=int))
        # each CPU's max, then the rare mode's (its count is Poisson, its largest value
        # the max of that many uniforms)
        best = np.zeros(trials)
        for cpu, share in zip(self.cpus, self._shares(n), strict=True):
            if not share:
                continue
            in_bursts = share * bursts // WINDOWS
            for count, w, t in ((share - in_bursts, weight, tails),
                                (in_bursts, weight * self.burst_weight,
                                 tails * self.burst_tail)):
                s = -np.expm1(np.log(rng.random(trials)) / np.maximum(count, 1))
                value = np.floor(cpu.quantile_sf(s, scale, w, t))
                best = np.maximum(best, np.where(count > 0, value, 0.0))
        if self.rare_rate:
            rare = rng.poisson(n * self.rare_rate, trials)
            top = self.rare_low_us + (self.rare_high_us - self.rare_low_us) * (
                rng.random(trials) ** (1 / np.maximum(rare, 1)))
            best = np.maximum(best, np.where(rare > 0, np.floor(top * scale), 0.0))
        return best


def with_values(hist: Histogram, values: np.ndarray) -> Histogram:
    """``hist`` with wake-ups of the given latencies (µs, whole) added: past the range as
    overflows, the max raised to theirs (it stays unknown where an overflow of the tail
    left it unknown)."""
    counts = hist.counts.copy()
    inside = values[values < vq.RANGE_US].astype(int)
    np.add.at(counts, inside, 1)
    overflows = hist.overflows + int((values >= vq.RANGE_US).sum())
    known = hist.known_max_us
    max_us = (None if known is None and hist.overflows
              else max(known or 0.0, float(values.max())))
    return Histogram(counts, overflows, max_us)


@attr.frozen
class Change:
    """What a kernel change does to a board's latencies (the candidate's, never the
    baseline's): the tail's scale × ``tail``; the body × ``body`` with the tail's excesses
    over its threshold unchanged in µs (the threshold moves with the body, so every
    quantile moves by the same µs as the threshold: a slower fast path, not a wider
    tail); and a second mode of ``spikes_per_hour`` independent events per board-hour,
    each one wake-up uniformly between max_us + 1 µs and 1.5 × max_us (every one past the
    limit)."""

    name: str
    tail: float = 1.0
    body: float = 1.0
    spikes_per_hour: float = 0.0

    @property
    def unchanged(self) -> bool:
        return self.tail == 1.0 and self.body == 1.0 and not self.spikes_per_hour


UNCHANGED = Change("A/A")


@attr.frozen
class Boot:
    """One board's boot of a family running a changed kernel: the boot's offset of the
    tail's scale drawn once (:func:`boot`), the run's latency scale and tail weight drawn
    by ``run_variation`` as a Model's; ``run_histogram`` samples one window of n
    wake-ups, so bench/adaptive_quality.py's ``one_run`` takes it as its model."""

    family: Family
    change: Change
    tail: float
    """The boot's factor on the tail's scale (Family.boot_tail)."""
    spike_rate: float
    """The change's second mode, events per wake-up."""
    spike_low_us: float
    spike_high_us: float

    def run_variation(self, rng: np.random.Generator,
                      size: int) -> tuple[np.ndarray, np.ndarray]:
        return self.family.run_variation(rng, size)

    def run_histogram(self, n: int, rng: np.random.Generator, scale: float, weight: float,
                      tail: float = 1.0) -> Histogram:
        body = self.change.body
        # the whole latency × body and the tail's scale ÷ body: the body moves, the tail's
        # excesses (in µs) stay
        hist = self.family.run_histogram(n, rng, scale * body, weight,
                                         tail * self.tail * self.change.tail / body)
        spikes = int(rng.poisson(n * self.spike_rate)) if self.spike_rate else 0
        if not spikes:
            return hist
        values = np.floor(rng.uniform(self.spike_low_us, self.spike_high_us, spikes))
        return with_values(hist, values)


def boot(family: Family, change: Change, rng: np.random.Generator, *, limit_us: float,
         interval_us: float, cpus: int) -> Boot:
    """A fresh boot of ``family``'s board running a kernel with ``change``: its tail
    offset drawn, the change's second mode as a rate per wake-up at ``interval_us`` on
    ``cpus`` CPUs, landing above ``limit_us``."""
    per_hour = 3600e6 / interval_us * cpus
    return Boot(family, change, float(family.boot_tail(rng, 1)[0]),
                change.spikes_per_hour / per_hour, limit_us + 1, 1.5 * limit_us + 1)


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


def real_dumps() -> tuple[list[tuple[str, HistogramDump]], list[str]]:
    """Every file under REAL_DATA that is a cyclictest ``-h`` dump rtlab reads, by its path
    there, and why each other one is not (its first line of error)."""
    dumps, refused = [], []
    for path in sorted(p for p in REAL_DATA.rglob("*") if p.is_file()):
        if path.suffix == ".md":
            continue
        name = str(path.relative_to(REAL_DATA))
        try:
            dumps.append((name, parse_histogram(
                path.read_text(encoding="utf-8", errors="replace"), name)))
        except CyclictestParseError as error:
            refused.append(f"{name}: {str(error).splitlines()[0][:110]}")
    return dumps, refused


def real(name: str, file: str, columns: tuple[int, ...] | None = None) -> Family:
    """The board of one recorded ``-h`` dump under REAL_DATA, each column a CPU."""
    path = REAL_DATA / file
    dump = parse_histogram(path.read_text(encoding="utf-8"), str(path))
    chosen = [c for c in dump.columns if columns is None or c.thread in columns]
    cpus = tuple(real_cpu(f"{name} thread {c.thread}", np.array(c.counts, dtype=np.int64),
                          c.overflows, float(c.max_us)) for c in chosen)
    return Family(f"{name} ({len(cpus)} CPUs, {min(c.samples for c in chosen) / 1e6:.3g} M "
                  "wake-ups each)", cpus)


def _light() -> vq.Model:
    """verdict_quality's light synthetic source (ξ = 0.1)."""
    return vq.synthetic("light", median=15, spread=0.12, zeta=0.03, shape=0.1, scale=3.0)


def _bursts(light: vq.Model) -> Family:
    return Family("bursts (5 % of minutes: tail weight × 5, scale × 2)", (light,),
                  burst_share=0.05, burst_weight=5.0, burst_tail=2.0)


def _noisy_cpu(light: vq.Model) -> Family:
    noisy = vq.synthetic("noisy", median=15, spread=0.12, zeta=0.06, shape=0.25, scale=3.0)
    return Family("one noisy CPU (3 light, 1 with ξ=0.25 and twice the tail weight)",
                  (light, light, light, noisy))


def families() -> list[Family]:
    """bench/adaptive_quality.py's families (their order is its --sources numbering)."""
    light = _light()
    return [
        _bursts(light),
        _noisy_cpu(light),
        Family("rare mode (1 in 10^9 wake-ups takes 150-400 µs)", (light,),
               rare_rate=1e-9, rare_low_us=150.0, rare_high_us=400.0),
        real("real civcode 4-core", "civcode-4core-h400/output.txt"),
        real("real J1900 (luminize)", "luminize-machinekit-x86/2017-01-02_17-49-41"),
        real("real Core i7 (ebots)", "ebots-hung-i7-12thr/output"),
    ]


BOOT_TAIL_SDS = (0.05, 0.10)


def rack_families() -> list[Family]:
    """bench/rack_strength.py's families: the light synthetic source, bursts, one noisy CPU,
    the real civcode 4-core board (4 CPUs, like the rack's boards), and the light source
    whose every boot scales its tail by its own offset (log-sd 0.05 and 0.10)."""
    light = _light()
    plain = Family("light synthetic (ξ = 0.1)", (light,))
    return [
        plain,
        _bursts(light),
        _noisy_cpu(light),
        real("real civcode 4-core", "civcode-4core-h400/output.txt"),
        *(attr.evolve(plain, name=f"light, boots vary the tail's scale (sd {sd:.2f})",
                      tail_sd=sd) for sd in BOOT_TAIL_SDS),
    ]


def check() -> None:
    """Each family's whole-run sampler and its exact maxima agree (a smoke check for
    ``python bench/latency_families.py``): the median max of 200 short runs of each."""
    rng = np.random.default_rng(1)
    chosen = {f.name: f for f in (*families(), *rack_families())}
    for family in chosen.values():
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
