"""The kernel's trace around a latency breach: set up on the board before a window, stopped
by cyclictest when a wake-up passes the case's ``max_us`` (``--breaktrace`` with
``--tracemark``), copied back bounded and compressed, and read into the few events that
explain it (which thread woke late, on which CPU, how late its timer fired, what ran there
instead).

Why cyclictest's break and an event trace rather than ``rtla timerlat``: the breach that
fails a case is cyclictest's own figure, so the trace must stop on it; rtla measures its
own timer threads, needs TIMERLAT_TRACER (Debian's stock kernels lack it) and, in
bookworm's rtla 6.1, has no automatic analysis to offer. Figures: docs/tracing.md.

The board side is one uploaded script (``/tmp/rtlab-trace.sh probe|arm|collect|send|disarm``),
so that only short commands cross the console, and nothing is printed while a window runs:
the trace goes to the kernel's ring buffer, whose size bounds what a case can bring back.
A board whose kernel cannot trace (no tracefs, tracing locked down, the tracer missing) is
no error: the case runs without the break, and its record says why no trace was possible.

Which cases trace is rtlab.verdict.trace_choice's to say (thresholds.yaml's ``trace:``,
the tier, the series' last stored verdict).
"""

import base64
import binascii
import gzip
import hashlib
import math
import re
from collections.abc import Sequence
from typing import Any, Protocol

import attr

# when a latency case traces: as thresholds.yaml's `trace:`, the tier and the series' last
# stored verdict say (auto), or every case, or none (`rtlab run --trace`, pytest
# --rt-trace); a campaign's case never (rtlab.verdict.trace_choice)
TRACE_CHOICES = ("auto", "always", "never")
TRACE_SCRIPT = "/tmp/rtlab-trace.sh"
TRACE_ON_BOARD = "/tmp/rtlab-trace.txt.gz"
MARK = "rtlab-trace:"
# where tracefs is mounted: its own mount point first, then debugfs's automount of it
TRACEFS_DIRS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
# cyclictest 2.4 stops the trace through debugfs (<debugfs>/tracing/tracing_on)
CYCLICTEST_TRACING = "/sys/kernel/debug/tracing"
# the events that say who ran on a CPU and why: scheduler switches and wake-ups, hard and
# soft interrupts, hrtimer expiries (cyclictest's own timer among them). Tracepoints are
# cheap even under emulation, unlike the function tracers (docs/tracing.md)
EVENTS = (
    "sched:sched_switch", "sched:sched_waking", "sched:sched_wakeup",
    "sched:sched_migrate_task", "irq:irq_handler_entry", "irq:irq_handler_exit",
    "irq:softirq_entry", "irq:softirq_exit", "timer:hrtimer_start",
    "timer:hrtimer_expire_entry", "timer:hrtimer_expire_exit",
)
# the hrtimer callback that wakes a task sleeping in clock_nanosleep (cyclictest's thread)
WAKEUP_TIMER = "hrtimer_wakeup"
# the tracers whose lines the reader knows (the kernel's default format): the events alone
# (nop), or with every kernel function (function: far costlier, docs/tracing.md). The
# latency tracers (wakeup_rt, irqsoff) and function_graph print other formats
TRACERS = ("nop", "function")
# the kernel's buffer per CPU: what the trace can hold before the breach (a ring: the
# newest events), and so what a case can bring back at most
DEFAULT_BUFFER_KB = 256
# how much of the buffer comes back: the newest lines (the breach is at the end)
DEFAULT_MAX_LINES = 20000
# what a case brings back at most, compressed: beyond it fewer lines come back
DEFAULT_MAX_BYTES = 256 * 1024
# how many lines of the breaching CPU the excerpt keeps before the trace mark
EXCERPT_LINES = 30
BREAK_THREAD = re.compile(r"^# Break thread: (\d+)\s*$")
BREAK_VALUE = re.compile(r"^# Break value: (\d+)\s*$")
TRACE_MARK = re.compile(r"hit latency threshold \((\d+) > (\d+)\)")


class Shell(Protocol):
    def run(self, cmd: str, *, timeout: float = 30.0, codec: str = "utf-8",
            decodeerrors: str = "strict") -> tuple[list[str], list[str], int]: ...

    def run_check(self, cmd: str, *, timeout: float = 30.0, codec: str = "utf-8",
                  decodeerrors: str = "strict") -> list[str]: ...

    def put_bytes(self, buf: bytes, remotefile: str) -> None: ...


class TraceError(ValueError):
    """A trace that cannot be read; the message starts with its source."""


@attr.frozen
class TraceSettings:
    """How a case traces: the kernel tracer besides the events, the buffer per CPU and how
    much of it comes back."""

    tracer: str = "nop"
    buffer_kb: int = DEFAULT_BUFFER_KB
    max_lines: int = DEFAULT_MAX_LINES
    max_bytes: int = DEFAULT_MAX_BYTES
    events: tuple[str, ...] = EVENTS

    def __attrs_post_init__(self) -> None:
        if self.tracer not in TRACERS:
            raise ValueError(f"tracer must be one of {', '.join(TRACERS)}, got "
                             f"{self.tracer!r}")
        for name in ("buffer_kb", "max_lines", "max_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for event in self.events:
            if not re.fullmatch(r"\w+:\w+", event):
                raise ValueError(f"not a trace event (system:name): {event!r}")


def breaktrace_us(max_us: float) -> int:
    """cyclictest's ``-b`` for a limit: it breaks on a wake-up *above* it, in whole µs, so
    a limit of 150.5 µs breaks above 151 µs: every break is then a wake-up the gate fails
    (one between 150.5 and 151 µs fails it untraced)."""
    if not max_us > 0 or not math.isfinite(max_us):
        raise ValueError(f"max_us must be a positive number of µs, got {max_us!r}")
    return math.ceil(max_us)


def board_script(settings: TraceSettings) -> str:
    """The board's side, one shell script: ``probe`` (where tracefs is and what it has),
    ``arm`` (the tracer and events on, an empty buffer, tracing on), ``collect`` (the
    newest lines of the stopped trace, compressed, with their size and SHA-256; its
    argument the line count), ``send`` (that file in base64) and ``disarm`` (tracing off,
    the buffer freed to its minimum)."""
    dirs = " ".join(TRACEFS_DIRS)
    events = " ".join(settings.events)
    return "\n".join([
        "#!/bin/sh",
        "# rtlab trace on breach, uploaded by rtlab.measure.trace: probe|arm|collect|send|disarm",
        f"T=; for d in {dirs}; do [ -w $d/tracing_on ] && {{ T=$d; break; }}; done",
        'case "$1" in',
        "probe)",
        f"  echo {MARK}dir=$T",
        f'  [ -n "$T" ] && echo {MARK}tracers=$(cat $T/available_tracers)',
        f'  [ -n "$T" ] && for e in {events}; do [ -d $T/events/${{e%%:*}}/${{e#*:}} ] '
        f"|| echo {MARK}no-event=$e; done",
        f"  [ -w {CYCLICTEST_TRACING}/tracing_on ] && echo {MARK}cyclictest=ok",
        # the kernel says why it has no tracing (e.g. "Tracing disabled due to lockdown")
        f"  dmesg | grep -m 3 -iE 'tracing disabled|lockdown|tracefs' | sed 's/^/{MARK}kernel=/'",
        "  true;;",
        "arm)",
        '  [ -n "$T" ] || exit 3',
        "  echo 0 >$T/tracing_on && echo nop >$T/current_tracer && echo >$T/set_event &&",
        f"  echo {settings.buffer_kb} >$T/buffer_size_kb && "
        f"echo {settings.tracer} >$T/current_tracer || exit 4",
        f"  for e in {events}; do echo $e >>$T/set_event || exit 5; done",
        "  echo >$T/trace && echo 1 >$T/tracing_on;;",
        "collect)",
        '  [ -n "$T" ] || exit 3',
        f"  echo 0 >$T/tracing_on; tail -n $2 $T/trace | gzip -c >{TRACE_ON_BOARD} &&",
        f"  echo {MARK}bytes=$(wc -c <{TRACE_ON_BOARD}) &&",
        f"  echo {MARK}sha256=$(sha256sum {TRACE_ON_BOARD} | cut -d' ' -f1);;",
        # text over the console: labgrid's get_bytes cannot bring binary back (below)
        "send)",
        f"  base64 {TRACE_ON_BOARD};;",
        "disarm)",
        '  [ -n "$T" ] || exit 0',
        "  echo 0 >$T/tracing_on; echo >$T/set_event; echo nop >$T/current_tracer;",
        f"  echo 1 >$T/buffer_size_kb; rm -f {TRACE_ON_BOARD};;",
        '*) echo "usage: $0 probe|arm|collect LINES|send|disarm" >&2; exit 2;;',
        "esac", "",
    ])


@attr.frozen
class TraceSupport:
    """What the board's kernel offers for a trace on breach: available, or why not."""

    available: bool
    reason: str | None
    """Why no trace is possible (None when it is)."""
    directory: str | None
    tracers: tuple[str, ...] = ()
    kernel: tuple[str, ...] = ()
    """What the kernel logged about tracing (a lockdown, tracing disabled)."""

    @classmethod
    def parse(cls, lines: Sequence[str], settings: TraceSettings) -> "TraceSupport":
        values: dict[str, list[str]] = {}
        for line in lines:
            if line.startswith(MARK) and "=" in line:
                key, _, value = line.removeprefix(MARK).partition("=")
                values.setdefault(key, []).append(value.strip())
        if "dir" not in values:
            raise TraceError(f"the board's trace probe printed no directory: {list(lines)[-5:]}")
        directory = values["dir"][0] or None
        tracers = tuple(" ".join(values.get("tracers", [""])).split())
        kernel = tuple(values.get("kernel", []))
        said = f" (the kernel: {'; '.join(kernel)})" if kernel else ""
        if directory is None:
            return cls(False, "no tracefs with a writable tracing_on at "
                       f"{' or '.join(TRACEFS_DIRS)}: the kernel has no tracing "
                       f"(CONFIG_FTRACE) or it is locked down{said}", None, (), kernel)
        missing = values.get("no-event", [])
        why = None
        if settings.tracer not in tracers:
            why = (f"the kernel has no {settings.tracer} tracer (available: "
                   f"{', '.join(tracers) or 'none'})")
        elif missing:
            why = f"the kernel has no trace event {', '.join(missing)}"
        elif "cyclictest" not in values:
            why = (f"{CYCLICTEST_TRACING}/tracing_on is not writable: cyclictest 2.4 "
                   "stops the trace through debugfs, which is not mounted there")
        return cls(why is None, why, directory, tracers, kernel)

    def facts(self) -> dict[str, Any]:
        return {"available": self.available, "reason": self.reason,
                "tracefs": self.directory, "tracers": list(self.tracers),
                "kernel_log": list(self.kernel)}


def prepare(shell: Shell, settings: TraceSettings) -> TraceSupport:
    """Upload the board's script, probe the kernel and, where it can trace, arm the trace
    (before the window: nothing of it crosses the console while cyclictest measures)."""
    shell.put_bytes(board_script(settings).encode(), TRACE_SCRIPT)
    support = TraceSupport.parse(shell.run_check(f"sh {TRACE_SCRIPT} probe"), settings)
    if not support.available:
        return support
    _, _, code = shell.run(f"sh {TRACE_SCRIPT} arm", timeout=60)
    if code != 0:
        return attr.evolve(support, available=False,
                           reason=f"arming the {settings.tracer} tracer and the events in "
                                  f"{support.directory} failed (exit {code})")
    return support


def disarm(shell: Shell) -> None:
    """Tracing off and the buffer back to its minimum, so the next case starts clean."""
    shell.run_check(f"sh {TRACE_SCRIPT} disarm", timeout=60)


@attr.frozen
class Break:
    """Where cyclictest broke the trace: the thread (its kernel task id) and the latency."""

    thread: int
    value_us: int


def parse_break(output: str) -> Break | None:
    """cyclictest's ``# Break thread:`` and ``# Break value:`` lines (printed at the end of a
    run that broke), None when it did not break; one line without the other is refused."""
    thread = value = None
    for line in output.splitlines():
        if match := BREAK_THREAD.match(line.strip()):
            thread = int(match.group(1))
        elif match := BREAK_VALUE.match(line.strip()):
            value = int(match.group(1))
    if thread is None and value is None:
        return None
    if thread is None or value is None:
        half = "a break value" if thread is None else "a break thread"
        raise TraceError(f"cyclictest printed {half} without the other: {output[-300:]!r}")
    return Break(thread, value)


@attr.frozen
class Collected:
    """The trace copied from the board: compressed text and how much of it there is."""

    data: bytes
    lines: int
    """How many lines it holds (the buffer's newest, at most the lines asked for)."""
    cut: bool
    """Fewer lines asked for than the settings allow, to stay within the byte bound."""


def collect(shell: Shell, settings: TraceSettings) -> Collected:
    """The newest lines of the stopped trace, compressed on the board (halved until they
    fit ``max_bytes``) and copied back as base64 text over the console, checked against
    the board's size and SHA-256.

    Not labgrid's ``get_bytes`` (XMODEM): labgrid 26 reads each XMODEM block with the
    pattern ``.{N}``, whose ``.`` matches no newline byte, so a block holding one (nearly
    every block of compressed data) is never read, and ``sz`` cancels the transfer."""
    lines = settings.max_lines
    while True:
        out = shell.run_check(f"sh {TRACE_SCRIPT} collect {lines}", timeout=300)
        facts = dict(line.removeprefix(MARK).split("=", 1) for line in out
                     if line.startswith(MARK) and "=" in line)
        if not facts.get("bytes", "").strip().isdigit() or len(facts.get("sha256", "")) != 64:
            raise TraceError(f"the board did not compress its trace: {out[-5:]}")
        size = int(facts["bytes"])
        if size <= settings.max_bytes or lines <= EXCERPT_LINES:
            break
        lines //= 2
    text = "".join(shell.run_check(f"sh {TRACE_SCRIPT} send", timeout=600))
    try:
        data = base64.b64decode(text, validate=True)
    except binascii.Error as error:
        raise TraceError(f"{TRACE_ON_BOARD}: garbled on its way back: {error}") from error
    if len(data) != size or hashlib.sha256(data).hexdigest() != facts["sha256"]:
        raise TraceError(f"{TRACE_ON_BOARD}: {len(data)} bytes came back of {size}, or "
                         "other bytes than the board's")
    try:
        held = gzip.decompress(data).count(b"\n")
    except (OSError, EOFError) as error:
        raise TraceError(f"{TRACE_ON_BOARD}: not gzip'd text: {error}") from error
    return Collected(data, held, lines < settings.max_lines)


# ------------------------------------------------------------------ reading ----

# the kernel's default trace format: "  comm-pid  [cpu] flags  seconds: event: fields";
# a comm may hold spaces and dashes, so the pid is the last "-N" before the CPU
_LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?"
                   r"\[(?P<cpu>\d+)\]\s+(?P<flags>\S+\s+)?(?P<ts>\d+\.\d+):\s+(?P<rest>.*)$")
_EVENT = re.compile(r"^(?P<event>\w+):\s?(?P<body>.*)$")
_FIELD = re.compile(r"(\w+)=(\S*)")


@attr.frozen
class Event:
    line_no: int
    comm: str
    pid: int
    cpu: int
    ts: float
    event: str
    body: str
    text: str

    @property
    def task(self) -> str:
        return f"{self.comm}-{self.pid}"

    def fields(self) -> dict[str, str]:
        return dict(_FIELD.findall(self.body))


def parse_trace(text: str, source: str) -> list[Event]:
    """The lines of a trace in the kernel's default text format (events, and the function
    tracer's calls as event ``function``); comment lines (``#``) are skipped, any other
    line is refused with its line number."""
    events = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise TraceError(f"{source}:{line_no}: not a trace line: {line[:100]!r}")
        # the function tracer's lines are "function <-caller", the events' "name: fields"
        event = _EVENT.match(match["rest"])
        name, body = (event["event"], event["body"]) if event else ("function", match["rest"])
        events.append(Event(line_no, match["comm"].strip(), int(match["pid"]), int(match["cpu"]),
                            float(match["ts"]), name, body, line.rstrip()))
    return events


@attr.frozen
class Breach:
    """What the trace says about the breach, for the record, the JUnit case and the report."""

    thread: int
    comm: str | None
    cpu: int | None
    latency_us: int | None
    limit_us: int | None
    woken_at: float | None
    woken_by: str | None
    timer_late_us: float | None
    """How long after it was due the thread's timer fired (the interrupt's part of the
    latency): its expiry's ``now`` less the ``expires`` it was started with."""
    switched_in_at: float | None
    marked_at: float | None
    ran_instead: tuple[tuple[str, float], ...]
    """Tasks that ran on the CPU between the wake-up and the switch to the thread, with
    their time in µs, longest first."""
    irqs: tuple[str, ...]
    excerpt: tuple[str, ...]
    marked: bool
    """Whether the trace holds cyclictest's mark (else it was cut before the breach)."""

    def summary(self) -> str:
        where = f"on CPU{self.cpu}" if self.cpu is not None else "on an unknown CPU"
        who = f"{self.comm or 'thread'}-{self.thread}"
        if not self.marked:
            return (f"{who} broke the trace, but the trace holds no mark of it (cut before "
                    f"the breach?); its last events {where} are kept")
        text = f"{who} {where} woke {self.latency_us} µs late (> {self.limit_us} µs)"
        if self.timer_late_us is not None:
            text += f"; its timer fired {self.timer_late_us:.0f} µs after it was due"
        if self.woken_at is not None and self.switched_in_at is not None:
            waited = (self.switched_in_at - self.woken_at) * 1e6
            text += f"; woken by {self.woken_by}, it ran {waited:.0f} µs after its wake-up"
        elif self.woken_at is not None:
            text += (f"; woken by {self.woken_by} while it was still on the CPU (no switch "
                     "to it was needed)")
        if self.ran_instead:
            text += "; meanwhile on CPU{}: {}".format(
                self.cpu, ", ".join(f"{task} {us:.0f} µs" for task, us in self.ran_instead[:3]))
        if self.irqs:
            text += f"; interrupts: {', '.join(self.irqs[:3])}"
        return text

    def facts(self) -> dict[str, Any]:
        return {"thread": self.thread, "comm": self.comm, "cpu": self.cpu,
                "latency_us": self.latency_us, "limit_us": self.limit_us,
                "woken_at": self.woken_at, "woken_by": self.woken_by,
                "timer_late_us": (None if self.timer_late_us is None
                                  else round(self.timer_late_us, 1)),
                "switched_in_at": self.switched_in_at, "marked_at": self.marked_at,
                "ran_instead": [{"task": task, "us": round(us, 1)}
                                for task, us in self.ran_instead],
                "irqs": list(self.irqs), "marked": self.marked,
                "summary": self.summary(), "excerpt": list(self.excerpt)}


def read_breach(events: Sequence[Event], broke: Break) -> Breach:
    """The breach in a trace that cyclictest stopped: its mark (written by the thread that
    woke late, so it names that thread's CPU), the wake-up of that thread and the switch
    to it before the mark, what ran on the CPU in between, and the CPU's last events."""
    mark_index = next((i for i in range(len(events) - 1, -1, -1)
                       if events[i].event == "tracing_mark_write"
                       and events[i].pid == broke.thread
                       and TRACE_MARK.search(events[i].body)), None)
    if mark_index is None:
        mine = [e for e in events if e.pid == broke.thread]
        cpu = mine[-1].cpu if mine else None
        comm = mine[-1].comm if mine else None
        tail = [e.text for e in events if cpu is None or e.cpu == cpu][-EXCERPT_LINES:]
        return Breach(broke.thread, comm, cpu, broke.value_us, None, None, None, None, None,
                      None, (), (), tuple(tail), False)
    mark = events[mark_index]
    found = TRACE_MARK.search(mark.body)
    assert found is not None
    cpu = mark.cpu
    before = events[:mark_index + 1]
    on_cpu = [e for e in before if e.cpu == cpu]
    # its last wake-up before the mark, and the switch to it after that wake-up; none
    # when the thread was still on its CPU as its timer fired (on its way to sleep)
    wakeup = next((e for e in reversed(before) if e.event in ("sched_wakeup", "sched_waking")
                   and e.fields().get("pid") == str(broke.thread)), None)
    switch_in = next((e for e in reversed(on_cpu) if e.event == "sched_switch"
                      and e.fields().get("next_pid") == str(broke.thread)
                      and (wakeup is None or e.line_no > wakeup.line_no)), None)
    ran: dict[str, float] = {}
    irqs: list[str] = []
    if wakeup is not None and switch_in is not None:
        window = [e for e in on_cpu if wakeup.ts <= e.ts <= switch_in.ts]
        # who held the CPU: the task running at the wake-up, then each one switched in
        current = _running_at(on_cpu, wakeup.ts)
        since = wakeup.ts
        for event in window:
            if event.event == "sched_switch":
                if current is not None:
                    ran[current] = ran.get(current, 0.0) + (event.ts - since) * 1e6
                fields = event.fields()
                current = f"{fields.get('next_comm', '?')}-{fields.get('next_pid', '?')}"
                since = event.ts
            elif event.event == "irq_handler_entry":
                name = event.fields().get("name", event.body)
                if name not in irqs:
                    irqs.append(name)
            elif event.event == "softirq_entry":
                name = f"softirq {event.fields().get('action', event.body)}"
                if name not in irqs:
                    irqs.append(name)
    timer = _wakeup_timer(before, wakeup, broke.thread) if wakeup is not None else None
    woken_by = None
    if wakeup is not None:
        woken_by = (f"its timer's interrupt on CPU{wakeup.cpu}" if timer is not None
                    else f"{wakeup.task} on CPU{wakeup.cpu}")
    excerpt = [e.text for e in on_cpu[-EXCERPT_LINES:]]
    if wakeup is not None and wakeup.cpu != cpu and wakeup.text not in excerpt:
        excerpt.insert(0, wakeup.text)
    ranked = tuple(sorted(((task, us) for task, us in ran.items()
                           if task != f"{mark.comm}-{broke.thread}"),
                          key=lambda item: -item[1]))
    return Breach(broke.thread, mark.comm, cpu, int(found.group(1)), int(found.group(2)),
                  wakeup.ts if wakeup is not None else None, woken_by,
                  timer[1] if timer is not None else None,
                  switch_in.ts if switch_in is not None else None, mark.ts, ranked,
                  tuple(irqs), tuple(excerpt), True)


def _wakeup_timer(before: Sequence[Event], wakeup: Event,
                  thread: int) -> tuple[Event, float | None] | None:
    """The expiry of the thread's sleep timer that woke it (the ``hrtimer_wakeup`` expiry on
    the waking CPU just before the wake-up, in the same interrupt), and how late it fired:
    the ``now`` of the expiry less the ``expires`` the thread started the timer with (its
    last ``hrtimer_start`` of ``hrtimer_wakeup``; None when the trace no longer holds it)."""
    index = before.index(wakeup)
    expiry = None
    for event in reversed(before[:index]):
        if event.cpu != wakeup.cpu:
            continue
        if event.event == "hrtimer_expire_entry":
            if event.fields().get("function") == WAKEUP_TIMER:
                expiry = event
            break
        # the function tracer logs the calls in between; any other event ends the search
        if event.event not in ("sched_waking", "sched_wakeup", "function"):
            break
    if expiry is None:
        return None
    start = next((e for e in reversed(before[:before.index(expiry)])
                  if e.event == "hrtimer_start" and e.pid == thread
                  and e.fields().get("function") == WAKEUP_TIMER), None)
    now, expires = expiry.fields().get("now", ""), (start.fields() if start else {}).get(
        "expires", "")
    if not (now.isdigit() and expires.isdigit()):
        return expiry, None
    return expiry, (int(now) - int(expires)) / 1000


def _running_at(on_cpu: Sequence[Event], ts: float) -> str | None:
    """The task that ran on the CPU at ``ts``: the last one switched in before it, else the
    task that logged the last event there."""
    last = None
    for event in on_cpu:
        if event.ts > ts:
            break
        if event.event == "sched_switch":
            fields = event.fields()
            last = f"{fields.get('next_comm', '?')}-{fields.get('next_pid', '?')}"
        elif last is None:
            last = event.task
    return last


def read_collected(data: bytes, source: str, broke: Break) -> Breach:
    """:func:`read_breach` of a trace as :func:`collect` brought it back (gzip'd text)."""
    try:
        text = gzip.decompress(data).decode(errors="replace")
    except (OSError, EOFError) as error:
        raise TraceError(f"{source}: not a gzip'd trace: {error}") from error
    return read_breach(parse_trace(text, source), broke)

