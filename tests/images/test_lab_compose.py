"""The lab's services composed: docker/lab/compose.yaml under Compose v2 brings up the
coordinator, the results database (the stand-in from Debian's PostgreSQL, as the file's
RTLAB_DB_IMAGE allows) and a lab host's exporter (`--profile exporter`); the exporter
registers the virtual rack's places with the composed coordinator, a client acquires
one and powers it, and a test stage's records and JUnit, ingested by the CI image as
the test job does, land in the database after its migrations. The GitLab runner is
not started (docs/images.md). About 1 min."""

import os
import secrets
import subprocess

import requests
from sqlalchemy import text

from rtlab.store import open_store
from rtlab.util import paths
from rtlab.vlab.config import LOOPBACK
from rtlab.vlab.server import exporter_config
from tests.images.conftest import DOCKER, engine_environment, labgrid, wait_for
from tests.integration.rackports import free_ports

COMPOSE = paths.REPO_ROOT / "docker" / "lab" / "compose.yaml"
EXPORTER = "labhost-vlab"
PLACE = "rpi3-01"
RECORDS = paths.REPO_ROOT / "tests" / "data" / "records" / "vlab-imx6q-rt"
JUNIT = paths.REPO_ROOT / "tests" / "data" / "junit" / "vlab-imx6q-rt"


def test_the_lab_services_come_up_composed(docker, built_image, rack, tmp_path):
    config, state_dir = rack
    coordinator_port, db_port = free_ports(2)
    password = secrets.token_hex(12)
    exporter_file = tmp_path / "exporter.yaml"
    exporter_file.write_text(exporter_config(config, state_dir))
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
    key.with_suffix(".pub").chmod(0o644)
    project = f"rtlab-lab-test-{os.getpid()}"
    env = {**engine_environment(), "RTLAB_DB_PASSWORD": password,
           "RTLAB_DB_IMAGE": built_image("results-db"),
           "RTLAB_COORDINATOR_PORT": str(coordinator_port), "RTLAB_DB_PORT": str(db_port),
           "RTLAB_EXPORTER_CONFIG": os.fspath(exporter_file),
           "RTLAB_AUTHORIZED_KEYS": os.fspath(key.with_suffix(".pub")),
           "LG_EXPORTER_NAME": EXPORTER}
    built_image("exporter")
    compose = [DOCKER, "compose", "-f", COMPOSE, "-p", project, "--profile", "exporter"]

    def run(*args: str) -> str:
        done = subprocess.run([*compose, *args], env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, (args, done.stdout + done.stderr)
        return done.stdout

    try:
        run("up", "-d", "--no-build", "coordinator", "results-db", "exporter")
        wait_for("the results database is healthy",
                 lambda: "healthy" in run("ps", "--format", "{{.Service}} {{.Health}}"), 90)
        coordinator = f"{LOOPBACK}:{coordinator_port}"
        expected = {f"{EXPORTER}/{PLACE}/{cls}"
                    for cls in ("NetworkSerialPort", "NetworkPowerPort")}
        wait_for("the composed exporter registers with the composed coordinator",
                 lambda: expected <= set(labgrid(coordinator, "resources").split()))
        labgrid(coordinator, "-p", PLACE, "create")
        # labgrid's own client: the place without rtlab's virtual SD mux classes
        for match in sorted(expected):
            labgrid(coordinator, "-p", PLACE, "add-match", match)
        labgrid(coordinator, "-p", PLACE, "acquire")
        labgrid(coordinator, "-p", PLACE, "power", "on")
        slot = next(s for s in requests.get(f"{config.api_url}/status", timeout=5).json()[
            "boards"] if s["place"] == PLACE)
        assert slot["power"] == "on"
        labgrid(coordinator, "-p", PLACE, "power", "off")
        labgrid(coordinator, "-p", PLACE, "release")

        # a test stage's output, ingested from the CI image as the test job does
        url = f"postgresql://rtlab@{LOOPBACK}:{db_port}/rtlab"
        docker("run", "--rm", "--network", "host", "-e", f"PGPASSWORD={password}",
               "-v", f"{RECORDS}:/results/records:ro", "-v", f"{JUNIT}:/results/junit:ro",
               built_image("ci"), "rtlab", "results", "ingest", "--db", url, "/results")
        store = open_store(f"postgresql://rtlab:{password}@{LOOPBACK}:{db_port}/rtlab")
        try:
            with store.engine.connect() as connection:
                revision = connection.execute(text("SELECT version_num FROM alembic_version"))
                assert revision.scalar()
                cases = connection.execute(text("SELECT count(*) FROM cases")).scalar()
        finally:
            store.close()
        assert cases == len(list(RECORDS.glob("*.json")))
        # the coordinator's state is in its volume, as the file says
        assert "places.yaml" in docker("run", "--rm", "-v", f"{project}_coordinator-state:/s",
                                       "--entrypoint", "ls", built_image("exporter"),
                                       "/s").stdout
    finally:
        logs = subprocess.run([*compose, "logs", "--no-color"], env=env, capture_output=True,
                              text=True, check=False)
        subprocess.run([*compose, "down", "-v"], env=env, capture_output=True, check=False,
                       timeout=120)
        print(logs.stdout[-4000:])
