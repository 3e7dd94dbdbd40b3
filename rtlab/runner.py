"""``rtlab run``: one board through the on-board suite, the way CI and a person at a desk
both do it: reserve and acquire the place, run pytest with labgrid's plugin, release."""

import os
import subprocess
import sys
from pathlib import Path

import attr

from .paths import REPO_ROOT


@attr.frozen
class Selection:
    """Which part of the suite runs: the suite file's scenarios, intervals and rt-tests
    (comma-separated names; None: all of the suite's; "none" for no rt-test), and the
    suite and thresholds files (None: the repository's)."""

    scenarios: str | None = None
    intervals: str | None = None
    rt_tests: str | None = None
    suite: Path | None = None
    thresholds: Path | None = None

    def pytest_args(self) -> list[str]:
        args = []
        for option, value in (("--rt-scenarios", self.scenarios),
                              ("--rt-intervals", self.intervals),
                              ("--rt-tests", self.rt_tests),
                              ("--rt-suite", self.suite), ("--rt-thresholds", self.thresholds)):
            if value is not None:
                args += [option, os.fspath(value)]
        return args


@attr.frozen
class RunOutcome:
    place: str
    exit_code: int
    junit: Path
    results: Path
    console_logs: Path


def _client(coordinator: str, place: str, *args: str, timeout: float = 60) -> None:
    cmd = [os.fspath(Path(sys.executable).parent / "labgrid-client"), "-x", coordinator,
           "-p", place, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"labgrid-client {' '.join(args)} on {place} failed: "
                           f"{(proc.stderr or proc.stdout).strip()}")


def run_suite(
    *,
    place: str,
    image: Path,
    env_file: Path,
    coordinator: str,
    out_dir: Path,
    duration_s: int,
    label: str | None = None,
    selection: Selection = Selection(),
) -> RunOutcome:
    """Run the suite; ``label`` names the JUnit and console files (default: the place)."""
    label = label or place
    image = image.resolve()
    if not image.is_file():
        raise FileNotFoundError(f"image {image} does not exist (rtlab image build?)")
    out_dir.mkdir(parents=True, exist_ok=True)
    junit = out_dir / f"junit-{label}.xml"
    results = out_dir / "results"
    console_logs = out_dir / "console" / label
    env = {**os.environ, "LG_PLACE": place, "LG_IMAGE": os.fspath(image),
           "LG_COORDINATOR": coordinator}
    _client(coordinator, place, "acquire")
    try:
        cmd = [sys.executable, "-m", "pytest", os.fspath(REPO_ROOT / "tests" / "target"),
               "--lg-env", os.fspath(env_file.resolve()), "--lg-coordinator", coordinator,
               "--lg-log", os.fspath(console_logs), f"--junitxml={junit}",
               "--rt-results", os.fspath(results), "--rt-duration", str(duration_s),
               "-p", "no:cacheprovider", "-o", f"junit_suite_name={label}",
               "-o", "junit_logging=system-out", "-o", "junit_family=xunit1",
               *selection.pytest_args()]
        code = subprocess.run(cmd, env=env, cwd=REPO_ROOT, check=False).returncode
    finally:
        _client(coordinator, place, "release")
    return RunOutcome(place, code, junit, results, console_logs)
