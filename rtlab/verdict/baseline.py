"""Which stored runs may stand as a case's baseline.

A comparison with the baseline tells a kernel change from a reboot only when the
baseline's runs measured what the case measures, as long, on kernels that passed, and on
more than one boot: the boot-to-boot spread is the noise a shift must stand out from,
and one boot (or one run) does not show it. A run is eligible when

- it passed (a failed run is the problem a baseline must not hide);
- it is of the same board type, kernel flavour, scenario and interval (the store's
  series, rtlab.store.query.baseline_runs);
- its cyclictest ran with the same options, its length and trace settings aside
  (:func:`measuring_options`);
- it measured as long as the case may (its cap) within :data:`LENGTH_TOLERANCE`: an early
  stop of an adaptive run, or a ten-second check, is no hour.

The baseline is usable for an early decision with at least ``baseline_runs`` eligible runs
from at least ``baseline_boots`` boots (thresholds.yaml ``statistics:``); otherwise the
case runs to its cap and says why (rtlab.verdict.sequential).
"""

from collections.abc import Mapping, Sequence
from typing import Any

import attr

from rtlab.verdict.histogram import Histogram

# how many of a series' newest stored runs are looked at for its baseline (both runners)
NEWEST_RUNS = 20
# a run counts as the case's length when it measured within 10 % of it
LENGTH_TOLERANCE = 0.1
# the options that say how long, or what to trace, not what is measured
_LENGTH_OPTIONS = ("-D", "--duration")
_TRACE_OPTIONS = ("--breaktrace", "--tracemark")


def measuring_options(command: Sequence[str]) -> tuple[str, ...]:
    """``command`` (a record's ``command`` fact: chrt and cyclictest's argv) without its
    length and its trace settings: what two runs must share to be compared."""
    kept: list[str] = []
    skip_next = False
    for word in command:
        if skip_next:
            skip_next = False
            continue
        name = word.split("=", 1)[0]
        if name in _LENGTH_OPTIONS or name in ("-b",):
            # "-D 60s" takes the next word; "--duration=60s" does not
            skip_next = "=" not in word
            continue
        if name in _TRACE_OPTIONS:
            continue
        kept.append(word)
    return tuple(kept)


@attr.frozen
class StoredRun:
    """One stored run of the case's series, as a baseline candidate."""

    run_key: str
    verdict: str
    duration_s: float | None
    command: tuple[str, ...] | None
    boot: str
    """Which boot of which board measured it (runs of one boot share its offsets)."""
    histogram: Histogram | None
    """Every CPU's wake-ups together (None: the run kept no histogram)."""
    pooled_boots: tuple[str, ...] = ()
    """A case measured on several boards at once (rtlab.run.pooling): the boots its
    histogram pooled (empty: the one ``boot``)."""

    @property
    def boots(self) -> tuple[str, ...]:
        return self.pooled_boots or (self.boot,)


@attr.frozen
class Baseline:
    """The eligible runs of a case's baseline, and why the others were left out."""

    histograms: tuple[Histogram, ...]
    boots: int
    considered: int
    left_out: Mapping[str, int]
    """Why runs were left out -> how many."""
    why_not: str | None
    """Why the baseline allows no early decision and no regression verdict (None: it
    does)."""
    length_s: float
    min_runs: int
    min_boots: int
    boots_per_run: tuple[int, ...] = ()
    """How many boots each run of ``histograms`` pooled (empty: one each)."""

    @property
    def eligible(self) -> bool:
        return self.why_not is None

    @property
    def runs(self) -> int:
        return len(self.histograms)

    def describe(self) -> str:
        """``12 runs, 3 boots`` — what a comparison stood on."""
        return (f"{self.runs} run{'s' if self.runs != 1 else ''} of "
                f"{_length(self.length_s)}, {self.boots} boot{'s' if self.boots != 1 else ''}")

    def facts(self) -> dict[str, Any]:
        return {"eligible": self.eligible, "runs": self.runs, "boots": self.boots,
                "considered": self.considered, "left_out": dict(self.left_out),
                "why_not": self.why_not, "length_s": self.length_s,
                "min_runs": self.min_runs, "min_boots": self.min_boots}


def no_baseline(why: str, *, length_s: float, min_runs: int, min_boots: int) -> Baseline:
    """A case without a store to look into, or one that asked for no baseline."""
    return Baseline((), 0, 0, {}, why, length_s, min_runs, min_boots)


def eligible_baseline(runs: Sequence[StoredRun], *, command: Sequence[str], length_s: float,
                      min_runs: int, min_boots: int) -> Baseline:
    """The runs of ``runs`` that may stand as the baseline of a case measured with
    ``command`` up to ``length_s`` (module docstring), and whether they are enough."""
    wanted = measuring_options(command)
    left_out: dict[str, int] = {}

    def leave_out(why: str) -> None:
        left_out[why] = left_out.get(why, 0) + 1

    kept: list[StoredRun] = []
    for run in runs:
        if run.verdict != "pass":
            leave_out(f"verdict {run.verdict}")
        elif run.command is None or measuring_options(run.command) != wanted:
            leave_out("other cyclictest options")
        elif (run.duration_s is None
              or abs(run.duration_s - length_s) > LENGTH_TOLERANCE * length_s):
            leave_out(f"not {_length(length_s)} long")
        elif run.histogram is None or run.histogram.samples == 0:
            leave_out("no histogram")
        else:
            kept.append(run)
    boots = len({boot for run in kept for boot in run.boots})
    why_not = None
    if len(kept) < min_runs or boots < min_boots:
        found = (f"{len(kept)} eligible run{'s' if len(kept) != 1 else ''} from {boots} "
                 f"boot{'s' if boots != 1 else ''}")
        others = ", ".join(f"{count} {why}" for why, count in sorted(left_out.items()))
        why_not = (f"no eligible baseline: {found}, an early decision needs {min_runs} "
                   f"passing runs of the same options and {_length(length_s)} from "
                   f"{min_boots} boots" + (f" (left out: {others})" if others else ""))
    return Baseline(tuple(run.histogram for run in kept if run.histogram is not None), boots,
                    len(runs), left_out, why_not, length_s, min_runs, min_boots,
                    boots_per_run=tuple(len(run.boots) for run in kept))


def _length(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
