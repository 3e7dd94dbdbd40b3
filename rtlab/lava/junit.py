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
import socket
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rtlab.artifacts.record import ci_context
from rtlab.lava.joblog import JobLog
from rtlab.lava.plan import Plan, PlannedCase
from rtlab.lava.records import LavaJob
from rtlab.verdict.junit import (
    LATENCY_CLASSNAME,
    RT_TOOL_CLASSNAME,
    add_verdict,
    case_properties,
    xml_text,
)

ROOT_NAME = "rtlab lava"
# as many lines of the log as the labgrid path attaches of a console (conftest.py)
TAIL_LINES = 200
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
        "name": xml_text(label or label_of(job)), "errors": str(counts["error"]),
        "failures": str(counts["fail"]), "skipped": str(counts["skipped"]),
        "tests": str(len(records)), "time": f"{(end - begin).total_seconds():.3f}",
        "timestamp": begin.isoformat(), "hostname": xml_text(socket.gethostname())})
    properties = ET.SubElement(suite, "properties")
    for name, value in _suite_properties(log, job):
        ET.SubElement(properties, "property", name=xml_text(name), value=xml_text(value))
    for case, record, path, start, stop in zip(plan.cases, records, paths, started, finished,
                                               strict=True):
        name = f"{plan.board}/{plan.flavour}/{case.name}"
        if record["name"] != name:
            raise ValueError(f"{path}: the record of {record['name']!r} stands where the "
                             f"plan has {name!r}")
        element = ET.SubElement(suite, "testcase", {
            "classname": RT_TOOL_CLASSNAME if case.tool is not None else LATENCY_CLASSNAME,
            "name": xml_text(name), "time": f"{max((stop - start).total_seconds(), 0.0):.3f}"})
        figures = ET.SubElement(element, "properties")
        for key, value in case_properties(record, path):
            ET.SubElement(figures, "property", name=xml_text(key), value=xml_text(value))
        add_verdict(element, record["verdict"], record["message"])
        ET.SubElement(element, "system-out").text = xml_text(log_excerpt(log, spans, case))
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


