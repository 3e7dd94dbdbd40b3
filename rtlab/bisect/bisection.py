"""``rtlab bisect run``: from a good and a bad commit of the lab repository to the commit,
and then the option, that brought the regression, each step decided by measuring.

1. **Confirm**: the bad commit's kernel against the good one's (rtlab.bisect.decide, with
   no equivalence margin yet: it can only come out bad, or undecidable). Not a regression
   by the budget: the bisection ends ``not reproduced``, for a regression it cannot see
   cannot be bisected.
2. **Commits** (rtlab.bisect.search.CommitSearch) over the first-parent history. A commit
   whose configuration is one already decided (a commit that changed no kernel option, one
   that reverted to the good configuration) is decided by that identity, unmeasured.
3. **Options**: where the culprit commit changed several options, the options, applied to
   its parent's configuration (rtlab.bisect.search.OptionSearch).

Every step measures the good point afresh beside its own (rtlab.bisect.step), and its good
boots join those of the earlier steps: the good point's boot-to-boot spread, the measure
every decision needs, grows better known as the bisection goes. Each decided step is
written to the result (rtlab.bisect.result) at once, so a bisection that is stopped keeps
the steps it paid for, as an ``undecided`` result that says where it stopped.

Kernels (rtlab.bisect.kernels): ``debian`` takes Debian's kernel of the image flavour for
every point, the configuration's test-device options on its command line
(rtlab.bisect.testdev), so the path is proven on the virtual rack within ``make test``;
``build`` builds each point's kernel from its commit's kernel/ folder.
"""

import datetime
from collections.abc import Callable
from pathlib import Path

import attr

from rtlab.bisect import points
from rtlab.bisect.decide import (
    StepDecision,
    StepPolicy,
    confirmed_shift,
    decide_step,
    step_seed,
)
from rtlab.bisect.kernels import BuiltKernels, DebianKernels, Kernels
from rtlab.bisect.result import (
    COMMIT,
    CONFIRM,
    FOUND,
    IDENTITY,
    MEASURED,
    NOT_REPRODUCED,
    OPTIONS,
    UNDECIDED,
    Bisection,
    Culprit,
    Option,
    Step,
)
from rtlab.bisect.search import BAD, GOOD, UNDECIDABLE, CommitSearch, OptionSearch
from rtlab.bisect.step import Rack, measure_round
from rtlab.verdict.histogram import Histogram

Progress = Callable[[str], None]
BeforeStep = Callable[[int, str, points.Point], None]
SOURCES = ("debian", "build")
MAX_UNDECIDABLE = 3


@attr.frozen
class Request:
    """What to bisect: ``good`` and ``bad`` commits of ``repo``, for ``board`` (a board of
    kernel/boards.yaml), the image ``flavour`` (std, rt) and the ``kernel_flavour`` of
    kernel/flavours.yaml whose fragments make a commit's configuration, and one ``case``
    of the suite (``scenario/intervalus``)."""

    repo: Path
    good: str
    bad: str
    board: str
    flavour: str
    kernel_flavour: str
    case: str
    source: str = "debian"

    def __attrs_post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"kernel source {self.source!r}: this rtlab bisects with "
                             f"{', '.join(SOURCES)} kernels")
        if "/" not in self.case or not self.case.endswith("us"):
            raise ValueError(f"case {self.case!r} is not scenario/intervalus "
                             f"(e.g. idle/1000us)")


def kernels_for(request: Request, out: Path, progress: Progress) -> Kernels:
    if request.source == "build":
        return BuiltKernels(request.repo, request.board, request.flavour,
                            request.kernel_flavour, out, progress=progress)
    return DebianKernels(request.board, request.flavour, request.kernel_flavour, out)


class Bisector:
    def __init__(self, request: Request, rack: Rack, policy: StepPolicy, out: Path, *,
                 progress: Progress = print, before_step: BeforeStep | None = None,
                 max_undecidable: int = MAX_UNDECIDABLE,
                 kernels: Kernels | None = None) -> None:
        self.request = request
        self.kernels = kernels or kernels_for(request, out, progress)
        self.rack = rack
        self.policy = policy
        self.out = out
        self.progress = progress
        self.max_undecidable = max_undecidable
        """Undecidable commit steps after which the search stops (each costs a whole
        budget): it then names the commits left."""
        self.before_step = before_step
        """Called before a step is measured (index, kind, point): a test injects its fault
        there."""
        self.steps: list[Step] = []
        self.decided: dict[str, str] = {}
        self.good_boots: list[Histogram] = []
        self.margin: float | None = None
        """A good step's equivalence margin: half the confirmed regression (relative)."""
        self._configs: dict[str, dict[str, str]] = {}
        self.started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        self.good = self.bad = ""

    # -- points --------------------------------------------------------------------------
    def config(self, commit: str) -> dict[str, str]:
        if commit not in self._configs:
            self._configs[commit] = points.configuration(
                self.request.repo, commit, self.request.board, self.request.kernel_flavour)
        return self._configs[commit]

    def point(self, commit: str) -> points.Point:
        return points.Point(commit, self.config(commit), source=self.kernels.identity(commit))

    def image(self, point: points.Point) -> Path:
        return self.kernels.image(point)

    # -- steps ---------------------------------------------------------------------------
    def _decided_by_identity(self, kind: str, point: points.Point) -> str | None:
        outcome = self.decided.get(point.key)
        if outcome not in (GOOD, BAD):
            return None
        index = len(self.steps) + 1
        same = next((s for s in self.steps if s.key == point.key), None)
        which = (f"step {same.index} ({same.point})" if same is not None else
                 f"the {outcome} commit {self.good[:12] if outcome == GOOD else self.bad[:12]}")
        self.steps.append(Step(index, kind, point.commit, tuple(sorted(point.options)),
                               outcome, f"{outcome}: the same configuration as {which}",
                               IDENTITY, key=point.key))
        self._checkpoint()
        self.progress(f"step {index} {point.name}: {outcome} (its configuration is that of "
                      f"{which})")
        return outcome

    def measure(self, kind: str, point: points.Point) -> str:
        index = len(self.steps) + 1
        self.progress(f"step {index} ({kind}) {point.name}: measuring against "
                      f"{self.good[:12]} (good)")
        if self.before_step is not None:
            self.before_step(index, kind, point)
        good_image = self.image(self.point(self.good))
        step_image = self.image(point)
        places = self.rack.place_names()
        candidate: list[Histogram] = []
        errors: list[str] = []
        good_before = len(self.good_boots)
        board_s = 0.0
        decision = StepDecision(UNDECIDABLE, "no round measured", 0)
        for round_number in range(1, self.policy.rounds + 1):
            boots = measure_round(self.rack, places, round_number, good=good_image,
                                  step=step_image, case=self.request.case,
                                  folder=self.out / "steps" / f"step-{index}",
                                  progress=self.progress)
            for boot in boots:
                board_s += boot.wall_s
                if boot.histogram is None:
                    errors.append(f"{boot.place} {boot.point}: {boot.error}")
                    if boot.place in places:
                        places.remove(boot.place)
                elif boot.point == "good":
                    self.good_boots.append(boot.histogram)
                else:
                    candidate.append(boot.histogram)
            decision = decide_step(self.policy, round_number, candidate, self.good_boots,
                                   None if kind == CONFIRM else self.margin, errors,
                                   seed=step_seed(f"{kind}:{point.key}", round_number,
                                                  candidate))
            if not decision.stop and not places:
                decision = StepDecision(UNDECIDABLE, f"undecidable: every place failed "
                                        f"({'; '.join(errors)})", round_number,
                                        decision.against_good)
            if decision.stop:
                break
        outcome = decision.outcome
        if kind == CONFIRM and outcome == BAD:
            shift = (None if decision.against_good is None
                     else confirmed_shift(decision.against_good))
            # half the confirmed shift: a step within it does not carry the regression
            self.margin = max((shift or 0.0) / 2, self.policy.tolerance)
        comparison = decision.against_good
        self.steps.append(Step(
            index, kind, point.commit, tuple(sorted(point.options)), outcome,
            decision.reason, MEASURED, rounds=decision.rounds,
            boots=(len(self.good_boots) - good_before, len(candidate)), board_s=board_s,
            confidence=self.policy.confidence,
            difference_us=None if comparison is None else comparison.difference_us,
            key=point.key))
        if outcome in (GOOD, BAD):
            self.decided[point.key] = outcome
        self._checkpoint()
        self.progress(f"step {index} {point.name}: {decision.reason}")
        return outcome

    def _checkpoint(self) -> None:
        """result.json as far as the bisection got: a bisection stopped (a lab error, a
        cancelled job) keeps the steps it paid for."""
        self.out.mkdir(parents=True, exist_ok=True)
        self._result(UNDECIDED, f"did not finish: stopped after step {len(self.steps)}"
                     ).write(self.out)

    def decide(self, kind: str, point: points.Point) -> str:
        return self._decided_by_identity(kind, point) or self.measure(kind, point)

    # -- the bisection -------------------------------------------------------------------
    def run(self) -> Bisection:
        repo = self.request.repo
        self.good = points.resolve_commit(repo, self.request.good)
        self.bad = points.resolve_commit(repo, self.request.bad)
        commits = points.history(repo, self.good, self.bad)
        good_point, bad_point = self.point(self.good), self.point(self.bad)
        if good_point.key == bad_point.key:
            return self._result(NOT_REPRODUCED, (
                f"{self.good[:12]} and {self.bad[:12]} ask for the same kernel "
                f"configuration of {self.request.board} {self.request.kernel_flavour}"
                + (" from the same source" if self.kernels.name == "build" else "")
                + ": nothing between them changes the kernel this bisection measures"))
        self.decided[good_point.key] = GOOD
        self.progress(f"bisecting {len(commits)} commits: {self.good[:12]} (good) .. "
                      f"{self.bad[:12]} (bad), {self.request.board} {self.request.flavour} "
                      f"{self.request.case}")
        if self.measure(CONFIRM, bad_point) != BAD:
            confirmation = self.steps[-1]
            if 0 in confirmation.boots:
                # the lab could not measure: an error, never "not reproduced"
                raise RuntimeError(f"the bad commit {self.bad[:12]} could not be measured "
                                   f"against the good one: {confirmation.reason}")
            return self._result(NOT_REPRODUCED, f"the bad commit {self.bad[:12]} is not "
                                f"told from the good one: {confirmation.reason}")
        search = CommitSearch(commits)
        search.record(self.bad, BAD)
        skipped = 0
        while (commit := search.next()) is not None:
            outcome = self.decide(COMMIT, self.point(commit))
            search.record(commit, outcome)
            skipped += outcome == UNDECIDABLE
            if skipped >= self.max_undecidable:
                break
        found = search.found()
        if found.culprit is None and skipped >= self.max_undecidable:
            return self._result(UNDECIDED, f"stopped after {skipped} undecidable steps: the "
                                f"first bad commit is one of {len(found.candidates)}",
                                candidates=found.candidates)
        if found.culprit is None:
            return self._result(UNDECIDED, found.reason, candidates=found.candidates)
        culprit = Culprit(found.culprit, points.subject(repo, found.culprit),
                          points.commit_diff(repo, found.culprit))
        return self._bisect_options(culprit, found.reason)

    def _bisect_options(self, culprit: Culprit, commit_reason: str) -> Bisection:
        repo = self.request.repo
        parent = points.parent(repo, culprit.commit)
        before = self.config(parent)
        after = self.config(culprit.commit)
        changed = points.changed_options(before, after)
        source = self.kernels.identity(parent)
        if changed and source != self.kernels.identity(culprit.commit):
            # the commit moved the source pin, patches or board files too: the option steps
            # build on the parent's, where all the options together are not the bad kernel;
            # whether they regress there is what the option search stands on
            every = frozenset(changed)
            outcome = self.decide(OPTIONS, points.Point(culprit.commit, after, options=every,
                                                        source=source))
            if outcome == GOOD:
                return self._result(FOUND, (
                    f"{commit_reason}; its options on its parent's kernel source do not "
                    f"regress: the regression comes with its change of the source pin, "
                    f"patches or board files"), culprit=culprit)
            if outcome != BAD:
                return self._result(UNDECIDED, (
                    f"{commit_reason}; whether its options regress on its parent's kernel "
                    f"source could not be decided (it also changes the source pin, patches "
                    f"or board files)"), culprit=culprit, candidates=changed)
        if len(changed) <= 1:
            option = (Option(changed[0], before.get(changed[0], points.DEFAULT),
                             after.get(changed[0], points.DEFAULT)) if changed else None)
            return self._result(FOUND, commit_reason, culprit=culprit, option=option)
        self.progress(f"{culprit.commit[:12]} changes {len(changed)} options: "
                      f"{', '.join(changed)}")
        search = OptionSearch(changed, resolve=self.kernels.resolver(parent, before, after,
                                                                     changed))
        while (applied := search.next()) is not None:
            config = points.applied(before, after, applied)
            point = points.Point(culprit.commit, config, options=applied, source=source)
            search.record(applied, self.decide(OPTIONS, point))
        found = search.found()
        if found.culprit is None:
            return self._result(UNDECIDED, f"{commit_reason}; its options: {found.reason}",
                                culprit=culprit, candidates=found.candidates)
        option = Option(found.culprit, before.get(found.culprit, points.DEFAULT),
                        after.get(found.culprit, points.DEFAULT))
        return self._result(FOUND, f"{commit_reason}; {found.reason}", culprit=culprit,
                            option=option)

    def _result(self, status: str, reason: str, *, culprit: Culprit | None = None,
                option: Option | None = None, candidates: tuple[str, ...] = ()) -> Bisection:
        request = self.request
        return Bisection(
            board=request.board, flavour=request.flavour, case=request.case,
            repository=str(request.repo), good=self.good, bad=self.bad, status=status,
            reason=reason, steps=tuple(self.steps), candidates=candidates, culprit=culprit,
            option=option, source=request.source, started=self.started,
            bisection_id=f"bisect:{self.started}:{self.good[:12]}..{self.bad[:12]}")
