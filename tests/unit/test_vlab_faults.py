"""The virtual rack's fault plan: what can be armed, and how often it fires."""

import pytest

from rtlab.lab.console import describe, panic_line
from rtlab.lab.strategy import tool_error
from rtlab.util.paths import REPO_ROOT
from rtlab.vlab.faults import (
    FAULT_KINDS,
    WINDOW_FAULTS,
    Fault,
    FaultError,
    FaultPlan,
    window_fault_param,
)


def test_a_fault_fires_as_often_as_armed():
    plan = FaultPlan()
    plan.arm(Fault("pdu-error", times=2))
    assert [plan.take("pdu-error") is not None for _ in range(3)] == [True, True, False]
    assert plan.take("silent") is None


def test_times_zero_fires_until_cleared():
    plan = FaultPlan()
    plan.arm(Fault("silent", times=0))
    assert all(plan.take("silent") for _ in range(10))
    plan.clear("silent")
    assert plan.take("silent") is None


@pytest.mark.parametrize(("kind", "params", "message"), [
    ("reboot-loop", {}, "unknown fault 'reboot-loop' \\(valid: boot-hang, panic"),
    ("panic", {}, "panic needs AFTER"),
    ("slow-boot", {}, "slow-boot needs SECONDS"),
    ("pdu-error", {"code": 200}, "code must be an HTTP error"),
    ("silent", {"times": -1}, "times must be >= 0"),
    ("silent", {"colour": "red"}, "unknown fault parameter\\(s\\) colour"),
    ("silent", {"times": "often"}, "silent: bad parameter"),
])
def test_bad_fault_requests_are_refused_with_what_is_valid(kind, params, message):
    with pytest.raises(FaultError, match=message):
        Fault.from_request(kind, params)


def test_every_kind_is_described():
    assert set(FAULT_KINDS) == {"boot-hang", "panic", "boot-panic", "serial-disconnect",
                                "pdu-error", "pdu-timeout", "sd-write-error", "sd-corrupt",
                                "silent", "slow-boot", "trace-lockdown", "window-renice",
                                "window-rt-task", "window-rt-throttling", "window-governor"}


def test_window_faults_are_parameters_the_boards_init_plays():
    assert window_fault_param("window-renice", None) == "rtlab.window_fault=renice:2"
    assert window_fault_param("window-rt-throttling", 0) == "rtlab.window_fault=rt-throttling:0"
    init = (REPO_ROOT / "rtlab" / "image" / "files" / "init").read_text()
    # every kind the rack sends is one /init knows
    for name in WINDOW_FAULTS.values():
        assert f"        {name})\n" in init, name
    assert "rtlab.window_fault=*)" in init
    with pytest.raises(FaultError, match="'panic' is not a window fault"):
        window_fault_param("panic", 1)
    # a fraction the board could not sleep is refused when armed, not rounded
    with pytest.raises(FaultError, match="window-renice: AFTER must be whole seconds"):
        Fault.from_request("window-renice", {"after_s": 2.5})
    assert Fault.from_request("window-renice", {"after_s": 3}).after_s == 3


def test_console_descriptions():
    panic = (b"[ 31.2] sysrq: Trigger a crash\r\n"
             b"[ 31.3] Kernel panic - not syncing: sysrq triggered crash\r\n[ 31.4] CPU: 1\r\n")
    assert panic_line(panic) == "Kernel panic - not syncing: sysrq triggered crash"
    assert describe(panic) == "Kernel panic - not syncing: sysrq triggered crash"
    assert describe(b"") == "the console stayed silent"
    assert describe(b"U-Boot 2023.01\r\nStarting kernel ...\r\n\r\n") == (
        "last console line: 'Starting kernel ...'")


def test_a_failed_tool_is_its_exit_status_and_last_line():
    import subprocess

    error = subprocess.CalledProcessError(
        1, ["/usr/bin/bmaptool", "copy", "a", "b"],
        output=b"bmaptool: info: copying\r\nOSError: [Errno 28] No space left on device")
    assert tool_error(error) == (
        "bmaptool exited 1: OSError: [Errno 28] No space left on device")
