"""Loading YAML files so that every complaint can name the file and line it is about."""

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError


class YamlFileError(ValueError):
    """Bad content in a YAML file; the message starts with ``file:line:``."""


def load_yaml(path: Path, display: str | None = None) -> Any:  # noqa: ANN401 - untyped by nature
    """Round-trip load so that mappings and sequences keep their line numbers. Errors name
    the file as ``display`` (default: the path as given)."""
    display = str(path) if display is None else display
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise YamlFileError(f"{display}: cannot read: {error.strerror}") from error
    try:
        return YAML(typ="rt").load(text)
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else 0
        raise YamlFileError(f"{display}:{line}: invalid YAML: {error.problem}") from error


def line_of(node: Any, key: Any = None) -> int:  # noqa: ANN401
    """1-based line of ``node`` itself or of ``key`` inside it (0 when unknown)."""
    if isinstance(node, CommentedMap | CommentedSeq):
        if key is not None:
            try:
                return node.lc.key(key)[0] + 1 if isinstance(node, CommentedMap) else (
                    node.lc.item(key)[0] + 1)
            except (KeyError, IndexError, TypeError):
                pass
        return node.lc.line + 1
    return 0
