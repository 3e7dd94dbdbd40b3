"""``rtlab lab doctor``'s rules on stand-in labs (no coordinator): what an environment
file asks of a place (the physical rack's USB-SD-Mux, an SDWire instead), resources
missing, unavailable or behind a gone exporter, tags, tools on a remote exporter host,
the results database (absent, unreachable, old, newer), the gate's limits, the
pipeline's variables, and the output (text, JSON, exit code). The virtual rack's run:
tests/integration/test_lab_doctor_rack.py."""

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from rtlab.lab import preflight
from rtlab.lab.preflight import Exported, LabView, PlaceView
from rtlab.measure.suite import load_suite
from rtlab.run import doctor
from rtlab.store import open_store
from rtlab.store.migrate import downgrade, head
from rtlab.util import paths
from rtlab.util.findings import ERROR, OK, WARNING, Finding, as_json, as_text, exit_code

RACK = paths.REPO_ROOT / "env" / "rack.yaml"


def resource(group: str, cls: str, *, exporter: str = "labhost-01", avail: bool = True,
             **params: object) -> Exported:
    return Exported(exporter, group, cls, cls, avail, params)


def physical(group: str, *, mux_host: str = "labhost-01.lab", avail: bool = True,
             exporter: str = "labhost-01") -> list[Exported]:
    """What a lab host exports for one board (env/exporter/labhost-01.yaml), as the
    coordinator lists it."""
    return [resource(group, "NetworkSerialPort", exporter=exporter, host=mux_host),
            resource(group, "NetworkPowerPort", exporter=exporter, model="gude8031"),
            resource(group, "NetworkUSBSDMuxDevice", exporter=exporter, avail=avail,
                     host=mux_host, control_path="/dev/sg1")]


def place(name: str, exported: list[Exported], *, tags: dict[str, str] | None = None,
          matches: tuple[str, ...] | None = None) -> PlaceView:
    matches = matches or (f"labhost-01/{name}/*",)
    matched = tuple(r for r in exported if any(
        f"{r.exporter}/{r.group}/{r.cls}".startswith(m.rstrip("*").rstrip("/"))
        for m in matches))
    return PlaceView(name, tags if tags is not None else {
        "board": "imx6q", "net_ping": "192.168.1.1", "net_stream": "192.168.1.50:5001"},
        matches, matched)


def lab(places: list[PlaceView], exported: list[Exported]) -> LabView:
    return LabView("coordinator.lab:20408", "26.0.1", tuple(places), tuple(exported))


def statuses(found: list[Finding]) -> list[tuple[str, str, str]]:
    return [(f.check, f.subject, f.status) for f in found]


def test_the_physical_racks_environment_asks_for_a_usb_sd_mux_and_its_tools():
    needs = preflight.needs_of(RACK)
    labels = {role.label: role for role in needs.roles}
    assert set(labels) == {"power", "serial console", "SD mux", "storage"}
    assert labels["SD mux"].classes == {"USBSDMuxDevice", "NetworkUSBSDMuxDevice"}
    assert "NetworkUSBSDMuxDevice" in labels["storage"].classes
    assert set(needs.tools) == {("USBSDMuxDriver", "usbsdmux", "/usr/bin/usbsdmux"),
                                ("USBStorageDriver", "bmaptool", "/usr/bin/bmaptool")}


def test_an_sdwire_lab_is_checked_for_an_sdwire(tmp_path):
    env = tmp_path / "sdwire.yaml"
    env.write_text(RACK.read_text().replace("USBSDMuxDriver: {}", "USBSDWireDriver: {}")
                   .replace("usbsdmux: /usr/bin/usbsdmux", "sd-mux-ctrl: /usr/bin/sd-mux-ctrl"))
    needs = preflight.needs_of(env)
    mux = next(role for role in needs.roles if role.label == "SD mux")
    assert mux.classes == {"USBSDWireDevice", "NetworkUSBSDWireDevice"}
    assert ("USBSDWireDriver", "sd-mux-ctrl", "/usr/bin/sd-mux-ctrl") in needs.tools
    # a place with a USB-SD-Mux does not satisfy it
    exported = physical("imx6q-01")
    found = preflight.places_findings(lab([place("imx6q-01", exported)], exported), needs,
                                      ["imx6q"], network=True)
    assert ("resources", "imx6q-01", ERROR) in statuses(found)


def test_a_broken_environment_file_is_named_with_its_line(tmp_path):
    env = tmp_path / "broken.yaml"
    env.write_text(RACK.read_text().replace("SerialDriver: {}", "SerialDriverr: {}"))
    with pytest.raises(preflight.EnvFileError, match=r"broken\.yaml:\d+.*SerialDriverr"):
        preflight.needs_of(env)


def test_every_place_of_a_board_type_is_checked_and_each_problem_has_its_fix():
    needs = preflight.needs_of(RACK)
    exported = (physical("imx6q-01") + physical("imx6q-02", avail=False)
                + physical("imx6q-03"))
    # imx6q-03's mux is exported but the place's matches leave it out
    third = place("imx6q-03", exported, matches=("labhost-01/imx6q-03/NetworkSerialPort",
                                                 "labhost-01/imx6q-03/NetworkPowerPort"))
    found = preflight.places_findings(
        lab([place("imx6q-01", exported), place("imx6q-02", exported), third,
             place("rpi3-01", [], tags={"board": "rpi3"})], exported),
        needs, ["imx6q", "rpi4"], network=True)
    by = {(f.check, f.subject): f for f in found}
    assert by[("resources", "imx6q-01")].status == OK
    unavailable = by[("resources", "imx6q-02")]
    assert unavailable.status == ERROR
    assert "labhost-01/imx6q-02/NetworkUSBSDMuxDevice/NetworkUSBSDMuxDevice is exported " \
           "but not available" in unavailable.message
    missing = [f for f in found if f.subject == "imx6q-03" and f.check == "resources"]
    # both roles the mux plays are missing, each with the match that adds it
    assert [f.message.split(" (")[0] for f in missing] == ["no SD mux resource matched",
                                                           "no storage resource matched"]
    assert {f.fix for f in missing} == {
        "labgrid-client -p imx6q-03 add-match labhost-01/imx6q-03/NetworkUSBSDMuxDevice"}
    no_place = by[("places", "board=rpi4")]
    assert no_place.status == ERROR and "places have board=imx6q, rpi3" in no_place.message
    assert "set-tags board=rpi4" in no_place.fix
    # rpi3 was not asked for
    assert not any(f.subject == "rpi3-01" for f in found)


def test_a_gone_exporter_is_one_error_not_one_per_resource():
    needs = preflight.needs_of(RACK)
    found = preflight.places_findings(
        lab([place("imx6q-01", [])], []), needs, ["imx6q"], network=True)
    problems = [f for f in found if f.status != OK]
    assert statuses(problems) == [("exporter", "imx6q-01", ERROR)]
    assert "exporter 'labhost-01' (the place's match labhost-01/imx6q-01/*) is not " \
           "connected" in problems[0].message


@pytest.mark.parametrize(("tags", "status", "words"), [
    ({"board": "imx6q"}, WARNING, "no net_ping, net_stream tag: the suite's network scenario "
                                  "is skipped"),
    ({"board": "imx6q", "net_ping": "10.0.0.1"}, WARNING, "no net_stream tag"),
    ({"board": "imx6q", "net_ping": "10.0.0.1", "net_stream": "10.0.0.9"}, ERROR,
     "net_stream='10.0.0.9' is not HOST:PORT"),
    ({"board": "imx6q", "network": "the board has no Ethernet"}, OK,
     "no network load: the board has no Ethernet"),
])
def test_the_network_tags(tags, status, words):
    needs = preflight.needs_of(RACK)
    exported = physical("imx6q-01")
    found = preflight.places_findings(lab([place("imx6q-01", exported, tags=tags)], exported),
                                      needs, ["imx6q"], network=True)
    (tag,) = [f for f in found if f.check == "tags"]
    assert tag.status == status and words in tag.message
    # a suite without a network scenario asks for no tags
    found = preflight.places_findings(lab([place("imx6q-01", exported, tags=tags)], exported),
                                      needs, ["imx6q"], network=False)
    assert not [f for f in found if f.check == "tags"]


def test_tools_are_looked_for_on_the_exporter_host_that_runs_them():
    needs = preflight.needs_of(RACK)
    exported = physical("imx6q-01", mux_host="labhost-01.lab") + physical(
        "imx6q-02", mux_host="labhost-02.lab", exporter="labhost-02")
    asked = []

    def runner(host, argv):
        asked.append((host, argv[-1]))
        # labhost-02 lacks usbsdmux
        missing = host == "labhost-02.lab" and "usbsdmux" in argv[-1]
        return subprocess.CompletedProcess(argv, 1 if missing else 0,
                                           "" if missing else argv[-1].split()[-1] + "\n", "")

    places = [place("imx6q-01", exported),
              place("imx6q-02", exported, matches=("labhost-02/imx6q-02/*",))]
    found = preflight.tool_findings(lab(places, exported), needs, ["imx6q"], runner)
    assert sorted(asked) == [("labhost-01.lab", "command -v /usr/bin/bmaptool"),
                             ("labhost-01.lab", "command -v /usr/bin/usbsdmux"),
                             ("labhost-02.lab", "command -v /usr/bin/bmaptool"),
                             ("labhost-02.lab", "command -v /usr/bin/usbsdmux")]
    (problem,) = [f for f in found if f.status != OK]
    assert (problem.check, problem.subject) == ("tools", "labhost-02.lab")
    assert "/usr/bin/usbsdmux (USBSDMuxDriver runs it here) is not found" in problem.message
    assert "pip install usbsdmux" in problem.fix


def test_a_coordinator_of_another_labgrid_is_a_warning():
    view = LabView("c:20408", "24.0.1", (), ())
    found = preflight.coordinator_findings(view, "26.0.1")
    assert statuses(found) == [("coordinator", "c:20408", OK),
                               ("labgrid-version", "c:20408", WARNING)]
    assert "coordinator runs labgrid 24.0.1, rtlab's client 26.0.1" in found[1].message


def test_an_unreachable_coordinator_is_one_error(tmp_path):
    found = doctor.diagnose(doctor.DoctorOptions(
        coordinator="127.0.0.1:1", env_file=RACK, boards=("imx6q",),
        db_url=f"sqlite:///{tmp_path / 'r.db'}"))
    (problem,) = [f for f in found if f.check == "coordinator"]
    assert problem.status == ERROR and problem.message.startswith("does not answer")
    assert "--coordinator, LG_COORDINATOR" in problem.fix
    assert exit_code(found) == 1


def test_a_coordinator_that_never_answers_is_an_error_within_the_timeout():
    """A port that takes the connection and says nothing (a wrong host, a proxy that hangs):
    labgrid's own session start waits on it for ever."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(0)
        began = time.monotonic()
        with pytest.raises(preflight.CoordinatorError, match="no answer within 1 s"):
            preflight.read_lab(f"127.0.0.1:{silent.getsockname()[1]}", timeout_s=1)
        assert time.monotonic() - began < 10


def test_the_database(tmp_path):
    assert doctor.database_findings(None)[0].status == WARNING
    # a SQLite file that does not exist is not created by the check
    missing = tmp_path / "none.db"
    (found,) = doctor.database_findings(f"sqlite:///{missing}")
    assert found.status == WARNING and not missing.exists()
    url = f"sqlite:///{tmp_path / 'r.db'}"
    open_store(url).close()
    assert statuses(doctor.database_findings(url)) == [("database", url, OK)]
    engine = create_engine(url)
    downgrade(engine, "0005")
    (found,) = doctor.database_findings(url)
    assert (found.check, found.status) == ("migrations", ERROR)
    assert f"schema at revision 0005, this rtlab's is {head()}" in found.message
    # still 0005: the check changed nothing
    with engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")
                                  ).scalar() == "0005"
        connection.execute(text("UPDATE alembic_version SET version_num = '0099'"))
        connection.commit()
    engine.dispose()
    (found,) = doctor.database_findings(url)
    assert "revision 0099, which this rtlab" in found.message and found.status == ERROR


def test_an_unreachable_database_hides_its_password():
    (found,) = doctor.database_findings("postgresql://rtlab:s3cret@127.0.0.1:1/rtlab")
    assert (found.check, found.status) == ("database", ERROR)
    assert "does not answer" in found.message
    assert "s3cret" not in found.subject + found.message + found.fix
    (found,) = doctor.database_findings("not a url")
    assert found.status == ERROR and "not a database URL" in found.message


def test_the_gate_names_boards_without_limits_and_provisional_ones(tmp_path):
    suite = load_suite()
    found = doctor.gate_findings(None, suite, ["imx6q", "qemu-imx6q", "imx8mp"])
    by = {(f.subject, f.status) for f in found}
    assert ("board=qemu-imx6q", OK) in by
    assert ("board=imx8mp", ERROR) in by
    # the physical boards' published figures are not this lab's
    assert {("board=imx6q flavour=std", WARNING), ("board=imx6q flavour=rt", WARNING)} <= by
    broken = tmp_path / "thresholds.yaml"
    broken.write_text((paths.REPO_ROOT / "thresholds.yaml").read_text().replace(
        "max_us:", "max_uss:", 1))
    (found,) = doctor.gate_findings(broken, suite, ["imx6q"])
    assert found.status == ERROR and "thresholds.yaml:" in found.message


@pytest.mark.parametrize(("variables", "expected"), [
    ({"LG_COORDINATOR": "c:1", "RTLAB_RESULTS_DB": "postgresql://x/y"},
     [("variables", "pipeline", OK)]),
    ({"LG_COORDINATOR": "c:1", "CI_PIPELINE_SOURCE": "schedule"},
     [("variables", "RTLAB_RESULTS_DB", ERROR)]),
    ({"LG_COORDINATOR": "c:1", "RTLAB_RESULTS_DB": "x", "RTLAB_PULL_PIPELINES": "50"},
     [("variables", "RTLAB_GITLAB_TOKEN", ERROR)]),
    ({"LG_COORDINATOR": "c:1", "RTLAB_RESULTS_DB": "x", "RTLAB_TUNE_TOKEN": "glpat"},
     [("variables", "RTLAB_TUNE_TOKEN", WARNING)]),
    ({"RTLAB_RESULTS_DB": "x"}, [("variables", "LG_COORDINATOR", WARNING)]),
    ({"LG_COORDINATOR": "c:1", "RTLAB_WINDOW": "60"},
     [("variables", "RTLAB_WINDOW", WARNING)]),
])
def test_the_pipelines_variables(variables, expected):
    found = doctor.pipeline_findings(variables)
    assert statuses(found) == expected
    assert "glpat" not in as_text(found)


def test_text_json_and_exit_codes():
    found = [Finding("coordinator", "c:1", OK, "answers"),
             Finding("tags", "p", WARNING, "no net_ping tag", "set-tags …")]
    assert exit_code(found) == 0
    assert as_text(found).splitlines() == [
        "✓ coordinator c:1: answers", "! tags p: no net_ping tag", "    fix: set-tags …",
        "2 checks: 0 error(s), 1 warning(s): ready, with warnings"]
    found.append(Finding("resources", "p", ERROR, "no SD mux", "add-match …"))
    assert exit_code(found) == 1
    report = json.loads(as_json(found))
    assert (report["ok"], report["errors"], report["warnings"]) == (False, 1, 1)
    assert report["checks"][2] == {"check": "resources", "subject": "p", "status": "error",
                                   "message": "no SD mux", "fix": "add-match …"}
    with pytest.raises(ValueError, match="needs its fix"):
        Finding("tags", "p", ERROR, "broken")


def test_options_come_from_the_pipelines_variables():
    options = doctor.options_from(None, None, [], None, None, None, environ={
        "LG_COORDINATOR": "lab:20408", "RTLAB_ENV": "env/virtual.yaml",
        "RTLAB_RESULTS_DB": "postgresql://db/rtlab", "CI": "true"})
    assert options.coordinator == "lab:20408"
    assert options.env_file == Path("env/virtual.yaml") or options.env_file == \
        paths.REPO_ROOT / "env" / "virtual.yaml"
    assert options.db_url == "postgresql://db/rtlab" and options.pipeline is not None
    bare = doctor.options_from(None, None, [], None, None, None, environ={})
    assert (bare.coordinator, bare.pipeline, bare.db_url) == ("127.0.0.1:20408", None, None)
    assert bare.env_file.name == "rack.yaml"


def test_results_migrate_brings_an_old_store_to_head(tmp_path, capsys):
    from rtlab.cli import main

    url = f"sqlite:///{tmp_path / 'old.db'}"
    open_store(url).close()
    engine = create_engine(url)
    downgrade(engine, "0004")
    assert main(["results", "migrate", "--db", url]) == 0
    assert capsys.readouterr().out.strip() == f"{url}: schema at revision {head()} (was 0004)"
    with engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")
                                  ).scalar() == head()
    engine.dispose()
    assert main(["results", "migrate", "--db", url]) == 0
    assert capsys.readouterr().out.strip().endswith("(already)")
