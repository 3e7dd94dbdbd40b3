"""The results store on SQLite and on a real PostgreSQL server (tests/pg.py): real result
records in, figures in their columns, idempotent and transactional ingest, concurrent
ingests, migrations."""

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import func, inspect, select

import rtlab.store as store_package
from rtlab import cli
from rtlab.artifacts.record import read_record, record_of
from rtlab.store import (
    default_url,
    ingest,
    ingest_folder,
    ingest_paths,
    migrate,
    open_store,
    read_folder,
)
from rtlab.store.models import Base, Case, CaseThreshold, CpuResult, Run
from rtlab.store.query import history
from rtlab.util.jsonfile import JsonFileError
from rtlab.verdict.tailsummary import TailSummary

pytest_plugins = ["tests.pg"]

RECORDS = Path(__file__).parents[1] / "data" / "records" / "vlab-imx6q-rt"
RUN_KEY = "local:imx6q-01:8e3e67affecbe69a:2026-11-23"
CPU100 = "qemu-imx6q/rt/cpu100/1000us"
TABLES = (Run, Case, CpuResult, CaseThreshold)


@pytest.fixture
def store(results_db_url):
    opened = open_store(results_db_url)
    yield opened
    opened.close()


def counts(store) -> dict[str, int]:
    with store.session() as session:
        return {table.__tablename__: session.scalar(select(func.count()).select_from(table))
                for table in TABLES}


def copy_records(into: Path, names: list[str] | None = None, **changes) -> list[Path]:
    """The real records (or some of them) in another folder, optionally changed (another
    run's, say)."""
    into.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(RECORDS.glob("*.json")):
        if names is not None and not any(name in path.name for name in names):
            continue
        record = json.loads(path.read_text())
        record.update(changes)
        target = into / path.name
        target.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        written.append(target)
    return written


def test_real_records_land_in_their_columns(store, tmp_path):
    # one CPU with measured percentiles: the real records' all lie among the overflows
    folder = tmp_path / "records"
    copy_records(folder)
    cpu100 = folder / "qemu-imx6q_rt_cpu100_1000us--20261123142815277137.json"
    edited = json.loads(cpu100.read_text())
    edited["cpus"][1]["percentiles_us"] = {"p50": 212, "p99": 398.5, "p99_9": ">=400",
                                           "p99_99": ">=400"}
    cpu100.write_text(json.dumps(edited, indent=2, sort_keys=True))

    report = ingest_folder(store, folder)

    assert (report.added, report.already_stored, report.runs) == (4, 0, (RUN_KEY,))
    with store.session() as session:
        run = session.scalars(select(Run)).one()
        assert (run.board, run.flavour, run.place) == ("qemu-imx6q", "rt", "imx6q-01")
        assert (run.kernel_release, run.preemption, run.realtime) == (
            "6.1.0-50-rt-armmp", "PREEMPT_RT", True)
        assert run.image_id == "8e3e67affecbe69a"
        assert run.sd_image_sha256.startswith("8e3e67affecbe69ac84f")
        assert run.started.isoformat().startswith("2026-11-23T14:28:15.277137")
        cases = {case.name: case for case in session.scalars(select(Case))}
        assert sorted(cases) == ["qemu-imx6q/rt/cpu100/1000us", "qemu-imx6q/rt/idle/1000us",
                                 "qemu-imx6q/rt/pi_stress", "qemu-imx6q/rt/ptsematest"]
        case = cases[CPU100]
        assert (case.kind, case.scenario, case.interval_us, case.verdict, case.duration_s) == (
            "cyclictest", "cpu100", 1000, "pass", 3)
        # the record as read: a /2 record migrated to the current format, nothing lost
        assert case.record == {**edited, "schema": "rtlab.result/3", "kind": "cyclictest",
                               "migrated_from": "rtlab.result/2"}
        limits = {limit.metric: (limit.value, limit.source) for limit in case.limits}
        assert limits == {"max_us": (5000000, "thresholds.yaml:95"),
                          "avg_us": (50000, "thresholds.yaml:96")}
        for row, cpu in zip(case.cpus, edited["cpus"], strict=True):
            assert (row.cpu, row.thread, row.samples, row.min_us, row.avg_us, row.max_us,
                    row.overflows, row.no_wakeup, row.histogram_range_us) == (
                cpu["cpu"], cpu["thread"], cpu["samples"], cpu["min_us"], cpu["avg_us"],
                cpu["max_us"], cpu["overflows"], False, 400)
            dense = np.zeros(400, dtype=np.int64)
            for bucket, count in cpu["histogram"].items():
                dense[int(bucket)] = count
            assert np.array_equal(row.counts(), dense)
            assert row.counts().sum() + row.overflows == row.samples
        # ">=400": among the overflows, unknown; a measured percentile is a number
        assert [(r.p50_us, r.p99_us, r.p99_9_us, r.p99_99_us) for r in case.cpus] == [
            (None, None, None, None), (212.0, 398.5, None, None),
            (None, None, None, None), (None, None, None, None)]

        pts = cases["qemu-imx6q/rt/ptsematest"]
        assert (pts.kind, pts.scenario, pts.interval_us) == ("rt-test", "ptsematest", None)
        assert [(r.thread, r.max_us, r.gated, r.histogram) for r in pts.cpus] == [
            (0, 1621, True, None), (1, 748, True, None), (2, 659, True, None),
            (3, 639, True, None)]
        pi = cases["qemu-imx6q/rt/pi_stress"]
        assert (pi.kind, pi.cpus, pi.record["functional"]["inversions"]) == (
            "functional", [], 7580)

        rows = history(session, board="qemu-imx6q", scenario="cpu100", histograms=True)
        assert [row.name for row in rows] == [CPU100]
        assert rows[0].worst("max_us") == 23483
        assert rows[0].worst("p99_us") is None


def test_ingest_again_adds_nothing(store):
    first = ingest_folder(store, RECORDS)
    before = counts(store)
    again = ingest_folder(store, RECORDS)
    assert (first.added, first.already_stored) == (4, 0)
    assert (again.added, again.already_stored) == (0, 4)
    assert counts(store) == before == {"runs": 1, "cases": 4, "cpu_results": 12,
                                       "case_thresholds": 6}


def test_a_garbled_record_refuses_the_whole_folder(store, tmp_path):
    folder = tmp_path / "results"
    copy_records(folder)
    garbled = folder / "later" / "qemu-imx6q_rt_idle_100us--20261123150000000000.json"
    garbled.parent.mkdir()
    record = json.loads(next(RECORDS.glob("*idle*")).read_text())
    record["verdict"] = "passed"
    text = json.dumps(record, indent=2, sort_keys=True)
    garbled.write_text(text)
    line = text[:text.index('"verdict"')].count("\n") + 1

    with pytest.raises(JsonFileError) as refused:
        ingest_folder(store, folder)

    assert str(refused.value).startswith(f"{garbled}:{line}: result record 'verdict' "
                                         "'passed', expected one of")
    assert counts(store) == {"runs": 0, "cases": 0, "cpu_results": 0, "case_thresholds": 0}


def test_other_json_beside_the_records_is_passed_over(store, tmp_path):
    # a CI job's output: the run's reservation file lies beside its results
    job = tmp_path / "out" / "test" / "imx6q-rt"
    copy_records(job / "results")
    (job / "reservation.json").write_text(json.dumps({"schema": "rtlab.reservation/1",
                                                      "place": "imx6q-01"}))
    assert ingest_folder(store, tmp_path / "out").added == 4
    # a record of another version is a record still: refused, not passed over
    old = json.loads(next(RECORDS.glob("*idle*")).read_text())
    (job / "results" / "old.json").write_text(json.dumps({**old, "schema": "rtlab.result/0"}))
    with pytest.raises(JsonFileError, match="schema 'rtlab.result/0', expected"):
        ingest_folder(store, tmp_path / "out")


def test_a_failure_mid_ingest_leaves_nothing(store):
    # a record that fails late, after another run's rows went to the database, takes
    # them back with it
    records = read_folder(RECORDS)
    records.append(record_of({**records[0].document, "run_id": "run:imx6q-02:1",
                              "started": "not a time"}))
    with pytest.raises(ValueError), store.session() as session:
        ingest(session, records)
    assert counts(store) == {"runs": 0, "cases": 0, "cpu_results": 0, "case_thresholds": 0}


def test_a_folder_with_two_runs(store, tmp_path):
    folder = tmp_path / "artifacts"
    copy_records(folder / "imx6q-01")
    copy_records(folder / "imx6q-02", run_id="run:imx6q-02:5f0c", place="imx6q-02")

    report = ingest_folder(store, folder)

    assert (report.added, sorted(report.runs)) == (8, sorted([RUN_KEY, "run:imx6q-02:5f0c"]))
    with store.session() as session:
        places = dict(session.execute(select(Run.run_key, Run.place)).all())
        assert places == {RUN_KEY: "imx6q-01", "run:imx6q-02:5f0c": "imx6q-02"}
        per_run = dict(session.execute(select(Run.run_key, func.count(Case.id))
                                       .join(Case.run).group_by(Run.run_key)).all())
        assert per_run == {RUN_KEY: 4, "run:imx6q-02:5f0c": 4}


def test_one_run_ingested_in_two_parts(store, tmp_path):
    copy_records(tmp_path / "first", ["cpu100", "idle"])
    copy_records(tmp_path / "second", ["ptsematest", "pi_stress"])

    assert ingest_folder(store, tmp_path / "second").added == 2
    assert ingest_folder(store, tmp_path / "first").added == 2

    with store.session() as session:
        run = session.scalars(select(Run)).one()
        assert len(run.cases) == 4
        # the run spans all its cases, whichever part came first
        assert run.started.isoformat().startswith("2026-11-23T14:28:15.277137")
        assert run.finished.isoformat().startswith("2026-11-23T14:29:")
        last = max(read_record(p)["finished"] for p in RECORDS.glob("*.json"))
        assert run.finished.isoformat()[:26] == last[:26]


def test_an_ingest_that_loses_the_race_finds_the_cases_stored(results_db_url, monkeypatch):
    """Two ingests of the same run at once: the second waits on the first's uncommitted
    rows, then collides with them; its transaction is done again and adds nothing."""
    lost = []

    def lost_race(error):
        lost.append(type(error).__name__)
        return real_lost_race(error)

    real_lost_race = store_package._lost_race
    monkeypatch.setattr(store_package, "_lost_race", lost_race)
    first, second = open_store(results_db_url), open_store(results_db_url)
    holding, release = threading.Event(), threading.Event()
    outcome = {}

    def hold_open() -> None:
        with first.session() as session:
            outcome["first"] = ingest(session, read_folder(RECORDS))
            holding.set()
            release.wait(30)

    def race() -> None:
        outcome["second"] = ingest_paths(second, [RECORDS])

    try:
        holder = threading.Thread(target=hold_open)
        holder.start()
        assert holding.wait(30)
        racer = threading.Thread(target=race)
        racer.start()
        time.sleep(0.5)
        assert racer.is_alive(), "the second ingest did not wait for the first"
        release.set()
        holder.join(30)
        racer.join(60)
        assert (outcome["first"].added, outcome["second"].added,
                outcome["second"].already_stored) == (4, 0, 4)
        assert lost == ["IntegrityError"]
        assert counts(first) == {"runs": 1, "cases": 4, "cpu_results": 12,
                                 "case_thresholds": 6}
    finally:
        release.set()
        first.close()
        second.close()


def test_two_processes_ingest_one_folder_at_once(results_db_url, tmp_path):
    # three runs, into a database neither process has created yet: the migrations race too
    folder = tmp_path / "artifacts"
    copy_records(folder / "a")
    copy_records(folder / "b", run_id="run:imx6q-02:1")
    copy_records(folder / "c", run_id="run:imx6q-03:1")
    argv = [sys.executable, "-m", "rtlab.cli", "results", "ingest", str(folder),
            "--db", results_db_url]
    processes = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=120) for process in processes]
    for process, (_out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err
    added = sorted(int(out.split(": ")[1].split()[0]) for out, _ in outputs)
    store = open_store(results_db_url)
    try:
        assert sum(added) == 12
        with store.session() as session:
            names = session.execute(select(Run.run_key, Case.name).join(Case.run)).all()
        assert len(names) == len(set(names)) == 12
    finally:
        store.close()


def test_a_new_database_is_at_the_newest_revision(results_db_url, monkeypatch):
    store = open_store(results_db_url)
    try:
        assert migrate.current(store.engine) == migrate.head() != ""
        tables = set(inspect(store.engine).get_table_names())
        assert tables == {"alembic_version", "runs", "cases", "cpu_results",
                          "case_thresholds", "queued_cases", "plan_workers", "bisections",
                          "bisection_steps", "change_points"}
        # the migrations make exactly the tables the models describe
        with store.engine.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection),
                                           Base.metadata)
        assert differences == []
        if store.engine.dialect.name == "sqlite":
            # off while migrating, on again for the connections that ingest
            with store.engine.connect() as connection:
                assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        store.close()

    def no_upgrade(*_args, **_kwargs):
        raise AssertionError("a database at the newest revision was migrated again")

    monkeypatch.setattr(command, "upgrade", no_upgrade)
    again = open_store(results_db_url)
    again.close()


def test_downgrade_to_base_and_up_again(results_db_url):
    store = open_store(results_db_url)
    try:
        ingest_folder(store, RECORDS)
        cfg = migrate.config()
        with store.engine.begin() as connection:
            cfg.attributes["connection"] = connection
            command.downgrade(cfg, "base")
        assert set(inspect(store.engine).get_table_names()) <= {"alembic_version"}
        assert migrate.current(store.engine) is None

        migrate.upgrade(store.engine)
        assert migrate.current(store.engine) == migrate.head()
        assert ingest_folder(store, RECORDS).added == 4
    finally:
        store.close()


def test_the_tail_summaries_are_kept_at_ingest_and_made_for_a_store_from_before(
        results_db_url):
    """Every measured case keeps its judged CPUs' tail (rtlab.verdict.tailsummary) at
    ingest; a store from before revision 0005 gets the same summaries from its CPUs'
    histograms when it is opened."""
    store = open_store(results_db_url)
    try:
        ingest_folder(store, RECORDS)
        columns = (Case.id, Case.tail_samples, Case.tail_first, Case.tail_counts)
        with store.session() as session:
            at_ingest = sorted(session.execute(select(*columns)).all())
            samples = {case.id: sum(cpu.samples for cpu in case.cpus if not cpu.no_wakeup)
                       for case in session.scalars(select(Case))}
        kept = [row for row in at_ingest if row.tail_counts is not None]
        assert kept, "no case kept a tail summary"
        for row in kept:
            assert row.tail_samples == samples[row.id]
            counts = TailSummary.from_stored(row.tail_samples, row.tail_first,
                                             row.tail_counts).counts
            assert counts[0] <= 0.1 * row.tail_samples and (np.diff(counts) <= 0).all()
        migrate.downgrade(store.engine, "0004")
        assert "tail_counts" not in {c["name"] for c in inspect(store.engine).get_columns(
            "cases")}
        migrate.upgrade(store.engine)
        with store.session() as session:
            assert sorted(session.execute(select(*columns)).all()) == at_ingest
    finally:
        store.close()


KEPT_AT_INGEST = (Case.worst_max_us, Case.worst_avg_us, Case.worst_p99_9_us,
                  Case.p99_9_past_range, Case.range_us, Case.overflows, Case.wakeups,
                  Case.kernel_source, Case.kernel_sha256, Case.kernel_package,
                  Case.kernel_version, Case.limit_max_us, Case.cpus_over_limit,
                  Case.pipeline_id, Case.judged_as)


def test_what_ingest_keeps_on_a_case_is_what_the_migrations_backfill(results_db_url,
                                                                      tmp_path):
    """The figures, kernel, limit (revision 0006), pipeline and judging flavour (0007)
    a case keeps at ingest are what a store from before those revisions gets when it is
    opened: the exposure and trends read them, never the records."""
    copy_records(tmp_path, ci={"CI_PIPELINE_ID": "4242", "CI_JOB_ID": "77"},
                 thresholds_flavour="rt")
    store = open_store(results_db_url)
    try:
        ingest_folder(store, tmp_path)
        columns = (Case.id, *KEPT_AT_INGEST)
        with store.session() as session:
            at_ingest = sorted(session.execute(select(*columns)).all())
            runs = {case.id: (case.run.pipeline_id, case.run.thresholds_flavour)
                    for case in session.scalars(select(Case))}
        assert {(row.pipeline_id, row.judged_as) for row in at_ingest} == {("4242", "rt")}
        assert any(row.worst_max_us is not None and row.kernel_version is not None
                   for row in at_ingest)
        assert {row.id: (row.pipeline_id, row.judged_as) for row in at_ingest} == runs
        for revision in ("0006", "0005"):
            migrate.downgrade(store.engine, revision)
            migrate.upgrade(store.engine)
            with store.session() as session:
                assert sorted(session.execute(select(*columns)).all()) == at_ingest
    finally:
        store.close()


def test_cli_ingest(results_db_url, tmp_path, capsys):
    assert cli.main(["results", "ingest", str(RECORDS), "--db", results_db_url]) == 0
    assert capsys.readouterr().out == (f"{RECORDS}: 4 case(s) added, 0 already stored, "
                                       "1 run(s)\n")

    broken = tmp_path / "broken"
    copy_records(broken)
    (broken / "x--1.json").write_text('{"schema": "rtlab.result/2",\n "case": ')
    assert cli.main(["results", "ingest", str(broken), "--db", results_db_url]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rtlab: error: {broken / 'x--1.json'}:2:")


def test_the_database_url(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("RTLAB_RESULTS_DB", raising=False)
    assert default_url() == "sqlite:///results.db"
    secret = "postgresql+psycopg://rtlab:s3cret-password@db.lab.example/rtlab"
    monkeypatch.setenv("RTLAB_RESULTS_DB", secret)
    assert default_url() == secret
    # --help names the variable, never its value (a shared database's password)
    with pytest.raises(SystemExit):
        cli.main(["results", "ingest", "--help"])
    assert "s3cret" not in capsys.readouterr().out

    url = f"sqlite:///{tmp_path / 'lab' / 'results.db'}"
    monkeypatch.setenv("RTLAB_RESULTS_DB", url)
    store = open_store()
    try:
        assert str(store.engine.url) == url
        assert (tmp_path / "lab" / "results.db").exists()
    finally:
        store.close()
    with pytest.raises(ValueError, match="is not a database URL"):
        open_store("results.db")


def test_sqlite_file_copied_elsewhere_still_reads(tmp_path):
    # a pipeline's SQLite file is an artifact: another job opens the copy
    store = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    ingest_folder(store, RECORDS)
    store.close()
    shutil.copy(tmp_path / "a.db", tmp_path / "b.db")
    copy = open_store(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        assert ingest_folder(copy, RECORDS).already_stored == 4
    finally:
        copy.close()


def test_baseline_runs_are_each_runs_cpus_together_with_what_eligibility_needs(store,
                                                                               tmp_path):
    from rtlab.store.query import baseline_runs

    # the same run's records twice, as two runs on main
    copy_records(tmp_path / "a", run_id="run:a", ci={"CI_COMMIT_REF_NAME": "main"})
    copy_records(tmp_path / "b", run_id="run:b", ci={"CI_COMMIT_REF_NAME": "main"},
                 started="2026-11-24T10:00:00+00:00")
    ingest_folder(store, tmp_path / "a")
    ingest_folder(store, tmp_path / "b")
    with store.session() as session:
        runs = baseline_runs(session, board="qemu-imx6q", flavour="rt", scenario="cpu100",
                             interval_us=1000, ref="main", runs=20)
        assert baseline_runs(session, board="qemu-imx6q", flavour="rt", scenario="cpu100",
                             interval_us=1000, ref="other", runs=20) == []
        newest = baseline_runs(session, board="qemu-imx6q", flavour="rt", scenario="cpu100",
                               interval_us=1000, ref=None, runs=1)
    assert len(runs) == 2 and len(newest) == 1
    # every CPU's wake-ups of the case, the overflows included
    assert all(run.histogram.samples == 733 + 718 + 698 + 619 for run in runs)
    record = json.loads(next((tmp_path / "a").glob("*cpu100*1000us*.json")).read_text())
    assert all(run.command == tuple(record["command"]) for run in runs)
    assert all(run.duration_s == record["duration_s"] and run.verdict == record["verdict"]
               for run in runs)
    # two runs, two boots: the run's key is part of the boot
    assert len({run.boot for run in runs}) == 2
