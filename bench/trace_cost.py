"""What a trace on breach costs on a board, and whether the alternatives work there: the
figures behind docs/tracing.md's choice.

On one place of a running rack (the virtual one by default; `rtlab vlab start` first, and
on the virtual rack under `flock /tmp/vlab.lock`), with the board flashed and booted by
rtlab's strategy, it measures for each tracer (none, the events alone, the function
tracer):

- an idle cyclictest window with the tracer running and no break: wake-ups, average and
  maximum latency, and how many events per second the kernel's buffer took (and lost);
- the same with a break at a deliberately low limit: how soon it broke, the time to
  compress the trace and copy it back (labgrid's get_bytes), its size, and the breach as
  rtlab reads it;

and then `rtla timerlat top -a LIMIT` (the kernel's own tool) with the same limit: whether
it runs on this kernel, how soon it stops, and the size of the trace it saves.

    flock /tmp/vlab.lock .venv/bin/python bench/trace_cost.py \\
        --image .cache/images/imx6q-rt/sdcard.img [--place imx6q-01] [--seconds 10] \\
        [--limit-us 50] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from rtlab.lab import client as labgrid_client
from rtlab.measure import cyclictest, trace
from rtlab.util.paths import REPO_ROOT

JSON = "/tmp/rtlab-bench.json"


def run_cyclictest(shell: trace.Shell, seconds: int,
                   break_us: int | None) -> tuple[cyclictest.CyclictestResult, float, str]:
    argv = cyclictest.fifo_from_start(cyclictest.build_command(
        interval_us=1000, duration_s=seconds, json_path=JSON, breaktrace_us=break_us), 90)
    started = time.monotonic()
    output = shell.run_check(" ".join(argv) + " 2>&1", timeout=seconds + 300)
    wall = time.monotonic() - started
    # a run that broke early leaves threads without a wake-up: their average is a bare nan
    result = cyclictest.parse_json("\n".join(shell.run_check(f"cat {JSON}")), JSON)
    return result, wall, "\n".join(output)


def buffer_stats(shell: trace.Shell) -> tuple[int, int]:
    """Entries kept and lost (overrun) over every CPU's buffer."""
    entries = overrun = 0
    for line in shell.run_check(f"cat {trace.TRACEFS_DIRS[0]}/per_cpu/cpu*/stats"):
        key, _, value = line.partition(":")
        if key.strip() == "entries":
            entries += int(value)
        elif key.strip() == "overrun":
            overrun += int(value)
    return entries, overrun


def figures(result: cyclictest.CyclictestResult) -> str:
    cycles = sum(cpu.cycles for cpu in result.cpus)
    avg = statistics.mean(cpu.avg_us for cpu in result.cpus) if result.cpus else float("nan")
    silent = f", {len(result.no_wakeup)} CPU(s) without a wake-up" if result.no_wakeup else ""
    return f"{cycles} wake-ups, avg {avg:.0f} µs, max {result.max_us} µs{silent}"


def measure(shell: trace.Shell, tracer: str | None, seconds: int, limit_us: int,
            keep: Path | None) -> None:
    label = tracer or "none"
    settings = trace.TraceSettings(tracer=tracer or "nop")
    if tracer is not None:
        support = trace.prepare(shell, settings)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / "probe.txt").write_text("\n".join(
                shell.run_check(f"sh {trace.TRACE_SCRIPT} probe")) + "\n")
        if not support.available:
            print(f"{label}: no trace possible: {support.reason}")
            return
    doc, wall, _ = run_cyclictest(shell, seconds, None)
    line = f"{label:9} no break: {figures(doc)} in {wall:.1f} s"
    if tracer is not None:
        entries, lost = buffer_stats(shell)
        line += f"; {entries / seconds:.0f} events/s kept, {lost} lost to the ring"
    print(line)
    if tracer is None:
        return
    trace.prepare(shell, settings)
    doc, wall, output = run_cyclictest(shell, seconds, limit_us)
    broke = trace.parse_break(output)
    if broke is None:
        print(f"{label:9} break at {limit_us} µs: no wake-up passed it ({figures(doc)})")
        trace.disarm(shell)
        return
    started = time.monotonic()
    collected = trace.collect(shell, settings)
    spent = time.monotonic() - started
    breach = trace.read_collected(collected.data, f"bench-{label}", broke)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"{label}.trace.gz").write_bytes(collected.data)
        (keep / f"{label}.cyclictest.out").write_text(output + "\n")
    print(f"{label:9} break at {limit_us} µs after {wall:.1f} s: {len(collected.data)} bytes "
          f"gzip, {collected.lines} lines{' (cut)' if collected.cut else ''}, brought back "
          f"in {spent:.1f} s\n{'':10}{breach.summary()}")
    trace.disarm(shell)


def rtla_timerlat(shell: trace.Shell, seconds: int, limit_us: int) -> None:
    started = time.monotonic()
    out, _, code = shell.run(f"cd /tmp && rtla timerlat top -a {limit_us} -d {seconds}s -q "
                             "2>&1 | tail -n 25", timeout=seconds + 300)
    wall = time.monotonic() - started
    saved = shell.run_check("wc -lc </tmp/timerlat_trace.txt 2>/dev/null; gzip -c "
                            "/tmp/timerlat_trace.txt 2>/dev/null | wc -c")
    print(f"rtla timerlat top -a {limit_us}: exit {code} after {wall:.1f} s; saved trace "
          f"(lines bytes / gzip bytes): {' / '.join(saved) or 'none'}")
    for line in out:
        print(f"{'':10}{line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", required=True, type=Path)
    parser.add_argument("--place", default="imx6q-01")
    parser.add_argument("--env", default=str(REPO_ROOT / "env" / "virtual.yaml"))
    parser.add_argument("--coordinator", default="127.0.0.1:20408")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--limit-us", type=int, default=50)
    parser.add_argument("--probe-only", action="store_true",
                        help="only what the board offers for a trace (a locked-down board)")
    parser.add_argument("--keep", type=Path, help="keep each tracer's trace and cyclictest's "
                        "output in this folder (tests/data/trace/ was captured so)")
    args = parser.parse_args()
    os.environ.update(LG_PLACE=args.place, LG_IMAGE=str(args.image.resolve()),
                      LG_COORDINATOR=args.coordinator)
    from labgrid import Environment

    labgrid_client.run(args.coordinator, "acquire", place=args.place)
    strategy = None
    try:
        target = Environment(args.env).get_target("main")
        strategy = target.get_driver("RTLabStrategy")
        started = time.monotonic()
        shell = strategy.ensure_shell()
        print(f"{args.place}: flashed and booted in {time.monotonic() - started:.0f} s: "
              + " ".join(shell.run_check("uname -rv")))
        if args.probe_only:
            measure(shell, "nop", 0, args.limit_us, args.keep)
            return 0
        for tracer in (None, "nop", "function"):
            measure(shell, tracer, args.seconds, args.limit_us, args.keep)
        rtla_timerlat(shell, args.seconds, args.limit_us)
    finally:
        if strategy is not None:
            strategy.cleanup()
        labgrid_client.run(args.coordinator, "release", place=args.place)
    return 0


if __name__ == "__main__":
    sys.exit(main())
