"""``max_us`` from a series' pooled exposure: the latency that one case's run exceeds with
at most the case's share of the pipeline's error budget (rtlab.verdict.budget, ``limits``).

Why pooled wake-ups and not run maxima: the chance that a run of W wake-ups has any
wake-up above x is at most the expected number of them, ``W p(x)``, where p(x) is the
long-run share of wake-ups above x, whatever ties the wake-ups together (bursts, boots
that differ, one noisy CPU: linearity of expectation needs no independence). The series'
unchanged runs, every CPU of every board pooled, estimate p(x) from all their wake-ups,
which reach far further than their run maxima do.

So the limit for share s is the (1 - p*) quantile of the pooled wake-ups, p* = s / W,
with W the wake-ups of one of the case's runs (all its CPUs and boards, as stored): read
from the wake-ups where they reach p* (rtlab.verdict.tail: the empirical quantile), else
extrapolated by the tail model, and taken at its upper confidence limit (the confidence
of thresholds.yaml's ``exposure_confidence``, one-sided) so that a limit the data know
little about is set high rather than tight. Where the model warns (a poor fit, a heavy or
censored tail, an extrapolation more than 100 times beyond the exposure), or where the
history's largest wake-up is an outlier of the model (rtlab.verdict.tail.expected_max)
or its own wake-ups lie above the limit it gives (a rare mode the model does not hold:
an SMI, a firmware call), the exposure cannot vouch for any limit: the suggestion
says so, and where more history would do, how many more board-hours.
"""

import math
from collections.abc import Sequence

import attr

from rtlab.store.query import CaseRow
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.tail import EMPIRICAL, expected_max, tail_estimate

MAX_EXTRAPOLATION = 100.0
"""How far beyond the pooled wake-ups (1 / (p* E)) the tail model may vouch for a limit:
the tail estimate warns from there (rtlab.verdict.tail)."""


@attr.frozen
class Exposure:
    """A series' unchanged runs of one length, pooled."""

    histogram: Histogram | None
    """Every gated CPU of every run, summed (None: no run kept a histogram)."""
    runs: int
    wakeups_per_run: float
    """The median run's wake-ups, every CPU of every board it pooled."""
    board_s: float
    """The board time of the runs (a run pooled from k boards counts k boards' time)."""

    @property
    def wakeups(self) -> int:
        return 0 if self.histogram is None else self.histogram.samples

    @property
    def board_hours(self) -> float:
        return self.board_s / 3600


def pooled_exposure(cases: Sequence[CaseRow], lengths_s: Sequence[float | None]) -> Exposure:
    """The runs ``cases`` (one series' comparable runs, with histograms) pooled;
    ``lengths_s``: each run's stored ``duration_s`` (its board time)."""
    histograms: list[Histogram] = []
    per_run: list[int] = []
    for case in cases:
        cpus = [cpu for cpu in case.cpus if not cpu.no_wakeup and (cpu.gated is None or cpu.gated)]
        per_run.append(sum(cpu.samples for cpu in cpus))
        for cpu in cpus:
            if cpu.histogram is not None:
                histograms.append(Histogram(cpu.histogram, cpu.overflows or 0, cpu.max_us))
    ordered = sorted(per_run)
    median = float(ordered[len(ordered) // 2]) if ordered else 0.0
    return Exposure(Histogram.merged(histograms) if histograms else None, len(cases), median,
                    float(sum(length or 0.0 for length in lengths_s)))


@attr.frozen
class TailLimit:
    """What the exposure says a case's ``max_us`` must be for its share of the budget."""

    share: float
    """The chance one case's run may exceed the limit (the budget's ``limits`` share)."""
    per_wakeup: float
    """p*: the share over one run's wake-ups."""
    confidence: float
    """One-sided: the chance the limit is at least the true (1 - p*) quantile."""
    estimate_us: float | None = None
    upper_us: float | None = None
    limit_us: int | None = None
    source: str | None = None
    """``empirical`` (the wake-ups reach p*) or ``gpd`` (extrapolated)."""
    missing: str | None = None
    """Why the exposure vouches for no limit (None: it does)."""
    more_board_hours: float | None = None
    """The board-hours more of unchanged runs that would let it vouch (None: not a
    matter of exposure, or it already does)."""

    def describe(self) -> str:
        """How the suggestion was made, for a reason: line and the merge request."""
        if self.limit_us is None:
            return f"no limit vouched for: {self.missing}"
        how = ("the wake-ups' own quantile" if self.source == EMPIRICAL
               else "the tail model's extrapolation")
        return (f"the latency one run exceeds with at most {self.share:.2g} (its share of "
                f"the pipeline's error budget): p = {self.per_wakeup:.2g} per wake-up, "
                f"{how} {self.estimate_us:.0f} µs, at most {self.upper_us:.0f} µs at "
                f"{self.confidence:.0%}")


def tail_limit(exposure: Exposure, share: float, confidence: float) -> TailLimit:
    """The limit ``exposure`` vouches for at ``share`` (module docstring), rounded up to a
    whole µs."""
    if not 0 < share < 1:
        raise ValueError(f"the limits' share must be in (0, 1), got {share}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if exposure.wakeups_per_run <= 0 or exposure.histogram is None:
        return TailLimit(share, math.nan, confidence,
                         missing="no run kept a histogram of its wake-ups: nothing to pool")
    p = share / exposure.wakeups_per_run
    base = TailLimit(share, p, confidence)
    # the upper end of a two-sided interval at 2c - 1 is the one-sided c limit
    estimate = tail_estimate(exposure.histogram, None, p, confidence=2 * confidence - 1)
    extrapolation = 1 / (p * exposure.wakeups)
    if estimate.bound_us is None or estimate.bound_ci_us is None:
        why = estimate.warnings[0] if estimate.warnings else "no tail estimate"
        return attr.evolve(base, missing=f"the pooled wake-ups give no tail: {why}")
    upper = estimate.bound_ci_us[1]
    if estimate.bound_from != EMPIRICAL:
        if extrapolation > MAX_EXTRAPOLATION:
            needed_wakeups = 1 / (p * MAX_EXTRAPOLATION)
            rate = exposure.wakeups / max(exposure.board_hours, 1e-12)
            more = (needed_wakeups - exposure.wakeups) / rate if exposure.board_s else None
            return attr.evolve(
                base, estimate_us=estimate.bound_us, more_board_hours=more,
                missing=(f"{exposure.runs} runs ({exposure.board_hours:.3g} board-hours, "
                         f"{exposure.wakeups:.3g} wake-ups) are {extrapolation:.0f}× short "
                         f"of p = {p:.2g} per wake-up; the tail model vouches for at most "
                         f"{MAX_EXTRAPOLATION:g}×"
                         + (f": about {more:.3g} more board-hours of unchanged runs would"
                            if more is not None else "")))
        warned = [w for w in estimate.warnings if "extrapolates" not in w]
        if warned:
            return attr.evolve(base, estimate_us=estimate.bound_us,
                               missing=f"the tail model warns: {'; '.join(warned)}")
    if not math.isfinite(upper):
        return attr.evolve(base, estimate_us=estimate.bound_us,
                           missing="the upper confidence limit is unbounded: the pooled "
                                   "wake-ups allow an arbitrarily heavy tail")
    hist = exposure.histogram
    largest = expected_max(hist)
    if largest.outlier:
        # the history's largest wake-up is one the model does not expect of its exposure:
        # a rare mode (an SMI, a firmware call) whose rate no fitted tail bounds
        return attr.evolve(
            base, estimate_us=estimate.bound_us,
            missing=(f"the history's largest wake-up is an outlier of the tail model "
                     f"({largest.note}): a rare mode the model does not hold, whose rate "
                     "the history cannot bound at this share; no limit is vouched for: set "
                     "max_us by hand above that wake-up, or accept the mode's rate"))
    above = (int(hist.counts[math.floor(upper) + 1:].sum()) + hist.overflows
             if math.floor(upper) + 1 < hist.range_us else
             hist.overflows if (hist.known_max_us or math.inf) > upper else 0)
    if above:
        # the history's own runs would have failed it: a mode the model does not hold
        top = hist.known_max_us
        return attr.evolve(
            base, estimate_us=estimate.bound_us,
            missing=(f"{above} of the history's wake-ups lie above the tail model's "
                     f"{upper:.0f} µs (the largest "
                     f"{'past the histogram' if top is None else f'{top:.0f} µs'}): "
                     "a rare mode the model does not hold, whose rate the history cannot "
                     "bound at this share; no limit is vouched for: set max_us by hand "
                     "above the largest, or accept the mode's rate"))
    return attr.evolve(base, estimate_us=estimate.bound_us, upper_us=upper,
                       limit_us=int(math.ceil(upper)), source=estimate.bound_from)


@attr.frozen
class ImpliedRate:
    """The false-red rate a limit implies for one case's run, by the exposure."""

    limit_us: float
    fitted: float | None
    """W p(x) from the tail model (None: no fit)."""
    observed: int
    """Wake-ups of the exposure above the limit."""
    wakeups: int

    def describe(self) -> str:
        fitted = ("no tail fit" if self.fitted is None
                  else f"{min(self.fitted, 1.0):.2g} per run by the tail model")
        return (f"max_us {self.limit_us:g} µs: {fitted}; {self.observed} of "
                f"{self.wakeups:.3g} pooled wake-ups above it")


def implied_rate(exposure: Exposure, limit_us: float) -> ImpliedRate | None:
    """How often one case's run exceeds ``limit_us`` (an upper bound: W p(x)), by the
    series' pooled wake-ups; None without a histogram."""
    if exposure.histogram is None:
        return None
    hist = exposure.histogram
    above = math.floor(limit_us) + 1
    observed = (int(hist.counts[above:].sum()) + hist.overflows if above < hist.range_us
                else hist.overflows if hist.known_max_us is None or
                hist.known_max_us >= above else 0)
    estimate = tail_estimate(hist, limit_us)
    fitted = (None if estimate.probability is None
              else exposure.wakeups_per_run * estimate.probability)
    return ImpliedRate(limit_us, fitted, observed, hist.samples)
