"""Loads as data → shell scripts on the board, and the proof that each load ran.

A latency figure measured while the load silently did not run is worthless, so every load
is checked afterwards from the board's own accounting (/proc/stat, the load's log, whether
it was still running when the window closed); a load that was not effective makes the
measurement an error, never a pass.
"""

import re
import shlex
from collections import Counter
from collections.abc import Collection, Mapping
from typing import Any, Protocol

import attr

PERCENT = re.compile(r"^[1-9][0-9]?%$|^100%$")
SIZE = re.compile(r"^[1-9][0-9]*[KMG]?$")


class LoadNotEffective(Exception):
    """The load did not run as asked; the message gives the evidence."""


@attr.frozen
class CpuTimes:
    """CPU time from /proc/stat, in clock ticks: the aggregate ``cpu`` line, or the sum of
    the ``cpuN`` lines of some CPUs."""

    busy: int
    idle: int

    @classmethod
    def parse(cls, proc_stat: str, cpus: Collection[int] | None = None) -> "CpuTimes":
        """``cpus``: only these CPUs (the ones a load runs on when others are isolated)."""
        names = {"cpu"} if cpus is None else {f"cpu{n}" for n in cpus}
        busy = idle = 0
        found = set()
        for line in proc_stat.splitlines():
            fields = line.split()
            if fields and fields[0] in names:
                ticks = [int(value) for value in fields[1:]]
                # idle and iowait are the two non-busy columns; guest and guest_nice
                # (9th, 10th) are already counted in user and nice
                line_idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
                busy += sum(ticks[:8]) - line_idle
                idle += line_idle
                found.add(fields[0])
        if found != names:
            missing = ", ".join(sorted(names - found))
            raise ValueError(f"no {missing} line in /proc/stat output"
                             if cpus is not None else
                             "no aggregate 'cpu' line in /proc/stat output")
        return cls(busy=busy, idle=idle)

    def utilisation_since(self, before: "CpuTimes") -> float:
        busy = self.busy - before.busy
        total = busy + self.idle - before.idle
        if total <= 0:
            raise ValueError("/proc/stat did not advance between the two readings")
        return busy / total


# The loads' own progress lines (``start``, ``rc=0``, ``wrote``): one word, maybe ``=N``.
PROGRESS_LINE = r"[a-z]+(=[0-9]+)?"


def tally(log: str) -> dict[str, int]:
    """How often each progress line occurs in ``log``."""
    return dict(Counter(line for line in map(str.strip, log.splitlines())
                        if re.fullmatch(PROGRESS_LINE, line)))


@attr.frozen
class Evidence:
    """What the board showed of one load when the measurement window closed."""

    alive: bool
    log: str
    """The end of the load's log (its last lines), for messages."""
    probe: str = ""
    """What the load's ``probe`` command printed when the window closed (if it has one)."""
    probe_before: str = ""
    """... and when the window opened."""
    tally: Mapping[str, int] = attr.field()
    """Each progress line counted over the whole log: in a long window the end of the
    log shows only the last runs. Without one given, counted from ``log``."""

    window_s: float = 0.0
    """How long the measurement window lasted, for a load judged by its rate (0: not
    known, and no rate is judged)."""

    @tally.default
    def _tally_of_the_log(self) -> Mapping[str, int]:
        return tally(self.log)


@attr.frozen
class HostTraffic:
    """Where the lab host sends traffic to the board, for loads that need the host."""

    ping_address: str
    """What the board pings (on the virtual rack, the emulator's gateway)."""
    stream_host: str
    stream_port: int
    """Where the host reaches the board's stream listener (on the virtual rack a port the
    emulator forwards to the board)."""
    board_port: int
    """The port the board listens on."""


class LoadPart(Protocol):
    kind: str
    probe: str | None
    """A shell command run on the board when the window closes; its output goes into
    :attr:`Evidence.probe` (the kernel's counters, for loads that are judged by them)."""

    def script(self, cpus: int, seconds: int) -> str:
        """A shell script that runs the load for ``seconds`` and then ends by itself, so
        that a lost host never leaves a board loaded."""
        ...

    def min_utilisation(self, cpus: int) -> float:
        """The least CPU utilisation (of the CPUs the load may use, over the window) that
        shows the load ran as asked."""
        ...

    def verify(self, evidence: Evidence) -> dict[str, Any]:
        """Facts proving the load ran; raises :class:`LoadNotEffective` otherwise."""
        ...


def _deadline_loop(seconds: int, body: str) -> str:
    return (f'end=$(( $(date +%s) + {seconds} )); '
            f'while [ "$(date +%s)" -lt "$end" ]; do {body}; done')


def _not_running(kind: str, evidence: Evidence) -> LoadNotEffective:
    return LoadNotEffective(f"load not effective: {kind} was not running when the "
                            f"measurement ended: {evidence.log.strip()[-300:]!r}")


@attr.frozen
class CpuLoad:
    percent: int = attr.field()
    min_busy_fraction: float = attr.field(default=0.5)
    """How much of the asked share must show as CPU utilisation: stress-ng's duty cycle is
    coarse over short windows and cyclictest at a higher priority takes its turns, so half
    the share, with stress-ng alive at the end, is the load."""
    kind = "cpu"
    probe = None

    @percent.validator
    def _check(self, _: object, value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 100:
            raise ValueError(f"cpu percent must be an integer 1..100, got {value!r}")

    @min_busy_fraction.validator
    def _check_fraction(self, _: object, value: float) -> None:
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value <= 1:
            raise ValueError(f"cpu min_busy_fraction must be a number in (0, 1], got {value!r}")

    def script(self, cpus: int, seconds: int) -> str:
        return shlex.join(["exec", "stress-ng", "--cpu", str(cpus), "--cpu-load",
                           str(self.percent), "--timeout", f"{seconds}s", "--metrics-brief"])

    def min_utilisation(self, cpus: int) -> float:
        return self.min_busy_fraction * self.percent / 100

    def verify(self, evidence: Evidence) -> dict[str, Any]:
        if not evidence.alive:
            raise _not_running("stress-ng --cpu", evidence)
        return {"percent": self.percent}


@attr.frozen
class HackbenchLoad:
    groups: int
    fds: int
    loops: int
    bytes: int
    kind = "hackbench"
    probe = None

    def argv(self) -> list[str]:
        return ["hackbench", "-P", "-g", str(self.groups), "-f", str(self.fds),
                "-l", str(self.loops), "-s", str(self.bytes)]

    def script(self, cpus: int, seconds: int) -> str:
        # one hackbench run is shorter than a long window: restart it until the end
        return _deadline_loop(seconds, f'echo start; {shlex.join(self.argv())} >/dev/null; '
                                       'echo "rc=$?"')

    def min_utilisation(self, cpus: int) -> float:
        # its processes pass messages without pause; a quarter of the CPUs is a floor
        return 0.25

    def verify(self, evidence: Evidence) -> dict[str, Any]:
        failed = {line: n for line, n in evidence.tally.items()
                  if line.startswith("rc=") and line != "rc=0"}
        if failed:
            codes = ", ".join(line if n == 1 else f"{line} ×{n}"
                              for line, n in sorted(failed.items()))
            raise LoadNotEffective(f"load not effective: hackbench failed ({codes}): "
                                   f"{evidence.log.strip()[-300:]!r}")
        started = evidence.tally.get("start", 0)
        if not evidence.alive or not started:
            raise _not_running("hackbench", evidence)
        return {"started": started, "completed": evidence.tally.get("rc=0", 0)}


@attr.frozen
class MemoryLoad:
    workers: int
    bytes: str = attr.field()
    kind = "memory"
    probe = None

    @bytes.validator
    def _check(self, _: object, value: str) -> None:
        if not isinstance(value, str) or not (PERCENT.match(value) or SIZE.match(value)):
            raise ValueError(f"memory bytes must look like '10%' or '128M', got {value!r}")

    def script(self, cpus: int, seconds: int) -> str:
        return shlex.join(["exec", "stress-ng", "--vm", str(self.workers), "--vm-bytes",
                           self.bytes, "--timeout", f"{seconds}s", "--metrics-brief"])

    def min_utilisation(self, cpus: int) -> float:
        # each worker keeps one CPU busy touching its memory
        return 0.5 * min(self.workers, cpus) / cpus

    def verify(self, evidence: Evidence) -> dict[str, Any]:
        if not evidence.alive:
            raise _not_running("stress-ng --vm", evidence)
        return {"workers": self.workers, "bytes": self.bytes}


@attr.frozen
class DiskLoad:
    dir: str
    block_kib: int
    blocks: int
    kind = "disk"
    probe = None

    def script(self, cpus: int, seconds: int) -> str:
        target = shlex.quote(f"{self.dir}/rtlab-disk-load.bin")
        # dd's own words on failure, its statistics otherwise not
        write = (f"if out=$(dd if=/dev/zero of={target} bs={self.block_kib}k "
                 f"count={self.blocks} conv=fsync 2>&1) && sync; then echo wrote; "
                 'else echo "failed: $(echo "$out" | head -n 1)"; exit 1; fi')
        folder = shlex.quote(self.dir)
        unwritable = shlex.quote(f"not a writable directory: {self.dir}")
        return (f"test -d {folder} -a -w {folder} || {{ echo {unwritable}; exit 1; }}; "
                + _deadline_loop(seconds, write) + f"; rm -f {target}")

    def min_utilisation(self, cpus: int) -> float:
        # waiting for the card is iowait, not CPU time: judged by the writes instead
        return 0.0

    def verify(self, evidence: Evidence) -> dict[str, Any]:
        lines = evidence.log.splitlines()
        failure = next((line for line in lines if line.startswith("failed")), None)
        if failure is not None or not evidence.alive:
            why = failure or evidence.log.strip()[-300:]
            raise LoadNotEffective(f"load not effective: disk writes to {self.dir} stopped: "
                                   f"{why!r}")
        rounds = evidence.tally.get("wrote", 0)
        if rounds == 0:
            raise LoadNotEffective(f"load not effective: no {self.blocks} × {self.block_kib} "
                                   f"KiB write to {self.dir} completed during the measurement")
        return {"written_kib": rounds * self.blocks * self.block_kib}


PING = "/bin/ping"
# the kernel's ICMP and TCP counters: per protocol a header line of names and a line of values
SNMP_COUNTERS = "grep -E '^(Icmp|Tcp):' /proc/net/snmp"


def snmp_counters(text: str, protocol: str) -> dict[str, int]:
    """The ``Icmp:`` or ``Tcp:`` counters of /proc/net/snmp by name (their order varies
    between kernel versions)."""
    prefix = f"{protocol}:"
    lines = [line.split() for line in text.splitlines() if line.startswith(prefix)]
    if len(lines) != 2 or len(lines[0]) != len(lines[1]):
        raise ValueError(f"not the two {prefix} lines of /proc/net/snmp: "
                         f"{text.strip()[:200]!r}")
    names, values = lines
    try:
        return {name: int(value) for name, value in zip(names[1:], values[1:], strict=True)}
    except ValueError:
        raise ValueError(f"{prefix} counters are not numbers: {values}") from None


# ping -f sends 100 echo requests a second when replies are slow and as fast as they come
# back otherwise: a flood below half that floor did not flood (emulated boards: 126-730/s)
MIN_FLOOD_RATE_PER_S = 50


@attr.frozen
class NetworkLoad:
    """A ping flood from the board with large packets, and a TCP stream from the lab host
    into the board (the host side is driven by the suite, see :class:`HostTraffic`)."""

    ping_bytes: int
    traffic: HostTraffic | None = None
    kind = "network"
    probe = SNMP_COUNTERS

    def script(self, cpus: int, seconds: int) -> str:
        if self.traffic is None:
            raise ValueError("network load needs the board's traffic addresses")
        # by path: a busybox shell runs its own ping applet (no -f) before looking at PATH
        ping = shlex.join([PING, "-f", "-q", "-s", str(self.ping_bytes), "-w", str(seconds),
                           self.traffic.ping_address])
        # nc must never see EOF on its input: busybox nc then closes its side, and the
        # emulator's user network stops passing the host's data (seen on the virtual rack)
        # the port comes from a place tag: quoted like every other value the lab supplies
        nc = shlex.join(["nc", "-l", "-p", str(self.traffic.board_port)])
        listen = f"sleep {int(seconds)} | {nc} >/dev/null"
        return f'({listen}) & {ping}; echo "ping-rc=$?"'


    def min_utilisation(self, cpus: int) -> float:
        # judged by the network counters instead
        return 0.0

    def verify(self, evidence: Evidence) -> dict[str, Any]:
        """Proven by the kernel's own counters between the window's edges: echo requests
        went out and replies came back, and TCP segments (the host's stream) came in."""
        if not evidence.alive:
            raise _not_running("ping -f", evidence)
        try:
            deltas = {}
            for protocol, counter in (("Icmp", "OutEchos"), ("Icmp", "InEchoReps"),
                                      ("Tcp", "InSegs")):
                before = snmp_counters(evidence.probe_before, protocol)[counter]
                deltas[counter] = snmp_counters(evidence.probe, protocol)[counter] - before
        except (KeyError, ValueError) as error:
            raise LoadNotEffective(f"load not effective: the network load cannot be proven: "
                                   f"{error}") from None
        sent, replies = deltas["OutEchos"], deltas["InEchoReps"]
        if sent <= 0 or replies <= 0:
            raise LoadNotEffective(f"load not effective: the ping flood sent {sent} echo "
                                   f"requests and got {replies} replies")
        if evidence.window_s > 0 and sent / evidence.window_s < MIN_FLOOD_RATE_PER_S:
            raise LoadNotEffective(
                f"load not effective: the ping flood sent {sent} echo requests in "
                f"{evidence.window_s:g} s ({sent / evidence.window_s:.1f}/s), expected at "
                f"least {MIN_FLOOD_RATE_PER_S}/s (ping -f sends 100/s even without replies)")
        if deltas["InSegs"] <= 0:
            raise LoadNotEffective("load not effective: no TCP segment of the host's stream "
                                   "reached the board during the window")
        return {"ping_bytes": self.ping_bytes, "echo_requests": sent, "echo_replies": replies,
                "tcp_segments_in": deltas["InSegs"]}


_KINDS: dict[str, type] = {
    "cpu": CpuLoad, "hackbench": HackbenchLoad, "memory": MemoryLoad, "disk": DiskLoad,
    "network": NetworkLoad,
}
KINDS = tuple(_KINDS)


def make_load(kind: str, settings: Mapping[str, Any]) -> LoadPart:
    """One load part from its suite-file settings; ``ValueError`` names what is wrong."""
    try:
        cls = _KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown load {kind!r} (valid: {', '.join(KINDS)})") from None
    fields = {f.name: f for f in attr.fields(cls) if f.name != "traffic"}
    unknown = sorted(set(settings) - set(fields))
    if unknown:
        raise ValueError(f"load {kind!r}: unknown setting(s) {', '.join(map(repr, unknown))} "
                         f"(valid: {', '.join(fields)})")
    missing = [name for name, f in fields.items()
               if name not in settings and f.default is attr.NOTHING]
    if missing:
        raise ValueError(f"load {kind!r}: missing setting(s) {', '.join(missing)}")
    for name, value in settings.items():
        expected = fields[name].type
        if expected in (int, str) and (not isinstance(value, expected)
                                       or isinstance(value, bool)):
            raise ValueError(f"load {kind!r}: {name} must be {expected.__name__}, "
                             f"got {value!r}")
        if expected is int and value <= 0:
            raise ValueError(f"load {kind!r}: {name} must be greater than 0, got {value}")
    return cls(**settings)
