"""A campaign run whose window was cut short (cyclictest's --breaktrace at a breach, a break
armed with an unknown outcome, an adaptive run stopped before its cap) never counts as a
whole run: the campaign report leaves it out of the figures and of compare_variants, and
names it with its maximum and why (rtlab.campaign.report.cut_short)."""

import json

import pytest

from rtlab.artifacts.record import write_record
from rtlab.campaign.page import write_campaign_report
from rtlab.campaign.report import collect, comparison_seed, cut_short, markdown
from rtlab.store import ingest_folder, open_store
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.variants import compare_variants
from tests.markdown_table import table
from tests.synthetic_campaign import small_hardening, synthetic

BASELINE, CANDIDATE = "preempt-rt", "preempt-rt-hardened"
BREACH = {"thread": 1234, "comm": "cyclictest", "cpu": 2, "latency_us": 388, "limit_us": 150,
          "summary": "cyclictest-1234 on CPU2 woke 388 µs late (> 150 µs)"}


def armed(**more):
    """A record's trace facts for a break armed at 150 µs (as tests/target writes them)."""
    return {"requested": True, "why": "--rt-trace always", "tracer": "nop",
            "breaktrace_us": 150, "available": True, "reason": None, **more}


@pytest.fixture(scope="module")
def campaign():
    return small_hardening()


@pytest.fixture(scope="module")
def records(campaign):
    found = synthetic.records(campaign, duration_s=60, repeat=3, spread=0.01)
    hackbench = sorted((r for r in found if r["flavour"] == CANDIDATE
                        and r["scenario"] == "hackbench"), key=lambda r: r["started"])
    idle = sorted((r for r in found if r["flavour"] == BASELINE and r["scenario"] == "idle"),
                  key=lambda r: r["started"])
    # the candidate's first hackbench run broke at a breach, its second ran its whole
    # window with the break armed and no breach (a whole run)
    hackbench[0].update(verdict="fail", message="CPU2 max 388 µs > max_us 150 µs",
                        trace=armed(breach=BREACH, file="x.trace.gz"))
    hackbench[1].update(trace=armed(breach=None, note="no wake-up passed 150 µs"))
    # every idle run of the baseline is cut: one armed whose trace never came back, one
    # adaptive run stopped before its cap, one at a breach
    idle[0].update(trace=armed(error="the trace could not be brought back: timeout"))
    idle[1].update(adaptive={"window_s": 20, "cap_s": 60, "measured_s": 40,
                             "stopped": "stopped after 40 s: a limit is exceeded"},
                   verdict="fail", message="CPU0 max 400 µs > max_us 150 µs")
    idle[2].update(verdict="fail", message="CPU2 max 388 µs", trace=armed(breach=BREACH))
    return found


@pytest.fixture(scope="module")
def written(records, campaign, tmp_path_factory):
    folder = tmp_path_factory.mktemp("records")
    for record in records:
        write_record(folder, {k: v for k, v in record.items() if k != "schema"})
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('db') / 'results.db'}")
    try:
        ingest_folder(store, folder)
        yield write_campaign_report(store, campaign, tmp_path_factory.mktemp("report"))
    finally:
        store.close()


def whole(records, variant, scenario):
    return [r for r in records if r["flavour"] == variant and r["scenario"] == scenario
            and cut_short(r) is None]


def merged(record):
    return Histogram.merged(Histogram.from_record_cpu(cpu) for cpu in record["cpus"])


def test_what_counts_as_cut_short():
    assert cut_short({"trace": armed(breach=BREACH)}) == (
        "cyclictest's --breaktrace ended its window at the first wake-up past 150 µs: CPU2 "
        "woke 388 µs late")
    assert cut_short({"trace": armed(error="timeout")}) == (
        "armed to break at 150 µs, and whether that ended its window is unknown (timeout)")
    assert cut_short({"adaptive": {"measured_s": 40, "cap_s": 60, "stopped": "why"}}) == (
        "measured 40 s of the 60 s planned (why)")
    # the judge's own word that a window broke (rtlab.verdict.case), even with no trace
    assert cut_short({"broke": True}) == (
        "cyclictest's --breaktrace ended its window at a breach (the record's broke)")
    assert cut_short({"broke": False}) is None
    # whole: the break armed but not reached, asked for but impossible, never asked for,
    # an adaptive run to its cap, a record of before traces
    assert cut_short({"trace": armed(breach=None)}) is None
    assert cut_short({"trace": {"requested": True, "available": False,
                                "reason": "no tracefs"}}) is None
    assert cut_short({"trace": {"requested": False, "why": "x"}}) is None
    assert cut_short({"adaptive": {"measured_s": 60, "cap_s": 60}}) is None
    assert cut_short({}) is None


def test_a_breach_truncated_run_is_left_out_of_the_comparison(written, records):
    data = written.data
    [row] = [r for r in data.pairs if r.scenario == "hackbench"]
    sides = [[merged(r) for r in whole(records, variant, "hackbench")]
             for variant in (BASELINE, CANDIDATE)]
    assert [len(side) for side in sides] == [3, 2]
    for quantile, shift in zip(data.campaign.quantiles, row.shifts, strict=True):
        expected = compare_variants(*sides, quantile=quantile, confidence=data.confidence_each,
                                    seed=comparison_seed("imx6q", "hackbench", 1000, quantile))
        assert (shift.verdict, shift.ci_us) == (expected.verdict, expected.ci_us)
    assert row.left_out == ((CANDIDATE, 1),)
    cell = data.cell("imx6q", CANDIDATE, "hackbench", 1000)
    assert len(cell.runs) == 3 and len(cell.measured) == 2 and len(cell.cut) == 1


def test_a_side_with_only_cut_runs_is_not_compared(written):
    [row] = [r for r in written.data.pairs if r.scenario == "idle"]
    assert row.shifts == ()
    assert row.note == f"not compared: every run of {BASELINE} was cut short"
    assert row.left_out == ((BASELINE, 3),)


def test_the_report_says_which_runs_it_left_out_and_why(written, records):
    summary = written.summary.read_text()
    rows = {(r[0], r[1]): r for r in table(summary, "variant | load | interval | runs")}
    hackbench = rows[(CANDIDATE, "hackbench")]
    assert hackbench[3:5] == ["2", "fail (cut short), pass, pass"]
    # the figures are the whole runs' only
    kept = whole(records, CANDIDATE, "hackbench")
    assert int(hackbench[5]) == sum(cpu["samples"] for r in kept for cpu in r["cpus"])
    assert rows[(BASELINE, "idle")][3] == "0"
    section = summary.split("### Runs cut short", 1)[1]
    assert "censored" in section
    lines = [line for line in section.splitlines() if line.startswith("- `")]
    assert len(lines) == 4
    assert any(f"/{CANDIDATE}/hackbench/1000us` (fail, max " in line
               and "--breaktrace ended its window at the first wake-up past 150 µs" in line
               for line in lines)
    assert any("measured 40 s of the 60 s planned" in line for line in lines)
    assert any("whether that ended its window is unknown" in line for line in lines)
    assert (f"- hackbench 1000 µs: 1 run of {CANDIDATE} cut short, left out of the comparison"
            in summary)
    page = written.html.read_text()
    assert "<h2>Runs cut short</h2>" in page and "fail (cut short), pass, pass" in page
    cells = {(c["variant"], c["scenario"]): c for c in json.loads(written.json.read_text())
             ["cells"]}
    [cut] = cells[(CANDIDATE, "hackbench")]["cut_short"]
    assert cut["verdict"] == "fail" and "--breaktrace" in cut["why"]
    pairs = {p["scenario"]: p for p in json.loads(written.json.read_text())["pairs"]}
    assert pairs["hackbench"]["left_out"] == {CANDIDATE: 1}


def test_an_error_is_no_cut_run(records, campaign, tmp_path):
    # a case that erred has no figures at all: it stays under "Runs without figures"
    errored = [{**r, "verdict": "error", "message": "the board did not boot", "cpus": [],
                "trace": armed(breach=BREACH)} for r in records]
    folder = tmp_path / "records"
    for record in errored:
        write_record(folder, {k: v for k, v in record.items() if k != "schema"})
    store = open_store(f"sqlite:///{tmp_path / 'results.db'}")
    try:
        ingest_folder(store, folder)
        with store.session() as session:
            data = collect(session, campaign)
    finally:
        store.close()
    assert data.cut_runs() == []
    assert "### Runs cut short" not in markdown(data)
