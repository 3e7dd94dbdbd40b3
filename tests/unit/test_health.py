"""Board health: the counting rules, the record files, the table and the labgrid place."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtlab.lab.health import (
    ERRORS_TAG_KEY,
    KEEP_EVENTS,
    RECENT_EVENTS,
    SCHEMA,
    TAG_KEY,
    HealthBook,
    HealthEvent,
    PlaceHealth,
    PlaceInfo,
    PlaceUnhealthy,
    SharedHealth,
    ensure_schedulable,
    format_health,
    health_comment,
    mark_place,
    parse_place_show,
    place_health_tag,
    place_info,
    record_on_place,
    run_event,
    shared_health,
)
from rtlab.util.paths import health_dir
from tests.ports import free_port

PLACE = "imx6q-01"
BIN = Path(sys.executable).parent
# the virtual rack's ports: never listen on them


def event(outcome: str, kind: str = "run", minute: int = 0, cause: str = "",
          place: str = PLACE) -> HealthEvent:
    return HealthEvent(f"2026-11-23T10:{minute:02d}:00+00:00", place, kind, outcome,
                       cause or outcome, None)


def record_all(book: HealthBook, *events: HealthEvent) -> PlaceHealth:
    health = book.state(PLACE)
    for item in events:
        health = book.record(item)
    return health


@pytest.fixture
def book(tmp_path) -> HealthBook:
    return HealthBook(tmp_path / "health", unhealthy_after=3)


# --- counting --------------------------------------------------------------------------

def test_unknown_place_is_healthy_without_history(book):
    assert book.state("nowhere") == PlaceHealth("nowhere", True, 0, None, ())
    assert book.places() == []


def test_n_infrastructure_errors_in_a_row_make_a_place_unhealthy(book):
    health = record_all(book, event("infrastructure-error", minute=1),
                        event("infrastructure-error", minute=2))
    assert health.healthy and health.consecutive_errors == 2
    health = book.record(event("infrastructure-error", minute=3, cause="boot timed out"))
    assert not health.healthy
    assert health.consecutive_errors == 3
    assert health.marked_unhealthy_at == "2026-11-23T10:03:00+00:00"
    assert book.state(PLACE) == health
    assert book.places() == [PLACE]


def test_a_latency_fail_is_a_working_board_and_resets_the_streak(book):
    health = record_all(book, event("infrastructure-error", minute=1),
                        event("infrastructure-error", minute=2),
                        event("latency-fail", minute=3),
                        event("infrastructure-error", minute=4),
                        event("infrastructure-error", minute=5))
    assert health.healthy and health.consecutive_errors == 2


def test_an_ok_run_resets_the_streak(book):
    health = record_all(book, event("infrastructure-error", minute=1),
                        event("infrastructure-error", minute=2), event("ok", minute=3),
                        event("infrastructure-error", minute=4))
    assert health.healthy and health.consecutive_errors == 1


def test_only_a_passing_check_heals(book):
    record_all(book, *(event("infrastructure-error", minute=m) for m in (1, 2, 3)))
    # further errors, failing checks and even a working run leave it unhealthy
    health = record_all(book, event("infrastructure-error", minute=4),
                        event("infrastructure-error", "check", minute=5),
                        event("ok", "run", minute=6), event("latency-fail", "run", minute=7))
    assert not health.healthy
    assert health.marked_unhealthy_at == "2026-11-23T10:03:00+00:00"
    assert health.consecutive_errors == 0
    assert health.reason() == ("UNHEALTHY since 2026-11-23T10:03:00+00:00: infrastructure "
                               "errors; last: infrastructure-error. "
                               f"Run: rtlab lab check {PLACE}")
    health = book.record(event("ok", "check", minute=8))
    assert health.healthy and health.consecutive_errors == 0
    assert health.marked_unhealthy_at is None


def test_a_check_that_measures_a_latency_fail_heals(book):
    record_all(book, *(event("infrastructure-error", minute=m) for m in (1, 2, 3)))
    assert book.record(event("latency-fail", "check", minute=4)).healthy


def test_failing_checks_on_a_healthy_place_count(book):
    health = record_all(book, *(event("infrastructure-error", "check", minute=m)
                                for m in (1, 2, 3)))
    assert not health.healthy


def test_unhealthy_after_is_configurable(tmp_path):
    book = HealthBook(tmp_path, unhealthy_after=1)
    assert not book.record(event("infrastructure-error")).healthy
    with pytest.raises(ValueError):
        HealthBook(tmp_path, unhealthy_after=0)


def test_places_are_kept_apart(book):
    book.record(event("infrastructure-error", place="rpi3-01"))
    assert book.state(PLACE).recent == ()
    assert book.places() == ["rpi3-01"]


def test_the_count_goes_on_from_the_place_s_shared_state(book):
    # another runner counted two errors: this runner's third makes the place unhealthy
    book.record(event("ok", minute=1))
    health = book.record(event("infrastructure-error", minute=2),
                         SharedHealth(True, 2, None))
    assert not health.healthy and health.consecutive_errors == 3
    assert health.marked_unhealthy_at == "2026-11-23T10:02:00+00:00"
    # another runner's check made it healthy again: this runner's error counts from zero
    health = book.record(event("infrastructure-error", minute=3), SharedHealth(True, 0, None))
    assert health.healthy and health.consecutive_errors == 1
    # marked unhealthy elsewhere: unhealthy here too, since the place's time
    health = book.record(event("ok", minute=4),
                         SharedHealth(False, 4, "2026-11-23T09:00:00+00:00"))
    assert not health.healthy and health.consecutive_errors == 0
    assert health.marked_unhealthy_at == "2026-11-23T09:00:00+00:00"
    # a place without the tags (never marked): this runner's own count stands
    health = book.record(event("infrastructure-error", minute=5), SharedHealth())
    assert not health.healthy and health.consecutive_errors == 1
    assert [e.outcome for e in book.state(PLACE).recent] == [
        "ok", "infrastructure-error", "infrastructure-error", "ok", "infrastructure-error"]


def test_shared_health_from_the_place():
    sick = PlaceHealth(PLACE, False, 3, "2026-11-23T10:03:00+00:00",
                       (event("infrastructure-error", cause="no login"),))
    info = PlaceInfo({TAG_KEY: "unhealthy", ERRORS_TAG_KEY: "3", "board": "imx6q"},
                     health_comment(sick, "virtual imx6q (QEMU)"))
    assert shared_health(info) == SharedHealth(False, 3, "2026-11-23T10:03:00+00:00")
    assert shared_health(PlaceInfo({TAG_KEY: "healthy", ERRORS_TAG_KEY: "1"})) == \
        SharedHealth(True, 1, None)
    assert shared_health(PlaceInfo()) == SharedHealth(None, None, None)
    # hand-made values that are no state or no count count as absent
    assert shared_health(PlaceInfo({TAG_KEY: "sick", ERRORS_TAG_KEY: "many"},
                                   "UNHEALTHY since yesterday: oops")) == SharedHealth()
    assert shared_health(PlaceInfo({TAG_KEY: "unhealthy"}, "broken by hand")) == \
        SharedHealth(False, None, None)


# --- events ----------------------------------------------------------------------------

def test_event_fields_are_checked_and_the_cause_made_one_line():
    made = HealthEvent.now(PLACE, "check", "ok", "flashed\n  booted\n")
    assert made.cause == "flashed booted"
    assert made.time.endswith("+00:00")
    for bad in (dict(kind="walk"), dict(outcome="fail"), dict(time="yesterday"),
                dict(time="2026-11-23T11:00:00+01:00"), dict(place="../etc/passwd")):
        fields = dict(time="2026-11-23T10:00:00+00:00", place=PLACE, kind="run",
                      outcome="ok") | bad
        with pytest.raises(ValueError):
            HealthEvent(**fields)


def test_run_event_from_result_records():
    fail = {"verdict": "fail", "message": "CPU1 max 90 > 50", "name": "imx6q/rt/idle/1000"}
    error = {"verdict": "error", "message": "board did not reach a shell", "case": "t[1]"}
    passed = {"verdict": "pass", "message": ""}
    got = run_event(PLACE, "run", 1, [passed, fail, error])
    assert (got.outcome, got.cause, got.case) == (
        "infrastructure-error", "board did not reach a shell", "t[1]")
    got = run_event(PLACE, "run", 1, [passed, fail])
    assert (got.outcome, got.case) == ("latency-fail", "imx6q/rt/idle/1000")
    assert run_event(PLACE, "check", 0, [passed]).outcome == "ok"
    assert run_event(PLACE, "run", 3, []).outcome == "infrastructure-error"


# --- files -----------------------------------------------------------------------------

def test_the_file_is_json_of_the_schema_and_has_no_leftovers(book):
    book.record(event("infrastructure-error", cause="SD mux: HTTP 500"))
    path = book.folder / f"{PLACE}.json"
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA
    assert data["events"][0]["cause"] == "SD mux: HTTP 500"
    assert sorted(p.name for p in book.folder.iterdir()
                  if not p.name.endswith(".lock")) == [f"{PLACE}.json"]


def test_a_failed_write_keeps_the_old_file(book, monkeypatch):
    book.record(event("ok", minute=1))
    path = book.folder / f"{PLACE}.json"
    before = path.read_text()

    def broken_dumps(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("rtlab.lab.health.json.dumps", broken_dumps)
    with pytest.raises(OSError):
        book.record(event("infrastructure-error", minute=2))
    assert path.read_text() == before


def test_history_keeps_the_last_events(book):
    for minute in range(KEEP_EVENTS + 7):
        book.record(HealthEvent(f"2026-11-23T{10 + minute // 60}:{minute % 60:02d}:00+00:00",
                                PLACE, "run", "ok", f"run {minute}"))
    data = json.loads((book.folder / f"{PLACE}.json").read_text())
    assert len(data["events"]) == KEEP_EVENTS
    assert data["events"][0]["cause"] == "run 7"
    recent = book.state(PLACE).recent
    assert len(recent) == RECENT_EVENTS
    assert [e.cause for e in recent] == [f"run {m}" for m in range(47, 57)]


def test_a_malformed_file_names_file_and_line(book):
    book.folder.mkdir(parents=True)
    path = book.folder / f"{PLACE}.json"
    path.write_text('{\n  "schema": "rtlab.health/1",\n  "healthy": tru\n}\n')
    with pytest.raises(ValueError, match=rf"{path}:3: not a health record"):
        book.state(PLACE)
    with pytest.raises(ValueError, match=rf"{path}:3:"):
        book.record(event("ok"))


def test_a_file_of_another_schema_is_refused(book):
    book.folder.mkdir(parents=True)
    path = book.folder / f"{PLACE}.json"
    path.write_text(json.dumps({"schema": "rtlab.result/2"}))
    with pytest.raises(ValueError, match=rf"{path}:1: not a health record of schema"):
        book.state(PLACE)


def test_a_bad_event_names_its_line(book):
    book.record(event("ok", minute=1))
    book.record(event("ok", minute=2))
    path = book.folder / f"{PLACE}.json"
    data = json.loads(path.read_text())
    data["events"][1]["outcome"] = "meh"
    path.write_text(json.dumps(data, indent=2))
    lines = path.read_text().splitlines()
    expected = next(n for n, line in enumerate(lines, 1) if '"meh"' in line)
    with pytest.raises(ValueError, match=rf"{path}:(\d+): events\[1\]") as raised:
        book.state(PLACE)
    line = int(str(raised.value).split(":")[1])
    assert line < expected and lines[line - 1].strip() == "{"


def test_health_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RTLAB_HEALTH_DIR", str(tmp_path / "h"))
    assert health_dir() == tmp_path / "h"
    monkeypatch.delenv("RTLAB_HEALTH_DIR")
    monkeypatch.setenv("RTLAB_CACHE", str(tmp_path / "cache"))
    assert health_dir() == tmp_path / "cache" / "health"


# --- rtlab lab health ------------------------------------------------------------------

def test_format_health_table_and_history(book):
    record_all(book, *(event("infrastructure-error", minute=m, cause="boot timed out")
                       for m in (1, 2, 3)))
    book.record(event("latency-fail", place="rpi3-01", minute=4, cause="max 120 > 100"))
    text = format_health(book.states())
    lines = text.splitlines()
    assert lines[0].split() == ["PLACE", "STATE", "ERRORS", "LAST", "EVENT", "OUTCOME",
                                "CAUSE"]
    assert lines[1].split()[:5] == [PLACE, "unhealthy", "3", "2026-11-23T10:03:00+00:00",
                                    "run"]
    assert lines[1].endswith("infrastructure-error  boot timed out")
    assert lines[2].split()[:2] == ["rpi3-01", "healthy"]
    assert (f"{PLACE}: UNHEALTHY since 2026-11-23T10:03:00+00:00: 3 infrastructure errors "
            f"in a row; last: boot timed out. Run: rtlab lab check {PLACE}") in lines
    assert "oldest first" not in text

    text = format_health(book.states(), history=True)
    assert f"{PLACE} (last 3 events, oldest first):" in text
    assert "  2026-11-23T10:01:00+00:00  run    infrastructure-error  boot timed out" in text
    assert format_health([]) == "no health records yet\n"


def test_format_health_shows_what_the_coordinator_holds_beside_this_runners_record(book):
    from rtlab.lab.health import SharedHealth

    # this runner saw one error; the coordinator counts three, two of them other runners'
    book.record(event("infrastructure-error", minute=1, cause="boot timed out"))
    book.record(event("ok", place="rpi3-01", minute=2))
    shared = {PLACE: SharedHealth(False, 3, "2026-11-23T10:05:00+00:00"), "rpi3-01": None}
    lines = format_health(book.states(), shared=shared).splitlines()
    assert lines[0].split()[:5] == ["PLACE", "STATE", "ERRORS", "COORDINATOR", "LAST"]
    assert lines[1].split()[:7] == [PLACE, "healthy", "1", "unhealthy,", "3", "in", "a"]
    # a coordinator that could not be asked says so rather than looking healthy
    assert lines[2].split()[:4] == ["rpi3-01", "healthy", "0", "unknown"]


# --- the labgrid place -----------------------------------------------------------------

SHOW = """Place 'imx6q-01':
  comment: virtual imx6q (QEMU)
  tags: board=imx6q, network=no NIC, sorry, rack=virtual, rtlab_health=unhealthy
  matches:
    vlab/imx6q-01/*
  acquired: None
  acquired resources:
  created: 2026-11-23 10:48:24.575520
  changed: 2026-11-23 10:48:26.570828
Matching resource 'tags' (vlab/imx6q-01/NetworkService/tags):
  tags: not=this
"""


def test_parse_place_show():
    info = parse_place_show(SHOW)
    assert info.comment == "virtual imx6q (QEMU)"
    assert info.tags == {"board": "imx6q", "network": "no NIC, sorry", "rack": "virtual",
                         "rtlab_health": "unhealthy"}
    assert parse_place_show("Place 'x':\n  matches:\n").tags == {}


def test_the_comment_keeps_what_the_place_had():
    sick = PlaceHealth(PLACE, False, 3, "2026-11-23T10:03:00+00:00",
                       (event("infrastructure-error", cause="no || login"),))
    marked = health_comment(sick, "virtual imx6q (QEMU)")
    assert marked == ("UNHEALTHY since 2026-11-23T10:03:00+00:00: 3 infrastructure errors "
                      f"in a row; last: no | login. Run: rtlab lab check {PLACE} || "
                      "virtual imx6q (QEMU)")
    assert health_comment(sick, marked) == marked
    assert health_comment(PlaceHealth(PLACE), marked) == "virtual imx6q (QEMU)"
    assert health_comment(PlaceHealth(PLACE), "") == ""
    assert health_comment(sick, "") == sick.reason().replace(" || ", " | ")



def client(address: str, place: str, *args: str) -> str:
    return subprocess.run([BIN / "labgrid-client", "-x", address, "-p", place, *args],
                          capture_output=True, text=True, check=True, timeout=60).stdout


@pytest.fixture
def coordinator(tmp_path):
    """A real labgrid coordinator of its own, its places file in a temporary folder."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    folder = tmp_path / "coordinator"
    folder.mkdir()
    with open(folder / "coordinator.log", "w") as log:
        proc = subprocess.Popen([BIN / "labgrid-coordinator", "--listen", address],
                                cwd=folder, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (folder / "coordinator.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "coordinator did not listen in 30 s"
                time.sleep(0.2)
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        assert proc.poll() is not None
        with pytest.raises(ProcessLookupError):
            os.kill(proc.pid, 0)


def test_mark_place_keeps_the_other_tags_and_the_comment(coordinator, book):
    client(coordinator, PLACE, "create")
    client(coordinator, PLACE, "set-tags", "board=imx6q", "net_ping=10.0.2.2",
           "net_stream=127.0.0.1:20601", "network=none here, sorry")
    client(coordinator, PLACE, "set-comment", "virtual imx6q (QEMU)")
    assert place_health_tag(coordinator, PLACE) is None
    others = {"board": "imx6q", "net_ping": "10.0.2.2", "net_stream": "127.0.0.1:20601",
              "network": "none here, sorry"}

    sick = record_all(book, *(event("infrastructure-error", minute=m, cause="login timeout")
                              for m in (1, 2, 3)))
    mark_place(coordinator, PLACE, sick)
    assert place_health_tag(coordinator, PLACE) == "unhealthy"
    info = place_info(coordinator, PLACE)
    assert info.tags == {**others, TAG_KEY: "unhealthy", ERRORS_TAG_KEY: "3"}
    assert info.comment == f"{sick.reason()} || virtual imx6q (QEMU)"
    assert info.comment.startswith("UNHEALTHY since 2026-11-23T10:03:00+00:00: 3 ")
    with pytest.raises(PlaceUnhealthy, match="login timeout"):
        ensure_schedulable(coordinator, PLACE)

    well = book.record(event("ok", "check", minute=4))
    mark_place(coordinator, PLACE, well)
    info = place_info(coordinator, PLACE)
    assert info.tags == {**others, TAG_KEY: "healthy", ERRORS_TAG_KEY: "0"}
    assert info.comment == "virtual imx6q (QEMU)"
    ensure_schedulable(coordinator, PLACE)


def test_place_health_tag_of_a_missing_place_fails(coordinator):
    with pytest.raises(RuntimeError, match="labgrid-client show on nowhere failed"):
        place_health_tag(coordinator, "nowhere")


def test_two_runners_count_one_streak_on_the_place(coordinator, tmp_path):
    """Two CI runners, each with its own health folder, share the place: errors split 2+1
    between them make it unhealthy on the third, and a check on either heals it for both."""
    client(coordinator, PLACE, "create")
    client(coordinator, PLACE, "set-tags", "board=imx6q", "rack=virtual")
    client(coordinator, PLACE, "set-comment", "virtual imx6q (QEMU)")
    first = HealthBook(tmp_path / "runner-1", unhealthy_after=3)
    second = HealthBook(tmp_path / "runner-2", unhealthy_after=3)

    for minute in (1, 2):
        health = record_on_place(first, coordinator, event("infrastructure-error",
                                                           minute=minute, cause="no login"))
        assert health.healthy and health.consecutive_errors == minute
    assert place_info(coordinator, PLACE).tags[ERRORS_TAG_KEY] == "2"
    # runner 2 has seen nothing of this place, yet its first error is the third in a row
    assert second.state(PLACE).consecutive_errors == 0
    health = record_on_place(second, coordinator, event("infrastructure-error", minute=3,
                                                        cause="PDU: HTTP 500"))
    assert not health.healthy and health.consecutive_errors == 3
    info = place_info(coordinator, PLACE)
    assert info.tags == {"board": "imx6q", "rack": "virtual", TAG_KEY: "unhealthy",
                         ERRORS_TAG_KEY: "3"}
    assert info.comment.startswith("UNHEALTHY since 2026-11-23T10:03:00+00:00: 3 infra")
    assert info.comment.endswith(" || virtual imx6q (QEMU)")
    with pytest.raises(PlaceUnhealthy, match="PDU: HTTP 500"):
        ensure_schedulable(coordinator, PLACE)
    # runner 1's own book still says healthy: the place is what counts, and its next
    # event takes the place's state
    assert first.state(PLACE).healthy

    # a passing check on runner 1 heals the place for runner 2 too
    health = record_on_place(first, coordinator, event("ok", "check", minute=4))
    assert health.healthy and health.consecutive_errors == 0
    info = place_info(coordinator, PLACE)
    assert (info.tags[TAG_KEY], info.tags[ERRORS_TAG_KEY]) == ("healthy", "0")
    assert info.comment == "virtual imx6q (QEMU)"
    ensure_schedulable(coordinator, PLACE)
    health = record_on_place(second, coordinator, event("infrastructure-error", minute=5))
    assert health.healthy and health.consecutive_errors == 1
    # a working run on runner 2 resets the shared count
    health = record_on_place(second, coordinator, event("latency-fail", minute=6))
    assert health.consecutive_errors == 0
    assert place_info(coordinator, PLACE).tags[ERRORS_TAG_KEY] == "0"
    assert [e.outcome for e in first.state(PLACE).recent] == [
        "infrastructure-error", "infrastructure-error", "ok"]


def test_a_coordinator_that_does_not_answer_leaves_the_local_count(tmp_path, caplog):
    book = HealthBook(tmp_path / "health", unhealthy_after=3)
    nowhere = f"127.0.0.1:{free_port()}"
    health = record_on_place(book, nowhere, event("infrastructure-error"))
    assert health.consecutive_errors == 1
    assert book.state(PLACE).consecutive_errors == 1
    assert "counting on this runner's record alone" in caplog.text
    assert f"could not mark place {PLACE} healthy (1 errors in a row)" in caplog.text
