"""The virtual rack at a board's U-Boot prompt, as a person or labgrid's UBootDriver would
be: stop autoboot, set the variable the card's command line ends with
(:data:`rtlab.image.sdcard.BOOTARGS_VARIABLE`: the rack's fault switches and what the
emulator needs), and boot as autoboot would have.

It only types; U-Boot reads the card. When U-Boot comes back to its prompt instead of
starting a kernel, it found nothing it could boot on the card, and the rack says so on
the console, where the lab's error message will quote it.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Sequence

from rtlab.image.sdcard import BOOTARGS_VARIABLE
from rtlab.platform.boards import UBoot

AUTOBOOT = b"Hit any key to stop autoboot"
KERNEL_STARTED = b"Starting kernel"
# what a kernel parameter may hold to be typed into U-Boot's single quotes
_TYPABLE = re.compile(r"[^'\r\n\x00-\x1f]+")
_TAIL = 256


class State(enum.Enum):
    autoboot = "waiting for U-Boot's autoboot"
    prompt = "waiting for U-Boot's prompt"
    booting = "booting"
    started = "kernel started"
    failed = "U-Boot found nothing to boot"


def boot_commands(uboot: UBoot, parameters: Sequence[str]) -> bytes:
    """What the rack types at the prompt: the one-boot kernel parameters, then the boot."""
    for parameter in parameters:
        if not _TYPABLE.fullmatch(parameter):
            raise ValueError(f"kernel parameter {parameter!r} cannot be typed into U-Boot")
    value = " ".join(parameters)
    setting = (f"setenv {BOOTARGS_VARIABLE} '{value}'" if value
               else f"setenv {BOOTARGS_VARIABLE}")
    return f"{setting}; {uboot.vlab_boot}\r".encode()


class UBootConsole:
    """Follows one boot's console output and types into it (``type_in``); ``say`` puts
    the rack's own message on the console."""

    def __init__(self, uboot: UBoot, parameters: Sequence[str],
                 type_in: Callable[[bytes], bool], say: Callable[[str], None],
                 kernel_started: Callable[[], None] = lambda: None) -> None:
        self.uboot = uboot
        self.commands = boot_commands(uboot, parameters)
        self.type_in = type_in
        self.say = say
        self.kernel_started = kernel_started
        self.state = State.autoboot
        self._seen = b""

    def feed(self, data: bytes) -> None:
        if self.state in (State.started, State.failed):
            return
        self._seen = (self._seen + data)[-(_TAIL + len(data)):]
        prompt = self.uboot.prompt.encode()
        if self.state is State.autoboot and AUTOBOOT in self._seen:
            # any key stops the countdown; the prompt follows
            self._advance(State.prompt, b" ")
        if self.state is State.prompt and KERNEL_STARTED in self._seen:
            # the key came after the countdown ended: this boot runs without the variables
            self._started()
            self.say("too late to stop U-Boot's autoboot: this boot runs without "
                     f"{BOOTARGS_VARIABLE} ({self.commands.decode().strip()})")
        elif self.state is State.prompt and self._seen.rstrip(b" ").endswith(prompt.rstrip()):
            self._advance(State.booting, self.commands)
        elif self.state is State.booting:
            if KERNEL_STARTED in self._seen:
                self._started()
            elif self._seen.rstrip(b" ").endswith(prompt.rstrip()):
                self.state = State.failed
                self.say("U-Boot found nothing it could boot on the SD card and is back at "
                         "its prompt (its output above says what it looked for)")

    def _started(self) -> None:
        self.state = State.started
        self.kernel_started()

    def _advance(self, state: State, typed: bytes) -> None:
        self.state = state
        # what came before is answered: the next match must be new output
        self._seen = b""
        if not self.type_in(typed):
            self.say(f"could not type into U-Boot ({self.state.value})")

    def timed_out(self) -> None:
        """The rack's deadline for reaching the kernel passed."""
        if self.state in (State.autoboot, State.prompt):
            self.say(f"U-Boot never got as far as the kernel: still {self.state.value}")
