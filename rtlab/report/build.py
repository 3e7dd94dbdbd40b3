"""Writing a report: query the store (``data``), draw the figures (``plots``) on every
core, and write the page, its PNGs, the metrics file and the summary into one folder."""

import time
from pathlib import Path

import attr

from rtlab.report.data import Group, GroupKey, ReportData, collect, group_name
from rtlab.report.html import Picture, page
from rtlab.report.metrics import openmetrics
from rtlab.report.pool import parallel_map
from rtlab.report.selection import Selection
from rtlab.report.summary import markdown
from rtlab.store import Store
from rtlab.util.atomic import write_atomic

HTML_NAME = "report.html"
# the figures' file name prefixes (plots.KINDS, without importing matplotlib)
KINDS = ("histogram", "trend", "compare")
METRICS_NAME = "metrics.txt"
SUMMARY_NAME = "summary.md"


@attr.frozen
class Written:
    html: Path
    metrics: Path
    summary: Path
    pngs: tuple[Path, ...]
    data: ReportData
    # seconds per step: "query" (store and statistics), "figures", "write"
    timings: dict[str, float] = attr.field(factory=dict, eq=False)


def render(data: ReportData, *, workers: int | None = None) -> dict[GroupKey, list[Picture]]:
    """Every group's figures as PNG bytes, in the order the page shows them, drawn on
    every core (``workers``: at most that many processes), a figure per task."""
    from rtlab.report import plots

    tasks = [(group, kind) for group in data.groups for kind in plots.kinds(group)]
    if len(tasks) > 1:
        plots.warm_up()
    pictures: dict[GroupKey, list[Picture]] = {group.key: [] for group in data.groups}
    for (group, _), picture in zip(tasks, parallel_map(_draw, tasks, workers=workers),
                                   strict=True):
        pictures[group.key].append(picture)
    return pictures


def _draw(task: tuple[Group, str]) -> Picture:
    import matplotlib

    # never a display: CI runners have none, and a desktop backend would open windows
    matplotlib.use("Agg", force=False)
    from rtlab.report import plots

    group, kind = task
    return Picture(plots.file_name(group, kind), plots.png(plots.figure(group, kind)),
                   f"{plots.KINDS[kind]}: {group_name(group.key)}")


def write_report(store: Store, out_dir: Path, selection: Selection, *,
                 thresholds_path: Path | None = None,
                 report_link: str | None = None) -> Written:
    """Query the store and write ``report.html``, its PNGs, ``metrics.txt`` and
    ``summary.md`` into ``out_dir``."""
    timings = {}
    start = time.perf_counter()
    with store.session() as session:
        data = collect(session, selection, thresholds_path=thresholds_path)
    timings["query"] = time.perf_counter() - start

    start = time.perf_counter()
    pictures = render(data)
    timings["figures"] = time.perf_counter() - start

    start = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    pngs = []
    for group_pictures in pictures.values():
        for picture in group_pictures:
            path = out_dir / picture.file_name
            path.write_bytes(picture.png)
            pngs.append(path)
    # figures of an earlier report into the same folder would pass for this one's
    for stale in out_dir.glob("*.png"):
        if stale not in pngs and stale.name.split("-", 1)[0] in KINDS:
            stale.unlink()
    html_path, metrics_path, summary_path = (out_dir / HTML_NAME, out_dir / METRICS_NAME,
                                             out_dir / SUMMARY_NAME)
    write_atomic(html_path, page(data, pictures, out_dir))
    write_atomic(metrics_path, openmetrics(data))
    write_atomic(summary_path, markdown(data, report_link=report_link))
    timings["write"] = time.perf_counter() - start
    return Written(html_path, metrics_path, summary_path, tuple(pngs), data, timings)


__all__ = ["HTML_NAME", "METRICS_NAME", "SUMMARY_NAME", "Selection", "Written", "render",
           "write_report"]
