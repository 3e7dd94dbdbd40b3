"""``rtlab ssh setup``: the SSH a CI job's labgrid needs to reach the lab's exporters.

labgrid runs ``usbsdmux`` and ``bmaptool`` on the exporter host of a remote USB resource
(an SD mux, the card behind it) and copies the image there with rsync, all through
``ssh <host>`` with no options of its own for the port, the user or the key: those come
from the ssh configuration of the user the job runs as. A job container has none, so the
lab gives them as CI/CD variables, and this writes them where ssh reads them:

- ``RTLAB_EXPORTER_SSH_KEY``: the private key the exporters accept (a variable of type
  File; the key itself in a plain variable works too);
- ``RTLAB_EXPORTER_KNOWN_HOSTS``: the exporters' host keys, as checked with their admin
  (labgrid's ssh checks them strictly and never asks);
- ``RTLAB_EXPORTER_SSH_CONFIG``: ``Host`` blocks for the exporter hosts, e.g. ``Host
  labhost-01`` / ``Port 2222`` / ``User labgrid`` for docker/exporter's image.

They land in ``~/.ssh/rtlab-exporters/`` (key 0600), which ``~/.ssh/config`` includes
first. The values are read from the environment and files, never from a command line,
and never printed. Without any of them nothing is written: the runner's own ``~/.ssh``
(a mounted one, say) serves as it is.
"""

import os
import pwd
import re
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path

import attr

KEY_VARIABLE = "RTLAB_EXPORTER_SSH_KEY"
KNOWN_HOSTS_VARIABLE = "RTLAB_EXPORTER_KNOWN_HOSTS"
CONFIG_VARIABLE = "RTLAB_EXPORTER_SSH_CONFIG"
VARIABLES = (KEY_VARIABLE, KNOWN_HOSTS_VARIABLE, CONFIG_VARIABLE)
FOLDER = "rtlab-exporters"
MARK = "# rtlab ssh setup: the lab's exporters (docs/lab.md, SSH from runner to exporter)"
_HOST_LINE = re.compile(r"^\s*host(?:\s*=\s*|\s+)(.+)$", re.IGNORECASE)


class SetupError(ValueError):
    pass


@attr.frozen
class Written:
    """What ``setup`` wrote: the folder, and the host patterns its settings apply to."""

    folder: Path
    config: Path
    hosts: tuple[str, ...]


def ssh_home() -> Path:
    """The home ssh reads ``~/.ssh`` from: the passwd entry's, not ``$HOME``."""
    return Path(pwd.getpwuid(os.getuid()).pw_dir)


def _value(environ: Mapping[str, str], name: str) -> str | None:
    """A File variable's value is the path of a file holding it; a plain variable's is
    the text itself."""
    raw = environ.get(name, "")
    if not raw.strip():
        return None
    if "\n" not in raw and not raw.lstrip().startswith("-----"):
        path = Path(raw.strip())
        if path.is_file():
            return path.read_text()
        if raw.strip().startswith("/"):
            raise SetupError(f"{name} names {path}, which is not a file")
    return raw


def _text(value: str) -> str:
    # a key pasted from Windows, or without its last newline, is refused by ssh
    return value.replace("\r\n", "\n").strip("\n") + "\n"


def host_patterns(config: str) -> tuple[str, ...]:
    """The ``Host`` patterns of an ssh configuration, in order."""
    patterns: list[str] = []
    for line in config.splitlines():
        found = _HOST_LINE.match(line)
        if found:
            patterns += [p for p in found.group(1).split() if p not in patterns]
    return tuple(patterns)


def _write(path: Path, text: str, mode: int) -> None:
    """Written with its mode from the start: a key is never readable by others, not
    even for a moment."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as out:
        os.fchmod(out.fileno(), mode)
        out.write(text)


def _quoted(path: Path) -> str:
    return f'"{path}"' if " " in os.fspath(path) else os.fspath(path)


def setup(environ: Mapping[str, str], home: Path) -> Written | None:
    """Write the exporters' key, known hosts and settings from ``environ`` under
    ``home``/.ssh. None: no variable is set, nothing written."""
    values = {name: _value(environ, name) for name in VARIABLES}
    if not any(values.values()):
        return None
    missing = [n for n in (KEY_VARIABLE, KNOWN_HOSTS_VARIABLE) if values[n] is None]
    if missing:
        raise SetupError(
            f"{', '.join(missing)} not set: labgrid's ssh needs the exporters' key and "
            "their host keys (it checks them strictly and never asks)")
    key = _text(values[KEY_VARIABLE] or "")
    if not re.match(r"-----BEGIN [A-Z ]*PRIVATE KEY-----\n", key):
        raise SetupError(f"{KEY_VARIABLE} is no private key (a variable of type File "
                         "holding the key the exporters accept)")
    known = _text(values[KNOWN_HOSTS_VARIABLE] or "")
    for number, line in enumerate(known.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#") and len(line.split()) < 3:
            raise SetupError(f"{KNOWN_HOSTS_VARIABLE}, line {number}: not a known_hosts "
                             "line (host key-type key, as ssh-keyscan prints it)")
    lab_config = _text(values[CONFIG_VARIABLE] or "")
    hosts = host_patterns(lab_config) or ("*",)

    ssh_dir = home / ".ssh"
    folder = ssh_dir / FOLDER
    # a ~/.ssh that exists keeps its mode; the folder with the key is ours
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    folder.mkdir(mode=0o700, exist_ok=True)
    folder.chmod(0o700)
    _write(folder / "id", key, 0o600)
    _write(folder / "known_hosts", known, 0o644)
    config = folder / "config"
    # the lab's blocks first (ssh keeps the first value it reads), then the key and host
    # keys for the same hosts
    _write(config, "\n".join([
        f"{MARK}, from {', '.join(n for n in VARIABLES if values[n])}",
        lab_config.rstrip("\n"),
        f"Host {' '.join(hosts)}",
        f"    IdentityFile {_quoted(folder / 'id')}",
        "    IdentitiesOnly yes",
        f"    UserKnownHostsFile {_quoted(folder / 'known_hosts')}",
        "    StrictHostKeyChecking yes",
        "    BatchMode yes"]) + "\n", 0o644)
    _include(ssh_dir / "config", config)
    return Written(folder, config, hosts)


def _include(user_config: Path, config: Path) -> None:
    """``Include`` the exporters' settings at the top of ``user_config``: an Include after
    a ``Host`` line would apply only inside that block. The rest of the file stays."""
    include = f"Include {_quoted(config)}"
    existing = user_config.read_text() if user_config.exists() else ""
    if include in existing.splitlines():
        return
    mode = stat.S_IMODE(user_config.stat().st_mode) if user_config.exists() else 0o600
    _write(user_config, f"{MARK}\n{include}\n" + existing, mode)


def describe(written: Written) -> list[str]:
    """What ssh now makes of each exporter host named (``ssh -G``), for the job's log:
    address, port and user, never the key."""
    lines = [f"rtlab ssh setup: wrote {written.folder} (key, known hosts, settings), "
             f"included by {written.folder.parent / 'config'}"]
    for host in written.hosts:
        if any(c in host for c in "*?!"):
            lines.append(f"  {host}: the key and known hosts apply")
            continue
        try:
            proc = subprocess.run(["ssh", "-F", os.fspath(written.folder.parent / "config"),
                                   "-G", host], capture_output=True, text=True, check=False,
                                  stdin=subprocess.DEVNULL, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as failure:
            lines.append(f"  {host}: ssh -G failed: {failure}")
            continue
        values: dict[str, str] = {}
        for line in proc.stdout.splitlines():
            name, _, value = line.partition(" ")
            values.setdefault(name, value)
        lines.append(f"  {host}: {values.get('user', '?')}@{values.get('hostname', '?')} "
                     f"port {values.get('port', '?')}")
    return lines
