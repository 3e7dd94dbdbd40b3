"""What a preflight check found (``rtlab lab doctor``): one finding per thing checked, with
the fix for a problem, for a person at a glance and as JSON for CI.

An ``error`` is a problem that would fail a pipeline (exit 1); a ``warning`` is one that
would not fail it but leaves something undone (a scenario skipped, a limit not measured on
this lab's boards): it is shown, and the exit stays 0.
"""

import json
from collections.abc import Sequence
from typing import Literal

import attr

OK, WARNING, ERROR = "ok", "warning", "error"
Status = Literal["ok", "warning", "error"]
MARKS = {OK: "✓", WARNING: "!", ERROR: "✗"}
EXIT_OK, EXIT_PROBLEM = 0, 1


@attr.frozen
class Finding:
    """``check``: which check (``coordinator``, ``resources``, ``migrations`` …);
    ``subject``: what it looked at (a place, a board type, the database); ``fix``: what to
    do, for a warning or an error."""

    check: str
    subject: str
    status: Status = attr.field(validator=attr.validators.in_((OK, WARNING, ERROR)))
    message: str
    fix: str = ""

    def __attrs_post_init__(self) -> None:
        if self.status != OK and not self.fix:
            raise ValueError(f"{self.check} {self.subject}: a {self.status} needs its fix")


def ok(check: str, subject: str, message: str) -> Finding:
    return Finding(check, subject, OK, message)


def warning(check: str, subject: str, message: str, fix: str) -> Finding:
    return Finding(check, subject, WARNING, message, fix)


def error(check: str, subject: str, message: str, fix: str) -> Finding:
    return Finding(check, subject, ERROR, message, fix)


def exit_code(findings: Sequence[Finding]) -> int:
    return EXIT_PROBLEM if any(f.status == ERROR for f in findings) else EXIT_OK


def as_text(findings: Sequence[Finding]) -> str:
    """One line per finding (mark, check, subject, message), the fix indented under a
    problem, and a last line that counts them."""
    lines = []
    for finding in findings:
        lines.append(f"{MARKS[finding.status]} {finding.check} {finding.subject}: "
                     f"{finding.message}")
        if finding.fix:
            lines.append(f"    fix: {finding.fix}")
    errors = sum(f.status == ERROR for f in findings)
    warnings = sum(f.status == WARNING for f in findings)
    verdict = ("a pipeline would fail" if errors else "ready" if not warnings
               else "ready, with warnings")
    lines.append(f"{len(findings)} checks: {errors} error(s), {warnings} warning(s): "
                 f"{verdict}")
    return "\n".join(lines)


def as_json(findings: Sequence[Finding]) -> str:
    return json.dumps({"ok": exit_code(findings) == EXIT_OK,
                       "errors": sum(f.status == ERROR for f in findings),
                       "warnings": sum(f.status == WARNING for f in findings),
                       "checks": [attr.asdict(f) for f in findings]}, indent=2,
                      ensure_ascii=False)
