"""rtlab.verdict.case, the one judge of a latency case, and rtlab.verdict.baseline, which
runs may stand as its baseline: a regression fails the case, a pass says what it rules
out, an ineligible baseline makes the case run to its cap and say why, and the LAVA path
gives the same verdict and facts as the on-board suite for the same windows."""

import math
from pathlib import Path

import attr
import numpy as np
import pytest

from rtlab.measure.cyclictest import parse_json
from rtlab.verdict.baseline import (
    Baseline,
    StoredRun,
    eligible_baseline,
    measuring_options,
)
from rtlab.verdict.case import CasePlan, LatencyCase, case_confidence, rate_bound
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.sequential import CAP, NO_CHANGE, REGRESSION
from rtlab.verdict.thresholds import StatisticsPolicy, Threshold

DATA = Path(__file__).resolve().parents[1] / "data"
WINDOW = DATA / "cyclictest" / "imx6q-rt-3s.json"
COMMAND = ("chrt", "-f", "90", "cyclictest", "-S", "-m", "-p", "90", "-i", "1000", "-h",
           "400", "-D", "3s", "-q", "--json=/tmp/rtlab-cyclictest.json")


def window(seed: int = 0):
    """A recorded 3 s window (cyclictest's JSON of the virtual i.MX6Q) with each CPU's
    wake-ups replaced by a physical board's shape, which -h 400 holds: a 10-20 µs body
    and an exponential tail of 3 µs (the emulated figures lie past the histogram)."""
    recorded = parse_json(WINDOW.read_text(), "window")
    rng = np.random.default_rng(seed)
    cpus = []
    for cpu in recorded.cpus:
        latencies = 10 + rng.integers(0, 10, 3000) + rng.exponential(3.0, 3000)
        counts = np.bincount(latencies.astype(int), minlength=400)
        cpus.append(attr.evolve(cpu, cycles=3000, min_us=int(latencies.min()),
                                avg_us=float(latencies.mean()), max_us=int(latencies.max()),
                                histogram={b: int(c) for b, c in enumerate(counts) if c},
                                overflows=0))
    return attr.evolve(recorded, cpus=tuple(cpus))


def window_histogram() -> Histogram:
    return Histogram.merged(Histogram.from_cpu_result(cpu) for cpu in window().cpus)


def faster(hist: Histogram, factor: float) -> Histogram:
    """The histogram with every latency divided by ``factor`` (a kernel that was faster)."""
    counts = np.zeros_like(hist.counts)
    np.add.at(counts, (np.arange(hist.range_us) / factor).astype(int), hist.counts)
    return Histogram(counts, hist.overflows, None)


def stored(hist: Histogram, index: int, *, boot: str | None = None, verdict: str = "pass",
           duration_s: float = 9, command=COMMAND) -> StoredRun:
    return StoredRun(run_key=f"run:{index}", verdict=verdict, duration_s=duration_s,
                     command=tuple(command), boot=boot or f"boot{index % 2}", histogram=hist)


def plan(*, gating: bool = True, max_us: float = 10_000_000, cases: int = 1) -> CasePlan:
    limits = {"max_us": Threshold("max_us", max_us, "t.yaml:3", None)}
    policy = StatisticsPolicy(gating=gating, sources={"gating": "t.yaml:9"})
    return CasePlan("qemu-imx6q", "rt", "cpu100", 1000, limits, policy, cases=cases)


def baseline(runs, length_s: float = 9, **options):
    return eligible_baseline(runs, command=COMMAND, length_s=length_s, min_runs=5,
                             min_boots=2, **options)


# an adaptive case that may stop early: its first look comes after four 3 s windows
# (SequentialPolicy.min_windows), the cap after eight
EARLY_CAP = 24


def early_baseline(hist: Histogram) -> Baseline:
    return baseline([stored(hist, i, duration_s=EARLY_CAP) for i in range(6)],
                    length_s=EARLY_CAP)


def first_look(case: LatencyCase) -> str | None:
    """Feed the case windows up to its first look; why it stopped there."""
    for seed in range(3):
        assert case.add(window(seed)) is None, "a case goes on to its first look"
    return case.add(window(3))


# ----------------------------------------------------------------- baselines ----


def test_the_length_and_the_trace_are_not_measuring_options():
    traced = (*COMMAND[:12], "-D", "60s", "-q", "--json=/tmp/rtlab-cyclictest.json",
              "--breaktrace=20000000", "--tracemark")
    assert measuring_options(traced) == measuring_options(COMMAND)
    assert measuring_options([*COMMAND[:-1], "--duration=5m", COMMAND[-1]]) == \
        measuring_options(COMMAND)
    other = [*COMMAND]
    other[other.index("-i") + 1] = "100"
    assert measuring_options(other) != measuring_options(COMMAND)


def test_only_passing_runs_of_the_same_options_and_length_from_enough_boots_are_eligible():
    hist = window_histogram()
    other_options = [*COMMAND]
    other_options[other_options.index("-h") + 1] = "200"
    runs = [stored(hist, i) for i in range(5)] + [
        stored(hist, 5, verdict="fail"),
        stored(hist, 6, duration_s=60),
        stored(hist, 7, duration_s=9.5),  # within 10 % of 9 s: the same length
        stored(hist, 8, command=other_options)]
    found = baseline(runs)
    assert found.eligible and found.runs == 6 and found.boots == 2
    assert found.left_out == {"verdict fail": 1, "not 9 s long": 1,
                              "other cyclictest options": 1}
    assert found.describe() == "6 runs of 9 s, 2 boots"


@pytest.mark.parametrize("runs, why", [
    ([stored(window_histogram(), 0)],
     "no eligible baseline: 1 eligible run from 1 boot, an early decision needs 5 passing "
     "runs of the same options and 9 s from 2 boots"),
    ([stored(window_histogram(), i, boot="one") for i in range(6)],
     "no eligible baseline: 6 eligible runs from 1 boot"),
    ([stored(window_histogram(), i, verdict="fail") for i in range(6)],
     "no eligible baseline: 0 eligible runs from 0 boots, an early decision needs 5 passing "
     "runs of the same options and 9 s from 2 boots (left out: 6 verdict fail)"),
    ([stored(window_histogram(), i, duration_s=3600) for i in range(6)],
     "(left out: 6 not 9 s long)"),
])
def test_an_ineligible_baseline_makes_the_case_run_to_its_cap_and_say_why(runs, why):
    found = baseline(runs)
    assert not found.eligible and why in found.why_not
    case = plan().measure(window_s=3, cap_s=9, baseline=found)
    assert case.add(window()) is None
    assert case.add(window()) is None
    stopped = case.add(window())
    assert stopped.startswith("stopped after 9 s: at the cap of 9 s: no eligible baseline")
    assert [d.outcome for d in case.decisions][-1] == CAP
    outcome = case.outcome()
    assert outcome.verdict == "pass"
    assert f"no comparison: {found.why_not}" in outcome.message
    assert case.record_facts()["baseline"]["eligible"] is False


# ------------------------------------------------------------------ verdicts ----


def test_a_regression_against_an_eligible_baseline_fails_the_case_at_its_first_look():
    hist = window_histogram()
    case = plan().measure(window_s=3, cap_s=EARLY_CAP, baseline=early_baseline(faster(hist, 2)))
    stopped = first_look(case)
    assert stopped.startswith("stopped after 12 s: regression")
    outcome = case.outcome()
    assert outcome.verdict == "fail"
    assert outcome.message.startswith(
        "regression against the baseline (6 runs of 24 s, 2 boots): regression: p99.9 ")
    assert outcome.message.endswith("(t.yaml:9: statistics gating)")
    facts = case.record_facts()
    assert facts["comparison"]["outcome"] == REGRESSION
    assert facts["comparison"]["message"] in outcome.message


def test_a_lab_that_turns_gating_off_gets_a_pass_that_reports_the_regression():
    hist = window_histogram()
    case = plan(gating=False).measure(window_s=3, cap_s=EARLY_CAP,
                                      baseline=early_baseline(faster(hist, 2)))
    assert first_look(case).startswith("stopped after 12 s: regression")
    outcome = case.outcome()
    assert outcome.verdict == "pass"
    assert "a regression was found but does not fail the case (t.yaml:9: gating false)" \
        in outcome.message
    # said once, with the comparison: not also as "the comparison" beside it
    assert outcome.message.count(case.regression.message) == 1


def test_a_fixed_run_is_one_look_at_its_end_and_a_regression_fails_it_too():
    hist = window_histogram()
    found = eligible_baseline([stored(faster(hist, 2), i, duration_s=3) for i in range(6)],
                              command=COMMAND, length_s=3, min_runs=5, min_boots=2)
    case = plan().measure(window_s=3, cap_s=3, baseline=found)
    assert case.add(window()).startswith("stopped after 3 s: regression")
    assert case.outcome().verdict == "fail"


def test_an_early_stop_on_no_change_passes_and_says_what_it_rules_out():
    hist = window_histogram()
    case = plan().measure(window_s=3, cap_s=EARLY_CAP, baseline=early_baseline(hist))
    stopped = first_look(case)
    assert stopped is not None and "no change" in stopped, [d.reason for d in case.decisions]
    assert case.decisions[-1].outcome == NO_CHANGE
    outcome = case.outcome()
    wakeups = 4 * sum(cpu.cycles for cpu in window().cpus)
    assert outcome.verdict == "pass"
    exposure, comparison = outcome.message.split("; ")[:2]
    assert exposure == (f"no wake-up over 10000000 µs in {wakeups / 1e3:.3g} k wake-ups "
                        f"(4 CPUs, 12 s): rate < {rate_bound(wakeups):.1e} per wake-up at 95 %")
    assert comparison.startswith("p99.9 ") and "no shift above +" in comparison
    assert comparison.endswith("(baseline 6 runs of 24 s, 2 boots)")


def test_a_limit_exceeded_fails_whatever_the_baseline_says():
    hist = window_histogram()
    found = baseline([stored(hist, i) for i in range(6)])
    case = plan(max_us=30).measure(window_s=3, cap_s=9, baseline=found)
    assert case.add(window()) == "stopped after 3 s: a limit is exceeded"
    outcome = case.outcome()
    assert outcome.verdict == "fail" and "> max_us 30 µs (t.yaml:3)" in outcome.message


def test_the_rate_bound_is_the_exact_binomial_one():
    # no exceedance in n trials: P(0 | p) = (1 - p)^n = 0.05 at the bound
    for n in (1, 100, 2_900_000):
        p = rate_bound(n)
        assert math.isclose((1 - p) ** n, 0.05, rel_tol=1e-9)
    # about 3 / n for large n (the rule of three)
    assert math.isclose(rate_bound(3_000_000), 3 / 3_000_000, rel_tol=0.01)


def test_a_pipeline_of_cases_shares_its_false_fail_rate():
    # the comparison has half of each case's share (rtlab.verdict.budget.SHARES)
    assert case_confidence(0.01, 1) == pytest.approx(0.99)
    assert case_confidence(0.01, 16) == pytest.approx(1 - 0.01 / 16)
    case = plan(cases=16).measure(window_s=3, cap_s=9, baseline=baseline([]))
    assert case.policy.confidence == pytest.approx(1 - 0.01 / 16)
    # decided when the case is planned: a plan with no case count is refused there
    with pytest.raises(ValueError, match="whole number >= 1"):
        plan(cases=0)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="whole number >= 1"):
            case_confidence(0.01, bad)
    with pytest.raises(ValueError, match=r"pipeline_false_fail must be in \(0, 1\)"):
        case_confidence(1.0, 4)


def test_the_quantile_thresholds_yaml_sets_is_the_lowest_one_compared():
    """statistics: quantile: reached the record but not the comparison (always p99.9)."""
    hist = window_histogram()
    found = baseline([stored(hist, i, duration_s=3) for i in range(6)], length_s=3)
    compared = {}
    for quantile in (0.999, 0.99):
        policy = StatisticsPolicy(quantile=quantile, sources={"gating": "t.yaml:9"})
        case = attr.evolve(plan(), statistics=policy).measure(window_s=3, cap_s=3,
                                                              baseline=found)
        case.add(window())
        facts = case.record_facts()["comparison"]
        compared[quantile] = facts["quantile"]
        assert case.policy.quantile == quantile
    assert compared == {0.999: 0.999, 0.99: 0.99}
