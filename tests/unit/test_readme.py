"""README.md is the front door: short, true to the package, every link good, and no
measured figure that does not say where it was measured.

- **Layout.** Every direct folder of ``rtlab/`` that holds an ``__init__.py`` has a row
  ```rtlab/<name>/``` in the README's ``| path | holds |`` table, and every such row names a
  folder that exists.
- **Length.** At most ``MAX_LINES`` lines (``wc -l``), code blocks included.
- **Figures.** The rule, kept simple on purpose: outside fenced code blocks (lines between
  two lines starting with three backticks), a line that holds a number followed by a unit
  of time or a percentage (``FIGURE``: ``86 %``, ``44.5 s``, ``12 µs``, ``15 min``, ``2 h``,
  also spelled out, ``3 minutes``) must link to ``docs/measured.md`` on that same line.
  So a figure lives in the headline table, whose every row links to the section of
  docs/measured.md that measured it, and one pasted into running text fails here. Code
  blocks are not running text: the two commands and the manual session hold command
  options, not measurements. A number without such a unit (``150 lines``, ``4 boards``,
  ``× 1.5``) is no figure. To quote a figure in prose, link its section on that line.
  A setting with such a unit (``100 µs`` intervals, ``10 s`` per case) counts as well: it
  belongs in docs/ or a code block, the README's prose names none.
- **Links.** Every relative link, ``[text](path)`` or ``![alt](path)``, names a file or
  folder of the repository, and its ``#anchor`` a heading of that markdown file as mkdocs
  slugs it (mkdocs checks the anchors of docs/ with --strict, but the README is outside
  docs/). Absolute URLs (``https:``, ``mailto:``) are not fetched.
"""

import re
import unicodedata
from pathlib import Path

import pytest

from rtlab.util.paths import REPO_ROOT
from tests.markdown_table import table

README = REPO_ROOT / "README.md"
MAX_LINES = 150
MEASURED = "docs/measured.md"
FENCE = "```"
# a number (not the tail of a word such as arm64) and a unit of time or a percentage
FIGURE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?[ \t\u00a0]*"
                    r"(?:%|[µu]s|ns|ms|s|sec|seconds?|min|minutes?|h|hours?)(?!\w)")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
LAYOUT_ROW = re.compile(r"`rtlab/([^/`]+)/`")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith(FENCE):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def unlinked_figures(text: str) -> list[str]:
    """``README.md:<n>: <line>`` for each prose line with a figure and no link to
    docs/measured.md."""
    return [f"README.md:{number}: {line.strip()}" for number, line in prose_lines(text)
            if FIGURE.search(line) and f"]({MEASURED}" not in line]


def slug(heading: str) -> str:
    """A heading's anchor as mkdocs (Python-Markdown's toc) makes it: the text as
    rendered (code spans keep their text, emphasis and link markup go), ASCII only, no
    punctuation, lower case, runs of spaces and hyphens as one hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    return {slug(line.lstrip("#")) for _, line in prose_lines(path.read_text())
            if re.match(r"#{1,6} ", line)}


def broken_links(text: str, base: Path) -> list[str]:
    """``README.md:<n>: <target>: why`` for each relative link whose file or anchor is
    not there."""
    broken = []
    for number, line in prose_lines(text):
        for target in LINK.findall(line):
            if SCHEME.match(target):
                continue
            path_part, _, anchor = target.partition("#")
            path = base / path_part if path_part else README
            if not path.exists():
                broken.append(f"README.md:{number}: {target}: no file {path_part}")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"README.md:{number}: {target}: no heading #{anchor} in "
                              f"{path.relative_to(REPO_ROOT)}")
    return broken


def package_folders() -> set[str]:
    return {folder.name for folder in (REPO_ROOT / "rtlab").iterdir()
            if (folder / "__init__.py").is_file()}


def layout_folders(text: str) -> set[str]:
    """The rtlab/ folders the Layout table has a row for (its first column)."""
    rows = table(text, "path | holds")
    return {name for row in rows for name in LAYOUT_ROW.findall(row[0])}


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text()


def test_every_package_folder_has_a_layout_row(readme: str) -> None:
    missing = sorted(package_folders() - layout_folders(readme))
    assert not missing, ("README.md, Layout: no row for the package folder(s) "
                         + ", ".join(f"`rtlab/{name}/`" for name in missing))


def test_every_layout_row_names_a_package_folder(readme: str) -> None:
    gone = sorted(layout_folders(readme) - package_folders())
    assert not gone, ("README.md, Layout: a row for " + ", ".join(f"`rtlab/{name}/`"
                                                                  for name in gone)
                      + ", which is no folder of rtlab/ with an __init__.py")


def test_readme_is_short(readme: str) -> None:
    lines = readme.splitlines()
    assert len(lines) <= MAX_LINES, (
        f"README.md has {len(lines)} lines, at most {MAX_LINES}: line {MAX_LINES + 1} on "
        f"({lines[MAX_LINES].strip()!r}) is over; move the detail into docs/")


def test_every_figure_links_to_where_it_was_measured(readme: str) -> None:
    unlinked = unlinked_figures(readme)
    assert not unlinked, (f"figures in running text without a link to {MEASURED} on their "
                          "line (put them in the headline table, or link their section):\n"
                          + "\n".join(unlinked))


def test_every_relative_link_is_there(readme: str) -> None:
    broken = broken_links(readme, README.parent)
    assert not broken, "README.md: links to nothing:\n" + "\n".join(broken)


@pytest.mark.parametrize("line", [
    "rtlab's overhead came to 44.5 s against LAVA's 44.1 s.",
    "the gate failed 86 % of the cases",
    "no wake-up over 150 µs in 12 min",
    "a cold build takes 8-15 minutes on two cores",
    "a case stops within 1 h",
])
def test_the_rule_finds_a_pasted_figure(line: str) -> None:
    assert unlinked_figures(f"# t\n\n{line}\n") == [f"README.md:3: {line}"]


@pytest.mark.parametrize("text", [
    "```sh\nrtlab run --duration 60 --window 60s  # 10 s per case\n```\n",
    "at most 150 lines, 4 boards, × 1.5, arm64 and i.MX6Q boards, 2/h\n",
    f"| gate | 86 % | [2026-11-28]({MEASURED}#one-error-budget) |\n",
])
def test_the_rule_leaves_other_numbers_alone(text: str) -> None:
    assert unlinked_figures(text) == []


def test_slugs_as_mkdocs_does() -> None:
    assert slug(" One error budget, tuning in the loop (issue 44)") == \
        "one-error-budget-tuning-in-the-loop-issue-44"
    assert slug(" How a step is decided (`rtlab/bisect/decide.py`)") == \
        "how-a-step-is-decided-rtlabbisectdecidepy"
