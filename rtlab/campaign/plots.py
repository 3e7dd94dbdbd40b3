"""A campaign report's figures (matplotlib, Agg), per board: the studies' headline figure
(the maximum against the load, one line per variant, a panel per interval, with the
tail's expectation for that many wake-ups beside every maximum and the p99.9 / p99.99
where the runs are long enough), the average against the load, and every variant's
per-CPU histograms side by side."""

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from rtlab.campaign.report import CampaignData, Cell
from rtlab.verdict.comparison import quantile_name
from rtlab.verdict.histogram import Histogram

# one colour per variant, in the campaign's order (colour-blind safe: Okabe-Ito)
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
STYLES = {0.999: "--", 0.9999: ":", 0.99: "-."}
DPI = 100


def _plain(value: float, _pos: object = None) -> str:
    return f"{value:g}" if value > 0 else ""


def _measured(axes) -> bool:  # noqa: ANN001 - matplotlib Axes
    """Whether the panel holds a value a log axis can show; a panel of cases that all
    errored holds none, and matplotlib refuses to draw an empty log axis."""
    for line in axes.lines:
        values = np.asarray(line.get_ydata(), dtype=float)
        if np.any(values[np.isfinite(values)] > 0):
            return True
    return False


def _not_measured(axes) -> None:  # noqa: ANN001 - matplotlib Axes
    axes.text(0.5, 0.5, "not measured", ha="center", va="center", transform=axes.transAxes,
              fontsize=8, color="#777777")


def _log_y(axes) -> None:  # noqa: ANN001 - matplotlib Axes
    if not _measured(axes):
        _not_measured(axes)
        return
    axes.set_yscale("log")
    # 1-2-5 ticks: a campaign's figures often span less than a decade
    axes.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axes.yaxis.set_minor_locator(NullLocator())
    axes.yaxis.set_major_formatter(FuncFormatter(_plain))
    axes.grid(True, which="major", axis="y", color="#e4e4e4", linewidth=0.6)


def _colour(data: CampaignData, variant: str) -> str:
    return COLOURS[data.variants().index(variant) % len(COLOURS)]


def headline_figure(data: CampaignData, board: str) -> Figure:
    """The maximum against the load, one line per variant, per interval."""
    intervals = data.intervals(board)
    figure = Figure(figsize=(max(6.0, 5.2 * len(intervals)), 4.4), dpi=DPI)
    panels = figure.subplots(1, len(intervals), squeeze=False)[0]
    variants = data.variants()
    quantiles = [q for q in data.campaign.quantiles if q in STYLES and q > 0.99]
    drawn_quantiles: set[float] = set()
    for axes, interval in zip(panels, intervals, strict=True):
        loads = data.loads(board, interval)
        x = np.arange(len(loads), dtype=float)
        width = 0.6 / max(len(variants), 1)
        for index, variant in enumerate(variants):
            colour = _colour(data, variant)
            cells = [data.cell(board, variant, load, interval) for load in loads]
            offset = x + (index - (len(variants) - 1) / 2) * width
            maxima = [c.max_us if c is not None else None for c in cells]
            axes.plot(offset, [np.nan if m is None else m for m in maxima], "-o",
                      color=colour, markersize=5, linewidth=1.6, label=variant)
            for position, cell in zip(offset, cells, strict=True):
                expected = cell.expected() if cell is not None else None
                if (expected is None or expected.expected_us is None
                        or expected.range_us is None):
                    continue
                low, high = expected.range_us
                high = high if np.isfinite(high) else axes.get_ylim()[1]
                axes.vlines(position + width * 0.35, low, high, color=colour, alpha=0.45,
                            linewidth=3)
                axes.plot(position + width * 0.35, expected.expected_us, "_", color=colour,
                          markersize=8)
                if expected.outlier and cell is not None and cell.max_us is not None:
                    axes.plot(position, cell.max_us, "o", markersize=11, fillstyle="none",
                              color="#d62728")
            for quantile in quantiles:
                values = []
                for cell in cells:
                    long_enough, value = (cell.quantile(quantile) if cell is not None
                                          else (False, None))
                    values.append(value if long_enough and value is not None else np.nan)
                if not np.all(np.isnan(values)):
                    drawn_quantiles.add(quantile)
                    axes.plot(offset, values, STYLES[quantile], color=colour, linewidth=1.0)
        axes.set_xticks(x, loads, fontsize=8, rotation=30)
        axes.set_xlim(-0.6, len(loads) - 0.4)
        _log_y(axes)
        axes.set_title(f"{board}: cyclictest -i {interval} µs", fontsize=10)
        axes.set_xlabel("load")
        axes.set_ylabel("latency (µs)")
    handles = [Line2D([], [], color=_colour(data, v), marker="o", label=v) for v in variants]
    handles.append(Line2D([], [], color="#777777", linewidth=3, alpha=0.45,
                          label="the tail's max for that many wake-ups (95 % of runs)"))
    handles.append(Line2D([], [], color="#d62728", marker="o", fillstyle="none",
                          linestyle="", label="max above it: a single outlier"))
    handles += [Line2D([], [], color="#777777", linestyle=STYLES[q],
                       label=f"{quantile_name(q)}") for q in sorted(drawn_quantiles)]
    figure.legend(handles=handles, loc="lower center", ncol=min(len(handles), 4),
                  fontsize=8, frameon=False, bbox_to_anchor=(0.5, -0.02))
    figure.suptitle(f"Campaign {data.campaign.name}: the maximum against the load",
                    fontsize=11)
    figure.subplots_adjust(bottom=0.28, top=0.86, wspace=0.25)
    return figure


def average_figure(data: CampaignData, board: str) -> Figure:
    intervals = data.intervals(board)
    figure = Figure(figsize=(max(6.0, 5.2 * len(intervals)), 3.8), dpi=DPI)
    panels = figure.subplots(1, len(intervals), squeeze=False)[0]
    for axes, interval in zip(panels, intervals, strict=True):
        loads = data.loads(board, interval)
        x = np.arange(len(loads), dtype=float)
        for variant in data.variants():
            cells = [data.cell(board, variant, load, interval) for load in loads]
            values = [c.avg_us if c is not None and c.avg_us is not None else np.nan
                      for c in cells]
            axes.plot(x, values, "-o", color=_colour(data, variant), markersize=4,
                      label=variant)
        axes.set_xticks(x, loads, fontsize=8, rotation=30)
        _log_y(axes)
        axes.set_title(f"{board}: average, -i {interval} µs", fontsize=10)
        axes.set_ylabel("latency (µs)")
    panels[0].legend(fontsize=8, frameon=False)
    figure.subplots_adjust(top=0.88, bottom=0.14, wspace=0.25)
    return figure


def _cpu_histograms(cell: Cell) -> dict[int | None, Histogram]:
    """Each CPU's wake-ups over every measured run of the cell."""
    per_cpu: dict[int | None, list[Histogram]] = {}
    for run in cell.measured:
        for cpu in run.cpus:
            if cpu.histogram is not None:
                per_cpu.setdefault(cpu.cpu, []).append(cpu.histogram)
    return {cpu: Histogram.merged(hists) for cpu, hists in sorted(
        per_cpu.items(), key=lambda item: -1 if item[0] is None else item[0])}


def histogram_figure(data: CampaignData, board: str, interval: int) -> Figure:
    """Every variant's per-CPU histograms side by side (a column per variant, a row per
    load); wake-ups past the histogram's range are counted in the panel's corner."""
    loads = data.loads(board, interval)
    variants = data.variants()
    figure = Figure(figsize=(2.9 * len(variants) + 0.8, 1.9 * len(loads) + 0.9), dpi=DPI)
    grid = figure.subplots(len(loads), len(variants), squeeze=False, sharex=True)
    for row, load in enumerate(loads):
        for column, variant in enumerate(variants):
            axes = grid[row][column]
            cell = data.cell(board, variant, load, interval)
            if row == 0:
                axes.set_title(variant, fontsize=9)
            if column == 0:
                axes.set_ylabel(f"{load}\nwake-ups", fontsize=8)
            axes.tick_params(labelsize=7)
            if cell is None or not cell.measured:
                _not_measured(axes)
                continue
            overflows = 0
            for cpu, hist in _cpu_histograms(cell).items():
                overflows += hist.overflows
                (buckets,) = np.nonzero(hist.counts)
                if not buckets.size:
                    continue
                # empty buckets break the line (a log axis has no 0): a lone far wake-up
                # is a dot, not a plateau drawn to it
                shown = np.where(hist.counts > 0, hist.counts, np.nan)[:buckets[-1] + 1]
                line, = axes.plot(np.arange(shown.size), shown, drawstyle="steps-mid",
                                  linewidth=0.8, label=f"CPU{cpu}")
                axes.plot(buckets, hist.counts[buckets], ".", markersize=2,
                          color=line.get_color())
            if overflows:
                axes.text(0.98, 0.92, f"{overflows} ≥ range", ha="right", va="top",
                          transform=axes.transAxes, fontsize=7, color="#7a4500")
            if not _measured(axes):
                if not overflows:
                    _not_measured(axes)
                continue
            axes.set_yscale("log")
            axes.yaxis.set_minor_locator(NullLocator())
    for axes in grid[-1]:
        axes.set_xlabel("latency (µs)", fontsize=8)
    handles, labels = grid[0][0].get_legend_handles_labels()
    if handles:
        figure.legend(handles, labels, loc="upper right", fontsize=7, frameon=False,
                      ncol=len(handles))
    figure.suptitle(f"{board}, -i {interval} µs: per-CPU histograms of every variant",
                    fontsize=10)
    figure.subplots_adjust(top=0.93 - 0.1 / max(len(loads), 1), hspace=0.35, wspace=0.25)
    return figure


def figures(data: CampaignData) -> dict[str, Figure]:
    """Every figure of the report by name (board/kind[/interval])."""
    found = {}
    for board in data.boards:
        found[f"{board}/headline"] = headline_figure(data, board)
        found[f"{board}/average"] = average_figure(data, board)
        for interval in data.intervals(board):
            found[f"{board}/histograms/{interval}us"] = histogram_figure(data, board,
                                                                         interval)
    return found


def file_name(name: str) -> str:
    return "campaign-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in name) + ".png"
