"""A board's serial line: a TCP port for lab clients that stays open across power cycles
and speaks RFC 2217 (telnet with serial port control), as ser2net does in front of a
lab host's USB-serial adapter, and a Unix socket QEMU connects to each time the board is
powered on.

The line holds the QEMU side itself, so the console transcript is complete even while no
client is connected. RFC 2217 is what labgrid's exporter serves for a physical board, and
what `labgrid-client console` speaks (microcom -t): with a raw port the client's telnet
negotiation reached the board's getty as typed bytes.
"""

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

import attr
from serial import rfc2217

from rtlab.vlab.config import LOOPBACK

READ_SIZE = 4096
IAC = b"\xff"


@attr.define
class LineSettings:
    """The serial port an RFC 2217 client sets and reads (pyserial's PortManager works on
    this as on a pyserial port). QEMU's UART has no baud rate or modem lines: settings are
    kept and answered, and the lines read as those of a connected adapter."""

    baudrate: int = 115200
    bytesize: int = 8
    parity: str = "N"
    stopbits: float = 1
    xonxoff: bool = False
    rtscts: bool = False
    rts: bool = True
    dtr: bool = True
    break_condition: bool = False
    cts: bool = True
    dsr: bool = True
    ri: bool = False
    cd: bool = True

    def reset_input_buffer(self) -> None:
        """Nothing is buffered on this side of the line."""

    def reset_output_buffer(self) -> None:
        """Nothing is buffered on this side of the line."""


class _ClientLink:
    """PortManager's connection: its negotiation answers go to the client's socket."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    def write(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)


class SerialLine:
    def __init__(self, name: str, tcp_port: int, socket_path: Path, transcript: Path) -> None:
        self.name = name
        self.tcp_port = tcp_port
        self.socket_path = socket_path
        self.transcript_path = transcript
        self.logger = logging.getLogger(f"vlab.serial.{name}")
        self._clients: set[asyncio.StreamWriter] = set()
        self._board: asyncio.StreamWriter | None = None
        self._servers: list[asyncio.AbstractServer] = []
        # while unplugged (a fault), clients are cut off and new ones refused
        self._unplugged_until = 0.0
        self._transcript = transcript.open("ab", buffering=0)
        # sees everything the board prints, as the transcript does (the rack's faults
        # that wait for a console text)
        self.on_output: Callable[[bytes], None] | None = None

    async def start(self) -> None:
        self.socket_path.unlink(missing_ok=True)
        self._servers.append(
            await asyncio.start_unix_server(self._board_connected, path=str(self.socket_path))
        )
        self._servers.append(
            await asyncio.start_server(self._client_connected, host=LOOPBACK, port=self.tcp_port)
        )

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for writer in [*self._clients, *([self._board] if self._board else [])]:
            writer.close()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.wait_closed()
        self._transcript.close()
        self.socket_path.unlink(missing_ok=True)

    def disconnect(self, seconds: float) -> None:
        """Pull the adapter for ``seconds``: every client connection drops, and what the
        board prints meanwhile reaches no client (the rack's transcript keeps it)."""
        self._unplugged_until = asyncio.get_running_loop().time() + seconds
        self.logger.warning("fault: serial adapter unplugged for %.0f s", seconds)
        for writer in list(self._clients):
            self._clients.discard(writer)
            writer.close()

    def unplugged(self) -> bool:
        return asyncio.get_running_loop().time() < self._unplugged_until

    def emit(self, data: bytes) -> None:
        """Bytes the board 'prints': to the transcript and to every connected client."""
        self._transcript.write(data)
        if self.on_output is not None:
            try:
                self.on_output(data)
            except Exception:
                # a broken watcher must not cut the board's console
                self.logger.exception("console watcher failed")
        if self.unplugged():
            return
        # a 0xff byte of the board's is data, not a telnet command
        escaped = data.replace(IAC, IAC + IAC)
        for writer in list(self._clients):
            if writer.is_closing():
                self._clients.discard(writer)
                continue
            writer.write(escaped)

    def type_in(self, data: bytes) -> bool:
        """Send ``data`` to the board as if typed on the line; False if no board is
        connected."""
        if self._board is None or self._board.is_closing():
            return False
        self._board.write(data)
        return True

    async def _board_connected(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if self._board is not None and not self._board.is_closing():
            self.logger.warning("second board connection refused")
            writer.close()
            return
        self._board = writer
        try:
            while data := await reader.read(READ_SIZE):
                self.emit(data)
        except ConnectionError:
            pass
        finally:
            if self._board is writer:
                self._board = None
            writer.close()

    async def _client_connected(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if self.unplugged():
            self.logger.info("client refused: the adapter is unplugged")
            writer.close()
            return
        self._clients.add(writer)
        self.logger.info("client connected from %s", writer.get_extra_info("peername"))
        # sends the server's side of the negotiation at once
        port = rfc2217.PortManager(LineSettings(), _ClientLink(writer), logger=None)
        try:
            while data := await reader.read(READ_SIZE):
                # the client's telnet commands are answered here, never typed to the board
                typed = b"".join(port.filter(data))
                # typing into a powered-off board goes nowhere, as on real hardware
                if not typed or self.unplugged():
                    continue
                if self._board is not None and not self._board.is_closing():
                    self._board.write(typed)
        except ConnectionError:
            pass
        finally:
            self._clients.discard(writer)
            writer.close()
            self.logger.info("client disconnected")
