"""The pipeline's error budget: how often a pipeline whose every gated case is unchanged may
go red, shared out over its cases and, within a case, over every way the case fails.

A case fails an unchanged kernel in three ways, and each has a share of the case's part of
the budget (docs/verdicts.md, "One error budget"):

- **limits**: the run exceeds ``max_us``. The judge cannot control this at judging time:
  a limit is as safe as it is high. The share is what tuning aims a limit at
  (rtlab.tuning.exposure: the chance that one case's run, its length and its boards,
  exceeds it) and what ``rtlab thresholds check`` holds a limit against;
- **tail**: the tail bound's lower confidence limit lies above ``max_us``, judged once at
  the case's end, one-sided on each CPU (the share split over the CPUs);
- **comparison**: a regression against the baseline, over all the case's looks and
  quantiles (rtlab.verdict.sequential, rtlab.verdict.comparison).

The union of a pipeline's failures is at most the sum of theirs (Bonferroni): the shares of
every case sum to ``pipeline`` whatever the case count.
"""

from collections.abc import Mapping

import attr

SHARES: Mapping[str, float] = {"limits": 0.3, "tail": 0.2, "comparison": 0.5}
"""A case's budget, way by way. The comparison gets half: it is the test that finds a
wider tail (× 1.5) and the one that pays for its looks. ``max_us`` gets 0.3: a limit that
must hold one case's run with that chance sits a few µs higher than with all of it. The
tail gate, which only adds fails where the comparison or the limit would have found them
later, gets the rest."""


@attr.frozen
class ErrorBudget:
    """The pipeline's false-red rate ``pipeline`` over its ``cases`` gated latency cases."""

    pipeline: float
    cases: int

    def __attrs_post_init__(self) -> None:
        if not 0 < self.pipeline < 1:
            raise ValueError(f"pipeline_false_fail must be in (0, 1), got {self.pipeline}")
        if not isinstance(self.cases, int) or isinstance(self.cases, bool) or self.cases < 1:
            raise ValueError(f"the pipeline's cases must be a whole number >= 1, got "
                             f"{self.cases!r}")

    @property
    def per_case(self) -> float:
        return self.pipeline / self.cases

    def share(self, way: str) -> float:
        """The chance an unchanged case fails by ``way`` (a key of :data:`SHARES`)."""
        return self.per_case * SHARES[way]

    @property
    def limits(self) -> float:
        return self.share("limits")

    @property
    def tail(self) -> float:
        return self.share("tail")

    @property
    def comparison(self) -> float:
        return self.share("comparison")

    @property
    def comparison_confidence(self) -> float:
        """The comparison fails an unchanged case with (1 - confidence) / 2
        (rtlab.verdict.comparison.compare): its confidence holds it to its share."""
        return 1 - 2 * self.comparison

    def tail_confidence(self, cpus: int) -> float:
        """The two-sided confidence of each CPU's tail bound whose lower limit gates: one
        side per CPU at the tail's share over ``cpus`` CPUs."""
        return 1 - 2 * self.tail / max(1, cpus)

    def facts(self) -> dict[str, float | int]:
        """What a record keeps: the pipeline's rate, its cases and each way's share."""
        return {"pipeline": self.pipeline, "cases": self.cases, "per_case": self.per_case,
                **{way: self.share(way) for way in SHARES}}

    def arithmetic(self) -> str:
        """The split in one line, as docs/verdicts.md and ``rtlab thresholds show`` say it."""
        parts = ", ".join(f"{way} {self.share(way):.3g}" for way in SHARES)
        return (f"{self.pipeline:g} per pipeline / {self.cases} case(s) = "
                f"{self.per_case:.3g} per case: {parts}")
