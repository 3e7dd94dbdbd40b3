"""A regression bisected on the virtual rack to its commit and its option: a lab
repository of four commits after a good one, whose third turns on the test device (a
SCHED_FIFO task busy on CPU0, rtlab.bisect.testdev) together with a harmless option. Both
i.MX6Q places measure every step; one step is made undecidable by a PDU that fails on
both, and the bisection must say so and route around it, not guess.

    good ── c1 HZ_1000 (harmless) ── c2 PRINTK_TIME + the test device ── c3 comment (bad)

Expected: the bad commit confirmed against the good one (measured), c1 measured good, c2
bad by identity (c3's configuration), then the options of c2 on c1's configuration:
{PRINTK_TIME} undecidable (the fault), {the test device} measured bad: the culprit is c2
and its option CONFIG_RTLAB_TESTDEV_HOG_MS."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.bisect.bisection import Bisector, Request
from rtlab.bisect.decide import StepPolicy
from rtlab.bisect.page import write_report
from rtlab.bisect.result import CONFIRM, FOUND, IDENTITY, MEASURED, OPTIONS
from rtlab.bisect.search import BAD, GOOD, UNDECIDABLE
from rtlab.bisect.step import Rack
from rtlab.lab.health import ERRORS_TAG_KEY, TAG_KEY
from rtlab.store import open_store
from rtlab.store.bisections import store_bisection, stored_steps
from rtlab.util import paths
from rtlab.vlab import control
from tests.bisect_repo import hog_suite, kernel_history

pytestmark = pytest.mark.vlab

PLACES = ("imx6q-01", "imx6q-02")
HOG = "CONFIG_RTLAB_TESTDEV_HOG_MS"
HARMLESS = "CONFIG_PRINTK_TIME"
# the test device moves the bulk of an emulated board's wake-ups, whose own tail is tens of
# ms (rtlab.bisect.testdev): the steps compare its p99, where the device's delays stand out
QUANTILE = 0.99
# In a make test of 2026-11-27 the good boots' p99 spread from 12 to 37 ms and the device's
# (30 ms) p99 lay beyond the 50 ms histogram: the confirmation was inconclusive after two
# rounds. A 40 ms device, a 100 ms histogram and up to three rounds give it room.
DEVICE_MS = 40
HISTOGRAM_US = 100_000
ROUNDS = 3
CLIENT = str(Path(sys.executable).parent / "labgrid-client")


@pytest.fixture(scope="module")
def lab_repo(tmp_path_factory) -> tuple[Path, list[str]]:
    repo = tmp_path_factory.mktemp("lab")
    return repo, kernel_history(repo, (
        ("CONFIG_HZ_1000=y\n", "rt: a 1000 Hz tick"),
        (f"{HARMLESS}=y\n{HOG}={DEVICE_MS}\n", "rt: printk times, and the test device"),
        ("# the last commit changes no option\n", "rt: a comment")), patches=False)


def forget_health(vlab) -> None:
    for place in PLACES:
        subprocess.run([CLIENT, "-x", vlab.coordinator_address, "-p", place, "set-tags",
                        f"{TAG_KEY}=", f"{ERRORS_TAG_KEY}="], capture_output=True, check=True)


@pytest.fixture(scope="module")
def bisection(vlab, lab_repo, tmp_path_factory):
    repo, commits = lab_repo
    out = tmp_path_factory.mktemp("bisect")
    suite = hog_suite(tmp_path_factory.mktemp("suite"), histogram_us=HISTOGRAM_US)
    faulted = []

    def before_step(index: int, kind: str, point) -> None:
        control.clear_faults(vlab)
        if kind == OPTIONS and point.options == frozenset({HARMLESS}):
            # both places' PDUs fail for this step: no boot of either point
            faulted.append(index)
            for place in PLACES:
                control.inject_fault(vlab, place, "pdu-error", times=0, code=503)

    forget_health(vlab)
    rack = Rack(env_file=paths.REPO_ROOT / "env" / "virtual.yaml",
                coordinator=vlab.coordinator_address, board_tag="qemu-imx6q",
                duration_s=3, suite=suite)
    try:
        result = Bisector(Request(repo=repo, good=commits[0], bad=commits[-1], board="imx6q",
                                  flavour="rt", kernel_flavour="preempt-rt",
                                  case="idle/1000us"),
                          rack, StepPolicy(rounds=ROUNDS, quantile=QUANTILE), out,
                          before_step=before_step).run()
    finally:
        control.clear_faults(vlab)
        forget_health(vlab)
    result.write(out)
    return result, commits, out, faulted


def test_the_bisection_names_the_commit_and_the_option(bisection):
    result, commits, _, _ = bisection
    assert result.status == FOUND, result.reason
    assert result.culprit.commit == commits[2]
    assert result.culprit.subject == "rt: printk times, and the test device"
    assert f"+{HOG}={DEVICE_MS}" in result.culprit.diff
    option = result.option
    assert (option.name, option.good, option.bad) == (HOG, "default", str(DEVICE_MS))


def test_every_step_was_decided_as_expected_and_the_fault_not_guessed(bisection):
    result, commits, _, faulted = bisection
    shown = [(s.kind, s.commit, s.options, s.outcome, s.decided_by) for s in result.steps]
    assert shown == [
        (CONFIRM, commits[3], (), BAD, MEASURED),
        ("commit", commits[1], (), GOOD, MEASURED),
        ("commit", commits[2], (), BAD, IDENTITY),
        (OPTIONS, commits[2], (HARMLESS,), UNDECIDABLE, MEASURED),
        (OPTIONS, commits[2], (HOG,), BAD, MEASURED),
    ], "\n".join(s.reason for s in result.steps)
    assert faulted == [4]
    undecided = result.steps[3]
    assert "every place failed" in undecided.reason and "HTTP 503" in undecided.reason
    assert undecided.boots == (0, 0)
    for step in (result.steps[0], result.steps[1], result.steps[4]):
        # both places measured both points in the step's round(s)
        assert step.boots[0] >= 2 and step.boots[1] >= 2 and step.board_s > 0
        assert step.confidence == 0.98
    assert result.steps[0].difference_us > 0 and result.steps[4].difference_us > 0


def test_the_report_page_and_the_store_hold_the_steps(bisection, tmp_path):
    result, commits, out, _ = bisection
    written = write_report(result, out / "report")
    page = written.html.read_text()
    assert commits[2][:12] in page and f"{HOG} (default → {DEVICE_MS})" in page
    assert page.count("<tr>") == len(result.steps) + 1
    assert "every place failed" in page
    store = open_store(f"sqlite:///{tmp_path / 'results.db'}")
    try:
        store_bisection(store, json.loads((out / "result.json").read_text()))
        steps = stored_steps(store, result.bisection_id)
    finally:
        store.close()
    assert [(s.step, s.outcome, s.decided_by) for s in steps] == [
        (s.index, s.outcome, s.decided_by) for s in result.steps]
