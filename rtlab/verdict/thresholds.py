"""The latency gate's limits (``thresholds.yaml``) and judging measured figures by them.

Limits are inherited down ``defaults`` → ``boards.<board>`` → ``flavours.<flavour>`` →
``scenarios.<scenario>`` → ``intervals.<interval_us>``: a level sets only what differs from the
level above. Every limit carries the file and line it came from and the nearest ``reason``,
so a failed gate says which reviewed line it failed against and why that line says so.

A flavour is ``std`` or ``rt`` (Debian's stock and RT kernels, the pipeline's two series)
or a flavour of ``kernel/flavours.yaml`` (``preempt-none`` … ``preempt-rt-hardened``), so
that each kernel a campaign builds can be judged by limits of its own; a name that is
neither is an error with its line, since a misspelt flavour would never be looked up.

A level may also set ``statistics:``, the policy of the statistical verdicts of
:mod:`rtlab.verdict.tail` and :mod:`rtlab.verdict.comparison` (the exceedance probability of
the tail bound, the quantile of the regression test, whether either may fail the case,
and the confidence of a kernel's pooled exposure bound, :mod:`rtlab.store.exposure`); its
keys are inherited one by one like the limits. :meth:`Thresholds.statistics` resolves it.
"""

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attr
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import MarkedYAMLError

from rtlab.kernel.spec import THRESHOLDS_FLAVOURS, load_flavours
from rtlab.measure.rttests import TESTS
from rtlab.measure.suite import Suite, load_suite
from rtlab.util.paths import REPO_ROOT, repo_display
from rtlab.util.yamlfile import line_of

DEFAULT_PATH = REPO_ROOT / "thresholds.yaml"
METRICS = ("max_us", "avg_us", "p99_9_us")
# measured figure name -> the metric that limits it
FIGURES = {"max": "max_us", "avg": "avg_us", "p99_9": "p99_9_us"}
REASON = "reason"
# provisional: why a level's limits were not measured on this lab's boards (a published
# figure, another board): a failure against one says so and names the tuning command
PROVISIONAL = "provisional"
STATISTICS = "statistics"
# trace: true keeps the kernel's trace of a breach of max_us (rtlab.measure.trace)
TRACE = "trace"
# the statistics keys and their values where no level sets them (docs/verdicts.md): a
# regression against an eligible baseline, or a tail bound confidently above max_us, fails
# the case; an early decision needs 10 passing runs of the same length from 2 boots at least
# (bench/adaptive_quality.py); a gate tier's unchanged kernels fail 1 pipeline in 100; a
# kernel's pooled exposure bounds its rate of exceedances of max_us at 95 % confidence
STATISTICS_DEFAULTS: Mapping[str, float | bool | int] = {
    "exceedance_probability": 1e-6,
    "quantile": 0.999,
    "gating": True,
    "baseline_runs": 10,
    "baseline_boots": 2,
    "pipeline_false_fail": 0.01,
    "exposure_confidence": 0.95,
}
# the keys that count runs or boots, and the least each may be: a baseline of two runs
# knows its spread to one degree of freedom, whose fiducial draws overflow the comparison
# (rtlab.verdict.comparison.compare) and leave it undecided (bench/adaptive_quality.py)
_COUNT_KEYS = {"baseline_runs": 3, "baseline_boots": 1}
# the level below each level, by the key that holds it
_CHILDREN = {"board": "flavours", "flavour": "scenarios", "scenario": "intervals"}
_BELOW = {"board": "flavour", "flavour": "scenario", "scenario": "interval"}
# what a threshold may limit for the other rt-tests: they run without an interval and keep
# no histogram; priority inheritance tools give a functional verdict, nothing to limit
_TOOL_METRICS = {"rt-test": ("max_us", "avg_us"), "functional rt-test": ()}


class ThresholdsError(ValueError):
    """A bad thresholds file or a lookup it cannot answer; file errors start ``file:line:``."""


@attr.frozen
class Threshold:
    metric: str
    value: float
    # "thresholds.yaml:42", the line that set the value
    source: str
    # the reason given on that level or, failing that, the nearest level above it
    reason: str | None
    # the level that set it, e.g. "boards.imx6q.flavours.rt.scenarios.cpu100"
    level: str = ""
    # why the level that set it calls it provisional (not measured on this lab's boards)
    provisional: str | None = None

    def cite(self) -> str:
        """Where the limit comes from, as a failure quotes it: its line, its reason, and
        what to do where it is provisional."""
        cited = f"{self.source}: {self.reason}" if self.reason else self.source
        if self.provisional is None:
            return cited
        names = self.level.split(".")
        board = names[1] if len(names) > 1 and names[0] == "boards" else "BOARD"
        return (f"{cited}; a provisional limit ({self.provisional}): set it from this "
                f"lab's own runs with `rtlab thresholds suggest --board {board}`")

    def set_for(self, scenario: str) -> bool:
        """Whether the scenario's own entry (or an interval below it) set this limit,
        rather than a level above it."""
        names = self.level.split(".")
        return any(key == "scenarios" and name == scenario
                   for key, name in zip(names, names[1:], strict=False))


@attr.frozen
class Violation:
    cpu: int
    figure: str
    # None when the figure is unknown (not measured, or past the histogram's range)
    value: float | None
    threshold: Threshold
    message: str

    def __str__(self) -> str:
        return self.message


@attr.frozen
class StatisticsPolicy:
    """How the statistical verdicts of :mod:`rtlab.verdict.tail` and
    :mod:`rtlab.verdict.comparison` apply to one measurement."""

    # the per-wake-up probability at which the tail bound is reported
    exceedance_probability: float = float(STATISTICS_DEFAULTS["exceedance_probability"])
    # the tail quantile the regression test compares with the baseline (and the decades
    # above it that the runs are long enough for: rtlab.verdict.comparison.compare_tail)
    quantile: float = float(STATISTICS_DEFAULTS["quantile"])
    # True: a regression against an eligible baseline, or a tail bound whose lower
    # confidence limit is above max_us, fails the case; False: both are reported beside
    # the limits, which stay the gate
    gating: bool = bool(STATISTICS_DEFAULTS["gating"])
    # an eligible baseline (rtlab.verdict.baseline): at least this many passing runs of
    # the same options and length, from at least this many boots
    baseline_runs: int = int(STATISTICS_DEFAULTS["baseline_runs"])
    baseline_boots: int = int(STATISTICS_DEFAULTS["baseline_boots"])
    # the chance that a pipeline whose gated cases are all unchanged fails on a false
    # regression: shared out over the pipeline's cases (rtlab.verdict.case.case_confidence)
    pipeline_false_fail: float = float(STATISTICS_DEFAULTS["pipeline_false_fail"])
    # "thresholds.yaml:42" for each key a level set; a key missing here took its default
    sources: Mapping[str, str] = attr.field(factory=dict, hash=False)
    # the confidence of the upper bound on a kernel's rate of exceedances of max_us, from
    # every stored run of it on one board type under one load (rtlab.store.exposure);
    # after ``sources`` so that the fields before keep their positions
    exposure_confidence: float = float(STATISTICS_DEFAULTS["exposure_confidence"])


@attr.frozen
class _Level:
    where: str
    line: int
    metrics: Mapping[str, tuple[float, int]]
    reason: str | None
    children: Mapping[Any, "_Level"]
    # statistics key -> (value, line)
    statistics: Mapping[str, tuple[float | bool | int, int]] = attr.field(factory=dict)
    # trace: (value, line), when the level sets it
    trace: tuple[bool, int] | None = None
    # why its limits are provisional (PROVISIONAL), when it says so
    provisional: str | None = None


@attr.frozen
class TracePolicy:
    """Whether a case keeps the kernel's trace of a breach of its max_us, and the
    ``thresholds.yaml:LINE`` that says so (None: no level sets it, so no trace)."""

    enabled: bool = False
    source: str | None = None


@attr.frozen
class Thresholds:
    display: str
    defaults: _Level
    boards: Mapping[str, _Level]
    scenarios: tuple[str, ...]

    def flavours(self, board: str) -> tuple[str, ...]:
        return tuple(self._board(board).children)

    def lookup(self, board: str, flavour: str, scenario: str,
               interval_us: int | None = None) -> dict[str, Threshold]:
        """The limits for one measurement, by metric. A scenario or interval the file does not
        name inherits from the level above; an unknown board or flavour is an error, since
        a gate that silently falls back to defaults for a new board checks nothing."""
        return _resolve(self.display, self._path(board, flavour, scenario, interval_us))

    def statistics(self, board: str, flavour: str, scenario: str,
                   interval_us: int | None = None) -> StatisticsPolicy:
        """The statistics policy for one measurement, each key from the nearest level that
        sets it (see :data:`STATISTICS_DEFAULTS` for the rest); errors as :meth:`lookup`."""
        path = self._path(board, flavour, scenario, interval_us)
        values: dict[str, float | bool | int] = dict(STATISTICS_DEFAULTS)
        sources = {}
        for key in STATISTICS_DEFAULTS:
            for level in reversed(path):
                if key in level.statistics:
                    values[key], line = level.statistics[key]
                    sources[key] = f"{self.display}:{line}"
                    break
        return StatisticsPolicy(
            exceedance_probability=float(values["exceedance_probability"]),
            quantile=float(values["quantile"]), gating=bool(values["gating"]),
            baseline_runs=int(values["baseline_runs"]),
            baseline_boots=int(values["baseline_boots"]),
            pipeline_false_fail=float(values["pipeline_false_fail"]), sources=sources,
            exposure_confidence=float(values["exposure_confidence"]),
        )

    def trace(self, board: str, flavour: str, scenario: str,
              interval_us: int | None = None) -> TracePolicy:
        """Whether the measurement keeps a trace of a breach: the nearest level that sets
        ``trace:``; errors as :meth:`lookup`."""
        for level in reversed(self._path(board, flavour, scenario, interval_us)):
            if level.trace is not None:
                value, line = level.trace
                return TracePolicy(value, f"{self.display}:{line}")
        return TracePolicy()

    def _path(self, board: str, flavour: str, scenario: str,
              interval_us: int | None) -> list[_Level]:
        board_level = self._board(board)
        flavour_level = board_level.children.get(flavour)
        if flavour_level is None:
            raise ThresholdsError(
                f"{self.display}: board '{board}' has no flavour '{flavour}' "
                f"(valid: {', '.join(board_level.children)})"
            )
        if scenario not in self.scenarios:
            raise ThresholdsError(f"unknown scenario '{scenario}' "
                                  f"(valid: {', '.join(self.scenarios)})")
        path = [self.defaults, board_level, flavour_level]
        scenario_level = flavour_level.children.get(scenario)
        if scenario_level is not None:
            path.append(scenario_level)
            interval_level = scenario_level.children.get(interval_us)
            if interval_level is not None:
                path.append(interval_level)
        return path

    def _board(self, board: str) -> _Level:
        try:
            return self.boards[board]
        except KeyError:
            raise ThresholdsError(
                f"{self.display}: no board '{board}' (valid: {', '.join(self.boards)})"
            ) from None


def _resolve(display: str, path: list[_Level]) -> dict[str, Threshold]:
    result = {}
    for metric in METRICS:
        for depth in range(len(path) - 1, -1, -1):
            if metric in path[depth].metrics:
                value, line = path[depth].metrics[metric]
                reason = next(
                    (level.reason for level in reversed(path[: depth + 1]) if level.reason),
                    None,
                )
                result[metric] = Threshold(metric, value, f"{display}:{line}", reason,
                                           path[depth].where, path[depth].provisional)
                break
    return result


@attr.frozen
class Coverage:
    """What one board's flavours resolve to over every case a suite can run."""

    cases: int
    """Board × flavour × scenario × interval, and × rt-test, each resolved to limits."""
    provisional: Mapping[str, str]
    """Flavour -> the first provisional limit's reason (not measured on this lab's boards)."""


def coverage(thresholds: Thresholds, suite: Suite, board: str,
             flavours: tuple[str, ...] | None = None) -> Coverage:
    """Resolve every case ``suite`` can run on ``board`` in ``flavours`` (default: the
    board's own); a case without limits raises ThresholdsError, naming the file and line."""
    provisional: dict[str, str] = {}
    cases = 0
    for flavour in thresholds.flavours(board) if flavours is None else flavours:
        for scenario in suite.scenarios:
            for interval in suite.intervals_us:
                for limit in thresholds.lookup(board, flavour, scenario, interval).values():
                    if limit.provisional:
                        provisional.setdefault(flavour, limit.provisional)
                cases += 1
        for tool in suite.rt_tests:
            thresholds.lookup(board, flavour, tool)
            cases += 1
    return Coverage(cases, provisional)


def known_flavours() -> tuple[str, ...]:
    """The flavours a thresholds file may name: Debian's two and kernel/flavours.yaml's."""
    return (*THRESHOLDS_FLAVOURS, *load_flavours())


def load_thresholds(path: Path | None = None, suite: Suite | None = None,
                    flavours: tuple[str, ...] | None = None) -> Thresholds:
    """Load and validate a thresholds file (the repository's ``thresholds.yaml`` by
    default) for ``suite``, whose scenarios and rt-tests are the names the file may use
    (default: the repository's suite file), and ``flavours``, the flavour names it may use
    (default: :func:`known_flavours`). Every error names the file and line."""
    path = DEFAULT_PATH if path is None else path
    suite = load_suite() if suite is None else suite
    flavours = known_flavours() if flavours is None else flavours
    scenarios = (*suite.scenarios, *suite.rt_tests)
    tools = {name: "functional rt-test" if TESTS[name].functional else "rt-test"
             for name in suite.rt_tests}
    display = repo_display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ThresholdsError(f"{display}: cannot read: {error.strerror}") from error
    try:
        doc = YAML(typ="rt").load(text)
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else 0
        raise ThresholdsError(f"{display}:{line}: invalid YAML: {error.problem}") from error
    return _Loader(display, scenarios, tools, flavours).top(doc)


@attr.frozen
class _Loader:
    display: str
    scenarios: tuple[str, ...]
    tools: Mapping[str, str]
    """The rt-tests among ``scenarios``, by name: their kind of level."""
    flavours: tuple[str, ...] = THRESHOLDS_FLAVOURS
    """The flavour names a board may list."""

    def error(self, line: int, what: str) -> ThresholdsError:
        return ThresholdsError(f"{self.display}:{line}: {what}")

    def top(self, doc: object) -> Thresholds:
        if doc is None:
            raise self.error(1, "the file is empty")
        if not isinstance(doc, CommentedMap):
            raise self.error(1, "expected a mapping with 'defaults' and 'boards'")
        self.known_keys(doc, ("defaults", "boards"))
        defaults = self.level(doc, "defaults", "defaults", "defaults", required=False)
        boards_node = doc.get("boards")
        if not isinstance(boards_node, CommentedMap) or not boards_node:
            raise self.error(line_of(doc, "boards") if "boards" in doc else 1,
                             "'boards' must be a mapping of at least one board")
        boards = {}
        for name in boards_node:
            self.name(boards_node, name, "board")
            boards[name] = self.level(boards_node, name, "board", f"boards.{name}")
        thresholds = Thresholds(self.display, defaults, boards, self.scenarios)
        # a board/flavour without max_us anywhere on its path would pass any latency
        for board, level in boards.items():
            for flavour, flavour_level in level.children.items():
                if "max_us" not in _resolve(self.display, [defaults, level, flavour_level]):
                    raise self.error(flavour_level.line,
                                     f"no max_us for board '{board}' flavour '{flavour}' "
                                     "(set it here, on the board or in defaults)")
        return thresholds

    def level(self, parent: CommentedMap, key: Any, kind: str, where: str,  # noqa: ANN401
              required: bool = True) -> _Level:
        line = line_of(parent, key)
        node = parent.get(key)
        if node is None and not required:
            return _Level(where, line, {}, None, {})
        if not isinstance(node, CommentedMap):
            raise self.error(line, f"{where} must be a mapping, got {_type_name(node)}")
        child_key = _CHILDREN.get(kind)
        allowed_metrics = _TOOL_METRICS.get(kind, METRICS)
        if kind in _TOOL_METRICS:
            child_key = None
            for key in node:
                if key not in (*allowed_metrics, REASON, PROVISIONAL):
                    raise self.error(line_of(node, key), self.not_for_tool(key, kind, where))
        allowed = (*allowed_metrics, REASON, PROVISIONAL,
                   *([child_key] if child_key else []),
                   *([] if kind in _TOOL_METRICS else [STATISTICS, TRACE]))
        self.known_keys(node, allowed)
        metrics = {}
        for metric in allowed_metrics:
            if metric in node:
                metrics[metric] = (self.metric(node, metric, where), line_of(node, metric))
        reason = None
        if REASON in node:
            reason = node[REASON]
            if not isinstance(reason, str) or not reason.strip():
                raise self.error(line_of(node, REASON),
                                 f"{where}.reason must be a non-empty string")
            reason = " ".join(reason.split())
        provisional = None
        if PROVISIONAL in node:
            provisional = node[PROVISIONAL]
            if not isinstance(provisional, str) or not provisional.strip():
                raise self.error(line_of(node, PROVISIONAL),
                                 f"{where}.{PROVISIONAL} must say why, as a non-empty string "
                                 f"(not measured on this lab's boards: where from?), got "
                                 f"{provisional!r}")
            provisional = " ".join(provisional.split())
        children: dict[Any, _Level] = {}
        if child_key is not None:
            children = self.children(node, child_key, kind, where, line)
        statistics = self.statistics(node, where) if STATISTICS in node else {}
        trace = None
        if TRACE in node:
            if not isinstance(node[TRACE], bool):
                raise self.error(line_of(node, TRACE), f"{where}.{TRACE} must be true or "
                                 f"false, got {node[TRACE]!r}")
            trace = (node[TRACE], line_of(node, TRACE))
        return _Level(where, line, metrics, reason, children, statistics, trace, provisional)

    def statistics(self, node: CommentedMap,
                   where: str) -> dict[str, tuple[float | bool | int, int]]:
        mapping = node[STATISTICS]
        where = f"{where}.{STATISTICS}"
        if not isinstance(mapping, CommentedMap):
            raise self.error(line_of(node, STATISTICS), f"{where} must be a mapping of "
                             f"{', '.join(STATISTICS_DEFAULTS)}, got {_type_name(mapping)}")
        for key in mapping:
            if key not in STATISTICS_DEFAULTS:
                raise self.error(line_of(mapping, key), f"unknown key {key!r} in {where} "
                                 f"(expected one of: {', '.join(sorted(STATISTICS_DEFAULTS))})")
        result: dict[str, tuple[float | bool | int, int]] = {}
        for key in mapping:
            value = mapping[key]
            line = line_of(mapping, key)
            if key == "gating":
                if not isinstance(value, bool):
                    raise self.error(line, f"{where}.gating must be true or false, got "
                                     f"{value!r}")
                result[key] = (value, line)
                continue
            if key in _COUNT_KEYS:
                least = _COUNT_KEYS[key]
                if not isinstance(value, int) or isinstance(value, bool) or value < least:
                    raise self.error(line, f"{where}.{key} must be a whole number >= {least}, "
                                     f"got {value!r}")
                result[key] = (value, line)
                continue
            # a probability of 0 or 1 would ask for a bound at no tail or the whole run
            if (not isinstance(value, int | float) or isinstance(value, bool)
                    or not 0 < value < 1):
                raise self.error(line, f"{where}.{key} must be a probability between 0 and "
                                 f"1 (both excluded), got {value!r}")
            result[key] = (float(value), line)
        return result

    def children(self, node: CommentedMap, child_key: str, kind: str, where: str,
                 line: int) -> dict[Any, _Level]:
        below = _BELOW[kind]
        if child_key not in node:
            if kind == "board":
                raise self.error(line, f"board '{where.split('.')[-1]}' has no flavours")
            return {}
        mapping = node[child_key]
        if not isinstance(mapping, CommentedMap) or (kind == "board" and not mapping):
            raise self.error(line_of(node, child_key),
                             f"{where}.{child_key} must be a mapping of {below}s")
        result = {}
        for name in mapping:
            if below == "interval":
                self.interval(mapping, name)
            else:
                self.name(mapping, name, below)
            # a misspelt scenario would never match and its limits would silently not apply
            if below == "scenario" and name not in self.scenarios:
                raise self.error(line_of(mapping, name), f"unknown scenario {name!r} "
                                 f"(expected one of: {', '.join(self.scenarios)})")
            if below == "flavour" and name not in self.flavours:
                raise self.error(line_of(mapping, name), f"unknown flavour {name!r} "
                                 f"(expected one of: {', '.join(self.flavours)})")
            result[name] = self.level(mapping, name, self.tools.get(name, below),
                                      f"{where}.{child_key}.{name}")
        return result

    @staticmethod
    def not_for_tool(key: object, kind: str, where: str) -> str:
        tool = where.split(".")[-1]
        if kind == "functional rt-test":
            return (f"{where}: {tool} gives a functional verdict (priority inheritance "
                    f"worked or not), so it takes no {key!r}; only 'reason'")
        if key == "intervals":
            return (f"{where}: {tool} runs at one interval of its own, so it takes no "
                    "'intervals'; set max_us or avg_us here")
        if key == TRACE:
            return (f"{where}: {tool} cannot stop the kernel's trace on a breach (only "
                    "cyclictest's --breaktrace can); trace applies to cyclictest scenarios")
        return (f"{where}: {key!r} cannot be judged for {tool} (it keeps no histogram); "
                "only max_us, avg_us and reason")

    def metric(self, node: CommentedMap, metric: str, where: str) -> float:
        value = node[metric]
        if (not isinstance(value, int | float) or isinstance(value, bool)
                or not math.isfinite(value)):
            raise self.error(line_of(node, metric),
                             f"{where}.{metric} must be a number of µs, got {value!r}")
        if value <= 0:
            raise self.error(line_of(node, metric),
                             f"{where}.{metric} must be greater than 0, got {value}")
        return int(value) if float(value).is_integer() else float(value)

    def known_keys(self, node: CommentedMap, allowed: tuple[str, ...]) -> None:
        for key in node:
            if key not in allowed:
                raise self.error(line_of(node, key), f"unknown key {key!r} "
                                 f"(expected one of: {', '.join(sorted(allowed))})")

    def name(self, node: CommentedMap, key: object, kind: str) -> None:
        if not isinstance(key, str) or not key:
            raise self.error(line_of(node, key), f"{kind} name must be a string, got {key!r}")

    def interval(self, node: CommentedMap, key: object) -> None:
        if not isinstance(key, int) or isinstance(key, bool):
            raise self.error(line_of(node, key),
                             f"interval must be an integer number of µs, got {key!r}")
        if key <= 0:
            raise self.error(line_of(node, key), f"interval must be greater than 0, got {key}")


def _type_name(node: object) -> str:
    return "nothing" if node is None else type(node).__name__


def check(figures: Mapping[str, float | None], thresholds: Mapping[str, Threshold],
          cpu: int) -> list[Violation]:
    """Judge one CPU's figures (µs, keyed ``max``/``avg``/``p99_9``) by the limits of
    :meth:`Thresholds.lookup`. A limit whose figure is missing or None (a percentile past
    the histogram's range) is a violation too: a gate passes only what it has seen."""
    for figure in figures:
        if figure not in FIGURES:
            raise ValueError(f"unknown figure '{figure}' (valid: {', '.join(FIGURES)})")
    violations = []
    for figure, metric in FIGURES.items():
        threshold = thresholds.get(metric)
        if threshold is None:
            continue
        value = figures.get(figure)
        limit = f"{metric} {format_us(threshold.value)}"
        if figure not in figures:
            what = f"CPU{cpu} {figure} not measured, but {limit} needs it"
        elif value is None:
            what = f"CPU{cpu} {figure} past the histogram's range, so {limit} is not shown"
        elif value > threshold.value:
            what = f"CPU{cpu} {figure} {format_us(value)} > {limit}"
        else:
            continue
        violations.append(Violation(cpu, figure, value, threshold,
                                    f"{what} ({threshold.cite()})"))
    return violations


def format_us(value: float) -> str:
    """A figure in µs as people write it: "150 µs", "20.25 µs"."""
    if float(value).is_integer():
        return f"{int(value)} µs"
    return f"{value:.2f} µs"
