"""What one LAVA job measures: the board, flavour, image and the suite's cases, decided when
the job is rendered and kept in the job (its ``metadata``), so that the job's log can be
judged later without guessing what it was meant to run.

A labgrid run decides the CPUs of each case from the board's answers as it goes; a LAVA job
runs unattended, so they are decided here from the board's model (its CPU count) and the
kernel command line of the image (isolcpus=), and the job's records refuse a board that
turns out otherwise.
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attr
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from rtlab.measure.conditions import CaseConditions, MeasuringThreads, Requirements
from rtlab.measure.cyclictest import HIST_ON_BOARD, JSON_ON_BOARD, build_command, fifo_from_start
from rtlab.measure.facts import sysinfo_commands
from rtlab.measure.loads import LoadPart, make_load
from rtlab.measure.rttests import TESTS
from rtlab.measure.rttests.board import RT_JSON_ON_BOARD, BoardRun, board_run, rt_tool_wait_s
from rtlab.measure.suite import Suite
from rtlab.measure.sysinfo import cpu_list
from rtlab.platform.boards import BOARD_MODELS, BoardModel
from rtlab.verdict.case import pipeline_case_count

SCHEMA = "rtlab.lava-plan/1"
# the job's metadata key that holds the plan (as JSON text: LAVA keeps metadata values
# as they are, and text survives every server's handling)
METADATA_KEY = "rtlab.plan"
VIRTUAL_PREFIX = "qemu-"
NO_HOST_SIDE = ("a LAVA job has no lab-host side for the network load (the host's TCP "
                "stream into the board, rtlab.measure.window.HostStream): it runs on labgrid "
                "places")


class PlanError(ValueError):
    """A plan that cannot be made or read; the message names the source and the value."""


def board_model(board: str) -> BoardModel:
    """The model behind a board tag: imx6q and rpi3 are the physical boards, qemu-imx6q and
    qemu-rpi3 their virtual twins (the tags of the labgrid places and thresholds.yaml)."""
    name = board.removeprefix(VIRTUAL_PREFIX)
    if name not in BOARD_MODELS:
        valid = [*sorted(BOARD_MODELS), *(VIRTUAL_PREFIX + n for n in sorted(BOARD_MODELS))]
        raise PlanError(f"unknown board {board!r} (valid: {', '.join(valid)})")
    return BOARD_MODELS[name]


def is_virtual(board: str) -> bool:
    return board.startswith(VIRTUAL_PREFIX)


def isolated_cpus(cmdline: str) -> tuple[int, ...]:
    """The CPUs an ``isolcpus=[flag,...,]<cpu list>`` parameter isolates (none without one)."""
    for word in cmdline.split():
        if word.startswith("isolcpus="):
            parts = word.removeprefix("isolcpus=").split(",")
            while parts and parts[0].isalpha():
                parts = parts[1:]
            try:
                return cpu_list(",".join(parts))
            except ValueError:
                raise PlanError(f"kernel command line: {word!r} names no CPU list") from None
    return ()


@attr.frozen
class PlannedCase:
    """One scenario × interval of the suite (cyclictest under loads), or one of the other
    rt-tests (``tool``, on the idle board), as the job runs it."""

    index: int
    scenario: str
    """The scenario, or the rt-test's name (thresholds.yaml names both so)."""
    interval_us: int | None
    cpus_measured: str | None
    loads: Mapping[str, Mapping[str, Any]]
    """The loads with their settings, as a result record keeps them."""
    skip: str | None = None
    """Why the case does not run (the same reasons a labgrid run skips it for)."""
    program: tuple[str, ...] = ()
    load_cpus: tuple[int, ...] | None = None
    threads: int = 0
    """The cyclictest threads the case asks for."""
    tool: str | None = None
    """The rt-test of the case (None: cyclictest)."""
    json_path: str | None = JSON_ON_BOARD
    """Where the program writes its JSON on the board (None: it writes none)."""
    wait_s: int = 0
    """How long the window stays open."""
    conditions: Mapping[str, Any] | None = None
    """What the run must have been (rtlab.measure.conditions): the suite's requirements for
    the board and scenario, the measuring program and its CPUs (None: not checked)."""

    @property
    def requirements(self) -> Requirements | None:
        """What the case's run must have been, as the job was rendered (the suite's
        requirements for the board and scenario; None: a job that checks none)."""
        if self.conditions is None:
            return None
        return Requirements().changed(dict(self.conditions["requirements"]))

    def checked(self, plan: "Plan",
                requirements: Requirements | None = None) -> CaseConditions | None:
        """The conditions the case's window checks on the board, as a labgrid run checks
        them (tests/target/test_latency.py): ``requirements`` as the case's plan carries
        them (rtlab.verdict.case.CasePlan), by default as the job was rendered."""
        requirements = requirements or self.requirements
        if self.conditions is None or requirements is None:
            return None
        return CaseConditions(
            requirements,
            MeasuringThreads(self.conditions["program"], plan.priority,
                             tuple(self.conditions["cpus"])),
            plan.flavour)

    @property
    def name(self) -> str:
        """The case's part of the record name, board/flavour/<this>."""
        return self.tool or f"{self.scenario}/{self.interval_us}us"

    @property
    def lava_name(self) -> str:
        """The case's name among the job's LAVA results (no slashes there)."""
        return self.tool or f"{self.scenario}-{self.interval_us}us"

    def parts(self) -> list[LoadPart]:
        return [make_load(kind, dict(settings)) for kind, settings in self.loads.items()]

    def rt_run(self, plan: "Plan") -> BoardRun:
        """The rt-test's run, as rtlab.measure.rttests.board makes it for the plan's board (the
        same argv the job ran: the plan keeps it, and this rebuilds the rest)."""
        if self.tool is None:
            raise ValueError(f"{self.name} is no rt-test")
        run = board_run(self.tool, duration_s=plan.duration_s, cpus=plan.cpus,
                        priority=plan.priority, json_path=RT_JSON_ON_BOARD)
        if run.argv != self.program:
            raise PlanError(f"{self.name}: the job ran {list(self.program)}, this rtlab "
                            f"would run {list(run.argv)} (render and judge with one rtlab)")
        return run


@attr.frozen
class Plan:
    board: str
    flavour: str
    duration_s: int
    cpus: int
    isolated: tuple[int, ...]
    image: Mapping[str, Any]
    """The image facts a result record keeps (image_id, kernel, sd_image_sha256)."""
    cases: tuple[PlannedCase, ...]
    sysinfo_commands: tuple[str, ...]
    priority: int = 90
    """suite.yaml's priority (the rt-tests' runs are rebuilt with it)."""
    pipeline_jobs: int = 1
    """The pipeline's jobs that judge as many latency cases as this one."""
    cmdline: str = ""
    """The image's kernel command line the plan was made for (its isolcpus= decided the
    CPUs): the job boots the kernel with it, so that the board runs what was planned
    ("": a plan rendered before the field)."""

    @property
    def pipeline_cases(self) -> int:
        """The pipeline's gated latency cases, counted as a labgrid run counts them (every
        scenario × interval of the job, skipped or not, times the pipeline's jobs): each
        case's confidence (rtlab.verdict.case.CasePlan.cases)."""
        return pipeline_case_count(sum(1 for case in self.cases if case.tool is None),
                                   self.pipeline_jobs)

    @property
    def housekeeping(self) -> tuple[int, ...]:
        return tuple(n for n in range(self.cpus) if n not in self.isolated)

    def load_cpu_count(self, case: PlannedCase) -> int:
        """The CPUs a case's window sizes its loads for (and judges utilisation over): the
        CPUs the kernel does not isolate, as tests/target/test_latency.py sizes them; every
        CPU for an rt-test (tests/target/test_rttests.py: system_info.cpus)."""
        return self.cpus if case.tool is not None else len(self.housekeeping)

    def to_json(self) -> str:
        doc = {"schema": SCHEMA, **attr.asdict(self, recurse=True)}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, source: str) -> "Plan":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as error:
            raise PlanError(f"{source}: the rtlab plan is not JSON: {error}") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
            raise PlanError(f"{source}: not an rtlab plan of schema {SCHEMA!r} "
                            f"(found {found!r})")
        try:
            cases = tuple(PlannedCase(
                index=c["index"], scenario=c["scenario"], interval_us=c["interval_us"],
                cpus_measured=c["cpus_measured"], loads=c["loads"], skip=c["skip"],
                program=tuple(c["program"]),
                load_cpus=None if c["load_cpus"] is None else tuple(c["load_cpus"]),
                threads=c["threads"], tool=c["tool"], json_path=c["json_path"],
                wait_s=c["wait_s"], conditions=c.get("conditions")) for c in doc["cases"])
            return cls(board=doc["board"], flavour=doc["flavour"],
                       duration_s=doc["duration_s"], cpus=doc["cpus"],
                       isolated=tuple(doc["isolated"]), image=doc["image"], cases=cases,
                       sysinfo_commands=tuple(doc["sysinfo_commands"]),
                       priority=doc["priority"],
                       # a plan rendered before the field: one job, as it was rendered
                       pipeline_jobs=doc.get("pipeline_jobs", 1),
                       cmdline=doc.get("cmdline", ""))
        except (KeyError, TypeError) as error:
            raise PlanError(f"{source}: the rtlab plan lacks {error}") from None


def image_facts(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What a result record keeps of the image (as tests/target's begin_case keeps it)."""
    return {
        "image_id": manifest.get("image_id"),
        "kernel": {k: v for k, v in (manifest.get("kernel") or {}).items() if k != "modules"},
        "sd_image_sha256": (manifest.get("sd_image") or {}).get("sha256"),
    }


def make_plan(*, board: str, flavour: str, suite: Suite, scenarios: Sequence[str] | None,
              intervals: Sequence[int] | None, duration_s: int, cmdline: str,
              image: Mapping[str, Any], rt_tests: Sequence[str] | None = None,
              pipeline_jobs: int = 1) -> Plan:
    """The job's cases: the suite's scenarios × intervals (all, or the ones named), each
    with its cyclictest command and the CPUs it measures on, then the suite's other
    rt-tests (all, the ones named, or none for an empty list)."""
    model = board_model(board)
    if not isinstance(pipeline_jobs, int) or pipeline_jobs < 1:
        raise PlanError(f"--pipeline-jobs must be a whole number >= 1, got {pipeline_jobs!r}")
    if not isinstance(duration_s, int) or duration_s < 1:
        raise PlanError(f"duration must be a whole number of seconds >= 1, got {duration_s!r}")
    names = list(suite.scenarios) if scenarios is None else list(scenarios)
    unknown = [name for name in names if name not in suite.scenarios]
    if unknown or not names:
        raise PlanError(f"unknown scenario(s) {', '.join(unknown) or '(none given)'} "
                        f"(valid: {', '.join(suite.scenarios)})")
    chosen = list(suite.intervals_us) if intervals is None else list(intervals)
    if not chosen or any(not isinstance(i, int) or i <= 0 for i in chosen):
        raise PlanError(f"intervals must be positive µs, got {chosen!r}")
    isolated = isolated_cpus(cmdline)
    if any(cpu >= model.cpus for cpu in isolated):
        raise PlanError(f"isolcpus= of {cmdline!r} names CPUs a {model.name} does not have "
                        f"({model.cpus} CPUs)")
    housekeeping = [n for n in range(model.cpus) if n not in isolated]
    on_board = suite.for_board(board)
    cases = []
    for name in names:
        scenario = on_board.scenario(name)
        for interval in chosen:
            index = len(cases)
            base = PlannedCase(index=index, scenario=name, interval_us=interval,
                               cpus_measured=scenario.cpus, loads=scenario.settings())
            skip = None
            affinity, threads = None, len(housekeeping)
            if scenario.cpus == "isolated":
                if not isolated:
                    skip = ("the board's kernel isolates no CPU (no isolcpus= on its command "
                            f"line: {cmdline!r})")
                elif not housekeeping:
                    skip = "the board's kernel isolates every CPU: none is left for the load"
                affinity, threads = ",".join(map(str, isolated)), len(isolated)
            if skip is None and "network" in scenario.kinds:
                skip = f"the board has no network: {NO_HOST_SIDE}"
            if skip is not None:
                cases.append(attr.evolve(base, skip=skip))
                continue
            command = build_command(interval_us=interval, duration_s=duration_s,
                                    priority=suite.priority, histogram_us=suite.histogram_us,
                                    json_path=JSON_ON_BOARD, histfile_path=HIST_ON_BOARD,
                                    affinity=affinity)
            measuring = isolated if affinity else tuple(housekeeping)
            conditions = {"requirements": on_board.requirements_for(board, name).as_dict(),
                          "program": command[0], "cpus": list(measuring)}
            cases.append(attr.evolve(base, program=tuple(fifo_from_start(command, suite.priority)),
                                     load_cpus=tuple(housekeeping) if isolated else None,
                                     threads=threads, wait_s=duration_s,
                                     conditions=conditions))
    tools = list(suite.rt_tests) if rt_tests is None else list(rt_tests)
    unknown = [tool for tool in tools if tool not in TESTS]
    if unknown:
        raise PlanError(f"unknown rt-test(s) {', '.join(unknown)} (valid: {', '.join(TESTS)})")
    for tool in tools:
        # as tests/target/test_rttests.py runs it: every CPU of the board, no load
        try:
            run = board_run(tool, duration_s=duration_s, cpus=model.cpus,
                            priority=suite.priority, json_path=RT_JSON_ON_BOARD)
        except ValueError as error:
            raise PlanError(f"{tool} on {board}: {error}") from None
        cases.append(PlannedCase(index=len(cases), scenario=tool, interval_us=None,
                                 cpus_measured=None, loads={}, program=run.argv,
                                 tool=tool, json_path=run.json_path,
                                 wait_s=rt_tool_wait_s(tool, duration_s)))
    return Plan(board=board, flavour=flavour, duration_s=duration_s, cpus=model.cpus,
                isolated=isolated, image=dict(image), cases=tuple(cases),
                sysinfo_commands=sysinfo_commands(), priority=suite.priority,
                pipeline_jobs=pipeline_jobs, cmdline=cmdline)


def plan_of_job(text: str, source: str) -> Plan:
    """The plan a job carries in its metadata (a job rtlab lava render made)."""
    try:
        job = YAML(typ="safe").load(text)
    except YAMLError as error:
        raise PlanError(f"{source}: not a LAVA job (not YAML: {error})") from None
    metadata = job.get("metadata") if isinstance(job, dict) else None
    if not isinstance(metadata, dict) or METADATA_KEY not in metadata:
        raise PlanError(f"{source}: no metadata {METADATA_KEY!r}: not a job rtlab lava "
                        "render made")
    return Plan.from_json(str(metadata[METADATA_KEY]), f"{source}: metadata {METADATA_KEY}")
