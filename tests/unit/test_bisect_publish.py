"""``rtlab.bisect.publish`` against a stand-in GitLab on 127.0.0.1 (rtlab.vlab.gitlab): a
lab repository, its remote a real bare repository, with two merge requests open, one of
them holding the culprit. The stand-in records every request and every note or commit
comment posted, so each test checks where the note went and what it says, not only what
``publish`` answers; and that a token never shows in an error."""

import subprocess
from collections.abc import Iterator
from pathlib import Path

import attr
import pytest

from rtlab.bisect.publish import (
    PublishError,
    bisect_credentials,
    job_report_url,
    note_text,
    publish,
)
from rtlab.bisect.result import (
    FOUND,
    NOT_REPRODUCED,
    UNDECIDED,
    Bisection,
    Culprit,
    Option,
    Step,
)
from rtlab.util.gitlab import Credentials
from rtlab.vlab.gitlab import MergeRequest, Note, StandInGitLab

TOKEN = "glpat-b1sect-s3cr3t-0042"
# what a CI job has: CI_PROJECT_ID is the project's number
PROJECT = "1"
REPORT = "https://gitlab.lab.example/lab/rtlab/-/jobs/99/artifacts/file/out/bisect/report/index.html"
GIT_IDENTITY = ("-c", "user.name=Lab Admin", "-c", "user.email=admin@lab.invalid")
OTHER_TOKENS = ("RTLAB_GITLAB_TOKEN", "RTLAB_TUNE_TOKEN", "CI_JOB_TOKEN")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *GIT_IDENTITY, *args], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()


@attr.frozen
class History:
    """main: good → skipped → main_only; feature/irq (merge request !1): culprit → after;
    feature/docs (merge request !2): docs."""

    bare: Path
    good: str
    skipped: str
    main_only: str
    culprit: str
    after: str
    docs: str


def commit(work: Path, name: str, subject: str) -> str:
    (work / name).write_text(subject + "\n")
    git(work, "add", name)
    git(work, "commit", "-q", "-m", subject)
    return git(work, "rev-parse", "HEAD")


@pytest.fixture
def history(tmp_path) -> History:
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    good = commit(work, "README.md", "the lab's repository")
    skipped = commit(work, "suite.yaml", "suite: one more scenario")
    main_only = commit(work, "kernel.config", "kernel: CONFIG_HZ_1000 on rt")
    git(work, "checkout", "-q", "-b", "feature/irq", good)
    culprit = commit(work, "irq.config", "kernel: threaded interrupts for the rt flavour")
    after = commit(work, "irq.md", "docs: threaded interrupts")
    git(work, "checkout", "-q", "-b", "feature/docs", good)
    docs = commit(work, "docs.md", "docs: the rack's wiring")
    bare = tmp_path / "remote" / "rtlab.git"
    bare.parent.mkdir()
    git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    return History(bare, good, skipped, main_only, culprit, after, docs)


@pytest.fixture
def gitlab(history, monkeypatch) -> Iterator[StandInGitLab]:
    for name in OTHER_TOKENS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RTLAB_BISECT_TOKEN", TOKEN)
    with StandInGitLab(history.bare, token=TOKEN) as server:
        server.merge_requests += [
            MergeRequest(1, "feature/irq", "main", "rt: threaded interrupts", "", []),
            MergeRequest(2, "feature/docs", "main", "docs: wiring", "", [])]
        yield server


def steps(history: History) -> tuple[Step, ...]:
    return (
        Step(1, "confirm", history.after, (), "bad", "the bad point regressed", "measured",
             rounds=6, boots=(12, 12), board_s=2 * 3600 + 5 * 60, confidence=0.995,
             difference_us=41.5),
        Step(2, "commit", history.culprit, (), "bad", "regressed", "measured", rounds=4,
             boots=(8, 7), board_s=40 * 60, confidence=0.99, difference_us=39.0),
        Step(3, "commit", history.good, (), "good", "same configuration as the good point",
             "identity"),
        Step(4, "options", history.good, ("CONFIG_IRQ_FORCED_THREADING",), "bad",
             "regressed", "measured", rounds=5, boots=(10, 10), board_s=50 * 60,
             confidence=0.98, difference_us=40.2))


def found(history: History, culprit: str | None = None) -> Bisection:
    sha = culprit or history.culprit
    return Bisection(
        "imx6q", "rt", "cpu100/1000us", "lab/rtlab", history.good, history.after, FOUND,
        "the first bad commit and the option it turned on", steps(history),
        culprit=Culprit(sha, "kernel: threaded interrupts for the rt flavour",
                        "diff --git a/irq.config b/irq.config\n"),
        option=Option("CONFIG_IRQ_FORCED_THREADING", "n", "y"))


def run(bisection: Bisection, gitlab: StandInGitLab, report_url: str | None = REPORT,
        credentials: Credentials | None = None) -> str:
    return publish(bisection, url=gitlab.url, project=PROJECT,
                   credentials=credentials or bisect_credentials(), report_url=report_url)


def posts(gitlab: StandInGitLab) -> list[tuple[str, str]]:
    return [(method, path) for method, path in gitlab.api_calls() if method != "GET"]


def mr_url(gitlab: StandInGitLab, iid: int) -> str:
    return f"{gitlab.url}/lab/rtlab/-/merge_requests/{iid}"


# ------------------------------------------------------------------ where it goes ----


def test_a_culprit_in_a_merge_request_gets_one_note_there_and_none_on_the_commit(
        history, gitlab):
    bisection = found(history)

    said = run(bisection, gitlab)

    # the merge request that holds the culprit, not the other one, and not the commit
    assert gitlab.notes == [Note("MergeRequest", "1", note_text(bisection, REPORT))]
    assert gitlab.api_calls() == [
        ("GET", f"/api/v4/projects/1/repository/commits/{history.culprit}/merge_requests"),
        ("POST", "/api/v4/projects/1/merge_requests/1/notes")]
    assert all(request.authenticated for request in gitlab.requests)
    assert said == (f"posted on !1 ({mr_url(gitlab, 1)}): the merge requests of the "
                    f"culprit {history.culprit[:12]}")
    [note] = gitlab.notes
    assert f"`{history.culprit[:12]}` kernel: threaded interrupts for the rt flavour" \
        in note.body
    assert "`CONFIG_IRQ_FORCED_THREADING` `n` → `y`" in note.body
    assert f"[{REPORT}]({REPORT})" in note.body
    assert TOKEN not in said


def test_a_culprit_in_two_merge_requests_gets_a_note_on_each(history, gitlab):
    # a branch stacked on feature/irq, with a merge request of its own: !3 holds it too
    git(history.bare, "branch", "feature/irq-followup", "feature/irq")
    gitlab.merge_requests.append(
        MergeRequest(3, "feature/irq-followup", "feature/docs", "follow-up", "", []))
    bisection = found(history)

    said = run(bisection, gitlab)

    text = note_text(bisection, REPORT)
    assert gitlab.notes == [Note("MergeRequest", "1", text), Note("MergeRequest", "3", text)]
    assert said.startswith(f"posted on !1 ({mr_url(gitlab, 1)}), !3 ({mr_url(gitlab, 3)}):")
    assert not any(path.endswith("/comments") for _, path in posts(gitlab))


def test_a_culprit_in_no_merge_request_gets_a_comment_on_the_commit(history, gitlab):
    bisection = found(history, culprit=history.main_only)

    said = run(bisection, gitlab)

    assert gitlab.notes == [Note("Commit", history.main_only, note_text(bisection, REPORT))]
    assert posts(gitlab) == [
        ("POST", f"/api/v4/projects/1/repository/commits/{history.main_only}/comments")]
    assert said == (f"posted on commit {history.main_only[:12]} (the culprit; no merge "
                    "request holds it)")


def test_an_undecided_bisection_posts_on_the_bad_commit_and_lists_the_candidates(
        history, gitlab):
    bisection = Bisection(
        "imx6q", "rt", "cpu100/1000us", "lab/rtlab", history.good, history.main_only,
        UNDECIDED, "their steps were undecidable: 3 of 12 boots failed to measure",
        steps(history)[:2], candidates=(history.skipped, history.main_only))

    said = run(bisection, gitlab, report_url=None)

    # the bad commit is in no merge request: its own comment, not the candidates'
    [note] = gitlab.notes
    assert (note.noteable_type, note.noteable) == ("Commit", history.main_only)
    assert said == (f"posted on commit {history.main_only[:12]} (the bad commit; no merge "
                    "request holds it)")
    assert (f"**Undecided:** one of these commits holds the regression, and the boards could "
            f"not tell which: `{history.skipped[:12]}`, `{history.main_only[:12]}`. their "
            "steps were undecidable: 3 of 12 boots failed to measure") in note.body
    assert "Culprit" not in note.body and "Report:" not in note.body


def test_a_bad_point_that_does_not_reproduce_is_said_on_the_bad_commits_merge_request(
        history, gitlab):
    bisection = Bisection(
        "imx6q", "rt", "cpu100/1000us", "lab/rtlab", history.good, history.after,
        NOT_REPRODUCED, "the bad point measured like the good one (Δ p99.99 +0.4 µs)",
        steps(history)[:1])

    said = run(bisection, gitlab)

    [note] = gitlab.notes
    assert (note.noteable_type, note.noteable) == ("MergeRequest", "1")
    assert ("**Not reproduced:** the bad point does not reproduce the regression against "
            "the good one: the bad point measured like the good one") in note.body
    assert said.endswith(f"the merge requests of the bad commit {history.after[:12]}")


def test_a_commit_gitlab_does_not_know_is_a_404_and_nothing_is_posted(history, gitlab):
    bisection = found(history, culprit="0123456789abcdef" * 2 + "01234567")

    with pytest.raises(PublishError) as caught:
        run(bisection, gitlab)

    assert str(caught.value) == (
        f"GitLab: {gitlab.url}/api/v4/projects/1/repository/commits/{'0123456789abcdef' * 2}"
        "01234567/merge_requests: HTTP 404: 404 Commit Not Found")
    assert gitlab.notes == [] and posts(gitlab) == []


# ------------------------------------------------------------------------ the token ----


def test_a_missing_token_is_a_clear_error_and_no_other_token_stands_in(gitlab, monkeypatch):
    monkeypatch.delenv("RTLAB_BISECT_TOKEN")
    # the pull's, the tuning's and the job's own token are not the bisection's
    for name in OTHER_TOKENS:
        monkeypatch.setenv(name, TOKEN)

    with pytest.raises(PublishError) as caught:
        bisect_credentials()

    assert str(caught.value) == (
        "no GitLab token: set $RTLAB_BISECT_TOKEN (a masked, protected CI variable holding "
        "a project access token with the api scope (it posts notes on merge requests and "
        "comments on commits) and at least the Reporter role)")
    assert gitlab.requests == []


def test_a_refused_token_is_an_error_that_names_the_variable_never_the_token(
        history, gitlab, monkeypatch):
    wrong = "glpat-expired-0815"
    monkeypatch.setenv("RTLAB_BISECT_TOKEN", wrong)

    with pytest.raises(PublishError) as caught:
        run(found(history), gitlab)

    message = str(caught.value)
    assert message == (
        f"GitLab refused {gitlab.url}/api/v4/projects/1/repository/commits/"
        f"{history.culprit}/merge_requests (HTTP 401): check $RTLAB_BISECT_TOKEN: a project "
        "access token with the api scope (it posts notes on merge requests and comments on "
        "commits) and at least the Reporter role")
    assert wrong not in message and wrong not in repr(caught.value.args)
    # it stopped at the first refusal: nothing posted, nothing else asked
    assert gitlab.notes == []
    assert [(r.method, r.authenticated) for r in gitlab.requests] == [("GET", False)]


# ------------------------------------------------------------------------- the note ----


def test_the_note_says_what_was_bisected_each_step_and_the_board_time(history):
    text = note_text(found(history), REPORT)
    lines = text.splitlines()

    assert lines[0] == "### Latency bisection: cpu100/1000us on imx6q/rt"
    assert lines[2] == (f"`{history.good[:12]}` (good) .. `{history.after[:12]}` (bad), "
                        "kernels: debian")
    rows = [line for line in lines if line.startswith("| ") and line[2].isdigit()]
    assert rows == [
        f"| 1 | confirm | `{history.after[:12]}` | bad | 6 | 12 / 12 | 2 h 05 min | 99.5% |",
        f"| 2 | commit | `{history.culprit[:12]}` | bad | 4 | 8 / 7 | 40 min | 99.0% |",
        f"| 3 | commit | `{history.good[:12]}` | good | 0 | 0 / 0 | 0 s | by identity |",
        f"| 4 | options | `{history.good[:12]} + CONFIG_IRQ_FORCED_THREADING` | bad | 5 "
        "| 10 / 10 | 50 min | 98.0% |"]
    # 2 h 05 + 40 + 50 min
    assert "Board time in all: 3 h 35 min (4 steps)." in lines
    assert lines[-1] == f"Report: [{REPORT}]({REPORT})"
    assert "Report:" not in note_text(found(history), None)


def test_a_found_commit_with_undecided_options_names_the_options_left(history):
    bisection = attr.evolve(found(history), status=UNDECIDED, option=None,
                            reason="both halves of the suspects were undecidable",
                            candidates=("CONFIG_IRQ_FORCED_THREADING", "CONFIG_PREEMPT_RT"))

    text = note_text(bisection, None)

    assert f"**Culprit:** `{history.culprit[:12]}`" in text
    assert ("one of these options holds the regression, and the boards could not tell "
            "which: `CONFIG_IRQ_FORCED_THREADING`, `CONFIG_PREEMPT_RT`.") in text


def test_the_report_link_is_the_jobs_artifact(monkeypatch):
    monkeypatch.setenv("CI_JOB_URL", "https://gitlab.lab.example/lab/rtlab/-/jobs/99")
    assert job_report_url() == REPORT
    monkeypatch.delenv("CI_JOB_URL")
    assert job_report_url() is None
