"""The ``rtlab`` command: every stage of the lab, called the same way by CI, by people and
by the tests."""

import argparse
import importlib
import sys

# the packages along the data path, each adding its commands (<package>/cli.py: register)
# (campaign and bisect last: they drive the stages before them, for a study across kernel
# variants and for the commit and option behind a regression)
# (lavaserver right after lava: it adds `rtlab lava server` to lava's parser)
PACKAGES = ("kernel", "image", "run", "lab", "vlab", "lava", "lavaserver", "verdict",
            "tuning", "store", "report", "campaign", "bisect")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="rtlab", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)
    for package in PACKAGES:
        importlib.import_module(f"rtlab.{package}.cli").register(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, RuntimeError) as error:
        print(f"rtlab: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
