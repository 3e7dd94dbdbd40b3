"""The recorded `lava-run` log of a virtual i.MX6Q rt job (tests/data/lava), and the ways
the LAVA tests spoil it."""

import json

from rtlab.util.paths import REPO_ROOT

LOG = REPO_ROOT / "tests" / "data" / "lava" / "qemu-imx6q-rt-lava-run.log"


def log_lines() -> list[str]:
    return LOG.read_text().splitlines(keepends=True)


def file_start(lines: list[str], case: str) -> int:
    """The line where the first evidence file whose owner starts with ``case`` begins
    (``cpu50`` finds ``cpu50-1000us``'s)."""
    return next(i for i, line in enumerate(lines) if f"rtlab-lava:file {case}" in line)


def garble_evidence(lines: list[str], case: str = "cpu50") -> list[str]:
    """``lines`` with one character of ``case``'s evidence file changed, the log entry
    itself still a valid JSON line: only the evidence's checksum can tell."""
    at = file_start(lines, case) + 3
    entry = json.loads(lines[at])
    message = entry["msg"]
    entry["msg"] = message[:10] + ("A" if message[10] != "A" else "B") + message[11:]
    return [*lines[:at], json.dumps(entry) + "\n", *lines[at + 1:]]
