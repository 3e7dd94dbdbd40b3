"""rtlab.pytestplugin.queue: two pytest sessions (two places) on one plan, as `rtlab run
--boards 2` starts them, on stand-in suite cases (no board): each case runs in exactly one
session, with its JUnit case and record there and nowhere else; a place whose case ends
in an infrastructure error leaves the rest to the other."""

import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from sqlalchemy import select

from rtlab.run.queue import leftovers, measured_by, stopped_workers
from rtlab.store import open_store
from rtlab.store.models import PlanWorker
from rtlab.util.paths import REPO_ROOT

SUITE = '''
import os
import time
from pathlib import Path

import pytest

from rtlab.util.errors import InfrastructureError

CASES = [(s, i) for s in ("idle", "cpu100", "hackbench") for i in (100, 1000, 10000)]


@pytest.fixture
def board(record):
    record.facts["place"] = os.environ["LG_PLACE"]
    # no case ends before every place has begun one: on a loaded machine the first place
    # could otherwise measure the whole plan before the second had collected its suite
    Path(f"began-{os.environ['LG_PLACE']}").touch()
    deadline = time.monotonic() + 120
    while len(list(Path().glob("began-*"))) < int(os.environ["PLACES"]):
        assert time.monotonic() < deadline, "the other places never began a case"
        time.sleep(0.05)
    if os.environ["LG_PLACE"] == os.environ.get("BROKEN_PLACE"):
        raise InfrastructureError("no login prompt after 40 s")


@pytest.mark.rtlab_kind("cyclictest")
@pytest.mark.parametrize(("scenario", "interval_us"), CASES)
def test_latency(board, record, scenario, interval_us):
    record.facts["name"] = f"b/f/{scenario}/{interval_us}us"
    time.sleep(0.3)


@pytest.mark.rtlab_kind("rt-test")
@pytest.mark.parametrize("rt_test", ["pi_stress", "oslat"])
def test_rttests(board, record, rt_test):
    record.facts["name"] = f"b/f/{rt_test}"
    time.sleep(0.3)
'''
NAMES = {f"{s}/{i}us" for s in ("idle", "cpu100", "hackbench") for i in (100, 1000, 10000)}
NAMES |= {"pi_stress", "oslat"}


def run_places(tmp_path: Path, places: list[str], broken: str | None = None) -> dict:
    (tmp_path / "test_suite.py").write_text(SUITE)
    url = f"sqlite:///{tmp_path / 'plan.db'}"
    procs = {}
    # the places join one after the other, the broken one last: it then always finds
    # another place on the plan to leave the rest to
    for place in sorted(places, key=lambda name: name == broken):
        env = {**os.environ, "LG_PLACE": place, "PYTHONPATH": str(REPO_ROOT),
               "PLACES": str(len(places))}
        if broken:
            env["BROKEN_PLACE"] = broken
        procs[place] = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "-p", "rtlab.pytestplugin.hooks", "-p", "rtlab.pytestplugin.queue",
             "--rt-queue", url, "--rt-plan", "plan-1",
             "--rt-results", str(tmp_path / "results"), f"--junitxml={tmp_path}/{place}.xml",
             str(tmp_path / "test_suite.py")],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_until_joined(url, place)
    outputs = {place: proc.communicate(timeout=300)[0] for place, proc in procs.items()}
    cases = {place: [c.get("name") for c in ET.parse(tmp_path / f"{place}.xml").iter("testcase")]
             for place in places}
    records = [json.loads(p.read_text()) for p in (tmp_path / "results").glob("*.json")]
    return {"outputs": outputs, "cases": cases, "records": records, "url": url,
            "codes": {place: proc.returncode for place, proc in procs.items()}}


def wait_until_joined(url: str, place: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if Path(url.removeprefix("sqlite:///")).exists():
            store = open_store(url)
            try:
                with store.session() as session:
                    if session.scalar(select(PlanWorker.id).where(PlanWorker.place == place)):
                        return
            finally:
                store.close()
        time.sleep(0.1)
    raise AssertionError(f"{place} never joined the plan")


def test_two_places_measure_every_case_once(tmp_path):
    run = run_places(tmp_path, ["imx6q-01", "imx6q-02"])
    assert run["codes"] == {"imx6q-01": 0, "imx6q-02": 0}, run["outputs"]
    first, second = (set(names) for names in run["cases"].values())
    assert first and second, "both places measured"
    assert first.isdisjoint(second)
    assert len(first) + len(second) == len(NAMES)
    # one record per case, from the place that measured it
    names = sorted(record["name"] for record in run["records"])
    assert len(names) == len(set(names)) == len(NAMES)
    store = open_store(run["url"])
    try:
        assert leftovers(store, "plan-1") == []
        done = measured_by(store, "plan-1")
    finally:
        store.close()
    assert set(done) == NAMES
    for record in run["records"]:
        case = record["name"].removeprefix("b/f/")
        assert done[case] == record["place"], record


def test_a_failing_place_leaves_the_rest_to_the_other(tmp_path):
    run = run_places(tmp_path, ["imx6q-01", "imx6q-02"], broken="imx6q-01")
    # the broken place recorded the one case it took, as an error, and stopped
    errors = [r for r in run["records"] if r["verdict"] == "error"]
    assert len(errors) == 1 and errors[0]["place"] == "imx6q-01", errors
    assert errors[0]["message"] == "no login prompt after 40 s"
    assert len(run["cases"]["imx6q-01"]) == 1
    # the other measured all the rest
    passed = [r for r in run["records"] if r["verdict"] == "pass"]
    assert {r["place"] for r in passed} == {"imx6q-02"}
    assert len(passed) == len(NAMES) - 1
    store = open_store(run["url"])
    try:
        assert leftovers(store, "plan-1") == []
        assert list(stopped_workers(store, "plan-1")) == ["imx6q-01"]
    finally:
        store.close()


def test_the_last_place_does_not_leave(tmp_path):
    run = run_places(tmp_path, ["imx6q-01"], broken="imx6q-01")
    # alone on the plan, the broken place keeps trying every case: each is an error
    assert len(run["records"]) == len(NAMES)
    assert {r["verdict"] for r in run["records"]} == {"error"}
