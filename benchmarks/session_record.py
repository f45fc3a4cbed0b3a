"""Recording and rebuilding sessions: pentrace's trace store against stock eventsourcing.

Run ``python -m benchmarks.session_record`` (5,000 requests of 8 records,
then a 100,000-record rebuild) or ``python -m benchmarks.session_record
--requests 500 --rebuild 20000`` for a quick look.

Recording goes through the Session aggregate and ``Application.save`` with
fsync off (``Durability.NONE``), saving once per request (8 records) and once
per record.  The baseline is the same workload on eventsourcing's stock
SQLite application (``PERSISTENCE_MODULE=eventsourcing.sqlite``, a temporary
file) with a stock UUID aggregate whose events carry the same payloads.  Each
recording figure is the best of ``--repeat`` rounds that run pentrace, the floor
and both stock applications in turn.  Only ratios within one run matter.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, cast

import msgspec
from eventsourcing.application import Application, project_aggregate
from eventsourcing.domain import Aggregate, event

from pentrace.infrastructure.eventstore.application import SaveMode, SessionApplication
from pentrace.infrastructure.trace.durability import Durability

RECORDS_PER_REQUEST = 8
_encode = msgspec.json.Encoder().encode
_TEXT = "I will create the file and check that it is there. " * 4
_OUTPUT = "total 12\n-rw-r--r-- 1 u u 2 Jul 18 hello.txt\n" * 20


def _now() -> datetime:
    return datetime.now(UTC)


def _workload() -> list[tuple[str, dict[str, Any]]]:
    """One request's records, as (kind, payload) for the stock aggregate."""
    return [
        ("model_msg", {"type": "text", "role": "user", "text": "Create hello.txt"}),
        ("event_msg", {"type": "request_begin"}),
        ("model_msg", {"type": "thinking", "role": "assistant", "thinking": _TEXT}),
        (
            "model_msg",
            {
                "type": "tool_call",
                "name": "exec",
                "arguments": '{"cmd":"ls -l"}',
                "tool_call_id": "c",
            },
        ),
        ("event_msg", {"type": "approval_decision", "decision": "allow", "tool_call_id": "c"}),
        ("model_msg", {"type": "tool_call_output", "output": _OUTPUT, "tool_call_id": "c"}),
        ("model_msg", {"type": "text", "role": "assistant", "text": _TEXT}),
        ("event_msg", {"type": "request_end", "status": "completed"}),
    ]


def pentrace_record(
    folder: Path,
    requests: int,
    mode: SaveMode,
    *,
    application: type[SessionApplication] = SessionApplication,
    durability: Durability = Durability.NONE,
) -> str:
    """Record ``requests`` requests through SessionApplication; return the session id.

    ``application``, ``mode`` and ``durability`` may come from another source
    tree of pentrace (see ``benchmarks.session_record_ab``).
    """
    with application(folder, "bench", "agent", durability=durability, clock=_now) as app:
        handle = app.start_session(
            provider="p",
            model_id="m",
            model_context_window=1_000_000,
            system_prompt="bench",
            workspace=folder,
            mode=mode,
        )
        for n in range(requests):
            call_id = f"call_{n}"
            handle.record_user_input("Create hello.txt")
            handle.begin_request()
            handle.record_thinking(_TEXT)
            handle.record_tool_call("exec", '{"cmd":"ls -l"}', call_id)
            handle.decide_approval(call_id, "allow")
            handle.record_tool_output(call_id, _OUTPUT)
            handle.record_text(_TEXT)
            handle.end_request("completed")
        handle.close()
        return handle.session_id


class StockSession(Aggregate):
    """The stock baseline: a UUID aggregate with one generic event per record."""

    def __init__(self) -> None:
        self.records = 0

    @event("Recorded")
    def record(self, kind: str, payload: dict[str, Any]) -> None:
        """One trace-like record."""
        self.records += 1


def _stock_app(dbname: str) -> Application[Any]:
    return Application(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": dbname})


def stock_record(app: Application[Any], requests: int, per_event: bool) -> Any:
    """The same workload on a stock SQLite application; return the aggregate id."""
    session = StockSession()
    app.save(session)
    workload = _workload()
    for _ in range(requests):
        for kind, payload in workload:
            session.record(kind, payload)
            if per_event:
                app.save(session)
        if not per_event:
            app.save(session)
    return session.id


def _stock_run(base: Path | None, requests: int, per_event: bool) -> Callable[[], None]:
    """A run on a fresh stock app: a new SQLite file under ``base``, or ``:memory:``."""

    def run() -> None:
        dbname = str(_fresh(base) / "stock.sqlite") if base is not None else ":memory:"
        app = _stock_app(dbname)
        stock_record(app, requests, per_event)
        app.close()

    return run


def floor_record(folder: Path, requests: int, per_event: bool) -> None:
    """The floor: msgspec-encode the same envelopes and ``os.write`` them, nothing else."""
    workload = [
        {"timestamp": "2026-07-18T03:10:22.531Z", "type": kind, "payload": payload}
        for kind, payload in _workload()
    ]
    fd = os.open(folder / "floor.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        for _ in range(requests):
            lines = [_encode(value) for value in workload]
            if per_event:
                for line in lines:
                    os.write(fd, line + b"\n")
            else:
                os.write(fd, b"\n".join(lines) + b"\n")
    finally:
        os.close(fd)


def _floor_run(base: Path, requests: int, per_event: bool) -> None:
    floor_record(_fresh(base), requests, per_event)


def _pentrace_run(base: Path, requests: int, mode: SaveMode) -> None:
    pentrace_record(_fresh(base), requests, mode)


def _stock_rebuild(dbname: str, requests: int, repeat: int) -> float:
    """Best rebuild time of a stock aggregate of ``requests`` requests (default projector)."""
    app = _stock_app(dbname)
    try:
        stock_id = stock_record(app, requests, per_event=False)
        return _best(lambda: app.repository.get(stock_id), repeat)
    finally:
        app.close()


_timer = time.perf_counter


def _best(run: Callable[[], Any], repeat: int) -> float:
    return _best_interleaved({"run": run}, repeat)["run"]


def _best_interleaved(contenders: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Best time of each contender over ``repeat`` rounds that run them all in turn.

    Interleaving exposes every contender to the same spells of load on a
    shared machine, so ratios between them stay fair.
    """
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(repeat):
        for name, run in contenders.items():
            gc.collect()
            started = _timer()
            run()
            best[name] = min(best[name], _timer() - started)
    return best


def _fresh(base: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=base))


def _throughput(records: int, seconds: float) -> float:
    return records / seconds


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print a table of figures and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rebuild", type=int, default=100_000, help="records to rebuild")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time (default), or this process's CPU time on a busy machine "
        "(CPU time leaves out the stock file's fsync waits)",
    )
    args = parser.parse_args(argv)
    global _timer
    _timer = time.process_time if args.clock == "cpu" else time.perf_counter
    n = args.requests
    # Stock saves on a file fsync every commit: a smaller workload keeps the run short.
    n_file_event = min(n, 250)
    rows: list[tuple[str, float, float, float]] = []
    floors: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for label, mode, per_event, n_file in (
            ("record, save per request (events/s)", SaveMode.REQUEST, False, n),
            ("record, save per event (events/s)", SaveMode.EVENT, True, n_file_event),
        ):
            times = _best_interleaved(
                {
                    "ours": partial(_pentrace_run, base, n, mode),
                    "floor": partial(_floor_run, base, n, per_event),
                    "on_file": _stock_run(base, n_file, per_event),
                    "in_memory": _stock_run(None, n, per_event),
                },
                args.repeat,
            )
            ours, floor, on_file, in_memory = (
                times[name] for name in ("ours", "floor", "on_file", "in_memory")
            )
            records = n * RECORDS_PER_REQUEST
            floors.append((label, _throughput(records, ours), _throughput(records, floor)))
            rows.append(
                (
                    label,
                    _throughput(records, ours),
                    _throughput(n_file * RECORDS_PER_REQUEST, on_file),
                    _throughput(records, in_memory),
                )
            )

        requests = args.rebuild // RECORDS_PER_REQUEST
        ours_dir = _fresh(base)
        session_id = pentrace_record(ours_dir, requests, SaveMode.REQUEST)
        with SessionApplication(ours_dir, "bench", "agent") as app:
            plain = _best(lambda: app.repository.get(session_id), args.repeat)
            default_projector = cast(Any, project_aggregate)
            default = _best(
                lambda: app.repository.get(session_id, projector_func=default_projector),
                args.repeat,
            )
        on_file = _stock_rebuild(str(_fresh(base) / "stock.sqlite"), requests, args.repeat)
        in_memory = _stock_rebuild(":memory:", requests, args.repeat)
    total = requests * RECORDS_PER_REQUEST
    rows.append((f"rebuild {total} records (s)", plain, on_file, in_memory))
    rows.append(("rebuild, library's default projector (s)", default, on_file, in_memory))

    header = f"{'operation':42} {'pentrace':>10} {'stock file':>11} {'stock mem':>10}"
    print(header + f" {'vs file':>8} {'vs mem':>7}")
    for label, ours_v, file_v, mem_v in rows:
        if "events/s" in label:
            ratios = (ours_v / file_v, ours_v / mem_v)
        else:
            ratios = (file_v / ours_v, mem_v / ours_v)
        print(
            f"{label:42} {ours_v:10,.2f} {file_v:11,.2f} {mem_v:10,.2f}"
            f" {ratios[0]:7.1f}x {ratios[1]:6.1f}x"
        )
    print()
    print(f"{'same run, against the floor':42} {'pentrace':>10} {'floor':>11} {'share':>10}")
    for label, ours_v, floor_v in floors:
        print(f"{label:42} {ours_v:10,.2f} {floor_v:11,.2f} {ours_v / floor_v:9.0%}")
    print("floor: msgspec encode of the same envelopes plus one os.write per save, nothing else.")
    print(
        f"clock: {args.clock}.  stock file: PERSISTENCE_MODULE=eventsourcing.sqlite on a "
        "temporary file (it fsyncs "
        f"each commit; save-per-event used {n_file_event} requests); stock mem: SQLITE_DBNAME="
        ":memory:.  Ratios: how many times better pentrace is (throughput up, time down)."
    )


if __name__ == "__main__":
    main()
