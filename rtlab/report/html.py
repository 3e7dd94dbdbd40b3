"""The report page: one self-contained HTML file (styles inline, every figure embedded as
a data URI, nothing fetched from anywhere), so it opens the same from a CI artifact, a mail
or a laptop without network. Every piece of text from the store is escaped: messages and
names come from boards' consoles and branch names."""

import base64
import math
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path

import attr

from rtlab.report.data import GroupKey, ReportData, Row, group_name, run_parts, series_name
from rtlab.report.exposure import html_section as exposure_section
from rtlab.report.summary import longer_hint
from rtlab.report.traces import trace_link
from rtlab.verdict.thresholds import format_us


@attr.frozen
class Picture:
    file_name: str
    png: bytes = attr.field(repr=False)
    alt: str


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em;
       color: #1a1a1a; max-width: 1400px; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.05em; margin-top: 1.4em; }
.meta { color: #555; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.5em; text-align: left;
         vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.verdict, .status { font-weight: bold; padding: 0 0.4em; border-radius: 3px;
                    white-space: nowrap; }
.v-pass { background: #dff3df; color: #145214; }
.v-fail { background: #fbdcdc; color: #8b1111; }
.v-error { background: #fde9c8; color: #7a4500; }
.v-skipped { background: #e8e8e8; color: #444; }
.o-regression { color: #8b1111; font-weight: bold; }
.o-inconclusive { color: #7a4500; }
.counts span { margin-right: 1em; }
figure { margin: 0.8em 0 1.6em 0; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
.small { font-size: 0.85em; color: #555; }
.trace pre { font-size: 0.78em; background: #f7f7f7; border: 1px solid #e3e3e3;
             padding: 0.4em; overflow-x: auto; max-height: 24em; }
"""


def _verdict(verdict: str) -> str:
    return f'<span class="verdict v-{escape(verdict)}">{escape(verdict)}</span>'


def _us(value: float | None, *, past_range: int | None = None) -> str:
    if value is None:
        return f"≥ {past_range} µs" if past_range else "–"
    return escape(format_us(value))


def _run(row: Row) -> str:
    parts = run_parts(row.case)
    if row.case.ref_name:
        parts.append(row.case.ref_name)
    return escape(" · ".join(parts))


def _limits(row: Row) -> str:
    if not row.judged:
        return "–"
    return "<br>".join(f"{escape(limit.metric)} {escape(format_us(limit.value))}"
                       + (f' <span class="small">{escape(limit.source)}</span>'
                          if limit.source else "")
                       for limit in row.judged.values())


def _comparison(row: Row) -> str:
    comparison = row.comparison
    if comparison is None:
        return "–"
    if comparison.outcome is None:
        return f'<span class="small">{escape(comparison.message)}</span>'
    outcome = escape(comparison.outcome)
    hint = longer_hint(comparison)
    detail = escape(comparison.message)
    return (f'<span class="o-{outcome.replace(" ", "-")}">{outcome}</span>'
            + (f" ({escape(hint)})" if hint else "")
            + f'<br><span class="small">{detail}</span>')


def _tail(row: Row) -> str:
    tail = row.tail
    if tail is None:
        return "–"
    parts = []
    if tail.probability is not None and tail.threshold_us is not None:
        parts.append(escape(f"P(> {format_us(tail.threshold_us)}) "
                            f"{tail.probability:.2g} per wake-up"))
    if tail.per_hour is not None:
        parts.append(f"{tail.per_hour:.2g}/hour")
    if tail.bound_us is not None:
        ci = tail.bound_ci_us
        high = "∞" if ci and math.isinf(ci[1]) else (f"{ci[1]:.0f}" if ci else "?")
        bound = f"{tail.exceedance_probability:g} bound {tail.bound_us:.0f} µs"
        if ci:
            bound += f" (CI {ci[0]:.0f}–{high})"
        parts.append(escape(bound))
    warnings = "".join(f'<br><span class="small">{escape(w)}</span>' for w in tail.warnings)
    cpu = f"CPU{tail.cpu}: " if tail.cpu is not None else ""
    return escape(cpu) + ", ".join(parts) + warnings


def _summary_table(data: ReportData) -> str:
    with_tail = any(row.tail is not None for row in data.rows)
    head = ["case", "verdict", "run", "kernel", "max", "p99.9", "avg",
            "≥ range", "limit (judged by)", f"vs {data.selection.baseline_name}"]
    if with_tail:
        head.append("tail estimate")
    head.append("message")
    out = ["<table>", "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for row in data.rows:
        past = row.range_us if row.p99_9_past_range else None
        exceeded = "".join(f"<br><b>{escape(str(item))}</b>" for item in row.exceeded)
        cells = [
            f"<td><code>{escape(row.case.name)}</code></td>",
            f"<td>{_verdict(row.verdict)}</td>",
            f"<td>{_run(row)}</td>",
            f"<td>{escape(row.case.kernel_release or '–')}</td>",
            f'<td class="num">{_us(row.max_us)}</td>',
            f'<td class="num">{_us(row.p99_9_us, past_range=past)}</td>',
            f'<td class="num">{_us(row.avg_us)}</td>',
            f'<td class="num">{row.overflows if row.range_us else "–"}</td>',
            f"<td>{_limits(row)}</td>",
            f"<td>{_comparison(row)}</td>",
        ]
        if with_tail:
            cells.append(f"<td>{_tail(row)}</td>")
        cells.append(f"<td>{escape(row.case.message)}{exceeded}</td>")
        out.append(f'<tr id="{escape(_anchor(row))}">' + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _anchor(row: Row) -> str:
    return "case-" + "".join(c if c.isalnum() else "-" for c in series_name(row.key))


def _failing(data: ReportData, out_dir: Path | None = None) -> str:
    if not data.failing:
        return "<p>No case failed its limits.</p>"
    items = []
    for row in data.failing:
        figures = "; ".join(str(item) for item in row.exceeded) or row.case.message
        items.append(f'<li><a href="#{escape(_anchor(row))}"><code>'
                     f"{escape(row.case.name)}</code></a>: {escape(figures)}"
                     f'<br><span class="small">{escape(row.case.message)}</span>'
                     f"{_trace(row, out_dir)}</li>")
    return "<ul>" + "\n".join(items) + "</ul>"


def _trace(row: Row, out_dir: Path | None) -> str:
    """The breach as the kernel's trace tells it, its excerpt and a link to the whole
    trace; or why the case has none, when it asked for one."""
    trace = row.case.trace
    if not trace or not trace.get("requested"):
        return ""
    breach = trace.get("breach")
    if not trace.get("available", False):
        return (f'<div class="trace small">No trace: {escape(str(trace.get("reason")))}'
                "</div>")
    if trace.get("error"):
        return f'<div class="trace small">{escape(str(trace["error"]))}</div>'
    if not isinstance(breach, dict):
        return f'<div class="trace small">{escape(str(trace.get("note", "no trace kept")))}</div>'
    link = trace_link(trace, row.case.job_id, out_dir) if out_dir is not None else None
    size = f"{trace.get('lines')} lines, {int(trace.get('bytes') or 0) / 1024:.0f} KiB gzip"
    whole = (f'<a href="{escape(link)}">the whole trace</a> ({escape(size)})' if link
             else f"the whole trace: <code>{escape(str(trace.get('path') or trace.get('file')))}"
                  f"</code> ({escape(size)}), beside the case's record")
    excerpt = "\n".join(str(line) for line in breach.get("excerpt") or [])
    return (f'<div class="trace"><p><strong>Trace:</strong> {escape(str(breach.get("summary")))}'
            f"; {whole}</p><pre>{escape(excerpt)}</pre></div>")


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _figures(data: ReportData, pictures: Mapping[GroupKey, Sequence[Picture]]) -> str:
    out = []
    for group in data.groups:
        out.append(f"<h3>{escape(group_name(group.key))}</h3>")
        for picture in pictures.get(group.key, ()):
            out.append(f'<figure><img src="{_data_uri(picture.png)}" alt="{escape(picture.alt)}">'
                       f"<figcaption>{escape(picture.alt)} — also "
                       f"<code>{escape(picture.file_name)}</code> beside this page"
                       "</figcaption></figure>")
    if data.left_out:
        out.append(f"<p>Not plotted (the report draws at most {data.selection.max_series} "
                   "series, whole board × flavour × scenario groups, failures and errors "
                   "first; narrow it with <code>--board</code>/<code>--flavour</code> or "
                   "raise <code>--max-series</code>): "
                   + ", ".join(f"<code>{escape(group_name(g))}</code>" for g in data.left_out)
                   + "</p>")
    return "\n".join(out) or "<p>Nothing measured to plot.</p>"


_READING = """
<ul class="small">
<li>Current case: the newest stored case of each board × flavour × scenario × interval
(or of the candidate pipeline/ref). Figures are the worst CPU's.</li>
<li>Latency histograms: wake-ups per 1 µs bucket, one line per CPU, log scale. Wake-ups at
or past the histogram's range (<code>cyclictest -h</code>) are overflows, drawn as hatched
bars in the grey zone right of the range: their latency is only known to be ≥ the range.</li>
<li>Trends: max and p99.9 of the worst CPU per run; dashed lines are the limits of the
thresholds file in force now; red rings mark runs that failed; grey crosses at the foot
mark errors, which have no figure. A p99.9 among the overflows is drawn as a hollow
triangle at the range (a lower bound).</li>
<li>Comparison: the tail quantile (p99.9 unless <code>thresholds.yaml</code> names another)
of all CPUs' wake-ups of the candidate against the baseline runs', and each decade above it
(p99.99, p99.999) that every run has 100 wake-ups beyond, each at its share of the confidence
(hierarchical bootstrap, <code>rtlab.verdict.comparison.compare_tail</code>): <em>regression</em>
when at one of them the confidence interval of the difference lies above 0 and the difference
beyond the tolerance, <em>no change</em> when none shows a regression and at the named quantile the
interval lies below the tolerance, otherwise <em>inconclusive</em>, with how much longer the
candidate would have to run.</li>
</ul>
"""


def _changes_section(data: ReportData) -> str:
    """The open change points of the default branch's series (rtlab.report.changes)."""
    changes = data.changes
    if changes.ref is None:
        return ""
    head = (f'<h2 id="change-points">Change points on {escape(changes.ref)}</h2>'
            f"<p>{len(changes.found)} open ({len(changes.new)} new) over {changes.series} "
            "series: where a series' tail changed across its runs, with the 95 % interval "
            "of the change and the commits between the last run before and the first "
            "after.</p>")
    if not changes.found:
        return head
    rows = "".join(
        f"<tr><td>{'new' if c.new else ''}</td><td>{escape(c.series)}</td>"
        f"<td>{escape(c.size())}</td><td>{escape(c.direction)}"
        f"{escape(f', in {c.steps} steps') if c.steps > 1 else ''}</td>"
        f"<td>{c.night:%Y-%m-%d}</td><td><code>{escape(c.commits)}</code></td>"
        f"<td>{escape(c.bisection or '')}</td></tr>" for c in changes.found)
    return (head + "<table><tr><th></th><th>series</th><th>change</th><th>direction</th>"
            "<th>from the night of</th><th>commits</th><th>bisection</th></tr>"
            + rows + "</table>")


def page(data: ReportData, pictures: Mapping[GroupKey, Sequence[Picture]],
         out_dir: Path | None = None) -> str:
    """The report page; ``out_dir`` (where it is written) lets it link files it names."""
    selection = data.selection
    counts = data.counts()
    scope = []
    if selection.boards:
        scope.append("boards " + ", ".join(selection.boards))
    if selection.flavours:
        scope.append("flavours " + ", ".join(selection.flavours))
    meta = (f"Generated {data.generated.strftime('%Y-%m-%d %H:%M UTC')} · "
            f"{len(data.rows)} series, {data.cases_in_store} stored cases"
            + (" · " + "; ".join(scope) if scope else "")
            + f" · candidate: {selection.describe_candidate()} · baseline: last "
              f"{selection.baseline_runs} runs on {selection.baseline_name}")
    count_html = "".join(f"<span>{_verdict(verdict)} {count}</span>"
                         for verdict, count in counts.items())
    regressions = len(data.regressions)
    body = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>rtlab latency report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>rtlab latency report</h1>",
        f'<p class="meta">{escape(meta)}</p>',
        f'<p class="counts" id="verdict-counts">{count_html}'
        f"<span>regressions vs {escape(selection.baseline_name)}: {regressions}</span></p>",
        "<h2>Summary</h2>",
        _summary_table(data) if data.rows else "<p>No stored cases match.</p>",
        "<h2>Failing cases</h2>",
        _failing(data, out_dir),
        _changes_section(data),
        exposure_section(data.exposure),
        "<h2>Figures</h2>",
        _figures(data, pictures),
        "<h2>How to read this report</h2>",
        _READING,
        "</body></html>",
    ]
    return "\n".join(body) + "\n"
