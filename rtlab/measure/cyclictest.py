"""cyclictest (rt-tests 2.4): the command line a board runs, and strict parsers for what it
writes back: the ``--json`` summary and the ``-h`` histogram.

A latency gate is only as good as its input, so the parsers refuse anything truncated,
garbled or self-contradictory with a message naming the source and the place; they never
hand back part of a result as if it were all of it.

Facts about rt-tests 2.4 this module relies on (checked against the real binary):

* ``-S`` is ``-t -a`` (a thread pinned to each CPU) at one priority; it cannot be combined
  with ``-a`` (``-S -a 1`` ignores ``-a``, ``-a 1 -S`` is fatal), so a CPU subset is
  ``-t -a CPUSET``, which starts one thread per CPU of the set.
* ``-h US`` keeps a histogram of buckets 0..US-1 µs; a sample of US µs or more is only
  counted as an overflow. It also forces ``-d 0``: without ``-h``, thread N would run at
  interval + N*500 µs. ``-h`` above 1000000 is silently cut to 1000000.
* ``-h`` dumps the histogram to stdout after the run; ``--histfile=PATH`` dumps it to PATH
  instead, and with ``-q`` the console then only gets ``# /dev/cpu_dma_latency set to 0us``
  at the start. Besides the buckets the dump lists the cycle numbers of overflows (at most
  US of them per thread, then ``# NNNNN others``).
* ``--json`` holds per thread ``cycles`` (every sample, overflows included), ``min``,
  ``max``, ``avg`` (2 decimals), ``cpu``, ``node`` and, with ``-h``, the non-empty
  in-range buckets; the overflow count is not in it (it is ``cycles`` minus the buckets).
  Two keys are misspelt with a colon: ``"cmdline:"`` and ``"rt_test_version:"``. There is
  no ``parameters`` section; ``cmdline`` is the record of what was asked.
"""

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from fractions import Fraction

import attr

from rtlab.measure.sysinfo import cpu_list
from rtlab.util.jsonfields import Fields, no_constants, no_duplicates

CYCLICTEST = "cyclictest"
# cyclictest's own limit (HIST_MAX); asking for more is silently cut down
MAX_HISTOGRAM_US = 1_000_000
# the percentiles the gate reports, keyed as thresholds name them (p99_9 -> p99_9_us)
PERCENTILES: dict[str, Fraction] = {
    "p50": Fraction(50, 100),
    "p99": Fraction(99, 100),
    "p99_9": Fraction(999, 1000),
    "p99_99": Fraction(9999, 10000),
}

class CyclictestParseError(ValueError):
    """cyclictest output that cannot be trusted; the message starts with its source."""


def build_command(
    *,
    interval_us: int,
    duration_s: int,
    priority: int = 90,
    histogram_us: int = 400,
    json_path: str,
    histfile_path: str | None = None,
    affinity: str | None = None,
    breaktrace_us: int | None = None,
) -> list[str]:
    """The argv of one measurement: every CPU (or the CPUs of ``affinity``) at SCHED_FIFO
    ``priority``, memory locked, quiet, results to ``json_path``.

    ``breaktrace_us``: stop the kernel's trace at the first wake-up later than this, with
    a mark in it (``--breaktrace``, ``--tracemark``); cyclictest then ends the run and
    prints ``# Break thread:``/``# Break value:`` (rtlab.measure.trace reads them).

    Pass ``histfile_path``: without it the histogram (400 lines and up to 400 overflow
    cycle numbers per thread by default) is printed on the console after the run, where a
    serial line is slow and kernel messages get mixed into it.
    """
    require_int("interval_us", interval_us, 1, None)
    require_int("duration_s", duration_s, 1, None)
    require_int("priority", priority, 1, 99)
    require_int("histogram_us", histogram_us, 1, MAX_HISTOGRAM_US)
    if not json_path:
        raise ValueError("json_path must not be empty")
    if histfile_path is not None and not histfile_path:
        raise ValueError("histfile_path must not be empty (None for the console)")
    if affinity is None:
        cpus = ["-S"]
    else:
        if not _is_cpu_list(affinity):
            raise ValueError(f"affinity must be a CPU list like '1' or '0,2-3', got {affinity!r}")
        # -S would ignore -a (or abort, depending on the order): -t -a gives one pinned
        # thread per CPU of the set, and -h keeps them all at one priority
        cpus = ["-t", "-a", affinity]
    argv = [
        CYCLICTEST, *cpus, "-m", "-p", str(priority), "-i", str(interval_us),
        # no -d 0 here: -h already forces it, and naming it too makes cyclictest warn
        "-h", str(histogram_us), "-D", f"{duration_s}s", "-q", f"--json={json_path}",
    ]
    if histfile_path is not None:
        argv.append(f"--histfile={histfile_path}")
    if breaktrace_us is not None:
        require_int("breaktrace_us", breaktrace_us, 1, None)
        argv += [f"--breaktrace={breaktrace_us}", "--tracemark"]
    return argv


# where a board's cyclictest writes its results (build_command's paths on the board)
JSON_ON_BOARD = "/tmp/rtlab-cyclictest.json"
HIST_ON_BOARD = "/tmp/rtlab-cyclictest.hist"


def fifo_from_start(command: Sequence[str], priority: int) -> list[str]:
    """``command`` started under SCHED_FIFO ``priority`` (util-linux's ``chrt``, which
    execs it): its threads inherit the policy when they are created, so none of them is
    ever an ordinary task that the loads can keep off its CPU.

    Left alone, cyclictest and the other rt-tests start their threads at SCHED_OTHER and
    each raises itself only once it first runs: until then a loaded CPU can hold it off,
    and a thread that never got to run leaves a CPU without a wake-up, a failed case that
    says nothing about the kernel. Starting them at nice -20 shortened that window; this
    closes it."""
    require_int("priority", priority, 1, 99)
    if not command:
        raise ValueError("command must not be empty")
    return ["chrt", "-f", str(priority), *command]


def _is_cpu_list(text: str) -> bool:
    try:
        return bool(cpu_list(text))
    except ValueError:
        return False


def require_int(name: str, value: object, low: int, high: int | None) -> None:
    """Refuse a command parameter that is not an integer in low..high (None: no bound)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bound}, got {value}")


# ---------------------------------------------------------------- percentiles ----


@attr.frozen
class Percentile:
    """One percentile of a histogram, in whole µs (bucket N holds N.0 to N.999 µs).

    When the percentile falls among the overflows its value is unknown, only that it is at
    least ``range_us``: then ``value_us`` is None and ``above_range`` True.
    """

    name: str
    value_us: int | None
    above_range: bool
    range_us: int

    def __str__(self) -> str:
        if self.value_us is None:
            return f">= {self.range_us} µs"
        return f"{self.value_us} µs"


def percentiles(counts: Sequence[int], overflows: int) -> dict[str, Percentile]:
    """p50, p99, p99.9 and p99.99 by nearest rank over all samples, overflows included
    (leaving them out would make a bad tail look good)."""
    samples = sum(counts) + overflows
    if samples <= 0:
        raise ValueError("no samples to take percentiles of")
    result = {}
    for name, quantile in PERCENTILES.items():
        rank = nearest_rank(quantile, samples)
        value: int | None = None
        seen = 0
        for bucket, count in enumerate(counts):
            seen += count
            if seen >= rank:
                value = bucket
                break
        result[name] = Percentile(name, value, value is None, len(counts))
    return result


def nearest_rank(quantile: Fraction | float, samples: int) -> int:
    """The 1-based rank, among ``samples`` sorted values, of the ``quantile`` by nearest
    rank: the smallest value with at least that fraction of the samples at or below it.

    A float is read as the decimal it was written as (0.999 is 999/1000): its binary value
    can lie a hair above, and ``ceil`` would then take the next rank (0.9 * 10 -> 10).
    """
    exact = quantile if isinstance(quantile, Fraction) else Fraction(repr(float(quantile)))
    if not 0 < exact <= 1:
        raise ValueError(f"quantile must be in (0, 1], got {quantile}")
    return max(1, math.ceil(exact * samples))


# ----------------------------------------------------------------------- JSON ----


@attr.frozen
class CpuResult:
    """One measurement thread. ``cpu`` is None when the thread was not pinned."""

    thread: int
    cpu: int | None
    cycles: int
    min_us: int
    avg_us: float
    max_us: int
    # in-range buckets as the JSON has them (non-empty only); None without -h
    histogram: Mapping[int, int] | None
    histogram_range_us: int | None
    overflows: int | None

    def percentiles(self) -> dict[str, Percentile]:
        if self.histogram is None or self.histogram_range_us is None or self.overflows is None:
            raise ValueError(f"thread {self.thread} has no histogram (run without -h)")
        counts = [self.histogram.get(bucket, 0) for bucket in range(self.histogram_range_us)]
        return percentiles(counts, self.overflows)


@attr.frozen
class NoWakeup:
    """A measurement thread that recorded no wake-up in the whole run (cycles 0, average
    nan): kept off its CPU for the whole run, so that CPU has no figures."""

    thread: int
    cpu: int | None


@attr.frozen
class SysInfo:
    sysname: str
    nodename: str
    release: str
    version: str
    machine: str
    realtime: bool


@attr.frozen
class CyclictestResult:
    source: str
    file_version: int
    rt_test_version: str
    cmdline: str
    start_time: datetime
    end_time: datetime
    return_code: int
    sysinfo: SysInfo
    num_threads: int
    resolution_in_ns: int
    # the -h range read back from cmdline; None when the run had no histogram
    histogram_range_us: int | None
    cpus: tuple[CpuResult, ...]
    """The threads that measured, in thread order."""
    no_wakeup: tuple[NoWakeup, ...] = ()
    """The threads that recorded no wake-up: no figures for their CPUs."""

    @property
    def max_us(self) -> int | None:
        """The worst latency seen; None when no thread woke at all."""
        return max((cpu.max_us for cpu in self.cpus), default=None)


def combine(results: Sequence[CyclictestResult]) -> CyclictestResult:
    """The windows of one adaptive run as one run: per thread, the cycles and histograms
    added, the least minimum, the greatest maximum, the average weighted by cycles. A
    thread that woke in no window is a :class:`NoWakeup`; the windows must be runs of one
    command line (the same threads, CPUs and histogram range)."""
    if not results:
        raise ValueError("no windows to combine")
    first = results[0]
    for result in results[1:]:
        if (result.cmdline, result.num_threads) != (first.cmdline, first.num_threads):
            raise ValueError(f"{result.source}: not the same run as {first.source} "
                             f"({result.cmdline!r} vs {first.cmdline!r})")
    threads: dict[int, list[CpuResult]] = {}
    where: dict[int, int | None] = {}
    for result in results:
        for cpu in result.cpus:
            threads.setdefault(cpu.thread, []).append(cpu)
            where[cpu.thread] = cpu.cpu
        for silent in result.no_wakeup:
            threads.setdefault(silent.thread, [])
            where.setdefault(silent.thread, silent.cpu)
    cpus, silent = [], []
    for thread in sorted(threads):
        woke = threads[thread]
        if not woke:
            silent.append(NoWakeup(thread=thread, cpu=where[thread]))
            continue
        cycles = sum(cpu.cycles for cpu in woke)
        histogram = None
        if first.histogram_range_us is not None:
            histogram = {}
            for cpu in woke:
                for bucket, count in (cpu.histogram or {}).items():
                    histogram[bucket] = histogram.get(bucket, 0) + count
        cpus.append(CpuResult(
            thread=thread, cpu=where[thread], cycles=cycles,
            min_us=min(cpu.min_us for cpu in woke), max_us=max(cpu.max_us for cpu in woke),
            avg_us=sum(cpu.avg_us * cpu.cycles for cpu in woke) / cycles,
            histogram=histogram, histogram_range_us=first.histogram_range_us,
            overflows=(sum(cpu.overflows or 0 for cpu in woke)
                       if first.histogram_range_us is not None else None)))
    return attr.evolve(first, source=f"{first.source} and {len(results) - 1} more window(s)",
                       start_time=first.start_time, end_time=results[-1].end_time,
                       cpus=tuple(cpus), no_wakeup=tuple(silent))


def side_by_side(results: Sequence[CyclictestResult]) -> CyclictestResult:
    """Runs of several boards measured at once as one run whose threads are every board's
    own, in board order (board b's thread t is thread ``t + threads of the boards before``),
    CPU numbers kept: a limit or the tail is judged per board and CPU exactly as on one
    board, never on a mixture of boots. Boards may differ in their thread counts."""
    if not results:
        raise ValueError("no boards' runs to put side by side")
    cpus: list[CpuResult] = []
    silent: list[NoWakeup] = []
    offset = 0
    for result in results:
        cpus += [attr.evolve(cpu, thread=cpu.thread + offset) for cpu in result.cpus]
        silent += [attr.evolve(s, thread=s.thread + offset) for s in result.no_wakeup]
        offset += max([c.thread + 1 for c in result.cpus]
                      + [s.thread + 1 for s in result.no_wakeup] + [result.num_threads])
    ranges = {result.histogram_range_us for result in results}
    first = results[0]
    return attr.evolve(first, source=" and ".join(r.source for r in results),
                       start_time=min(r.start_time for r in results),
                       end_time=max(r.end_time for r in results), num_threads=offset,
                       histogram_range_us=ranges.pop() if len(ranges) == 1 else None,
                       cpus=tuple(cpus), no_wakeup=tuple(silent))


def parse_json(text: str, source: str, *, expected_threads: int | None = None) -> CyclictestResult:
    """Parse a ``--json`` file of rt-tests 2.4; ``expected_threads`` is the thread count the
    run asked for (the board's CPU count for ``-S``)."""

    def fail(what: str) -> CyclictestParseError:
        return CyclictestParseError(f"{source}: {what}")

    doc = _decode(text, fail)
    if not isinstance(doc, dict):
        raise fail(f"expected a JSON object at the top, got {type(doc).__name__}")

    fields = Fields(doc, "", fail)
    file_version = fields.integer("file_version", low=1)
    # rt-tests 2.4 writes these two keys with a stray colon; accept the fixed spelling too
    cmdline = fields.string("cmdline:", "cmdline")
    rt_test_version = fields.string("rt_test_version:", "rt_test_version")
    start_time, end_time = run_times(fields, fail)
    return_code = fields.integer("return_code", low=None)
    if return_code != 0:
        raise fail(f"cyclictest reported return_code {return_code}: the run failed")
    num_threads = fields.integer("num_threads", low=1)
    resolution_in_ns = fields.integer("resolution_in_ns")
    sysinfo = read_sysinfo(fields, fail)

    range_us = histogram_range(cmdline)
    threads = fields.mapping("thread")
    expected_keys = [str(index) for index in range(len(threads))]
    if sorted(threads, key=_thread_order) != expected_keys:
        raise fail(f"thread keys must be 0..{len(threads) - 1}, got {sorted(threads)}")
    if len(threads) != num_threads:
        raise fail(f"num_threads is {num_threads} but the thread section has {len(threads)}")
    if expected_threads is not None and num_threads != expected_threads:
        raise fail(f"{num_threads} threads measured, {expected_threads} requested")
    parsed = [_parse_thread(int(key), threads[key], range_us, fail) for key in expected_keys]
    return CyclictestResult(
        source=source, file_version=file_version, rt_test_version=rt_test_version,
        cmdline=cmdline, start_time=start_time, end_time=end_time, return_code=return_code,
        sysinfo=sysinfo, num_threads=num_threads, resolution_in_ns=resolution_in_ns,
        histogram_range_us=range_us,
        cpus=tuple(thread for thread in parsed if isinstance(thread, CpuResult)),
        no_wakeup=tuple(thread for thread in parsed if isinstance(thread, NoWakeup)),
    )


def _decode(text: str, fail: Callable[[str], CyclictestParseError]) -> object:
    try:
        try:
            return _load(text)
        except json.JSONDecodeError as error:
            if not _bare_nan(text, error):
                raise
            # rt-tests prints the average of a thread without samples (0/0) as a bare nan;
            # read it as null, which _parse_thread accepts only where cycles is 0
            text = _NAN_AVERAGE.sub(r"\1null", text)
            return _load(text)
    except json.JSONDecodeError as error:
        if _bare_nan(text, error):
            raise fail(f"line {error.lineno}: nan outside a thread's average") from error
        raise fail(f"invalid JSON at line {error.lineno} column {error.colno}: {error.msg}"
                   + (" (truncated?)" if error.pos >= len(text.rstrip()) else "")) from error
    except ValueError as error:
        raise fail(f"invalid JSON: {error}") from error


def _load(text: str) -> object:
    return json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constants)


def _bare_nan(text: str, error: json.JSONDecodeError) -> bool:
    return re.match(r"-?nan\b", text[error.pos:]) is not None


_NAN_AVERAGE = re.compile(r'("avg"\s*:\s*)-?nan\b')


def run_times(fields: Fields, fail: Callable[[str], Exception]) -> tuple[datetime, datetime]:
    """``start_time`` and ``end_time`` of an rt-tests JSON file, in order."""
    start_time = fields.date("start_time")
    end_time = fields.date("end_time")
    if end_time < start_time:
        raise fail(f"end_time {end_time} is before start_time {start_time}")
    return start_time, end_time


def read_sysinfo(fields: Fields, fail: Callable[[str], Exception]) -> SysInfo:
    """The ``sysinfo`` section every rt-tests JSON file has."""
    info = Fields(fields.mapping("sysinfo"), "sysinfo.", fail)
    realtime = info.integer("realtime")
    if realtime not in (0, 1):
        raise fail(f"sysinfo.realtime must be 0 or 1, got {realtime}")
    return SysInfo(
        sysname=info.string("sysname"), nodename=info.string("nodename"),
        release=info.string("release"), version=info.string("version"),
        machine=info.string("machine"), realtime=bool(realtime),
    )


def histogram_range(cmdline: str) -> int | None:
    """The ``-h``/``-H`` range a command line asked for (None if it asked for none).

    Options bundled with others (``-mh400``) are not recognised.
    """
    words = cmdline.split()
    for word, following in zip(words, [*words[1:], ""], strict=True):
        match = re.fullmatch(r"(?:-[hH]|--histogram=|--histofall=)(\d+)", word)
        if match:
            return min(int(match.group(1)), MAX_HISTOGRAM_US)
        if word in ("-h", "-H", "--histogram", "--histofall") and following.isdigit():
            return min(int(following), MAX_HISTOGRAM_US)
    return None


def _parse_thread(
    index: int, node: object, range_us: int | None, fail: Callable[[str], CyclictestParseError]
) -> "CpuResult | NoWakeup":
    where = f"thread.{index}."
    if not isinstance(node, dict):
        raise fail(f"thread {index} must be an object, got {type(node).__name__}")
    fields = Fields(node, where, fail)
    cycles = fields.integer("cycles")
    cpu = fields.integer("cpu", low=-1)
    max_us = fields.integer("max")
    if cycles == 0:
        # the thread never came back from its first sleep before cyclictest stopped it
        if node.get("avg") is not None or max_us != 0 or node.get("histogram"):
            raise fail(f"thread {index} has 0 cycles but figures or histogram samples")
        return NoWakeup(thread=index, cpu=None if cpu == -1 else cpu)
    if node.get("avg") is None:
        raise fail(f"thread {index} has {cycles} cycles but its average is nan")
    min_us = fields.integer("min")
    avg_us = fields.number("avg")
    if max_us < min_us:
        raise fail(f"thread {index}: max {max_us} < min {min_us}")
    # avg is printed with 2 decimals, so allow that much rounding
    if not min_us - 0.01 <= avg_us <= max_us + 0.01:
        raise fail(f"thread {index}: avg {avg_us} outside min {min_us}..max {max_us}")

    histogram: dict[int, int] | None = None
    overflows: int | None = None
    raw = node.get("histogram")
    if range_us is not None:
        if not isinstance(raw, dict):
            raise fail(f"thread {index}: the run had -h {range_us} but no histogram object")
        histogram = {}
        for key, count in raw.items():
            if not key.isdigit() or int(key) >= range_us:
                raise fail(f"thread {index}: histogram bucket {key!r} outside 0..{range_us - 1}")
            if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
                raise fail(f"thread {index}: histogram bucket {key} has count {count!r}")
            histogram[int(key)] = count
        in_range = sum(histogram.values())
        if in_range > cycles:
            raise fail(f"thread {index}: histogram holds {in_range} samples, cycles {cycles}")
        overflows = cycles - in_range
        # min and max are samples too, so they must sit in the buckets they name
        lowest = min(histogram, default=None)
        highest = max(histogram, default=None)
        if min_us < range_us and lowest != min_us:
            raise fail(f"thread {index}: min {min_us} but the lowest bucket is {lowest}")
        if max_us < range_us and (overflows or highest != max_us):
            raise fail(f"thread {index}: max {max_us} but the highest bucket is {highest} "
                       f"and {overflows} samples overflowed {range_us} µs")
        if max_us >= range_us and not overflows:
            raise fail(f"thread {index}: max {max_us} is past the {range_us} µs range "
                       "but nothing overflowed")
    return CpuResult(
        thread=index, cpu=None if cpu == -1 else cpu, cycles=cycles, min_us=min_us,
        avg_us=avg_us, max_us=max_us, histogram=histogram,
        histogram_range_us=None if histogram is None else range_us, overflows=overflows,
    )


def _thread_order(key: str) -> int:
    return int(key) if key.isdigit() else -1




# ------------------------------------------------------------------ histogram ----


@attr.frozen
class HistogramColumn:
    """One thread's column of a ``-h`` dump. Counts are per 1 µs bucket from 0; ``total``
    is the in-range samples (cyclictest's ``# Total:``), overflows come on top."""

    thread: int
    counts: tuple[int, ...]
    total: int
    overflows: int
    min_us: int
    # cyclictest prints the average cut to whole µs
    avg_us: int
    max_us: int
    overflow_cycles: tuple[int, ...]
    # overflows past the listed cycle numbers (cyclictest lists at most range_us of them)
    overflow_cycles_unlisted: int

    @property
    def samples(self) -> int:
        return self.total + self.overflows

    def percentiles(self) -> dict[str, Percentile]:
        return percentiles(self.counts, self.overflows)


@attr.frozen
class Histogram:
    """A ``-h`` dump: one column per thread (with ``-S``, thread N runs on CPU N; the
    JSON of the same run gives the mapping)."""

    source: str
    range_us: int
    columns: tuple[HistogramColumn, ...]
    # -H/--histofall dumps carry a sum column; it was checked and dropped
    histofall: bool
    # (line number, text) of kernel messages found among the lines and left out
    kernel_log_lines: tuple[tuple[int, str], ...]


# a kernel message on the console, as printk prints it (with or without its level)
KERNEL_LOG = re.compile(r"^(<\d+>)?\[\s*\d+\.\d+\]")
_BUCKET = re.compile(r"^(\d{6,}) (\d+(?:\s+\d+)*)\s*$")
_TRAILER = {
    "Total": "# Total:",
    "Min": "# Min Latencies:",
    "Avg": "# Avg Latencies:",
    "Max": "# Max Latencies:",
    "Overflows": "# Histogram Overflows:",
}
_PREAMBLE = re.compile(r"^# /dev/cpu_dma_latency set to \d+us$")
_THREAD = re.compile(r"^# Thread (\d+):((?: \d+)*)(?: # (\d+) others)?\s*$")


def parse_histogram(text: str, source: str) -> Histogram:
    """Parse the histogram of ``-h`` (from ``--histfile`` or the console).

    Kernel messages on their own lines (``[  123.456789] ...``) are dropped and recorded;
    any other line that is not part of the dump is refused with its line number, and so
    is a dump whose trailer is missing or disagrees with its buckets.
    """

    def fail(line_no: int | None, what: str) -> CyclictestParseError:
        where = f"{source}:{line_no}" if line_no is not None else source
        return CyclictestParseError(f"{where}: {what}")

    kernel_lines: list[tuple[int, str]] = []
    buckets: list[tuple[int, list[int]]] = []
    trailer: dict[str, tuple[int, list[int]]] = {}
    threads: dict[int, tuple[int, list[int], int]] = {}
    state = "preamble"
    last_line = 0
    for line_no, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        if KERNEL_LOG.match(line):
            kernel_lines.append((line_no, line))
            continue
        last_line = line_no
        if state == "preamble":
            if _PREAMBLE.match(line):
                continue
            if line != "# Histogram":
                raise fail(line_no, f"expected '# Histogram', got {line[:80]!r}")
            state = "buckets"
            continue
        if state == "buckets":
            match = _BUCKET.match(line)
            if match:
                bucket = int(match.group(1))
                expected = len(buckets)
                if bucket != expected:
                    raise fail(line_no, f"bucket {bucket} where bucket {expected} belongs "
                                        "(a line was lost or garbled)")
                buckets.append((line_no, [int(v) for v in match.group(2).split()]))
                continue
            state = "trailer"
        if state == "trailer":
            for key, prefix in _TRAILER.items():
                if line.startswith(prefix):
                    if key in trailer:
                        raise fail(line_no, f"second '{prefix}' line")
                    values = line[len(prefix):].split()
                    if not all(value.isdigit() for value in values):
                        raise fail(line_no, f"non-numeric values in {line[:80]!r}")
                    trailer[key] = (line_no, [int(value) for value in values])
                    break
            else:
                if line == "# Histogram Overflow at cycle number:":
                    state = "threads"
                    continue
                raise fail(line_no, f"unexpected line {line[:80]!r}")
            continue
        if state == "threads":
            match = _THREAD.match(line)
            if not match:
                raise fail(line_no, f"expected '# Thread N: ...', got {line[:80]!r}")
            thread = int(match.group(1))
            if thread != len(threads):
                raise fail(line_no, f"'# Thread {thread}:' where thread {len(threads)} belongs")
            cycles = [int(value) for value in match.group(2).split()]
            threads[thread] = (line_no, cycles, int(match.group(3) or 0))
            continue

    if state == "preamble":
        raise fail(None, "no '# Histogram' line: not a cyclictest -h dump")
    if not buckets:
        raise fail(None, "no histogram buckets")
    for key, prefix in _TRAILER.items():
        if key not in trailer:
            raise fail(None, f"truncated after line {last_line}: no '{prefix}' line")
    if state != "threads":
        raise fail(None, f"truncated after line {last_line}: no overflow cycle numbers")
    return _assemble(source, buckets, trailer, threads, kernel_lines, fail)


def _assemble(
    source: str,
    buckets: list[tuple[int, list[int]]],
    trailer: dict[str, tuple[int, list[int]]],
    threads: dict[int, tuple[int, list[int], int]],
    kernel_lines: list[tuple[int, str]],
    fail: Callable[[int | None, str], CyclictestParseError],
) -> Histogram:
    # Min and Avg never get the -H sum column, so they give the thread count
    count = len(trailer["Min"][1])
    if count == 0:
        raise fail(trailer["Min"][0], "no threads in '# Min Latencies:'")
    if len(trailer["Avg"][1]) != count:
        raise fail(trailer["Avg"][0], f"{len(trailer['Avg'][1])} averages for {count} threads")
    width = len(buckets[0][1])
    histofall = count > 1 and width == count + 1
    if width not in (count, count + 1) or (width == count + 1 and not histofall):
        raise fail(buckets[0][0], f"{width} columns for {count} threads")
    for line_no, values in buckets:
        if len(values) != width:
            raise fail(line_no, f"{len(values)} columns where the others have {width}")
        if histofall and sum(values[:count]) != values[count]:
            raise fail(line_no, "the -H sum column is not the sum of the threads")
    for key in ("Total", "Max", "Overflows"):
        line_no, values = trailer[key]
        if len(values) != width:
            raise fail(line_no, f"{len(values)} values in '{_TRAILER[key]}' for {width} columns")
    if len(threads) != count:
        last = max((line for line, _, _ in threads.values()), default=trailer["Overflows"][0])
        raise fail(None, f"truncated after line {last}: overflow cycle numbers for "
                         f"{len(threads)} of {count} threads")

    columns = []
    for index in range(count):
        counts = tuple(values[index] for _, values in buckets)
        total = trailer["Total"][1][index]
        overflows = trailer["Overflows"][1][index]
        min_us = trailer["Min"][1][index]
        max_us = trailer["Max"][1][index]
        if sum(counts) != total:
            raise fail(trailer["Total"][0], f"thread {index}: buckets add up to {sum(counts)} "
                                            f"but '# Total:' says {total}")
        if total + overflows == 0:
            raise fail(trailer["Total"][0], f"thread {index} has no samples")
        if max_us < min_us:
            raise fail(trailer["Max"][0], f"thread {index}: max {max_us} < min {min_us}")
        # min and max are samples too, so they must sit in the buckets they name
        used = [bucket for bucket, count in enumerate(counts) if count]
        lowest, highest = (used[0], used[-1]) if used else (None, None)
        if min_us < len(counts) and lowest != min_us:
            raise fail(trailer["Min"][0], f"thread {index}: min {min_us} but the lowest "
                                          f"bucket is {lowest}")
        if max_us < len(counts) and (overflows or highest != max_us):
            raise fail(trailer["Max"][0], f"thread {index}: max {max_us} but the highest "
                                          f"bucket is {highest} and {overflows} overflowed")
        if max_us >= len(counts) and not overflows:
            raise fail(trailer["Max"][0], f"thread {index}: max {max_us} is past the "
                                          f"{len(counts)} µs range but nothing overflowed")
        line_no, cycles, unlisted = threads[index]
        if len(cycles) + unlisted != overflows:
            raise fail(line_no, f"thread {index}: {len(cycles)} + {unlisted} overflow cycles "
                                f"listed but {overflows} overflows counted (truncated?)")
        columns.append(HistogramColumn(
            thread=index, counts=counts, total=total, overflows=overflows, min_us=min_us,
            avg_us=trailer["Avg"][1][index], max_us=max_us, overflow_cycles=tuple(cycles),
            overflow_cycles_unlisted=unlisted,
        ))
    if histofall:
        for key, combine in (("Total", sum), ("Max", max), ("Overflows", sum)):
            line_no, values = trailer[key]
            if combine(values[:count]) != values[count]:
                raise fail(line_no, f"the -H column of '{_TRAILER[key]}' does not match")
    return Histogram(
        source=source, range_us=len(buckets), columns=tuple(columns), histofall=histofall,
        kernel_log_lines=tuple(kernel_lines),
    )


def cross_check(result: CyclictestResult, histogram: Histogram) -> None:
    """Refuse a JSON summary and a histogram that cannot come from the same run."""

    def fail(what: str) -> CyclictestParseError:
        return CyclictestParseError(f"{histogram.source} vs {result.source}: {what}")

    if len(histogram.columns) != len(result.cpus):
        raise fail(f"{len(histogram.columns)} histogram threads, {len(result.cpus)} in JSON")
    if result.histogram_range_us not in (None, histogram.range_us):
        raise fail(f"histogram range {histogram.range_us} µs, JSON command line asked for "
                   f"{result.histogram_range_us} µs")
    for column, cpu in zip(histogram.columns, result.cpus, strict=True):
        mine = (column.samples, column.min_us, column.max_us)
        theirs = (cpu.cycles, cpu.min_us, cpu.max_us)
        if mine != theirs:
            raise fail(f"thread {cpu.thread}: samples/min/max {mine} in the histogram, "
                       f"{theirs} in JSON")
