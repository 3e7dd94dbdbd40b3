"""How long a lab's test stage takes for one board × flavour, with 1, 2, 4 and 8 boards of
the type sharing its cases, fixed hour per case against adaptive runs, and with one board
failing mid-run.

No QEMU: each place is a thread that works through the plan with the real scheduling code
(rtlab.run.queue on a SQLite results store: claims, a failing place leaving the rest to
the others), and "measures" a case by sleeping its board time on an accelerated clock. A
fixed case takes the hour; an adaptive case takes what rtlab.verdict.sequential decides on
simulated windows of the case (bench/adaptive_quality.py's simulation of an unchanged
kernel on the recorded x86 source at the case's interval; rt-tests run the hour). Every
place first flashes and boots (3 min), and again after each failure.

    .venv/bin/python bench/lab_wall_time.py [--cases full|gate] [--speedup 20000]
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
import verdict_quality as vq  # noqa: E402

from rtlab.measure.suite import case_name, load_suite  # noqa: E402
from rtlab.run.queue import CaseQueue, leftovers  # noqa: E402
from rtlab.store import open_store  # noqa: E402
from rtlab.verdict.sequential import SequentialPolicy  # noqa: E402

CAP_S = 3600
BOOT_S = 180
BOARDS = (1, 2, 4, 8)
SOURCE = 2  # recorded x86 cpu


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


def adaptive_seconds(cases: list[tuple[str, int | None]], seed: int) -> dict[str, float]:
    """Each case's board time when it runs adaptively on an unchanged kernel."""
    model = vq.sources()[SOURCE]
    rng = np.random.default_rng(seed)
    policy = SequentialPolicy(window_s=aq.WINDOW_S, cap_s=CAP_S)
    seconds = {}
    for name, interval in cases:
        if interval is None:
            seconds[name] = CAP_S
            continue
        n_hour = int(CAP_S * 1e6 / interval) * aq.CPUS
        limit = aq.limit_for(model, n_hour, np.random.default_rng(interval))
        baseline = [model.histogram(n_hour, rng) for _ in range(aq.BASELINE_RUNS)]
        trial = aq.one_run(model, policy, interval, 1.0, baseline, limit, rng, 0)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="full", help="suite.yaml tier (default: full)")
    parser.add_argument("--speedup", type=float, default=20000,
                        help="board seconds per wall second (default 20000)")
    options = parser.parse_args()
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
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
