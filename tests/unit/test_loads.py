"""rtlab.measure.loads: /proc/stat accounting, the scripts each load runs on the board, and the
proof that a load ran (every not-effective case must say so, never pass)."""

import os
import re
import stat
import subprocess
from pathlib import Path

import attr
import pytest
from proc_samples import ICMP_HEADER_6_1, STAT_AFTER, STAT_BEFORE, TCP_HEADER, TRAFFIC

from rtlab.measure.loads import (
    KINDS,
    SNMP_COUNTERS,
    CpuLoad,
    CpuTimes,
    DiskLoad,
    Evidence,
    HackbenchLoad,
    LoadNotEffective,
    MemoryLoad,
    NetworkLoad,
    make_load,
    snmp_counters,
    tally,
)


def _per_cpu_sum(text: str) -> list[int]:
    rows = [line.split()[1:] for line in text.splitlines() if re.match(r"cpu\d", line)]
    return [sum(int(row[i]) for row in rows) for i in range(10)]


def test_the_stat_snapshots_are_consistent_like_the_kernels():
    # the aggregate line is the sum of the per-CPU lines, as the kernel prints it
    for text in (STAT_BEFORE, STAT_AFTER):
        assert [int(v) for v in text.splitlines()[0].split()[1:]] == _per_cpu_sum(text)


def test_aggregate_utilisation():
    before, after = CpuTimes.parse(STAT_BEFORE), CpuTimes.parse(STAT_AFTER)
    # busy: user 6160->6845, system 2450->2755, softirq 60->62; idle 22340->23340, iowait 40
    assert before == CpuTimes(busy=6160 + 2450 + 60, idle=22340 + 40)
    assert after.utilisation_since(before) == pytest.approx((685 + 305 + 2) / (992 + 1000))


def test_utilisation_of_some_cpus_only():
    before = CpuTimes.parse(STAT_BEFORE, cpus=[0, 1])
    after = CpuTimes.parse(STAT_AFTER, cpus=[0, 1])
    assert before == CpuTimes(busy=3012 + 1200 + 40 + 2980 + 1150 + 12, idle=5000 + 20 + 5100 + 10)
    # CPU0 and CPU1: 490 busy and 10 idle ticks each
    assert after.utilisation_since(before) == pytest.approx(980 / 1000)
    # the isolated ones were idle
    idle = CpuTimes.parse(STAT_AFTER, cpus={2, 3}).utilisation_since(
        CpuTimes.parse(STAT_BEFORE, cpus={2, 3}))
    assert idle == pytest.approx(12 / (12 + 980))


def test_missing_cpu_lines_are_refused_by_name():
    with pytest.raises(ValueError, match=r"^no cpu5 line in /proc/stat output$"):
        CpuTimes.parse(STAT_BEFORE, cpus=[0, 5])
    with pytest.raises(ValueError, match=r"^no cpu4, cpu7 line in /proc/stat output$"):
        CpuTimes.parse(STAT_BEFORE, cpus=[7, 4, 1])


def test_proc_stat_without_cpu_line_is_refused():
    with pytest.raises(ValueError, match=r"^no aggregate 'cpu' line in /proc/stat output$"):
        CpuTimes.parse("intr 1 2 3\nctxt 4\n")
    # the per-CPU lines do not stand in for the aggregate one
    per_cpu_only = "\n".join(STAT_BEFORE.splitlines()[1:])
    with pytest.raises(ValueError, match="no aggregate 'cpu' line"):
        CpuTimes.parse(per_cpu_only)


def test_clock_that_did_not_advance_is_refused():
    times = CpuTimes.parse(STAT_BEFORE)
    with pytest.raises(ValueError, match="^/proc/stat did not advance between the two"):
        times.utilisation_since(times)


def test_guest_time_is_not_counted_twice():
    # a CPU that ran a KVM guest for 50 of its 100 user ticks and a niced guest for 20 of
    # its 30 nice ticks; the hypervisor stole 10 more (steal is busy, guest time is not
    # added again: the kernel counts it in user and nice already)
    before = CpuTimes.parse("cpu  0 0 0 0 0 0 0 0 0 0\n")
    after = CpuTimes.parse("cpu  100 30 0 150 10 0 0 10 50 20\n")
    assert after == CpuTimes(busy=100 + 30 + 10, idle=150 + 10)
    assert after.utilisation_since(before) == pytest.approx(140 / 300)


def test_guest_time_of_some_cpus_is_not_counted_twice():
    stat = ("cpu  300 0 100 400 0 0 0 0 200 0\n"
            "cpu0 200 0 50 100 0 0 0 0 150 0\n"
            "cpu1 100 0 50 300 0 0 0 0 50 0\n")
    assert CpuTimes.parse(stat) == CpuTimes(busy=400, idle=400)
    assert CpuTimes.parse(stat, cpus=[0]) == CpuTimes(busy=250, idle=100)
    assert CpuTimes.parse(stat, cpus=[0, 1]) == CpuTimes(busy=400, idle=400)


@pytest.mark.parametrize(("line", "busy", "idle"), [
    # Linux 2.6.33 and later: ten columns, the last two guest time (in user and nice)
    ("cpu  10 20 30 40 50 60 70 80 90 100", 10 + 20 + 30 + 60 + 70 + 80, 40 + 50),
    # 2.6.24..2.6.32: nine, guest without guest_nice
    ("cpu  10 20 30 40 50 60 70 80 90", 10 + 20 + 30 + 60 + 70 + 80, 40 + 50),
    # 2.6.11: eight, steal the last
    ("cpu  10 20 30 40 50 60 70 80", 10 + 20 + 30 + 60 + 70 + 80, 40 + 50),
    # 2.5.41: seven (no steal)
    ("cpu  10 20 30 40 50 60 70", 10 + 20 + 30 + 60 + 70, 40 + 50),
    # 2.4: four (no iowait)
    ("cpu  10 20 30 40", 10 + 20 + 30, 40),
])
def test_busy_and_idle_columns_of_every_proc_stat_layout(line, busy, idle):
    assert CpuTimes.parse(f"{line}\nctxt 1\n") == CpuTimes(busy=busy, idle=idle)


# ------------------------------------------------------------------ scripts ----




def test_cpu_script():
    assert CpuLoad(50).script(cpus=4, seconds=125) == (
        "exec stress-ng --cpu 4 --cpu-load 50 --timeout 125s --metrics-brief")
    # half the asked utilisation of the CPUs, however many CPUs there are
    assert CpuLoad(100).min_utilisation(4) == 0.5
    assert CpuLoad(50).min_utilisation(4) == CpuLoad(50).min_utilisation(1) == 0.25
    assert CpuLoad(25).min_utilisation(2) == pytest.approx(0.125)
    assert CpuLoad(1).min_utilisation(4) == pytest.approx(0.005)


def test_hackbench_script_restarts_it_until_the_deadline():
    load = HackbenchLoad(groups=15, fds=25, loops=200, bytes=512)
    assert load.script(cpus=4, seconds=125) == (
        'end=$(( $(date +%s) + 125 )); while [ "$(date +%s)" -lt "$end" ]; do echo start; '
        'hackbench -P -g 15 -f 25 -l 200 -s 512 >/dev/null; echo "rc=$?"; done')
    assert load.min_utilisation(4) == load.min_utilisation(1) == 0.25


def test_memory_script():
    load = MemoryLoad(workers=2, bytes="10%")
    assert load.script(cpus=4, seconds=65) == (
        "exec stress-ng --vm 2 --vm-bytes 10% --timeout 65s --metrics-brief")
    # two workers keep two of four CPUs busy: at least half of that
    assert load.min_utilisation(4) == 0.25
    assert load.min_utilisation(2) == 0.5
    assert MemoryLoad(workers=1, bytes="128M").min_utilisation(4) == 0.125
    # more workers than CPUs cannot use more than all of them
    assert MemoryLoad(workers=8, bytes="128M").min_utilisation(4) == 0.5


def test_disk_script_quotes_the_directory():
    load = DiskLoad(dir="/data", block_kib=1024, blocks=8)
    assert load.script(cpus=4, seconds=10) == (
        "test -d /data -a -w /data || { echo 'not a writable directory: /data'; exit 1; }; "
        'end=$(( $(date +%s) + 10 )); while [ "$(date +%s)" -lt "$end" ]; do '
        "if out=$(dd if=/dev/zero of=/data/rtlab-disk-load.bin bs=1024k count=8 conv=fsync "
        '2>&1) && sync; then echo wrote; else echo "failed: $(echo "$out" | head -n 1)"; '
        "exit 1; fi; done; rm -f /data/rtlab-disk-load.bin")
    spaced = DiskLoad(dir="/mnt/sd card", block_kib=4, blocks=1).script(cpus=1, seconds=1)
    assert "test -d '/mnt/sd card' -a -w '/mnt/sd card'" in spaced
    assert "of='/mnt/sd card/rtlab-disk-load.bin'" in spaced
    assert spaced.endswith("; rm -f '/mnt/sd card/rtlab-disk-load.bin'")
    # waiting for the card is not CPU time: the disk load is proven by its log instead
    assert load.min_utilisation(4) == 0.0


def test_network_script_pings_by_path():
    load = NetworkLoad(ping_bytes=1400, traffic=TRAFFIC)
    # the listener's input stays open as long as the load runs
    assert load.script(cpus=4, seconds=125) == (
        "(sleep 125 | nc -l -p 5001 >/dev/null) & "
        '/bin/ping -f -q -s 1400 -w 125 10.0.2.2; echo "ping-rc=$?"')
    # the kernel's counters are read at the window's edges (rtlab.measure.window)
    assert load.probe == SNMP_COUNTERS == "grep -E '^(Icmp|Tcp):' /proc/net/snmp"
    assert load.min_utilisation(4) == 0.0


def test_network_script_needs_the_traffic_addresses():
    with pytest.raises(ValueError, match="network load needs the board's traffic addresses"):
        NetworkLoad(ping_bytes=1400).script(cpus=4, seconds=10)


def _sh(script: str, cwd: Path, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=30, check=False)


def test_disk_script_runs_and_its_log_proves_the_writes(tmp_path):
    # the script as the board's sh runs it, for 2 s (at least one write, whatever the clock)
    load = DiskLoad(dir=str(tmp_path), block_kib=4, blocks=2)
    done = _sh(load.script(cpus=1, seconds=2), tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert lines and set(lines) == {"wrote"}
    # the file is removed at the end
    assert list(tmp_path.iterdir()) == []
    facts = load.verify(Evidence(alive=True, log=done.stdout))
    assert facts == {"written_kib": len(lines) * 2 * 4}


def test_disk_script_refuses_a_directory_it_cannot_write(tmp_path):
    missing = tmp_path / "absent"
    load = DiskLoad(dir=str(missing), block_kib=4, blocks=1)
    done = _sh(load.script(cpus=1, seconds=0), tmp_path)
    assert (done.returncode, done.stdout) == (1, f"not a writable directory: {missing}\n")
    with pytest.raises(LoadNotEffective, match=re.escape(
            f"load not effective: disk writes to {missing} stopped: "
            f"'not a writable directory: {missing}'")):
        load.verify(Evidence(alive=False, log=done.stdout))


def test_disk_script_survives_a_quote_in_the_directory(tmp_path):
    missing = tmp_path / "it's"
    done = _sh(DiskLoad(dir=str(missing), block_kib=4, blocks=1).script(cpus=1, seconds=0),
               tmp_path)
    assert (done.returncode, done.stdout) == (1, f"not a writable directory: {missing}\n")


def _fake_tool(folder: Path, name: str, body: str) -> dict[str, str]:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_hackbench_script_log_is_what_verify_reads(tmp_path):
    env = _fake_tool(tmp_path, "hackbench", 'echo "Time: 0.118"; exit 0')
    load = HackbenchLoad(groups=2, fds=10, loops=100, bytes=512)
    done = _sh(load.script(cpus=4, seconds=2), tmp_path, env)
    assert done.returncode == 0, done.stderr
    runs = done.stdout.count("start\n")
    assert runs >= 1 and done.stdout == "start\nrc=0\n" * runs
    assert load.verify(Evidence(alive=True, log=done.stdout)) == {"started": runs,
                                                                 "completed": runs}


def test_hackbench_script_reports_a_failing_run(tmp_path):
    env = _fake_tool(tmp_path, "hackbench",
                     'echo "hackbench: fork(): Resource temporarily unavailable" >&2; exit 1')
    load = HackbenchLoad(groups=2, fds=10, loops=100, bytes=512)
    done = _sh(load.script(cpus=4, seconds=2), tmp_path, env)
    log = done.stdout + done.stderr
    runs = log.split().count("rc=1")
    assert runs >= 1 and tally(log) == {"start": runs, "rc=1": runs}
    failed = "rc=1" if runs == 1 else f"rc=1 ×{runs}"
    with pytest.raises(LoadNotEffective, match=rf"^load not effective: hackbench failed "
                                               rf"\({failed}\): "):
        load.verify(Evidence(alive=True, log=log))


# ----------------------------------------------------------------- verify ----


STRESS_NG_RUNNING = "stress-ng: info:  [812] dispatching hogs: 4 cpu"


def test_evidence_is_what_the_board_showed_and_no_cpu_time():
    # a load's own CPU time is no evidence: on an emulated board it runs on another clock;
    # the window's length is the host's word, for rates
    assert [field.name for field in attr.fields(Evidence)] == [
        "alive", "log", "probe", "probe_before", "tally", "window_s"]
    assert Evidence(alive=True, log="") == Evidence(True, "", probe="", probe_before="",
                                                    tally={}, window_s=0.0)
    # without a tally from the board, the given log is counted
    assert Evidence(alive=True, log="start\nrc=0\nstress-ng: info: x\nping-rc=0\nstart").tally == {
        "start": 2, "rc=0": 1}


def test_cpu_and_memory_loads_alive_are_effective():
    assert CpuLoad(75).verify(Evidence(alive=True, log=STRESS_NG_RUNNING)) == {"percent": 75}
    log = "stress-ng: info:  [901] dispatching hogs: 2 vm"
    assert MemoryLoad(2, "10%").verify(Evidence(alive=True, log=log)) == {
        "workers": 2, "bytes": "10%"}


@pytest.mark.parametrize(("load", "kind"), [
    (CpuLoad(100), "stress-ng --cpu"),
    (MemoryLoad(2, "10%"), "stress-ng --vm"),
])
def test_stress_ng_that_ended_early_is_not_effective(load, kind):
    log = ("stress-ng: info:  [812] dispatching hogs: 4 cpu\n"
           "stress-ng: error: [812] cannot allocate memory, errno=12 (Out of memory)\n")
    with pytest.raises(LoadNotEffective) as raised:
        load.verify(Evidence(alive=False, log=log))
    assert str(raised.value) == (
        f"load not effective: {kind} was not running when the measurement ended: "
        f"{log.strip()!r}")


def test_not_running_quotes_only_the_end_of_a_long_log():
    log = "x" * 500 + "stress-ng: error: killed"
    with pytest.raises(LoadNotEffective) as raised:
        CpuLoad(50).verify(Evidence(alive=False, log=log))
    assert str(raised.value).endswith(f"{log[-300:]!r}")
    assert "x" * 301 not in str(raised.value)


HACKBENCH = HackbenchLoad(groups=15, fds=25, loops=200, bytes=512)


def test_hackbench_effective_counts_its_runs():
    log = "start\nrc=0\nstart\nrc=0\nstart"
    assert HACKBENCH.verify(Evidence(alive=True, log=log)) == {"started": 3, "completed": 2}


def test_hackbench_failed_run_is_not_effective_even_while_alive():
    log = "start\nrc=0\nstart\nCreating fdpair (error): Too many open files\nrc=1\nstart"
    with pytest.raises(LoadNotEffective) as raised:
        HACKBENCH.verify(Evidence(alive=True, log=log))
    assert str(raised.value) == f"load not effective: hackbench failed (rc=1): {log!r}"


def test_hackbench_killed_run_is_not_effective():
    with pytest.raises(LoadNotEffective, match=r"hackbench failed \(rc=137\)"):
        HACKBENCH.verify(Evidence(alive=True, log="start\nrc=137\nstart"))


@pytest.mark.parametrize(("alive", "log"), [(False, "start\nrc=0"), (True, ""),
                                            (True, "sh: hackbench: not found")])
def test_hackbench_not_running_or_never_started(alive, log):
    with pytest.raises(LoadNotEffective, match=re.escape(
            f"load not effective: hackbench was not running when the measurement ended: "
            f"{log!r}")):
        HACKBENCH.verify(Evidence(alive=alive, log=log))


DISK = DiskLoad(dir="/data", block_kib=1024, blocks=8)


def test_disk_effective_counts_what_was_written():
    assert DISK.verify(Evidence(alive=True, log="wrote\nwrote\nwrote")) == {
        "written_kib": 3 * 8 * 1024}


@pytest.mark.parametrize(("alive", "log", "why"), [
    # dd's own first line (busybox) is what the message quotes
    (True, "wrote\nfailed: dd: can't open '/data/rtlab-disk-load.bin': Read-only file system",
     "failed: dd: can't open '/data/rtlab-disk-load.bin': Read-only file system"),
    (False, "wrote\nwrote", "wrote\nwrote"),
    (False, "not a writable directory: /data", "not a writable directory: /data"),
])
def test_disk_failed_or_stopped_is_not_effective(alive, log, why):
    with pytest.raises(LoadNotEffective) as raised:
        DISK.verify(Evidence(alive=alive, log=log))
    assert str(raised.value) == f"load not effective: disk writes to /data stopped: {why!r}"


def test_disk_without_a_completed_write_is_not_effective():
    with pytest.raises(LoadNotEffective) as raised:
        DISK.verify(Evidence(alive=True, log=""))
    assert str(raised.value) == ("load not effective: no 8 × 1024 KiB write to /data "
                                 "completed during the measurement")


# ------------------------------------------------------------ SNMP counters ----

# newer kernels put two rate-limit counters after OutErrors
ICMP_HEADER_NEW = ICMP_HEADER_6_1.replace(
    "OutErrors ", "OutErrors OutRateLimitGlobal OutRateLimitHost ")

# a 6.1 board before and after the network load: 4 echo requests/replies and 1402 TCP
# segments from boot, then 41234 requests, 41230 replies and the host's stream
ICMP_START = f"{ICMP_HEADER_6_1}\nIcmp: 7 0 0 3 0 0 0 0 0 4 0 0 0 0 8 0 4 0 0 0 0 4 0 0 0 0 0"
ICMP_END = (f"{ICMP_HEADER_6_1}\n"
            "Icmp: 41237 0 0 3 0 0 0 0 0 41234 0 0 0 0 41242 0 4 0 0 0 0 41238 0 0 0 0 0")
TCP_START = f"{TCP_HEADER}\nTcp: 1 200 120000 -1 12 3 0 1 2 1402 1380 0 0 5 0"
TCP_END = f"{TCP_HEADER}\nTcp: 1 200 120000 -1 12 4 0 1 3 39870 21012 3 0 5 0"
# what SNMP_COUNTERS prints
SNMP_START = f"{ICMP_START}\n{TCP_START}"
SNMP_END = f"{ICMP_END}\n{TCP_END}"

# the whole file, as `cat /proc/net/snmp` prints it on that board
PROC_NET_SNMP = f"""\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos \
InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs \
ReasmFails FragOKs FragFails FragCreates
Ip: 2 64 1523 0 0 0 0 0 1521 1498 0 0 0 0 0 0 0 0 0
{ICMP_START}
IcmpMsg: InType0 InType3 OutType3 OutType8
IcmpMsg: 4 3 4 4
{TCP_START}
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors \
IgnoredMulti MemErrors
Udp: 95 4 0 99 0 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors \
IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
"""


def test_snmp_counters_by_name():
    icmp = snmp_counters(ICMP_START, "Icmp")
    assert len(icmp) == 27
    assert (icmp["InMsgs"], icmp["InDestUnreachs"], icmp["InEchoReps"]) == (7, 3, 4)
    assert (icmp["OutMsgs"], icmp["OutDestUnreachs"], icmp["OutEchos"]) == (8, 4, 4)
    tcp = snmp_counters(TCP_START, "Tcp")
    assert (tcp["MaxConn"], tcp["InSegs"], tcp["OutSegs"], tcp["OutRsts"]) == (-1, 1402, 1380, 5)


def test_snmp_counters_from_the_whole_file_skip_icmpmsg():
    assert snmp_counters(PROC_NET_SNMP, "Icmp") == snmp_counters(ICMP_START, "Icmp")
    assert snmp_counters(PROC_NET_SNMP, "Tcp") == snmp_counters(TCP_START, "Tcp")


def test_snmp_counters_command_selects_the_icmp_and_tcp_lines(tmp_path):
    # the board's grep, run here on the board's file
    (tmp_path / "snmp").write_text(PROC_NET_SNMP, encoding="ascii")
    command = SNMP_COUNTERS.replace("/proc/net/snmp", str(tmp_path / "snmp"))
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    assert done.stdout == f"{SNMP_START}\n"


def test_snmp_counters_do_not_depend_on_column_positions():
    # OutEchos moves two columns right; where 6.1 had it, the newer kernel has OutSrcQuenchs
    values = "Icmp: 41237 0 0 3 0 0 0 0 0 41234 0 0 0 0 41242 0 17 2 4 0 0 0 0 41238 0 0 0 0 0"
    counters = snmp_counters(f"{ICMP_HEADER_NEW}\n{values}", "Icmp")
    assert len(counters) == 29
    assert (counters["OutEchos"], counters["InEchoReps"]) == (41238, 41234)
    assert (counters["OutRateLimitGlobal"], counters["OutRateLimitHost"]) == (17, 2)
    assert counters["OutSrcQuenchs"] == 0 and counters["OutDestUnreachs"] == 4


@pytest.mark.skipif(not Path("/proc/net/snmp").exists(), reason="not Linux")
def test_snmp_counters_of_this_machines_kernel():
    text = Path("/proc/net/snmp").read_text(encoding="ascii")
    icmp, tcp = snmp_counters(text, "Icmp"), snmp_counters(text, "Tcp")
    assert {"OutEchos", "InEchoReps", "InMsgs", "OutMsgs"} <= set(icmp)
    assert {"InSegs", "OutSegs", "CurrEstab"} <= set(tcp)


@pytest.mark.parametrize(("text", "protocol", "message"), [
    ("", "Icmp", r"^not the two Icmp: lines of /proc/net/snmp: ''$"),
    (ICMP_START, "Tcp", r"^not the two Tcp: lines of /proc/net/snmp: 'Icmp: InMsgs "),
    (ICMP_HEADER_6_1, "Icmp", "not the two Icmp: lines"),
    (f"{ICMP_START}\n{ICMP_START}", "Icmp", "not the two Icmp: lines"),
    # a value lost on the serial line
    (f"{ICMP_HEADER_6_1}\nIcmp: 7 0 0 3 0 0 0 0 0 4 0 0 0 0 8 0 4 0 0 0 0 4 0 0 0 0", "Icmp",
     "not the two Icmp: lines"),
    (f"{ICMP_HEADER_6_1}\nIcmp: 7 0 0 3 0 0 0 0 0 4 0 0 0 0 8 0 4 0 0 0 0 4x 0 0 0 0 0", "Icmp",
     r"^Icmp: counters are not numbers: \['Icmp:', '7',"),
])
def test_snmp_counters_refuse_garbled_text(text, protocol, message):
    with pytest.raises(ValueError, match=message):
        snmp_counters(text, protocol)


# ------------------------------------------------------------ network verify ----

NETWORK = NetworkLoad(ping_bytes=1400, traffic=TRAFFIC)
# ping -q prints nothing until it ends
RUNNING = Evidence(alive=True, log="", probe=SNMP_END, probe_before=SNMP_START)


def test_network_effective_from_the_kernels_counters():
    assert NETWORK.verify(RUNNING) == {"ping_bytes": 1400, "echo_requests": 41234,
                                       "echo_replies": 41230, "tcp_segments_in": 39870 - 1402}


def test_network_on_a_newer_kernel_layout():
    start = f"{ICMP_HEADER_NEW}\nIcmp: 7 0 0 3 0 0 0 0 0 4 0 0 0 0 8 0 0 0 4 0 0 0 0 4 0 0 0 0 0"
    end = (f"{ICMP_HEADER_NEW}\n"
           "Icmp: 1007 0 0 3 0 0 0 0 0 1004 0 0 0 0 1010 0 0 0 4 0 0 0 0 1006 0 0 0 0 0")
    facts = NETWORK.verify(Evidence(alive=True, log="", probe_before=f"{start}\n{TCP_START}",
                                    probe=f"{end}\n{TCP_END}"))
    assert (facts["echo_requests"], facts["echo_replies"]) == (1002, 1000)


def test_network_not_running_is_not_effective():
    log = ("ping: sendmsg: Network is unreachable\n\n--- 10.0.2.2 ping statistics ---\n"
           "12 packets transmitted, 0 received, 100% packet loss, time 3012ms\nping-rc=1")
    with pytest.raises(LoadNotEffective) as raised:
        NETWORK.verify(attr.evolve(RUNNING, alive=False, log=log))
    assert str(raised.value) == ("load not effective: ping -f was not running when the "
                                 f"measurement ended: {log!r}")


@pytest.mark.parametrize(("before", "after", "message"), [
    ("", SNMP_END, "not the two Icmp: lines of /proc/net/snmp: ''"),
    (SNMP_START, "", "not the two Icmp: lines of /proc/net/snmp: ''"),
    (SNMP_START, ICMP_END, "not the two Tcp: lines of /proc/net/snmp: 'Icmp: InMsgs"),
    (ICMP_START, SNMP_END, "not the two Tcp: lines of /proc/net/snmp: 'Icmp: InMsgs"),
    (SNMP_START, SNMP_END.replace("41238", "41x38"), "Icmp: counters are not numbers"),
    (SNMP_START, SNMP_END.replace("39870", "3987O"), "Tcp: counters are not numbers"),
    (SNMP_START, SNMP_END.replace("OutEchos ", "OutEchoes "), "'OutEchos'"),
])
def test_network_unprovable_load_is_not_effective(before, after, message):
    with pytest.raises(LoadNotEffective) as raised:
        NETWORK.verify(attr.evolve(RUNNING, probe_before=before, probe=after))
    assert str(raised.value).startswith("load not effective: the network load cannot be "
                                        "proven: ")
    assert message in str(raised.value)


def test_network_flood_is_judged_by_its_rate_over_the_window():
    # 41234 echo requests: a flood over 10 minutes (68.7/s), not over 20 minutes (34.4/s)
    assert NETWORK.verify(attr.evolve(RUNNING, window_s=600.0))["echo_requests"] == 41234
    with pytest.raises(LoadNotEffective) as raised:
        NETWORK.verify(attr.evolve(RUNNING, window_s=1200.0))
    assert str(raised.value) == (
        "load not effective: the ping flood sent 41234 echo requests in 1200 s (34.4/s), "
        "expected at least 50/s (ping -f sends 100/s even without replies)")


def test_network_without_echo_requests_is_not_effective():
    with pytest.raises(LoadNotEffective) as raised:
        NETWORK.verify(attr.evolve(RUNNING, probe=f"{ICMP_START}\n{TCP_END}"))
    assert str(raised.value) == ("load not effective: the ping flood sent 0 echo requests and "
                                 "got 0 replies")


def test_network_without_replies_is_not_effective():
    # the requests went out but nothing answered
    no_replies = SNMP_END.replace("41237 0 0 3 0 0 0 0 0 41234", "7 0 0 3 0 0 0 0 0 4")
    with pytest.raises(LoadNotEffective) as raised:
        NETWORK.verify(attr.evolve(RUNNING, probe=no_replies))
    assert str(raised.value) == ("load not effective: the ping flood sent 41234 echo requests "
                                 "and got 0 replies")


def test_network_without_the_hosts_stream_is_not_effective():
    with pytest.raises(LoadNotEffective) as raised:
        NETWORK.verify(attr.evolve(RUNNING, probe=f"{ICMP_END}\n{TCP_START}"))
    assert str(raised.value) == ("load not effective: no TCP segment of the host's stream "
                                 "reached the board during the window")


# --------------------------------------------------------------- make_load ----


def test_make_load_builds_each_kind():
    assert KINDS == ("cpu", "hackbench", "memory", "disk", "network")
    assert make_load("cpu", {"percent": 25}) == CpuLoad(25)
    assert make_load("hackbench", {"groups": 2, "fds": 10, "loops": 100, "bytes": 512}) == (
        HackbenchLoad(2, 10, 100, 512))
    assert make_load("memory", {"workers": 2, "bytes": "128M"}) == MemoryLoad(2, "128M")
    assert make_load("disk", {"dir": "/data", "block_kib": 1024, "blocks": 8}) == (
        DiskLoad("/data", 1024, 8))
    network = make_load("network", {"ping_bytes": 1400})
    assert network == NetworkLoad(1400) and network.traffic is None


@pytest.mark.parametrize(("kind", "settings", "message"), [
    ("cpu50", {}, "unknown load 'cpu50' (valid: cpu, hackbench, memory, disk, network)"),
    ("cpu", {"percent": 50, "duty": 3, "cpus": 2},
     "load 'cpu': unknown setting(s) 'cpus', 'duty' (valid: percent, min_busy_fraction)"),
    ("network", {"ping_bytes": 1400, "traffic": "10.0.2.2"},
     "load 'network': unknown setting(s) 'traffic' (valid: ping_bytes)"),
    ("hackbench", {"groups": 2}, "load 'hackbench': missing setting(s) fds, loops, bytes"),
    ("cpu", {}, "load 'cpu': missing setting(s) percent"),
    ("cpu", {"percent": True}, "load 'cpu': percent must be int, got True"),
    ("cpu", {"percent": "50"}, "load 'cpu': percent must be int, got '50'"),
    ("hackbench", {"groups": 2.0, "fds": 10, "loops": 100, "bytes": 512},
     "load 'hackbench': groups must be int, got 2.0"),
    ("disk", {"dir": 5, "block_kib": 1024, "blocks": 8}, "load 'disk': dir must be str, got 5"),
    ("memory", {"workers": 2, "bytes": 10}, "load 'memory': bytes must be str, got 10"),
    ("hackbench", {"groups": 0, "fds": 10, "loops": 100, "bytes": 512},
     "load 'hackbench': groups must be greater than 0, got 0"),
    ("disk", {"dir": "/data", "block_kib": 1024, "blocks": -1},
     "load 'disk': blocks must be greater than 0, got -1"),
    ("cpu", {"percent": 0}, "load 'cpu': percent must be greater than 0, got 0"),
    ("network", {"ping_bytes": False}, "load 'network': ping_bytes must be int, got False"),
])
def test_make_load_refuses_bad_settings(kind, settings, message):
    with pytest.raises(ValueError) as raised:
        make_load(kind, settings)
    assert str(raised.value) == message


@pytest.mark.parametrize("percent", [101, 250])
def test_cpu_percent_above_100_is_refused(percent):
    with pytest.raises(ValueError) as raised:
        make_load("cpu", {"percent": percent})
    assert str(raised.value) == f"cpu percent must be an integer 1..100, got {percent}"


@pytest.mark.parametrize("percent", [1, 100])
def test_cpu_percent_bounds_are_accepted(percent):
    assert make_load("cpu", {"percent": percent}).percent == percent


def test_cpu_load_validates_when_built_directly():
    with pytest.raises(ValueError, match="cpu percent must be an integer 1..100, got True"):
        CpuLoad(True)


@pytest.mark.parametrize("size", ["1%", "10%", "99%", "100%", "128M", "1G", "512K", "4096"])
def test_memory_sizes_accepted(size):
    assert make_load("memory", {"workers": 1, "bytes": size}).bytes == size


@pytest.mark.parametrize("size", ["0%", "101%", "10 %", "128MB", "1.5G", "0M", "", "-1M",
                                  "10%%"])
def test_memory_sizes_refused(size):
    with pytest.raises(ValueError) as raised:
        make_load("memory", {"workers": 1, "bytes": size})
    assert str(raised.value) == f"memory bytes must look like '10%' or '128M', got {size!r}"


def test_cpu_proof_floor_is_a_setting_of_the_load():
    assert CpuLoad(40).min_utilisation(4) == pytest.approx(0.2)
    assert CpuLoad(40, min_busy_fraction=0.3).min_utilisation(4) == pytest.approx(0.12)
    assert make_load("cpu", {"percent": 40, "min_busy_fraction": 0.3}) == CpuLoad(40, 0.3)


@pytest.mark.parametrize("fraction", [0, -0.1, 1.5, "half", True])
def test_cpu_proof_floor_outside_0_to_1_is_refused(fraction):
    with pytest.raises(ValueError, match=r"cpu min_busy_fraction must be a number in \(0, 1\]"):
        make_load("cpu", {"percent": 40, "min_busy_fraction": fraction})
