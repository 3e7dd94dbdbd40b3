"""rtlab.measure.upload: a file to the board as short shell commands, run here by a real sh
with the same base64, gunzip and sha256sum calls the board's busybox gets."""

import hashlib
import subprocess

import pytest

from rtlab.measure import upload


class ShShell:
    """run_check as labgrid's ShellDriver runs a command: ``sh -c CMD``."""

    def __init__(self, garble=None):
        self.sent: list[str] = []
        self.garble = garble

    def run_check(self, cmd, *, timeout=30.0, codec="utf-8", decodeerrors="strict"):
        self.sent.append(cmd)
        if self.garble is not None:
            cmd = self.garble(cmd)
        done = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True,
                              timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{cmd[:40]}… exited {done.returncode}: {done.stdout}"
                               f"{done.stderr}")
        return done.stdout.splitlines()


@pytest.mark.parametrize("data", [b"", b"#!/bin/sh\necho 'it''s' \"$1\"\n",
                                  bytes(range(256)) * 64])
def test_a_file_arrives_byte_for_byte_in_commands_a_line_editor_takes(tmp_path, data):
    shell = ShShell()
    target = tmp_path / "rtlab-window.sh"
    target.write_text("the previous window's script")
    upload.put_file(shell, data, str(target))
    assert target.read_bytes() == data
    # busybox's line editor cuts lines at 1024 characters; labgrid wraps each command in
    # about 60 more
    assert all(len(cmd) < 1024 - 80 for cmd in shell.sent), [len(c) for c in shell.sent]
    assert shell.sent == upload.upload_commands(data, str(target))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rtlab-window.sh"]


def test_a_long_file_goes_in_several_chunks(tmp_path):
    data = "\n".join(f"line {n} {n * 7919 % 104729}" for n in range(3000)).encode()
    shell = ShShell()
    upload.put_file(shell, data, str(tmp_path / "big"))
    assert (tmp_path / "big").read_bytes() == data
    assert len(shell.sent) > 3 and all(len(cmd) < 1024 - 80 for cmd in shell.sent)


def test_a_chunk_garbled_on_the_line_fails_and_leaves_the_old_file(tmp_path):
    # bytes that do not compress away: every chunk carries some
    data = b"".join(hashlib.sha256(str(n).encode()).digest() for n in range(64))
    target = tmp_path / "rtlab-window.sh"
    target.write_text("old")

    def swap_two(cmd: str) -> str:
        # two base64 characters swapped: still valid base64 and maybe gzip, wrong bytes
        chunk = cmd.split()[2]
        if not cmd.startswith("printf %s ") or len(chunk) < 4:
            return cmd
        at = len(chunk) // 2
        return cmd.replace(chunk, chunk[:at] + chunk[at + 1] + chunk[at] + chunk[at + 2:], 1)

    with pytest.raises(RuntimeError, match="exited"):
        upload.put_file(ShShell(garble=swap_two), data, str(target))
    assert target.read_text() == "old"
