"""``rtlab thresholds …``: ``check`` validates the gate and ``show`` prints the limits a
board gets with the line each came from, so a reviewer sees what a change to the file
really moves; ``suggest`` and ``replay`` are :mod:`rtlab.tuning`'s (its ``register`` adds them)."""

import argparse
from pathlib import Path

from rtlab.measure.suite import load_suite
from rtlab.util import paths
from rtlab.util.commands import keep_actions
from rtlab.verdict.thresholds import (
    METRICS,
    Thresholds,
    coverage,
    format_us,
    load_thresholds,
)


def check(thresholds_path: Path, suite_path: Path) -> str:
    suite = load_suite(suite_path)
    thresholds = load_thresholds(thresholds_path, suite)
    # every flavour of every board must resolve for every case the suite can run
    covered = {board: coverage(thresholds, suite, board) for board in thresholds.boards}
    cases = sum(c.cases for c in covered.values())
    provisional = sorted(f"{board}/{flavour}" for board, c in covered.items()
                         for flavour in c.provisional)
    told = (f"; provisional (not measured on this lab's boards): {', '.join(provisional)}"
            if provisional else "")
    return (f"{thresholds.display}: valid; {len(thresholds.boards)} boards, "
            f"{cases} test cases (board/flavour/scenario/interval and rt-tests) resolve "
            f"to limits{told}")


def show(thresholds_path: Path, suite_path: Path, board: str, flavour: str | None,
         scenario: str | None, interval_us: int | None) -> str:
    suite = load_suite(suite_path)
    thresholds = load_thresholds(thresholds_path, suite)
    flavours = [flavour] if flavour else list(thresholds.flavours(board))
    intervals: list[int | None] = [interval_us] if interval_us else list(suite.intervals_us)
    # rt-tests run at no interval of the suite's: one row each
    cases: list[tuple[str, int | None]]
    if scenario in suite.rt_tests:
        cases = [(scenario, None)]
    elif scenario:
        if scenario not in suite.scenarios:
            raise ValueError(f"{suite.source}: no scenario or rt-test {scenario!r} (valid: "
                             f"{', '.join((*suite.scenarios, *suite.rt_tests))})")
        cases = [(scenario, i) for i in intervals]
    else:
        cases = [(name, i) for name in suite.scenarios for i in intervals]
        cases += [(tool, None) for tool in suite.rt_tests]
    return _table(thresholds, board, flavours, cases)


def _table(thresholds: Thresholds, board: str, flavours: list[str],
           cases: list[tuple[str, int | None]]) -> str:
    rows = [("board", "flavour", "scenario", "interval", "metric", "limit", "from",
             "provisional", "reason")]
    for flavour in flavours:
        for scenario, interval in cases:
            limits = thresholds.lookup(board, flavour, scenario, interval)
            for metric in METRICS:
                limit = limits.get(metric)
                # cyclictest's p99.9 limit is not judged for the other rt-tests
                if limit is None or (interval is None and metric == "p99_9_us"):
                    continue
                reason = (limit.reason or "-")
                rows.append((board, flavour, scenario,
                             "-" if interval is None else f"{interval} µs", metric,
                             format_us(limit.value), limit.source,
                             "yes" if limit.provisional else "-",
                             reason if len(reason) <= 70 else reason[:67] + "..."))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True))
                     + "  " + row[-1] for row in rows)


def _thresholds(args: argparse.Namespace) -> int:
    if args.action == "check":
        print(check(Path(args.file), Path(args.suite)))
        return 0
    print(show(Path(args.file), Path(args.suite), args.board, args.flavour, args.scenario,
               args.interval))
    return 0


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    thresholds = sub.add_parser("thresholds", help="validate, show, tune or replay the "
                                                   "latency gate")
    threshold_actions = thresholds.add_subparsers(dest="action", required=True)
    for action, what in (("check", "validate the file against the suite"),
                         ("show", "the limits a board gets, with the line each comes from")):
        command = threshold_actions.add_parser(action, help=what)
        command.add_argument("--file", default=str(paths.REPO_ROOT / "thresholds.yaml"))
        command.add_argument("--suite", default=str(paths.REPO_ROOT / "suite.yaml"))
        command.set_defaults(func=_thresholds)
        if action == "show":
            command.add_argument("--board", required=True,
                                 help="a board tag, e.g. imx6q or qemu-rpi3")
            command.add_argument("--flavour", help="only this flavour")
            command.add_argument("--scenario", help="only this scenario")
            command.add_argument("--interval", type=int, help="only this interval (µs)")
    # tuning's commands are the gate's too: rtlab thresholds suggest|replay (rtlab.tuning.cli),
    # and check --db (the false red each limit implies, from the store)
    keep_actions(thresholds, threshold_actions)
