"""The virtual rack for integration tests: images built (cached), the rack started once
per session and stopped at the end, with a check that nothing of it is left running."""

import os
import subprocess
from pathlib import Path

import pytest

from rtlab.image.build import build_image
from rtlab.util import paths
from rtlab.vlab import control
from rtlab.vlab.config import VlabConfig, load_config
from tests.pipeline_bench import pipeline_times


def qemu_processes() -> list[str]:
    out = subprocess.run(["pgrep", "-a", "-f", "qemu-system-"], capture_output=True,
                         text=True, check=False).stdout
    return [line for line in out.splitlines() if str(paths.vlab_state_dir()) in line]


@pytest.fixture(scope="session", autouse=True)
def own_health_records(tmp_path_factory):
    """The places' health records of this test session, apart from the lab's own (a
    test that breaks a board on purpose must not count against it next time)."""
    saved = os.environ.get("RTLAB_HEALTH_DIR")
    os.environ["RTLAB_HEALTH_DIR"] = str(tmp_path_factory.mktemp("health"))
    yield
    if saved is None:
        del os.environ["RTLAB_HEALTH_DIR"]
    else:
        os.environ["RTLAB_HEALTH_DIR"] = saved


@pytest.fixture(scope="session")
def vlab() -> VlabConfig:
    config = load_config(paths.default_vlab_config())
    state_dir = paths.vlab_state_dir()
    control.start(config, state_dir)
    yield config
    control.stop(state_dir)
    assert control.running_pid(state_dir) is None
    assert qemu_processes() == [], "QEMU boards outlived the virtual rack"


@pytest.fixture(scope="session")
def image():
    """``image(board, flavour)`` → path of the built SD image (built if missing)."""
    def get(board: str, flavour: str) -> Path:
        return build_image(board, flavour, paths.debs_dir(), paths.images_dir(),
                           progress=lambda msg: None).sd_image
    return get


@pytest.fixture(scope="module")
def wide_suite(tmp_path_factory) -> Path:
    """The repository's suite file with a 50 ms histogram: the emulated tail lies inside it,
    so quantiles are figures, not ">= range"."""
    text = (paths.REPO_ROOT / "suite.yaml").read_text()
    assert text.count("  histogram_us: 400\n") == 1
    path = tmp_path_factory.mktemp("suite") / "suite.yaml"
    path.write_text(text.replace("  histogram_us: 400\n", "  histogram_us: 50000\n"))
    return path


@pytest.fixture(scope="module")
def gitlab_ci_local() -> Path:
    try:
        return pipeline_times.gitlab_ci_local()
    except (FileNotFoundError, subprocess.CalledProcessError) as error:
        pytest.fail(f"gitlab-ci-local is not installed ({error}): the bootstrap's "
                    "pipeline-tools step (scripts/install-pipeline-tools.sh) installs it")
