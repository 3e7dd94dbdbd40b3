"""Faults the virtual rack injects on command, per board: the ordinary ways a hardware lab
fails, so that tests can prove rtlab classifies each as an infrastructure error, retries
what can be retried and cleans up after itself.

A fault is armed with how many times it fires (``times``; 0 keeps it armed until cleared)
and fires at the moment its kind belongs to: a PDU request, a power-on, a switch of the
SD mux to the host.
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
    "panic": "the kernel panics AFTER seconds after power-on",
    "serial-disconnect": "the serial adapter drops for SECONDS (AFTER seconds after "
                         "power-on; without AFTER: now)",
    "pdu-error": "the PDU answers HTTP CODE (default 500) on the board's outlet",
    "pdu-timeout": "the PDU takes requests for the board's outlet but answers only after "
                   "SECONDS (default: an hour)",
    "sd-write-error": "writes to the SD card fail (the card is full)",
    "sd-corrupt": "the card holds wrong bytes after a write",
    "silent": "the board takes power but never prints anything",
    "slow-boot": "the board starts SECONDS after power-on",
}
PDU_TIMEOUT_DEFAULT_S = 3600.0
# where sd-corrupt flips bytes: inside the first block of every image (the MBR's boot code
# area), so a read-back of the written ranges always covers it
CORRUPT_OFFSET = 256
CORRUPT_LENGTH = 16


class FaultError(ValueError):
    """A fault request the rack cannot arm; the message says what is valid."""


@attr.define
class Fault:
    kind: str = attr.ib()
    times: int = 1
    seconds: float | None = None
    after_s: float | None = None
    code: int = 500
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
        if self.kind == "panic" and self.after_s is None:
            raise FaultError("panic needs AFTER: seconds after power-on")
        if self.kind in ("serial-disconnect", "slow-boot") and self.seconds is None:
            raise FaultError(f"{self.kind} needs SECONDS")
        if self.kind == "pdu-error" and not 400 <= self.code <= 599:
            raise FaultError(f"pdu-error: code must be an HTTP error (400-599), got {self.code}")

    @property
    def exhausted(self) -> bool:
        return self.times != 0 and self.fired >= self.times

    def as_dict(self) -> dict[str, Any]:
        return attr.asdict(self)

    @classmethod
    def from_request(cls, kind: str, params: Mapping[str, Any]) -> "Fault":
        unknown = set(params) - {"times", "seconds", "after_s", "code"}
        if unknown:
            raise FaultError(f"unknown fault parameter(s) {', '.join(sorted(unknown))} "
                             "(valid: times, seconds, after_s, code)")
        try:
            return cls(
                kind=kind,
                times=int(params.get("times", 1)),
                seconds=None if params.get("seconds") is None else float(params["seconds"]),
                after_s=None if params.get("after_s") is None else float(params["after_s"]),
                code=int(params.get("code", 500)),
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

    def as_list(self) -> list[dict[str, Any]]:
        return [fault.as_dict() for fault in self.armed.values()]


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
