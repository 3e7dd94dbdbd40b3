"""rtlab's physical jobs on LAVA's own device types: lava-server renders the device type's
template (a device dictionary that extends it, with the job's context) and lava-dispatcher's
parser builds the job's pipeline and picks U-Boot's commands, as a lab's server and worker
do. The plan's kernel arguments must reach the kernel, on the console the board model names,
whatever the device type does with a job's extra_kernel_args; a boot that fails must be
retried within its limit. Needs Debian's lava-server and lava-dispatcher (the bootstrap's
lava-server step); skipped without them."""

import io
import re

import pytest
from ruamel.yaml import YAML

from rtlab.lava import board, devicetype, render, validate
from rtlab.lava.plan import make_plan
from rtlab.measure.suite import load_suite
from rtlab.platform import boards

DEVICE_TYPES = {"imx6q": "imx6q-sabrelite", "rpi3": "bcm2837-rpi-3-b"}
# a Linux earlycon driver and the names its UARTs get as consoles
EARLYCON_TTY = {"uart8250": "ttyS", "pl011": "ttyAMA", "ec_imx6q": "ttymxc"}


def source_for(board_tag, args="quiet isolcpus=3"):
    """Boot files of an image built for the board model as it is now (its console)."""
    console = boards.board_model(board_tag).console
    return render.BootSource(urls={"kernel": "https://files/k", "dtb": "https://files/d",
                                   "ramdisk": "https://files/r.cpio.gz", "sdcard": None},
                             cmdline=f"console={console} {args}")


def plan_for(board_tag, source, flavour="rt"):
    return make_plan(board=board_tag, flavour=flavour, suite=load_suite(),
                     scenarios=["idle", "cpu100_isolated", "network"], intervals=[1000],
                     duration_s=3, cmdline=source.cmdline, image={"image_id": "0123abcd"},
                     rt_tests=["signaltest"])


def plan_args(plan):
    """The plan's kernel arguments, as the image's command line has them (its console is
    the boot's to name)."""
    return " ".join(w for w in plan.cmdline.split() if not w.startswith("console="))


def on_device(job_text, **kwargs):
    try:
        return devicetype.boot_on_device(job_text, **kwargs)
    except validate.LavaUnavailable as error:
        pytest.skip(str(error))


def rendered(board_tag, **kwargs):
    source = source_for(board_tag)
    plan = plan_for(board_tag, source)
    return plan, render.render_job(plan, source, **kwargs)


# ------------------------------------------------------ what the device types do ----


def test_the_rpi3_device_type_drops_a_jobs_kernel_arguments_and_names_no_console():
    """The issue's finding, on LAVA's own template: bcm2837-rpi-3-b.jinja2 sets
    extra_kernel_args to its earlycon whatever the job's context or the device dictionary
    says, and names no console (base-uboot.jinja2 writes console= only for console_device)."""
    plan, text = rendered("rpi3")
    # the job as it was before: the device type's `ramdisk` commands, the context's args
    job = YAML(typ="safe").load(text)
    next(a["boot"] for a in job["actions"] if "boot" in a)["commands"] = "ramdisk"
    job["context"] = {"extra_kernel_args": plan_args(plan)}
    stream = io.StringIO()
    YAML(typ="safe").dump(job, stream)
    naive = stream.getvalue()
    for dictionary in ("", "{% set extra_kernel_args = 'quiet isolcpus=3' %}"):
        boot = on_device(naive, dictionary=dictionary)
        assert boot.commands == boot.device_commands
        assert "isolcpus=3" not in boot.bootargs and "quiet" not in boot.bootargs
        assert not any(w.startswith("console=") for w in boot.bootargs)
        earlycon = [w for w in boot.bootargs if w.startswith("earlycon=")]
        assert earlycon == ["earlycon=uart8250,mmio32,0x3f215040"]
        assert devicetype.departures(boot, plan_args(plan), boards.board_model("rpi3").console)


def test_the_imx6q_device_type_takes_the_jobs_arguments_unless_its_dictionary_sets_them():
    plan, text = rendered("imx6q")
    boot = on_device(text)
    assert set(plan_args(plan).split()) <= set(boot.bootargs)
    # what a lab's device dictionary sets wins over the job's context (documented)
    boot = on_device(text, dictionary="{% set extra_kernel_args = 'nosmp' %}")
    assert "nosmp" in boot.bootargs and "isolcpus=3" not in boot.bootargs


# ------------------------------------------------- what rtlab's jobs make of them ----


@pytest.mark.parametrize("board_tag", sorted(DEVICE_TYPES))
@pytest.mark.parametrize("flavour", boards.FLAVOURS)
def test_the_plans_kernel_arguments_reach_the_kernel_on_the_boards_console(board_tag,
                                                                         flavour):
    source = source_for(board_tag)
    plan = plan_for(board_tag, source, flavour)
    model = boards.board_model(board_tag)
    text = render.render_job(plan, source)
    for dictionary in ("", "{% set console_device = '" + model.console_device + "' %}"):
        boot = on_device(text, dictionary=dictionary)
        assert boot.device_type == DEVICE_TYPES[board_tag]
        assert devicetype.departures(boot, plan_args(plan), model.console) == []
        consoles = [w for w in boot.bootargs if w.startswith("console=")]
        assert [c.removeprefix("console=").split(",")[0] for c in consoles] == [
            model.console_device]
        for word in plan_args(plan).split():
            assert word in boot.bootargs, word
        # the CPUs the plan measures on are the ones the kernel isolates
        isolated = [w for w in boot.bootargs if w.startswith("isolcpus=")]
        assert isolated == ["isolcpus=3"] and plan.isolated == (3,)


def test_the_rpi3_job_keeps_the_device_types_commands_and_arguments():
    plan, text = rendered("rpi3")
    boot = on_device(text)
    # the job's own list: the device type's, bootargs aside, with its earlycon kept
    assert boot.commands != boot.device_commands
    assert [c for c in boot.commands if "bootargs" not in c] == [
        c for c in boot.device_commands if "bootargs" not in c]
    assert "usb start" in boot.commands
    own = [w for w in render.bootargs_of(boot.device_commands) if not w.startswith("console")]
    assert set(own) <= set(boot.bootargs)


def test_the_rpi3_console_is_the_uart_the_device_type_starts_the_kernel_on():
    """The device type's earlycon is the mini UART (the header pins); the console the job
    logs in on must be a UART of the same driver, or login: never reaches the lab."""
    plan, text = rendered("rpi3")
    boot = on_device(text)
    earlycon = next(w for w in boot.bootargs if w.startswith("earlycon="))
    driver = earlycon.removeprefix("earlycon=").split(",")[0]
    model = boards.board_model("rpi3")
    assert model.console_device.startswith(EARLYCON_TTY[driver]), (earlycon, model.console)


def test_a_job_that_departs_from_the_device_type_is_told(tmp_path):
    """The check itself: a job's list that lost the device type's `usb start` (the Pi's
    network is on USB: no TFTP without it) or its console."""
    plan, text = rendered("rpi3")
    model = boards.board_model("rpi3")
    no_usb = on_device(text.replace('    - "usb start"\n', ""))
    assert any("not the device type's" in p
               for p in devicetype.departures(no_usb, plan_args(plan), model.console))
    other = on_device(text.replace(f"console={model.console}", "console=tty0"))
    problems = devicetype.departures(other, plan_args(plan), model.console)
    assert any("consoles are ['tty0']" in p for p in problems), problems


# --------------------------------------------------------------- retries, timeouts ----


@pytest.mark.parametrize("board_tag", sorted(DEVICE_TYPES))
def test_a_physical_boot_is_retried_within_its_limit(board_tag):
    plan, text = rendered(board_tag)
    boot = on_device(text)
    whole, attempt = boot.action("uboot-action"), boot.action("uboot-commands")
    # LAVA's parser read the job's failure_retry and the limit of one attempt
    assert whole.max_retries == render.FAILURE_RETRY > 1
    assert whole.timeout_s == render.PHYSICAL_BOOT_MINUTES * 60
    assert attempt.timeout_s == render.BOOT_ATTEMPT_MINUTES * 60
    # every attempt fits in the boot's limit, so a hang leaves time for the next one
    assert whole.max_retries * attempt.timeout_s <= whole.timeout_s
    # the deploy is retried too
    deploy = next(a for a in boot.actions if a.level == "1")
    assert deploy.max_retries == render.FAILURE_RETRY
    # the job outlives a boot whose last retry started just before the boot's limit
    test = next(a for a in boot.actions if a.name == "lava-test-retry")
    assert boot.job_timeout_s >= (deploy.timeout_s + whole.timeout_s + attempt.timeout_s
                                  + test.timeout_s)


def test_the_retried_jobs_validate_and_the_qemu_job_is_not_retried(tmp_path):
    jobs = []
    for board_tag in sorted(DEVICE_TYPES):
        job = tmp_path / f"{board_tag}.yaml"
        job.write_text(rendered(board_tag)[1])
        jobs.append(job)
        assert "failure_retry: 3" in job.read_text()
    passed, problems = validate.validate(jobs)
    assert problems == [] and len(passed) == 2
    source = render.BootSource(urls={"kernel": "file:///k", "dtb": "file:///d",
                                     "ramdisk": "file:///r", "sdcard": None},
                               cmdline="console=ttymxc1,115200 quiet")
    qemu = render.render_job(plan_for("qemu-imx6q", source), source)
    assert "failure_retry" not in qemu


# ----------------------------------------------------------------- expected cases ----


def reported(plan):
    """The LAVA test cases the board's driver reports (its skipped/measure lines)."""
    driver = board.board_files(plan)[board.DRIVER]
    return [m.group(1) or m.group(2) for m in
            re.finditer(r"^(?:skipped (\S+)|measure \d+ (\S+) )", driver, re.M)]


def definition(text):
    job = YAML(typ="safe").load(text)
    return next(a["test"] for a in job["actions"] if "test" in a)["definitions"][0]


def test_expected_cases_only_for_a_server_that_knows_them(tmp_path, monkeypatch):
    plan, text = rendered("imx6q")
    assert "expected" not in definition(text)
    newer = render.render_job(plan, source_for("imx6q"),
                              lava=render.LavaRelease.parse("2026.01"))
    names = definition(newer)["expected"]
    assert names == reported(plan) and len(names) == len(plan.cases) == 4
    assert "network-1000us" in names and "signaltest" in names
    # the installed LAVA (2023.01) refuses the key: that is why it is off by default
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(text)
    new.write_text(newer)
    passed, problems = validate.validate([old, new])
    assert passed == [str(old)]
    assert len(problems) == 1 and problems[0].startswith(f"{new}:")
    assert "expected" in problems[0]
    # the setting beside the server's URL
    monkeypatch.setenv(render.LAVA_VERSION_VARIABLE, "2026.02")
    assert render.LavaRelease.from_environment().expected_cases
    monkeypatch.setenv(render.LAVA_VERSION_VARIABLE, "2025.11")
    assert not render.LavaRelease.from_environment().expected_cases
    monkeypatch.delenv(render.LAVA_VERSION_VARIABLE)
    assert str(render.LavaRelease.from_environment()) == render.DEFAULT_LAVA_VERSION
    with pytest.raises(ValueError, match="YEAR.MONTH"):
        render.LavaRelease.parse("latest")


def test_the_cli_renders_expected_cases_for_the_server_it_is_told_of(tmp_path, monkeypatch,
                                                                    capsys):
    from rtlab.cli import main

    source = source_for("imx6q")
    manifest = {"board": "imx6q", "flavour": "rt", "image_id": "0123abcd"}
    monkeypatch.setattr(render, "boot_files", lambda image, out: render.BootFiles(
        out, "zImage", "imx6q-sabrelite.dtb", render.RAMDISK, source.cmdline, manifest))
    monkeypatch.delenv(render.LAVA_VERSION_VARIABLE, raising=False)
    common = ["lava", "render", "--board", "imx6q", "--flavour", "rt", "--scenarios", "idle",
              "--intervals", "1000", "--rt-tests", "none", "--boot-url", "https://files",
              "--image", str(tmp_path)]
    assert main([*common, "--out", str(tmp_path / "old.yaml")]) == 0
    assert "expected" not in definition((tmp_path / "old.yaml").read_text())
    assert main([*common, "--lava-version", "2026.01", "--out", str(tmp_path / "new.yaml")]) == 0
    assert definition((tmp_path / "new.yaml").read_text())["expected"] == ["idle-1000us"]
    monkeypatch.setenv(render.LAVA_VERSION_VARIABLE, "2026.04")
    assert main([*common, "--out", str(tmp_path / "env.yaml")]) == 0
    assert definition((tmp_path / "env.yaml").read_text())["expected"] == ["idle-1000us"]
    assert main([*common, "--lava-version", "soon", "--out", str(tmp_path / "x.yaml")]) == 2
    assert "YEAR.MONTH" in capsys.readouterr().err
