"""Exposure per kernel (rtlab.store.exposure, the report's section): every stored run of a
kernel on boards of one type under one load pooled, its exceedances of max_us counted from
the histograms, and the exact Poisson bound on their rate; on SQLite and on a real
PostgreSQL server (tests/pg.py), since the pooling is SQL."""

import datetime
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from rtlab.artifacts.record import SCHEMA, record_file_name
from rtlab.report.build import write_report
from rtlab.report.selection import Selection
from rtlab.store import ingest_folder, open_store
from rtlab.store.exposure import (
    DEFAULT_CONFIDENCE,
    KernelId,
    exceedances,
    kernel_exposure,
    kernel_id,
    poisson_upper,
)
from rtlab.verdict.thresholds import (
    STATISTICS_DEFAULTS,
    ThresholdsError,
    load_thresholds,
)

DAY = datetime.datetime(2026, 11, 1, 6, 0, tzinfo=datetime.UTC)
DEBIAN = {"source": "debian", "package": "linux-image-6.1.0-50-rt-armmp",
          "version": "6.1.176-1", "release": "6.1.0-50-rt-armmp"}
BUILT_B = {"source": "build", "kernel_sha256": "b" * 64, "kernel_flavour": "preempt-rt"}
BUILT_C = {"source": "build", "kernel_sha256": "c0ffee" + "1" * 58,
           "kernel_flavour": "preempt-rt"}
LIMIT = 150
RANGE = 400
CPUS = 4


def _cpu(cpu: int, buckets: dict[int, int], *, overflows: int = 0, range_us: int = RANGE,
         max_us: int | None = None, histogram: bool = True) -> dict:
    """A CPU with wake-ups at the given µs (``buckets``); ``overflows`` past the range."""
    samples = sum(buckets.values()) + overflows
    top = max_us if max_us is not None else max(buckets)
    figures = {"cpu": cpu, "thread": cpu, "samples": samples, "min_us": min(buckets),
               "avg_us": round(sum(b * c for b, c in buckets.items()) / samples, 2),
               "max_us": top, "overflows": overflows}
    if histogram:
        figures.update(histogram_range_us=range_us,
                       histogram={str(b): c for b, c in buckets.items() if b < range_us})
    return figures


def _quiet(samples_per_cpu: int, **extra: dict[int, int]) -> list[dict]:
    """Four CPUs well under the limit; ``extra`` adds wake-ups to CPU ``cpuN``."""
    cpus = []
    for cpu in range(CPUS):
        buckets = {12: samples_per_cpu - 100, 40: 100}
        for bucket, count in extra.get(f"cpu{cpu}", {}).items():
            buckets[bucket] = buckets.get(bucket, 0) + count
            buckets[12] -= count
        cpus.append(_cpu(cpu, buckets))
    return cpus


def _record(folder: Path, *, pipeline: str, kernel: dict | None, verdict: str = "pass",
            board: str = "imx6q", scenario: str = "cpu100", interval: int = 100,
            duration_s: int = 600, cpus: list[dict] | None = None, limit: float = LIMIT,
            tier: str = "gate", started: datetime.datetime | None = None,
            statistics: dict | None = None, message: str = "") -> dict:
    started = started or DAY + datetime.timedelta(hours=int(pipeline) % 1000)
    name = f"{board}/rt/{scenario}/{interval}us"
    record = {
        "schema": SCHEMA, "kind": "cyclictest",
        "case": f"tests/target/test_latency.py::test_latency[{scenario}-{interval}us]",
        "name": name, "run_id": f"run-{pipeline}-{board}", "board": board, "flavour": "rt",
        "place": f"{board}-01", "scenario": scenario, "interval_us": interval,
        "duration_s": duration_s, "tier": tier, "verdict": verdict, "message": message,
        "started": started.isoformat(),
        "finished": (started + datetime.timedelta(seconds=duration_s + 10)).isoformat(),
        "system": {"kernel_release": "6.1.0-50-rt-armmp", "realtime": True},
        "thresholds": {"max_us": {"value": limit, "source": "thresholds.yaml:99"}},
        "ci": {"CI_PIPELINE_ID": pipeline, "CI_JOB_ID": f"{pipeline}1",
               "CI_COMMIT_SHA": f"{int(pipeline):08x}" + "ab" * 16,
               "CI_COMMIT_REF_NAME": "main"},
    }
    if kernel is not None:
        record["image"] = {"image_id": f"img{pipeline}", "kernel": kernel,
                           "sd_image_sha256": "e" * 64}
    if cpus is not None:
        record["cpus"] = cpus
    if statistics is not None:
        record["statistics"] = statistics
    (folder / record_file_name(record)).write_text(json.dumps(record), encoding="utf-8")
    return record


def _wakeups(cpus: list[dict]) -> int:
    return sum(cpu["samples"] for cpu in cpus)


pytest_plugins = ["tests.pg"]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def history(request, tmp_path_factory):
    """Kernel A (Debian's) in two pipelines, a full tier and a gate, and an error; kernel B
    (built) once; kernel C (built) twice, once with two wake-ups past max_us, and once
    on idle with its limit past the histogram's range; kernel A on another board type;
    a record without a kernel."""
    folder = tmp_path_factory.mktemp("exposure") / "records"
    folder.mkdir()
    made = {
        "a1": _record(folder, pipeline="101", kernel=DEBIAN, duration_s=600,
                      cpus=_quiet(60_000), tier="full"),
        "a2": _record(folder, pipeline="102", kernel=DEBIAN, duration_s=1200,
                      cpus=_quiet(120_000), tier="gate"),
        "a_error": _record(folder, pipeline="103", kernel=DEBIAN, verdict="error",
                           message="serial lost during the test", cpus=_quiet(
                               5_000, cpu0={9999: 3})),
        "b": _record(folder, pipeline="104", kernel=BUILT_B, duration_s=3600,
                     cpus=_quiet(360_000)),
        "c1": _record(folder, pipeline="105", kernel=BUILT_C, duration_s=900,
                      cpus=_quiet(90_000)),
        "c2": _record(folder, pipeline="106", kernel=BUILT_C, verdict="fail", duration_s=900,
                      cpus=_quiet(90_000, cpu2={163: 1, 187: 1}),
                      message="CPU2 max 187 µs > max_us 150 µs"),
        # limit 500 µs past the 400 µs histogram: only the maximum says one exceeded
        "c_idle": _record(folder, pipeline="107", kernel=BUILT_C, scenario="idle",
                          interval=1000, duration_s=300, limit=500, verdict="fail",
                          cpus=[_cpu(0, {10: 29_990}, overflows=10, max_us=612),
                                *(_cpu(c, {10: 30_000}) for c in range(1, CPUS))]),
        "a_other_board": _record(folder, pipeline="108", kernel=DEBIAN, board="qemu-imx6q",
                                 duration_s=60, cpus=_quiet(6_000)),
        "unknown": _record(folder, pipeline="109", kernel=None, duration_s=1800,
                           cpus=_quiet(180_000)),
        "unknown_build": _record(folder, pipeline="110", kernel={"source": "build"},
                                 scenario="idle", interval=1000, duration_s=60,
                                 cpus=_quiet(6_000)),
    }
    if request.param == "sqlite":
        url = f"sqlite:///{folder.parent / 'results.db'}"
    else:
        url = request.getfixturevalue("postgres_server").new_database()
    store = open_store(url)
    ingest_folder(store, folder)
    yield store, made
    store.close()


@pytest.fixture(scope="module")
def pooled(history):
    store, _ = history
    with store.session() as session:
        return kernel_exposure(session, thresholds=load_thresholds())


def _row(exposure, kernel: KernelId, board: str = "imx6q", scenario: str = "cpu100",
         interval: int = 100):
    found = [row for row in exposure.rows
             if (row.kernel, row.board, row.scenario, row.interval_us)
             == (kernel, board, scenario, interval)]
    assert len(found) == 1, [(r.kernel.short, r.board, r.scenario) for r in exposure.rows]
    return found[0]


A = KernelId("debian", "linux-image-6.1.0-50-rt-armmp=6.1.176-1")
B = KernelId("build", "b" * 64)
C = KernelId("build", "c0ffee" + "1" * 58)


def test_two_pipelines_of_one_kernel_are_pooled_into_one_row(pooled, history):
    _, made = history
    row = _row(pooled, A)
    assert (row.cases, row.runs, row.pipelines) == (2, 2, 2)
    assert row.board_seconds == 600 + 1200
    assert row.board_hours == pytest.approx(0.5)
    assert row.wakeups == _wakeups(made["a1"]["cpus"]) + _wakeups(made["a2"]["cpus"])
    assert row.wakeups == CPUS * (60_000 + 120_000)
    assert (row.exceedances, row.lower_bound, row.failed, row.status) == (0, False, False,
                                                                          "pass")
    assert row.limits_us == (150.0,)
    # the bound: the exact Poisson upper limit for no event, at the default 95 %
    assert row.confidence == DEFAULT_CONFIDENCE == 0.95
    upper = stats.chi2.ppf(0.95, 2) / 2
    assert upper == pytest.approx(2.995732, rel=1e-6)
    assert row.per_hour_bound == pytest.approx(upper / 0.5, rel=1e-12)
    assert row.per_wakeup_bound == pytest.approx(upper / (CPUS * 180_000), rel=1e-12)


def test_the_kernel_is_named_short(pooled):
    assert _row(pooled, B).kernel.short == "sha256:bbbbbbbbbbbb"
    assert _row(pooled, C).kernel.short == "sha256:c0ffee111111"
    assert _row(pooled, A).kernel.short == "linux-image-6.1.0-50-rt-armmp=6.1.176-1"


def test_another_kernel_or_board_type_is_a_row_of_its_own(pooled):
    b = _row(pooled, B)
    assert (b.cases, b.board_seconds, b.wakeups) == (1, 3600, CPUS * 360_000)
    assert b.per_hour_bound == pytest.approx(stats.chi2.ppf(0.95, 2) / 2)
    other = _row(pooled, A, board="qemu-imx6q")
    assert (other.cases, other.board_seconds) == (1, 60)
    keys = [(row.kernel, row.board, row.scenario, row.interval_us) for row in pooled.rows]
    assert len(keys) == len(set(keys)) == 5


def test_one_exceedance_in_one_run_fails_the_kernels_series(pooled):
    row = _row(pooled, C)
    assert (row.cases, row.runs, row.pipelines) == (2, 2, 2)
    # 163 and 187 µs, counted from the histogram: exact
    assert (row.exceedances, row.lower_bound) == (2, False)
    assert row.failed and row.status == "FAIL"
    assert row.per_hour_bound == pytest.approx(stats.chi2.ppf(0.95, 6) / 2 / 0.5)
    assert row.per_wakeup_bound == pytest.approx(stats.chi2.ppf(0.95, 6) / 2 / (CPUS * 180_000))
    assert pooled.failing == tuple(r for r in pooled.rows if r.kernel == C)


def test_a_limit_past_the_histograms_range_gives_a_lower_bound(pooled):
    row = _row(pooled, C, scenario="idle", interval=1000)
    assert (row.exceedances, row.lower_bound, row.status) == (1, True, "FAIL")
    assert row.limits_us == (500.0,)


def test_records_without_a_kernel_are_counted_and_named(pooled, history):
    _, made = history
    assert pooled.unidentified_count == 2
    assert pooled.unidentified_seconds == 1800 + 60
    named = {(case.name, case.run_key) for case in pooled.unidentified}
    assert named == {(made["unknown"]["name"], made["unknown"]["run_id"]),
                     (made["unknown_build"]["name"], made["unknown_build"]["run_id"])}
    # never pooled into a kernel's row
    assert sum(row.cases for row in pooled.rows) == 7


def test_errors_are_left_out_and_counted(pooled):
    assert pooled.errors == 1 and pooled.skipped == 0
    row = _row(pooled, A)
    assert row.errors == 1
    # its bogus wake-ups past the limit count nowhere
    assert row.exceedances == 0 and row.wakeups == CPUS * 180_000


@pytest.mark.parametrize("buckets, overflows, max_us, limit, expected", [
    # exact from the histogram: buckets from floor(limit) + 1 on, and the overflows
    ({10: 100, 150: 2, 151: 3, 399: 1}, 4, 612, 150, (8, True)),
    ({10: 100, 150: 2, 151: 3}, 0, 151, 150.5, (3, True)),
    # the limit one below the range: the overflows are exactly the wake-ups above it
    ({10: 100, 398: 5, 399: 7}, 2, 450, 399, (2, True)),
    # the limit at or past the range: only the maximum says, at least one
    ({10: 100, 399: 7}, 9, 612, 400, (1, False)),
    ({10: 100, 399: 7}, 9, 420, 500, (0, True)),
    ({10: 100}, 0, 40, 150, (0, True)),
])
def test_exceedances_of_one_cpu(buckets, overflows, max_us, limit, expected):
    counts = np.zeros(RANGE, dtype=np.int64)
    for bucket, count in buckets.items():
        counts[bucket] = count
    assert exceedances(counts, overflows, max_us, limit) == expected


def test_exceedances_without_a_histogram_are_a_lower_bound():
    assert exceedances(None, None, 180, 150) == (1, False)
    assert exceedances(None, None, 150, 150) == (0, True)
    assert exceedances(None, None, None, 150) == (0, False)


def test_poisson_upper_is_scipys_chi2_figure():
    for events in (0, 1, 5, 40):
        for confidence in (0.9, 0.95, 0.99):
            assert poisson_upper(events, confidence) == pytest.approx(
                stats.chi2.ppf(confidence, 2 * events + 2) / 2, rel=1e-12)
    assert poisson_upper(0, 0.95) == pytest.approx(-np.log(0.05))
    with pytest.raises(ValueError, match="confidence"):
        poisson_upper(1, 1.0)


def test_kernel_identity_from_the_image():
    assert kernel_id(DEBIAN) == A
    # a record from before image.kernel.source: Debian's
    assert kernel_id({"package": "linux-image-x", "version": "1"}) == KernelId(
        "debian", "linux-image-x=1")
    assert kernel_id(BUILT_B) == B
    assert kernel_id({"source": "build", "package": "linux-image-x", "version": "1"}) is None
    assert kernel_id({"source": "debian", "package": "linux-image-x"}) is None
    assert kernel_id(None) is None


THRESHOLDS = """\
defaults:
  statistics:
    exposure_confidence: 0.99
boards:
  imx6q:
    flavours:
      rt:
        max_us: 150
        scenarios:
          idle:
            statistics: {exposure_confidence: 0.9}
"""


def test_the_confidence_is_thresholds_yaml_s_for_the_series(history, tmp_path):
    store, _ = history
    path = tmp_path / "thresholds.yaml"
    path.write_text(THRESHOLDS, encoding="utf-8")
    thresholds = load_thresholds(path)
    assert thresholds.statistics("imx6q", "rt", "cpu100", 100).exposure_confidence == 0.99
    with store.session() as session:
        exposure = kernel_exposure(session, thresholds=thresholds)
    row = _row(exposure, A)
    assert (row.confidence, row.confidence_source) == (0.99, f"{path}:3")
    assert row.per_hour_bound == pytest.approx(stats.chi2.ppf(0.99, 2) / 2 / 0.5)
    failing = _row(exposure, C, scenario="idle", interval=1000)
    assert (failing.confidence, failing.confidence_source) == (0.9, f"{path}:11")
    # the file knows no qemu-imx6q: the records say nothing either, so the default
    other = _row(exposure, A, board="qemu-imx6q")
    assert (other.confidence, other.confidence_source) == (0.95, "default")


def test_without_a_file_the_default_confidence(history):
    store, _ = history
    with store.session() as session:
        exposure = kernel_exposure(session)
    row = _row(exposure, A)
    assert (row.confidence, row.confidence_source) == (0.95, "default")
    assert row.per_hour_bound == pytest.approx(stats.chi2.ppf(0.95, 2) / 2 / 0.5)


def test_a_selection_of_boards_pools_only_those(history):
    store, _ = history
    with store.session() as session:
        exposure = kernel_exposure(session, boards=["qemu-imx6q"])
    assert [(row.kernel, row.board, row.cases) for row in exposure.rows] == [
        (A, "qemu-imx6q", 1)]
    assert (exposure.errors, exposure.unidentified_count) == (0, 0)


def test_exposure_confidence_is_a_statistics_key_checked_like_the_others(tmp_path):
    assert STATISTICS_DEFAULTS["exposure_confidence"] == 0.95
    path = tmp_path / "thresholds.yaml"
    path.write_text("defaults:\n  statistics:\n    exposure_confidence: 1\nboards:\n"
                    "  imx6q:\n    flavours:\n      rt: {max_us: 1}\n", encoding="utf-8")
    with pytest.raises(ThresholdsError, match=r"thresholds.yaml:3: defaults.statistics."
                       r"exposure_confidence must be a probability between 0 and 1"):
        load_thresholds(path)
    # the repository's file sets none: the default, from no line
    policy = load_thresholds().statistics("imx6q", "rt", "cpu100", 100)
    assert policy.exposure_confidence == 0.95
    assert "exposure_confidence" not in policy.sources


def test_the_report_shows_the_section(history, tmp_path):
    store, made = history
    written = write_report(store, tmp_path / "out", Selection())
    exposure = written.data.exposure
    assert exposure is not None and len(exposure.rows) == 5
    page = written.html.read_text(encoding="utf-8")
    section = page.split("<h2>Exposure per kernel</h2>", 1)[1].split("<h2>", 1)[0]
    table = section.split('<table id="exposure-table">', 1)[1].split("</table>", 1)[0]
    rows = {line.split("<code>", 1)[1].split("</code>", 1)[0]: line
            for line in table.splitlines() if line.startswith("<tr><td>")}
    assert set(rows) == {"linux-image-6.1.0-50-rt-armmp=6.1.176-1", "sha256:bbbbbbbbbbbb",
                         "sha256:c0ffee111111"}
    debian = [line for line in table.splitlines()
              if "6.1.176-1" in line and "qemu-imx6q" not in line][0]
    assert '<td class="num">2 (2, 2)</td>' in debian
    assert '<td class="num">0.5</td>' in debian
    assert f'<td class="num">{CPUS * 180_000:,}</td>' in debian
    assert f"≤ {stats.chi2.ppf(0.95, 2) / 2 / 0.5:.3g}" in debian
    assert "rules out a rate above 5.99 per board-hour" in debian
    failing = [line for line in table.splitlines() if "cpu100/100us" in line
               and "sha256:c0ffee111111" in line][0]
    assert '<span class="status v-fail">FAIL</span>' in failing
    assert '<td class="num">2</td>' in failing
    lower = [line for line in table.splitlines() if "idle/1000us" in line
             and "sha256:c0ffee111111" in line][0]
    assert '<td class="num">≥ 1</td>' in lower
    left_out = section.split('<p id="exposure-left-out">', 1)[1].split("</p>", 1)[0]
    assert "1 error case(s)" in left_out
    assert "2 measured case(s) whose record names no kernel (0.5 board-hours)" in left_out
    unidentified = section.split('<ul id="exposure-unidentified">', 1)[1]
    assert f"<code>{made['unknown']['name']}</code>" in unidentified
    assert made["unknown"]["run_id"] in unidentified

    summary = written.summary.read_text(encoding="utf-8")
    part = summary.split("#### Exposure per kernel", 1)[1]
    assert "5 kernel × board × load, 2 failing" in part.splitlines()[0]
    lines = [line for line in part.splitlines() if line.startswith("| `")]
    # failing rows first
    assert lines[0].startswith("| `sha256:c0ffee111111` |") and "**FAIL**" in lines[0]
    assert "2 measured case(s) whose record names no kernel" in part


@pytest.mark.parametrize("boards", [None, ("imx6q",)])
def test_the_exposure_reads_its_index_alone_and_sorts_nothing(tmp_path, boards):
    """The plan SQLite makes for the exposure's grouping, on an empty store and on one of
    real records: the covering index, a board as one range of it, no sort for the
    groups (a report at 100 000 runs spends 0.2 s here, not 0.6 s:
    docs/measured.md)."""
    from rtlab.store.exposure import exposure_groups

    store = open_store(f"sqlite:///{tmp_path / 'results.db'}")
    try:
        for _ in range(2):
            statement = exposure_groups(boards).compile(
                store.engine, compile_kwargs={"literal_binds": True})
            with store.engine.connect() as connection:
                plan = [row[3] for row in connection.exec_driver_sql(
                    f"EXPLAIN QUERY PLAN {statement}")]
            assert any("COVERING INDEX ix_cases_exposure" in step for step in plan), plan
            assert not any("FOR GROUP BY" in step for step in plan), plan
            assert any("(board=?)" in step for step in plan) == bool(boards), plan
            ingest_folder(store, Path(__file__).parents[1] / "data" / "records" /
                          "vlab-imx6q-rt")
    finally:
        store.close()
