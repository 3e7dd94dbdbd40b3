"""GitLab's API as the stages use it (``rtlab results pull``, a kernel from an earlier
pipeline's artifacts, the tuning merge request): the token from the environment, a client
that retries GitLab's transient errors, and GitLab's errors with the token masked."""

import os
from collections.abc import Iterator
from contextlib import contextmanager

import attr
import gitlab
import requests
from gitlab.exceptions import GitlabError

TOKEN_VARIABLE = "RTLAB_GITLAB_TOKEN"
JOB_TOKEN_VARIABLE = "CI_JOB_TOKEN"
REQUEST_TIMEOUT_S = 120
# GitLab answers 502 now and then, and a runner's network drops; python-gitlab waits
# 0.1 s, 0.2 s, 0.4 s... between attempts (its own default of 10 waits 100 s in all)
RETRIES = 5


class GitLabError(RuntimeError):
    """GitLab refused or could not be reached; the message names the URL, never the
    token."""


class PullError(GitLabError):
    """Job artifacts could not be had from GitLab (``rtlab results pull``, a kernel of an
    earlier pipeline)."""


@attr.frozen
class Credentials:
    token: str = attr.field(repr=False)
    # a CI job's own token (JOB-TOKEN header) rather than a personal/project one
    job_token: bool = False

    @classmethod
    def from_environment(cls) -> "Credentials":
        if os.environ.get(TOKEN_VARIABLE):
            return cls(os.environ[TOKEN_VARIABLE])
        if os.environ.get(JOB_TOKEN_VARIABLE):
            return cls(os.environ[JOB_TOKEN_VARIABLE], job_token=True)
        raise PullError(f"no GitLab token: set ${TOKEN_VARIABLE} (a masked CI variable "
                        f"holding a token with read_api) or run in a CI job "
                        f"(${JOB_TOKEN_VARIABLE})")


def connect(url: str, credentials: Credentials) -> gitlab.Gitlab:
    """A python-gitlab client that retries GitLab's transient errors."""
    return gitlab.Gitlab(url, private_token=None if credentials.job_token
                         else credentials.token,
                         job_token=credentials.token if credentials.job_token else None,
                         timeout=REQUEST_TIMEOUT_S, retry_transient_errors=True)


@contextmanager
def gitlab_errors(where: str, credentials: Credentials, *,
                  refused: str | None = None,
                  error_type: type[GitLabError] = PullError) -> Iterator[None]:
    """GitLab's and the network's errors as ``error_type``: the URL, the status and
    GitLab's message, with the token masked should anything echo it. ``refused`` says
    what to check when GitLab refuses the token (401, 403); by default the pull's."""
    try:
        yield
    except GitlabError as error:
        code = error.response_code
        if code in (401, 403):
            how = refused or (
                "a job token (CI_JOB_TOKEN) may not list pipelines on this GitLab: set "
                f"${TOKEN_VARIABLE}" if credentials.job_token else
                f"check ${TOKEN_VARIABLE}: it needs read_api on the project")
            message = f"GitLab refused {where} (HTTP {code}): {how}"
        else:
            text = error.error_message
            if isinstance(text, bytes):
                text = text.decode("utf-8", errors="replace")
            message = f"GitLab: {where}: HTTP {code}: {text}"
        raise error_type(message.replace(credentials.token, "[masked]")) from None
    except requests.RequestException as error:
        message = f"cannot reach GitLab at {where}: {error}"
        raise error_type(message.replace(credentials.token, "[masked]")) from None
