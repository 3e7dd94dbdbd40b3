"""rtlab.lava.junit: the JUnit report `rtlab lava fetch|records|local` writes beside the
records, shaped as the labgrid path's pytest writes it (case names, classnames, verdict
elements, properties), so that GitLab and `rtlab results ingest` take both runners alike;
whatever did not run to its end is an <error>, never a pass."""

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rtlab.artifacts.record import read_record
from rtlab.cli import main
from rtlab.lava import records
from rtlab.lava.joblog import read_log
from rtlab.lava.junit import job_junit
from rtlab.lava.plan import plan_of_job
from rtlab.measure.suite import load_suite
from rtlab.store import ingest_paths, open_store
from rtlab.store.junit import read_junit
from rtlab.util.paths import REPO_ROOT
from rtlab.verdict.junit import case_properties, write_junit
from rtlab.verdict.thresholds import load_thresholds
from tests.lava_log import LOG, file_start, garble_evidence, log_lines

DATA = REPO_ROOT / "tests" / "data"
JOB = DATA / "lava" / "qemu-imx6q-rt-job.yaml"
# the JUnit of an `rtlab run` on the virtual i.MX6Q (pytest's xunit1)
LABGRID_JUNIT = DATA / "junit" / "vlab-imx6q-rt" / "junit-imx6q-01.xml"
# pytest's xunit1 of a stand-in for tests/target (tests/data/junit/README.md)
XUNIT1 = DATA / "junit" / "pytest-xunit1" / "junit-imx6q-02.xml"
CASES = ["idle/1000us", "cpu50/1000us", "cpu100_isolated/1000us", "network/1000us",
         "signaltest", "pi_stress", "oslat"]
VERDICT_TAGS = ("failure", "error", "skipped")


def thresholds_file(tmp_path, max_us=10_000_000, reason=None):
    path = tmp_path / f"thresholds-{max_us}.yaml"
    why = f"\n  reason: {json.dumps(reason)}" if reason else ""
    path.write_text(f"defaults:\n  max_us: {max_us}\n  avg_us: 10000000{why}\nboards:\n"
                    "  qemu-imx6q:\n    flavours:\n      rt: {}\n")
    return path


def lava_records(tmp_path, log_text, *, max_us=10_000_000, name="lava-run.log", extra=()):
    """`rtlab lava records` of the fixture job with ``log_text``: its exit code, the JUnit
    file where it is written by default, and the records by case name."""
    log = tmp_path / name
    log.write_text(log_text)
    out = tmp_path / "out"
    code = main(["lava", "records", "--job", str(JOB), "--log", str(log), "--out", str(out),
                 "--thresholds", str(thresholds_file(tmp_path, max_us)), *extra])
    junit = out / f"junit-lava-{log.stem}.xml"
    written = {r["name"]: r for r in map(read_record, (out / "results").glob("*.json"))}
    return code, junit, written


def cases_of(junit: Path) -> dict[str, ET.Element]:
    return {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}


def verdict_of(case: ET.Element) -> tuple[str, str | None]:
    found = [child for child in case if child.tag in VERDICT_TAGS]
    assert len(found) <= 1, [child.tag for child in found]
    return (found[0].tag, found[0].get("message")) if found else ("pass", None)


def properties_of(case: ET.Element) -> dict[str, str]:
    return {p.get("name"): p.get("value") for p in case.iter("property")}


def test_a_real_lava_run_gives_the_junit_the_labgrid_path_gives(tmp_path):
    code, junit, written = lava_records(tmp_path, LOG.read_text(), extra=["--device",
                                                                          "qemu-01"])
    assert code == 0
    root = ET.parse(junit).getroot()
    suite, = root.iter("testsuite")
    # the suite named by its label, as `rtlab run` names its suite (junit_suite_name)
    assert suite.get("name") == "lava-lava-run"
    assert {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "7", "failures": "0", "errors": "0", "skipped": "3"}
    cases = cases_of(junit)
    # one test case per case of the plan, in its order, named as tests/target names them
    assert list(cases) == [f"qemu-imx6q/rt/{name}" for name in CASES]
    # the classnames of the labgrid path's JUnit for the same kinds of case
    labgrid = {case.get("name").split("/", 2)[2]: case.get("classname")
               for case in ET.parse(LABGRID_JUNIT).getroot().iter("testcase")}
    assert cases["qemu-imx6q/rt/idle/1000us"].get("classname") == labgrid["idle/1000us"]
    assert cases["qemu-imx6q/rt/signaltest"].get("classname") == labgrid["ptsematest"]
    # passes bare, skips as <skipped> (the tag and the verdict share the word)
    assert {name: verdict_of(case)[0] for name, case in cases.items()} == {
        name: record["verdict"] for name, record in written.items()}
    for name, case in cases.items():
        if verdict_of(case)[0] == "skipped":
            assert verdict_of(case)[1] == written[name]["message"]
    assert "isolates no CPU" in verdict_of(cases["qemu-imx6q/rt/cpu100_isolated/1000us"])[1]

    # the headline figures as tests/target records them, and the record's path
    cpu50 = properties_of(cases["qemu-imx6q/rt/cpu50/1000us"])
    record = written["qemu-imx6q/rt/cpu50/1000us"]
    assert cpu50["cpu_utilisation"] == f"{record['load_check']['cpu_utilisation']:.3f}"
    for cpu in record["cpus"]:
        assert cpu50[f"cpu{cpu['cpu']}_max_us"] == str(cpu["max_us"])
        assert cpu50[f"cpu{cpu['cpu']}_avg_us"] == str(cpu["avg_us"])
    # labgrid's JUnit of the same case has the same figures by the same names
    labgrid_names = {p.get("name") for case in ET.parse(LABGRID_JUNIT).getroot().iter(
        "testcase") if case.get("name").endswith("/idle/1000us") for p in case.iter("property")}
    assert set(properties_of(cases["qemu-imx6q/rt/idle/1000us"])) - {"result_record"} == (
        labgrid_names)
    assert read_record(Path(cpu50["result_record"]))["name"] == "qemu-imx6q/rt/cpu50/1000us"
    signaltest = properties_of(cases["qemu-imx6q/rt/signaltest"])
    gated = written["qemu-imx6q/rt/signaltest"]["threads"][0]
    assert signaltest[f"thread{gated['thread']}_max_us"] == str(gated["max_us"])
    assert properties_of(cases["qemu-imx6q/rt/pi_stress"])["inversions"] == str(
        written["qemu-imx6q/rt/pi_stress"]["functional"]["inversions"])
    suite_properties = {p.get("name"): p.get("value")
                        for p in suite.find("properties").iter("property")}
    assert suite_properties["TARGET_MAIN_REMOTE"] == "qemu-01"

    # the case's own part of the job log, its evidence shortened to a count
    idle = cases["qemu-imx6q/rt/idle/1000us"].find("system-out").text
    assert "rtlab-lava:case-start idle-1000us" in idle.splitlines()[1]
    assert "rtlab-lava:case-end idle-1000us" in idle.splitlines()[-1]
    assert "line(s) of base64: idle-1000us evidence.tar]" in idle
    assert "H4sI" not in idle and "cpu50-1000us" not in idle
    skipped = cases["qemu-imx6q/rt/network/1000us"].find("system-out").text
    assert "rtlab-lava:case-skip network-1000us" in skipped
    assert "TEST_CASE_ID=network-1000us RESULT=skip" in skipped and "signaltest" not in skipped
    # the store's own reader takes it: verdicts, messages, the record's file
    read, = read_junit(junit)
    assert {c.name: (c.verdict, c.record_file) for c in read.cases} == {
        name: (r["verdict"], Path(cases[name].find("properties/property[@name="
                                                      "'result_record']").get("value")).name)
        for name, r in written.items()}


def test_a_limit_exceeded_is_a_failure_with_the_figure_limit_and_line(tmp_path):
    code, junit, written = lava_records(tmp_path, LOG.read_text(), max_us=100)
    assert code == 1
    cases = cases_of(junit)
    tag, message = verdict_of(cases["qemu-imx6q/rt/cpu50/1000us"])
    assert tag == "failure"
    assert message == written["qemu-imx6q/rt/cpu50/1000us"]["message"]
    assert re.match(r"CPU0 max \d+ µs > max_us 100 µs \(.*thresholds-100\.yaml:2\)", message)
    assert verdict_of(cases["qemu-imx6q/rt/signaltest"])[0] == "failure"
    assert verdict_of(cases["qemu-imx6q/rt/pi_stress"]) == ("pass", None)
    suite, = ET.parse(junit).getroot().iter("testsuite")
    assert (suite.get("failures"), suite.get("errors")) == ("3", "0")


def test_a_log_cut_off_mid_case_gives_errors_never_passes(tmp_path):
    lines = log_lines()
    cut = file_start(lines, "cpu50") + 5
    code, junit, written = lava_records(tmp_path, "".join(lines[:cut]) + lines[cut][:30])
    assert code == 1
    cases = cases_of(junit)
    # idle finished before the cut; nothing after it passes or is skipped
    assert verdict_of(cases["qemu-imx6q/rt/idle/1000us"]) == ("pass", None)
    for name in CASES[1:]:
        tag, message = verdict_of(cases[f"qemu-imx6q/rt/{name}"])
        assert tag == "error", name
        assert message == written[f"qemu-imx6q/rt/{name}"]["message"].splitlines()[0]
        assert "truncated" in message
    cpu50 = cases["qemu-imx6q/rt/cpu50/1000us"]
    assert "did not finish" in verdict_of(cpu50)[1]
    # from the case's start to where the log breaks off, the cut line shown as it is
    out = cpu50.find("system-out").text.splitlines()
    assert "this case to the end of the log" in out[0]
    assert "rtlab-lava:case-start cpu50-1000us" in out[1]
    assert "unreadable" in out[-1] and lines[cut][:20] in out[-1]
    # a case the job never got to shows the log's tail: where and how the job ended
    oslat = cases["qemu-imx6q/rt/oslat"].find("system-out").text.splitlines()
    assert "the job ended before this case" in oslat[0] and "the last 200 of" in oslat[0]
    assert len(oslat) == 201 and oslat[-1] == out[-1]
    suite, = ET.parse(junit).getroot().iter("testsuite")
    assert (suite.get("errors"), suite.get("skipped")) == ("6", "0")


def test_garbled_evidence_and_a_failed_job_are_errors(tmp_path):
    lines = log_lines()
    garbled = garble_evidence(lines)
    (tmp_path / "garbled").mkdir()
    _, junit, _ = lava_records(tmp_path / "garbled", "".join(garbled))
    tag, message = verdict_of(cases_of(junit)["qemu-imx6q/rt/cpu50/1000us"])
    assert tag == "error"
    assert re.search(r"SHA-256 differs|does not decode|not a tar", message)
    assert verdict_of(cases_of(junit)["qemu-imx6q/rt/idle/1000us"]) == ("pass", None)

    # LAVA gave up before the suite started: every case an error with LAVA's reason
    boot = next(i for i, line in enumerate(lines) if "rtlab-lava:suite-start" in line) - 30
    failed = json.dumps({"dt": "2026-11-25T02:45:00", "lvl": "error",
                         "msg": "auto-login-action timed out after 120 seconds"}) + "\n"
    failed += json.dumps({"dt": "2026-11-25T02:45:00", "lvl": "results", "msg": {
        "definition": "lava", "case": "job", "result": "fail", "error_type": "Infrastructure",
        "error_msg": "auto-login-action timed out"}}) + "\n"
    (tmp_path / "failed").mkdir()
    code, junit, _ = lava_records(tmp_path / "failed", "".join(lines[:boot]) + failed)
    assert code == 1
    for name, case in cases_of(junit).items():
        tag, message = verdict_of(case)
        assert tag == "error", name
        assert "Infrastructure error: auto-login-action timed out" in message
        assert "auto-login-action timed out after 120 seconds" in case.find("system-out").text


def test_ingest_of_records_and_junit_adds_each_case_once(tmp_path):
    _, junit, _ = lava_records(tmp_path, LOG.read_text())
    out = junit.parent
    store = open_store(f"sqlite:///{tmp_path / 'both.db'}")
    first = ingest_paths(store, [out])
    assert (first.added, first.from_junit, first.junit_with_record) == (7, 0, 7)
    again = ingest_paths(store, [out])
    assert (again.added, again.already_stored, again.junit_with_record) == (0, 7, 7)

    # the JUnit alone first (records not yet there), then the records: they replace the
    # cases JUnit stood in for, and nothing is left twice or missing
    store = open_store(f"sqlite:///{tmp_path / 'junit-first.db'}")
    alone = ingest_paths(store, [junit])
    assert (alone.added, alone.from_junit) == (7, 7)
    then = ingest_paths(store, [out / "results"])
    assert (then.added, then.replaced) == (7, 7)
    last = ingest_paths(store, [out])
    assert (last.added, last.already_stored, last.junit_with_record) == (0, 7, 7)


def test_special_characters_in_messages_and_log_lines_are_escaped(tmp_path):
    reason = "<b>rock & \"roll\"</b> 'it' \x1b[31m ☃ ]]> &amp;"
    lines = log_lines()
    start = file_start(lines, "idle")
    noise = json.dumps({"dt": "2026-11-25T02:52:24.4", "lvl": "target",
                        "msg": "[ 12.3] BUG: <soft> lockup & \x1b[6n \x00 \"q\" ]]>"}) + "\n"
    log = "".join([*lines[:start + 2], noise, *lines[start + 2:]])
    (tmp_path / "log.log").write_text(log)
    out = tmp_path / "out"
    junit = tmp_path / "report" / "my junit.xml"
    assert main(["lava", "records", "--job", str(JOB), "--log", str(tmp_path / "log.log"),
                 "--out", str(out), "--thresholds",
                 str(thresholds_file(tmp_path, 100, reason=reason)),
                 "--junit", str(junit)]) == 1
    # the file named by --junit, nothing beside the default
    assert junit.is_file() and not list(out.glob("*.xml"))
    assert not list(junit.parent.glob(".*"))
    # both parsers take it: expat (the store's) and ElementTree
    read, = read_junit(junit)
    cases = cases_of(junit)
    tag, message = verdict_of(cases["qemu-imx6q/rt/cpu50/1000us"])
    assert tag == "failure"
    # XML 1.0 cannot hold an escape character: written as pytest writes it
    assert reason.replace("\x1b", "#x1B") in message
    assert {c.name: c.message for c in read.cases}["qemu-imx6q/rt/cpu50/1000us"] == message
    tag, message = verdict_of(cases["qemu-imx6q/rt/idle/1000us"])
    assert tag == "error" and "garbled at log line" in message
    shown = cases["qemu-imx6q/rt/idle/1000us"].find("system-out").text
    assert "BUG: <soft> lockup & #x1B[6n #x00 \"q\" ]]>" in shown


def test_junit_refuses_records_that_do_not_match_the_plan(tmp_path, capsys):
    # a folder for the report is refused before any record is written
    assert main(["lava", "records", "--job", str(JOB), "--log", str(LOG),
                 "--out", str(tmp_path / "out"), "--junit", str(tmp_path)]) == 2
    assert f"--junit {tmp_path}: is a folder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()

    plan = plan_of_job(JOB.read_text(), str(JOB))
    log = read_log(LOG.read_text(), str(LOG))
    job = records.LavaJob("42")
    limits = load_thresholds(thresholds_file(tmp_path), load_suite())
    judged = records.job_records(plan, log, job, limits)
    paths = records.write_records(tmp_path / "results", judged)
    with pytest.raises(ValueError, match="6 record\\(s\\) and 6 path\\(s\\) for the 7 case"):
        job_junit(plan, log, job, judged[:-1], paths[:-1])
    swapped = [judged[1], judged[0], *judged[2:]]
    with pytest.raises(ValueError, match="cpu50/1000us' stands where the plan has "
                                         "'qemu-imx6q/rt/idle/1000us'"):
        job_junit(plan, log, job, swapped, paths)
    # written whole or not at all: an unknown verdict leaves no file
    bad = [{**judged[0], "verdict": "maybe"}, *judged[1:]]
    with pytest.raises(ValueError, match="verdict 'maybe'"):
        write_junit(tmp_path / "j.xml", job_junit(plan, log, job, bad, paths))
    assert not (tmp_path / "j.xml").exists()


def test_the_figures_are_the_properties_tests_target_records():
    """A case with every kind of figure (p99.9, a tail bound, a CPU that never woke)
    against the labgrid path's JUnit of such a case (tests/data/junit/pytest-xunit1)."""
    record = {
        "load_check": {"cpu_utilisation": 0.991},
        # as rtlab.verdict.judge.judge_latency keeps them: by thread, the silent one among them
        "cpus": [
            {"cpu": 0, "thread": 0, "samples": 5000, "max_us": 61, "avg_us": 9.25,
             "percentiles_us": {"p99_9": 31}, "tail": {"bound_us": 57.26}},
            {"cpu": 1, "thread": 1, "samples": 5000, "max_us": 152, "avg_us": 11.5,
             "percentiles_us": {"p99_9": 48}, "tail": {"bound_us": "inf"}},
            {"cpu": 2, "thread": 2, "samples": 0, "max_us": None, "avg_us": None,
             "no_wakeup": True},
            {"cpu": 3, "thread": 3, "samples": 5000, "max_us": 900, "avg_us": 20.0,
             "percentiles_us": {"p99_9": ">=400"}, "tail": {"bound_us": None}}],
    }
    found = case_properties(record, Path("/out/results/x--1.json"))
    labgrid = next(case for case in ET.parse(XUNIT1).getroot().iter("testcase")
                   if case.get("name") == "imx6q/rt/cpu100/100us")
    expected = properties_of(labgrid)
    assert {name: value for name, value in found if not name.startswith("cpu3")
            and "tail" not in name and name != "result_record"} == expected
    # the order tests/target records them in: utilisation, silent CPUs, then per CPU
    assert [name for name, _ in found] == [
        "cpu_utilisation", "cpu2_samples", "cpu0_max_us", "cpu0_avg_us", "cpu0_p99_9_us",
        "cpu0_tail_bound_us", "cpu1_max_us", "cpu1_avg_us", "cpu1_p99_9_us",
        "cpu1_tail_bound_us", "cpu3_max_us", "cpu3_avg_us", "result_record"]
    assert dict(found)["cpu0_tail_bound_us"] == "57.3"
    assert dict(found)["cpu1_tail_bound_us"] == "inf"
    assert dict(found)["result_record"] == "/out/results/x--1.json"
    # the rt-tests: the gated threads' figures, or the inversions
    threads = case_properties({"threads": [
        {"thread": 0, "cpu": 0, "max_us": 41, "avg_us": 7.12, "gated": True},
        {"thread": 1, "cpu": None, "max_us": 999, "avg_us": 99.0, "gated": False}]},
        Path("r.json"))
    assert threads == [("thread0_max_us", "41"), ("thread0_avg_us", "7.12"),
                       ("result_record", "r.json")]
    assert case_properties({"functional": {"inversions": 120544}}, Path("r.json"))[0] == (
        "inversions", "120544")


def test_the_report_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    """Written beside and renamed over the old one: a runner killed before the rename
    leaves the previous report, complete, and no half-written one."""
    import rtlab.artifacts.record

    plan = plan_of_job(JOB.read_text(), str(JOB))
    log = read_log(LOG.read_text(), str(LOG))
    job = records.LavaJob("42")
    judged = records.job_records(plan, log, job,
                                 load_thresholds(thresholds_file(tmp_path), load_suite()))
    paths = records.write_records(tmp_path / "results", judged)
    report = tmp_path / "out" / "junit-lava-42.xml"
    write_junit(report, job_junit(plan, log, job, judged, paths))
    before = report.read_bytes()

    def killed(*_args):
        raise OSError("killed before the rename")

    monkeypatch.setattr(rtlab.artifacts.record.os, "replace", killed)
    again = job_junit(plan, log, job, judged, paths, label="other")
    with pytest.raises(OSError, match="killed"):
        write_junit(report, again)
    assert report.read_bytes() == before
    assert [p.name for p in report.parent.iterdir()] == [report.name]
