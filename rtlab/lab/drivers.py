"""labgrid drivers for the virtual rack's SD mux and card.

They offer the methods of labgrid's ``USBSDMuxDriver`` (``set_mode``/``get_mode``) and
``USBStorageDriver`` (``write_image``), so the one strategy drives either rack.
"""

import os

import attr
import requests
from labgrid.driver.common import Driver
from labgrid.driver.exception import ExecutionError
from labgrid.driver.usbstoragedriver import Mode
from labgrid.factory import target_factory
from labgrid.step import step
from labgrid.util.helper import processwrapper

from rtlab.lab.resources import VirtualMassStorage, VirtualSDMuxDevice

MUX_MODES = ("dut", "host", "off")
HTTP_TIMEOUT_S = 10.0


@target_factory.reg_driver
@attr.s(eq=False)
class VirtualSDMuxDriver(Driver):
    """Switches a virtual SD mux between the board (``dut``), the host and ``off``."""

    bindings = {"mux": VirtualSDMuxDevice}

    @Driver.check_active
    @step(title="sdmux_set", args=["mode"])
    def set_mode(self, mode: str) -> None:
        mode = mode.lower()
        if mode not in MUX_MODES:
            raise ExecutionError(
                f"Setting mode '{mode}' not supported by VirtualSDMuxDriver "
                f"(valid: {', '.join(MUX_MODES)})"
            )
        try:
            reply = requests.put(self.mux.url, data=mode, timeout=HTTP_TIMEOUT_S)
        except requests.RequestException as error:
            raise ExecutionError(f"SD mux {self.mux.url}: {error}") from error
        if reply.status_code != 200:
            raise ExecutionError(
                f"SD mux {self.mux.url}: HTTP {reply.status_code} setting '{mode}': "
                f"{reply.text.strip()}"
            )

    @Driver.check_active
    def get_mode(self) -> str:
        try:
            reply = requests.get(self.mux.url, timeout=HTTP_TIMEOUT_S)
        except requests.RequestException as error:
            raise ExecutionError(f"SD mux {self.mux.url}: {error}") from error
        if reply.status_code != 200:
            raise ExecutionError(f"SD mux {self.mux.url}: HTTP {reply.status_code}")
        return reply.text.strip()


@target_factory.reg_driver
@attr.s(eq=False)
class VirtualStorageDriver(Driver):
    """Writes an image to the virtual SD card while it is visible to the host."""

    bindings = {"storage": VirtualMassStorage}

    @Driver.check_active
    @step(title="write_image", args=["filename"])
    def write_image(
        self,
        filename: str | None = None,
        mode: Mode = Mode.BMAPTOOL,
        partition: int | None = None,
        skip: int = 0,
        seek: int = 0,
    ) -> None:
        if filename is None:
            raise ExecutionError("write_image needs an image file name")
        if partition is not None or skip or seek:
            raise ExecutionError("VirtualStorageDriver writes whole cards only")
        if not os.path.isfile(filename):
            raise ExecutionError(f"image {filename} does not exist")
        if not os.path.exists(self.storage.path):
            raise ExecutionError(
                f"SD card {self.storage.path} is not visible on the host "
                "(is the SD mux in 'host' mode?)"
            )
        if mode == Mode.BMAPTOOL:
            bmap = f"{filename}.bmap"
            if not os.path.isfile(bmap):
                raise ExecutionError(f"bmap file {bmap} does not exist")
            # bmaptool checks every mapped range against the bmap's checksums while copying
            # and fails on a mismatch, so a corrupted image never reaches the board silently.
            cmd = ["bmaptool", "copy", "--bmap", bmap, filename, self.storage.path]
        elif mode == Mode.DD:
            cmd = ["dd", f"if={filename}", f"of={self.storage.path}", "bs=4M",
                   "conv=fsync,notrunc", "status=none"]
        else:
            raise ExecutionError(f"write mode {mode} not supported by VirtualStorageDriver")
        processwrapper.check_output(cmd, print_on_silent_log=True)
