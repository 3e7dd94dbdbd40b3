"""What a campaign report shows (``rtlab report --campaign NAME``), read from the results
store: one execution of the campaign (its ``campaign_run``, the newest by default), per
board × variant × load × interval the figures of its runs, every pair the campaign names
compared quantile by quantile (:func:`rtlab.verdict.variants.compare_variants`), and the proof
that each load ran.

A **cell** is one board × variant × scenario × interval: the runs (fresh boots) measured
there. Its figures are those of all its wake-ups together (every CPU of every run that
passed or failed; an error has no figure): the maximum, beside it what the tail expects
the maximum of that many wake-ups to be (:func:`rtlab.verdict.tail.expected_max`), the
average, and the quantiles the runs are long enough for (100 wake-ups beyond each).

A run **cut short** is left out of the figures and of every comparison, and named in its own
list: cyclictest's ``--breaktrace`` ended its window at the first wake-up past max_us (its
record's ``trace.breach``), or it was armed to and whether it did is unknown, or it
measured fewer seconds than planned. Its tail is censored where it stopped, and counted
as a whole run it would bias the comparison; its maximum still shows in that list. A campaign
never arms the break (rtlab.verdict.trace_choice.choose_trace): such a run comes only from a
record made otherwise.

The **load proof** is the field's: the CPU utilisation the board's /proc/stat showed
during the window, less what the measuring program alone takes (the ``idle`` scenario of
the same variant, board and interval, where the campaign measures it), against what the
load asks; and the load average and temperatures as each window opened and closed."""

import datetime
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attr
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from rtlab.campaign.spec import Campaign, Pair
from rtlab.store.ingest import _utc
from rtlab.store.models import Case, Run
from rtlab.verdict.comparison import MIN_WAKEUPS_BEYOND, quantile_name
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.tail import ExpectedMax, expected_max
from rtlab.verdict.variants import Shift, compare_variants

MEASURED = ("pass", "fail")
# a window whose board warmed by more than this had not reached a thermal steady state:
# latencies of a board still heating up are not those of one that has (throttling)
MAX_TEMPERATURE_RISE_MC = 5000
# the figures' quantiles, as the campaign's tables name them
IDLE = "idle"


@attr.frozen
class CpuFigures:
    cpu: int | None
    histogram: Histogram | None


@attr.frozen
class RunFigures:
    """One run of a variant at one load: a stored case."""

    case_id: int
    name: str
    place: str | None
    verdict: str
    message: str
    started: datetime.datetime
    kernel_release: str | None
    samples: int
    max_us: float | None
    avg_us: float | None
    histogram: Histogram | None
    """Its CPUs' wake-ups together (None: no histogram, or not measured)."""
    cpus: tuple[CpuFigures, ...]
    utilisation: float | None
    min_utilisation: float | None
    asked_percent: int | None
    """The CPU load's percent, for a scenario with one."""
    loadavg_before: str | None
    loadavg_after: str | None
    temperatures_mc: tuple[tuple[int, ...], tuple[int, ...]]
    cut_short: str | None = None
    """Why the run did not measure its whole planned window (:func:`cut_short`)."""

    @property
    def measured(self) -> bool:
        """A whole run with figures: what the cell's figures and the comparisons take."""
        return self.verdict in MEASURED and self.histogram is not None and not self.cut_short

    @property
    def verdict_text(self) -> str:
        return f"{self.verdict} (cut short)" if self.cut_short else self.verdict

    @property
    def temperature_rise_mc(self) -> int | None:
        before, after = self.temperatures_mc
        if not before or not after or len(before) != len(after):
            return None
        return max(b - a for a, b in zip(before, after, strict=True))


@attr.frozen
class Cell:
    board: str
    variant: str
    scenario: str
    interval_us: int
    runs: tuple[RunFigures, ...]

    @property
    def measured(self) -> tuple[RunFigures, ...]:
        return tuple(run for run in self.runs if run.measured)

    @property
    def cut(self) -> tuple[RunFigures, ...]:
        """The runs left out because their window was cut short."""
        return tuple(run for run in self.runs if run.cut_short)

    @property
    def verdicts(self) -> str:
        return ", ".join(run.verdict_text for run in self.runs)

    @property
    def histogram(self) -> Histogram | None:
        hists = [run.histogram for run in self.measured if run.histogram is not None]
        return Histogram.merged(hists) if hists else None

    @property
    def samples(self) -> int:
        return sum(run.samples for run in self.measured)

    @property
    def max_us(self) -> float | None:
        values = [run.max_us for run in self.measured if run.max_us is not None]
        return max(values) if values else None

    @property
    def avg_us(self) -> float | None:
        pairs = [(run.avg_us, run.samples) for run in self.measured if run.avg_us is not None]
        weight = sum(n for _, n in pairs)
        return sum(avg * n for avg, n in pairs) / weight if weight else None

    def quantile(self, quantile: float) -> tuple[bool, int | None]:
        """(long enough, the quantile in µs or None past the histogram's range)."""
        hist = self.histogram
        if hist is None or (1 - quantile) * hist.samples < MIN_WAKEUPS_BEYOND:
            return False, None
        return True, hist.quantile(quantile)

    def expected(self) -> ExpectedMax | None:
        hist = self.histogram
        if hist is None:
            return None
        if hist.max_us is None:
            hist = Histogram(hist.counts, hist.overflows, self.max_us)
        return expected_max(hist)

    @property
    def utilisation(self) -> float | None:
        values = [run.utilisation for run in self.measured if run.utilisation is not None]
        return sum(values) / len(values) if values else None


@attr.frozen
class LoadProof:
    """A cell's load, net of the measuring program."""

    gross: float | None
    idle: float | None
    """The idle scenario's utilisation (the measuring program alone), same variant,
    board and interval; None when the campaign does not measure idle."""
    asked: float | None
    """The least utilisation the load must show (the suite's min_utilisation)."""
    net: float | None
    proven: bool | None
    note: str


@attr.frozen
class PairRow:
    pair: Pair
    board: str
    scenario: str
    interval_us: int
    shifts: tuple[Shift, ...]
    """One per quantile of the campaign; empty when a side has no measured run."""
    note: str = ""
    left_out: tuple[tuple[str, int], ...] = ()
    """Per variant, the runs cut short that the comparison left out."""

    @property
    def left_out_text(self) -> str:
        """What the comparison left out, or "" when nothing."""
        if not self.left_out:
            return ""
        told = ", ".join(f"{count} run{'s' if count != 1 else ''} of {variant}"
                         for variant, count in self.left_out)
        return (f"{self.scenario} {self.interval_us} µs: {told} cut short, left out of the "
                "comparison (see Runs cut short)")


@attr.frozen
class CampaignData:
    campaign: Campaign
    campaign_run: str
    generated: datetime.datetime
    cells: dict[tuple[str, str, str, int], Cell]
    pairs: tuple[PairRow, ...]
    boards: tuple[str, ...]
    """The board tags measured (qemu-rpi3 on the virtual rack), in the campaign's order."""
    confidence_each: float
    """The confidence of each quantile's interval (Bonferroni over a row's quantiles)."""

    def variants(self) -> tuple[str, ...]:
        return tuple(self.campaign.variants)

    def loads(self, board: str, interval_us: int) -> tuple[str, ...]:
        return tuple(s for s in self.campaign.scenarios
                     if any((board, v, s, interval_us) in self.cells for v in self.variants()))

    def intervals(self, board: str) -> tuple[int, ...]:
        return tuple(i for i in self.campaign.intervals_us
                     if any(key[0] == board and key[3] == i for key in self.cells))

    def cell(self, board: str, variant: str, scenario: str, interval_us: int) -> Cell | None:
        return self.cells.get((board, variant, scenario, interval_us))

    def cut_runs(self) -> list[RunFigures]:
        """Every run left out for being cut short, in the order of the cells' keys."""
        return [run for _, cell in sorted(self.cells.items()) for run in cell.cut]

    def board_cells(self, board: str) -> Iterator[Cell]:
        """The board's cells in the order of the reports' tables: by interval, then load,
        then variant."""
        for interval in self.intervals(board):
            for scenario in self.loads(board, interval):
                for variant in self.variants():
                    cell = self.cell(board, variant, scenario, interval)
                    if cell is not None:
                        yield cell

    def proven_runs(self, board: str) -> Iterator[tuple[Cell, LoadProof, int, RunFigures]]:
        """Every run of the board with its cell's load proof and its number in the cell,
        in the order of the reports' "loads, proven" tables."""
        for cell in self.board_cells(board):
            proof = self.load_proof(cell)
            for index, run in enumerate(cell.runs, 1):
                yield cell, proof, index, run

    def load_proof(self, cell: Cell) -> LoadProof:
        gross = cell.utilisation
        idle_cell = self.cell(cell.board, cell.variant, IDLE, cell.interval_us)
        idle = idle_cell.utilisation if idle_cell is not None else None
        asked_values = [r.min_utilisation for r in cell.measured if r.min_utilisation]
        asked = max(asked_values) if asked_values else None
        if cell.scenario == IDLE:
            return LoadProof(gross, gross, None, None, None,
                             "the measuring program alone: the baseline of the others")
        if gross is None:
            return LoadProof(None, idle, asked, None, None, "no measured run")
        if asked is None:
            return LoadProof(gross, idle, None, None, None,
                             "proven by the load's own evidence (not by CPU time)")
        if idle is None:
            return LoadProof(gross, None, asked, None, None,
                             "no idle baseline in the campaign: gross utilisation only, the "
                             "measuring program's share included")
        net = max(gross - idle, 0.0)
        proven = net >= asked
        note = (f"net {net:.0%} of the CPUs ≥ {asked:.0%}" if proven else
                f"net {net:.0%} < {asked:.0%}: most of the busy time was the measuring "
                "program's, not the load's")
        return LoadProof(gross, idle, asked, net, proven, note)


def campaign_runs(session: Session, campaign: str) -> list[tuple[str, datetime.datetime]]:
    """The executions of ``campaign`` in the store, newest first, with their start."""
    found: dict[str, datetime.datetime] = {}
    for run_id, started in session.execute(
            select(Run.campaign_run, Run.started).where(Run.campaign == campaign,
                                                        Run.campaign_run.is_not(None))):
        started = _utc(started)
        found[run_id] = min(found.get(run_id, started), started)
    return sorted(found.items(), key=lambda item: item[1], reverse=True)


def collect(session: Session, campaign: Campaign, *, campaign_run: str | None = None,
            now: datetime.datetime | None = None, resamples: int = 4000) -> CampaignData:
    """One execution of ``campaign`` from the store (``campaign_run``; default the newest)."""
    if campaign_run is None:
        executions = campaign_runs(session, campaign.name)
        if not executions:
            raise ValueError(f"the results store has no run of campaign {campaign.name!r} "
                             "(rtlab campaign run, then rtlab results ingest)")
        campaign_run = executions[0][0]
    runs = session.scalars(
        select(Run).where(Run.campaign == campaign.name, Run.campaign_run == campaign_run)
        .options(selectinload(Run.cases).selectinload(Case.cpus))).all()
    if not runs:
        raise ValueError(f"the results store has no run {campaign_run!r} of campaign "
                         f"{campaign.name!r}")
    grouped: dict[tuple[str, str, str, int], list[RunFigures]] = {}
    for run in runs:
        for case in run.cases:
            if case.kind != "cyclictest" or case.scenario is None or case.interval_us is None:
                continue
            key = (case.board, case.flavour, case.scenario, case.interval_us)
            grouped.setdefault(key, []).append(_run_figures(case, run))
    cells = {key: Cell(*key, runs=tuple(sorted(found, key=lambda r: r.started)))
             for key, found in grouped.items()}
    order = [b for prefix in ("", "qemu-") for b in (prefix + name for name in campaign.boards)]
    boards = tuple(sorted({key[0] for key in cells},
                          key=lambda b: order.index(b) if b in order else len(order)))
    each = 1 - (1 - campaign.confidence) / len(campaign.quantiles)
    pairs = tuple(_pair_row(pair, board, scenario, interval, cells, campaign.quantiles,
                            each, resamples)
                  for pair in campaign.pairs for board in boards
                  for interval in campaign.intervals_us for scenario in campaign.scenarios
                  if (board, pair.baseline, scenario, interval) in cells
                  or (board, pair.candidate, scenario, interval) in cells)
    return CampaignData(campaign, campaign_run,
                        now or datetime.datetime.now(datetime.UTC).replace(microsecond=0),
                        cells, pairs, boards, each)


def _pair_row(pair: Pair, board: str, scenario: str, interval: int,
              cells: Mapping[tuple[str, str, str, int], Cell], quantiles: Sequence[float],
              confidence: float, resamples: int) -> PairRow:
    sides = [cells.get((board, name, scenario, interval)) for name in (pair.baseline,
                                                                        pair.candidate)]
    names = (pair.baseline, pair.candidate)
    # measured: whole runs only; a run cut short would enter as a whole one
    runs = [[r.histogram for r in cell.measured if r.histogram is not None] if cell else []
            for cell in sides]
    left_out = tuple((name, len(cell.cut)) for name, cell in zip(names, sides, strict=True)
                     if cell is not None and cell.cut)
    missing = [name for name, found in zip(names, runs, strict=True) if not found]
    if missing:
        cut = dict(left_out)
        why = [f"every run of {name} was cut short" if cut.get(name)
               else f"no measured run of {name}" for name in missing]
        return PairRow(pair, board, scenario, interval, (), f"not compared: {'; '.join(why)}",
                       left_out)
    shifts = tuple(compare_variants(runs[0], runs[1], quantile=q, confidence=confidence,
                                    resamples=resamples,
                                    seed=comparison_seed(board, scenario, interval, q))
                   for q in quantiles)
    return PairRow(pair, board, scenario, interval, shifts, left_out=left_out)


def comparison_seed(*parts: object) -> int:
    """A fixed seed per comparison: the same store gives the same report."""
    return sum((i + 1) * ord(c) for i, c in enumerate("/".join(map(str, parts)))) % (2**32)


def cut_short(record: Mapping[str, Any]) -> str | None:
    """Why a run's record says it did not measure its whole planned window (None: it
    did, or says nothing otherwise): cyclictest's --breaktrace ended it at a breach
    (``trace.breach``); the break was armed and whether it ended the window is unknown
    (the trace could not be brought back, and the record does not say); or an adaptive run
    measured fewer seconds than its cap. A fixed run's record holds no measured length of
    its own: the break is the one way its window ends early and it still has figures."""
    trace = record.get("trace")
    if record.get("broke") is True and not (isinstance(trace, Mapping) and trace.get("breach")):
        return "cyclictest's --breaktrace ended its window at a breach (the record's broke)"
    if isinstance(trace, Mapping):
        breach = trace.get("breach")
        at = trace.get("breaktrace_us")
        if isinstance(breach, Mapping) and breach:
            where = f"CPU{breach['cpu']}" if breach.get("cpu") is not None else "a thread"
            late = breach.get("latency_us")
            woke = f": {where} woke {late} µs late" if late is not None else ""
            return (f"cyclictest's --breaktrace ended its window at the first wake-up past "
                    f"{at} µs{woke}")
        if trace.get("available") is True and at is not None and "breach" not in trace:
            why = trace.get("error") or "no break recorded"
            return (f"armed to break at {at} µs, and whether that ended its window is "
                    f"unknown ({why})")
    adaptive = record.get("adaptive")
    if isinstance(adaptive, Mapping):
        measured, cap = adaptive.get("measured_s"), adaptive.get("cap_s")
        if (isinstance(measured, int | float) and isinstance(cap, int | float)
                and measured < cap):
            stopped = adaptive.get("stopped")
            return (f"measured {measured:g} s of the {cap:g} s planned"
                    + (f" ({stopped})" if stopped else ""))
    return None


def _run_figures(case: Case, run: Run) -> RunFigures:
    record: Mapping[str, Any] = case.record or {}
    cpus = []
    for cpu in case.cpus:
        counts = cpu.counts()
        hist = (Histogram(counts, cpu.overflows or 0, cpu.max_us)
                if counts is not None and cpu.samples > 0 and not cpu.no_wakeup else None)
        cpus.append(CpuFigures(cpu.cpu, hist))
    hists = [c.histogram for c in cpus if c.histogram is not None]
    merged = Histogram.merged(hists) if hists else None
    measured = [cpu for cpu in case.cpus if not cpu.no_wakeup and cpu.samples > 0]
    samples = sum(cpu.samples for cpu in measured)
    maxima = [cpu.max_us for cpu in measured if cpu.max_us is not None]
    weighted = [(cpu.avg_us, cpu.samples) for cpu in measured if cpu.avg_us is not None]
    weight = sum(n for _, n in weighted)
    check = record.get("load_check") or {}
    temps = check.get("temperatures_mc") or [[], []]
    percent = ((record.get("loads") or {}).get("cpu") or {}).get("percent")
    return RunFigures(
        case_id=case.id, name=case.name, place=run.place, verdict=case.verdict,
        message=case.message, started=_utc(case.started), kernel_release=run.kernel_release,
        samples=samples, max_us=max(maxima) if maxima else None,
        avg_us=sum(a * n for a, n in weighted) / weight if weight else None,
        histogram=merged, cpus=tuple(cpus),
        utilisation=check.get("cpu_utilisation"),
        min_utilisation=check.get("min_utilisation"),
        asked_percent=percent if isinstance(percent, int) else None,
        loadavg_before=check.get("loadavg_before"), loadavg_after=check.get("loadavg"),
        temperatures_mc=(tuple(temps[0]), tuple(temps[1])) if len(temps) == 2 else ((), ()),
        cut_short=cut_short(record) if case.verdict in MEASURED else None)


# ----------------------------------------------------------------- text forms ----


def us(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.0f}" if abs(value) >= 10 or float(value).is_integer() else f"{value:.1f}"


def quantile_text(cell: Cell, quantile: float) -> str:
    long_enough, value = cell.quantile(quantile)
    if not long_enough:
        return "too short"
    if value is None:
        hist = cell.histogram
        return f"≥ {hist.range_us if hist else '?'}"
    return str(value)


def expected_text(expected: ExpectedMax | None) -> str:
    """What the tail expects of the maximum: its median and the range 95 % of runs of
    that length show; a maximum outside it with under 1 % chance is named an outlier."""
    if expected is None or expected.expected_us is None or expected.range_us is None:
        return "no tail fit" + (f" ({expected.note})" if expected else "")
    low, high = expected.range_us
    shown = "∞" if math.isinf(high) else f"{high:.0f}"
    text = f"{expected.expected_us:.0f} ({low:.0f}-{shown})"
    if expected.outlier and expected.chance is not None:
        return f"{text}: the max is a single outlier ({expected.chance:.2g} chance)"
    return text


def loadavg_text(before: str | None, after: str | None) -> str:
    def first(text: str | None) -> str:
        return text.split()[0] if text else "?"
    return f"{first(before)} → {first(after)}"


def temperature_text(run: RunFigures) -> str:
    before, after = run.temperatures_mc
    if not before and not after:
        return "no thermal zones"
    def hottest(values: Iterable[int]) -> str:
        values = list(values)
        return f"{max(values) / 1000:.1f} °C" if values else "?"
    rise = run.temperature_rise_mc
    flag = (f" (rose {rise / 1000:.1f} °C: not at a steady state)"
            if rise is not None and rise > MAX_TEMPERATURE_RISE_MC else "")
    return f"{hottest(before)} → {hottest(after)}{flag}"


def percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def markdown(data: CampaignData, *, figures: Mapping[str, str] | None = None) -> str:
    """The report as markdown (summary.md): per board the figures table, every pair's
    table and the load proof; ``figures`` names the PNG files to link per board."""
    campaign = data.campaign
    names = ", ".join(quantile_name(q) for q in campaign.quantiles)
    out = [f"## Campaign {campaign.name}: {campaign.description}", "",
           f"Execution `{data.campaign_run}`, reported "
           f"{data.generated.strftime('%Y-%m-%d %H:%M UTC')}; the file: `{campaign.source}`. "
           f"Shifts are candidate − baseline at {names}, each with its "
           f"{data.confidence_each:.1%} interval ({campaign.confidence:.0%} for a row's "
           "quantiles together).", ""]
    for board in data.boards:
        out += [f"### {board}", ""]
        for name, file in (figures or {}).items():
            if name.startswith(f"{board}/"):
                out += [f"![{name}]({file})", ""]
        out += ["#### Figures per variant and load", "",
                "| variant | load | interval | runs | verdicts | wake-ups | max µs | "
                "tail expects µs (95 % of runs) | avg µs | " + " | ".join(
                    f"{quantile_name(q)} µs" for q in campaign.quantiles) + " |",
                "| --- " * (9 + len(campaign.quantiles)) + "|"]
        for cell in data.board_cells(board):
            out.append(
                f"| {cell.variant} | {cell.scenario} | {cell.interval_us} µs | "
                f"{len(cell.measured)} | {cell.verdicts} | {cell.samples} | {us(cell.max_us)} | "
                f"{expected_text(cell.expected())} | {us(cell.avg_us)} | "
                + " | ".join(quantile_text(cell, q) for q in campaign.quantiles) + " |")
        out.append("")
        for pair in campaign.pairs:
            rows = [row for row in data.pairs if row.board == board and row.pair == pair]
            if not rows:
                continue
            out += [f"#### {pair.candidate} against {pair.baseline}", "",
                    "| load | interval | " + " | ".join(quantile_name(q)
                                                       for q in campaign.quantiles) + " |",
                    "| --- " * (2 + len(campaign.quantiles)) + "|"]
            for row in rows:
                cells = ([shift.verdict for shift in row.shifts] if row.shifts
                         else [row.note] * len(campaign.quantiles))
                out.append(f"| {row.scenario} | {row.interval_us} µs | "
                           + " | ".join(_cell(text) for text in cells) + " |")
            warnings = sorted({w for row in rows for s in row.shifts for w in s.warnings})
            warnings += [row.left_out_text for row in rows if row.left_out]
            out += [""] + [f"- {warning}" for warning in warnings] + ([""] if warnings else [])
        out += ["#### The loads, proven", "",
                "| variant | load | interval | run | CPU busy | idle baseline | net | "
                "needed | load average before → after | temperature before → after | "
                "proof |", "| --- " * 11 + "|"]
        for cell, proof, index, run in data.proven_runs(board):
            out.append(
                f"| {cell.variant} | {cell.scenario} | {cell.interval_us} µs | {index} | "
                f"{percent(run.utilisation)} | {percent(proof.idle)} | "
                f"{percent(proof.net)} | {percent(proof.asked)} | "
                f"{loadavg_text(run.loadavg_before, run.loadavg_after)} | "
                f"{temperature_text(run)} | {_cell(proof.note)} |")
        out.append("")
    cut = data.cut_runs()
    if cut:
        out += ["### Runs cut short", "",
                "Left out of the figures and the comparisons: a run whose window was cut "
                "short is no whole run, and its tail is censored where it stopped.", ""]
        out += [f"- `{run.name}` ({run.verdict}, max {us(run.max_us)} µs): "
                f"{_cell(run.cut_short or '')}" for run in cut]
        out.append("")
    errors = [run for cell in data.cells.values() for run in cell.runs
              if run.verdict not in MEASURED]
    if errors:
        out += ["### Runs without figures", ""]
        out += [f"- `{run.name}` ({run.verdict}): {_cell(run.message)}" for run in errors]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _cell(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("|", "\\|")).strip()


def as_json(data: CampaignData) -> dict[str, Any]:
    """The tables as data (campaign.json beside the page), for tools that read a
    campaign's outcome rather than a person."""
    campaign = data.campaign
    cells = []
    for (board, variant, scenario, interval), cell in sorted(data.cells.items()):
        expected = cell.expected()
        proof = data.load_proof(cell)
        cells.append({
            "board": board, "variant": variant, "scenario": scenario,
            "interval_us": interval, "runs": len(cell.runs), "measured": len(cell.measured),
            "verdicts": [run.verdict for run in cell.runs],
            "cut_short": [{"name": run.name, "verdict": run.verdict, "max_us": run.max_us,
                           "why": run.cut_short} for run in cell.cut],
            "samples": cell.samples,
            "max_us": cell.max_us, "avg_us": cell.avg_us,
            "expected_max_us": None if expected is None else expected.expected_us,
            "expected_max_range_us": None if expected is None else expected.range_us,
            "max_chance": None if expected is None else expected.chance,
            "max_is_outlier": None if expected is None else expected.outlier,
            "quantiles_us": {quantile_name(q): (cell.quantile(q)[1] if cell.quantile(q)[0]
                                                else "too short")
                             for q in campaign.quantiles},
            "load": {"gross": proof.gross, "idle": proof.idle, "net": proof.net,
                     "needed": proof.asked, "proven": proof.proven, "note": proof.note},
        })
    pairs = [{"baseline": row.pair.baseline, "candidate": row.pair.candidate,
              "board": row.board, "scenario": row.scenario, "interval_us": row.interval_us,
              "note": row.note, "left_out": dict(row.left_out),
              "shifts": [{"quantile": s.name, "outcome": s.outcome, "shift_us": s.shift_us,
                          "ci_us": s.ci_us, "verdict": s.verdict, "longer": s.longer,
                          "confidence": s.confidence, "warnings": list(s.warnings)}
                         for s in row.shifts]}
             for row in data.pairs]
    return {"schema": "rtlab.campaign-report/1", "campaign": campaign.name,
            "campaign_run": data.campaign_run, "generated": data.generated.isoformat(),
            "confidence_each": data.confidence_each, "cells": cells, "pairs": pairs}
