"""rtlab.lava: jobs rendered from jobs/ with rtlab.measure.window's own scripts, checked by LAVA's
schema with file:line complaints, and a job's log turned into result records judged as a
labgrid run judges them, where whatever is not a measurement (a job cut short, a log cut
off or garbled, a load that did not run) is an error."""

import base64
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from rtlab.artifacts.record import read_record
from rtlab.lava import board, local, records, render, server, validate
from rtlab.lava.joblog import LavaLogError, read_log
from rtlab.lava.plan import METADATA_KEY, PlanError, image_facts, make_plan, plan_of_job
from rtlab.lava.templates import JOBS_DIR
from rtlab.measure.suite import load_suite
from rtlab.measure.window import LOAD_OVERRUN_S, started_loads, window_script
from rtlab.platform import boards
from rtlab.store import ingest_paths, open_store
from rtlab.util.paths import REPO_ROOT
from rtlab.verdict.thresholds import load_thresholds
from tests.lava_log import LOG, file_start, garble_evidence, log_lines
from tests.sqlite_store import ingested

DATA = REPO_ROOT / "tests" / "data" / "lava"
JOB = DATA / "qemu-imx6q-rt-job.yaml"
MANIFEST = {"image_id": "0123456789abcdef", "board": "imx6q", "flavour": "rt",
            "kernel": {"release": "6.1.0-50-rt-armmp", "modules": ["a.ko"]},
            "sd_image": {"sha256": "ab" * 32}}


def qemu_source(cmdline="console=ttymxc1,115200 quiet"):
    return render.BootSource(urls={"kernel": "file:///b/zImage", "dtb": "file:///b/x.dtb",
                                   "ramdisk": "file:///b/initrd.cpio.gz",
                                   "sdcard": "file:///b/sdcard.img"}, cmdline=cmdline)


def plan_for(board_tag="qemu-imx6q", scenarios=("idle", "cpu50"), cmdline=None,
             intervals=(1000,), rt_tests=()):
    cmdline = cmdline or "console=ttymxc1,115200 quiet"
    return make_plan(board=board_tag, flavour="rt", suite=load_suite(),
                     scenarios=list(scenarios), intervals=list(intervals), duration_s=3,
                     cmdline=cmdline, image=image_facts(MANIFEST), rt_tests=list(rt_tests))


def load(text):
    return YAML(typ="safe").load(text)


# ------------------------------------------------------------------ rendering ----


def test_qemu_job_runs_the_windows_rtlab_measure_writes():
    plan = plan_for(rt_tests=("signaltest", "pip_stress"))
    job = load(render.render_job(plan, qemu_source()))
    assert job["device_type"] == "qemu"
    steps = job["actions"][2]["test"]["definitions"][0]["repository"]["run"]["steps"]
    # each measured case's window is rtlab.measure.window's script itself, not a copy
    for case in plan.cases:
        # loads started for the window and the margin rtlab.measure.window stops them after
        # and a latency case's checks of its conditions, as a labgrid run has them
        checked = case.checked(plan)
        assert (checked is None) == (case.tool is not None), case.name
        expected = window_script(list(case.program), started_loads(case.parts()), 4,
                                 case.wait_s + LOAD_OVERRUN_S, conditions=checked,
                                 window_s=case.wait_s)
        assert any(step.endswith(f"\n{expected.rstrip()}\n{board.HEREDOC_END}")
                   for step in steps), case.name
        if checked is not None:
            assert checked.requirements.rt_throttling == "off"
            assert checked.measuring.program == "cyclictest"
            assert checked.measuring.cpus == (0, 1, 2, 3)
            assert "conditions-late" in expected
    assert "stress-ng --cpu 4 --cpu-load 50" in "\n".join(steps)
    assert steps[-1] == f"sh {board.BOARD_DIR}/{board.DRIVER}"
    # the serial line stays quiet: nothing of the window goes to the console
    driver = board.board_files(plan)[board.DRIVER]
    assert 'start >"$out/start.out" 2>&1' in driver and 'sleep "$3"\n' in driver
    # the plan travels in the job, and reads back whole
    assert plan_of_job(render.render_job(plan, qemu_source()), "job") == plan
    deploy = job["actions"][0]["deploy"]
    assert deploy["to"] == "tmpfs"
    assert deploy["images"]["ramdisk"]["overlays"] == {"lava": True}
    # the image's command line, with what the emulator needs, as the virtual rack boots it
    assert '-append "console=ttymxc1,115200 quiet imx.flood_check=0"' in (
        deploy["images"]["kernel"]["image_arg"])
    assert job["context"]["machine"] == "sabrelite" and "-smp 4" in job["context"][
        "extra_options"]


def physical_source(board_tag, cmdline=None):
    console = boards.board_model(board_tag).console
    return render.BootSource(urls={"kernel": "https://files/k", "dtb": "https://files/d",
                                   "ramdisk": "https://files/r.cpio.gz", "sdcard": None},
                             cmdline=cmdline or f"console={console} quiet isolcpus=3")


@pytest.mark.parametrize("board_tag, device_type, kernel_type", [
    ("imx6q", "imx6q-sabrelite", "zimage"), ("rpi3", "bcm2837-rpi-3-b", "image")])
def test_physical_jobs_boot_uboot_over_tftp(board_tag, device_type, kernel_type):
    source = physical_source(board_tag)
    plan = plan_for(board_tag, cmdline=source.cmdline)
    job = load(render.render_job(plan, source))
    assert job["device_type"] == device_type
    deploy, boot = job["actions"][0]["deploy"], job["actions"][1]["boot"]
    assert (deploy["to"], deploy["kernel"]["type"]) == ("tftp", kernel_type)
    assert deploy["ramdisk"] == {"url": "https://files/r.cpio.gz", "compression": "gz"}
    assert boot["method"] == "u-boot"
    # the plan's command line goes along, its console left to where the boot names it
    # (what LAVA's device types make of it: tests/unit/test_lava_device_types.py)
    assert plan.cmdline == source.cmdline
    if board_tag == "imx6q":
        assert boot["commands"] == "ramdisk"
        assert job["context"]["extra_kernel_args"] == "quiet isolcpus=3"
    else:
        words = render.bootargs_of(boot["commands"])
        console = boards.board_model("rpi3").console
        assert [w for w in words if w.startswith("console=")] == [f"console={console}"]
        assert {"quiet", "isolcpus=3"} <= set(words)
        assert "context" not in job


def test_a_physical_job_refuses_an_image_for_another_console_or_plan():
    model = boards.board_model("rpi3")
    # an image whose getty serves another UART than the lab's serial line listens on
    other = physical_source("rpi3", f"console={model.console_device}9,115200 quiet")
    with pytest.raises(ValueError, match=rf"names console {model.console_device}9.*"
                                         rf"console is {re.escape(model.console)}"):
        render.render_job(plan_for("rpi3", cmdline=other.cmdline), other)
    # boot files whose command line is not the one the plan's CPUs were decided from
    source = physical_source("rpi3")
    with pytest.raises(ValueError, match="plan was made for the kernel command line"):
        render.render_job(plan_for("rpi3", cmdline=f"console={model.console}"), source)
    # U-Boot gets the arguments inside single quotes
    quoted = physical_source("imx6q", "console=ttymxc1,115200 x='y'")
    with pytest.raises(ValueError, match="single quote"):
        render.render_job(plan_for("imx6q", cmdline=quoted.cmdline), quoted)


@pytest.mark.parametrize("template, change", [
    ("bcm2837-rpi-3-b.yaml.j2", ("~ kernel_args ~", "~")),
    ("bcm2837-rpi-3-b.yaml.j2", ('"console=" ~ console ~ " ', '"')),
    ("imx6q-sabrelite.yaml.j2", ("extra_kernel_args: {{ kernel_args | yaml_str }}",
                                 "extra_kernel_args: \"quiet\"")),
])
def test_a_template_that_loses_the_plans_kernel_arguments_is_caught_at_render(
        tmp_path, template, change):
    jobs = tmp_path / "jobs"
    shutil.copytree(JOBS_DIR, jobs)
    path = jobs / template
    text = path.read_text()
    assert change[0] in text
    path.write_text(text.replace(change[0], change[1]))
    board_tag = "rpi3" if template.startswith("bcm") else "imx6q"
    source = physical_source(board_tag)
    with pytest.raises(ValueError, match=rf"{template} \(rendered\): .*(bootargs lack|"
                                         "extra_kernel_args)"):
        render.render_job(plan_for(board_tag, cmdline=source.cmdline), source, folder=jobs)


def test_the_plan_skips_what_a_labgrid_run_skips_and_isolates_like_it():
    plan = plan_for(scenarios=("cpu100_isolated", "network"))
    skips = {case.scenario: case.skip for case in plan.cases}
    assert "isolates no CPU" in skips["cpu100_isolated"]
    assert "no lab-host side" in skips["network"]
    isolated = plan_for(scenarios=("cpu100_isolated", "idle"),
                        cmdline="console=ttymxc1,115200 isolcpus=nohz,domain,3")
    on_three, idle = isolated.cases
    assert on_three.skip is None and on_three.threads == 1 and on_three.load_cpus == (0, 1, 2)
    command = list(on_three.program)
    at = command.index("cyclictest")
    assert command[at + 1:at + 4] == ["-t", "-a", "3"]
    # the load is sized for the three CPUs left to it
    assert "--cpu 3 " in window_script(list(on_three.program),
                                      started_loads(on_three.parts()), 3, 10)
    assert idle.threads == 3


def test_the_plan_runs_the_other_rt_tests_as_a_labgrid_run_does():
    from rtlab.measure.rttests.board import board_run

    plan = plan_for(scenarios=("idle",), rt_tests=("signaltest", "pip_stress"))
    idle, signaltest, pip_stress = plan.cases
    assert (signaltest.name, signaltest.lava_name, signaltest.loads) == (
        "signaltest", "signaltest", {})
    expected = board_run("signaltest", duration_s=3, cpus=4, priority=90,
                                 json_path="/tmp/rtlab-rttest.json")
    assert signaltest.program == expected.argv and signaltest.wait_s == 3
    assert signaltest.rt_run(plan) == expected
    # pip_stress has no duration and writes no JSON
    assert (pip_stress.wait_s, pip_stress.json_path) == (1, None)
    assert "measure 2 pip_stress 1 -" in board.board_files(plan)[board.DRIVER]
    # every rt-test of the suite by default, none when asked so
    everything = make_plan(board="qemu-imx6q", flavour="rt", suite=load_suite(),
                           scenarios=["idle"], intervals=[1000], duration_s=3,
                           cmdline="quiet", image={})
    assert [c.tool for c in everything.cases[1:]] == list(load_suite().rt_tests)
    with pytest.raises(PlanError, match="unknown rt-test.*cyclictestt"):
        plan_for(rt_tests=("cyclictestt",))


def test_plan_refuses_unknown_boards_and_scenarios():
    with pytest.raises(PlanError, match="unknown board 'beaglebone'.*qemu-imx6q"):
        plan_for("beaglebone")
    with pytest.raises(PlanError, match="unknown scenario.*idel"):
        plan_for(scenarios=("idel",))
    with pytest.raises(PlanError, match="isolcpus=7.*4 CPUs"):
        plan_for(cmdline="isolcpus=7")


def test_driver_is_valid_sh_and_every_case_reports_to_lava(tmp_path):
    plan = plan_for(scenarios=("idle", "network"))
    path = tmp_path / "suite.sh"
    path.write_text(board.board_files(plan)[board.DRIVER])
    subprocess.run(["sh", "-n", str(path)], check=True)
    text = path.read_text()
    assert "measure 0 idle-1000us 3 /tmp/rtlab-cyclictest.json" in text
    assert "skipped network-1000us" in text
    assert 'lava-test-case "$2" --result pass --measurement' in text


def test_a_template_that_quotes_a_value_wrongly_is_caught_at_render(tmp_path):
    shutil.copytree(JOBS_DIR, tmp_path / "jobs")
    template = tmp_path / "jobs" / "include" / "test.yaml.j2"
    template.write_text(template.read_text().replace("{{ step | literal(12) }}", "{{ step }}"))
    with pytest.raises(ValueError, match=r"qemu\.yaml\.j2 \(rendered\):\d+: not YAML"):
        render.render_job(plan_for(), qemu_source(), folder=tmp_path / "jobs")


# ----------------------------------------------------------------- validation ----


def test_the_repositorys_templates_are_valid_for_every_board_and_flavour():
    passed, problems = validate.validate([JOBS_DIR])
    assert problems == []
    assert len(passed) == 8 and any("qemu.yaml.j2 (rendered for qemu-rpi3/rt)" in p
                                    for p in passed)


def test_a_bad_job_is_refused_with_file_line_and_key(tmp_path):
    text = render.render_job(plan_for(), qemu_source())
    lines = text.splitlines()
    number = next(i for i, line in enumerate(lines, 1) if line.strip() == "method: qemu")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("method: qemu", "method: qemuu"))
    zero = tmp_path / "zero.yaml"
    zero.write_text(re.sub(r"job: \{minutes: \d+\}", "job: {minutes: 0}", text))
    broken = tmp_path / "broken.yaml"
    broken.write_text("job_name: x\n  timeouts: [\n")
    passed, problems = validate.validate([bad, zero, broken])
    assert passed == []
    assert f"{bad}:{number}: actions.boot.qemuu: unknown action type" in problems
    job_line = next(i for i, line in enumerate(lines, 1) if line.startswith("  job:"))
    assert any(p.startswith(f"{zero}:{job_line}: timeouts.job") for p in problems)
    assert any(p.startswith(f"{broken}:2: not YAML") for p in problems)


def test_a_broken_template_is_named_with_its_line(tmp_path):
    jobs = tmp_path / "jobs"
    shutil.copytree(JOBS_DIR, jobs)
    qemu = jobs / "qemu.yaml.j2"
    lines = qemu.read_text().splitlines()
    where = next(i for i, line in enumerate(lines) if line.startswith("context:"))
    lines.insert(where + 1, "  bogus: {{ no_such_value }}")
    qemu.write_text("\n".join(lines) + "\n")
    boot = jobs / "bcm2837-rpi-3-b.yaml.j2"
    boot.write_text(boot.read_text().replace("{% include \"include/test.yaml.j2\" %}",
                                             "{% if %}"))
    sabre = jobs / "imx6q-sabrelite.yaml.j2"
    sabre.write_text(sabre.read_text().replace("method: u-boot", "method: uboot"))
    passed, problems = validate.validate([jobs])
    assert any(p.startswith(f"{qemu}:{where + 2}: UndefinedError") and "no_such_value" in p
               for p in problems), problems
    assert any(re.match(rf"{re.escape(str(boot))}:\d+: template syntax", p)
               for p in problems), problems
    # the schema's complaint names the template, the board it was rendered for and the
    # rendered line itself
    assert any(p.startswith(f"{sabre} (rendered for imx6q/std):") and
               "actions.boot.uboot" in p and "method: uboot" in p for p in problems), problems
    assert passed == []


def test_without_lava_common_validation_says_what_to_install(tmp_path, monkeypatch):
    job = tmp_path / "job.yaml"
    job.write_text(render.render_job(plan_for(), qemu_source()))
    monkeypatch.setenv(validate.PYTHON_VARIABLE, str(tmp_path / "no-python"))
    with pytest.raises(validate.LavaUnavailable, match="lava-common"):
        validate.validate([job])


def test_the_cli_validates_the_jobs_folder():
    from rtlab.cli import main

    assert main(["lava", "validate", str(JOBS_DIR)]) == 0


# ------------------------------------------------------------ log → records ----


@pytest.fixture
def loose_gate(tmp_path):
    """Limits no emulated run exceeds (the repository's thresholds.yaml is the lab's)."""
    return gate(tmp_path, 10_000_000)


def gate(tmp_path, max_us):
    path = tmp_path / f"thresholds-{max_us}.yaml"
    path.write_text(f"defaults:\n  max_us: {max_us}\n  avg_us: 10000000\nboards:\n"
                    "  qemu-imx6q:\n    flavours:\n      rt: {}\n")
    return load_thresholds(path, load_suite())


def judge(log_text, thresholds, plan=None):
    plan = plan or plan_of_job(JOB.read_text(), str(JOB))
    log = read_log(log_text, "lava-job.log")
    return {r["name"].split("/", 2)[2]: r for r in records.job_records(
        plan, log, records.LavaJob("42", device="qemu-01"), thresholds)}


def test_a_real_lava_run_becomes_records_judged_like_labgrids(tmp_path, loose_gate):
    judged = judge(LOG.read_text(), loose_gate)
    assert {name: r["verdict"] for name, r in judged.items()} == {
        "idle/1000us": "pass", "cpu50/1000us": "pass",
        "cpu100_isolated/1000us": "skipped", "network/1000us": "skipped",
        "signaltest": "pass", "pi_stress": "pass", "oslat": "skipped"}
    cpu50 = judged["cpu50/1000us"]
    assert cpu50["name"] == "qemu-imx6q/rt/cpu50/1000us" and cpu50["interval_us"] == 1000
    assert [cpu["cpu"] for cpu in cpu50["cpus"]] == [0, 1, 2, 3]
    assert all(cpu["samples"] > 0 and "percentiles_us" in cpu for cpu in cpu50["cpus"])
    # the load was proven from the board's own accounting, as on labgrid
    assert cpu50["load_check"]["loads"] == {"cpu": {"percent": 50}}
    assert cpu50["load_check"]["cpu_utilisation"] >= cpu50["load_check"]["min_utilisation"]
    assert cpu50["system"]["preemption"] == "PREEMPT_RT" and cpu50["system"]["cpus"] == 4
    assert cpu50["thresholds"]["max_us"]["value"] == 10_000_000
    assert cpu50["lava"]["test_case"]["result"] == "pass"
    assert cpu50["run_id"] == "lava:local:42" and cpu50["place"] == "qemu-01"
    assert "isolates no CPU" in judged["cpu100_isolated/1000us"]["message"]
    # written atomically as rtlab.result/3, and the store takes them as they are
    folder = tmp_path / "results"
    written = records.write_records(folder, list(judged.values()))
    assert all(read_record(path)["schema"] == "rtlab.result/3" for path in written)
    assert not list(folder.glob(".*"))
    report = ingest_paths(open_store(f"sqlite:///{tmp_path / 'r.db'}"), [folder])
    assert report.added == 7 and report.runs == ("lava:local:42",)
    # the other rt-tests as tests/target/test_rttests.py records them
    signaltest = judged["signaltest"]
    assert "interval_us" not in signaltest and signaltest["loads"] == {}
    assert signaltest["threads"][0]["gated"] and signaltest["threads"][0]["samples"] > 0
    assert set(signaltest["thresholds"]) == {"max_us", "avg_us"}
    assert judged["pi_stress"]["functional"]["verdict"] == "pass"
    assert judged["pi_stress"]["functional"]["inversions"] > 0
    assert "oslat does not run on this board" in judged["oslat"]["message"]


def test_a_limit_exceeded_is_a_fail_with_the_figure(tmp_path):
    judged = judge(LOG.read_text(), gate(tmp_path, 100))
    cpu50 = judged["cpu50/1000us"]
    assert cpu50["verdict"] == "fail"
    assert re.match(r"CPU0 max \d+ µs > max_us 100 µs \(.*thresholds-100\.yaml:2\)",
                    cpu50["message"]), cpu50["message"]
    assert judged["idle/1000us"]["verdict"] == "fail"
    assert judged["signaltest"]["verdict"] == "fail"
    assert "max_us 100 µs" in judged["signaltest"]["message"]
    assert judged["pi_stress"]["verdict"] == "pass"


def test_a_log_cut_off_mid_case_leaves_no_case_unjudged_and_none_passed(loose_gate):
    lines = log_lines()
    cut = file_start(lines, "cpu50") + 5
    judged = judge("".join(lines[:cut]) + lines[cut][:30], loose_gate)
    assert judged["idle/1000us"]["verdict"] == "pass"
    cpu50 = judged["cpu50/1000us"]
    assert cpu50["verdict"] == "error"
    assert "did not finish" in cpu50["message"] and "truncated" in cpu50["message"]
    for name in ("cpu100_isolated/1000us", "network/1000us", "signaltest", "oslat"):
        assert judged[name]["verdict"] == "error"
        assert "never got to this case" in judged[name]["message"]


def test_garbled_evidence_is_an_error(loose_gate):
    judged = judge("".join(garble_evidence(log_lines())), loose_gate)
    assert judged["cpu50/1000us"]["verdict"] == "error"
    assert re.search(r"SHA-256 differs|does not decode|not a tar",
                     judged["cpu50/1000us"]["message"])
    assert judged["idle/1000us"]["verdict"] == "pass"


def test_kernel_noise_inside_evidence_is_an_error(loose_gate):
    lines = log_lines()
    start = file_start(lines, "idle")
    noise = json.dumps({"dt": "2026-11-25T02:41:53", "lvl": "target",
                        "msg": "[  12.3] BUG: soft lockup"}) + "\n"
    judged = judge("".join([*lines[:start + 2], noise, *lines[start + 2:]]), loose_gate)
    assert judged["idle/1000us"]["verdict"] == "error"
    assert "garbled at log line" in judged["idle/1000us"]["message"]


def test_an_infrastructure_failure_makes_every_case_an_error(loose_gate):
    lines = log_lines()
    boot = next(i for i, line in enumerate(lines) if "rtlab-lava:suite-start" in line) - 30
    failed = json.dumps({"dt": "2026-11-25T02:45:00", "lvl": "results", "msg": {
        "definition": "lava", "case": "job", "result": "fail",
        "error_type": "Infrastructure", "error_msg": "auto-login-action timed out"}})
    judged = judge("".join(lines[:boot]) + failed + "\n", loose_gate)
    assert {r["verdict"] for r in judged.values()} == {"error"}
    assert all("Infrastructure error: auto-login-action timed out" in r["message"]
               for r in judged.values())


def rewrite_evidence(text, owner, change):
    """The log with ``owner``'s evidence archive changed by ``change(files)`` and encoded
    again as the board would have printed it (size and SHA-256 announced anew)."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if f"rtlab-lava:file {owner} " in line)
    end = next(i for i in range(start, len(lines)) if f"rtlab-lava:end {owner} " in lines[i])
    packed = base64.b64decode("".join(json.loads(line)["msg"] for line in lines[start + 1:end]))
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(packed))) as archive:
        files = {m.name.removeprefix("./"): archive.extractfile(m).read()
                 for m in archive.getmembers() if m.isfile()}
    change(files)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    data = out.getvalue()
    encoded = base64.encodebytes(gzip.compress(data)).decode().split()
    head = json.loads(lines[start])
    head["msg"] = (f"rtlab-lava:file {owner} evidence.tar {len(data)} "
                   f"{hashlib.sha256(data).hexdigest()}")
    body = [json.dumps({"dt": head["dt"], "lvl": "target", "msg": chunk}) + "\n"
            for chunk in encoded]
    return "".join([*lines[:start], json.dumps(head) + "\n", *body, *lines[end:]])


def test_a_load_that_stopped_is_an_error_not_a_pass(loose_gate):
    def load_gone(files):
        files["end.out"] = files["end.out"].replace(b"rtlab-evidence:0 alive",
                                                    b"rtlab-evidence:0 gone")
    judged = judge(rewrite_evidence(LOG.read_text(), "cpu50-1000us", load_gone), loose_gate)
    assert judged["cpu50/1000us"]["verdict"] == "error"
    assert judged["cpu50/1000us"]["message"].startswith(
        "load not effective: stress-ng --cpu was not running")


def test_a_cyclictest_failure_and_a_cut_json_are_errors(loose_gate):
    def failed(files):
        files["end.out"] = re.sub(rb"rtlab-evidence:rc=0", b"rtlab-evidence:rc=1",
                                  files["end.out"])
    judged = judge(rewrite_evidence(LOG.read_text(), "idle-1000us", failed), loose_gate)
    assert judged["idle/1000us"]["verdict"] == "error"
    assert judged["idle/1000us"]["message"].startswith("cyclictest exited 1")

    def cut(files):
        files["result.json"] = files["result.json"][:300]
    judged = judge(rewrite_evidence(LOG.read_text(), "idle-1000us", cut), loose_gate)
    assert judged["idle/1000us"]["verdict"] == "error"
    assert "invalid JSON" in judged["idle/1000us"]["message"]


def test_a_board_other_than_the_plans_is_an_error(loose_gate):
    plan = plan_of_job(JOB.read_text(), str(JOB))
    import attr

    other = attr.evolve(plan, isolated=(3,))
    judged = judge(LOG.read_text(), loose_gate, plan=other)
    assert judged["idle/1000us"]["verdict"] == "error"
    assert "job was rendered for 4 CPUs, isolated [3]" in judged["idle/1000us"]["message"]


def test_what_is_no_log_or_no_rtlab_job_is_refused():
    with pytest.raises(LavaLogError, match="not a LAVA job log"):
        read_log("garbage\nmore garbage\n", "x.log")
    with pytest.raises(PlanError, match=METADATA_KEY):
        plan_of_job("device_type: qemu\njob_name: x\n", "job.yaml")


def test_the_cli_writes_records_and_exits_by_verdict(tmp_path):
    from rtlab.cli import main

    thresholds = tmp_path / "t.yaml"
    thresholds.write_text("defaults:\n  max_us: 10000000\nboards:\n  qemu-imx6q:\n"
                          "    flavours:\n      rt: {}\n")
    assert main(["lava", "records", "--job", str(JOB), "--log", str(LOG),
                 "--thresholds", str(thresholds), "--out", str(tmp_path / "a")]) == 0
    assert len(list((tmp_path / "a" / "results").glob("*.json"))) == 7
    cut = tmp_path / "cut.log"
    cut.write_text(LOG.read_text()[:20000])
    assert main(["lava", "records", "--job", str(JOB), "--log", str(cut),
                 "--thresholds", str(thresholds), "--out", str(tmp_path / "b")]) == 1


def test_the_cli_compares_each_case_with_its_eligible_baseline_in_the_store(tmp_path,
                                                                          monkeypatch):
    """rtlab lava records --baseline-db finds a case's baseline as rtlab run does: the
    store's passing runs of the same options and length; without a store it says so."""
    from rtlab.cli import main

    monkeypatch.delenv("RTLAB_RESULTS_DB", raising=False)
    thresholds = tmp_path / "t.yaml"
    thresholds.write_text("defaults:\n  max_us: 10000000\nboards:\n  qemu-imx6q:\n"
                          "    flavours:\n      rt: {}\n")
    common = ["lava", "records", "--job", str(JOB), "--log", str(LOG), "--thresholds",
              str(thresholds)]
    assert main([*common, "--out", str(tmp_path / "alone")]) == 0
    alone = {r["name"]: r for r in map(read_record,
                                       (tmp_path / "alone" / "results").glob("*.json"))}
    cpu50 = alone["qemu-imx6q/rt/cpu50/1000us"]
    assert cpu50["baseline"]["why_not"].startswith("no results store to take a baseline "
                                                   "from (rtlab lava fetch --baseline-db)")
    # twelve earlier passing jobs of the same plan: each its own run and boot
    history = tmp_path / "history"
    history.mkdir()
    for index in range(12):
        earlier = {**cpu50, "run_id": f"lava:earlier:{index}",
                   "started": f"2026-11-{index + 1:02d}T10:00:00+00:00",
                   "case": f"lava:{index}:cpu50-1000us"}
        (history / f"{index:02d}.json").write_text(json.dumps(earlier))
    url = ingested(history, tmp_path / "results.db")
    assert main([*common, "--out", str(tmp_path / "compared"), "--baseline-db", url,
                 "--baseline-ref", ""]) == 0
    compared = {r["name"]: r for r in map(read_record,
                                          (tmp_path / "compared" / "results").glob("*.json"))}
    judged = compared["qemu-imx6q/rt/cpu50/1000us"]
    assert judged["baseline"]["eligible"] and judged["baseline"]["runs"] == 12
    assert judged["comparison"] is not None and judged["verdict"] == "pass"
    # another case of the job has no stored runs: no comparison, and it says why
    assert compared["qemu-imx6q/rt/idle/1000us"]["baseline"]["considered"] == 0


# ----------------------------------------------------------- server, local ----


def test_lavacli_gets_the_token_in_a_private_file_never_on_its_command_line(monkeypatch):
    env = {server.URL_VARIABLE: "https://lava.example.org", server.USER_VARIABLE: "ci",
           server.TOKEN_VARIABLE: "s3cret-token"}
    lab = server.Server.from_environment(env)
    assert lab.url == "https://lava.example.org/RPC2" and "s3cret" not in repr(lab)
    seen = {}

    def fake_run(argv, env, **kwargs):
        config = Path(env["XDG_CONFIG_HOME"]) / "lavacli.yaml"
        seen.update(argv=argv, config=config.read_text(),
                    mode=stat.S_IMODE(config.stat().st_mode))
        return subprocess.CompletedProcess(argv, 1, "", "Unable to connect: "
                                           "https://ci:s3cret-token@lava.example.org/RPC2")

    monkeypatch.setattr(server.subprocess, "run", fake_run)
    with pytest.raises(server.LavaServerError) as error:
        lab.submit(Path("job.yaml"))
    assert "s3cret-token" not in " ".join(seen["argv"])
    assert "s3cret-token" in seen["config"] and seen["mode"] == 0o600
    assert "s3cret-token" not in str(error.value) and server.HIDDEN in str(error.value)
    with pytest.raises(ValueError, match="must not carry credentials"):
        server.Server.from_environment({server.URL_VARIABLE: "https://u:p@lava/RPC2"})
    with pytest.raises(ValueError, match="RTLAB_LAVA_URL is not set"):
        server.Server.from_environment({})


def test_the_local_device_dictionary_follows_the_jobs_context():
    source = qemu_source("console=ttyS1,115200 quiet")
    job = load(render.render_job(plan_for("qemu-rpi3", cmdline=source.cmdline), source))
    device = load(local.device_dictionary(job))
    qemu = device["actions"]["boot"]["methods"]["qemu"]["parameters"]
    assert qemu["command"] == "qemu-system-aarch64"
    assert "-machine raspi3b" in qemu["options"] and "-cpu cortex-a53" in qemu["options"]
    assert "-accel tcg,thread=single" in qemu["extra"]
    # the console (ttyS1, the mini UART) is QEMU's second serial port: the first goes nowhere
    serials = [option for option in qemu["extra"] if option.startswith("-serial")]
    assert serials == ["-serial null", "-serial mon:stdio"]
    with pytest.raises(ValueError, match="QEMU jobs only"):
        local.device_dictionary({"device_type": "imx6q-sabrelite"})


def test_lava_run_needs_root(tmp_path, monkeypatch):
    if os.geteuid() == 0:
        monkeypatch.setattr(local.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(local.shutil, "which", lambda name: "/usr/bin/lava-run")
    with pytest.raises(RuntimeError, match="root"):
        local.run_local(JOB, tmp_path)


def test_fetch_reads_a_servers_job_and_judges_its_raw_log(tmp_path, monkeypatch):
    """`rtlab lava fetch` against lavacli's answers: the server's raw log is the same
    entries as lava-run's, each a list item."""
    from rtlab.cli import main

    raw_log = "".join(f"- {line}" for line in log_lines())
    answers = {
        ("jobs", "wait"): "",
        ("jobs", "show"): json.dumps({"id": 1234, "state": "Finished", "health": "Complete",
                                      "device": "qemu-07", "device_type": "qemu"}),
        ("jobs", "definition"): JOB.read_text(),
        ("jobs", "logs"): raw_log,
    }
    calls = []

    def fake_lavacli(self, *args, timeout=300):
        calls.append(args)
        return answers[args[:2]]

    monkeypatch.setattr(server.Server, "lavacli", fake_lavacli)
    monkeypatch.setenv(server.URL_VARIABLE, "https://lava.example.org")
    thresholds = tmp_path / "t.yaml"
    thresholds.write_text("defaults:\n  max_us: 10000000\nboards:\n  qemu-imx6q:\n"
                          "    flavours:\n      rt: {}\n")
    out = tmp_path / "out"
    assert main(["lava", "fetch", "1234", "--wait", "60", "--out", str(out),
                 "--thresholds", str(thresholds)]) == 0
    assert calls[0] == ("jobs", "wait", "1234", "--timeout", "60", "--polling", "5")
    assert (out / "job-1234" / "log.yaml").read_text() == raw_log
    judged = {r["scenario"]: r for r in map(read_record, (out / "results").glob("*.json"))}
    assert judged["cpu50"]["verdict"] == "pass"
    assert judged["cpu50"]["place"] == "qemu-07"
    assert judged["cpu50"]["run_id"] == "lava:lava.example.org:1234"
    assert judged["cpu50"]["lava"]["url"] == "https://lava.example.org/scheduler/job/1234"
    # and their JUnit, named by the job (GitLab's reports: junit), the job's device its place
    suite = ET.parse(out / "junit-lava-1234.xml").getroot().find("testsuite")
    assert (suite.get("name"), suite.get("tests")) == ("lava-1234", "7")
    facts = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert facts["TARGET_MAIN_REMOTE"] == "qemu-07"
    assert facts["lava_url"] == "https://lava.example.org/scheduler/job/1234"
    # a server that says the job did not complete overrides a log that looks finished
    answers[("jobs", "show")] = json.dumps({"state": "Finished", "health": "Canceled"})
    main(["lava", "fetch", "1234", "--out", str(tmp_path / "again"),
          "--thresholds", str(thresholds)])
    again = [read_record(p) for p in (tmp_path / "again" / "results").glob("*.json")]
    assert again and all(r["lava"]["health"] == "Canceled" for r in again)


def test_a_physical_board_needs_the_url_its_worker_downloads_from(capsys):
    from rtlab.cli import main

    assert main(["lava", "render", "--board", "imx6q", "--flavour", "rt"]) == 2
    assert "--boot-url" in capsys.readouterr().err


@pytest.mark.parametrize("field, why", [(4, "SHA-256 differs"), (3, "decodes to")])
def test_evidence_that_is_not_what_the_board_announced_is_an_error(loose_gate, field, why):
    lines = log_lines()
    start = file_start(lines, "idle")
    head = json.loads(lines[start])
    words = head["msg"].split()
    words[field] = "0" * 64 if field == 4 else str(int(words[3]) - 1)
    head["msg"] = " ".join(words)
    lines[start] = json.dumps(head) + "\n"
    judged = judge("".join(lines), loose_gate)
    assert judged["idle/1000us"]["verdict"] == "error"
    assert why in judged["idle/1000us"]["message"]


def test_a_case_whose_conditions_were_never_checked_is_no_pass(loose_gate):
    """As on labgrid (tests/unit/test_board_outcomes.py): a window that would pass but
    whose program ended before either check of its measuring threads is an error."""
    import attr

    from rtlab.measure.conditions import EARLY, LATE, MARK, MISSED, SECTION

    plan = plan_of_job(JOB.read_text(), str(JOB))
    [case] = [c for c in plan.cases if c.lava_name == "cpu50-1000us"]
    checked = attr.evolve(case, conditions={
        "requirements": {"measuring_policy": "fifo"}, "program": "cyclictest",
        "cpus": [0, 1, 2, 3]})
    plan = attr.evolve(plan, cases=tuple(checked if c is case else c for c in plan.cases))

    def missed(files):
        files["end.out"] += "".join(f"{MARK}{SECTION}-{tag}-{MISSED}\n"
                                    for tag in (EARLY, LATE)).encode()
    judged = judge(rewrite_evidence(LOG.read_text(), "cpu50-1000us", missed), loose_gate,
                   plan)
    record = judged["cpu50/1000us"]
    assert record["verdict"] == "error"
    assert record["message"].startswith("the run's conditions were never checked")
    assert "judged" not in record and "not_checked" in record["conditions"]
    # the other cases of the job, whose plan asks for no checks, pass as before
    assert judged["idle/1000us"]["verdict"] == "pass"


def test_a_breach_in_a_void_window_fails_with_the_void_beside_it(tmp_path, monkeypatch):
    """As on labgrid: a condition mismatch voids a window, but a breach among its
    wake-ups survives it (a fail with the mismatch beside it); without one, it is void."""
    from rtlab.measure.conditions import (
        MISMATCH,
        Check,
        Conditions,
        MeasuringThreads,
        Requirements,
        RunNotValid,
    )

    def void(program, parts, opened, end, exit_code, output, *, conditions=None, **_):
        raise RunNotValid(Conditions(
            checks=(Check("rt_throttling", "off", "950000", MISMATCH,
                          ("RT throttling is on (sched_rt_runtime_us 950000)",)),),
            snapshots=("late",), requirements=Requirements(),
            measuring=MeasuringThreads("cyclictest", 90, (0, 1, 2, 3)), flavour="rt"))

    monkeypatch.setattr(records, "judge_window", void)
    low = judge(LOG.read_text(), gate(tmp_path, 50))["cpu50/1000us"]
    assert low["verdict"] == "fail" and "> max_us 50 µs" in low["message"]
    assert low["error"].startswith("the run is not what it claims: RT throttling is on")
    high = judge(LOG.read_text(), gate(tmp_path, 10_000_000))["cpu50/1000us"]
    assert high["verdict"] == "error" and "judged" not in high
    assert high["message"].startswith("the run is not what it claims")


def test_the_system_python_for_lava_missing_or_failing_is_a_clear_error(tmp_path,
                                                                        monkeypatch):
    monkeypatch.setenv("RTLAB_LAVA_PYTHON", str(tmp_path / "no-python"))
    with pytest.raises(validate.LavaUnavailable,
                       match=r"no-python does not exist: LAVA's job schema"):
        validate.schema_errors([("job", {})])
    monkeypatch.setenv("RTLAB_LAVA_PYTHON", sys.executable)
    script = tmp_path / "broken.py"
    script.write_text("import sys\nprint('Traceback: no lava here', file=sys.stderr)\n"
                      "sys.exit(3)\n")
    with pytest.raises(RuntimeError, match=r"broken.py under .* failed \(exit 3\): Traceback"):
        validate.run_on_lava_python(script, "{}", "a test")
