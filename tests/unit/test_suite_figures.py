"""rtlab.suite: how one cyclictest run becomes record facts and verdict messages."""

from pathlib import Path

from rtlab.cyclictest import parse_json
from rtlab.suite import cpu_facts, no_wakeup_facts, no_wakeup_violation
from rtlab.thresholds import load_thresholds

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
