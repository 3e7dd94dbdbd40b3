"""A finished LAVA job → rtlab result records (rtlab.artifacts.record), one per case of its
plan, judged as a labgrid run judges them (rtlab.measure.window.judge_window for the loads,
rtlab.verdict.case, the one judge of a latency case, for the verdict).

Verdicts, as on labgrid: ``pass``; ``fail`` when a limit is exceeded; ``error`` for
everything that is no statement about latency: a job that ended before the case, evidence
missing or garbled in the log, a window that did not run, a load not effective, output
that does not parse; ``skipped`` only for the reasons a labgrid run skips a case, and only
once the board got to it. No case of the plan is left without a record.
"""

import datetime
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attr

from rtlab.artifacts.record import RUN_ID_VARIABLE, write_record
from rtlab.lava.joblog import Evidence, JobLog
from rtlab.lava.plan import Plan, PlanError, PlannedCase
from rtlab.lava.render import TEST_NAME
from rtlab.measure import cyclictest, rttests
from rtlab.measure.conditions import Requirements, RunNotValid
from rtlab.measure.facts import Answer, FactsError, replay_system_info
from rtlab.measure.loads import LoadNotEffective, LoadPart
from rtlab.measure.rttests import board as rt_board
from rtlab.measure.sysinfo import SystemInfo
from rtlab.measure.window import (
    ProgramFailed,
    Window,
    WindowStart,
    judge_window,
    program_exit_code,
    started_loads,
)
from rtlab.verdict.baseline import Baseline, no_baseline
from rtlab.verdict.case import FAIL, PASS, CasePlan, LatencyCase, TraceChoice, plan_case
from rtlab.verdict.judge import judge_rt_tool, rt_tool_limits
from rtlab.verdict.thresholds import Threshold, Thresholds

RUNNER = "lava"
SYSINFO = "sysinfo"
# the program's JSON among a case's files (jobs/board/suite.sh.j2)
RESULT_JSON = "result.json"


# (the case's plan, its command, its length) -> its eligible baseline
BaselineFor = Callable[[CasePlan, Sequence[str], float], Baseline]


# a LAVA job runs each case as one window to its end: no trace is armed, no run broken
LAVA_TRACE = TraceChoice(False, "a LAVA job keeps no trace of a breach")


class CaseError(Exception):
    """The case is an error (no statement about latency); the message says why."""


class VoidRun(CaseError):
    """The window ran, but not as the case claims (a condition mismatch)."""


@attr.frozen
class LavaJob:
    """Which job the log is of."""

    job_id: str
    server: str | None = None
    """The LAVA server (its host), None for lava-run here."""
    device: str | None = None
    device_type: str | None = None
    url: str | None = None
    health: str | None = None
    """lava-server's health of the job (Complete, Incomplete, Canceled), when known."""
    never_started: str | None = None
    """Why the job never ran on a device (lava-server ended it in the queue), as
    rtlab.lava.server.never_started says it; None: it ran, or it is not known."""

    @property
    def run_id(self) -> str:
        return f"lava:{self.server or 'local'}:{self.job_id}"


def _iso(when: datetime.datetime | None) -> str:
    return (when or datetime.datetime.now(datetime.UTC)).isoformat()


def _system(plan: Plan, evidence: Evidence) -> SystemInfo:
    """The board's facts, read back as rtlab.measure.sysinfo reads them, and held against what
    the job was rendered for: the cases' CPUs were chosen from it."""
    garbled = evidence.garbled.get(SYSINFO, {})
    if garbled:
        raise CaseError("the board's system facts are garbled in the log: "
                        + "; ".join(garbled.values()))
    files = evidence.files.get(SYSINFO, {})
    answers = {}
    for index, command in enumerate(plan.sysinfo_commands):
        out, rc = files.get(f"{index}.out"), files.get(f"{index}.rc")
        if out is None or rc is None:
            continue
        status = rc.decode(errors="replace").strip()
        answers[command] = Answer(out.decode(errors="replace"),
                                  int(status) if status.isdigit() else 255)
    if not answers:
        raise CaseError("the log holds none of the board's system facts")
    try:
        system = replay_system_info(answers)
    except FactsError as error:
        raise CaseError(str(error)) from None
    if system.cpus != plan.cpus or system.isolated_cpus != plan.isolated:
        raise CaseError(f"the board has {system.cpus} CPUs, isolated "
                        f"{list(system.isolated_cpus) or 'none'}; the job was rendered for "
                        f"{plan.cpus} CPUs, isolated {list(plan.isolated) or 'none'} "
                        "(render it from the image the board boots)")
    return system


@attr.define
class _Case:
    plan: Plan
    case: PlannedCase
    log: JobLog
    evidence: Evidence
    facts: dict[str, Any]

    def text(self, name: str) -> str:
        owner = self.case.lava_name
        garbled = self.evidence.garbled.get(owner, {})
        if garbled:
            raise CaseError("the case's evidence " + "; ".join(garbled.values()))
        files = self.evidence.files.get(owner)
        if files is None:
            why = (" (the board could not pack it)" if owner in self.evidence.missing
                   else "")
            raise CaseError(f"the case's evidence is not in the log{why}")
        if name not in files:
            raise CaseError(f"the board wrote no {name} for the case")
        return files[name].decode(errors="replace")

    def window(self, parts: list[LoadPart], cpus: int, load_cpus: list[int] | None,
               requirements: Requirements | None = None) -> Window:
        """The case's window from its evidence, the loads proven (rtlab.measure.window)."""
        program = list(self.case.program)
        start_rc = self.text("start.rc").strip()
        start = self.text("start.out").splitlines()
        if start_rc != "0":
            # what labgrid's run_check of the window's start raises
            raise CaseError(f"the window's start exited {start_rc}: {start[-5:]}")
        try:
            opened = WindowStart.parse(program, start, started_loads(parts), load_cpus)
            end_rc = self.text("end.rc").strip()
            end = self.text("end.out").splitlines()
            if end_rc != "0":
                raise CaseError(f"the window's end exited {end_rc}: {end[-5:]}")
            exit_code = program_exit_code(program, end)
            window = judge_window(program, parts, opened, end, exit_code,
                                  self.text("program.out").rstrip("\n"), cpus=cpus,
                                  duration_s=self.case.wait_s, load_cpus=load_cpus,
                                  conditions=self.case.checked(self.plan, requirements))
        except RunNotValid as error:
            # void, as on the labgrid path: an error that keeps what the board had
            self.facts["conditions"] = error.conditions.facts()
            raise VoidRun(str(error)) from None
        except (ProgramFailed, LoadNotEffective, ValueError) as error:
            raise CaseError(str(error)) from None
        if window.conditions is not None:
            self.facts["conditions"] = window.conditions.facts()
        return window

    def judge(self, thresholds: Thresholds, baseline_for: "BaselineFor") -> tuple[str, str]:
        """By the one judge of a case (rtlab.verdict.case), as the on-board suite judges
        it: a LAVA job runs each case as one fixed window."""
        plan, case = self.plan, self.case
        judge = plan_case(thresholds, board=plan.board, flavour=plan.flavour,
                          scenario=case.scenario, interval_us=case.interval_us,
                          cases=plan.pipeline_cases, trace=LAVA_TRACE,
                          requirements=case.requirements)
        self.facts.update(judge.facts())
        self.facts["command"] = list(case.program)
        load_cpus = list(case.load_cpus) if case.load_cpus is not None else None
        self.facts["load_cpus"] = load_cpus
        measured = judge.measure(window_s=plan.duration_s, cap_s=plan.duration_s,
                                 baseline=baseline_for(judge, case.program, plan.duration_s))
        try:
            window = self.window(case.parts(), plan.load_cpu_count(case), load_cpus,
                                 judge.requirements)
        except VoidRun as void:
            # as on labgrid: a breach in the void window survives the void, told beside it
            if self._breached(measured):
                self.facts["error"] = str(void)
                return "fail", self.facts["judged"]["message"]
            raise
        self.facts["load_check"] = {**window.load_facts,
                                    "loadavg_before": window.loadavg_before,
                                    "temperatures_mc": list(map(list, window.temperatures_mc))}
        if window.exit_code != 0:
            raise CaseError(f"cyclictest exited {window.exit_code}: {window.output}")
        measured.add(self._result())
        self.facts.update(measured.record_facts())
        outcome = measured.outcome()
        required = judge.requirements is not None and judge.requirements.checked
        if case.conditions is not None and window.conditions is None and required \
                and outcome.verdict == PASS:
            # as on labgrid: a run that passes must have been what it claims
            self.facts.setdefault("conditions", {})["not_checked"] = (
                "the program ended before its measuring threads could be checked")
            raise CaseError("the run's conditions were never checked (cyclictest ended "
                            "before either check of its measuring threads): not a pass; "
                            f"measure the case again (the judge saw: {outcome.message})")
        # the judge's verdict on the window, kept whatever comes next (rtlab.verdict.outcome)
        self.facts["judged"] = {"verdict": outcome.verdict, "message": outcome.message}
        return outcome.verdict, outcome.message

    def _result(self) -> cyclictest.CyclictestResult:
        where = f"{self.facts['name']}: {self.case.json_path} of LAVA job {self.job_id}"
        try:
            return cyclictest.parse_json(self.text(RESULT_JSON), source=where,
                                         expected_threads=self.case.threads)
        except cyclictest.CyclictestParseError as error:
            raise CaseError(str(error)) from None

    def _breached(self, measured: LatencyCase) -> bool:
        """Whether the window's wake-ups, judged, show a breach (kept as ``judged``)."""
        try:
            measured.add(self._result())
        except CaseError:
            return False
        outcome = measured.outcome()
        if outcome.verdict != FAIL:
            return False
        self.facts.update(measured.record_facts())
        self.facts["judged"] = {"verdict": outcome.verdict, "message": outcome.message}
        return True

    def judge_rt_test(self, thresholds: Thresholds) -> tuple[str, str]:
        """As tests/target/test_rttests.py judges a tool's run on the idle board."""
        plan, case = self.plan, self.case
        try:
            run = case.rt_run(plan)
        except PlanError as error:
            raise CaseError(str(error)) from None
        self.facts["command"] = list(run.argv)
        window = self.window([], plan.load_cpu_count(case), None)
        files = self.evidence.files.get(case.lava_name, {})
        json_text = (files[RESULT_JSON].decode(errors="replace")
                     if run.json_path is not None and RESULT_JSON in files else None)
        try:
            result = rt_board.judge(run, exit_status=window.exit_code, output=window.output,
                                   json_text=json_text, source=self.facts["name"])
        except rttests.ToolUnsupported as error:
            return "skipped", str(error)
        except rttests.RtTestsParseError as error:
            raise CaseError(str(error)) from None
        limits: dict[str, Threshold] = {}
        if not isinstance(result, rttests.FunctionalResult):
            limits = rt_tool_limits(thresholds.lookup(plan.board, plan.flavour, case.scenario))
            self.facts["thresholds"] = {m: {"value": t.value, "source": t.source}
                                        for m, t in limits.items()}
        judged = judge_rt_tool(result, limits)
        self.facts.update(judged.facts)
        if judged.skip is not None:
            return "skipped", judged.skip
        if judged.violations:
            return "fail", "; ".join(judged.violations)
        return "pass", ""

    @property
    def job_id(self) -> str:
        return str(self.facts["lava"]["job_id"])


def job_status(log: JobLog, job: LavaJob) -> str:
    """One line on how the job ended: the log's word, unless the server knows better."""
    if job.never_started is not None:
        return job.never_started
    if job.health and job.health != "Complete" and log.complete:
        return f"lava-server's health of the job is {job.health}"
    return log.status()


def error_type(log: JobLog, job: LavaJob) -> str | None:
    """LAVA's error type of a job that did not complete: the dispatcher's (Infrastructure,
    Job, Test, Canceled, …) from the log, else lava-server's health of a job that never
    ran (Canceled); None for a job LAVA finished correctly."""
    if log.job_result is not None and not log.complete:
        return str(log.job_result.get("error_type") or "unknown")
    if job.never_started is not None or (log.job_result is None and job.health
                                         not in (None, "Complete")):
        return job.health or "unknown"
    return None


def no_store(judge: CasePlan, command: Sequence[str], cap_s: float) -> Baseline:
    """The baseline of a job judged without a results store: none, and the record says so."""
    return no_baseline("no results store to take a baseline from (rtlab lava fetch "
                       "--baseline-db)", length_s=cap_s,
                       min_runs=judge.statistics.baseline_runs,
                       min_boots=judge.statistics.baseline_boots)


def job_records(plan: Plan, log: JobLog, job: LavaJob, thresholds: Thresholds,
                baseline_for: BaselineFor = no_store) -> list[dict[str, Any]]:
    """One record per case of the plan, in its order. ``baseline_for(plan, command,
    cap_s)``: a latency case's eligible baseline, as the on-board suite finds it."""
    evidence = log.evidence()
    status = job_status(log, job)
    lava = {"job_id": job.job_id, "server": job.server, "url": job.url,
            "device": job.device, "device_type": job.device_type,
            "job_result": dict(log.job_result) if log.job_result else None,
            "error_type": error_type(log, job),
            "health": job.health, "log_unreadable_lines": len(log.unreadable)}
    system: SystemInfo | None = None
    system_error = None
    try:
        system = _system(plan, evidence)
    except CaseError as error:
        system_error = str(error)
    # LAVA's own result per case (the driver's lava-test-case), for reference
    results = {r.get("case"): r for r in log.results
               if str(r.get("definition")).endswith(TEST_NAME)}
    records = []
    for case in plan.cases:
        name = f"{plan.board}/{plan.flavour}/{case.name}"
        facts: dict[str, Any] = {
            "kind": "rt-test" if case.tool is not None else "cyclictest",
            "name": name, "board": plan.board, "flavour": plan.flavour,
            "place": job.device, "duration_s": plan.duration_s, "image": dict(plan.image),
            "scenario": case.scenario, "loads": {k: dict(v) for k, v in case.loads.items()},
            **({} if case.tool is not None else {"cpus_measured": case.cpus_measured,
                                                 "interval_us": case.interval_us}),
            "runner": RUNNER, "run_id": os.environ.get(RUN_ID_VARIABLE) or job.run_id,
            "lava": {**lava, "test_case": results.get(case.lava_name)},
        }
        if system is not None:
            facts["system"] = system.as_dict()
        started = evidence.started.get(case.lava_name)
        finished = evidence.ended.get(case.lava_name)
        verdict, message = _verdict(plan, case, log, evidence, system, system_error, status,
                                    thresholds, facts, baseline_for)
        records.append({"case": f"lava:{job.job_id}:{case.lava_name}",
                        "started": _iso(started or log.last), "finished": _iso(
                            finished or log.last), "verdict": verdict, "message": message,
                        **facts})
    return records


def _verdict(plan: Plan, case: PlannedCase, log: JobLog, evidence: Evidence,
             system: SystemInfo | None, system_error: str | None, status: str,
             thresholds: Thresholds, facts: dict[str, Any],
             baseline_for: BaselineFor) -> tuple[str, str]:
    reached = case.lava_name in evidence.started or case.lava_name in evidence.skipped
    if not reached:
        return "error", f"the job never got to this case: {status}"
    if case.skip is not None:
        return "skipped", case.skip
    if system is None:
        return "error", f"{system_error} (LAVA job: {status})"
    if case.lava_name not in evidence.ended:
        garbled = evidence.garbled.get(case.lava_name, {})
        why = "; ".join(garbled.values()) if garbled else "its output in the log ends early"
        return "error", f"the case did not finish on the board ({why}): {status}"
    judged = _Case(plan, case, log, evidence, facts)
    try:
        if case.tool is not None:
            return judged.judge_rt_test(thresholds)
        return judged.judge(thresholds, baseline_for)
    except (CaseError, ValueError) as error:
        # ValueError: thresholds.yaml has no limits for the board or flavour, as on labgrid
        return "error", str(error)


def write_records(folder: Path, records: Sequence[Mapping[str, Any]]) -> list[Path]:
    """Each record written atomically (rtlab.artifacts.record.write_record)."""
    return [write_record(folder, dict(record)) for record in records]


def summary(records: Sequence[Mapping[str, Any]]) -> str:
    lines = [f"{r['verdict']:7} {r['name']}" + (f": {r['message']}" if r["message"] else "")
             for r in records]
    counts = {v: sum(1 for r in records if r["verdict"] == v)
              for v in ("pass", "fail", "error", "skipped")}
    lines.append(", ".join(f"{n} {v}" for v, n in counts.items()))
    return "\n".join(lines)


def exit_code(records: Sequence[Mapping[str, Any]]) -> int:
    """0 when every case passed or was skipped, 1 otherwise (as pytest's)."""
    return 0 if all(r["verdict"] in ("pass", "skipped") for r in records) else 1
