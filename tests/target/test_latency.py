"""Scheduling latency under every load of the suite file, measured by cyclictest on the
board; one test case per scenario × interval."""

import logging

import attr
import pytest
from labgrid.driver.exception import ExecutionError

from rtlab.measure import cyclictest, trace
from rtlab.measure.conditions import CaseConditions, MeasuringThreads, RunNotValid, merge
from rtlab.measure.cyclictest import HIST_ON_BOARD, JSON_ON_BOARD
from rtlab.measure.suite import case_name
from rtlab.measure.window import ProgramFailed, run_window, run_windows
from rtlab.pytestplugin.record import job_path
from rtlab.util.errors import InfrastructureError
from rtlab.verdict.case import TraceChoice, plan_case

pytestmark = pytest.mark.rtlab_kind("cyclictest")


@pytest.fixture
def measurement(request, begin_case, board_name, thresholds_flavour, thresholds, record,
                suite, record_property, scenario, interval_us, host_traffic, place_tags,
                progress):
    """Run the loads and cyclictest; anything that goes wrong here is an error."""
    duration_s = request.config.option.rt_duration
    # the loads as this board runs them (the suite may scale them per board)
    scenario = suite.for_board(board_name).scenario(scenario)
    # a place without network tags cannot run a network load: known before any boot
    no_network = None
    if "network" in scenario.kinds and host_traffic is None:
        why = place_tags.get("network", "no net_ping/net_stream tags on the place")
        no_network = f"the board has no network: {why}"
    case = begin_case(case_name(scenario.name, interval_us), scenario=scenario.name,
                      loads=scenario.settings(), cpus_measured=scenario.cpus,
                      interval_us=interval_us, skip=no_network)
    shell = request.getfixturevalue("shell")
    system_info = request.getfixturevalue("system_info")
    # the one judge of a case (rtlab.verdict.case), as the LAVA path plans it
    plan = plan_case(thresholds, board=board_name, flavour=thresholds_flavour,
                     scenario=scenario.name, interval_us=interval_us,
                     cases=request.getfixturevalue("pipeline_cases"),
                     trace=TraceChoice(*request.getfixturevalue("trace_choice")(
                         scenario.name, interval_us)),
                     requirements=suite.requirements_for(board_name, scenario.name),
                     # a replica's tail is judged with every board's, by the pooled case
                     tail_gate=not request.config.option.rt_replicate)
    limits = plan.limits
    record.facts.update(plan.facts())

    # isolcpus= takes CPUs out of default placement: -S and the loads stay on the others
    isolated = system_info.isolated_cpus
    housekeeping = [n for n in range(system_info.cpus) if n not in isolated]
    load_cpus = housekeeping if isolated else None
    affinity, measured = None, len(housekeeping)
    if scenario.cpus == "isolated":
        if not isolated:
            pytest.skip("the board's kernel isolates no CPU (no isolcpus= on its command "
                        f"line: {system_info.cmdline!r})")
        if not housekeeping:
            pytest.skip("the board's kernel isolates every CPU: none is left for the load")
        affinity, measured = ",".join(map(str, isolated)), len(isolated)
    parts = list(scenario.loads)
    if "network" in scenario.kinds:
        parts = [attr.evolve(p, traffic=host_traffic) if p.kind == "network" else p
                 for p in parts]

    window_s = request.config.option.rt_window
    tracing = _arm_trace(request, shell, record, plan)
    command = cyclictest.build_command(
        interval_us=interval_us, duration_s=window_s or duration_s, priority=suite.priority,
        histogram_us=suite.histogram_us, json_path=JSON_ON_BOARD, histfile_path=HIST_ON_BOARD,
        affinity=affinity,
        breaktrace_us=trace.breaktrace_us(limits["max_us"].value) if tracing else None)
    program = cyclictest.fifo_from_start(command, suite.priority)
    record.facts["command"] = program
    record.facts["load_cpus"] = load_cpus
    shell.run_check(f"rm -f {JSON_ON_BOARD} {HIST_ON_BOARD}")

    def read_result() -> cyclictest.CyclictestResult:
        text = "\n".join(shell.run_check(f"cat {JSON_ON_BOARD}"))
        # the next window's cyclictest must write its own, never leave this one behind
        shell.run_check(f"rm -f {JSON_ON_BOARD} {HIST_ON_BOARD}")
        return cyclictest.parse_json(text, source=f"{case}: {JSON_ON_BOARD}",
                                     expected_threads=measured)

    # what the run must have been to count (suite.yaml's requirements), checked on the
    # board while each window runs: -S pins a thread to each CPU the process may use
    conditions = CaseConditions(
        plan.requirements,
        MeasuringThreads(command[0], suite.priority,
                         tuple(isolated) if affinity else tuple(housekeeping)),
        thresholds_flavour)
    record.facts["conditions"] = {"requirements": conditions.requirements.as_dict(),
                                  "measuring": conditions.measuring.as_dict()}
    window_args = {"program": program, "parts": parts, "cpus": len(housekeeping),
                   "load_cpus": load_cpus, "traffic": host_traffic, "conditions": conditions,
                   "progress": lambda text: progress(f"{case}: {text}")}
    baseline = request.getfixturevalue("case_baseline")(plan, program, duration_s)
    judging = plan.measure(window_s=window_s or duration_s, cap_s=duration_s,
                          baseline=baseline)
    try:
        if window_s:
            per_window = []

            def after_window(index: int, window) -> str | None:
                _program_ran(window)
                per_window.append({"cpu_utilisation": window.load_facts["cpu_utilisation"],
                                   "loadavg_before": window.loadavg_before,
                                   "loadavg": window.loadavg,
                                   "temperatures_mc": list(map(list,
                                                               window.temperatures_mc))})
                return judging.add(read_result(),
                                  broke=tracing is not None and _broke(window.output))

            run = run_windows(shell, window_s=window_s, cap_s=duration_s,
                              after_window=after_window, **window_args)
            window = run.windows[-1]
            outputs = [w.output for w in run.windows]
            record.facts["adaptive"] = judging.facts(run.stopped, run.gaps_s, per_window)
            record.facts["duration_s"] = judging.measured_s
            record_property("stopped", run.stopped)
        else:
            window = run_window(shell, duration_s=duration_s, **window_args)
            _program_ran(window)
            broke = tracing is not None and _broke(window.output)
            judging.add(read_result(), broke=broke)
            if (window.conditions is None and not broke and plan.requirements.checked
                    and judging.outcome().verdict == "pass"):
                # neither check of its measuring threads ran (a board too loaded to run
                # them in the window): no pass; the case is measured again, once, and a
                # second run unchecked is an error (below)
                record.facts["measured_again"] = (
                    "the first run's conditions were never checked (cyclictest ended "
                    "before either check): measured again")
                progress(f"{case}: {record.facts['measured_again']}")
                judging = plan.measure(window_s=duration_s, cap_s=duration_s,
                                      baseline=baseline)
                window = run_window(shell, duration_s=duration_s, **window_args)
                _program_ran(window)
                broke = tracing is not None and _broke(window.output)
                judging.add(read_result(), broke=broke)
            outputs = [window.output]
    except ProgramFailed as error:
        _disarm_quietly(shell, tracing)
        raise InfrastructureError(str(error)) from error
    except RunNotValid as error:
        # void: an error whose record keeps what the board had beside what was required;
        # a breach in the same window survives it (the void is told beside the fail)
        record.facts["conditions"] = error.conditions.facts()
        _keep_breach(judging, read_result, record)
        _disarm_quietly(shell, tracing)
        raise
    except BaseException:
        _disarm_quietly(shell, tracing)
        raise
    record.facts["load_check"] = {**window.load_facts, "loadavg_before": window.loadavg_before,
                                  "temperatures_mc": list(map(list, window.temperatures_mc))}
    record_property("cpu_utilisation", f"{window.utilisation:.3f}")
    record.facts.update(judging.record_facts())
    outcome = judging.outcome()
    checked = [w.conditions for w in (run.windows if window_s else [window])
               if w.conditions is not None]
    if checked:
        record.facts["conditions"] = merge(*checked).facts()
    else:
        record.facts["conditions"]["not_checked"] = (
            "the program ended before its measuring threads could be checked")
        if outcome.verdict == "pass" and plan.requirements.checked:
            # a breach that stopped cyclictest at once leaves nothing to check and still
            # fails; a run that passes must have been what it claims
            _disarm_quietly(shell, tracing)
            again = " twice" if "measured_again" in record.facts else ""
            raise InfrastructureError(
                f"the run's conditions were never checked{again} (cyclictest ended before "
                "either check of its measuring threads): not a pass; measure the case "
                f"again on a less loaded board (the judge saw: {outcome.message})")
    # the judge's verdict on the windows, kept whatever the lab does next
    # (rtlab.verdict.outcome: a breach survives any later error)
    record.facts["judged"] = {"verdict": outcome.verdict, "message": outcome.message}
    if tracing is not None:
        _bring_trace_back(request, shell, record, tracing, outputs)
    cpus = judging.judged.cpus
    # in the order rtlab.verdict.junit.case_properties writes a LAVA job's
    for facts in (facts for facts in cpus if facts.get("no_wakeup")):
        where = f"cpu{facts['cpu']}" if facts["cpu"] is not None else f"thread{facts['thread']}"
        record_property(f"{where}_samples", 0)
    for facts in (facts for facts in cpus if not facts.get("no_wakeup")):
        record_property(f"cpu{facts['cpu']}_max_us", facts["max_us"])
        record_property(f"cpu{facts['cpu']}_avg_us", facts["avg_us"])
        p99_9 = (facts.get("percentiles_us") or {}).get("p99_9")
        if isinstance(p99_9, int | float):
            record_property(f"cpu{facts['cpu']}_p99_9_us", p99_9)
        tail = judging.judged.tails.get(facts["thread"])
        if tail is not None and tail.bound_us is not None:
            record_property(f"cpu{facts['cpu']}_tail_bound_us", f"{tail.bound_us:.1f}")
    record.judged = outcome.message
    if outcome.verdict == "pass":
        # a pass says what it rules out, in the record and the JUnit case alike
        record.message = outcome.message
        record_property("rules_out", outcome.message)
    return outcome


def _keep_breach(judging, read_result, record) -> None:
    """A void window's wake-ups judged all the same: a breach among them is kept as the
    record's ``judged`` fail (rtlab.verdict.outcome), so that the void, which may well be
    its cause, is told beside it and never over it. Nothing readable: the void alone."""
    try:
        judging.add(read_result())
    except Exception:
        logging.getLogger(__name__).exception("reading a void window's result")
        return
    outcome = judging.outcome()
    if outcome.verdict == "fail":
        record.facts.update(judging.record_facts())
        record.facts["judged"] = {"verdict": outcome.verdict, "message": outcome.message}


def _arm_trace(request, shell, record, plan) -> trace.TraceSettings | None:
    """The kernel's trace armed for a break at max_us where the case's plan asks for it
    and the board can; the record says whether, and why not. A board that cannot trace
    runs the case without it: that is no error of the case."""
    limits = plan.limits
    facts = record.facts["trace"] = {"requested": plan.trace.wanted, "why": plan.trace.why}
    if not plan.trace.wanted:
        return None
    if "max_us" not in limits:
        facts.update(available=False, reason="the case has no max_us to break at")
        return None
    settings = trace.TraceSettings(tracer=request.config.option.rt_trace_tracer)
    facts.update(tracer=settings.tracer, events=list(settings.events),
                 buffer_kb=settings.buffer_kb,
                 breaktrace_us=trace.breaktrace_us(limits["max_us"].value))
    support = trace.prepare(shell, settings)
    facts.update(support.facts())
    return settings if support.available else None


def _disarm_quietly(shell, tracing: trace.TraceSettings | None) -> None:
    """The tracer off after a window that failed, so that it does not run on into the next
    case; a console that fails this too is already lost, and that error is the one told."""
    if tracing is None:
        return
    try:
        trace.disarm(shell)
    except Exception:
        logging.getLogger(__name__).exception("disarming the trace after a failed window")


def _broke(output: str) -> bool:
    """Whether cyclictest ended its run at a breach (it printed where it broke); output
    that garbles the break lines counts as no break, and the trace says so."""
    try:
        return trace.parse_break(output) is not None
    except trace.TraceError:
        return False


def _bring_trace_back(request, shell, record, settings: trace.TraceSettings,
                      outputs: list[str]) -> None:
    """After the window(s): where cyclictest broke, the trace copied back beside the record
    and read into the breach's events; the tracer disarmed for the next case. A trace that
    cannot be brought back leaves the latency verdict as it is and says why; a console
    lost on the way (pexpect's timeout, a closed port) too, where the judge found a breach:
    the breach stays the case's verdict and the error is kept beside it."""
    facts = record.facts["trace"]
    try:
        broke = next((b for b in map(trace.parse_break, outputs) if b is not None), None)
        if broke is None:
            facts["breach"] = None
            facts["note"] = (f"no wake-up passed {facts['breaktrace_us']} µs: the kernel's "
                             "trace was not stopped and nothing was kept")
        else:
            collected = trace.collect(shell, settings)
            path = request.getfixturevalue("case_artifact")(".trace.gz")
            path.write_bytes(collected.data)
            record.attachments.append(path)
            facts.update(file=path.name, path=job_path(path), bytes=len(collected.data),
                         lines=collected.lines, cut=collected.cut)
            facts["breach"] = trace.read_collected(collected.data, path.name, broke).facts()
    except (trace.TraceError, ExecutionError) as error:
        facts["error"] = f"the trace could not be brought back: {error}"
    except Exception as error:
        # the console itself failed: the lab's error, never the breach's undoing
        facts["error"] = f"the trace could not be brought back: {_told(error)}"
        if record.facts["judged"]["verdict"] != "fail":
            raise
        record.facts.setdefault("error", facts["error"])
        return
    try:
        trace.disarm(shell)
    except Exception as error:
        if record.facts["judged"]["verdict"] != "fail":
            raise
        record.facts.setdefault("error", f"the trace could not be disarmed: {_told(error)}")


def _told(error: BaseException) -> str:
    """An exception in one line (pexpect's TIMEOUT carries the whole buffer)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def _program_ran(window) -> None:
    if window.exit_code != 0:
        raise InfrastructureError(f"cyclictest exited {window.exit_code}: {window.output}")


def test_latency(measurement, record):
    breach = (record.facts.get("trace") or {}).get("breach")
    # the first line stays the figures (the record's message); the trace follows
    told = f"\ntrace: {breach['summary']} ({record.facts['trace']['file']})" if breach else ""
    assert measurement.verdict == "pass", measurement.message + told
