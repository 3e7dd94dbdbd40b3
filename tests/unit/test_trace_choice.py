"""Which latency cases arm the kernel's trace, and so cyclictest's --breaktrace
(rtlab.verdict.trace_choice.choose_trace, behind tests/target's trace_choice): never a
campaign's, whatever thresholds.yaml or the store says; by default the gate tier's, unless
thresholds.yaml turns it off; other tiers as before."""

import datetime
import importlib.util
import textwrap

import pytest

from rtlab.artifacts.identity import RUN_VARIABLE, campaign_of
from rtlab.artifacts.record import write_record
from rtlab.campaign.spec import load_campaign
from rtlab.measure.suite import load_suite
from rtlab.store import URL_VARIABLE
from rtlab.store.query import last_failed_run
from rtlab.util.paths import REPO_ROOT
from rtlab.verdict.thresholds import TracePolicy, load_thresholds
from rtlab.verdict.trace_choice import (
    CAMPAIGN_WHY,
    GATE_WHY,
    NOT_ASKED_WHY,
    TraceChoiceError,
    choose_trace,
)
from tests.sqlite_store import ingested

UNSET = TracePolicy()
ON = TracePolicy(True, "thresholds.yaml:12")
OFF = TracePolicy(False, "thresholds.yaml:14")


def never_asked() -> str | None:
    raise AssertionError("the store was asked though something before it decided")


def failed_last() -> str | None:
    return "gitlab:104, 2026-11-25 08:00"


def test_a_campaign_case_never_breaks_whatever_thresholds_or_the_store_say():
    for policy in (UNSET, ON, OFF):
        for tier in (None, "gate", "full"):
            wanted, why = choose_trace("auto", policy, campaign="hardening", tier=tier,
                                       last_failed=never_asked)
            assert (wanted, why) == (False, CAMPAIGN_WHY), (policy, tier)
    assert CAMPAIGN_WHY == ("a campaign case is measured for its whole length: --breaktrace "
                            "would end it at the first breach")
    # a series that failed last would trace outside a campaign, not in one
    assert choose_trace("auto", UNSET, last_failed=failed_last)[0] is True
    assert choose_trace("auto", UNSET, campaign="hardening",
                        last_failed=failed_last) == (False, CAMPAIGN_WHY)


def test_always_is_refused_for_a_campaign_and_never_is_plain():
    with pytest.raises(TraceChoiceError, match=r"--rt-trace always \(rtlab run --trace "
                       r"always\): a campaign case is measured for its whole length.*campaign "
                       r"hardening.*give --rt-trace auto or never"):
        choose_trace("always", ON, campaign="hardening")
    assert choose_trace("never", ON, campaign="hardening") == (False, "--rt-trace never")
    # outside a campaign, always and never decide before the file
    assert choose_trace("always", OFF, last_failed=never_asked) == (True, "--rt-trace always")
    assert choose_trace("never", ON, tier="gate",
                        last_failed=failed_last) == (False, "--rt-trace never")
    with pytest.raises(ValueError, match="--rt-trace must be one of auto, always, never"):
        choose_trace("sometimes", UNSET)


def test_the_gate_tier_traces_by_default_without_asking_the_store():
    assert choose_trace("auto", UNSET, tier="gate",
                        last_failed=never_asked) == (True, GATE_WHY)
    assert GATE_WHY == "gate tier: a breach keeps its trace (docs/tracing.md)"


def test_thresholds_trace_false_still_turns_it_off_in_the_gate_tier():
    assert choose_trace("auto", OFF, tier="gate", last_failed=failed_last) == (
        False, "trace: false (thresholds.yaml:14)")
    assert choose_trace("auto", ON, tier="gate", last_failed=never_asked) == (
        True, "trace: true (thresholds.yaml:12)")


@pytest.mark.parametrize("tier", [None, "full"])
def test_other_tiers_keep_the_file_and_the_rerun_rule(tier):
    assert choose_trace("auto", ON, tier=tier, last_failed=never_asked) == (
        True, "trace: true (thresholds.yaml:12)")
    assert choose_trace("auto", OFF, tier=tier, last_failed=never_asked) == (
        False, "trace: false (thresholds.yaml:14)")
    assert choose_trace("auto", UNSET, tier=tier, last_failed=failed_last) == (
        True, "a re-run: the series' last stored run failed (gitlab:104, 2026-11-25 08:00)")
    assert choose_trace("auto", UNSET, tier=tier, last_failed=lambda: None) == (
        False, NOT_ASKED_WHY)


def test_the_policy_comes_from_thresholds_yaml_as_the_fixture_reads_it(tmp_path):
    # the fixture passes Thresholds.trace's policy through: a `trace: false` on the
    # scenario beats the gate tier, an unset file lets the tier decide
    suite = load_suite(REPO_ROOT / "suite.yaml")
    path = tmp_path / "thresholds.yaml"
    path.write_text(textwrap.dedent("""\
        boards:
          imx6q:
            flavours:
              rt:
                max_us: 150
                scenarios:
                  hackbench:
                    trace: false
        """))
    thresholds = load_thresholds(path, suite)
    hackbench = thresholds.trace("imx6q", "rt", "hackbench", 100)
    combined = thresholds.trace("imx6q", "rt", "combined", 100)
    assert choose_trace("auto", hackbench, tier="gate")[0] is False
    assert choose_trace("auto", combined, tier="gate") == (True, GATE_WHY)


def test_a_session_is_a_campaigns_by_its_images_variant_or_its_execution():
    variant = {"variant": {"name": "preempt-rt-hardened", "campaign": "hardening"}}
    assert campaign_of(variant, {}) == "hardening"
    assert campaign_of({}, {RUN_VARIABLE: "hardening:20261125T080000Z"}) == (
        "hardening:20261125T080000Z")
    assert campaign_of({"image_id": "x"}, {RUN_VARIABLE: ""}) is None
    assert campaign_of({"variant": None}, {}) is None


_spec = importlib.util.spec_from_file_location(
    "campaign_synthetic", REPO_ROOT / "bench" / "campaign_synthetic.py")
synthetic = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(synthetic)


def test_the_rerun_rule_reads_the_series_last_stored_run(tmp_path, monkeypatch):
    campaign = load_campaign("hardening").narrowed(boards=["imx6q"], scenarios=["idle"],
                                                   intervals_us=[1000])
    records = synthetic.records(campaign, duration_s=10, repeat=2, spread=0.01)
    series = [r for r in records if r["flavour"] == "preempt-rt"]
    older, newer = sorted(series, key=lambda r: r["started"])
    folder = tmp_path / "records"
    write_record(folder, {k: v for k, v in older.items() if k != "schema"})
    failed = {**newer, "verdict": "fail", "message": "CPU1 max 200 µs > max_us 150 µs"}
    write_record(folder, {k: v for k, v in failed.items() if k != "schema"})
    url = ingested(folder, tmp_path / "results.db")
    ask = {"board": "imx6q", "flavour": "preempt-rt", "scenario": "idle", "interval_us": 1000,
           "ref": None}
    started = datetime.datetime.fromisoformat(newer["started"])
    told = last_failed_run(url, **ask)
    assert told is not None and told.endswith(f", {started:%Y-%m-%d %H:%M}")
    # the other variant's last run passed; no store at all asks nothing
    assert last_failed_run(url, **{**ask, "flavour": "preempt-rt-hardened"}) is None
    monkeypatch.delenv(URL_VARIABLE, raising=False)
    assert last_failed_run(None, **ask) is None
    monkeypatch.setenv(URL_VARIABLE, url)
    assert last_failed_run(None, **ask) == told
