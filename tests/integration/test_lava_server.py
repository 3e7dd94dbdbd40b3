"""A real LAVA server on this machine (rtlab lava server: lava-server 2023.01, its scheduler
and publisher, one lava-worker with the virtual boards as `qemu` devices): a job for the
virtual i.MX6Q submitted with `rtlab lava submit`, scheduled, run by the worker's lava-run,
and read back through the server's API with `rtlab lava fetch` into records and JUnit;
then the faults a lab meets every day (a refused token, a device gone offline while the
job waits, a job cancelled while it runs, a job that times out), each an `error` with
LAVA's error type.

The instance is the project's own (scripts/bootstrap.sh lava-server sets it up); it is
started here and stopped at the end unless it ran before."""

import json
import os
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rtlab.artifacts.record import read_record
from rtlab.cli import main
from rtlab.lava.joblog import read_log
from rtlab.lava.server import Server
from rtlab.lavaserver import daemons, provision
from rtlab.lavaserver.instance import Instance, installed_version

pytestmark = pytest.mark.lava

BOARD = "qemu-imx6q"
DEVICE = "qemu-imx6q-01"


@pytest.fixture(scope="module")
def lava_server():
    if os.geteuid() != 0:
        pytest.skip("the LAVA instance runs as root (its worker runs lava-run)")
    if installed_version() is None:
        pytest.fail("lava-server is missing: scripts/bootstrap.sh lava-server installs it")
    instance = Instance.default()
    provision.setup(instance)
    was_running = daemons.running_pid(instance, "gunicorn") is not None
    daemons.start(instance)
    # a device left offline by an interrupted run of this module would keep every job
    # queued
    for device in instance.config.devices:
        instance.manage("devices", "update", device.name, "--health", "GOOD")
    yield instance
    if not was_running:
        assert "lava-worker" in daemons.stop(instance)
        assert daemons.job_processes(instance) == []
        assert daemons.status(instance)["postgresql"] is False


@pytest.fixture
def client(lava_server, monkeypatch):
    """rtlab's own environment for the instance: URL, user, the token's file."""
    for name, value in lava_server.client_environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("RTLAB_LAVA_TOKEN", raising=False)
    return Server.from_environment()


def render(image, out: Path, *extra: str, duration: int = 3,
           scenarios: str = "idle,cpu100") -> Path:
    image("imx6q", "rt")
    assert main(["lava", "render", "--board", BOARD, "--flavour", "rt",
                 "--scenarios", scenarios, "--intervals", "1000", "--rt-tests", "none",
                 "--duration", str(duration), "--tags", BOARD, "--out", str(out),
                 *extra]) == 0
    return out


def submit(job: Path, capsys) -> str:
    capsys.readouterr()
    assert main(["lava", "submit", str(job)]) == 0
    printed = capsys.readouterr().out
    found = re.search(r": job (\d+) http://127\.0\.0\.1:\d+/scheduler/job/\1$", printed.strip())
    assert found, printed
    return found.group(1)


def records_of(out: Path) -> dict[str, dict]:
    return {r["scenario"]: r for r in map(read_record, (out / "results").glob("*.json"))}


# in make test FULL=1: the same job through lava-run (test_lava_local) stays in make test;
# make test's minutes went to the bisection (tests/integration/test_bisect_rack.py)
@pytest.mark.full
def test_a_job_submitted_to_the_server_comes_back_as_judged_records(lava_server, client,
                                                                    image, tmp_path,
                                                                    capsys):
    job = render(image, tmp_path / "job.yaml")
    job_id = submit(job, capsys)
    out = tmp_path / "out"
    code = main(["lava", "fetch", job_id, "--wait", "600", "--poll", "2", "--out", str(out)])

    details = client.show(job_id)
    assert (details["state"], details["health"], details["device"]) == (
        "Finished", "Complete", DEVICE), details
    # what the server's API handed out, kept beside the records
    folder = out / f"job-{job_id}"
    # (lavacli prints it with a newline of its own)
    assert (folder / "definition.yaml").read_text().rstrip() == job.read_text().rstrip()
    log = read_log((folder / "log.yaml").read_text(), "log.yaml")
    assert log.complete and log.unreadable == ()
    records = records_of(out)
    assert set(records) == {"idle", "cpu100"}
    for record in records.values():
        # judged by the gate (emulated figures may pass or fail it), never an error
        assert record["verdict"] in ("pass", "fail"), record["message"]
        assert record["place"] == DEVICE
        assert record["run_id"] == f"lava:127.0.0.1:{lava_server.config.http_port}:{job_id}"
        assert record["lava"]["health"] == "Complete" and record["lava"]["error_type"] is None
        assert record["lava"]["test_case"]["result"] == "pass"
        assert record["system"]["realtime"] is True
        assert len(record["cpus"]) == 4 and all(c["samples"] > 0 for c in record["cpus"])
    assert records["cpu100"]["load_check"]["loads"]["cpu"]["percent"] == 100
    assert code == (0 if all(r["verdict"] == "pass" for r in records.values()) else 1)

    suite = ET.parse(out / f"junit-lava-{job_id}.xml").getroot().find("testsuite")
    assert (suite.get("name"), suite.get("tests")) == (f"lava-{job_id}", "2")
    facts = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert facts["TARGET_MAIN_REMOTE"] == DEVICE
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == {r["name"] for r in records.values()}
    for record in records.values():
        shown = cases[record["name"]].find("system-out").text
        assert f"rtlab-lava:case-start {record['scenario']}-1000us" in shown


@pytest.mark.full
def test_faults_of_the_server_are_errors_with_lavas_error_type(lava_server, client, image,
                                                              tmp_path, capsys,
                                                              monkeypatch):
    # a token the server refuses: one clear line, no job, no records
    monkeypatch.setenv("RTLAB_LAVA_TOKEN_FILE", str(tmp_path / "wrong.token"))
    (tmp_path / "wrong.token").write_text("not-the-token\n")
    job = render(image, tmp_path / "short.yaml", "--queue-timeout", "5", scenarios="idle")
    capsys.readouterr()
    assert main(["lava", "submit", str(job)]) == 2
    said = capsys.readouterr().err
    assert "refused the token of user rtlab" in said and "not-the-token" not in said
    monkeypatch.setenv("RTLAB_LAVA_TOKEN_FILE", str(lava_server.token_file))

    # the device goes offline while the job waits for it: LAVA cancels it at its queue
    # timeout, and every case is an error that says so
    lava_server.manage("devices", "update", DEVICE, "--health", "MAINTENANCE")
    try:
        job_id = submit(job, capsys)
        assert client.show(job_id)["state"] == "Submitted"
        out = tmp_path / "offline"
        assert main(["lava", "fetch", job_id, "--wait", "120", "--poll", "2",
                     "--out", str(out)]) == 1
    finally:
        lava_server.manage("devices", "update", DEVICE, "--health", "GOOD")
    [record] = records_of(out).values()
    assert record["verdict"] == "error"
    assert record["lava"]["error_type"] == "Canceled" and record["lava"]["device"] is None
    assert "queue timeout of 5 s" in record["message"], record["message"]

    # a job cancelled while it measures (the server has its log every 5 s): the case it
    # did not finish is an error, with LAVA's error type Canceled
    job = render(image, tmp_path / "long.yaml", duration=120, scenarios="idle")
    job_id = submit(job, capsys)
    deadline = time.monotonic() + 180
    while "rtlab-lava:case-start idle-1000us" not in client.log(job_id):
        assert time.monotonic() < deadline, "the job's case did not start"
        time.sleep(2)
    client.lavacli("jobs", "cancel", job_id)
    out = tmp_path / "cancelled"
    assert main(["lava", "fetch", job_id, "--wait", "300", "--poll", "2",
                 "--out", str(out)]) == 1
    assert client.show(job_id)["health"] == "Canceled"
    [record] = records_of(out).values()
    assert record["verdict"] == "error", record
    assert record["lava"]["error_type"] == "Canceled", record["lava"]
    assert record["message"].startswith("the case did not finish on the board"), record
    assert "Canceled" in record["message"]
    junit = ET.parse(out / f"junit-lava-{job_id}.xml").getroot()
    assert [e.tag for e in junit.iter() if e.tag in ("error", "failure")] == ["error"]

    # a job that outlasts its limit: LAVA stops its test shell, a Test error
    job = render(image, tmp_path / "slow.yaml", "--job-timeout", "25", duration=30,
                 scenarios="idle")
    job_id = submit(job, capsys)
    out = tmp_path / "timed-out"
    assert main(["lava", "fetch", job_id, "--wait", "300", "--poll", "2",
                 "--out", str(out)]) == 1
    [record] = records_of(out).values()
    assert record["verdict"] == "error" and record["lava"]["health"] == "Incomplete"
    assert record["lava"]["error_type"] == "Test", record["lava"]
    assert "timed out" in record["message"], record["message"]
    # nothing of the job is left running on the worker
    assert daemons.job_processes(lava_server) == []
    assert json.loads(json.dumps(daemons.status(lava_server)))["devices"][DEVICE].startswith(
        "Idle")
