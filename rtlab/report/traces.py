"""Where a failing case's trace (rtlab.measure.trace) is, for a link from the report: the
test job's artifact in GitLab, else the file beside its record when it is on this
machine."""

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

# GitLab's address of the project (set in every job): a job's artifact is
# <project>/-/jobs/<job>/artifacts/file/<path in the job's folder>
PROJECT_URL_VARIABLE = "CI_PROJECT_URL"


def trace_link(trace: Mapping[str, Any], job_id: str | None, out_dir: Path) -> str | None:
    """The href of the trace from a page in ``out_dir``: in GitLab, the artifact of the
    test job ``job_id`` (the report job's own artifacts hold the page, not the traces);
    elsewhere the file relative to the page when it is here (``trace.path`` is relative to
    the folder the suite ran in, as its JUnit attachment is); None when neither."""
    path = trace.get("path")
    if not isinstance(path, str) or not path:
        return None
    here = Path(path)
    project = os.environ.get(PROJECT_URL_VARIABLE)
    if project and job_id and not here.is_absolute():
        return f"{project.rstrip('/')}/-/jobs/{quote(job_id)}/artifacts/file/{quote(path)}"
    if here.is_file():
        return Path(os.path.relpath(here.resolve(), out_dir.resolve())).as_posix()
    return None
