"""Fixtures of the on-board suite: the board in a shell, its facts, thresholds."""

from pathlib import Path

import pytest
from labgrid.resource.remote import RemotePlace

from rtlab.suite import InfrastructureError
from rtlab.sysinfo import read_system_info
from rtlab.thresholds import load_thresholds


@pytest.fixture(scope="session")
def shell(strategy):
    """The board flashed, booted and logged in; powered off after the session, whatever
    happened, so no board is left running."""
    try:
        try:
            strategy.transition("shell")
        except Exception as error:
            raise InfrastructureError(
                f"board did not reach a shell: {type(error).__name__}: {error}"
            ) from error
        yield strategy.shell
    finally:
        # not strategy.transition: after a failed transition labgrid marks the strategy
        # broken, and the board must be switched off all the same
        strategy.target.activate(strategy.power)
        strategy.power.off()


@pytest.fixture(scope="session")
def system_info(shell):
    return read_system_info(shell)


@pytest.fixture(scope="session")
def board_name(request, target) -> str:
    if request.config.option.rt_board:
        return request.config.option.rt_board
    try:
        place = target.get_resource(RemotePlace)
    except Exception as error:
        raise pytest.UsageError("not a remote place: give --rt-board") from error
    board = (place.tags or {}).get("board")
    if not board:
        raise pytest.UsageError(f"place {place.name} has no 'board' tag: give --rt-board")
    return board


@pytest.fixture(scope="session")
def flavour(request, image_manifest) -> str:
    value = request.config.option.rt_flavour or image_manifest.get("flavour")
    if not value:
        raise pytest.UsageError("no flavour in the image manifest: give --rt-flavour")
    return value


@pytest.fixture(scope="session")
def thresholds(request):
    return load_thresholds(Path(request.config.option.rt_thresholds))
