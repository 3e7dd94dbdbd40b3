"""``rtlab kernel source`` and ``rtlab kernel config``: the kernel tree, and a board ×
flavour configuration with every requested option verified. (``rtlab kernel build`` is
wired in rtlab/cli.py.)"""

import argparse
import sys
from pathlib import Path

from ..paths import kernel_cache_dir


def _progress(message: str) -> None:
    # stderr: stdout carries the result (`cd "$(rtlab kernel source)"` works)
    print(message, file=sys.stderr, flush=True)


def _source(args: argparse.Namespace) -> int:
    from .source import prepare_source

    tree = prepare_source(args.source, kernel_cache_dir(), _progress)
    _progress(f"{tree.version}: {tree.origin}")
    print(tree.path)
    return 0


def _config(args: argparse.Namespace) -> int:
    from . import spec
    from .build import default_build_dir
    from .config import KernelConfigError, configure
    from .source import prepare_source

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


def register(kernel_sub: argparse._SubParsersAction) -> None:
    """Add ``source`` and ``config`` to the ``rtlab kernel`` sub-parser."""
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
