"""``rtlab lab doctor``: everything a pipeline needs of a lab, checked before a pipeline
finds it missing, each problem with its fix.

The lab (coordinator, places, resources, exporters, tags, SSH to the exporter hosts,
tools: rtlab.lab.preflight), the results database (reachable, its schema at this rtlab's
revision), the gate (every board type on the coordinator has limits for every flavour,
scenario and interval of the suite; provisional ones named) and, in a pipeline, the
variables its jobs read. Nothing is changed: no place acquired, no database migrated or
created.
"""

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import attr

from rtlab.lab import preflight
from rtlab.measure.suite import Suite, SuiteFileError, load_suite
from rtlab.platform.boards import FLAVOURS
from rtlab.util import paths
from rtlab.util.findings import Finding, error, ok, warning
from rtlab.verdict.thresholds import ThresholdsError, coverage, load_thresholds

DEFAULT_COORDINATOR = "127.0.0.1:20408"
# the tokens of the scheduled jobs: each masked, protected and scoped to its job's
# environment (.gitlab-ci.yml's header), so that no other job sees it
SCOPED_TOKENS = {"RTLAB_TUNE_TOKEN": ("tune", "thresholds-tuning"),
                 "RTLAB_BISECT_TOKEN": ("bisect-publish", "latency-bisection"),
                 "RTLAB_BISECT_TRIGGER_TOKEN": ("changes", "latency-change-points")}


@attr.frozen
class DoctorOptions:
    coordinator: str
    env_file: Path
    boards: tuple[str, ...] = ()
    db_url: str | None = None
    thresholds: Path | None = None
    suite: Path | None = None
    # the CI job's variables (None: not in a pipeline)
    pipeline: Mapping[str, str] | None = None


def options_from(coordinator: str | None, env_file: str | None, boards: Sequence[str],
                 db_url: str | None, thresholds: str | None, suite: str | None,
                 environ: Mapping[str, str] = os.environ) -> DoctorOptions:
    """The command line's options, else the variables the pipeline's jobs read."""
    env = env_file or environ.get("RTLAB_ENV") or "env/rack.yaml"
    env_path = Path(env) if Path(env).is_absolute() or Path(env).exists() \
        else paths.REPO_ROOT / env
    return DoctorOptions(
        coordinator=coordinator or environ.get("LG_COORDINATOR") or DEFAULT_COORDINATOR,
        env_file=env_path, boards=tuple(b for b in boards if b),
        db_url=db_url or environ.get("RTLAB_RESULTS_DB") or None,
        thresholds=Path(thresholds) if thresholds else None,
        suite=Path(suite) if suite else None,
        pipeline=dict(environ) if environ.get("CI") else None)


def diagnose(options: DoctorOptions) -> list[Finding]:
    from labgrid.util import labgrid_version

    found: list[Finding] = []
    try:
        suite = load_suite(options.suite)
    except (SuiteFileError, OSError) as failure:
        return [error("suite", str(options.suite or "suite.yaml"), str(failure),
                      "correct the file at the line named")]
    network = any("network" in scenario.kinds for scenario in suite.scenarios.values())

    boards = list(options.boards)
    try:
        needs = preflight.needs_of(options.env_file)
        found.append(ok("env-file", str(options.env_file), "binds " + ", ".join(
            f"{role.label} ({role.driver})" for role in needs.roles)))
    except (preflight.EnvFileError, OSError) as failure:
        needs = None
        found.append(error("env-file", str(options.env_file), str(failure),
                           "give the environment file the runs use (--env, RTLAB_ENV) and "
                           "correct it: rtlab env check"))
    try:
        lab = preflight.read_lab(options.coordinator)
    except preflight.CoordinatorError as failure:
        lab = None
        found.append(error("coordinator", options.coordinator, f"does not answer: {failure}",
                           "start the coordinator (docker/lab/compose.yaml, docs/images.md) or "
                           "give its address (--coordinator, LG_COORDINATOR)"))
    if lab is not None:
        found += preflight.coordinator_findings(lab, labgrid_version())
        if not boards:
            boards = sorted({p.tags["board"] for p in lab.places if "board" in p.tags})
            if not boards:
                found.append(error("places", options.coordinator, "no place has a board tag",
                                   "labgrid-client -p <place> set-tags board=<board type>"))
        if needs is not None:
            found += preflight.places_findings(lab, needs, boards, network)
        reach = preflight.ssh_findings(lab, boards)
        found += reach
        if needs is not None:
            # looked for over SSH, on the hosts it reaches
            found += preflight.tool_findings(lab, needs, boards,
                                             skip_hosts=preflight.unreachable(reach))
    found += database_findings(options.db_url)
    found += gate_findings(options.thresholds, suite, boards)
    if options.pipeline is not None:
        found += pipeline_findings(options.pipeline)
    return found


def database_findings(url: str | None) -> list[Finding]:
    """Reachable, and at this rtlab's schema revision. Read only: a missing SQLite file
    is not created, an old schema not upgraded."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    from rtlab.store import connect
    from rtlab.store.migrate import current, head, known

    if url is None:
        return [warning("database", "RTLAB_RESULTS_DB", "not set: every job keeps its "
                        "results in a file of its own, so no trends, no baselines for "
                        "adaptive cases and comparisons, no history for tuning",
                        "RTLAB_RESULTS_DB=postgresql://rtlab@<host>/rtlab (docker/"
                        "lab/compose.yaml's database), then rtlab results migrate")]
    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - sqlalchemy's ArgumentError or a ValueError
        scheme = url.split(":", 1)[0] if ":" in url else "(no scheme)"
        return [error("database", f"scheme {scheme}", "not a database URL",
                      "e.g. postgresql://rtlab@db.lab/rtlab or sqlite:///results.db")]
    shown = parsed.render_as_string(hide_password=True)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:") \
            and not Path(parsed.database).is_file():
        return [warning("database", shown, "does not exist yet: the first job that stores "
                        "results creates it, with no history",
                        f"rtlab results migrate --db {shown} creates it now")]
    try:
        engine = connect(url, upgrade=False)
        try:
            revision = current(engine)
        finally:
            engine.dispose()
    except SQLAlchemyError as failure:
        reason = str(getattr(failure, "orig", failure) or failure).splitlines()[0]
        return [error("database", shown, f"does not answer: {reason}",
                      "start it (docker/lab/compose.yaml) or correct RTLAB_RESULTS_DB; a "
                      "password belongs in PGPASSWORD, not the URL")]
    newest = head()
    if revision == newest:
        return [ok("database", shown, f"answers; schema at revision {revision}, this "
                   "rtlab's")]
    if revision is not None and revision not in known():
        return [error("migrations", shown, f"schema at revision {revision}, which this "
                      f"rtlab (revision {newest}) does not know: a newer rtlab wrote it",
                      "run the rtlab release that wrote it in CI and here")]
    return [error("migrations", shown, f"schema at revision {revision or 'none'}, this "
                  f"rtlab's is {newest}: the first job to open it would migrate it "
                  "mid-pipeline, with whatever rights that job's role has",
                  f"rtlab results migrate --db {shown} (back it up first)")]


def gate_findings(path: Path | None, suite: Suite, boards: Sequence[str]) -> list[Finding]:
    """Every board type on the coordinator resolves limits for every flavour, scenario,
    interval and rt-test: a case without is an error in every pipeline. Provisional
    limits (not measured on this lab's boards) are warnings."""
    shown = str(path or "thresholds.yaml")
    try:
        thresholds = load_thresholds(path, suite)
    except (ThresholdsError, OSError) as failure:
        return [error("thresholds", shown, str(failure), "correct the file at the line "
                      "named (rtlab thresholds check)")]
    found = []
    for board in boards:
        if board not in thresholds.boards:
            found.append(error("thresholds", f"board={board}", f"{shown} has no limits for "
                               "this board type: every case on it would be an error",
                               f"add boards: {board}: to {shown} (docs/verdicts.md), with "
                               "provisional: until the lab's own nights measure it"))
            continue
        missing = [f for f in FLAVOURS if f not in thresholds.flavours(board)]
        if missing:
            found.append(error("thresholds", f"board={board}", f"no limits for flavour(s) "
                               f"{', '.join(missing)}", f"add them under boards: {board}: "
                               f"in {shown}"))
            continue
        try:
            covered = coverage(thresholds, suite, board, FLAVOURS)
        except ThresholdsError as failure:
            found.append(error("thresholds", f"board={board}", str(failure),
                               "correct the file at the line named"))
            continue
        found.append(ok("thresholds", f"board={board}",
                        f"{covered.cases} cases resolve to limits"))
        for flavour, why in covered.provisional.items():
            found.append(warning("thresholds", f"board={board} flavour={flavour}",
                                 f"limits provisional: {why}",
                                 "let the scheduled nights measure this lab's boards; the "
                                 "tune job's merge request then replaces them"))
    return found


def pipeline_findings(variables: Mapping[str, str]) -> list[Finding]:
    """What the jobs of this pipeline read, as far as this job can see it."""
    found = []
    scheduled = variables.get("CI_PIPELINE_SOURCE") == "schedule"
    if not variables.get("LG_COORDINATOR"):
        found.append(warning("variables", "LG_COORDINATOR", f"not set: the jobs use "
                             f"{DEFAULT_COORDINATOR}", "set it in Settings > CI/CD > "
                             "Variables to the lab's coordinator"))
    has_db = bool(variables.get("RTLAB_RESULTS_DB"))
    pulls = variables.get("RTLAB_PULL_PIPELINES", "0").strip() or "0"
    if pulls != "0" and not variables.get("RTLAB_GITLAB_TOKEN"):
        found.append(error("variables", "RTLAB_GITLAB_TOKEN", f"RTLAB_PULL_PIPELINES={pulls} "
                           "pulls earlier pipelines' results, which needs this token",
                           "a read_api token, masked and protected, in the project's "
                           "variables"))
    if scheduled and not has_db:
        found.append(error("variables", "RTLAB_RESULTS_DB", "a scheduled pipeline's changes "
                           "job reads the default branch's history from the lab's database",
                           "set RTLAB_RESULTS_DB (masked) to the lab's database"))
    if variables.get("RTLAB_WINDOW") and not has_db:
        found.append(warning("variables", "RTLAB_WINDOW", "adaptive cases without "
                             "RTLAB_RESULTS_DB have no baseline: each runs to its cap",
                             "set RTLAB_RESULTS_DB"))
    for token, (job, environment) in SCOPED_TOKENS.items():
        if variables.get(token):
            found.append(warning("variables", token, f"visible to this job: only the {job} "
                                 f"job (environment {environment}) should see it",
                                 f"scope the variable to the environment {environment}"))
    if not found:
        found.append(ok("variables", "pipeline", "the variables this job can see are set; "
                        "the scheduled jobs' tokens are scoped to their environments"))
    return found
