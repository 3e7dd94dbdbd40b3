"""A file to the board through its shell, as short commands: gzip'd, base64'd, in chunks
any shell's line editor takes, and checked by SHA-256 before it replaces the destination.

labgrid's ``ShellDriver.put_bytes`` sends a file by XMODEM, a packet and an
acknowledgement at a time, and its receiver waits seconds at the end: on the virtual rack a
window script of 2 KB took 3.6-6.1 s that way (bench/harness_overhead.py, 2026-11-25),
the largest part of a case's overhead. The same script as two or three commands of the
shell takes a few tenths of a second, and needs nothing on the board but busybox's
base64, gunzip and sha256sum (the LAVA jobs send their evidence the same way, back).
"""

import base64
import gzip
import hashlib
import posixpath
import shlex
from typing import Protocol

# busybox's line editor takes lines of 1024 characters (CONFIG_FEATURE_EDITING_MAX_LEN);
# labgrid's ShellDriver wraps each command in about 60 more (its marker and run function)
LINE_CHARS = 900
MARK = "rtlab-upload:"


class Shell(Protocol):
    def run_check(self, cmd: str, *, timeout: float = 30.0, codec: str = "utf-8",
                  decodeerrors: str = "strict") -> list[str]: ...


def upload_commands(data: bytes, remotefile: str) -> list[str]:
    """The shell commands that write ``data`` to ``remotefile`` on the board; the last one
    decodes, checks and moves it into place, and fails (printing why) on any mismatch."""
    packed = base64.b64encode(gzip.compress(data, mtime=0)).decode("ascii")
    folder, name = posixpath.split(remotefile)
    staging = shlex.quote(f"{remotefile}.b64")
    digest = hashlib.sha256(data).hexdigest()
    # in the file's folder (run_check runs each command in a shell of its own), so that
    # its path is said once
    b64, new, target = (shlex.quote(f"{name}{suffix}") for suffix in (".b64", ".new", ""))
    check = (f" && cd {shlex.quote(folder or '.')} && base64 -d {b64} | gunzip > {new}"
             f" && rm -f {b64} && set -- $(sha256sum {new}) && if [ \"$1\" = {digest} ];"
             f" then mv {new} {target}; else echo {MARK} {target} arrived garbled, SHA-256"
             f" $1; rm -f {new}; exit 1; fi")
    room = LINE_CHARS - len(f"printf %s  >> {staging}")
    if room - len(check) < 64:
        raise ValueError(f"{remotefile}: the path is too long for commands of "
                         f"{LINE_CHARS} characters")
    # full chunks first; the last, with the check, takes what is left (maybe nothing)
    chunks = []
    while len(packed) > room - len(check):
        chunks.append(packed[:room])
        packed = packed[room:]
    chunks.append(packed)
    # base64's alphabet needs no quoting in a shell
    commands = [f"printf %s {chunk} {'>' if index == 0 else '>>'} {staging}"
                for index, chunk in enumerate(chunks)]
    commands[-1] += check
    return commands


def put_file(shell: Shell, data: bytes, remotefile: str, *, timeout: float = 30.0) -> None:
    """Write ``data`` to ``remotefile`` on the board (replacing it once complete). Raises
    what the shell's run_check raises when a command fails, the garbled case included."""
    for command in upload_commands(data, remotefile):
        shell.run_check(command, timeout=timeout)
