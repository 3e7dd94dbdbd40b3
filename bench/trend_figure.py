"""Draw the README's trend graph with its marked change points: the nightly records of
tests/unit/test_change_points.py (synthetic: a step of the tail on night 12 of
cpu100/1000us, a creep of idle/1000us in three steps), stored, reported, and the step's
trend figure written as a PNG.

    .venv/bin/python bench/trend_figure.py docs/trend-change-points.png
"""

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the PNG to write")
    args = parser.parse_args(argv)

    from rtlab.report import plots
    from rtlab.report.data import collect
    from rtlab.report.selection import Selection
    from rtlab.store import ingest_folder, open_store
    from tests.unit.test_change_points import _nightlies

    with tempfile.TemporaryDirectory(prefix="rtlab-trend-") as folder:
        records = Path(folder) / "records"
        records.mkdir()
        _nightlies(records)
        store = open_store(f"sqlite:///{folder}/results.db")
        try:
            ingest_folder(store, records)
            with store.session() as session:
                data = collect(session, Selection())
        finally:
            store.close()
    # the step's series (the creep's is its own group: its figure is drawn alike)
    [group] = [g for g in data.groups if g.key[2] == "cpu100"]
    args.out.write_bytes(plots.png(plots.figure(group, "trend")))
    for change in data.changes.found:
        print(f"{change.series}: {change.describe()}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
