"""``rtlab run`` (one place, or several sharing a plan, through the suite) and ``rtlab
lab health|check`` (the places' health; a check is a short run)."""

import argparse
import os
import subprocess
import sys
from pathlib import Path

from rtlab.measure.trace import TRACE_CHOICES, TRACERS
from rtlab.util import paths
from rtlab.util.variables import QUEUE_VARIABLE


def _boards(text: str) -> int:
    if text == "":
        return 1  # a CI variable left empty: the default
    if text == "all":
        return 0
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a number of places (1 or more) or all, got {text!r}")
    return int(text)


def _window(text: str) -> int | None:
    if text == "":
        return None  # a CI variable left empty: a fixed run
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a number of seconds, got {text!r}")
    return int(text)


def _run(args: argparse.Namespace) -> int:
    from rtlab.run.runner import Selection, Sharing, run_suite
    from rtlab.store import URL_VARIABLE, default_url

    if args.boards != 1:
        if args.board is None:
            raise ValueError("--boards shares a board type's cases among its places: give "
                             "--board, not --place")
        if args.plan is not None:
            raise ValueError("--plan names the plan of one place: give it without --boards")
        from rtlab.run.pooling import Judging
        from rtlab.run.sharing import run_on_boards

        # how a replicated plan's pooled cases are judged, as a single run judges its own
        judging = Judging(
            cap_s=args.duration,
            thresholds=Path(args.thresholds).resolve() if args.thresholds else None,
            suite=Path(args.suite).resolve() if args.suite else None,
            baseline_url=args.baseline_db or os.environ.get(URL_VARIABLE) or None,
            baseline_ref=(os.environ.get("CI_DEFAULT_BRANCH", "main")
                          if args.baseline_ref is None else args.baseline_ref),
            pipeline_jobs=args.pipeline_jobs or 1)
        return run_on_boards(_run_argv(args), board=args.board, boards=args.boards,
                             coordinator=args.coordinator, image=Path(args.image),
                             out_dir=Path(args.out), duration_s=args.duration,
                             window_s=args.window, queue=args.queue, judging=judging,
                             spread=args.spread, tier=args.tier or None)
    sharing = None
    if args.plan is not None:
        sharing = Sharing(queue=args.queue or os.environ.get(QUEUE_VARIABLE) or default_url(),
                          plan=args.plan,
                          replicate=args.spread == "replicate")
    elif args.queue is not None:
        raise ValueError("--queue holds a plan's cases: give --plan with it")
    elif args.spread is not None:
        raise ValueError("--spread says how the places of a plan share its cases: give it "
                         "with --boards (or --plan)")
    # an empty value (a CI variable left empty) means the suite's default, like no option
    selection = Selection(scenarios=args.scenarios or None, intervals=args.intervals or None,
                          rt_tests=args.rt_tests or None, cases=args.cases or None,
                          tier=args.tier or None, window_s=args.window,
                          baseline=args.baseline_db or None,
                          baseline_ref=args.baseline_ref, pipeline_jobs=args.pipeline_jobs,
                          suite=Path(args.suite).resolve() if args.suite else None,
                          thresholds=Path(args.thresholds).resolve() if args.thresholds else None,
                          trace=args.trace or None, trace_tracer=args.trace_tracer or None,
                          sharing=sharing)
    outcome = run_suite(place=args.place, board=args.board, image=Path(args.image),
                        env_file=Path(args.env), coordinator=args.coordinator,
                        out_dir=Path(args.out), duration_s=args.duration,
                        selection=selection, reserve_timeout_s=args.reserve_timeout)
    if outcome.junit is not None:
        print(f"JUnit: {outcome.junit}\nresults: {outcome.results}")
    return outcome.exit_code


def _run_argv(args: argparse.Namespace) -> list[str]:
    """The ``rtlab run`` of one place of a shared plan: these arguments, less --boards and
    what rtlab.run.sharing sets per spread (--duration, --window, --out)."""
    argv = ["run", "--board", args.board]
    for option, value in (("--reserve-timeout", args.reserve_timeout), ("--image", args.image),
                          ("--env", args.env), ("--coordinator", args.coordinator),
                          ("--scenarios", args.scenarios), ("--intervals", args.intervals),
                          ("--rt-tests", args.rt_tests), ("--cases", args.cases),
                          ("--tier", args.tier),
                          # --baseline-db reaches them as $RTLAB_RESULTS_DB (rtlab.run.sharing)
                          ("--baseline-ref", args.baseline_ref),
                          ("--pipeline-jobs", args.pipeline_jobs),
                          ("--suite", args.suite), ("--thresholds", args.thresholds),
                          ("--trace", args.trace), ("--trace-tracer", args.trace_tracer)):
        if value is not None:
            argv += [option, str(value)]
    return argv


def _doctor(args: argparse.Namespace) -> int:
    from rtlab.run.doctor import diagnose, options_from
    from rtlab.util.findings import as_json, as_text, exit_code

    findings = diagnose(options_from(args.coordinator, args.env, args.boards, args.db,
                                     args.thresholds, args.suite))
    if args.json == "-":
        print(as_json(findings))
    else:
        print(as_text(findings))
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(as_json(findings) + "\n")
    return exit_code(findings)


def _lab(args: argparse.Namespace) -> int:
    if args.action == "doctor":
        return _doctor(args)
    from rtlab.lab.health import HealthBook, format_health, place_info, shared_health

    args.env = args.env or str(paths.REPO_ROOT / "env" / "virtual.yaml")
    args.coordinator = args.coordinator or "127.0.0.1:20408"

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
    from rtlab.run.runner import Selection, run_suite

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


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
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
    run.add_argument("--cases", help="instead of --scenarios × --intervals and --rt-tests: "
                                     "comma-separated cases, scenario/interval "
                                     "(hackbench/100us) or an rt-test (pi_stress)")
    run.add_argument("--tier", help="instead of --scenarios × --intervals and --rt-tests: a "
                                    "tier of the suite file (gate: the cases of every push; "
                                    "full: every case)")
    run.add_argument("--suite", help="suite file (default: the repository's suite.yaml)")
    run.add_argument("--thresholds", help="thresholds file (default: thresholds.yaml)")
    run.add_argument("--trace", choices=TRACE_CHOICES, default=None,
                     help="keep the kernel's trace of a latency case that breaks its max_us: "
                          "always, never, or auto (default): where thresholds.yaml sets "
                          "trace: true, or the series' last stored run failed")
    run.add_argument("--trace-tracer", choices=TRACERS, default=None,
                     help="the kernel tracer beside the sched/irq/timer events: nop (default, "
                          "the events alone) or function (every kernel function: the code "
                          "path, at a cost; docs/tracing.md)")
    run.add_argument("--window", type=_window, default=None, metavar="SECONDS",
                     help="adaptive: each latency case in windows of SECONDS under one "
                          "running load, stopped when the statistics decide (a limit "
                          "exceeded, a regression, or no change with the tail safe to the "
                          "cap); --duration is the cap")
    run.add_argument("--baseline-db", metavar="URL",
                     help="the results store holding the baseline runs every latency case "
                          "is compared with (default: $RTLAB_RESULTS_DB; without one a case "
                          "runs to the cap and is judged by its limits alone)")
    run.add_argument("--baseline-ref", help="the baseline's branch (default: "
                                            "$CI_DEFAULT_BRANCH, else main; '' any)")
    run.add_argument("--pipeline-jobs", type=int, default=None, metavar="N",
                     help="how many jobs of the pipeline judge latency cases as this one "
                          "(default 1): a pipeline of unchanged kernels goes red with "
                          "thresholds.yaml's pipeline_false_fail at most, counting every "
                          "way a case fails, shared over this job's cases times N "
                          "(rtlab.verdict.budget)")
    run.add_argument("--boards", type=_boards, default=1, metavar="N|all",
                     help="with --board: run on N healthy places of the type at once (all: "
                          "every one), sharing the cases, each measured by one place "
                          "(default 1)")
    run.add_argument("--spread", choices=("shard", "replicate"), default=None,
                     help="with --boards: shard (each case measured whole by one place) or "
                          "replicate (each case on every place at once, --duration / N "
                          "each, judged on the pooled wake-ups with each boot a level of "
                          "the comparison); default: replicate for --tier gate, else shard")
    run.add_argument("--plan", help="this place works on the plan PLAN with others (each "
                                    "case measured by one place, or with --spread "
                                    "replicate a share of every case; --boards makes one)")
    run.add_argument("--queue", metavar="URL",
                     help="the results store holding --plan's cases (default: "
                          "$RTLAB_RESULTS_DB, else sqlite:///results.db; --boards: a "
                          "plan.db in --out)")
    run.set_defaults(func=_run)

    lab = sub.add_parser("lab", help="the places' health, and the lab's preflight")
    lab.add_argument("action", choices=["health", "check", "doctor"],
                     help="health: state and history per place; check: flash + boot + "
                          "short smoke test, which makes an unhealthy place healthy again; "
                          "doctor: check what a pipeline needs of the lab (coordinator, "
                          "places, resources, exporters, tags, tools, the results "
                          "database, the limits, the pipeline's variables), each problem "
                          "with its fix; exit 1 on one that would fail a pipeline")
    lab.add_argument("--place", action="append", default=[],
                     help="a place (repeatable; health: default all recorded)")
    lab.add_argument("--history", action="store_true", help="health: recent events too")
    lab.add_argument("--image", help="check: the SD image to flash")
    lab.add_argument("--env", help="labgrid environment file (default: health/check "
                                   "env/virtual.yaml; doctor $RTLAB_ENV, else env/rack.yaml)")
    lab.add_argument("--coordinator", help="default: health/check 127.0.0.1:20408; doctor "
                                           "$LG_COORDINATOR, else 127.0.0.1:20408")
    lab.add_argument("--boards", nargs="+", default=[], metavar="TAG",
                     help="doctor: the board types (place tag board=) the pipeline tests "
                          "(default: every board tag on the coordinator)")
    lab.add_argument("--db", help="doctor: results database URL (default: "
                                  "$RTLAB_RESULTS_DB)")
    lab.add_argument("--thresholds", help="doctor: default thresholds.yaml")
    lab.add_argument("--suite", help="doctor: default suite.yaml")
    lab.add_argument("--json", nargs="?", const="-", metavar="FILE",
                     help="doctor: JSON instead of text (alone), or text and JSON to FILE")
    lab.add_argument("--out", default="out")
    lab.add_argument("--duration", type=int, default=3, help="check: seconds of cyclictest")
    lab.set_defaults(func=_lab)
