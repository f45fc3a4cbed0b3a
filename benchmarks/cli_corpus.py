"""CLI figures over a generated corpus: list, search and stats cold and warm, audit of everything.

Run ``python -m benchmarks.cli_corpus`` for the full corpus (10,000 sessions,
about 5 M records, about 2 GB) or, for example,
``python -m benchmarks.cli_corpus --sessions 2000 --records 200000``.

Shards are written directly (no recorder) from :mod:`benchmarks._corpus`,
spread over projects, agents and days.  Every command runs as a real
subprocess (``python -m pentrace``), so each figure includes interpreter
start-up; ``pentrace version`` is timed as that baseline and every figure is
also given in CPU seconds (user + system of the child, which a busy machine
disturbs less than wall time) and as a ratio to the baseline.  *Cold* is the
first run on a fresh data root (derived caches and indexes are built); *warm*
is the next run.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from benchmarks._corpus import generate_records
from pentrace.infrastructure.storage.layout import DataRoot

_PROJECTS = ("web", "payments", "infra", "research")
_AGENTS = ("coder", "reviewer", "planner")
_START = date(2026, 10, 1)


def write_corpus(root: Path, sessions: int, records: int) -> tuple[int, int]:
    """Write ``sessions`` sessions holding ``records`` records in all; returns (records, bytes)."""
    base = DataRoot(root)
    per_session = max(3, records // sessions)
    total_records = total_bytes = 0
    for number in range(sessions):
        lines = list(generate_records(per_session, seed=number))
        token = f"{number:08x}"
        session_id = f"session-2026-10-01-00-00-00-{token}"
        old_id = lines[0].split(b'"session_id":"', 1)[1].split(b'"', 1)[0]
        lines[0] = lines[0].replace(old_id, session_id.encode(), 1)
        project = _PROJECTS[number % len(_PROJECTS)]
        agent = _AGENTS[number // len(_PROJECTS) % len(_AGENTS)]
        day = _START + timedelta(days=number % 60)
        path = base.shard_path(project, agent, session_id, 1, day)
        path.parent.mkdir(parents=True, exist_ok=True)
        body = b"\n".join(lines) + b"\n"
        path.write_bytes(body)
        total_records += len(lines)
        total_bytes += len(body)
    return total_records, total_bytes


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(root: Path, *args: str) -> tuple[float, int, float]:
    env = {**os.environ, "PENGUIN_HOME": str(root)}
    for name in ("PENGUIN_RUNTIME_EVENT_LEDGER_PATH", "PENTRACE_LEDGER_URL"):
        env.pop(name, None)
    cpu = _cpu()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pentrace", "--data-root", str(root), *args],
        capture_output=True,
        env=env,
        check=False,
    )
    elapsed = time.perf_counter() - started
    cpu = _cpu() - cpu
    if done.returncode not in (0, 1, 2):
        sys.stderr.write(done.stderr.decode("utf-8", "replace")[-2000:])
    return elapsed, done.returncode, cpu


def _has_command(root: Path, *args: str) -> bool:
    return _timed(root, *args, "--help")[1] == 0


def run(
    sessions: int, records: int, keep: Path | None, reuse: bool = False
) -> list[tuple[str, float, float, str]]:
    """Generate the corpus, run every command; rows are ``(label, wall s, CPU s, note)``."""
    root = keep if keep is not None else Path(tempfile.mkdtemp(prefix="pentrace-cli-bench-"))
    rows: list[tuple[str, float, float, str]] = []
    try:
        started = time.perf_counter()
        if reuse:
            # Keep the traces, drop every derived store so the cold figures are cold.
            shutil.rmtree(root / ".pentrace", ignore_errors=True)
            shutil.rmtree(root / "runtime_events", ignore_errors=True)
            shutil.rmtree(root / "analytics", ignore_errors=True)
            shards = list(root.glob("*/agents/*/traces/*/*.jsonl"))
            written = sum(1 for shard in shards for _ in shard.open("rb"))
            size = sum(shard.stat().st_size for shard in shards)
        else:
            written, size = write_corpus(root, sessions, records)
        rows.append(
            (
                "generate or reuse the corpus (not a CLI figure)",
                time.perf_counter() - started,
                0.0,
                f"{sessions} sessions, {written} records, {size / 1e6:.0f} MB",
            )
        )
        steps: list[tuple[str, tuple[str, ...]]] = [
            ("startup: pentrace version", ("version",)),
            ("list, cold (builds the catalog cache)", ("sessions", "list", "--json")),
            ("list, warm", ("sessions", "list", "--json")),
            (
                "list --agent coder --since 2026-11-01, warm",
                ("sessions", "list", "--agent", "coder", "--since", "2026-11-01", "--json"),
            ),
            ("search, cold (builds the FTS index)", ("search", "deploy*", "--json")),
            ("search common word, warm", ("search", "error", "--json")),
            ("search rare phrase, warm", ("search", '"naïve café"', "--json")),
            (
                "search --sort recent --kind tool_call, warm",
                ("search", "install", "--sort", "recent", "--kind", "tool_call", "--json"),
            ),
            ("search --no-refresh (query only)", ("search", "error", "--no-refresh", "--json")),
        ]
        # stats reads read models fed from the ledger: index the traces into it first.
        steps += [("ledger sync (indexes every record)", ("ledger", "sync", "--json"))]
        stats = ("stats", "tokens", "--by", "model", "--json")
        if _has_command(root, "stats", "tokens"):
            steps += [("stats tokens, cold", stats), ("stats tokens, warm", stats)]
        else:
            rows.append(("stats", 0.0, 0.0, "skipped: `pentrace stats` is not in this build"))
        steps += [
            ("audit all sessions (no ledger)", ("audit", "--no-ledger", "--json")),
            ("audit all sessions with ledger drift", ("audit", "--json")),
        ]
        for label, args in steps:
            seconds, code, cpu = _timed(root, *args)
            rows.append((label, seconds, cpu, f"exit {code}"))
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return rows


def corpus_parser(doc: str, *, sessions: int, records: int) -> argparse.ArgumentParser:
    """The options of a benchmark over a generated corpus: its size, and where to keep it."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=sessions)
    parser.add_argument("--records", type=int, default=records)
    parser.add_argument("--keep", type=Path, default=None, help="work in this folder, keep it")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="reuse the corpus already in --keep (what is derived from it is redone)",
    )
    return parser


def parse_corpus_args(
    parser: argparse.ArgumentParser, argv: list[str] | None
) -> argparse.Namespace:
    """Parse ``argv``; ``--reuse`` without ``--keep`` is a usage error."""
    args = parser.parse_args(argv)
    if args.reuse and args.keep is None:
        parser.error("--reuse needs --keep")
    return args


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run, print a Markdown table."""
    parser = corpus_parser(__doc__, sessions=10_000, records=5_000_000)
    args = parse_corpus_args(parser, argv)
    rows = run(args.sessions, args.records, args.keep, args.reuse)
    base = next(cpu for label, _, cpu, _ in rows if label.startswith("startup"))
    print("| step | wall s | CPU s | CPU x startup | CPU s minus startup | note |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for label, seconds, cpu, note in rows:
        if not cpu:
            print(f"| {label} | {seconds:.2f} | | | | {note} |")
            continue
        ratio, extra = cpu / base, cpu - base
        print(f"| {label} | {seconds:.2f} | {cpu:.2f} | {ratio:.1f} | {extra:.2f} | {note} |")


if __name__ == "__main__":
    main()
