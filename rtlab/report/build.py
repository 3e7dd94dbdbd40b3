"""Writing a report: query the store (``data``), draw the figures (``plots``) on every
core while it does, and write the page, its PNGs, the metrics file and the summary into
one folder."""

import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

import attr

from rtlab.report.data import Group, GroupKey, ReportData, collect, group_name
from rtlab.report.html import Picture, page
from rtlab.report.metrics import openmetrics
from rtlab.report.pool import Later, Pool, frozen_heap
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


class Drawing:
    """The report's figures, each handed to the workers as soon as its group's data is
    read (:meth:`draw`, collect's ``draw``), so that they are drawn on every core while
    the store is still being read; :meth:`pictures` waits for them."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._drawn: dict[tuple[GroupKey, str], Future[Picture] | Later[Picture]] = {}

    def draw(self, group: Group, kinds: Sequence[str]) -> None:
        for kind in kinds:
            self._drawn[(group.key, kind)] = self._pool.submit(_draw, (group, kind))

    def pictures(self, groups: Sequence[Group]) -> dict[GroupKey, list[Picture]]:
        """Every group's figures as PNG bytes, in the order the page shows them."""
        return {group.key: [self._drawn[(group.key, kind)].result() for kind in group.kinds]
                for group in groups}


def warm_up() -> None:
    """Fonts and the PNG writer loaded, once per drawing process."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from rtlab.report import plots

    with matplotlib.rc_context(plots.RC):
        plots.warm_up()


def _draw(task: tuple[Group, str]) -> Picture:
    import matplotlib

    # never a display: CI runners have none, and a desktop backend would open windows
    matplotlib.use("Agg", force=False)
    from rtlab.report import plots

    group, kind = task
    with matplotlib.rc_context(plots.RC):
        return Picture(plots.file_name(group, kind), plots.png(plots.figure(group, kind)),
                       f"{plots.KINDS[kind]}: {group_name(group.key)}")


def write_report(store: Store, out_dir: Path, selection: Selection, *,
                 thresholds_path: Path | None = None,
                 report_link: str | None = None) -> Written:
    """Query the store and write ``report.html``, its PNGs, ``metrics.txt`` and
    ``summary.md`` into ``out_dir``."""
    timings = {}
    with frozen_heap(), Pool(initializer=warm_up) as workers:
        drawing = Drawing(workers)
        start = time.perf_counter()
        with store.session() as session:
            data = collect(session, selection, thresholds_path=thresholds_path,
                           workers=workers, draw=drawing.draw)
        timings["query"] = time.perf_counter() - start

        # the figures were begun while the store was read: what is left of them
        start = time.perf_counter()
        pictures = drawing.pictures(data.groups)
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


__all__ = ["HTML_NAME", "METRICS_NAME", "SUMMARY_NAME", "Drawing", "Selection", "Written",
           "write_report"]
