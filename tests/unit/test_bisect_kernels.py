"""A bisection's kernels built from source (rtlab.bisect.kernels.BuiltKernels), with a
stand-in for the compiler and for kconfig: each point built from its own commit's kernel/
folder and only once, an option step from the culprit's parent with its options in a
fragment, the test device on the command line and never in a fragment, another source
pin another kernel, and kconfig deciding which options a step applies. The real build and
kconfig run in `make test-kernel` (tests/kernel/test_bisect_built.py)."""

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rtlab.bisect import bisection, kernels, points
from rtlab.bisect.decide import StepPolicy
from rtlab.bisect.result import FOUND, IDENTITY, MEASURED
from rtlab.bisect.search import OptionSearch
from rtlab.kernel import spec as kernel_spec
from rtlab.kernel.config import merge_requests
from tests.bisect_repo import stand_in_rack

pytest_plugins = ["tests.bisect_repo"]

HOG = "CONFIG_RTLAB_TESTDEV_HOG_MS"
NO_HZ_FULL = "CONFIG_NO_HZ_FULL"
HZ_1000 = "CONFIG_HZ_1000"


class StandInBuild:
    """build_kernel's signature; writes the kernel.json a build leaves and remembers what
    each build was given."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def __call__(self, board, flavour, out_dir, *, kernel_dir, extra_fragments, jobs,
                 progress):
        self.calls.append({
            "tree": kernel_dir.parent.name,
            "fragment": (kernel_dir / "configs" / "rt.config").read_text(),
            "extra": [Path(f).read_text() for f in extra_fragments],
            "requests": {name: r.value for name, r in merge_requests([
                *kernel_spec.flavour(flavour, kernel_dir / "flavours.yaml").fragment_files(),
                *extra_fragments]).items()}})
        folder = out_dir / f"{board}-{flavour}"
        folder.mkdir(parents=True)
        (folder / "kernel.json").write_text(json.dumps({"built": len(self.calls)}))


def commit_all(repo: Path, message: str) -> str:
    for args in (["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                                "-m", message]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def stand_in_kconfig(kernel_dir: Path, extra: list[Path], scratch: Path) -> str:
    """kconfig, for the options of the lab repository: NO_HZ_FULL depends on HZ_1000
    (an invented dependency: olddefconfig drops it without)."""
    board = kernel_spec.board("imx6q", kernel_dir / "boards.yaml")
    flavour = kernel_spec.flavour("preempt-rt", kernel_dir / "flavours.yaml")
    values = {name: r.value for name, r in merge_requests(
        [*board.fragment_files(), *flavour.fragment_files(), *extra]).items()}
    if values.get(HZ_1000) != "y":
        values.pop(NO_HZ_FULL, None)
    return "".join(f"{name}={value}\n" for name, value in values.items() if value != "n")


def built(repo: Path, out: Path, build=None) -> kernels.BuiltKernels:
    return kernels.BuiltKernels(repo, "imx6q", "rt", "preempt-rt", out,
                                progress=lambda line: None, build=build or StandInBuild(),
                                kconfig=stand_in_kconfig)


def point(source: kernels.BuiltKernels, repo: Path, commit: str) -> points.Point:
    return points.Point(commit, points.configuration(repo, commit, "imx6q", "preempt-rt"),
                        source=source.identity(commit))


def test_a_commits_tree_keeps_its_fragments_lines_without_the_test_device(lab_repo, tmp_path):
    repo, commits = lab_repo
    tree = built(repo, tmp_path).tree(commits[2])
    lines = (tree / "configs" / "rt.config").read_text().splitlines()
    assert lines[2] == f"# test device, on the command line: {HOG}=20"
    assert lines[3] == f"{NO_HZ_FULL}=y"  # the lines after it keep their numbers
    requests = merge_requests([tree / "configs" / "rt.config"])
    assert HOG not in requests and requests[NO_HZ_FULL].line == 4


def test_each_kernel_is_built_once_from_its_commit_and_an_option_step_from_the_parent(
        lab_repo, tmp_path):
    repo, commits = lab_repo
    build = StandInBuild()
    source = built(repo, tmp_path, build)
    hog = point(source, repo, commits[2])
    first = source.kernel(hog)
    assert source.kernel(hog) == first
    # commit 4 only adds a comment: the same configuration and source, the same kernel
    assert source.kernel(point(source, repo, commits[3])) == first
    assert len(build.calls) == 1
    assert build.calls[0]["requests"] == {"CONFIG_PREEMPT_RT": "y", HZ_1000: "y",
                                          NO_HZ_FULL: "y"}
    assert build.calls[0]["extra"] == []

    # a commit that changes two kernel options and the test device
    fragment = repo / "kernel" / "configs" / "rt.config"
    fragment.write_text(fragment.read_text().replace("HOG_MS=20", "HOG_MS=30")
                        + "CONFIG_KASAN=y\nCONFIG_DEBUG_PREEMPT=y\n")
    culprit = commit_all(repo, "debug")
    before = points.configuration(repo, commits[3], "imx6q", "preempt-rt")
    after = points.configuration(repo, culprit, "imx6q", "preempt-rt")

    def option_step(*applied: str) -> points.Point:
        return points.Point(culprit, points.applied(before, after, frozenset(applied)),
                            options=frozenset(applied), source=source.identity(commits[3]))

    source.kernel(option_step("CONFIG_KASAN", HOG))
    # the parent's fragments (its device a comment), the step's kernel options in a
    # fragment of their own
    assert build.calls[1]["fragment"].splitlines()[2:4] == [
        f"# test device, on the command line: {HOG}=20", f"{NO_HZ_FULL}=y"]
    assert build.calls[1]["extra"] == ["CONFIG_KASAN=y\n"]
    # the test device alone: the parent's kernel, built already (the device is on the
    # command line), but another point
    hog_only = option_step(HOG)
    assert source.kernel(hog_only) == first
    assert hog_only.key != point(source, repo, commits[3]).key
    source.kernel(option_step("CONFIG_KASAN", "CONFIG_DEBUG_PREEMPT"))
    assert build.calls[2]["extra"] == ["CONFIG_DEBUG_PREEMPT=y\nCONFIG_KASAN=y\n"]
    assert len(build.calls) == 3
    assert source.built == [source.kernel_key(p) for p in (
        hog, option_step("CONFIG_KASAN"), option_step("CONFIG_KASAN", "CONFIG_DEBUG_PREEMPT"))]


def test_another_source_pin_is_another_kernel_of_the_same_configuration(lab_repo, tmp_path):
    repo, commits = lab_repo
    source = built(repo, tmp_path)
    (repo / "kernel" / "source.yaml").write_text("package: linux\nversion: '2'\n")
    pinned = commit_all(repo, "pin")
    before, after = point(source, repo, commits[3]), point(source, repo, pinned)
    assert points.config_key(before.config) == points.config_key(after.config)
    assert before.key != after.key
    # Debian's kernel does not depend on the pin: there, one key
    debian = kernels.DebianKernels("imx6q", "rt", "preempt-rt", tmp_path)
    assert (points.Point(commits[3], before.config, source=debian.identity(commits[3])).key
            == points.Point(pinned, after.config, source=debian.identity(pinned)).key)


def test_kconfig_decides_which_options_an_option_step_applies(lab_repo, tmp_path):
    repo, commits = lab_repo
    source = built(repo, tmp_path)
    before = points.configuration(repo, commits[0], "imx6q", "preempt-rt")
    after = points.configuration(repo, commits[2], "imx6q", "preempt-rt")
    changed = points.changed_options(before, after)
    assert changed == (HZ_1000, NO_HZ_FULL, HOG)
    resolve = source.resolver(commits[0], before, after, changed)
    assert resolve(frozenset({NO_HZ_FULL})) == frozenset()  # its dependency is not applied
    assert resolve(frozenset({HZ_1000})) == frozenset({HZ_1000})
    assert resolve(frozenset({HOG})) == frozenset({HOG})  # not kconfig's: always applied
    assert resolve(frozenset(changed)) == frozenset(changed)
    # the search through kconfig's answers: NO_HZ_FULL is named, tested with HZ_1000
    search = OptionSearch((NO_HZ_FULL, HOG, HZ_1000), resolve=resolve)
    steps = []
    while (applied := search.next()) is not None:
        steps.append(applied)
        search.record(applied, "bad" if NO_HZ_FULL in applied else "good")
    assert search.found().culprit == NO_HZ_FULL
    assert all(HZ_1000 in step for step in steps if NO_HZ_FULL in step)


def test_a_bisection_of_built_kernels_names_commit_and_option(lab_repo, tmp_path,
                                                                monkeypatch):
    """A stand-in rack whose boots are twice as late with NO_HZ_FULL in the kernel: the
    regression is a kernel option, not the test device, so only the built path finds it."""
    repo, commits = lab_repo
    rng = np.random.default_rng(5)
    build = StandInBuild()
    images: dict[Path, bool] = {}

    def image(board, flavour, debs, out_dir, progress, kernel_dir, extra_cmdline):
        sd = Path(out_dir) / "sdcard.img"
        images[sd] = NO_HZ_FULL in build.calls[json.loads(
            (kernel_dir / "kernel.json").read_text())["built"] - 1]["requests"]
        return type("Built", (), {"sd_image": sd})

    monkeypatch.setattr(kernels, "build_image", image)
    rack = stand_in_rack(monkeypatch, tmp_path, images.__getitem__, rng)
    request = bisection.Request(repo=repo, good=commits[0], bad=commits[3], board="imx6q",
                                flavour="rt", kernel_flavour="preempt-rt",
                                case="idle/1000us", source="build")
    source = built(repo, tmp_path / "out", build)
    result = bisection.Bisector(request, rack, StepPolicy(rounds=4), tmp_path / "out",
                                progress=lambda line: None, kernels=source).run()
    assert result.status == FOUND, result.reason
    assert result.source == "build"
    assert result.culprit.commit == commits[2]
    assert result.option.name == NO_HZ_FULL
    measured = [s for s in result.steps if s.decided_by == MEASURED]
    assert any(s.decided_by == IDENTITY for s in result.steps)
    # every kernel measured was built (the good point's too), and none twice
    assert len(source.built) == len(set(source.built))
    kernel_keys = {source.kernel_key(p) for p in [point(source, repo, c) for c in commits]}
    assert source.kernel_key(point(source, repo, commits[0])) in source.built
    assert set(source.built) <= kernel_keys | {s.key for s in measured}


@pytest.mark.parametrize("regression", ["source", "option"])
def test_a_commit_that_moves_the_source_too_has_its_options_tried_on_the_parents_first(
        lab_repo, tmp_path, monkeypatch, regression):
    """The culprit commit moves the source pin and adds two options. Its options are tried
    together on the parent's source first: where the regression is the new source's, they
    do not regress there, and the result names the commit and its source change, not an
    option (the option search's own premise, all options together are the bad kernel, does
    not hold); where it is an option's, the search goes on and names it."""
    repo, commits = lab_repo
    (repo / "kernel" / "source.yaml").write_text("package: linux\nversion: '2'\n")
    fragment = repo / "kernel" / "configs" / "rt.config"
    fragment.write_text(fragment.read_text() + "CONFIG_KASAN=y\nCONFIG_DEBUG_PREEMPT=y\n")
    culprit = commit_all(repo, "new source, debug options")
    rng = np.random.default_rng(11)
    build = StandInBuild()
    late: dict[Path, bool] = {}

    def image(board, flavour, debs, out_dir, progress, kernel_dir, extra_cmdline):
        sd = Path(out_dir) / "sdcard.img"
        number = json.loads((kernel_dir / "kernel.json").read_text())["built"]
        call = build.calls[number - 1]
        late[sd] = (call["tree"] == culprit[:12] if regression == "source"
                    else call["requests"].get("CONFIG_KASAN") == "y")
        return type("Built", (), {"sd_image": sd})

    monkeypatch.setattr(kernels, "build_image", image)
    rack = stand_in_rack(monkeypatch, tmp_path, late.__getitem__, rng)
    request = bisection.Request(repo=repo, good=commits[3], bad=culprit, board="imx6q",
                                flavour="rt", kernel_flavour="preempt-rt",
                                case="idle/1000us", source="build")
    result = bisection.Bisector(request, rack, StepPolicy(rounds=4), tmp_path / "out",
                                progress=lambda line: None,
                                kernels=built(repo, tmp_path / "out", build)).run()
    assert result.culprit.commit == culprit, result.reason
    assert result.status == FOUND, result.reason
    premise = result.steps[-1] if regression == "source" else next(
        s for s in result.steps if s.kind == "options")
    assert premise.options == ("CONFIG_DEBUG_PREEMPT", "CONFIG_KASAN")
    assert premise.outcome == ("good" if regression == "source" else "bad")
    if regression == "source":
        assert result.option is None
        assert "comes with its change of the source pin, patches or board files" in \
            result.reason
    else:
        assert result.option.name == "CONFIG_KASAN"
    # the option steps were built on the parent's tree
    assert {call["tree"] for call in build.calls[2:]} == {commits[3][:12]}


def test_turning_off_what_the_defconfig_turns_on_is_a_change_and_a_dropped_request_too(
        lab_repo, tmp_path):
    """``# CONFIG_X is not set`` is not the same configuration as a fragment that does not
    name X (the defconfig may turn it on); and an option step of a commit that stops
    requesting an option builds its parent's fragments without that request."""
    repo, commits = lab_repo
    fragment = repo / "kernel" / "configs" / "rt.config"
    fragment.write_text(fragment.read_text() + "# CONFIG_PRINTK is not set\n")
    off = commit_all(repo, "printk off")
    fragment.write_text(fragment.read_text().replace(f"{HZ_1000}=y\n", "")
                        + "CONFIG_KASAN=y\n")
    dropped = commit_all(repo, "no 1000 Hz request, kasan")
    config = {c: points.configuration(repo, c, "imx6q", "preempt-rt")
              for c in (commits[3], off, dropped)}
    assert points.changed_options(config[commits[3]], config[off]) == ("CONFIG_PRINTK",)
    assert points.config_key(config[commits[3]]) != points.config_key(config[off])
    assert points.changed_options(config[off], config[dropped]) == (HZ_1000, "CONFIG_KASAN")

    build = StandInBuild()
    source = built(repo, tmp_path, build)
    applied = frozenset({HZ_1000})
    step = points.Point(dropped, points.applied(config[off], config[dropped], applied),
                        options=applied, source=source.identity(off))
    assert HZ_1000 not in step.config
    source.kernel(step)
    [call] = build.calls
    assert HZ_1000 not in call["requests"] and call["extra"] == []
    assert f"# not requested by this step: {HZ_1000}=y" in call["fragment"]
    assert (source.tree(off) / "configs" / "rt.config").read_text().count(f"{HZ_1000}=y\n") == 1
    # kconfig has no say in a request taken out: applied, it holds
    resolve = source.resolver(off, config[off], config[dropped], ("CONFIG_KASAN", HZ_1000))
    assert resolve(applied) == applied
    assert resolve(frozenset({"CONFIG_KASAN"})) == frozenset({"CONFIG_KASAN"})
