"""``rtlab run --board TYPE --boards N``: every healthy place of a board type on one
board × flavour at once, sharing its cases (rtlab.run.queue), so that N places finish in
about 1/N of one place's time: each case measured whole by one place (``--spread
shard``), or by every place for 1/N of its budget and judged pooled (``--spread
replicate``, rtlab.run.pooling).

One ``rtlab run`` per place, each reserving a place of the type through the coordinator
as a single run does (so people and other jobs still queue as they do), all on one plan
in the results store. Afterwards, what no place finished becomes an error record with its
JUnit case, never a gap: a case every place left, or one a killed runner took.
"""

import datetime
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from rtlab.artifacts.identity import RUN_VARIABLE as CAMPAIGN_RUN_VARIABLE
from rtlab.artifacts.manifest import image_manifest_for, series_flavour
from rtlab.artifacts.record import read_record, write_record
from rtlab.lab.health import healthy_filters
from rtlab.lab.reservation import LabgridClient, filters_for, matching
from rtlab.measure.rttests import TESTS
from rtlab.run.pooling import (
    Judging,
    default_spread,
    mark_replicas,
    pool_plan,
    share_of,
)
from rtlab.run.queue import Leftover, leftovers, stopped_workers
from rtlab.run.runner import INTERRUPT_GRACE_S, Sharing
from rtlab.store import URL_VARIABLE, open_store
from rtlab.util.paths import REPO_ROOT
from rtlab.util.variables import QUEUE_VARIABLE
from rtlab.verdict.junit import records_junit, write_junit

PLAN_VARIABLE = "RTLAB_PLAN"


def default_plan() -> str:
    """``RTLAB_PLAN``, else the CI job (a retried job is a new plan), else a new name."""
    if os.environ.get(PLAN_VARIABLE):
        return os.environ[PLAN_VARIABLE]
    if os.environ.get("CI_JOB_ID"):
        return f"gitlab:{os.environ.get('CI_PIPELINE_ID', '')}:{os.environ['CI_JOB_ID']}"
    return f"plan:{uuid.uuid4().hex[:16]}"


def places_to_use(coordinator: str, board: str, boards: int) -> int:
    """How many places work on the plan: ``boards`` (0: every one) of the healthy places
    with the board tag, at least one (a single place waits in the reservation queue as a
    single run does)."""
    client = LabgridClient(coordinator)
    filters = healthy_filters(client, filters_for(board=board))
    found = len(matching(client.places(), filters))
    if found == 0:
        raise ValueError(f"no healthy place has board={board} on {coordinator}")
    return found if boards == 0 else max(1, min(boards, found))


def run_on_boards(run_argv: Sequence[str], *, board: str, boards: int, coordinator: str,
                  image: Path, out_dir: Path, duration_s: int, judging: Judging,
                  queue: str | None = None, window_s: int | None = None,
                  spread: str | None = None, tier: str | None = None) -> int:
    """``run_argv`` (an ``rtlab run --board …`` command line without --boards, --duration,
    --window and --out) on as many places as :func:`places_to_use` gives, all on one plan;
    the exit status is the worst of theirs, or 1 where a case was left without a verdict.

    ``spread`` (None: rtlab.run.pooling.default_spread for ``tier`` and the places found)
    ``replicate``: every place measures every case for its share of ``duration_s``, into
    ``out_dir``/replicas, and each case is judged once on all of them by ``judging``
    (rtlab.run.pooling); ``shard``: each case is measured by one place, for all of it."""
    workers = places_to_use(coordinator, board, boards)
    replicate = judging if (spread or default_spread(tier, workers)) == "replicate" else None
    out_dir.mkdir(parents=True, exist_ok=True)
    sharing = Sharing(queue=queue or f"sqlite:///{(out_dir / 'plan.db').resolve()}",
                      plan=default_plan(), replicate=replicate is not None)
    length = duration_s if replicate is None else share_of(duration_s, workers)
    where = out_dir if replicate is None else out_dir / "replicas"
    argv = [sys.executable, "-m", "rtlab.cli", *run_argv,
            "--plan", sharing.plan, "--duration", str(length), "--out", str(where)]
    # the stores' URLs through the environment, never the command line
    env = {**os.environ, QUEUE_VARIABLE: sharing.queue,
           **({URL_VARIABLE: judging.baseline_url} if judging.baseline_url else {})}
    if window_s is not None:
        # a share shorter than a window is one window
        argv += ["--window", str(min(window_s, length))]
    if replicate is not None:
        mark_replicas(where, plan=sharing.plan, pooled_into=out_dir / "results")
        argv += ["--spread", "replicate"]
        print(f"plan {sharing.plan}: each case on {workers} place(s) with board={board} "
              f"at once, {length} s each of its {duration_s} s, judged pooled", flush=True)
    else:
        print(f"plan {sharing.plan}: {workers} place(s) with board={board} share its cases",
              flush=True)
    children = [subprocess.Popen(argv, cwd=REPO_ROOT, env=env) for _ in range(workers)]
    codes = _wait_all(children)
    if replicate is not None:
        pooled = pool_plan(plan=sharing.plan, queue=sharing.queue, replicas_dir=where,
                           out_dir=out_dir, board=board, boards_planned=workers,
                           judging=replicate)
        verdicts = [read_record(path)["verdict"] for path in pooled]
        if not pooled:
            print(f"plan {sharing.plan}: no place offered a case: nothing was measured",
                  flush=True)
        return max([*codes, 0 if pooled and all(v in ("pass", "skipped") for v in verdicts)
                    else 1])
    left = write_leftovers(sharing, board=board, image=image, out_dir=out_dir)
    return max([*codes, 1 if left else 0])


def _wait_all(children: list[subprocess.Popen]) -> list[int]:
    """Wait for every child; SIGTERM (a cancelled job) or Ctrl-C reaches each of them as
    the signal a single run handles (its board off, its records written), and they get
    the time a single run gets to finish."""
    def forward(signum: int, _frame: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return [child.wait() for child in children]
    except BaseException:
        for child in children:
            try:
                child.wait(INTERRUPT_GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def write_leftovers(sharing: Sharing, *, board: str, image: Path, out_dir: Path) -> list[Path]:
    """An error record and JUnit case for each case of the plan without a verdict: the
    board ran nothing for it (or its runner died measuring it), so it is an infrastructure
    error, never a pass. Returns the records written."""
    store = open_store(sharing.queue)
    try:
        left = leftovers(store, sharing.plan)
        stopped = stopped_workers(store, sharing.plan)
    finally:
        store.close()
    if not left:
        return []
    manifest = image_manifest_for(os.fspath(image))
    # a campaign variant's cases are filed under its name, like its measured ones
    flavour = series_flavour(manifest) or "unknown"
    identity = ({"variant": manifest["variant"],
                 "campaign_run": os.environ.get(CAMPAIGN_RUN_VARIABLE) or None}
                if manifest.get("variant") else {})
    why_stopped = "; ".join(f"{place}: {reason}" for place, reason in sorted(stopped.items()))
    records = []
    for case in left:
        records.append({**_leftover_record(case, board=board, flavour=flavour,
                                           plan=sharing.plan, why_stopped=why_stopped),
                        **identity})
    paths = [write_record(out_dir / "results", record) for record in records]
    write_junit(out_dir / f"junit-unmeasured-{os.getpid()}.xml",
                records_junit(list(zip(records, paths, strict=True)),
                              label="unmeasured cases of the plan"))
    return paths


def _leftover_record(case: Leftover, *, board: str, flavour: str, plan: str,
                     why_stopped: str) -> dict:
    now = datetime.datetime.now(datetime.UTC).isoformat()
    if case.place is None:
        message = ("not measured: no place of the plan was left to take it"
                   + (f" ({why_stopped})" if why_stopped else ""))
    else:
        message = (f"not measured: {case.place} took it and ended without a verdict "
                   "(its runner was stopped)")
    scenario, _, interval = case.name.partition("/")
    return {"kind": "rt-test" if scenario in TESTS else "cyclictest",
            "case": f"plan {plan}: {case.name}", "name": f"{board}/{flavour}/{case.name}",
            "board": board, "flavour": flavour, "place": case.place, "scenario": scenario,
            "interval_us": int(interval[:-2]) if interval else None, "started": now,
            "finished": now, "verdict": "error", "message": message,
            "run_id": f"{plan}:unmeasured"}
