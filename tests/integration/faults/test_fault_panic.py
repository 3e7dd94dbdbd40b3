"""A kernel panic in the middle of a measurement: the case is an error naming the panic,
and the next case boots the board again instead of inheriting a dead one."""

import pytest

from conftest import assert_cleaned_up, assert_console_attached, assert_error
from rtlab.measure.window import MARK

# timed from the window's start (what the board prints when cyclictest has started), not
# from power-on: a slow boot cannot move the panic out of the window. The panic is typed
# at the board's shell, which waits idle while the window runs.
WINDOW_STARTED = f"{MARK}started"
PANIC_AFTER_S = 5
# 10 s and more: the board's emulated CPUs can stall for seconds (docs/measured.md)
WINDOW_S = 12


@pytest.mark.full
def test_panic_during_measurement_is_an_error_and_the_board_recovers(vlab, run_with_faults):
    run = run_with_faults(
        [("panic", {"on_console": WINDOW_STARTED, "after_s": PANIC_AFTER_S})],
        scenarios="idle,cpu100", duration=WINDOW_S)
    record = assert_error(run, "idle/1000us",
                          "kernel panic during the test: Kernel panic - not syncing")
    assert [a["ok"] for a in run.attempts("idle/1000us", "boot")] == [True]
    assert_console_attached(run, "idle/1000us", "Kernel panic - not syncing")
    assert "cpus" not in record, "no figures from a board that died mid-window"

    after = run.record("cpu100/1000us")
    assert after["verdict"] == "pass", after["message"]
    # booted again from the card already written: no second flash
    assert [a["ok"] for a in run.attempts("cpu100/1000us", "boot")] == [True]
    assert run.attempts("cpu100/1000us", "flash") == []
    assert_cleaned_up(vlab, sdmux="dut")
