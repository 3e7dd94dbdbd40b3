"""rtlab.measure.trace: the board's script, what the board offers, cyclictest's break, and
the breach read from traces a virtual board recorded (tests/data/trace/, see its README)."""

import base64
import gzip
import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from rtlab.measure import cyclictest, trace
from rtlab.measure.trace import (
    Break,
    TraceError,
    TraceSettings,
    TraceSupport,
    breaktrace_us,
    parse_break,
    parse_trace,
    read_breach,
    read_collected,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "trace"


def test_the_break_is_the_limit_in_whole_microseconds_never_below_it():
    assert breaktrace_us(150) == 150
    # cyclictest breaks on a wake-up above it: 151 µs and more, each a fail of 150.5 µs
    assert breaktrace_us(150.5) == 151
    for bad in (0, -3, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="max_us must be a positive number"):
            breaktrace_us(bad)


def test_cyclictest_breaks_and_marks_only_when_asked():
    plain = cyclictest.build_command(interval_us=1000, duration_s=10, json_path="/tmp/j")
    assert not any(word.startswith("--breaktrace") or word == "--tracemark" for word in plain)
    broken = cyclictest.build_command(interval_us=1000, duration_s=10, json_path="/tmp/j",
                                      breaktrace_us=50)
    assert broken == [*plain, "--breaktrace=50", "--tracemark"]
    with pytest.raises(ValueError, match="breaktrace_us must be >= 1"):
        cyclictest.build_command(interval_us=1000, duration_s=10, json_path="/tmp/j",
                                 breaktrace_us=0)


def test_settings_are_checked():
    with pytest.raises(ValueError, match="tracer must be one of nop, function"):
        TraceSettings(tracer="wakeup_rt")
    with pytest.raises(ValueError, match="buffer_kb must be a positive integer"):
        TraceSettings(buffer_kb=0)
    with pytest.raises(ValueError, match="not a trace event"):
        TraceSettings(events=("sched_switch; reboot",))


def test_the_board_script_is_valid_shell_and_names_every_event(tmp_path):
    script = trace.board_script(TraceSettings())
    path = tmp_path / "rtlab-trace.sh"
    path.write_text(script)
    checked = subprocess.run(["sh", "-n", str(path)], capture_output=True, text=True,
                             check=False)
    assert checked.returncode == 0, checked.stderr
    for event in trace.EVENTS:
        assert event in script
    # buffer and line bounds come from the settings
    assert "echo 64 >$T/buffer_size_kb" in trace.board_script(TraceSettings(buffer_kb=64))


def test_the_break_lines_of_cyclictest():
    assert parse_break("# /dev/cpu_dma_latency set to 0us\n") is None
    assert parse_break("# /dev/cpu_dma_latency set to 0us\n# Break thread: 312\n"
                       "# Break value: 5120\n") == Break(312, 5120)
    with pytest.raises(TraceError, match="a break thread without the other"):
        parse_break("# Break thread: 312\n")


def test_lines_that_are_no_trace_are_refused_with_their_number():
    with pytest.raises(TraceError, match=r"^t.txt:3: not a trace line: 'garbage'"):
        parse_trace("# tracer: nop\n#\ngarbage\n", "t.txt")


def test_what_the_rt_armmp_kernel_offers_for_a_trace():
    lines = (DATA / "probe-rt-armmp.txt").read_text().splitlines()
    support = TraceSupport.parse(lines, TraceSettings())
    assert support.available and support.reason is None
    assert support.directory == "/sys/kernel/tracing"
    # Debian's rt-armmp kernel has the latency tracers rtla needs, too
    assert {"nop", "function", "timerlat", "osnoise", "wakeup_rt"} <= set(support.tracers)
    # a tracer the kernel lacks, or an event it lacks, is a reason, not an error
    missing = TraceSupport.parse([*lines[:1], "rtlab-trace:tracers=nop",
                                  "rtlab-trace:cyclictest=ok"], TraceSettings(tracer="function"))
    assert not missing.available
    assert missing.reason == "the kernel has no function tracer (available: nop)"
    no_event = TraceSupport.parse([*lines, "rtlab-trace:no-event=irq:softirq_entry"],
                                  TraceSettings())
    assert no_event.reason == "the kernel has no trace event irq:softirq_entry"
    no_debugfs = TraceSupport.parse([line for line in lines if "cyclictest" not in line],
                                    TraceSettings())
    assert "cyclictest 2.4 stops the trace through debugfs" in no_debugfs.reason


def test_a_locked_down_kernel_offers_no_trace_and_says_why():
    lines = (DATA / "probe-lockdown.txt").read_text().splitlines()
    support = TraceSupport.parse(lines, TraceSettings())
    assert not support.available and support.directory is None
    assert support.reason.startswith("no tracefs with a writable tracing_on at "
                                     "/sys/kernel/tracing or /sys/kernel/debug/tracing")
    assert "Lockdown: swapper: use of tracefs is restricted" in support.reason
    assert support.facts()["kernel_log"] == [line.removeprefix("rtlab-trace:kernel=")
                                             for line in lines if "kernel=" in line]


def test_a_probe_that_printed_nothing_is_refused():
    with pytest.raises(TraceError, match="printed no directory"):
        TraceSupport.parse(["sh: /tmp/rtlab-trace.sh: not found"], TraceSettings())


def recorded(name: str) -> tuple[bytes, Break]:
    broke = parse_break((DATA / f"{name}.cyclictest.out").read_text())
    assert broke is not None
    return (DATA / f"{name}.trace.gz").read_bytes(), broke


def test_cyclictest_names_the_thread_that_broke_and_its_latency():
    _, broke = recorded("events-rt-armmp")
    assert broke == Break(thread=223, value_us=7315)


def test_the_events_trace_of_a_virtual_board_names_the_breach_and_its_cpu():
    data, broke = recorded("events-rt-armmp")
    breach = read_collected(data, "events-rt-armmp.trace.gz", broke)
    # the mark is cyclictest's, written on the CPU its late thread runs on
    assert breach.marked and (breach.comm, breach.thread, breach.cpu) == ("cyclictest", 223, 0)
    assert (breach.latency_us, breach.limit_us) == (7315, 50)
    # woken in the timer interrupt on CPU0 at 40.160945 (sched_wakeup), switched in at
    # 40.161025; meanwhile CPU0 stayed idle
    assert breach.woken_at == pytest.approx(40.160945)
    assert breach.switched_in_at == pytest.approx(40.161025)
    assert breach.woken_by == "its timer's interrupt on CPU0"
    assert breach.ran_instead == (("swapper/0-0", pytest.approx(80.0)),)
    # this trace was taken before hrtimer_start was among the events: no timer part
    assert breach.timer_late_us is None
    assert breach.summary() == (
        "cyclictest-223 on CPU0 woke 7315 µs late (> 50 µs); woken by its timer's interrupt "
        "on CPU0, it ran 80 µs after its wake-up; meanwhile on CPU0: swapper/0-0 80 µs")
    # the excerpt: CPU0's last lines, ending with the mark
    assert len(breach.excerpt) == trace.EXCERPT_LINES
    assert all("[000]" in line for line in breach.excerpt)
    assert breach.excerpt[-1].endswith("tracing_mark_write: hit latency threshold (7315 > 50)")
    assert "next_comm=cyclictest next_pid=223" in breach.excerpt[-2]


def test_the_function_trace_reads_the_same_way_through_the_calls_in_between():
    data, broke = recorded("function-rt-armmp")
    events = parse_trace(gzip.decompress(data).decode(), "function-rt-armmp")
    assert sum(e.event == "function" for e in events) > 3000
    breach = read_breach(events, broke)
    assert (breach.thread, breach.cpu, breach.latency_us) == (273, 0, 10921)
    assert breach.woken_by == "its timer's interrupt on CPU0"
    assert breach.excerpt[-1].endswith("hit latency threshold (10921 > 50)")
    # the calls before the mark are the thread's own: writing the mark
    assert "apparmor_file_permission <-security_file_permission" in "\n".join(breach.excerpt)


def test_a_trace_cut_before_the_mark_keeps_the_threads_cpu_and_says_so():
    data, broke = recorded("events-rt-armmp")
    events = parse_trace(gzip.decompress(data).decode(), "events")
    unmarked = [e for e in events if e.event != "tracing_mark_write"]
    breach = read_breach(unmarked, broke)
    assert not breach.marked and breach.cpu == 0 and breach.latency_us == 7315
    assert "holds no mark of it" in breach.summary()
    assert all("[000]" in line for line in breach.excerpt)


def test_a_collected_trace_that_is_no_gzip_is_refused():
    with pytest.raises(TraceError, match="^x.gz: not a gzip'd trace"):
        read_collected(b"not gzip", "x.gz", Break(1, 2))


class FakeBoard:
    """The board's side of collect: what the uploaded script prints for ``collect`` (the
    size and SHA-256 of its file) and ``send`` (base64 of what reaches the host)."""

    def __init__(self, data: bytes, sizes: dict[int, int] | None = None,
                 sent: bytes | None = None) -> None:
        self.data, self.sizes, self.asked = data, sizes or {}, []
        self.sent = data if sent is None else sent

    def run_check(self, cmd: str, *, timeout: float = 30.0) -> list[str]:
        if " collect " in cmd:
            lines = int(cmd.rsplit(" ", 1)[1])
            self.asked.append(lines)
            return [f"rtlab-trace:bytes={self.sizes.get(lines, len(self.data))}",
                    f"rtlab-trace:sha256={hashlib.sha256(self.data).hexdigest()}"]
        text = base64.b64encode(self.sent).decode()
        return [text[i:i + 76] for i in range(0, len(text), 76)]


def test_collect_halves_the_lines_until_the_trace_fits_and_checks_what_came_back():
    data, _ = recorded("events-rt-armmp")
    board = FakeBoard(data, sizes={20000: 900_000, 10000: 400_000})
    collected = trace.collect(board, TraceSettings())
    assert board.asked == [20000, 10000, 5000]
    assert collected.data == data and collected.cut
    assert collected.lines == gzip.decompress(data).count(b"\n")
    # bytes other than the board's (a character lost on the console) are refused
    with pytest.raises(TraceError, match="other bytes than the board's"):
        damaged = data[:-1] + bytes([data[-1] ^ 1])
        trace.collect(FakeBoard(data, sent=damaged), TraceSettings())
    with pytest.raises(TraceError, match="garbled on its way back"):
        board = FakeBoard(data)
        board.sent = b""
        board.run_check = lambda cmd, timeout=30.0: (
            FakeBoard.run_check(board, cmd) if " collect " in cmd else ["Zm9v!"])
        trace.collect(board, TraceSettings())


def test_the_trace_of_a_case_splits_the_latency_into_the_timer_and_the_scheduler():
    """The record and trace test_trace_on_breach.py left (hrtimer_start among the events):
    the thread's timer was started for 26.315... s and expired 3077 µs later; the thread
    ran 98 µs after its wake-up; the rest of the 3508 µs is the thread's own way to the
    mark."""
    [path] = (DATA / "record").glob("*.json")
    record = json.loads(path.read_text())
    data = (DATA / "record" / record["trace"]["file"]).read_bytes()
    breach = read_collected(data, path.name, Break(record["trace"]["breach"]["thread"],
                                                   record["trace"]["breach"]["latency_us"]))
    assert (breach.thread, breach.cpu, breach.latency_us) == (227, 0, 3508)
    assert breach.timer_late_us == pytest.approx(3077, abs=1)
    assert (breach.switched_in_at - breach.woken_at) * 1e6 == pytest.approx(98, abs=1)
    assert "its timer fired 3077 µs after it was due" in breach.summary()
    # what the suite wrote into the record is what the reader makes of the file
    assert breach.facts() == record["trace"]["breach"]
    assert gzip.decompress(data).count(b"\n") == record["trace"]["lines"]
