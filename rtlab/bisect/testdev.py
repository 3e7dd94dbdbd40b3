"""The test device: a kernel option that only the virtual rack's image understands, so that
a bisection can be proven on emulated boards, whose latencies cannot rank real kernels
(docs/bisect.md). ``CONFIG_RTLAB_TESTDEV_HOG_MS=N`` in a configuration makes the image
start, at boot, a SCHED_FIFO 95 task on every CPU that is busy N ms of every 100 ms
(stress-ng's --cpu-load): every wake-up of a measuring thread that falls into it waits up
to N ms (docs/virtual-rack.md: a real latency source of B µs). On every CPU, because an
emulated board's own latencies are milliseconds (median 2-3 ms, p90 8-13 ms on the virtual
i.MX6Q with both boards running, 2026-11-27): a hog on one CPU of four moved its maximum
to 0.3 s but left the pooled quantiles within the boots' spread, while N ms on every CPU
moves the bulk (p90) of every CPU's wake-ups.

No kernel has these options, so a lab's fragments must never hold them: ``rtlab kernel
config`` would refuse them (an option the final .config does not have). A bisection takes
them out of what kconfig sees (a built kernel's fragments hold a comment in their place,
:func:`strip_fragments`) and the image puts them on the kernel command line
(``rtlab.testdev_hog=N``), where /init plays them. Where a bisection takes Debian's
kernel for every point (``--kernel-source debian``), they are the only options that
change what the board runs. The device is a user task at a priority above the measuring
threads', which a board's window check reports as another real-time task
(suite.yaml ``other_rt_tasks``): a run with it is judged only under a suite that leaves
that check out, as the bisection test's does.
"""

from collections.abc import Mapping
from pathlib import Path

from rtlab.kernel.config import comment_out

PREFIX = "CONFIG_RTLAB_TESTDEV_"
HOG_MS = "CONFIG_RTLAB_TESTDEV_HOG_MS"
HOG_PARAM = "rtlab.testdev_hog"
HOG_MAX_MS = 50
OPTIONS = (HOG_MS,)


def is_device(option: str) -> bool:
    return option.startswith(PREFIX)


def cmdline(config: Mapping[str, str], where: str) -> str:
    """The kernel parameters that play the test-device options of ``config`` ("" without
    any); ``where`` names the configuration in errors."""
    params = []
    for name, value in sorted(config.items()):
        if not name.startswith(PREFIX) or value == "n":
            continue
        if name not in OPTIONS:
            raise ValueError(f"{where}: {name} is not a test-device option (known: "
                             f"{', '.join(OPTIONS)})")
        if not value.isdigit() or not 1 <= int(value) <= HOG_MAX_MS:
            raise ValueError(f"{where}: {name}={value}: the busy time must be 1 to "
                             f"{HOG_MAX_MS} ms of every 100 ms")
        params.append(f"{HOG_PARAM}={int(value)}")
    return " ".join(params)


def strip_fragments(configs_dir: Path) -> list[str]:
    """Every test-device request of the fragments in ``configs_dir`` turned into a comment
    (kconfig would drop them, and configure refuse the fragment), line numbers kept;
    returns ``file:line: request`` of each."""
    return comment_out(sorted(configs_dir.glob("*.config")), is_device,
                       "test device, on the command line")
