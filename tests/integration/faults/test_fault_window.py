"""The board changed under the measurement while its window ran (issue 32): cyclictest's
threads reniced to SCHED_OTHER, a SCHED_FIFO 99 task on a measuring CPU, RT throttling
turned back on, and a governor that scales CPU0 down (a stand-in: QEMU's boards have no
cpufreq). The board's /init plays each a few seconds after cyclictest started (after its
threads raised themselves to SCHED_FIFO), and the case is an error naming each requirement
and what the board had: never a latency pass or fail."""

import re

from ruamel.yaml import YAML

from conftest import assert_cleaned_up, assert_error
from rtlab.util.paths import REPO_ROOT

CASE = "idle/1000us"
# 12 s windows: the late check is 3 s before the end, after the faults
WINDOW_S = 12
AFTER_S = 4
FAULTS = ("window-renice", "window-rt-task", "window-rt-throttling", "window-governor")


def checked_suite(tmp_path):
    """The repository's suite, with the emulated boards' measuring threads and governor
    checked as a physical board's are (suite.yaml leaves them out on qemu-*)."""
    yaml = YAML(typ="rt")
    data = yaml.load((REPO_ROOT / "suite.yaml").read_text())
    qemu = data["requirements"]["boards"]["qemu-*"]
    qemu["measuring_policy"] = "fifo"
    qemu["governor"] = "performance"
    suite = tmp_path / "suite.yaml"
    with suite.open("w") as out:
        yaml.dump(data, out)
    return suite


def test_a_board_changed_mid_window_voids_the_run_naming_each_requirement(
        vlab, run_with_faults, tmp_path):
    run = run_with_faults([(kind, {"after_s": AFTER_S, "times": 0}) for kind in FAULTS],
                          duration=WINDOW_S, suite=checked_suite(tmp_path))
    record = assert_error(run, CASE, "the run is not what it claims: ")
    message = record["message"]
    assert re.search(r"measuring thread \d+ on CPU\d ran at SCHED_OTHER 0, case requires "
                     r"SCHED_FIFO 90", message), message
    assert re.search(r"another real-time task at or above the measuring priority: "
                     r"sleep \(pid \d+\) SCHED_FIFO 99 on CPU0", message), message
    # turned on after the window opened: the late check found it
    assert re.search(r"RT throttling on: sched_rt_runtime_us 950000, case requires -1 \(off\) "
                     r"\(at the (early\+)?late check\)", message), message
    assert "CPU0 governor powersave, case requires performance" in message
    assert "cpus" not in record, "no figures from a run that proves nothing"

    # the record keeps what was required beside what was found, per check
    checks = record["conditions"]["checks"]
    for name in ("measuring_policy", "other_rt_tasks", "rt_throttling", "governor"):
        assert checks[name]["status"] == "mismatch", (name, checks[name])
        assert checks[name]["required"], name
    assert "sched_rt_runtime_us 950000" in checks["rt_throttling"]["found"]
    assert "CPU0 powersave 396000/996000 kHz" in checks["governor"]["found"]
    # the kernel is the flavour the job names, and the program ran its threads
    assert checks["kernel"]["status"] == "met"
    assert checks["measuring_threads"]["status"] == "met"
    assert record["conditions"]["snapshots"] == ["early", "late"]
    # what each check cost the board, by its own clock
    took = record["conditions"]["snapshot_seconds"]
    assert set(took) == {"early", "late"} and all(0 <= s < WINDOW_S for s in took.values())
    assert_cleaned_up(vlab, sdmux="dut")
