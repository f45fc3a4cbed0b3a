"""CPU time of catching each built-in projection up with one ledger, for two source trees.

Measures what a change to the built-ins' handlers costs on the catch-up path::

    mkdir -p /tmp/before/tree && git archive eb62bc2 | tar -x -C /tmp/before/tree
    ./dev bench analytics_builtins_ab /tmp/before/tree --sessions 400 --events 250 --rounds 3

The corpus (``benchmarks._corpus`` sessions, as ``benchmarks.analytics`` writes
them) is indexed once into a SQLite ledger by this checkout.  Each round then
runs, for each projection, a fresh process per tree that catches the projection
up into an empty analytics database; the trees alternate, so both see the same
machine load.  A tree is imported through a folder of links that lays its layer
folders out as the installed package does.  Each figure is the best process CPU
time (all threads) of its rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
_LAYERS = ("domain", "infrastructure", "projections", "cli", "service")
_NAMES = ("tokens", "tools", "sessions")


def _farm(tree: Path, into: Path) -> Path:
    """A folder whose ``pentrace`` package is ``tree``'s, laid out as installed."""
    package = into / "pentrace"
    package.mkdir(parents=True)
    for entry in (tree / "pentrace").iterdir():
        (package / entry.name).symlink_to(entry)
    for layer in _LAYERS:
        (package / layer).symlink_to(tree / layer)
    return into


def _child(root: Path, name: str, database: Path) -> None:
    from pentrace.infrastructure.analytics.registry import BUILTINS
    from pentrace.infrastructure.analytics.runner import catch_up

    cpu, wall = time.process_time(), time.perf_counter()
    catch_up(
        BUILTINS[name], data_root=root, env={"PENTRACE_ANALYTICS_URL": f"sqlite:///{database}"}
    )
    used = {"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall}
    print(json.dumps({**used, "version": getattr(BUILTINS[name], "version", 1)}))


def _run(path: str, root: Path, name: str, work: Path) -> dict[str, float]:
    database = work / f"analytics-{name}.db"
    for leftover in work.glob(f"analytics-{name}.db*"):
        leftover.unlink()
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.analytics_builtins_ab", "--child", name, str(root)],
        cwd=work,  # not the checkout: its pentrace/ folder would shadow the tree's
        env={**os.environ, "PYTHONPATH": path, "BENCH_ANALYTICS_DB": str(database)},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{name} under {path}: {done.stderr[-800:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    """Build the corpus, alternate the trees, print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("before", type=Path, nargs="?", help="source tree to compare against")
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--events", type=int, default=250, help="records per session")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # a child process: ``before`` is then the data root
        _child(args.before, args.child, Path(os.environ["BENCH_ANALYTICS_DB"]))
        return
    if args.before is None:
        parser.error("give the source tree to compare against")
    from benchmarks.analytics import write_corpus
    from pentrace.infrastructure.analytics.runner import open_ledger
    from pentrace.infrastructure.ledger.bulk import sync

    with tempfile.TemporaryDirectory(prefix="bench-builtins-") as scratch:
        work = Path(scratch)
        root = work / "data"
        records = write_corpus(root, args.sessions, args.events)
        ledger = open_ledger(root, {})
        try:
            sync(ledger, root)
        finally:
            ledger.close()
        paths = {
            "before": f"{_farm(args.before.resolve(), work / 'before')}{os.pathsep}{HERE}",
            "after": str(HERE),
        }
        best: dict[tuple[str, str], dict[str, float]] = {}
        for _ in range(args.rounds):
            for name in _NAMES:
                for tree, path in paths.items():
                    found = _run(path, root, name, work)
                    kept = best.get((tree, name))
                    if kept is None or found["cpu"] < kept["cpu"]:
                        best[tree, name] = found
    print(f"{records} records, best of {args.rounds} rounds, load {os.getloadavg()[0]:.1f}\n")
    print("| projection (versions) | before CPU s | after CPU s | after / before | after wall s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in _NAMES:
        before, after = best["before", name], best["after", name]
        ratio = after["cpu"] / before["cpu"]
        print(
            f"| `{name}` ({before['version']:.0f} / {after['version']:.0f}) | {before['cpu']:.2f} "
            f"| {after['cpu']:.2f} | {ratio:.2f} | {after['wall']:.2f} |"
        )


if __name__ == "__main__":
    main()
