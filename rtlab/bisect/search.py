"""Where the regression came in: the two searches of a bisection, as state machines that
are told each step's outcome and say which point to measure next. Neither measures
anything (rtlab.bisect.step does), so the bench drives them with simulated steps.

:class:`CommitSearch` is ``git bisect`` over a first-parent history: the commits after the
good one, oldest first, the bad one last. It halves the range of commits that may hold the
first bad one, and a step that could not be decided is skipped as ``git bisect skip``
does: the next point is the undecided commit nearest the middle, so a neighbour can
decide; where only skipped commits are left between the last good and the first bad
one, the result names all of them instead of guessing.

:class:`OptionSearch` finds the one option of a set of changed options that makes a
configuration bad, as the kernel's config bisection (tools/testing/ktest/config-bisect.pl)
does: starting from the good configuration, it applies half of the suspects, lets kconfig
resolve what that half depends on (``resolve``: the options that hold their bad value
afterwards), and keeps the half that holds the culprit. A step that cannot be decided is
tried with the other half of the suspects; both undecided, it stops and names the
suspects left. Both searches assume one culprit, as any bisection does: a regression made
of two changes is found as the one that completed it.
"""

from collections.abc import Callable

import attr

GOOD = "good"
BAD = "bad"
UNDECIDABLE = "undecidable"
OUTCOMES = (GOOD, BAD, UNDECIDABLE)


class SearchError(ValueError):
    """A step that does not fit the search (a point it did not ask for, an outcome it
    does not know)."""


def _check_outcome(outcome: str) -> None:
    if outcome not in OUTCOMES:
        raise SearchError(f"outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")


@attr.frozen
class Found:
    """What a search ends with: the ``culprit`` (None where it could not be told) and the
    points that may hold it (the culprit alone when found)."""

    culprit: str | None
    candidates: tuple[str, ...]
    reason: str


@attr.define
class CommitSearch:
    """``commits``: the first-parent history after the good commit, oldest first; the last
    one is the bad commit, whose outcome the bisection measured first."""

    commits: tuple[str, ...] = attr.field(converter=tuple)
    outcomes: dict[str, str] = attr.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if not self.commits:
            raise SearchError("no commit between the good and the bad point")
        if len(set(self.commits)) != len(self.commits):
            raise SearchError("a commit appears twice in the history")

    def _window(self) -> tuple[int, int]:
        """(index after the last good commit, index of the first bad one)."""
        bad = [i for i, c in enumerate(self.commits) if self.outcomes.get(c) == BAD]
        first_bad = min(bad) if bad else len(self.commits) - 1
        good = [i for i, c in enumerate(self.commits[:first_bad])
                if self.outcomes.get(c) == GOOD]
        return (max(good) + 1 if good else 0), first_bad

    def next(self) -> str | None:
        """The commit to measure next, or None when the search is over."""
        low, first_bad = self._window()
        untested = [i for i in range(low, first_bad) if self.commits[i] not in self.outcomes]
        if not untested:
            return None
        # git bisect's choice: the commit that halves the range [low, first_bad]; with
        # skips, the undecided one nearest that middle (the earlier one on a tie)
        middle = (low + first_bad - 1) / 2
        return self.commits[min(untested, key=lambda i: (abs(i - middle), i))]

    def record(self, commit: str, outcome: str) -> None:
        _check_outcome(outcome)
        if commit not in self.commits:
            raise SearchError(f"{commit} is not in the bisected history")
        if commit in self.outcomes:
            raise SearchError(f"{commit} was already decided ({self.outcomes[commit]})")
        self.outcomes[commit] = outcome

    def found(self) -> Found:
        low, first_bad = self._window()
        culprit = self.commits[first_bad]
        if low == first_bad:
            before = "the good commit" if low == 0 else self.commits[low - 1]
            return Found(culprit, (culprit,), f"{culprit} is bad and {before} is good")
        candidates = self.commits[low:first_bad + 1]
        skipped = [c for c in candidates[:-1] if self.outcomes.get(c) == UNDECIDABLE]
        if len(skipped) == len(candidates) - 1:
            return Found(None, candidates,
                         f"the first bad commit is one of {len(candidates)}: "
                         f"{', '.join(skipped)} could not be decided")
        return Found(None, candidates, "the search has not ended")



Resolve = Callable[[frozenset[str]], frozenset[str]]


def as_applied(options: frozenset[str]) -> frozenset[str]:
    """``resolve`` where nothing resolves dependencies (the options are applied as
    given)."""
    return options


@attr.define
class OptionSearch:
    """``options``: the options whose values differ between the good configuration and
    the bad one (applied all together, the configuration is the bad one), in the order
    the search halves them; ``resolve``: the options of ``options`` that hold their bad
    value once a set of them is applied to the good configuration and kconfig has
    resolved it (``make olddefconfig``: an option whose dependency is not applied falls
    back, one that another selects comes along)."""

    options: tuple[str, ...] = attr.field(converter=tuple)
    resolve: Resolve = as_applied
    innocent: frozenset[str] = frozenset()
    suspects: tuple[str, ...] = ()
    tried: list[tuple[frozenset[str], str]] = attr.field(factory=list)
    _pending: frozenset[str] | None = None
    _half: tuple[str, ...] | None = None
    _undecided_half: tuple[str, ...] | None = None
    _stuck: str | None = None

    def __attrs_post_init__(self) -> None:
        if not self.options:
            raise SearchError("no option differs between the good and the bad point")
        if len(set(self.options)) != len(self.options):
            raise SearchError("an option appears twice")
        self.suspects = tuple(self.options)

    def next(self) -> frozenset[str] | None:
        """The options to apply to the good configuration for the next step (as kconfig
        resolves them), or None when the search is over."""
        if self._stuck is not None or len(self.suspects) <= 1:
            return None
        if self._undecided_half is not None:
            first = tuple(s for s in self.suspects if s not in self._undecided_half)
        else:
            first = self.suspects[:(len(self.suspects) + 1) // 2]
        chosen = self._applying(first)
        if chosen is None:
            self._stuck = (f"{', '.join(self.suspects)} apply only together: kconfig "
                           f"resolves every part of them to the good or the bad "
                           f"configuration")
            return None
        self._half, self._pending = chosen
        return self._pending

    def _applying(self, half: tuple[str, ...]) -> tuple[tuple[str, ...], frozenset[str]] | None:
        """The half a step tests and the options it applies for it: the innocent ones and
        the half, as kconfig resolves them. A half that kconfig drops (its dependencies are
        among the other suspects) gives way to the other half, then grows by the next
        suspects, until the step applies something new and not yet everything."""
        rest = tuple(s for s in self.suspects if s not in half)
        order = list(half) + list(rest)
        tries = [half, rest, *(tuple(order[:size]) for size in range(len(half) + 1,
                                                                     len(order)))]
        undecided = {applied for applied, outcome in self.tried if outcome == UNDECIDABLE}
        for tried in tries:
            if not tried:
                continue
            applied = self.resolve(self.innocent | frozenset(tried))
            new = (applied - self.innocent) & frozenset(self.suspects)
            # a configuration already found undecidable is not measured again
            if new and new != frozenset(self.suspects) and applied not in undecided:
                return tried, applied
        return None

    def record(self, applied: frozenset[str], outcome: str) -> None:
        _check_outcome(outcome)
        if applied != self._pending or self._half is None:
            raise SearchError(f"options {sorted(applied)} are not the step the search asked "
                              f"for")
        self.tried.append((applied, outcome))
        tested = applied & frozenset(self.suspects)
        half = self._half
        self._pending = self._half = None
        if outcome == GOOD:
            self.innocent |= applied
            self.suspects = tuple(s for s in self.suspects if s not in tested)
            self._undecided_half = None
        elif outcome == BAD:
            self.suspects = tuple(s for s in self.suspects if s in tested)
            self._undecided_half = None
        elif self._undecided_half is None:
            # the other half next: one of them may be decidable
            self._undecided_half = half
        else:
            self._stuck = (f"both halves of {', '.join(self.suspects)} could not be "
                           f"decided")

    def found(self) -> Found:
        if len(self.suspects) == 1:
            [culprit] = self.suspects
            if not self.tried:
                return Found(culprit, (culprit,), f"{culprit} is the only option changed")
            # the message claims only what was measured: a bad step that applied the
            # culprit beside options already shown innocent, or the elimination
            alone = any(outcome == BAD
                        and (applied & frozenset(self.options)) - self.innocent == {culprit}
                        for applied, outcome in self.tried)
            if alone:
                return Found(culprit, (culprit,), f"{culprit} turns the good configuration "
                             "bad (measured: the good configuration"
                             + (f" with {', '.join(sorted(self.innocent))}" if self.innocent
                                else "") + f" and {culprit} is bad)")
            innocent = ", ".join(sorted(self.innocent)) or "no option"
            return Found(culprit, (culprit,), f"{culprit} by elimination, not measured on "
                         f"its own: the good configuration with {innocent} applied stayed "
                         f"good, and with every option applied it is the bad one")
        if not self.suspects:
            return Found(None, (), "every option was applied without a regression: the "
                         "regression needs options together, or the bad point does not "
                         "reproduce")
        return Found(None, self.suspects, self._stuck or "the search has not ended")

