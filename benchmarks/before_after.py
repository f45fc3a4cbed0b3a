"""Run the benchmarks on an earlier checkout and on this one, in one session, side by side.

``python -m benchmarks.before_after --baseline /path/to/old/checkout`` runs every
benchmark of :data:`SUITE` (small sizes; each prints its own table of ratios to a
floor measured in the same process) first in the baseline checkout, then in
this one, benchmark by benchmark, so both see the same machine load. Each
checkout runs with its own ``.venv`` (bootstrap it with ``./dev lint`` there).
The output is Markdown: one section per benchmark with both tables.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

# Benchmark module and the arguments that keep one run around a minute or less.
SUITE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("omnimessage_codec", ("--records", "50000", "--repeat", "3")),
    ("trace_read", ("--records", "100000", "--repeat", "3")),
    ("trace_append", ("--repeat", "3")),
    ("session_record", ("--requests", "2000", "--rebuild", "50000", "--repeat", "3")),
    ("live_path", ("--requests", "1000", "--rounds", "3", "--latency-requests", "200")),
    ("resume", ("--old-records", "200000", "--new-records", "20000", "--repeat", "3")),
    ("resume_fold", ("--records", "200000", "--repeat", "3")),
    ("redaction", ("--repeat", "3")),
    ("ledger", ("--events", "50000", "--original-events", "5000", "--replay-rows", "200000")),
    ("analytics", ("--sessions", "200", "--events", "200")),
    ("sse", ("--events", "5000", "--replay", "20000", "--samples", "20")),
)

HERE = Path(__file__).resolve().parent.parent


def run(tree: Path, module: str, args: tuple[str, ...]) -> str:
    """One benchmark in one checkout; its stdout, or the tail of its error output."""
    python = tree / ".venv" / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", f"benchmarks.{module}", *args],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.splitlines()[-5:])
        return f"(failed with exit code {done.returncode})\n\n```\n{tail}\n```\n"
    return done.stdout


def main(argv: list[str] | None = None) -> None:
    """Run the suite in both checkouts and print the Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--baseline", type=Path, required=True, help="the earlier checkout")
    parser.add_argument("--only", action="append", default=[], help="run just this benchmark")
    args = parser.parse_args(argv)
    baseline = args.baseline.resolve()
    if not (baseline / ".venv" / "bin" / "python").exists():
        sys.exit(f"{baseline}: no .venv there; run ./dev lint in that checkout first")
    for module, bench_args in SUITE:
        if args.only and module not in args.only:
            continue
        print(f"## {module} {' '.join(bench_args)}\n")
        for label, tree in (("before", baseline), ("after", HERE)):
            print(f"### {label} ({tree.name})\n")
            print(run(tree, module, bench_args))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
