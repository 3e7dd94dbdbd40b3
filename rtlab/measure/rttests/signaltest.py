"""signaltest: a signal passed round a ring of threads, parsed from its ``--json`` file.

Facts about rt-tests 2.4 this module relies on (checked on the virtual boards, see
tests/data/rttests/README.md, and in the rt-tests sources where a board cannot show them):

* signaltest passes a signal round a ring of ``-t`` threads; thread 0 sleeps 10 ms after
  every 16 round trips, outside its own measurement but inside every other thread's, so
  only thread 0's figures are the round-trip latency. Its JSON gives every thread thread
  0's ``cpu``, so the CPU is not reported.
"""

from collections.abc import Sequence

from rtlab.measure.cyclictest import require_int
from rtlab.measure.rttests import (
    LatencyResult,
    ThreadLatency,
    _fill,
    _load,
    _min_avg_max,
    _require_path,
    _threads,
)
from rtlab.util.jsonfields import Fields


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
