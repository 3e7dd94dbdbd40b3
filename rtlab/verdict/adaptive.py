"""One latency case measured in windows until its verdict is decided (rtlab.verdict.
sequential), whichever runner reads the windows back: their results added up, the gate
judged on the sum after every window, and the statistics asked at the looks.

A CPU without a wake-up in a window fails the case at once, though it woke in others: its
thread was kept off for the whole window, a latency no later window can measure."""

from collections.abc import Mapping, Sequence
from typing import Any

import attr

from rtlab.measure.cyclictest import CyclictestResult, combine
from rtlab.verdict.judge import LatencyJudgement, judge_latency, no_wakeup_violation
from rtlab.verdict.sequential import Decision, SequentialPolicy, decide
from rtlab.verdict.stats import Histogram
from rtlab.verdict.thresholds import StatisticsPolicy, Threshold


@attr.define
class AdaptiveCase:
    policy: SequentialPolicy
    limits: Mapping[str, Threshold]
    statistics: StatisticsPolicy
    interval_us: int
    baseline: Sequence[Histogram]
    results: list[CyclictestResult] = attr.Factory(list)
    decisions: list[Decision] = attr.Factory(list)
    judged: LatencyJudgement | None = None
    window_violations: list[str] = attr.Factory(list)

    @property
    def measured_s(self) -> float:
        return len(self.results) * self.policy.window_s

    @property
    def combined(self) -> CyclictestResult:
        return combine(self.results)

    def add(self, result: CyclictestResult, *, broke: bool = False) -> str | None:
        """A window's result: why the case stops now (None: it goes on). ``broke``: the
        window ended at a breach (cyclictest's --breaktrace), not at its end: a thread
        that had not woken by then was not kept off its CPU, and the breach fails it."""
        self.results.append(result)
        index = len(self.results)
        self.window_violations = [] if broke else [
            f"window {index}: {no_wakeup_violation(silent, int(self.policy.window_s), self.limits)}"
            for silent in result.no_wakeup]
        combined = self.combined
        self.judged = judge_latency(combined, self.limits, self.statistics,
                                    int(self.measured_s), self.interval_us, broke=broke)
        if self.violations:
            return f"stopped after {_when(self.measured_s)}: a limit is exceeded"
        limit = self.limits.get("max_us")
        candidate = Histogram.merged(Histogram.from_cpu_result(cpu) for cpu in combined.cpus)
        decision = decide(self.policy, self.measured_s, candidate, self.baseline,
                          limit_us=limit.value if limit else None,
                          interval_us=self.interval_us, cpus=len(combined.cpus))
        self.decisions.append(decision)
        if decision.stop:
            return f"stopped after {_when(self.measured_s)}: {decision.reason}"
        return None

    @property
    def violations(self) -> list[str]:
        return [*self.window_violations, *(self.judged.violations if self.judged else [])]

    def facts(self, stopped: str, gaps_s: Sequence[float],
              windows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """What a result record keeps of the run: the policy, every window, every look,
        why and when it stopped."""
        looks = [{"measured_s": d.measured_s, "outcome": d.outcome, "reason": d.reason}
                 for d in self.decisions if d.comparison is not None or d.stop]
        return {
            "window_s": self.policy.window_s, "cap_s": self.policy.cap_s,
            "confidence": self.policy.confidence, "margin": self.policy.margin,
            "exceedance_risk": self.policy.exceedance_risk,
            "looks_planned_s": list(self.policy.looks),
            "look_confidence": self.policy.look_confidence,
            "baseline_runs": len(self.baseline), "measured_s": self.measured_s,
            "stopped": stopped, "gaps_s": list(gaps_s),
            "windows": [{**window, "max_us": result.max_us,
                         "samples": sum(cpu.cycles for cpu in result.cpus),
                         "no_wakeup": [s.cpu for s in result.no_wakeup]}
                        for window, result in zip(windows, self.results, strict=True)],
            "looks": looks,
        }


def _when(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
