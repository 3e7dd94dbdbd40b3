"""When a bisection step is decided: the sequential verdict of a step's boots.

A step measures the candidate point and the good point in rounds, each round a fresh boot
of each on every board taking part (interleaved, the order alternating, so that a drift of
the rack falls on both alike). After a round at a *look* (the first ``min_rounds`` rounds,
then every doubling, and the budget's last round, as rtlab.verdict.sequential looks) the
candidate's boots are compared with the good point's by
rtlab.verdict.comparison.compare_tail, each boot a run (the boots' spread is what tells a
change from a reboot):

- **bad**: a regression against the good point;
- **good**: no change against the good point at every quantile compared, with the
  equivalence margin at half the regression the bisection confirmed (the bad point's
  shift, relative, at the quantile where the confirmation found it): the candidate does
  not carry the regression looked for.

The comparison at each look is held at ``1 - (1 - confidence) / looks`` (Bonferroni over
the looks), so a step decides wrongly with probability at most ``(1 - confidence) / 2``
whichever way the truth lies. Where neither holds by the budget's last round the step is
**undecidable**, and the bisection skips it rather than guess; so is a step without a
valid boot of both points (lab errors, a voided run).

Why not "the bad point is a regression against the candidate" for good: the bad point's
boots are those that made its confirmation stop, chosen for looking bad, so a bad
candidate compared with them comes out good too often (bench/bisect_quality.py, 6 of 40
bad commits on a bursty board, 2026-11-27). The margin taken from them is wide by the same
bias, which errs towards good for a candidate that carries only part of the regression;
under one culprit a bad candidate carries all of it, which a margin of half excludes. A
candidate worse than the good point but better than the bad one (a second, smaller change)
is ``bad`` where the comparison shows it: it carries a regression, and the bisection looks
for the first. """

import hashlib
from collections.abc import Sequence

import attr

from rtlab.bisect.search import BAD, GOOD, UNDECIDABLE
from rtlab.verdict.comparison import NO_CHANGE, REGRESSION, Comparison, compare_tail
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.sequential import SequentialPolicy

CONTINUE = "continue"


@attr.frozen
class StepPolicy:
    """``rounds``: the budget, in rounds (a boot of each point on each board);
    ``confidence`` of a step's decision; ``margin``: the relative shift that still counts as
    no change in the comparison (its tolerance); ``quantile``: the lowest tail quantile
    compared (compare_tail adds the decades above it where the boots are long enough)."""

    rounds: int = 6
    confidence: float = 0.98
    quantile: float = 0.999
    tolerance: float = 0.05
    resamples: int = 4000
    min_rounds: int = 1
    min_good_boots: int = 3
    """The good point's boots a comparison needs: its boots are the comparison's baseline
    runs, and thresholds.yaml's baseline rule never takes fewer than 3 runs (two know
    their spread to one degree of freedom, whose fiducial draws are unbounded)."""

    def __attrs_post_init__(self) -> None:
        if self.rounds < 1 or not 1 <= self.min_rounds <= self.rounds:
            raise ValueError(f"rounds ({self.rounds}) must be at least min_rounds "
                             f"({self.min_rounds}), which must be at least 1")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")
        if self.min_good_boots < 3:
            raise ValueError(f"min_good_boots must be at least 3 (the baseline rule's "
                             f"fewest runs), got {self.min_good_boots}")

    @property
    def looks(self) -> tuple[int, ...]:
        """The rounds after which the step is compared: rtlab.verdict.sequential's looks,
        a round for a window."""
        windows = SequentialPolicy(window_s=1, cap_s=self.rounds, min_windows=self.min_rounds)
        return tuple(round(at) for at in windows.looks)

    @property
    def each_confidence(self) -> float:
        """The comparison's confidence at one look."""
        return 1 - (1 - self.confidence) / len(self.looks)


@attr.frozen
class StepDecision:
    outcome: str
    """``continue``, or ``good``, ``bad``, ``undecidable``."""
    reason: str
    rounds: int
    against_good: Comparison | None = None

    @property
    def stop(self) -> bool:
        return self.outcome != CONTINUE


def confirmed_shift(confirmation: Comparison) -> float | None:
    """The regression the confirmation found, relative: its shift of the quantile where it
    found it over the good point's (compare_tail reports the quantile of the largest
    relative regression); None where the good point's quantile lies past the histograms'
    range."""
    if confirmation.baseline_us is None:
        return None
    return confirmation.difference_us / (confirmation.baseline_us + 0.5)


def step_seed(point: str, rounds: int, candidate: Sequence[Histogram]) -> int:
    """The seed of one look's resamples: its own for every step and look of a bisection
    (the point, the round, the boots measured), so that Monte Carlo error does not repeat
    from look to look (as rtlab.verdict.case.LatencyCase.look_seed), and the same for the
    same boots (a resumed bisection decides alike)."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(f"{point}\0{rounds}".encode())
    for boot in candidate:
        digest.update(repr((boot.range_us, boot.overflows)).encode())
        digest.update(boot.counts.tobytes())
    return int.from_bytes(digest.digest(), "big") >> 1


def _compare(policy: StepPolicy, candidate: Sequence[Histogram],
             baseline: Sequence[Histogram], margin: float | None, seed: int) -> Comparison:
    return compare_tail(Histogram.merged(candidate), list(baseline), quantile=policy.quantile,
                        confidence=policy.each_confidence, margin_relative=margin,
                        tolerance_relative=policy.tolerance, resamples=policy.resamples,
                        candidate_boots=len(candidate),
                        candidate_runs=list(candidate) if len(candidate) > 1 else [],
                        seed=seed)


def decide_step(policy: StepPolicy, rounds: int, candidate: Sequence[Histogram],
                good: Sequence[Histogram], margin: float | None = None,
                errors: Sequence[str] = (), seed: int = 0) -> StepDecision:
    """After ``rounds`` rounds: ``candidate`` and ``good`` are the valid boots so far (one
    histogram each, every CPU's wake-ups together); ``margin``: the equivalence margin of
    a good decision, relative (half the confirmed shift; None for the bad point's own
    confirmation, which can only come out ``bad`` or undecidable); ``errors``: why the
    runs that yielded nothing did; ``seed``: the look's resamples (:func:`step_seed`)."""
    last = rounds >= policy.rounds
    if rounds not in policy.looks and not last:
        return StepDecision(CONTINUE, "between looks", rounds)
    share = f"at {policy.each_confidence:.2%}, look {rounds} of {policy.rounds} rounds"
    if len(candidate) < 1 or len(good) < policy.min_good_boots:
        missing = (f"{len(candidate)} valid boot(s) of the step and {len(good)} of the good "
                   f"point (it needs 1 and {policy.min_good_boots})")
        why = f"; errors: {'; '.join(errors)}" if errors else ""
        if last:
            return StepDecision(UNDECIDABLE, f"undecidable: {missing} after {rounds} "
                                f"round(s){why}", rounds)
        return StepDecision(CONTINUE, f"{missing}{why}", rounds)
    comparison = _compare(policy, candidate, good, margin, seed)
    if comparison.outcome == REGRESSION:
        return StepDecision(BAD, f"bad: a regression against the good point ({share}): "
                            f"{comparison.message}", rounds, comparison)
    # good: no change at every quantile compared, not only the lowest (compare_tail's own
    # "no change" rests on the lowest; a regression the confirmation found at p99.99 only
    # must not pass as no change at p99.9)
    unchanged = comparison.outcome == NO_CHANGE and all(
        outcome == NO_CHANGE for _, outcome, _ in comparison.compared)
    if margin is not None and unchanged:
        return StepDecision(GOOD, f"good: no change against the good point beyond "
                            f"{margin:.0%}, half the confirmed regression ({share}): "
                            f"{comparison.message}", rounds, comparison)
    if last:
        return StepDecision(UNDECIDABLE, f"undecidable: {comparison.outcome} against the "
                            f"good point after {rounds} round(s): {comparison.message}",
                            rounds, comparison)
    return StepDecision(CONTINUE, f"not decided yet ({share}): {comparison.outcome}", rounds,
                        comparison)
