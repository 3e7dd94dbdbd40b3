"""Stand-in boards for the one-board door (tests/target/test_latency.py as `rtlab run`
runs it, with rtlab's pytest plugin writing the result record and JUnit), without QEMU.

Everything on the host's side is the suite's own code: the fixtures of
tests/target/conftest.py, the measurement fixture, the judge, the record plugin. What
stands in is the board: labgrid's strategy (``strategy``: a shell, its boots, a cleanup),
its answers (system facts, cyclictest's JSON) and the window (``run_window``: what the
board printed, the conditions it showed). Each case is scripted (:class:`Behaviour`) to
be one row of the board-outcome table (docs/verdicts.md): a pass, a breach, a skip, an
error before measuring, a breach then a console lost while the trace comes back, a void
run, conditions never checked, a cleanup that fails after the last case.
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import attr
import numpy as np

from rtlab.artifacts.record import RUN_ID_VARIABLE, read_record
from rtlab.util.paths import REPO_ROOT

SCRIPT_VARIABLE = "RTLAB_STANDIN_SCRIPT"
THRESHOLDS = """\
defaults:
  max_us: 150
  avg_us: 100000
  statistics: {gating: false}
boards:
  imx6q:
    flavours:
      rt: {}
"""


@attr.frozen
class Behaviour:
    """What the stand-in board does in one case."""

    spike_us: int | None = None
    """One wake-up of CPU 2 at this latency (past max_us 150: a breach)."""
    before: str | None = None
    """The console lost before anything was measured (the window raises)."""
    conditions: str = "checked"
    """``checked`` (met), ``mismatch`` (a void run), ``never`` (the program ended before
    either check) or ``once-never`` (so in the first window, checked in the next)."""
    broke: bool = False
    """cyclictest ended the run at its breach (--breaktrace armed: --rt-trace always)."""
    trace: str | None = None
    """The console lost while the breach's trace is copied back."""
    samples: int = 3000
    seed: int = 0
    json: str | None = None
    """cyclictest's JSON as given (a recorded window), instead of the synthetic one."""


def cyclictest_json(behaviour: Behaviour, cpus: int = 4) -> str:
    """cyclictest's --json of the stand-in's window: a 10-30 µs body on every CPU."""
    if behaviour.json is not None:
        return behaviour.json
    rng = np.random.default_rng(behaviour.seed)
    threads = {}
    for cpu in range(cpus):
        latencies = 10 + rng.integers(0, 20, behaviour.samples)
        if behaviour.spike_us is not None and cpu == 2:
            latencies[behaviour.samples // 2] = behaviour.spike_us
        inside = latencies[latencies < 400]
        buckets, counts = np.unique(inside, return_counts=True)
        threads[str(cpu)] = {
            "histogram": {str(b): int(c) for b, c in zip(buckets, counts, strict=True)},
            "cycles": int(latencies.size), "min": int(latencies.min()),
            "max": int(latencies.max()), "avg": float(latencies.mean()), "cpu": cpu,
            "node": -1}
    return json.dumps({
        "file_version": 1,
        "cmdline:": "cyclictest -S -m -p 90 -i 1000 -h 400 -q --json=/tmp/c.json",
        "rt_test_version:": "2.40", "start_time": "Sat, 28 Nov 2026 10:00:00 +0000",
        "end_time": "Sat, 28 Nov 2026 10:00:10 +0000", "return_code": 0,
        "sysinfo": {"sysname": "Linux", "nodename": "standin", "release": "6.1.0-rt",
                    "version": "#1 SMP PREEMPT_RT Debian", "machine": "armv7l",
                    "realtime": 1},
        "num_threads": cpus, "resolution_in_ns": 0, "thread": threads})


CONFTEST = '''
"""The stand-in board behind the suite's own fixtures (tests/standin_board.py)."""
import json
import os

import pexpect
import pytest

from tests.target.conftest import *  # noqa: F403 - the suite's fixtures and hooks
from tests.target import conftest as suite_conftest
from tests import standin_board


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    suite_conftest.pytest_configure(config)
    # labgrid's plugin looks for a broken strategy among the environment's targets before
    # each case that uses ``strategy``: the stand-in's environment has none
    from labgrid.pytestplugin.hooks import LABGRID_ENV_KEY
    config.stash[LABGRID_ENV_KEY] = standin_board.NO_TARGETS

SCRIPT = json.loads(open(os.environ[standin_board.SCRIPT_VARIABLE]).read())


@pytest.fixture(scope="session")
def strategy():
    return standin_board.StandInStrategy(SCRIPT.get("cleanup"))


@pytest.fixture(scope="session")
def place():
    return None


@pytest.fixture(scope="session")
def system_info():
    return standin_board.system_info()


@pytest.fixture(scope="session")
def image_manifest():
    return {"board": "imx6q", "flavour": "rt", "image_id": "standin-image",
            "kernel": {"package": "linux-image-rt", "version": "6.1-1", "release": "6.1"},
            "sd_image": {"sha256": "0" * 64}}


@pytest.fixture(autouse=True)
def stand_in_board(request, monkeypatch, strategy):
    case = f"{request.getfixturevalue('scenario')}/{request.getfixturevalue('interval_us')}us"
    behaviour = standin_board.Behaviour(**SCRIPT["cases"].get(case, {}))
    strategy.shell.answer = standin_board.cyclictest_json(behaviour)
    monkeypatch.setattr(request.module, "run_window",
                        standin_board.window_of(behaviour))
    from rtlab.measure import trace

    monkeypatch.setattr(trace, "prepare", standin_board.trace_support)
    monkeypatch.setattr(trace, "parse_break", standin_board.parse_break)

    def lost(*args, **kwargs):
        raise pexpect.TIMEOUT("Timeout exceeded.\\n<pexpect.fdpexpect.fdspawn>: console")
    if behaviour.trace is not None:
        monkeypatch.setattr(trace, "collect", lost)
        monkeypatch.setattr(trace, "disarm", lost)
    else:
        monkeypatch.setattr(trace, "disarm", lambda shell: None)
'''


class _NoTargets:
    """labgrid's Environment, as its pytest plugin asks it, with neither targets nor
    features."""

    class config:  # noqa: N801 - labgrid's Environment.config
        @staticmethod
        def get_targets() -> dict[str, Any]:
            return {}

    @staticmethod
    def get_features() -> set[str]:
        return set()

    @staticmethod
    def get_target_features() -> set[str]:
        return set()


NO_TARGETS = _NoTargets()


class StandInShell:
    """The board's shell: cyclictest's JSON for ``cat``, nothing else to say."""

    def __init__(self) -> None:
        self.answer = ""

    def run_check(self, command: str, **_: Any) -> list[str]:  # noqa: ANN401
        return self.answer.splitlines() if command.startswith("cat ") else []

    def run(self, command: str, **_: Any) -> tuple[list[str], list[str], int]:  # noqa: ANN401
        return self.run_check(command), [], 0


class StandInStrategy:
    """labgrid's strategy as the suite's ``board`` fixture uses it."""

    def __init__(self, cleanup_problem: str | None = None) -> None:
        self.attempts: list[dict[str, Any]] = []
        self.boots = 1
        self.shell = StandInShell()
        self.cleanup_problem = cleanup_problem

    def ensure_shell(self) -> StandInShell:
        return self.shell

    def cleanup(self) -> list[str]:
        return [self.cleanup_problem] if self.cleanup_problem else []

    def classify(self, error: BaseException) -> Exception:
        from rtlab.util.errors import InfrastructureError

        return InfrastructureError(f"the board's console: {error}")


def system_info():  # noqa: ANN201 - rtlab.measure.sysinfo.SystemInfo
    from rtlab.measure.sysinfo import SystemInfo

    return SystemInfo(kernel_release="6.1.0-rt", kernel_version="#1 SMP PREEMPT_RT Debian",
                      machine="armv7l", realtime=True, preemption="PREEMPT_RT",
                      cmdline="console=ttymxc1", cpus=4, cpu_model="ARMv7",
                      sched_rt_runtime_us=-1, isolated_cpus=(), kernel_config_source=None,
                      kernel_config={})


BREAK_LINE = "# Break value: "


def parse_break(output: str):  # noqa: ANN201 - a break, or None
    return output if BREAK_LINE in output else None


def trace_support(shell: object, settings: object):  # noqa: ANN201 - trace.TraceSupport
    from rtlab.measure.trace import TraceSupport

    return TraceSupport(available=True, reason=None, directory="/sys/kernel/tracing")


def window_of(behaviour: Behaviour):  # noqa: ANN201 - run_window's stand-in
    """``run_window`` as the board ran the case: what it printed, what it showed."""
    from rtlab.measure.conditions import MET, MISMATCH, Check, Conditions, RunNotValid
    from rtlab.measure.window import Window
    from rtlab.util.errors import InfrastructureError

    windows = []

    def run_window(shell: object, *, conditions: Any = None, **_: Any) -> Window:  # noqa: ANN401
        windows.append(behaviour)
        if behaviour.before is not None:
            raise InfrastructureError(behaviour.before)
        found = None
        unchecked = behaviour.conditions == "never" or (
            behaviour.conditions == "once-never" and len(windows) == 1)
        if conditions is not None and not unchecked:
            status = MISMATCH if behaviour.conditions == "mismatch" else MET
            found = Conditions(
                checks=(Check("rt_throttling", "off", "950000 µs" if status == MISMATCH
                              else "off", status,
                              ("RT throttling is on (sched_rt_runtime_us 950000)",)
                              if status == MISMATCH else ()),),
                snapshots=("early", "late"), requirements=conditions.requirements,
                measuring=conditions.measuring, flavour=conditions.flavour)
            if status == MISMATCH:
                raise RunNotValid(found)
        output = f"{BREAK_LINE}{behaviour.spike_us}\n" if behaviour.broke else ""
        return Window(0, output, 0.0, "0.00 0.00 0.00 1/100 1", ((), ()),
                      {"cpu_utilisation": 0.0}, "0.00 0.00 0.00 1/100 1", found)

    return run_window


def run_board(folder: Path, place: str, cases: dict[str, Behaviour], *,
              cleanup: str | None = None, extra: tuple[str, ...] = (),
              board: str = "imx6q", thresholds: str = THRESHOLDS, duration_s: int = 10,
              ) -> tuple[dict[str, dict[str, Any]], Path]:
    """One `rtlab run` of ``cases`` on a stand-in board, a pytest of its own in ``folder``
    (labgrid's plugin keeps global state): its records by case (scenario/interval) and its
    output folder (``results/`` inside, as `rtlab run --out` lays it out)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / f"script-{place}.json"
    script.write_text(json.dumps({"cases": {name: attr.asdict(b) for name, b in cases.items()},
                                  "cleanup": cleanup}))
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "test_latency.py").write_text(
        (REPO_ROOT / "tests" / "target" / "test_latency.py").read_text())
    thresholds_file = folder / "thresholds.yaml"
    thresholds_file.write_text(thresholds)
    out = folder / place
    env = {**os.environ, SCRIPT_VARIABLE: str(script),
           # each stand-in run a run (and so a boot) of its own in the results store
           RUN_ID_VARIABLE: f"standin:{place}",
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT),
                                          *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "rtlab.pytestplugin.hooks", "-p", "rtlab.pytestplugin.junit",
         "-p", "rtlab.pytestplugin.queue", "--rootdir", str(folder),
         "--rt-board", board, "--rt-flavour", "rt", "--rt-cases", ",".join(cases),
         "--rt-results", str(out / "results"), "--rt-thresholds", str(thresholds_file),
         "--rt-duration", str(duration_s), "--junitxml", str(out / f"junit-{place}.xml"),
         *extra, str(folder / "test_latency.py")],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)
    # pytest's own exit codes for a run whose cases ran (passed, or some failed or erred)
    assert done.returncode in (0, 1), done.stdout[-5000:] + done.stderr[-3000:]
    records = {}
    for path in sorted((out / "results").glob("*.json")):
        record = read_record(path)
        record["place"] = place
        records[record["name"].split("/", 2)[2]] = record
    return records, out
