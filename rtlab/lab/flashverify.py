"""Read back what was written to an SD card and compare it with the image's block map.

bmaptool checks the checksums of the *image* while it copies; it cannot see a card or mux
that stores something else. Reading the mapped ranges back from the card after the write
closes that gap: a mismatch is a flash error, never a board that boots a damaged image.
"""

import shlex
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from pathlib import Path

import attr

from rtlab.util.errors import FlashError

SUM_TOOLS = {"sha256": "sha256sum", "sha1": "sha1sum"}


@attr.frozen
class BmapRange:
    first: int
    last: int
    checksum: str


@attr.frozen
class Bmap:
    path: Path
    block_size: int
    checksum_type: str
    ranges: tuple[BmapRange, ...]


def read_bmap(path: Path) -> Bmap:
    """The block map as bmaptool writes it (format 1.4 with sha1, 2.x with sha256)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as error:
        raise FlashError(f"{path}: not a readable bmap file: {error}") from error
    try:
        block_size = int((root.findtext("BlockSize") or "").strip())
        checksum_type = (root.findtext("ChecksumType") or "sha1").strip()
        ranges = []
        for node in root.iter("Range"):
            first, _, last = (node.text or "").strip().partition("-")
            checksum = node.get("chksum") or node.get("sha1") or ""
            ranges.append(BmapRange(int(first), int(last or first), checksum.strip()))
    except ValueError as error:
        raise FlashError(f"{path}: malformed bmap: {error}") from error
    if checksum_type not in SUM_TOOLS:
        raise FlashError(f"{path}: checksum type {checksum_type!r} not supported "
                         f"(valid: {', '.join(SUM_TOOLS)})")
    if not ranges or any(not r.checksum for r in ranges):
        raise FlashError(f"{path}: no checksummed ranges to verify against")
    return Bmap(path, block_size, checksum_type, tuple(ranges))


def readback_script(device: str, bmap: Bmap) -> str:
    """A shell script printing one checksum per mapped range of ``device``. Block devices
    are read with O_DIRECT: a read served from the host's page cache would only show what
    was sent, not what the card kept."""
    dev = shlex.quote(device)
    tool = SUM_TOOLS[bmap.checksum_type]
    # no pipefail in every sh: an unreadable card is caught up front, and a dd failing
    # midway yields a checksum that cannot match
    lines = ["set -e", f"[ -r {dev} ] || {{ echo 'cannot read '{dev} >&2; exit 1; }}",
             f"flag=; [ -b {dev} ] && flag=iflag=direct"]
    for rng in bmap.ranges:
        count = rng.last - rng.first + 1
        lines.append(f"dd if={dev} bs={bmap.block_size} skip={rng.first} count={count} "
                     f"$flag status=none | {tool}")
    return "\n".join(lines) + "\n"


def compare(output: str, bmap: Bmap) -> list[BmapRange]:
    """The ranges whose read-back checksum differs from the map's."""
    sums = [line.split()[0] for line in output.splitlines() if line.strip()]
    if len(sums) != len(bmap.ranges):
        raise FlashError(f"image verify failed: read back {len(sums)} checksums for "
                         f"{len(bmap.ranges)} ranges")
    return [rng for rng, got in zip(bmap.ranges, sums, strict=True) if got != rng.checksum]


def verify_card(run: Callable[[Sequence[str]], str], device: str, bmap_path: Path) -> int:
    """Read the card back through ``run`` (which executes argv where the card is attached,
    locally or on the exporter) and raise FlashError on a mismatch; returns the number of
    bytes compared."""
    bmap = read_bmap(bmap_path)
    try:
        output = run(["sh", "-c", readback_script(device, bmap)])
    except Exception as error:  # noqa: BLE001 - any failure to read back is a flash error
        raise FlashError(f"image verify failed: could not read {device} back: "
                         f"{_one_line(error)}") from error
    bad = compare(output, bmap)
    if bad:
        where = ", ".join(f"blocks {r.first}-{r.last}" for r in bad[:3])
        raise FlashError(f"image verify failed: checksum mismatch in {where} "
                         f"({len(bad)} of {len(bmap.ranges)} ranges differ from "
                         f"{bmap_path.name})")
    return sum(r.last - r.first + 1 for r in bmap.ranges) * bmap.block_size


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[-1] if text else type(error).__name__
