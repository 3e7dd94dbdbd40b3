"""A :class:`~rtlab.tuning.proposal.Proposal` as a merge request on GitLab: the edited file
committed on the tuning branch on top of the proposal's base, pushed with the lab's token
(:mod:`rtlab.tuning.gitbranch`), and the merge request opened, or the open one updated,
through GitLab's API (python-gitlab). What happens, in order:

1. The token's user (``GET /user``): a refused token stops here, with the URL, before
   anything is pushed. The commit is that user's (a project access token's bot).
2. The project (its repository URL and default branch), and the newest merge requests from
   the tuning branch into the target branch.
3. Nothing to change: say so, open nothing (and name an open tuning merge request, which
   the history no longer supports, for a person to close).
4. An open tuning merge request that already proposes these limits (the fingerprint in its
   description), or that has a commit by someone else (a reviewer took it over): left as
   it is. A merge request a reviewer closed without merging, proposing these limits: not
   opened again.
5. Otherwise the branch is (re)built on the base and pushed, replacing the branch only if
   it still is where it was a moment ago, and the merge request opened with the labels,
   or its title, description and labels updated. Either way one pipeline runs on the
   boards, the merge request's: the push that precedes opening it carries ``ci.skip``.
"""

import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attr

from rtlab.tuning import gitbranch
from rtlab.tuning.proposal import Proposal, fingerprint_in
from rtlab.util.gitlab import Credentials, GitLabError, connect, gitlab_errors

TOKEN_VARIABLE = "RTLAB_TUNE_TOKEN"
DEFAULT_BRANCH = "rtlab/tune-thresholds"
DEFAULT_LABELS = ("thresholds",)
# what the token needs, said when GitLab refuses it
SCOPE = ("a project access token with the api scope (merge requests; it includes pushing "
         "over HTTPS) and the Developer role")
# the newest merge requests from the branch looked at
RECENT = 20


class ProposeError(GitLabError):
    """The merge request could not be opened or updated; the message names the URL, never
    the token."""


@attr.frozen
class Outcome:
    """What a tuning run did: ``opened``, ``updated``, ``unchanged`` (nothing to propose),
    ``kept`` (the open merge request already proposes it, or is a person's now),
    ``declined`` (a reviewer closed the same proposal)."""

    action: str
    message: str
    iid: int | None = None
    web_url: str | None = None


def credentials_from_environment() -> Credentials:
    token = os.environ.get(TOKEN_VARIABLE)
    if not token:
        raise ProposeError(f"no GitLab token: set ${TOKEN_VARIABLE} (a masked, protected CI "
                           f"variable holding {SCOPE})")
    return Credentials(token)


@attr.frozen
class Target:
    """Where the proposal goes."""

    url: str
    project: str
    branch: str = DEFAULT_BRANCH
    # the branch the merge request targets (default: the project's default branch)
    target_branch: str | None = None
    labels: Sequence[str] = DEFAULT_LABELS


def open_project(target: Target, credentials: Credentials) -> tuple[Any, Any, Any]:
    """(client, user, project), or a :class:`ProposeError` naming the URL."""
    client = connect(target.url, credentials)
    api = f"{target.url.rstrip('/')}/api/v4"
    with _errors(f"{api}/user", credentials):
        client.auth()
    with _errors(f"{api}/projects/{target.project}", credentials):
        project = client.projects.get(target.project)
    return client, client.user, project


def identity(user: Any, url: str) -> gitbranch.Identity:  # noqa: ANN401 - python-gitlab's
    """The commit's author: the token's user, with the e-mail GitLab knows it by."""
    attributes = user.attributes
    email = (attributes.get("commit_email") or attributes.get("email")
             or f"{attributes['username']}@noreply.{urlsplit(url).hostname}")
    return gitbranch.Identity(str(attributes.get("name") or attributes["username"]), email)


def publish(proposal: Proposal, target: Target, credentials: Credentials, *,
            repository: os.PathLike[str], made_by: str | None = None,
            say: Callable[[str], None] = print) -> Outcome:
    """Open or update the tuning merge request for ``proposal`` (see the module
    docstring); ``repository`` is the local clone holding the proposal's base."""
    root = Path(repository)
    _, user, project = open_project(target, credentials)
    project_url = f"{target.url.rstrip('/')}/api/v4/projects/{target.project}"
    target_branch = target.target_branch or str(project.default_branch)
    with _errors(f"{project_url}/merge_requests", credentials):
        recent = project.mergerequests.list(source_branch=target.branch,
                                            target_branch=target_branch,
                                            order_by="created_at", sort="desc",
                                            per_page=RECENT, get_all=False)
    opened = next((mr for mr in recent if mr.state == "opened"), None)
    if not proposal.changed:
        message = f"nothing to change: the history keeps every limit of {proposal.name}"
        if opened is not None:
            message += (f"; the open merge request !{opened.iid} ({opened.web_url}) "
                        "proposes limits it no longer supports: left for a person to close")
        message += "; no merge request opened"
        return Outcome("unchanged", message, opened.iid if opened else None,
                       opened.web_url if opened else None)
    me = identity(user, target.url)
    if opened is not None:
        if fingerprint_in(opened.description) == proposal.fingerprint:
            return Outcome("kept", f"!{opened.iid} ({opened.web_url}) already proposes "
                                   "these limits: left as it is", opened.iid, opened.web_url)
        with _errors(f"{project_url}/merge_requests/{opened.iid}/commits", credentials):
            others = sorted({f"{c.author_name} <{c.author_email}>"
                             for c in opened.commits(get_all=True)
                             if c.author_email != me.email})
        if others:
            return Outcome("kept", f"!{opened.iid} ({opened.web_url}) has commits by "
                                   f"{', '.join(others)}: the branch and the description "
                                   "are theirs now and left as they are; merge or close "
                                   "it to let the lab propose again", opened.iid,
                           opened.web_url)
    else:
        closed = next((mr for mr in recent if mr.state == "closed"), None)
        if closed is not None and fingerprint_in(closed.description) == proposal.fingerprint:
            return Outcome("declined", f"a reviewer closed !{closed.iid} ({closed.web_url}), "
                                       "which proposed these limits: not opened again",
                           closed.iid, closed.web_url)

    remote = gitbranch.Remote.of(str(project.http_url_to_repo), credentials.token,
                                 str(user.attributes.get("username") or "oauth2"))
    commit = gitbranch.commit_file(root, proposal.base, proposal.name, proposal.text,
                                   proposal.commit_message(made_by), me)
    was = gitbranch.remote_head(root, remote, target.branch)
    # without an open merge request a push would start a branch pipeline, and opening the
    # merge request a second one, both on the boards: GitLab's ci.skip leaves only the
    # merge request's; once it is open, the push itself starts its pipeline
    gitbranch.push(root, remote, commit, target.branch, was,
                   options=("ci.skip",) if opened is None else ())
    say(f"pushed {commit[:12]} to {target.branch} of {remote.url}"
        + (f" (was {was[:12]})" if was else " (new branch)"))
    description = proposal.description(made_by)
    if opened is None:
        with _errors(f"{project_url}/merge_requests", credentials):
            mr = project.mergerequests.create({
                "source_branch": target.branch, "target_branch": target_branch,
                "title": proposal.title(), "description": description,
                "labels": ",".join(target.labels), "remove_source_branch": True})
        return Outcome("opened", f"opened !{mr.iid}: {mr.web_url}", mr.iid, mr.web_url)
    with _errors(f"{project_url}/merge_requests/{opened.iid}", credentials):
        opened.title = proposal.title()
        opened.description = description
        # a reviewer's labels stay
        opened.labels = list(dict.fromkeys([*opened.labels, *target.labels]))
        opened.save()
    return Outcome("updated", f"updated !{opened.iid}: {opened.web_url}", opened.iid,
                   opened.web_url)


def _errors(where: str, credentials: Credentials) -> AbstractContextManager[None]:
    return gitlab_errors(where, credentials, refused=f"check ${TOKEN_VARIABLE}: {SCOPE}",
                         error_type=ProposeError)
