"""No secret on a command line (issue 45): a results database URL with a password reaches
the processes `rtlab run` starts through their environment. Every process's command line
(/proc/*/cmdline) is read while the suite's pytest and the places' runs of a shared plan
are alive, and their output too: the password is in none of them, and in the environment
of the process that needs it."""

import contextlib
import os
import subprocess
import threading
import time
from pathlib import Path

from rtlab.run import runner, sharing
from rtlab.run.pooling import Judging
from rtlab.run.runner import Selection, Sharing
from rtlab.store import URL_VARIABLE
from rtlab.util.variables import QUEUE_VARIABLE

PASSWORD = "s3cret-Pw-4711"
URL = f"postgresql://rtlab:{PASSWORD}@127.0.0.1:9/rtlab"


def command_lines_with(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in line:
            found.append(f"{proc.name}: {line[:200]}")
    return found


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").split("=", 1) for item in raw if b"=" in item)


def watch(until: threading.Event, seen: list[str]) -> None:
    while not until.is_set():
        seen += command_lines_with(PASSWORD)
        time.sleep(0.05)


def test_the_suite_gets_the_plan_and_baseline_urls_in_its_environment(monkeypatch, tmp_path):
    """`rtlab run --plan` without --queue, with $RTLAB_RESULTS_DB holding a password: the
    suite's pytest ran with `--rt-queue URL` before."""
    started = {}

    def run_pytest(cmd, env):
        out = tmp_path / "pytest.out"
        with out.open("w") as log:
            child = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=log,
                                     stderr=subprocess.STDOUT)
            try:
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline and child.poll() is None:
                    started.setdefault("seen", []).extend(command_lines_with(PASSWORD))
                    # it may end between poll() and the read (a zombie has no environ):
                    # the loop ends then, and the test fails on its absence
                    with contextlib.suppress(ProcessLookupError):
                        started.setdefault("environ", environ_of(child.pid))
                    time.sleep(0.05)
            finally:
                child.kill()
                child.wait()
        started["cmd"], started["output"] = cmd, out.read_text()
        return 2

    monkeypatch.setattr(runner, "_run_pytest", run_pytest)
    monkeypatch.setattr(runner.labgrid_client, "run", lambda *a, **k: "")
    monkeypatch.setattr(runner, "ensure_schedulable", lambda *a: None)
    monkeypatch.setattr(runner, "record_on_place", lambda *a: attr_state())
    monkeypatch.setenv(URL_VARIABLE, URL)
    selection = Selection(cases="idle/1000us", baseline=URL,
                          sharing=Sharing(queue=URL, plan="plan-1"))
    runner._run_reserved(place="imx6q-01", image=tmp_path / "sd.img",
                         env_file=tmp_path / "env.yaml", coordinator="127.0.0.1:9",
                         out_dir=tmp_path / "out", duration_s=10, label="imx6q-01",
                         selection=selection, kind="run", health=None)
    assert PASSWORD not in " ".join(started["cmd"])
    assert started["seen"] == []
    assert PASSWORD not in started["output"]
    # ... and where the suite reads it
    assert started["environ"][QUEUE_VARIABLE] == URL
    assert started["environ"][URL_VARIABLE] == URL
    assert "--rt-plan" in started["cmd"] and "--rt-queue" not in started["cmd"]


def attr_state():
    class State:
        healthy = True
    return State()


def test_the_places_runs_of_a_shared_plan_get_the_urls_in_their_environment(
        monkeypatch, tmp_path):
    """`rtlab run --boards 2` passed --queue and --baseline-db on each place's
    `rtlab run`. The places' runs start for real here (their coordinator answers nobody,
    so they end on their own)."""
    (tmp_path / "sd.img").write_bytes(b"")
    monkeypatch.setattr(sharing, "places_to_use", lambda *a: 2)
    monkeypatch.setattr(sharing, "write_leftovers", lambda *a, **k: [])
    spawned = []
    popen = subprocess.Popen

    def spawn(argv, **kwargs):
        child = popen(argv, **kwargs, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        spawned.append((child, kwargs["env"]))
        return child

    monkeypatch.setattr(sharing.subprocess, "Popen", spawn)
    seen: list[str] = []
    done = threading.Event()
    watcher = threading.Thread(target=watch, args=(done, seen))
    watcher.start()
    try:
        sharing.run_on_boards(
            ["run", "--board", "qemu-imx6q", "--image", str(tmp_path / "sd.img"),
             "--coordinator", "127.0.0.1:9", "--cases", "idle/1000us",
             "--reserve-timeout", "1"],
            board="qemu-imx6q", boards=2, coordinator="127.0.0.1:9",
            image=tmp_path / "sd.img", out_dir=tmp_path / "out", duration_s=10,
            judging=Judging(cap_s=10, baseline_url=URL), queue=URL, spread="shard")
    finally:
        done.set()
        watcher.join()
    assert len(spawned) == 2
    assert seen == []
    for child, env in spawned:
        assert PASSWORD not in " ".join(map(str, child.args))
        output = child.stdout.read().decode(errors="replace")
        assert PASSWORD not in output
        # the place's run got as far as the coordinator, with the URLs where it reads them
        assert "127.0.0.1:9" in output, output
        assert (env[QUEUE_VARIABLE], env[URL_VARIABLE]) == (URL, URL)
    assert os.environ.get(QUEUE_VARIABLE) is None  # the children's alone
