"""JUnit XML for the results store: ``rtlab run``'s (pytest's xunit1, the case named
board/flavour/scenario/interval, figures and the record's path as properties), or another
runner's (LAVA's, say) in the same shape.

A result record says more than its JUnit test case ever can, so the store takes a test case
from JUnit only when it has no record: a run whose records were lost, or a runner that
writes none. :func:`case_record` turns such a test case into a record-shaped dict (marked
``"source": "junit"``) that ingest stores like any other.
"""

import datetime
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any
from xml.parsers import expat

import attr

from rtlab.artifacts.record import CI_VARIABLES, ResultRecord, record_of

SOURCE = "junit"
ROOTS = ("testsuites", "testsuite")
# labgrid's pytest plugin names the place of each target as a suite property
_REMOTE_PROPERTY = re.compile(r"TARGET_(\w+)_REMOTE")
_RUN_ID_PROPERTIES = ("run_id", "RTLAB_RUN_ID")
# the headline figures tests/target writes as properties
_CPU_FIGURE = re.compile(r"(cpu|thread)(\d+)_(max_us|avg_us|p99_9_us|samples)")
_INTERVAL = re.compile(r"(\d+)us")
# pytest's JUnit wraps a setup or teardown error's own message; the record keeps it bare
_PYTEST_ERROR = re.compile(r'failed on (?:setup|call|teardown) with "(.*)"', re.DOTALL)


class JUnitError(ValueError):
    """Bad JUnit XML, or a test case the store cannot place; the message starts with
    ``file:line:``."""


@attr.frozen
class JUnitCase:
    path: Path
    line: int
    classname: str
    name: str
    time_s: float
    # pass | fail | error | skipped
    verdict: str
    message: str
    attributes: Mapping[str, str]
    properties: Mapping[str, str]

    @property
    def record_file(self) -> str | None:
        """The file name of the case's result record, if JUnit names it."""
        return record_file_of(self.properties)


def record_file_of(properties: Mapping[str, str]) -> str | None:
    """The file name in a ``result_record`` property: ``rtlab run`` gives the path on the
    runner, whose folders are not those of an ingest."""
    path = properties.get("result_record")
    return Path(path.replace("\\", "/")).name if path else None


@attr.frozen
class JUnitSuite:
    path: Path
    line: int
    name: str
    timestamp: datetime.datetime | None
    time_s: float
    attributes: Mapping[str, str]
    properties: Mapping[str, str]
    cases: tuple[JUnitCase, ...]

    @property
    def place(self) -> str | None:
        if self.properties.get("TARGET_MAIN_REMOTE"):
            return self.properties["TARGET_MAIN_REMOTE"]
        for name, value in self.properties.items():
            if _REMOTE_PROPERTY.fullmatch(name) and value:
                return value
        return None

    @property
    def end(self) -> datetime.datetime | None:
        if self.timestamp is None:
            return None
        # a suite's time may be missing or 0 (other runners); its cases' times are not
        seconds = max(self.time_s, sum(case.time_s for case in self.cases))
        return self.timestamp + datetime.timedelta(seconds=seconds)

    def started(self, case: JUnitCase) -> datetime.datetime:
        """When a case started, as near as JUnit tells: the suite's start plus the time of
        the cases before it (the same every time the file is read, so a re-ingest finds
        the case it stored)."""
        assert self.timestamp is not None
        before = 0.0
        for other in self.cases:
            if other is case:
                break
            before += other.time_s
        return self.timestamp + datetime.timedelta(seconds=round(before, 6))


@attr.define
class _Element:
    tag: str
    attrib: dict[str, str]
    line: int
    children: list["_Element"] = attr.Factory(list)

    def all(self, tag: str) -> Iterator["_Element"]:
        return (child for child in self.children if child.tag == tag)


def _parse(path: Path, stream: IO[bytes]) -> _Element:
    # expat directly: ElementTree keeps no line numbers, and every complaint names one
    parser = expat.ParserCreate()
    stack: list[_Element] = []
    root: list[_Element] = []

    def start(tag: str, attrib: dict[str, str]) -> None:
        element = _Element(tag, attrib, parser.CurrentLineNumber)
        (stack[-1].children if stack else root).append(element)
        stack.append(element)

    def end(_tag: str) -> None:
        stack.pop()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.ParseFile(stream)
    except expat.ExpatError as error:
        raise JUnitError(f"{path}:{error.lineno}: not well-formed XML: "
                         f"{expat.ErrorString(error.code)} (truncated or garbled JUnit "
                         "file?)") from error
    return root[0]


def is_junit(path: Path) -> bool:
    """Whether an XML file's root element is JUnit's (a folder may hold other XML)."""
    parser = expat.ParserCreate()
    found: list[str] = []

    def start(tag: str, _attrib: dict[str, str]) -> None:
        found.append(tag)
        raise StopIteration

    parser.StartElementHandler = start
    try:
        with path.open("rb") as stream:
            parser.ParseFile(stream)
    except StopIteration:
        pass
    except expat.ExpatError:
        # garbled: let read_junit say where, rather than pass over a broken JUnit file
        return True
    return bool(found) and found[0] in ROOTS


def read_junit(path: Path) -> list[JUnitSuite]:
    """Every test suite of a JUnit file (a ``<testsuites>`` of them, or one
    ``<testsuite>``), with its cases. Raises :class:`JUnitError` with ``file:line:``."""
    try:
        with path.open("rb") as stream:
            root = _parse(path, stream)
    except OSError as error:
        raise JUnitError(f"{path}: cannot read JUnit file: {error.strerror}") from error
    if root.tag not in ROOTS:
        raise JUnitError(f"{path}:{root.line}: not a JUnit file: root element <{root.tag}>,"
                         " expected <testsuites> or <testsuite>")
    return [_suite(path, element) for element in _suites(root)]


def _suites(element: _Element) -> Iterator[_Element]:
    # JUnit lets suites nest; every one that holds test cases counts
    if element.tag == "testsuite":
        yield element
    for child in element.children:
        if child.tag in ROOTS:
            yield from _suites(child)


def _properties(element: _Element) -> dict[str, str]:
    found: dict[str, str] = {}
    for group in element.all("properties"):
        for prop in group.all("property"):
            if "name" in prop.attrib:
                found[prop.attrib["name"]] = prop.attrib.get("value", "")
    return found


def _seconds(path: Path, element: _Element) -> float:
    text = element.attrib.get("time", "0") or "0"
    try:
        # JUnit writers differ on thousands separators ("1,234.5")
        return float(text.replace(",", ""))
    except ValueError:
        raise JUnitError(f"{path}:{element.line}: <{element.tag}> time={text!r} is not a "
                         "number of seconds") from None


def _suite(path: Path, element: _Element) -> JUnitSuite:
    stamp = element.attrib.get("timestamp")
    timestamp = None
    if stamp:
        try:
            timestamp = datetime.datetime.fromisoformat(stamp)
        except ValueError:
            raise JUnitError(f"{path}:{element.line}: <testsuite> timestamp={stamp!r} is "
                             "not an ISO 8601 time") from None
        # pytest before 7.? wrote local time without an offset; CI runners keep UTC
        timestamp = (timestamp.replace(tzinfo=datetime.UTC) if timestamp.tzinfo is None
                     else timestamp.astimezone(datetime.UTC))
    return JUnitSuite(
        path=path, line=element.line, name=element.attrib.get("name", ""),
        timestamp=timestamp, time_s=_seconds(path, element),
        attributes=dict(element.attrib), properties=_properties(element),
        cases=tuple(_case(path, case) for case in element.all("testcase")))


def _case(path: Path, element: _Element) -> JUnitCase:
    outcome = {child.tag: child for child in element.children
               if child.tag in ("error", "failure", "skipped")}
    verdict, message = "pass", ""
    # an error is never a pass or a fail, whatever else the case reports
    for tag, name in (("error", "error"), ("failure", "fail"), ("skipped", "skipped")):
        if tag in outcome:
            verdict, message = name, outcome[tag].attrib.get("message", "")
            break
    wrapped = _PYTEST_ERROR.fullmatch(message)
    if wrapped:
        message = wrapped.group(1)
    return JUnitCase(
        path=path, line=element.line, classname=element.attrib.get("classname", ""),
        name=element.attrib.get("name", ""), time_s=_seconds(path, element),
        verdict=verdict, message=message.strip().splitlines()[0] if message.strip() else "",
        attributes=dict(element.attrib), properties=_properties(element))


def node_address(node_id: str) -> tuple[str, str]:
    """The (classname, name) pytest's JUnit gives a node id (``_pytest.junitxml``'s
    ``mangle_test_address``), for a case JUnit names by its node."""
    path, bracket, params = node_id.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def ci_variables(suite: JUnitSuite, case: JUnitCase) -> dict[str, str]:
    """The GitLab CI variables a JUnit file recorded, as properties or attributes of the
    suite or the case (the case's own win)."""
    found: dict[str, str] = {}
    for source in (suite.attributes, suite.properties, case.attributes, case.properties):
        found.update({name: source[name] for name in CI_VARIABLES if source.get(name)})
    return found


def run_key(suite: JUnitSuite, case: JUnitCase) -> str:
    """The run a JUnit-only case belongs to, in the form ``rtlab run`` gives its records'
    run id (``rtlab.run.runner.run_id``) where JUnit says enough: a run id recorded as a
    property; the CI job (and place); else the file's name and the suite's start, which
    no other run shares (its name rather than its whole path: a pulled artifact is the
    same run wherever it is unpacked)."""
    for source in (case.properties, suite.properties):
        for name in _RUN_ID_PROPERTIES:
            if source.get(name):
                return source[name]
    ci = ci_variables(suite, case)
    if ci.get("CI_JOB_ID"):
        key = f"gitlab:{ci.get('CI_PIPELINE_ID', '')}:{ci['CI_JOB_ID']}"
        return f"{key}:{suite.place}" if suite.place else key
    stamp = suite.timestamp.isoformat() if suite.timestamp else ""
    return f"junit:{suite.path.name}:{suite.name}:{stamp}"


def case_record(suite: JUnitSuite, case: JUnitCase) -> ResultRecord:
    """A test case that has no result record, as a record-shaped dict: verdict, message,
    the figures its properties carry, board and flavour from its name. Raises
    :class:`JUnitError` for a case the store could not file (no board and flavour in its
    name, no start time)."""
    where = f"{case.path}:{case.line}"
    parts = case.name.split("/")
    if len(parts) not in (3, 4) or not all(parts):
        raise JUnitError(f"{where}: testcase {case.name!r} has no result record and its "
                         "name does not say board and flavour: expected "
                         "board/flavour/scenario/interval or board/flavour/tool")
    if suite.timestamp is None:
        raise JUnitError(f"{suite.path}:{suite.line}: testsuite {suite.name!r} has no "
                         "timestamp: its cases without a result record cannot be placed in "
                         "time")
    started = suite.started(case)
    interval = _INTERVAL.fullmatch(parts[3]) if len(parts) == 4 else None
    record: dict[str, Any] = {
        "source": SOURCE, "run_id": run_key(suite, case),
        "case": f"{case.classname}::{case.name}" if case.classname else case.name,
        # the name's shape is how JUnit says what a case ran (rtlab.pytestplugin.junit)
        "kind": "cyclictest" if len(parts) == 4 else "rt-test",
        "name": case.name, "board": parts[0], "flavour": parts[1], "scenario": parts[2],
        "interval_us": int(interval.group(1)) if interval else None,
        "place": suite.place, "verdict": case.verdict, "message": case.message,
        "started": started.isoformat(),
        "finished": (started + datetime.timedelta(seconds=case.time_s)).isoformat(),
        "ci": ci_variables(suite, case),
        "junit": {"file": str(case.path), "line": case.line, "testsuite": suite.name,
                  "suite_started": suite.timestamp.isoformat(),
                  "suite_finished": suite.end.isoformat() if suite.end else None,
                  "classname": case.classname, "time_s": case.time_s,
                  "properties": dict(case.properties)},
    }
    cpus, threads = _figures(case.properties)
    if cpus:
        record["cpus"] = cpus
    if threads:
        record["threads"] = threads
    inversions = _number(case.properties.get("inversions"))
    if inversions is not None:
        record["functional"] = {"inversions": int(inversions)}
    return record_of(record)


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        # a figure JUnit could only state as text (">=400"): not a number the store keeps
        return None


def _figures(properties: Mapping[str, str]) -> tuple[list[dict[str, Any]],
                                                     list[dict[str, Any]]]:
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for name, value in properties.items():
        match = _CPU_FIGURE.fullmatch(name)
        if match is None:
            continue
        kind, number, figure = match.group(1), int(match.group(2)), match.group(3)
        entry = found.setdefault((kind, number), {"cpu": number if kind == "cpu" else None,
                                                  "thread": number if kind == "thread"
                                                  else None})
        value_number = _number(value)
        if figure == "samples":
            if value_number is not None:
                entry["samples"] = int(value_number)
                # tests/target writes samples only for a thread that never woke
                entry["no_wakeup"] = value_number == 0
        elif figure == "p99_9_us":
            entry["percentiles_us"] = {"p99_9": value_number}
        else:
            entry[figure] = value_number
    cpus = [entry for (kind, _), entry in sorted(found.items()) if kind == "cpu"]
    threads = [{**entry, "gated": True} for (kind, _), entry in sorted(found.items())
               if kind == "thread"]
    return cpus, threads
