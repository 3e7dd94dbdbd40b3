"""Bad input, one file kind at a time: every refusal names the file, the line and what was
expected, so that whoever broke the file can fix it without reading rtlab's code."""

import json
import shlex
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from aiohttp import web

from rtlab.artifacts.manifest import image_manifest_for, read_image_manifest
from rtlab.artifacts.record import SCHEMA, read_record, write_record
from rtlab.lab.envfile import check_env_file, check_exporter_file
from rtlab.measure.loads import DiskLoad, HostTraffic, NetworkLoad
from rtlab.measure.suite import SuiteFileError, load_suite
from rtlab.measure.window import StartedLoad, window_script
from rtlab.platform.boards import board_model
from rtlab.util.jsonfile import JsonFileError
from rtlab.util.paths import REPO_ROOT
from rtlab.util.yamlfile import YamlFileError
from rtlab.verdict.cli import show
from rtlab.verdict.thresholds import ThresholdsError, load_thresholds
from rtlab.vlab.config import load_config
from rtlab.vlab.server import VirtualRack

SHA = "ab" * 32
ENV = REPO_ROOT / "env"


def good_manifest() -> dict:
    """The keys ``rtlab image build`` writes that the suite reads (rtlab/image/build.py)."""
    return {
        "schema": 1, "image_id": SHA[:16], "board": "imx6q", "flavour": "rt", "arch": "armhf",
        "kernel": {"metapackage": "linux-image-rt-armmp", "metapackage_version": "6.1",
                   "package": "linux-image-6.1.0-rt-armmp", "version": "6.1.1-1",
                   "release": "6.1.0-rt-armmp", "preemption": "PREEMPT_RT", "hz": 250,
                   "modules": ["fec"]},
        "sd_image": {"file": "sdcard.img", "size": 1, "sha256": SHA},
    }


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


# -- thresholds, suite and virtual rack files (their loaders have their own tests; one
# -- representative refusal each keeps every file kind in this one place) ---------------

def test_thresholds_file_with_a_misspelt_metric(tmp_path):
    path, lines = edited(REPO_ROOT / "thresholds.yaml", tmp_path, ("defaults: {}",
                                                                   "defaults: {max_ms: 5}"))
    with pytest.raises(ThresholdsError) as error:
        load_thresholds(path)
    assert str(error.value) == (f"{path}:{line_with(lines, 'max_ms')}: unknown key 'max_ms' "
                                "(expected one of: avg_us, max_us, p99_9_us, provisional, reason, "
                                "statistics, trace)")


def test_suite_file_with_a_bad_setting(tmp_path):
    path, lines = edited(REPO_ROOT / "suite.yaml", tmp_path,
                         ("cpu25:\n    loads: {cpu: {percent: 25}}",
                          "cpu25:\n    loads: {cpu: {percent: all}}"))
    with pytest.raises(SuiteFileError) as error:
        load_suite(path)
    assert str(error.value) == (f"{path}:{line_with(lines, 'percent: all')}: scenarios.cpu25: "
                                "load 'cpu': percent must be int, got 'all'")


def test_virtual_rack_config_with_a_bad_outlet(tmp_path):
    path, lines = edited(ENV / "vlab.yaml", tmp_path, ("outlet: 2", "outlet: two"))
    with pytest.raises(YamlFileError) as error:
        load_config(path)
    assert str(error.value) == (f"{path}:{line_with(lines, 'outlet: two')}: 'outlet' must be "
                                "a positive integer")


# -- unknown names list the valid ones --------------------------------------------------------

def test_unknown_names_list_the_valid_ones():
    thresholds = load_thresholds()
    suite = load_suite()
    rack = load_config(ENV / "vlab.yaml")
    cases = [
        (lambda: thresholds.lookup("imx8", "rt", "idle"), "no board 'imx8' (valid: imx6q, "),
        (lambda: thresholds.lookup("imx6q", "preempt-lazy", "idle"),
         "board 'imx6q' has no flavour 'preempt-lazy' (valid: "),
        (lambda: thresholds.lookup("imx6q", "rt", "cpu99"),
         "unknown scenario 'cpu99' (valid: idle, "),
        (lambda: suite.scenario("cpu99"), "no scenario 'cpu99' (valid: idle, "),
        (lambda: show(REPO_ROOT / "thresholds.yaml", REPO_ROOT / "suite.yaml", "imx6q", None,
                      "pi-stress", None), "no scenario or rt-test 'pi-stress' (valid: idle, "),
        (lambda: board_model("bbb"), "unknown board 'bbb'; valid boards: imx6q, rpi3"),
        (lambda: board_model("rpi3").kernel_package("preempt"),
         "unknown flavour 'preempt' for board rpi3; valid flavours: std, rt"),
        (lambda: rack.board("bbb-01"), "no place 'bbb-01' (valid: imx6q-01, rpi3-01, imx6q-02)"),
    ]
    for call, expected in cases:
        with pytest.raises(ValueError) as error:
            call()
        assert expected in str(error.value)
    # rtlab thresholds show --scenario takes the rt-tests too, and says so
    with pytest.raises(ValueError, match=r"\(valid: idle, .*, pi_stress, "):
        cases[4][0]()


def test_the_virtual_racks_sd_mux_names_the_valid_places():
    rack = SimpleNamespace(by_place={"rpi3-01": None, "imx6q-01": None})
    request = SimpleNamespace(match_info={"place": "bbb-01"})
    with pytest.raises(web.HTTPNotFound) as error:
        VirtualRack._slot_by_place(rack, request)  # type: ignore[arg-type]
    assert error.value.text == "no place bbb-01 (valid: imx6q-01, rpi3-01)\n"


# -- image manifest ----------------------------------------------------------------------

def test_a_built_image_manifest_is_read(tmp_path):
    write_json(tmp_path / "manifest.json", good_manifest())
    manifest = image_manifest_for(str(tmp_path / "sdcard.img"))
    assert manifest["flavour"] == "rt"
    assert manifest["kernel"]["release"] == "6.1.0-rt-armmp"


def test_an_image_without_a_manifest_has_none(tmp_path):
    assert image_manifest_for(str(tmp_path / "sdcard.img")) == {}


def test_manifest_with_a_wrong_type_names_file_line_and_expectation(tmp_path):
    manifest = good_manifest()
    manifest["kernel"]["release"] = 6
    path = write_json(tmp_path / "manifest.json", manifest)
    line = path.read_text().splitlines().index('    "release": 6,') + 1
    with pytest.raises(JsonFileError) as error:
        read_image_manifest(path)
    assert str(error.value) == (f"{path}:{line}: image manifest 'kernel' 'release' must be "
                                "a string, got 6")


@pytest.mark.parametrize(("change", "expected"), [
    (lambda m: m.pop("flavour"), ":1: image manifest lacks 'flavour' (expected a string)"),
    (lambda m: m.update(flavour=""), ":5: image manifest 'flavour' must be a non-empty string"),
    (lambda m: m.update(schema=2), ":2: image manifest schema 2, expected 1"),
    (lambda m: m.update(kernel=[]), ":7: image manifest 'kernel' must be an object, got an "
                                    "array"),
    (lambda m: m["sd_image"].update(sha256="x"), "'sha256' must be 64 lowercase hex digits"),
    (lambda m: m["kernel"].update(hz=True), "'kernel' 'hz' must be an integer or null, got "
                                            "true"),
])
def test_manifest_refusals(tmp_path, change, expected):
    manifest = good_manifest()
    change(manifest)
    path = write_json(tmp_path / "manifest.json", manifest)
    with pytest.raises(JsonFileError, match=str(path)) as error:
        read_image_manifest(path)
    assert expected in str(error.value)


def test_manifest_that_is_not_json_names_the_line(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text('{\n  "schema": 1,\n  "board": imx6q\n}\n')
    with pytest.raises(JsonFileError, match=rf"^{path}:3: invalid image manifest, not JSON"):
        image_manifest_for(str(tmp_path / "sdcard.img"))


def test_manifest_with_a_key_twice_names_the_second(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text('{\n  "flavour": "rt",\n  "flavour": "std"\n}\n')
    with pytest.raises(JsonFileError, match=rf"^{path}:3: .*duplicate key 'flavour'"):
        read_image_manifest(path)


# -- result record -----------------------------------------------------------------------

def good_record() -> dict:
    return {"schema": SCHEMA, "case": "tests/target/test_latency.py::test_latency[cpu100]",
            "started": "2026-11-22T08:56:51+00:00", "finished": "2026-11-22T08:57:51+00:00",
            "verdict": "fail", "message": "CPU1 max 90 µs > max_us 80 µs",
            "cpus": [{"cpu": 0, "thread": 0, "samples": 1000, "min_us": 3, "avg_us": 5.5,
                      "max_us": 90},
                     {"cpu": 1, "thread": 1, "samples": 0, "min_us": None, "avg_us": None,
                      "max_us": None, "no_wakeup": True}],
            "ci": {}, "kind": "cyclictest"}


def test_a_written_record_reads_back(tmp_path):
    record = good_record()
    record.pop("schema")
    path = write_record(tmp_path, record)
    assert read_record(path)["cpus"][1]["max_us"] is None


def test_record_with_an_unknown_verdict_names_file_line_and_the_valid_ones(tmp_path):
    record = good_record()
    record["verdict"] = "ok"
    path = write_json(tmp_path / "r.json", record)
    line = path.read_text().splitlines().index('  "verdict": "ok",') + 1
    with pytest.raises(JsonFileError) as error:
        read_record(path)
    assert str(error.value) == (f"{path}:{line}: result record 'verdict' 'ok', expected one "
                                "of: pass, fail, error, skipped")


@pytest.mark.parametrize(("change", "expected"), [
    (lambda r: r.update(schema="rtlab.result/9"),
     ":2: result record schema 'rtlab.result/9', expected one of rtlab.result/1, "
     "rtlab.result/2, rtlab.result/3"),
    (lambda r: r.pop("case"), ":1: result record lacks 'case' (expected a string)"),
    (lambda r: r.update(message=None), ":7: result record 'message' must be a string, got "
                                       "null"),
    (lambda r: r.update(cpus={}), ":8: result record 'cpus' must be an array, got an object"),
    (lambda r: r["cpus"].append(3), ":26: result record 'cpus'[2] must be an object"),
    (lambda r: r["cpus"][0].update(max_us="90"),
     ":15: result record 'cpus'[0] 'max_us' must be a number or null, got \"90\""),
])
def test_record_refusals(tmp_path, change, expected):
    record = good_record()
    change(record)
    path = write_json(tmp_path / "r.json", record)
    with pytest.raises(JsonFileError) as error:
        read_record(path)
    assert str(error.value) == f"{path}{expected}"


def test_record_that_is_not_an_object(tmp_path):
    path = write_json(tmp_path / "r.json", [good_record()])
    with pytest.raises(JsonFileError, match=rf"^{path}:1: not a result record: expected an "
                                            "object"):
        read_record(path)


# -- labgrid environment file --------------------------------------------------------------

def edited(source: Path, tmp_path: Path, *edits: tuple[str, str]) -> tuple[Path, list[str]]:
    """A copy of ``source`` with text replaced, and its lines."""
    text = source.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / source.name
    path.write_text(text)
    return path, text.splitlines()


def line_with(lines: list[str], text: str) -> int:
    return next(number for number, line in enumerate(lines, 1) if text in line)


def test_env_file_with_a_misspelt_driver_names_the_line_and_close_matches(tmp_path):
    path, lines = edited(ENV / "virtual.yaml", tmp_path, ("ShellDriver:", "ShelDriver:"))
    assert check_env_file(path) == [
        f"{path}:{line_with(lines, 'ShelDriver')}: target 'main' drivers: unknown driver "
        "class 'ShelDriver' (did you mean: ShellDriver, SerialDriver, SSHDriver?)"]


@pytest.mark.parametrize(("edit", "at", "expected"), [
    (("login_timeout: 180", "login_timout: 180"), "login_timout",
     "unknown parameter 'login_timout' for ShellDriver (expected one of: "),
    # the files name no image (LG_IMAGE does, when the strategy flashes); a lab's file
    # that has `images:` must name the strategy's
    (("        image: sdcard\n", '        image: sdcard\nimages:\n  card: /srv/card.img\n'),
     "images:", "'images' lacks 'sdcard', the SD card image RTLabStrategy flashes (has: card)"),
    (('"$LG_PLACE"', '"$PLACE"'), "$PLACE",
     "!template '$PLACE': expected only $LG_* variables and $BASE"),
    (("      RTLabStrategy:\n        image: sdcard\n", ""), "NetworkPDUDriver:",
     "target 'main' drivers: no RTLabStrategy"),
    (("imports:\n  - rtlab.lab\n", ""), "options:",
     "NetworkPDUDriver, RTLabStrategy, VirtualSDMuxDriver, VirtualStorageDriver need(s) "
     "'imports: [rtlab.lab]'"),
    (("  main:", "  mian:"), "targets:", "'targets' must be a mapping with the target 'main'"),
    (("    drivers:", "    driver:"), "driver:", "unknown key 'driver' in target 'main' "
                                                "(expected one of: resources, drivers, "),
    (("RemotePlace:", "RemotPlace:"), "RemotPlace",
     "unknown resource class 'RemotPlace' (did you mean: RemotePlace"),
    (("SerialDriver: {}", "SerialDriver:"), "SerialDriver",
     "SerialDriver must be a mapping of parameters ({} for none)"),
    (('name: !template "$LG_PLACE"', 'name: !tempate "$LG_PLACE"'), "!tempate",
     "unknown tag !tempate (expected !template or none)"),
])
def test_env_file_refusals(tmp_path, edit, at, expected):
    path, lines = edited(ENV / "virtual.yaml", tmp_path, edit)
    # a misspelt section key also leaves the section missing: the first problem is the cause
    problems = check_env_file(path)
    assert len(problems) <= 2, problems
    assert problems[0].startswith(f"{path}:{line_with(lines, at)}: ")
    assert expected in problems[0]


def test_env_file_with_broken_yaml_names_the_line(tmp_path):
    path, lines = edited(ENV / "rack.yaml", tmp_path, ("      SerialDriver: {}",
                                                       "      SerialDriver: {"))
    # the parser notices on the line after the unclosed brace
    [problem] = check_env_file(path)
    assert problem.startswith(f"{path}:{line_with(lines, 'login_prompt')}: invalid YAML: "
                              "expected ',' or '}'")


# -- labgrid exporter file -------------------------------------------------------------------

def test_exporter_file_with_a_misspelt_class_names_the_source_line(tmp_path):
    source = ENV / "exporter" / "labhost-01.yaml"
    path, lines = edited(source, tmp_path,
                         ("imx6q-02:\n  USBSerialPort:", "imx6q-02:\n  USBSerialPrt:"))
    [problem] = check_exporter_file(path)
    assert problem.startswith(f"{path}:{line_with(lines, 'USBSerialPrt')}: imx6q-02/USBSerialPrt: "
                              "unknown resource class 'USBSerialPrt' (did you mean: "
                              "USBSerialPort, ")


@pytest.mark.parametrize(("edit", "at", "expected"), [
    (('host: "{{ pdu }}"\n    index: 3', 'host: "{{ pdu }}"\n    indx: 3'), "indx",
     "rpi3-01/NetworkPowerPort: unknown parameter 'indx' for NetworkPowerPort (expected one "
     "of: "),
    (('host: "{{ pdu }}"\n    index: 1', 'host: "{{ pdu }"\n    index: 1'), "{{ pdu }\"",
     "invalid Jinja2 template: unexpected '}'"),
    (("rpi3-02:\n", "rpi3-02:\n  USBPowerPort:\n"),
     "USBPowerPort", "rpi3-02/USBPowerPort: expected a mapping of parameters (the exporter "
                     "skips an empty entry)"),
])
def test_exporter_file_refusals(tmp_path, edit, at, expected):
    path, lines = edited(ENV / "exporter" / "labhost-01.yaml", tmp_path, edit)
    [problem] = check_exporter_file(path)
    assert problem.startswith(f"{path}:{line_with(lines, at)}: ")
    assert expected in problem


# -- shell commands sent to the board quote what the lab or a test supplies ----------------

HOSTILE = "x; touch pwned"


def test_a_hostile_program_argument_reaches_the_board_quoted():
    script = window_script(["cyclictest", f"--json=/tmp/{HOSTILE}"], [], 4, 10)
    assert f"cyclictest '--json=/tmp/{HOSTILE}'" in script
    assert f" {HOSTILE}" not in script.replace(f"'--json=/tmp/{HOSTILE}'", "")


def test_hostile_place_tags_reach_the_board_quoted():
    traffic = HostTraffic(ping_address=f"10.0.2.2; {HOSTILE}", stream_host="127.0.0.1",
                          stream_port=15001, board_port=f"5001; {HOSTILE}")  # type: ignore[arg-type]
    script = NetworkLoad(ping_bytes=1400, traffic=traffic).script(4, 10)
    assert shlex.quote(f"10.0.2.2; {HOSTILE}") in script
    assert shlex.quote(f"5001; {HOSTILE}") in script
    # and so once more inside the window script, which runs the load under sh -c
    window = window_script(["true"], [StartedLoad(0, NetworkLoad(1400, traffic))], 4, 10)
    assert f"setsid sh -c {shlex.quote(script)} " in window


def test_a_hostile_disk_load_folder_is_a_folder_name_to_the_shell(tmp_path):
    folder = tmp_path / HOSTILE
    folder.mkdir()
    script = DiskLoad(dir=str(folder), block_kib=1, blocks=1).script(1, 1)
    done = subprocess.run(["sh", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout
    assert not (tmp_path / "pwned").exists() and not (folder / "pwned").exists()


# -- campaign file -------------------------------------------------------------------------

CAMPAIGNS = REPO_ROOT / "campaigns"


@pytest.mark.parametrize(("edit", "at", "expected"), [
    # an unknown flavour, board and scenario, and a typo in a key: each named with its line
    (("    flavour: preempt-rt\n    fragments:", "    flavour: preempt-rtt\n    fragments:"),
     "preempt-rtt", "variants.preempt-rt-hardened: unknown flavour 'preempt-rtt' (valid: "
                    "preempt-none, preempt-voluntary, preempt, preempt-rt, "
                    "preempt-rt-hardened)"),
    (("boards: [imx6q, rpi3]", "boards: [imx6q, rpi4]"), "boards:",
     "unknown board 'rpi4' (valid: imx6q, rpi3)"),
    (("scenarios: [idle, cpu25,", "scenarios: [idle, cpu20,"), "scenarios:",
     "unknown scenario 'cpu20' (valid: idle, cpu25, "),
    (("intervals_us: [100, 1000]", "interval_us: [100, 1000]"), "interval_us:",
     "unknown key 'interval_us' (expected one of: description, variants, boards, "
     "scenarios, intervals_us, "),
    (("    fragments: [hardening.config]", "    fragmnets: [hardening.config]"), "fragmnets",
     "variants.preempt-rt-hardened: unknown key 'fragmnets' (expected one of: description, "
     "flavour, fragments, debian, thresholds)"),
    (("fragments: [hardening.config]", "fragments: [hardenning.config]"), "hardenning",
     "variants.preempt-rt-hardened: no fragment 'hardenning.config' in "),
    (("    thresholds: preempt-rt-hardened", "    thresholds: preempt-rt-hard"),
     "thresholds: preempt-rt-hard", "variants.preempt-rt-hardened: no limits for flavour "
                          "'preempt-rt-hard' in thresholds.yaml on every board"),
    (("    candidate: preempt-rt-hardened", "    candidate: preempt-rt-hardend"),
     "preempt-rt-hardend", "compare[0]: unknown variant 'preempt-rt-hardend' (valid: "
                           "preempt-rt, preempt-rt-hardened)"),
    (("  preempt-rt:\n    description", "  rt:\n    description"), "  rt:",
     "variant name 'rt' is the pipeline's own series of that name: call it e.g. 'debian-rt'"),
    (("    flavour: preempt-rt\n    fragments:", "    debian: rt\n    flavour: preempt-rt\n"
      "    fragments:"), "preempt-rt-hardened:",
     "variants.preempt-rt-hardened: give either 'flavour' (a kernel built from kernel/) or "
     "'debian' (Debian's kernel package)"),
    (("duration_s: 3600", "duration_s: 1h"), "duration_s:",
     "duration_s must be an integer >= 1, got '1h'"),
])
def test_campaign_file_refusals(tmp_path, edit, at, expected):
    from rtlab.campaign.spec import CampaignError, load_campaign

    path, lines = edited(CAMPAIGNS / "hardening.yaml", tmp_path, edit)
    with pytest.raises(CampaignError) as error:
        load_campaign(path)
    assert str(error.value).startswith(f"{path}:{line_with(lines, at)}: "), str(error.value)
    assert expected in str(error.value)


def test_campaign_file_with_broken_yaml_names_the_line(tmp_path):
    from rtlab.campaign.spec import CampaignError, load_campaign

    path, lines = edited(CAMPAIGNS / "debian.yaml", tmp_path,
                         ("scenarios: [idle, cpu100, hackbench]", "scenarios: [idle, cpu100"))
    with pytest.raises(CampaignError, match=rf"^{path}:\d+: invalid YAML: "):
        load_campaign(path)


def test_an_unknown_campaign_name_lists_the_campaigns():
    from rtlab.campaign.spec import CampaignError, load_campaign

    with pytest.raises(CampaignError, match=r"no campaign 'hardenning' in campaigns \(there "
                                            r"are: debian, hardening, preemption\)"):
        load_campaign("hardenning")


def test_a_variant_in_a_manifest_or_record_is_checked(tmp_path):
    manifest = good_manifest()
    manifest["variant"] = {"name": "preempt-rt-hardened", "campaign": "hardening",
                           "source": "build", "kernel_flavour": "preempt-rt",
                           "fragments": ["hardening.config"], "debian": None,
                           "thresholds": "preempt-rt-hardened"}
    path = write_json(tmp_path / "manifest.json", manifest)
    assert read_image_manifest(path)["variant"]["fragments"] == ["hardening.config"]
    manifest["variant"]["fragments"] = "hardening.config"
    path = write_json(tmp_path / "manifest.json", manifest)
    line = path.read_text().splitlines().index('    "fragments": "hardening.config",') + 1
    with pytest.raises(JsonFileError) as error:
        read_image_manifest(path)
    assert str(error.value) == (f"{path}:{line}: image manifest 'variant' 'fragments' must "
                                "be an array, got \"hardening.config\"")
    record = good_record()
    record["variant"] = {**manifest["variant"], "fragments": [], "thresholds": ""}
    path = write_json(tmp_path / "r.json", record)
    line = path.read_text().splitlines().index('    "thresholds": ""') + 1
    with pytest.raises(JsonFileError) as error:
        read_record(path)
    assert str(error.value) == (f"{path}:{line}: result record 'variant' 'thresholds' must be "
                                "a non-empty string")
