"""What the lab proposes for its gate: ``rtlab thresholds suggest`` for every board of the
thresholds file as it is at a commit (the default branch's), one edit after the other on
a copy, and the replay of the stored history against the file before and after, so that
the merge request says how many past runs each would fail. Nothing here talks to GitLab or
writes to the repository (that is :mod:`rtlab.tuning.publish`).

A proposal has a *fingerprint*: the limits of the proposed file, without its ``reason:``
texts (which carry the day they were written). Two runs on the same history, or on a
history that moved no limit, propose the same thing, and the merge request is left as it
is rather than rewritten every night.
"""

import datetime
import hashlib
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

import attr
from ruamel.yaml import YAML
from sqlalchemy.orm import Session

from rtlab.measure.suite import load_suite
from rtlab.tuning.evidence import WHY_ONE_LENGTH, Method, length_range
from rtlab.tuning.replay import Replay, relabel, replay, thresholds_at
from rtlab.tuning.suggest import Suggestion, baseline_text, suggest
from rtlab.verdict.thresholds import ThresholdsError, load_thresholds

# the merge request's description carries the proposal's fingerprint in this comment
MARKER = "rtlab-thresholds-propose"
# the replay's failing runs listed in the description (the summary counts them all)
DESCRIPTION_ROWS = 50


@attr.frozen
class Counts:
    """One replay in figures: of the stored measured cases, how many the file fails."""

    cases: int
    failing: int
    # failing now, passed when they ran
    new: int
    # failed when they ran, passing now
    relieved: int

    @classmethod
    def of(cls, result: Replay) -> "Counts":
        return cls(len(result.judged), sum(j.fails for j in result.judged),
                   len(result.new_failures),
                   sum(j.failed_then and not j.fails for j in result.judged))


@attr.frozen
class Proposal:
    base: str
    # the file's path in the repository, as git names it
    name: str
    original: str
    text: str
    suggestions: tuple[Suggestion, ...]
    baseline: str
    method: Method
    # the replays of the history against the file at the base and as proposed (both None
    # when nothing changes)
    before: Replay | None = None
    after: Replay | None = None

    @property
    def changed(self) -> bool:
        return self.text != self.original

    @property
    def boards_changed(self) -> list[str]:
        return [s.board for s in self.suggestions if s.changes]

    @property
    def limits_changed(self) -> int:
        return sum(len(s.changes) for s in self.suggestions)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.text)

    def title(self) -> str:
        return (f"thresholds: {self.limits_changed} limit(s) from the measured history "
                f"({', '.join(self.boards_changed)})")

    def summary(self) -> str:
        """A few lines for the job's log: per board, what changes or why nothing does."""
        lines = []
        for suggestion in self.suggestions:
            lines.append(f"{suggestion.board}: {_board_outcome(suggestion)}")
        if self.before is not None and self.after is not None:
            lines += [_replay_line("now", self.before), _replay_line("proposed", self.after)]
        return "\n".join(lines) + "\n"

    def commit_message(self, made_by: str | None = None) -> str:
        body = [f"- {s.board}: {_board_outcome(s)}" for s in self.suggestions if s.changes]
        body += ["", f"Baseline: the measured (pass/fail) runs of {self.baseline}.",
                 f"Method: {self.method.describe()}."]
        if self.before is not None and self.after is not None:
            body += ["", _replay_line("Replay now", self.before),
                     _replay_line("Replay proposed", self.after)]
        if made_by:
            body += ["", f"Made by rtlab thresholds propose in {made_by}."]
        return f"{self.title()}\n\n" + "\n".join(body) + "\n"

    def description(self, made_by: str | None = None) -> str:
        """The merge request's description: what changes per board and why, how many of
        the stored runs the file fails now and as proposed, the tables of ``rtlab
        thresholds suggest`` and ``replay``; the fingerprint in a comment."""
        lines = [f"<!-- {MARKER} fingerprint={self.fingerprint} base={self.base} -->",
                 f"Limits of `{self.name}` suggested by `rtlab thresholds propose` from the "
                 f"measured (pass/fail) runs of {self.baseline} in the results store, on "
                 f"top of `{self.base[:12]}`.", "",
                 f"Method: {self.method.describe()}.", "",
                 "| board | limits changed | outcome |", "| --- | --- | --- |"]
        for suggestion in self.suggestions:
            lines.append(f"| {suggestion.board} | {len(suggestion.changes)} | "
                         f"{_board_outcome(suggestion)} |")
        if self.before is not None and self.after is not None:
            lines += ["", "**Replay** of the stored measured runs of the same baseline:", "",
                      f"- {_replay_line('now', self.before)}",
                      f"- {_replay_line('proposed', self.after)}"]
        for suggestion in self.suggestions:
            if not suggestion.changes:
                continue
            lines += ["", f"<details><summary>{suggestion.board}: {len(suggestion.changes)} "
                          "limit(s) — the suggestion's table</summary>", "",
                      suggestion.markdown().rstrip("\n"), "", "</details>"]
        if self.after is not None:
            lines += ["", "<details><summary>The replay of the proposed file</summary>", "",
                      self.after.markdown(max_rows=DESCRIPTION_ROWS).rstrip("\n"), "",
                      "</details>"]
        lines += ["", "---", "The next tuning run rebuilds this branch on the default branch "
                  "and rewrites this description while the branch has only the lab's "
                  "commits and the history moves a limit; push a commit to it and the lab "
                  "leaves it to you. The merge request's pipeline replays the branch's file "
                  "(`rtlab thresholds replay --fail-on-new-failures`)."]
        if made_by:
            lines.append(f"Made in {made_by}.")
        return "\n".join(lines) + "\n"


def _board_outcome(suggestion: Suggestion) -> str:
    # the runs left out for their length, said wherever the board's outcome is: a board
    # without changes has no table in the description to say it
    left_out = (f"{suggestion.left_out} run(s) of other lengths left out: {WHY_ONE_LENGTH}"
                if suggestion.left_out else "")
    if suggestion.changes:
        runs = max((row.evidence.runs for row in suggestion.rows), default=0)
        if left_out:
            return (f"{len(suggestion.changes)} limit(s) changed (up to {runs} run(s)"
                    f"{_lengths(suggestion)} per case; {left_out})")
        return f"{len(suggestion.changes)} limit(s) changed (up to {runs} run(s) per case)"
    if not any(row.evidence.runs for row in suggestion.rows):
        return "no measured runs: limits unchanged"
    supported = "the history supports the limits as they are"
    return f"{supported} ({left_out})" if left_out else supported


def _lengths(suggestion: Suggestion) -> str:
    """" of 60 min" when the board's cases were tuned from runs of one length, else
    " of 1..60 min" (each case's longest); nothing when no length was recorded."""
    known = sorted({lengths.length_s for lengths in suggestion.lengths.values()
                    if lengths.length_s is not None})
    return f" of {length_range(known[0], known[-1])}" if known else ""


def _replay_line(label: str, result: Replay) -> str:
    counts = Counts.of(result)
    return (f"{label} ({result.label}): {counts.failing} of {counts.cases} stored case(s) "
            f"fail, {counts.new} of them passed when they ran; {counts.relieved} that "
            "failed then pass")


def fingerprint(text: str) -> str:
    """The limits of a thresholds file, without its reasons, as a short hash."""
    def strip(node: object) -> object:
        if isinstance(node, dict):
            return {str(k): strip(v) for k, v in node.items() if k != "reason"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    data = strip(YAML(typ="safe").load(text))
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def fingerprint_in(description: str | None) -> str | None:
    """The fingerprint a proposal's description carries, if it is one."""
    for line in (description or "").splitlines():
        if line.startswith(f"<!-- {MARKER} "):
            for field in line.split():
                if field.startswith("fingerprint="):
                    return field.removeprefix("fingerprint=")
    return None


def make_proposal(session: Session, file: Path, base: str, *, name: str,
                  boards: Sequence[str] = (), ref: str | None = None,
                  since: datetime.datetime | None = None, last: int | None = None,
                  method: Method | None = None, labels: tuple[str, str] | None = None,
                  today: datetime.date | None = None) -> Proposal:
    """The proposal for ``file`` (``name`` in its repository) as it is at commit ``base``:
    every board of it (or ``boards``) tuned from the history of ``ref`` (``since``,
    ``last`` per case), and, when that changes the file, both files replayed. ``labels``
    are the names the replays cite the file before and after by (default
    ``<base>:<name>`` and ``proposed:<name>``)."""
    method = method or Method()
    before_label, after_label = labels or (f"{base[:8]}:{name}", f"proposed:{name}")
    with tempfile.TemporaryDirectory(prefix="rtlab-propose-") as scratch:
        path, suite_path, _ = thresholds_at(file, base, None, Path(scratch))
        suite = load_suite(suite_path) if suite_path else load_suite()
        original = path.read_text(encoding="utf-8")
        current = load_thresholds(path, suite)
        for board in boards:
            if board not in current.boards:
                raise ThresholdsError(f"{name} at {base[:8]}: no board '{board}' (valid: "
                                      f"{', '.join(current.boards)})")
        suggestions = tuple(
            suggest(session, path, board=board, suite=suite, ref=ref, since=since,
                    last=last, method=method, today=today, write=True, display=name)
            for board in (boards or tuple(current.boards)))
        text = path.read_text(encoding="utf-8")
        proposal = Proposal(base, name, original, text, suggestions,
                            baseline_text(ref, since, last), method)
        if not proposal.changed:
            return proposal
        proposed = load_thresholds(path, suite)
    before = replay(session, relabel(current, before_label), label=before_label, ref=ref,
                    since=since)
    after = replay(session, relabel(proposed, after_label), label=after_label, ref=ref,
                   since=since)
    return attr.evolve(proposal, before=before, after=after)
