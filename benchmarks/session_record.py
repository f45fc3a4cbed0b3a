"""Recording and rebuilding sessions: pentrace's trace store against stock eventsourcing.

Run ``python -m benchmarks.session_record`` (5,000 requests of 8 records,
then a 100,000-record rebuild) or ``python -m benchmarks.session_record
--requests 500 --rebuild 20000`` for a quick look.

Recording goes through the Session aggregate and ``Application.save`` with
fsync off (``Durability.NONE``), saving once per request (8 records) and once
per record.  The baseline is the same workload on eventsourcing's stock
SQLite application (``PERSISTENCE_MODULE=eventsourcing.sqlite``, a temporary
file) with a stock UUID aggregate whose events carry the same payloads.  Each
figure is the best of ``--repeat`` interleaved runs.  Only ratios within one
run matter.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from eventsourcing.application import Application, project_aggregate
from eventsourcing.domain import Aggregate, event

from pentrace.infrastructure.application import SaveMode, SessionApplication
from pentrace.infrastructure.durability import Durability

RECORDS_PER_REQUEST = 8
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


def pentrace_record(folder: Path, requests: int, mode: SaveMode) -> str:
    """Record ``requests`` requests through SessionApplication; return the session id."""
    with SessionApplication(
        folder, "bench", "agent", durability=Durability.NONE, clock=_now
    ) as app:
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


def _stock_app(folder: Path) -> Application[Any]:
    return Application(
        env={
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": str(folder / "stock.sqlite"),
        }
    )


def stock_record(folder: Path, requests: int, per_event: bool) -> Any:
    """The same workload on the stock SQLite application; return the aggregate id."""
    app = _stock_app(folder)
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
    app.close()
    return session.id


def _best(run: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def _fresh(base: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=base))


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print a table of figures and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rebuild", type=int, default=100_000, help="records to rebuild")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    events = args.requests * RECORDS_PER_REQUEST
    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for label, ours, stock in (
            (
                "record, save per request",
                lambda: pentrace_record(_fresh(base), args.requests, SaveMode.REQUEST),
                lambda: stock_record(_fresh(base), args.requests, per_event=False),
            ),
            (
                "record, save per event",
                lambda: pentrace_record(_fresh(base), args.requests, SaveMode.EVENT),
                lambda: stock_record(_fresh(base), args.requests, per_event=True),
            ),
        ):
            ours_s, stock_s = _best(ours, args.repeat), _best(stock, args.repeat)
            rows.append((label + " (events/s)", events / ours_s, events / stock_s))

        requests = args.rebuild // RECORDS_PER_REQUEST
        ours_dir, stock_dir = _fresh(base), _fresh(base)
        session_id = pentrace_record(ours_dir, requests, SaveMode.REQUEST)
        stock_id = stock_record(stock_dir, requests, per_event=False)
        with SessionApplication(ours_dir, "bench", "agent") as app:
            plain = _best(lambda: app.repository.get(session_id), args.repeat)
            default = _best(
                lambda: app.repository.get(session_id, projector_func=cast(Any, project_aggregate)),
                args.repeat,
            )
        stock_app = _stock_app(stock_dir)
        stock_rebuild = _best(lambda: stock_app.repository.get(stock_id), args.repeat)
        stock_app.close()
    rows.append((f"rebuild {requests * RECORDS_PER_REQUEST} records (s)", plain, stock_rebuild))
    rows.append(("rebuild, library's default projector (s)", default, stock_rebuild))

    print(f"{'operation':48} {'pentrace':>12} {'stock sqlite':>13} {'ratio':>7}")
    for label, ours_v, stock_v in rows:
        ratio = ours_v / stock_v if "events/s" in label else stock_v / ours_v
        print(f"{label:48} {ours_v:12,.2f} {stock_v:13,.2f} {ratio:6.1f}x")
    print("ratio: how many times better pentrace is (throughput up, time down)")


if __name__ == "__main__":
    main()
