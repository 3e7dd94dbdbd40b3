"""`make test-images`'s container engine keeps its hands off the host's other networks
(issue 45): beside a bridge named docker0 that rtlab did not make it refuses to start
(dockerd 20.10 would delete it), and beside one named like a Docker network's
(br-0123456789ab) it runs on a bridge of its own, and `stop` removes exactly what that
engine made (its bridge, its networks' bridges, found by the engine's own state),
leaving the other up.

Outside pytest's testpaths, run by `make test-images` after it stopped the engine of the
image tests (this test starts and stops one of its own). Needs root, iproute2 and Debian's
docker.io (the bootstrap's container-tools step)."""

import json
import os
import subprocess

import pytest

from rtlab.util import paths
from tests.images.conftest import DOCKER, engine_environment

SCRIPT = paths.REPO_ROOT / "scripts" / "container-host.sh"
FOREIGN = ("docker0", "br-0123456789ab")
OWN = "rtlab-docker0"


def link(name: str) -> dict | None:
    done = subprocess.run(["ip", "-j", "link", "show", name], capture_output=True, text=True,
                          check=False)
    return json.loads(done.stdout)[0] if done.returncode == 0 else None


def host(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          check=False, cwd=paths.REPO_ROOT)


@pytest.fixture
def foreign_bridges():
    """``bridges(*names)``: those bridges, up, as a system engine would have them; made here
    where the host has none, and removed afterwards only if made here."""
    made = []

    def make(*names: str) -> tuple[str, ...]:
        for name in names:
            if link(name) is None:
                subprocess.run(["ip", "link", "add", name, "type", "bridge"], check=True)
                made.append(name)
            subprocess.run(["ip", "link", "set", name, "up"], check=True)
        return names

    yield make
    for name in made:
        subprocess.run(["ip", "link", "delete", name], check=False)


def assert_up(names) -> None:
    for name in names:
        found = link(name)
        assert found is not None, f"{name} was removed"
        assert "UP" in found["flags"], f"{name} is down: {found['flags']}"


def test_beside_a_docker0_the_engine_refuses_to_start_and_stop_leaves_it(foreign_bridges):
    """dockerd 20.10 deletes docker0 when it starts with a bridge of its own (measured
    here): a system engine's would lose its network, so the engine refuses."""
    names = foreign_bridges(*FOREIGN)
    assert host("stop").returncode == 0
    started = host("start")
    stopped = host("stop")
    assert started.returncode != 0, started.stdout
    assert "a bridge docker0 exists" in started.stdout + started.stderr
    assert "ip link delete docker0" in started.stdout + started.stderr
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert_up(names)
    assert link(OWN) is None


def test_the_engine_removes_what_it_made_and_leaves_a_foreign_network_bridge_up(
        foreign_bridges):
    names = foreign_bridges("br-0123456789ab")
    assert link("docker0") is None, "the test before left docker0"
    assert host("stop").returncode == 0  # nothing of a run before is left running
    started = host("start")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert link(OWN) is not None, "the engine's own bridge"
        env = engine_environment()
        info = subprocess.run([DOCKER, "network", "inspect", "bridge"], env=env,
                              capture_output=True, text=True, check=True)
        options = json.loads(info.stdout)[0]["Options"]
        assert options.get("com.docker.network.bridge.name") == OWN, options
        # a network of the engine's own, as compose makes them
        created = subprocess.run([DOCKER, "network", "create", "rtlab-bridges-test"],
                                 env=env, capture_output=True, text=True, check=True)
        network_bridge = f"br-{created.stdout.strip()[:12]}"
        assert link(network_bridge) is not None
    finally:
        stopped = host("stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert_up(names)
    assert link(OWN) is None and link(network_bridge) is None
    assert link("docker0") is None, "the engine made a docker0"
    assert not os.path.exists("/run/rtlab-docker")
