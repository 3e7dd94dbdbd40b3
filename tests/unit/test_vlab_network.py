"""The virtual boards' network: QEMU wiring (the Pi's USB adapter plugged once U-Boot is
done with the bus), what the image tells /init, and the card's device tree as the kernel
package ships it."""

import shutil
import subprocess
from pathlib import Path, PurePosixPath

import attrs
import pytest

from rtlab.image import rootfs
from rtlab.platform import debian
from rtlab.platform.boards import BOARD_MODELS
from rtlab.vlab.bootrom import FirstStage
from rtlab.vlab.qemu import nic_device, qemu_command

BOOT = FirstStage(loader=Path("u-boot"), dtb=Path("d"))
NO_NETWORK = attrs.evolve(BOARD_MODELS["imx6q"], qemu_nic=(), no_network="no NIC, sorry")


def option(argv: list[str], name: str) -> list[str]:
    """The values of every occurrence of a QEMU option."""
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == name]


def netdev(argv: list[str]) -> dict[str, str]:
    (spec,) = option(argv, "-netdev")
    kind, *pairs = spec.split(",")
    assert kind == "user"
    return dict(pair.split("=", 1) for pair in pairs)


@pytest.mark.parametrize("board", ["imx6q", "rpi3"])
def test_the_board_nic_is_on_a_loopback_only_user_network(board):
    argv = qemu_command(BOARD_MODELS[board], BOOT, Path("sd.img"), Path("s.sock"), 21601)
    settings = netdev(argv)
    assert settings["id"] == "net0"
    assert settings["restrict"] == "on"  # the guest reaches slirp and the forward only
    assert settings["hostfwd"] == "tcp:127.0.0.1:21601-10.0.2.15:5001"
    assert settings["host"] == "10.0.2.2"
    # slirp's DHCP hands out the address the forward goes to
    assert settings["dhcpstart"] == "10.0.2.15"


def test_the_sabre_lite_nic_is_on_board_from_power_on():
    argv = qemu_command(BOARD_MODELS["imx6q"], BOOT, Path("sd.img"), Path("s.sock"), 21601)
    assert option(argv, "-net") == ["nic,netdev=net0"]


def test_the_pi_usb_nic_is_plugged_over_qmp_once_u_boot_is_done_with_the_bus():
    model = BOARD_MODELS["rpi3"]
    argv = qemu_command(model, BOOT, Path("sd.img"), Path("s.sock"), 21601, Path("q.sock"))
    # not on the command line: U-Boot's usb start would leave it unseen by Linux
    assert "-device" not in argv
    assert option(argv, "-qmp") == ["unix:q.sock,server=on,wait=off"]
    assert nic_device(model) == {"driver": "usb-net", "id": "nic0", "netdev": "net0"}


def test_without_a_port_the_board_still_has_a_network_but_nothing_is_forwarded():
    argv = qemu_command(BOARD_MODELS["imx6q"], BOOT, Path("sd.img"), Path("s.sock"))
    assert "hostfwd" not in netdev(argv)
    assert "nic,netdev=net0" in option(argv, "-net")


def test_a_board_without_network_gets_no_netdev():
    argv = qemu_command(NO_NETWORK, BOOT, Path("sd.img"), Path("s.sock"), 21601)
    assert "-netdev" not in argv and "-net" not in argv


@pytest.mark.parametrize(
    "changes", [{"no_network": "but it has one"}, {"qemu_nic": ()}], ids=["both", "neither"]
)
def test_a_board_model_has_a_nic_or_a_reason_not_both_nor_neither(changes):
    with pytest.raises(ValueError, match="either qemu_nic or no_network"):
        attrs.evolve(BOARD_MODELS["imx6q"], **changes)


def source(tmp_path: Path, settings: str, variable: str) -> str:
    """A variable of /etc/rtlab/network as /init's shell reads it."""
    path = tmp_path / "network"
    path.write_text(settings)
    script = f'NET_DHCP= NET_NONE=; . {path}; printf %s "${variable}"'
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.parametrize("board", ["imx6q", "rpi3"])
def test_init_asks_dhcp_and_no_address_of_qemu_is_on_the_card(tmp_path, board):
    settings = rootfs.network_settings(BOARD_MODELS[board])
    assert source(tmp_path, settings, "NET_DHCP") == "1"
    assert source(tmp_path, settings, "NET_NONE") == ""
    assert "10.0.2." not in settings


def test_init_gets_the_reason_of_a_board_without_network(tmp_path):
    model = attrs.evolve(NO_NETWORK, no_network="QEMU's $machine has no `NIC'; \"sorry\"")
    settings = rootfs.network_settings(model)
    assert source(tmp_path, settings, "NET_NONE") == model.no_network
    assert source(tmp_path, settings, "NET_DHCP") == ""


def guest_file(path: str, package: str) -> debian.GuestFile:
    return debian.GuestFile(path=PurePosixPath(path), source=Path("/nonexistent"),
                            package=package)


def test_packaged_programs_win_over_busybox_applets_of_the_same_name():
    files = [
        guest_file("/bin/ping", "iputils-ping"),
        guest_file("/bin/busybox", "busybox-static"),
        guest_file("/usr/bin/cyclictest", "rt-tests"),  # no applet of that name
        guest_file("/usr/lib/arm-linux-gnueabihf/ping", "libfoo"),  # not a program
    ]
    profile = rootfs.applet_overrides(files, ["busybox", "ping", "sh"])
    assert profile == 'ping() { /bin/ping "$@"; }\n'


FEC_DTS = """/dts-v1/;
/ {
    soc {
        bus@2100000 {
            ethernet@2188000 {
                interrupts = <0 118 4 0 119 4>;
                interrupt-names = "int0", "pps";
            };
        };
    };
};
"""


@pytest.mark.skipif(not (shutil.which("dtc") and shutil.which("fdtget")),
                    reason="device-tree-compiler is not installed")
def test_the_card_gets_the_imx6q_dtb_as_the_kernel_package_ships_it(tmp_path):
    model = BOARD_MODELS["imx6q"]
    release = "6.1.0-test-armmp"
    folder = tmp_path / "pkg" / "usr/lib" / f"linux-image-{release}"
    folder.mkdir(parents=True)
    subprocess.run(["dtc", "-I", "dts", "-O", "dtb", "-o", str(folder / model.dtb)],
                   input=FEC_DTS, text=True, check=True)
    kernel = debian.DebPackage(name="linux-image-test", arch="armhf", version="1",
                               deb=tmp_path / "k.deb", root=tmp_path / "pkg")
    work = tmp_path / "work"
    builder = rootfs.RootfsBuilder(model, "rt", None, work / "rootfs", work / "boot")  # type: ignore[arg-type]
    builder.boot.mkdir(parents=True)
    builder.install_dtb(kernel, release)

    def get(prop: str, kind: str) -> str:
        return subprocess.run(
            ["fdtget", "-t", kind, str(builder.boot / model.dtb),
             "/soc/bus@2100000/ethernet@2188000", prop],
            capture_output=True, text=True, check=True,
        ).stdout.strip()

    # no QEMU-only edit on a physical board's card: both of the FEC's lines stay
    assert get("interrupts", "u") == "0 118 4 0 119 4"
    assert get("interrupt-names", "s") == "int0 pps"
    assert (builder.boot / model.dtb).read_bytes() == (folder / model.dtb).read_bytes()
