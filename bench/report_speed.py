"""How long ``rtlab report`` takes over a results store of 10 000 runs, change points
included.

Builds a synthetic SQLite store in a temporary folder (bulk inserts into the store's own
tables: 10 000 runs of 1-4 cases on two physical boards × two kernel flavours, four CPUs
each, an hour of cyclictest per case, histograms drawn from realistic tails; about 1 % of
cases fail and 2 % are errors; every tenth run is a merge request's), then writes the
report and prints the wall time of each step: ``query`` the store's reading (the figures
are drawn on worker processes meanwhile), ``figures`` what is left of them after it,
``write`` the files. The figure is the report's own work: imports (matplotlib, scipy)
are timed apart, since a long-lived process pays them once.

    .venv/bin/python bench/report_speed.py [--runs 10000] [--seed 1] [--keep DIR]
    .venv/bin/python bench/report_speed.py --postgresql [--copy-from DIR/results.db]

``--postgresql`` puts the store in a private PostgreSQL server (Debian's binaries, as
the store's tests run one: tests/pg.py), built there, or copied row by row from a store
kept earlier (``--keep``) so that both databases hold the same runs.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import os
import shutil
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

BOARDS = {("imx6q", "rt"): 12, ("imx6q", "std"): 25, ("rpi3", "rt"): 9, ("rpi3", "std"): 20}
# cyclictest series of every board and flavour, and one rt-test (no histogram)
CYCLICTEST = [("idle", 1000), ("idle", 100), ("cpu100", 1000), ("cpu100", 100),
              ("hackbench", 1000), ("hackbench", 100)]
RT_TEST = "ptsematest"
RANGE_US = 400
CPUS = 4
TEMPLATES = 24
SAMPLES = {100: 36_000_000, 1000: 3_600_000}


def _templates(rng: np.random.Generator, loc: int) -> list[dict]:
    """Histograms to draw cases from: a gamma body at ``loc`` µs and a heavier tail, as
    packed counts (the store's format) with their figures."""
    out = []
    buckets = np.arange(RANGE_US)
    for index in range(TEMPLATES):
        scale = 3.0 + 2.0 * rng.random()
        body = np.where(buckets >= loc, ((buckets - loc + 1) / scale) * np.exp(
            -(buckets - loc) / scale), 0.0)
        # a rare slow path: a few dozen wake-ups of an hour's million reach 60-100 µs
        tail = np.where(buckets >= loc, np.exp(-(buckets - loc) / (scale * 3)), 0.0) * 2e-7
        probabilities = (body / body.sum()) + tail
        probabilities /= probabilities.sum()
        interval = 100 if index % 2 else 1000
        counts = rng.multinomial(SAMPLES[interval], probabilities)
        nonzero = np.nonzero(counts)[0]
        cumulative = np.cumsum(counts)
        total = int(cumulative[-1])

        def percentile(q: float, cumulative: np.ndarray = cumulative, total: int = total
                       ) -> float:
            return float(np.searchsorted(cumulative, int(np.ceil(q * total))))

        out.append({
            "interval": interval, "samples": total, "min_us": float(nonzero[0]),
            "max_us": float(nonzero[-1]), "avg_us": float((counts * buckets).sum() / total),
            "p50_us": percentile(0.5), "p99_us": percentile(0.99),
            "p99_9_us": percentile(0.999), "p99_99_us": percentile(0.9999),
            "blob": zlib.compress(counts.astype("<u8").tobytes(), 6),
            "counts": counts,
        })
    return out


def build_store(url: str, runs: int, seed: int) -> dict[str, int]:
    """``runs`` runs in the store at ``url``, inserted in bulk."""
    from sqlalchemy import insert

    from rtlab.store import open_store
    from rtlab.store.ingest import kernel_fields, worst_figures
    from rtlab.store.models import Case, CaseThreshold, CpuResult, Run
    from rtlab.verdict.histogram import Histogram
    from rtlab.verdict.tailsummary import TailSummary
    from rtlab.verdict.thresholds import load_thresholds

    rng = np.random.default_rng(seed)
    thresholds = load_thresholds()
    templates = {key: _templates(rng, loc) for key, loc in BOARDS.items()}
    limits = {(board, flavour, scenario, interval): thresholds.lookup(
        board, flavour, scenario, interval)["max_us"]
        for board, flavour in BOARDS for scenario, interval in
        [*CYCLICTEST, (RT_TEST, None)]}
    store = open_store(url)
    start = datetime.datetime(2025, 11, 1, tzinfo=datetime.UTC)
    now = datetime.datetime.now(datetime.UTC)
    run_rows, case_rows, cpu_rows, limit_rows = [], [], [], []
    summaries: dict[tuple, TailSummary] = {}
    case_id = 0
    for run_id in range(1, runs + 1):
        board, flavour = list(BOARDS)[run_id % len(BOARDS)]
        started = start + datetime.timedelta(minutes=50 * run_id)
        merge_request = run_id % 10 == 0
        run_rows.append({
            "id": run_id, "run_key": f"bench-{run_id}", "place": f"{board}-01",
            "board": board, "flavour": flavour, "kernel_release": f"6.12.{run_id % 40}-{flavour}",
            "realtime": flavour == "rt", "pipeline_id": str(100_000 + run_id),
            "job_id": str(900_000 + run_id),
            "commit_sha": hashlib.sha1(str(run_id).encode()).hexdigest(),
            "ref_name": f"mr-{run_id}" if merge_request else "main",
            "merge_request_iid": str(run_id) if merge_request else None,
            "started": started, "finished": started + datetime.timedelta(hours=2),
            "ingested_at": now})
        series = [*CYCLICTEST, (RT_TEST, None)]
        chosen = rng.choice(len(series), size=int(rng.integers(1, 5)), replace=False)
        for slot, index in enumerate(sorted(chosen)):
            scenario, interval = series[index]
            case_id += 1
            when = started + datetime.timedelta(minutes=5 * slot)
            limit = limits[(board, flavour, scenario, interval)]
            kernel = {"source": "debian", "package": f"linux-image-{flavour}",
                      "version": f"6.12.{run_id % 40}-1"}
            roll = rng.random()
            verdict = "error" if roll < 0.02 else "pass"
            spike = None
            if verdict == "pass" and roll > 0.99:
                verdict, spike = "fail", float(limit.value + rng.integers(1, 60))
            name = (f"{board}/{flavour}/{scenario}/{interval}us" if interval
                    else f"{board}/{flavour}/{scenario}")
            message = ("serial lost during the test: read failed" if verdict == "error"
                       else f"CPU1 max {spike:g} µs > max_us {limit.value:g} µs "
                            f"({limit.source})" if spike else "")
            case_rows.append({
                "id": case_id, "run_id": run_id, "name": name, "node_id": name,
                "board": board, "flavour": flavour, "scenario": scenario,
                "interval_us": interval, "kind": "cyclictest" if interval else "rt-test",
                "verdict": verdict, "message": message, "started": when,
                "finished": when + datetime.timedelta(hours=1), "duration_s": 3600,
                "record": {"synthetic": True, "image": {"kernel": kernel}},
                "tail_samples": None, "tail_first": None, "tail_counts": None,
                **worst_figures([]), **kernel_fields({"image": {"kernel": kernel}}),
                "limit_max_us": limit.value, "cpus_over_limit": 0,
                # the run's, as ingest repeats them on the case
                "pipeline_id": str(100_000 + run_id), "judged_as": None})
            limit_rows.append({"case_id": case_id, "metric": "max_us",
                               "value": limit.value, "source": limit.source})
            if verdict == "error":
                continue
            pool = [t for t in templates[(board, flavour)]
                    if t["interval"] == (interval or 1000)]
            drawn = [pool[int(rng.integers(len(pool)))] for _ in range(CPUS)]
            if interval is not None:
                # the tail summary ingest keeps (rtlab.verdict.tailsummary)
                key = tuple(id(t) for t in drawn) + (spike,)
                if key not in summaries:
                    summaries[key] = TailSummary.of(
                        Histogram(t["counts"], 0, spike if spike and cpu == 1
                                  else t["max_us"]) for cpu, t in enumerate(drawn))
                summary = summaries[key]
                case_rows[-1].update(tail_samples=summary.samples,
                                     tail_first=summary.first,
                                     tail_counts=summary.to_bytes())
            # the figures ingest keeps (rtlab.store.ingest.worst_figures)
            case_rows[-1].update(
                worst_max_us=max([t["max_us"] for t in drawn] + ([spike] if spike else [])),
                worst_avg_us=max(t["avg_us"] for t in drawn),
                worst_p99_9_us=(max(t["p99_9_us"] for t in drawn) if interval is not None
                                else None),
                range_us=RANGE_US if interval is not None else None,
                wakeups=sum(t["samples"] for t in drawn),
                cpus_over_limit=sum(1 for cpu, t in enumerate(drawn)
                                    if (spike if spike and cpu == 1 else t["max_us"])
                                    > limit.value))
            for cpu, template in enumerate(drawn):
                measured = interval is not None
                cpu_rows.append({
                    "case_id": case_id, "position": cpu, "cpu": cpu, "thread": cpu,
                    "samples": template["samples"], "min_us": template["min_us"],
                    "avg_us": template["avg_us"],
                    "max_us": spike if spike and cpu == 1 else template["max_us"],
                    "overflows": 0 if measured else None, "no_wakeup": False,
                    "gated": None if measured else True,
                    "p50_us": template["p50_us"] if measured else None,
                    "p99_us": template["p99_us"] if measured else None,
                    "p99_9_us": template["p99_9_us"] if measured else None,
                    "p99_99_us": template["p99_99_us"] if measured else None,
                    "histogram_range_us": RANGE_US if measured else None,
                    "histogram": template["blob"] if measured else None})
    with store.engine.begin() as connection:
        for table, rows in ((Run.__table__, run_rows), (Case.__table__, case_rows),
                            (CpuResult.__table__, cpu_rows),
                            (CaseThreshold.__table__, limit_rows)):
            for first in range(0, len(rows), 20_000):
                connection.execute(insert(table), rows[first:first + 20_000])
    store.close()
    return {"runs": len(run_rows), "cases": len(case_rows), "cpu rows": len(cpu_rows)}


def copy_store(source: str, target: str) -> dict[str, int]:
    """Every row of the store at ``source`` into the (new) store at ``target``, table by
    table in the order their foreign keys need, a page at a time."""
    from sqlalchemy import func, insert, select

    from rtlab.store import open_store
    from rtlab.store.models import Base

    source_store, target_store = open_store(source), open_store(target)
    copied = {}
    try:
        with source_store.engine.connect() as reading, target_store.engine.begin() as writing:
            for table in Base.metadata.sorted_tables:
                if table.name == "alembic_version":
                    continue
                copied[table.name] = 0
                last = None
                key = list(table.primary_key.columns)[0]
                while True:
                    page = select(table).order_by(key).limit(20_000)
                    if last is not None:
                        page = page.where(key > last)
                    rows = [dict(row._mapping) for row in reading.execute(page)]
                    if not rows:
                        break
                    writing.execute(insert(table), rows)
                    copied[table.name] += len(rows)
                    last = rows[-1][key.name]
                if table.name in ("runs", "cases", "cpu_results", "case_thresholds",
                                  "change_points") and copied[table.name]:
                    # the copied ids came with the rows: the sequence goes on after them
                    top = writing.execute(select(func.max(key))).scalar()
                    writing.exec_driver_sql(
                        f"SELECT setval(pg_get_serial_sequence('{table.name}', "
                        f"'{key.name}'), {int(top)})")
    finally:
        source_store.close()
        target_store.close()
    return copied


@contextlib.contextmanager
def private_postgresql() -> Iterator[str]:
    """A throw-away PostgreSQL server on loopback, as the store's tests run one; its
    database's URL."""
    import pwd

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.pg import PostgresServer, server_bin

    base = Path(tempfile.mkdtemp(prefix="rtlab-bench-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(base, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    server = PostgresServer(server_bin(), base, as_user)
    server.start()
    try:
        yield server.url()
    finally:
        server.stop()


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the report's workers): on
    a busy machine the wall time says more about the neighbours than about the report."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", help="build the store and reports in DIR and keep them")
    parser.add_argument("--postgresql", action="store_true",
                        help="the store in a private PostgreSQL server (tests/pg.py)")
    parser.add_argument("--copy-from", metavar="FILE",
                        help="--postgresql: copy this SQLite store (kept with --keep) "
                             "instead of building one")
    args = parser.parse_args()
    if args.copy_from and not args.postgresql:
        parser.error("--copy-from copies into --postgresql's server")

    began = time.perf_counter()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.figure  # noqa: F401 - timed here, not in the report
    import scipy.optimize  # noqa: F401
    import scipy.stats  # noqa: F401

    # the report's own modules, timed here and used by _measure
    import rtlab.report.build  # noqa: F401
    import rtlab.report.changes  # noqa: F401
    import rtlab.store  # noqa: F401
    imports = time.perf_counter() - began

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="rtlab-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    database = folder / "results.db"
    with contextlib.ExitStack() as stack:
        if args.postgresql:
            url = stack.enter_context(private_postgresql())
        else:
            database.unlink(missing_ok=True)
            url = f"sqlite:///{database}"
        _measure(args, url, folder, database, imports)


def _measure(args: argparse.Namespace, url: str, folder: Path, database: Path,
             imports: float) -> None:
    from rtlab.report.build import write_report
    from rtlab.report.changes import find
    from rtlab.report.pool import cores
    from rtlab.report.selection import Selection
    from rtlab.store import open_store

    try:
        began = time.perf_counter()
        if args.copy_from:
            copied = copy_store(f"sqlite:///{Path(args.copy_from).resolve()}", url)
            counts = {"runs": copied["runs"], "cases": copied["cases"],
                      "cpu rows": copied["cpu_results"]}
        else:
            counts = build_store(url, args.runs, args.seed)
        if args.postgresql:
            # a lab's server has its planner statistics (autovacuum); a bulk load not yet
            from sqlalchemy import create_engine

            engine = create_engine(url, isolation_level="AUTOCOMMIT")
            with engine.connect() as connection:
                connection.exec_driver_sql("VACUUM ANALYZE")
            engine.dispose()
        built = time.perf_counter() - began
        where = ("PostgreSQL" if args.postgresql
                 else f"SQLite, {database.stat().st_size / 1e6:.0f} MB")
        print(f"store: {counts['runs']} runs, {counts['cases']} cases, "
              f"{counts['cpu rows']} CPU rows ({where}); "
              f"{'copied' if args.copy_from else 'built'} in {built:.1f} s")
        print(f"imports (matplotlib, scipy, rtlab.report): {imports:.2f} s, paid once per "
              "process")
        store = open_store(url)
        try:
            for label, selection in (
                    ("all boards, default caps", Selection()),
                    ("all boards, default caps, no change points", Selection(changes=False)),
                    ("again (warm caches)", Selection()),
                    ("one board, a merge request's pipeline",
                     Selection(boards=("imx6q",), candidate_pipeline="110000")),
                    ("all boards, every series drawn", Selection(max_series=1000)),
                    ("all boards, with tail estimates", Selection(tail_estimates=True))):
                began, cpu = time.perf_counter(), _cpu_seconds()
                written = write_report(store, folder / "report", selection)
                total, cpu = time.perf_counter() - began, _cpu_seconds() - cpu
                steps = ", ".join(f"{step} {seconds:.2f} s"
                                  for step, seconds in written.timings.items())
                data = written.data
                compared = sum(row.comparison is not None and row.comparison.outcome is not None
                               for row in data.rows)
                print(f"{label}: {total:.2f} s wall ({steps}; {cpu:.2f} s CPU over "
                      f"{cores()} cores); {len(data.rows)} series, {compared} comparisons, "
                      f"{len(written.pngs)} figures, {len(data.left_out)} groups left out")
            began = time.perf_counter()
            with store.session() as session:
                changes = find(session, "main")
            print(f"change points alone (rtlab report --changes): "
                  f"{time.perf_counter() - began:.2f} s; {changes.series} series, "
                  f"{len(changes.found)} open")
        finally:
            store.close()
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
