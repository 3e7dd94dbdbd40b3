"""A command of one package that another, higher package adds actions to (``rtlab
thresholds suggest`` is rtlab.tuning's, ``rtlab lava server`` rtlab.lavaserver's): the
lower package keeps its command's sub-actions here, the higher one finds them by the
command's name. rtlab.cli registers the packages from the bottom up. Also the option
types that several packages' commands share."""

import argparse
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    Actions = argparse._SubParsersAction[argparse.ArgumentParser]

_ACTIONS: "weakref.WeakKeyDictionary[argparse.ArgumentParser, Actions]" = (
    weakref.WeakKeyDictionary())


def keep_actions(command: argparse.ArgumentParser, actions: "Actions") -> None:
    """``actions`` (``command.add_subparsers()``) are open to other packages."""
    _ACTIONS[command] = actions


def actions_of(sub: "Actions", name: str) -> "Actions":
    """The sub-actions of the command ``name`` of ``sub`` (rtlab's top-level commands)
    that its package kept, for another package to add an action to."""
    command = sub.choices.get(name)
    if command is None or command not in _ACTIONS:
        raise ValueError(f"no command {name!r} open to other packages: its package's "
                         "register makes it, before the packages that add to it")
    return _ACTIONS[command]


def places_arg(text: str) -> int:
    """An option's number of places of a board type: ``all`` (or empty) is 0, every
    healthy one."""
    if text in ("", "all"):
        return 0
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a number of places (1 or more) or all, got {text!r}")
    return int(text)
