"""Fault injection on the virtual rack: arm a fault on imx6q-01, run the suite through
`rtlab run` as CI does, and read back what it made of it — JUnit, result records, the
place's health, and the state the rack was left in."""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import attr
import pytest
from ruamel.yaml import YAML

from rtlab.lab.health import ERRORS_TAG_KEY, TAG_KEY
from rtlab.util.paths import REPO_ROOT
from rtlab.vlab import control
from rtlab.vlab.config import VlabConfig

PLACE = "imx6q-01"
CLIENT = str(Path(sys.executable).parent / "labgrid-client")


@attr.frozen
class FaultRun:
    returncode: int
    output: str
    out_dir: Path
    records: list[dict]
    cases: list[ET.Element]

    def record(self, name: str) -> dict:
        [record] = [r for r in self.records if r["name"].endswith(name)]
        return record

    def case(self, name: str) -> ET.Element:
        [case] = [c for c in self.cases if c.get("name", "").endswith(name)]
        return case

    def attempts(self, name: str, step: str) -> list[dict]:
        return [a for a in self.record(name)["infrastructure"]["attempts"]
                if a["step"] == step]


def fault_env(tmp_path: Path, login_timeout: int, boot_attempts: int,
              pdu_timeout: float, silence_timeout: float) -> Path:
    """env/virtual.yaml with short timeouts, so a fault that can never clear costs
    little time."""
    yaml = YAML(typ="rt")
    data = yaml.load((REPO_ROOT / "env" / "virtual.yaml").read_text())
    drivers = data["targets"]["main"]["drivers"]
    drivers["ShellDriver"]["login_timeout"] = login_timeout
    drivers["RTLabStrategy"]["boot_attempts"] = boot_attempts
    drivers["RTLabStrategy"]["pdu_timeout"] = pdu_timeout
    drivers["RTLabStrategy"]["silence_timeout"] = silence_timeout
    env = tmp_path / "virtual-faults.yaml"
    with env.open("w") as out:
        yaml.dump(data, out)
    return env


@pytest.fixture
def run_with_faults(vlab: VlabConfig, image, tmp_path, monkeypatch):
    """``run_with_faults(faults, scenarios=..., duration=...)`` arms each (kind, params)
    on imx6q-01, runs one place's suite and returns a FaultRun. Each test has its own
    health folder and starts and ends with the place's shared health tags cleared, so
    the faults of one test never make the place unhealthy for the next; the faults are
    cleared and the board switched off afterwards whatever happened."""
    monkeypatch.setenv("RTLAB_HEALTH_DIR", str(tmp_path / "health"))
    forget_health(vlab)
    runs = []

    # 10 s windows, as the suite's default: the emulated board has kept a cyclictest
    # thread off its CPU for over 4 s (thresholds.yaml), and a 2 s window once ended
    # with two CPUs at 0 samples, a latency fail in a test that expects a pass
    def run(faults: list[tuple[str, dict]], *, scenarios: str = "idle", duration: int = 10,
            login_timeout: int = 90, boot_attempts: int = 2,
            pdu_timeout: float = 5.0, silence_timeout: float = 15.0,
            suite: Path | None = None) -> FaultRun:
        for kind, params in faults:
            control.inject_fault(vlab, PLACE, kind, **params)
        runs.append(None)
        # a folder per run, so that each FaultRun holds only its own records
        out = tmp_path / f"out-{len(runs)}"
        proc = subprocess.run(
            [sys.executable, "-m", "rtlab.cli", "run", "--place", PLACE,
             "--image", str(image("imx6q", "rt")),
             "--env", str(fault_env(tmp_path, login_timeout, boot_attempts, pdu_timeout,
                                        silence_timeout)),
             "--out", str(out), "--duration", str(duration), "--scenarios", scenarios,
             "--intervals", "1000", "--rt-tests", "none",
             *(["--suite", str(suite)] if suite is not None else [])],
            capture_output=True, text=True, cwd=REPO_ROOT, timeout=1200, check=False,
            env={**os.environ},
        )
        records = [json.loads(p.read_text()) for p in sorted((out / "results").glob("*.json"))]
        junit = out / f"junit-{PLACE}.xml"
        cases = ET.parse(junit).getroot().findall(".//testcase") if junit.exists() else []
        return FaultRun(proc.returncode, proc.stdout + proc.stderr, out, records, cases)

    yield run
    control.clear_faults(vlab, PLACE)
    subprocess.run([CLIENT, "-x", vlab.coordinator_address, "-p", PLACE, "release"],
                   capture_output=True, check=False)
    forget_health(vlab)


def forget_health(vlab: VlabConfig) -> None:
    """The place's error count is shared through its tags (rtlab.lab.health): clear it,
    so that it holds only the errors of one test."""
    subprocess.run([CLIENT, "-x", vlab.coordinator_address, "-p", PLACE, "set-tags",
                    f"{TAG_KEY}=", f"{ERRORS_TAG_KEY}="], capture_output=True, check=True)


def assert_error(run: FaultRun, case_name: str, cause: str) -> dict:
    """The case is an error (never a pass, never a latency fail) whose one-line message
    starts with ``cause``, in the JUnit and in the result record; returns the record."""
    assert run.returncode != 0, run.output[-3000:]
    case = run.case(case_name)
    assert case.find("failure") is None, "an infrastructure fault must never be a fail"
    error = case.find("error")
    assert error is not None, ET.tostring(case)[:2000]
    assert cause in error.get("message", ""), error.get("message")
    record = run.record(case_name)
    assert record["verdict"] == "error"
    assert record["message"].startswith(cause), record["message"]
    assert "\n" not in record["message"]
    return record


def assert_console_attached(run: FaultRun, case_name: str, expected: str) -> None:
    system_out = run.case(case_name).findtext("system-out") or ""
    assert "--- console log" in system_out
    assert expected in system_out, system_out[-2000:]


def assert_cleaned_up(vlab: VlabConfig, sdmux: str) -> None:
    """Power off, no QEMU left for the board, the SD mux in the given state and the
    place released."""
    status = control.status(vlab)
    assert status is not None
    [board] = [b for b in status["boards"] if b["place"] == PLACE]
    assert board["power"] == "off"
    assert board["qemu_pid"] is None
    assert board["sdmux"] == sdmux
    qemu = subprocess.run(["pgrep", "-a", "-f", f"qemu-system-.*{PLACE}"],
                          capture_output=True, text=True, check=False).stdout
    assert qemu == "", qemu
    show = subprocess.run([CLIENT, "-x", vlab.coordinator_address, "-p", PLACE, "show"],
                          capture_output=True, text=True, check=True).stdout
    assert "acquired: None" in show, show
