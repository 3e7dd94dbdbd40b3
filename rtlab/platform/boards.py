"""Board models of the virtual rack, as data.

Everything that differs between the emulated boards lives here so that the image builder
and the QEMU launcher stay board-agnostic.
"""

from __future__ import annotations

import attrs

FLAVOURS = ("std", "rt")

# QEMU user networking (slirp), the virtual rack's alone: the address its DHCP server hands
# out, slirp's gateway (which answers pings itself) and the guest port that the host-side TCP
# stream is forwarded to. A board's image asks DHCP for its address, on either rack.
GUEST_ADDRESS = "10.0.2.15"
GUEST_PREFIX = 24
GATEWAY = "10.0.2.2"
STREAM_PORT = 5001


@attrs.frozen(kw_only=True)
class PiFirmware:
    """The Raspberry Pi's GPU firmware stage: what its boot ROM and firmware read from the
    card's FAT partition before an ARM core runs anything (docs/lab.md, "Boot chain").
    QEMU cannot run it: the virtual rack checks the same files and config.txt, then starts
    the ``kernel=`` file config.txt names, as the firmware would."""

    files: tuple[str, ...]
    """From Debian's raspi-firmware (/usr/lib/raspi-firmware/): a Pi 3 has no boot EEPROM,
    so bootcode.bin is on the card too."""
    config: tuple[tuple[str, str], ...]
    """config.txt, key=value lines in this order."""
    loader: str
    """The file config.txt's ``kernel=`` names: Debian's U-Boot for this board."""

    def config_txt(self) -> str:
        return "".join(f"{key}={value}\n" for key, value in self.config)

    def setting(self, key: str) -> str | None:
        return dict(self.config).get(key)


@attrs.frozen(kw_only=True)
class UBoot:
    """The board's U-Boot, from Debian's package of it (the same 2023.01 release for both
    boards): the virtual rack runs it, and where the board loads it from its card, the card
    carries it."""

    package: str
    path: str
    """The binary inside the package."""
    prompt: str
    """The prompt of this build (CONFIG_SYS_PROMPT)."""
    on_card: str | None = None
    """Its file name on the card's boot partition; None where the board keeps U-Boot in
    flash of its own (the SABRE Lite's SPI NOR) and the card holds only what it reads."""
    vlab_boot: str = "boot"
    """The command the virtual rack types at the prompt after it set the variables of the
    boot (``boot``: distro boot, as autoboot would run it)."""


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
    nic_modules: tuple[str, ...] = ()
    """The physical board's network drivers, loaded after ``modules`` where the kernel has
    them (a kernel built without them is told in the image's manifest): the image is the
    same for both racks, and QEMU emulates other NICs than the boards have."""
    firmware: PiFirmware | None = None
    uboot: UBoot
    boot_scripts: tuple[str, ...] = ()
    """U-Boot script images (mkimage -T script) beside extlinux.conf, for U-Boot builds
    that load a script rather than distro boot's extlinux.conf."""
    poweroff_resets: bool = False
    """The emulated machine has no power-off hardware: `poweroff`/`halt` reset instead."""
    qemu_nic: tuple[str, ...] = ()
    """QEMU options that attach the board's network interface to the netdev `net0`."""
    qemu_nic_at_kernel: bool = False
    """Plug the NIC (a ``-device``, as QMP's device_add takes it) only when U-Boot starts the
    kernel: QEMU's dwc2 has no core soft reset, so a USB device U-Boot enumerated (its
    preboot ``usb start``) never shows as connected to Linux, which a real Pi's does."""
    no_network: str | None = None
    """Why the emulated board has no network; the network load skips with this reason."""
    qemu_append: tuple[str, ...] = ()
    """Kernel parameters the virtual rack adds at boot, through U-Boot's rtlab_bootargs,
    to what the card's command line says: what the emulator needs and a physical board must
    not get."""

    def __attrs_post_init__(self) -> None:
        # Exactly one of the two: a board silently without network would skip the load
        # with no reason, one with both would claim a network it does not get.
        if bool(self.qemu_nic) == (self.no_network is not None):
            raise ValueError(f"board {self.name}: give either qemu_nic or no_network")
        if self.firmware is not None and not (
                self.firmware.setting("kernel") == self.firmware.loader == self.uboot.on_card):
            raise ValueError(f"board {self.name}: the firmware's config.txt must start the "
                             "board's U-Boot on the card (kernel=<loader>)")

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
        # the SABRE Lite's own PHY, a Micrel KSZ9021: its driver applies the board's RGMII
        # skews from the device tree, without which the link is unreliable
        nic_modules=("micrel",),
        # Boundary Devices' stock U-Boot (nitrogen6x) loads /6x_bootscript, older
        # mainline SABRE Lite builds /boot.scr; distro-boot builds read extlinux.conf
        boot_scripts=("6x_bootscript", "boot.scr"),
        # QEMU's sabrelite has no SNVS power-off: a halted kernel would spin a host core
        # forever, while a reset ends QEMU (-no-reboot).
        poweroff_resets=True,
        # -net nic (not -device) is how QEMU reaches an on-board NIC: the FEC
        qemu_nic=("-net", "nic,netdev=net0"),
        # QEMU 7.2 never sets the UART's USR2_WAKE; a 6.12 kernel's RX flood check then
        # soft-resets the console UART every fourth receive interrupt and loses input.
        # rtlab's kernels take this switch (kernel/patches/); older kernels ignore it.
        qemu_append=("imx.flood_check=0",),
        # Debian's mx6qsabrelite build stands in for the U-Boot in the board's SPI NOR.
        # Under QEMU it cannot read the emulated uSDHC, so the virtual rack shows it the
        # same card as a USB disk and boots that (distro boot's usb0 target), while Linux
        # reads the card on the SD controller.
        uboot=UBoot(package="u-boot-imx", path="usr/lib/u-boot/mx6qsabrelite/u-boot-dtb.imx",
                    prompt="=> ", vlab_boot="run bootcmd_usb0"),
    ),
    "rpi3": BoardModel(
        name="rpi3",
        arch="arm64",
        qemu_binary="qemu-system-aarch64",
        qemu_machine="raspi3b",
        kernel_packages={"std": "linux-image-arm64", "rt": "linux-image-rt-arm64"},
        kernel_image="Image",
        dtb="broadcom/bcm2837-rpi-3-b.dtb",
        # the mini UART on the header pins (GPIO 14/15), the mainline device tree's
        # stdout-path (serial1): the PL011 (ttyAMA0) serves Bluetooth on a Pi 3
        console="ttyS1,115200",
        # bcm2835_wdt provides restart and power-off. "bcm2835" is the sdhost driver: its
        # pinctrl state moves QEMU's SD card from the Arasan SDHCI (left unused, as on the
        # real board where it serves Wi-Fi) to sdhost.
        # The network adapter hangs off the dwc2 USB controller (as the real board's
        # LAN9514 does); phy-generic is its USB PHY, cdc_ether drives QEMU's usb-net.
        modules=(
            "bcm2835_wdt", "bcm2835", *_DATA_FS_MODULES, "phy-generic", "dwc2", "cdc_ether",
        ),
        # the Pi 3B's own network chip, a LAN9514 hub with an Ethernet function
        nic_modules=("smsc95xx",),
        firmware=PiFirmware(
            files=("bootcode.bin", "start.elf", "fixup.dat"),
            # Debian's raspi-firmware writes the same keys: a 64-bit start, the mini UART
            # enabled at a fixed core clock (its baud rate follows the core clock), and the
            # mainline name of the device tree (bcm2837-rpi-3-b.dtb, not bcm2710-…)
            config=(("arm_64bit", "1"), ("enable_uart", "1"), ("upstream_kernel", "1"),
                    ("kernel", "u-boot.bin")),
            loader="u-boot.bin",
        ),
        uboot=UBoot(package="u-boot-rpi", path="usr/lib/u-boot/rpi_3/u-boot.bin",
                    prompt="U-Boot> ", on_card="u-boot.bin"),
        # QEMU's raspi3b has no LAN9514: a USB network adapter (full speed, behind a hub
        # QEMU adds) stands in. dwc2 polls it at ~1700 IRQ/s, which costs about 2/3 of a
        # host core even when the board is idle; it moves ~0.5 MB/s, and a flood of pings
        # larger than the MTU gets no replies (1400-byte pings do).
        qemu_nic=("-device", "usb-net,netdev=net0"),
        qemu_nic_at_kernel=True,
    ),
}


def board_model(name: str) -> BoardModel:
    try:
        return BOARD_MODELS[name]
    except KeyError:
        raise ValueError(
            f"unknown board {name!r}; valid boards: {', '.join(sorted(BOARD_MODELS))}"
        ) from None
