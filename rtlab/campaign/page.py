"""Writing a campaign report (``rtlab report --campaign NAME``): the store's execution of
the campaign (:mod:`rtlab.campaign.report`), its figures (:mod:`rtlab.campaign.plots`)
as PNG files, one self-contained HTML page with them embedded, ``summary.md`` (the same
tables, for a merge request or a wiki) and ``campaign.json`` (the tables as data)."""

import base64
import html
import json
from pathlib import Path

import attr

from rtlab.campaign.report import (
    CampaignData,
    collect,
    expected_text,
    loadavg_text,
    percent,
    quantile_text,
    temperature_text,
    us,
)
from rtlab.campaign.report import (
    as_json as campaign_json,
)
from rtlab.campaign.report import (
    markdown as campaign_markdown,
)
from rtlab.campaign.spec import Campaign
from rtlab.report.html import _STYLE
from rtlab.store import Store
from rtlab.util.atomic import write_atomic
from rtlab.verdict.comparison import INCONCLUSIVE, quantile_name
from rtlab.verdict.variants import COSTS, SAVES

HTML_NAME = "report.html"
SUMMARY_NAME = "summary.md"
JSON_NAME = "campaign.json"
_OUTCOME_CLASS = {COSTS: "o-regression", SAVES: "o-improvement", INCONCLUSIVE: "o-inconclusive"}


@attr.frozen
class WrittenCampaign:
    html: Path
    summary: Path
    json: Path
    pngs: tuple[Path, ...]
    data: CampaignData


def write_campaign_report(store: Store, campaign: Campaign, out_dir: Path, *,
                          campaign_run: str | None = None) -> WrittenCampaign:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from rtlab.campaign import plots as campaign_plots
    from rtlab.report import plots

    with store.session() as session:
        data = collect(session, campaign, campaign_run=campaign_run)
    out_dir.mkdir(parents=True, exist_ok=True)
    pictures: dict[str, tuple[str, bytes]] = {}
    for name, figure in campaign_plots.figures(data).items():
        pictures[name] = (campaign_plots.file_name(name), plots.png(figure))
    pngs = []
    for file, png in pictures.values():
        (out_dir / file).write_bytes(png)
        pngs.append(out_dir / file)
    for stale in out_dir.glob("campaign-*.png"):
        if stale not in pngs:
            stale.unlink()
    summary = campaign_markdown(data, figures={name: file for name, (file, _) in
                                               pictures.items() if "/headline" in name})
    paths = (out_dir / HTML_NAME, out_dir / SUMMARY_NAME, out_dir / JSON_NAME)
    write_atomic(paths[0], page(data, pictures))
    write_atomic(paths[1], summary)
    write_atomic(paths[2], json.dumps(campaign_json(data), indent=2, default=str) + "\n")
    return WrittenCampaign(*paths, tuple(pngs), data)


def _e(text: object) -> str:
    return html.escape(str(text))


def _figure(pictures: dict[str, tuple[str, bytes]], name: str, caption: str) -> str:
    if name not in pictures:
        return ""
    file, png = pictures[name]
    uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return (f'<figure><img src="{uri}" alt="{_e(caption)}"><figcaption>{_e(caption)} — '
            f"also <code>{_e(file)}</code> beside this page</figcaption></figure>")


def _table(head: list[str], rows: list[list[str]]) -> str:
    out = ["<table>", "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    out += ["<tr>" + "".join(rows_cell for rows_cell in row) + "</tr>" for row in rows]
    out.append("</table>")
    return "\n".join(out)


def _td(text: object, *, num: bool = False, css: str = "") -> str:
    classes = " ".join(c for c in ("num" if num else "", css) if c)
    return f'<td class="{classes}">{_e(text)}</td>' if classes else f"<td>{_e(text)}</td>"


def _board(data: CampaignData, board: str, pictures: dict[str, tuple[str, bytes]]) -> str:
    campaign = data.campaign
    parts = [f'<h2 id="board-{_e(board)}">{_e(board)}</h2>',
             _figure(pictures, f"{board}/headline",
                     f"{board}: the maximum against the load, one line per variant"),
             _figure(pictures, f"{board}/average", f"{board}: the average against the load")]
    rows = []
    for cell in data.board_cells(board):
        expected = cell.expected()
        rows.append([_td(cell.variant), _td(cell.scenario), _td(f"{cell.interval_us} µs"),
                     _td(len(cell.measured), num=True),
                     _td(cell.verdicts),
                     _td(cell.samples, num=True), _td(us(cell.max_us), num=True),
                     _td(expected_text(expected),
                         css="o-regression" if expected and expected.outlier else ""),
                     _td(us(cell.avg_us), num=True),
                     *[_td(quantile_text(cell, q), num=True) for q in campaign.quantiles]])
    parts += ["<h3>Figures per variant and load</h3>",
              _table(["variant", "load", "interval", "runs", "verdicts", "wake-ups",
                      "max µs", "tail expects µs (95 % of runs)", "avg µs",
                      *[f"{quantile_name(q)} µs" for q in campaign.quantiles]], rows)]
    for pair in campaign.pairs:
        pair_rows = [row for row in data.pairs if row.board == board and row.pair == pair]
        if not pair_rows:
            continue
        body = []
        for row in pair_rows:
            if row.shifts:
                cells = [_td(s.verdict, css=_OUTCOME_CLASS.get(s.outcome, ""))
                         for s in row.shifts]
            else:
                cells = [_td(row.note)] * len(campaign.quantiles)
            body.append([_td(row.scenario), _td(f"{row.interval_us} µs"), *cells])
        warnings = sorted({w for row in pair_rows for s in row.shifts for w in s.warnings})
        warnings += [row.left_out_text for row in pair_rows if row.left_out]
        parts += [f"<h3>{_e(pair.candidate)} against {_e(pair.baseline)}</h3>",
                  _table(["load", "interval", *[quantile_name(q) for q in campaign.quantiles]],
                         body)]
        parts += [f'<p class="small">{_e(w)}</p>' for w in warnings]
    proof_rows = [
        [_td(cell.variant), _td(cell.scenario), _td(f"{cell.interval_us} µs"),
         _td(index, num=True), _td(percent(run.utilisation), num=True),
         _td(percent(proof.idle), num=True), _td(percent(proof.net), num=True),
         _td(percent(proof.asked), num=True),
         _td(loadavg_text(run.loadavg_before, run.loadavg_after)), _td(temperature_text(run)),
         _td(proof.note, css="o-regression" if proof.proven is False else "")]
        for cell, proof, index, run in data.proven_runs(board)]
    parts += ["<h3>The loads, proven</h3>",
              _table(["variant", "load", "interval", "run", "CPU busy", "idle baseline",
                      "net", "needed", "load average before → after",
                      "temperature before → after", "proof"], proof_rows)]
    for interval in data.intervals(board):
        parts.append(_figure(pictures, f"{board}/histograms/{interval}us",
                             f"{board}, -i {interval} µs: every variant's per-CPU histograms"))
    return "\n".join(part for part in parts if part)


_READING = """
<ul class="small">
<li>A <b>cell</b> is one board × variant × load × interval: all wake-ups of its runs (each
run a fresh flash and boot) that passed or failed their limits; an error has no figure, and
a run cut short (a window that ended before its planned length) is left out and listed
apart.</li>
<li>The <b>maximum</b> is one sample. Beside it, what the tail (a generalised Pareto fit
above the p99) expects the maximum of that many wake-ups to be: its median, and the range
95 % of runs that long would show. A maximum above that range, with under 1 % chance, is
a single outlier, not the kernel's tail; run longer before reading anything into it.</li>
<li>Each <b>shift</b> is candidate − baseline at one quantile, with its interval
(multinomial bootstrap of the histograms for sampling noise, the runs' spread pooled over
both variants: <code>rtlab.verdict.variants.compare_variants</code>). <i>costs X µs</i> /
<i>saves X µs</i>: the interval excludes 0 and the shift exceeds 5 % of the baseline
(at least 1 µs); <i>no measurable change</i>: the interval lies within that tolerance;
<i>inconclusive</i>: neither, with how much longer the runs must be (or that more runs are
needed where the runs differ more than the variants). A quantile needs 100 wake-ups beyond
it in each variant.</li>
<li>The <b>load proof</b>: the CPUs' busy share during the window (/proc/stat), less the
idle scenario's (the measuring program alone, same variant and interval), against the least
share the load must show; and the load average and temperatures as each window opened and
closed (a board that warmed by more than 5 °C had not settled).</li>
</ul>
"""


def page(data: CampaignData, pictures: dict[str, tuple[str, bytes]]) -> str:
    campaign = data.campaign
    errors = [run for cell in data.cells.values() for run in cell.runs
              if run.verdict not in ("pass", "fail")]
    body = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>rtlab campaign {_e(campaign.name)}</title>",
        f"<style>{_STYLE}.o-improvement {{ color: #145214; font-weight: bold; }}</style>",
        "</head><body>",
        f"<h1>Campaign {_e(campaign.name)}</h1>",
        f"<p>{_e(campaign.description)}</p>",
        f'<p class="meta">Execution <code>{_e(data.campaign_run)}</code> · reported '
        f"{data.generated.strftime('%Y-%m-%d %H:%M UTC')} · <code>{_e(campaign.source)}</code>"
        f" · variants {_e(', '.join(data.variants()))} · each shift's interval "
        f"{data.confidence_each:.1%} ({campaign.confidence:.0%} for a row together)</p>",
    ]
    for board in data.boards:
        body.append(_board(data, board, pictures))
    cut = data.cut_runs()
    if cut:
        body.append("<h2>Runs cut short</h2><p>Left out of the figures and the comparisons: "
                    "a run whose window was cut short is no whole run, and its tail is "
                    "censored where it stopped.</p><ul>")
        body += [f"<li><code>{_e(run.name)}</code> ({_e(run.verdict)}, max {_e(us(run.max_us))}"
                 f" µs): {_e(run.cut_short)}</li>" for run in cut]
        body.append("</ul>")
    if errors:
        body.append("<h2>Runs without figures</h2><ul>")
        body += [f"<li><code>{_e(run.name)}</code> ({_e(run.verdict)}): {_e(run.message)}</li>"
                 for run in errors]
        body.append("</ul>")
    body += ["<h2>How to read this report</h2>", _READING, "</body></html>"]
    return "\n".join(body) + "\n"
