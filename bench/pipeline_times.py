"""The real .gitlab-ci.yml, run locally with gitlab-ci-local against the virtual rack, and
the wall time of each stage.

    .venv/bin/python bench/pipeline_times.py [--duration 10] [--keep DIR] [--kernel POLICY]
                                             [--tier gate] [--tune] [--campaign NAME]

It makes a temporary clone of the working tree (tracked and not-ignored files committed on
`main`, pushed to an `origin` whose default branch is `main`: gitlab-ci-local reads the
default branch from origin/HEAD and compares `rules:changes` with `origin/<default
branch>`), runs the pipeline as on the default branch (every job) with the
shell executor (`--shell-isolation --force-shell-executor`: each job in its own copy,
artifacts handed on as GitLab does) with the variables that point the test jobs at the
virtual rack, prints the jobs' output as it comes (stage progress), and at the end a
table: per stage the wall time from its first job's start to its last job's end, and the
jobs' summed time. The virtual rack is started if it is not running (and then stopped
again). `make demo PIPELINE=1` runs this; tests/integration/test_pipeline_local.py uses
its functions.

With --tune (`make demo PIPELINE=1 TUNE=1`) the pipeline runs as a scheduled one, so that
its last job, `tune`, proposes thresholds from the virtual rack's history: a results store
that every --tune demo extends (`<keep>/results.db`; the report job ingests each run's
records into it), a stand-in GitLab on loopback (rtlab.vlab.gitlab) serving the clone's
`origin` over Git's HTTP and the merge-request API, and the token as a project variable
scoped to the job's environment (gitlab-ci-local's variables file), as a lab sets
RTLAB_TUNE_TOKEN. At the end it prints the merge request the job opened or updated, and
whether the token appears anywhere in the pipeline's output or artifacts.

With ``--campaign NAME`` it runs the pipeline as a person's "Run pipeline"
with ``RTLAB_CAMPAIGN=NAME`` (``CI_PIPELINE_SOURCE=web``): the campaign's jobs instead of
the push's, ``--duration`` seconds per case (``make demo PIPELINE=1 CAMPAIGN=debian``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import attr

if TYPE_CHECKING:
    from rtlab.vlab.gitlab import StandInGitLab

REPO_ROOT = Path(__file__).resolve().parents[1]
STAGES = ("check", "preflight", "build", "image", "test", "report", "tune")
GIT_IDENTITY = ("-c", "user.name=rtlab pipeline", "-c", "user.email=pipeline@rtlab.invalid")


def gitlab_ci_local() -> Path:
    """The pinned gitlab-ci-local (installed by scripts/install-pipeline-tools.sh)."""
    out = subprocess.run([REPO_ROOT / "scripts" / "install-pipeline-tools.sh", "--print"],
                         capture_output=True, text=True, check=True).stdout.strip()
    path = Path(out)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run scripts/install-pipeline-tools.sh")
    return path


# Both boards' test jobs run at once on the host's cores, and then an emulated i.MX6Q CPU
# stalls for up to about 5 s (bench/wakeup_starvation.py): a shorter window can end with
# that CPU at 0 samples, a latency fail of the emulator, not of the path under test.
VIRTUAL_WINDOW_S = 10


def virtual_rack_variables(coordinator: str, health_dir: Path,
                           duration_s: int = VIRTUAL_WINDOW_S,
                           scenarios: str = "cpu100", intervals: str = "1000",
                           rt_tests: str = "none") -> dict[str, str]:
    """Pipeline variables that point the test jobs at the virtual rack, with one short
    case per board and flavour; downloads come from this checkout's cache."""
    return {
        "LG_COORDINATOR": coordinator,
        "RTLAB_ENV": "env/virtual.yaml",
        "RTLAB_BOARD_TAG_PREFIX": "qemu-",
        "RTLAB_DURATION": str(duration_s),
        "RTLAB_SCENARIOS": scenarios,
        "RTLAB_INTERVALS": intervals,
        "RTLAB_RT_TESTS": rt_tests,
        # the one case above, not a tier; one place per board type (the rack's second
        # imx6q is test_shared_plan's)
        "RTLAB_TIER": "",
        "RTLAB_BOARDS": "1",
        # one fixed window: the virtual rack's pipeline proves the path, not the policy
        "RTLAB_WINDOW": "",
        "RTLAB_RESERVE_TIMEOUT": "900",
        # the Debian archives this checkout already has (a lab runner's cache volume)
        "RTLAB_CACHE": os.fspath(Path(os.environ.get("RTLAB_CACHE",
                                                     REPO_ROOT / ".cache")).resolve()),
        "RTLAB_HEALTH_DIR": os.fspath(health_dir),
    }


def _git(work: Path, *args: str) -> str:
    return subprocess.run(["git", *GIT_IDENTITY, *args], cwd=work, capture_output=True,
                          text=True, check=True).stdout


def make_clone(dest: Path, source: Path = REPO_ROOT, branch: str | None = "change") -> Path:
    """dest/work: the working tree of ``source`` (tracked and untracked files that are not
    ignored, as they are on disk) committed on `main`, pushed to dest/origin.git as the
    default branch, and checked out on a new ``branch`` for a change (None: stay on `main`,
    where every job runs, as a default-branch pipeline)."""
    # git runs in several folders below, so the paths handed to it must not be relative
    dest = dest.resolve()
    work = dest / "work"
    work.mkdir(parents=True)
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"],
                            cwd=source, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        src = source / name
        if not src.is_file():
            continue  # deleted in the working tree but still tracked
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    _git(work, "init", "-q", "-b", "main")
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", "baseline: the default branch")
    _git(dest, "clone", "-q", "--bare", os.fspath(work), "origin.git")
    _git(work, "remote", "add", "origin", os.fspath(dest / "origin.git"))
    _git(work, "fetch", "-q", "origin")
    # gitlab-ci-local reads the default branch from origin/HEAD
    _git(work, "remote", "set-head", "origin", "main")
    if branch:
        _git(work, "checkout", "-q", "-b", branch)
    return work


def commit_change(work: Path, message: str, edits: dict[str, Callable[[str], str]]) -> None:
    """Edit files of the clone (path -> function of the old text) and commit them."""
    for name, edit in edits.items():
        path = work / name
        new = edit(path.read_text())
        if new == path.read_text():
            raise ValueError(f"the edit of {name} changed nothing")
        path.write_text(new)
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", message)


@attr.define
class Job:
    name: str
    stage: str = ""
    started: float | None = None
    finished: float | None = None
    status: str = ""
    """PASS, FAIL or WARN (allowed failure), as gitlab-ci-local's summary says."""

    @property
    def seconds(self) -> float:
        if self.started is None or self.finished is None:
            return 0.0
        return self.finished - self.started


@attr.define
class PipelineRun:
    exit_code: int
    jobs: dict[str, Job]
    wall_s: float
    output: str
    work: Path

    def job(self, name: str) -> Job:
        return self.jobs[name]

    def stage_times(self) -> list[tuple[str, int, float, float]]:
        """(stage, jobs, wall seconds from first start to last end, summed job seconds)."""
        rows = []
        for stage in STAGES:
            jobs = [j for j in self.jobs.values()
                    if j.stage == stage and j.started is not None and j.finished is not None]
            if not jobs:
                continue
            wall = max(j.finished for j in jobs) - min(j.started for j in jobs)  # type: ignore[type-var]
            rows.append((stage, len(jobs), wall, sum(j.seconds for j in jobs)))
        return rows

    def log(self, name: str) -> str:
        """The job's own lines of the run's output."""
        prefix = re.compile(rf"^{re.escape(name)}\s")
        return "\n".join(line for line in self.output.splitlines() if prefix.match(line))


_STARTED = re.compile(r"^(?P<job>\S.*?)\s+starting shell \((?P<stage>[^)]+)\)\s*$")
_FINISHED = re.compile(r"^(?P<job>\S.*?)\s+finished in .*$")
_SUMMARY = re.compile(r"^\s*(?P<status>PASS|FAIL|WARN)\s+(?P<job>\S.*?)\s*$")


def run_pipeline(
    work: Path,
    variables: dict[str, str],
    jobs: Iterable[str] = (),
    *,
    echo: Callable[[str], None] | None = None,
    timeout_s: float = 3600,
    concurrency: int | None = None,
    needs: bool = True,
    predefined: Iterable[str] = (),
) -> PipelineRun:
    """Run the clone's pipeline (``jobs``: only these and, with ``needs``, what they need;
    none: all) and time its jobs by the moments their start and end lines appear.
    ``predefined``: GitLab's predefined variables that ``variables`` set on purpose."""
    argv = [os.fspath(gitlab_ci_local()), "--shell-isolation", "--force-shell-executor",
            "--no-color", "--max-job-name-padding", "0"]
    if concurrency:
        argv += ["--concurrency", str(concurrency)]
    for key, value in variables.items():
        argv += ["--variable", f"{key}={value}"]
    jobs = list(jobs)
    if jobs:
        argv += ["--needs", *jobs] if needs else jobs
    venv_bin = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    # the jobs must not inherit a checkout of rtlab from the caller: each job runs its
    # own copy's rtlab (PYTHONPATH=. in the pipeline)
    env.pop("PYTHONPATH", None)
    predefined = list(predefined)
    if predefined:
        env["GCL_IGNORE_PREDEFINED_VARS"] = ",".join(predefined)
    found: dict[str, Job] = {}
    lines: list[str] = []
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace")
    assert proc.stdout is not None
    deadline = start + timeout_s
    try:
        for line in proc.stdout:
            now = time.monotonic()
            line = line.rstrip("\n")
            lines.append(line)
            if echo:
                echo(line)
            if match := _STARTED.match(line):
                job = found.setdefault(match["job"], Job(match["job"]))
                job.stage, job.started = match["stage"], now
            elif (match := _FINISHED.match(line)) and match["job"] in found:
                found[match["job"]].finished = now
            elif (match := _SUMMARY.match(line)) and match["job"] in found:
                found[match["job"]].status = match["status"]
            if now > deadline:
                proc.kill()
                raise TimeoutError(f"the pipeline ran longer than {timeout_s:.0f} s")
        code = proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return PipelineRun(code, found, time.monotonic() - start, "\n".join(lines), work)


def junit_cases(path: Path) -> list[tuple[str, str, str]]:
    """(case name, pass|fail|error|skipped, message) of every case of a JUnit file."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        verdict, message = "pass", ""
        for tag, name in (("failure", "fail"), ("error", "error"), ("skipped", "skipped")):
            element = case.find(tag)
            if element is not None:
                verdict, message = name, element.get("message", "")
                break
        cases.append((case.get("name", ""), verdict, message))
    return cases


def format_table(run: PipelineRun) -> str:
    rows = [("stage", "jobs", "wall s", "job s")]
    rows += [(stage, str(n), f"{wall:.1f}", f"{summed:.1f}")
             for stage, n, wall, summed in run.stage_times()]
    rows.append(("pipeline", str(len(run.jobs)), f"{run.wall_s:.1f}", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
                     for row in rows)


# one virtual run per case and demo: a lab keeps the default of 10
TUNE_MIN_RUNS = 1
# gitlab-ci-local's pipeline counter, kept between --tune demos so that each demo's runs
# are a pipeline of their own in the store
_STATE = Path(".gitlab-ci-local") / "state.yml"


# predefined variables the --tune demo sets on purpose (gitlab-ci-local warns otherwise)
PREDEFINED = ("CI_PIPELINE_SOURCE", "CI_SERVER_URL", "CI_PROJECT_ID")


@attr.define
class TuneDemo:
    """The stand-in GitLab, the token and the store of a --tune demo."""

    gitlab: StandInGitLab
    token: str
    store: Path
    keep: Path

    @classmethod
    def start(cls, work: Path, keep: Path) -> TuneDemo:
        import secrets

        from rtlab.vlab.gitlab import StandInGitLab

        token = f"glpat-demo-{secrets.token_urlsafe(18)}"
        gitlab = StandInGitLab(work.parent / "origin.git", token=token).start()
        # the lab's masked variable, limited to the tune job's environment; untracked,
        # so no job's copy of the project holds it
        (work / ".gitlab-ci-local-variables.yml").write_text(
            f"RTLAB_TUNE_TOKEN:\n  values:\n    thresholds-tuning: {token}\n")
        state = keep / "gitlab-ci-local-state.yml"
        if state.is_file():
            (work / _STATE).parent.mkdir(exist_ok=True)
            shutil.copyfile(state, work / _STATE)
        return cls(gitlab, token, keep / "results.db", keep)

    def variables(self) -> dict[str, str]:
        """A scheduled pipeline that talks to the stand-in (the predefined variables
        among them: see :data:`PREDEFINED`)."""
        gitlab = self.gitlab
        return {"CI_PIPELINE_SOURCE": "schedule", "CI_SERVER_URL": gitlab.url,
                "CI_PROJECT_ID": gitlab.project_path,
                "RTLAB_RESULTS_DB": f"sqlite:///{self.store}",
                "RTLAB_TUNE_MIN_RUNS": str(TUNE_MIN_RUNS)}

    def finish(self, run: PipelineRun) -> str:
        """What the tune job did, for the demo's reader."""
        gitlab = self.gitlab
        if (run.work / _STATE).is_file():
            shutil.copyfile(run.work / _STATE, self.keep / "gitlab-ci-local-state.yml")
        lines = ["", f"tune: the history is {self.store}"]
        for mr in gitlab.merge_requests:
            lines.append(f"  merge request !{mr.iid} ({mr.state}) {mr.source_branch} -> "
                         f"{mr.target_branch}, labels {', '.join(mr.labels)}: {mr.title}")
            lines += [f"    {line}" for line in mr.description.splitlines()[1:12]]
        if not gitlab.merge_requests:
            lines.append("  no merge request opened (see the tune job's log above)")
        artifacts = [path for path in (run.work / "out").rglob("*") if path.is_file()]
        leaked = self.token in run.output or any(
            self.token.encode() in path.read_bytes() for path in artifacts)
        lines.append(f"  the token appears in the pipeline's output or its {len(artifacts)} "
                     f"artifact files: {'YES' if leaked else 'no'}")
        return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from rtlab.kernel.provide import POLICIES
    from rtlab.util import paths
    from rtlab.vlab import control
    from rtlab.vlab.config import load_config

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=VIRTUAL_WINDOW_S,
                        help=f"seconds of cyclictest per case (default {VIRTUAL_WINDOW_S})")
    parser.add_argument("--keep", help="make the clone here and keep it (default: a "
                                       "temporary folder, removed at the end)")
    parser.add_argument("--quiet", action="store_true", help="only the table")
    parser.add_argument("--kernel", choices=POLICIES, default="debian",
                        help="the build stage's RTLAB_KERNEL (default debian: Debian's "
                             "kernels, minutes; build: all four board x flavour kernels "
                             "compiled from kernel/, which is what a default-branch "
                             "pipeline's auto does and takes most of an hour on 2 cores "
                             "from a cold ccache)")
    parser.add_argument("--tier", help="run this suite.yaml tier as a lab's push does "
                                       "(gate: every board of a type sharing the cases, "
                                       "each adaptive in 10 s windows up to 30 s) instead "
                                       "of one fixed case per job")
    parser.add_argument("--tune", action="store_true",
                        help="run it as a scheduled pipeline whose tune job proposes "
                             "thresholds from the virtual rack's history (the store every "
                             "--tune demo extends) to a stand-in GitLab")
    parser.add_argument("--campaign", help="run this campaign of campaigns/ as a pipeline "
                                           "started by hand (RTLAB_CAMPAIGN), every case "
                                           "--duration seconds, one place per board type")
    args = parser.parse_args(argv)
    if args.tune and args.campaign:
        parser.error("--tune (a scheduled pipeline of the gate) and --campaign (a study "
                     "started by hand) are different pipelines: choose one")

    config = load_config(paths.default_vlab_config())
    state_dir = paths.vlab_state_dir()
    started_rack = control.running_pid(state_dir) is None
    if started_rack:
        print("starting the virtual rack", flush=True)
        control.start(config, state_dir)
    tmp = (Path(args.keep).resolve() if args.keep
           else Path(tempfile.mkdtemp(prefix="rtlab-pipeline-")))
    # a kept folder is this script's own: the previous run's clone goes
    shutil.rmtree(tmp / "clone", ignore_errors=True)
    try:
        # the default branch: every job runs, as in a lab's pipeline after a merge
        work = make_clone(tmp / "clone", branch=None)
        print(f"pipeline clone: {work}", flush=True)
        variables = virtual_rack_variables(config.coordinator_address, tmp / "health",
                                           duration_s=args.duration)
        variables["RTLAB_KERNEL"] = args.kernel
        print(f"build stage: RTLAB_KERNEL={args.kernel}", flush=True)
        if args.tier:
            variables.update({"RTLAB_TIER": args.tier, "RTLAB_SCENARIOS": "",
                              "RTLAB_INTERVALS": "", "RTLAB_RT_TESTS": "",
                              "RTLAB_BOARDS": "all", "RTLAB_WINDOW": str(args.duration),
                              "RTLAB_DURATION": str(3 * args.duration)})
            print(f"test stage: tier {args.tier}, every board of a type, adaptive "
                  f"{args.duration} s windows up to {3 * args.duration} s", flush=True)
        if args.campaign:
            # "Run pipeline" by hand: the only way (with schedules) a campaign runs
            variables.update({"RTLAB_CAMPAIGN": args.campaign, "CI_PIPELINE_SOURCE": "web",
                              "RTLAB_CAMPAIGN_DURATION": str(args.duration)})
            print(f"campaign {args.campaign}: {args.duration} s per case", flush=True)
        tune = TuneDemo.start(work, tmp) if args.tune else None
        if tune is not None:
            variables.update(tune.variables())
            print(f"tune: a scheduled pipeline; stand-in GitLab at {tune.gitlab.url}, "
                  f"history {tune.store}, RTLAB_TUNE_MIN_RUNS={TUNE_MIN_RUNS}", flush=True)
        try:
            run = run_pipeline(work, variables, echo=None if args.quiet else print,
                               predefined=PREDEFINED if tune else ())
        finally:
            if tune is not None:
                tune.gitlab.stop()
        print()
        print(format_table(run))
        if tune is not None:
            print(tune.finish(run))
        failed = [job.name for job in run.jobs.values() if job.status == "FAIL"]
        where = ("out/campaign/*/test/, report in out/campaign-report/" if args.campaign
                 else "out/test/*/, report in out/report/")
        print(f"\nartifacts: {work / 'out'} (JUnit in {where})" if args.keep else "")
        if failed:
            print(f"failed jobs: {', '.join(failed)}")
        return run.exit_code
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        if started_rack:
            control.stop(state_dir)


if __name__ == "__main__":
    sys.path.insert(0, os.fspath(REPO_ROOT))
    sys.exit(main())
