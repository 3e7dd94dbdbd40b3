"""``rtlab thresholds replay``: judge the stored measured runs by a thresholds file (a
branch's, say), so that a tuning change is reviewed on the runs it would have failed."""

import datetime
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import attr
from sqlalchemy.orm import Session

from rtlab.measure.cyclictest import CpuResult
from rtlab.store.query import CaseRow, CpuRow, history
from rtlab.tuning.evidence import MEASURED, is_functional, md_row
from rtlab.tuning.suggest import DEFAULT_PIPELINE_CASES
from rtlab.verdict.budget import ErrorBudget
from rtlab.verdict.judge import cpu_tail, tail_violation
from rtlab.verdict.thresholds import (
    StatisticsPolicy,
    Threshold,
    Thresholds,
    ThresholdsError,
    check,
    format_us,
)


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
            lines += [md_row(header), md_row(("---",) * len(header))]
            rows = [(j, f) for j in failing for f in _worst_per_figure(j.failures)]
            for judged, failure in rows[:max_rows]:
                case = judged.case
                limit = failure.threshold
                lines.append(md_row((
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
        lines += [md_row(header), md_row(("---",) * len(header))]
        groups: dict[str, list[Judged]] = {}
        for judged in self.judged:
            groups.setdefault(judged.case.name, []).append(judged)
        for name, items in sorted(groups.items(), key=lambda g: _case_order(g[1][0].case)):
            lines.append(md_row((
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
        lines += ["", "Judged as the case judge judges each run's limits, CPUs that never "
                  "woke and, where the file gates on statistics, the tail bound; the "
                  "comparison with a baseline is not replayed (it depends on the runs "
                  "stored before each case, not on its limits)."]
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


def judge(case: CaseRow, limits: Mapping[str, Threshold],
          policy: StatisticsPolicy | None = None) -> list[Failure]:
    """The stored case's figures judged by the limits the case judge applies
    (rtlab.verdict.judge, which rtlab.verdict.case calls after every window): per gated
    CPU (or rt-test thread) by :func:`rtlab.verdict.thresholds.check`, a CPU that never
    woke up fails whatever the limits, and, where ``policy`` gates on statistics and the
    store kept the CPU's histogram, the tail bound (:func:`rtlab.verdict.judge.tail_violation`).
    Not replayed: the comparison with a baseline, which depends on the runs stored before
    the case, not on its limits (the replay's table says so)."""
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
        tail = _tail_failure(case, cpu, limits, policy)
        if tail is not None:
            failures.append(tail)
    return failures


def _tail_failure(case: CaseRow, cpu: CpuRow, limits: Mapping[str, Threshold],
                  policy: StatisticsPolicy | None) -> Failure | None:
    """The case judge's tail gate on one stored CPU's histogram (None: it passes, or
    there is no histogram, no interval or no gating to judge it by)."""
    if (policy is None or case.kind == "rt-test" or not case.tail_gate
            or cpu.histogram is None or cpu.histogram_range_us is None
            or case.interval_us is None):
        return None
    counts = cpu.histogram
    measured = CpuResult(
        thread=cpu.thread or 0, cpu=cpu.cpu, cycles=cpu.samples, min_us=int(cpu.min_us or 0),
        avg_us=float(cpu.avg_us or 0.0), max_us=int(cpu.max_us or 0),
        histogram={int(b): int(c) for b, c in enumerate(counts) if c},
        histogram_range_us=cpu.histogram_range_us, overflows=cpu.overflows or 0)
    estimate = cpu_tail(measured, limits, policy, case.interval_us,
                        tail_confidence(case, policy))
    why = tail_violation(cpu.cpu, estimate, policy, limits)
    if why is None or estimate is None or estimate.bound_ci_us is None:
        return None
    return Failure(f"tail at p={policy.exceedance_probability:g}", cpu.cpu, estimate.bound_us,
                   f"{format_us(round(estimate.bound_us or 0, 1))}, lower "
                   f"{estimate.confidence:.4%} limit "
                   f"{format_us(round(estimate.bound_ci_us[0], 1))}",
                   limits.get("max_us"))


def tail_confidence(case: CaseRow, policy: StatisticsPolicy) -> float:
    """The confidence the gate judges the case's tail at (rtlab.verdict.budget): the
    replayed file's pipeline rate over the pipeline's cases the record names (else the
    gate tier's count), one side per CPU the case judged (a pooled case: every board's)."""
    cases = case.pipeline_cases or DEFAULT_PIPELINE_CASES
    return ErrorBudget(policy.pipeline_false_fail, cases).tail_confidence(len(case.cpus))


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
    # the histograms too: the tail gate judges them
    cases = history(session, board=board, flavour=flavour, ref=ref, since=since,
                    verdicts=MEASURED, histograms=True)
    judged: list[Judged] = []
    unjudged: dict[str, list[CaseRow]] = {}
    functional = 0
    cache: dict[tuple[str, str, str | None, int | None],
                tuple[dict[str, Threshold], StatisticsPolicy | None] | str] = {}
    for case in cases:
        if case.kind == "functional" or (case.scenario is not None
                                         and is_functional(case.scenario)):
            functional += 1
            continue
        key = (case.board, case.flavour, case.scenario, case.interval_us)
        if key not in cache:
            try:
                if case.scenario is None:
                    raise ThresholdsError(f"case '{case.name}' names no scenario")
                cache[key] = (thresholds.lookup(*key),
                              None if case.interval_us is None
                              else thresholds.statistics(*key))
            except ThresholdsError as error:
                cache[key] = str(error)
        found = cache[key]
        if isinstance(found, str):
            unjudged.setdefault(found, []).append(case)
            continue
        limits, policy = found
        judged.append(Judged(case, tuple(judge(case, limits, policy))))
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
