"""What every step of the image shares, in one module below the others so that none of
them imports another's: the host tools fail as an :class:`ImageError` that quotes the
command and what it said (a missing tool says so instead of a traceback), and one
timestamp for every file keeps the same inputs giving the same image.
"""

from __future__ import annotations

import os
import subprocess

# File timestamps inside the image; a constant keeps the image reproducible.
EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "1700000000"))


class ImageError(RuntimeError):
    """The image cannot be built; the message says which input is at fault."""


def run(argv: list[str], *, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    try:
        proc = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, **env} if env else None,
        )
    except FileNotFoundError as exc:
        raise ImageError(f"{argv[0]} is not installed on this host") from exc
    if proc.returncode != 0:
        raise ImageError(
            f"`{' '.join(argv)}` failed (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()}"
        )
    return proc.stdout
