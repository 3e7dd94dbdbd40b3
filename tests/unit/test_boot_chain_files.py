"""What rtlab.image.bootchain puts on a card besides the kernel's files: the pinned
firmware archive (checked before it is unpacked), and boot scripts that carry the card's
command line unchanged or refuse it. The built cards are checked whole in
tests/integration/test_boot_chain.py."""

import subprocess
from pathlib import Path

import attrs
import pytest

from rtlab.image import bootchain
from rtlab.image.tools import ImageError
from rtlab.platform import debian
from rtlab.platform.boards import BOARD_MODELS


def tiny_deb(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN/control").write_text(
        "Package: raspi-firmware\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t>\n"
        "Description: t\n")
    (root / "usr/lib/raspi-firmware").mkdir(parents=True)
    (root / "usr/lib/raspi-firmware/start.elf").write_bytes(b"firmware")
    deb = tmp_path / "raspi-firmware_1_all.deb"
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(root), str(deb)],
                   check=True, capture_output=True)
    return deb


def test_the_pinned_archive_is_unpacked_once_its_sha256_matches(tmp_path):
    deb = tiny_deb(tmp_path)
    pinned = bootchain.PinnedDeb(name="raspi-firmware", version="1", url=deb.as_uri(),
                                 sha256=debian.sha256_file(deb))
    said: list[str] = []
    root = bootchain.fetch_pinned(pinned, tmp_path / "cache", said.append)
    assert (root / "usr/lib/raspi-firmware/start.elf").read_bytes() == b"firmware"
    assert said == [f"downloading {deb.as_uri()}"]
    # cached: no second download
    assert bootchain.fetch_pinned(pinned, tmp_path / "cache", said.append) == root
    assert len(said) == 1


def test_an_archive_that_is_not_the_pinned_one_is_refused_and_not_kept(tmp_path):
    deb = tiny_deb(tmp_path)
    pinned = bootchain.PinnedDeb(name="raspi-firmware", version="1", url=deb.as_uri(),
                                 sha256="0" * 64)
    with pytest.raises(ImageError, match="SHA-256 [0-9a-f]{64}, rtlab.image.bootchain pins 0+"):
        bootchain.fetch_pinned(pinned, tmp_path / "cache", lambda _m: None)
    assert list((tmp_path / "cache").iterdir()) == []


def test_an_unreachable_archive_is_an_error_naming_it(tmp_path):
    pinned = bootchain.PinnedDeb(name="x", version="1", url=(tmp_path / "no.deb").as_uri(),
                                 sha256="0" * 64)
    with pytest.raises(ImageError, match="no.deb: download failed"):
        bootchain.fetch_pinned(pinned, tmp_path / "cache", lambda _m: None)


def test_the_boot_script_loads_what_extlinux_names_with_the_same_command_line():
    script = bootchain.boot_script(BOARD_MODELS["imx6q"], "rt", "console=ttymxc1,115200 quiet")
    assert 'setenv bootargs "console=ttymxc1,115200 quiet ${rtlab_bootargs}"' in script
    # both U-Boot flavours: distro boot's devtype/devnum/distro_bootpart, Boundary's
    # dtype/disk on partition 1
    assert "${devtype}" in script and "${dtype}" in script and "${disk}:1" in script
    loads = [line.split()[-2:] for line in script.splitlines()
             if line.startswith("fatload ${rtlab_if} ${rtlab_part} ")]
    assert loads == [["0x13000000", "/initrd.img"], ["0x12000000", "/zImage"],
                     ["0x18000000", "/imx6q-sabrelite.dtb"]]
    assert "bootz 0x12000000 0x13000000:${rtlab_initrd_size} 0x18000000" in script


@pytest.mark.parametrize("append", ['console=x "quoted"', "a;reset", "x=$y", "it's"])
def test_a_command_line_u_boot_would_interpret_is_refused(append):
    with pytest.raises(ImageError, match="which U-Boot would interpret"):
        bootchain.boot_script(BOARD_MODELS["imx6q"], "rt", append)


def test_a_board_without_boot_scripts_or_firmware_gets_only_extlinux(tmp_path):
    model = attrs.evolve(BOARD_MODELS["imx6q"], boot_scripts=())
    boot = tmp_path / "boot"
    boot.mkdir()
    used = bootchain.install_boot_chain(model, "rt", boot, "console=ttymxc1,115200", None,  # type: ignore[arg-type]
                                        tmp_path / "cache", lambda _m: None)
    assert used == {} and list(boot.iterdir()) == []


def test_the_scripts_are_script_images_of_the_source_beside_them(tmp_path):
    boot = tmp_path / "boot"
    boot.mkdir()
    bootchain.install_boot_chain(BOARD_MODELS["imx6q"], "std", boot, "console=ttymxc1,115200",
                                 None, tmp_path / "cache", lambda _m: None)  # type: ignore[arg-type]
    assert sorted(p.name for p in boot.iterdir()) == ["6x_bootscript", "boot.cmd", "boot.scr"]
    for name in ("6x_bootscript", "boot.scr"):
        listing = subprocess.run(["dumpimage", "-l", str(boot / name)], capture_output=True,
                                 text=True, check=True).stdout
        assert "Script" in listing
    # the same inputs, the same bytes (the header's time is SOURCE_DATE_EPOCH's)
    again = tmp_path / "again"
    again.mkdir()
    bootchain.install_boot_chain(BOARD_MODELS["imx6q"], "std", again, "console=ttymxc1,115200",
                                 None, tmp_path / "cache", lambda _m: None)  # type: ignore[arg-type]
    assert (again / "boot.scr").read_bytes() == (boot / "boot.scr").read_bytes()
