"""A QEMU job run on this machine by Debian's lava-run (lava-dispatcher), without a LAVA
server: the device dictionary a server would hand its worker comes from
jobs/devices/qemu.yaml.j2 and the job's own context, and lava-run's log (its standard error)
is the job's log.

lava-run exits 0 or 1 by whether LAVA finished the job, never by its test results; the
records judge the rest.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import attr
from ruamel.yaml import YAML

from rtlab.lava import templates

LAVA_RUN = "lava-run"
LOG = "lava-job.log"


@attr.frozen
class LocalRun:
    job_id: str
    log: Path
    exit_code: int
    seconds: float


def device_dictionary(job: dict) -> str:
    """The device dictionary for a QEMU job, from its context."""
    if job.get("device_type") != "qemu":
        raise ValueError(f"lava-run here runs QEMU jobs only; this job is for device type "
                         f"{job.get('device_type')!r} (submit it: rtlab lava submit)")
    context = job.get("context") or {}
    commands = {"arm": "qemu-system-arm", "arm64": "qemu-system-aarch64",
                "aarch64": "qemu-system-aarch64"}
    arch = context.get("arch")
    if arch not in commands:
        raise ValueError(f"job context arch {arch!r}: rtlab runs arm and arm64 boards")
    for key in ("cpu", "machine", "memory", "model", "netdevice"):
        if key not in context:
            raise ValueError(f"job context lacks {key!r} (render the job with rtlab lava "
                             "render)")
    return templates.render("devices/qemu.yaml.j2", command=commands[arch],
                            context={**context,
                                     "extra_options": context.get("extra_options", [])})


def run_local(job_file: Path, out: Path, *, timeout_s: float | None = None) -> LocalRun:
    """Run ``job_file`` with lava-run (as root: lava-run insists); its log goes to
    ``out``/lava-job.log, its work files under ``out``/lava-run."""
    if shutil.which(LAVA_RUN) is None:
        raise FileNotFoundError(f"{LAVA_RUN} is not installed (Debian's lava-dispatcher: "
                                "scripts/bootstrap.sh lava-tools)")
    if os.geteuid() != 0:
        raise RuntimeError(f"{LAVA_RUN} runs as root only")
    job = YAML(typ="safe").load(job_file.read_text(encoding="utf-8"))
    if not isinstance(job, dict):
        raise ValueError(f"{job_file}: not a LAVA job")
    out.mkdir(parents=True, exist_ok=True)
    device = out / "device.yaml"
    device.write_text(device_dictionary(job), encoding="utf-8")
    job_id = uuid.uuid4().hex[:12]
    log = out / LOG
    began = time.monotonic()
    with log.open("w", encoding="utf-8") as stream:
        # its own session: QEMU is lava-run's child, and a stop must take both
        child = subprocess.Popen(
            [LAVA_RUN, "--job-id", job_id, "--output-dir", str(out / "lava-run"),
             "--device", str(device), str(job_file)],
            stdout=stream, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = child.wait(timeout=timeout_s)
        except BaseException:
            # SIGTERM is a cancel to lava-run: it ends QEMU and logs the job's end
            _stop(child)
            raise
    return LocalRun(job_id, log, code, time.monotonic() - began)


def _stop(child: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
