"""rtlab.run.queue: the cases of a plan shared by places, on SQLite and PostgreSQL: each
case is taken by exactly one place, even by processes racing for it; a failing place
leaves the rest to the others unless it is the last; what nobody finished is named."""

import multiprocessing

import pytest

from rtlab.run.queue import CaseQueue, leftovers, measured_by, still_queued, stopped_workers
from rtlab.store import open_store

pytest_plugins = ["tests.pg"]

CASES = [f"{scenario}/{interval}us" for scenario in ("idle", "cpu100", "hackbench")
         for interval in (100, 1000, 10000)] + ["pi_stress", "oslat"]


@pytest.fixture
def store(results_db_url):
    opened = open_store(results_db_url)
    yield opened
    opened.close()


def test_each_place_takes_what_no_other_has_taken(store):
    a, b = CaseQueue(store, "plan-1", "imx6q-01"), CaseQueue(store, "plan-1", "imx6q-02")
    a.offer(CASES)
    b.offer(CASES)
    # the same order on both places: they alternate through the queue
    taken = {"imx6q-01": [], "imx6q-02": []}
    for name in CASES:
        for queue in (a, b):
            if queue.claim(name):
                taken[queue.place].append(name)
                queue.finish(name, "pass")
    assert sorted(taken["imx6q-01"] + taken["imx6q-02"]) == sorted(CASES)
    assert set(taken["imx6q-01"]).isdisjoint(taken["imx6q-02"])
    assert taken["imx6q-01"] == CASES  # the first place to look gets each one here
    assert leftovers(store, "plan-1") == []
    assert measured_by(store, "plan-1") == dict.fromkeys(CASES, "imx6q-01")


def test_plans_are_apart(store):
    CaseQueue(store, "rt", "imx6q-01").offer(["idle/1000us"])
    CaseQueue(store, "std", "imx6q-01").offer(["idle/1000us"])
    assert CaseQueue(store, "rt", "imx6q-01").claim("idle/1000us")
    assert CaseQueue(store, "std", "imx6q-02").claim("idle/1000us")
    assert not CaseQueue(store, "rt", "imx6q-02").claim("idle/1000us")


def _worker(url: str, place: str, start, results) -> None:
    store = open_store(url)
    queue = CaseQueue(store, "race", place)
    queue.offer(CASES)
    start.wait()
    mine = []
    for name in CASES:
        if queue.claim(name):
            mine.append(name)
            queue.finish(name, "pass")
    store.close()
    results.put((place, mine))


def test_processes_racing_for_the_cases_never_take_one_twice(results_db_url):
    # four places in four processes, started together on a new database
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(4), context.Queue()
    workers = [context.Process(target=_worker, args=(results_db_url, f"p{n}", start, results))
               for n in range(4)]
    for worker in workers:
        worker.start()
    taken = dict(results.get(timeout=120) for _ in workers)
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    names = [name for mine in taken.values() for name in mine]
    assert sorted(names) == sorted(CASES), taken
    store = open_store(results_db_url)
    try:
        assert leftovers(store, "race") == []
    finally:
        store.close()


def test_a_failing_place_leaves_the_rest_but_the_last_one_stays(store):
    a, b = CaseQueue(store, "plan", "imx6q-01"), CaseQueue(store, "plan", "imx6q-02")
    a.offer(CASES)
    b.offer(CASES)
    assert a.claim("idle/100us")
    a.finish("idle/100us", "error")
    assert a.leave_after_error("no login prompt after 40 s") is True
    assert stopped_workers(store, "plan") == {"imx6q-01": "no login prompt after 40 s"}
    # the other place is now the last: it stays, whatever happens to it
    assert b.claim("idle/1000us")
    b.finish("idle/1000us", "error")
    assert b.leave_after_error("serial lost") is False
    assert stopped_workers(store, "plan") == {"imx6q-01": "no login prompt after 40 s"}


def test_a_place_that_finished_is_no_one_to_leave_the_rest_to(store):
    a, b = CaseQueue(store, "plan", "imx6q-01"), CaseQueue(store, "plan", "imx6q-02")
    a.offer(CASES)
    b.offer(CASES)
    b.done()
    assert a.leave_after_error("PDU: HTTP 500") is False


def test_what_nobody_finished_is_named_with_who_took_it(store):
    a = CaseQueue(store, "plan", "imx6q-01")
    a.offer(CASES)
    assert a.claim("idle/100us")  # its runner was killed while it measured
    assert a.claim("idle/1000us")
    a.finish("idle/1000us", "pass")
    left = leftovers(store, "plan")
    assert [(item.name, item.place) for item in left[:2]] == [
        ("idle/100us", "imx6q-01"), ("idle/10000us", None)]
    assert len(left) == len(CASES) - 1


def _leave(url: str, plan: str, place: str, start, results) -> None:
    store = open_store(url)
    queue = CaseQueue(store, plan, place)
    start.wait()
    results.put((place, queue.leave_after_error(f"{place} failed")))
    store.close()


def test_two_places_failing_at_once_never_both_leave(results_db_url):
    context = multiprocessing.get_context("spawn")
    store = open_store(results_db_url)
    try:
        for round_ in range(3):
            plan = f"both-fail-{round_}"
            for place in ("a", "b"):
                CaseQueue(store, plan, place).offer(CASES)
            start, results = context.Barrier(2), context.Queue()
            workers = [context.Process(target=_leave,
                                       args=(results_db_url, plan, place, start, results))
                       for place in ("a", "b")]
            for worker in workers:
                worker.start()
            left = dict(results.get(timeout=120) for _ in workers)
            for worker in workers:
                worker.join(30)
            assert sorted(left.values()) == [False, True], (round_, left)
            assert len(stopped_workers(store, plan)) == 1
    finally:
        store.close()


def test_still_queued_counts_what_nobody_took(store):
    assert still_queued(store, "plan") is None  # nobody has offered the cases yet
    a = CaseQueue(store, "plan", "imx6q-01")
    a.offer(CASES[:3])
    assert still_queued(store, "plan") == 3
    for name in CASES[:3]:
        assert a.claim(name)
    assert still_queued(store, "plan") == 0
