"""Measuring a bisection step on the rack: a round is, on every place taking part at once,
a boot of the good point's image and one of the step's (the order alternating per place and
per round, so that a drift of the rack falls on both alike), each through ``rtlab run``'s
own path (reserve, flash, boot, measure the case, release: rtlab.run.runner.run_suite).

What a run's record counts for is the board-outcome table every door to the judge shares
(rtlab.verdict.outcome): a run without complete, valid windows (a lab failure before
measuring, a voided window, conditions never checked, a skip, no record at all) yields no
boot; the place that failed leaves the rest of the step to the others, as a test job's
failed board does, and the step's decision says why boots are missing. A ``fail`` (a limit
exceeded) is a measurement like any other, and so are the windows of a run that erred
after measuring them: their histogram counts. Steps never trace (``--rt-trace never``): a
boot stopped at its first breach would count as a whole one.
"""

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attr

from rtlab.artifacts.record import read_record
from rtlab.lab.health import healthy_filters
from rtlab.lab.reservation import LabgridClient, filters_for, matching
from rtlab.run.runner import Selection, run_suite
from rtlab.verdict.histogram import Histogram
from rtlab.verdict.outcome import board_outcome

Progress = Callable[[str], None]


@attr.frozen
class Rack:
    """Where a bisection measures: the labgrid environment and coordinator, the board tag
    of its places (``qemu-imx6q`` on the virtual rack), how many places take part (0: every
    healthy one), the suite file (None: the repository's) and the length of a run."""

    env_file: Path
    coordinator: str
    board_tag: str
    duration_s: int
    places: int = 0
    suite: Path | None = None
    reserve_timeout_s: float = 3600.0

    def place_names(self) -> list[str]:
        """The healthy places of the board tag, by name; an error names why there is none
        (every one marked unhealthy, or no place of the tag)."""
        client = LabgridClient(self.coordinator)
        filters = healthy_filters(client, filters_for(board=self.board_tag))
        names = sorted(p.name for p in matching(client.places(), filters))
        if not names:
            raise RuntimeError(f"no healthy place with board tag {self.board_tag} on "
                               f"{self.coordinator}")
        return names[:self.places] if self.places else names


@attr.frozen
class Boot:
    """One run of one point's image on one place."""

    point: str
    """``good`` or ``step``."""
    place: str
    histogram: Histogram | None
    """Every CPU's wake-ups together; None when the run yielded no measurement."""
    error: str | None
    wall_s: float
    folder: Path


def case_histogram(folder: Path, case: str) -> tuple[Histogram | None, str | None]:
    """The case's histogram from a run's records, or why there is none."""
    records = []
    for path in sorted((folder / "results").glob("*.json")):
        record = read_record(path)
        if record.get("name", "").endswith(f"/{case}"):
            records.append(record)
    if not records:
        return None, f"no record of {case} in {folder}"
    record = records[-1]
    # the board-outcome table every door shares: a breach's or an error-after-measuring's
    # windows count, nothing of an error before measuring, a void run or a skip does
    outcome = board_outcome(str(record.get("place") or folder.name), record)
    if not outcome.counts:
        return None, f"{record.get('verdict')}: {record.get('message', '')}"
    checks = ((record.get("conditions") or {}).get("checks") or {}).values()
    if any(check.get("status") == "mismatch" for check in checks):
        # a breach in a void window fails a gate case, but is no measurement of a kernel
        return None, (f"the run of {case} was not what it claims: "
                      f"{record.get('error') or record.get('message', '')}")
    if record.get("broke"):
        return None, (f"the run of {case} ended at its first breach (--breaktrace): a boot "
                      f"cut short is no boot of the step ({folder})")
    cpus = [Histogram.from_record_cpu(cpu) for cpu in record.get("cpus", [])
            if cpu.get("histogram") is not None]
    if not cpus:
        return None, f"the record of {case} has no histogram ({folder})"
    return Histogram.merged(cpus), None


def run_boot(rack: Rack, place: str, point: str, image: Path, case: str,
             folder: Path) -> Boot:
    started = time.monotonic()
    try:
        outcome = run_suite(place=place, image=image, env_file=rack.env_file,
                            coordinator=rack.coordinator, out_dir=folder,
                            duration_s=rack.duration_s,
                            # a boot cut short at its first breach (--breaktrace, which
                            # the gate tier and a failed series' re-run arm) is no boot of
                            # the step's length: steps never trace
                            selection=Selection(cases=case, suite=rack.suite, trace="never"),
                            reserve_timeout_s=rack.reserve_timeout_s)
        histogram, error = case_histogram(folder, case)
        if error is not None and outcome.exit_code not in (0, 1):
            error = f"{error} (rtlab run exited {outcome.exit_code})"
    except (OSError, RuntimeError, ValueError) as failure:
        histogram, error = None, f"{type(failure).__name__}: {failure}"
    return Boot(point, place, histogram, error, time.monotonic() - started, folder)


def measure_round(rack: Rack, places: Sequence[str], round_number: int, *, good: Path,
                  step: Path, case: str, folder: Path,
                  progress: Progress = print) -> list[Boot]:
    """One round: the good image and the step's on every place of ``places`` at once,
    each place in its own order (good first on every other place, swapped every round)."""
    boots: list[Boot] = []
    lock = threading.Lock()

    def on_place(index: int, place: str) -> None:
        order = [("good", good), ("step", step)]
        if (index + round_number) % 2:
            order.reverse()
        for number, (point, image) in enumerate(order):
            boot = run_boot(rack, place, point, image, case,
                            folder / f"round-{round_number}" / place / f"{number}-{point}")
            with lock:
                boots.append(boot)
            shown = "no boot: " + boot.error if boot.error else "measured"
            progress(f"  round {round_number} {place} {point}: {shown} "
                     f"({boot.wall_s:.0f} s)")
            if boot.error:
                return  # the place failed: it leaves the rest of the step to the others

    threads = [threading.Thread(target=on_place, args=(index, place), daemon=True)
               for index, place in enumerate(places)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return boots
