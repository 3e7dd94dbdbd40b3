"""A LAVA job for one board and flavour from the templates of jobs/: the device type's
template (physical boards) or QEMU's (virtual boards, ``qemu-…`` tags), the boot files of
the image rtlab builds, and the suite's cases as rtlab.lava.board's test steps.

The rendered job is read back and checked against what went in (the steps, the plan): a
template that quotes or indents a value wrongly fails here, with its name, rather than on
the board.
"""

import math
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import attr
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from rtlab.artifacts.manifest import FILE_NAME as MANIFEST
from rtlab.artifacts.manifest import load_image_manifest
from rtlab.lava import board, templates
from rtlab.lava.plan import METADATA_KEY, Plan, board_model, is_virtual
from rtlab.measure.window import LOAD_MARGIN_S, LOADED_SHELL_TIMEOUT_S
from rtlab.vlab.qemu import read_boot_config

# the initramfs by a name LAVA decompresses (it goes by the suffix) and unpacks (cpio)
RAMDISK = "initrd.cpio.gz"
PHYSICAL_TEMPLATES = {"imx6q": "imx6q-sabrelite.yaml.j2", "rpi3": "bcm2837-rpi-3-b.yaml.j2"}
QEMU_TEMPLATE = "qemu.yaml.j2"
TEST_NAME = "rtlab-latency"
# the login of rtlab's images (rtlab.image.build: busybox getty, /etc/profile's prompt, the
# line /init prints just before the login; env/virtual.yaml's ShellDriver waits for the same)
LOGIN = {"login_prompt": "login:", "username": "root", "shell_prompt": "root@rtlab:",
         "start_message": "rtlab: rtlab-[a-z0-9]+ ready"}
# A physical board's deploy and boot are tried this often (LAVA's failure_retry), as labs
# run them (KernelCI retries its boots): a TFTP time-out or a board that hangs once in its
# boot is the lab's fault, not the kernel's, and would void every case of the job.
FAILURE_RETRY = 3
# minutes, as LAVA wants them: all of a physical board's boot attempts (KernelCI gives a
# boot about 20), and one attempt from the reset to the shell. LAVA 2023.01 gives every
# action inside the boot the boot's own limit, so without the limit of an attempt a board
# that hangs uses up all of it in its first attempt and is never retried.
PHYSICAL_BOOT_MINUTES = 20
BOOT_ATTEMPT_MINUTES = 6
# The LAVA release whose job schema rtlab renders for when nothing says otherwise: Debian
# bookworm's, which `rtlab lava validate` checks against and `rtlab lava server` runs.
DEFAULT_LAVA_VERSION = "2023.01"
LAVA_VERSION_VARIABLE = "RTLAB_LAVA_VERSION"
# LAVA 2026.01 takes a test definition's expected case list in the job (`expected:`); its
# server then fails a case the board never reported, even when the job died before the test.
EXPECTED_CASES_SINCE = (2026, 1)


@attr.frozen
class LavaRelease:
    """The LAVA release of the server a job is for: what its job schema accepts."""

    version: tuple[int, int]

    @classmethod
    def parse(cls, text: str) -> "LavaRelease":
        """``2023.01``, ``2026.01.1``, ``2026.1``: the year and month of a LAVA release."""
        parts = text.strip().split(".")
        try:
            year, month = int(parts[0]), int(parts[1])
        except (IndexError, ValueError):
            raise ValueError(f"LAVA version {text!r}: not YEAR.MONTH (e.g. 2023.01)") from None
        if not (2000 <= year <= 2999 and 1 <= month <= 12):
            raise ValueError(f"LAVA version {text!r}: not YEAR.MONTH (e.g. 2023.01)")
        return cls((year, month))

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> "LavaRelease":
        """RTLAB_LAVA_VERSION (set beside RTLAB_LAVA_URL for a lab's server), else the
        release rtlab validates against."""
        environ = os.environ if environ is None else environ
        return cls.parse(environ.get(LAVA_VERSION_VARIABLE) or DEFAULT_LAVA_VERSION)

    @property
    def expected_cases(self) -> bool:
        """Whether a test definition may carry the list of the cases it reports."""
        return self.version >= EXPECTED_CASES_SINCE

    def __str__(self) -> str:
        return f"{self.version[0]}.{self.version[1]:02d}"


@attr.frozen
class QemuWiring:
    """How a QEMU machine is wired for LAVA, as rtlab.vlab.qemu.qemu_command wires it for
    the virtual rack: the console UART on stdio, the SD card, the TCG mode."""

    arch: str
    cpu: str
    nic: str
    """The ``model=`` of QEMU's on-board NIC (the device type's ``-net nic``)."""
    extra_options: tuple[str, ...]
    sdcard_arg: str


QEMU_WIRING = {
    # the console is the second UART (ttymxc1); -drive if=sd does not reach the uSDHC
    "sabrelite": QemuWiring(
        arch="arm", cpu="cortex-a9", nic="model=imx.enet",
        extra_options=("-smp 4", "-serial null", "-serial mon:stdio", "-no-reboot"),
        sdcard_arg="-drive if=none,id=sd,file={sdcard},format=raw -device sd-card,drive=sd"),
    # multi-threaded TCG (4 vCPUs on few host cores) boots slowly and times out; the board
    # has no on-board NIC (the network scenarios do not run on LAVA anyway); the console is
    # the mini UART (ttyS1), QEMU's second serial port, as on the board's header pins
    "raspi3b": QemuWiring(
        arch="arm64", cpu="cortex-a53", nic="model=usb-net",
        extra_options=("-accel tcg,thread=single", "-serial null", "-serial mon:stdio",
                       "-no-reboot"),
        sdcard_arg="-drive if=sd,file={sdcard},format=raw"),
}


@attr.frozen
class BootSource:
    """Where the job's boot files are and what the image's command line is."""

    urls: Mapping[str, str | None]
    """kernel, dtb, ramdisk, and sdcard (QEMU only; None: no SD card)."""
    cmdline: str
    """The image's kernel command line (its extlinux.conf APPEND)."""


@attr.frozen
class BootFiles:
    folder: Path
    kernel: str
    dtb: str
    ramdisk: str
    cmdline: str
    manifest: Mapping[str, Any]


def boot_files(image_dir: Path, out: Path) -> BootFiles:
    """The kernel, device tree and initramfs of the image in ``image_dir`` (sdcard.img and
    manifest.json of ``rtlab image build``), read from its card as U-Boot reads them, into
    ``out`` under the names LAVA wants."""
    manifest = load_image_manifest(image_dir / MANIFEST)
    model = board_model(manifest.board)
    sd = image_dir / "sdcard.img"
    if not sd.is_file():
        raise FileNotFoundError(f"{sd}: no SD image (rtlab image build?)")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".boot-") as tmp:
        boot = read_boot_config(sd, Path(tmp))
        if boot.initrd is None:
            raise ValueError(f"{sd}: its extlinux.conf names no INITRD, and the LAVA jobs "
                             "boot the initramfs as the root file system")
        names = (model.kernel_image, PurePosixPath(model.dtb).name, RAMDISK)
        for source, name in zip((boot.kernel, boot.dtb, boot.initrd), names, strict=True):
            shutil.copyfile(source, out / name)
    return BootFiles(out, *names, cmdline=boot.append, manifest=manifest.document)


def local_source(files: BootFiles, sd_image: Path | None) -> BootSource:
    """file:// URLs of boot files on this machine (lava-run here, or a worker that shares
    the folder)."""
    def url(path: Path) -> str:
        return path.resolve().as_uri()
    return BootSource(urls={"kernel": url(files.folder / files.kernel),
                            "dtb": url(files.folder / files.dtb),
                            "ramdisk": url(files.folder / files.ramdisk),
                            "sdcard": url(sd_image) if sd_image is not None else None},
                      cmdline=files.cmdline)


def served_source(files: BootFiles, base_url: str) -> BootSource:
    """URLs under ``base_url``, where the files of ``rtlab lava boot-files`` are served."""
    base = base_url.rstrip("/")
    return BootSource(urls={"kernel": f"{base}/{files.kernel}", "dtb": f"{base}/{files.dtb}",
                            "ramdisk": f"{base}/{files.ramdisk}", "sdcard": None},
                      cmdline=files.cmdline)


@attr.frozen
class Timeouts:
    """Minutes, as LAVA wants them."""

    deploy: int
    boot: int
    test: int
    quiet: int
    job: int
    action: int = 10
    connection: int = 5
    boot_attempt: int | None = None
    """One of a physical board's boot attempts (None: the boot is not retried)."""
    job_seconds: int | None = None
    """The job's limit in seconds instead of ``job`` (rtlab lava render --job-timeout)."""
    queue_seconds: int | None = None
    """How long the job may wait for a device; None: as long as it takes."""

    def lava(self, name: str) -> str:
        """One of them as a LAVA timeout; with ``job_seconds`` none is longer than the
        job (LAVA refuses a job whose action may outlast it)."""
        minutes = getattr(self, name)
        if self.job_seconds is not None and (name == "job" or minutes * 60 > self.job_seconds):
            return f"{{seconds: {self.job_seconds}}}"
        return f"{{minutes: {minutes}}}"


def timeouts_for(plan: Plan) -> Timeouts:
    """Generous limits from the plan: a window's start under load may take what a labgrid
    run allows a loaded shell (LOADED_SHELL_TIMEOUT_S), the end as long again; printing the
    evidence is seconds. A physical board's boot is retried (FAILURE_RETRY)."""
    def minutes(seconds: float) -> int:
        return max(1, math.ceil(seconds / 60))
    per_case = plan.duration_s + LOAD_MARGIN_S + 2 * LOADED_SHELL_TIMEOUT_S
    measured = sum(1 for case in plan.cases if case.skip is None)
    test = minutes(per_case * measured + 120)
    deploy = 10
    if is_virtual(plan.board):
        boot = 5
        return Timeouts(deploy=deploy, boot=boot, test=test, quiet=minutes(per_case),
                        job=deploy + boot + test + 5)
    # LAVA 2023.01 starts a retry as long as the boot's limit has not passed and gives it
    # a fresh limit: the last attempt may end one attempt after the boot's limit
    boot, attempt = PHYSICAL_BOOT_MINUTES, BOOT_ATTEMPT_MINUTES
    return Timeouts(deploy=deploy, boot=boot, test=test, quiet=minutes(per_case),
                    job=deploy + boot + attempt + test + 5, boot_attempt=attempt)


def kernel_args(board_tag: str, cmdline: str) -> str:
    """The kernel command line of the job: the image's, plus what the emulator needs on a
    virtual board (the vlab adds the same); on a physical board the image's console= is
    left out, for the job names the console where the device type's boot commands do."""
    model = board_model(board_tag)
    if is_virtual(board_tag):
        return " ".join([cmdline, *model.qemu_append]).strip()
    return " ".join(word for word in cmdline.split() if not word.startswith("console="))


def physical_console(board_tag: str, cmdline: str) -> str:
    """The console (``device,baud``) a physical board's job boots with: the board model's,
    where the image runs its getty and the lab's serial adapter listens. An image whose
    command line names another was built for another wiring: its login would never reach
    the lab's serial line, so it is refused here rather than timed out on the board."""
    model = board_model(board_tag)
    named = [word.removeprefix("console=") for word in cmdline.split()
             if word.startswith("console=")]
    devices = {name.split(",", 1)[0] for name in named}
    if devices - {model.console_device}:
        raise ValueError(f"the image's kernel command line names console "
                         f"{', '.join(sorted(devices))}, but a {model.name}'s console is "
                         f"{model.console} (rtlab.platform.boards): its getty would not "
                         "answer on the lab's serial line (rebuild the image: rtlab image build)")
    return model.console


def template_for(board_tag: str) -> str:
    if is_virtual(board_tag):
        return QEMU_TEMPLATE
    return PHYSICAL_TEMPLATES[board_model(board_tag).name]


def render_job(plan: Plan, source: BootSource, *, job_name: str | None = None,
               priority: str = "medium", folder: Path = templates.JOBS_DIR,
               tags: Sequence[str] = (), job_timeout_s: int | None = None,
               queue_timeout_s: int | None = None,
               lava: LavaRelease | None = None) -> str:
    """The job's YAML text. Raises :class:`rtlab.lava.templates.TemplateError` naming the
    template when it cannot be rendered or does not carry what went in. ``tags``: LAVA
    device tags the job's device must have; ``job_timeout_s`` replaces the job's limit
    taken from the plan; ``queue_timeout_s``: how long it may wait for a device; ``lava``:
    the release of the server that runs it (default: DEFAULT_LAVA_VERSION)."""
    for name, value in (("job timeout", job_timeout_s), ("queue timeout", queue_timeout_s)):
        if value is not None and value < 1:
            raise ValueError(f"the {name} must be at least 1 s, got {value}")
    if source.cmdline != plan.cmdline:
        # the plan's CPUs come from its command line: a job booting another is misjudged
        raise ValueError(f"the plan was made for the kernel command line {plan.cmdline!r}, "
                         f"the boot files have {source.cmdline!r}")
    lava = lava or LavaRelease.parse(DEFAULT_LAVA_VERSION)
    model = board_model(plan.board)
    steps = board.test_steps(board.board_files(plan))
    name = template_for(plan.board)
    args = kernel_args(plan.board, plan.cmdline)
    values: dict[str, Any] = {
        "job_name": job_name or f"rtlab {plan.board} {plan.flavour} "
                                f"{plan.image.get('image_id') or ''}".strip(),
        "priority": priority, "plan": plan, "plan_key": METADATA_KEY,
        "plan_json": plan.to_json(), "login": LOGIN, "tags": list(tags),
        "timeouts": attr.evolve(timeouts_for(plan), job_seconds=job_timeout_s,
                                queue_seconds=queue_timeout_s),
        "urls": dict(source.urls), "kernel_args": args,
        "test": {"name": TEST_NAME, "steps": steps,
                 "description": f"rtlab latency suite: {len(plan.cases)} case(s) of "
                                f"{plan.duration_s} s on {plan.board} ({plan.flavour})",
                 # what the driver reports, so that a server that knows the key fails a
                 # case the board never reached (an older schema refuses the key)
                 "expected": [case.lava_name for case in plan.cases]
                             if lava.expected_cases else []},
    }
    console = None
    if is_virtual(plan.board):
        wiring = QEMU_WIRING[model.qemu_machine]
        values["qemu"] = {"arch": wiring.arch, "cpu": wiring.cpu, "machine": model.qemu_machine,
                          "memory_mb": model.memory_mb, "nic": wiring.nic,
                          "extra_options": list(wiring.extra_options),
                          "sdcard_arg": wiring.sdcard_arg}
    else:
        if "'" in args:
            # U-Boot gets the arguments inside the single quotes of `setenv bootargs '…'`
            raise ValueError(f"the kernel command line {args!r} has a single quote, which "
                             "U-Boot's setenv bootargs '…' cannot carry")
        console = physical_console(plan.board, plan.cmdline)
        values["console"] = console
        values["failure_retry"] = FAILURE_RETRY
    text = templates.render(name, folder, **values)
    job = _check_rendered(text, name, folder, steps, values["plan_json"],
                          values["test"]["expected"])
    if console is not None:
        _check_boot(job, f"{folder / name} (rendered)", args, console)
    return text


def bootargs_of(commands: Sequence[str]) -> list[str]:
    """The words of the ``setenv bootargs '…'`` line of U-Boot commands (LAVA's
    base-uboot.jinja2 writes one such line per command set); ValueError unless there is
    exactly one, for then the kernel's arguments are not what the line says."""
    found = [command for command in commands if command.startswith("setenv bootargs ")]
    if len(found) != 1:
        raise ValueError(f"{len(found)} setenv bootargs lines in {list(commands)!r}")
    value = found[0].removeprefix("setenv bootargs ").strip()
    if value[:1] == "'" and value[-1:] == "'":
        value = value[1:-1]
    return value.split()


def _check_boot(job: Mapping[str, Any], where: str, args: str, console: str) -> None:
    """A physical job's own part of getting its kernel arguments to the kernel: either it
    hands them to the device type (its context's extra_kernel_args, for a device type that
    uses them) or its boot commands set them, with the board's console."""
    try:
        boot = next(a["boot"] for a in job["actions"] if "boot" in a)
        commands = boot["commands"]
    except (KeyError, TypeError, StopIteration) as error:
        raise templates.TemplateError(f"{where}: no boot commands ({error})") from None
    if isinstance(commands, str):
        given = (job.get("context") or {}).get("extra_kernel_args")
        if given != args:
            raise templates.TemplateError(f"{where}: boot commands {commands!r} of the device "
                                          f"type, but the context's extra_kernel_args is "
                                          f"{given!r}, not {args!r}")
        return
    try:
        words = bootargs_of(commands)
    except ValueError as error:
        raise templates.TemplateError(f"{where}: boot commands: {error}") from None
    missing = [word for word in [f"console={console}", *args.split()] if word not in words]
    if missing:
        raise templates.TemplateError(f"{where}: the boot commands' bootargs lack "
                                      f"{' '.join(missing)}")


def _check_rendered(text: str, name: str, folder: Path, steps: list[str],
                    plan_json: str, expected: list[str]) -> dict[str, Any]:
    where = f"{folder / name} (rendered)"
    try:
        job = YAML(typ="safe").load(text)
    except YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f"{mark.line + 1}" if mark is not None else "?"
        raise templates.TemplateError(f"{where}:{line}: not YAML: "
                                      f"{getattr(error, 'problem', error)}") from None
    try:
        test = next(a["test"] for a in job["actions"] if "test" in a)
        definition = test["definitions"][0]
        rendered = definition["repository"]["run"]["steps"]
        kept = job["metadata"][METADATA_KEY]
    except (KeyError, TypeError, IndexError, StopIteration) as error:
        raise templates.TemplateError(f"{where}: no test definition steps or plan metadata "
                                      f"({error})") from None
    if rendered != steps:
        raise templates.TemplateError(f"{where}: the test steps do not read back as rtlab "
                                      "wrote them (quoting or indentation of the template)")
    if kept != plan_json:
        raise templates.TemplateError(f"{where}: metadata {METADATA_KEY} does not read back "
                                      "as the plan")
    if definition.get("expected", []) != expected:
        raise templates.TemplateError(f"{where}: the test definition's expected cases are "
                                      f"{definition.get('expected')!r}, not {expected!r}")
    return job
