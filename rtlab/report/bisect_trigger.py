"""From a change point to its culprit: each open regression change point of the default
branch starts one bisection pipeline (the pipeline's bisect job, selected by
``RTLAB_BISECT_GOOD``) between the last commit before it and the first after, through
GitLab's pipeline trigger API, once: the pipeline's address is kept on the change point,
and a change point that has one starts none again.

The trigger token comes from ``RTLAB_BISECT_TRIGGER_TOKEN`` (a pipeline trigger token, a
masked CI variable limited to the ``changes`` job's environment) and never appears in
output or in an error."""

import os
from collections.abc import Callable

import attr

from rtlab.store import Store
from rtlab.store.changes import open_changes
from rtlab.store.models import ChangePoint
from rtlab.util.gitlab import Credentials, GitLabError, connect, gitlab_errors

TRIGGER_TOKEN_VARIABLE = "RTLAB_BISECT_TRIGGER_TOKEN"


class TriggerError(GitLabError):
    """A bisection could not be started."""


@attr.frozen
class Started:
    change_id: int
    series: str
    good: str
    bad: str
    pipeline: str


def bisect_variables(row: ChangePoint) -> dict[str, str]:
    """What the bisect job reads (.gitlab-ci.yml's RTLAB_BISECT_* variables)."""
    if not row.good_commit or not row.bad_commit:
        raise ValueError(f"change point #{row.id} names no commit range (its runs were not "
                         "a pipeline's): nothing to bisect")
    return {"RTLAB_BISECT_GOOD": row.good_commit, "RTLAB_BISECT_BAD": row.bad_commit,
            "RTLAB_BISECT_BOARD": row.board, "RTLAB_BISECT_FLAVOUR": row.flavour,
            "RTLAB_BISECT_CASE": f"{row.scenario}/{row.interval_us}us"}


def start_bisections(store: Store, ref: str, *, url: str, project: str, token: str,
                     progress: Callable[[str], None] = print) -> list[Started]:
    """Trigger one bisection pipeline on ``ref`` for every open regression change point
    of ``ref`` that has none; each started is kept at once (a later failure does not
    start it again)."""
    pending = []
    with store.session() as session:
        for row in open_changes(session, ref=ref):
            if row.direction != "regression" or row.bisection is not None:
                continue
            series = f"{row.board}/{row.flavour}/{row.scenario}/{row.interval_us}us"
            try:
                pending.append((row.id, series, bisect_variables(row)))
            except ValueError as error:
                progress(f"not bisected: {series}: {error}")
    credentials = Credentials(token)
    client = connect(url, Credentials("", job_token=False))
    started = []
    for change_id, series, variables in pending:
        with gitlab_errors(f"triggering the bisection of change point #{change_id} "
                           f"({series})", credentials, error_type=TriggerError,
                           refused=f"check ${TRIGGER_TOKEN_VARIABLE}: a pipeline trigger "
                                   "token of the project"):
            pipeline = client.projects.get(project, lazy=True).trigger_pipeline(
                ref, token, variables=variables)
        address = str(pipeline.attributes.get("web_url") or pipeline.get_id())
        with store.session() as session:
            row = session.get(ChangePoint, change_id)
            assert row is not None
            row.bisection = address
        good, bad = variables["RTLAB_BISECT_GOOD"], variables["RTLAB_BISECT_BAD"]
        started.append(Started(change_id, series, good, bad, address))
        progress(f"change point #{change_id} {series}: bisection of {good[:12]}..{bad[:12]} "
                 f"started: {address}")
    return started


def from_environment(store: Store, ref: str,
                     progress: Callable[[str], None] = print) -> list[Started]:
    """:func:`start_bisections` with GitLab's predefined variables and the trigger token
    from the environment."""
    token = os.environ.get(TRIGGER_TOKEN_VARIABLE)
    missing = [name for name in ("CI_SERVER_URL", "CI_PROJECT_ID")
               if not os.environ.get(name)]
    if not token:
        missing.append(TRIGGER_TOKEN_VARIABLE)
    if missing:
        raise TriggerError(f"--bisect-changes starts pipelines on GitLab: set "
                           f"{', '.join(missing)} (a CI job has the first two; the token "
                           "is a pipeline trigger token, a masked variable)")
    assert token is not None
    return start_bisections(store, ref, url=os.environ["CI_SERVER_URL"],
                            project=os.environ["CI_PROJECT_ID"], token=token,
                            progress=progress)
