"""rtlab.lab.pdu: NetworkPDUDriver binds labgrid's NetworkPowerPort and switches it through
the port's power backend, with the resource's host and index, each request bounded in
time. A stand-in backend (no PDU, no network) answers, or never does."""

import threading
import time
from pathlib import Path

import pytest
from labgrid import Environment
from labgrid.protocol import PowerProtocol

from rtlab.lab.pdu import NetworkPDUDriver, PduTimeout
from rtlab.lab.strategy import RTLabStrategy
from rtlab.util.errors import PowerError
from tests.pdu_env import PDU_URL, TIMEOUT_S, env_file


class Backend:
    """A labgrid power backend module's public functions, recording each call; a call
    whose kind is in ``stall`` waits for the test's ``release`` first (the PDU stalls)."""

    def __init__(self) -> None:
        self.on = False
        self.calls: list[tuple] = []
        self.stall: set[str] = set()
        self.release = threading.Event()

    def power_set(self, host: str, port: int | None, index: str, value: bool) -> None:
        kind = "on" if value else "off"
        if kind in self.stall:
            self.stall.discard(kind)
            self.release.wait(30)
        self.on = value
        self.calls.append((kind, host, port, index))

    def power_get(self, host: str, port: int | None, index: str) -> bool:
        if "get" in self.stall:
            self.release.wait(30)
        self.calls.append(("get", host, port, index))
        return self.on


class SetOnly:
    """A backend that can switch but not read the outlet back."""

    def __init__(self) -> None:
        self.calls: list[bool] = []

    def power_set(self, host: str, port: int | None, index: str, value: bool) -> None:
        self.calls.append(value)


@pytest.fixture
def made(monkeypatch):
    """Makes the target of an environment file; its driver switches through a stand-in
    backend. Cleans up and lets stalled requests end afterwards."""
    targets = []
    backends = []

    def make(path: Path, pdu: object | None = None
             ) -> tuple[object, NetworkPDUDriver, Backend]:
        target = Environment(str(path)).get_target("main")
        targets.append(target)
        driver = target.get_driver(NetworkPDUDriver)
        pdu = pdu or Backend()
        backends.append(pdu)
        monkeypatch.setattr(driver, "backend", pdu)
        return target, driver, pdu

    yield make
    for pdu in backends:
        if isinstance(pdu, Backend):
            pdu.release.set()
    for target in targets:
        target.cleanup()


def test_it_is_the_target_s_power_protocol(tmp_path, made):
    target, driver, _ = made(env_file(tmp_path))
    assert isinstance(driver, PowerProtocol)
    assert target.get_driver("PowerProtocol") is driver
    assert target.get_driver(RTLabStrategy).power is driver


def test_on_off_and_get_reach_the_backend_with_the_resource_s_host_and_index(tmp_path, made):
    _, driver, pdu = made(env_file(tmp_path))
    driver.on()
    assert driver.get() is True
    driver.off()
    assert driver.get() is False
    where = (PDU_URL, None, "3")
    assert pdu.calls == [("on", *where), ("get", *where), ("off", *where), ("get", *where)]


def test_a_backend_with_a_fixed_tcp_port_gets_the_host_and_that_port(tmp_path, made):
    # labgrid's gude backend talks HTTP on its PORT, to the host the resource names
    _, driver, pdu = made(env_file(tmp_path, model="gude", host="pdu-01.lab"))
    driver.cycle()
    assert pdu.calls == [("off", "pdu-01.lab", 80, "3"), ("on", "pdu-01.lab", 80, "3")]


def test_cycle_switches_off_waits_the_delay_and_switches_on(tmp_path, made):
    _, driver, pdu = made(env_file(tmp_path, driver="delay: 0.4"))
    times: list[float] = []
    real_set = pdu.power_set

    def timed_set(*args: object) -> None:
        times.append(time.monotonic())
        real_set(*args)

    pdu.power_set = timed_set
    driver.cycle()
    assert [call[0] for call in pdu.calls] == ["off", "on"]
    assert times[1] - times[0] >= 0.4


@pytest.mark.parametrize("kind", ["on", "off", "get"])
def test_a_pdu_that_never_answers_is_an_error_within_the_timeout(tmp_path, made, kind):
    _, driver, pdu = made(env_file(tmp_path))
    pdu.stall.add(kind)
    started = time.monotonic()
    what = "reading outlet 3 back" if kind == "get" else f"power {kind} on outlet 3"
    with pytest.raises(PduTimeout, match=rf"^PDU: no answer within 0.5 s to {what}$"):
        getattr(driver, kind)()
    assert TIMEOUT_S <= time.monotonic() - started < TIMEOUT_S + 0.5
    assert issubclass(PduTimeout, PowerError)


def test_the_backend_s_own_error_comes_through(tmp_path, made):
    _, driver, pdu = made(env_file(tmp_path))

    def refuse(*args: object) -> None:
        raise ConnectionRefusedError("connection refused")

    pdu.power_set = refuse
    with pytest.raises(ConnectionRefusedError):
        driver.on()


def test_a_late_on_is_told_and_the_outlet_read_back(tmp_path, made):
    _, driver, pdu = made(env_file(tmp_path))
    assert driver.late_on() is False
    pdu.stall.add("on")
    with pytest.raises(PduTimeout):
        driver.on()
    # the "off" waits for the stalled "on" (up to the timeout), then is sent; the PDU
    # carries the "on" out after it
    started = time.monotonic()
    driver.off()
    assert time.monotonic() - started >= TIMEOUT_S
    pdu.release.set()
    assert driver.late_on() is True
    assert pdu.on and [call[0] for call in pdu.calls] == ["off", "on"]
    assert driver.confirm_off() == ["PDU: outlet 3 reads on after switching it off again"]
    driver.off()
    assert driver.confirm_off() == []
    assert not pdu.on


def test_an_on_still_unanswered_is_an_error_within_the_timeout(tmp_path, made):
    _, driver, pdu = made(env_file(tmp_path))
    pdu.stall.add("on")
    with pytest.raises(PduTimeout):
        driver.on()
    started = time.monotonic()
    with pytest.raises(PowerError, match=r"^PDU: a request to power on on outlet 3 is still "
                                         r"unanswered after \d+ s; the outlet may switch on "
                                         r"later$"):
        driver.late_on()
    assert TIMEOUT_S <= time.monotonic() - started < TIMEOUT_S + 0.5


def test_an_on_answered_before_the_off_is_not_late(tmp_path, made):
    _, driver, pdu = made(env_file(tmp_path))
    pdu.stall.add("on")
    with pytest.raises(PduTimeout):
        driver.on()
    pdu.release.set()
    driver.off()
    assert driver.late_on() is False
    assert [call[0] for call in pdu.calls] == ["on", "off"]


def test_a_backend_that_cannot_read_back(tmp_path, made):
    _, driver, pdu = made(env_file(tmp_path), SetOnly())
    driver.off()
    assert not driver.readable
    with pytest.raises(PowerError, match="the simplerest backend can not read outlet 3 back"):
        driver.get()
    assert driver.confirm_off() == []
    assert pdu.calls == [False]


def test_the_strategy_s_pdu_timeout_sets_the_driver_s(tmp_path, made):
    _, driver, _ = made(env_file(tmp_path, driver="timeout: 7", strategy="pdu_timeout: 2"))
    assert driver.timeout == 2.0
    _, driver, _ = made(env_file(tmp_path, driver="timeout: 7"))
    assert driver.timeout == 7.0
    _, driver, _ = made(env_file(tmp_path, driver=""))
    assert driver.timeout == 30.0


def test_a_strategy_on_labgrid_s_unbounded_driver_says_so(tmp_path, caplog):
    path = env_file(tmp_path, driver="")
    path.write_text(path.read_text().replace("NetworkPDUDriver: {}",
                                             "NetworkPowerDriver: {}"))
    target = Environment(str(path)).get_target("main")
    try:
        assert "name NetworkPDUDriver in the environment file" in caplog.text
    finally:
        target.cleanup()
