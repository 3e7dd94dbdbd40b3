"""``rtlab run``: one board through the on-board suite, the way CI and a person at a desk
both do it: reserve and acquire the place, run pytest with labgrid's plugin, release."""

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import attr

from rtlab.artifacts.record import RUN_ID_VARIABLE, read_record
from rtlab.lab import client as labgrid_client
from rtlab.lab.health import (
    HealthBook,
    ensure_schedulable,
    healthy_filters,
    record_on_place,
    run_event,
)
from rtlab.lab.reservation import (
    RESERVATION_FILE,
    LabgridClient,
    ReservationAbandoned,
    filters_for,
    reserved,
)
from rtlab.measure.trace import TRACE_CHOICES, TRACERS
from rtlab.util.paths import REPO_ROOT, health_dir
from rtlab.util.variables import QUEUE_VARIABLE

logger = logging.getLogger("rtlab.run.runner")
# how long pytest gets to power the board off and write its results after an interrupt
INTERRUPT_GRACE_S = 120.0


@attr.frozen
class Selection:
    """Which part of the suite runs: the suite file's scenarios, intervals and rt-tests
    (comma-separated names; None: all of the suite's; "none" for no rt-test), or instead
    the cases one by one (``hackbench/100us,pi_stress``), and the suite and thresholds
    files (None: the repository's)."""

    scenarios: str | None = None
    intervals: str | None = None
    rt_tests: str | None = None
    suite: Path | None = None
    thresholds: Path | None = None
    cases: str | None = None
    tier: str | None = None
    """A tier of the suite file (its cases; ``full``: the whole matrix)."""
    sharing: "Sharing | None" = None
    """A plan whose cases this place shares with others (each case measured by one)."""
    window_s: int | None = None
    """Adaptive: latency cases in windows of this many seconds, the duration the cap."""
    baseline: str | None = None
    """The results store an adaptive case is compared with, and on which branch."""
    baseline_ref: str | None = None
    pipeline_jobs: int | None = None
    """How many jobs of the pipeline judge latency cases as this one (their cases share
    the pipeline's false-fail rate, rtlab.verdict.case)."""
    trace: str | None = None
    """Whether latency cases keep the kernel's trace of a breach: ``always``, ``never``,
    or (None, ``auto``) as thresholds.yaml and the series' last stored verdict say."""
    trace_tracer: str | None = None
    """The kernel tracer beside the events (None: ``nop``, the events alone)."""

    def __attrs_post_init__(self) -> None:
        matrix = [option for option, value in (("--scenarios", self.scenarios),
                                               ("--intervals", self.intervals),
                                               ("--rt-tests", self.rt_tests)) if value]
        for option, value in (("--cases", self.cases), ("--tier", self.tier)):
            if value is not None and matrix:
                raise ValueError(f"{option} names the cases itself: give it without "
                                 f"{', '.join(matrix)}")
        if self.cases is not None and self.tier is not None:
            raise ValueError("--cases and --tier both name the cases: give one")
        if self.window_s is not None and self.window_s < 1:
            raise ValueError(f"--window must be a number of seconds, got {self.window_s}")
        if self.pipeline_jobs is not None and self.pipeline_jobs < 1:
            raise ValueError(f"--pipeline-jobs must be >= 1, got {self.pipeline_jobs}")
        if self.trace is not None and self.trace not in TRACE_CHOICES:
            raise ValueError(f"--trace must be one of {', '.join(TRACE_CHOICES)}, got "
                             f"{self.trace!r}")
        if self.trace_tracer is not None and self.trace_tracer not in TRACERS:
            raise ValueError(f"--trace-tracer must be one of {', '.join(TRACERS)}, got "
                             f"{self.trace_tracer!r}")

    def test_paths(self) -> list[str]:
        """The on-board suite's modules, in the order the cases run. An adaptive run puts
        the rt-tests first: they take the whole duration while most latency cases stop
        early, and the longest first keeps one board of a shared plan from measuring an
        hour alone at the end while the others are done."""
        target = REPO_ROOT / "tests" / "target"
        if self.window_s is None:
            return [os.fspath(target)]
        return [os.fspath(target / "test_rttests.py"), os.fspath(target / "test_latency.py")]

    def pytest_args(self) -> list[str]:
        args = []
        for option, value in (("--rt-scenarios", self.scenarios),
                              ("--rt-intervals", self.intervals),
                              ("--rt-tests", self.rt_tests),
                              ("--rt-cases", self.cases), ("--rt-tier", self.tier),
                              ("--rt-window", self.window_s),
                              ("--rt-baseline-ref", self.baseline_ref),
                              ("--rt-pipeline-jobs", self.pipeline_jobs),
                              ("--rt-suite", self.suite), ("--rt-thresholds", self.thresholds),
                              ("--rt-trace", self.trace),
                              ("--rt-trace-tracer", self.trace_tracer)):
            if value is not None:
                args += [option, str(value) if isinstance(value, int) else os.fspath(value)]
        if self.sharing is not None:
            args += ["--rt-plan", self.sharing.plan]
            if self.sharing.replicate:
                args.append("--rt-replicate")
        return args

    def environment(self) -> dict[str, str]:
        """The database URLs the suite's process needs (the baseline's store, the shared
        plan's queue): through its environment, never its command line, where a password
        in a URL is every user's to read."""
        if self.baseline is None and self.sharing is None:
            return {}
        # the store's imports (SQLAlchemy) only where a store is named
        from rtlab.store import URL_VARIABLE

        env = {}
        if self.baseline is not None:
            env[URL_VARIABLE] = os.fspath(self.baseline)
        if self.sharing is not None:
            env[QUEUE_VARIABLE] = self.sharing.queue
        return env


@attr.frozen
class Sharing:
    """A plan (rtlab.run.queue) several places work on: the results store that holds its
    cases, and its name."""

    queue: str
    plan: str
    replicate: bool = False
    """Every place measures every case of the plan, a share of its budget each
    (rtlab.run.pooling), instead of each case measured by one."""


@attr.frozen
class RunOutcome:
    """What a run did; ``place`` (and its JUnit and console logs) None when it needed no
    place after all (a shared plan whose cases the other places took)."""

    place: str | None
    exit_code: int
    junit: Path | None
    results: Path
    console_logs: Path | None
    healthy: bool = True


@contextlib.contextmanager
def _interrupts_forwarded(child: subprocess.Popen) -> Iterator[None]:
    """SIGTERM (a cancelled CI job) or SIGINT on the runner becomes SIGINT for pytest,
    which then tears its fixtures down: the board is powered off and the records and
    JUnit of the finished cases are written. The runner waits for that, then releases the
    place."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def forward(signum: int, _frame: object) -> None:
        logger.warning("signal %d: stopping the suite, then releasing the place", signum)
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGINT)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_pytest(cmd: list[str], env: dict[str, str]) -> int:
    child = subprocess.Popen(cmd, env=env, cwd=REPO_ROOT)
    with _interrupts_forwarded(child):
        try:
            return child.wait()
        except BaseException:
            child.send_signal(signal.SIGINT)
            try:
                child.wait(INTERRUPT_GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            raise


# set by a caller that makes several runs of one place in one CI job (a campaign: one per
# variant and repeat, each with its own image): it tells those runs apart
RUN_PART_VARIABLE = "RTLAB_RUN_PART"


def run_id(place: str) -> str:
    """The id every record of one run carries: the CI job when there is one (a retried
    job is a new job; ``$RTLAB_RUN_PART`` names the run within it), else the place and a
    random part; a caller may set its own."""
    if os.environ.get(RUN_ID_VARIABLE):
        return os.environ[RUN_ID_VARIABLE]
    if os.environ.get("CI_JOB_ID"):
        part = os.environ.get(RUN_PART_VARIABLE)
        return (f"gitlab:{os.environ.get('CI_PIPELINE_ID', '')}:{os.environ['CI_JOB_ID']}:"
                f"{place}" + (f":{part}" if part else ""))
    return f"run:{place}:{uuid.uuid4().hex[:16]}"


def run_suite(
    *,
    place: str | None = None,
    board: str | None = None,
    image: Path,
    env_file: Path,
    coordinator: str,
    out_dir: Path,
    duration_s: int,
    label: str | None = None,
    selection: Selection = Selection(),
    kind: str = "run",
    health: HealthBook | None = None,
    reserve_timeout_s: float = 3600.0,
) -> RunOutcome:
    """Run the suite on ``place``, or on whichever place with the board tag ``board`` the
    coordinator allocates first; ``label`` names the JUnit and console files (default:
    the place).

    The place is reserved through labgrid's reservation queue first (waiting at most
    ``reserve_timeout_s`` while people or other jobs hold it; the same queue people use
    with ``labgrid-client reserve``), then acquired. The reservation is kept in
    ``out_dir``/reservation.json until it is cancelled, so that a CI job's after_script
    can clean up after a killed run (``rtlab reservation release``).

    ``kind`` "run" refuses a place marked unhealthy; "check" is the health check that
    may run on one. The outcome is counted on from the health the place holds on the
    coordinator (shared by every runner), put back there, and kept in this runner's health
    record (``health``, default the folder of rtlab.util.paths.health_dir)."""
    image = image.resolve()
    if not image.is_file():
        raise FileNotFoundError(f"image {image} does not exist (rtlab image build?)")
    health = health or HealthBook(health_dir())
    out_dir.mkdir(parents=True, exist_ok=True)
    filters = filters_for(place=place, board=board)
    if board is not None and kind == "run":
        filters = healthy_filters(LabgridClient(coordinator), filters)
    # places sharing a plan write into one folder: a state file each
    state_file = out_dir / (RESERVATION_FILE if selection.sharing is None
                            else f"reservation-{os.getpid()}.json")
    sharing = selection.sharing
    try:
        with reserved(coordinator, filters,
                      timeout_s=reserve_timeout_s, state_file=state_file,
                      progress=lambda message: print(message, flush=True),
                      abandon=(lambda: _plan_taken(sharing)) if sharing else None
                      ) as reservation:
            assert reservation.place is not None
            return _run_reserved(place=reservation.place, image=image, env_file=env_file,
                                 coordinator=coordinator, out_dir=out_dir,
                                 duration_s=duration_s, label=label or reservation.place,
                                 selection=selection, kind=kind, health=health)
    except ReservationAbandoned as reason:
        print(reason, flush=True)
        return RunOutcome(None, 0, None, out_dir / "results", None)


def _plan_taken(sharing: Sharing) -> str | None:
    """Why a place still waiting for its reservation is not needed: the plan's other
    places took every case meanwhile (None: some are left)."""
    from rtlab.run.queue import still_queued
    from rtlab.store import open_store

    store = open_store(sharing.queue)
    try:
        left = still_queued(store, sharing.plan)
    finally:
        store.close()
    return f"plan {sharing.plan} has no case left to take" if left == 0 else None


def _run_reserved(*, place: str, image: Path, env_file: Path, coordinator: str,
                  out_dir: Path, duration_s: int, label: str, selection: Selection,
                  kind: str, health: HealthBook) -> RunOutcome:
    if kind == "run":
        ensure_schedulable(coordinator, place)
    junit = out_dir / f"junit-{label}.xml"
    results = out_dir / "results"
    console_logs = out_dir / "console" / label
    # the run's own place, image and coordinator, never a manual session's of the shell
    env = labgrid_client.environment(LG_PLACE=place, LG_IMAGE=os.fspath(image),
                                     LG_COORDINATOR=coordinator,
                                     **{RUN_ID_VARIABLE: run_id(place)},
                                     **selection.environment())
    before = set(results.glob("*.json"))
    labgrid_client.run(coordinator, "acquire", place=place)
    try:
        cmd = [sys.executable, "-m", "pytest", *selection.test_paths(),
               "--lg-env", os.fspath(env_file.resolve()), "--lg-coordinator", coordinator,
               "--lg-log", os.fspath(console_logs), f"--junitxml={junit}",
               "--rt-results", os.fspath(results), "--rt-duration", str(duration_s),
               "-p", "no:cacheprovider", "-o", f"junit_suite_name={label}",
               "-o", "junit_logging=all", "-o", "junit_family=xunit1",
               *selection.pytest_args()]
        code = _run_pytest(cmd, env)
        records = [read_record(path) for path in sorted(set(results.glob("*.json")) - before)]
        # counted while the place is still ours: no other runner's outcome can come between
        # reading the place's error count and writing it back
        state = record_on_place(health, coordinator, run_event(place, kind, code, records))
    finally:
        labgrid_client.run(coordinator, "release", place=place)
    return RunOutcome(place, code, junit, results, console_logs, state.healthy)
