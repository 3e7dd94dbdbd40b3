"""A campaign through the pipeline's stages (rtlab.campaign.stages) without a rack or a
compiler: which kernel each variant gets and how it is labelled, the order its runs are
measured in, the execution's id, and what narrowing a campaign may change."""

import json
import os
from pathlib import Path

import pytest

from rtlab.artifacts.identity import RUN_VARIABLE
from rtlab.artifacts.kernel_info import FILE_NAME as KERNEL_INFO
from rtlab.artifacts.kernel_info import KernelInfo, write_kernel_info
from rtlab.campaign import stages
from rtlab.campaign.spec import load_campaign
from rtlab.kernel.build import BuildResult
from rtlab.kernel.debian import KernelArtifact
from rtlab.kernel.spec import fragment_path


def fake_kernel(folder: Path, **facts) -> tuple[Path, KernelInfo]:
    """A kernel folder with a kernel.json that says what its source needs (the files are
    not there: nothing here builds an image)."""
    folder.mkdir(parents=True)
    built = facts["source"] == "build"
    info = KernelInfo(package="linux-image-6.12-rt", version="6.12-1", sha256="0" * 64,
                      **({"release": "6.12-rt", "cmdline": "console=ttymxc1", "files": {},
                          "build": {}} if built else {"deb": "x.deb"}),
                      **facts)
    write_kernel_info(folder, info)
    return folder, info


@pytest.fixture
def calls(monkeypatch):
    """The kernel stage's two sources, recording what each variant asked of them."""
    seen: list[tuple] = []

    def fetch(board, flavour, cache, out, progress):
        seen.append(("debian", board, flavour))
        folder, info = fake_kernel(out / f"{board}-{flavour}", board=board, flavour=flavour,
                                   source="debian")
        return KernelArtifact(folder=folder, deb=folder / "x.deb", info=info)

    def build(board, flavour, out, *, build_dir=None, extra_fragments=(), progress=print):
        seen.append(("build", board, flavour, build_dir, tuple(extra_fragments)))
        folder, info = fake_kernel(out / f"{board}-{flavour}", board=board, flavour="rt",
                                   kernel_flavour=flavour, source="build")
        return BuildResult(folder=folder, info=info)

    monkeypatch.setattr(stages, "fetch_kernel", fetch)
    monkeypatch.setattr("rtlab.kernel.build.build_kernel", build)
    return seen


def test_each_variant_gets_its_kernel_labelled_with_its_identity(tmp_path, calls):
    campaign = load_campaign("hardening")
    found = stages.provide_kernels(campaign, "imx6q", tmp_path, progress=lambda _: None)
    assert found == {"preempt-rt": tmp_path / "kernel/preempt-rt/imx6q-rt",
                     "preempt-rt-hardened": tmp_path / "kernel/preempt-rt-hardened/imx6q-rt"}
    plain, hardened = calls
    # the plain flavour builds where `rtlab kernel build` does; a variant with extra
    # fragments in a folder of its own, so that neither rebuilds the other's objects
    assert plain == ("build", "imx6q", "preempt-rt", None, ())
    assert hardened[:3] == ("build", "imx6q", "preempt-rt")
    assert hardened[3].name == "imx6q-preempt-rt-hardened"
    assert hardened[4] == (fragment_path("hardening.config"),)
    info = json.loads((found["preempt-rt-hardened"] / KERNEL_INFO).read_text())
    assert info["variant"] == {"name": "preempt-rt-hardened", "campaign": "hardening",
                               "source": "build", "kernel_flavour": "preempt-rt",
                               "fragments": ["hardening.config"], "debian": None,
                               "thresholds": "preempt-rt-hardened"}
    assert info["provided"] == {"action": "build",
                                "reason": "campaign hardening: variant preempt-rt-hardened"}
    # nothing of the build's temporary folders is left beside the kernels
    assert sorted(p.name for p in (tmp_path / "kernel").iterdir()) == [
        "preempt-rt", "preempt-rt-hardened"]
    assert [p.name for p in (tmp_path / "kernel" / "preempt-rt").iterdir()] == ["imx6q-rt"]


def test_debian_variants_take_debians_packages(tmp_path, calls):
    found = stages.provide_kernels(load_campaign("debian"), "rpi3", tmp_path,
                                   progress=lambda _: None)
    assert calls == [("debian", "rpi3", "std"), ("debian", "rpi3", "rt")]
    info = json.loads((found["debian-rt"] / KERNEL_INFO).read_text())
    assert info["variant"]["source"] == "debian" and info["variant"]["thresholds"] == "rt"
    assert found["debian-std"] == tmp_path / "kernel/debian-std/rpi3-std"


def test_images_need_the_kernels_first(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no kernel of variant debian-std for rpi3 "
                                                r"\(rtlab campaign kernels first\)"):
        stages.build_images(load_campaign("debian"), "rpi3", tmp_path,
                            progress=lambda _: None)


def test_runs_alternate_so_that_a_drift_falls_on_every_variant():
    campaign = load_campaign("preemption").narrowed(repeat=3)
    order = [(repeat, variant.name) for repeat, variant in stages.order(campaign)]
    names = list(campaign.variants)
    assert order == ([(1, n) for n in names] + [(2, n) for n in reversed(names)]
                     + [(3, n) for n in names])


def test_the_execution_id(monkeypatch):
    monkeypatch.delenv(RUN_VARIABLE, raising=False)
    monkeypatch.delenv("CI_PIPELINE_ID", raising=False)
    assert stages.campaign_run_id("hardening", "mine") == "mine"
    assert stages.campaign_run_id("hardening").startswith("hardening:2")
    monkeypatch.setenv("CI_PIPELINE_ID", "4711")
    # every job of the pipeline shares it
    assert stages.campaign_run_id("hardening") == "gitlab:4711"
    monkeypatch.setenv(RUN_VARIABLE, "set-by-hand")
    assert stages.campaign_run_id("hardening") == "set-by-hand"


def test_a_campaign_is_narrowed_only_to_what_its_file_names():
    campaign = load_campaign("hardening")
    short = campaign.narrowed(boards=["rpi3"], scenarios=["idle", "cpu100"],
                              intervals_us=[1000], duration_s=5, repeat=1)
    assert (short.boards, short.scenarios, short.intervals_us, short.duration_s,
            short.repeat) == (("rpi3",), ("idle", "cpu100"), (1000,), 5, 1)
    assert short.cases() == "idle/1000us,cpu100/1000us"
    with pytest.raises(ValueError, match=r"scenarios memory not in the campaign"):
        campaign.narrowed(scenarios=["idle", "memory"])
    with pytest.raises(ValueError, match=r"duration_s must be at least 1"):
        campaign.narrowed(duration_s=0)


def test_every_shipped_campaign_checks(capsys):
    from rtlab import cli

    assert cli.main(["campaign", "check"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["campaigns/debian.yaml",
                                                    "campaigns/hardening.yaml",
                                                    "campaigns/preemption.yaml"]
    assert all(": valid; " in line for line in out)


def test_the_after_script_finds_every_state_file_below_a_campaigns_test_folder(tmp_path,
                                                                                capsys):
    from rtlab import cli

    board = tmp_path / "test" / "rpi3"
    for variant in ("debian-std-1", "debian-rt-1"):
        (board / variant).mkdir(parents=True)
        (board / variant / "reservation.json").write_text('{"schema": "something/1"}')
    # neither is a reservation: refused, each by name (a real one is released the same way)
    assert cli.main(["reservation", "release", str(board)]) == 2
    err = capsys.readouterr().err
    for variant in ("debian-std-1", "debian-rt-1"):
        assert f"{board / variant / 'reservation.json'}" in err


def test_every_run_of_a_campaigns_ci_job_is_a_run_of_its_own(monkeypatch, tmp_path):
    """One CI job measures every variant and repeat on its board: without a part of their
    own their records would be one run in the store (one image, one kernel)."""
    from rtlab.run import runner

    monkeypatch.setenv("CI_PIPELINE_ID", "77")
    monkeypatch.setenv("CI_JOB_ID", "901")
    monkeypatch.delenv(runner.RUN_PART_VARIABLE, raising=False)
    assert runner.run_id("rpi3-01") == "gitlab:77:901:rpi3-01"
    seen = []

    def fake_run_suite(**kwargs):
        seen.append((runner.run_id("rpi3-01"), os.environ[RUN_VARIABLE]))
        return runner.RunOutcome("rpi3-01", 0, None, tmp_path, None)

    monkeypatch.setattr(runner, "run_suite", fake_run_suite)
    campaign = load_campaign("debian").narrowed(repeat=2)
    for variant in campaign.variants.values():
        image = stages.image_folder(tmp_path, variant, "rpi3") / "sdcard.img"
        image.parent.mkdir(parents=True)
        image.write_bytes(b"")
    rack = stages.Rack(env_file=tmp_path / "env.yaml", coordinator="x:1", boards=1)
    stages.run_tests(campaign, "rpi3", tmp_path, rack, "gitlab:77", progress=lambda _: None)
    assert seen == [("gitlab:77:901:rpi3-01:debian-std-1", "gitlab:77"),
                    ("gitlab:77:901:rpi3-01:debian-rt-1", "gitlab:77"),
                    ("gitlab:77:901:rpi3-01:debian-rt-2", "gitlab:77"),
                    ("gitlab:77:901:rpi3-01:debian-std-2", "gitlab:77")]
    # and afterwards the environment is as it was
    assert runner.RUN_PART_VARIABLE not in os.environ and RUN_VARIABLE not in os.environ
