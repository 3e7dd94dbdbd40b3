"""JUnit files into the results store (SQLite and PostgreSQL): a test case whose record is
stored adds nothing; one without becomes a case from what JUnit says."""

import datetime
import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import func, select

from rtlab import cli
from rtlab.store import ingest_paths, open_store
from rtlab.store.junit import JUnitError, node_address, read_junit
from rtlab.store.models import Case, CpuResult, Run

pytest_plugins = ["tests.pg"]

DATA = Path(__file__).parents[1] / "data"
RECORDS = DATA / "records" / "vlab-imx6q-rt"
JUNIT = DATA / "junit"
# the JUnit file of the run that wrote RECORDS
RUN_JUNIT = JUNIT / "vlab-imx6q-rt" / "junit-imx6q-01.xml"
XUNIT1 = JUNIT / "pytest-xunit1" / "junit-imx6q-02.xml"
LAVA = JUNIT / "lava" / "lava-job-1234.xml"
RECORDS_RUN = "local:imx6q-01:8e3e67affecbe69a:2026-11-23"


@pytest.fixture
def store(results_db_url):
    opened = open_store(results_db_url)
    yield opened
    opened.close()


def utc(when: datetime.datetime) -> datetime.datetime:
    # SQLite hands times back without their zone; the store keeps UTC
    return when.replace(tzinfo=datetime.UTC) if when.tzinfo is None else when


def stored(store) -> dict[str, Case]:
    with store.session() as session:
        cases = session.scalars(select(Case)).all()
        for case in cases:
            _ = case.run, case.cpus
        return {case.name: case for case in cases}


def count(store, table) -> int:
    with store.session() as session:
        return session.scalar(select(func.count()).select_from(table))


def test_rtlab_junit_with_its_records_adds_nothing(store, tmp_path):
    report = ingest_paths(store, [RECORDS, RUN_JUNIT])
    assert (report.added, report.from_junit, report.junit_with_record) == (4, 0, 4)

    again = ingest_paths(store, [RUN_JUNIT])
    assert (again.added, again.already_stored, again.junit_with_record) == (0, 0, 4)

    # a job's artifacts: records and JUnit in one folder
    artifacts = tmp_path / "artifacts"
    shutil.copytree(RECORDS, artifacts / "results")
    shutil.copy(RUN_JUNIT, artifacts)
    third = ingest_paths(store, [artifacts])
    assert (third.added, third.already_stored, third.junit_with_record) == (0, 4, 4)
    assert {case.record.get("source") for case in stored(store).values()} == {None}
    assert count(store, Run) == 1


def test_records_that_come_after_their_junit_replace_its_cases(store):
    first = ingest_paths(store, [RUN_JUNIT])
    assert (first.added, first.from_junit) == (4, 4)
    assert {case.verdict for case in stored(store).values()} == {"pass"}

    then = ingest_paths(store, [RECORDS])
    assert (then.added, then.replaced) == (4, 4)
    cases = stored(store)
    assert len(cases) == 4
    assert {case.record.get("source") for case in cases.values()} == {None}
    assert {case.run.run_key for case in cases.values()} == {RECORDS_RUN}
    # the run made up from JUnit alone is gone with its cases
    assert count(store, Run) == 1

    again = ingest_paths(store, [RECORDS, RUN_JUNIT])
    assert (again.added, again.replaced, again.junit_with_record) == (0, 0, 4)


def test_a_record_that_shares_its_stand_ins_run_name_and_start_replaces_it(store, tmp_path):
    # JUnit that names the records' run and starts with the first record (a runner that
    # builds its JUnit from its records does): the stand-in of the first case has that
    # record's very identity in the store, and the record must still come in, not count
    # as stored already while its stand-in is dropped
    text = RUN_JUNIT.read_text().replace(
        'timestamp="2026-11-23T14:28:15.233980+00:00"',
        'timestamp="2026-11-23T14:28:15.277137+00:00"', 1).replace(
        "<properties>", f'<properties><property name="run_id" value="{RECORDS_RUN}" />', 1)
    junit = tmp_path / RUN_JUNIT.name
    junit.write_text(text)
    first = ingest_paths(store, [junit])
    assert (first.added, first.from_junit) == (4, 4)
    assert {case.run.run_key for case in stored(store).values()} == {RECORDS_RUN}

    then = ingest_paths(store, [RECORDS])
    assert (then.added, then.already_stored, then.replaced) == (4, 0, 4)
    cases = stored(store)
    assert len(cases) == 4
    assert {case.record.get("source") for case in cases.values()} == {None}
    assert count(store, Run) == 1
    again = ingest_paths(store, [RECORDS, junit])
    assert (again.added, again.replaced) == (0, 0)
    assert len(stored(store)) == 4


def test_cases_without_records_come_from_junit(store):
    report = ingest_paths(store, [RECORDS, XUNIT1])
    assert (report.added, report.from_junit, report.junit_with_record) == (9, 5, 1)
    assert sorted(report.runs) == sorted([RECORDS_RUN, "gitlab:4711:90210:imx6q-02"])

    cases = stored(store)
    suite = read_junit(XUNIT1)[0]
    junit = {case.name: case for case in suite.cases}
    fail = cases["imx6q/rt/cpu100/100us"]
    run = fail.run
    assert (run.run_key, run.place, run.board, run.flavour, run.pipeline_id, run.job_id,
            run.commit_sha, run.ref_name) == (
        "gitlab:4711:90210:imx6q-02", "imx6q-02", "imx6q", "rt", "4711", "90210",
        "0c4b8ad0578d0f178c77e74d764074bc7b7e27ff", "main")
    assert (fail.verdict, fail.kind, fail.scenario, fail.interval_us) == (
        "fail", "cyclictest", "cpu100", 100)
    assert fail.message == ("AssertionError: max_us 152 > 120 on CPU1 (thresholds.yaml:14: "
                            "imx6q rt under full load)")
    # the suite's start plus the cases before it
    assert utc(fail.started) == suite.timestamp + datetime.timedelta(
        seconds=junit["qemu-imx6q/rt/cpu100/1000us"].time_s)
    assert fail.record["source"] == "junit"
    assert fail.record["junit"]["testsuite"] == "imx6q-02"
    assert [(c.cpu, c.max_us, c.avg_us, c.p99_9_us, c.no_wakeup) for c in fail.cpus] == [
        (0, 61, 9.25, 31, False), (1, 152, 11.5, 48, False), (2, None, None, None, True)]

    error = cases["imx6q/rt/hackbench/100us"]
    assert (error.verdict, error.message, error.cpus) == (
        "error", "standin_suite.InfrastructureError: no login prompt after 120 s (last "
        "console line: 'U-Boot 2023.01') (boot attempt 3 of 3)", [])
    skipped = cases["imx6q/rt/cpu100_isolated/1000us"]
    assert (skipped.verdict, skipped.message) == (
        "skipped", "the board's kernel isolates no CPU (no isolcpus= on its command line: "
        "'console=ttymxc1,115200 root=/dev/mmcblk0p2')")
    tool = cases["imx6q/rt/ptsematest"]
    assert (tool.verdict, tool.kind, tool.interval_us) == ("pass", "rt-test", None)
    assert [(c.thread, c.cpu, c.max_us, c.avg_us, c.gated) for c in tool.cpus] == [
        (0, None, 41, 7.12, True), (1, None, 38, 6.9, True)]
    functional = cases["imx6q/rt/pi_stress"]
    assert (functional.kind, functional.record["functional"]) == (
        "functional", {"inversions": 120544})
    # the case whose record is stored is the record's
    assert cases["qemu-imx6q/rt/cpu100/1000us"].record.get("source") is None

    again = ingest_paths(store, [RECORDS, XUNIT1])
    assert (again.added, again.already_stored, again.junit_with_record) == (0, 9, 1)


def test_junit_of_another_runner(store, tmp_path):
    report = ingest_paths(store, [LAVA])
    assert (report.added, report.runs) == (
        3, ("junit:lava-job-1234.xml:lava-1234:2026-11-20T09:00:00+00:00",))
    cases = stored(store)
    tz = datetime.UTC
    assert {name: (c.verdict, c.kind, utc(c.started)) for name, c in cases.items()} == {
        "rpi3/rt/cpu100/1000us": ("pass", "cyclictest",
                                  datetime.datetime(2026, 11, 20, 9, 0, 0, tzinfo=tz)),
        "rpi3/rt/hackbench/1000us": ("fail", "cyclictest",
                                     datetime.datetime(2026, 11, 20, 10, 0, 12, tzinfo=tz)),
        "rpi3/rt/pmqtest": ("pass", "rt-test",
                            datetime.datetime(2026, 11, 20, 11, 0, 30, tzinfo=tz)),
    }
    assert cases["rpi3/rt/hackbench/1000us"].message == "max_us 412 > 300 on CPU0"
    assert [(c.cpu, c.max_us, c.avg_us) for c in cases["rpi3/rt/hackbench/1000us"].cpus] == [
        (0, 412, None), (1, 277, None)]
    run = cases["rpi3/rt/pmqtest"].run
    assert (run.board, run.place, run.pipeline_id) == ("rpi3", None, None)
    assert utc(run.finished) == datetime.datetime(2026, 11, 20, 12, 0, 30, tzinfo=tz)

    # the same file elsewhere (pulled again, another checkout) is the same run
    copy = tmp_path / "elsewhere" / LAVA.name
    copy.parent.mkdir()
    shutil.copy(LAVA, copy)
    assert ingest_paths(store, [copy.parent]).added == 0
    assert count(store, Case) == 3


def test_a_case_stopped_before_it_was_named(store, tmp_path):
    # a board that never came up: the record keeps the pytest node id as the case's name,
    # and so does JUnit, in its own (classname, name) form
    record = json.loads(next(RECORDS.glob("*cpu100*")).read_text())
    record.update(name=None, verdict="error", message="board silent after power-on",
                  cpus=[])
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.json").write_text(json.dumps(record))
    (tmp_path / "junit.xml").write_text(
        '<testsuites><testsuite name="imx6q-01" timestamp="2026-11-23T14:28:10+00:00" '
        'time="40"><testcase classname="tests.target.test_latency" '
        'name="test_latency[cpu100-1000us]" time="40"><error message="failed on setup '
        'with &quot;board silent after power-on&quot;"/></testcase></testsuite>'
        '</testsuites>')
    report = ingest_paths(store, [tmp_path])
    assert (report.added, report.from_junit, report.junit_with_record) == (1, 0, 1)
    assert list(stored(store)) == ["tests/target/test_latency.py::test_latency[cpu100-1000us]"]


def test_a_case_named_without_board_and_flavour_is_refused(store):
    bad = JUNIT / "bad-name.xml"
    with pytest.raises(JUnitError) as refused:
        ingest_paths(store, [RECORDS, bad])
    assert str(refused.value).startswith(
        f"{bad}:5: testcase 'cyclictest-idle' has no result record and its name does not "
        "say board and flavour")
    # nothing of the ingest is stored, the records included
    assert count(store, Case) == count(store, Run) == 0


def test_a_garbled_junit_file_refuses_its_folder(store, tmp_path):
    folder = tmp_path / "artifacts"
    shutil.copytree(RECORDS, folder / "results")
    text = LAVA.read_text()
    (folder / "junit.xml").write_text(text[:text.index("<testcase", text.index("pmqtest") - 60)])
    line = text[:text.index("pmqtest")].count("\n") + 1
    with pytest.raises(JUnitError, match=rf"^{folder / 'junit.xml'}:{line}: not well-formed"):
        ingest_paths(store, [folder])
    assert count(store, Case) == 0


def test_other_xml_in_a_folder_is_passed_over(store, tmp_path):
    shutil.copytree(RECORDS, tmp_path / "results")
    (tmp_path / "sdcard.img.bmap.xml").write_text('<?xml version="1.0"?>\n'
                                                 '<bmap version="2.0"></bmap>\n')
    assert ingest_paths(store, [tmp_path]).added == 4
    # named on its own, it must be JUnit
    with pytest.raises(JUnitError, match=r"sdcard.img.bmap.xml:2: not a JUnit file: root "
                                         r"element <bmap>"):
        ingest_paths(store, [tmp_path / "sdcard.img.bmap.xml"])


def test_cli_takes_junit_files(results_db_url, capsys):
    assert cli.main(["results", "ingest", str(RUN_JUNIT), str(RECORDS), str(XUNIT1),
                     "--db", results_db_url]) == 0
    out = capsys.readouterr().out
    assert out.endswith(": 9 case(s) added (5 from JUnit alone), 0 already stored, 5 JUnit "
                        "case(s) told by their record, 2 run(s)\n")
    store = open_store(results_db_url)
    try:
        assert count(store, Case) == 9
        assert count(store, CpuResult) == 12 + 5
    finally:
        store.close()


def test_reading_junit():
    suite, = read_junit(XUNIT1)
    assert (suite.name, suite.place, len(suite.cases)) == ("imx6q-02", "imx6q-02", 6)
    assert suite.timestamp.tzinfo is datetime.UTC
    verdicts = [(case.name, case.verdict) for case in suite.cases]
    assert verdicts == [("qemu-imx6q/rt/cpu100/1000us", "pass"),
                        ("imx6q/rt/cpu100/100us", "fail"),
                        ("imx6q/rt/hackbench/100us", "error"),
                        ("imx6q/rt/cpu100_isolated/1000us", "skipped"),
                        ("imx6q/rt/ptsematest", "pass"), ("imx6q/rt/pi_stress", "pass")]
    assert suite.cases[0].record_file == "qemu-imx6q_rt_cpu100_1000us--20261123142815277137.json"
    assert suite.cases[1].record_file is None
    assert node_address("tests/target/test_latency.py::test_latency[cpu100-1000us]") == (
        "tests.target.test_latency", "test_latency[cpu100-1000us]")
    assert node_address("tests/x.py::TestA::test_b[a/b::c]") == ("tests.x.TestA",
                                                                  "test_b[a/b::c]")


def test_an_error_is_never_a_fail(tmp_path):
    # pytest writes both for a case that failed and then lost its board in teardown
    path = tmp_path / "junit.xml"
    path.write_text('<testsuite name="s" timestamp="2026-11-23T10:00:00Z">'
                    '<testcase name="a/b/c" time="1"><failure message="max_us 9 &gt; 8"/>'
                    '<error message="failed on teardown with &quot;serial lost during the '
                    'test: read failed&quot;"/></testcase></testsuite>')
    case, = read_junit(path)[0].cases
    assert (case.verdict, case.message) == ("error", "serial lost during the test: read failed")
