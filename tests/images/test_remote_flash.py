"""A card flashed the way a test job flashes a physical board's: labgrid's own drivers
(USBSDMuxDriver, USBStorageDriver in bmaptool mode) on a RemotePlace, in a container of
the CI image, drive the exporter image's container over SSH. The job's `rtlab ssh setup`
writes the key, host key and settings from RTLAB_EXPORTER_SSH_* (File variables: paths);
labgrid copies the image with rsync into /var/cache/labgrid/<job's user>/<hash>/ on the
exporter, switches the mux with the usbsdmux at env/rack.yaml's tools: path, and
bmaptool writes the card; `rtlab lab doctor` checks the same SSH, rsync and tools. Then
the same job with rsync gone from the exporter, and with a tools: path where the exporter
has no usbsdmux: each fails, and the doctor names why. About 1 min.

Stand-ins, there being no USB-SD-Mux here: the exporter exports the mux as labgrid's
USBSDMuxExport would (a NetworkUSBSDMuxDevice: host, USB ids, the card's block device,
the control device); usbsdmux is tests/images/standin/usbsdmux, mounted where the tools:
name it, which records each mode in a file standing in for /dev/sg*; the card is a loop
device over a file of this test's (a block device, whose size labgrid reads from sysfs
and which bmaptool writes as a card), given to the container as a lab host's udev rules
give a card (group plugdev, 0660), and detached afterwards. That the image has the real
usbsdmux at that path is checked apart."""

import hashlib
import json
import os
import random
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from rtlab.lab import client as labgrid_client
from rtlab.lab import preflight
from rtlab.util import paths
from rtlab.vlab import ports
from rtlab.vlab.config import LOOPBACK
from tests.images.conftest import BINDIR, labgrid, wait_for

SSH_PORT = 2222  # docker/exporter/sshd-labgrid.conf
# the exporter's name and --hostname: the host its resources name, the Host of the
# pipeline's ssh settings
EXPORTER = "labhost-flash"
PLACE = "flash-01"
BOARD = "flash"
CONTROL = "/dev/rtlab-sg"
RACK = paths.REPO_ROOT / "env" / "rack.yaml"
STANDIN = Path(__file__).parent / "standin" / "usbsdmux"
# where GitLab's docker executor puts the commit; jobs run its rtlab (PYTHONPATH=.)
JOB_ROOT = "/builds/rtlab"
MIB = 1 << 20
CARD_SIZE = 16 * MIB
# the card's bytes before: bmaptool writes the image's mapped blocks only
FILL = b"\xa5"
# the image's data, at these offsets; the rest of its 8 MiB is holes
EXTENTS = ((0, 64 * 1024), (3 * MIB, 192 * 1024))
WRONG_TOOL = "/usr/local/bin/usbsdmux"
# the job's user in a GitLab docker executor's container: labgrid names the exporter's
# cache folder after it
JOB_USER = "root"

FLASH = """\
import logging
import sys

from labgrid import Environment
from labgrid.driver.usbstoragedriver import Mode
from labgrid.util.helper import processwrapper

# labgrid's own log of each command it runs and the command's output, as a job shows it
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
processwrapper.enable_logging()
target = Environment(sys.argv[1]).get_target("main")
mux = target.get_driver("USBSDMuxDriver")
storage = target.get_driver("USBStorageDriver")
mux.set_mode("host")
storage.write_image(sys.argv[2], mode=Mode.BMAPTOOL)
mux.set_mode("dut")
print("mode", mux.get_mode(), flush=True)
"""

# one CI job's steps, each one's output and exit status kept for the test
JOB = f"""\
set -u
out=/work/runs/$1
mkdir -p "$out"
step() {{ name=$1; shift; "$@" >"$out/$name.txt" 2>&1; echo $? >"$out/$name.rc"; }}
step setup rtlab ssh setup
step acquire labgrid-client -p {PLACE} acquire
step flash python3 /work/flash.py "$2" /work/images/sdcard.img
step doctor rtlab lab doctor --coordinator "$LG_COORDINATOR" --env "$3" --boards {BOARD} \\
    --json "$out/doctor.json"
step release labgrid-client -p {PLACE} release
"""


def rack_tools() -> dict[str, str]:
    """env/rack.yaml's tools:, as labgrid reads them."""
    return {tool: path for _, tool, path in preflight.needs_of(RACK).tools}


def flash_env(tools: dict[str, str]) -> str:
    """The physical rack's SD mux and storage drivers (env/rack.yaml's) on the place."""
    lines = ["targets:", "  main:", "    resources:", "      RemotePlace:",
             f"        name: {PLACE}", "    drivers:", "      USBSDMuxDriver: {}",
             "      USBStorageDriver: {}", "tools:"]
    return "\n".join(lines + [f"  {tool}: {path}" for tool, path in tools.items()]) + "\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("remote-flash")


@pytest.fixture(scope="module")
def coordinator(folder):
    address = f"{LOOPBACK}:{free_port()}"
    state = folder / "coordinator"
    state.mkdir()
    proc = subprocess.Popen([BINDIR / "labgrid-coordinator", "--listen", address], cwd=state,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            env=labgrid_client.environment())
    wait_for("the coordinator listens",
             lambda: ports.held_by(int(address.rsplit(":", 1)[1]), proc.pid), 30)
    yield address
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def image(folder) -> Path:
    """A sparse card image with its bmap, as the image stage makes them."""
    path = folder / "work" / "images" / "sdcard.img"
    path.parent.mkdir(parents=True)
    data = random.Random(53)
    with path.open("wb") as out:
        out.truncate(8 * MIB)
        for offset, length in EXTENTS:
            out.seek(offset)
            out.write(data.randbytes(length))
    bmaptool = shutil.which("bmaptool")
    assert bmaptool, "bmaptool (Debian's bmap-tools) makes the image's bmap here"
    subprocess.run([bmaptool, "create", "-o", f"{path}.bmap", path], check=True,
                   capture_output=True)
    return path


@pytest.fixture(scope="module")
def secrets(folder) -> Path:
    """The pipeline's File variables: the job's key, the exporter's host key (filled in
    when its sshd is up), its ssh settings."""
    where = folder / "secrets"
    where.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rtlab-ci",
                    "-f", where / "id_ed25519"], check=True)
    (where / "ssh_config").write_text(
        f"Host {EXPORTER}\n  HostName {LOOPBACK}\n  Port {SSH_PORT}\n  User labgrid\n")
    return where


@pytest.fixture(scope="module")
def card(folder):
    """The card: a loop device over a file of this test's, detached afterwards (by its
    name, the one this made)."""
    backing = folder / "card.img"
    backing.write_bytes(FILL * CARD_SIZE)
    attached = subprocess.run(["losetup", "--find", "--show", backing], capture_output=True,
                              text=True, check=False)
    if attached.returncode != 0:
        pytest.fail(f"no loop device for the card's stand-in: {attached.stderr.strip()} "
                    "(make test-images runs as root on a kernel with loop devices)")
    device = Path(attached.stdout.strip())
    yield device
    subprocess.run(["losetup", "--detach", device], check=False)


def write_card(device: Path, data: bytes) -> None:
    with device.open("r+b") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def read_card(device: Path) -> bytes:
    with device.open("rb") as card_in:
        return card_in.read(CARD_SIZE)


@pytest.fixture(scope="module")
def exporter(docker, built_image, coordinator, secrets, card, folder):
    """The exporter image, run as its Dockerfile says, exporting the stand-in mux and card
    of one place; the place made on the coordinator, tagged board=flash."""
    with socket.socket() as probe:
        try:
            probe.bind((LOOPBACK, SSH_PORT))
        except OSError:
            pytest.fail(f"port {SSH_PORT} is taken on this host: the exporter image's sshd "
                        "needs it (docker/exporter/sshd-labgrid.conf)")
    control = folder / "sg"
    control.write_text("")
    # labgrid's USBSDMuxExport's parameters, the ones the exporter sends for a real mux
    (folder / "exporter.yaml").write_text(
        f"{PLACE}:\n  NetworkUSBSDMuxDevice:\n    host: {EXPORTER}\n    busnum: 1\n"
        f"    devnum: 4\n    path: {card}\n    vendor_id: 0x0424\n    model_id: 0x4041\n"
        f"    control_path: {CONTROL}\n")
    keys = folder / "authorized_keys"
    shutil.copy(secrets / "id_ed25519.pub", keys)
    keys.chmod(0o644)
    name = f"rtlab-test-flash-{os.getpid()}"
    docker("run", "-d", "--name", name, "--network", "host",
           "-v", f"{folder / 'exporter.yaml'}:/etc/labgrid/exporter.yaml:ro",
           "-v", f"{keys}:/home/labgrid/.ssh/authorized_keys:ro",
           "--device", f"{card}", "-v", f"{control}:{CONTROL}",
           "-v", f"{STANDIN}:{rack_tools()['usbsdmux']}:ro",
           "-e", f"LG_COORDINATOR={coordinator}", "-e", f"LG_EXPORTER_NAME={EXPORTER}",
           built_image("exporter"))
    try:
        # the group and mode the udev rules give a USB-SD-Mux's devices
        docker("exec", name, "sh", "-c", f"chown root:plugdev {card} {CONTROL} && "
               f"chmod 0660 {card} {CONTROL}")

        def host_key() -> str:
            return subprocess.run(["ssh-keyscan", "-p", str(SSH_PORT), "-t", "ed25519",
                                   LOOPBACK], capture_output=True, text=True,
                                  check=False).stdout
        wait_for("the container's sshd answers", lambda: host_key().strip() != "", 30)
        (secrets / "known_hosts").write_text(host_key())
        wait_for("the exporter registers the mux", lambda: f"{EXPORTER}/{PLACE}/"
                 "NetworkUSBSDMuxDevice" in labgrid(coordinator, "resources"))
        labgrid(coordinator, "-p", PLACE, "create")
        labgrid(coordinator, "-p", PLACE, "add-match", f"{EXPORTER}/{PLACE}/*")
        labgrid(coordinator, "-p", PLACE, "set-tags", f"board={BOARD}")
        yield name, control
    finally:
        logs = docker("logs", name, check=False)
        docker("rm", "-f", name, check=False)
        print(f"exporter container's log:\n{logs.stdout}{logs.stderr}")


class Job:
    """One run of the job in a container of the CI image; its steps' outputs."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def text(self, step: str) -> str:
        return (self.folder / f"{step}.txt").read_text(errors="replace")

    def rc(self, step: str) -> int:
        return int((self.folder / f"{step}.rc").read_text())

    def findings(self, check: str) -> list[dict]:
        """The doctor's findings of ``check`` on the exporter host."""
        report = json.loads((self.folder / "doctor.json").read_text())
        return [f for f in report["checks"] if f["check"] == check and f["subject"] == EXPORTER]


@pytest.fixture
def job(docker, built_image, coordinator, exporter, card, image, secrets):
    name, control = exporter
    work = image.parent.parent
    (work / "flash.py").write_text(FLASH)
    (work / "job.sh").write_text(JOB)

    def run(label: str, flash: str, doctor_env: str = f"{JOB_ROOT}/env/rack.yaml") -> Job:
        # a fresh card, mux and cache: each run copies and writes anew
        write_card(card, FILL * CARD_SIZE)
        control.write_text("")
        docker("exec", name, "sh", "-c", "rm -rf /var/cache/labgrid/*")
        (work / f"{label}.yaml").write_text(flash)
        done = docker(
            "run", "--rm", "--network", "host",
            "-v", f"{paths.REPO_ROOT}:{JOB_ROOT}:ro", "-v", f"{work}:/work",
            "-v", f"{secrets}:/secrets:ro", "-w", JOB_ROOT,
            # as GitLab gives variables of type File: the path of a file with the value
            "-e", "RTLAB_EXPORTER_SSH_KEY=/secrets/id_ed25519",
            "-e", "RTLAB_EXPORTER_KNOWN_HOSTS=/secrets/known_hosts",
            "-e", "RTLAB_EXPORTER_SSH_CONFIG=/secrets/ssh_config",
            "-e", f"LG_COORDINATOR={coordinator}", "-e", "PYTHONPATH=.",
            "-e", "PYTHONDONTWRITEBYTECODE=1",
            built_image("ci"), "sh", "/work/job.sh", label, f"/work/{label}.yaml",
            doctor_env, check=False, timeout=300)
        result = Job(work / "runs" / label)
        assert done.returncode == 0, done.stdout + done.stderr
        for step in ("setup", "acquire", "release"):
            assert result.rc(step) == 0, (step, result.text(step))
        return result
    return run


def test_the_ci_image_flashes_a_card_through_the_exporter_image(job, exporter, card, image,
                                                                docker):
    name, control = exporter
    done = job("flashed", flash_env(rack_tools()))
    # the pipeline's variables became the job's ssh settings
    assert f"{EXPORTER}: labgrid@{LOOPBACK} port {SSH_PORT}" in done.text("setup")
    assert done.rc("flash") == 0, done.text("flash")
    assert "mode dut" in done.text("flash")
    # the mux: to the host for writing, then back to the board
    assert control.read_text().split() == ["host", "dut"]
    # the image went by rsync to the job user's folder of labgrid's cache, as labgrid
    written = image.read_bytes()
    digest = hashlib.sha256(written).hexdigest()
    copy = f"/var/cache/labgrid/{JOB_USER}/{digest}/sdcard.img"
    listed = docker("exec", name, "stat", "-c", "%U %s", copy).stdout.split()
    assert listed == ["labgrid", str(len(written))], listed
    assert "rsync" in done.text("flash")
    # bmaptool wrote the image's data and nothing else
    now = read_card(card)
    for offset, length in EXTENTS:
        assert now[offset:offset + length] == written[offset:offset + length]
    assert now[64 * 1024:3 * MIB] == FILL * (3 * MIB - 64 * 1024)
    assert now[8 * MIB:] == FILL * (CARD_SIZE - 8 * MIB)
    assert f"bmaptool copy /var/cache/labgrid/{JOB_USER}/{digest}/sdcard.img {card}" \
        in done.text("flash")
    # the doctor: labgrid's ssh reaches the exporter, rsync and the tools are there
    [(ssh, reached)] = [(f["status"], f["message"]) for f in done.findings("ssh")]
    assert (ssh, reached) == ("ok", f"labgrid's ssh reaches labgrid@{LOOPBACK} port {SSH_PORT}")
    assert [f["status"] for f in done.findings("rsync")] == ["ok"]
    tools = sorted((f["message"].split()[0], f["status"]) for f in done.findings("tools"))
    assert tools == [("bmaptool", "ok"), ("usbsdmux", "ok")], tools


def test_without_rsync_on_the_exporter_the_flash_fails_and_the_doctor_says_why(
        job, exporter, card, docker):
    name, control = exporter
    docker("exec", name, "mv", "/usr/bin/rsync", "/usr/bin/rsync.away")
    try:
        done = job("no-rsync", flash_env(rack_tools()))
    finally:
        docker("exec", name, "mv", "/usr/bin/rsync.away", "/usr/bin/rsync")
    assert done.rc("flash") != 0
    output = done.text("flash")
    assert "rsync: not found" in output, output[-3000:]
    assert "CalledProcessError" in output and "'rsync'" in output, output[-3000:]
    # the card was never written, the mux never handed it to the board
    assert read_card(card) == FILL * CARD_SIZE
    assert control.read_text().split() == ["host"]
    [rsync] = done.findings("rsync")
    assert rsync["status"] == "error"
    assert rsync["message"].startswith(f"no rsync on {EXPORTER}: labgrid copies the image")


def test_with_no_usbsdmux_at_the_tools_path_the_flash_fails_and_the_doctor_says_why(
        job, exporter, card, folder):
    _, control = exporter
    tools = {**rack_tools(), "usbsdmux": WRONG_TOOL}
    # env/rack.yaml as a lab might have it wrong, for the doctor
    wrong = RACK.read_text().replace(f"usbsdmux: {rack_tools()['usbsdmux']}",
                                     f"usbsdmux: {WRONG_TOOL}")
    assert WRONG_TOOL in wrong
    (folder / "work" / "rack-wrong-tools.yaml").write_text(wrong)
    done = job("wrong-tools", flash_env(tools), "/work/rack-wrong-tools.yaml")
    assert done.rc("flash") != 0
    output = done.text("flash")
    assert f"{WRONG_TOOL}: not found" in output, output[-3000:]
    assert read_card(card) == FILL * CARD_SIZE
    assert control.read_text() == ""
    [found] = [f for f in done.findings("tools") if f["status"] == "error"]
    assert f"{WRONG_TOOL} (USBSDMuxDriver runs it here) is not found" in found["message"]


def test_the_exporter_image_has_the_real_tools_where_the_env_names_them(docker, built_image):
    """What the stand-in hides: the image's own usbsdmux (its venv's) at env/rack.yaml's
    path, run as the exporter's user with an SSH session's PATH, not the image's; rsync
    and bmaptool; the cache folder labgrid's user writes."""
    tools = rack_tools()
    # sshd's PATH for a session, not the image's (which has the venv first)
    session = "env -i PATH=/usr/local/bin:/usr/bin:/bin /usr/sbin/runuser -u labgrid --"
    script = (f"{session} {tools['usbsdmux']} --help && "
              f"{session} {tools['bmaptool']} --version && {session} sh -c 'command -v rsync' "
              "&& stat -c '%U %a' /var/cache/labgrid")
    done = docker("run", "--rm", "--entrypoint", "sh", built_image("exporter"), "-c", script)
    assert "usage: usbsdmux" in done.stdout, done.stdout
    assert "bmaptool" in done.stdout + done.stderr
    assert "/usr/bin/rsync" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "labgrid 755"
