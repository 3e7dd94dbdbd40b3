"""``rtlab results …``: fill the results store and look into it."""

import argparse
import os
from pathlib import Path

from rtlab.store import DEFAULT_URL, URL_VARIABLE, ingest_paths, open_store
from rtlab.store.gitlab import DEFAULT_JOB_PATTERN, DEFAULT_STAGE, default_out, pull
from rtlab.util.gitlab import JOB_TOKEN_VARIABLE, TOKEN_VARIABLE, Credentials


def _ingest(args: argparse.Namespace) -> int:
    paths = [Path(path) for path in args.paths]
    store = open_store(args.db)
    try:
        print(f"{', '.join(args.paths)}: {ingest_paths(store, paths)}")
    finally:
        store.close()
    return 0


def _pull(args: argparse.Namespace) -> int:
    if args.pipelines == 0:
        # a job whose lab keeps the history in RTLAB_RESULTS_DB sets -n 0: no GitLab
        # request, no token needed
        print("-n 0: no pipelines to pull; the store's history is used as it is")
        return 0
    url = args.url or os.environ.get("CI_SERVER_URL")
    project = args.project or os.environ.get("CI_PROJECT_ID")
    if not url or not project:
        raise ValueError("which GitLab project? --url and --project, or $CI_SERVER_URL "
                         "and $CI_PROJECT_ID (set in every CI job)")
    report = pull(url=url, project=project, credentials=Credentials.from_environment(),
                  out=Path(args.out) if args.out else default_out(),
                  ref=args.ref or os.environ.get("CI_DEFAULT_BRANCH"),
                  pipelines=args.pipelines, stage=args.stage,
                  job_pattern=args.job_name_pattern)
    print(report)
    if not args.ingest:
        return 0
    store = open_store(args.db)
    try:
        # one transaction per job: a garbled artifact refuses its job, and names it
        for job in report.jobs:
            if job.files:
                print(f"{job.folder}: {ingest_paths(store, [job.folder])}")
    finally:
        store.close()
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from sqlalchemy.engine import make_url

    from rtlab.store import connect, default_url
    from rtlab.store.migrate import current, head, upgrade

    shown = make_url(args.db or default_url()).render_as_string(hide_password=True)
    engine = connect(args.db, upgrade=False)
    try:
        before = current(engine)
        upgrade(engine)  # in one transaction, as opening a store does
        print(f"{shown}: schema at revision {current(engine)}"
              + (f" (was {before or 'empty'})" if before != head() else " (already)"))
    finally:
        engine.dispose()
    return 0


def add_db_option(parser: argparse.ArgumentParser) -> None:
    # the variable's name, never its value: a lab database's URL holds its password
    parser.add_argument("--db", default=None,
                        help=f"results database URL (default: ${URL_VARIABLE}, else "
                             f"{DEFAULT_URL})")


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    results = sub.add_parser("results", help="the results store: ingest records, pull "
                                             "earlier pipelines' artifacts")
    actions = results.add_subparsers(dest="action", required=True)
    ingest = actions.add_parser(
        "ingest", help="add result records and JUnit files to the store, in one "
                       "transaction; cases already stored are recognised and left alone, "
                       "and a JUnit test case adds a case only when no record tells of it")
    ingest.add_argument("paths", nargs="+", metavar="PATH",
                        help="folders (searched recursively for *.json records and *.xml "
                             "JUnit files), or record and JUnit files")
    add_db_option(ingest)
    ingest.set_defaults(func=_ingest)

    pulling = actions.add_parser(
        "pull", help="download the result records and JUnit files of earlier pipelines' "
                     f"test jobs from GitLab (token: ${TOKEN_VARIABLE}, else "
                     f"${JOB_TOKEN_VARIABLE}); jobs already pulled are not downloaded again")
    pulling.add_argument("--url", help="GitLab URL (default: $CI_SERVER_URL)")
    pulling.add_argument("--project", help="project id or path (default: $CI_PROJECT_ID)")
    pulling.add_argument("--ref", help="branch or tag whose pipelines to pull (default: "
                                       "$CI_DEFAULT_BRANCH, else the project's default "
                                       "branch)")
    pulling.add_argument("-n", "--pipelines", type=int, default=20,
                         help="how many of the newest finished (successful or failed) "
                              "pipelines (default: 20; 0: none, nothing asked of GitLab)")
    pulling.add_argument("--stage", default=DEFAULT_STAGE,
                         help=f"the test jobs' stage (default: {DEFAULT_STAGE})")
    pulling.add_argument("--job-name-pattern", default=DEFAULT_JOB_PATTERN,
                         help="or a regular expression the test jobs' names match "
                              f"(default: {DEFAULT_JOB_PATTERN!r})")
    pulling.add_argument("--out", default=None,
                         help="where the jobs' files go, as <pipeline>/<job>/… (default: "
                              ".cache/pulled; $RTLAB_CACHE moves .cache)")
    pulling.add_argument("--ingest", action="store_true",
                         help="then ingest every pulled job into the store")
    add_db_option(pulling)
    pulling.set_defaults(func=_pull)

    migrating = actions.add_parser(
        "migrate", help="bring the store's schema to this rtlab's revision now (any "
                        "command that opens the store does it too; a lab does it once "
                        "after upgrading rtlab, with a role that may alter tables)")
    add_db_option(migrating)
    migrating.set_defaults(func=_migrate)
