"""Board reservations: how CI and people share the places of a rack.

Both go through labgrid's own reservation queue on the coordinator
(``labgrid-client reserve``), so a CI job waits while a person holds a board and a person
sees in ``labgrid-client who`` and ``labgrid-client reservations`` that CI has it. The
steps are labgrid's: reserve by tags (``board=imx6q``, or ``name=<place>`` for one place),
wait until the coordinator allocates a place, acquire it under the same owner
(``LG_HOSTNAME``/``LG_USERNAME``), and at the end release it and cancel the reservation.

The coordinator's rules that shape this module (labgrid 26, remote/coordinator.py):
- a reservation that nobody polls expires 60 s after its last poll; one whose place is
  acquired never expires. So waiting means polling (``labgrid-client wait``), and only an
  acquired place can outlive a killed job.
- a place that is acquired (by a person, without a reservation) or allocated to an
  earlier reservation is not allocated; a person who tries to acquire a place allocated
  to CI is refused ("was not reserved for ...").
- a filter that no place matches waits forever: refused here at once instead.

The reservation is written to a state file as soon as it exists and again once it has a
place, so that a job's ``after_script`` (``rtlab reservation release FILE``) can release
the place and cancel the reservation after a job that was killed or cancelled.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attr

from rtlab.lab import client as labgrid_client

logger = logging.getLogger("rtlab.reservation")

RESERVATION_FILE = "reservation.json"
SCHEMA = "rtlab.reservation/1"
# how often a waiting job says who holds the boards it waits for
PROGRESS_EVERY_S = 60.0
# the first wait for an allocation: a free place is allocated when the reservation is made
FIRST_LOOK_S = 5.0
# a labgrid-client call that is not waiting for anything; the coordinator answers in ms
CLIENT_TIMEOUT_S = 60.0


class ReservationError(RuntimeError):
    """A reservation could not be made, allocated or cancelled."""


class ReservationAbandoned(ReservationError):
    """The caller no longer needs a place (the plan it was to work on has no case left)."""


class ReservationTimeout(ReservationError):
    """No matching place became free in time; the message says who holds them."""


@attr.frozen
class Reservation:
    token: str
    coordinator: str
    owner: str
    """``host/user`` as the coordinator knows the client: the acquire must come from it."""
    filters: dict[str, str]
    place: str | None = None

    def as_json(self) -> dict:
        return {"schema": SCHEMA, **attr.asdict(self)}

    @classmethod
    def from_json(cls, data: Mapping) -> Reservation:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a reservation file (schema {data.get('schema')!r}, "
                             f"expected {SCHEMA})")
        return cls(token=str(data["token"]), coordinator=str(data["coordinator"]),
                   owner=str(data["owner"]), filters=dict(data["filters"]),
                   place=data.get("place"))

    def client_env(self) -> dict[str, str]:
        """The environment that makes labgrid-client act as the reservation's owner."""
        host, _, user = self.owner.partition("/")
        return {**os.environ, "LG_HOSTNAME": host, "LG_USERNAME": user}


@attr.frozen
class PlaceState:
    """A place as ``labgrid-client -v places`` shows it."""

    name: str
    tags: dict[str, str]
    acquired: str | None


@attr.frozen
class ReservationState:
    """A reservation as ``labgrid-client reservations`` / ``wait`` show it."""

    token: str
    owner: str
    state: str
    filters: dict[str, str]
    allocations: tuple[str, ...]


def owner_name() -> str:
    """The name labgrid-client registers with: ``LG_HOSTNAME``/``LG_USERNAME`` or the host
    and login names (labgrid's ClientSession.gethostname/getuser)."""
    import getpass
    import socket

    return (f"{os.environ.get('LG_HOSTNAME', socket.gethostname())}/"
            f"{os.environ.get('LG_USERNAME', getpass.getuser())}")


def format_filters(filters: Mapping[str, str]) -> str:
    return " ".join(f"{key}={value}" for key, value in sorted(filters.items()))


def filters_for(place: str | None = None, board: str | None = None) -> dict[str, str]:
    """Reservation filters for one named place or any place of a board type."""
    if (place is None) == (board is None):
        raise ValueError("reserve either one place or a board type")
    return {"name": place} if place is not None else {"board": str(board)}


# --- parsing labgrid-client's output --------------------------------------------------------

def _tags(text: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    # values may contain ", " (see rtlab.lab.health.parse_place_show)
    for pair in re.split(r", (?=[a-z][a-z0-9_]*=)", text):
        key, _, value = pair.partition("=")
        if key:
            tags[key] = value
    return tags


def parse_places(text: str) -> list[PlaceState]:
    """Places from ``labgrid-client -v places`` (``Place 'NAME':`` then the place's
    ``show`` indented by two)."""
    places: list[PlaceState] = []
    name: str | None = None
    tags: dict[str, str] = {}
    acquired: str | None = None

    def flush() -> None:
        if name is not None:
            places.append(PlaceState(name, tags, acquired))

    for line in text.splitlines():
        found = re.match(r"Place '(.+)':$", line)
        if found:
            flush()
            name, tags, acquired = found.group(1), {}, None
        elif line.startswith("  tags: "):
            tags = _tags(line[len("  tags: "):])
        elif line.startswith("  acquired: "):
            value = line[len("  acquired: "):].strip()
            acquired = None if value == "None" else value
    flush()
    return places


def parse_reservations(text: str) -> list[ReservationState]:
    """Reservations as ``labgrid-client reservations`` prints them (``Reservation 'TOKEN':``
    and the fields indented) or ``wait`` (the fields once per poll: the last block is the
    newest). Every block starts with its ``owner:`` line."""
    blocks: list[dict] = []
    section = ""
    for line in text.splitlines():
        key, sep, value = line.strip().partition(": ")
        if key == "owner" and sep:
            blocks.append({"owner": value, "filters": {}, "allocations": []})
            section = ""
        elif not blocks:
            continue
        elif line.strip() in ("filters:", "allocations:"):
            section = line.strip()[:-1]
        elif key in ("token", "state", "prio", "created", "timeout") and sep:
            blocks[-1][key] = value
            section = ""
        elif section == "filters" and sep:
            blocks[-1]["filters"].update(
                pair.split("=", 1) for pair in re.split(r" (?=[a-z][a-z0-9_]*=)", value)
                if "=" in pair)
        elif section == "allocations" and sep:
            blocks[-1]["allocations"] += [p.strip() for p in value.split(",") if p.strip()]
    return [ReservationState(token=b.get("token", ""), owner=b["owner"],
                             state=b.get("state", ""), filters=b["filters"],
                             allocations=tuple(b["allocations"]))
            for b in blocks if b.get("token")]


# --- the client ---------------------------------------------------------------------------

@attr.define
class LabgridClient:
    """``labgrid-client -x COORDINATOR …`` as subprocesses: the same program people use."""

    coordinator: str
    program: Path = attr.Factory(labgrid_client.program)
    env: dict[str, str] | None = None

    def argv(self, *args: str) -> list[str]:
        return [os.fspath(self.program), "-x", self.coordinator, *args]

    def run(self, *args: str, timeout: float = CLIENT_TIMEOUT_S) -> str:
        try:
            proc = subprocess.run(self.argv(*args), capture_output=True, text=True,
                                  timeout=timeout, check=False,
                                  env=labgrid_client.environment(self.env))
        except subprocess.TimeoutExpired as error:
            raise ReservationError(f"labgrid-client {' '.join(args)}: no answer from the "
                                   f"coordinator {self.coordinator} within {timeout:.0f} s"
                                   ) from error
        if proc.returncode != 0:
            raise ReservationError(f"labgrid-client {' '.join(args)} failed: "
                                   f"{(proc.stderr or proc.stdout).strip()}")
        return proc.stdout

    def places(self) -> list[PlaceState]:
        return parse_places(self.run("-v", "places"))

    def reservations(self) -> list[ReservationState]:
        return parse_reservations(self.run("reservations"))


def matching(places: list[PlaceState], filters: Mapping[str, str]) -> list[PlaceState]:
    """The places a reservation with ``filters`` could be allocated (tags and name)."""
    return [p for p in places
            if all(({**p.tags, "name": p.name}).get(k) == v for k, v in filters.items())]


def holders(client: LabgridClient, filters: Mapping[str, str], token: str = "") -> str:
    """Who holds the places a reservation with ``filters`` waits for, in one line."""
    try:
        places = matching(client.places(), filters)
        reservations = client.reservations()
    except ReservationError as error:
        return f"(could not ask the coordinator who holds them: {error})"
    allocated = {place: res for res in reservations if res.token != token
                 for place in res.allocations}
    parts = []
    for place in places:
        if place.acquired:
            parts.append(f"{place.name} acquired by {place.acquired}")
        elif place.name in allocated:
            parts.append(f"{place.name} reserved for {allocated[place.name].owner}")
        else:
            parts.append(f"{place.name} free")
    queued = [res for res in reservations
              if res.token != token and res.state == "waiting" and res.filters == filters]
    if queued:
        parts.append(f"{len(queued)} other reservation(s) with the same tags waiting")
    return "; ".join(parts) or "no place matches"


def _write_state(path: Path | None, reservation: Reservation) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(reservation.as_json(), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def reserve(
    client: LabgridClient,
    filters: Mapping[str, str],
    *,
    timeout_s: float,
    state_file: Path | None = None,
    progress: Callable[[str], None] = logger.info,
    progress_every_s: float = PROGRESS_EVERY_S,
    abandon: Callable[[], str | None] | None = None,
) -> Reservation:
    """Reserve a place matching ``filters`` and wait (at most ``timeout_s``) until the
    coordinator allocates one. Raises ReservationTimeout (the reservation cancelled) with
    who holds the places; ReservationError when no place could ever match;
    ReservationAbandoned when ``abandon``, asked while waiting, gives a reason to stop."""
    filters = dict(filters)
    wanted = format_filters(filters)
    candidates = matching(client.places(), filters)
    if not candidates:
        known = ", ".join(sorted(p.name for p in client.places())) or "none"
        raise ReservationError(f"no place on {client.coordinator} has {wanted} "
                               f"(places: {known}); a reservation would wait forever")
    out = client.run("reserve", "--shell", *(f"{k}={v}" for k, v in sorted(filters.items())))
    found = re.search(r"LG_TOKEN=(\S+)", out)
    if not found:
        raise ReservationError(f"labgrid-client reserve printed no token: {out.strip()!r}")
    reservation = Reservation(token=found.group(1), coordinator=client.coordinator,
                              owner=owner_name(), filters=filters)
    _write_state(state_file, reservation)
    try:
        place = _wait(client, reservation, timeout_s, progress, progress_every_s, abandon)
    except BaseException:
        with contextlib.suppress(ReservationError):
            cancel(client, reservation)
        raise
    reservation = attr.evolve(reservation, place=place)
    _write_state(state_file, reservation)
    return reservation


def _wait(client: LabgridClient, reservation: Reservation, timeout_s: float,
          progress: Callable[[str], None], progress_every_s: float,
          abandon: Callable[[], str | None] | None = None) -> str:
    wanted = format_filters(reservation.filters)
    start = time.monotonic()
    deadline = start + timeout_s
    first = True
    while True:
        remaining = deadline - time.monotonic()
        # labgrid-client wait polls every second (which keeps the reservation alive) and
        # returns once the reservation is no longer waiting. It has no timeout of its own,
        # so it runs for a short first look (a free place is allocated at once), then for
        # one progress interval at a time.
        step = max(0.5, min(remaining, FIRST_LOOK_S if first else progress_every_s))
        try:
            out = client.run("wait", reservation.token, timeout=step)
        except ReservationError as error:
            if not isinstance(error.__cause__, subprocess.TimeoutExpired):
                raise
            reason = abandon() if abandon is not None else None
            if reason is not None:
                raise ReservationAbandoned(f"no place needed any more: {reason}") from None
            held = holders(client, reservation.filters, reservation.token)
            if time.monotonic() >= deadline:
                raise ReservationTimeout(
                    f"no place with {wanted} became free within {timeout_s:.0f} s: {held}. "
                    "The reservation is cancelled; `labgrid-client who` and "
                    "`labgrid-client reservations` show who holds the boards") from None
            if first:
                progress(f"waiting (at most {timeout_s:.0f} s) for a place with {wanted}: "
                         f"{held}")
            else:
                progress(f"still waiting for a place with {wanted} after "
                         f"{time.monotonic() - start:.0f} s: {held}")
            first = False
            continue
        states = [s for s in parse_reservations(out) if s.token == reservation.token]
        if not states:
            raise ReservationError(f"labgrid-client wait {reservation.token}: no state in "
                                   f"{out.strip()[-200:]!r}")
        state = states[-1]
        if state.state in ("allocated", "acquired") and state.allocations:
            return state.allocations[0]
        if state.state != "waiting":
            raise ReservationError(f"reservation {reservation.token} for {wanted} is "
                                   f"{state.state} (the coordinator gave it up)")


def cancel(client: LabgridClient, reservation: Reservation) -> None:
    """Cancel the reservation; one the coordinator no longer has is not an error."""
    try:
        client.run("cancel-reservation", reservation.token)
    except ReservationError as error:
        if "does not exist" not in str(error):
            raise


def release(client: LabgridClient, reservation: Reservation) -> list[str]:
    """Release the reservation's place if the reservation's owner holds it, then cancel the
    reservation. Returns what could not be done (empty: all done). A place someone else
    holds is left alone: never kicked."""
    problems = []
    if reservation.place:
        try:
            client.run("-p", reservation.place, "release")
        except ReservationError as error:
            text = str(error)
            if "is not acquired" not in text:
                problems.append(text)
    try:
        cancel(client, reservation)
    except ReservationError as error:
        problems.append(str(error))
    return problems


@contextlib.contextmanager
def reserved(
    coordinator: str,
    filters: Mapping[str, str],
    *,
    timeout_s: float,
    state_file: Path | None = None,
    progress: Callable[[str], None] = logger.info,
    client_program: Path | None = None,
    abandon: Callable[[], str | None] | None = None,
) -> Iterator[Reservation]:
    """A place reserved for the ``with`` block; the caller acquires and releases it.
    Afterwards the reservation is cancelled and the state file removed, unless something
    could not be cleaned up (then it stays for ``rtlab reservation release``)."""
    client = LabgridClient(coordinator, **({"program": client_program}
                                           if client_program else {}))
    reservation = reserve(client, filters, timeout_s=timeout_s, state_file=state_file,
                          progress=progress, abandon=abandon)
    try:
        yield reservation
    finally:
        problems = release(client, reservation)
        if problems:
            logger.error("reservation %s: %s", reservation.token, "; ".join(problems))
        elif state_file is not None:
            state_file.unlink(missing_ok=True)


def release_file(path: Path, coordinator: str | None = None,
                 client_program: Path | None = None) -> tuple[int, str]:
    """What ``rtlab reservation release FILE`` does: (exit code, message)."""
    if not path.is_file():
        return 0, f"{path}: no reservation left to release"
    try:
        reservation = Reservation.from_json(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as error:
        return 2, f"{path}: {error}"
    client = LabgridClient(coordinator or reservation.coordinator,
                           **({"program": client_program} if client_program else {}),
                           env=reservation.client_env())
    problems = release(client, reservation)
    if problems:
        return 1, f"reservation {reservation.token}: " + "; ".join(problems)
    path.unlink(missing_ok=True)
    where = f"place {reservation.place} released, " if reservation.place else ""
    return 0, f"{where}reservation {reservation.token} cancelled"
