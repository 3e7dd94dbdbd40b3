"""Board health: after ``unhealthy_after`` infrastructure errors in a row a place is
unhealthy, and CI leaves it alone until a health check (flash, boot, short smoke test)
passes on it again.

The coordinator's place is where the state lives, because a lab's CI runners share its
places but not their disks: tag ``rtlab_health`` (healthy/unhealthy, the reason in the
place comment) and tag ``rtlab_health_errors`` (the errors in a row so far), read before
a run's outcome is counted and written after, so that a streak continues across runners.
Each runner's :class:`HealthBook`, one JSON file per place, keeps the history it saw.
"""

import datetime
import fcntl
import json
import logging
import re
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attr

from rtlab.lab import client as labgrid_client
from rtlab.util.atomic import write_atomic

if TYPE_CHECKING:
    from rtlab.lab.reservation import LabgridClient

SCHEMA = "rtlab.health/1"
KINDS = ("run", "check")
OUTCOMES = ("ok", "infrastructure-error", "latency-fail")
# a latency fail is a board that flashed, booted and measured: healthy hardware
WORKING = ("ok", "latency-fail")
KEEP_EVENTS = 50
RECENT_EVENTS = 10
CAUSE_MAX = 300

# labgrid's tag keys must match [a-z][a-z0-9_]+ and values [a-z0-9_]* (labgrid checks
# only a prefix of each, so "rtlab-health" would pass its check; this key is valid in full)
TAG_KEY = "rtlab_health"
HEALTHY, UNHEALTHY = "healthy", "unhealthy"
# our part of the place comment; whatever comment the place had before follows COMMENT_SEP
COMMENT_MARK = "UNHEALTHY since "
COMMENT_SEP = " || "

# the shared count of errors in a row: a decimal number, a valid tag value
ERRORS_TAG_KEY = "rtlab_health_errors"
MARKED_SINCE = re.compile(rf"{re.escape(COMMENT_MARK)}(\S+): ")

PLACE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
logger = logging.getLogger("rtlab.health")


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def one_line(text: str) -> str:
    """Causes are exception messages and log lines: one line, at most CAUSE_MAX chars."""
    text = " ".join(str(text).split())
    return text if len(text) <= CAUSE_MAX else text[:CAUSE_MAX - 1] + "…"


def _iso_utc(_instance: object, attribute: "attr.Attribute[str]", value: object) -> None:
    try:
        when = datetime.datetime.fromisoformat(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{attribute.name} {value!r} is not an ISO 8601 time") from None
    if when.utcoffset() != datetime.timedelta(0):
        raise ValueError(f"{attribute.name} {value!r} is not in UTC")


def _place_name(_instance: object, attribute: "attr.Attribute[str]", value: object) -> None:
    # the place names the book's file, so it must never be a path
    if not isinstance(value, str) or not PLACE_NAME.fullmatch(value):
        raise ValueError(f"{attribute.name} {value!r} is not a place name "
                         f"(allowed: {PLACE_NAME.pattern})")


@attr.frozen
class HealthEvent:
    """One run or health check on a place, as far as the board's health goes.

    Args:
        time: ISO 8601 UTC time the run or check ended
        place: labgrid place name
        kind: ``run`` (a CI or desk run of the suite) or ``check`` (a health check)
        outcome: ``ok``, ``infrastructure-error`` (flash, boot, console, lab) or
            ``latency-fail`` (the board works; the kernel missed a threshold)
        cause: one line: why (an error's message); made one line on the way in
        case: the test case it happened in, if any
    """

    time: str = attr.field(validator=_iso_utc)
    place: str = attr.field(validator=_place_name)
    kind: str = attr.field(validator=attr.validators.in_(KINDS))
    outcome: str = attr.field(validator=attr.validators.in_(OUTCOMES))
    cause: str = attr.field(default="", converter=one_line)
    case: str | None = attr.field(
        default=None, validator=attr.validators.optional(attr.validators.instance_of(str)))

    @classmethod
    def now(cls, place: str, kind: str, outcome: str, cause: str = "",
            case: str | None = None) -> "HealthEvent":
        return cls(utc_now(), place, kind, outcome, cause, case)

    @property
    def board_works(self) -> bool:
        return self.outcome in WORKING

    def as_dict(self) -> dict[str, Any]:
        return attr.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "HealthEvent":
        fields = {field.name for field in attr.fields(cls)}
        if not isinstance(data, Mapping) or not fields >= set(data) >= fields - {"case"}:
            raise ValueError(f"a health event has the keys {sorted(fields)}")
        return cls(**data)


@attr.frozen
class PlaceHealth:
    """A place's health: ``consecutive_errors`` counts the infrastructure errors since its
    last working run or check; ``recent`` are its last RECENT_EVENTS events, oldest first."""

    place: str
    healthy: bool = True
    consecutive_errors: int = 0
    marked_unhealthy_at: str | None = None
    recent: tuple[HealthEvent, ...] = ()

    @property
    def last(self) -> HealthEvent | None:
        return self.recent[-1] if self.recent else None

    def reason(self) -> str:
        """One line for the place comment and ``rtlab lab health``."""
        if self.healthy:
            return "healthy"
        # the last error, even if a working run (which CI should not have scheduled)
        # came after it and reset the streak
        last = next((e for e in reversed(self.recent) if not e.board_works), None)
        cause = (last.cause or last.outcome) if last else "unknown"
        if self.consecutive_errors:
            plural = "s" if self.consecutive_errors > 1 else ""
            errors = f"{self.consecutive_errors} infrastructure error{plural} in a row"
        else:
            errors = "infrastructure errors"
        return (f"{COMMENT_MARK}{self.marked_unhealthy_at}: {errors}; last: {cause}. "
                f"Run: rtlab lab check {self.place}")


@attr.frozen
class SharedHealth:
    """What the coordinator's place says of its health, for every runner: None where the
    place has no such tag (yet), and this runner's own record stands."""

    healthy: bool | None = None
    consecutive_errors: int | None = None
    marked_unhealthy_at: str | None = None


@attr.define
class _Entry:
    """A place's file: the state, and up to KEEP_EVENTS events, oldest first."""

    place: str
    healthy: bool = True
    consecutive_errors: int = 0
    marked_unhealthy_at: str | None = None
    events: list[HealthEvent] = attr.Factory(list)

    def adopt(self, shared: SharedHealth, event: HealthEvent) -> None:
        """Take the state the place holds: another runner may have counted errors on it,
        marked it unhealthy or checked it healthy since this runner last saw it."""
        if shared.consecutive_errors is not None:
            self.consecutive_errors = shared.consecutive_errors
        if shared.healthy is True:
            self.healthy = True
            self.marked_unhealthy_at = None
        elif shared.healthy is False:
            self.healthy = False
            self.marked_unhealthy_at = (shared.marked_unhealthy_at or self.marked_unhealthy_at
                                        or event.time)

    def apply(self, event: HealthEvent, unhealthy_after: int) -> None:
        self.events = [*self.events, event][-KEEP_EVENTS:]
        if event.board_works:
            self.consecutive_errors = 0
            # CI schedules no runs on an unhealthy place: only a check brings it back
            if event.kind == "check":
                self.healthy = True
                self.marked_unhealthy_at = None
        else:
            self.consecutive_errors += 1
            if self.healthy and self.consecutive_errors >= unhealthy_after:
                self.healthy = False
                self.marked_unhealthy_at = event.time

    def health(self) -> PlaceHealth:
        return PlaceHealth(self.place, self.healthy, self.consecutive_errors,
                           self.marked_unhealthy_at, tuple(self.events[-RECENT_EVENTS:]))

    def as_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "place": self.place, "healthy": self.healthy,
                "consecutive_errors": self.consecutive_errors,
                "marked_unhealthy_at": self.marked_unhealthy_at,
                "events": [event.as_dict() for event in self.events]}


@attr.define
class HealthBook:
    """rtlab's record of the places' health: ``<folder>/<place>.json`` each.

    Args:
        folder: where the files are (rtlab.util.paths.health_dir() by default in the CLI)
        unhealthy_after: infrastructure errors in a row that make a place unhealthy
    """

    folder: Path = attr.field(converter=Path)
    unhealthy_after: int = attr.field(
        default=3, validator=[attr.validators.instance_of(int), attr.validators.ge(1)])

    def path(self, place: str) -> Path:
        _place_name(None, attr.fields(HealthEvent).place, place)
        return self.folder / f"{place}.json"

    def record(self, event: HealthEvent, shared: SharedHealth | None = None) -> PlaceHealth:
        """Add the event to its place's history and return the place's new health, counted
        on from ``shared`` (the place's state on the coordinator) where given."""
        with self._locked(event.place):
            entry = self._read(event.place) or _Entry(event.place)
            if shared is not None:
                entry.adopt(shared, event)
            entry.apply(event, self.unhealthy_after)
            write_atomic(self.path(event.place),
                         json.dumps(entry.as_dict(), indent=2) + "\n")
        return entry.health()

    def state(self, place: str) -> PlaceHealth:
        """The place's health; a place never recorded is healthy with no history."""
        entry = self._read(place)
        return entry.health() if entry else PlaceHealth(place)

    def places(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        return sorted(path.stem for path in self.folder.glob("*.json")
                      if not path.name.startswith(".") and PLACE_NAME.fullmatch(path.stem))

    def states(self) -> list[PlaceHealth]:
        return [self.state(place) for place in self.places()]

    @contextmanager
    def _locked(self, place: str) -> Iterator[None]:
        """Two runs on one runner may end at once: read, change and write one at a time."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / f".{place}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self, place: str) -> _Entry | None:
        path = self.path(place)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{error.lineno}: not a health record: {error.msg}") \
                from error
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError(f"{path}:1: not a health record of schema {SCHEMA}")
        try:
            return _entry_from(place, data)
        except _BadRecord as error:
            raise ValueError(f"{path}:{error.line(text)}: {error}") from None


class _BadRecord(ValueError):
    """A health file's content is wrong at ``key`` (or at events[``event``])."""

    def __init__(self, message: str, key: str, event: int | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.event = event

    def line(self, text: str) -> int:
        """Files are written one key per line and each event opens with a lone "{"."""
        lines = text.splitlines()
        key_line = next((number for number, line in enumerate(lines, 1)
                         if line.strip().startswith(f'"{self.key}"')), 1)
        if self.event is None:
            return key_line
        openings = [number for number, line in enumerate(lines, 1)
                    if number > key_line and line.strip() == "{"]
        return openings[self.event] if self.event < len(openings) else key_line


def _entry_from(place: str, data: dict[str, Any]) -> _Entry:
    if data.get("place") != place:
        raise _BadRecord(f"it is the record of place {data.get('place')!r}", "place")
    if not isinstance(data.get("healthy"), bool):
        raise _BadRecord("'healthy' is not true or false", "healthy")
    errors = data.get("consecutive_errors")
    if not isinstance(errors, int) or isinstance(errors, bool) or errors < 0:
        raise _BadRecord("'consecutive_errors' is not a count", "consecutive_errors")
    marked = data.get("marked_unhealthy_at")
    if marked is not None:
        try:
            _iso_utc(None, attr.fields(_Entry).marked_unhealthy_at, marked)
        except ValueError as error:
            raise _BadRecord(str(error), "marked_unhealthy_at") from None
    if not isinstance(data.get("events"), list):
        raise _BadRecord("'events' is not a list", "events")
    events = []
    for number, item in enumerate(data["events"]):
        try:
            events.append(HealthEvent.from_dict(item))
        except (TypeError, ValueError) as error:
            raise _BadRecord(f"events[{number}]: {error}", "events", number) from None
    return _Entry(place, data["healthy"], errors, marked, events)


def run_event(place: str, kind: str, exit_code: int,
              records: Iterable[Mapping[str, Any]]) -> HealthEvent:
    """The health event of a suite run or check from its result records (rtlab.artifacts.record):
    an ``error`` verdict is the board, its console or the lab failing (rtlab.verdict.judge), a
    ``fail`` is a latency fail, and a failed run with no record failed before any case."""
    records = list(records)
    for verdict, outcome in (("error", "infrastructure-error"), ("fail", "latency-fail")):
        for record in records:
            if record.get("verdict") == verdict:
                return HealthEvent.now(place, kind, outcome, record.get("message", ""),
                                       record.get("name") or record.get("case"))
    if exit_code != 0 and not any(r.get("verdict") == "pass" for r in records):
        return HealthEvent.now(place, kind, "infrastructure-error",
                               f"pytest exited with {exit_code} before recording a result")
    return HealthEvent.now(place, kind, "ok", f"{len(records)} case(s) recorded")


# --- the labgrid place -----------------------------------------------------------------

@attr.frozen
class PlaceInfo:
    """What ``labgrid-client -p <place> show`` tells of a place's tags and comment."""

    tags: dict[str, str] = attr.Factory(dict)
    comment: str = ""


class PlaceUnhealthy(RuntimeError):
    """The place is marked unhealthy on the coordinator."""


def parse_place_show(text: str) -> PlaceInfo:
    """Read tags and comment from ``labgrid-client show``: labgrid 26 prints, before the
    place's ``matches:``, ``  comment: <comment>`` and ``  tags: k=v, k=v`` (sorted by key;
    values may contain ", ", so a pair starts only where a valid key and "=" follow)."""
    tags: dict[str, str] = {}
    comment = ""
    for line in text.splitlines():
        if line.startswith("  matches:"):
            break
        if line.startswith("  comment: "):
            comment = line[len("  comment: "):]
        elif line.startswith("  tags: "):
            for pair in re.split(r", (?=[a-z][a-z0-9_]*=)", line[len("  tags: "):]):
                key, _, value = pair.partition("=")
                tags[key] = value
    return PlaceInfo(tags, comment)


def place_info(coordinator: str, place: str, client: Path | None = None) -> PlaceInfo:
    return parse_place_show(labgrid_client.run(coordinator, "show", place=place, client=client))


def shared_health(info: PlaceInfo) -> SharedHealth:
    """The place's health as the coordinator holds it (see :func:`mark_place`)."""
    healthy = {HEALTHY: True, UNHEALTHY: False}.get(info.tags.get(TAG_KEY, ""))
    count = info.tags.get(ERRORS_TAG_KEY, "")
    # a value someone typed by hand that is no count is no count
    errors = int(count) if count.isdigit() else None
    marked = None
    if healthy is False:
        found = MARKED_SINCE.match(info.comment)
        if found:
            try:
                _iso_utc(None, attr.fields(SharedHealth).marked_unhealthy_at, found.group(1))
                marked = found.group(1)
            except ValueError:
                pass
    return SharedHealth(healthy, errors, marked)


def place_health_tag(coordinator: str, place: str, client: Path | None = None) -> str | None:
    """The place's ``rtlab_health`` tag: "healthy", "unhealthy" or None (never marked)."""
    return place_info(coordinator, place, client).tags.get(TAG_KEY)


def health_comment(health: PlaceHealth, comment: str) -> str:
    """The place comment for ``health``, given the current one: our reason in front of
    whatever the place's comment was before we marked it, which comes back once healthy."""
    theirs = comment
    if comment.startswith(COMMENT_MARK):
        _, sep, rest = comment.partition(COMMENT_SEP)
        theirs = rest if sep else ""
    if health.healthy:
        return theirs
    ours = health.reason().replace(COMMENT_SEP, " | ")
    return f"{ours}{COMMENT_SEP}{theirs}" if theirs else ours


def mark_place(coordinator: str, place: str, health: PlaceHealth,
               client: Path | None = None, info: PlaceInfo | None = None) -> None:
    """Put ``health`` on the labgrid place: tags ``rtlab_health=healthy|unhealthy`` and
    ``rtlab_health_errors=N`` and, while unhealthy, the reason in the comment. ``info`` is
    the place as last read (read again if None). ``set-tags`` merges (labgrid 26's
    coordinator only adds, changes or, for an empty value, deletes the given keys), so the
    place's other tags stay; the comment before marking is kept behind our reason."""
    info = info or place_info(coordinator, place, client)
    wanted = {TAG_KEY: HEALTHY if health.healthy else UNHEALTHY,
              ERRORS_TAG_KEY: str(health.consecutive_errors)}
    changed = [f"{key}={value}" for key, value in wanted.items() if info.tags.get(key) != value]
    if changed:
        labgrid_client.run(coordinator, "set-tags", *changed, place=place, client=client)
    comment = health_comment(health, info.comment)
    if comment != info.comment:
        labgrid_client.run(coordinator, "set-comment", comment, place=place, client=client)


def record_on_place(book: HealthBook, coordinator: str, event: HealthEvent,
                    client: Path | None = None) -> PlaceHealth:
    """Count ``event`` on from the state its place holds on the coordinator, keep it in
    ``book`` and put the new state back on the place. Between the read and the write no
    other runner may count an outcome on the place: ``rtlab run`` does this while it still
    holds the place. A coordinator that cannot be read or written leaves this runner's
    record to count alone (logged), so that the run's results are never lost over it."""
    place = event.place
    try:
        info: PlaceInfo | None = place_info(coordinator, place, client)
    except (RuntimeError, OSError, subprocess.SubprocessError) as error:
        logger.error("could not read the health of place %s from the coordinator, counting "
                     "on this runner's record alone: %s", place, error)
        info = None
    health = book.record(event, shared_health(info) if info is not None else None)
    try:
        mark_place(coordinator, place, health, client, info)
    except (RuntimeError, OSError, subprocess.SubprocessError) as error:
        logger.error("could not mark place %s %s (%d errors in a row): %s", place,
                     HEALTHY if health.healthy else UNHEALTHY, health.consecutive_errors,
                     error)
    return health


def ensure_schedulable(coordinator: str, place: str, client: Path | None = None) -> None:
    """Raise PlaceUnhealthy if the place is tagged unhealthy on the coordinator (the tag,
    not this runner's HealthBook: the place may have failed on another runner)."""
    info = place_info(coordinator, place, client)
    if info.tags.get(TAG_KEY) == UNHEALTHY:
        raise PlaceUnhealthy(f"place {place} is unhealthy: {info.comment or 'no comment'}")


def healthy_filters(client: "LabgridClient", filters: Mapping[str, str]) -> dict[str, str]:
    """The reservation filters CI uses for any place of a board type: ``filters`` plus
    ``rtlab_health=healthy``, so that the coordinator never allocates an unhealthy place
    while a healthy one of the type is free or becomes free (labgrid's filters can only
    ask for a tag's value, not exclude one). A place no run has marked yet has never
    failed: it is tagged healthy first. When every place of the type is unhealthy there is
    nothing to wait for: refused at once, naming each place, its reason and the health
    check that makes it schedulable again."""
    from rtlab.lab.reservation import matching

    places = matching(client.places(), filters)
    for place in places:
        if TAG_KEY not in place.tags:
            client.run("-p", place.name, "set-tags", f"{TAG_KEY}={HEALTHY}")
    unhealthy = [p for p in places if p.tags.get(TAG_KEY) == UNHEALTHY]
    if places and len(unhealthy) == len(places):
        reasons = "; ".join(
            f"{p.name}: {parse_place_show(client.run('-p', p.name, 'show')).comment or '-'}"
            for p in unhealthy)
        raise PlaceUnhealthy(
            f"every place with {' '.join(f'{k}={v}' for k, v in sorted(filters.items()))} "
            f"is unhealthy ({reasons}); a passing health check makes one schedulable "
            f"again: rtlab lab check --place {unhealthy[0].name} --image SDCARD.img")
    return {**filters, TAG_KEY: HEALTHY}


# --- rtlab lab health ------------------------------------------------------------------

def format_shared(shared: SharedHealth | None) -> str:
    """The coordinator's word on a place, for the table: what every runner goes by."""
    if shared is None:
        return "unknown"
    if shared.healthy is None and shared.consecutive_errors is None:
        return "-"
    state = {True: HEALTHY, False: UNHEALTHY, None: "?"}[shared.healthy]
    errors = "?" if shared.consecutive_errors is None else str(shared.consecutive_errors)
    return f"{state}, {errors} in a row"


def format_health(states: list[PlaceHealth], history: bool = False,
                  shared: Mapping[str, SharedHealth | None] | None = None) -> str:
    """The table of ``rtlab lab health``; with ``history``, each place's recent events.
    With ``shared`` (by place; None: the coordinator could not be asked), a column with
    the state the coordinator holds, which every runner counts on from: this runner's
    record sees only its own runs."""
    header: tuple[str, ...] = ("PLACE", "STATE", "ERRORS", "LAST EVENT", "OUTCOME", "CAUSE")
    if shared is not None:
        header = (*header[:3], "COORDINATOR", *header[3:])
    rows = []
    for health in states:
        last = health.last
        row: tuple[str, ...] = (health.place, HEALTHY if health.healthy else UNHEALTHY,
                                str(health.consecutive_errors),
                                f"{last.time} {last.kind}" if last else "-",
                                last.outcome if last else "-",
                                (last.cause or "-") if last else "-")
        if shared is not None:
            row = (*row[:3], format_shared(shared.get(health.place)), *row[3:])
        rows.append(row)
    if not rows:
        return "no health records yet\n"
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
    lines = ["  ".join([*(cell.ljust(width) for cell, width in zip(row, widths,
                                                                   strict=False)), row[-1]])
             .rstrip() for row in (header, *rows)]
    unhealthy = [health for health in states if not health.healthy]
    for health in unhealthy:
        lines.append(f"{health.place}: {health.reason()}")
    if history:
        for health in states:
            lines += ["", f"{health.place} (last {len(health.recent)} events, oldest first):"]
            for event in health.recent:
                case = f" [{event.case}]" if event.case else ""
                lines.append(f"  {event.time}  {event.kind:<5}  {event.outcome:<20}  "
                             f"{event.cause or '-'}{case}".rstrip())
            if not health.recent:
                lines.append("  (none)")
    return "\n".join(lines) + "\n"
