"""The pipeline's `tune` job as GitLab would run it, with gitlab-ci-local, on a history the
virtual rack recorded (tests/data/records/vlab-imx6q-rt, made for the default branch), in a
temporary clone whose `origin` a stand-in GitLab (rtlab.vlab.gitlab) serves over Git's
HTTP beside the merge-request API: the job's own copy of the project (shell isolation)
commits, pushes and opens the merge request, with RTLAB_TUNE_TOKEN a project variable of
the job's environment only, as a lab sets it. No board is booted: the job reads the store.

`make demo PIPELINE=1 TUNE=1` runs the same job at the end of a whole scheduled pipeline on
the virtual rack, on the history its demos accumulate.
"""

import json
import subprocess

from ruamel.yaml import YAML

from rtlab.store import ingest_folder, open_store
from rtlab.util.paths import REPO_ROOT
from tests.pipeline_bench import pipeline_times

RECORDS = REPO_ROOT / "tests" / "data" / "records" / "vlab-imx6q-rt"
BRANCH = "rtlab/tune-thresholds"


def seed(store_path, folder) -> None:
    """The virtual rack's recorded run, as the default branch's pipeline 5 stored it."""
    folder.mkdir()
    for path in sorted(RECORDS.glob("*.json")):
        record = json.loads(path.read_text())
        record.update(run_id="gitlab:5:90:imx6q-01",
                      ci={"CI_PIPELINE_ID": "5", "CI_JOB_ID": "90",
                          "CI_COMMIT_REF_NAME": "main"})
        (folder / path.name).write_text(json.dumps(record))
    store = open_store(f"sqlite:///{store_path}")
    try:
        ingest_folder(store, folder)
    finally:
        store.close()


def test_the_tune_job_opens_a_merge_request_from_the_stored_history(tmp_path,
                                                                   gitlab_ci_local):
    work = pipeline_times.make_clone(tmp_path / "clone", branch=None)
    tune = pipeline_times.TuneDemo.start(work, tmp_path)
    seed(tune.store, tmp_path / "records")
    try:
        result = pipeline_times.run_pipeline(
            work, tune.variables(), ["tune"], needs=False, timeout_s=600,
            predefined=pipeline_times.PREDEFINED)
    finally:
        tune.gitlab.stop()
    log = result.log("tune")

    assert result.exit_code == 0 and result.job("tune").status == "PASS", result.output
    assert "-n 0: no pipelines to pull" in log
    assert "qemu-imx6q: 6 limit(s) changed (up to 1 run(s) per case)" in log
    assert "imx6q: no measured runs: limits unchanged" in log
    [mr] = tune.gitlab.merge_requests
    assert f"tune > opened !1: {tune.gitlab.url}/lab/rtlab/-/merge_requests/1" in log
    assert (mr.source_branch, mr.target_branch, mr.labels) == (BRANCH, "main",
                                                               ["thresholds"])
    assert "| qemu-imx6q/rt/cpu100/1000us | max_us |" in mr.description
    assert "rtlab thresholds propose" in mr.description
    # the branch: the job's commit on main, the emulated board's limits from its run
    head = tune.gitlab.branch_head(BRANCH)
    origin = work.parent / "origin.git"
    parent = subprocess.run(["git", "rev-parse", f"{head}^"], cwd=origin, text=True,
                            capture_output=True, check=True).stdout.strip()
    assert parent == subprocess.run(["git", "rev-parse", "main"], cwd=origin, text=True,
                                    capture_output=True, check=True).stdout.strip()
    proposed = YAML(typ="safe").load(subprocess.run(
        ["git", "show", f"{head}:thresholds.yaml"], cwd=origin, text=True,
        capture_output=True, check=True).stdout)
    cpu100 = proposed["boards"]["qemu-imx6q"]["flavours"]["rt"]["scenarios"]["cpu100"]
    assert cpu100["intervals"][1000]["max_us"] < 20_000_000
    # the job's artifacts: the description and the file; the token in no output or file
    artifacts = work / "out" / "tune"
    assert (artifacts / "proposal.md").read_text() == mr.description
    assert tune.token not in result.output
    # (gitlab-ci-local's folder holds the job's copy of the project, its log, its
    # artifacts and cache: none may hold the token)
    written = [path for folder in (work / "out", work / ".gitlab-ci-local")
               for path in folder.rglob("*") if path.is_file()]
    assert len(written) > 10
    assert not any(tune.token.encode() in path.read_bytes() for path in written)
