"""``rtlab vlab start|stop|status``: run the virtual rack as a background process group
and make sure nothing of it outlives ``stop``."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import requests

from rtlab.vlab import ports
from rtlab.vlab.config import VlabConfig

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0


class VlabError(RuntimeError):
    pass


def _pid_file(state_dir: Path) -> Path:
    return state_dir / "vlab.pid"


def running_pid(state_dir: Path) -> int | None:
    try:
        pid = int(_pid_file(state_dir).read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def status(config: VlabConfig) -> dict[str, object] | None:
    try:
        return requests.get(f"{config.api_url}/status", timeout=5).json()
    except requests.RequestException:
        return None


def _api(config: VlabConfig, method: str, path: str, **kwargs: object) -> object:
    try:
        reply = requests.request(method, f"{config.api_url}{path}", timeout=10, **kwargs)
    except requests.RequestException as error:
        raise VlabError(f"virtual rack at {config.api_url} does not answer "
                        f"(rtlab vlab start?): {error}") from error
    if reply.status_code != 200:
        raise VlabError(f"virtual rack refused {method} {path}: {reply.text.strip()}")
    return reply.json()


def inject_fault(config: VlabConfig, place: str, kind: str, *, times: int = 1,
                 seconds: float | None = None, after_s: float | None = None,
                 code: int | None = None, on_console: str | None = None) -> dict[str, object]:
    """Arm a fault on a board of the running rack (see rtlab.vlab.faults.FAULT_KINDS);
    with ``on_console``, ``after_s`` counts from when the board's console shows that
    text instead of from power-on."""
    config.board(place)  # an unknown place is refused with the valid ones
    params: dict[str, object] = {"times": times}
    for name, value in (("seconds", seconds), ("after_s", after_s), ("code", code),
                        ("on_console", on_console)):
        if value is not None:
            params[name] = value
    return _api(config, "PUT", f"/faults/{place}/{kind}", json=params)  # type: ignore[return-value]


def clear_faults(config: VlabConfig, place: str | None = None, kind: str | None = None) -> None:
    places = [place] if place else [board.place for board in config.boards]
    for name in places:
        config.board(name)
        _api(config, "DELETE", f"/faults/{name}" + (f"/{kind}" if kind else ""))


def armed_faults(config: VlabConfig) -> dict[str, list[dict[str, object]]]:
    return _api(config, "GET", "/faults")  # type: ignore[return-value]


def start(config: VlabConfig, state_dir: Path) -> dict[str, object]:
    state_dir.mkdir(parents=True, exist_ok=True)
    pid = running_pid(state_dir)
    if pid is not None:
        current = status(config)
        if current is not None and _ready(current, pid):
            return current
        raise VlabError(f"virtual rack process {pid} runs but is not ready"
                        + _foreign(current, pid))
    try:
        ports.check_free(config)
    except ports.PortTaken as error:
        raise VlabError(str(error)) from None
    log = state_dir / "vlab.log"
    with log.open("ab") as out:
        # its own session, so that stop can take down QEMU, coordinator and exporter
        # together even if the server itself hangs
        proc = subprocess.Popen(
            [sys.executable, "-m", "rtlab.cli", "vlab", "serve", "--config",
             os.fspath(config.path)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _pid_file(state_dir).write_text(str(proc.pid))
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _pid_file(state_dir).unlink(missing_ok=True)
            raise VlabError(
                f"virtual rack exited with {proc.returncode} while starting:\n"
                + _tail(log)
            )
        current = status(config)
        if current is not None and _ready(current, proc.pid):
            return current
        time.sleep(0.5)
    stop(state_dir)
    raise VlabError(f"virtual rack not ready after {START_TIMEOUT_S:.0f} s:\n" + _tail(log))


def _ready(current: dict[str, object], pid: int) -> bool:
    """Ready, and ours: another rack on the API port answers /status too."""
    return bool(current.get("ready")) and current.get("pid") == pid


def _foreign(current: dict[str, object] | None, pid: int) -> str:
    if current is not None and current.get("pid") != pid:
        return f" (the API port is answered by another rack, pid {current.get('pid')})"
    return ""


def stop(state_dir: Path) -> bool:
    """Stop the rack; True if one was running. Raises if anything survives."""
    pid = running_pid(state_dir)
    if pid is None:
        _pid_file(state_dir).unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and _group_alive(pid):
        time.sleep(0.2)
    if _group_alive(pid):
        os.killpg(pid, signal.SIGKILL)
        time.sleep(0.5)
    _pid_file(state_dir).unlink(missing_ok=True)
    if _group_alive(pid):
        raise VlabError(f"processes of the virtual rack (group {pid}) survived SIGKILL")
    return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    # zombies of our own children still count for killpg; reap the server if it is ours
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pgid, os.WNOHANG)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def format_status(current: dict[str, object] | None) -> str:
    if current is None:
        return "virtual rack: not running"
    return json.dumps(current, indent=2)


@contextlib.contextmanager
def running(progress: Callable[[str], None] = print) -> Iterator[None]:
    """The repository's virtual rack for the block: started when it is not running, and
    stopped again afterwards (a rack someone else started is left as it was)."""
    from rtlab.util import paths
    from rtlab.vlab.config import load_config

    state = paths.vlab_state_dir()
    started = running_pid(state) is None
    if started:
        progress("starting the virtual rack")
        start(load_config(paths.default_vlab_config()), state)
    try:
        yield
    finally:
        if started:
            progress("stopping the virtual rack")
            stop(state)
