"""The CI image runs the pipeline's jobs: the check stage of .gitlab-ci.yml (lint, validate,
pipeline-schema, lava-jobs) under gitlab-ci-local's docker executor, each job in its own
container of the image with the commit's files copied in, as a GitLab runner with the
docker executor runs it; and the preflight stage's lab doctor, with no lab to reach. About
1-2 min."""

import re
import subprocess
from pathlib import Path

from rtlab.util import paths
from tests.images.conftest import DOCKER, engine_environment
from tests.pipeline_bench import pipeline_times

CHECK_JOBS = ("lint", "validate", "pipeline-schema", "lava-jobs")


def run_in_image(image: str, clone: Path, *selection: str) -> subprocess.CompletedProcess:
    """gitlab-ci-local's docker executor on ``selection`` (a stage or job names)."""
    if not clone.exists():
        subprocess.run(["git", "clone", "-q", paths.REPO_ROOT, clone], check=True)
    return subprocess.run(
        [pipeline_times.gitlab_ci_local(), *selection, "--no-color",
         "--container-executable", DOCKER,
         # its default helper image is fetched from Docker Hub; the job image can do its
         # work (copying files into the job's volume) as well
         "--helper-image", image, "--pull-policy", "if-not-present",
         "--variable", f"RTLAB_CI_IMAGE={image}"],
        cwd=clone, env=engine_environment(), capture_output=True, text=True, timeout=900,
        check=False)


def test_the_check_stage_runs_in_the_ci_image(docker, built_image, tmp_path):
    image = built_image("ci")
    done = run_in_image(image, tmp_path / "clone", "--stage", "check")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    for job in CHECK_JOBS:
        # each job in a container of the image, and passed
        assert re.search(rf"^{re.escape(job)}\s.*starting {re.escape(image)} \(check\)", output,
                         re.M), (job, output[-6000:])
        assert re.search(rf"^\s*PASS\s+{re.escape(job)}\s*$", output, re.M), (job, output[-6000:])
    # the merge-request-only replay does not run in a branch pipeline
    assert "thresholds-replay" not in output
    # and they left no container behind
    assert docker("ps", "-aq").stdout.strip() == ""


def test_the_lab_doctor_runs_in_the_ci_image_and_stops_a_pipeline_without_a_lab(
        docker, built_image, tmp_path):
    image = built_image("ci")
    done = run_in_image(image, tmp_path / "clone", "lab-doctor")
    output = done.stdout + done.stderr
    # no coordinator here: the job fails, as it would on a runner that cannot reach the lab
    assert done.returncode != 0, output[-6000:]
    for board in ("imx6q", "rpi3"):
        job = f"lab-doctor: [{board}]"
        log = [line.split(">", 1)[1].strip() for line in output.splitlines()
               if line.startswith(job) and ">" in line]
        assert re.search(rf"^{re.escape(job)}\s.*starting {re.escape(image)} \(preflight\)",
                         output, re.M), output[-6000:]
        # the image's rtlab read the commit's env file and limits; the lab is all it missed
        assert any(line.startswith("✓ env-file env/rack.yaml") for line in log), log
        assert any(line.startswith(f"✓ thresholds board={board}:") for line in log), log
        assert [line for line in log if line.startswith("✗")] == [
            "✗ coordinator 127.0.0.1:20408: does not answer: Could not connect to coordinator"]
        assert re.search(rf"^\s*FAIL\s+{re.escape(job)}", output, re.M), output[-6000:]
    assert docker("ps", "-aq").stdout.strip() == ""
