"""One look at the coordinator per look at a target's resources, not one per resource.

Before every activation labgrid's ``Target.update_resources`` polls each resource of the
target, and each remote resource's poll is its place manager's poll
(``RemotePlaceManager.poll``): the client's event loop runs for 0.1 s to hear the
coordinator's updates, which are then copied to every resource of the manager. A place of
rtlab's has about ten resources, so each first activation of a driver (the PDU, the SD mux,
the card, the console) waited about a second for nothing: 4-5 s of every run before the
board was even powered on (bench/harness_overhead.py, virtual rack, 2026-11-25). labgrid's
own first design polled each manager once per update (labgrid PR #46); later it polls the
resources (PR #518), and PR #1638 narrowed only the wait loop that follows.

:func:`install` restores one poll per manager and update: within one ``update_resources``
a manager polled already is not polled again, since nothing could have reached it in
between (its loop did not run). Polls outside an update, such as the wait loop's for a
resource that is not there yet, are untouched.
"""

import functools
from collections.abc import Callable
from typing import Any

from labgrid.resource.remote import RemotePlaceManager
from labgrid.target import Target

# the managers polled in the update under way; None outside one (labgrid's client side is
# single-threaded: the strategy's PDU thread touches no resource)
_polled: set[int] | None = None


def _once_per_update(poll: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(poll)
    def wrapper(manager: Any) -> None:  # noqa: ANN401 - labgrid's untyped manager
        if _polled is not None:
            if id(manager) in _polled:
                return
            _polled.add(id(manager))
        poll(manager)
    wrapper.rtlab_once_per_update = True  # type: ignore[attr-defined]
    return wrapper


def _one_update(update: Callable[[Target], None]) -> Callable[[Target], None]:
    @functools.wraps(update)
    def wrapper(target: Target) -> None:
        global _polled
        if _polled is not None:
            update(target)
            return
        _polled = set()
        try:
            update(target)
        finally:
            _polled = None
    wrapper.rtlab_once_per_update = True  # type: ignore[attr-defined]
    return wrapper


def install(manager_cls: type = RemotePlaceManager) -> None:
    """Poll ``manager_cls`` once per ``Target.update_resources``; idempotent."""
    if not getattr(manager_cls.poll, "rtlab_once_per_update", False):
        manager_cls.poll = _once_per_update(manager_cls.poll)
    if not getattr(Target.update_resources, "rtlab_once_per_update", False):
        Target.update_resources = _one_update(Target.update_resources)
