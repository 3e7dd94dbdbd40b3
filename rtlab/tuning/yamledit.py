"""thresholds.yaml edited round-trip (ruamel.yaml): its levels below a board, the limits
they set, and writing new limits with comments, blank lines, key order, folded reasons and
anchors kept. A file is replaced only once the edited text loads and gives every case the
limit planned for it."""

import io
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.scalarstring import FoldedScalarString

from rtlab.measure.suite import Suite
from rtlab.tuning.evidence import Series
from rtlab.util.atomic import write_atomic
from rtlab.verdict.thresholds import METRICS, ThresholdsError, load_thresholds

# wrap written reasons like the hand-written ones
_REASON_WIDTH = 92

# A level of the file below the board, as (flavour, scenario, interval): (f, None, None) is
# the flavour, (f, s, None) a scenario (or rt-test), (f, s, i) an interval.
Node = tuple[str, str | None, int | None]


def node_name(node: Node) -> str:
    flavour, scenario, interval = node
    name = f"flavours.{flavour}"
    if scenario is not None:
        name += f".scenarios.{scenario}"
    if interval is not None:
        name += f".intervals.{interval}"
    return name

def level_of(flavour_node: CommentedMap, node: Node) -> CommentedMap | None:
    _, scenario, interval = node
    level: Any = flavour_node
    if scenario is not None:
        level = (level.get("scenarios") or {}).get(scenario)
        if interval is not None and isinstance(level, Mapping):
            level = (level.get("intervals") or {}).get(interval)
    return level if isinstance(level, CommentedMap) else None


def line_of(level: CommentedMap | None, key: str) -> int:
    if level is None or key not in level:
        return 0
    try:
        return level.lc.key(key)[0] + 1
    except (KeyError, TypeError):
        return 0


def limit_above(doc: CommentedMap, board_node: CommentedMap, metric: str) -> float | None:
    for level in (board_node, doc.get("defaults")):
        if isinstance(level, Mapping) and metric in level:
            return level[metric]
    return None


def round_trip_yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    # never re-wrap what people wrote; new reasons are wrapped by hand (_folded)
    yaml.width = 4096
    return yaml


def _indent(doc: CommentedMap) -> int:
    """The file's mapping indentation (what ``boards:`` is indented by)."""
    boards = doc.get("boards")
    col = getattr(getattr(boards, "lc", None), "col", 0) or 0
    return col if col > 0 else 2


def dump(yaml: YAML, doc: CommentedMap, original: str) -> str:
    yaml.indent(mapping=_indent(doc), sequence=_indent(doc) + 2, offset=_indent(doc))
    out = io.StringIO()
    yaml.dump(doc, out)
    text = out.getvalue()
    # a comment carried along with a moved anchor may leave blank lines at the end
    if original.endswith("\n") and not original.endswith("\n\n"):
        text = text.rstrip("\n") + "\n"
    return text


def _folded(text: str, column: int) -> FoldedScalarString:
    """A ``>-`` reason wrapped to the file's width at ``column`` (where its lines start)."""
    folded = FoldedScalarString(text)
    width = max(_REASON_WIDTH - column, 40)
    positions: list[int] = []
    start = 0
    while len(text) - start > width:
        cut = text.rfind(" ", start, start + width + 1)
        if cut <= start:
            cut = text.find(" ", start + width)
            if cut < 0:
                break
        # a fold is a single space between two words
        if text[cut - 1] != " " and cut + 1 < len(text) and text[cut + 1] != " ":
            positions.append(cut)
        start = cut + 1
    folded.fold_pos = positions  # type: ignore[attr-defined]
    return folded


def apply_limits(doc: CommentedMap, board_node: CommentedMap,
                 limits: Mapping[tuple[Node, str], float], reasons: Mapping[Node, str],
                 suite: Suite) -> None:
    """Set each (level, metric) of ``board_node`` to its new limit and each level's
    ``reason:``, creating the scenario and interval levels that do not exist yet."""
    indent = _indent(doc)
    order = [*suite.scenarios, *suite.rt_tests]
    _detach_alias_comments(doc)
    trailing = _trailing_comments(doc)
    for (node, metric), new in limits.items():
        level = _make_level(board_node["flavours"], node, order)
        value = int(new) if float(new).is_integer() else new
        if metric == "max_us":
            # measured on this lab's boards now: no longer provisional
            level.pop("provisional", None)
        if metric in level:
            level[metric] = value
        else:
            # metrics first, in the file's order, then reason and the levels below
            position = sum(1 for key in level if key in METRICS
                           and METRICS.index(key) < METRICS.index(metric))
            level.insert(position, metric, value)
    for node, reason in reasons.items():
        level = _make_level(board_node["flavours"], node, order)
        # boards(0) board(1) flavours(2) flavour(3), then two per level below; the text
        # goes one deeper than its key
        depth = 4 + (2 if node[1] is not None else 0) + (2 if node[2] is not None else 0)
        value = _folded(reason, (depth + 1) * indent)
        if "reason" in level:
            level["reason"] = value
        else:
            level.insert(sum(1 for key in level if key in METRICS), "reason", value)
    _restore_trailing(trailing)


def _make_level(flavours: CommentedMap, node: Node, order: list[str]) -> CommentedMap:
    flavour, scenario, interval = node
    level = flavours[flavour]
    if scenario is None:
        return _block(level)
    scenarios = _child(level, "scenarios", None)
    level = _child(scenarios, scenario, lambda key: order.index(key) if key in order
                   else len(order))
    if interval is None:
        return level
    intervals = _child(level, "intervals", None)
    return _child(intervals, interval, lambda key: key if isinstance(key, int) else 0)


def _block(level: CommentedMap) -> CommentedMap:
    # a level that changes gets a folded reason, which a flow mapping ({max_us: 300})
    # cannot hold
    level.fa.set_block_style()
    return level


def _child(parent: CommentedMap, key: Any, rank: Callable[[Any], Any] | None,  # noqa: ANN401
           ) -> CommentedMap:
    """``parent[key]``, created as an empty block mapping where missing: in ``rank`` order
    among its siblings when they are in that order themselves, else at the end."""
    existing = parent.get(key)
    if isinstance(existing, CommentedMap):
        return _block(existing)
    child = CommentedMap()
    position = len(parent)
    if rank is not None:
        ranks = [rank(k) for k in parent]
        if ranks == sorted(ranks):
            position = next((i for i, r in enumerate(ranks) if r > rank(key)), len(ranks))
    _block(parent).insert(position, key, child)
    return child


def _tail(level: CommentedMap) -> tuple[CommentedMap, Any] | None:
    """The mapping and key of the last line of ``level``'s block."""
    if not len(level):
        return None
    last = list(level)[-1]
    value = level[last]
    if isinstance(value, CommentedMap) and len(value) and not value.fa.flow_style():
        return _tail(value)
    return level, last


def _trailing_comments(doc: CommentedMap) -> list[tuple[CommentedMap, CommentedMap, Any, Any]]:
    """Each comment that follows a block (blank lines, the next section's comments): the
    outermost block it closes, and the mapping and key ruamel keeps it on (the block's
    last line), so that it can follow the block's new last line after an edit."""
    found: list[tuple[CommentedMap, CommentedMap, Any, Any]] = []

    def walk(level: CommentedMap, ancestors: list[CommentedMap]) -> None:
        for key, value in level.items():
            token = _token(level, key)
            # a comment on any other line is that line's own (an end-of-line note)
            owner = next((a for a in [*ancestors, level] if _is_tail(a, level, key)), None)
            if token is not None and owner is not None:
                found.append((owner, level, key, token))
            if isinstance(value, CommentedMap):
                walk(value, [*ancestors, level])

    walk(doc, [])
    return found


def _is_tail(block: CommentedMap, level: CommentedMap, key: Any) -> bool:  # noqa: ANN401
    # by identity: two levels with equal content are still two places in the file
    tail = _tail(block)
    return tail is not None and tail[0] is level and tail[1] == key


def _token(level: CommentedMap, key: Any) -> Any:  # noqa: ANN401 - ruamel's CommentToken
    items = level.ca.items.get(key)
    return items[2] if items and len(items) > 2 else None


def _restore_trailing(trailing: list[tuple[CommentedMap, CommentedMap, Any, Any]]) -> None:
    for owner, holder, key, token in trailing:
        tail = _tail(owner)
        # gone on purpose (an alias now spelt out), or still where it belongs
        if _token(holder, key) is not token or tail is None or _is_tail(owner, holder, key):
            continue
        holder.ca.items[key][2] = None
        new_holder, new_key = tail
        new_holder.ca.items.setdefault(new_key, [None, None, None, None])[2] = token


def _detach_alias_comments(doc: CommentedMap) -> None:
    """ruamel gives each alias of an anchored value a copy of the comment that follows the
    anchor, and writes the value with the comment of whichever site it meets last. Drop
    the copies, so that the comment stays where it is in the file when the anchor's own
    level changes (or is replaced, and the first alias spells the value out)."""
    seen: dict[int, Any] = {}

    def walk(level: CommentedMap) -> None:
        for key, value in level.items():
            if getattr(getattr(value, "anchor", None), "value", None) is not None:
                token = _token(level, key)
                if id(value) not in seen:
                    seen[id(value)] = token
                elif token is not None and token is seen[id(value)]:
                    del level.ca.items[key]
            if isinstance(value, CommentedMap):
                walk(value)

    walk(doc)


def write_checked(path: Path, text: str, suite: Suite, board: str,
                  planned: Iterable[tuple[Series, str, float]]) -> None:
    """Write ``text`` over ``path`` only once it loads and gives every case its planned
    limit (series, metric, limit); otherwise leave the file as it was and say why."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        tmp.write_text(text, encoding="utf-8")
        try:
            edited = load_thresholds(tmp, suite)
        except ThresholdsError as error:
            raise RuntimeError(f"{path}: the edited file would not load, left unchanged: "
                               f"{error}") from error
        for series, metric, limit in planned:
            got = edited.lookup(board, series.flavour, series.scenario,
                                series.interval_us).get(metric)
            if got is None or got.value != limit:
                raise RuntimeError(f"{path}: the edited file would give "
                                   f"{series.name(board)} {metric} "
                                   f"{got.value if got else None} rather than {limit}; "
                                   "left unchanged")
    finally:
        tmp.unlink(missing_ok=True)
    write_atomic(path, text)
    # what is on disk now is what was checked
    load_thresholds(path, suite)
