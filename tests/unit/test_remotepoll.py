"""rtlab.lab.remotepoll: a target with many resources of one manager polls the manager
once per update_resources, as labgrid's first design did, not once per resource."""

import time

import attr
from labgrid.resource.common import ManagedResource, ResourceManager
from labgrid.target import Target

from rtlab.lab import remotepoll

POLL_S = 0.05


@attr.s(eq=False)
class CountingManager(ResourceManager):
    """A manager whose poll waits for news, as RemotePlaceManager's runs its loop."""

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        self.polls = 0

    def poll(self):
        self.polls += 1
        time.sleep(POLL_S)
        for resource in self.resources:
            resource.avail = True


@attr.s(eq=False)
class CountedResource(ManagedResource):
    manager_cls = CountingManager


def target_with(resources: int) -> tuple[Target, CountingManager]:
    target = Target("main", env=None)
    for number in range(resources):
        CountedResource(target, f"r{number}")
    return target, CountingManager.get()


def test_one_poll_per_update_however_many_resources(monkeypatch):
    # the stock behaviour first: one poll (and its wait) per resource
    monkeypatch.setattr(CountingManager, "poll", CountingManager.poll)
    monkeypatch.setattr(Target, "update_resources", Target.update_resources)
    target, manager = target_with(8)
    began = time.monotonic()
    target.update_resources()
    assert manager.polls == 8 and time.monotonic() - began >= 8 * POLL_S

    remotepoll.install(CountingManager)
    remotepoll.install(CountingManager)  # idempotent: wrapped once
    target.last_update = 0.0
    manager.polls = 0
    began = time.monotonic()
    target.update_resources()
    assert manager.polls == 1 and time.monotonic() - began < 3 * POLL_S
    assert all(r.avail for r in target.resources)
    # outside an update (labgrid's wait loop for one resource) every poll polls
    target.resources[0].poll()
    target.resources[1].poll()
    assert manager.polls == 3


def test_rtlab_lab_installs_it_for_remote_places():
    from labgrid.resource.remote import RemotePlaceManager

    import rtlab.lab  # noqa: F401 - what an environment's imports: does

    assert getattr(RemotePlaceManager.poll, "rtlab_once_per_update", False)
    assert getattr(Target.update_resources, "rtlab_once_per_update", False)
