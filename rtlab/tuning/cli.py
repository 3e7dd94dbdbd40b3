"""``rtlab thresholds suggest|replay|propose``: tune the gate from the results store, show
which stored runs a thresholds file (a branch's) would fail, and propose the tuning as a
merge request of its own. Each prints markdown, ready for a merge request's description.
The method is in :mod:`rtlab.tuning`."""

import argparse
import datetime
import os
import tempfile
from pathlib import Path

from sqlalchemy.engine import make_url

from rtlab.measure.suite import load_suite
from rtlab.store import URL_VARIABLE, default_url, open_store
from rtlab.tuning import Method, gitbranch, relabel, replay, suggest, thresholds_at
from rtlab.tuning.evidence import MAX_FROM
from rtlab.tuning.proposal import make_proposal
from rtlab.tuning.publish import (
    DEFAULT_BRANCH,
    DEFAULT_LABELS,
    TOKEN_VARIABLE,
    Target,
    credentials_from_environment,
    publish,
)
from rtlab.tuning.rates import limit_rates
from rtlab.util.commands import actions_of
from rtlab.util.paths import REPO_ROOT
from rtlab.verdict.cli import check as validate_thresholds
from rtlab.verdict.thresholds import ThresholdsError, load_thresholds

_DEFAULTS = Method()


def _db_url(value: str | None) -> str:
    """A database URL, or the path of an SQLite file. A report never creates a database:
    a mistyped path is an error, not an empty history."""
    url = value or default_url()
    if "://" not in url:
        url = f"sqlite:///{Path(url).resolve()}"
    parsed = make_url(url)
    if (parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:")
            and not Path(parsed.database).is_file()):
        raise FileNotFoundError(f"{parsed.database}: no such results database")
    return url


def _when(text: str) -> datetime.datetime:
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not a date: {text!r} (e.g. 2026-10-01)") from error
    return when.replace(tzinfo=datetime.UTC) if when.tzinfo is None else when


def _method(args: argparse.Namespace) -> Method:
    return Method(quantile=args.quantile, margin=args.margin, min_runs=args.min_runs,
                  merge=args.merge, figures=args.figures, max_from=args.max_from,
                  pipeline_cases=args.pipeline_cases)


def _check(args: argparse.Namespace) -> int:
    print(validate_thresholds(Path(args.file), Path(args.suite)))
    if args.db:
        print(limit_rates(args.db, Path(args.file), Path(args.suite),
                          pipeline_cases=args.pipeline_cases))
    return 0


def _suggest(args: argparse.Namespace) -> int:
    method = _method(args)
    store = open_store(_db_url(args.db))
    try:
        with store.session() as session:
            result = suggest(session, Path(args.file), board=args.board,
                             flavour=args.flavour, suite=load_suite(Path(args.suite)),
                             ref=args.ref, since=args.since, last=args.last, method=method,
                             write=not args.dry_run)
    finally:
        store.close()
    print(result.markdown(), end="")
    if result.written:
        print(f"\nWrote {len(result.changes)} limit(s) to {args.file}; it loads and gives "
              "every case the limit in the table.")
    elif result.changes:
        print(f"\nDry run: {args.file} left as it is ({len(result.changes)} limit(s) would "
              "change).")
    return 0


def _replay(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="rtlab-replay-") as workdir:
        path, suite_path, label = thresholds_at(Path(args.file), args.git_ref,
                                                Path(args.suite) if args.suite else None,
                                                Path(workdir))
        suite = load_suite(suite_path) if suite_path else load_suite()
        try:
            thresholds = load_thresholds(path, suite)
        except ThresholdsError as error:
            raise ThresholdsError(str(error).replace(str(path), label)) from error
    if args.git_ref:
        thresholds = relabel(thresholds, label)
    else:
        # the repository's file by its path in the repository, as the gate cites it
        label = thresholds.display
    store = open_store(_db_url(args.db))
    try:
        with store.session() as session:
            result = replay(session, thresholds, label=label, board=args.board,
                            flavour=args.flavour, ref=args.ref, since=args.since)
    finally:
        store.close()
    print(result.markdown(max_rows=args.max_rows or None), end="")
    if args.fail_on_new_failures and result.new_failures:
        return 1
    return 0


def _propose(args: argparse.Namespace) -> int:
    url = args.url or os.environ.get("CI_SERVER_URL")
    project = args.project or os.environ.get("CI_PROJECT_ID")
    if not args.dry_run and (not url or not project):
        raise ValueError("which GitLab project? --url and --project, or $CI_SERVER_URL "
                         "and $CI_PROJECT_ID (set in every CI job)")
    # before any work: a job without its token fails at once
    credentials = None if args.dry_run else credentials_from_environment()
    file = Path(args.file)
    root = gitbranch.toplevel(file.resolve())
    base = gitbranch.resolve(root, args.base)
    name = gitbranch.relative(root, file)
    target_branch = args.target or os.environ.get("CI_DEFAULT_BRANCH")
    labels = (f"{target_branch or base[:8]}:{name}", f"{args.branch}:{name}")
    store = open_store(_db_url(args.db))
    try:
        with store.session() as session:
            proposal = make_proposal(session, file, base, name=name, boards=args.board or (),
                                     ref=args.ref, since=args.since, last=args.last,
                                     method=_method(args), labels=labels)
    finally:
        store.close()
    made_by = os.environ.get("CI_PIPELINE_URL")
    print(proposal.summary(), end="")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "proposal.md").write_text(proposal.description(made_by), encoding="utf-8")
        if proposal.changed:
            (out / Path(name).name).write_text(proposal.text, encoding="utf-8")
        print(f"the proposal's description{' and file' if proposal.changed else ''}: {out}")
    if args.dry_run:
        print("dry run: nothing pushed, no merge request opened or updated"
              if proposal.changed else "nothing to change")
        return 0
    assert credentials is not None and url and project
    # GitLab's own notation: labels separated by commas
    labels = tuple(dict.fromkeys(label.strip() for value in args.label or DEFAULT_LABELS
                                 for label in value.split(",") if label.strip()))
    target = Target(url, project, branch=args.branch, target_branch=target_branch,
                    labels=labels)
    outcome = publish(proposal, target, credentials, repository=root, made_by=made_by)
    print(outcome.message)
    return 0


def _method_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--last", type=int, help="only the newest N runs of each case "
                                                  "(of its longest measured length)")
    command.add_argument("--quantile", type=float, default=_DEFAULTS.quantile,
                         help=f"of the worst-CPU figures (default {_DEFAULTS.quantile:g}; "
                              "the maximum when there are too few runs to leave any out)")
    command.add_argument("--margin", type=float, default=_DEFAULTS.margin,
                         help=f"factor on the quantile (default {_DEFAULTS.margin:g})")
    command.add_argument("--min-runs", type=int, default=_DEFAULTS.min_runs,
                         help=f"fewer measured runs of a case's longest measured length "
                              f"leave its limit as it is (default {_DEFAULTS.min_runs}; the "
                              "shorter runs are left out and counted)")
    command.add_argument("--merge", type=float, default=_DEFAULTS.merge,
                         help="a shared limit may be this fraction above a case's own "
                              f"suggestion (default {_DEFAULTS.merge:g}; 0: only equal "
                              "suggestions share a level)")
    command.add_argument("--figures", type=int, default=_DEFAULTS.figures,
                         help=f"significant figures to round up to (default "
                              f"{_DEFAULTS.figures})")
    command.add_argument("--max-from", choices=MAX_FROM, default=_DEFAULTS.max_from,
                         help="max_us of a cyclictest case: 'exposure' (default), the "
                              "latency its runs exceed with at most its share of the "
                              "pipeline's error budget, from every CPU's wake-ups pooled; "
                              "'quantile': the --quantile of its runs' maxima × --margin")
    command.add_argument("--pipeline-cases", type=int, default=None,
                         help="the pipeline's gated latency cases sharing its error budget "
                              "(default: the newest stored record's pipeline_cases, else "
                              "16)")


def _common(parser: argparse.ArgumentParser, *names: str) -> None:
    db_help = (f"results database URL or SQLite file (default: ${URL_VARIABLE}, else "
               f"{default_url()})")
    if "from" in names:
        parser.add_argument("--from", "--db", dest="db", metavar="DB", help=db_help)
    else:
        parser.add_argument("--db", help=db_help)
    parser.add_argument("--file", default=str(REPO_ROOT / "thresholds.yaml"),
                        help="the thresholds file (default: the repository's)")
    parser.add_argument("--ref", help="only runs made for this ref (CI_COMMIT_REF_NAME), "
                                      "e.g. main; default: any")
    parser.add_argument("--since", type=_when, help="only runs started on or after this "
                                                    "date (ISO, UTC unless it says)")


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add ``suggest``, ``replay`` and ``propose`` to the ``rtlab thresholds``
    sub-commands (rtlab.verdict.cli makes the command)."""
    actions = actions_of(sub, "thresholds")
    check = actions.choices["check"]
    check.add_argument("--db", help="also report the false red each cyclictest case's "
                                    "max_us implies, from the series' stored wake-ups, "
                                    "against its share of the error budget (a results "
                                    "database URL or SQLite file)")
    check.add_argument("--pipeline-cases", type=int, default=None,
                       help="the pipeline's gated cases (default: the newest stored "
                            "record's, else 16)")
    check.set_defaults(func=_check)
    command = actions.add_parser(
        "suggest", help="propose limits from the results store and write them into the "
                        "thresholds file (comments and layout kept)",
        description="Per case of the board (and flavour), the --quantile of the worst "
                    "CPU's figure over the measured runs of the case's longest measured "
                    "length (within 10 %; a maximum grows with the number of wake-ups, "
                    "so shorter runs are left out and counted) × --margin, rounded up, "
                    "written "
                    "where it serves most cases; prints a markdown table for the merge "
                    "request. See rtlab/tuning/suggest.py for the method.")
    command.add_argument("--board", required=True, help="a board tag, e.g. imx6q")
    command.add_argument("--flavour", help="only this flavour (default: all of the board's)")
    _common(command, "from")
    command.add_argument("--suite", default=str(REPO_ROOT / "suite.yaml"),
                         help="suite file: the cases there are (default: the repository's)")
    _method_options(command)
    command.add_argument("--dry-run", action="store_true",
                         help="print the table, leave the file as it is")
    command.set_defaults(func=_suggest)

    command = actions.add_parser(
        "replay", help="which stored runs a thresholds file (or a git ref's) would fail",
        description="Judge every stored measured case by the thresholds of --file, or of "
                    "that file at --git-ref, as the suite judges them; print the cases "
                    "that would fail and a summary per case. Exit 0: it is a report.")
    _common(command)
    command.add_argument("--git-ref", help="read the thresholds file (and suite.yaml next "
                                           "to it) at this git ref, e.g. a tuning branch")
    command.add_argument("--suite", help="suite file (default: the one at --git-ref, else "
                                         "the repository's)")
    command.add_argument("--board", help="only this board")
    command.add_argument("--flavour", help="only this flavour")
    command.add_argument("--max-rows", type=int, default=200,
                         help="failures listed at most (default 200; 0: all)")
    command.add_argument("--fail-on-new-failures", action="store_true",
                         help="exit 1 when a case that passed when it ran would fail now")
    command.set_defaults(func=_replay)

    command = actions.add_parser(
        "propose", help="suggest every board's limits and propose them as a merge request "
                        "(the tuning branch pushed, the merge request opened or updated)",
        description="Tune every board of the thresholds file as it is at --base (HEAD) from "
                    "the results store, as `suggest` does; when that changes the file, "
                    "commit it on --branch on top of --base, push it and open a merge "
                    "request on GitLab (or update the open one) whose description is the "
                    "suggestion's table and the replay's summary (how many stored runs the "
                    "file fails now and as proposed). Nothing to change: nothing opened. "
                    f"The token is ${TOKEN_VARIABLE}, from the environment only. See "
                    "rtlab/tuning/publish.py.")
    _common(command, "from")
    command.add_argument("--board", action="append",
                         help="only this board (repeatable; default: every board of the "
                              "file)")
    _method_options(command)
    command.add_argument("--base", default="HEAD",
                         help="the commit the tuning branch starts from and whose "
                              "thresholds file is tuned (default HEAD: in a scheduled "
                              "pipeline, the default branch's commit)")
    command.add_argument("--url", help="GitLab URL (default: $CI_SERVER_URL)")
    command.add_argument("--project", help="project id or path (default: $CI_PROJECT_ID)")
    command.add_argument("--branch", default=DEFAULT_BRANCH,
                         help=f"the tuning branch (default {DEFAULT_BRANCH}); the lab "
                              "rewrites it while it has only the lab's commits")
    command.add_argument("--target", help="the merge request's target branch (default: "
                                          "$CI_DEFAULT_BRANCH, else the project's default "
                                          "branch)")
    command.add_argument("--label", action="append",
                         help="labels of the merge request, comma-separated "
                              f"(repeatable; default: {', '.join(DEFAULT_LABELS)})")
    command.add_argument("--out", help="also write the description (proposal.md) and the "
                                       "proposed file into this folder (job artifacts)")
    command.add_argument("--dry-run", action="store_true",
                         help="print what would be proposed; no token, nothing pushed")
    command.set_defaults(func=_propose)
