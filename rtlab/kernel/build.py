"""Cross-compiling a board's kernel from source: configure (``rtlab.kernel.config``), then
``make`` the image, the DTBs and (when the config has them) the modules out of tree with
ccache, and hand the result on as the image builder's input: a folder with the files and
``kernel.json``, whose ``build`` key is the build manifest that every image manifest and
result record made from this kernel carries."""

import datetime
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

import attr

from rtlab.artifacts import kconfig
from rtlab.artifacts.kernel_info import KernelInfo, write_kernel_info
from rtlab.kernel import spec
from rtlab.kernel.config import ConfigResult, configure
from rtlab.kernel.source import SourceTree, prepare_source
from rtlab.platform.debian import sha256_file
from rtlab.util.paths import kernel_cache_dir

Progress = Callable[[str], None]

MODULES_TARBALL = "modules.tar.gz"
CONFIG_FILE = "config"
DTB_DIR = "dtbs"
# the kernel's list of drivers built in that would otherwise be modules: the image
# builder counts those of a board's module list as present (nothing to insmod)
BUILTIN_FILES = ("modules.builtin", "modules.builtin.modinfo")
DEFAULT_JOBS = 3
# kernel ARCH -> the Debian architecture of the userland the image builder puts beside it
DEBIAN_ARCH = {"arm": "armhf", "arm64": "arm64"}
# a line of make's output that is worth showing in full even in compact mode
_NOTABLE = re.compile(r"(\bwarning:|\berror:|\*\*\*|Error \d)", re.IGNORECASE)
_OBJECT_LINE = re.compile(r"^\s{2}[A-Z0-9_]+\s+\S")


class KernelBuildError(RuntimeError):
    """The kernel did not build; the message ends with the last lines make printed."""


@attr.frozen
class BuildResult:
    folder: Path
    """out/<board>-<flavour>: the image, DTBs, config, modules (if any), kernel.json."""
    info: KernelInfo
    """kernel.json as written."""

    @property
    def build_seconds(self) -> float:
        return float((self.info.build or {})["build_seconds"])


def default_ccache_dir() -> Path:
    """``RTLAB_CCACHE_DIR``, else ``<kernel cache>/ccache``: the folder a CI pipeline keeps
    between runs (hits need the same absolute build folder, see default_build_dir)."""
    value = os.environ.get("RTLAB_CCACHE_DIR")
    return Path(value).resolve() if value else kernel_cache_dir() / "ccache"


def default_build_dir(board: str, flavour: str) -> Path:
    """One build folder per board x flavour, at a fixed path: ccache keys on the compiler's
    arguments, which name the build folder absolutely, and make's own incremental build
    needs the previous objects."""
    return kernel_cache_dir() / "build" / f"{board}-{flavour}"


def build_kernel(
    board_name: str,
    flavour_name: str,
    out_dir: Path,
    *,
    source: str | None = None,
    build_dir: Path | None = None,
    ccache_dir: Path | None = None,
    extra_fragments: Sequence[Path] = (),
    kernel_dir: Path | None = None,
    jobs: int = DEFAULT_JOBS,
    verbose: bool = False,
    progress: Progress = print,
) -> BuildResult:
    """Configure and build ``board_name`` x ``flavour_name`` (names of kernel/boards.yaml
    and kernel/flavours.yaml) into ``out_dir/<board>-<flavour>/``.

    ``extra_fragments`` go on top of the flavour's (a one-off experiment, or a test's
    changed option); they are verified and recorded like the others. ``kernel_dir``: the
    boards, flavours, fragments, source pin and patches of another ``kernel/`` folder than
    the repository's (a bisection builds each commit's own)."""
    if kernel_dir is None:
        board = spec.board(board_name)
        flavour = spec.flavour(flavour_name)
    else:
        board = spec.board(board_name, kernel_dir / "boards.yaml")
        flavour = spec.flavour(flavour_name, kernel_dir / "flavours.yaml")
    build_dir = (build_dir or default_build_dir(board.name, flavour.name)).resolve()
    ccache_dir = (ccache_dir or default_ccache_dir()).resolve()
    # the source is prepared once per machine (bootstrap's kernel-source step): the build
    # time is configure + make + collect
    tree = prepare_source(source, kernel_cache_dir(), progress, kernel_dir=kernel_dir)
    started = time.monotonic()
    build_dir.mkdir(parents=True, exist_ok=True)
    env = _build_env(board, ccache_dir)
    ccache_before = _ccache_stats(env)
    config = configure(tree, build_dir, board, flavour, progress,
                       extra_fragments=tuple(Path(p).resolve() for p in extra_fragments))
    config_text = config.config.read_text()
    modules = kconfig.options(config_text).get("CONFIG_MODULES") == "y"
    targets = [board.image, *board.dtbs] + (["modules"] if modules else [])
    progress(f"{board.name}-{flavour.name}: make -j{jobs} {' '.join(targets)} in {build_dir} "
             f"(ccache {ccache_dir})")
    _, compiled = _make(tree, build_dir, board, env, [f"-j{jobs}", *targets], progress,
                        verbose, started)
    release = _make(tree, build_dir, board, env, ["-s", "kernelrelease"], None, False,
                    started)[0].strip()
    if not release.startswith(tree.version):
        # the tree's localversion files did not reach the release (a '~' in the tree's
        # path makes kbuild skip them): the board would report another kernel's name
        raise KernelBuildError(f"make kernelrelease says {release!r}, but the tree "
                               f"{tree.path} is {tree.version!r}")
    # how much of the tree this build compiled: says "incremental" better than seconds
    objects = sum(1 for _ in build_dir.rglob("*.o"))
    dest = out_dir / f"{board.name}-{flavour.name}"
    work = Path(tempfile.mkdtemp(prefix=f".{board.name}-{flavour.name}.", dir=_mkdir(out_dir)))
    try:
        files = _collect(tree, build_dir, board, env, modules, work, progress, started)
        build_seconds = round(time.monotonic() - started, 1)
        ccache = _ccache_delta(ccache_before, _ccache_stats(env))
        manifest = _build_manifest(board, flavour, config, config_text, release,
                                   build_seconds, ccache, ccache_dir, build_dir, jobs)
        manifest["compiled"] = {"steps": compiled, "objects_in_build_dir": objects}
        info = _kernel_info(board, flavour, DEBIAN_ARCH[board.arch], tree, config,
                            config_text, release, files, manifest)
        write_kernel_info(work, info)
        if dest.exists():
            shutil.rmtree(dest)
        work.rename(dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    progress(f"{board.name}-{flavour.name}: {release} ({info.preemption}) built in "
             f"{build_seconds:.0f} s, ccache {ccache.get('hits')} hits / "
             f"{ccache.get('misses')} misses: {dest}")
    return BuildResult(folder=dest, info=info)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _build_env(board: spec.KernelBoard, ccache_dir: Path) -> dict[str, str]:
    """The environment of every make run: ccache in front of the cross compiler through a
    masquerade folder first in PATH (so CC stays ``<prefix>gcc``, the same text configure
    saw; a different CC would make kbuild re-run Kconfig), and build user/host fixed, so
    that the kernel's version string does not depend on the runner."""
    ccache = shutil.which("ccache")
    env = {**os.environ, "KBUILD_BUILD_USER": "rtlab", "KBUILD_BUILD_HOST": "rtlab"}
    if ccache is None:
        return env
    masquerade = _mkdir(ccache_dir / "bin")
    for compiler in (f"{board.cross_compile}gcc", "gcc"):
        link = masquerade / compiler
        if not link.is_symlink() or os.readlink(link) != ccache:
            link.unlink(missing_ok=True)
            link.symlink_to(ccache)
    env["PATH"] = f"{masquerade}{os.pathsep}{env.get('PATH', '')}"
    env["CCACHE_DIR"] = str(ccache_dir)
    # with debug info on, ccache would hash the cwd into every entry; the build folder is
    # named absolutely in the arguments anyway, and a fixed one is what hits need
    env.setdefault("CCACHE_NOHASHDIR", "1")
    return env


def _make(tree: SourceTree, build_dir: Path, board: spec.KernelBoard, env: dict[str, str],
          args: list[str], progress: Progress | None, verbose: bool,
          started: float) -> tuple[str, int]:
    """Run make in the source tree with O=build_dir. With ``progress``: a line every
    15 s (elapsed time, kbuild steps so far, the latest one) or every line with
    ``verbose``; warnings and errors always in full. Returns the output (without
    ``progress``, for -s queries) and the number of kbuild steps (CC, LD, DTC … lines)."""
    argv = ["make", "-C", str(tree.path), f"O={build_dir}", *board.make_vars, *args]
    tail: deque[str] = deque(maxlen=40)
    output: list[str] = []
    built = 0
    last_report = time.monotonic()
    try:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
    except FileNotFoundError as error:
        raise KernelBuildError("make is not installed (scripts/bootstrap.sh "
                               "kernel-source installs the kernel tools)") from error
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        tail.append(line)
        if progress is None:
            output.append(line)
            continue
        if _OBJECT_LINE.match(line):
            built += 1
        now = time.monotonic()
        if verbose or _NOTABLE.search(line):
            progress(f"[{_clock(now - started)}] {line}")
        elif now - last_report >= 15:
            progress(f"[{_clock(now - started)}] {built} steps, at {line.strip()}")
            last_report = now
    if proc.wait() != 0:
        raise KernelBuildError(f"`{' '.join(argv)}` failed (exit {proc.returncode}); last "
                               "lines:\n" + "\n".join(tail))
    return "\n".join(output), built


def _clock(seconds: float) -> str:
    return f"{int(seconds) // 60:02d}:{int(seconds) % 60:02d}"


def _collect(tree: SourceTree, build_dir: Path, board: spec.KernelBoard, env: dict[str, str],
             modules: bool, work: Path, progress: Progress, started: float) -> dict:
    """Copy what the image builder needs into ``work``; returns name -> file facts."""
    files: dict = {}
    image = build_dir / board.image_path
    shutil.copyfile(image, work / board.image)
    files["image"] = _fact(work, work / board.image)
    dtbs = []
    for dtb, built in zip(board.dtbs, board.dtb_paths, strict=True):
        target = work / DTB_DIR / dtb
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(build_dir / built, target)
        dtbs.append(_fact(work, target))
    files["dtbs"] = dtbs
    shutil.copyfile(build_dir / ".config", work / CONFIG_FILE)
    files["config"] = _fact(work, work / CONFIG_FILE)
    if modules:
        with tempfile.TemporaryDirectory(dir=work) as staging:
            _make(tree, build_dir, board, env, ["-s", "modules_install",
                                                f"INSTALL_MOD_PATH={staging}",
                                                "INSTALL_MOD_STRIP=1"], progress, False,
                  started)
            with tarfile.open(work / MODULES_TARBALL, "w:gz") as tar:
                # owner and times fixed: the tarball's hash then says whether modules changed
                tar.add(Path(staging) / "lib", arcname="lib", filter=_plain_member)
        files["modules"] = _fact(work, work / MODULES_TARBALL)
    else:
        files["modules"] = None
    # also without modules: the image builder reads which drivers are built in
    builtin = []
    for name in BUILTIN_FILES:
        if (build_dir / name).is_file():
            shutil.copyfile(build_dir / name, work / name)
            builtin.append(_fact(work, work / name))
    files["builtin"] = builtin
    return files


def _plain_member(member: tarfile.TarInfo) -> tarfile.TarInfo:
    member.uid = member.gid = 0
    member.uname = member.gname = "root"
    member.mtime = 0
    return member


def _fact(root: Path, path: Path) -> dict:
    return {"file": path.relative_to(root).as_posix(), "sha256": sha256_file(path),
            "size": path.stat().st_size}


def _toolchain(board: spec.KernelBoard) -> str:
    compiler = f"{board.cross_compile}gcc"
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise KernelBuildError(f"{compiler} --version failed: {error}") from error
    return out.splitlines()[0].strip() if out else compiler


def _ccache_stats(env: dict[str, str]) -> dict[str, int] | None:
    """ccache's counters (hits and misses over all its users), or None without ccache."""
    if "CCACHE_DIR" not in env:
        return None
    proc = subprocess.run(["ccache", "--print-stats"], env=env, capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        return None
    stats = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("\t")
        if value.strip().isdigit():
            stats[key] = int(value)
    return stats


def _ccache_delta(before: dict[str, int] | None, after: dict[str, int] | None) -> dict:
    """Hits and misses of this build: the counters' difference (another build sharing
    the cache at the same time would be counted too; with one build at a time, exact)."""
    if before is None or after is None:
        return {"hits": None, "misses": None}

    def diff(*keys: str) -> int:
        return sum(after.get(k, 0) - before.get(k, 0) for k in keys)

    return {"hits": diff("direct_cache_hit", "preprocessed_cache_hit"),
            "misses": diff("cache_miss"),
            "size_kib": after.get("cache_size_kibibyte")}


def _build_manifest(board: spec.KernelBoard, flavour: spec.KernelFlavour,
                    config: ConfigResult, config_text: str, release: str,
                    build_seconds: float, ccache: dict, ccache_dir: Path, build_dir: Path,
                    jobs: int) -> dict:
    # configure's part: board, flavour, defconfig, fragments with SHA-256, final .config
    # SHA-256, requested options, preemption model, source version/origin/patch series
    return {
        **config.manifest(),
        "thresholds_flavour": flavour.thresholds,
        "hz": kconfig.hz(config_text),
        "modules": kconfig.options(config_text).get("CONFIG_MODULES") == "y",
        "toolchain": _toolchain(board),
        "kernel_release": release,
        "build_seconds": build_seconds,
        "built_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "make_jobs": jobs,
        "build_dir": str(build_dir),
        "ccache": {**ccache, "dir": str(ccache_dir)},
        "cmdline": board.full_cmdline,
    }


def _kernel_info(board: spec.KernelBoard, flavour: spec.KernelFlavour, arch: str,
                 tree: SourceTree, config: ConfigResult, config_text: str, release: str,
                 files: dict, manifest: dict) -> KernelInfo:
    """kernel.json: what ``rtlab image build --kernel`` reads (schema rtlab.kernel/2,
    ``source: build``)."""
    # one hash over everything that goes on the card from here, the command line
    # included: the image builder rebuilds exactly when this changes
    digest = hashlib.sha256()
    for fact in [files["image"], *files["dtbs"], files["config"], files["modules"],
                 *files["builtin"]]:
        if fact is not None:
            digest.update(f"{fact['file']} {fact['sha256']}\n".encode())
    digest.update(f"cmdline {board.full_cmdline}\n".encode())
    return KernelInfo(
        source="build", board=board.name,
        # the image's flavour is the one thresholds.yaml judges it by
        flavour=flavour.thresholds, kernel_flavour=flavour.name, arch=arch,
        package=f"linux-image-{release}",
        version=f"{tree.version}+rtlab.{config.config_sha256[:12]}", release=release,
        preemption=config.preemption_model, hz=manifest["hz"], cmdline=board.full_cmdline,
        files=files, sha256=digest.hexdigest(), build=manifest)
