"""A targeted scan of a kernel tree's Kconfig files: where a symbol is defined, what it
depends on, whether it has a prompt and what selects it. Enough to say *why* an option
requested by a fragment did not land in the final .config.

Not a Kconfig implementation (kconfiglib 14.1.0 cannot parse 6.12's Kconfig: the
``modules`` keyword). What it does: follows ``source`` statements from the top-level
``Kconfig`` with ``$(SRCARCH)`` set to the board's ARCH (so the other architectures'
definitions are not used), keeps the conditions that enclose a definition (``if`` blocks,
``depends on`` of ``menu`` and ``choice``, ``visible if``, also across ``source``), and
evaluates ``depends on`` expressions (``!``, ``&&``, ``||``, ``=``, ``!=``, ``<``, ``>``,
parentheses) against the final .config. What it does not cover: macros and functions in
expressions (``$(cc-option,…)``: shown, not evaluated), defaults and ``range`` limits, the
effect of ``imply``, choice resolution beyond naming the choice, and the reduction of ``y``
to ``m`` by tristate dependencies other than through the expression's value.
"""

import re
from pathlib import Path

import attr

_ENTRY = re.compile(r"^\s*(config|menuconfig)\s+([A-Za-z0-9_]+)\s*$")
_KEYWORD = re.compile(r"^\s*([a-z_-]+)\b\s*(.*?)\s*$")
_SOURCE = re.compile(r'^\s*(source|rsource|osource|orsource)\s+"([^"]+)"')
_TYPES = {"bool", "tristate", "string", "hex", "int"}
_IF_SUFFIX = re.compile(r'^(?:"(?:[^"\\]|\\.)*"|\'[^\']*\')\s*(?:if\s+(.*))?$')
_TOKEN = re.compile(r'\s*(\|\||&&|!=|<=|>=|[!()=<>]|"(?:[^"\\]|\\.)*"|\'[^\']*\''
                    r'|\$\([^)]*\)|[A-Za-z0-9_.+-]+)')


@attr.frozen
class Condition:
    kind: str
    """``depends on``, ``if`` (an enclosing if block), ``menu depends on``, ``choice depends
    on``, ``visible if``, ``prompt if``."""
    expr: str
    file: str
    line: int


@attr.frozen
class Definition:
    symbol: str
    file: str
    """Relative to the tree."""
    line: int
    prompt: bool
    conditions: tuple[Condition, ...]
    """Enclosing conditions first, then the entry's own ``depends on`` and prompt ``if``."""
    choice: str | None = None
    """``file:line`` of the enclosing choice, when the symbol is a choice member."""


@attr.frozen
class Select:
    selector: str
    target: str
    condition: str | None
    file: str
    line: int


class KconfigIndex:
    """Definitions and selects of every symbol reachable from ``<tree>/Kconfig`` for one
    ARCH."""

    def __init__(self, tree: Path, arch: str) -> None:
        self.tree = tree
        self.arch = arch
        self.definitions: dict[str, list[Definition]] = {}
        self.selects: dict[str, list[Select]] = {}
        self._seen: set[Path] = set()
        self._scan(tree / "Kconfig", ())

    # -- parsing ---------------------------------------------------------------------------

    def _lines(self, path: Path) -> list[tuple[int, str]]:
        """Logical lines (backslash continuations joined) with their first line number."""
        result = []
        pending, start = "", 0
        for number, raw in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if not pending:
                start = number
            if raw.endswith("\\"):
                pending += raw[:-1] + " "
                continue
            result.append((start, pending + raw))
            pending = ""
        if pending:
            result.append((start, pending))
        return result

    def _scan(self, path: Path, inherited: tuple[Condition, ...]) -> None:
        if path in self._seen or not path.is_file():
            return
        self._seen.add(path)
        rel = str(path.relative_to(self.tree))
        # frames: [kind, conditions, file:line]; an entry inherits every frame's conditions
        frames: list[tuple[str, list[Condition], str]] = []
        entry: dict | None = None
        block: list[Condition] | None = None   # where a `depends on` line attaches
        help_indent: int | None = None
        in_help = False

        def close() -> None:
            nonlocal entry
            if entry is not None:
                definition = Definition(
                    symbol=entry["symbol"], file=rel, line=entry["line"],
                    prompt=entry["prompt"],
                    conditions=entry["enclosing"] + tuple(entry["own"]),
                    choice=entry["choice"])
                self.definitions.setdefault(definition.symbol, []).append(definition)
            entry = None

        def enclosing() -> tuple[Condition, ...]:
            return inherited + tuple(c for _, conds, _ in frames for c in conds)

        for number, line in self._lines(path):
            if in_help:
                if not line.strip():
                    continue
                indent = len(line.expandtabs()) - len(line.expandtabs().lstrip())
                if help_indent is None:
                    help_indent = indent
                    continue
                if indent >= help_indent:
                    continue
                in_help = False
            stripped = line.split("#", 1)[0].strip() if not line.lstrip().startswith(
                ("prompt", "bool", "tristate", "string", "int", "hex", "menu", "comment",
                 "mainmenu")) else line.strip()
            if not stripped:
                continue
            if match := _ENTRY.match(stripped):
                close()
                choice = next((where for kind, _, where in reversed(frames)
                               if kind == "choice"), None)
                entry = {"symbol": match.group(2), "line": number, "prompt": False,
                         "enclosing": enclosing(), "own": [], "choice": choice}
                block = entry["own"]
                continue
            if match := _SOURCE.match(stripped):
                close()
                block = None
                target = match.group(2).replace("$(SRCARCH)", self.arch)
                base = path.parent if match.group(1) in ("rsource", "orsource") else self.tree
                for found in sorted(base.glob(target)) if "*" in target else [base / target]:
                    self._scan(found, enclosing())
                continue
            match = _KEYWORD.match(stripped)
            if match is None:
                continue
            keyword, rest = match.groups()
            if keyword in ("help", "---help---"):
                in_help, help_indent = True, None
                continue
            if keyword in ("if", "menu", "choice"):
                close()
                where = f"{rel}:{number}"
                conds: list[Condition] = []
                if keyword == "if":
                    conds.append(Condition("if", rest, rel, number))
                frames.append((keyword, conds, where))
                block = conds if keyword != "if" else None
                continue
            if keyword in ("endif", "endmenu", "endchoice"):
                close()
                block = None
                if frames:
                    frames.pop()
                continue
            if keyword in ("comment", "mainmenu"):
                close()
                block = []   # a comment's own `depends on` belongs to nobody we track
                continue
            if keyword == "depends" and rest.startswith("on") and block is not None:
                kind = "depends on"
                if entry is None and frames and block is frames[-1][1]:
                    kind = f"{frames[-1][0]} depends on"
                block.append(Condition(kind, rest[2:].strip(), rel, number))
                continue
            if keyword == "visible" and rest.startswith("if") and block is not None:
                block.append(Condition("visible if", rest[2:].strip(), rel, number))
                continue
            if entry is None:
                continue
            if keyword in _TYPES or keyword == "prompt":
                prompt = _IF_SUFFIX.match(rest)
                if rest and prompt is not None:
                    entry["prompt"] = True
                    if prompt.group(1):
                        entry["own"].append(Condition("prompt if", prompt.group(1).strip(),
                                                      rel, number))
                continue
            if keyword == "select":
                target, _, condition = rest.partition(" if ")
                self.selects.setdefault(target.strip(), []).append(Select(
                    entry["symbol"], target.strip(), condition.strip() or None, rel, number))
        close()

    # -- explaining -------------------------------------------------------------------------

    def explain(self, symbol: str, requested: str, values: dict[str, str]) -> list[str]:
        """Why ``symbol`` (without ``CONFIG_``) did not get ``requested`` (``n`` for "is not
        set"), given the final .config ``values`` (symbol → value, without ``CONFIG_``):
        one ``file:line: …`` line per reason Kconfig gives, or a note that it gives none."""
        definitions = self.definitions.get(symbol)
        if not definitions:
            return [f"no 'config {symbol}' in this tree's Kconfig for ARCH={self.arch} "
                    "(misspelt, renamed, removed, or another architecture's)"]
        selected_by = [s for s in self.selects.get(symbol, ())
                       if evaluate(s.selector, values) > 0 and (
                           s.condition is None or evaluate(s.condition, values) > 0)]
        if requested == "n":
            if selected_by:
                return [self._selected(s, values) for s in selected_by[:5]]
            if not any(d.prompt for d in definitions):
                return [f"{d.file}:{d.line}: has no prompt: its default decides, a fragment "
                        "cannot switch it off" for d in definitions[:1]]
            return [f"{d.file}:{d.line}: Kconfig names no reason (a default of another "
                    "option, or a choice)" for d in definitions[:1]]
        wanted = {"y": 2, "m": 1}.get(requested, 1)
        reasons = []
        for definition in definitions:
            for cond in definition.conditions:
                value = evaluate(cond.expr, values)
                if value is not None and value < wanted:
                    reasons.append(f"{cond.file}:{cond.line}: {cond.kind} "
                                   f"{annotate(cond.expr, values)}"
                                   + (f" (in the block for {symbol} at {definition.file}:"
                                      f"{definition.line})" if cond.file != definition.file
                                      or cond.kind not in ("depends on", "prompt if")
                                      else ""))
        if reasons:
            return _unique(reasons)
        if not any(d.prompt for d in definitions):
            selects = self.selects.get(symbol, [])
            names = ", ".join(f"{annotate(s.selector, values)} ({s.file}:{s.line})"
                              for s in selects[:6]) + (" …" if len(selects) > 6 else "")
            first = definitions[0]
            return [f"{first.file}:{first.line}: has no prompt: only set by `select` "
                    f"({'selected by ' + names if names else 'nothing selects it'})"]
        unevaluated = [f"{c.file}:{c.line}: {c.kind} {annotate(c.expr, values)} (not "
                       "evaluated here)" for d in definitions for c in d.conditions
                       if evaluate(c.expr, values) is None]
        if unevaluated:
            return _unique(unevaluated)
        choice = next((d.choice for d in definitions if d.choice), None)
        if choice and requested in ("y", "m"):
            return [f"{definitions[0].file}:{definitions[0].line}: member of the choice at "
                    f"{choice}: another member was chosen (set the others to 'is not set')"]
        first = definitions[0]
        return [f"{first.file}:{first.line}: dependencies met; Kconfig names no reason "
                "(a range, a type mismatch or a string value written differently?)"]


    def _selected(self, select: Select, values: dict[str, str], depth: int = 0) -> str:
        """``file:line: selected by X [=y]``; when X has no prompt of its own (only set by
        another select), the chain up to a symbol a fragment can switch off."""
        text = (f"{select.file}:{select.line}: selected by "
                f"{annotate(select.selector, values)}"
                + (f" if {annotate(select.condition, values)}" if select.condition else ""))
        definitions = self.definitions.get(select.selector, [])
        if depth < 4 and definitions and not any(d.prompt for d in definitions):
            above = [s for s in self.selects.get(select.selector, ())
                     if evaluate(s.selector, values) and (
                         s.condition is None or evaluate(s.condition, values))]
            if above:
                text += f" (no prompt), which is {self._selected(above[0], values, depth + 1)}"
        return text


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _is_symbol(token: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9_]+", token)) and token not in ("y", "m", "n") \
        and not re.fullmatch(r"-?\d+|0[xX][0-9a-fA-F]+", token)


def annotate(expr: str, values: dict[str, str]) -> str:
    """The expression with each symbol's value in the final .config, as menuconfig shows
    it: ``EXPERT [=n] && ARCH_SUPPORTS_RT [=y]``."""
    out = []
    for token in _TOKEN.findall(expr):
        out.append(f"{token} [={values.get(token, 'n')}]" if _is_symbol(token) else token)
    text = " ".join(out)
    return re.sub(r"\( ", "(", re.sub(r" \)", ")", re.sub(r"! ", "!", text)))


def evaluate(expr: str, values: dict[str, str]) -> int | None:
    """Tristate value (0 n, 1 m, 2 y) of a Kconfig expression; None when it cannot be
    evaluated here (macros, syntax this scan does not know)."""
    tokens = _TOKEN.findall(expr)
    if "".join(tokens).replace(" ", "") != re.sub(r"\s+", "", expr) or any(
            t.startswith("$(") for t in tokens):
        return None
    position = 0

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        position += 1
        return tokens[position - 1]

    def text_of(token: str) -> str:
        if token[:1] in "\"'":
            return token[1:-1]
        return values.get(token, "n") if _is_symbol(token) else token

    def tristate(text: str) -> int:
        return {"y": 2, "m": 1}.get(text, 0)

    def primary() -> int:
        token = take()
        if token == "(":
            value = disjunction()
            if take() != ")":
                raise ValueError("unbalanced")
            return value
        if token == "!":
            return 2 - primary()
        if peek() in ("=", "!=", "<", ">", "<=", ">="):
            operator, left, right = take(), text_of(token), text_of(take())
            try:
                a: object = int(left, 0)
                b: object = int(right, 0)
            except ValueError:
                a, b = left, right
            result = {"=": a == b, "!=": a != b}.get(operator)
            if result is None:
                if type(a) is not type(b):
                    return 0
                result = {"<": a < b, ">": a > b, "<=": a <= b,  # type: ignore[operator]
                          ">=": a >= b}[operator]  # type: ignore[operator]
            return 2 if result else 0
        return tristate(text_of(token))

    def conjunction() -> int:
        value = primary()
        while peek() == "&&":
            take()
            value = min(value, primary())
        return value

    def disjunction() -> int:
        value = conjunction()
        while peek() == "||":
            take()
            value = max(value, conjunction())
        return value

    try:
        value = disjunction()
    except (IndexError, ValueError):
        return None
    return value if position == len(tokens) else None
