"""A bisection's outcome where the team looks: a note on every merge request the culprit
commit came in by, or, when no merge request holds it, a comment on the commit itself.
A bisection that named no commit (undecided, or a bad point that does not reproduce)
posts on the bad commit instead, the one whose pipeline went red.

Through GitLab's API (python-gitlab): ``GET /projects/:id/repository/commits/:sha/
merge_requests``, then ``POST /projects/:id/merge_requests/:iid/notes`` on each, or
``POST /projects/:id/repository/commits/:sha/comments``. The token is
``RTLAB_BISECT_TOKEN``, from the environment only (a masked CI variable), never an
argument; GitLab's errors name the URL, never the token.
"""

import os
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any

from rtlab.bisect.result import FOUND, NOT_REPRODUCED, Bisection, board_time
from rtlab.util.gitlab import Credentials, GitLabError, connect, gitlab_errors

TOKEN_VARIABLE = "RTLAB_BISECT_TOKEN"
# what the token needs, said when it is missing or GitLab refuses it
SCOPE = ("a project access token with the api scope (it posts notes on merge requests and "
         "comments on commits) and at least the Reporter role")
SHORT = 12
# the report page of `rtlab bisect run --out out/bisect` (the bisect job's artifacts)
REPORT = "out/bisect/report/index.html"


class PublishError(GitLabError):
    """The note could not be posted; the message names the URL, never the token."""


def bisect_credentials() -> Credentials:
    """The bisection's token, from ``$RTLAB_BISECT_TOKEN`` alone (not the pull's, the
    tuning's nor the job's own token)."""
    token = os.environ.get(TOKEN_VARIABLE)
    if not token:
        raise PublishError(f"no GitLab token: set ${TOKEN_VARIABLE} (a masked, protected CI "
                           f"variable holding {SCOPE})")
    return Credentials(token)


def _code(items: Iterable[str]) -> str:
    return ", ".join(f"`{item}`" for item in items)


def _outcome(bisection: Bisection) -> str:
    culprit, option = bisection.culprit, bisection.option
    lines = []
    if culprit is not None:
        subject = " ".join(culprit.subject.split())
        lines.append(f"**Culprit:** `{culprit.commit[:SHORT]}` {subject}")
    if option is not None:
        lines.append(f"**Option:** `{option.name}` `{option.good}` → `{option.bad}`")
    if bisection.status == FOUND:
        if not lines:
            lines.append(f"**Found:** {bisection.reason}")
    elif bisection.status == NOT_REPRODUCED:
        lines.append(f"**Not reproduced:** the bad point does not reproduce the regression "
                     f"against the good one: {bisection.reason}")
    else:
        # after a commit was found the candidates are its options, else commits
        what = "options" if culprit is not None else "commits"
        names = (bisection.candidates if culprit is not None
                 else tuple(sha[:SHORT] for sha in bisection.candidates))
        lines.append(f"**Undecided:** one of these {what} holds the regression, and the "
                     f"boards could not tell which: {_code(names) or 'none named'}. "
                     f"{bisection.reason}")
    return "  \n".join(lines)


def note_text(bisection: Bisection, report_url: str | None) -> str:
    """The note: what was bisected, the outcome, the steps, the board time, the report."""
    good, bad = bisection.good[:SHORT], bisection.bad[:SHORT]
    lines = [f"### Latency bisection: {bisection.case} on {bisection.board}/"
             f"{bisection.flavour}",
             "",
             f"`{good}` (good) .. `{bad}` (bad), kernels: {bisection.source}",
             "",
             _outcome(bisection),
             "",
             "| # | step | point | outcome | rounds | boots (good / point) | board time "
             "| confidence |",
             "|--:|---|---|---|--:|--:|--:|---|"]
    for step in bisection.steps:
        lines.append(f"| {step.index} | {step.kind} | `{step.point}` | {step.outcome} "
                     f"| {step.rounds} | {step.boots[0]} / {step.boots[1]} "
                     f"| {board_time(step.board_s)} | {step.decided} |")
    lines += ["", f"Board time in all: {board_time(bisection.board_s)} "
                  f"({len(bisection.steps)} steps)."]
    if report_url:
        lines.append(f"Report: [{report_url}]({report_url})")
    return "\n".join(lines) + "\n"


def publish(bisection: Bisection, *, url: str, project: str | int,
            credentials: Credentials, report_url: str | None = None) -> str:
    """Post the note on every merge request the culprit (no culprit: the bad commit)
    belongs to, else as a comment on that commit; a line saying where it went."""
    sha = bisection.culprit.commit if bisection.culprit is not None else bisection.bad
    what = "the culprit" if bisection.culprit is not None else "the bad commit"
    text = note_text(bisection, report_url)
    client = connect(url, credentials)
    api = f"{url.rstrip('/')}/api/v4/projects/{project}"
    commit = client.projects.get(project, lazy=True).commits.get(sha, lazy=True)
    with _errors(f"{api}/repository/commits/{sha}/merge_requests", credentials):
        merge_requests: list[dict[str, Any]] = list(commit.merge_requests(get_all=True))
    if not merge_requests:
        with _errors(f"{api}/repository/commits/{sha}/comments", credentials):
            commit.comments.create({"note": text})
        return f"posted on commit {sha[:SHORT]} ({what}; no merge request holds it)"
    where = []
    for mr in merge_requests:
        # the merge request's own project (its target), where its iid counts
        iid, owner = mr["iid"], mr.get("project_id", project)
        with _errors(f"{url.rstrip('/')}/api/v4/projects/{owner}/merge_requests/{iid}/notes",
                     credentials):
            (client.projects.get(owner, lazy=True).mergerequests.get(iid, lazy=True)
             .notes.create({"body": text}))
        where.append(f"!{iid} ({mr['web_url']})" if mr.get("web_url") else f"!{iid}")
    return f"posted on {', '.join(where)}: the merge requests of {what} {sha[:SHORT]}"


def job_report_url(report: str = REPORT) -> str | None:
    """The report page among this CI job's artifacts (``$CI_JOB_URL``); None outside
    CI. ``report``: its path in the project folder, as the job's artifacts keep it."""
    job = os.environ.get("CI_JOB_URL")
    return f"{job.rstrip('/')}/artifacts/file/{report}" if job else None


def _errors(where: str, credentials: Credentials) -> AbstractContextManager[None]:
    return gitlab_errors(where, credentials, refused=f"check ${TOKEN_VARIABLE}: {SCOPE}",
                         error_type=PublishError)
