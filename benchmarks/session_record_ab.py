"""Recording throughput of two source trees of pentrace, interleaved in ONE process.

Compares a change against an earlier commit on a busy machine, where separate
runs differ by 15% or more::

    mkdir /tmp/before && git archive 7eb5291 | tar -x -C /tmp/before
    ./dev bench session_record_ab /tmp/before --requests 3000 --rounds 15

Both trees are imported side by side (each keeps its own ``pentrace`` modules
and its own eventsourcing topic registrations, swapped in before each of its
runs), then run the workload of :func:`benchmarks.session_record.pentrace_record`
in alternating order, round after round, fsync off.  Each figure is the best
CPU time of its rounds.  The second tree defaults to this checkout.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

import eventsourcing.utils as es_utils

from benchmarks.session_record import RECORDS_PER_REQUEST, pentrace_record

# The layer folders that install as pentrace's subpackages (see pyproject.toml).
_LAYERS = {
    "pentrace": "pentrace",
    "pentrace.domain": "domain",
    "pentrace.infrastructure": "infrastructure",
    "pentrace.projections": "projections",
    "pentrace.cli": "cli",
    "pentrace.service": "service",
}


class _TreeFinder:
    """Finds pentrace's packages in one source tree (submodules follow their package)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name not in _LAYERS:
            return None
        folder = self.root / _LAYERS[name]
        return importlib.util.spec_from_file_location(
            name, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


@dataclass
class _Tree:
    """One imported source tree: its modules and its topic registrations."""

    label: str
    modules: dict[str, ModuleType]
    topics: dict[str, Any]

    def activate(self) -> None:
        """Make this tree's modules and topics the ones lazy imports and topics resolve to."""
        for name in _pentrace_modules():
            del sys.modules[name]
        sys.modules.update(self.modules)
        es_utils._topic_cache.clear()
        es_utils._topic_cache.update(self.topics)

    def record(self, folder: Path, requests: int, mode: str) -> None:
        application = self.modules["pentrace.infrastructure.eventstore.application"]
        durability = self.modules["pentrace.infrastructure.trace.durability"]
        pentrace_record(
            folder,
            requests,
            application.SaveMode[mode],
            application=application.SessionApplication,
            durability=durability.Durability.NONE,
        )


def _pentrace_modules() -> list[str]:
    return [name for name in sys.modules if name == "pentrace" or name.startswith("pentrace.")]


def _snapshot(label: str) -> _Tree:
    importlib.import_module("pentrace.infrastructure.eventstore.application")
    importlib.import_module("pentrace.infrastructure.trace.durability")
    modules = {name: sys.modules[name] for name in _pentrace_modules()}
    return _Tree(label, modules, dict(es_utils._topic_cache))


def _load(root: Path) -> _Tree:
    """Import the tree at ``root`` beside the modules already loaded."""
    for name in _pentrace_modules():
        del sys.modules[name]
    es_utils._topic_cache.clear()
    finder = _TreeFinder(root)
    sys.meta_path.insert(0, finder)
    try:
        tree = _snapshot(str(root))
    finally:
        sys.meta_path.remove(finder)
    where = Path(tree.modules["pentrace.infrastructure.eventstore.application"].__file__ or "")
    if not where.is_relative_to(root):
        raise SystemExit(
            f"{root} has no infrastructure/eventstore/application.py: is it a pentrace tree?"
        )
    return tree


def main(argv: list[str] | None = None) -> None:
    """Run both trees round by round and print events/s and the ratio to the first."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="source tree to compare against")
    parser.add_argument("after", type=Path, nargs="?", help="default: this checkout")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    here = _snapshot("this checkout")
    trees = [_load(args.before.absolute())]
    trees.append(_load(args.after.absolute()) if args.after else here)
    modes = ("REQUEST", "EVENT")
    best = {(tree.label, mode): float("inf") for tree in trees for mode in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for tree in trees:  # warm-up: first imports, first files
            tree.activate()
            tree.record(Path(tempfile.mkdtemp(dir=tmp)), 50, "REQUEST")
        for number in range(args.rounds):
            for mode in modes:
                for tree in trees if number % 2 == 0 else trees[::-1]:
                    tree.activate()
                    folder = Path(tempfile.mkdtemp(dir=tmp))
                    gc.collect()
                    started = time.process_time()
                    tree.record(folder, args.requests, mode)
                    seconds = time.process_time() - started
                    best[tree.label, mode] = min(best[tree.label, mode], seconds)
    here.activate()
    events = args.requests * RECORDS_PER_REQUEST
    print(f"{'save per':8} {'tree':40} {'events/s':>10} {'vs first':>9}")
    for mode in modes:
        first = best[trees[0].label, mode]
        for tree in trees:
            rate, ratio = events / best[tree.label, mode], first / best[tree.label, mode]
            print(f"{mode.lower():8} {tree.label:40} {rate:10,.0f} {ratio:8.2f}x")
    print(f"best CPU time of {args.rounds} alternating rounds, {args.requests} requests each")


if __name__ == "__main__":
    main()
