"""Reading JSON files so that every complaint can name the file and line it is about.

The standard decoder keeps no positions; its pure-Python scanner lets the object and array
parsers be replaced, which is where each value's offset in the text is known.
"""

import json
import json.decoder
import json.scanner
from collections.abc import Callable
from pathlib import Path
from typing import Any


class JsonFileError(ValueError):
    """Bad content in a JSON file; the message starts with ``file:line:`` (or ``file:``
    when no line applies, e.g. an unreadable file)."""


class _Located(ValueError):
    def __init__(self, line: int, what: str) -> None:
        super().__init__(what)
        self.line = line


class JsonObject(dict[str, Any]):
    """A JSON object that remembers the line it starts on and the line of each value."""

    line: int = 0
    lines: dict[str, int]


class JsonArray(list[Any]):
    """A JSON array that remembers the line it starts on and the line of each item."""

    line: int = 0
    lines: list[int]


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


_Scan = Callable[[str, int], tuple[Any, int]]


class _Decoder(json.JSONDecoder):
    def __init__(self) -> None:
        super().__init__(parse_constant=_no_constant)
        self.parse_object = self._object
        self.parse_array = self._array
        self.scan_once = json.scanner.py_make_scanner(self)

    @staticmethod
    def _recording(scan_once: _Scan, offsets: list[int]) -> _Scan:
        def scan(text: str, index: int) -> tuple[Any, int]:
            offsets.append(index)
            return scan_once(text, index)
        return scan

    def _object(self, s_and_end: tuple[str, int], strict: bool, scan_once: _Scan,
                object_hook: Any, object_pairs_hook: Any,  # noqa: ANN401
                memo: dict[str, str] | None = None) -> tuple[JsonObject, int]:
        text, start = s_and_end
        offsets: list[int] = []
        pairs, end = json.decoder.JSONObject(s_and_end, strict,
                                             self._recording(scan_once, offsets),
                                             None, list, memo)
        node = JsonObject()
        node.line = _line(text, start - 1)
        node.lines = {}
        for (key, value), offset in zip(pairs, offsets, strict=True):
            # a key written twice means one of the two values is silently lost
            if key in node:
                raise _Located(_line(text, offset), f"duplicate key {key!r}")
            node[key] = value
            node.lines[key] = _line(text, offset)
        return node, end

    def _array(self, s_and_end: tuple[str, int], scan_once: _Scan) -> tuple[JsonArray, int]:
        text, start = s_and_end
        offsets: list[int] = []
        items, end = json.decoder.JSONArray(s_and_end, self._recording(scan_once, offsets))
        node = JsonArray(items)
        node.line = _line(text, start - 1)
        node.lines = [_line(text, offset) for offset in offsets[:len(items)]]
        return node, end


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def load_json(path: Path, what: str) -> Any:  # noqa: ANN401 - untyped by nature
    """Load ``path`` (a ``what``, e.g. "image manifest") with line numbers kept in every
    object and array; every complaint names the file and, where known, the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        why = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise JsonFileError(f"{path}: cannot read the {what}: {why}") from error
    try:
        return _Decoder().decode(text)
    except json.JSONDecodeError as error:
        raise JsonFileError(f"{path}:{error.lineno}: invalid {what}, not JSON: "
                            f"{error.msg}") from error
    except _Located as error:
        raise JsonFileError(f"{path}:{error.line}: invalid {what}: {error}") from error
    except ValueError as error:
        raise JsonFileError(f"{path}: invalid {what}: {error}") from error


def json_line_of(node: Any, key: str | int | None = None) -> int:  # noqa: ANN401
    """1-based line of ``node`` itself or of the value at ``key`` inside it (0 if unknown)."""
    if isinstance(node, JsonObject):
        return node.lines.get(key, node.line) if isinstance(key, str) else node.line
    if isinstance(node, JsonArray):
        if isinstance(key, int) and 0 <= key < len(node.lines):
            return node.lines[key]
        return node.line
    return 0


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
               dict: "an object", list: "an array", type(None): "null"}


def _describe(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def require(path: Path, node: Any, key: str, kinds: tuple[type, ...],  # noqa: ANN401
            where: str) -> Any:  # noqa: ANN401
    """``node[key]``, which must be one of ``kinds``; ``where`` names ``node`` in the
    message (e.g. "image manifest 'kernel'"). Complaints say the file, the line and what
    was expected."""
    names = [_TYPE_NAMES.get(kind, kind.__name__) for kind in kinds]
    if int in kinds and float in kinds:
        names.remove("an integer")
    expected = " or ".join(names)
    if not isinstance(node, dict):
        raise JsonFileError(f"{path}:{json_line_of(node)}: {where} must be an object, "
                            f"got {_describe(node)}")
    if key not in node:
        raise JsonFileError(f"{path}:{json_line_of(node)}: {where} lacks {key!r} "
                            f"(expected {expected})")
    value = node[key]
    # JSON has no separate booleans-as-integers: true is never a count
    wrong = isinstance(value, bool) and bool not in kinds
    if wrong or not isinstance(value, kinds):
        raise JsonFileError(f"{path}:{json_line_of(node, key)}: {where} {key!r} must be "
                            f"{expected}, got {_describe(value)}")
    return value
