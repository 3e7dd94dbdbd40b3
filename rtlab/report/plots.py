"""The report's figures (matplotlib, Agg): the latency plot (per-CPU histograms, log y),
the trend of max and p99.9 against the limit, and the candidate/baseline overlay. One
figure per board × flavour × scenario, one panel per interval.

Figures are built on :class:`matplotlib.figure.Figure` directly, not pyplot, so nothing
global (open figures, the backend of whoever imports rtlab) is touched. Log axes keep only
their decade ticks: minor ticks cost most of a figure's drawing time and add nothing a
reader needs on a latency axis.
"""

import datetime
import io
import math
import textwrap
from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullLocator
from matplotlib.transforms import blended_transform_factory

from rtlab.report.changes import ChangeView
from rtlab.report.data import (
    CpuHistogram,
    Group,
    LatencyPlot,
    Limit,
    Overlay,
    Trend,
    group_name,
    merged,
)
from rtlab.verdict.comparison import DEFAULT_QUANTILE, quantile_name
from rtlab.verdict.thresholds import format_us

DPI = 100
# the blank margin around what a figure draws
PAD_INCHES = 0.15
# the canvas a figure has beyond its margins, cropped away (png)
SLACK_INCHES = 1.5
PANEL_WIDTH = 5.6
# a one-panel figure still needs room for its title
MIN_WIDTH = 8.0
# more points than this and a trend's x axis is time; fewer, one tick per run, named
CATEGORICAL_POINTS = 16
LIMIT_COLOURS = {"max_us": "#d62728", "p99_9_us": "#ff7f0e", "avg_us": "#2ca02c"}
FAIL_COLOUR = "#d62728"
RC = {"text.hinting": "no_hinting"}
"""matplotlib's settings the figures are drawn with (``matplotlib.rc_context``): glyphs
unhinted, a sixth less drawing than FreeType's hinting, which at 100 dpi only snaps
stems to pixels."""


def warm_up() -> None:
    """Load fonts and the PNG writer once, before the drawing workers fork: each of them
    would otherwise pay for it again."""
    figure = Figure(figsize=(1, 1), dpi=DPI)
    axes = figure.subplots()
    axes.set_title("µs ≥ 0123456789", fontsize=8)
    axes.text(0, 0, "bold", fontweight="bold")
    png(figure)


def png(figure: Figure) -> bytes:
    """The figure as PNG, cropped to what it draws plus a margin, so that legends beside
    or below a panel are never cut off and no blank border is left.

    savefig's "tight" box draws a figure twice, once to measure and once to write: two
    fifths of a report's drawing; and asking the artists for their extent after a draw
    lays every text out again (a tenth). Here the canvas is drawn once and cropped to its
    inked pixels: the canvas has SLACK_INCHES beyond the figure's frame on every side, so
    the corner is background; a figure whose ink reaches the canvas's edge (where "tight"
    would widen it) is written by savefig's tight box."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())
    # one 32-bit word per pixel: a fifth of the work of comparing its four bytes
    words = pixels.view(np.uint32)[:, :, 0]
    ink = words != words[0, 0]
    rows, columns = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    out = io.BytesIO()
    if not rows.size or rows[0] == 0 or columns[0] == 0 or \
            rows[-1] == ink.shape[0] - 1 or columns[-1] == ink.shape[1] - 1:
        figure.savefig(out, format="png", dpi=DPI, bbox_inches="tight",
                       pad_inches=PAD_INCHES)
        return out.getvalue()
    pad = round(PAD_INCHES * DPI)
    Image.fromarray(pixels[max(rows[0] - pad, 0):rows[-1] + 1 + pad,
                           max(columns[0] - pad, 0):columns[-1] + 1 + pad]).save(
        out, format="png", dpi=(DPI, DPI), compress_level=1)
    return out.getvalue()


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _plain(value: float, _pos: object = None) -> str:
    """Log tick labels as numbers people read (1, 10, 100, 1000) and, past those, as
    powers of ten in one narrow label (10⁵, 10⁻⁴), so the axis label keeps its room."""
    if value <= 0:
        return ""
    exponent = math.log10(value)
    if 1e-2 <= value < 1e4 or abs(exponent - round(exponent)) > 1e-9:
        return f"{value:g}"
    return "10" + str(round(exponent)).translate(_SUPERSCRIPT)


def _panels(width: float, height: float, rows: int, cols: int, *, left: float,
            right: float, top: float, bottom: float, wspace: float = 0.0,
            hspace: float = 0.0) -> tuple[Figure, np.ndarray]:
    """A figure of rows × cols axes with margins and gaps in inches. Fixed margins
    instead of a layout engine, which would draw every figure twice (half the report's
    time): titles are wrapped to fit and legends sit where the margins leave room."""
    # blank canvas on every side for what reaches past the margins (a legend beside or
    # below a panel): png() crops it away, and the figure is drawn once
    left, right, top, bottom = (margin + SLACK_INCHES for margin in (left, right, top,
                                                                     bottom))
    width, height = width + 2 * SLACK_INCHES, height + 2 * SLACK_INCHES
    figure = Figure(figsize=(width, height), dpi=DPI)
    axes_width = (width - left - right - (cols - 1) * wspace) / cols
    axes_height = (height - top - bottom - (rows - 1) * hspace) / rows
    axes = figure.subplots(rows, cols, squeeze=False, gridspec_kw={
        "left": left / width, "right": 1 - right / width, "top": 1 - top / height,
        "bottom": bottom / height, "wspace": wspace / axes_width,
        "hspace": hspace / axes_height})
    return figure, axes


def _suptitle(figure: Figure, text: str) -> None:
    """The figure's title where matplotlib puts it on a canvas without the slack (2 % of
    the height below the top), so that cropping the slack leaves the usual gap."""
    height = figure.get_size_inches()[1]
    below = SLACK_INCHES + 0.02 * (height - 2 * SLACK_INCHES)
    figure.suptitle(text, fontsize=12, fontweight="bold", y=1 - below / height)


def _log_y(axes: Axes) -> None:
    axes.set_yscale("log")
    axes.yaxis.set_major_locator(LogLocator(base=10, numticks=8))
    axes.yaxis.set_minor_locator(NullLocator())
    axes.yaxis.set_major_formatter(FuncFormatter(_plain))


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width)) or text


def _when(case_started: datetime.datetime) -> str:
    return case_started.strftime("%Y-%m-%d %H:%M UTC")


# ----------------------------------------------------------- latency plot ----


def _overflow_zone(range_us: int) -> float:
    """Width (µs of the axis) of the zone right of the range where overflows are drawn."""
    return max(range_us * 0.08, 3.0)


def _draw_histograms(axes: Axes, hists: Sequence[CpuHistogram], *, fractions: bool,
                     styles: Sequence[dict], limit: Limit | None) -> None:
    """Step lines per histogram over 1 µs buckets, the overflows as bars in a shaded zone
    past the range (never folded into the last bucket), and the max limit as a line."""
    range_us = min(h.range_us for h in hists)
    last = max((int(np.nonzero(h.counts)[0][-1]) + 1 if h.counts.any() else 0)
               for h in hists)
    overflows = any(h.overflows for h in hists)
    x_end = float(range_us) if overflows else max(last * 1.15 + 5, 20.0)
    if limit is not None and limit.value <= range_us:
        x_end = max(x_end, limit.value * 1.08)
    x_end = min(x_end, float(range_us))
    zone = _overflow_zone(range_us) if overflows else 0.0
    peak = 0.0
    edges = np.arange(range_us + 1)
    for hist, style in zip(hists, styles, strict=True):
        counts = hist.counts[:range_us].astype(float)
        scale = 1.0 / hist.samples if fractions and hist.samples else 1.0
        values = counts * scale
        # a step per bucket; empty buckets drop to the axis floor, as in the field's plots
        axes.step(edges, np.append(values, values[-1:]), where="post", **style)
        peak = max(peak, float(values.max(initial=0)), hist.overflows * scale)
    if overflows:
        axes.axvspan(range_us, range_us + zone, color="0.92", zorder=0)
        width = zone / (len(hists) + 1)
        for index, (hist, style) in enumerate(zip(hists, styles, strict=True)):
            if hist.overflows:
                scale = 1.0 / hist.samples if fractions and hist.samples else 1.0
                axes.bar(range_us + width * (index + 0.5), hist.overflows * scale, width,
                         align="edge", color=style.get("color"), alpha=0.8,
                         hatch="//", edgecolor="white", linewidth=0)
        total = sum(h.overflows for h in hists)
        what = "overflows" if fractions else f"{total} wake-ups"
        # beside the zone, not in it: the bars fill it
        axes.text(range_us - zone * 0.15, 0.975, f"{what} ≥ {range_us} µs →",
                  transform=blended_transform_factory(axes.transData, axes.transAxes),
                  ha="right", va="top", fontsize=8, color="0.2",
                  bbox={"facecolor": "white", "edgecolor": "0.8", "alpha": 0.85,
                        "boxstyle": "round,pad=0.25"})
    floor = (0.5 / max(h.samples for h in hists)) if fractions else 0.7
    axes.set_ylim(floor, max(peak, floor * 10) * 3)
    axes.set_xlim(0, (range_us + zone) if overflows else x_end)
    # ticks only where buckets are: the overflow zone has no latency scale
    shown_end = float(range_us) if overflows else x_end
    axes.set_xticks([tick for tick in MaxNLocator(nbins=8, integer=True).tick_values(
        0, shown_end) if 0 <= tick <= shown_end])
    if limit is not None and limit.value <= range_us:
        axes.axvline(limit.value, color=LIMIT_COLOURS["max_us"], linestyle="--",
                     linewidth=1.2, label=_limit_label(limit))


def _limit_label(limit: Limit, note: str = "") -> str:
    """Two short lines, so that a legend stays narrow: the limit, then where it is from."""
    where = [limit.source or "", "as judged" if not limit.current else "", note]
    return (f"limit {limit.metric} {format_us(limit.value)}\n"
            + ", ".join(part for part in where if part))


def _limit_note(limit: Limit | None, range_us: int) -> Line2D | None:
    """A legend entry for a limit past the histogram's range (no line can show it)."""
    if limit is None or limit.value <= range_us:
        return None
    return Line2D([], [], color=LIMIT_COLOURS["max_us"], linestyle="--",
                  label=_limit_label(limit, f"past the {range_us} µs histogram"))


def latency_figure(group: Group) -> Figure:
    """The latency plot of a board × flavour × scenario: per interval, every CPU's
    histogram of its newest measured case."""
    panels = group.latency
    figure, axes_grid = _panels(max(PANEL_WIDTH * len(panels), MIN_WIDTH), 5.6, 1,
                                len(panels), left=0.85, right=0.3, top=1.0, bottom=1.35,
                                wspace=0.9)
    for axes, panel in zip(axes_grid[0], panels, strict=True):
        _latency_panel(axes, panel)
    _suptitle(figure, f"Latency histogram: {_title(group)} (newest measured case)")
    return figure


def _latency_panel(axes: Axes, panel: LatencyPlot) -> None:
    limit = panel.limits.get("max_us")
    styles = [{"color": f"C{index % 10}", "linewidth": 1.3,
               "label": _cpu_label(hist)} for index, hist in enumerate(panel.cpus)]
    _draw_histograms(axes, panel.cpus, fractions=False, styles=styles, limit=limit)
    _log_y(axes)
    axes.set_xlabel("latency (µs, 1 µs buckets)")
    axes.set_ylabel("wake-ups per bucket (log)")
    case = panel.case
    run = " · ".join(filter(None, (_when(case.started), _run_name(case))))
    axes.set_title(f"{_interval_name(panel.key[3])} · {case.verdict}\n{run}", fontsize=9)
    handles, _ = axes.get_legend_handles_labels()
    note = _limit_note(limit, min(h.range_us for h in panel.cpus))
    if note is not None:
        handles.append(note)
    _legend_below(axes, handles)
    axes.grid(True, which="major", alpha=0.3)


def _legend_below(axes: Axes, handles: list, ncol: int = 2) -> None:
    """Under the panel, where it can cover no data."""
    axes.legend(handles=handles, fontsize=7.5, loc="upper center", ncol=ncol,
                bbox_to_anchor=(0.5, -0.14), frameon=False, borderaxespad=0)


def _cpu_label(hist: CpuHistogram) -> str:
    label = f"{hist.label}: max {_us(hist.max_us)}"
    if hist.overflows:
        label += f", {hist.overflows} of {hist.samples} ≥ {hist.range_us} µs"
    return label


def _us(value: float | None) -> str:
    return "?" if value is None else format_us(value)


def _run_name(case: object) -> str:
    pipeline = getattr(case, "pipeline_id", None)
    commit = getattr(case, "commit_sha", None)
    parts = []
    if pipeline:
        parts.append(f"pipeline #{pipeline}")
    if commit:
        parts.append(f"commit {commit[:8]}")
    return " · ".join(parts)


def _interval_name(interval: int | None) -> str:
    return f"interval {interval} µs" if interval is not None else "per measuring thread"


def _title(group: Group) -> str:
    board, flavour, scenario = group.key
    return f"{board} · {flavour} · {scenario}"


# ------------------------------------------------------------------ trend ----


def trend_figure(group: Group) -> Figure:
    """Max and p99.9 of the worst CPU per run, a panel per interval, the limits in force
    now as lines, failed runs marked, errors at the foot (they have no figure)."""
    panels = group.trends
    rows = len(panels)
    # named runs have two-line tick labels at an angle; dates fit on one line
    named = any(_categorical(trend) for trend in panels)
    gap, bottom = (1.35, 1.15) if named else (0.9, 0.75)
    figure, axes_grid = _panels(12.5, 0.6 + 2.3 * rows + gap * (rows - 1) + bottom, rows, 1,
                                left=0.9, right=3.3, top=0.6, bottom=bottom, hspace=gap)
    for axes, trend in zip(axes_grid[:, 0], panels, strict=True):
        _trend_panel(axes, trend)
    worst = "CPU" if any(trend.key[3] is not None for trend in panels) else "thread"
    _suptitle(figure, f"Trend: {_title(group)} — worst {worst} per run")
    return figure


def _categorical(trend: Trend) -> bool:
    return len(trend.points) + len(trend.errors) <= CATEGORICAL_POINTS


def _trend_panel(axes: Axes, trend: Trend) -> None:
    points = trend.points
    categorical = _categorical(trend)
    # every run in time order, errors included, so a categorical axis keeps their place
    runs = sorted([(p.started, index, "point", p.label) for index, p in enumerate(points)]
                  + [(e.started, index, "error", e.label)
                     for index, e in enumerate(trend.errors)])
    if categorical:
        position = {(kind, index): float(slot)
                    for slot, (_, index, kind, _) in enumerate(runs)}
        labels = [_run_tick(label, when) for when, _, _, label in runs]
    else:
        # matplotlib's date numbers are days since its epoch; date2num per point costs
        # more than the rest of a thousand-run trend
        epoch = float(date2num(datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)))
        position = {(kind, index): epoch + when.timestamp() / 86400.0
                    for when, index, kind, _ in runs}
    xs = np.array([position[("point", i)] for i in range(len(points))])
    max_values = np.array([p.max_us if p.max_us is not None else np.nan for p in points])
    p99 = np.array([p.p99_9_us if p.p99_9_us is not None else np.nan for p in points])
    past = np.array([p.p99_9_past_range for p in points], dtype=bool)
    failed = np.array([p.failed for p in points], dtype=bool)
    # markers only while they can be told apart; a long history is a line
    marker = "o" if len(points) <= 60 else ("." if len(points) <= 300 else None)
    width = 1.2 if len(points) <= 300 else 0.7
    if len(points):
        axes.plot(xs, max_values, color="C0", marker=marker, markersize=4, linewidth=width,
                  label="max")
        if not np.isnan(p99).all():
            axes.plot(xs, p99, color="C1", marker=marker, markersize=4, linewidth=width,
                      label="p99.9")
        if past.any() and trend.range_us:
            axes.plot(xs[past], np.full(past.sum(), float(trend.range_us)), linestyle="none",
                      marker="^", markersize=7, markerfacecolor="none", color="C1",
                      label=f"p99.9 ≥ {trend.range_us} µs (past the histogram)")
        if failed.any():
            # ringed at its max; a fail without one (a CPU that never woke) at the foot
            known = failed & ~np.isnan(max_values)
            ring = {"linestyle": "none", "marker": "o", "markersize": 11,
                    "markerfacecolor": "none", "markeredgecolor": FAIL_COLOUR,
                    "markeredgewidth": 2}
            axes.plot(xs[known], max_values[known], label=f"failed ({int(failed.sum())})",
                      **ring)
            if (failed & ~known).any():
                axes.plot(xs[failed & ~known], np.full(int((failed & ~known).sum()), 0.04),
                          transform=blended_transform_factory(axes.transData,
                                                              axes.transAxes),
                          clip_on=False, **ring)
    values = [v for v in (*max_values, *p99) if not math.isnan(v) and v > 0]
    if past.any() and trend.range_us:
        values.append(float(trend.range_us))
    top = max(values) if values else 1.0
    bottom = min(values) if values else 1.0
    notes = []
    for metric in ("max_us", "p99_9_us"):
        limit = trend.limits.get(metric)
        if limit is None:
            continue
        if limit.value <= top * 1000:
            axes.axhline(limit.value, color=LIMIT_COLOURS[metric], linestyle="--",
                         linewidth=1.3, label=_limit_label(limit))
            top = max(top, limit.value)
        else:
            notes.append(Line2D([], [], color=LIMIT_COLOURS[metric], linestyle="--",
                                label=_limit_label(limit, "off scale")))
    if top / max(bottom, 1e-9) > 100:
        _log_y(axes)
        axes.set_ylim(bottom / 2, top * 2.5)
    else:
        axes.set_ylim(0, top * 1.15)
    if trend.errors:
        # an error has no figure: a mark at the foot of the axes, never a value
        foot = blended_transform_factory(axes.transData, axes.transAxes)
        ex = [position[("error", i)] for i in range(len(trend.errors))]
        axes.plot(ex, [0.04] * len(ex), transform=foot, linestyle="none", marker="X",
                  markersize=8, color="0.35", label=f"error, no figure ({len(ex)})",
                  clip_on=False)
    for change in trend.changes:
        _change_mark(axes, change, _change_x(change, runs, position, categorical))
    axes.set_ylabel("latency (µs)")
    older = (f" — the newest {len(trend.points) + len(trend.errors)} runs, {trend.older} "
             "older not drawn" if trend.older else "")
    axes.set_title(_interval_name(trend.key[3]) + older, fontsize=10, loc="left")
    if categorical:
        axes.set_xticks(range(len(runs)), labels)
        axes.set_xlim(-0.6, len(runs) - 0.4)
        axes.tick_params(axis="x", labelrotation=30, labelsize=8)
        for label in axes.get_xticklabels():
            label.set_horizontalalignment("right")
        axes.set_xlabel("run (pipeline, commit, or start time UTC)")
    else:
        locator = AutoDateLocator(maxticks=10)
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))
        axes.set_xlabel("run started (UTC)")
    handles, _ = axes.get_legend_handles_labels()
    axes.legend(handles=handles + notes, fontsize=8, loc="upper left",
                bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    axes.grid(True, which="major", alpha=0.3)


def _change_x(change: ChangeView, runs: list, position: dict, categorical: bool) -> float:
    """Where a change point is drawn: just before its first run after."""
    if not categorical:
        epoch = float(date2num(datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)))
        return epoch + change.night.timestamp() / 86400.0 - 0.25
    after = next((position[(kind, index)] for when, index, kind, _ in runs
                  if when >= change.night), float(len(runs)))
    return after - 0.5


def _change_mark(axes: Axes, change: ChangeView, x: float) -> None:
    """A change point: a line where the series changed, its size and commit range."""
    colour = FAIL_COLOUR if change.direction == "regression" else "tab:green"
    axes.axvline(x, color=colour, linestyle=":", linewidth=1.6,
                 label=f"change {change.size()} ({change.commits})")
    foot = blended_transform_factory(axes.transData, axes.transAxes)
    axes.text(x, 0.97, f" {change.size()}\n {change.commits}", transform=foot,
              fontsize=7.5, color=colour, va="top", ha="left")


def _run_tick(label: str | None, when: datetime.datetime) -> str:
    stamp = when.strftime("%m-%d %H:%M")
    return f"{label}\n{stamp}" if label else stamp


# ---------------------------------------------------------------- overlay ----


def overlay_figure(group: Group) -> Figure:
    """Candidate against baseline, every CPU's wake-ups together, as fractions of each
    run's wake-ups (so runs of different lengths compare), log y."""
    panels = group.overlays
    titles = [_overlay_title(overlay) for overlay in panels]
    # room above the panels for the longest verdict (8.5 pt lines) under the figure title
    lines = max(title.count("\n") + 1 for title in titles)
    figure, axes_grid = _panels(max(PANEL_WIDTH * len(panels), MIN_WIDTH), 5.3 + 0.15 * lines,
                                1, len(panels), left=0.85, right=0.3, top=0.5 + 0.15 * lines,
                                bottom=1.65, wspace=0.9)
    for axes, overlay, title in zip(axes_grid[0], panels, titles, strict=True):
        _overlay_panel(axes, overlay)
        axes.set_title(title, fontsize=8.5)
    _suptitle(figure, f"Candidate vs baseline: {_title(group)}")
    return figure


def _overlay_panel(axes: Axes, overlay: Overlay) -> None:
    pooled = merged(overlay.baseline_hists, "baseline")
    runs = len(overlay.baseline_hists)
    hists: list[CpuHistogram] = list(overlay.baseline_hists)
    styles: list[dict] = [{"color": "0.6", "linewidth": 0.8, "alpha": 0.7,
                           "label": f"baseline runs ({runs})" if index == 0 else None}
                          for index in range(runs)]
    if pooled is not None:
        hists.append(pooled)
        styles.append({"color": "C0", "linewidth": 1.6,
                       "label": f"baseline: {runs} run{'s' if runs != 1 else ''} pooled"})
    hists.append(overlay.candidate_hist)
    cand_name = " · ".join(filter(None, (_run_name(overlay.candidate),
                                         _when(overlay.candidate.started))))
    styles.append({"color": FAIL_COLOUR, "linewidth": 1.8,
                   "label": f"candidate: {cand_name}"})
    _draw_histograms(axes, hists, fractions=True, styles=styles, limit=None)
    _log_y(axes)
    comparison = overlay.comparison
    if comparison is not None:
        # the quantile the verdict came from (compare_tail may have decided further out)
        name = quantile_name(comparison.quantile or DEFAULT_QUANTILE)
        for value, colour, who in ((comparison.baseline_us, "C0", "baseline"),
                                   (comparison.candidate_us, FAIL_COLOUR, "candidate")):
            if value is not None:
                axes.axvline(value, color=colour, linestyle=":", linewidth=1.2,
                             label=f"{who} {name} {value} µs")
    axes.set_xlabel("latency (µs, 1 µs buckets)")
    axes.set_ylabel("fraction of wake-ups (log)")
    handles, _ = axes.get_legend_handles_labels()
    # one column: the candidate's name is long, and two would run into the next panel
    _legend_below(axes, handles, ncol=1)
    axes.grid(True, which="major", alpha=0.3)


def _overlay_title(overlay: Overlay) -> str:
    """The verdict, and when several quantiles were compared, each one's outcome on a
    line of its own (the bracketed detail of compare_tail's message, shortened)."""
    comparison = overlay.comparison
    if comparison is None:
        return f"{_interval_name(overlay.key[3])}: not compared"
    verdict = comparison.message.split(" [", 1)[0]
    title = _wrap(f"{_interval_name(overlay.key[3])}: {verdict}", 70)
    if len(comparison.compared) > 1:
        title += "\n" + _wrap(" · ".join(f"{quantile_name(q)} {outcome} {difference:+g} µs"
                                          for q, outcome, difference in comparison.compared),
                               70)
    return title


# the kinds of figure, in the order the page shows them: file name prefix -> what it shows
# (rtlab.report.build.KINDS names the same prefixes)
KINDS = {"histogram": "Latency histograms per CPU", "trend": "Trend of max and p99.9",
         "compare": "Candidate vs baseline histograms"}


def file_name(group: Group, kind: str) -> str:
    return f"{kind}-" + "-".join(_safe(part) for part in group_name(group.key).split("/")) + \
        ".png"


def figure(group: Group, kind: str) -> Figure:
    draw = {"histogram": latency_figure, "trend": trend_figure, "compare": overlay_figure}
    return draw[kind](group)


def figure_files(group: Group) -> dict[str, Figure]:
    """The figures of a group by file name."""
    return {file_name(group, kind): figure(group, kind) for kind in group.kinds}


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)
