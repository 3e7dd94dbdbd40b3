"""The cases of one board type × flavour shared by every place that works on them.

A *plan* is one such run (a pipeline's test job, or one ``rtlab run --boards N``): its
cases sit in the results store's ``queued_cases`` table, and each place's suite takes the
next case nobody has taken yet, so N boards finish in about 1/N of one board's time. The
table is the results store's (SQLite for the virtual rack and a desk, PostgreSQL for a
lab, where runners on several hosts may share a plan): a claim is one conditional UPDATE
(``state = 'queued'`` in its WHERE), so under SQLite's single writer and PostgreSQL's row
locks alike exactly one place gets a case. A case is measured once, never twice and never
dropped:

- a place whose case ended in an infrastructure error (its board, console or lab failed)
  leaves the cases it has not taken to the others, if another place is still working
  (:meth:`CaseQueue.leave_after_error`); the last one never leaves;
- what no place took, or a place took and never finished (its runner was killed), is
  named by :meth:`CaseQueue.leftovers`, and the runner records it as an error.
"""

import datetime
from collections.abc import Sequence

import attr
from sqlalchemy import exists, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import aliased

from rtlab.store import Store
from rtlab.store.models import PlanWorker, QueuedCase

QUEUED, CLAIMED, DONE = "queued", "claimed", "done"
ACTIVE, STOPPED, FINISHED = "active", "stopped", "finished"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@attr.frozen
class Leftover:
    """A case of the plan that ended without a verdict: never taken, or taken by
    ``place`` and not finished."""

    name: str
    place: str | None


@attr.frozen
class CaseQueue:
    """The plan's queue as one place sees it."""

    store: Store
    plan: str
    place: str

    def offer(self, names: Sequence[str]) -> None:
        """Put the plan's cases in the queue, in this order, and this place among its
        workers. Every place offers the cases it would run; the first offer makes the
        rows, and one that collides with it (the unique constraint keeps a case from being
        queued twice) looks again and finds them."""
        try:
            self._offer(names)
        except IntegrityError:
            self._offer(names)

    def _offer(self, names: Sequence[str]) -> None:
        with self.store.session() as session:
            known = set(session.scalars(select(QueuedCase.name)
                                        .where(QueuedCase.plan == self.plan)))
            session.add_all(QueuedCase(plan=self.plan, name=name, position=position,
                                       state=QUEUED)
                            for position, name in enumerate(names) if name not in known)
            if session.scalar(select(PlanWorker.id).where(PlanWorker.plan == self.plan,
                                                          PlanWorker.place == self.place)
                              ) is None:
                session.add(PlanWorker(plan=self.plan, place=self.place, state=ACTIVE,
                                       updated=_now()))

    def claim(self, name: str) -> bool:
        """Take the case if no place has: True when this place measures it."""
        with self.store.session() as session:
            taken = session.execute(
                update(QueuedCase)
                .where(QueuedCase.plan == self.plan, QueuedCase.name == name,
                       QueuedCase.state == QUEUED)
                .values(state=CLAIMED, place=self.place, claimed_at=_now()))
            return taken.rowcount == 1

    def finish(self, name: str, verdict: str) -> None:
        with self.store.session() as session:
            session.execute(
                update(QueuedCase)
                .where(QueuedCase.plan == self.plan, QueuedCase.name == name,
                       QueuedCase.place == self.place)
                .values(state=DONE, verdict=verdict, finished_at=_now()))

    def leave_after_error(self, reason: str) -> bool:
        """After an infrastructure error on this place: leave the cases not yet taken to
        the other places, if one of them is still working (True: left). Two failing places
        never both leave, each counting on the other: on PostgreSQL the plan's workers are
        locked first, so that the second one's statement sees the first one gone; on
        SQLite the one statement is atomic under the single writer."""
        other = aliased(PlanWorker)
        with self.store.session() as session:
            session.execute(select(PlanWorker.id).where(PlanWorker.plan == self.plan)
                            .with_for_update())
            left = session.execute(
                update(PlanWorker)
                .where(PlanWorker.plan == self.plan, PlanWorker.place == self.place,
                       PlanWorker.state == ACTIVE,
                       exists().where(other.plan == self.plan, other.place != self.place,
                                      other.state == ACTIVE))
                .values(state=STOPPED, reason=reason, updated=_now()))
            return left.rowcount == 1

    def done(self) -> None:
        """This place found nothing left to take."""
        with self.store.session() as session:
            session.execute(update(PlanWorker)
                            .where(PlanWorker.plan == self.plan,
                                   PlanWorker.place == self.place,
                                   PlanWorker.state == ACTIVE)
                            .values(state=FINISHED, updated=_now()))


def leftovers(store: Store, plan: str) -> list[Leftover]:
    """The plan's cases without a verdict, in the plan's order."""
    with store.session() as session:
        rows = session.execute(select(QueuedCase.name, QueuedCase.place)
                               .where(QueuedCase.plan == plan, QueuedCase.state != DONE)
                               .order_by(QueuedCase.position)).all()
    return [Leftover(name, place) for name, place in rows]


def measured_by(store: Store, plan: str) -> dict[str, str]:
    """Which place measured each finished case of the plan."""
    with store.session() as session:
        rows = session.execute(select(QueuedCase.name, QueuedCase.place)
                               .where(QueuedCase.plan == plan, QueuedCase.state == DONE)
                               ).all()
    return {name: place for name, place in rows}


def stopped_workers(store: Store, plan: str) -> dict[str, str]:
    """The places that left the plan after an infrastructure error, and why."""
    with store.session() as session:
        rows = session.execute(select(PlanWorker.place, PlanWorker.reason)
                               .where(PlanWorker.plan == plan, PlanWorker.state == STOPPED)
                               ).all()
    return {place: reason or "" for place, reason in rows}


def still_queued(store: Store, plan: str) -> int | None:
    """How many of the plan's cases no place has taken yet; None while the plan has none
    (no place has offered them yet)."""
    with store.session() as session:
        states = list(session.scalars(select(QueuedCase.state)
                                      .where(QueuedCase.plan == plan)))
    return sum(state == QUEUED for state in states) if states else None


# a case's row of one place when every place measures every case (rtlab.run.pooling)
REPLICA_SEPARATOR = "@"


def replica_name(name: str, place: str) -> str:
    """The queue row of ``place``'s share of case ``name`` in a replicated plan."""
    return f"{name}{REPLICA_SEPARATOR}{place}"


@attr.frozen
class PlanReplicas:
    """A replicated plan as its queue tells it: its cases in order, each place's share of
    each (its row's state), and each place's own state."""

    cases: tuple[str, ...]
    rows: dict[tuple[str, str], str]
    """(case, place) -> the row's state."""
    workers: dict[str, tuple[str, str | None]]
    """place -> (its state, why it stopped)."""

    def places(self, name: str) -> list[tuple[str, str]]:
        """Every place of the plan and the state of its share of ``name`` (``absent``: it
        never offered the case)."""
        return [(place, self.rows.get((name, place), "absent")) for place in sorted(self.workers)]

    def why_not(self, place: str, state: str) -> str | None:
        """Why ``place`` did not finish its share in ``state`` (None: it did)."""
        worker_state, reason = self.workers.get(place, ("absent", None))
        if state == DONE:
            return None
        if worker_state == STOPPED:
            return f"it left the plan after an error ({reason})"
        if state == CLAIMED:
            return "its runner ended while measuring it"
        return "it never reached the case"


def plan_replicas(store: Store, plan: str) -> PlanReplicas:
    """The queue of a replicated plan (rows named by :func:`replica_name`)."""
    with store.session() as session:
        rows = session.execute(select(QueuedCase.name, QueuedCase.state, QueuedCase.position)
                               .where(QueuedCase.plan == plan)
                               .order_by(QueuedCase.position)).all()
        workers = session.execute(select(PlanWorker.place, PlanWorker.state,
                                         PlanWorker.reason)
                                  .where(PlanWorker.plan == plan)).all()
    cases: list[str] = []
    states: dict[tuple[str, str], str] = {}
    for name, state, _ in rows:
        case, _, place = name.rpartition(REPLICA_SEPARATOR)
        if not case:
            raise ValueError(f"plan {plan}: queue row {name!r} is no replica "
                             f"(case{REPLICA_SEPARATOR}place): the plan was sharded")
        if case not in cases:
            cases.append(case)
        states[(case, place)] = state
    return PlanReplicas(tuple(cases), states,
                        {place: (state, reason) for place, state, reason in workers})
