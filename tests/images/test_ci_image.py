"""The CI image runs the pipeline's jobs: the check stage of .gitlab-ci.yml (lint, validate,
pipeline-schema, lava-jobs) under gitlab-ci-local's docker executor, each job in its own
container of the image with the commit's files copied in, as a GitLab runner with the
docker executor runs it. About 1-2 min."""

import re
import subprocess

from rtlab.util import paths
from tests.images.conftest import DOCKER, engine_environment
from tests.pipeline_bench import pipeline_times

CHECK_JOBS = ("lint", "validate", "pipeline-schema", "lava-jobs")


def test_the_check_stage_runs_in_the_ci_image(docker, built_image, tmp_path):
    image = built_image("ci")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", paths.REPO_ROOT, clone], check=True)
    done = subprocess.run(
        [pipeline_times.gitlab_ci_local(), "--stage", "check", "--no-color",
         "--container-executable", DOCKER,
         # its default helper image is fetched from Docker Hub; the job image can do its
         # work (copying files into the job's volume) as well
         "--helper-image", image, "--pull-policy", "if-not-present",
         "--variable", f"RTLAB_CI_IMAGE={image}"],
        cwd=clone, env=engine_environment(), capture_output=True, text=True, timeout=900,
        check=False)
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
