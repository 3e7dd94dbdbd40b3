"""The report's worker pool (rtlab.report.pool.Pool): tasks begun while the caller goes on,
on forked workers that start with the initializer and run below the caller; in the caller
itself where there is one worker."""

import os

import pytest

from rtlab.report import pool

STARTED = []


def _mark() -> None:
    STARTED.append(os.getpid())


def _where(item: int) -> tuple[int, int, bool, int]:
    # the worker's pid, its niceness, whether its initializer ran, and the item back
    return os.getpid(), os.nice(0), bool(STARTED), item


def _fail(item: int) -> int:
    raise ValueError(f"task {item} failed")


@pytest.mark.skipif(pool.cores() < 2, reason="one core: the pool runs tasks in the caller")
def test_tasks_run_on_forked_workers_that_start_with_the_initializer_below_the_caller():
    with pool.Pool(2, initializer=_mark) as workers:
        assert workers.forks
        results = workers.map(_where, list(range(6)))
    pids = {pid for pid, *_ in results}
    assert os.getpid() not in pids and len(pids) <= 2
    assert {nice for _, nice, _, _ in results} == {os.nice(0) + pool.WORKER_NICENESS}
    assert all(started for _, _, started, _ in results)
    # in the order asked, whatever order they were done in
    assert [item for *_, item in results] == list(range(6))
    # nothing ran in the caller
    assert STARTED == []


def test_one_worker_runs_each_task_in_the_caller_when_its_result_is_asked_for():
    with pool.Pool(1, initializer=_mark) as workers:
        assert not workers.forks
        later = workers.submit(_where, 7)
        assert isinstance(later, pool.Later)
        pid, nice, _, item = later.result()
    assert (pid, nice, item) == (os.getpid(), os.nice(0), 7)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failed_task_raises_where_its_result_is_asked_for(workers):
    with pool.Pool(workers) as running:
        done = running.submit(_fail, 3)
        with pytest.raises(ValueError, match="task 3 failed"):
            done.result()
