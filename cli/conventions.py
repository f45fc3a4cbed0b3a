"""The conventions every ``pentrace`` command follows, as the "Conventions" section of docs/cli.md.

``tests/integration/test_cli_conventions.py`` walks every command and checks
them; the forms of times, ages and sizes come from :mod:`pentrace.values`, so
the text cannot drift from the parser.
"""

from __future__ import annotations

from typing import Final

from pentrace.values import AGE_FORMS, SIZE_FORMS, TIME_FORMS

__all__ = ["CONVENTIONS"]

CONVENTIONS: Final = f"""\
## Conventions

Every command and group follows these rules; a test walks all of them.

**Help and version.** `-h` and `--help` work on every command and group;
`pentrace --version` (or `-V`, or `pentrace version`) prints the version.
Help is plain text, the same as below.

**Exit codes.** `0` success; `1` a failure or findings (`audit` exits `1` for
warnings only and `2` when it finds errors; `prune` and `delete` exit `1` when
something could not be deleted); `2` a usage error: an unknown option, a bad
value, a missing argument, a data root that does not exist. `130` after
Ctrl-C.

**Errors.** One line `error: <what was wrong, and where>` on stderr, usually
followed by `hint: <what to do>`; no box, no traceback (`--debug` or
`PENTRACE_DEBUG=1` shows it). Usage errors name the command, for example
`error: pentrace sessions list: no such option: --bogus`.

**Data root.** `--data-root`, else `$PENGUIN_HOME`, else `~/.penguin/data`. A
root that does not exist (or is not a folder) is a usage error naming where the
path came from, so a typo never reads as "no sessions". Only `import`, `demo`
and `ledger import-penguin` create a root.

**Session references.** A `SESSION` argument takes the full session id, a
unique prefix of it, or (a prefix of) its 8-hex token, the `short_id` that
`sessions list --json` prints; `-p/--project` and `-a/--agent` narrow it when
the same id exists under two agents. Tables never cut an id: on a narrow
terminal, other columns are left out first.

**JSON.** `--json` prints one JSON document: indented on a terminal, compact
(one line) when piped. `--jsonl` (where offered: `sessions list`, `search`,
`replay`) prints one compact object per line; streams such as `ledger tail
--json` are always one object per line. `--fields a,b` (with `--json` or
`--jsonl`; `sessions list`, `search`, `stats tokens|cost|tools|sessions`) keeps
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
