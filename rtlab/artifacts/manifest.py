"""The image manifest (``manifest.json`` beside an SD image, written by ``rtlab image
build``): read strictly, because the suite takes the flavour thresholds are judged by and
the identity every result record carries from it.

Format version (``schema``): 1, the only one; an image of another is rebuilt, not read."""

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attr

from rtlab.artifacts.identity import read_variant
from rtlab.util.jsonfile import JsonFileError, json_line_of, load_json, require

FILE_NAME = "manifest.json"
# Bump when the manifest's meaning changes; a mismatch rebuilds the image.
SCHEMA_VERSION = 1
WHAT = "image manifest"
_SHA256 = re.compile(r"[0-9a-f]{64}")


def series_flavour(manifest: dict[str, Any]) -> str | None:
    """The flavour an image's results are filed under: a campaign variant's name, else
    the image's flavour (std, rt)."""
    variant = manifest.get("variant")
    if isinstance(variant, dict) and variant.get("name"):
        return str(variant["name"])
    return manifest.get("flavour")


@attr.frozen(kw_only=True)
class ImageManifest:
    """What the suite and the records take from an image's manifest; ``document`` is the
    whole manifest (packages, checksums, the kernel's build manifest)."""

    image_id: str
    board: str
    flavour: str
    """The image's flavour (std, rt); a campaign variant's results are filed under
    :attr:`series_flavour`."""
    kernel: dict[str, Any]
    sd_image_sha256: str
    variant: dict[str, Any] | None
    document: dict[str, Any]

    @property
    def series_flavour(self) -> str:
        return series_flavour(self.document) or self.flavour


def load_image_manifest(path: Path) -> ImageManifest:
    """The manifest at ``path`` as :class:`ImageManifest` (see :func:`read_image_manifest`)."""
    manifest = read_image_manifest(path)
    return ImageManifest(
        image_id=manifest["image_id"], board=manifest["board"], flavour=manifest["flavour"],
        kernel=manifest["kernel"], sd_image_sha256=manifest["sd_image"]["sha256"],
        variant=manifest.get("variant"), document=manifest)


def image_manifest_for(image: str | None) -> dict[str, Any]:
    """The manifest written beside an SD image by ``rtlab image build`` (empty if the image
    came from elsewhere: its facts are then read from the board alone)."""
    if not image:
        return {}
    path = Path(image).with_name(FILE_NAME)
    if not path.exists():
        return {}
    return read_image_manifest(path)


def write_image_manifest(work: Path, dest: Path, manifest: Mapping[str, Any]) -> Path:
    """``dest/manifest.json`` by way of ``work`` (on the same file system): written whole
    and moved in last, it marks the image beside it complete."""
    tmp = work / FILE_NAME
    tmp.write_text(json.dumps({**manifest, "schema": SCHEMA_VERSION}, indent=2,
                              sort_keys=True) + "\n")
    os.replace(tmp, dest / FILE_NAME)
    return dest / FILE_NAME


def read_image_manifest(path: Path) -> dict[str, Any]:
    """The manifest at ``path``, checked for the keys the suite reads; anything else in
    it is passed through. Raises :class:`JsonFileError` with ``path:line:`` and what was
    expected."""
    manifest = load_json(path, WHAT)
    schema = require(path, manifest, "schema", (int,), WHAT)
    if schema != SCHEMA_VERSION:
        raise JsonFileError(f"{path}:{json_line_of(manifest, 'schema')}: {WHAT} schema "
                            f"{schema}, expected {SCHEMA_VERSION} (rebuild the image)")
    for key in ("image_id", "board", "flavour"):
        if not require(path, manifest, key, (str,), WHAT):
            raise JsonFileError(f"{path}:{json_line_of(manifest, key)}: {WHAT} {key!r} "
                                "must be a non-empty string")
    kernel = require(path, manifest, "kernel", (dict,), WHAT)
    for key in ("package", "version", "release"):
        require(path, kernel, key, (str,), f"{WHAT} 'kernel'")
    for key in ("metapackage", "metapackage_version", "preemption"):
        if key in kernel:
            require(path, kernel, key, (str, type(None)), f"{WHAT} 'kernel'")
    if "hz" in kernel:
        require(path, kernel, "hz", (int, type(None)), f"{WHAT} 'kernel'")
    # where the kernel came from: a Debian package or `rtlab kernel build`, whose build
    # manifest the records then carry (absent in manifests from before kernel builds)
    if "source" in kernel:
        source = require(path, kernel, "source", (str,), f"{WHAT} 'kernel'")
        if source not in ("debian", "build"):
            raise JsonFileError(f"{path}:{json_line_of(kernel, 'source')}: {WHAT} 'kernel' "
                                f"'source' must be 'debian' or 'build', got {source!r}")
        if source == "build":
            require(path, kernel, "build", (dict,), f"{WHAT} 'kernel'")
    if "variant" in manifest:
        read_variant(path, manifest, WHAT)
    sd_image = require(path, manifest, "sd_image", (dict,), WHAT)
    sha256 = require(path, sd_image, "sha256", (str,), f"{WHAT} 'sd_image'")
    if not _SHA256.fullmatch(sha256):
        raise JsonFileError(f"{path}:{json_line_of(sd_image, 'sha256')}: {WHAT} "
                            f"'sd_image' 'sha256' must be 64 lowercase hex digits, "
                            f"got {sha256!r}")
    return manifest
