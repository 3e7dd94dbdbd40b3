"""Faults the virtual rack injects on command, per board: the ordinary ways a hardware lab
fails, so that tests can prove rtlab classifies each as an infrastructure error, retries
what can be retried and cleans up after itself.

A fault is armed with how many times it fires (``times``; 0 keeps it armed until cleared)
and fires at the moment its kind belongs to: a PDU request, a power-on, a switch of the
SD mux to the host. A panic or a serial disconnect can instead wait for a text on the
board's console (``on_console``), so that it lands at a point of what the lab does with
the board (a measurement window's start) rather than at a time after power-on, which a
slow boot would shift.
"""

import ctypes
import ctypes.util
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attr

FAULT_KINDS: Mapping[str, str] = {
    "boot-hang": "the kernel boots but never reaches a login prompt",
    "panic": "the kernel panics AFTER seconds after power-on, or after the console shows "
             "TEXT (ON_CONSOLE; typed at the board's shell, so a shell must be logged in)",
    "boot-panic": "the kernel panics during boot, before any login (it finds no root file "
                  "system)",
    "serial-disconnect": "the serial adapter drops for SECONDS (AFTER seconds after "
                         "power-on or after the console shows TEXT; without either: now)",
    "pdu-error": "the PDU answers HTTP CODE (default 500) on the board's outlet",
    "pdu-timeout": "the PDU takes requests for the board's outlet but answers only after "
                   "SECONDS (default: an hour)",
    "sd-write-error": "writes to the SD card fail (the card is full)",
    "sd-corrupt": "the card holds wrong bytes after a write",
    "silent": "the board takes power but never prints anything",
    "slow-boot": "the board starts SECONDS after power-on",
    "trace-lockdown": "the kernel boots locked down (lockdown=confidentiality, as a board "
                      "under Secure Boot may): it offers no tracefs, so no trace is possible",
    # played by the board's /init, AFTER seconds after a measuring program (cyclictest)
    # starts, and undone when it ends (one window per boot): the ways a lab's board is not
    # what the case claims while the window runs
    "window-renice": "AFTER seconds (default 2) into the window, cyclictest's threads are "
                     "set to SCHED_OTHER, as a job's own priority setting would",
    "window-rt-task": "AFTER seconds into the window, a SCHED_FIFO 99 task starts on CPU0 "
                      "and stays until the window ends, as a stray real-time daemon would",
    "window-rt-throttling": "AFTER seconds into the window, RT throttling is turned back on "
                            "(sched_rt_runtime_us 950000)",
    "window-governor": "AFTER seconds into the window, CPU0 shows the cpufreq governor "
                       "powersave: a stand-in (QEMU's boards have no cpufreq), a tmpfs over "
                       "CPU0's sysfs folder that the check reads as a real board's",
}
# the window faults, as /init's rtlab.window_fault=KIND:AFTER names them
WINDOW_FAULTS: Mapping[str, str] = {
    "window-renice": "renice", "window-rt-task": "rt-task",
    "window-rt-throttling": "rt-throttling", "window-governor": "governor",
}
WINDOW_FAULT_AFTER_S = 2.0
PDU_TIMEOUT_DEFAULT_S = 3600.0
# where sd-corrupt flips bytes: inside the first block of every image (the MBR's boot code
# area), so a read-back of the written ranges always covers it
CORRUPT_OFFSET = 256
CORRUPT_LENGTH = 16
# the faults that can wait for a text on the console, and how long that text may be
CONSOLE_TRIGGERED = ("panic", "serial-disconnect")
ON_CONSOLE_MAX = 200
PARAMS = ("times", "seconds", "after_s", "code", "on_console")


def window_fault_param(kind: str, after_s: float | None) -> str:
    """The kernel parameter by which the board's /init plays window fault ``kind``: the
    virtual rack adds it for a boot, a test adds it to a LAVA job's command line."""
    if kind not in WINDOW_FAULTS:
        raise FaultError(f"'{kind}' is not a window fault (valid: {', '.join(WINDOW_FAULTS)})")
    after = WINDOW_FAULT_AFTER_S if after_s is None else after_s
    return f"rtlab.window_fault={WINDOW_FAULTS[kind]}:{int(after)}"


class FaultError(ValueError):
    """A fault request the rack cannot arm; the message says what is valid."""


@attr.define
class Fault:
    kind: str = attr.ib()
    times: int = 1
    seconds: float | None = None
    after_s: float | None = None
    code: int = 500
    on_console: str | None = None
    fired: int = 0

    @kind.validator
    def _known(self, _attribute: attr.Attribute, value: str) -> None:
        if value not in FAULT_KINDS:
            raise FaultError(f"unknown fault '{value}' (valid: {', '.join(FAULT_KINDS)})")

    def __attrs_post_init__(self) -> None:
        if self.times < 0:
            raise FaultError(f"{self.kind}: times must be >= 0 (0: until cleared)")
        for name in ("seconds", "after_s"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise FaultError(f"{self.kind}: {name} must be >= 0, got {value}")
        if self.on_console is not None:
            if self.kind not in CONSOLE_TRIGGERED:
                raise FaultError(f"{self.kind}: ON_CONSOLE applies only to "
                                 f"{' and '.join(CONSOLE_TRIGGERED)}")
            if not self.on_console or len(self.on_console) > ON_CONSOLE_MAX \
                    or not self.on_console.isprintable():
                raise FaultError(f"{self.kind}: ON_CONSOLE must be 1-{ON_CONSOLE_MAX} "
                                 f"printable characters, got {self.on_console!r}")
        if (self.kind in WINDOW_FAULTS and self.after_s is not None
                and not float(self.after_s).is_integer()):
            raise FaultError(f"{self.kind}: AFTER must be whole seconds (the board's sleep "
                             f"takes no fraction), got {self.after_s}")
        if self.kind == "panic" and self.after_s is None and self.on_console is None:
            raise FaultError("panic needs AFTER (seconds after power-on) or ON_CONSOLE")
        if self.kind in ("serial-disconnect", "slow-boot") and self.seconds is None:
            raise FaultError(f"{self.kind} needs SECONDS")
        if self.kind == "pdu-error" and not 400 <= self.code <= 599:
            raise FaultError(f"pdu-error: code must be an HTTP error (400-599), got {self.code}")

    @property
    def exhausted(self) -> bool:
        return self.times != 0 and self.fired >= self.times

    def as_dict(self) -> dict[str, Any]:
        return attr.asdict(self)

    @property
    def delay_s(self) -> float:
        """Seconds from the moment it belongs to (power-on, or its console text) until it
        fires."""
        return self.after_s or 0.0

    @classmethod
    def from_request(cls, kind: str, params: Mapping[str, Any]) -> "Fault":
        unknown = set(params) - set(PARAMS)
        if unknown:
            raise FaultError(f"unknown fault parameter(s) {', '.join(sorted(unknown))} "
                             f"(valid: {', '.join(PARAMS)})")
        on_console = params.get("on_console")
        if on_console is not None and not isinstance(on_console, str):
            raise FaultError(f"{kind}: on_console must be a text, got {on_console!r}")
        try:
            return cls(
                kind=kind,
                times=int(params.get("times", 1)),
                seconds=None if params.get("seconds") is None else float(params["seconds"]),
                after_s=None if params.get("after_s") is None else float(params["after_s"]),
                code=int(params.get("code", 500)),
                on_console=on_console,
            )
        except (TypeError, ValueError) as error:
            if isinstance(error, FaultError):
                raise
            raise FaultError(f"{kind}: bad parameter: {error}") from None


@attr.define
class FaultPlan:
    """The faults armed on one board."""

    armed: dict[str, Fault] = attr.Factory(dict)

    def arm(self, fault: Fault) -> None:
        self.armed[fault.kind] = fault

    def clear(self, kind: str | None = None) -> None:
        if kind is None:
            self.armed.clear()
        elif kind not in FAULT_KINDS:
            raise FaultError(f"unknown fault '{kind}' (valid: {', '.join(FAULT_KINDS)})")
        else:
            self.armed.pop(kind, None)

    def take(self, kind: str) -> Fault | None:
        """The fault of this kind if it fires now (counted as fired), else None."""
        fault = self.armed.get(kind)
        if fault is None or fault.exhausted:
            return None
        fault.fired += 1
        return fault

    def at_power_on(self, kind: str) -> Fault | None:
        """Like :meth:`take`, for a fault that belongs to power-on, not to a console text."""
        fault = self.armed.get(kind)
        if fault is None or fault.on_console is not None:
            return None
        return self.take(kind)

    def waiting_for_console(self) -> list[Fault]:
        """The faults that fire on a console text and may still fire."""
        return [fault for fault in self.armed.values()
                if fault.on_console is not None and not fault.exhausted]

    def as_list(self) -> list[dict[str, Any]]:
        return [fault.as_dict() for fault in self.armed.values()]


@attr.define
class ConsoleWatch:
    """Finds texts in a console's output, which arrives in chunks that may split them."""

    tail: bytes = b""

    def seen(self, data: bytes, texts: list[str]) -> list[str]:
        """Which of ``texts`` this chunk completes (each at most once per chunk)."""
        found = []
        for text in texts:
            needle = text.encode()
            # shorter than the text, so an occurrence found in an earlier chunk is not
            # found again
            keep = self.tail[-(len(needle) - 1):] if len(needle) > 1 else b""
            if needle in keep + data:
                found.append(text)
        self.tail = (self.tail + data)[-ON_CONSOLE_MAX:]
        return found


CORRUPT_PATTERN = b"rtlab:corrupted!"


def corrupt(card: Path) -> None:
    """Overwrite bytes of a written card, as a failing card or mux would have stored
    them. A fixed pattern, so that damaging a card twice damages it the same way."""
    assert len(CORRUPT_PATTERN) == CORRUPT_LENGTH
    with card.open("r+b") as out:
        out.seek(CORRUPT_OFFSET)
        out.write(CORRUPT_PATTERN)
        out.flush()
        os.fsync(out.fileno())


# inotify, which the standard library lacks: the corruption must land the moment the
# writer closes the card, before anyone reads it back
_IN_CLOSE_WRITE = 0x00000008
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")


class CloseWriteWatch:
    """Tells when a process that had ``path`` open for writing closes it."""

    def __init__(self, path: Path) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        if libc.inotify_add_watch(self.fd, os.fsencode(path), _IN_CLOSE_WRITE) < 0:
            error = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(error, f"inotify_add_watch {path} failed")

    def closed_after_write(self) -> bool:
        """Drain pending events; True if a writer closed the file since the last call."""
        seen = False
        while True:
            try:
                data = os.read(self.fd, 4096)
            except BlockingIOError:
                return seen
            offset = 0
            while offset + _EVENT.size <= len(data):
                _wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                seen = seen or bool(mask & _IN_CLOSE_WRITE)
                offset += _EVENT.size + length

    def close(self) -> None:
        os.close(self.fd)
