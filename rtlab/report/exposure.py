"""The report's "Exposure per kernel": every stored run of a kernel on one board type under
one load pooled (rtlab.store.exposure), its exceedances of max_us and the upper bound on
their rate. Plain-text cells here; the page's table here too, the summary's in
``summary``."""

from html import escape

from rtlab.store.exposure import Exposure, KernelExposure
from rtlab.verdict.thresholds import format_us

TITLE = "Exposure per kernel"
HEAD = ("kernel", "board", "load", "cases (runs, pipelines)", "board-hours", "wake-ups",
        "wake-ups > max_us", "bound per board-hour", "bound per wake-up", "status")


def load(row: KernelExposure) -> str:
    """``scenario/interval``, as a series names them."""
    scenario = row.scenario or "?"
    return scenario if row.interval_us is None else f"{scenario}/{row.interval_us}us"


def hours(value: float) -> str:
    return f"{value:.1f}" if value >= 0.1 or value == 0 else f"{value:.2g}"


def rate(value: float | None) -> str:
    return "–" if value is None else f"≤ {value:.3g}"


def count(row: KernelExposure) -> str:
    """The exceedances, ``≥ k`` where some case's count is only a lower bound."""
    return f"≥ {row.exceedances}" if row.lower_bound else str(row.exceedances)


def confidence(row: KernelExposure) -> str:
    return f"{row.confidence * 100:g} %"


def limits(row: KernelExposure) -> str:
    if not row.limits_us:
        return "–"
    low, high = row.limits_us[0], row.limits_us[-1]
    return (f"max_us {format_us(low)}" if low == high
            else f"max_us {format_us(low)} to {format_us(high)}")


def cases(row: KernelExposure) -> str:
    return f"{row.cases} ({row.runs}, {row.pipelines})"


def ruled_out(row: KernelExposure, *, with_confidence: bool = True) -> str:
    """What a pass rules out: a rate of exceedances above the bounds."""
    bounds = [f"{value:.3g} per {unit}" for value, unit in
              ((row.per_hour_bound, "board-hour"), (row.per_wakeup_bound, "wake-up"))
              if value is not None]
    if not bounds:
        return "nothing measured"
    at = f" ({confidence(row)})" if with_confidence else ""
    return f"rules out a rate above {' or '.join(bounds)}{at}"


def status(row: KernelExposure) -> str:
    """FAIL, or the pass with what it rules out."""
    return "FAIL" if row.failed else f"pass: {ruled_out(row)}"


def left_out(exposure: Exposure) -> str:
    """What the figures leave out, in one sentence (empty when nothing)."""
    parts = []
    if exposure.errors:
        parts.append(f"{exposure.errors} error case(s)")
    if exposure.skipped:
        parts.append(f"{exposure.skipped} skipped case(s)")
    if exposure.without_limit:
        parts.append(f"{exposure.without_limit} measured case(s) without a max_us limit")
    if exposure.unidentified_count:
        parts.append(f"{exposure.unidentified_count} measured case(s) whose record names no "
                     f"kernel ({hours(exposure.unidentified_seconds / 3600)} board-hours)")
    return ("Left out: " + "; ".join(parts) + ".") if parts else ""


_ABOUT = ("Every stored measured (pass or fail) cyclictest case of one kernel on boards of "
          "one type under one scenario and interval, whatever its pipeline or tier, pooled: "
          "board-hours from the cases' durations, wake-ups from their CPUs' samples, and "
          "wake-ups above each case's own max_us (≥ k: a limit at or past the histogram's "
          "range, where only the maximum shows one). One exceedance anywhere fails the "
          "kernel's series. The bounds are the exact Poisson upper limit of the exceedances "
          "over the board-hours and over the wake-ups, at thresholds.yaml's "
          "statistics: exposure_confidence. A built kernel is named by its build's SHA-256, "
          "a Debian kernel by package=version.")


def html_section(exposure: Exposure | None) -> str:
    """The page's section, headed; every text from the store escaped."""
    out = [f"<h2>{escape(TITLE)}</h2>", f'<p class="small" id="exposure">{escape(_ABOUT)}</p>']
    if exposure is None or not (exposure.rows or exposure.unidentified_count
                                or exposure.errors or exposure.skipped):
        out.append("<p>No stored cyclictest case to pool.</p>")
        return "\n".join(out)
    if exposure.rows:
        out += ['<table id="exposure-table">',
                "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in HEAD) + "</tr>"]
        for row in exposure.rows:
            verdict = "fail" if row.failed else "pass"
            notes = []
            if row.errors:
                notes.append(f"{row.errors} error case(s) left out")
            if row.without_duration:
                notes.append(f"{row.without_duration} case(s) without a duration")
            note = "".join(f'<br><span class="small">{escape(n)}</span>' for n in notes)
            cells = [
                f"<td><code>{escape(row.kernel.short)}</code></td>",
                f"<td>{escape(row.board)}"
                f'<br><span class="small">{escape(", ".join(row.flavours))}</span></td>',
                f"<td>{escape(load(row))}"
                f'<br><span class="small">{escape(limits(row))}</span></td>',
                f'<td class="num">{escape(cases(row))}</td>',
                f'<td class="num">{escape(hours(row.board_hours))}</td>',
                f'<td class="num">{row.wakeups:,}</td>',
                f'<td class="num">{escape(count(row))}</td>',
                f'<td class="num">{escape(rate(row.per_hour_bound))}</td>',
                f'<td class="num">{escape(rate(row.per_wakeup_bound))}</td>',
                f'<td><span class="status v-{verdict}">{escape(row.status)}</span>'
                f"{'' if row.failed else ' ' + escape(ruled_out(row, with_confidence=False))}"
                f'<br><span class="small">confidence {escape(confidence(row))}, '
                f"{escape(row.confidence_source)}</span>{note}</td>",
            ]
            out.append("<tr>" + "".join(cells) + "</tr>")
        out.append("</table>")
    sentence = left_out(exposure)
    if sentence:
        out.append(f'<p id="exposure-left-out">{escape(sentence)}</p>')
    if exposure.unidentified:
        shown = len(exposure.unidentified)
        more = exposure.unidentified_count - shown
        out.append(f"<p>Measured cases whose record names no kernel (image.kernel without "
                   f"kernel_sha256 or package and version), newest first"
                   f"{f', {shown} of {exposure.unidentified_count}' if more else ''}:</p>")
        out.append('<ul id="exposure-unidentified">' + "".join(
            f"<li><code>{escape(case.name)}</code> <span class=\"small\">run "
            f"{escape(case.run_key)}, {case.started:%Y-%m-%d %H:%M}</span></li>"
            for case in exposure.unidentified) + "</ul>")
    return "\n".join(out)
