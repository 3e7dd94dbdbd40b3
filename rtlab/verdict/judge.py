"""The judges of a latency case and an rt-test that every runner shares (labgrid's
tests/target, LAVA's logs in rtlab.lava): thresholds, CPUs that never woke, the tail
estimate where thresholds.yaml makes statistics gating, and the facts a record keeps."""

import datetime
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attr

from rtlab.measure.cyclictest import CpuResult, CyclictestResult, NoWakeup, SysInfo
from rtlab.measure.rttests import FunctionalResult, LatencyResult, Verdict
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.tail import EMPIRICAL, TailEstimate, tail_estimate
from rtlab.verdict.thresholds import StatisticsPolicy, Threshold, check, format_us


def cpu_figures(cpu: CpuResult) -> dict[str, float | None]:
    """The figures thresholds judge, for one measured CPU (µs)."""
    figures: dict[str, float | None] = {"max": cpu.max_us, "avg": cpu.avg_us}
    if cpu.histogram is not None:
        figures["p99_9"] = cpu.percentiles()["p99_9"].value_us
    return figures


def no_wakeup_facts(thread: NoWakeup) -> dict[str, Any]:
    """A CPU whose measurement thread never woke, as the result record keeps it."""
    return {"cpu": thread.cpu, "thread": thread.thread, "samples": 0, "min_us": None,
            "avg_us": None, "max_us": None, "overflows": None, "no_wakeup": True}


def no_wakeup_violation(thread: NoWakeup, duration_s: int,
                        thresholds: Mapping[str, Threshold]) -> str:
    """Why a thread that never woke fails the case whatever its limits. The board ran and
    answered, so this is no lab fault; but the thread, at its RT priority from its start
    (rtlab.measure.cyclictest.fifo_from_start), was kept off its CPU for the whole window, and a
    gate passes only what it has seen."""
    where = f"CPU{thread.cpu}" if thread.cpu is not None else f"thread {thread.thread}"
    message = (f"{where} recorded no wake-up in the {duration_s} s window (0 samples): its "
               "cyclictest thread never completed a cycle, so no latency was measured there")
    limit = thresholds.get("max_us")
    if limit is not None:
        cited = limit.cite()
        message += f" and none passes max_us {format_us(limit.value)} ({cited})"
    return message


def cpu_facts(cpu: CpuResult) -> dict[str, Any]:
    """One CPU of a cyclictest run as the result record keeps it."""
    facts: dict[str, Any] = {
        "cpu": cpu.cpu, "thread": cpu.thread, "samples": cpu.cycles, "min_us": cpu.min_us,
        "avg_us": cpu.avg_us, "max_us": cpu.max_us, "overflows": cpu.overflows,
    }
    if cpu.histogram is not None:
        facts["histogram_range_us"] = cpu.histogram_range_us
        facts["histogram"] = {str(bucket): count for bucket, count in sorted(cpu.histogram.items())}
        facts["percentiles_us"] = {
            name: (p.value_us if p.value_us is not None else f">={p.range_us}")
            for name, p in cpu.percentiles().items()
        }
    return facts


def result_of_facts(cpus: Sequence[Mapping[str, Any]], *, source: str, cmdline: str,
                    started: str, finished: str | None) -> CyclictestResult:
    """A run read back from a record's ``cpus`` (:func:`cpu_facts`, :func:`no_wakeup_facts`):
    what the judge needs of it, to judge again a case measured on several boards
    (rtlab.run.pooling). The run's own header (cyclictest's version, the board's uname)
    is not in the record and is left empty."""
    woke, silent = [], []
    for index, cpu in enumerate(cpus):
        thread = cpu.get("thread", index)
        if cpu.get("no_wakeup"):
            silent.append(NoWakeup(thread=thread, cpu=cpu.get("cpu")))
            continue
        histogram = cpu.get("histogram")
        woke.append(CpuResult(
            thread=thread, cpu=cpu.get("cpu"), cycles=int(cpu["samples"]),
            min_us=cpu["min_us"], avg_us=float(cpu["avg_us"]), max_us=cpu["max_us"],
            histogram=(None if histogram is None
                       else {int(bucket): int(count) for bucket, count in histogram.items()}),
            histogram_range_us=cpu.get("histogram_range_us"), overflows=cpu.get("overflows")))
    ranges = {cpu.histogram_range_us for cpu in woke}
    start = datetime.datetime.fromisoformat(started)
    return CyclictestResult(
        source=source, file_version=0, rt_test_version="", cmdline=cmdline,
        start_time=start,
        end_time=datetime.datetime.fromisoformat(finished) if finished else start,
        return_code=0, sysinfo=SysInfo("", "", "", "", "", False),
        num_threads=len(woke) + len(silent), resolution_in_ns=0,
        histogram_range_us=ranges.pop() if len(ranges) == 1 else None,
        cpus=tuple(sorted(woke, key=lambda c: c.thread)),
        no_wakeup=tuple(sorted(silent, key=lambda c: c.thread)))


def cpu_tail(cpu: CpuResult, thresholds: Mapping[str, Threshold], policy: StatisticsPolicy,
             interval_us: int, confidence: float = 0.95) -> TailEstimate | None:
    """The tail estimate of one CPU's histogram (None: run without a histogram), at the
    gate's max_us and the policy's exceedance probability, its interval at ``confidence``
    (the case's: rtlab.verdict.budget.ErrorBudget.tail_confidence)."""
    if cpu.histogram is None:
        return None
    limit = thresholds.get("max_us")
    return tail_estimate(Histogram.from_cpu_result(cpu), limit.value if limit else None,
                         policy.exceedance_probability, interval_us=interval_us,
                         confidence=confidence)


def tail_facts(estimate: TailEstimate) -> dict[str, Any]:
    """A tail estimate as the record keeps it beside the CPU's observed figures."""
    facts = attr.asdict(estimate)
    facts["bound_ci_us"] = list(estimate.bound_ci_us) if estimate.bound_ci_us else None
    facts["warnings"] = list(estimate.warnings)
    return {key: _json_number(value) for key, value in facts.items()}


def _json_number(value: Any) -> Any:  # noqa: ANN401 - JSON
    """An unbounded tail has an infinite upper limit; strict JSON (and PostgreSQL's JSON
    columns) has no Infinity, so it is written as the string "inf"."""
    if isinstance(value, list):
        return [_json_number(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def tail_violation(cpu: int | None, estimate: TailEstimate | None, policy: StatisticsPolicy,
                   thresholds: Mapping[str, Threshold]) -> str | None:
    """Why the statistical gate fails this CPU, or None. Only where thresholds.yaml gates
    on statistics (the default): then the tail must not show, with confidence, that one
    wake-up in ``1 / exceedance_probability`` exceeds max_us, i.e. the lower confidence
    limit of that latency must stay within max_us. A tail too thin to fit says nothing
    either way and fails nothing: the pass then states only what was measured
    (rtlab.verdict.case), and a run too short to bound its tail is no evidence against
    the kernel. Nor does a fit that warned (a poor fit, a heavy or censored tail): its
    bound is reported beside the verdict and decides nothing."""
    limit = thresholds.get("max_us")
    if not policy.gating or limit is None or estimate is None or estimate.bound_ci_us is None:
        return None
    if estimate.warnings and estimate.bound_from != EMPIRICAL:
        # the fit's bound where the fit warned: reported, never a fail
        return None
    lower = estimate.bound_ci_us[0]
    if lower <= limit.value:
        return None
    cited = policy.sources.get("gating", "statistics defaults")
    return (f"CPU{cpu} tail bound at p={policy.exceedance_probability:g}: "
            f"{format_us(estimate.bound_us or 0)}, its lower limit (one-sided "
            f"{(1 + estimate.confidence) / 2:.4%}) "
            f"{format_us(lower)} > max_us {format_us(limit.value)} ({limit.source}; "
            f"{cited}: statistics gating)"
            + (f"; {limit.cite()}" if limit.provisional else ""))


@attr.frozen
class LatencyJudgement:
    """One cyclictest run judged against its limits: the per-CPU facts a result record
    keeps, the tail estimates, and why the case fails (empty: it passes)."""

    cpus: list[dict[str, Any]]
    tails: dict[int, TailEstimate | None]
    violations: list[str]


def tail_violations(result: CyclictestResult, tails: Mapping[int, TailEstimate | None],
                    policy: StatisticsPolicy, limits: Mapping[str, Threshold]) -> list[str]:
    """The tail gate on every CPU of a run whose ``tails`` were estimated
    (:func:`judge_latency`): rtlab.verdict.case judges it once, when the case stops."""
    return [why for cpu in result.cpus
            if (why := tail_violation(cpu.cpu, tails.get(cpu.thread), policy, limits))]


def judge_latency(result: CyclictestResult, limits: Mapping[str, Threshold],
                  policy: StatisticsPolicy, duration_s: int,
                  interval_us: int, *, broke: bool = False, tail_gate: bool = True,
                  tail_confidence: float = 0.95, tails: bool = True) -> LatencyJudgement:
    """The limits of a latency case on what it measured (rtlab.verdict.case judges the
    whole case with them): thresholds, CPUs that never woke, and the tail estimate where
    thresholds.yaml gates on statistics.

    ``broke``: cyclictest ended the run at a wake-up past max_us (--breaktrace), which
    fails the case; a CPU whose thread had not woken by then was not kept off it for the
    window, so it is recorded without a wake-up but is no violation of its own.

    ``tail_gate``: whether the tail gate joins the violations here (False: the caller
    judges it once, :func:`tail_violations`); the tails are estimated at
    ``tail_confidence``, unless ``tails`` is False (a window the case goes on after:
    nothing reads them there)."""
    # the tail beyond what the window saw, beside the observed figures
    estimates = {cpu.thread: (cpu_tail(cpu, limits, policy, interval_us, tail_confidence)
                              if tails or tail_gate else None)
                 for cpu in result.cpus}
    per_thread = [(cpu.thread, cpu_facts(cpu)) for cpu in result.cpus]
    for thread, facts in per_thread:
        tail = estimates[thread]
        if tail is not None:
            facts["tail"] = tail_facts(tail)
    per_thread += [(silent.thread, no_wakeup_facts(silent)) for silent in result.no_wakeup]
    violations = [] if broke else [no_wakeup_violation(silent, duration_s, limits)
                                   for silent in result.no_wakeup]
    violations += [v.message for cpu in result.cpus
                   for v in check(cpu_figures(cpu), limits, cpu.cpu)]
    # thresholds stay the gate; the tail estimate joins it only where thresholds.yaml says
    if tail_gate:
        violations += tail_violations(result, estimates, policy, limits)
    return LatencyJudgement(cpus=[facts for _, facts in sorted(per_thread, key=lambda t: t[0])],
                            tails=estimates, violations=violations)


def rt_tool_limits(limits: Mapping[str, Threshold]) -> dict[str, Threshold]:
    """These tools keep no histogram: a p99.9 limit they inherit is cyclictest's (the
    thresholds file refuses one set for the tool itself)."""
    return {metric: limit for metric, limit in limits.items() if metric != "p99_9_us"}


@attr.frozen
class RtToolJudgement:
    """One rt-test run judged: the facts a result record keeps, why it is skipped (a
    functional test that set up no inversion proves nothing either way), and why it
    fails (empty: it passes)."""

    facts: dict[str, Any]
    skip: str | None
    violations: list[str]


def judge_rt_tool(result: LatencyResult | FunctionalResult,
                  limits: Mapping[str, Threshold]) -> RtToolJudgement:
    """pi_stress and pip_stress by whether priority inheritance resolved their inversions;
    the latency tools by thresholds.yaml per measuring thread (``limits``: the tool's,
    :func:`rt_tool_limits`), a thread without a known CPU named by its number."""
    if isinstance(result, FunctionalResult):
        facts = {"functional": {"verdict": result.verdict.value,
                                "inversions": result.inversions, "reason": result.reason,
                                "evidence": list(result.evidence[-5:])}}
        if result.verdict is Verdict.INCONCLUSIVE:
            return RtToolJudgement(facts, f"priority inheritance not exercised: "
                                          f"{result.reason}", [])
        failed = [] if result.verdict is Verdict.PASS else [f"{result.tool}: {result.reason}"]
        return RtToolJudgement(facts, None, failed)
    gated = [result.threads[index] for index in result.gated]
    facts = {"threads": [
        {"thread": t.thread, "cpu": t.cpu, "samples": t.samples, "min_us": t.min_us,
         "avg_us": t.avg_us, "max_us": t.max_us, "gated": t.thread in result.gated}
        for t in result.threads]}
    violations = [v.message for t in gated
                  for v in check({"max": t.max_us, "avg": t.avg_us}, limits,
                                 t.cpu if t.cpu is not None else t.thread)]
    return RtToolJudgement(facts, None, violations)
