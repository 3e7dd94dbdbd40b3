"""Checking labgrid environment and exporter files the way rtlab uses them, before a lab
run does: labgrid itself names no line, and some mistakes it only warns about (an unknown
parameter) or meets first when a test session is already running (a missing image)."""

import difflib
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from string import Template
from typing import Any

import attr
import jinja2
from labgrid.factory import target_factory
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.error import MarkedYAMLError

from rtlab.util.yamlfile import YamlFileError, line_of, load_yaml

TOP_KEYS = ("targets", "images", "tools", "imports", "paths", "options", "features")
TARGET_KEYS = ("resources", "drivers", "options", "features")
TARGET = "main"
STRATEGY = "RTLabStrategy"
RTLAB_IMPORT = "rtlab.lab"
TEMPLATE_TAG = "!template"
# keys labgrid's target factory takes out of a class's parameters before creating it
_SPECIAL = {"resources": ("name",), "drivers": ("name", "bindings")}
# the exporter skips a group's "location"; a resource may name its class under "cls"
EXPORTER_LOCATION = "location"


def _registry() -> dict[str, dict[str, type]]:
    # importing rtlab.lab registers rtlab's own classes, as an environment's imports: do

    return {"resources": target_factory.resources, "drivers": target_factory.drivers}


def _unknown_class(kind: str, name: object, known: dict[str, type]) -> str:
    singular = kind.removesuffix("s")
    close = difflib.get_close_matches(str(name), list(known), n=3, cutoff=0.6)
    hint = (f"did you mean: {', '.join(close)}?" if close
            else f"expected a labgrid {singular} class or one {RTLAB_IMPORT} registers")
    return f"unknown {singular} class {name!r} ({hint})"


def _parameter_problems(cls: type, args: CommentedMap, extra: tuple[str, ...]) -> Iterator[
        tuple[Any, str]]:
    # labgrid drops unknown parameters with only a warning: a misspelt timeout would
    # silently fall back to the default
    fields = [f.name for f in attr.fields(cls) if f.name not in ("target", "name")]
    for key in args:
        if key not in (*fields, *extra):
            yield key, (f"unknown parameter {key!r} for {cls.__name__} "
                        f"(expected one of: {', '.join(sorted((*fields, *extra)))})")


@attr.define
class _Report:
    display: str
    problems: list[str] = attr.Factory(list)
    rendered: bool = False
    source_lines: list[int] | None = None
    """Source line of each line of a rendered template, when they are known."""

    def where(self, line: int) -> str:
        if self.rendered and self.source_lines is None:
            return f"{self.display}:{line} (of the rendered template)"
        if self.source_lines is not None and 0 < line <= len(self.source_lines):
            line = self.source_lines[line - 1]
        return f"{self.display}:{line}"

    def add(self, node: Any, key: Any, what: str) -> None:  # noqa: ANN401
        self.problems.append(f"{self.where(line_of(node, key))}: {what}")


def check_env_file(path: Path) -> list[str]:
    """Problems of the labgrid environment file ``path`` for rtlab, each ``file:line:
    what was expected``; empty when labgrid and rtlab's strategy can use it."""
    try:
        doc = load_yaml(path)
    except YamlFileError as error:
        return [str(error)]
    report = _Report(str(path))
    if not isinstance(doc, CommentedMap):
        report.add(doc, None, "expected a mapping with 'targets' (a labgrid environment)")
        return report.problems
    _check_tags(report, doc)
    for key in doc:
        if key not in TOP_KEYS:
            report.add(doc, key, f"unknown key {key!r} (expected one of: {', '.join(TOP_KEYS)})")
    imports = doc.get("imports", [])
    if isinstance(imports, str):
        imports = [imports]
    if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
        report.add(doc, "imports", "'imports' must be a list of module names or files")
        imports = []
    targets = doc.get("targets")
    if not isinstance(targets, CommentedMap) or TARGET not in targets:
        report.add(doc, "targets" if "targets" in doc else None,
                   f"'targets' must be a mapping with the target {TARGET!r} (the one rtlab "
                   "drives)")
        return report.problems
    rtlab_classes: list[str] = []
    for name, target in targets.items():
        if not isinstance(target, CommentedMap):
            report.add(targets, name, f"target {name!r} must be a mapping with 'resources' "
                       "and 'drivers'")
            continue
        for key in target:
            if key not in TARGET_KEYS:
                report.add(target, key, f"unknown key {key!r} in target {name!r} (expected "
                           f"one of: {', '.join(TARGET_KEYS)})")
        for kind in ("resources", "drivers"):
            rtlab_classes += _check_classes(report, target, kind, f"target {name!r}")
    if rtlab_classes and RTLAB_IMPORT not in imports:
        report.add(doc, "imports" if "imports" in doc else None,
                   f"{', '.join(sorted(set(rtlab_classes)))} need(s) 'imports: "
                   f"[{RTLAB_IMPORT}]', or labgrid does not know them")
    _check_strategy(report, doc, targets[TARGET])
    return report.problems


def _entries(report: _Report, node: Any, where: str) -> Iterator[  # noqa: ANN401
        tuple[Any, Any, Any, Any]]:
    """(node, key or index for the line, class name, parameters) of a ``resources:`` or
    ``drivers:`` section, in either of labgrid's spellings: a mapping by class, or a list
    of one-key mappings (or mappings with a ``cls``)."""
    if isinstance(node, CommentedMap):
        for cls, args in node.items():
            yield node, cls, cls, args
    elif isinstance(node, CommentedSeq):
        for index, item in enumerate(node):
            if isinstance(item, CommentedMap) and "cls" in item:
                yield node, index, item["cls"], item
            elif isinstance(item, CommentedMap) and len(item) == 1:
                ((cls, args),) = item.items()
                yield node, index, cls, args
            else:
                report.add(node, index, f"{where}: expected {{Class: {{parameters}}}} or a "
                           "mapping with 'cls'")


def _check_classes(report: _Report, target: CommentedMap, kind: str, where: str) -> list[str]:
    """Check one section; the rtlab classes it uses."""
    where = f"{where} {kind}"
    singular = kind.removesuffix("s")
    if kind not in target:
        report.add(target, None, f"{where}: missing (expected a mapping of {singular} "
                   "classes)")
        return []
    section = target[kind]
    if not isinstance(section, CommentedMap | CommentedSeq):
        report.add(target, kind, f"{where}: expected a mapping of {singular} classes")
        return []
    known = _registry()[kind]
    rtlab_classes = []
    for node, key, name, args in _entries(report, section, where):
        cls = known.get(name) if isinstance(name, str) else None
        if cls is None:
            report.add(node, key, f"{where}: {_unknown_class(kind, name, known)}")
            continue
        if cls.__module__.startswith("rtlab."):
            rtlab_classes.append(name)
        if not isinstance(args, CommentedMap):
            report.add(node, key, f"{where}: {name} must be a mapping of parameters "
                       "({} for none)")
            continue
        for param, what in _parameter_problems(cls, args, ("cls", *_SPECIAL[kind])):
            report.add(args, param, f"{where}: {what}")
    return rtlab_classes


def _check_strategy(report: _Report, doc: CommentedMap, target: Any) -> None:  # noqa: ANN401
    drivers = target.get("drivers") if isinstance(target, CommentedMap) else None
    if not isinstance(drivers, CommentedMap):
        return
    if STRATEGY not in drivers:
        report.add(drivers, None, f"target {TARGET!r} drivers: no {STRATEGY} (rtlab's test "
                   "suite reaches the board only through it)")
        return
    args = drivers[STRATEGY]
    default = attr.fields_dict(_registry()["drivers"][STRATEGY])["image"].default
    image = args.get("image", default) if isinstance(args, CommentedMap) else default
    # without `images:` the strategy flashes what LG_IMAGE names
    if "images" not in doc:
        return
    images = doc.get("images")
    if not isinstance(images, CommentedMap):
        report.add(doc, "images",
                   f"'images' must be a mapping with {image!r} (the {STRATEGY}'s image)")
    elif image not in images:
        report.add(doc, "images", f"'images' lacks {image!r}, the SD card image {STRATEGY} "
                   f"flashes (has: {', '.join(map(str, images)) or 'nothing'})")


def _check_tags(report: _Report, node: Any) -> None:  # noqa: ANN401
    """labgrid's loader knows one tag, ``!template``, and substitutes only ``$LG_*``
    variables and ``$BASE`` into it; anything else fails when the file is loaded."""
    items = (node.items() if isinstance(node, CommentedMap)
             else enumerate(node) if isinstance(node, CommentedSeq) else ())
    for key, value in items:
        if isinstance(value, TaggedScalar):
            if value.tag.value != TEMPLATE_TAG:
                report.add(node, key, f"unknown tag {value.tag.value} (expected "
                           f"{TEMPLATE_TAG} or none)")
                continue
            names = Template(str(value.value)).get_identifiers()
            bad = [n for n in names if not n.startswith("LG_") and n != "BASE"]
            if bad or not Template(str(value.value)).is_valid():
                report.add(node, key, f"{TEMPLATE_TAG} {value.value!r}: expected only $LG_* "
                           "variables and $BASE")
        else:
            _check_tags(report, value)


def render_exporter_file(path: Path) -> str:
    """The exporter file as labgrid-exporter sees it: rendered as Jinja2 with the
    settings and variables of labgrid's ``ResourceConfig`` and the exporter."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(path.parent)),
                             line_statement_prefix="#", line_comment_prefix="##",
                             undefined=jinja2.StrictUndefined)
    hostname = socket.gethostname()
    drop_ins = [str(p.relative_to(path.parent))
                for p in sorted(path.parent.glob(f"{path.name}.d/*.yaml"))]
    return env.get_template(path.name).render(
        env=os.environ, isolated=False, hostname=hostname, name=hostname, drop_ins=drop_ins)


def _source_lines(path: Path, rendered: str) -> list[int] | None:
    """Line statements (``#set``...) render as nothing, line comments (``##``) as empty
    lines; when that accounts for every rendered line, the template neither repeated nor
    included text, and each rendered line has its source line."""
    kept = [number for number, line in
            enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
            if not (line.lstrip().startswith("#") and not line.lstrip().startswith("##"))]
    return kept if len(kept) == len(rendered.splitlines()) else None


def check_exporter_file(path: Path) -> list[str]:
    """Problems of the labgrid exporter file ``path``, each ``file:line: what was
    expected``: template errors, and resources of classes labgrid does not know (the
    exporter would pass them on unchecked, and no client could use them)."""
    try:
        text = render_exporter_file(path)
    except jinja2.TemplateSyntaxError as error:
        return [f"{path}:{error.lineno}: invalid Jinja2 template: {error.message}"]
    except jinja2.TemplateError as error:
        return [f"{path}: the template does not render: {error}"]
    except OSError as error:
        return [f"{path}: cannot read: {error.strerror}"]
    report = _Report(str(path), rendered=True, source_lines=_source_lines(path, text))
    try:
        doc = YAML(typ="rt").load(text)
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        return [f"{report.where(mark.line + 1 if mark else 0)}: invalid YAML: {error.problem}"]
    if not isinstance(doc, CommentedMap) or not doc:
        return [f"{report.where(1)}: expected a mapping of groups (places) to their resources"]
    known = _registry()["resources"]
    for group_name, group in doc.items():
        if not isinstance(group, CommentedMap):
            report.add(doc, group_name, f"group {group_name!r} must be a mapping of resources")
            continue
        for name, params in group.items():
            if name == EXPORTER_LOCATION:
                continue
            where = f"{group_name}/{name}"
            if not isinstance(params, CommentedMap):
                report.add(group, name, f"{where}: expected a mapping of parameters (the "
                           "exporter skips an empty entry)")
                continue
            cls_name = params.get("cls", name)
            cls = known.get(cls_name) if isinstance(cls_name, str) else None
            if cls is None:
                report.add(params if "cls" in params else group, "cls" if "cls" in params
                           else name, f"{where}: {_unknown_class('resources', cls_name, known)}")
                continue
            for param, what in _parameter_problems(cls, params, ("cls",)):
                report.add(params, param, f"{where}: {what}")
    return report.problems
