"""``labgrid-client`` as rtlab runs it: the venv's program, the coordinator and place named
on the command line, and none of a manual session's variables.

A person's shell may hold ``LG_ENV``, ``LG_PLACE`` or ``LG_IMAGE`` from the README's manual
session; labgrid-client reads them (``LG_ENV`` makes it load that environment file and
resolve its templates against ``LG_PLACE``), so rtlab's own calls, which always say
``-x`` and ``-p``, would act on that session's place or fail on its file.
"""

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

# what a manual session exports; the identity (LG_HOSTNAME, LG_USERNAME) and the way to
# the coordinator (LG_PROXY) stay the caller's
SESSION_VARIABLES = ("LG_ENV", "LG_PLACE", "LG_IMAGE", "LG_STATE", "LG_INITIAL_STATE",
                     "LG_TOKEN", "LG_COORDINATOR")


def program() -> Path:
    """The labgrid-client of rtlab's own environment (the version rtlab pins)."""
    return Path(sys.executable).parent / "labgrid-client"


def environment(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """``base`` (default: this process's environment) without a manual session's
    variables, plus ``extra``."""
    env = {key: value for key, value in (os.environ if base is None else base).items()
           if key not in SESSION_VARIABLES}
    env.update(extra)
    return env


def run(coordinator: str, *args: str, place: str | None = None, timeout: float = 60,
        env: Mapping[str, str] | None = None, client: Path | None = None) -> str:
    """``labgrid-client -x COORDINATOR [-p PLACE] ARGS``; its standard output. Raises
    RuntimeError with labgrid-client's own message when it fails."""
    argv = [os.fspath(client or program()), "-x", coordinator,
            *(("-p", place) if place is not None else ()), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                          env=environment(env))
    if proc.returncode != 0:
        where = f" on {place}" if place is not None else ""
        raise RuntimeError(f"labgrid-client {' '.join(args)}{where} failed: "
                           f"{(proc.stderr or proc.stdout).strip()}")
    return proc.stdout
