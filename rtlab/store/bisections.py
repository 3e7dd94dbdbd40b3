"""A bisection's result in the store (``bisections``, ``bisection_steps``): the result file
of ``rtlab bisect run`` (rtlab.bisect.result, as its JSON), stored once per bisection; a
result stored again replaces its earlier rows (a bisection resumed and finished)."""

import datetime
from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete, select

from rtlab.store import Store
from rtlab.store.models import Bisection, BisectionStep


def store_bisection(store: Store, result: Mapping[str, Any]) -> int:
    """Store ``result`` (rtlab.bisect.result.Bisection.to_json()); its row id."""
    culprit = result.get("culprit") or {}
    option = result.get("option") or {}
    row = Bisection(
        bisection_key=result["bisection_id"], board=result["board"],
        flavour=result["flavour"], case_name=result["case"], good_commit=result["good"],
        bad_commit=result["bad"], status=result["status"],
        culprit_commit=culprit.get("commit"), culprit_option=option.get("name"),
        reason=result["reason"], board_s=float(result["board_s"]),
        started=datetime.datetime.fromisoformat(result["started"]), result=dict(result),
        steps=[BisectionStep(
            step=step["index"], kind=step["kind"], commit_sha=step["commit"],
            options=list(step["options"]), outcome=step["outcome"],
            decided_by=step["decided_by"], rounds=step["rounds"],
            good_boots=step["boots"][0], step_boots=step["boots"][1],
            board_s=step["board_s"], confidence=step["confidence"],
            difference_us=step["difference_us"], reason=step["reason"])
            for step in result["steps"]])
    with store.session() as session:
        session.execute(delete(Bisection).where(
            Bisection.bisection_key == row.bisection_key))
        session.add(row)
        session.flush()
        return row.id


def stored_steps(store: Store, bisection_key: str) -> list[BisectionStep]:
    """The steps of a stored bisection, in order."""
    with store.session() as session:
        found = session.scalars(select(BisectionStep).join(Bisection).where(
            Bisection.bisection_key == bisection_key).order_by(BisectionStep.step)).all()
        session.expunge_all()
        return list(found)
