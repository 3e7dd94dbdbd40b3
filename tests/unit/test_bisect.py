"""The bisection's parts without a rack: the searches (commits with skips, options with
kconfig's dependencies), a step's decision on synthetic boots, a commit's configuration
from a repository's history, the result file, its page and its rows in the store."""

import json
from pathlib import Path

import numpy as np
import pytest

from rtlab.bisect import kernels, points, testdev
from rtlab.bisect.decide import (
    CONTINUE,
    StepPolicy,
    confirmed_shift,
    decide_step,
    step_seed,
)
from rtlab.bisect.page import write_report
from rtlab.bisect.result import (
    FOUND,
    IDENTITY,
    MEASURED,
    Bisection,
    Culprit,
    Option,
    Step,
    read_bisection,
)
from rtlab.bisect.search import BAD, GOOD, UNDECIDABLE, CommitSearch, OptionSearch, SearchError
from rtlab.store import open_store
from rtlab.store.bisections import store_bisection, stored_steps
from tests.bisect_repo import stand_in_rack, synthetic_boot

pytest_plugins = ["tests.bisect_repo"]

COMMITS = tuple(f"c{n}" for n in range(1, 9))


def bisect_commits(culprit: str, skip: frozenset[str] = frozenset()) -> tuple:
    search = CommitSearch(COMMITS)
    search.record(COMMITS[-1], BAD)
    tested = []
    while (commit := search.next()) is not None:
        tested.append(commit)
        outcome = (UNDECIDABLE if commit in skip else
                   BAD if COMMITS.index(commit) >= COMMITS.index(culprit) else GOOD)
        search.record(commit, outcome)
    return search.found(), tested


@pytest.mark.parametrize("culprit", COMMITS)
def test_the_commit_search_finds_every_culprit_in_log2_steps(culprit):
    found, tested = bisect_commits(culprit)
    assert found.culprit == culprit
    assert len(tested) <= 3  # 7 commits left after the bad one: log2(8)


def test_a_skipped_commit_is_routed_around_where_a_neighbour_decides():
    # c4 undecidable: c3 or c5 decide instead, and the culprit c6 is still found
    found, tested = bisect_commits("c6", skip=frozenset({"c4"}))
    assert "c4" in tested
    assert found.culprit == "c6"


def test_only_skipped_commits_left_name_every_candidate_instead_of_guessing():
    found, _ = bisect_commits("c5", skip=frozenset({"c4"}))
    assert found.culprit is None
    assert found.candidates == ("c4", "c5")
    assert "c4 could not be decided" in found.reason


def test_the_commit_search_refuses_what_it_did_not_ask():
    search = CommitSearch(COMMITS)
    with pytest.raises(SearchError, match="not in the bisected history"):
        search.record("elsewhere", GOOD)
    with pytest.raises(SearchError, match="outcome 'maybe'"):
        search.record("c1", "maybe")


def bisect_options(options, culprit, resolve=None, undecidable=()):
    search = OptionSearch(options, **({"resolve": resolve} if resolve else {}))
    steps = []
    while (applied := search.next()) is not None:
        steps.append(applied)
        outcome = (UNDECIDABLE if applied in undecidable else
                   BAD if culprit in applied else GOOD)
        search.record(applied, outcome)
    return search.found(), steps


@pytest.mark.parametrize("culprit", ["A", "B", "C", "D", "E"])
def test_the_option_search_names_the_one_option(culprit):
    found, steps = bisect_options(("A", "B", "C", "D", "E"), culprit)
    assert found.culprit == culprit
    assert len(steps) <= 3


def test_an_option_whose_dependency_is_not_applied_comes_with_it():
    # B depends on A (kconfig drops B without A): testing {B} alone applies nothing new,
    # so the step grows to the dependency; the culprit B is still named
    def resolve(applied):
        return frozenset(o for o in applied if o != "B" or "A" in applied)

    found, steps = bisect_options(("B", "C", "A"), "B", resolve=resolve)
    assert found.culprit == "B"
    assert all(("B" not in s) or ("A" in s) for s in steps)


def test_an_undecidable_half_is_tried_the_other_way_round():
    found, steps = bisect_options(("A", "B", "C"), "C",
                                  undecidable=(frozenset({"A", "B"}),))
    assert steps[0] == frozenset({"A", "B"})
    assert steps[1] == frozenset({"C"})
    assert found.culprit == "C"


def test_both_halves_undecidable_stop_with_the_suspects():
    found, _ = bisect_options(("A", "B"), "B",
                              undecidable=(frozenset({"A"}), frozenset({"B"})))
    assert found.culprit is None and set(found.candidates) == {"A", "B"}


boot = synthetic_boot


def test_a_step_is_bad_good_or_undecidable_by_the_boots():
    rng = np.random.default_rng(7)
    policy = StepPolicy(rounds=2)
    good = [boot(rng, 1.0) for _ in range(4)]
    bad = [boot(rng, 2.0) for _ in range(4)]
    confirmation = decide_step(policy, 2, bad, good)
    assert confirmation.outcome == BAD
    shift = confirmed_shift(confirmation.against_good)
    assert 0.8 < shift < 1.2
    regressed = decide_step(policy, 2, [boot(rng, 2.0) for _ in range(4)], good, shift / 2)
    assert regressed.outcome == BAD and regressed.against_good.outcome == "regression"
    unchanged = decide_step(policy, 2, [boot(rng, 1.0) for _ in range(4)], good, shift / 2)
    assert unchanged.outcome == GOOD, unchanged.reason
    assert f"beyond {shift / 2:.0%}, half the confirmed regression" in unchanged.reason
    # the bad point's own confirmation (no margin yet) cannot come out good
    assert decide_step(policy, 2, [boot(rng, 1.0) for _ in range(4)], good).outcome \
        == UNDECIDABLE
    # a margin too narrow for the boots' spread: not guessed, undecidable at the budget
    tight = decide_step(policy, 2, [boot(rng, 1.0) for _ in range(2)], good[:2], 0.001)
    assert tight.outcome == UNDECIDABLE


def test_a_looks_seed_is_its_own_and_the_same_for_the_same_boots():
    rng = np.random.default_rng(11)
    policy = StepPolicy(rounds=2)
    good = [boot(rng, 1.0) for _ in range(4)]
    candidate = [boot(rng, 1.3) for _ in range(4)]
    seed = step_seed("commit:abc", 2, candidate)
    assert seed == step_seed("commit:abc", 2, list(candidate))
    assert len({seed, step_seed("commit:abd", 2, candidate), step_seed("commit:abc", 1, candidate),
                step_seed("commit:abc", 2, candidate[:3])}) == 4
    drawn = [decide_step(policy, 2, candidate, good, 0.2, seed=s).against_good.ci_us
             for s in (seed, seed, seed + 1)]
    assert drawn[0] == drawn[1] and drawn[0] != drawn[2]


def test_a_step_without_valid_boots_is_undecidable_naming_the_errors():
    policy = StepPolicy(rounds=2)
    early = decide_step(policy, 1, [], [], errors=["imx6q-01 step: error: no boot"])
    assert early.outcome == CONTINUE
    last = decide_step(policy, 2, [], [], errors=["imx6q-01 step: error: no boot"])
    assert last.outcome == UNDECIDABLE and "no boot" in last.reason


def test_a_commits_configuration_is_its_kernel_folders_fragments(lab_repo):
    repo, commits = lab_repo
    assert points.history(repo, commits[0], commits[3]) == tuple(commits[1:])
    good = points.configuration(repo, commits[0], "imx6q", "preempt-rt")
    hog = points.configuration(repo, commits[2], "imx6q", "preempt-rt")
    assert good == {"CONFIG_PRINTK_TIME": "y", "CONFIG_PREEMPT_RT": "y"}
    assert points.changed_options(
        points.configuration(repo, commits[1], "imx6q", "preempt-rt"), hog) == (
        "CONFIG_NO_HZ_FULL", "CONFIG_RTLAB_TESTDEV_HOG_MS")
    # a comment changes no configuration: one kernel, one key
    assert points.config_key(hog) == points.config_key(
        points.configuration(repo, commits[3], "imx6q", "preempt-rt"))
    assert testdev.cmdline(hog, "x") == "rtlab.testdev_hog=20"
    assert testdev.cmdline(good, "x") == ""


def test_a_history_in_the_wrong_order_or_an_unknown_flavour_is_an_error(lab_repo):
    repo, commits = lab_repo
    with pytest.raises(points.HistoryError, match="not an ancestor"):
        points.history(repo, commits[3], commits[0])
    with pytest.raises(points.HistoryError, match="no flavour 'preempt'"):
        points.configuration(repo, commits[0], "imx6q", "preempt")


def test_a_bad_test_device_value_names_the_configuration():
    with pytest.raises(ValueError, match=r"abc1234: CONFIG_RTLAB_TESTDEV_HOG_MS=500"):
        testdev.cmdline({"CONFIG_RTLAB_TESTDEV_HOG_MS": "500"}, "abc1234")
    with pytest.raises(ValueError, match="CONFIG_RTLAB_TESTDEV_OTHER is not a test-device"):
        testdev.cmdline({"CONFIG_RTLAB_TESTDEV_OTHER": "y"}, "abc1234")


def sample_result() -> Bisection:
    steps = (
        Step(1, "confirm", "b" * 40, (), BAD, "bad: regression", MEASURED, rounds=1,
             boots=(2, 2), board_s=240.0, confidence=0.98, difference_us=5000.0, key="k1"),
        Step(2, "commit", "c" * 40, (), BAD, "bad: the same configuration", IDENTITY,
             key="k1"),
        Step(3, "options", "c" * 40, ("CONFIG_X",), UNDECIDABLE,
             "undecidable: every place failed", MEASURED, rounds=1, board_s=20.0,
             confidence=0.98, key="k2"),
    )
    return Bisection(board="imx6q", flavour="rt", case="idle/1000us", repository="/lab",
                     good="a" * 40, bad="b" * 40, status=FOUND, reason="found it",
                     steps=steps, culprit=Culprit("c" * 40, "add <hog>", "diff --git …"),
                     option=Option("CONFIG_RTLAB_TESTDEV_HOG_MS", "n", "20"),
                     started="2026-11-27T08:00:00+00:00", bisection_id="bisect:1")


def test_the_result_reads_back_and_makes_its_page_and_its_rows(tmp_path):
    result = sample_result()
    path = result.write(tmp_path)
    assert read_bisection(path) == result
    written = write_report(result, tmp_path / "report")
    page = written.html.read_text()
    assert "add &lt;hog&gt;" in page and "CONFIG_RTLAB_TESTDEV_HOG_MS (n → 20)" in page
    assert "by identity" in page and "undecidable" in page
    assert "| 3 | options | cccccccccccc + CONFIG_X | undecidable |" in \
        written.summary.read_text()
    store = open_store(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        store_bisection(store, result.to_json())
        store_bisection(store, result.to_json())  # stored again: replaced, not doubled
        steps = stored_steps(store, "bisect:1")
    finally:
        store.close()
    assert [(s.step, s.outcome, s.decided_by) for s in steps] == [
        (1, BAD, MEASURED), (2, BAD, IDENTITY), (3, UNDECIDABLE, MEASURED)]
    assert steps[0].board_s == 240.0 and steps[0].good_boots == 2


def test_a_result_of_another_schema_is_refused_by_name(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"schema": 99}))
    with pytest.raises(ValueError, match=r"result.json: schema 99 is not 1"):
        read_bisection(path)


def test_the_bisector_finds_commit_and_option_and_keeps_its_steps_when_stopped(
        lab_repo, tmp_path, monkeypatch):
    """The whole bisection over a stand-in rack: a place's boot of an image whose command
    line carries the test device is twice as late (rtlab.bisect.step is what the rack
    test drives for real)."""
    from rtlab.bisect import bisection

    repo, commits = lab_repo
    rng = np.random.default_rng(3)

    def image(board, flavour, debs, out_dir, progress, extra_cmdline):
        return type("Built", (), {"sd_image": Path(out_dir) / (extra_cmdline or "plain")})

    monkeypatch.setattr(kernels, "build_image", image)
    rack = stand_in_rack(monkeypatch, tmp_path, lambda sd: "testdev" in sd.name, rng)
    request = bisection.Request(repo=repo, good=commits[0], bad=commits[3], board="imx6q",
                                flavour="rt", kernel_flavour="preempt-rt", case="idle/1000us")
    seeds: list[int] = []

    def recorded(*args, seed, **kwargs):
        seeds.append(seed)
        return decide_step(*args, seed=seed, **kwargs)

    monkeypatch.setattr(bisection, "decide_step", recorded)
    result = bisection.Bisector(request, rack, StepPolicy(rounds=4), tmp_path / "a",
                                progress=lambda line: None).run()
    assert result.status == FOUND, result.reason
    # every look of every step draws its own resamples (rtlab.bisect.decide.step_seed)
    measured = [s for s in result.steps if s.decided_by == MEASURED]
    assert len(seeds) >= len(measured) >= 3 and len(set(seeds)) == len(seeds)
    assert result.culprit.commit == commits[2]
    assert result.option.name == "CONFIG_RTLAB_TESTDEV_HOG_MS"
    assert [(s.kind, s.outcome, s.decided_by) for s in result.steps][:2] == [
        ("confirm", BAD, MEASURED), ("commit", GOOD, MEASURED)]
    assert result.steps[2].decided_by == IDENTITY  # c2 has the bad commit's configuration

    # a lab error in the middle (at the options' first step): the steps paid for are kept,
    # and the result says where it stopped
    def fail_at_step_4(index, kind, point):
        if index == 4:
            raise RuntimeError("the coordinator went away")

    out = tmp_path / "b"
    with pytest.raises(RuntimeError, match="coordinator"):
        bisection.Bisector(request, rack, StepPolicy(rounds=4), out,
                           progress=lambda line: None, before_step=fail_at_step_4).run()
    kept = read_bisection(out / "result.json")
    assert kept.status == "undecided" and len(kept.steps) == 3
    assert "stopped after step 3" in kept.reason


def test_a_confirmation_the_lab_could_not_measure_is_an_error_not_a_verdict(
        lab_repo, tmp_path, monkeypatch):
    from rtlab.bisect import bisection
    from rtlab.bisect.step import Boot, Rack

    repo, commits = lab_repo

    def failing_round(rack, places, round_number, *, good, step, case, folder, progress):
        return [Boot("good", place, None, "error: PDU: HTTP 503 on outlet 1", 20.0, folder)
                for place in places]

    monkeypatch.setattr(kernels, "build_image", lambda *a, **k: type(
        "Built", (), {"sd_image": tmp_path / "img"}))
    monkeypatch.setattr(bisection, "measure_round", failing_round)
    monkeypatch.setattr(Rack, "place_names", lambda self: ["imx6q-01"])
    rack = Rack(env_file=tmp_path / "env.yaml", coordinator="-", board_tag="qemu-imx6q",
                duration_s=60)
    request = bisection.Request(repo=repo, good=commits[0], bad=commits[3], board="imx6q",
                                flavour="rt", kernel_flavour="preempt-rt", case="idle/1000us")
    with pytest.raises(RuntimeError, match=r"could not be measured .*HTTP 503"):
        bisection.Bisector(request, rack, StepPolicy(rounds=2), tmp_path / "out",
                           progress=lambda line: None).run()


def test_a_culprit_found_by_elimination_is_not_said_to_be_measured_alone():
    # A applied to the good configuration stays good: B is the one left, never measured
    # on its own
    found, steps = bisect_options(("A", "B"), "B")
    assert steps == [frozenset({"A"})] and found.culprit == "B"
    assert found.reason == ("B by elimination, not measured on its own: the good "
                            "configuration with A applied stayed good, and with every "
                            "option applied it is the bad one")
    assert "alone turns" not in found.reason
    # A applied alone is bad: measured
    found, steps = bisect_options(("A", "B"), "A")
    assert found.reason == ("A turns the good configuration bad (measured: the good "
                            "configuration and A is bad)")


def test_a_configuration_found_undecidable_is_never_measured_again():
    # C depends on A: the other half {C} applies nothing, and the fallback used to fall
    # back to the undecidable half {A, B} itself
    def resolve(applied):
        return frozenset(o for o in applied if o != "C" or "A" in applied)

    found, steps = bisect_options(("A", "B", "C"), "C", resolve=resolve,
                                  undecidable=(frozenset({"A", "B"}),))
    assert steps[0] == frozenset({"A", "B"})
    assert len(steps) == len(set(steps)), steps
    assert steps[1] == frozenset({"A", "C"})


def test_a_bisection_step_never_arms_the_breaktrace(monkeypatch, tmp_path):
    """In the pipeline's bisect job the series' last run failed, which arms the trace of
    a re-run (--rt-trace auto); a step's boot must not stop at its first breach."""
    from rtlab.bisect import step
    from rtlab.verdict.thresholds import TracePolicy
    from rtlab.verdict.trace_choice import choose_trace

    seen = []

    def run_suite(**kwargs):
        seen.append(kwargs["selection"])
        raise RuntimeError("no rack here")

    monkeypatch.setattr(step, "run_suite", run_suite)
    rack = step.Rack(env_file=tmp_path / "env.yaml", coordinator="-",
                     board_tag="qemu-imx6q", duration_s=60)
    boot = step.run_boot(rack, "imx6q-01", "step", tmp_path / "sdcard.img", "idle/1000us",
                         tmp_path / "boot")
    assert boot.histogram is None and "no rack here" in boot.error
    [selection] = seen
    args = selection.pytest_args()
    assert args[args.index("--rt-trace") + 1] == "never"
    # and --rt-trace never wins over a series whose last run failed
    asked = []
    assert choose_trace("never", TracePolicy(), tier="gate",
                        last_failed=lambda: asked.append(1) or "run 7") == \
        (False, "--rt-trace never")
    assert not asked


def test_a_good_point_of_fewer_boots_than_the_baseline_rule_is_not_compared():
    rng = np.random.default_rng(3)
    policy = StepPolicy(rounds=2)
    good = [boot(rng, 1.0) for _ in range(2)]
    step_boots = [boot(rng, 1.0) for _ in range(2)]
    first = decide_step(policy, 1, step_boots, good, 0.2)
    assert first.outcome == CONTINUE and first.against_good is None
    assert "2 of the good point (it needs 1 and 3)" in first.reason
    with pytest.raises(ValueError, match="min_good_boots must be at least 3"):
        StepPolicy(min_good_boots=2)
