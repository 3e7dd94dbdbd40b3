"""``rtlab demo`` (what ``make demo`` runs): every board of the virtual rack with every
kernel flavour, flashed, booted and measured, then one table of verdicts."""

import json
import time
from pathlib import Path
from typing import Any

from rtlab.image.build import build_image
from rtlab.platform.boards import FLAVOURS
from rtlab.run.runner import Selection, run_suite
from rtlab.util import paths
from rtlab.vlab import control
from rtlab.vlab.config import load_config


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# without --full: the suite's heaviest plain CPU scenario at the field's usual interval
QUICK = Selection(scenarios="cpu100", intervals="1000", rt_tests="none")


def run_demo(out_dir: Path, duration_s: int, full: bool) -> int:
    """Every board × flavour of the virtual rack: one scenario, or the whole suite file
    (every scenario × interval and every rt-test) with ``full``."""
    selection = Selection() if full else QUICK
    # a fresh folder per demo, so records of earlier runs never mix into this table
    out_dir = out_dir / time.strftime("demo-%Y%m%d-%H%M%S")
    config = load_config(paths.default_vlab_config())
    images: dict[tuple[str, str], Path] = {}
    # one place of each board type (the rack may have several of one)
    places = {board.model: board for board in reversed(config.boards)}
    for board in sorted(places.values(), key=config.boards.index):
        for flavour in FLAVOURS:
            _progress(f"image {board.model}-{flavour}")
            artifacts = build_image(board.model, flavour, paths.debs_dir(), paths.images_dir(),
                                    progress=lambda msg: _progress(f"  {msg}"))
            images[(board.place, flavour)] = artifacts.sd_image
    _progress("starting the virtual rack")
    control.start(config, paths.vlab_state_dir())
    outcomes = []
    try:
        for (place, flavour), image in images.items():
            what = "the whole suite" if full else "cyclictest under full CPU load"
            _progress(f"{place} {flavour}: flash, boot, {what} ({duration_s} s per case)")
            outcomes.append(run_suite(place=place, image=image,
                                      env_file=paths.REPO_ROOT / "env" / "virtual.yaml",
                                      coordinator=config.coordinator_address, out_dir=out_dir,
                                      duration_s=duration_s, label=f"{place}-{flavour}",
                                      selection=selection))
    finally:
        _progress("stopping the virtual rack")
        control.stop(paths.vlab_state_dir())
    records = [json.loads(p.read_text()) for p in sorted((out_dir / "results").glob("*.json"))]
    print()
    print(format_table(records))
    print()
    for outcome in outcomes:
        print(f"JUnit {outcome.junit}")
    print(f"result records in {out_dir / 'results'}")
    print(f"console logs in {out_dir / 'console'}")
    report_on_history(out_dir, out_dir.parent / "results.db")
    return 0 if all(o.exit_code == 0 for o in outcomes) else 1


def report_on_history(run_dir: Path, db: Path) -> Path:
    """This demo's records and JUnit into the store that every demo in the same ``--out``
    shares, then the report over it: each demo adds a point to the trends and is compared
    with the demos before it (they have no branch, so the baseline is any earlier run)."""
    from rtlab.report.build import write_report
    from rtlab.report.selection import Selection
    from rtlab.store import ingest_folder, open_store

    store = open_store(f"sqlite:///{db.resolve()}")
    try:
        _progress(f"results store {db}: {ingest_folder(store, run_dir)}")
        written = write_report(store, run_dir / "report", Selection(baseline_ref=None))
    finally:
        store.close()
    print(f"report (trends over every demo in {db.parent}): {written.html}")
    print(f"merge-request summary: {written.summary}")
    return written.html


def format_table(records: list[dict[str, Any]]) -> str:
    header = ("board", "flavour", "kernel", "case", "per-CPU max/avg µs", "verdict")
    rows = [header]
    for record in sorted(records, key=lambda r: (r.get("name") or r["case"], r["started"])):
        cpus = " ".join("no wake-up" if c.get("no_wakeup") else f"{c['max_us']}/{c['avg_us']:g}"
                        for c in record.get("cpus", []))
        cpus = cpus or " ".join(f"{t['max_us']}/{t['avg_us']:g}"
                                for t in record.get("threads", []) if t.get("gated"))
        system = record.get("system", {})
        verdict = record["verdict"]
        if verdict != "pass" and record.get("message"):
            verdict += f": {record['message'][:70]}"
        name = record.get("name") or record["case"]
        rows.append((record.get("board", "?"), record.get("flavour", "?"),
                     system.get("kernel_release", "?"), name.split("/", 2)[-1],
                     cpus or "-", verdict))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(row[:-1], widths, strict=True))
        + "  " + str(row[-1])
        for row in rows
    )
