"""`rtlab kernel config` on the real kernel tree (the pinned, RT-patched Debian source the
bootstrap prepares): the i.MX6Q preempt-rt configuration really gets PREEMPT_RT, the Pi
3's lean board fragment holds under the pipeline's flavours, and a
fragment whose option cannot hold is refused with the line that asked for it and the
dependency Kconfig says is unmet. A few make runs of seconds each; no compile."""

import re
from pathlib import Path

import pytest

from rtlab import cli
from rtlab.kernel import spec
from rtlab.kernel.config import configure
from rtlab.kernel.source import SourceTree, prepare_source
from rtlab.util import paths

UNMET = Path(__file__).resolve().parents[1] / "data" / "kernel" / "unmet-dependency.config"


@pytest.fixture(scope="module")
def tree() -> SourceTree:
    # the bootstrap's kernel-source step made it; instant when it is there
    return prepare_source(None, paths.kernel_cache_dir(), progress=lambda message: None)


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    # not the default build folder: a kernel build there must not lose its .config to a test
    return tmp_path_factory.mktemp("kernel-build")


def test_imx6q_preempt_rt_gets_preempt_rt(tree, build_dir):
    assert tree.version.endswith("-rt15") and "0035-ARM-Allow-to-enable-RT.patch" in tree.patches
    result = configure(tree, build_dir, spec.board("imx6q"), spec.flavour("preempt-rt"),
                       progress=lambda message: None)
    assert result.preemption_model == "PREEMPT_RT"
    requests = {r.option: r for r in result.requests}
    assert requests["CONFIG_PREEMPT_RT"].value == "y"
    assert requests["CONFIG_PREEMPT_RT"].fragment.name == "preempt-rt.config"
    assert re.search(r"^CONFIG_PREEMPT_RT=y$", result.config.read_text(), re.M)
    names = [f.path.name for f in result.fragments]
    assert names[0] == "imx6q-lean.config" and names[1] == "preempt-rt.config"
    assert all(re.fullmatch(r"[0-9a-f]{64}", f.sha256) for f in result.fragments)


def test_rpi3_lean_board_fragment_holds_under_every_pipeline_flavour(tree, tmp_path):
    # the lean fragment's options must survive the flavours the pipeline builds (a dropped
    # one is an error), and it must leave no module or foreign platform in the config
    for flavour, model in (("preempt-rt", "PREEMPT_RT"), ("preempt-voluntary", "VOLUNTARY")):
        result = configure(tree, tmp_path / flavour, spec.board("rpi3"), spec.flavour(flavour),
                           progress=lambda message: None)
        names = [f.path.name for f in result.fragments]
        assert names[:2] == ["rpi3-lean.config", f"{flavour}.config"], names
        text = result.config.read_text()
        assert "# CONFIG_MODULES is not set" in text.splitlines()
        assert re.search(r"^CONFIG_ARCH_BCM2835=y$", text, re.M)
        assert not re.search(r"^CONFIG_ARCH_(TEGRA|QCOM|RENESAS|ROCKCHIP|MEDIATEK)=y$", text, re.M)
        for driver in ("MMC_BCM2835", "BCM2835_WDT", "USB_DWC2", "USB_NET_CDCETHER"):
            assert re.search(rf"^CONFIG_{driver}=y$", text, re.M), driver
        assert result.preemption_model == model


def test_an_unmet_dependency_is_an_error_with_its_reason(tree, build_dir, capsys):
    line = next(number for number, text in enumerate(UNMET.read_text().splitlines(), 1)
                if text.startswith("CONFIG_TRANSPARENT_HUGEPAGE=y"))
    kconfig_lines = (tree.path / "mm" / "Kconfig").read_text().splitlines()
    defined = next(number for number, text in enumerate(kconfig_lines, 1)
                   if text.strip() == "menuconfig TRANSPARENT_HUGEPAGE")
    code = cli.main(["kernel", "config", "--board", "imx6q", "--flavour", "preempt-rt",
                     "--build-dir", str(build_dir), "--fragment", str(UNMET)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert (f"tests/data/kernel/unmet-dependency.config:{line}: CONFIG_TRANSPARENT_HUGEPAGE=y "
            "requested" in err), err
    assert (f"mm/Kconfig:{defined + 2}: depends on HAVE_ARCH_TRANSPARENT_HUGEPAGE [=n] && "
            "!PREEMPT_RT [=y]" in err), err
    assert "1 of " in err and "requested option(s) not in the final" in err
