"""kernel/boards.yaml and kernel/flavours.yaml: the repository's files load, and bad input
is refused with the file and line it is about."""

import textwrap
from pathlib import Path

import pytest

from rtlab.kernel import spec
from rtlab.kernel.spec import KernelSpecError, fragment_path, load_boards, load_flavours

BOARD = """\
imx6q:
  arch: arm
  cross_compile: arm-linux-gnueabihf-
  defconfig: imx_v6_v7_defconfig
  image: zImage
  dtbs: [nxp/imx/imx6q-sabrelite.dtb]
  cmdline: console=ttymxc1,115200
"""
FLAVOUR = """\
preempt-rt:
  description: RT
  thresholds: rt
  fragments: [a.config]
"""


@pytest.fixture
def kdir(tmp_path: Path) -> Path:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "a.config").write_text("CONFIG_A=y\n")
    (tmp_path / "configs" / "b.config").write_text("CONFIG_B=y\n")
    return tmp_path


def write(kdir: Path, name: str, text: str) -> Path:
    path = kdir / name
    path.write_text(textwrap.dedent(text))
    return path


def test_repository_boards_and_flavours():
    boards = load_boards()
    assert set(boards) == {"imx6q", "rpi3"}
    imx = boards["imx6q"]
    assert (imx.arch, imx.image, imx.defconfig) == ("arm", "zImage", "imx_v6_v7_defconfig")
    assert imx.dtb_paths == ("arch/arm/boot/dts/nxp/imx/imx6q-sabrelite.dtb",)
    assert imx.make_vars == ["ARCH=arm", "CROSS_COMPILE=arm-linux-gnueabihf-"]
    rpi = boards["rpi3"]
    assert (rpi.arch, rpi.image_path) == ("arm64", "arch/arm64/boot/Image")
    # the mini UART on the header pins, the console the image and its getty use
    assert "console=ttyS1,115200" in rpi.full_cmdline
    flavours = load_flavours()
    assert {name: f.thresholds for name, f in flavours.items()} == {
        "preempt-none": "std", "preempt-voluntary": "std", "preempt": "std",
        "preempt-rt": "rt", "preempt-rt-hardened": "rt"}
    for flavour in flavours.values():
        assert all(path.is_file() for path in flavour.fragment_files())
    assert "hardening.config" in flavours["preempt-rt-hardened"].fragments
    # what the pipeline's build stage builds for each thresholds flavour
    assert {f.thresholds: name for name, f in flavours.items() if f.pipeline} == {
        "std": "preempt-voluntary", "rt": "preempt-rt"}


def test_good_files(kdir):
    boards = load_boards(write(kdir, "boards.yaml", BOARD + "  isolcpus: nohz,domain,2-3\n"
                               "  fragments: [b.config]\n"))
    assert boards["imx6q"].full_cmdline == "console=ttymxc1,115200 isolcpus=nohz,domain,2-3"
    assert boards["imx6q"].fragment_files() == (kdir / "configs" / "b.config",)
    flavours = load_flavours(write(kdir, "flavours.yaml", FLAVOUR))
    assert flavours["preempt-rt"].fragments == ("a.config",)


@pytest.mark.parametrize(("text", "line", "words"), [
    (BOARD + "  colour: blue\n", 8, ["unknown key 'colour'", "valid: arch"]),
    (BOARD.replace("arch: arm", "arch: x86"), 2, ["'arch' must be a kernel ARCH", "x86"]),
    (BOARD.replace("image: zImage", "image: Image.gz"), 5, ["image target of arm"]),
    (BOARD.replace("cross_compile: arm-linux-gnueabihf-", "cross_compile: arm-gcc"), 3,
     ["ending in '-'"]),
    (BOARD.replace("[nxp/imx/imx6q-sabrelite.dtb]", "[/boot/x.dtb]"), 6, ["DTB paths"]),
    (BOARD.replace("[nxp/imx/imx6q-sabrelite.dtb]", "nxp/x.dtb"), 6, ["list of DTB"]),
    (BOARD.replace("  defconfig: imx_v6_v7_defconfig\n", ""), 2, ["missing 'defconfig'"]),
    (BOARD + "  fragments: [a.config, nope.config]\n", 8,
     ["no fragment 'nope.config'", "there are: a.config, b.config"]),
    (BOARD + "  fragments: [a.config, a.config]\n", 8, ["listed twice"]),
    (BOARD + "  isolcpus: all\n", 8, ["'isolcpus' must be a CPU list"]),
    (BOARD.replace("115200", "115200 isolcpus=1"), 7, ["put isolcpus in"]),
    (BOARD + "  arch: arm64\n", 8, ["invalid YAML", "duplicate"]),
    ("- imx6q\n", 1, ["expected a mapping of board names"]),
    ("iMX6Q:\n  arch: arm\n", 1, ["board name must be lower-case"]),
])
def test_bad_boards(kdir, text, line, words):
    path = write(kdir, "boards.yaml", text)
    with pytest.raises(KernelSpecError) as caught:
        load_boards(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}:"), message
    for word in words:
        assert word in message


@pytest.mark.parametrize(("text", "line", "words"), [
    (FLAVOUR.replace("thresholds: rt", "thresholds: realtime"), 3,
     ["thresholds.yaml flavour (std, rt)"]),
    (FLAVOUR.replace("[a.config]", "[]"), 4, ["non-empty list"]),
    (FLAVOUR.replace("[a.config]", "[a]"), 4, ["fragment file names (*.config)"]),
    (FLAVOUR.replace("[a.config]", "\n    - b.config\n    - c.config"), 6,
     ["no fragment 'c.config'"]),
    (FLAVOUR.replace("  description: RT\n", ""), 2, ["missing 'description'"]),
    (FLAVOUR + "  fragment: [b.config]\n", 5, ["unknown key 'fragment'"]),
    (FLAVOUR.replace("description: RT", "description: 3"), 2, ["'description' must be"]),
    (FLAVOUR + "  pipeline: yes please\n", 5, ["'pipeline' must be true or false"]),
    (FLAVOUR + "  pipeline: true\n" + FLAVOUR.replace("preempt-rt:", "rt-hardened:")
     + "  pipeline: true\n", 10,
     ["'rt-hardened' and 'preempt-rt' are both 'pipeline: true' for thresholds flavour 'rt'"]),
])
def test_bad_flavours(kdir, text, line, words):
    path = write(kdir, "flavours.yaml", text)
    with pytest.raises(KernelSpecError) as caught:
        load_flavours(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}:"), message
    for word in words:
        assert word in message


def test_unknown_names_list_the_valid_ones(kdir):
    with pytest.raises(KernelSpecError, match=r"no board 'imx8'.*valid: imx6q, rpi3"):
        spec.board("imx8")
    with pytest.raises(KernelSpecError, match=r"no flavour 'rt'.*valid: preempt-none, "):
        spec.flavour("rt")
    with pytest.raises(KernelSpecError, match=r"no fragment 'x.config'.*there are: "
                                              r"a.config, b.config"):
        fragment_path("x.config", kdir / "configs")
    with pytest.raises(KernelSpecError, match="no fragment '../boards.yaml'"):
        fragment_path("../boards.yaml", kdir / "configs")
