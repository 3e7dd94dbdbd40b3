"""One emulated board slot: its power outlet, SD mux and SD card, and the QEMU process
that is 'the board' while the outlet is on."""

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from rtlab.platform.boards import board_model
from rtlab.util import paths
from rtlab.vlab.bootrom import first_stage
from rtlab.vlab.config import VirtualBoard
from rtlab.vlab.faults import (
    WINDOW_FAULTS,
    CloseWriteWatch,
    ConsoleWatch,
    Fault,
    FaultPlan,
    corrupt,
    window_fault_param,
)
from rtlab.vlab.qemu import BootConfigError, nic_device, qemu_command
from rtlab.vlab.qmp import QmpError, qmp_execute
from rtlab.vlab.serial import SerialLine
from rtlab.vlab.uboot import UBootConsole

# QEMU SD cards must have a power-of-two size; a blank card of this size is what the slot
# holds before anything was ever written.
BLANK_CARD_BYTES = 256 * 1024 * 1024
MUX_MODES = ("dut", "host", "off")
# a board that dies this soon after power-on failed to start rather than rebooted
START_FAILURE_S = 2.0
REBOOT_DELAY_S = 1.0
# from power-on to "Starting kernel": U-Boot loads 40 MB from the card in about 10 s under
# emulation; a loaded host takes longer
UBOOT_DEADLINE_S = 120.0
# what the host sees instead of the card while an sd-write-error fault is armed: every
# write fails with ENOSPC, as on a card or mux that stopped taking data
FAILING_CARD = Path("/dev/full")
# boot-panic: an early userspace that does not exist makes the kernel look for a root file
# system, and without a root= it finds none: "VFS: Unable to mount root fs", as on a
# board whose initramfs or root device is missing
BOOT_PANIC_PARAM = "rdinit=/rtlab-boot-panic"
# a panic on a console text is typed at the board's shell: the kernel's own sysrq crash,
# which /init's timed panic (rtlab.panic_after) uses too
SYSRQ_CRASH = b"echo c > /proc/sysrq-trigger\n"


def host_view_path(state_dir: Path, place: str) -> Path:
    """Where a slot's SD card appears on the host while its mux is in host mode."""
    return state_dir / "host" / f"{place}.img"


class RackError(Exception):
    """A request the emulated hardware refuses; the message says why."""


class BoardSlot:
    def __init__(self, board: VirtualBoard, state_dir: Path) -> None:
        self.board = board
        self.model = board_model(board.model)
        self.logger = logging.getLogger(f"vlab.board.{board.place}")
        self.card = state_dir / "cards" / f"{board.place}.img"
        self.host_view = host_view_path(state_dir, board.place)
        self.boot_dir = state_dir / "boot" / board.place
        self.log_dir = state_dir / "logs" / board.place
        for folder in (self.card.parent, self.host_view.parent, self.boot_dir, self.log_dir):
            folder.mkdir(parents=True, exist_ok=True)
        self.serial = SerialLine(
            board.place,
            board.serial_port,
            state_dir / "sock" / f"{board.place}.sock",
            self.log_dir / "console.log",
        )
        self.serial.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.qmp_socket = state_dir / "sock" / f"{board.place}.qmp"
        self.powered = False
        self.mux_mode = "off"
        self.boots = 0
        self.faults = FaultPlan()
        self._qemu: asyncio.subprocess.Process | None = None
        self._runner: asyncio.Task[None] | None = None
        self._corrupt_watch: CloseWriteWatch | None = None
        self._fault_tasks: set[asyncio.Task[None]] = set()
        self._console_watch = ConsoleWatch()
        # kinds whose console text was seen and that wait for their delay
        self._console_pending: set[str] = set()
        self._uboot: UBootConsole | None = None
        self.serial.on_output = self._console_output
        self._set_host_view(False)

    # --- SD mux -------------------------------------------------------------------------
    def set_mux(self, mode: str) -> None:
        if mode not in MUX_MODES:
            raise RackError(f"unknown SD mux mode '{mode}' (valid: {', '.join(MUX_MODES)})")
        if mode == "host" and not self.card.exists():
            with self.card.open("wb") as card:
                card.truncate(BLANK_CARD_BYTES)
        entering_host = mode == "host" and self.mux_mode != "host"
        self.mux_mode = mode
        self._stop_corrupting()
        target = self.card
        if entering_host:
            if self.faults.take("sd-write-error"):
                self.logger.warning("fault: sd-write-error, the card takes no writes")
                target = FAILING_CARD
            if self.faults.take("sd-corrupt"):
                self.logger.warning("fault: sd-corrupt, written data will be damaged")
                self._start_corrupting()
        if mode == "host":
            self._set_host_view(True, target)
        else:
            self._set_host_view(False)
        self.logger.info("SD mux -> %s", mode)

    def _set_host_view(self, visible: bool, target: Path | None = None) -> None:
        # like a USB mass-storage device, the card exists for the host only in host mode
        if visible:
            target = target or self.card
            if self.host_view.is_symlink() and self.host_view.readlink() == target:
                return
            self.host_view.unlink(missing_ok=True)
            self.host_view.symlink_to(target)
        else:
            self.host_view.unlink(missing_ok=True)

    def _start_corrupting(self) -> None:
        watch = CloseWriteWatch(self.card)
        self._corrupt_watch = watch

        def on_event() -> None:
            if watch.closed_after_write():
                corrupt(self.card)
                # our own write closed the card too: that event is not a writer's
                watch.closed_after_write()
                self.logger.warning("fault: sd-corrupt, damaged the card after a write")
        asyncio.get_running_loop().add_reader(watch.fd, on_event)

    def _stop_corrupting(self) -> None:
        watch, self._corrupt_watch = self._corrupt_watch, None
        if watch is not None:
            asyncio.get_running_loop().remove_reader(watch.fd)
            watch.close()

    # --- faults -------------------------------------------------------------------------
    def arm(self, fault: Fault) -> None:
        self.faults.arm(fault)
        self.logger.warning("fault armed: %s", fault.as_dict())
        if (fault.kind == "serial-disconnect" and fault.after_s is None
                and fault.on_console is None):
            self.faults.take(fault.kind)
            self.serial.disconnect(fault.seconds or 0.0)

    def _later(self, delay_s: float, call: Callable[[], None]) -> asyncio.Task[None]:
        async def run() -> None:
            await asyncio.sleep(delay_s)
            call()
        task = asyncio.create_task(run())
        self._fault_tasks.add(task)
        task.add_done_callback(self._fault_tasks.discard)
        return task

    def _console_output(self, data: bytes) -> None:
        """Drive U-Boot through this boot, and start the delay of each fault whose console
        text the board just printed; a power-off cancels it, as it does the faults timed
        from power-on."""
        if self._uboot is not None:
            self._uboot.feed(data)
        waiting = self.faults.waiting_for_console()
        seen = self._console_watch.seen(
            data, [fault.on_console for fault in waiting if fault.on_console is not None])
        for fault in waiting:
            if fault.on_console not in seen or fault.kind in self._console_pending:
                continue
            self.logger.warning("fault: %s in %.0f s, the console showed %r", fault.kind,
                                fault.delay_s, fault.on_console)
            self._console_pending.add(fault.kind)
            task = self._later(fault.delay_s,
                               lambda kind=fault.kind: self._fire_on_console(kind))
            task.add_done_callback(
                lambda _task, kind=fault.kind: self._console_pending.discard(kind))

    def _fire_on_console(self, kind: str) -> None:
        # counted when it fires: one that a power-off cancelled waits for its text again
        fault = self.faults.take(kind)
        if fault is None:
            return
        if kind == "serial-disconnect":
            self.serial.disconnect(fault.seconds or 0.0)
        elif kind == "panic":
            # the board has no other way in: its shell is the only thing that can be told
            # to crash now
            if self.serial.type_in(SYSRQ_CRASH):
                self.logger.warning("fault: panic, sysrq crash typed at the board's shell")
            else:
                self.logger.warning("fault: panic, but no board is on the console line")

    def _cancel_fault_tasks(self) -> None:
        for task in list(self._fault_tasks):
            task.cancel()

    # --- power --------------------------------------------------------------------------
    async def set_power(self, on: bool) -> None:
        if on == self.powered:
            return
        if on:
            if self.mux_mode == "host":
                raise RackError(
                    f"{self.board.place}: SD mux is in host mode; switch it to dut first"
                )
            self.powered = True
            self._runner = asyncio.create_task(self._run())
        else:
            self.powered = False
            self._cancel_fault_tasks()
            await self._kill()
            if self._runner is not None:
                self._runner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._runner
                self._runner = None
            self.logger.info("power off")

    async def _kill(self) -> None:
        qemu = self._qemu
        if qemu is not None and qemu.returncode is None:
            # cutting power gives the board no chance to shut down
            qemu.kill()
            await qemu.wait()
        self._qemu = None

    def _bootloader(self, message: str) -> None:
        self.serial.emit(f"rtlab-vboot: {message}\r\n".encode())

    async def _run(self) -> None:
        """Boot from the card, and boot again when the board resets itself, until the
        outlet is switched off."""
        while self.powered:
            if self.faults.take("silent"):
                self.logger.warning("fault: silent, the board takes power and does nothing")
                return
            slow = self.faults.take("slow-boot")
            if slow is not None:
                self.logger.warning("fault: slow-boot, starting in %.0f s", slow.seconds)
                await asyncio.sleep(slow.seconds or 0.0)
            self._bootloader(f"{self.model.name} power on, reading SD card")
            if self.mux_mode != "dut" or not self.card.exists():
                self._bootloader("no SD card")
                return
            try:
                stage = await asyncio.to_thread(first_stage, self.model, self.card,
                                                paths.debs_dir(), self.boot_dir)
            except BootConfigError as error:
                # a real board's boot ROM or firmware stops here and the board stays silent
                self._bootloader(str(error))
                return
            # what U-Boot adds to the card's command line for this boot: the rack's faults
            # and what the emulator needs, never anything on the card
            self._uboot = UBootConsole(
                self.model.uboot, [*self.model.qemu_append, *self._boot_faults()],
                self.serial.type_in, self._bootloader, self._kernel_started)
            watch = self._later(UBOOT_DEADLINE_S, self._uboot.timed_out)
            self.qmp_socket.unlink(missing_ok=True)
            cmd = qemu_command(
                self.model, stage, self.card, self.serial.socket_path, self.board.network_port,
                self.qmp_socket,
            )
            self.boots += 1
            with (self.log_dir / "qemu.log").open("ab") as qemu_log:
                qemu_log.write(f"\n== boot {self.boots}: {' '.join(cmd)}\n".encode())
                qemu_log.flush()
                started = time.monotonic()
                self._qemu = await asyncio.create_subprocess_exec(
                    *cmd, stdin=asyncio.subprocess.DEVNULL, stdout=qemu_log,
                    stderr=asyncio.subprocess.STDOUT,
                )
                self.logger.info("booting: qemu pid %d", self._qemu.pid)
                code = await self._qemu.wait()
            watch.cancel()
            if not self.powered:
                return
            if time.monotonic() - started < START_FAILURE_S:
                self._bootloader(f"board failed to start (qemu exit {code}, see qemu.log)")
                self._qemu = None
                return
            self._bootloader("board reset")
            await asyncio.sleep(REBOOT_DELAY_S)

    def _kernel_started(self) -> None:
        if self.model.has_network and self.model.qemu_nic_at_kernel:
            task = asyncio.create_task(self._plug_nic())
            self._fault_tasks.add(task)
            task.add_done_callback(self._fault_tasks.discard)

    async def _plug_nic(self) -> None:
        """The board's USB NIC, plugged now that U-Boot is done with the bus (see
        BoardModel.qemu_nic_at_kernel); the kernel finds it when its USB host comes up."""
        try:
            await qmp_execute(self.qmp_socket, "device_add", **nic_device(self.model))
        except QmpError as error:
            self.logger.error("could not plug the network adapter: %s", error)
            self._bootloader(f"the network adapter could not be plugged: {error}")
        else:
            self.logger.info("network adapter plugged")

    def _boot_faults(self) -> list[str]:
        """Kernel parameters by which the board's /init plays a fault armed for this
        boot; faults of the lab side are scheduled here too."""
        params = []
        if self.faults.take("boot-hang"):
            self.logger.warning("fault: boot-hang")
            params.append("rtlab.hang")
        if self.faults.take("boot-panic"):
            self.logger.warning("fault: boot-panic")
            params.append(BOOT_PANIC_PARAM)
        if self.faults.take("trace-lockdown"):
            # the kernel's own lockdown, not a stand-in: tracefs refuses to come up
            # ("Tracing disabled due to lockdown"), as on a locked-down physical board
            self.logger.warning("fault: trace-lockdown")
            params.append("lockdown=confidentiality")
        for kind in WINDOW_FAULTS:
            window = self.faults.at_power_on(kind)
            if window is not None:
                self.logger.warning("fault: %s, played by the board in its next window", kind)
                params.append(window_fault_param(kind, window.after_s))
        panic = self.faults.at_power_on("panic")
        if panic is not None:
            self.logger.warning("fault: panic %.0f s after power-on", panic.after_s)
            params.append(f"rtlab.panic_after={int(panic.after_s or 0)}")
        disconnect = self.faults.armed.get("serial-disconnect")
        if (disconnect is not None and disconnect.after_s is not None
                and self.faults.at_power_on("serial-disconnect")):
            seconds = disconnect.seconds or 0.0
            self._later(disconnect.after_s, lambda: self.serial.disconnect(seconds))
        return params

    def status(self) -> dict[str, object]:
        qemu = self._qemu
        return {
            "place": self.board.place,
            "model": self.model.name,
            "power": "on" if self.powered else "off",
            "sdmux": self.mux_mode,
            "qemu_pid": qemu.pid if qemu is not None and qemu.returncode is None else None,
            "boots": self.boots,
            "faults": self.faults.as_list(),
            "serial_port": self.board.serial_port,
            "network_port": self.board.network_port,
            "console_log": os.fspath(self.serial.transcript_path),
        }
