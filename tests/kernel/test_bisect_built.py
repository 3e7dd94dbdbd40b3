"""A regression bisected on the virtual rack with every point's kernel built from its own
commit (``rtlab bisect run --kernel-source build``): the repository's kernel/ folder
(fragments, source pin, patches) and commits after it, both i.MX6Q places measuring
(3-s runs, up to three rounds, p99).

    good ── c1 no printk times ── c2 SysRq off by default + the test device ── c3 comment

Expected: the bad commit's kernel (built) confirmed against the good one's (built), c1's
kernel built and measured good, c2 bad by identity (c3's kernel), then c2's options on
c1's configuration: {SysRq} is the bad commit's kernel without the device (built already,
not built again), measured good, and the culprit is the test device. Three kernels are
compiled, the first from cold (8-15 min on two cores, a minute or two with the build
folder of an earlier run), the others incrementally with ccache.

kconfig's part in the option search is checked on the same tree: an option whose
dependency is not applied is not applied (BOOTPARAM_HUNG_TASK_PANIC needs
DETECT_HUNG_TASK, off in the good configuration).

`make test-kernel`, not `make test`."""

import json

import pytest

from rtlab.bisect.bisection import Bisector, Request
from rtlab.bisect.decide import StepPolicy
from rtlab.bisect.kernels import BuiltKernels
from rtlab.bisect.page import write_report
from rtlab.bisect.result import CONFIRM, FOUND, IDENTITY, MEASURED, OPTIONS
from rtlab.bisect.search import BAD, GOOD
from rtlab.bisect.step import Rack
from rtlab.util import paths
from tests.bisect_repo import hog_suite, kernel_history

pytestmark = pytest.mark.vlab

HOG = "CONFIG_RTLAB_TESTDEV_HOG_MS"
SYSRQ = "CONFIG_MAGIC_SYSRQ_DEFAULT_ENABLE"
HUNG = "CONFIG_DETECT_HUNG_TASK"
HUNG_PANIC = "CONFIG_BOOTPARAM_HUNG_TASK_PANIC"
# the built lean kernel's emulated p99 is 23-32 ms, and with the device it lay beyond a
# 50 ms histogram on every boot: a comparison of an overflowing quantile came out
# inconclusive (2026-11-27). 100 ms holds both; three rounds give the steps room.
HISTOGRAM_US = 100_000
DEVICE_MS = 40


@pytest.fixture(scope="module")
def lab_repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("lab")
    return repo, kernel_history(repo, (
        ("# CONFIG_PRINTK_TIME is not set\n", "rt: no printk times"),
        (f"{SYSRQ}=0x0\n{HOG}={DEVICE_MS}\n", "rt: SysRq off by default, and the test device"),
        ("# the last commit changes no option\n", "rt: a comment")))


@pytest.fixture(scope="module")
def bisection(vlab, lab_repo, tmp_path_factory):
    repo, commits = lab_repo
    out = tmp_path_factory.mktemp("bisect")
    request = Request(repo=repo, good=commits[0], bad=commits[-1], board="imx6q",
                      flavour="rt", kernel_flavour="preempt-rt", case="idle/1000us",
                      source="build")
    kernels = BuiltKernels(repo, "imx6q", "rt", "preempt-rt", out)
    rack = Rack(env_file=paths.REPO_ROOT / "env" / "virtual.yaml",
                coordinator=vlab.coordinator_address, board_tag="qemu-imx6q", duration_s=3,
                suite=hog_suite(tmp_path_factory.mktemp("suite"), histogram_us=HISTOGRAM_US))
    result = Bisector(request, rack, StepPolicy(rounds=3, quantile=0.99), out,
                      kernels=kernels).run()
    result.write(out)
    return result, commits, kernels, out


def test_the_built_bisection_names_the_commit_and_the_option(bisection):
    result, commits, _, _ = bisection
    assert result.status == FOUND, result.reason
    assert result.source == "build"
    assert result.culprit.commit == commits[2]
    option = result.option
    assert (option.name, option.good, option.bad) == (HOG, "default", str(DEVICE_MS))
    shown = [(s.kind, s.commit, s.options, s.outcome, s.decided_by) for s in result.steps]
    assert shown == [
        (CONFIRM, commits[3], (), BAD, MEASURED),
        ("commit", commits[1], (), GOOD, MEASURED),
        ("commit", commits[2], (), BAD, IDENTITY),
        (OPTIONS, commits[2], (SYSRQ,), GOOD, MEASURED),
    ], "\n".join(s.reason for s in result.steps)


def test_each_kernel_was_built_once_from_its_commit_and_booted(bisection):
    result, commits, kernels, out = bisection
    # good, bad (c3 = c2), c1; the option step's kernel is the bad one without the device
    assert len(kernels.built) == 3 == len(set(kernels.built))
    infos = {key: json.loads((out / "kernels" / key / "imx6q-preempt-rt" / "kernel.json")
                             .read_text()) for key in kernels.built}
    configs = [info["build"]["fragments"] for info in infos.values()]
    assert all(any("rt-no-cpuidle.config" in f["name"] for f in c) for c in configs)
    # what booted is the kernel built for the step: the step's records carry its release
    # and its configuration (/proc/config.gz), the test device only on the command line
    records = [json.loads(path.read_text())
               for path in (out / "steps").glob("step-2/round-*/*/*-step/results/*.json")]
    assert records
    for record in records:
        system = record["system"]
        assert record["image"]["kernel"]["source"] == "build"
        assert system["kernel_config"].get("CONFIG_PRINTK_TIME") in (None, "n")
        assert system["kernel_config"].get(SYSRQ) == "0x1"
        assert "rtlab.testdev_hog" not in system["cmdline"]
    confirm = [json.loads(path.read_text())
               for path in (out / "steps").glob("step-1/round-*/*/*-step/results/*.json")]
    assert confirm and all(r["system"]["kernel_config"].get(SYSRQ) == "0x0"
                           and f"rtlab.testdev_hog={DEVICE_MS}" in r["system"]["cmdline"]
                           for r in confirm)
    page = write_report(result, out / "report").html.read_text()
    assert f"{HOG} (default → {DEVICE_MS})" in page


def test_kconfig_applies_an_option_only_with_its_dependency(lab_repo, tmp_path):
    repo, commits = lab_repo
    kernels = BuiltKernels(repo, "imx6q", "rt", "preempt-rt", tmp_path)
    after = {HUNG: "y", HUNG_PANIC: "y"}
    resolve = kernels.resolver(commits[0], {}, after, (HUNG, HUNG_PANIC))
    assert resolve(frozenset({HUNG_PANIC})) == frozenset()
    assert resolve(frozenset({HUNG})) == frozenset({HUNG})
    assert resolve(frozenset({HUNG, HUNG_PANIC})) == frozenset({HUNG, HUNG_PANIC})
