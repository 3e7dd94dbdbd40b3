"""The image builder's side of kernels built from source (rtlab kernel build): kernel.json
of schema rtlab.kernel/2 with `source: build` is read and checked, its files are laid out
as a Debian kernel package's, and drivers the kernel has built in count as present
instead of being looked for as modules."""

import hashlib
import json
from pathlib import Path

import pytest

from rtlab.artifacts.kernel_info import read_kernel_info
from rtlab.artifacts.manifest import SCHEMA_VERSION, read_image_manifest
from rtlab.image import build as image
from rtlab.image import rootfs
from rtlab.platform.boards import BOARD_MODELS
from rtlab.platform.debian import DebPackage

RELEASE = "6.12.100-rt15"
MODEL = BOARD_MODELS["imx6q"]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def built_kernel(folder: Path, *, board: str = "imx6q", flavour: str = "rt") -> dict:
    """A kernel folder as `rtlab kernel build` writes it (files are stand-ins)."""
    contents = {
        "zImage": b"zimage",
        "dtbs/nxp/imx/imx6q-sabrelite.dtb": b"dtb",
        "config": b"CONFIG_PREEMPT_RT=y\nCONFIG_HZ=100\n# CONFIG_MODULES is not set\n",
        "modules.builtin": "".join(
            f"kernel/drivers/x/{name}.ko\n" for name in
            ("gpio-mxc", "sdhci-esdhc-imx", "imx2_wdt", "crc32c_generic", "ext4", "smsc",
             "fec")).encode(),
    }
    for name, data in contents.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)

    def fact(name: str) -> dict:
        return {"file": name, "sha256": sha(contents[name]), "size": len(contents[name])}

    info = {
        "schema": "rtlab.kernel/2", "source": "build", "board": board,
        "flavour": flavour, "kernel_flavour": "preempt-rt", "arch": "armhf",
        "package": f"linux-image-{RELEASE}", "version": "6.12.100-rt15+rtlab.0123",
        "release": RELEASE, "preemption": "PREEMPT_RT", "hz": 100,
        "cmdline": "console=ttymxc1,115200",
        "files": {"image": fact("zImage"), "dtbs": [fact("dtbs/nxp/imx/imx6q-sabrelite.dtb")],
                  "config": fact("config"), "modules": None,
                  "builtin": [fact("modules.builtin")]},
        "sha256": "a" * 64,
        "build": {"config_sha256": sha(contents["config"]), "fragments": []},
    }
    (folder / "kernel.json").write_text(json.dumps(info))
    return info


def test_a_built_kernel_is_read_and_its_files_checked(tmp_path):
    built_kernel(tmp_path)
    info = image._read_kernel_info(tmp_path, "imx6q", "rt")
    assert info.source == "build" and info.built

    with pytest.raises(image.ImageError, match="imx6q-preempt-rt .judged as rt., not of "
                                               "imx6q-std"):
        image._read_kernel_info(tmp_path, "imx6q", "std")

    (tmp_path / "zImage").write_bytes(b"another kernel")
    with pytest.raises(image.ImageError, match="zImage is missing or does not match"):
        image._read_kernel_info(tmp_path, "imx6q", "rt")


def test_a_debian_kernel_json_of_schema_1_is_still_read(tmp_path):
    deb = tmp_path / "linux-image.deb"
    deb.write_bytes(b"deb")
    (tmp_path / "kernel.json").write_text(json.dumps({
        "schema": "rtlab.kernel/1", "board": "imx6q", "flavour": "rt",
        "package": "linux-image-6.1.0-1-rt-armmp", "version": "6.1.1-1", "deb": deb.name,
        "sha256": sha(b"deb")}))
    assert image._read_kernel_info(tmp_path, "imx6q", "rt").source == "debian"


def test_built_in_drivers_count_as_present(tmp_path):
    built_kernel(tmp_path / "kernel")
    work = tmp_path / "work"
    info = read_kernel_info(tmp_path / "kernel")
    kernel = image._lay_out_built_kernel(tmp_path / "kernel", info, MODEL, work / "kernel")
    assert (kernel.root / "boot" / f"vmlinuz-{RELEASE}").read_bytes() == b"zimage"
    assert (kernel.root / "usr/lib" / f"linux-image-{RELEASE}" / MODEL.dtb).read_bytes() \
        == b"dtb"
    assert (kernel.root / "boot" / f"config-{RELEASE}").is_file()

    builder = rootfs.RootfsBuilder(MODEL, "rt", None, work / "rootfs", work / "boot")  # type: ignore[arg-type]
    for folder in ("etc/rtlab", f"lib/modules/{RELEASE}"):  # as make_rootfs leaves them
        (builder.rootfs / folder).mkdir(parents=True)
    modules, builtin, absent_nics = builder.install_modules(kernel, RELEASE)
    assert modules == []
    assert builtin == [rootfs._module_name(m) for m in MODEL.modules]
    # the physical board's PHY driver is in neither: the manifest says so, no error
    assert absent_nics == [rootfs._module_name(m) for m in MODEL.nic_modules]
    # /init skips comment lines: nothing to insmod, and the image says why
    listed = (builder.rootfs / "etc/rtlab/modules").read_text().splitlines()
    assert all(line.startswith("# built in: ") for line in listed), listed


def test_a_module_neither_built_nor_built_in_is_an_error(tmp_path):
    built_kernel(tmp_path / "kernel")
    (tmp_path / "kernel/modules.builtin").write_text("kernel/fs/ext4/ext4.ko\n")
    work = tmp_path / "work"
    info = read_kernel_info(tmp_path / "kernel")
    kernel = image._lay_out_built_kernel(tmp_path / "kernel", info, MODEL, work / "kernel")
    builder = rootfs.RootfsBuilder(MODEL, "rt", None, work / "rootfs", work / "boot")  # type: ignore[arg-type]
    for folder in ("etc/rtlab", f"lib/modules/{RELEASE}"):  # as make_rootfs leaves them
        (builder.rootfs / folder).mkdir(parents=True)
    with pytest.raises(image.ImageError, match="gpio_mxc .wanted by board imx6q. is not in"):
        builder.install_modules(kernel, RELEASE)


def test_the_manifest_reader_checks_the_kernel_source(tmp_path):
    manifest = {"schema": SCHEMA_VERSION, "image_id": "0123456789abcdef",
                "board": "imx6q", "flavour": "rt",
                "kernel": {"package": "p", "version": "v", "release": RELEASE,
                           "source": "build", "build": {"config_sha256": "c"}},
                "sd_image": {"sha256": "0" * 64}}
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest, indent=1))
    assert read_image_manifest(path)["kernel"]["build"] == {"config_sha256": "c"}
    manifest["kernel"]["source"] = "ppa"
    path.write_text(json.dumps(manifest, indent=1))
    with pytest.raises(ValueError, match="'source' must be 'debian' or 'build'"):
        read_image_manifest(path)
    del manifest["kernel"]["build"]
    manifest["kernel"]["source"] = "build"
    path.write_text(json.dumps(manifest, indent=1))
    with pytest.raises(ValueError, match="lacks 'build'"):
        read_image_manifest(path)


def test_kernel_packages_of_a_built_kernel_are_not_asked_of_apt():
    manifest = {"packages": [{"name": "busybox-static", "version": "1"}],
                "kernel": {"package": f"linux-image-{RELEASE}", "version": "x",
                           "source": "build"}}
    assert image._recorded_packages(manifest) == {"busybox-static": "1"}
    manifest["kernel"]["source"] = "debian"
    assert f"linux-image-{RELEASE}" in image._recorded_packages(manifest)


def test_debpackage_shape_is_what_the_builder_expects(tmp_path):
    # the builder reads name, version and root of the laid-out kernel
    built_kernel(tmp_path / "kernel")
    info = read_kernel_info(tmp_path / "kernel")
    kernel = image._lay_out_built_kernel(tmp_path / "kernel", info, MODEL, tmp_path / "k")
    assert isinstance(kernel, DebPackage)
    assert kernel.name.removeprefix("linux-image-") == RELEASE
