"""Faults that wait for a text on the board's console, and the panic at boot: the rack's
side, with a stand-in for QEMU on the board's end of the serial line (no QEMU)."""

import asyncio
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from rtlab.measure.window import MARK
from rtlab.vlab.config import VirtualBoard
from rtlab.vlab.faults import ConsoleWatch, Fault, FaultError
from rtlab.vlab.rack import BOOT_PANIC_PARAM, SYSRQ_CRASH, BoardSlot
from tests.ports import free_port

# what the board prints when a measurement window opens (rtlab.measure.window.window_script)
STARTED = f"{MARK}started"



class Bench:
    """A board slot with its serial line up, QEMU's end of the line and a lab client."""

    def __init__(self, slot: BoardSlot) -> None:
        self.slot = slot
        self.board_in: asyncio.StreamReader
        self.board_out: asyncio.StreamWriter
        self.client_in: asyncio.StreamReader
        self.client_out: asyncio.StreamWriter

    async def start(self) -> None:
        await self.slot.serial.start()
        self.board_in, self.board_out = await asyncio.open_unix_connection(
            str(self.slot.serial.socket_path))
        self.client_in, self.client_out = await asyncio.open_connection(
            "127.0.0.1", self.slot.board.serial_port)
        # the line opens with its side of the RFC 2217 negotiation (IAC ...), which this
        # plain client leaves unanswered
        greeting = await asyncio.wait_for(self.client_in.read(4096), 2.0)
        assert greeting.startswith(b"\xff"), greeting

    async def prints(self, *chunks: bytes) -> None:
        """The board prints ``chunks``, each arriving at the rack on its own."""
        for chunk in chunks:
            self.board_out.write(chunk)
            await self.board_out.drain()
            await asyncio.sleep(0.05)

    async def typed_at_board(self, timeout: float) -> bytes:
        try:
            return await asyncio.wait_for(self.board_in.read(4096), timeout)
        except TimeoutError:
            return b""

    async def stop(self) -> None:
        self.slot._cancel_fault_tasks()
        self.board_out.close()
        self.client_out.close()
        await self.slot.serial.stop()


def on_bench(test: Callable[[Bench], Awaitable[None]]) -> None:
    # a short folder: Unix socket paths are limited to 107 bytes
    folder = Path(tempfile.mkdtemp(prefix="vlab-", dir="/tmp"))
    try:
        board = VirtualBoard("imx6q-01", "imx6q", free_port(), 1)
        slot = BoardSlot(board, folder)

        async def run() -> None:
            bench = Bench(slot)
            await bench.start()
            try:
                await test(bench)
            finally:
                await bench.stop()
        asyncio.run(run())
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_panic_fires_after_its_console_text_even_split_across_reads():
    async def test(bench: Bench) -> None:
        bench.slot.arm(Fault("panic", on_console=STARTED, after_s=0.3))
        # armed on a text, it is nothing the board's next power-on plays
        assert bench.slot._boot_faults() == []
        await bench.prints(b"root@rtlab:~ sh /tmp/rtlab-window.sh start\r\n",
                           STARTED[:7].encode(), STARTED[7:].encode() + b"\r\n")
        assert await bench.typed_at_board(0.1) == b"", "fired before its delay"
        assert await bench.typed_at_board(2.0) == SYSRQ_CRASH
        [fault] = bench.slot.faults.as_list()
        assert fault["fired"] == 1
        # fired as often as armed: the next window opens without a panic
        await bench.prints(STARTED.encode() + b"\r\n")
        assert await bench.typed_at_board(0.6) == b""
    on_bench(test)


def test_a_serial_disconnect_on_a_console_text_drops_the_client():
    async def test(bench: Bench) -> None:
        bench.slot.arm(Fault("serial-disconnect", seconds=5, on_console=STARTED,
                             after_s=0.2))
        # armed on a text: neither now nor at power-on
        assert bench.slot._boot_faults() == []
        assert not bench.slot.serial.unplugged()
        await bench.prints(STARTED.encode() + b"\r\n")
        assert await bench.client_in.read(100) == STARTED.encode() + b"\r\n"
        assert await asyncio.wait_for(bench.client_in.read(100), 2.0) == b"", \
            "the client is cut off"
        assert bench.slot.serial.unplugged()
    on_bench(test)


def test_a_power_off_before_the_delay_cancels_it_and_it_fires_next_time():
    async def test(bench: Bench) -> None:
        bench.slot.arm(Fault("panic", on_console=STARTED, after_s=0.3))
        await bench.prints(STARTED.encode())
        bench.slot.powered = True
        await bench.slot.set_power(False)
        assert await bench.typed_at_board(0.6) == b""
        assert bench.slot.faults.as_list()[0]["fired"] == 0
        await bench.prints(STARTED.encode())
        assert await bench.typed_at_board(2.0) == SYSRQ_CRASH
    on_bench(test)


def test_faults_timed_from_power_on_are_as_before():
    async def test(bench: Bench) -> None:
        bench.slot.arm(Fault("panic", after_s=40))
        bench.slot.arm(Fault("boot-panic"))
        bench.slot.arm(Fault("window-rt-task", after_s=3))
        assert bench.slot._boot_faults() == [BOOT_PANIC_PARAM, "rtlab.window_fault=rt-task:3",
                                             "rtlab.panic_after=40"]
        # each fired once
        assert bench.slot._boot_faults() == []
        # a console text never fires a fault armed from power-on
        bench.slot.arm(Fault("panic", after_s=0))
        await bench.prints(STARTED.encode())
        assert await bench.typed_at_board(0.3) == b""
    on_bench(test)


def test_boot_panic_makes_the_kernel_find_no_init():
    # without a root= the kernel, finding no early userspace, panics with "VFS: Unable to
    # mount root fs": the images' command line must give none
    assert BOOT_PANIC_PARAM.startswith("rdinit=/")
    images = Path(__file__).resolve().parents[2] / "rtlab" / "image" / "build.py"
    assert 'append = f"console={model.console} quiet"' in images.read_text()


def test_console_watch_finds_each_occurrence_once():
    watch = ConsoleWatch()
    assert watch.seen(b"..rtlab-evid", [STARTED]) == []
    assert watch.seen(b"ence:started\r\n", [STARTED]) == [STARTED]
    assert watch.seen(b"\r\nroot@rtlab:~ ", [STARTED]) == []
    assert watch.seen(STARTED.encode() * 2, [STARTED, "root@"]) == [STARTED]
    assert watch.seen(b"x", ["x", "yx"]) == ["x"]


@pytest.mark.parametrize(("kind", "params", "message"), [
    ("pdu-error", {"on_console": "login:"}, "ON_CONSOLE applies only to panic and "
                                            "serial-disconnect"),
    ("panic", {"on_console": ""}, "ON_CONSOLE must be 1-200 printable characters"),
    ("panic", {"on_console": "a\nb"}, "ON_CONSOLE must be"),
    ("panic", {"on_console": "x" * 201}, "ON_CONSOLE must be"),
    ("panic", {"on_console": 3}, "on_console must be a text"),
])
def test_bad_console_triggers_are_refused(kind, params, message):
    with pytest.raises(FaultError, match=message):
        Fault.from_request(kind, params)


def test_a_panic_needs_a_time_or_a_text():
    assert Fault.from_request("panic", {"on_console": STARTED}).delay_s == 0.0
    assert Fault.from_request("panic", {"after_s": 5}).on_console is None
    with pytest.raises(FaultError, match="panic needs AFTER"):
        Fault.from_request("panic", {})


def test_trace_lockdown_boots_the_kernel_locked_down_until_cleared():
    async def test(bench: Bench) -> None:
        bench.slot.arm(Fault("trace-lockdown", times=0))
        assert bench.slot._boot_faults() == ["lockdown=confidentiality"]
        assert bench.slot._boot_faults() == ["lockdown=confidentiality"]
        bench.slot.faults.clear("trace-lockdown")
        assert bench.slot._boot_faults() == []
    on_bench(test)
