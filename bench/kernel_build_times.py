"""Build times of a board's kernel from source: cold, ccache-warm in a fresh build folder,
after a one-option change, and a no-op rebuild.

    .venv/bin/python bench/kernel_build_times.py [--board imx6q] [--flavour preempt-rt]
        [--cases cold,warm,option,noop] [--jobs 3]

Each case runs `rtlab kernel build` (rtlab.kernel.build.build_kernel: configure, make,
collect, kernel.json) and reports its wall time, the kbuild steps make ran and the ccache
hits and misses:

- cold:   empty ccache and no build folder (what a CI runner without a cache pays);
- warm:   the build folder removed, the ccache of the previous case kept (a runner whose
          pipeline cache holds ccache's folder, as .gitlab-ci.yml keeps it);
- option: one option flipped by an extra fragment (CONFIG_PRINTK_TIME, compiled into one
          file) in the existing build folder: the incremental rebuild of a fragment change;
- noop:   the same again, nothing changed.

The bench uses its own build and ccache folders (<kernel cache>/bench/), so that the cold
case does not empty the cache real builds use; the paths stay fixed between runs, as
ccache hits need. A cold build takes 6-15 minutes on two cores: pick cases with --cases
(warm, option and noop reuse what the earlier cases left), e.g. after any build of the
board and flavour:

    bench/kernel_build_times.py --cases warm,option,noop \
        --build-dir .cache/kernel/build/imx6q-preempt-rt --ccache-dir .cache/kernel/ccache
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rtlab.kernel.build import BuildResult, build_kernel
from rtlab.util.paths import kernel_cache_dir

CASES = ("cold", "warm", "option", "noop")


def printk_time_fragment(build_dir: Path, folder: Path) -> Path:
    """An extra fragment that flips CONFIG_PRINTK_TIME relative to the build folder's
    current .config (so that `option` is a change whatever ran before)."""
    config = build_dir / ".config"
    on = config.is_file() and "CONFIG_PRINTK_TIME=y" in config.read_text().splitlines()
    fragment = folder / "printk-time.config"
    fragment.write_text("# CONFIG_PRINTK_TIME is not set\n" if on else "CONFIG_PRINTK_TIME=y\n")
    return fragment


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--board", default="imx6q")
    parser.add_argument("--flavour", default="preempt-rt")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated, in this order: {', '.join(CASES)}")
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--source", help="kernel source (default: kernel/source.yaml's)")
    parser.add_argument("--build-dir", type=Path,
                        help="build folder (default: <kernel cache>/bench/build/B-F; "
                             "cold and warm delete it)")
    parser.add_argument("--ccache-dir", type=Path,
                        help="ccache folder (default: <kernel cache>/bench/ccache; cold "
                             "deletes it). The real ones (.cache/kernel/build/…, "
                             ".cache/kernel/ccache) give warm figures without a cold build "
                             "first, when a build has filled them")
    parser.add_argument("--verbose", action="store_true", help="the builds' progress too")
    args = parser.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)} (valid: {', '.join(CASES)})")

    bench = kernel_cache_dir() / "bench"
    build_dir = (args.build_dir or bench / "build" / f"{args.board}-{args.flavour}").resolve()
    ccache_dir = (args.ccache_dir or bench / "ccache").resolve()
    rows = []
    with tempfile.TemporaryDirectory(prefix="kernel-bench-") as tmp:
        work = Path(tmp)
        extra: list[Path] = []
        for case in cases:
            if case == "cold":
                shutil.rmtree(build_dir, ignore_errors=True)
                shutil.rmtree(ccache_dir, ignore_errors=True)
            elif case == "warm":
                shutil.rmtree(build_dir, ignore_errors=True)
                if not ccache_dir.is_dir():
                    print("warning: no ccache yet, `warm` is a cold build", file=sys.stderr)
            elif case == "option":
                extra = [printk_time_fragment(build_dir, work)]
            print(f"--- {case} ---", flush=True)
            started = time.monotonic()
            result: BuildResult = build_kernel(
                args.board, args.flavour, work / "out", source=args.source,
                build_dir=build_dir, ccache_dir=ccache_dir, extra_fragments=extra,
                jobs=args.jobs, progress=(lambda msg: print(msg, flush=True))
                if args.verbose else (lambda msg: None))
            wall = time.monotonic() - started
            build = result.info.build or {}
            rows.append((case, wall, build["compiled"]["steps"],
                         build["ccache"].get("hits"), build["ccache"].get("misses")))
            print(f"{case}: {wall:.0f} s", flush=True)

    print(f"\n{args.board} {args.flavour}, make -j{args.jobs}, build folder {build_dir}")
    print(f"{'case':8} {'seconds':>8} {'kbuild steps':>13} {'ccache hits':>12} "
          f"{'misses':>7}")
    for case, wall, steps, hits, misses in rows:
        print(f"{case:8} {wall:8.0f} {steps:13d} {hits if hits is not None else '-':>12} "
              f"{misses if misses is not None else '-':>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
