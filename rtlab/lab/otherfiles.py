"""The files of env/ that are not labgrid's (the virtual rack's vlab.yaml, the LAVA
instance's lava-server.yaml): ``rtlab env check`` reads each with its owner's reader,
which its owner registers here (from its ``cli.register``). The lab cannot import those
packages: they sit above it."""

from collections.abc import Callable
from pathlib import Path

Check = Callable[[Path], object]
_CHECKS: dict[str, Check] = {}


def register_check(file_name: str, check: Check) -> None:
    """``check(path)`` reads the file named ``file_name`` and raises, naming the file and
    line, when it is bad."""
    _CHECKS[file_name] = check


def other_file_check(path: Path) -> Check | None:
    return _CHECKS.get(path.name)
