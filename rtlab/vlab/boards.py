"""Board models of the virtual rack, as data.

Everything that differs between the emulated boards lives here so that the image builder
and the QEMU launcher stay board-agnostic.
"""

from __future__ import annotations

import attrs

FLAVOURS = ("std", "rt")


@attrs.frozen(kw_only=True)
class BoardModel:
    name: str
    arch: str
    """Debian architecture of the guest userland and kernel."""
    qemu_binary: str
    qemu_machine: str
    kernel_packages: dict[str, str]
    """Flavour -> Debian kernel *metapackage*; it is resolved to a versioned package at build."""
    kernel_image: str
    """File name of the kernel on the boot partition (what U-Boot's `bootz`/`booti` expects)."""
    dtb: str
    """Relative to the kernel package's /usr/lib/linux-image-<release>/."""
    console: str
    modules: tuple[str, ...]
    """Loaded by /init in this order (their dependencies first)."""
    cpus: int = 4
    memory_mb: int = 1024
    dtb_remove_nodes: tuple[str, ...] = ()
    """Device-tree nodes deleted from the DTB before it goes on the SD card."""
    poweroff_resets: bool = False
    """The emulated machine has no power-off hardware: `poweroff`/`halt` reset instead."""

    @property
    def console_device(self) -> str:
        return self.console.split(",", 1)[0]

    def kernel_package(self, flavour: str) -> str:
        try:
            return self.kernel_packages[flavour]
        except KeyError:
            raise ValueError(
                f"unknown flavour {flavour!r}; valid flavours: {', '.join(FLAVOURS)}"
            ) from None


# ext4 (for the /data partition) asks the crypto API for "crc32c" at mount time; that is a
# soft dependency modinfo does not list, so the generic implementation is named explicitly.
_DATA_FS_MODULES = ("crc32c_generic", "ext4")

BOARD_MODELS: dict[str, BoardModel] = {
    "imx6q": BoardModel(
        name="imx6q",
        arch="armhf",
        qemu_binary="qemu-system-arm",
        qemu_machine="sabrelite",
        kernel_packages={"std": "linux-image-armmp", "rt": "linux-image-rt-armmp"},
        kernel_image="zImage",
        dtb="imx6q-sabrelite.dtb",
        console="ttymxc1,115200",
        # Without gpio-mxc the regulators and the uSDHC controllers stay deferred; imx2_wdt
        # carries the restart handler, so `reboot` reaches QEMU (and -no-reboot ends it).
        modules=("gpio-mxc", "sdhci-esdhc-imx", "imx2_wdt", *_DATA_FS_MODULES),
        # QEMU's sabrelite has no SNVS power-off: a halted kernel would spin a host core
        # forever, while a reset ends QEMU (-no-reboot).
        poweroff_resets=True,
    ),
    "rpi3": BoardModel(
        name="rpi3",
        arch="arm64",
        qemu_binary="qemu-system-aarch64",
        qemu_machine="raspi3b",
        kernel_packages={"std": "linux-image-arm64", "rt": "linux-image-rt-arm64"},
        kernel_image="Image",
        dtb="broadcom/bcm2837-rpi-3-b.dtb",
        console="ttyAMA0,115200",
        # bcm2835_wdt provides restart and power-off. "bcm2835" is the sdhost driver: its
        # pinctrl state moves QEMU's SD card from the Arasan SDHCI (left unused, as on the
        # real board where it serves Wi-Fi) to sdhost.
        modules=("bcm2835_wdt", "bcm2835", *_DATA_FS_MODULES),
        # The PL011 is wired to Bluetooth in the Pi 3B tree; without this the console gets
        # no input.
        dtb_remove_nodes=("/soc/serial@7e201000/bluetooth",),
    ),
}


def board_model(name: str) -> BoardModel:
    try:
        return BOARD_MODELS[name]
    except KeyError:
        raise ValueError(
            f"unknown board {name!r}; valid boards: {', '.join(sorted(BOARD_MODELS))}"
        ) from None
