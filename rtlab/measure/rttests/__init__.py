"""The rt-tests (2.4) besides cyclictest, one module per tool: the command line a board runs
for each, and strict parsers for what each writes back. This package holds what all of them
share: the table of tools (:data:`TESTS`), the result types, the console check and the JSON
header every tool writes.

- :mod:`.pairs`       ptsematest, pmqtest, sigwaittest: a sender/receiver pair per CPU
- :mod:`.signaltest`  signaltest: a signal round a ring of threads
- :mod:`.oslat`       oslat: busy-loop OS noise per CPU
- :mod:`.pi_stress`   pi_stress: PI mutex inversion groups, its summary and ``--json``
- :mod:`.pip_stress`  pip_stress: one PI inversion between processes, the line it prints
- :mod:`.board`       a tool's run on a board and its result; hung and repeated runs

Latency tools (ptsematest, pmqtest, sigwaittest, signaltest, oslat) give min/avg/max in µs
and a sample count per thread or CPU, read from their ``--json`` file. The priority
inheritance tools give a functional verdict: pi_stress from its summary and ``--json``,
pip_stress (which has neither ``-q`` nor ``--json``) from the one line it prints.

As in rtlab.measure.cyclictest, anything truncated, garbled or contradictory is refused with a
message naming the source and the place, and a "pass" only ever comes from a complete,
consistent output.

Facts about rt-tests 2.4 this package relies on for all the tools (checked on the virtual
boards, see tests/data/rttests/README.md; each tool's module lists its own):

* An unknown option makes ptsematest, pmqtest, sigwaittest and signaltest print their usage
  and exit 0 without a JSON file.
* The JSON files share cyclictest's header, colon-misspelt keys included
  (``"cmdline:"``, ``"rt_test_version:"``).
"""

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any

import attr

from rtlab.measure.cyclictest import KERNEL_LOG, SysInfo, read_sysinfo, run_times
from rtlab.util.jsonfields import Fields, no_constants, no_duplicates


class RtTestsParseError(ValueError):
    """rt-tests output that cannot be trusted; the message starts with its source."""


class ToolUnsupported(RtTestsParseError):
    """The tool said it cannot measure on this board (oslat on armhf): a skip, not a
    result."""


# ------------------------------------------------------------------------- table ----


@attr.frozen
class ToolSpec:
    """What one tool measures and how it is run. ``argv`` is the command with
    ``{placeholders}`` the builder fills in; the flag fields name the flags in it that
    matter for choosing threads, priority and run length."""

    name: str
    functional: bool
    # the figures a threshold can name (per thread/CPU for latency tools)
    metrics: tuple[str, ...]
    json: bool
    argv: tuple[str, ...]
    threads: tuple[str, ...]
    priority: str | None
    # None: the tool runs to its own end
    duration: str | None
    notes: str


_LATENCY_METRICS = ("min_us", "avg_us", "max_us", "samples")
_PAIR_ARGV = ("-p", "{priority}", "-i", "{interval_us}", "-D", "{duration_s}", "-q",
              "--json={json_path}")

TESTS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            name="ptsematest", functional=False, metrics=_LATENCY_METRICS, json=True,
            argv=("ptsematest", "-S", *_PAIR_ARGV), threads=("-S",), priority="-p",
            duration="-D",
            notes="POSIX mutex hand-over latency; -S: one sender/receiver pair per CPU, "
                  "all at -p; memory is always locked",
        ),
        ToolSpec(
            name="pmqtest", functional=False, metrics=(*_LATENCY_METRICS, "timeouts"),
            json=True, argv=("pmqtest", "-S", *_PAIR_ARGV), threads=("-S",),
            priority="-p", duration="-D",
            notes="POSIX message queue latency; -S as ptsematest; timeouts only with -T",
        ),
        ToolSpec(
            name="sigwaittest", functional=False, metrics=_LATENCY_METRICS, json=True,
            argv=("sigwaittest", "-t", "-a", *_PAIR_ARGV), threads=("-t", "-a"),
            priority="-p", duration="-D",
            notes="sigwait() wake-up latency; no -S in 2.4 (it prints usage, exits 0): "
                  "-t -a gives a pair per CPU at -p, -p minus 1, ...",
        ),
        ToolSpec(
            name="signaltest", functional=False, metrics=_LATENCY_METRICS, json=True,
            argv=("signaltest", "-t", "{threads}", "-m", "-p", "{priority}",
                  "-D", "{duration_s}", "-q", "--json={json_path}"),
            threads=("-t",), priority="-p", duration="-D",
            notes="signal round trip through a ring of -t threads (thread N on CPU N); "
                  "only thread 0's figures are the round trip",
        ),
        ToolSpec(
            name="oslat", functional=False, metrics=_LATENCY_METRICS, json=True,
            argv=("oslat", "-c", "{cpus}", "-f", "{priority}", "-D", "{duration_s}", "-q",
                  "--json={json_path}"),
            threads=("-c",), priority="-f", duration="-D",
            notes="busy-loop OS noise per CPU; not on armhf in 2.4; runs 1 s of pre-heat "
                  "first; keep SCHED_FIFO loops off CPU 0",
        ),
        ToolSpec(
            name="pi_stress", functional=True, metrics=("inversions",), json=True,
            argv=("pi_stress", "-m", "-D", "{duration_s}", "-q", "--json={json_path}"),
            threads=(), priority=None, duration="-D",
            notes="PI mutex inversion groups (CPUs - 1, on CPUs 1..) at SCHED_FIFO 1-4; "
                  "fails by its watchdog; runs 1-2 s past -D",
        ),
        ToolSpec(
            name="pip_stress", functional=True, metrics=("inversions",), json=False,
            argv=("pip_stress",), threads=(), priority=None, duration=None,
            notes="one PI inversion between processes on CPU 0 (~0.2 s); no options, "
                  "no JSON; often sets up no inversion under emulation",
        ),
    )
}


def _fill(name: str, values: Mapping[str, object]) -> list[str]:
    spec = TESTS[name]
    return [word.format_map(values) for word in spec.argv]


def _require_path(json_path: str) -> None:
    if not json_path or any(c.isspace() for c in json_path):
        raise ValueError(f"json_path must be a non-empty path without spaces, got {json_path!r}")


# ------------------------------------------------------------------ results ----


@attr.frozen
class RunInfo:
    """The header every rt-tests JSON file carries."""

    tool: str
    cmdline: str
    rt_test_version: str
    start_time: datetime
    end_time: datetime
    return_code: int
    sysinfo: SysInfo


@attr.frozen
class ThreadLatency:
    """One measuring thread (or pair, or CPU). ``cpu`` is None when not known."""

    thread: int
    cpu: int | None
    samples: int
    min_us: int
    avg_us: float
    max_us: int


@attr.frozen
class LatencyResult:
    """A latency tool's run. ``gated`` are the threads whose figures are the tool's
    latency (all of them, except signaltest: thread 0)."""

    source: str
    run: RunInfo
    threads: tuple[ThreadLatency, ...]
    gated: tuple[int, ...]
    kernel_log_lines: tuple[tuple[int, str], ...]

    @property
    def tool(self) -> str:
        return self.run.tool

    def _gated(self) -> list[ThreadLatency]:
        return [self.threads[index] for index in self.gated]

    @property
    def max_us(self) -> int:
        return max(thread.max_us for thread in self._gated())

    @property
    def min_us(self) -> int:
        return min(thread.min_us for thread in self._gated())

    @property
    def samples(self) -> int:
        return sum(thread.samples for thread in self._gated())

    @property
    def avg_us(self) -> float:
        """Sample-weighted mean of the per-thread averages."""
        threads = self._gated()
        return sum(t.avg_us * t.samples for t in threads) / sum(t.samples for t in threads)


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    # the run was sound but did not exercise priority inheritance
    INCONCLUSIVE = "inconclusive"


@attr.frozen
class FunctionalResult:
    source: str
    tool: str
    verdict: Verdict
    # None when the output does not say
    inversions: int | None
    exit_status: int | None
    reason: str
    # the output lines the verdict rests on
    evidence: tuple[str, ...]
    run: RunInfo | None = None
    kernel_log_lines: tuple[tuple[int, str], ...] = ()


# ------------------------------------------------------------------ console ----


_UNSUPPORTED = re.compile(r"^This architecture is not yet supported\b.*$", re.MULTILINE)
_USAGE = re.compile(r"^(Usage:|\S+: (invalid|unrecognized) option\b)", re.MULTILINE)


def check_console(tool: str, text: str, source: str) -> None:
    """Refuse what a tool printed (stdout and stderr) when it shows the tool did not
    measure: its usage text (it exits 0 after an unknown option) or, for oslat, its
    unsupported-architecture notice (:class:`ToolUnsupported`)."""
    if tool not in TESTS:
        raise ValueError(f"unknown tool {tool!r}; known: {', '.join(TESTS)}")
    lines = text.replace("\r\n", "\n").split("\n")
    unsupported = _UNSUPPORTED.search(text)
    if unsupported:
        line_no = text[:unsupported.start()].count("\n") + 1
        raise ToolUnsupported(f"{source}:{line_no}: {tool} does not run on this board: "
                              f"{unsupported.group(0).strip()!r}")
    usage = _USAGE.search(text)
    if usage:
        line_no = text[:usage.start()].count("\n") + 1
        raise RtTestsParseError(f"{source}:{line_no}: {tool} printed its usage instead of "
                                f"measuring: {lines[line_no - 1].strip()!r}")


def _lines(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(numbered non-blank lines, numbered kernel messages on lines of their own)."""
    kept: list[tuple[int, str]] = []
    kernel: list[tuple[int, str]] = []
    for line_no, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        (kernel if KERNEL_LOG.match(line) else kept).append((line_no, line))
    return kept, kernel


def _quote(lines: Sequence[tuple[int, str]]) -> str:
    if not lines:
        return "(empty)"
    return " | ".join(line for _, line in lines[:3])[:200]


# --------------------------------------------------------------------- JSON ----


def _min_avg_max(
    fields: Fields, what: str, fail: Callable[[str], RtTestsParseError]
) -> tuple[int, float, int]:
    min_us = fields.integer("min")
    max_us = fields.integer("max")
    avg_us = fields.number("avg")
    if max_us < min_us:
        raise fail(f"{what}: max {max_us} < min {min_us}")
    # avg is printed with 2 decimals
    if not min_us - 0.01 <= avg_us <= max_us + 0.01:
        raise fail(f"{what}: avg {avg_us} outside min {min_us}..max {max_us}")
    return min_us, avg_us, max_us


def _option_value(words: Sequence[str], short: str, long: str) -> int | None:
    for word, following in zip(words, [*words[1:], ""], strict=True):
        if word in (short, long) and following.isdigit():
            return int(following)
        for prefix in (short, f"{long}="):
            if word.startswith(prefix) and word[len(prefix):].isdigit():
                return int(word[len(prefix):])
    return None


def _load(
    tool: str, text: str, source: str, argv: Sequence[str] | None
) -> tuple[dict[str, Any], RunInfo, tuple[tuple[int, str], ...],
           Callable[[str], RtTestsParseError]]:
    """Decode a JSON file and check the header every tool writes."""

    def fail(what: str) -> RtTestsParseError:
        return RtTestsParseError(f"{source}: {what}")

    # a file read over the console can carry kernel messages on lines of their own; no
    # line of rt-tests JSON starts like one, so blank them (keeping line numbers right)
    lines = text.split("\n")
    kernel = tuple((n, line.rstrip("\r")) for n, line in enumerate(lines, start=1)
                   if KERNEL_LOG.match(line))
    clean = "\n".join("" if KERNEL_LOG.match(line) else line for line in lines)
    if not clean.strip():
        raise fail("empty: no JSON written (did the tool run?)")
    try:
        doc = json.loads(clean, object_pairs_hook=no_duplicates, parse_constant=no_constants)
    except json.JSONDecodeError as error:
        truncated = " (truncated?)" if error.pos >= len(clean.rstrip()) else ""
        raise fail(f"invalid JSON at line {error.lineno} column {error.colno}: "
                   f"{error.msg}{truncated}") from error
    except ValueError as error:
        raise fail(f"invalid JSON: {error}") from error
    if not isinstance(doc, dict):
        raise fail(f"expected a JSON object at the top, got {type(doc).__name__}")

    fields = Fields(doc, "", fail)
    fields.integer("file_version", low=1)
    cmdline = fields.string("cmdline:", "cmdline")
    words = cmdline.split()
    if not words or words[0].rsplit("/", 1)[-1] != tool:
        raise fail(f"cmdline {cmdline!r} is not a {tool} run")
    if argv is not None and cmdline != " ".join(argv):
        raise fail(f"cmdline {cmdline!r} is not the command run, {' '.join(argv)!r} "
                   "(a stale file?)")
    version = fields.string("rt_test_version:", "rt_test_version")
    start_time, end_time = run_times(fields, fail)
    return_code = fields.integer("return_code", low=None)
    sysinfo = read_sysinfo(fields, fail)
    run = RunInfo(tool=tool, cmdline=cmdline, rt_test_version=version, start_time=start_time,
                  end_time=end_time, return_code=return_code, sysinfo=sysinfo)
    # pi_stress's return code is part of its verdict; the latency tools only write a
    # file after a complete run, so anything but 0 is a broken one
    if tool != "pi_stress" and return_code != 0:
        raise fail(f"{tool} reported return_code {return_code}: the run failed")
    return doc, run, kernel, fail


def _threads(
    doc: dict[str, Any], fail: Callable[[str], RtTestsParseError], expected: int | None
) -> list[tuple[int, dict[str, Any]]]:
    fields = Fields(doc, "", fail)
    count = fields.integer("num_threads", low=1)
    threads = fields.mapping("thread")
    keys = [str(index) for index in range(len(threads))]
    if sorted(threads, key=lambda key: int(key) if key.isdigit() else -1) != keys:
        raise fail(f"thread keys must be 0..{len(threads) - 1}, got {sorted(threads)}")
    if len(threads) != count:
        raise fail(f"num_threads is {count} but the thread section has {len(threads)}")
    if expected is not None and count != expected:
        raise fail(f"{count} threads measured, {expected} requested")
    result = []
    for key in keys:
        node = threads[key]
        if not isinstance(node, dict):
            raise fail(f"thread {key} must be an object, got {type(node).__name__}")
        result.append((int(key), node))
    return result
