"""What the board's boot chain reads from the card besides the kernel, device tree,
initramfs and extlinux.conf: the Raspberry Pi's GPU firmware and config.txt with the U-Boot
it starts, and the boot scripts of the U-Boot builds that look for one (docs/lab.md,
"Boot chain").

The firmware comes from Debian's raspi-firmware (component non-free-firmware, which the
host's apt lists need not carry): one pinned archive, checked by SHA-256 as the kernel
source is (kernel/source.yaml). U-Boot comes from Debian's own package of the board's
build, through the same apt as the rest of the image.
"""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import attrs

from rtlab.image.sdcard import BOOTARGS_VARIABLE, INITRD
from rtlab.image.tools import EPOCH, ImageError, run
from rtlab.platform import debian
from rtlab.platform.boards import BoardModel


@attrs.frozen
class PinnedDeb:
    name: str
    version: str
    url: str
    sha256: str

    @property
    def file_name(self) -> str:
        return self.url.rsplit("/", 1)[1]


# bookworm's raspi-firmware; to move on, take the version, file and SHA256 of the
# non-free-firmware Packages index of the same mirror
RASPI_FIRMWARE = PinnedDeb(
    name="raspi-firmware",
    version="1.20220830+ds-1",
    url="http://deb.debian.org/debian/pool/non-free-firmware/r/raspi-firmware/"
        "raspi-firmware_1.20220830+ds-1_all.deb",
    sha256="0094ced47a7fbb6a220ff83e7b43aa637a5d8f6802461e2e4e474597fb796f62",
)
FIRMWARE_DIR = "usr/lib/raspi-firmware"
# where a boot script loads the files (the SABRE Lite's RAM starts at 0x10000000; these are
# mainline U-Boot's kernel_addr_r, ramdisk_addr_r and fdt_addr_r for the board)
SCRIPT_ADDRESSES = {"kernel": "0x12000000", "ramdisk": "0x13000000", "fdt": "0x18000000"}
# characters a boot script's setenv or extlinux.conf's APPEND cannot carry as they are
_UNSAFE_IN_BOOTARGS = set("\"'$;\\`\n")


def fetch_pinned(deb: PinnedDeb, cache_dir: Path, progress: Callable[[str], None]) -> Path:
    """The unpacked archive (cached): downloaded once, its SHA-256 checked before it is
    unpacked."""
    archive = cache_dir / deb.file_name
    if (cache_dir / "unpacked" / archive.name.removesuffix(".deb")).is_dir():
        return debian.unpack(archive, cache_dir)
    if not archive.is_file() or debian.sha256_file(archive) != deb.sha256:
        cache_dir.mkdir(parents=True, exist_ok=True)
        progress(f"downloading {deb.url}")
        part = archive.with_name(archive.name + ".part")
        try:
            with urllib.request.urlopen(deb.url, timeout=60) as response, part.open("wb") as f:
                shutil.copyfileobj(response, f)
        except (urllib.error.URLError, OSError) as error:
            part.unlink(missing_ok=True)
            raise ImageError(f"{deb.url}: download failed: {error}") from error
        actual = debian.sha256_file(part)
        if actual != deb.sha256:
            part.unlink()
            raise ImageError(f"{deb.url}: SHA-256 {actual}, rtlab.image.bootchain pins "
                             f"{deb.sha256}")
        part.replace(archive)
    try:
        return debian.unpack(archive, cache_dir)
    except debian.DebianError as error:
        raise ImageError(f"{archive}: {error}") from error


def check_bootargs(append: str) -> None:
    """A command line a boot script and extlinux.conf can both carry unchanged."""
    bad = sorted(set(append) & _UNSAFE_IN_BOOTARGS)
    if bad:
        raise ImageError(f"kernel command line {append!r} has {' '.join(map(repr, bad))}, "
                         "which U-Boot would interpret in a boot script or extlinux.conf")


def boot_script(model: BoardModel, flavour: str, append: str) -> str:
    """The U-Boot script (source for mkimage) that boots what extlinux.conf names, for
    builds that load a script: Boundary Devices' stock U-Boot sets ``dtype`` and ``disk``
    and loads /6x_bootscript from partition 1; distro boot sets ``devtype``, ``devnum`` and
    ``distro_bootpart`` and loads /boot.scr."""
    check_bootargs(append)
    a = SCRIPT_ADDRESSES
    dtb = PurePosixPath(model.dtb).name
    return (
        f"# rtlab {model.name} {flavour}: what /extlinux/extlinux.conf says, for U-Boot\n"
        "# builds that load a boot script instead (docs/lab.md, \"Boot chain\")\n"
        'if test -n "${devtype}"; then\n'
        "    setenv rtlab_if ${devtype}; setenv rtlab_part ${devnum}:${distro_bootpart}\n"
        "else\n"
        "    setenv rtlab_if ${dtype}; setenv rtlab_part ${disk}:1\n"
        "fi\n"
        f'setenv bootargs "{append} ${{{BOOTARGS_VARIABLE}}}"\n'
        f"fatload ${{rtlab_if}} ${{rtlab_part}} {a['ramdisk']} /{INITRD}\n"
        "setenv rtlab_initrd_size ${filesize}\n"
        f"fatload ${{rtlab_if}} ${{rtlab_part}} {a['kernel']} /{model.kernel_image}\n"
        f"fatload ${{rtlab_if}} ${{rtlab_part}} {a['fdt']} /{dtb}\n"
        f"bootz {a['kernel']} {a['ramdisk']}:${{rtlab_initrd_size}} {a['fdt']}\n"
        'echo "rtlab: the boot script could not boot the kernel"\n'
    )


def install_boot_chain(model: BoardModel, flavour: str, boot: Path, append: str,
                       apt: debian.Apt, cache_dir: Path,
                       progress: Callable[[str], None]) -> dict[str, str]:
    """Put on the boot partition what the board's boot chain reads besides extlinux.conf;
    returns package -> version of what went in, for the manifest."""
    check_bootargs(append)
    used: dict[str, str] = {}
    if model.firmware is not None:
        firmware = fetch_pinned(RASPI_FIRMWARE, cache_dir, progress) / FIRMWARE_DIR
        for name in model.firmware.files:
            if not (firmware / name).is_file():
                raise ImageError(f"{RASPI_FIRMWARE.name} {RASPI_FIRMWARE.version} ships no "
                                 f"{FIRMWARE_DIR}/{name}")
            shutil.copyfile(firmware / name, boot / name)
        (boot / "config.txt").write_text(
            f"# rtlab {model.name} {flavour}: read by the Raspberry Pi's GPU firmware\n"
            + model.firmware.config_txt())
        used[RASPI_FIRMWARE.name] = RASPI_FIRMWARE.version
    if model.uboot.on_card is not None:
        package = apt.fetch(model.uboot.package)
        binary = package.root / model.uboot.path
        if not binary.is_file():
            raise ImageError(f"{package.name} {package.version} ships no {model.uboot.path}")
        shutil.copyfile(binary, boot / model.uboot.on_card)
        used[package.name] = package.version
    if model.boot_scripts:
        source = boot / "boot.cmd"
        source.write_text(boot_script(model, flavour, append))
        for name in model.boot_scripts:
            # the header's timestamp from SOURCE_DATE_EPOCH: the same inputs, the same card
            run(["mkimage", "-A", "arm", "-O", "linux", "-T", "script", "-C", "none",
                 "-n", f"rtlab {model.name} {flavour}", "-d", str(source), str(boot / name)],
                env={"SOURCE_DATE_EPOCH": str(EPOCH)})
    return used
