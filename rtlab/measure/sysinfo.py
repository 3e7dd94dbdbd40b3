"""System facts of the board under test, read through its shell and kept with every
result: a latency figure is meaningless without the kernel it was measured on."""

import re
from typing import Protocol

import attr

from rtlab.artifacts import kconfig

# /proc/config.gz needs CONFIG_IKCONFIG_PROC; Debian kernels ship the file in /boot instead
KERNEL_CONFIG_SOURCES = ("/proc/config.gz", "/boot/config-$(uname -r)")
_CPU_LIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


class Shell(Protocol):
    def run_check(self, cmd: str, *, timeout: int = 30, codec: str = "utf-8",
                  decodeerrors: str = "strict") -> list[str]: ...


@attr.frozen
class SystemInfo:
    kernel_release: str
    kernel_version: str
    machine: str
    realtime: bool
    preemption: str
    """From the kernel config when the board has it, else from ``uname -v``."""
    cmdline: str
    cpus: int
    cpu_model: str
    sched_rt_runtime_us: int
    isolated_cpus: tuple[int, ...]
    """CPUs the kernel keeps out of general scheduling (``isolcpus=``)."""
    kernel_config_source: str | None
    kernel_config: dict[str, str]
    """The options of :data:`rtlab.artifacts.kconfig.RELEVANT`, when the config could be read."""

    def as_dict(self) -> dict[str, object]:
        facts = attr.asdict(self)
        facts["isolated_cpus"] = list(self.isolated_cpus)
        return facts


def preemption_model(kernel_version: str, realtime: bool) -> str:
    """From ``uname -v``: the kernel names its preemption model there."""
    if realtime or "PREEMPT_RT" in kernel_version:
        return "PREEMPT_RT"
    for model in ("PREEMPT_DYNAMIC", "PREEMPT"):
        if model in kernel_version.split():
            return model
    return "NONE_OR_VOLUNTARY"


def cpu_list(text: str) -> tuple[int, ...]:
    """The kernel's CPU list format ("", "3", "1-3,5") as CPU numbers."""
    text = text.strip()
    if not text:
        return ()
    if not _CPU_LIST.match(text):
        raise ValueError(f"not a CPU list: {text!r}")
    cpus: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return tuple(sorted(set(cpus)))


def read_system_info(shell: Shell) -> SystemInfo:
    def one(cmd: str) -> str:
        return "\n".join(shell.run_check(cmd)).strip()

    version = one("uname -v")
    realtime_text = one("cat /sys/kernel/realtime 2>/dev/null || echo 0")
    realtime = realtime_text == "1"
    cpu_model = one(
        "grep -m1 -E '^(model name|Processor|CPU part)' /proc/cpuinfo | cut -d: -f2 || true"
    )
    source, config = _kernel_config(shell)
    preemption = kconfig.preemption_model("\n".join(f"{k}={v}" for k, v in config.items()))
    return SystemInfo(
        kernel_release=one("uname -r"),
        kernel_version=version,
        machine=one("uname -m"),
        realtime=realtime,
        preemption=preemption or preemption_model(version, realtime),
        cmdline=one("cat /proc/cmdline"),
        cpus=int(one("grep -c ^processor /proc/cpuinfo")),
        cpu_model=cpu_model.strip(),
        sched_rt_runtime_us=int(one("cat /proc/sys/kernel/sched_rt_runtime_us")),
        isolated_cpus=cpu_list(one("cat /sys/devices/system/cpu/isolated 2>/dev/null || true")),
        kernel_config_source=source,
        kernel_config=config,
    )


def _kernel_config(shell: Shell) -> tuple[str | None, dict[str, str]]:
    """The relevant options of the running kernel's config, grepped on the board (a whole
    config is a quarter of a megabyte: too much for a serial line)."""
    pattern = kconfig.RELEVANT.pattern
    for source in KERNEL_CONFIG_SOURCES:
        reader = "zcat" if source.endswith(".gz") else "cat"
        lines = shell.run_check(
            f'f={source}; if [ -r "$f" ]; then echo "found $f"; {reader} "$f" | '
            f"grep -E '{pattern}'; fi; true")
        if lines and lines[0].startswith("found "):
            return lines[0].removeprefix("found "), kconfig.options("\n".join(lines[1:]))
    return None, {}
