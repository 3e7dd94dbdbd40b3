"""The GitLab metrics report (``artifacts: reports: metrics``): OpenMetrics text, one
``name{labels} value`` line per figure of each current case, ``# EOF`` at the end.

GitLab shows, in a merge request, every metric whose value differs from the target
branch's report, keyed by the whole ``name{labels}`` text. So every sample names its series
with the same four labels in the same order, and a figure that is unknown (a percentile
past the histogram's range) is left out rather than written as a made-up number. GitLab
reads each line up to a ``#`` and splits it like a shell would: label values here are
board, flavour and scenario names, which hold neither.
"""

import math
from collections.abc import Iterator

from rtlab.report.data import ReportData, Row

# metric family -> its HELP text, in the order they are written
FAMILIES = {
    "rtlab_latency_max_us": "worst single wake-up latency of the case's worst CPU (µs)",
    "rtlab_latency_p99_9_us": "99.9th percentile latency of the case's worst CPU (µs)",
    "rtlab_latency_avg_us": "average latency of the case's worst CPU (µs)",
    "rtlab_latency_overflow_samples": "wake-ups past the histogram's range, all CPUs",
    "rtlab_limit_us": "limit the case was judged by (µs), per thresholds.yaml metric",
    "rtlab_case_verdict": "1 for the verdict of the newest case of the series",
    "rtlab_compare_shift_us": "candidate - baseline tail quantile (µs)",
    "rtlab_compare_regression": "1 when the comparison proved a regression, else 0",
    "rtlab_cases": "newest cases of the report by verdict",
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(row: Row, **extra: str) -> str:
    board, flavour, scenario, interval = row.key
    pairs = {"board": board, "flavour": flavour, "scenario": scenario or "",
             "interval_us": "" if interval is None else str(interval), **extra}
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in pairs.items()) + "}"


def _number(value: float) -> str:
    if isinstance(value, int) or (math.isfinite(value) and float(value).is_integer()
                                  and abs(value) < 2**53):
        return str(int(value))
    return repr(float(value))


def _samples(data: ReportData, family: str) -> Iterator[str]:
    for row in data.rows:
        measured = row.case.measured
        if family == "rtlab_latency_max_us" and measured and row.max_us is not None:
            yield f"{family}{_labels(row)} {_number(row.max_us)}"
        elif family == "rtlab_latency_p99_9_us" and measured and row.p99_9_us is not None:
            yield f"{family}{_labels(row)} {_number(row.p99_9_us)}"
        elif family == "rtlab_latency_avg_us" and measured and row.avg_us is not None:
            yield f"{family}{_labels(row)} {_number(row.avg_us)}"
        elif (family == "rtlab_latency_overflow_samples" and measured
              and row.range_us is not None):
            yield f"{family}{_labels(row)} {row.overflows}"
        elif family == "rtlab_limit_us":
            for metric, limit in sorted(row.judged.items()):
                yield f"{family}{_labels(row, metric=metric)} {_number(limit.value)}"
        elif family == "rtlab_case_verdict":
            yield f"{family}{_labels(row, verdict=row.verdict)} 1"
        elif family.startswith("rtlab_compare_") and row.comparison is not None:
            comparison = row.comparison
            if comparison.outcome is None:
                continue
            # one sample per quantile compared (p99.9 and the higher decades a run is
            # long enough for), so that a series keeps its label set from run to run
            for quantile, outcome, difference in comparison.compared:
                labels = _labels(row, quantile=f"{quantile:g}")
                if family == "rtlab_compare_shift_us":
                    yield f"{family}{labels} {_number(difference)}"
                else:
                    yield f"{family}{labels} {int(outcome == 'regression')}"


def openmetrics(data: ReportData) -> str:
    """The report's figures as OpenMetrics text (gauges), ending in ``# EOF``."""
    lines = []
    for family, help_text in FAMILIES.items():
        if family == "rtlab_cases":
            samples = [f'{family}{{verdict="{verdict}"}} {count}'
                       for verdict, count in data.counts().items()]
        else:
            samples = list(_samples(data, family))
        if not samples:
            continue
        lines.append(f"# HELP {family} {help_text}")
        lines.append(f"# TYPE {family} gauge")
        lines.extend(samples)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"
