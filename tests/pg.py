"""A private PostgreSQL server for the tests of the results store (a pytest plugin: a test
module names it in ``pytest_plugins``).

Debian's server binaries (package ``postgresql``, installed by scripts/bootstrap.sh) run a
throw-away cluster: initdb into a temporary folder, listening on 127.0.0.1 only, on a free
port, trusting loopback connections; stopped and removed at the end of the session. As
root it runs as the ``postgres`` user, since the server refuses to run as root. Missing
binaries fail the tests: CI must prove the store on PostgreSQL, not skip it.
"""

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.ports import free_port

PG_ROOT = Path("/usr/lib/postgresql")
DATABASE = "rtlab"
# the server is the test's own: durability buys nothing and costs seconds
FAST = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"


def server_bin() -> Path:
    """The newest installed server's bin folder (Debian installs each major version
    apart)."""
    found = sorted((path for path in PG_ROOT.glob("*/bin") if (path / "initdb").exists()),
                   key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0)
    if not found:
        pytest.fail(f"PostgreSQL server binaries not found ({PG_ROOT}/*/bin/initdb): run "
                    "scripts/bootstrap.sh, which installs Debian's postgresql; the store "
                    "tests need a real server", pytrace=False)
    return found[-1]



class PostgresServer:
    def __init__(self, bin_dir: Path, base: Path, as_user: list[str]) -> None:
        self.bin_dir = bin_dir
        self.base = base
        self.data = base / "data"
        self.log = base / "server.log"
        self.as_user = as_user
        self.port = 0
        self._names = itertools.count(1)

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.as_user, *argv], capture_output=True, text=True,
                              check=False, timeout=60)

    def start(self) -> None:
        done = self._run(str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", "postgres",
                         "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
        if done.returncode != 0:
            pytest.fail(f"initdb failed: {done.stderr.strip()}", pytrace=False)
        # a free port may be taken between the probe and the server's bind: try another
        for _attempt in range(3):
            self.port = free_port()
            options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k '' {FAST}"
            done = self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-l",
                             str(self.log), "-w", "-t", "30", "-o", options, "start")
            if done.returncode == 0:
                break
        else:
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            pytest.fail(f"PostgreSQL did not start: {done.stderr.strip()}\n{log}",
                        pytrace=False)
        self.create_database(DATABASE)

    def stop(self) -> None:
        if self.port:
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m",
                      "immediate", "-w", "stop")
        shutil.rmtree(self.base, ignore_errors=True)

    def url(self, database: str = DATABASE) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                             dbname="postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def new_database(self) -> str:
        """A fresh, empty database of its own for one test."""
        return self.create_database(f"{DATABASE}_{next(self._names)}")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    bin_dir = server_bin()
    base = Path(tempfile.mkdtemp(prefix="rtlab-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(base)
            pytest.fail("no 'postgres' user to run the server as (root may not): run "
                        "scripts/bootstrap.sh, which installs Debian's postgresql",
                        pytrace=False)
        os.chown(base, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    server = PostgresServer(bin_dir, base, as_user)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """``postgresql+psycopg://postgres@127.0.0.1:PORT/rtlab``."""
    return postgres_server.url()


@pytest.fixture(params=["sqlite", "postgresql"])
def results_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty results database on each backend: a SQLite file, and a database of
    its own on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'results.db'}"
    return request.getfixturevalue("postgres_server").new_database()
