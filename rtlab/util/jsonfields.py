"""Strict reading of the JSON files rt-tests write: typed access that names the key path
in every complaint, no duplicate keys, no NaN or Infinity."""

import math
from collections.abc import Callable
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

import attr


def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for json.loads: a key written twice is a garbled file."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def no_constants(name: str) -> None:
    """``parse_constant`` for json.loads: rt-tests never writes NaN or Infinity as a
    figure (a thread without samples prints a bare ``nan``, which is not JSON at all)."""
    raise ValueError(f"{name} is not a number")


@attr.frozen
class Fields:
    """Typed access to one JSON object; every complaint names the key path and goes
    through ``fail``, which builds the caller's own error."""

    node: dict[str, Any]
    prefix: str
    fail: Callable[[str], Exception]

    def _get(self, *names: str) -> Any:  # noqa: ANN401
        for name in names:
            if name in self.node:
                return self.node[name]
        raise self.fail(f"missing '{self.prefix}{names[-1]}'")

    def integer(self, name: str, low: int | None = 0) -> int:
        value = self._get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(f"'{self.prefix}{name}' must be an integer, got {value!r}")
        if low is not None and value < low:
            raise self.fail(f"'{self.prefix}{name}' must be >= {low}, got {value}")
        return value

    def number(self, name: str) -> float:
        value = self._get(name)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise self.fail(f"'{self.prefix}{name}' must be a number, got {value!r}")
        if value < 0 or not math.isfinite(value):
            raise self.fail(f"'{self.prefix}{name}' must be a finite number >= 0, got {value}")
        return float(value)

    def string(self, *names: str) -> str:
        value = self._get(*names)
        if not isinstance(value, str):
            raise self.fail(f"'{self.prefix}{names[-1]}' must be a string, got {value!r}")
        return value

    def date(self, name: str) -> datetime:
        text = self.string(name)
        try:
            return parsedate_to_datetime(text)
        except (TypeError, ValueError) as error:
            raise self.fail(f"'{self.prefix}{name}' is not a date: {text!r}") from error

    def mapping(self, name: str) -> dict[str, Any]:
        value = self._get(name)
        if not isinstance(value, dict):
            raise self.fail(f"'{self.prefix}{name}' must be an object, got {value!r}")
        return value
