"""The points a bisection measures, read from the lab repository's history: the commits
between the good and the bad one (first parent, as ``git bisect --first-parent``), each
commit's kernel configuration for the board and kernel flavour (what its ``kernel/`` asks
for: the board's fragments, then the flavour's, as ``rtlab kernel config`` merges them),
and the options two configurations differ in.

A point is a commit, or a commit's parent with some of the commit's options applied
(:class:`Point`); its ``key`` (the configuration's digest, and where the kernel is built
from source, that of the source it is built from) is what identifies its kernel: two
points with one key have one kernel, which is built, and decided, once.
"""

import hashlib
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping
from io import BytesIO
from pathlib import Path

import attr

from rtlab.kernel import spec as kernel_spec
from rtlab.kernel.config import merge_requests

DEFAULT = "default"
"""An option's value where no fragment names it (the defconfig's, or kconfig's default):
not the same as ``n``, which a fragment asks for with ``# CONFIG_X is not set``."""


class HistoryError(ValueError):
    """The repository, a commit or its kernel/ cannot be read as the bisection needs."""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise HistoryError(f"git {' '.join(args)} in {repo}: {done.stderr.strip()}")
    return done.stdout


def resolve_commit(repo: Path, ref: str) -> str:
    return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()


def history(repo: Path, good: str, bad: str) -> tuple[str, ...]:
    """The commits after ``good`` up to ``bad`` on bad's first-parent line, oldest first."""
    if subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", good, bad],
                      check=False).returncode != 0:
        raise HistoryError(f"{good[:12]} (good) is not an ancestor of {bad[:12]} (bad): a "
                           f"bisection needs the good point in the bad one's history")
    commits = tuple(git(repo, "rev-list", "--first-parent", "--reverse",
                        f"{good}..{bad}").split())
    if not commits:
        raise HistoryError(f"no commit between {good[:12]} and {bad[:12]}")
    return commits


def subject(repo: Path, commit: str) -> str:
    return git(repo, "show", "-s", "--format=%s", commit).strip()


def commit_diff(repo: Path, commit: str) -> str:
    """What the commit changed (its first parent to it), as ``git show`` prints it."""
    return git(repo, "show", "--first-parent", "--format=commit %H%nAuthor: %an <%ae>%n%n%s%n",
               "--stat", "--patch", commit)


def parent(repo: Path, commit: str) -> str:
    return git(repo, "rev-parse", f"{commit}^").strip()


def configuration(repo: Path, commit: str, board: str, kernel_flavour: str) -> dict[str, str]:
    """The options ``commit``'s kernel/ asks of the board's kernel of ``kernel_flavour``:
    the board's fragments, then the flavour's, a later one overriding (value by name,
    ``n`` for "is not set"). Errors name the commit and the file."""
    with tempfile.TemporaryDirectory(prefix="rtlab-bisect-") as tmp:
        kernel = extract_kernel(repo, commit, Path(tmp))
        try:
            board_spec = kernel_spec.board(board, kernel / "boards.yaml")
            flavour_spec = kernel_spec.flavour(kernel_flavour, kernel / "flavours.yaml")
            requests = merge_requests([*board_spec.fragment_files(),
                                       *flavour_spec.fragment_files()])
        except ValueError as error:
            raise HistoryError(f"commit {commit[:12]}: {error}".replace(tmp + "/", "")) \
                from None
    return {name: request.value for name, request in requests.items()}


def extract_kernel(repo: Path, commit: str, dest: Path) -> Path:
    """``commit``'s kernel/ folder written under ``dest``; returns ``dest/kernel``."""
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", commit,
                              "kernel"], capture_output=True, check=False)
    if archive.returncode != 0:
        raise HistoryError(f"{commit[:12]} has no kernel/ folder: "
                           f"{archive.stderr.decode(errors='replace').strip()}")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "kernel"


def changed_options(good: Mapping[str, str], bad: Mapping[str, str]) -> tuple[str, ...]:
    """The options whose request differs, in name order (one side may not name it)."""
    return tuple(sorted(name for name in set(good) | set(bad)
                        if good.get(name, DEFAULT) != bad.get(name, DEFAULT)))


def applied(good: Mapping[str, str], bad: Mapping[str, str],
            options: frozenset[str]) -> dict[str, str]:
    """``good`` with ``options`` requested as ``bad`` requests them (not at all, where
    ``bad`` does not name one)."""
    result = dict(good)
    for name in options:
        if name in bad:
            result[name] = bad[name]
        else:
            result.pop(name, None)
    return result


def config_key(config: Mapping[str, str]) -> str:
    """The configuration's digest: every option requested, with its value (``n`` too: a
    fragment's ``# CONFIG_X is not set`` turns off what the defconfig turns on)."""
    text = "".join(f"{name}={value}\n" for name, value in sorted(config.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@attr.frozen
class Point:
    """One kernel a bisection may measure: ``commit``'s configuration, or (``options``)
    the configuration of ``commit``'s parent with those options of ``commit`` applied."""

    commit: str
    config: Mapping[str, str] = attr.field(eq=False, repr=False)
    options: frozenset[str] = frozenset()
    source: str = ""
    """What besides the configuration makes the kernel (a kernel built from source: the
    digest of its commit's source pin, patches and board files; "" where nothing does)."""

    @property
    def key(self) -> str:
        key = config_key(self.config)
        if not self.source:
            return key
        return hashlib.sha256(f"{key} {self.source}".encode()).hexdigest()[:16]

    @property
    def name(self) -> str:
        short = self.commit[:12]
        return f"{short}^ + {', '.join(sorted(self.options))}" if self.options else short


def source_identity(repo: Path, commit: str) -> str:
    """The digest of what, besides its configuration, makes ``commit``'s kernel when it is
    built from source: the source pin, the patches and the board files (their blobs)."""
    listing = git(repo, "ls-tree", "-r", commit, "--", "kernel/source.yaml",
                  "kernel/patches", "kernel/boards.yaml")
    return hashlib.sha256(listing.encode()).hexdigest()[:16]
