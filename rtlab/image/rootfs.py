"""What the board runs: the root file system the kernel unpacks from the initramfs (busybox,
the rt-tests and their libraries from Debian's packages, the board's kernel modules,
/init and the login path), and the kernel and device tree beside it on the boot partition.

Nothing is installed with dpkg: the userland is exactly the programs GUEST_PROGRAMS names
and the libraries they load, and the modules exactly the board model's list and their
dependencies, so the initramfs stays a few megabytes and every file in it is accounted
for. The initramfs is written here, every file owned by root with one timestamp, so that
the same inputs give the same bytes.
"""

from __future__ import annotations

import gzip
import os
import shlex
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from rtlab.image.tools import EPOCH, ImageError
from rtlab.platform import debian
from rtlab.platform.boards import BoardModel

FILES_DIR = Path(__file__).parent / "files"


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


class RootfsBuilder:
    """The board's files from its kernel package and the userland's: the root file
    system in ``rootfs``, the kernel and device tree in ``boot``."""

    def __init__(self, model: BoardModel, flavour: str, apt: debian.Apt, rootfs: Path,
                 boot: Path) -> None:
        self.model = model
        self.flavour = flavour
        self.apt = apt
        self.rootfs = rootfs
        self.boot = boot

    # -- userland ------------------------------------------------------------------------

    def userland(self) -> debian.Userland:
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

    def make_rootfs(self, userland: debian.Userland, release: str) -> None:
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
        shutil.copy2(FILES_DIR / "udhcpc.script", root / "etc/rtlab/udhcpc.script")
        (root / "etc/rtlab/udhcpc.script").chmod(0o755)
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

    def install_modules(self, kernel: debian.DebPackage,
                         release: str) -> tuple[list[str], list[str], list[str]]:
        """Copy the board's modules and their dependencies; returns them in load order,
        the board's modules the kernel has built in (nothing to load: a kernel built
        without module support has them all built in), and the physical board's NIC
        drivers the kernel has neither as a module nor built in."""
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
        # the physical board's NIC: a kernel built for the lab has it, a lean one built for
        # the virtual rack may not; the manifest says which are absent
        absent = []
        for module in self.model.nic_modules:
            name = _module_name(module)
            if name in index or name in builtin:
                visit(name, ())
            else:
                absent.append(name)

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
        return [rel[n] for n in order], present, absent

    # -- boot files ----------------------------------------------------------------------

    def install_kernel(self, kernel: debian.DebPackage, release: str) -> None:
        vmlinuz = kernel.root / "boot" / f"vmlinuz-{release}"
        if not vmlinuz.is_file():
            raise ImageError(f"{kernel.name} {kernel.version} ships no /boot/vmlinuz-{release}")
        data = vmlinuz.read_bytes()
        if data[:2] == b"\x1f\x8b":
            # U-Boot's booti and QEMU's -kernel want a raw arm64 Image.
            data = gzip.decompress(data)
        (self.boot / self.model.kernel_image).write_bytes(data)

    def install_dtb(self, kernel: debian.DebPackage, release: str) -> None:
        src = kernel.root / "usr/lib" / f"linux-image-{release}" / self.model.dtb
        if not src.is_file():
            raise ImageError(f"{kernel.name} {kernel.version} ships no {self.model.dtb}")
        # as the kernel package ships it: the card is a physical board's, and what only the
        # emulator needs never goes on it
        shutil.copyfile(src, self.boot / PurePosixPath(self.model.dtb).name)

def network_settings(model: BoardModel) -> str:
    """/etc/rtlab/network, which /init sources: DHCP on the lab's network (the virtual
    rack's QEMU network answers DHCP too), or why the board has none. A place with a fixed
    address gives it on the kernel command line (rtlab.ip=ADDRESS/PREFIX,GATEWAY)."""
    if model.has_network:
        return "NET_DHCP=1\n"
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
