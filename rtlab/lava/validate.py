"""Jobs and job templates against LAVA's own schema (``lava_common.schemas.validate`` of
Debian's lava-common, run by the system's Python: rtlab.lava.schema_check), with complaints
that name the file and line.

A template (``*.yaml.j2``) is rendered for every board and flavour it serves, from sample
boot files and the repository's whole suite, and each rendering is checked: a template can
be valid for one board and broken for another.
"""

import json
import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attr
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from rtlab.lava import templates
from rtlab.lava.plan import VIRTUAL_PREFIX, make_plan
from rtlab.lava.render import PHYSICAL_TEMPLATES, QEMU_TEMPLATE, BootSource, render_job
from rtlab.measure.suite import load_suite
from rtlab.platform.boards import BOARD_MODELS, FLAVOURS
from rtlab.util.paths import repo_display

SCHEMA_CHECK = Path(__file__).with_name("schema_check.py")
PYTHON_VARIABLE = "RTLAB_LAVA_PYTHON"
DEFAULT_PYTHON = "/usr/bin/python3"
_ACTION = re.compile(r"^(\w+)\[(\d+)\]$")


class LavaUnavailable(RuntimeError):
    """LAVA's schema cannot be loaded: lava-common is not installed for that Python."""


@attr.frozen
class Job:
    """One job to check: its text, where it came from, and how to name it."""

    where: str
    """file, or "file (rendered for board/flavour)"."""
    text: str
    rendered: bool = False


def lava_python() -> str:
    return os.environ.get(PYTHON_VARIABLE, DEFAULT_PYTHON)


def template_boards(name: str) -> list[str]:
    """The board tags a template of jobs/ serves."""
    if name == QEMU_TEMPLATE:
        return [VIRTUAL_PREFIX + model for model in sorted(BOARD_MODELS)]
    return [board for board, template in PHYSICAL_TEMPLATES.items() if template == name]


def sample_source(board: str) -> BootSource:
    """Boot files a template is rendered with when it is checked (no image needed)."""
    model = BOARD_MODELS[board.removeprefix(VIRTUAL_PREFIX)]
    base = f"https://lava-files.invalid/{board}"
    return BootSource(urls={"kernel": f"{base}/{model.kernel_image}",
                            "dtb": f"{base}/board.dtb", "ramdisk": f"{base}/initrd.cpio.gz",
                            "sdcard": f"{base}/sdcard.img" if board.startswith(VIRTUAL_PREFIX)
                            else None},
                      cmdline=f"console={model.console} quiet isolcpus=3")


def template_jobs(path: Path) -> list[Job]:
    """Renderings of the template at ``path`` for each board and flavour it serves."""
    boards = template_boards(path.name)
    if not boards:
        known = sorted({QEMU_TEMPLATE, *PHYSICAL_TEMPLATES.values()})
        raise templates.TemplateError(f"{repo_display(path)}: not a job template rtlab "
                                      f"renders (known: {', '.join(known)})")
    suite = load_suite()
    jobs = []
    for board in boards:
        for flavour in FLAVOURS:
            source = sample_source(board)
            plan = make_plan(board=board, flavour=flavour, suite=suite, scenarios=None,
                             intervals=None, duration_s=10, cmdline=source.cmdline,
                             image={"image_id": "0123456789abcdef"})
            text = render_job(plan, source, folder=path.parent)
            jobs.append(Job(f"{repo_display(path)} (rendered for {board}/{flavour})", text,
                            rendered=True))
    return jobs


def collect(paths: Sequence[Path]) -> tuple[list[Job], list[str]]:
    """The jobs under ``paths``: rendered jobs (``*.yaml``, ``*.yml``) and templates
    (``*.yaml.j2``); a folder gives those directly in it (its sub-folders hold the
    templates' parts). Also the problems found on the way (file:line: what)."""
    jobs: list[Job] = []
    problems: list[str] = []
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and (
                p.name.endswith((".yaml.j2", ".yaml", ".yml"))))
            if not found:
                problems.append(f"{repo_display(path)}: no job or job template in it")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            problems.append(f"{path}: no such file or folder")
    for path in files:
        if path.name.endswith(".j2"):
            try:
                jobs += template_jobs(path)
            except (templates.TemplateError, ValueError) as error:
                problems.append(str(error))
            continue
        try:
            jobs.append(Job(repo_display(path), path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as error:
            problems.append(f"{repo_display(path)}: cannot read: {error}")
    return jobs, problems


def parse(job: Job) -> CommentedMap:
    """The job's YAML with line numbers; a complaint names the line."""
    try:
        doc = YAML(typ="rt").load(job.text)
    except YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise ValueError(f"{job.where}:{line}: not YAML: "
                         f"{getattr(error, 'problem', None) or error}"
                         + _quote(job, line)) from None
    if not isinstance(doc, CommentedMap):
        raise ValueError(f"{job.where}:1: a LAVA job is a mapping, got "
                         f"{type(doc).__name__}")
    return doc


def _quote(job: Job, line: int) -> str:
    """The line itself, for a rendered job (whose lines are in no file)."""
    if not job.rendered:
        return ""
    lines = job.text.splitlines()
    return f" (rendered line {line}: {lines[line - 1].strip()[:100]!r})" if (
        0 < line <= len(lines)) else ""


def line_of(doc: Any, path: Iterable[str]) -> int:  # noqa: ANN401 - YAML
    """The line of the deepest node of ``path`` (voluptuous' path: keys, "actions[2]")."""
    node, line = doc, 1
    path = list(path)
    if path[:1] == ["actions"] and len(path) >= 3 and isinstance(doc.get("actions"),
                                                                 CommentedSeq):
        # LAVA names an unknown action type without its index: actions.boot.<method>
        for action in doc["actions"]:
            body = action.get(path[1]) if isinstance(action, CommentedMap) else None
            if isinstance(body, CommentedMap) and path[2] in (body.get("method"),
                                                              body.get("to")):
                key = "method" if body.get("method") == path[2] else "to"
                return body.lc.key(key)[0] + 1
    for step in path:
        keys: list[Any] = []
        match = _ACTION.match(step)
        if match:
            keys = [match.group(1), int(match.group(2))]
        elif step.isdigit() and isinstance(node, CommentedSeq):
            keys = [int(step)]
        else:
            keys = [step]
        for key in keys:
            if isinstance(node, CommentedMap) and key in node:
                line = node.lc.key(key)[0] + 1
                node = node[key]
            elif isinstance(node, CommentedSeq) and isinstance(key, int) and key < len(node):
                line = node.lc.item(key)[0] + 1
                node = node[key]
            else:
                return line
    return line


def run_on_lava_python(script: Path, payload: str, needs: str) -> Any:  # noqa: ANN401 - JSON
    """``script`` run by the system python that has Debian's LAVA packages (they are no
    PyPI packages), ``payload`` on its standard input; its JSON answer. ``needs``: what
    the script needs of LAVA, for the error when that python is missing."""
    python = lava_python()
    try:
        proc = subprocess.run([python, str(script)], input=payload, text=True,
                              capture_output=True, check=False, timeout=120)
    except FileNotFoundError:
        raise LavaUnavailable(f"{python} does not exist: {needs} needs the system's python3 "
                              f"with Debian's LAVA packages (scripts/bootstrap.sh; "
                              f"{PYTHON_VARIABLE} names another)") from None
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"{script.name} under {python} failed (exit "
                           f"{proc.returncode}): {(proc.stderr or proc.stdout).strip()[-800:]}"
                           ) from None


def schema_errors(docs: Sequence[tuple[str, Any]]) -> list[dict[str, Any] | None]:
    """LAVA's verdict on each (name, job): None or {"msg", "path"}."""
    payload = json.dumps([{"name": name, "job": _plain(doc)} for name, doc in docs])
    answer = run_on_lava_python(SCHEMA_CHECK, payload, "LAVA's job schema (lava-common)")
    if isinstance(answer, dict) and "unavailable" in answer:
        raise LavaUnavailable(f"LAVA's job schema is not importable: {answer['unavailable']} "
                              "(install Debian's lava-common: scripts/bootstrap.sh packages)")
    return [item["error"] for item in answer]


def _plain(node: Any) -> Any:  # noqa: ANN401 - YAML
    """ruamel's round-trip types as plain JSON values (LAVA's schema checks types)."""
    if isinstance(node, dict):
        return {str(key): _plain(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_plain(item) for item in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return str(node)


def validate(paths: Sequence[Path]) -> tuple[list[str], list[str]]:
    """(the jobs that passed, the problems: one line each, starting with file:line)."""
    jobs, problems = collect(paths)
    parsed: list[tuple[Job, CommentedMap]] = []
    for job in jobs:
        try:
            parsed.append((job, parse(job)))
        except ValueError as error:
            problems.append(str(error))
    passed = []
    verdicts = schema_errors([(job.where, doc) for job, doc in parsed]) if parsed else []
    for (job, doc), error in zip(parsed, verdicts, strict=True):
        if error is None:
            passed.append(job.where)
            continue
        line = line_of(doc, error["path"])
        key = ".".join(error["path"]) or "(the job)"
        problems.append(f"{job.where}:{line}: {key}: {error['msg']}" + _quote(job, line))
    return passed, problems
