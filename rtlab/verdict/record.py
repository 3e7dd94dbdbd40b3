"""The result record: one JSON document per test case, written even when the test fails
or errors, so that no run is ever lost from the history."""

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from rtlab.campaign.identity import read_variant
from rtlab.util.jsonfile import JsonFileError, json_line_of, load_json, require

SCHEMA = "rtlab.result/2"
VERDICTS = ("pass", "fail", "error", "skipped")
WHAT = "result record"
# set by `rtlab run` for its pytest: every record of one run carries the same id, which is
# how the results store groups them into that run
RUN_ID_VARIABLE = "RTLAB_RUN_ID"
CI_VARIABLES = ("CI_PIPELINE_ID", "CI_JOB_ID", "CI_COMMIT_SHA", "CI_COMMIT_REF_NAME",
                "CI_MERGE_REQUEST_IID")


def ci_context() -> dict[str, str]:
    return {name: os.environ[name] for name in CI_VARIABLES if name in os.environ}


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a killed run leaves either the old file
    or the complete new one, never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def record_file_name(record: dict[str, Any]) -> str:
    """By the case's name (board/flavour/scenario/interval once known, else the pytest
    node) and its start time: several runs share one results folder (a demo, a pipeline's
    artifacts), and a record of one must never replace the record of another."""
    case_id = record.get("name") or record["case"]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in case_id)
    started = "".join(c for c in str(record.get("started", "")) if c.isdigit())[:20]
    return f"{safe}--{started}.json"


def write_record(folder: Path, record: dict[str, Any]) -> Path:
    if record.get("verdict") not in VERDICTS:
        raise ValueError(f"result record verdict must be one of {VERDICTS}")
    record = {"schema": SCHEMA, **record, "ci": ci_context()}
    if os.environ.get(RUN_ID_VARIABLE) and "run_id" not in record:
        record["run_id"] = os.environ[RUN_ID_VARIABLE]
    path = folder / record_file_name(record)
    if path.exists():
        raise FileExistsError(f"{path}: a result record of this case and start time exists")
    write_atomic(path, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path


def read_record(path: Path) -> dict[str, Any]:
    """A result record, checked for the fields every record has (and the shape of its
    per-CPU figures, if any): a report built on a garbled record would misstate a run.
    Raises :class:`JsonFileError` (a ValueError) with ``path:line:`` and what was
    expected."""
    record = load_json(path, "result record")
    if not isinstance(record, dict):
        raise JsonFileError(f"{path}:{json_line_of(record)}: not a result record: expected "
                            f"an object with 'schema': {SCHEMA!r}")
    schema = require(path, record, "schema", (str,), WHAT)
    if schema != SCHEMA:
        raise JsonFileError(f"{path}:{json_line_of(record, 'schema')}: {WHAT} schema "
                            f"{schema!r}, expected {SCHEMA!r}")
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
    return record
