"""What U-Boot gets when LAVA boots a rendered job on a device of a given type: the device
type's own template rendered by lava-server with the job's context, and the commands
lava-dispatcher picks for the job's boot action (rtlab.lava.device_render, run by the
system's Python, which has Debian's lava-server and lava-dispatcher).

A device type may drop what a job hands it (LAVA's bcm2837-rpi-3-b sets extra_kernel_args
itself), so whether the plan's kernel arguments reach the kernel is a question for LAVA's
own templates and code, not for the job alone.
"""

import json
from pathlib import Path

import attr
from ruamel.yaml import YAML

from rtlab.lava.render import bootargs_of
from rtlab.lava.validate import LavaUnavailable, run_on_lava_python

DEVICE_RENDER = Path(__file__).with_name("device_render.py")


@attr.frozen
class ParsedAction:
    """One action of the job as lava-dispatcher's parser builds it for the device."""

    level: str
    """Its place in the pipeline ("2.4": the fourth action inside the second)."""
    name: str
    max_retries: int | None
    """How often it is tried (a retry action; 1: once)."""
    timeout_s: int


@attr.frozen
class DeviceBoot:
    """A job on one device, as LAVA makes it."""

    device_type: str
    commands: tuple[str, ...]
    """What lava-dispatcher sends U-Boot (placeholders such as {KERNEL_ADDR} unfilled)."""
    device_commands: tuple[str, ...]
    """The device type's own command set of that name (``ramdisk``), with the job's
    context: what U-Boot would get if the job named the set instead of listing commands."""
    errors: tuple[str, ...]
    """What lava-dispatcher's validation of the boot's commands found wrong."""
    job_timeout_s: int
    actions: tuple[ParsedAction, ...]

    @property
    def bootargs(self) -> list[str]:
        """The kernel's command line, word by word, as U-Boot sets it."""
        return bootargs_of(self.commands)

    def action(self, name: str) -> ParsedAction:
        """The first action of that name (LAVA's: "uboot-action", "uboot-commands", …)."""
        found = [action for action in self.actions if action.name == name]
        if not found:
            raise KeyError(f"no action {name!r} in the job's pipeline on {self.device_type}")
        return found[0]


def boot_on_device(job_text: str, *, dictionary: str = "",
                   commands: str = "ramdisk") -> DeviceBoot:
    """The rendered job ``job_text`` on a device of its device type whose device
    dictionary adds ``dictionary`` (Jinja2 ``{% set … %}`` lines, as a lab's admin writes
    them) to ``{% extends '<type>.jinja2' %}``. ``commands``: the device's command set
    reported beside the job's. Raises :class:`LavaUnavailable` without lava-server and
    lava-dispatcher or the device type's template."""
    job = YAML(typ="safe").load(job_text)
    device_type = job.get("device_type") if isinstance(job, dict) else None
    if not isinstance(device_type, str):
        raise ValueError("the job names no device_type")
    request = json.dumps({"device_type": device_type, "dictionary": dictionary,
                          "job": job_text, "commands": commands})
    answer = run_on_lava_python(DEVICE_RENDER, request,
                                "LAVA's device types (lava-server, lava-dispatcher)")
    if "unavailable" in answer:
        raise LavaUnavailable(f"LAVA's device type {device_type} cannot be rendered here: "
                              f"{answer['unavailable']} (scripts/bootstrap.sh lava-server)")
    actions = tuple(ParsedAction(a["level"], a["name"], a["max_retries"], a["timeout"])
                    for a in answer["actions"])
    return DeviceBoot(device_type, tuple(answer["commands"]),
                      tuple(answer["device_commands"]), tuple(answer["errors"]),
                      answer["job_timeout"], actions)


def departures(boot: DeviceBoot, kernel_args: str, console: str) -> list[str]:
    """Where the job's boot on the device falls short of starting the kernel with
    ``kernel_args`` on ``console`` (``device,baud``: the board model's) the way the device
    type boots it; [] when it does not. A job that lists its own commands must keep the
    device type's (its TFTP loads, its ``usb start``, its own kernel arguments) and differ
    only in the bootargs."""
    problems = [f"lava-dispatcher: {error}" for error in boot.errors]
    try:
        words = boot.bootargs
    except ValueError as error:
        return [*problems, f"U-Boot's commands: {error}"]
    wanted = console.split(",", 1)[0]
    consoles = [word.removeprefix("console=").split(",", 1)[0] for word in words
                if word.startswith("console=")]
    if consoles != [wanted]:
        problems.append(f"the kernel's consoles are {consoles or 'none'}, not {wanted}: the "
                        "login would not come on the board's serial line")
    missing = [word for word in kernel_args.split() if word not in words]
    if missing:
        problems.append(f"the kernel does not get {' '.join(missing)}")
    if boot.commands != boot.device_commands:
        def rest(commands: tuple[str, ...]) -> list[str]:
            return [c for c in commands if not c.startswith("setenv bootargs ")]
        if rest(boot.commands) != rest(boot.device_commands):
            problems.append(f"the job's U-Boot commands {rest(boot.commands)} are not the "
                            f"device type's {rest(boot.device_commands)} (bootargs aside)")
        try:
            theirs = bootargs_of(boot.device_commands)
        except ValueError as error:
            return [*problems, f"the device type's commands: {error}"]
        own = [word for word in theirs if not word.startswith("console=")]
        lost = [word for word in own if word not in words]
        if lost:
            problems.append(f"the job's bootargs drop the device type's {' '.join(lost)}")
    return problems
