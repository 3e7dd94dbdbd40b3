"""The virtual rack owns its ports or refuses (issue 33): with another labgrid coordinator
on its coordinator port, as on a machine that serves a real lab, `rtlab vlab start` fails
naming the port, the process and the setting, and creates nothing in that coordinator.

The rack here has its own ports and state folder, so the other tests' rack may run beside
it; it starts no QEMU board. About 15 s."""

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtlab.lab import client as labgrid_client
from rtlab.vlab import control, ports
from rtlab.vlab.config import LOOPBACK, VlabConfig
from rtlab.vlab.server import VirtualRack
from tests.integration.rackports import rack_config_on_free_ports

BINDIR = Path(sys.executable).parent


@pytest.fixture
def rack_config(tmp_path) -> VlabConfig:
    return rack_config_on_free_ports(tmp_path)


@pytest.fixture
def foreign_coordinator(rack_config, tmp_path):
    """A lab's coordinator, started by someone else, on the rack's coordinator port."""
    folder = tmp_path / "foreign"
    folder.mkdir()
    proc = subprocess.Popen(
        [BINDIR / "labgrid-coordinator", "--listen", rack_config.coordinator_address],
        cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        env=labgrid_client.environment())
    deadline = time.monotonic() + 30
    while not ports.held_by(rack_config.coordinator_port, proc.pid):
        assert proc.poll() is None, "the foreign coordinator did not start"
        assert time.monotonic() < deadline, "the foreign coordinator does not listen"
        time.sleep(0.1)
    yield proc
    proc.terminate()
    proc.wait(10)


def client(config: VlabConfig, *args: str) -> str:
    return subprocess.run(
        [BINDIR / "labgrid-client", "-x", config.coordinator_address, *args],
        capture_output=True, text=True, check=True, env=labgrid_client.environment(),
        timeout=60).stdout


def assert_untouched(config: VlabConfig, foreign: subprocess.Popen) -> None:
    assert foreign.poll() is None, "the foreign coordinator died"
    assert client(config, "places").strip() == ""
    assert client(config, "resources").strip() == ""


def assert_names_the_port(message: str, config: VlabConfig, foreign: subprocess.Popen) -> None:
    assert (f"port {config.coordinator_port} on {LOOPBACK} (the labgrid coordinator, "
            f"'coordinator_port' in {config.path}) is taken by pid {foreign.pid} ("
            in message), message
    assert "labgrid-coordinator --listen" in message, message
    assert "set 'coordinator_port' to a free port" in message, message


def test_start_refuses_a_port_held_by_a_foreign_coordinator(
        rack_config, foreign_coordinator, tmp_path):
    state_dir = tmp_path / "state"
    with pytest.raises(control.VlabError) as refused:
        control.start(rack_config, state_dir)
    message = str(refused.value)
    assert message.startswith("the virtual rack cannot start: "), message
    assert_names_the_port(message, rack_config, foreign_coordinator)
    # only the taken port is named
    assert message.count("is taken by") == 1, message
    assert control.running_pid(state_dir) is None
    assert not (state_dir / "vlab.pid").exists()
    assert_untouched(rack_config, foreign_coordinator)


def test_serve_refuses_it_too(rack_config, foreign_coordinator, tmp_path):
    """`rtlab vlab serve`, run without `start`, checks the ports itself."""
    env = {**os.environ, "RTLAB_CACHE": os.fspath(tmp_path / "cache")}
    served = subprocess.run(
        [BINDIR / "rtlab", "vlab", "serve", "--config", os.fspath(rack_config.path)],
        capture_output=True, text=True, env=env, timeout=60, check=False)
    assert served.returncode != 0
    assert_names_the_port(served.stderr, rack_config, foreign_coordinator)
    assert_untouched(rack_config, foreign_coordinator)


def test_a_coordinator_that_takes_the_port_after_the_check_is_found_too(
        rack_config, foreign_coordinator, tmp_path, monkeypatch):
    """The port check and the coordinator's start are two steps: a coordinator that takes
    the port between them must not get the rack's exporter or places either."""
    monkeypatch.setattr(ports, "check_free", lambda config: None)
    rack = VirtualRack(rack_config, tmp_path / "state")

    async def start_and_stop() -> None:
        try:
            await rack.start(with_labgrid=True)
        finally:
            await rack.stop()

    with pytest.raises(ports.PortTaken) as refused:
        asyncio.run(start_and_stop())
    assert_names_the_port(str(refused.value), rack_config, foreign_coordinator)
    assert "exporter" not in rack.services
    assert not rack.ready
    assert_untouched(rack_config, foreign_coordinator)


def refused_beside_a_listener(config: VlabConfig, tmp_path: Path, family: int,
                              address: str) -> str:
    """Why `rtlab vlab start` refuses while this process listens on the rack's API port
    at ``address`` (IPv6 only, for an IPv6 address)."""
    holder = socket.socket(family)
    if family == socket.AF_INET6:
        holder.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind((address, config.api_port))
    holder.listen()
    try:
        with pytest.raises(control.VlabError) as refused:
            control.start(config, tmp_path / "state")
    finally:
        holder.close()
    return str(refused.value)


def test_any_port_of_the_rack_is_checked(rack_config, tmp_path):
    """Not the coordinator's alone: here this process listens on the API port (as another
    rack's API would, answering /status "ready" as ours does)."""
    message = refused_beside_a_listener(rack_config, tmp_path, socket.AF_INET, LOOPBACK)
    assert (f"port {rack_config.api_port} on {LOOPBACK} (the PDU and SD mux API, "
            f"'api_port' in {rack_config.path}) is taken by pid {os.getpid()} (") in message


def test_a_coordinator_on_ipv6_loopback_alone_is_refused_too(rack_config, tmp_path):
    """`localhost` may reach [::1] first: a coordinator there, with 127.0.0.1 free, would
    still be the one a client of the rack talks to."""
    folder = tmp_path / "foreign6"
    folder.mkdir()
    proc = subprocess.Popen(
        [BINDIR / "labgrid-coordinator", "--listen", f"[::1]:{rack_config.coordinator_port}"],
        cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        env=labgrid_client.environment())
    try:
        deadline = time.monotonic() + 30
        while not ports.held_by(rack_config.coordinator_port, proc.pid):
            assert proc.poll() is None, "the foreign coordinator did not start"
            assert time.monotonic() < deadline, "the foreign coordinator does not listen"
            time.sleep(0.1)
        with pytest.raises(control.VlabError) as refused:
            control.start(rack_config, tmp_path / "state")
    finally:
        proc.terminate()
        proc.wait(10)
    message = str(refused.value)
    assert f"is taken by pid {proc.pid} (" in message, message
    assert "listening on [::1]" in message, message
    assert control.running_pid(tmp_path / "state") is None


def test_a_listener_on_the_ipv6_wildcard_alone_is_refused(rack_config, tmp_path):
    """[::] with IPV6_V6ONLY leaves both loopbacks bindable: the listeners show it."""
    message = refused_beside_a_listener(rack_config, tmp_path, socket.AF_INET6, "::")
    assert f"'api_port' in {rack_config.path}) is taken by pid {os.getpid()} (" in message
    assert "listening on [::]" in message, message
