"""System facts of the board under test, read through its shell and kept with every
result: a latency figure is meaningless without the kernel it was measured on."""

from typing import Protocol

import attr


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
    cmdline: str
    cpus: int
    cpu_model: str
    sched_rt_runtime_us: int

    def as_dict(self) -> dict[str, object]:
        return attr.asdict(self)


def preemption_model(kernel_version: str, realtime: bool) -> str:
    """From ``uname -v``: the kernel names its preemption model there."""
    if realtime or "PREEMPT_RT" in kernel_version:
        return "PREEMPT_RT"
    for model in ("PREEMPT_DYNAMIC", "PREEMPT"):
        if model in kernel_version.split():
            return model
    return "NONE_OR_VOLUNTARY"


def read_system_info(shell: Shell) -> SystemInfo:
    def one(cmd: str) -> str:
        return "\n".join(shell.run_check(cmd)).strip()

    version = one("uname -v")
    realtime_text = one("cat /sys/kernel/realtime 2>/dev/null || echo 0")
    realtime = realtime_text == "1"
    cpu_model = one(
        "grep -m1 -E '^(model name|Processor|CPU part)' /proc/cpuinfo | cut -d: -f2 || true"
    )
    return SystemInfo(
        kernel_release=one("uname -r"),
        kernel_version=version,
        machine=one("uname -m"),
        realtime=realtime,
        preemption=preemption_model(version, realtime),
        cmdline=one("cat /proc/cmdline"),
        cpus=int(one("grep -c ^processor /proc/cpuinfo")),
        cpu_model=cpu_model.strip(),
        sched_rt_runtime_us=int(one("cat /proc/sys/kernel/sched_rt_runtime_us")),
    )
