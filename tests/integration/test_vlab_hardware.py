"""The emulated lab hardware answers like the real one: labgrid's own PDU backend switches
outlets, the SD mux hides the card from the host unless in host mode, and the serial line
stays connected across power cycles."""

import subprocess

import pytest
import requests
import serial
from labgrid.driver.power import simplerest

from rtlab.util import paths
from rtlab.vlab.config import LOOPBACK
from rtlab.vlab.rack import host_view_path


def pdu_url(vlab) -> str:
    return f"{vlab.api_url}/pdu/{{index}}/{{value}}"


def set_mux(vlab, place: str, mode: str) -> requests.Response:
    return requests.put(f"{vlab.api_url}/sdmux/{place}", data=mode, timeout=5)


@pytest.fixture
def rpi3(vlab):
    """rpi3-01 with its card taken out of the board's reach (mux off): power-on then
    reaches the bootloader and stops, without QEMU."""
    board = vlab.board("rpi3-01")
    assert set_mux(vlab, board.place, "off").status_code == 200
    yield board
    simplerest.power_set(pdu_url(vlab), None, board.outlet, False)


def test_labgrid_simplerest_backend_switches_the_outlet(vlab, rpi3):
    simplerest.power_set(pdu_url(vlab), None, rpi3.outlet, True)
    assert simplerest.power_get(pdu_url(vlab), None, rpi3.outlet) is True
    simplerest.power_set(pdu_url(vlab), None, rpi3.outlet, False)
    assert simplerest.power_get(pdu_url(vlab), None, rpi3.outlet) is False


def test_power_on_is_refused_while_the_card_is_on_the_host(vlab, rpi3, tmp_path):
    host_view = vlab_host_view(vlab, rpi3.place)
    assert not host_view.exists()
    assert set_mux(vlab, rpi3.place, "host").text == "host"
    assert host_view.exists()
    with pytest.raises(requests.HTTPError, match="409"):
        simplerest.power_set(pdu_url(vlab), None, rpi3.outlet, True)
    assert simplerest.power_get(pdu_url(vlab), None, rpi3.outlet) is False
    assert set_mux(vlab, rpi3.place, "dut").status_code == 200
    assert not host_view.exists()


def vlab_host_view(vlab, place: str):
    return host_view_path(paths.vlab_state_dir(), place)


def test_serial_line_stays_open_across_power_cycles(vlab, rpi3):
    # an RFC 2217 client, as labgrid's SerialDriver is for the exported NetworkSerialPort
    line = serial.serial_for_url(f"rfc2217://{LOOPBACK}:{rpi3.serial_port}", timeout=10)
    try:
        simplerest.power_set(pdu_url(vlab), None, rpi3.outlet, True)
        first = line.read_until(b"no SD card")
        assert b"rtlab-vboot: rpi3 power on" in first and b"no SD card" in first
        simplerest.power_set(pdu_url(vlab), None, rpi3.outlet, False)
        simplerest.power_set(pdu_url(vlab), None, rpi3.outlet, True)
        assert b"no SD card" in line.read_until(b"no SD card")
    finally:
        line.close()


def test_bad_requests_name_the_valid_values(vlab, rpi3):
    reply = requests.get(f"{vlab.api_url}/pdu/9", timeout=5)
    assert reply.status_code == 404 and "valid: 1, 2, 3" in reply.text
    reply = set_mux(vlab, rpi3.place, "sideways")
    assert reply.status_code == 400 and "valid: dut, host, off" in reply.text
    reply = requests.get(f"{vlab.api_url}/pdu/1/2", timeout=5)
    assert reply.status_code == 400


def test_everything_listens_on_loopback_only(vlab):
    ports = {vlab.coordinator_port, vlab.api_port, *(b.serial_port for b in vlab.boards)}
    listening = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True,
                               check=True).stdout.splitlines()
    for line in listening:
        local = line.split()[3]
        port = int(local.rsplit(":", 1)[1])
        if port in ports:
            # gRPC binds the coordinator as an IPv4-mapped IPv6 socket: still loopback
            assert local.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:")), line
            ports.discard(port)
    assert not ports, f"not listening: {ports}"
