"""A board switched off and on again stays off for at least its power driver's ``delay``
(what its supply needs to discharge): labgrid waits it only in ``cycle``, which the
strategy never calls. The off time runs from the PDU's confirmation of the off, so the
time spent on the console meanwhile counts. The board is test_boot_watch's console on
loopback that plays a boot once the (fake) PDU switches it on."""

import logging
import re
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from rtlab.lab.strategy import RTLabStrategy
from tests.unit.test_boot_watch import FakeBoard, boot

BOOTS = ["[    1.0] Booting Linux\r\n", 0.2, "\r\nrtlab login: "]


@pytest.fixture
def board(tmp_path, monkeypatch) -> Iterator[tuple[RTLabStrategy, FakeBoard]]:
    """A board that boots, behind a PDU driver whose delay the test sets."""
    strategy, fake = boot(tmp_path, monkeypatch, BOOTS)
    yield strategy, fake
    strategy.target.cleanup()
    if strategy._tap is not None:
        # a tap left subscribed would read the next test's console steps
        strategy._tap.close()
    fake.close()


def record_switches(board: FakeBoard) -> list[tuple[bool, float]]:
    """When the PDU was asked to switch, and to what: (on, time.monotonic())."""
    switches: list[tuple[bool, float]] = []
    power_set = board.power_set

    def recording(host: str, port: int | None, index: int, value: bool) -> None:
        switches.append((value, time.monotonic()))
        power_set(host, port, index, value)

    board.power_set = recording  # type: ignore[method-assign]
    return switches


def off_time(switches: list[tuple[bool, float]]) -> float:
    """From the boot's off request to its on request."""
    assert [on for on, _ in switches] == [False, True], switches
    return switches[1][1] - switches[0][1]


def boot_with_delay(board: tuple[RTLabStrategy, FakeBoard], delay: float,
                    ) -> list[tuple[bool, float]]:
    strategy, fake = board
    strategy.power.delay = delay
    switches = record_switches(fake)
    strategy._boot()
    assert fake.logins == 1
    return switches


def test_the_board_stays_off_for_the_power_driver_s_delay(board, caplog):
    caplog.set_level(logging.INFO, logger="rtlab.strategy")
    switches = boot_with_delay(board, 2.0)
    assert off_time(switches) >= 2.0
    assert re.search(r"outlet 1 off for 2\.\d s before power on \(delay 2 s\)", caplog.text)


def test_a_delay_of_0_does_not_wait(board):
    switches = boot_with_delay(board, 0.0)
    # only the console's activation and its drain (0.3 s of quiet) between off and on
    assert off_time(switches) < 1.5


def test_time_spent_draining_the_console_counts_towards_the_delay(board):
    delay = 1.5
    strategy, fake = board
    strategy.power.delay = delay
    switches = record_switches(fake)

    def trickle() -> None:
        # what a board printed before its switch-off, still arriving for 1 s after it
        while fake.conn is None:
            time.sleep(0.01)
        for _ in range(5):
            fake.conn.sendall(b"[   30.1] end of the last boot\r\n")
            time.sleep(0.2)

    threading.Thread(target=trickle, daemon=True).start()
    strategy._boot()
    assert fake.logins == 1
    # the drain (1 s of output, 0.3 s of quiet) ran within the delay, not before it
    assert delay <= off_time(switches) < delay + 0.9


def test_a_power_driver_without_a_delay_keeps_the_board_off_for_no_extra_time(
        board, monkeypatch):
    strategy, _ = board
    # labgrid's ManualPowerDriver and others have no delay
    monkeypatch.setattr(strategy, "power", SimpleNamespace())
    assert strategy._off_delay() == 0.0
