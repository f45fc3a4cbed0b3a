"""The conventions every ``pentrace`` command follows, as the "Conventions" section of docs/cli.md.

``tests/integration/test_cli_conventions.py`` walks every command and checks
them; the forms of times, ages and sizes come from :mod:`pentrace.values`, so
the text cannot drift from the parser.
"""

from __future__ import annotations

from typing import Final

from pentrace.values import AGE_FORMS, SIZE_FORMS, TIME_FORMS

__all__ = ["CONVENTIONS", "INDEXING_HELP", "SEE_INDEXING"]

# The one explanation of which command indexes traces into the ledger, when: the help of
# `pentrace ledger` (and so docs/cli.md); the other commands and docs point here.
INDEXING_HELP: Final = """\
Inspect and maintain the RuntimeEvent ledger (derived from the traces).

Which command indexes traces into the ledger, and when:

\b
  ledger sync      Once, now: everything the ledger is missing, checked
                   session by session (idempotent; --workers for a backlog).
                   After a crash, or when the ledger was down or locked.
  ingest           Only what is new since its cursors: one pass (cron), or
                   --follow as a service on each agent host (docs/ingest.md).
  serve --ingest   The same follower inside `pentrace serve`, on one machine.
  ledger rebuild   From scratch, with the same event ids: after a redaction
                   rule changed, or when the ledger is damaged.

pentrace's own recorder indexes what it writes as it writes it; these are for
traces other programs write (PenguinHarness in Node) and for gaps.

Example: pentrace ledger tail -n 20
"""
SEE_INDEXING: Final = "Which indexing command to use when: `pentrace ledger -h`."

CONVENTIONS: Final = f"""\
## Conventions

Every command and group follows these rules; a test walks all of them.

**Help and version.** `-h` and `--help` work on every command and group;
`pentrace --version` (or `-V`, or `pentrace version`) prints the version.
Help is plain text, the same as below.

**Exit codes.** `0` success; `1` a failure or findings (`audit` exits `1` for
warnings only and `2` when it finds errors; `scan` exits `1` when it finds a
secret; `prune` and `delete` exit `1` when something could not be deleted);
`2` a usage error: an unknown option, a bad value, a missing argument, a data
root that does not exist, a name that matches nothing (a session, a trace
file, a shard, a `--session` the ledger holds no events of) or one that
matches several, a `--since` after its `--until`. `130` after Ctrl-C.

**Errors.** One line `error: <what was wrong, and where>` on stderr, usually
followed by `hint: <what to do>`; no box, no traceback (`--debug` or
`PENTRACE_DEBUG=1` shows it). Usage errors name the command, for example
`error: pentrace list: no such option: --bogus`.

**Data root.** `--data-root`, else `$PENGUIN_HOME`, else `~/.penguin/data`. A
root that does not exist (or is not a folder) is a usage error naming where the
path came from, so a typo never reads as "no sessions". Only `import`, `demo`
and `ledger import-penguin` create a root.

**Session references.** A `SESSION` argument takes the full session id, a
unique prefix of it, or (a prefix of) its 8-hex token, the `short_id` that
`list --json` prints; `-p/--project` and `-a/--agent` narrow it when
the same id exists under two agents. `show`, `audit` and `resume-check` also
take the path of a trace file (a `.jsonl` name, or any file that exists), read
on its own. Tables never cut an id: on a narrow terminal, other columns are
left out first.

**Text.** Tables are drawn for a terminal: counts with thousands separators
and numbers right-aligned, sizes in binary units (`8.2 KiB`), ages and
durations with units (`14 d`, `19.2 s`), ratios as percentages (`18.9%`),
times in UTC as the traces write them (`2026-12-07T15:31:01.124Z`; `list`
shortens the start to the minute on a terminal), `yes`/`no` and `-` for
nothing; never a Python value. Piped, a table is tab-separated lines under a
header line, in the same columns, with counts and byte sizes as bare
integers for scripts. `replay` shows records redacted on a terminal and as
written when piped (`--redacted`/`--no-redacted` choose).

**JSON.** `--json` prints one JSON document: indented on a terminal, compact
(one line) when piped. `--jsonl` (where offered: `list`, `search`,
`replay`) prints one compact object per line; streams such as `ledger tail
--json` are always one object per line. `--fields a,b` (with `--json` or
`--jsonl`; `list`, `search`, `stats tokens|cost|tools|sessions`) keeps
only those fields of each row; an unknown field is an error listing the
available ones. Values are plain text (no markup; search highlights are
offsets). Fields are only ever added: see [cli-json.md](cli-json.md).

**Times** (`--since`, `--until`): {TIME_FORMS}. `stats` reads them as UTC days.

**Ages** (`--older-than`): {AGE_FORMS}.

**Sizes** (`--max-size`): {SIZE_FORMS}; KB/MB/GB/TB are powers of 1000,
KiB/MiB/GiB/TiB powers of 1024.

**Flags** read as `--flag / --no-flag` where both make sense; a flag shows no
value placeholder.

Any other value of these options is a usage error naming the option, the value
and the accepted forms.
"""
