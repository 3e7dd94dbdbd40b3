"""A LAVA server through lavacli (PyPI lavacli, pinned in pyproject.toml): submit jobs,
wait for them, and fetch a finished job's definition, details and log.

The server and the credentials come from the environment (a CI job's masked variables):
RTLAB_LAVA_URL (the server, or its /RPC2 endpoint), RTLAB_LAVA_USER and RTLAB_LAVA_TOKEN,
or RTLAB_LAVA_TOKEN_FILE naming a file that holds the token (a CI variable of type file,
or the token of `rtlab lava server`, which only root reads). They reach lavacli through a
configuration file in a private temporary folder, never on a command line (which other
users of the machine can read), and the token is blanked out of anything lavacli prints
before rtlab passes it on. A server that refuses the token says so in one line
(:class:`LavaAuthError`), not in lavacli's traceback.
"""

import datetime
import json
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import attr
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

URL_VARIABLE = "RTLAB_LAVA_URL"
USER_VARIABLE = "RTLAB_LAVA_USER"
TOKEN_VARIABLE = "RTLAB_LAVA_TOKEN"
TOKEN_FILE_VARIABLE = "RTLAB_LAVA_TOKEN_FILE"
IDENTITY = "rtlab"
HIDDEN = "***"


class LavaServerError(RuntimeError):
    """lavacli failed; the message carries what it said (the token blanked out)."""


class LavaAuthError(LavaServerError):
    """The server refused the user's token (or wants one)."""


@attr.frozen
class Server:
    url: str
    user: str | None
    token: str | None = attr.field(repr=False)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> "Server":
        url = environ.get(URL_VARIABLE, "").strip()
        if not url:
            raise ValueError(f"{URL_VARIABLE} is not set: the LAVA server, e.g. "
                             "https://lava.example.org (its /RPC2 endpoint is assumed)")
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"{URL_VARIABLE} must be an http(s) URL, got one with scheme "
                             f"{parsed.scheme!r}")
        if parsed.username or parsed.password:
            raise ValueError(f"{URL_VARIABLE} must not carry credentials: use "
                             f"{USER_VARIABLE} and {TOKEN_VARIABLE}")
        if parsed.path in ("", "/"):
            url = url.rstrip("/") + "/RPC2"
        user = environ.get(USER_VARIABLE) or None
        token = environ.get(TOKEN_VARIABLE) or None
        token_file = environ.get(TOKEN_FILE_VARIABLE) or None
        if token is not None and token_file is not None:
            raise ValueError(f"give {TOKEN_VARIABLE} or {TOKEN_FILE_VARIABLE}, not both")
        if token_file is not None:
            try:
                token = Path(token_file).read_text(encoding="utf-8").strip() or None
            except OSError as error:
                raise ValueError(f"{TOKEN_FILE_VARIABLE}={token_file}: cannot read the token: "
                                 f"{error.strerror}") from None
            if token is None:
                raise ValueError(f"{TOKEN_FILE_VARIABLE}={token_file}: the file is empty")
        if (user is None) != (token is None):
            raise ValueError(f"give both {USER_VARIABLE} and {TOKEN_VARIABLE} (or "
                             f"{TOKEN_FILE_VARIABLE}), or neither (anonymous access)")
        return cls(url, user, token)

    @property
    def host(self) -> str:
        return urlparse(self.url).netloc

    def job_url(self, job_id: str) -> str:
        parsed = urlparse(self.url)
        return f"{parsed.scheme}://{parsed.netloc}/scheduler/job/{job_id}"

    def hide(self, text: str) -> str:
        return text.replace(self.token, HIDDEN) if self.token else text

    def lavacli(self, *args: str, timeout: float | None = 300) -> str:
        """lavacli's standard output for ``args``."""
        lavacli = Path(sys.executable).with_name("lavacli")
        if not lavacli.exists():
            raise FileNotFoundError(f"{lavacli} is missing: it comes with rtlab's "
                                    "dependencies (pip install -e .)")
        config: dict[str, Any] = {"uri": self.url}
        if self.user is not None:
            config.update(username=self.user, token=self.token)
        with tempfile.TemporaryDirectory(prefix="rtlab-lavacli-") as folder:
            path = Path(folder) / "lavacli.yaml"
            # only this user may read the token (the folder is 0700 already)
            path.touch(mode=stat.S_IRUSR | stat.S_IWUSR)
            with path.open("w", encoding="utf-8") as out:
                YAML(typ="safe").dump({IDENTITY: config}, out)
            try:
                proc = subprocess.run([str(lavacli), "-i", IDENTITY, *args],
                                      env={**os.environ, "XDG_CONFIG_HOME": folder},
                                      capture_output=True, text=True, check=False,
                                      timeout=timeout)
            except subprocess.TimeoutExpired:
                raise LavaServerError(f"lavacli {' '.join(args)}: no answer from {self.host} "
                                      f"within {timeout} s") from None
        if proc.returncode != 0:
            said = self.hide((proc.stderr or proc.stdout).strip())
            if _refused(said):
                who = f"the token of user {self.user}" if self.user else "anonymous access"
                raise LavaAuthError(f"LAVA server {self.host} refused {who} "
                                    f"(lavacli {args[0]} {args[1] if len(args) > 1 else ''}: "
                                    f"{_refusal(said)}): check {USER_VARIABLE} and "
                                    f"{TOKEN_VARIABLE} or {TOKEN_FILE_VARIABLE}")
            raise LavaServerError(f"lavacli {' '.join(args)} on {self.host} failed "
                                  f"(exit {proc.returncode}): {said[-1000:]}")
        return proc.stdout

    def submit(self, job_file: Path) -> list[str]:
        out = self.lavacli("jobs", "submit", str(job_file))
        # one id per job, "1234" (or "1234.0", "1234.1" for a multinode job)
        ids = [word for word in out.split() if word.replace(".", "").isdigit()]
        if not ids:
            raise LavaServerError(f"lavacli jobs submit printed no job id: "
                                  f"{self.hide(out.strip())[:200]!r}")
        return ids

    def wait(self, job_id: str, timeout_s: int, *, poll_s: int = 5) -> None:
        """Until the job has finished; raises when it has not after ``timeout_s`` (0: no
        limit), saying where it is."""
        try:
            self.lavacli("jobs", "wait", job_id, "--timeout", str(timeout_s),
                         "--polling", str(poll_s),
                         timeout=timeout_s + 120 if timeout_s else None)
        except LavaAuthError:
            raise
        except LavaServerError as error:
            try:
                state = self.show(job_id).get("state")
            except LavaServerError:
                raise error from None
            if state == "Finished":
                return
            raise LavaServerError(f"job {job_id} on {self.host} is still {state} after "
                                  f"{timeout_s} s (--wait): "
                                  + ("no device took it yet" if state == "Submitted" else
                                     "it has not finished yet")) from None

    def show(self, job_id: str) -> dict[str, Any]:
        return json.loads(self.lavacli("jobs", "show", job_id, "--json"))

    def definition(self, job_id: str) -> str:
        return self.lavacli("jobs", "definition", job_id)

    def log(self, job_id: str) -> str:
        return self.lavacli("jobs", "logs", job_id, "--raw", "--no-follow", timeout=900)


@attr.frozen
class Fetched:
    job_id: str
    details: dict[str, Any]
    definition: str
    log: str


def fetch(server: Server, job_id: str, *, wait_s: int | None, poll_s: int = 5) -> Fetched:
    """A job's details, definition and log; with ``wait_s`` first waits for it to end
    (0: without limit), asking every ``poll_s`` seconds."""
    if wait_s is not None:
        server.wait(job_id, wait_s, poll_s=poll_s)
    details = server.show(job_id)
    state = details.get("state")
    if state not in ("Finished", None):
        raise LavaServerError(f"job {job_id} on {server.host} is {state}, not finished "
                              "(rtlab lava fetch --wait)")
    return Fetched(job_id, details, server.definition(job_id), server.log(job_id))


def _refused(said: str) -> bool:
    # lavacli's words for an HTTP 401 or 403 from the server's XML-RPC endpoint
    return any(word in said for word in ("401 Client Error", "403 Client Error",
                                         "Invalid token", "Unauthorized", "Forbidden"))


def _refusal(said: str) -> str:
    for line in said.splitlines():
        for word in ("401", "403", "Invalid token"):
            if word in line:
                return line.strip()[:200]
    return said.splitlines()[-1].strip()[:200] if said else "refused"


def submit_all(server: Server, jobs: Sequence[Path]) -> list[tuple[Path, str]]:
    return [(job, job_id) for job in jobs for job_id in server.submit(job)]


def server_time(value: object) -> datetime.datetime | None:
    # lavacli shows the XML-RPC DateTime of lava-server as 20261125T18:58:06 (UTC)
    try:
        return datetime.datetime.strptime(str(value), "%Y%m%dT%H:%M:%S").replace(
            tzinfo=datetime.UTC)
    except ValueError:
        return None


def queue_timeout_s(definition: str) -> int | None:
    """The job's ``timeouts: queue`` in seconds, None when it has none."""
    try:
        job = YAML(typ="safe").load(definition)
        queue = job["timeouts"]["queue"]
    except (YAMLError, KeyError, TypeError):
        return None
    if not isinstance(queue, dict):
        return None
    units = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}
    return sum(int(queue.get(unit, 0)) * factor for unit, factor in units.items()) or None


def never_started(details: Mapping[str, Any], definition: str) -> str | None:
    """Why a finished job never ran on a device (None: it did): lava-server ended it in
    the queue, canceled by a user or by its queue timeout (a device gone offline, say)."""
    if details.get("state") != "Finished" or details.get("device"):
        return None
    health = details.get("health") or "unknown"
    submitted = server_time(details.get("submit_time"))
    ended = server_time(details.get("end_time"))
    waited = (f"; it waited {(ended - submitted).total_seconds():.0f} s"
              if submitted and ended else "")
    limit = queue_timeout_s(definition)
    comment = details.get("failure_comment")
    if health == "Canceled":
        if limit is not None and submitted and ended and (
                ended - submitted).total_seconds() >= limit:
            why = (f"no device of type {details.get('device_type')} that it may run on was "
                   f"free within its queue timeout of {limit} s{waited}")
        else:
            why = f"canceled while it waited for a device{waited}"
        return f"LAVA canceled the job before it started (Canceled error: {why})"
    return (f"LAVA ended the job {health} before it started on a device{waited}"
            + (f": {comment}" if comment else ""))
