"""The serial adapter drops during a measurement: an error that says the console was
lost, and the next case gets a fresh console and a freshly booted board."""

import pytest

from conftest import assert_cleaned_up, assert_error
from rtlab.measure.window import MARK

# timed from the window's start (what the board prints when cyclictest has started), not
# from power-on: a slow boot cannot move the disconnect out of the window
WINDOW_STARTED = f"{MARK}started"
DISCONNECT_AFTER_S = 5
# 10 s and more: the board's emulated CPUs can stall for seconds (docs/measured.md)
WINDOW_S = 12


@pytest.mark.full
def test_serial_lost_during_measurement_is_an_error_and_the_board_recovers(
        vlab, run_with_faults):
    run = run_with_faults(
        [("serial-disconnect", {"on_console": WINDOW_STARTED, "after_s": DISCONNECT_AFTER_S,
                                "seconds": 4})],
        scenarios="idle,cpu100", duration=WINDOW_S)
    assert_error(run, "idle/1000us", "serial lost during the test")
    after = run.record("cpu100/1000us")
    assert after["verdict"] == "pass", after["message"]
    # a fresh console and a fresh boot (the first attempt may still find the adapter
    # unplugged; the retry, BOOT_RETRY_DELAY_S later, gets it)
    boots = run.attempts("cpu100/1000us", "boot")
    assert boots and boots[-1]["ok"]
    assert run.attempts("cpu100/1000us", "flash") == []
    assert_cleaned_up(vlab, sdmux="dut")
