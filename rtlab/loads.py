"""Load profiles as data → shell commands on the board, and the proof that a load ran.

A latency figure measured while the load silently did not run is worthless, so every load
is checked afterwards from the board's own accounting (/proc/stat, load average, the load
tool's exit status); a load that was not effective makes the measurement an error.
"""

import shlex

import attr

LOAD_LOG = "/tmp/rtlab-load.log"


class LoadNotEffective(Exception):
    """The load did not run as asked; the message gives the evidence."""


@attr.frozen
class CpuTimes:
    """The aggregate ``cpu`` line of /proc/stat, in clock ticks."""

    busy: int
    idle: int

    @classmethod
    def parse(cls, proc_stat: str) -> "CpuTimes":
        for line in proc_stat.splitlines():
            fields = line.split()
            if fields and fields[0] == "cpu":
                ticks = [int(value) for value in fields[1:]]
                # idle and iowait are the two non-busy columns
                idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
                return cls(busy=sum(ticks) - idle, idle=idle)
        raise ValueError("no aggregate 'cpu' line in /proc/stat output")

    def utilisation_since(self, before: "CpuTimes") -> float:
        busy = self.busy - before.busy
        total = busy + self.idle - before.idle
        if total <= 0:
            raise ValueError("/proc/stat did not advance between the two readings")
        return busy / total


@attr.frozen
class LoadProfile:
    """A load running on all CPUs of the board for the whole measurement.

    Args:
        name: the scenario name used in thresholds and results
        cpu_percent: stress-ng --cpu-load per worker; 0 means no load (idle)
        min_utilisation: the lowest whole-board CPU utilisation accepted as proof
    """

    name: str
    cpu_percent: int
    min_utilisation: float

    def start_command(self, cpus: int, duration_s: int) -> str | None:
        """Command that starts the load in the background and prints its PID."""
        if self.cpu_percent == 0:
            return None
        argv = ["stress-ng", "--cpu", str(cpus), "--cpu-load", str(self.cpu_percent),
                "--timeout", f"{duration_s}s", "--metrics-brief"]
        return f"{shlex.join(argv)} >{LOAD_LOG} 2>&1 & echo $!"

    def verify(self, utilisation: float, ran_throughout: bool, log: str) -> None:
        """``ran_throughout``: the load process was still alive when the measurement
        ended (it is started with a timeout well past the measurement)."""
        if self.cpu_percent and not ran_throughout:
            raise LoadNotEffective(
                f"load not effective: stress-ng was not running when the measurement "
                f"ended: {log.strip()[-300:]}"
            )
        if utilisation < self.min_utilisation:
            raise LoadNotEffective(
                f"load not effective: CPU utilisation {utilisation:.0%} during the "
                f"measurement, expected at least {self.min_utilisation:.0%} for "
                f"load '{self.name}'"
            )


LOADS: dict[str, LoadProfile] = {
    "idle": LoadProfile("idle", 0, 0.0),
    # cyclictest itself sleeps nearly all the time, so 100 % stress on every CPU must show
    # up as a nearly busy board; 80 % leaves room for the accounting of short runs
    "cpu": LoadProfile("cpu", 100, 0.80),
}


def load_profile(name: str) -> LoadProfile:
    try:
        return LOADS[name]
    except KeyError:
        raise ValueError(f"unknown load '{name}' (valid: {', '.join(LOADS)})") from None
