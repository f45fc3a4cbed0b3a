"""``pentrace export``, ``import`` and ``fork``: sessions in and out of a data root."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from pentrace.cli.output import byte_progress, byte_size, count, emit_json
from pentrace.cli.sessions.args import (
    JsonOption,
    data_root,
    one_session,
)
from pentrace.errors import LedgerError, UsageError
from pentrace.infrastructure.operations.exports import (
    ShardChoice,
    TraceExport,
    archive_export,
    import_agent,
    import_archive,
    import_session,
    is_archive,
    trace_export,
    write_chunks,
)
from pentrace.infrastructure.operations.sessions import DataRoot, SessionRef, fork_session

__all__ = ["export", "export_note", "fork", "import_command", "register"]


def _note(text: str) -> None:
    # Reports go to stderr so that `export > file` keeps stdout for the data.
    typer.echo(text, err=True)


@one_session
def export(
    root: DataRoot,
    ref: SessionRef,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write here (atomically) instead of stdout."),
    ] = None,
    redacted: Annotated[
        bool,
        typer.Option("--redacted", help="Redact secrets; lines that do not parse are left out."),
    ] = False,
    archive: Annotated[
        bool,
        typer.Option(
            "--archive", help="A tar.gz of every shard plus subagent children, with a manifest."
        ),
    ] = False,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="<N|all>",
            help="Export shard N, or all of them in order (default: the latest).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Export a session as JSONL, or as a tar.gz archive.

    By default one JSONL file is the latest shard: the context since the last
    compaction, a trace PenguinHarness can resume.  The note on stderr names
    the part written and how to get the rest: --shard all writes every shard
    in order (pentrace import splits it back into its shards), --archive
    bundles them with the subagent children.

    Example: pentrace export 3f8a1c2d --redacted -o session.jsonl

    Example: pentrace export 3f8a1c2d --shard all -o whole-session.jsonl
    """
    chosen = _shard_choice(shard)
    if archive and (redacted or chosen is not None):
        raise UsageError(
            "--archive takes every shard verbatim; it does not combine with --redacted or --shard",
            hint="export shards one by one with --redacted, or drop --redacted for an archive",
        )
    if output is None and sys.stdout.isatty():
        raise UsageError(
            "refusing to write a trace to the terminal",
            hint="pass -o FILE, or redirect stdout to a file",
        )
    dest: Any = output if output is not None else sys.stdout.buffer
    where = str(output) if output is not None else "stdout"
    if archive:
        built = archive_export(root, ref)
        size = write_chunks(built.chunks, dest, f"the archive of {ref.session_id}")
        missing = f", {len(built.missing)} child session(s) missing" if built.missing else ""
        _note(
            f"archived {len(built.session_ids)} session(s), {byte_size(size)} to {where}{missing}"
        )
        return
    export = trace_export(ref, shard=chosen, redacted=redacted)
    size = write_chunks(export.chunks, dest, str(export.shards[0].path))
    sys.stdout.flush()
    _note(f"exported {export_note(export, len(ref.shards))}, {byte_size(size)} to {where}")
    if len(export.shards) < len(ref.shards):
        _note(
            f"hint: the rest of the session: --shard all (one JSONL, every shard in order) "
            f"or --archive (with its subagents), e.g. pentrace export {ref.session_id} "
            "--shard all -o FILE"
        )


def _shard_choice(text: str | None) -> ShardChoice:
    """``--shard``: a shard index, ``all``, or None (the latest)."""
    if text is None or text.strip().lower() == "all":
        return None if text is None else "all"
    if text.strip().isdigit() and int(text) >= 1:
        return int(text)
    raise UsageError(
        f"--shard {text!r}: expected a shard index (1, 2, ...) or all",
        hint="for example --shard 1 or --shard all",
    )


def export_note(export: TraceExport, total: int) -> str:
    """What an export wrote, for a person: which shards of how many, and how it was read."""
    kind = "redacted" if export.redacted else "verbatim"
    skipped = export.skipped_lines
    left_out = f", {skipped} unparsable line(s) left out" if skipped else ""
    sid = export.ref.session_id
    if len(export.shards) > 1:
        first, last = export.shards[0].index, export.shards[-1].index
        return f"shards {first:03d}-{last:03d} (all {total}) of {sid} ({kind}{left_out})"
    index = export.shards[0].index
    if total == 1:
        return f"shard {index:03d} (its only one) of {sid} ({kind}{left_out})"
    latest = export.shards[0] == export.ref.shards[-1]
    which = ", the latest: the context since the last compaction" if latest else ""
    return f"shard {index:03d} of {total}{which}, of {sid} ({kind}{left_out})"


def import_command(
    ctx: typer.Context,
    file: Annotated[
        list[Path] | None,
        typer.Argument(
            help="A trace file (.jsonl), or a tar.gz that `export --archive` wrote; with "
            "--from, files or folders of that agent's store (default: where it keeps them).",
            show_default=False,
        ),
    ] = None,
    project: Annotated[
        str | None,
        typer.Option(
            "--project", "-p", help="Import into this project (an archive: default its own)."
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", "-a", help="Import under this agent (an archive: default its own)."
        ),
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="Import another agent's sessions, read in place: claude-code, codex, "
            "opencode or gemini (again: only what is new).",
            show_default=False,
        ),
    ] = None,
    new_id: Annotated[
        bool,
        typer.Option(
            "--new-id",
            help="Import a copy under a fresh session id (for an id the agent already has); "
            "its session_meta records where it came from (imported_from).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Import a trace file or an archive as a new session, or another agent's sessions.

    The file is checked strictly first; nothing is written unless all of it
    checks out.  A .jsonl file becomes a new session: its first shard, and one
    more for each later session_meta (what `export --shard all` writes).  An
    id the agent already has is refused, unless --new-id imports a copy under
    a fresh id.  An archive from `pentrace export --archive` brings back the
    session with all its shards and its subagent children.  --from reads
    Claude Code, Codex, OpenCode or Gemini CLI sessions where the agent keeps
    them (never writing there) and imports what is new since the last import
    (docs/agents.md).

    Example: pentrace import session.jsonl --project default_project --agent default_agent

    Example: pentrace import session.jsonl -p default_project -a default_agent --new-id

    Example: pentrace import session.tar.gz

    Example: pentrace import --from claude-code
    """
    root = data_root(ctx, must_exist=False)
    files = file or []
    if source is not None:
        if new_id:
            raise UsageError(
                "--new-id takes a .jsonl trace; --from keeps each agent's own session ids",
                hint=f"pentrace import --from {source}",
            )
        _import_foreign(root, source, files, project, agent, as_json)
        return
    if len(files) != 1:
        found = "none" if not files else f"{len(files)}"
        raise UsageError(
            f"import takes one FILE (found {found}) unless --from names an agent",
            hint="pentrace import session.jsonl --project default_project --agent default_agent",
        )
    [path] = files
    if path.is_file() and is_archive(path):
        if new_id:
            raise UsageError(
                "--new-id takes a .jsonl trace; an archive keeps its sessions' ids",
                hint="import the archive under another --agent, or its shards one by one",
            )
        _import_archive(root, project, agent, path, as_json)
        return
    if project is None or agent is None:
        raise UsageError(
            f"importing {path} needs --project and --agent (only an archive names its own)",
            hint=f"pentrace import {path} --project default_project --agent default_agent",
        )
    size = path.stat().st_size if path.is_file() else 0
    with byte_progress(size, "importing") as advance:
        result = import_session(root, project, agent, path, on_progress=advance, new_id=new_id)
    indexed = _index_imported(root, project, agent)
    if as_json:
        emit_json(
            {
                "session_id": result.session_id,
                "ref": f"{project}/{agent}/{result.session_id}",
                "path": str(result.path),
                "records": result.records,
                "requests": result.requests,
                "tool_calls": result.tool_calls,
                "bytes": result.bytes,
                "torn_tail_dropped": result.torn_tail_dropped,
                "ledger_indexed": indexed,
                "paths": [str(path) for path in result.paths],
                "source_session_id": result.source_session_id,
            }
        )
        return
    torn = " (a torn last line was dropped)" if result.torn_tail_dropped else ""
    copied = (
        f" (a copy of {result.source_session_id})" if result.source_session_id is not None else ""
    )
    typer.echo(
        f"imported {result.session_id}{copied}: {count(result.records)} records, "
        f"{count(result.requests)} requests, {count(result.tool_calls)} tool calls, "
        f"{len(result.paths)} shard(s), {byte_size(result.bytes)}{torn}"
    )
    for path in result.paths:
        typer.echo(f"  {path}")


def _import_foreign(
    root: DataRoot,
    source: str,
    files: list[Path] | None,
    project: str | None,
    agent: str | None,
    as_json: bool,
) -> None:
    if agent is not None:
        raise UsageError(
            f"--agent cannot be used with --from: {source} sessions are filed under the "
            f"agent {source!r} (docs/agents.md)",
            hint=f"pentrace import --from {source}",
        )
    report = import_agent(root, source, files or None, project=project)
    indexed = _index_imported(root, None, report.agent, written=report.sessions)
    for warning in report.warnings:
        typer.echo(f"warning: {warning}", err=True)
    if as_json:
        emit_json({**report.document(), "ledger_indexed": indexed})
        return
    unmapped = sum(report.unmapped.values())
    typer.echo(
        f"imported from {report.agent}: {report.files} file(s) read, {report.items} item(s), "
        f"{report.records} record(s) written, {len(report.sessions)} session(s) "
        f"({len(report.new_sessions)} new), {unmapped} kept unmapped"
    )


def _import_archive(
    root: DataRoot, project: str | None, agent: str | None, file: Path, as_json: bool
) -> None:
    result = import_archive(root, project, agent, file)
    if as_json:
        emit_json(
            {
                "session_id": result.root_session_id,
                "session_ids": list(result.session_ids),
                "paths": [str(path) for path in result.paths],
                "bytes": result.bytes,
                "torn_tails_dropped": result.torn_tails_dropped,
            }
        )
        return
    children = len(result.session_ids) - 1
    torn = result.torn_tails_dropped
    typer.echo(
        f"imported {result.root_session_id} with {children} subagent session(s): "
        f"{len(result.paths)} shard(s), {result.bytes} bytes"
        + (f" ({torn} torn last line(s) dropped)" if torn else "")
    )
    for path in result.paths:
        typer.echo(f"  {path}")


def _index_imported(
    root: DataRoot, project: str | None, agent: str, *, written: set[str] | None = None
) -> int | None:
    """Index the agent's new trace records into the ledger, as recording does (best effort).

    ``written`` (``project/agent/session`` references) limits it to those sessions, in
    one sync over every core (an import of another agent's store, ADR 0106).  The trace
    is written; a ledger that cannot be written is a warning, and ``pentrace ledger
    sync`` closes the gap later.  Returns the events indexed.
    """
    # Imported here: the session commands load eagerly, SQLAlchemy should not (ADR 0008).
    from pentrace.infrastructure.operations.ledger import index_imported

    if written is not None and not written:
        return 0
    try:
        return index_imported(root, project=project, agent=agent, written=written)
    except LedgerError as exc:
        typer.echo(f"warning: the session is not in the ledger yet: {exc.message}", err=True)
        typer.echo("hint: run `pentrace ledger sync` when the ledger can be written", err=True)
        return None


@one_session
def fork(
    root: DataRoot,
    ref: SessionRef,
    at_turn: Annotated[
        int | None, typer.Option("--at-turn", help="Keep history up to this committed turn.")
    ] = None,
    at_event: Annotated[
        int | None, typer.Option("--at-event", help="Keep history up to this record position.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Fork a session: a new session from its committed history up to a turn or an event.

    Dropped rounds are left out and the cut never splits a request or a
    compaction.  The new session_meta names its origin in "forked_from"
    (session_id, turn, position); the source is not changed.

    Example: pentrace fork 3f8a1c2d --at-turn 2
    """
    result = fork_session(root, ref, at_turn=at_turn, at_event=at_event)
    if as_json:
        emit_json(
            {
                "session_id": result.session_id,
                "source_session_id": result.source_session_id,
                "project": ref.project,
                "agent": ref.agent,
                "paths": [str(path) for path in result.paths],
                "records": result.records,
                "turns": result.turns,
                "position": result.position,
            }
        )
        return
    typer.echo(
        f"forked {result.source_session_id} at position {result.position} "
        f"(turn {result.turns}) into {result.session_id}: {result.records} records"
    )
    for path in result.paths:
        typer.echo(f"  {path}")


def register(app: typer.Typer) -> None:
    """Add these commands to the ``pentrace`` app."""
    app.command()(export)
    app.command("import")(import_command)
    app.command()(fork)
