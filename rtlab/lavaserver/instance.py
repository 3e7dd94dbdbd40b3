"""A LAVA instance on this machine: what it is (``env/lava-server.yaml``), where its files
are (``.cache/lava-server``) and the settings its lava-server programs run with.

Debian's lava-server reads its settings from /etc/lava-server and keeps its files under
/var/lib/lava-server, on the system's PostgreSQL; this instance keeps everything in its
own folder instead (a PostgreSQL cluster of its own on a unix socket, the job outputs, the
device dictionaries, the logs) and hands lava-server its settings in the environment
(``LAVA_JSON_SETTINGS``, which lava-server applies after its files): nothing of the
system's configuration is changed, and a second checkout gets an instance of its own.
The programs run as LAVA's system user ``lavaserver`` (made by the package), as the
package's systemd units run them; the worker runs as root, as lava-run must.

Whether the instance is set up for the lava-server installed and for its configuration is
its setup stamp (``check_set_up``): rtlab.lavaserver.provision writes it, and
rtlab.lavaserver.daemons checks it before it starts anything.
"""

import base64
import grp
import hashlib
import json
import os
import pwd
import secrets
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attr

from rtlab.util import paths
from rtlab.util.yamlfile import YamlFileError, line_of, load_yaml

LOOPBACK = "127.0.0.1"
SYSTEM_USER = "lavaserver"
DATABASE = "lavaserver"
DEVICE_TYPE = "qemu"
# the boards a device of the instance may stand for (rtlab lava render --board)
VIRTUAL_BOARDS = ("qemu-imx6q", "qemu-rpi3")
TOP_KEYS = {"http_port", "publisher_port", "event_port", "user", "worker", "ping_interval",
            "devices"}
DEVICE_KEYS = {"tags"}
# a unix socket's path, its NUL included, fits sun_path (108 bytes on Linux)
SOCKET_PATH_MAX = 107


class LavaInstanceError(RuntimeError):
    """The instance cannot be set up, started or asked; the message says what to do."""


def default_config() -> Path:
    return Path(os.environ.get("RTLAB_LAVA_SERVER_CONFIG",
                               paths.REPO_ROOT / "env" / "lava-server.yaml"))


def instance_dir() -> Path:
    return paths.cache_dir() / "lava-server"


@attr.frozen
class Device:
    name: str
    tags: tuple[str, ...]


@attr.frozen
class InstanceConfig:
    path: Path
    http_port: int
    publisher_port: int
    event_port: int
    user: str
    worker: str
    ping_interval: int
    devices: tuple[Device, ...]

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.http_port}"


def _port(doc: Any, key: str, where: str) -> int:  # noqa: ANN401 - YAML node
    value = doc[key]
    if not isinstance(value, int) or isinstance(value, bool) or not 1024 <= value <= 65535:
        raise YamlFileError(f"{where}:{line_of(doc, key)}: {key}: a port from 1024 to 65535, "
                            f"not {value!r}")
    return value


def _name(doc: Any, key: str, where: str) -> str:  # noqa: ANN401 - YAML node
    value = doc[key]
    if not isinstance(value, str) or not value or not value.replace("-", "").replace(
            "_", "").isalnum():
        raise YamlFileError(f"{where}:{line_of(doc, key)}: {key}: a name of letters, digits, "
                            f"- and _, not {value!r}")
    return value


def load_instance_config(path: Path | None = None) -> InstanceConfig:
    """``env/lava-server.yaml``; every complaint names the file and line."""
    path = path or default_config()
    where = paths.repo_display(path)
    doc = load_yaml(path, where)
    if not hasattr(doc, "items"):
        raise YamlFileError(f"{where}:1: not a mapping of the instance's settings")
    unknown = sorted(set(doc) - TOP_KEYS)
    if unknown:
        raise YamlFileError(f"{where}:{line_of(doc, unknown[0])}: unknown key {unknown[0]!r} "
                            f"(valid: {', '.join(sorted(TOP_KEYS))})")
    missing = sorted(TOP_KEYS - set(doc))
    if missing:
        raise YamlFileError(f"{where}:{line_of(doc)}: missing {', '.join(missing)}")
    ports = {key: _port(doc, key, where) for key in ("http_port", "publisher_port",
                                                      "event_port")}
    if len(set(ports.values())) != len(ports):
        raise YamlFileError(f"{where}:{line_of(doc, 'http_port')}: the three ports must "
                            f"differ, got {ports}")
    interval = doc["ping_interval"]
    if not isinstance(interval, int) or isinstance(interval, bool) or not 1 <= interval <= 600:
        raise YamlFileError(f"{where}:{line_of(doc, 'ping_interval')}: ping_interval: "
                            f"seconds from 1 to 600, not {interval!r}")
    devices_node = doc["devices"]
    if not hasattr(devices_node, "items") or not devices_node:
        raise YamlFileError(f"{where}:{line_of(doc, 'devices')}: devices: a mapping of "
                            "device names to their settings")
    devices = []
    for name, settings in devices_node.items():
        at = f"{where}:{line_of(devices_node, name)}"
        if not isinstance(name, str) or not name.replace("-", "").isalnum():
            raise YamlFileError(f"{at}: device name {name!r}: letters, digits and - only")
        if not hasattr(settings, "items"):
            raise YamlFileError(f"{at}: device {name}: a mapping (tags: [...])")
        bad = sorted(set(settings) - DEVICE_KEYS)
        if bad:
            raise YamlFileError(f"{at}: device {name}: unknown key {bad[0]!r} (valid: tags)")
        tags = settings.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags):
            raise YamlFileError(f"{at}: device {name}: tags must be a list of names")
        devices.append(Device(name, tuple(tags)))
    return InstanceConfig(path=path, user=_name(doc, "user", where),
                          worker=_name(doc, "worker", where), ping_interval=interval,
                          devices=tuple(devices), **ports)


@attr.frozen
class Instance:
    """The instance's folder and what lives in it."""

    config: InstanceConfig
    folder: Path

    @classmethod
    def default(cls) -> "Instance":
        return cls(load_instance_config(), instance_dir())

    # owned by lavaserver (the database and the server's writes)
    @property
    def database_dir(self) -> Path:
        return self.folder / "postgresql"

    @property
    def socket_dir(self) -> Path:
        """PostgreSQL's socket and the publisher's internal one; only lavaserver (and
        root) may enter, which is what lets the database trust who connects."""
        return self.folder / "sockets"

    @property
    def log_dir(self) -> Path:
        return self.folder / "log"

    @property
    def media_dir(self) -> Path:
        """MEDIA_ROOT: the jobs' logs and results as lava-server keeps them."""
        return self.folder / "media"

    # owned by root
    @property
    def dispatcher_config(self) -> Path:
        return self.folder / "dispatcher-config"

    @property
    def devices_dir(self) -> Path:
        return self.dispatcher_config / "devices"

    @property
    def worker_dir(self) -> Path:
        """lava-worker's folder (its token, its job database, each job's files)."""
        return self.folder / "worker"

    @property
    def pid_dir(self) -> Path:
        return self.folder / "pids"

    @property
    def secret_key_file(self) -> Path:
        return self.folder / "secret-key"

    @property
    def token_file(self) -> Path:
        """The API token of the user rtlab submits as: root reads it, nobody prints it."""
        return self.folder / f"{self.config.user}.token"

    @property
    def worker_token_file(self) -> Path:
        return self.worker_dir / "token"

    @property
    def setup_stamp(self) -> Path:
        return self.folder / "setup.json"

    @property
    def event_socket(self) -> str:
        return f"ipc://{self.socket_dir / 'events'}"

    def check_paths(self) -> None:
        for socket in (self.socket_dir / ".s.PGSQL.5432", self.socket_dir / "events"):
            if len(str(socket)) > SOCKET_PATH_MAX:
                raise LavaInstanceError(
                    f"{socket}: too long for a unix socket ({len(str(socket))} > "
                    f"{SOCKET_PATH_MAX} characters); set RTLAB_CACHE to a shorter folder")

    def settings(self) -> dict[str, Any]:
        """lava-server's settings for this instance (lava_server.settings.prod)."""
        dispatcher = self.dispatcher_config
        return {
            "DATABASES": {"default": {
                "ENGINE": "django.db.backends.postgresql", "NAME": DATABASE,
                "USER": SYSTEM_USER, "PASSWORD": "", "HOST": str(self.socket_dir),
                "PORT": 5432}},
            "SECRET_KEY": self.secret_key(),
            "MEDIA_ROOT": f"{self.media_dir}/",
            "DJANGO_LOGFILE": str(self.log_dir / "django.log"),
            "DEVICES_PATH": str(self.devices_dir),
            "DEVICE_TYPES_PATHS": [str(dispatcher / "device-types"),
                                   "/usr/share/lava-server/device-types"],
            "HEALTH_CHECKS_PATH": str(dispatcher / "health-checks"),
            "DISPATCHER_CONFIG_PATH": str(self.folder / "dispatcher.d"),
            "ALLOWED_HOSTS": [LOOPBACK, "localhost"],
            # events: the scheduler wakes on a submission, the worker on its job
            "EVENT_NOTIFICATION": True,
            "INTERNAL_EVENT_SOCKET": self.event_socket,
            "EVENT_SOCKET": f"tcp://{LOOPBACK}:{self.config.event_port}",
        }

    def secret_key(self) -> str:
        try:
            return self.secret_key_file.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise LavaInstanceError(f"{self.secret_key_file} is missing: the instance is not "
                                    "set up (rtlab lava server setup)") from None

    def make_secret_key(self) -> None:
        if not self.secret_key_file.exists():
            write_private(self.secret_key_file, secrets.token_urlsafe(50))

    def environment(self, base: Mapping[str, str] = os.environ) -> dict[str, str]:
        """The environment of a lava-server program of this instance."""
        encoded = base64.b64encode(json.dumps(self.settings()).encode()).decode()
        env = {key: value for key, value in base.items()
               # lava-server would take these over the instance's own settings
               if not key.startswith(("LAVA_SETTINGS_", "LAVA_YAML_SETTINGS_"))
               and key not in ("DATABASE_URL", "SECRET_KEY", "ALLOWED_HOSTS")}
        env.update(LAVA_JSON_SETTINGS=encoded, LC_ALL="C.UTF-8", LANG="C.UTF-8")
        return env

    def client_environment(self) -> dict[str, str]:
        """What ``rtlab lava submit|fetch`` need to use this instance: its URL, the user and
        the file of its token (not the token)."""
        from rtlab.lava.server import TOKEN_FILE_VARIABLE, URL_VARIABLE, USER_VARIABLE

        return {URL_VARIABLE: self.config.url, USER_VARIABLE: self.config.user,
                TOKEN_FILE_VARIABLE: str(self.token_file)}

    def manage(self, *args: str, timeout: float = 300) -> str:
        """``lava-server manage ARGS`` as lavaserver with the instance's settings; its
        standard output (which may hold a token: never shown as it is)."""
        proc = run_as_system_user(["lava-server", "manage", *args], env=self.environment(),
                                  timeout=timeout)
        if proc.returncode != 0:
            said = (proc.stderr or proc.stdout).strip().splitlines()
            raise LavaInstanceError(f"lava-server manage {' '.join(args[:2])} failed (exit "
                                    f"{proc.returncode}): {' | '.join(said[-5:])}")
        return proc.stdout


def installed_version(package: str = "lava-server") -> str | None:
    proc = subprocess.run(["dpkg-query", "-W", "-f", "${Status} ${Version}", package],
                          capture_output=True, text=True, check=False)
    words = proc.stdout.split()
    return words[-1] if proc.returncode == 0 and "installed" in words[:3] else None


def wanted_stamp(instance: Instance) -> dict[str, str | None]:
    config = hashlib.sha256(instance.config.path.read_bytes()).hexdigest()
    return {"lava_server": installed_version(), "config_sha256": config,
            "folder": str(instance.folder)}


def check_set_up(instance: Instance) -> None:
    """Raises unless setup ran for this lava-server and this configuration."""
    try:
        stamp = json.loads(instance.setup_stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise LavaInstanceError(f"the LAVA instance in {instance.folder} is not set up: "
                                "rtlab lava server setup (scripts/bootstrap.sh "
                                "lava-server)") from None
    wanted = wanted_stamp(instance)
    if stamp != wanted:
        changed = ", ".join(k for k in wanted if stamp.get(k) != wanted[k])
        raise LavaInstanceError(f"the LAVA instance in {instance.folder} was set up for "
                                f"another {changed}: rtlab lava server setup")


def system_user() -> tuple[int, int]:
    """lavaserver's uid and gid (the package's postinst makes the user)."""
    try:
        return pwd.getpwnam(SYSTEM_USER).pw_uid, grp.getgrnam(SYSTEM_USER).gr_gid
    except KeyError:
        raise LavaInstanceError(f"no system user {SYSTEM_USER}: lava-server is not installed "
                                "(scripts/bootstrap.sh lava-server)") from None


def run_as_system_user(argv: list[str], *, env: Mapping[str, str] | None = None,
                       timeout: float = 300) -> subprocess.CompletedProcess[str]:
    system_user()
    try:
        return subprocess.run(argv, user=SYSTEM_USER, group=SYSTEM_USER, extra_groups=[],
                              env=dict(env) if env is not None else None, cwd="/",
                              capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LavaInstanceError(f"{' '.join(argv[:3])}: no answer within {timeout:.0f} s"
                                ) from None


def write_private(path: Path, text: str) -> None:
    """A file only its owner (root) reads, created so from the start."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(text.rstrip("\n") + "\n")
    os.chmod(path, 0o600)
