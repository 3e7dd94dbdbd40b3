"""Threshold tuning from the results store: ``rtlab thresholds suggest`` proposes limits from
the measured history and writes them into ``thresholds.yaml``; ``rtlab thresholds replay``
judges the stored runs by a thresholds file (a branch's, say), so that a tuning change is
reviewed on evidence rather than on faith.

How a limit is suggested, per case (board/flavour/scenario/interval, or board/flavour/tool
for an rt-test) and per metric the file gates there (``max_us`` always, ``avg_us`` and
``p99_9_us`` where set):

1. The baseline: the case's measured runs in the store (verdict pass or fail: an error or a
   skip has no figures worth trusting), optionally only those made for one ref (``--ref
   main``), since a date (``--since``), and only the newest N (``--last``).
2. Per run, the worst gated CPU's figure (:meth:`rtlab.store.query.CaseRow.worst`): max,
   avg or p99.9. A run where no CPU has the figure (none woke up) is left out; a p99.9 past
   the histogram's range is unknown and ranks above every known figure.
3. At least ``--min-runs`` (10) runs, else the case is listed as "too few runs (N)" and
   keeps its limit.
4. The ``--quantile`` (0.99) of those figures, taken as an observed value: the figure at
   position ceil(q·(n−1)) of the sorted list (numpy's "higher" method). Below 1 + 1/(1−q)
   runs (101 at 0.99) that is the maximum: too few runs to leave any out.
5. × ``--margin`` (1.2), rounded up to ``--figures`` (2) significant figures and a whole
   µs: 123 µs × 1.2 = 147.6 → 150 µs. That is the case's suggestion.

Where a value is written: levels inherit, so one flavour-level limit can serve many cases.
A value serves a case when it is at least the case's suggestion and at most ``--merge``
(20 %) above it; each level takes the value that serves most of the cases inheriting from
it (preferring the value it has, then the larger). A case its level cannot serve gets its
own value on its scenario (when that serves more of the scenario's intervals than the
flavour's value does) or else on its interval, creating ``scenarios: <name>:`` and
``intervals:`` as needed; a limit already set on a scenario or interval is updated in
place. Nothing is written above the flavour: a board's flavours are different kernels and
``defaults`` is deliberately empty. A case without the evidence (too few runs, none, or a
quantile past the histogram) keeps exactly the limit it had: if the level it inherits from
changes, that limit is pinned on its own level. Every level whose numbers change gets a new
``reason:`` naming the data; the reason it replaces is printed for the reviewer.

The file is edited in ruamel.yaml's round-trip mode, so comments, blank lines, key order,
folded reasons and anchors stay and only the changed levels' lines differ (a reason that
other levels alias moves, whole, to the first of them). The edited file must load with
:func:`rtlab.thresholds.load_thresholds` and give every case the planned limit before it
replaces the original; otherwise the original is left as it was.
"""

import datetime
import io
import math
import os
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attr
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.scalarstring import FoldedScalarString
from sqlalchemy.orm import Session

from .results import write_atomic
from .rttests import TESTS
from .scenarios import Suite, load_suite
from .store.query import CaseRow, CpuRow, history
from .thresholds import (
    FIGURES,
    METRICS,
    Threshold,
    Thresholds,
    ThresholdsError,
    check,
    format_us,
    load_thresholds,
)

MEASURED = ("pass", "fail")
_FIGURE_NAME = {metric: figure for figure, metric in FIGURES.items()}
# wrap written reasons like the hand-written ones
_REASON_WIDTH = 92


@attr.frozen
class Method:
    """How suggestions are made (see the module docstring)."""

    quantile: float = 0.99
    margin: float = 1.2
    min_runs: int = 10
    merge: float = 0.2
    figures: int = 2

    def __attrs_post_init__(self) -> None:
        if not 0 < self.quantile <= 1:
            raise ValueError(f"quantile must be in (0, 1], got {self.quantile}")
        if self.margin <= 0:
            raise ValueError(f"margin must be greater than 0, got {self.margin}")
        if self.min_runs < 1:
            raise ValueError(f"min-runs must be at least 1, got {self.min_runs}")
        if self.merge < 0:
            raise ValueError(f"merge must be 0 or more, got {self.merge}")
        if self.figures < 1:
            raise ValueError(f"figures must be at least 1, got {self.figures}")

    @property
    def all_below(self) -> float:
        """Below this many runs the quantile is the maximum."""
        if self.quantile >= 1:
            return math.inf
        # the maximum while (1 - q)·(n - 1) < 1; round() keeps 1/(1 - 0.99) at 100
        return math.ceil(round(1 + 1 / (1 - self.quantile), 6))

    def describe(self) -> str:
        quantile = ("the maximum" if self.quantile >= 1 else
                    f"the {self.quantile:g} quantile (the maximum below {self.all_below} runs)")
        return (f"{quantile} of the worst CPU's figure per run × {self.margin:g}, rounded up "
                f"to {self.figures} significant figures; at least {self.min_runs} runs; a "
                f"shared limit at most {self.merge:.0%} above a case's own suggestion")


def nice_ceil(value: float, figures: int = 2) -> int:
    """``value`` rounded up to ``figures`` significant figures and a whole µs: limits people
    can read and compare (147.6 → 150, 1234 → 1300, 9.2 → 10)."""
    if value <= 0:
        return 1
    step = 10 ** max(math.floor(math.log10(value)) - (figures - 1), 0)
    # round() first: 125 × 1.2 is 150.00000000000003, which is 150
    return int(math.ceil(round(value / step, 9)) * step)


def high_quantile(values: Sequence[float | None], quantile: float) -> tuple[float | None, str]:
    """The ``quantile`` of ``values`` as an observed value (numpy's "higher" method), and
    what it is ("max" or "p99"). None stands for an unknown figure, above every known
    one; the result is None when the quantile falls among them."""
    ordered = sorted(values, key=lambda v: (v is None, v or 0.0))
    index = min(len(ordered) - 1, math.ceil(round(quantile * (len(ordered) - 1), 9)))
    label = "max" if index == len(ordered) - 1 else f"p{quantile * 100:g}"
    return ordered[index], label


@attr.frozen
class Series:
    """One case of the suite on a board: its flavour, scenario or rt-test, interval."""

    flavour: str
    scenario: str
    interval_us: int | None

    def name(self, board: str | None = None) -> str:
        parts = [board] if board else []
        parts += [self.flavour, self.scenario]
        if self.interval_us is not None:
            parts.append(f"{self.interval_us}us")
        return "/".join(parts)

    def short(self) -> str:
        if self.interval_us is None:
            return self.scenario
        return f"{self.scenario}/{self.interval_us}us"


def _fails(value: float | None, limit: float) -> bool:
    # an unknown figure fails every limit, as rtlab.thresholds.check has it
    return value is None or value > limit


@attr.frozen
class Evidence:
    """One case's baseline for one metric, and what it suggests."""

    metric: str
    # the worst CPU's figure per run, oldest first; None: past the histogram's range
    values: tuple[float | None, ...]
    first: datetime.datetime | None
    last: datetime.datetime | None
    observed: float | None = None
    label: str = ""
    suggested: int | None = None
    # why there is no suggestion
    missing: str | None = None

    @property
    def runs(self) -> int:
        return len(self.values)

    def failures(self, limit: float) -> int:
        """How many of the runs ``limit`` fails."""
        return sum(_fails(v, limit) for v in self.values)

    def dates(self) -> str:
        if self.first is None or self.last is None:
            return "-"
        return f"{self.first:%Y-%m-%d}..{self.last:%Y-%m-%d}"


def evidence(cases: Sequence[CaseRow], metric: str, method: Method) -> Evidence:
    values: list[float | None] = []
    used: list[CaseRow] = []
    for case in cases:
        value = case.worst(metric)
        # no CPU woke up: no figure at all (not even an unknown percentile)
        if value is None and not _has_percentile_range(case, metric):
            continue
        values.append(value)
        used.append(case)
    first = min((c.started for c in used), default=None)
    last = max((c.started for c in used), default=None)
    base = Evidence(metric, tuple(values), first, last)
    if not values:
        return attr.evolve(base, missing="no runs")
    if len(values) < method.min_runs:
        return attr.evolve(base, missing=f"too few runs ({len(values)}, need "
                                         f"{method.min_runs})")
    observed, label = high_quantile(values, method.quantile)
    if observed is None:
        unknown = sum(v is None for v in values)
        return attr.evolve(base, label=label, missing=(
            f"{_FIGURE_NAME[metric]} past the histogram's range in {unknown} of "
            f"{len(values)} runs: no value can be suggested"))
    return attr.evolve(base, observed=observed, label=label,
                       suggested=nice_ceil(observed * method.margin, method.figures))


def _has_percentile_range(case: CaseRow, metric: str) -> bool:
    """Whether a percentile the case lacks is one past its histogram (unknown, but
    measured) rather than one of CPUs that never woke."""
    if not metric.startswith("p"):
        return False
    return any(not cpu.no_wakeup and (cpu.gated is None or cpu.gated) for cpu in case.cpus)


# A level of the file below the board, as (flavour, scenario, interval): (f, None, None) is
# the flavour, (f, s, None) a scenario (or rt-test), (f, s, i) an interval.
Node = tuple[str, str | None, int | None]


def _node_name(node: Node) -> str:
    flavour, scenario, interval = node
    name = f"flavours.{flavour}"
    if scenario is not None:
        name += f".scenarios.{scenario}"
    if interval is not None:
        name += f".intervals.{interval}"
    return name


@attr.frozen
class _Target:
    """What one case needs of its limit: a suggestion, or the value it must keep."""

    series: Series
    evidence: Evidence
    old: float

    @property
    def value(self) -> float:
        return self.evidence.suggested if self.evidence.suggested is not None else self.old

    @property
    def tuned(self) -> bool:
        return self.evidence.suggested is not None

    def served_by(self, value: float | None, merge: float) -> bool:
        if value is None:
            return False
        if not self.tuned:
            return value == self.old
        suggested = self.evidence.suggested
        assert suggested is not None
        return suggested <= value <= suggested * (1 + merge) + 1e-9


def _choose(current: float | None, targets: Sequence[_Target], merge: float) -> float | None:
    """The value that serves most of ``targets``; ties go to the current value (which
    serves every case that keeps its limit), then to the larger (the one fewer runs
    fail)."""
    candidates = {t.value for t in targets} | ({current} if current is not None else set())

    def score(value: float) -> tuple[int, bool, float]:
        return (sum(t.served_by(value, merge) for t in targets), value == current, value)

    return max(candidates, key=score)


def _served(value: float | None, targets: Iterable[_Target], merge: float) -> int:
    return sum(t.served_by(value, merge) for t in targets)


@attr.frozen
class Change:
    """One number the edit sets in the file."""

    node: Node
    metric: str
    old: float | None
    # the line it had (0 when the key is new)
    line: int
    new: float
    # the cases that take their limit from here after the edit
    serves: tuple[_Target, ...]


def _plan_metric(metric: str, targets: Sequence[_Target],
                 explicit: Callable[[Node], float | None], above: float | None,
                 merge: float) -> dict[Node, float]:
    """The explicit values of ``metric`` per level of one flavour after the edit (only the
    levels that change). ``explicit`` is the value a level sets today; ``above`` what the
    flavour inherits from the board or defaults."""
    if not targets:
        return {}
    flavour = targets[0].series.flavour
    new: dict[Node, float] = {}

    def own(node: Node) -> float | None:
        return new.get(node, explicit(node))

    def scenario_node(target: _Target) -> Node:
        return (flavour, target.series.scenario, None)

    def interval_node(target: _Target) -> Node | None:
        interval = target.series.interval_us
        return None if interval is None else (flavour, target.series.scenario, interval)

    def set_here(target: _Target) -> bool:
        node = interval_node(target)
        return node is not None and explicit(node) is not None

    flavour_node: Node = (flavour, None, None)
    current = explicit(flavour_node)
    inherited = current if current is not None else above
    dependents = [t for t in targets
                  if explicit(scenario_node(t)) is None and not set_here(t)]
    flavour_value = _choose(inherited, dependents, merge) if dependents else inherited
    if flavour_value != inherited and flavour_value is not None:
        new[flavour_node] = flavour_value

    scenarios: dict[str, list[_Target]] = {}
    for target in targets:
        scenarios.setdefault(target.series.scenario, []).append(target)
    for scenario, own_targets in scenarios.items():
        node: Node = (flavour, scenario, None)
        deps = [t for t in own_targets if not set_here(t)]
        scenario_value = explicit(node)
        if scenario_value is not None:
            value = _choose(scenario_value, deps, merge) if deps else scenario_value
            if value != scenario_value and value is not None:
                new[node] = value
            scenario_value = value
        else:
            scenario_value = flavour_value
            if deps:
                best = _choose(flavour_value, deps, merge)
                if _served(best, deps, merge) > _served(flavour_value, deps, merge):
                    new[node] = scenario_value = best
        for target in own_targets:
            inode = interval_node(target)
            if inode is None:
                continue
            interval_value = explicit(inode)
            if interval_value is not None:
                value = _choose(interval_value, [target], merge)
                if value != interval_value and value is not None:
                    new[inode] = value
            elif not target.served_by(scenario_value, merge):
                new[inode] = target.value
    # the plan must give every case what it needs; anything else is a bug here, not data
    for target in targets:
        value = _effective(target.series, own, above)
        if not target.served_by(value, merge):
            raise RuntimeError(f"tuning plan for {target.series.name()} {metric}: "
                               f"{value} does not serve {target.value}")
    return new


def _effective(series: Series, own: Callable[[Node], float | None],
               above: float | None) -> float | None:
    nodes: list[Node] = []
    if series.interval_us is not None:
        nodes.append((series.flavour, series.scenario, series.interval_us))
    nodes += [(series.flavour, series.scenario, None), (series.flavour, None, None)]
    for node in nodes:
        value = own(node)
        if value is not None:
            return value
    return above


def _setting_node(series: Series, own: Callable[[Node], float | None]) -> Node | None:
    nodes: list[Node] = []
    if series.interval_us is not None:
        nodes.append((series.flavour, series.scenario, series.interval_us))
    nodes += [(series.flavour, series.scenario, None), (series.flavour, None, None)]
    return next((node for node in nodes if own(node) is not None), None)


@attr.frozen
class Row:
    """One case × metric of the suggestion table."""

    series: Series
    metric: str
    old: Threshold
    evidence: Evidence
    new: float
    # the level that sets the new limit, and whether the edit wrote it
    where: str
    written: bool


@attr.frozen
class Suggestion:
    board: str
    display: str
    method: Method
    baseline: str
    rows: tuple[Row, ...]
    changes: tuple[Change, ...]
    # per changed level: the reason written, and the reason it replaced
    reasons: Mapping[Node, tuple[str, str | None]]
    unchanged_without_runs: tuple[str, ...]
    notes: tuple[str, ...]
    text: str
    original: str
    written: bool = False

    def markdown(self) -> str:
        lines = [f"### Suggested limits for {self.board} ({self.display})", "",
                 f"Baseline: the measured (pass/fail) runs of {self.baseline}. Method: "
                 f"{self.method.describe()}.", ""]
        header = ("case", "metric", "old", "new", "set at", "suggested", "runs", "dates",
                  "new fails", "old failed")
        lines += [_md_row(header), _md_row(("---",) * len(header))]
        for row in self.rows:
            ev = row.evidence
            if ev.suggested is not None:
                suggested = (f"{format_us(ev.suggested)} ({ev.label} "
                             f"{format_us(ev.observed or 0)} × {self.method.margin:g})")
            else:
                suggested = ev.missing or "-"
            changed = row.new != row.old.value
            # a level the edit wrote: a changed limit, or one kept on its own level
            where = row.where if changed or row.written else "unchanged"
            lines.append(_md_row((
                row.series.name(self.board), row.metric,
                f"{format_us(row.old.value)} ({row.old.source})",
                format_us(row.new) if changed else "=", where, suggested, str(ev.runs),
                ev.dates(), str(ev.failures(row.new)) if ev.runs else "-",
                str(ev.failures(row.old.value)) if ev.runs else "-")))
        if self.unchanged_without_runs:
            lines += ["", "Cases without measured runs, limits unchanged: "
                      + "; ".join(self.unchanged_without_runs) + "."]
        if not self.changes:
            lines += ["", f"No change to {self.display}."]
        else:
            lines += ["", f"#### Edits to {self.display}", ""]
            by_node: dict[Node, list[Change]] = {}
            for change in self.changes:
                by_node.setdefault(change.node, []).append(change)
            for node, node_changes in by_node.items():
                numbers = ", ".join(
                    f"{c.metric} {'(new) ' if c.old is None else ''}"
                    f"{format_us(c.old) + ' (line ' + str(c.line) + ') ' if c.old else ''}"
                    f"→ {format_us(c.new)} for {len(c.serves)} case(s)" for c in node_changes)
                lines.append(f"- `boards.{self.board}.{_node_name(node)}`: {numbers}")
                reason, replaced = self.reasons[node]
                lines.append(f"  - reason: {reason}")
                if replaced:
                    lines.append(f"  - replaces: {replaced}")
        if self.notes:
            lines += ["", *[f"- {note}" for note in self.notes]]
        return "\n".join(lines) + "\n"


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def baseline_text(ref: str | None, since: datetime.datetime | None, last: int | None) -> str:
    parts = [f"ref {ref}" if ref else "any ref"]
    if since is not None:
        parts.append(f"since {since:%Y-%m-%d}")
    if last is not None:
        parts.append(f"newest {last} per case")
    return ", ".join(parts)


def suggest(session: Session, thresholds_path: Path, *, board: str,
            flavour: str | None = None, suite: Suite | None = None,
            ref: str | None = None, since: datetime.datetime | None = None,
            last: int | None = None, method: Method | None = None,
            today: datetime.date | None = None, write: bool = True) -> Suggestion:
    """Suggest limits for ``board`` (one flavour, or all it has) from the store's history,
    and with ``write`` edit ``thresholds_path`` to them (see the module docstring)."""
    method = method or Method()
    suite = suite or load_suite()
    today = today or datetime.datetime.now(datetime.UTC).date()
    thresholds = load_thresholds(thresholds_path, suite)
    flavours = list(thresholds.flavours(board))
    if flavour is not None:
        if flavour not in flavours:
            raise ThresholdsError(f"{thresholds.display}: board '{board}' has no flavour "
                                  f"'{flavour}' (valid: {', '.join(flavours)})")
        flavours = [flavour]
    original = thresholds_path.read_text(encoding="utf-8")
    yaml = _yaml()
    doc = yaml.load(original)
    board_node = doc["boards"][board]

    cases = history(session, board=board, flavour=flavour, ref=ref, since=since,
                    verdicts=MEASURED)
    by_series: dict[Series, list[CaseRow]] = {}
    # runs that cannot tune anything here, by why: said, not silently dropped
    skipped: Counter[str] = Counter()
    for case in cases:
        if case.kind == "functional" or (case.scenario and _functional(case.scenario)):
            continue
        if case.flavour not in flavours:
            skipped[f"flavour '{case.flavour}' is not in {thresholds.display}"] += 1
        elif case.scenario not in thresholds.scenarios:
            skipped[f"'{case.scenario}' is no scenario or rt-test of {suite.source}"] += 1
        else:
            by_series.setdefault(Series(case.flavour, case.scenario, case.interval_us),
                                 []).append(case)
    notes = [f"{count} run(s) not used: {why}" for why, count in skipped.items()]
    if last is not None:
        by_series = {series: runs[-last:] for series, runs in by_series.items()}

    rows: list[Row] = []
    changes: list[Change] = []
    reasons: dict[Node, tuple[str, str | None]] = {}
    # cases without runs whose limit stays where it is, per flavour
    without_runs: dict[str, dict[Series, None]] = {}
    listed: set[Series] = set()
    reason_parts: dict[Node, list[tuple[str, Change]]] = {}
    for name in flavours:
        flavour_node = board_node["flavours"][name]
        all_series = _series_of(suite, name, by_series)
        for metric in METRICS:
            targets: list[_Target] = []
            olds: dict[Series, Threshold] = {}
            for series in all_series:
                limits = thresholds.lookup(board, name, series.scenario, series.interval_us)
                old = limits.get(metric)
                if old is None or (series.interval_us is None and metric == "p99_9_us"):
                    continue
                olds[series] = old
                targets.append(_Target(series, evidence(by_series.get(series, []), metric,
                                                        method), old.value))
            if not targets:
                continue

            def explicit(node: Node, metric: str = metric,
                         flavour_node: CommentedMap = flavour_node) -> float | None:
                level = _level(flavour_node, node)
                return None if level is None else level.get(metric)

            above = _above(doc, board_node, metric)
            plan = _plan_metric(metric, targets, explicit, above, method.merge)

            def own(node: Node, plan: dict[Node, float] = plan,
                    explicit: Callable[[Node], float | None] = explicit) -> float | None:
                return plan.get(node, explicit(node))

            for node, value in plan.items():
                serves = tuple(t for t in targets if _setting_node(t.series, own) == node)
                level = _level(flavour_node, node)
                line = _line(level, metric)
                change = Change(node, metric, explicit(node), line, value, serves)
                changes.append(change)
                reason_parts.setdefault(node, []).append((metric, change))
            for target in targets:
                setting = _setting_node(target.series, own)
                new = _effective(target.series, own, above)
                assert new is not None
                if not target.evidence.runs and setting not in plan:
                    without_runs.setdefault(name, {})[target.series] = None
                    continue
                listed.add(target.series)
                rows.append(Row(target.series, metric, olds[target.series], target.evidence,
                                new, _node_name(setting) if setting else "board/defaults",
                                setting in plan))

    for node, parts in reason_parts.items():
        level = _level(board_node["flavours"][node[0]], node)
        replaced = None
        if level is not None and isinstance(level.get("reason"), str):
            replaced = " ".join(str(level["reason"]).split())
        reasons[node] = (_reason(parts, today, method, baseline_text(ref, since, last)),
                         replaced)
    rows.sort(key=lambda r: (flavours.index(r.series.flavour),
                             _order(suite, r.series), METRICS.index(r.metric)))
    text = original
    if changes:
        _apply(doc, board_node, changes, reasons, suite)
        text = _dump(yaml, doc, original)
    suggestion = Suggestion(board, thresholds.display, method,
                            baseline_text(ref, since, last), tuple(rows), tuple(changes),
                            reasons, _compact(suite, without_runs, listed, by_series),
                            tuple(notes), text, original)
    if write and changes:
        _write_checked(thresholds_path, text, suite, board, suggestion)
        suggestion = attr.evolve(suggestion, written=True)
    return suggestion


def _functional(name: str) -> bool:
    return name in TESTS and TESTS[name].functional


def _compact(suite: Suite, without: Mapping[str, Mapping[Series, None]], listed: set[Series],
             by_series: Mapping[Series, list[CaseRow]]) -> tuple[str, ...]:
    """Per flavour, the cases without runs (and not in the table), a scenario named once
    when none of its intervals has runs: "std: all 38 cases", "rt: cpu100_isolated,
    oslat"."""
    out = []
    for flavour, series in without.items():
        missing = [s for s in series if s not in listed]
        every = _series_of(suite, flavour, by_series)
        if len(missing) == len(every):
            out.append(f"{flavour}: all {len(every)} cases")
            continue
        names: list[str] = []
        for scenario in dict.fromkeys(s.scenario for s in missing):
            mine = [s for s in missing if s.scenario == scenario]
            if len(mine) == sum(s.scenario == scenario for s in every):
                names.append(scenario)
            else:
                names += [s.short() for s in mine]
        if names:
            out.append(f"{flavour}: {', '.join(names)}")
    return tuple(out)


def _series_of(suite: Suite, flavour: str,
               by_series: Mapping[Series, list[CaseRow]]) -> list[Series]:
    """The suite's cases of a flavour, and any other the history has (an interval run by
    hand), in the order of the suite."""
    series = [Series(flavour, name, interval) for name in suite.scenarios
              for interval in suite.intervals_us]
    series += [Series(flavour, tool, None) for tool in suite.rt_tests if not _functional(tool)]
    series += [s for s in by_series if s.flavour == flavour and s not in series]
    return sorted(series, key=lambda s: _order(suite, s))


def _order(suite: Suite, series: Series) -> tuple[int, int]:
    names = [*suite.scenarios, *suite.rt_tests]
    position = names.index(series.scenario) if series.scenario in names else len(names)
    return position, series.interval_us or 0


def _level(flavour_node: CommentedMap, node: Node) -> CommentedMap | None:
    _, scenario, interval = node
    level: Any = flavour_node
    if scenario is not None:
        level = (level.get("scenarios") or {}).get(scenario)
        if interval is not None and isinstance(level, Mapping):
            level = (level.get("intervals") or {}).get(interval)
    return level if isinstance(level, CommentedMap) else None


def _line(level: CommentedMap | None, key: str) -> int:
    if level is None or key not in level:
        return 0
    try:
        return level.lc.key(key)[0] + 1
    except (KeyError, TypeError):
        return 0


def _above(doc: CommentedMap, board_node: CommentedMap, metric: str) -> float | None:
    for level in (board_node, doc.get("defaults")):
        if isinstance(level, Mapping) and metric in level:
            return level[metric]
    return None


def _reason(parts: list[tuple[str, Change]], today: datetime.date, method: Method,
            baseline: str) -> str:
    """The ``reason:`` of a level the edit changed: the data and the arithmetic, so that
    the file itself says where each number came from."""
    tuned: list[str] = []
    kept: list[str] = []
    # the runs of each case (the same runs give every metric its figure)
    runs: dict[Series, int] = {}
    first: datetime.datetime | None = None
    last: datetime.datetime | None = None
    for metric, change in parts:
        served = [t for t in change.serves if t.tuned]
        source = [t for t in served if t.value == change.new]
        if not source:
            why = sorted({t.evidence.missing or "" for t in change.serves} - {""})
            kept.append(f"{metric} {format_us(change.new)} as before: {'; '.join(why)}")
            continue
        for target in served:
            runs[target.series] = max(runs.get(target.series, 0), target.evidence.runs)
            if target.evidence.first is not None and target.evidence.last is not None:
                first = min(first or target.evidence.first, target.evidence.first)
                last = max(last or target.evidence.last, target.evidence.last)
        # the value is the highest suggestion among the cases it serves: name whose
        top = source[0]
        where = f" ({top.series.short()})" if len(served) > 1 else ""
        tuned.append(f"{metric} {top.evidence.label} of worst-CPU {_FIGURE_NAME[metric]} "
                     f"{format_us(top.evidence.observed or 0)}{where} × {method.margin:g} "
                     f"→ {format_us(change.new)}")
    if not tuned:
        return (f"kept {today:%Y-%m-%d} by rtlab thresholds suggest when the limit above "
                f"changed: {'; '.join(kept)}.")
    dates = f", {first:%Y-%m-%d}..{last:%Y-%m-%d}" if first and last else ""
    of = f" of {len(runs)} cases" if len(runs) > 1 else ""
    return (f"suggested {today:%Y-%m-%d} from {sum(runs.values())} runs{of} "
            f"({baseline}{dates}): "
            + "; ".join(tuned + kept) + ".")


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    # never re-wrap what people wrote; new reasons are wrapped by hand (_folded)
    yaml.width = 4096
    return yaml


def _indent(doc: CommentedMap) -> int:
    """The file's mapping indentation (what ``boards:`` is indented by)."""
    boards = doc.get("boards")
    col = getattr(getattr(boards, "lc", None), "col", 0) or 0
    return col if col > 0 else 2


def _dump(yaml: YAML, doc: CommentedMap, original: str) -> str:
    yaml.indent(mapping=_indent(doc), sequence=_indent(doc) + 2, offset=_indent(doc))
    out = io.StringIO()
    yaml.dump(doc, out)
    text = out.getvalue()
    # a comment carried along with a moved anchor may leave blank lines at the end
    if original.endswith("\n") and not original.endswith("\n\n"):
        text = text.rstrip("\n") + "\n"
    return text


def _folded(text: str, column: int) -> FoldedScalarString:
    """A ``>-`` reason wrapped to the file's width at ``column`` (where its lines start)."""
    folded = FoldedScalarString(text)
    width = max(_REASON_WIDTH - column, 40)
    positions: list[int] = []
    start = 0
    while len(text) - start > width:
        cut = text.rfind(" ", start, start + width + 1)
        if cut <= start:
            cut = text.find(" ", start + width)
            if cut < 0:
                break
        # a fold is a single space between two words
        if text[cut - 1] != " " and cut + 1 < len(text) and text[cut + 1] != " ":
            positions.append(cut)
        start = cut + 1
    folded.fold_pos = positions  # type: ignore[attr-defined]
    return folded


def _apply(doc: CommentedMap, board_node: CommentedMap, changes: Sequence[Change],
           reasons: Mapping[Node, tuple[str, str | None]], suite: Suite) -> None:
    indent = _indent(doc)
    order = [*suite.scenarios, *suite.rt_tests]
    _detach_alias_comments(doc)
    trailing = _trailing_comments(doc)
    for change in changes:
        level = _make_level(board_node["flavours"], change.node, order)
        value = int(change.new) if float(change.new).is_integer() else change.new
        if change.metric in level:
            level[change.metric] = value
        else:
            # metrics first, in the file's order, then reason and the levels below
            position = sum(1 for key in level if key in METRICS
                           and METRICS.index(key) < METRICS.index(change.metric))
            level.insert(position, change.metric, value)
    for node, (reason, _) in reasons.items():
        level = _make_level(board_node["flavours"], node, order)
        # boards(0) board(1) flavours(2) flavour(3), then two per level below; the text
        # goes one deeper than its key
        depth = 4 + (2 if node[1] is not None else 0) + (2 if node[2] is not None else 0)
        value = _folded(reason, (depth + 1) * indent)
        if "reason" in level:
            level["reason"] = value
        else:
            level.insert(sum(1 for key in level if key in METRICS), "reason", value)
    _restore_trailing(trailing)


def _make_level(flavours: CommentedMap, node: Node, order: list[str]) -> CommentedMap:
    flavour, scenario, interval = node
    level = flavours[flavour]
    if scenario is None:
        return _block(level)
    scenarios = _child(level, "scenarios", None)
    level = _child(scenarios, scenario, lambda key: order.index(key) if key in order
                   else len(order))
    if interval is None:
        return level
    intervals = _child(level, "intervals", None)
    return _child(intervals, interval, lambda key: key if isinstance(key, int) else 0)


def _block(level: CommentedMap) -> CommentedMap:
    # a level that changes gets a folded reason, which a flow mapping ({max_us: 300})
    # cannot hold
    level.fa.set_block_style()
    return level


def _child(parent: CommentedMap, key: Any, rank: Callable[[Any], Any] | None,  # noqa: ANN401
           ) -> CommentedMap:
    """``parent[key]``, created as an empty block mapping where missing: in ``rank`` order
    among its siblings when they are in that order themselves, else at the end."""
    existing = parent.get(key)
    if isinstance(existing, CommentedMap):
        return _block(existing)
    child = CommentedMap()
    position = len(parent)
    if rank is not None:
        ranks = [rank(k) for k in parent]
        if ranks == sorted(ranks):
            position = next((i for i, r in enumerate(ranks) if r > rank(key)), len(ranks))
    _block(parent).insert(position, key, child)
    return child


def _tail(level: CommentedMap) -> tuple[CommentedMap, Any] | None:
    """The mapping and key of the last line of ``level``'s block."""
    if not len(level):
        return None
    last = list(level)[-1]
    value = level[last]
    if isinstance(value, CommentedMap) and len(value) and not value.fa.flow_style():
        return _tail(value)
    return level, last


def _trailing_comments(doc: CommentedMap) -> list[tuple[CommentedMap, CommentedMap, Any, Any]]:
    """Each comment that follows a block (blank lines, the next section's comments): the
    outermost block it closes, and the mapping and key ruamel keeps it on (the block's
    last line), so that it can follow the block's new last line after an edit."""
    found: list[tuple[CommentedMap, CommentedMap, Any, Any]] = []

    def walk(level: CommentedMap, ancestors: list[CommentedMap]) -> None:
        for key, value in level.items():
            token = _token(level, key)
            # a comment on any other line is that line's own (an end-of-line note)
            owner = next((a for a in [*ancestors, level] if _is_tail(a, level, key)), None)
            if token is not None and owner is not None:
                found.append((owner, level, key, token))
            if isinstance(value, CommentedMap):
                walk(value, [*ancestors, level])

    walk(doc, [])
    return found


def _is_tail(block: CommentedMap, level: CommentedMap, key: Any) -> bool:  # noqa: ANN401
    # by identity: two levels with equal content are still two places in the file
    tail = _tail(block)
    return tail is not None and tail[0] is level and tail[1] == key


def _token(level: CommentedMap, key: Any) -> Any:  # noqa: ANN401 - ruamel's CommentToken
    items = level.ca.items.get(key)
    return items[2] if items and len(items) > 2 else None


def _restore_trailing(trailing: list[tuple[CommentedMap, CommentedMap, Any, Any]]) -> None:
    for owner, holder, key, token in trailing:
        tail = _tail(owner)
        # gone on purpose (an alias now spelt out), or still where it belongs
        if _token(holder, key) is not token or tail is None or _is_tail(owner, holder, key):
            continue
        holder.ca.items[key][2] = None
        new_holder, new_key = tail
        new_holder.ca.items.setdefault(new_key, [None, None, None, None])[2] = token


def _detach_alias_comments(doc: CommentedMap) -> None:
    """ruamel gives each alias of an anchored value a copy of the comment that follows the
    anchor, and writes the value with the comment of whichever site it meets last. Drop
    the copies, so that the comment stays where it is in the file when the anchor's own
    level changes (or is replaced, and the first alias spells the value out)."""
    seen: dict[int, Any] = {}

    def walk(level: CommentedMap) -> None:
        for key, value in level.items():
            if getattr(getattr(value, "anchor", None), "value", None) is not None:
                token = _token(level, key)
                if id(value) not in seen:
                    seen[id(value)] = token
                elif token is not None and token is seen[id(value)]:
                    del level.ca.items[key]
            if isinstance(value, CommentedMap):
                walk(value)

    walk(doc)


def _write_checked(path: Path, text: str, suite: Suite, board: str,
                   suggestion: Suggestion) -> None:
    """Write ``text`` over ``path`` only once it loads and gives every case its planned
    limit; otherwise leave the file as it was and say why."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        tmp.write_text(text, encoding="utf-8")
        try:
            edited = load_thresholds(tmp, suite)
        except ThresholdsError as error:
            raise RuntimeError(f"{path}: the edited file would not load, left unchanged: "
                               f"{error}") from error
        for row in suggestion.rows:
            got = edited.lookup(board, row.series.flavour, row.series.scenario,
                                row.series.interval_us).get(row.metric)
            if got is None or got.value != row.new:
                raise RuntimeError(f"{path}: the edited file would give "
                                   f"{row.series.name(board)} {row.metric} "
                                   f"{got.value if got else None} rather than {row.new}; "
                                   "left unchanged")
    finally:
        tmp.unlink(missing_ok=True)
    write_atomic(path, text)
    # what is on disk now is what was checked
    load_thresholds(path, suite)


# ------------------------------------------------------------------------------ replay --


@attr.frozen
class Failure:
    """One figure of one stored case that the replayed thresholds fail."""

    figure: str
    cpu: int | None
    value: float | None
    what: str
    threshold: Threshold | None


@attr.frozen
class Judged:
    case: CaseRow
    failures: tuple[Failure, ...]

    @property
    def fails(self) -> bool:
        return bool(self.failures)

    @property
    def failed_then(self) -> bool:
        return self.case.verdict == "fail"


@attr.frozen
class Replay:
    label: str
    judged: tuple[Judged, ...]
    # why a group of cases could not be judged -> the cases
    unjudged: Mapping[str, tuple[CaseRow, ...]]
    functional: int

    @property
    def new_failures(self) -> list[Judged]:
        return [j for j in self.judged if j.fails and not j.failed_then]

    def markdown(self, max_rows: int | None = 200) -> str:
        failing = [j for j in self.judged if j.fails]
        lines = [f"### Replay of {self.label} on {len(self.judged)} stored measured "
                 f"case(s)", ""]
        if failing:
            header = ("case", "run", "date", "then", "figure", "value", "limit", "from")
            lines += [_md_row(header), _md_row(("---",) * len(header))]
            rows = [(j, f) for j in failing for f in _worst_per_figure(j.failures)]
            for judged, failure in rows[:max_rows]:
                case = judged.case
                limit = failure.threshold
                lines.append(_md_row((
                    case.name, _run_name(case), f"{case.started:%Y-%m-%d %H:%M}",
                    case.verdict, failure.figure + (f" (CPU{failure.cpu})"
                                                    if failure.cpu is not None else ""),
                    failure.what, format_us(limit.value) if limit else "-",
                    limit.source if limit else "-")))
            if max_rows is not None and len(rows) > max_rows:
                lines.append(f"\n… and {len(rows) - max_rows} more row(s).")
        else:
            lines.append(f"No stored measured case would fail {self.label}.")
        lines += ["", "#### Per case", ""]
        header = ("case", "runs", "would fail now", "failed then", "newly failing",
                  "newly passing")
        lines += [_md_row(header), _md_row(("---",) * len(header))]
        groups: dict[str, list[Judged]] = {}
        for judged in self.judged:
            groups.setdefault(judged.case.name, []).append(judged)
        for name, items in sorted(groups.items(), key=lambda g: _case_order(g[1][0].case)):
            lines.append(_md_row((
                name, str(len(items)), str(sum(j.fails for j in items)),
                str(sum(j.failed_then for j in items)),
                str(sum(j.fails and not j.failed_then for j in items)),
                str(sum(j.failed_then and not j.fails for j in items)))))
        if self.unjudged:
            lines += ["", "#### Not judged", ""]
            for why, cases in self.unjudged.items():
                names = sorted({c.name for c in cases})
                shown = ", ".join(names[:5]) + (f", … ({len(names)} cases)"
                                                if len(names) > 5 else "")
                lines.append(f"- {len(cases)} run(s) of {shown}: {why}")
        unjudged = sum(len(cases) for cases in self.unjudged.values())
        lines += ["", f"{sum(j.fails for j in self.judged)} of {len(self.judged)} case(s) "
                      f"would fail; {len(self.new_failures)} of them passed when they ran"
                  + (f"; {unjudged} not judged" if unjudged else "")
                  + (f"; {self.functional} functional rt-test run(s) have no limits to "
                     "replay" if self.functional else "") + "."]
        return "\n".join(lines) + "\n"


def _case_order(case: CaseRow) -> tuple[str, str, str, int]:
    # intervals by number: 100, 1000, 10000 µs
    return case.board, case.flavour, case.scenario or "", case.interval_us or 0


def _run_name(case: CaseRow) -> str:
    if case.pipeline_id:
        sha = f" @{case.commit_sha[:8]}" if case.commit_sha else ""
        return f"pipeline {case.pipeline_id}{sha}"
    return case.run_key


def _worst_per_figure(failures: Sequence[Failure]) -> list[Failure]:
    """One failure per figure: the worst CPU's (an unknown figure is the worst)."""
    worst: dict[str, Failure] = {}
    for failure in failures:
        held = worst.get(failure.figure)
        if held is None or (held.value is not None and (
                failure.value is None or failure.value > held.value)):
            worst[failure.figure] = failure
    return list(worst.values())


def judge(case: CaseRow, limits: Mapping[str, Threshold]) -> list[Failure]:
    """The stored case's figures judged like the suite judges them when it runs: per gated
    CPU (or rt-test thread) by :func:`rtlab.thresholds.check`, and a CPU that never woke up
    fails whatever the limits."""
    if case.kind == "rt-test":
        # these tools keep no histogram: a p99.9 they inherit is cyclictest's
        limits = {m: t for m, t in limits.items() if m != "p99_9_us"}
    failures: list[Failure] = []
    for cpu in case.cpus:
        if cpu.gated is False:
            continue
        where = cpu.cpu if cpu.cpu is not None else cpu.thread
        if cpu.no_wakeup:
            failures.append(Failure("no wake-up", where, None, "0 samples",
                                    limits.get("max_us")))
            continue
        for violation in check(_figures(case, cpu), limits, where if where is not None else 0):
            what = (format_us(violation.value) if violation.value is not None else
                    "past the histogram" if violation.figure in _figures(case, cpu) else
                    "not measured")
            failures.append(Failure(violation.figure, where, violation.value, what,
                                    violation.threshold))
    return failures


def _figures(case: CaseRow, cpu: CpuRow) -> dict[str, float | None]:
    figures: dict[str, float | None] = {"max": cpu.max_us, "avg": cpu.avg_us}
    # as at run time: a percentile only where there was a histogram to read it from
    if case.kind != "rt-test" and cpu.histogram_range_us is not None:
        figures["p99_9"] = cpu.p99_9_us
    return figures


def replay(session: Session, thresholds: Thresholds, *, label: str | None = None,
           board: str | None = None, flavour: str | None = None, ref: str | None = None,
           since: datetime.datetime | None = None) -> Replay:
    """Judge every stored measured case (of ``board``, ``flavour``, ``ref``, since ``since``)
    by ``thresholds``; a case the file cannot give limits to is listed with why."""
    cases = history(session, board=board, flavour=flavour, ref=ref, since=since,
                    verdicts=MEASURED)
    judged: list[Judged] = []
    unjudged: dict[str, list[CaseRow]] = {}
    functional = 0
    cache: dict[tuple[str, str, str | None, int | None], dict[str, Threshold] | str] = {}
    for case in cases:
        if case.kind == "functional" or (case.scenario is not None
                                         and _functional(case.scenario)):
            functional += 1
            continue
        key = (case.board, case.flavour, case.scenario, case.interval_us)
        if key not in cache:
            try:
                if case.scenario is None:
                    raise ThresholdsError(f"case '{case.name}' names no scenario")
                cache[key] = thresholds.lookup(*key)
            except ThresholdsError as error:
                cache[key] = str(error)
        limits = cache[key]
        if isinstance(limits, str):
            unjudged.setdefault(limits, []).append(case)
            continue
        judged.append(Judged(case, tuple(judge(case, limits))))
    return Replay(label or thresholds.display, tuple(judged),
                  {why: tuple(c) for why, c in unjudged.items()}, functional)


def thresholds_at(path: Path, git_ref: str | None, suite_path: Path | None,
                  workdir: Path) -> tuple[Path, Path | None, str]:
    """The thresholds file to replay (and the suite file to read it with, when the ref has
    one next to it): ``path`` itself, or its content at ``git_ref`` written into
    ``workdir``. Also the name to cite it by."""
    if git_ref is None:
        return path, suite_path, str(path)
    folder = path.resolve().parent
    out = workdir / path.name
    out.write_text(_git_show(folder, git_ref, path.name), encoding="utf-8")
    if suite_path is None:
        try:
            text = _git_show(folder, git_ref, "suite.yaml")
        except RuntimeError:
            text = None
        if text is not None:
            suite_path = workdir / "suite.yaml"
            suite_path.write_text(text, encoding="utf-8")
    return out, suite_path, f"{git_ref}:{path.name}"


def _git_show(folder: Path, ref: str, name: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(folder), "show", f"{ref}:./{name}"],
                              capture_output=True, text=True, check=False)
    except FileNotFoundError as error:
        raise RuntimeError("git is not installed: cannot read thresholds at a ref") from error
    if done.returncode != 0:
        raise RuntimeError(f"git show {ref}:./{name} in {folder}: "
                           f"{done.stderr.strip() or f'exit {done.returncode}'}")
    return done.stdout


def relabel(thresholds: Thresholds, label: str) -> Thresholds:
    """``thresholds`` citing its lines as ``label:LINE``: a file read from a git ref lives
    in a temporary folder whose name means nothing to a reviewer."""
    return attr.evolve(thresholds, display=label)
