"""rtlab.kernel.provide: which kernel the pipeline's build stage hands on (built, the
default branch's last built one, or Debian's) and why, on a real git history and against a
fake GitLab on 127.0.0.1 that serves job artifacts by ref the way GitLab's API does
(GET /api/v4/projects/:id/jobs/artifacts/:ref/download?job=NAME)."""

import io
import json
import subprocess
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from rtlab.kernel import provide as provide_module
from rtlab.kernel.provide import (
    GitLabSource,
    ProvideError,
    decide,
    fetch_last_built,
    kernel_changes,
    pipeline_base,
    provide,
)

TOKEN = "glpat-kernel-t0ken"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A project with kernel/ and other files, two commits on main and a branch off it."""
    repo = tmp_path / "project"
    (repo / "kernel" / "configs").mkdir(parents=True)
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "config", "user.email", "ci@example.org")
    git(repo, "config", "user.name", "ci")
    (repo / "kernel" / "configs" / "preempt-rt.config").write_text("CONFIG_PREEMPT_RT=y\n")
    (repo / "thresholds.yaml").write_text("boards: {}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    (repo / "thresholds.yaml").write_text("boards: {imx6q: {}}\n")
    git(repo, "commit", "-q", "-am", "thresholds only")
    return repo


def test_the_base_is_gitlabs_own_merge_request_push_or_branch_point(repo):
    first = git(repo, "rev-parse", "HEAD~1")
    assert pipeline_base({"CI_MERGE_REQUEST_DIFF_BASE_SHA": first}, repo) == (
        first, "the merge request's diff base")
    assert pipeline_base({"CI_COMMIT_BEFORE_SHA": first}, repo)[0] == first
    # a new branch's first push has no previous commit: GitLab sends zeros
    zeros = {"CI_COMMIT_BEFORE_SHA": "0" * 40, "CI_DEFAULT_BRANCH": "main",
             "CI_COMMIT_BRANCH": "main"}
    base, why = pipeline_base(zeros, repo)
    assert base is None and "no base commit" in why
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(repo, "checkout", "-q", "-b", "topic")
    (repo / "kernel" / "configs" / "preempt-rt.config").write_text(
        "CONFIG_PREEMPT_RT=y\nCONFIG_INIT_ON_ALLOC_DEFAULT_ON=y\n")
    git(repo, "commit", "-q", "-am", "kernel: init on alloc")
    base, why = pipeline_base({**zeros, "CI_COMMIT_BRANCH": "topic"}, repo)
    assert base == git(repo, "rev-parse", "origin/main")
    assert why == "the merge base with origin/main"
    assert kernel_changes(base, repo) == ["kernel/configs/preempt-rt.config"]


def test_only_kernel_changes_count(repo):
    first = git(repo, "rev-parse", "HEAD~1")
    # HEAD changed thresholds.yaml only
    assert kernel_changes(first, repo) == []
    assert kernel_changes("f" * 40, repo) is None


@pytest.mark.parametrize(("policy", "base", "changes", "can_reuse", "action", "reason"), [
    ("auto", "a" * 40, ["kernel/configs/x.config"], True, "build",
     "kernel/ changed since the base (aaaaaaaaaaaa): kernel/configs/x.config"),
    ("auto", "a" * 40, [], True, "reuse", "kernel/ unchanged since the base"),
    ("auto", "a" * 40, [], False, "debian", "no GitLab to take the default branch's"),
    ("auto", "a" * 40, None, True, "build", "not in this clone"),
    ("auto", None, None, True, "build", "the base: kernel/ may have changed"),
    ("debian", "a" * 40, ["kernel/boards.yaml"], True, "debian", "RTLAB_KERNEL=debian"),
    ("build", "a" * 40, [], True, "build", "RTLAB_KERNEL=build"),
])
def test_decision(policy, base, changes, can_reuse, action, reason):
    decision = decide(policy, base, "the base", changes, can_reuse)
    assert decision.action == action
    assert reason in decision.reason


def test_gitlab_is_used_only_with_a_token_to_read_artifacts():
    # what gitlab-ci-local's jobs get: GitLab's variables but no token
    local = {"CI_SERVER_URL": "https://gitlab.example", "CI_PROJECT_ID": "1217",
             "CI_DEFAULT_BRANCH": "main", "CI_JOB_NAME": "kernel: [imx6q, rt]"}
    assert GitLabSource.from_environment(local) is None
    source = GitLabSource.from_environment({**local, "CI_JOB_TOKEN": "job-token"})
    assert source == GitLabSource("https://gitlab.example", "1217", "main", "kernel")
    assert source.job_name("imx6q", "rt") == "kernel: [imx6q, rt]"


def test_an_unknown_policy_lists_the_valid_ones():
    with pytest.raises(ProvideError, match="unknown kernel policy 'sometimes'; valid: auto, "
                                           "build, reuse, debian"):
        decide("sometimes", None, "", None, False)


def kernel_artifacts(board: str, flavour: str, source: str = "build") -> bytes:
    info = {"schema": "rtlab.kernel/2", "source": source, "board": board,
            "flavour": flavour, "package": "linux-image-6.12.100-rt15", "release":
            "6.12.100-rt15", "version": "6.12.100-rt15+rtlab.0123", "sha256": "0" * 64,
            "provided": {"action": "build", "reason": "kernel/ changed"},
            **({"build": {"built_at": "2026-11-20T10:00:00+00:00"}, "cmdline": "console=x",
                "files": {"image": {"file": "zImage"}}} if source == "build"
               else {"deb": "linux-image.deb"})}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        folder = f"out/kernel/{board}-{flavour}"
        archive.writestr(f"{folder}/kernel.json", json.dumps(info))
        archive.writestr(f"{folder}/zImage", b"kernel image")
        # another board's kernel in the same archive is not taken
        archive.writestr("out/kernel/rpi3-rt/Image", b"other")
    return buffer.getvalue()


class FakeGitLab(BaseHTTPRequestHandler):
    artifacts: dict[tuple[str, str], bytes] = {}
    requests: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urlsplit(self.path)
        self.requests.append((unquote(url.path), self.headers.get("PRIVATE-TOKEN")))
        prefix = "/api/v4/projects/7/jobs/artifacts/"
        if self.headers.get("PRIVATE-TOKEN") != TOKEN:
            return self._send(401, b'{"message":"401 Unauthorized"}', "application/json")
        if url.path.startswith(prefix) and url.path.endswith("/download"):
            ref = unquote(url.path[len(prefix):-len("/download")])
            job = parse_qs(url.query).get("job", [""])[0]
            body = self.artifacts.get((ref, job))
            if body is not None:
                return self._send(200, body, "application/zip")
        return self._send(404, b'{"message":"404 Not found"}', "application/json")

    def _send(self, code: int, body: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def gitlab(monkeypatch) -> Iterator[GitLabSource]:
    FakeGitLab.artifacts = {}
    FakeGitLab.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGitLab)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("RTLAB_GITLAB_TOKEN", TOKEN)
    monkeypatch.delenv("CI_JOB_TOKEN", raising=False)
    try:
        yield GitLabSource(f"http://127.0.0.1:{server.server_port}", "7", "main")
    finally:
        server.shutdown()


def test_the_default_branchs_last_built_kernel_is_reused(gitlab, tmp_path):
    FakeGitLab.artifacts[("main", "kernel: [imx6q, rt]")] = kernel_artifacts("imx6q", "rt")
    dest = tmp_path / "out" / "kernel" / "imx6q-rt"
    assert fetch_last_built(gitlab, "imx6q", "rt", dest, progress=lambda _: None) is None
    assert sorted(p.name for p in dest.iterdir()) == ["kernel.json", "zImage"]
    info = json.loads((dest / "kernel.json").read_text())
    assert info["source"] == "build"
    # where it came from is kept; the new job stamps its own decision on top
    assert info["provided_before"] == {"action": "build", "reason": "kernel/ changed"}
    assert FakeGitLab.requests == [
        ("/api/v4/projects/7/jobs/artifacts/main/download", TOKEN)]


@pytest.mark.parametrize(("artifacts", "why"), [
    ({}, "no successful 'kernel: [imx6q, rt]' job with artifacts on main"),
    ({("main", "kernel: [imx6q, rt]"): kernel_artifacts("imx6q", "rt", source="debian")},
     "handed on 'debian''s kernel linux-image-6.12.100-rt15, not a built one"),
    ({("main", "kernel: [imx6q, rt]"): kernel_artifacts("rpi3", "std")},
     "left no out/kernel/imx6q-rt/kernel.json"),
])
def test_no_built_kernel_to_reuse_says_why(gitlab, tmp_path, artifacts, why):
    FakeGitLab.artifacts = artifacts
    dest = tmp_path / "imx6q-rt"
    assert why in fetch_last_built(gitlab, "imx6q", "rt", dest, progress=lambda _: None)
    assert not dest.exists()


def test_a_refused_token_is_an_error_not_a_fallback(gitlab, tmp_path, monkeypatch):
    monkeypatch.setenv("RTLAB_GITLAB_TOKEN", "wrong-token")
    with pytest.raises(RuntimeError, match="HTTP 401") as raised:
        fetch_last_built(gitlab, "imx6q", "rt", tmp_path / "k", progress=lambda _: None)
    assert "wrong-token" not in str(raised.value)


def test_provide_reuses_and_stamps_the_decision(gitlab, repo, tmp_path):
    FakeGitLab.artifacts[("main", "kernel: [imx6q, rt]")] = kernel_artifacts("imx6q", "rt")
    first = git(repo, "rev-parse", "HEAD~1")
    env = {"CI_SERVER_URL": gitlab.url, "CI_PROJECT_ID": "7", "CI_DEFAULT_BRANCH": "main",
           "CI_COMMIT_BEFORE_SHA": first, "CI_JOB_NAME": "kernel: [imx6q, rt]",
           "RTLAB_GITLAB_TOKEN": TOKEN}
    said: list[str] = []
    dest = provide("imx6q", "rt", tmp_path / "out", env=env, repo=repo, progress=said.append)
    info = json.loads((dest / "kernel.json").read_text())
    assert info["provided"] == {"action": "reuse",
                                "reason": f"kernel/ unchanged since the push's previous "
                                          f"commit ({first[:12]})"}
    assert said[0].startswith("imx6q-rt: reuse: kernel/ unchanged")


def test_provide_falls_back_to_debian_when_main_built_nothing(gitlab, repo, tmp_path,
                                                              monkeypatch):
    fetched: list[tuple[str, str]] = []

    def fake_fetch(board, flavour, cache, out_dir, progress):
        # Debian's path is the pipeline test's (tests/integration/test_pipeline_local.py)
        fetched.append((board, flavour))
        folder = out_dir / f"{board}-{flavour}"
        folder.mkdir(parents=True)
        (folder / "kernel.json").write_text(json.dumps({
            "schema": "rtlab.kernel/2", "source": "debian", "board": board,
            "flavour": flavour, "package": "linux-image-6.12.0-rt-armmp", "version": "1",
            "deb": "linux-image.deb", "sha256": "0" * 64}))

    monkeypatch.setattr(provide_module, "fetch_kernel", fake_fetch)
    env = {"CI_SERVER_URL": gitlab.url, "CI_PROJECT_ID": "7", "CI_DEFAULT_BRANCH": "main",
           "CI_COMMIT_BEFORE_SHA": git(repo, "rev-parse", "HEAD~1"),
           "RTLAB_GITLAB_TOKEN": TOKEN}
    dest = provide("imx6q", "rt", tmp_path / "out", env=env, repo=repo,
                   progress=lambda _: None)
    provided = json.loads((dest / "kernel.json").read_text())["provided"]
    assert fetched == [("imx6q", "rt")]
    assert provided["action"] == "debian"
    assert provided["reason"].endswith("no built kernel of main to reuse: no successful "
                                       "'kernel: [imx6q, rt]' job with artifacts on main")
