"""The pipeline's build stage: which kernel a board x flavour job hands on to the image
stage, and why.

- **build** from source (:func:`rtlab.kernel.build.build_kernel`) when ``kernel/`` changed
  since the pipeline's base, or when there is no base to compare with (a scheduled
  pipeline, a first push, a base outside a shallow clone): a kernel that may have changed
  is never stood in for by an older one;
- else **reuse** the kernel the default branch built last: the newest successful
  ``kernel`` job's artifacts of that ref on GitLab, when they hold a built kernel of this
  board and flavour (a reused kernel is handed on as an artifact again, so it stays the
  last built one);
- else **debian**: Debian's kernel package (:func:`rtlab.kernel.debian.fetch_kernel`).

The base is GitLab's own: a merge request's diff base, a push's previous commit, else the
default branch's tip (``origin/<default branch>``) when this is another branch. The choice
and its reason go into ``kernel.json`` (``provided``), and from there into the image
manifest and every result record of the kernel."""

import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import attr

from rtlab.artifacts.kernel_info import FILE_NAME as KERNEL_INFO
from rtlab.artifacts.kernel_info import (
    KernelInfo,
    KernelInfoError,
    read_kernel_info,
    write_kernel_info,
)
from rtlab.kernel.build import build_kernel
from rtlab.kernel.debian import fetch_kernel
from rtlab.kernel.spec import load_flavours
from rtlab.util import paths
from rtlab.util.gitlab import JOB_TOKEN_VARIABLE, TOKEN_VARIABLE
from rtlab.util.paths import REPO_ROOT

Progress = Callable[[str], None]
POLICIES = ("auto", "build", "reuse", "debian")
KERNEL_PATHS = ("kernel/",)
_NO_COMMIT = re.compile(r"^0+$")


class ProvideError(RuntimeError):
    """The kernel the policy asks for cannot be had (and the policy allows nothing else)."""


@attr.frozen
class Decision:
    action: str
    """build, reuse or debian"""
    reason: str


@attr.frozen
class GitLabSource:
    """Where the default branch's last built kernels are: a project's ``kernel`` jobs."""

    url: str
    project: str
    ref: str
    job: str = "kernel"

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> "GitLabSource | None":
        """From a GitLab job's variables, with a token to read artifacts (a GitLab job
        always has its CI_JOB_TOKEN; gitlab-ci-local's jobs have none)."""
        if not (env.get("CI_SERVER_URL") and env.get("CI_PROJECT_ID")
                and env.get("CI_DEFAULT_BRANCH")
                and (env.get(TOKEN_VARIABLE) or env.get(JOB_TOKEN_VARIABLE))):
            return None
        return cls(env["CI_SERVER_URL"], env["CI_PROJECT_ID"], env["CI_DEFAULT_BRANCH"],
                   env.get("CI_JOB_NAME", "kernel").split(":", 1)[0].strip() or "kernel")

    def job_name(self, board: str, flavour: str) -> str:
        # GitLab's name for one job of a parallel:matrix
        return f"{self.job}: [{board}, {flavour}]"


def pipeline_base(env: Mapping[str, str], repo: Path = REPO_ROOT) -> tuple[str | None, str]:
    """The commit this pipeline's changes are counted from, and what it is."""
    if env.get("CI_MERGE_REQUEST_DIFF_BASE_SHA"):
        return env["CI_MERGE_REQUEST_DIFF_BASE_SHA"], "the merge request's diff base"
    before = env.get("CI_COMMIT_BEFORE_SHA", "")
    if before and not _NO_COMMIT.match(before):
        return before, "the push's previous commit"
    default = env.get("CI_DEFAULT_BRANCH")
    branch = env.get("CI_COMMIT_BRANCH") or env.get("CI_COMMIT_REF_NAME")
    if default and branch and branch != default:
        base = _git(repo, "merge-base", "HEAD", f"origin/{default}")
        if base is not None:
            return base.strip(), f"the merge base with origin/{default}"
    return None, "no base commit (a scheduled or first pipeline, or the default branch)"


def kernel_changes(base: str, repo: Path = REPO_ROOT) -> list[str] | None:
    """Files under kernel/ that differ between ``base`` and the working tree; None when
    git cannot tell (the base is not in this clone)."""
    out = _git(repo, "diff", "--name-only", base, "--", *KERNEL_PATHS)
    return None if out is None else [line for line in out.splitlines() if line]


def decide(policy: str, base: str | None, base_text: str, changes: list[str] | None,
           can_reuse: bool) -> Decision:
    if policy not in POLICIES:
        raise ProvideError(f"unknown kernel policy {policy!r}; valid: {', '.join(POLICIES)}")
    if policy != "auto":
        return Decision(policy, f"RTLAB_KERNEL={policy}")
    if base is None:
        return Decision("build", f"{base_text}: kernel/ may have changed")
    if changes is None:
        return Decision("build", f"cannot compare kernel/ with {base_text} ({base[:12]}: not "
                                 "in this clone)")
    if changes:
        shown = ", ".join(changes[:5]) + (f" and {len(changes) - 5} more" if len(changes) > 5
                                          else "")
        return Decision("build", f"kernel/ changed since {base_text} ({base[:12]}): {shown}")
    if can_reuse:
        return Decision("reuse", f"kernel/ unchanged since {base_text} ({base[:12]})")
    return Decision("debian", f"kernel/ unchanged since {base_text} ({base[:12]}) and no "
                              "GitLab to take the default branch's last built kernel from "
                              f"(CI_SERVER_URL, CI_PROJECT_ID, CI_DEFAULT_BRANCH and "
                              f"{JOB_TOKEN_VARIABLE} or {TOKEN_VARIABLE})")


def provide(board: str, flavour: str, out_dir: Path, *, build_flavour: str | None = None,
            policy: str = "auto", env: Mapping[str, str] | None = None,
            repo: Path = REPO_ROOT, progress: Progress = print) -> Path:
    """The kernel of ``board`` x ``flavour`` (a thresholds flavour: std, rt) in
    ``out_dir/<board>-<flavour>/`` with kernel.json, built, reused or Debian's (see the
    module docstring). ``build_flavour``: the kernel/flavours.yaml flavour a build uses
    (default: the only one judged by ``flavour``, else an error listing them)."""
    env = os.environ if env is None else env
    gitlab = GitLabSource.from_environment(env)
    base, base_text = pipeline_base(env, repo)
    changes = kernel_changes(base, repo) if base is not None else None
    decision = decide(policy, base, base_text, changes, gitlab is not None)
    progress(f"{board}-{flavour}: {decision.action}: {decision.reason}")
    dest = out_dir / f"{board}-{flavour}"
    if decision.action == "reuse":
        if gitlab is None:
            raise ProvideError("RTLAB_KERNEL=reuse needs CI_SERVER_URL, CI_PROJECT_ID, "
                               f"CI_DEFAULT_BRANCH and {JOB_TOKEN_VARIABLE} or "
                               f"{TOKEN_VARIABLE} (a GitLab job's environment)")
        why_not = fetch_last_built(gitlab, board, flavour, dest, progress)
        if why_not is None:
            return _stamp(dest, decision)
        if policy == "reuse":
            raise ProvideError(f"{board}-{flavour}: no built kernel to reuse: {why_not}")
        decision = Decision("debian", f"{decision.reason}; no built kernel of "
                                      f"{gitlab.ref} to reuse: {why_not}")
        progress(f"{board}-{flavour}: debian: {why_not}")
    if decision.action == "build":
        name = build_flavour or _build_flavour_for(flavour)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=_mkdir(out_dir)) as tmp:
            built = build_kernel(board, name, Path(tmp), progress=progress).folder
            if dest.exists():
                shutil.rmtree(dest)
            built.rename(dest)
        return _stamp(dest, decision)
    fetch_kernel(board, flavour, paths.debs_dir(), out_dir, progress)
    return _stamp(dest, decision)


def fetch_last_built(source: GitLabSource, board: str, flavour: str, dest: Path,
                     progress: Progress = print) -> str | None:
    """The default branch's last built kernel of ``board`` x ``flavour`` into ``dest``;
    None when done, else why not (no such job, its kernel was Debian's, ...). GitLab
    refusing the token is an error, not a reason to fall back."""
    from rtlab.util.gitlab import Credentials, connect, gitlab_errors

    credentials = Credentials.from_environment()
    job = source.job_name(board, flavour)
    where = (f"{source.url.rstrip('/')}/api/v4/projects/{source.project}/jobs/artifacts/"
             f"{source.ref}/download?job={job}")
    client = connect(source.url, credentials)
    project = client.projects.get(source.project, lazy=True)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "artifacts.zip"
        try:
            with gitlab_errors(where, credentials), archive.open("wb") as out:
                project.artifacts.download(ref_name=source.ref, job=job, streamed=True,
                                           action=out.write)
        except RuntimeError as error:
            if "HTTP 404" in str(error):
                return f"no successful '{job}' job with artifacts on {source.ref}"
            raise
        inner = PurePosixPath("out", "kernel", f"{board}-{flavour}")
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(archive) as zipped:
            members = [m for m in zipped.infolist() if not m.is_dir()
                       and PurePosixPath(m.filename).parent == inner]
            for member in members:
                target = unpacked / PurePosixPath(member.filename).name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zipped.read(member))
        if not (unpacked / KERNEL_INFO).is_file():
            return f"'{job}' on {source.ref} left no {inner}/{KERNEL_INFO}"
        try:
            info = read_kernel_info(unpacked)
        except KernelInfoError as error:
            return f"'{job}' on {source.ref} left a kernel.json this stage cannot use: {error}"
        if not info.built:
            return (f"'{job}' on {source.ref} handed on {info.source!r}'s kernel "
                    f"{info.package}, not a built one")
        if (info.board, info.flavour) != (board, flavour):
            return (f"'{job}' on {source.ref} holds the kernel of {info.board}-"
                    f"{info.flavour}")
        info = attr.evolve(info, provided_before=info.provided or {})
        write_kernel_info(unpacked, info)
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(unpacked, dest)
    progress(f"{board}-{flavour}: reused {info.release} built "
             f"{(info.build or {}).get('built_at')} from '{job}' on {source.ref}")
    return None


def _stamp(dest: Path, decision: Decision) -> Path:
    stamp_kernel(dest, action=decision.action, reason=decision.reason)
    return dest


def stamp_kernel(folder: Path, *, action: str, reason: str,
                 variant: Mapping[str, Any] | None = None) -> KernelInfo:
    """Record in ``folder``'s kernel.json which kernel this is and why (and which
    campaign variant it is): the image manifest and the result records carry it from
    there."""
    info = read_kernel_info(folder).stamped(action=action, reason=reason, variant=variant)
    write_kernel_info(folder, info)
    return info


def _build_flavour_for(flavour: str) -> str:
    candidates = load_flavours().values()
    marked = [f.name for f in candidates if f.pipeline and f.thresholds == flavour]
    if not marked:
        judged = [f.name for f in candidates if f.thresholds == flavour]
        raise ProvideError(f"kernel/flavours.yaml marks no flavour 'pipeline: true' for "
                           f"thresholds flavour {flavour!r} (judged by it: "
                           f"{', '.join(judged) or 'none'}): mark one or give --build-flavour")
    return marked[0]


def _git(repo: Path, *args: str) -> str | None:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=False)
    return done.stdout if done.returncode == 0 else None


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
