"""Whether a run is what it claims: the board's conditions while a measurement window runs,
checked against the suite's requirements.

A figure measured by a cyclictest thread that ran at SCHED_OTHER, beside a stray SCHED_FIFO
99 task, under RT throttling or on another kernel than the flavour names says nothing about
the kernel under test, yet reads like a result. The board reports its state with one shell
command (:func:`snapshot_command`, run in the background mid-window, so it is cheap), the
host parses it strictly (:func:`parse_snapshot`) and checks it (:func:`check`). A run whose
conditions do not match is void (:class:`RunNotValid`): an error, never a pass or a fail. A
fact the board cannot report is *unknown*, never taken as met.
"""

import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

import attr

from rtlab.kernel.spec import THRESHOLDS_FLAVOURS, load_flavours
from rtlab.measure.sysinfo import cpu_list

# the marker of rtlab.measure.window (which imports this module, so it cannot be imported)
MARK = "rtlab-evidence:"
SECTION = "conditions"
# no "-": "<tag>-end" must never be a tag of its own
_TAG = re.compile(r"[A-Za-z0-9_]+")

POLICIES = {0: "SCHED_OTHER", 1: "SCHED_FIFO", 2: "SCHED_RR", 3: "SCHED_BATCH",
            5: "SCHED_IDLE", 6: "SCHED_DEADLINE"}
SCHED_FIFO, SCHED_RR, SCHED_DEADLINE = 1, 2, 6
MEASURING_POLICIES = {"fifo": SCHED_FIFO, "rr": SCHED_RR}
PF_KTHREAD = 0x00200000
# the kernel keeps a task's name in 16 bytes with the terminating NUL
COMM_LEN = 15
# a cooling device of these types slows or idles the CPUs (cpufreq-cpu0,
# thermal-cpufreq-0, Processor, thermal-idle-0, intel_powerclamp); a fan or a GPU's does not
CPU_COOLING = ("cpufreq", "processor", "cpu", "idle", "powerclamp")
# The kernel's own per-CPU threads that must run at top priority (a stopper thread, the
# lockup detector, idle injection, CPU hotplug; on PREEMPT_RT the timer softirq and RCU
# callback/boost threads, which a lab may raise with rcutree.kthread_prio). They are part of
# the kernel under test: what they cost a measuring thread is what the kernel costs. Only a
# kernel thread matches (a user task cannot take these names to slip past the check).
KERNEL_RT_THREADS = ("migration/*", "watchdog/*", "idle_inject/*", "cpuhp/*", "ktimers/*",
                     "rcuc/*", "rcub/*")

MET, MISMATCH, UNKNOWN = "met", "mismatch", "unknown"


class ConditionsUnreadable(Exception):
    """The board's report of its conditions is missing, cut short or garbled; the message
    names the line."""


# ------------------------------------------------------------ the board's side ----


def snapshot_command(tag: str, *, first: str | None = None) -> str:
    """One shell command line (POSIX sh: dash, busybox ash) that prints the board's
    conditions as the section ``rtlab-evidence:conditions-<tag>`` ... ``-end``.

    It runs mid-window beside the measurement, so it forks little: the tasks' stat and
    affinities are each read by one grep and one sed over one glob, the rest by the shell;
    a fact that cannot be read is printed as ``unknown`` or left out, never guessed.
    ``first``: a process whose tasks are read before all the others (``/proc/PID``: the
    measuring program, whose threads may not outlive a slow board's walk of every task).
    """
    if not _TAG.fullmatch(tag):
        raise ValueError(f"a conditions tag is letters, digits or _, got {tag!r}")
    cpu = "/sys/devices/system/cpu"
    dma = "/dev/cpu_dma_latency"

    def tasks(glob: str) -> list[str]:
        return [
            # one grep reads them all, a block at a time: the shell's read takes a byte at
            # a time, which cost the idle virtual i.MX6Q 6.5 s a check; a task that ends
            # between the glob and the read is left out
            f"grep -H '' {glob}/task/[0-9]*/stat | sed -n "
            "'s#^/proc/\\([0-9]*\\)/task/\\([0-9]*\\)/stat:#task \\1 \\2 #p'",
            f"grep -H '^Cpus_allowed_list:' {glob}/task/[0-9]*/status | sed -n "
            "'s#^/proc/\\([0-9]*\\)/task/\\([0-9]*\\)/status:Cpus_allowed_list:[[:space:]]*"
            "#allowed \\1 \\2 #p'"]

    parts = [
        f"echo {MARK}{SECTION}-{tag}",
        # when it began and ended, by the board's clock: what the check cost the board
        "read u i </proc/uptime && printf 'began %s\\n' \"$u\"",
        *(tasks(first) if first else []),
        # reading the device gives the aggregated target (opening it adds a request at the
        # default, "no constraint", so the check does not change what it reads)
        f"v=$(od -An -t d4 {dma} || hexdump -e '1/4 \"%d\"' {dma}); "
        "printf 'dma %s\\n' \"${v:-unknown}\"",
        f"for c in {cpu}/cpu[0-9]*; do n=${{c##*/cpu}}; g=; f=; m=; "
        'read -r g <"$c/cpufreq/scaling_governor"; read -r f <"$c/cpufreq/scaling_cur_freq"; '
        'read -r m <"$c/cpufreq/cpuinfo_max_freq"; '
        "printf 'cpufreq %s %s %s %s\\n' \"$n\" \"${g:-unknown}\" \"${f:-unknown}\" "
        '"${m:-unknown}"; '
        'for s in "$c"/cpuidle/state[0-9]*; do [ -d "$s" ] || continue; a=; l=; x=; '
        'read -r a <"$s/name"; read -r l <"$s/latency"; read -r x <"$s/disable"; '
        "printf 'idle %s %s %s %s %s\\n' \"$n\" \"${s##*/state}\" \"${l:-unknown}\" "
        '"${x:-unknown}" "${a:-unknown}"; done; done',
        "for d in /sys/class/thermal/cooling_device[0-9]*; do [ -d \"$d\" ] || continue; "
        't=; v=; read -r t <"$d/type"; read -r v <"$d/cur_state"; '
        "printf 'cooling %s %s %s\\n' \"${d##*device}\" \"${v:-unknown}\" \"${t:-unknown}\"; "
        "done",
        # not read: the shell reads a byte at a time, and an integer sysctl answers a read
        # past its start with end of file ("9" of 950000)
        "r=$(cat /proc/sys/kernel/sched_rt_runtime_us); "
        "printf 'rt_runtime_us %s\\n' \"${r:-unknown}\"",
        "if [ -e /sys/kernel/realtime ]; then r=; read -r r </sys/kernel/realtime; "
        "printf 'realtime %s\\n' \"${r:-unknown}\"; else echo realtime absent; fi",
        # the same text as uname -v, without a fork
        "v=; read -r v </proc/sys/kernel/version || v=$(uname -v); "
        "printf 'version %s\\n' \"${v:-unknown}\"",
        "read -r v </proc/cmdline && printf 'cmdline %s\\n' \"$v\"",
        f"read -r v <{cpu}/isolated && printf 'isolated %s\\n' \"$v\"",
        f"read -r v <{cpu}/nohz_full && printf 'nohz_full %s\\n' \"$v\"",
        # every task last: the walk is what takes a slow board seconds, and the facts above
        # are then read at the check's time, not after it
        *tasks("/proc/[0-9]*"),
        "read u i </proc/uptime && printf 'ended %s\\n' \"$u\"",
        f"echo {MARK}{SECTION}-{tag}-end",
    ]
    return "{ " + "; ".join(parts) + "; } 2>/dev/null"


# ------------------------------------------------------------------ the report ----


@attr.frozen
class Task:
    """One task (thread) of the board as /proc/<pid>/task/<tid>/stat and status show it."""

    pid: int
    tid: int
    comm: str
    kernel_thread: bool
    cpu: int
    """The CPU it last ran on."""
    policy: int
    priority: int
    """Its real-time priority (0 outside SCHED_FIFO/SCHED_RR)."""
    allowed: tuple[int, ...] | None
    """The CPUs it may run on (None: not read, it started or ended between the reads)."""

    @property
    def policy_name(self) -> str:
        return POLICIES.get(self.policy, f"policy {self.policy}")

    @property
    def scheduling(self) -> str:
        """``SCHED_FIFO 99``: the policy and priority as a message shows them."""
        return f"{self.policy_name} {self.priority}"

    @property
    def named(self) -> str:
        """``stress (pid 77)``, the thread's id too when it is not the main thread."""
        ids = f"pid {self.pid}" if self.tid == self.pid else f"pid {self.pid} tid {self.tid}"
        return f"{self.comm} ({ids})"


@attr.frozen
class IdleState:
    index: int
    name: str
    latency_us: int | None
    """Its exit latency as cpuidle states it."""
    disabled: bool | None


@attr.frozen
class CpuState:
    cpu: int
    governor: str | None
    cur_khz: int | None
    max_khz: int | None
    idle_states: tuple[IdleState, ...] | None
    """None: the CPU has no cpuidle states (no driver, or a kernel without cpuidle)."""


@attr.frozen
class Cooling:
    index: int
    type: str | None
    state: int | None

    @property
    def cools_cpus(self) -> bool:
        return self.type is not None and any(word in self.type.lower() for word in CPU_COOLING)


@attr.frozen
class Snapshot:
    """What :func:`snapshot_command` printed; None is a fact the board did not report."""

    tag: str
    tasks: tuple[Task, ...]
    dma_latency_us: int | None
    cpus: tuple[CpuState, ...]
    cooling: tuple[Cooling, ...]
    rt_runtime_us: int | None
    realtime: str | None
    """/sys/kernel/realtime's content, ``absent`` when the file does not exist."""
    kernel_version: str | None
    """``uname -v``."""
    cmdline: str | None
    isolated: tuple[int, ...] | None
    nohz_full: str | None
    seconds: float | None = None
    """How long the board took to print it (its uptime at the end less at the start)."""

    def cpu(self, number: int) -> CpuState | None:
        return next((state for state in self.cpus if state.cpu == number), None)


def parse_snapshot(lines: Iterable[str], tag: str | None = None) -> Snapshot:
    """The section of :func:`snapshot_command` with ``tag`` (None: the only one) in the
    board's output; :class:`ConditionsUnreadable` when it is missing, cut short or has a
    line it does not know."""
    body, tag = _section([line.rstrip("\r") for line in lines], tag)
    tasks: dict[tuple[int, int], Task] = {}
    allowed: dict[tuple[int, int], tuple[int, ...]] = {}
    freq: dict[int, tuple[str | None, int | None, int | None]] = {}
    idle: dict[int, list[IdleState]] = {}
    cooling: list[Cooling] = []
    single: dict[str, str] = {}
    for line in body:
        if not line.strip():
            continue
        key, _, rest = line.partition(" ")
        try:
            if key == "task":
                task = _task(rest)
                tasks[task.pid, task.tid] = task
            elif key == "allowed":
                pid, tid, cpus = _fields(rest, 3, last_may_be_empty=True)
                allowed[int(pid), int(tid)] = cpu_list(cpus)
            elif key == "cpufreq":
                number, governor, cur, top = _fields(rest, 4)
                freq[_int(number)] = (_unknown(governor), _maybe_int(cur), _maybe_int(top))
            elif key == "idle":
                number, index, latency, disable, name = _fields(rest, 5)
                idle.setdefault(_int(number), []).append(IdleState(
                    _int(index), name, _maybe_int(latency),
                    None if disable == "unknown" else _int(disable) != 0))
            elif key == "cooling":
                index, state, kind = _fields(rest, 3)
                cooling.append(Cooling(_int(index), _unknown(kind), _maybe_int(state)))
            elif key in ("dma", "rt_runtime_us", "realtime", "version", "cmdline",
                         "isolated", "nohz_full", "began", "ended"):
                if key in single:
                    raise ValueError(f"a second {key!r} line")
                single[key] = rest
            else:
                raise ValueError(f"unknown key {key!r}")
        except ValueError as error:
            raise ConditionsUnreadable(f"the board's conditions ({tag}) have a garbled line "
                                       f"({error}): {line!r}") from None
    if set(idle) - set(freq):
        raise ConditionsUnreadable(f"the board's conditions ({tag}) have idle states of CPU "
                                   f"{min(set(idle) - set(freq))}, which has no cpufreq line")
    return Snapshot(
        tag=tag,
        tasks=tuple(attr.evolve(task, allowed=allowed.get(key))
                    for key, task in sorted(tasks.items())),
        dma_latency_us=_single(single, "dma", tag, _maybe_int),
        cpus=tuple(CpuState(number, *freq[number],
                            tuple(idle[number]) if number in idle else None)
                   for number in sorted(freq)),
        cooling=tuple(sorted(cooling, key=lambda device: device.index)),
        rt_runtime_us=_single(single, "rt_runtime_us", tag, _maybe_int),
        realtime=_single(single, "realtime", tag, _unknown),
        kernel_version=_single(single, "version", tag, _unknown),
        cmdline=single.get("cmdline"),
        isolated=_single(single, "isolated", tag, cpu_list),
        nohz_full=single.get("nohz_full"),
        seconds=_seconds(single, tag),
    )


def _seconds(single: Mapping[str, str], tag: str) -> float | None:
    """How long the snapshot took the board (None where its clock was not read)."""
    try:
        began, ended = (float(single[key]) if key in single else None
                        for key in ("began", "ended"))
    except ValueError:
        raise ConditionsUnreadable(f"the board's conditions ({tag}) have a garbled uptime: "
                                   f"{single.get('began')!r}, {single.get('ended')!r}") from None
    return None if began is None or ended is None else round(ended - began, 2)


def _section(lines: Sequence[str], tag: str | None) -> tuple[list[str], str]:
    begin = re.compile(re.escape(f"{MARK}{SECTION}-") + f"({_TAG.pattern})")
    starts = [(index, match.group(1)) for index, line in enumerate(lines)
              if (match := begin.fullmatch(line.strip()))
              and (tag is None or match.group(1) == tag)]
    what = "the board's conditions" + (f" ({tag})" if tag else "")
    if not starts:
        raise ConditionsUnreadable(f"{what} are missing from its output: {list(lines[-5:])}")
    if len(starts) > 1:
        raise ConditionsUnreadable(f"{what} are in its output {len(starts)} times "
                                   f"({', '.join(found for _, found in starts)})")
    first, tag = starts[0]
    end = f"{MARK}{SECTION}-{tag}-end"
    last = next((index for index in range(first + 1, len(lines))
                 if lines[index].strip() == end), None)
    if last is None:
        raise ConditionsUnreadable(f"the board's conditions ({tag}) are cut short: no "
                                   f"{end!r} line after {len(lines) - first - 1} lines")
    return list(lines[first + 1:last]), tag


def _task(rest: str) -> Task:
    pid, tid, stat = (rest.split(" ", 2) + ["", ""])[:3]
    # comm is in parentheses and may itself hold spaces and parentheses: the last ")" ends it
    head, paren, tail = stat.rpartition(")")
    stat_tid, opened, comm = head.partition(" (")
    fields = tail.split()
    if not (paren and opened and stat_tid == tid and len(fields) >= 39):
        raise ValueError("not 'task PID TID' and a /proc stat line of that task")
    # fields[0] is stat's field 3 (state): field N is fields[N - 3]
    flags, cpu, priority, policy = (_int(fields[n - 3]) for n in (9, 39, 40, 41))
    return Task(pid=_int(pid), tid=_int(tid), comm=comm, kernel_thread=bool(flags & PF_KTHREAD),
                cpu=cpu, policy=policy, priority=priority, allowed=None)


def _fields(rest: str, count: int, *, last_may_be_empty: bool = False) -> list[str]:
    fields = rest.split(None, count - 1)
    if last_may_be_empty and len(fields) == count - 1:
        fields.append("")
    if len(fields) != count:
        raise ValueError(f"expected {count} fields")
    return fields


def _int(text: str) -> int:
    if not re.fullmatch(r"-?\d+", text.strip()):
        raise ValueError(f"not a number: {text!r}")
    return int(text)


def _maybe_int(text: str) -> int | None:
    return None if text.strip() == "unknown" else _int(text)


def _unknown(text: str) -> str | None:
    text = text.strip()
    return None if text in ("", "unknown") else text


def _single(single: Mapping[str, str], key: str, tag: str,
            parse: Callable[[str], Any]) -> Any:  # noqa: ANN401
    if key not in single:
        return None
    try:
        return parse(single[key])
    except ValueError as error:
        raise ConditionsUnreadable(f"the board's conditions ({tag}) have a garbled line "
                                   f"({error}): {f'{key} {single[key]}'!r}") from None


# ------------------------------------------------------------- the requirements ----


_CHOICES: dict[str, tuple[str | None, ...]] = {
    "measuring_policy": (*MEASURING_POLICIES, None),
    "rt_throttling": ("off", "on", None),
    "throttled": ("never", None),
    "other_rt_tasks": ("below", None),
    "isolation": ("honoured", None),
    "kernel": ("flavour", None),
    "checked": ("always", None),
}


@attr.frozen
class Requirements:
    """What a run must have been to count (suite.yaml's ``requirements:``); None where a
    requirement is not checked."""

    measuring_policy: str | None = "fifo"
    """The measuring threads' policy (their priority is the suite's cyclictest priority);
    None: the measuring threads are not checked (their number, policy and CPUs)."""
    cpu_dma_latency_us: int | None = 0
    """The most /dev/cpu_dma_latency may allow."""
    governor: str | None = "performance"
    """The cpufreq governor of every measuring CPU."""
    rt_throttling: str | None = "off"
    """``off``: sched_rt_runtime_us is -1 (``on`` is not checked)."""
    idle_exit_latency_max_us: int | None = None
    """No enabled idle state of a measuring CPU may take longer to leave."""
    throttled: str | None = "never"
    """``never``: no CPU cooling device throttling at the check."""
    other_rt_tasks: str | None = "below"
    """``below``: no other task may run at or above the measuring priority on a measuring
    CPU, but the kernel threads of ``allowed_rt_tasks``."""
    isolation: str | None = "honoured"
    """``honoured``: no user task but the measuring program on an isolated measuring CPU."""
    kernel: str | None = "flavour"
    """``flavour``: PREEMPT_RT exactly when the job's flavour is an RT one."""
    allowed_rt_tasks: tuple[str, ...] = KERNEL_RT_THREADS
    """Shell-style patterns of the kernel threads exempt from ``other_rt_tasks``."""
    checked: str | None = "always"
    """``always``: a run that no check reached (the program ended before either) is no
    pass: measured again once, then an error; None: it is judged on what it measured and
    its record says it was not checked (a board too slow to check, declared so)."""

    def as_dict(self) -> dict[str, Any]:
        facts = attr.asdict(self)
        facts["allowed_rt_tasks"] = list(self.allowed_rt_tasks)
        return facts

    def changed(self, changes: Mapping[str, object]) -> "Requirements":
        """These requirements with ``changes`` (validated as :func:`requirement_value`)."""
        return attr.evolve(self, **{key: requirement_value(key, value)
                                    for key, value in changes.items()})


REQUIREMENT_KEYS = tuple(field.name for field in attr.fields(Requirements))


def requirement_value(key: str, value: object) -> Any:  # noqa: ANN401
    """``value`` for requirement ``key`` as :class:`Requirements` holds it; ValueError for an
    unknown key or a value that does not fit it (the message follows the key's name)."""
    if key not in REQUIREMENT_KEYS:
        raise ValueError(f"is not a requirement (expected one of: {', '.join(REQUIREMENT_KEYS)})")
    if key in _CHOICES:
        if value not in _CHOICES[key] or isinstance(value, bool):
            shown = ", ".join("null" if choice is None else choice for choice in _CHOICES[key])
            raise ValueError(f"must be one of {shown}, got {value!r}")
        return value
    if key in ("cpu_dma_latency_us", "idle_exit_latency_max_us"):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < 0):
            raise ValueError(f"must be an integer >= 0 (µs) or null, got {value!r}")
        return value
    if key == "governor":
        if value is not None and not (isinstance(value, str)
                                      and re.fullmatch(r"[a-z0-9_]+", value)):
            raise ValueError(f"must be a cpufreq governor's name or null, got {value!r}")
        return value
    # allowed_rt_tasks
    if not isinstance(value, list | tuple) or not all(
            isinstance(pattern, str) and pattern.strip() for pattern in value):
        raise ValueError(f"must be a list of task name patterns, got {value!r}")
    return tuple(value)


@attr.frozen
class MeasuringThreads:
    """How to find the measuring threads: the threads of ``program`` other than its main
    thread (cyclictest's main thread only waits), whatever their policy, so that one that
    runs at SCHED_OTHER is found and reported. With ``-S`` or ``-t -a CPUS`` each is pinned
    to one CPU of ``cpus``."""

    program: str
    priority: int
    cpus: tuple[int, ...] = attr.field(converter=tuple)

    @cpus.validator
    def _distinct(self, _: object, cpus: tuple[int, ...]) -> None:
        if not cpus or len(set(cpus)) != len(cpus):
            raise ValueError(f"the measuring CPUs must be distinct and not none, got {cpus}")

    @property
    def comm(self) -> str:
        return self.program.rsplit("/", 1)[-1][:COMM_LEN]

    def as_dict(self) -> dict[str, Any]:
        return {"program": self.program, "priority": self.priority, "cpus": list(self.cpus)}


def preempt_rt_flavour(flavour: str) -> bool:
    """Whether ``flavour`` is an RT kernel's: thresholds.yaml's ``rt``, or a flavour of
    kernel/flavours.yaml judged by it (``preempt-rt``...); any other is not."""
    if flavour in THRESHOLDS_FLAVOURS:
        return flavour == "rt"
    kernel_flavour = load_flavours().get(flavour)
    return kernel_flavour is not None and kernel_flavour.thresholds == "rt"


# ------------------------------------------------------------------- the check ----


@attr.frozen
class Check:
    """One requirement against what the board showed."""

    name: str
    required: str
    found: str
    status: str
    """:data:`MET`, :data:`MISMATCH` or :data:`UNKNOWN`."""
    problems: tuple[str, ...] = ()
    """Each mismatch, as the error names it."""


@attr.frozen
class Conditions:
    """Every checked requirement of a run, over one snapshot or several."""

    checks: tuple[Check, ...]
    snapshots: tuple[str, ...]
    requirements: Requirements
    measuring: MeasuringThreads
    flavour: str
    seconds: tuple[float | None, ...] = ()
    """How long each snapshot took the board, in the order of ``snapshots``."""

    @property
    def mismatches(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if check.status == MISMATCH)

    @property
    def unknowns(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if check.status == UNKNOWN)

    @property
    def valid(self) -> bool:
        return not self.mismatches

    def facts(self) -> dict[str, Any]:
        """For the result record: each checked requirement beside what was found."""
        return {"snapshots": list(self.snapshots), "flavour": self.flavour,
                "snapshot_seconds": dict(zip(self.snapshots, self.seconds, strict=False)),
                "measuring": self.measuring.as_dict(),
                "requirements": self.requirements.as_dict(),
                "checks": {check.name: {"required": check.required, "found": check.found,
                                        "status": check.status}
                           for check in self.checks}}

    def error_message(self) -> str:
        problems = [problem for check in self.mismatches for problem in check.problems]
        return "the run is not what it claims: " + "; ".join(problems)


class RunNotValid(Exception):
    """The board's conditions did not match the requirements: the run proves nothing."""

    def __init__(self, conditions: Conditions) -> None:
        if conditions.valid:
            raise ValueError("conditions without a mismatch do not void a run")
        super().__init__(conditions.error_message())
        self.conditions = conditions


def check(requirements: Requirements, snapshot: Snapshot, *, measuring: MeasuringThreads,
          flavour: str) -> Conditions:
    """Every requirement that is checked against one snapshot."""
    program = _program_tasks(snapshot, measuring)
    threads = tuple(task for task in program if task.tid != task.pid)
    checks = [] if requirements.measuring_policy is None else [
        _measuring_threads(snapshot, measuring, program, threads),
        _measuring_policy(requirements, measuring, threads),
        _measuring_affinity(measuring, threads)]
    if requirements.kernel is not None:
        checks.append(_kernel(snapshot, flavour))
    if requirements.rt_throttling == "off":
        checks.append(_rt_throttling(snapshot))
    if requirements.cpu_dma_latency_us is not None:
        checks.append(_dma_latency(snapshot, requirements.cpu_dma_latency_us))
    if requirements.governor is not None:
        checks.append(_governor(snapshot, measuring, requirements.governor))
    if requirements.idle_exit_latency_max_us is not None:
        checks.append(_idle(snapshot, measuring, requirements.idle_exit_latency_max_us))
    if requirements.throttled is not None:
        checks.append(_throttled(snapshot))
    if requirements.other_rt_tasks is not None:
        checks.append(_other_rt_tasks(snapshot, requirements, measuring, program))
    if requirements.isolation is not None:
        checks.append(_isolation(snapshot, measuring, program))
    return Conditions(tuple(checks), (snapshot.tag,), requirements, measuring, flavour,
                      (snapshot.seconds,))


def check_all(requirements: Requirements, snapshots: Sequence[Snapshot], *,
              measuring: MeasuringThreads, flavour: str) -> Conditions:
    """:func:`check` of each snapshot (the window's early and late ones), merged."""
    return merge(*(check(requirements, snapshot, measuring=measuring, flavour=flavour)
                   for snapshot in snapshots))


def merge(*conditions: Conditions) -> Conditions:
    """One verdict over several snapshots: a mismatch in any is a mismatch, and a
    requirement is met only where every snapshot met it."""
    if not conditions:
        raise ValueError("nothing to merge")
    first = conditions[0]
    for other in conditions[1:]:
        if (other.requirements, other.measuring, other.flavour) != (
                first.requirements, first.measuring, first.flavour):
            raise ValueError("conditions checked against different requirements do not merge")
    if len(conditions) == 1:
        return first
    tags = tuple(tag for one in conditions for tag in one.snapshots)
    names = list(dict.fromkeys(check.name for one in conditions for check in one.checks))
    merged = []
    for name in names:
        found = [(one.snapshots, check) for one in conditions for check in one.checks
                 if check.name == name]
        statuses = {check.status for _, check in found}
        status = MISMATCH if MISMATCH in statuses else UNKNOWN if UNKNOWN in statuses else MET
        texts = {check.found for _, check in found}
        found_text = (next(iter(texts)) if len(texts) == 1 else
                      "; ".join(f"{'+'.join(at)}: {check.found}" for at, check in found))
        where: dict[str, list[str]] = {}
        for at, check in found:
            for problem in check.problems:
                where.setdefault(problem, []).extend(at)
        problems = tuple(f"{problem} (at the {'+'.join(at)} check)"
                         for problem, at in where.items())
        merged.append(Check(name, found[0][1].required, found_text, status, problems))
    return Conditions(tuple(merged), tags, first.requirements, first.measuring, first.flavour,
                      tuple(seconds for one in conditions for seconds in one.seconds))


def _verdict(name: str, required: str, found: str, problems: Sequence[str],
             unknown: bool) -> Check:
    status = MISMATCH if problems else UNKNOWN if unknown else MET
    return Check(name, required, found, status, tuple(problems))


def _measuring_tasks(snapshot: Snapshot, measuring: MeasuringThreads) -> tuple[Task, ...]:
    """The program's threads but its main one."""
    return tuple(task for task in _program_tasks(snapshot, measuring) if task.tid != task.pid)


def _program_tasks(snapshot: Snapshot, measuring: MeasuringThreads) -> tuple[Task, ...]:
    pids = {task.pid for task in snapshot.tasks
            if task.tid == task.pid and task.comm == measuring.comm and not task.kernel_thread}
    return tuple(task for task in snapshot.tasks if task.pid in pids)


def _cpus(cpus: Iterable[int] | None) -> str:
    return "?" if cpus is None else ",".join(map(str, sorted(cpus))) or "none"


def _measuring_threads(snapshot: Snapshot, measuring: MeasuringThreads,
                       program: Sequence[Task], threads: Sequence[Task]) -> Check:
    wanted = len(measuring.cpus)
    required = (f"{wanted} measuring thread(s) of {measuring.program}, one per CPU "
                f"{_cpus(measuring.cpus)}")
    pids = sorted({task.pid for task in program})
    found = (f"{len(threads)} thread(s) in {len(pids)} process(es) "
             f"(pid {', '.join(map(str, pids))})" if pids else "none")
    problems = []
    if not threads:
        problems.append(f"no measuring thread of {measuring.program} was running at the check")
    elif len(pids) > 1:
        problems.append(f"{len(pids)} {measuring.program} processes were running (pids "
                        f"{', '.join(map(str, pids))}), the case runs one")
    elif len(threads) != wanted:
        problems.append(f"{len(threads)} measuring threads of {measuring.program} were "
                        f"running, the case requires {wanted} (one per CPU "
                        f"{_cpus(measuring.cpus)})")
    return _verdict("measuring_threads", required, found, problems, unknown=False)


def _measuring_policy(requirements: Requirements, measuring: MeasuringThreads,
                      threads: Sequence[Task]) -> Check:
    policy = MEASURING_POLICIES[requirements.measuring_policy]
    required = f"{POLICIES[policy]} {measuring.priority}"
    problems = [f"measuring thread {task.tid} on CPU{task.cpu} ran at {task.scheduling}, "
                f"case requires {required}"
                for task in threads if (task.policy, task.priority) != (policy, measuring.priority)]
    found = ", ".join(sorted({task.scheduling for task in threads})) or "no measuring thread"
    return _verdict("measuring_policy", required, found, problems, unknown=not threads)


def _measuring_affinity(measuring: MeasuringThreads, threads: Sequence[Task]) -> Check:
    required = f"each thread pinned to its own CPU of {_cpus(measuring.cpus)}"
    problems = []
    pinned: dict[int, list[int]] = {}
    for task in threads:
        if task.allowed is None:
            continue
        if len(task.allowed) != 1:
            problems.append(f"measuring thread {task.tid} may run on CPUs "
                            f"{_cpus(task.allowed)}, case requires it pinned to one CPU of "
                            f"{_cpus(measuring.cpus)}")
        elif task.allowed[0] not in measuring.cpus:
            problems.append(f"measuring thread {task.tid} is pinned to CPU{task.allowed[0]}, "
                            f"which the case does not measure (CPUs {_cpus(measuring.cpus)})")
        else:
            pinned.setdefault(task.allowed[0], []).append(task.tid)
    unknown = any(task.allowed is None for task in threads) or not threads
    for cpu, tids in sorted(pinned.items()):
        if len(tids) > 1:
            problems.append(f"measuring threads {', '.join(map(str, tids))} are all pinned to "
                            f"CPU{cpu}, case requires one per CPU")
    if threads and not unknown:
        problems += [f"no measuring thread was pinned to CPU{cpu}"
                     for cpu in measuring.cpus if cpu not in pinned]
    found = "; ".join(f"{task.tid}: CPUs {_cpus(task.allowed)}" for task in threads) or (
        "no measuring thread")
    return _verdict("measuring_affinity", required, found, problems, unknown)


def _kernel(snapshot: Snapshot, flavour: str) -> Check:
    version, realtime = snapshot.kernel_version, snapshot.realtime
    found = (f"uname -v {version!r}" if version is not None else "uname -v unknown") + (
        f", /sys/kernel/realtime {realtime or 'unknown'}")
    in_version = version is not None and "PREEMPT_RT" in version
    problems = []
    if preempt_rt_flavour(flavour):
        required = (f"PREEMPT_RT (flavour {flavour}): in uname -v, and /sys/kernel/realtime "
                    "1 where the kernel has it")
        # the RT patch set's /sys/kernel/realtime is not in every RT kernel (a mainline
        # one built with PREEMPT_RT may lack it): absent, uname -v decides
        if (version is not None and not in_version) or realtime not in (None, "1", "absent"):
            problems.append(f"flavour {flavour} requires a PREEMPT_RT kernel: {found}")
        unknown = version is None
    else:
        required = f"no PREEMPT_RT (flavour {flavour})"
        if in_version or realtime == "1":
            problems.append(f"flavour {flavour} requires a kernel without PREEMPT_RT: {found}")
        # uname -v names the model the kernel was built with: it alone shows a kernel is
        # not RT, whatever /sys/kernel/realtime says
        unknown = version is None
    return _verdict("kernel", required, found, problems, unknown)


def _rt_throttling(snapshot: Snapshot) -> Check:
    runtime = snapshot.rt_runtime_us
    problems = [] if runtime in (None, -1) else [
        f"RT throttling on: sched_rt_runtime_us {runtime}, case requires -1 (off)"]
    return _verdict("rt_throttling", "sched_rt_runtime_us -1 (off)",
                    "unknown" if runtime is None else f"sched_rt_runtime_us {runtime}",
                    problems, unknown=runtime is None)


def _dma_latency(snapshot: Snapshot, most_us: int) -> Check:
    value = snapshot.dma_latency_us
    problems = [] if value is None or value <= most_us else [
        f"/dev/cpu_dma_latency {value} µs, case requires {most_us}"]
    return _verdict("cpu_dma_latency", f"{most_us} µs or less",
                    "unreadable" if value is None else f"{value} µs", problems,
                    unknown=value is None)


def _governor(snapshot: Snapshot, measuring: MeasuringThreads, governor: str) -> Check:
    problems, shown, unknown = [], [], False
    for number in measuring.cpus:
        state = snapshot.cpu(number)
        if state is None or state.governor is None:
            unknown = True
            shown.append(f"CPU{number} no cpufreq")
            continue
        freq = (f" {state.cur_khz if state.cur_khz is not None else '?'}/"
                f"{state.max_khz if state.max_khz is not None else '?'} kHz")
        shown.append(f"CPU{number} {state.governor}{freq}")
        if state.governor != governor:
            problems.append(f"CPU{number} governor {state.governor}, case requires {governor}")
    return _verdict("governor", f"{governor} on CPU {_cpus(measuring.cpus)}", "; ".join(shown),
                    problems, unknown)


def _idle(snapshot: Snapshot, measuring: MeasuringThreads, most_us: int) -> Check:
    problems, shown, unknown = [], [], False
    for number in measuring.cpus:
        state = snapshot.cpu(number)
        if state is None or state.idle_states is None:
            unknown = True
            shown.append(f"CPU{number} no cpuidle states")
            continue
        enabled = []
        for idle in state.idle_states:
            if idle.disabled is None or (idle.latency_us is None and not idle.disabled):
                unknown = True
            if idle.disabled is False:
                latency = "?" if idle.latency_us is None else idle.latency_us
                enabled.append(f"{idle.name} {latency} µs")
                if idle.latency_us is not None and idle.latency_us > most_us:
                    problems.append(f"CPU{number} idle state {idle.name} (exit latency "
                                    f"{idle.latency_us} µs) enabled, case allows at most "
                                    f"{most_us} µs")
        shown.append(f"CPU{number} {', '.join(enabled) or 'none enabled'}")
    return _verdict("idle_exit_latency", f"no enabled idle state above {most_us} µs on CPU "
                    f"{_cpus(measuring.cpus)}", "; ".join(shown), problems, unknown)


def _throttled(snapshot: Snapshot) -> Check:
    devices = [device for device in snapshot.cooling if device.cools_cpus]
    problems = [f"thermal throttling: cooling device {device.index} ({device.type}) at state "
                f"{device.state}, case requires none"
                for device in devices if device.state is not None and device.state > 0]
    found = ", ".join(f"{device.type} {'?' if device.state is None else device.state}"
                      for device in devices) or "no CPU cooling device"
    return _verdict("throttled", "every CPU cooling device at state 0", found, problems,
                    unknown=not devices or any(device.state is None for device in devices))


def _other_rt_tasks(snapshot: Snapshot, requirements: Requirements,
                    measuring: MeasuringThreads, program: Sequence[Task]) -> Check:
    own = {task.tid for task in program}
    cpus = set(measuring.cpus)
    above, allowed = [], []
    for task in snapshot.tasks:
        # SCHED_DEADLINE runs before every SCHED_FIFO task, whatever the priority
        competes = task.policy == SCHED_DEADLINE or (
            task.policy in (SCHED_FIFO, SCHED_RR) and task.priority >= measuring.priority)
        if task.tid in own or not competes:
            continue
        if task.cpu not in cpus and not (task.allowed and cpus & set(task.allowed)):
            continue
        if task.kernel_thread and any(fnmatchcase(task.comm, pattern)
                                      for pattern in requirements.allowed_rt_tasks):
            allowed.append(task)
        else:
            above.append(task)
    problems = [f"another real-time task at or above the measuring priority: {task.named} "
                f"{task.scheduling} on CPU{task.cpu}" for task in above]
    found = ", ".join(f"{task.named} {task.scheduling} on CPU{task.cpu}" for task in above) or (
        "none")
    if allowed:
        found += f" (besides {len(allowed)} allowed kernel thread(s))"
    return _verdict("other_rt_tasks", f"no other task at or above "
                    f"{POLICIES[SCHED_FIFO]} {measuring.priority} on CPU "
                    f"{_cpus(measuring.cpus)} but the kernel threads "
                    f"{', '.join(requirements.allowed_rt_tasks)}", found, problems,
                    unknown=not snapshot.tasks)


def _isolation(snapshot: Snapshot, measuring: MeasuringThreads,
               program: Sequence[Task]) -> Check:
    required = "no user task but the measuring program on an isolated measuring CPU"
    if snapshot.isolated is None:
        return _verdict("isolation", required, "isolated CPUs unknown", [], unknown=True)
    isolated = set(snapshot.isolated)
    guarded = isolated & set(measuring.cpus)
    if not guarded:
        return _verdict("isolation", required, f"no measuring CPU is isolated (isolated: "
                        f"{_cpus(isolated)})", [], unknown=False)
    # the program's main thread is restricted to its threads' CPUs (cyclictest -a)
    own = {task.tid for task in program}
    problems = []
    for task in snapshot.tasks:
        if task.kernel_thread or task.tid in own:
            continue
        allowed = set(task.allowed or ())
        only = bool(allowed) and allowed <= isolated and bool(allowed & guarded)
        if task.cpu in guarded:
            problems.append(f"isolation broken: {task.named} on isolated CPU{task.cpu}")
        elif only:
            problems.append(f"isolation broken: {task.named} may run only on isolated CPUs "
                            f"{_cpus(task.allowed)}")
    found = (f"{len(problems)} user task(s) on isolated CPU {_cpus(guarded)}" if problems
             else f"no other user task on isolated CPU {_cpus(guarded)}")
    return _verdict("isolation", required, found, problems, unknown=False)


# ---------------------------------------------------------------- in the window ----

# the window's two checks: one soon after the program started its threads, one shortly
# before it ends, so that a change made while it runs (a thread reniced, throttling turned
# back on, a task started beside it) is seen as well as one made before
EARLY, LATE = "early", "late"
# the early check runs once the measuring threads have settled at their policy and
# priority (check_job), for at most this long into the window; the late one is this far
# from the window's end: a quarter of the window, at most EDGE_MAX_S (an hour's window is
# checked again 30 s before its end). Measured on the virtual i.MX6Q: cyclictest took most
# of a 3 s window under load to start its threads, so a fixed delay would miss them
EDGE_MAX_S = 30
# how long the checks wait for the program's threads: an emulated board under load can
# take seconds to start them
THREADS_WAIT_S = 120
MISSED = "missed"


def late_check_at(window_s: int) -> int:
    """When the late check runs: this many seconds after the program started (at once
    after the early check where that is later)."""
    if window_s < 1:
        raise ValueError(f"a window of {window_s} s cannot be checked")
    return window_s - max(1, min(window_s // 4, EDGE_MAX_S))


def check_job(measuring: MeasuringThreads, window_s: int, *, pidfile: str, out: str,
              done: str, policy: int = SCHED_FIFO) -> str:
    """The window's checks as one background shell job, started before the program: it
    waits for the program (its pid in ``pidfile``) to start its measuring threads and for
    them to settle at ``policy`` and the measuring priority (at most a quarter of the
    window, 30 s), takes the early snapshot, then the late one ahead of the program's end,
    into ``out``, and
    touches ``done``. A program that ended before a check leaves it ``missed`` (the
    program's own exit says why: a breach that stopped it at once, a failure), not a
    snapshot of a board without it.

    It runs at SCHED_FIFO 1: below every measuring thread, but above the loads, which on a
    loaded board (an emulated one most) would otherwise hold it off until the window is
    over. It costs the board one read of each task's stat and status per check."""
    late = late_check_at(window_s)
    # polled every 0.2 s, or every second where busybox's sleep takes no fraction (its
    # count then ends the wait sooner, never later); names of its own: the snapshot's
    # loops use the short ones
    poll = "{ sleep 0.2 || sleep 1; } 2>/dev/null"
    polls = THREADS_WAIT_S * 5
    settle_polls = 5 * max(1, min(window_s // 4, EDGE_MAX_S))
    body = (f"read rtlab_up rtlab_idle </proc/uptime; rtlab_t0=${{rtlab_up%.*}}; "
            f"w=0; while [ ! -s {pidfile} ] && [ $w -lt {polls} ]; do {poll}; "
            f"w=$((w+1)); done; program_pid=$(cat {pidfile}); w=0; "
            f"while [ -d /proc/$program_pid ] && [ $w -lt {polls} ]; do "
            f"set -- /proc/$program_pid/task/*; [ $# -gt {len(measuring.cpus)} ] && break; "
            f"{poll}; w=$((w+1)); done; "
            # settled: every measuring thread at the policy and priority it asks for (a
            # new thread starts as an ordinary one and raises itself once it first runs,
            # which a loaded emulated board delays), or the settling time is over and the
            # check shows whatever it found. Fields 40 and 41 of stat, counted after comm
            f"w=0; while [ -d /proc/$program_pid ] && [ $w -lt {settle_polls} ]; do "
            "settled=1; for t in /proc/$program_pid/task/[0-9]*; do "
            '[ "${t##*/}" = "$program_pid" ] && continue; s=; read -r s <"$t/stat" || '
            "{ settled=0; break; }; set -- ${s##*) }; "
            f'[ "${{38}}" = {measuring.priority} ] && [ "${{39}}" = {policy} ] || '
            "{ settled=0; break; }; done; [ $settled = 1 ] && break; "
            f"{poll}; w=$((w+1)); done; "
            f"if [ -d /proc/$program_pid ]; then "
            f"{snapshot_command(EARLY, first='/proc/$program_pid')}; "
            f"else echo {MARK}{SECTION}-{EARLY}-{MISSED}; fi; "
            "read rtlab_up rtlab_idle </proc/uptime; "
            f"rtlab_rest=$((rtlab_t0 + {late} - ${{rtlab_up%.*}})); "
            "[ $rtlab_rest -gt 0 ] && sleep $rtlab_rest; "
            f"if [ -d /proc/$program_pid ]; then "
            f"{snapshot_command(LATE, first='/proc/$program_pid')}; "
            f"else echo {MARK}{SECTION}-{LATE}-{MISSED}; fi; touch {done}")
    return f"chrt -f 1 sh -c {shlex.quote(body)} >{out} 2>&1 </dev/null &"


def prepare_command(requirements: Requirements) -> str:
    """What the board is set to before a window, where a requirement names a setting the
    board can take (RT throttling off, the governor): a lab's image may not have done it.
    The checks still read what the board had while the window ran."""
    commands = []
    if requirements.rt_throttling == "off":
        commands.append("echo -1 >/proc/sys/kernel/sched_rt_runtime_us")
    if requirements.governor is not None:
        commands.append("for g in /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor;"
                        f" do [ -e \"$g\" ] && echo {requirements.governor} >\"$g\"; done")
    return "{ " + "; ".join(commands) + "; } 2>/dev/null; true" if commands else "true"


@attr.frozen
class CaseConditions:
    """What one case requires of its window (the suite's requirements for its board and
    scenario), how its measuring threads are found, and the flavour its kernel must be."""

    requirements: Requirements
    measuring: MeasuringThreads
    flavour: str

    def judge(self, lines: Sequence[str]) -> Conditions | None:
        """The window's early and late checks, from the board's output, each where the
        program still ran (:func:`check_job`); None where it ended before either."""
        missed = {line.strip() for line in lines} & {
            f"{MARK}{SECTION}-{tag}-{MISSED}" for tag in (EARLY, LATE)}
        snapshots = [parse_snapshot(lines, tag) for tag in (EARLY, LATE)
                     if f"{MARK}{SECTION}-{tag}-{MISSED}" not in missed]
        if not snapshots:
            return None
        if len(snapshots) == 2 and (len(_measuring_tasks(snapshots[1], self.measuring))
                                    < len(_measuring_tasks(snapshots[0], self.measuring))):
            # the program was ending: cyclictest ends its threads together and then
            # writes its results (measured on the virtual Pi 3: the late check found the
            # process with none of its threads); that check shows nothing of the window
            snapshots = snapshots[:1]
        return check_all(self.requirements, snapshots, measuring=self.measuring,
                         flavour=self.flavour)
