"""What the board runs in a LAVA job: the measurement windows of rtlab.measure.window (the scripts
a labgrid run uploads, made by the same function), the driver jobs/board/suite.sh.j2, and
the test definition's steps that put them on the board.

The steps write each file with a quoted here-document: LAVA writes a step into its run.sh
as it is, and its ``set -x`` traces only the ``cat`` of each, not the file.
"""

from collections.abc import Mapping

from rtlab.lava import templates
from rtlab.lava.plan import Plan
from rtlab.measure.cyclictest import HIST_ON_BOARD
from rtlab.measure.window import (
    LOAD_OVERRUN_S,
    MARK,
    PROGRAM_OUT,
    WINDOW_SCRIPT,
    started_loads,
    window_script,
)

BOARD_DIR = "/tmp/rtlab-lava"
DRIVER = "suite.sh"
HEREDOC_END = "RTLAB_LAVA_FILE_END"
# LAVA rewrites $1, $2… in a step that mentions these (its own helpers' arguments)
_LAVA_REWRITES = ("--cmd", "--shell")
# the prefix of every line the driver prints for rtlab lava records to read
PREFIX = "rtlab-lava:"


def window_file(index: int) -> str:
    return f"window-{index}.sh"


def board_files(plan: Plan) -> dict[str, str]:
    """File name (in :data:`BOARD_DIR`) → content, the driver last."""
    files = {}
    for case in plan.cases:
        if case.skip is None:
            files[window_file(case.index)] = window_script(
                list(case.program), started_loads(case.parts()), plan.load_cpu_count(case),
                case.wait_s + LOAD_OVERRUN_S, conditions=case.checked(plan),
                window_s=case.wait_s)
    files[DRIVER] = templates.render(
        "board/suite.sh.j2", dir=BOARD_DIR, mark=MARK, hist=HIST_ON_BOARD, window=WINDOW_SCRIPT,
        program_out=PROGRAM_OUT,
        cases=plan.cases, sysinfo_commands=plan.sysinfo_commands)
    return files


def test_steps(files: Mapping[str, str]) -> list[str]:
    """The run steps of the job's test definition: write the files, run the driver."""
    steps = [f"mkdir -p {BOARD_DIR}"]
    for name, content in files.items():
        if any(line == HEREDOC_END for line in content.splitlines()):
            raise ValueError(f"{name} contains the here-document end {HEREDOC_END}")
        steps.append(f"cat >{BOARD_DIR}/{name} <<'{HEREDOC_END}'\n{content.rstrip()}\n"
                     f"{HEREDOC_END}")
    steps.append(f"sh {BOARD_DIR}/{DRIVER}")
    for step in steps:
        if any(word in step for word in _LAVA_REWRITES):
            raise ValueError(f"a test step mentions {_LAVA_REWRITES}, which LAVA rewrites: "
                             f"{step[:80]!r}")
    return steps
