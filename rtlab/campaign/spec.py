"""A campaign file (``campaigns/<name>.yaml``): a study across kernel variants, as data.

A campaign names its kernel **variants** (a flavour of ``kernel/flavours.yaml``, that
flavour plus extra fragments of ``kernel/configs/``, or Debian's stock or RT kernel), the
**boards**, the suite's **scenarios** and **intervals**, how long each case runs and how
often each variant is measured (``repeat``: a fresh boot each time, so that run-to-run
spread is measured, not guessed), and the **pairs** the report compares. It is read
strictly, every complaint with file:line: a misspelt flavour, board, scenario or key that
were silently skipped would leave a variant unmeasured while the report looks complete.

A variant's name becomes the ``flavour`` of its results (``board/<variant>/scenario/
interval``): its own series in the results store, never mixed with the pipeline's ``std``
and ``rt`` series (which is why those two names are refused). Its limits are the
thresholds.yaml flavour ``thresholds:`` names (default: the kernel flavour's own name, or
``std``/``rt`` for a Debian kernel)."""

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attr
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from rtlab.kernel import spec as kernel_spec
from rtlab.measure.suite import Suite, load_suite
from rtlab.platform.boards import BOARD_MODELS, FLAVOURS
from rtlab.util.paths import REPO_ROOT, repo_display
from rtlab.util.yamlfile import YamlFileError, line_of, load_yaml
from rtlab.verdict.thresholds import Thresholds, ThresholdsError, load_thresholds

CAMPAIGNS_DIR = REPO_ROOT / "campaigns"
TOP_KEYS = ("description", "variants", "boards", "scenarios", "intervals_us", "duration_s",
            "repeat", "compare", "quantiles", "confidence")
TOP_REQUIRED = ("description", "variants", "boards", "scenarios", "intervals_us",
                "duration_s", "compare")
VARIANT_KEYS = ("description", "flavour", "fragments", "debian", "thresholds")
PAIR_KEYS = ("baseline", "candidate")
# the quantiles a pair's table compares where the runs are long enough (rtlab.verdict.comparison
# MIN_WAKEUPS_BEYOND), and the family confidence of one load's table
DEFAULT_QUANTILES = (0.99, 0.999, 0.9999)
DEFAULT_CONFIDENCE = 0.95
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


class CampaignError(YamlFileError):
    """A bad campaign file; the message starts with ``file:line:``."""


@attr.frozen
class Variant:
    """One kernel of a campaign."""

    name: str
    description: str
    flavour: str | None
    """The kernel/flavours.yaml flavour it is built from (None: a Debian kernel)."""
    fragments: tuple[str, ...]
    """Fragments of kernel/configs/ on top of the flavour's, in merge order."""
    debian: str | None
    """``std`` or ``rt``: Debian's kernel package for the board (None: built)."""
    thresholds: str
    """The thresholds.yaml flavour it is judged by."""
    line: int = 0

    @property
    def image_flavour(self) -> str:
        """The image's flavour (std, rt): the Debian package class, or the built flavour's
        (kernel/flavours.yaml ``thresholds:``)."""
        if self.debian is not None:
            return self.debian
        assert self.flavour is not None
        return kernel_spec.flavour(self.flavour).thresholds

    def identity(self, campaign: str) -> dict[str, Any]:
        """What kernel.json, the image manifest and every result record carry of it."""
        return {"name": self.name, "campaign": campaign,
                "source": "debian" if self.debian is not None else "build",
                "kernel_flavour": self.flavour, "fragments": list(self.fragments),
                "debian": self.debian, "thresholds": self.thresholds}


@attr.frozen
class Pair:
    baseline: str
    candidate: str

    @property
    def name(self) -> str:
        return f"{self.candidate} vs {self.baseline}"


@attr.frozen
class Campaign:
    name: str
    source: str
    """The file, as error messages name it."""
    description: str
    variants: dict[str, Variant]
    boards: tuple[str, ...]
    scenarios: tuple[str, ...]
    intervals_us: tuple[int, ...]
    duration_s: int
    repeat: int
    pairs: tuple[Pair, ...]
    quantiles: tuple[float, ...] = DEFAULT_QUANTILES
    confidence: float = DEFAULT_CONFIDENCE

    def cases(self) -> str:
        """The cases of one variant × board, as ``rtlab run --cases`` takes them."""
        return ",".join(f"{scenario}/{interval}us" for scenario in self.scenarios
                        for interval in self.intervals_us)

    def narrowed(self, *, boards: Sequence[str] | None = None,
                 scenarios: Sequence[str] | None = None,
                 intervals_us: Sequence[int] | None = None, duration_s: int | None = None,
                 repeat: int | None = None) -> "Campaign":
        """The campaign with fewer boards, scenarios or intervals, or another length (a
        demo, a test): each must be one the file names, so that a narrowed campaign
        measures nothing the file does not describe."""
        changes: dict[str, Any] = {}
        for key, given, known in (("boards", boards, self.boards),
                                  ("scenarios", scenarios, self.scenarios),
                                  ("intervals_us", intervals_us, self.intervals_us)):
            if given is None:
                continue
            unknown = [item for item in given if item not in known]
            if unknown or not given:
                raise ValueError(f"{self.source}: {key} {', '.join(map(str, unknown)) or '(none)'}"
                                 f" not in the campaign (it has: "
                                 f"{', '.join(map(str, known))})")
            changes[key] = tuple(given)
        for key, value in (("duration_s", duration_s), ("repeat", repeat)):
            if value is not None:
                if value < 1:
                    raise ValueError(f"{key} must be at least 1, got {value}")
                changes[key] = value
        return attr.evolve(self, **changes)


def campaign_path(name_or_path: str) -> Path:
    """``hardening`` → campaigns/hardening.yaml; a path is taken as it is."""
    if "/" in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        return Path(name_or_path)
    path = CAMPAIGNS_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in CAMPAIGNS_DIR.glob("*.yaml"))
        raise CampaignError(f"no campaign {name_or_path!r} in {repo_display(CAMPAIGNS_DIR)} "
                            f"(there are: {', '.join(known) or 'none'})")
    return path


def load_campaign(name_or_path: str | Path, *, suite: Suite | None = None,
                  thresholds: Thresholds | None = None) -> Campaign:
    """Load and check a campaign against kernel/, suite.yaml and thresholds.yaml (each
    variant's limits must exist for every board of the campaign)."""
    path = name_or_path if isinstance(name_or_path, Path) else campaign_path(name_or_path)
    display = repo_display(path)
    try:
        doc = load_yaml(path, display)
    except YamlFileError as error:
        raise CampaignError(str(error)) from error
    suite = suite if suite is not None else load_suite()
    try:
        thresholds = thresholds if thresholds is not None else load_thresholds(suite=suite)
    except ThresholdsError as error:
        raise CampaignError(f"{display}: its limits cannot be read: {error}") from error
    return _Loader(display, suite, thresholds).top(doc, path.stem)


@attr.frozen
class _Loader:
    display: str
    suite: Suite
    thresholds: Thresholds

    def error(self, node: Any, key: Any, what: str) -> CampaignError:  # noqa: ANN401
        return CampaignError(f"{self.display}:{line_of(node, key)}: {what}")

    def keys(self, node: CommentedMap, allowed: Sequence[str], required: Sequence[str],
             where: str) -> None:
        for key in node:
            if key not in allowed:
                raise self.error(node, key, f"{where}unknown key {key!r} (expected one of: "
                                 f"{', '.join(allowed)})")
        for key in required:
            if key not in node:
                raise self.error(node, None, f"{where}missing {key!r}")

    def text(self, node: CommentedMap, key: str, where: str) -> str:
        value = node[key]
        if not isinstance(value, str) or not value.strip():
            raise self.error(node, key, f"{where}{key} must be a non-empty string, got "
                             f"{value!r}")
        return " ".join(value.split())

    def names(self, node: CommentedMap, key: str, what: str, valid: Sequence[Any],
              where: str = "") -> CommentedSeq:
        value = node[key]
        if not isinstance(value, CommentedSeq) or not value:
            raise self.error(node, key, f"{where}{key} must be a non-empty list of {what}")
        for index, item in enumerate(value):
            if item not in valid:
                raise self.error(value, index, f"{where}unknown {what[:-1]} {item!r} "
                                 f"(valid: {', '.join(map(str, valid))})")
            if list(value).index(item) != index:
                raise self.error(value, index, f"{where}{what[:-1]} {item!r} is listed twice")
        return value

    def integer(self, node: CommentedMap, key: str, low: int) -> int:
        value = node[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise self.error(node, key, f"{key} must be an integer >= {low}, got {value!r}")
        return value

    def top(self, doc: Any, name: str) -> Campaign:  # noqa: ANN401
        if not isinstance(doc, CommentedMap):
            raise CampaignError(f"{self.display}:1: expected a mapping with "
                                f"{', '.join(TOP_REQUIRED)}")
        self.keys(doc, TOP_KEYS, TOP_REQUIRED, "")
        if not _NAME.match(name):
            raise CampaignError(f"{self.display}: the campaign's name (its file name) must "
                                f"be lower-case letters, digits, '-' or '_', got {name!r}")
        boards = self.names(doc, "boards", "boards",
                            sorted(set(BOARD_MODELS) & set(kernel_spec.load_boards())))
        scenarios = self.names(doc, "scenarios", "scenarios", list(self.suite.scenarios))
        intervals = doc["intervals_us"]
        if not isinstance(intervals, CommentedSeq) or not intervals:
            raise self.error(doc, "intervals_us", "intervals_us must be a non-empty list of µs")
        for index, interval in enumerate(intervals):
            if not isinstance(interval, int) or isinstance(interval, bool) or interval <= 0:
                raise self.error(intervals, index, f"interval must be a positive integer of "
                                 f"µs, got {interval!r}")
            if list(intervals).index(interval) != index:
                raise self.error(intervals, index, f"interval {interval} is listed twice")
        variants = self.variants(doc, tuple(boards))
        pairs = self.pairs(doc, variants)
        quantiles = DEFAULT_QUANTILES
        if "quantiles" in doc:
            node = doc["quantiles"]
            if not isinstance(node, CommentedSeq) or not node:
                raise self.error(doc, "quantiles", "quantiles must be a non-empty list of "
                                 "probabilities, e.g. [0.99, 0.999, 0.9999]")
            for index, value in enumerate(node):
                if (not isinstance(value, float) or not 0.5 <= value < 1
                        or list(node).index(value) != index):
                    raise self.error(node, index, f"a quantile must be a probability in "
                                     f"[0.5, 1), each once, got {value!r}")
            quantiles = tuple(sorted(node))
        confidence = DEFAULT_CONFIDENCE
        if "confidence" in doc:
            confidence = doc["confidence"]
            if not isinstance(confidence, float) or not 0.5 <= confidence < 1:
                raise self.error(doc, "confidence", f"confidence must be a probability in "
                                 f"[0.5, 1), got {confidence!r}")
        return Campaign(
            name=name, source=self.display, description=self.text(doc, "description", ""),
            variants=variants, boards=tuple(boards), scenarios=tuple(scenarios),
            intervals_us=tuple(intervals), duration_s=self.integer(doc, "duration_s", 1),
            repeat=self.integer(doc, "repeat", 1) if "repeat" in doc else 1,
            pairs=pairs, quantiles=quantiles, confidence=float(confidence))

    def variants(self, doc: CommentedMap, boards: tuple[str, ...]) -> dict[str, Variant]:
        node = doc["variants"]
        if not isinstance(node, CommentedMap) or len(node) < 2:
            raise self.error(doc, "variants", "variants must be a mapping of at least two "
                             "kernel variants (a campaign compares them)")
        flavours = kernel_spec.load_flavours()
        variants = {}
        for name in node:
            where = f"variants.{name}: "
            if not isinstance(name, str) or not _NAME.match(name):
                raise self.error(node, name, f"variant name must be lower-case letters, "
                                 f"digits, '-' or '_', got {name!r}")
            if name in FLAVOURS:
                raise self.error(node, name, f"variant name {name!r} is the pipeline's own "
                                 f"series of that name: call it e.g. 'debian-{name}'")
            entry = node[name]
            if not isinstance(entry, CommentedMap):
                raise self.error(node, name, f"variant {name!r} must be a mapping")
            self.keys(entry, VARIANT_KEYS, ("description",), where)
            if ("debian" in entry) == ("flavour" in entry):
                raise self.error(node, name, f"{where}give either 'flavour' (a kernel built "
                                 "from kernel/) or 'debian' (Debian's kernel package)")
            flavour = debian = None
            fragments: tuple[str, ...] = ()
            if "debian" in entry:
                debian = entry["debian"]
                if debian not in FLAVOURS:
                    raise self.error(entry, "debian", f"{where}debian must be one of "
                                     f"{', '.join(FLAVOURS)} (Debian's stock or RT kernel), "
                                     f"got {debian!r}")
                if "fragments" in entry:
                    raise self.error(entry, "fragments", f"{where}fragments need a kernel "
                                     "built from kernel/ ('flavour'), not Debian's")
            else:
                flavour = entry["flavour"]
                if flavour not in flavours:
                    raise self.error(entry, "flavour", f"{where}unknown flavour {flavour!r} "
                                     f"(valid: {', '.join(flavours)})")
                fragments = self.fragments(entry, where, flavours[flavour].fragments)
            default = debian if debian is not None else flavour
            thresholds = entry.get("thresholds", default)
            known = self.thresholds_flavours(boards)
            if thresholds not in known:
                at = "thresholds" if "thresholds" in entry else ("debian" if debian else
                                                                 "flavour")
                raise self.error(entry, at, f"{where}no limits for flavour {thresholds!r} "
                                 f"in {self.thresholds.display} on every board of the "
                                 f"campaign (flavours all of {', '.join(boards)} have: "
                                 f"{', '.join(known) or 'none'}); give 'thresholds:' or add "
                                 "them")
            variants[name] = Variant(name=name, description=self.text(entry, "description",
                                                                      where),
                                     flavour=flavour, fragments=fragments, debian=debian,
                                     thresholds=thresholds, line=line_of(node, name))
        return variants

    def fragments(self, entry: CommentedMap, where: str,
                  of_flavour: tuple[str, ...]) -> tuple[str, ...]:
        if "fragments" not in entry:
            return ()
        node = entry["fragments"]
        if not isinstance(node, CommentedSeq) or not node:
            raise self.error(entry, "fragments", f"{where}fragments must be a non-empty list "
                             "of kernel/configs/ files")
        for index, name in enumerate(node):
            try:
                kernel_spec.fragment_path(str(name))
            except kernel_spec.KernelSpecError as error:
                raise self.error(node, index, f"{where}{error}") from None
            if name in of_flavour or list(node).index(name) != index:
                raise self.error(node, index, f"{where}fragment {name!r} is already in the "
                                 "variant's kernel")
        return tuple(node)

    def thresholds_flavours(self, boards: tuple[str, ...]) -> list[str]:
        sets = [set(self.thresholds.flavours(board)) for board in boards
                if board in self.thresholds.boards]
        missing = [board for board in boards if board not in self.thresholds.boards]
        if missing:
            raise CampaignError(f"{self.display}: {self.thresholds.display} has no board "
                                f"{', '.join(missing)}")
        common = set.intersection(*sets)
        return [f for f in self.thresholds.flavours(boards[0]) if f in common]

    def pairs(self, doc: CommentedMap, variants: dict[str, Variant]) -> tuple[Pair, ...]:
        node = doc["compare"]
        if not isinstance(node, CommentedSeq) or not node:
            raise self.error(doc, "compare", "compare must be a non-empty list of "
                             "{baseline: VARIANT, candidate: VARIANT}")
        pairs = []
        for index, entry in enumerate(node):
            where = f"compare[{index}]: "
            if not isinstance(entry, CommentedMap):
                raise self.error(node, index, f"{where}expected {{baseline: VARIANT, "
                                 "candidate: VARIANT}")
            self.keys(entry, PAIR_KEYS, PAIR_KEYS, where)
            for key in PAIR_KEYS:
                if entry[key] not in variants:
                    raise self.error(entry, key, f"{where}unknown variant {entry[key]!r} "
                                     f"(valid: {', '.join(variants)})")
            pair = Pair(entry["baseline"], entry["candidate"])
            if pair.baseline == pair.candidate:
                raise self.error(entry, "candidate", f"{where}a variant compared with itself")
            if pair in pairs:
                raise self.error(node, index, f"{where}{pair.name} is listed twice")
            pairs.append(pair)
        return tuple(pairs)


def all_campaigns() -> list[Path]:
    return sorted(CAMPAIGNS_DIR.glob("*.yaml"))
