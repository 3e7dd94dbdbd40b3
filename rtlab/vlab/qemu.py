"""Boot a virtual board from its SD card: the QEMU command line that starts the board's
U-Boot (:mod:`.bootrom` says which), and the card's boot files read as U-Boot reads them.

The virtual rack boots through the board's real U-Boot; `read_boot_config` does what
U-Boot's distro boot does (MBR, first FAT partition, /extlinux/extlinux.conf, load
kernel/FDT/initrd, expand the U-Boot variables of APPEND) for the doors that hand the
kernel to QEMU themselves (a LAVA QEMU job).
"""

from __future__ import annotations

import ipaddress
import os
import re
import struct
import subprocess
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import attrs

from rtlab.platform.boards import GATEWAY, GUEST_ADDRESS, GUEST_PREFIX, STREAM_PORT, BoardModel

if TYPE_CHECKING:
    from rtlab.vlab.bootrom import FirstStage

SECTOR = 512
_FAT_TYPES = {0x01, 0x04, 0x06, 0x0B, 0x0C, 0x0E, 0xEF}
_CONF = PurePosixPath("/extlinux/extlinux.conf")


class BootConfigError(Exception):
    """What a bootloader would print before it gives up; the board then stays silent."""


@attrs.frozen
class BootFiles:
    kernel: Path
    dtb: Path
    initrd: Path | None
    append: str


@attrs.frozen
class _Label:
    name: str
    kernel: tuple[int, str] | None = None  # (line, path)
    fdt: tuple[int, str] | None = None
    initrd: tuple[int, str] | None = None
    append: str = ""


# U-Boot's ${name} in extlinux.conf's APPEND (cli_simple_process_macros): an unset
# variable expands to nothing
_VARIABLE = re.compile(r"\$\{([A-Za-z0-9_.]+)\}")


def boot_partition(sd_image: Path) -> str:
    """The card's first partition as mtools names it (``image@@offset``)."""
    return f"{sd_image}@@{_first_partition_offset(sd_image)}"


def read_boot_config(sd_image: Path, workdir: Path,
                     variables: Mapping[str, str] | None = None) -> BootFiles:
    """Read the card like U-Boot distro boot does and copy the boot files into workdir;
    ``variables``: U-Boot's environment, as APPEND's ${…} sees it (none set: empty)."""
    part = boot_partition(sd_image)
    workdir.mkdir(parents=True, exist_ok=True)
    conf_file = workdir / "extlinux.conf"
    if copy_from_card(part, _CONF, conf_file) is not None:
        if _mtools(["mdir", "-i", part, "::/"]).returncode != 0:
            raise BootConfigError("SD card partition 1 is not a readable FAT file system")
        raise BootConfigError(f"no {_CONF} on SD card partition 1")
    try:
        text = conf_file.read_text()
    except UnicodeDecodeError:
        raise BootConfigError(f"{_CONF} is not a text file") from None
    label = _parse_extlinux(text)
    if label.kernel is None:
        raise BootConfigError(f"extlinux.conf: label {label.name!r} has no KERNEL line")
    if label.fdt is None:
        # U-Boot would fall back to its own device tree; this bootloader has none.
        raise BootConfigError(f"extlinux.conf: label {label.name!r} has no FDT line")

    def load(what: str, entry: tuple[int, str], name: str) -> Path:
        line, path = entry
        target = workdir / name
        error = copy_from_card(part, _resolve(path), target)
        if error is not None:
            raise BootConfigError(
                f"extlinux.conf line {line}: {what} {path} not found on partition 1 ({error})"
            )
        return target

    kernel = load("KERNEL", label.kernel, "kernel")
    dtb = load("FDT", label.fdt, "dtb")
    initrd = load("INITRD", label.initrd, "initrd") if label.initrd else None
    if label.initrd is None:
        (workdir / "initrd").unlink(missing_ok=True)
    append = _VARIABLE.sub(lambda m: (variables or {}).get(m.group(1), ""), label.append)
    return BootFiles(kernel=kernel, dtb=dtb, initrd=initrd, append=" ".join(append.split()))


def _first_partition_offset(sd_image: Path) -> int:
    try:
        with sd_image.open("rb") as f:
            mbr = f.read(SECTOR)
    except OSError as exc:
        raise BootConfigError(f"cannot read SD card: {exc.strerror}") from None
    if len(mbr) < SECTOR or mbr[510:512] != b"\x55\xaa":
        raise BootConfigError("no partition table on SD card (no MBR signature)")
    ptype = mbr[446 + 4]
    start, sectors = struct.unpack_from("<II", mbr, 446 + 8)
    if ptype == 0 or sectors == 0:
        raise BootConfigError("SD card has no partition 1")
    if ptype == 0xEE:
        raise BootConfigError("SD card has a GPT; this bootloader reads MBR partitions only")
    if ptype not in _FAT_TYPES:
        raise BootConfigError(f"SD card partition 1 has type 0x{ptype:02x}, not FAT")
    return start * SECTOR


def _mtools(argv: list[str]) -> subprocess.CompletedProcess[str]:
    # Images are not floppies: without this mtools refuses images with odd geometry.
    env = {**os.environ, "MTOOLS_SKIP_CHECK": "1"}
    try:
        return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    except FileNotFoundError:
        raise BootConfigError(f"{argv[0]} (mtools) is not installed on the rack host") from None


def copy_from_card(part: str, src: PurePosixPath, dest: Path) -> str | None:
    """Copy one file out of the FAT partition; the error text if that failed."""
    tmp = dest.with_name(dest.name + ".part")
    tmp.unlink(missing_ok=True)
    proc = _mtools(["mcopy", "-n", "-i", part, f"::{src}", str(tmp)])
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        lines = (proc.stderr + proc.stdout).strip().splitlines()
        return lines[-1] if lines else f"mcopy exit {proc.returncode}"
    os.replace(tmp, dest)
    return None


def _resolve(path: str) -> PurePosixPath:
    # Like U-Boot's sysboot: absolute paths are from the partition root, others are
    # relative to the directory of extlinux.conf.
    p = PurePosixPath(path)
    return p if p.is_absolute() else _CONF.parent / p


def _parse_extlinux(text: str) -> _Label:
    labels: list[_Label] = []
    default = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, value = line.partition(" ")
        keyword = keyword.lower()
        value = value.strip()
        if keyword == "default":
            default = value
        elif keyword == "label":
            labels.append(_Label(name=value))
        elif keyword in ("kernel", "linux", "fdt", "devicetree", "initrd", "append"):
            if not labels:
                raise BootConfigError(
                    f"extlinux.conf line {number}: {keyword.upper()} before any LABEL"
                )
            if keyword != "append" and not value:
                raise BootConfigError(
                    f"extlinux.conf line {number}: {keyword.upper()} without a path"
                )
            field = {"linux": "kernel", "devicetree": "fdt"}.get(keyword, keyword)
            new = value if field == "append" else (number, value)
            labels[-1] = attrs.evolve(labels[-1], **{field: new})
        elif keyword == "fdtdir":
            raise BootConfigError(
                f"extlinux.conf line {number}: FDTDIR is not supported, name the FDT file"
            )
        # Other keywords (MENU, TIMEOUT, PROMPT, …) only matter to an interactive menu.
    if not labels:
        raise BootConfigError("extlinux.conf has no LABEL")
    if default is None:
        return labels[0]
    for label in labels:
        if label.name == default:
            return label
    raise BootConfigError(f"extlinux.conf: DEFAULT {default} names no LABEL")


def nic_device(model: BoardModel) -> dict[str, str]:
    """The board's ``-device`` NIC as QMP's device_add takes it."""
    if len(model.qemu_nic) != 2 or model.qemu_nic[0] != "-device":
        raise ValueError(f"board {model.name}: only a -device NIC can be plugged later")
    driver, *options = model.qemu_nic[1].split(",")
    return {"driver": driver, "id": "nic0",
            **dict(option.split("=", 1) for option in options)}


def netdev_option(network_port: int | None) -> str:
    """The board's user-mode (slirp) network: nothing leaves the host's loopback."""
    # restrict=on: the guest reaches only slirp itself (its gateway answers pings) and the
    # forwarded port, never the host's networks or the Internet.
    net = ipaddress.ip_interface(f"{GUEST_ADDRESS}/{GUEST_PREFIX}").network
    spec = (
        f"user,id=net0,net={net},host={GATEWAY},dhcpstart={GUEST_ADDRESS},ipv6=off,"
        "restrict=on"
    )
    if network_port is not None:
        spec += f",hostfwd=tcp:127.0.0.1:{network_port}-{GUEST_ADDRESS}:{STREAM_PORT}"
    return spec


def qemu_command(
    model: BoardModel,
    first_stage: FirstStage,
    sd_image: Path,
    serial_socket: Path,
    network_port: int | None = None,
    qmp_socket: Path | None = None,
) -> list[str]:
    """QEMU argv for the board, started at its U-Boot; its console is a client of the
    rack's Unix socket.

    A board with a network gets one; network_port is the loopback port on the host that
    is forwarded to the board's stream port."""
    argv = [
        model.qemu_binary,
        "-M", model.qemu_machine,
        "-m", f"{model.memory_mb}M",
        "-nodefaults",
        "-no-reboot",  # a guest reset ends QEMU; the rack decides whether to boot again
        "-display", "none",
        "-monitor", "none",
        "-chardev", f"socket,id=console,path={serial_socket}",
    ]  # fmt: skip
    if model.qemu_machine == "sabrelite":
        argv += [
            "-smp", str(model.cpus),
            # the console is the second UART (ttymxc1)
            "-serial", "null",
            "-serial", "chardev:console",
            # -drive if=sd does not reach the i.MX6 uSDHC in QEMU 7.2; this lands on usdhc4
            "-drive", f"if=none,id=sd,file={sd_image},format=raw",
            "-device", "sd-card,drive=sd",
            # U-Boot cannot read QEMU's uSDHC: it reads the same card as a USB disk
            # (read-only, so that the two views never disagree); Linux uses the SD slot
            "-drive", (f"if=none,id=card-for-uboot,file={sd_image},format=raw,readonly=on,"
                       "file.locking=off"),
            "-device", "usb-storage,drive=card-for-uboot,bus=usb-bus.1",
        ]  # fmt: skip
    elif model.qemu_machine == "raspi3b":
        argv += [
            # multi-threaded TCG (4 vCPUs on few host cores) boots slowly and times out
            "-accel", "tcg,thread=single",
            # the console is the mini UART (ttyS1), QEMU's second serial port; the first
            # is the PL011, which serves Bluetooth on a Pi 3
            "-serial", "null",
            "-serial", "chardev:console",
            "-drive", f"if=sd,file={sd_image},format=raw",
        ]  # fmt: skip
    else:
        raise ValueError(f"no QEMU wiring for machine {model.qemu_machine!r}")
    if qmp_socket is not None:
        argv += ["-qmp", f"unix:{qmp_socket},server=on,wait=off"]
    if model.has_network:
        argv += ["-netdev", netdev_option(network_port)]
        if not model.qemu_nic_at_kernel:
            argv += list(model.qemu_nic)
    argv += ["-kernel", str(first_stage.loader)]
    if first_stage.dtb is not None:
        argv += ["-dtb", str(first_stage.dtb)]
    return argv
