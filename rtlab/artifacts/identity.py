"""A campaign variant's identity as the files downstream of the campaign carry it
(kernel.json, the image manifest, every result record), checked when they are read:
light, so that reading a record does not load the campaign's specification."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rtlab.util.jsonfile import JsonFileError, json_line_of, require

# the environment variable that names one execution of a campaign (rtlab campaign run, or
# the pipeline's campaign jobs): every record of it carries the name, and the campaign
# report compares the variants within it
RUN_VARIABLE = "RTLAB_CAMPAIGN_RUN"


def read_variant(path: Path, document: dict[str, Any], what: str) -> dict[str, Any]:
    """A campaign variant's identity (rtlab.campaign.spec.Variant.identity) in a manifest
    or a result record: its name is the series its results are filed under, ``thresholds``
    the flavour of thresholds.yaml it is judged by."""
    variant = require(path, document, "variant", (dict,), what)
    where = f"{what} 'variant'"
    for key in ("name", "campaign", "thresholds", "source"):
        if not require(path, variant, key, (str,), where):
            raise JsonFileError(f"{path}:{json_line_of(variant, key)}: {where} {key!r} must "
                                "be a non-empty string")
    fragments = require(path, variant, "fragments", (list,), where)
    for index, name in enumerate(fragments):
        if not isinstance(name, str):
            raise JsonFileError(f"{path}:{json_line_of(fragments, index)}: {where} "
                                f"'fragments'[{index}] must be a string")
    for key in ("kernel_flavour", "debian"):
        require(path, variant, key, (str, type(None)), where)
    return variant


def campaign_of(manifest: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    """The campaign whose case a session runs: the image's variant's campaign, else the
    execution ``$RTLAB_CAMPAIGN_RUN`` names; None outside a campaign. Either says so: the
    image is a campaign's variant, or the run is one of a campaign's executions."""
    variant = manifest.get("variant")
    if isinstance(variant, Mapping) and variant.get("campaign"):
        return str(variant["campaign"])
    return environ.get(RUN_VARIABLE) or None
