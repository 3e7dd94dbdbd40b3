"""rtlab.demo: the table printed at the end of `make demo`, from result records."""

from rtlab.demo import format_table


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
