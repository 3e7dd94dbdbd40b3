"""Reading a kernel's .config: which preemption model it selects, and the options that
decide how a real-time kernel behaves."""

import re

# the options a latency result is read against: preemption model, tick, timer resolution,
# frequency scaling and idle states, hardening that costs time on every allocation
# (plain POSIX ERE: it is also grepped on the board by busybox)
RELEVANT = re.compile(
    r"^CONFIG_(PREEMPT[A-Z0-9_]*|HZ[A-Z0-9_]*|NO_HZ[A-Z0-9_]*|HIGH_RES_TIMERS"
    r"|CPU_FREQ[A-Z0-9_]*|CPU_IDLE[A-Z0-9_]*|INIT_ON_[A-Z0-9_]+|RT_GROUP_SCHED"
    r"|IRQ_FORCED_THREADING)="
)
_PREEMPTION = (
    ("CONFIG_PREEMPT_RT", "PREEMPT_RT"),
    ("CONFIG_PREEMPT", "PREEMPT"),
    ("CONFIG_PREEMPT_VOLUNTARY", "VOLUNTARY"),
    ("CONFIG_PREEMPT_NONE", "NONE"),
)


def options(config: str) -> dict[str, str]:
    """``CONFIG_X=value`` lines by name (``# CONFIG_X is not set`` lines are left out)."""
    result = {}
    for line in config.splitlines():
        name, sep, value = line.strip().partition("=")
        if sep and name.startswith("CONFIG_"):
            result[name] = value
    return result


def hz(config: str) -> int | None:
    """The timer tick (``CONFIG_HZ``), or None when the text does not set it."""
    value = options(config).get("CONFIG_HZ", "")
    return int(value) if value.isdigit() else None


def preemption_model(config: str) -> str | None:
    """PREEMPT_RT / PREEMPT / VOLUNTARY / NONE, or None when the text selects none of
    them (not a kernel config, or a fragment of one)."""
    selected = {name for name, value in options(config).items() if value == "y"}
    return next((model for option, model in _PREEMPTION if option in selected), None)
