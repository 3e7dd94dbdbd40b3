"""The result record: one JSON document per test case, written even when the test fails
or errors, so that no run is ever lost from the history.

Format versions (``schema``), each still read:

- ``rtlab.result/3`` (written): ``kind`` says what the case ran, ``cyclictest`` or
  ``rt-test``; a record without one, or with another, is refused naming the file.
- ``rtlab.result/2``: no ``kind``. Read as /3 with the kind its contents show: an
  rt-test's ``threads`` or ``functional``, cyclictest's ``cpus`` or ``interval_us``, else
  the shape of its name (board/flavour/scenario/interval or board/flavour/tool) or the
  suite file of its pytest node. A /2 record that shows none (a case stopped before it was
  named, outside the suite's files) is kind ``unknown``, as the store filed it before.
- ``rtlab.result/1``: cyclictest cases only, the load under ``load`` (now ``scenario``).
"""

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attr

from rtlab.artifacts.identity import read_variant
from rtlab.util.atomic import write_atomic
from rtlab.util.jsonfile import JsonFileError, json_line_of, load_json, require

SCHEMA = "rtlab.result/3"
SCHEMAS = ("rtlab.result/1", "rtlab.result/2", SCHEMA)
KINDS = ("cyclictest", "rt-test")
# only ever read from a /2 record that does not show what it ran
UNKNOWN_KIND = "unknown"
VERDICTS = ("pass", "fail", "error", "skipped")
WHAT = "result record"
# set by `rtlab run` for its pytest: every record of one run carries the same id, which is
# how the results store groups them into that run
RUN_ID_VARIABLE = "RTLAB_RUN_ID"
CI_VARIABLES = ("CI_PIPELINE_ID", "CI_JOB_ID", "CI_COMMIT_SHA", "CI_COMMIT_REF_NAME",
                "CI_MERGE_REQUEST_IID")
# the on-board suite's files: a /2 record of a case stopped before it was named says
# what it ran only by its pytest node
_SUITE_FILES = {"test_latency.py": "cyclictest", "test_rttests.py": "rt-test"}


# a record's fact that makes it one board's share of a case measured on several boards at
# once (rtlab.run.pooling); the folder of such records holds REPLICAS_FILE, and the results
# store files the pooled record beside it instead
REPLICA_KEY = "replica_of"
REPLICAS_FILE = "replicas.json"


@attr.frozen(kw_only=True)
class ResultRecord:
    """One test case's record as read (migrated to the current format). The typed fields
    are what every record has; ``document`` is the whole record, facts included, as the
    current format writes it."""

    kind: str
    """``cyclictest`` or ``rt-test`` (``unknown`` only from a /2 record, see above)."""
    case: str
    """The pytest node id (or the LAVA job's case)."""
    name: str | None
    """board/flavour/scenario/interval or board/flavour/tool, once the case was named."""
    verdict: str
    message: str
    started: str
    finished: str | None
    variant: dict[str, Any] | None
    """A campaign's kernel variant (rtlab.artifacts.identity), when the image is one."""
    read_as: str
    """The format the file was written in (``schema``), before migration."""
    document: dict[str, Any]

    @property
    def functional(self) -> bool:
        """An rt-test judged by what it proves (priority inheritance), not by latency."""
        return "functional" in self.document

    def get(self, key: str, default: Any = None) -> Any:  # noqa: ANN401 - JSON
        return self.document.get(key, default)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.document)


def ci_context() -> dict[str, str]:
    return {name: os.environ[name] for name in CI_VARIABLES if name in os.environ}


def record_file_name(record: Mapping[str, Any]) -> str:
    """By the case's name (board/flavour/scenario/interval once known, else the pytest
    node) and its start time: several runs share one results folder (a demo, a pipeline's
    artifacts), and a record of one must never replace the record of another."""
    case_id = record.get("name") or record["case"]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in case_id)
    started = "".join(c for c in str(record.get("started", "")) if c.isdigit())[:20]
    return f"{safe}--{started}.json"


def write_record(folder: Path, record: Mapping[str, Any]) -> Path:
    """``record`` (its ``kind``, ``case``, ``started``, ``verdict``, facts) written as a
    new file of the current format; the CI variables and ``rtlab run``'s run id are added."""
    if record.get("verdict") not in VERDICTS:
        raise ValueError(f"result record verdict must be one of {VERDICTS}")
    if record.get("kind") not in KINDS:
        raise ValueError(f"result record of {record.get('name') or record.get('case')!r}: "
                         f"kind {record.get('kind')!r}, expected one of {', '.join(KINDS)}")
    document = {**record, "schema": SCHEMA, "ci": ci_context()}
    if os.environ.get(RUN_ID_VARIABLE) and "run_id" not in document:
        document["run_id"] = os.environ[RUN_ID_VARIABLE]
    path = folder / record_file_name(document)
    if path.exists():
        raise FileExistsError(f"{path}: a result record of this case and start time exists")
    write_atomic(path, json.dumps(document, indent=2, sort_keys=True) + "\n")
    return path


def load_record(path: Path) -> ResultRecord:
    """The record at ``path``, checked for the fields every record has (and the shape of
    its per-CPU figures, if any) and migrated to the current format: a report built on a
    garbled record would misstate a run. Raises :class:`JsonFileError` (a ValueError) with
    ``path:line:`` and what was expected."""
    record = load_json(path, WHAT)
    if not isinstance(record, dict):
        raise JsonFileError(f"{path}:{json_line_of(record)}: not a result record: expected "
                            f"an object with 'schema': {SCHEMA!r}")
    schema = require(path, record, "schema", (str,), WHAT)
    if schema not in SCHEMAS:
        raise JsonFileError(f"{path}:{json_line_of(record, 'schema')}: {WHAT} schema "
                            f"{schema!r}, expected one of {', '.join(SCHEMAS)}")
    _check(path, record)
    if schema == SCHEMA:
        kind = require(path, record, "kind", (str,), WHAT)
        if kind not in KINDS:
            raise JsonFileError(f"{path}:{json_line_of(record, 'kind')}: {WHAT} 'kind' "
                                f"{kind!r}, expected one of: {', '.join(KINDS)}")
        document = dict(record)
    else:
        document = _migrated(record)
    return _typed(document, read_as=schema)


def _typed(document: dict[str, Any], *, read_as: str) -> ResultRecord:
    return ResultRecord(
        kind=document["kind"], case=document["case"], name=document.get("name") or None,
        verdict=document["verdict"], message=document.get("message", ""),
        started=document["started"], finished=document.get("finished"),
        variant=document.get("variant"), read_as=read_as, document=document)


def record_of(document: Mapping[str, Any]) -> ResultRecord:
    """A record made in memory of the current format (a JUnit test case's stand-in, see
    rtlab.store.junit): it must say its kind, as a written one does."""
    if document.get("kind") not in KINDS:
        raise ValueError(f"result record of {document.get('name') or document.get('case')!r}"
                         f": kind {document.get('kind')!r}, expected one of {', '.join(KINDS)}")
    return _typed({**document, "schema": SCHEMA}, read_as=SCHEMA)


def read_record(path: Path) -> dict[str, Any]:
    """The record at ``path`` as a document of the current format (see
    :func:`load_record`)."""
    return load_record(path).as_dict()


def _check(path: Path, record: dict[str, Any]) -> None:
    for key in ("case", "started"):
        if not require(path, record, key, (str,), WHAT):
            raise JsonFileError(f"{path}:{json_line_of(record, key)}: {WHAT} {key!r} must "
                                "be a non-empty string")
    if "finished" in record:
        require(path, record, "finished", (str, type(None)), WHAT)
    verdict = require(path, record, "verdict", (str,), WHAT)
    if verdict not in VERDICTS:
        raise JsonFileError(f"{path}:{json_line_of(record, 'verdict')}: {WHAT} 'verdict' "
                            f"{verdict!r}, expected one of: {', '.join(VERDICTS)}")
    require(path, record, "message", (str,), WHAT)
    if "name" in record:
        require(path, record, "name", (str, type(None)), WHAT)
    # a campaign's kernel variant (its name is the record's flavour) and its execution
    if "variant" in record:
        read_variant(path, record, WHAT)
    for key in ("campaign_run", "thresholds_flavour"):
        if key in record:
            require(path, record, key, (str, type(None)), WHAT)
    if "cpus" in record:
        cpus = require(path, record, "cpus", (list,), WHAT)
        for index, cpu in enumerate(cpus):
            where = f"{WHAT} 'cpus'[{index}]"
            if not isinstance(cpu, dict):
                raise JsonFileError(f"{path}:{json_line_of(cpus, index)}: {where} must be "
                                    "an object")
            require(path, cpu, "cpu", (int, type(None)), where)
            require(path, cpu, "samples", (int,), where)
            for key in ("min_us", "avg_us", "max_us"):
                require(path, cpu, key, (int, float, type(None)), where)


def _migrated(record: dict[str, Any]) -> dict[str, Any]:
    """A /1 or /2 record as /3 says it (see the module's docstring)."""
    document = dict(record)
    if record["schema"] == "rtlab.result/1":
        if "load" in document:
            document.setdefault("scenario", document.pop("load"))
        document["kind"] = "cyclictest"  # /1 measured nothing else
    else:
        document["kind"] = _kind_of_v2(record)
    document["schema"] = SCHEMA
    document["migrated_from"] = record["schema"]
    return document


def _kind_of_v2(record: dict[str, Any]) -> str:
    if "functional" in record or "threads" in record:
        return "rt-test"
    if "cpus" in record or record.get("interval_us") is not None:
        return "cyclictest"
    parts = str(record.get("name") or "").split("/")
    if len(parts) == 4:
        return "cyclictest"
    if len(parts) == 3:
        return "rt-test"
    suite_file = str(record["case"]).split("::")[0].rsplit("/", 1)[-1]
    return _SUITE_FILES.get(suite_file, UNKNOWN_KIND)
