import gzip
import re
import subprocess
from pathlib import Path

import pytest

from rtlab.measure import facts, upload
from rtlab.measure.sysinfo import cpu_list, preemption_model, read_system_info

# what the emulated boards answered (Debian 6.1 kernels)
ANSWERS = {
    "uname -v": "#1 SMP PREEMPT_RT Debian 6.1.176-1 (2026-10-02)",
    "uname -r": "6.1.0-50-rt-armmp",
    "uname -m": "armv7l",
    "cat /sys/kernel/realtime 2>/dev/null || echo 0": "1",
    "cat /proc/cmdline": "console=ttymxc1,115200 quiet",
    "grep -c ^processor /proc/cpuinfo": "4",
    "cat /proc/sys/kernel/sched_rt_runtime_us": "950000",
    # no isolcpus=: the kernel prints an empty line
    "cat /sys/devices/system/cpu/isolated 2>/dev/null || true": "",
}
STD_ANSWERS = {
    "uname -v": "#1 SMP Debian 6.1.176-1 (2026-10-02)",
    "uname -r": "6.1.0-50-armmp",
    "cat /sys/kernel/realtime 2>/dev/null || echo 0": "0",
}

# the relevant part of a 6.1 stock kernel's config, and of an RT kernel's
STD_CONFIG = """\
CONFIG_NO_HZ_IDLE=y
CONFIG_HIGH_RES_TIMERS=y
CONFIG_MODULES=y
CONFIG_PREEMPT_VOLUNTARY_BUILD=y
# CONFIG_PREEMPT_NONE is not set
CONFIG_PREEMPT_VOLUNTARY=y
# CONFIG_PREEMPT is not set
# CONFIG_PREEMPT_RT is not set
CONFIG_HZ_250=y
CONFIG_HZ=250
CONFIG_CPU_FREQ=y
CONFIG_CPU_IDLE=y
CONFIG_ARM_CPUIDLE=y
"""
RT_CONFIG = """\
CONFIG_NO_HZ_IDLE=y
CONFIG_HIGH_RES_TIMERS=y
# CONFIG_PREEMPT_VOLUNTARY is not set
# CONFIG_PREEMPT is not set
CONFIG_PREEMPT_RT=y
CONFIG_PREEMPT_COUNT=y
CONFIG_PREEMPTION=y
CONFIG_PREEMPT_RCU=y
CONFIG_HZ_250=y
CONFIG_HZ=250
"""


class FakeShell:
    """The board's shell. Its config files (board path -> text) are real files here, and
    the kernel-config command runs in a real sh on them, so its grep and zcat are tested
    too."""

    def __init__(self, tmp_path: Path | None = None, answers=None, configs=None):
        self.answers = {**ANSWERS, **(answers or {})}
        self.tmp_path = tmp_path
        self.configs = configs or {}
        self.commands: list[str] = []

    def run_check(self, cmd, *, timeout=30, codec="utf-8", decodeerrors="strict"):
        self.commands.append(cmd)
        if cmd.startswith("grep -m1"):
            return [" ARMv7 Processor rev 10 (v7l)"]
        if cmd.startswith("f="):
            return self._config(cmd)
        return self.answers[cmd].splitlines()

    def _config(self, cmd: str) -> list[str]:
        source = cmd.removeprefix("f=").split(";", 1)[0]
        board_path = source.replace("$(uname -r)", self.answers["uname -r"])
        if board_path not in self.configs:
            return []
        assert self.tmp_path is not None
        local = self.tmp_path / Path(board_path).name
        text = self.configs[board_path].encode()
        local.write_bytes(gzip.compress(text) if board_path.endswith(".gz") else text)
        done = subprocess.run(["sh", "-c", cmd.replace(f"f={source};", f"f={local};", 1)],
                              capture_output=True, text=True, timeout=30, check=True)
        return done.stdout.replace(str(local), board_path).splitlines()

    def config_commands(self) -> list[str]:
        return [cmd for cmd in self.commands if cmd.startswith("f=")]


def test_system_info_of_an_rt_board():
    info = read_system_info(FakeShell())
    assert info.realtime is True
    assert info.preemption == "PREEMPT_RT"
    assert info.cpus == 4
    assert info.cpu_model == "ARMv7 Processor rev 10 (v7l)"
    assert info.as_dict()["sched_rt_runtime_us"] == 950000
    assert (info.kernel_config_source, info.kernel_config) == (None, {})
    assert info.isolated_cpus == ()


def test_config_in_boot_decides_the_preemption_model(tmp_path):
    # uname -v of a voluntary kernel names no model; its config does
    shell = FakeShell(tmp_path, STD_ANSWERS,
                      configs={"/boot/config-6.1.0-50-armmp": STD_CONFIG})
    info = read_system_info(shell)
    assert (info.realtime, info.preemption) == (False, "VOLUNTARY")
    assert info.kernel_config_source == "/boot/config-6.1.0-50-armmp"
    assert info.kernel_config == {
        "CONFIG_NO_HZ_IDLE": "y", "CONFIG_HIGH_RES_TIMERS": "y",
        "CONFIG_PREEMPT_VOLUNTARY_BUILD": "y", "CONFIG_PREEMPT_VOLUNTARY": "y",
        "CONFIG_HZ_250": "y", "CONFIG_HZ": "250", "CONFIG_CPU_FREQ": "y", "CONFIG_CPU_IDLE": "y"}
    # /proc/config.gz first, then Debian's file in /boot
    first, second = shell.config_commands()
    assert first.startswith("f=/proc/config.gz; ") and ' zcat "$f" | grep -E ' in first
    assert second.startswith("f=/boot/config-$(uname -r); ") and ' cat "$f" | grep -E ' in second
    assert info.as_dict()["kernel_config"] == info.kernel_config


def test_proc_config_gz_is_read_first(tmp_path):
    shell = FakeShell(tmp_path, configs={"/proc/config.gz": RT_CONFIG,
                                         "/boot/config-6.1.0-50-rt-armmp": STD_CONFIG})
    info = read_system_info(shell)
    assert (info.kernel_config_source, info.preemption) == ("/proc/config.gz", "PREEMPT_RT")
    assert info.kernel_config["CONFIG_PREEMPT_RT"] == "y"
    assert "CONFIG_PREEMPT_VOLUNTARY" not in info.kernel_config
    assert len(shell.config_commands()) == 1


def test_config_decides_even_against_uname(tmp_path):
    # uname -v says PREEMPT_DYNAMIC; the config says which model the kernel boots with
    shell = FakeShell(tmp_path, {**STD_ANSWERS, "uname -v": "#1 SMP PREEMPT_DYNAMIC Debian "
                                 "6.1.176-1 (2026-10-02)"},
                      configs={"/boot/config-6.1.0-50-armmp": STD_CONFIG})
    assert read_system_info(shell).preemption == "VOLUNTARY"


def test_without_a_config_the_model_comes_from_uname(tmp_path):
    shell = FakeShell(tmp_path, STD_ANSWERS)
    info = read_system_info(shell)
    assert (info.kernel_config_source, info.kernel_config) == (None, {})
    assert info.preemption == "NONE_OR_VOLUNTARY"
    assert len(shell.config_commands()) == 2


def test_a_config_without_the_preemption_choice_falls_back_to_uname(tmp_path):
    shell = FakeShell(tmp_path, {**STD_ANSWERS, "uname -v": "#1 SMP PREEMPT Debian 6.12.100"},
                      configs={"/proc/config.gz": "CONFIG_HZ=1000\nCONFIG_NO_HZ_FULL=y\n"})
    info = read_system_info(shell)
    assert info.kernel_config_source == "/proc/config.gz"
    assert info.kernel_config == {"CONFIG_HZ": "1000", "CONFIG_NO_HZ_FULL": "y"}
    assert info.preemption == "PREEMPT"


def test_isolated_cpus():
    shell = FakeShell(answers={"cat /proc/cmdline": "console=ttymxc1,115200 isolcpus=1-3",
                               "cat /sys/devices/system/cpu/isolated 2>/dev/null || true":
                               "1-3"})
    info = read_system_info(shell)
    assert info.isolated_cpus == (1, 2, 3)
    # a list in the result record (JSON)
    assert info.as_dict()["isolated_cpus"] == [1, 2, 3]


def test_garbled_isolated_cpus_are_refused():
    shell = FakeShell(answers={"cat /sys/devices/system/cpu/isolated 2>/dev/null || true":
                               "1-3\x1b[K"})
    with pytest.raises(ValueError, match=re.escape("not a CPU list: '1-3\\x1b[K'")):
        read_system_info(shell)


@pytest.mark.parametrize(("text", "cpus"), [
    ("", ()), ("\n", ()), ("3", (3,)), ("1-3,5", (1, 2, 3, 5)), ("0-1,4-5\n", (0, 1, 4, 5)),
    ("5,1-2", (1, 2, 5)), ("1,1-2", (1, 2)), ("2-2", (2,)), ("10-12", (10, 11, 12)),
])
def test_cpu_list(text, cpus):
    assert cpu_list(text) == cpus


@pytest.mark.parametrize("text", ["garbage", "1-", "-1", "1,,2", "1 2", "1-3,5-", "1;2",
                                  "0x1", "1-2-3", "all"])
def test_cpu_list_refuses_garbage(text):
    with pytest.raises(ValueError) as raised:
        cpu_list(text)
    assert str(raised.value) == f"not a CPU list: {text.strip()!r}"


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


class HostShell:
    """run_check as labgrid's ShellDriver runs a command (``sh -c``), on this machine."""

    def __init__(self):
        self.sent: list[str] = []

    def run_check(self, cmd, *, timeout=30, codec="utf-8", decodeerrors="strict"):
        self.sent.append(cmd)
        done = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True,
                              timeout=timeout, check=True)
        return done.stdout.splitlines()


def test_the_facts_asked_at_once_are_the_facts_asked_one_by_one():
    one_by_one, at_once = HostShell(), HostShell()
    assert facts.read_system_info_at_once(at_once) == read_system_info(one_by_one)
    # in two lines a busybox shell takes, instead of one per command
    assert len(at_once.sent) == 2 < len(one_by_one.sent)
    assert all(len(cmd) <= upload.LINE_CHARS for cmd in at_once.sent)


def test_answers_of_a_batch_keep_output_status_and_unended_lines():
    commands = ["printf 'a\\nb'", "false", "echo x"]
    mark = "rtlab-facts-00000000"
    [batch] = facts.batches(commands, mark)
    lines = HostShell().run_check(batch)
    answers = facts.parse_batch(lines, mark, commands)
    assert answers == {"printf 'a\\nb'": facts.Answer("a\nb", 0),
                       "false": facts.Answer("", 1), "echo x": facts.Answer("x", 0)}
    with pytest.raises(facts.FactsError, match="exited 1"):
        facts.replay_system_info({**{c: facts.Answer("0", 0) for c in facts.sysinfo_commands()},
                                  "uname -v": facts.Answer("", 1)})
