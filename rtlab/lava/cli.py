"""``rtlab lava …``: render, validate, submit and fetch LAVA jobs, run a QEMU job here with
lava-run, and turn a finished job's log into result records and their JUnit report.
(``rtlab lava server``, the LAVA instance on this machine, is rtlab.lavaserver.cli's: it
adds its action to this command's, kept open through rtlab.util.commands.)"""

import argparse
import io
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ruamel.yaml import YAML

from rtlab.util import paths
from rtlab.util.commands import keep_actions

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rtlab.lava.plan import Plan
    from rtlab.lava.records import BaselineFor, LavaJob
    from rtlab.verdict.baseline import Baseline
    from rtlab.verdict.case import CasePlan
    from rtlab.verdict.thresholds import Thresholds

    Actions = argparse._SubParsersAction[argparse.ArgumentParser]

DEFAULT_OUT = Path("out") / "lava"


def _names(text: str | None) -> list[str] | None:
    # an empty value (a CI variable left empty) means the suite's default, like no option
    if not text:
        return None
    return [name.strip() for name in text.split(",") if name.strip()]


def _intervals(text: str | None) -> list[int] | None:
    names = _names(text)
    if names is None:
        return None
    try:
        return [int(name) for name in names]
    except ValueError:
        raise ValueError(f"--intervals: not a list of µs: {text!r}") from None


def _rt_tests(text: str | None) -> list[str] | None:
    if text == "none":
        return []
    return _names(text)


def _render(args: argparse.Namespace) -> int:
    from rtlab.lava.plan import board_model, image_facts, is_virtual, make_plan
    from rtlab.lava.render import (
        LavaRelease,
        boot_files,
        local_source,
        render_job,
        served_source,
    )
    from rtlab.measure.suite import load_suite
    from rtlab.util.atomic import write_atomic

    model = board_model(args.board)
    lava = (LavaRelease.parse(args.lava_version) if args.lava_version
            else LavaRelease.from_environment())
    image = Path(args.image) if args.image else paths.images_dir() / f"{model.name}-{args.flavour}"
    out = Path(args.out) if args.out else DEFAULT_OUT / f"{args.board}-{args.flavour}.yaml"
    boot_dir = Path(args.boot_dir) if args.boot_dir else out.with_name(f"{out.stem}-boot")
    if not is_virtual(args.board) and not args.boot_url:
        raise ValueError(f"--board {args.board} is a physical board: give --boot-url, where "
                         "its LAVA worker downloads the boot files (rtlab lava boot-files)")
    files = boot_files(image, boot_dir)
    if files.manifest["board"] != model.name or files.manifest["flavour"] != args.flavour:
        raise ValueError(f"{image}: the image is for {files.manifest['board']}/"
                         f"{files.manifest['flavour']}, not {model.name}/{args.flavour}")
    source = (served_source(files, args.boot_url) if args.boot_url
              else local_source(files, image / "sdcard.img"))
    plan = make_plan(board=args.board, flavour=args.flavour,
                     suite=load_suite(Path(args.suite) if args.suite else None),
                     scenarios=_names(args.scenarios), intervals=_intervals(args.intervals),
                     duration_s=args.duration, cmdline=files.cmdline,
                     image=image_facts(files.manifest), rt_tests=_rt_tests(args.rt_tests),
                     pipeline_jobs=args.pipeline_jobs)
    text = render_job(plan, source, job_name=args.job_name, priority=args.priority,
                      tags=_names(args.tags) or (), job_timeout_s=args.job_timeout,
                      queue_timeout_s=args.queue_timeout, lava=lava)
    write_atomic(out, text)
    measured = sum(1 for case in plan.cases if case.skip is None)
    print(f"{out}: {len(plan.cases)} case(s), {measured} measured, {args.duration} s each; "
          f"boot files in {boot_dir}")
    return 0


def _boot_files(args: argparse.Namespace) -> int:
    from rtlab.lava.render import boot_files

    files = boot_files(Path(args.image), Path(args.out))
    for name in (files.kernel, files.dtb, files.ramdisk):
        print(files.folder / name)
    print(f"kernel command line of the image: {files.cmdline}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from rtlab.lava.validate import validate

    passed, problems = validate([Path(p) for p in args.paths])
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 2
    print(f"{len(passed)} job(s) valid against LAVA's schema:\n  " + "\n  ".join(passed))
    return 0


def _submit(args: argparse.Namespace) -> int:
    from rtlab.lava.server import Server, submit_all

    server = Server.from_environment()
    for job, job_id in submit_all(server, [Path(p) for p in args.jobs]):
        print(f"{job}: job {job_id} {server.job_url(job_id)}")
    return 0


def _thresholds(args: argparse.Namespace) -> "Thresholds":
    from rtlab.measure.suite import load_suite
    from rtlab.verdict.thresholds import load_thresholds

    suite = load_suite(Path(args.suite) if args.suite else None)
    return load_thresholds(Path(args.thresholds) if args.thresholds else None, suite)


def _judge(args: argparse.Namespace, definition: str, definition_source: str, log_text: str,
           log_source: str, job: "LavaJob") -> int:
    from rtlab.lava.joblog import read_log
    from rtlab.lava.junit import default_path, job_junit
    from rtlab.lava.plan import plan_of_job
    from rtlab.lava.records import exit_code, job_records, job_status, summary, write_records
    from rtlab.verdict.junit import write_junit

    # GitLab's test report, as `rtlab run` leaves one; built from the records once written
    junit = Path(args.junit) if args.junit else default_path(Path(args.out), job)
    if junit.is_dir():
        # refused before any record is written, not after
        raise ValueError(f"--junit {junit}: is a folder; give the report's file name")
    plan = plan_of_job(definition, definition_source)
    thresholds = _thresholds(args)
    log = read_log(log_text, log_source, empty_ok=job.never_started is not None)
    records = job_records(plan, log, job, thresholds, _baseline_for(args, plan))
    written = write_records(Path(args.out) / "results", records)
    write_junit(junit, job_junit(plan, log, job, records, written))
    print(summary(records))
    print(f"{len(written)} record(s) in {Path(args.out) / 'results'}; JUnit: {junit}; "
          f"LAVA: {job_status(log, job)}")
    return exit_code(records)


def _fetch(args: argparse.Namespace) -> int:
    from rtlab.lava.records import LavaJob
    from rtlab.lava.server import Server, fetch, never_started
    from rtlab.util.atomic import write_atomic

    server = Server.from_environment()
    got = fetch(server, args.job_id, wait_s=args.wait, poll_s=args.poll)
    folder = Path(args.out) / f"job-{args.job_id}"
    write_atomic(folder / "definition.yaml", got.definition)
    # YAML, as lavacli shows a job, and no .json: `rtlab results ingest out/lava` reads
    # every .json below it as a result record
    details = io.StringIO()
    YAML(typ="safe", pure=True).dump(json.loads(json.dumps(got.details, default=str)), details)
    write_atomic(folder / "details.yaml", details.getvalue())
    write_atomic(folder / "log.yaml", got.log)
    job = LavaJob(job_id=args.job_id, server=server.host,
                  device=got.details.get("device"), device_type=got.details.get("device_type"),
                  url=server.job_url(args.job_id), health=got.details.get("health"),
                  never_started=never_started(got.details, got.definition))
    return _judge(args, got.definition, f"LAVA job {args.job_id} definition", got.log,
                  f"LAVA job {args.job_id} log", job)


def _records(args: argparse.Namespace) -> int:
    from rtlab.lava.records import LavaJob

    job_file, log_file = Path(args.job), Path(args.log)
    job = LavaJob(job_id=args.job_id or log_file.stem, server=args.server,
                  device=args.device)
    return _judge(args, job_file.read_text(encoding="utf-8"), str(job_file),
                  log_file.read_text(encoding="utf-8", errors="replace"), str(log_file), job)


def _local(args: argparse.Namespace) -> int:
    from rtlab.lava.local import run_local
    from rtlab.lava.records import LavaJob

    job_file, out = Path(args.job), Path(args.out)
    run = run_local(job_file, out, timeout_s=args.timeout)
    print(f"lava-run exited {run.exit_code} after {run.seconds:.0f} s; log {run.log}")
    return _judge(args, job_file.read_text(encoding="utf-8"), str(job_file),
                  run.log.read_text(encoding="utf-8", errors="replace"), str(run.log),
                  LavaJob(job_id=run.job_id, device="lava-run"))


def _judging_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--out", default=str(DEFAULT_OUT),
                         help="folder; the result records go to OUT/results, their JUnit "
                              f"to OUT/junit-lava-JOB_ID.xml (default: {DEFAULT_OUT})")
    command.add_argument("--junit", metavar="FILE",
                         help="the JUnit report (default: OUT/junit-lava-JOB_ID.xml)")
    command.add_argument("--suite", help="suite file (default: the repository's suite.yaml)")
    command.add_argument("--thresholds", help="thresholds file (default: thresholds.yaml)")
    command.add_argument("--baseline-db", metavar="URL",
                         help="the results store whose runs each latency case is compared "
                              "with, as `rtlab run` compares them (default: "
                              "$RTLAB_RESULTS_DB; without one the cases are judged by their "
                              "limits alone and say so)")
    command.add_argument("--baseline-ref", default=None,
                         help="the baseline's branch (default: $CI_DEFAULT_BRANCH, else "
                              "main; '' any)")


def _baseline_for(args: argparse.Namespace, plan: "Plan") -> "BaselineFor":
    """How the job's latency cases find their eligible baseline: in the results store,
    exactly as the on-board suite finds it (rtlab.store.query.case_baseline)."""
    import os

    from rtlab.lava.records import no_store
    from rtlab.store import URL_VARIABLE

    url = args.baseline_db or os.environ.get(URL_VARIABLE)
    if not url:
        return no_store
    ref = (args.baseline_ref if args.baseline_ref is not None
           else os.environ.get("CI_DEFAULT_BRANCH", "main")) or None

    def find(judge: "CasePlan", command: "Sequence[str]", cap_s: float) -> "Baseline":
        from rtlab.store.query import case_baseline
        from rtlab.verdict.baseline import NEWEST_RUNS

        return case_baseline(url, board=plan.board, flavour=plan.flavour,
                             scenario=judge.scenario, interval_us=judge.interval_us,
                             command=command, cap_s=cap_s, policy=judge.statistics, ref=ref,
                             runs=NEWEST_RUNS)

    return find


def register(sub: "Actions") -> None:
    lava = sub.add_parser("lava", help="labs that run LAVA: the suite as LAVA jobs")
    actions = lava.add_subparsers(dest="action", required=True)
    # open to rtlab.lavaserver.cli, which adds `rtlab lava server`
    keep_actions(lava, actions)

    render = actions.add_parser("render", help="a LAVA job of the suite for one board and "
                                               "flavour, from jobs/")
    render.add_argument("--board", required=True,
                        help="imx6q or rpi3 (physical: U-Boot, TFTP), qemu-imx6q or "
                             "qemu-rpi3 (virtual: QEMU)")
    render.add_argument("--flavour", required=True, help="std or rt")
    render.add_argument("--image", help="the image folder (sdcard.img, manifest.json; "
                                        "default: rtlab image build's)")
    render.add_argument("--boot-url", help="where the LAVA worker downloads the boot files "
                                           "(rtlab lava boot-files); default for QEMU: "
                                           "file:// of the files rendered beside the job")
    render.add_argument("--boot-dir", help="where the boot files go (default: beside --out)")
    render.add_argument("--scenarios", help="comma-separated scenarios (default: all)")
    render.add_argument("--intervals", help="comma-separated intervals in µs (default: all)")
    render.add_argument("--rt-tests", help="comma-separated other rt-tests, or 'none' "
                                           "(default: the suite's)")
    render.add_argument("--duration", type=int, default=10, help="seconds per measurement")
    render.add_argument("--pipeline-jobs", type=int, default=1, metavar="N",
                        help="the pipeline's jobs that judge as many cases as this one: "
                             "with the job's latency cases they share the pipeline's "
                             "false-fail rate, as `rtlab run --pipeline-jobs` (default 1)")
    render.add_argument("--suite", help="suite file (default: the repository's suite.yaml)")
    render.add_argument("--job-name", help="the LAVA job's name")
    render.add_argument("--priority", default="medium", help="high, medium, low or 0-100")
    render.add_argument("--tags", help="comma-separated LAVA device tags the job's device "
                                       "must have (rtlab lava server: qemu-imx6q, qemu-rpi3)")
    render.add_argument("--job-timeout", type=int, metavar="SECONDS",
                        help="LAVA's limit of the whole job (default: from the cases)")
    render.add_argument("--queue-timeout", type=int, metavar="SECONDS",
                        help="LAVA cancels the job if no device took it by then (default: "
                             "it waits as long as it takes)")
    render.add_argument("--lava-version", metavar="YEAR.MONTH",
                        help="the release of the LAVA server that runs the job: from 2026.01 "
                             "the test lists the cases it reports (expected:) (default: "
                             "$RTLAB_LAVA_VERSION, else 2023.01, whose schema lacks the key)")
    render.add_argument("--out", help=f"the job file (default: {DEFAULT_OUT}/BOARD-FLAVOUR.yaml)")
    render.set_defaults(func=_render)

    boot = actions.add_parser("boot-files", help="the kernel, device tree and initramfs of "
                                                 "an image, named as the jobs expect them")
    boot.add_argument("--image", required=True, help="the image folder (sdcard.img, "
                                                     "manifest.json)")
    boot.add_argument("--out", required=True, help="folder for the files")
    boot.set_defaults(func=_boot_files)

    check = actions.add_parser("validate", help="jobs and jobs/ templates against LAVA's "
                                                "own schema (Debian's lava-common)")
    check.add_argument("paths", nargs="*", default=[str(paths.REPO_ROOT / "jobs")],
                       metavar="PATH", help="job files (*.yaml), templates (*.yaml.j2) or "
                                            "folders of them (default: jobs)")
    check.set_defaults(func=_validate)

    submit = actions.add_parser("submit", help="submit jobs (server: $RTLAB_LAVA_URL, "
                                               "$RTLAB_LAVA_USER, $RTLAB_LAVA_TOKEN)")
    submit.add_argument("jobs", nargs="+", metavar="JOB", help="rendered job files")
    submit.set_defaults(func=_submit)

    fetching = actions.add_parser("fetch", help="a finished job's definition and log, and "
                                                "its result records and JUnit")
    fetching.add_argument("job_id", metavar="JOB_ID")
    fetching.add_argument("--wait", type=int, nargs="?", const=0, default=None,
                          metavar="SECONDS", help="wait for the job to end first (at most "
                                                  "SECONDS; none: without limit)")
    fetching.add_argument("--poll", type=int, default=5, metavar="SECONDS",
                          help="while waiting, ask the server every SECONDS (default: 5, "
                               "lavacli's)")
    _judging_options(fetching)
    fetching.set_defaults(func=_fetch)

    records = actions.add_parser("records", help="result records and JUnit from a job's log "
                                                 "at hand (lava-run's, or a server's raw "
                                                 "log)")
    records.add_argument("--job", required=True, help="the job file (it carries the plan)")
    records.add_argument("--log", required=True, help="the job's log")
    records.add_argument("--job-id", help="the job's id (default: the log's file name)")
    records.add_argument("--server", help="the LAVA server that ran it")
    records.add_argument("--device", help="the LAVA device that ran it")
    _judging_options(records)
    records.set_defaults(func=_records)

    local = actions.add_parser("local", help="run a QEMU job here with Debian's lava-run "
                                             "(root), then its result records and JUnit")
    local.add_argument("job", metavar="JOB", help="a rendered QEMU job (--board qemu-…)")
    local.add_argument("--timeout", type=float, default=None,
                       help="seconds before the run is cancelled (default: the job's own)")
    _judging_options(local)
    local.set_defaults(func=_local)
