"""A kernel that panics while it boots: every boot attempt fails with the panic as its
cause, and the case is an error that quotes it."""

import pytest

from conftest import assert_cleaned_up, assert_console_attached, assert_error

CASE = "idle/1000us"
CAUSE = "kernel panic during boot: Kernel panic - not syncing"


# in make test FULL=1: the silent board (test_fault_boot) covers a boot that fails every
# attempt; make test's minutes went to the bisection (tests/integration/test_bisect_rack.py)
@pytest.mark.full
def test_kernel_panic_at_boot_is_an_error_after_every_boot_attempt(vlab, run_with_faults):
    # every power-on panics; each attempt ends when the panic is printed, not after the
    # login timeout
    run = run_with_faults([("boot-panic", {"times": 0})], login_timeout=90)
    record = assert_error(run, CASE, CAUSE)
    assert record["message"].endswith("(boot attempt 2 of 2)"), record["message"]
    boots = run.attempts(CASE, "boot")
    assert [(a["attempt"], a["ok"]) for a in boots] == [(1, False), (2, False)]
    assert all(a["cause"].startswith(CAUSE) for a in boots), boots
    assert all(a["seconds"] < 60 for a in boots), boots
    assert record["infrastructure"]["boots_in_session"] == 2
    # the panic, not a quiet board or a missing login, is what the case says
    assert "VFS: Unable to mount root fs" in record["message"]
    assert_console_attached(run, CASE, "Kernel panic - not syncing")
    # flashed completely, so the card stays with the board
    assert_cleaned_up(vlab, sdmux="dut")
