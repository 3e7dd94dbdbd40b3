"""Board models of the virtual rack, as data.

Everything that differs between the emulated boards lives here so that the image builder
and the QEMU launcher stay board-agnostic.
"""

from __future__ import annotations

import attrs

FLAVOURS = ("std", "rt")

# QEMU user networking (slirp): the guest's fixed address, slirp's gateway (which answers
# pings itself) and the guest port that the host-side TCP stream is forwarded to.
GUEST_ADDRESS = "10.0.2.15"
GUEST_PREFIX = 24
GATEWAY = "10.0.2.2"
STREAM_PORT = 5001


@attrs.frozen
class DtbProperty:
    """A device-tree property (re)written with `fdtput -t <kind>` before the DTB goes on
    the SD card."""

    node: str
    name: str
    kind: str
    """fdtput's type: "s" for strings, "u" for cells."""
    values: tuple[str, ...]


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
    dtb_properties: tuple[DtbProperty, ...] = ()
    poweroff_resets: bool = False
    """The emulated machine has no power-off hardware: `poweroff`/`halt` reset instead."""
    qemu_nic: tuple[str, ...] = ()
    """QEMU options that attach the board's network interface to the netdev `net0`."""
    no_network: str | None = None
    """Why the emulated board has no network; the network load skips with this reason."""
    qemu_append: tuple[str, ...] = ()
    """Kernel parameters the virtual rack adds at boot to what the card's extlinux.conf
    says: what the emulator needs and a physical board must not get."""

    def __attrs_post_init__(self) -> None:
        # Exactly one of the two: a board silently without network would skip the load
        # with no reason, one with both would claim a network it does not get.
        if bool(self.qemu_nic) == (self.no_network is not None):
            raise ValueError(f"board {self.name}: give either qemu_nic or no_network")

    @property
    def has_network(self) -> bool:
        return bool(self.qemu_nic)

    @property
    def console_device(self) -> str:
        return self.console.split(",", 1)[0]

    def kernel_package(self, flavour: str) -> str:
        try:
            return self.kernel_packages[flavour]
        except KeyError:
            raise ValueError(
                f"unknown flavour {flavour!r} for board {self.name}; valid flavours: "
                f"{', '.join(self.kernel_packages)}"
            ) from None


# ext4 (for the /data partition) asks the crypto API for "crc32c" at mount time; that is a
# soft dependency modinfo does not list, so the generic implementation is named explicitly.
_DATA_FS_MODULES = ("crc32c_generic", "ext4")
_FEC = "/soc/bus@2100000/ethernet@2188000"

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
        # fec is the on-board ethernet; smsc drives the LAN911x PHY QEMU puts behind it and
        # goes first, or the PHY probe loads it behind /init's back.
        modules=(
            "gpio-mxc", "sdhci-esdhc-imx", "imx2_wdt", *_DATA_FS_MODULES, "smsc", "fec",
        ),
        # QEMU's sabrelite has no SNVS power-off: a halted kernel would spin a host core
        # forever, while a reset ends QEMU (-no-reboot).
        poweroff_resets=True,
        # -net nic (not -device) is how QEMU reaches an on-board NIC: the FEC
        qemu_nic=("-net", "nic,netdev=net0"),
        # QEMU 7.2 never sets the UART's USR2_WAKE; a 6.12 kernel's RX flood check then
        # soft-resets the console UART every fourth receive interrupt and loses input.
        # rtlab's kernels take this switch (kernel/patches/); older kernels ignore it.
        qemu_append=("imx.flood_check=0",),
        # QEMU raises the FEC's MAC interrupts on its PPS line too; Linux's PPS handler
        # does not claim them, and under network load the kernel disables that line with
        # an "irq nobody cared" backtrace on the console. Only the MAC line is wired.
        dtb_properties=(
            DtbProperty(_FEC, "interrupts", "u", ("0", "118", "4")),
            DtbProperty(_FEC, "interrupt-names", "s", ("int0",)),
        ),
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
        # The network adapter hangs off the dwc2 USB controller (as the real board's
        # LAN9514 does); phy-generic is its USB PHY, cdc_ether drives QEMU's usb-net.
        modules=(
            "bcm2835_wdt", "bcm2835", *_DATA_FS_MODULES, "phy-generic", "dwc2", "cdc_ether",
        ),
        # The PL011 is wired to Bluetooth in the Pi 3B tree; without this the console gets
        # no input.
        dtb_remove_nodes=("/soc/serial@7e201000/bluetooth",),
        # QEMU's raspi3b has no LAN9514: a USB network adapter (full speed, behind a hub
        # QEMU adds) stands in. dwc2 polls it at ~1700 IRQ/s, which costs about 2/3 of a
        # host core even when the board is idle; it moves ~0.5 MB/s, and a flood of pings
        # larger than the MTU gets no replies (1400-byte pings do).
        qemu_nic=("-device", "usb-net,netdev=net0"),
    ),
}


def board_model(name: str) -> BoardModel:
    try:
        return BOARD_MODELS[name]
    except KeyError:
        raise ValueError(
            f"unknown board {name!r}; valid boards: {', '.join(sorted(BOARD_MODELS))}"
        ) from None
