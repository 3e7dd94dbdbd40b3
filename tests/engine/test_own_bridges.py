"""`make test-images`'s container engine keeps its hands off the host's other networks
(issue 45): with a bridge named docker0 and one named like a Docker network's
(br-0123456789ab) that rtlab did not make, `scripts/container-host.sh start` runs its
engine on a bridge of its own, and `stop` removes exactly what that engine made (its
bridge, its networks' bridges, found by the engine's own state), leaving the others up.

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
    """docker0 and br-0123456789ab, up, as a system engine would have them; made here
    where the host has none, and removed afterwards only if made here."""
    made = []
    for name in FOREIGN:
        if link(name) is None:
            subprocess.run(["ip", "link", "add", name, "type", "bridge"], check=True)
            made.append(name)
        subprocess.run(["ip", "link", "set", name, "up"], check=True)
    yield FOREIGN
    for name in made:
        subprocess.run(["ip", "link", "delete", name], check=False)


def test_start_and_stop_leave_the_hosts_other_bridges_up(foreign_bridges):
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
    for name in foreign_bridges:
        found = link(name)
        assert found is not None, f"{name} was removed by container-host.sh stop"
        assert "UP" in found["flags"], f"{name} is down: {found['flags']}"
    assert link(OWN) is None and link(network_bridge) is None
    assert not os.path.exists("/run/rtlab-docker")
