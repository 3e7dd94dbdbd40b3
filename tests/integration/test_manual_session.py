"""The README's manual session, as a person does it: its block pasted line by line into a
fresh shell, twice in a row in the same shell, with `labgrid-client console` driven in a
pseudo-terminal (log in, run a command, read its answer, leave with microcom's escape).

The block starts and stops the virtual rack itself, so the rack of the other tests is
stopped for it and started again afterwards.
"""

import os
import re

import pexpect
import pytest

from rtlab.util import paths
from rtlab.vlab import control
from rtlab.vlab.config import load_config

pytestmark = pytest.mark.vlab

PLACE = "imx6q-01"
RC = re.compile(rb"rtlab-rc=(\d+)\r?\n")


def readme_block() -> list[str]:
    """The shell lines of the README's "A manual session" block."""
    text = (paths.REPO_ROOT / "README.md").read_text()
    section = text.split("## A manual session", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README: no ```sh block under 'A manual session'"
    return [line for line in block.group(1).splitlines() if line.strip()]


@pytest.fixture
def own_rack():
    """The block starts and stops the rack: the other tests' rack steps aside for it."""
    config = load_config(paths.default_vlab_config())
    state_dir = paths.vlab_state_dir()
    was_running = control.running_pid(state_dir) is not None
    if was_running:
        control.stop(state_dir)
    yield
    if control.running_pid(state_dir) is not None:
        control.stop(state_dir)
    if was_running:
        control.start(config, state_dir)


def fresh_shell() -> pexpect.spawn:
    # a new terminal: none of rtlab's or labgrid's variables, the venv not active
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("LG_", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not p.startswith(str(paths.REPO_ROOT)))
    env["PS1"] = "$ "
    return pexpect.spawn("bash", ["--norc", "--noprofile"], cwd=paths.REPO_ROOT, env=env,
                         timeout=300, encoding=None)


def status_of(shell: pexpect.spawn, line: str) -> int:
    shell.sendline('echo "rtlab-rc=$?"')
    shell.expect(RC)
    return int(shell.match.group(1))


def use_console(shell: pexpect.spawn) -> bytes:
    """What a person does in `labgrid-client console`: log in, run a command, read its
    answer, leave with microcom's escape. Returns the command's answer."""
    # labgrid-client names the program it calls: microcom -t, on both racks
    shell.expect_exact(b"microcom -s 115200 -t 127.0.0.1:")
    shell.expect_exact(b"Type the escape character")
    # what the board printed before microcom connected reached nobody: ask the getty again
    for _ in range(60):
        shell.send(b"\r")
        if shell.expect([b" login: ", pexpect.TIMEOUT], timeout=5) == 0:
            break
    else:
        pytest.fail("no login prompt on the console in 5 min")
    shell.send(b"root\r")
    shell.expect(rb"root@rtlab:[^ ]* ", timeout=60)
    shell.send(b"echo kernel=$(uname -r) realtime=$(cat /sys/kernel/realtime)\r")
    shell.expect(rb"kernel=(\S+) realtime=(\d)\r*\n", timeout=60)
    answer = shell.match.group(0)
    shell.expect(rb"root@rtlab:[^ ]* ")
    # microcom's escape: Ctrl-\, then its command `quit`
    shell.send(b"\x1c")
    shell.expect(b"-> ", timeout=30)
    shell.send(b"quit\r")
    return answer


def test_the_readme_manual_session_runs_twice_in_one_fresh_shell(own_rack):
    lines = readme_block()
    assert any(re.search(r"labgrid-client -p \S+ console", line) for line in lines)
    shell = fresh_shell()
    try:
        for round_ in (1, 2):
            for line in lines:
                shell.sendline(line.encode())
                if re.search(r"labgrid-client -p \S+ console", line):
                    answer = use_console(shell)
                    # the image the block flashes is the RT one
                    assert b"-rt-" in answer and answer.rstrip().endswith(b"realtime=1"), \
                        answer
                status = status_of(shell, line)
                assert status == 0, (f"round {round_}: {line!r} exited {status}:\n"
                                     + shell.before.decode(errors="replace")[-3000:])
            # the block released the place and stopped the rack
            assert control.running_pid(paths.vlab_state_dir()) is None, round_
    finally:
        shell.close(force=True)


def test_a_console_in_a_second_terminal_needs_no_image_variable(vlab):
    client = str(paths.REPO_ROOT / ".venv" / "bin" / "labgrid-client")
    shell = fresh_shell()
    try:
        # the first terminal's session: LG_ENV and LG_PLACE, the place acquired
        shell.sendline(f"export LG_ENV=env/virtual.yaml LG_PLACE={PLACE}".encode())
        shell.sendline(f"{client} -p {PLACE} acquire".encode())
        assert status_of(shell, "acquire") == 0, shell.before
        # no LG_IMAGE: the environment loads (labgrid used to fail on its "$LG_IMAGE")
        shell.sendline(f"{client} -p {PLACE} power get".encode())
        shell.expect(rb"power for place \S+ is (on|off)")
        assert status_of(shell, "power get") == 0, shell.before
        # and flashing says what to set
        shell.sendline(f"{client} -p {PLACE} -s flashed power get".encode())
        shell.expect(rb"LG_IMAGE is not set \(export LG_IMAGE=<path>/sdcard.img")
        assert status_of(shell, "flash") != 0
        shell.sendline(f"{client} -p {PLACE} release".encode())
        assert status_of(shell, "release") == 0, shell.before
    finally:
        shell.close(force=True)
