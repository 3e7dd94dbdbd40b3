"""Stand-in for tests/target that writes the JUnit `rtlab run` writes (pytest's xunit1, the
case named board/flavour/..., figures, CI variables and the record's path as properties)
without a board; tests/data/junit/pytest-xunit1/ was made with it (see the README)."""

import pytest


class InfrastructureError(Exception):
    pass


@pytest.fixture(scope="session", autouse=True)
def _job(record_testsuite_property):
    # as labgrid's plugin names the place, and as a CI job would record its variables
    record_testsuite_property("TARGET_MAIN_REMOTE", "imx6q-02")
    record_testsuite_property("CI_PIPELINE_ID", "4711")
    record_testsuite_property("CI_JOB_ID", "90210")
    record_testsuite_property("CI_COMMIT_SHA", "0c4b8ad0578d0f178c77e74d764074bc7b7e27ff")
    record_testsuite_property("CI_COMMIT_REF_NAME", "main")


@pytest.fixture
def board_down(record_xml_attribute):
    record_xml_attribute("name", "imx6q/rt/hackbench/100us")
    raise InfrastructureError("no login prompt after 120 s (last console line: 'U-Boot "
                              "2023.01') (boot attempt 3 of 3)")


def test_latency_recorded(record_xml_attribute, record_property):
    # a case with a record (tests/data/records/vlab-imx6q-rt): the record tells it
    record_xml_attribute("name", "qemu-imx6q/rt/cpu100/1000us")
    for cpu, (max_us, avg_us) in enumerate([(23483, 3609.71), (23388, 3514.46)]):
        record_property(f"cpu{cpu}_max_us", max_us)
        record_property(f"cpu{cpu}_avg_us", avg_us)
    record_property("result_record", "/builds/lab/rtlab/out/imx6q-02/results/"
                    "qemu-imx6q_rt_cpu100_1000us--20261123142815277137.json")


def test_latency_fail(record_xml_attribute, record_property):
    record_xml_attribute("name", "imx6q/rt/cpu100/100us")
    record_property("cpu_utilisation", "0.991")
    record_property("cpu0_max_us", 61)
    record_property("cpu0_avg_us", 9.25)
    record_property("cpu0_p99_9_us", 31)
    record_property("cpu1_max_us", 152)
    record_property("cpu1_avg_us", 11.5)
    record_property("cpu1_p99_9_us", 48)
    record_property("cpu2_samples", 0)
    violations = ["max_us 152 > 120 on CPU1 (thresholds.yaml:14: imx6q rt under full load)"]
    assert not violations, "; ".join(violations)


def test_latency_error(board_down):
    pass


def test_latency_skipped(record_xml_attribute):
    record_xml_attribute("name", "imx6q/rt/cpu100_isolated/1000us")
    pytest.skip("the board's kernel isolates no CPU (no isolcpus= on its command line: "
                "'console=ttymxc1,115200 root=/dev/mmcblk0p2')")


def test_rt_tool(record_xml_attribute, record_property):
    record_xml_attribute("name", "imx6q/rt/ptsematest")
    record_property("thread0_max_us", 41)
    record_property("thread0_avg_us", 7.12)
    record_property("thread1_max_us", 38)
    record_property("thread1_avg_us", 6.9)


def test_functional(record_xml_attribute, record_property):
    record_xml_attribute("name", "imx6q/rt/pi_stress")
    record_property("inversions", 120544)
