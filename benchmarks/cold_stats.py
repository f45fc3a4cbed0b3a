"""Cold ``pentrace stats tokens`` against DuckDB over the raw JSONL, in the same run (issue #16).

    python -m benchmarks.cold_stats                        # 1,000 sessions, 500,000 records
    python -m benchmarks.cold_stats --sessions 200 --records 100000 --rounds 5
    python -m benchmarks.cold_stats --keep DIR --reuse     # the corpus in DIR again

The corpus is :mod:`benchmarks.cli_corpus`'s (the one ``benchmarks.ledger_sync``
indexes).  Each round runs, as real subprocesses:

* the baseline: DuckDB (a benchmark dependency, ``pip install -e .[bench]``)
  answering "tokens per day" straight from the trace files: requests begun,
  ``token_usage`` records and their counts per UTC day, as
  :mod:`pentrace.projections.session_summary` defines them;
* ``pentrace stats tokens --by day --json`` on a fresh copy of the data root
  (traces only: no ledger, no analytics database), which builds the read
  model from the traces (ADR 0050).

With ``--ledger-path``, one more round times the way there was before: ``ledger
sync`` into a fresh copy, then ``stats tokens`` over the ledger.

With ``--before PYTHON`` (an interpreter whose ``pentrace`` is another tree,
for example main's ``.venv/bin/python``) each round also runs that tree's
``stats tokens`` on a fresh copy, right after this tree's: before and after in
the same run.

Every module the command imports is compiled to bytecode first, into a
``PYTHONPYCACHEPREFIX`` folder of the benchmark's for each interpreter, as a
wheel install compiles ours when it installs (and the standard library and the
other packages come compiled): our packages with ``compileall``, then one
untimed run of the command on a fresh copy with bytecode writing on, which
stores the rest.  Under a prefix the interpreter looks for *all* bytecode
there, the standard library's and SQLAlchemy's too, so compiling only our
packages left those to be compiled again in every process (about 1.5 CPU s of
start-up).  An editable install under ``PYTHONDONTWRITEBYTECODE=1`` would
otherwise compile about 160 of our modules in every process (about 0.4 CPU s).
``--no-compile`` measures it that way.

The answers must be equal.  Wall and CPU seconds (user + system of the
child and of the worker processes it waits for) are reported per round, with
the ratio to DuckDB's; the load average is printed before and after, because
the machine is shared.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.cli_corpus import corpus_parser, parse_corpus_args, write_corpus

_COLUMNS = ("requests", "usage_records", "input", "output", "cache_read", "cache_write", "total")

# Per UTC day: requests begun, and the token_usage records with their request counts
# (input is what the total leaves after output and the caches, never below zero).
_QUERY = """
WITH records AS (
    SELECT strftime(CAST("timestamp" AS TIMESTAMP), '%Y-%m-%d') AS day,
           payload.type AS kind, payload.request AS r
    FROM read_json(?, format = 'newline_delimited', columns = {
        "timestamp": 'VARCHAR', "type": 'VARCHAR',
        "payload": 'STRUCT(type VARCHAR, request STRUCT(output BIGINT, cache_read BIGINT,
                   cache_write BIGINT, total BIGINT))'})
    WHERE "type" = 'event_msg' AND payload.type IN ('request_begin', 'token_usage')
)
SELECT day,
       count(*) FILTER (WHERE kind = 'request_begin') AS requests,
       count(*) FILTER (WHERE kind = 'token_usage') AS usage_records,
       coalesce(sum(greatest(r.total - r.output - r.cache_read - r.cache_write, 0))
                FILTER (WHERE kind = 'token_usage'), 0) AS input,
       coalesce(sum(r.output) FILTER (WHERE kind = 'token_usage'), 0) AS output,
       coalesce(sum(r.cache_read) FILTER (WHERE kind = 'token_usage'), 0) AS cache_read,
       coalesce(sum(r.cache_write) FILTER (WHERE kind = 'token_usage'), 0) AS cache_write,
       coalesce(sum(r.total) FILTER (WHERE kind = 'token_usage'), 0) AS total
FROM records GROUP BY day ORDER BY day
"""


def duckdb_rows(root: Path) -> list[dict[str, Any]]:
    """The baseline's answer, as ``stats tokens --by day --json`` rows."""
    import duckdb  # a benchmark dependency only (the bench extra): imported where it is used

    pattern = str(root / "*" / "agents" / "*" / "traces" / "*" / "*.jsonl")
    with duckdb.connect() as conn:
        rows = conn.execute(_QUERY, [pattern]).fetchall()
    return [{"key": day, **dict(zip(_COLUMNS, map(int, rest), strict=True))} for day, *rest in rows]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, Any]:
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.stderr.write(done.stderr.decode("utf-8", "replace")[-2000:])
        raise SystemExit(f"{argv[2:5]} exited {done.returncode}")
    return wall, _children_cpu() - cpu, json.loads(done.stdout)


def _clean_env() -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("PENGUIN_", "PENTRACE_"))}
    return kept


_PACKAGES = "pentrace pentrace.cli pentrace.domain pentrace.infrastructure pentrace.projections"
_PACKAGE_PATHS = (
    "import importlib\n"
    f"for name in {_PACKAGES.split()!r}:\n"
    "    print(*importlib.import_module(name).__path__, sep='\\n')"
)


def _compiled_env(
    python: str, env: dict[str, str], prefix: Path, warm_up: list[str]
) -> dict[str, str]:
    """``env`` with a bytecode cache for ``python``, filled now (see the docstring): our
    packages compiled, then the command ``warm_up`` run once, untimed, writing the bytecode
    of everything else it imports."""
    compiled = {**env, "PYTHONPYCACHEPREFIX": str(prefix)}
    paths = subprocess.run(
        [python, "-c", _PACKAGE_PATHS], capture_output=True, env=compiled, check=True, text=True
    ).stdout.split()
    subprocess.run([python, "-m", "compileall", "-q", *paths], env=compiled, check=True)
    writing = {k: v for k, v in compiled.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([python, *warm_up], env=writing, check=True, capture_output=True)
    return compiled


def _fresh_copy(folder: Path, traces: Path) -> Path:
    fresh = folder / "fresh"
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.copytree(traces, fresh)  # traces only: no derived store at all
    return fresh


def _ledger_path(
    folder: Path, traces: Path, env: dict[str, str], baseline: list[dict[str, Any]]
) -> list[tuple[str, float, float]]:
    """The old way, once: index every record into the ledger, then catch up and answer."""
    fresh = _fresh_copy(folder, traces)
    pentrace = [sys.executable, "-m", "pentrace", "--data-root", str(fresh)]
    wall, cpu, _ = _timed([*pentrace, "ledger", "sync", "--json"], env)
    rows = [("ledger path: ledger sync", wall, cpu)]
    wall, cpu, answer = _timed([*pentrace, "stats", "tokens", "--by", "day", "--json"], env)
    if answer["rows"] != baseline:
        raise SystemExit(f"the ledger path's answer differs:\n{answer['rows']}\n{baseline}")
    return [*rows, ("ledger path: then stats tokens", wall, cpu)]


def run(
    sessions: int,
    records: int,
    keep: Path | None,
    reuse: bool,
    rounds: int,
    ledger_path: bool = False,
    before: str | None = None,
    compile_first: bool = True,
) -> list[tuple[str, float, float]]:
    """Rows of ``(step, wall s, CPU s)``, each round's DuckDB then pentrace (then ``before``'s
    pentrace), then the old way."""
    folder = keep if keep is not None else Path(tempfile.mkdtemp(prefix="pentrace-cold-bench-"))
    traces = folder / "traces"
    rows: list[tuple[str, float, float]] = []
    try:
        if not reuse:
            shutil.rmtree(traces, ignore_errors=True)
            written, size = write_corpus(traces, sessions, records)
            print(f"corpus: {sessions} sessions, {written} records, {size / 1e6:.0f} MB")
        env = _clean_env()
        trees = [("pentrace stats tokens, cold", sys.executable, env)]
        if before is not None:
            trees.append(("before: pentrace stats tokens, cold", before, env))
        if compile_first:
            compiled = []
            for number, (label, python, tree_env) in enumerate(trees):
                warm_up = ["-m", "pentrace", "--data-root", str(_fresh_copy(folder, traces))]
                warm_up += ["stats", "tokens", "--by", "day", "--json"]
                prefix = folder / f"bytecode-{number}"
                compiled.append((label, python, _compiled_env(python, tree_env, prefix, warm_up)))
            trees = compiled
        for number in range(1, rounds + 1):
            wall, cpu, baseline = _timed(
                [sys.executable, "-m", "benchmarks.cold_stats", "--duckdb", str(traces)], env
            )
            rows.append((f"round {number}: DuckDB over the raw JSONL", wall, cpu))
            for label, python, tree_env in trees:
                fresh = _fresh_copy(folder, traces)
                command = ["--data-root", str(fresh), "stats", "tokens", "--by", "day", "--json"]
                wall, cpu, answer = _timed([python, "-m", "pentrace", *command], tree_env)
                if answer["rows"] != baseline:
                    raise SystemExit(f"the answers differ:\n{answer['rows']}\n{baseline}")
                rows.append((f"round {number}: {label}", wall, cpu))
        if ledger_path:
            rows += _ledger_path(folder, traces, env, baseline)
    finally:
        shutil.rmtree(folder / "fresh", ignore_errors=True)
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run, print a Markdown table and the median ratios."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--duckdb"]:  # the baseline's own process
        print(json.dumps(duckdb_rows(Path(args[1]))))
        return
    parser = corpus_parser(__doc__, sessions=1000, records=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ledger-path", action="store_true", help="also time sync + stats")
    parser.add_argument("--before", metavar="PYTHON", help="also time another tree's pentrace")
    parser.add_argument(
        "--no-compile", action="store_true", help="leave our modules uncompiled (editable)"
    )
    options = parse_corpus_args(parser, args)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = run(
        options.sessions,
        options.records,
        options.keep,
        options.reuse,
        options.rounds,
        options.ledger_path,
        options.before,
        not options.no_compile,
    )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| step | wall s | CPU s |")
    print("| --- | ---: | ---: |")
    for label, wall, cpu in rows:
        print(f"| {label} | {wall:.2f} | {cpu:.2f} |")
    rounds = [row for row in rows if row[0].startswith("round")]
    duck = [row for row in rounds if "DuckDB" in row[0]]
    for name, mine in (("this tree", "pentrace"), ("before", "before")):
        ours = [row for row in rounds if row[0].split(": ", 1)[1].startswith(mine)]
        if not ours:
            continue
        wall = statistics.median(o[1] / d[1] for o, d in zip(ours, duck, strict=True))
        cpu = statistics.median(o[2] / d[2] for o, d in zip(ours, duck, strict=True))
        print(f"{name}: median ratio to DuckDB: wall {wall:.1f}x, CPU {cpu:.1f}x (target: 5x)")


if __name__ == "__main__":
    main()
