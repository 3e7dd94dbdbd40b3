"""A job's boot commands on a LAVA device, as LAVA makes them: lava-server renders the
device dictionary (which extends the device type's template) with the job's context, and
lava-dispatcher's BootloaderCommandOverlay picks the commands U-Boot gets.

Run by the Python that has Debian's lava-server and lava-dispatcher (rtlab.lava.devicetype),
so it imports nothing of rtlab. It reads {"device_type", "dictionary", "job" (the job's
text), "commands"} as JSON on stdin and writes {"commands": [...], "device_commands": [...],
"errors": [...], "job_timeout": s, "actions": [{"level", "name", "max_retries", "timeout"}]}
on stdout (the job's actions as lava-dispatcher's parser builds them, timeouts in
seconds), or {"unavailable": why} when LAVA's server or dispatcher cannot be imported.
"""

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HOSTNAME = "rtlab-check-01"


def device_config(device_type: str, dictionary: str, context: dict[str, Any],
                  folder: Path) -> dict[str, Any]:
    """The device configuration a worker gets for a job with ``context``: lava-server's own
    Jinja2 environment (lava_scheduler_app.environment.devices, its sandbox, loader and
    options) rendering the dictionary ``{% extends '<device_type>.jinja2' %}`` plus
    ``dictionary``, as Device.load_configuration(job_ctx) does."""
    import yaml
    from django.conf import settings

    # lava-server's own search path: the lab's /etc overrides before the packaged types
    from lava_server.settings import common

    settings.configure(DEVICES_PATH=str(folder), DEVICE_TYPES_PATHS=common.DEVICE_TYPES_PATHS,
                       HEALTH_CHECKS_PATH=common.HEALTH_CHECKS_PATH)
    from lava_scheduler_app import environment

    (folder / f"{HOSTNAME}.jinja2").write_text(
        f"{{% extends '{device_type}.jinja2' %}}\n{dictionary}\n", encoding="utf-8")
    template = environment.devices().get_template(f"{HOSTNAME}.jinja2")
    return yaml.safe_load(template.render(**context))


def pipeline(job_text: str, device: dict[str, Any], tftp: Path) -> list[Any]:
    """The job and its actions as lava-dispatcher's own parser builds them for ``device`` (what
    lava-run does before it runs anything), in order, nested actions after their parent."""
    import logging

    from lava_dispatcher.device import NewDevice
    from lava_dispatcher.parser import JobParser
    from lava_dispatcher.utils import filesystem

    # the TFTP deploy asks where the worker's tftpd serves from (/etc/default/tftpd-hpa);
    # this machine is no worker, and the folder only matters once files are downloaded
    filesystem.tftpd_dir = lambda: str(tftp)
    job = JobParser().parse(job_text, NewDevice(device), "1", logging.getLogger("dispatcher"),
                            dispatcher_config="")

    def walk(actions: list[Any]) -> list[Any]:
        found = []
        for action in actions:
            found.append(action)
            if action.pipeline is not None:
                found += walk(action.pipeline.actions)
        return found
    return [job, *walk(job.pipeline.actions)]


def boot_commands(actions: list[Any]) -> tuple[list[str], list[str]]:
    """The commands lava-dispatcher's BootloaderCommandOverlay sends U-Boot (its own
    validate() decides: the job's list, or the device's named command set), and the
    errors it found."""
    overlay = next(action for action in actions if action.name == "bootloader-overlay")
    overlay.validate()
    return list(overlay.commands or []), list(overlay.errors)


def main() -> int:
    request = json.load(sys.stdin)
    try:
        import jinja2
        import lava_dispatcher.actions.boot  # noqa: F401 - its absence is the answer
        import lava_server.settings.common  # noqa: F401
    except ImportError as error:
        print(json.dumps({"unavailable": f"{sys.executable}: {error}"}))
        return 3
    import yaml

    job = yaml.safe_load(request["job"])
    boot = next(action["boot"] for action in job["actions"] if "boot" in action)
    with tempfile.TemporaryDirectory(prefix="rtlab-device-") as tmp:
        try:
            device = device_config(request["device_type"], request["dictionary"],
                                   job.get("context") or {}, Path(tmp))
        except jinja2.TemplateNotFound as error:
            print(json.dumps({"unavailable": f"no LAVA device-type template {error.name}"}))
            return 3
        parsed, *actions = pipeline(request["job"], device, Path(tmp))
        commands, errors = boot_commands(actions)
    methods = device["actions"]["boot"]["methods"][boot["method"]]
    named = methods.get(request["commands"], {}).get("commands", [])
    print(json.dumps({
        "commands": commands, "device_commands": named, "errors": errors,
        "job_timeout": parsed.timeout.duration,
        "actions": [{"level": action.level, "name": action.name,
                     "max_retries": getattr(action, "max_retries", None),
                     "timeout": action.timeout.duration} for action in actions]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
