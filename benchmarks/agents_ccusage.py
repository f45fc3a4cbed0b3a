"""Claude Code usage: pentrace against ccusage on the same ~200 MB store, in the same run.

    python -m benchmarks.agents_ccusage                     # 200 MB corpus
    python -m benchmarks.agents_ccusage --mb 50 --big-mb 0  # smaller, no big file
    python -m benchmarks.agents_ccusage --keep DIR          # keep (and reuse) the corpus

The corpus is made of the real Claude Code sessions of the reference folder
(``../shared/reference/foreign-sessions/claude_code``), copied again and again
with fresh ids (session, ``uuid``/``parentUuid``, ``message.id``,
``requestId``), each copy moved to its own day and spread over project
folders, until it holds ``--mb`` megabytes.  Issue #28's targets:

* first answer: ``pentrace import --from claude-code`` plus ``pentrace stats
  tokens --by day`` in at most 5x the wall time of ``ccusage claude daily
  --json --offline`` (ccusage 20.0.24, installed as the tests install it);
* a repeated ``stats tokens --by day`` with nothing new in at most 0.5x;
* memory bounded by what a line needs, not by the file: with ``--big-mb``,
  one session file of that size is imported alone and its peak RSS printed
  beside a file a tenth of its size.

Both tools run as processes here, one after the other; the ratios are what
to read (the machine may be shared).  The day totals of both are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

_PROJECT = Path(__file__).resolve().parents[1]
VERSION = "20.0.24"


def _reference() -> Path:
    """``shared/reference/foreign-sessions`` beside the project (or a worktree's project)."""
    for base in (_PROJECT.parent, *_PROJECT.parents[1:3]):
        found = base / "shared" / "reference" / "foreign-sessions"
        if found.is_dir():
            return found
    sys.exit("../shared/reference/foreign-sessions is absent (the real Claude Code sessions)")


def ccusage_binary() -> Path:
    """ccusage from the tests' cache (installed there with npm when missing)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = cache / "pentrace-tests" / "ccusage"
    binary = folder / "node_modules" / ".bin" / "ccusage"
    if not binary.exists():
        npm = shutil.which("npm") or "npm"
        subprocess.run([npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund",
                        f"ccusage@{VERSION}"], check=True, capture_output=True)  # fmt: skip
    return binary


def _sources() -> list[list[dict[str, Any]]]:
    folder = _reference() / "claude_code"
    files = sorted((folder / "ccviewer_sample-project").glob("*-*-*-*-*.jsonl"))
    files += sorted((folder / "agentsessions").glob("*.jsonl"))
    if not files:
        sys.exit(f"no reference sessions under {folder}")
    sessions = []
    for path in files:
        rows = []
        for line in path.read_bytes().splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                rows.append(value)
        sessions.append(rows)
    return sessions


def _fresh(rows: list[dict[str, Any]], shift: timedelta) -> tuple[str, bytes]:
    """One copy of a session: every id fresh, every time moved by ``shift``."""
    names: dict[str, str] = {}

    def new(old: Any) -> Any:
        if not isinstance(old, str) or not old:
            return old
        if old not in names:
            names[old] = str(uuid.uuid4())
        return names[old]

    sid = str(uuid.uuid4())
    out = []
    for row in rows:
        copy = dict(row)
        for key in ("uuid", "parentUuid", "leafUuid", "requestId"):
            if key in copy:
                copy[key] = new(copy[key])
        if "sessionId" in copy:
            copy["sessionId"] = sid
        message = copy.get("message")
        if isinstance(message, dict) and isinstance(message.get("id"), str):
            copy["message"] = {**message, "id": "msg_" + new(message["id"]).replace("-", "")}
        stamp = copy.get("timestamp")
        if isinstance(stamp, str):
            try:
                when = datetime.fromisoformat(stamp.replace("Z", "+00:00")) + shift
                millis = f"{when.microsecond // 1000:03d}Z"
                copy["timestamp"] = when.strftime("%Y-%m-%dT%H:%M:%S.") + millis
            except ValueError:
                pass
        out.append(json.dumps(copy, ensure_ascii=False, separators=(",", ":")))
    return sid, ("\n".join(out) + "\n").encode()


def build(store: Path, megabytes: int) -> int:
    """Fill ``store`` (a ``CLAUDE_CONFIG_DIR``) with ``megabytes`` of sessions; its size."""
    sources = _sources()
    target = megabytes * 1024 * 1024
    size = copy = 0
    while size < target:
        rows = sources[copy % len(sources)]
        sid, data = _fresh(rows, timedelta(days=copy % 60, hours=copy % 7))
        folder = store / "projects" / f"-home-u-project{copy % 25}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{sid}.jsonl").write_bytes(data)
        size += len(data)
        copy += 1
    return size


def big_file(path: Path, megabytes: int) -> int:
    """One session of about ``megabytes``: the largest reference session's turns, again and
    again (fresh ids, one chain)."""
    sources = _sources()
    rows = max(sources, key=len)
    path.parent.mkdir(parents=True, exist_ok=True)
    size = 0
    target = megabytes * 1024 * 1024
    with path.open("wb") as out:
        copy = 0
        while size < target:
            _, data = _fresh(rows, timedelta(minutes=copy))
            out.write(data)
            size += len(data)
            copy += 1
    return size


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, str, float]:
    """Wall seconds, stdout and CPU seconds (user + system) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{argv[:3]} failed: {done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, done.stdout, cpu


def _rss(argv: list[str], env: dict[str, str]) -> int:
    """Peak RSS (KiB) of one process, measured by itself (``/usr/bin/time`` style)."""
    probe = (
        "import resource,subprocess,sys;"
        "subprocess.run(sys.argv[1:],check=True,stdout=subprocess.DEVNULL);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True,
                          text=True, env=env, check=True)  # fmt: skip
    return int(done.stdout.strip())


def _pentrace(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pentrace", "--data-root", str(root), *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--big-mb", type=int, default=2048)
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=3, help="repeated stats runs")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="agents-ccusage-"))
    base.mkdir(parents=True, exist_ok=True)
    store, root, home = base / "claude", base / "data", base / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "CLAUDE_CONFIG_DIR": str(store)}
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    env.update({k: v for k, v in os.environ.items() if k.startswith(("PENTRACE_", "PENGUIN_"))})
    try:
        if not (store / "projects").is_dir():
            t0 = time.perf_counter()
            size = build(store, args.mb)
            print(f"corpus: {size / 1e6:.1f} MB in {time.perf_counter() - t0:.1f} s")
        files = list(store.rglob("*.jsonl"))
        total = sum(path.stat().st_size for path in files)
        print(f"corpus: {len(files)} files, {total / 1e6:.1f} MB; load {os.getloadavg()}")
        binary = str(ccusage_binary())
        ccusage = [binary, "claude", "daily", "--json", "--offline", "-z", "UTC"]
        theirs_wall, out, theirs_cpu = _timed(ccusage, env)
        theirs = {row["date"]: row for row in json.loads(out)["daily"]}
        shutil.rmtree(root, ignore_errors=True)
        import_wall, _, import_cpu = _timed(_pentrace(root, "import", "--from", "claude-code",
                                                      str(store)), env)  # fmt: skip
        stats = _pentrace(root, "stats", "tokens", "--by", "day", "--json")
        stats_wall, out, stats_cpu = _timed(stats, env)
        ours = {row["key"]: row for row in json.loads(out)["rows"]}
        again = [_timed(stats, env) for _ in range(args.rounds)]
        theirs_again, _, theirs_again_cpu = _timed(ccusage, env)
        wall = min(theirs_wall, theirs_again)
        cpu = min(theirs_cpu, theirs_again_cpu)
        print(f"ccusage claude daily: wall {theirs_wall:.2f} s, again {theirs_again:.2f} s; "
              f"CPU {theirs_cpu:.2f} s, again {theirs_again_cpu:.2f} s")  # fmt: skip
        first, first_cpu = import_wall + stats_wall, import_cpu + stats_cpu
        print(f"pentrace import wall {import_wall:.2f} s (CPU {import_cpu:.2f}) + stats "
              f"{stats_wall:.2f} s (CPU {stats_cpu:.2f}) -> {first / wall:.2f}x ccusage wall, "
              f"{first_cpu / cpu:.2f}x CPU (target <= 5x)")  # fmt: skip
        best = min(again)
        print(f"pentrace stats again: wall {', '.join(f'{w:.2f}' for w, _, _ in again)} s, CPU "
              f"{', '.join(f'{c:.2f}' for _, _, c in again)} s -> {best[0] / wall:.2f}x ccusage "
              f"wall, {min(c for _, _, c in again) / cpu:.2f}x CPU (target <= 0.5x)")  # fmt: skip
        kinds = ("input", "output", "cache_read", "cache_write")
        theirs_kinds = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheCreationTokens")
        used = {day: tuple(row[k] for k in kinds) for day, row in ours.items()}
        used = {day: value for day, value in used.items() if any(value)}
        same = used == {day: tuple(row[k] for k in theirs_kinds) for day, row in theirs.items()}
        print(f"days with usage: ccusage {len(theirs)}, pentrace {len(used)}; "
              f"all four kinds equal on every day: {same}")  # fmt: skip
        if args.big_mb:
            _big(base, env, args.big_mb)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


def _big(base: Path, env: dict[str, str], megabytes: int) -> None:
    """Peak RSS of importing one file of ``megabytes``, beside one a tenth of its size."""
    for size in (max(megabytes // 10, 1), megabytes):
        folder = base / f"big{size}"
        path = folder / "projects" / "-big" / f"{uuid.uuid4()}.jsonl"
        written = big_file(path, size)
        root = base / f"big{size}-data"
        start = time.perf_counter()
        peak = _rss(_pentrace(root, "import", "--from", "claude-code", str(folder)), env)
        wall = time.perf_counter() - start
        print(
            f"one file of {written / 1e6:.0f} MB: import {wall:.1f} s, "
            f"peak RSS {peak / 1024:.0f} MiB"
        )
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
