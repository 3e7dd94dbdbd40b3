"""``rtlab campaign …``: a study across kernel variants (``campaigns/*.yaml``). ``check``
validates campaign files; ``kernels``, ``images`` and ``test`` are the pipeline's stages
for one board, looping over the campaign's variants; ``run`` does all of it on one machine
(the virtual rack by default), then ingests and writes the campaign report."""

import argparse
import os
import sys
import time
from pathlib import Path

from rtlab.util import paths
from rtlab.util.commands import places_arg


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _ints(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"a comma-separated list of µs, got {text!r}") from None


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _optional_int(text: str) -> int | None:
    # a CI variable left empty: the campaign file's value
    if text == "":
        return None
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a positive number, got {text!r}")
    return int(text)


def _load(args: argparse.Namespace):  # noqa: ANN202 - a Campaign
    from rtlab.campaign.spec import load_campaign

    campaign = load_campaign(args.campaign)
    return campaign.narrowed(boards=getattr(args, "boards", None),
                             scenarios=getattr(args, "scenarios", None),
                             intervals_us=getattr(args, "intervals", None),
                             duration_s=getattr(args, "duration", None),
                             repeat=getattr(args, "repeat", None))


def _out(args: argparse.Namespace, name: str) -> Path:
    from rtlab.campaign.stages import default_out

    return Path(args.out) if args.out else default_out(name)


def _check(args: argparse.Namespace) -> int:
    from rtlab.campaign.spec import all_campaigns, load_campaign

    files = [Path(f) if ("/" in f or f.endswith(".yaml")) else f for f in args.campaigns]
    for entry in files or all_campaigns():
        campaign = load_campaign(entry)
        runs = (len(campaign.scenarios) * len(campaign.intervals_us) * len(campaign.variants)
                * campaign.repeat)
        print(f"{campaign.source}: valid; {len(campaign.variants)} variants, "
              f"{len(campaign.boards)} boards, {len(campaign.pairs)} pair(s); "
              f"{runs * campaign.duration_s / 3600:.3g} h of measurement per board type")
    return 0


def _board(args: argparse.Namespace, campaign) -> str:  # noqa: ANN001 - a Campaign
    if args.board not in campaign.boards:
        print(f"{args.board}: not a board of campaign {campaign.name} "
              f"({', '.join(campaign.boards)}): nothing to do")
        return ""
    return args.board


def _kernels(args: argparse.Namespace) -> int:
    from rtlab.campaign.stages import provide_kernels

    campaign = _load(args)
    if _board(args, campaign):
        provide_kernels(campaign, args.board, _out(args, campaign.name), _progress)
    return 0


def _images(args: argparse.Namespace) -> int:
    from rtlab.campaign.stages import build_images

    campaign = _load(args)
    if _board(args, campaign):
        build_images(campaign, args.board, _out(args, campaign.name), _progress)
    return 0


def _rack(args: argparse.Namespace, virtual: bool):  # noqa: ANN202 - a Rack
    from rtlab.campaign.stages import Rack

    prefix = args.board_prefix
    if prefix is None:
        prefix = "qemu-" if virtual else ""
    env = args.env or os.fspath(paths.REPO_ROOT / "env" / ("virtual.yaml" if virtual
                                                            else "rack.yaml"))
    return Rack(env_file=Path(env), coordinator=args.coordinator, board_prefix=prefix,
                boards=args.places, reserve_timeout_s=args.reserve_timeout,
                suite=Path(args.suite).resolve() if args.suite else None)


def _test(args: argparse.Namespace) -> int:
    from rtlab.campaign.stages import campaign_run_id, run_tests

    campaign = _load(args)
    if not _board(args, campaign):
        return 0
    measured = run_tests(campaign, args.board, _out(args, campaign.name),
                         _rack(args, virtual=False), campaign_run_id(campaign.name,
                                                                     args.campaign_run),
                         _progress)
    return max((m.exit_code for m in measured), default=0)


def _run(args: argparse.Namespace) -> int:
    from rtlab.campaign.local import run_campaign
    from rtlab.campaign.stages import campaign_run_id
    from rtlab.store import URL_VARIABLE

    campaign = _load(args)
    out = _out(args, campaign.name)
    virtual = args.rack == "virtual"
    db = args.db or os.environ.get(URL_VARIABLE) or f"sqlite:///{(out / 'results.db').resolve()}"
    outcome = run_campaign(campaign, out=out, rack=_rack(args, virtual), virtual=virtual,
                           campaign_run=campaign_run_id(campaign.name, args.campaign_run),
                           db_url=db, progress=_progress)
    print(outcome.summary.read_text(encoding="utf-8"))
    print(f"report: {outcome.report}")
    if virtual:
        print("(virtual rack: emulated latencies test the path and the report, they "
              "cannot rank kernels)", file=sys.stderr)
    return outcome.exit_code


def _add_narrowing(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=_optional_int, metavar="SECONDS",
                        help="seconds per case instead of the file's duration_s (empty: "
                             "the file's)")
    parser.add_argument("--repeat", type=_optional_int,
                        help="runs of each variant instead of the file's repeat")
    parser.add_argument("--scenarios", type=_names,
                        help="only these of the campaign's scenarios (comma-separated)")
    parser.add_argument("--intervals", type=_ints,
                        help="only these of the campaign's intervals (µs, comma-separated)")


def _add_rack(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", help="labgrid environment (default: env/rack.yaml, or "
                                      "env/virtual.yaml for the virtual rack)")
    parser.add_argument("--coordinator", default="127.0.0.1:20408")
    parser.add_argument("--board-prefix", help="prefix of the places' board tags (default: "
                                               "none, qemu- on the virtual rack)")
    parser.add_argument("--places", type=places_arg, default=0, metavar="N|all",
                        help="how many healthy places of a board type share a variant's "
                             "cases (default: all)")
    parser.add_argument("--reserve-timeout", type=float, default=3600.0,
                        help="seconds to wait for a free place (default 3600)")
    parser.add_argument("--suite", help="the suite file the boards run (default: "
                                        "suite.yaml; its scenarios must include the "
                                        "campaign's)")
    parser.add_argument("--campaign-run",
                        help="the execution's name every record carries (default: "
                             "$RTLAB_CAMPAIGN_RUN, else gitlab:$CI_PIPELINE_ID, else the "
                             "campaign and the time)")


def _campaign_report(args: argparse.Namespace) -> int:
    from rtlab.campaign.page import write_campaign_report
    from rtlab.campaign.spec import load_campaign
    from rtlab.store import open_store

    campaign = load_campaign(args.campaign)
    store = open_store(args.db)
    try:
        written = write_campaign_report(store, campaign, Path(args.out),
                                        campaign_run=args.campaign_run)
    finally:
        store.close()
    data = written.data
    outcomes: dict[str, int] = {}
    for row in data.pairs:
        for shift in row.shifts:
            outcomes[shift.outcome] = outcomes.get(shift.outcome, 0) + 1
    print(f"campaign {campaign.name}, execution {data.campaign_run}: {len(data.cells)} cells "
          f"on {', '.join(data.boards)}; shifts: "
          + (", ".join(f"{count} {outcome}" for outcome, count in outcomes.items())
             or "none compared"))
    print(f"report:  {written.html} ({len(written.pngs)} figures beside it)")
    print(f"summary: {written.summary}")
    print(f"tables:  {written.json}")
    return 0


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    # `rtlab report --campaign NAME` (rtlab.report.cli makes the command and its options)
    report = sub.choices.get("report")
    if report is None:
        raise ValueError("rtlab.report.cli registers `rtlab report` before rtlab.campaign")
    report.set_defaults(campaign_report=_campaign_report)
    campaign = sub.add_parser("campaign", help="studies across kernel variants "
                                               "(campaigns/*.yaml)")
    actions = campaign.add_subparsers(dest="action", required=True)
    check = actions.add_parser("check", help="validate campaign files (default: every file "
                                             "of campaigns/)")
    check.add_argument("campaigns", nargs="*", help="names (hardening) or files")
    check.set_defaults(func=_check)
    for action, func, what in (
            ("kernels", _kernels, "every variant's kernel for one board: built with ccache "
                                  "from kernel/ (flavour + fragments), or Debian's"),
            ("images", _images, "every variant's SD image for one board"),
            ("test", _test, "every variant's cases on one board type of the rack, each "
                            "variant 'repeat' times (a fresh flash and boot each)")):
        stage = actions.add_parser(action, help=what)
        stage.add_argument("campaign", help="a campaign's name (campaigns/NAME.yaml) or file")
        stage.add_argument("--board", required=True, help="a board of the campaign (imx6q, "
                                                          "rpi3); others: nothing to do")
        stage.add_argument("--out", help="the campaign's folder (default: "
                                         "out/campaign/<name>)")
        if action == "test":
            _add_narrowing(stage)
            _add_rack(stage)
        stage.set_defaults(func=func)
    run = actions.add_parser(
        "run", help="the whole campaign on this machine: kernels, images, runs (the virtual "
                    "rack by default), ingest, report")
    run.add_argument("campaign", help="a campaign's name (campaigns/NAME.yaml) or file")
    run.add_argument("--rack", choices=("virtual", "lab"), default="virtual",
                     help="virtual: the QEMU rack, started if needed (default); lab: the "
                          "coordinator's places")
    run.add_argument("--boards", type=_names, help="only these of the campaign's boards")
    _add_narrowing(run)
    _add_rack(run)
    run.add_argument("--out", help="the campaign's folder (default: out/campaign/<name>)")
    run.add_argument("--db", help="results database URL (default: $RTLAB_RESULTS_DB, else "
                                  "results.db in the campaign's folder)")
    run.set_defaults(func=_run)
