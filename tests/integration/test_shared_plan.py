"""The test stage of a lab with two boards of a type, on the virtual rack:

- two places on one plan (`rtlab run --board qemu-imx6q --boards 2`) share the cases, each
  measured once; when one board fails mid-run (a kernel panic injected into its second
  window) it leaves the rest to the other, nothing is lost, and the report over the run
  names which place measured each case;
- adaptive cases (`--window`) against that run as the recorded baseline: ineligible (one
  run of another length), so a case runs to its cap and says why; against an eligible
  baseline ten times faster, a regression fails the case and the run;
- the gate tier (`--tier gate`, two cases here) replicated: each case on both places at
  once, a share of its budget each, judged once on the pooled result, whose record names
  both boards and boots; one board panics in its second case, which is judged on the
  other and says so; the report over both runs (two pipelines) shows the kernel's
  exposure pooled.

The suite file is the repository's with a 50 ms histogram: emulated latencies are
milliseconds, and a comparison needs the tail inside the histogram.
"""

import io
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from rtlab.artifacts.record import write_record
from rtlab.lab.health import ERRORS_TAG_KEY, TAG_KEY
from rtlab.measure.window import MARK
from rtlab.util.paths import REPO_ROOT
from rtlab.vlab import control

pytestmark = pytest.mark.vlab

CLIENT = str(Path(sys.executable).parent / "labgrid-client")
# six: whichever case the failing place panics in, cases are left for the other to take
CASES = ["idle/1000us", "cpu25/1000us", "cpu50/1000us", "cpu75/1000us", "cpu100/1000us",
         "hackbench/1000us"]
FAILING = "imx6q-02"


def records_of(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def rtlab(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rtlab.cli", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout, check=False)


def panic_after_first_record(vlab, runner: subprocess.Popen, results: Path) -> str:
    """Once FAILING has written a record into ``results``, its next window panics; the
    runner's output when it ends. The places' faults and health tags are cleared after."""
    try:
        deadline = time.monotonic() + 600
        while not any(r.get("place") == FAILING for r in records_of(results)):
            assert runner.poll() is None, runner.communicate()[0][-3000:]
            assert time.monotonic() < deadline, f"{FAILING} measured nothing in 10 min"
            time.sleep(1)
        control.inject_fault(vlab, FAILING, "panic", on_console=f"{MARK}started", after_s=3)
        output, _ = runner.communicate(timeout=900)
    finally:
        if runner.poll() is None:
            runner.kill()
        control.clear_faults(vlab, FAILING)
        for place in ("imx6q-01", FAILING):
            subprocess.run([CLIENT, "-x", vlab.coordinator_address, "-p", place, "set-tags",
                            f"{TAG_KEY}=", f"{ERRORS_TAG_KEY}="], capture_output=True,
                           check=True)
    return output


@pytest.fixture(scope="module")
def shared_run(vlab, image, tmp_path_factory, wide_suite):
    out = tmp_path_factory.mktemp("shared") / "out"
    runner = subprocess.Popen(
        [sys.executable, "-m", "rtlab.cli", "run", "--board", "qemu-imx6q", "--boards", "2",
         "--image", str(image("imx6q", "rt")), "--out", str(out), "--duration", "10",
         "--cases", ",".join(CASES), "--suite", str(wide_suite)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = panic_after_first_record(vlab, runner, out / "results")
    return runner.returncode, output, out


GATE = ["hackbench/1000us", "cpu100/1000us"]
EXPOSURE_HEADING = "<h2>Exposure per kernel</h2>"
# the kernel's row for one load: 2 cases of 2 runs (one of the shared run, one pooled),
# their board time and wake-ups, no wake-up past max_us, the rate bounds, a pass
EXPOSURE_ROW = (r'<td>qemu-imx6q<br><span class="small">rt</span></td>'
                r'<td>{case}<br><span class="small">max_us [^<]+</span></td>'
                r'<td class="num">2 \(2, \d\)</td><td class="num">[\d.e-]+</td>'
                r'<td class="num">[\d,]+</td><td class="num">0</td>'
                r'<td class="num">≤ [\d.e+-]+</td><td class="num">≤ [\d.e+-]+</td>'
                r'<td><span class="status v-pass">pass</span> rules out a rate above')


@pytest.fixture(scope="module")
def replicated_run(vlab, image, tmp_path_factory, wide_suite, shared_run):
    """The gate tier of a suite whose gate holds GATE, on both places at once (a pipeline
    of its own: CI_PIPELINE_ID 902), with a panic injected into the failing place's
    second case. After shared_run, so that the two never want the same places."""
    suite = tmp_path_factory.mktemp("gate") / "suite.yaml"
    text = wide_suite.read_text()
    gate = "    cases: [hackbench/100us, hackbench/1000us, combined/100us, combined/1000us]\n"
    assert text.count(gate) == 1
    suite.write_text(text.replace(gate, f"    cases: [{', '.join(GATE)}]\n"))
    out = tmp_path_factory.mktemp("replicated") / "out"
    env = {**os.environ, "CI_PIPELINE_ID": "902", "CI_JOB_ID": "9021"}
    runner = subprocess.Popen(
        [sys.executable, "-m", "rtlab.cli", "run", "--board", "qemu-imx6q", "--boards", "2",
         "--tier", "gate", "--trace", "never", "--image", str(image("imx6q", "rt")),
         "--out", str(out), "--duration", "12", "--suite", str(suite)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output = panic_after_first_record(vlab, runner, out / "replicas" / "results")
    return runner.returncode, output, out


# in make test FULL=1 (with the report over both pipelines, which needs this run too):
# make test replicates gate cases on the rack in tests/integration/test_gate_outcomes.py,
# and holds a board that fails mid-case on stand-in boards (tests/unit/test_board_outcomes.py)
# and in tests/unit/test_pooling.py
@pytest.mark.full
def test_a_gate_case_on_both_places_is_judged_pooled_and_a_failed_board_leaves_it(
        replicated_run):
    code, output, out = replicated_run
    records = {r["name"].split("/", 2)[2]: r for r in records_of(out / "results")}
    assert sorted(records) == sorted(GATE), output[-3000:]
    both, one = (records[case] for case in GATE)
    # the first case: measured on both places at once, 6 s each of its 12 s
    assert both["verdict"] == "pass", both["message"]
    assert both["message"].startswith("judged on 2 of 2 boards (imx6q-01, imx6q-02): "), \
        both["message"]
    assert both["replicated"]["boards_judged"] == 2 and both["replicated"]["share_s"] == 6
    boards = {b["place"]: b for b in both["boards"]}
    assert sorted(boards) == ["imx6q-01", FAILING]
    assert all(b["judged"] and b["samples"] > 0 and b["boot"] for b in boards.values())
    assert len({b["boot"] for b in boards.values()}) == 2
    assert both["duration_s"] == sum(b["measured_s"] for b in boards.values())
    assert sum(cpu["samples"] for cpu in both["cpus"]) == sum(
        b["samples"] for b in boards.values())
    # the second: the failing place panicked in it, so it is judged on the other alone
    assert one["verdict"] == "pass", one["message"]
    assert one["message"].startswith(
        f"judged on 1 of 2 boards (imx6q-01); {FAILING} ended in an error: kernel panic"), \
        one["message"]
    assert [b["place"] for b in one["boards"] if b["judged"]] == ["imx6q-01"]
    assert code != 0, "a board's infrastructure error is no clean run"
    # the replicas stay beside, marked; the pooled cases' JUnit is the job's
    replicas = records_of(out / "replicas" / "results")
    assert {(r["place"], r["verdict"]) for r in replicas} >= {(FAILING, "error")}
    [junit] = out.glob("junit-pooled-*.xml")
    assert sorted(c.get("name") for c in ET.parse(junit).iter("testcase")) == sorted(
        f"qemu-imx6q/rt/{case}" for case in GATE)


@pytest.mark.full
def test_the_report_pools_the_kernels_exposure_over_both_pipelines(shared_run,
                                                                   replicated_run, tmp_path):
    db = f"sqlite:///{tmp_path / 'results.db'}"
    for _, _, out in (shared_run, replicated_run):
        done = rtlab("results", "ingest", str(out), "--db", db)
        assert done.returncode == 0, done.stderr[-2000:]
    done = rtlab("report", "--db", db, "--out", str(tmp_path / "report"))
    assert done.returncode in (0, 1), done.stderr[-2000:]
    page = (tmp_path / "report" / "report.html").read_text()
    assert EXPOSURE_HEADING in page
    section = page[page.index(EXPOSURE_HEADING):]
    # a gate case the shared run passed (the failing place's panic makes its case an
    # error, left out): one case of the shared run, one pooled case of the replicated run
    passed = {r["name"].split("/", 2)[2] for r in records_of(shared_run[2] / "results")
              if r["verdict"] == "pass"}
    case = next(case for case in GATE if case in passed)
    assert re.search(EXPOSURE_ROW.format(case=re.escape(case)), section), section[:3000]
    # the pooled case is named by both places it was judged on
    assert "on imx6q-01+imx6q-02" in page


def test_two_places_share_the_cases_and_a_failing_one_leaves_the_rest(shared_run, tmp_path):
    code, output, out = shared_run
    records = records_of(out / "results")
    names = [r["name"] for r in records]
    # every case measured exactly once, none lost
    assert sorted(names) == sorted(f"qemu-imx6q/rt/{case}" for case in CASES), output[-3000:]
    by_place = {place: [r for r in records if r["place"] == place]
                for place in ("imx6q-01", FAILING)}
    # both places measured; the failing one passed before its panic, then left
    assert any(r["verdict"] == "pass" for r in by_place[FAILING]), by_place
    [panicked] = [r for r in records if r["verdict"] == "error"]
    assert panicked["place"] == FAILING
    assert panicked["message"].startswith("kernel panic during the test"), panicked
    assert all(r["verdict"] == "pass" for r in by_place["imx6q-01"]), by_place["imx6q-01"]
    # the cases after the panic went to the other place
    assert max(r["started"] for r in by_place["imx6q-01"]) > panicked["started"]
    assert code != 0, "an infrastructure error is no pass"
    # the JUnit of each place holds its own cases, together every case once
    junit_cases = [c.get("name") for junit in sorted(out.glob("junit-*.xml"))
                   for c in ET.parse(junit).iter("testcase")]
    assert sorted(junit_cases) == sorted(names)
    # into one store and one report, which names the place of each case
    db = f"sqlite:///{tmp_path / 'results.db'}"
    for args in (["results", "ingest", str(out), "--db", db],
                 ["report", "--db", db, "--out", str(tmp_path / "report")]):
        done = rtlab(*args)
        assert done.returncode in (0, 1), done.stderr[-2000:]
    page = (tmp_path / "report" / "report.html").read_text()
    assert "on imx6q-01" in page and f"on {FAILING}" in page
    for case in CASES:
        assert page.count(f"<code>qemu-imx6q/rt/{case}</code></td>") == 1, case


def test_adaptive_cases_judged_against_the_baseline(vlab, image, shared_run, wide_suite,
                                                   tmp_path):
    """One adaptive run of two loaded cases (5 s windows, a 30 s cap), in one boot:

    - the first has only the shared run's one 10 s run as its baseline, which is not
      eligible: it runs to its cap, says why, and its pass says what it rules out;
    - the second has ten more passing runs of 30 s (ten boots) at a tenth of the board's
      latencies: a regression, so it stops at a look and FAILS, with the comparison in
      its JUnit failure, and the run exits non-zero. The look is the first (after four
      windows) unless the emulated windows differ so much that their spread leaves it
      inconclusive: then it is the cap."""
    _, _, shared = shared_run
    passed = {r["name"].split("/", 2)[2]: r for r in records_of(shared / "results")
              if r["verdict"] == "pass"}
    # the loads keep an emulated board's latencies steady; idle's are not
    steady, regressed = [case for case in ("cpu100/1000us", "cpu75/1000us", "cpu50/1000us",
                                           "cpu25/1000us", "hackbench/1000us")
                         if case in passed][:2]
    db = f"sqlite:///{tmp_path / 'baseline.db'}"
    assert rtlab("results", "ingest", str(shared), "--db", db).returncode == 0
    faster = tmp_path / "faster"
    faster.mkdir()
    for index in range(10):
        write_record(faster, faster_run(passed[regressed], index, duration_s=30))
    assert rtlab("results", "ingest", str(faster), "--db", db).returncode == 0
    yaml = YAML(typ="rt")
    limits = yaml.load((REPO_ROOT / "thresholds.yaml").read_text())
    # the repository's file reports regressions of emulated boards without gating on them
    # (host noise): gated here, as on a physical board, to prove the path
    limits["boards"]["qemu-imx6q"]["statistics"] = {"gating": True}
    thresholds = tmp_path / "thresholds.yaml"
    buffer = io.StringIO()
    yaml.dump(limits, buffer)
    thresholds.write_text(buffer.getvalue())

    done = rtlab("run", "--place", "imx6q-01", "--image", str(image("imx6q", "rt")),
                 "--suite", str(wide_suite), "--thresholds", str(thresholds), "--window",
                 "5", "--duration", "30", "--baseline-db", db, "--baseline-ref", "",
                 "--out", str(tmp_path / "out"), "--cases", f"{steady},{regressed}")
    output = done.stdout[-3000:] + done.stderr[-2000:]
    records = {r["name"].split("/", 2)[2]: r for r in records_of(tmp_path / "out" / "results")}
    assert set(records) == {steady, regressed}, output

    capped = records[steady]
    assert capped["verdict"] == "pass", capped["message"]
    adaptive = capped["adaptive"]
    assert adaptive["baseline_runs"] == 0 and adaptive["measured_s"] == 30
    assert capped["baseline"]["left_out"] == {"not 30 s long": 1}
    assert adaptive["stopped"].startswith(
        "stopped after 30 s: at the cap of 30 s: no eligible baseline: 0 eligible runs from "
        "0 boots, an early decision needs 10 passing runs of the same options and 30 s from 2 "
        "boots (left out: 1 not 30 s long)"), adaptive["stopped"]
    assert re.match(r"no wake-up over 20000000 µs in [\d.]+ k wake-ups \(4 CPUs, 30 s\): "
                    r"rate < [\d.e+-]+ per wake-up at 95 %; no comparison: no eligible "
                    r"baseline", capped["message"]), capped["message"]
    assert capped["duration_s"] == adaptive["measured_s"]
    assert len(adaptive["windows"]) == 6 and len(adaptive["gaps_s"]) == 5
    assert all(w["samples"] > 0 for w in adaptive["windows"])

    record = records[regressed]
    assert done.returncode != 0, "a regression fails the run"
    assert record["verdict"] == "fail", record["message"]
    assert record["baseline"]["runs"] == 10 and record["baseline"]["boots"] == 10
    assert re.match(r"stopped after (20|30) s: regression", record["adaptive"]["stopped"]), \
        record["adaptive"]["stopped"]
    assert record["message"].startswith("regression against the baseline (10 runs of 30 s, "
                                        "10 boots): regression: p99."), record["message"]
    # the JUnit cases say why each stopped, what the pass rules out, why the other failed
    cases = {c.get("name"): c for c in
             ET.parse(tmp_path / "out" / "junit-imx6q-01.xml").iter("testcase")}
    properties = {p.get("name"): p.get("value")
                  for p in cases[f"qemu-imx6q/rt/{steady}"].iter("property")}
    assert properties["stopped"] == adaptive["stopped"]
    assert properties["rules_out"] == capped["message"]
    failure = cases[f"qemu-imx6q/rt/{regressed}"].find("failure")
    assert failure is not None and record["comparison"]["message"] in failure.get("message")


def faster_run(record: dict, index: int, *, duration_s: int) -> dict:
    """``record`` as another passing run of its case (its own run and boot, on one of two
    places) ``duration_s`` long, with every wake-up ten times faster (its CPUs' figures
    recomputed as the judge keeps them): a stored baseline the board cannot match."""
    from rtlab.measure.cyclictest import CpuResult
    from rtlab.verdict.judge import cpu_facts

    cpus = []
    for cpu in record["cpus"]:
        histogram: dict[int, int] = {}
        for bucket, count in cpu["histogram"].items():
            histogram[int(bucket) // 10] = histogram.get(int(bucket) // 10, 0) + count
        # the overflows lay past the range: a tenth of them lies at least at a tenth of it
        if cpu["overflows"]:
            at = cpu["histogram_range_us"] // 10
            histogram[at] = histogram.get(at, 0) + cpu["overflows"]
        cpus.append(cpu_facts(CpuResult(
            thread=cpu["thread"], cpu=cpu["cpu"], cycles=cpu["samples"],
            min_us=cpu["min_us"] // 10, avg_us=cpu["avg_us"] / 10, max_us=max(histogram),
            histogram=histogram, histogram_range_us=cpu["histogram_range_us"],
            overflows=0)))
    return {**record, "run_id": f"synthetic:{index}", "verdict": "pass", "message": "",
            "duration_s": duration_s,
            "started": f"2026-11-2{index}T10:00:00+00:00", "cpus": cpus,
            "place": f"imx6q-0{index % 2 + 1}",
            "infrastructure": {"attempts": [], "boots_in_session": 1}}
