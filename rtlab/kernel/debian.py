"""Debian's kernel for a board and flavour (``rtlab kernel fetch``): the kernel stage while
no kernel source is configured, handed on as a built one is, with kernel.json beside it."""

import shutil
from collections.abc import Callable
from pathlib import Path

import attrs

from rtlab.artifacts import kconfig
from rtlab.artifacts.kernel_info import KernelInfo, write_kernel_info
from rtlab.platform import boards, debian


class KernelFetchError(RuntimeError):
    """Debian's kernel package cannot be handed on; the message says which and why."""


@attrs.frozen
class KernelArtifact:
    """A kernel as the kernel stage hands it on: the package and what it is."""

    folder: Path
    deb: Path
    info: KernelInfo


def fetch_kernel(
    board: str,
    flavour: str,
    cache_dir: Path,
    out_dir: Path,
    progress: Callable[[str], None] = print,
) -> KernelArtifact:
    """Debian's kernel package for ``board`` x ``flavour`` in out_dir/<board>-<flavour>/,
    with kernel.json (package, version, release, preemption model, SHA-256) beside it.

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
        raise KernelFetchError(f"{name} {pkg.version} ships no /boot/config-{release}")
    config = config_path.read_text()
    preemption = kconfig.preemption_model(config)
    if (preemption == "PREEMPT_RT") != (flavour == "rt"):
        progress(f"warning: {board}-{flavour}: {name} is {preemption}, which does not fit "
                 f"flavour {flavour!r}; the test stage judges it against {flavour} thresholds")
    dest = out_dir / f"{board}-{flavour}"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    deb = dest / pkg.deb.name
    shutil.copyfile(pkg.deb, deb)
    info = KernelInfo(
        board=board, flavour=flavour, arch=model.arch, source="debian",
        metapackage=metapackage, package=name, version=pkg.version, release=release,
        preemption=preemption, hz=kconfig.hz(config), deb=deb.name,
        sha256=debian.sha256_file(deb))
    write_kernel_info(dest, info)
    progress(f"{board}-{flavour}: {name} {pkg.version} ({preemption}) in {dest}")
    return KernelArtifact(folder=dest, deb=deb, info=info)
