"""``rtlab thresholds check --db``: the false red each cyclictest case's ``max_us`` implies,
from the series' stored wake-ups, beside the share of the pipeline's error budget it has
(rtlab.verdict.budget): a limit written by hand is held to the same budget as a tuned one."""

from pathlib import Path

from rtlab.measure.suite import load_suite
from rtlab.store import open_store
from rtlab.store.query import series
from rtlab.tuning.evidence import Method
from rtlab.tuning.suggest import suggest
from rtlab.verdict.thresholds import format_us, load_thresholds


def limit_rates(url: str, thresholds_path: Path, suite_path: Path, *,
                pipeline_cases: int | None = None) -> str:
    """One line per cyclictest case with stored runs: its max_us, the chance one of its
    runs exceeds it by the fitted tail of its pooled wake-ups, and its share."""
    suite = load_suite(suite_path)
    thresholds = load_thresholds(thresholds_path, suite)
    method = Method(pipeline_cases=pipeline_cases)
    if "://" not in url:
        if not Path(url).is_file():
            raise FileNotFoundError(f"{url}: no such results database")
        url = f"sqlite:///{Path(url).resolve()}"
    store = open_store(url)
    lines = []
    over = 0
    try:
        with store.session() as session:
            boards = sorted({board for board, *_ in series(session)} & set(thresholds.boards))
            for board in boards:
                found = suggest(session, thresholds_path, board=board, suite=suite,
                                method=method, write=False)
                for row in found.rows:
                    tail = row.evidence.tail
                    if row.metric != "max_us" or tail is None:
                        continue
                    rate = row.evidence.false_red(row.old.value)
                    if rate is None:
                        lines.append(f"  {row.series.name(board)}: max_us "
                                     f"{format_us(row.old.value)}: no rate "
                                     f"({row.evidence.missing or 'no tail fit'})")
                        continue
                    mark = "✓" if rate <= tail.share else "✗"
                    over += rate > tail.share
                    lines.append(f"{mark} {row.series.name(board)}: max_us "
                                 f"{format_us(row.old.value)} ({row.old.source}): false red "
                                 f"{rate:.2g} per pipeline by its fitted tail, share "
                                 f"{tail.share:.2g} ({row.evidence.runs} runs)")
    finally:
        store.close()
    if not lines:
        return "no stored cyclictest runs with histograms to rate the limits by"
    head = (f"max_us against its share of the error budget: {over} of "
            f"{sum(1 for line in lines if line[0] in '✓✗')} rated limits above it")
    return "\n".join([head, *lines])
