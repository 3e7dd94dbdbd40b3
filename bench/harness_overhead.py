"""The same work through both harnesses, side by side: two cyclictest cases (idle and
cpu100 at 1 ms, 3 s each) on the virtual i.MX6Q with its PREEMPT_RT image, through
`rtlab run` (labgrid: the virtual rack's place imx6q-01) and through the LAVA server of
`rtlab lava server` (`rtlab lava submit`, then `rtlab lava fetch --wait`), alternating,
several times. Per path it prints the wall time, the time to the login, the measurement
and the rest, and where the overhead (everything but the measurement) goes.

    flock /tmp/vlab.lock .venv/bin/python bench/harness_overhead.py [--runs 3]
          [--duration 3] [--poll 1] [--out out/harness-overhead]

Both paths are timed as CI runs them, as commands (their start-up included), from the
moment the command starts until it has written the records and JUnit. Where the time
goes comes from what each path logs with times of its own: on labgrid, rtlab's strategy
and pytest (a log file through PYTEST_ADDOPTS) and each case's record; on LAVA, the job's
log (lava-run's actions, the board's lines) and lava-server's submit/start/end times.
The virtual rack and the LAVA instance are started if they are not running (and stopped
again at the end); the rack lock must be held (flock), as for any QEMU run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attr

from rtlab.image.build import build_image
from rtlab.lava.joblog import read_log
from rtlab.lava.server import Server, server_time
from rtlab.lavaserver import daemons, provision
from rtlab.lavaserver.instance import Instance
from rtlab.util import paths
from rtlab.vlab import control
from rtlab.vlab.config import load_config

REPO_ROOT = Path(__file__).resolve().parents[1]
RTLAB = [sys.executable, "-m", "rtlab.cli"]
PLACE = "imx6q-01"
LAVA_BOARD = "qemu-imx6q"
SCENARIOS = "idle,cpu100"
INTERVAL = "1000"
LOG_FORMAT = "%(asctime)s.%(msecs)03d %(name)s %(levelname)s %(message)s"
LOG_DATE = "%Y-%m-%dT%H:%M:%S"


@attr.define
class Run:
    path: str
    wall_s: float
    login_s: float
    measured_s: float
    parts: dict[str, float]
    """Where the overhead went, in the order it happened (seconds)."""
    verdicts: list[str]

    @property
    def rest_s(self) -> float:
        return self.wall_s - self.login_s - self.measured_s

    @property
    def overhead_s(self) -> float:
        return self.wall_s - self.measured_s

    @property
    def shared_s(self) -> float:
        """The work both paths do alike: the board's boot, and the window script of each
        case (loads up, the program's end, evidence, loads stopped)."""
        return sum(seconds for part, seconds in self.parts.items()
                   if part == "boot to login" or part.startswith(("window ", "loads stopped"))
                   or "case less its" in part)

    @property
    def own_s(self) -> float:
        """The harness's own overhead: the rest of it."""
        return self.overhead_s - self.shared_s


def _utc(text: str) -> float:
    when = datetime.datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()


def _records(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((folder / "results").glob("*.json"))]


def _timed(argv: Sequence[str], log: Path, env: dict[str, str] | None = None,
           cwd: Path = REPO_ROOT) -> tuple[float, float, int]:
    began = time.time()
    with log.open("a") as out:
        code = subprocess.run(list(argv), stdout=out, stderr=subprocess.STDOUT, env=env,
                              cwd=cwd, check=False).returncode
    return began, time.time(), code


# ---------------------------------------------------------------------- labgrid ----

_DONE = re.compile(r"^(\S+) rtlab\.strategy INFO\s+(.+) done in ([\d.]+) s$")
_STEP = re.compile(r"^(\S+) StepLogger INFO\s+([→←]) ShellDriver\.(\w+)\((.*?)\)"
                   r"(?: .*\[([\d.]+)s\])?\s*$")
# what each console command of the labgrid path is for (rtlab.measure.window's script and
# its upload, rtlab.measure.sysinfo's facts); the rest are the cases' own reads and clean-ups
_FACTS = ("uname -", "cat /sys/kernel/realtime", "grep -m1 -E", "f=/proc/config.gz",
          "f=/boot/config", "cat /proc/cmdline", "grep -c ^processor",
          "cat /proc/sys/kernel/sched_rt", "cat /sys/devices/system/cpu/isolated", "( uname")
_CONSOLE = (
    ("system facts", lambda call, cmd: "rtlab-facts-" in cmd or any(
        cmd[5:].startswith(f) for f in _FACTS)),
    ("upload the window script", lambda call, cmd: call == "put_bytes"
     or cmd.startswith("cmd='printf %s ")),
    ("window start (loads up, program started)", lambda call, cmd: cmd.endswith(
        "rtlab-window.sh start'")),
    ("window end (program's end, evidence)", lambda call, cmd: cmd.endswith(
        "rtlab-window.sh end'")),
    ("loads stopped", lambda call, cmd: cmd.endswith("rtlab-window.sh stop'")),
    ("is the shell alive (true)", lambda call, cmd: cmd == "cmd='true'"))


def _console_calls(log_text: str) -> list[tuple[float, float, str, str]]:
    """ShellDriver calls: (start, seconds, method, command)."""
    calls, open_calls = [], []
    for line in log_text.splitlines():
        found = _STEP.match(line)
        if not found:
            continue
        stamp, arrow, method, args, seconds = found.groups()
        if arrow == "→":
            open_calls.append((_utc(stamp), method, args))
        elif open_calls and seconds is not None:
            began, name, cmd = open_calls.pop()
            calls.append((began, float(seconds), name, cmd))
    return calls


def labgrid_run(image: Path, duration_s: int, out: Path, tree: Path) -> Run:
    log_file = out / "pytest.log"
    env = {**os.environ, "PYTHONPATH": str(tree), "RTLAB_CACHE": str(paths.cache_dir()),
           "PYTEST_ADDOPTS": (
               f"--log-file={log_file} --log-file-level=INFO "
               f"--log-file-format='{LOG_FORMAT}' --log-file-date-format={LOG_DATE}")}
    began, ended, code = _timed(
        [*RTLAB, "run", "--place", PLACE, "--image", str(image), "--scenarios", SCENARIOS,
         "--intervals", INTERVAL, "--rt-tests", "none", "--duration", str(duration_s),
         "--out", str(out)], out / "rtlab-run.out", env, cwd=tree)
    records = sorted(_records(out), key=lambda r: r["started"])
    if code not in (0, 1) or len(records) != 2:
        raise RuntimeError(f"rtlab run exited {code} with {len(records)} record(s): see {out}")
    text = log_file.read_text()
    steps: list[tuple[float, str, float]] = []
    first_line = None
    for line in text.splitlines():
        stamp = line.split(" ", 1)[0]
        if first_line is None and stamp[:4].isdigit():
            first_line = _utc(stamp)
        found = _DONE.match(line)
        if found:
            steps.append((_utc(found.group(1)), found.group(2), float(found.group(3))))
    shell_at = next(t for t, what, _ in steps if what == "boot to shell")
    last_case = max(_utc(r["finished"]) for r in records)
    parts = {"start-up (rtlab, reserve, acquire, pytest)": (first_line or shell_at) - began,
             "power (off, on)": sum(s for _, what, s in steps if what in ("power off",
                                                                            "power on")),
             "flash (mux, bmaptool, read back)": sum(
                 s for _, what, s in steps if what.startswith(("SD mux", "write ",
                                                               "read back"))),
             "boot to login": next(s for _, what, s in steps if what == "boot to shell")}
    parts["other before login (drivers, resources)"] = (shell_at - began) - sum(parts.values())
    calls = [c for c in _console_calls(text) if shell_at <= c[0] <= last_case]
    counted: set[int] = set()
    for name, matches in _CONSOLE:
        mine = [c for c in calls if id(c) not in counted and matches(c[2], c[3])]
        counted |= set(map(id, mine))
        parts[name] = sum(c[1] for c in mine)
    parts["other console commands (reads, clean-ups)"] = sum(
        c[1] for c in calls if id(c) not in counted)
    console = sum(c[1] for c in calls)
    parts["host between commands (pytest, judging, records)"] = (
        last_case - shell_at) - console - duration_s * len(records)
    parts["after the cases (power off, JUnit, release, health)"] = ended - last_case
    return Run("labgrid", ended - began, shell_at - began, duration_s * len(records), parts,
               [r["verdict"] for r in records])


# ------------------------------------------------------------------------- LAVA ----

_ACTION_END = re.compile(r"^end: (\d+) (\S+) \(duration (\d+):(\d+):(\d+)\)")


def lava_run(job: Path, duration_s: int, poll_s: int, out: Path, env: dict[str, str],
             ping_s: int) -> Run:
    submitted, submit_done, code = _timed([*RTLAB, "lava", "submit", str(job)],
                                          out / "submit.out", env)
    said = (out / "submit.out").read_text()
    found = re.search(r": job (\d+) ", said)
    if code != 0 or not found:
        raise RuntimeError(f"rtlab lava submit failed: {said[-500:]}")
    job_id = found.group(1)
    _, ended, code = _timed([*RTLAB, "lava", "fetch", job_id, "--wait", "900", "--poll",
                             str(poll_s), "--out", str(out)], out / "fetch.out", env)
    records = _records(out)
    if code not in (0, 1) or len(records) != 2:
        raise RuntimeError(f"rtlab lava fetch exited {code} with {len(records)} record(s): "
                           f"see {out}")
    details = Server.from_environment(env).show(job_id)
    log = read_log((out / f"job-{job_id}" / "log.yaml").read_text(), "log.yaml")
    # lavacli adds a line of its own (the server's failure comment), timed when it fetched
    entries = [line for line in log.lines if line.when is not None
               and not line.text.startswith("[lavacli]")]
    first, last = entries[0].when.timestamp(), entries[-1].when.timestamp()
    actions = {}
    for line in entries:
        matched = _ACTION_END.match(line.text)
        if matched:
            hours, minutes, seconds = map(int, matched.group(3, 4, 5))
            actions[matched.group(2)] = (line.when.timestamp(),
                                         hours * 3600 + minutes * 60 + seconds)
    boot_name = next(name for name in actions if "boot" in name)
    login_at = actions[boot_name][0]
    cases = [(line.text.split()[1], line.when.timestamp()) for line in log.target
             if line.text.startswith(("rtlab-lava:case-start", "rtlab-lava:case-end"))]
    end_time = server_time(details["end_time"]).timestamp()
    parts = {"submit (rtlab lava submit)": submit_done - submitted,
             "queue and schedule, worker starts lava-run": first - submit_done}
    deploy = next(name for name in actions if "deploy" in name)
    parts["deploy (downloads, overlay, ramdisk)"] = actions[deploy][0] - first
    parts["boot to login"] = login_at - actions[deploy][0]
    cursor = login_at
    starts = cases[0::2]
    ends = cases[1::2]
    for (name, start), (_, finish) in zip(starts, ends, strict=True):
        parts[f"{name}: before the window"] = start - cursor
        parts[f"{name}: case less its {duration_s} s"] = finish - start - duration_s
        cursor = finish
    parts["after the cases (results, power off, clean-up)"] = last - cursor
    # lava-server's end time has whole seconds; the worker reports at its next ping
    parts[f"worker reports the end (pings every {ping_s} s)"] = max(0.0, end_time - last)
    parts["fetch (wait, definition, log, records, JUnit)"] = ended - max(end_time, last)
    return Run("lava", ended - submitted, login_at - submitted, duration_s * len(starts),
               parts, [r["verdict"] for r in records])


# ------------------------------------------------------------------------ table ----

def _fmt(values: Sequence[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:6.1f}"
    return f"{statistics.mean(values):6.1f} ({min(values):.1f}-{max(values):.1f})"


def report(runs: Sequence[Run], print_: Callable[[str], None] = print) -> None:
    paths_seen = sorted({r.path for r in runs})
    print_(f"\n{'seconds':28}" + "".join(f"{p:>24}" for p in paths_seen))
    for name, get in (("wall", lambda r: r.wall_s), ("to the login", lambda r: r.login_s),
                      ("measurement", lambda r: r.measured_s),
                      ("rest", lambda r: r.rest_s), ("overhead (wall - measurement)",
                                                     lambda r: r.overhead_s),
                      ("  boot and window scripts", lambda r: r.shared_s),
                      ("  the harness's own", lambda r: r.own_s)):
        print_(f"{name:28}" + "".join(
            f"{_fmt([get(r) for r in runs if r.path == p]):>24}" for p in paths_seen))
    for path in paths_seen:
        mine = [r for r in runs if r.path == path]
        print_(f"\nwhere {path}'s overhead goes (mean of {len(mine)} run(s), seconds):")
        for part in mine[0].parts:
            values = [r.parts.get(part, 0.0) for r in mine]
            print_(f"  {part:52} {_fmt(values)}")
        print_(f"  verdicts: {', '.join(v for r in mine for v in r.verdicts)}")
    if {"labgrid", "lava"} <= set(paths_seen):
        def mean(path: str, get: Callable[[Run], float]) -> float:
            return statistics.mean(get(r) for r in runs if r.path == path)
        total = mean("labgrid", lambda r: r.overhead_s) / mean("lava", lambda r: r.overhead_s)
        own = mean("labgrid", lambda r: r.own_s) / mean("lava", lambda r: r.own_s)
        print_(f"\nrtlab's overhead is {total:.2f} of LAVA's (goal: at most 0.5); its own "
               f"part (less the boot and the window scripts) {own:.2f} of LAVA's own")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per path (alternating)")
    parser.add_argument("--duration", type=int, default=3, help="seconds per case")
    parser.add_argument("--poll", type=int, default=1,
                        help="rtlab lava fetch --poll: how often the client asks the server")
    parser.add_argument("--only", choices=("labgrid", "lava"), help="one path only")
    parser.add_argument("--out", default="out/harness-overhead")
    parser.add_argument("--labgrid-tree", metavar="DIR",
                        help="run the labgrid path from this checkout of rtlab instead (an "
                             "older commit, for a before/after comparison: git archive "
                             "COMMIT | tar -x -C DIR)")
    args = parser.parse_args()
    out = (REPO_ROOT / args.out).resolve()
    tree = Path(args.labgrid_tree).resolve() if args.labgrid_tree else REPO_ROOT
    image = build_image("imx6q", "rt", paths.debs_dir(), paths.images_dir(),
                        progress=lambda _: None).sd_image

    config = load_config(paths.default_vlab_config())
    state_dir = paths.vlab_state_dir()
    rack_was_up = control.running_pid(state_dir) is not None
    instance = Instance.default()
    provision.setup(instance)
    lava_was_up = daemons.running_pid(instance, "gunicorn") is not None
    runs: list[Run] = []
    try:
        if args.only != "lava":
            control.start(config, state_dir)
        if args.only != "labgrid":
            daemons.start(instance)
            for device in instance.config.devices:
                instance.manage("devices", "update", device.name, "--health", "GOOD")
        env = {**os.environ, **instance.client_environment()}
        env.pop("RTLAB_LAVA_TOKEN", None)
        job = out / "job.yaml"
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run([*RTLAB, "lava", "render", "--board", LAVA_BOARD, "--flavour", "rt",
                        "--scenarios", SCENARIOS, "--intervals", INTERVAL, "--rt-tests", "none",
                        "--duration", str(args.duration), "--tags", LAVA_BOARD,
                        "--out", str(job)], check=True, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
        order = [p for p in ("labgrid", "lava") if args.only in (None, p)]
        for number in range(args.runs):
            # alternate which path goes first, so that neither always runs after the other
            for path in order if number % 2 == 0 else order[::-1]:
                folder = out / f"{number + 1}-{path}"
                folder.mkdir(parents=True, exist_ok=True)
                run = (labgrid_run(image, args.duration, folder, tree) if path == "labgrid" else
                       lava_run(job, args.duration, args.poll, folder, env,
                                instance.config.ping_interval))
                runs.append(run)
                print(f"run {number + 1} {path}: wall {run.wall_s:.1f} s, login "
                      f"{run.login_s:.1f} s, overhead {run.overhead_s:.1f} s", flush=True)
    finally:
        if not rack_was_up:
            control.stop(state_dir)
        if not lava_was_up:
            daemons.stop(instance)
    report(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
