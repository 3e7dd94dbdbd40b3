"""SD card images for the virtual boards, built from Debian packages.

The image is what a real board would get flashed: an MBR with a FAT boot partition (kernel,
device tree, initramfs and a U-Boot distro-boot /extlinux/extlinux.conf) and an ext4 data
partition. The virtual rack boots whatever that extlinux.conf says, so the image is the
single source of truth for what runs.

No loop devices, mounts or root file system tools: partitions are built as separate files
(mkfs.vfat + mtools, mkfs.ext4) and copied into the sparse image at their offsets.
"""

from __future__ import annotations

import contextlib
import datetime
import gzip
import hashlib
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

import attrs

from rtlab.image import boards, debian
from rtlab.image.boards import BoardModel
from rtlab.kernel import kconfig

SCHEMA_VERSION = 1

MIB = 1 << 20
SECTOR = 512
IMAGE_SIZE = 256 * MIB  # QEMU insists on a power-of-two SD card size
BOOT_START = 1 * MIB
BOOT_SIZE = 96 * MIB
DATA_START = BOOT_START + BOOT_SIZE
DATA_SIZE = IMAGE_SIZE - DATA_START

SD_IMAGE = "sdcard.img"
BMAP = "sdcard.img.bmap"
MANIFEST = "manifest.json"
KERNEL_INFO = "kernel.json"
KERNEL_INFO_SCHEMA = "rtlab.kernel/2"
# /1 had only Debian packages; /2 adds `source: build` (rtlab kernel build). Both are read.
KERNEL_INFO_SCHEMAS = ("rtlab.kernel/1", KERNEL_INFO_SCHEMA)
KERNEL_SOURCES = ("debian", "build")
INITRD = "initrd.img"
EXTLINUX_CONF = "extlinux/extlinux.conf"

# File timestamps inside the image; a constant keeps the image reproducible.
EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "1700000000"))

FILES_DIR = Path(__file__).parent / "files"
STALE_WORK_DIR_S = 3600

# Guest userland: package -> programs taken from it (None: every ELF program it ships).
GUEST_PROGRAMS: dict[str, tuple[str, ...] | None] = {
    "busybox-static": ("/bin/busybox",),
    "rt-tests": None,
    "stress-ng": ("/usr/bin/stress-ng",),
    # the network load's ping flood: busybox ping has no -f
    "iputils-ping": ("/bin/ping",),
    # XMODEM receiver for labgrid's ShellDriver.put_bytes (busybox-static has no rx); a
    # breach's trace comes back as base64 text instead (rtlab.measure.trace.collect)
    "lrzsz": ("/usr/bin/rz",),
    # the kernel's own latency tracer front end (timerlat, osnoise) for people at a manual
    # session; rtlab's trace on breach reads tracefs itself (docs/tracing.md)
    "rtla": ("/usr/bin/rtla",),
    # the measuring rt-tests start under SCHED_FIFO (rtlab.measure.cyclictest.fifo_from_start);
    # busybox-static has no chrt
    "util-linux": ("/usr/bin/chrt",),
}

# Applets the boot and login path rely on; their absence means a different busybox build.
_REQUIRED_APPLETS = ("sh", "init", "getty", "login", "mount", "insmod", "findfs", "setsid")

_PROGRAM_DIRS = {PurePosixPath(d) for d in ("/bin", "/sbin", "/usr/bin", "/usr/sbin")}

# A Debian kernel's module tree holds thousands of modules; only a board's list goes in.
_MODULE_INDEX_FILES = ("modules.builtin", "modules.builtin.modinfo", "modules.order")


class ImageError(RuntimeError):
    """The image cannot be built; the message says which input is at fault."""


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
) -> ImageArtifacts:
    """Build (or reuse) out_dir/<board>-<flavour>/{sdcard.img,sdcard.img.bmap,manifest.json}.

    ``kernel_dir``: the kernel from a build stage (:func:`fetch_kernel`'s folder) instead
    of the one Debian's kernel metapackage resolves to."""
    model = boards.board_model(board)
    metapackage = model.kernel_package(flavour)
    apt = debian.Apt(model.arch, cache_dir, progress)
    dest = out_dir / f"{board}-{flavour}"
    previous = _read_manifest(dest)
    # One apt-cache run for everything a previous build used: each run costs seconds.
    apt.prefetch([metapackage, *_recorded_packages(previous)])
    given = _read_kernel_info(kernel_dir, board, flavour) if kernel_dir else None
    built = given is not None and given["source"] == "build"
    if given:
        kernel_name, kernel_version = given["package"], given["version"]
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
        inputs["kernel_sha256"] = given["sha256"]
    if built:
        inputs["kernel_source"] = "build"
    if given and given.get("provided") is not None:
        # the build stage's choice and reason (rtlab kernel provide) goes into the manifest
        inputs["kernel_provided"] = given["provided"]
    if given and given.get("variant") is not None:
        # a campaign's kernel variant (rtlab.campaign): its name is the series its results
        # are filed under, so an image of another variant is another image
        inputs["variant"] = given["variant"]
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
                            built=given if built else None,
                            provided=given.get("provided") if given else None).build(
            metapackage, kernel_name, inputs
        )
        _publish(work, dest, manifest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    progress(f"{board}-{flavour}: built image {manifest['image_id']} in {dest}")
    return ImageArtifacts(sd_image=dest / SD_IMAGE, bmap=dest / BMAP, manifest=dest / MANIFEST)


@attrs.frozen
class KernelArtifact:
    """A kernel as the build stage hands it on: the package and what it is."""

    folder: Path
    deb: Path
    info: dict


def fetch_kernel(
    board: str,
    flavour: str,
    cache_dir: Path,
    out_dir: Path,
    progress: Callable[[str], None] = print,
) -> KernelArtifact:
    """The build stage while no kernel source is configured: Debian's kernel package for
    ``board`` x ``flavour`` in out_dir/<board>-<flavour>/, with kernel.json (package,
    version, release, preemption model, SHA-256) beside it.

    A kernel whose preemption model does not fit the flavour is handed on all the same,
    with a warning: judging a kernel is the test stage's job (a non-RT kernel under RT
    thresholds is a latency `fail` there, not a build error)."""
    model = boards.board_model(board)
    metapackage = model.kernel_package(flavour)
    apt = debian.Apt(model.arch, cache_dir, progress)
    name = apt.resolve_kernel(metapackage)
    pkg = apt.fetch(name)
    release = name.removeprefix("linux-image-")
    config_path = pkg.root / "boot" / f"config-{release}"
    if not config_path.is_file():
        raise ImageError(f"{name} {pkg.version} ships no /boot/config-{release}")
    config = config_path.read_text()
    preemption = kconfig.preemption_model(config)
    hz = re.search(r"^CONFIG_HZ=(\d+)$", config, re.MULTILINE)
    if (preemption == "PREEMPT_RT") != (flavour == "rt"):
        progress(f"warning: {board}-{flavour}: {name} is {preemption}, which does not fit "
                 f"flavour {flavour!r}; the test stage judges it against {flavour} thresholds")
    dest = out_dir / f"{board}-{flavour}"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    deb = dest / pkg.deb.name
    shutil.copyfile(pkg.deb, deb)
    info = {
        "schema": KERNEL_INFO_SCHEMA,
        "board": board,
        "flavour": flavour,
        "arch": model.arch,
        "source": "debian",
        "metapackage": metapackage,
        "package": name,
        "version": pkg.version,
        "release": release,
        "preemption": preemption,
        "hz": int(hz.group(1)) if hz else None,
        "deb": deb.name,
        "sha256": debian.sha256_file(deb),
    }
    (dest / KERNEL_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    progress(f"{board}-{flavour}: {name} {pkg.version} ({preemption}) in {dest}")
    return KernelArtifact(folder=dest, deb=deb, info=info)


def _read_kernel_info(kernel_dir: Path, board: str, flavour: str) -> dict:
    """kernel.json of a build stage's kernel, checked against what is to be built: a
    Debian package (``source: debian``, from `rtlab kernel fetch`) or a kernel built from
    source (``source: build``, from `rtlab kernel build`)."""
    path = kernel_dir / KERNEL_INFO
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ImageError(f"{path}: no kernel from the build stage: {error}") from error
    if not isinstance(info, dict) or info.get("schema") not in KERNEL_INFO_SCHEMAS:
        schema = info.get("schema") if isinstance(info, dict) else None
        raise ImageError(f"{path}: schema {schema!r}, expected one of "
                         f"{', '.join(KERNEL_INFO_SCHEMAS)}")
    info.setdefault("source", "debian")
    if info["source"] not in KERNEL_SOURCES:
        raise ImageError(f"{path}: 'source' must be one of {', '.join(KERNEL_SOURCES)}, "
                         f"got {info['source']!r}")
    built = info["source"] == "build"
    keys = ("release", "cmdline") if built else ("deb",)
    for key in ("board", "flavour", "package", "version", "sha256", *keys):
        if not isinstance(info.get(key), str) or not info[key]:
            raise ImageError(f"{path}: {key!r} must be a non-empty string")
    if (info["board"], info["flavour"]) != (board, flavour):
        what = (f"{info['board']}-{info.get('kernel_flavour')} (judged as "
                f"{info['flavour']})" if built else f"{info['board']}-{info['flavour']}")
        raise ImageError(f"{path} is the kernel of {what}, not of {board}-{flavour}")
    if built:
        _check_built_files(kernel_dir, path, info)
        return info
    deb = kernel_dir / info["deb"]
    if not deb.is_file() or debian.sha256_file(deb) != info["sha256"]:
        raise ImageError(f"{deb} is missing or does not match the SHA-256 in {path}")
    return info


def _check_built_files(kernel_dir: Path, path: Path, info: dict) -> None:
    """Every file a built kernel's kernel.json names is there with its SHA-256."""
    files = info.get("files")
    if not isinstance(files, dict) or not isinstance(info.get("build"), dict):
        raise ImageError(f"{path}: a built kernel needs 'files' and 'build' mappings")
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
        if not file.is_file() or debian.sha256_file(file) != fact.get("sha256"):
            raise ImageError(f"{file} is missing or does not match the SHA-256 in {path}")


def _unpack_given_kernel(kernel_dir: Path | None, info: dict, model: BoardModel,
                         work: Path) -> debian.DebPackage:
    # unpacked into this build's work folder, not the shared cache: a build stage's
    # package may carry a Debian package's name with other contents
    assert kernel_dir is not None
    root = work / "kernel"
    if info["source"] == "build":
        return _lay_out_built_kernel(kernel_dir, info, model, root)
    deb = kernel_dir / info["deb"]
    _run(["dpkg-deb", "-x", str(deb), str(root)])
    return debian.DebPackage(name=info["package"], arch=model.arch, version=info["version"],
                             deb=deb, root=root)


def _lay_out_built_kernel(kernel_dir: Path, info: dict, model: BoardModel,
                          root: Path) -> debian.DebPackage:
    """A built kernel's files where a Debian kernel package keeps them (boot/vmlinuz-R,
    boot/config-R, usr/lib/linux-image-R/<dtb>, lib/modules/R/), so that one builder
    packs both."""
    release, files = info["release"], info["files"]
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
        _run(["tar", "-xzf", str(kernel_dir / files["modules"]["file"]), "-C", str(root),
              "--no-same-owner", "lib/modules"])
    for fact in files.get("builtin", []):
        shutil.copyfile(kernel_dir / fact["file"], modules / PurePosixPath(fact["file"]).name)
    return debian.DebPackage(name=info["package"], arch=model.arch, version=info["version"],
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
        if not path.is_file() or debian.sha256_file(path) != manifest[key]["sha256"]:
            return None
    return manifest["image_id"]


def _publish(work: Path, dest: Path, manifest: dict) -> None:
    """Move the outputs into place; the manifest goes last and marks the set complete."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / MANIFEST).unlink(missing_ok=True)
    os.replace(work / SD_IMAGE, dest / SD_IMAGE)
    os.replace(work / BMAP, dest / BMAP)
    tmp = work / MANIFEST
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, dest / MANIFEST)


def _run(argv: list[str], *, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    try:
        proc = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, **env} if env else None,
        )
    except FileNotFoundError as exc:
        raise ImageError(f"{argv[0]} is not installed on this host") from exc
    if proc.returncode != 0:
        raise ImageError(
            f"`{' '.join(argv)}` failed (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()}"
        )
    return proc.stdout


def _mtools_env() -> dict[str, str]:
    # Images are not devices: skip mtools' geometry sanity checks, and keep its timestamps
    # constant.
    return {"MTOOLS_SKIP_CHECK": "1", "SOURCE_DATE_EPOCH": str(EPOCH)}


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
    ) -> None:
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
        hz = re.search(r"^CONFIG_HZ=(\d+)$", config, re.MULTILINE)

        userland = self._userland()
        self._make_rootfs(userland, release)
        # where a Debian system keeps it, so the board can tell which kernel it runs
        (self.rootfs / "boot").mkdir()
        shutil.copyfile(config_path, self.rootfs / "boot" / f"config-{release}")
        modules, builtin = self._install_modules(kernel, release)
        self.boot.mkdir()
        (self.boot / "extlinux").mkdir()
        self._install_kernel(kernel, release)
        self._install_dtb(kernel, release)
        write_initramfs(self.rootfs, self.boot / INITRD)
        append = f"console={model.console} quiet"
        if self.built:
            # a built kernel boots with its board's command line from kernel/boards.yaml
            # (isolcpus included); like Debian's, it names no root= (the initramfs is it)
            append = self.built["cmdline"]
        (self.boot / EXTLINUX_CONF).write_text(
            self._extlinux_conf(kernel_name, kernel.version, append)
        )

        sd = self.work / SD_IMAGE
        self._make_sd_image(sd)
        self._make_bmap(sd)

        sd_sha = debian.sha256_file(sd)
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
                "hz": int(hz.group(1)) if hz else None,
                "modules": modules,
                "builtin_modules": builtin,
                **self._kernel_origin(),
            },
            "cmdline": append,
            "packages": [
                {"name": p.name, "version": p.version, "arch": p.arch} for p in userland.packages
            ],
            "boot_files": {
                str(p.relative_to(self.boot)): {
                    "sha256": debian.sha256_file(p),
                    "size": p.stat().st_size,
                }
                for p in sorted(self.boot.rglob("*"))
                if p.is_file()
            },
            "sd_image": {"file": SD_IMAGE, "size": sd.stat().st_size, "sha256": sd_sha},
            "bmap": {"file": BMAP, "sha256": debian.sha256_file(self.work / BMAP)},
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

    # -- userland ------------------------------------------------------------------------

    def _userland(self) -> debian.Userland:
        resolver = debian.UserlandResolver(self.apt, GUEST_PROGRAMS)
        self.apt.download(GUEST_PROGRAMS)
        for package, programs in GUEST_PROGRAMS.items():
            if programs is None:
                pkg = self.apt.fetch(package)
                programs = tuple(_elf_programs(pkg))
                if not programs:
                    raise ImageError(f"{package} {pkg.version} ships no ELF programs")
            for program in programs:
                resolver.add(package, program)
        return resolver.resolve()

    def _make_rootfs(self, userland: debian.Userland, release: str) -> None:
        root = self.rootfs
        for d in (
            "bin", "dev", "etc/rtlab", "proc", "sys", "tmp", "run", "root", "data", "var",
            "usr/bin", "usr/sbin", f"lib/modules/{release}",
        ):  # fmt: skip
            (root / d).mkdir(parents=True, exist_ok=True)
        # busybox installs its system applets in /sbin; one directory is enough here.
        (root / "sbin").symlink_to("bin")
        (root / "var/run").symlink_to("../run")
        (root / "tmp").chmod(0o1777)
        (root / "root").chmod(0o700)

        for f in userland.files:
            target = root / f.path.relative_to("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            if f.source.is_symlink():
                target.symlink_to(os.readlink(f.source))
            else:
                shutil.copy2(f.source, target)

        busybox = root / "bin/busybox"
        applets = busybox_applets(busybox.read_bytes())
        missing = [a for a in _REQUIRED_APPLETS if a not in applets]
        if missing:
            raise ImageError(f"busybox-static lacks applets {', '.join(missing)}")
        for applet in applets:
            link = root / "bin" / applet
            if applet != "busybox" and not link.exists() and not link.is_symlink():
                link.symlink_to("busybox")

        profile = (
            "export PATH=/usr/sbin:/usr/bin:/sbin:/bin\n"
            "export PS1='root@rtlab:~# '\n"
            "export TERM=${TERM:-vt100}\n"
        )
        profile += applet_overrides(userland.files, applets)
        if self.model.poweroff_resets:
            profile += (
                "# This emulated board cannot power off; a reset ends its QEMU process.\n"
                "# (Shell functions: busybox ash runs applets before looking at PATH.)\n"
                'poweroff() { reboot "$@"; }\n'
                'halt() { reboot "$@"; }\n'
            )
            for applet in ("poweroff", "halt"):
                script = root / "bin" / applet
                script.unlink()
                script.write_text(
                    "#!/bin/sh\n"
                    "# This emulated board cannot power off; a reset ends its QEMU process.\n"
                    'exec /bin/busybox reboot "$@"\n'
                )
                script.chmod(0o755)

        board = self.model.name
        console = self.model.console_device
        shutil.copy2(FILES_DIR / "init", root / "init")
        (root / "init").chmod(0o755)
        etc = root / "etc"
        (etc / "hostname").write_text(f"rtlab-{board}\n")
        # An empty password field: busybox login lets root in without asking.
        (etc / "passwd").write_text("root::0:0:root:/root:/bin/sh\n")
        (etc / "group").write_text("root:x:0:\ntty:x:5:\n")
        (etc / "profile").write_text(profile)
        (etc / "inittab").write_text(
            "# /init did the system setup before it handed PID 1 to busybox init.\n"
            f"{console}::respawn:/sbin/getty -L 115200 {console} vt100\n"
            "::ctrlaltdel:/sbin/reboot\n"
            "::shutdown:/bin/umount -a -r\n"
        )
        (etc / "rtlab/network").write_text(network_settings(self.model))
        (etc / "rtlab/image").write_text(
            f"BOARD={board}\nFLAVOUR={self.flavour}\nARCH={self.model.arch}\n"
            f"KERNEL_RELEASE={release}\n"
        )

    def _install_modules(self, kernel: debian.DebPackage,
                         release: str) -> tuple[list[str], list[str]]:
        """Copy the board's modules and their dependencies; returns them in load order,
        and the board's modules the kernel has built in (nothing to load: a kernel built
        without module support has them all built in)."""
        src = kernel.root / "lib/modules" / release
        index: dict[str, list[Path]] = {}
        if (src / "kernel").is_dir():
            for ko in (src / "kernel").rglob("*.ko"):
                index.setdefault(_module_name(ko.stem), []).append(ko)
        builtin = _builtin_modules(src)
        present: list[str] = []
        infos: dict[str, dict[str, list[str]]] = {}
        order: list[str] = []

        def visit(name: str, chain: tuple[str, ...]) -> None:
            name = _module_name(name)
            if name in order or name in present:
                return
            if name in builtin and name not in index:
                present.append(name)
                return
            if name in chain:
                raise ImageError(f"module dependency loop: {' -> '.join((*chain, name))}")
            found = index.get(name, [])
            if len(found) != 1:
                what = "not in" if not found else "ambiguous in"
                wanted_by = chain[-1] if chain else f"board {self.model.name}"
                raise ImageError(
                    f"kernel module {name} (wanted by {wanted_by}) is {what} "
                    f"{kernel.name} {kernel.version}"
                )
            info = debian.modinfo(found[0])
            infos[name] = info
            for dep in ",".join(info.get("depends", [])).split(","):
                if dep:
                    visit(dep, (*chain, name))
            order.append(name)

        for module in self.model.modules:
            visit(module, ())

        dest = self.rootfs / "lib/modules" / release
        rel = {name: index[name][0].relative_to(src).as_posix() for name in order}
        for name in order:
            target = dest / rel[name]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel[name], target)
        for extra in _MODULE_INDEX_FILES:
            if (src / extra).is_file():
                shutil.copy2(src / extra, dest / extra)

        def closure(name: str) -> list[str]:
            deps: list[str] = []
            for dep in ",".join(infos[name].get("depends", [])).split(","):
                if dep:
                    for d in [*closure(_module_name(dep)), _module_name(dep)]:
                        if d not in deps:
                            deps.append(d)
            return deps

        # So that busybox modprobe (and the kernel's request_module) work on the board too.
        with (dest / "modules.dep").open("w") as f:
            for name in order:
                deps = " ".join(rel[d] for d in reversed(closure(name)))
                f.write(f"{rel[name]}:{' ' + deps if deps else ''}\n")
        with (dest / "modules.alias").open("w") as f:
            for name in order:
                for alias in infos[name].get("alias", []):
                    f.write(f"alias {alias} {name}\n")
        (self.rootfs / "etc/rtlab/modules").write_text(
            "".join(f"# built in: {n}\n" for n in present)
            + "".join(rel[n] + "\n" for n in order))
        return [rel[n] for n in order], present

    # -- boot files ----------------------------------------------------------------------

    def _install_kernel(self, kernel: debian.DebPackage, release: str) -> None:
        vmlinuz = kernel.root / "boot" / f"vmlinuz-{release}"
        if not vmlinuz.is_file():
            raise ImageError(f"{kernel.name} {kernel.version} ships no /boot/vmlinuz-{release}")
        data = vmlinuz.read_bytes()
        if data[:2] == b"\x1f\x8b":
            # U-Boot's booti and QEMU's -kernel want a raw arm64 Image.
            data = gzip.decompress(data)
        (self.boot / self.model.kernel_image).write_bytes(data)

    def _install_dtb(self, kernel: debian.DebPackage, release: str) -> None:
        src = kernel.root / "usr/lib" / f"linux-image-{release}" / self.model.dtb
        if not src.is_file():
            raise ImageError(f"{kernel.name} {kernel.version} ships no {self.model.dtb}")
        dtb = self.boot / PurePosixPath(self.model.dtb).name
        shutil.copyfile(src, dtb)
        for node in self.model.dtb_remove_nodes:
            _run(["fdtput", "-r", str(dtb), node])
        for prop in self.model.dtb_properties:
            _run(["fdtput", "-t", prop.kind, str(dtb), prop.node, prop.name, *prop.values])

    def _extlinux_conf(self, kernel_name: str, version: str, append: str) -> str:
        label = f"rtlab-{self.model.name}-{self.flavour}"
        return (
            f"# rtlab {self.model.name} {self.flavour}: {kernel_name} {version}\n"
            "# U-Boot distro boot configuration; the virtual rack boots exactly this.\n"
            f"DEFAULT {label}\n"
            f"LABEL {label}\n"
            f"    KERNEL /{self.model.kernel_image}\n"
            f"    FDT /{PurePosixPath(self.model.dtb).name}\n"
            f"    INITRD /{INITRD}\n"
            f"    APPEND {append}\n"
        )

    # -- SD card -------------------------------------------------------------------------

    def _make_sd_image(self, sd: Path) -> None:
        # Identifiers derived from the board and flavour keep the image reproducible.
        ident = int(hashlib.sha256(f"{self.model.name}-{self.flavour}".encode()).hexdigest(), 16)
        disk_id = f"{ident & 0xFFFFFFFF:08x}"

        vfat = self.work / "boot.vfat"
        with vfat.open("wb") as f:
            f.truncate(BOOT_SIZE)
        _run(
            [
                "mkfs.vfat", "-F", "32", "-n", "BOOT", "-h", str(BOOT_START // SECTOR),
                "--invariant", str(vfat),
            ]
        )  # fmt: skip
        env = _mtools_env()
        for path in sorted(self.boot.rglob("*")):
            target = "::/" + path.relative_to(self.boot).as_posix()
            if path.is_dir():
                _run(["mmd", "-i", str(vfat), target], env=env)
            else:
                os.utime(path, (EPOCH, EPOCH))
                _run(["mcopy", "-m", "-i", str(vfat), str(path), target], env=env)

        ext4 = self.work / "data.ext4"
        with ext4.open("wb") as f:
            f.truncate(DATA_SIZE)
        uuid = f"{ident >> 128:032x}"
        uuid = f"{uuid[:8]}-{uuid[8:12]}-4{uuid[13:16]}-8{uuid[17:20]}-{uuid[20:32]}"
        _run(
            [
                "mkfs.ext4", "-q", "-F", "-L", "data", "-U", uuid, "-b", "4096", "-m", "0",
                "-E", f"hash_seed={uuid},lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0",
                str(ext4),
            ],
            env={"E2FSPROGS_FAKE_TIME": str(EPOCH)},
        )  # fmt: skip

        with sd.open("wb") as f:
            f.truncate(IMAGE_SIZE)
        table = (
            "label: dos\n"
            f"label-id: 0x{disk_id}\n"
            "unit: sectors\n\n"
            f"start={BOOT_START // SECTOR}, size={BOOT_SIZE // SECTOR}, type=c, bootable\n"
            f"start={DATA_START // SECTOR}, size={DATA_SIZE // SECTOR}, type=83\n"
        )
        _run(["sfdisk", "--no-reread", "--no-tell-kernel", "-q", str(sd)], stdin=table)
        with sd.open("r+b") as out:
            copy_sparse(vfat, out.fileno(), BOOT_START)
            copy_sparse(ext4, out.fileno(), DATA_START)
        vfat.unlink()
        ext4.unlink()
        if sd.stat().st_size != IMAGE_SIZE:
            raise ImageError(f"{sd} grew to {sd.stat().st_size} bytes")

    def _make_bmap(self, sd: Path) -> None:
        bmap = self.work / BMAP
        _run(["bmaptool", "create", "-o", str(bmap), str(sd)])
        root = ET.parse(bmap).getroot()
        block = int(root.findtext("BlockSize", "0"))
        mapped = int(root.findtext("MappedBlocksCount", "0")) * block
        if not 0 < mapped <= IMAGE_SIZE // 2:
            raise ImageError(
                f"the bmap maps {mapped} of {IMAGE_SIZE} bytes: the image is not sparse "
                "(does this file system support holes?)"
            )
        self.progress(
            f"{self.model.name}-{self.flavour}: {mapped / MIB:.1f} MiB of "
            f"{IMAGE_SIZE // MIB} MiB mapped"
        )


def network_settings(model: BoardModel) -> str:
    """/etc/rtlab/network, which /init sources: the static address on QEMU's user-mode
    network, or why the board has none."""
    if model.has_network:
        return (
            f"NET_ADDRESS={boards.GUEST_ADDRESS}/{boards.GUEST_PREFIX}\n"
            f"NET_GATEWAY={boards.GATEWAY}\n"
        )
    return f"NET_NONE={shlex.quote(str(model.no_network))}\n"


def applet_overrides(files: Iterable[debian.GuestFile], applets: Iterable[str]) -> str:
    """Shell functions for /etc/profile that run packaged programs busybox also has.

    busybox ash runs its own applet before it looks at PATH, even where a package put the
    real program (iputils ping: busybox's ping has no -f); a function wins over both. Only
    login shells and their subshells see it: a script run by `sh -c` must name the path
    (/bin/ping)."""
    names = set(applets)
    lines = []
    for f in files:
        name = f.path.name
        if f.package == "busybox-static" or name not in names or not name.isidentifier():
            continue
        if f.path.parent in _PROGRAM_DIRS:
            lines.append(f'{name}() {{ {f.path} "$@"; }}\n')
    return "".join(lines)


def _module_name(name: str) -> str:
    return name.replace("-", "_")


def _builtin_modules(modules_dir: Path) -> set[str]:
    """Names of the drivers built into the kernel that could have been modules (the
    kernel's modules.builtin: one kernel/…/name.ko path a line)."""
    path = modules_dir / "modules.builtin"
    if not path.is_file():
        return set()
    return {_module_name(PurePosixPath(line.strip()).name.removesuffix(".ko"))
            for line in path.read_text().splitlines() if line.strip()}


def _elf_programs(pkg: debian.DebPackage) -> Iterable[str]:
    for d in ("bin", "sbin", "usr/bin", "usr/sbin"):
        folder = pkg.root / d
        if folder.is_dir():
            for path in sorted(folder.iterdir()):
                if debian.is_elf(path):
                    yield "/" + path.relative_to(pkg.root).as_posix()


def busybox_applets(binary: bytes) -> list[str]:
    """Applet names from a busybox binary: its sorted, NUL-separated name table."""
    start = binary.find(b"[\0[[\0")
    if start < 0:
        raise ImageError("cannot find the applet table in busybox")
    names = binary[start : binary.index(b"\0\0", start)].split(b"\0")
    applets = [n.decode() for n in names]
    if applets != sorted(applets) or len(applets) < 50:
        raise ImageError("busybox applet table is not what was expected")
    return applets


def copy_sparse(src: Path, out_fd: int, offset: int, block: int = 4096) -> None:
    """Write src into out_fd at offset, leaving holes (and all-zero blocks) unwritten."""
    zero = bytes(block)
    with src.open("rb") as f:
        fd = f.fileno()
        end = os.fstat(fd).st_size
        pos = 0
        while pos < end:
            try:
                pos = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break  # only a hole is left
            hole = os.lseek(fd, pos, os.SEEK_HOLE)
            while pos < hole:
                chunk = os.pread(fd, min(MIB, hole - pos), pos)
                for i in range(0, len(chunk), block):
                    piece = chunk[i : i + block]
                    if piece != zero[: len(piece)]:
                        os.pwrite(out_fd, piece, offset + pos + i)
                pos += len(chunk)


def write_initramfs(rootfs: Path, out: Path) -> None:
    """gzip'd newc cpio of rootfs, everything owned by root, constant timestamps."""
    entries: list[tuple[str, int, bytes, int]] = []  # name, mode, data, rdev
    for dirpath, dirnames, filenames in os.walk(rootfs):
        dirnames.sort()
        base = Path(dirpath)
        names = sorted(dirnames + filenames)
        for name in names:
            path = base / name
            st = path.lstat()
            arc = path.relative_to(rootfs).as_posix()
            if stat.S_ISLNK(st.st_mode):
                entries.append((arc, st.st_mode, os.readlink(path).encode(), 0))
            elif stat.S_ISDIR(st.st_mode):
                entries.append((arc, st.st_mode, b"", 0))
            elif stat.S_ISREG(st.st_mode):
                entries.append((arc, st.st_mode, path.read_bytes(), 0))
            else:
                raise ImageError(f"unexpected file type in rootfs: {arc}")
    # The kernel opens /dev/console for /init before anything mounts devtmpfs.
    entries.append(("dev/console", stat.S_IFCHR | 0o600, b"", os.makedev(5, 1)))
    entries.append(("dev/null", stat.S_IFCHR | 0o666, b"", os.makedev(1, 3)))

    with out.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        for ino, (name, mode, data, rdev) in enumerate(entries, start=1):
            _cpio_entry(gz, ino, name, mode, data, rdev)
        _cpio_entry(gz, 0, "TRAILER!!!", 0, b"", 0)


def _cpio_entry(f: gzip.GzipFile, ino: int, name: str, mode: int, data: bytes, rdev: int) -> None:
    encoded = name.encode() + b"\0"
    fields = (
        ino, mode, 0, 0, 2 if stat.S_ISDIR(mode) else 1, EPOCH if name != "TRAILER!!!" else 0,
        len(data), 0, 0, os.major(rdev), os.minor(rdev), len(encoded), 0,
    )  # fmt: skip
    header = b"070701" + b"".join(f"{v:08x}".encode() for v in fields)
    f.write(header + encoded + bytes(-(len(header) + len(encoded)) % 4))
    f.write(data + bytes(-len(data) % 4))
