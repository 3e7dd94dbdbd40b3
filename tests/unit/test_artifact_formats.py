"""rtlab.artifacts: each file between the stages read as its typed class, the formats older
versions wrote migrated on read, and what a reader cannot use refused naming the file."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.artifacts.kernel_info import (
    KernelInfo,
    KernelInfoError,
    read_kernel_info,
    write_kernel_info,
)
from rtlab.artifacts.manifest import load_image_manifest
from rtlab.artifacts.record import (
    SCHEMA,
    UNKNOWN_KIND,
    load_record,
    read_record,
    record_of,
    write_record,
)
from rtlab.store import ingest_folder, open_store
from rtlab.store.models import Case
from rtlab.util.jsonfile import JsonFileError

DATA = Path(__file__).parents[1] / "data"
# result records as rtlab wrote them on 2026-11-23 (rtlab.result/2)
V2_RECORDS = DATA / "records" / "vlab-imx6q-rt"


def write_json(path: Path, document: dict) -> Path:
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


# -- result records ----------------------------------------------------------------------

def test_records_of_format_2_load_with_the_kind_their_contents_show():
    kinds = {path.name.split("--")[0]: load_record(path)
             for path in sorted(V2_RECORDS.glob("*.json"))}
    assert {name: (r.kind, r.functional) for name, r in kinds.items()} == {
        "qemu-imx6q_rt_cpu100_1000us": ("cyclictest", False),
        "qemu-imx6q_rt_idle_1000us": ("cyclictest", False),
        "qemu-imx6q_rt_pi_stress": ("rt-test", True),
        "qemu-imx6q_rt_ptsematest": ("rt-test", False),
    }
    record = kinds["qemu-imx6q_rt_cpu100_1000us"]
    assert record.read_as == "rtlab.result/2"
    assert record.document["schema"] == SCHEMA
    assert record.document["migrated_from"] == "rtlab.result/2"
    assert record.name == "qemu-imx6q/rt/cpu100/1000us"
    # nothing of the record is lost in the migration
    original = json.loads(next(V2_RECORDS.glob("qemu-imx6q_rt_cpu100_1000us*")).read_text())
    assert {k: v for k, v in record.document.items()
            if k not in ("schema", "kind", "migrated_from")} == \
        {k: v for k, v in original.items() if k != "schema"}


@pytest.mark.parametrize(("facts", "kind"), [
    ({"name": "b/f/idle/1000us"}, "cyclictest"),
    ({"name": "b/f/oslat"}, "rt-test"),
    # stopped before it was named: its pytest node says which suite file it was
    ({"case": "tests/target/test_rttests.py::test_rt_tool[oslat]"}, "rt-test"),
    ({"case": "tests/target/test_latency.py::test_latency[idle-1000]"}, "cyclictest"),
    ({"case": "elsewhere.py::test_x"}, UNKNOWN_KIND),
])
def test_a_record_of_format_2_without_figures_is_placed_by_name_or_node(tmp_path, facts,
                                                                       kind):
    record = {"schema": "rtlab.result/2", "case": "tests/x.py::t", "verdict": "error",
              "message": "no login prompt", "started": "2026-11-23T10:00:00+00:00",
              **facts}
    assert load_record(write_json(tmp_path / "r.json", record)).kind == kind


def test_a_record_of_format_1_reads_its_load_as_the_scenario(tmp_path):
    path = write_json(tmp_path / "r.json", {
        "schema": "rtlab.result/1", "case": "tests/target/test_latency.py::test_latency[x]",
        "name": "imx6q/rt/cpu100/1000us", "load": "cpu100", "interval_us": 1000,
        "verdict": "pass", "message": "", "started": "2026-11-20T10:00:00+00:00",
        "cpus": [{"cpu": 0, "samples": 10, "min_us": 5, "avg_us": 7, "max_us": 30}]})
    record = load_record(path)
    assert (record.kind, record.read_as) == ("cyclictest", "rtlab.result/1")
    assert record.document["scenario"] == "cpu100" and "load" not in record.document


def test_a_record_of_format_3_must_say_its_kind(tmp_path):
    record = {"schema": SCHEMA, "case": "c", "verdict": "pass", "message": "",
              "started": "2026-11-26T10:00:00+00:00"}
    path = write_json(tmp_path / "missing.json", record)
    with pytest.raises(JsonFileError, match=rf"^{path}:1: result record lacks 'kind'"):
        load_record(path)
    path = write_json(tmp_path / "other.json", {**record, "kind": "latency"})
    line = path.read_text().splitlines().index('  "kind": "latency"') + 1
    with pytest.raises(JsonFileError) as error:
        load_record(path)
    assert str(error.value) == (f"{path}:{line}: result record 'kind' 'latency', expected one "
                                "of: cyclictest, rt-test")


def test_a_record_is_written_with_its_kind_and_only_with_one(tmp_path):
    with pytest.raises(ValueError, match="kind None, expected one of cyclictest, rt-test"):
        write_record(tmp_path, {"case": "c", "verdict": "pass", "message": "",
                                "started": "2026-11-26T10:00:00+00:00"})
    path = write_record(tmp_path, {"kind": "rt-test", "case": "c", "name": "b/f/oslat",
                                   "verdict": "pass", "message": "",
                                   "started": "2026-11-26T10:00:00+00:00"})
    assert read_record(path)["schema"] == SCHEMA
    assert load_record(path).kind == "rt-test" and load_record(path).read_as == SCHEMA
    with pytest.raises(ValueError, match="kind 'latency'"):
        record_of({"kind": "latency", "case": "c", "verdict": "pass",
                   "started": "2026-11-26T10:00:00+00:00"})


def test_the_store_files_old_and_new_records_by_their_kind(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(V2_RECORDS, results)
    write_record(results, {"kind": "cyclictest", "case": "n", "name": "b/f/idle/100us",
                           "board": "b", "flavour": "f", "verdict": "error",
                           "message": "no login prompt", "run_id": "r3",
                           "started": "2026-11-26T10:00:00+00:00"})
    store = open_store(f"sqlite:///{tmp_path / 'results.db'}")
    try:
        ingest_folder(store, results)
        with store.session() as session:
            kinds = {case.name: case.kind for case in session.query(Case)}
    finally:
        store.close()
    assert kinds == {"qemu-imx6q/rt/cpu100/1000us": "cyclictest",
                     "qemu-imx6q/rt/idle/1000us": "cyclictest",
                     "qemu-imx6q/rt/pi_stress": "functional",
                     "qemu-imx6q/rt/ptsematest": "rt-test",
                     "b/f/idle/100us": "cyclictest"}


def test_the_store_refuses_a_record_of_no_known_kind_naming_it(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    path = write_json(results / "r.json", {
        "schema": SCHEMA, "kind": "benchmark", "case": "c", "verdict": "pass",
        "message": "", "started": "2026-11-26T10:00:00+00:00"})
    store = open_store(f"sqlite:///{tmp_path / 'results.db'}")
    try:
        with pytest.raises(JsonFileError, match=rf"^{path}:3: result record 'kind' "
                                                "'benchmark'"):
            ingest_folder(store, results)
    finally:
        store.close()


# -- kernel.json ---------------------------------------------------------------------------

def debian_info(**changes) -> dict:
    return {"schema": "rtlab.kernel/2", "source": "debian", "board": "imx6q", "flavour": "rt",
            "package": "linux-image-6.1.0-1-rt-armmp", "version": "6.1.1-1",
            "deb": "linux-image.deb", "sha256": "0" * 64, "release": "6.1.0-1-rt-armmp",
            "preemption": "PREEMPT_RT", "hz": 250, **changes}


def test_kernel_json_of_format_1_is_a_debian_kernel(tmp_path):
    document = debian_info(schema="rtlab.kernel/1")
    del document["source"]
    write_json(tmp_path / "kernel.json", document)
    info = read_kernel_info(tmp_path)
    assert (info.source, info.built, info.deb) == ("debian", False, "linux-image.deb")
    # written back as the current format
    write_kernel_info(tmp_path, info)
    assert json.loads((tmp_path / "kernel.json").read_text())["schema"] == "rtlab.kernel/2"


def test_kernel_json_round_trips_and_keeps_what_it_does_not_know(tmp_path):
    write_json(tmp_path / "kernel.json", debian_info(signed_by="lab key"))
    info = read_kernel_info(tmp_path)
    stamped = info.stamped(action="debian", reason="campaign x: variant y",
                           variant={"name": "y", "campaign": "x", "thresholds": "rt",
                                    "source": "debian", "fragments": [],
                                    "kernel_flavour": None, "debian": "rt"})
    write_kernel_info(tmp_path, stamped)
    again = read_kernel_info(tmp_path)
    assert again == stamped
    assert again.extra == {"signed_by": "lab key"}
    assert again.provided == {"action": "debian", "reason": "campaign x: variant y"}


@pytest.mark.parametrize(("document", "message"), [
    (debian_info(schema="rtlab.kernel/9"), r":2: schema 'rtlab.kernel/9', expected one of "),
    (debian_info(source="vendor"), r":3: 'source' must be one of debian, build, got 'vendor'"),
    (debian_info(sha256=""), r":9: 'sha256' must be a non-empty string"),
    (debian_info(source="build"), r":1: 'cmdline' must be a non-empty string"),
    (debian_info(hz="250"), r":12: kernel info 'hz' must be an integer or null"),
])
def test_kernel_json_that_says_too_little_is_refused_naming_it(tmp_path, document, message):
    path = write_json(tmp_path / "kernel.json", document)
    with pytest.raises(KernelInfoError, match=rf"^{path}{message}"):
        read_kernel_info(tmp_path)


def test_a_folder_without_kernel_json_is_refused_naming_it(tmp_path):
    with pytest.raises(KernelInfoError, match=rf"^{tmp_path / 'kernel.json'}"):
        read_kernel_info(tmp_path)
    assert KernelInfo(board="b", flavour="rt", source="debian", package="p", version="1",
                      sha256="0").as_dict()["schema"] == "rtlab.kernel/2"


# -- the image manifest ----------------------------------------------------------------------

def test_the_image_manifest_is_read_as_its_class(tmp_path):
    path = write_json(tmp_path / "manifest.json", {
        "schema": 1, "image_id": "0123456789abcdef", "board": "imx6q", "flavour": "rt",
        "kernel": {"package": "p", "version": "1", "release": "r"},
        "sd_image": {"file": "sdcard.img", "sha256": "a" * 64},
        "variant": {"name": "preempt-rt-hardened", "campaign": "hardening",
                    "thresholds": "rt", "source": "build", "fragments": ["hardening.config"],
                    "kernel_flavour": "preempt-rt", "debian": None}})
    manifest = load_image_manifest(path)
    assert (manifest.board, manifest.flavour, manifest.series_flavour) == (
        "imx6q", "rt", "preempt-rt-hardened")
    assert manifest.sd_image_sha256 == "a" * 64
    assert manifest.document["kernel"] == manifest.kernel


def test_a_suite_case_that_does_not_say_its_kind_is_refused_before_it_runs(tmp_path):
    (tmp_path / "test_unmarked.py").write_text("def test_x():\n    pass\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "rtlab.pytestplugin.hooks", "--rt-results", str(tmp_path / "results"),
         str(tmp_path / "test_unmarked.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert ("test_unmarked.py::test_x: no @pytest.mark.rtlab_kind(kind) with kind one of "
            "cyclictest, rt-test") in done.stdout + done.stderr
    assert not (tmp_path / "results").exists()
