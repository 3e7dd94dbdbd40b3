"""What a bisection found, and each step it took: ``result.json`` of ``rtlab bisect run``,
which the report page, the results store and the GitLab note are made from. Read strictly:
a result that does not parse is named with its file and the key at fault."""

import json
from pathlib import Path
from typing import Any

import attr

from rtlab.util.atomic import write_atomic

SCHEMA = 1
FILE_NAME = "result.json"

# how a bisection ended
FOUND = "found"
UNDECIDED = "undecided"
NOT_REPRODUCED = "not reproduced"
STATUSES = (FOUND, UNDECIDED, NOT_REPRODUCED)

# what a step measured
CONFIRM = "confirm"
COMMIT = "commit"
OPTIONS = "options"
KINDS = (CONFIRM, COMMIT, OPTIONS)

# how a step was decided
MEASURED = "measured"
IDENTITY = "identity"


@attr.frozen
class Step:
    index: int
    kind: str
    """``confirm`` (the bad point against the good one), ``commit``, ``options``."""
    commit: str
    options: tuple[str, ...]
    """``options``: the options applied to the good configuration (as kconfig resolved
    them); empty for a commit."""
    outcome: str
    """``good``, ``bad`` or ``undecidable``."""
    reason: str
    decided_by: str
    """``measured``, or ``identity``: its configuration is one already decided."""
    rounds: int = 0
    boots: tuple[int, int] = (0, 0)
    """(the good point's, the step's) valid boots in this step."""
    board_s: float = 0.0
    """Board time: every run's wall time on its board, the good point's included."""
    confidence: float | None = None
    """The step's decision confidence (None: decided by identity)."""
    difference_us: float | None = None
    """The step's tail quantile minus the good point's (µs), at the last look."""
    key: str = ""
    """What identifies the step's kernel (its configuration's digest)."""

    @property
    def decided(self) -> str:
        """How it was decided, as the page and the note show it."""
        if self.decided_by == IDENTITY or self.confidence is None:
            return "by identity"
        return f"{self.confidence:.1%}"

    @property
    def point(self) -> str:
        short = self.commit[:12]
        return f"{short} + {', '.join(self.options)}" if self.options else short


@attr.frozen
class Culprit:
    commit: str
    subject: str
    diff: str
    """The commit's change to the lab repository (git show)."""


@attr.frozen
class Option:
    name: str
    good: str
    bad: str
    """The option's value at the good and the bad end (``n``: not set)."""


@attr.frozen
class Bisection:
    board: str
    flavour: str
    case: str
    repository: str
    good: str
    bad: str
    status: str
    reason: str
    steps: tuple[Step, ...]
    candidates: tuple[str, ...] = ()
    """The commits (or, after a commit was found, the options) that may hold the culprit
    where it could not be told."""
    culprit: Culprit | None = None
    option: Option | None = None
    source: str = "debian"
    """How a point's kernel was had: ``debian`` (Debian's kernel, the configuration's test
    devices on the command line) or ``build`` (built from the commit's kernel/)."""
    started: str = ""
    bisection_id: str = ""

    @property
    def board_s(self) -> float:
        return sum(step.board_s for step in self.steps)

    def to_json(self) -> dict[str, Any]:
        data = attr.asdict(self, recurse=True)
        data["schema"] = SCHEMA
        data["board_s"] = self.board_s
        return data

    def write(self, folder: Path) -> Path:
        path = folder / FILE_NAME
        write_atomic(path, json.dumps(self.to_json(), indent=2) + "\n")
        return path


def board_time(seconds: float) -> str:
    """Board time as the page and the note show it: 45 s, 12 min, 3 h 05 min."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def read_bisection(path: Path) -> Bisection:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a bisection result: {error}") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != SCHEMA:
        raise ValueError(f"{path}: schema {schema!r} is not {SCHEMA} (written by another "
                         f"rtlab?)")
    try:
        steps = tuple(Step(**{**step, "options": tuple(step["options"]),
                              "boots": tuple(step["boots"])}) for step in data["steps"])
        culprit = Culprit(**data["culprit"]) if data.get("culprit") else None
        option = Option(**data["option"]) if data.get("option") else None
        fields = {key: data[key] for key in ("board", "flavour", "case", "repository", "good",
                                             "bad", "status", "reason", "source", "started",
                                             "bisection_id")}
        result = Bisection(**fields, steps=steps, candidates=tuple(data["candidates"]),
                           culprit=culprit, option=option)
    except (KeyError, TypeError) as error:
        raise ValueError(f"{path}: a bisection result without a field it needs or with one "
                         f"it does not know: {error}") from None
    if result.status not in STATUSES:
        raise ValueError(f"{path}: status {result.status!r} is not one of "
                         f"{', '.join(STATUSES)}")
    return result
