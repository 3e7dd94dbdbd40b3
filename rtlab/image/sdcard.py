"""The SD card a real board would get flashed: an MBR with a FAT boot partition (kernel,
device tree, initramfs, a U-Boot distro-boot /extlinux/extlinux.conf and what else the
board's boot chain reads, :mod:`.bootchain`) and an ext4 data partition. The virtual rack
boots the card through the board's own U-Boot, so the card is the single source of truth
for what runs.

No loop devices, mounts or root file system tools: partitions are built as separate files
(mkfs.vfat + mtools, mkfs.ext4) and copied into the sparse image at their offsets, so an
image builds without root.
"""

from __future__ import annotations

import hashlib
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from rtlab.image.tools import EPOCH, ImageError, run
from rtlab.platform.boards import BoardModel

MIB = 1 << 20
SECTOR = 512
IMAGE_SIZE = 256 * MIB  # QEMU insists on a power-of-two SD card size
BOOT_START = 1 * MIB
BOOT_SIZE = 96 * MIB
DATA_START = BOOT_START + BOOT_SIZE
DATA_SIZE = IMAGE_SIZE - DATA_START

SD_IMAGE = "sdcard.img"
BMAP = "sdcard.img.bmap"
INITRD = "initrd.img"
EXTLINUX_CONF = "extlinux/extlinux.conf"
# A U-Boot variable the card's command line ends with: unset, it adds nothing; set at the
# U-Boot prompt (`setenv rtlab_bootargs initcall_debug; boot`), it adds kernel parameters
# for one boot without reflashing. U-Boot expands it in extlinux.conf's APPEND as in a
# boot script. The virtual rack passes its fault switches and emulator settings this way.
BOOTARGS_VARIABLE = "rtlab_bootargs"


def extlinux_conf(model: BoardModel, flavour: str, kernel_name: str, version: str,
                  append: str) -> str:
    label = f"rtlab-{model.name}-{flavour}"
    return (
        f"# rtlab {model.name} {flavour}: {kernel_name} {version}\n"
        "# U-Boot distro boot configuration; the virtual rack's U-Boot boots exactly this.\n"
        f"DEFAULT {label}\n"
        f"LABEL {label}\n"
        f"    KERNEL /{model.kernel_image}\n"
        f"    FDT /{PurePosixPath(model.dtb).name}\n"
        f"    INITRD /{INITRD}\n"
        f"    APPEND {append} ${{{BOOTARGS_VARIABLE}}}\n"
    )


def make_sd_image(sd: Path, boot: Path, name: str) -> None:
    """sd: the boot folder's files on the FAT partition, an empty ext4 data partition. The
    partitions are built beside sd; ``name`` (<board>-<flavour>) seeds their identifiers."""
    # Identifiers derived from the board and flavour keep the image reproducible.
    ident = int(hashlib.sha256(name.encode()).hexdigest(), 16)
    disk_id = f"{ident & 0xFFFFFFFF:08x}"

    vfat = sd.parent / "boot.vfat"
    with vfat.open("wb") as f:
        f.truncate(BOOT_SIZE)
    run(
        [
            "mkfs.vfat", "-F", "32", "-n", "BOOT", "-h", str(BOOT_START // SECTOR),
            "--invariant", str(vfat),
        ]
    )  # fmt: skip
    env = _mtools_env()
    for path in sorted(boot.rglob("*")):
        target = "::/" + path.relative_to(boot).as_posix()
        if path.is_dir():
            run(["mmd", "-i", str(vfat), target], env=env)
        else:
            os.utime(path, (EPOCH, EPOCH))
            run(["mcopy", "-m", "-i", str(vfat), str(path), target], env=env)

    ext4 = sd.parent / "data.ext4"
    with ext4.open("wb") as f:
        f.truncate(DATA_SIZE)
    uuid = f"{ident >> 128:032x}"
    uuid = f"{uuid[:8]}-{uuid[8:12]}-4{uuid[13:16]}-8{uuid[17:20]}-{uuid[20:32]}"
    run(
        [
            "mkfs.ext4", "-q", "-F", "-L", "data", "-U", uuid, "-b", "4096", "-m", "0",
            "-E", f"hash_seed={uuid},lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0",
            str(ext4),
        ],
        env={"E2FSPROGS_FAKE_TIME": str(EPOCH)},
    )  # fmt: skip

    with sd.open("wb") as f:
        f.truncate(IMAGE_SIZE)
    table = (
        "label: dos\n"
        f"label-id: 0x{disk_id}\n"
        "unit: sectors\n\n"
        f"start={BOOT_START // SECTOR}, size={BOOT_SIZE // SECTOR}, type=c, bootable\n"
        f"start={DATA_START // SECTOR}, size={DATA_SIZE // SECTOR}, type=83\n"
    )
    run(["sfdisk", "--no-reread", "--no-tell-kernel", "-q", str(sd)], stdin=table)
    with sd.open("r+b") as out:
        copy_sparse(vfat, out.fileno(), BOOT_START)
        copy_sparse(ext4, out.fileno(), DATA_START)
    vfat.unlink()
    ext4.unlink()
    if sd.stat().st_size != IMAGE_SIZE:
        raise ImageError(f"{sd} grew to {sd.stat().st_size} bytes")


def make_bmap(sd: Path, bmap: Path, name: str, progress: Callable[[str], None]) -> None:
    """bmap: the blocks of sd that hold data, so that flashing writes those and skips the
    rest; an image mostly mapped means its holes were lost on the way."""
    run(["bmaptool", "create", "-o", str(bmap), str(sd)])
    root = ET.parse(bmap).getroot()
    block = int(root.findtext("BlockSize", "0"))
    mapped = int(root.findtext("MappedBlocksCount", "0")) * block
    if not 0 < mapped <= IMAGE_SIZE // 2:
        raise ImageError(
            f"the bmap maps {mapped} of {IMAGE_SIZE} bytes: the image is not sparse "
            "(does this file system support holes?)"
        )
    progress(f"{name}: {mapped / MIB:.1f} MiB of {IMAGE_SIZE // MIB} MiB mapped")


def _mtools_env() -> dict[str, str]:
    # Images are not devices: skip mtools' geometry sanity checks, and keep its timestamps
    # constant.
    return {"MTOOLS_SKIP_CHECK": "1", "SOURCE_DATE_EPOCH": str(EPOCH)}


def copy_sparse(src: Path, out_fd: int, offset: int, block: int = 4096) -> None:
    """Write src into out_fd at offset, leaving holes (and all-zero blocks) unwritten."""
    zero = bytes(block)
    with src.open("rb") as f:
        fd = f.fileno()
        end = os.fstat(fd).st_size
        pos = 0
        while pos < end:
            try:
                pos = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break  # only a hole is left
            hole = os.lseek(fd, pos, os.SEEK_HOLE)
            while pos < hole:
                chunk = os.pread(fd, min(MIB, hole - pos), pos)
                for i in range(0, len(chunk), block):
                    piece = chunk[i : i + block]
                    if piece != zero[: len(piece)]:
                        os.pwrite(out_fd, piece, offset + pos + i)
                pos += len(chunk)
