"""The bisection's report page (``report/index.html``) and its markdown summary
(``report/summary.md``, for a job log or a note): what was bisected, what was found, each
step with its verdict, the confidence it was decided at and the board time it took, and
the culprit commit's diff."""

import html
from pathlib import Path

import attr

from rtlab.bisect.result import FOUND, NOT_REPRODUCED, Bisection, Step, board_time
from rtlab.util.atomic import write_atomic

STYLE = """body{font-family:sans-serif;margin:2em;max-width:70em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}
.good{color:#060}.bad{color:#a00}.undecidable{color:#a60}pre{background:#f6f6f6;padding:1em;
overflow-x:auto}"""


@attr.frozen
class Written:
    html: Path
    summary: Path


def headline(result: Bisection) -> str:
    if result.status == FOUND and result.culprit is not None:
        line = f"{result.culprit.commit[:12]} \"{result.culprit.subject}\" brought the regression"
        if result.option is not None:
            line += (f", through {result.option.name} ({result.option.good} → "
                     f"{result.option.bad})")
        return line
    if result.status == NOT_REPRODUCED:
        return f"not reproduced: {result.reason}"
    where = ", ".join(c[:12] for c in result.candidates)
    return f"undecided: the culprit is one of {where}"


def _difference(step: Step) -> str:
    return "" if step.difference_us is None else f"{step.difference_us:+g} µs"


def summary(result: Bisection) -> str:
    lines = [f"# Bisection: {result.board} {result.flavour} {result.case}", "",
             f"{result.good[:12]} (good) .. {result.bad[:12]} (bad), {len(result.steps)} "
             f"steps, {board_time(result.board_s)} of board time", "",
             f"**{headline(result)}**", "", result.reason, "",
             "| step | kind | point | outcome | rounds | boots (good, step) | board time | "
             "decided | shift |", "|---|---|---|---|---|---|---|---|---|"]
    for step in result.steps:
        lines.append(f"| {step.index} | {step.kind} | {step.point} | {step.outcome} | "
                     f"{step.rounds} | {step.boots[0]}, {step.boots[1]} | "
                     f"{board_time(step.board_s)} | {step.decided} | {_difference(step)} |")
    return "\n".join(lines) + "\n"


def write_report(result: Bisection, folder: Path) -> Written:
    folder.mkdir(parents=True, exist_ok=True)
    rows = "".join(
        f"<tr><td>{s.index}</td><td>{s.kind}</td><td><code>{html.escape(s.point)}</code></td>"
        f"<td class='{s.outcome}'>{s.outcome}</td><td>{s.rounds}</td>"
        f"<td>{s.boots[0]}, {s.boots[1]}</td><td>{board_time(s.board_s)}</td>"
        f"<td>{s.decided}</td><td>{_difference(s)}</td>"
        f"<td>{html.escape(s.reason)}</td></tr>" for s in result.steps)
    culprit = ""
    if result.culprit is not None:
        culprit = (f"<h2>The culprit commit</h2><p><code>{result.culprit.commit}</code> "
                   f"{html.escape(result.culprit.subject)}</p>"
                   f"<pre>{html.escape(result.culprit.diff)}</pre>")
    candidates = ""
    if result.candidates:
        candidates = ("<h2>Could not be told apart</h2><ul>" + "".join(
            f"<li><code>{html.escape(c)}</code></li>" for c in result.candidates) + "</ul>")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Bisection {html.escape(result.board)} {html.escape(result.case)}</title>
<style>{STYLE}</style></head><body>
<h1>Bisection: {html.escape(result.board)} {html.escape(result.flavour)}
{html.escape(result.case)}</h1>
<p><code>{result.good[:12]}</code> (good) .. <code>{result.bad[:12]}</code> (bad) in
{html.escape(result.repository)}; kernels: {html.escape(result.source)};
started {html.escape(result.started)}</p>
<p><b>{html.escape(headline(result))}</b></p>
<p>{html.escape(result.reason)}</p>
<h2>Steps</h2>
<table><tr><th>step</th><th>kind</th><th>point</th><th>outcome</th><th>rounds</th>
<th>boots (good, step)</th><th>board time</th><th>decided</th><th>shift</th><th>why</th></tr>
{rows}</table>
<p>{len(result.steps)} steps, {board_time(result.board_s)} of board time in all. A step is
<i>bad</i> when its boots are a regression against the good point's, <i>good</i> when they
show no change at every quantile compared within half the regression the confirmation
measured, each at the step's confidence over every look; <i>undecidable</i> steps were
skipped, never guessed.</p>
{culprit}{candidates}
</body></html>
"""
    write_atomic(folder / "index.html", page)
    write_atomic(folder / "summary.md", summary(result))
    return Written(folder / "index.html", folder / "summary.md")
