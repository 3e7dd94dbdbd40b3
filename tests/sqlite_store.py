"""A SQLite results store holding a folder of result records, for tests that read the
store (tuning, the trace's re-run rule)."""

from pathlib import Path

from rtlab.store import ingest_folder, open_store


def ingested(records: Path, database: Path) -> str:
    """The URL of a new SQLite store at ``database`` holding every record in ``records``."""
    url = f"sqlite:///{database}"
    store = open_store(url)
    try:
        ingest_folder(store, records)
    finally:
        store.close()
    return url
