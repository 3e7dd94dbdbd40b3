"""A case measured on several boards at once, judged once on the pooled result
(rtlab.run.pooling): the record names every board and boot, a board that failed mid-case
leaves the case to the others and the verdict says so, a board past a limit fails it, a
case no board measured is an error, and the results store files the pooled record, never
the replicas."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from rtlab.artifacts.record import read_record, write_record
from rtlab.run.pooling import Judging, default_spread, mark_replicas, pool_plan, share_of
from rtlab.run.queue import CaseQueue, replica_name
from rtlab.store import ingest_paths, open_store
from rtlab.verdict.comparison import NO_CHANGE, REGRESSION, compare
from rtlab.verdict.histogram import Histogram

PLAN = "gitlab:7:99"
CASES = ["hackbench/1000us", "cpu100/1000us"]
COMMAND = ["chrt", "-f", "90", "cyclictest", "-S", "-m", "-p", "90", "-i", "1000", "-h",
           "400", "-q", "-D", "30s"]


def cpu_facts(cpu: int, latencies: np.ndarray) -> dict:
    buckets, counts = np.unique(latencies, return_counts=True)
    return {"cpu": cpu, "thread": cpu, "samples": int(latencies.size),
            "min_us": int(latencies.min()), "avg_us": float(latencies.mean()),
            "max_us": int(latencies.max()), "overflows": 0, "histogram_range_us": 400,
            "histogram": {str(b): int(c) for b, c in zip(buckets, counts, strict=True)}}


def replica(place: str, case: str, *, seed: int, verdict: str = "pass", message: str = "ok",
            spike_us: int | None = None, measured: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    scenario, _, interval = case.partition("/")
    cpus = []
    for cpu in range(4):
        latencies = np.clip(rng.gamma(4.0, 5.0, 15000).astype(int) + 8, 0, 399)
        if spike_us is not None and cpu == 2:
            latencies[100] = spike_us
        cpus.append(cpu_facts(cpu, latencies))
    return {"kind": "cyclictest", "case": f"tests/target/test_latency.py::{case}",
            "name": f"imx6q/rt/{case}", "board": "imx6q", "flavour": "rt",
            "thresholds_flavour": "rt", "scenario": scenario, "interval_us": int(interval[:-2]),
            "place": place, "run_id": f"gitlab:7:{place}", "duration_s": 15,
            "started": f"2026-11-26T10:0{seed % 10}:00+00:00",
            "finished": f"2026-11-26T10:1{seed % 10}:00+00:00",
            "verdict": verdict, "message": message, "command": COMMAND,
            "image": {"image_id": "img-1", "kernel": {"package": "linux-image-rt",
                                                      "version": "6.1-1", "release": "6.1"},
                      "sd_image_sha256": "0" * 64},
            "infrastructure": {"boots_in_session": 1},
            "replica_of": {"plan": PLAN, "share_s": 15},
            **({"cpus": cpus} if measured else {})}


@pytest.fixture
def lab(tmp_path):
    """A plan of two places on CASES, their replicas' folder and the pooled output."""
    queue = f"sqlite:///{tmp_path / 'plan.db'}"
    out = tmp_path / "out"
    replicas = out / "replicas"
    mark_replicas(replicas, plan=PLAN, pooled_into=out / "results")
    store = open_store(queue)
    places = {name: CaseQueue(store, PLAN, name) for name in ("imx6q-01", "imx6q-02")}
    for place, queue_of in places.items():
        queue_of.offer([replica_name(case, place) for case in CASES])
    yield queue, out, replicas, places
    store.close()


def measure(places, replicas: Path, record: dict) -> None:
    place = record["place"]
    row = replica_name(record["name"].split("/", 2)[2], place)
    assert places[place].claim(row)
    write_record(replicas / "results", record)
    places[place].finish(row, record["verdict"])


def pool(queue: str, out: Path, replicas: Path, **judging) -> list[dict]:
    paths = pool_plan(plan=PLAN, queue=queue, replicas_dir=replicas, out_dir=out,
                      board="imx6q", boards_planned=2, judging=Judging(cap_s=30, **judging))
    return [read_record(path) for path in paths]


def test_a_case_on_two_boards_is_judged_once_on_both_and_names_them(lab):
    queue, out, replicas, places = lab
    for seed, (place, case) in enumerate((p, c) for c in CASES for p in places):
        measure(places, replicas, replica(place, case, seed=seed))
    records = pool(queue, out, replicas)
    assert [r["name"] for r in records] == [f"imx6q/rt/{case}" for case in CASES]
    first = records[0]
    assert first["verdict"] == "pass", first["message"]
    assert first["message"].startswith("judged on 2 of 2 boards (imx6q-01, imx6q-02)")
    assert first["replicated"] == {"plan": PLAN, "boards_planned": 2, "boards_judged": 2,
                                   "share_s": 15, "cap_s": 30}
    assert [b["place"] for b in first["boards"]] == ["imx6q-01", "imx6q-02"]
    assert [b["boot"] for b in first["boards"]] == ["gitlab:7:imx6q-01/imx6q-01/1",
                                                    "gitlab:7:imx6q-02/imx6q-02/1"]
    # both boards' wake-ups, each board's CPUs its own threads, and both boards' time
    assert first["duration_s"] == 30
    assert [(cpu["place"], cpu["cpu"], cpu["samples"]) for cpu in first["cpus"]] == [
        (place, cpu, 15000) for place in ("imx6q-01", "imx6q-02") for cpu in range(4)]
    assert first["cpus"][5]["max_us"] == replica("imx6q-02", CASES[0], seed=1)["cpus"][1][
        "max_us"]
    assert "(8 CPUs of 2 boards" in first["message"]
    assert "replica_of" not in first and first["place"] is None
    # the pooled cases' JUnit, one case each
    [junit] = out.glob("junit-pooled-*.xml")
    cases = list(ET.parse(junit).iter("testcase"))
    assert [c.get("name") for c in cases] == [r["name"] for r in records]
    assert {p.get("value") for c in cases for p in c.iter("property")
            if p.get("name") == "boards"} == {"imx6q-01, imx6q-02"}


def test_a_board_that_failed_mid_case_leaves_it_to_the_other_and_it_says_so(lab):
    queue, out, replicas, places = lab
    measure(places, replicas, replica("imx6q-01", CASES[0], seed=1))
    measure(places, replicas, replica("imx6q-02", CASES[0], seed=2))
    measure(places, replicas, replica("imx6q-01", CASES[1], seed=3))
    panic = replica("imx6q-02", CASES[1], seed=4, verdict="error", measured=False,
                    message="kernel panic during the test: Kernel panic - not syncing")
    measure(places, replicas, panic)
    assert places["imx6q-02"].leave_after_error("imx6q-02: panic") is True
    first, second = pool(queue, out, replicas)
    assert first["message"].startswith("judged on 2 of 2 boards")
    assert second["verdict"] == "pass", second["message"]
    assert second["message"].startswith(
        "judged on 1 of 2 boards (imx6q-01); imx6q-02 ended in an error: kernel panic")
    assert second["replicated"]["boards_judged"] == 1
    assert [(b["place"], b["judged"]) for b in second["boards"]] == [("imx6q-01", True),
                                                                    ("imx6q-02", False)]
    assert second["duration_s"] == 15


def test_one_board_past_max_us_fails_the_pooled_case(lab):
    queue, out, replicas, places = lab
    measure(places, replicas, replica("imx6q-01", CASES[0], seed=1))
    measure(places, replicas, replica(
        "imx6q-02", CASES[0], seed=2, spike_us=390, verdict="fail",
        message="CPU2 max 390 µs > max_us 150 µs"))
    [record] = pool(queue, out, replicas)[:1]
    assert record["verdict"] == "fail"
    assert "max" in record["message"] and "150" in record["message"], record["message"]


def test_boards_with_different_cpu_counts_pool_each_judged_on_its_own_cpus(lab):
    """A replica of two CPUs beside one of four made combine() raise inside pool_plan:
    no pooled record for any case. Side by side, each board keeps its own CPUs, and a
    spike on one board's CPU is that board's, not a mixture of CPU k of every board."""
    queue, out, replicas, places = lab
    two = replica("imx6q-01", CASES[0], seed=1)
    two["cpus"] = two["cpus"][:2]
    measure(places, replicas, two)
    measure(places, replicas, replica("imx6q-02", CASES[0], seed=2))
    for seed, place in enumerate(places):
        measure(places, replicas, replica(place, CASES[1], seed=seed + 5))
    first, second = pool(queue, out, replicas)
    assert first["verdict"] == "pass", first["message"]
    assert [(c["place"], c["cpu"]) for c in first["cpus"]] == [
        ("imx6q-01", 0), ("imx6q-01", 1), *(("imx6q-02", cpu) for cpu in range(4))]
    assert "(6 CPUs of 2 boards" in first["message"]
    assert second["verdict"] == "pass"


def test_a_case_no_board_measured_is_an_error_naming_why(lab):
    queue, out, replicas, places = lab
    for seed, place in enumerate(places):
        measure(places, replicas, replica(place, CASES[0], seed=seed))
    # nobody took the second case: the first place was stopped by its runner
    assert places["imx6q-01"].claim(replica_name(CASES[1], "imx6q-01"))
    records = pool(queue, out, replicas)
    assert records[1]["verdict"] == "error"
    assert records[1]["message"] == (
        "not measured cleanly on any board: imx6q-01 did not measure it: its runner ended while "
        "measuring it; imx6q-02 did not measure it: it never reached the case")


def test_the_store_files_the_pooled_records_and_leaves_the_replicas(lab, tmp_path):
    queue, out, replicas, places = lab
    for seed, (place, case) in enumerate((p, c) for c in CASES for p in places):
        measure(places, replicas, replica(place, case, seed=seed))
    pool(queue, out, replicas)
    store = open_store(f"sqlite:///{tmp_path / 'results.db'}")
    try:
        report = ingest_paths(store, [out])
        assert report.added == len(CASES)
        with pytest.raises(ValueError, match="replicas.json.*ingest the folder above it"):
            ingest_paths(store, [replicas])
        one = next((replicas / "results").glob("*.json"))
        with pytest.raises(ValueError, match="one board's share of a case"):
            ingest_paths(store, [one])
    finally:
        store.close()
    assert json.loads((replicas / "replicas.json").read_text())["pooled_into"] == "../results"


def test_the_gate_tier_replicates_and_other_runs_shard():
    assert default_spread("gate", 2) == "replicate"
    assert default_spread("gate", 4) == "replicate"
    assert default_spread("gate", 1) == "shard"
    # the nightly full tier as strong as the gate: its cases replicated too (issue 44)
    assert default_spread("full", 4) == "replicate"
    assert default_spread("full", 1) == "shard"
    assert default_spread(None, 4) == "shard"
    assert share_of(3600, 4) == 900 and share_of(10, 3) == 4


def test_boots_pooled_in_the_candidate_narrow_the_comparison():
    """A candidate pooled from 4 boots carries the mean of 4 boot offsets: the same shift
    that one boot cannot tell from the spread between boots, four can."""
    rng = np.random.default_rng(3)

    def run(scale: float, n: int = 400_000) -> Histogram:
        latencies = np.clip((rng.gamma(3.0, 4.0, n) * scale).astype(int) + 10, 0, 399)
        return Histogram(np.bincount(latencies, minlength=400), 0, int(latencies.max()))

    # each baseline boot with its own tail scale (log-sd 0.1)
    baseline = [run(float(np.exp(rng.normal(0, 0.1)))) for _ in range(12)]
    candidate = Histogram.merged([run(1.3, 100_000) for _ in range(4)])
    one = compare(candidate, baseline, confidence=0.98, resamples=4000, seed=1)
    four = compare(candidate, baseline, confidence=0.98, resamples=4000, seed=1,
                   candidate_boots=4)
    assert four.ci_us[1] - four.ci_us[0] < one.ci_us[1] - one.ci_us[0]
    assert four.outcome == REGRESSION, four.message
    # an unchanged candidate stays within the margin either way
    same = Histogram.merged([run(1.0, 100_000) for _ in range(4)])
    assert compare(same, baseline, confidence=0.98, resamples=4000, seed=1,
                   candidate_boots=4, margin_relative=0.2).outcome == NO_CHANGE
    with pytest.raises(ValueError, match="candidate_boots"):
        compare(candidate, baseline, candidate_boots=0)
    with pytest.raises(ValueError, match="baseline_boots"):
        compare(candidate, baseline, baseline_boots=[1, 2])


def test_boards_that_disagree_keep_the_pooled_comparison_from_being_sure():
    """Part of a run's spread belongs to the hour, not the boot (a board's share of it may
    hold a burst): pooling does not divide it. Boards whose quantiles scatter far more
    than the baseline's runs do are a floor under the candidate's spread; boards that
    agree leave a real shift found."""
    rng = np.random.default_rng(5)

    def run(scale: float, n: int) -> Histogram:
        latencies = np.clip((rng.gamma(3.0, 4.0, n) * scale).astype(int) + 10, 0, 399)
        return Histogram(np.bincount(latencies, minlength=400), 0, int(latencies.max()))

    baseline = [run(float(np.exp(rng.normal(0, 0.02))), 400_000) for _ in range(12)]
    scattered = [run(float(np.exp(offset)), 100_000) for offset in (0.0, 0.5, -0.3, 0.4)]
    pooled = Histogram.merged(scattered)
    options = {"confidence": 0.98, "resamples": 4000, "seed": 1, "candidate_boots": 4}
    blind = compare(pooled, baseline, **options)
    assert blind.outcome == REGRESSION, blind.message
    floored = compare(pooled, baseline, candidate_runs=scattered, **options)
    assert floored.outcome != REGRESSION, floored.message
    assert floored.ci_us[0] < 0 < floored.ci_us[1]
    agreeing = [run(1.3, 100_000) for _ in range(4)]
    found = compare(Histogram.merged(agreeing), baseline, candidate_runs=agreeing, **options)
    assert found.outcome == REGRESSION, found.message
