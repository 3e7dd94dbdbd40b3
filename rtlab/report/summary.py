"""The short markdown a merge-request comment carries: verdict counts, the failing cases
with figure against limit, errors apart from failures, regressions against the baseline,
and where the full report is."""

import math

from rtlab.report import exposure as kernel_exposure
from rtlab.report.data import (
    CompareResult,
    ReportData,
    Row,
    group_name,
    group_of,
    run_parts,
    series_name,
)
from rtlab.verdict.comparison import quantile_name
from rtlab.verdict.thresholds import format_us

# what a message could trip GitLab's markdown with mid-line: code, emphasis, links, html,
# table cells (">" and "#" only mean something at the start of a line, where no text of
# ours stands)
_SPECIAL = set("\\`*_{}[]<|")
MAX_LISTED = 15


def md(text: str) -> str:
    """Text as literal markdown: special characters escaped, one line."""
    flat = " ".join(str(text).split())
    return "".join("\\" + c if c in _SPECIAL else c for c in flat)


def _code(text: str) -> str:
    return "`" + str(text).replace("`", "'") + "`"


def _us(value: float | None) -> str:
    return "–" if value is None else format_us(value)


def longer_hint(comparison: CompareResult) -> str:
    if comparison.longer is None:
        return ""
    if not math.isfinite(comparison.longer):
        return "a longer run cannot settle it (compare against more baseline runs)"
    return f"run about {math.ceil(comparison.longer)}× longer"


def _figure_vs_limit(row: Row) -> str:
    if row.exceeded:
        return "; ".join(md(str(item)) for item in row.exceeded)
    return md(row.case.message) or "–"


def markdown(data: ReportData, *, report_link: str | None = None, limit: int = MAX_LISTED
             ) -> str:
    selection = data.selection
    counts = data.counts()
    lines = [f"### rtlab latency report: {md(selection.describe_candidate())}", ""]
    if not data.rows:
        lines.append("No stored cases match this report's selection.")
        return "\n".join(lines) + "\n"
    shown = " · ".join(f"**{count} {verdict}**" if verdict in ("fail", "error") and count
                       else f"{count} {verdict}" for verdict, count in counts.items() if count)
    lines.append(f"{len(data.rows)} series: {shown}")
    lines.append("")

    failing = data.failing
    if failing:
        lines += [f"#### Failing ({len(failing)})", "", "| case | figure vs limit | run |",
                  "| --- | --- | --- |"]
        for row in failing[:limit]:
            lines.append(f"| {_code(row.case.name)} | {_figure_vs_limit(row)} | "
                         f"{md(_run(row))} |")
        lines += _more(len(failing), limit) + [""]
        traced = [(row, (row.case.trace or {}).get("breach")) for row in failing[:limit]]
        for row, breach in ((row, b) for row, b in traced if isinstance(b, dict)):
            lines.append(f"- {_code(row.case.name)}, the kernel's trace: "
                         f"{md(str(breach.get('summary')))} (the whole trace: the job's "
                         f"{_code(str(row.case.trace.get('path')))})")
        if any(isinstance(b, dict) for _, b in traced):
            lines.append("")

    errors = data.errors
    if errors:
        lines += [f"#### Errors: the lab, not the kernel ({len(errors)})", ""]
        for row in errors[:limit]:
            lines.append(f"- {_code(row.case.name)}: {md(row.case.message) or 'no message'}")
        lines += _more(len(errors), limit) + [""]

    compared = [row for row in data.rows
                if row.comparison is not None and row.comparison.outcome is not None]
    if compared:
        regressions = [r for r in compared if r.comparison.outcome == "regression"]
        inconclusive = [r for r in compared if r.comparison.outcome == "inconclusive"]
        lines.append(f"#### Against {md(selection.baseline_name)} (last "
                     f"{selection.baseline_runs} runs; all CPUs' wake-ups at each series' "
                     "tail quantile, p99.9 by default, and the decades above it that the "
                     "runs are long enough for)")
        lines.append("")
        lines.append(f"{len(regressions)} regression(s), {len(inconclusive)} inconclusive, "
                     f"{len(compared) - len(regressions) - len(inconclusive)} no change.")
        listed = regressions + inconclusive
        if listed:
            lines += ["", "| case | outcome | quantile | candidate | baseline | difference (CI) |",
                      "| --- | --- | --- | --- | --- | --- |"]
            for row in listed[:limit]:
                lines.append(_comparison_line(row))
            lines += _more(len(listed), limit)
        lines.append("")

    lines += _changes(data, limit)
    lines += _exposure(data, limit)

    if data.left_out:
        lines.append(f"Not plotted (cap of {selection.max_series} series): "
                     + ", ".join(_code(group_name(g)) for g in data.left_out[:limit])
                     + (" …" if len(data.left_out) > limit else ""))
        lines.append("")
    unplotted = {group_of(row.key) for row in failing} - {g.key for g in data.groups}
    if unplotted:
        lines.append("Some failing series are not plotted; narrow the report with --board.")
        lines.append("")
    where = f"[report.html]({report_link})" if report_link else "`report.html`"
    lines.append(f"Histograms, trends and overlays: {where} in this job's artifacts.")
    return "\n".join(lines) + "\n"


def _changes(data: ReportData, limit: int) -> list[str]:
    """The open change points of the default branch's series, new ones first marked."""
    changes = data.changes
    if changes.ref is None or not changes.found:
        return []
    lines = [f"#### Change points on {md(changes.ref)} ({len(changes.found)} open, "
             f"{len(changes.new)} new)", "",
             "| | series | change (95 % interval) | from the night of | commits | bisection |",
             "| --- | --- | --- | --- | --- | --- |"]
    for change in changes.found[:limit]:
        lines.append(f"| {'**new**' if change.new else ''} | {_code(change.series)} | "
                     f"{md(change.size())} {change.direction}"
                     f"{f', in {change.steps} steps' if change.steps > 1 else ''} | "
                     f"{change.night:%Y-%m-%d} | {_code(change.commits)} | "
                     f"{md(change.bisection or '')} |")
    return lines + _more(len(changes.found), limit) + [""]


def _exposure(data: ReportData, limit: int) -> list[str]:
    """Each kernel's pooled exposure on one board type under one load: its failing rows
    first, then the rest, at most ``limit``."""
    exposure = data.exposure
    if exposure is None or not (exposure.rows or exposure.unidentified_count):
        return []
    failing = exposure.failing
    lines = [f"#### {kernel_exposure.TITLE} ({len(exposure.rows)} kernel × board × load, "
             f"{len(failing)} failing; every stored run pooled)", ""]
    listed = list(failing) + [row for row in exposure.rows if not row.failed]
    if listed:
        lines += ["| kernel | board | load | cases (runs, pipelines) | board-hours | wake-ups "
                  "| > max\\_us | status |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for row in listed[:limit]:
            status = ("**FAIL**" if row.failed else md(kernel_exposure.status(row)))
            lines.append(f"| {_code(row.kernel.short)} | {md(row.board)} | "
                         f"{md(kernel_exposure.load(row))} | {kernel_exposure.cases(row)} | "
                         f"{kernel_exposure.hours(row.board_hours)} | {row.wakeups:,} | "
                         f"{md(kernel_exposure.count(row))} | {status} |")
        lines += _more(len(listed), limit)
        lines.append("")
    sentence = kernel_exposure.left_out(exposure)
    if sentence:
        lines += [md(sentence), ""]
    return lines


def _comparison_line(row: Row) -> str:
    comparison = row.comparison
    assert comparison is not None
    outcome = comparison.outcome or "–"
    hint = longer_hint(comparison)
    if hint:
        outcome += f": {hint}"
    elif comparison.outcome == "inconclusive" and comparison.warnings:
        outcome += f": {comparison.warnings[-1]}"
    ci = comparison.ci_us
    difference = ("–" if comparison.difference_us is None
                  else f"{comparison.difference_us:+g} µs"
                  + (f" ({ci[0]:+.1f} to {ci[1]:+.1f})" if ci else ""))
    quantile = "–" if comparison.quantile is None else quantile_name(comparison.quantile)
    return (f"| {_code(series_name(row.key))} | {md(outcome)} | {quantile} | "
            f"{md(_quantile(comparison.candidate_us, comparison.range_us))} | "
            f"{md(_quantile(comparison.baseline_us, comparison.range_us))} | "
            f"{md(difference)} |")


def _quantile(value: int | None, range_us: int | None) -> str:
    if value is None:
        return f"≥ {range_us} µs" if range_us else "–"
    return format_us(value)


def _run(row: Row) -> str:
    return ", ".join(run_parts(row.case))


def _more(total: int, limit: int) -> list[str]:
    # a blank line first: a text line straight after a table would read as one more row
    return ["", f"… and {total - limit} more in the report"] if total > limit else []
