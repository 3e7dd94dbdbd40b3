"""Glue between pytest outcomes and rtlab verdicts for the on-board suite."""

import datetime
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attr
import pytest

from .cyclictest import CpuResult, NoWakeup
from .manifest import read_image_manifest
from .stats import Histogram, TailEstimate, tail_estimate
from .thresholds import StatisticsPolicy, Threshold, format_us


@attr.define
class CaseRecord:
    """Everything known about one test case, written out whatever happens to it."""

    case: str
    started: str
    finished: str | None = None
    verdict: str = "pass"
    message: str = ""
    facts: dict[str, Any] = attr.Factory(dict)

    def observe(self, report: pytest.TestReport) -> None:
        """Derive the verdict: a failing setup or teardown (flash, boot, load, parsing)
        is an error; only a failing test body (a threshold assertion) is a fail."""
        if report.skipped and self.verdict == "pass":
            self.verdict = "skipped"
            self.message = _first_line(report)
        elif report.failed and self.verdict != "error":
            # the first error wins; a teardown error after a fail still makes it an error
            self.verdict = "fail" if report.when == "call" else "error"
            self.message = _first_line(report)

    def as_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "started": self.started,
            "finished": self.finished,
            "verdict": self.verdict,
            "message": self.message,
            **self.facts,
        }


def _first_line(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # skips: (file, line, reason)
        return str(longrepr[2])
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message).splitlines()[0] if crash.message else ""
    return str(longrepr).splitlines()[-1] if longrepr else ""


def case_record(nodeid: str) -> CaseRecord:
    return CaseRecord(case=nodeid, started=datetime.datetime.now(datetime.UTC).isoformat())


def image_manifest_for(image: str | None) -> dict[str, Any]:
    """The manifest written beside an SD image by ``rtlab image build`` (empty if the image
    came from elsewhere: its facts are then read from the board alone)."""
    if not image:
        return {}
    path = Path(image).with_name("manifest.json")
    if not path.exists():
        return {}
    return read_image_manifest(path)


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
    answered, so this is no lab fault; but the thread was kept off its CPU for the whole
    window (before or after it raised itself to its RT priority: cyclictest cannot tell),
    and a gate passes only what it has seen."""
    where = f"CPU{thread.cpu}" if thread.cpu is not None else f"thread {thread.thread}"
    message = (f"{where} recorded no wake-up in the {duration_s} s window (0 samples): its "
               "cyclictest thread never completed a cycle, so no latency was measured there")
    limit = thresholds.get("max_us")
    if limit is not None:
        cited = f"{limit.source}: {limit.reason}" if limit.reason else limit.source
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


def cpu_tail(cpu: CpuResult, thresholds: Mapping[str, Threshold], policy: StatisticsPolicy,
             interval_us: int) -> TailEstimate | None:
    """The tail estimate of one CPU's histogram (None: run without a histogram), at the
    gate's max_us and the policy's exceedance probability."""
    if cpu.histogram is None:
        return None
    limit = thresholds.get("max_us")
    return tail_estimate(Histogram.from_cpu_result(cpu), limit.value if limit else None,
                         policy.exceedance_probability, interval_us=interval_us)


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
    """Why the statistical gate fails this CPU, or None. Only where thresholds.yaml makes
    statistics gating: then the upper confidence limit of the latency one wake-up exceeds
    with the policy's probability must stay within max_us, and a CPU whose tail could not
    be estimated fails too (a gate passes only what it has seen)."""
    limit = thresholds.get("max_us")
    if not policy.gating or limit is None:
        return None
    where = f"CPU{cpu}"
    cited = policy.sources.get("gating", "statistics defaults")
    probability = f"{policy.exceedance_probability:g}"
    if estimate is None or estimate.bound_ci_us is None:
        why = ("no histogram" if estimate is None
               else "; ".join(estimate.warnings) or "no fit")
        return (f"{where} statistical gate: no tail bound at p={probability} ({why}) "
                f"({cited}: statistics gating)")
    upper = estimate.bound_ci_us[1]
    if upper <= limit.value:
        return None
    shown = "unbounded" if upper == float("inf") else format_us(upper)
    return (f"{where} tail bound at p={probability}: {format_us(estimate.bound_us or 0)}, "
            f"upper {estimate.confidence:.0%} limit {shown} > max_us "
            f"{format_us(limit.value)} ({limit.source}; {cited}: statistics gating)")
