"""The board and flavour descriptions of ``kernel/``: what a board's kernel is built from
(``boards.yaml``) and which config fragments make each flavour (``flavours.yaml``).

Both files are read strictly: an unknown key, a wrong type or a fragment that is not in
``kernel/configs/`` is an error naming the file and line, because a typo that is silently
ignored builds a kernel other than the one the results will be filed under."""

import re
from pathlib import Path
from typing import Any

import attr
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from rtlab.util.paths import REPO_ROOT, repo_display
from rtlab.util.yamlfile import YamlFileError, line_of, load_yaml

KERNEL_DIR = REPO_ROOT / "kernel"
BOARDS_FILE = KERNEL_DIR / "boards.yaml"
FLAVOURS_FILE = KERNEL_DIR / "flavours.yaml"
CONFIGS_DIR = KERNEL_DIR / "configs"

# the image targets each kernel ARCH can boot from here (the boards' U-Boot loads these)
IMAGES = {"arm": ("zImage", "uImage", "Image"), "arm64": ("Image", "Image.gz")}
# the flavours of thresholds.yaml (rtlab.platform.boards.FLAVOURS): a kernel is judged by one
THRESHOLDS_FLAVOURS = ("std", "rt")

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_FRAGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\.config$")
# isolcpus=[flag,...,]<cpu list>, e.g. "1-3" or "nohz,domain,managed_irq,1-3"
_ISOLCPUS = re.compile(r"^(?:[a-z_]+,)*\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$")

BOARD_KEYS = {"arch", "cross_compile", "defconfig", "image", "dtbs", "cmdline", "isolcpus",
              "fragments", "description"}
BOARD_REQUIRED = BOARD_KEYS - {"isolcpus", "fragments", "description"}
FLAVOUR_KEYS = {"description", "thresholds", "fragments", "pipeline"}
FLAVOUR_REQUIRED = FLAVOUR_KEYS - {"pipeline"}


class KernelSpecError(YamlFileError):
    """Bad content in boards.yaml / flavours.yaml, or an unknown board, flavour or
    fragment name; the message names the file and line where one applies."""


@attr.frozen
class KernelBoard:
    name: str
    arch: str
    """The kernel's ARCH (arm, arm64)."""
    cross_compile: str
    """The CROSS_COMPILE prefix, e.g. ``arm-linux-gnueabihf-``."""
    defconfig: str
    image: str
    """The image make target and file name under arch/<arch>/boot/ (zImage, Image)."""
    dtbs: tuple[str, ...]
    """Paths under arch/<arch>/boot/dts/, e.g. nxp/imx/imx6q-sabrelite.dtb."""
    cmdline: str
    isolcpus: str | None = None
    fragments: tuple[str, ...] = ()
    """Board-level fragments (names in ``configs_dir``), applied before the flavour's."""
    description: str = ""
    configs_dir: Path = CONFIGS_DIR

    @property
    def make_vars(self) -> list[str]:
        return [f"ARCH={self.arch}", f"CROSS_COMPILE={self.cross_compile}"]

    @property
    def image_path(self) -> str:
        """The built image, relative to the build folder."""
        return f"arch/{self.arch}/boot/{self.image}"

    @property
    def dtb_paths(self) -> tuple[str, ...]:
        """The built DTBs, relative to the build folder."""
        return tuple(f"arch/{self.arch}/boot/dts/{dtb}" for dtb in self.dtbs)

    @property
    def full_cmdline(self) -> str:
        """The command line the board boots with, ``isolcpus=`` included when set."""
        return f"{self.cmdline} isolcpus={self.isolcpus}" if self.isolcpus else self.cmdline

    def fragment_files(self) -> tuple[Path, ...]:
        return tuple(fragment_path(name, self.configs_dir) for name in self.fragments)


@attr.frozen
class KernelFlavour:
    name: str
    fragments: tuple[str, ...]
    """Fragment names in ``configs_dir``, in merge order (a later one overrides)."""
    thresholds: str
    """The thresholds.yaml flavour results of this kernel are judged by (rt, std)."""
    description: str = ""
    configs_dir: Path = CONFIGS_DIR
    pipeline: bool = False
    """The flavour the pipeline's build stage builds for its thresholds flavour."""

    def fragment_files(self) -> tuple[Path, ...]:
        return tuple(fragment_path(name, self.configs_dir) for name in self.fragments)


def fragment_path(name: str, configs_dir: Path = CONFIGS_DIR) -> Path:
    """The file of fragment ``name`` (e.g. ``preempt-rt.config``) in ``configs_dir``;
    an unknown name is an error that lists the fragments there are."""
    path = configs_dir / name
    if not _FRAGMENT.match(name) or not path.is_file():
        known = sorted(p.name for p in configs_dir.glob("*.config"))
        raise KernelSpecError(f"no fragment '{name}' in {configs_dir} "
                              f"(there are: {', '.join(known) or 'none'})")
    return path


def _where(display: str, node: Any, key: Any = None) -> str:  # noqa: ANN401
    return f"{display}:{line_of(node, key)}"


def _text(display: str, node: CommentedMap, key: str, *, pattern: re.Pattern[str] | None = None,
          what: str = "a non-empty string") -> str:
    value = node[key]
    if not isinstance(value, str) or not value.strip() or (
            pattern is not None and not pattern.match(value)):
        raise KernelSpecError(f"{_where(display, node, key)}: '{key}' must be {what}, "
                              f"got {value!r}")
    return value


def _names(display: str, node: CommentedMap, key: str, *, pattern: re.Pattern[str],
           what: str, allow_empty: bool = False) -> tuple[str, ...]:
    value = node[key]
    if not isinstance(value, CommentedSeq) or (not value and not allow_empty):
        raise KernelSpecError(f"{_where(display, node, key)}: '{key}' must be a "
                              f"{'' if allow_empty else 'non-empty '}list of {what}, "
                              f"got {value!r}")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not pattern.match(item):
            raise KernelSpecError(f"{_where(display, value, index)}: '{key}' item must be "
                                  f"{what}, got {item!r}")
    return tuple(value)


def _check_fragments(display: str, node: CommentedMap, names: tuple[str, ...],
                     configs_dir: Path) -> None:
    seq = node["fragments"]
    for index, name in enumerate(names):
        if names.index(name) != index:
            raise KernelSpecError(f"{_where(display, seq, index)}: fragment '{name}' is "
                                  "listed twice")
        try:
            fragment_path(name, configs_dir)
        except KernelSpecError as error:
            raise KernelSpecError(f"{_where(display, seq, index)}: {error}") from None


def _entries(path: Path, what: str) -> tuple[str, CommentedMap]:
    display = repo_display(path)
    try:
        data = load_yaml(path, display)
    except YamlFileError as error:
        raise KernelSpecError(str(error)) from error
    if not isinstance(data, CommentedMap) or not data:
        raise KernelSpecError(f"{display}:{line_of(data)}: expected a mapping of {what} "
                              "names to their description")
    for name, entry in data.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise KernelSpecError(f"{_where(display, data, name)}: {what} name must be "
                                  f"lower-case letters, digits, '-' or '_', got {name!r}")
        if not isinstance(entry, CommentedMap):
            raise KernelSpecError(f"{_where(display, data, name)}: {what} '{name}' must be "
                                  f"a mapping, got {entry!r}")
    return display, data


def _keys(display: str, name: str, entry: CommentedMap, allowed: set[str],
          required: set[str]) -> None:
    for key in entry:
        if key not in allowed:
            raise KernelSpecError(f"{_where(display, entry, key)}: '{name}': unknown key "
                                  f"{key!r} (valid: {', '.join(sorted(allowed))})")
    missing = sorted(required - set(entry))
    if missing:
        raise KernelSpecError(f"{_where(display, entry)}: '{name}': missing "
                              f"{', '.join(repr(m) for m in missing)}")


def load_boards(path: Path = BOARDS_FILE,
                configs_dir: Path | None = None) -> dict[str, KernelBoard]:
    """The boards of ``boards.yaml`` by name; fragments are looked up in ``configs_dir``
    (default: ``configs/`` next to the file)."""
    configs_dir = path.parent / "configs" if configs_dir is None else configs_dir
    display, data = _entries(path, "board")
    boards = {}
    for name, entry in data.items():
        _keys(display, name, entry, BOARD_KEYS, BOARD_REQUIRED)
        arch = _text(display, entry, "arch", pattern=re.compile(r"^(arm|arm64)$"),
                     what="a kernel ARCH (arm or arm64)")
        image = _text(display, entry, "image", what=f"an image target of {arch} "
                      f"({', '.join(IMAGES[arch])})",
                      pattern=re.compile(f"^({'|'.join(map(re.escape, IMAGES[arch]))})$"))
        isolcpus = None
        if "isolcpus" in entry:
            isolcpus = _text(display, entry, "isolcpus", pattern=_ISOLCPUS,
                             what="a CPU list with optional flags, e.g. '1-3' or "
                                  "'nohz,domain,1-3'")
        fragments: tuple[str, ...] = ()
        if "fragments" in entry:
            fragments = _names(display, entry, "fragments", pattern=_FRAGMENT,
                               what="fragment file names (*.config)", allow_empty=True)
            _check_fragments(display, entry, fragments, configs_dir)
        cmdline = _text(display, entry, "cmdline")
        if re.search(r"(^|\s)isolcpus=", cmdline):
            raise KernelSpecError(f"{_where(display, entry, 'cmdline')}: put isolcpus in "
                                  "the board's 'isolcpus' key, not in 'cmdline'")
        boards[name] = KernelBoard(
            name=name, arch=arch,
            cross_compile=_text(display, entry, "cross_compile",
                                pattern=re.compile(r"^[A-Za-z0-9_./-]*-$"),
                                what="a compiler prefix ending in '-', e.g. "
                                     "'arm-linux-gnueabihf-'"),
            defconfig=_text(display, entry, "defconfig",
                            pattern=re.compile(r"^[A-Za-z0-9_.-]*defconfig$"),
                            what="a defconfig make target, e.g. 'imx_v6_v7_defconfig'"),
            image=image,
            dtbs=_names(display, entry, "dtbs",
                        pattern=re.compile(r"^(?!/)(?!.*\.\.)[A-Za-z0-9_./-]+\.dtb$"),
                        what="DTB paths under arch/<arch>/boot/dts/ (e.g. "
                             "nxp/imx/imx6q-sabrelite.dtb)"),
            cmdline=cmdline, isolcpus=isolcpus, fragments=fragments,
            description=_text(display, entry, "description") if "description" in entry
            else "",
            configs_dir=configs_dir)
    return boards


def load_flavours(path: Path = FLAVOURS_FILE,
                  configs_dir: Path | None = None) -> dict[str, KernelFlavour]:
    """The flavours of ``flavours.yaml`` by name; fragments are looked up in
    ``configs_dir`` (default: ``configs/`` next to the file)."""
    configs_dir = path.parent / "configs" if configs_dir is None else configs_dir
    display, data = _entries(path, "flavour")
    flavours = {}
    for name, entry in data.items():
        _keys(display, name, entry, FLAVOUR_KEYS, FLAVOUR_REQUIRED)
        pipeline = entry.get("pipeline", False)
        if not isinstance(pipeline, bool):
            raise KernelSpecError(f"{_where(display, entry, 'pipeline')}: '{name}': "
                                  f"'pipeline' must be true or false, got {pipeline!r}")
        fragments = _names(display, entry, "fragments", pattern=_FRAGMENT,
                           what="fragment file names (*.config)")
        _check_fragments(display, entry, fragments, configs_dir)
        flavours[name] = KernelFlavour(
            name=name, fragments=fragments,
            thresholds=_text(display, entry, "thresholds",
                             pattern=re.compile(f"^({'|'.join(THRESHOLDS_FLAVOURS)})$"),
                             what=f"a thresholds.yaml flavour "
                                  f"({', '.join(THRESHOLDS_FLAVOURS)})"),
            description=_text(display, entry, "description"), configs_dir=configs_dir,
            pipeline=pipeline)
        # the build stage builds one kernel per thresholds flavour
        judged = flavours[name].thresholds
        earlier = [f.name for f in flavours.values()
                   if f.pipeline and f.thresholds == judged and f.name != name]
        if pipeline and earlier:
            raise KernelSpecError(f"{_where(display, entry, 'pipeline')}: '{name}' and "
                                  f"'{earlier[0]}' are both 'pipeline: true' for thresholds "
                                  f"flavour '{judged}': the pipeline builds one")
    return flavours


def board(name: str, path: Path = BOARDS_FILE) -> KernelBoard:
    """One board of ``boards.yaml``; an unknown name lists the valid ones."""
    boards = load_boards(path)
    if name not in boards:
        raise KernelSpecError(f"{repo_display(path)}: no board '{name}' "
                              f"(valid: {', '.join(boards)})")
    return boards[name]


def flavour(name: str, path: Path = FLAVOURS_FILE) -> KernelFlavour:
    """One flavour of ``flavours.yaml``; an unknown name lists the valid ones."""
    flavours = load_flavours(path)
    if name not in flavours:
        raise KernelSpecError(f"{repo_display(path)}: no flavour '{name}' "
                              f"(valid: {', '.join(flavours)})")
    return flavours[name]
