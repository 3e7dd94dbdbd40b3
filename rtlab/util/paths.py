"""Where rtlab keeps downloads, built images and the virtual rack's state."""

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    """Git-ignored download and build cache; ``RTLAB_CACHE`` moves it (e.g. a CI cache)."""
    return Path(os.environ.get("RTLAB_CACHE", REPO_ROOT / ".cache")).resolve()


def images_dir() -> Path:
    return cache_dir() / "images"


def debs_dir() -> Path:
    return cache_dir() / "debs"


def vlab_state_dir() -> Path:
    return cache_dir() / "vlab"


def default_vlab_config() -> Path:
    return Path(os.environ.get("RTLAB_VLAB_CONFIG", REPO_ROOT / "env" / "vlab.yaml"))


def health_dir() -> Path:
    """The places' health records (rtlab.lab.health); ``RTLAB_HEALTH_DIR`` moves them, e.g.
    to a folder every CI runner of the lab host shares."""
    return Path(os.environ.get("RTLAB_HEALTH_DIR", cache_dir() / "health")).resolve()


def kernel_cache_dir() -> Path:
    """Kernel downloads, source trees and build folders; ``RTLAB_KERNEL_CACHE`` moves them
    (a CI cache, or a disk with room: an unpacked tree is about 1.5 GB)."""
    return Path(os.environ.get("RTLAB_KERNEL_CACHE", cache_dir() / "kernel")).resolve()


def repo_display(path: Path) -> str:
    """A repository file by its path in the repository (what a reader finds on every
    checkout), anything else as given: how error messages name the files they are about."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)
