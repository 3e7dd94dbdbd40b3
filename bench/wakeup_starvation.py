"""How often a cyclictest CPU goes without a single wake-up on the virtual rack, under the
loads and the contention that produced it in CI.

    .venv/bin/python bench/wakeup_starvation.py [--rounds 3] [--duration 3] [--out DIR]

Both virtual boards at once (the stock kernel of each, as the pipeline's two test jobs
ran on the two host cores), through `rtlab run`: cpu100, hackbench and combined at every
interval of suite.yaml, 3 s windows, no other rt-test. A round is one `rtlab run` per
board (flash, boot, 9 windows); ``--rounds 3`` gives 54 windows. It prints, per board ×
scenario × interval, the windows, the CPUs measured, the CPUs with no wake-up (cyclictest
0 samples, which the gate fails), the CPUs whose thread was
kept off for a second or more (a few samples, a huge average: the same starvation, ended
before the window did) and the verdicts, then the totals and how cyclictest was
started (the record's `command`). The virtual rack is started if it is not running (and
stopped again at the end).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from rtlab.image.build import build_image
from rtlab.util import paths
from rtlab.vlab import control
from rtlab.vlab.config import load_config

PLACES = {"imx6q-01": "imx6q", "rpi3-01": "rpi3"}
FLAVOUR = "std"
SCENARIOS = "cpu100,hackbench,combined"
STALL_US = 1_000_000


def run_round(images: dict[str, Path], out: Path, duration_s: int) -> None:
    """One `rtlab run` per place, all at once."""
    procs = {}
    for place, image in images.items():
        folder = out / place
        folder.mkdir(parents=True)
        argv = [sys.executable, "-m", "rtlab.cli", "run", "--place", place, "--image",
                str(image), "--out", str(folder), "--duration", str(duration_s),
                "--scenarios", SCENARIOS, "--rt-tests", "none"]
        log = (folder / "rtlab-run.log").open("w")
        procs[place] = (subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=paths.REPO_ROOT), log)
    for place, (proc, log) in procs.items():
        rc = proc.wait()
        log.close()
        print(f"  {place}: rtlab run exited {rc}", flush=True)


def tally(out: Path) -> None:
    rows: dict[tuple[str, str, str], Counter] = defaultdict(Counter)
    starts: Counter = Counter()
    for path in sorted(out.glob("round-*/*/results/*.json")):
        record = json.loads(path.read_text())
        key = (record["board"], record["scenario"], f"{record['interval_us']}us")
        row = rows[key]
        row["windows"] += 1
        row[record["verdict"]] += 1
        cpus = record.get("cpus") or []
        row["cpus"] += len(cpus)
        row["no_wakeup"] += sum(1 for cpu in cpus if cpu.get("no_wakeup"))
        # the same starvation, ended just before the window closed: a thread kept off its
        # CPU for over a second leaves a few samples, a huge average and a fail
        row["stalled"] += sum(1 for cpu in cpus if not cpu.get("no_wakeup")
                              and (cpu.get("max_us") or 0) >= STALL_US)
        command = record.get("command") or []
        # what ran before cyclictest's own argv: the start wrapper
        starts[" ".join(command[:command.index("cyclictest")] if "cyclictest" in command
                        else command)] += 1
    header = f"{'board':<12} {'scenario':<10} {'interval':>8} {'windows':>7} {'CPUs':>5} " \
             f"{'no wake-up':>10} {'stalled':>7}  verdicts"
    print(header)
    print("-" * len(header))
    total: Counter = Counter()
    for (board, scenario, interval), row in sorted(rows.items()):
        verdicts = ", ".join(f"{v} {row[v]}" for v in ("pass", "fail", "error", "skipped")
                             if row[v])
        print(f"{board:<12} {scenario:<10} {interval:>8} {row['windows']:>7} {row['cpus']:>5} "
              f"{row['no_wakeup']:>10} {row['stalled']:>7}  {verdicts}")
        total.update(row)
    print("-" * len(header))
    print(f"{'all':<12} {'':<10} {'':>8} {total['windows']:>7} {total['cpus']:>5} "
          f"{total['no_wakeup']:>10} {total['stalled']:>7}")
    print(f"(no wake-up: 0 samples in the window; stalled: a wake-up {STALL_US / 1e6:g} s "
          "or more late)")
    for start, count in starts.items():
        print(f"started as: {start or '(cyclictest directly)'} … ({count} windows)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=3, help="seconds per window")
    parser.add_argument("--out", type=Path, default=None,
                        help="keep the records here (default: a temporary folder)")
    parser.add_argument("--tally", type=Path, default=None, metavar="DIR",
                        help="only count the records of an earlier run's --out DIR")
    args = parser.parse_args()
    if args.tally is not None:
        tally(args.tally)
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="wakeup-starvation-"))
    images = {place: build_image(board, FLAVOUR, paths.debs_dir(), paths.images_dir(),
                                 progress=lambda msg: None).sd_image
              for place, board in PLACES.items()}
    state_dir = paths.vlab_state_dir()
    started_here = control.running_pid(state_dir) is None
    if started_here:
        control.start(load_config(paths.default_vlab_config()), state_dir)
    began = time.monotonic()
    try:
        for n in range(args.rounds):
            print(f"round {n + 1} of {args.rounds}", flush=True)
            run_round(images, out / f"round-{n}", args.duration)
    finally:
        if started_here:
            control.stop(state_dir)
    print(f"\n{args.rounds} rounds in {time.monotonic() - began:.0f} s; records in {out}\n")
    tally(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
