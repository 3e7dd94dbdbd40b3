"""An SDWire switches its card between the board and the host only: labgrid's
``USBSDWireDriver`` raises on ``set_mode("off")``. The strategy never asks it for "off":
cleanup leaves a half-written card with the host (where the board can not boot it), and
a flash retry replugs the card on the host through the board's side. A USB-SD-Mux, which
has an off, is still switched off. The drivers are labgrid's own; only the commands they
run (``sd-mux-ctrl``, ``usbsdmux``) are recorded instead of run, and the PDU is a stand-in
backend."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from labgrid import Environment
from labgrid.driver import USBSDWireDriver, USBStorageDriver
from labgrid.driver.exception import ExecutionError
from labgrid.resource.remote import NetworkUSBSDMuxDevice, NetworkUSBSDWireDevice
from labgrid.util.helper import processwrapper

import rtlab.lab.strategy
from rtlab.lab.strategy import RTLabStrategy
from tests.pdu_env import PDU_URL

MUXES = {
    # driver: (its resource, the resource's settings, the tool named under tools:)
    "USBSDWireDriver": ("NetworkUSBSDWireDevice", "control_serial: sdwire-07",
                        "sd-mux-ctrl"),
    "USBSDMuxDriver": ("NetworkUSBSDMuxDevice", "control_path: /dev/sg1", "usbsdmux"),
}


class Pdu:
    """labgrid's simplerest backend, answering at once."""

    def __init__(self) -> None:
        self.on = False

    def power_set(self, host: str, port: int | None, index: int, value: bool) -> None:
        self.on = value

    def power_get(self, host: str, port: int | None, index: int) -> bool:
        return self.on


def env_file(tmp_path: Path, driver: str) -> Path:
    resource, setting, tool = MUXES[driver]
    path = tmp_path / "env.yaml"
    path.write_text(f"""\
imports:
  - rtlab.lab
targets:
  main:
    resources:
      NetworkSerialPort:
        host: 127.0.0.1
        port: 9
      NetworkPowerPort:
        model: simplerest
        host: '{PDU_URL}'
        index: 3
      {resource}:
        host: labhost-01
        busnum: 1
        devnum: 2
        path: /dev/sdb
        vendor_id: 1
        model_id: 2
        {setting}
    drivers:
      NetworkPDUDriver:
        delay: 0.0
      SerialDriver: {{}}
      ShellDriver:
        login_prompt: 'login: '
        username: root
        prompt: '# '
      {driver}: {{}}
      USBStorageDriver: {{}}
      RTLabStrategy: {{}}
tools:
  {tool}: /usr/bin/{tool}
images:
  sdcard: {tmp_path}/sdcard.img
""")
    return path


@pytest.fixture(params=sorted(MUXES))
def place(request, tmp_path, monkeypatch) -> Iterator[tuple[RTLabStrategy, list[list[str]]]]:
    """A place with the mux driver of the test's parameter; the commands the mux and
    storage drivers run are recorded, not run (they would reach the exporter by SSH)."""
    target = Environment(str(env_file(tmp_path, request.param))).get_target("main")
    strategy = target.get_driver(RTLabStrategy, activate=False)
    # the resource as the coordinator would report it (exported, available), with no
    # SSH to the exporter in front of the commands
    for resource in (NetworkUSBSDWireDevice, NetworkUSBSDMuxDevice):
        monkeypatch.setattr(resource, "poll", lambda self: None)
        monkeypatch.setattr(resource, "command_prefix", property(lambda self: []))
    strategy.sdmux.mux.avail = True
    commands: list[list[str]] = []
    monkeypatch.setattr(processwrapper, "check_output",
                        lambda command, **_: commands.append(list(command)) or b"")
    target.activate(strategy.power)
    monkeypatch.setattr(strategy.power, "backend", Pdu())
    yield strategy, commands
    target.cleanup()


def mux_modes(commands: list[list[str]]) -> list[str]:
    """The modes the mux was switched to, as its tool was told."""
    modes = []
    for command in commands:
        if command[0] == "/usr/bin/sd-mux-ctrl":
            modes.append("dut" if "--dut" in command else "host")
        elif command[0] == "/usr/bin/usbsdmux":
            modes.append(command[2])
    return modes


def sdwire(strategy: RTLabStrategy) -> bool:
    return isinstance(strategy.sdmux, USBSDWireDriver)


@pytest.mark.parametrize("place", ["USBSDWireDriver"], indirect=True)
def test_labgrid_s_sdwire_driver_has_no_off(place):
    strategy, commands = place
    strategy.target.activate(strategy.sdmux)
    # what the strategy must never ask of it: if labgrid starts accepting "off", the
    # strategy may use it again
    with pytest.raises(ExecutionError, match="not supported by USBSDWireDriver"):
        strategy.sdmux.set_mode("off")
    assert commands == []


def test_cleanup_leaves_a_half_written_card_where_the_board_can_not_boot_it(place):
    strategy, commands = place
    strategy.card_complete = False
    problems = strategy.cleanup()
    assert problems == []
    assert mux_modes(commands) == ["host" if sdwire(strategy) else "off"]


def test_cleanup_hands_a_complete_card_to_the_board(place):
    strategy, commands = place
    strategy.card_complete = True
    assert strategy.cleanup() == []
    assert mux_modes(commands) == ["dut"]


def test_a_flash_retry_replugs_the_card_on_the_host(place, monkeypatch, tmp_path):
    strategy, commands = place
    written: list[str] = []
    monkeypatch.setattr(USBStorageDriver, "write_image",
                        lambda self, image, mode: written.append(image))
    monkeypatch.setattr(rtlab.lab.strategy, "verify_card", lambda *args: None)
    image = str(tmp_path / "sdcard.img")
    strategy._flash_once(image, replug=True)
    assert written == [image]
    assert strategy.card_complete
    away = "dut" if sdwire(strategy) else "off"
    assert mux_modes(commands) == [away, "host", "dut"]
    if sdwire(strategy):
        assert all(command[-2:] == ["-e", "sdwire-07"] for command in commands
                   if command[0] == "/usr/bin/sd-mux-ctrl")

