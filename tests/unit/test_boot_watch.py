"""A boot attempt ends as soon as the console shows it cannot succeed — a kernel panic, or
nothing at all for ``silence_timeout`` s after power-on — instead of after the whole login
timeout; a board that boots still gets logged in although the watch read its first login
prompt. The board is a console on loopback that plays a boot when the (fake) PDU switches
it on, and a shell after the login."""

import socket
import threading
import time
from pathlib import Path

import pytest
from labgrid import Environment

from rtlab.lab.strategy import RTLabStrategy
from rtlab.util.errors import BootError
from tests.ports import free_port

LOGIN_TIMEOUT_S = 30
SILENCE_TIMEOUT_S = 2
PANIC = "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"


class FakeBoard:
    """A console server: on power-on it prints ``script`` (text, then seconds to wait,
    in turn), then answers a login and a shell's lines as busybox's getty and sh do."""

    def __init__(self, script: list[str | float], stale: str = "") -> None:
        self.script = script
        self.stale = stale
        self.server = socket.create_server(("127.0.0.1", free_port()))
        self.port = self.server.getsockname()[1]
        self.powered = threading.Event()
        self.logins = 0
        self.conn: socket.socket | None = None
        threading.Thread(target=self._serve, daemon=True).start()

    def power_set(self, host: str, port: int | None, index: int, value: bool) -> None:
        if value:
            self.powered.set()
        else:
            self.powered.clear()

    def power_get(self, host: str, port: int | None, index: int) -> bool:
        return self.powered.is_set()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        self.conn = conn
        # what the board printed before it was switched off, still on its way
        conn.sendall(self.stale.encode())
        self.powered.wait()
        for step in self.script:
            if isinstance(step, str):
                conn.sendall(step.encode())
            else:
                time.sleep(step)
        logged_in = False
        pending = b""
        while chunk := conn.recv(1024):
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                text = line.decode().strip()
                if not logged_in:
                    if text == "root":
                        logged_in = True
                        self.logins += 1
                        conn.sendall(b"\r\n# ")
                    else:
                        conn.sendall(b"\r\nrtlab login: ")
                elif text.startswith("echo "):
                    # sh's echo of labgrid's quoted marker: the quotes go
                    conn.sendall(f"{text}\r\n{text[5:].replace(chr(39), '')}\r\n# "
                                 .encode())
                else:
                    conn.sendall(f"{text}\r\n# ".encode())

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.server.close()


def boot(tmp_path: Path, monkeypatch, script: list[str | float],
         login_timeout: int = LOGIN_TIMEOUT_S, stale: str = "",
         ) -> tuple[RTLabStrategy, FakeBoard]:
    board = FakeBoard(script, stale)
    env_file = tmp_path / "env.yaml"
    env_file.write_text(f"""\
imports:
  - rtlab.lab
targets:
  main:
    resources:
      NetworkSerialPort:
        host: 127.0.0.1
        port: {board.port}
        protocol: raw
      NetworkPowerPort:
        model: simplerest
        host: 'http://127.0.0.1:9/pdu/{{index}}/{{value}}'
        index: 1
      VirtualSDMuxDevice:
        url: http://127.0.0.1:9/sdmux/imx6q-01
      VirtualMassStorage:
        path: /nonexistent
    drivers:
      NetworkPDUDriver:
        delay: 0.0
      SerialDriver: {{}}
      ShellDriver:
        login_prompt: ' login: '
        username: root
        prompt: '# '
        login_timeout: {login_timeout}
      VirtualSDMuxDriver: {{}}
      VirtualStorageDriver: {{}}
      RTLabStrategy:
        boot_attempts: 1
        silence_timeout: {SILENCE_TIMEOUT_S}
""")
    target = Environment(str(env_file)).get_target("main")
    strategy = target.get_driver(RTLabStrategy)
    target.activate(strategy.power)
    monkeypatch.setattr(strategy.power, "backend", board)
    return strategy, board


@pytest.fixture
def lab(tmp_path, monkeypatch):
    made: list[tuple[RTLabStrategy, FakeBoard]] = []

    def make(script: list[str | float], **kwargs: int | str
             ) -> tuple[RTLabStrategy, FakeBoard]:
        made.append(boot(tmp_path, monkeypatch, script, **kwargs))
        return made[-1]

    yield make
    for strategy, board in made:
        strategy.target.cleanup()
        board.close()


def timed_boot(strategy: RTLabStrategy) -> tuple[BootError | None, float]:
    started = time.monotonic()
    try:
        strategy._boot()
    except BootError as error:
        return error, time.monotonic() - started
    return None, time.monotonic() - started


def test_a_panic_ends_the_boot_attempt_when_it_is_printed(lab):
    strategy, _ = lab(["U-Boot 2023.01\r\n", 0.5, "[    1.0] Booting Linux\r\n", 0.5,
                       f"[    2.3] {PANIC}\r\n", "[    2.3] ---[ end Kernel panic ]---\r\n"])
    error, seconds = timed_boot(strategy)
    assert error is not None
    assert str(error) == f"kernel panic during boot: {PANIC} (boot attempt 1 of 1)"
    assert seconds < LOGIN_TIMEOUT_S / 3, seconds


def test_a_board_that_prints_nothing_ends_after_the_silence_timeout(lab):
    strategy, _ = lab([])
    error, seconds = timed_boot(strategy)
    assert error is not None
    assert str(error) == (f"board silent after power-on: no console output in "
                          f"{SILENCE_TIMEOUT_S} s (boot attempt 1 of 1)")
    assert SILENCE_TIMEOUT_S <= seconds < LOGIN_TIMEOUT_S / 3, seconds


def test_a_boot_that_hangs_ends_after_one_login_timeout(lab):
    # the watch's wait is the login timeout: the ShellDriver does not wait it again
    strategy, _ = lab(["[    1.0] Booting Linux\r\n", "[    2.0] Run /init as init process\r\n"],
                      login_timeout=6)
    error, seconds = timed_boot(strategy)
    assert error is not None
    assert str(error) == ("no login prompt after 6 s (last console line: '[    2.0] Run /init "
                          "as init process') (boot attempt 1 of 1)")
    assert 6 <= seconds < 9, seconds


def test_a_slow_talker_is_not_silent(lab):
    # quiet for longer than the silence timeout only after it printed something
    strategy, board = lab(["U-Boot 2023.01\r\n", SILENCE_TIMEOUT_S + 1.5,
                           "[    3.0] Booting Linux\r\n\r\nrtlab login: "])
    error, _ = timed_boot(strategy)
    assert error is None, error
    assert board.logins == 1


def test_a_board_that_boots_is_logged_in_after_the_watch_read_its_prompt(lab):
    strategy, board = lab(["[    1.0] Booting Linux\r\n", 0.3, "\r\nrtlab login: "])
    error, _ = timed_boot(strategy)
    assert error is None, error
    assert board.logins == 1
    # the ShellDriver saw its prompt answer an echo (labgrid's own check after a login)
    assert strategy.shell._status == 1
    assert [a["ok"] for a in strategy.attempts if a["step"] == "boot"] == [True]


def test_what_the_board_printed_before_the_power_cycle_is_not_this_boot(lab):
    # the end of the panic that ended the previous case, and its prompt, arrive late
    strategy, board = lab(["[    1.0] Booting Linux\r\n", 0.5, "\r\nrtlab login: "],
                          stale=f"[   30.1] ---[ end {PANIC} ]---\r\n")
    error, _ = timed_boot(strategy)
    assert error is None, error
    assert board.logins == 1
