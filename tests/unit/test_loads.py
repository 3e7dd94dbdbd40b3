import pytest

from rtlab.loads import CpuTimes, LoadNotEffective, load_profile

# /proc/stat read twice on the emulated i.MX6Q around 5 s of `stress-ng --cpu 4`
STAT_BEFORE = """cpu  1210 0 2519 13842 36 0 31 0 0 0
cpu0 295 0 713 3376 11 0 25 0 0 0
intr 120233 0 0
"""
STAT_AFTER = """cpu  3155 0 2701 14051 36 0 33 0 0 0
cpu0 786 0 758 3426 11 0 27 0 0 0
"""


def test_utilisation_from_proc_stat():
    before, after = CpuTimes.parse(STAT_BEFORE), CpuTimes.parse(STAT_AFTER)
    # busy: (3155+2701+33) - (1210+2519+31) = 2129; idle: 14051 - 13842 = 209
    assert after.utilisation_since(before) == pytest.approx(2129 / (2129 + 209))


def test_proc_stat_without_cpu_line_is_refused():
    with pytest.raises(ValueError, match="no aggregate 'cpu' line"):
        CpuTimes.parse("intr 1 2 3\n")


def test_clock_that_did_not_advance_is_refused():
    times = CpuTimes.parse(STAT_BEFORE)
    with pytest.raises(ValueError, match="did not advance"):
        times.utilisation_since(times)


def test_cpu_load_command_quotes_and_backgrounds():
    command = load_profile("cpu").start_command(cpus=4, duration_s=9)
    assert command == ("stress-ng --cpu 4 --cpu-load 100 --timeout 9s --metrics-brief "
                       ">/tmp/rtlab-load.log 2>&1 & echo $!")
    assert load_profile("idle").start_command(cpus=4, duration_s=9) is None


def test_idle_board_under_cpu_load_is_not_effective():
    with pytest.raises(LoadNotEffective, match=r"CPU utilisation 12% .* at least 80%"):
        load_profile("cpu").verify(0.12, True, "")


def test_stress_ng_that_ended_early_is_not_effective():
    with pytest.raises(LoadNotEffective, match="not running when the measurement ended"):
        load_profile("cpu").verify(0.99, False, "stress-ng: error: unknown option")


def test_effective_load_passes_verification():
    load_profile("cpu").verify(0.95, True, "successful run completed")
    load_profile("idle").verify(0.01, False, "")


def test_unknown_load_lists_valid_ones():
    with pytest.raises(ValueError, match=r"unknown load 'cpu50' \(valid: idle, cpu\)"):
        load_profile("cpu50")
