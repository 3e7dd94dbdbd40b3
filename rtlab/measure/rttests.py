"""The rt-tests (2.4) besides cyclictest: the command line a board runs for each, and strict
parsers for what each writes back.

Latency tools (ptsematest, pmqtest, sigwaittest, signaltest, oslat) give min/avg/max in µs
and a sample count per thread or CPU, read from their ``--json`` file. The priority
inheritance tools give a functional verdict: pi_stress from its summary and ``--json``,
pip_stress (which has neither ``-q`` nor ``--json``) from the one line it prints.

As in rtlab.measure.cyclictest, anything truncated, garbled or contradictory is refused with a
message naming the source and the place, and a "pass" only ever comes from a complete,
consistent output.

Facts about rt-tests 2.4 this module relies on (checked on the virtual boards, see
tests/data/rttests/README.md, and in the rt-tests sources where a board cannot show them):

* An unknown option makes ptsematest, pmqtest, sigwaittest and signaltest print their usage
  and exit 0 without a JSON file; sigwaittest has no ``-S`` (it is one of those), so one
  pair per CPU is ``-t -a``, which lowers the priority by one per pair (90, 89, ...).
* The JSON files share cyclictest's header, colon-misspelt keys included
  (``"cmdline:"``, ``"rt_test_version:"``).
* ptsematest/pmqtest/sigwaittest: per pair a sender (``samples``: messages sent) and a
  receiver (min/avg/max of the wake-up latency). ``-i`` is pair 0's interval, each further
  pair ``-d`` (500 µs) slower. The ``-q`` console summary is taken before the threads stop,
  so its cycle counts lag the JSON by a few.
* signaltest passes a signal round a ring of ``-t`` threads; thread 0 sleeps 10 ms after
  every 16 round trips, outside its own measurement but inside every other thread's, so
  only thread 0's figures are the round-trip latency. Its JSON gives every thread thread
  0's ``cpu``, so the CPU is not reported.
* oslat exits 0 having printed only "This architecture is not yet supported..." on armhf
  (no cycle counter in 2.4); it works on arm64. Its histogram buckets are 1 µs wide, keyed
  by the upper bound; the last bucket also counts the overflows; empty buckets are left
  out of the JSON. With SCHED_FIFO busy loops on CPU 0 (where its main thread runs) it
  hung on the emulated Pi, as its own warning says it may.
* pi_stress ``-D N`` stops at the first 0.75 s report after N s, so it runs N+1 to N+2 s.
  A deadlocked group (no priority inheritance) trips its watchdog: "WATCHDOG triggered:
  group N is deadlocked!" on stderr, then it sends SIGTERM to its whole process group and
  writes no JSON (from the source; a working kernel cannot show it).
* pip_stress forks low -> high -> medium; the verdict line comes from the high process,
  but the shell gets the low process's status, which is 0 whether or not an inversion
  happened. "No inversion incurred" means the scheduling did not set up the inversion (PI
  was not exercised), not that PI failed; without PI the high process never gets the
  mutex and pip_stress hangs.
"""

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any

import attr

from rtlab.measure.cyclictest import (
    KERNEL_LOG,
    SysInfo,
    fifo_from_start,
    read_sysinfo,
    require_int,
    run_times,
)
from rtlab.measure.sysinfo import cpu_list
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


# ----------------------------------------------------------------- commands ----


def ptsematest_command(
    *, duration_s: int, json_path: str, priority: int = 90, interval_us: int = 1000
) -> list[str]:
    """One mutex pair per CPU at ``priority`` for ``duration_s`` seconds."""
    return _pair_command("ptsematest", duration_s, json_path, priority, interval_us)


def pmqtest_command(
    *, duration_s: int, json_path: str, priority: int = 90, interval_us: int = 1000
) -> list[str]:
    """One message-queue pair per CPU at ``priority`` for ``duration_s`` seconds."""
    return _pair_command("pmqtest", duration_s, json_path, priority, interval_us)


def sigwaittest_command(
    *, duration_s: int, json_path: str, priority: int = 90, interval_us: int = 1000
) -> list[str]:
    """One sigwait pair per CPU, pair N at ``priority`` - N, for ``duration_s`` seconds."""
    return _pair_command("sigwaittest", duration_s, json_path, priority, interval_us)


def _pair_command(
    name: str, duration_s: int, json_path: str, priority: int, interval_us: int
) -> list[str]:
    require_int("duration_s", duration_s, 1, None)
    require_int("priority", priority, 1, 99)
    require_int("interval_us", interval_us, 1, None)
    _require_path(json_path)
    return _fill(name, {"duration_s": duration_s, "json_path": json_path,
                        "priority": priority, "interval_us": interval_us})


def signaltest_command(
    *, duration_s: int, json_path: str, priority: int = 90, threads: int = 2
) -> list[str]:
    """A ring of ``threads`` threads (thread N on CPU N) at ``priority``, memory locked."""
    require_int("duration_s", duration_s, 1, None)
    require_int("priority", priority, 1, 99)
    # signaltest refuses fewer than 2 (usage, exit 0)
    require_int("threads", threads, 2, None)
    _require_path(json_path)
    return _fill("signaltest", {"duration_s": duration_s, "json_path": json_path,
                                "priority": priority, "threads": threads})


def oslat_command(
    *, duration_s: int, json_path: str, cpus: str, priority: int = 1
) -> list[str]:
    """Busy loops at SCHED_FIFO ``priority`` on ``cpus`` (e.g. "1-3") for ``duration_s``
    seconds, after 1 s of pre-heat.

    CPU 0 is refused: oslat's main thread lives there, and with a SCHED_FIFO loop beside
    it the emulated Pi hung (oslat itself warns that it may).
    """
    require_int("duration_s", duration_s, 1, None)
    require_int("priority", priority, 1, 99)
    _require_path(json_path)
    try:
        measured = cpu_list(cpus)
    except ValueError:
        measured = ()
    if not measured:
        raise ValueError(f"cpus must be a CPU list like '1' or '1-3', got {cpus!r}")
    if 0 in measured:
        raise ValueError(f"cpus {cpus!r} includes CPU 0, where oslat's main thread runs")
    return _fill("oslat", {"duration_s": duration_s, "json_path": json_path,
                           "priority": priority, "cpus": cpus})


def pi_stress_command(*, duration_s: int, json_path: str) -> list[str]:
    """Inversion groups on every CPU but the first, for ``duration_s`` (+1..2) seconds.

    Run it in a process group of its own (e.g. ``setsid``): on a deadlock pi_stress
    sends SIGTERM to its whole process group.
    """
    require_int("duration_s", duration_s, 1, None)
    _require_path(json_path)
    return _fill("pi_stress", {"duration_s": duration_s, "json_path": json_path})


def pip_stress_command() -> list[str]:
    """One inversion attempt; it has no options. A run that does not end within a few
    seconds is a deadlock: report it with :func:`hung`."""
    return _fill("pip_stress", {})


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
class PairLatency(ThreadLatency):
    """ptsematest/pmqtest/sigwaittest: ``cpu`` and ``priority`` are the receiver's (the
    side whose latency is measured); ``samples`` counts what the sender sent."""

    sender_cpu: int | None
    priority: int
    sender_priority: int
    interval_us: int
    # pmqtest's receive timeouts (-T); None for the other tools
    timeouts: int | None


@attr.frozen
class OslatCpu(ThreadLatency):
    """One oslat CPU; ``samples`` is the number of loop iterations measured."""

    freq_mhz: int
    duration_s: float
    # bucket upper bound in µs -> count; the last bucket also holds the overflows
    histogram: Mapping[int, int]
    buckets: int


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


# --------------------------------------------------------------------- JSON ----


def parse_pair_json(
    tool: str,
    text: str,
    source: str,
    *,
    argv: Sequence[str] | None = None,
    expected_threads: int | None = None,
) -> LatencyResult:
    """Parse the ``--json`` file of ptsematest, pmqtest or sigwaittest.

    ``argv`` is the command the board ran (the JSON's cmdline must be it, so a stale file
    from an earlier run is refused); ``expected_threads`` the number of pairs asked for
    (the board's CPU count).
    """
    if tool not in ("ptsematest", "pmqtest", "sigwaittest"):
        raise ValueError(f"{tool!r} is not a sender/receiver pair tool")
    doc, run, kernel, fail = _load(tool, text, source, argv)
    pairs = []
    for index, node in _threads(doc, fail, expected_threads):
        where = f"thread.{index}."
        pair = Fields(node, where, fail)
        sender = Fields(pair.mapping("sender"), f"{where}sender.", fail)
        receiver = Fields(pair.mapping("receiver"), f"{where}receiver.", fail)
        samples = sender.integer("samples")
        if samples == 0:
            raise fail(f"pair {index} sent nothing: it never measured")
        min_us, avg_us, max_us = _min_avg_max(receiver, f"pair {index}", fail)
        pairs.append(PairLatency(
            thread=index, cpu=_cpu(receiver.integer("cpu", low=-1)), samples=samples,
            min_us=min_us, avg_us=avg_us, max_us=max_us,
            sender_cpu=_cpu(sender.integer("cpu", low=-1)),
            priority=receiver.integer("priority"), sender_priority=sender.integer("priority"),
            interval_us=sender.integer("interval", low=1),
            timeouts=receiver.integer("timeoutcount") if tool == "pmqtest" else None,
        ))
    return LatencyResult(source=source, run=run, threads=tuple(pairs),
                         gated=tuple(range(len(pairs))), kernel_log_lines=kernel)


def parse_signaltest_json(
    text: str, source: str, *, argv: Sequence[str] | None = None,
    expected_threads: int | None = None,
) -> LatencyResult:
    """Parse signaltest's ``--json`` file; the gated figures are thread 0's."""
    doc, run, kernel, fail = _load("signaltest", text, source, argv)
    threads = []
    for index, node in _threads(doc, fail, expected_threads):
        fields = Fields(node, f"thread.{index}.", fail)
        cycles = fields.integer("cycles")
        if cycles == 0:
            raise fail(f"thread {index} has 0 cycles: the signal never went round")
        min_us, avg_us, max_us = _min_avg_max(fields, f"thread {index}", fail)
        # every thread carries thread 0's cpu in 2.4's JSON: not worth reporting
        fields.integer("cpu", low=-1)
        threads.append(ThreadLatency(thread=index, cpu=None, samples=cycles, min_us=min_us,
                                     avg_us=avg_us, max_us=max_us))
    if len(threads) < 2:
        raise fail(f"{len(threads)} thread(s): signaltest always runs a ring of 2 or more")
    return LatencyResult(source=source, run=run, threads=tuple(threads), gated=(0,),
                         kernel_log_lines=kernel)


def parse_oslat_json(
    text: str, source: str, *, argv: Sequence[str] | None = None,
    expected_threads: int | None = None,
) -> LatencyResult:
    """Parse oslat's ``--json`` file: one entry per measured CPU."""
    doc, run, kernel, fail = _load("oslat", text, source, argv)
    words = run.cmdline.split()
    buckets = _option_value(words, "-b", "--bucket-size") or 32
    biased = "-B" in words or "--bias" in words
    cpus = []
    for index, node in _threads(doc, fail, expected_threads):
        fields = Fields(node, f"thread.{index}.", fail)
        cpu = fields.integer("cpu")
        min_us = fields.integer("min", low=1)
        max_us = fields.integer("max", low=1)
        avg_us = fields.number("avg")
        if max_us < min_us:
            raise fail(f"cpu {cpu}: max {max_us} < min {min_us}")
        # oslat 2.4 adds thread 0's overflow total into every thread's average, so only
        # thread 0's average is sure to lie between its min and max
        if index == 0 and not min_us - 0.001 <= avg_us <= max_us + 0.001:
            raise fail(f"cpu {cpu}: avg {avg_us} outside min {min_us}..max {max_us}")
        histogram: dict[int, int] = {}
        for key, count in fields.mapping("histogram").items():
            if not key.isdigit() or not 1 <= int(key) <= buckets:
                raise fail(f"cpu {cpu}: histogram bucket {key!r} outside 1..{buckets}")
            if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
                raise fail(f"cpu {cpu}: histogram bucket {key} has count {count!r}")
            histogram[int(key)] = count
        if not histogram:
            raise fail(f"cpu {cpu}: empty histogram: it never measured")
        if not biased:
            # min and max are samples too, so they must sit in the buckets they name
            # (the last bucket takes everything from its bound up)
            lowest, highest = min(histogram), max(histogram)
            if lowest != min(min_us, buckets):
                raise fail(f"cpu {cpu}: min {min_us} but the lowest bucket is {lowest}")
            if highest != min(max_us, buckets):
                raise fail(f"cpu {cpu}: max {max_us} but the highest bucket is {highest}")
        cpus.append(OslatCpu(
            thread=index, cpu=cpu, samples=sum(histogram.values()), min_us=min_us,
            avg_us=avg_us, max_us=max_us, freq_mhz=fields.integer("freq", low=1),
            duration_s=fields.number("duration"), histogram=histogram, buckets=buckets,
        ))
    return LatencyResult(source=source, run=run, threads=tuple(cpus),
                         gated=tuple(range(len(cpus))), kernel_log_lines=kernel)


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


def _cpu(value: int) -> int | None:
    return None if value == -1 else value


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




# --------------------------------------------------------------- functional ----


_PI_TOTAL = re.compile(r"^Total inversion performed: (\d+)$")
_PI_DURATION = re.compile(
    r"^Test Duration: (\d+) days, (\d+) hours, (\d+) minutes, (\d+) seconds$")
_PI_WATCHDOG = re.compile(r"WATCHDOG triggered: group \d+ is deadlocked!")


def parse_pi_stress(
    stdout: str,
    source: str,
    *,
    exit_status: int,
    stderr: str = "",
    json_text: str | None = None,
    argv: Sequence[str] | None = None,
) -> FunctionalResult:
    """The verdict of a ``pi_stress -q`` run from its stdout, stderr, exit status and (if
    it wrote one) its ``--json`` file.

    FAIL needs the watchdog's deadlock message; PASS needs exit status 0, a complete
    summary with inversions, a run as long as asked for and a JSON file that agrees.
    Anything else raises :class:`RtTestsParseError`.
    """
    require_int("exit_status", exit_status, -255, 255)
    out, kernel = _lines(stdout)
    err, err_kernel = _lines(stderr)
    kernel += err_kernel
    watchdog = [line for _, line in [*err, *out] if _PI_WATCHDOG.search(line)]
    if watchdog:
        return FunctionalResult(
            source=source, tool="pi_stress", verdict=Verdict.FAIL,
            inversions=_pi_total(out), exit_status=exit_status,
            reason="the watchdog found a deadlocked inversion group: priority inheritance "
                   "did not resolve the inversion",
            evidence=tuple(watchdog), kernel_log_lines=tuple(kernel),
        )
    check_console("pi_stress", f"{stdout}\n{stderr}", source)
    if exit_status != 0:
        raise RtTestsParseError(
            f"{source}: pi_stress exited with status {exit_status} without a deadlock "
            f"report; {'stderr' if err else 'output'}: {_quote(err or out)}")
    if err:
        line_no, line = err[0]
        raise RtTestsParseError(f"{source} (stderr):{line_no}: unexpected output {line[:80]!r}")

    total = duration = None
    for line_no, line in out:
        total_match = _PI_TOTAL.match(line)
        duration_match = _PI_DURATION.match(line)
        if total_match and total is None:
            total = int(total_match.group(1))
        elif duration_match and total is not None and duration is None:
            days, hours, minutes, seconds = (int(g) for g in duration_match.groups())
            duration = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
        else:
            raise RtTestsParseError(f"{source}:{line_no}: unexpected line {line[:80]!r}")
    if total is None or duration is None:
        missing = "'Total inversion performed:'" if total is None else "'Test Duration:'"
        last = out[-1][0] if out else 0
        raise RtTestsParseError(f"{source}: truncated after line {last}: no {missing} line")
    evidence = tuple(line for _, line in out)

    asked = _option_value(argv, "-D", "--duration") if argv is not None else None
    if asked is not None and duration < asked:
        raise RtTestsParseError(f"{source}: pi_stress stopped after {duration} s, "
                                f"{asked} s were asked for")
    run = None
    if json_text is not None:
        doc, run, json_kernel, fail = _load("pi_stress", json_text, f"{source} (JSON)", argv)
        if run.return_code != 0:
            raise fail(f"return_code {run.return_code} but pi_stress exited 0")
        inversions = Fields(doc, "", fail).integer("inversion")
        if inversions != total:
            raise fail(f"{inversions} inversions in the JSON, {total} in the summary")
    if total == 0:
        return FunctionalResult(
            source=source, tool="pi_stress", verdict=Verdict.INCONCLUSIVE, inversions=0,
            exit_status=exit_status, reason="no inversion was performed",
            evidence=evidence, run=run, kernel_log_lines=tuple(kernel),
        )
    return FunctionalResult(
        source=source, tool="pi_stress", verdict=Verdict.PASS, inversions=total,
        exit_status=exit_status,
        reason=f"{total} inversions in {duration} s resolved, no group deadlocked",
        evidence=evidence, run=run, kernel_log_lines=tuple(kernel),
    )


def _pi_total(lines: Iterable[tuple[int, str]]) -> int | None:
    for _, line in lines:
        match = _PI_TOTAL.match(line)
        if match:
            return int(match.group(1))
    return None


_PIP_PASS = "Successfully used priority inheritance to handle an inversion"
_PIP_NONE = "No inversion incurred"


def parse_pip_stress(
    stdout: str, source: str, *, exit_status: int, stderr: str = ""
) -> FunctionalResult:
    """The verdict of one pip_stress run: its single line decides, since the exit status
    is 0 either way. A non-zero status means it failed before the test (e.g. no
    permission for SCHED_FIFO) and raises."""
    require_int("exit_status", exit_status, -255, 255)
    out, kernel = _lines(stdout)
    err, err_kernel = _lines(stderr)
    check_console("pip_stress", f"{stdout}\n{stderr}", source)
    if exit_status != 0:
        raise RtTestsParseError(f"{source}: pip_stress exited with status {exit_status} "
                                f"before its test; {'stderr' if err else 'output'}: "
                                f"{_quote(err or out)}")
    if err:
        line_no, line = err[0]
        raise RtTestsParseError(f"{source} (stderr):{line_no}: unexpected output {line[:80]!r}")
    if not out:
        raise RtTestsParseError(f"{source}: no verdict line (empty or truncated output)")
    line_no, line = out[0]
    if line not in (_PIP_PASS, _PIP_NONE):
        raise RtTestsParseError(f"{source}:{line_no}: not a pip_stress verdict: {line[:80]!r}")
    if len(out) > 1:
        extra_no, extra = out[1]
        raise RtTestsParseError(f"{source}:{extra_no}: unexpected line after the verdict "
                                f"{extra[:80]!r}")
    passed = line == _PIP_PASS
    return FunctionalResult(
        source=source, tool="pip_stress",
        verdict=Verdict.PASS if passed else Verdict.INCONCLUSIVE,
        inversions=1 if passed else 0, exit_status=exit_status,
        reason="the inversion was resolved by priority inheritance" if passed
        else "the processes did not get into an inversion",
        evidence=(line,), kernel_log_lines=tuple(kernel + err_kernel),
    )


def hung(tool: str, source: str, *, timeout_s: float, stdout: str = "") -> FunctionalResult:
    """The verdict on a functional tool that had to be killed after ``timeout_s``: without
    priority inheritance its high-priority thread never gets the mutex."""
    if tool not in TESTS or not TESTS[tool].functional:
        raise ValueError(f"{tool!r} is not a functional test")
    out, kernel = _lines(stdout)
    return FunctionalResult(
        source=source, tool=tool, verdict=Verdict.FAIL, inversions=_pi_total(out),
        exit_status=None,
        reason=f"no result within {timeout_s:g} s: deadlocked (priority inheritance?)",
        evidence=tuple(line for _, line in out[-5:]), kernel_log_lines=tuple(kernel),
    )


def combine(results: Sequence[FunctionalResult]) -> FunctionalResult:
    """One verdict from repeated runs of one tool (pip_stress sets up its inversion only
    some of the time): any FAIL fails, else any PASS passes, else inconclusive."""
    if not results:
        raise ValueError("no results to combine")
    tools = {result.tool for result in results}
    if len(tools) != 1:
        raise ValueError(f"results of several tools: {sorted(tools)}")
    by_verdict = {verdict: [r for r in results if r.verdict == verdict] for verdict in Verdict}
    verdict = next(v for v in (Verdict.FAIL, Verdict.PASS, Verdict.INCONCLUSIVE)
                   if by_verdict[v])
    counts = [result.inversions for result in results]
    inversions = None if None in counts else sum(c for c in counts if c is not None)
    decisive = by_verdict[verdict]
    return FunctionalResult(
        source=", ".join(result.source for result in results), tool=tools.pop(),
        verdict=verdict, inversions=inversions, exit_status=decisive[0].exit_status,
        reason=f"{len(decisive)} of {len(results)} runs {verdict.value}: {decisive[0].reason}",
        evidence=tuple(line for result in decisive for line in result.evidence),
        kernel_log_lines=tuple(line for r in results for line in r.kernel_log_lines),
    )


def _quote(lines: Sequence[tuple[int, str]]) -> str:
    if not lines:
        return "(empty)"
    return " | ".join(line for _, line in lines[:3])[:200]


# -------------------------------------------------------------- on a board ----

# pip_stress sets up its inversion only now and then (1 of 23 runs on the emulated
# i.MX6Q): it is repeated until one run uses priority inheritance, at most this often
PIP_STRESS_RUNS = 20
PIP_STRESS_OUT = "/tmp/rtlab-pip_stress.out"
# a functional tool still running this long past its duration is deadlocked
HANG_MARGIN_S = 60
RUN_MARK = "rtlab-run-rc="
KILLED = 128 + 9


# where a board's rt-tests write their JSON (board_run's json_path)
RT_JSON_ON_BOARD = "/tmp/rtlab-rttest.json"


def rt_tool_wait_s(tool: str, duration_s: int) -> int:
    """How long a window of ``tool`` lasts: pip_stress has no duration of its own, and its
    repeated runs take well under a second."""
    return duration_s if TESTS[tool].duration else 1


@attr.frozen
class BoardRun:
    """How a tool runs on a board of ``cpus`` CPUs: the argv run in the background (its
    output goes to a file, nothing to the console), the tool's own command inside it, and
    what its JSON file must show."""

    tool: str
    argv: tuple[str, ...]
    tool_argv: tuple[str, ...]
    json_path: str | None
    expected_threads: int | None
    """None: the tool decides (signaltest's ring, pi_stress's groups)."""
    timeout_s: int | None = None
    """After how long the board kills a functional tool as deadlocked (None: never)."""


def board_run(tool: str, *, duration_s: int, cpus: int, priority: int,
              json_path: str) -> BoardRun:
    """The run of ``tool`` on a board. oslat measures CPUs 1.. (its main thread lives on
    CPU 0); pi_stress runs in a session of its own, because on a deadlock it kills its
    whole process group; the functional tools run under a ``timeout`` that turns a
    deadlock into exit status 137 (SIGKILL)."""
    if tool not in TESTS:
        raise ValueError(f"unknown rt-test {tool!r} (valid: {', '.join(TESTS)})")
    require_int("cpus", cpus, 1, None)
    timeout = ["timeout", "-s", "KILL", str(duration_s + HANG_MARGIN_S)]
    # the measuring tools start under SCHED_FIFO (fifo_from_start): no thread of theirs
    # is ever an ordinary task the loads could keep off its CPU
    if tool in ("ptsematest", "pmqtest", "sigwaittest"):
        argv = _pair_command(tool, duration_s, json_path, priority, 1000)
        return BoardRun(tool, tuple(fifo_from_start(argv, priority)), tuple(argv),
                        json_path, cpus)
    if tool == "signaltest":
        argv = signaltest_command(duration_s=duration_s, json_path=json_path,
                                  priority=priority)
        return BoardRun(tool, tuple(fifo_from_start(argv, priority)), tuple(argv),
                        json_path, None)
    if tool == "oslat":
        if cpus < 2:
            raise ValueError("oslat needs a CPU besides CPU 0, where its main thread runs")
        argv = oslat_command(duration_s=duration_s, json_path=json_path,
                             cpus=f"1-{cpus - 1}" if cpus > 2 else "1", priority=priority)
        return BoardRun(tool, tuple(fifo_from_start(argv, priority)), tuple(argv),
                        json_path, cpus - 1)
    if tool == "pi_stress":
        argv = pi_stress_command(duration_s=duration_s, json_path=json_path)
        return BoardRun(tool, ("setsid", *timeout, *argv), tuple(argv), json_path, None,
                        duration_s + HANG_MARGIN_S)
    argv = pip_stress_command()
    # Stop at the first run that used priority inheritance, failed or hung. Each run gets
    # a session of its own: deadlocked, its three processes (one spinning at SCHED_FIFO)
    # must all be killed, and timeout kills only the first; the rest would block the
    # loop (they hold its output) and spin beside the next cases.
    out, leader = PIP_STRESS_OUT, f"{PIP_STRESS_OUT}.pid"
    loop = (f"i=0; while [ $i -lt {PIP_STRESS_RUNS} ]; do i=$((i+1)); "
            f"{' '.join(timeout[:3])} {HANG_MARGIN_S} "
            f"setsid sh -c 'echo $$ >{leader}; exec {argv[0]}' >{out} 2>&1; rc=$?; "
            f"kill -KILL -$(cat {leader}) 2>/dev/null; "
            f'cat {out}; echo "{RUN_MARK}$rc"; '
            f'[ $rc -ne 0 ] && break; if grep -q "{_PIP_PASS}" {out}; then break; fi; done')
    return BoardRun(tool, ("sh", "-c", loop), tuple(argv), None, None, HANG_MARGIN_S)


def judge(run: BoardRun, *, exit_status: int, output: str, json_text: str | None,
          source: str) -> LatencyResult | FunctionalResult:
    """The result of a board run from its exit status, its console output (stdout and
    stderr together) and its JSON file. Raises :class:`RtTestsParseError` (or
    :class:`ToolUnsupported`) for anything that is not a complete run."""
    tool = run.tool
    if tool == "pip_stress":
        return combine(_pip_stress_runs(output, source))
    if tool == "pi_stress":
        if exit_status == KILLED:
            return hung(tool, source, timeout_s=run.timeout_s or HANG_MARGIN_S, stdout=output)
        # stdout and stderr come merged from the board
        result = parse_pi_stress(output, source, exit_status=exit_status,
                                 json_text=json_text, argv=run.tool_argv)
        if result.verdict is not Verdict.FAIL and json_text is None:
            # its JSON must agree with its summary before the run is called anything
            raise RtTestsParseError(f"{source}: pi_stress wrote no JSON file")
        return result
    check_console(tool, output, source)
    if exit_status != 0:
        raise RtTestsParseError(f"{source}: {tool} exited with status {exit_status}: "
                                f"{output.strip()[-200:]!r}")
    if json_text is None:
        raise RtTestsParseError(f"{source}: {tool} wrote no JSON file")
    where = f"{source}: {run.json_path}"
    if tool == "signaltest":
        return parse_signaltest_json(json_text, where, argv=run.tool_argv)
    if tool == "oslat":
        return parse_oslat_json(json_text, where, argv=run.tool_argv,
                                expected_threads=run.expected_threads)
    return parse_pair_json(tool, json_text, where, argv=run.tool_argv,
                           expected_threads=run.expected_threads)


def _pip_stress_runs(output: str, source: str) -> list[FunctionalResult]:
    results = []
    chunk: list[str] = []
    for line in output.replace("\r\n", "\n").split("\n"):
        if not line.startswith(RUN_MARK):
            chunk.append(line)
            continue
        status = line.removeprefix(RUN_MARK)
        if not status.isdigit():
            raise RtTestsParseError(f"{source}: garbled exit status line {line!r}")
        where = f"{source} (run {len(results) + 1})"
        text = "\n".join(chunk)
        if int(status) == KILLED:
            results.append(hung("pip_stress", where, timeout_s=HANG_MARGIN_S, stdout=text))
        else:
            results.append(parse_pip_stress(text, where, exit_status=int(status)))
        chunk = []
    trailing = [line for line in chunk if line.strip() and not KERNEL_LOG.match(line)]
    if trailing:
        raise RtTestsParseError(f"{source}: output after the last run's exit status "
                                f"(truncated?): {trailing[-1][:80]!r}")
    if not results:
        raise RtTestsParseError(f"{source}: no pip_stress run completed")
    return results
