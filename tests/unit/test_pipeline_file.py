""".gitlab-ci.yml: valid against GitLab's own schema (offline, check-jsonschema's vendored
copy), and the promises the pipeline makes, read from the parsed file: stage order, one
test job per board x flavour on the lab's runner with a resource group, a reservation
released in after_script, JUnit for every test job, the report's metrics and exposed
HTML, the rules on the paths that change a verdict, secrets never on a command line, and
every command a job runs is a command of the rtlab CLI (or a linter)."""

import contextlib
import io
import itertools
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from rtlab.kernel.build import default_ccache_dir
from rtlab.measure.suite import load_suite
from rtlab.platform.boards import BOARD_MODELS, FLAVOURS
from rtlab.util.paths import REPO_ROOT, kernel_cache_dir

PIPELINE = REPO_ROOT / ".gitlab-ci.yml"
KEYWORDS = {"workflow", "stages", "variables", "default", "include", "image", "services",
            "cache", "before_script", "after_script"}
# the tools a job may call besides rtlab: linters of the check stage
TOOLS = {"ruff", "check-jsonschema", "hadolint"}
SECRETS = ("RTLAB_GITLAB_TOKEN", "PGPASSWORD", "RTLAB_RESULTS_DB", "CI_JOB_TOKEN",
           "RTLAB_TUNE_TOKEN", "RTLAB_BISECT_TOKEN", "RTLAB_BISECT_TRIGGER_TOKEN")
CAMPAIGN = "campaign-"
# a campaign pipeline: a schedule or a pipeline started by hand that names a campaign
CAMPAIGN_IF = "$RTLAB_CAMPAIGN && $CI_PIPELINE_SOURCE =~ /^(schedule|web|api|trigger)$/"
BISECT_IF = "$RTLAB_BISECT_GOOD && $CI_PIPELINE_SOURCE =~ /^(schedule|web|api|trigger)$/"


def _merge(base: dict, over: dict) -> dict:
    """GitLab's `extends`: hashes merge deeply, everything else is replaced."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _resolve(name: str, raw: dict) -> dict:
    job = raw[name]
    parents = job.get("extends", [])
    parents = [parents] if isinstance(parents, str) else parents
    resolved: dict = {}
    for parent in parents:
        resolved = _merge(resolved, _resolve(parent, raw))
    return _merge(resolved, {k: v for k, v in job.items() if k != "extends"})


@pytest.fixture(scope="module")
def pipeline() -> dict:
    return YAML(typ="safe").load(PIPELINE.read_text())


@pytest.fixture(scope="module")
def jobs(pipeline) -> dict[str, dict]:
    return {name: _resolve(name, pipeline) for name in pipeline
            if name not in KEYWORDS and not name.startswith(".")}


def jobs_of(jobs: dict, stage: str) -> dict[str, dict]:
    """The jobs of a push's pipeline in ``stage`` (a campaign's jobs are apart)."""
    return {name: job for name, job in jobs.items() if job["stage"] == stage
            and not name.startswith(CAMPAIGN)}


def campaign_jobs_of(jobs: dict, stage: str) -> dict[str, dict]:
    return {name: job for name, job in jobs.items() if job["stage"] == stage
            and name.startswith(CAMPAIGN)}


def script_lines(job: dict) -> list[str]:
    return [line for key in ("before_script", "script", "after_script")
            for line in job.get(key, [])]


def test_valid_against_gitlabs_schema():
    tool = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))
    assert tool, "check-jsonschema is missing: it comes with the dev dependencies"
    proc = subprocess.run([tool, "--builtin-schema", "vendor.gitlab-ci", str(PIPELINE)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_schema_check_catches_a_broken_pipeline(tmp_path):
    """So that the test above proves something: the vendored schema refuses a typo."""
    broken = tmp_path / ".gitlab-ci.yml"
    broken.write_text(PIPELINE.read_text().replace("  after_script:", "  aftr_script:"))
    tool = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))
    proc = subprocess.run([tool, "--builtin-schema", "vendor.gitlab-ci", str(broken)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "aftr_script" in proc.stdout


def test_stages_in_order(pipeline, jobs):
    assert pipeline["stages"] == ["check", "preflight", "build", "image", "test", "report",
                                  "tune", "bisect"]
    assert {job["stage"] for job in jobs.values()} == set(pipeline["stages"])
    assert {job["stage"] for name, job in jobs.items() if name.startswith(CAMPAIGN)} == \
        set(pipeline["stages"]) - {"check", "preflight", "tune", "bisect"}


def test_check_stage_lints_and_validates(jobs):
    lines = [line for job in jobs_of(jobs, "check").values() for line in script_lines(job)]
    for expected in ("ruff check", "rtlab thresholds check", "rtlab env check",
                     "rtlab campaign check",
                     "check-jsonschema --builtin-schema vendor.gitlab-ci .gitlab-ci.yml",
                     "hadolint "):
        assert any(line.startswith(expected) for line in lines), expected
    # the LAVA job templates of jobs/ against LAVA's own schema, in every pipeline
    [lava] = [job for job in jobs_of(jobs, "check").values()
              if any("lava" in line for line in script_lines(job))]
    assert script_lines(lava) == ["rtlab lava validate jobs"]
    assert "rules" not in lava


def matrix(job: dict) -> dict[str, list[str]]:
    [entry] = job["parallel"]["matrix"]
    return entry


@pytest.mark.parametrize("stage", ["build", "image", "test"])
def test_board_stages_run_every_board_and_flavour(jobs, stage):
    [job] = jobs_of(jobs, stage).values()
    assert matrix(job) == {"BOARD": sorted(BOARD_MODELS), "FLAVOUR": list(FLAVOURS)}


def test_build_and_image_stages_hand_on_their_outputs(jobs):
    [build] = jobs_of(jobs, "build").values()
    [image] = jobs_of(jobs, "image").values()
    assert build["script"] == [
        'rtlab kernel provide --board "$BOARD" --flavour "$FLAVOUR" --policy "$RTLAB_KERNEL" '
        '--out out/kernel']
    assert build["artifacts"]["paths"] == ["out/kernel/"]
    # a later pipeline reuses the default branch's last built kernel from these artifacts
    assert build["artifacts"]["expire_in"] == "1 year"
    # ccache survives between pipelines in the job cache, at the path builds use
    cached = {path for cache in build["cache"] for path in cache["paths"]}
    assert f"{default_ccache_dir().relative_to(REPO_ROOT)}/" in cached
    assert f"{kernel_cache_dir().relative_to(REPO_ROOT)}/downloads/" in cached
    assert image["script"] == [
        'rtlab image build --board "$BOARD" --flavour "$FLAVOUR" '
        '--kernel "out/kernel/$BOARD-$FLAVOUR" --out out/images']
    assert image["artifacts"]["paths"] == ["out/images/"]
    # each image job gets its own board x flavour's kernel, not all four
    [need] = image["needs"]
    assert need["job"] == "kernel"
    assert need["parallel"]["matrix"] == [{"BOARD": "$[[ matrix.BOARD ]]",
                                          "FLAVOUR": "$[[ matrix.FLAVOUR ]]"}]


def test_test_jobs_run_on_the_lab_runner_one_per_board_at_a_time(jobs):
    [test] = jobs_of(jobs, "test").values()
    assert test["tags"] == ["lab-$BOARD"]
    assert test["resource_group"] == "lab-$BOARD"
    need, doctor = test["needs"]
    assert need["job"] == "sd-image" and need["parallel"]["matrix"] == [
        {"BOARD": "$[[ matrix.BOARD ]]", "FLAVOUR": "$[[ matrix.FLAVOUR ]]"}]
    # no board is flashed before the lab's preflight of its board type passed
    assert doctor == {"job": "lab-doctor", "artifacts": False,
                      "parallel": {"matrix": [{"BOARD": "$[[ matrix.BOARD ]]"}]}}


def test_the_lab_doctor_checks_each_board_type_from_its_labs_runner(jobs):
    doctor, test = jobs["lab-doctor"], jobs["test"]
    assert doctor["stage"] == "preflight" and doctor["needs"] == []
    assert matrix(doctor) == {"BOARD": matrix(test)["BOARD"]}
    assert doctor["tags"] == test["tags"] == ["lab-$BOARD"]
    # it runs wherever the test job would, and nowhere else
    assert doctor["rules"] == test["rules"]
    [line] = script_lines(doctor)
    argv = shlex.split(line)
    assert argv[:3] == ["rtlab", "lab", "doctor"]
    options = dict(zip(argv[3::2], argv[4::2], strict=True))
    test_options = dict(zip(shlex.split(script_lines(test)[0])[2::2],
                            shlex.split(script_lines(test)[0])[3::2], strict=False))
    # the same lab the test job uses: its coordinator, environment and board tag
    for option in ("--coordinator", "--env", "--boards"):
        expected = test_options["--board" if option == "--boards" else option]
        assert options[option] == expected, option
    assert options["--json"] == "out/doctor/$BOARD.json"
    assert doctor["artifacts"]["when"] == "always"
    assert doctor["artifacts"]["paths"] == ["out/doctor/"]


def test_test_jobs_reserve_and_release_the_board(jobs):
    [test] = jobs_of(jobs, "test").values()
    [run] = test["script"]
    argv = shlex.split(run)
    assert argv[:2] == ["rtlab", "run"]
    options = dict(zip(argv[2::2], argv[3::2], strict=True))
    assert options["--board"] == "${RTLAB_BOARD_TAG_PREFIX}${BOARD}"
    assert options["--reserve-timeout"] == "$RTLAB_RESERVE_TIMEOUT"
    assert options["--image"] == "out/images/$BOARD-$FLAVOUR/sdcard.img"
    assert options["--out"] == "out/test/$BOARD-$FLAVOUR"
    # every healthy place of the type shares the job's cases; the tier names them
    assert options["--boards"] == "$RTLAB_BOARDS"
    assert options["--tier"] == "$RTLAB_TIER"
    assert options["--window"] == "$RTLAB_WINDOW"
    # after_script runs after failures and cancels too; it names the run's folder, where
    # each place of the plan left its reservation's state file
    [release] = test["after_script"]
    assert shlex.split(release)[:4] == ["rtlab", "reservation", "release",
                                        "out/test/$BOARD-$FLAVOUR"]


def test_pushes_run_the_gate_tier_and_schedules_the_whole_matrix_for_an_hour(jobs):
    pipeline = YAML(typ="safe").load((REPO_ROOT / ".gitlab-ci.yml").read_text())
    assert pipeline["variables"]["RTLAB_TIER"]["value"] == "gate"
    [schedule] = [rule for rule in pipeline["workflow"]["rules"]
                  if rule.get("if") == '$CI_PIPELINE_SOURCE == "schedule"']
    assert schedule["variables"] == {"RTLAB_TIER": "full", "RTLAB_DURATION": "3600",
                                     "RTLAB_WINDOW": ""}
    # pushes: adaptive windows of a minute, capped at the hour
    assert pipeline["variables"]["RTLAB_WINDOW"]["value"] == "60"
    assert pipeline["variables"]["RTLAB_DURATION"]["value"] == "3600"
    # the rule comes before the one every branch pipeline matches
    rules = [rule.get("if") for rule in pipeline["workflow"]["rules"]]
    assert rules.index(schedule["if"]) < rules.index("$CI_COMMIT_BRANCH")
    assert load_suite().tier("gate") is not None


def test_test_jobs_keep_junit_records_and_console_logs_even_when_they_fail(jobs):
    [test] = jobs_of(jobs, "test").values()
    artifacts = test["artifacts"]
    assert artifacts["when"] == "always"
    assert artifacts["reports"]["junit"] == "out/test/*/junit-*.xml"
    # the run's --out folder (JUnit, results/, console/<place>/) is kept whole
    assert artifacts["paths"] == ["out/test/"]
    # long enough for trends of labs that keep their history in artifacts
    assert re.fullmatch(r"\d+ years?", artifacts["expire_in"])


def test_report_publishes_metrics_and_the_html_report(jobs):
    [report] = jobs_of(jobs, "report").values()
    artifacts = report["artifacts"]
    assert artifacts["reports"]["metrics"] == "out/report/metrics.txt"
    assert artifacts["expose_as"]
    assert "out/report/report.html" in artifacts["paths"]
    assert artifacts["when"] == "always"
    commands = [" ".join(shlex.split(line)[:3]) for line in report["script"]]
    assert commands == ["rtlab results ingest", "rtlab report --out",
                        "rtlab thresholds replay"]
    # the database is never on the command line: RTLAB_RESULTS_DB from the environment
    assert not any("--db" in line for line in report["script"])
    # it reads every test job's records, and runs after failed test jobs too
    [need] = report["needs"]
    assert need == {"job": "test", "artifacts": True, "optional": True}
    # (a campaign pipeline reports its study instead)
    assert report["rules"][:2] == [{"if": CAMPAIGN_IF, "when": "never"},
                                   {"if": BISECT_IF, "when": "never"}]
    assert all(rule.get("when") == "always" for rule in report["rules"][2:])


def test_board_jobs_run_when_a_verdict_can_change(pipeline, jobs):
    for stage in ("build", "image", "test", "report"):
        [job] = jobs_of(jobs, stage).values()
        rules = job["rules"]
        changes = [rule["changes"] for rule in rules if "changes" in rule]
        assert changes, stage
        for path in ("kernel/**/*", "thresholds.yaml", "tests/**/*", "env/**/*"):
            assert path in changes[0], (stage, path)
        # never in a campaign pipeline, which measures its study instead
        assert rules[0] == {"if": CAMPAIGN_IF, "when": "never"}
        # a bisection pipeline measures its steps, nothing else
        assert rules[1] == {"if": BISECT_IF, "when": "never"}
        # the default branch always runs them: its pipelines extend the results history
        assert rules[2]["if"] == "$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH"
    # a merge request compares its results with the default branch's
    [report] = jobs_of(jobs, "report").values()
    assert '--baseline-ref "$CI_DEFAULT_BRANCH"' in report["script"][1]
    assert '--candidate-pipeline "$CI_PIPELINE_ID"' in report["script"][1]
    assert {"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'} in \
        pipeline["workflow"]["rules"]


def test_lab_settings_are_documented_variables(pipeline):
    variables = pipeline["variables"]
    for name in ("LG_COORDINATOR", "RTLAB_ENV", "RTLAB_BOARD_TAG_PREFIX", "RTLAB_DURATION",
                 "RTLAB_RESERVE_TIMEOUT", "RTLAB_CI_IMAGE"):
        assert variables[name]["description"], name
    text = PIPELINE.read_text()
    for secret in ("RTLAB_RESULTS_DB", "PGPASSWORD", "RTLAB_GITLAB_TOKEN", "RTLAB_TUNE_TOKEN",
                   "RTLAB_BISECT_TOKEN", "RTLAB_BISECT_TRIGGER_TOKEN"):
        # documented in the header, for the lab's masked project variables
        assert re.search(rf"^#\s+{secret}\s", text, re.MULTILINE), secret
        assert secret not in variables, f"{secret} must not get a value in the file"


def test_tune_runs_on_the_default_branchs_schedules_or_by_hand_only(jobs):
    assert set(jobs_of(jobs, "tune")) == {"tune", "changes"}
    tune = jobs["tune"]
    default = "$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH"
    assert tune["rules"] == [
        # a campaign's schedule stores a study, not the gate's history
        {"if": CAMPAIGN_IF, "when": "never"},
        {"if": BISECT_IF, "when": "never"},
        {"if": f'$CI_PIPELINE_SOURCE == "schedule" && {default}', "when": "always"},
        {"if": f'$CI_PIPELINE_SOURCE == "web" && {default}', "when": "manual",
         "allow_failure": True}]
    # after the report stored this pipeline's runs, when there is one
    assert tune["needs"] == [{"job": "report", "artifacts": False, "optional": True}]
    # one tuning run at a time; the token is a variable of this environment alone
    assert tune["resource_group"] and tune["environment"]["name"] == "thresholds-tuning"
    assert tune["environment"]["action"] == "prepare"
    assert tune["interruptible"] is False
    pull, propose = (shlex.split(line) for line in tune["script"])
    assert pull == ["rtlab", "results", "pull", "--ingest", "-n", "$RTLAB_PULL_PIPELINES"]
    assert propose[:3] == ["rtlab", "thresholds", "propose"]
    options = dict(zip(propose[3::2], propose[4::2], strict=True))
    assert options == {"--ref": "$CI_DEFAULT_BRANCH", "--min-runs": "$RTLAB_TUNE_MIN_RUNS",
                       "--branch": "$RTLAB_TUNE_BRANCH", "--label": "$RTLAB_TUNE_LABELS",
                       "--out": "out/tune"}
    assert tune["artifacts"]["paths"] == ["out/tune/"]
    assert tune["artifacts"]["when"] == "always"


def test_a_merge_request_that_changes_the_gate_replays_it(jobs):
    [replay] = [job for job in jobs_of(jobs, "check").values()
                if any("thresholds replay" in line for line in script_lines(job))]
    assert replay["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"',
                                "changes": ["thresholds.yaml"]}]
    assert replay["needs"] == []
    assert shlex.split(replay["script"][-1]) == [
        "rtlab", "thresholds", "replay", "--ref", "$CI_DEFAULT_BRANCH",
        "--fail-on-new-failures"]
    # new failures (exit 1) warn the reviewer; an error (exit 2) fails the job
    assert replay["allow_failure"] == {"exit_codes": [1]}


def test_secrets_are_never_on_a_command_line_nor_echoed(jobs):
    for name, job in jobs.items():
        for line in script_lines(job):
            for secret in SECRETS:
                assert secret not in line, f"{name}: {line}"
            assert not re.search(r"\bset\s+-\w*x", line), f"{name} traces its commands"


def test_every_command_is_the_rtlab_cli_or_a_linter(jobs):
    """No logic in YAML: each line is one command, of rtlab or a check-stage linter, and
    each rtlab command exists in the CLI."""
    from rtlab.cli import parser

    top = parser()
    for name, job in jobs.items():
        for line in script_lines(job):
            argv = shlex.split(line)
            assert not set(line) & set(";|&`") and "$(" not in line, f"{name}: {line}"
            if argv[0] in TOOLS:
                continue
            assert argv[0] == "rtlab", f"{name}: {line}"
            # the command words: up to two, before the first option
            words = list(itertools.takewhile(lambda w: not w.startswith("-"), argv[1:3]))
            try:
                with contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()) as errors:
                    top.parse_known_args([*words, "--help"])
            except SystemExit as done:
                assert done.code == 0, (f"{name}: rtlab {' '.join(words)} is no command: "
                                        f"{errors.getvalue().strip().splitlines()[-1:]}")


def test_every_board_of_the_matrix_has_thresholds(jobs):
    """Physical and emulated: a test job on a board without thresholds could only error.
    (The file's own check is `rtlab thresholds check`, in the check stage.)"""
    text = (REPO_ROOT / "thresholds.yaml").read_text()
    for board in matrix(next(iter(jobs_of(jobs, "test").values())))["BOARD"]:
        assert re.search(rf"^  {board}:$", text, re.MULTILINE), board
        assert re.search(rf"^  qemu-{board}:$", text, re.MULTILINE), board


# ------------------------------------------------------------------ a campaign ----


def test_a_campaign_runs_only_when_a_schedule_or_a_person_names_one(pipeline, jobs):
    variable = pipeline["variables"]["RTLAB_CAMPAIGN"]
    assert variable["value"] == "" and "campaigns/" in variable["description"]
    for name, job in jobs.items():
        if not name.startswith(CAMPAIGN):
            continue
        [rule] = job["rules"]
        assert rule["if"] == CAMPAIGN_IF, name
    # and then the push's board jobs do not run (their first rule, tested above)
    assert {name for name in jobs if name.startswith(CAMPAIGN)} == {
        "campaign-kernel", "campaign-image", "campaign-test", "campaign-report"}


@pytest.mark.parametrize(("stage", "command"), [("build", "kernels"), ("image", "images"),
                                                ("test", "test")])
def test_a_campaigns_stages_run_every_board_through_the_stages_own_commands(jobs, stage,
                                                                            command):
    [job] = campaign_jobs_of(jobs, stage).values()
    assert matrix(job) == {"BOARD": sorted(BOARD_MODELS)}
    argv = shlex.split(job["script"][0])
    assert argv[:4] == ["rtlab", "campaign", command, "$RTLAB_CAMPAIGN"]
    options = dict(zip(argv[4::2], argv[5::2], strict=True))
    assert options["--board"] == "$BOARD"
    assert options["--out"] == "out/campaign/$RTLAB_CAMPAIGN"
    if stage != "build":
        # each board's job takes its own board's artifacts of the stage before
        [need] = job["needs"]
        assert need["parallel"]["matrix"] == [{"BOARD": "$[[ matrix.BOARD ]]"}]


def test_a_campaigns_kernels_are_built_with_ccache_kept(jobs):
    [build] = campaign_jobs_of(jobs, "build").values()
    cached = {path for cache in build["cache"] for path in cache["paths"]}
    # the same folders as the push's kernel job keeps
    [push] = jobs_of(jobs, "build").values()
    assert cached == {path for cache in push["cache"] for path in cache["paths"]}
    assert ".cache/kernel/ccache/" in cached
    assert build["artifacts"]["paths"] == ["out/campaign/"]


def pushed_cache_keys(name: str, job: dict) -> list[tuple[str, str]]:
    """(cache key, job instance) for every cache the job's matrix instances push."""
    caches = job.get("cache", [])
    caches = [caches] if isinstance(caches, dict) else caches
    entries = job.get("parallel", {}).get("matrix", [{}])
    instances = [dict(zip(entry, values, strict=True)) for entry in entries
                 for values in itertools.product(*entry.values())] or [{}]
    keys = []
    for cache in caches:
        if cache.get("policy", "pull-push") == "pull":
            continue
        for variables in instances:
            key = cache["key"]
            for variable, value in variables.items():
                key = key.replace(f"${variable}", value)
            keys.append((key, f"{name} {variables}"))
    return keys


@pytest.mark.parametrize("campaign", [False, True], ids=["push", "campaign"])
def test_jobs_of_one_pipeline_never_push_one_cache_key(jobs, campaign):
    # jobs that push one key at once race (gitlab-ci-local crashed on it, make test of
    # 2026-11-27), and on GitLab the last one's upload wins: one pusher per key
    pushed = [key for name, job in jobs.items() if name.startswith(CAMPAIGN) == campaign
              for key in pushed_cache_keys(name, job)]
    keys = [key for key, _ in pushed]
    assert len(keys) == len(set(keys)), sorted(pushed)
    assert any(key.startswith("debs-") for key in keys)


def test_a_campaigns_test_job_shares_the_boards_and_releases_them(jobs):
    [test] = campaign_jobs_of(jobs, "test").values()
    assert test["tags"] == ["lab-$BOARD"] and test["resource_group"] == "lab-$BOARD"
    argv = shlex.split(test["script"][0])
    options = dict(zip(argv[4::2], argv[5::2], strict=True))
    # every healthy place of the type, physical or virtual, as the push's test job
    assert options["--places"] == "$RTLAB_BOARDS"
    assert options["--board-prefix"] == "$RTLAB_BOARD_TAG_PREFIX"
    assert options["--env"] == "$RTLAB_ENV"
    [release] = test["after_script"]
    assert shlex.split(release)[:4] == ["rtlab", "reservation", "release",
                                        "out/campaign/$RTLAB_CAMPAIGN/test/$BOARD"]
    assert test["artifacts"]["when"] == "always"
    assert test["artifacts"]["reports"]["junit"] == "out/campaign/*/test/*/*/junit-*.xml"


def test_a_campaigns_report_is_this_pipelines_execution(jobs):
    [report] = campaign_jobs_of(jobs, "report").values()
    commands = [shlex.split(line) for line in report["script"]]
    assert commands[0] == ["rtlab", "results", "ingest", "out/campaign/$RTLAB_CAMPAIGN/test"]
    assert commands[1][:4] == ["rtlab", "report", "--campaign", "$RTLAB_CAMPAIGN"]
    assert commands[1][4:6] == ["--campaign-run", "gitlab:$CI_PIPELINE_ID"]
    assert report["needs"] == [{"job": "campaign-test", "artifacts": True, "optional": True}]
    assert report["artifacts"]["expose_as"] and report["artifacts"]["when"] == "always"
    assert [rule.get("when") for rule in report["rules"]] == ["always"]


def test_a_bisection_runs_when_a_person_or_a_schedule_names_a_good_commit(pipeline, jobs):
    from rtlab.cli import parser

    bisect, publish = jobs["bisect"], jobs["bisect-publish"]
    for job in (bisect, publish):
        assert job["stage"] == "bisect" and job["rules"] == [{"if": BISECT_IF}]
        assert job["interruptible"] is False
    # the job that runs board code for days never holds the token; publishing does
    assert "environment" not in bisect
    assert publish["environment"]["name"] == "latency-bisection"
    assert bisect["allow_failure"] == {"exit_codes": [3]}
    run, = (shlex.split(line) for line in bisect["script"])
    # the real parser takes the job's arguments (a flavour and a number of places as the
    # variables hold them)
    values = {"$RTLAB_BISECT_FLAVOUR": "rt", "$RTLAB_BOARDS": "all",
              "$RTLAB_RESERVE_TIMEOUT": "3600", "$RTLAB_BISECT_KERNEL": "build"}
    args = parser().parse_args([values.get(word, word) for word in run[1:]])
    assert run[run.index("--flavour") + 1] == "$RTLAB_BISECT_FLAVOUR"
    # a lab bisects kernels built from each commit, with the kernel jobs' ccache
    assert run[run.index("--kernel-source") + 1] == "$RTLAB_BISECT_KERNEL"
    assert pipeline["variables"]["RTLAB_BISECT_KERNEL"]["value"] == "build"
    assert bisect["cache"]["key"] == "kernel-$RTLAB_BISECT_BOARD-$RTLAB_BISECT_FLAVOUR"
    assert set(bisect["cache"]["paths"]) == {
        path for cache in jobs["kernel"]["cache"] for path in cache["paths"]
        if "kernel" in path}
    assert (args.good, args.bad, args.board, args.case) == (
        "$RTLAB_BISECT_GOOD", "${RTLAB_BISECT_BAD:-$CI_COMMIT_SHA}", "$RTLAB_BISECT_BOARD",
        "$RTLAB_BISECT_CASE")
    assert args.out == "out/bisect" and "out/bisect/" in bisect["artifacts"]["paths"]
    published, = (shlex.split(line) for line in publish["script"])
    args = parser().parse_args(published[1:])
    assert args.result == "out/bisect/result.json"
    assert publish["needs"] == [{"job": "bisect", "artifacts": True}]


def test_change_points_start_bisections_on_the_default_branchs_schedules_only(jobs):
    changes = jobs["changes"]
    default = "$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH"
    assert changes["rules"] == [
        {"if": CAMPAIGN_IF, "when": "never"},
        {"if": BISECT_IF, "when": "never"},
        {"if": f'$CI_PIPELINE_SOURCE == "schedule" && {default}', "when": "always"}]
    assert changes["needs"] == [{"job": "report", "artifacts": False, "optional": True}]
    # one at a time (two would both find a change point new); the trigger token is a
    # variable of this environment alone
    assert changes["resource_group"]
    assert changes["environment"]["name"] == "latency-change-points"
    [line] = changes["script"]
    assert shlex.split(line) == ["rtlab", "report", "--changes", "--bisect-changes",
                                 "--baseline-ref", "$CI_DEFAULT_BRANCH"]
    # what the trigger sets is what the bisect job reads
    from rtlab.report.bisect_trigger import bisect_variables
    from rtlab.store.models import ChangePoint

    sent = bisect_variables(ChangePoint(id=1, board="imx6q", flavour="rt", scenario="idle",
                                        interval_us=1000, good_commit="a" * 40,
                                        bad_commit="b" * 40))
    script = " ".join(jobs["bisect"]["script"])
    for name in sent:
        assert f"${name}" in script or f"${{{name}" in script, name
