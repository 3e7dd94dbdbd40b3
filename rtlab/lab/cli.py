"""``rtlab env check`` (environment and exporter files, and the other files of env/ by
the package that owns each), ``rtlab reservation release`` (the after_script of a CI
test job) and ``rtlab ssh setup`` (the before_script of a job that reaches the exporters)."""

import argparse
import os
import sys
from pathlib import Path

from rtlab.lab import reservation
from rtlab.lab.otherfiles import other_file_check
from rtlab.util import paths


def _env_check(args: argparse.Namespace) -> int:
    from rtlab.lab.envfile import check_env_file, check_exporter_file

    files = [Path(f) for f in args.files] or sorted(
        [*(paths.REPO_ROOT / "env").glob("*.yaml"),
         *(paths.REPO_ROOT / "env" / "exporter").glob("*.yaml")])
    problems = []
    for path in files:
        other = other_file_check(path)
        if other is not None:
            other(path)  # the owner's reader refuses with file:line
            continue
        check = check_exporter_file if path.parent.name == "exporter" else check_env_file
        problems += check(path)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 2
    print(f"{len(files)} file(s) OK: {', '.join(str(f) for f in files)}")
    return 0


def _release_command(args: argparse.Namespace) -> int:
    path = Path(args.file)
    # a folder: every place of a shared plan left a state file of its own there, and a
    # campaign's test job one per variant and run below it
    files = (sorted(path.rglob("reservation*.json")) or [path / reservation.RESERVATION_FILE]
             if path.is_dir() else [path])
    worst = 0
    for state_file in files:
        code, message = reservation.release_file(state_file, args.coordinator)
        print(message, file=sys.stderr if code else sys.stdout)
        worst = max(worst, code)
    return worst


def _ssh_setup(args: argparse.Namespace) -> int:
    from rtlab.lab import sshsetup

    home = Path(args.home) if args.home else sshsetup.ssh_home()
    written = sshsetup.setup(os.environ, home)
    if written is None:
        print(f"rtlab ssh setup: none of {', '.join(sshsetup.VARIABLES)} is set: nothing "
              "written (this user's own ssh configuration serves)")
        return 0
    print("\n".join(sshsetup.describe(written)))
    return 0


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    env = sub.add_parser("env", help="check labgrid environment and exporter files")
    env.add_argument("action", choices=["check"])
    env.add_argument("files", nargs="*", help="default: env/*.yaml and env/exporter/*.yaml")
    env.set_defaults(func=_env_check)

    reservations = sub.add_parser("reservation", help="labgrid reservations of CI jobs")
    actions = reservations.add_subparsers(dest="action", required=True)
    release_parser = actions.add_parser(
        "release", help="release the place and cancel the reservation a state file names "
                        "(nothing to do when the run ended cleanly)")
    release_parser.add_argument("file", help=f"the run's {reservation.RESERVATION_FILE}, or "
                                             "its --out folder (every reservation*.json in "
                                             "it and below)")
    release_parser.add_argument("--coordinator",
                                help="coordinator (default: the one in the file)")
    release_parser.set_defaults(func=_release_command)

    ssh = sub.add_parser("ssh", help="the SSH labgrid uses to reach the lab's exporters")
    ssh.add_argument("action", choices=["setup"],
                     help="setup: write the exporters' key, host keys and settings "
                          "(RTLAB_EXPORTER_SSH_KEY, RTLAB_EXPORTER_KNOWN_HOSTS, "
                          "RTLAB_EXPORTER_SSH_CONFIG, read from the environment) to ~/.ssh")
    ssh.add_argument("--home", help="the home whose .ssh to write (default: this user's, "
                                    "where ssh reads it)")
    ssh.set_defaults(func=_ssh_setup)
