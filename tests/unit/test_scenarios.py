"""rtlab.measure.suite: the repository's suite.yaml, per-board overrides, and bad suite files
refused with file:line."""

import re
from pathlib import Path

import attr
import pytest

from rtlab.measure.loads import (
    CpuLoad,
    DiskLoad,
    HackbenchLoad,
    HostTraffic,
    MemoryLoad,
    NetworkLoad,
)
from rtlab.measure.suite import DEFAULT_PATH, RT_TESTS, SuiteFileError, load_suite
from rtlab.util.paths import REPO_ROOT
from rtlab.util.yamlfile import YamlFileError

DATA = Path(__file__).resolve().parents[1] / "data" / "suite"

FIELD_HACKBENCH = HackbenchLoad(groups=15, fds=25, loops=200, bytes=512)
QEMU_HACKBENCH = HackbenchLoad(groups=2, fds=10, loops=100, bytes=512)


@pytest.fixture(scope="module")
def suite():
    return load_suite()


# ------------------------------------------------------ the repository's file ----


def test_the_repository_suite(suite):
    assert DEFAULT_PATH == REPO_ROOT / "suite.yaml"
    assert suite.source == "suite.yaml"
    assert list(suite.scenarios) == ["idle", "cpu25", "cpu50", "cpu75", "cpu100", "hackbench",
                                     "memory", "disk", "network", "combined", "cpu100_isolated"]
    assert suite.intervals_us == (100, 1000, 10000)
    assert (suite.histogram_us, suite.priority) == (400, 90)
    assert suite.rt_tests == RT_TESTS == ("pi_stress", "pip_stress", "ptsematest", "pmqtest",
                                          "sigwaittest", "signaltest", "oslat")


def test_the_repository_scenarios_loads(suite):
    assert suite.scenario("idle").loads == ()
    for percent in (25, 50, 75, 100):
        assert suite.scenario(f"cpu{percent}").loads == (CpuLoad(percent),)
    assert suite.scenario("hackbench").loads == (FIELD_HACKBENCH,)
    assert suite.scenario("memory").loads == (MemoryLoad(workers=2, bytes="10%"),)
    assert suite.scenario("disk").loads == (DiskLoad(dir="/data", block_kib=1024, blocks=8),)
    assert suite.scenario("network").loads == (NetworkLoad(ping_bytes=1400),)
    combined = suite.scenario("combined")
    assert combined.kinds == ("cpu", "hackbench", "memory", "disk", "network")
    assert combined.loads[0] == CpuLoad(50) and combined.loads[1] == FIELD_HACKBENCH
    isolated = suite.scenario("cpu100_isolated")
    assert (isolated.cpus, isolated.loads) == ("isolated", (CpuLoad(100),))
    assert {sc.cpus for name, sc in suite.scenarios.items() if name != "cpu100_isolated"} == {
        "all"}


def test_emulated_boards_get_the_lighter_hackbench_and_cpu_proof(suite):
    qemu = suite.for_board("qemu-imx6q")
    assert qemu.scenario("hackbench").loads == (QEMU_HACKBENCH,)
    # every scenario with the load, and nothing else; an override keeps what it does
    # not name (the cpu load's percent)
    assert qemu.scenario("combined").loads == (
        CpuLoad(50, 0.3), QEMU_HACKBENCH, MemoryLoad(2, "10%"), DiskLoad("/data", 1024, 8),
        NetworkLoad(1400))
    assert qemu.scenario("cpu50").loads == (CpuLoad(50, 0.3),)
    assert suite.for_board("imx6q").scenario("cpu50").loads == (CpuLoad(50, 0.5),)
    assert qemu.board_overrides == ()
    assert suite.for_board("qemu-rpi3").scenario("hackbench").loads == (QEMU_HACKBENCH,)
    # the suite itself is unchanged
    assert suite.scenario("hackbench").loads == (FIELD_HACKBENCH,)


@pytest.mark.parametrize("board", ["imx6q", "rpi3", "imx6q-qemu"])
def test_physical_boards_keep_the_fields_hackbench(suite, board):
    assert suite.for_board(board) is suite
    assert suite.for_board(board).scenario("hackbench").loads == (FIELD_HACKBENCH,)


def test_scenario_settings_are_what_a_result_record_keeps(suite):
    assert suite.scenario("idle").settings() == {}
    assert suite.for_board("qemu-imx6q").scenario("combined").settings() == {
        "cpu": {"percent": 50, "min_busy_fraction": 0.3},
        "hackbench": {"groups": 2, "fds": 10, "loops": 100, "bytes": 512},
        "memory": {"workers": 2, "bytes": "10%"},
        "disk": {"dir": "/data", "block_kib": 1024, "blocks": 8},
        "network": {"ping_bytes": 1400},
    }


def test_scenario_settings_leave_out_the_traffic_addresses(suite):
    scenario = suite.scenario("network")
    traffic = HostTraffic("10.0.2.2", "127.0.0.1", 15001, 5001)
    wired = attr.evolve(scenario, loads=tuple(attr.evolve(p, traffic=traffic)
                                              for p in scenario.loads))
    assert wired.settings() == {"network": {"ping_bytes": 1400}}


def test_cases_named_one_by_one(suite):
    chosen = suite.cases("hackbench/100us, combined/1000us,pi_stress,idle/10000us")
    assert chosen.latency == (("hackbench", 100), ("combined", 1000), ("idle", 10000))
    assert chosen.rt_tests == ("pi_stress",)


@pytest.mark.parametrize(("text", "message"), [
    ("hackbnch/100us", "no scenario 'hackbnch' (valid: idle, cpu25"),
    ("hackbench/100", "case 'hackbench/100': the interval must be µs like 100us, got '100'"),
    ("hackbench/0us", "the interval must be µs like 100us, got '0us'"),
    ("pistress", "case 'pistress': no rt-test of that name and no scenario/interval "
                 "(rt-tests: pi_stress, pip_stress"),
    ("idle/1000us,idle/1000us", "case 'idle/1000us' is named twice"),
    ("oslat,oslat", "case 'oslat' is named twice"),
    (" , ", "no case in ' , '"),
])
def test_bad_case_names_are_refused_with_what_was_expected(suite, text, message):
    with pytest.raises(ValueError) as raised:
        suite.cases(text)
    assert message in str(raised.value)


def test_unknown_scenario_lists_the_valid_ones(suite):
    with pytest.raises(ValueError) as raised:
        suite.scenario("cpu60")
    assert str(raised.value) == (
        "suite.yaml: no scenario 'cpu60' (valid: idle, cpu25, cpu50, cpu75, cpu100, hackbench, "
        "memory, disk, network, combined, cpu100_isolated)")


# --------------------------------------------------------------- bad files ----


BASE = """\
cyclictest:
  intervals_us: [100, 1000]
  histogram_us: 400
  priority: 90
scenarios:
  idle:
    loads: {}
  cpu50:
    loads: {cpu: {percent: 50}}
  hackbench:
    loads:
      hackbench: {groups: 15, fds: 25, loops: 200, bytes: 512}
board_overrides:
  qemu-*:
    hackbench: {groups: 2}
rt_tests: [pi_stress, oslat]
"""
MARK = "  # <-"


def write(tmp_path: Path, text: str) -> tuple[Path, int]:
    """The file, and the line marked with MARK."""
    path = tmp_path / "suite.yaml"
    path.write_text(text, encoding="utf-8")
    marked = [n for n, line in enumerate(text.splitlines(), start=1) if line.endswith(MARK)]
    assert len(marked) == 1, text
    return path, marked[0]


def variant(old: str, new: str) -> str:
    assert BASE.count(old) == 1, old
    return BASE.replace(old, new.replace("\n", f"{MARK}\n", 1) if "\n" in new else new + MARK)


def test_the_base_of_the_bad_files_is_good(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(BASE, encoding="utf-8")
    suite = load_suite(path)
    assert suite.source == str(path)
    assert list(suite.scenarios) == ["idle", "cpu50", "hackbench"]
    assert suite.for_board("qemu-x").scenario("hackbench").loads == (
        HackbenchLoad(2, 25, 200, 512),)


BAD = {
    "unknown top key": (
        variant("rt_tests:", "rt_test: [pi_stress]\nrt_tests:"),
        "unknown key 'rt_test' (expected one of: cyclictest, load_settings, scenarios, "
        "rt_tests, board_overrides, tiers, requirements)"),
    "unknown cyclictest key": (
        variant("  histogram_us: 400", "  histogram: 400"),
        "cyclictest: unknown key 'histogram' (expected one of: intervals_us, histogram_us, "
        "priority)"),
    "unknown scenario key": (
        variant("    loads: {}", "    load: {}"),
        "scenarios.idle: unknown key 'load' (expected one of: loads, cpus, requirements)"),
    "zero interval": (
        variant("  intervals_us: [100, 1000]", "  intervals_us: [100, 0]"),
        "interval must be a positive integer of µs, got 0"),
    "float interval": (
        variant("  intervals_us: [100, 1000]", "  intervals_us: [100, 1.5]"),
        "interval must be a positive integer of µs, got 1.5"),
    "string interval": (
        variant("  intervals_us: [100, 1000]", "  intervals_us: ['100']"),
        "interval must be a positive integer of µs, got '100'"),
    "boolean interval": (
        variant("  intervals_us: [100, 1000]", "  intervals_us: [true]"),
        "interval must be a positive integer of µs, got True"),
    # in a block list, the line of the item itself
    "bad interval in a block list": (
        BASE.replace("  intervals_us: [100, 1000]",
                     f"  intervals_us:\n    - 100\n    - -5{MARK}\n    - 1000"),
        "interval must be a positive integer of µs, got -5"),
    "no interval": (
        variant("  intervals_us: [100, 1000]", "  intervals_us: []"),
        "cyclictest.intervals_us must be a list of µs"),
    "duplicate interval": (
        variant("  intervals_us: [100, 1000]", "  intervals_us: [100, 1000, 100]"),
        "cyclictest.intervals_us repeats an interval"),
    "priority above 99": (
        variant("  priority: 90", "  priority: 100"),
        "cyclictest.priority must be 1..99, got 100"),
    "priority 0": (
        variant("  priority: 90", "  priority: 0"),
        "cyclictest.priority must be an integer >= 1, got 0"),
    "priority string": (
        variant("  priority: 90", "  priority: high"),
        "cyclictest.priority must be an integer >= 1, got 'high'"),
    "histogram 0": (
        variant("  histogram_us: 400", "  histogram_us: 0"),
        "cyclictest.histogram_us must be an integer >= 1, got 0"),
    "unknown load": (
        variant("    loads: {cpu: {percent: 50}}", "    loads: {stress: {percent: 50}}"),
        "scenarios.cpu50: unknown load 'stress' (valid: cpu, hackbench, memory, disk, network)"),
    "unknown load in a block mapping": (
        variant("      hackbench: {groups: 15, fds: 25, loops: 200, bytes: 512}",
                "      hackbnech: {groups: 15, fds: 25, loops: 200, bytes: 512}"),
        "scenarios.hackbench: unknown load 'hackbnech' (valid: cpu, hackbench, memory, disk, "
        "network)"),
    "load setting out of range": (
        variant("    loads: {cpu: {percent: 50}}", "    loads: {cpu: {percent: 150}}"),
        "scenarios.cpu50: cpu percent must be an integer 1..100, got 150"),
    "unknown load setting": (
        variant("    loads: {cpu: {percent: 50}}", "    loads: {cpu: {percent: 50, duty: 2}}"),
        "scenarios.cpu50: load 'cpu': unknown setting(s) 'duty' (valid: percent, "
        "min_busy_fraction)"),
    "missing load setting": (
        variant("      hackbench: {groups: 15, fds: 25, loops: 200, bytes: 512}",
                "      hackbench: {groups: 15, fds: 25, loops: 200}"),
        "scenarios.hackbench: load 'hackbench': missing setting(s) bytes"),
    "load setting of the wrong type": (
        variant("    loads: {cpu: {percent: 50}}", "    loads: {cpu: {percent: '50'}}"),
        "scenarios.cpu50: load 'cpu': percent must be int, got '50'"),
    "load settings not a mapping": (
        variant("    loads: {cpu: {percent: 50}}", "    loads: {cpu: 50}"),
        "scenarios.cpu50.loads.cpu must be a mapping of settings"),
    "bad cpus": (
        BASE.replace("  cpu50:\n", f"  cpu50:\n    cpus: some{MARK}\n"),
        "scenarios.cpu50.cpus must be one of all, isolated, got 'some'"),
    "cpus as a number": (
        BASE.replace("  cpu50:\n", f"  cpu50:\n    cpus: 2{MARK}\n"),
        "scenarios.cpu50.cpus must be one of all, isolated, got 2"),
    "bad scenario name": (
        variant("  cpu50:\n", "  cpu-50:\n"),
        "scenario name must be letters, digits or _, got 'cpu-50'"),
    "unknown rt-test": (
        variant("rt_tests: [pi_stress, oslat]", "rt_tests: [pi_stress, cyclictest]"),
        "unknown rt-test 'cyclictest' (valid: pi_stress, pip_stress, ptsematest, pmqtest, "
        "sigwaittest, signaltest, oslat)"),
    "rt_tests not a list": (
        variant("rt_tests: [pi_stress, oslat]", "rt_tests: pi_stress"),
        "rt_tests must be a list of tool names"),
    "override for an unknown load": (
        variant("    hackbench: {groups: 2}", "    hackbnech: {groups: 2}"),
        "board_overrides.qemu-*: unknown load 'hackbnech' (valid: cpu, hackbench, memory, "
        "disk, network)"),
    "override without settings": (
        variant("    hackbench: {groups: 2}", "    hackbench: {}"),
        "board_overrides.qemu-*.hackbench must be a mapping of settings"),
    # refused when loaded, not on the first emulated board; named by the override's line
    "override setting that does not fit": (
        variant("  qemu-*:\n    hackbench: {groups: 2}", "  qemu-*:\n    hackbench: {groups: 0}"),
        "load 'hackbench': groups must be greater than 0, got 0"),
    "override with an unknown setting": (
        variant("  qemu-*:\n    hackbench: {groups: 2}", "  qemu-*:\n    hackbench: {group: 2}"),
        "load 'hackbench': unknown setting(s) 'group' (valid: groups, fds, loops, bytes)"),
}


TIERS = "tiers:\n  gate:\n    cases: [idle/1000us, pi_stress]\n"
BAD_TIERS = {
    "unknown scenario in a tier": (
        "tiers:\n  gate:\n    cases:\n      - idle/1000us\n      - hackbnch/100us" + MARK + "\n",
        "tiers.gate.cases: no scenario 'hackbnch' (valid: idle, cpu50, hackbench)"),
    "interval without µs": (
        "tiers:\n  gate:\n    cases:\n      - idle/1000" + MARK + "\n",
        "tiers.gate.cases: case 'idle/1000': the interval must be µs like 100us, got '1000'"),
    "a case twice": (
        "tiers:\n  gate:\n    cases: [idle/1000us, idle/1000us]" + MARK + "\n",
        "tiers.gate.cases: case 'idle/1000us' is named twice"),
    "the full tier redefined": (
        "tiers:\n  full:" + MARK + "\n    cases: [idle/1000us]\n",
        "tiers.full: 'full' is every case of the suite already; name the tier otherwise"),
    "a misspelt key": (
        "tiers:\n  gate:\n    case: [idle/1000us]" + MARK + "\n",
        "tiers.gate: unknown key 'case' (expected one of: cases)"),
    "no cases": (
        "tiers:\n  gate:\n    cases: []" + MARK + "\n",
        "tiers.gate.cases must be a list of cases (scenario/interval or an rt-test)"),
}


def test_a_tier_names_its_cases(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(BASE + TIERS, encoding="utf-8")
    suite = load_suite(path)
    assert suite.tier("gate").latency == (("idle", 1000),)
    assert suite.tier("gate").rt_tests == ("pi_stress",)
    assert suite.tier("full") is None
    with pytest.raises(ValueError, match=r"no tier 'nightly' \(valid: full, gate\)"):
        suite.tier("nightly")


def test_the_repository_gate_tier(suite):
    gate = suite.tier("gate")
    assert gate.latency == (("hackbench", 100), ("hackbench", 1000), ("combined", 100),
                            ("combined", 1000))


@pytest.mark.parametrize(("tiers", "message"), BAD_TIERS.values(), ids=BAD_TIERS.keys())
def test_bad_tiers_are_refused_with_file_and_line(tmp_path, tiers, message):
    path, line = write(tmp_path, BASE + tiers)
    with pytest.raises(SuiteFileError) as raised:
        load_suite(path)
    assert str(raised.value) == f"{path}:{line}: {message}"


@pytest.mark.parametrize(("text", "message"), BAD.values(), ids=BAD.keys())
def test_bad_suite_files_are_refused_with_file_and_line(tmp_path, text, message):
    path, line = write(tmp_path, text)
    with pytest.raises(SuiteFileError) as raised:
        load_suite(path)
    assert str(raised.value) == f"{path}:{line}: {message}"


@pytest.mark.parametrize(("text", "message"), [
    ("- idle\n- cpu50\n", "expected a mapping"),
    ("cyclic: {}\n", "unknown key 'cyclic'"),
    ("scenarios:\n  idle:\n    loads: {}\n", "cyclictest must be a mapping"),
    (BASE.split("scenarios:")[0], "scenarios must be a mapping"),
    (BASE.split("scenarios:")[0] + "scenarios: {}\n", "no scenarios"),
])
def test_structural_errors(tmp_path, text, message):
    path = tmp_path / "suite.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SuiteFileError, match=rf"^{re.escape(str(path))}:\d+: {message}"):
        load_suite(path)


def test_missing_cyclictest_setting_names_its_mapping(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(BASE.replace("  priority: 90\n", ""), encoding="utf-8")
    with pytest.raises(SuiteFileError) as raised:
        load_suite(path)
    # the line where the cyclictest mapping begins
    assert str(raised.value) == f"{path}:2: cyclictest: missing 'priority'"


def test_duplicate_scenario_is_refused(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(BASE.replace("  cpu50:", "  idle:"), encoding="utf-8")
    with pytest.raises(YamlFileError, match=rf'^{re.escape(str(path))}:8: invalid YAML: found '
                                            'duplicate key "idle"'):
        load_suite(path)


def test_first_matching_override_wins(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(BASE.replace("  qemu-*:\n    hackbench: {groups: 2}\n",
                                 "  qemu-imx6q:\n    hackbench: {groups: 4}\n"
                                 "  qemu-*:\n    hackbench: {groups: 2, loops: 100}\n"),
                    encoding="utf-8")
    suite = load_suite(path)
    assert suite.for_board("qemu-imx6q").scenario("hackbench").loads == (
        HackbenchLoad(4, 25, 200, 512),)
    assert suite.for_board("qemu-rpi3").scenario("hackbench").loads == (
        HackbenchLoad(2, 25, 100, 512),)
    assert suite.for_board("imx6q") is suite


def test_a_file_in_the_repository_is_named_by_its_repository_path():
    path = DATA / "bad-unknown-load.yaml"
    line = next(n for n, text in enumerate(path.read_text().splitlines(), start=1)
                if "hackbnech" in text)
    with pytest.raises(SuiteFileError) as raised:
        load_suite(path)
    assert str(raised.value) == (
        f"tests/data/suite/bad-unknown-load.yaml:{line}: scenarios.hackbench: unknown load "
        "'hackbnech' (valid: cpu, hackbench, memory, disk, network)")


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(YamlFileError, match=rf"^{re.escape(str(tmp_path))}/absent.yaml: cannot "
                                            "read: No such file or directory$"):
        load_suite(tmp_path / "absent.yaml")


def test_invalid_yaml_is_refused_with_its_line(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text((DATA / "bad-syntax.yaml").read_text(), encoding="utf-8")
    with pytest.raises(YamlFileError, match=rf"^{re.escape(str(path))}:4: invalid YAML: "):
        load_suite(path)


def test_invalid_yaml_in_the_repository_is_named_by_its_repository_path():
    with pytest.raises(YamlFileError, match=r"^tests/data/suite/bad-syntax.yaml:4: invalid YAML"):
        load_suite(DATA / "bad-syntax.yaml")
