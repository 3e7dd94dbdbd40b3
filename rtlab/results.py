"""The result record: one JSON document per test case, written even when the test fails
or errors, so that no run is ever lost from the history."""

import json
import os
import tempfile
from pathlib import Path
from typing import Any

SCHEMA = "rtlab.result/2"
VERDICTS = ("pass", "fail", "error", "skipped")
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
    path = folder / record_file_name(record)
    if path.exists():
        raise FileExistsError(f"{path}: a result record of this case and start time exists")
    write_atomic(path, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path


def read_record(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{error.lineno}: not a result record: {error.msg}") from error
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a result record of schema {SCHEMA}")
    return record
