"""The tuning branch in git: one file changed on top of a base commit, committed without
touching the checkout (a temporary index, git's plumbing), and pushed to the project's
repository over HTTPS with a token.

The token never reaches a command line, a remote URL or git's configuration files: git
reads it from its environment as an ``http.extraHeader`` (``GIT_CONFIG_COUNT``,
``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n``, git >= 2.31), the same way for ``ls-remote``
and ``push``; credential helpers and prompts are switched off, so a refused token fails at
once instead of asking or falling back to another credential; and git's messages are
masked before they are shown.
"""

import base64
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit, urlunsplit

import attr

# an HTTP 401/403 from GitLab, as git reports it
_REFUSED = ("Authentication failed", "HTTP Basic: Access denied", "returned error: 401",
            "returned error: 403", "terminal prompts disabled", "could not read Username")


class GitError(RuntimeError):
    """A git command failed; the message says which, where, and git's own words (token
    masked)."""


@attr.frozen
class Identity:
    """Who the tuning commit is by: the token's user, so that GitLab shows the bot."""

    name: str
    email: str

    def environment(self) -> dict[str, str]:
        return {"GIT_AUTHOR_NAME": self.name, "GIT_AUTHOR_EMAIL": self.email,
                "GIT_COMMITTER_NAME": self.name, "GIT_COMMITTER_EMAIL": self.email}


@attr.frozen
class Remote:
    """A repository URL to push to, and the token that may (kept out of ``repr``)."""

    url: str
    token: str = attr.field(repr=False)
    # HTTP Basic's user name: GitLab takes any non-blank one with a token
    username: str = "oauth2"

    @classmethod
    def of(cls, url: str, token: str, username: str = "oauth2") -> "Remote":
        """``url`` without any user or password in it (GitLab's ``http_url_to_repo`` has
        none; a CI checkout's origin has the job token in it)."""
        parts = urlsplit(url)
        # host[:port] as written ([::1] keeps its brackets), whatever user came before it
        netloc = parts.netloc.rpartition("@")[2]
        return cls(urlunsplit(parts._replace(netloc=netloc)) if parts.netloc else url,
                   token, username or "oauth2")

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` (the process environment) plus the token as an HTTP header for git, no
        credential helper, no prompt."""
        env = {key: value for key, value in base.items()
               if key not in ("GIT_ASKPASS", "SSH_ASKPASS")}
        count = int(env.get("GIT_CONFIG_COUNT") or 0)
        basic = base64.b64encode(f"{self.username}:{self.token}".encode()).decode()
        for offset, (key, value) in enumerate((
                ("http.extraHeader", f"Authorization: Basic {basic}"),
                # an empty helper clears the list: no stored credential answers instead
                ("credential.helper", ""))):
            env[f"GIT_CONFIG_KEY_{count + offset}"] = key
            env[f"GIT_CONFIG_VALUE_{count + offset}"] = value
        env["GIT_CONFIG_COUNT"] = str(count + 2)
        env["GIT_TERMINAL_PROMPT"] = "0"
        return env

    def mask(self, text: str) -> str:
        basic = base64.b64encode(f"{self.username}:{self.token}".encode()).decode()
        return text.replace(self.token, "[masked]").replace(basic, "[masked]")


def _run(args: list[str], cwd: Path, *, env: Mapping[str, str] | None = None,
         stdin: str | None = None, remote: Remote | None = None) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, env=env, input=stdin,
                              capture_output=True, text=True, check=False)
    except FileNotFoundError as error:
        raise GitError("git is not installed: the tuning branch needs it") from error
    if done.returncode != 0:
        # a push's porcelain report (a rejected lease) is on stdout, the rest on stderr
        said = ("\n".join(filter(None, (done.stderr.strip(), done.stdout.strip())))
                or f"exit {done.returncode}")
        what = " ".join(args[:2])
        if remote is not None:
            said = remote.mask(said)
            message = f"git {what} {remote.url}: {said}"
            if any(sign in said for sign in _REFUSED):
                message = (f"git {what} {remote.url}: the repository refused the token "
                           f"({said.splitlines()[-1]})")
            raise GitError(message)
        raise GitError(f"git {what} in {cwd}: {said}")
    return done.stdout


def toplevel(path: Path) -> Path:
    """The root of the git work tree ``path`` is in."""
    folder = path if path.is_dir() else path.parent
    return Path(_run(["rev-parse", "--show-toplevel"], folder).strip())


def resolve(root: Path, revision: str) -> str:
    return _run(["rev-parse", "--verify", f"{revision}^{{commit}}"], root).strip()


def relative(root: Path, path: Path) -> str:
    """``path`` as git names it in the repository at ``root``."""
    return PurePosixPath(path.resolve().relative_to(root.resolve())).as_posix()


def commit_file(root: Path, base: str, name: str, text: str, message: str,
                identity: Identity) -> str:
    """A commit whose parent is ``base`` and whose tree is ``base``'s with ``name`` holding
    ``text``; the checkout, its index and HEAD are left as they were."""
    with tempfile.TemporaryDirectory(prefix="rtlab-tune-index-") as scratch:
        env = {**os.environ, **identity.environment(),
               "GIT_INDEX_FILE": os.fspath(Path(scratch) / "index")}
        _run(["read-tree", base], root, env=env)
        listed = _run(["ls-tree", base, "--", name], root, env=env).split()
        mode = listed[0] if listed else "100644"
        blob = _run(["hash-object", "-w", "--stdin", f"--path={name}"], root, env=env,
                    stdin=text).strip()
        _run(["update-index", "--add", "--cacheinfo", f"{mode},{blob},{name}"], root,
             env=env)
        tree = _run(["write-tree"], root, env=env).strip()
        return _run(["commit-tree", tree, "-p", base, "-F", "-"], root, env=env,
                    stdin=message).strip()


def remote_head(root: Path, remote: Remote, branch: str) -> str | None:
    """The commit ``branch`` is at in the remote repository, or None when it has none."""
    out = _run(["ls-remote", "--heads", remote.url, f"refs/heads/{branch}"], root,
               env=remote.environment(os.environ), remote=remote)
    for line in out.splitlines():
        sha, _, ref = line.partition("\t")
        if ref == f"refs/heads/{branch}":
            return sha
    return None


def push(root: Path, remote: Remote, commit: str, branch: str, expected: str | None,
         options: Sequence[str] = ()) -> str:
    """``commit`` to ``branch``, replacing whatever the branch held only if it still holds
    ``expected`` (None: only if it does not exist): a branch that moved meanwhile is left
    alone. ``options`` are push options for the server (GitLab's ``ci.skip``). Returns
    git's report."""
    ref = f"refs/heads/{branch}"
    out = _run(["push", "--porcelain", f"--force-with-lease={ref}:{expected or ''}",
                *(f"--push-option={option}" for option in options),
                remote.url, f"{commit}:{ref}"], root, env=remote.environment(os.environ),
               remote=remote)
    return remote.mask(out)
