"""The on-board suite as one of several places sharing a plan (rtlab.run.queue): each test
case runs only if this place claims it first; the others leave neither a JUnit case nor a
record here, because another board measures them. After a case ends in an infrastructure
error, this place leaves the rest to the others while one of them is still working.

Active with ``--rt-queue URL --rt-plan PLAN`` (``rtlab run --boards N`` passes them); the
place is the run's ``LG_PLACE``. With ``--rt-replicate`` every place measures every case
(a share of its budget each, rtlab.run.pooling): the queue then holds one row per case and
place, which says who measured what, and a place that fails leaves its later shares.
"""

import os
from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

from rtlab.measure.suite import case_name
from rtlab.pytestplugin.hooks import RECORD_KEY
from rtlab.util.variables import QUEUE_VARIABLE

if TYPE_CHECKING:
    from rtlab.run.queue import CaseQueue  # noqa: F401 - QUEUE_KEY's type

QUEUE_KEY = pytest.StashKey["CaseQueue"]()
CLAIMED_KEY = pytest.StashKey[str]()
# why this place took no more cases (it left the rest to the others)
LEFT_KEY = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rtlab")
    group.addoption("--rt-queue", default=None, metavar="URL",
                    help="results store that holds the plan's shared cases (default: "
                         "$RTLAB_QUEUE_DB, as `rtlab run` passes it: a URL's password "
                         "stays off the command line)")
    group.addoption("--rt-plan", default=None, help="the plan this place works on")
    group.addoption("--rt-replicate", action="store_true", default=False,
                    help="every place of the plan measures every case, a share each "
                         "(rtlab.run.pooling judges them pooled)")


def pytest_configure(config: pytest.Config) -> None:
    plan = config.option.rt_plan
    # the queue's URL from the environment only for a plan: a variable left over in a
    # shell does not make a single run a shared one
    url = config.option.rt_queue or (os.environ.get(QUEUE_VARIABLE) if plan else None)
    if url is None and plan is None:
        if config.option.rt_replicate:
            raise pytest.UsageError("--rt-replicate shares a plan: give --rt-queue and "
                                    "--rt-plan")
        return
    place = os.environ.get("LG_PLACE")
    if not url or not plan or not place:
        raise pytest.UsageError(f"a shared plan needs --rt-queue (or ${QUEUE_VARIABLE}), "
                                "--rt-plan and LG_PLACE")
    # imported only for a shared plan: the results store's imports (SQLAlchemy, alembic)
    # are half a second of every run's start
    from rtlab.run.queue import CaseQueue  # noqa: F401 - QUEUE_KEY's type
    from rtlab.store import open_store

    config.stash[QUEUE_KEY] = CaseQueue(open_store(url), plan, place)


def row_name(config: pytest.Config, name: str) -> str:
    """The case's row in the plan's queue: the case itself, or in a replicated plan this
    place's share of it."""
    if not config.option.rt_replicate:
        return name
    from rtlab.run.queue import replica_name

    return replica_name(name, os.environ["LG_PLACE"])


def pytest_unconfigure(config: pytest.Config) -> None:
    queue = config.stash.get(QUEUE_KEY, None)
    if queue is not None:
        queue.store.close()


def queue_name(item: pytest.Item) -> str | None:
    """The case's part of its name, from its parameters (None: not a suite case)."""
    params = getattr(item, "callspec", None)
    params = params.params if params is not None else {}
    if "rt_test" in params:
        return params["rt_test"]
    if "scenario" in params:
        return case_name(params["scenario"], params["interval_us"])
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    queue = config.stash.get(QUEUE_KEY, None)
    if queue is not None:
        queue.offer([row_name(config, name) for item in items
                     if (name := queue_name(item)) is not None])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    queue = item.config.stash.get(QUEUE_KEY, None)
    name = queue_name(item)
    if queue is None or name is None:
        return None
    name = row_name(item.config, name)
    if LEFT_KEY in item.config.stash or not queue.claim(name):
        # another board measures it: nothing of it here, neither JUnit case nor record
        return True
    item.stash[CLAIMED_KEY] = name
    return None


@pytest.hookimpl(wrapper=True, specname="pytest_runtest_protocol")
def settle_when_interrupted(item: pytest.Item,
                            nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """A case cut short by an interrupt gets no teardown report; the recorder writes it as
    an error (rtlab.pytestplugin.hooks), and so does the queue."""
    try:
        return (yield)
    except KeyboardInterrupt:
        queue = item.config.stash.get(QUEUE_KEY, None)
        name = item.stash.get(CLAIMED_KEY, None)
        if queue is not None and name is not None:
            queue.finish(name, "error")
        raise


# outermost: after the recorder's own wrapper (rtlab.pytestplugin.hooks) made the verdict
@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
        item: pytest.Item, call: pytest.CallInfo[None],
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "teardown":
        _settle(item)
    return report


def _settle(item: pytest.Item) -> None:
    """Once the case's record is final: its verdict into the queue; and after an
    infrastructure error, the rest left to the other places if one is still working."""
    queue = item.config.stash.get(QUEUE_KEY, None)
    name = item.stash.get(CLAIMED_KEY, None)
    if queue is None or name is None:
        return
    record = item.stash[RECORD_KEY]
    queue.finish(name, record.verdict)
    reason = f"{queue.place}: {name} ended in an error: {record.message}"
    if record.verdict == "error" and queue.leave_after_error(reason):
        item.config.stash[LEFT_KEY] = reason


def pytest_sessionfinish(session: pytest.Session) -> None:
    queue = session.config.stash.get(QUEUE_KEY, None)
    if queue is not None:
        queue.done()
