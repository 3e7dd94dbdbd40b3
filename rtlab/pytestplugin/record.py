"""The result record of a test case as pytest sees it: the verdict derived from pytest's
reports (a failing setup or teardown is an error, a failing test body a fail) and the
facts the fixtures add, written whatever happens to the case."""

import datetime
from pathlib import Path
from typing import Any

import attr
import pytest

from rtlab.artifacts.record import record_file_name


@attr.define
class CaseRecord:
    """Everything known about one test case, written out whatever happens to it."""

    case: str
    started: str
    kind: str | None = None
    """What the case runs (rtlab.artifacts.record.KINDS), from its marker."""
    finished: str | None = None
    verdict: str = "pass"
    message: str = ""
    facts: dict[str, Any] = attr.Factory(dict)
    attachments: list[Path] = attr.Factory(list)
    """Files kept beside the record (a breach's trace), attached to the JUnit case."""
    judged: str | None = None
    """The judge's reason (rtlab.verdict.case): a failing test body's message is this,
    word for word, rather than pytest's rendering of the assertion."""

    def observe(self, report: pytest.TestReport) -> None:
        """Derive the verdict: a failing setup or teardown (flash, boot, load, parsing)
        is an error; only a failing test body (a threshold assertion) is a fail. A breach
        the judge found survives any later error (the trace not brought back, a teardown
        that lost the console): the record keeps ``fail`` and the error beside it
        (rtlab.verdict.outcome, the board-outcome table)."""
        if report.skipped and self.verdict == "pass":
            self.verdict = "skipped"
            self.message = _first_line(report)
            return
        if not report.failed:
            return
        breached = (self.verdict == "fail"
                    or (self.facts.get("judged") or {}).get("verdict") == "fail")
        if self.verdict == "skipped" and report.when == "teardown":
            # a case nobody should measure stays skipped: the lab's error after it (the
            # session's cleanup) is kept beside it, and the run's exit says it
            self.facts.setdefault("error", _first_line(report))
        elif breached and report.when != "call":
            self.facts.setdefault("error", _first_line(report))
            if self.verdict != "fail":
                self.verdict = "fail"
                self.message = self.facts["judged"]["message"]
        elif self.verdict != "error":
            # the first error wins
            self.verdict = "fail" if report.when == "call" else "error"
            self.message = (self.judged if report.when == "call" and self.judged
                            else _first_line(report))

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "case": self.case,
            "started": self.started,
            "finished": self.finished,
            "verdict": self.verdict,
            "message": self.message,
            **self.facts,
        }


def _first_line(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # skips: (file, line, reason)
        return str(longrepr[2])
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message).splitlines()[0] if crash.message else ""
    return str(longrepr).splitlines()[-1] if longrepr else ""


def artifact_path(record: CaseRecord, folder: Path, suffix: str) -> Path:
    """A file kept beside the case's record: named as the record is (by the case and its
    start), with ``suffix`` for the ``.json``."""
    name = record_file_name(record.as_dict())
    return folder / (name.removesuffix(".json") + suffix)


def job_path(path: Path) -> str:
    """A file of the case as the job names it: relative to the folder the suite runs in
    (a CI job's, where its artifacts are), absolute when it lies elsewhere."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()


def attachment_line(path: Path) -> str:
    """How GitLab's JUnit report finds a file of a case: ``[[ATTACHMENT|path]]`` on its own
    line of system-out, the path within the job's folder."""
    return f"[[ATTACHMENT|{job_path(path)}]]"


def case_record(nodeid: str, *, kind: str | None = None) -> CaseRecord:
    return CaseRecord(case=nodeid, kind=kind,
                      started=datetime.datetime.now(datetime.UTC).isoformat())
