"""The one strategy for physical and virtual racks: off → flashed → shell.

Physical places bind labgrid's ``USBSDMuxDriver`` (or ``USBSDWireDriver``) and
``USBStorageDriver``; the virtual rack binds its stand-ins with the same methods. Power,
console and shell are labgrid's own drivers on both.
"""

import enum
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

import attr
from labgrid.driver.usbstoragedriver import Mode
from labgrid.factory import target_factory
from labgrid.step import step
from labgrid.strategy.common import Strategy, StrategyError, never_retry

logger = logging.getLogger("rtlab.strategy")


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


@target_factory.reg_driver
@attr.s(eq=False)
class RTLabStrategy(Strategy):
    """Flash the SD card through the mux, power the board on and log in on the console.

    Args:
        image: key of the SD card image in the environment file's ``images:``; a
            ``<image>.bmap`` file must sit beside it
    """

    bindings = {
        "power": "PowerProtocol",
        "console": "ConsoleProtocol",
        "shell": "ShellDriver",
        "sdmux": {"USBSDMuxDriver", "USBSDWireDriver", "VirtualSDMuxDriver"},
        "storage": {"USBStorageDriver", "VirtualStorageDriver"},
    }

    image: str = attr.ib(default="sdcard", validator=attr.validators.instance_of(str))
    status: Status = attr.ib(default=Status.unknown)

    def image_path(self) -> str:
        try:
            return self.target.env.config.get_image_path(self.image)
        except KeyError as error:
            raise StrategyError(
                f"environment has no image '{self.image}' under 'images:'"
            ) from error

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

    def _power_off(self) -> None:
        with timed("power off"):
            self.target.deactivate(self.shell)
            self.target.activate(self.power)
            self.power.off()

    def _flash(self) -> None:
        image = self.image_path()
        self.target.activate(self.sdmux)
        with timed("SD mux to host"):
            self.sdmux.set_mode("host")
        with timed(f"write {image}"):
            # activation waits until the card shows up on the host behind the mux
            self.target.activate(self.storage)
            self.storage.write_image(image, mode=Mode.BMAPTOOL)
            self.target.deactivate(self.storage)
        with timed("SD mux to board"):
            self.sdmux.set_mode("dut")

    def _boot(self) -> None:
        self.target.activate(self.console)
        with timed("power on"):
            self.target.activate(self.power)
            self.power.on()
        with timed("boot to shell"):
            # ShellDriver waits for the login prompt (login_timeout) and logs in
            self.target.activate(self.shell)
