"""How often does a bisection of a latency regression name the right commit, in how many
steps and board-hours, and how often does it end undecided: rtlab's bisection next to
one that measures a fixed number of rounds per step and compares once?

Each trial is one bisection of a simulated history: COMMITS (16) commits after the good
one, the bad one last; the culprit is drawn uniformly among the 16 (the bad end itself
included). Every commit before the culprit runs like the good point (the family,
unchanged), every commit from it on like the bad one (the family with the change). A
*round* is one fresh boot of the good point and one of the step's commit on each of
BOARDS (2) boards; every boot is a run of RUN_S (10 min, ``--run-min``) at 1 ms on 4 CPUs
(2.4 M wake-ups, every CPU's together: compare_tail compares p99.9 and p99.99; p99.999
needs 10^7 wake-ups a boot, 42 min), simulated in 1-minute windows as
bench/rack_strength.py's replicate does, each boot drawn independently with the family's
boot-to-boot variation (lf.boot: its latency scale, tail weight and, where the family has
it, tail offset). A round costs 2 × BOARDS × RUN_S of board time (40 board-minutes);
a step's budget is StepPolicy().rounds (6) rounds, 4 board-hours. The strategies:

* **(a) rtlab**, as rtlab.bisect.bisection.Bisector does it: the first step confirms the
  bad end against the good point (rtlab.bisect.decide.decide_step with margin=None: bad,
  or undecidable, which ends the bisection as "not reproduced"); the equivalence margin
  is then ``max(confirmed_shift / 2, tolerance)``, half the confirmation's shift at the
  quantile where it found the regression (relative; rtlab.bisect.decide.confirmed_shift),
  and a good step needs no change at every quantile compared.
  rtlab.bisect.search.CommitSearch asks for commits and each step measures rounds until
  decide_step stops (its looks: 1, 2, 4 and 6 rounds, StepPolicy's defaults: 98 % a
  step, each look's one comparison at 1 - 2 % / 4 = 99.5 %), comparing the step's boots
  with the good point's, pooled over the whole bisection: bad on a regression, good on
  no change within the margin, undecidable where neither holds by the 6th round; an
  undecidable step is recorded as such (CommitSearch skips it), and after
  bisection.MAX_UNDECIDABLE (3) of them the search stops, undecided, as the Bisector's;
* **(b) fixed rounds**: every step, the confirmation included, measures all 6 rounds, then
  one rtlab.verdict.comparison.compare_tail of the step's boots against the good point's
  (pooled over the bisection as in (a)) at the step's confidence (98 %, StepPolicy's
  quantile, tolerance and resamples): bad on a regression, else good; the confirmation,
  else "not reproduced". Never undecidable: what a person with a fixed run per kernel,
  or a naive tool, does. It takes no margin: "good" is merely "not a regression".

It prints, per family and change, for each strategy over the same trials' culprits: how
often the bisection named the right commit (the culprit), a wrong one, ended undecided
(CommitSearch.found() names several candidates, all but the last skipped), or did not
reproduce (the confirmation step did not find the bad end bad); the mean measured steps
(the confirmation included), the mean and 95th percentile board-hours (every boot of both
points on every board, RUN_S each; the confirmation included), the undecidable steps per
bisection, and the search's steps decided against the truth (the confirmation left out:
its misses are the "not reproduced"): a commit before the culprit called bad, of those
decided, and one from the culprit on called good, of those decided; decide_step promises
each at most 1 %. The second holds only where the quantile the good decision tests
(compare_tail's no change is p99.9's alone) carries the regression and the margin lies
below the commit's true shift: a regression of p99.99 alone, or a confirmation that
overestimated the shift more than twofold, lets a bad commit pass as good. Then the same
pooled over the families per change.

The families (bench/latency_families.py): the light synthetic source, bursts, one noisy
CPU among four, the rare mode (one wake-up in 10^9 at 150-400 µs) as the baseline, the
light source whose every boot scales its tail by its own offset (log-sd 0.10, the spread a
rack showed in issue 31), and two real boards' recorded shapes (civcode 4-core and the
J1900); every boot of every family also varies its latency scale (3 %) and its tail weight
(10 %). The changes (lf.Change, the culprit's and its successors' only): the tail's scale
× 1.5 and × 2, and a rare mode of SPIKES_PER_HOUR (4) events per board-hour above max_us
(each one wake-up between max_us and 1.5 × max_us; max_us as tuning sets it,
adaptive_quality.limit_for: 1.2 × the 0.99 quantile of A/A hours' maxima).

What a right answer rules out: on these families and at these sizes, that a step's error
(decide_step promises at most 1 % a step whichever way the truth lies) or a skip
compounds into a wrong or undecided culprit more often than the table shows, and that
the step's budget is too small to tell the change from a reboot. It does NOT rule out
what is not simulated: a rack that drifts over the bisection's hours (the good point's
boots are pooled over all of them, so drift would show as a regression of later
commits), boards that differ beyond a boot's spread, flaky boards, lab errors and voided
runs (decide_step's ``errors``), build failures, a commit that carries part of the change
(two culprits, or a regression made of two changes), a change that comes and goes (a
culprit reverted), and the config bisection (OptionSearch). No max_us gate is simulated
either: decide_step has none, it compares tail quantiles only, so a rare mode above
max_us (4 events a board-hour move no compared quantile) is not bisectable: its
confirmation does not find the bad end bad. All figures are printed, none asserted.

--quick: 6 bisections per family × change × strategy (252 in all; rough figures): 171
CPU-s, 169 s at ``nice -n 19`` on 2 cores beside a fresh-clone ``make test``
(2026-11-27). The full size (96) is meant
for 16 workers (``--workers 16``): 16 times the CPU of --quick, about 2700 CPU-s, some
3 min (estimated, not timed). The last line says the wall time and the workers' CPU time.

    .venv/bin/python bench/bisect_quality.py [--quick] [--workers 2] [--trials N]
                                             [--families 0,1,...] [--seed S]
                                             [--run-min 10]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import multiprocessing
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import attr
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import adaptive_quality as aq  # noqa: E402  (limit_for, the Clopper-Pearson interval)
import latency_families as lf  # noqa: E402  (the families and the changes)

from rtlab.bisect.bisection import MAX_UNDECIDABLE  # noqa: E402
from rtlab.bisect.decide import StepPolicy, confirmed_shift, decide_step  # noqa: E402
from rtlab.bisect.search import BAD, GOOD, UNDECIDABLE, CommitSearch  # noqa: E402
from rtlab.verdict.comparison import REGRESSION, compare_tail  # noqa: E402
from rtlab.verdict.histogram import Histogram  # noqa: E402

COMMITS = 16
BOARDS = 2
RUN_S = 600
WINDOW_S = 60
INTERVAL_US = 1000
CPUS = 4
HOUR_S = 3600
SPIKES_PER_HOUR = 4.0
POLICY = StepPolicy()
CHANGES = (
    lf.Change("tail × 1.5", tail=1.5),
    lf.Change("tail × 2", tail=2.0),
    lf.Change(f"rare mode {SPIKES_PER_HOUR:g}/h over max_us", spikes_per_hour=SPIKES_PER_HOUR),
)
STRATEGIES = ("(a) rtlab", "(b) fixed rounds")
RTLAB, FIXED = range(len(STRATEGIES))
# how a bisection ended
RIGHT, WRONG, UNDECIDED, NOT_REPRODUCED = "right", "wrong", "undecided", "not reproduced"
ENDINGS = (RIGHT, WRONG, UNDECIDED, NOT_REPRODUCED)
TRIALS, QUICK_TRIALS = 96, 6
# trials per task of the pool
CHUNK = 2


@functools.cache
def families() -> tuple[lf.Family, ...]:
    """The light source, bursts, one noisy CPU, the rare mode, the light source with boot
    tail log-sd 0.10, and the civcode 4-core and J1900 boards."""
    rack = lf.rack_families()
    wide = lf.families()
    return (rack[0], rack[1], rack[2], wide[2], rack[5], rack[3], wide[4])


@functools.cache
def limit_of(family: int) -> float:
    """max_us as tuning sets it, for the rare mode that a change adds above it."""
    n_hour = int(HOUR_S * 1e6 / INTERVAL_US) * CPUS
    return aq.limit_for(families()[family], n_hour,
                        np.random.default_rng(family * 100 + INTERVAL_US))


@attr.frozen
class Trial:
    """One bisection: how it ended and what it cost."""

    ending: str
    steps: int
    """Measured steps, the confirmation included."""
    rounds: int
    undecidable: int
    """Steps that came out undecidable, the confirmation included."""
    false_bad: tuple[int, int]
    """Of the search's decided steps on commits before the culprit: (called bad, all)."""
    false_good: tuple[int, int]
    """Of the search's decided steps on the culprit and after it: (called good, all)."""

    @property
    def board_h(self) -> float:
        return self.rounds * 2 * BOARDS * RUN_S / HOUR_S


@attr.define
class History:
    """A simulated history: the culprit's index among COMMITS; boots drawn on demand."""

    family: lf.Family
    change: lf.Change
    culprit: int
    limit_us: float
    rng: np.random.Generator

    def boot(self, index: int | None) -> Histogram:
        """One boot of commit ``index`` (None: the good point) on one board: RUN_S in
        1-minute windows."""
        change = self.change if index is not None and index >= self.culprit else lf.UNCHANGED
        board = lf.boot(self.family, change, self.rng, limit_us=self.limit_us,
                        interval_us=INTERVAL_US, cpus=CPUS)
        scale, weight = (float(v[0]) for v in board.run_variation(self.rng, 1))
        per_window = int(WINDOW_S * 1e6 / INTERVAL_US) * CPUS
        return Histogram.merged([board.run_histogram(per_window, self.rng, scale, weight)
                                 for _ in range(RUN_S // WINDOW_S)])

    def round(self, index: int | None, candidate: list[Histogram],
              good: list[Histogram]) -> None:
        for _ in range(BOARDS):
            good.append(self.boot(None))
            candidate.append(self.boot(index))


def fixed_outcome(candidate: Sequence[Histogram], good: Sequence[Histogram]) -> str:
    """(b)'s one comparison at the step's confidence: bad on a regression, else good."""
    comparison = compare_tail(Histogram.merged(candidate), list(good),
                              quantile=POLICY.quantile, confidence=POLICY.confidence,
                              tolerance_relative=POLICY.tolerance,
                              resamples=POLICY.resamples, candidate_boots=len(candidate),
                              candidate_runs=list(candidate))
    return BAD if comparison.outcome == REGRESSION else GOOD


def bisect(history: History, strategy: int) -> Trial:
    """One bisection of ``history`` by ``strategy``."""
    commits = [f"c{i:02d}" for i in range(COMMITS)]
    last = COMMITS - 1
    good: list[Histogram] = []
    # (a)'s equivalence margin, set by the confirmation as the Bisector sets it
    margin: list[float | None] = [None]
    totals = {"steps": 0, "rounds": 0, "undecidable": 0}
    # the search's decided steps, by truth: [wrong, all] before the culprit, from it on
    wrong = {False: [0, 0], True: [0, 0]}

    def step(index: int, confirming: bool) -> str:
        candidate: list[Histogram] = []
        outcome = UNDECIDABLE
        confirmation = None
        for count in range(1, POLICY.rounds + 1):
            history.round(index, candidate, good)
            if strategy == RTLAB:
                decision = decide_step(POLICY, count, candidate, good,
                                       None if confirming else margin[0])
                if decision.stop:
                    outcome = decision.outcome
                    confirmation = decision.against_good
                    break
            elif count == POLICY.rounds:
                outcome = fixed_outcome(candidate, good)
        totals["steps"] += 1
        totals["rounds"] += count
        totals["undecidable"] += outcome == UNDECIDABLE
        if confirming:
            if strategy == RTLAB and outcome == BAD:
                # rtlab.bisect.bisection.Bisector.measure: half the confirmed shift
                shift = None if confirmation is None else confirmed_shift(confirmation)
                margin[0] = max((shift or 0.0) / 2, POLICY.tolerance)
        elif outcome != UNDECIDABLE:
            truth = index >= history.culprit
            wrong[truth][0] += (outcome == BAD) != truth
            wrong[truth][1] += 1
        return outcome

    def trial(ending: str) -> Trial:
        return Trial(ending, totals["steps"], totals["rounds"], totals["undecidable"],
                     (wrong[False][0], wrong[False][1]), (wrong[True][0], wrong[True][1]))

    if step(last, True) != BAD:
        return trial(NOT_REPRODUCED)
    search = CommitSearch(commits)
    search.record(commits[last], BAD)
    skipped = 0
    while (commit := search.next()) is not None:
        outcome = step(commits.index(commit), False)
        search.record(commit, outcome)
        skipped += outcome == UNDECIDABLE
        # the Bisector stops the search after MAX_UNDECIDABLE undecidable commit steps
        if strategy == RTLAB and skipped >= MAX_UNDECIDABLE:
            break
    found = search.found()
    if found.culprit is None:
        return trial(UNDECIDED)
    return trial(RIGHT if found.culprit == commits[history.culprit] else WRONG)


Key = tuple[int, int, int]  # family, change, strategy


def cell(args: tuple[int, int, int, int, int, int]) -> tuple[Key, int, list[Trial], float]:
    """``trials`` bisections of one family, change and strategy (one chunk), and their
    CPU seconds. The culprits are drawn from a stream of their own, so both strategies
    bisect the same culprits."""
    cpu = time.process_time()
    index, change, strategy, trials, chunk, seed = args
    family = families()[index]
    culprits = np.random.default_rng([seed, index, change, chunk]).integers(
        0, COMMITS, trials)
    rng = np.random.default_rng([seed, index, change, strategy, chunk])
    results = []
    # a small baseline's variance draws can overflow in rtlab.verdict.comparison.compare
    # (a look without a finite interval is inconclusive)
    with np.errstate(over="ignore", invalid="ignore"):
        for culprit in culprits:
            history = History(family, CHANGES[change], int(culprit), limit_of(index), rng)
            results.append(bisect(history, strategy))
    return (index, change, strategy), chunk, results, time.process_time() - cpu


def share(k: int, n: int) -> str:
    return f"{k / n:4.0%}" if n else "   -"


def row(trials: Sequence[Trial]) -> str:
    """The figures of one strategy on some trials."""
    n = len(trials)
    counts = [sum(t.ending == e for t in trials) for e in ENDINGS]
    hours = np.array([t.board_h for t in trials])
    false_bad = [sum(t.false_bad[k] for t in trials) for k in (0, 1)]
    false_good = [sum(t.false_good[k] for t in trials) for k in (0, 1)]
    low, high = aq.interval(counts[0], n)
    return ("".join(f"{share(k, n):>7}" for k in counts)
            + f"  [{low:4.0%}, {high:4.0%}]"
            + f"{np.mean([t.steps for t in trials]):7.1f}"
            + f"{hours.mean():8.1f}{np.quantile(hours, 0.95):7.1f}"
            + f"{np.mean([t.undecidable for t in trials]):8.2f}"
            + "".join(f"{f'{k}/{n}':>11} {share(k, n)}" for k, n in (false_bad, false_good)))


HEADER = (f"{'':<22}{'right':>7}{'wrong':>7}{'undec.':>7}{'no rep.':>7}  "
          f"{'right 95 %':<12}{'steps':>7}{'board-h':>8}{'p95':>7}{'undec.':>8}"
          f"{'good called bad':>16}{'bad called good':>16}")


def main() -> int:
    # the workers are forked after the options set it, so they see it too
    global RUN_S
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials (rough figures)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trials", type=int,
                        help=f"bisections per family × change × strategy (overrides --quick; "
                             f"default {TRIALS}, --quick {QUICK_TRIALS})")
    parser.add_argument("--families", help="comma-separated family numbers (default: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--run-min", type=int, default=RUN_S // 60,
                        help=f"each boot's run, in minutes (default {RUN_S // 60})")
    options = parser.parse_args()
    RUN_S = options.run_min * 60
    trials = options.trials or (QUICK_TRIALS if options.quick else TRIALS)
    names = [f.name for f in families()]
    chosen = ([int(i) for i in options.families.split(",")] if options.families
              else list(range(len(names))))
    print(f"bisect_quality: {trials} bisections per family × change × strategy, seed "
          f"{options.seed}, {options.workers} workers, "
          f"{datetime.date.today().isoformat()}{' (--quick)' if options.quick else ''}")
    print(f"history: {COMMITS} commits after the good one, the culprit uniform among them; "
          f"a round: a boot of the good point and one of the step's commit on each of "
          f"{BOARDS} boards, {RUN_S // 60} min each at {INTERVAL_US} µs on {CPUS} CPUs "
          f"({2 * BOARDS * RUN_S / 60:g} board-min a round)")
    print(f"(a) rtlab: decide_step at looks {', '.join(map(str, POLICY.looks))} of "
          f"{POLICY.rounds} rounds, {POLICY.confidence:.0%} a step, each comparison at "
          f"{POLICY.each_confidence:.2%}, good within half the confirmed shift (at least "
          f"{POLICY.tolerance:.0%}), undecidable steps skipped, the search stopped after "
          f"{MAX_UNDECIDABLE}; (b) fixed: "
          f"{POLICY.rounds} rounds a step, one compare_tail at {POLICY.confidence:.0%}, bad on "
          f"a regression, else good; both: the good point's boots pooled over the "
          f"bisection, the confirmation of the bad end first")
    print("columns: how the bisections ended (right commit, wrong commit, undecided, not "
          "reproduced), the right share's 95 % interval, mean measured steps (with the "
          "confirmation), mean and 95th percentile board-hours, undecidable steps a "
          "bisection, the search's steps decided against the truth: commits before the "
          "culprit called bad, commits from it on called good (of those decided)\n")
    for i in chosen:
        print(f"  family {i}: {names[i]}; max_us {limit_of(i):g} µs")
    print()

    started = time.monotonic()
    jobs = [(i, c, s, min(CHUNK, trials - start), start // CHUNK, options.seed)
            for i in chosen for c in range(len(CHANGES)) for s in range(len(STRATEGIES))
            for start in range(0, trials, CHUNK)]
    # the costliest first: rtlab's steps look more often, the rare mode ends early
    jobs.sort(key=lambda job: -(job[3] * (2 if job[2] == RTLAB else 1)
                                * (0.3 if CHANGES[job[1]].spikes_per_hour else 1)))
    with multiprocessing.Pool(options.workers) as pool:
        chunks = pool.map(cell, jobs, chunksize=1)
    results: dict[Key, list[Trial]] = {}
    for key, _, done, _ in sorted(chunks, key=lambda c: (c[0], c[1])):
        results.setdefault(key, []).extend(done)
    elapsed = time.monotonic() - started
    cpu = sum(c[3] for c in chunks)

    for i in chosen:
        print(f"== {names[i]}")
        for c, change in enumerate(CHANGES):
            print(f"  {change.name}")
            print(f"  {HEADER}")
            for s, label in enumerate(STRATEGIES):
                print(f"  {label:<22}{row(results[(i, c, s)])}")
        print()
    print(f"== pooled over the families ({len(chosen)} × {trials} bisections per line)")
    for c, change in enumerate(CHANGES):
        print(f"  {change.name}")
        print(f"  {HEADER}")
        for s, label in enumerate(STRATEGIES):
            pooled = [t for i in chosen for t in results[(i, c, s)]]
            print(f"  {label:<22}{row(pooled)}")
    print(f"\n({elapsed:.0f} s, {cpu:.0f} CPU-s in {options.workers} workers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
