"""rtlab.measure.rttests against real rt-tests 2.4 output from the virtual boards
(tests/data/rttests/README.md says how each file was captured or derived)."""

import json
import os
import re
import stat
import subprocess
import threading
from pathlib import Path

import attr
import pytest

from rtlab.measure.rttests import (
    TESTS,
    FunctionalResult,
    LatencyResult,
    RtTestsParseError,
    ToolUnsupported,
    Verdict,
    check_console,
)
from rtlab.measure.rttests import board as rt_board
from rtlab.measure.rttests.board import (
    HANG_MARGIN_S,
    KILLED,
    PIP_STRESS_OUT,
    PIP_STRESS_RUNS,
    RUN_MARK,
    BoardRun,
    board_run,
    combine,
    hung,
    judge,
)
from rtlab.measure.rttests.oslat import oslat_command, parse_oslat_json
from rtlab.measure.rttests.pairs import (
    PairLatency,
    parse_pair_json,
    pmqtest_command,
    ptsematest_command,
    sigwaittest_command,
)
from rtlab.measure.rttests.pi_stress import parse_pi_stress, pi_stress_command
from rtlab.measure.rttests.pip_stress import parse_pip_stress, pip_stress_command
from rtlab.measure.rttests.signaltest import parse_signaltest_json, signaltest_command

DATA = Path(__file__).resolve().parents[1] / "data" / "rttests"
PAIR_TOOLS = ("ptsematest", "pmqtest", "sigwaittest")
BOARDS = ("imx6q-rt", "rpi3-rt")
PAIR_BUILDERS = {"ptsematest": ptsematest_command, "pmqtest": pmqtest_command,
                 "sigwaittest": sigwaittest_command}


def text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def captured_argv(tool: str) -> list[str]:
    """What the boards ran for the captures (5 s, the tool's name for the JSON file)."""
    json_path = f"/tmp/{tool}.json"
    if tool in PAIR_BUILDERS:
        return PAIR_BUILDERS[tool](duration_s=5, json_path=json_path)
    if tool == "signaltest":
        return signaltest_command(duration_s=5, json_path=json_path)
    assert tool == "pi_stress"
    return pi_stress_command(duration_s=5, json_path=json_path)


# ---------------------------------------------------------------- commands ----


def test_pair_commands_are_smp_quiet_json_with_duration_in_seconds():
    assert ptsematest_command(duration_s=5, json_path="/tmp/p.json") == [
        "ptsematest", "-S", "-p", "90", "-i", "1000", "-D", "5", "-q", "--json=/tmp/p.json"]
    assert pmqtest_command(duration_s=7, json_path="/tmp/q.json", priority=80,
                           interval_us=500) == [
        "pmqtest", "-S", "-p", "80", "-i", "500", "-D", "7", "-q", "--json=/tmp/q.json"]


def test_sigwaittest_uses_threads_and_affinity_because_it_has_no_smp_option():
    argv = sigwaittest_command(duration_s=5, json_path="/tmp/s.json")
    assert "-S" not in argv
    assert argv[:3] == ["sigwaittest", "-t", "-a"]
    assert argv[argv.index("-D") + 1] == "5"


def test_signaltest_command_names_its_ring_size_and_locks_memory():
    argv = signaltest_command(duration_s=5, json_path="/tmp/s.json", threads=3, priority=95)
    assert argv == ["signaltest", "-t", "3", "-m", "-p", "95", "-D", "5", "-q",
                    "--json=/tmp/s.json"]


def test_oslat_command_pins_cpus_and_refuses_cpu0():
    assert oslat_command(duration_s=3, json_path="/tmp/o.json", cpus="1-3", priority=90) == [
        "oslat", "-c", "1-3", "-f", "90", "-D", "3", "-q", "--json=/tmp/o.json"]
    # a SCHED_FIFO loop beside oslat's main thread hung the emulated Pi
    for cpus in ("0", "0-3", "2,0", "1,0-1"):
        with pytest.raises(ValueError, match="CPU 0"):
            oslat_command(duration_s=3, json_path="/tmp/o.json", cpus=cpus)
    with pytest.raises(ValueError, match="CPU list"):
        oslat_command(duration_s=3, json_path="/tmp/o.json", cpus="all")


def test_functional_commands():
    assert pi_stress_command(duration_s=5, json_path="/tmp/pi.json") == [
        "pi_stress", "-m", "-D", "5", "-q", "--json=/tmp/pi.json"]
    assert pip_stress_command() == ["pip_stress"]


@pytest.mark.parametrize("bad", [
    {"duration_s": 0}, {"duration_s": True}, {"priority": 0}, {"priority": 100},
    {"interval_us": 0}, {"json_path": ""}, {"json_path": "/tmp/a b.json"},
])
def test_builders_refuse_bad_values(bad):
    values = {"duration_s": 5, "json_path": "/tmp/p.json", **bad}
    with pytest.raises(ValueError):
        ptsematest_command(**values)


def test_signaltest_refuses_a_ring_of_one():
    # signaltest would print its usage and exit 0
    with pytest.raises(ValueError, match="threads"):
        signaltest_command(duration_s=5, json_path="/tmp/s.json", threads=1)


@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("tool", [*PAIR_TOOLS, "signaltest", "pi_stress"])
def test_the_captures_ran_exactly_the_built_command(board, tool):
    cmdline = json.loads(text(f"{board}-{tool}.json"))["cmdline:"]
    assert cmdline == " ".join(captured_argv(tool))


def test_the_oslat_capture_ran_the_built_command():
    cmdline = json.loads(text("rpi3-rt-oslat-c1-3-f90.json"))["cmdline:"]
    argv = oslat_command(duration_s=3, json_path="/tmp/o.json", cpus="1-3", priority=90)
    assert cmdline == " ".join(argv)


# -------------------------------------------------------------------- table ----


def test_table_flags_appear_in_the_commands_it_describes():
    for name, spec in TESTS.items():
        assert spec.name == name and spec.argv[0] == name
        for flag in (*spec.threads, spec.priority, spec.duration):
            if flag is not None:
                assert flag in spec.argv, (name, flag)
        assert any(word.startswith("--json=") for word in spec.argv) == spec.json, name
        assert ("-q" in spec.argv) == (name != "pip_stress"), name


def test_table_functional_and_metrics():
    functional = {name for name, spec in TESTS.items() if spec.functional}
    assert functional == {"pi_stress", "pip_stress"}
    for name, spec in TESTS.items():
        if spec.functional:
            assert spec.metrics == ("inversions",)
        else:
            assert {"min_us", "avg_us", "max_us", "samples"} <= set(spec.metrics), name
    assert "timeouts" in TESTS["pmqtest"].metrics
    assert TESTS["pip_stress"].duration is None and not TESTS["pip_stress"].json


# ------------------------------------------------------- pair tools, real ----


def test_ptsematest_on_the_plain_kernel_says_it_is_not_realtime():
    argv = ptsematest_command(duration_s=3, json_path="/tmp/ptsematest.json")
    result = parse_pair_json("ptsematest", text("imx6q-std-ptsematest.json"), "std.json",
                             argv=argv, expected_threads=4)
    assert result.run.sysinfo.realtime is False
    assert result.run.sysinfo.release == "6.1.0-50-armmp"
    assert (result.threads[0].samples, result.threads[0].avg_us) == (569, 144.63)
    assert (result.min_us, result.max_us) == (92, 8761)


def test_ptsematest_imx6q_figures():
    argv = captured_argv("ptsematest")
    result = parse_pair_json("ptsematest", text("imx6q-rt-ptsematest.json"), "pt.json",
                             argv=argv, expected_threads=4)
    assert result.tool == "ptsematest"
    assert result.run.sysinfo.release == "6.1.0-50-rt-armmp"
    assert result.run.sysinfo.realtime is True
    assert result.run.rt_test_version == "2.40"
    first = result.threads[0]
    assert isinstance(first, PairLatency)
    assert (first.cpu, first.sender_cpu, first.priority, first.interval_us) == (0, 0, 90, 1000)
    assert (first.samples, first.min_us, first.avg_us, first.max_us) == (942, 98, 236.49, 42290)
    assert first.timeouts is None
    assert [pair.interval_us for pair in result.threads] == [1000, 1500, 2000, 2500]
    assert [pair.cpu for pair in result.threads] == [0, 1, 2, 3]
    assert (result.min_us, result.max_us, result.samples) == (95, 48010, 942 + 707 + 519 + 470)
    expected_avg = (236.49 * 942 + 289.84 * 707 + 246.56 * 519 + 237.45 * 470) / 2638
    assert result.avg_us == pytest.approx(expected_avg)


def test_pmqtest_and_sigwaittest_imx6q_figures():
    pmq = parse_pair_json("pmqtest", text("imx6q-rt-pmqtest.json"), "pmq.json")
    assert [pair.timeouts for pair in pmq.threads] == [0, 0, 0, 0]
    assert pmq.max_us == 3092 and pmq.threads[1].max_us == 3092
    assert pmq.threads[3].avg_us == 198.93
    sig = parse_pair_json("sigwaittest", text("imx6q-rt-sigwaittest.json"), "sig.json")
    # -t -a lowers the priority by one per pair
    assert [pair.priority for pair in sig.threads] == [90, 89, 88, 87]
    assert sig.max_us == 273589 and sig.threads[3].samples == 184


def test_rpi3_pair_figures():
    pt = parse_pair_json("ptsematest", text("rpi3-rt-ptsematest.json"), "pt.json",
                         argv=captured_argv("ptsematest"), expected_threads=4)
    assert pt.run.sysinfo.machine == "aarch64"
    assert (pt.threads[0].samples, pt.threads[0].max_us) == (3235, 9906)
    pmq = parse_pair_json("pmqtest", text("rpi3-rt-pmqtest.json"), "pmq.json")
    assert pmq.max_us == 7126
    sig = parse_pair_json("sigwaittest", text("rpi3-rt-sigwaittest.json"), "sig.json")
    assert (sig.min_us, sig.max_us) == (47, 8555)


_SUMMARY = re.compile(r"^#(\d+) -> #(\d+), Min +(\d+), Cur +(\d+), Avg +(\d+), Max +(\d+)$",
                      re.MULTILINE)


@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("tool", PAIR_TOOLS)
def test_pair_json_agrees_with_the_console_summary_of_the_same_run(board, tool):
    result = parse_pair_json(tool, text(f"{board}-{tool}.json"), "j")
    summary = _SUMMARY.findall(text(f"{board}-{tool}.stdout"))
    assert len(summary) == len(result.threads) == 4
    for pair, (sender, receiver, low, _cur, avg, high) in zip(result.threads, summary,
                                                              strict=True):
        assert (int(sender), int(receiver)) == (2 * pair.thread + 1, 2 * pair.thread)
        assert (pair.min_us, pair.max_us) == (int(low), int(high))
        # the summary is taken a little before the threads stop (the last samples of
        # rpi3's pmqtest moved pair 1's average from 91 to 93.35)
        assert abs(pair.avg_us - int(avg)) <= max(1.0, 0.05 * pair.avg_us)


# -------------------------------------------------------- signaltest, real ----


def test_signaltest_gates_on_thread_0_only():
    result = parse_signaltest_json(text("imx6q-rt-signaltest.json"), "sig.json",
                                   argv=captured_argv("signaltest"), expected_threads=2)
    assert result.gated == (0,)
    assert (result.max_us, result.min_us, result.samples) == (29397, 487, 581)
    assert result.avg_us == pytest.approx(7288.92)
    # thread 1's round trip includes thread 0's 10 ms sleeps: not the latency
    assert result.threads[1].max_us == 45927
    assert all(thread.cpu is None for thread in result.threads)
    rpi = parse_signaltest_json(text("rpi3-rt-signaltest.json"), "sig.json")
    assert (rpi.max_us, rpi.avg_us, rpi.samples) == (10235, 264.55, 5425)
    assert rpi.threads[1].avg_us == 912.27


# ------------------------------------------------------------- oslat, real ----


def test_oslat_one_cpu_figures():
    result = parse_oslat_json(text("rpi3-rt-oslat-c1.json"), "oslat.json", expected_threads=1)
    (cpu,) = result.threads
    assert (cpu.cpu, cpu.freq_mhz, cpu.min_us, cpu.max_us) == (1, 62, 1, 73264)
    assert cpu.avg_us == 1.084049 and cpu.duration_s == 3.03
    assert cpu.histogram[32] == 1141 and cpu.histogram[1] == 18626865
    assert 13 not in cpu.histogram  # empty buckets are left out of the JSON
    assert cpu.samples == 18629245 and cpu.buckets == 32
    assert result.max_us == 73264


def test_oslat_three_cpus_figures():
    argv = oslat_command(duration_s=3, json_path="/tmp/o.json", cpus="1-3", priority=90)
    result = parse_oslat_json(text("rpi3-rt-oslat-c1-3-f90.json"), "o.json", argv=argv,
                              expected_threads=3)
    assert [cpu.cpu for cpu in result.threads] == [1, 2, 3]
    assert [cpu.max_us for cpu in result.threads] == [52576, 64839, 57648]
    assert result.max_us == 64839
    f1 = parse_oslat_json(text("rpi3-rt-oslat-c1-3-f1.json"), "o.json")
    assert f1.max_us == 68209


@pytest.mark.parametrize("name", ["rpi3-rt-oslat-c1", "rpi3-rt-oslat-c1-3-f1",
                                  "rpi3-rt-oslat-c1-3-f90"])
def test_oslat_json_agrees_with_its_console_summary(name):
    result = parse_oslat_json(text(f"{name}.json"), "o.json")
    console = text(f"{name}.stdout")
    check_console("oslat", console, "o.stdout")

    def row(label: str) -> list[str]:
        match = re.search(rf"^\s*{label}:\t((?: \S+)+)", console, re.MULTILINE)
        assert match, label
        # the values, without what oslat prints after them ("(us)", "(including
        # overflows)")
        return match.group(1).split(" (")[0].split()

    assert [int(v) for v in row("Maximum")] == [cpu.max_us for cpu in result.threads]
    assert [int(v) for v in row("Core")] == [cpu.cpu for cpu in result.threads]
    assert [int(v) for v in row("032 \\(us\\)")] == [cpu.histogram[32]
                                                     for cpu in result.threads]


def test_oslat_on_armhf_is_unsupported_not_a_result():
    with pytest.raises(ToolUnsupported, match=r"imx6q-rt-oslat.stdout:1: oslat does not run"):
        check_console("oslat", text("imx6q-rt-oslat.stdout"), "imx6q-rt-oslat.stdout")


# ----------------------------------------------------------- console, real ----


def test_usage_instead_of_a_run_is_refused():
    # sigwaittest -S: usage on stdout, "invalid option" on stderr, exit status 0, no JSON
    with pytest.raises(RtTestsParseError, match=r"sigwaittest-S.stdout:2: .*usage"):
        check_console("sigwaittest", text("imx6q-rt-sigwaittest-S.stdout"),
                      "sigwaittest-S.stdout")
    with pytest.raises(RtTestsParseError, match="invalid option -- 'S'"):
        check_console("sigwaittest", text("imx6q-rt-sigwaittest-S.stderr"),
                      "sigwaittest-S.stderr")


@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("tool", [*PAIR_TOOLS, "signaltest", "pi_stress"])
def test_a_normal_summary_passes_the_console_check(board, tool):
    check_console(tool, text(f"{board}-{tool}.stdout"), "stdout")


# ---------------------------------------------------------- broken JSON ----


def test_truncated_json_is_refused_with_its_place():
    with pytest.raises(RtTestsParseError,
                       match=r"^cut.json: invalid JSON at line \d+ column \d+: .*\(truncated\?\)"):
        parse_pair_json("ptsematest", text("broken-truncated-ptsematest.json"), "cut.json")


def test_empty_json_is_refused():
    with pytest.raises(RtTestsParseError, match="^e.json: empty"):
        parse_signaltest_json(text("broken-empty.json"), "e.json")


def test_kernel_message_inside_a_json_line_is_refused():
    with pytest.raises(RtTestsParseError, match=r"^k.json: invalid JSON at line 30 "):
        parse_pair_json("pmqtest", text("broken-kernlog-midline-pmqtest.json"), "k.json")


def test_kernel_messages_on_lines_of_their_own_are_set_aside():
    clean = parse_signaltest_json(text("imx6q-rt-signaltest.json"), "a")
    noisy = parse_signaltest_json(text("kernlog-imx6q-rt-signaltest.json"), "b")
    assert noisy.threads == clean.threads
    assert [line for line, _ in noisy.kernel_log_lines] == [18, 26]
    assert noisy.kernel_log_lines[0][1].endswith("sched: RT throttling activated")
    assert clean.kernel_log_lines == ()


def test_signaltest_thread_without_cycles_is_refused():
    with pytest.raises(RtTestsParseError, match="^s.json: invalid JSON at line 29"):
        parse_signaltest_json(text("broken-signaltest-no-cycles.json"), "s.json")


def test_oslat_lost_bucket_contradicts_min():
    with pytest.raises(RtTestsParseError, match="min 1 but the lowest bucket is 2"):
        parse_oslat_json(text("broken-lost-bucket-oslat.json"), "o.json")


def test_json_of_another_tool_or_run_is_refused():
    real = text("imx6q-rt-ptsematest.json")
    with pytest.raises(RtTestsParseError, match="is not a pmqtest run"):
        parse_pair_json("pmqtest", real, "x.json")
    stale = ptsematest_command(duration_s=60, json_path="/tmp/ptsematest.json")
    with pytest.raises(RtTestsParseError, match="stale"):
        parse_pair_json("ptsematest", real, "x.json", argv=stale)
    with pytest.raises(RtTestsParseError, match="4 threads measured, 2 requested"):
        parse_pair_json("ptsematest", real, "x.json", expected_threads=2)


def test_contradictions_in_real_json_are_refused():
    real = text("imx6q-rt-pmqtest.json")
    cases = {
        '"return_code": 0': ('"return_code": 1', "return_code 1"),
        '"num_threads": 4': ('"num_threads": 5', "num_threads is 5"),
        '"min": 123': ('"min": 3000', "max 2592 < min 3000"),
        '"avg": 209.23': ('"avg": 4000.5', "avg 4000.5 outside"),
        '"samples": 977': ('"samples": 0', "sent nothing"),
        '"timeoutcount": 0,\n        "min": 123': ('"min": 123', "missing 'thread.0.receiver"
                                                    ".timeoutcount'"),
        '"realtime": 1': ('"realtime": 2', "realtime must be 0 or 1"),
        '"start_time": "Thu, 01 Jan 1970 00:00:15': ('"start_time": "Thu, 01 Jan 1970 00:00:25',
                                                     "before start_time"),
    }
    for old, (new, message) in cases.items():
        assert old in real, old
        with pytest.raises(RtTestsParseError, match=re.escape(message)):
            parse_pair_json("pmqtest", real.replace(old, new, 1), "p.json")


def test_duplicate_keys_are_refused():
    real = text("imx6q-rt-signaltest.json")
    doubled = real.replace('"cycles": 581,', '"cycles": 581,\n      "cycles": 582,', 1)
    with pytest.raises(RtTestsParseError, match="duplicate key 'cycles'"):
        parse_signaltest_json(doubled, "s.json")


# ---------------------------------------------------------------- pi_stress ----


@pytest.mark.parametrize(("board", "inversions"), [("imx6q-rt", 4376), ("rpi3-rt", 8126)])
def test_pi_stress_real_runs_pass(board, inversions):
    result = parse_pi_stress(text(f"{board}-pi_stress.stdout"), f"{board}-pi_stress",
                             exit_status=0, json_text=text(f"{board}-pi_stress.json"),
                             argv=captured_argv("pi_stress"))
    assert result.verdict is Verdict.PASS
    assert result.inversions == inversions
    assert result.evidence == (f"Total inversion performed: {inversions}",
                               "Test Duration: 0 days, 0 hours, 0 minutes, 6 seconds")
    assert result.run is not None and result.run.sysinfo.realtime is True


def test_pi_stress_on_the_plain_kernel_passes_too():
    # PI futexes are in every kernel; -D 3 reported 5 s
    argv = pi_stress_command(duration_s=3, json_path="/tmp/pi_stress.json")
    result = parse_pi_stress(text("imx6q-std-pi_stress.stdout"), "std", exit_status=0,
                             json_text=text("imx6q-std-pi_stress.json"), argv=argv)
    assert (result.verdict, result.inversions) == (Verdict.PASS, 3881)
    assert result.run is not None and result.run.sysinfo.realtime is False


def test_pi_stress_truncated_summary_is_an_error_even_with_its_json():
    with pytest.raises(RtTestsParseError, match="truncated after line 1: no 'Test Duration:'"):
        parse_pi_stress(text("broken-truncated-pi_stress.stdout"), "pi", exit_status=0,
                        json_text=text("imx6q-rt-pi_stress.json"))
    with pytest.raises(RtTestsParseError, match="no 'Total inversion performed:'"):
        parse_pi_stress("", "pi", exit_status=0)


def test_pi_stress_json_must_agree_with_the_summary():
    json_text = text("imx6q-rt-pi_stress.json").replace('"inversion": 4376', '"inversion": 4375')
    with pytest.raises(RtTestsParseError, match="4375 inversions in the JSON, 4376 in the"):
        parse_pi_stress(text("imx6q-rt-pi_stress.stdout"), "pi", exit_status=0,
                        json_text=json_text)
    failed = text("imx6q-rt-pi_stress.json").replace('"return_code": 0', '"return_code": 1')
    with pytest.raises(RtTestsParseError, match="return_code 1 but pi_stress exited 0"):
        parse_pi_stress(text("imx6q-rt-pi_stress.stdout"), "pi", exit_status=0,
                        json_text=failed)


def test_pi_stress_shorter_than_asked_is_refused():
    argv = pi_stress_command(duration_s=10, json_path="/tmp/pi_stress.json")
    with pytest.raises(RtTestsParseError, match="stopped after 6 s, 10 s were asked for"):
        parse_pi_stress(text("imx6q-rt-pi_stress.stdout"), "pi", exit_status=0, argv=argv)


def test_pi_stress_nonzero_exit_without_deadlock_report_is_an_error_not_a_pass():
    with pytest.raises(RtTestsParseError, match="status 1 without a deadlock report"):
        parse_pi_stress(text("imx6q-rt-pi_stress.stdout"), "pi", exit_status=1,
                        stderr="mlockall failed\n")


def test_pi_stress_unexpected_lines_are_refused():
    noisy = text("imx6q-rt-pi_stress.stdout").replace("Test Duration", "Test Dur\nation")
    with pytest.raises(RtTestsParseError, match=r"^pi:2: unexpected line 'Test Dur'"):
        parse_pi_stress(noisy, "pi", exit_status=0)


def test_pi_stress_watchdog_is_a_fail():
    result = parse_pi_stress("", "pi", exit_status=143,
                             stderr=text("synthetic-pi_stress-watchdog.stderr"))
    assert result.verdict is Verdict.FAIL
    assert result.evidence == ("WATCHDOG triggered: group 1 is deadlocked!",)
    assert result.exit_status == 143


# --------------------------------------------------------------- pip_stress ----


def test_pip_stress_real_pass_and_no_inversion():
    passed = parse_pip_stress(text("imx6q-rt-pip_stress-2.stdout"), "pip-2", exit_status=0)
    assert passed.verdict is Verdict.PASS and passed.inversions == 1
    assert passed.evidence == ("Successfully used priority inheritance to handle an inversion",)
    # the shell got 0 here too: only the line tells the two apart
    none = parse_pip_stress(text("imx6q-rt-pip_stress-1.stdout"), "pip-1", exit_status=0)
    assert none.verdict is Verdict.INCONCLUSIVE and none.inversions == 0


def pip_runs(name: str) -> list[FunctionalResult]:
    runs = re.findall(r"(.*?)rc=(\d+)\n", text(name), re.DOTALL)
    assert len(runs) == 20
    return [parse_pip_stress(out, f"{name}#{n}", exit_status=int(rc))
            for n, (out, rc) in enumerate(runs, start=1)]


@pytest.mark.parametrize("name", ["imx6q-rt-pip_stress-x20.txt", "rpi3-rt-pip_stress-x20.txt"])
def test_pip_stress_repeated_runs_combine(name):
    runs = pip_runs(name)
    assert {run.verdict for run in runs} == {Verdict.INCONCLUSIVE}
    assert combine(runs).verdict is Verdict.INCONCLUSIVE
    one_pass = parse_pip_stress(text("imx6q-rt-pip_stress-2.stdout"), "pip-2", exit_status=0)
    combined = combine([*runs, one_pass])
    assert combined.verdict is Verdict.PASS and combined.inversions == 1
    assert combined.reason.startswith("1 of 21 runs pass")
    stuck = hung("pip_stress", "pip-hung", timeout_s=30)
    assert combine([one_pass, stuck]).verdict is Verdict.FAIL


def test_pip_stress_real_mixed_runs_pass():
    runs = pip_runs("imx6q-std-pip_stress-x20.txt")
    verdicts = [run.verdict for run in runs]
    assert verdicts.count(Verdict.PASS) == 9 and verdicts.count(Verdict.INCONCLUSIVE) == 11
    combined = combine(runs)
    assert (combined.verdict, combined.inversions) == (Verdict.PASS, 9)
    assert combined.reason.startswith("9 of 20 runs pass")


def test_pip_stress_broken_outputs_are_refused():
    with pytest.raises(RtTestsParseError, match=r"^t:1: not a pip_stress verdict"):
        parse_pip_stress(text("broken-truncated-pip_stress.stdout"), "t", exit_status=0)
    with pytest.raises(RtTestsParseError, match=r"^k:1: not a pip_stress verdict"):
        parse_pip_stress(text("broken-kernlog-midline-pip_stress.stdout"), "k", exit_status=0)
    with pytest.raises(RtTestsParseError, match="no verdict line"):
        parse_pip_stress("", "e", exit_status=0)
    with pytest.raises(RtTestsParseError, match="status 1 before its test"):
        parse_pip_stress("", "x", exit_status=1, stderr="sched_setaffinity: Invalid argument\n")
    with pytest.raises(RtTestsParseError, match=r"\(stderr\):1: unexpected output"):
        parse_pip_stress(text("imx6q-rt-pip_stress-2.stdout"), "s", exit_status=0,
                         stderr="Pthread_mutex_lock: pthread_mutex_lock(): Invalid argument\n")
    twice = text("imx6q-rt-pip_stress-2.stdout") * 2
    with pytest.raises(RtTestsParseError, match=r"^d:2: unexpected line after the verdict"):
        parse_pip_stress(twice, "d", exit_status=0)


def test_pip_stress_kernel_message_on_its_own_line_is_set_aside():
    result = parse_pip_stress(text("kernlog-imx6q-rt-pip_stress-2.stdout"), "k", exit_status=0)
    assert result.verdict is Verdict.PASS
    assert result.kernel_log_lines == ((1, "[   36.588002] sched: RT throttling activated"),)


def test_hung_is_a_fail_and_only_for_functional_tools():
    result = hung("pi_stress", "pi", timeout_s=40, stdout="Total inversion performed: 12\n")
    assert result.verdict is Verdict.FAIL and result.inversions == 12
    assert "40 s" in result.reason
    with pytest.raises(ValueError, match="not a functional test"):
        hung("ptsematest", "p", timeout_s=10)


# ---------------------------------------------------------------- board_run ----

_PASS = "Successfully used priority inheritance to handle an inversion"
PIP_RUN = board_run("pip_stress", duration_s=5, cpus=4, priority=90, json_path="/tmp/x.json")


@pytest.mark.parametrize("tool", PAIR_TOOLS)
@pytest.mark.parametrize("cpus", [1, 2, 4])
def test_board_run_pair_tools_one_pair_per_cpu(tool, cpus):
    run = board_run(tool, duration_s=5, cpus=cpus, priority=90, json_path="/tmp/p.json")
    built = tuple(PAIR_BUILDERS[tool](duration_s=5, json_path="/tmp/p.json", priority=90))
    assert run == BoardRun(tool=tool, argv=("chrt", "-f", "90", *built), tool_argv=built,
                           json_path="/tmp/p.json", expected_threads=cpus)


def test_board_run_ptsematest_argv():
    run = board_run("ptsematest", duration_s=30, cpus=4, priority=80, json_path="/tmp/j.json")
    # started under SCHED_FIFO at the measuring priority, not raised to it later
    assert run.argv == ("chrt", "-f", "80", "ptsematest", "-S", "-p", "80", "-i", "1000",
                        "-D", "30", "-q", "--json=/tmp/j.json")
    sig = board_run("sigwaittest", duration_s=30, cpus=4, priority=80, json_path="/tmp/j.json")
    assert sig.tool_argv[:3] == ("sigwaittest", "-t", "-a") and "-S" not in sig.argv
    assert sig.argv == ("chrt", "-f", "80", *sig.tool_argv)


def test_board_run_signaltest_lets_the_ring_decide():
    run = board_run("signaltest", duration_s=5, cpus=4, priority=90, json_path="/tmp/s.json")
    assert run.tool_argv == ("signaltest", "-t", "2", "-m", "-p", "90", "-D", "5",
                             "-q", "--json=/tmp/s.json")
    assert run.argv == ("chrt", "-f", "90", *run.tool_argv)
    assert run.expected_threads is None


@pytest.mark.parametrize(("cpus", "measured", "expected"), [
    (4, "1-3", 3), (3, "1-2", 2), (2, "1", 1), (8, "1-7", 7)])
def test_board_run_oslat_keeps_off_cpu0(cpus, measured, expected):
    run = board_run("oslat", duration_s=5, cpus=cpus, priority=90, json_path="/tmp/o.json")
    assert run.tool_argv == ("oslat", "-c", measured, "-f", "90", "-D", "5", "-q",
                             "--json=/tmp/o.json")
    assert run.argv == ("chrt", "-f", "90", *run.tool_argv)
    assert (run.json_path, run.expected_threads) == ("/tmp/o.json", expected)


def test_board_run_oslat_refuses_a_single_cpu():
    with pytest.raises(ValueError) as raised:
        board_run("oslat", duration_s=5, cpus=1, priority=90, json_path="/tmp/o.json")
    assert str(raised.value) == "oslat needs a CPU besides CPU 0, where its main thread runs"


@pytest.mark.parametrize("duration_s", [5, 3600])
def test_board_run_pi_stress_in_its_own_session_under_a_kill_timeout(duration_s):
    run = board_run("pi_stress", duration_s=duration_s, cpus=4, priority=90,
                    json_path="/tmp/pi.json")
    tool_argv = ("pi_stress", "-m", "-D", str(duration_s), "-q", "--json=/tmp/pi.json")
    assert run.argv == ("setsid", "timeout", "-s", "KILL", str(duration_s + HANG_MARGIN_S),
                        *tool_argv)
    assert run.tool_argv == tool_argv
    assert (run.json_path, run.expected_threads) == ("/tmp/pi.json", None)


def test_board_run_pip_stress_is_a_shell_loop():
    run = board_run("pip_stress", duration_s=5, cpus=4, priority=90, json_path="/tmp/x.json")
    assert run.argv[:2] == ("sh", "-c") and len(run.argv) == 3
    assert (run.tool_argv, run.json_path, run.expected_threads) == (("pip_stress",), None, None)
    loop = run.argv[2]
    assert f"[ $i -lt {PIP_STRESS_RUNS} ]" in loop
    assert (f"timeout -s KILL {HANG_MARGIN_S} setsid sh -c 'echo $$ >{PIP_STRESS_OUT}.pid; "
            f"exec pip_stress' >{PIP_STRESS_OUT} 2>&1; rc=$?; "
            f"kill -KILL -$(cat {PIP_STRESS_OUT}.pid) 2>/dev/null") in loop
    assert f'echo "{RUN_MARK}$rc"' in loop


@pytest.mark.parametrize(("tool", "cpus", "message"), [
    ("cyclictest", 4, "unknown rt-test 'cyclictest' (valid: ptsematest, pmqtest, sigwaittest, "
                      "signaltest, oslat, pi_stress, pip_stress)"),
    ("ptsematest", 0, "cpus must be >= 1, got 0"),
    ("ptsematest", True, "cpus must be an integer, got True"),
])
def test_board_run_refuses(tool, cpus, message):
    with pytest.raises(ValueError) as raised:
        board_run(tool, duration_s=5, cpus=cpus, priority=90, json_path="/tmp/x.json")
    assert str(raised.value) == message


def _fake_pip_stress(tmp_path: Path, body: str) -> dict[str, str]:
    """A pip_stress on PATH that counts its runs in tmp_path/runs."""
    fake = tmp_path / "pip_stress"
    fake.write_text('#!/bin/sh\nn=$(cat "$RUNS" 2>/dev/null || echo 0); n=$((n+1)); '
                    f'echo $n >"$RUNS"\n{body}\n', encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
            "RUNS": str(tmp_path / "runs"), "DATA": str(DATA)}


def _run_loop(tmp_path: Path, body: str) -> tuple[str, int]:
    run = board_run("pip_stress", duration_s=5, cpus=4, priority=90, json_path="/tmp/x.json")
    argv = [arg.replace(PIP_STRESS_OUT, str(tmp_path / "pip.out")) for arg in run.argv]
    # as on the board: stdout and stderr into one file
    done = subprocess.run(argv, env=_fake_pip_stress(tmp_path, body),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=60, check=True)
    return done.stdout, int((tmp_path / "runs").read_text())


def test_pip_stress_loop_stops_at_the_first_inversion(tmp_path):
    output, runs = _run_loop(tmp_path, 'if [ $n -lt 3 ]; then '
                                       'cat "$DATA/imx6q-rt-pip_stress-1.stdout"; '
                                       'else cat "$DATA/imx6q-rt-pip_stress-2.stdout"; fi')
    assert runs == 3
    assert output == (f"No inversion incurred\n{RUN_MARK}0\n" * 2
                      + f"{_PASS}\n{RUN_MARK}0\n")
    result = judge(PIP_RUN, exit_status=0, output=output, json_text=None, source="pip")
    assert (result.verdict, result.inversions) == (Verdict.PASS, 1)
    assert result.source == "pip (run 1), pip (run 2), pip (run 3)"


def test_pip_stress_loop_gives_up_after_its_runs(tmp_path):
    output, runs = _run_loop(tmp_path, 'cat "$DATA/imx6q-rt-pip_stress-1.stdout"')
    assert runs == PIP_STRESS_RUNS
    assert output == f"No inversion incurred\n{RUN_MARK}0\n" * PIP_STRESS_RUNS
    result = judge(PIP_RUN, exit_status=0, output=output, json_text=None, source="pip")
    assert result.verdict is Verdict.INCONCLUSIVE


def test_pip_stress_loop_stops_at_a_killed_run(tmp_path):
    # killed as the timeout kills a deadlocked run
    output, runs = _run_loop(tmp_path, 'if [ $n -lt 2 ]; then '
                                       'cat "$DATA/imx6q-rt-pip_stress-1.stdout"; '
                                       'else kill -KILL $$; fi')
    assert runs == 2
    # (the shell may say "Killed" of the killed run)
    assert [line for line in output.splitlines() if line.startswith(RUN_MARK)] == [
        f"{RUN_MARK}0", f"{RUN_MARK}{KILLED}"]
    assert output.startswith(f"No inversion incurred\n{RUN_MARK}0\n")
    result = judge(PIP_RUN, exit_status=0, output=output, json_text=None, source="pip")
    assert result.verdict is Verdict.FAIL


def _gone(pid: int) -> bool:
    """Whether the process has ended (a zombie nobody reaped has ended too)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_pip_stress_loop_kills_a_deadlocked_run_with_all_its_processes(tmp_path, monkeypatch):
    # as a deadlock without priority inheritance: a child spins on, the parent waits
    monkeypatch.setattr(rt_board, "HANG_MARGIN_S", 2)
    output, runs = _run_loop(tmp_path, 'sleep 300 & echo $! >"$RUNS.child"; wait')
    assert runs == 1
    assert output.splitlines()[-1] == f"{RUN_MARK}{KILLED}"
    child = int((tmp_path / "runs.child").read_text())
    for _ in range(100):
        if _gone(child):
            break
        threading.Event().wait(0.05)
    assert _gone(child), "the deadlocked run's child survived"
    result = judge(PIP_RUN, exit_status=0, output=output, json_text=None, source="pip")
    assert result.verdict is Verdict.FAIL


# -------------------------------------------------------- judge, latency ----


def captured_run(tool: str, duration_s: int = 5) -> BoardRun:
    """The board run whose command the captures ran (4 CPUs, priority 90)."""
    return board_run(tool, duration_s=duration_s, cpus=4, priority=90,
                     json_path=f"/tmp/{tool}.json")


@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("tool", PAIR_TOOLS)
def test_judge_pair_tools_on_the_captures(board, tool):
    run = captured_run(tool)
    result = judge(run, exit_status=0, output=text(f"{board}-{tool}.stdout"),
                   json_text=text(f"{board}-{tool}.json"), source=f"{board}/{tool}")
    assert isinstance(result, LatencyResult) and result.tool == tool
    assert result.source == f"{board}/{tool}: /tmp/{tool}.json"
    assert result.run.cmdline == " ".join(run.tool_argv)
    assert len(result.threads) == 4
    assert result.threads == parse_pair_json(tool, text(f"{board}-{tool}.json"), "x").threads


def test_judge_ptsematest_imx6q_figures():
    result = judge(captured_run("ptsematest"), exit_status=0,
                   output=text("imx6q-rt-ptsematest.stdout"),
                   json_text=text("imx6q-rt-ptsematest.json"), source="imx6q-rt")
    assert (result.min_us, result.max_us, result.samples) == (95, 48010, 2638)
    std = judge(captured_run("ptsematest", duration_s=3), exit_status=0,
                output=text("imx6q-std-ptsematest.stdout"),
                json_text=text("imx6q-std-ptsematest.json"), source="imx6q-std")
    assert (std.min_us, std.max_us) == (92, 8761)


@pytest.mark.parametrize(("board", "max_us"), [("imx6q-rt", 29397), ("rpi3-rt", 10235)])
def test_judge_signaltest_on_the_captures(board, max_us):
    result = judge(captured_run("signaltest"), exit_status=0,
                   output=text(f"{board}-signaltest.stdout"),
                   json_text=text(f"{board}-signaltest.json"), source=board)
    assert (result.gated, result.max_us) == ((0,), max_us)


def test_judge_oslat_on_the_captures():
    run = board_run("oslat", duration_s=3, cpus=4, priority=90, json_path="/tmp/o.json")
    result = judge(run, exit_status=0, output=text("rpi3-rt-oslat-c1-3-f90.stdout"),
                   json_text=text("rpi3-rt-oslat-c1-3-f90.json"), source="rpi3")
    assert [cpu.cpu for cpu in result.threads] == [1, 2, 3] and result.max_us == 64839
    f1 = board_run("oslat", duration_s=3, cpus=4, priority=1,
                   json_path="/tmp/oslat-c1-3-f1.json")
    assert judge(f1, exit_status=0, output=text("rpi3-rt-oslat-c1-3-f1.stdout"),
                 json_text=text("rpi3-rt-oslat-c1-3-f1.json"), source="rpi3").max_us == 68209
    # that capture ran at SCHED_OTHER (no -f): the board run as it was
    c1 = attr.evolve(board_run("oslat", duration_s=3, cpus=2, priority=1,
                               json_path="/tmp/oslat-c1.json"),
                     tool_argv=("oslat", "-c", "1", "-D", "3", "-q",
                                "--json=/tmp/oslat-c1.json"))
    result = judge(c1, exit_status=0, output=text("rpi3-rt-oslat-c1.stdout"),
                   json_text=text("rpi3-rt-oslat-c1.json"), source="rpi3")
    assert [(cpu.cpu, cpu.max_us) for cpu in result.threads] == [(1, 73264)]


def test_judge_refuses_a_json_file_of_another_run():
    stale = captured_run("ptsematest", duration_s=10)
    with pytest.raises(RtTestsParseError) as raised:
        judge(stale, exit_status=0, output=text("imx6q-rt-ptsematest.stdout"),
              json_text=text("imx6q-rt-ptsematest.json"), source="b")
    assert str(raised.value) == (
        "b: /tmp/ptsematest.json: cmdline 'ptsematest -S -p 90 -i 1000 -D 5 -q "
        "--json=/tmp/ptsematest.json' is not the command run, 'ptsematest -S -p 90 -i 1000 "
        "-D 10 -q --json=/tmp/ptsematest.json' (a stale file?)")


def test_judge_refuses_fewer_pairs_than_cpus():
    two_cpus = board_run("ptsematest", duration_s=5, cpus=2, priority=90,
                         json_path="/tmp/ptsematest.json")
    with pytest.raises(RtTestsParseError, match=r"^b: /tmp/ptsematest.json: 4 threads measured, "
                                                r"2 requested$"):
        judge(two_cpus, exit_status=0, output="", json_text=text("imx6q-rt-ptsematest.json"),
              source="b")


def test_judge_latency_tool_with_nonzero_exit_is_an_error():
    output = "mlockall failed: Cannot allocate memory\n"
    with pytest.raises(RtTestsParseError) as raised:
        judge(captured_run("pmqtest"), exit_status=1, output=output,
              json_text=text("imx6q-rt-pmqtest.json"), source="b/pmqtest")
    assert str(raised.value) == ("b/pmqtest: pmqtest exited with status 1: "
                                 "'mlockall failed: Cannot allocate memory'")


def test_judge_latency_tool_without_json_is_an_error():
    with pytest.raises(RtTestsParseError) as raised:
        judge(captured_run("ptsematest"), exit_status=0,
              output=text("imx6q-rt-ptsematest.stdout"), json_text=None, source="b/pt")
    assert str(raised.value) == "b/pt: ptsematest wrote no JSON file"
    with pytest.raises(RtTestsParseError, match=r"^b/pt: /tmp/ptsematest.json: empty: no JSON "):
        judge(captured_run("ptsematest"), exit_status=0,
              output=text("imx6q-rt-ptsematest.stdout"), json_text="", source="b/pt")


def test_judge_usage_instead_of_a_run_is_an_error():
    output = text("imx6q-rt-sigwaittest-S.stdout") + text("imx6q-rt-sigwaittest-S.stderr")
    with pytest.raises(RtTestsParseError, match=r"^b/sig:2: sigwaittest printed its usage "):
        judge(captured_run("sigwaittest"), exit_status=0, output=output, json_text=None,
              source="b/sig")


def test_judge_oslat_on_armhf_is_unsupported():
    run = board_run("oslat", duration_s=5, cpus=4, priority=90, json_path="/tmp/oslat.json")
    with pytest.raises(ToolUnsupported) as raised:
        judge(run, exit_status=0, output=text("imx6q-rt-oslat.stdout"), json_text=None,
              source="imx6q-rt/oslat")
    assert str(raised.value) == (
        "imx6q-rt/oslat:1: oslat does not run on this board: 'This architecture is not yet "
        "supported. Please implement frc() function first for oslat.'")


# ----------------------------------------------------- judge, pi_stress ----


@pytest.mark.parametrize(("board", "duration_s", "inversions"), [
    ("imx6q-rt", 5, 4376), ("rpi3-rt", 5, 8126), ("imx6q-std", 3, 3881)])
def test_judge_pi_stress_on_the_captures(board, duration_s, inversions):
    result = judge(captured_run("pi_stress", duration_s), exit_status=0,
                   output=text(f"{board}-pi_stress.stdout"),
                   json_text=text(f"{board}-pi_stress.json"), source=board)
    assert (result.verdict, result.inversions) == (Verdict.PASS, inversions)
    assert result.run is not None and result.run.cmdline == (
        f"pi_stress -m -D {duration_s} -q --json=/tmp/pi_stress.json")


def test_judge_pi_stress_shorter_than_asked_is_an_error():
    with pytest.raises(RtTestsParseError, match="stopped after 6 s, 10 s were asked for"):
        judge(captured_run("pi_stress", 10), exit_status=0,
              output=text("imx6q-rt-pi_stress.stdout"), json_text=None, source="b")


def test_judge_pi_stress_killed_is_a_fail():
    result = judge(captured_run("pi_stress"), exit_status=KILLED, output="", json_text=None,
                   source="b/pi_stress")
    assert KILLED == 137
    assert (result.verdict, result.exit_status, result.inversions) == (Verdict.FAIL, None, None)
    assert result.reason.startswith("no result within ")
    assert result.reason.endswith(" s: deadlocked (priority inheritance?)")


def test_judge_pi_stress_killed_names_its_real_timeout():
    result = judge(captured_run("pi_stress"), exit_status=KILLED, output="", json_text=None,
                   source="b/pi_stress")
    assert result.reason == "no result within 65 s: deadlocked (priority inheritance?)"


def test_judge_pi_stress_watchdog_is_a_fail():
    result = judge(captured_run("pi_stress"), exit_status=143,
                   output=text("synthetic-pi_stress-watchdog.stderr"), json_text=None,
                   source="b")
    assert result.verdict is Verdict.FAIL
    assert result.evidence == ("WATCHDOG triggered: group 1 is deadlocked!",)


def test_judge_pi_stress_failed_without_a_watchdog_is_an_error():
    with pytest.raises(RtTestsParseError, match=r"^b: pi_stress exited with status 1 without a "
                                                "deadlock report"):
        judge(captured_run("pi_stress"), exit_status=1, output="mlockall failed\n",
              json_text=None, source="b")


def test_judge_pi_stress_failure_quotes_what_it_printed():
    with pytest.raises(RtTestsParseError, match="mlockall failed"):
        judge(captured_run("pi_stress"), exit_status=1, output="mlockall failed\n",
              json_text=None, source="b")


def test_judge_pi_stress_without_its_json_is_an_error():
    with pytest.raises(RtTestsParseError, match="wrote no JSON file"):
        judge(captured_run("pi_stress"), exit_status=0,
              output=text("imx6q-rt-pi_stress.stdout"), json_text=None, source="b")


# ---------------------------------------------------- judge, pip_stress ----


def pip_output(*runs: tuple[str, int]) -> str:
    """A board's pip_stress loop output: each run's stdout, then its status line."""
    return "".join(f"{text(name) if name else ''}{RUN_MARK}{rc}\n" for name, rc in runs)


def test_judge_pip_stress_passes_on_the_second_run():
    output = pip_output(("imx6q-rt-pip_stress-1.stdout", 0), ("imx6q-rt-pip_stress-2.stdout", 0))
    result = judge(PIP_RUN, exit_status=0, output=output, json_text=None, source="b/pip")
    assert (result.verdict, result.inversions, result.exit_status) == (Verdict.PASS, 1, 0)
    assert result.reason == ("1 of 2 runs pass: the inversion was resolved by priority "
                             "inheritance")
    assert result.evidence == (_PASS,)
    assert result.source == "b/pip (run 1), b/pip (run 2)"
    # as the console gives it
    crlf = judge(PIP_RUN, exit_status=0, output=output.replace("\n", "\r\n"), json_text=None,
                 source="b/pip")
    assert crlf == result


def test_judge_pip_stress_without_an_inversion_is_inconclusive():
    output = re.sub(r"^rc=", RUN_MARK, text("imx6q-rt-pip_stress-x20.txt"), flags=re.MULTILINE)
    result = judge(PIP_RUN, exit_status=0, output=output, json_text=None, source="b/pip")
    assert (result.verdict, result.inversions) == (Verdict.INCONCLUSIVE, 0)
    assert result.reason == ("20 of 20 runs inconclusive: the processes did not get into an "
                             "inversion")


def test_judge_pip_stress_killed_run_is_a_fail():
    output = pip_output(("imx6q-rt-pip_stress-1.stdout", 0), ("", KILLED))
    result = judge(PIP_RUN, exit_status=0, output=output, json_text=None, source="b/pip")
    assert (result.verdict, result.exit_status, result.inversions) == (Verdict.FAIL, None, None)
    assert result.reason == (f"1 of 2 runs fail: no result within {HANG_MARGIN_S} s: "
                             "deadlocked (priority inheritance?)")


def test_judge_pip_stress_keeps_kernel_messages_aside():
    output = pip_output(("kernlog-imx6q-rt-pip_stress-2.stdout", 0))
    result = judge(PIP_RUN, exit_status=0, output=output, json_text=None, source="b/pip")
    assert result.verdict is Verdict.PASS
    assert result.kernel_log_lines == ((1, "[   36.588002] sched: RT throttling activated"),)


@pytest.mark.parametrize(("output", "message"), [
    # the console output ends inside a run: its status line is missing
    (pip_output(("imx6q-rt-pip_stress-1.stdout", 0)) + "No inversion inc",
     "b/pip: output after the last run's exit status (truncated?): 'No inversion inc'"),
    ("", "b/pip: no pip_stress run completed"),
    (f"No inversion incurred\n{RUN_MARK}\n", f"b/pip: garbled exit status line '{RUN_MARK}'"),
    (f"No inversion incurred\n{RUN_MARK}0x\n",
     f"b/pip: garbled exit status line '{RUN_MARK}0x'"),
    (pip_output(("", 0)), "b/pip (run 1): no verdict line (empty or truncated output)"),
    # the loop's echo ends an unterminated line
    (text("broken-truncated-pip_stress.stdout") + f"\n{RUN_MARK}0\n",
     "b/pip (run 1):1: not a pip_stress verdict: 'Successfully used priority inh'"),
    (pip_output(("imx6q-rt-pip_stress-1.stdout", 0), ("", 126)),
     "b/pip (run 2): pip_stress exited with status 126 before its test"),
])
def test_judge_pip_stress_broken_output_is_an_error(output, message):
    with pytest.raises(RtTestsParseError) as raised:
        judge(PIP_RUN, exit_status=0, output=output, json_text=None, source="b/pip")
    assert str(raised.value).startswith(message)


def test_judge_pip_stress_failure_quotes_what_it_printed():
    output = f"sh: pip_stress: not found\n{RUN_MARK}127\n"
    with pytest.raises(RtTestsParseError, match="pip_stress: not found"):
        judge(PIP_RUN, exit_status=0, output=output, json_text=None, source="b/pip")


def test_judge_pip_stress_kernel_message_after_the_last_run_is_set_aside():
    output = (pip_output(("imx6q-rt-pip_stress-2.stdout", 0))
              + "[   36.588002] sched: RT throttling activated\n")
    result = judge(PIP_RUN, exit_status=0, output=output, json_text=None, source="b/pip")
    assert result.verdict is Verdict.PASS
