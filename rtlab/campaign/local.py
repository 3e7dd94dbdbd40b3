"""``rtlab campaign run``: a whole campaign on one machine, through the same stages the
pipeline's campaign jobs call (:mod:`rtlab.campaign.stages`): every board's kernels and
images, the cases on the rack (the virtual rack by default, started and stopped here if
it was not running), the records into the results store, and the campaign report."""

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import attr

from rtlab.campaign.spec import Campaign
from rtlab.campaign.stages import (
    Measured,
    Rack,
    build_images,
    provide_kernels,
    run_tests,
)

Progress = Callable[[str], None]


@attr.frozen
class CampaignOutcome:
    measured: tuple[Measured, ...]
    report: Path
    summary: Path

    @property
    def exit_code(self) -> int:
        """0 when every run finished with verdicts (a latency fail is the report's to
        show); otherwise the worst run's."""
        return max((m.exit_code for m in self.measured if m.exit_code != 1), default=0)


def run_campaign(campaign: Campaign, *, out: Path, rack: Rack, virtual: bool,
                 campaign_run: str, db_url: str,
                 progress: Progress = print) -> CampaignOutcome:
    from rtlab.campaign.page import write_campaign_report
    from rtlab.store import ingest_folder, open_store

    started = time.monotonic()
    for board in campaign.boards:
        provide_kernels(campaign, board, out, progress)
        build_images(campaign, board, out, progress)
    progress(f"kernels and images: {time.monotonic() - started:.0f} s")
    measured: list[Measured] = []
    from rtlab.vlab import control

    with control.running(progress) if virtual else contextlib.nullcontext():
        for board in campaign.boards:
            measured += run_tests(campaign, board, out, rack, campaign_run, progress)
    progress(f"measured: {time.monotonic() - started:.0f} s")
    store = open_store(db_url)
    try:
        progress(f"results store: {ingest_folder(store, out / 'test')}")
        written = write_campaign_report(store, campaign, out / "report",
                                        campaign_run=campaign_run)
    finally:
        store.close()
    progress(f"report: {written.html} (summary {written.summary}); "
             f"{time.monotonic() - started:.0f} s in all")
    return CampaignOutcome(tuple(measured), written.html, written.summary)
