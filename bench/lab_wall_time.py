"""How long a lab's test stage takes for one board × flavour, with 1, 2, 4 and 8 boards of
the type sharing its cases, fixed hour per case against adaptive runs, and with one board
failing mid-run; and, for 4 boards of a type in the gate tier, sharding (each case on one
board) against replication (each case on every board for a share of its hour) at equal
board-hours.

No QEMU: each place is a thread that works through the plan with the real scheduling code
(rtlab.run.queue on a SQLite results store: claims, a failing place leaving the rest to
the others), and "measures" a case by sleeping its board time on an accelerated clock. A
fixed case takes the hour; an adaptive case takes what rtlab.verdict.sequential decides on
simulated windows of the case (bench/adaptive_quality.py's simulation of an unchanged
kernel on the recorded x86 source at the case's interval, each case at the gate's
case_confidence(0.01, 16); rt-tests run the hour). Every place first flashes and boots
(3 min), and again after each failure.

Sharding against replication (issue 31): sharding puts each case on one board through the
queue, a fixed hour or an adaptive run (on the recorded x86 source, and on the light
source whose boots also vary the tail's scale by log-sd 0.10, bench/latency_families.py:
the spread that keeps an adaptive run from stopping early); replication
(rtlab.run.pooling, ``--spread replicate``, the gate tier's default) has every board
measure every case for the cap's k-th share and needs no queue: the boards flash and
boot, then measure the cases one after another in step. Printed side by side: the test
stage's wall time, the board-hours it takes (flashing and booting included), and what
each case's verdict rests on: its wake-ups and its boots. The strength each buys is
bench/rack_strength.py's.

    .venv/bin/python bench/lab_wall_time.py [--quick] [--cases full|gate] [--speedup 20000]
                                            [--rack-speedup 1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import adaptive_quality as aq  # noqa: E402
import latency_families as lf  # noqa: E402
import verdict_quality as vq  # noqa: E402

from rtlab.measure.suite import case_name, load_suite  # noqa: E402
from rtlab.run.queue import CaseQueue, leftovers  # noqa: E402
from rtlab.store import open_store  # noqa: E402
from rtlab.verdict.case import case_confidence  # noqa: E402
from rtlab.verdict.sequential import SequentialPolicy  # noqa: E402

CAP_S = 3600
BOOT_S = 180
BOARDS = (1, 2, 4, 8)
SOURCE = 2  # recorded x86 cpu
# sharding against replication: the boards of a type, the tier, the stages averaged
RACK = 4
RACK_TIER = "gate"


def plan_cases(tier: str) -> list[tuple[str, int | None]]:
    """(case name, interval µs or None for an rt-test) of one board × flavour."""
    suite = load_suite()
    chosen = suite.tier(tier)
    if chosen is None:
        latency = [(s, i) for s in suite.scenarios for i in suite.intervals_us]
        tools = list(suite.rt_tests)
    else:
        latency, tools = list(chosen.latency), list(chosen.rt_tests)
    return ([(case_name(s, i), i) for s, i in latency]
            + [(tool, None) for tool in tools])


def adaptive_seconds(cases: list[tuple[str, int | None]], seed: int,
                     model: vq.Model | lf.Family | None = None) -> dict[str, float]:
    """Each case's board time when it runs adaptively on an unchanged kernel (of ``model``,
    default the recorded x86 source)."""
    model = model or vq.sources()[SOURCE]
    rng = np.random.default_rng(seed)
    policy = SequentialPolicy(window_s=aq.WINDOW_S, cap_s=CAP_S,
                              confidence=case_confidence(aq.PIPELINE_FALSE_FAIL, aq.CASES))
    seconds = {}
    with np.errstate(over="ignore", invalid="ignore"):
        for name, interval in cases:
            if interval is None:
                seconds[name] = CAP_S
                continue
            n_hour = int(CAP_S * 1e6 / interval) * aq.CPUS
            limit = aq.limit_for(model, n_hour, np.random.default_rng(interval))
            baseline = [model.histogram(n_hour, rng) for _ in range(aq.BASELINE_RUNS)]
            trial = aq.one_run(model, policy, None, interval, 1.0, baseline,  # type: ignore[arg-type]
                               limit, rng)
            seconds[name] = trial.seconds
    return seconds


def stage(label: str, cases: list[tuple[str, int | None]], seconds: dict[str, float],
          boards: int, speedup: float, failing: bool, folder: Path) -> tuple[float, dict[str, int]]:
    """The board time from the first boot to the last case's end, and how many cases each
    place measured; with ``failing``, place 0 fails on its third case."""
    store = open_store(f"sqlite:///{folder / f'{label}-{boards}.db'}")
    names = [name for name, _ in cases]
    if label != "fixed":
        # as rtlab run --window orders them (Selection.test_paths): the rt-tests first
        names.sort(key=lambda name: dict(cases)[name] is not None)
    plan = f"bench-{label}-{boards}"
    measured: dict[str, int] = {}
    begin = time.monotonic()

    def place(index: int) -> None:
        queue = CaseQueue(store, plan, f"board-{index}")
        queue.offer(names)
        time.sleep(BOOT_S / speedup)
        done = 0
        failed = False
        for name in names:
            if not queue.claim(name):
                continue
            if failing and index == 0 and done == 2 and not failed:
                failed = True
                queue.finish(name, "error")
                if queue.leave_after_error("injected failure"):
                    break
                time.sleep(BOOT_S / speedup)  # the last place boots again and goes on
                continue
            time.sleep(seconds[name] / speedup)
            queue.finish(name, "pass")
            done += 1
        measured[f"board-{index}"] = done
        queue.done()

    threads = [threading.Thread(target=place, args=(i,)) for i in range(boards)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = (time.monotonic() - begin) * speedup
    left = leftovers(store, plan)
    store.close()
    if left:
        raise AssertionError(f"cases left without a verdict: {left}")
    return wall, measured


def wakeups(seconds: float, interval_us: int) -> float:
    return seconds * 1e6 / interval_us * aq.CPUS


def replicated_stage(cases: list[tuple[str, int | None]], boards: int) -> float:
    """Replication's test stage (rtlab.run.pooling): every board flashes and boots, then
    measures every case for the cap's share, the boards in step; no queue."""
    return BOOT_S + len(cases) * CAP_S / boards


def sharding_against_replication(speedup: float, repeats: int, folder: Path) -> None:
    """The gate tier on RACK boards: sharded (the queue; a fixed hour, or adaptive on two
    sources) against replicated, at equal board-hours."""
    cases = plan_cases(RACK_TIER)
    latency = [(name, interval) for name, interval in cases if interval is not None]
    booted = lf.rack_families()[-1]
    sources = (("recorded x86 cpu", None),
               (f"light, boot tail sd {booted.tail_sd:.2f}", booted))
    print(f"\n== sharding against replication: {len(cases)} cases of tier {RACK_TIER!r} "
          f"({', '.join(name for name, _ in cases)}) on {RACK} boards of a type; "
          f"{BOOT_S // 60} min to flash and boot; the adaptive rows the mean of {repeats} "
          "stages, each its own draw of the cases' stop times")
    print(f"  {'spread':<62} {'wall h':>7} {'board-h':>8} {'per case: wake-ups':>36} "
          f"{'min':>6} {'boots':>5}")

    def per_case(minutes: dict[int, float]) -> str:
        return ", ".join(f"{wakeups(m * 60, interval) / 1e6:.3g} M at {interval} µs"
                         for interval, m in sorted(minutes.items()))

    def minutes_by_interval(seconds: dict[str, float]) -> dict[int, float]:
        return {interval: float(np.mean([seconds[n] for n, i in latency if i == interval]))
                / 60 for interval in sorted({i for _, i in latency if i is not None})}

    fixed = {name: float(CAP_S) for name, _ in cases}
    wall, _ = stage("shard-fixed", cases, fixed, RACK, speedup, False, folder)
    hours = (sum(fixed.values()) + RACK * BOOT_S) / 3600
    by_interval = minutes_by_interval(fixed)
    print(f"  {'sharded, fixed hour (1 board a case)':<62} {wall / 3600:>7.2f} {hours:>8.2f} "
          f"{per_case(by_interval):>36} {CAP_S / 60:>6.0f} {1:>5}")
    for label, model in sources:
        walls, spent, drawn = [], [], []
        for repeat in range(repeats):
            seconds = adaptive_seconds(cases, seed=100 + repeat, model=model)
            wall, _ = stage(f"shard-adaptive-{repeat}-{len(walls)}-{label[:5]}", cases,
                            seconds, RACK, speedup, False, folder)
            walls.append(wall)
            spent.append((sum(seconds.values()) + RACK * BOOT_S) / 3600)
            drawn.append(seconds)
        mean_seconds = {name: float(np.mean([d[name] for d in drawn])) for name, _ in cases}
        by_interval = minutes_by_interval(mean_seconds)
        print(f"  {'sharded, adaptive (1 board a case): ' + label:<62} "
              f"{np.mean(walls) / 3600:>7.2f} {np.mean(spent):>8.2f} {per_case(by_interval):>36} "
              f"{np.mean(list(mean_seconds.values())) / 60:>6.1f} {1:>5}")
    wall = replicated_stage(cases, RACK)
    hours = (len(cases) * CAP_S + RACK * BOOT_S) / 3600
    by_interval = minutes_by_interval(fixed)
    print(f"  {f'replicated, {RACK} boards × {CAP_S // 60 // RACK} min a case':<62} "
          f"{wall / 3600:>7.2f} {hours:>8.2f} {per_case(by_interval):>36} "
          f"{CAP_S / 60 / RACK:>6.0f} {RACK:>5}")
    print(f"  (min: board time to a case's verdict, for replication each board's share, all "
          f"{RACK} at once; a replicated case's verdict comes {CAP_S // 60 // RACK} min after "
          "its start, the last one's at the stage's end)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="the boards table on the gate tier (4 cases), one adaptive draw "
                             "per source in the sharding comparison")
    parser.add_argument("--cases", help="suite.yaml tier of the boards table (default: full, "
                                        "--quick: gate)")
    parser.add_argument("--speedup", type=float,
                        help="board seconds per wall second of the boards table (default "
                             "20000, --quick 2000: the fewer cases, the more a loaded "
                             "host's scheduling delays weigh)")
    parser.add_argument("--rack-speedup", type=float, default=1000,
                        help="the same for the sharding comparison (default 1000)")
    parser.add_argument("--repeats", type=int,
                        help="stages averaged per adaptive row of the sharding comparison "
                             "(default 5, --quick 2)")
    options = parser.parse_args()
    options.cases = options.cases or ("gate" if options.quick else "full")
    repeats = options.repeats or (2 if options.quick else 5)
    options.speedup = options.speedup or (2000 if options.quick else 20000)
    cases = plan_cases(options.cases)
    started = time.monotonic()
    adaptive = adaptive_seconds(cases, seed=5)
    fixed = {name: float(CAP_S) for name, _ in cases}
    print(f"{len(cases)} cases of tier {options.cases!r} per board × flavour; fixed: "
          f"{CAP_S // 60} min each; adaptive: {sum(adaptive.values()) / 3600:.1f} board-hours "
          f"in all (mean {np.mean(list(adaptive.values())) / 60:.1f} min a case); "
          f"{BOOT_S // 60} min to flash and boot a board\n")
    print(f"{'boards':>6} | {'fixed':>9} {'vs 1':>6} | {'adaptive':>9} {'vs 1':>6} | "
          f"{'one fails':>9} {'vs 1':>6}   (wall time of the test stage, hours)")
    base: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for boards in BOARDS:
            row = {}
            for label, seconds, failing in (("fixed", fixed, False),
                                            ("adaptive", adaptive, False),
                                            ("failing", adaptive, True)):
                wall, _ = stage(label, cases, seconds, boards, options.speedup, failing, folder)
                row[label] = wall
                base.setdefault(label, wall)
            print(f"{boards:>6} | " + " | ".join(
                f"{row[label] / 3600:>9.2f} {row[label] / base[label]:>6.2f}"
                for label in ("fixed", "adaptive", "failing")))
        sharding_against_replication(options.rack_speedup, repeats, folder)
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
