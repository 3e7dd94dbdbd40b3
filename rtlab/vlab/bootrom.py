"""What runs on a virtual board before its U-Boot, where QEMU cannot run the real thing.

- Raspberry Pi 3: the GPU's boot ROM and firmware read bootcode.bin, start.elf, fixup.dat
  and config.txt from the card's FAT partition, load the device tree and the file
  config.txt names as ``kernel=`` (Debian's U-Boot), and start it on the ARM cores. QEMU
  has no GPU: this module checks the same files and settings the firmware reads and hands
  QEMU what the firmware would start; a card the firmware would not boot leaves the board
  silent, with the reason said on the console as the rack's bootloader messages are.
- SABRE Lite: the boot ROM starts the U-Boot in the board's SPI NOR, which is no part of
  the card: Debian's mx6qsabrelite build stands in (its .imx boot image, payload at 0xC00
  linked at 0x17800000, re-wrapped as an ELF file QEMU's -kernel loads at that address).
"""

from __future__ import annotations

import functools
import struct
from pathlib import Path, PurePosixPath

import attrs

from rtlab.platform import debian
from rtlab.platform.boards import BoardModel, PiFirmware
from rtlab.vlab.qemu import BootConfigError, boot_partition, copy_from_card

# the i.MX boot image: the IVT at its start, the payload (u-boot-dtb.bin) from 0xC00
_IMX_IVT_TAG = 0xD1
_IMX_PAYLOAD_OFFSET = 0xC00
_ELF_DATA_OFFSET = 0x1000


@attrs.frozen
class FirstStage:
    """What QEMU starts instead of the board's boot ROM: a U-Boot, and the device tree the
    Pi's firmware hands it (None: the U-Boot has its own)."""

    loader: Path
    dtb: Path | None = None


def pi_firmware(model: BoardModel, firmware: PiFirmware, card: Path,
                workdir: Path) -> FirstStage:
    """Read the card as a Pi 3's boot ROM and GPU firmware do; what they would start."""
    part = boot_partition(card)
    workdir.mkdir(parents=True, exist_ok=True)
    # the boot ROM loads bootcode.bin, bootcode.bin loads start.elf with its fixup.dat:
    # without any of them nothing reaches the ARM cores and the UART stays dark
    for name in firmware.files:
        if copy_from_card(part, PurePosixPath("/" + name), workdir / name) is not None:
            raise BootConfigError(f"firmware: no /{name} on SD card partition 1: the GPU "
                                  "firmware does not start and the board stays silent")
    config_path = workdir / "config.txt"
    if copy_from_card(part, PurePosixPath("/config.txt"), config_path) is not None:
        raise BootConfigError("firmware: no /config.txt on SD card partition 1: the "
                              "firmware starts a 32-bit kernel7.img with the console UART "
                              "off")
    settings = read_config_txt(config_path.read_text(errors="replace"))
    if settings.get("arm_64bit") != "1":
        raise BootConfigError("firmware: config.txt lacks arm_64bit=1: the cores start in "
                              "32-bit mode and a 64-bit U-Boot never runs")
    if settings.get("enable_uart") != "1":
        raise BootConfigError("firmware: config.txt lacks enable_uart=1: the mini UART on "
                              "the header pins (the console) stays off")
    loader = settings.get("kernel", "kernel8.img")
    target = workdir / "loader.bin"
    error = copy_from_card(part, PurePosixPath("/" + loader), target)
    if error is not None:
        raise BootConfigError(f"firmware: config.txt starts {loader}, which is not on SD "
                              f"card partition 1 ({error})")
    dtb_name = settings.get("device_tree") or (
        PurePosixPath(model.dtb).name if settings.get("upstream_kernel") == "1"
        else "bcm2710-rpi-3-b.dtb")
    dtb = workdir / "firmware.dtb"
    if copy_from_card(part, PurePosixPath("/" + dtb_name), dtb) is not None:
        # the firmware starts the loader without a device tree; Debian's U-Boot has its own
        dtb.unlink(missing_ok=True)
        return FirstStage(loader=target)
    return FirstStage(loader=target, dtb=dtb)


def read_config_txt(text: str) -> dict[str, str]:
    """config.txt's settings as the firmware reads them: ``key=value`` lines, # comments,
    the last value of a key winning; conditional sections ([pi3], [all], …) apply to a
    Pi 3 unless they name another model."""
    settings: dict[str, str] = {}
    applies = True
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip().lower()
            applies = section in ("all", "pi3", "pi3+", "none") or not section.startswith(
                ("pi", "cm", "board-type", "edid", "hdmi", "gpio", "0x", "tryboot"))
            applies = applies and section != "none"
            continue
        if applies and "=" in line:
            key, _, value = line.partition("=")
            settings[key.strip()] = value.strip()
    return settings


def spi_flash_uboot(model: BoardModel, cache_dir: Path, workdir: Path) -> FirstStage:
    """The board's U-Boot where it lives in the board's own flash: Debian's build of it,
    as a file QEMU's -kernel starts (rewritten only when the package's image changed)."""
    image = _debian_file(model.arch, model.uboot.package, model.uboot.path, cache_dir)
    elf = imx_image_as_elf(image.read_bytes(), image)
    target = workdir / "u-boot.elf"
    if not target.is_file() or target.read_bytes() != elf:
        workdir.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + ".part")
        part.write_bytes(elf)
        part.replace(target)
    return FirstStage(loader=target)


@functools.cache
def _debian_file(arch: str, package: str, path: str, cache_dir: Path) -> Path:
    """A file of a Debian package, looked up with apt once per rack process (each
    apt-cache run costs seconds; a boot should not)."""
    try:
        unpacked = debian.Apt(arch, cache_dir, progress=lambda _message: None).fetch(package)
    except debian.DebianError as error:
        raise BootConfigError(f"the board's U-Boot ({package}) is not at hand: "
                              f"{error}") from error
    found = unpacked.root / path
    if not found.is_file():
        raise BootConfigError(f"{package} {unpacked.version} ships no {path}")
    return found


def imx_image_as_elf(data: bytes, path: Path) -> bytes:
    """An i.MX boot image's payload in an ELF file with one loadable segment at the
    address the image's boot data names, entered at the IVT's entry point: QEMU loads a
    raw binary at the kernel's address, where U-Boot (not position independent) would not
    run."""
    if len(data) < _IMX_PAYLOAD_OFFSET + 4 or data[0] != _IMX_IVT_TAG:
        raise BootConfigError(f"{path} is no i.MX boot image (no IVT at its start)")
    # the IVT: entry point at byte 4, its own address at byte 20
    (entry,) = struct.unpack_from("<I", data, 4)
    (self_address,) = struct.unpack_from("<I", data, 20)
    load = self_address + _IMX_PAYLOAD_OFFSET
    if entry != load:
        raise BootConfigError(f"{path}: its IVT enters at 0x{entry:08x}, not at the "
                              f"payload's 0x{load:08x}")
    payload = data[_IMX_PAYLOAD_OFFSET:]
    header_size, segment_size = 52, 32
    header = (b"\x7fELF" + bytes([1, 1, 1, 0]) + bytes(8)
              + struct.pack("<HHIIIIIHHHHHH", 2, 40, 1, entry, header_size, 0, 0x05000000,
                            header_size, segment_size, 1, 40, 0, 0))
    segment = struct.pack("<IIIIIIII", 1, _ELF_DATA_OFFSET, load, load, len(payload),
                          len(payload), 7, 0x1000)
    head = header + segment
    return head + bytes(_ELF_DATA_OFFSET - len(head)) + payload


def first_stage(model: BoardModel, card: Path, cache_dir: Path, workdir: Path) -> FirstStage:
    if model.firmware is not None:
        return pi_firmware(model, model.firmware, card, workdir)
    if model.uboot.on_card is None:
        return spi_flash_uboot(model, cache_dir, workdir)
    raise BootConfigError(f"board {model.name}: no boot ROM stand-in for a U-Boot on the "
                          "card without a firmware stage")
