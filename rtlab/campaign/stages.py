"""A campaign through the pipeline's own stages, per board: each variant's kernel
(:mod:`rtlab.kernel`: built with ccache, or Debian's package), its SD image
(:mod:`rtlab.image`), and its cases on the rack (:mod:`rtlab.run.runner`, every healthy
place of the type sharing them). The functions here only loop over the campaign's
variants; what each stage does is the stage's own code, as the pipeline's jobs call it.

Everything of one campaign lives under one folder (``--out``, default
``out/campaign/<name>``)::

    kernel/<variant>/<board>-<std|rt>/   kernel.json (with the variant), the kernel files
    images/<variant>/<board>-<std|rt>/   sdcard.img, .bmap, manifest.json
    test/<board>/<variant>-<repeat>/     JUnit, results/*.json, console logs
"""

import contextlib
import datetime
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import attr

from rtlab.artifacts.identity import RUN_VARIABLE
from rtlab.artifacts.kernel_info import FILE_NAME as KERNEL_INFO
from rtlab.campaign.spec import Campaign, Variant
from rtlab.image.build import build_image
from rtlab.kernel.debian import fetch_kernel
from rtlab.kernel.provide import stamp_kernel
from rtlab.util import paths

Progress = Callable[[str], None]


def default_out(campaign: str) -> Path:
    return Path("out") / "campaign" / campaign


def kernel_folder(out: Path, variant: Variant, board: str) -> Path:
    return out / "kernel" / variant.name / f"{board}-{variant.image_flavour}"


def image_folder(out: Path, variant: Variant, board: str) -> Path:
    return out / "images" / variant.name / f"{board}-{variant.image_flavour}"


def test_folder(out: Path, variant: Variant, board: str, repeat: int) -> Path:
    # by board first: a board's test job keeps (and releases) its own folder
    return out / "test" / board / f"{variant.name}-{repeat}"


def campaign_run_id(campaign: str, given: str | None = None) -> str:
    """Which execution of the campaign this is: ``given`` (an option), else
    ``$RTLAB_CAMPAIGN_RUN``, else the pipeline's (every job of it shares the id), else a
    new one from the time."""
    if given:
        return given
    if os.environ.get(RUN_VARIABLE):
        return os.environ[RUN_VARIABLE]
    if os.environ.get("CI_PIPELINE_ID"):
        return f"gitlab:{os.environ['CI_PIPELINE_ID']}"
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{campaign}:{stamp}"


def provide_kernels(campaign: Campaign, board: str, out: Path,
                    progress: Progress = print) -> dict[str, Path]:
    """Every variant's kernel for ``board``, with kernel.json saying which variant it is:
    built from the pinned source with the variant's flavour and extra fragments (ccache;
    a build folder per variant, so that make and ccache find their last build again), or
    Debian's package."""
    from rtlab.kernel.build import build_kernel, default_build_dir
    from rtlab.kernel.spec import fragment_path

    found = {}
    for variant in campaign.variants.values():
        dest = kernel_folder(out, variant, board)
        progress(f"{variant.name} {board}: kernel ({_what(variant)})")
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".kernel-", dir=dest.parent) as tmp:
            if variant.debian is not None:
                folder = fetch_kernel(board, variant.debian, paths.debs_dir(), Path(tmp),
                                      progress).folder
            else:
                assert variant.flavour is not None
                # a variant with fragments of its own builds in a folder of its own
                # name (the one `rtlab kernel build` of a flavour of that name uses)
                build_dir = (default_build_dir(board, variant.name) if variant.fragments
                             else None)
                folder = build_kernel(
                    board, variant.flavour, Path(tmp), build_dir=build_dir,
                    extra_fragments=[fragment_path(name) for name in variant.fragments],
                    progress=progress).folder
            _stamp(folder, campaign, variant)
            if dest.exists():
                shutil.rmtree(dest)
            folder.rename(dest)
        found[variant.name] = dest
    return found


def _what(variant: Variant) -> str:
    if variant.debian is not None:
        return f"Debian's {variant.debian} package"
    extra = f" + {', '.join(variant.fragments)}" if variant.fragments else ""
    return f"built: {variant.flavour}{extra}"


def _stamp(folder: Path, campaign: Campaign, variant: Variant) -> None:
    """kernel.json says which variant of which campaign the kernel is: the image manifest
    and every result record carry it from there."""
    stamp_kernel(folder, action="build" if variant.debian is None else "debian",
                 reason=f"campaign {campaign.name}: variant {variant.name}",
                 variant=variant.identity(campaign.name))


def build_images(campaign: Campaign, board: str, out: Path,
                 progress: Progress = print) -> dict[str, Path]:
    """Every variant's SD image for ``board``, from the kernel :func:`provide_kernels`
    left (an up-to-date image is reused)."""
    images = {}
    for variant in campaign.variants.values():
        kernel = kernel_folder(out, variant, board)
        if not (kernel / KERNEL_INFO).is_file():
            raise FileNotFoundError(f"{kernel}: no kernel of variant {variant.name} for "
                                    f"{board} (rtlab campaign kernels first)")
        progress(f"{variant.name} {board}: image")
        artifacts = build_image(board, variant.image_flavour, paths.debs_dir(),
                                out / "images" / variant.name, progress=progress,
                                kernel_dir=kernel)
        images[variant.name] = artifacts.sd_image
    return images


@attr.frozen
class Rack:
    """Where a campaign's cases run: the labgrid environment and coordinator, the prefix
    of the places' board tags (``qemu-`` on the virtual rack), how many places of a type
    share the cases (0: every healthy one) and how long to wait for one."""

    env_file: Path
    coordinator: str
    board_prefix: str = ""
    boards: int = 0
    reserve_timeout_s: float = 3600.0
    suite: Path | None = None
    """The suite file the boards run (None: the repository's), e.g. one with a wider
    histogram where latencies are milliseconds."""


@attr.frozen
class Measured:
    variant: str
    board: str
    repeat: int
    folder: Path
    exit_code: int


def order(campaign: Campaign) -> list[tuple[int, Variant]]:
    """The runs in the order they are measured: each repeat measures every variant once,
    in turn, the order reversed every other repeat (A B, B A): a drift of the rack (heat,
    the host's load) then falls on every variant alike instead of on the last one."""
    variants = list(campaign.variants.values())
    return [(repeat, variant) for repeat in range(1, campaign.repeat + 1)
            for variant in (variants if repeat % 2 else list(reversed(variants)))]


def run_tests(campaign: Campaign, board: str, out: Path, rack: Rack, campaign_run: str,
              progress: Progress = print) -> list[Measured]:
    """Every variant's cases on ``board`` (a board of kernel/boards.yaml; the places carry
    ``rack.board_prefix + board``), ``campaign.repeat`` times each, each a fresh flash and
    boot; every record carries ``campaign_run``."""
    from rtlab.run.runner import RUN_PART_VARIABLE, Selection, run_suite
    from rtlab.run.sharing import run_on_boards

    tag = f"{rack.board_prefix}{board}"
    measured = []
    with _campaign_run(campaign_run):
        for repeat, variant in order(campaign):
            image = image_folder(out, variant, board) / "sdcard.img"
            if not image.is_file():
                raise FileNotFoundError(f"{image}: no image of variant {variant.name} for "
                                        f"{board} (rtlab campaign images first)")
            folder = test_folder(out, variant, board, repeat)
            # a CI job makes every run of the campaign: each its own run in the store
            os.environ[RUN_PART_VARIABLE] = f"{variant.name}-{repeat}"
            progress(f"{variant.name} {tag}: run {repeat} of {campaign.repeat}, "
                     f"{len(campaign.scenarios) * len(campaign.intervals_us)} cases of "
                     f"{campaign.duration_s} s")
            if rack.boards == 1:
                outcome = run_suite(board=tag, image=image, env_file=rack.env_file,
                                    coordinator=rack.coordinator, out_dir=folder,
                                    duration_s=campaign.duration_s,
                                    selection=Selection(cases=campaign.cases(),
                                                        suite=rack.suite),
                                    reserve_timeout_s=rack.reserve_timeout_s)
                code = outcome.exit_code
            else:
                argv = ["run", "--board", tag, "--reserve-timeout", str(rack.reserve_timeout_s),
                        "--image", os.fspath(image), "--env", os.fspath(rack.env_file),
                        "--coordinator", rack.coordinator, "--out", os.fspath(folder),
                        "--duration", str(campaign.duration_s), "--cases", campaign.cases()]
                if rack.suite is not None:
                    argv += ["--suite", os.fspath(rack.suite)]
                code = run_on_boards(argv, board=tag, boards=rack.boards,
                                     coordinator=rack.coordinator, image=image,
                                     out_dir=folder)
            measured.append(Measured(variant.name, board, repeat, folder, code))
    return measured


@contextlib.contextmanager
def _campaign_run(campaign_run: str) -> Iterator[None]:
    """``$RTLAB_CAMPAIGN_RUN`` for the suites this process starts (their records read it),
    and ``$RTLAB_RUN_PART`` as the loop sets it, both as they were afterwards."""
    from rtlab.run.runner import RUN_PART_VARIABLE

    saved = {name: os.environ.get(name) for name in (RUN_VARIABLE, RUN_PART_VARIABLE)}
    os.environ[RUN_VARIABLE] = campaign_run
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
