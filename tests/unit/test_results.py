import json
import os

import pytest

from rtlab.artifacts.record import SCHEMA, read_record, write_atomic, write_record
from rtlab.pytestplugin.record import CaseRecord, artifact_path, attachment_line, job_path


class Report:
    """Just the parts of pytest's TestReport that CaseRecord reads."""

    def __init__(self, when: str, outcome: str, message: str = "") -> None:
        self.when = when
        self.outcome = outcome
        self.longrepr = message or None

    failed = property(lambda self: self.outcome == "failed")
    skipped = property(lambda self: self.outcome == "skipped")


def verdict(*reports: Report) -> tuple[str, str]:
    record = CaseRecord(case="t", started="now")
    for report in reports:
        record.observe(report)
    return record.verdict, record.message


def test_passing_phases_give_pass():
    assert verdict(Report("setup", "passed"), Report("call", "passed"),
                   Report("teardown", "passed"))[0] == "pass"


def test_failing_setup_is_an_error_never_a_fail():
    assert verdict(Report("setup", "failed", "board did not reach a shell"),
                   Report("teardown", "passed")) == ("error", "board did not reach a shell")


def test_failing_assertion_is_a_fail():
    assert verdict(Report("setup", "passed"), Report("call", "failed", "CPU1 max 9 > 5"),
                   Report("teardown", "passed")) == ("fail", "CPU1 max 9 > 5")


def test_a_breach_survives_a_teardown_error_which_is_kept_beside_it():
    record = CaseRecord(case="t", started="now")
    for report in (Report("call", "failed", "CPU1 max 9 > 5"),
                   Report("teardown", "failed", "serial lost")):
        record.observe(report)
    assert (record.verdict, record.message) == ("fail", "CPU1 max 9 > 5")
    assert record.as_dict()["error"] == "serial lost"


def test_a_setup_error_after_the_judge_found_a_breach_keeps_the_breach():
    record = CaseRecord(case="t", started="now")
    record.facts["judged"] = {"verdict": "fail", "message": "CPU2 max 500 > 150"}
    record.observe(Report("setup", "failed", "console lost"))
    assert (record.verdict, record.message) == ("fail", "CPU2 max 500 > 150")
    assert record.facts["error"] == "console lost"


def test_teardown_error_after_a_pass_makes_an_error():
    assert verdict(Report("call", "passed"), Report("teardown", "failed", "serial lost"),
                   ) == ("error", "serial lost")


def test_a_skip_stays_a_skip_when_the_session_teardown_fails_after_it():
    record = CaseRecord(case="t", started="now")
    record.observe(Report("setup", "skipped", "no network"))
    record.observe(Report("teardown", "failed", "cleanup failed"))
    assert record.verdict == "skipped" and record.facts["error"] == "cleanup failed"


def test_record_is_written_whole_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("CI_PIPELINE_ID", "42")
    path = write_record(tmp_path, {"kind": "cyclictest", "case": "tests/x.py::test[cpu]",
                                   "verdict": "error",
                                   "message": "no login prompt",
                                   "started": "2026-11-22T08:56:51.123456+00:00"})
    assert path.name == "tests_x.py__test_cpu_--20261122085651123456.json"
    record = read_record(path)
    assert record["schema"] == SCHEMA
    assert record["ci"] == {"CI_PIPELINE_ID": "42"}
    assert record["verdict"] == "error"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left over


def test_records_of_the_same_case_from_different_runs_are_all_kept(tmp_path):
    first = write_record(tmp_path, {"kind": "cyclictest", "case": "tests/x.py::test[cpu]",
                                    "name": "imx6q/rt/cpu100/1000us", "verdict": "pass",
                                    "message": "", "started": "2026-11-22T08:56:51+00:00"})
    second = write_record(tmp_path, {"kind": "cyclictest", "case": "tests/x.py::test[cpu]",
                                     "name": "imx6q/rt/cpu100/1000us", "verdict": "fail",
                                     "message": "CPU1 max 9 > 5",
                                     "started": "2026-11-22T08:57:50+00:00"})
    assert first != second
    assert read_record(first)["verdict"] == "pass" and read_record(second)["verdict"] == "fail"
    with pytest.raises(FileExistsError):
        write_record(tmp_path, {"kind": "cyclictest", "case": "tests/x.py::test[cpu]",
                                "name": "imx6q/rt/cpu100/1000us", "verdict": "error",
                                "started": "2026-11-22T08:56:51+00:00"})
    assert read_record(first)["verdict"] == "pass"


def test_unknown_verdict_is_refused(tmp_path):
    with pytest.raises(ValueError, match="verdict must be one of"):
        write_record(tmp_path, {"kind": "cyclictest", "case": "c", "verdict": "ok"})


def test_garbled_record_names_file_and_line(tmp_path):
    path = tmp_path / "r.json"
    path.write_text('{\n "schema": \n')
    with pytest.raises(ValueError, match=r"r.json:3: invalid result record, not JSON"):
        read_record(path)


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"old": True}))

    with pytest.raises(TypeError):
        write_atomic(path, 42)  # type: ignore[arg-type]
    assert json.loads(path.read_text()) == {"old": True}
    assert os.listdir(tmp_path) == ["r.json"]


def test_records_of_one_run_carry_its_run_id(tmp_path, monkeypatch):
    # rtlab run sets the id for its pytest; the results store groups a run's cases by it
    monkeypatch.setenv("RTLAB_RUN_ID", "run:imx6q-01:abc")
    first = write_record(tmp_path, {"kind": "cyclictest", "case": "a", "verdict": "pass",
                                    "message": "",
                                    "started": "2026-11-22T08:56:51+00:00"})
    second = write_record(tmp_path, {"kind": "cyclictest", "case": "b", "verdict": "error",
                                     "message": "x",
                                     "started": "2026-11-22T08:57:51+00:00"})
    assert {read_record(p)["run_id"] for p in (first, second)} == {"run:imx6q-01:abc"}


def test_run_id_is_the_ci_job_in_a_pipeline_and_unique_elsewhere(monkeypatch):
    from rtlab.run.runner import run_id

    monkeypatch.delenv("RTLAB_RUN_ID", raising=False)
    monkeypatch.delenv("CI_JOB_ID", raising=False)
    local = {run_id("imx6q-01") for _ in range(3)}
    assert len(local) == 3 and all(key.startswith("run:imx6q-01:") for key in local)
    monkeypatch.setenv("CI_PIPELINE_ID", "77")
    monkeypatch.setenv("CI_JOB_ID", "901")
    assert run_id("imx6q-01") == "gitlab:77:901:imx6q-01"


def test_a_case_file_lies_beside_its_record_and_is_attached_by_its_job_path(tmp_path,
                                                                             monkeypatch):
    record = CaseRecord(case="tests/x.py::test[idle]", started="2026-11-25T19:01:02+00:00",
                        facts={"name": "qemu-imx6q/rt/idle/1000us"})
    trace = artifact_path(record, tmp_path / "results", ".trace.gz")
    written = write_record(tmp_path / "results", {**record.as_dict(), "kind": "cyclictest",
                                                  "verdict": "fail"})
    assert trace.parent == written.parent
    assert trace.name == written.name.removesuffix(".json") + ".trace.gz"
    # GitLab finds an attachment within the job's folder; elsewhere it stays absolute
    monkeypatch.chdir(tmp_path)
    assert attachment_line(trace) == f"[[ATTACHMENT|results/{trace.name}]]"
    monkeypatch.chdir(tmp_path / "results")
    assert job_path(tmp_path / "other.gz") == (tmp_path / "other.gz").as_posix()
