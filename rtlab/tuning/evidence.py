"""The evidence a threshold suggestion rests on: a case's measured runs in the store of
one length (:func:`comparable`), the worst CPU's figure per run, and the high quantile of
those figures (see :mod:`rtlab.tuning.suggest` for the method)."""

import datetime
import math
from collections.abc import Mapping, Sequence

import attr

from rtlab.measure.rttests import TESTS
from rtlab.store.query import CaseRow
from rtlab.tuning.tail_limit import (
    Exposure,
    ImpliedRate,
    TailLimit,
    implied_rate,
    pooled_exposure,
    tail_limit,
)
from rtlab.verdict.baseline import LENGTH_TOLERANCE
from rtlab.verdict.thresholds import FIGURES

MEASURED = ("pass", "fail")
FIGURE_NAME = {metric: figure for figure, metric in FIGURES.items()}
# a run counts as a length when it measured within 10 % of it, as a baseline's runs do
# (rtlab.verdict.baseline): a stored length is the one measured, and two runs of one
# length need not agree to the second
SAME_LENGTH = LENGTH_TOLERANCE
# why runs of other lengths are left out, as the table and the merge request say it
WHY_ONE_LENGTH = "a maximum grows with the number of wake-ups"


MAX_FROM = ("exposure", "quantile")


@attr.frozen
class Method:
    """How suggestions are made (see the module docstring)."""

    quantile: float = 0.99
    margin: float = 1.2
    min_runs: int = 10
    merge: float = 0.2
    figures: int = 2
    max_from: str = "exposure"
    """``exposure``: max_us from the series' pooled wake-ups at the case's share of the
    error budget (rtlab.tuning.tail_limit); ``quantile``: as the other metrics, the
    quantile of the runs' maxima × margin (a store whose records kept no histograms)."""
    pipeline_cases: int | None = None
    """The pipeline's gated cases that share its budget (None: the newest stored record's
    ``pipeline_cases``)."""

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
        if self.max_from not in MAX_FROM:
            raise ValueError(f"max-from must be one of {', '.join(MAX_FROM)}, got "
                             f"{self.max_from!r}")
        if self.pipeline_cases is not None and self.pipeline_cases < 1:
            raise ValueError(f"pipeline-cases must be at least 1, got {self.pipeline_cases}")

    @property
    def all_below(self) -> float:
        """Below this many runs the quantile is the maximum."""
        if self.quantile >= 1:
            return math.inf
        # the maximum while (1 - q)·(n - 1) < 1; round() keeps 1/(1 - 0.99) at 100
        return math.ceil(round(1 + 1 / (1 - self.quantile), 6))

    def describe(self) -> str:
        if self.max_from == "exposure":
            return ("max_us: the latency one case's run exceeds with at most its share of "
                    "the pipeline's error budget, from every CPU's wake-ups of the case's "
                    "runs pooled (the tail model's upper confidence limit where they do not "
                    "reach it); other metrics: " + self._quantile_rule())
        return self._quantile_rule()

    def _quantile_rule(self) -> str:
        quantile = ("the maximum" if self.quantile >= 1 else
                    f"the {self.quantile:g} quantile (the maximum below {self.all_below} runs)")
        return (f"{quantile} of the worst CPU's figure per run × {self.margin:g}, rounded up "
                f"to {self.figures} significant figures; per case only its runs of the "
                f"longest measured length (within {SAME_LENGTH:.0%}: {WHY_ONE_LENGTH}), "
                f"at least {self.min_runs} of them; a shared limit at most {self.merge:.0%} "
                "above a case's own suggestion")


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


def format_length(seconds: float) -> str:
    """A measured length as people say it: "3 s", "1 min", "60 min"."""
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"


def length_range(shortest_s: float, longest_s: float) -> str:
    """Lengths from ``shortest_s`` to ``longest_s``: "60 min", "1..32 min", "3 s..60 min"."""
    low, high = format_length(shortest_s), format_length(longest_s)
    if low == high:
        return low
    unit = " " + high.split()[1]
    return f"{low.removesuffix(unit)}..{high}"


@attr.frozen
class Lengths:
    """Which of a case's runs are comparable (:func:`comparable`): those of its longest
    measured length, and what was left out."""

    # the longest measured length; None when no run has one recorded (then all are used)
    length_s: float | None
    # the runs used, after --last
    used: int
    # shorter runs left out: how many, and the shortest and longest of their lengths
    shorter: int = 0
    shorter_s: tuple[float, float] | None = None
    # runs without a recorded length, left out beside runs that have one
    unrecorded: int = 0

    @property
    def left_out(self) -> int:
        return self.shorter + self.unrecorded

    def length(self) -> str:
        return "not recorded" if self.length_s is None else format_length(self.length_s)

    def cell(self) -> str:
        """The table's cell: the length used, and how many runs were left out."""
        return self.length() + (f" ({self.left_out} left out)" if self.left_out else "")

    def left_out_text(self) -> str:
        """What was left out: "40 run(s) of 1..32 min", "3 run(s) without a recorded
        length"."""
        parts = []
        if self.shorter:
            assert self.shorter_s is not None
            parts.append(f"{self.shorter} run(s) of {length_range(*self.shorter_s)}")
        if self.unrecorded:
            parts.append(f"{self.unrecorded} run(s) without a recorded length")
        return " and ".join(parts)

    def explain(self) -> str:
        """The whole story of one case, for the notes under the table."""
        return (f"{self.left_out_text()} left out, limits from {self.used} run(s) of "
                f"{self.length()}")


def _recorded_length(value: object) -> float | None:
    # a length that is no positive number is as good as none
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def comparable(cases: Sequence[CaseRow], lengths: Mapping[int, object]
               ) -> tuple[list[CaseRow], Lengths]:
    """The runs of ``cases`` (one case's, oldest first) of the longest measured length
    present, within :data:`SAME_LENGTH` of it; ``lengths`` maps a case's id to its
    stored ``duration_s``. A maximum grows with the number of wake-ups, so an hour's runs
    and an adaptive run that stopped after a minute are no samples of one figure, and a
    limit must hold for the longest runs the gate judges. Runs without a recorded length
    are used only when no run has one."""
    known = {case.case_id: length for case in cases
             if (length := _recorded_length(lengths.get(case.case_id))) is not None}
    if not known:
        return list(cases), Lengths(None, len(cases))
    longest = max(known.values())
    used = [case for case in cases if case.case_id in known
            and abs(known[case.case_id] - longest) <= SAME_LENGTH * longest + 1e-9]
    ids = {case.case_id for case in used}
    shorter = [known[case.case_id] for case in cases
               if case.case_id in known and case.case_id not in ids]
    return used, Lengths(longest, len(used), len(shorter),
                         (min(shorter), max(shorter)) if shorter else None,
                         len(cases) - len(known))


def _fails(value: float | None, limit: float) -> bool:
    # an unknown figure fails every limit, as rtlab.verdict.thresholds.check has it
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
    # which length the runs have, and the runs of other lengths left out
    lengths: Lengths | None = None
    # max_us from the pooled exposure (Method.max_from "exposure"), and what the old
    # limit implies there
    tail: TailLimit | None = None
    implied: ImpliedRate | None = None
    exposure: Exposure | None = None

    def false_red(self, limit_us: float) -> float | None:
        """The chance one run of the case exceeds ``limit_us``, by its pooled wake-ups
        (None: no exposure was read, or no tail could be fitted)."""
        if self.exposure is None:
            return None
        found = implied_rate(self.exposure, limit_us)
        return None if found is None or found.fitted is None else min(found.fitted, 1.0)

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


@attr.frozen
class Budget:
    """What a max_us suggestion needs of the series' statistics: the limits' share of the
    budget per case run, the confidence it is known to, each run's board time by case id,
    and the limit the series has now (its implied false-red rate is reported)."""

    share: float
    confidence: float
    durations: Mapping[int, object]
    current_us: float | None = None


def evidence(cases: Sequence[CaseRow], metric: str, method: Method,
             lengths: Lengths | None = None, budget: Budget | None = None) -> Evidence:
    """``metric``'s evidence in ``cases``, the comparable runs of one case (``lengths``
    says which, :func:`comparable`); max_us from the pooled exposure where ``budget`` is
    given and the method says so."""
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
    base = Evidence(metric, tuple(values), first, last, lengths=lengths)
    if not values:
        return attr.evolve(base, missing="no runs")
    if len(values) < method.min_runs:
        if lengths is not None and lengths.left_out:
            # --min-runs counts the comparable runs: the shorter ones are not evidence
            return attr.evolve(base, missing=(
                f"too few runs of {lengths.length()} ({len(values)}, need "
                f"{method.min_runs}; {lengths.left_out_text()} left out: {WHY_ONE_LENGTH})"))
        return attr.evolve(base, missing=f"too few runs ({len(values)}, need "
                                         f"{method.min_runs})")
    if metric == "max_us" and budget is not None and method.max_from == "exposure":
        exposure = pooled_exposure(used, [_recorded_length(budget.durations.get(c.case_id))
                                          for c in used])
        found = tail_limit(exposure, budget.share, budget.confidence)
        implied = (implied_rate(exposure, budget.current_us)
                   if budget.current_us is not None else None)
        base = attr.evolve(base, tail=found, implied=implied, label="budget",
                           observed=found.upper_us, exposure=exposure)
        if found.limit_us is None:
            return attr.evolve(base, missing=found.missing)
        return attr.evolve(base, suggested=nice_ceil(found.limit_us, method.figures))
    observed, label = high_quantile(values, method.quantile)
    if observed is None:
        unknown = sum(v is None for v in values)
        return attr.evolve(base, label=label, missing=(
            f"{FIGURE_NAME[metric]} past the histogram's range in {unknown} of "
            f"{len(values)} runs: no value can be suggested"))
    return attr.evolve(base, observed=observed, label=label,
                       suggested=nice_ceil(observed * method.margin, method.figures))


def _has_percentile_range(case: CaseRow, metric: str) -> bool:
    """Whether a percentile the case lacks is one past its histogram (unknown, but
    measured) rather than one of CPUs that never woke."""
    if not metric.startswith("p"):
        return False
    return any(not cpu.no_wakeup and (cpu.gated is None or cpu.gated) for cpu in case.cpus)

def md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"



def is_functional(name: str) -> bool:
    return name in TESTS and TESTS[name].functional
