"""The one strategy for physical and virtual racks: off → flashed → shell.

Physical places bind labgrid's ``USBSDMuxDriver`` (or ``USBSDWireDriver``) and
``USBStorageDriver``; the virtual rack binds its stand-ins with the same methods. An
SDWire has no "off" (its card is with the board or with the host): where the strategy
would switch a mux off, an SDWire's card goes to the side that serves the purpose. Power
is any labgrid ``PowerProtocol``; both racks name rtlab's ``NetworkPDUDriver``
(:mod:`rtlab.lab.pdu`), whose requests to the PDU are bounded in time. A board switched
off and on again stays off for at least the power driver's ``delay``. Console and shell
are labgrid's own drivers on both.

Every way the lab can fail on the way to a shell ends in an ``InfrastructureError`` whose
message is the one-line cause. Flashing and booting are retried a bounded number of times
(each boot attempt a fresh power cycle); every attempt is kept in ``attempts`` for the
log and the result record.
"""

import enum
import logging
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attr
import pexpect
import requests
import serial
from labgrid.driver import NetworkPowerDriver, USBSDWire3Driver, USBSDWireDriver
from labgrid.driver.usbstoragedriver import Mode
from labgrid.factory import target_factory
from labgrid.step import step
from labgrid.strategy.common import Strategy, StrategyError, never_retry
from labgrid.util.helper import processwrapper

from rtlab.lab.console import PANIC_UNTIL_EOL, ConsoleTap, describe, panic_line
from rtlab.lab.flashverify import verify_card
from rtlab.lab.pdu import NetworkPDUDriver
from rtlab.util.errors import (
    BoardCrashed,
    BootError,
    ConsoleLost,
    FlashError,
    InfrastructureError,
    PowerError,
)

logger = logging.getLogger("rtlab.strategy")
PDU_RETRY_DELAY_S = 1.0
# a console adapter that dropped (a USB re-enumeration, a ser2net restart) is back within
# seconds: an immediate retry would only find it gone again
BOOT_RETRY_DELAY_S = 5.0
# a switched-off board's console is quiet: what is still to read came before the switch-off
DRAIN_QUIET_S = 0.3
DRAIN_LIMIT_S = 5.0
ANYTHING = re.compile(rb"[\s\S]+")
# names the SD card image when the environment file has no `images:` entry for it
IMAGE_VARIABLE = "LG_IMAGE"
# labgrid's SDWire drivers switch the card between the board ("dut") and the host only:
# their set_mode raises on "off"
MUX_WITHOUT_OFF = (USBSDWireDriver, USBSDWire3Driver)


class Status(enum.Enum):
    unknown = 0
    off = 1
    flashed = 2
    shell = 3


@contextmanager
def timed(what: str) -> Iterator[None]:
    """Log how long a step of the transition took: slow flashing or booting is the first
    sign of a failing SD mux or board, long before it fails outright."""
    start = time.monotonic()
    logger.info("%s ...", what)
    try:
        yield
    except BaseException:
        logger.error("%s failed after %.1f s", what, time.monotonic() - start)
        raise
    logger.info("%s done in %.1f s", what, time.monotonic() - start)


def one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def tool_error(error: BaseException) -> str:
    """A failed command as one line: its exit status and the last line it printed (which
    is where bmaptool and dd say what went wrong), not the whole argv."""
    if isinstance(error, subprocess.CalledProcessError):
        output = error.output or b""
        text = output.decode(errors="replace") if isinstance(output, bytes) else str(output)
        tool = Path(str(error.cmd[0])).name if error.cmd else "command"
        return f"{tool} exited {error.returncode}: {one_line(Exception(text))}"
    return one_line(error)


def caused_by(error: BaseException, kinds: tuple[type[BaseException], ...]) -> bool:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, kinds):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


@target_factory.reg_driver
@attr.s(eq=False)
class RTLabStrategy(Strategy):
    """Flash the SD card through the mux, power the board on and log in on the console.

    Args:
        image: key of the SD card image in the environment file's ``images:``; where the
            file has none, the ``LG_IMAGE`` variable names it (read only when flashing, so
            that a console or power session needs no image); a ``<image>.bmap`` file must
            sit beside it
        flash_attempts: writes (each followed by a read-back) before flashing fails
        boot_attempts: power cycles before booting fails
        pdu_attempts: requests to switch power before switching fails
        pdu_timeout: seconds a PDU may take to answer a request; where given, it sets
            the ``NetworkPDUDriver``'s ``timeout`` (30 s unless the driver says otherwise)
        silence_timeout: seconds after power-on within which the board must print
            something; a board that stays silent longer ends its boot attempt at once
            (a panic does as soon as it is printed), not after the login timeout
    """

    bindings = {
        "power": "PowerProtocol",
        "console": "ConsoleProtocol",
        "shell": "ShellDriver",
        "sdmux": {"USBSDMuxDriver", "USBSDWireDriver", "VirtualSDMuxDriver"},
        "storage": {"USBStorageDriver", "VirtualStorageDriver"},
    }

    image: str = attr.ib(default="sdcard", validator=attr.validators.instance_of(str))
    flash_attempts: int = attr.ib(default=3, validator=attr.validators.instance_of(int))
    boot_attempts: int = attr.ib(default=3, validator=attr.validators.instance_of(int))
    pdu_timeout: float | None = attr.ib(default=None,
                                        converter=attr.converters.optional(float))
    pdu_attempts: int = attr.ib(default=3, validator=attr.validators.instance_of(int))
    silence_timeout: float = attr.ib(default=30.0, converter=float)
    status: Status = attr.ib(default=Status.unknown)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if min(self.flash_attempts, self.boot_attempts, self.pdu_attempts) < 1:
            raise ValueError("RTLabStrategy: flash_attempts, boot_attempts and pdu_attempts "
                             "must be >= 1")
        self.attempts: list[dict[str, Any]] = []
        self.boots = 0
        self.failure: InfrastructureError | None = None
        self.card_complete = False
        self._tap: ConsoleTap | None = None
        self._case_mark = 0
        if isinstance(self.power, NetworkPDUDriver):
            if self.pdu_timeout is not None:
                self.power.timeout = self.pdu_timeout
        elif isinstance(self.power, NetworkPowerDriver):
            logger.warning("power through labgrid's NetworkPowerDriver: a PDU that does not "
                           "answer stalls the lab; name NetworkPDUDriver in the environment "
                           "file to bound its requests")

    def image_path(self) -> str:
        try:
            return self.target.env.config.get_image_path(self.image)
        except KeyError:
            pass
        # an `images:` entry with a "$LG_IMAGE" template would make labgrid refuse to load
        # the environment at all while LG_IMAGE is unset, even for a console
        path = os.environ.get(IMAGE_VARIABLE)
        if not path:
            raise StrategyError(
                f"no SD card image to flash: the environment has no image '{self.image}' "
                f"under 'images:' and {IMAGE_VARIABLE} is not set (export "
                f"{IMAGE_VARIABLE}=<path>/sdcard.img, with its .bmap beside it)")
        return path

    @never_retry
    @step(args=["status"])
    def transition(self, status: Status | str, *, step) -> None:  # noqa: ANN001
        if not isinstance(status, Status):
            status = Status[status]
        if status == Status.unknown:
            raise StrategyError(f"can not transition to {status}")
        if status == self.status:
            step.skip("nothing to do")
            return
        if status == Status.off:
            self._power_off()
        elif status == Status.flashed:
            self.transition(Status.off)
            self._flash()
        elif status == Status.shell:
            if self.status != Status.flashed:
                self.transition(Status.flashed)
            self._boot()
        else:
            raise StrategyError(f"no transition found from {self.status} to {status}")
        self.status = status

    # --- for the test suite -----------------------------------------------------------
    def ensure_shell(self) -> Any:  # noqa: ANN401 - labgrid's ShellDriver is untyped
        """The board at a working shell: booted on first use, booted again (without a
        new flash) if an earlier test left it crashed or its console lost. After the
        board failed to come up once, every later call fails at once with that cause."""
        if self.failure is not None:
            raise type(self.failure)(f"{self.failure} (earlier in this session)")
        try:
            if self.status == Status.shell and not self._answers():
                logger.warning("board does not answer on its console: booting it again")
                self.target.deactivate(self.console)
                self.status = Status.flashed
            self.transition(Status.shell)
        except Exception as error:
            cause: BaseException = error
            # never_retry wraps the cause in one StrategyError per nested transition
            while isinstance(cause, StrategyError) and cause.__cause__ is not None:
                cause = cause.__cause__
            self.failure = (cause if isinstance(cause, InfrastructureError)
                            else BootError(f"board did not reach a shell: {one_line(cause)}"))
            raise self.failure from error
        self._case_mark = self.tap().mark()
        return self.shell

    def classify(self, error: BaseException) -> InfrastructureError:
        """What went wrong with the board while a test used it, as one line."""
        if isinstance(error, InfrastructureError):
            return error
        data = self.tap().since(self._case_mark) if self._tap is not None else b""
        panic = panic_line(data)
        if panic:
            return BoardCrashed(f"kernel panic during the test: {panic}")
        if caused_by(error, (serial.SerialException, ConnectionError, EOFError)):
            return ConsoleLost(f"serial lost during the test: {one_line(error)}")
        return BoardCrashed(f"board stopped answering during the test: {one_line(error)} "
                            f"({describe(data[-4096:])})")

    def cleanup(self) -> list[str]:
        """Leave the place in a defined state whatever happened: power off (and off again
        if a power-on rtlab gave up on is carried out after that), and the SD mux with the
        board if the card holds a complete image, else off (an SDWire, which has no off:
        the card with the host, where the board can not boot a half-written card).
        Returns what could not be done (each a one-line cause), after trying
        everything."""
        problems = []
        try:
            self.target.deactivate(self.shell)
        except Exception as error:  # noqa: BLE001 - cleanup goes on
            problems.append(f"shell: {one_line(error)}")
        try:
            self._power_off()
            self.status = Status.off
        except Exception as error:  # noqa: BLE001
            problems.append(one_line(error))
        problems += self._keep_off()
        mode = "dut" if self.card_complete else self._mux_mode_off("host")
        try:
            self.target.activate(self.sdmux)
            self.sdmux.set_mode(mode)
        except Exception as error:  # noqa: BLE001
            problems.append(f"SD mux to {mode}: {one_line(error)}")
        if self._tap is not None:
            self._tap.close()
            self._tap = None
        return problems

    def tap(self) -> ConsoleTap:
        if self._tap is None:
            self._tap = ConsoleTap(self.console)
        return self._tap

    # --- steps ------------------------------------------------------------------------
    def _answers(self) -> bool:
        try:
            return self.shell.run("true", timeout=15)[2] == 0
        except Exception as error:  # noqa: BLE001 - any failure means "not answering"
            logger.warning("console check failed: %s", one_line(error))
            return False

    def _mux_mode_off(self, instead: str) -> str:
        """The mode that switches the SD mux off, or for a mux without one (an SDWire)
        ``instead``: the side of the two that serves what the off was for."""
        return instead if isinstance(self.sdmux, MUX_WITHOUT_OFF) else "off"

    def _off_delay(self) -> float:
        """Seconds a board switched off stays off before it is switched on again: the
        power driver's ``delay`` (labgrid's power drivers and NetworkPDUDriver keep it
        there, and wait it only in their ``cycle``, which the strategy does not call); 0
        for a driver that has none."""
        delay = getattr(self.power, "delay", None)
        return max(0.0, float(delay)) if delay is not None else 0.0

    def _outlet(self) -> str:
        port = getattr(self.power, "port", None)
        index = getattr(port, "index", None)
        return f"outlet {index}" if index is not None else type(self.power).__name__

    def _pdu(self, what: str, action: Callable[[], None]) -> None:
        """Switch power; a PDU that errs is asked again (PDUs on a busy lab network drop
        requests), each request bounded in time."""
        cause = ""
        for number in range(1, self.pdu_attempts + 1):
            started = time.monotonic()
            try:
                self._pdu_once(what, action)
            except PowerError as error:
                cause = str(error)
                self._attempt(f"power {what}", number, self.pdu_attempts, started, cause)
                if number < self.pdu_attempts:
                    time.sleep(PDU_RETRY_DELAY_S)
                continue
            if number > 1:
                self._attempt(f"power {what}", number, self.pdu_attempts, started, None)
            return
        raise PowerError(cause)

    def _pdu_once(self, what: str, action: Callable[[], None]) -> None:
        """One power request: NetworkPDUDriver bounds it in time (a PowerError when the
        PDU does not answer); any error is a PowerError naming the outlet."""
        self.target.activate(self.power)
        try:
            action()
        except PowerError:
            raise
        except requests.HTTPError as error:
            code = error.response.status_code if error.response is not None else "error"
            raise PowerError(f"PDU: HTTP {code} on {self._outlet()} (power {what})") from error
        except requests.RequestException as error:
            raise PowerError(f"PDU: unreachable for power {what} on {self._outlet()}: "
                             f"{one_line(error)}") from error
        except Exception as error:
            raise PowerError(f"PDU: power {what} on {self._outlet()} failed: "
                             f"{one_line(error)}") from error

    def _keep_off(self) -> list[str]:
        """After cleanup's power-off: a power-on that the PDU carries out after rtlab gave
        up on it would switch the board on after rtlab has let go of the place. Where such
        a request (waited for up to the PDU's timeout) ended after the last switch-off was
        sent, switch off again and read the outlet back. Returns what could not be made
        sure of."""
        if not isinstance(self.power, NetworkPDUDriver):
            return []
        try:
            if not self.power.late_on():
                return []
        except PowerError as error:
            return [str(error)]
        logger.warning("PDU: an abandoned request to power on on %s ended after the last "
                       "switch-off: switching off again", self._outlet())
        try:
            self._pdu("off", self.power.off)
        except PowerError as error:
            return [f"{error} (switching off again after a late power on)"]
        return self.power.confirm_off()

    def _power_off(self) -> None:
        with timed("power off"):
            self.target.deactivate(self.shell)
            self._pdu("off", self.power.off)

    def _attempt(self, what: str, number: int, of: int, started: float,
                 cause: str | None) -> None:
        entry = {"step": what, "attempt": number, "of": of, "ok": cause is None,
                 "seconds": round(time.monotonic() - started, 1), "cause": cause}
        self.attempts.append(entry)
        if cause is not None:
            retry = "retrying" if number < of else "giving up"
            logger.warning("%s attempt %d/%d failed: %s; %s", what, number, of, cause, retry)
        elif number > 1:
            logger.warning("%s succeeded on attempt %d/%d", what, number, of)

    def _flash(self) -> None:
        image = self.image_path()
        cause = ""
        for number in range(1, self.flash_attempts + 1):
            started = time.monotonic()
            try:
                self._flash_once(image, replug=number > 1)
            except InfrastructureError as error:
                cause = str(error)
                self._attempt("flash", number, self.flash_attempts, started, cause)
                continue
            self._attempt("flash", number, self.flash_attempts, started, None)
            return
        raise FlashError(f"{cause} (flash attempt {self.flash_attempts} of "
                         f"{self.flash_attempts})")

    def _flash_once(self, image: str, replug: bool) -> None:
        self.card_complete = False
        self.target.activate(self.sdmux)
        try:
            if replug:
                # a retry starts from a fresh enumeration of the card on the host, as
                # unplugging a USB card reader would; an SDWire takes its card away from
                # the host by handing it to the board, which is off while flashing
                self.target.deactivate(self.storage)
                self.sdmux.set_mode(self._mux_mode_off("dut"))
            with timed("SD mux to host"):
                self.sdmux.set_mode("host")
        except Exception as error:
            raise FlashError(f"SD mux: cannot switch to host: {one_line(error)}") from error
        with timed(f"write {image}"):
            try:
                # activation waits until the card shows up on the host behind the mux
                self.target.activate(self.storage)
                self.storage.write_image(image, mode=Mode.BMAPTOOL)
            except Exception as error:
                raise FlashError(f"SD card write failed: {tool_error(error)}") from error
        with timed("read back and verify"):
            verify_card(self._run_at_card, self._card_device(), Path(f"{image}.bmap"))
        self.target.deactivate(self.storage)
        try:
            with timed("SD mux to board"):
                self.sdmux.set_mode("dut")
        except Exception as error:
            raise FlashError(f"SD mux: cannot switch to the board: {one_line(error)}") from error
        self.card_complete = True

    def _card_device(self) -> str:
        # the device that write_image wrote: labgrid's USBStorageDriver writes a whole card
        # (no partition) to its storage resource's `path` (USBMassStorage, USBSDMuxDevice,
        # USBSDWireDevice and their Network* forms all have one); the virtual one is a path
        return self.storage.storage.path

    def _run_at_card(self, argv: list[str]) -> str:
        """Run where the card is attached: locally, or over SSH on the exporter."""
        output = processwrapper.check_output(self.storage.storage.wrap_command(list(argv)))
        return output.decode(errors="replace")

    def _boot(self) -> None:
        cause = ""
        for number in range(1, self.boot_attempts + 1):
            started = time.monotonic()
            try:
                self._boot_once()
            except InfrastructureError as error:
                cause = str(error)
                self._attempt("boot", number, self.boot_attempts, started, cause)
                # a fresh console connection for the next attempt: a dropped one stays dead
                self.target.deactivate(self.console)
                if number < self.boot_attempts:
                    time.sleep(BOOT_RETRY_DELAY_S)
                continue
            self._attempt("boot", number, self.boot_attempts, started, None)
            return
        raise BootError(f"{cause} (boot attempt {self.boot_attempts} of {self.boot_attempts})")

    def _drain_console(self, off_until: float) -> None:
        """Read away what the board printed before it was switched off (the end of a
        panic, a prompt) so that the watch of the next boot judges only that boot. It
        reads on until ``off_until`` (a ``time.monotonic()``) at least: the board is kept
        off meanwhile, and what still arrives then is from before the switch-off too."""
        deadline = max(time.monotonic() + DRAIN_LIMIT_S, off_until)
        while (now := time.monotonic()) < deadline:
            index, _, _, _ = self.console.expect(
                [ANYTHING, pexpect.TIMEOUT], timeout=max(DRAIN_QUIET_S, off_until - now))
            if index == 1 and time.monotonic() >= off_until:
                return

    def _watch_boot(self, mark: int) -> None:
        """Follow the console from power-on to the login prompt, and end the attempt as
        soon as the kernel panics or once the board has printed nothing for
        ``silence_timeout`` s: each of those would otherwise hold the board for the whole
        login timeout (minutes on a physical rack, per attempt). No prompt within the
        login timeout ends it too. What the watch reads includes the prompt; the
        ShellDriver gets a fresh one by sending a newline after its
        ``await_login_timeout`` of quiet, and logs in."""
        login_timeout = float(self.shell.login_timeout)
        started = time.monotonic()
        patterns = [self.shell.login_prompt, PANIC_UNTIL_EOL, pexpect.TIMEOUT]
        while (elapsed := time.monotonic() - started) < login_timeout:
            index, _, _, after = self.console.expect(
                patterns, timeout=min(1.0, login_timeout - elapsed))
            if index == 0:
                return
            data = self.tap().since(mark)
            if index == 1:
                raise BootError(f"kernel panic during boot: {panic_line(after)}")
            if not data.strip() and time.monotonic() - started >= self.silence_timeout:
                raise BootError(f"board silent after power-on: no console output in "
                                f"{self.silence_timeout:g} s")
        data = self.tap().since(mark)
        if not data.strip():
            raise BootError(f"board silent after power-on: no console output in "
                            f"{self.shell.login_timeout} s")
        raise BootError(f"no login prompt after {self.shell.login_timeout} s "
                        f"({describe(data)})")

    def _boot_once(self) -> None:
        self._pdu("off", self.power.off)
        # the board's off time runs from the PDU's confirmation: activating and draining
        # the console count towards the delay its supply needs to discharge
        off_since = time.monotonic()
        delay = self._off_delay()
        try:
            self.target.activate(self.console)
        except Exception as error:
            raise ConsoleLost(f"serial console unavailable: {one_line(error)}") from error
        self._drain_console(off_until=off_since + delay)
        logger.info("%s off for %.1f s before power on (delay %g s)", self._outlet(),
                    time.monotonic() - off_since, delay)
        mark = self.tap().mark()
        with timed("power on"):
            self._pdu("on", self.power.on)
        self.boots += 1
        try:
            with timed("boot to shell"):
                self._watch_boot(mark)
                # ShellDriver waits for the login prompt (login_timeout) and logs in
                self.target.activate(self.shell)
        except InfrastructureError:
            raise
        except Exception as error:
            data = self.tap().since(mark)
            timeout = getattr(self.shell, "login_timeout", None)
            panic = panic_line(data)
            if panic:
                raise BootError(f"kernel panic during boot: {panic}") from error
            if caused_by(error, (serial.SerialException, ConnectionError, EOFError)):
                raise ConsoleLost(f"serial lost during boot: {one_line(error)}") from error
            if not data.strip():
                raise BootError(f"board silent after power-on: no console output in "
                                f"{timeout} s") from error
            raise BootError(f"no login prompt after {timeout} s ({describe(data)})") from error
