"""Where a bisection's kernels come from, one SD image per point.

``debian`` (:class:`DebianKernels`): Debian's kernel of the image flavour for every point,
the configuration's test devices on its command line: the path proven on the virtual rack
within ``make test``; every other option changes the point's key but not what boots.

``build`` (:class:`BuiltKernels`): each point's kernel built from its own commit's
``kernel/`` folder (fragments, source pin, patches, board files) with rtlab.kernel.build:
one build folder per board x flavour, so that a step rebuilds only what its options
change, and ccache; a point whose key was built already is not built again. An option
step builds the culprit's parent with the step's options in a fragment of their own, and
which options a step applies is kconfig's answer (:meth:`BuiltKernels.resolver`: an
option whose dependency is not applied falls back, one that another selects comes
along), as the kernel's own config bisection (ktest's ``config_bisect``) does.
"""

import hashlib
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

import attr

from rtlab.bisect import points, testdev
from rtlab.bisect.search import Resolve, as_applied
from rtlab.image.build import build_image
from rtlab.kernel import spec as kernel_spec
from rtlab.kernel.build import build_kernel
from rtlab.kernel.config import (
    Request,
    comment_out,
    holds,
    read_config,
    resolve_config,
    show,
)
from rtlab.kernel.source import prepare_source
from rtlab.util import paths

Progress = Callable[[str], None]
BuildKernel = Callable[..., object]
"""rtlab.kernel.build.build_kernel's signature (a test gives a stand-in)."""
Kconfig = Callable[[Path, list[Path], Path], str]
"""(a commit's kernel/ folder, extra fragments, a scratch build folder) → the .config
kconfig resolves for the board and kernel flavour."""
KERNEL_INFO = "kernel.json"


class Kernels(Protocol):
    name: str

    def identity(self, commit: str) -> str:
        """What besides its configuration makes ``commit``'s kernel ("" where nothing)."""

    def image(self, point: points.Point) -> Path:
        """The point's SD image, built (or reused) under the bisection's folder."""

    def resolver(self, parent: str, before: Mapping[str, str], after: Mapping[str, str],
                 options: tuple[str, ...]) -> Resolve:
        """The option search's ``resolve`` for ``options`` applied to ``parent``'s
        configuration ``before`` at their values in ``after``."""


def options_fragment(config: Mapping[str, str], options: frozenset[str]) -> str:
    """A fragment that requests ``options`` as ``config`` does (test devices, and options
    ``config`` does not request, left out)."""
    return "".join(f"{show(name, config[name])}\n" for name in sorted(options)
                   if name in config and not testdev.is_device(name))


def unrequested(config: Mapping[str, str], options: frozenset[str]) -> frozenset[str]:
    """The kernel options of ``options`` that ``config`` does not request: a step applies
    them by taking their request out of the parent's fragments."""
    return frozenset(name for name in options
                     if name not in config and not testdev.is_device(name))


@attr.define
class DebianKernels:
    board: str
    flavour: str
    kernel_flavour: str
    out: Path
    name: str = "debian"
    _images: dict[str, Path] = attr.field(factory=dict)

    def identity(self, commit: str) -> str:
        return ""

    def image(self, point: points.Point) -> Path:
        """Debian's kernel, the point's test devices on the command line; one image per
        command line (points that boot alike share it)."""
        extra = testdev.cmdline(point.config, f"{point.name} ({self.kernel_flavour})")
        if extra not in self._images:
            folder = hashlib.sha256(extra.encode()).hexdigest()[:12] if extra else "plain"
            self._images[extra] = build_image(
                self.board, self.flavour, paths.debs_dir(), self.out / "images" / folder,
                progress=lambda message: None, extra_cmdline=extra).sd_image
        return self._images[extra]

    def resolver(self, parent: str, before: Mapping[str, str], after: Mapping[str, str],
                 options: tuple[str, ...]) -> Resolve:
        # Debian's kernel is the same whatever is applied: nothing for kconfig to resolve
        return as_applied


@attr.define
class BuiltKernels:
    repo: Path
    board: str
    flavour: str
    kernel_flavour: str
    out: Path
    progress: Progress = print
    build: BuildKernel = build_kernel
    kconfig: Kconfig | None = None
    """None: kconfig of the commit's source tree (make olddefconfig)."""
    jobs: int = 3
    name: str = "build"
    built: list[str] = attr.field(factory=list)
    """The kernel keys (:meth:`kernel_key`) this bisection compiled, in order."""
    _images: dict[str, Path] = attr.field(factory=dict)

    def identity(self, commit: str) -> str:
        return points.source_identity(self.repo, commit)

    def tree(self, commit: str) -> Path:
        """``commit``'s kernel/ folder under the bisection's folder, its test devices taken
        out of the fragments (they go on the command line)."""
        dest = self.out / "trees" / commit[:12]
        kernel = dest / "kernel"
        if not (kernel / "boards.yaml").is_file():
            shutil.rmtree(dest, ignore_errors=True)
            points.extract_kernel(self.repo, commit, dest)
            for line in testdev.strip_fragments(kernel / "configs"):
                self.progress(f"  {commit[:12]} kernel/configs/{line}: a test device, put "
                              f"on the command line")
        return kernel

    def _base(self, point: points.Point) -> str:
        return points.parent(self.repo, point.commit) if point.options else point.commit

    def step_tree(self, commit: str, removed: frozenset[str]) -> Path:
        """``commit``'s kernel/ folder, the requests of ``removed`` taken out of its
        fragments (a copy of its own)."""
        tree = self.tree(commit)
        if not removed:
            return tree
        digest = hashlib.sha256(",".join(sorted(removed)).encode()).hexdigest()[:12]
        dest = self.out / "trees" / f"{commit[:12]}-{digest}"
        kernel = dest / "kernel"
        if not (kernel / "boards.yaml").is_file():
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(tree, kernel)
            comment_out(sorted((kernel / "configs").glob("*.config")), removed.__contains__,
                        "not requested by this step")
        return kernel

    def kernel_key(self, point: points.Point) -> str:
        """What identifies the point's compiled kernel: its key without the test devices
        (they are on the command line: points that differ only there share a kernel)."""
        return points.Point(point.commit, {name: value for name, value in point.config.items()
                                           if not testdev.is_device(name)},
                            source=point.source or "-").key

    def kernel(self, point: points.Point) -> Path:
        """The folder of the point's built kernel (kernel.json in it), built unless this
        key's is there already."""
        key = self.kernel_key(point)
        folder = self.out / "kernels" / key
        built = folder / f"{self.board}-{self.kernel_flavour}"
        if (built / KERNEL_INFO).is_file():
            self.progress(f"  {point.name}: kernel {key} built already")
            return built
        extra = []
        if point.options and options_fragment(point.config, point.options):
            fragment = folder / "options.config"
            folder.mkdir(parents=True, exist_ok=True)
            fragment.write_text(options_fragment(point.config, point.options))
            extra.append(fragment)
        self.progress(f"  {point.name}: building kernel {key}")
        kernel_dir = self.step_tree(self._base(point),
                                    unrequested(point.config, point.options))
        self.build(self.board, self.kernel_flavour, folder, kernel_dir=kernel_dir,
                   extra_fragments=extra, jobs=self.jobs, progress=self.progress)
        if not (built / KERNEL_INFO).is_file():
            raise RuntimeError(f"the kernel build of {point.name} left no {built / KERNEL_INFO}")
        self.built.append(key)
        return built

    def image(self, point: points.Point) -> Path:
        if point.key not in self._images:
            self._images[point.key] = build_image(
                self.board, self.flavour, paths.debs_dir(), self.out / "images" / point.key,
                progress=lambda message: None, kernel_dir=self.kernel(point),
                extra_cmdline=testdev.cmdline(point.config,
                                              f"{point.name} ({self.kernel_flavour})")
            ).sd_image
        return self._images[point.key]

    def _kconfig(self, kernel_dir: Path, extra: list[Path], scratch: Path) -> str:
        if self.kconfig is not None:
            return self.kconfig(kernel_dir, extra, scratch)
        board = kernel_spec.board(self.board, kernel_dir / "boards.yaml")
        flavour = kernel_spec.flavour(self.kernel_flavour, kernel_dir / "flavours.yaml")
        tree = prepare_source(None, paths.kernel_cache_dir(), self.progress,
                              kernel_dir=kernel_dir)
        return resolve_config(tree, scratch, board, [*board.fragment_files(),
                                                     *flavour.fragment_files(), *extra],
                              progress=lambda message: None,
                              label=f"{self.board}-{self.kernel_flavour}")

    def resolver(self, parent: str, before: Mapping[str, str], after: Mapping[str, str],
                 options: tuple[str, ...]) -> Resolve:
        """kconfig's answer: the options of ``options`` that hold their value of ``after``
        once a set of them is applied to ``parent``'s fragments (test devices, and options
        ``after`` does not request, hold where applied: kconfig has no say in them)."""
        answers: dict[frozenset[str], frozenset[str]] = {}
        folder = self.out / "kconfig"

        def resolve(applied: frozenset[str]) -> frozenset[str]:
            if applied not in answers:
                fragment = folder / f"{len(answers) + 1}.config"
                folder.mkdir(parents=True, exist_ok=True)
                fragment.write_text(options_fragment(after, applied))
                values = read_config(self._kconfig(
                    self.step_tree(parent, unrequested(after, applied)), [fragment],
                    folder / "build"))
                answers[applied] = frozenset(
                    name for name in options
                    if (name in applied if testdev.is_device(name) or name not in after
                        else holds(Request(name, after[name], fragment, 0), values)))
            return answers[applied]

        return resolve
