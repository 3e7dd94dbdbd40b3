"""rtlab.verdict.judge: how one cyclictest run becomes record facts and verdict messages."""

from pathlib import Path

from rtlab.measure.cyclictest import parse_json
from rtlab.verdict.judge import cpu_facts, judge_latency, no_wakeup_facts, no_wakeup_violation
from rtlab.verdict.thresholds import StatisticsPolicy, Threshold, load_thresholds

NOWAKEUP = Path(__file__).resolve().parents[1] / "data" / "cyclictest" / (
    "nowakeup-imx6q-rt-hackbench-3s.json")


def test_a_thread_that_never_woke_fails_naming_cpu_window_and_limit():
    result = parse_json(NOWAKEUP.read_text(encoding="utf-8"), NOWAKEUP.name)
    limits = load_thresholds().lookup("qemu-imx6q", "rt", "hackbench", 1000)
    max_us = limits["max_us"]
    messages = [no_wakeup_violation(thread, 3, limits) for thread in result.no_wakeup]
    assert messages == [
        f"CPU{cpu} recorded no wake-up in the 3 s window (0 samples): its cyclictest thread "
        f"never completed a cycle, so no latency was measured there and none passes max_us "
        f"{int(max_us.value)} µs ({max_us.source}: {max_us.reason})"
        for cpu in (2, 3)
    ]


def test_without_a_max_limit_a_thread_that_never_woke_still_fails():
    result = parse_json(NOWAKEUP.read_text(encoding="utf-8"), NOWAKEUP.name)
    assert no_wakeup_violation(result.no_wakeup[0], 3, {}) == (
        "CPU2 recorded no wake-up in the 3 s window (0 samples): its cyclictest thread never "
        "completed a cycle, so no latency was measured there")


def test_the_record_keeps_threads_that_never_woke_without_figures():
    result = parse_json(NOWAKEUP.read_text(encoding="utf-8"), NOWAKEUP.name)
    assert no_wakeup_facts(result.no_wakeup[1]) == {
        "cpu": 3, "thread": 3, "samples": 0, "min_us": None, "avg_us": None, "max_us": None,
        "overflows": None, "no_wakeup": True}
    measured = cpu_facts(result.cpus[0])
    assert (measured["samples"], measured["max_us"], measured["overflows"]) == (592, 58732, 586)
    assert "no_wakeup" not in measured


def synthetic_cpu(tail_scale_us: float, samples: int = 1_000_000, seed: int = 1):
    """One CPU's cyclictest result: a 10-20 µs body and an exponential tail above it."""
    import numpy as np

    from rtlab.measure.cyclictest import CpuResult

    rng = np.random.default_rng(seed)
    latencies = 10 + rng.integers(0, 10, samples) + rng.exponential(tail_scale_us, samples)
    counts = np.bincount(np.minimum(latencies.astype(int), 400), minlength=401)
    return CpuResult(thread=0, cpu=0, cycles=samples, min_us=int(latencies.min()),
                     avg_us=float(latencies.mean()), max_us=int(latencies.max()),
                     histogram={b: int(c) for b, c in enumerate(counts[:400]) if c},
                     histogram_range_us=400, overflows=int(counts[400]))


def policy(gating: bool):
    from rtlab.verdict.thresholds import StatisticsPolicy

    return StatisticsPolicy(exceedance_probability=1e-6, gating=gating,
                            sources={"gating": "thresholds.yaml:7"} if gating else {})


def limit(value: float):
    from rtlab.verdict.thresholds import Threshold

    return {"max_us": Threshold("max_us", value, "thresholds.yaml:42", None)}


def test_tail_estimate_lands_in_the_record_as_strict_json():
    import json

    from rtlab.verdict.judge import cpu_tail, tail_facts

    estimate = cpu_tail(synthetic_cpu(3.0), limit(150), policy(False), 1000)
    assert estimate is not None and estimate.fitted
    facts = tail_facts(estimate)
    # strict JSON: what PostgreSQL's JSON column and any other reader accept
    text = json.dumps(facts, allow_nan=False)
    assert json.loads(text)["bound_us"] == estimate.bound_us
    # an exponential tail of scale 3 µs over a 10-20 µs body: 1e-6 lies near 19 + 3 ln(1e6)
    assert 40 < estimate.bound_us < 75


def test_statistical_gate_fails_only_where_thresholds_make_it_gating():
    from rtlab.verdict.judge import cpu_tail, tail_violation

    heavy = cpu_tail(synthetic_cpu(12.0), limit(100), policy(True), 1000)
    # observed max stays under the limit in this run, the tail bound does not
    assert heavy.observed_max_us < 400
    assert tail_violation(0, heavy, policy(False), limit(100)) is None
    message = tail_violation(0, heavy, policy(True), limit(100))
    assert message is not None and message.startswith("CPU0 tail bound at p=1e-06: ")
    assert "> max_us 100 µs (thresholds.yaml:42; thresholds.yaml:7: statistics gating)" in message
    light = cpu_tail(synthetic_cpu(2.0), limit(100), policy(True), 1000)
    assert tail_violation(0, light, policy(True), limit(100)) is None


def test_statistical_gate_fails_only_a_tail_confidently_above_the_limit():
    """The gate fails on evidence: a bound whose interval straddles max_us, or a tail too
    thin to fit, says nothing against the kernel and fails nothing."""
    from rtlab.verdict.judge import cpu_tail, tail_violation

    straddling = cpu_tail(synthetic_cpu(6.0), limit(100), policy(True), 1000)
    low, high = straddling.bound_ci_us
    assert low < 100 < high
    assert tail_violation(0, straddling, policy(True), limit(100)) is None
    # the same tail against a limit below its lower confidence limit fails
    message = tail_violation(0, straddling, policy(True), limit(90))
    assert message is not None and "lower limit (one-sided 97.5000%)" in message
    assert "> max_us 90 µs" in message
    short = cpu_tail(synthetic_cpu(3.0, samples=2000), limit(100), policy(True), 1000)
    assert not short.fitted
    assert tail_violation(0, short, policy(True), limit(100)) is None
    assert tail_violation(0, None, policy(True), limit(100)) is None


def test_a_run_ended_at_a_breach_fails_by_the_breach_not_by_the_threads_it_cut_short():
    """cyclictest --breaktrace ends every thread at the first wake-up past max_us: a CPU
    whose thread had not woken by then was not kept off it for the window."""
    result = parse_json(NOWAKEUP.read_text(encoding="utf-8"), NOWAKEUP.name)
    limits = {"max_us": Threshold("max_us", 50, "thresholds.yaml:9", None)}
    whole = judge_latency(result, limits, StatisticsPolicy(), 3, 1000)
    broken = judge_latency(result, limits, StatisticsPolicy(), 3, 1000, broke=True)
    assert [v for v in whole.violations if "no wake-up" in v] == [
        no_wakeup_violation(thread, 3, limits) for thread in result.no_wakeup]
    assert broken.violations == [v for v in whole.violations if "no wake-up" not in v]
    assert broken.violations and all("> max_us 50 µs" in v for v in broken.violations)
    # the record still says which CPUs had no wake-up
    assert [c["cpu"] for c in broken.cpus if c.get("no_wakeup")] == [2, 3]
