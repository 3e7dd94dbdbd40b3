"""Debian packages for a foreign architecture, fetched and unpacked without installing them.

The host's apt (with `dpkg --add-architecture` done) is the only source: metadata comes from
`apt-cache`, archives from `apt-get download`, contents from `dpkg-deb -x`. Nothing is
installed and no root file system tool is needed.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath

import attrs

MULTIARCH_TRIPLETS = {"armhf": "arm-linux-gnueabihf", "arm64": "aarch64-linux-gnu"}

_APT_DEPENDS_FILTER = (
    "--no-recommends",
    "--no-suggests",
    "--no-conflicts",
    "--no-breaks",
    "--no-replaces",
    "--no-enhances",
)


class DebianError(RuntimeError):
    """A package, file or shared library could not be obtained."""


@attrs.frozen
class Candidate:
    """What apt would download for one package name."""

    name: str
    arch: str
    version: str
    sha256: str | None
    size: int | None
    depends: str = ""
    """The Depends field as apt shows it."""

    @property
    def deb_name(self) -> str:
        # apt-get download names files this way: the epoch colon is URL-encoded.
        return f"{self.name}_{self.version.replace(':', '%3a')}_{self.arch}.deb"


@attrs.frozen
class DebPackage:
    name: str
    arch: str
    version: str
    deb: Path
    root: Path
    """The unpacked contents (`dpkg-deb -x`), shared between builds: treat as read-only."""


def _run(argv: list[str], *, cwd: Path | None = None, check: bool = True) -> str:
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise DebianError(f"{argv[0]} is not installed on this host") from exc
    if check and proc.returncode != 0:
        raise DebianError(
            f"`{' '.join(argv)}` failed (exit {proc.returncode}): {proc.stderr.strip()}"
        )
    return proc.stdout


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class Apt:
    """apt-cache / apt-get for one foreign architecture, with a download cache folder."""

    def __init__(
        self, arch: str, cache_dir: Path, progress: Callable[[str], None] = print
    ) -> None:
        self.arch = arch
        self.cache_dir = cache_dir
        self.progress = progress
        self._candidates: dict[str, Candidate] = {}
        self._packages: dict[str, DebPackage] = {}
        self.downloads = 0
        """How many archives this instance fetched from the network (0 on a cached run)."""

    def qualified(self, name: str) -> str:
        return f"{name}:{self.arch}"

    # -- metadata ------------------------------------------------------------------------

    def candidates(self, names: Iterable[str]) -> dict[str, Candidate]:
        names = list(names)
        self.prefetch(names)
        missing = [n for n in names if n not in self._candidates]
        if missing:
            raise DebianError(
                f"no {self.arch} candidate for {', '.join(missing)} in the apt lists "
                f"(is `dpkg --add-architecture {self.arch}` done and `apt-get update` run?)"
            )
        return {n: self._candidates[n] for n in names}

    def prefetch(self, names: Iterable[str]) -> None:
        """Look up many candidates at once: each apt-cache start costs a second or two."""
        wanted = [n for n in dict.fromkeys(names) if n and n not in self._candidates]
        if wanted:
            # Not checked: apt-cache fails for virtual names but still shows all the others;
            # candidates() reports what is really missing.
            out = _run(
                ["apt-cache", "show", "--no-all-versions", *(self.qualified(n) for n in wanted)],
                check=False,
            )
            for stanza in out.split("\n\n"):
                fields = _parse_stanza(stanza)
                if "Package" not in fields:
                    continue
                arch = fields.get("Architecture", "")
                if arch not in (self.arch, "all"):
                    continue
                self._candidates[fields["Package"]] = Candidate(
                    name=fields["Package"],
                    arch=arch,
                    version=fields["Version"],
                    sha256=fields.get("SHA256"),
                    size=int(fields["Size"]) if "Size" in fields else None,
                    depends=fields.get("Depends", ""),
                )

    def available(self, names: Iterable[str]) -> list[str]:
        """Those of names that have a candidate of this architecture (or `all`)."""
        names = list(names)
        self.prefetch(names)
        return [n for n in names if n in self._candidates]

    def candidate(self, name: str) -> Candidate:
        return self.candidates([name])[name]

    def resolve_kernel(self, metapackage: str) -> str:
        """The versioned linux-image-<release> package a kernel metapackage points to."""
        depends = self.candidate(metapackage).depends
        images = []
        for relation in re.split(r"[,|]", depends):
            name = relation.split("(", 1)[0].strip().split(":", 1)[0]
            if re.fullmatch(r"linux-image-\d+\.\d+.*", name):
                images.append(name)
        if len(images) != 1:
            raise DebianError(
                f"{metapackage}:{self.arch} should depend on exactly one versioned "
                f"linux-image package, found: {images or 'none'} in {depends!r}"
            )
        return images[0]

    def depends_graph(self, roots: Iterable[str]) -> dict[str, list[str]]:
        """Package -> direct (pre-)dependencies of this architecture, recursively from roots.

        Alternatives and providers of virtual packages are all listed as edges: whoever
        walks the graph picks the one that actually holds what is looked for.
        """
        out = _run(
            [
                "apt-cache",
                "depends",
                "--recurse",
                *_APT_DEPENDS_FILTER,
                *(self.qualified(r) for r in roots),
            ]
        )
        graph: dict[str, list[str]] = {}
        current: list[str] | None = None
        suffix = f":{self.arch}"
        for line in out.splitlines():
            if not line.strip():
                continue
            if not line.startswith(" "):
                name = line.strip()
                current = None
                if name.endswith(suffix):
                    current = graph.setdefault(name[: -len(suffix)], [])
                continue
            if current is None:
                continue
            relation = re.match(r"\s*\|?([A-Za-z]+): (\S+)$", line)
            if relation:
                if relation.group(1) not in ("Depends", "PreDepends"):
                    continue
                dep = relation.group(2)
                if dep.startswith("<"):
                    continue  # virtual: its providers follow on lines of their own
            else:
                dep = line.strip()  # a provider of the virtual package named above it
            if dep.endswith(suffix):
                current.append(dep[: -len(suffix)])
        return graph

    # -- archives ------------------------------------------------------------------------

    def download(self, names: Iterable[str]) -> None:
        """Make sure the archives are in the cache, fetching the missing ones in one go."""
        missing = []
        for cand in self.candidates(names).values():
            deb = self.cache_dir / cand.deb_name
            if not (deb.is_file() and self._intact(deb, cand)):
                deb.unlink(missing_ok=True)
                missing.append(cand)
        if not missing:
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        for cand in missing:
            size = f" ({cand.size / 1e6:.1f} MB)" if cand.size else ""
            self.progress(f"downloading {cand.name}:{cand.arch} {cand.version}{size}")
        # Sandbox user root: as root apt would drop to _apt, which may not be able to write
        # into the cache folder. One apt-get run for all: each start costs seconds.
        _run(
            [
                "apt-get",
                "download",
                "-q",
                "-o",
                "APT::Sandbox::User=root",
                *(f"{c.name}:{c.arch}={c.version}" for c in missing),
            ],
            cwd=self.cache_dir,
        )
        self.downloads += len(missing)
        for cand in missing:
            deb = self.cache_dir / cand.deb_name
            if not deb.is_file():
                raise DebianError(f"apt-get download {cand.name} did not produce {deb.name}")
            if not self._intact(deb, cand):
                raise DebianError(f"{deb} does not match the SHA256 in the apt lists")

    def fetch(self, name: str) -> DebPackage:
        """Download (unless cached and intact) and unpack (unless already unpacked)."""
        if name in self._packages:
            return self._packages[name]
        self.download([name])
        cand = self.candidate(name)
        deb = self.cache_dir / cand.deb_name
        pkg = DebPackage(
            name=name,
            arch=cand.arch,
            version=cand.version,
            deb=deb,
            root=self._unpack(deb),
        )
        self._packages[name] = pkg
        return pkg

    @staticmethod
    def _intact(deb: Path, cand: Candidate) -> bool:
        if cand.size is not None and deb.stat().st_size != cand.size:
            return False
        return cand.sha256 is None or sha256_file(deb) == cand.sha256

    def _unpack(self, deb: Path) -> Path:
        return unpack(deb, self.cache_dir)


def unpack(deb: Path, cache_dir: Path) -> Path:
    """The archive's contents under cache_dir/unpacked/ (unpacked once, then reused)."""
    root = cache_dir / "unpacked" / deb.name.removesuffix(".deb")
    if root.is_dir():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    # Unpack beside the final name and rename, so an interrupted run leaves no half tree.
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=root.parent))
    try:
        _run(["dpkg-deb", "-x", str(deb), str(tmp)])
        tmp.rename(root)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not root.is_dir():
            raise
        # another build unpacked the same archive meanwhile: theirs is as good
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return root


def _parse_stanza(stanza: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    key = None
    for line in stanza.splitlines():
        if line[:1].isspace() and key:
            fields[key] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


# -- ELF ---------------------------------------------------------------------------------


@attrs.frozen
class ElfInfo:
    needed: tuple[str, ...]
    interpreter: str | None


class _Elf:
    """Just enough of an ELF reader for DT_NEEDED, PT_INTERP and named sections.

    Done in Python so that the host needs neither binutils nor kmod for a foreign arch.
    """

    def __init__(self, data: bytes, path: Path) -> None:
        if data[:4] != b"\x7fELF":
            raise DebianError(f"{path} is not an ELF file")
        self.data = data
        self.is64 = data[4] == 2
        self.end = "<" if data[5] == 1 else ">"
        e = self.end
        if self.is64:
            self.phoff, self.shoff = struct.unpack_from(e + "QQ", data, 0x20)
            self.phentsize, self.phnum, self.shentsize, self.shnum, self.shstrndx = (
                struct.unpack_from(e + "5H", data, 0x36)
            )
        else:
            self.phoff, self.shoff = struct.unpack_from(e + "II", data, 0x1C)
            self.phentsize, self.phnum, self.shentsize, self.shnum, self.shstrndx = (
                struct.unpack_from(e + "5H", data, 0x2A)
            )

    def sections(self) -> Iterator[tuple[str, int, int, int, int]]:
        """(name, type, offset, size, link) of each section."""
        e = self.end
        fmt = e + ("IIQQQQIIQQ" if self.is64 else "10I")
        headers = [
            struct.unpack_from(fmt, self.data, self.shoff + i * self.shentsize)
            for i in range(self.shnum)
        ]
        if not headers:
            return
        strtab_off = headers[self.shstrndx][4]
        for h in headers:
            name_off, sh_type, offset, size, link = h[0], h[1], h[4], h[5], h[6]
            yield self._cstr(strtab_off + name_off), sh_type, offset, size, link

    def section(self, name: str) -> bytes | None:
        for sname, _type, offset, size, _link in self.sections():
            if sname == name:
                return self.data[offset : offset + size]
        return None

    def _cstr(self, offset: int) -> str:
        end = self.data.index(b"\0", offset)
        return self.data[offset:end].decode()

    def info(self) -> ElfInfo:
        e = self.end
        interp = None
        for i in range(self.phnum):
            base = self.phoff + i * self.phentsize
            if self.is64:
                p_type, _flags, p_offset, _va, _pa, p_filesz = struct.unpack_from(
                    e + "IIQQQQ", self.data, base
                )
            else:
                p_type, p_offset, _va, _pa, p_filesz = struct.unpack_from(
                    e + "5I", self.data, base
                )
            if p_type == 3:  # PT_INTERP
                interp = self.data[p_offset : p_offset + p_filesz].rstrip(b"\0").decode()
        sections = list(self.sections())
        needed: list[str] = []
        for _name, sh_type, offset, size, link in sections:
            if sh_type != 6:  # SHT_DYNAMIC
                continue
            strtab = sections[link][2]
            entsize = 16 if self.is64 else 8
            fmt = e + ("qQ" if self.is64 else "iI")
            for pos in range(offset, offset + size, entsize):
                tag, val = struct.unpack_from(fmt, self.data, pos)
                if tag == 0:
                    break
                if tag == 1:  # DT_NEEDED
                    needed.append(self._cstr(strtab + val))
        return ElfInfo(needed=tuple(needed), interpreter=interp)


def is_elf(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


def elf_info(path: Path) -> ElfInfo:
    return _Elf(path.read_bytes(), path).info()


def modinfo(path: Path) -> dict[str, list[str]]:
    """The .modinfo section of a kernel module (depends=, alias=, softdep=, …)."""
    section = _Elf(path.read_bytes(), path).section(".modinfo")
    if section is None:
        raise DebianError(f"{path} has no .modinfo section: not a kernel module?")
    info: dict[str, list[str]] = {}
    for entry in section.split(b"\0"):
        if b"=" in entry:
            key, _, value = entry.decode(errors="replace").partition("=")
            info.setdefault(key, []).append(value)
    return info


# -- guest userland ----------------------------------------------------------------------


@attrs.frozen
class GuestFile:
    path: PurePosixPath
    """Absolute path in the guest."""
    source: Path
    package: str


@attrs.frozen
class Userland:
    files: tuple[GuestFile, ...]
    packages: tuple[DebPackage, ...]
    """Only the packages that contributed at least one file."""


class UserlandResolver:
    """Selected programs from some packages, plus the shared libraries they need, nothing more.

    A soname needed by a file of package P is searched in P and then breadth-first through
    P's dependencies (what dpkg-shlibdeps put there), downloading only the packages visited.
    """

    def __init__(self, apt: Apt, roots: Iterable[str]) -> None:
        self.apt = apt
        self.triplet = MULTIARCH_TRIPLETS[apt.arch]
        self.graph = apt.depends_graph(roots)
        apt.prefetch(self.graph)
        self._files: dict[PurePosixPath, GuestFile] = {}
        self._queue: list[GuestFile] = []
        self._sonames: dict[str, PurePosixPath] = {}
        self._fetched: set[str] = set()

    def add(self, package: str, path: str) -> None:
        """Add one file (absolute guest path, as shipped in the package) and what it needs."""
        pkg = self.apt.fetch(package)
        self._add_path(pkg, PurePosixPath(path), f"requested from {package}")

    def resolve(self) -> Userland:
        while self._queue:
            item = self._queue.pop(0)
            try:
                info = elf_info(item.source)
            except (DebianError, struct.error, ValueError, IndexError) as exc:
                raise DebianError(f"cannot read {item.path} from {item.package}: {exc}") from exc
            if info.interpreter:
                self._add_from_closure(
                    item, PurePosixPath(info.interpreter), f"interpreter of {item.path}"
                )
            for soname in info.needed:
                if soname in self._sonames:
                    continue
                self._sonames[soname] = self._find_soname(item, soname)
        used = {f.package for f in self._files.values()}
        packages = tuple(self.apt.fetch(name) for name in sorted(used))
        return Userland(files=tuple(self._files.values()), packages=packages)

    def _lib_dirs(self) -> list[PurePosixPath]:
        return [
            PurePosixPath(p)
            for p in (f"/lib/{self.triplet}", f"/usr/lib/{self.triplet}", "/lib", "/usr/lib")
        ]

    def _closure(self, start: str) -> Iterator[DebPackage]:
        """start, then its dependencies breadth-first, each fetched when reached."""
        seen = {start}
        frontier = [start]
        while frontier:
            frontier = self.apt.available(frontier)
            # Most dependencies of a program are libraries it links: fetch a level at once.
            self.apt.download(n for n in frontier if n not in self._fetched)
            self._fetched.update(frontier)
            nxt = []
            for name in frontier:
                yield self.apt.fetch(name)
                for dep in self.graph.get(name, []):
                    if dep not in seen:
                        seen.add(dep)
                        nxt.append(dep)
            frontier = nxt

    def _find_soname(self, requester: GuestFile, soname: str) -> PurePosixPath:
        for pkg in self._closure(requester.package):
            for d in self._lib_dirs():
                if _exists(pkg.root, d / soname):
                    self._add_path(pkg, d / soname, f"{soname} needed by {requester.path}")
                    return d / soname
        raise DebianError(
            f"shared library {soname} needed by {requester.path} (package "
            f"{requester.package}) is in none of {requester.package}'s {self.apt.arch} "
            f"dependencies: {', '.join(sorted(self._reachable(requester.package)))}"
        )

    def _add_from_closure(self, requester: GuestFile, path: PurePosixPath, why: str) -> None:
        if path in self._files:
            return
        for pkg in self._closure(requester.package):
            if _exists(pkg.root, path):
                self._add_path(pkg, path, why)
                return
        raise DebianError(
            f"{path} ({why}, package {requester.package}) is shipped by none of "
            f"{requester.package}'s {self.apt.arch} dependencies"
        )

    def _reachable(self, start: str) -> set[str]:
        seen = {start}
        stack = [start]
        while stack:
            for dep in self.graph.get(stack.pop(), []):
                if dep not in seen:
                    seen.add(dep)
                    stack.append(dep)
        return seen

    def _add_path(self, pkg: DebPackage, path: PurePosixPath, why: str) -> None:
        """Add path from pkg; symlinks are kept and their targets added too."""
        for _ in range(40):
            if path in self._files:
                return
            source = pkg.root / path.relative_to("/")
            if not source.is_symlink() and not source.exists():
                raise DebianError(f"{path} ({why}) is not in {pkg.name} {pkg.version}")
            entry = GuestFile(path=path, source=source, package=pkg.name)
            self._files[path] = entry
            if not source.is_symlink():
                if is_elf(source):
                    self._queue.append(entry)
                return
            target = PurePosixPath(os.readlink(source))
            path = PurePosixPath(os.path.normpath(path.parent / target))
            if not _exists(pkg.root, path):
                raise DebianError(
                    f"{entry.path} in {pkg.name} links to {target}, which {pkg.name} "
                    "does not ship"
                )
        raise DebianError(f"symlink loop at {path} in {pkg.name}")


def _exists(root: Path, path: PurePosixPath) -> bool:
    """Whether path exists in an unpacked tree, following symlinks inside that tree only."""
    for _ in range(40):
        host = root / path.relative_to("/")
        if not host.is_symlink():
            return host.exists()
        target = PurePosixPath(os.readlink(host))
        path = PurePosixPath(os.path.normpath(path.parent / target))
    return False
