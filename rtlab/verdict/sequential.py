"""When a case has been measured long enough: the decision after each window of an
adaptive run (``rtlab run --window W --duration CAP``).

A case is measured in consecutive windows under one continuously running load, the
windows' histograms added up. After each window:

1. a limit of thresholds.yaml exceeded (or a CPU without a wake-up) is a ``fail`` at
   once: nothing measured later can undo it (:func:`rtlab.verdict.judge.judge_latency`,
   before this module is asked);
2. at a *look* (once ``min_windows`` windows are measured, then at every doubling of
   the time measured, and at the cap) the run so far is compared with the baseline (the
   default branch's runs of the series, as ``rtlab report`` compares them) by
   :func:`rtlab.verdict.comparison.compare_tail`, at the look's share of the confidence: with
   K looks each is held at ``1 - (1 - confidence) / K`` (Bonferroni over the looks:
   error spent equally on each, so that looking after every window does not raise the
   false-fail rate above ``(1 - confidence) / 2``);
3. ``regression`` stops the run. ``no change`` (the shift's upper confidence limit below
   the margin) stops it with a pass only if the limit is also safe for the rest of the
   cap: a run's maximum grows with its length, so the tail estimate must bound, at its
   upper confidence limit, the chance that any remaining wake-up up to the cap would
   exceed ``max_us`` by ``exceedance_risk``; where the tail is too thin to say so, the run
   goes on;
4. without an eligible baseline (rtlab.verdict.baseline: passing runs of the same options
   and length, enough of them from enough boots) the run goes on to the cap and says why
   (the limits still end it at once).

What a stop means for the verdict is rtlab.verdict.case's: a regression fails the case
where thresholds.yaml gates on it (the default), an early stop on no change passes it.

Looks double rather than come after every window because each look costs confidence:
with 1-minute windows and an hour's cap there are 5 looks, not 60, so each keeps more
power; a decision at minute 8 instead of minute 6 is the price.

The first look waits for ``min_windows`` windows (4) because a run's minutes are not
alike: a burst minute (a periodic job, a log flush) puts one window's tail far above the
baseline's hours, which hold a few such minutes each. The comparison takes the spread
between the run's windows into account (rtlab.verdict.comparison.compare, candidate_windows),
and that spread needs several windows to be known at all: compared from its first
minute, a board with a burst in 5 % of its minutes failed 9-12 % of unchanged cases
(bench/adaptive_quality.py, 2026-11-26).
"""

import math
from collections.abc import Sequence

import attr

from rtlab.verdict.comparison import INCONCLUSIVE, NO_CHANGE, REGRESSION, Comparison, compare_tail
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.tail import tail_estimate

CONTINUE = "continue"
FAIL = "fail"
CAP = "cap"


@attr.frozen
class SequentialPolicy:
    """How an adaptive run decides: windows of ``window_s`` up to ``cap_s`` of measurement,
    ``confidence`` over all looks, ``margin`` the relative shift of a tail quantile that
    still counts as no change, ``exceedance_risk`` the chance of exceeding max_us before
    the cap that an early pass may leave."""

    window_s: float
    cap_s: float
    confidence: float = 0.98
    margin: float = 0.2
    exceedance_risk: float = 0.05
    resamples: int = 20000
    min_windows: int = 4
    """Windows measured before the first look (the cap is a look whatever it holds)."""

    def __attrs_post_init__(self) -> None:
        if not 0 < self.window_s <= self.cap_s:
            raise ValueError(f"the window ({self.window_s:g} s) must be positive and at most "
                             f"the cap ({self.cap_s:g} s)")
        if self.min_windows < 1:
            raise ValueError(f"min_windows must be at least 1, got {self.min_windows}")
        for name in ("confidence", "exceedance_risk"):
            if not 0 < getattr(self, name) < 1:
                raise ValueError(f"{name} must be in (0, 1), got {getattr(self, name)}")
        if not 0 < self.margin < 1:
            raise ValueError(f"margin must be in (0, 1), got {self.margin}")

    @property
    def looks(self) -> tuple[float, ...]:
        """The measured times (s) after which the run is compared: ``min_windows`` windows,
        each doubling, and the cap."""
        times = []
        at = self.window_s * self.min_windows
        while at < self.cap_s:
            times.append(at)
            at *= 2
        times.append(self.cap_s)
        return tuple(times)

    @property
    def look_confidence(self) -> float:
        return 1 - (1 - self.confidence) / len(self.looks)

    def is_look(self, measured_s: float) -> bool:
        """Whether the window that brought the run to ``measured_s`` ends at a look (the
        last window before a look's time counts for it)."""
        before = measured_s - self.window_s
        return any(before < at <= measured_s + 1e-9 for at in self.looks) or (
            measured_s >= self.cap_s)


@attr.frozen
class Decision:
    stop: bool
    outcome: str
    """``continue``; when stopping: ``regression``, ``no change``, or at the cap
    ``cap`` (the comparison's outcome is in ``comparison``)."""
    reason: str
    measured_s: float
    comparison: Comparison | None = None


def decide(policy: SequentialPolicy, measured_s: float, candidate: Histogram,
           baseline: Sequence[Histogram], *, limit_us: float | None, interval_us: float,
           cpus: int, no_baseline: str = "no baseline",
           windows: Sequence[Histogram] = ()) -> Decision:
    """After a window: stop or go on. ``candidate`` is the run so far (every CPU's
    wake-ups together, as reports compare runs), ``windows`` the same wake-ups window by
    window, ``baseline`` the eligible baseline's runs, each as long as the cap (empty:
    none is eligible, ``no_baseline`` says why)."""
    at_cap = measured_s >= policy.cap_s - 1e-9
    if not policy.is_look(measured_s):
        return Decision(False, CONTINUE, "between looks", measured_s)
    if not baseline:
        if at_cap:
            return Decision(True, CAP, f"at the cap of {_minutes(policy.cap_s)}: "
                            f"{no_baseline}", measured_s)
        return Decision(False, CONTINUE, f"{no_baseline}: runs to the cap", measured_s)
    comparison = compare_tail(candidate, baseline, confidence=policy.look_confidence,
                              margin_relative=policy.margin, resamples=policy.resamples,
                              candidate_windows=windows,
                              baseline_windows=policy.cap_s / policy.window_s)
    share = f"{policy.look_confidence:.2%} at this look of {len(policy.looks)}"
    if comparison.outcome == REGRESSION:
        return Decision(True, REGRESSION, f"regression ({share}): {comparison.message}",
                        measured_s, comparison)
    if at_cap:
        return Decision(True, CAP, f"at the cap of {_minutes(policy.cap_s)}: "
                        f"{comparison.outcome} ({share})", measured_s, comparison)
    if comparison.outcome == NO_CHANGE:
        safe, why = limit_safe_to_cap(policy, measured_s, candidate, limit_us=limit_us,
                                      interval_us=interval_us, cpus=cpus)
        if safe:
            return Decision(True, NO_CHANGE, f"no change ({share}); {why}", measured_s,
                            comparison)
        return Decision(False, CONTINUE, f"no change so far, but {why}", measured_s,
                        comparison)
    assert comparison.outcome == INCONCLUSIVE
    return Decision(False, CONTINUE, f"inconclusive ({share})", measured_s, comparison)


def limit_safe_to_cap(policy: SequentialPolicy, measured_s: float, candidate: Histogram, *,
                      limit_us: float | None, interval_us: float,
                      cpus: int) -> tuple[bool, str]:
    """Whether the tail bounds the chance that a wake-up between now and the cap exceeds
    ``limit_us`` by the policy's risk: the latency exceeded with probability ``risk /
    remaining wake-ups`` must lie below the limit at its upper confidence limit."""
    if limit_us is None:
        return True, "no max_us limit to reach"
    remaining = max(policy.cap_s - measured_s, 0.0) * 1e6 / interval_us * cpus
    if remaining < 1:
        return True, "nothing left to measure"
    p = policy.exceedance_risk / remaining
    estimate = tail_estimate(candidate, limit_us, min(p, 0.5))
    if estimate.bound_ci_us is None:
        return False, ("the tail is too thin to bound the rest of the cap ("
                       + ("; ".join(estimate.warnings) or "no fit") + ")")
    upper = estimate.bound_ci_us[1]
    if upper <= limit_us:
        return True, (f"max_us {limit_us:g} µs is safe to the cap: the latency {remaining:.2g} "
                      f"more wake-ups exceed with probability {policy.exceedance_risk:g} is "
                      f"at most {upper:.0f} µs")
    shown = "unbounded" if math.isinf(upper) else f"{upper:.0f} µs"
    return False, (f"the tail does not keep the rest of the cap under max_us {limit_us:g} µs "
                   f"(upper limit {shown})")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
