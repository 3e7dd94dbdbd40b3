"""rtlab.vlab.demo: the table printed at the end of `make demo`, from result records."""

from rtlab.vlab.demo import format_table


def record(name: str, verdict: str, cpus: list[dict], message: str = "") -> dict:
    return {"case": f"tests/target/test_latency.py::{name}", "name": name, "verdict": verdict,
            "message": message, "started": "2026-11-23T07:00:00+00:00", "board": "qemu-imx6q",
            "flavour": "std", "system": {"kernel_release": "6.1.0-50-armmp"}, "cpus": cpus}


def test_rows_show_per_cpu_figures_and_cpus_that_never_woke():
    measured = {"cpu": 0, "max_us": 28564, "avg_us": 5581.35}
    silent = {"cpu": 1, "max_us": None, "avg_us": None, "samples": 0, "no_wakeup": True}
    table = format_table([
        record("qemu-imx6q/std/combined/1000us", "fail", [measured, silent],
               "CPU1 recorded no wake-up in the 10 s window"),
        record("qemu-imx6q/std/idle/1000us", "pass", [measured, measured]),
    ]).splitlines()
    assert table[0].split() == ["board", "flavour", "kernel", "case", "per-CPU", "max/avg",
                                "µs", "verdict"]
    assert "28564/5581.35 no wake-up" in table[1]
    assert table[1].endswith("fail: CPU1 recorded no wake-up in the 10 s window")
    assert table[2].split() == ["qemu-imx6q", "std", "6.1.0-50-armmp", "idle/1000us",
                                "28564/5581.35", "28564/5581.35", "pass"]


def test_each_demo_adds_to_the_shared_store_and_the_report_covers_them_all(tmp_path):
    import shutil
    from pathlib import Path

    from rtlab.store import open_store
    from rtlab.store.query import history
    from rtlab.vlab.demo import report_on_history

    records = Path(__file__).resolve().parents[1] / "data" / "records" / "vlab-imx6q-rt"
    first = tmp_path / "demo-1"
    shutil.copytree(records, first / "results")
    page = report_on_history(first, tmp_path / "results.db")
    assert page == first / "report" / "report.html" and page.is_file()
    assert "qemu-imx6q" in page.read_text()
    # a second demo folder with the same records adds nothing twice
    second = tmp_path / "demo-2"
    shutil.copytree(records, second / "results")
    report_on_history(second, tmp_path / "results.db")
    store = open_store(f"sqlite:///{tmp_path / 'results.db'}")
    try:
        with store.session() as session:
            assert len(history(session, board="qemu-imx6q")) == len(list(records.glob("*.json")))
    finally:
        store.close()
