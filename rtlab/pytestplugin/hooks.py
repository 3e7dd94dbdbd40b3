"""rtlab's pytest plugin for the on-board suite, beside labgrid's (which its entry point
loads): the suite's command-line options, the board and image identity, and the result
recorder that writes one record per test case whatever its outcome (a console log
attached to every case that did not pass)."""

import datetime
import os
import signal
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from rtlab.artifacts.manifest import image_manifest_for
from rtlab.artifacts.record import KINDS, write_record
from rtlab.measure.conditions import RunNotValid
from rtlab.measure.trace import TRACE_CHOICES, TRACERS
from rtlab.pytestplugin.record import (
    CaseRecord,
    artifact_path,
    attachment_line,
    case_record,
)
from rtlab.util.errors import InfrastructureError
from rtlab.util.paths import REPO_ROOT
from rtlab.verdict.baseline import NEWEST_RUNS

# what a case runs (its record's kind): @pytest.mark.rtlab_kind("cyclictest")
KIND_MARKER = "rtlab_kind"
RECORD_KEY = pytest.StashKey[CaseRecord]()
CONSOLE_ATTACHED_KEY = pytest.StashKey[bool]()
WRITTEN_KEY = pytest.StashKey[bool]()
CONSOLE_TAIL_LINES = 200


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rtlab")
    group.addoption("--rt-duration", type=int, default=10,
                    help="seconds of measurement per test case (the field's 1 h is 3600)")
    group.addoption("--rt-suite", default=str(REPO_ROOT / "suite.yaml"),
                    help="suite file: scenarios, intervals and rt-tests to run")
    group.addoption("--rt-scenarios", default=None,
                    help="comma-separated scenarios of the suite file (default: all)")
    group.addoption("--rt-intervals", default=None,
                    help="comma-separated cyclictest intervals in µs (default: the suite's)")
    group.addoption("--rt-tests", default=None,
                    help="comma-separated other rt-tests (default: the suite's; 'none')")
    group.addoption("--rt-window", type=int, default=None, metavar="SECONDS",
                    help="measure each case in windows of SECONDS until the statistics "
                         "decide, --rt-duration being the cap (rtlab.verdict.sequential)")
    group.addoption("--rt-baseline", default=None, metavar="URL",
                    help="results store whose runs every latency case is compared with "
                         "(default: $RTLAB_RESULTS_DB; none: it runs to the cap, judged by "
                         "its limits)")
    group.addoption("--rt-baseline-ref", default=os.environ.get("CI_DEFAULT_BRANCH", "main"),
                    help="branch of the baseline runs (default: $CI_DEFAULT_BRANCH, else "
                         "main; empty: any)")
    group.addoption("--rt-baseline-runs", type=int, default=NEWEST_RUNS,
                    help="how many of its newest runs (default 20, as rtlab report)")
    group.addoption("--rt-pipeline-jobs", type=int, default=1, metavar="N",
                    help="how many jobs of one pipeline judge latency cases as this one "
                         "does (default 1): the pipeline's error budget "
                         "(thresholds.yaml pipeline_false_fail, every way a case fails) "
                         "is shared over this session's latency cases times N "
                         "(rtlab.verdict.budget)")
    group.addoption("--rt-tier", default=None,
                    help="a tier of the suite file: its cases (full: the whole matrix); "
                         "the records say which tier ran")
    group.addoption("--rt-cases", default=None,
                    help="comma-separated cases instead of the matrix of --rt-scenarios × "
                         "--rt-intervals and --rt-tests: scenario/interval (hackbench/100us) "
                         "or an rt-test (pi_stress)")
    group.addoption("--rt-results", default=None,
                    help="folder for the JSON result records (one per test case)")
    group.addoption("--rt-thresholds", default=str(REPO_ROOT / "thresholds.yaml"),
                    help="thresholds file")
    group.addoption("--rt-trace", default="auto", choices=TRACE_CHOICES,
                    help="keep the kernel's trace of a latency case that breaks its max_us "
                         "(rtlab.measure.trace): auto (default) where thresholds.yaml sets "
                         "trace: true or the series' last stored run (--rt-baseline, else "
                         "$RTLAB_RESULTS_DB) failed; always; never")
    group.addoption("--rt-trace-tracer", default="nop", choices=TRACERS,
                    help="the kernel tracer beside the events: nop (the events alone) or "
                         "function (every kernel function, at a cost)")
    group.addoption("--rt-board", default=None,
                    help="board name for thresholds (default: the place's 'board' tag)")
    group.addoption("--rt-flavour", default=None,
                    help="kernel flavour for thresholds (default: from the image manifest)")


@pytest.fixture(scope="session")
def image_manifest() -> dict[str, Any]:
    return image_manifest_for(os.environ.get("LG_IMAGE"))


@pytest.fixture
def record(request: pytest.FixtureRequest) -> CaseRecord:
    """The result record of the running test case, filled in by the fixtures."""
    return request.node.stash[RECORD_KEY]


@pytest.fixture
def case_artifact(request: pytest.FixtureRequest, record: CaseRecord,
                  tmp_path: Path) -> Callable[[str], Path]:
    """``case_artifact(suffix)``: where a file of the case goes, beside its record (in
    --rt-results; without it, the test's temporary folder)."""
    results = request.config.option.rt_results
    folder = Path(results) if results else tmp_path

    def path(suffix: str) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        return artifact_path(record, folder, suffix)
    return path


def pytest_configure(config: pytest.Config) -> None:
    """The marker that says what a case runs; and: `rtlab run` stops the suite with
    SIGINT (rtlab.run.runner). A launcher that ignores SIGINT in its background jobs (a
    non-interactive shell's ``cmd &``) passes that on, and Python then never raises
    KeyboardInterrupt: a cancelled case ran on to a pass. The on-board suite takes SIGINT
    whatever it inherited."""
    config.addinivalue_line("markers", f"{KIND_MARKER}(kind): what the case runs, one of "
                            f"{', '.join(KINDS)}: its result record's kind")
    if config.option.rt_results and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every case that writes a record says what it runs: a record must say its kind,
    and a case that could not write one would be lost from the history."""
    if not config.option.rt_results:
        return
    for item in items:
        if _kind(item) is None:
            raise pytest.UsageError(
                f"{item.nodeid}: no @pytest.mark.{KIND_MARKER}(kind) with kind one of "
                f"{', '.join(KINDS)}: its result record could not say what it ran")


def _kind(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker(KIND_MARKER)
    kind = marker.args[0] if marker is not None and marker.args else None
    return kind if kind in KINDS else None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[RECORD_KEY] = case_record(item.nodeid, kind=_kind(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
        item: pytest.Item, call: pytest.CallInfo[None],
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    record = item.stash.get(RECORD_KEY, None)
    if record is None:
        return report
    if call.excinfo is not None and isinstance(call.excinfo.value,
                                               (InfrastructureError, RunNotValid)):
        # the cause alone, as the JUnit message and the record's: the exception's class
        # says nothing a reader of a red pipeline needs (a void run's names the
        # requirements the board did not meet)
        crash = getattr(report.longrepr, "reprcrash", None)
        if crash is not None:
            crash.message = str(call.excinfo.value)
    record.observe(report)
    if report.failed:
        _attach_console_log(item, report)
    if report.when == "teardown":
        _attach_files(record, report)
        _write(item, record, report)
    return report


def _attach_files(record: CaseRecord, report: pytest.TestReport) -> None:
    """Each file the case kept, as GitLab's JUnit report takes attachments (junitxml
    writes system-out from the teardown report's sections)."""
    lines = [attachment_line(path) for path in record.attachments if path.exists()]
    if lines:
        report.sections.append(("Captured stdout teardown", "\n".join(lines) + "\n"))


def _write(item: pytest.Item, record: CaseRecord,
           report: pytest.TestReport | None = None) -> None:
    if not item.config.option.rt_results or item.stash.get(WRITTEN_KEY, False):
        return
    item.stash[WRITTEN_KEY] = True
    record.finished = datetime.datetime.now(datetime.UTC).isoformat()
    path = write_record(Path(item.config.option.rt_results), record.as_dict())
    item.user_properties.append(("result_record", str(path)))
    # the teardown report copied the item's properties before the record was written;
    # junitxml writes the properties from that copy
    if report is not None and report.user_properties is not item.user_properties:
        report.user_properties = [*report.user_properties, ("result_record", str(path))]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None
                            ) -> Generator[None, object, object]:
    """A case cut short by an interrupt (Ctrl-C, or SIGTERM on `rtlab run`) gets no
    report from pytest; it still gets a record, an error that says so."""
    try:
        return (yield)
    except KeyboardInterrupt:
        record = item.stash.get(RECORD_KEY, None)
        if record is not None:
            record.verdict = "error"
            record.message = "interrupted before the case finished (the run was stopped)"
            _write(item, record)
        raise


def _attach_console_log(item: pytest.Item, report: pytest.TestReport) -> None:
    if not item.config.option.lg_log or item.stash.get(CONSOLE_ATTACHED_KEY, False):
        return
    item.stash[CONSOLE_ATTACHED_KEY] = True
    texts = []
    for log in sorted(Path(item.config.option.lg_log).glob("console_*")):
        lines = log.read_bytes().decode(errors="replace").splitlines()[-CONSOLE_TAIL_LINES:]
        texts.append(f"--- console log {log.name} (last {CONSOLE_TAIL_LINES} lines) ---\n"
                     + "\n".join(lines) + "\n")
    # a fault before the board was ever switched on (PDU, SD card) leaves no console log;
    # the case says so rather than leaving the reader to wonder
    for text in texts or ["--- console log: nothing was read from the console ---\n"]:
        # junitxml writes system-out from the teardown report, which copies the item's
        # report sections; a failing teardown's own report is already built
        if report.when == "teardown":
            report.sections.append(("Captured stdout teardown", text))
        else:
            item.add_report_section(report.when, "stdout", text)


