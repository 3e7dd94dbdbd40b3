"""The virtual rack's serial line speaks RFC 2217, as ser2net does for a lab host: the
clients of a physical rack (pyserial's rfc2217:// in labgrid's SerialDriver, microcom -t
in `labgrid-client console`) work on it unchanged, and their telnet negotiation never
reaches the board as typed bytes. A stand-in for QEMU holds the board's end (no QEMU)."""

import asyncio
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pexpect
import pytest
import serial

from rtlab.vlab.serial import SerialLine
from tests.ports import free_port


class Line:
    """A SerialLine on its own event loop thread, with the board's end connected."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.line = SerialLine("imx6q-01", self.port, folder / "s.sock", folder / "t.log")
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.typed = bytearray()
        self._call(self._start())

    def _call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(10)

    async def _start(self) -> None:
        await self.line.start()
        reader, self.board_out = await asyncio.open_unix_connection(
            str(self.line.socket_path))
        self.reader_task = asyncio.ensure_future(self._read_board(reader))

    async def _read_board(self, reader: asyncio.StreamReader) -> None:
        while data := await reader.read(4096):
            self.typed += data

    def prints(self, data: bytes) -> None:
        """The board prints ``data``."""
        async def write() -> None:
            self.board_out.write(data)
            await self.board_out.drain()
        self._call(write())

    def wait_for_client(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.line._clients and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.line._clients, "no client connected"

    def typed_at_board(self, expected: bytes, timeout: float = 5.0) -> bytes:
        """What reached the board, once it holds ``expected`` (or the time is up)."""
        deadline = time.monotonic() + timeout
        while expected not in self.typed and time.monotonic() < deadline:
            time.sleep(0.05)
        return bytes(self.typed)

    def stop(self) -> None:
        async def stop() -> None:
            self.reader_task.cancel()
            self.board_out.close()
            await self.line.stop()
        self._call(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def line():
    # a short folder: Unix socket paths are limited to 107 bytes
    folder = Path(tempfile.mkdtemp(prefix="vlab-", dir="/tmp"))
    started = Line(folder)
    yield started
    started.stop()
    shutil.rmtree(folder, ignore_errors=True)


def test_pyserial_rfc2217_client_sets_the_line_and_both_directions_pass_every_byte(line):
    # labgrid's SerialDriver for a NetworkSerialPort with protocol rfc2217
    port = serial.serial_for_url(f"rfc2217://127.0.0.1:{line.port}", baudrate=115200,
                                 timeout=2)
    try:
        assert port.baudrate == 115200
        # 0xff is telnet's IAC: it must arrive as data both ways, never as a command
        line.prints(b"login: \xff\x00done\r\n")
        assert port.read_until(b"done\r\n") == b"login: \xff\x00done\r\n"
        port.write(b"root\r\xff\x01")
        assert line.typed_at_board(b"\x01") == b"root\r\xff\x01"
        assert port.cts and port.cd, "the modem lines of a connected adapter"
    finally:
        port.close()


def test_microcom_as_labgrid_client_console_calls_it_types_only_what_is_typed(line):
    if shutil.which("microcom") is None:
        pytest.fail("microcom is missing: the bootstrap installs it (labgrid-client console)")
    # the very call of labgrid-client console
    console = pexpect.spawn("microcom", ["-s", "115200", "-t", f"127.0.0.1:{line.port}"],
                            timeout=10)
    try:
        # what the board prints before a client is connected reaches no client
        console.expect("Type the escape character")
        line.wait_for_client()
        line.prints(b"\r\nrtlab-imx6q login: ")
        console.expect("rtlab-imx6q login: ")
        console.send("root\r")
        # the board got the keystrokes and nothing of the client's negotiation, which a
        # raw port passed on to the getty (and which microcom crashed on when echoed)
        assert line.typed_at_board(b"root\r") == b"root\r"
        line.prints(b"root@rtlab:~ ")
        console.expect("root@rtlab:~ ")
        # microcom's escape: Ctrl-\, then quit at its prompt
        console.send("\x1c")
        console.send("quit\r")
        console.expect(pexpect.EOF)
        console.close()
        assert console.exitstatus == 0, console.before
    finally:
        console.close(force=True)
