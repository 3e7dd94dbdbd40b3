"""Each series' newest cases, every series read in one statement along the cases' index
(rtlab.store.query.newest_per_series, which the report's current cases, baselines, trends
and change points read through): the same cases a full sort of the store gives, on
SQLite and PostgreSQL, for cyclictest series and an rt-test's (no interval); and on
PostgreSQL an rt-test's series is read along the index, not sorted whole."""

import datetime
import json
from pathlib import Path

import pytest
from sqlalchemy import select

from rtlab.store import ingest_folder, open_store
from rtlab.store.models import Case, Run
from rtlab.store.query import newest_ids, newest_statements, series_counts

pytest_plugins = ["tests.pg"]

RECORDS = Path(__file__).parents[1] / "data" / "records" / "vlab-imx6q-rt"
RUNS = 9


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(request, tmp_path_factory):
    """The four recorded cases (two cyclictest series, two rt-tests) in RUNS runs each,
    an hour apart; two runs of one series start at the same second (a tie the id breaks);
    every third run on a branch."""
    folder = tmp_path_factory.mktemp("newest") / "records"
    folder.mkdir()
    start = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)
    for path in sorted(RECORDS.glob("*.json")):
        record = json.loads(path.read_text())
        for run in range(RUNS):
            when = start + datetime.timedelta(hours=min(run, RUNS - 2))
            record.update(run_id=f"run-{run}", started=when.isoformat(),
                          finished=(when + datetime.timedelta(minutes=1)).isoformat(),
                          verdict="error" if run == 4 else "pass",
                          ci={"CI_COMMIT_REF_NAME": "topic" if run % 3 == 2 else "main"})
            (folder / f"{run}-{path.name}").write_text(json.dumps(record))
    url = (f"sqlite:///{folder.parent / 'results.db'}" if request.param == "sqlite"
           else request.getfixturevalue("postgres_server").new_database())
    opened = open_store(url)
    ingest_folder(opened, folder)
    yield opened
    opened.close()


def _sorted_newest(session, per_series: int, ref: str | None, verdicts) -> set[int]:
    """The same by brute force: every case read, sorted here."""
    query = select(Case.id, Case.board, Case.flavour, Case.scenario, Case.interval_us,
                   Case.started, Case.verdict, Run.ref_name).join(Run, Case.run_id == Run.id)
    by_series: dict = {}
    for row in session.execute(query):
        if (ref is None or row.ref_name == ref) and (verdicts is None
                                                     or row.verdict in verdicts):
            by_series.setdefault((row.board, row.flavour, row.scenario, row.interval_us),
                                 []).append((row.started, row.id))
    return {case_id for cases in by_series.values()
            for _, case_id in sorted(cases, reverse=True)[:per_series]}


@pytest.mark.parametrize("per_series", [1, 3, 100])
@pytest.mark.parametrize(("ref", "verdicts"), [(None, None), ("main", ("pass", "fail"))])
def test_the_newest_of_each_series_are_those_a_full_sort_gives(store, per_series, ref,
                                                                verdicts):
    with store.session() as session:
        series = series_counts(session)
        assert sum(1 for key in series if key[3] is None) == 2, series
        found = newest_ids(session, ref=ref, verdicts=verdicts, per_series=per_series,
                           series=series)
        assert len(found) == len(set(found))
        assert set(found) == _sorted_newest(session, per_series, ref, verdicts)
        # and without the series given, read from the store
        assert set(newest_ids(session, ref=ref, verdicts=verdicts,
                              per_series=per_series)) == set(found)


def test_a_series_is_read_along_the_index_even_an_rt_tests(store):
    """PostgreSQL does not take a column fixed by IS NULL as ordered: ordered by started
    alone, an rt-test's series (interval_us IS NULL) was sorted whole, 30 ms a series at
    100 000 runs. The plans, with what reads or sorts everything priced out (this store
    is small enough for them): along ix_cases_series, nothing sorted but ties; the order
    by started alone still sorts."""
    if store.engine.dialect.name != "postgresql":
        pytest.skip("SQLite's index entries end with the rowid: its plan needs no sort")

    def plan(session, statement) -> list[str]:
        sql = statement.compile(store.engine, compile_kwargs={"literal_binds": True})
        return [row[0].strip() for row in session.connection().exec_driver_sql(
            f"EXPLAIN {sql}")]

    def sorts(steps: list[str]) -> list[str]:
        return [s.removeprefix("->  ").split("  (")[0] for s in steps
                if "Sort" in s and "Key" not in s and "Method" not in s]

    with store.session() as session:
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            session.connection().exec_driver_sql(f"SET LOCAL {setting} = off")
        rt_test = next(key for key in series_counts(session) if key[3] is None)
        [statement] = newest_statements(select(Case.id), [rt_test], 1)
        read = plan(session, statement)
        assert any("ix_cases_series" in step for step in read), read
        assert sorts(read) in ([], ["Incremental Sort"]), read
        by_started = (select(Case.id).where(*_series(rt_test))
                      .order_by(Case.started.desc(), Case.id.desc()).limit(1))
        assert "Sort" in sorts(plan(session, by_started)), plan(session, by_started)


def _series(key):
    board, flavour, scenario, _ = key
    return (Case.board == board, Case.flavour == flavour, Case.scenario == scenario,
            Case.interval_us.is_(None))
