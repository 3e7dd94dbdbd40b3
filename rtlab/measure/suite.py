"""The suite file (``suite.yaml``): which scenarios, intervals and rt-tests run on a board.

Validated on load, every complaint with file:line, because a misspelt scenario or load that
were silently skipped would leave a board untested while CI reports green.
"""

from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import attr
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from rtlab.measure.conditions import REQUIREMENT_KEYS, Requirements, requirement_value
from rtlab.measure.loads import KINDS, LoadPart, make_load
from rtlab.util.paths import REPO_ROOT
from rtlab.util.yamlfile import YamlFileError, line_of, load_yaml

DEFAULT_PATH = REPO_ROOT / "suite.yaml"
# the tier every suite has: every scenario × interval and every rt-test
FULL_TIER = "full"
RT_TESTS = ("pi_stress", "pip_stress", "ptsematest", "pmqtest", "sigwaittest", "signaltest",
            "oslat")


class SuiteFileError(YamlFileError):
    """A bad suite file; the message starts with ``file:line:``."""


# where cyclictest measures: every CPU, or only those the kernel isolates (isolcpus=)
CPU_CHOICES = ("all", "isolated")


@attr.frozen
class Scenario:
    name: str
    loads: tuple[LoadPart, ...]
    cpus: str = "all"
    """One of :data:`CPU_CHOICES`."""
    requirements: tuple[tuple[str, Any], ...] = ()
    """The requirements this scenario sets (``requirements:``), over the suite's and the
    board's."""

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(part.kind for part in self.loads)

    def settings(self) -> dict[str, dict[str, Any]]:
        """The loads with their settings, as a result record keeps them."""
        return {part.kind: {name: value
                            for name, value in attr.asdict(part, recurse=False).items()
                            if name != "traffic"}
                for part in self.loads}


@attr.frozen
class BoardOverride:
    """Load settings that differ on the boards whose tag matches ``pattern``."""

    pattern: str
    loads: Mapping[str, Mapping[str, Any]]
    where: str
    """file:line of the override, named when it does not fit a load."""


@attr.frozen
class RequirementsOverride:
    """Requirements that differ on the boards whose tag matches ``pattern``
    (``requirements.boards``), validated."""

    pattern: str
    changes: tuple[tuple[str, Any], ...]


@attr.frozen
class Suite:
    source: str
    intervals_us: tuple[int, ...]
    histogram_us: int
    priority: int
    scenarios: dict[str, Scenario]
    rt_tests: tuple[str, ...]
    board_overrides: tuple[BoardOverride, ...] = ()
    tiers: Mapping[str, "Cases"] = attr.field(factory=dict)
    """Named sets of cases (``tiers:``); :data:`FULL_TIER` is the whole matrix."""
    requirements: Requirements = Requirements()
    """What a run must have been to count (``requirements:``), before any board's."""
    requirement_overrides: tuple[RequirementsOverride, ...] = ()

    def for_board(self, board: str) -> "Suite":
        """The suite as it runs on ``board`` (a board tag): the first override whose
        pattern matches replaces the settings it names in every scenario's loads, and the
        first of ``requirements.boards`` that matches the requirements it names."""
        override = next((o for o in self.board_overrides if fnmatchcase(board, o.pattern)),
                        None)
        required = self._requirements_override(board)
        if override is None and required is None:
            return self
        scenarios = self.scenarios if override is None else {
            name: attr.evolve(sc, loads=tuple(_overridden(part, override)
                                             for part in sc.loads))
            for name, sc in self.scenarios.items()
        }
        return attr.evolve(self, scenarios=scenarios, board_overrides=(),
                           requirements=self.requirements_for(board),
                           requirement_overrides=())

    def requirements_for(self, board: str, scenario: str | None = None) -> Requirements:
        """The requirements of a case: the suite's, then the first of
        ``requirements.boards`` that matches ``board``, then the scenario's own."""
        result = self.requirements
        override = self._requirements_override(board)
        if override is not None:
            result = result.changed(dict(override.changes))
        if scenario is not None:
            result = result.changed(dict(self.scenario(scenario).requirements))
        return result

    def _requirements_override(self, board: str) -> RequirementsOverride | None:
        return next((o for o in self.requirement_overrides if fnmatchcase(board, o.pattern)),
                    None)

    def scenario(self, name: str) -> Scenario:
        try:
            return self.scenarios[name]
        except KeyError:
            raise ValueError(f"{self.source}: no scenario {name!r} "
                             f"(valid: {', '.join(self.scenarios)})") from None

    def tier(self, name: str) -> "Cases | None":
        """The cases of a tier; None for :data:`FULL_TIER`, the whole matrix."""
        if name == FULL_TIER:
            return None
        try:
            return self.tiers[name]
        except KeyError:
            raise ValueError(f"{self.source}: no tier {name!r} (valid: "
                             f"{', '.join([FULL_TIER, *self.tiers])})") from None

    def cases(self, text: str) -> "Cases":
        """The cases named in ``text``, comma-separated: ``scenario/interval`` (as in a
        case's name, e.g. ``hackbench/100us``) or an rt-test, each at most once."""
        latency: list[tuple[str, int]] = []
        tools: list[str] = []
        for name in (part.strip() for part in text.split(",")):
            if not name:
                continue
            scenario, slash, interval = name.partition("/")
            if not slash:
                if name not in RT_TESTS:
                    raise ValueError(f"case {name!r}: no rt-test of that name and no "
                                     f"scenario/interval (rt-tests: {', '.join(RT_TESTS)}; "
                                     f"a scenario case is e.g. {next(iter(self.scenarios))}"
                                     f"/{self.intervals_us[0]}us)")
                if name in tools:
                    raise ValueError(f"case {name!r} is named twice")
                tools.append(name)
                continue
            if scenario not in self.scenarios:
                raise ValueError(f"no scenario {scenario!r} (valid: "
                                 f"{', '.join(self.scenarios)})")
            if not (interval.endswith("us") and interval[:-2].isdigit()
                    and int(interval[:-2]) > 0):
                raise ValueError(f"case {name!r}: the interval must be µs like "
                                 f"{self.intervals_us[0]}us, got {interval!r}")
            case = (scenario, int(interval[:-2]))
            if case in latency:
                raise ValueError(f"case {name!r} is named twice")
            latency.append(case)
        if not latency and not tools:
            raise ValueError(f"no case in {text!r}")
        return Cases(tuple(latency), tuple(tools))


def case_name(scenario: str, interval_us: int) -> str:
    """A latency case's part of its name (board/flavour/<this>): ``hackbench/100us``."""
    return f"{scenario}/{interval_us}us"


@attr.frozen
class Cases:
    """Some cases of a suite: latency cases (scenario, interval in µs) and rt-tests."""

    latency: tuple[tuple[str, int], ...]
    rt_tests: tuple[str, ...]


def _overridden(part: LoadPart, override: BoardOverride) -> LoadPart:
    changes = override.loads.get(part.kind)
    if not changes:
        return part
    settings = {name: value for name, value in attr.asdict(part, recurse=False).items()
                if name != "traffic"}
    try:
        return make_load(part.kind, {**settings, **changes})
    except ValueError as error:
        raise SuiteFileError(f"{override.where}: {error}") from None


def load_suite(path: Path | None = None) -> Suite:
    path = DEFAULT_PATH if path is None else path
    try:
        display = str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        display = str(path)
    try:
        doc = load_yaml(path, display)
    except YamlFileError as error:
        raise SuiteFileError(str(error)) from error
    return _Loader(display).top(doc)


@attr.frozen
class _Loader:
    display: str

    def error(self, node: Any, key: Any, what: str) -> SuiteFileError:  # noqa: ANN401
        return SuiteFileError(f"{self.display}:{line_of(node, key)}: {what}")

    def mapping(self, node: Any, key: Any, where: str) -> CommentedMap:  # noqa: ANN401
        value = node.get(key) if isinstance(node, CommentedMap) else None
        if not isinstance(value, CommentedMap):
            raise self.error(node, key, f"{where} must be a mapping")
        return value

    def keys(self, node: CommentedMap, required: tuple[str, ...], where: str,
             optional: tuple[str, ...] = ()) -> None:
        allowed = (*required, *optional)
        for key in node:
            if key not in allowed:
                raise self.error(node, key, f"{where}: unknown key {key!r} "
                                 f"(expected one of: {', '.join(allowed)})")
        for key in required:
            if key not in node:
                raise self.error(node, None, f"{where}: missing {key!r}")

    def integer(self, node: CommentedMap, key: Any, where: str, low: int) -> int:  # noqa: ANN401
        value = node[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise self.error(node, key, f"{where} must be an integer >= {low}, got {value!r}")
        return value

    def top(self, doc: Any) -> Suite:  # noqa: ANN401
        if not isinstance(doc, CommentedMap):
            raise SuiteFileError(f"{self.display}:1: expected a mapping")
        allowed = ("cyclictest", "load_settings", "scenarios", "rt_tests", "board_overrides",
                   "tiers", "requirements")
        for key in doc:
            if key not in allowed:
                raise self.error(doc, key, f"unknown key {key!r} "
                                 f"(expected one of: {', '.join(allowed)})")
        ct = self.mapping(doc, "cyclictest", "cyclictest")
        self.keys(ct, ("intervals_us", "histogram_us", "priority"), "cyclictest")
        intervals = ct["intervals_us"]
        if not isinstance(intervals, CommentedSeq) or not intervals:
            raise self.error(ct, "intervals_us", "cyclictest.intervals_us must be a list of µs")
        for index, interval in enumerate(intervals):
            if not isinstance(interval, int) or isinstance(interval, bool) or interval <= 0:
                raise self.error(intervals, index, f"interval must be a positive integer of "
                                 f"µs, got {interval!r}")
        if len(set(intervals)) != len(intervals):
            raise self.error(ct, "intervals_us", "cyclictest.intervals_us repeats an interval")
        histogram = self.integer(ct, "histogram_us", "cyclictest.histogram_us", 1)
        priority = self.integer(ct, "priority", "cyclictest.priority", 1)
        if priority > 99:
            raise self.error(ct, "priority", f"cyclictest.priority must be 1..99, got {priority}")

        scenarios_node = self.mapping(doc, "scenarios", "scenarios")
        scenarios = {}
        for name in scenarios_node:
            if not isinstance(name, str) or not name.replace("_", "").isalnum():
                raise self.error(scenarios_node, name,
                                 f"scenario name must be letters, digits or _, got {name!r}")
            scenarios[name] = self.scenario(scenarios_node, name)
        if not scenarios:
            raise self.error(doc, "scenarios", "no scenarios")

        rt_tests = doc.get("rt_tests", CommentedSeq())
        if not isinstance(rt_tests, CommentedSeq):
            raise self.error(doc, "rt_tests", "rt_tests must be a list of tool names")
        for index, tool in enumerate(rt_tests):
            if tool not in RT_TESTS:
                raise self.error(rt_tests, index, f"unknown rt-test {tool!r} "
                                 f"(valid: {', '.join(RT_TESTS)})")
        overrides = self.overrides(doc)
        requirements, requirement_overrides = self.requirements(doc)
        suite = Suite(self.display, tuple(intervals), histogram, priority, scenarios,
                      tuple(rt_tests), overrides, requirements=requirements,
                      requirement_overrides=requirement_overrides)
        # an override that does not fit a load must fail here, not on the first board
        for override in overrides:
            for scenario in scenarios.values():
                for part in scenario.loads:
                    _overridden(part, override)
        return attr.evolve(suite, tiers=self.tiers(doc, suite))

    def tiers(self, doc: CommentedMap, suite: Suite) -> dict[str, "Cases"]:
        if "tiers" not in doc:
            return {}
        node = self.mapping(doc, "tiers", "tiers")
        tiers = {}
        for name in node:
            where = f"tiers.{name}"
            if name == FULL_TIER:
                raise self.error(node, name, f"{where}: {FULL_TIER!r} is every case of the "
                                 "suite already; name the tier otherwise")
            if not isinstance(name, str) or not name.replace("_", "").isalnum():
                raise self.error(node, name,
                                 f"tier name must be letters, digits or _, got {name!r}")
            tier = self.mapping(node, name, where)
            self.keys(tier, ("cases",), where)
            cases = tier["cases"]
            if not isinstance(cases, CommentedSeq) or not cases:
                raise self.error(tier, "cases", f"{where}.cases must be a list of cases "
                                 "(scenario/interval or an rt-test)")
            for index, case in enumerate(cases):
                try:
                    suite.cases(str(case))
                except ValueError as error:
                    raise self.error(cases, index, f"{where}.cases: {error}") from None
            try:
                tiers[name] = suite.cases(",".join(map(str, cases)))
            except ValueError as error:
                raise self.error(tier, "cases", f"{where}.cases: {error}") from None
        return tiers

    def overrides(self, doc: CommentedMap) -> tuple[BoardOverride, ...]:
        if "board_overrides" not in doc:
            return ()
        node = self.mapping(doc, "board_overrides", "board_overrides")
        result = []
        for pattern in node:
            loads_node = self.mapping(node, pattern, f"board_overrides.{pattern}")
            loads: dict[str, dict[str, Any]] = {}
            for kind in loads_node:
                settings = loads_node[kind]
                if kind not in KINDS:
                    raise self.error(loads_node, kind, f"board_overrides.{pattern}: unknown "
                                     f"load {kind!r} (valid: {', '.join(KINDS)})")
                if not isinstance(settings, CommentedMap) or not settings:
                    raise self.error(loads_node, kind, f"board_overrides.{pattern}.{kind} "
                                     "must be a mapping of settings")
                loads[kind] = dict(settings)
            result.append(BoardOverride(str(pattern), loads,
                                        f"{self.display}:{line_of(node, pattern)}"))
        return tuple(result)

    def requirements(self, doc: CommentedMap) -> tuple[Requirements,
                                                        tuple[RequirementsOverride, ...]]:
        if "requirements" not in doc:
            return Requirements(), ()
        node = self.mapping(doc, "requirements", "requirements")
        self.keys(node, (), "requirements", optional=(*REQUIREMENT_KEYS, "boards"))
        base = Requirements().changed(dict(self.requirement_changes(node, "requirements")))
        if "boards" not in node:
            return base, ()
        boards = self.mapping(node, "boards", "requirements.boards")
        overrides = []
        for pattern in boards:
            where = f"requirements.boards.{pattern}"
            entry = self.mapping(boards, pattern, where)
            if not entry:
                raise self.error(boards, pattern, f"{where} must be a mapping of requirements")
            self.keys(entry, (), where, optional=REQUIREMENT_KEYS)
            overrides.append(RequirementsOverride(str(pattern),
                                                  self.requirement_changes(entry, where)))
        return base, tuple(overrides)

    def requirement_changes(self, node: CommentedMap,
                            where: str) -> tuple[tuple[str, Any], ...]:
        """The requirements ``node`` names (``boards`` aside), each value validated."""
        changes = []
        for key in node:
            if key == "boards":
                continue
            try:
                changes.append((str(key), requirement_value(str(key), node[key])))
            except ValueError as error:
                raise self.error(node, key, f"{where}.{key} {error}") from None
        return tuple(changes)

    def scenario(self, parent: CommentedMap, name: str) -> Scenario:
        where = f"scenarios.{name}"
        node = self.mapping(parent, name, where)
        self.keys(node, ("loads",), where, optional=("cpus", "requirements"))
        cpus = node.get("cpus", "all")
        if cpus not in CPU_CHOICES:
            raise self.error(node, "cpus", f"{where}.cpus must be one of "
                             f"{', '.join(CPU_CHOICES)}, got {cpus!r}")
        loads_node = self.mapping(node, "loads", f"{where}.loads")
        parts = []
        for kind in loads_node:
            settings = loads_node[kind]
            if not isinstance(settings, CommentedMap):
                raise self.error(loads_node, kind, f"{where}.loads.{kind} must be a mapping "
                                 "of settings")
            try:
                parts.append(make_load(kind, dict(settings)))
            except ValueError as error:
                raise self.error(loads_node, kind, f"{where}: {error}") from None
        requirements: tuple[tuple[str, Any], ...] = ()
        if "requirements" in node:
            required = self.mapping(node, "requirements", f"{where}.requirements")
            self.keys(required, (), f"{where}.requirements", optional=REQUIREMENT_KEYS)
            requirements = self.requirement_changes(required, f"{where}.requirements")
        return Scenario(name, tuple(parts), cpus, requirements)
