"""`make test-images`: rtlab's images, built on this machine by scripts/container-host.sh,
each doing its job. This folder is outside pytest's testpaths: `make test` builds no
image and needs no container engine."""

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from rtlab.lab import client as labgrid_client
from rtlab.util import paths
from tests.integration.rackports import rack_config_on_free_ports

DOCKER = "/usr/bin/docker"
REGISTRY = "registry.lab.example/rtlab"
BINDIR = Path(sys.executable).parent


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


def wait_for(what: str, ready, timeout_s: float = 60) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, f"{what} within {timeout_s:.0f} s"
        time.sleep(0.3)


@pytest.fixture
def rack(tmp_path):
    """The virtual rack's hardware alone (serial lines, PDU, muxes: no coordinator, no
    exporter), on ports of its own."""
    config = rack_config_on_free_ports(tmp_path)
    env = {**os.environ, "RTLAB_CACHE": os.fspath(tmp_path / "cache")}
    with (tmp_path / "rack.log").open("wb") as log:
        proc = subprocess.Popen([BINDIR / "rtlab", "vlab", "serve", "--no-labgrid", "--config",
                                 config.path], env=env, stdout=log, stderr=subprocess.STDOUT)

    def ready() -> bool:
        assert proc.poll() is None, (tmp_path / "rack.log").read_text()
        try:
            return requests.get(f"{config.api_url}/status", timeout=2).json()["ready"]
        except requests.RequestException:
            return False

    wait_for("the rack's hardware is up", ready)
    yield config, tmp_path / "cache" / "vlab"
    proc.terminate()
    proc.wait(30)


def labgrid(coordinator: str, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([BINDIR / "labgrid-client", "-x", coordinator, *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env=env or labgrid_client.environment())
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout
