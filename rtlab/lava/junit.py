"""A LAVA job's result records as JUnit XML: the report ``rtlab run`` has pytest write
(xunit1, the suite named by its label, ``junit_logging=all``), so that GitLab's test summary
(``reports: junit``) and ``rtlab results ingest`` take a LAVA lab's runs as they take a
labgrid lab's.

One test case per case of the plan, built from the records just written: named
board/flavour/scenario/interval or board/flavour/tool as tests/target names it, with the
classname of the tests/target module that runs that kind of case on labgrid; ``pass``
bare, ``fail`` a ``<failure>`` with the record's message (figure, limit, thresholds.yaml
line), ``error`` an ``<error>`` with its one-line cause, ``skipped`` a ``<skipped>`` with
the reason; the headline figures and the record's path (``result_record``) as properties,
as tests/target records them; the case's part of the job log in ``system-out`` (the log's
tail where the job ended before the case did). The store takes a test case that names its
record as told by that record, so records and JUnit in one folder add each case once.
"""

import datetime
import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rtlab.lava.joblog import JobLog
from rtlab.lava.plan import Plan, PlannedCase
from rtlab.lava.records import LavaJob
from rtlab.verdict.record import ci_context, write_atomic

# the classnames of tests/target's test cases (pytest's JUnit names them by module): a
# LAVA job runs the same cases, and GitLab groups a report's cases by classname
LATENCY_CLASSNAME = "tests.target.test_latency"
RT_TOOL_CLASSNAME = "tests.target.test_rttests"
ROOT_NAME = "rtlab lava"
# as many lines of the log as the labgrid path attaches of a console (conftest.py)
TAIL_LINES = 200
# XML 1.0 has no place for these (a console's escape sequences, a NUL in a garbled log):
# written as #xNN, as pytest's JUnit writes them
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: object) -> str:
    return _NOT_XML.sub(lambda match: f"#x{ord(match.group()):02X}", str(text))


def label_of(job: LavaJob) -> str:
    """The suite's name and the file's (``junit-<label>.xml``): the job's id, which no
    other job's JUnit in the same folder shares."""
    return "lava-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in job.job_id)


def default_path(out: Path, job: LavaJob) -> Path:
    return out / f"junit-{label_of(job)}.xml"


def _time(text: object, where: str) -> datetime.datetime:
    try:
        when = datetime.datetime.fromisoformat(str(text))
    except ValueError:
        raise ValueError(f"{where}: {text!r} is not an ISO 8601 time") from None
    return when if when.tzinfo else when.replace(tzinfo=datetime.UTC)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def case_properties(record: Mapping[str, Any], path: Path) -> list[tuple[str, str]]:
    """The properties tests/target records for the case, in its order, from the record:
    the CPU utilisation of the window, the CPUs that never woke, each CPU's max, avg,
    p99.9 and tail bound; for an rt-test its gated threads' max and avg, or the
    inversions; last the record's path."""
    found: list[tuple[str, str]] = []
    load_check = record.get("load_check") or {}
    if _number(load_check.get("cpu_utilisation")):
        found.append(("cpu_utilisation", f"{load_check['cpu_utilisation']:.3f}"))
    cpus = record.get("cpus") or []
    for silent in (cpu for cpu in cpus if cpu.get("no_wakeup")):
        where = (f"cpu{silent['cpu']}" if silent.get("cpu") is not None
                 else f"thread{silent.get('thread')}")
        found.append((f"{where}_samples", "0"))
    for cpu in (cpu for cpu in cpus if not cpu.get("no_wakeup")):
        found.append((f"cpu{cpu['cpu']}_max_us", str(cpu.get("max_us"))))
        found.append((f"cpu{cpu['cpu']}_avg_us", str(cpu.get("avg_us"))))
        p99_9 = (cpu.get("percentiles_us") or {}).get("p99_9")
        # beyond the histogram's range the record says ">=N": tests/target writes none then
        if _number(p99_9):
            found.append((f"cpu{cpu['cpu']}_p99_9_us", str(p99_9)))
        bound = (cpu.get("tail") or {}).get("bound_us")
        if bound is not None:
            # an unbounded tail is "inf" in the record (strict JSON), inf to tests/target
            shown = f"{bound:.1f}" if _number(bound) else str(bound)
            found.append((f"cpu{cpu['cpu']}_tail_bound_us", shown))
    functional = record.get("functional")
    if isinstance(functional, Mapping) and functional.get("inversions") is not None:
        found.append(("inversions", str(functional["inversions"])))
    for thread in record.get("threads") or []:
        if thread.get("gated"):
            found.append((f"thread{thread['thread']}_max_us", str(thread.get("max_us"))))
            found.append((f"thread{thread['thread']}_avg_us", str(thread.get("avg_us"))))
    found.append(("result_record", str(path)))
    return found


def log_excerpt(log: JobLog, spans: Mapping[str, tuple[int, int | None]],
                case: PlannedCase) -> str:
    """The case's part of the job log (``spans``: Evidence.spans), or the log's tail where
    the job ended before the case did: the reason is at the end of the log, not in the
    case."""
    span = spans.get(case.lava_name)
    if span is not None and span[1] is not None:
        lines = log.excerpt(*span)
        header = f"{log.source}, lines {span[0]}-{span[1]}: this case"
    elif span is not None:
        lines = log.excerpt(span[0])
        header = (f"{log.source}, from line {span[0]}: this case to the end of the log "
                  "(the case did not finish)")
    else:
        lines = log.excerpt(1)
        header = f"{log.source}: the end of the log (the job ended before this case)"
    if len(lines) > TAIL_LINES:
        header += f", the last {TAIL_LINES} of {len(lines)} lines"
        lines = lines[-TAIL_LINES:]
    return "\n".join([f"--- {header} ---", *lines]) + "\n"


def job_junit(plan: Plan, log: JobLog, job: LavaJob, records: Sequence[Mapping[str, Any]],
              paths: Sequence[Path], *, label: str | None = None) -> ET.Element:
    """The JUnit of one job: ``records`` as job_records made them (one per case of the
    plan, in its order), ``paths`` where write_records wrote them."""
    if len(records) != len(plan.cases) or len(paths) != len(records):
        raise ValueError(f"{len(records)} record(s) and {len(paths)} path(s) for the "
                         f"{len(plan.cases)} case(s) of the plan of LAVA job {job.job_id}")
    started = [_time(r["started"], f"record {r['name']} 'started'") for r in records]
    finished = [_time(r.get("finished") or r["started"], f"record {r['name']} 'finished'")
                for r in records]
    begin = min(started, default=log.first or datetime.datetime.now(datetime.UTC))
    end = max(finished, default=begin)
    counts = {verdict: sum(1 for r in records if r["verdict"] == verdict)
              for verdict in ("error", "fail", "skipped")}
    spans = log.evidence().spans
    root = ET.Element("testsuites", name=ROOT_NAME)
    suite = ET.SubElement(root, "testsuite", {
        "name": _xml(label or label_of(job)), "errors": str(counts["error"]),
        "failures": str(counts["fail"]), "skipped": str(counts["skipped"]),
        "tests": str(len(records)), "time": f"{(end - begin).total_seconds():.3f}",
        "timestamp": begin.isoformat(), "hostname": _xml(socket.gethostname())})
    properties = ET.SubElement(suite, "properties")
    for name, value in _suite_properties(log, job):
        ET.SubElement(properties, "property", name=_xml(name), value=_xml(value))
    for case, record, path, start, stop in zip(plan.cases, records, paths, started, finished,
                                               strict=True):
        name = f"{plan.board}/{plan.flavour}/{case.name}"
        if record["name"] != name:
            raise ValueError(f"{path}: the record of {record['name']!r} stands where the "
                             f"plan has {name!r}")
        element = ET.SubElement(suite, "testcase", {
            "classname": RT_TOOL_CLASSNAME if case.tool is not None else LATENCY_CLASSNAME,
            "name": _xml(name), "time": f"{max((stop - start).total_seconds(), 0.0):.3f}"})
        figures = ET.SubElement(element, "properties")
        for key, value in case_properties(record, path):
            ET.SubElement(figures, "property", name=_xml(key), value=_xml(value))
        _verdict(element, record["verdict"], record["message"])
        ET.SubElement(element, "system-out").text = _xml(log_excerpt(log, spans, case))
    return root


def _suite_properties(log: JobLog, job: LavaJob) -> list[tuple[str, str]]:
    """Which job, where (the device as labgrid's ``TARGET_MAIN_REMOTE``, the name the store
    reads a suite's place from) and the CI variables a record keeps. No ``run_id``: a test
    case stored from JUnit alone must not share the records' run, where it would stand
    on the first record's name and start time and hide that record from the ingest that
    replaces it (rtlab.store.ingest)."""
    found = [("runner", "lava")]
    if job.device:
        found.append(("TARGET_MAIN_REMOTE", job.device))
    found += [(f"lava_{key}", str(value)) for key, value in (
        ("job_id", job.job_id), ("server", job.server), ("url", job.url),
        ("device_type", job.device_type), ("health", job.health)) if value]
    found.append(("lava_status", log.status()))
    found += sorted(ci_context().items())
    return found


def _verdict(element: ET.Element, verdict: str, message: str) -> None:
    if verdict == "fail":
        ET.SubElement(element, "failure", message=_xml(message)).text = _xml(message)
    elif verdict == "error":
        cause = next((line.strip() for line in message.splitlines() if line.strip()), "")
        ET.SubElement(element, "error", message=_xml(cause)).text = _xml(message)
    elif verdict == "skipped":
        ET.SubElement(element, "skipped", message=_xml(message)).text = _xml(message)
    elif verdict != "pass":
        raise ValueError(f"verdict {verdict!r} of a result record is none of pass, fail, "
                         "error, skipped")


def write_junit(path: Path, root: ET.Element) -> None:
    """Atomically (rtlab.verdict.record.write_atomic): a runner killed while writing leaves the
    previous file or none, never half a report."""
    ET.indent(root)
    write_atomic(path, ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n")
