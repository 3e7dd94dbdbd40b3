"""Which latency cases arm the kernel's trace (rtlab.measure.trace), and why: never a
campaign's (the break would cut the window that a comparison of tails needs whole);
otherwise as ``--rt-trace always|never`` says, else thresholds.yaml's ``trace:``, else on
in the gate tier and in a re-run of a series whose last stored run failed
(rtlab.store.query.last_failed_run says which)."""

from collections.abc import Callable

from rtlab.measure.trace import TRACE_CHOICES
from rtlab.verdict.thresholds import TracePolicy

# the suite's tier whose cases trace by default: the pipeline's gate on every push, where
# a breach is otherwise gone by the time someone looks at it
GATE_TIER = "gate"
CAMPAIGN_WHY = ("a campaign case is measured for its whole length: --breaktrace would end "
                "it at the first breach")
GATE_WHY = "gate tier: a breach keeps its trace (docs/tracing.md)"
NOT_ASKED_WHY = ("not asked for: no trace: true in thresholds.yaml, not the gate tier, and "
                 "no stored run of the series that failed last")

class TraceChoiceError(ValueError):
    """A trace asked for where a case must not break: a campaign's ``--rt-trace always``."""


def choose_trace(requested: str, policy: TracePolicy, *, campaign: str | None = None,
                 tier: str | None = None,
                 last_failed: Callable[[], str | None] = lambda: None) -> tuple[bool, str]:
    """Whether a latency case arms the kernel's trace, and with it cyclictest's
    ``--breaktrace`` at its max_us, and why (the record's ``trace.why``).

    ``requested`` is ``--rt-trace``; ``policy`` thresholds.yaml's ``trace:`` for the case;
    ``campaign`` the campaign the case belongs to (None: none); ``tier`` the suite tier
    that named the cases (``--rt-tier``); ``last_failed`` says, when asked, which stored
    run of the series failed last (None: none did, or no store), so that the store is
    opened only where nothing before it decided.

    A campaign's case never traces: a break ends its window at the first breach, and the
    campaign compares variants by tails that only whole windows show, so a run cut there
    would pass for a full one with a censored tail. ``always`` is refused for one
    (:class:`TraceChoiceError`) rather than silently not done. Otherwise ``never`` and
    ``always`` decide, then the nearest thresholds.yaml level that sets ``trace:``, then
    the gate tier (on), then a re-run of a series whose last stored run failed (on)."""
    if requested not in TRACE_CHOICES:
        raise ValueError(f"--rt-trace must be one of {', '.join(TRACE_CHOICES)}, got "
                         f"{requested!r}")
    if requested == "never":
        return False, "--rt-trace never"
    if campaign is not None:
        if requested == "always":
            raise TraceChoiceError(
                f"--rt-trace always (rtlab run --trace always): {CAMPAIGN_WHY} (campaign "
                f"{campaign}, docs/tracing.md): give --rt-trace auto or never")
        return False, CAMPAIGN_WHY
    if requested == "always":
        return True, "--rt-trace always"
    if policy.source is not None:
        return policy.enabled, f"trace: {str(policy.enabled).lower()} ({policy.source})"
    if tier == GATE_TIER:
        return True, GATE_WHY
    failed = last_failed()
    if failed is not None:
        return True, f"a re-run: the series' last stored run failed ({failed})"
    return False, NOT_ASKED_WHY
