"""pip_stress: one PI inversion between processes; a functional verdict from the one line
it prints (it has neither ``-q`` nor ``--json``).

Facts about rt-tests 2.4 this module relies on (checked on the virtual boards, see
tests/data/rttests/README.md, and in the rt-tests sources where a board cannot show them):

* pip_stress forks low -> high -> medium; the verdict line comes from the high process,
  but the shell gets the low process's status, which is 0 whether or not an inversion
  happened. "No inversion incurred" means the scheduling did not set up the inversion (PI
  was not exercised), not that PI failed; without PI the high process never gets the
  mutex and pip_stress hangs.
"""

from rtlab.measure.cyclictest import require_int
from rtlab.measure.rttests import (
    FunctionalResult,
    RtTestsParseError,
    Verdict,
    _fill,
    _lines,
    _quote,
    check_console,
)


def pip_stress_command() -> list[str]:
    """One inversion attempt; it has no options. A run that does not end within a few
    seconds is a deadlock: report it with :func:`.board.hung`."""
    return _fill("pip_stress", {})


_PIP_PASS = "Successfully used priority inheritance to handle an inversion"
_PIP_NONE = "No inversion incurred"


def parse_pip_stress(
    stdout: str, source: str, *, exit_status: int, stderr: str = ""
) -> FunctionalResult:
    """The verdict of one pip_stress run: its single line decides, since the exit status
    is 0 either way. A non-zero status means it failed before the test (e.g. no
    permission for SCHED_FIFO) and raises."""
    require_int("exit_status", exit_status, -255, 255)
    out, kernel = _lines(stdout)
    err, err_kernel = _lines(stderr)
    check_console("pip_stress", f"{stdout}\n{stderr}", source)
    if exit_status != 0:
        raise RtTestsParseError(f"{source}: pip_stress exited with status {exit_status} "
                                f"before its test; {'stderr' if err else 'output'}: "
                                f"{_quote(err or out)}")
    if err:
        line_no, line = err[0]
        raise RtTestsParseError(f"{source} (stderr):{line_no}: unexpected output {line[:80]!r}")
    if not out:
        raise RtTestsParseError(f"{source}: no verdict line (empty or truncated output)")
    line_no, line = out[0]
    if line not in (_PIP_PASS, _PIP_NONE):
        raise RtTestsParseError(f"{source}:{line_no}: not a pip_stress verdict: {line[:80]!r}")
    if len(out) > 1:
        extra_no, extra = out[1]
        raise RtTestsParseError(f"{source}:{extra_no}: unexpected line after the verdict "
                                f"{extra[:80]!r}")
    passed = line == _PIP_PASS
    return FunctionalResult(
        source=source, tool="pip_stress",
        verdict=Verdict.PASS if passed else Verdict.INCONCLUSIVE,
        inversions=1 if passed else 0, exit_status=exit_status,
        reason="the inversion was resolved by priority inheritance" if passed
        else "the processes did not get into an inversion",
        evidence=(line,), kernel_log_lines=tuple(kernel + err_kernel),
    )
