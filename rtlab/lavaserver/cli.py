"""``rtlab lava server …``: the LAVA instance on this machine, set up, started, stopped and
asked. Its action belongs to ``rtlab lava`` (rtlab.lava.cli makes that parser; this adds
``server`` to its actions, the command line unchanged)."""

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rtlab.lab.otherfiles import register_check
from rtlab.util.commands import actions_of

if TYPE_CHECKING:
    Actions = argparse._SubParsersAction[argparse.ArgumentParser]


def _server(args: argparse.Namespace) -> int:
    import json
    import shlex

    from rtlab.lavaserver import daemons, provision
    from rtlab.lavaserver.instance import (
        Instance,
        check_set_up,
        instance_dir,
        load_instance_config,
    )

    instance = Instance(load_instance_config(Path(args.config) if args.config else None),
                        instance_dir())
    if args.action == "setup":
        changed = provision.setup(instance, progress=print)
        print(f"LAVA instance in {instance.folder}: "
              + ("set up" if changed else "set up already, nothing changed"))
    elif args.action == "start":
        daemons.start(instance, progress=print)
        print(f"LAVA server on {instance.config.url} with worker {instance.config.worker} "
              f"and {len(instance.config.devices)} device(s); logs in {instance.log_dir}; "
              "for rtlab lava submit|fetch: eval \"$(rtlab lava server env)\"")
    elif args.action == "stop":
        stopped = daemons.stop(instance)
        print(f"stopped: {', '.join(stopped)}" if stopped else "LAVA server not running")
    elif args.action == "status":
        print(json.dumps(daemons.status(instance), indent=2))
    elif args.action == "env":
        for name, value in instance.client_environment().items():
            print(f"export {name}={shlex.quote(value)}")
    else:
        if not args.arguments:
            raise ValueError("rtlab lava server manage: give lava-server's manage command, "
                             "e.g. devices list")
        check_set_up(instance)
        # the database for the command, as setup does, when the instance is stopped
        started = daemons.start_database(instance)
        try:
            print(instance.manage(*args.arguments), end="")
        finally:
            if started:
                daemons.stop_database(instance)
    return 0


def _check_config(path: Path) -> None:
    from rtlab.lavaserver.instance import load_instance_config

    load_instance_config(path)  # the LAVA instance's file; refuses with file:line


def register(sub: "Actions") -> None:
    """Add ``server`` to the actions of ``rtlab lava`` (rtlab.lava.cli registers it first:
    rtlab.cli.PACKAGES), and the instance's file to ``rtlab env check``."""
    register_check("lava-server.yaml", _check_config)
    actions = actions_of(sub, "lava")

    server = actions.add_parser("server", help="a LAVA server on this machine, on loopback "
                                               "(env/lava-server.yaml)")
    server.add_argument("action", choices=["setup", "start", "stop", "status", "env",
                                           "manage"],
                        help="setup: make the instance (once; scripts/bootstrap.sh "
                             "lava-server); start, stop, status: its programs; env: the "
                             "variables rtlab lava submit|fetch need (eval \"$(…)\"); "
                             "manage ARGS: lava-server manage ARGS on the instance (its "
                             "admin, root)")
    server.add_argument("arguments", nargs=argparse.REMAINDER, help="manage: its arguments")
    server.add_argument("--config", help="the instance's file (default: env/lava-server.yaml)")
    server.set_defaults(func=_server)
