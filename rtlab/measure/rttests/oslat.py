"""oslat: busy-loop OS noise per CPU, parsed from its ``--json`` file (histogram included).

Facts about rt-tests 2.4 this module relies on (checked on the virtual boards, see
tests/data/rttests/README.md, and in the rt-tests sources where a board cannot show them):

* oslat exits 0 having printed only "This architecture is not yet supported..." on armhf
  (no cycle counter in 2.4); it works on arm64. Its histogram buckets are 1 µs wide, keyed
  by the upper bound; the last bucket also counts the overflows; empty buckets are left
  out of the JSON. With SCHED_FIFO busy loops on CPU 0 (where its main thread runs) it
  hung on the emulated Pi, as its own warning says it may.
"""

from collections.abc import Mapping, Sequence

import attr

from rtlab.measure.cyclictest import require_int
from rtlab.measure.rttests import (
    LatencyResult,
    ThreadLatency,
    _fill,
    _load,
    _option_value,
    _require_path,
    _threads,
)
from rtlab.measure.sysinfo import cpu_list
from rtlab.util.jsonfields import Fields


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


@attr.frozen
class OslatCpu(ThreadLatency):
    """One oslat CPU; ``samples`` is the number of loop iterations measured."""

    freq_mhz: int
    duration_s: float
    # bucket upper bound in µs -> count; the last bucket also holds the overflows
    histogram: Mapping[int, int]
    buckets: int


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
