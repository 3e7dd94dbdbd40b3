"""A stand-in for the GitLab a lab's pipeline talks to, on loopback: the part of GitLab's REST
API that ``rtlab thresholds propose`` calls through python-gitlab (the token's user, the
project, its merge requests and their commits) and that ``rtlab bisect publish`` calls (a
commit's merge requests, a note on a merge request, a comment on a commit), and the
project's repository, a real bare repository served over Git's smart HTTP by
``git http-backend``, with GitLab's rules for both: a token in ``PRIVATE-TOKEN`` (API) or
as the password of HTTP Basic (Git), 401 otherwise; one open merge request per source
branch; a merge request only from a branch that exists; 404 for a commit the repository
does not hold. A merge request's commits are those of its source branch that its target
branch lacks (so, unlike GitLab, a merged one has none left). Every request is recorded
(method, path, query, JSON body, whether it was authenticated), never the token itself;
so is every note and commit comment posted, and every pipeline GitLab would create: a push
to a branch (a merge request pipeline when the branch has an open merge request, a branch
pipeline otherwise; none with the push option ``ci.skip``) and a merge request's creation.

The unit tests of the tuning merge requests run against it, and so does the virtual rack's
pipeline demo (``make demo PIPELINE=1 TUNE=1``), which has no GitLab server either.

    with StandInGitLab(bare_repository, token="…") as gitlab:
        gitlab.url, gitlab.project_id, gitlab.merge_requests, gitlab.requests, gitlab.notes
"""

import base64
import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import attr

API = "/api/v4"
# git's requests that do not fit a request's buffer arrive chunked; nothing else does
_CHUNKED = "chunked"


@attr.frozen
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    # the token was the stand-in's (API header, or Git's HTTP Basic password)
    authenticated: bool


@attr.frozen
class Pipeline:
    """A pipeline GitLab would have created: its source (``push`` for a branch pipeline,
    ``merge_request_event``) and the branch."""

    source: str
    branch: str


@attr.frozen
class Triggered:
    """A pipeline started through the trigger API (``POST /projects/:id/trigger/pipeline``
    with a pipeline trigger token): its ref and its variables."""

    pipeline_id: int
    ref: str
    variables: dict[str, str]


# the repository's post-receive hook: each updated ref and the push's options, one line
# each, for the stand-in to read after the push
_HOOK = r"""#!/bin/sh
options=""
i=0
while [ "$i" -lt "${GIT_PUSH_OPTION_COUNT:-0}" ]; do
    eval "options=\"$options \$GIT_PUSH_OPTION_$i\""
    i=$((i + 1))
done
while read -r old new ref; do
    echo "$ref $new$options" >> rtlab-stand-in-pushes
done
"""


@attr.frozen
class Note:
    """A note posted on a merge request (``MergeRequest``, its iid) or a comment on a
    commit (``Commit``, its full sha)."""

    noteable_type: str
    noteable: str
    body: str


@attr.define
class MergeRequest:
    iid: int
    source_branch: str
    target_branch: str
    title: str
    description: str
    labels: list[str]
    state: str = "opened"
    remove_source_branch: bool = False
    author: str = ""


@attr.define
class StandInGitLab:
    """GitLab for one project (``lab/rtlab`` by default) whose repository is ``repository``
    (a bare repository), on 127.0.0.1 at a free port."""

    repository: Path
    token: str = attr.field(repr=False)
    # what Git's HTTP takes as the password, when not the token (a token the API takes and
    # the repository refuses)
    git_token: str | None = attr.field(default=None, repr=False)
    project_path: str = "lab/rtlab"
    project_id: int = 1
    default_branch: str = "main"
    # the project's pipeline trigger token (None: the trigger API refuses every token)
    trigger_token: str | None = attr.field(default=None, repr=False)
    username: str = "project_1_bot_tuning"
    name: str = "rtlab tuning"
    requests: list[Request] = attr.Factory(list)
    merge_requests: list[MergeRequest] = attr.Factory(list)
    pipelines: list[Pipeline] = attr.Factory(list)
    notes: list[Note] = attr.Factory(list)
    triggered: list[Triggered] = attr.Factory(list)
    url: str = ""
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = attr.Factory(threading.Lock)

    @property
    def email(self) -> str:
        return f"{self.username}@noreply.{urlsplit(self.url).hostname or 'localhost'}"

    @property
    def repository_url(self) -> str:
        return f"{self.url}/{self.project_path}.git"

    def start(self) -> "StandInGitLab":
        # as GitLab: pushes may carry options (ci.skip), and the stand-in learns of them
        self._git("config", "receive.advertisePushOptions", "true")
        hook = self.repository / "hooks" / "post-receive"
        hook.parent.mkdir(exist_ok=True)
        hook.write_text(_HOOK)
        hook.chmod(0o755)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True,
                                        name="stand-in GitLab")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._server = self._thread = None

    def __enter__(self) -> "StandInGitLab":
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def api_calls(self) -> list[tuple[str, str]]:
        """(method, path) of every API request, in order."""
        return [(r.method, r.path) for r in self.requests if r.path.startswith(API)]

    def open_merge_requests(self) -> list[MergeRequest]:
        return [mr for mr in self.merge_requests if mr.state == "opened"]

    def branch_head(self, branch: str) -> str | None:
        done = self._git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}")
        return done.stdout.strip() or None

    def _git(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", os.fspath(self.repository), *args],
                              capture_output=True, text=True, check=False)

    # -- the API ------------------------------------------------------------------------

    def _user(self) -> dict[str, Any]:
        return {"id": 101, "username": self.username, "name": self.name, "state": "active",
                "bot": True, "email": self.email, "commit_email": self.email,
                "web_url": f"{self.url}/{self.username}"}

    def _project(self) -> dict[str, Any]:
        return {"id": self.project_id, "path_with_namespace": self.project_path,
                "default_branch": self.default_branch,
                "http_url_to_repo": self.repository_url,
                "web_url": f"{self.url}/{self.project_path}"}

    def _mr_json(self, mr: MergeRequest) -> dict[str, Any]:
        return {"id": 1000 + mr.iid, "iid": mr.iid, "project_id": self.project_id,
                "title": mr.title, "description": mr.description, "state": mr.state,
                "source_branch": mr.source_branch, "target_branch": mr.target_branch,
                "labels": list(mr.labels), "force_remove_source_branch":
                mr.remove_source_branch, "author": {"username": mr.author},
                "sha": self.branch_head(mr.source_branch),
                "web_url": f"{self.url}/{self.project_path}/-/merge_requests/{mr.iid}"}

    def _find(self, iid: int) -> MergeRequest | None:
        return next((mr for mr in self.merge_requests if mr.iid == iid), None)

    def api(self, method: str, steps: list[str], query: dict[str, list[str]],
            body: dict[str, Any]) -> tuple[int, Any]:
        """GitLab's answer (status, JSON) to an authenticated API request."""
        if steps == ["user"] and method == "GET":
            return 200, self._user()
        if len(steps) < 2 or steps[0] != "projects" or unquote(steps[1]) not in (
                str(self.project_id), self.project_path):
            return 404, {"message": "404 Project Not Found"}
        rest = steps[2:]
        if not rest and method == "GET":
            return 200, self._project()
        if rest == ["trigger", "pipeline"] and method == "POST":
            return self._trigger(body)
        if rest == ["merge_requests"] and method == "GET":
            return 200, self._list(query)
        if rest == ["merge_requests"] and method == "POST":
            return self._create(body)
        if len(rest) >= 2 and rest[0] == "merge_requests" and rest[1].isdigit():
            mr = self._find(int(rest[1]))
            if mr is None:
                return 404, {"message": "404 Not found"}
            if rest[2:] == [] and method == "GET":
                return 200, self._mr_json(mr)
            if rest[2:] == [] and method == "PUT":
                return self._update(mr, body)
            if rest[2:] == ["commits"] and method == "GET":
                return 200, self._commits(mr)
            if rest[2:] == ["notes"] and method == "POST":
                return self._note("MergeRequest", str(mr.iid), body, "body")
        if len(rest) == 4 and rest[:2] == ["repository", "commits"]:
            sha = self._commit(unquote(rest[2]))
            if sha is None:
                return 404, {"message": "404 Commit Not Found"}
            if rest[3] == "merge_requests" and method == "GET":
                return 200, [self._mr_json(mr) for mr in self.merge_requests
                             if sha in {c["id"] for c in self._commits(mr)}]
            if rest[3] == "comments" and method == "POST":
                return self._note("Commit", sha, body, "note")
        return 404, {"message": "404 Not Found"}

    def _trigger(self, body: dict[str, Any]) -> tuple[int, Any]:
        ref = body.get("ref")
        if not isinstance(ref, str) or self._commit(ref) is None:
            return 400, {"message": {"base": [f"Reference not found: {ref!r}"]}}
        variables = body.get("variables") or {}
        if not isinstance(variables, dict):
            return 400, {"error": "variables is invalid"}
        pipeline_id = 1000 + len(self.triggered)
        self.triggered.append(Triggered(pipeline_id, ref,
                                        {str(k): str(v) for k, v in variables.items()}))
        return 201, {"id": pipeline_id, "ref": ref, "status": "created", "source": "trigger",
                     "web_url": f"{self.url}/{self.project_path}/-/pipelines/{pipeline_id}"}

    def _list(self, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        def wanted(mr: MergeRequest) -> bool:
            state = query.get("state", ["all"])[0]
            return ((state == "all" or mr.state == state)
                    and mr.source_branch == query.get("source_branch", [mr.source_branch])[0]
                    and mr.target_branch == query.get("target_branch", [mr.target_branch])[0])

        found = [mr for mr in self.merge_requests if wanted(mr)]
        found.sort(key=lambda mr: mr.iid, reverse=query.get("sort", ["desc"])[0] == "desc")
        per_page = int(query.get("per_page", ["20"])[0])
        return [self._mr_json(mr) for mr in found[:per_page]]

    def _create(self, body: dict[str, Any]) -> tuple[int, Any]:
        missing = [key for key in ("source_branch", "target_branch", "title")
                   if not body.get(key)]
        if missing:
            return 400, {"error": f"{', '.join(missing)} is missing"}
        source, target = body["source_branch"], body["target_branch"]
        for branch in (source, target):
            if self.branch_head(branch) is None:
                return 422, {"message": [f"Branch {branch!r} does not exist"]}
        if any(mr.source_branch == source and mr.target_branch == target
               for mr in self.open_merge_requests()):
            return 409, {"message": [f"Another open merge request already exists for this "
                                     f"source branch: {source}"]}
        mr = MergeRequest(len(self.merge_requests) + 1, source, target, body["title"],
                          body.get("description") or "", _labels(body.get("labels")),
                          remove_source_branch=bool(body.get("remove_source_branch")),
                          author=self.username)
        self.merge_requests.append(mr)
        self.pipelines.append(Pipeline("merge_request_event", source))
        return 201, self._mr_json(mr)

    def _update(self, mr: MergeRequest, body: dict[str, Any]) -> tuple[int, Any]:
        for key in ("title", "description"):
            if key in body:
                setattr(mr, key, body[key])
        if "labels" in body:
            mr.labels = _labels(body["labels"])
        if body.get("state_event") == "close":
            mr.state = "closed"
        return 200, self._mr_json(mr)

    def _commit(self, ref: str) -> str | None:
        """The full sha of a commit the repository holds (GitLab takes a sha, short or
        not, or a ref), None otherwise."""
        if ref.startswith("-"):
            return None
        done = self._git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        return done.stdout.strip() or None

    def _note(self, noteable_type: str, noteable: str, body: dict[str, Any],
              key: str) -> tuple[int, Any]:
        text = body.get(key)
        if not isinstance(text, str) or not text.strip():
            return 400, {"error": f"{key} is missing"}
        self.notes.append(Note(noteable_type, noteable, text))
        author = {"username": self.username, "name": self.name}
        if noteable_type == "Commit":
            # GitLab answers a commit comment without an id
            return 201, {"note": text, "author": author, "path": None, "line": None,
                         "line_type": None}
        return 201, {"id": len(self.notes), "body": text, "author": author,
                     "noteable_type": noteable_type, "noteable_iid": int(noteable),
                     "system": False}

    def _commits(self, mr: MergeRequest) -> list[dict[str, Any]]:
        # GitLab lists the merge request's own commits, newest first
        log = self._git("log", "--format=%H%x00%s%x00%an%x00%ae%x00%ce%x00%cI",
                        f"refs/heads/{mr.target_branch}..refs/heads/{mr.source_branch}")
        commits = []
        for line in log.stdout.splitlines():
            sha, title, name, email, committer, date = line.split("\0")
            commits.append({"id": sha, "short_id": sha[:8], "title": title,
                            "author_name": name, "author_email": email,
                            "committer_email": committer, "created_at": date})
        return commits

    # -- Git's smart HTTP -----------------------------------------------------------------

    def _pushed(self) -> None:
        """The pipelines of the refs the last push updated (see the module docstring)."""
        log = self.repository / "rtlab-stand-in-pushes"
        if not log.is_file():
            return
        lines = log.read_text().splitlines()
        log.unlink()
        for line in lines:
            ref, new, *options = line.split()
            if not ref.startswith("refs/heads/") or set(new) == {"0"} or "ci.skip" in options:
                continue
            branch = ref.removeprefix("refs/heads/")
            source = ("merge_request_event" if any(
                mr.source_branch == branch for mr in self.open_merge_requests()) else "push")
            self.pipelines.append(Pipeline(source, branch))

    def git_http(self, method: str, path: str, query: str, headers: dict[str, str],
                 body: bytes, user: str) -> tuple[int, dict[str, str], bytes]:
        """``git http-backend`` as a CGI program, for the project's repository."""
        prefix = f"/{self.project_path}.git"
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": os.fspath(self.repository.parent),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": f"/{self.repository.name}{path.removeprefix(prefix)}",
            "QUERY_STRING": query, "REQUEST_METHOD": method,
            "CONTENT_TYPE": headers.get("content-type", ""),
            "CONTENT_LENGTH": str(len(body)),
            # an authenticated user may push (receive-pack), as on GitLab
            "REMOTE_USER": user, "REMOTE_ADDR": "127.0.0.1",
            "GIT_HTTP_MAX_REQUEST_BUFFER": "100M",
        }
        for name in ("content-encoding", "git-protocol"):
            if name in headers:
                env["HTTP_" + name.upper().replace("-", "_")] = headers[name]
        done = subprocess.run(["git", "http-backend"], input=body, env=env,
                              capture_output=True, check=False)
        if path.endswith("/git-receive-pack"):
            self._pushed()
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = done.stdout.partition(b"\n\n")
        status = 200 if done.returncode == 0 else 500
        out_headers: dict[str, str] = {}
        for line in head.decode("latin-1").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                out_headers[key.strip()] = value.strip()
        return status, out_headers, payload


def _labels(value: object) -> list[str]:
    if isinstance(value, str):
        return [label for label in (part.strip() for part in value.split(",")) if label]
    if isinstance(value, list):
        return [str(label) for label in value]
    return []


def _handler(gitlab: StandInGitLab) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:
            pass

        def _send(self, code: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(code)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, code: int, document: object) -> None:
            self._send(code, json.dumps(document).encode(),
                       {"Content-Type": "application/json"})

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == _CHUNKED:
                data = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return bytes(data)
                    data += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _git_user(self) -> str | None:
            """The user of Git's HTTP Basic authentication when its password is the
            token (GitLab takes any non-blank user name with a token)."""
            scheme, _, encoded = (self.headers.get("Authorization") or "").partition(" ")
            if scheme.lower() != "basic":
                return None
            try:
                user, _, password = base64.b64decode(encoded).decode().partition(":")
            except ValueError:
                return None
            wanted = gitlab.git_token if gitlab.git_token is not None else gitlab.token
            return user if user and password == wanted else None

        def _serve(self, method: str) -> None:
            parts = urlsplit(self.path)
            body = self._body()
            if parts.path.startswith(API + "/"):
                authenticated = self.headers.get("PRIVATE-TOKEN") == gitlab.token
                document: Any = None
                if body:
                    try:
                        document = json.loads(body)
                    except ValueError:
                        document = {key: values[0] for key, values in
                                    parse_qs(body.decode()).items()}
                if parts.path.endswith("/trigger/pipeline"):
                    # the trigger API: its own token in the body, no other credential
                    authenticated = (gitlab.trigger_token is not None
                                     and isinstance(document, dict)
                                     and document.get("token") == gitlab.trigger_token)
                with gitlab._lock:
                    gitlab.requests.append(Request(method, parts.path,
                                                   parse_qs(parts.query), document,
                                                   authenticated))
                    if not authenticated:
                        self._json(401, {"message": "401 Unauthorized"})
                        return
                    # the project's path arrives URL-encoded as one step (lab%2Frtlab)
                    steps = parts.path.removeprefix(API + "/").split("/")
                    code, answer = gitlab.api(method, steps, parse_qs(parts.query),
                                              document or {})
                self._json(code, answer)
                return
            if parts.path.startswith(f"/{gitlab.project_path}.git/"):
                user = self._git_user()
                with gitlab._lock:
                    gitlab.requests.append(Request(method, parts.path,
                                                   parse_qs(parts.query), None,
                                                   user is not None))
                if user is None:
                    self._send(401, b"HTTP Basic: Access denied\n",
                               {"WWW-Authenticate": 'Basic realm="GitLab"',
                                "Content-Type": "text/plain"})
                    return
                headers = {key.lower(): value for key, value in self.headers.items()}
                with gitlab._lock:
                    code, out_headers, payload = gitlab.git_http(
                        method, parts.path, parts.query, headers, body, user)
                self._send(code, payload, out_headers)
                return
            self._json(404, {"message": "404 Not Found"})

        def do_GET(self) -> None:  # noqa: N802 - http.server's names
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

        def do_PUT(self) -> None:  # noqa: N802
            self._serve("PUT")

    return Handler
