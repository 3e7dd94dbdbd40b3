"""Result records as JUnit XML test cases, the way ``rtlab run`` has pytest write them
(xunit1): named board/flavour/scenario/interval or board/flavour/tool with the classname
of the tests/target module that runs that kind of case; ``pass`` bare, ``fail`` a
``<failure>`` with the record's message, ``error`` an ``<error>`` with its one-line cause,
``skipped`` a ``<skipped>`` with the reason; the headline figures and the record's path
(``result_record``) as properties. Used where records come from elsewhere than pytest: a
LAVA job (rtlab.lava.junit), the cases of a shared plan no place measured
(rtlab.run.sharing), a replicated plan's pooled cases (rtlab.run.pooling). The store
takes a test case that names its record as told by that record, so records and JUnit in
one folder add each case once."""

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rtlab.util.atomic import write_atomic

# the classnames of tests/target's test cases (pytest's JUnit names them by module): a
# LAVA job runs the same cases, and GitLab groups a report's cases by classname
LATENCY_CLASSNAME = "tests.target.test_latency"
RT_TOOL_CLASSNAME = "tests.target.test_rttests"
# XML 1.0 has no place for these (a console's escape sequences, a NUL in a garbled log):
# written as #xNN, as pytest's JUnit writes them
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: object) -> str:
    return _NOT_XML.sub(lambda match: f"#x{ord(match.group()):02X}", str(text))


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
    # a case measured on several boards at once (rtlab.run.pooling): the boards judged
    if record.get("replicated"):
        judged = [str(b.get("place")) for b in record.get("boards") or [] if b.get("judged")]
        found.append(("boards", ", ".join(judged)))
    found.append(("result_record", str(path)))
    return found


def records_junit(written: Sequence[tuple[Mapping[str, Any], Path]], *,
                  label: str) -> ET.Element:
    """One test suite of the records written (each with its file) that no pytest session
    reported: the cases of a shared plan no place measured, a replicated plan's pooled
    cases (rtlab.run.sharing, rtlab.run.pooling)."""
    root = ET.Element("testsuites", name="rtlab run")
    count = {v: sum(1 for r, _ in written if r["verdict"] == v)
             for v in ("fail", "error", "skipped")}
    suite = ET.SubElement(root, "testsuite", {
        "name": xml_text(label), "errors": str(count["error"]),
        "failures": str(count["fail"]), "skipped": str(count["skipped"]),
        "tests": str(len(written)), "time": "0.000",
        "timestamp": min((str(r["started"]) for r, _ in written), default="")})
    for record, path in written:
        element = ET.SubElement(suite, "testcase", {
            "classname": RT_TOOL_CLASSNAME if record["kind"] == "rt-test"
            else LATENCY_CLASSNAME,
            "name": xml_text(record["name"]),
            "time": f"{float(record.get('duration_s') or 0):.3f}"})
        figures = ET.SubElement(element, "properties")
        for key, value in case_properties(record, path):
            ET.SubElement(figures, "property", name=xml_text(key), value=xml_text(value))
        add_verdict(element, record["verdict"], record["message"])
    return root


def add_verdict(element: ET.Element, verdict: str, message: str) -> None:
    if verdict == "fail":
        ET.SubElement(element, "failure", message=xml_text(message)).text = xml_text(message)
    elif verdict == "error":
        cause = next((line.strip() for line in message.splitlines() if line.strip()), "")
        ET.SubElement(element, "error", message=xml_text(cause)).text = xml_text(message)
    elif verdict == "skipped":
        ET.SubElement(element, "skipped", message=xml_text(message)).text = xml_text(message)
    elif verdict != "pass":
        raise ValueError(f"verdict {verdict!r} of a result record is none of pass, fail, "
                         "error, skipped")



def write_junit(path: Path, root: ET.Element) -> None:
    """Atomically (rtlab.util.atomic.write_atomic): a runner killed while writing leaves the
    previous file or none, never half a report."""
    ET.indent(root)
    write_atomic(path, ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n")
