"""rtlab.measure.conditions: the board's report of its conditions (run for real on this
host's /proc), its strict parser, the requirements of suite.yaml, and the check that makes
a run that is not what it claims void."""

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rtlab.measure import window
from rtlab.measure.conditions import (
    MARK,
    MET,
    MISMATCH,
    REQUIREMENT_KEYS,
    UNKNOWN,
    CaseConditions,
    Conditions,
    ConditionsUnreadable,
    MeasuringThreads,
    Requirements,
    RunNotValid,
    check,
    check_all,
    merge,
    parse_snapshot,
    preempt_rt_flavour,
    snapshot_command,
)
from rtlab.measure.suite import SuiteFileError, load_suite

CYCLICTEST = MeasuringThreads("cyclictest", 90, (0, 1, 2, 3))
FIFO, RR, OTHER, DEADLINE = 1, 2, 0, 6
KTHREAD = 0x00200000
# every requirement checked, so that a clean board shows each of them met
ALL = Requirements(idle_exit_latency_max_us=10)


def stat(tid: int, comm: str, *, flags: int = 0x400100, cpu: int = 0, priority: int = 0,
         policy: int | str = OTHER) -> str:
    """A /proc/<pid>/task/<tid>/stat line (fields 3 to 52; field N at N - 3)."""
    fields = ["S"] + ["0"] * 49
    fields[9 - 3], fields[39 - 3], fields[40 - 3], fields[41 - 3] = (
        str(flags), str(cpu), str(priority), str(policy))
    return f"{tid} ({comm}) " + " ".join(fields)


def task(pid: int, tid: int, comm: str, *, cpu: int = 0, policy: int = OTHER,
         priority: int = 0, allowed: str | None = "0-3", kthread: bool = False) -> list[str]:
    lines = [f"task {pid} {tid} " + stat(tid, comm, cpu=cpu, priority=priority, policy=policy,
                                         flags=0x400100 | (KTHREAD if kthread else 0))]
    if allowed is not None:
        lines.append(f"allowed {pid} {tid} {allowed}")
    return lines


def board(*, tasks: list[list[str]] | None = None, replace: dict[str, str] | None = None,
          drop: tuple[str, ...] = (), extra: tuple[str, ...] = (), tag: str = "early",
          measuring: tuple[int, ...] = (0, 1, 2, 3)) -> list[str]:
    """A clean RT board's report: cyclictest (chrt -f 90) with a SCHED_FIFO 90 thread
    pinned to each measuring CPU, the kernel's per-CPU threads at 99. ``replace`` swaps the
    line that starts with a key, ``drop`` leaves lines out by their start."""
    base = [
        *task(1, 1, "systemd"),
        *task(2, 2, "kthreadd", kthread=True),
        *(line for n in range(4) for line in task(
            10 + n, 10 + n, f"migration/{n}", cpu=n, policy=FIFO, priority=99,
            allowed=str(n), kthread=True)),
        *task(20, 20, "rcuc/1", cpu=1, policy=FIFO, priority=99, allowed="1", kthread=True),
        *task(30, 30, "irq/30-eth0", cpu=0, policy=FIFO, priority=50, kthread=True),
        *task(400, 400, "sh", cpu=0),
        *task(500, 500, "cyclictest", cpu=0, policy=FIFO, priority=90,
              allowed=",".join(map(str, measuring))),
        *(line for index, n in enumerate(measuring) for line in task(
            500, 501 + index, "cyclictest", cpu=n, policy=FIFO, priority=90, allowed=str(n))),
        *(line for lines in tasks or [] for line in lines),
        "dma          0",
        *(f"cpufreq {n} performance 996000 996000" for n in range(4)),
        *(line for n in range(4) for line in (f"idle {n} 0 0 0 POLL",
                                              f"idle {n} 1 2 0 WFI",
                                              f"idle {n} 2 150 1 deep sleep")),
        "cooling 0 0 thermal-cpufreq-0",
        "cooling 1 3 Fan",
        "rt_runtime_us -1",
        "realtime 1",
        "version #1 SMP PREEMPT_RT Debian 6.12.100-1",
        "cmdline console=ttymxc1,115200 isolcpus=3",
        "isolated ",
    ]
    lines = []
    for line in base:
        if line.startswith(drop):
            continue
        key = next((key for key in replace or {} if line.startswith(key)), None)
        if key is not None:
            line = replace.pop(key)  # type: ignore[union-attr]
        lines.append(line)
    assert not replace, f"nothing to replace for {replace}"
    return [f"{MARK}conditions-{tag}", *lines, *extra, f"{MARK}conditions-{tag}-end"]


def conditions(lines: list[str], requirements: Requirements = ALL, *, flavour: str = "rt",
               measuring: MeasuringThreads = CYCLICTEST) -> Conditions:
    return check(requirements, parse_snapshot(lines), measuring=measuring, flavour=flavour)


def status(result: Conditions) -> dict[str, str]:
    return {one.name: one.status for one in result.checks}


def only_mismatch(result: Conditions, name: str) -> list[str]:
    """The problems of ``name``, the one requirement that failed."""
    assert [one.name for one in result.mismatches] == [name], result.error_message()
    return list(result.mismatches[0].problems)


# ------------------------------------------------------------------ a clean run ----


def test_a_clean_board_meets_every_requirement_and_records_each_beside_its_finding():
    result = conditions(board())
    assert status(result) == {name: MET for name in (
        "measuring_threads", "measuring_policy", "measuring_affinity", "kernel",
        "rt_throttling", "cpu_dma_latency", "governor", "idle_exit_latency", "throttled",
        "other_rt_tasks", "isolation")}
    assert result.valid and not result.unknowns
    facts = json.loads(json.dumps(result.facts()))
    assert facts["snapshots"] == ["early"]
    assert facts["requirements"] == ALL.as_dict()
    for name, fact in facts["checks"].items():
        assert set(fact) == {"required", "found", "status"}, name
        assert fact["required"] and fact["found"], name
    assert facts["checks"]["measuring_policy"] == {
        "required": "SCHED_FIFO 90", "found": "SCHED_FIFO 90", "status": MET}
    assert facts["checks"]["rt_throttling"]["found"] == "sched_rt_runtime_us -1"
    # the deep state is disabled: only the enabled ones are a measuring CPU's
    assert "deep sleep" not in facts["checks"]["idle_exit_latency"]["found"]
    assert "(besides 5 allowed kernel thread(s))" in facts["checks"]["other_rt_tasks"]["found"]


def test_requirements_left_out_are_not_checked():
    result = conditions(board(replace={"rt_runtime_us": "rt_runtime_us 950000"}),
                        Requirements(rt_throttling="on", governor=None, throttled=None,
                                     other_rt_tasks=None, isolation=None, kernel=None,
                                     cpu_dma_latency_us=None))
    assert set(status(result)) == {"measuring_threads", "measuring_policy",
                                   "measuring_affinity"}
    assert result.valid


# ------------------------------------------------------------ the measuring threads ----


def test_a_measuring_thread_at_sched_other_is_found_and_reported():
    lines = board(replace={"task 500 503 ": task(500, 503, "cyclictest", cpu=2,
                                                  allowed="2")[0]})
    result = conditions(lines)
    assert only_mismatch(result, "measuring_policy") == [
        "measuring thread 503 on CPU2 ran at SCHED_OTHER 0, case requires SCHED_FIFO 90"]
    assert status(result)["measuring_threads"] == MET
    assert result.error_message() == (
        "the run is not what it claims: measuring thread 503 on CPU2 ran at SCHED_OTHER 0, "
        "case requires SCHED_FIFO 90")


def test_a_measuring_thread_at_another_priority_or_policy_is_reported():
    lines = board(replace={"task 500 502 ": task(500, 502, "cyclictest", cpu=1, policy=FIFO,
                                                  priority=80, allowed="1")[0],
                           "task 500 504 ": task(500, 504, "cyclictest", cpu=3, policy=RR,
                                                  priority=90, allowed="3")[0]})
    assert only_mismatch(conditions(lines), "measuring_policy") == [
        "measuring thread 502 on CPU1 ran at SCHED_FIFO 80, case requires SCHED_FIFO 90",
        "measuring thread 504 on CPU3 ran at SCHED_RR 90, case requires SCHED_FIFO 90"]
    # rr asked for: the RR thread is right and the FIFO ones are not
    rr = conditions(lines, Requirements(measuring_policy="rr"))
    assert len(rr.mismatches[0].problems) == 3


def test_a_measuring_thread_not_pinned_to_its_cpu_is_reported():
    lines = board(replace={"allowed 500 502 ": "allowed 500 502 0-3"})
    assert only_mismatch(conditions(lines), "measuring_affinity") == [
        "measuring thread 502 may run on CPUs 0,1,2,3, case requires it pinned to one CPU of "
        "0,1,2,3",
        "no measuring thread was pinned to CPU1"]


def test_two_measuring_threads_on_one_cpu_and_one_off_the_measured_cpus():
    lines = board(replace={"allowed 500 502 ": "allowed 500 502 0"},
                  measuring=(0, 1, 2, 3))
    assert only_mismatch(conditions(lines), "measuring_affinity") == [
        "measuring threads 501, 502 are all pinned to CPU0, case requires one per CPU",
        "no measuring thread was pinned to CPU1"]
    # the case measures on CPU3 only, but the run had a thread on each CPU
    result = conditions(board(), measuring=MeasuringThreads("cyclictest", 90, (3,)))
    assert status(result)["measuring_threads"] == MISMATCH
    assert ("measuring thread 501 is pinned to CPU0, which the case does not measure (CPUs 3)"
            in result.mismatches[1].problems)


def test_no_measuring_thread_is_a_mismatch_not_an_unknown():
    lines = board(drop=("task 500 50", "allowed 500 50"))
    result = conditions(lines)
    assert only_mismatch(result, "measuring_threads") == [
        "no measuring thread of cyclictest was running at the check"]
    # nothing to judge the policy and affinity by: unknown, never met
    assert status(result)["measuring_policy"] == UNKNOWN
    assert status(result)["measuring_affinity"] == UNKNOWN


def test_a_second_cyclictest_process_is_a_mismatch():
    lines = board(tasks=[task(600, 600, "cyclictest"),
                         task(600, 601, "cyclictest", policy=FIFO, priority=90)])
    problems = conditions(lines).mismatches[0].problems
    assert problems == ("2 cyclictest processes were running (pids 500, 600), the case runs "
                        "one",)


# ------------------------------------------------------------- other RT tasks ----


def test_a_competing_fifo_99_user_task_on_a_measuring_cpu_is_reported():
    lines = board(tasks=[task(77, 77, "stress", cpu=1, policy=FIFO, priority=99)])
    assert only_mismatch(conditions(lines), "other_rt_tasks") == [
        "another real-time task at or above the measuring priority: stress (pid 77) "
        "SCHED_FIFO 99 on CPU1"]


def test_competitors_at_the_measuring_priority_of_any_kind_are_reported():
    lines = board(tasks=[
        task(80, 81, "worker", cpu=2, policy=RR, priority=90),
        task(90, 90, "dl", cpu=0, policy=DEADLINE),
        # a kernel thread outside the list counts as much as a user task
        task(95, 95, "irq/40-spi", cpu=1, policy=FIFO, priority=95, kthread=True),
        # a user task cannot take an allowed kernel thread's name
        task(96, 96, "migration/2", cpu=2, policy=FIFO, priority=99, allowed="2")])
    assert only_mismatch(conditions(lines), "other_rt_tasks") == [
        "another real-time task at or above the measuring priority: worker (pid 80 tid 81) "
        "SCHED_RR 90 on CPU2",
        "another real-time task at or above the measuring priority: dl (pid 90) "
        "SCHED_DEADLINE 0 on CPU0",
        "another real-time task at or above the measuring priority: irq/40-spi (pid 95) "
        "SCHED_FIFO 95 on CPU1",
        "another real-time task at or above the measuring priority: migration/2 (pid 96) "
        "SCHED_FIFO 99 on CPU2"]


def test_rt_tasks_below_the_priority_or_off_the_measuring_cpus_are_no_competitors():
    lines = board(tasks=[task(77, 77, "stress", cpu=0, policy=FIFO, priority=89),
                         task(78, 78, "rtapp", cpu=0, policy=FIFO, priority=99, allowed="0")])
    measuring = MeasuringThreads("cyclictest", 90, (1, 2, 3))
    lines = [line for line in lines if not line.startswith(("task 500 501", "allowed 500 501"))]
    assert status(conditions(lines, measuring=measuring))["other_rt_tasks"] == MET
    # the same task may move onto a measuring CPU: its affinity counts, not only where it is
    moved = [line.replace("allowed 78 78 0", "allowed 78 78 0-1") for line in lines]
    assert status(conditions(moved, measuring=measuring))["other_rt_tasks"] == MISMATCH


def test_the_allowed_kernel_threads_at_99_are_no_mismatch_and_the_list_is_the_suites():
    # the clean board has migration/0..3 and rcuc/1 at SCHED_FIFO 99 on measuring CPUs
    assert status(conditions(board()))["other_rt_tasks"] == MET
    stricter = Requirements(allowed_rt_tasks=("migration/*",))
    assert only_mismatch(conditions(board(), stricter), "other_rt_tasks") == [
        "another real-time task at or above the measuring priority: rcuc/1 (pid 20) "
        "SCHED_FIFO 99 on CPU1"]


# --------------------------------------------------------------- the kernel ----


def test_rt_throttling_on_is_reported():
    lines = board(replace={"rt_runtime_us": "rt_runtime_us 950000"})
    assert only_mismatch(conditions(lines), "rt_throttling") == [
        "RT throttling on: sched_rt_runtime_us 950000, case requires -1 (off)"]


def test_an_rt_flavour_on_a_kernel_without_preempt_rt_is_reported():
    lines = board(replace={"version": "version #1 SMP PREEMPT Debian 6.12.100-1",
                           "realtime": "realtime absent"})
    assert only_mismatch(conditions(lines), "kernel") == [
        "flavour rt requires a PREEMPT_RT kernel: uname -v '#1 SMP PREEMPT Debian "
        "6.12.100-1', /sys/kernel/realtime absent"]
    # where the kernel has the RT patch set's flag, it must say so too
    half = board(replace={"realtime": "realtime 0"})
    assert only_mismatch(conditions(half), "kernel") == [
        "flavour rt requires a PREEMPT_RT kernel: uname -v '#1 SMP PREEMPT_RT Debian "
        "6.12.100-1', /sys/kernel/realtime 0"]
    # a mainline PREEMPT_RT kernel has no such flag: uname -v decides
    mainline = board(replace={"realtime": "realtime absent"})
    assert status(conditions(mainline))["kernel"] == MET


def test_a_stock_flavour_on_a_preempt_rt_kernel_is_reported():
    assert only_mismatch(conditions(board(), flavour="std"), "kernel") == [
        "flavour std requires a kernel without PREEMPT_RT: uname -v '#1 SMP PREEMPT_RT "
        "Debian 6.12.100-1', /sys/kernel/realtime 1"]
    stock = board(replace={"version": "version #1 SMP PREEMPT_DYNAMIC Debian 6.1.1",
                           "realtime": "realtime absent"})
    assert status(conditions(stock, flavour="std"))["kernel"] == MET
    assert status(conditions(stock, flavour="preempt-voluntary"))["kernel"] == MET
    assert status(conditions(stock, flavour="preempt-rt"))["kernel"] == MISMATCH


def test_flavours_are_rt_as_thresholds_and_kernel_flavours_name_them():
    assert preempt_rt_flavour("rt") and preempt_rt_flavour("preempt-rt")
    assert preempt_rt_flavour("preempt-rt-hardened")
    assert not any(map(preempt_rt_flavour, ("std", "preempt", "preempt-none", "debian")))


# ----------------------------------------------------------------- the CPUs ----


def test_a_measuring_cpu_with_another_governor_is_reported():
    lines = board(replace={"cpufreq 0": "cpufreq 0 ondemand 396000 996000"})
    assert only_mismatch(conditions(lines), "governor") == [
        "CPU0 governor ondemand, case requires performance"]
    # a CPU the case does not measure on may have any governor
    measuring = MeasuringThreads("cyclictest", 90, (1, 2, 3))
    lines = [line for line in lines if not line.startswith(("task 500 501", "allowed 500 501"))]
    assert status(conditions(lines, measuring=measuring))["governor"] == MET


def test_a_dma_latency_target_above_the_requirement_is_reported():
    lines = board(replace={"dma": "dma   2000000000"})
    assert only_mismatch(conditions(lines), "cpu_dma_latency") == [
        "/dev/cpu_dma_latency 2000000000 µs, case requires 0"]
    assert conditions(lines, Requirements(cpu_dma_latency_us=2_000_000_000)).valid
    assert conditions(lines, Requirements(cpu_dma_latency_us=None)).valid


def test_an_enabled_idle_state_deeper_than_allowed_is_reported():
    lines = board(replace={"idle 1 2 ": "idle 1 2 150 0 deep sleep"})
    assert only_mismatch(conditions(lines), "idle_exit_latency") == [
        "CPU1 idle state deep sleep (exit latency 150 µs) enabled, case allows at most 10 µs"]
    # the board's default (not checked) lets it be
    assert "idle_exit_latency" not in status(conditions(lines, Requirements()))


def test_a_throttling_cpu_cooling_device_is_reported_and_a_fan_is_not():
    lines = board(replace={"cooling 0": "cooling 0 2 thermal-cpufreq-0"})
    assert only_mismatch(conditions(lines), "throttled") == [
        "thermal throttling: cooling device 0 (thermal-cpufreq-0) at state 2, case requires "
        "none"]
    # the clean board's fan runs at state 3: not a CPU's throttling
    assert status(conditions(board()))["throttled"] == MET


# ------------------------------------------------------------------ isolation ----


def isolated_board(*tasks: list[str]) -> list[str]:
    """CPU3 isolated and the only one measured: cyclictest and its thread there."""
    lines = board(tasks=list(tasks), measuring=(3,), replace={"isolated": "isolated 3"})
    return lines


ON_CPU3 = MeasuringThreads("cyclictest", 90, (3,))


def test_a_user_task_on_an_isolated_measuring_cpu_breaks_isolation():
    # the program's main thread runs there too (cyclictest -a binds it), and kernel threads
    assert status(conditions(isolated_board(), measuring=ON_CPU3))["isolation"] == MET
    lines = isolated_board(task(300, 300, "sshd", cpu=3))
    assert only_mismatch(conditions(lines, measuring=ON_CPU3), "isolation") == [
        "isolation broken: sshd (pid 300) on isolated CPU3"]
    bound = isolated_board(task(301, 302, "logger", cpu=0, allowed="3"))
    assert only_mismatch(conditions(bound, measuring=ON_CPU3), "isolation") == [
        "isolation broken: logger (pid 301 tid 302) may run only on isolated CPUs 3"]


def test_isolation_of_cpus_that_are_not_measured_is_not_this_runs_business():
    lines = board(replace={"isolated": "isolated 3"},
                  tasks=[task(300, 300, "sshd", cpu=3)])
    measuring = MeasuringThreads("cyclictest", 90, (0, 1, 2))
    lines = [line for line in lines if not line.startswith(("task 500 504", "allowed 500 504"))]
    result = conditions(lines, measuring=measuring)
    assert status(result)["isolation"] == MET
    assert result.checks[-1].found == "no measuring CPU is isolated (isolated: 3)"


# -------------------------------------------------------------------- unknowns ----


def test_facts_the_board_cannot_report_are_unknown_never_met():
    lines = board(replace={"dma": "dma unknown"},
                  drop=("cpufreq", "idle", "cooling", "rt_runtime_us", "realtime",
                        "isolated"),
                  extra=tuple(f"cpufreq {n} unknown unknown unknown" for n in range(4)))
    result = conditions(lines)
    assert {one.name for one in result.unknowns} == {
        "rt_throttling", "cpu_dma_latency", "governor", "idle_exit_latency",
        "throttled", "isolation"}
    assert result.valid
    # the kernel's model is unknown only where uname -v could not be read
    unread = board(replace={"version": "version unknown"}, drop=("realtime",))
    assert status(conditions(unread))["kernel"] == UNKNOWN
    snapshot = parse_snapshot(lines)
    assert (snapshot.dma_latency_us, snapshot.rt_runtime_us, snapshot.realtime,
            snapshot.isolated) == (None, None, None, None)
    assert snapshot.cpus[0].governor is None and snapshot.cpus[0].idle_states is None
    facts = result.facts()["checks"]
    assert facts["cpu_dma_latency"] == {"required": "0 µs or less", "found": "unreadable",
                                        "status": UNKNOWN}
    assert facts["throttled"]["found"] == "no CPU cooling device"


def test_an_unknown_affinity_leaves_the_pinning_unknown():
    lines = board(drop=("allowed 500 503",))
    assert status(conditions(lines))["measuring_affinity"] == UNKNOWN
    assert parse_snapshot(lines).tasks[-2].allowed is None


# ------------------------------------------------------- several snapshots ----


def test_a_mismatch_in_any_snapshot_is_a_mismatch():
    late = board(tag="late", replace={"task 500 503 ": task(500, 503, "cyclictest", cpu=2,
                                                             allowed="2")[0]})
    snapshots = [parse_snapshot(board()), parse_snapshot(late)]
    result = check_all(ALL, snapshots, measuring=CYCLICTEST, flavour="rt")
    assert result.snapshots == ("early", "late")
    assert only_mismatch(result, "measuring_policy") == [
        "measuring thread 503 on CPU2 ran at SCHED_OTHER 0, case requires SCHED_FIFO 90 "
        "(at the late check)"]
    found = result.facts()["checks"]["measuring_policy"]["found"]
    assert found == "early: SCHED_FIFO 90; late: SCHED_FIFO 90, SCHED_OTHER 0"
    # the same problem in both is named once, at both
    both = merge(check(ALL, parse_snapshot(late), measuring=CYCLICTEST, flavour="rt"),
                 check(ALL, parse_snapshot(late), measuring=CYCLICTEST, flavour="rt"))
    assert both.mismatches[0].problems == (
        "measuring thread 503 on CPU2 ran at SCHED_OTHER 0, case requires SCHED_FIFO 90 "
        "(at the late+late check)",)


def test_met_in_one_snapshot_and_unknown_in_another_is_unknown():
    blind = board(tag="late", replace={"dma": "dma unknown"})
    result = check_all(ALL, [parse_snapshot(board()), parse_snapshot(blind)],
                       measuring=CYCLICTEST, flavour="rt")
    assert status(result)["cpu_dma_latency"] == UNKNOWN
    assert status(result)["governor"] == MET


def test_run_not_valid_carries_the_conditions():
    result = conditions(board(replace={"rt_runtime_us": "rt_runtime_us 950000"}))
    error = RunNotValid(result)
    assert error.conditions is result
    assert str(error) == ("the run is not what it claims: RT throttling on: "
                          "sched_rt_runtime_us 950000, case requires -1 (off)")
    with pytest.raises(ValueError, match="without a mismatch"):
        RunNotValid(conditions(board()))


# ------------------------------------------------------------ garbled reports ----


@pytest.mark.parametrize(("line", "why"), [
    ("task 500 501 501 (cyclictest S 0 0", "not 'task PID TID' and a /proc stat line"),
    ("task 500 501 " + stat(502, "cyclictest"), "not 'task PID TID' and a /proc stat line"),
    ("task 500 501 " + stat(501, "cyclictest")[:60], "not 'task PID TID' and a /proc stat"),
    ("task 500 501 " + stat(501, "cyclictest", policy="x"), "not a number: 'x'"),
    ("allowed 500 501 0-3x", "not a CPU list: '0-3x'"),
    ("cpufreq 0 performance", "expected 4 fields"),
    ("idle 0 1 fast 0 WFI", "not a number: 'fast'"),
    ("dma 2e9", "not a number: '2e9'"),
    ("realtime", "a second 'realtime' line"),
    # a kernel message on the console, mixed into the report
    ("[  12.345] imx-sdma 20ec000.sdma: loaded firmware", "unknown key '['"),
    ("rt_runtime_us -1", "a second 'rt_runtime_us' line"),
])
def test_a_garbled_line_is_refused_naming_it(line, why):
    lines = board(extra=(line,), drop=("dma",) if line.startswith("dma") else ())
    with pytest.raises(ConditionsUnreadable) as raised:
        parse_snapshot(lines)
    message = str(raised.value)
    assert message.startswith("the board's conditions (early) have a garbled line (")
    assert why in message
    assert message.endswith(f": {line!r}")


def test_a_comm_with_spaces_and_parentheses_ends_at_the_last_parenthesis():
    lines = board(tasks=[task(70, 70, "evil) S 1 (x", cpu=2, policy=FIFO, priority=99)])
    snapshot = parse_snapshot(lines)
    evil = next(one for one in snapshot.tasks if one.pid == 70)
    assert (evil.comm, evil.cpu, evil.policy, evil.priority) == ("evil) S 1 (x", 2, FIFO, 99)


def test_a_missing_or_cut_short_report_is_refused():
    with pytest.raises(ConditionsUnreadable, match=r"conditions \(late\) are missing"):
        parse_snapshot(board(), "late")
    with pytest.raises(ConditionsUnreadable,
                       match="conditions \\(early\\) are cut short: no "
                             "'rtlab-evidence:conditions-early-end' line"):
        parse_snapshot(board()[:-1])
    with pytest.raises(ConditionsUnreadable, match="in its output 2 times"):
        parse_snapshot(board() + board())
    # two tags in one output: each by its own
    both = board() + board(tag="late", replace={"dma": "dma 5"})
    assert parse_snapshot(both, "late").dma_latency_us == 5
    assert parse_snapshot(both, "early").dma_latency_us == 0


def test_the_marker_is_the_windows():
    assert MARK == window.MARK


# ------------------------------------------------------ the board's real shell ----


SHELLS = [["sh"], ["busybox", "sh"]]


@pytest.mark.parametrize("shell", SHELLS, ids=lambda shell: " ".join(shell))
def test_the_snapshot_runs_in_a_posix_shell_on_real_proc(shell, tmp_path):
    if shutil.which(shell[0]) is None:
        # the boards' shell is busybox ash: it must be tested, not skipped
        pytest.fail(f"no {shell[0]} on this host: scripts/bootstrap.sh installs "
                    "busybox-static")
    ready, done = threading.Event(), threading.Event()

    def waiting() -> None:
        ready.set()
        done.wait(30)

    helper = threading.Thread(target=waiting)
    helper.start()
    ready.wait(5)
    out = tmp_path / "conditions.out"
    try:
        # as the window runs it: in the background, appended to a file
        subprocess.run([*shell, "-c", f"{snapshot_command('mid')} >>{out} & wait"],
                       check=True, timeout=60)
    finally:
        done.set()
        helper.join()
    lines = out.read_text().splitlines()
    snapshot = parse_snapshot(lines)
    # timed by the board's clock, the system's facts read before the walk of every task
    # (which takes seconds on a slow board)
    assert snapshot.seconds is not None and 0 <= snapshot.seconds < 30
    keys = [line.partition(" ")[0] for line in lines]
    assert keys[1] == "began" and keys[-2] == "ended"
    assert keys.index("rt_runtime_us") < keys.index("task")
    pid = os.getpid()
    me = next(one for one in snapshot.tasks if (one.pid, one.tid) == (pid, pid))
    comm = Path("/proc/self/comm").read_text().rstrip("\n")
    assert (me.comm, me.policy, me.priority, me.kernel_thread) == (comm, OTHER, 0, False)
    assert me.allowed == tuple(sorted(os.sched_getaffinity(0)))
    thread = next(one for one in snapshot.tasks if one.tid == helper.native_id)
    assert thread.pid == pid
    assert snapshot.kernel_version == os.uname().version
    assert snapshot.rt_runtime_us == int(
        Path("/proc/sys/kernel/sched_rt_runtime_us").read_text())
    assert snapshot.cmdline == Path("/proc/cmdline").read_text().rstrip("\n")
    cpus = sorted(int(path.name[3:]) for path in Path("/sys/devices/system/cpu").glob("cpu*")
                  if path.name[3:].isdigit())
    assert [state.cpu for state in snapshot.cpus] == cpus
    # this process's threads as if they measured: found, and reported at SCHED_OTHER
    result = check(Requirements(), snapshot, flavour="std",
                   measuring=MeasuringThreads(comm, 90, tuple(os.sched_getaffinity(0))))
    assert result.facts()["snapshot_seconds"] == {"mid": snapshot.seconds}
    policy = next(one for one in result.checks if one.name == "measuring_policy")
    assert policy.status == MISMATCH
    assert any(problem.startswith(f"measuring thread {helper.native_id} on CPU")
               and problem.endswith("ran at SCHED_OTHER 0, case requires SCHED_FIFO 90")
               for problem in policy.problems)


def test_the_snapshot_command_is_one_line_and_refuses_a_tag_that_could_end_it():
    command = snapshot_command("late")
    assert "\n" not in command
    assert command.startswith(f"{{ echo {MARK}conditions-late; ")
    assert command.endswith(f"echo {MARK}conditions-late-end; }} 2>/dev/null")
    with pytest.raises(ValueError, match="letters, digits or _"):
        snapshot_command("early-end")


# ------------------------------------------------------------- suite.yaml ----


def test_the_repository_suite_requires_a_clean_rt_run_and_relaxes_emulated_boards():
    suite = load_suite()
    assert suite.requirements == Requirements()
    assert suite.requirements.allowed_rt_tasks == (
        "migration/*", "watchdog/*", "idle_inject/*", "cpuhp/*", "ktimers/*", "rcuc/*",
        "rcub/*")
    assert suite.requirements_for("imx6q") == Requirements()
    qemu = suite.requirements_for("qemu-imx6q", "hackbench")
    assert qemu == Requirements(governor=None, throttled=None, cpu_dma_latency_us=None,
                                measuring_policy=None, checked=None)
    assert suite.for_board("qemu-imx6q").requirements == qemu
    assert suite.for_board("rpi3") is suite
    assert set(Requirements().as_dict()) == set(REQUIREMENT_KEYS)


SUITE = """\
cyclictest:
  intervals_us: [100]
  histogram_us: 400
  priority: 90
scenarios:
  idle:
    loads: {}
  isolated:
    cpus: isolated
    loads: {}
    requirements: {idle_exit_latency_max_us: 5}
requirements:
  governor: schedutil
  rt_throttling: null
  allowed_rt_tasks: [migration/*]
  boards:
    qemu-*: {governor: null, cpu_dma_latency_us: 100}
    rpi*: {idle_exit_latency_max_us: 50}
"""


def test_requirements_per_suite_board_and_scenario(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE, encoding="utf-8")
    suite = load_suite(path)
    base = Requirements(governor="schedutil", rt_throttling=None,
                        allowed_rt_tasks=("migration/*",))
    assert suite.requirements == base
    assert suite.requirements_for("imx6q", "idle") == base
    assert suite.requirements_for("qemu-x", "idle") == Requirements(
        governor=None, rt_throttling=None, allowed_rt_tasks=("migration/*",),
        cpu_dma_latency_us=100)
    # the scenario's own over the board's
    assert suite.requirements_for("rpi3", "isolated").idle_exit_latency_max_us == 5
    assert suite.requirements_for("rpi3", "idle").idle_exit_latency_max_us == 50


@pytest.mark.parametrize(("old", "new", "message"), [
    ("  governor: schedutil", "  govenor: schedutil",
     "requirements: unknown key 'govenor' (expected one of: measuring_policy, "
     "cpu_dma_latency_us, governor, rt_throttling, idle_exit_latency_max_us, throttled, "
     "other_rt_tasks, isolation, kernel, allowed_rt_tasks, checked, boards)"),
    ("    rpi*: {idle_exit_latency_max_us: 50}", "    rpi*: {idle_latency: 50}",
     "requirements.boards.rpi*: unknown key 'idle_latency' (expected one of: "
     "measuring_policy, cpu_dma_latency_us, governor, rt_throttling, "
     "idle_exit_latency_max_us, throttled, other_rt_tasks, isolation, kernel, "
     "allowed_rt_tasks, checked)"),
    ("    requirements: {idle_exit_latency_max_us: 5}", "    requirements: {isolaton: null}",
     "scenarios.isolated.requirements: unknown key 'isolaton' (expected one of: "
     "measuring_policy, cpu_dma_latency_us, governor, rt_throttling, "
     "idle_exit_latency_max_us, throttled, other_rt_tasks, isolation, kernel, "
     "allowed_rt_tasks, checked)"),
    ("  rt_throttling: null", "  rt_throttling: disabled",
     "requirements.rt_throttling must be one of off, on, null, got 'disabled'"),
    ("  rt_throttling: null", "  measuring_policy: other",
     "requirements.measuring_policy must be one of fifo, rr, null, got 'other'"),
    ("    qemu-*: {governor: null, cpu_dma_latency_us: 100}",
     "    qemu-*: {cpu_dma_latency_us: -1}",
     "requirements.boards.qemu-*.cpu_dma_latency_us must be an integer >= 0 (µs) or null, "
     "got -1"),
    ("  allowed_rt_tasks: [migration/*]", "  allowed_rt_tasks: migration/*",
     "requirements.allowed_rt_tasks must be a list of task name patterns, got "
     "'migration/*'"),
    ("    rpi*: {idle_exit_latency_max_us: 50}", "    rpi*: {}",
     "requirements.boards.rpi* must be a mapping of requirements"),
])
def test_bad_requirements_are_refused_with_file_and_line(tmp_path, old, new, message):
    assert SUITE.count(old) == 1, old
    text = SUITE.replace(old, new)
    path = tmp_path / "suite.yaml"
    path.write_text(text, encoding="utf-8")
    line = text.splitlines().index(new) + 1
    with pytest.raises(SuiteFileError) as raised:
        load_suite(path)
    assert str(raised.value) == f"{path}:{line}: {message}"


# ------------------------------------------- the window's checks, run for real ----

FAKE_CYCLICTEST = '''#!{python}
"""cyclictest as the checks see it: a main thread and one thread pinned to each CPU given,
at the policy it was started with; RENICE_AFTER: one thread drops to SCHED_OTHER then."""
import os, sys, threading, time
cpus = [int(c) for c in sys.argv[1].split(",")]
duration, renice = float(sys.argv[2]), float(os.environ.get("RENICE_AFTER", "0"))
def measure(cpu):
    os.sched_setaffinity(threading.get_native_id(), {{cpu}})
    slept = 0.0
    if renice and cpu == cpus[-1]:
        time.sleep(renice)
        slept = renice
        os.sched_setscheduler(threading.get_native_id(), os.SCHED_OTHER, os.sched_param(0))
    time.sleep(duration - slept)
threads = [threading.Thread(target=measure, args=(cpu,)) for cpu in cpus]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
'''


def run_checked_window(tmp_path: Path, *, renice_after: float = 0) -> list[str]:
    """A window of 4 s with its checks, on this host: the window script's begin and end
    actions run by sh, the program a stand-in for cyclictest under chrt -f 10."""
    fake = tmp_path / "cyclictest"
    fake.write_text(FAKE_CYCLICTEST.format(python=sys.executable))
    fake.chmod(0o755)
    cpus = tuple(sorted(os.sched_getaffinity(0)))[:2]
    script = tmp_path / "window.sh"
    script.write_text(window.window_script(
        ["chrt", "-f", "10", str(fake), ",".join(map(str, cpus)), "4"], [], len(cpus), 10,
        conditions=host_conditions(cpus), window_s=4))
    environment = {**os.environ, "RENICE_AFTER": str(renice_after)}
    subprocess.run(["sh", str(script), "begin"], check=True, env=environment,
                   capture_output=True, timeout=30)
    end = subprocess.run(["sh", str(script), "end"], check=True, capture_output=True,
                         text=True, timeout=60)
    return end.stdout.splitlines()


def host_conditions(cpus: tuple[int, ...]) -> CaseConditions:
    # this host's other real-time tasks, kernel and settings are not the test's
    only_the_threads = Requirements(cpu_dma_latency_us=None, governor=None, rt_throttling=None,
                                    throttled=None, other_rt_tasks=None, isolation=None,
                                    kernel=None)
    return CaseConditions(only_the_threads, MeasuringThreads("cyclictest", 10, cpus), "rt")


needs_root_and_chrt = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("chrt") is None,
    reason="SCHED_FIFO threads need root and util-linux's chrt")


@needs_root_and_chrt
def test_the_window_checks_find_the_measuring_threads_on_a_real_kernel(tmp_path):
    lines = run_checked_window(tmp_path)
    cpus = tuple(sorted(os.sched_getaffinity(0)))[:2]
    found = host_conditions(cpus).judge(lines)
    assert found.valid, found.error_message()
    assert found.snapshots == ("early", "late")
    assert status(found)["measuring_policy"] == MET
    assert status(found)["measuring_affinity"] == MET


@needs_root_and_chrt
def test_a_thread_that_drops_to_sched_other_mid_window_is_caught_by_the_late_check(tmp_path):
    lines = run_checked_window(tmp_path, renice_after=1.5)
    cpus = tuple(sorted(os.sched_getaffinity(0)))[:2]
    found = host_conditions(cpus).judge(lines)
    assert [one.name for one in found.mismatches] == ["measuring_policy"]
    (problem,) = found.mismatches[0].problems
    assert f"on CPU{cpus[-1]} ran at SCHED_OTHER 0, case requires SCHED_FIFO 10" in problem
    assert problem.endswith("(at the late check)")
