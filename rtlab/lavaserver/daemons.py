"""The programs of a LAVA instance (rtlab.lavaserver.instance), started and stopped
without systemd: PostgreSQL (pg_ctl), lava-server's gunicorn, lava-publisher and
lava-scheduler, and lava-worker, with the command lines of Debian's systemd units
(/lib/systemd/system/lava-*.service) and the instance's ports and folders.

Each runs in a session of its own (a stop takes its children too: gunicorn's workers,
a job's lava-run and QEMU) and is recorded in a pid file; ``start`` and ``stop`` are
idempotent, and ``stop`` leaves nothing of the instance running.
"""

import contextlib
import glob
import os
import signal
import socket
import subprocess
import time
import xmlrpc.client
from collections.abc import Callable
from pathlib import Path

import attr

from rtlab.lavaserver.instance import (
    LOOPBACK,
    SYSTEM_USER,
    Instance,
    LavaInstanceError,
    check_set_up,
    run_as_system_user,
)

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
# gunicorn's workers (the unit's default is 4; this machine has 2 cores)
HTTP_WORKERS = 2


def postgres_bin(name: str) -> str:
    """A PostgreSQL server program (Debian keeps them out of PATH, per version)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                   key=lambda p: int(Path(p).parts[4]) if Path(p).parts[4].isdigit() else 0)
    if not found:
        raise LavaInstanceError(f"PostgreSQL's {name} is missing (Debian's postgresql: "
                                "scripts/bootstrap.sh packages)")
    return found[-1]


# ------------------------------------------------------------------------ PostgreSQL ----

def database_running(instance: Instance) -> bool:
    if not (instance.database_dir / "PG_VERSION").exists():
        return False
    proc = run_as_system_user([postgres_bin("pg_ctl"), "status", "-D",
                               str(instance.database_dir)], timeout=30)
    return proc.returncode == 0


def start_database(instance: Instance) -> bool:
    """Start the instance's cluster; False when it ran already."""
    if database_running(instance):
        return False
    log = instance.log_dir / "postgresql.log"
    # pg_ctl leaves the server in pg_ctl's session: a session of its own keeps it out of
    # the caller's terminal signals
    try:
        proc = subprocess.run(
            [postgres_bin("pg_ctl"), "start", "-w", "-t", "60", "-D", str(instance.database_dir),
             "-l", str(log)], user=SYSTEM_USER, group=SYSTEM_USER, extra_groups=[], cwd="/",
            capture_output=True, text=True, check=False, timeout=90, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise LavaInstanceError(f"PostgreSQL did not start within 90 s: {_tail(log)}") from None
    if proc.returncode != 0:
        raise LavaInstanceError(f"PostgreSQL of {instance.folder} did not start: "
                                f"{proc.stderr.strip()} | {_tail(log)}")
    return True


def stop_database(instance: Instance) -> bool:
    if not database_running(instance):
        return False
    proc = run_as_system_user([postgres_bin("pg_ctl"), "stop", "-w", "-m", "fast", "-D",
                               str(instance.database_dir)], timeout=60)
    if proc.returncode != 0:
        raise LavaInstanceError(f"PostgreSQL did not stop: {proc.stderr.strip()}")
    return True


# ------------------------------------------------------------------- the programs ----

@attr.frozen
class Program:
    name: str
    argv: tuple[str, ...]
    ready: Callable[[Instance], bool]
    """Whether it serves yet."""
    server_settings: bool = True
    """It is a lava-server program (the instance's settings in its environment)."""


def _listens(port: int) -> Callable[[Instance], bool]:
    def check(instance: Instance) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.settimeout(1)
            return probe.connect_ex((LOOPBACK, port)) == 0
    return check


def _api_answers(instance: Instance) -> bool:
    try:
        return bool(api(instance).system.version())
    except (OSError, xmlrpc.client.Error):
        return False


def _scheduler_looping(instance: Instance) -> bool:
    return "[INIT] Starting main loop" in _tail(instance.log_dir / "lava-scheduler.log", 50)


def worker_state(instance: Instance) -> str | None:
    """The worker's state as the server sees it (Online, Offline), None: no answer."""
    try:
        return str(api(instance).scheduler.workers.show(instance.config.worker)["state"])
    except (OSError, xmlrpc.client.Error, KeyError, TypeError):
        return None


def _worker_online(instance: Instance) -> bool:
    return worker_state(instance) == "Online"


def api(instance: Instance) -> xmlrpc.client.ServerProxy:
    """lava-server's XML-RPC API, anonymously (what anyone on the machine may read)."""
    return xmlrpc.client.ServerProxy(f"{instance.config.url}/RPC2", allow_none=True)


def programs(instance: Instance) -> list[Program]:
    """In the order they start (each needs the ones before it)."""
    config, log = instance.config, instance.log_dir
    return [
        Program("gunicorn", (
            "gunicorn3", "lava_server.wsgi", "--log-level", "INFO",
            "--log-file", str(log / "gunicorn.log"), "-u", SYSTEM_USER, "-g", SYSTEM_USER,
            "--worker-class", "eventlet", "--workers", str(HTTP_WORKERS),
            "--bind", f"{LOOPBACK}:{config.http_port}"), _api_answers),
        Program("lava-publisher", (
            "lava-server", "manage", "lava-publisher", "--level", "INFO",
            "--log-file", str(log / "lava-publisher.log"), "--host", LOOPBACK,
            "--port", str(config.publisher_port)), _listens(config.publisher_port)),
        Program("lava-scheduler", (
            "lava-server", "manage", "lava-scheduler", "--level", "INFO",
            "--log-file", str(log / "lava-scheduler.log"),
            "--event-url", f"tcp://{LOOPBACK}:{config.event_port}"), _scheduler_looping),
        Program("lava-worker", (
            "lava-worker", "--name", config.worker, "--url", config.url,
            "--ws-url", f"http://{LOOPBACK}:{config.publisher_port}/ws/",
            "--token-file", str(instance.worker_token_file),
            "--worker-dir", str(instance.worker_dir),
            "--log-file", str(log / "lava-worker.log"), "--level", "INFO",
            "--ping-interval", str(config.ping_interval)), _worker_online,
            server_settings=False),
    ]


def _pid_file(instance: Instance, name: str) -> Path:
    return instance.pid_dir / f"{name}.pid"


def running_pid(instance: Instance, name: str) -> int | None:
    try:
        pid = int(_pid_file(instance, name).read_text())
    except (OSError, ValueError):
        return None
    return pid if _group_alive(pid) else None


def _group_alive(pgid: int) -> bool:
    # a child of ours that ended is a zombie until reaped, and counts for killpg
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pgid, os.WNOHANG)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def start(instance: Instance, progress: Callable[[str], None] = lambda _: None) -> None:
    """Start the database and every program that is not running; return once the worker
    is online. Raises with the program's log when one fails."""
    check_set_up(instance)
    if start_database(instance):
        progress("PostgreSQL started")
    for program in programs(instance):
        if running_pid(instance, program.name) is not None:
            continue
        log = instance.log_dir / f"{program.name}.out"
        env = instance.environment() if program.server_settings else _plain_environment()
        with log.open("ab") as out:
            child = subprocess.Popen(list(program.argv), stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, env=env, cwd="/",
                                     start_new_session=True)
        _pid_file(instance, program.name).write_text(str(child.pid))
        began = time.monotonic()
        while not program.ready(instance):
            if child.poll() is not None or time.monotonic() - began > START_TIMEOUT_S:
                stop(instance)
                why = (f"exited {child.returncode}" if child.returncode is not None
                       else f"not ready after {START_TIMEOUT_S:.0f} s")
                raise LavaInstanceError(f"{program.name} {why}: {_tail(log)}")
            time.sleep(0.2)
        progress(f"{program.name} ready in {time.monotonic() - began:.1f} s")


def _plain_environment() -> dict[str, str]:
    # the worker passes lava-run the server's environment (/etc/lava-server/env.yaml),
    # not its own; it needs no settings, and no secret of the server's
    return {key: value for key, value in os.environ.items()
            if not key.startswith(("LAVA_", "RTLAB_LAVA_"))}


def stop(instance: Instance) -> list[str]:
    """Stop everything of the instance; the names of what was running. Raises when
    something survives SIGKILL."""
    stopped = []
    # a job's lava-run (and its QEMU) runs in a process group of its own, which the
    # worker would leave running (its unit says KillMode=process): SIGTERM is a cancel to
    # lava-run, which ends QEMU; first, while the worker and server may still hear of it
    jobs = job_processes(instance)
    _stop_groups(jobs)
    stopped += [f"lava-run {pid}" for pid in jobs]
    # the others at once: the publisher alone takes 5 s to drain its queue
    running = {program.name: running_pid(instance, program.name)
               for program in reversed(programs(instance))}
    _stop_groups([pid for pid in running.values() if pid is not None])
    for name, pid in running.items():
        if pid is not None:
            stopped.append(name)
        _pid_file(instance, name).unlink(missing_ok=True)
    if stop_database(instance):
        stopped.append("postgresql")
    return stopped


def job_processes(instance: Instance) -> list[int]:
    """Process groups of the jobs the instance's worker started (lava-run --output-dir
    under its folder)."""
    marker = f"--output-dir={instance.worker_dir}/".encode()
    groups = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if any(arg.startswith(marker) for arg in argv):
                groups.add(os.getpgid(int(entry.name)))
        except (OSError, ProcessLookupError):
            continue
    return sorted(groups)


def _stop_groups(groups: list[int]) -> None:
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and any(map(_group_alive, groups)):
        time.sleep(0.2)
    left = [pgid for pgid in groups if _group_alive(pgid)]
    for pgid in left:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    if left:
        time.sleep(0.5)
    survived = [pgid for pgid in left if _group_alive(pgid)]
    if survived:
        raise LavaInstanceError(f"process group(s) {survived} survived SIGKILL")


def status(instance: Instance) -> dict[str, object]:
    """What runs, and how the server sees its worker and devices."""
    current: dict[str, object] = {
        "url": instance.config.url, "folder": str(instance.folder),
        "postgresql": database_running(instance),
        **{p.name: running_pid(instance, p.name) for p in programs(instance)},
    }
    if current["gunicorn"] is not None:
        current["worker_state"] = worker_state(instance)
        try:
            current["devices"] = {d["hostname"]: f"{d['state']}, {d['health']}"
                                  for d in api(instance).scheduler.devices.list(True)}
        except (OSError, xmlrpc.client.Error) as error:
            current["devices"] = f"no answer: {error}"
    return current


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
