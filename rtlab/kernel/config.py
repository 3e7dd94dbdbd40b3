"""``rtlab kernel config``: the board's defconfig, merged with the board's and the flavour's
fragments by the tree's own ``scripts/kconfig/merge_config.sh``, completed by ``make
olddefconfig`` — then the check that every option a fragment asks for is in the final
.config with the value asked for.

Kconfig drops an option whose dependencies are unmet without a word, and merge_config.sh
only warns (and not at all with ``-m``). A dropped option is an error here: a silently
missing ``CONFIG_PREEMPT_RT=y`` is the classic way an RT lab tests the wrong kernel.
"""

import os
import re
import subprocess
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import attr

from rtlab.artifacts import kconfig
from rtlab.kernel.kconfig_scan import KconfigIndex
from rtlab.kernel.source import SourceTree
from rtlab.kernel.spec import KernelBoard, KernelFlavour
from rtlab.platform.debian import sha256_file
from rtlab.util.paths import repo_display

Progress = Callable[[str], None]

_SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


class KernelConfigError(ValueError):
    """A fragment is malformed, a make step failed, or options were dropped
    (``dropped`` lists them)."""

    def __init__(self, message: str, dropped: Sequence["DroppedOption"] = ()) -> None:
        super().__init__(message)
        self.dropped = tuple(dropped)


@attr.frozen
class Request:
    """One option a fragment asks for: ``value`` is ``n`` for ``# CONFIG_X is not set``."""

    option: str
    value: str
    fragment: Path
    line: int

    @property
    def text(self) -> str:
        return show(self.option, self.value)

    @property
    def where(self) -> str:
        return f"{repo_display(self.fragment)}:{self.line}"


def show(option: str, value: str | None) -> str:
    """An option and value as a .config line (None: not in the file at all)."""
    if value is None:
        return f"{option} absent (not visible with this configuration)"
    return f"# {option} is not set" if value == "n" else f"{option}={value}"


@attr.frozen
class DroppedOption:
    option: str
    requested: str
    """``n`` for "is not set"."""
    actual: str | None
    """The final .config's value (``n``: is not set; None: not in it at all)."""
    fragment: Path
    line: int
    kconfig: tuple[str, ...]
    """Why, where Kconfig tells: ``file:line: depends on EXPERT [=n] && …`` lines."""

    def describe(self) -> str:
        reasons = "".join(f"\n      {reason}" for reason in self.kconfig)
        return (f"{repo_display(self.fragment)}:{self.line}: {show(self.option, self.requested)} "
                f"requested, final .config has {show(self.option, self.actual)}{reasons}")


@attr.frozen
class FragmentFile:
    path: Path
    sha256: str

    @property
    def name(self) -> str:
        return repo_display(self.path)


@attr.frozen
class ConfigResult:
    config: Path
    """``<build_dir>/.config``."""
    build_dir: Path
    board: str
    flavour: str
    defconfig: str
    fragments: tuple[FragmentFile, ...]
    """In merge order: board fragments, the flavour's, then extra ones."""
    config_sha256: str
    requests: tuple[Request, ...]
    """The options the fragments ask for (after overrides), all verified."""
    preemption_model: str | None
    source: SourceTree

    @property
    def requested(self) -> int:
        return len(self.requests)

    def manifest(self) -> dict[str, object]:
        """The configuration part of a build manifest."""
        return {"board": self.board, "flavour": self.flavour, "defconfig": self.defconfig,
                "fragments": [{"name": f.name, "sha256": f.sha256} for f in self.fragments],
                "config_sha256": self.config_sha256, "requested_options": self.requested,
                "preemption_model": self.preemption_model,
                "source": {"version": self.source.version, "origin": self.source.origin,
                           "patches": len(self.source.patches),
                           "series_sha256": self.source.series_sha256}}


def parse_fragment(path: Path) -> list[Request]:
    """The options of one fragment, as merge_config.sh reads them: ``CONFIG_X=value`` and
    ``# CONFIG_X is not set``. Other comments and blank lines are skipped; anything else
    (a typo such as ``CONFIG_X y`` or ``CONFIG_X= y``) is an error, as is an option set
    twice in the same fragment (merge_config.sh would keep both lines)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise KernelConfigError(f"{repo_display(path)}: cannot read: {error.strerror}") from error
    requests: dict[str, Request] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if match := _SET.match(line):
            option, value = match.groups()
            if value != value.strip() or not value:
                raise KernelConfigError(f"{repo_display(path)}:{number}: {line!r}: no value, or "
                                        "spaces around it (Kconfig would not read it)")
        elif match := _UNSET.match(line):
            option, value = match.group(1), "n"
        elif not line or (line.startswith("#") and not re.match(r"^#\s*CONFIG_", line)):
            continue
        else:
            raise KernelConfigError(
                f"{repo_display(path)}:{number}: {line!r} is not a config line (expected "
                "CONFIG_X=value or '# CONFIG_X is not set'; comments must not start with "
                "'# CONFIG_')")
        if option in requests:
            raise KernelConfigError(f"{repo_display(path)}:{number}: {option} is already set on "
                                    f"line {requests[option].line} of this fragment")
        requests[option] = Request(option, value, path, number)
    return list(requests.values())


def merge_requests(fragments: Iterable[Path]) -> dict[str, Request]:
    """The options all fragments ask for, a later fragment overriding an earlier one as in
    merge_config.sh; the order is the first request's order."""
    merged: dict[str, Request] = {}
    for fragment in fragments:
        for request in parse_fragment(fragment):
            merged[request.option] = request
    return merged


def read_config(text: str) -> dict[str, str]:
    """A .config's options: value by name, ``n`` for ``# CONFIG_X is not set``."""
    values = dict(kconfig.options(text))
    for line in text.splitlines():
        if match := _UNSET.match(line.strip()):
            values[match.group(1)] = "n"
    return values


def holds(request: Request, values: dict[str, str]) -> bool:
    actual = values.get(request.option)
    if request.value == "n":
        # an option that is not in the .config at all (invisible) is off too
        return actual in (None, "n")
    return actual == request.value


def verify(requests: Iterable[Request], config_text: str,
           explain: Callable[[str, str, dict[str, str]], list[str]]) -> list[DroppedOption]:
    """The requests the final .config does not hold, each with Kconfig's reasons
    (``explain(symbol, requested, values-by-symbol)``)."""
    values = read_config(config_text)
    symbols = {name.removeprefix("CONFIG_"): value for name, value in values.items()}
    return [DroppedOption(option=r.option, requested=r.value, actual=values.get(r.option),
                          fragment=r.fragment, line=r.line,
                          kconfig=tuple(explain(r.option.removeprefix("CONFIG_"), r.value,
                                                symbols)))
            for r in requests if not holds(r, values)]


def _make_env() -> dict[str, str]:
    # merge_config.sh reads $KCONFIG_CONFIG and the prefix from $CONFIG_; an inherited
    # value of either would write or read the wrong file
    env = {k: v for k, v in os.environ.items()
           if k not in ("KCONFIG_CONFIG", "CONFIG_", "KCONFIG_ALLCONFIG", "ARCH",
                        "CROSS_COMPILE")}
    env["LC_ALL"] = "C"
    return env


def _run(argv: list[str], cwd: Path, what: str) -> str:
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False,
                              env=_make_env())
    except FileNotFoundError as error:
        raise KernelConfigError(f"{what}: {argv[0]} is not installed (scripts/bootstrap.sh "
                                "kernel-source installs the kernel tools)") from error
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise KernelConfigError(f"{what}: `{' '.join(argv)}` failed (exit "
                                f"{proc.returncode}):\n{tail}")
    return proc.stdout


def configure(tree: SourceTree, build_dir: Path, board: KernelBoard, flavour: KernelFlavour,
              progress: Progress = print, extra_fragments: Sequence[Path] = ()
              ) -> ConfigResult:
    """Write ``build_dir/.config`` (``build_dir`` is the out-of-tree ``O=`` folder; keep
    its absolute path stable, ccache hits depend on it) for ``board`` × ``flavour``:
    defconfig, then the board's fragments, the flavour's and ``extra_fragments`` in that
    order, then olddefconfig; and verify every requested option. Raises
    :class:`KernelConfigError` listing every dropped option."""
    fragments = [*board.fragment_files(), *flavour.fragment_files(),
                 *(Path(f).resolve() for f in extra_fragments)]
    # read the fragments first: a malformed one fails before any make runs
    requests = merge_requests(fragments)
    build_dir = build_dir.resolve()
    text = resolve_config(tree, build_dir, board, fragments, progress,
                          label=f"{board.name}-{flavour.name}")
    config = build_dir / ".config"
    dropped = verify(requests.values(), text,
                     KconfigIndex(tree.path, board.arch).explain)
    if dropped:
        raise KernelConfigError(
            f"{board.name}-{flavour.name}: {len(dropped)} of {len(requests)} requested "
            f"option(s) not in the final {config}:\n"
            + "\n".join(f"  {d.describe()}" for d in dropped), dropped)
    return ConfigResult(
        config=config, build_dir=build_dir, board=board.name, flavour=flavour.name,
        defconfig=board.defconfig,
        fragments=tuple(FragmentFile(f, sha256_file(f)) for f in fragments),
        config_sha256=sha256_file(config), requests=tuple(requests.values()),
        preemption_model=kconfig.preemption_model(text), source=tree)


def resolve_config(tree: SourceTree, build_dir: Path, board: KernelBoard,
                   fragments: Sequence[Path], progress: Progress = print, *,
                   label: str = "") -> str:
    """``build_dir/.config`` as kconfig resolves the board's defconfig with ``fragments``
    merged in order (olddefconfig), and its text; nothing is verified (configure does
    that; a bisection asks what kconfig makes of a set of options)."""
    label = label or board.name
    build_dir.mkdir(parents=True, exist_ok=True)
    make = ["make", "-C", str(tree.path), f"O={build_dir}", *board.make_vars]
    progress(f"{label}: {board.defconfig} in {build_dir}")
    _run([*make, board.defconfig], build_dir, f"make {board.defconfig}")
    progress(f"{label}: merging {len(fragments)} fragment(s): "
             f"{', '.join(repo_display(f) for f in fragments)}")
    # -m: only merge (the script's own make step would be alldefconfig on the merged file,
    # not olddefconfig on the defconfig); -O: the .config in build_dir, not in the tree.
    # It writes temporary files into its working folder: build_dir, never the tree.
    _run(["sh", str(tree.path / "scripts" / "kconfig" / "merge_config.sh"), "-m", "-O",
          str(build_dir), str(build_dir / ".config"), *map(str, fragments)], build_dir,
         "merge_config.sh")
    _run([*make, "olddefconfig"], build_dir, "make olddefconfig")
    return (build_dir / ".config").read_text()


def comment_out(fragments: Iterable[Path], chosen: Callable[[str], bool], note: str
                ) -> list[str]:
    """Every request of ``fragments`` whose option ``chosen`` picks turned into the comment
    ``# <note>: <line>``, line numbers kept (errors still name the right line); returns
    ``<file>:<line>: <request>`` of each."""
    done = []
    for fragment in fragments:
        lines = fragment.read_text().splitlines(keepends=True)
        changed = False
        for number, raw in enumerate(lines, 1):
            line = raw.strip()
            match = _SET.match(line) or _UNSET.match(line)
            if match and chosen(match.group(1)):
                done.append(f"{fragment.name}:{number}: {line}")
                lines[number - 1] = f"# {note}: {line}\n"
                changed = True
        if changed:
            fragment.write_text("".join(lines))
    return done
