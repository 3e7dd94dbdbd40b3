"""rtlab lava server (the LAVA instance on loopback) and the LAVA client's answers to a
server's faults, without a server: the configuration file, the settings and command
lines the instance's programs get, the token's file, a refused token, a job still queued,
and a job that lava-server ended before any device took it. The real server is
tests/integration/test_lava_server.py."""

import base64
import json
import stat
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from rtlab.artifacts.record import read_record
from rtlab.lava import render, server
from rtlab.lava.validate import validate
from rtlab.lavaserver import daemons
from rtlab.lavaserver.instance import (
    LOOPBACK,
    Instance,
    LavaInstanceError,
    check_set_up,
    load_instance_config,
    wanted_stamp,
    write_private,
)
from rtlab.util.paths import REPO_ROOT
from rtlab.util.yamlfile import YamlFileError
from tests.unit.test_lava import JOB, plan_for, qemu_source

CONFIG = REPO_ROOT / "env" / "lava-server.yaml"


def instance(tmp_path, text=None):
    path = CONFIG
    if text is not None:
        path = tmp_path / "lava-server.yaml"
        path.write_text(text)
    made = Instance(load_instance_config(path), tmp_path / "instance")
    made.folder.mkdir()
    made.make_secret_key()
    return made


def test_the_repositorys_instance_has_both_virtual_boards_tagged(tmp_path):
    config = load_instance_config(CONFIG)
    assert {d.name: d.tags for d in config.devices} == {
        "qemu-imx6q-01": ("qemu-imx6q",), "qemu-rpi3-01": ("qemu-rpi3",)}
    assert config.url == f"http://{LOOPBACK}:{config.http_port}"


@pytest.mark.parametrize(("change", "problem"), [
    (("http_port: 8000", "http_port: 80"), r":\d+: http_port: a port from 1024"),
    (("event_port: 5500", "event_port: 8001"), r":\d+: the three ports must differ"),
    (("worker: rtlab-worker", "worker: rtlab worker"), r":\d+: worker: a name"),
    (("ping_interval: 20", "ping_interval: 0"), r":\d+: ping_interval: seconds"),
    (("    tags: [qemu-rpi3]", "    tag: [qemu-rpi3]"), r":\d+: device qemu-rpi3-01: unknown"),
    (("user: rtlab", "user: rtlab\nusers: [x]"), r":\d+: unknown key 'users'"),
])
def test_a_bad_instance_file_is_refused_with_its_line(tmp_path, change, problem):
    text = CONFIG.read_text()
    assert change[0] in text
    path = tmp_path / "lava-server.yaml"
    path.write_text(text.replace(change[0], change[1]))
    with pytest.raises(YamlFileError, match=problem):
        load_instance_config(path)


def test_the_instance_listens_on_loopback_and_keeps_its_settings_to_itself(tmp_path,
                                                                         monkeypatch):
    lab = instance(tmp_path)
    monkeypatch.setenv("DATABASE_URL", "postgres://system@localhost/lava")
    monkeypatch.setenv("LAVA_SETTINGS_MEDIA_ROOT", "/var/lib/elsewhere")
    env = lab.environment()
    # lava-server would take these over the instance's own settings
    assert "DATABASE_URL" not in env and "LAVA_SETTINGS_MEDIA_ROOT" not in env
    settings = json.loads(base64.b64decode(env["LAVA_JSON_SETTINGS"]))
    database = settings["DATABASES"]["default"]
    # the database: a unix socket in the instance, no host, no password
    assert database["HOST"] == str(lab.socket_dir) and database["PASSWORD"] == ""
    assert settings["MEDIA_ROOT"].startswith(str(lab.folder))
    assert settings["DEVICES_PATH"] == str(lab.devices_dir)
    assert settings["SECRET_KEY"] == lab.secret_key_file.read_text().strip()
    assert stat.S_IMODE(lab.secret_key_file.stat().st_mode) == 0o600
    assert settings["EVENT_SOCKET"] == f"tcp://{LOOPBACK}:{lab.config.event_port}"
    # every program that listens binds loopback
    argv = {p.name: p.argv for p in daemons.programs(lab)}
    assert argv["gunicorn"][argv["gunicorn"].index("--bind") + 1] == (
        f"{LOOPBACK}:{lab.config.http_port}")
    assert argv["lava-publisher"][argv["lava-publisher"].index("--host") + 1] == LOOPBACK
    worker = argv["lava-worker"]
    assert worker[worker.index("--url") + 1] == lab.config.url
    assert worker[worker.index("--token-file") + 1] == str(lab.worker_token_file)
    # the worker gets no setting (no secret) of the server's
    assert not [p.name for p in daemons.programs(lab)
                if p.name == "lava-worker" and p.server_settings]


def test_an_instance_is_set_up_once_and_again_after_an_upgrade(tmp_path, monkeypatch):
    lab = instance(tmp_path)
    with pytest.raises(LavaInstanceError, match="not set up: rtlab lava server setup"):
        check_set_up(lab)
    monkeypatch.setattr("rtlab.lavaserver.instance.installed_version",
                        lambda package="": "2023.01-2")
    lab.setup_stamp.write_text(json.dumps(wanted_stamp(lab)))
    check_set_up(lab)
    monkeypatch.setattr("rtlab.lavaserver.instance.installed_version",
                        lambda package="": "2024.05-1")
    with pytest.raises(LavaInstanceError, match="set up for another lava_server"):
        check_set_up(lab)


def test_a_socket_path_too_long_for_unix_is_refused(tmp_path):
    config = load_instance_config(CONFIG)
    with pytest.raises(LavaInstanceError, match="too long for a unix socket"):
        Instance(config, tmp_path / ("x" * 90)).check_paths()


def test_private_files_are_never_readable_by_others(tmp_path):
    token = tmp_path / "sub" / "t.token"
    write_private(token, "s3cret")
    assert token.read_text() == "s3cret\n"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600


# ----------------------------------------------------------------- the client ----

def test_the_token_may_come_from_a_file(tmp_path):
    token = tmp_path / "rtlab.token"
    token.write_text("s3cret\n")
    env = {server.URL_VARIABLE: "http://127.0.0.1:8000", server.USER_VARIABLE: "rtlab",
           server.TOKEN_FILE_VARIABLE: str(token)}
    lab = server.Server.from_environment(env)
    assert (lab.user, lab.token) == ("rtlab", "s3cret") and "s3cret" not in repr(lab)
    with pytest.raises(ValueError, match="not both"):
        server.Server.from_environment({**env, server.TOKEN_VARIABLE: "other"})
    with pytest.raises(ValueError, match="cannot read the token"):
        server.Server.from_environment({**env, server.TOKEN_FILE_VARIABLE: str(tmp_path / "no")})
    token.write_text("\n")
    with pytest.raises(ValueError, match="the file is empty"):
        server.Server.from_environment(env)


def fake_lavacli(monkeypatch, answers):
    """subprocess.run of lavacli answering by its arguments: (exit status, output)."""
    calls = []

    def run(argv, env, **kwargs):
        args = tuple(argv[3:])
        calls.append(args)
        code, said = next(a for key, a in answers.items() if args[:len(key)] == key)
        return subprocess.CompletedProcess(argv, code, said if code == 0 else "",
                                           "" if code == 0 else said)

    monkeypatch.setattr(server.subprocess, "run", run)
    return calls


def test_a_refused_token_is_one_line_naming_the_user(monkeypatch):
    lab = server.Server("http://127.0.0.1:8000/RPC2", "rtlab", "s3cret")
    fake_lavacli(monkeypatch, {("jobs",): (1, "Traceback …\nUnable to connect: 401 Client "
                                            "Error: Unauthorized for url: "
                                            "http://rtlab:s3cret@127.0.0.1:8000/RPC2")})
    with pytest.raises(server.LavaAuthError) as refused:
        lab.submit(Path("job.yaml"))
    said = str(refused.value)
    assert said.startswith("LAVA server 127.0.0.1:8000 refused the token of user rtlab")
    assert "401 Client Error" in said and "s3cret" not in said and "Traceback" not in said


def test_a_job_still_queued_after_the_wait_says_so(monkeypatch):
    lab = server.Server("http://127.0.0.1:8000/RPC2", "rtlab", "s3cret")
    calls = fake_lavacli(monkeypatch, {
        ("jobs", "wait"): (1, "Submitted.......timeout!"),
        ("jobs", "show"): (0, json.dumps({"state": "Submitted"}))})
    with pytest.raises(server.LavaServerError, match="job 7 on 127.0.0.1:8000 is still "
                                                     "Submitted after 30 s .*no device"):
        server.fetch(lab, "7", wait_s=30, poll_s=2)
    assert calls[0] == ("jobs", "wait", "7", "--timeout", "30", "--polling", "2")


def test_a_job_lava_canceled_in_the_queue_is_an_error_for_every_case(tmp_path, monkeypatch):
    """What lava-server answers for a job no device took within its queue timeout (a
    device gone offline): no device, no log; rtlab says why, with LAVA's error type."""
    from rtlab.cli import main

    definition = JOB.read_text().replace("timeouts:\n", "timeouts:\n  queue: {seconds: 5}\n",
                                         1)
    details = {"id": 12, "state": "Finished", "health": "Canceled", "device": None,
               "device_type": "qemu", "submit_time": "20261125T18:57:58",
               "start_time": "20261125T18:58:18", "end_time": "20261125T18:58:18",
               "failure_comment": None}
    fake_lavacli(monkeypatch, {("jobs", "show"): (0, json.dumps(details)),
                               ("jobs", "definition"): (0, definition),
                               ("jobs", "logs"): (0, "")})
    monkeypatch.setenv(server.URL_VARIABLE, "http://127.0.0.1:8000")
    monkeypatch.setenv(server.USER_VARIABLE, "rtlab")
    monkeypatch.setenv(server.TOKEN_VARIABLE, "s3cret")
    out = tmp_path / "out"
    assert main(["lava", "fetch", "12", "--out", str(out)]) == 1
    records = [read_record(p) for p in (out / "results").glob("*.json")]
    assert len(records) == 7
    for record in records:
        assert record["verdict"] == "error"
        assert record["lava"]["error_type"] == "Canceled"
        assert record["message"] == (
            "the job never got to this case: LAVA canceled the job before it started "
            "(Canceled error: no device of type qemu that it may run on was free within "
            "its queue timeout of 5 s; it waited 20 s)")
    # canceled by a person instead, before its queue timeout
    assert "canceled while it waited" in server.never_started(
        {**details, "end_time": "20261125T18:58:00"}, definition)
    # a job that ran is not one that never started
    assert server.never_started({**details, "device": "qemu-07"}, definition) is None


# ----------------------------------------------------------------- rendering ----

def test_tags_and_short_timeouts_render_as_lava_takes_them(tmp_path):
    text = render.render_job(plan_for(), qemu_source(), tags=["qemu-imx6q"],
                             job_timeout_s=45, queue_timeout_s=30)
    job = YAML(typ="safe").load(text)
    assert job["tags"] == ["qemu-imx6q"]
    assert job["timeouts"]["job"] == {"seconds": 45}
    assert job["timeouts"]["queue"] == {"seconds": 30}
    # nothing may outlast the job, or LAVA refuses it
    assert job["timeouts"]["action"] == {"seconds": 45}
    assert all(action[next(iter(action))]["timeout"] == {"seconds": 45}
               for action in job["actions"])
    path = tmp_path / "job.yaml"
    path.write_text(text)
    passed, problems = validate([path])
    assert problems == [] and passed
    plain = YAML(typ="safe").load(render.render_job(plan_for(), qemu_source()))
    assert "tags" not in plain and "queue" not in plain["timeouts"]
    assert plain["timeouts"]["job"] == {"minutes": render.timeouts_for(plan_for()).job}
    with pytest.raises(ValueError, match="queue timeout must be at least 1 s"):
        render.render_job(plan_for(), qemu_source(), queue_timeout_s=0)
