"""The exporter image does a lab host's job: run as docker/exporter/Dockerfile says (host
networking, the host's exporter file and the clients' keys as volumes), it exports the
virtual boards' serial ports and PDU to a coordinator, and a client on the host acquires a
place, powers it and reads its console through the container's SSH, as labgrid reaches a
remote lab host (LG_PROXY), never straight to the ports. About 30 s; no QEMU boot: the
powered slot has no card, so its bootloader's lines are the console's output."""

import os
import re
import socket
import subprocess
import sys
import textwrap

import pytest
import requests

from rtlab.lab import client as labgrid_client
from rtlab.vlab import ports
from rtlab.vlab.config import LOOPBACK
from rtlab.vlab.server import exporter_config
from tests.images.conftest import BINDIR, labgrid, wait_for

# docker/exporter/sshd-labgrid.conf: with host networking the lab host keeps port 22
SSH_PORT = 2222
EXPORTER = "labhost-vlab"
PLACE = "imx6q-01"


@pytest.fixture
def coordinator(rack, tmp_path):
    config, _ = rack
    folder = tmp_path / "coordinator"
    folder.mkdir()
    proc = subprocess.Popen([BINDIR / "labgrid-coordinator", "--listen",
                             config.coordinator_address], cwd=folder, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, env=labgrid_client.environment())
    wait_for("the coordinator listens",
             lambda: ports.held_by(config.coordinator_port, proc.pid), 30)
    yield config.coordinator_address
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def client_keys(tmp_path):
    """A client's key, and the ssh configuration a person has for a lab host
    (~/.ssh/config: Host, Port 2222, User labgrid), given to labgrid's ssh by a wrapper
    first on PATH, since ssh reads the user's own files from the passwd entry, not $HOME."""
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
    (tmp_path / "ssh_config").write_text(textwrap.dedent(f"""\
        Host {EXPORTER}
          HostName {LOOPBACK}
          Port {SSH_PORT}
          User labgrid
          IdentityFile {key}
          IdentitiesOnly yes
          UserKnownHostsFile {tmp_path / "known_hosts"}
        """))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "ssh"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >>{tmp_path / "ssh.log"}\n'
                       f'exec /usr/bin/ssh -F {tmp_path / "ssh_config"} "$@"\n')
    wrapper.chmod(0o755)
    return key.with_suffix(".pub"), bindir, tmp_path / "ssh.log"


@pytest.fixture
def exporter_container(docker, built_image, rack, coordinator, client_keys, tmp_path):
    config, state_dir = rack
    public_key, _, _ = client_keys
    with socket.socket() as probe:
        try:
            probe.bind((LOOPBACK, SSH_PORT))
        except OSError:
            pytest.fail(f"port {SSH_PORT} is taken on this host: the exporter image's sshd "
                        "needs it (docker/exporter/sshd-labgrid.conf)")
    exporter_file = tmp_path / "exporter.yaml"
    exporter_file.write_text(exporter_config(config, state_dir))
    public_key.chmod(0o644)
    name = f"rtlab-test-exporter-{os.getpid()}"
    docker("run", "-d", "--name", name, "--network", "host",
           "-v", f"{exporter_file}:/etc/labgrid/exporter.yaml:ro",
           "-v", f"{public_key}:/home/labgrid/.ssh/authorized_keys:ro",
           "-e", f"LG_COORDINATOR={coordinator}", "-e", f"LG_EXPORTER_NAME={EXPORTER}",
           built_image("exporter"))
    # the host key, as a person checks it at first contact (labgrid's ssh is strict)
    def host_key() -> str:
        return subprocess.run(["ssh-keyscan", "-p", str(SSH_PORT), "-t", "ed25519", LOOPBACK],
                              capture_output=True, text=True, check=False).stdout
    wait_for("the container's sshd answers", lambda: host_key().strip() != "", 30)
    (tmp_path / "known_hosts").write_text(host_key())
    yield name
    logs = docker("logs", name, check=False)
    docker("rm", "-f", name, check=False)
    print(f"exporter container's log:\n{logs.stdout}{logs.stderr}")


def test_a_client_drives_a_place_through_the_exporter_container(
        rack, coordinator, client_keys, exporter_container, docker, tmp_path):
    config, _ = rack
    _, ssh_bindir, ssh_log = client_keys
    expected = {f"{EXPORTER}/{PLACE}/{cls}" for cls in ("NetworkSerialPort", "NetworkPowerPort")}
    wait_for("the container's exporter registers the place's resources",
             lambda: expected <= set(labgrid(coordinator, "resources").split()))
    labgrid(coordinator, "-p", PLACE, "create")
    labgrid(coordinator, "-p", PLACE, "add-match", f"{EXPORTER}/{PLACE}/*")
    labgrid(coordinator, "-p", PLACE, "acquire")

    # a client of a remote lab host: every connection through the host's SSH
    env = {**labgrid_client.environment(), "LG_COORDINATOR": coordinator,
           "LG_PROXY": EXPORTER, "PATH": f"{ssh_bindir}{os.pathsep}{os.environ['PATH']}"}
    (tmp_path / "env.yaml").write_text(textwrap.dedent(f"""\
        targets:
          main:
            resources:
              RemotePlace:
                name: {PLACE}
            drivers:
              NetworkPowerDriver: {{}}
              SerialDriver: {{}}
        """))
    script = textwrap.dedent(f"""\
        from labgrid import Environment
        import rtlab.lab.drivers  # the virtual SD mux's resources, as rtlab's clients have
        target = Environment({os.fspath(tmp_path / "env.yaml")!r}).get_target("main")
        serial = target.get_driver("SerialDriver")
        power = target.get_driver("NetworkPowerDriver")
        power.on()
        serial.expect("rtlab-vboot: imx6q power on, reading SD card", timeout=60)
        serial.expect("no SD card", timeout=30)
        print("power", power.get(), flush=True)
        power.off()
        print("power", power.get(), flush=True)
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=180, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines == ["power True", "power False"], done.stdout
    # labgrid's ssh to the lab host forwarded the serial port and the PDU's API
    calls = ssh_log.read_text()
    for port in (config.coordinator_port, config.board(PLACE).serial_port, config.api_port):
        assert re.search(rf"-O forward -L\d+:{LOOPBACK}:{port} {EXPORTER}$", calls, re.M), \
            (port, calls)
    # the rack saw the power cycle
    slots = requests.get(f"{config.api_url}/status", timeout=5).json()["boards"]
    slot = next(s for s in slots if s["place"] == PLACE)
    assert slot["power"] == "off"
    console = (tmp_path / "cache" / "vlab" / "logs" / PLACE / "console.log").read_text(
        errors="replace")
    assert "rtlab-vboot: imx6q power on" in console
    labgrid(coordinator, "-p", PLACE, "release")
    # the exporter ran inside the container, as the unprivileged user
    uid = docker("exec", exporter_container, "id", "-u", "labgrid").stdout.strip()
    processes = docker("top", exporter_container, "-eo", "pid,uid,args").stdout
    assert any(line.split()[1] == uid and "bin/labgrid-exporter" in line
               for line in processes.splitlines()[1:]), processes
