"""Lab repositories for the bisection's tests: a small kernel/ folder whose preempt-rt
flavour gains the test device in its third commit (the unit tests' ``lab_repo``), and the
repository's own kernel/ folder with commits added to a fragment (the rack's), and the
suite a board runs the test device under."""

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from rtlab.kernel import spec as kernel_spec
from rtlab.util import paths

# the last fragment of the preempt-rt flavour: nothing overrides what a commit adds there
RT_FRAGMENT = Path("kernel/configs/rt-no-cpuidle.config")
IDENTITY = ("-c", "user.name=lab", "-c", "user.email=lab@example.org")


def kernel_history(repo: Path, additions: Sequence[tuple[str, str]], *,
                   patches: bool = True) -> list[str]:
    """A repository of the rtlab repository's kernel/ folder (without kernel/patches/
    unless ``patches``: Debian's kernels need none) and a commit per (text added to
    RT_FRAGMENT, message); returns the commits, the good point first."""
    shutil.copytree(paths.REPO_ROOT / "kernel", repo / "kernel",
                    ignore=None if patches else shutil.ignore_patterns("patches"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, *IDENTITY, "commit", "-q", "-m", "the good point")
    commits = [git(repo, "rev-parse", "HEAD")]
    fragment = repo / RT_FRAGMENT
    for addition, message in additions:
        fragment.write_text(fragment.read_text() + addition)
        git(repo, *IDENTITY, "commit", "-q", "-a", "-m", message)
        commits.append(git(repo, "rev-parse", "HEAD"))
    return commits


def hog_suite(folder: Path, histogram_us: int = 50_000) -> Path:
    """suite.yaml with a histogram of ``histogram_us`` (an emulated board's tail lies
    inside 50 ms) and without the check for other real-time tasks: the test device is one
    (rtlab.bisect.testdev)."""
    text = (paths.REPO_ROOT / "suite.yaml").read_text()
    for old, new in (("  histogram_us: 400\n", f"  histogram_us: {histogram_us}\n"),
                     ("  other_rt_tasks: below\n", "  other_rt_tasks: null\n")):
        if text.count(old) != 1:
            raise ValueError(f"suite.yaml does not hold {old.strip()!r} once")
        text = text.replace(old, new)
    path = folder / "suite.yaml"
    path.write_text(text)
    return path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def lab_repo(tmp_path):
    """A lab repository whose preempt-rt flavour gains the test device in its third commit."""
    repo = tmp_path / "lab"
    (repo / "kernel" / "configs").mkdir(parents=True)
    (repo / "kernel" / "boards.yaml").write_text(
        kernel_spec.BOARDS_FILE.read_text())
    for name in ("imx6q-lean.config", "rpi3-lean.config"):
        (repo / "kernel" / "configs" / name).write_text("CONFIG_PRINTK_TIME=y\n")
    (repo / "kernel" / "flavours.yaml").write_text(
        "preempt-rt:\n  description: rt\n  thresholds: rt\n  fragments: [rt.config]\n")
    fragment = repo / "kernel" / "configs" / "rt.config"
    fragment.write_text("CONFIG_PREEMPT_RT=y\n")
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    commits = []
    for text, message in (("CONFIG_PREEMPT_RT=y\n", "good"),
                          ("CONFIG_PREEMPT_RT=y\nCONFIG_HZ_1000=y\n", "tick"),
                          ("CONFIG_PREEMPT_RT=y\nCONFIG_HZ_1000=y\nCONFIG_RTLAB_TESTDEV_HOG_MS=20\n"
                           "CONFIG_NO_HZ_FULL=y\n", "hog"),
                          ("CONFIG_PREEMPT_RT=y\nCONFIG_HZ_1000=y\nCONFIG_RTLAB_TESTDEV_HOG_MS=20\n"
                           "CONFIG_NO_HZ_FULL=y\n# a comment\n", "comment")):
        fragment.write_text(text)
        git(repo, "add", ".")
        git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
        commits.append(git(repo, "rev-parse", "HEAD"))
    return repo, commits


def synthetic_boot(rng, scale: float, n: int = 40_000):
    """A boot's histogram: gamma wake-ups, ``scale`` times later, with a little
    boot-to-boot spread."""
    import numpy as np

    from rtlab.verdict.histogram import Histogram

    values = rng.gamma(2.0, 20.0 * scale * rng.lognormal(0, 0.05), n).astype(int)
    return Histogram(np.bincount(np.minimum(values, 3999), minlength=4000))


def stand_in_rack(monkeypatch, tmp_path: Path, late, rng):
    """A rack of two places for rtlab.bisect.bisection.Bisector: every round boots the good
    and the step's image on each, a boot of an image that ``late(image)`` picks twice as
    late; returns the Rack."""
    from rtlab.bisect import bisection
    from rtlab.bisect.step import Boot, Rack

    def measure_round(rack, places, round_number, *, good, step, case, folder, progress):
        return [Boot(which, place, synthetic_boot(rng, 2.0 if late(image) else 1.0), None,
                     60.0, folder)
                for place in places for which, image in (("good", good), ("step", step))]

    monkeypatch.setattr(bisection, "measure_round", measure_round)
    monkeypatch.setattr(Rack, "place_names", lambda self: ["imx6q-01", "imx6q-02"])
    return Rack(env_file=tmp_path / "env.yaml", coordinator="-", board_tag="qemu-imx6q",
                duration_s=60)
