"""``rtlab kernel …``: Debian's kernel package (``fetch``), the kernel tree (``source``), a
board × flavour configuration with every requested option verified (``config``), a build
from source (``build``), and the pipeline's choice among them (``provide``)."""

import argparse
import sys
from pathlib import Path

from rtlab.util.paths import debs_dir, kernel_cache_dir


def _progress(message: str) -> None:
    # stderr: stdout carries the result (`cd "$(rtlab kernel source)"` works)
    print(message, file=sys.stderr, flush=True)


def _fetch(args: argparse.Namespace) -> int:
    from rtlab.kernel.debian import fetch_kernel

    fetch_kernel(args.board, args.flavour, debs_dir(), Path(args.out),
                 progress=lambda msg: print(msg, flush=True))
    return 0


def _build(args: argparse.Namespace) -> int:
    from rtlab.kernel.build import DEFAULT_JOBS, build_kernel

    result = build_kernel(
        args.board, args.flavour, Path(args.out), source=args.source,
        build_dir=Path(args.build_dir) if args.build_dir else None,
        ccache_dir=Path(args.ccache_dir) if args.ccache_dir else None,
        extra_fragments=[Path(f) for f in args.fragment], jobs=args.jobs or DEFAULT_JOBS,
        verbose=args.verbose, progress=lambda msg: print(msg, flush=True))
    build = result.info.build or {}
    print(f"{result.folder}: {result.info.release} {result.info.preemption}, "
          f"config {build['config_sha256'][:16]}, {build['build_seconds']:.0f} s; image "
          f"with: rtlab image build --board {result.info.board} --flavour "
          f"{result.info.flavour} --kernel {result.folder}")
    return 0


def _provide(args: argparse.Namespace) -> int:
    from rtlab.kernel.provide import provide

    provide(args.board, args.flavour, Path(args.out), build_flavour=args.build_flavour,
            policy=args.policy, progress=lambda msg: print(msg, flush=True))
    return 0


def _source(args: argparse.Namespace) -> int:
    from rtlab.kernel.source import prepare_source

    tree = prepare_source(args.source, kernel_cache_dir(), _progress)
    _progress(f"{tree.version}: {tree.origin}")
    print(tree.path)
    return 0


def _config(args: argparse.Namespace) -> int:
    from rtlab.kernel import spec
    from rtlab.kernel.build import default_build_dir
    from rtlab.kernel.config import KernelConfigError, configure
    from rtlab.kernel.source import prepare_source

    board = spec.board(args.board)
    flavour = spec.flavour(args.flavour)
    build_dir = Path(args.build_dir) if args.build_dir else default_build_dir(board.name,
                                                                              flavour.name)
    tree = prepare_source(args.source, kernel_cache_dir(), _progress)
    try:
        result = configure(tree, build_dir, board, flavour, _progress,
                           extra_fragments=[Path(f) for f in args.fragment])
    except KernelConfigError as error:
        if not error.dropped:
            raise
        print(f"rtlab: error: {error}", file=sys.stderr)
        return 1
    width = max(len(r.text) for r in result.requests)
    for request in result.requests:
        print(f"ok  {request.text:{width}}  {request.where}")
    print(f"{board.name}-{flavour.name}: all {result.requested} requested options in "
          f"{result.config} (preemption {result.preemption_model}, sha256 "
          f"{result.config_sha256[:16]}; {tree.version}, {tree.origin})")
    return 0


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    kernel = sub.add_parser("kernel", help="board kernels (the pipeline's build stage)")
    kernel_sub = kernel.add_subparsers(dest="action", required=True)
    fetch = kernel_sub.add_parser(
        "fetch", help="Debian's kernel package for a board and flavour, with kernel.json "
                      "(what the build stage hands on when it neither builds nor reuses)")
    fetch.add_argument("--board", required=True, help="imx6q or rpi3")
    fetch.add_argument("--flavour", required=True, help="std or rt")
    fetch.add_argument("--out", default="out/kernel")
    fetch.set_defaults(func=_fetch)
    source_help = ("kernel tree, tarball or git URL[@ref] (default: the pinned Debian source "
                   "of kernel/source.yaml, RT-patched)")
    source = kernel_sub.add_parser(
        "source", help="fetch, verify, unpack and RT-patch the kernel source (cached); "
                       "prints the tree's path")
    source.add_argument("--source", help=source_help)
    source.set_defaults(func=_source)

    config = kernel_sub.add_parser(
        "config", help="defconfig + the board's and flavour's fragments (merge_config.sh, "
                       "olddefconfig), then check every requested option landed; exit 1 "
                       "with the dropped ones and their unmet dependencies")
    config.add_argument("--board", required=True, help="a board of kernel/boards.yaml")
    config.add_argument("--flavour", required=True,
                        help="a flavour of kernel/flavours.yaml, e.g. preempt-rt")
    config.add_argument("--source", help=source_help)
    config.add_argument("--build-dir", help="out-of-tree build folder (default: <kernel "
                                            "cache>/build/<board>-<flavour>)")
    config.add_argument("--fragment", action="append", default=[],
                        help="an extra fragment on top of the flavour's (repeatable)")
    config.set_defaults(func=_config)
    kbuild = kernel_sub.add_parser(
        "build", help="configure and cross-compile a board's kernel from source (image, "
                      "DTBs, modules) with ccache; writes OUT/<board>-<flavour>/ with "
                      "kernel.json and its build manifest, for rtlab image build --kernel")
    kbuild.add_argument("--board", required=True, help="a board of kernel/boards.yaml")
    kbuild.add_argument("--flavour", required=True,
                        help="a flavour of kernel/flavours.yaml, e.g. preempt-rt")
    kbuild.add_argument("--source", help="kernel tree, tarball or git URL[@ref] (default: "
                                         "the pinned Debian source, kernel/source.yaml)")
    kbuild.add_argument("--build-dir", help="out-of-tree build folder (default: "
                                            "<kernel cache>/build/<board>-<flavour>; keep "
                                            "it fixed, ccache hits depend on its path)")
    kbuild.add_argument("--ccache-dir", help="ccache folder (default: $RTLAB_CCACHE_DIR, "
                                             "else <kernel cache>/ccache)")
    kbuild.add_argument("--fragment", action="append", default=[],
                        help="an extra config fragment on top of the flavour's "
                             "(repeatable; verified and recorded like the others)")
    kbuild.add_argument("-j", "--jobs", type=int, help="make jobs (default 3)")
    kbuild.add_argument("--verbose", action="store_true", help="every line make prints")
    kbuild.add_argument("--out", default="out/kernel")
    kbuild.set_defaults(func=_build)
    provide = kernel_sub.add_parser(
        "provide", help="the pipeline's build stage: build the kernel when kernel/ changed "
                        "since the pipeline's base, else reuse the default branch's last "
                        "built one (GitLab job artifacts), else Debian's; kernel.json says "
                        "which and why")
    provide.add_argument("--board", required=True)
    provide.add_argument("--flavour", required=True, help="std or rt (the thresholds flavour)")
    provide.add_argument("--build-flavour", help="kernel/flavours.yaml flavour to build "
                                                 "(default: the one marked for the pipeline)")
    provide.add_argument("--policy", default="auto",
                         help="auto, build, reuse or debian (the pipeline's RTLAB_KERNEL)")
    provide.add_argument("--out", default="out/kernel")
    provide.set_defaults(func=_provide)
