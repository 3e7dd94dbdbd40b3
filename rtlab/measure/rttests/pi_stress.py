"""pi_stress: PI mutex inversion groups; a functional verdict from its summary, its
watchdog and its ``--json`` file.

Facts about rt-tests 2.4 this module relies on (checked on the virtual boards, see
tests/data/rttests/README.md, and in the rt-tests sources where a board cannot show them):

* pi_stress ``-D N`` stops at the first 0.75 s report after N s, so it runs N+1 to N+2 s.
  A deadlocked group (no priority inheritance) trips its watchdog: "WATCHDOG triggered:
  group N is deadlocked!" on stderr, then it sends SIGTERM to its whole process group and
  writes no JSON (from the source; a working kernel cannot show it).
"""

import re
from collections.abc import Iterable, Sequence

from rtlab.measure.cyclictest import require_int
from rtlab.measure.rttests import (
    FunctionalResult,
    RtTestsParseError,
    Verdict,
    _fill,
    _lines,
    _load,
    _option_value,
    _quote,
    _require_path,
    check_console,
)
from rtlab.util.jsonfields import Fields


def pi_stress_command(*, duration_s: int, json_path: str) -> list[str]:
    """Inversion groups on every CPU but the first, for ``duration_s`` (+1..2) seconds.

    Run it in a process group of its own (e.g. ``setsid``): on a deadlock pi_stress
    sends SIGTERM to its whole process group.
    """
    require_int("duration_s", duration_s, 1, None)
    _require_path(json_path)
    return _fill("pi_stress", {"duration_s": duration_s, "json_path": json_path})


_PI_TOTAL = re.compile(r"^Total inversion performed: (\d+)$")
_PI_DURATION = re.compile(
    r"^Test Duration: (\d+) days, (\d+) hours, (\d+) minutes, (\d+) seconds$")
_PI_WATCHDOG = re.compile(r"WATCHDOG triggered: group \d+ is deadlocked!")


def parse_pi_stress(
    stdout: str,
    source: str,
    *,
    exit_status: int,
    stderr: str = "",
    json_text: str | None = None,
    argv: Sequence[str] | None = None,
) -> FunctionalResult:
    """The verdict of a ``pi_stress -q`` run from its stdout, stderr, exit status and (if
    it wrote one) its ``--json`` file.

    FAIL needs the watchdog's deadlock message; PASS needs exit status 0, a complete
    summary with inversions, a run as long as asked for and a JSON file that agrees.
    Anything else raises :class:`RtTestsParseError`.
    """
    require_int("exit_status", exit_status, -255, 255)
    out, kernel = _lines(stdout)
    err, err_kernel = _lines(stderr)
    kernel += err_kernel
    watchdog = [line for _, line in [*err, *out] if _PI_WATCHDOG.search(line)]
    if watchdog:
        return FunctionalResult(
            source=source, tool="pi_stress", verdict=Verdict.FAIL,
            inversions=_pi_total(out), exit_status=exit_status,
            reason="the watchdog found a deadlocked inversion group: priority inheritance "
                   "did not resolve the inversion",
            evidence=tuple(watchdog), kernel_log_lines=tuple(kernel),
        )
    check_console("pi_stress", f"{stdout}\n{stderr}", source)
    if exit_status != 0:
        raise RtTestsParseError(
            f"{source}: pi_stress exited with status {exit_status} without a deadlock "
            f"report; {'stderr' if err else 'output'}: {_quote(err or out)}")
    if err:
        line_no, line = err[0]
        raise RtTestsParseError(f"{source} (stderr):{line_no}: unexpected output {line[:80]!r}")

    total = duration = None
    for line_no, line in out:
        total_match = _PI_TOTAL.match(line)
        duration_match = _PI_DURATION.match(line)
        if total_match and total is None:
            total = int(total_match.group(1))
        elif duration_match and total is not None and duration is None:
            days, hours, minutes, seconds = (int(g) for g in duration_match.groups())
            duration = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
        else:
            raise RtTestsParseError(f"{source}:{line_no}: unexpected line {line[:80]!r}")
    if total is None or duration is None:
        missing = "'Total inversion performed:'" if total is None else "'Test Duration:'"
        last = out[-1][0] if out else 0
        raise RtTestsParseError(f"{source}: truncated after line {last}: no {missing} line")
    evidence = tuple(line for _, line in out)

    asked = _option_value(argv, "-D", "--duration") if argv is not None else None
    if asked is not None and duration < asked:
        raise RtTestsParseError(f"{source}: pi_stress stopped after {duration} s, "
                                f"{asked} s were asked for")
    run = None
    if json_text is not None:
        doc, run, json_kernel, fail = _load("pi_stress", json_text, f"{source} (JSON)", argv)
        if run.return_code != 0:
            raise fail(f"return_code {run.return_code} but pi_stress exited 0")
        inversions = Fields(doc, "", fail).integer("inversion")
        if inversions != total:
            raise fail(f"{inversions} inversions in the JSON, {total} in the summary")
    if total == 0:
        return FunctionalResult(
            source=source, tool="pi_stress", verdict=Verdict.INCONCLUSIVE, inversions=0,
            exit_status=exit_status, reason="no inversion was performed",
            evidence=evidence, run=run, kernel_log_lines=tuple(kernel),
        )
    return FunctionalResult(
        source=source, tool="pi_stress", verdict=Verdict.PASS, inversions=total,
        exit_status=exit_status,
        reason=f"{total} inversions in {duration} s resolved, no group deadlocked",
        evidence=evidence, run=run, kernel_log_lines=tuple(kernel),
    )


def _pi_total(lines: Iterable[tuple[int, str]]) -> int | None:
    for _, line in lines:
        match = _PI_TOTAL.match(line)
        if match:
            return int(match.group(1))
    return None
