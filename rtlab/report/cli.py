"""``rtlab report``: the store's latest cases, trends and comparisons as HTML + PNGs, a
GitLab metrics file and a markdown summary."""

import argparse
import os
from pathlib import Path

from rtlab.report.selection import DEFAULT_BASELINE_RUNS, DEFAULT_MAX_SERIES, Selection
from rtlab.store import URL_VARIABLE, default_url, open_store


def _report_link(out_dir: Path) -> str | None:
    """In a GitLab job, where the page will be among the job's artifacts (the folder
    must be inside the checkout for GitLab to keep it)."""
    job_url, project_dir = os.environ.get("CI_JOB_URL"), os.environ.get("CI_PROJECT_DIR")
    if not job_url or not project_dir:
        return None
    try:
        relative = (out_dir.resolve() / "report.html").relative_to(Path(project_dir).resolve())
    except ValueError:
        return None
    return f"{job_url}/artifacts/file/{relative.as_posix()}"


def _report(args: argparse.Namespace) -> int:
    from rtlab.report.build import write_report
    from rtlab.report.data import group_name

    if args.campaign:
        # the campaign's report is rtlab.campaign's (it reads the campaign's file); its
        # register hands the report command this function
        campaign_report = getattr(args, "campaign_report", None)
        if campaign_report is None:
            raise ValueError("--campaign: no campaign report here (rtlab.campaign.cli's "
                             "register adds it)")
        return campaign_report(args)
    if args.campaign_run:
        raise ValueError("--campaign-run names an execution of a campaign: give --campaign")
    if args.bisect_changes and not args.changes:
        raise ValueError("--bisect-changes goes with --changes")
    if args.accept_change is not None or args.changes:
        return _changes(args)

    if args.baseline_runs < 0 or args.max_series < 0:
        raise ValueError("--baseline-runs and --max-series must not be negative")
    selection = Selection(
        boards=tuple(args.board), flavours=tuple(args.flavour),
        candidate_ref=args.candidate_ref, candidate_pipeline=args.candidate_pipeline,
        baseline_ref=args.baseline_ref, baseline_runs=args.baseline_runs,
        max_series=args.max_series, tail_estimates=args.tail_estimates,
        changes=not args.no_changes)
    out_dir = Path(args.out)
    store = open_store(args.db)
    try:
        written = write_report(store, out_dir, selection,
                               thresholds_path=Path(args.thresholds) if args.thresholds
                               else None,
                               report_link=args.report_url or _report_link(out_dir))
    finally:
        store.close()
    data = written.data
    counts = ", ".join(f"{count} {verdict}" for verdict, count in data.counts().items()
                       if count)
    print(f"{len(data.rows)} series ({counts or 'none stored'}); "
          f"{len(data.regressions)} regression(s) against {selection.baseline_name}")
    print(f"report:  {written.html} ({len(written.pngs)} figures beside it)")
    print(f"metrics: {written.metrics}")
    print(f"summary: {written.summary}")
    if data.left_out:
        print(f"not plotted (--max-series {selection.max_series}): "
              + ", ".join(group_name(g) for g in data.left_out))
    # the verdict is the case's own (rtlab.verdict.case judged it when it ran, and its
    # test job failed the pipeline): the report repeats it, it does not judge again
    for row in data.rows:
        if row.verdict == "fail":
            print(f"fail: {row.case.name}: {row.case.message}")
    return 0


def _changes(args: argparse.Namespace) -> int:
    """``--changes``: the open change points for a terminal; ``--accept-change``."""
    from rtlab.report.changes import find, terminal
    from rtlab.store.changes import accept_change
    from rtlab.verdict.thresholds import DEFAULT_PATH, load_thresholds

    store = open_store(args.db)
    try:
        with store.session() as session:
            if args.accept_change is not None:
                if not args.why:
                    raise ValueError("--accept-change needs --why (the merge request or "
                                     "label that accepts it)")
                row = accept_change(session, args.accept_change, args.why)
                print(f"change point #{row.id} accepted ({args.why}): the baselines of "
                      f"{row.board}/{row.flavour}/{row.scenario}/{row.interval_us}us start "
                      f"at {row.first_after_started:%Y-%m-%d %H:%M}")
                return 0
            path = Path(args.thresholds) if args.thresholds else DEFAULT_PATH
            # an installed rtlab without the repository's file reads the default quantile
            thresholds = load_thresholds(path) if args.thresholds or path.is_file() else None
            print(terminal(find(session, args.baseline_ref, boards=args.board,
                                flavours=args.flavour, thresholds=thresholds)), end="")
        if args.bisect_changes:
            from rtlab.report.bisect_trigger import from_environment

            if args.baseline_ref is None:
                raise ValueError("--bisect-changes needs the default branch (--baseline-ref)")
            started = from_environment(store, args.baseline_ref)
            print(f"{len(started)} bisection(s) started")
    finally:
        store.close()
    return 0


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    report = sub.add_parser(
        "report", help="HTML report with latency histograms, trends and candidate vs "
                       "baseline, a GitLab metrics file and a merge-request summary",
        description="Write report.html (self-contained, figures embedded), the figures as "
                    "PNG files, metrics.txt (OpenMetrics, for GitLab's reports: metrics) "
                    "and summary.md (for a merge-request comment) from the results store.")
    report.add_argument("--db", default=None,
                        help=f"results database URL (default: ${URL_VARIABLE}, else "
                             f"{default_url()})")
    report.add_argument("--out", default="report", help="output folder (default: report)")
    report.add_argument("--board", action="append", default=[],
                        help="only this board (repeatable; default: all)")
    report.add_argument("--flavour", action="append", default=[],
                        help="only this kernel flavour (repeatable; default: all)")
    candidate = report.add_mutually_exclusive_group()
    candidate.add_argument("--candidate-ref",
                           help="the candidate is the newest run on this branch (e.g. a "
                                "merge request's source branch); default: the newest run "
                                "of each series")
    candidate.add_argument("--candidate-pipeline",
                           help="the candidate is this pipeline's run (CI_PIPELINE_ID)")
    report.add_argument("--baseline-ref", default="main",
                        help="branch whose runs are the baseline (default: main)")
    report.add_argument("--baseline-runs", type=int, default=DEFAULT_BASELINE_RUNS,
                        help=f"how many of its newest runs (default: {DEFAULT_BASELINE_RUNS})")
    report.add_argument("--thresholds",
                        help="thresholds file whose limits the trends draw (default: the "
                             "repository's thresholds.yaml)")
    report.add_argument("--max-series", type=int, default=DEFAULT_MAX_SERIES,
                        help="draw figures for at most this many series, whole board × "
                             "flavour × scenario groups at a time, failures and errors "
                             f"first (default: {DEFAULT_MAX_SERIES}; 0: no figures); the "
                             "report lists the groups left out")
    report.add_argument("--tail-estimates", action="store_true",
                        help="add a tail estimate per case (peaks over threshold: chance "
                             "of crossing max_us per hour); about 0.1 s per case")
    report.add_argument("--changes", action="store_true",
                        help="instead: find the change points of every series on the "
                             "baseline branch, keep them in the store and print the open "
                             "ones (new ones marked), without writing a report")
    report.add_argument("--bisect-changes", action="store_true",
                        help="with --changes: start one bisection pipeline (the bisect job, "
                             "through GitLab's trigger API: $RTLAB_BISECT_TRIGGER_TOKEN, "
                             "$CI_SERVER_URL, $CI_PROJECT_ID) for every open regression "
                             "change point that has none")
    report.add_argument("--no-changes", action="store_true",
                        help="a report without change points (it then writes nothing to "
                             "the store)")
    report.add_argument("--accept-change", type=int, metavar="ID",
                        help="instead: accept change point ID (with --why): the series' "
                             "baselines start after it (docs/verdicts.md)")
    report.add_argument("--why", help="with --accept-change: what accepts it (a merged "
                                      "merge request, a label)")
    report.add_argument("--campaign", metavar="NAME",
                        help="instead: the report of a campaign (campaigns/NAME.yaml or a "
                             "file): per board the maximum, quantiles and average against "
                             "the load per variant, every pair's shift per quantile with its "
                             "interval, the load proof, per-CPU histograms")
    report.add_argument("--campaign-run", metavar="ID",
                        help="with --campaign: which execution (default: the newest)")
    report.add_argument("--report-url",
                        help="link to the page in summary.md (default in a GitLab job: "
                             "its artifact URL)")
    report.set_defaults(func=_report)
