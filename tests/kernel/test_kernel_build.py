"""A kernel config change in the repository becomes the kernel that boots on the board.

Builds the i.MX6Q kernel for the preempt-rt flavour from the repository's fragments (the
config step verifies every requested option), packs it into an SD image, flashes and boots
it on the virtual rack through `rtlab run` as CI does, and reads the result record: the
suite must see a PREEMPT_RT kernel (/sys/kernel/realtime = 1) and the record must carry the
build manifest. Then one option changes (an extra fragment, as a merge request would change
a fragment), the build must be incremental, and the new record must show the new config.

Slow (a cold build takes 6-15 minutes on two cores; with the build folder and ccache of
an earlier run, a minute or two): `make test-kernel`, not part of `make test`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.util.paths import REPO_ROOT

BOARD, FLAVOUR, THRESHOLDS_FLAVOUR = "imx6q", "preempt-rt", "rt"
PLACE = "imx6q-01"
RTLAB = [sys.executable, "-m", "rtlab.cli"]
# harmless at run time, and compiled into one file: a change rebuilds a handful of objects
CHANGE = "# CONFIG_PRINTK_TIME is not set\n"

pytestmark = pytest.mark.vlab


def rtlab(*args: str, timeout: float) -> None:
    """An rtlab command as CI runs it; its output goes to the terminal (make test-kernel
    runs pytest with -s: a kernel build must show progress)."""
    print(f"\n$ rtlab {' '.join(args)}", flush=True)
    proc = subprocess.run([*RTLAB, *args], cwd=REPO_ROOT, timeout=timeout, check=False,
                          env={**os.environ})
    assert proc.returncode == 0, f"rtlab {' '.join(args)} exited {proc.returncode}"


def build(out: Path, *fragments: Path) -> dict:
    extra = [arg for f in fragments for arg in ("--fragment", str(f))]
    rtlab("kernel", "build", "--board", BOARD, "--flavour", FLAVOUR, "--out", str(out),
          *extra, timeout=3600)
    return json.loads((out / f"{BOARD}-{FLAVOUR}" / "kernel.json").read_text())


def boot_and_record(kernel: Path, work: Path) -> dict:
    """SD image from the built kernel, flashed and booted by `rtlab run` (one short idle
    case); returns its result record."""
    images = work / "images"
    rtlab("image", "build", "--board", BOARD, "--flavour", THRESHOLDS_FLAVOUR,
          "--kernel", str(kernel), "--out", str(images), timeout=900)
    sd_image = images / f"{BOARD}-{THRESHOLDS_FLAVOUR}" / "sdcard.img"
    manifest = json.loads(sd_image.with_name("manifest.json").read_text())
    assert manifest["kernel"]["source"] == "build"
    out = work / "run"
    rtlab("run", "--place", PLACE, "--image", str(sd_image), "--out", str(out),
          "--duration", "3", "--scenarios", "idle", "--intervals", "1000",
          "--rt-tests", "none", timeout=1200)
    [record_file] = (out / "results").glob("*.json")
    return json.loads(record_file.read_text())


def check_record(record: dict, info: dict) -> None:
    assert record["verdict"] == "pass", record["message"]
    system = record["system"]
    assert system["realtime"] is True, system
    assert system["preemption"] == "PREEMPT_RT", system
    assert system["kernel_release"] == info["release"]
    assert system["kernel_config"].get("CONFIG_PREEMPT_RT") == "y"
    assert system["cmdline"].startswith(info["cmdline"]), (system["cmdline"], info["cmdline"])
    kernel = record["image"]["kernel"]
    assert kernel["source"] == "build"
    assert kernel["kernel_flavour"] == FLAVOUR
    # the whole build manifest, as kernel.json has it
    assert kernel["build"] == info["build"]
    for key in ("source", "fragments", "config_sha256", "toolchain", "kernel_release",
                "build_seconds", "preemption_model", "thresholds_flavour", "ccache"):
        assert key in kernel["build"], key
    assert kernel["build"]["preemption_model"] == "PREEMPT_RT"


def test_a_fragment_change_reaches_the_board(vlab, tmp_path, own_health_records):
    first_out = tmp_path / "kernel-1"
    first = build(first_out)
    assert first["preemption"] == "PREEMPT_RT"
    fragments = [f["name"] for f in first["build"]["fragments"]]
    assert "kernel/configs/imx6q-lean.config" in fragments, fragments
    record = boot_and_record(first_out / f"{BOARD}-{FLAVOUR}", tmp_path / "boot-1")
    check_record(record, first)
    print(f"\nfirst build: {first['build']['build_seconds']} s, "
          f"{first['build']['compiled']['steps']} steps", flush=True)

    # the change a merge request would make, as an extra fragment on top of the flavour's
    change = tmp_path / "printk-time.config"
    change.write_text("# one option changed: kernel messages without timestamps\n" + CHANGE)
    second_out = tmp_path / "kernel-2"
    second = build(second_out, change)
    compiled = second["build"]["compiled"]
    print(f"\nsecond build: {second['build']['build_seconds']} s, {compiled['steps']} "
          f"steps of {compiled['objects_in_build_dir']} objects", flush=True)
    # incremental: a handful of objects, not the tree (a cold build compiles thousands);
    # counted in kbuild steps, not seconds (timings are bench/kernel_build_times.py's)
    assert compiled["steps"] < compiled["objects_in_build_dir"] * 0.05, compiled
    assert second["build"]["config_sha256"] != first["build"]["config_sha256"]
    assert str(change.resolve()) in [f["name"] for f in second["build"]["fragments"]]
    config = (second_out / f"{BOARD}-{FLAVOUR}" / "config").read_text()
    assert CHANGE in config and "CONFIG_PRINTK_TIME=y" not in config

    record2 = boot_and_record(second_out / f"{BOARD}-{FLAVOUR}", tmp_path / "boot-2")
    check_record(record2, second)
    build2 = record2["image"]["kernel"]["build"]
    assert build2["config_sha256"] != record["image"]["kernel"]["build"]["config_sha256"]
    assert [f["name"] for f in build2["fragments"]][-1] == str(change.resolve())
    assert record2["image"]["image_id"] != record["image"]["image_id"]
    # the board runs the rebuilt kernel: its version string names the new build
    assert record2["system"]["kernel_version"] != record["system"]["kernel_version"]
