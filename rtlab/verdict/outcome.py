"""What each board's part of a case means for the case, on every door to the judge (one
board, replicas pooled over a type's boards, a LAVA job, a bisection step): one table,
docs/verdicts.md "Every board outcome has one meaning".

A board's result record says what happened there:

- ``verdict``: pass, fail, skipped or error, as its runner reported the case;
- ``judged``: the judge's verdict on the windows the board measured
  (rtlab.verdict.case, ``{"verdict", "message"}``), kept whatever came after: a record
  with it has complete, valid windows (conditions checked) in its ``cpus``;
- ``error``: an infrastructure error that came after the judge's verdict (the trace not
  brought back, the console lost in teardown). It never undoes a breach: the record keeps
  ``fail`` and the error beside it.

The case's verdict over its boards (:func:`case_verdict`):

1. any board breached (a limit, a CPU that never woke, its tail) → ``fail``, whatever any
   other board did or any later error;
2. else the pooled judge's verdict on every board's complete windows (a clean board's and
   those of a board that erred after measuring) where it fails → ``fail``;
3. else, no board measured cleanly: ``error`` when any board erred (before or after
   measuring, a void run, conditions never checked), ``skipped`` when every board
   skipped (nobody should measure it);
4. else ``pass``, naming the boards that skipped or erred beside it.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import attr

PASS = "pass"
FAIL = "fail"
ERROR = "error"
SKIPPED = "skipped"

# the table's rows: what one board's part of a case was
MEASURED = "measured"
"""Judged and clean: its windows count, its verdict is the judge's pass."""
BREACHED = "breached"
"""The judge failed it (a limit, a CPU that never woke, its tail): the case fails."""
ERRED_AFTER = "erred after measuring"
"""Its windows were judged (pass), then the lab failed: the windows count, no pass of its
own."""
ERRED_BEFORE = "erred before measuring"
"""No complete, valid window: a lab error, a void run, conditions never checked. Counts
nothing."""
LEFT_OUT = "skipped"
"""Skipped (tags, not applicable): nobody should measure it there."""
ROWS = (MEASURED, BREACHED, ERRED_AFTER, ERRED_BEFORE, LEFT_OUT)


@attr.frozen
class BoardOutcome:
    """One board's part of a case, classified."""

    place: str
    row: str
    record: Mapping[str, Any] | None
    why: str
    """What happened there, in the board's own words."""

    @property
    def counts(self) -> bool:
        """Whether its windows count in the case's pooled judgement."""
        return self.row in (MEASURED, BREACHED, ERRED_AFTER)


def board_outcome(place: str, record: Mapping[str, Any] | None,
                  why_not: str | None = None) -> BoardOutcome:
    """The table's row of one board's record (None: the board wrote none, ``why_not``)."""
    if record is None:
        return BoardOutcome(place, ERRED_BEFORE, None,
                            f"did not measure it: {why_not or 'no record'}")
    verdict = record.get("verdict")
    judged = record.get("judged") or {}
    error = record.get("error")
    beside = f" (then: {error})" if error else ""
    if verdict == FAIL or judged.get("verdict") == FAIL:
        told = judged.get("message") or record.get("message", "")
        return BoardOutcome(place, BREACHED, record, f"{told}{beside}")
    if verdict == SKIPPED:
        return BoardOutcome(place, LEFT_OUT, record, f"skipped: {record.get('message', '')}")
    if verdict == PASS:
        return BoardOutcome(place, MEASURED, record, record.get("message", ""))
    if judged.get("verdict") == PASS:
        return BoardOutcome(place, ERRED_AFTER, record,
                            f"erred after measuring: {error or record.get('message', '')}")
    return BoardOutcome(place, ERRED_BEFORE, record,
                        f"ended in an error: {record.get('message', '')}")


@attr.frozen
class CaseVerdict:
    verdict: str
    message: str


def case_verdict(boards: Sequence[BoardOutcome], *, pooled: CaseVerdict | None,
                 boards_planned: int | None = None) -> CaseVerdict:
    """The case's verdict over its boards (module docstring). ``pooled``: the judge's
    verdict on the windows of the boards that count (None: none counted)."""
    planned = boards_planned if boards_planned is not None else len(boards)
    counted = [b for b in boards if b.counts]
    others = [f"{b.place} {b.why}" for b in boards if not b.counts]
    never = planned - len(boards)
    if never > 0:
        others.append(f"{never} place(s) never began the plan")
    erred = [f"{b.place} {b.why}" for b in boards if b.row == ERRED_AFTER]
    beside = "; ".join([*erred, *others])
    on = (f"judged on {len(counted)} of {planned} board{'s' if planned != 1 else ''}"
          f" ({', '.join(b.place for b in counted)})" if counted else "")
    on += f"; {beside}" if beside and counted else ""
    breached = [f"{b.place}: {b.why}" for b in boards if b.row == BREACHED]
    if breached or (pooled is not None and pooled.verdict == FAIL):
        reasons = [pooled.message] if pooled is not None and pooled.verdict == FAIL else []
        reasons += [why for why in breached if why not in reasons]
        return CaseVerdict(FAIL, f"{on}: {'; '.join(reasons)}")
    if not any(b.row == MEASURED for b in boards):
        if boards and all(b.row == LEFT_OUT for b in boards) and never <= 0:
            reasons = sorted({b.record.get("message", "") for b in boards if b.record})
            return CaseVerdict(SKIPPED, f"skipped on every board: {'; '.join(reasons)}")
        why = beside or f"no board of the plan's {planned} began the case"
        return CaseVerdict(ERROR, f"not measured cleanly on any board: {why}")
    assert pooled is not None, "a measured board is judged"
    return CaseVerdict(pooled.verdict, f"{on}: {pooled.message}")
