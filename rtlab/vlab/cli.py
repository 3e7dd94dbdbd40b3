"""``rtlab vlab …`` (the virtual rack: start, stop, status, serve, faults) and ``rtlab
demo`` (the main job on it)."""

import argparse
import asyncio
import logging
from pathlib import Path

from rtlab.lab.otherfiles import register_check
from rtlab.util import paths


def _vlab(args: argparse.Namespace) -> int:
    from rtlab.vlab import control
    from rtlab.vlab.config import load_config

    config = load_config(Path(args.config))
    state_dir = paths.vlab_state_dir()
    if args.action == "serve":
        from rtlab.vlab.server import serve

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
    from rtlab.vlab import control
    from rtlab.vlab.config import load_config
    from rtlab.vlab.faults import FAULT_KINDS

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


def _demo(args: argparse.Namespace) -> int:
    from rtlab.vlab.demo import run_demo

    return run_demo(out_dir=Path(args.out), duration_s=args.duration, full=args.full)


def _check_config(path: Path) -> None:
    from rtlab.vlab.config import load_config

    load_config(path)  # the rack's own file; refuses with file:line


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    register_check("vlab.yaml", _check_config)
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
    from rtlab.vlab.faults import FAULT_KINDS

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

    demo = sub.add_parser("demo", help="the main job on the virtual rack")
    demo.add_argument("--out", default="out")
    demo.add_argument("--duration", type=int, default=10)
    demo.add_argument("--full", action="store_true",
                      help="every scenario × interval and rt-test of suite.yaml")
    demo.set_defaults(func=_demo)
