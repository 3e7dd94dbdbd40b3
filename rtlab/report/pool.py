"""Spreading a report's CPU-bound work (bootstrap comparisons, drawing figures) over the
machine's cores.

Workers are forked, so they start in milliseconds with the report's data already in
memory. :func:`parallel_map` hands its work over as an index into ``items`` (a module
global at fork time), never pickled, and waits for it; a :class:`Pool` takes tasks as
they come (pickled), so that the caller goes on reading the store while they are worked
on. Where fork is unavailable, or there is one core, the work runs in this process.
"""

import contextlib
import gc
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from types import TracebackType
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_work: tuple[Callable[[Any], Any], Sequence[Any]] | None = None
_frozen = 0
WORKER_NICENESS = 10


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Every object that exists now kept out of the garbage collector's walks until the
    block ends (nested blocks: the outermost's end): a report allocates many objects, and
    each full collection would otherwise walk the whole heap of matplotlib, scipy and
    SQLAlchemy again (0.15 s of a report at 100 000 runs); forked workers inherit the
    freeze, so they do not touch (and so copy) the memory they inherit either."""
    global _frozen
    gc.freeze()
    _frozen += 1
    try:
        yield
    finally:
        _frozen -= 1
        if not _frozen:
            gc.unfreeze()


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
    try:
        with frozen_heap(), ProcessPoolExecutor(
                max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
            return list(pool.map(_run, range(len(items))))
    finally:
        _work = None


class Pool:
    """Tasks handed to ``workers`` (default: every core) forked processes as they come,
    so that the caller goes on (reading the store) while they are worked on. The workers
    are forked when the pool is entered, all at once, and each runs ``initializer``
    first (what every task needs: fonts loaded), beside the caller's first queries; they
    run below the caller's priority, since what a report waits for is the caller. The
    caller must start no thread before entering, since a process forked beside a running
    thread may inherit a lock that thread held. With one worker, or without fork, a task
    runs in the caller when its result is asked for.
    """

    def __init__(self, workers: int | None = None,
                 initializer: Callable[[], object] | None = None) -> None:
        self._workers = workers or cores()
        self._initializer = initializer
        self._pool: ProcessPoolExecutor | None = None
        self._heap = contextlib.ExitStack()

    @property
    def forks(self) -> bool:
        return self._workers > 1 and "fork" in multiprocessing.get_all_start_methods()

    def submit(self, function: Callable[[Any], T], item: Any) -> "Future[T] | Later[T]":  # noqa: ANN401
        """``function(item)``, begun now on a worker; ``function`` must be a module-level
        function, ``item`` and its result must pickle."""
        if self._pool is None:
            return Later(function, item)
        return self._pool.submit(function, item)

    def map(self, function: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
        """``[function(item) for item in items]`` on the workers, waited for."""
        return [done.result() for done in [self.submit(function, item) for item in items]]

    def __enter__(self) -> "Pool":
        if self.forks:
            # what exists now is inherited: the workers' collector leaves it alone
            self._heap.enter_context(frozen_heap())
            self._pool = ProcessPoolExecutor(max_workers=self._workers,
                                             mp_context=multiprocessing.get_context("fork"),
                                             initializer=_start_worker,
                                             initargs=(self._initializer,))
            # the first task forks every worker (the fork context starts them all at once)
            self._pool.submit(os.getpid)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        try:
            if self._pool is not None:
                # on an error the tasks not yet begun are dropped
                self._pool.shutdown(wait=True, cancel_futures=error is not None)
        finally:
            self._heap.close()


def _start_worker(initializer: Callable[[], object] | None) -> None:
    os.nice(WORKER_NICENESS)
    if initializer is not None:
        initializer()


class Later(Generic[T]):
    """A task of a pool without workers: run when its result is asked for."""

    def __init__(self, function: Callable[[Any], T], item: Any) -> None:  # noqa: ANN401
        self._function, self._item = function, item

    def result(self) -> T:
        return self._function(self._item)
