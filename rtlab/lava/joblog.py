"""A LAVA job's log: one YAML mapping per line (``{"dt": …, "lvl": …, "msg": …}``), as
lava-run prints it or lava-server hands it out (``lavacli jobs logs --raw``, each line then
a list item ``- {…}``).

What rtlab needs from it: the board's output (``lvl: target``) with its times, LAVA's
results, the job's own result, and the blocks of evidence rtlab's driver printed
(jobs/board/suite.sh.j2), each decoded and checked against the size and SHA-256 the board
gave. Nothing is guessed: a block that does not decode to what the board announced is
garbled, and the case it belongs to is then an error.

Every line is kept as well, for the excerpt of the log a case's JUnit test case shows
(:meth:`JobLog.excerpt`): its own part of the log, the evidence blocks in it shortened.
"""

import base64
import binascii
import datetime
import gzip
import hashlib
import io
import json
import re
import tarfile
import zlib
from collections.abc import Mapping
from typing import Any

import attr
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from rtlab.lava.board import PREFIX

_BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
_YAML = YAML(typ="safe", pure=False)
# an excerpt shows at most this much of one log entry (LAVA's result of the test shell
# carries every step of the job)
EXCERPT_LINE_CHARS = 500


class LavaLogError(ValueError):
    """Not a LAVA job log at all; the message names the source and line."""


@attr.frozen
class TargetLine:
    number: int
    """The line of the log file."""
    when: datetime.datetime | None
    text: str


@attr.frozen
class LogLine:
    """One line of the log file, whatever it holds."""

    number: int
    when: datetime.datetime | None
    level: str | None
    """LAVA's level (target, info, debug, results, …); None: the line is no log entry."""
    text: str

    def show(self) -> str:
        """The line as an excerpt shows it: line number, time, level, message."""
        when = self.when.strftime("%H:%M:%S.%f")[:-3] if self.when else "--:--:--.---"
        text = self.text.rstrip("\n")
        if len(text) > EXCERPT_LINE_CHARS:
            text = text[:EXCERPT_LINE_CHARS] + f"… ({len(text)} characters)"
        return f"{self.number:>6} {when} {self.level or 'unreadable':<7} {text}"


@attr.define
class Block:
    """One file of evidence as the board printed it."""

    owner: str
    name: str
    size: int
    sha256: str
    start_line: int
    lines: list[str] = attr.Factory(list)
    problem: str | None = None

    def decode(self) -> bytes:
        """The file's bytes; raises ValueError saying how the block is garbled."""
        if self.problem:
            raise ValueError(self.problem)
        try:
            packed = base64.b64decode("".join(self.lines), validate=True)
            data = gzip.decompress(packed)
        except (binascii.Error, OSError, EOFError, zlib.error) as error:
            raise ValueError(f"does not decode: {error}") from None
        if len(data) != self.size:
            raise ValueError(f"decodes to {len(data)} bytes, the board wrote {self.size}")
        if hashlib.sha256(data).hexdigest() != self.sha256:
            raise ValueError("decodes to other bytes than the board wrote (SHA-256 differs)")
        return data


@attr.frozen
class Evidence:
    """What rtlab's driver printed: the files per owner (a case's LAVA name, or
    "sysinfo"), why a file is unusable, and when each case started, ended or skipped."""

    files: Mapping[str, Mapping[str, bytes]]
    missing: Mapping[str, frozenset[str]]
    garbled: Mapping[str, Mapping[str, str]]
    started: Mapping[str, datetime.datetime | None]
    ended: Mapping[str, datetime.datetime | None]
    skipped: frozenset[str]
    suite_started: bool
    suite_ended: bool
    spans: Mapping[str, tuple[int, int | None]] = attr.field(factory=dict)
    """Each case's part of the log: the lines of its case-start (or case-skip) marker and
    of its case-end marker (a skip: the line before the next marker), as line numbers of
    the log file; None: the log ends before the case did."""


@attr.frozen
class JobLog:
    source: str
    target: tuple[TargetLine, ...]
    results: tuple[Mapping[str, Any], ...]
    job_result: Mapping[str, Any] | None
    """LAVA's final {"definition": "lava", "case": "job", "result": …} (None: the log
    ends before the job did)."""
    first: datetime.datetime | None
    last: datetime.datetime | None
    unreadable: tuple[int, ...]
    """Lines that are not log entries (a cut-off last line, say)."""
    errors: tuple[str, ...]
    """LAVA's error and exception messages, in order."""
    lines: tuple[LogLine, ...] = ()
    """Every line of the log, entries and unreadable ones."""

    @property
    def complete(self) -> bool:
        """LAVA said the job finished correctly."""
        return self.job_result is not None and self.job_result.get("result") == "pass"

    def status(self) -> str:
        """One line on how the job ended, for the records' messages."""
        if self.job_result is None:
            return "the log ends before the job did (truncated?)"
        if self.complete:
            return "LAVA finished the job correctly"
        kind = self.job_result.get("error_type") or "unknown"
        return f"LAVA ended the job incomplete ({kind} error: {self.job_result.get('error_msg')})"

    def evidence(self) -> Evidence:
        return _evidence(self.target)

    def excerpt(self, first: int, last: int | None = None) -> list[str]:
        """Lines ``first`` to ``last`` of the log file (None: to its end) as a reader wants
        them: each entry on its line, and the base64 of an evidence block, which says
        nothing to a reader and is checked by the records, as one line that counts it. A
        line inside a block that is not base64 (kernel noise, say) is shown: it is why
        the block is garbled."""
        shown: list[str] = []
        block: str | None = None
        run = 0

        def flush() -> None:
            nonlocal run
            if run:
                shown.append(f"{'':>6} {'':12} {'':<7} [{run} line(s) of base64: {block}]")
            run = 0

        for line in self.lines:
            if line.number < first or (last is not None and line.number > last):
                continue
            text = line.text.strip()
            if line.level == "target" and text.startswith(PREFIX):
                flush()
                word, _, rest = text.removeprefix(PREFIX).partition(" ")
                block = " ".join(rest.split()[:2]) if word == "file" else None
            elif block is not None and line.level == "target" and _BASE64.match(text):
                run += 1
                continue
            else:
                flush()
            shown.append(line.show())
        flush()
        return shown


def _when(text: object) -> datetime.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    # lava-run and lava-server write UTC without an offset
    return when if when.tzinfo else when.replace(tzinfo=datetime.UTC)


def read_log(text: str, source: str, *, empty_ok: bool = False) -> JobLog:
    """Parse a job log. A line that is no log entry is kept as unreadable (a log cut off
    mid-line ends so); a text without a single entry is refused, unless ``empty_ok`` (the
    log of a job that never ran) and it is empty."""
    target: list[TargetLine] = []
    lines: list[LogLine] = []
    results: list[Mapping[str, Any]] = []
    errors: list[str] = []
    unreadable: list[int] = []
    job_result = None
    first = last = None
    entries = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("- "):
            line = line[2:]
        try:
            entry = _YAML.load(line) if line.startswith("{") else None
        except YAMLError:
            entry = None
        if not isinstance(entry, dict) or "lvl" not in entry or "msg" not in entry:
            unreadable.append(number)
            lines.append(LogLine(number, None, None, line))
            continue
        entries += 1
        when = _when(entry.get("dt"))
        first = first or when
        last = when or last
        level, message = entry["lvl"], entry["msg"]
        lines.append(LogLine(number, when, str(level), message if isinstance(message, str)
                             else json.dumps(message, default=str, ensure_ascii=False)))
        if level == "target" and isinstance(message, str):
            target.append(TargetLine(number, when, message))
        elif level == "results" and isinstance(message, dict):
            results.append(message)
            if message.get("definition") == "lava" and message.get("case") == "job":
                job_result = message
        elif level in ("error", "exception"):
            errors.append(str(message))
    if entries == 0 and not (empty_ok and not unreadable):
        raise LavaLogError(f"{source}: not a LAVA job log (no line of it is a log entry"
                           + (f"; line {unreadable[0]} is not" if unreadable else "") + ")")
    return JobLog(source, tuple(target), tuple(results), job_result, first, last,
                  tuple(unreadable), tuple(errors), tuple(lines))


def _evidence(lines: tuple[TargetLine, ...]) -> Evidence:
    files: dict[str, dict[str, bytes]] = {}
    missing: dict[str, set[str]] = {}
    garbled: dict[str, dict[str, str]] = {}
    started: dict[str, datetime.datetime | None] = {}
    ended: dict[str, datetime.datetime | None] = {}
    skipped: set[str] = set()
    spans: dict[str, tuple[int, int | None]] = {}
    # a skip's part of the log ends where the next marker begins
    open_skip: str | None = None
    suite = {"start": False, "end": False}
    block: Block | None = None

    def close(problem: str | None = None) -> None:
        nonlocal block
        if block is None:
            return
        if problem is not None and block.problem is None:
            block.problem = problem
        try:
            files.setdefault(block.owner, {}).update(_unpack(block.name, block.decode()))
        except ValueError as error:
            garbled.setdefault(block.owner, {})[block.name] = (
                f"{block.name} (log line {block.start_line}) {error}")
        block = None

    for line in lines:
        text = line.text.strip()
        if not text.startswith(PREFIX):
            if block is not None:
                if _BASE64.match(text):
                    block.lines.append(text)
                elif block.problem is None:
                    block.problem = f"is garbled at log line {line.number}: {text[:60]!r}"
            continue
        word, _, rest = text.removeprefix(PREFIX).partition(" ")
        fields = rest.split()
        if word == "end" and block is not None and fields == [block.owner, block.name]:
            close()
            continue
        # any other marker ends a block that was still open: it lost its end
        close("has no end marker (cut off)")
        if open_skip is not None:
            spans[open_skip] = (spans[open_skip][0], line.number - 1)
            open_skip = None
        if word == "file" and len(fields) == 4 and fields[2].isdigit():
            owner, name, size, digest = fields
            block = Block(owner, name, int(size), digest, line.number)
        elif word == "missing" and len(fields) == 2:
            missing.setdefault(fields[0], set()).add(fields[1])
        elif word == "case-start" and fields:
            started[fields[0]] = line.when
            spans[fields[0]] = (line.number, None)
        elif word == "case-end" and fields:
            ended[fields[0]] = line.when
            if fields[0] in spans:
                spans[fields[0]] = (spans[fields[0]][0], line.number)
        elif word == "case-skip" and fields:
            skipped.add(fields[0])
            spans[fields[0]] = (line.number, None)
            open_skip = fields[0]
        elif word == "suite-start":
            suite["start"] = True
        elif word == "suite-end":
            suite["end"] = True
    close("has no end marker (the log ends inside it)")
    return Evidence(files=files, missing={k: frozenset(v) for k, v in missing.items()},
                    garbled=garbled, started=started, ended=ended, skipped=frozenset(skipped),
                    suite_started=suite["start"], suite_ended=suite["end"], spans=spans)


ARCHIVE = "evidence.tar"


def _unpack(name: str, data: bytes) -> dict[str, bytes]:
    """A block's files: the driver sends an owner's folder as one tar."""
    if name != ARCHIVE:
        return {name: data}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            return {member.name.removeprefix("./"): archive.extractfile(member).read()
                    for member in archive.getmembers() if member.isfile()}
    except (tarfile.TarError, AttributeError) as error:
        raise ValueError(f"is not a tar archive: {error}") from None
