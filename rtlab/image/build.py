"""SD card images for the virtual boards, built from Debian packages (or a kernel the build
stage made), and rebuilt only when an input changed.

The image is what a real board would get flashed (:mod:`.sdcard`), holding what the board
runs (:mod:`.rootfs`). This module decides whether there is anything to build: the inputs,
the builder's own code among them, go into the manifest, and an image whose inputs and
packages are unchanged is reused rather than rebuilt, since the same inputs would give the
same bytes. A build happens in a work folder beside the result and is moved into place only
when complete, the manifest last, so a killed build never leaves an image that looks
finished.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import attrs

from rtlab.artifacts import kconfig
from rtlab.artifacts.kernel_info import (
    KernelInfo,
    KernelInfoError,
    kernel_info_path,
    read_kernel_info,
)
from rtlab.artifacts.manifest import FILE_NAME as MANIFEST
from rtlab.artifacts.manifest import SCHEMA_VERSION, write_image_manifest
from rtlab.image import bootchain, rootfs, sdcard, tools
from rtlab.image.rootfs import FILES_DIR, RootfsBuilder, write_initramfs
from rtlab.image.sdcard import (
    BMAP,
    EXTLINUX_CONF,
    INITRD,
    SD_IMAGE,
    extlinux_conf,
    make_bmap,
    make_sd_image,
)
from rtlab.image.tools import ImageError, run
from rtlab.platform import boards, debian
from rtlab.platform.boards import BoardModel
from rtlab.platform.debian import sha256_file

STALE_WORK_DIR_S = 3600


@attrs.frozen
class ImageArtifacts:
    sd_image: Path
    bmap: Path
    manifest: Path
    rebuilt: bool = True
    """False when an existing, matching image was reused."""


def build_image(
    board: str,
    flavour: str,
    cache_dir: Path,
    out_dir: Path,
    progress: Callable[[str], None] = print,
    kernel_dir: Path | None = None,
    extra_cmdline: str = "",
) -> ImageArtifacts:
    """Build (or reuse) out_dir/<board>-<flavour>/{sdcard.img,sdcard.img.bmap,manifest.json}.

    ``kernel_dir``: the kernel from the kernel stage (kernel.json beside it) instead
    of the one Debian's kernel metapackage resolves to; ``extra_cmdline``: parameters
    added to the kernel command line (a bisection's test device, rtlab.bisect.testdev)."""
    model = boards.board_model(board)
    metapackage = model.kernel_package(flavour)
    apt = debian.Apt(model.arch, cache_dir, progress)
    dest = out_dir / f"{board}-{flavour}"
    previous = _read_manifest(dest)
    # One apt-cache run for everything a previous build used: each run costs seconds.
    apt.prefetch([metapackage, *_recorded_packages(previous)])
    given = _read_kernel_info(kernel_dir, board, flavour) if kernel_dir else None
    built = given is not None and given.built
    if given:
        kernel_name, kernel_version = given.package, given.version
    else:
        kernel_name = apt.resolve_kernel(metapackage)
        kernel_version = apt.candidate(kernel_name).version
    inputs = {
        "builder_sha256": _builder_digest(),
        "board": attrs.asdict(model),
        "flavour": flavour,
        "kernel_package": kernel_name,
        "kernel_version": kernel_version,
    }
    if given:
        inputs["kernel_sha256"] = given.sha256
    if built:
        inputs["kernel_source"] = "build"
    if given and given.provided is not None:
        # the build stage's choice and reason (rtlab kernel provide) goes into the manifest
        inputs["kernel_provided"] = given.provided
    if given and given.variant is not None:
        # a campaign's kernel variant (rtlab.campaign): its name is the series its results
        # are filed under, so an image of another variant is another image
        inputs["variant"] = given.variant
    if extra_cmdline:
        inputs["extra_cmdline"] = extra_cmdline
    inputs = json.loads(json.dumps(inputs))  # as it reads back from the manifest
    reused = _reusable(dest, previous, inputs, apt)
    if reused is not None:
        progress(f"{board}-{flavour}: image {reused} is up to date")
        return ImageArtifacts(
            sd_image=dest / SD_IMAGE, bmap=dest / BMAP, manifest=dest / MANIFEST, rebuilt=False
        )

    out_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_work_dirs(out_dir, f".{board}-{flavour}.")
    work = Path(tempfile.mkdtemp(prefix=f".{board}-{flavour}.", dir=out_dir))
    try:
        kernel = _unpack_given_kernel(kernel_dir, given, model, work) if given else None
        manifest = _Builder(model, flavour, apt, work, progress, kernel,
                            built=given.as_dict() if given and built else None,
                            provided=given.provided if given else None,
                            extra_cmdline=extra_cmdline).build(
            metapackage, kernel_name, inputs
        )
        _publish(work, dest, manifest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    progress(f"{board}-{flavour}: built image {manifest['image_id']} in {dest}")
    return ImageArtifacts(sd_image=dest / SD_IMAGE, bmap=dest / BMAP, manifest=dest / MANIFEST)


def _read_kernel_info(kernel_dir: Path, board: str, flavour: str) -> KernelInfo:
    """kernel.json of a build stage's kernel (rtlab.artifacts.kernel_info), checked
    against what is to be built: a Debian package (``source: debian``, from `rtlab kernel
    fetch`) or a kernel built from source (``source: build``, from `rtlab kernel build`),
    with every file it names there and matching its SHA-256."""
    path = kernel_info_path(kernel_dir)
    try:
        info = read_kernel_info(kernel_dir)
    except KernelInfoError as error:
        raise ImageError(f"no usable kernel from the build stage: {error}") from error
    if (info.board, info.flavour) != (board, flavour):
        what = (f"{info.board}-{info.kernel_flavour} (judged as {info.flavour})"
                if info.built else f"{info.board}-{info.flavour}")
        raise ImageError(f"{path} is the kernel of {what}, not of {board}-{flavour}")
    if info.built:
        _check_built_files(kernel_dir, path, info)
        return info
    assert info.deb is not None  # read_kernel_info: a Debian kernel names its package
    deb = kernel_dir / info.deb
    if not deb.is_file() or sha256_file(deb) != info.sha256:
        raise ImageError(f"{deb} is missing or does not match the SHA-256 in {path}")
    return info


def _check_built_files(kernel_dir: Path, path: Path, info: KernelInfo) -> None:
    """Every file a built kernel's kernel.json names is there with its SHA-256."""
    files = info.files or {}
    facts = [files.get("image"), *files.get("dtbs", []), files.get("config"),
             *files.get("builtin", [])]
    if files.get("modules") is not None:
        facts.append(files["modules"])
    if files.get("image") is None or not files.get("dtbs") or files.get("config") is None:
        raise ImageError(f"{path}: 'files' must name the image, the DTBs and the config")
    for fact in facts:
        if not isinstance(fact, dict) or not isinstance(fact.get("file"), str):
            raise ImageError(f"{path}: bad entry in 'files': {fact!r}")
        file = kernel_dir / fact["file"]
        if not file.is_file() or sha256_file(file) != fact.get("sha256"):
            raise ImageError(f"{file} is missing or does not match the SHA-256 in {path}")


def _unpack_given_kernel(kernel_dir: Path | None, info: KernelInfo, model: BoardModel,
                         work: Path) -> debian.DebPackage:
    # unpacked into this build's work folder, not the shared cache: a build stage's
    # package may carry a Debian package's name with other contents
    assert kernel_dir is not None
    root = work / "kernel"
    if info.built:
        return _lay_out_built_kernel(kernel_dir, info, model, root)
    assert info.deb is not None
    deb = kernel_dir / info.deb
    run(["dpkg-deb", "-x", str(deb), str(root)])
    return debian.DebPackage(name=info.package, arch=model.arch, version=info.version,
                             deb=deb, root=root)


def _lay_out_built_kernel(kernel_dir: Path, info: KernelInfo, model: BoardModel,
                          root: Path) -> debian.DebPackage:
    """A built kernel's files where a Debian kernel package keeps them (boot/vmlinuz-R,
    boot/config-R, usr/lib/linux-image-R/<dtb>, lib/modules/R/), so that one builder
    packs both."""
    release, files = info.release, info.files or {}
    boot = root / "boot"
    boot.mkdir(parents=True)
    image = kernel_dir / files["image"]["file"]
    shutil.copyfile(image, boot / f"vmlinuz-{release}")
    shutil.copyfile(kernel_dir / files["config"]["file"], boot / f"config-{release}")
    # the board model names the DTB by its path in Debian's package; a build has it
    # under its dts/ path (nxp/imx/…): the file name is what both share
    wanted = PurePosixPath(model.dtb).name
    dtbs = [d for d in files["dtbs"] if PurePosixPath(d["file"]).name == wanted]
    if not dtbs:
        raise ImageError(f"{kernel_dir}: the built kernel has no {wanted} (built: "
                         f"{', '.join(d['file'] for d in files['dtbs'])})")
    dtb = root / "usr/lib" / f"linux-image-{release}" / model.dtb
    dtb.parent.mkdir(parents=True)
    shutil.copyfile(kernel_dir / dtbs[0]["file"], dtb)
    modules = root / "lib/modules" / release
    modules.mkdir(parents=True)
    if files.get("modules") is not None:
        run(["tar", "-xzf", str(kernel_dir / files["modules"]["file"]), "-C", str(root),
              "--no-same-owner", "lib/modules"])
    for fact in files.get("builtin", []):
        shutil.copyfile(kernel_dir / fact["file"], modules / PurePosixPath(fact["file"]).name)
    return debian.DebPackage(name=info.package, arch=model.arch, version=info.version,
                             deb=image, root=root)


def _remove_stale_work_dirs(out_dir: Path, prefix: str) -> None:
    """Work folders of builds that were killed; a live build is never this old."""
    for path in out_dir.glob(prefix + "*"):
        with contextlib.suppress(OSError):
            if time.time() - path.stat().st_mtime > STALE_WORK_DIR_S:
                shutil.rmtree(path, ignore_errors=True)


def _builder_digest() -> str:
    """Hash of the code and files that shape the image: a change to them means a rebuild."""
    digest = hashlib.sha256()
    sources = [Path(boards.__file__), Path(debian.__file__), Path(__file__)]
    # the image's contents are made there: a change to them must rebuild too
    sources += [Path(rootfs.__file__), Path(sdcard.__file__), Path(tools.__file__),
                Path(bootchain.__file__)]
    sources += sorted(p for p in FILES_DIR.iterdir() if p.is_file())
    for path in sources:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _read_manifest(dest: Path) -> dict:
    """The manifest of a previous build, or {} if there is none this code can trust."""
    try:
        manifest = json.loads((dest / MANIFEST).read_text())
        if manifest["schema"] != SCHEMA_VERSION:
            return {}
        # the fields a reuse decision looks at
        _recorded_packages(manifest)
        str(manifest["image_id"])
        str(manifest["sd_image"]["sha256"]) + str(manifest["bmap"]["sha256"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    return manifest


def _recorded_packages(manifest: dict) -> dict[str, str]:
    """Package -> version of everything a manifest says went into the image."""
    if not manifest:
        return {}
    recorded = {p["name"]: p["version"] for p in manifest["packages"]}
    # a kernel built from source is no Debian package: kernel_sha256 in the inputs
    # decides whether it changed
    if manifest["kernel"].get("source", "debian") == "debian":
        recorded[manifest["kernel"]["package"]] = manifest["kernel"]["version"]
    return recorded


def _reusable(dest: Path, manifest: dict, inputs: dict, apt: debian.Apt) -> str | None:
    """The image id of an existing build of exactly these inputs, else None."""
    if not manifest or manifest.get("inputs") != inputs:
        return None
    recorded = _recorded_packages(manifest)
    try:
        current = apt.candidates(recorded)
    except debian.DebianError:
        return None
    if any(current[name].version != version for name, version in recorded.items()):
        return None
    for name, key in ((SD_IMAGE, "sd_image"), (BMAP, "bmap")):
        path = dest / name
        # The image may have been booted directly (its data partition written): rebuild.
        if not path.is_file() or sha256_file(path) != manifest[key]["sha256"]:
            return None
    return manifest["image_id"]


def _publish(work: Path, dest: Path, manifest: dict) -> None:
    """Move the outputs into place; the manifest goes last and marks the set complete."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / MANIFEST).unlink(missing_ok=True)
    os.replace(work / SD_IMAGE, dest / SD_IMAGE)
    os.replace(work / BMAP, dest / BMAP)
    write_image_manifest(work, dest, manifest)


class _Builder:
    def __init__(
        self,
        model: BoardModel,
        flavour: str,
        apt: debian.Apt,
        work: Path,
        progress: Callable[[str], None],
        kernel: debian.DebPackage | None = None,
        built: dict | None = None,
        provided: dict | None = None,
        extra_cmdline: str = "",
    ) -> None:
        self.extra_cmdline = extra_cmdline
        self.provided = provided
        """Which kernel the build stage handed on and why (kernel.json's ``provided``)."""
        self.kernel = kernel
        """The build stage's kernel, or None for the one Debian's metapackage names."""
        self.built = built
        """kernel.json of a kernel built from source (``kernel`` is then its files)."""
        self.model = model
        self.flavour = flavour
        self.apt = apt
        self.work = work
        self.progress = progress
        self.rootfs = work / "rootfs"
        self.boot = work / "boot"

    def build(self, metapackage: str, kernel_name: str, inputs: dict) -> dict:
        model = self.model
        self.progress(f"{model.name}-{self.flavour}: building image ({kernel_name})")
        kernel = self.kernel or self.apt.fetch(kernel_name)
        release = kernel_name.removeprefix("linux-image-")
        config_path = kernel.root / "boot" / f"config-{release}"
        if not config_path.is_file():
            raise ImageError(f"{kernel_name} {kernel.version} ships no /boot/config-{release}")
        config = config_path.read_text()
        preemption = kconfig.preemption_model(config)
        if preemption is None:
            raise ImageError(f"{kernel_name}: its config selects no preemption model")
        # Debian's packages must fit their names; a build stage's kernel is packed as it
        # is, and the test stage judges it (see fetch_kernel)
        if self.kernel is None and (preemption == "PREEMPT_RT") != (self.flavour == "rt"):
            raise ImageError(
                f"{kernel_name} is {preemption}, which does not fit flavour {self.flavour!r}"
            )
        hz = kconfig.hz(config)

        files = RootfsBuilder(model, self.flavour, self.apt, self.rootfs, self.boot)
        userland = files.userland()
        files.make_rootfs(userland, release)
        # where a Debian system keeps it, so the board can tell which kernel it runs
        (self.rootfs / "boot").mkdir()
        shutil.copyfile(config_path, self.rootfs / "boot" / f"config-{release}")
        modules, builtin, absent_nics = files.install_modules(kernel, release)
        self.boot.mkdir()
        (self.boot / "extlinux").mkdir()
        files.install_kernel(kernel, release)
        files.install_dtb(kernel, release)
        write_initramfs(self.rootfs, self.boot / INITRD)
        append = f"console={model.console} quiet"
        if self.built:
            # a built kernel boots with its board's command line from kernel/boards.yaml
            # (isolcpus included); like Debian's, it names no root= (the initramfs is it)
            append = self.built["cmdline"]
        if self.extra_cmdline:
            append = f"{append} {self.extra_cmdline}"
        (self.boot / EXTLINUX_CONF).write_text(
            extlinux_conf(model, self.flavour, kernel_name, kernel.version, append)
        )
        boot_chain = bootchain.install_boot_chain(model, self.flavour, self.boot, append,
                                                  self.apt, self.apt.cache_dir, self.progress)

        sd = self.work / SD_IMAGE
        make_sd_image(sd, self.boot, f"{model.name}-{self.flavour}")
        make_bmap(sd, self.work / BMAP, f"{model.name}-{self.flavour}", self.progress)

        sd_sha = sha256_file(sd)
        # a built kernel comes from no metapackage: naming one would misattribute it
        meta = None if self.built else self.apt.candidate(metapackage)
        return {
            "schema": SCHEMA_VERSION,
            "image_id": sd_sha[:16],
            "board": model.name,
            "flavour": self.flavour,
            **({"variant": inputs["variant"]} if "variant" in inputs else {}),
            "arch": model.arch,
            "build_time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "kernel": {
                "metapackage": None if meta is None else metapackage,
                "metapackage_version": None if meta is None else meta.version,
                "package": kernel_name,
                "version": kernel.version,
                "release": release,
                "preemption": preemption,
                "hz": hz,
                "modules": modules,
                "builtin_modules": builtin,
                # the physical board's NIC drivers this kernel lacks (a lean build)
                "absent_nic_modules": absent_nics,
                **self._kernel_origin(),
            },
            "cmdline": append,
            # what the board's boot chain reads from the card besides the kernel's files
            "boot_chain": boot_chain,
            "packages": [
                {"name": p.name, "version": p.version, "arch": p.arch} for p in userland.packages
            ],
            "boot_files": {
                str(p.relative_to(self.boot)): {
                    "sha256": sha256_file(p),
                    "size": p.stat().st_size,
                }
                for p in sorted(self.boot.rglob("*"))
                if p.is_file()
            },
            "sd_image": {"file": SD_IMAGE, "size": sd.stat().st_size, "sha256": sd_sha},
            "bmap": {"file": BMAP, "sha256": sha256_file(self.work / BMAP)},
            "inputs": inputs,
        }

    def _kernel_origin(self) -> dict:
        """Whether the kernel is Debian's or built from source, and for a built one the
        build manifest: the result records carry it (image.kernel)."""
        origin: dict = {"source": "debian"}
        if self.built is not None:
            origin = {"source": "build", "kernel_flavour": self.built.get("kernel_flavour"),
                      "kernel_sha256": self.built["sha256"], "build": self.built["build"]}
        if self.provided is not None:
            origin["provided"] = self.provided
        return origin
