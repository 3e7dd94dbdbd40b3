"""Result records (and JUnit files) into the store: idempotent (a case already stored is
recognised by its run, name and start time and left alone) and transactional (an ingest
goes in whole or not at all, so a bad record never leaves half a run behind).

A JUnit test case adds a case only when no record tells of it (see
:mod:`rtlab.store.junit`): its record, named by the case's ``result_record`` property or
found by name within the suite's time, in the same ingest or stored before."""

import datetime
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attr
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from rtlab.artifacts.record import (
    REPLICA_KEY,
    REPLICAS_FILE,
    SCHEMA,
    ResultRecord,
    load_record,
    record_file_name,
)
from rtlab.store.junit import SOURCE as JUNIT_SOURCE
from rtlab.store.junit import (
    JUnitCase,
    JUnitSuite,
    case_record,
    is_junit,
    node_address,
    read_junit,
    record_file_of,
)
from rtlab.store.models import Case, CaseThreshold, CpuResult, Run, pack_counts
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.tailsummary import TailSummary

UNKNOWN = "unknown"
PERCENTILE_COLUMNS = {"p50": "p50_us", "p99": "p99_us", "p99_9": "p99_9_us",
                      "p99_99": "p99_99_us"}


@attr.frozen
class IngestReport:
    added: int
    already_stored: int
    runs: tuple[str, ...]
    # of ``added``: cases taken from JUnit alone (no record told of them)
    from_junit: int = 0
    # JUnit test cases whose record is in the store (this ingest's or an earlier one)
    junit_with_record: int = 0
    # cases stored from JUnit alone before, replaced now that their record came
    replaced: int = 0

    def __str__(self) -> str:
        junit = f" ({self.from_junit} from JUnit alone)" if self.from_junit else ""
        records = (f", {self.junit_with_record} JUnit case(s) told by their record"
                   if self.junit_with_record else "")
        replaced = (f", {self.replaced} case(s) from JUnit replaced by their record"
                    if self.replaced else "")
        return (f"{self.added} case(s) added{junit}, {self.already_stored} already stored"
                f"{records}{replaced}, {len(self.runs)} run(s)")


@attr.frozen
class Inputs:
    """What one ingest reads: result records and JUnit suites, each checked."""

    records: list[ResultRecord]
    junit: list[JUnitSuite]
    replica_folders: tuple[Path, ...] = ()
    """Folders of one board's shares of cases measured on several (rtlab.run.pooling),
    left out: their cases are filed as the pooled records beside them."""


def run_key(record: Mapping[str, Any]) -> str:
    """Which run a record belongs to. ``rtlab run`` stamps every record with its run id;
    older records fall back to their CI job, and failing that to one run per place,
    image and day (the closest a record without either can be placed)."""
    if record.get("run_id"):
        return str(record["run_id"])
    ci = record.get("ci") or {}
    if ci.get("CI_JOB_ID"):
        return f"gitlab:{ci.get('CI_PIPELINE_ID', '')}:{ci['CI_JOB_ID']}"
    image = (record.get("image") or {}).get("image_id") or UNKNOWN
    return (f"local:{record.get('place') or UNKNOWN}:{image}:"
            f"{str(record['started'])[:10]}")


def _visible(path: Path, folder: Path) -> bool:
    # dot files and folders are writers' temporary ones (rtlab.util.atomic.write_atomic, a
    # pull's download in progress)
    return not any(part.startswith(".") for part in path.relative_to(folder).parts)


def _other_document(path: Path) -> bool:
    """A JSON file that says it is something else (``rtlab run``'s reservation.json lies
    beside the results in a job's output)."""
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError):
        # read_record says what is wrong, and where
        return False
    schema = document.get("schema") if isinstance(document, dict) else None
    return isinstance(schema, str) and schema.split("/")[0] != SCHEMA.split("/")[0]


def replica_folders(folder: Path) -> tuple[Path, ...]:
    """The folders under ``folder`` that hold one board's shares of pooled cases (marked
    by rtlab.artifacts.record.REPLICAS_FILE)."""
    return tuple(sorted(marker.parent for marker in folder.rglob(REPLICAS_FILE)
                        if _visible(marker, folder)))


def _in_any(path: Path, folders: Sequence[Path]) -> bool:
    return any(path.is_relative_to(folder) for folder in folders)


def read_folder(folder: Path) -> list[ResultRecord]:
    """Every record under ``folder`` (recursively: pipeline artifacts nest them), each
    checked; a garbled one refuses the whole folder with its file:line. JSON files of
    another schema are passed over, and so are the replica folders of pooled cases
    (:func:`replica_folders`): their cases are the pooled records."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder of result records")
    skipped = replica_folders(folder)
    if folder in skipped:
        raise ValueError(f"{folder}: one board's shares of cases measured on several boards "
                         f"({REPLICAS_FILE}); ingest the folder above it, whose pooled "
                         "records are the cases")
    return [load_record(path) for path in sorted(folder.rglob("*.json"))
            if _visible(path, folder) and not _in_any(path, skipped)
            and not _other_document(path)]


def read_inputs(paths: Sequence[Path]) -> Inputs:
    """Records (``*.json``) and JUnit files (``*.xml``) from folders (recursively; XML
    files that are not JUnit are passed over) and files given by name. Anything garbled
    refuses the whole ingest, with its file:line."""
    records: list[ResultRecord] = []
    junit: list[JUnitSuite] = []
    replicas: list[Path] = []
    for path in paths:
        if path.is_dir():
            records += read_folder(path)
            skipped = replica_folders(path)
            replicas += skipped
            junit += [suite for xml in sorted(path.rglob("*.xml"))
                      if _visible(xml, path) and not _in_any(xml, skipped) and is_junit(xml)
                      for suite in read_junit(xml)]
        elif not path.exists():
            raise FileNotFoundError(f"{path}: no such file or folder of results")
        elif path.suffix == ".json":
            records.append(load_record(path))
        elif path.suffix == ".xml":
            junit += read_junit(path)
        else:
            raise ValueError(f"{path}: neither a result record (.json) nor a JUnit file "
                             "(.xml)")
    for record in records:
        if record.get(REPLICA_KEY):
            raise ValueError(f"{record.name or record.case}: one board's share of a case "
                             f"measured on several boards ({REPLICA_KEY} "
                             f"{record.get(REPLICA_KEY)}); ingest the pooled record of its "
                             "case instead")
    return Inputs(records, junit, tuple(replicas))


def ingest(session: Session, records: Iterable[ResultRecord],
           junit: Iterable[JUnitSuite] = ()) -> IngestReport:
    """Add the records' cases that the store does not hold yet, then the JUnit test cases
    that no record (of this ingest or stored) tells of. The caller commits (or rolls
    back): :func:`rtlab.store.ingest_paths` does both."""
    now = datetime.datetime.now(datetime.UTC)
    records = list(records)
    added, already, swapped, runs = _add(session, records, now)
    from_junit: list[ResultRecord] = []
    told = 0
    for suite in junit:
        claimed: set[int] = set()
        for case in suite.cases:
            found = _stored_case(session, suite, case, claimed)
            if found is None:
                from_junit.append(case_record(suite, case))
            elif found.record.get("source") == JUNIT_SOURCE:
                # stored from JUnit before
                already += 1
            else:
                told += 1
    junit_added, junit_already, _, junit_runs = _add(session, from_junit, now)
    # last: SQLite gives a new row the id of a row deleted before it in the transaction,
    # which the session still holds as deleted
    replaced = swapped + _drop_stand_ins(session, records)
    return IngestReport(added + junit_added, already + junit_already,
                        tuple(dict.fromkeys(runs + junit_runs)), junit_added, told, replaced)


def _add(session: Session, records: Iterable[ResultRecord],
         now: datetime.datetime) -> tuple[int, int, int, tuple[str, ...]]:
    """Add the records' cases the store does not hold: (added, already stored, stand-ins
    replaced, run keys)."""
    by_run: dict[str, list[ResultRecord]] = {}
    for record in records:
        by_run.setdefault(run_key(record.document), []).append(record)
    added = already = replaced = 0
    for key, run_records in by_run.items():
        run = session.scalars(select(Run).where(Run.run_key == key)).one_or_none()
        if run is None:
            run = _new_run(key, [r.document for r in run_records], now)
            session.add(run)
            stored: dict[tuple[str, datetime.datetime], Case | None] = {}
        else:
            stored = {(case.name, _utc(case.started)): case for case in run.cases}
        for record in run_records:
            started = _time(record.started)
            identity = (_name(record.document), started)
            if identity in stored:
                held = stored[identity]
                # the stand-in JUnit gave this very case (same run, name and start: a
                # runner that builds its JUnit from its records) goes, and the record
                # comes in; anything else with that identity is this record, stored before
                if (held is None or record.get("source") == JUNIT_SOURCE
                        or not _stands_in_for(held.record, record.document, started)):
                    already += 1
                    continue
                run.cases.remove(held)
                # the delete first: the new case has the identity the table keeps unique
                session.flush()
                replaced += 1
            stored[identity] = None
            run.cases.append(_case(record, run))
            added += 1
        starts = [_time(r.started) for r in run_records]
        ends = [_time(r.finished) for r in run_records if r.finished]
        run.started = min([_utc(run.started), *starts]) if run.started else min(starts)
        if ends:
            run.finished = max([_utc(run.finished), *ends]) if run.finished else max(ends)
    session.flush()
    return added, already, replaced, tuple(by_run)


_SECOND = datetime.timedelta(seconds=1)


def _stored_case(session: Session, suite: JUnitSuite, case: JUnitCase, claimed: set[int]
                 ) -> Case | None:
    """The stored case (this ingest's records are flushed) that a JUnit test case tells
    of: its record's, or one stored from JUnit before. ``claimed``: the cases found for
    the suite's earlier test cases."""
    if case.record_file is not None:
        # the record's file name is its case's name and start time, to the microsecond
        stamp = "".join(c for c in case.record_file.rpartition("--")[2] if c.isdigit())
        try:
            second = datetime.datetime.strptime(stamp[:14], "%Y%m%d%H%M%S").replace(
                tzinfo=datetime.UTC)
        except ValueError:
            return None
        candidates = session.scalars(select(Case).where(Case.started >= second,
                                                        Case.started < second + _SECOND))
        # a record file's name leaves out nothing that is in the stored record
        return next((c for c in candidates
                     if record_file_name(dict(c.record)) == case.record_file), None)
    if suite.timestamp is None or suite.end is None:
        return None
    # no path to the record (JUnit of a runner that writes none, or an rtlab run before
    # the property): the case of the same name that started while the suite ran, on the
    # same place when both say which
    candidates = session.scalars(
        select(Case).options(selectinload(Case.run))
        .where(Case.started >= suite.timestamp - _SECOND,
               Case.started <= suite.end + _SECOND,
               # a case stopped before it was named is stored under its node id
               (Case.name == case.name) | Case.node_id.endswith(case.name, autoescape=True))
        .order_by(Case.id))
    # a record before a case stored from JUnit alone, which the record replaces
    for candidate in sorted(candidates,
                            key=lambda c: (c.record.get("source") == JUNIT_SOURCE,
                                           _utc(c.started))):
        if candidate.id in claimed:
            continue
        if candidate.name != case.name and node_address(candidate.node_id) != (
                case.classname, case.name):
            continue
        if suite.place and candidate.run.place and suite.place != candidate.run.place:
            continue
        claimed.add(candidate.id)
        return candidate
    return None


# how far a JUnit case's start (its suite's start plus the cases before it) may lie from
# its record's: the cases' times include their set-up, so the two stay close
_STAND_IN_WINDOW = datetime.timedelta(hours=1)


def _drop_stand_ins(session: Session, records: Sequence[ResultRecord]) -> int:
    """Delete the cases stored from JUnit alone whose records have come after all (the
    JUnit file was ingested first): the record replaces its stand-in, so that the order
    of ingests does not matter."""
    dropped = 0
    for record in (r.document for r in records):
        # JUnit names every case it stands in for by board and flavour
        if (record.get("source") == JUNIT_SOURCE or not record.get("board")
                or not record.get("flavour")):
            continue
        started = _time(record["started"])
        candidates = session.scalars(
            select(Case).options(selectinload(Case.run))
            # board and flavour first: the columns ix_cases_series starts with
            .where(Case.board == record["board"], Case.flavour == record["flavour"],
                   Case.name == _name(record),
                   Case.started.between(started - _STAND_IN_WINDOW,
                                        started + _STAND_IN_WINDOW)))
        for case in candidates:
            if not _stands_in_for(case.record, record, started):
                continue
            run = case.run
            run.cases.remove(case)
            dropped += 1
            if not run.cases:
                session.delete(run)
            session.flush()
    return dropped


def _stands_in_for(stand_in: Mapping[str, Any], record: Mapping[str, Any],
                   started: datetime.datetime) -> bool:
    # the rules of _stored_case, from the stored side
    junit = stand_in.get("junit")
    if stand_in.get("source") != JUNIT_SOURCE or not isinstance(junit, Mapping):
        return False
    named = record_file_of(junit.get("properties") or {})
    if named is not None:
        return named == record_file_name(dict(record))
    if not junit.get("suite_started") or not junit.get("suite_finished"):
        return False
    if not (_time(junit["suite_started"]) - _SECOND <= started
            <= _time(junit["suite_finished"]) + _SECOND):
        return False
    place, record_place = stand_in.get("place"), record.get("place")
    return not (place and record_place and place != record_place)


def _new_run(key: str, records: list[Mapping[str, Any]], now: datetime.datetime) -> Run:
    # the facts of the run from whichever record got far enough to know them
    def first(*path: str) -> Any:  # noqa: ANN401 - JSON
        for record in records:
            value: Any = record
            for step in path:
                value = value.get(step) if isinstance(value, Mapping) else None
            if value not in (None, ""):
                return value
        return None

    realtime = first("system", "realtime")
    return Run(
        run_key=key, place=first("place"), board=first("board") or UNKNOWN,
        flavour=first("flavour") or UNKNOWN,
        kernel_release=first("system", "kernel_release") or first("image", "kernel",
                                                                   "release"),
        kernel_version=first("system", "kernel_version"),
        preemption=first("system", "preemption") or first("image", "kernel", "preemption"),
        realtime=bool(realtime) if realtime is not None else None,
        image_id=first("image", "image_id"), sd_image_sha256=first("image", "sd_image_sha256"),
        pipeline_id=first("ci", "CI_PIPELINE_ID"), job_id=first("ci", "CI_JOB_ID"),
        commit_sha=first("ci", "CI_COMMIT_SHA"), ref_name=first("ci", "CI_COMMIT_REF_NAME"),
        merge_request_iid=first("ci", "CI_MERGE_REQUEST_IID"),
        campaign=first("variant", "campaign"), campaign_run=first("campaign_run"),
        variant=first("variant", "name"), kernel_flavour=first("variant", "kernel_flavour"),
        fragments=first("variant", "fragments"),
        thresholds_flavour=first("thresholds_flavour"),
        started=None, finished=None, ingested_at=now,
    )


def _name(record: Mapping[str, Any]) -> str:
    # a case stopped before it was named keeps its pytest node id as its name
    return str(record.get("name") or record["case"])


def _kind(record: ResultRecord) -> str:
    # the store files an rt-test judged by what it proves apart from those judged by
    # latency (tuning and trends leave them out)
    return "functional" if record.kind == "rt-test" and record.functional else record.kind


def _case(typed: ResultRecord, run: Run) -> Case:
    record = typed.document
    name = _name(record)
    parts = name.split("/")
    case = Case(
        name=name, node_id=str(record["case"]),
        board=record.get("board") or run.board, flavour=record.get("flavour") or run.flavour,
        scenario=record.get("scenario") or (parts[2] if len(parts) >= 3 else None),
        interval_us=record.get("interval_us"), kind=_kind(typed),
        verdict=record["verdict"], message=record.get("message", ""),
        started=_time(record["started"]),
        finished=_time(record["finished"]) if record.get("finished") else None,
        duration_s=record.get("duration_s"), tier=record.get("tier"), record=dict(record),
    )
    for position, cpu in enumerate(record.get("cpus") or record.get("threads") or []):
        case.cpus.append(_cpu(position, cpu))
    for metric, limit in (record.get("thresholds") or {}).items():
        case.limits.append(CaseThreshold(metric=metric, value=float(limit["value"]),
                                         source=limit.get("source")))
    summary = tail_summary(case.cpus)
    if summary is not None:
        case.tail_samples, case.tail_first, case.tail_counts = (
            summary.samples, summary.first, summary.to_bytes())
    for column, value in worst_figures(case.cpus).items():
        setattr(case, column, value)
    for column, value in kernel_fields(record).items():
        setattr(case, column, value)
    limits = [limit.value for limit in case.limits if limit.metric == "max_us"]
    case.limit_max_us = max(limits) if limits else None
    case.cpus_over_limit = over_limit(case.cpus, case.limit_max_us)
    case.pipeline_id, case.judged_as = run.pipeline_id, run.thresholds_flavour
    return case


def over_limit(cpus: Sequence[CpuResult], limit_us: float | None) -> int | None:
    """How many judged CPUs with wake-ups may have exceeded ``limit_us``: their maximum is
    above it or unknown (None without a limit)."""
    if limit_us is None:
        return None
    return sum(1 for cpu in cpus if not cpu.no_wakeup and cpu.gated is not False
               and (cpu.samples or 0) > 0 and (cpu.max_us is None or cpu.max_us > limit_us))


def worst_figures(cpus: Sequence[CpuResult]) -> dict[str, Any]:
    """The case's figures as trends and tables read them, from its judged CPUs (not a CPU
    that never woke up, nor a thread thresholds do not judge): the worst max, avg and
    p99.9 (unknown on one CPU: unknown), how many CPUs' p99.9 lay among the overflows,
    the histograms' range, the overflows and the wake-ups."""
    judged = [cpu for cpu in cpus if not cpu.no_wakeup and cpu.gated is not False]
    known = [cpu.p99_9_us for cpu in judged]

    def worst(values: Iterable[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return max(present) if present else None

    return {
        "worst_max_us": worst(cpu.max_us for cpu in judged),
        "worst_avg_us": worst(cpu.avg_us for cpu in judged),
        "worst_p99_9_us": None if any(v is None for v in known) else worst(known),
        "p99_9_past_range": sum(1 for cpu in judged if cpu.p99_9_us is None
                                and cpu.histogram_range_us is not None
                                and (cpu.overflows or 0) > 0),
        "range_us": max((cpu.histogram_range_us for cpu in judged
                         if cpu.histogram_range_us is not None), default=None),
        "overflows": sum(cpu.overflows or 0 for cpu in judged),
        "wakeups": sum(cpu.samples or 0 for cpu in judged),
    }


KERNEL_COLUMNS = {"source": "kernel_source", "kernel_sha256": "kernel_sha256",
                  "package": "kernel_package", "version": "kernel_version"}
"""The record's ``image.kernel`` fields that identify a kernel (rtlab.store.exposure),
and the case's columns that keep them."""


def kernel_fields(record: Mapping[str, Any]) -> dict[str, str | None]:
    """The record's kernel fields as text (a number as its digits), None where absent."""
    image = record.get("image")
    kernel = image.get("kernel") if isinstance(image, Mapping) else None
    out: dict[str, str | None] = {}
    for field, column in KERNEL_COLUMNS.items():
        value = kernel.get(field) if isinstance(kernel, Mapping) else None
        out[column] = (value if isinstance(value, str) else
                       str(value) if isinstance(value, int | float)
                       and not isinstance(value, bool) else None)
    return out


def tail_summary(cpus: Sequence[CpuResult]) -> TailSummary | None:
    """The judged CPUs' tail together (rtlab.verdict.tailsummary), as a comparison merges
    them; None where one of them kept no histogram or none woke up."""
    judged = [cpu for cpu in cpus if not cpu.no_wakeup and cpu.gated is not False
              and cpu.samples]
    histograms = []
    for cpu in judged:
        counts = cpu.counts()
        if counts is None:
            return None
        histograms.append(Histogram(counts, cpu.overflows or 0, cpu.max_us))
    try:
        return TailSummary.of(histograms) if histograms else None
    except ValueError:
        # histograms that hold no wake-up: nothing to summarise (the change points
        # count the case among the runs without one)
        return None


def _cpu(position: int, cpu: Mapping[str, Any]) -> CpuResult:
    percentiles = cpu.get("percentiles_us") or {}
    range_us = cpu.get("histogram_range_us")
    histogram = cpu.get("histogram")
    row = CpuResult(
        position=position, cpu=cpu.get("cpu"), thread=cpu.get("thread"),
        samples=cpu.get("samples") or 0, min_us=cpu.get("min_us"), avg_us=cpu.get("avg_us"),
        max_us=cpu.get("max_us"), overflows=cpu.get("overflows"),
        no_wakeup=bool(cpu.get("no_wakeup", False)), gated=cpu.get("gated"),
        histogram_range_us=range_us,
        histogram=pack_counts(histogram, range_us) if histogram is not None and range_us
        else None,
    )
    for name, column in PERCENTILE_COLUMNS.items():
        value = percentiles.get(name)
        # ">=400": among the overflows, so unknown
        setattr(row, column, float(value) if isinstance(value, int | float) else None)
    return row


def _time(text: str) -> datetime.datetime:
    return _utc(datetime.datetime.fromisoformat(text))


def _utc(when: datetime.datetime) -> datetime.datetime:
    # SQLite hands back naive datetimes; everything in the store is UTC
    return when.replace(tzinfo=datetime.UTC) if when.tzinfo is None else when.astimezone(
        datetime.UTC)
