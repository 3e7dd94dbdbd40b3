"""The ``rtlab`` command: every stage of the lab, called the same way by CI, by people and
by the tests."""

import argparse
import asyncio
import logging
import subprocess
import sys
from pathlib import Path

from . import paths


def _image_build(args: argparse.Namespace) -> int:
    from .vlab.boards import BOARD_MODELS, FLAVOURS
    from .vlab.image import build_image

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


def _vlab(args: argparse.Namespace) -> int:
    from .vlab import control
    from .vlab.config import load_config

    config = load_config(Path(args.config))
    state_dir = paths.vlab_state_dir()
    if args.action == "serve":
        from .vlab.server import serve

        logging.basicConfig(level=logging.INFO,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
        state_dir.mkdir(parents=True, exist_ok=True)
        asyncio.run(serve(config, state_dir, with_labgrid=not args.no_labgrid))
        return 0
    if args.action == "start":
        current = control.start(config, state_dir)
        print(f"virtual rack ready: coordinator {current['coordinator']}, "
              f"places {', '.join(b['place'] for b in current['boards'])}; "
              f"logs in {state_dir / 'logs'}")
        return 0
    if args.action == "stop":
        print("virtual rack stopped" if control.stop(state_dir) else "virtual rack not running")
        return 0
    print(control.format_status(control.status(config)))
    return 0


def _vlab_fault(args: argparse.Namespace) -> int:
    from .vlab import control
    from .vlab.config import load_config
    from .vlab.faults import FAULT_KINDS

    config = load_config(Path(args.config))
    if args.place is None or args.kind is None:
        if args.place is not None:
            raise ValueError(f"rtlab vlab fault {args.place}: give a KIND "
                             f"(valid: {', '.join(FAULT_KINDS)}, clear)")
        armed = control.armed_faults(config)
        for place, faults in armed.items():
            print(f"{place}: " + (", ".join(
                f"{f['kind']} (fired {f['fired']}/{f['times'] or 'until cleared'})"
                for f in faults) or "no faults armed"))
        return 0
    if args.kind == "clear":
        control.clear_faults(config, args.place)
        print(f"{args.place or 'all places'}: faults cleared")
        return 0
    if args.kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault '{args.kind}' (valid: {', '.join(FAULT_KINDS)}, clear)")
    fault = control.inject_fault(config, args.place, args.kind, times=args.times,
                                 seconds=args.seconds, after_s=args.after, code=args.code,
                                 on_console=args.on_console)
    print(f"{args.place}: armed {fault}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from .runner import Selection, run_suite

    # an empty value (a CI variable left empty) means the suite's default, like no option
    selection = Selection(scenarios=args.scenarios or None, intervals=args.intervals or None,
                          rt_tests=args.rt_tests or None,
                          suite=Path(args.suite).resolve() if args.suite else None,
                          thresholds=Path(args.thresholds).resolve() if args.thresholds else None)
    outcome = run_suite(place=args.place, board=args.board, image=Path(args.image),
                        env_file=Path(args.env), coordinator=args.coordinator,
                        out_dir=Path(args.out), duration_s=args.duration,
                        selection=selection, reserve_timeout_s=args.reserve_timeout)
    print(f"JUnit: {outcome.junit}\nresults: {outcome.results}")
    return outcome.exit_code


def _lab(args: argparse.Namespace) -> int:
    from .lab.health import HealthBook, format_health, place_info, shared_health

    book = HealthBook(paths.health_dir())
    if args.action == "health":
        states = [book.state(place) for place in args.place] if args.place else book.states()
        if not states:
            print(f"no health records in {paths.health_dir()} yet")
            return 0
        shared = {}
        for state in states:
            try:
                shared[state.place] = shared_health(place_info(args.coordinator, state.place))
            except (RuntimeError, OSError, subprocess.SubprocessError) as error:
                shared[state.place] = None
                print(f"{state.place}: coordinator {args.coordinator} not asked: {error}",
                      file=sys.stderr)
        print(format_health(states, history=args.history, shared=shared), end="")
        return 0
    from .runner import Selection, run_suite

    if len(args.place) != 1 or not args.image:
        raise ValueError("rtlab lab check needs one --place and --image")
    place = args.place[0]
    # a short smoke test: flash, boot, and one short measurement on the idle board
    outcome = run_suite(place=place, image=Path(args.image), env_file=Path(args.env),
                        coordinator=args.coordinator, out_dir=Path(args.out),
                        duration_s=args.duration, label=f"check-{place}", kind="check",
                        health=book,
                        selection=Selection(scenarios="idle", intervals="1000",
                                            rt_tests="none"))
    print(format_health([book.state(place)]), end="")
    return 0 if outcome.healthy and outcome.exit_code == 0 else 1


def _env_check(args: argparse.Namespace) -> int:
    from .envfile import check_env_file, check_exporter_file

    files = [Path(f) for f in args.files] or sorted(
        [*(paths.REPO_ROOT / "env").glob("*.yaml"),
         *(paths.REPO_ROOT / "env" / "exporter").glob("*.yaml")])
    problems = []
    for path in files:
        if path.name == "vlab.yaml":
            from .vlab.config import load_config

            load_config(path)  # the rack's own file; refuses with file:line
            continue
        check = check_exporter_file if path.parent.name == "exporter" else check_env_file
        problems += check(path)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 2
    print(f"{len(files)} file(s) OK: {', '.join(str(f) for f in files)}")
    return 0


def _thresholds(args: argparse.Namespace) -> int:
    from . import thresholds_cli

    if args.action == "check":
        print(thresholds_cli.check(Path(args.file), Path(args.suite)))
        return 0
    print(thresholds_cli.show(Path(args.file), Path(args.suite), args.board, args.flavour,
                              args.scenario, args.interval))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(out_dir=Path(args.out), duration_s=args.duration, full=args.full)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="rtlab", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)

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
    build.set_defaults(func=_image_build)

    kernel = sub.add_parser("kernel", help="board kernels (the pipeline's build stage)")
    kernel_sub = kernel.add_subparsers(dest="action", required=True)
    from .kernel.cli import register as register_kernel

    register_kernel(kernel_sub)

    vlab = sub.add_parser("vlab", help="the virtual rack")
    vlab_sub = vlab.add_subparsers(dest="action", required=True)
    for action, what in (("start", "start the rack in the background"),
                         ("stop", "stop it and everything it started"),
                         ("status", "boards, power, SD muxes and armed faults"),
                         ("serve", "run the rack in the foreground")):
        command = vlab_sub.add_parser(action, help=what)
        command.add_argument("--config", default=str(paths.default_vlab_config()))
        command.set_defaults(func=_vlab)
        if action == "serve":
            command.add_argument("--no-labgrid", action="store_true",
                                 help="only the emulated hardware, no coordinator/exporter")
    from .vlab.faults import FAULT_KINDS

    kinds = "\n".join(f"  {kind:18} {what}" for kind, what in FAULT_KINDS.items())
    fault = vlab_sub.add_parser(
        "fault", help="inject a fault on a board (or list / clear them)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Arm a fault on a virtual board. Without PLACE: list the armed faults; "
                    f"KIND clear: disarm the place's faults.\n\nfaults:\n{kinds}")
    fault.add_argument("place", nargs="?", help="e.g. imx6q-01")
    fault.add_argument("kind", nargs="?", help="a fault kind, or clear")
    fault.add_argument("--times", type=int, default=1,
                       help="how often it fires (0: until cleared; default 1)")
    fault.add_argument("--seconds", type=float, help="SECONDS of the fault")
    fault.add_argument("--after", type=float,
                       help="AFTER: seconds after power-on, or after --on-console's TEXT")
    fault.add_argument("--on-console", metavar="TEXT",
                       help="ON_CONSOLE: panic or serial-disconnect waits for the board's "
                            "console to show TEXT (e.g. rtlab-evidence:started, printed "
                            "when a measurement window opens)")
    fault.add_argument("--code", type=int, help="CODE: the HTTP status of pdu-error")
    fault.add_argument("--config", default=str(paths.default_vlab_config()))
    fault.set_defaults(func=_vlab_fault)

    run = sub.add_parser("run", help="flash, boot and run the latency suite on one place")
    where = run.add_mutually_exclusive_group(required=True)
    where.add_argument("--place", help="this place (reserved by name)")
    where.add_argument("--board", help="any place with this board tag, e.g. imx6q "
                                       "(qemu-imx6q on the virtual rack)")
    run.add_argument("--reserve-timeout", type=float, default=3600,
                     help="seconds to wait for a free place (default 3600)")
    run.add_argument("--image", required=True, help="sdcard.img (with .bmap and manifest)")
    run.add_argument("--env", default=str(paths.REPO_ROOT / "env" / "virtual.yaml"))
    run.add_argument("--coordinator", default="127.0.0.1:20408")
    run.add_argument("--out", default="out")
    run.add_argument("--duration", type=int, default=10, help="seconds per measurement")
    run.add_argument("--scenarios", help="comma-separated scenarios (default: suite.yaml's)")
    run.add_argument("--intervals", help="comma-separated intervals in µs (default: all)")
    run.add_argument("--rt-tests", help="comma-separated other rt-tests, or 'none'")
    run.add_argument("--suite", help="suite file (default: the repository's suite.yaml)")
    run.add_argument("--thresholds", help="thresholds file (default: thresholds.yaml)")
    run.set_defaults(func=_run)

    lab = sub.add_parser("lab", help="the places' health")
    lab.add_argument("action", choices=["health", "check"],
                     help="health: state and history per place; check: flash + boot + "
                          "short smoke test, which makes an unhealthy place healthy again")
    lab.add_argument("--place", action="append", default=[],
                     help="a place (repeatable; health: default all recorded)")
    lab.add_argument("--history", action="store_true", help="health: recent events too")
    lab.add_argument("--image", help="check: the SD image to flash")
    lab.add_argument("--env", default=str(paths.REPO_ROOT / "env" / "virtual.yaml"))
    lab.add_argument("--coordinator", default="127.0.0.1:20408")
    lab.add_argument("--out", default="out")
    lab.add_argument("--duration", type=int, default=3, help="check: seconds of cyclictest")
    lab.set_defaults(func=_lab)

    env = sub.add_parser("env", help="check labgrid environment and exporter files")
    env.add_argument("action", choices=["check"])
    env.add_argument("files", nargs="*", help="default: env/*.yaml and env/exporter/*.yaml")
    env.set_defaults(func=_env_check)

    thresholds = sub.add_parser("thresholds", help="validate, show, tune or replay the "
                                                   "latency gate")
    threshold_actions = thresholds.add_subparsers(dest="action", required=True)
    for action, what in (("check", "validate the file against the suite"),
                         ("show", "the limits a board gets, with the line each comes from")):
        command = threshold_actions.add_parser(action, help=what)
        command.add_argument("--file", default=str(paths.REPO_ROOT / "thresholds.yaml"))
        command.add_argument("--suite", default=str(paths.REPO_ROOT / "suite.yaml"))
        command.set_defaults(func=_thresholds)
        if action == "show":
            command.add_argument("--board", required=True,
                                 help="a board tag, e.g. imx6q or qemu-rpi3")
            command.add_argument("--flavour", help="only this flavour")
            command.add_argument("--scenario", help="only this scenario")
            command.add_argument("--interval", type=int, help="only this interval (µs)")
    from .tuning_cli import register as register_tuning

    register_tuning(threshold_actions)

    from .store.cli import register as register_results

    register_results(sub)

    from .lab.reservation import register as register_reservation

    register_reservation(sub)
    from .report.cli import register as register_report

    register_report(sub)
    from .lava.cli import register as register_lava

    register_lava(sub)

    demo = sub.add_parser("demo", help="the main job on the virtual rack")
    demo.add_argument("--out", default="out")
    demo.add_argument("--duration", type=int, default=10)
    demo.add_argument("--full", action="store_true",
                      help="every scenario × interval and rt-test of suite.yaml")
    demo.set_defaults(func=_demo)
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
