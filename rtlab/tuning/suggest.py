"""``rtlab thresholds suggest``: limits proposed from the measured history in the results
store, written into ``thresholds.yaml`` (:mod:`rtlab.tuning.yamledit`).

How a limit is suggested, per case (board/flavour/scenario/interval, or board/flavour/tool
for an rt-test) and per metric the file gates there (``max_us`` always, ``avg_us`` and
``p99_9_us`` where set):

1. The baseline: the case's measured runs in the store (verdict pass or fail: an error or a
   skip has no figures worth trusting), optionally only those made for one ref (``--ref
   main``) and since a date (``--since``); of those, only the runs of the longest measured
   length (the stored ``duration_s``, within 10 % of the longest), and of those only the
   newest N (``--last``). A maximum grows with the number of wake-ups: an adaptive run
   that stopped after a minute and an hour's run are no samples of one figure, and a limit
   must hold for the longest runs the gate judges. The runs of other lengths are left out
   and counted: the table's "length" column, the notes under it and the ``reason:`` say
   how many, and of what length. (Runs without a recorded length count only when no run
   of the case has one.) A stray long run is left out with ``--since``.
2. Per run, the worst gated CPU's figure (:meth:`rtlab.store.query.CaseRow.worst`): max,
   avg or p99.9. A run where no CPU has the figure (none woke up) is left out; a p99.9 past
   the histogram's range is unknown and ranks above every known figure.
3. At least ``--min-runs`` (10) runs of that length, else the case is listed as "too few
   runs (N)" and keeps its limit (the shorter runs do not make up the number).
4. The ``--quantile`` (0.99) of those figures, taken as an observed value: the figure at
   position ceil(q·(n−1)) of the sorted list (numpy's "higher" method). Below 1 + 1/(1−q)
   runs (101 at 0.99) that is the maximum: too few runs to leave any out.
5. × ``--margin`` (1.2), rounded up to ``--figures`` (2) significant figures and a whole
   µs: 123 µs × 1.2 = 147.6 → 150 µs. That is the case's suggestion.

A cyclictest case's ``max_us`` is not the quantile of its maxima but what its share of
the pipeline's error budget allows (``--max-from exposure``, the default): every CPU's
wake-ups of its comparable runs pooled, the latency one of its runs exceeds with at most
the ``limits`` share of ``pipeline_false_fail`` over the pipeline's gated cases
(``--pipeline-cases``, else the newest record's count), at its upper
``exposure_confidence`` limit (:mod:`rtlab.tuning.tail_limit`), rounded up as above. A
series whose statistics do not gate (``statistics: {gating: false}``: an emulated board)
keeps the quantile rule, and the notes say so.
Where the exposure cannot vouch for a limit (the tail model would extrapolate too far,
or warns) the case keeps its limit and the table says why and how many more
board-hours would do. ``--max-from quantile`` keeps the rule above for max_us too.

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
:func:`rtlab.verdict.thresholds.load_thresholds` and give every case the planned limit before it
replaces the original; otherwise the original is left as it was.
"""

import datetime
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import attr
from ruamel.yaml.comments import CommentedMap
from sqlalchemy.orm import Session

from rtlab.measure.suite import Suite, load_suite
from rtlab.store.models import Case
from rtlab.store.query import CaseRow, history, series_query
from rtlab.tuning.evidence import (
    FIGURE_NAME,
    MEASURED,
    SAME_LENGTH,
    WHY_ONE_LENGTH,
    Budget,
    Evidence,
    Lengths,
    Method,
    Series,
    comparable,
    evidence,
    is_functional,
    length_range,
    md_row,
)
from rtlab.tuning.yamledit import (
    Node,
    apply_limits,
    dump,
    level_of,
    limit_above,
    line_of,
    node_name,
    round_trip_yaml,
    write_checked,
)
from rtlab.verdict.budget import ErrorBudget
from rtlab.verdict.thresholds import METRICS, Threshold, ThresholdsError, format_us, load_thresholds

DEFAULT_PIPELINE_CASES = 16
"""The gate tier's gated cases (4 latency cases × 4 test jobs) where no record says."""


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
    # per case with runs: their length, and the runs of other lengths left out
    lengths: Mapping[Series, Lengths] = attr.field(factory=dict)

    @property
    def left_out(self) -> int:
        """The runs left out for their length, of every case."""
        return sum(lengths.left_out for lengths in self.lengths.values())

    def markdown(self) -> str:
        lines = [f"### Suggested limits for {self.board} ({self.display})", "",
                 f"Baseline: the measured (pass/fail) runs of {self.baseline}. Method: "
                 f"{self.method.describe()}.", ""]
        header = ("case", "metric", "old", "new", "set at", "suggested", "runs", "length",
                  "dates", "new fails", "old failed", "false red per pipeline (old → new)")
        lines += [md_row(header), md_row(("---",) * len(header))]
        total_old = total_new = 0.0
        for row in self.rows:
            ev = row.evidence
            if ev.suggested is not None and ev.tail is not None:
                suggested = (f"{format_us(ev.suggested)} (upper "
                             f"{ev.tail.confidence:.0%} limit {format_us(ev.observed or 0)} "
                             f"at p = {ev.tail.per_wakeup:.2g} per wake-up)")
            elif ev.suggested is not None:
                suggested = (f"{format_us(ev.suggested)} ({ev.label} "
                             f"{format_us(ev.observed or 0)} × {self.method.margin:g})")
            else:
                suggested = ev.missing or "-"
            rates = [ev.false_red(limit) for limit in (row.old.value, row.new)]
            if rates[0] is not None and rates[1] is not None:
                total_old += rates[0]
                total_new += rates[1]
            rate = ("-" if rates[1] is None else
                    f"{'?' if rates[0] is None else f'{rates[0]:.2g}'} → {rates[1]:.2g}")
            changed = row.new != row.old.value
            # a level the edit wrote: a changed limit, or one kept on its own level
            where = row.where if changed or row.written else "unchanged"
            lines.append(md_row((
                row.series.name(self.board), row.metric,
                f"{format_us(row.old.value)} ({row.old.source})",
                format_us(row.new) if changed else "=", where, suggested, str(ev.runs),
                ev.lengths.cell() if ev.lengths is not None and ev.runs else "-",
                ev.dates(), str(ev.failures(row.new)) if ev.runs else "-",
                str(ev.failures(row.old.value)) if ev.runs else "-", rate)))
        if total_new or total_old:
            lines += ["", f"The max_us limits above imply a false red on unchanged kernels of "
                          f"{total_old:.2g} per pipeline before and {total_new:.2g} after, "
                          "counting these cases' limits alone, by their fitted tails "
                          "(docs/verdicts.md, \"One error budget\")."]
        left_out = {series: lengths for series, lengths in self.lengths.items()
                     if lengths.left_out}
        if left_out:
            lines += ["", f"Runs of one length: {WHY_ONE_LENGTH}, so each case's limits "
                          f"come from its runs of the longest measured length (within "
                          f"{SAME_LENGTH:.0%}). {self.left_out} run(s) of other lengths "
                          "left out:", ""]
            lines += [f"- {series.name(self.board)}: {lengths.explain()}"
                      for series, lengths in left_out.items()]
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
                lines.append(f"- `boards.{self.board}.{node_name(node)}`: {numbers}")
                reason, replaced = self.reasons[node]
                lines.append(f"  - reason: {reason}")
                if replaced:
                    lines.append(f"  - replaces: {replaced}")
        if self.notes:
            lines += ["", *[f"- {note}" for note in self.notes]]
        return "\n".join(lines) + "\n"


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
            today: datetime.date | None = None, write: bool = True,
            display: str | None = None) -> Suggestion:
    """Suggest limits for ``board`` (one flavour, or all it has) from the store's history,
    and with ``write`` edit ``thresholds_path`` to them (see the module docstring).
    ``display`` is the name the table cites the file by (a copy's name means nothing to a
    reviewer; default: its path in the repository)."""
    method = method or Method()
    suite = suite or load_suite()
    today = today or datetime.datetime.now(datetime.UTC).date()
    thresholds = load_thresholds(thresholds_path, suite)
    if display is not None:
        thresholds = attr.evolve(thresholds, display=display)
    flavours = list(thresholds.flavours(board))
    if flavour is not None:
        if flavour not in flavours:
            raise ThresholdsError(f"{thresholds.display}: board '{board}' has no flavour "
                                  f"'{flavour}' (valid: {', '.join(flavours)})")
        flavours = [flavour]
    original = thresholds_path.read_text(encoding="utf-8")
    yaml = round_trip_yaml()
    doc = yaml.load(original)
    board_node = doc["boards"][board]

    exposure = method.max_from == "exposure"
    cases = history(session, board=board, flavour=flavour, ref=ref, since=since,
                    verdicts=MEASURED, histograms=exposure)
    by_series: dict[Series, list[CaseRow]] = {}
    # runs that cannot tune anything here, by why: said, not silently dropped
    skipped: Counter[str] = Counter()
    for case in cases:
        if case.kind == "functional" or (case.scenario and is_functional(case.scenario)):
            continue
        if case.flavour not in flavours:
            skipped[f"flavour '{case.flavour}' is not in {thresholds.display}"] += 1
        elif case.scenario not in thresholds.scenarios:
            skipped[f"'{case.scenario}' is no scenario or rt-test of {suite.source}"] += 1
        else:
            by_series.setdefault(Series(case.flavour, case.scenario, case.interval_us),
                                 []).append(case)
    notes = [f"{count} run(s) not used: {why}" for why, count in skipped.items()]
    # one length per case, then the newest N of those: --last counts comparable runs
    durations = _durations(session, board=board, flavour=flavour, ref=ref, since=since)
    lengths: dict[Series, Lengths] = {}
    for series, runs in list(by_series.items()):
        runs, found = comparable(runs, durations)
        if last is not None:
            runs = runs[-last:]
        by_series[series] = runs
        lengths[series] = attr.evolve(found, used=len(runs))

    pipeline_cases = method.pipeline_cases
    if exposure and pipeline_cases is None:
        pipeline_cases, found_in = _pipeline_cases(session, board=board, flavour=flavour,
                                                   ref=ref, since=since)
        notes.append(found_in)
    # flavours whose statistics do not gate: max_us by the quantile rule, said so
    ungated: dict[str, str] = {}
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
                budget = None
                if exposure and metric == "max_us" and series.interval_us is not None:
                    # cyclictest's cases: their wake-ups pooled at the case's share, where
                    # the statistics gate (a board whose figures cannot be gated on, an
                    # emulated one, keeps the quantile rule, and the notes say so)
                    policy = thresholds.statistics(board, name, series.scenario,
                                                   series.interval_us)
                    assert pipeline_cases is not None
                    if policy.gating:
                        budget = Budget(ErrorBudget(policy.pipeline_false_fail,
                                                    pipeline_cases).limits,
                                        policy.exposure_confidence, durations, old.value)
                    else:
                        ungated.setdefault(name, policy.sources.get("gating", "?"))
                targets.append(_Target(series, evidence(by_series.get(series, []), metric,
                                                        method, lengths.get(series), budget),
                                       old.value))
            if not targets:
                continue

            def explicit(node: Node, metric: str = metric,
                         flavour_node: CommentedMap = flavour_node) -> float | None:
                level = level_of(flavour_node, node)
                return None if level is None else level.get(metric)

            above = limit_above(doc, board_node, metric)
            plan = _plan_metric(metric, targets, explicit, above, method.merge)

            def own(node: Node, plan: dict[Node, float] = plan,
                    explicit: Callable[[Node], float | None] = explicit) -> float | None:
                return plan.get(node, explicit(node))

            for node, value in plan.items():
                serves = tuple(t for t in targets if _setting_node(t.series, own) == node)
                level = level_of(flavour_node, node)
                line = line_of(level, metric)
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
                                new, node_name(setting) if setting else "board/defaults",
                                setting in plan))

    notes += [f"{board}/{name}: statistics gating is off ({where}): its max_us by the "
              "quantile rule, not the error budget" for name, where in ungated.items()]
    for node, parts in reason_parts.items():
        level = level_of(board_node["flavours"][node[0]], node)
        replaced = None
        if level is not None and isinstance(level.get("reason"), str):
            replaced = " ".join(str(level["reason"]).split())
        reasons[node] = (_reason(parts, today, method, baseline_text(ref, since, last)),
                         replaced)
    rows.sort(key=lambda r: (flavours.index(r.series.flavour),
                             _order(suite, r.series), METRICS.index(r.metric)))
    text = original
    if changes:
        apply_limits(doc, board_node, {(c.node, c.metric): c.new for c in changes},
                     {node: reason for node, (reason, _) in reasons.items()}, suite)
        text = dump(yaml, doc, original)
    suggestion = Suggestion(board, thresholds.display, method,
                            baseline_text(ref, since, last), tuple(rows), tuple(changes),
                            reasons, _compact(suite, without_runs, listed, by_series),
                            tuple(notes), text, original,
                            lengths={series: lengths[series]
                                     for series in sorted(lengths, key=lambda s: (
                                         flavours.index(s.flavour), _order(suite, s)))})
    if write and changes:
        write_checked(thresholds_path, text, suite, board,
                      [(row.series, row.metric, row.new) for row in rows])
        suggestion = attr.evolve(suggestion, written=True)
    return suggestion


def _pipeline_cases(session: Session, *, board: str, flavour: str | None, ref: str | None,
                    since: datetime.datetime | None) -> tuple[int, str]:
    """The pipeline's gated case count the newest stored record of the board names
    (rtlab.verdict.case.CasePlan.facts), and where it came from; DEFAULT_PIPELINE_CASES
    where none does, said so."""
    query = series_query(board=board, flavour=flavour, ref=ref, since=since,
                         verdicts=MEASURED).order_by(None).order_by(
        Case.started.desc(), Case.id.desc()).with_only_columns(Case.record).limit(200)
    for (record,) in session.execute(query):
        cases = record.get("pipeline_cases") if isinstance(record, dict) else None
        if isinstance(cases, int) and not isinstance(cases, bool) and cases >= 1:
            return cases, (f"max_us at the share of a pipeline of {cases} gated cases (the "
                           "newest stored record's pipeline_cases; --pipeline-cases to set)")
    return DEFAULT_PIPELINE_CASES, (
        f"max_us at the share of a pipeline of {DEFAULT_PIPELINE_CASES} gated cases: no "
        "stored record names its pipeline's count (--pipeline-cases to set)")


def _durations(session: Session, *, board: str, flavour: str | None, ref: str | None,
               since: datetime.datetime | None) -> dict[int, object]:
    """The stored length (``duration_s``, as measured) of every case the history read,
    by the case's id: one narrow query over the same filter rather than a column more on
    every row the other readers of the store get."""
    query = series_query(board=board, flavour=flavour, ref=ref, since=since,
                         verdicts=MEASURED).with_only_columns(Case.id, Case.duration_s)
    return {case_id: duration for case_id, duration in session.execute(query)}


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
    series += [Series(flavour, tool, None) for tool in suite.rt_tests if not is_functional(tool)]
    series += [s for s in by_series if s.flavour == flavour and s not in series]
    return sorted(series, key=lambda s: _order(suite, s))


def _order(suite: Suite, series: Series) -> tuple[int, int]:
    names = [*suite.scenarios, *suite.rt_tests]
    position = names.index(series.scenario) if series.scenario in names else len(names)
    return position, series.interval_us or 0


def _reason(parts: list[tuple[str, Change]], today: datetime.date, method: Method,
            baseline: str) -> str:
    """The ``reason:`` of a level the edit changed: the data and the arithmetic, so that
    the file itself says where each number came from."""
    tuned: list[str] = []
    kept: list[str] = []
    # the runs of each case (the same runs give every metric its figure)
    runs: dict[Series, int] = {}
    lengths: dict[Series, Lengths] = {}
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
            if target.evidence.lengths is not None:
                lengths[target.series] = target.evidence.lengths
            if target.evidence.first is not None and target.evidence.last is not None:
                first = min(first or target.evidence.first, target.evidence.first)
                last = max(last or target.evidence.last, target.evidence.last)
        # the value is the highest suggestion among the cases it serves: name whose
        top = source[0]
        where = f" ({top.series.short()})" if len(served) > 1 else ""
        if top.evidence.tail is not None:
            tuned.append(f"{metric}{where}: {top.evidence.tail.describe()} → "
                         f"{format_us(change.new)}")
            continue
        tuned.append(f"{metric} {top.evidence.label} of worst-CPU {FIGURE_NAME[metric]} "
                     f"{format_us(top.evidence.observed or 0)}{where} × {method.margin:g} "
                     f"→ {format_us(change.new)}")
    if not tuned:
        return (f"kept {today:%Y-%m-%d} by rtlab thresholds suggest when the limit above "
                f"changed: {'; '.join(kept)}.")
    dates = f", {first:%Y-%m-%d}..{last:%Y-%m-%d}" if first and last else ""
    of = f" of {len(runs)} cases" if len(runs) > 1 else ""
    return (f"suggested {today:%Y-%m-%d} from {sum(runs.values())} runs{of} "
            f"({baseline}{dates}{_lengths_text(lengths.values())}): "
            + "; ".join(tuned + kept) + ".")


def _lengths_text(cases: Iterable[Lengths]) -> str:
    """How long the runs a reason cites were, and how many of other lengths it left out:
    ", runs of 60 min, 40 of other lengths left out"."""
    lengths = list(cases)
    known = sorted({length.length_s for length in lengths if length.length_s is not None})
    text = ""
    if known:
        span = length_range(known[0], known[-1])
        text = (f", runs of {span}" if ".." not in span
                else f", each case's longest runs ({span})")
    left_out = sum(length.left_out for length in lengths)
    if left_out:
        text += f", {left_out} of other lengths left out"
    return text
