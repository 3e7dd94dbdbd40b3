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
   cap (:func:`early_pass`): a run's maximum grows with its length, so the tail estimate
   must bound, at its upper confidence limit, the chance that any remaining wake-up up to
   the cap would exceed ``max_us`` by ``exceedance_risk``, and that bound must hold: no
   warning of the fit, the same answer from a higher threshold, and no more than
   MAX_EXTRAPOLATION times beyond the wake-ups measured (at the default risk: no more
   wake-ups vouched for than measured, so an hour's cap passes early from its 32-min
   look, not before). Where it does not hold, the run goes on. A pass says what it does
   not rule out: a rare mode the first minutes did not show, bounded only by the
   exposure (issue 31: on a real Pi 3 the old check vouched for 450 µs from 4 min, and the
   board passed 400 µs 18 times in 5.5 h);
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
from typing import Any

import attr

from rtlab.verdict.comparison import (
    DEFAULT_QUANTILE,
    INCONCLUSIVE,
    NO_CHANGE,
    REGRESSION,
    Comparison,
    compare_tail,
)
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.tail import TailEstimate, tail_estimate

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
    quantile: float = DEFAULT_QUANTILE
    """The lowest tail quantile compared (thresholds.yaml ``statistics: quantile:``);
    compare_tail adds the decades above it."""

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
        if not 0 < self.quantile < 1:
            raise ValueError(f"quantile must be in (0, 1), got {self.quantile}")

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
    seed: int | None = None
    """The seed of the look's resamples (None: no comparison was drawn)."""


def decide(policy: SequentialPolicy, measured_s: float, candidate: Histogram,
           baseline: Sequence[Histogram], *, limit_us: float | None, interval_us: float,
           cpus: int, no_baseline: str = "no baseline",
           windows: Sequence[Histogram] = (), candidate_boots: int = 1,
           baseline_boots: Sequence[int] | None = None,
           candidate_runs: Sequence[Histogram] = (), seed: int = 0) -> Decision:
    """After a window: stop or go on. ``candidate`` is the run so far (every CPU's
    wake-ups together, as reports compare runs), ``windows`` the same wake-ups window by
    window, ``baseline`` the eligible baseline's runs, each as long as the cap (empty:
    none is eligible, ``no_baseline`` says why); ``candidate_boots`` and
    ``baseline_boots``: the boots the run and each baseline run pooled, ``candidate_runs``
    the boards' own histograms where it pooled several (rtlab.verdict.comparison.compare);
    ``seed``: the look's own resamples (rtlab.verdict.case.LatencyCase.look_seed).
    """
    at_cap = measured_s >= policy.cap_s - 1e-9
    if not policy.is_look(measured_s):
        return Decision(False, CONTINUE, "between looks", measured_s)
    if not baseline:
        if at_cap:
            return Decision(True, CAP, f"at the cap of {_minutes(policy.cap_s)}: "
                            f"{no_baseline}", measured_s)
        return Decision(False, CONTINUE, f"{no_baseline}: runs to the cap", measured_s)
    comparison = compare_tail(candidate, baseline, quantile=policy.quantile,
                              confidence=policy.look_confidence,
                              margin_relative=policy.margin, resamples=policy.resamples,
                              candidate_windows=windows,
                              baseline_windows=policy.cap_s / policy.window_s,
                              candidate_boots=candidate_boots, baseline_boots=baseline_boots,
                              candidate_runs=candidate_runs, seed=seed)
    share = f"{policy.look_confidence:.2%} at this look of {len(policy.looks)}"
    if comparison.outcome == REGRESSION:
        return Decision(True, REGRESSION, f"regression ({share}): {comparison.message}",
                        measured_s, comparison, seed)
    if at_cap:
        return Decision(True, CAP, f"at the cap of {_minutes(policy.cap_s)}: "
                        f"{comparison.outcome} ({share})", measured_s, comparison, seed)
    if comparison.outcome == NO_CHANGE:
        safe, why = limit_safe_to_cap(policy, measured_s, candidate, limit_us=limit_us,
                                      interval_us=interval_us, cpus=cpus)
        if safe:
            return Decision(True, NO_CHANGE, f"no change ({share}); {why}", measured_s,
                            comparison, seed)
        return Decision(False, CONTINUE, f"no change so far, but {why}", measured_s,
                        comparison, seed)
    assert comparison.outcome == INCONCLUSIVE
    return Decision(False, CONTINUE, f"inconclusive ({share})", measured_s, comparison, seed)


# The gates of an early pass (EarlyPass.refused names those that refused it).
EXCEEDED = "exceeded"
TOO_EARLY = "too early"
NO_FIT = "no fit"
WARNING = "warning"
ABOVE_LIMIT = "above the limit"
HIGHER = "higher threshold"
UNSTABLE = "unstable"

MAX_EXTRAPOLATION = 20.0
"""The furthest an early pass may extrapolate its tail: ``1 / (p n)`` with ``p = risk /
remaining``, i.e. the rest of the cap's wake-ups over ``exceedance_risk`` times those
measured. 20 = 1 / 0.05: at the default risk an early pass vouches for no more wake-ups
than it has measured, so that a mode the measured part did not show is no likelier to
strike in the rest than it was to show already. An hour's cap passes early from its 30th
minute (the 32-min look of 1-minute windows: 17.5×), not at 16 min (55×). Chosen from
bench/early_pass_backtest.py (docs/measured.md, "Early passes"): on a clean synthetic
source 60 adds the 16-min look at no contradiction, but under a rare mode of 0.5 per hour
its 16-min claims are contradicted in 31 % of hours against 19 % at 32 min, and on the
real recordings no value changes anything (the fit gates refuse every claim there).
tail_estimate warns from 100× on, which refuses too."""
HIGHER_SHARE = 10
"""The refit's threshold keeps a tenth of the first fit's tail samples (tail_fraction
0.001 where the first fit takes 0.01)."""
_MIN_TAIL = 50
"""tail_estimate's ``min_exceedances``: the refit needs that many at its threshold."""
ZERO_EVENTS_95 = -math.log(0.05)
"""3.0: no event in n trials bounds the rate to ``3.0 / n`` at 95 % (Poisson)."""


@attr.frozen
class EarlyPass:
    """Whether an early pass may vouch for the rest of the cap, and what it rests on."""

    safe: bool
    reason: str
    refused: tuple[str, ...] = ()
    """The gates that refused it (EXCEEDED, TOO_EARLY, NO_FIT, WARNING, ABOVE_LIMIT,
    HIGHER, UNSTABLE), in that order; empty when safe. WARNING (and HIGHER) also where
    the only warning is tail_estimate's own "the bound extrapolates", which the reason
    leaves to TOO_EARLY's words."""
    extrapolation: float | None = None
    """``1 / (p n)``: how far beyond the measured wake-ups the bound reaches."""
    upper_us: float | None = None
    """The larger upper confidence limit of the two fits' bounds."""
    residual_risk: float | None = None
    """The chance, up to which a rare mode the exposure does not rule out strikes in the
    rest of the cap: ``1 - exp(-3.0 remaining / n)``."""
    fits: tuple[tuple[float, float, float], ...] = ()
    """(bound, lower, upper limit) in µs of the first fit and of the refit, those made."""


def limit_safe_to_cap(policy: SequentialPolicy, measured_s: float, candidate: Histogram, *,
                      limit_us: float | None, interval_us: float, cpus: int,
                      max_extrapolation: float = MAX_EXTRAPOLATION) -> tuple[bool, str]:
    """Whether an early pass may vouch that no wake-up between now and the cap exceeds
    ``limit_us`` (at the policy's risk), and why: :func:`early_pass`'s answer."""
    verdict = early_pass(policy, measured_s, candidate, limit_us=limit_us,
                         interval_us=interval_us, cpus=cpus,
                         max_extrapolation=max_extrapolation)
    return verdict.safe, verdict.reason


def early_pass(policy: SequentialPolicy, measured_s: float, candidate: Histogram, *,
               limit_us: float | None, interval_us: float, cpus: int,
               max_extrapolation: float = MAX_EXTRAPOLATION) -> EarlyPass:
    """Whether the tail bounds the chance that a wake-up between now and the cap exceeds
    ``limit_us`` by the policy's risk, on evidence that holds. With ``remaining`` wake-ups
    to the cap and ``p = risk / remaining``, every gate must pass:

    * nothing measured exceeds ``limit_us`` (the limit fails such a run before this);
    * TOO_EARLY: the extrapolation ``1 / (p n)`` is at most ``max_extrapolation``;
    * NO_FIT, WARNING: the tail estimate (tail_estimate's default threshold, about the
      p99) has a bound at ``p`` and no warning at all (a poor fit, a heavy tail, a shape
      at its limit, an overflow-censored tail, an unbounded upper limit, an
      extrapolation);
    * ABOVE_LIMIT: that bound's upper confidence limit is at most ``limit_us``;
    * HIGHER: refitted from a threshold that keeps a tenth of those tail samples, the tail
      has a bound, no warning, and an upper limit at most ``limit_us`` too;
    * UNSTABLE: the two fits agree: the first fit's bound lies inside the refit's
      confidence interval. A tail whose top tenth no longer looks like the rest (a second
      mode rising out of the bulk, a tail that curves) moves the bound with the
      threshold. One-sided on purpose: the refit, on a tenth of the samples, carries most
      of the uncertainty of the difference, so its interval is the test; asking also that
      the refit's bound lie inside the first fit's narrower interval refused 65 of 200
      clean synthetic hours at 32 min, where this rule refuses 8, 4 of them for
      stability (bench/early_pass_backtest.py, 2026-11-26); and a refit that sees a
      heavier tail must keep its own upper limit under ``limit_us`` anyway (HIGHER).

    Each gate refuses with the reason a kernel engineer reads; all that refuse are named.
    A safe answer says what it does not rule out: the fit speaks for the tail it saw,
    and a rare mode independent of it is bounded only by the exposure, ``n`` wake-ups
    without one past ``limit_us``: its rate to ``3.0 / n`` per wake-up at 95 %, and the
    chance that a mode so rare strikes in the rest of the cap to ``1 - exp(-3.0 remaining
    / n)`` (93 % at the 32-min look of an hour): no early pass can beat that, it is the
    information the run has, and what measuring to the cap buys.
    """
    if limit_us is None:
        return EarlyPass(True, "no max_us limit to reach")
    per_s = 1e6 / interval_us * cpus
    remaining = max(policy.cap_s - measured_s, 0.0) * per_s
    if remaining < 1:
        return EarlyPass(True, "nothing left to measure")
    n = candidate.samples
    if n == 0:
        return EarlyPass(False, "no wake-up measured yet", (NO_FIT,))
    risk = policy.exceedance_risk
    p = risk / remaining
    ratio = 1 / (p * n)
    refused: list[str] = []
    reasons: list[str] = []
    exceeded = _exceeded(candidate, limit_us)
    if exceeded:
        refused.append(EXCEEDED)
        reasons.append(exceeded)
    if ratio > max_extrapolation:
        refused.append(TOO_EARLY)
        # (C - t) / (risk t) <= M  <=>  t >= C / (1 + M risk)
        needed = policy.cap_s / (1 + max_extrapolation * risk)
        reasons.append(
            f"too early to vouch for the rest of the cap: its {remaining:.2g} wake-ups at risk "
            f"{risk:g} need the latency exceeded with probability {p:.1e} per wake-up, "
            f"{ratio:.0f}× beyond the {n:.3g} measured (an early pass extrapolates at most "
            f"{max_extrapolation:g}×, MAX_EXTRAPOLATION: about {_minutes(needed)} of the "
            f"{_minutes(policy.cap_s)} cap measured)")
    first = _fit(candidate, min(p, 0.5))
    if first.bound_ci_us is None or first.bound_us is None:
        refused.append(NO_FIT)
        reasons.append("the tail is too thin to bound the rest of the cap ("
                       + ("; ".join(first.warnings) or "no fit") + ")")
        return _refusal(refused, reasons, ratio)
    shown_warnings = [w for w in first.warnings
                      if not (TOO_EARLY in refused and w.startswith("the bound extrapolates"))]
    if first.warnings:
        refused.append(WARNING)
        if shown_warnings:
            reasons.append("the tail estimate warns: " + "; ".join(shown_warnings))
    upper = first.bound_ci_us[1]
    if upper > limit_us:
        refused.append(ABOVE_LIMIT)
        reasons.append(f"the tail does not keep the rest of the cap under max_us "
                       f"{limit_us:g} µs (upper limit {_us(upper)})")
    higher, why_not = _refit(candidate, first, min(p, 0.5))
    if higher is None or higher.bound_ci_us is None or higher.bound_us is None:
        refused.append(HIGHER)
        why = why_not or "; ".join(higher.warnings if higher else ()) or "no fit"
        reasons.append(f"the fit cannot be checked from a higher threshold: {why}")
        return _refusal(refused, reasons, ratio, first)
    u1, u2 = first.pot_threshold_us, higher.pot_threshold_us
    higher_upper = higher.bound_ci_us[1]
    higher_warnings = [w for w in higher.warnings
                       if not (TOO_EARLY in refused and w.startswith("the bound extrapolates"))]
    if higher.warnings or higher_upper > limit_us:
        refused.append(HIGHER)
        if higher_warnings:
            reasons.append(f"refitted from {u2} µs, the tail estimate warns: "
                           + "; ".join(higher_warnings))
        if higher_upper > limit_us:
            reasons.append(f"refitted from {u2} µs, the tail does not keep the rest of the "
                           f"cap under max_us {limit_us:g} µs (upper limit {_us(higher_upper)})")
    if not _agree(first, higher):
        refused.append(UNSTABLE)
        reasons.append(f"the bound moves with the threshold: {_bound(first)} fitted from "
                       f"{u1} µs lies outside the interval of the refit from {u2} µs, "
                       f"{_bound(higher)}")
    if refused:
        return _refusal(refused, reasons, ratio, first, higher)
    residual = -math.expm1(-ZERO_EVENTS_95 * remaining / n)
    rate = ZERO_EVENTS_95 / n
    per_hour = rate * per_s * 3600
    worst = max(upper, higher_upper)
    return EarlyPass(True, (
        f"max_us {limit_us:g} µs is safe to the cap by the fitted tail: the latency the "
        f"{remaining:.2g} wake-ups still to come exceed with probability {risk:g} is at most "
        f"{worst:.0f} µs (the fits from {u1} and {u2} µs agree: {_bound(first)} and "
        f"{_bound(higher)}; {ratio:.1f}× beyond the wake-ups measured). Not ruled out: a rare "
        f"mode the tail does not show. {n:.3g} wake-ups ({_minutes(measured_s)}) without one "
        f"over max_us bound its rate only to < {rate:.1e} per wake-up ({per_hour:.2g} per "
        f"hour) at 95 %: a mode rarer than {per_hour:.2g} per hour is not ruled out, and one "
        f"that rare strikes in the remaining {_minutes(policy.cap_s - measured_s)} with a "
        f"chance of up to {residual * 100:.0f} %"), (), ratio, worst, residual,
        _bounds((first, higher)))


def _refusal(refused: list[str], reasons: list[str], ratio: float,
             *fits: TailEstimate) -> EarlyPass:
    bounds = _bounds(fits)
    upper = max(b[2] for b in bounds) if bounds else None
    return EarlyPass(False, "; ".join(reasons), tuple(refused), ratio, upper, fits=bounds)


def _bounds(fits: Sequence[TailEstimate]) -> tuple[tuple[float, float, float], ...]:
    bounds = []
    for fit in fits:
        if fit.bound_us is not None and fit.bound_ci_us is not None:
            bounds.append((fit.bound_us, fit.bound_ci_us[0], fit.bound_ci_us[1]))
    return tuple(bounds)


def _exceeded(hist: Histogram, limit_us: float) -> str | None:
    """Why the run so far already exceeds ``limit_us``, or None."""
    known = hist.known_max_us
    if known is not None:
        if known <= limit_us:
            return None
        return f"max {known:g} µs already exceeds max_us {limit_us:g} µs"
    if limit_us < hist.range_us:
        return (f"{hist.overflows} wake-ups past the {hist.range_us} µs histogram already "
                f"exceed max_us {limit_us:g} µs")
    return (f"{hist.overflows} wake-ups past the {hist.range_us} µs histogram, of unknown "
            f"maximum, may exceed max_us {limit_us:g} µs")


def _refit(hist: Histogram, first: TailEstimate,
           p: float) -> tuple[TailEstimate | None, str | None]:
    """The tail estimate from a higher threshold: the one that keeps a tenth of the first
    fit's tail samples (one bucket up where the first threshold's bucket holds that
    tenth too), with at least tail_estimate's minimum there."""
    n = hist.samples
    target = first.tail_samples // HIGHER_SHARE
    if target < _MIN_TAIL:
        return None, (f"{first.tail_samples} tail samples at or above {first.pot_threshold_us}"
                      f" µs are too few to refit from a tenth of them ({HIGHER_SHARE * _MIN_TAIL}"
                      " needed)")
    higher = _fit(hist, p, tail_fraction=target / n, max_exceedances=target)
    u1 = first.pot_threshold_us
    if u1 is not None and higher.pot_threshold_us == u1:
        above = int(hist.counts[u1 + 1:].sum()) + hist.overflows
        if above < _MIN_TAIL:
            return None, (f"the top tenth of the tail lies in the {u1} µs bucket of the "
                          f"threshold, and only {above} wake-ups lie above it")
        higher = _fit(hist, p, tail_fraction=above / n, max_exceedances=above)
    return higher, None


def _fit(hist: Histogram, p: float, **options: Any) -> TailEstimate:
    """tail_estimate's bound at ``p`` (no threshold: the bound does not depend on it); a
    fit whose interval search fails numerically is no fit, and says so."""
    try:
        return tail_estimate(hist, None, p, **options)
    except ValueError as error:
        return TailEstimate(samples=hist.samples, observed_max_us=hist.known_max_us,
                            threshold_us=None, exceedance_probability=p, confidence=0.95,
                            warnings=(f"the tail fit failed numerically ({error})",))


def _agree(first: TailEstimate, higher: TailEstimate) -> bool:
    """The first fit's bound lies inside the refit's confidence interval."""
    assert first.bound_us is not None
    assert higher.bound_ci_us is not None
    return higher.bound_ci_us[0] <= first.bound_us <= higher.bound_ci_us[1]


def _bound(estimate: TailEstimate) -> str:
    assert estimate.bound_us is not None and estimate.bound_ci_us is not None
    low, high = estimate.bound_ci_us
    return f"{estimate.bound_us:.0f} µs [{low:.0f}-{_us(high, unit=False)}]"


def _us(value: float, *, unit: bool = True) -> str:
    if math.isinf(value):
        return "unbounded"
    return f"{value:.0f} µs" if unit else f"{value:.0f}"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
