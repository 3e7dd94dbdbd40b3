"""rtlab.measure.cyclictest against real rt-tests 2.4 output (tests/data/cyclictest/README.md says
how each file was captured or derived)."""

import json
import math
import shlex
from datetime import UTC, datetime
from pathlib import Path

import attr
import pytest

from rtlab.measure.cyclictest import (
    CyclictestParseError,
    NoWakeup,
    build_command,
    combine,
    cross_check,
    fifo_from_start,
    histogram_range,
    parse_histogram,
    parse_json,
    percentiles,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "cyclictest"


def text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def real_json_files() -> list[Path]:
    return sorted(p for p in DATA.glob("*.json") if not p.name.startswith("broken-"))


def histogram_of(json_file: Path) -> Path | None:
    """The histogram captured with a JSON file: its .hist, or a console that printed it."""
    for suffix in (".hist", ".console"):
        candidate = json_file.with_suffix(suffix)
        if candidate.exists() and "# Histogram" in candidate.read_text(encoding="utf-8"):
            return candidate
    return None


# ------------------------------------------------------------------ build_command ----


def test_build_command_default_is_smp_quiet_with_histogram_and_json():
    argv = build_command(interval_us=1000, duration_s=3, json_path="/tmp/r.json")
    assert argv == ["cyclictest", "-S", "-m", "-p", "90", "-i", "1000", "-h", "400",
                    "-D", "3s", "-q", "--json=/tmp/r.json"]


def test_build_command_histfile_keeps_the_histogram_off_the_console():
    argv = build_command(interval_us=200, duration_s=60, priority=95, histogram_us=1000,
                         json_path="/tmp/r.json", histfile_path="/tmp/r.hist")
    assert argv[-1] == "--histfile=/tmp/r.hist"
    assert argv[argv.index("-h") + 1] == "1000"
    assert argv[argv.index("-p") + 1] == "95"
    assert argv[argv.index("-i") + 1] == "200"
    assert argv[argv.index("-D") + 1] == "60s"


def test_build_command_affinity_uses_threads_and_affinity_not_smp():
    # -S ignores -a (or aborts), so a CPU subset must not use it
    argv = build_command(interval_us=1000, duration_s=3, json_path="j", affinity="0,2-3")
    assert "-S" not in argv
    assert argv[1:4] == ["-t", "-a", "0,2-3"]


def test_build_command_never_names_distance():
    # -h forces -d 0 itself; passing -d as well makes cyclictest warn on stderr
    argv = build_command(interval_us=1000, duration_s=3, json_path="j")
    assert "-d" not in argv


def test_fifo_from_start_runs_the_command_under_sched_fifo_at_its_priority():
    # chrt execs the command, so cyclictest's JSON cmdline stays its own argv
    argv = build_command(interval_us=1000, duration_s=3, priority=95, json_path="j")
    assert fifo_from_start(argv, 95) == ["chrt", "-f", "95", *argv]


@pytest.mark.parametrize("bad, message", [
    ({"priority": 0}, "priority must be 1..99"),
    ({"priority": 100}, "priority must be 1..99"),
    ({"command": []}, "command must not be empty"),
])
def test_fifo_from_start_refuses_bad_arguments(bad, message):
    args = {"command": ["cyclictest"], "priority": 90, **bad}
    with pytest.raises(ValueError, match=message):
        fifo_from_start(**args)


def test_the_fixture_was_captured_with_exactly_this_command():
    # ties the real output to the command line rtlab builds, and shows what the console got
    argv = build_command(interval_us=1000, duration_s=3, json_path="/tmp/rtlab-cyclictest.json",
                         histfile_path="/tmp/rtlab-cyclictest.hist")
    result = parse_json(text("host-x86-idle-h400-3s.json"), "host-x86-idle-h400-3s.json")
    assert result.cmdline == shlex.join(argv)
    assert text("host-x86-idle-h400-3s.console") == "# /dev/cpu_dma_latency set to 0us\n"


@pytest.mark.parametrize("bad, message", [
    ({"interval_us": 0}, "interval_us must be >= 1"),
    ({"duration_s": -1}, "duration_s must be >= 1"),
    ({"priority": 100}, "priority must be 1..99"),
    ({"histogram_us": 0}, "histogram_us must be 1..1000000"),
    ({"histogram_us": 2_000_000}, "histogram_us must be 1..1000000"),
    ({"interval_us": 1.5}, "interval_us must be an integer"),
    ({"json_path": ""}, "json_path must not be empty"),
    ({"histfile_path": ""}, "histfile_path must not be empty"),
    ({"affinity": "cpu1"}, "affinity must be a CPU list"),
])
def test_build_command_refuses_bad_arguments(bad, message):
    args = {"interval_us": 1000, "duration_s": 3, "json_path": "/tmp/r.json", **bad}
    with pytest.raises(ValueError, match=message):
        build_command(**args)


# ------------------------------------------------------------------------- JSON ----


def test_parse_json_reads_every_field_of_a_real_file():
    result = parse_json(text("host-x86-idle-h400-3s.json"), "idle.json")
    assert result.source == "idle.json"
    assert result.file_version == 1
    assert result.rt_test_version == "2.40"
    assert result.return_code == 0
    assert result.num_threads == 2
    assert result.resolution_in_ns == 0
    assert result.histogram_range_us == 400
    assert result.start_time == datetime(2026, 11, 22, 5, 6, 27, tzinfo=UTC)
    assert result.end_time == datetime(2026, 11, 22, 5, 6, 30, tzinfo=UTC)
    info = result.sysinfo
    assert (info.sysname, info.nodename, info.release, info.machine) == (
        "Linux", "vm", "6.18.44-fc-v595", "x86_64")
    assert info.version == "#1 SMP PREEMPT_DYNAMIC @0"
    assert info.realtime is False
    first, second = result.cpus
    assert (first.thread, first.cpu, first.cycles, first.min_us, first.avg_us, first.max_us,
            first.overflows) == (0, 0, 3000, 12, 22.06, 200, 0)
    assert (second.thread, second.cpu, second.cycles, second.min_us, second.avg_us,
            second.max_us, second.overflows) == (1, 1, 2997, 12, 29.32, 363, 0)
    assert first.histogram[22] == 514
    assert first.histogram_range_us == 400
    assert first.percentiles()["p99_9"].value_us == 41
    assert second.histogram[28] == 159
    assert 11 not in first.histogram
    assert result.max_us == 363


def test_parse_json_overflows_are_cycles_beyond_the_buckets():
    result = parse_json(text("host-x86-idle-h5-3s.json"), "h5.json")
    assert result.histogram_range_us == 5
    assert [(c.cycles, c.overflows, c.max_us) for c in result.cpus] == [
        (3000, 3000, 302), (2999, 2999, 105)]
    assert all(c.histogram == {} for c in result.cpus)


def test_parse_json_one_overflow_among_many():
    result = parse_json(text("host-x86-idle-cpu1-h100-3s.json"), "cpu1.json",
                        expected_threads=1)
    (only,) = result.cpus
    assert (only.cpu, only.cycles, only.overflows, only.max_us) == (1, 2994, 1, 6438)
    assert sum(only.histogram.values()) == 2993


def test_parse_json_without_histogram():
    result = parse_json(text("host-x86-idle-noh-3s.json"), "noh.json")
    assert result.histogram_range_us is None
    assert [c.histogram for c in result.cpus] == [None, None]
    assert [c.overflows for c in result.cpus] == [None, None]
    # without -h the second thread ran at interval + 500 µs (-d): fewer cycles
    assert [c.cycles for c in result.cpus] == [3000, 1992]
    with pytest.raises(ValueError, match="no histogram"):
        result.cpus[0].percentiles()


def test_parse_json_histofall_command_line_gives_the_range():
    result = parse_json(text("host-x86-idle-H30-3s.json"), "H30.json")
    assert result.histogram_range_us == 30
    assert [c.overflows for c in result.cpus] == [99, 214]


def test_truncated_json_is_refused_with_line_and_column():
    with pytest.raises(CyclictestParseError) as error:
        parse_json(text("broken-truncated-mid-json.json"), "broken-truncated-mid-json.json")
    message = str(error.value)
    assert message.startswith("broken-truncated-mid-json.json: invalid JSON at line 62 column")
    assert "truncated?" in message


def test_threads_that_never_woke_are_kept_apart_from_the_measured_ones():
    # real output: under hackbench on the emulated board two threads got no cycle at all,
    # and rt-tests printed their average as a bare nan (0/0), which is not JSON
    name = "nowakeup-imx6q-rt-hackbench-3s.json"
    result = parse_json(text(name), name, expected_threads=4)
    assert [(c.thread, c.cpu, c.cycles, c.max_us) for c in result.cpus] == [
        (0, 0, 592, 58732), (1, 1, 202, 27108)]
    assert result.no_wakeup == (NoWakeup(thread=2, cpu=2), NoWakeup(thread=3, cpu=3))
    assert result.max_us == 58732


def test_a_nan_average_needs_zero_cycles_and_no_figures():
    original = text("nowakeup-imx6q-rt-hackbench-3s.json")
    thread_3 = '"max": 0,\n      "avg": nan,\n      "cpu": 3'
    woke = original.replace('"cycles": 0,\n      "min": 1000000,\n      ' + thread_3,
                            '"cycles": 7,\n      "min": 1000000,\n      ' + thread_3)
    assert woke != original
    with pytest.raises(CyclictestParseError, match="thread 3 has 7 cycles but its average is nan"):
        parse_json(woke, "woke.json")
    with_max = original.replace('"max": 0,\n      "avg": nan,\n      "cpu": 2',
                                '"max": 80,\n      "avg": nan,\n      "cpu": 2')
    assert with_max != original
    with pytest.raises(CyclictestParseError, match="thread 2 has 0 cycles but figures"):
        parse_json(with_max, "max.json")
    elsewhere = original.replace('"max": 58732,', '"max": nan,')
    with pytest.raises(CyclictestParseError,
                       match=r"^else\.json: line 29: nan outside a thread's average$"):
        parse_json(elsewhere, "else.json")


def test_expected_thread_count_is_enforced():
    with pytest.raises(CyclictestParseError, match=r"x\.json: 2 threads measured, 4 requested"):
        parse_json(text("host-x86-idle-h400-3s.json"), "x.json", expected_threads=4)


def mutated(change) -> str:
    doc = json.loads(text("host-x86-idle-h400-3s.json"))
    change(doc)
    return json.dumps(doc, indent=2)


def _set(path: str, value):
    def change(doc):
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node[key]
        node[last] = value
    return change


def _delete(path: str):
    def change(doc):
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node[key]
        del node[last]
    return change


@pytest.mark.parametrize("change, message", [
    (_delete("thread"), "missing 'thread'"),
    (_delete("sysinfo.realtime"), "missing 'sysinfo.realtime'"),
    (_set("thread.1.cycles", 0), "thread 1 has 0 cycles"),
    (_set("thread.0.max", 5), "thread 0: max 5 < min 12"),
    (_set("thread.0.min", -3), "'thread.0.min' must be >= 0, got -3"),
    (_set("thread.1.avg", -1.5), "'thread.1.avg' must be a finite number >= 0"),
    (_set("thread.0.avg", 500.0), "avg 500.0 outside min 12..max 200"),
    (_set("thread.0.cycles", "3000"), "'thread.0.cycles' must be an integer"),
    (_set("thread.0.cycles", True), "'thread.0.cycles' must be an integer"),
    (_set("num_threads", 3), "num_threads is 3 but the thread section has 2"),
    (_delete("thread.1"), "num_threads is 2 but the thread section has 1"),
    (_set("return_code", 1), "return_code 1"),
    (_set("sysinfo.realtime", 2), "sysinfo.realtime must be 0 or 1"),
    (_set("end_time", "Sun, 22 Nov 2026 05:06:20 +0000"), "is before start_time"),
    (_set("start_time", "yesterday"), "'start_time' is not a date"),
    (_set("thread.0.cycles", 2000), "histogram holds 3000 samples, cycles 2000"),
    (_set("thread.0.histogram.400", 1), "bucket '400' outside 0..399"),
    (_set("thread.0.histogram.22", 0), "bucket 22 has count 0"),
    (_set("thread.0.min", 13), "min 13 but the lowest bucket is 12"),
    (_set("thread.1.max", 600), "max 600 is past the 400 µs range but nothing overflowed"),
    (_set("thread.0.cycles", 3001), "max 200 but the highest bucket is 200 and 1 samples"),
    (_set("thread", {"0": {}, "2": {}}), "thread keys must be 0..1"),
    (_set("thread", []), "'thread' must be an object"),
])
def test_inconsistent_json_is_refused(change, message):
    with pytest.raises(CyclictestParseError) as error:
        parse_json(mutated(change), "run.json")
    assert str(error.value).startswith("run.json: ")
    assert message in str(error.value)


def test_duplicate_keys_and_nan_are_refused():
    original = text("host-x86-idle-h400-3s.json")
    duplicated = original.replace('"max": 200,', '"max": 200, "max": 20,')
    with pytest.raises(CyclictestParseError, match="duplicate key 'max'"):
        parse_json(duplicated, "dup.json")
    with pytest.raises(CyclictestParseError, match="NaN"):
        parse_json(original.replace('"avg": 22.06', '"avg": NaN'), "nan.json")


def test_not_an_object_at_the_top():
    with pytest.raises(CyclictestParseError, match="expected a JSON object at the top"):
        parse_json("[1, 2]", "list.json")


def test_realtime_and_fixed_key_spelling_are_read():
    def change(doc):
        doc["sysinfo"]["realtime"] = 1
        doc["cmdline"] = doc.pop("cmdline:")
        doc["rt_test_version"] = doc.pop("rt_test_version:")
    result = parse_json(mutated(change), "rt.json")
    assert result.sysinfo.realtime is True
    assert result.cmdline.startswith("cyclictest -S ")
    assert result.rt_test_version == "2.40"


@pytest.mark.parametrize("cmdline, expected", [
    ("cyclictest -S -h 400 -q", 400),
    ("cyclictest -S -h400", 400),
    ("cyclictest --histogram=50", 50),
    ("cyclictest -H 30", 30),
    ("cyclictest --histofall 7", 7),
    ("cyclictest -h 5000000", 1_000_000),
    ("cyclictest -S -m -q", None),
    ("cyclictest -h", None),
])
def test_histogram_range_from_command_line(cmdline, expected):
    assert histogram_range(cmdline) == expected


@pytest.mark.parametrize("path", real_json_files(), ids=lambda p: p.name)
def test_every_real_output_parses_consistently(path):
    result = parse_json(path.read_text(encoding="utf-8"), path.name)
    assert result.num_threads == len(result.cpus) + len(result.no_wakeup)
    assert result.cpus
    assert result.rt_test_version
    for cpu in result.cpus:
        assert cpu.cycles > 0
        assert cpu.min_us <= cpu.avg_us + 0.01 and cpu.avg_us <= cpu.max_us + 0.01
        if cpu.histogram is not None:
            assert sum(cpu.histogram.values()) + cpu.overflows == cpu.cycles
    hist_path = histogram_of(path)
    if hist_path is not None:
        histogram = parse_histogram(hist_path.read_text(encoding="utf-8"), hist_path.name)
        cross_check(result, histogram)
        if result.histogram_range_us is not None:
            # the JSON buckets and the dump's buckets give the same percentiles
            for cpu, column in zip(result.cpus, histogram.columns, strict=True):
                assert cpu.percentiles() == column.percentiles()


# -------------------------------------------------------------------- histogram ----


def test_parse_histogram_reads_buckets_and_trailer():
    histogram = parse_histogram(text("host-x86-idle-h400-3s.hist"), "idle.hist")
    assert histogram.source == "idle.hist"
    assert histogram.range_us == 400
    assert histogram.histofall is False
    assert histogram.kernel_log_lines == ()
    first, second = histogram.columns
    assert len(first.counts) == 400
    assert (first.counts[12], first.counts[22], first.counts[23]) == (1, 514, 428)
    assert (second.counts[21], second.counts[28]) == (158, 159)
    assert (first.total, first.overflows, first.min_us, first.avg_us, first.max_us) == (
        3000, 0, 12, 22, 200)
    assert (second.total, second.overflows, second.min_us, second.avg_us, second.max_us) == (
        2997, 0, 12, 29, 363)
    assert first.overflow_cycles == () and first.overflow_cycles_unlisted == 0


def brute_force_percentile(counts, overflows, fraction):
    """Expand every sample and index the sorted list: the definition, not the algorithm."""
    samples = [bucket for bucket, count in enumerate(counts) for _ in range(count)]
    samples += [math.inf] * overflows
    return samples[math.ceil(fraction * len(samples)) - 1]


def test_percentiles_match_the_definition_on_real_data():
    histogram = parse_histogram(text("host-x86-idle-cpu1-h100-3s.hist"), "cpu1.hist")
    (column,) = histogram.columns
    got = column.percentiles()
    for name, fraction in (("p50", 0.5), ("p99", 0.99), ("p99_9", 0.999), ("p99_99", 0.9999)):
        expected = brute_force_percentile(column.counts, column.overflows, fraction)
        if expected == math.inf:
            assert got[name].value_us is None and got[name].above_range
        else:
            assert got[name].value_us == expected and not got[name].above_range
    assert (got["p50"].value_us, got["p99"].value_us, got["p99_9"].value_us) == (13, 29, 45)
    # 1 overflow in 2994 samples: the top 0.01 % lies past the 100 µs range
    assert got["p99_99"].value_us is None
    assert str(got["p99_99"]) == ">= 100 µs"
    assert str(got["p99_9"]) == "45 µs"


def test_percentiles_of_the_busier_real_histogram():
    histogram = parse_histogram(text("host-x86-idle-h400-3s.hist"), "idle.hist")
    values = [{k: p.value_us for k, p in c.percentiles().items()} for c in histogram.columns]
    assert values == [
        {"p50": 22, "p99": 33, "p99_9": 41, "p99_99": 200},
        {"p50": 29, "p99": 43, "p99_9": 90, "p99_99": 363},
    ]


def test_all_overflows():
    histogram = parse_histogram(text("host-x86-idle-h5-3s.hist"), "h5.hist")
    assert histogram.range_us == 5
    first, second = histogram.columns
    assert (first.total, first.overflows, first.samples) == (0, 3000, 3000)
    assert first.overflow_cycles == (0, 1, 2, 3, 4)
    assert first.overflow_cycles_unlisted == 2995
    assert second.overflow_cycles_unlisted == 2994
    for column in histogram.columns:
        for percentile in column.percentiles().values():
            assert percentile.value_us is None and percentile.above_range
            assert percentile.range_us == 5


def test_histofall_sum_column_is_checked_and_dropped():
    histogram = parse_histogram(text("host-x86-idle-H30-3s.hist"), "H30.hist")
    assert histogram.histofall is True
    assert len(histogram.columns) == 2
    assert [c.overflows for c in histogram.columns] == [99, 214]
    assert [c.total for c in histogram.columns] == [2901, 2783]
    assert [c.max_us for c in histogram.columns] == [181, 1351]


def test_histofall_sum_column_that_does_not_add_up_is_refused():
    lines = text("host-x86-idle-H30-3s.hist").split("\n")
    number = next(i for i, line in enumerate(lines) if line.startswith("000014 "))
    bucket, *values = lines[number].split()
    values[-1] = f"{int(values[-1]) + 1:06d}"
    lines[number] = f"{bucket} " + "\t".join(values)
    with pytest.raises(CyclictestParseError, match=rf"^H30\.hist:{number + 1}: the -H sum"):
        parse_histogram("\n".join(lines), "H30.hist")


def test_histogram_printed_on_the_console_parses_after_the_preamble():
    histogram = parse_histogram(text("host-x86-idle-h400-stdout-3s.console"), "console")
    assert [c.total for c in histogram.columns] == [3000, 3000]
    assert [c.max_us for c in histogram.columns] == [75, 63]


def test_kernel_messages_on_their_own_lines_are_dropped_and_recorded():
    clean = parse_histogram(text("host-x86-idle-h400-3s.hist"), "clean")
    noisy = parse_histogram(text("kernlog-host-x86-idle-h400-3s.hist"), "noisy")
    assert noisy.columns == clean.columns
    assert [number for number, _ in noisy.kernel_log_lines] == [26, 405, 406]
    assert noisy.kernel_log_lines[1][1] == "[  123.456789] sched: RT throttling activated"


def test_crlf_line_ends_of_a_serial_console_are_accepted():
    original = text("host-x86-idle-h400-3s.hist")
    clean = parse_histogram(original, "lf")
    assert parse_histogram(original.replace("\n", "\r\n"), "crlf").columns == clean.columns


@pytest.mark.parametrize("name, message", [
    ("broken-kernlog-midline.hist",
     ":30: unexpected line '000028 00[  123.456789] sched: RT throttling activated'"),
    ("broken-lost-bucket.hist", ":23: bucket 22 where bucket 21 belongs (a line was lost "
                                "or garbled)"),
    ("broken-total-mismatch.hist", ":402: thread 0: buckets add up to 3400 but '# Total:' "
                                   "says 3000"),
    ("broken-truncated-buckets.hist", ": truncated after line 200: no '# Total:' line"),
    ("broken-truncated-threads.hist", ":14: thread 1: 3 + 0 overflow cycles listed but 2999 "
                                      "overflows counted (truncated?)"),
])
def test_broken_histograms_are_refused_with_their_line(name, message):
    with pytest.raises(CyclictestParseError) as error:
        parse_histogram(text(name), name)
    assert str(error.value) == name + message


def edited(name: str, number: int, replacement: str | None) -> str:
    """The real file with 1-based line ``number`` replaced (or removed for None)."""
    lines = text(name).split("\n")
    if replacement is None:
        del lines[number - 1]
    else:
        lines[number - 1] = replacement
    return "\n".join(lines)


@pytest.mark.parametrize("number, replacement, message", [
    (1, "# Histogrm", ":1: expected '# Histogram'"),
    (30, "garbage", ":30: unexpected line 'garbage'"),
    (30, "000028 000050", ":30: 1 columns where the others have 2"),
    (30, "000028 000050\t000159\t000001", ":30: 3 columns where the others have 2"),
    (402, "# Total: 000003000", ":402: 1 values in '# Total:' for 2 columns"),
    (403, "# Min Latencies: 00013 00012", ":403: thread 0: min 13 but the lowest bucket is 12"),
    (405, "# Max Latencies: 00201 00363", ":405: thread 0: max 201 but the highest bucket"),
    (405, "# Max Latencies: 00450 00363", ":405: thread 0: max 450 is past the 400 µs range"),
    (406, "# Histogram Overflows: 00000 0000x", ":406: non-numeric values"),
    (408, "# Thread 1:", ":408: '# Thread 1:' where thread 0 belongs"),
    (409, None, ": truncated after line 408: overflow cycle numbers for 1 of 2 threads"),
    (407, None, ":407: unexpected line '# Thread 0:'"),
])
def test_damaged_histograms_are_refused(number, replacement, message):
    name = "host-x86-idle-h400-3s.hist"
    with pytest.raises(CyclictestParseError) as error:
        parse_histogram(edited(name, number, replacement), "h.hist")
    assert str(error.value).startswith("h.hist" + message)


@pytest.mark.parametrize("keep, message", [
    (406, "truncated after line 406: no overflow cycle numbers"),
    (404, "truncated after line 404: no '# Max Latencies:' line"),
    (401, "truncated after line 401: no '# Total:' line"),
])
def test_histograms_cut_short_are_refused(keep, message):
    lines = text("host-x86-idle-h400-3s.hist").split("\n")[:keep]
    with pytest.raises(CyclictestParseError) as error:
        parse_histogram("\n".join(lines), "h.hist")
    assert str(error.value) == "h.hist: " + message


def test_empty_or_foreign_text_is_refused():
    with pytest.raises(CyclictestParseError, match="no '# Histogram' line"):
        parse_histogram("", "empty")
    with pytest.raises(CyclictestParseError, match=r"^x:1: expected '# Histogram'"):
        parse_histogram("T: 0 ( 5340) P:90 I:1000 C: 994 Min: 12\n", "x")


def test_cross_check_refuses_files_of_different_runs():
    result = parse_json(text("host-x86-idle-h400-3s.json"), "a.json")
    other = parse_histogram(text("host-x86-cpu-h400-3s.hist"), "b.hist")
    with pytest.raises(CyclictestParseError, match=r"^b\.hist vs a\.json: thread 0: "):
        cross_check(result, other)
    narrow = parse_histogram(text("host-x86-idle-h5-3s.hist"), "c.hist")
    with pytest.raises(CyclictestParseError, match="histogram range 5 µs"):
        cross_check(result, narrow)
    single = parse_histogram(text("host-x86-idle-cpu1-h100-3s.hist"), "d.hist")
    with pytest.raises(CyclictestParseError, match="1 histogram threads, 2 in JSON"):
        cross_check(result, single)


# ------------------------------------------------------------------ percentiles ----


def test_percentiles_nearest_rank_on_a_small_histogram():
    got = percentiles([0, 5, 3, 2], overflows=0)
    assert {name: p.value_us for name, p in got.items()} == {
        "p50": 1, "p99": 3, "p99_9": 3, "p99_99": 3}


def test_percentile_on_the_edge_of_the_overflow_region():
    # 100 samples: the 99th is in bucket 1, the 100th overflowed
    got = percentiles([98, 1], overflows=1)
    assert got["p99"].value_us == 1 and not got["p99"].above_range
    assert got["p99_9"].value_us is None and got["p99_9"].above_range
    assert got["p99_9"].range_us == 2


def test_percentiles_of_nothing():
    with pytest.raises(ValueError, match="no samples"):
        percentiles([0, 0], overflows=0)


# --------------------------------------------------------------------- combine ----


def test_combine_adds_the_windows_of_one_run_thread_by_thread():
    one = parse_json(text("imx6q-rt-3s.json"), "w1")
    both = combine([one, attr.evolve(one, source="w2")])
    assert [cpu.cycles for cpu in both.cpus] == [2 * cpu.cycles for cpu in one.cpus]
    assert [cpu.max_us for cpu in both.cpus] == [cpu.max_us for cpu in one.cpus]
    assert [cpu.min_us for cpu in both.cpus] == [cpu.min_us for cpu in one.cpus]
    for mine, theirs in zip(both.cpus, one.cpus, strict=True):
        assert mine.avg_us == pytest.approx(theirs.avg_us)
        assert mine.overflows == 2 * theirs.overflows
        assert mine.histogram == {bucket: 2 * count for bucket, count in theirs.histogram.items()}
    assert both.no_wakeup == ()


def test_combine_keeps_a_thread_that_woke_in_any_window():
    one = parse_json(text("imx6q-rt-3s.json"), "w1")
    silent_cpu = one.cpus[2]
    quiet = attr.evolve(one, cpus=tuple(c for c in one.cpus if c.thread != silent_cpu.thread),
                        no_wakeup=(NoWakeup(thread=silent_cpu.thread, cpu=silent_cpu.cpu),))
    assert combine([quiet, quiet]).no_wakeup == (NoWakeup(silent_cpu.thread, silent_cpu.cpu),)
    mixed = combine([quiet, one])
    assert mixed.no_wakeup == ()
    assert [c.thread for c in mixed.cpus] == [c.thread for c in one.cpus]
    assert mixed.cpus[2] == attr.evolve(silent_cpu)


def test_combine_refuses_windows_of_different_runs():
    one = parse_json(text("imx6q-rt-3s.json"), "w1")
    other = attr.evolve(one, cmdline=one.cmdline.replace("-i 1000", "-i 100"), source="w2")
    with pytest.raises(ValueError, match="w2: not the same run as w1"):
        combine([one, other])
    with pytest.raises(ValueError, match="no windows"):
        combine([])
