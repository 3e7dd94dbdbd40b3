"""``rtlab results pull``: the result records and JUnit files of earlier pipelines, from
their test jobs' artifacts on GitLab, so that a pipeline can rebuild the history when the
lab has no shared database.

Each job's files land in ``<out>/<pipeline id>/<job id>/`` (the paths inside the artifacts
kept); a job already there is not downloaded again. The token comes from the environment
(``RTLAB_GITLAB_TOKEN``, a masked CI variable, else the job's own ``CI_JOB_TOKEN``) and
never appears in output or in an error.
"""

import json
import os
import re
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import attr
from gitlab.exceptions import GitlabError

from rtlab.artifacts.record import SCHEMA
from rtlab.store.junit import ROOTS
from rtlab.util.gitlab import (
    RETRIES,
    Credentials,
    connect,
    gitlab_errors,
)
from rtlab.util.paths import cache_dir

DEFAULT_STAGE = "test"
DEFAULT_JOB_PATTERN = "^test"
# a pipeline still running has no complete artifacts yet; a cancelled one proves nothing
FINISHED = ("success", "failed")
_SCHEMA_PREFIX = SCHEMA.split("/")[0] + "/"


@attr.frozen
class PulledJob:
    pipeline_id: int
    job_id: int
    job_name: str
    folder: Path
    # False: it was there from an earlier pull
    downloaded: bool
    files: int


@attr.frozen
class PullReport:
    ref: str
    jobs: tuple[PulledJob, ...]
    # one line per job passed over (no artifacts, expired)
    skipped: tuple[str, ...]

    def __str__(self) -> str:
        new = sum(1 for job in self.jobs if job.downloaded)
        return (f"ref {self.ref}: {new} job(s) downloaded, {len(self.jobs) - new} already "
                f"pulled, {len(self.skipped)} without artifacts")


def default_out() -> Path:
    """``.cache/pulled`` (``RTLAB_CACHE`` moves it, e.g. to a CI cache)."""
    return cache_dir() / "pulled"


def pull(*, url: str, project: str, credentials: Credentials, out: Path,
         ref: str | None = None, pipelines: int = 20,
         stage: str = DEFAULT_STAGE, job_pattern: str = DEFAULT_JOB_PATTERN,
         retries: int = RETRIES, say: Callable[[str], None] = print) -> PullReport:
    """The records and JUnit files of the test jobs (of ``stage``, or named to match
    ``job_pattern``) of the last ``pipelines`` finished pipelines of ``ref`` (default:
    the project's default branch)."""
    ask = {"max_retries": retries}
    pattern = re.compile(job_pattern)
    client = connect(url, credentials)
    where = f"{url.rstrip('/')}/api/v4/projects/{project}"
    with gitlab_errors(where, credentials):
        if ref is None:
            gl_project = client.projects.get(project, **ask)
            ref = str(gl_project.default_branch)
        else:
            # no request: a job token may not read the project itself
            gl_project = client.projects.get(project, lazy=True)
        jobs: list[PulledJob] = []
        skipped: list[str] = []
        for pipeline in _finished_pipelines(gl_project, ref, pipelines, ask):
            for job in pipeline.jobs.list(get_all=True, per_page=100, **ask):
                if job.attributes.get("stage") != stage and not pattern.search(job.name):
                    continue
                pulled = _pull_job(gl_project, pipeline.id, job, out, say, ask)
                if isinstance(pulled, str):
                    skipped.append(pulled)
                    say(pulled)
                else:
                    jobs.append(pulled)
    return PullReport(ref, tuple(jobs), tuple(skipped))


def _finished_pipelines(project: Any, ref: str, count: int,  # noqa: ANN401
                        ask: dict[str, Any]) -> Iterator[Any]:
    found = 0
    if count <= 0:
        return
    # newest first; pages fetched as needed (running pipelines do not count)
    for pipeline in project.pipelines.list(ref=ref, order_by="id", sort="desc",
                                           per_page=min(100, max(20, 2 * count)),
                                           iterator=True, **ask):
        if pipeline.status not in FINISHED:
            continue
        yield pipeline
        found += 1
        if found >= count:
            return


def _has_archive(job: Any) -> bool | None:  # noqa: ANN401 - python-gitlab object
    """Whether the job lists an artifacts archive; None when GitLab did not say."""
    listed = job.attributes.get("artifacts")
    if listed is None:
        return None
    return any(item.get("file_type") == "archive" for item in listed)


def _pull_job(project: Any, pipeline_id: int, job: Any, out: Path,  # noqa: ANN401
              say: Callable[[str], None], ask: dict[str, Any]) -> PulledJob | str:
    label = f"pipeline {pipeline_id} job {job.id} ({job.name})"
    folder = out / str(pipeline_id) / str(job.id)
    if folder.is_dir():
        return PulledJob(pipeline_id, job.id, job.name, folder, False, _count(folder))
    if _has_archive(job) is False:
        return f"{label}: no artifacts (expired or never kept); skipped"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".pull-") as scratch:
        archive = Path(scratch) / "artifacts.zip"
        try:
            with archive.open("wb") as sink:
                project.jobs.get(job.id, lazy=True).artifacts(streamed=True,
                                                              action=sink.write, **ask)
        except GitlabError as error:
            if error.response_code == 404:
                return f"{label}: artifacts expired or missing (HTTP 404); skipped"
            raise
        try:
            files = _extract(archive, Path(scratch) / "job")
        except zipfile.BadZipFile:
            # an interrupted download: nothing kept, so the next pull asks again
            return f"{label}: artifacts are not a zip archive; skipped"
        folder.parent.mkdir(parents=True, exist_ok=True)
        # renamed into place whole: a pull killed half-way leaves no half a job behind
        os.replace(Path(scratch) / "job", folder)
    say(f"{label}: {files} file(s) into {folder}")
    return PulledJob(pipeline_id, job.id, job.name, folder, True, files)


def _count(folder: Path) -> int:
    return sum(1 for path in folder.rglob("*") if path.is_file())


def _extract(archive: Path, into: Path) -> int:
    """The result records and JUnit files of an artifacts archive, at their paths in it
    (so that records of several runs in one job keep apart)."""
    into.mkdir()
    kept = 0
    with zipfile.ZipFile(archive) as zipped:
        for member in zipped.infolist():
            inner = PurePosixPath(member.filename)
            if (member.is_dir() or inner.is_absolute() or ".." in inner.parts
                    or inner.suffix not in (".json", ".xml")):
                continue
            data = zipped.read(member)
            if not _wanted(inner, data):
                continue
            target = into.joinpath(*inner.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            kept += 1
    return kept


def _wanted(inner: PurePosixPath, data: bytes) -> bool:
    if inner.suffix == ".xml":
        head = data[:4096].decode("utf-8", errors="replace")
        return any(f"<{root}" in head for root in ROOTS)
    if "results" in inner.parts[:-1]:
        # a record folder's every file, a garbled one too: ingest then says which
        return True
    try:
        document = json.loads(data)
    except ValueError:
        return False
    return isinstance(document, dict) and str(document.get("schema", "")).startswith(
        _SCHEMA_PREFIX)
