"""A two-variant campaign end to end on the virtual rack, as `rtlab campaign run` does it:
campaigns/debian.yaml (Debian's stock kernel against Debian's PREEMPT_RT kernel) narrowed
to the virtual Pi 3, two loads, 1 ms and 10 s per case (about 10 000 wake-ups or
more: enough for a p99): each variant's kernel and image,
both flashed, booted and measured, the records ingested, the campaign report written. The
report's tables are then checked against the result records themselves, read from disk,
not through the store or the report's code.

Emulated latencies are milliseconds and cannot rank kernels (docs/virtual-rack.md): this
proves the path and the report, not which kernel is better. The suite file is the
repository's with a 50 ms histogram, so that the emulated tail lies inside it and the
quantiles are figures, not ">= range".
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.campaign.report import comparison_seed
from rtlab.util.paths import REPO_ROOT
from rtlab.verdict.comparison import quantile_name
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.trace_choice import CAMPAIGN_WHY
from rtlab.verdict.variants import compare_variants
from tests.markdown_table import table

# in make test FULL=1: make test's minutes went to the bisection (test_bisect_rack.py), which
# loops images of kernel variants through the rack's places as a campaign does; the
# campaign's stages and report are unit-tested
pytestmark = [pytest.mark.vlab, pytest.mark.full]

VARIANTS = ("debian-std", "debian-rt")
SCENARIOS = ("idle", "cpu100")


@pytest.fixture(scope="module")
def campaign_run(vlab, tmp_path_factory, wide_suite):
    out = tmp_path_factory.mktemp("campaign")
    done = subprocess.run(
        [sys.executable, "-m", "rtlab.cli", "campaign", "run", "debian", "--boards", "rpi3",
         "--scenarios", ",".join(SCENARIOS), "--intervals", "1000", "--duration", "10",
         "--repeat", "1", "--places", "1", "--out", str(out), "--suite", str(wide_suite),
         "--coordinator", vlab.coordinator_address, "--campaign-run", "debian:make-test",
         "--db", f"sqlite:///{out / 'results.db'}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return out, done.stdout


def records(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "test").rglob("results/*.json"))]


def test_every_case_was_measured_and_carries_its_variant(campaign_run):
    out, _ = campaign_run
    found = records(out)
    assert sorted((r["flavour"], r["scenario"]) for r in found) == sorted(
        (v, s) for v in VARIANTS for s in SCENARIOS)
    for record in found:
        assert record["verdict"] == "pass", record["message"]
        variant = record["variant"]
        assert variant["name"] == record["flavour"]
        assert (variant["campaign"], variant["source"]) == ("debian", "debian")
        assert record["campaign_run"] == "debian:make-test"
        # judged by Debian's flavour's limits, filed under the variant's own series
        assert record["thresholds_flavour"] == variant["debian"]
        assert record["name"] == f"qemu-rpi3/{variant['name']}/{record['scenario']}/1000us"
        assert record["thresholds"]["max_us"]["source"].startswith("thresholds.yaml:")
        assert record["system"]["realtime"] == (variant["debian"] == "rt")
        # the window's load average before and after, for the report's load proof
        assert record["load_check"]["loadavg_before"] and record["load_check"]["loadavg"]
        # measured for its whole length: a campaign never arms cyclictest's --breaktrace
        # (whatever thresholds.yaml says: tests/unit/test_trace_choice.py)
        assert record["trace"] == {"requested": False, "why": CAMPAIGN_WHY}, record["trace"]
        assert not any(word.startswith("--breaktrace") for word in record["command"])
        assert record["broke"] is False and record["duration_s"] == 10


def test_the_reports_figures_are_the_records(campaign_run):
    out, stdout = campaign_run
    summary = (out / "report" / "summary.md").read_text()
    assert summary in stdout
    rows = table(summary, "variant | load | interval | runs")
    assert len(rows) == len(VARIANTS) * len(SCENARIOS)
    by_cell = {(r["flavour"], r["scenario"]): r for r in records(out)}
    for row in rows:
        record = by_cell[(row[0], row[1])]
        cpus = [cpu for cpu in record["cpus"] if not cpu.get("no_wakeup")]
        merged = Histogram.merged(Histogram.from_record_cpu(cpu) for cpu in cpus)
        assert row[2:5] == ["1000 µs", "1", "pass"]
        assert int(row[5]) == sum(cpu["samples"] for cpu in cpus) == merged.samples
        assert float(row[6]) == max(cpu["max_us"] for cpu in cpus)
        # the max is never shown alone: what the tail expects, or why it cannot say
        assert row[7] and row[7] != "–"
        weighted = sum(cpu["avg_us"] * cpu["samples"] for cpu in cpus) / merged.samples
        assert row[8] == (f"{weighted:.0f}" if weighted >= 10 else f"{weighted:.1f}")
        # a quantile needs 100 wake-ups beyond it, or it is not estimated
        for quantile, shown in zip((0.99, 0.999, 0.9999), row[9:12], strict=True):
            value = merged.quantile(quantile)
            assert shown == ("too short" if (1 - quantile) * merged.samples < 100
                             else str(value) if value is not None
                             else f"≥ {merged.range_us}")


def test_the_pair_table_is_the_comparison_of_the_records(campaign_run):
    out, _ = campaign_run
    summary = (out / "report" / "summary.md").read_text()
    quantiles = (0.99, 0.999, 0.9999)
    rows = table(summary, "load | interval | " + " | ".join(quantile_name(q)
                                                             for q in quantiles))
    assert [row[0] for row in rows] == list(SCENARIOS)
    by_cell = {(r["flavour"], r["scenario"]): r for r in records(out)}
    each = 1 - (1 - 0.95) / len(quantiles)
    for row in rows:
        runs = [[Histogram.merged(Histogram.from_record_cpu(cpu)
                                  for cpu in by_cell[(variant, row[0])]["cpus"]
                                  if not cpu.get("no_wakeup"))] for variant in VARIANTS]
        for quantile, shown in zip(quantiles, row[2:], strict=True):
            expected = compare_variants(
                *runs, quantile=quantile, confidence=each,
                seed=comparison_seed("qemu-rpi3", row[0], 1000, quantile))
            assert shown == expected.verdict
    # one run each: the report says the spread is unknown
    assert "one run of each variant: their run-to-run spread is unknown" in summary


def test_the_loads_are_proven_net_of_the_measuring_program(campaign_run):
    out, _ = campaign_run
    summary = (out / "report" / "summary.md").read_text()
    rows = table(summary, "variant | load | interval | run | CPU busy")
    by_cell = {(r["flavour"], r["scenario"]): r for r in records(out)}
    for row in rows:
        record = by_cell[(row[0], row[1])]
        busy = record["load_check"]["cpu_utilisation"]
        assert row[4] == f"{busy:.0%}"
        idle = by_cell[(row[0], "idle")]["load_check"]["cpu_utilisation"]
        assert row[5] == f"{idle:.0%}"
        before, after = (record["load_check"][k].split()[0]
                         for k in ("loadavg_before", "loadavg"))
        assert row[8] == f"{before} → {after}"
        # QEMU's boards have no thermal zones
        assert row[9] == "no thermal zones"
        if row[1] == "cpu100":
            assert row[6] == f"{max(busy - idle, 0):.0%}"
            assert row[10].startswith("net ")
    page = (out / "report" / "report.html").read_text()
    assert page.count("<figure>") == 3
    assert len(list((out / "report").glob("campaign-*.png"))) == 3
