"""The card rtlab flashes boots a real board's boot chain: what the Raspberry Pi 3's
firmware reads and its console agree, the SABRE Lite gets a boot script beside
extlinux.conf, no card carries what only QEMU needs, and on the virtual rack both boards
boot through Debian's real U-Boot from the flashed card (docs/lab.md, "Boot chain")."""

import asyncio
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path, PurePosixPath

import attrs
import pytest
import requests
import serial
from labgrid.driver.power import simplerest

from rtlab.artifacts.manifest import load_image_manifest
from rtlab.image import bootchain
from rtlab.image.sdcard import BOOTARGS_VARIABLE
from rtlab.platform import debian
from rtlab.platform.boards import BOARD_MODELS
from rtlab.util import paths
from rtlab.vlab.bootrom import read_config_txt
from rtlab.vlab.config import LOOPBACK, VirtualBoard
from rtlab.vlab.qemu import read_boot_config
from rtlab.vlab.rack import BoardSlot, host_view_path
from tests.integration.sdcard import copy_image, read_boot_file, replace_boot_file
from tests.ports import free_port

# config.txt keys the Raspberry Pi firmware documents (config.txt documentation, "Boot
# options", "UART", "Device tree"); a key outside it is ignored by the firmware
DOCUMENTED_CONFIG_KEYS = {
    "arm_64bit", "enable_uart", "upstream_kernel", "kernel", "device_tree", "dtoverlay",
    "dtparam", "initramfs", "core_freq", "uart_2ndstage", "init_uart_baud", "os_prefix",
    "cmdline", "kernel_address", "disable_commandline_tags", "enable_jtag_gpio",
}
# overlays that take the mini UART off the header pins or give them the PL011
UART_MOVING_OVERLAYS = {"miniuart-bt", "disable-bt", "pi3-miniuart-bt", "pi3-disable-bt"}


def card_files(image: Path) -> dict[str, bytes]:
    names = subprocess.run(["mdir", "-/", "-b", "-i", f"{image}@@1048576", "::/"],
                           capture_output=True, text=True, check=True,
                           env={"MTOOLS_SKIP_CHECK": "1", "PATH": "/usr/bin:/bin"}).stdout
    files = {}
    for name in names.split():
        name = name.removeprefix("::/")
        if not name.endswith("/"):
            files[name] = read_boot_file(image, name)
    return files


def initramfs_file(initrd: bytes, name: str, tmp_path: Path) -> bytes:
    packed = tmp_path / "initrd.img"
    packed.write_bytes(initrd)
    return subprocess.run(f"zcat {packed} | cpio -i --quiet --to-stdout {name}", shell=True,
                          capture_output=True, check=True).stdout


def dtb_value(dtb: Path, node: str, prop: str) -> str:
    return subprocess.run(["fdtget", "-t", "s", str(dtb), node, prop], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_the_pi_3_card_carries_what_its_firmware_reads_and_its_console_agrees(image,
                                                                               tmp_path):
    card = image("rpi3", "rt")
    files = card_files(card)
    model = BOARD_MODELS["rpi3"]
    firmware = bootchain.fetch_pinned(bootchain.RASPI_FIRMWARE, paths.debs_dir(),
                                      lambda _m: None) / bootchain.FIRMWARE_DIR
    for name in ("bootcode.bin", "start.elf", "fixup.dat"):
        assert files[name] == (firmware / name).read_bytes(), name
    config = read_config_txt(files["config.txt"].decode())
    assert set(config) <= DOCUMENTED_CONFIG_KEYS
    assert config["arm_64bit"] == "1" and config["enable_uart"] == "1"
    assert UART_MOVING_OVERLAYS.isdisjoint(config.get("dtoverlay", "").split(","))
    # the firmware starts Debian's U-Boot for the Pi 3
    uboot = debian.Apt("arm64", paths.debs_dir(), lambda _m: None).fetch("u-boot-rpi")
    assert files[config["kernel"]] == (uboot.root / "usr/lib/u-boot/rpi_3/u-boot.bin").read_bytes()
    # with upstream_kernel=1 the firmware loads the mainline tree the card carries
    assert config["upstream_kernel"] == "1" and "bcm2837-rpi-3-b.dtb" in files

    # the console: the tree's stdout-path is the mini UART on the header pins, the kernel
    # is told the same UART (its serialN alias is Linux's ttySN), getty runs on it
    dtb = tmp_path / "card.dtb"
    dtb.write_bytes(files["bcm2837-rpi-3-b.dtb"])
    alias, baud = dtb_value(dtb, "/chosen", "stdout-path").split(":")
    node = dtb_value(dtb, "/aliases", alias)
    assert "brcm,bcm2835-aux-uart" in dtb_value(dtb, node, "compatible")
    boot = read_boot_config(card, tmp_path / "boot")
    console = f"ttyS{alias.removeprefix('serial')},{baud.rstrip('n8')}"
    assert f"console={console}" in boot.append.split() and model.console == console
    inittab = initramfs_file(files["initrd.img"], "etc/inittab", tmp_path).decode()
    assert f"/sbin/getty -L 115200 {model.console_device} " in inittab


def test_the_sabre_lite_card_carries_a_boot_script_that_says_what_extlinux_says(image,
                                                                                tmp_path):
    card = image("imx6q", "rt")
    files = card_files(card)
    boot = read_boot_config(card, tmp_path / "boot")
    for name in ("6x_bootscript", "boot.scr"):
        script = tmp_path / name
        script.write_bytes(files[name])
        listing = subprocess.run(["dumpimage", "-l", str(script)], capture_output=True,
                                 text=True, check=True).stdout
        assert "Script" in listing, listing
        # a legacy script image: 64-byte header, a table of lengths ended by 0, the text
        size = int.from_bytes(files[name][64:68], "big")
        text = files[name][72:72 + size].decode()
        assert text == files["boot.cmd"].decode()
    loaded = re.findall(r"^fatload \S+ \S+ \S+ (/\S+)$", text, re.M)
    assert sorted(loaded) == sorted(["/initrd.img", "/zImage", "/imx6q-sabrelite.dtb"])
    assert all(path.removeprefix("/") in files for path in loaded)
    (bootargs,) = re.findall(r'^setenv bootargs "(.*)"$', text, re.M)
    assert bootargs.replace(f" ${{{BOOTARGS_VARIABLE}}}", "") == boot.append


@pytest.mark.parametrize("board", ["imx6q", "rpi3"])
def test_a_card_carries_no_qemu_address_or_qemu_only_tree_edit(image, tmp_path, board):
    card = image(board, "std")
    model = BOARD_MODELS[board]
    manifest = load_image_manifest(card.parent / "manifest.json").document
    kernel = debian.Apt(model.arch, paths.debs_dir(), lambda _m: None).fetch(
        manifest["kernel"]["package"])
    shipped = kernel.root / "usr/lib" / f"linux-image-{manifest['kernel']['release']}"
    files = card_files(card)
    dtb = PurePosixPath(model.dtb)
    assert files[dtb.name] == (shipped / dtb).read_bytes()
    assert "10.0.2." not in files["extlinux/extlinux.conf"].decode()
    for parameter in model.qemu_append:
        assert parameter not in files["extlinux/extlinux.conf"].decode()
    unpacked = tmp_path / "initramfs"
    unpacked.mkdir()
    initrd = tmp_path / "initrd.img"
    initrd.write_bytes(files["initrd.img"])
    subprocess.run(f"zcat {initrd} | cpio -i --quiet --no-absolute-filenames", shell=True,
                   cwd=unpacked, check=True)
    text_files = [p for p in unpacked.rglob("*") if p.is_file() and not p.is_symlink()
                  and p.stat().st_size < 100_000 and b"\0" not in p.read_bytes()]
    assert unpacked / "init" in text_files
    for path in text_files:
        assert b"10.0.2." not in path.read_bytes(), path
    assert (unpacked / "etc/rtlab/network").read_text() == "NET_DHCP=1\n"
    # the physical board's own NIC driver is in the image beside QEMU's
    modules = (unpacked / "etc/rtlab/modules").read_text()
    for nic in model.nic_modules:
        assert f"/{nic}.ko" in modules


# -- on the virtual rack ------------------------------------------------------------------

def set_mux(vlab, place: str, mode: str) -> None:
    requests.put(f"{vlab.api_url}/sdmux/{place}", data=mode, timeout=5).raise_for_status()


def flash(vlab, place: str, card: Path) -> None:
    set_mux(vlab, place, "host")
    subprocess.run(["bmaptool", "-q", "copy", str(card),
                    str(host_view_path(paths.vlab_state_dir(), place))], check=True)
    set_mux(vlab, place, "dut")


def console_until(vlab, board, text: bytes, timeout: float) -> bytes:
    pdu = f"{vlab.api_url}/pdu/{{index}}/{{value}}"
    line = serial.serial_for_url(f"rfc2217://{LOOPBACK}:{board.serial_port}", timeout=1)
    seen = b""
    try:
        simplerest.power_set(pdu, None, board.outlet, True)
        deadline = time.monotonic() + timeout
        while text not in seen and time.monotonic() < deadline:
            seen += line.read(4096)
    finally:
        line.close()
        simplerest.power_set(pdu, None, board.outlet, False)
    assert text in seen, f"no {text!r} on the console within {timeout} s:\n" \
                         f"{seen[-2000:].decode(errors='replace')}"
    return seen


@pytest.mark.vlab
@pytest.mark.parametrize(("board", "place"), [("imx6q", "imx6q-01"), ("rpi3", "rpi3-01")])
def test_the_board_boots_through_its_u_boot_from_the_flashed_card(vlab, image, board, place):
    flash(vlab, place, image(board, "rt"))
    seen = console_until(vlab, vlab.board(place), b" login: ", 180).decode(errors="replace")
    assert "U-Boot 2023.01" in seen
    # U-Boot read the card's extlinux.conf and the files it names, and started the kernel
    for said in ("Retrieving file: /extlinux/extlinux.conf", "Retrieving file: /initrd.img",
                 f"append: console={BOARD_MODELS[board].console}", "Starting kernel"):
        assert said in seen, said
    # the lab's network from DHCP (QEMU's network answers it)
    assert re.search(r"rtlab-init: network: \S+ up, 10\.0\.2\.15/24 \(DHCP\)", seen), seen


@pytest.mark.vlab
@pytest.mark.parametrize(("board", "place"), [("imx6q", "imx6q-01"), ("rpi3", "rpi3-01")])
def test_a_card_without_what_u_boot_reads_fails_with_a_clear_error(vlab, image, tmp_path,
                                                                   board, place):
    card = copy_image(image(board, "std"), tmp_path / "card")
    subprocess.run(["mdel", "-i", f"{card}@@1048576", "::/extlinux/extlinux.conf"],
                   env={"MTOOLS_SKIP_CHECK": "1", "PATH": "/usr/bin:/bin"}, check=True)
    for name in BOARD_MODELS[board].boot_scripts:
        replace_boot_file(card, name, b"not a script")
    subprocess.run(["bmaptool", "create", "-o", f"{card}.bmap", str(card)], check=True)
    flash(vlab, place, card)
    seen = console_until(vlab, vlab.board(place), b"found nothing it could boot", 120)
    assert b"Starting kernel" not in seen


@pytest.mark.vlab
def test_a_pi_card_without_the_u_boot_config_txt_names_stays_silent_and_says_why(
        vlab, image, tmp_path):
    card = copy_image(image("rpi3", "std"), tmp_path / "card")
    subprocess.run(["mdel", "-i", f"{card}@@1048576", "::/u-boot.bin"],
                   env={"MTOOLS_SKIP_CHECK": "1", "PATH": "/usr/bin:/bin"}, check=True)
    subprocess.run(["bmaptool", "create", "-o", f"{card}.bmap", str(card)], check=True)
    flash(vlab, "rpi3-01", card)
    seen = console_until(vlab, vlab.board("rpi3-01"), b"which is not on SD card", 30)
    assert b"config.txt starts u-boot.bin" in seen and b"U-Boot" not in seen


# Boundary Devices' stock U-Boot: for each boot device and disk, load /6x_bootscript from
# partition 1 and source it (its bootcmd, with the USB disk QEMU's U-Boot can read)
BOUNDARY_BOOTCMD = ("setenv dtype usb; setenv disk 0; "
                    "load ${dtype} ${disk}:1 10008000 /6x_bootscript && source 10008000")
# distro boot's script path: scan_dev_for_scripts finds /boot.scr
DISTRO_SCRIPT_BOOTCMD = ("setenv devtype usb; setenv devnum 0; setenv distro_bootpart 1; "
                         "setenv prefix /; setenv boot_scripts boot.scr; "
                         "run scan_dev_for_scripts")


# boot.scr is the same script as 6x_bootscript (the card test above compares them), loaded
# by distro boot's path: in make test FULL=1 (30 s of make test's 45 min)
@pytest.mark.parametrize("bootcmd", [
    BOUNDARY_BOOTCMD, pytest.param(DISTRO_SCRIPT_BOOTCMD, marks=pytest.mark.full)],
    ids=["6x_bootscript", "boot.scr"])
def test_a_script_loading_u_boot_boots_the_sabre_lite_card(image, tmp_path, bootcmd):
    """The board's U-Boot made to load the card's boot script instead of extlinux.conf,
    as those builds do; the kernel gets the card's command line and the rack's parameter
    through the variable."""
    model = BOARD_MODELS["imx6q"]
    model = attrs.evolve(model, uboot=attrs.evolve(model.uboot, vlab_boot=bootcmd))
    # a short folder: Unix socket paths are limited to 107 bytes
    folder = Path(tempfile.mkdtemp(prefix="vlab-", dir="/tmp"))
    try:
        slot = BoardSlot(VirtualBoard("imx6q-09", "imx6q", free_port(), 9), folder)
        slot.model = model
        shutil.copy(image("imx6q", "std"), slot.card)
        seen = asyncio.run(_boot_slot(slot, b"login: ", 150)).decode(errors="replace")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert "Starting kernel" in seen and "Retrieving file: /extlinux" not in seen
    assert "## Executing script" in seen
    # the kernel's command line is the script's, with the rack's parameter
    (cmdline,) = re.findall(r"^cmdline=(.*?)\r?$", seen, re.M)
    assert cmdline.split() == [*BOOT_APPEND_IMX6Q.split(), *model.qemu_append]


BOOT_APPEND_IMX6Q = "console=ttymxc1,115200 quiet"


async def _boot_slot(slot: BoardSlot, text: bytes, timeout: float) -> bytes:
    """Power the slot's board on, log in once ``text`` (the login prompt) shows and print
    the kernel's command line; the console transcript."""
    await slot.serial.start()
    try:
        slot.set_mux("dut")
        await slot.set_power(True)
        deadline = time.monotonic() + timeout
        steps = [(text, b"root\r"), (b"root@rtlab", b"echo cmdline=$(cat /proc/cmdline)\r"),
                 (b"cmdline=console", b"")]
        while steps and time.monotonic() < deadline:
            seen = slot.serial.transcript_path.read_bytes()
            wanted, answer = steps[0]
            if wanted in seen.split(b"cmdline=$(")[-1]:
                steps.pop(0)
                if answer:
                    slot.serial.type_in(answer)
            await asyncio.sleep(0.5)
        await asyncio.sleep(1.0)
        return slot.serial.transcript_path.read_bytes()
    finally:
        await slot.set_power(False)
        await slot.serial.stop()
