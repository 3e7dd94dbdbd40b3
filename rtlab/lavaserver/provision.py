"""``rtlab lava server setup``: make the LAVA instance of rtlab.lavaserver.instance, as
Debian's postinst and a lab's admin would, and nothing twice.

Its folders (each owned as the programs need), its PostgreSQL cluster and database,
lava-server's migrations, the user rtlab submits as and its API token (a file only root
reads; the token is never printed), the worker and its token, the ``qemu`` device type
and the devices of env/lava-server.yaml with their device dictionaries and tags. A stamp
records what was set up (the lava-server version, the configuration), so that a second
run with nothing changed costs nothing, and ``start`` refuses an instance that a
lava-server upgrade left unmigrated.
"""

import csv
import io
import json
import os
import shutil
from collections.abc import Callable

from rtlab.lavaserver import daemons
from rtlab.lavaserver.instance import (
    DATABASE,
    DEVICE_TYPE,
    SYSTEM_USER,
    Instance,
    LavaInstanceError,
    check_set_up,
    installed_version,
    run_as_system_user,
    system_user,
    wanted_stamp,
    write_private,
)

PROGRAMS = ("lava-server", "lava-worker", "lava-run", "gunicorn3")
SERVER_LOGS = ("django.log", "gunicorn.log", "lava-publisher.log", "lava-scheduler.log")
# a device of the instance: LAVA's qemu device type, the job's context choosing the board
DEVICE_DICTIONARY = """\
{#- made by rtlab lava server setup (env/lava-server.yaml): the virtual board a job's
    context describes (rtlab lava render --board qemu-...), as rtlab lava local runs it -#}
{% extends 'qemu.jinja2' %}
"""


def _check_machine(instance: Instance) -> None:
    if os.geteuid() != 0:
        raise LavaInstanceError("the LAVA instance is set up and started as root (its "
                                "programs run as lavaserver, its worker as root)")
    missing = [name for name in PROGRAMS if shutil.which(name) is None]
    if missing or installed_version() is None:
        raise LavaInstanceError(f"LAVA is not installed ({', '.join(missing) or 'lava-server'}"
                                " missing): scripts/bootstrap.sh lava-server")
    system_user()
    instance.check_paths()


def _make_folders(instance: Instance) -> None:
    uid, gid = system_user()
    instance.folder.mkdir(parents=True, exist_ok=True)
    # lavaserver passes through to its own folders, and reads nothing else here
    instance.folder.chmod(0o711)
    owned = {instance.database_dir: 0o700, instance.socket_dir: 0o700,
             instance.log_dir: 0o755, instance.media_dir: 0o755}
    private = {instance.worker_dir: 0o700, instance.pid_dir: 0o700}
    shared = [instance.devices_dir, instance.dispatcher_config / "device-types",
              instance.dispatcher_config / "health-checks", instance.folder / "dispatcher.d"]
    for folder, mode in {**owned, **private}.items():
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(mode)
    for folder in owned:
        os.chown(folder, uid, gid)
    for folder in shared:
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)
    # root's programs open these first (lava-server's logging is set up before it drops
    # to lavaserver): made here, they stay lavaserver's to write
    for name in SERVER_LOGS:
        log = instance.log_dir / name
        log.touch()
        os.chown(log, uid, gid)
    reach = run_as_system_user(["test", "-w", str(instance.media_dir)], timeout=30)
    if reach.returncode != 0:
        raise LavaInstanceError(f"{SYSTEM_USER} cannot reach {instance.folder} (a folder "
                                "above it is closed to other users): set RTLAB_CACHE to a "
                                "folder others may pass through")


def _make_database(instance: Instance, progress: Callable[[str], None]) -> None:
    data = instance.database_dir
    if not (data / "PG_VERSION").exists():
        proc = run_as_system_user([daemons.postgres_bin("initdb"), "-D", str(data),
                                   "-U", SYSTEM_USER, "--auth=trust", "-E", "UTF8",
                                   "--locale=C.UTF-8"], timeout=120)
        if proc.returncode != 0:
            raise LavaInstanceError(f"initdb failed: {proc.stderr.strip()[-500:]}")
        # the socket only, in a folder only lavaserver enters: that is why trust is safe
        with (data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# rtlab lava server setup: no TCP, the socket in the instance\n"
                       "listen_addresses = ''\n"
                       f"unix_socket_directories = '{instance.socket_dir}'\n"
                       "unix_socket_permissions = 0700\n")
        progress(f"PostgreSQL cluster made in {data}")


def _database_exists(instance: Instance) -> bool:
    proc = run_as_system_user([
        "psql", "-h", str(instance.socket_dir), "-U", SYSTEM_USER, "-d", "postgres", "-tAc",
        f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"], timeout=60)
    if proc.returncode != 0:
        raise LavaInstanceError(f"psql failed: {proc.stderr.strip()}")
    return proc.stdout.strip() == "1"


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _set_up_accounts(instance: Instance, progress: Callable[[str], None]) -> None:
    config = instance.config
    users = {row["username"] for row in _csv(instance.manage("users", "list", "--all",
                                                             "--csv"))}
    if config.user not in users:
        # no password (its output, discarded): rtlab signs in with its token only
        instance.manage("users", "add", config.user)
        progress(f"user {config.user} made")
    secrets = {row["secret"] for row in _csv(instance.manage("tokens", "list", "--user",
                                                             config.user, "--csv"))}
    try:
        kept = instance.token_file.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        kept = None
    if kept not in secrets:
        token = instance.manage("tokens", "add", "--user", config.user, "--description",
                                "rtlab on this machine").strip()
        write_private(instance.token_file, token)
        progress(f"API token of {config.user} in {instance.token_file} (root only)")

    workers = {row["hostname"] for row in _csv(instance.manage("workers", "list", "--all",
                                                               "--csv"))}
    if config.worker not in workers:
        said = instance.manage("workers", "add", config.worker, "--description",
                               "rtlab lava server (this machine)")
        progress(f"worker {config.worker} made")
    else:
        said = instance.manage("workers", "details", config.worker)
    token = next((line.split(":", 1)[1].strip() for line in said.splitlines()
                  if line.lower().startswith("token")), None)
    if not token:
        raise LavaInstanceError(f"lava-server manage workers gave no token for "
                                f"{config.worker}")
    write_private(instance.worker_token_file, token)


def _set_up_devices(instance: Instance, progress: Callable[[str], None]) -> None:
    config = instance.config
    types = {row["name"] for row in _csv(instance.manage("device-types", "list", "--csv"))}
    if DEVICE_TYPE not in types:
        instance.manage("device-types", "add", DEVICE_TYPE)
        progress(f"device type {DEVICE_TYPE} added")
    tags_said = instance.manage("device-tags", "list")
    for tag in sorted({tag for device in config.devices for tag in device.tags}):
        if f"Name: '{tag}'" not in tags_said:
            instance.manage("device-tags", "create", tag, "a virtual board of rtlab")
    devices = {row["hostname"]: row for row in _csv(instance.manage("devices", "list",
                                                                    "--all", "--csv"))}
    for device in config.devices:
        dictionary = instance.devices_dir / f"{device.name}.jinja2"
        dictionary.write_text(DEVICE_DICTIONARY, encoding="utf-8")
        dictionary.chmod(0o644)
        if device.name not in devices:
            instance.manage("devices", "add", device.name, "--device-type", DEVICE_TYPE,
                            "--worker", config.worker, "--description",
                            f"rtlab virtual board (tags: {', '.join(device.tags) or 'none'})",
                            *(("--tags", *device.tags) if device.tags else ()))
            progress(f"device {device.name} added")
        else:
            if devices[device.name]["device-type"] != DEVICE_TYPE:
                raise LavaInstanceError(f"device {device.name} exists with device type "
                                        f"{devices[device.name]['device-type']}")
            instance.manage("devices", "update", device.name, "--worker", config.worker)
            if device.tags:
                instance.manage("device-tags", "add", device.name, "--tags", *device.tags)
    wanted = {device.name for device in config.devices}
    for name, row in devices.items():
        if name not in wanted and row["health"] != "Retired":
            instance.manage("devices", "update", name, "--health", "RETIRED")
            progress(f"device {name} retired (no longer in {instance.config.path.name})")


def setup(instance: Instance, progress: Callable[[str], None] = lambda _: None) -> bool:
    """Set the instance up; False when it was already, with nothing changed since."""
    _check_machine(instance)
    try:
        check_set_up(instance)
        if instance.token_file.exists() and instance.worker_token_file.exists():
            return False
    except LavaInstanceError:
        pass
    _make_folders(instance)
    instance.make_secret_key()
    _make_database(instance, progress)
    started = daemons.start_database(instance)
    try:
        if not _database_exists(instance):
            proc = run_as_system_user([
                "createdb", "-h", str(instance.socket_dir), "-U", SYSTEM_USER, "-E", "UTF8",
                "-T", "template0", "--lc-collate=C.UTF-8", "--lc-ctype=C.UTF-8", DATABASE],
                timeout=60)
            if proc.returncode != 0:
                raise LavaInstanceError(f"createdb failed: {proc.stderr.strip()}")
            progress(f"database {DATABASE} made")
        # what the package's postinst runs on every install and upgrade
        instance.manage("migrate", "--noinput", "--fake-initial", timeout=600)
        progress("lava-server's migrations applied")
        _set_up_accounts(instance, progress)
        _set_up_devices(instance, progress)
    finally:
        if started:
            daemons.stop_database(instance)
    instance.setup_stamp.write_text(json.dumps(wanted_stamp(instance), indent=2) + "\n",
                                    encoding="utf-8")
    return True


def token(instance: Instance) -> str:
    """The token of the user rtlab submits as (root only)."""
    try:
        return instance.token_file.read_text(encoding="utf-8").strip()
    except PermissionError:
        raise LavaInstanceError(f"{instance.token_file}: only root reads the token") from None
    except FileNotFoundError:
        raise LavaInstanceError(f"{instance.token_file} is missing: rtlab lava server "
                                "setup") from None
