"""One case measured on several boards at once, judged on the pooled result.

``rtlab run --board TYPE --boards N --spread replicate`` (the default of the gate and full
tiers)
starts one ``rtlab run`` per place as sharing does, but every place measures every case,
each for a share of the case's budget (``--duration`` / N): the case gets N boots and N
boards' wake-ups in the wall time of one share. The places write their *replica* records
(``replica_of``: the plan) into a folder of their own; afterwards :func:`pool_plan` judges
each case once, on every board that measured it (rtlab.verdict.case, the one judge):

- the limits on each board's wake-ups (a board past max_us, or a CPU that never woke on
  one board, fails the case: no other board can undo it);
- the comparison with the baseline on the pooled histogram, with the boot as a level of
  the comparison (rtlab.verdict.comparison.compare, ``candidate_boots``);
- a board that failed mid-case (an infrastructure error: its console, boot or kernel)
  leaves the case to be judged on the others, and the verdict says so; a case no board
  measured is an error, never a pass.

The pooled record names every board, its boot and what it measured (``boards``), how the
case was spread (``replicated``), and is the one record of the case the results store
files; the replicas stay beside it for who wants to see one board's figures.
"""

import datetime
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attr

from rtlab.artifacts.record import REPLICA_KEY, REPLICAS_FILE, read_record, write_record
from rtlab.measure.cyclictest import side_by_side
from rtlab.measure.suite import load_suite
from rtlab.run.queue import plan_replicas
from rtlab.store import open_store
from rtlab.store.query import boot_of, case_baseline
from rtlab.util.atomic import write_atomic
from rtlab.verdict.baseline import NEWEST_RUNS, no_baseline
from rtlab.verdict.case import pipeline_case_count, plan_case
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.judge import result_of_facts
from rtlab.verdict.junit import records_junit, write_junit
from rtlab.verdict.outcome import (
    PASS,
    BoardOutcome,
    CaseVerdict,
    board_outcome,
    case_verdict,
)
from rtlab.verdict.thresholds import load_thresholds

# what a replica measured of its own, not the case's (its boards' kernel and system facts
# are alike: one image on one board type, so the first board's stand for the case)
_PER_BOARD = ("cpus", "place", "run_id", "started", "finished", "infrastructure",
              "load_check", "adaptive", "duration_s", "trace", "baseline", "comparison",
              "case_confidence", "broke", REPLICA_KEY, "ci", "schema", "verdict", "message",
              "threads", "functional", "conditions", "judged", "error", "measured_again")


REPLICATED_TIERS = ("gate", "full")
"""The tiers whose cases are replicated over a type's boards: the same board time as one
board's whole case, and a verdict that tells a kernel from a boot (the full tier too: one
board's fixed hour found a tail × 1.5 in about half the cases where four boards' quarter
hours found it in 85 %, docs/measured.md)."""


def default_spread(tier: str | None, places: int) -> str:
    """A tier's cases are replicated over the ``places`` found of the type
    (REPLICATED_TIERS); a run of named cases and a lab with one board per type shard
    whole cases (one board alone keeps its adaptive early decisions)."""
    return "replicate" if tier in REPLICATED_TIERS and places > 1 else "shard"


def share_of(duration_s: int, boards: int) -> int:
    """Each board's share of a case's budget (whole seconds, at least one)."""
    return max(1, -(-duration_s // boards))


def mark_replicas(replicas_dir: Path, *, plan: str, pooled_into: Path) -> None:
    """Mark the folder of the plan's replicas, so that the results store leaves them out
    and files the pooled records (rtlab.store.ingest.replica_folders)."""
    replicas_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(replicas_dir / REPLICAS_FILE, json.dumps({
        "schema": "rtlab.replicas/1", "plan": plan,
        "pooled_into": os.path.relpath(pooled_into, replicas_dir)}, indent=1) + "\n")


@attr.frozen
class Judging:
    """What the pooled latency cases are judged by, as a single run would judge them."""

    cap_s: int
    thresholds: Path | None = None
    suite: Path | None = None
    baseline_url: str | None = None
    baseline_ref: str | None = None
    baseline_runs: int = NEWEST_RUNS
    pipeline_jobs: int = 1


@attr.frozen
class Replica:
    """One board's part of a case: its record (None: the board never wrote one)."""

    place: str
    state: str
    record: dict[str, Any] | None
    why_not: str | None = None
    """Why the board did not measure its share (it left the plan, or never began)."""

    @property
    def outcome(self) -> BoardOutcome:
        return board_outcome(self.place, self.record, self.why_not)


def pool_plan(*, plan: str, queue: str, replicas_dir: Path, out_dir: Path, board: str,
              boards_planned: int, judging: Judging) -> list[Path]:
    """The pooled record and JUnit case of every case of ``plan``; returns the records
    written (into ``out_dir``/results)."""
    store = open_store(queue)
    try:
        shares = plan_replicas(store, plan)
    finally:
        store.close()
    records = [read_record(path) for path in sorted((replicas_dir / "results").glob("*.json"))]
    mine = [r for r in records if (r.get(REPLICA_KEY) or {}).get("plan") == plan]
    if not shares.cases:
        return []
    thresholds = load_thresholds(judging.thresholds, load_suite(judging.suite))
    latency_cases = sum(1 for name in shares.cases if "/" in name)
    written: list[tuple[dict[str, Any], Path]] = []
    for name in shares.cases:
        replicas = []
        for place, state in shares.places(name):
            found = [r for r in mine if r.get("place") == place
                     and r.get("name", "").split("/", 2)[-1] == name]
            replicas.append(Replica(place, state, found[-1] if found else None,
                                    shares.why_not(place, state)))
        record = pool_case(name, replicas, board=board, boards_planned=boards_planned,
                           plan=plan, thresholds=thresholds, judging=judging,
                           cases=pipeline_case_count(latency_cases, judging.pipeline_jobs))
        written.append((record, write_record(out_dir / "results", record)))
    write_junit(out_dir / f"junit-pooled-{os.getpid()}.xml",
                records_junit(written, label="cases pooled over the boards"))
    return [path for _, path in written]


def pool_case(name: str, replicas: Sequence[Replica], *, board: str, boards_planned: int,
              plan: str, thresholds: Any, judging: Judging,  # noqa: ANN401 - Thresholds
              cases: int) -> dict[str, Any]:
    """The one record of case ``name`` from its boards' replicas, by the board-outcome
    table (rtlab.verdict.outcome) that every door shares."""
    outcomes = [r.outcome for r in replicas]
    counted = [o for o in outcomes if o.counts]
    base = counted[0].record if counted else next(
        (r.record for r in replicas if r.record is not None), None)
    facts = {k: v for k, v in (base or {}).items() if k not in _PER_BOARD}
    started = [r.record["started"] for r in replicas if r.record is not None]
    finished = [r.record.get("finished") or r.record["started"]
                for r in replicas if r.record is not None]
    now = datetime.datetime.now(datetime.UTC).isoformat()
    scenario, _, interval = name.partition("/")
    kind = (base or {}).get("kind") or ("cyclictest" if interval else "rt-test")
    record: dict[str, Any] = {
        "name": f"{board}/{(base or {}).get('flavour', 'unknown')}/{name}",
        "board": board, "scenario": scenario,
        "interval_us": int(interval[:-2]) if interval else None,
        **facts, "kind": kind, "case": f"plan {plan}: {name}",
        "place": None, "run_id": f"{plan}:pooled",
        "started": min(started, default=now), "finished": max(finished, default=now),
        "replicated": {"plan": plan, "boards_planned": boards_planned,
                       "boards_judged": len(counted),
                       "share_s": share_of(judging.cap_s, boards_planned),
                       "cap_s": judging.cap_s},
        "boards": [_board_facts(r, o) for r, o in zip(replicas, outcomes, strict=True)],
        "duration_s": 0,
    }
    pooled: CaseVerdict | None = None
    if counted and kind == "cyclictest":
        judged, pooled = _pooled_latency(counted, thresholds=thresholds, judging=judging,
                                         cases=cases)
        record.update(judged)
    elif counted:
        pooled = _pooled_tool(counted)
        record["duration_s"] = sum(float((o.record or {}).get("duration_s") or 0)
                                   for o in counted)
    verdict = case_verdict(outcomes, pooled=pooled, boards_planned=boards_planned)
    return {**record, "verdict": verdict.verdict, "message": verdict.message}


def _pooled_latency(counted: Sequence[BoardOutcome], *, thresholds: Any,  # noqa: ANN401
                    judging: Judging, cases: int) -> tuple[dict[str, Any], CaseVerdict]:
    """The judge on the boards' complete windows side by side: limits and tail per board
    and CPU as on one board, the comparison on the pooled histogram with the boot as its
    level."""
    first = counted[0].record
    assert first is not None
    plan = plan_case(thresholds, board=first["board"],
                     flavour=first.get("thresholds_flavour") or first["flavour"],
                     scenario=first["scenario"], interval_us=first["interval_us"],
                     cases=cases)
    command = [str(word) for word in first.get("command") or []]
    statistics = plan.statistics
    if judging.baseline_url:
        baseline = case_baseline(judging.baseline_url, board=first["board"],
                                 flavour=first["flavour"], scenario=plan.scenario,
                                 interval_us=plan.interval_us, command=command,
                                 cap_s=judging.cap_s, policy=statistics,
                                 ref=judging.baseline_ref or None, runs=judging.baseline_runs)
    else:
        baseline = no_baseline("no results store to take a baseline from (--baseline-db, "
                               "$RTLAB_RESULTS_DB)", length_s=judging.cap_s,
                               min_runs=statistics.baseline_runs,
                               min_boots=statistics.baseline_boots)
    results = []
    for outcome in counted:
        record = outcome.record
        assert record is not None
        results.append(result_of_facts(record.get("cpus") or [], source=outcome.place,
                                       cmdline=" ".join(command), started=record["started"],
                                       finished=record.get("finished")))
    board_time = float(sum(float((o.record or {}).get("duration_s") or 0) for o in counted))
    case = plan.measure(window_s=board_time, cap_s=board_time, baseline=baseline)
    case.boots = len(counted)
    case.boot_histograms = tuple(
        Histogram.merged(Histogram.from_cpu_result(cpu) for cpu in result.cpus)
        for result in results if result.cpus)
    case.add(side_by_side(results))
    outcome = case.outcome()
    facts = {**plan.facts(), **case.record_facts(), "duration_s": board_time}
    # each thread of the side-by-side run is one board's CPU: say whose
    places = [o.place for o, result in zip(counted, results, strict=True)
              for _ in range(len(result.cpus) + len(result.no_wakeup))]
    facts["cpus"] = [{**cpu, "place": places[cpu["thread"]]} if cpu["thread"] < len(places)
                     else cpu for cpu in facts["cpus"]]
    return facts, CaseVerdict(outcome.verdict, outcome.message)


def _pooled_tool(counted: Sequence[BoardOutcome]) -> CaseVerdict:
    """An rt-test on several boards: each board judged its own run (no pooled statistic)."""
    return CaseVerdict(PASS, "; ".join(f"{o.place}: {o.why}" for o in counted))


def _board_facts(replica: Replica, outcome: BoardOutcome) -> dict[str, Any]:
    record = replica.record
    if record is None:
        return {"place": replica.place, "judged": False, "outcome": outcome.row,
                "verdict": None, "message": replica.why_not or "no record"}
    cpus = [cpu for cpu in record.get("cpus") or [] if not cpu.get("no_wakeup")]
    return {"place": replica.place, "judged": outcome.counts, "outcome": outcome.row,
            "error": record.get("error"),
            "boot": boot_of(record, str(record.get("run_id") or replica.place)),
            "run_id": record.get("run_id"), "verdict": record["verdict"],
            "message": record["message"], "measured_s": record.get("duration_s"),
            "samples": sum(int(cpu.get("samples") or 0) for cpu in cpus),
            "max_us": max((cpu["max_us"] for cpu in cpus if cpu.get("max_us") is not None),
                          default=None),
            # what the board had beside what the case required (rtlab.measure.conditions)
            "conditions": record.get("conditions")}
