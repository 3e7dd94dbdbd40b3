"""ptsematest, pmqtest and sigwaittest: one sender/receiver pair per CPU, the same
options and the same ``--json`` schema, so one command builder and one parser for the three.

Facts about rt-tests 2.4 this module relies on (checked on the virtual boards, see
tests/data/rttests/README.md, and in the rt-tests sources where a board cannot show them):

* sigwaittest has no ``-S`` (an unknown option makes it print its usage and exit 0), so one
  pair per CPU is ``-t -a``, which lowers the priority by one per pair (90, 89, ...).
* ptsematest/pmqtest/sigwaittest: per pair a sender (``samples``: messages sent) and a
  receiver (min/avg/max of the wake-up latency). ``-i`` is pair 0's interval, each further
  pair ``-d`` (500 µs) slower. The ``-q`` console summary is taken before the threads stop,
  so its cycle counts lag the JSON by a few.
"""

from collections.abc import Sequence

import attr

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


def _cpu(value: int) -> int | None:
    return None if value == -1 else value
