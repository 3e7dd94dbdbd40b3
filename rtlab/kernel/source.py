"""The kernel source tree a build starts from: the pinned Debian source package with its
PREEMPT_RT series (``kernel/source.yaml``), or a tree, tarball or git repository a lab
names instead. Everything fetched or unpacked is kept in the cache, so a second call is
instant."""

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import attr
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from rtlab.platform.debian import sha256_file
from rtlab.util.paths import REPO_ROOT
from rtlab.util.yamlfile import YamlFileError, line_of, load_yaml

SOURCE_FILE = REPO_ROOT / "kernel" / "source.yaml"
# rtlab's own patches (kernel/patches/series), applied after the Debian source's RT series
PATCHES_DIR = REPO_ROOT / "kernel" / "patches"
STAMP = ".rtlab-source.json"
"""Written into a prepared tree last: a tree without it is incomplete (an interrupted run)."""
_TARBALL = re.compile(r"\.(tar|tar\.gz|tgz|tar\.xz|txz|tar\.bz2|tbz2|tar\.zst)$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")

Progress = Callable[[str], None]


class KernelSourceError(RuntimeError):
    """The kernel source could not be fetched, verified, unpacked or patched, or is not a
    kernel tree."""


@attr.frozen
class SourceTree:
    path: Path
    version: str
    """The kernel version the tree builds (Makefile + localversion* files: 6.12.100-rt15)."""
    origin: str
    """Where the tree comes from, for manifests and people."""
    patches: tuple[str, ...] = ()
    """The patches rtlab applied on top (file names, in order)."""
    series_sha256: str | None = None
    """SHA-256 of the applied patches' contents, in order (None: none applied)."""


@attr.frozen
class DebianFile:
    name: str
    sha256: str


@attr.frozen
class DebianSource:
    """A Debian source package pinned by version and file hashes, and the patch series
    inside it that rtlab applies after Debian's own patches."""

    package: str
    version: str
    base_url: str
    files: tuple[DebianFile, ...]
    patch_series: str

    @property
    def dsc(self) -> DebianFile:
        return next(f for f in self.files if f.name.endswith(".dsc"))

    @property
    def tree_name(self) -> str:
        # no '~' (Debian's "1~deb12u1"): the kernel's setlocalversion skips every
        # localversion* file whose path has one (editor backups), and the tree's
        # localversion-rt is what makes the release 6.12.100-rt15 rather than 6.12.100
        return f"{self.package}-{self.version}-rt".replace("~", "_")


def load_source(path: Path = SOURCE_FILE) -> DebianSource:
    """The pinned default source of ``kernel/source.yaml``."""
    data = load_yaml(path)
    keys = {"package", "version", "base_url", "files", "patch_series"}
    if not isinstance(data, CommentedMap):
        raise YamlFileError(f"{path}:{line_of(data)}: expected a mapping with "
                            f"{', '.join(sorted(keys))}")
    for key in data:
        if key not in keys:
            raise YamlFileError(f"{path}:{line_of(data, key)}: unknown key {key!r} "
                                f"(valid: {', '.join(sorted(keys))})")
    for key in sorted(keys - set(data)):
        raise YamlFileError(f"{path}:{line_of(data)}: missing {key!r}")
    for key in sorted(keys - {"files"}):
        if not isinstance(data[key], str) or not data[key]:
            raise YamlFileError(f"{path}:{line_of(data, key)}: {key!r} must be a string")
    files = data["files"]
    if not isinstance(files, CommentedSeq) or not files:
        raise YamlFileError(f"{path}:{line_of(data, 'files')}: 'files' must be a list of "
                            "{name, sha256}")
    parsed = []
    for index, item in enumerate(files):
        if (not isinstance(item, CommentedMap) or set(item) != {"name", "sha256"}
                or not isinstance(item["name"], str) or "/" in item["name"]
                or not _SHA256.match(str(item["sha256"]))):
            raise YamlFileError(f"{path}:{line_of(files, index)}: expected "
                                "{name: <file name>, sha256: <64 hex digits>}")
        parsed.append(DebianFile(item["name"], item["sha256"]))
    if sum(f.name.endswith(".dsc") for f in parsed) != 1:
        raise YamlFileError(f"{path}:{line_of(data, 'files')}: exactly one .dsc file expected")
    return DebianSource(package=data["package"], version=data["version"],
                        base_url=data["base_url"].rstrip("/") + "/", files=tuple(parsed),
                        patch_series=data["patch_series"])


def _run(argv: list[str], *, cwd: Path | None = None, what: str) -> str:
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as error:
        raise KernelSourceError(f"{what}: {argv[0]} is not installed (scripts/bootstrap.sh "
                                "kernel-source installs the kernel tools)") from error
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise KernelSourceError(f"{what}: `{' '.join(argv)}` failed (exit "
                                f"{proc.returncode}):\n{tail}")
    return proc.stdout


def check_kernel_tree(path: Path) -> None:
    """Refuse a folder that is not a kernel source tree rtlab can configure."""
    makefile = path / "Makefile"
    if not makefile.is_file() or not re.search(r"^VERSION = \d+", makefile.read_text(
            errors="replace"), re.M):
        raise KernelSourceError(f"{path}: not a kernel source tree (no Makefile with "
                                "VERSION =)")
    if not (path / "scripts" / "kconfig" / "merge_config.sh").is_file():
        raise KernelSourceError(f"{path}: no scripts/kconfig/merge_config.sh (too old a "
                                "kernel, or not a kernel source tree)")


def kernel_version(path: Path) -> str:
    """VERSION.PATCHLEVEL.SUBLEVEL EXTRAVERSION of the Makefile, plus the localversion*
    files of the tree (the RT series adds ``localversion-rt``: ``-rt15``)."""
    text = (path / "Makefile").read_text(errors="replace")
    fields = {key: (m.group(1).strip() if (m := re.search(rf"^{key} =(.*)$", text, re.M))
                    else "") for key in ("VERSION", "PATCHLEVEL", "SUBLEVEL", "EXTRAVERSION")}
    version = ".".join(fields[k] for k in ("VERSION", "PATCHLEVEL", "SUBLEVEL") if fields[k])
    local = "".join(p.read_text(errors="replace").strip()
                    for p in sorted(path.glob("localversion*")) if p.is_file())
    return version + fields["EXTRAVERSION"] + local


def _stamp(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads((path / STAMP).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _tree(path: Path, stamp: dict[str, object]) -> SourceTree:
    patches = stamp.get("patches")
    series_sha = stamp.get("series_sha256")
    return SourceTree(path=path, version=kernel_version(path),
                      origin=str(stamp.get("origin", f"tree {path}")),
                      patches=tuple(map(str, patches)) if isinstance(patches, list) else (),
                      series_sha256=series_sha if isinstance(series_sha, str) else None)


def _install(tmp_tree: Path, dest: Path, stamp: dict[str, object]) -> None:
    """Move a finished tree into place under its final name (after writing the stamp),
    replacing an incomplete one left by an interrupted run."""
    (tmp_tree / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")
    if dest.exists():
        stale = dest.with_name(f".stale-{dest.name}-{os.getpid()}")
        dest.rename(stale)
        shutil.rmtree(stale, ignore_errors=True)
    tmp_tree.rename(dest)


@contextlib.contextmanager
def _locked(cache_dir: Path) -> Iterator[None]:
    """One preparation at a time per cache (parallel CI jobs sharing it): the second waits,
    then finds the tree the first made."""
    (cache_dir / "src").mkdir(parents=True, exist_ok=True)
    with (cache_dir / "src" / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _download(source: DebianSource, downloads: Path, progress: Progress) -> None:
    downloads.mkdir(parents=True, exist_ok=True)
    for file in source.files:
        target = downloads / file.name
        if target.is_file():
            actual = sha256_file(target)
            if actual == file.sha256:
                continue
            raise KernelSourceError(
                f"{target}: SHA-256 {actual}, kernel/source.yaml pins {file.sha256} (a "
                "corrupt or different download: delete it to fetch it again)")
        # '~' in Debian versions is percent-encoded as the archive's own indexes do; some
        # mirrors and proxies mishandle it as is
        url = source.base_url + file.name.replace("~", "%7e")
        progress(f"downloading {url}")
        with tempfile.NamedTemporaryFile(dir=downloads, prefix=".part-",
                                         delete=False) as part:
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    shutil.copyfileobj(response, part, 1 << 20)
                part.close()
                actual = sha256_file(Path(part.name))
                if actual != file.sha256:
                    raise KernelSourceError(f"{url}: SHA-256 {actual}, kernel/source.yaml "
                                            f"pins {file.sha256}: refusing the download")
                Path(part.name).rename(target)
            except OSError as error:
                raise KernelSourceError(f"{url}: download failed: {error}") from error
            finally:
                Path(part.name).unlink(missing_ok=True)


def _series(tree: Path, series: str) -> list[Path]:
    series_file = tree / series
    if not series_file.is_file():
        raise KernelSourceError(f"{series_file}: no patch series in the unpacked source")
    names = [line.split("#", 1)[0].strip() for line in series_file.read_text().splitlines()]
    return [series_file.parent / name for name in names if name]


def _apply(tree: Path, patches: list[Path], progress: Progress) -> str:
    digest = hashlib.sha256()
    for index, patch in enumerate(patches, 1):
        digest.update(patch.read_bytes())
        _run(["patch", "-p1", "--forward", "--batch", "--quiet", "-i", str(patch)], cwd=tree,
             what=f"patch {index}/{len(patches)} {patch.parent.name}/{patch.name} does not "
                  "apply")
    folders = sorted({patch.parent.name for patch in patches})
    progress(f"applied {len(patches)} patches ({', '.join(folders)})" if patches
             else "no patches in the series")
    return digest.hexdigest()


def _own_patches(patches_dir: Path) -> list[Path]:
    return _series(patches_dir, "series") if (patches_dir / "series").is_file() else []


def _wanted(spec: DebianSource, own: list[Path]) -> dict[str, str]:
    # rtlab's patches are inputs like the pinned files: a changed one prepares the tree anew
    return {f.name: f.sha256 for f in spec.files} | {
        f"kernel/patches/{p.name}": sha256_file(p) for p in own}


def _debian(cache_dir: Path, progress: Progress, spec: DebianSource,
            patches_dir: Path = PATCHES_DIR, tree_name: str | None = None) -> SourceTree:
    dest = cache_dir / "src" / (tree_name or spec.tree_name)
    own = _own_patches(patches_dir)
    wanted = _wanted(spec, own)
    stamp = _stamp(dest)
    if stamp is not None and stamp.get("files") == wanted:
        return _tree(dest, stamp)
    _download(spec, cache_dir / "downloads", progress)
    with tempfile.TemporaryDirectory(dir=cache_dir / "src", prefix=".tmp-") as tmp:
        tree = Path(tmp) / "tree"
        progress(f"dpkg-source -x {spec.dsc.name} (about 40 s)")
        _run(["dpkg-source", "--no-check", "-x", str(cache_dir / "downloads" / spec.dsc.name),
              str(tree)], what=f"unpacking {spec.package} {spec.version}")
        patches = _series(tree, spec.patch_series)
        progress(f"applying {spec.patch_series} ({len(patches)} patches)")
        if own:
            progress(f"applying kernel/patches/series ({len(own)} patches)")
        series_sha = _apply(tree, [*patches, *own], progress)
        check_kernel_tree(tree)
        _install(tree, dest, {
            "origin": f"Debian source package {spec.package} {spec.version} + "
                      f"{spec.patch_series} ({len(patches)} patches)"
                      + (f" + kernel/patches/series ({len(own)})" if own else ""),
            "files": wanted, "patches": [p.name for p in [*patches, *own]],
            "series_sha256": series_sha})
    return _tree(dest, _stamp(dest) or {})


def _tarball(tarball: Path, cache_dir: Path, progress: Progress) -> SourceTree:
    digest = sha256_file(tarball)
    dest = cache_dir / "src" / f"tarball-{digest[:16]}"
    stamp = _stamp(dest)
    if stamp is not None and stamp.get("sha256") == digest:
        return _tree(dest, stamp)
    with tempfile.TemporaryDirectory(dir=cache_dir / "src", prefix=".tmp-") as tmp:
        unpacked = Path(tmp) / "unpacked"
        unpacked.mkdir()
        progress(f"unpacking {tarball}")
        _run(["tar", "-xf", str(tarball), "-C", str(unpacked)], what=f"unpacking {tarball}")
        # kernel tarballs hold one top folder (linux-6.12.100/); accept a flat one too
        entries = list(unpacked.iterdir())
        tree = entries[0] if len(entries) == 1 and entries[0].is_dir() else unpacked
        check_kernel_tree(tree)
        _install(tree, dest, {"origin": f"tarball {tarball.name} (sha256 {digest})",
                              "sha256": digest})
    return _tree(dest, _stamp(dest) or {})


def split_git_ref(source: str) -> tuple[str, str | None]:
    """``URL@ref`` → (URL, ref); a bare URL → (URL, None). The '@' of ``git@host:path``
    or ``https://user@host/...`` is part of the URL, not a ref."""
    left, at, ref = source.rpartition("@")
    if not at:
        return source, None
    location = left.split("://", 1)[1] if "://" in left else left
    if ("/" in location or ":" in location) and ref and ":" not in ref:
        return left, ref
    return source, None


def is_git_url(source: str) -> bool:
    return (source.startswith(("git://", "git@", "ssh://", "https://", "http://", "file://"))
            or split_git_ref(source)[0].endswith(".git"))


def _git(source: str, cache_dir: Path, progress: Progress) -> SourceTree:
    url, ref = split_git_ref(source)
    key = hashlib.sha256(f"{url}@{ref or ''}".encode()).hexdigest()[:16]
    dest = cache_dir / "src" / f"git-{key}"
    stamp = _stamp(dest)
    if stamp is not None and stamp.get("source") == source:
        return _tree(dest, stamp)
    with tempfile.TemporaryDirectory(dir=cache_dir / "src", prefix=".tmp-") as tmp:
        tree = Path(tmp) / "tree"
        progress(f"shallow clone of {url} at {ref or 'its default branch'}")
        _run(["git", "init", "-q", str(tree)], what=f"cloning {url}")
        # fetch by ref rather than clone --branch: works for tags, branches and (on servers
        # that allow it) commit ids alike
        _run(["git", "-C", str(tree), "fetch", "-q", "--depth", "1", url, ref or "HEAD"],
             what=f"fetching {ref or 'HEAD'} of {url}")
        _run(["git", "-C", str(tree), "checkout", "-q", "FETCH_HEAD"],
             what=f"checking out {ref or 'HEAD'} of {url}")
        commit = _run(["git", "-C", str(tree), "rev-parse", "HEAD"], what="git").strip()
        check_kernel_tree(tree)
        _install(tree, dest, {"origin": f"git {url} {ref or 'HEAD'} (commit {commit})",
                              "source": source, "commit": commit})
    return _tree(dest, _stamp(dest) or {})


def prepare_source(source: str | None, cache_dir: Path,
                   progress: Progress = print, *, kernel_dir: Path | None = None
                   ) -> SourceTree:
    """The kernel tree to build from.

    ``None``: the pinned Debian source of ``kernel/source.yaml``, downloaded into
    ``cache_dir/downloads`` (SHA-256 verified), unpacked with ``dpkg-source -x`` (Debian's
    own patches) and RT-patched into ``cache_dir/src/<package>-<version>-rt``. A folder:
    that tree, used as it is (nothing is patched). A tarball: unpacked once into the
    cache. A git URL, optionally ``URL@ref``: shallow-cloned once into the cache (a branch
    is fetched once; name a tag or commit for a reproducible build).

    ``kernel_dir``: the pin and the patches of another ``kernel/`` folder than the
    repository's (a bisection's commit); one that differs gets a tree of its own, beside
    the repository's.

    Trees are built in a temporary folder and renamed into place with a stamp file, so an
    interrupted run never leaves a half-patched tree that a later call would trust.
    """
    if source is None:
        if kernel_dir is None:
            spec = load_source()
            with _locked(cache_dir):
                return _debian(cache_dir, progress, spec)
        spec = load_source(kernel_dir / "source.yaml")
        wanted = _wanted(spec, _own_patches(kernel_dir / "patches"))
        name = spec.tree_name
        if wanted != _wanted(load_source(), _own_patches(PATCHES_DIR)):
            digest = hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()
            name = f"{name}-{digest[:12]}"
        with _locked(cache_dir):
            return _debian(cache_dir, progress, spec, kernel_dir / "patches", name)
    path = Path(source).expanduser()
    if path.is_dir():
        path = path.resolve()
        check_kernel_tree(path)
        stamp = _stamp(path)
        if stamp is not None:
            return _tree(path, stamp)
        return SourceTree(path=path, version=kernel_version(path), origin=f"tree {path}")
    if path.is_file() and _TARBALL.search(path.name):
        with _locked(cache_dir):
            return _tarball(path.resolve(), cache_dir, progress)
    if is_git_url(source):
        with _locked(cache_dir):
            return _git(source, cache_dir, progress)
    raise KernelSourceError(f"kernel source {source!r}: not a folder, a tarball "
                            "(.tar, .tar.gz, .tar.xz, ...) or a git URL (URL or URL@ref)")
