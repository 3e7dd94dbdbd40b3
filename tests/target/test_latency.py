"""Scheduling latency under load, measured by cyclictest on the board."""

import shlex

import pytest

from rtlab import cyclictest
from rtlab.loads import LOAD_LOG, CpuTimes, load_profile
from rtlab.suite import InfrastructureError, cpu_facts, cpu_figures
from rtlab.thresholds import check

JSON_ON_BOARD = "/tmp/rtlab-cyclictest.json"
# how long the load runs before and after the measurement window, so cyclictest never
# sees a half-started or already finishing load
LOAD_MARGIN_S = 2


@pytest.fixture
def measurement(request, shell, system_info, board_name, flavour, thresholds, record,
                image_manifest, record_property, record_xml_attribute, load_name):
    """Run the load and cyclictest; anything that goes wrong here is an error."""
    options = request.config.option
    interval_us, duration_s = options.rt_interval, options.rt_duration
    profile = load_profile(load_name)
    case = f"{board_name}/{flavour}/{load_name}/{interval_us}us"
    record_xml_attribute("name", case)
    record.facts.update({
        "name": case, "board": board_name, "flavour": flavour, "load": load_name,
        "interval_us": interval_us, "duration_s": duration_s,
        "system": system_info.as_dict(),
        "image": {k: image_manifest.get(k) for k in ("image_id", "kernel_package",
                                                      "kernel_version", "sd_image_sha256")},
    })
    limits = thresholds.lookup(board_name, flavour, load_name, interval_us)
    record.facts["thresholds"] = {m: {"value": t.value, "source": t.source}
                                  for m, t in limits.items()}

    before = CpuTimes.parse("\n".join(shell.run_check("cat /proc/stat")))
    start = profile.start_command(system_info.cpus, duration_s + 2 * LOAD_MARGIN_S)
    load_pid = None
    if start is not None:
        load_pid = int(shell.run_check(start)[-1])
        shell.run_check(f"sleep {LOAD_MARGIN_S}")
    command = cyclictest.build_command(interval_us=interval_us, duration_s=duration_s,
                                       json_path=JSON_ON_BOARD)
    shell.run_check(f"rm -f {JSON_ON_BOARD}")
    _, _, code = shell.run(shlex.join(command), timeout=duration_s + 120)
    if code != 0:
        raise InfrastructureError(f"cyclictest exited with {code}")
    after = CpuTimes.parse("\n".join(shell.run_check("cat /proc/stat")))
    load_status = None
    if load_pid is not None:
        load_status = int(shell.run_check(f"wait {load_pid}; echo $?",
                                          timeout=4 * LOAD_MARGIN_S + 60)[-1])
    load_log = "\n".join(shell.run_check(f"cat {LOAD_LOG} 2>/dev/null || true"))
    loadavg = "\n".join(shell.run_check("cat /proc/loadavg"))
    utilisation = after.utilisation_since(before)
    record.facts["load_check"] = {"cpu_utilisation": round(utilisation, 3),
                                  "loadavg": loadavg, "exit_status": load_status}
    record_property("cpu_utilisation", f"{utilisation:.3f}")
    profile.verify(utilisation, load_status, load_log)

    text = "\n".join(shell.run_check(f"cat {JSON_ON_BOARD}"))
    result = cyclictest.parse_json(text, source=f"{case}: {JSON_ON_BOARD}",
                                   expected_threads=system_info.cpus)
    record.facts["cpus"] = [cpu_facts(cpu) for cpu in result.cpus]
    for cpu in result.cpus:
        record_property(f"cpu{cpu.cpu}_max_us", cpu.max_us)
        record_property(f"cpu{cpu.cpu}_avg_us", cpu.avg_us)
    return result, limits


@pytest.mark.parametrize("load_name", ["cpu"])
def test_latency(measurement):
    result, limits = measurement
    violations = [v for cpu in result.cpus
                  for v in check(cpu_figures(cpu), limits, cpu.cpu)]
    assert not violations, "; ".join(v.message for v in violations)
