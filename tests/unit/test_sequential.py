"""rtlab.verdict.sequential and rtlab.verdict.case's windows: when an adaptive run stops, on
synthetic histograms of a known shape (a regression is a wider tail) and on real
cyclictest output for the windows (tests/data/cyclictest). How often and how soon the
policy decides over thousands of runs is bench/adaptive_quality.py's."""

from pathlib import Path

import attr
import numpy as np
import pytest

from rtlab.measure.cyclictest import NoWakeup, parse_json
from rtlab.verdict.baseline import no_baseline
from rtlab.verdict.case import CasePlan, LatencyCase
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.sequential import (
    CAP,
    CONTINUE,
    NO_CHANGE,
    REGRESSION,
    SequentialPolicy,
    decide,
)
from rtlab.verdict.thresholds import StatisticsPolicy, Threshold

DATA = Path(__file__).resolve().parents[1] / "data" / "cyclictest"
POLICY = SequentialPolicy(window_s=60, cap_s=3600)


def histogram(n: int, rng: np.random.Generator, tail: float = 1.0) -> Histogram:
    """n wake-ups: a lognormal body around 15 µs and, for 3 %, an exponential tail from
    20 µs whose scale ``tail`` widens; -h 400."""
    body = rng.lognormal(np.log(15), 0.1, n)
    in_tail = rng.random(n) < 0.03
    values = np.where(in_tail, 20 + rng.exponential(4 * tail, n), body)
    counts = np.bincount(np.minimum(values.astype(int), 400), minlength=401)
    return Histogram(counts[:400], int(counts[400]), float(values.max()))


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def test_looks_begin_after_four_windows_double_up_to_the_cap_and_share_the_confidence():
    assert POLICY.looks == (240, 480, 960, 1920, 3600)
    assert POLICY.look_confidence == pytest.approx(1 - 0.02 / 5)
    assert [t for t in range(60, 3601, 60) if POLICY.is_look(t)] == list(POLICY.looks)
    # a window that does not divide a look's time: the window that passes it looks
    odd = SequentialPolicy(window_s=45, cap_s=600)
    assert [t for t in range(45, 646, 45) if odd.is_look(t)] == [180, 360, 630]
    # the cap is a look even before four windows; every window, where a lab asks for it
    assert SequentialPolicy(window_s=10, cap_s=30).looks == (30,)
    assert SequentialPolicy(window_s=60, cap_s=600, min_windows=1).looks == (
        60, 120, 240, 480, 600)


@pytest.mark.parametrize(("changes", "message"), [
    ({"window_s": 0}, "the window (0 s) must be positive and at most the cap"),
    ({"window_s": 7200}, "the window (7200 s) must be positive and at most the cap"),
    ({"confidence": 1.0}, "confidence must be in (0, 1)"),
    ({"margin": 0}, "margin must be in (0, 1)"),
    ({"min_windows": 0}, "min_windows must be at least 1, got 0"),
])
def test_a_policy_that_cannot_work_is_refused(changes, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        attr.evolve(POLICY, **changes)


def test_without_a_baseline_a_run_goes_to_the_cap(rng):
    run = histogram(240_000, rng)
    early = decide(POLICY, 240, run, [], limit_us=400, interval_us=1000, cpus=4)
    assert (early.stop, early.outcome) == (False, CONTINUE)
    assert "no baseline" in early.reason
    last = decide(POLICY, 3600, run, [], limit_us=400, interval_us=1000, cpus=4)
    assert (last.stop, last.outcome) == (True, CAP)


def test_between_looks_nothing_is_compared(rng):
    baseline = [histogram(2_000_000, rng) for _ in range(5)]
    decision = decide(POLICY, 180, histogram(720_000, rng, tail=3), baseline, limit_us=400,
                      interval_us=1000, cpus=4)
    assert (decision.stop, decision.comparison) == (False, None)


def test_a_wider_tail_stops_the_run_as_a_regression(rng):
    baseline = [histogram(2_000_000, rng) for _ in range(5)]
    decision = decide(POLICY, 240, histogram(960_000, rng, tail=2), baseline, limit_us=400,
                      interval_us=1000, cpus=4)
    assert (decision.stop, decision.outcome) == (True, REGRESSION)
    assert decision.reason.startswith("regression (99.60% at this look of 5): regression: p99")


def test_burst_minutes_are_weighed_against_the_spread_of_the_run_s_own_windows(rng):
    """Baseline hours with a burst (a tail four times wider) in 3 of their 60 minutes; a
    run whose first four minutes hold two. As one histogram it looks like a regression;
    with its windows, their spread says it may be one more ordinary run. Four minutes
    that are all wider still fail."""
    per_minute = 24_000
    baseline = [Histogram.merged([histogram(57 * per_minute, rng),
                                  histogram(3 * per_minute, rng, tail=4)]) for _ in range(6)]
    bursty = [histogram(per_minute, rng, tail=4 if i % 2 else 1) for i in range(4)]
    wider = [histogram(per_minute, rng, tail=4) for _ in range(4)]

    def outcome(minutes, *, windowed: bool):
        return decide(POLICY, 240, Histogram.merged(minutes), baseline, limit_us=None,
                      interval_us=10_000, cpus=4, windows=minutes if windowed else ()).outcome

    assert outcome(bursty, windowed=False) == REGRESSION
    assert outcome(bursty, windowed=True) == CONTINUE
    assert outcome(wider, windowed=True) == REGRESSION


def test_no_change_stops_only_when_the_tail_is_safe_to_the_cap(rng):
    baseline = [histogram(2_000_000, rng) for _ in range(5)]
    candidate = histogram(1_920_000, rng)
    safe = decide(POLICY, 480, candidate, baseline, limit_us=400, interval_us=1000, cpus=4)
    assert (safe.stop, safe.outcome) == (True, NO_CHANGE), safe.reason
    assert "max_us 400 µs is safe to the cap" in safe.reason
    # the same run against a limit the tail reaches before the cap goes on
    close = decide(POLICY, 480, candidate, baseline, limit_us=80, interval_us=1000, cpus=4)
    assert (close.stop, close.outcome) == (False, CONTINUE)
    assert "does not keep the rest of the cap under max_us 80 µs" in close.reason


# ------------------------------------------------------------------ AdaptiveCase ----


def window_result():
    return parse_json((DATA / "imx6q-rt-3s.json").read_text(), "window")


def case(limits: dict[str, float]) -> LatencyCase:
    thresholds = {metric: Threshold(metric, value, "t.yaml:1", None)
                  for metric, value in limits.items()}
    plan = CasePlan("qemu-imx6q", "rt", "idle", 1000, thresholds, StatisticsPolicy())
    return LatencyCase(plan, SequentialPolicy(window_s=3, cap_s=9),
                       no_baseline("no baseline to compare with", length_s=9, min_runs=5,
                                   min_boots=2))


def test_an_adaptive_case_sums_its_windows_and_runs_to_the_cap_without_a_baseline():
    run = case({"max_us": 10_000_000})
    assert run.add(window_result()) is None
    assert run.add(window_result()) is None
    stopped = run.add(window_result())
    assert stopped == "stopped after 9 s: at the cap of 9 s: no baseline to compare with"
    one = window_result()
    assert [c["samples"] for c in run.judged.cpus] == [3 * c.cycles for c in one.cpus]
    assert run.violations == []
    facts = run.facts(stopped, [0.5, 0.6], [{"cpu_utilisation": 0.9}] * 3)
    assert facts["measured_s"] == 9 and facts["gaps_s"] == [0.5, 0.6]
    assert [w["samples"] for w in facts["windows"]] == [sum(c.cycles for c in one.cpus)] * 3
    assert facts["looks"][-1]["outcome"] == CAP


def test_an_exceeded_limit_stops_the_case_at_once():
    run = case({"max_us": 1000})
    stopped = run.add(window_result())
    assert stopped == "stopped after 3 s: a limit is exceeded"
    assert run.violations and all("max_us 1000" in v for v in run.violations)


def test_a_cpu_without_a_wake_up_in_one_window_fails_the_case():
    run = case({"max_us": 10_000_000})
    assert run.add(window_result()) is None
    one = window_result()
    silent = one.cpus[1]
    quiet = attr.evolve(one, cpus=tuple(c for c in one.cpus if c is not silent),
                        no_wakeup=(NoWakeup(silent.thread, silent.cpu),))
    assert run.add(quiet) == "stopped after 6 s: a limit is exceeded"
    assert run.violations[0].startswith("window 2: CPU1 recorded no wake-up in the 3 s window")
