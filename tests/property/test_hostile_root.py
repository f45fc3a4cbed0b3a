"""Every command over a whole data root whose traces carry hostile values at every nesting level.

The root holds copies of the PenguinHarness fixture sessions (together they hold
every record kind).  Every position in every record - each object member, each
array element, the JSON inside string fields such as ``arguments``, new members
at each level, and the whole line - is a *target*; a seeded shuffle spreads the
targets over the copies, a few per copy, so each target gets a hostile value in
every run: lone surrogates (high and low), NUL and control characters,
U+2028/2029, a BOM, a huge string, deep nesting, wrong types, giant integers,
NaN-like text, non-object lines and unknown payload types.  One pristine copy of
each fixture sits beside them.

Then every command runs over the root.  None may print a traceback or exit
above 2, the pristine sessions must come through every derived store whole, and
HOME, the working directory and TMPDIR stay empty.  The seed is printed (and
named in every failure); ``PENTRACE_FUZZ_SEED`` replays one, and
``PENTRACE_FUZZ_ROUNDS`` (default 1) runs more roots, each with fresh values.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import traceback
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
from typer.testing import CliRunner

from pentrace.cli.app import app
from pentrace.cli.docgen import iter_commands
from pentrace.domain.session.key import SessionKey
from tests.otel_support import Receiver
from tests.support import exit_code_of, watched_sandbox

FIXTURES: Final = Path(__file__).parents[1] / "fixtures" / "penguin_harness"
SEED: Final = int(os.environ.get("PENTRACE_FUZZ_SEED", "20261207"))
ROUNDS: Final = int(os.environ.get("PENTRACE_FUZZ_ROUNDS", "1"))
PLANTS_PER_COPY: Final = 12

HOSTILE_VALUES: Final[list[bytes]] = [
    b'"\\ud800"',
    b'"\\udc00"',
    b'"a\\udbffz\\udfff"',
    b'"{\\"k\\":\\"\\\\udc00\\"}"',  # JSON text holding a lone surrogate escape
    b'"\\ud83d"',
    b'"\\u0000"',
    b'"nul\\u0000inside"',
    b'"\\u0001\\u0008\\u001b[31m\\u001f\\u007f"',
    b'"\\u2028\\u2029"',
    b'"line\\u2028sep"',
    b'"\\ufeff"',
    b'"\\ufeffBOM first"',
    b'"\xef\xbb\xbfraw BOM"',
    b'"' + b"h" * 300_000 + b'"',
    b"[" * 2000 + b"]" * 2000,
    b'{"a":' * 400 + b"1" + b"}" * 400,
    b"null",
    b"true",
    b"false",
    b"0",
    b"-1",
    b"3.5",
    b"1e400",
    b"-1e400",
    b"1180591620717411303424",
    b"-" + b"9" * 400,
    b"[]",
    b"{}",
    b'["x",null,{}]',
    b'{"type":"hologram","role":"system","status":"completed"}',
    b'"NaN"',
    b'"Infinity"',
    b'"-Infinity"',
    b'"completed"',
    b'"user"',
    b'"tool_call"',
    b'""',
]
HOSTILE_LINES: Final[list[bytes]] = [
    b"null",
    b"42",
    b"true",
    b'"\\ud800"',
    b"[]",
    b'[{"type":"model_msg"}]',
    b"{}",
    b'{"type":"event_msg","payload":{"type":"no_such_event","status":"completed"}}',
    b'{"type":"model_msg","payload":{"type":"hologram","role":"user","text":"\\udc00"}}',
    b'{"type":"mystery","payload":{"type":"request_end","status":"completed"}}',
    b'{"type":"event_msg","payload":null}',
    b'{"type":"event_msg","payload":[1,2]}',
    b'{"type":null,"payload":{"type":"request_begin"}}',
    b'\xef\xbb\xbf{"type":"event_msg","payload":{"type":"request_begin"}}',
    b'{"type":"model_msg","payload":{"type":"text","role":"user","text":"a\xe2\x80\xa8b"}}',
    b"NaN",
    b"\x00",
    b"[" * 5000,
]
# A marker no fixture value contains, replaced by the hostile bytes after encoding.
_MARK: Final = "@@hostile-7c1e@@"
_MARK_JSON: Final = json.dumps(_MARK).encode()

# Commands that cannot run over a throwaway root in a test, and why.
NOT_RUN: Final = {
    "serve": "serves until stopped; the service's routes have their own hostile tests",
    "demo": "writes its own sample root, never reads this one",
    "projections run": "follows the ledger until stopped (projections rebuild runs instead)",
}


@dataclass(frozen=True)
class Target:
    """One place in one fixture line: ``path`` steps through objects (keys) and arrays
    (indexes); a ``("json",)`` step enters a string holding JSON; ``add`` adds a member."""

    fixture: str
    line: int
    path: tuple[Any, ...]
    add: bool = False


def _targets_in(value: Any, path: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], bool]]:
    yield path, False
    if isinstance(value, dict):
        yield path, True
        for key, item in value.items():
            yield from _targets_in(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _targets_in(item, (*path, index))
    elif isinstance(value, str) and value[:1] in "{[":
        try:
            inner = json.loads(value)
        except ValueError:
            return
        for inner_path, add in _targets_in(inner, (*path, ("json",))):
            if inner_path != (*path, ("json",)) or add:
                yield inner_path, add


def all_targets() -> list[Target]:
    targets = []
    for fixture in sorted(FIXTURES.glob("*.jsonl")):
        for number, line in enumerate(fixture.read_bytes().splitlines()):
            for path, add in _targets_in(json.loads(line), ()):
                targets.append(Target(fixture.name, number, path, add))
    return targets


def _plant(value: Any, path: tuple[Any, ...], add: bool) -> Any:
    """``value`` with the marker at ``path`` (or added there as a new member)."""
    if not path:
        if add:
            return {**value, "hostile": _MARK}
        return _MARK
    step, rest = path[0], path[1:]
    if step == ("json",):
        # The marker goes into the inner JSON text, which is encoded back into the string.
        return json.dumps(_plant(json.loads(value), rest, add))
    copied: Any = dict(value) if isinstance(value, dict) else list(value)
    copied[step] = _plant(copied[step], rest, add)
    return copied


def planted_line(line: bytes, target: Target, hostile: bytes) -> bytes:
    """The fixture line with ``hostile`` at ``target`` (escaped once more inside JSON text)."""
    encoded = json.dumps(_plant(json.loads(line), target.path, target.add)).encode()
    if _MARK_JSON in encoded:
        return encoded.replace(_MARK_JSON, hostile, 1)
    # The marker sits inside a JSON string: the hostile JSON goes in as that string's text.
    escaped = json.dumps(hostile.decode("utf-8", "surrogateescape"))[1:-1]
    return encoded.replace(json.dumps(_MARK)[1:-1].encode(), escaped.encode(), 1)


@dataclass
class Root:
    path: Path
    sessions: list[tuple[str, str, str]]  # (project, agent, session id)
    pristine: dict[str, int]  # session id -> its record count
    plants: dict[str, list[str]]  # session id -> what was planted where


def _session_id(fixture: Path) -> str:
    meta = json.loads(fixture.read_bytes().splitlines()[0])
    return str(meta["payload"]["session_id"])


def build_root(base: Path, rng: random.Random) -> Root:
    """Copies of every fixture under one data root, the targets spread over them."""
    targets = all_targets()
    rng.shuffle(targets)
    fixtures = {path.name: path.read_bytes().splitlines() for path in FIXTURES.glob("*.jsonl")}
    by_fixture: dict[str, list[Target]] = {name: [] for name in fixtures}
    for target in targets:
        by_fixture[target.fixture].append(target)
    root = Root(base, [], {}, {})
    copy = 0
    for name in sorted(fixtures):
        lines = fixtures[name]
        sid = _session_id(FIXTURES / name)
        pending = by_fixture[name]
        # One pristine copy, then copies until every target of the fixture got a value.
        batches: list[list[Target]] = [[]]
        while pending:
            batch: list[Target] = []
            rest: list[Target] = []
            used: set[int] = set()
            for target in pending:
                if target.line not in used and len(batch) < PLANTS_PER_COPY:
                    used.add(target.line)
                    batch.append(target)
                else:
                    rest.append(target)
            batches.append(batch)
            pending = rest
        for batch in batches:
            copy += 1
            project, agent = f"proj{copy % 3}", f"agent{copy}"
            new_lines = list(lines)
            notes = []
            for target in batch:
                hostile = rng.choice(HOSTILE_VALUES)
                new_lines[target.line] = planted_line(lines[target.line], target, hostile)
                notes.append(f"line {target.line + 1} {target.path}{'+' if target.add else ''}")
            if batch:
                for _ in range(2):
                    at = rng.randrange(1, len(new_lines) + 1)
                    bad = rng.choice(HOSTILE_LINES)
                    new_lines.insert(at, bad)
                    notes.append(f"line {at + 1}: {bad[:40]!r}")
            folder = base / project / "agents" / agent / "traces" / "2026-07-18"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{sid}_001.jsonl").write_bytes(b"\n".join(new_lines) + b"\n")
            root.sessions.append((project, agent, sid))
            key = f"{project}/{agent}/{sid}"
            if batch:
                root.plants[key] = notes
            else:
                root.pristine[key] = len(lines)
    return root


def sandbox(monkeypatch: pytest.MonkeyPatch) -> AbstractContextManager[tuple[Path, list[Path]]]:
    """A fresh folder for the root, with HOME, cwd and TMPDIR folders that must stay empty."""
    unset = [
        name
        for name in os.environ
        if name.startswith(("PENTRACE_", "PENGUIN_")) and name != "PENTRACE_FUZZ_SEED"
    ]
    return watched_sandbox(monkeypatch, "pentrace-hostile-", unset)


class Runner:
    """Runs commands in process over one root; collects every crash instead of stopping."""

    def __init__(self, root: Path, seed: int) -> None:
        self.root = root
        self.seed = seed
        self.runner = CliRunner()
        self.crashes: list[str] = []
        self.ran: set[str] = set()

    def __call__(self, name: str, *args: str) -> Any:
        self.ran.add(name)
        result = self.runner.invoke(app, ["--data-root", str(self.root), *name.split(), *args])
        code = exit_code_of(result)
        if code is None:
            error = result.exception
            assert error is not None  # exit_code_of is None only for an exception
            frames = traceback.extract_tb(error.__traceback__)[-3:]
            where = ", ".join(f"{Path(f.filename).name}:{f.lineno}" for f in frames)
            self.crashes.append(f"pentrace {name} {' '.join(args)[:200]}: {error!r}"[:300] + where)
            return result
        if not 0 <= code <= 2:
            self.crashes.append(f"pentrace {name} {' '.join(args)[:200]}: exit {code}")
        if "Traceback" in result.output:
            self.crashes.append(f"pentrace {name} {' '.join(args)[:200]}: printed a traceback")
        return result


def _ledger_counts(root: Path) -> dict[str, int]:
    database = root / "runtime_events" / "runtime_events.db"
    with sqlite3.connect(database) as connection:
        rows = connection.execute(
            "SELECT stream_id, COUNT(*) FROM runtime_events GROUP BY stream_id"
        ).fetchall()
    return {str(stream): int(count) for stream, count in rows}


def run_everything(run: Runner, root: Root) -> list[str]:
    """Every command over the root; returns what the pristine sessions lost."""
    lost: list[str] = []
    out = root.path.parent / "out"
    out.mkdir()
    run("ledger sync")
    counts = _ledger_counts(root.path)
    for key, records in root.pristine.items():
        stream = SessionKey(*key.split("/")).stream_id
        if counts.get(stream) != records:
            lost.append(f"ledger sync indexed {counts.get(stream)} of {records} rows of {key}")
    run("ledger sync", "--workers", "2", "--json")
    run("ledger rebuild", "--json")
    counts = _ledger_counts(root.path)
    for key, records in root.pristine.items():
        stream = SessionKey(*key.split("/")).stream_id
        if counts.get(stream) != records:
            lost.append(f"ledger rebuild left {key} with {counts.get(stream)} rows of {records}")
    run("ingest", "--once", "--json")
    for name in ("ledger status", "ledger events", "ledger tail"):
        run(name, "--json")
    run("stats tokens", "--sync")
    for by in ("model", "hour", "minute"):
        run("stats requests", "--by", by, "--json")
    run("stats cost", "--json")
    run("stats tools", "--json")
    run("stats sessions")
    run("stats tree")
    run("projections rebuild")
    run("projections status", "--failures", "--json")
    run("projections retry", "tokens")
    run("list", "--json")
    run("list")
    receiver = Receiver().start()  # a real OTLP/HTTP receiver on loopback
    try:
        run("otel export", "--endpoint", receiver.url, "--settle", "0", "--json")
        run("otel export", "--endpoint", receiver.url, "--settle", "0", "--content")
    finally:
        receiver.stop()
    exported = {span.attributes.get("gen_ai.conversation.id") for span in receiver.copies}
    lost += [f"otel export sent no span of {key}" for key in root.pristine if key not in exported]
    run("search", "hostile")
    run("search", '"\\ud800"', "--json")
    run("scan", "--json")
    run("scan", "--derived", "--json")
    run("audit", "--json")
    for number, (project, agent, sid) in enumerate(root.sessions):
        ref = f"{project}/{agent}/{sid}"
        run("audit", ref, "--json")
        run("resume-check", ref, "--json")
        run("resume-check", ref)
        run("show", ref, "--json")
        run("show", ref)
        run("replay", ref, "--json", "--include-uncommitted")
        run("replay", ref, "--no-pager")
        run("replay", ref, "--no-pager", "--redacted", "--include-uncommitted")
        run("export", ref, "--redacted", "-o", str(out / f"{number}.redacted.jsonl"))
        run("export", ref, "-o", str(out / f"{number}.jsonl"))
        archive = out / f"{number}.tar.gz"
        run("export", ref, "--archive", "-o", str(archive))
        run("report", ref, "-o", str(out / f"{number}.html"))
        run("fork", ref, "--json")
        run("import", str(out / f"{number}.jsonl"), "--project", "imported", "--agent", "raw")
        run("import", str(out / f"{number}.jsonl"), "-p", "imported", "-a", "raw", "--new-id")
        run("show", str(out / f"{number}.jsonl"))
        run("audit", str(out / f"{number}.jsonl"), "--json")
        if archive.exists():
            run("import", str(archive), "--project", "imported", "--agent", f"arch{number}")
        run("ledger import-penguin", str(out / f"{number}.jsonl"))
    run("ledger sync", "--json")
    run("ledger forget", f"{root.sessions[-1][0]}/{root.sessions[-1][1]}/{root.sessions[-1][2]}")
    run("ledger cleanup", "--json")
    project, agent, sid = root.sessions[0]
    run("delete", f"{project}/{agent}/{sid}", "--yes")
    run("prune", "--max-size", "1", "--dry-run", "--json")
    run("prune", "--older-than", "1d", "--json")
    run("version")
    return lost


def test_every_command_is_run_or_left_out_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    leaves = {
        " ".join(path[1:])
        for path, command in iter_commands()
        if not hasattr(command, "list_commands")
    }
    with sandbox(monkeypatch) as (base, _):
        root = Root(base / "data", [("p", "a", "s")], {}, {})
        (base / "data").mkdir()
        run = Runner(root.path, SEED)
        run_everything(run, root)
    assert leaves - set(NOT_RUN) == run.ran


def test_the_targets_reach_every_record_kind_at_every_level() -> None:
    targets = all_targets()
    kinds = set()
    for fixture in FIXTURES.glob("*.jsonl"):
        for line in fixture.read_bytes().splitlines():
            value = json.loads(line)
            kinds.add((value["type"], value["payload"].get("type")))
    assert len(kinds) >= 20
    assert max(len(t.path) for t in targets) >= 4
    assert any(("json",) in t.path for t in targets)
    # Planting never leaves the marker behind, and each target changes its line.
    rng = random.Random(SEED)
    for target in targets:
        line = (FIXTURES / target.fixture).read_bytes().splitlines()[target.line]
        planted = planted_line(line, target, rng.choice(HOSTILE_VALUES))
        assert _MARK.encode() not in planted
        assert planted != line


# Every command over the whole root, one after another: minutes on a loaded 2-core machine,
# so this test has a longer safety net than the suite's 300 s (it asserts no time).
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("round_number", range(ROUNDS))
def test_every_command_survives_a_root_of_hostile_traces(
    monkeypatch: pytest.MonkeyPatch, round_number: int
) -> None:
    seed = SEED + round_number
    print(f"hostile root fuzz: PENTRACE_FUZZ_SEED={seed}")
    with sandbox(monkeypatch) as (base, watched):
        root = build_root(base / "data", random.Random(seed))
        run = Runner(root.path, seed)
        lost = run_everything(run, root)
        stray = [sorted(os.listdir(folder)) for folder in watched]
    assert not run.crashes, f"seed {seed}: " + "\n".join(run.crashes)
    assert not lost, f"seed {seed}: " + "\n".join(lost)
    assert stray == [[], [], []], f"seed {seed}"
