"""``rtlab results pull`` against a fake GitLab on 127.0.0.1 that answers the requests
python-gitlab 8.6 makes (GET /api/v4/projects/:id, …/pipelines, …/pipelines/:id/jobs,
…/jobs/:id/artifacts), with artifacts zipped from the real records."""

import io
import json
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import attr
import pytest
from sqlalchemy import func, select

from rtlab import cli
from rtlab.store import open_store
from rtlab.store.gitlab import pull
from rtlab.store.models import Case, Run
from rtlab.util.gitlab import Credentials, PullError

DATA = Path(__file__).parents[1] / "data"
RECORDS = DATA / "records" / "vlab-imx6q-rt"
RUN_JUNIT = DATA / "junit" / "vlab-imx6q-rt" / "junit-imx6q-01.xml"
TOKEN = "glpat-s3cr3t-t0ken"
JOB_TOKEN = "job-t0ken-4711"
PROJECT = 7
ENVIRONMENT = ("CI_SERVER_URL", "CI_PROJECT_ID", "CI_DEFAULT_BRANCH", "RTLAB_GITLAB_TOKEN",
               "CI_JOB_TOKEN", "RTLAB_RESULTS_DB")


def artifacts_zip(run_id: str | None = None, pipeline: int = 0, job: int = 0) -> bytes:
    """A test job's artifacts as `rtlab run` leaves them, with files that are not
    results, and two whose paths try to leave the folder they are unpacked into."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(RECORDS.glob("*.json")):
            record = json.loads(path.read_text())
            if run_id:
                record.update(run_id=run_id, ci={"CI_PIPELINE_ID": str(pipeline),
                                                 "CI_JOB_ID": str(job)})
            archive.writestr(f"out/imx6q-01/results/{path.name}", json.dumps(record))
        archive.writestr("out/imx6q-01/junit-imx6q-01.xml", RUN_JUNIT.read_bytes())
        archive.writestr("out/imx6q-01/console/imx6q-01/console_main", "U-Boot 2023.01\n")
        archive.writestr("out/images/manifest.json", '{"image_id": "8e3e67affecbe69a"}')
        archive.writestr("../escaped.json", RECORDS.joinpath(
            "qemu-imx6q_rt_pi_stress--20261123142909244112.json").read_text())
        archive.writestr("/abs/escaped.xml", RUN_JUNIT.read_bytes())
    return buffer.getvalue()


ARCHIVE = [{"file_type": "archive", "filename": "artifacts.zip", "file_format": "zip",
            "size": 1}]
PIPELINES = [  # newest first, as GitLab lists them with order_by=id, sort=desc
    {"id": 105, "status": "running"}, {"id": 104, "status": "failed"},
    {"id": 103, "status": "success"}, {"id": 102, "status": "canceled"},
    {"id": 101, "status": "success"},
]
JOBS = {  # a job is taken for its stage (test) or its name (^test)
    104: [{"id": 9001, "name": "latency: [imx6q, rt]", "stage": "test", "artifacts": ARCHIVE},
          {"id": 9002, "name": "sd-image", "stage": "image", "artifacts": ARCHIVE},
          {"id": 9003, "name": "test-rpi3", "stage": "lab", "artifacts": []}],
    103: [{"id": 8001, "name": "test-imx6q", "stage": "lab", "artifacts": ARCHIVE},
          {"id": 8002, "name": "test-imx6q-std", "stage": "lab", "artifacts": ARCHIVE}],
    102: [{"id": 7501, "name": "test-imx6q", "stage": "test", "artifacts": ARCHIVE}],
    101: [{"id": 7001, "name": "latency: [imx6q, std]", "stage": "test",
           "artifacts": ARCHIVE}],
}


@attr.define
class FakeGitLab:
    url: str = ""
    requests: list[tuple[str, dict[str, list[str]], str]] = attr.Factory(list)
    # an answer for every request, instead of the data (401, 403)
    refuse: int | None = None
    artifacts: dict[int, bytes] = attr.Factory(dict)

    def paths(self) -> list[str]:
        return [path for path, _, _ in self.requests]


def _handler(fake: FakeGitLab) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args) -> None:
            pass

        def _send(self, code: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, code: int, document: object) -> None:
            self._send(code, json.dumps(document).encode())

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            auth = ("private" if self.headers.get("PRIVATE-TOKEN") == TOKEN else
                    "job" if self.headers.get("JOB-TOKEN") == JOB_TOKEN else "none")
            fake.requests.append((parts.path, parse_qs(parts.query), auth))
            if fake.refuse == 403:
                # a server that echoes what it was sent: the token must still not show
                sent = self.headers.get("PRIVATE-TOKEN")
                self._json(403, {"message": f"403 Forbidden (token {sent})"})
                return
            if auth == "none" or fake.refuse == 401:
                self._json(401, {"message": "401 Unauthorized"})
                return
            steps = parts.path.removeprefix("/api/v4/").split("/")
            if steps[:2] not in (["projects", str(PROJECT)], ["projects", "lab%2Frtlab"]):
                self._json(404, {"message": "404 Project Not Found"})
            elif len(steps) == 2:
                self._json(200, {"id": PROJECT, "path_with_namespace": "lab/rtlab",
                                 "default_branch": "main"})
            elif steps[2:] == ["pipelines"]:
                self._json(200, [{**pipeline, "project_id": PROJECT, "ref": "main",
                                  "sha": "0c4b8ad0578d0f178c77e74d764074bc7b7e27ff"}
                                 for pipeline in PIPELINES])
            elif steps[2] == "pipelines" and steps[4:] == ["jobs"]:
                pipeline = int(steps[3])
                self._json(200, [{**job, "status": "success",
                                  "pipeline": {"id": pipeline, "project_id": PROJECT}}
                                 for job in JOBS[pipeline]])
            elif steps[2] == "jobs" and steps[4:] == ["artifacts"]:
                data = fake.artifacts.get(int(steps[3]))
                if data is None:
                    self._json(404, {"message": "404 Not found"})
                else:
                    self._send(200, data, "application/zip")
            else:
                self._json(404, {"message": "404 Not Found"})

    return Handler


@pytest.fixture
def gitlab_server(monkeypatch) -> Iterator[FakeGitLab]:
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    fake = FakeGitLab(artifacts={
        9001: artifacts_zip(), 9002: b"not looked at",
        # 8001's have expired: listed, but gone
        8002: artifacts_zip("gitlab:103:8002:imx6q-01", 103, 8002),
        7001: artifacts_zip("gitlab:101:7001:imx6q-01", 101, 7001)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()
    thread.join(5)


def files_under(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*")
                  if path.is_file())


def test_pull_takes_records_and_junit_of_the_test_jobs(gitlab_server, tmp_path):
    said: list[str] = []
    out = tmp_path / "pulled"
    report = pull(url=gitlab_server.url, project=str(PROJECT), credentials=Credentials(TOKEN),
                  out=out, pipelines=2, say=said.append)

    assert report.ref == "main"
    assert [(job.pipeline_id, job.job_id, job.downloaded, job.files) for job in report.jobs] == [
        (104, 9001, True, 5), (103, 8002, True, 5)]
    assert report.skipped == (
        "pipeline 104 job 9003 (test-rpi3): no artifacts (expired or never kept); skipped",
        "pipeline 103 job 8001 (test-imx6q): artifacts expired or missing (HTTP 404); "
        "skipped")
    assert said[0] == (f"pipeline 104 job 9001 (latency: [imx6q, rt]): 5 file(s) into "
                       f"{out}/104/9001")
    expected = sorted([f"out/imx6q-01/results/{path.name}" for path in RECORDS.glob("*.json")]
                      + ["out/imx6q-01/junit-imx6q-01.xml"])
    assert files_under(out / "104" / "9001") == expected
    assert files_under(out) == sorted([f"104/9001/{f}" for f in expected]
                                      + [f"103/8002/{f}" for f in expected])
    assert not (tmp_path / "escaped.json").exists()

    # what python-gitlab asked, and how
    api = f"/api/v4/projects/{PROJECT}"
    assert gitlab_server.paths() == [
        api, f"{api}/pipelines", f"{api}/pipelines/104/jobs", f"{api}/jobs/9001/artifacts",
        f"{api}/pipelines/103/jobs", f"{api}/jobs/8001/artifacts",
        f"{api}/jobs/8002/artifacts"]
    query = gitlab_server.requests[1][1]
    assert (query["ref"], query["order_by"], query["sort"]) == (["main"], ["id"], ["desc"])
    assert {auth for _, _, auth in gitlab_server.requests} == {"private"}


def test_pull_again_downloads_nothing(gitlab_server, tmp_path):
    out = tmp_path / "pulled"
    first = pull(url=gitlab_server.url, project=str(PROJECT), credentials=Credentials(TOKEN),
                 out=out, ref="main", pipelines=3, say=lambda _: None)
    before = files_under(out)
    gitlab_server.requests.clear()
    again = pull(url=gitlab_server.url, project=str(PROJECT), credentials=Credentials(TOKEN),
                 out=out, ref="main", pipelines=3, say=lambda _: None)

    assert [job.job_id for job in first.jobs] == [9001, 8002, 7001]
    assert [(job.job_id, job.downloaded) for job in again.jobs] == [
        (9001, False), (8002, False), (7001, False)]
    assert files_under(out) == before
    # only the expired job is asked for again; a given ref needs no project lookup
    assert [path for path in gitlab_server.paths() if path.endswith("/artifacts")] == [
        f"/api/v4/projects/{PROJECT}/jobs/8001/artifacts"]
    assert f"/api/v4/projects/{PROJECT}" not in gitlab_server.paths()


def test_cli_pull_and_ingest(gitlab_server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CI_SERVER_URL", gitlab_server.url)
    monkeypatch.setenv("CI_PROJECT_ID", "lab/rtlab")
    monkeypatch.setenv("CI_DEFAULT_BRANCH", "main")
    monkeypatch.setenv("RTLAB_GITLAB_TOKEN", TOKEN)
    db = f"sqlite:///{tmp_path / 'results.db'}"
    argv = ["results", "pull", "-n", "3", "--out", str(tmp_path / "pulled"), "--ingest",
            "--db", db]

    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "ref main: 3 job(s) downloaded, 0 already pulled, 2 without artifacts" in out
    assert out.count("4 case(s) added") == 3
    assert "4 JUnit case(s) told by their record" in out
    store = open_store(db)
    try:
        with store.session() as session:
            runs = set(session.scalars(select(Run.run_key)))
            cases = session.scalar(select(func.count()).select_from(Case))
        assert runs == {"local:imx6q-01:8e3e67affecbe69a:2026-11-23",
                        "gitlab:103:8002:imx6q-01", "gitlab:101:7001:imx6q-01"}
        assert cases == 12
    finally:
        store.close()
    assert "/api/v4/projects/lab%2Frtlab/pipelines" in gitlab_server.paths()

    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "0 job(s) downloaded, 3 already pulled" in out
    assert "case(s) added" in out and "4 case(s) added" not in out
    assert TOKEN not in out


def test_a_ci_job_pulls_with_its_job_token(gitlab_server, tmp_path, monkeypatch):
    monkeypatch.setenv("CI_JOB_TOKEN", JOB_TOKEN)
    report = pull(url=gitlab_server.url, project=str(PROJECT),
                  credentials=Credentials.from_environment(), out=tmp_path, ref="main",
                  pipelines=1, say=lambda _: None)
    assert [job.job_id for job in report.jobs] == [9001]
    assert {auth for _, _, auth in gitlab_server.requests} == {"job"}
    # the lab's own token, when there is one, is preferred
    monkeypatch.setenv("RTLAB_GITLAB_TOKEN", TOKEN)
    assert Credentials.from_environment() == Credentials(TOKEN, job_token=False)
    assert TOKEN not in repr(Credentials.from_environment())


@pytest.mark.parametrize("code", [401, 403])
def test_a_refused_token_is_an_error_that_names_the_url_not_the_token(
        gitlab_server, tmp_path, monkeypatch, capsys, code):
    gitlab_server.refuse = code
    monkeypatch.setenv("RTLAB_GITLAB_TOKEN", TOKEN)
    assert cli.main(["results", "pull", "--url", gitlab_server.url, "--project", "7",
                     "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"rtlab: error: GitLab refused {gitlab_server.url}/api/v4/projects/7 (HTTP {code}): "
        "check $RTLAB_GITLAB_TOKEN: it needs read_api on the project\n")
    assert TOKEN not in captured.out + captured.err
    assert list(tmp_path.iterdir()) == []


def test_pull_needs_a_token_a_project_and_a_server(gitlab_server, monkeypatch, tmp_path,
                                                  capsys):
    with pytest.raises(PullError, match=r"no GitLab token: set \$RTLAB_GITLAB_TOKEN"):
        Credentials.from_environment()
    monkeypatch.setenv("RTLAB_GITLAB_TOKEN", TOKEN)
    assert cli.main(["results", "pull", "--out", str(tmp_path)]) == 2
    assert "which GitLab project? --url and --project, or $CI_SERVER_URL" in (
        capsys.readouterr().err)

    gone = gitlab_server.url.rsplit(":", 1)[0] + ":9"
    with pytest.raises(PullError, match=rf"^cannot reach GitLab at {gone}/api/v4/projects/7"):
        pull(url=gone, project="7", credentials=Credentials(TOKEN), out=tmp_path, retries=0,
             say=lambda _: None)


def test_pull_of_no_pipelines_asks_gitlab_nothing(gitlab_server, tmp_path, capsys):
    """A lab with RTLAB_RESULTS_DB runs the pull with -n 0: no token, no request."""
    assert cli.main(["results", "pull", "-n", "0", "--ingest", "--url", gitlab_server.url,
                     "--project", "7", "--out", str(tmp_path / "pulled")]) == 0
    assert capsys.readouterr().out == (
        "-n 0: no pipelines to pull; the store's history is used as it is\n")
    assert gitlab_server.requests == []
    assert not (tmp_path / "pulled").exists()
