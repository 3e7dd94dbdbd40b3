"""Reading a written card back against the image's block map."""

import subprocess
from pathlib import Path

import pytest

from rtlab.lab.flashverify import read_bmap, readback_script, verify_card
from rtlab.util.errors import FlashError
from rtlab.vlab.faults import CORRUPT_OFFSET, corrupt

BLOCK = 4096


def run_locally(argv) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout


@pytest.fixture
def image(tmp_path) -> Path:
    """A sparse image with data in three places, and its bmap from bmaptool itself."""
    path = tmp_path / "card.img"
    with path.open("wb") as out:
        out.truncate(64 * BLOCK)
        for block, byte in ((0, b"a"), (10, b"b"), (11, b"c"), (40, b"d")):
            out.seek(block * BLOCK)
            out.write(byte * BLOCK)
    subprocess.run(["bmaptool", "create", "-o", f"{path}.bmap", str(path)], check=True,
                   capture_output=True)
    return path


def test_bmap_ranges_are_read(image):
    bmap = read_bmap(Path(f"{image}.bmap"))
    assert bmap.block_size == BLOCK
    assert bmap.checksum_type == "sha256"
    assert [(r.first, r.last) for r in bmap.ranges] == [(0, 0), (10, 11), (40, 40)]


def test_a_faithful_copy_verifies(image, tmp_path):
    card = tmp_path / "sd.img"
    card.write_bytes(image.read_bytes())
    assert verify_card(run_locally, str(card), Path(f"{image}.bmap")) == 4 * BLOCK


def test_a_flipped_byte_is_a_checksum_mismatch_naming_the_blocks(image, tmp_path):
    card = tmp_path / "sd.img"
    card.write_bytes(image.read_bytes())
    corrupt(card)
    assert CORRUPT_OFFSET < BLOCK
    with pytest.raises(FlashError, match=r"image verify failed: checksum mismatch in "
                                         r"blocks 0-0 \(1 of 3 ranges differ"):
        verify_card(run_locally, str(card), Path(f"{image}.bmap"))


def test_a_card_that_cannot_be_read_is_a_flash_error(image, tmp_path):
    with pytest.raises(FlashError, match="could not read .*missing.img back"):
        verify_card(run_locally, str(tmp_path / "missing.img"), Path(f"{image}.bmap"))


def test_the_device_name_is_quoted(image):
    script = readback_script("/dev/sd x; rm -rf /", read_bmap(Path(f"{image}.bmap")))
    assert "if='/dev/sd x; rm -rf /'" in script


def test_a_malformed_bmap_names_the_file(tmp_path):
    bad = tmp_path / "bad.bmap"
    bad.write_text("<bmap><BlockSize>four</BlockSize></bmap>")
    with pytest.raises(FlashError, match=f"{bad}: malformed bmap"):
        read_bmap(bad)
