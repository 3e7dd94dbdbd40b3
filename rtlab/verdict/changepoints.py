"""Where a series' tail changed across its runs: change points on the trends.

A series (board type × flavour × case on one branch) is a sequence of runs, each a
:class:`rtlab.verdict.tailsummary.TailSummary`. What is tested at a candidate split of a
stretch of runs is the one thing a latency regression changes first, the tail:

- **levels**: the pooled quantiles the verdict compares (the policy's, 0.999 by default,
  and each decade above while the stretch's runs reach it: five wake-ups above it per run
  on average), read as one level of the grid each;
- **counts against exposure**: at each level, each run's wake-ups above it against its
  own wake-ups (runs are not equally long): the rate after the split against the rate
  before, on the log scale;
- **each run's spread**: a rate's error is not the Poisson count's alone; reboots move a
  tail more than sampling does (boot-to-boot spread), so the error is scaled by the
  stretch's dispersion, the runs' scatter around their side's rate (quasi-Poisson, at
  least 1);
- **significance** by permutation of the runs: under no change the runs of a stretch are
  exchangeable, so the largest standardized shift over every split and level is compared
  with the largest of up to ``permutations`` shuffles (exact whatever the spread's shape,
  and for the many splits and levels looked at), stopped early once ten shuffles reach it
  (Besag and Clifford's sequential p-value: an unchanged stretch costs a few dozen).

Binary segmentation finds several: a stretch whose best split is significant at ``alpha``
is split there and each side tested again; no side shorter than ``min_runs`` (the
baseline rule's fewest runs). A change is reported with its size where it is largest: the
pooled quantile after against before, with a bootstrap interval over each side's runs.

**Creep** (a tail that widens a little at a time, each step inside the comparison's
margin, so the gate passes each and its passing runs become the next baseline) shows as
neighbouring changes of one direction: closer together than a comparison's baseline reads
(``baseline_runs``: the gate never saw one of them against runs from before the first),
or each inside the ``margin`` (each passed the gate however far apart). They are reported
as one change, from the first step to the last, its size the whole way's, with how many
steps it took.

Why not a library: Apache Otava (E-Divisive means with a t-test, the former Hunter) and
MongoDB's signal-processing-algorithms model one scalar per run with equal weight;
ruptures segments a signal by a cost per sample. None weighs a run by its exposure or
reads counts, and Otava 0.8 pins numpy 2.2, scipy < 1.17 and ruamel.yaml 0.18.16
(docs/trends.md says what was evaluated).
"""

from collections.abc import Sequence

import attr
import numpy as np

from rtlab.verdict.tailsummary import LEVELS_US, TailSummary, counts_matrix, pooled_quantile

REGRESSION = "regression"
IMPROVEMENT = "improvement"

PERMUTATION_BATCH = 50
STOP_AFTER = 10
"""Shuffles reaching the observed statistic after which a stretch is found unchanged."""

MIN_EXCEEDANCES_PER_RUN = 5
"""A level is tested where the stretch's runs hold this many wake-ups above it on average."""


@attr.frozen
class ChangePolicy:
    quantile: float = 0.999
    alpha: float = 0.01
    min_runs: int = 3
    permutations: int = 999
    baseline_runs: int = 10
    """The newest runs a comparison's baseline reads (the report's and the gate's):
    neighbouring changes of one direction at most this many runs apart are one."""
    margin: float = 0.2
    """The comparison's margin (rtlab.verdict.sequential): neighbouring changes of one
    direction each inside it are one."""
    min_relative: float = 0.05
    """A change smaller than this (relative, at its quantile) is not reported: the
    comparison's tolerance."""
    resamples: int = 400
    seed: int = 0


@attr.frozen
class Change:
    """A change of the series between run ``first_after - 1`` and run ``first_after``
    (indices into the runs given); a creep spans ``first_step`` .. ``first_after``."""

    first_after: int
    first_step: int
    direction: str
    quantile: float
    before_us: float
    after_us: float
    ci_us: tuple[float, float]
    p_value: float
    steps: int = 1

    @property
    def difference_us(self) -> float:
        return self.after_us - self.before_us

    @property
    def relative(self) -> float:
        return self.difference_us / self.before_us if self.before_us > 0 else float("inf")

    def describe(self) -> str:
        """``p99.99 +18 µs [9, 27]``: the quantile's shift and its 95 % interval."""
        name = f"p{100 * self.quantile:.10g}"
        low, high = self.ci_us
        creep = f", in {self.steps} steps" if self.steps > 1 else ""
        return (f"{name} {self.difference_us:+.0f} µs [{low:+.0f}, {high:+.0f}] "
                f"({self.before_us:.0f} → {self.after_us:.0f} µs{creep})")


def find_changes(runs: Sequence[TailSummary], policy: ChangePolicy = ChangePolicy()
                 ) -> list[Change]:
    """The series' change points, oldest first (module docstring)."""
    counts, samples = counts_matrix(runs)
    rng = np.random.default_rng(policy.seed)
    splits = sorted(_segment(counts, samples, 0, len(runs), policy, rng))
    changes: list[Change] = []
    bounds = [0, *[s for s, _ in splits], len(runs)]
    for position, (split, p_value) in enumerate(splits):
        before = slice(bounds[position], split)
        after = slice(split, bounds[position + 2])
        change = _sized(counts, samples, before, after, split, split, p_value, 1, policy, rng)
        if change is not None:
            changes.append(change)
    return _creeps(changes, counts, samples, bounds, policy, rng)


def _levels(counts: np.ndarray, samples: np.ndarray, quantile: float) -> list[tuple[float, int]]:
    """The quantiles tested on a stretch and each one's level of the grid."""
    levels = []
    q = quantile
    while True:
        value = pooled_quantile(counts, samples, q)
        if value is None:
            break
        j = int(np.searchsorted(LEVELS_US, value))
        j = min(j, len(LEVELS_US) - 1)
        if counts[:, j].sum() < MIN_EXCEEDANCES_PER_RUN * len(samples):
            break
        levels.append((q, j))
        q = 1 - (1 - q) / 10
    return levels


def _statistic(k: np.ndarray, n: np.ndarray, min_runs: int) -> np.ndarray:
    """How far, in standard errors, the log rate moves at every split of every row of
    ``k`` (rows: the order as measured, then shuffles; columns: runs), either way: which
    way is read from the change's size (:func:`_sized`)."""
    m = k.shape[-1]
    kk = k.astype(np.float64)
    nn = np.broadcast_to(n.astype(np.float64), kk.shape)
    k_left = np.cumsum(kk, axis=-1)[..., :-1]
    n_left = np.cumsum(nn, axis=-1)[..., :-1]
    s_all = kk * kk / nn
    s_left = np.cumsum(s_all, axis=-1)[..., :-1]
    k_right = kk.sum(axis=-1, keepdims=True) - k_left
    n_right = nn.sum(axis=-1, keepdims=True) - n_left
    s_right = s_all.sum(axis=-1, keepdims=True) - s_left
    with np.errstate(divide="ignore", invalid="ignore"):
        r_left, r_right = k_left / n_left, k_right / n_right
        scatter = (np.where(r_left > 0, s_left / r_left - k_left, 0.0)
                   + np.where(r_right > 0, s_right / r_right - k_right, 0.0))
    dispersion = np.maximum(1.0, scatter / max(1, m - 2))
    shift = (np.log((k_right + 0.5) / n_right) - np.log((k_left + 0.5) / n_left))
    z = shift / np.sqrt(dispersion * (1 / (k_left + 0.5) + 1 / (k_right + 0.5)))
    # split after run i (i + 1 runs on the left): both sides at least min_runs long
    allowed = np.zeros(m - 1, dtype=bool)
    allowed[min_runs - 1:m - min_runs] = True
    return np.where(allowed, np.abs(z), 0.0)


def _segment(counts: np.ndarray, samples: np.ndarray, start: int, stop: int,
             policy: ChangePolicy, rng: np.random.Generator) -> list[tuple[int, float]]:
    m = stop - start
    if m < 2 * policy.min_runs:
        return []
    stretch, exposure = counts[start:stop], samples[start:stop]
    levels = _levels(stretch, exposure, policy.quantile)
    if not levels:
        return []
    observed, split_at = _largest(stretch, exposure, levels, np.arange(m)[None, :],
                                  policy.min_runs)
    if observed[0] <= 0:
        return []
    # Besag and Clifford's sequential p-value: shuffles in batches, stopped once
    # STOP_AFTER of them reach the observed statistic (then p >= STOP_AFTER / shuffles,
    # above alpha); a series without a change costs a few dozen shuffles, not all
    reached = drawn = 0
    while drawn < policy.permutations:
        batch = min(PERMUTATION_BATCH, policy.permutations - drawn)
        order = np.vstack([rng.permutation(m) for _ in range(batch)])
        shuffled, _ = _largest(stretch, exposure, levels, order, policy.min_runs)
        reached += int(np.count_nonzero(shuffled >= observed[0]))
        drawn += batch
        if reached >= STOP_AFTER:
            return []
    p_value = (1 + reached) / (1 + drawn)
    if p_value > policy.alpha:
        return []
    split = start + int(split_at[0]) + 1
    return (_segment(counts, samples, start, split, policy, rng) + [(split, p_value)]
            + _segment(counts, samples, split, stop, policy, rng))


def _largest(counts: np.ndarray, samples: np.ndarray, levels: Sequence[tuple[float, int]],
             order: np.ndarray, min_runs: int) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``order`` (the runs in some order): the largest standardized shift
    over every split and level, and the split it is at."""
    best = np.zeros(order.shape[0])
    where = np.zeros(order.shape[0], dtype=np.int64)
    for _, j in levels:
        z = _statistic(counts[:, j][order], samples[order], min_runs)
        top = z.max(axis=1)
        where = np.where(top > best, z.argmax(axis=1), where)
        best = np.maximum(best, top)
    return best, where


def _sized(counts: np.ndarray, samples: np.ndarray, before: slice, after: slice,
           first_step: int, first_after: int, p_value: float, steps: int,
           policy: ChangePolicy, rng: np.random.Generator) -> Change | None:
    """The change's size where its relative shift is largest among the quantiles both
    sides reach, with a bootstrap interval over each side's runs; None below
    ``min_relative``."""
    both = np.concatenate([samples[before], samples[after]])
    levels = _levels(np.vstack([counts[before], counts[after]]), both, policy.quantile)
    best = None
    for q, _ in levels:
        old = pooled_quantile(counts[before], samples[before], q)
        new = pooled_quantile(counts[after], samples[after], q)
        if old is None or new is None or old <= 0:
            continue
        if best is None or abs(new / old - 1) > abs(best[2] / best[1] - 1):
            best = (q, old, new)
    if best is None:
        return None
    q, old, new = best
    if abs(new / old - 1) < policy.min_relative:
        return None
    differences = []
    b_rows, a_rows = np.arange(before.start, before.stop), np.arange(after.start, after.stop)
    for _ in range(policy.resamples):
        pick_b = rng.choice(b_rows, b_rows.size)
        pick_a = rng.choice(a_rows, a_rows.size)
        low = pooled_quantile(counts[pick_b], samples[pick_b], q)
        high = pooled_quantile(counts[pick_a], samples[pick_a], q)
        if low is not None and high is not None:
            differences.append(high - low)
    ci = ((float(np.quantile(differences, 0.025)), float(np.quantile(differences, 0.975)))
          if differences else (float("-inf"), float("inf")))
    return Change(first_after, first_step, REGRESSION if new > old else IMPROVEMENT, q, old,
                  new, ci, p_value, steps)


def _creeps(changes: list[Change], counts: np.ndarray, samples: np.ndarray,
            bounds: Sequence[int], policy: ChangePolicy,
            rng: np.random.Generator) -> list[Change]:
    """Neighbouring changes of one direction, at most ``baseline_runs`` apart or both
    inside the margin, as one."""
    merged: list[Change] = []
    run: list[Change] = []

    def close() -> None:
        if len(run) == 1:
            merged.append(run[0])
        elif run:
            start = max((b for b in bounds if b < run[0].first_after), default=0)
            stop = min((b for b in bounds if b > run[-1].first_after), default=len(samples))
            whole = _sized(counts, samples, slice(start, run[0].first_after),
                           slice(run[-1].first_after, stop), run[0].first_after,
                           run[-1].first_after, max(c.p_value for c in run), len(run),
                           policy, rng)
            merged.extend([whole] if whole is not None else run)
        run.clear()

    for change in changes:
        if run and (change.direction != run[-1].direction
                    or (change.first_after - run[-1].first_after > policy.baseline_runs
                        and not (abs(change.relative) < policy.margin
                                 and abs(run[-1].relative) < policy.margin))):
            close()
        run.append(change)
    close()
    return merged
