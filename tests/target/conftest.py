"""Fixtures of the on-board suite: the board in a shell, its facts, thresholds, the suite
file's matrix, and the start of every test case's result record."""

import os
from pathlib import Path

import pexpect
import pytest
import serial
from labgrid.driver.exception import ExecutionError
from labgrid.exceptions import NoResourceFoundError
from labgrid.resource.remote import RemotePlace

from rtlab.artifacts.identity import RUN_VARIABLE as CAMPAIGN_RUN_VARIABLE
from rtlab.artifacts.manifest import series_flavour
from rtlab.lab.strategy import caused_by
from rtlab.measure.facts import FactsError, read_system_info_at_once
from rtlab.measure.loads import HostTraffic
from rtlab.measure.rttests import TESTS
from rtlab.measure.suite import Cases, load_suite
from rtlab.util.errors import InfrastructureError
from rtlab.verdict.thresholds import load_thresholds

BOARD_KEY = pytest.StashKey[object]()


@pytest.fixture(scope="session")
def board(request, strategy):
    """The board's strategy for the session; afterwards, whatever happened, the board is
    powered off and its SD mux left in a defined state."""
    request.config.stash[BOARD_KEY] = strategy
    yield strategy
    problems = strategy.cleanup()
    if problems:
        raise InfrastructureError("cleanup of the place failed: " + "; ".join(problems))


@pytest.fixture
def shell(board, record):
    """The board at a working shell for this test case: booted (with retries) on first
    use, booted again if an earlier case left it crashed or its console lost. The boot
    and flash attempts made for this case go into its result record."""
    before = len(board.attempts)
    try:
        return board.ensure_shell()
    finally:
        record.facts["infrastructure"] = {"attempts": board.attempts[before:],
                                          "boots_in_session": board.boots}


@pytest.fixture(scope="session")
def system_info(board):
    # in two round trips of the console rather than one per fact (rtlab.measure.facts)
    try:
        return read_system_info_at_once(board.ensure_shell())
    except FactsError as error:
        raise InfrastructureError(str(error)) from error


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """A fixture that fails while it uses the board (a command that times out, a console
    that drops) fails with the one-line cause: the test case is an error, and its message
    says what happened to the board."""
    try:
        return (yield)
    except (InfrastructureError, pytest.skip.Exception, pytest.fail.Exception,
            pytest.UsageError):
        raise
    except Exception as error:
        strategy = request.config.stash.get(BOARD_KEY, None)
        if strategy is None or not _board_error(error):
            raise
        raise strategy.classify(error) from error


def _board_error(error: BaseException) -> bool:
    """Errors of the board or its console, as labgrid, pexpect and pyserial raise them."""
    return caused_by(error, (ExecutionError, pexpect.TIMEOUT, pexpect.EOF,
                             serial.SerialException, ConnectionError, EOFError))


@pytest.fixture(scope="session")
def place(target) -> RemotePlace | None:
    """The labgrid place of the board; None for a target with local resources."""
    try:
        return target.get_resource(RemotePlace)
    except NoResourceFoundError:
        return None


@pytest.fixture(scope="session")
def place_tags(place) -> dict[str, str]:
    return dict(place.tags or {}) if place is not None else {}


@pytest.fixture(scope="session")
def board_name(request, place, place_tags) -> str:
    if request.config.option.rt_board:
        return request.config.option.rt_board
    if place is None:
        raise pytest.UsageError("not a remote place: give --rt-board")
    board = place_tags.get("board")
    if not board:
        raise pytest.UsageError(f"place {place.name} has no 'board' tag: give --rt-board")
    return board


@pytest.fixture(scope="session")
def flavour(request, image_manifest) -> str:
    """The series the results are filed under (board/<flavour>/...): the image's flavour,
    or a campaign variant's name."""
    value = request.config.option.rt_flavour or series_flavour(image_manifest)
    if not value:
        raise pytest.UsageError("no flavour in the image manifest: give --rt-flavour")
    return value


@pytest.fixture(scope="session")
def thresholds_flavour(request, image_manifest, flavour) -> str:
    """The thresholds.yaml flavour the kernel is judged by: a campaign variant's own
    (each preemption model its own limits), else the series' flavour."""
    variant = image_manifest.get("variant") or {}
    if request.config.option.rt_flavour or not variant.get("thresholds"):
        return flavour
    return variant["thresholds"]


@pytest.fixture(scope="session")
def suite(request):
    return _suite(request.config)


@pytest.fixture(scope="session")
def thresholds(request, suite):
    # scenario names are checked against the suite that runs, not the repository's
    return load_thresholds(Path(request.config.option.rt_thresholds), suite)


def _suite(config):
    return load_suite(Path(config.option.rt_suite))


def _names(option: str, text: str | None, default: list[str], valid: list[str]) -> list[str]:
    if text is None:
        return default
    if text == "none":
        return []
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in valid]
    if unknown:
        raise pytest.UsageError(f"{option}: unknown {', '.join(unknown)} "
                                f"(valid: {', '.join(valid)})")
    return names


def _intervals(config, suite) -> list[int]:
    text = config.option.rt_intervals
    if text is None:
        return list(suite.intervals_us)
    try:
        intervals = [int(value) for value in text.split(",") if value.strip()]
    except ValueError:
        raise pytest.UsageError(f"--rt-intervals: not a list of µs: {text!r}") from None
    if not intervals or min(intervals) <= 0:
        raise pytest.UsageError(f"--rt-intervals: not a list of positive µs: {text!r}")
    return intervals


def _selected_cases(config, suite) -> Cases | None:
    """--rt-cases or --rt-tier, which name cases instead of a matrix (None: neither, or
    the full tier)."""
    text, tier = config.option.rt_cases, config.option.rt_tier
    if text is None and tier is None:
        return None
    given = "--rt-cases" if text is not None else "--rt-tier"
    if text is not None and tier is not None:
        raise pytest.UsageError("--rt-cases and --rt-tier both name the cases: give one")
    matrix = [option for option, value in (("--rt-scenarios", config.option.rt_scenarios),
                                           ("--rt-intervals", config.option.rt_intervals),
                                           ("--rt-tests", config.option.rt_tests))
              if value is not None]
    if matrix:
        raise pytest.UsageError(f"{given} names the cases itself: drop {', '.join(matrix)}")
    try:
        return suite.cases(text) if text is not None else suite.tier(tier)
    except ValueError as error:
        raise pytest.UsageError(f"{given}: {error}") from None


def pytest_generate_tests(metafunc):
    """The matrix comes from the suite file, so adding a scenario is a data change."""
    config = metafunc.config
    if "scenario" in metafunc.fixturenames:
        suite = _suite(config)
        chosen = _selected_cases(config, suite)
        if chosen is not None:
            cases = list(chosen.latency)
        else:
            names = _names("--rt-scenarios", config.option.rt_scenarios,
                           list(suite.scenarios), list(suite.scenarios))
            cases = [(name, interval) for name in names
                     for interval in _intervals(config, suite)]
        _parametrize(metafunc, ("scenario", "interval_us"), cases,
                     [f"{name}-{interval}us" for name, interval in cases])
    if "rt_test" in metafunc.fixturenames:
        suite = _suite(config)
        chosen = _selected_cases(config, suite)
        tools = (list(chosen.rt_tests) if chosen is not None else
                 _names("--rt-tests", config.option.rt_tests, list(suite.rt_tests),
                        list(TESTS)))
        _parametrize(metafunc, "rt_test", tools, tools)


def _parametrize(metafunc, names, values, ids) -> None:
    if values:
        metafunc.parametrize(names, values, ids=ids)
        return
    # nothing selected: the test is deselected (pytest_collection_modifyitems), not
    # reported as a skipped case of an empty matrix
    count = len(names) if isinstance(names, tuple) else 1
    metafunc.parametrize(names, [pytest.param(*[None] * count, marks=NOTHING_SELECTED)])


NOTHING_SELECTED = pytest.mark.rtlab_nothing_selected


def pytest_configure(config):
    config.addinivalue_line("markers", "rtlab_nothing_selected: an empty selection")


def pytest_collection_modifyitems(config, items):
    deselected = [item for item in items if item.get_closest_marker(NOTHING_SELECTED.name)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item not in deselected]


@pytest.fixture
def case_baseline(request, board_name, flavour):
    """``case_baseline(plan, command, cap_s)``: the case's eligible baseline
    (rtlab.verdict.baseline) among the series' newest runs in the results store
    (--rt-baseline, else $RTLAB_RESULTS_DB); without a store, none, and the case runs to
    its cap and says so."""
    from rtlab.verdict.baseline import no_baseline

    option = request.config.option

    def find(plan, command, cap_s: float):
        # the results store only here: a run without one does without its imports
        # (SQLAlchemy, alembic), half a second of every run's start
        from rtlab.store import URL_VARIABLE
        from rtlab.store.query import case_baseline

        if option.rt_replicate:
            return no_baseline("one board's share of a case measured on several boards: "
                               "the pooled case is compared (rtlab.run.pooling)",
                               length_s=cap_s, min_runs=plan.statistics.baseline_runs,
                               min_boots=plan.statistics.baseline_boots)
        # the lab's store from the environment (a CI variable, never on a command line)
        url = option.rt_baseline or os.environ.get(URL_VARIABLE)
        if not url:
            return no_baseline("no results store to take a baseline from (--rt-baseline, "
                               f"${URL_VARIABLE})", length_s=cap_s,
                               min_runs=plan.statistics.baseline_runs,
                               min_boots=plan.statistics.baseline_boots)
        return case_baseline(url, board=board_name, flavour=flavour, scenario=plan.scenario,
                             interval_us=plan.interval_us, command=command, cap_s=cap_s,
                             policy=plan.statistics, ref=option.rt_baseline_ref or None,
                             runs=option.rt_baseline_runs)

    return find


@pytest.fixture(scope="session")
def pipeline_cases(request) -> int:
    """How many gated latency cases share the pipeline's error budget
    (rtlab.verdict.budget): this session's, times the pipeline's jobs that
    judge as many (--rt-pipeline-jobs)."""
    from rtlab.verdict.case import pipeline_case_count

    jobs = request.config.option.rt_pipeline_jobs
    if jobs < 1:
        raise pytest.UsageError(f"--rt-pipeline-jobs must be >= 1, got {jobs}")
    session = sum(1 for item in request.session.items
                  if getattr(item, "originalname", None) == "test_latency")
    return pipeline_case_count(session, jobs)


@pytest.fixture
def trace_choice(request, board_name, flavour, thresholds_flavour, thresholds, image_manifest):
    """``trace_choice(scenario, interval_us)`` → (trace it?, why), as
    rtlab.verdict.trace_choice.choose_trace decides: never for a campaign's case (--rt-trace
    always is refused there: a UsageError); else --rt-trace always or never; else
    thresholds.yaml's ``trace:`` where a level sets it; else on in the gate tier
    (--rt-tier gate), and where the series' last stored run (on this branch,
    $CI_COMMIT_REF_NAME; anywhere outside CI) failed: the re-run of a failing case brings
    its trace back."""
    from rtlab.artifacts.identity import campaign_of
    from rtlab.store.query import last_failed_run
    from rtlab.verdict.trace_choice import TraceChoiceError, choose_trace

    option = request.config.option
    campaign = campaign_of(image_manifest, os.environ)

    def choose(scenario: str, interval_us: int) -> tuple[bool, str]:
        # a campaign's variant is judged by its flavour's limits, so its trace policy too
        policy = thresholds.trace(board_name, thresholds_flavour, scenario, interval_us)
        try:
            return choose_trace(
                option.rt_trace, policy, campaign=campaign, tier=option.rt_tier,
                last_failed=lambda: last_failed_run(
                    option.rt_baseline, board=board_name, flavour=flavour, scenario=scenario,
                    interval_us=interval_us, ref=os.environ.get("CI_COMMIT_REF_NAME") or None))
        except TraceChoiceError as error:
            raise pytest.UsageError(str(error)) from None

    return choose


@pytest.fixture
def begin_case(request, record, record_xml_attribute, board_name, flavour, place,
               image_manifest, thresholds_flavour):
    """``begin_case(name, **facts)`` names the test case board/flavour/name and starts its
    result record. The name and parameters go in before the board is asked anything, so
    that even a board that never boots leaves a record that says what was to run."""

    def begin(name: str, *, skip: str | None = None, **facts) -> str:
        """``skip``: why the case is skipped before the board is asked anything (what the
        place's tags already tell): its record says what was to run, and no board is
        booted or flashed for it."""
        case = f"{board_name}/{flavour}/{name}"
        record_xml_attribute("name", case)
        record.facts.update({
            "name": case, "board": board_name, "flavour": flavour,
            "place": place.name if place is not None else None,
            "duration_s": request.config.option.rt_duration,
            "tier": request.config.option.rt_tier,
            "image": {
                "image_id": image_manifest.get("image_id"),
                "kernel": {k: v for k, v in image_manifest.get("kernel", {}).items()
                           if k != "modules"},
                "sd_image_sha256": image_manifest.get("sd_image", {}).get("sha256"),
            },
            "thresholds_flavour": thresholds_flavour,
            # one board's share of a case every board of the plan measures: the plan's
            # pooled record is the case (rtlab.run.pooling)
            **({"replica_of": {"plan": request.config.option.rt_plan,
                               "share_s": request.config.option.rt_duration}}
               if request.config.option.rt_replicate else {}),
            # a campaign's kernel variant, and which execution of the campaign this is
            **({"variant": image_manifest["variant"],
                "campaign_run": os.environ.get(CAMPAIGN_RUN_VARIABLE) or None}
               if image_manifest.get("variant") else {}),
            **facts,
        })
        if skip is not None:
            pytest.skip(skip)
        # the shell first: it records the boot and flash attempts made for this case
        request.getfixturevalue("shell")
        record.facts["system"] = request.getfixturevalue("system_info").as_dict()
        return case

    return begin


@pytest.fixture(scope="session")
def host_traffic(place_tags) -> HostTraffic | None:
    """Where the network load sends traffic, from the place's tags (set by the virtual
    rack, or by the lab admin with `labgrid-client set-tags` on a physical rack):
    ``net_ping`` is the address the board floods with pings and ``net_stream`` the
    ``host:port`` at which the lab host reaches the board's stream listener."""
    if "net_ping" not in place_tags or "net_stream" not in place_tags:
        return None
    host, _, port = place_tags["net_stream"].rpartition(":")
    if not host or not port.isdigit():
        raise pytest.UsageError(f"place tag net_stream={place_tags['net_stream']!r} "
                                "is not host:port")
    # the board listens on the port its side of the stream is forwarded to
    board_port_text = place_tags.get("net_stream_board_port", port)
    if not board_port_text.isdigit():
        raise pytest.UsageError(f"place tag net_stream_board_port={board_port_text!r} is not "
                                "a port number")
    board_port = int(board_port_text)
    return HostTraffic(ping_address=place_tags["net_ping"], stream_host=host,
                       stream_port=int(port), board_port=board_port)


@pytest.fixture(scope="session")
def progress(request):
    """Progress of long measurements on the host's terminal, never on the board's console."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")

    def say(text: str) -> None:
        if reporter is not None:
            reporter.write_line(f"[rtlab] {text}")
    return say
