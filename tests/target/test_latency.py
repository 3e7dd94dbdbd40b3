"""Scheduling latency under load, measured by cyclictest on the board."""

import shlex

import pytest

from rtlab import cyclictest
from rtlab.loads import LOAD_LOG, CpuTimes, load_profile
from rtlab.suite import InfrastructureError, cpu_facts, cpu_figures
from rtlab.thresholds import check

JSON_ON_BOARD = "/tmp/rtlab-cyclictest.json"
# how long the load runs before the measurement window, so cyclictest never sees a
# half-started load
LOAD_MARGIN_S = 2
LOAD_OVERRUN_S = 120
RC = "rtlab-rc="
ALIVE = "rtlab-load-alive"


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
        "image": {
            "image_id": image_manifest.get("image_id"),
            "kernel": {k: v for k, v in image_manifest.get("kernel", {}).items()
                       if k != "modules"},
            "sd_image_sha256": image_manifest.get("sd_image", {}).get("sha256"),
        },
    })
    limits = thresholds.lookup(board_name, flavour, load_name, interval_us)
    record.facts["thresholds"] = {m: {"value": t.value, "source": t.source}
                                  for m, t in limits.items()}

    # the load runs well past the measurement and is stopped afterwards, so it provably
    # covered the whole window; /proc/stat is read in the same commands as the window's
    # edges because every command over a slow serial line takes a while
    start = profile.start_command(system_info.cpus, duration_s + LOAD_OVERRUN_S)
    load_pid = int(shell.run_check(start)[-1]) if start is not None else None
    shell.run_check(f"rm -f {JSON_ON_BOARD}")
    before = CpuTimes.parse("\n".join(shell.run_check(f"sleep {LOAD_MARGIN_S}; cat /proc/stat")))
    command = cyclictest.build_command(interval_us=interval_us, duration_s=duration_s,
                                       json_path=JSON_ON_BOARD)
    alive_check = f"kill -0 {load_pid} 2>/dev/null && echo {ALIVE}" if load_pid else "true"
    out, _, _ = shell.run(
        f"{shlex.join(command)}; echo {RC}$?; cat /proc/stat; {alive_check}",
        timeout=duration_s + 120)
    rc_lines = [line for line in out if line.startswith(RC)]
    if not rc_lines or rc_lines[-1] != f"{RC}0":
        raise InfrastructureError(f"cyclictest failed: {rc_lines or out[-5:]}")
    after = CpuTimes.parse("\n".join(out))
    ran_throughout = ALIVE in out
    if load_pid is not None:
        shell.run(f"kill {load_pid}; sleep 1")
    load_log = "\n".join(shell.run_check(f"cat {LOAD_LOG} 2>/dev/null || true"))
    loadavg = "\n".join(shell.run_check("cat /proc/loadavg"))
    utilisation = after.utilisation_since(before)
    record.facts["load_check"] = {"cpu_utilisation": round(utilisation, 3),
                                  "loadavg": loadavg, "ran_throughout": ran_throughout}
    record_property("cpu_utilisation", f"{utilisation:.3f}")
    profile.verify(utilisation, ran_throughout, load_log)

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
