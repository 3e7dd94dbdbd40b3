"""Boards that do not come up: a boot that hangs before the login, a board that takes
power and stays silent, and a slow boot that a retry outlasts. (A kernel that panics
while it boots is test_fault_boot_panic's.)"""

import pytest

from conftest import assert_cleaned_up, assert_console_attached, assert_error

CASE = "idle/1000us"


@pytest.mark.full
def test_boot_hang_is_an_error_after_every_boot_attempt(vlab, run_with_faults):
    # the kernel boots, its /init hangs: only the login timeout can end an attempt (a
    # normal boot reaches the login in 5-17 s; the hang never does)
    run = run_with_faults([("boot-hang", {"times": 0})], login_timeout=20)
    record = assert_error(run, CASE, "no login prompt after 20 s")
    assert "(boot attempt 2 of 2)" in record["message"]
    boots = run.attempts(CASE, "boot")
    assert [(a["attempt"], a["ok"]) for a in boots] == [(1, False), (2, False)]
    # the kernel ran: the cause quotes what it printed last
    assert all("last console line" in a["cause"] for a in boots)
    assert_console_attached(run, CASE, "rtlab-vboot: imx6q power on")
    # what was to run is known although the board never answered
    assert record["name"] == "qemu-imx6q/rt/idle/1000us"
    assert record["place"] == "imx6q-01"
    assert record["loads"] == {}
    # the card was written completely, so the board keeps it
    assert_cleaned_up(vlab, sdmux="dut")


def test_silent_board_is_an_error_that_says_so(vlab, run_with_faults):
    # the silence ends each attempt after silence_timeout, well before the login timeout
    run = run_with_faults([("silent", {"times": 0})], login_timeout=90, silence_timeout=10)
    record = assert_error(run, CASE, "board silent after power-on: no console output in 10 s")
    assert all(a["seconds"] < 30 for a in run.attempts(CASE, "boot")), run.attempts(CASE, "boot")
    assert len(run.attempts(CASE, "boot")) == 2
    assert record["infrastructure"]["boots_in_session"] == 2
    assert_cleaned_up(vlab, sdmux="dut")


# the boot retry loop runs in make test by test_silent_board_is_an_error_that_says_so and
# test_fault_boot_panic (every attempt failing); a slow first boot outlasted here, in FULL=1
@pytest.mark.full
def test_slow_boot_is_retried_with_a_power_cycle_and_then_measured(vlab, run_with_faults):
    # the first boot stays silent longer than the strategy waits; the second is normal
    run = run_with_faults([("slow-boot", {"times": 1, "seconds": 25})], login_timeout=60,
                          silence_timeout=15)
    assert run.returncode == 0, run.output[-3000:]
    record = run.record(CASE)
    assert record["verdict"] == "pass"
    boots = run.attempts(CASE, "boot")
    assert [(a["attempt"], a["ok"]) for a in boots] == [(1, False), (2, True)]
    assert boots[0]["cause"] == "board silent after power-on: no console output in 15 s"
    assert all(cpu["samples"] > 0 for cpu in record["cpus"])
    assert_cleaned_up(vlab, sdmux="dut")
