"""The one judge of a latency case, whichever runner measured it: the on-board pytest suite
(tests/target/test_latency.py, a thin layer over this module) and the LAVA path
(rtlab.lava.records) plan a case, feed it the windows they read back and take its verdict
and its record's facts from here, so that the same windows get the same verdict.

A case is measured in windows up to its cap (a fixed run is one window that is the cap).
After each window the limits are judged on all the windows together
(rtlab.verdict.judge); at the looks the run so far is compared with the eligible baseline
(rtlab.verdict.baseline, rtlab.verdict.sequential). The verdict (docs/verdicts.md):

- ``fail``: a limit exceeded, a CPU without a wake-up, a regression against an eligible
  baseline (early or at the cap), or a tail bound whose lower confidence limit lies above
  max_us; the last two only where thresholds.yaml gates on statistics (the default);
- ``pass`` otherwise, with what it rules out: the wake-ups measured and the exceedance
  rate they bound, and the shift the comparison excludes (or why there was none, or how
  much longer would decide it).

Many cases make one pipeline, and one error budget holds them all
(rtlab.verdict.budget): a pipeline whose gated cases are all unchanged goes red with at
most thresholds.yaml's ``pipeline_false_fail``, counting every way a case fails. The
plan carries the split: its comparison at :func:`case_confidence`, its tail gate judged
once at the case's end at its share, and the share its ``max_us`` was tuned to.
"""

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attr

from rtlab.measure.conditions import Requirements
from rtlab.measure.cyclictest import CyclictestResult, combine
from rtlab.verdict.baseline import Baseline
from rtlab.verdict.budget import ErrorBudget
from rtlab.verdict.comparison import NO_CHANGE, REGRESSION, Comparison, quantile_name
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.judge import (
    LatencyJudgement,
    judge_latency,
    no_wakeup_violation,
    tail_violations,
)
from rtlab.verdict.sequential import CAP, Decision, SequentialPolicy, decide
from rtlab.verdict.thresholds import StatisticsPolicy, Threshold, Thresholds, format_us

PASS = "pass"
FAIL = "fail"
# the confidence of the exceedance-rate bound a pass states
RATE_CONFIDENCE = 0.95


def case_confidence(pipeline_false_fail: float, cases: int) -> float:
    """The confidence each case's comparison is held at: its share of the pipeline's
    budget (rtlab.verdict.budget), so that with ``cases`` unchanged cases a false
    regression is at most that share of ``pipeline_false_fail``."""
    return ErrorBudget(pipeline_false_fail, cases).comparison_confidence


def pipeline_case_count(latency_cases: int, pipeline_jobs: int) -> int:
    """How many gated latency cases share a pipeline's false-fail rate, counted alike on
    every door: the cases one job plans (every scenario × interval it runs, skipped or
    not: a skip is known only once a board is asked) times the pipeline's jobs that plan
    as many (``--pipeline-jobs``)."""
    if not isinstance(pipeline_jobs, int) or pipeline_jobs < 1:
        raise ValueError(f"the pipeline's jobs must be a whole number >= 1, got "
                         f"{pipeline_jobs!r}")
    return max(1, latency_cases) * pipeline_jobs


def rate_bound(wakeups: int, confidence: float = RATE_CONFIDENCE) -> float:
    """The upper ``confidence`` limit of a per-wake-up probability of which ``wakeups``
    trials showed no case (the exact binomial bound: ``1 - (1 - confidence)^(1/n)``)."""
    if wakeups < 1:
        return 1.0
    return -math.expm1(math.log1p(-confidence) / wakeups)


@attr.frozen
class TraceChoice:
    """Whether the case arms the kernel's trace (and with it cyclictest's --breaktrace at
    max_us), and why (rtlab.verdict.trace_choice.choose_trace on the labgrid door)."""

    wanted: bool
    why: str


NO_TRACE = TraceChoice(False, "the door keeps no trace of a breach")


@attr.frozen
class CasePlan:
    """What one latency case is judged by, decided once when it is planned and carried to
    whichever door measures it (a labgrid run, a pooled replica, a LAVA job, a bisection
    step): its limits and statistics policy from thresholds.yaml, and the pipeline's
    count of gated cases that sets its confidence. A door adds only what it measured."""

    board: str
    flavour: str
    """The thresholds.yaml flavour (a campaign variant's own, else the series')."""
    scenario: str
    interval_us: int
    limits: Mapping[str, Threshold]
    statistics: StatisticsPolicy
    cases: int = 1
    """The pipeline's gated latency cases that share its false-fail rate (this job's
    cases × the pipeline's jobs that judge as many)."""
    trace: TraceChoice = NO_TRACE
    """A window that ends at a breach (``broke``) is judged by it."""
    requirements: Requirements | None = None
    """What the run must have been to count (suite.yaml's requirements for the board and
    scenario), checked while each window runs; None: the door checks none (a pooled case
    judges windows its replicas checked)."""
    tail_gate: bool = True
    """Whether this door judges the tail gate: a replica (one board's share of a pooled
    case) does not; the pooled case judges every board's CPUs once, with the case's share."""

    def __attrs_post_init__(self) -> None:
        # the budget is checked when the case is planned, not when it is first judged
        _ = self.budget

    @property
    def budget(self) -> ErrorBudget:
        """The case's share of the pipeline's false-red rate, way by way."""
        return ErrorBudget(self.statistics.pipeline_false_fail, self.cases)

    @property
    def confidence(self) -> float:
        """The confidence of the case's comparison (:func:`case_confidence`)."""
        return self.budget.comparison_confidence

    def facts(self) -> dict[str, Any]:
        """What a record keeps of how the case is judged."""
        policy = self.statistics
        return {
            "thresholds": {m: {"value": t.value, "source": t.source}
                           for m, t in self.limits.items()},
            "statistics": {"exceedance_probability": policy.exceedance_probability,
                           "quantile": policy.quantile, "gating": policy.gating,
                           "baseline_runs": policy.baseline_runs,
                           "baseline_boots": policy.baseline_boots,
                           "pipeline_false_fail": policy.pipeline_false_fail,
                           "sources": dict(policy.sources)},
            "pipeline_cases": self.cases,
            "budget": self.budget.facts(),
        }

    def sequential(self, *, window_s: float, cap_s: float) -> SequentialPolicy:
        """How the case decides: windows of ``window_s`` up to ``cap_s`` (a fixed run: one
        window, one look at its end), at the plan's confidence."""
        return SequentialPolicy(window_s=window_s, cap_s=cap_s, confidence=self.confidence,
                                quantile=self.statistics.quantile)

    def measure(self, *, window_s: float, cap_s: float, baseline: Baseline) -> "LatencyCase":
        return LatencyCase(self, self.sequential(window_s=window_s, cap_s=cap_s), baseline)


def plan_case(thresholds: Thresholds, *, board: str, flavour: str, scenario: str,
              interval_us: int, cases: int, trace: TraceChoice = NO_TRACE,
              requirements: Requirements | None = None, tail_gate: bool = True) -> CasePlan:
    """The case's limits and policy, the pipeline's case count, its trace choice and run
    requirements (errors as :meth:`Thresholds.lookup`: an unknown board or flavour is a
    ValueError, which a runner reports as the case's error; a case count below 1 too)."""
    return CasePlan(board, flavour, scenario, interval_us,
                    thresholds.lookup(board, flavour, scenario, interval_us),
                    thresholds.statistics(board, flavour, scenario, interval_us),
                    cases=cases, trace=trace, requirements=requirements, tail_gate=tail_gate)


@attr.frozen
class Outcome:
    verdict: str
    """``pass`` or ``fail`` (errors are the runner's: no statement about latency)."""
    message: str
    """Why it fails, or what the pass rules out."""


@attr.define
class LatencyCase:
    """One case measured in windows: their results added up, the limits judged on the sum
    after every window, the baseline compared at the looks."""

    plan: CasePlan
    policy: SequentialPolicy
    baseline: Baseline
    results: list[CyclictestResult] = attr.Factory(list)
    decisions: list[Decision] = attr.Factory(list)
    judged: LatencyJudgement | None = None
    window_violations: list[str] = attr.Factory(list)
    tail_violations: list[str] = attr.Factory(list)
    """The tail gate's verdict, judged once when the case stops."""
    broke: bool = False
    boots: int = 1
    """How many boots (boards measuring at once, rtlab.run.pooling) the windows pool: the
    comparison's candidate level (rtlab.verdict.comparison.compare, candidate_boots)."""
    boot_histograms: tuple[Histogram, ...] = ()
    """Each of those boots' own wake-ups (every CPU's together): their spread is a floor
    under the candidate's (compare, candidate_runs)."""

    @property
    def measured_s(self) -> float:
        return len(self.results) * self.policy.window_s

    @property
    def windowed(self) -> bool:
        """Measured in more than one window (an adaptive case), not one fixed run."""
        return self.policy.window_s < self.policy.cap_s

    @property
    def combined(self) -> CyclictestResult:
        return combine(self.results)

    def add(self, result: CyclictestResult, *, broke: bool = False) -> str | None:
        """A window's result: why the case stops now (None: it goes on). ``broke``: the
        window ended at a breach (cyclictest's --breaktrace), not at its end: a thread
        that had not woken by then was not kept off its CPU, and the breach fails it.

        A CPU without a wake-up in a window fails the case at once, though it woke in
        others: its thread was kept off for the whole window, a latency no later window
        can measure."""
        self.results.append(result)
        self.broke = self.broke or broke
        index = len(self.results)
        window_s = int(self.policy.window_s)
        self.window_violations = [] if broke or not self.windowed else [
            f"window {index}: {no_wakeup_violation(silent, window_s, self.plan.limits)}"
            for silent in result.no_wakeup]
        combined = self.combined
        self.judged = self._judge(combined, broke=broke, tails=False)
        self.tail_violations = []
        if self.violations:
            # the case ends here: its record keeps the tails it had
            self.judged = self._judge(combined, broke=broke, tails=True)
            return f"stopped after {_when(self.measured_s)}: a limit is exceeded"
        limit = self.plan.limits.get("max_us")
        candidate = Histogram.merged(Histogram.from_cpu_result(cpu) for cpu in combined.cpus)
        if candidate.samples == 0:
            return None
        decision = decide(self.policy, self.measured_s, candidate,
                          self.baseline.histograms if self.baseline.eligible else (),
                          limit_us=limit.value if limit else None,
                          interval_us=self.plan.interval_us, cpus=len(combined.cpus),
                          no_baseline=self.baseline.why_not or "no baseline",
                          candidate_boots=self.boots,
                          baseline_boots=self.baseline.boots_per_run or None,
                          candidate_runs=self.boot_histograms,
                          windows=[Histogram.merged(Histogram.from_cpu_result(cpu)
                                                    for cpu in window.cpus)
                                   for window in self.results if window.cpus],
                          seed=self.look_seed(candidate))
        self.decisions.append(decision)
        if decision.stop:
            self.judged = self._judge(combined, broke=broke, tails=True)
            if self.plan.tail_gate:
                # once, at the case's end, at the tail's share of the budget: a bound
                # re-tested after every window would spend it many times over
                self.tail_violations = tail_violations(
                    combined, self.judged.tails, self.plan.statistics, self.plan.limits)
            return f"stopped after {_when(self.measured_s)}: {decision.reason}"
        return None

    def _judge(self, combined: CyclictestResult, *, broke: bool,
               tails: bool) -> LatencyJudgement:
        return judge_latency(combined, self.plan.limits, self.plan.statistics,
                             int(self.measured_s), self.plan.interval_us, broke=broke,
                             tail_gate=False, tails=tails,
                             tail_confidence=self.plan.budget.tail_confidence(
                                 len(combined.cpus)))

    def look_seed(self, candidate: Histogram) -> int:
        """The seed of a look's resamples: its own at every look of every case (the case,
        the time measured, what was measured), and the same for the same windows on every
        door, so that a record's comparison can be drawn again (the record keeps it)."""
        digest = hashlib.blake2b(digest_size=8)
        for part in (self.plan.board, self.plan.flavour, self.plan.scenario,
                     self.plan.interval_us, f"{self.measured_s:.3f}", candidate.range_us,
                     candidate.overflows):
            digest.update(repr(part).encode())
        digest.update(candidate.counts.tobytes())
        return int.from_bytes(digest.digest(), "big") >> 1

    @property
    def violations(self) -> list[str]:
        return [*self.window_violations, *(self.judged.violations if self.judged else []),
                *self.tail_violations]

    @property
    def comparison(self) -> Comparison | None:
        """The last look's comparison with the baseline (None: none was made)."""
        return next((d.comparison for d in reversed(self.decisions)
                     if d.comparison is not None), None)

    def _comparison_seed(self) -> int | None:
        return next((d.seed for d in reversed(self.decisions) if d.comparison is not None),
                    None)

    @property
    def regression(self) -> Comparison | None:
        return next((d.comparison for d in self.decisions
                     if d.outcome == REGRESSION and d.comparison is not None), None)

    def outcome(self) -> Outcome:
        """The case's verdict on what was measured (module docstring)."""
        if self.judged is None:
            raise ValueError("no window was measured")
        if self.violations:
            return Outcome(FAIL, "; ".join(self.violations))
        regression = self.regression
        policy = self.plan.statistics
        if regression is not None and policy.gating:
            return Outcome(FAIL, f"regression against the baseline "
                                 f"({self.baseline.describe()}): {regression.message} "
                                 f"({policy.sources.get('gating', 'statistics defaults')}: "
                                 "statistics gating)")
        return Outcome(PASS, "; ".join(self.statements()))

    def statements(self) -> list[str]:
        """What the measurement shows, in a kernel engineer's units: the wake-ups measured
        and the exceedance rate they bound, then the comparison with the baseline."""
        combined = self.combined
        wakeups = sum(cpu.cycles for cpu in combined.cpus)
        cpus = len(combined.cpus) + len(combined.no_wakeup)
        limit = self.plan.limits.get("max_us")
        # pooled boards side by side: the CPUs counted are every board's together
        boards = f" of {self.boots} boards" if self.boots > 1 else ""
        exposure = (f"{_count(wakeups)} wake-ups ({cpus} CPU{'s' if cpus != 1 else ''}"
                    f"{boards}, {_when(self.measured_s)})")
        if limit is not None:
            told = [f"no wake-up over {format_us(limit.value)} in {exposure}: rate < "
                    f"{rate_bound(wakeups):.1e} per wake-up at {RATE_CONFIDENCE * 100:g} %"]
        else:
            worst = max((cpu.max_us for cpu in combined.cpus), default=None)
            told = [f"{exposure}, worst {worst} µs (no max_us to bound)"]
        told.append(self._comparison_statement())
        return told

    def _comparison_statement(self) -> str:
        if not self.baseline.eligible:
            return f"no comparison: {self.baseline.why_not}"
        comparison = self.comparison
        if comparison is None:
            return f"no comparison with the baseline ({self.baseline.describe()}) was due yet"
        name = quantile_name(comparison.quantile)
        if comparison.outcome == NO_CHANGE:
            high = comparison.ci_us[1]
            base = comparison.baseline_us
            relative = f" ({high / (base + 0.5):+.0%})" if base else ""
            return (f"{name} {_quantile(comparison.candidate_us, comparison.range_us)} vs "
                    f"baseline {_quantile(base, comparison.range_us)}: no shift above "
                    f"{high:+.1f} µs{relative} at {comparison.confidence:.2%} "
                    f"(baseline {self.baseline.describe()})")
        if comparison.outcome == REGRESSION:
            # a pass with a regression: thresholds.yaml does not gate on it here
            return (f"a regression was found but does not fail the case "
                    f"({self.plan.statistics.sources.get('gating', 'statistics')}: "
                    f"gating false): {comparison.message}")
        when = ("at the cap" if self.decisions and self.decisions[-1].outcome == CAP
                else "so far")
        return f"comparison {when}: {comparison.message}"

    def record_facts(self) -> dict[str, Any]:
        """What a result record keeps of the judged case (both runners alike)."""
        if self.judged is None:
            raise ValueError("no window was measured")
        comparison = self.comparison
        return {
            "cpus": self.judged.cpus,
            "baseline": self.baseline.facts(),
            "comparison": None if comparison is None else {
                "outcome": comparison.outcome, "quantile": comparison.quantile,
                "candidate_us": comparison.candidate_us,
                "baseline_us": comparison.baseline_us,
                "difference_us": comparison.difference_us,
                "ci_us": list(comparison.ci_us), "confidence": comparison.confidence,
                "longer": (None if comparison.longer is None
                           else (comparison.longer if math.isfinite(comparison.longer)
                                 else "inf")),
                "message": comparison.message, "seed": self._comparison_seed()},
            "case_confidence": self.policy.confidence,
            "tail_confidence": self.plan.budget.tail_confidence(len(self.combined.cpus)),
            "tail_gate": self.plan.tail_gate,
            # a window ended at a breach (--breaktrace): the run is shorter than it says
            "broke": self.broke,
        }

    def facts(self, stopped: str, gaps_s: Sequence[float],
              windows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """What a result record keeps of an adaptive run: the policy, every window, every
        look, why and when it stopped."""
        looks = [{"measured_s": d.measured_s, "outcome": d.outcome, "reason": d.reason,
                  "seed": d.seed}
                 for d in self.decisions if d.comparison is not None or d.stop]
        return {
            "window_s": self.policy.window_s, "cap_s": self.policy.cap_s,
            "confidence": self.policy.confidence, "margin": self.policy.margin,
            "exceedance_risk": self.policy.exceedance_risk,
            "looks_planned_s": list(self.policy.looks),
            "look_confidence": self.policy.look_confidence,
            "baseline_runs": self.baseline.runs, "measured_s": self.measured_s,
            "stopped": stopped, "gaps_s": list(gaps_s),
            "windows": [{**window, "max_us": result.max_us,
                         "samples": sum(cpu.cycles for cpu in result.cpus),
                         "no_wakeup": [s.cpu for s in result.no_wakeup]}
                        for window, result in zip(windows, self.results, strict=True)],
            "looks": looks,
        }


def _quantile(value: int | None, range_us: int) -> str:
    """A quantile as a comparison has it: past the histogram it is only known to be at
    least its range."""
    return f">= {range_us} µs" if value is None else f"{value} µs"


def _when(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def _count(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.3g} M"
    if n >= 10_000:
        return f"{n / 1e3:.3g} k"
    return str(n)
