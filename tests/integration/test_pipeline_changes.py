"""The pipeline's `changes` job as GitLab would run it in a scheduled pipeline of the default
branch, with gitlab-ci-local, against a stand-in GitLab (rtlab.vlab.gitlab) that takes
pipeline triggers: on a results store seeded with nightly runs of two series (a step, a
creep: tests/unit/test_change_points.py), it starts one bisection pipeline per change
point, for the change point's commit range, and a second run starts none. The trigger
token is a variable of the job's environment only, as a lab sets it. No board is booted."""

import secrets

from rtlab.store import ingest_folder, open_store
from rtlab.vlab.gitlab import StandInGitLab
from tests.pipeline_bench import pipeline_times
from tests.unit.test_change_points import _nightlies


def test_the_changes_job_starts_one_bisection_per_change_point(tmp_path, gitlab_ci_local):
    work = pipeline_times.make_clone(tmp_path / "clone", branch=None)
    records = tmp_path / "records"
    records.mkdir()
    commits = _nightlies(records)
    database = tmp_path / "results.db"
    store = open_store(f"sqlite:///{database}")
    try:
        ingest_folder(store, records)
    finally:
        store.close()
    token = f"glptt-{secrets.token_hex(20)}"
    gitlab = StandInGitLab(work.parent / "origin.git", token=secrets.token_hex(8),
                           trigger_token=token).start()
    # the lab's masked variable, limited to the job's environment; untracked, so no job's
    # copy of the project holds it
    (work / ".gitlab-ci-local-variables.yml").write_text(
        f"RTLAB_BISECT_TRIGGER_TOKEN:\n  values:\n    latency-change-points: {token}\n")
    variables = {"CI_PIPELINE_SOURCE": "schedule", "CI_SERVER_URL": gitlab.url,
                 "CI_PROJECT_ID": gitlab.project_path,
                 "RTLAB_RESULTS_DB": f"sqlite:///{database}"}
    try:
        first = pipeline_times.run_pipeline(work, variables, ["changes"], needs=False,
                                            timeout_s=600,
                                            predefined=pipeline_times.PREDEFINED)
        triggered_first = list(gitlab.triggered)
        second = pipeline_times.run_pipeline(work, variables, ["changes"], needs=False,
                                             timeout_s=600,
                                             predefined=pipeline_times.PREDEFINED)
    finally:
        gitlab.stop()

    for run in (first, second):
        assert run.exit_code == 0 and run.job("changes").status == "PASS", run.output
    log = first.log("changes")
    assert "2 open change point(s) on main (2 new)" in log, log
    assert "2 bisection(s) started" in log
    ranges = {t.variables["RTLAB_BISECT_CASE"]: (t.variables["RTLAB_BISECT_GOOD"],
                                                 t.variables["RTLAB_BISECT_BAD"])
              for t in triggered_first}
    assert len(triggered_first) == 2 and set(ranges) == {"cpu100/1000us", "idle/1000us"}
    # the step: the last night before it and the first after
    assert ranges["cpu100/1000us"] == (commits["cpu100"][11], commits["cpu100"][12])
    good, bad = ranges["idle/1000us"]
    assert good in commits["idle"][8:12] and bad in commits["idle"][17:26]
    for triggered in triggered_first:
        assert triggered.ref == "main"
        assert (triggered.variables["RTLAB_BISECT_BOARD"],
                triggered.variables["RTLAB_BISECT_FLAVOUR"]) == ("imx6q", "rt")
    # again: the same change points, known, and no second bisection
    again = second.log("changes")
    assert "2 open change point(s) on main (0 new)" in again, again
    assert "0 bisection(s) started" in again
    assert gitlab.triggered == triggered_first
    assert "/-/pipelines/1000" in again  # the change point links its bisection
    assert token not in first.output + second.output
