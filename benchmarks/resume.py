"""Resume at scale: linear growth, the floor it is measured against, and the newest-shard rule.

Run ``python -m benchmarks.resume`` (100k, 200k and 1M records; a few minutes)
or ``python -m benchmarks.resume --sizes 20000,40000 --old-records 40000`` for a
quick look.  Everything is measured in ONE run on files written from the same
deterministic corpus (``benchmarks/_corpus.py``), as best-of-``--repeat`` CPU
time (``time.process_time``, interleaved), because the machine is shared.
Only the ratios matter.

* ``raw msgspec decode of the file``: read the file, split it on ``\\n`` and
  decode every line to a Struct with the payload left as ``msgspec.Raw`` - the
  floor issue 3 sets the target against (resume within 2x of it);
* ``resume_trace_file``: our resume, reader plus fold, through the real entry
  point; its time per record must stay flat from 100k to 1M (the original's
  grows quadratically: Node 2.6 s, 8.8 s and 329 s at 100k, 200k and 1M);
* ``stock eventsourcing``: the library's own SQLite application rebuilding an
  aggregate from the same number of events (one event type carrying the
  line); above ``--stock-cap`` it is extrapolated from the largest measured
  size, and labelled so;
* the compaction case: a session whose older shard is large and whose newest
  shard (after a completed compaction) is small.  Resume reads the newest
  shard only, so its time matches a session made of that shard alone.  The
  application's ``resume_session`` is timed too: it also rebuilds the Session
  aggregate through ``Repository.get``, which starts from the newest shard's
  checkpoint (ADR 0007) when it is valid; the last row removes it first and
  so reads every shard (and writes the checkpoint again, timed too).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import msgspec
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from benchmarks._corpus import generate_records
from benchmarks._floor import best_cpu, per_line, raw_decoder
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.reader import resume_trace_file

NODE_SECONDS = {100_000: 2.6, 200_000: 8.8, 1_000_000: 329.0}
PROJECT, AGENT = "bench", "agent"


class StockSession(Aggregate):
    """A stock eventsourcing aggregate with one event type carrying a trace line."""

    def __init__(self) -> None:
        self.records = 0

    @event("Appended")
    def append(self, line: str) -> None:
        """Record one trace line."""
        self.records += 1


def _resume(path: Path) -> Callable[[], int]:
    def run() -> int:
        return len(resume_trace_file(path).history)

    return run


def _stock(lines: list[bytes], folder: Path) -> Callable[[], int]:
    """Save ``lines`` as events of one stock aggregate in SQLite; the timed part is the rebuild."""
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(folder / "es.db")}
    app: Application[Any] = Application(env=env)
    aggregate = StockSession()
    for line in lines[1:]:
        aggregate.append(line.decode("utf-8"))
    app.save(aggregate)
    aggregate_id = aggregate.id
    del aggregate

    def run() -> int:
        rebuilt: StockSession = app.repository.get(aggregate_id)
        return rebuilt.records

    return run


def _write(path: Path, lines: list[bytes]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"\n".join(lines) + b"\n"
    path.write_bytes(data)
    return len(data)


def _growth(lines: list[bytes], sizes: list[int], args: argparse.Namespace, tmp: Path) -> None:
    print("\n## Resume vs the raw decode floor, and growth\n")
    print(
        "| records | MB | raw msgspec decode of the file | resume_trace_file | resume / raw "
        "| resume µs/record | stock eventsourcing SQLite rebuild | stock / resume "
        "| original (Node, quoted) |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    stock_rate: float | None = None
    for size in sizes:
        path = tmp / f"size-{size}.jsonl"
        megabytes = _write(path, lines[:size]) / 1e6
        contenders = {"raw": per_line(path, raw_decoder.decode), "resume": _resume(path)}
        if size <= args.stock_cap:
            contenders["stock"] = _stock(lines[:size], _fresh(tmp / f"stock-{size}"))
        best = best_cpu(contenders, args.repeat)
        raw, ours = best["raw"], best["resume"]
        if "stock" in best:
            stock_rate = best["stock"] / size
            stock = f"{best['stock']:.2f} s"
        elif stock_rate is not None:
            best["stock"] = stock_rate * size
            stock = f"~{best['stock']:.1f} s (extrapolated)"
        else:
            stock = "not run"
        ratio = f"{best['stock'] / ours:.1f}x" if "stock" in best else "-"
        node = f"{NODE_SECONDS[size]:g} s" if size in NODE_SECONDS else "-"
        print(
            f"| {size:,} | {megabytes:.0f} | {raw:.2f} s | {ours:.2f} s | {ours / raw:.2f}x "
            f"| {ours / size * 1e6:.2f} | {stock} | {ratio} | {node} |"
        )
        path.unlink()


def _fresh(folder: Path) -> Path:
    folder.mkdir(parents=True)
    return folder


def _session_lines(lines: list[bytes], session_id: str, workspace: Path) -> list[bytes]:
    """The lines with their session_meta naming ``session_id`` and an existing workspace."""
    meta = msgspec.json.decode(lines[0])
    meta["payload"].update(session_id=session_id, workspace=str(workspace))
    return [msgspec.json.encode(meta), *lines[1:]]


def _compaction_end(lines: list[bytes]) -> list[bytes]:
    stamp = msgspec.json.decode(lines[-1])["timestamp"]
    begin = {"type": "compaction_begin", "reason": "auto", "mode": "truncate"}
    end = {"type": "compaction_end", "status": "completed", "mode": "truncate"}
    return [
        msgspec.json.encode({"timestamp": stamp, "type": "event_msg", "payload": payload})
        for payload in (begin, end)
    ]


def _compaction(lines: list[bytes], args: argparse.Namespace, tmp: Path) -> None:
    old_lines = lines[: args.old_records]
    new_lines = list(generate_records(args.new_records, seed=args.seed + 1))
    workspace = _fresh(tmp / "workspace")
    session_id = msgspec.json.decode(old_lines[0])["payload"]["session_id"]
    roots = {"two": DataRoot(tmp / "two-shards"), "one": DataRoot(tmp / "newest-only")}
    day = date(2026, 7, 18)
    old = _session_lines(old_lines, session_id, workspace)
    new = _session_lines(new_lines, session_id, workspace)
    for root in roots.values():
        root.ensure_agent_dirs(PROJECT, AGENT)
    old_mb = (
        _write(
            roots["two"].shard_path(PROJECT, AGENT, session_id, 1, day), old + _compaction_end(old)
        )
        / 1e6
    )
    _write(roots["two"].shard_path(PROJECT, AGENT, session_id, 2, day), new)
    _write(roots["one"].shard_path(PROJECT, AGENT, session_id, 1, day), new)
    newest = {}
    apps = {}
    for name, root in roots.items():
        latest = root.latest_shard(PROJECT, AGENT, session_id)
        assert latest is not None
        newest[name] = latest.path
        apps[name] = SessionApplication(root, PROJECT, AGENT)

    checkpoints = roots["two"].traces_dir(PROJECT, AGENT) / ".checkpoints"

    def app_resume(name: str, *, checkpoint: bool) -> Callable[[], int]:
        def run() -> int:
            if not checkpoint:
                # The full read, which writes the checkpoint again (that write is timed too).
                shutil.rmtree(checkpoints, ignore_errors=True)
            resumed = apps[name].resume_session(session_id)
            apps[name].release(session_id)
            return len(resumed.result.history)

        return run

    # The cheap rows get more runs: at tens of milliseconds the machine's noise shows.
    best = best_cpu({"two": _resume(newest["two"]), "one": _resume(newest["one"])}, 3 * args.repeat)
    app_resume("two", checkpoint=False)()  # the shards were written by hand: checkpoint them
    cheap = {"app two": app_resume("two", checkpoint=True)}
    cheap["app one"] = app_resume("one", checkpoint=True)
    best.update(best_cpu(cheap, 3 * args.repeat))
    full = {"full two": app_resume("two", checkpoint=False)}
    full["full one"] = app_resume("one", checkpoint=False)
    best.update(best_cpu(full, args.repeat))
    print(
        f"\n## Resume after a completed compaction: older shard {args.old_records:,} records "
        f"({old_mb:.0f} MB), newest shard {args.new_records:,} records\n"
    )
    print("| what | with the large older shard | newest shard alone | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for label, key in (
        ("resume_trace_file(latest shard)", ""),
        ("SessionApplication.resume_session, with the checkpoint", "app "),
        ("SessionApplication.resume_session, checkpoint removed", "full "),
    ):
        two, one = best[f"{key}two"], best[f"{key}one"]
        print(f"| {label} | {two:.3f} s | {one:.3f} s | {two / one:.2f}x |")


def main(argv: list[str] | None = None) -> None:
    """Generate the corpus once, run every measurement, print Markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--sizes", default="100000,200000,1000000", help="comma-separated record counts"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per contender")
    parser.add_argument(
        "--stock-cap", type=int, default=200_000, help="largest stock rebuild to run"
    )
    parser.add_argument("--old-records", type=int, default=1_000_000, help="older shard size")
    parser.add_argument("--new-records", type=int, default=50_000, help="newest shard size")
    parser.add_argument("--seed", type=int, default=7, help="corpus seed")
    args = parser.parse_args(argv)
    sizes = sorted(int(size) for size in args.sizes.split(","))
    # Shorter sessions are prefixes of the longest: the corpus is generated once.
    lines = list(generate_records(max(*sizes, args.old_records), seed=args.seed))
    print(f"best of {args.repeat} runs, CPU seconds (time.process_time)")
    with tempfile.TemporaryDirectory(prefix="pentrace-resume-") as folder:
        tmp = Path(folder)
        _growth(lines, sizes, args, tmp)
        _compaction(lines, args, tmp)


if __name__ == "__main__":
    main()
