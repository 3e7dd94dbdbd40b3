"""The Jinja2 templates of jobs/: one environment, YAML-safe filters, and errors that name
the template file and line (a template is code a lab edits by hand)."""

import json
import traceback
from pathlib import Path
from typing import Any

import jinja2

from rtlab.util.paths import REPO_ROOT, repo_display

JOBS_DIR = REPO_ROOT / "jobs"


class TemplateError(ValueError):
    """A template that cannot be rendered; the message starts with ``file:line:``."""


def yaml_str(value: object) -> str:
    """Any scalar as a YAML double-quoted string (JSON's quoting is YAML's)."""
    return json.dumps(str(value), ensure_ascii=False)


def literal(text: str, indent: int) -> str:
    """``text`` as a YAML literal block scalar (``|-``) whose lines are indented by
    ``indent`` spaces: shell scripts stay readable in the rendered job."""
    if text[:1].isspace():
        # YAML would then need an indentation indicator; no script of rtlab starts so
        raise ValueError(f"a literal block cannot start with white space: {text[:40]!r}")
    return "|-" + "".join("\n" + (" " * indent + line if line else "")
                          for line in text.split("\n"))


def environment(folder: Path = JOBS_DIR) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)
    env.filters["yaml_str"] = yaml_str
    env.filters["literal"] = literal
    return env


def render(name: str, folder: Path = JOBS_DIR, **values: Any) -> str:  # noqa: ANN401
    """Template ``name`` (a path under ``folder``) with ``values``; any fault of the
    template raises :class:`TemplateError` naming its file and line."""
    try:
        return environment(folder).get_template(name).render(**values)
    except jinja2.TemplateSyntaxError as error:
        where = repo_display(Path(error.filename)) if error.filename else f"{folder}/{name}"
        raise TemplateError(f"{where}:{error.lineno}: template syntax: {error.message}"
                            ) from None
    except jinja2.TemplateNotFound as error:
        raise TemplateError(f"{repo_display(folder)}: no template {error.name!r}") from None
    except (jinja2.UndefinedError, TypeError, ValueError) as error:
        where = _template_frame(error, folder) or f"{repo_display(folder / name)}"
        raise TemplateError(f"{where}: {type(error).__name__}: {error}") from None


def _template_frame(error: BaseException, folder: Path) -> str | None:
    """file:line of the innermost template line in the error's traceback (Jinja2 rewrites
    tracebacks so that template frames carry the template's file and line)."""
    found = None
    for frame in traceback.extract_tb(error.__traceback__):
        path = Path(frame.filename)
        if path.suffix == ".j2" and path.resolve().is_relative_to(folder.resolve()):
            found = f"{repo_display(path)}:{frame.lineno}"
    return found
