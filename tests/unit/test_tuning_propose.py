"""``rtlab thresholds propose`` end to end: a lab repository (the repository's
thresholds.yaml and suite.yaml committed on `main`), its remote a real bare repository that
a stand-in GitLab on 127.0.0.1 (rtlab.vlab.gitlab) serves over Git's smart HTTP beside the
merge-request API python-gitlab calls, and a results store with a history of imx6q/rt runs
made for the purpose. The stand-in records every request, so each test checks what was
pushed and what the merge request says, not what the command prints alone; and that the
token appears in no output, no file written, no git command line and no git config."""

import datetime
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import attr
import pytest

from rtlab import cli
from rtlab.store import ingest_folder, open_store
from rtlab.tuning import gitbranch
from rtlab.tuning.proposal import fingerprint, fingerprint_in
from rtlab.util.paths import REPO_ROOT
from rtlab.verdict.thresholds import load_thresholds
from rtlab.vlab.gitlab import Pipeline, StandInGitLab

TOKEN = "glpat-tun3-s3cr3t-4711"
TEMPLATE = (REPO_ROOT / "tests" / "data" / "records" / "vlab-imx6q-rt"
            / "qemu-imx6q_rt_cpu100_1000us--20261123142815277137.json")
START = datetime.datetime(2026, 10, 1, 2, 0, tzinfo=datetime.UTC)
BRANCH = "rtlab/tune-thresholds"
CASE = "imx6q/rt/cpu100/1000us"
ENVIRONMENT = ("CI_SERVER_URL", "CI_PROJECT_ID", "CI_DEFAULT_BRANCH", "CI_PIPELINE_URL",
               "RTLAB_TUNE_TOKEN", "RTLAB_RESULTS_DB", "GIT_CONFIG_COUNT")
GIT_IDENTITY = ("-c", "user.name=Lab Admin", "-c", "user.email=admin@lab.invalid")


def record(run: int, worst: float) -> dict:
    """imx6q/rt cpu100 at 1 ms on the default branch: CPU0's max is ``worst`` µs."""
    base = json.loads(TEMPLATE.read_text(encoding="utf-8"))
    started = START + datetime.timedelta(days=run)
    cpus = [{"cpu": cpu, "samples": 1000, "min_us": 3, "avg_us": 20 * scale,
             "max_us": worst * scale, "overflows": 0, "histogram_range_us": 400,
             "percentiles_us": {"p50": 10, "p99": 20, "p99_9": 30, "p99_99": 35}}
            for cpu, scale in ((0, 1.0), (1, 0.8))]
    base.update(case="tests/target/test_latency.py::test_latency[cpu100-1000us]",
                name=CASE, board="imx6q", flavour="rt", scenario="cpu100", interval_us=1000,
                started=started.isoformat(),
                finished=(started + datetime.timedelta(seconds=10)).isoformat(),
                verdict="pass" if worst <= 150 else "fail", message="", cpus=cpus,
                run_id=f"imx6q-rt-run{run}",
                ci={"CI_PIPELINE_ID": str(7000 + run), "CI_COMMIT_REF_NAME": "main",
                    "CI_COMMIT_SHA": f"{run:02d}" * 20})
    return base


def add_runs(db: str, folder: Path, runs: dict[int, float], length_s: int | None = None
             ) -> None:
    """Store ``runs`` (run number → CPU0's max); each ``length_s`` long as measured
    (``duration_s``) when given, shorter than the hour an adaptive run that stopped early."""
    folder.mkdir(parents=True, exist_ok=True)
    for run, worst in runs.items():
        item = record(run, worst)
        if length_s is not None:
            item["duration_s"] = length_s
            if length_s < 3600:
                item["adaptive"] = {"window_s": 60, "cap_s": 3600, "measured_s": length_s}
        (folder / f"run{run:03d}.json").write_text(json.dumps(item))
    store = open_store(db)
    try:
        ingest_folder(store, folder)
    finally:
        store.close()


# twelve runs, the worst 40 + 4·i µs: the maximum 84 µs × 1.2 → 110 µs (the file: 150)
FIRST = {run: 40 + 4 * run for run in range(12)}
# three more, up to 100 µs: × 1.2 → 120 µs
SECOND = {12: 90, 13: 95, 14: 100}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *GIT_IDENTITY, *args], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()


@attr.frozen
class Lab:
    work: Path
    bare: Path
    db: str
    records: Path
    out: Path

    @property
    def file(self) -> Path:
        return self.work / "thresholds.yaml"

    def argv(self, *extra: str) -> list[str]:
        return ["thresholds", "propose", "--db", self.db, "--file", str(self.file),
                "--ref", "main", "--out", str(self.out), "--max-from", "quantile", *extra]

    def branch_file(self) -> str:
        return subprocess.run(["git", "show", f"refs/heads/{BRANCH}:thresholds.yaml"],
                              cwd=self.bare, capture_output=True, text=True,
                              check=True).stdout


@pytest.fixture
def lab(tmp_path, monkeypatch) -> Lab:
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    for name in ("thresholds.yaml", "suite.yaml"):
        shutil.copyfile(REPO_ROOT / name, work / name)
    (work / "README.md").write_text("the lab's repository\n")
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "the lab's gate")
    bare = tmp_path / "remote" / "rtlab.git"
    bare.parent.mkdir()
    git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    git(work, "remote", "add", "origin", str(bare))
    db = f"sqlite:///{tmp_path / 'results.db'}"
    return Lab(work, bare, db, tmp_path / "records", tmp_path / "out")


@pytest.fixture
def gitlab(lab, monkeypatch) -> Iterator[StandInGitLab]:
    with StandInGitLab(lab.bare, token=TOKEN) as server:
        monkeypatch.setenv("CI_SERVER_URL", server.url)
        monkeypatch.setenv("CI_PROJECT_ID", "lab/rtlab")
        monkeypatch.setenv("CI_DEFAULT_BRANCH", "main")
        monkeypatch.setenv("CI_PIPELINE_URL", f"{server.url}/lab/rtlab/-/pipelines/42")
        monkeypatch.setenv("RTLAB_TUNE_TOKEN", TOKEN)
        yield server


@pytest.fixture
def git_commands(monkeypatch) -> list[list[str]]:
    """Every command line rtlab's git module runs (they must never hold the token)."""
    seen: list[list[str]] = []
    real = subprocess.run

    def run(args, *rest, **options):
        seen.append([str(arg) for arg in args])
        return real(args, *rest, **options)

    monkeypatch.setattr(gitbranch.subprocess, "run", run)
    return seen


def everything_written(lab: Lab) -> str:
    """The text of every file the run could have left: its --out folder, both
    repositories' config and refs, the commits' messages."""
    texts = [path.read_text(errors="replace") for path in lab.out.rglob("*") if path.is_file()]
    for repo in (lab.work / ".git", lab.bare):
        texts += [(repo / "config").read_text()]
        texts += [path.read_text(errors="replace") for path in (repo / "refs").rglob("*")
                  if path.is_file()]
    texts.append(git(lab.bare, "log", "--all", "--format=%B%n%an %ae"))
    return "\n".join(texts)


def run(lab: Lab, capsys, *extra: str) -> tuple[int, str]:
    code = cli.main(lab.argv(*extra))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def limit(text: str, tmp_path: Path) -> float:
    path = tmp_path / "branch-thresholds.yaml"
    path.write_text(text)
    return load_thresholds(path).lookup("imx6q", "rt", "cpu100", 1000)["max_us"].value


def main_limit_source(lab: Lab) -> str:
    """Where main's file sets the case's limit, e.g. thresholds.yaml:59, as the table
    cites it."""
    source = load_thresholds(lab.work / "thresholds.yaml").lookup(
        "imx6q", "rt", "cpu100", 1000)["max_us"].source
    return f"thresholds.yaml:{source.rsplit(':', 1)[1]}"


def test_the_first_run_opens_one_merge_request_with_the_table(lab, gitlab, git_commands,
                                                              capsys, tmp_path):
    add_runs(lab.db, lab.records, FIRST)
    main = git(lab.work, "rev-parse", "HEAD")

    code, said = run(lab, capsys)

    assert code == 0, said
    assert "imx6q: 1 limit(s) changed (up to 12 run(s) per case)" in said
    assert "rpi3: no measured runs: limits unchanged" in said
    assert said.rstrip().endswith(f"opened !1: {gitlab.url}/lab/rtlab/-/merge_requests/1")
    [mr] = gitlab.merge_requests
    assert (mr.source_branch, mr.target_branch, mr.labels, mr.state) == (
        BRANCH, "main", ["thresholds"], "opened")
    assert mr.remove_source_branch
    assert mr.title == "thresholds: 1 limit(s) from the measured history (imx6q)"
    # the suggestion's table: old limit and its line, new, the evidence, what each fails
    [row] = [line for line in mr.description.splitlines()
             if line.startswith(f"| {CASE} | max_us |")]
    cells = [cell.strip() for cell in row.strip("|").split(" | ")]
    assert cells[2:] == [f"150 µs ({main_limit_source(lab)})", "110 µs",
                         "flavours.rt.scenarios.cpu100.intervals.1000",
                         "110 µs (max 84 µs × 1.2)", "12", "3 s",
                         "2026-10-01..2026-10-12", "0", "0", "-"]
    # the replay's summary: the stored runs the file fails now and as proposed
    assert ("- now (main:thresholds.yaml): 0 of 12 stored case(s) fail, 0 of them passed "
            "when they ran; 0 that failed then pass") in mr.description
    assert (f"- proposed ({BRANCH}:thresholds.yaml): 0 of 12 stored case(s) fail"
            in mr.description)
    assert fingerprint_in(mr.description) == fingerprint(lab.branch_file())
    assert f"Made in {gitlab.url}/lab/rtlab/-/pipelines/42." in mr.description

    # the branch: one commit by the token's user on main's head, thresholds.yaml only
    head = gitlab.branch_head(BRANCH)
    assert git(lab.bare, "rev-parse", f"{head}^") == main
    assert git(lab.bare, "diff", "--name-only", main, head) == "thresholds.yaml"
    assert git(lab.bare, "log", "-1", "--format=%an <%ae>", head) == (
        f"rtlab tuning <{gitlab.email}>")
    assert limit(lab.branch_file(), tmp_path) == 110
    # it came over Git's smart HTTP, authenticated, and left the checkout as it was
    pushes = [r for r in gitlab.requests if r.path.endswith("/git-receive-pack")]
    assert len(pushes) == 1 and all(r.authenticated for r in pushes)
    # one pipeline on the boards, the merge request's: the push itself started none
    assert gitlab.pipelines == [Pipeline("merge_request_event", BRANCH)]
    assert git(lab.work, "status", "--porcelain") == ""
    assert git(lab.work, "rev-parse", "HEAD") == main
    assert git(lab.work, "branch", "--list") == "* main"
    # the job's artifacts: the description and the proposed file
    assert (lab.out / "proposal.md").read_text() == mr.description
    assert (lab.out / "thresholds.yaml").read_text() == lab.branch_file()

    assert TOKEN not in said
    assert TOKEN not in everything_written(lab)
    assert git_commands and not any(TOKEN in arg for args in git_commands for arg in args)
    assert not any("@" in arg.split("//", 1)[-1].split("/", 1)[0]
                   for args in git_commands for arg in args if arg.startswith("http"))


def test_a_second_run_with_new_history_updates_the_same_merge_request(lab, gitlab, capsys,
                                                                       tmp_path):
    add_runs(lab.db, lab.records, FIRST)
    assert run(lab, capsys)[0] == 0
    first_head = gitlab.branch_head(BRANCH)
    gitlab.merge_requests[0].labels.append("needs-review")  # a reviewer's label
    add_runs(lab.db, lab.records, SECOND)
    gitlab.requests.clear()

    code, said = run(lab, capsys)

    assert code == 0, said
    assert said.rstrip().endswith(f"updated !1: {gitlab.url}/lab/rtlab/-/merge_requests/1")
    [mr] = gitlab.merge_requests
    assert mr.state == "opened" and mr.labels == ["thresholds", "needs-review"]
    assert "120 µs (max 100 µs × 1.2)" in mr.description
    assert "110 µs (max 84 µs × 1.2)" not in mr.description
    assert (f"| {CASE} | max_us | 150 µs ({main_limit_source(lab)}) | 120 µs |"
            in mr.description)
    assert "0 of 15 stored case(s) fail" in mr.description
    # the branch rebuilt on main, the first proposal replaced
    head = gitlab.branch_head(BRANCH)
    assert head != first_head
    assert git(lab.bare, "rev-parse", f"{head}^") == git(lab.work, "rev-parse", "main")
    assert limit(lab.branch_file(), tmp_path) == 120
    assert ("PUT", "/api/v4/projects/1/merge_requests/1") in gitlab.api_calls()
    # the push to the open merge request's branch started its pipeline; no branch pipeline
    assert gitlab.pipelines == [Pipeline("merge_request_event", BRANCH)] * 2
    assert ("POST", "/api/v4/projects/1/merge_requests") not in gitlab.api_calls()

    # the same history once more: the same limits, nothing pushed or rewritten
    gitlab.requests.clear()
    code, said = run(lab, capsys)
    assert code == 0, said
    assert said.rstrip().endswith("!1 (" + mr_url(gitlab, 1) + ") already proposes these "
                                  "limits: left as it is")
    assert gitlab.branch_head(BRANCH) == head
    assert not [r for r in gitlab.requests if r.method != "GET"]
    assert TOKEN not in said


def mr_url(gitlab: StandInGitLab, iid: int) -> str:
    return f"{gitlab.url}/lab/rtlab/-/merge_requests/{iid}"


def test_nothing_to_change_opens_nothing_and_says_so(lab, gitlab, capsys):
    # runs that keep the file's limit: the maximum 125 µs × 1.2 → 150 µs
    add_runs(lab.db, lab.records, {run: 100 + run for run in range(26)})

    code, said = run(lab, capsys)

    assert code == 0, said
    assert "imx6q: the history supports the limits as they are" in said
    assert said.rstrip().endswith("nothing to change: the history keeps every limit of "
                                  "thresholds.yaml; no merge request opened")
    assert gitlab.merge_requests == []
    assert gitlab.branch_head(BRANCH) is None
    assert [method for method, _ in gitlab.api_calls()] == ["GET", "GET", "GET"]
    assert not (lab.out / "thresholds.yaml").exists()


def test_a_refused_token_is_an_error_that_names_the_url_not_the_token(lab, gitlab, capsys,
                                                                      monkeypatch):
    add_runs(lab.db, lab.records, FIRST)
    wrong = "glpat-expired-0815"
    monkeypatch.setenv("RTLAB_TUNE_TOKEN", wrong)

    code, said = run(lab, capsys)

    assert code == 2
    assert said.splitlines()[-1] == (
        f"rtlab: error: GitLab refused {gitlab.url}/api/v4/user (HTTP 401): check "
        "$RTLAB_TUNE_TOKEN: a project access token with the api scope (merge requests; it "
        "includes pushing over HTTPS) and the Developer role")
    assert wrong not in said and wrong not in everything_written(lab)
    assert gitlab.merge_requests == [] and gitlab.branch_head(BRANCH) is None
    assert not [r for r in gitlab.requests if ".git/" in r.path]


def test_a_repository_that_refuses_the_push_is_an_error_that_names_it(lab, gitlab, capsys):
    """The API takes the token but Git's HTTP does not (a token without the right to
    push): the error names the repository's URL, never the token or its header."""
    add_runs(lab.db, lab.records, FIRST)
    gitlab.git_token = "another-t0ken"

    code, said = run(lab, capsys)

    assert code == 2, said
    assert said.splitlines()[-1].startswith(
        f"rtlab: error: git ls-remote --heads {gitlab.url}/lab/rtlab.git: the repository "
        "refused the token")
    assert TOKEN not in said
    assert gitlab.merge_requests == [] and gitlab.branch_head(BRANCH) is None


def test_a_branch_a_person_pushed_to_is_left_to_them(lab, gitlab, capsys):
    add_runs(lab.db, lab.records, FIRST)
    assert run(lab, capsys)[0] == 0
    # a reviewer adds a commit of their own to the tuning branch
    clone = lab.work.parent / "reviewer"
    git(lab.work.parent, "clone", "-q", "-b", BRANCH, str(lab.bare), str(clone))
    (clone / "thresholds.yaml").write_text(
        (clone / "thresholds.yaml").read_text() + "# checked on the bench\n")
    git(clone, "commit", "-q", "-am", "thresholds: a note")
    git(clone, "push", "-q", "origin", BRANCH)
    theirs = gitlab.branch_head(BRANCH)
    add_runs(lab.db, lab.records, SECOND)
    gitlab.requests.clear()

    code, said = run(lab, capsys)

    assert code == 0, said
    assert said.rstrip().endswith(
        f"!1 ({mr_url(gitlab, 1)}) has commits by Lab Admin <admin@lab.invalid>: the branch "
        "and the description are theirs now and left as they are; merge or close it to let "
        "the lab propose again")
    assert gitlab.branch_head(BRANCH) == theirs
    assert "110 µs (max 84 µs × 1.2)" in gitlab.merge_requests[0].description
    assert not [r for r in gitlab.requests if r.method != "GET"]


def test_a_proposal_a_reviewer_closed_is_not_opened_again(lab, gitlab, capsys):
    add_runs(lab.db, lab.records, FIRST)
    assert run(lab, capsys)[0] == 0
    gitlab.merge_requests[0].state = "closed"

    code, said = run(lab, capsys)
    assert code == 0, said
    assert said.rstrip().endswith(f"a reviewer closed !1 ({mr_url(gitlab, 1)}), which "
                                  "proposed these limits: not opened again")
    assert len(gitlab.merge_requests) == 1

    # new history, new limits: a new merge request
    add_runs(lab.db, lab.records, SECOND)
    code, said = run(lab, capsys)
    assert code == 0, said
    assert said.rstrip().endswith(f"opened !2: {mr_url(gitlab, 2)}")
    assert [mr.state for mr in gitlab.merge_requests] == ["closed", "opened"]


def test_dry_run_needs_no_gitlab_and_changes_nothing(lab, capsys):
    add_runs(lab.db, lab.records, FIRST)
    before = lab.file.read_text()

    code, said = run(lab, capsys, "--dry-run")

    assert code == 0, said
    assert "imx6q: 1 limit(s) changed" in said
    assert said.rstrip().endswith("dry run: nothing pushed, no merge request opened or "
                                  "updated")
    assert lab.file.read_text() == before
    assert "| imx6q/rt/cpu100/1000us | max_us | 150 µs" in (lab.out / "proposal.md").read_text()
    assert git(lab.bare, "branch", "--list") == "* main"


# two hundred one-minute runs, newer than FIRST and far below it (20…30 µs): beside
# FIRST's twelve hour runs the 0.99 quantile would be the 210th of 212 figures, 76 µs
# (× 1.2 → 92 µs) rather than the hour's maximum 84 µs (→ 110 µs)
MINUTES = {12 + run: 20 + run % 11 for run in range(200)}


def test_the_merge_request_proposes_limits_from_the_longest_runs_only(lab, capsys,
                                                                     tmp_path):
    add_runs(lab.db, lab.records / "hour", FIRST, 3600)
    add_runs(lab.db, lab.records / "minute", MINUTES, 60)

    code, said = run(lab, capsys, "--dry-run")

    assert code == 0, said
    # the proposed file: the hour's limit, and a reason that says which runs it rests on
    proposed = (lab.out / "thresholds.yaml").read_text()
    assert limit(proposed, tmp_path) == 110
    assert "runs of 60 min, 200 of other lengths left out" in " ".join(proposed.split())
    outcome = ("imx6q: 1 limit(s) changed (up to 12 run(s) of 60 min per case; 200 run(s) "
               "of other lengths left out: a maximum grows with the number of wake-ups)")
    assert outcome in said
    description = (lab.out / "proposal.md").read_text()
    assert f"| imx6q | 1 | {outcome.removeprefix('imx6q: ')} |" in description
    [row] = [line for line in description.splitlines()
             if line.startswith(f"| {CASE} | max_us |")]
    cells = [cell.strip() for cell in row.strip("|").split(" | ")]
    assert cells[2:] == [f"150 µs ({main_limit_source(lab)})", "110 µs",
                         "flavours.rt.scenarios.cpu100.intervals.1000",
                         "110 µs (max 84 µs × 1.2)", "12", "60 min (200 left out)",
                         "2026-10-01..2026-10-12", "0", "0", "-"]
    assert (f"- {CASE}: 200 run(s) of 1 min left out, limits from 12 run(s) of 60 min"
            in description)
    assert "per case only its runs of the longest measured length (within 10%" in \
        description
    # the replay still judges every stored run, whatever its length
    assert "0 of 212 stored case(s) fail" in description


def test_shorter_runs_over_a_limit_the_longest_runs_keep_change_nothing(lab, gitlab, capsys):
    # hour runs that keep the file's 150 µs (125 × 1.2), minute runs far over it: side
    # by side they would raise the limit to 240 µs
    add_runs(lab.db, lab.records / "hour", {run: 100 + run for run in range(26)}, 3600)
    add_runs(lab.db, lab.records / "minute", {30 + run: 200 for run in range(10)}, 60)

    code, said = run(lab, capsys)

    assert code == 0, said
    assert ("imx6q: the history supports the limits as they are (10 run(s) of other "
            "lengths left out: a maximum grows with the number of wake-ups)") in said
    assert gitlab.merge_requests == [] and gitlab.branch_head(BRANCH) is None


def test_a_job_without_the_token_fails_before_any_work(lab, monkeypatch, capsys):
    monkeypatch.setenv("CI_SERVER_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("CI_PROJECT_ID", "1")
    code, said = run(lab, capsys)
    assert code == 2
    assert said.splitlines()[-1] == (
        "rtlab: error: no GitLab token: set $RTLAB_TUNE_TOKEN (a masked, protected CI "
        "variable holding a project access token with the api scope (merge requests; it "
        "includes pushing over HTTPS) and the Developer role)")
    assert not lab.out.exists()


def test_git_gets_the_token_from_its_environment_only():
    remote = gitbranch.Remote.of("https://gitlab-ci-token:job-s3cr3t@gitlab.lab:8443/lab/r.git",
                                 TOKEN, "project_1_bot")
    assert remote.url == "https://gitlab.lab:8443/lab/r.git"
    assert gitbranch.Remote.of("http://u:p@[::1]:8080/r.git", TOKEN).url == (
        "http://[::1]:8080/r.git")
    assert TOKEN not in repr(remote)
    env = remote.environment({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory",
                              "GIT_CONFIG_VALUE_0": "*", "GIT_ASKPASS": "/bin/echo",
                              "HOME": "/root"})
    # the runner's own settings stay; ours follow them
    assert env["GIT_CONFIG_COUNT"] == "3"
    assert (env["GIT_CONFIG_KEY_0"], env["GIT_CONFIG_VALUE_0"]) == ("safe.directory", "*")
    assert env["GIT_CONFIG_KEY_1"] == "http.extraHeader"
    assert env["GIT_CONFIG_VALUE_1"].startswith("Authorization: Basic ")
    assert (env["GIT_CONFIG_KEY_2"], env["GIT_CONFIG_VALUE_2"]) == ("credential.helper", "")
    assert env["GIT_TERMINAL_PROMPT"] == "0" and "GIT_ASKPASS" not in env
    assert remote.mask(f"x {env['GIT_CONFIG_VALUE_1']} {TOKEN}") == (
        "x Authorization: Basic [masked] [masked]")
