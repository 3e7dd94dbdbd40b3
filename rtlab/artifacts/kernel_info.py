"""``kernel.json``: what the kernel stage hands the image stage beside a kernel, a Debian
package (``source: debian``, ``rtlab kernel fetch``) or a kernel built from source
(``source: build``, ``rtlab kernel build``), and which kernel it is and why (``provided``,
``variant``) for the image manifest and every result record.

Format versions: ``rtlab.kernel/1`` had only Debian packages and no ``source``;
``rtlab.kernel/2`` adds ``source`` and the built kernel's ``files``, ``build``,
``cmdline``. A /1 file is read as /2 with ``source: debian``; it is written as /2."""

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attr

from rtlab.artifacts.identity import read_variant
from rtlab.util.atomic import write_atomic
from rtlab.util.jsonfile import JsonFileError, json_line_of, load_json, require

FILE_NAME = "kernel.json"
SCHEMA = "rtlab.kernel/2"
SCHEMAS = ("rtlab.kernel/1", SCHEMA)
SOURCES = ("debian", "build")
WHAT = "kernel info"

# the keys this version knows; anything else is kept as it was read (``extra``)
_KNOWN = frozenset({
    "schema", "board", "flavour", "source", "package", "version", "sha256", "arch",
    "metapackage", "release", "preemption", "hz", "deb", "kernel_flavour", "cmdline",
    "files", "build", "provided", "provided_before", "variant"})


_OPTIONAL: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("arch", "metapackage", "release", "preemption", "deb", "kernel_flavour",
                     "cmdline"), (str,)),
    "hz": (int,), "files": (dict,), "build": (dict,), "provided": (dict,),
    "provided_before": (dict,)}


class KernelInfoError(JsonFileError):
    """kernel.json is missing or does not say what the image stage needs; the message
    names the file (and line)."""


@attr.frozen(kw_only=True)
class KernelInfo:
    """One kernel as the kernel stage hands it on."""

    board: str
    flavour: str
    """The flavour of thresholds.yaml the image is judged by (std, rt)."""
    source: str
    """``debian``: ``deb`` is the package; ``build``: ``files`` are the kernel's files."""
    package: str
    version: str
    sha256: str
    """Of the Debian package; of everything a built kernel puts on the card."""
    arch: str | None = None
    metapackage: str | None = None
    release: str | None = None
    preemption: str | None = None
    hz: int | None = None
    deb: str | None = None
    kernel_flavour: str | None = None
    """A built kernel's flavour of kernel/flavours.yaml (preempt-rt, …)."""
    cmdline: str | None = None
    files: dict[str, Any] | None = None
    build: dict[str, Any] | None = None
    """A built kernel's build manifest (rtlab.kernel.build), carried into every record."""
    provided: dict[str, str] | None = None
    """Which kernel the provide stage chose and why: ``action`` and ``reason``."""
    provided_before: dict[str, str] | None = None
    variant: dict[str, Any] | None = None
    """The campaign variant's identity (rtlab.artifacts.identity) the kernel is built for."""
    extra: dict[str, Any] = attr.Factory(dict)

    @property
    def built(self) -> bool:
        return self.source == "build"

    def as_dict(self) -> dict[str, Any]:
        """The document as written (``None`` values of keys the format leaves out are
        dropped, so that a Debian kernel's file has no build keys)."""
        document = {key: value for key, value in attr.asdict(self, recurse=False).items()
                    if key != "extra" and (value is not None or key in ("hz", "preemption"))}
        return {"schema": SCHEMA, **self.extra, **document}

    def stamped(self, *, action: str, reason: str,
                variant: Mapping[str, Any] | None = None) -> "KernelInfo":
        """The same kernel with which kernel it is and why (and the variant it is)."""
        return attr.evolve(self, provided={"action": action, "reason": reason},
                           variant=dict(variant) if variant is not None else self.variant)


def kernel_info_path(folder: Path) -> Path:
    return folder / FILE_NAME


def read_kernel_info(folder: Path) -> KernelInfo:
    """``folder/kernel.json``, checked for what its source needs. Raises
    :class:`KernelInfoError` with ``path:line:`` and what was expected."""
    path = kernel_info_path(folder)
    try:
        document = load_json(path, WHAT)
    except JsonFileError as error:
        raise KernelInfoError(str(error)) from error
    try:
        return _from_document(path, document)
    except KernelInfoError:
        raise
    except JsonFileError as error:
        raise KernelInfoError(str(error)) from error


def _from_document(path: Path, document: Any) -> KernelInfo:  # noqa: ANN401 - JSON
    if not isinstance(document, dict):
        raise KernelInfoError(f"{path}:{json_line_of(document)}: not a {WHAT}: expected an "
                              f"object with 'schema': {SCHEMA!r}")
    schema = document.get("schema")
    if schema not in SCHEMAS:
        raise KernelInfoError(f"{path}:{json_line_of(document, 'schema')}: schema "
                              f"{schema!r}, expected one of {', '.join(SCHEMAS)}")
    if schema == "rtlab.kernel/1" and "source" not in document:
        source = "debian"  # /1 knew only Debian's packages
    else:
        source = require(path, document, "source", (str,), WHAT)
    if source not in SOURCES:
        raise KernelInfoError(f"{path}:{json_line_of(document, 'source')}: 'source' must be "
                              f"one of {', '.join(SOURCES)}, got {source!r}")
    built = source == "build"
    for key in ("board", "flavour", "package", "version", "sha256",
                *(("release", "cmdline") if built else ("deb",))):
        value = document.get(key)
        if not isinstance(value, str) or not value:
            raise KernelInfoError(f"{path}:{json_line_of(document, key)}: {key!r} must be a "
                                  "non-empty string")
    if built and not (isinstance(document.get("files"), dict)
                      and isinstance(document.get("build"), dict)):
        raise KernelInfoError(f"{path}: a built kernel needs 'files' and 'build' mappings")
    for key, kinds in _OPTIONAL.items():
        if key in document:
            require(path, document, key, (*kinds, type(None)), WHAT)
    if document.get("variant") is not None:
        read_variant(path, document, WHAT)
    known = {key: document.get(key) for key in _KNOWN - {"schema", "source"}}
    extra = {key: value for key, value in document.items() if key not in _KNOWN}
    return KernelInfo(**known, source=source, extra=extra)


def write_kernel_info(folder: Path, info: KernelInfo) -> Path:
    """``folder/kernel.json``, replaced atomically: a reader sees the old or the new one."""
    path = kernel_info_path(folder)
    write_atomic(path, json.dumps(info.as_dict(), indent=2, sort_keys=True) + "\n")
    return path
