"""The board's system facts asked at once: rtlab.measure.sysinfo's own commands, recorded,
run on the board in one go, and ``read_system_info`` replayed on the answers, so that both
paths read the facts with the same code from the same commands.

A LAVA job cannot be asked anything after the fact: its script runs every command into a
file, and the records replay the outputs from the log. A labgrid run could ask command by
command, but each question is a round trip on the console (eleven took 3.5 s on the
virtual rack, bench/harness_overhead.py, 2026-11-25): it sends them in a few batches of
commands instead (:func:`read_system_info_at_once`), each answer behind a marker with its
exit status.
"""

import re
import secrets
from collections.abc import Mapping, Sequence

import attr

from rtlab.measure.sysinfo import Shell, SystemInfo, read_system_info
from rtlab.measure.upload import LINE_CHARS


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


def batches(commands: Sequence[str], mark: str) -> list[str]:
    """Shell commands that run ``commands`` in order, each in a subshell of its own and
    followed by ``MARK:index:status``, as few as fit in commands of LINE_CHARS."""
    parts = [f"( {command} ); echo {mark}:{index}:$?" for index, command in enumerate(commands)]
    out: list[str] = []
    for part in parts:
        if len(part) > LINE_CHARS:
            raise ValueError(f"a system-facts command is too long for one line: {part[:60]}…")
        if out and len(out[-1]) + 2 + len(part) <= LINE_CHARS:
            out[-1] += "; " + part
        else:
            out.append(part)
    return out


def parse_batch(lines: Sequence[str], mark: str, commands: Sequence[str]) -> dict[str, Answer]:
    """The answers in the output of :func:`batches`' commands (a command's output that
    did not end its line runs into the marker)."""
    marker = re.compile(rf"^(.*){re.escape(mark)}:(\d+):(\d+)$")
    answers: dict[str, Answer] = {}
    output: list[str] = []
    for line in lines:
        found = marker.match(line)
        if found is None:
            output.append(line)
            continue
        if found.group(1):
            output.append(found.group(1))
        index = int(found.group(2))
        if index >= len(commands):
            raise FactsError(f"the board answered a system-facts command {index} that was "
                             "not asked")
        answers[commands[index]] = Answer("\n".join(output), int(found.group(3)))
        output = []
    return answers


def read_system_info_at_once(shell: Shell, timeout: float = 60.0) -> SystemInfo:
    """read_system_info's facts in a few round trips instead of one per command."""
    commands = sysinfo_commands()
    mark = f"rtlab-facts-{secrets.token_hex(4)}"
    lines: list[str] = []
    for command in batches(commands, mark):
        lines += shell.run_check(command, timeout=timeout)
    return replay_system_info(parse_batch(lines, mark, commands))
