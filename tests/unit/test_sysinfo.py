import pytest

from rtlab.sysinfo import preemption_model, read_system_info

# what the emulated boards answered (Debian 6.1 kernels)
ANSWERS = {
    "uname -v": "#1 SMP PREEMPT_RT Debian 6.1.176-1 (2026-10-02)",
    "uname -r": "6.1.0-50-rt-armmp",
    "uname -m": "armv7l",
    "cat /sys/kernel/realtime 2>/dev/null || echo 0": "1",
    "cat /proc/cmdline": "console=ttymxc1,115200 quiet",
    "grep -c ^processor /proc/cpuinfo": "4",
    "cat /proc/sys/kernel/sched_rt_runtime_us": "950000",
}


class FakeShell:
    def run_check(self, cmd, *, timeout=30, codec="utf-8", decodeerrors="strict"):
        if cmd.startswith("grep -m1"):
            return [" ARMv7 Processor rev 10 (v7l)"]
        return [ANSWERS[cmd]]


def test_system_info_of_an_rt_board():
    info = read_system_info(FakeShell())
    assert info.realtime is True
    assert info.preemption == "PREEMPT_RT"
    assert info.cpus == 4
    assert info.cpu_model == "ARMv7 Processor rev 10 (v7l)"
    assert info.as_dict()["sched_rt_runtime_us"] == 950000


@pytest.mark.parametrize(
    ("version", "realtime", "model"),
    [
        ("#1 SMP PREEMPT_RT Debian 6.1.176-1", False, "PREEMPT_RT"),
        ("#1 SMP Debian 6.1.176-1 (2026-10-02)", True, "PREEMPT_RT"),
        ("#1 SMP PREEMPT Debian 6.12.100", False, "PREEMPT"),
        ("#1 SMP PREEMPT_DYNAMIC Debian 6.1.176-1", False, "PREEMPT_DYNAMIC"),
        ("#1 SMP Debian 6.1.176-1 (2026-10-02)", False, "NONE_OR_VOLUNTARY"),
    ],
)
def test_preemption_model_from_uname(version, realtime, model):
    assert preemption_model(version, realtime) == model
