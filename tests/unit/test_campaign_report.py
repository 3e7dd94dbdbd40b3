"""The campaign report (rtlab report --campaign) on synthetic result records with a known
answer (bench/campaign_synthetic.py writes them as the on-board suite does): through the
results store, its tables say what the records say, its pairs find the cost each load was
given, its load proof is net of the idle baseline, and it keeps each campaign execution
apart."""

import json
import math
from html.parser import HTMLParser

import pytest

from rtlab import cli
from rtlab.artifacts.record import write_record
from rtlab.campaign.page import write_campaign_report
from rtlab.campaign.report import collect, comparison_seed, markdown
from rtlab.store import ingest_folder, open_store
from rtlab.store.models import Run
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.variants import COSTS, NO_MEASURABLE_CHANGE, compare_variants
from tests.markdown_table import table
from tests.synthetic_campaign import small_hardening, synthetic


@pytest.fixture(scope="module")
def campaign():
    return small_hardening()


@pytest.fixture(scope="module")
def records(campaign):
    return synthetic.records(campaign, duration_s=300, repeat=3, spread=0.01)


@pytest.fixture(scope="module")
def stored(tmp_path_factory, records):
    folder = tmp_path_factory.mktemp("results")
    for record in records:
        write_record(folder, {k: v for k, v in record.items() if k != "schema"})
    db = tmp_path_factory.mktemp("db") / "results.db"
    store = open_store(f"sqlite:///{db}")
    ingest_folder(store, folder)
    yield store, db
    store.close()


@pytest.fixture(scope="module")
def written(stored, campaign, tmp_path_factory):
    store, _ = stored
    return write_campaign_report(store, campaign, tmp_path_factory.mktemp("report"))


def record_cells(records):
    cells = {}
    for record in records:
        key = (record["flavour"], record["scenario"], record["interval_us"])
        cells.setdefault(key, []).append(record)
    return cells



def test_the_variants_identity_reaches_the_store(stored, campaign):
    store, _ = stored
    with store.session() as session:
        runs = session.query(Run).all()
        assert {(r.campaign, r.campaign_run) for r in runs} == {("hardening",
                                                                  "hardening:synthetic")}
        hardened = [r for r in runs if r.variant == "preempt-rt-hardened"]
        assert len(hardened) == 3
        assert {(r.kernel_flavour, tuple(r.fragments), r.thresholds_flavour, r.flavour)
                for r in hardened} == {("preempt-rt", ("hardening.config",),
                                        "preempt-rt-hardened", "preempt-rt-hardened")}


def test_the_figures_table_says_what_the_records_say(written, records, campaign):
    rows = table(written.summary.read_text(), "variant | load | interval | runs")
    by_cell = record_cells(records)
    assert len(rows) == len(by_cell) == 4
    for row in rows:
        variant, load, interval, runs, verdicts, wakeups, max_us = row[:7]
        found = by_cell[(variant, load, int(interval.removesuffix(" µs")))]
        assert runs == "3" and verdicts == "pass, pass, pass"
        assert int(wakeups) == sum(cpu["samples"] for r in found for cpu in r["cpus"])
        assert float(max_us) == max(cpu["max_us"] for r in found for cpu in r["cpus"])
        merged = Histogram.merged(Histogram.from_record_cpu(cpu) for r in found
                                  for cpu in r["cpus"])
        # p99, p99.9 as nearest-rank quantiles of every wake-up; p99.99 where long enough
        p99, p99_9, p99_99 = row[9:12]
        assert int(p99) == merged.quantile(0.99)
        assert int(p99_9) == merged.quantile(0.999)
        assert p99_99 == (str(merged.quantile(0.9999)) if 1e-4 * merged.samples >= 100
                          else "too short")


def test_each_pair_row_is_the_comparison_of_the_records_and_finds_the_known_cost(
        written, records, campaign):
    rows = table(written.summary.read_text(), "load | interval | p99")
    by_cell = record_cells(records)
    each = 1 - (1 - campaign.confidence) / len(campaign.quantiles)
    assert [row[0] for row in rows] == ["idle", "hackbench"]
    for row in rows:
        runs = [[Histogram.merged(Histogram.from_record_cpu(c) for c in r["cpus"])
                 for r in by_cell[(variant, row[0], 1000)]]
                for variant in ("preempt-rt", "preempt-rt-hardened")]
        for quantile, shown in zip(campaign.quantiles, row[2:], strict=True):
            shift = compare_variants(*runs, quantile=quantile, confidence=each,
                                     seed=seed_of(row[0], quantile))
            assert shown == shift.verdict
    # the model's truth: hackbench 12 µs later, idle unchanged
    data = written.data
    [hackbench] = [r for r in data.pairs if r.scenario == "hackbench"]
    [idle] = [r for r in data.pairs if r.scenario == "idle"]
    assert hackbench.shifts[0].outcome == COSTS
    assert hackbench.shifts[0].ci_us[0] <= 12 <= hackbench.shifts[0].ci_us[1]
    assert idle.shifts[0].outcome == NO_MEASURABLE_CHANGE


def seed_of(scenario, quantile):
    return comparison_seed("imx6q", scenario, 1000, quantile)


class _TableRows(HTMLParser):
    """The text of every <td> row of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def test_the_pages_figures_table_has_the_rows_of_the_checked_markdown_one(written):
    markdown_rows = table(written.summary.read_text(), "variant | load | interval | runs")
    parser = _TableRows()
    parser.feed(written.html.read_text())
    width = len(markdown_rows[0])
    page_rows = [row for row in parser.rows if len(row) == width]
    assert page_rows == markdown_rows


def test_the_max_is_never_shown_alone(written):
    for row in table(written.summary.read_text(), "variant | load | interval | runs"):
        expects = row[7]
        # "median (low-high)", with the outlier named where there is one
        assert expects[0].isdigit() and "(" in expects and "-" in expects, expects
    json_cells = json.loads(written.json.read_text())["cells"]
    assert all(cell["expected_max_us"] is not None for cell in json_cells)


def test_the_load_proof_is_net_of_the_idle_baseline(written, records):
    rows = table(written.summary.read_text(), "variant | load | interval | run | CPU busy")
    hackbench = [row for row in rows if row[1] == "hackbench"]
    idle = {row[0]: row for row in rows if row[1] == "idle"}
    assert len(hackbench) == 6 and len(idle) == 2
    for row in hackbench:
        variant = row[0]
        idle_busy = [r["load_check"]["cpu_utilisation"] for r in records
                     if r["flavour"] == variant and r["scenario"] == "idle"]
        busy = [r["load_check"]["cpu_utilisation"] for r in records
                if r["flavour"] == variant and r["scenario"] == "hackbench"]
        assert row[5] == f"{sum(idle_busy) / len(idle_busy):.0%}"
        assert row[6] == f"{sum(busy) / len(busy) - sum(idle_busy) / len(idle_busy):.0%}"
        assert row[7] == "25%"
        # before and after each window, as the record has them
        assert "→" in row[8] and row[9].endswith("°C")
        assert row[10].startswith("net ") and "≥ 25%" in row[10]


def test_the_page_and_figures_are_written(written):
    page = written.html.read_text()
    assert page.count("<figure>") == len(written.pngs) == 3
    assert "preempt-rt-hardened against preempt-rt" in page
    assert all(png.stat().st_size > 10_000 for png in written.pngs)


def test_executions_of_a_campaign_are_kept_apart(stored, campaign, records, tmp_path):
    store, _ = stored
    later = [{**r, "campaign_run": "hardening:later", "run_id": r["run_id"] + ":later",
              "started": r["started"].replace("2026-11-25", "2026-11-26"),
              "finished": r["finished"].replace("2026-11-25", "2026-11-26")}
             for r in records if r["flavour"] == "preempt-rt" and r["scenario"] == "idle"]
    for record in later:
        write_record(tmp_path, {k: v for k, v in record.items() if k != "schema"})
    ingest_folder(store, tmp_path)
    with store.session() as session:
        newest = collect(session, campaign)
        older = collect(session, campaign, campaign_run="hardening:synthetic")
    assert newest.campaign_run == "hardening:later"
    assert set(newest.cells) == {("imx6q", "preempt-rt", "idle", 1000)}
    assert "not compared: no measured run of preempt-rt-hardened" in markdown(newest)
    assert len(older.cells) == 4


def test_the_command_line(stored, campaign, tmp_path, capsys):
    _, db = stored
    code = cli.main(["report", "--campaign", "hardening", "--campaign-run",
                     "hardening:synthetic", "--db", f"sqlite:///{db}", "--out",
                     str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("campaign hardening, execution hardening:synthetic: 4 cells on "
                          "imx6q; shifts: ")
    assert (tmp_path / "report.html").is_file() and (tmp_path / "summary.md").is_file()
    assert cli.main(["report", "--campaign", "hardening", "--campaign-run", "nope",
                     "--db", f"sqlite:///{db}", "--out", str(tmp_path)]) == 2
    assert "no run 'nope' of campaign 'hardening'" in capsys.readouterr().err


def test_confidence_of_each_quantile_is_its_share_of_the_rows(written, campaign):
    each = written.data.confidence_each
    assert math.isclose(1 - each, (1 - campaign.confidence) / len(campaign.quantiles))
    assert f"{each:.1%} interval" in written.summary.read_text()


def test_a_campaign_whose_cases_all_errored_still_gets_its_report(campaign, records, tmp_path):
    # the lab failed every case (a campaign run on the rack once ended here with matplotlib's
    # "cannot be log-scaled"): the report says so instead of failing to draw empty axes
    errored = [{**r, "verdict": "error", "message": "the board did not boot", "cpus": [],
                "campaign_run": "hardening:errored", "run_id": r["run_id"] + ":errored"}
               for r in records]
    folder = tmp_path / "records"
    for record in errored:
        write_record(folder, {k: v for k, v in record.items() if k != "schema"})
    store = open_store(f"sqlite:///{tmp_path / 'results.db'}")
    try:
        ingest_folder(store, folder)
        report = write_campaign_report(store, campaign, tmp_path / "report",
                                       campaign_run="hardening:errored")
    finally:
        store.close()
    assert report.data.campaign_run == "hardening:errored"
    assert all(not cell.measured for cell in report.data.cells.values())
    pictures = sorted(p.name for p in (tmp_path / "report").rglob("*.png"))
    assert pictures, "no figure written"
