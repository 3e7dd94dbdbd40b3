"""Spreading a report's CPU-bound work (bootstrap comparisons, drawing figures) over the
machine's cores.

Workers are forked, so they start in milliseconds with the report's data already in
memory: the work is handed over as an index into ``items`` (a module global at fork time),
never pickled, and only small results come back. Where fork is unavailable, or there is
one core or one item, the work runs in this process.
"""

import gc
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

_work: tuple[Callable[[Any], Any], Sequence[Any]] | None = None


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _run(index: int) -> Any:  # noqa: ANN401 - whatever the work returns
    assert _work is not None
    function, items = _work
    return function(items[index])


def parallel_map(function: Callable[[Any], Any], items: Sequence[Any], *,
                 workers: int | None = None) -> list[Any]:
    """``[function(item) for item in items]``, on up to ``workers`` (default: every core)
    forked processes. ``function`` must be a module-level function; its results must
    pickle."""
    global _work
    workers = min(workers or cores(), len(items))
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [function(item) for item in items]
    _work = (function, items)
    # the workers' garbage collector would otherwise walk every object inherited from this
    # process, touching (and so copying) all of its memory: a quarter of the work again
    gc.freeze()
    try:
        with ProcessPoolExecutor(max_workers=workers,
                                 mp_context=multiprocessing.get_context("fork")) as pool:
            return list(pool.map(_run, range(len(items))))
    finally:
        gc.unfreeze()
        _work = None
