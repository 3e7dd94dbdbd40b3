"""The lab half of ``rtlab lab doctor``: does the coordinator answer, with labgrid's
version; does every place of each board type have what its environment file's drivers
bind (power, serial console, SD mux, storage) matched, available, from a connected
exporter; its tags; does labgrid's SSH reach every exporter host of a remote USB resource
(with rsync there where an image is copied to it); and the tools those drivers run on the
exporter hosts.

What a place needs is read from the environment file the runs use (``RTLAB_ENV``), not
from a list of rtlab's: each driver's labgrid ``bindings`` name the resource classes it
takes, so a lab that swaps the USB-SD-Mux for an SDWire (another driver) is checked for
an SDWire. The places and resources come from the coordinator through labgrid's own
client session, read only: nothing is acquired, reserved or changed.
"""

import asyncio
import contextlib
import logging
import os
import shlex
import shutil
import socket
import subprocess
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attr

from rtlab.lab.envfile import check_env_file
from rtlab.util.findings import Finding, error, ok, warning

# what a binding's role is to a person, by the protocol or name of the driver that binds it
ROLE_LABELS = (("Power", "power"), ("Serial", "serial console"), ("SDMux", "SD mux"),
               ("SDWire", "SD mux"), ("Storage", "storage"))
# the programs a driver runs where its resource is (the exporter host for a Network*
# resource): labgrid's names for them in an environment file's ``tools:``
DRIVER_TOOLS: Mapping[str, tuple[str, ...]] = {
    "USBSDMuxDriver": ("usbsdmux",),
    "USBSDWireDriver": ("sd-mux-ctrl",),
    "USBStorageDriver": ("bmaptool",),
    "VirtualStorageDriver": ("bmaptool",),
}
# the place tags of the network load (tests/target/conftest.py); a place without it says
# why in the tag ``network``
NETWORK_TAGS = ("net_ping", "net_stream")
CONNECT_TIMEOUT_S = 10.0
SSH_TIMEOUT_S = 20.0
# the doctor's own bound on an SSH connection: labgrid waits LG_SSH_CONNECT_TIMEOUT (30 s)
SSH_CONNECT_TIMEOUT_S = 10
SSH_DOCS = "docs/lab.md, SSH from runner to exporter"
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


@attr.frozen
class Role:
    """One resource a driver of the environment binds: ``classes`` are the resource
    classes (as the coordinator lists them) any one of which will do."""

    driver: str
    key: str
    label: str
    classes: frozenset[str]


@attr.frozen
class Needs:
    """What the environment file asks of a place, and of the hosts its drivers run on."""

    env_file: Path
    roles: tuple[Role, ...]
    # driver → (tool, the path the environment gives it)
    tools: tuple[tuple[str, str, str], ...]


class EnvFileError(ValueError):
    pass


@contextlib.contextmanager
def _place_variable() -> Iterator[None]:
    """An environment file names its place ``$LG_PLACE``; reading what it binds needs
    none."""
    saved = os.environ.get("LG_PLACE")
    os.environ.setdefault("LG_PLACE", "doctor")
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("LG_PLACE", None)


def needs_of(env_file: Path) -> Needs:
    """The resources and tools the drivers of ``env_file``'s target need. Raises
    EnvFileError naming the file and line of what is wrong with it."""
    from labgrid.environment import Environment
    from labgrid.exceptions import InvalidConfigError
    from labgrid.factory import target_factory

    problems = check_env_file(env_file)
    if problems:
        raise EnvFileError("; ".join(problems))
    try:
        # the environment imports the modules that register rtlab's drivers
        with _place_variable():
            config = Environment(os.fspath(env_file)).config
        targets = config.get_targets()
    except (InvalidConfigError, OSError, ImportError) as failure:
        raise EnvFileError(f"{env_file}: {failure}") from failure
    roles, tools = [], []
    for target in targets.values():
        _, drivers = target_factory.normalize_config(target)
        for name in drivers:
            cls = target_factory.drivers.get(name)
            if cls is None:
                raise EnvFileError(f"{env_file}: unknown driver {name}")
            for key, bound in cls.bindings.items():
                classes = _resource_classes(bound, target_factory.resources)
                if classes:
                    roles.append(Role(name, key, _label(cls, name), frozenset(classes)))
            for tool in DRIVER_TOOLS.get(name, ()):
                tools.append((name, tool, config.get_tool(tool)))
    return Needs(env_file, tuple(roles), tuple(tools))


def _resource_classes(bound: object, resources: Mapping[str, type]) -> set[str]:
    """The resource classes a binding takes; empty for a binding to a driver or protocol
    (the target's own drivers satisfy it) or an optional one (``None`` among them)."""
    items = bound if isinstance(bound, set | frozenset | tuple | list) else {bound}
    if None in items:
        return set()
    names = {item if isinstance(item, str) else getattr(item, "__name__", "")
             for item in items}
    return {name for name in names if name in resources}


def _label(cls: type, name: str) -> str:
    from labgrid.protocol import ConsoleProtocol, PowerProtocol

    if issubclass(cls, PowerProtocol):
        return "power"
    if issubclass(cls, ConsoleProtocol):
        return "serial console"
    return next((label for part, label in ROLE_LABELS if part in name), name)


# --- the coordinator -------------------------------------------------------------------------

@attr.frozen
class Exported:
    """One resource an exporter offers, as the coordinator lists it."""

    exporter: str
    group: str
    cls: str
    name: str
    avail: bool
    params: Mapping[str, Any]

    @property
    def path(self) -> str:
        return f"{self.exporter}/{self.group}/{self.cls}/{self.name}"


@attr.frozen
class PlaceView:
    name: str
    tags: Mapping[str, str]
    matches: tuple[str, ...]
    matched: tuple[Exported, ...]


@attr.frozen
class LabView:
    """What the coordinator holds, read once: places with the resources their matches
    find, every exported resource, and the coordinator's labgrid version (None: it did
    not say)."""

    address: str
    version: str | None
    places: tuple[PlaceView, ...]
    exported: tuple[Exported, ...]

    def exporters(self) -> set[str]:
        return {resource.exporter for resource in self.exported}


class CoordinatorError(RuntimeError):
    pass


def read_lab(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> LabView:
    """The coordinator's places and resources through labgrid's client session; each
    exchange (the session's start, the version probe) waits at most ``timeout_s``."""
    loop = asyncio.new_event_loop()
    # grpc's calls belong to the thread's current loop
    asyncio.set_event_loop(loop)
    try:
        session = _start_session(address, loop, timeout_s)
        try:
            exported = tuple(
                Exported(exporter, group, resource.cls, name, bool(resource.avail),
                         dict(resource.params))
                for exporter, groups in sorted(session.resources.items())
                for group, entries in sorted(groups.items())
                for name, resource in sorted(entries.items()))
            places = []
            for name, place in sorted(session.places.items()):
                matched = tuple(resource for resource in exported if place.getmatch(
                    (resource.exporter, resource.group, resource.cls, resource.name)))
                places.append(PlaceView(name, dict(place.tags),
                                        tuple(str(m) for m in place.matches), matched))
            version = loop.run_until_complete(_coordinator_version(address, timeout_s))
        finally:
            loop.run_until_complete(session.stop())
            loop.run_until_complete(session.close())
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    return LabView(address, version, tuple(places), exported)


def _start_session(address: str, loop: asyncio.AbstractEventLoop,
                   timeout_s: float) -> Any:  # noqa: ANN401 - labgrid's ClientSession
    """labgrid's ``start_session``, bounded: it waits as long as grpc retries, and grpc
    retries an address that drops packets (a firewall, a wrong host) for ever."""
    from labgrid.remote.client import ClientSession
    from labgrid.util.proxy import proxymanager

    session = ClientSession(proxymanager.get_grpc_address(address, default_port=20408), loop)
    try:
        with _quiet():
            loop.run_until_complete(asyncio.wait_for(session.start(), timeout_s))
    except TimeoutError as failure:
        session.pump_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            loop.run_until_complete(session.pump_task)
        loop.run_until_complete(session.close())
        raise CoordinatorError(f"no answer within {timeout_s:g} s") from failure
    except Exception as failure:  # labgrid raises its ServerError, grpc its own
        loop.run_until_complete(session.close())
        raise CoordinatorError(str(failure).removeprefix("Error: ")) from failure
    return session


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """labgrid's client logs a coordinator it cannot reach on the root logger; the doctor
    says it once, as a finding."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        root.setLevel(level)


async def _coordinator_version(address: str, timeout_s: float) -> str | None:
    """The coordinator's labgrid version. It says it only to exporters, in the ``hello``
    that opens their stream; this opens one, reads the hello and leaves before saying who
    it is (the coordinator logs a peer that never started up, and nothing else changes)."""
    import grpc
    from labgrid.remote.generated import labgrid_coordinator_pb2_grpc
    from labgrid.util.proxy import proxymanager

    async def nothing() -> Any:  # noqa: ANN401 - the request stream, held open, empty
        await asyncio.Event().wait()
        yield

    target = proxymanager.get_grpc_address(address, default_port=20408)
    async with grpc.aio.insecure_channel(target) as channel:
        call = labgrid_coordinator_pb2_grpc.CoordinatorStub(channel).ExporterStream(nothing())
        try:
            message = await asyncio.wait_for(call.read(), timeout_s)
        except (TimeoutError, grpc.aio.AioRpcError):
            return None
        finally:
            call.cancel()
    if message is grpc.aio.EOF or not message.HasField("hello"):
        return None
    return message.hello.version or None


# --- the checks ------------------------------------------------------------------------------

def coordinator_findings(lab: LabView, own_version: str) -> list[Finding]:
    found = [ok("coordinator", lab.address, f"answers: {len(lab.places)} place(s), "
                f"{len(lab.exporters())} exporter(s) connected")]
    if lab.version is None:
        found.append(warning("labgrid-version", lab.address,
                             "the coordinator did not say its labgrid version",
                             f"run labgrid {own_version} on the coordinator (docker/lab/"
                             "compose.yaml, docs/images.md), as rtlab's client is"))
    elif lab.version != own_version:
        found.append(warning("labgrid-version", lab.address,
                             f"coordinator runs labgrid {lab.version}, rtlab's client "
                             f"{own_version}",
                             f"run one labgrid release on the coordinator, the exporters "
                             f"and the CI image: {own_version} (pyproject.toml pins it)"))
    else:
        found.append(ok("labgrid-version", lab.address, f"labgrid {lab.version}, as rtlab's"))
    return found


def places_findings(lab: LabView, needs: Needs, boards: Sequence[str],
                    network: bool) -> list[Finding]:
    """Every place of each board type in ``boards`` (the tag ``board``): its resources and
    exporters, its tags. A board type without a place is an error: its jobs would wait for
    one until they time out."""
    found: list[Finding] = []
    for board in boards:
        places = [p for p in lab.places if p.tags.get("board") == board]
        if not places:
            others = sorted({p.tags["board"] for p in lab.places if "board" in p.tags})
            found.append(error(
                "places", f"board={board}", "no place has this tag"
                + (f" (places have board={', '.join(others)})" if others else ""),
                f"labgrid-client -p <place> create; labgrid-client -p <place> add-match "
                f"<exporter>/<group>/*; labgrid-client -p <place> set-tags board={board}"))
            continue
        found.append(ok("places", f"board={board}",
                        f"{len(places)} place(s): {', '.join(p.name for p in places)}"))
        for place in places:
            found += _resource_findings(lab, place, needs)
            found += _tag_findings(place, network)
    return found


def _resource_findings(lab: LabView, place: PlaceView, needs: Needs) -> list[Finding]:
    found: list[Finding] = []
    connected = lab.exporters()
    # a match names its exporter first; one that holds no resource is not connected
    gone = sorted({m.split("/", 1)[0] for m in place.matches} - connected - {"*"})
    for exporter in gone:
        found.append(error(
            "exporter", f"{place.name}", f"exporter {exporter!r} (the place's match "
            f"{_matches_of(place, exporter)}) is not connected to the coordinator",
            f"start labgrid-exporter on {exporter}'s lab host (docker/exporter, "
            f"docs/images.md) and check its log for the coordinator's address"))
    problems = 0
    for role in needs.roles:
        candidates = [r for r in place.matched if r.cls in role.classes]
        if not candidates:
            problems += 1
            # the same exporter group as the place's other resources, or the place's name
            groups = {(r.exporter, r.group) for r in place.matched}
            offered = [r for r in lab.exported if r.cls in role.classes
                       and ((r.exporter, r.group) in groups or r.group == place.name)]
            hint = (f"labgrid-client -p {place.name} add-match "
                    f"{offered[0].exporter}/{offered[0].group}/{offered[0].cls}"
                    if offered else
                    "export it in the lab host's exporter file (a "
                    f"{' or '.join(sorted(role.classes))} in group {place.name}), then "
                    f"labgrid-client -p {place.name} add-match "
                    f"<exporter>/{place.name}/*")
            if gone and not offered:
                continue  # the exporter's error says it
            found.append(error(
                "resources", place.name, f"no {role.label} resource matched "
                f"({role.driver} of {needs.env_file.name} binds one of "
                f"{', '.join(sorted(role.classes))})", hint))
        elif not any(r.avail for r in candidates):
            problems += 1
            found.append(error(
                "resources", place.name, f"{role.label} {candidates[0].path} is exported "
                "but not available (the exporter does not find its device)",
                f"on {candidates[0].exporter}'s host: is the device plugged in, does its "
                "udev match (udevadm info) still hold? labgrid-client resources -v shows it"))
    if not problems and not gone:
        found.append(ok("resources", place.name, ", ".join(
            f"{role.label} {next(r for r in place.matched if r.cls in role.classes).cls}"
            for role in _unique_labels(needs.roles)) + " matched and available"))
    return found


def _unique_labels(roles: Sequence[Role]) -> list[Role]:
    seen: dict[str, Role] = {}
    for role in roles:
        seen.setdefault(role.label, role)
    return list(seen.values())


def _matches_of(place: PlaceView, exporter: str) -> str:
    return ", ".join(m for m in place.matches if m.split("/", 1)[0] == exporter)


def _tag_findings(place: PlaceView, network: bool) -> list[Finding]:
    if not network:
        return []
    missing = [tag for tag in NETWORK_TAGS if tag not in place.tags]
    if not missing:
        host, _, port = place.tags["net_stream"].rpartition(":")
        if not host or not port.isdigit():
            return [error("tags", place.name, f"net_stream={place.tags['net_stream']!r} "
                          "is not HOST:PORT: the network scenario is an error there",
                          f"labgrid-client -p {place.name} set-tags "
                          "net_stream=<board address>:5001")]
        return [ok("tags", place.name, f"net_ping={place.tags['net_ping']}, "
                   f"net_stream={place.tags['net_stream']}")]
    if "network" in place.tags:
        return [ok("tags", place.name, f"no network load: {place.tags['network']}")]
    return [warning("tags", place.name, f"no {', '.join(missing)} tag: the suite's network "
                    "scenario is skipped on this place",
                    f"labgrid-client -p {place.name} set-tags net_ping=<address the board "
                    "pings> net_stream=<board address>:5001 (or network=<why it has none>)")]


Runner = Callable[[str, Sequence[str]], subprocess.CompletedProcess[str]]


def run_on_host(host: str, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """``argv`` on ``host``: here when it is this machine, else over labgrid's SSH (the
    connection labgrid's drivers use for a Network* resource)."""
    if _is_local(host):
        return subprocess.run(list(argv), capture_output=True, text=True, check=False,
                              timeout=SSH_TIMEOUT_S)
    from labgrid.util.ssh import sshmanager

    prefix = sshmanager.get(host).get_prefix()
    return subprocess.run([*prefix, "--", shlex.join(argv)], capture_output=True, text=True,
                          check=False, timeout=SSH_TIMEOUT_S)


def _is_local(host: str) -> bool:
    return host in LOCAL_HOSTS or host in {socket.gethostname(), socket.getfqdn()}


def tool_findings(lab: LabView, needs: Needs, boards: Sequence[str],
                  runner: Runner = run_on_host,
                  skip_hosts: Collection[str] = ()) -> list[Finding]:
    """The programs the drivers run, where they run them: on the exporter host of a
    Network* resource, here for the others (the virtual rack's card is a file here).
    ``skip_hosts``: hosts SSH does not reach (ssh_findings said so once; asking again
    would wait for the same failure per tool)."""
    from labgrid.driver.exception import ExecutionError
    hosts: dict[str, set[tuple[str, str, str]]] = {}
    for place in lab.places:
        if place.tags.get("board") not in boards:
            continue
        for driver, tool, path in needs.tools:
            role = next((r for r in needs.roles if r.driver == driver), None)
            resource = next((r for r in place.matched
                             if role is not None and r.cls in role.classes), None)
            host = (str(resource.params.get("host")) if resource is not None
                    and resource.cls.startswith("Network") and resource.params.get("host")
                    else "localhost")
            hosts.setdefault(host, set()).add((driver, tool, path))
    found = []
    for host, tools in sorted(hosts.items()):
        if host in skip_hosts:
            continue
        for driver, tool, path in sorted(tools):
            where = "this machine" if _is_local(host) else host
            try:
                proc = runner(host, ["sh", "-c", f"command -v {shlex.quote(path)}"])
                missing = proc.returncode != 0
                detail = (proc.stderr or "").strip()
            # labgrid's sshmanager raises its ExecutionError when it cannot connect
            except (OSError, subprocess.TimeoutExpired, ExecutionError) as failure:
                missing, detail = True, str(failure)
            if missing:
                found.append(error(
                    "tools", where, f"{path} ({driver} runs it here) is not found"
                    + (f": {detail}" if detail else ""),
                    "install it on the exporter host: docker/exporter's image has it "
                    f"(Debian: {_package(tool)}), or set tools: {tool}: in "
                    f"{needs.env_file.name} to where it is"))
            else:
                found.append(ok("tools", where, f"{tool} at {proc.stdout.strip() or path}"))
    return found


def _package(tool: str) -> str:
    return {"bmaptool": "apt install bmap-tools", "usbsdmux": "pip install usbsdmux",
            "sd-mux-ctrl": "apt install sd-mux-ctrl"}.get(tool, tool)


# --- SSH to the exporter hosts ------------------------------------------------------------------

SshRunner = Callable[[str, str], subprocess.CompletedProcess[str]]


def labgrid_ssh_options() -> list[str]:
    """The options labgrid gives every ssh it starts (its SSHConnection's base arguments,
    and the host key checking of its control master), and BatchMode: what labgrid would
    ask for (a password, an unknown host key) fails here with ssh's reason instead."""
    return ["-x", "-o", "LogLevel=ERROR", "-o", "PasswordAuthentication=no",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={SSH_CONNECT_TIMEOUT_S}"]


def ssh_run(host: str, command: str) -> subprocess.CompletedProcess[str]:
    """``command`` on ``host`` with the ssh client and ssh configuration labgrid's
    sshmanager uses (ssh on PATH, ~/.ssh/config and /etc/ssh/ssh_config: Port, User,
    IdentityFile, known hosts)."""
    return subprocess.run(["ssh", *labgrid_ssh_options(), host, command],
                          capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL, timeout=SSH_TIMEOUT_S)


@attr.frozen
class SshSettings:
    """What ssh makes of a host name (``ssh -G``): the address, port and user it would
    connect to, for a finding a person can act on."""

    hostname: str
    port: str
    user: str

    def __str__(self) -> str:
        return f"{self.user}@{self.hostname} port {self.port}"


def ssh_settings(host: str) -> SshSettings | None:
    """``ssh -G``: the settings ssh's configuration gives ``host``, without connecting
    (None: ssh could not say)."""
    try:
        proc = subprocess.run(["ssh", "-G", host], capture_output=True, text=True,
                              check=False, stdin=subprocess.DEVNULL, timeout=SSH_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    values: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition(" ")
        values.setdefault(key.lower(), value.strip())
    if not {"hostname", "port", "user"} <= values.keys():
        return None
    return SshSettings(values["hostname"], values["port"], values["user"])


@attr.frozen
class RemoteHost:
    """An exporter host labgrid's drivers reach over SSH, and why: the remote USB
    resources of the places that live there (``storage``: one of them takes an image,
    which labgrid copies there with rsync)."""

    host: str
    resources: tuple[str, ...]
    storage: bool


def remote_usb_hosts(lab: LabView, boards: Sequence[str]) -> list[RemoteHost]:
    """The hosts of the remote USB resources (labgrid's RemoteUSBResource: an SD mux, a
    card reader, a USB device on an exporter) matched by the places of ``boards``, as
    labgrid's NetworkResource connects to them: the resource's host, or its exporter's
    proxy where the exporter says one is required."""
    import labgrid.resource  # noqa: F401 - registers labgrid's resource classes
    from labgrid.driver.usbstoragedriver import USBStorageDriver
    from labgrid.factory import target_factory
    from labgrid.resource.remote import RemoteUSBResource

    storage_classes = set(USBStorageDriver.bindings["storage"])
    hosts: dict[str, tuple[set[str], list[bool]]] = {}
    for place in lab.places:
        if place.tags.get("board") not in boards:
            continue
        for resource in place.matched:
            cls = target_factory.resources.get(resource.cls)
            if cls is None or not issubclass(cls, RemoteUSBResource):
                continue
            extra = resource.params.get("extra") or {}
            host = str(extra.get("proxy") if extra.get("proxy_required")
                       else resource.params.get("host") or "")
            if not host:
                continue
            paths, storage = hosts.setdefault(host, (set(), [False]))
            paths.add(resource.path)
            storage[0] = storage[0] or resource.cls in storage_classes
    return [RemoteHost(host, tuple(sorted(paths)), storage[0])
            for host, (paths, storage) in sorted(hosts.items())]


def ssh_findings(lab: LabView, boards: Sequence[str], run: SshRunner = ssh_run,
                 settings: Callable[[str], SshSettings | None] = ssh_settings
                 ) -> list[Finding]:
    """Does labgrid's SSH reach every exporter host of the places' remote USB resources
    (the SD mux's usbsdmux, the card's bmaptool run there), with the key and host key
    this machine has? Where an image is copied (a storage resource), is rsync on both
    ends (labgrid's ManagedFile copies with it)? One finding per host."""
    found: list[Finding] = []
    remote = remote_usb_hosts(lab, boards)
    if not remote:
        return found
    if shutil.which("ssh") is None:
        return [error("ssh", "this machine", "no ssh client: labgrid reaches the exporter "
                      f"host(s) {', '.join(r.host for r in remote)} with it",
                      "apt install openssh-client (docker/ci's image has it)")]
    if any(r.storage for r in remote) and shutil.which("rsync") is None:
        found.append(error("rsync", "this machine", "no rsync: labgrid copies an image "
                           "to the exporter host with it before writing the card",
                           "apt install rsync (docker/ci's image has it)"))
    for target in remote:
        found += _host_ssh_findings(target, run, settings)
    return found


def unreachable(found: Sequence[Finding]) -> set[str]:
    """The hosts ``ssh_findings`` could not reach."""
    return {f.subject for f in found if f.check == "ssh" and f.status == "error"}


def _host_ssh_findings(target: RemoteHost, run: SshRunner,
                       settings: Callable[[str], SshSettings | None]) -> list[Finding]:
    host = target.host
    seen = settings(host)
    where = str(seen) if seen is not None else "the settings ssh -G could not tell"
    first = target.resources[0] + (f" and {len(target.resources) - 1} more"
                                   if len(target.resources) > 1 else "")
    try:
        proc = run(host, "true")
        failed, reason = proc.returncode != 0, _ssh_reason(proc.stderr)
    except subprocess.TimeoutExpired:
        failed, reason = True, f"no answer within {SSH_TIMEOUT_S:g} s"
    except OSError as failure:
        failed, reason = True, str(failure)
    if failed:
        return [error("ssh", host, f"labgrid's ssh to {host} ({where}) fails: {reason} "
                      f"({first} need it)", _ssh_fix(host, seen, reason))]
    found = [ok("ssh", host, f"labgrid's ssh reaches {where}")]
    if target.storage:
        try:
            proc = run(host, "command -v rsync")
            missing = proc.returncode != 0
        except (OSError, subprocess.TimeoutExpired):
            missing = True
        if missing:
            found.append(error("rsync", host, f"no rsync on {host}: labgrid copies the "
                               f"image there with it before writing the card ({first})",
                               "install rsync on the exporter host (docker/exporter's "
                               "image has it)"))
        else:
            found.append(ok("rsync", host, f"rsync at {proc.stdout.strip() or 'rsync'}"))
    return found


def _ssh_reason(stderr: str | None) -> str:
    lines = [line.strip() for line in (stderr or "").splitlines() if line.strip()]
    return lines[-1] if lines else "ssh exited without saying why"


def _ssh_fix(host: str, seen: SshSettings | None, reason: str) -> str:
    port = seen.port if seen is not None else "2222"
    name = seen.hostname if seen is not None else host
    lowered = reason.lower()
    if "host key verification failed" in lowered or "host key" in lowered:
        return (f"add the exporter's host key, checked with its admin (ssh-keyscan -p {port} "
                f"{name}), to RTLAB_EXPORTER_KNOWN_HOSTS and run rtlab ssh setup "
                f"({SSH_DOCS})")
    if "permission denied" in lowered:
        return ("put the public half of RTLAB_EXPORTER_SSH_KEY into the exporter's "
                "authorized_keys (docker/exporter: /home/labgrid/.ssh/authorized_keys) and "
                "check the User in RTLAB_EXPORTER_SSH_CONFIG (labgrid for docker/exporter's "
                f"image); then rtlab ssh setup ({SSH_DOCS})")
    return (f"check that the exporter's sshd answers on {name} port {port} (docker/exporter's "
            f"image: port 2222) and that RTLAB_EXPORTER_SSH_CONFIG has a Host {host} with "
            f"its HostName, Port and User; then rtlab ssh setup ({SSH_DOCS})")
