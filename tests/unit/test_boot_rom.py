"""What the virtual rack runs before a board's U-Boot (rtlab.vlab.bootrom): the Pi's GPU
firmware, checked against the files and config.txt keys the firmware reads, and the
SABRE Lite's SPI-flash U-Boot started from its i.MX boot image. Cards are real FAT cards
built the way rtlab builds them; no QEMU."""

import struct
from pathlib import Path

import pytest

from rtlab.image.sdcard import make_sd_image
from rtlab.platform.boards import BOARD_MODELS
from rtlab.vlab.bootrom import first_stage, imx_image_as_elf, read_config_txt
from rtlab.vlab.qemu import BootConfigError

RPI = BOARD_MODELS["rpi3"]


def pi_card(tmp_path: Path, drop: str | None = None, config: str | None = None) -> Path:
    boot = tmp_path / "boot"
    boot.mkdir()
    files = {name: name.encode() for name in RPI.firmware.files}
    files["u-boot.bin"] = b"U-Boot for the Pi 3"
    files["bcm2837-rpi-3-b.dtb"] = b"\xd0\x0d\xfe\xed the tree"
    files["config.txt"] = (RPI.firmware.config_txt() if config is None else config).encode()
    for name, data in files.items():
        if name != drop:
            (boot / name).write_bytes(data)
    card = tmp_path / "sdcard.img"
    make_sd_image(card, boot, "test-card")
    return card


def test_the_firmware_starts_the_u_boot_config_txt_names_with_the_upstream_tree(tmp_path):
    stage = first_stage(RPI, pi_card(tmp_path), tmp_path / "debs", tmp_path / "work")
    assert stage.loader.read_bytes() == b"U-Boot for the Pi 3"
    assert stage.dtb is not None and stage.dtb.read_bytes().endswith(b"the tree")


@pytest.mark.parametrize("missing", ["bootcode.bin", "start.elf", "fixup.dat", "config.txt"])
def test_a_card_without_a_firmware_file_leaves_the_board_silent(tmp_path, missing):
    with pytest.raises(BootConfigError, match=f"no /{missing} on SD card partition 1"):
        first_stage(RPI, pi_card(tmp_path, drop=missing), tmp_path / "debs", tmp_path / "w")


@pytest.mark.parametrize(("config", "says"), [
    ("enable_uart=1\nkernel=u-boot.bin\n", "lacks arm_64bit=1"),
    ("arm_64bit=1\nkernel=u-boot.bin\n", "lacks enable_uart=1"),
    ("arm_64bit=1\nenable_uart=0\nkernel=u-boot.bin\n", "lacks enable_uart=1"),
    ("arm_64bit=1\nenable_uart=1\n", "starts kernel8.img, which is not on SD card"),
    ("arm_64bit=1\nenable_uart=1\nkernel=uboot.img\n", "starts uboot.img, which is not"),
])
def test_config_txt_that_a_pi_3_would_not_boot_is_named(tmp_path, config, says):
    with pytest.raises(BootConfigError, match=says):
        first_stage(RPI, pi_card(tmp_path, config=config), tmp_path / "debs", tmp_path / "w")


def test_without_upstream_kernel_the_firmware_looks_for_the_downstream_tree(tmp_path):
    config = "arm_64bit=1\nenable_uart=1\nkernel=u-boot.bin\n"
    stage = first_stage(RPI, pi_card(tmp_path, config=config), tmp_path / "d", tmp_path / "w")
    # bcm2710-rpi-3-b.dtb is not on the card: U-Boot starts without a tree of the firmware's
    assert stage.dtb is None


def test_config_txt_is_read_as_the_firmware_reads_it():
    text = ("# comment\narm_64bit=0\n[pi4]\nenable_uart=0\n[pi3]\nenable_uart=1\n"
            "[all]\narm_64bit=1  # trailing comment\nkernel = u-boot.bin\n[none]\n"
            "arm_64bit=0\n")
    assert read_config_txt(text) == {"arm_64bit": "1", "enable_uart": "1",
                                     "kernel": "u-boot.bin"}


def imx_image(entry: int, self_address: int, payload: bytes) -> bytes:
    ivt = struct.pack("<BHBIIIIIII", 0xD1, 0x2000, 0x40, entry, 0, 0, self_address + 0x20,
                      self_address, 0, 0)
    return ivt + bytes(0xC00 - len(ivt)) + payload


def test_the_spi_flash_u_boot_is_loaded_where_its_boot_image_says():
    payload = b"\xb8\x00\x00\xea" + bytes(range(256)) * 4
    elf = imx_image_as_elf(imx_image(0x17800000, 0x177FF400, payload), Path("u.imx"))
    assert elf[:4] == b"\x7fELF" and elf[4:6] == b"\x01\x01"  # 32-bit, little endian
    (entry,) = struct.unpack_from("<I", elf, 24)
    p_type, offset, vaddr, paddr, filesz = struct.unpack_from("<IIIII", elf, 52)
    assert (entry, p_type, vaddr, paddr, filesz) == (0x17800000, 1, 0x17800000, 0x17800000,
                                                      len(payload))
    assert elf[offset:offset + filesz] == payload


def test_a_file_that_is_no_imx_boot_image_is_refused():
    with pytest.raises(BootConfigError, match="no i.MX boot image"):
        imx_image_as_elf(b"\x7fELF" + bytes(0x2000), Path("u-boot.elf"))
    with pytest.raises(BootConfigError, match="not at the payload"):
        imx_image_as_elf(imx_image(0x17800100, 0x177FF400, b"x" * 64), Path("u.imx"))


def test_the_spi_flash_u_boot_follows_the_package_s_image(tmp_path, monkeypatch):
    from rtlab.vlab import bootrom
    image = tmp_path / "u-boot-dtb.imx"
    monkeypatch.setattr(bootrom, "_debian_file", lambda *_args: image)
    model = BOARD_MODELS["imx6q"]
    image.write_bytes(imx_image(0x17800000, 0x177FF400, b"old U-Boot" * 8))
    first = bootrom.spi_flash_uboot(model, tmp_path / "debs", tmp_path / "w").loader
    assert first.read_bytes().endswith(b"old U-Boot")
    # a newer package: the ELF the rack starts is the new one (not kept for its mtime)
    image.write_bytes(imx_image(0x17800000, 0x177FF400, b"new U-Boot" * 8))
    second = bootrom.spi_flash_uboot(model, tmp_path / "debs", tmp_path / "w").loader
    assert second == first and second.read_bytes().endswith(b"new U-Boot")
