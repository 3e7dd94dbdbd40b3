"""Reservations shared by CI and people, against a real labgrid coordinator of its own
(on a free loopback port, places without resources: reservation and acquisition need no
exporter), plus the parsing of labgrid-client's output."""

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rtlab.lab import reservation as rsv
from rtlab.lab.health import TAG_KEY, PlaceUnhealthy, healthy_filters
from tests.ports import free_port

BIN = Path(sys.executable).parent
PERSON = {"LG_HOSTNAME": "desk-07", "LG_USERNAME": "alice"}
CI = {"LG_HOSTNAME": "labhost-01", "LG_USERNAME": "gitlab-ci-job-4711"}



@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One coordinator for the module (starting one costs seconds on a loaded host)."""
    tmp_path = tmp_path_factory.mktemp("coordinator")
    address = f"127.0.0.1:{free_port()}"
    log = (tmp_path / "coordinator.log").open("w")
    proc = subprocess.Popen([BIN / "labgrid-coordinator", "-l", address], cwd=tmp_path,
                            stdout=log, stderr=subprocess.STDOUT)
    port = int(address.rsplit(":", 1)[1])
    deadline = time.monotonic() + 30
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            break
        assert proc.poll() is None, (tmp_path / "coordinator.log").read_text()
        assert time.monotonic() < deadline, "coordinator did not listen within 30 s"
        time.sleep(0.2)
    for place, board in (("imx6q-01", "imx6q"), ("rpi3-01", "rpi3")):
        client(address, {}, "-p", place, "create")
        client(address, {}, "-p", place, "set-tags", f"board={board}")
    yield address
    proc.terminate()
    proc.wait(10)
    log.close()


@pytest.fixture
def coordinator(lab):
    """The coordinator, with no place acquired and no reservation left by the test."""
    yield lab
    for res in rsv.parse_reservations(client(lab, {}, "reservations").stdout):
        client(lab, {}, "cancel-reservation", res.token, check=False)
    for place in rsv.parse_places(client(lab, {}, "-v", "places").stdout):
        if place.acquired:
            client(lab, {}, "-p", place.name, "release", "--kick", check=False)


def client(address: str, who: dict, *args: str, check: bool = True):
    proc = subprocess.run([BIN / "labgrid-client", "-x", address, *args],
                          env={**os.environ, **who}, capture_output=True, text=True,
                          timeout=60, check=False)
    if check:
        assert proc.returncode == 0, f"labgrid-client {' '.join(args)}: {proc.stderr}"
    return proc


@pytest.fixture
def as_ci(monkeypatch):
    for key, value in CI.items():
        monkeypatch.setenv(key, value)


def test_a_free_place_is_allocated_at_once_and_released_with_its_reservation(
        coordinator, as_ci, tmp_path):
    state = tmp_path / "out" / rsv.RESERVATION_FILE
    with rsv.reserved(coordinator, {"board": "imx6q"}, timeout_s=30,
                      state_file=state) as res:
        assert res.place == "imx6q-01"
        assert res.owner == "labhost-01/gitlab-ci-job-4711"
        saved = json.loads(state.read_text())
        assert saved["place"] == "imx6q-01" and saved["token"] == res.token
        client(coordinator, {}, "-p", "imx6q-01", "acquire")
        # what a person sees: CI holds the board, under the job's name
        who = client(coordinator, PERSON, "who").stdout
        assert "gitlab-ci-job-4711" in who and "imx6q-01" in who
        listed = client(coordinator, PERSON, "reservations").stdout
        assert res.token in listed and "owner: labhost-01/gitlab-ci-job-4711" in listed
        client(coordinator, {}, "-p", "imx6q-01", "release")
    assert not state.exists(), "a clean end leaves nothing for after_script"
    assert res.token not in client(coordinator, PERSON, "reservations").stdout


def test_a_person_cannot_take_a_board_allocated_to_ci(coordinator, as_ci):
    with rsv.reserved(coordinator, {"board": "rpi3"}, timeout_s=30) as res:
        taken = client(coordinator, PERSON, "-p", res.place, "acquire", check=False)
        assert taken.returncode != 0
        assert "was not reserved for desk-07/alice" in taken.stderr


def test_ci_waits_while_a_person_holds_the_board_and_gets_it_when_released(
        coordinator, as_ci):
    client(coordinator, PERSON, "-p", "imx6q-01", "acquire")
    said: list[str] = []
    result: dict = {}

    def ci_job():
        try:
            result["reservation"] = rsv.reserve(
                rsv.LabgridClient(coordinator), {"board": "imx6q"}, timeout_s=120,
                progress=said.append, progress_every_s=3)
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            result["error"] = error

    job = threading.Thread(target=ci_job)
    job.start()
    try:
        deadline = time.monotonic() + 60
        while not said and time.monotonic() < deadline:
            time.sleep(0.2)
        assert said, "no word from a job that waits for a board"
        # the job says what it waits for and who holds it
        assert "waiting (at most 120 s) for a place with board=imx6q" in said[0]
        assert "imx6q-01 acquired by desk-07/alice" in said[0]
        # and the person sees CI queued for the board
        queued = rsv.parse_reservations(client(coordinator, PERSON, "reservations").stdout)
        assert [(r.owner, r.state) for r in queued] == [
            ("labhost-01/gitlab-ci-job-4711", "waiting")]
    finally:
        client(coordinator, PERSON, "-p", "imx6q-01", "release")
        job.join(120)
    assert "error" not in result, result.get("error")
    res = result["reservation"]
    assert res.place == "imx6q-01"
    rsv.cancel(rsv.LabgridClient(coordinator), res)


def test_waiting_ends_after_the_timeout_with_who_holds_the_board(coordinator, as_ci):
    client(coordinator, PERSON, "-p", "rpi3-01", "acquire")
    start = time.monotonic()
    with pytest.raises(rsv.ReservationTimeout) as raised:
        rsv.reserve(rsv.LabgridClient(coordinator), {"board": "rpi3"}, timeout_s=4,
                    progress=lambda _: None, progress_every_s=2)
    assert time.monotonic() - start < 30
    message = str(raised.value)
    assert message.startswith("no place with board=rpi3 became free within 4 s: "
                              "rpi3-01 acquired by desk-07/alice")
    assert "labgrid-client who" in message
    # the job's reservation does not linger in the queue
    assert client(coordinator, PERSON, "reservations").stdout.strip() == ""


def test_waiting_stops_when_the_place_is_no_longer_needed(coordinator, as_ci):
    # a place of a shared plan waits while a person holds the board; the plan's other
    # places take every case meanwhile
    client(coordinator, PERSON, "-p", "rpi3-01", "acquire")
    asked = []

    def abandon() -> str | None:
        asked.append(time.monotonic())
        return "plan p has no case left to take" if len(asked) >= 2 else None

    with pytest.raises(rsv.ReservationAbandoned,
                       match="no place needed any more: plan p has no case left to take"):
        rsv.reserve(rsv.LabgridClient(coordinator), {"board": "rpi3"}, timeout_s=600,
                    progress=lambda _: None, progress_every_s=1, abandon=abandon)
    assert len(asked) == 2
    # the job's reservation does not linger in the queue
    assert client(coordinator, PERSON, "reservations").stdout.strip() == ""


def test_a_filter_no_place_matches_is_refused_at_once(coordinator, as_ci):
    with pytest.raises(rsv.ReservationError, match=r"no place on .* has board=imx8mp "
                                                   r"\(places: imx6q-01, rpi3-01\)"):
        rsv.reserve(rsv.LabgridClient(coordinator), {"board": "imx8mp"}, timeout_s=600)
    assert client(coordinator, PERSON, "reservations").stdout.strip() == ""


def test_one_named_place_can_be_reserved(coordinator, as_ci):
    res = rsv.reserve(rsv.LabgridClient(coordinator), rsv.filters_for(place="rpi3-01"),
                      timeout_s=30)
    assert res.place == "rpi3-01"
    assert rsv.release(rsv.LabgridClient(coordinator), res) == []


@pytest.fixture
def second_imx6q(coordinator):
    """A second place of the imx6q type; every place's health tags are gone afterwards."""
    client(coordinator, {}, "-p", "imx6q-02", "create")
    client(coordinator, {}, "-p", "imx6q-02", "set-tags", "board=imx6q")
    yield "imx6q-02"
    client(coordinator, {}, "-p", "imx6q-02", "delete")
    for place in ("imx6q-01", "rpi3-01"):
        client(coordinator, {}, "-p", place, "set-tags", f"{TAG_KEY}=")
        client(coordinator, {}, "-p", place, "set-comment", "")


def test_ci_is_never_allocated_an_unhealthy_place_while_a_healthy_one_serves(
        second_imx6q, coordinator, as_ci):
    lab = rsv.LabgridClient(coordinator)
    filters = healthy_filters(lab, rsv.filters_for(board="imx6q"))
    assert filters == {"board": "imx6q", TAG_KEY: "healthy"}
    # the places of the type that no run had marked yet were admitted as healthy
    assert {p.name: p.tags.get(TAG_KEY) for p in lab.places()} == {
        "imx6q-01": "healthy", second_imx6q: "healthy", "rpi3-01": None}
    # both free, each unhealthy in turn (the coordinator prefers one of two free places
    # by its own order, so one of the two turns would catch a filter that let it)
    for sick, well in (("imx6q-01", second_imx6q), (second_imx6q, "imx6q-01")):
        client(coordinator, {}, "-p", sick, "set-tags", f"{TAG_KEY}=unhealthy")
        client(coordinator, {}, "-p", well, "set-tags", f"{TAG_KEY}=healthy")
        assert healthy_filters(lab, rsv.filters_for(board="imx6q")) == filters
        res = rsv.reserve(lab, filters, timeout_s=30)
        assert res.place == well, sick
        assert rsv.release(lab, res) == []


def test_ci_is_refused_at_once_when_every_place_of_the_type_is_unhealthy(
        second_imx6q, coordinator, as_ci):
    for place in ("imx6q-01", second_imx6q):
        client(coordinator, {}, "-p", place, "set-tags", f"{TAG_KEY}=unhealthy")
    client(coordinator, {}, "-p", "imx6q-01", "set-comment", "UNHEALTHY since x: no login")
    with pytest.raises(PlaceUnhealthy) as refused:
        healthy_filters(rsv.LabgridClient(coordinator), rsv.filters_for(board="imx6q"))
    message = str(refused.value)
    assert message.startswith("every place with board=imx6q is unhealthy (")
    assert "imx6q-01: UNHEALTHY since x: no login" in message
    assert f"{second_imx6q}: -" in message
    assert "rtlab lab check --place imx6q-01" in message
    # nothing was queued: a reservation would have waited for ever
    assert client(coordinator, PERSON, "reservations").stdout.strip() == ""
    # a board type with a healthy place is not held back by another type's
    assert healthy_filters(rsv.LabgridClient(coordinator), {"board": "rpi3"})[TAG_KEY] \
        == "healthy"


def test_after_script_releases_what_a_killed_job_held(coordinator, as_ci, tmp_path,
                                                      monkeypatch):
    state = tmp_path / rsv.RESERVATION_FILE
    res = rsv.reserve(rsv.LabgridClient(coordinator), {"board": "imx6q"}, timeout_s=30,
                      state_file=state)
    client(coordinator, {}, "-p", res.place, "acquire")
    # the job is killed here; after_script runs in a new shell (another LG_USERNAME even)
    monkeypatch.setenv("LG_USERNAME", "someone-else")
    code, message = rsv.release_file(state)
    assert (code, message) == (0, f"place imx6q-01 released, reservation {res.token} "
                                  "cancelled")
    assert "imx6q-01" not in client(coordinator, PERSON, "who").stdout
    assert client(coordinator, PERSON, "reservations").stdout.strip() == ""
    assert not state.exists()
    assert rsv.release_file(state) == (0, f"{state}: no reservation left to release")


def test_after_script_cancels_a_reservation_still_waiting(coordinator, as_ci, tmp_path):
    client(coordinator, PERSON, "-p", "imx6q-01", "acquire")
    state = tmp_path / rsv.RESERVATION_FILE
    proc = subprocess.Popen([sys.executable, "-c", (
        "import sys; from pathlib import Path; from rtlab.lab import reservation as r; "
        f"r.reserve(r.LabgridClient({coordinator!r}), {{'board': 'imx6q'}}, "
        f"timeout_s=600, state_file=Path({str(state)!r}))")])
    try:
        deadline = time.monotonic() + 60
        while not state.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert state.exists()
    finally:
        proc.kill()  # a cancelled job whose runner could not stop it gently
        proc.wait()
    code, message = rsv.release_file(state)
    assert code == 0 and message.endswith("cancelled"), message
    assert client(coordinator, PERSON, "reservations").stdout.strip() == ""
    # the person's session is untouched
    assert "alice" in client(coordinator, PERSON, "who").stdout


def test_release_never_kicks_a_person(coordinator, tmp_path):
    client(coordinator, PERSON, "-p", "rpi3-01", "acquire")
    state = tmp_path / rsv.RESERVATION_FILE
    state.write_text(json.dumps(rsv.Reservation(
        token="GONE000000", coordinator=coordinator, owner="labhost-01/gitlab-ci-job-1",
        filters={"board": "rpi3"}, place="rpi3-01").as_json()))
    code, message = rsv.release_file(state)
    assert code == 1
    assert "acquired by a different user" in message
    assert "desk-07/alice" in client(coordinator, PERSON, "who").stdout.replace(
        "alice  desk-07", "desk-07/alice")
    assert state.exists(), "kept, so that the problem can be looked at"


def test_a_file_that_is_no_reservation_is_refused(tmp_path):
    path = tmp_path / "reservation.json"
    path.write_text('{"schema": "something/1"}')
    code, message = rsv.release_file(path)
    assert code == 2 and "not a reservation file" in message


# --- parsing -------------------------------------------------------------------------------

RESERVATIONS = """\
Reservation 'ABC123':
  owner: labhost-01/gitlab-ci-job-7
  token: ABC123
  state: allocated
  filters:
    main: board=imx6q rack=lab1
  allocations:
    main: imx6q-02
  created: 2026-11-23 15:00:00.1
  timeout: 2026-11-23 15:01:00.1
Reservation 'XYZ789':
  owner: desk-07/alice
  token: XYZ789
  state: waiting
  prio: 1.0
  filters:
    main: board=imx6q
  created: 2026-11-23 15:00:05.1
  timeout: 2026-11-23 15:01:05.1
"""

WAIT = """\
owner: labhost-01/gitlab-ci-job-7
token: ABC123
state: waiting
filters:
  main: board=imx6q
created: 2026-11-23 15:00:00.1
timeout: 2026-11-23 15:01:00.1
owner: labhost-01/gitlab-ci-job-7
token: ABC123
state: allocated
filters:
  main: board=imx6q
allocations:
  main: imx6q-01
created: 2026-11-23 15:00:00.1
timeout: 2026-11-23 15:01:01.1
"""

PLACES = """\
Place 'imx6q-01':
  comment: rtlab unhealthy since 2026-11-23T10:00:00Z: board silent, see x, y
  tags: board=imx6q, rtlab_health=unhealthy, rack=lab1
  matches:
    labhost-01/imx6q-01/*
  acquired: desk-07/alice
  acquired resources:
Place 'imx6q-02':
  tags: board=imx6q
  matches:
  acquired: None
  acquired resources:
"""


def test_parse_reservations_listing():
    first, second = rsv.parse_reservations(RESERVATIONS)
    assert first == rsv.ReservationState("ABC123", "labhost-01/gitlab-ci-job-7", "allocated",
                                         {"board": "imx6q", "rack": "lab1"}, ("imx6q-02",))
    assert second == rsv.ReservationState("XYZ789", "desk-07/alice", "waiting",
                                          {"board": "imx6q"}, ())


def test_parse_wait_output_keeps_every_poll_the_last_one_newest():
    polls = rsv.parse_reservations(WAIT)
    assert [p.state for p in polls] == ["waiting", "allocated"]
    assert polls[-1].allocations == ("imx6q-01",)


def test_parse_places():
    first, second = rsv.parse_places(PLACES)
    assert first == rsv.PlaceState("imx6q-01", {"board": "imx6q", "rtlab_health": "unhealthy",
                                                "rack": "lab1"}, "desk-07/alice")
    assert second == rsv.PlaceState("imx6q-02", {"board": "imx6q"}, None)


def test_filters_for():
    assert rsv.filters_for(place="imx6q-01") == {"name": "imx6q-01"}
    assert rsv.filters_for(board="rpi3") == {"board": "rpi3"}
    with pytest.raises(ValueError):
        rsv.filters_for()
    with pytest.raises(ValueError):
        rsv.filters_for(place="imx6q-01", board="imx6q")
