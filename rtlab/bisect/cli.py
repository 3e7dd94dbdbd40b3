"""``rtlab bisect run|publish``: a latency regression bisected to its commit and option on
the rack, and the result posted where the team looks (docs/bisect.md)."""

import argparse
import contextlib
import os
from pathlib import Path

from rtlab.util import paths
from rtlab.util.commands import places_arg

# a bisection's exit codes: 0 a culprit named, 3 undecided or not reproduced (the lab
# could not tell), 2 an error of the request or the lab (as every rtlab command)
UNRESOLVED = 3


def _progress(message: str) -> None:
    print(message, flush=True)


def _kernel_flavour(flavour: str, given: str | None) -> str:
    """The kernel/flavours.yaml flavour whose fragments make a commit's configuration:
    ``given``, else the one the pipeline builds for the thresholds flavour."""
    from rtlab.kernel.spec import load_flavours

    if given:
        return given
    for name, entry in load_flavours().items():
        if entry.pipeline and entry.thresholds == flavour:
            return name
    raise ValueError(f"no flavour of kernel/flavours.yaml is the pipeline's for {flavour!r}: "
                     f"name one with --kernel-flavour")


def _run(args: argparse.Namespace) -> int:
    from rtlab.bisect.bisection import Bisector, Request
    from rtlab.bisect.decide import StepPolicy
    from rtlab.bisect.page import headline, write_report
    from rtlab.bisect.result import FOUND
    from rtlab.bisect.step import Rack
    from rtlab.store import URL_VARIABLE, open_store
    from rtlab.store.bisections import store_bisection

    virtual = args.rack == "virtual"
    prefix = args.board_prefix if args.board_prefix is not None else (
        "qemu-" if virtual else "")
    env = args.env or os.fspath(paths.REPO_ROOT / "env" / ("virtual.yaml" if virtual
                                                            else "rack.yaml"))
    out = Path(args.out)
    request = Request(repo=Path(args.repo).resolve(), good=args.good, bad=args.bad,
                      board=args.board, flavour=args.flavour,
                      kernel_flavour=_kernel_flavour(args.flavour, args.kernel_flavour),
                      case=args.case, source=args.kernel_source)
    rack = Rack(env_file=Path(env), coordinator=args.coordinator,
                board_tag=f"{prefix}{args.board}", duration_s=args.duration,
                places=args.places, suite=Path(args.suite).resolve() if args.suite else None,
                reserve_timeout_s=args.reserve_timeout)
    policy = StepPolicy(rounds=args.rounds, confidence=args.confidence, quantile=args.quantile)
    from rtlab.vlab import control

    with control.running(_progress) if virtual else contextlib.nullcontext():
        result = Bisector(request, rack, policy, out, progress=_progress).run()
    result.write(out)
    written = write_report(result, out / "report")
    store = open_store(args.db or os.environ.get(URL_VARIABLE)
                       or f"sqlite:///{(out / 'results.db').resolve()}")
    try:
        store_bisection(store, result.to_json())
    finally:
        store.close()
    print(f"{result.status}: {headline(result)}")
    print(f"report: {written.html}; result: {out / 'result.json'}")
    return 0 if result.status == FOUND else UNRESOLVED


def _publish(args: argparse.Namespace) -> int:
    from rtlab.bisect.publish import bisect_credentials, job_report_url, publish
    from rtlab.bisect.result import read_bisection

    url = args.url or os.environ.get("CI_SERVER_URL")
    project = args.project or os.environ.get("CI_PROJECT_ID")
    if not url or not project:
        raise ValueError("no GitLab to post to: give --url and --project (in CI: "
                         "$CI_SERVER_URL, $CI_PROJECT_ID)")
    print(publish(read_bisection(Path(args.result)), url=url, project=project,
                  credentials=bisect_credentials(),
                  report_url=args.report_url or job_report_url()))
    return 0


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    bisect = sub.add_parser("bisect", help="bisect a latency regression to its commit and "
                                           "option, measuring each step on the rack")
    actions = bisect.add_subparsers(dest="action", required=True)
    run = actions.add_parser("run", help="from a good and a bad commit of the lab repository "
                                         "to the culprit commit and option")
    run.add_argument("--good", required=True, help="a commit whose kernel is good")
    run.add_argument("--bad", required=True, help="a later commit whose kernel regressed")
    run.add_argument("--repo", default=".", help="the lab repository (default: .)")
    run.add_argument("--board", required=True, help="a board of kernel/boards.yaml (imx6q, "
                                                    "rpi3)")
    run.add_argument("--flavour", required=True, choices=("std", "rt"),
                     help="the image flavour (thresholds.yaml's)")
    run.add_argument("--kernel-flavour", help="the kernel/flavours.yaml flavour whose "
                                              "fragments make a commit's configuration "
                                              "(default: the pipeline's for --flavour)")
    run.add_argument("--case", required=True, help="the case that regressed, "
                                                   "scenario/intervalus (e.g. "
                                                   "hackbench/1000us)")
    run.add_argument("--kernel-source", choices=("debian", "build"), default="debian",
                     help="debian: Debian's kernel for every point, the configuration's "
                          "test devices on its command line; build: each point's kernel "
                          "built from its commit's kernel/ folder, with ccache "
                          "(docs/bisect.md)")
    run.add_argument("--duration", type=int, default=60,
                     help="seconds of measurement per boot (default 60)")
    run.add_argument("--rounds", type=int, default=6,
                     help="a step's budget: rounds of one boot of each point per place "
                          "(default 6)")
    run.add_argument("--confidence", type=float, default=0.98,
                     help="a step's decision confidence (default 0.98)")
    run.add_argument("--quantile", type=float, default=0.999,
                     help="the lowest quantile a step compares (default 0.999, the gate's "
                          "tail; the decades above it are compared too where the boots are "
                          "long enough)")
    run.add_argument("--rack", choices=("virtual", "lab"), default="lab",
                     help="lab: the coordinator's places (default); virtual: the QEMU rack, "
                          "started if needed")
    run.add_argument("--env", help="labgrid environment (default: env/rack.yaml, or "
                                   "env/virtual.yaml for the virtual rack)")
    run.add_argument("--coordinator", default="127.0.0.1:20408")
    run.add_argument("--board-prefix", help="prefix of the places' board tags (default: "
                                            "none, qemu- on the virtual rack)")
    run.add_argument("--places", type=places_arg, default=0, metavar="N|all",
                     help="how many healthy places take part (default: all)")
    run.add_argument("--reserve-timeout", type=float, default=3600.0)
    run.add_argument("--suite", help="the suite file the boards run (default: suite.yaml)")
    run.add_argument("--out", default="out/bisect", help="result.json, report/, the steps' "
                                                        "runs (default out/bisect)")
    run.add_argument("--db", help="results database URL (default: $RTLAB_RESULTS_DB, else "
                                  "results.db in --out)")
    run.set_defaults(func=_run)
    publish = actions.add_parser("publish", help="post a bisection's result on the culprit's "
                                                 "merge requests, or its commit")
    publish.add_argument("--result", default="out/bisect/result.json")
    publish.add_argument("--url", help="GitLab (default: $CI_SERVER_URL)")
    publish.add_argument("--project", help="project id or path (default: $CI_PROJECT_ID)")
    publish.add_argument("--report-url", help="where the report page is (default in CI: "
                                              "this job's artifact out/bisect/report/"
                                              "index.html)")
    publish.set_defaults(func=_publish)
