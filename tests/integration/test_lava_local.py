"""A rendered QEMU job run by Debian's lava-run (lava-dispatcher) against the virtual i.MX6Q
with its PREEMPT_RT image: LAVA boots it, its test shell runs rtlab's scripts, and the
job's log becomes result records judged by thresholds.yaml, and their JUnit report. About
80 s: two cases of 10 s of cyclictest, one of them under a CPU load, one skipped as on
labgrid, and signaltest. The board changes under the first window (its threads reniced, a
SCHED_FIFO 99 task, RT throttling back on, a governor stand-in), which the board's checks
find, so that case is an error naming each (issue 32). A second job boots a stock kernel
under flavour rt (about 40 s)."""

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from rtlab.artifacts.record import read_record
from rtlab.cli import main
from rtlab.lava.joblog import read_log
from rtlab.store import ingest_paths, open_store
from rtlab.util.paths import REPO_ROOT
from rtlab.vlab.faults import WINDOW_FAULTS, window_fault_param

pytestmark = pytest.mark.lava
# 10 s windows: the late check is 2 s before the end, after the faults (at 6 s it was
# left out: the program was ending by the time the emulated board had walked its tasks)
WINDOW_S = 10
AFTER_S = 2


@pytest.fixture(scope="module")
def lava_run():
    if shutil.which("lava-run") is None:
        pytest.fail("lava-run is missing: scripts/bootstrap.sh lava-tools installs Debian's "
                    "lava-dispatcher")
    if os.geteuid() != 0:
        pytest.skip("lava-run runs as root only")


def checked_suite(tmp_path: Path) -> Path:
    """The repository's suite, whose idle scenario checks the emulated board's measuring
    threads and governor as a physical board's (suite.yaml leaves them out on qemu-*)."""
    yaml = YAML(typ="rt")
    data = yaml.load((REPO_ROOT / "suite.yaml").read_text())
    data["scenarios"]["idle"]["requirements"] = {"measuring_policy": "fifo",
                                                 "governor": "performance"}
    suite = tmp_path / "suite.yaml"
    with suite.open("w") as out:
        yaml.dump(data, out)
    return suite


def test_a_qemu_job_run_by_lava_run_yields_judged_records(lava_run, image, tmp_path):
    image("imx6q", "rt")
    job = tmp_path / "job.yaml"
    assert main(["lava", "render", "--board", "qemu-imx6q", "--flavour", "rt",
                 "--scenarios", "idle,cpu50,network", "--intervals", "1000",
                 "--rt-tests", "signaltest", "--suite", str(checked_suite(tmp_path)),
                 "--duration", str(WINDOW_S), "--out", str(job)]) == 0
    assert main(["lava", "validate", str(job)]) == 0
    # the board changes under the first window, AFTER_S after its cyclictest started (the
    # board's /init plays the faults, as on the virtual rack, and undoes them when that
    # cyclictest ends): that case is void, the next is judged
    text = job.read_text()
    assert text.count('-append \\"') == 1
    faults = " ".join(window_fault_param(kind, AFTER_S) for kind in WINDOW_FAULTS)
    job.write_text(text.replace('-append \\"', f'-append \\"{faults} '))
    out = tmp_path / "run"
    code = main(["lava", "local", str(job), "--out", str(out), "--timeout", "420"])

    # lava-run's log: YAML flow mappings (not all of them JSON), one per line
    log = read_log((out / "lava-job.log").read_text(), "lava-job.log")
    assert log.job_result == {"definition": "lava", "case": "job", "result": "pass"}
    assert log.unreadable == ()
    records = {r["scenario"]: r for r in map(read_record, (out / "results").glob("*.json"))}
    assert set(records) == {"idle", "cpu50", "network", "signaltest"}
    # judged on the host from the board's checks, as a labgrid run judges them
    void = records["idle"]
    assert void["verdict"] == "error", void["message"]
    message = void["message"]
    assert message.startswith("the run is not what it claims: "), message
    assert re.search(r"measuring thread \d+ on CPU\d ran at SCHED_OTHER 0, case requires "
                     r"SCHED_FIFO 90", message), message
    assert re.search(r"another real-time task at or above the measuring priority: "
                     r"sleep \(pid \d+\) SCHED_FIFO 99 on CPU0", message), message
    assert "RT throttling on: sched_rt_runtime_us 950000, case requires -1 (off)" in message
    assert "CPU0 governor powersave, case requires performance" in message
    checks = void["conditions"]["checks"]
    for name in ("measuring_policy", "other_rt_tasks", "rt_throttling", "governor"):
        assert checks[name]["status"] == "mismatch", (name, checks[name])
    assert checks["kernel"]["status"] == "met"
    # the next window: the faults undone, judged by the gate (the emulated figures may or
    # may not pass it), never an error
    record = records["cpu50"]
    assert record["verdict"] in ("pass", "fail"), record["message"]
    assert record["thresholds"]["max_us"]["source"].startswith("thresholds.yaml:")
    assert len(record["cpus"]) == 4 and all(c["samples"] > 0 for c in record["cpus"])
    assert record["system"]["realtime"] is True
    assert record["system"]["kernel_release"].endswith("-rt-armmp")
    assert record["lava"]["job_result"]["result"] == "pass"
    # checked on the board while the window ran, as a labgrid run checks it
    checks = record["conditions"]["checks"]
    # the emulated board's measuring threads are not checked (suite.yaml qemu-*)
    assert "measuring_policy" not in checks
    assert checks["kernel"]["status"] == "met"
    assert checks["rt_throttling"]["found"] == "sched_rt_runtime_us -1"
    assert checks["other_rt_tasks"]["status"] == "met", checks["other_rt_tasks"]
    # every fact checked beside its requirement, none against it
    assert {check["status"] for check in checks.values()} <= {"met", "unknown"}, checks
    assert records["cpu50"]["load_check"]["loads"] == {"cpu": {"percent": 50}}
    assert records["network"]["verdict"] == "skipped"
    assert records["signaltest"]["verdict"] in ("pass", "fail"), records["signaltest"]
    assert records["signaltest"]["threads"][0]["samples"] > 0
    # an error fails the job's run, whatever the others' verdicts
    assert code == 1

    # the JUnit beside the records: a test case per case, named and judged as its record
    junit, = out.glob("junit-lava-*.xml")
    suite = ET.parse(junit).getroot().find("testsuite")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == {r["name"] for r in records.values()}
    assert suite.get("tests") == "4" and suite.get("skipped") == "1"
    assert suite.get("errors") == "1"
    tags = {"pass": None, "fail": "failure", "error": "error", "skipped": "skipped"}
    for record in records.values():
        case = cases[record["name"]]
        outcome = [child for child in case if child.tag in ("failure", "error", "skipped")]
        expected = tags[record["verdict"]]
        assert [child.tag for child in outcome] == ([expected] if expected else [])
        if outcome:
            assert record["message"].startswith(outcome[0].get("message"))
        figures = {p.get("name"): p.get("value") for p in case.find("properties")}
        assert read_record(Path(figures["result_record"]))["name"] == record["name"]
        if record["scenario"] in ("idle", "cpu50"):
            assert case.get("classname") == "tests.target.test_latency"
            # a void run has no figures
            assert ({f"cpu{n}_max_us" for n in range(4)} <= set(figures)) == (
                record["scenario"] == "cpu50")
            # the case's own part of lava-run's log, from its start to its end
            shown = case.find("system-out").text
            name = f"{record['scenario']}-{record['interval_us']}us"
            assert f"rtlab-lava:case-start {name}" in shown
            assert f"rtlab-lava:case-end {name}" in shown
    assert cases["qemu-imx6q/rt/signaltest"].get("classname") == "tests.target.test_rttests"
    # the store takes records and JUnit together once, and nothing the second time
    store = open_store(f"sqlite:///{tmp_path / 'results.db'}")
    first = ingest_paths(store, [out / "results", junit])
    assert (first.added, first.from_junit, first.junit_with_record) == (4, 0, 4)
    assert ingest_paths(store, [out / "results", junit]).added == 0

    # the serial line was quiet while each window was open: nothing between a case's start
    # and its evidence
    target = [line.text for line in log.target]
    for name in ("idle-1000us", "cpu50-1000us", "signaltest"):
        begin = target.index(f"rtlab-lava:case-start {name}")
        assert target[begin + 1].startswith(f"rtlab-lava:file {name} ")
    # lava-run took QEMU down with it
    left = subprocess.run(["pgrep", "-f", f"{out}/lava-run"], capture_output=True, text=True,
                          check=False).stdout
    assert left == ""


# in make test FULL=1 with its labgrid twin (test_pipeline_local): the kernel check's judging
# is unit-tested on both paths; make test's minutes went to the bisection
# (tests/integration/test_bisect_rack.py)
@pytest.mark.full
def test_a_job_for_flavour_rt_that_boots_a_stock_kernel_is_an_error(lava_run, image, tmp_path):
    """The lab's deploy put the wrong kernel under a job that names flavour rt (the job is
    rendered for rt, its boot files and card are the std image's): the board's kernel check
    voids the case, on the LAVA path as on labgrid's (test_pipeline_local). About 40 s."""
    image("imx6q", "rt")
    std_image = image("imx6q", "std")
    common = ["--board", "qemu-imx6q", "--scenarios", "idle", "--intervals", "1000",
              "--rt-tests", "none", "--duration", "3"]
    job = tmp_path / "job.yaml"
    assert main(["lava", "render", "--flavour", "rt", *common, "--out", str(job),
                 "--boot-dir", str(tmp_path / "boot")]) == 0
    # rendering refuses the std image for flavour rt, so the swap is the lab's, after it
    std_boot = tmp_path / "std-boot"
    assert main(["lava", "render", "--flavour", "std", *common,
                 "--out", str(tmp_path / "std.yaml"), "--boot-dir", str(std_boot)]) == 0
    for name in ("zImage", "initrd.cpio.gz", "imx6q-sabrelite.dtb"):
        shutil.copyfile(std_boot / name, tmp_path / "boot" / name)
    text = job.read_text()
    rt_card = f"file://{image('imx6q', 'rt')}"
    assert text.count(rt_card) == 1
    job.write_text(text.replace(rt_card, f"file://{std_image}"))

    out = tmp_path / "run"
    assert main(["lava", "local", str(job), "--out", str(out), "--timeout", "300"]) == 1

    record, = map(read_record, (out / "results").glob("*.json"))
    assert record["flavour"] == "rt"
    assert record["verdict"] == "error", record["message"]
    assert record["message"].startswith(
        "the run is not what it claims: flavour rt requires a PREEMPT_RT kernel: uname -v '"), \
        record["message"]
    assert "/sys/kernel/realtime absent" in record["message"]
    kernel = record["conditions"]["checks"]["kernel"]
    assert kernel["status"] == "mismatch"
    assert kernel["required"].startswith("PREEMPT_RT (flavour rt)")
    assert "PREEMPT_RT" not in kernel["found"]
    assert record["system"]["realtime"] is False
    # no figures from a void run
    assert "cpus" not in record
    junit, = out.glob("junit-lava-*.xml")
    case, = ET.parse(junit).getroot().iter("testcase")
    error, = case.findall("error")
    assert record["message"].startswith(error.get("message"))
