"""Board health: infrastructure errors in a row make a place unhealthy on the
coordinator, whichever runners they happened on; CI stops running on it until a health
check passes."""

import subprocess
import sys

import pytest

from conftest import CLIENT, PLACE
from rtlab.lab.health import ERRORS_TAG_KEY, TAG_KEY, place_info
from rtlab.util.paths import REPO_ROOT
from rtlab.vlab import control


def rtlab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rtlab.cli", *args], capture_output=True,
                          text=True, cwd=REPO_ROOT, timeout=900, check=False)


# the virtual rack's other i.MX6Q: a run by board type would take it while it is healthy
OTHER_PLACE = "imx6q-02"


@pytest.fixture
def place_restored(vlab):
    yield
    # whatever the test left, the places are healthy for the tests after it
    for place in (PLACE, OTHER_PLACE):
        subprocess.run([CLIENT, "-x", vlab.coordinator_address, "-p", place, "set-tags",
                        f"{TAG_KEY}=", f"{ERRORS_TAG_KEY}="], check=True, capture_output=True)
    subprocess.run([CLIENT, "-x", vlab.coordinator_address, "-p", PLACE, "set-comment",
                    "virtual imx6q (QEMU)"], check=True, capture_output=True)


@pytest.mark.full
def test_three_errors_in_a_row_make_the_place_unhealthy_until_a_check_passes(
        vlab, image, run_with_faults, place_restored, tmp_path, monkeypatch):
    # two CI runners, each with its own health folder: the first two errors on one, the
    # third on the other
    for number, runner in ((1, "runner-1"), (2, "runner-1"), (3, "runner-2")):
        monkeypatch.setenv("RTLAB_HEALTH_DIR", str(tmp_path / runner))
        run = run_with_faults([("pdu-error", {"times": 0})])
        assert run.record("idle/1000us")["verdict"] == "error"
        control.clear_faults(vlab, PLACE)
        tags = place_info(vlab.coordinator_address, PLACE).tags
        assert tags.get(TAG_KEY) == ("unhealthy" if number == 3 else "healthy"), number
        assert tags.get(ERRORS_TAG_KEY) == str(number)

    info = place_info(vlab.coordinator_address, PLACE)
    assert "3 infrastructure errors in a row" in info.comment
    assert "PDU: HTTP 500 on outlet 1" in info.comment
    assert "virtual imx6q (QEMU)" in info.comment, "the place's own comment is kept"
    assert info.tags["board"] == "qemu-imx6q", "the place's other tags are kept"

    # CI does not schedule it: the run is refused before the board is touched
    sd_image = str(image("imx6q", "rt"))
    refused = rtlab("run", "--place", PLACE, "--image", sd_image, "--out",
                    str(tmp_path / "refused"), "--duration", "2", "--scenarios", "idle",
                    "--intervals", "1000", "--rt-tests", "none")
    assert refused.returncode == 2
    assert f"place {PLACE} is unhealthy" in refused.stderr
    assert not (tmp_path / "refused" / "results").exists()
    # a CI job asks for any board of the type when every one is unhealthy: refused at
    # once, not queued for a place the coordinator will never allocate to it, and the
    # message names each place and says how to get one back
    subprocess.run([CLIENT, "-x", vlab.coordinator_address, "-p", OTHER_PLACE, "set-tags",
                    f"{TAG_KEY}=unhealthy"], check=True, capture_output=True)
    by_type = rtlab("run", "--board", "qemu-imx6q", "--image", sd_image, "--out",
                    str(tmp_path / "by-type"), "--duration", "2", "--scenarios", "idle",
                    "--intervals", "1000", "--rt-tests", "none", "--reserve-timeout", "600")
    assert by_type.returncode == 2, by_type.stdout[-2000:] + by_type.stderr[-2000:]
    assert "every place with board=qemu-imx6q is unhealthy" in by_type.stderr
    assert f"{PLACE}: " in by_type.stderr
    assert "3 infrastructure errors in a row" in by_type.stderr
    assert f"{OTHER_PLACE}: " in by_type.stderr
    assert "rtlab lab check --place imx6q-0" in by_type.stderr
    assert not (tmp_path / "by-type" / "results").exists()

    health = rtlab("lab", "health", "--place", PLACE, "--history")
    assert health.returncode == 0, health.stderr
    assert "unhealthy" in health.stdout and "PDU: HTTP 500" in health.stdout

    # the health check (flash + boot + a short measurement) passes on the first runner,
    # whose own record never saw the place unhealthy: healthy again for every runner
    monkeypatch.setenv("RTLAB_HEALTH_DIR", str(tmp_path / "runner-1"))
    check = rtlab("lab", "check", "--place", PLACE, "--image", sd_image,
                  "--out", str(tmp_path / "check"))
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-2000:]
    info = place_info(vlab.coordinator_address, PLACE)
    assert (info.tags[TAG_KEY], info.tags[ERRORS_TAG_KEY]) == ("healthy", "0")
    assert info.comment == "virtual imx6q (QEMU)"
    assert info.tags["board"] == "qemu-imx6q"
