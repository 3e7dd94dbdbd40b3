"""The virtual rack at a board's U-Boot prompt (rtlab.vlab.uboot): what it types, when, and
what it says when U-Boot finds nothing to boot. U-Boot's output here is the one both
Debian builds print (recorded from the rack's console logs); no QEMU."""

import pytest

from rtlab.platform.boards import BOARD_MODELS
from rtlab.vlab.uboot import State, UBootConsole, boot_commands

RPI = BOARD_MODELS["rpi3"].uboot
IMX = BOARD_MODELS["imx6q"].uboot
COUNTDOWN = b"Hit any key to stop autoboot:  2 "


class Line:
    def __init__(self) -> None:
        self.typed: list[bytes] = []
        self.said: list[str] = []
        self.started = 0

    def console(self, uboot, parameters=()) -> UBootConsole:
        def kernel_started() -> None:
            self.started += 1
        return UBootConsole(uboot, list(parameters), self.type_in, self.said.append,
                            kernel_started)

    def type_in(self, data: bytes) -> bool:
        self.typed.append(data)
        return True


def test_it_stops_autoboot_sets_the_parameters_and_boots():
    line = Line()
    console = line.console(RPI, ["rtlab.hang", "lockdown=confidentiality"])
    console.feed(b"U-Boot 2023.01\r\nstarting USB...\r\n")
    assert line.typed == []
    console.feed(COUNTDOWN)
    assert line.typed == [b" "]
    console.feed(b"\x08\x08\x08 0 \r\nU-Boot> ")
    assert line.typed[1] == (b"setenv rtlab_bootargs 'rtlab.hang lockdown=confidentiality'; "
                             b"boot\r")
    assert console.state is State.booting and line.started == 0
    console.feed(b"Retrieving file: /Image\r\nappend: console=ttyS1,115200 quiet rtlab.hang")
    console.feed(b"\r\n\r\nStarting kernel ...\r\n")
    assert console.state is State.started and line.started == 1
    assert line.said == []
    # the kernel's output is not U-Boot's: a "U-Boot> " in it types nothing
    console.feed(b"U-Boot> ")
    assert len(line.typed) == 2 and line.started == 1


def test_without_parameters_the_variable_is_cleared_and_the_board_boots_its_way():
    line = Line()
    console = line.console(IMX)
    console.feed(COUNTDOWN)
    console.feed(b"\r\n=> ")
    assert line.typed[1] == b"setenv rtlab_bootargs; run bootcmd_usb0\r"


def test_text_split_across_reads_is_still_seen():
    line = Line()
    console = line.console(IMX)
    for piece in (b"Hit any k", b"ey to stop auto", b"boot:  3 ", b"\r\n=", b"> "):
        console.feed(piece)
    assert line.typed == [b" ", b"setenv rtlab_bootargs; run bootcmd_usb0\r"]
    for piece in (b"Starting ker", b"nel ...\r\n"):
        console.feed(piece)
    assert console.state is State.started


def test_back_at_the_prompt_instead_of_a_kernel_is_said_once():
    line = Line()
    console = line.console(RPI)
    console.feed(COUNTDOWN)
    console.feed(b"\r\nU-Boot> ")
    assert console.state is State.booting
    console.feed(b"Scanning mmc 0:1...\r\nNo ethernet found.\r\nU-Boot> ")
    assert console.state is State.failed and line.started == 0
    assert len(line.said) == 1 and "found nothing it could boot" in line.said[0]
    console.feed(b"U-Boot> ")
    assert len(line.said) == 1


def test_a_key_after_the_countdown_ended_is_said_not_silently_lost():
    line = Line()
    console = line.console(RPI, ["rtlab.hang"])
    console.feed(COUNTDOWN)
    console.feed(b" 0\r\nScanning mmc 0:1...\r\nStarting kernel ...\r\n")
    assert console.state is State.started and line.started == 1
    assert "too late" in line.said[0] and "rtlab.hang" in line.said[0]


def test_a_deadline_before_the_kernel_says_where_u_boot_stood():
    line = Line()
    console = line.console(RPI)
    console.timed_out()
    assert line.said == ["U-Boot never got as far as the kernel: still waiting for "
                         "U-Boot's autoboot"]
    started = Line()
    console = started.console(RPI)
    console.feed(COUNTDOWN + b"\r\n")
    console.feed(b"U-Boot> ")
    console.feed(b"Starting kernel ...")
    console.timed_out()
    assert started.said == []


@pytest.mark.parametrize("parameter", ["it's", "a\nb", "\x1b[0m"])
def test_a_parameter_u_boot_cannot_take_is_refused(parameter):
    with pytest.raises(ValueError, match="cannot be typed"):
        boot_commands(RPI, [parameter])
