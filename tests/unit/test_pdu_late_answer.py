"""A PDU request rtlab gave up on can still be carried out: the strategy never sends a
new request while one it abandoned may still end, and a late "on" never leaves the board
powered after cleanup. A fake backend (no PDU, no network) answers when the test says."""

import logging
import re
import threading
import time
from pathlib import Path

import pytest
from labgrid import Environment

from rtlab.lab.strategy import RTLabStrategy
from rtlab.util.errors import PowerError
from tests.pdu_env import PDU_URL, TIMEOUT_S, env_file


class LatePdu:
    """labgrid's simplerest backend as a PDU would behave: ``power_set`` carries the
    request out, then answers; a request whose value is in ``hold`` waits for the test's
    ``release`` first (the PDU stalls). Every switch it carries out is in ``log``."""

    def __init__(self) -> None:
        self.on = False
        self.log: list[tuple[str, float]] = []
        self.hold: set[bool] = set()
        self.released = threading.Event()
        self.gets = 0
        self.on_off: list[object] = []

    def power_set(self, host: str, port: int | None, index: int, value: bool) -> None:
        assert (host, port, index) == (PDU_URL, None, "3")
        if value in self.hold:
            self.hold.discard(value)
            self.released.wait(30)
        self.on = value
        self.log.append(("on" if value else "off", time.monotonic()))
        for hook in self.on_off:
            hook(value)

    def power_get(self, host: str, port: int | None, index: int) -> bool:
        self.gets += 1
        return self.on


# not "strategy": labgrid's pytest plugin claims that fixture name
@pytest.fixture
def lab(tmp_path: Path, monkeypatch) -> tuple[RTLabStrategy, "LatePdu"]:
    path = env_file(tmp_path, driver="",
                    strategy=f"pdu_timeout: {TIMEOUT_S}, pdu_attempts: 1")
    target = Environment(str(path)).get_target("main")
    strategy = target.get_driver(RTLabStrategy)
    target.activate(strategy.power)
    pdu = LatePdu()
    monkeypatch.setattr(strategy.power, "backend", pdu)
    # the SD mux is not what these tests are about
    monkeypatch.setattr(type(strategy.sdmux), "set_mode", lambda self, mode: None)
    yield strategy, pdu
    pdu.released.set()
    target.cleanup()


def pdu_problems(problems: list[str]) -> list[str]:
    return [problem for problem in problems if "PDU" in problem]


def test_a_late_on_after_the_cleanup_s_off_is_switched_off_again(lab, caplog):
    strategy, pdu = lab
    caplog.set_level(logging.INFO, logger="rtlab.strategy")
    caplog.set_level(logging.INFO, logger="rtlab.pdu")
    pdu.hold.add(True)
    with pytest.raises(PowerError, match=r"no answer within 0.5 s to power on on outlet 3"):
        strategy._pdu("on", strategy.power.on)
    # the stalled PDU carries the "on" out just after cleanup's "off"
    pdu.on_off.append(lambda value: value is False and pdu.released.set())
    problems = strategy.cleanup()
    assert pdu_problems(problems) == []
    assert [what for what, _ in pdu.log] == ["off", "on", "off"]
    assert not pdu.on and pdu.gets == 1
    assert "ended after the last switch-off: switching off again" in caplog.text
    assert "PDU: outlet 3 reads off" in caplog.text


def test_an_on_still_unanswered_at_cleanup_is_a_problem_it_reports(lab, caplog):
    strategy, pdu = lab
    pdu.hold.add(True)
    with pytest.raises(PowerError):
        strategy._pdu("on", strategy.power.on)
    started = time.monotonic()
    problems = strategy.cleanup()
    # the "off" waited for the stalled "on", and cleanup waited for it again: bounded
    assert time.monotonic() - started < 4 * TIMEOUT_S + 1
    assert pdu.log[-1][0] == "off"
    [problem] = pdu_problems(problems)
    assert re.fullmatch(r"PDU: a request to power on on outlet 3 is still unanswered after "
                        r"\d+ s; the outlet may switch on later", problem), problem
    assert "still unanswered" in caplog.text


def test_a_new_request_waits_for_the_one_abandoned_before_it(lab, caplog):
    strategy, pdu = lab
    pdu.hold.add(True)
    with pytest.raises(PowerError):
        strategy._pdu("on", strategy.power.on)
    # the PDU answers a little after rtlab gave up, before the next request's wait ends
    threading.Timer(TIMEOUT_S / 2, pdu.released.set).start()
    strategy._pdu("off", strategy.power.off)
    assert [what for what, _ in pdu.log] == ["on", "off"], "sent only after the late one"
    assert not pdu.on
    assert "abandoned request to power on on outlet 3 ended" in caplog.text
    # the "off" came after the late "on": nothing to do at cleanup
    assert pdu_problems(strategy.cleanup()) == []
    assert [what for what, _ in pdu.log] == ["on", "off", "off"]
    assert pdu.gets == 0


def test_without_abandoned_requests_cleanup_switches_off_once(lab):
    strategy, pdu = lab
    strategy._pdu("on", strategy.power.on)
    assert pdu_problems(strategy.cleanup()) == []
    assert [what for what, _ in pdu.log] == ["on", "off"]
    assert pdu.gets == 0
