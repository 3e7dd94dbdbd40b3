"""``rtlab image build``: the SD card image, its bmap and its manifest per board and kernel
flavour (Debian's kernel, or the build stage's)."""

import argparse
from pathlib import Path

from rtlab.util import paths


def _build(args: argparse.Namespace) -> int:
    from rtlab.image.build import build_image
    from rtlab.platform.boards import BOARD_MODELS, FLAVOURS

    boards = sorted(BOARD_MODELS) if args.board == "all" else [args.board]
    flavours = list(FLAVOURS) if args.flavour == "all" else [args.flavour]
    if args.kernel and len(boards) * len(flavours) != 1:
        raise ValueError("--kernel is the kernel of one board and flavour: give --board "
                         "and --flavour")
    for board in boards:
        for flavour in flavours:
            artifacts = build_image(board, flavour, paths.debs_dir(), Path(args.out),
                                    progress=lambda msg: print(msg, flush=True),
                                    kernel_dir=Path(args.kernel) if args.kernel else None)
            print(f"{board}-{flavour}: {artifacts.sd_image}")
    return 0


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    image = sub.add_parser("image", help="board SD card images")
    image_sub = image.add_subparsers(dest="action", required=True)
    build = image_sub.add_parser("build", help="build SD image + bmap + manifest")
    build.add_argument("--board", default="all", help="imx6q, rpi3 or all")
    build.add_argument("--flavour", default="all", help="std, rt or all")
    build.add_argument("--out", default=str(paths.images_dir()))
    build.add_argument("--kernel", help="the build stage's kernel folder (rtlab kernel fetch "
                                        "--out DIR: DIR/<board>-<flavour>) instead of the "
                                        "one Debian's metapackage names; one board and "
                                        "flavour only")
    build.set_defaults(func=_build)
