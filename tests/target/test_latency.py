"""Scheduling latency under every load of the suite file, measured by cyclictest on the
board; one test case per scenario × interval."""

import attr
import pytest

from rtlab.measure import cyclictest
from rtlab.measure.cyclictest import HIST_ON_BOARD, JSON_ON_BOARD
from rtlab.measure.suite import case_name
from rtlab.measure.window import ProgramFailed, run_window
from rtlab.util.errors import InfrastructureError
from rtlab.verdict.judge import cpu_figures, judge_latency


@pytest.fixture
def measurement(request, begin_case, board_name, flavour, thresholds, record, suite,
                record_property, scenario, interval_us, host_traffic, place_tags, progress):
    """Run the loads and cyclictest; anything that goes wrong here is an error."""
    duration_s = request.config.option.rt_duration
    # the loads as this board runs them (the suite may scale them per board)
    scenario = suite.for_board(board_name).scenario(scenario)
    case = begin_case(case_name(scenario.name, interval_us), scenario=scenario.name,
                      loads=scenario.settings(), cpus_measured=scenario.cpus,
                      interval_us=interval_us)
    shell = request.getfixturevalue("shell")
    system_info = request.getfixturevalue("system_info")
    limits = thresholds.lookup(board_name, flavour, scenario.name, interval_us)
    record.facts["thresholds"] = {m: {"value": t.value, "source": t.source}
                                  for m, t in limits.items()}
    policy = thresholds.statistics(board_name, flavour, scenario.name, interval_us)
    record.facts["statistics"] = {"exceedance_probability": policy.exceedance_probability,
                                  "quantile": policy.quantile, "gating": policy.gating,
                                  "sources": dict(policy.sources)}

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
        if host_traffic is None:
            why = place_tags.get("network", "no net_ping/net_stream tags on the place")
            pytest.skip(f"the board has no network: {why}")
        parts = [attr.evolve(p, traffic=host_traffic) if p.kind == "network" else p
                 for p in parts]

    command = cyclictest.build_command(interval_us=interval_us, duration_s=duration_s,
                                       priority=suite.priority,
                                       histogram_us=suite.histogram_us, json_path=JSON_ON_BOARD,
                                       histfile_path=HIST_ON_BOARD, affinity=affinity)
    program = cyclictest.fifo_from_start(command, suite.priority)
    record.facts["command"] = program
    record.facts["load_cpus"] = load_cpus
    shell.run_check(f"rm -f {JSON_ON_BOARD} {HIST_ON_BOARD}")
    try:
        window = run_window(shell, program=program, parts=parts,
                            cpus=len(housekeeping),
                            load_cpus=load_cpus, duration_s=duration_s, traffic=host_traffic,
                            progress=lambda text: progress(f"{case}: {text}"))
    except ProgramFailed as error:
        raise InfrastructureError(str(error)) from error
    record.facts["load_check"] = {**window.load_facts,
                                  "temperatures_mc": list(map(list, window.temperatures_mc))}
    record_property("cpu_utilisation", f"{window.utilisation:.3f}")
    if window.exit_code != 0:
        raise InfrastructureError(f"cyclictest exited {window.exit_code}: {window.output}")

    text = "\n".join(shell.run_check(f"cat {JSON_ON_BOARD}"))
    result = cyclictest.parse_json(text, source=f"{case}: {JSON_ON_BOARD}",
                                   expected_threads=measured)
    judged = judge_latency(result, limits, policy, duration_s, interval_us)
    tails = judged.tails
    record.facts["cpus"] = judged.cpus
    for silent in result.no_wakeup:
        where = f"cpu{silent.cpu}" if silent.cpu is not None else f"thread{silent.thread}"
        record_property(f"{where}_samples", 0)
    for cpu in result.cpus:
        record_property(f"cpu{cpu.cpu}_max_us", cpu.max_us)
        record_property(f"cpu{cpu.cpu}_avg_us", cpu.avg_us)
        p99_9 = cpu_figures(cpu).get("p99_9")
        if p99_9 is not None:
            record_property(f"cpu{cpu.cpu}_p99_9_us", p99_9)
        tail = tails[cpu.thread]
        if tail is not None and tail.bound_us is not None:
            record_property(f"cpu{cpu.cpu}_tail_bound_us", f"{tail.bound_us:.1f}")
    return judged


def test_latency(measurement):
    violations = measurement.violations
    assert not violations, "; ".join(violations)
