"""Copies of a built SD image with one boot file changed, as a developer would change a
card by hand: a broken kernel, another kernel command line."""

import json
import shutil
import subprocess
from pathlib import Path


def copy_image(sd_image: Path, dest: Path) -> Path:
    """The image and its manifest in ``dest`` (the manifest says board and flavour)."""
    dest.mkdir()
    copy = dest / "sdcard.img"
    shutil.copy(sd_image, copy)
    shutil.copy(sd_image.parent / "manifest.json", dest / "manifest.json")
    return copy


def _boot_partition(image: Path) -> str:
    table = subprocess.run(["sfdisk", "--json", str(image)], capture_output=True, text=True,
                           check=True).stdout
    offset = json.loads(table)["partitiontable"]["partitions"][0]["start"] * 512
    return f"{image}@@{offset}"


def read_boot_file(image: Path, name: str) -> bytes:
    return subprocess.run(["mtype", "-i", _boot_partition(image), f"::/{name}"],
                          capture_output=True, check=True).stdout


def replace_boot_file(image: Path, name: str, data: bytes) -> None:
    """Write ``name`` on the FAT boot partition and a fresh .bmap beside the image."""
    staged = image.parent / Path(name).name
    staged.write_bytes(data)
    subprocess.run(["mcopy", "-o", "-i", _boot_partition(image), str(staged), f"::/{name}"],
                   check=True)
    staged.unlink()
    subprocess.run(["bmaptool", "create", "-o", f"{image}.bmap", str(image)], check=True)
