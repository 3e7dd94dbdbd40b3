"""A LAVA server through lavacli (PyPI lavacli, pinned in pyproject.toml): submit jobs,
wait for them, and fetch a finished job's definition, details and log.

The server and the credentials come from the environment (a CI job's masked variables):
RTLAB_LAVA_URL (the server, or its /RPC2 endpoint), RTLAB_LAVA_USER and RTLAB_LAVA_TOKEN.
They reach lavacli through a configuration file in a private temporary folder, never on a
command line (which other users of the machine can read), and the token is blanked out of
anything lavacli prints before rtlab passes it on.
"""

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

URL_VARIABLE = "RTLAB_LAVA_URL"
USER_VARIABLE = "RTLAB_LAVA_USER"
TOKEN_VARIABLE = "RTLAB_LAVA_TOKEN"
IDENTITY = "rtlab"
HIDDEN = "***"


class LavaServerError(RuntimeError):
    """lavacli failed; the message carries what it said (the token blanked out)."""


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
        if (user is None) != (token is None):
            raise ValueError(f"give both {USER_VARIABLE} and {TOKEN_VARIABLE}, or neither "
                             "(anonymous access)")
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

    def wait(self, job_id: str, timeout_s: int) -> None:
        self.lavacli("jobs", "wait", job_id, "--timeout", str(timeout_s),
                     timeout=timeout_s + 120 if timeout_s else None)

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


def fetch(server: Server, job_id: str, *, wait_s: int | None) -> Fetched:
    """A job's details, definition and log; with ``wait_s`` first waits for it to end
    (0: without limit)."""
    if wait_s is not None:
        server.wait(job_id, wait_s)
    details = server.show(job_id)
    state = details.get("state")
    if state not in ("Finished", None):
        raise LavaServerError(f"job {job_id} on {server.host} is {state}, not finished "
                              "(rtlab lava fetch --wait)")
    return Fetched(job_id, details, server.definition(job_id), server.log(job_id))


def submit_all(server: Server, jobs: Sequence[Path]) -> list[tuple[Path, str]]:
    return [(job, job_id) for job in jobs for job_id in server.submit(job)]
