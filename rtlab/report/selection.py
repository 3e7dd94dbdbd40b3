"""What a report covers: which boards and flavours, which runs are the candidate and
which the baseline, and how much it draws. Light on purpose: the command line builds one
before anything heavy is imported."""

import attr

# series drawn by default: each is up to three panels (histogram, trend, overlay) of some
# 60 ms of drawing each, so that a report stays within a couple of seconds on two cores
DEFAULT_MAX_SERIES = 8
# bench/verdict_quality.py: against 5 baseline runs a x1.5 tail regression is found in
# 58-90 % of runs where runs differ, against 20 in 96-100 % (false fails about 1 % both)
DEFAULT_BASELINE_RUNS = 20
DEFAULT_QUANTILE = 0.999


@attr.frozen
class Selection:
    """Which part of the store a report covers, and against what it compares."""

    boards: tuple[str, ...] = ()
    flavours: tuple[str, ...] = ()
    # the candidate: the newest case of each series, or of this ref or pipeline only
    candidate_ref: str | None = None
    candidate_pipeline: str | None = None
    # None: earlier runs of any ref (a desk's or the demo's runs, which have none)
    baseline_ref: str | None = "main"
    baseline_runs: int = DEFAULT_BASELINE_RUNS
    # series drawn (histograms, trends, overlays), whole board × flavour × scenario groups
    # at a time, failures first; 0: no figures
    max_series: int = DEFAULT_MAX_SERIES
    quantile: float = DEFAULT_QUANTILE
    # tail estimates (a fit per case, ~0.1 s each): off unless asked for
    tail_estimates: bool = False
    # change points on the baseline branch's series (rtlab.report.changes), kept in the
    # store: off for a report that must not write to it
    changes: bool = True

    @property
    def baseline_name(self) -> str:
        return self.baseline_ref if self.baseline_ref is not None else "earlier runs"

    def describe_candidate(self) -> str:
        if self.candidate_pipeline is not None:
            return f"pipeline {self.candidate_pipeline}"
        if self.candidate_ref is not None:
            return f"the newest case of each series on {self.candidate_ref}"
        return "the newest case of each series"
