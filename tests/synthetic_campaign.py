"""bench/campaign_synthetic.py as a module (records of a campaign with a known cost), and
the small campaign the report's tests measure with it."""

import importlib.util

from rtlab.campaign.spec import Campaign, load_campaign
from rtlab.util.paths import REPO_ROOT

_spec = importlib.util.spec_from_file_location(
    "campaign_synthetic", REPO_ROOT / "bench" / "campaign_synthetic.py")
synthetic = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(synthetic)


def small_hardening() -> Campaign:
    """campaigns/hardening.yaml on one board, two loads and one interval: quick."""
    return load_campaign("hardening").narrowed(boards=["imx6q"], scenarios=["idle", "hackbench"],
                                               intervals_us=[1000])
