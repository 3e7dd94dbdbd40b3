"""SSH from a runner to the lab's exporters: ``rtlab lab doctor`` checks that labgrid's ssh
reaches the exporter host of every remote USB resource of the places (with rsync at both
ends where an image is copied), naming host, port and user when it does not; ``rtlab ssh
setup`` writes the pipeline's RTLAB_EXPORTER_SSH_* variables where ssh reads them; the
pipeline runs it; the images carry what labgrid's ssh and copy need. The doctor's ssh is
a stand-in on PATH (a script that answers as ssh does); the real one proves the settings
(``ssh -G``, no connection). The real path, container to container: tests/images/
test_remote_flash.py."""

import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from rtlab.lab import preflight, sshsetup
from rtlab.lab.preflight import Exported, LabView, PlaceView
from rtlab.run import doctor
from rtlab.util import paths
from rtlab.util.findings import ERROR, OK

RACK = paths.REPO_ROOT / "env" / "rack.yaml"
BINDIR = Path(sys.executable).parent
# what the stand-in's `ssh -G` says of every host
ADDRESS, PORT, USER = "192.0.2.7", "2222", "labgrid"
# what a real ssh prints for each failure, on stderr, exiting 255
FAILURES = {
    "hostkey": "No ED25519 host key is known for [192.0.2.7]:2222 and you have requested "
               "strict checking.\nHost key verification failed.",
    "denied": "labgrid@192.0.2.7: Permission denied (publickey).",
    "refused": "ssh: connect to host 192.0.2.7 port 2222: Connection refused",
}


@pytest.fixture
def fake_ssh(tmp_path, monkeypatch):
    """An ``ssh`` first on PATH: ``-G`` prints settings, a connection answers as
    $FAKE_SSH says (ok, norsync, or one of FAILURES); every call's arguments logged."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    log = tmp_path / "ssh.log"
    failures = "\n".join(
        f"    {name}) printf '%s\\n' {subprocess.list2cmdline([text])} >&2; exit 255;;"
        for name, text in FAILURES.items())
    script = bindir / "ssh"
    script.write_text(textwrap.dedent("""\
        #!/bin/sh
        printf '%s\\n' "$*" >>{log}
        for arg; do
          [ "$arg" = -G ] && {{ printf 'user {user}\\nhostname {address}\\n'
                                printf 'port {port}\\n'; exit 0; }}
        done
        eval last=\\${{$#}}
        case "${{FAKE_SSH:-ok}}" in
        {failures}
            norsync) [ "$last" = true ] && exit 0; exit 1;;
            *) [ "$last" = true ] && exit 0; echo /usr/bin/rsync;;
        esac
        """).format(log=log, user=USER, address=ADDRESS, port=PORT, failures=failures.strip()))
    script.chmod(0o755)
    # the stand-in, then this machine's tools (rsync here; the venv for nothing ssh-ish)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return log


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def mux(group: str, host: str = "labhost-01", **extra: object) -> Exported:
    """A USB-SD-Mux as an exporter exports it (labgrid's USBSDMuxExport): the card is
    behind it, so labgrid's USBStorageDriver copies images to its host."""
    params: dict[str, object] = {"host": host, "busnum": 1, "devnum": 4, "path": "/dev/sdb",
                                 "vendor_id": 0x0424, "model_id": 0x4041,
                                 "control_path": "/dev/sg1"}
    if extra:
        params["extra"] = extra
    return Exported("labhost-01", group, "NetworkUSBSDMuxDevice", "NetworkUSBSDMuxDevice",
                    True, params)


def others(group: str) -> list[Exported]:
    """A place's serial port and PDU: reached without the exporter's ssh (labgrid
    forwards a port only with LG_PROXY)."""
    return [Exported("labhost-01", group, "NetworkSerialPort", "NetworkSerialPort", True,
                     {"host": "labhost-01", "port": 4001}),
            Exported("labhost-01", group, "NetworkPowerPort", "NetworkPowerPort", True,
                     {"model": "gude8031", "host": "pdu", "index": 1})]


def lab_of(*groups: tuple[str, list[Exported]], board: str = "imx6q") -> LabView:
    exported = [r for _, resources in groups for r in resources]
    places = tuple(PlaceView(name, {"board": board}, (f"labhost-01/{name}/*",),
                             tuple(resources)) for name, resources in groups)
    return LabView("coordinator.lab:20408", "26.0.1", places, tuple(exported))


def two_places() -> LabView:
    return lab_of(("imx6q-01", [mux("imx6q-01"), *others("imx6q-01")]),
                  ("imx6q-02", [mux("imx6q-02"), *others("imx6q-02")]))


# --- the doctor's check ----------------------------------------------------------------------

def test_labgrids_ssh_reaches_the_exporter_host(fake_ssh):
    found = preflight.ssh_findings(two_places(), ["imx6q"])
    assert [(f.check, f.subject, f.status) for f in found] == [
        ("ssh", "labhost-01", OK), ("rsync", "labhost-01", OK)]
    assert found[0].message == f"labgrid's ssh reaches {USER}@{ADDRESS} port {PORT}"
    connections = [c for c in calls(fake_ssh) if "-G" not in c.split()]
    # one connection for the host, not one per place, with labgrid's options and no
    # prompt; then rsync looked for there
    assert len(connections) == 2, connections
    for option in ("-x", "LogLevel=ERROR", "PasswordAuthentication=no",
                   "StrictHostKeyChecking=yes", "BatchMode=yes", "ConnectTimeout="):
        assert option in connections[0], (option, connections[0])
    assert connections[0].endswith(" labhost-01 true")
    assert connections[1].endswith(" labhost-01 command -v rsync")


@pytest.mark.parametrize(("failure", "reason", "fix"), [
    ("hostkey", "Host key verification failed.", f"ssh-keyscan -p {PORT} {ADDRESS}"),
    ("denied", "Permission denied (publickey).", "authorized_keys"),
    ("refused", "Connection refused", f"sshd answers on {ADDRESS} port {PORT}"),
])
def test_a_host_ssh_does_not_reach_is_one_error_naming_host_port_and_user(
        fake_ssh, monkeypatch, failure, reason, fix):
    monkeypatch.setenv("FAKE_SSH", failure)
    found = preflight.ssh_findings(two_places(), ["imx6q"])
    (problem,) = found
    assert (problem.check, problem.subject, problem.status) == ("ssh", "labhost-01", ERROR)
    assert problem.message.startswith(
        f"labgrid's ssh to labhost-01 ({USER}@{ADDRESS} port {PORT}) fails: ")
    assert reason in problem.message
    assert "labhost-01/imx6q-01/NetworkUSBSDMuxDevice/NetworkUSBSDMuxDevice and 1 more" \
        in problem.message
    assert fix in problem.fix and "RTLAB_EXPORTER_" in problem.fix
    # nothing more is asked of a host ssh does not reach
    assert preflight.unreachable(found) == {"labhost-01"}


def test_an_exporter_host_without_rsync(fake_ssh, monkeypatch):
    monkeypatch.setenv("FAKE_SSH", "norsync")
    found = preflight.ssh_findings(two_places(), ["imx6q"])
    assert [(f.check, f.status) for f in found] == [("ssh", OK), ("rsync", ERROR)]
    assert "no rsync on labhost-01" in found[1].message
    assert "docker/exporter" in found[1].fix


def test_no_ssh_client_here(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", os.fspath(empty))
    (problem,) = preflight.ssh_findings(two_places(), ["imx6q"])
    assert (problem.check, problem.subject, problem.status) == ("ssh", "this machine", ERROR)
    assert "labhost-01" in problem.message and "openssh-client" in problem.fix


def test_only_hosts_of_remote_usb_resources_of_the_boards_asked_for(fake_ssh):
    # the virtual rack: its card and mux are no remote USB resources
    virtual = LabView("c", "26.0.1", (PlaceView(
        "imx6q-01", {"board": "qemu-imx6q"}, ("vlab/imx6q-01/*",), tuple(
            Exported("vlab", "imx6q-01", cls, cls, True, {"path": "/x"})
            for cls in ("VirtualSDMuxDevice", "VirtualMassStorage"))),), ())
    assert preflight.ssh_findings(virtual, ["qemu-imx6q"]) == []
    # a place of another board type, and a serial port's host, are not asked
    assert preflight.ssh_findings(two_places(), ["rpi3"]) == []
    assert calls(fake_ssh) == []


def test_an_exporter_that_requires_its_proxy_is_reached_through_it(fake_ssh):
    lab = lab_of(("imx6q-01", [mux("imx6q-01", host="10.9.0.2", proxy="labhost-01.lab",
                                   proxy_required=True)]))
    found = preflight.ssh_findings(lab, ["imx6q"])
    assert [f.subject for f in found] == ["labhost-01.lab", "labhost-01.lab"]


def test_the_doctor_reports_ssh_and_looks_for_no_tools_where_it_fails(
        fake_ssh, monkeypatch, tmp_path):
    """The doctor's run: the ssh finding among the lab's, and no tools looked for over an
    ssh that fails (labgrid's sshmanager would wait for the same failure per tool)."""
    monkeypatch.setenv("FAKE_SSH", "denied")
    monkeypatch.setattr(preflight, "read_lab", lambda address, timeout_s=10.0: two_places())
    found = doctor.diagnose(doctor.DoctorOptions(
        coordinator="coordinator.lab:20408", env_file=RACK, boards=("imx6q",),
        db_url=f"sqlite:///{tmp_path / 'r.db'}"))
    (problem,) = [f for f in found if f.check == "ssh"]
    assert problem.status == ERROR and f"port {PORT}" in problem.message
    assert not [f for f in found if f.check == "tools" and f.subject == "labhost-01"]
    connections = [c for c in calls(fake_ssh) if "-G" not in c.split()]
    assert len(connections) == 1, connections


def test_a_tool_look_up_whose_ssh_fails_is_a_finding_not_a_crash():
    from labgrid.driver.exception import ExecutionError

    def runner(host, argv):
        raise ExecutionError(f"failed to connect to {host}")

    needs = preflight.needs_of(RACK)
    found = preflight.tool_findings(two_places(), needs, ["imx6q"], runner)
    assert {(f.check, f.subject, f.status) for f in found} == {
        ("tools", "labhost-01", ERROR)}
    assert all("failed to connect to labhost-01" in f.message for f in found)


# --- rtlab ssh setup ---------------------------------------------------------------------------

LAB_CONFIG = "Host labhost-01 labhost-02\n  HostName 192.0.2.7\n  Port 2222\n  User labgrid\n"


@pytest.fixture
def key(tmp_path) -> Path:
    path = tmp_path / "secrets" / "id_ed25519"
    path.parent.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", path],
                   check=True)
    return path


@pytest.fixture
def file_variables(tmp_path, key) -> dict[str, str]:
    """As GitLab gives variables of type File: each names a file holding the value."""
    (key.parent / "known_hosts").write_text(
        f"[{ADDRESS}]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB5tDqcOlLZ3bBxWq1Y0ZNKX0nE\n")
    (key.parent / "config").write_text(LAB_CONFIG)
    return {sshsetup.KEY_VARIABLE: os.fspath(key),
            sshsetup.KNOWN_HOSTS_VARIABLE: os.fspath(key.parent / "known_hosts"),
            sshsetup.CONFIG_VARIABLE: os.fspath(key.parent / "config")}


def settings_of(home: Path, host: str) -> dict[str, list[str]]:
    """What the real ssh makes of ``host`` with ``home``'s configuration (no connection)."""
    out = subprocess.run(["ssh", "-F", os.fspath(home / ".ssh" / "config"), "-G", host],
                         capture_output=True, text=True, check=True).stdout
    values: dict[str, list[str]] = {}
    for line in out.splitlines():
        name, _, value = line.partition(" ")
        values.setdefault(name, []).append(value)
    return values


def test_nothing_set_writes_nothing(tmp_path):
    assert sshsetup.setup({}, tmp_path) is None
    assert sshsetup.setup({sshsetup.KEY_VARIABLE: "  "}, tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_file_variables_become_the_settings_ssh_reads(tmp_path, key, file_variables):
    home = tmp_path / "home"
    home.mkdir()
    written = sshsetup.setup(file_variables, home)
    assert written is not None and written.hosts == ("labhost-01", "labhost-02")
    folder = home / ".ssh" / "rtlab-exporters"
    assert (folder / "id").read_text() == key.read_text()
    # the key is the user's alone from the start, its folders too
    assert stat.S_IMODE((folder / "id").stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == stat.S_IMODE(
        (home / ".ssh").stat().st_mode) == 0o700
    for host in ("labhost-01", "labhost-02"):
        seen = settings_of(home, host)
        assert (seen["hostname"], seen["port"], seen["user"]) == ([ADDRESS], [PORT], [USER])
        assert seen["identityfile"] == [os.fspath(folder / "id")]
        assert seen["userknownhostsfile"] == [os.fspath(folder / "known_hosts")]
        assert seen["batchmode"] == ["yes"] and seen["stricthostkeychecking"] == ["true"]
    # another host keeps ssh's defaults: no key, no port of the exporters
    other = settings_of(home, "gitlab.example.com")
    assert other["port"] == ["22"] and os.fspath(folder / "id") not in other["identityfile"]


def test_plain_variables_work_too(tmp_path, key, file_variables):
    plain = {sshsetup.KEY_VARIABLE: key.read_text(),
             sshsetup.KNOWN_HOSTS_VARIABLE: Path(
                 file_variables[sshsetup.KNOWN_HOSTS_VARIABLE]).read_text().strip(),
             sshsetup.CONFIG_VARIABLE: LAB_CONFIG.replace("\n", "\r\n")}
    sshsetup.setup(plain, tmp_path)
    assert (tmp_path / ".ssh" / "rtlab-exporters" / "id").read_text() == key.read_text()
    assert settings_of(tmp_path, "labhost-02")["port"] == [PORT]


def test_a_users_own_config_stays_below_the_include_written_once(tmp_path, file_variables):
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh").chmod(0o755)
    own = "Host git.example.com\n  User git\n"
    (tmp_path / ".ssh" / "config").write_text(own)
    (tmp_path / ".ssh" / "config").chmod(0o644)
    sshsetup.setup(file_variables, tmp_path)
    sshsetup.setup(file_variables, tmp_path)
    text = (tmp_path / ".ssh" / "config").read_text()
    # the user's files keep their modes
    assert stat.S_IMODE((tmp_path / ".ssh").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / ".ssh" / "config").stat().st_mode) == 0o644
    # first, so that it is no part of the user's Host block; once, however often it runs
    assert text.splitlines()[1].startswith("Include ") and text.count("Include ") == 1
    assert text.endswith(own)
    assert settings_of(tmp_path, "git.example.com")["user"] == ["git"]
    assert settings_of(tmp_path, "labhost-01")["port"] == [PORT]


@pytest.mark.parametrize("missing", [sshsetup.KEY_VARIABLE, sshsetup.KNOWN_HOSTS_VARIABLE])
def test_a_key_without_host_keys_or_host_keys_without_a_key_are_refused(
        tmp_path, file_variables, missing):
    variables = {n: v for n, v in file_variables.items() if n != missing}
    with pytest.raises(sshsetup.SetupError, match=missing):
        sshsetup.setup(variables, tmp_path / "home")
    assert not (tmp_path / "home").exists()


def test_a_value_that_is_no_key_is_refused_without_showing_it(tmp_path, file_variables):
    secret = "not-a-key-but-a-secret-4711"
    with pytest.raises(sshsetup.SetupError) as refused:
        sshsetup.setup({**file_variables, sshsetup.KEY_VARIABLE: secret}, tmp_path)
    assert "no private key" in str(refused.value) and secret not in str(refused.value)
    with pytest.raises(sshsetup.SetupError, match="not a file"):
        sshsetup.setup({**file_variables, sshsetup.KEY_VARIABLE: "/builds/x.tmp/KEY"},
                       tmp_path)


def test_the_command_takes_the_key_from_its_environment_and_never_shows_it(
        tmp_path, key, file_variables, fake_ssh):
    """No secret on a command line: the key reaches `rtlab ssh setup` through the
    environment, and neither its output nor a process it starts (ssh -G) carries it."""
    secret = key.read_text()
    env = {**os.environ, **file_variables, sshsetup.KEY_VARIABLE: secret}
    done = subprocess.run([BINDIR / "rtlab", "ssh", "setup", "--home", tmp_path],
                          capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    body = secret.splitlines()[1]
    assert body not in done.stdout + done.stderr
    assert f"labhost-01: {USER}@{ADDRESS} port {PORT}" in done.stdout
    assert calls(fake_ssh) and not any(body in line for line in calls(fake_ssh))
    refused = subprocess.run([BINDIR / "rtlab", "ssh", "setup", "--home", tmp_path / "x"],
                             capture_output=True, text=True, check=False,
                             env={**env, sshsetup.KNOWN_HOSTS_VARIABLE: ""})
    assert refused.returncode == 2 and body not in refused.stdout + refused.stderr
    assert "RTLAB_EXPORTER_KNOWN_HOSTS not set" in refused.stderr


# --- the pipeline and the images ---------------------------------------------------------------

def test_every_job_writes_the_exporters_ssh_settings_first():
    pipeline = YAML(typ="safe").load((paths.REPO_ROOT / ".gitlab-ci.yml").read_text())
    assert pipeline["default"]["before_script"] == ["rtlab ssh setup"]
    # a job's own before_script would replace the default's, and so would a job that
    # does not inherit it
    jobs = {name: job for name, job in pipeline.items()
            if isinstance(job, dict) and name not in ("default", "variables", "workflow")}
    assert not [name for name, job in jobs.items() if "before_script" in job
                or "inherit" in job]
    text = (paths.REPO_ROOT / ".gitlab-ci.yml").read_text()
    for name in sshsetup.VARIABLES:
        # documented for the lab's project variables, given no value in the file
        assert re.search(rf"^#\s+{name}\s", text, re.MULTILINE), name
        assert name not in pipeline["variables"]


def run_lines(dockerfile: str) -> str:
    text = (paths.REPO_ROOT / "docker" / dockerfile / "Dockerfile").read_text()
    return " ".join(line for line in text.replace("\\\n", " ").splitlines()
                    if line.startswith("RUN "))


def test_the_ci_image_has_labgrids_ssh_client_and_rsync():
    packages = run_lines("ci")
    assert re.search(r"apt-get install [^&]*\bopenssh-client\b", packages)
    assert re.search(r"apt-get install [^&]*\brsync\b", packages)


def test_the_exporter_image_has_what_the_clients_run_there():
    """rsync (ManagedFile's copy), a cache labgrid's user may write, and every tool of
    env/rack.yaml's tools: at its path."""
    runs = run_lines("exporter")
    assert re.search(r"apt-get install [^&]*\brsync\b", runs)
    assert "install -d -o labgrid -g labgrid -m 0755 /var/cache/labgrid" in runs
    tools = {tool: path for _, tool, path in preflight.needs_of(RACK).tools}
    assert tools["bmaptool"] == "/usr/bin/bmaptool"  # Debian's bmap-tools puts it there
    assert re.search(r"apt-get install [^&]*\bbmap-tools\b", runs)
    assert f"ln -s /opt/rtlab/.venv/bin/usbsdmux {tools['usbsdmux']}" in runs
