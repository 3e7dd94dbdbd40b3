"""What a board printed on its console, kept so that an infrastructure error can say why:
a panic, a silent board, or the last line before things stopped.

The tap listens to labgrid's own step events (the ones ``--lg-log`` writes to the console
log), so it sees every byte any driver read from the console, with no second reader.
"""

import re

from labgrid.step import Step, StepEvent, steps

KEEP_BYTES = 256 * 1024
PANIC = re.compile(rb"Kernel panic - not syncing:[^\r\n]*")
# for a console's expect: the panic's whole line, so that its cause is in the match
PANIC_UNTIL_EOL = re.compile(rb"Kernel panic - not syncing:[^\r\n]*[\r\n]")
LINE_LIMIT = 160


class ConsoleTap:
    def __init__(self, console: object) -> None:
        self.console = console
        self._data = bytearray()
        self._dropped = 0
        steps.subscribe(self._notify)

    def _notify(self, event: StepEvent) -> None:
        step: Step = event.step
        if (step.source is self.console and step.tag == "console" and step.title == "read"
                and event.data.get("state") == "stop" and step.result):
            self._data += step.result
            excess = len(self._data) - KEEP_BYTES
            if excess > 0:
                del self._data[:excess]
                self._dropped += excess

    def mark(self) -> int:
        """A position to read from later with ``since``."""
        return self._dropped + len(self._data)

    def since(self, mark: int) -> bytes:
        return bytes(self._data[max(0, mark - self._dropped):])

    def close(self) -> None:
        steps.unsubscribe(self._notify)


def panic_line(data: bytes) -> str | None:
    found = PANIC.search(data)
    return found.group(0).decode(errors="replace")[:LINE_LIMIT] if found else None


def last_line(data: bytes) -> str | None:
    for line in reversed(data.replace(b"\r", b"\n").split(b"\n")):
        text = line.decode(errors="replace").strip()
        if text:
            return text[:LINE_LIMIT]
    return None


def describe(data: bytes) -> str:
    """What the console shows, in a few words, for an error message."""
    panic = panic_line(data)
    if panic:
        return panic
    line = last_line(data)
    if line is None:
        return "the console stayed silent"
    return f"last console line: {line!r}"
