"""`make test-images`: rtlab's images, built on this machine by scripts/container-host.sh,
each doing its job. This folder is outside pytest's testpaths: `make test` builds no
image and needs no container engine."""

import os
import shlex
import subprocess
from collections.abc import Callable

import pytest

from rtlab.util import paths

DOCKER = "/usr/bin/docker"
REGISTRY = "registry.lab.example/rtlab"


def engine_environment() -> dict[str, str]:
    """This process's environment, pointed at the engine of scripts/container-host.sh."""
    line = subprocess.run([paths.REPO_ROOT / "scripts" / "container-host.sh", "env"],
                          capture_output=True, text=True, check=True).stdout
    words = shlex.split(line)
    assert words[0] == "export", line
    return {**os.environ, **dict(word.split("=", 1) for word in words[1:])}


@pytest.fixture(scope="session")
def docker() -> Callable[..., subprocess.CompletedProcess[str]]:
    env = engine_environment()

    def run(*args: str, check: bool = True,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([DOCKER, *args], capture_output=True, text=True, env=env,
                              timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)} exited with {done.returncode}:\n"
                                 f"{done.stdout}{done.stderr}")
        return done

    if run("info", check=False).returncode != 0:
        pytest.fail("no container engine answers on "
                    f"{env['DOCKER_HOST']}: `make test-images` starts it "
                    "(scripts/container-host.sh start)")
    return run


@pytest.fixture(scope="session")
def built_image(docker) -> Callable[[str], str]:
    """``built_image("exporter")`` → the tag of that image, which must have been built."""
    def tag(name: str) -> str:
        image = f"{REGISTRY}/{name}:bookworm"
        if docker("image", "inspect", image, check=False).returncode != 0:
            pytest.fail(f"{image} is not built: `make test-images` builds it "
                        f"(scripts/container-host.sh build {name})")
        return image
    return tag
