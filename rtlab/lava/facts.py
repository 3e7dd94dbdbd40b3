"""The board's system facts on LAVA: rtlab.measure.sysinfo's own commands, run by the job's script
and read back from its log.

A labgrid run asks the board through its shell (:func:`rtlab.measure.sysinfo.read_system_info`); a
LAVA job cannot be asked anything after the fact. So the commands are recorded once, by
running ``read_system_info`` against a shell that only writes them down; the board runs
every one of them into a file, and the records replay ``read_system_info`` against the
outputs. The facts are then read by the same code from the same commands as on labgrid.
"""

from collections.abc import Mapping

import attr

from rtlab.measure.sysinfo import SystemInfo, read_system_info


class FactsError(ValueError):
    """The board's answers to the sysinfo commands are missing or unusable."""


class _Recorder:
    """A shell that answers every command with "0": enough for read_system_info to go on
    to its next command (numbers parse, no kernel config is "found", so every source is
    asked)."""

    def __init__(self) -> None:
        self.commands: list[str] = []

    def run_check(self, cmd: str, *, timeout: int = 30, codec: str = "utf-8",
                  decodeerrors: str = "strict") -> list[str]:
        if cmd not in self.commands:
            self.commands.append(cmd)
        return ["0"]


def sysinfo_commands() -> tuple[str, ...]:
    """Every command :func:`rtlab.measure.sysinfo.read_system_info` may send, in its order."""
    recorder = _Recorder()
    read_system_info(recorder)
    return tuple(recorder.commands)


@attr.frozen
class Answer:
    output: str
    exit_status: int


@attr.frozen
class _Replay:
    answers: Mapping[str, Answer]

    def run_check(self, cmd: str, *, timeout: int = 30, codec: str = "utf-8",
                  decodeerrors: str = "strict") -> list[str]:
        try:
            answer = self.answers[cmd]
        except KeyError:
            raise FactsError(f"the job did not run {cmd!r} on the board (was it rendered "
                             "by another rtlab?)") from None
        if answer.exit_status != 0:
            raise FactsError(f"{cmd!r} exited {answer.exit_status} on the board: "
                             f"{answer.output.strip()[-200:]!r}")
        return answer.output.splitlines()


def replay_system_info(answers: Mapping[str, Answer]) -> SystemInfo:
    """The system facts from the board's answers (command → output), exactly as
    read_system_info reads them on labgrid."""
    try:
        return read_system_info(_Replay(answers))
    except FactsError:
        raise
    except (ValueError, IndexError) as error:
        raise FactsError(f"the board's system facts are unreadable: {error}") from error
