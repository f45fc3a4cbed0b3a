"""Hypothesis strategies for legal sessions, their traces and crash points.

The generator follows a small model of what a well-behaved harness writes:

* ``StartSession`` comes first and only once.
* A *round* is zero to two user inputs, ``request_begin``, zero to four steps
  (assistant text, thinking, a tool call with an optional approval and an
  optional output, a subagent pointer), then ``request_end`` with any status;
  an abort is followed by ``request_end("aborted")``.
* A tool output only ever answers a call of the current request, once, either
  inside the request or right after it completed (before the next begin).
* A summarize compaction is ``compaction_begin``, the compaction prompt, a
  request whose reply holds ``[summary]...[/summary]``, and ``compaction_end``
  (``completed`` exactly when the request completed).  A discard compaction
  has no request.
* ``token_usage`` may follow any request end; its ``session`` counts are the
  running sum of every ``request`` count so far.
* With ``open_tail=True`` the last episode may stop early, as a process that
  died mid-request (or mid-compaction) leaves it.

Every text carries a unique counter so that equal messages never collide.
"""

from __future__ import annotations

from typing import Final

from hypothesis import strategies as st

from pentrace.testing import commands as cmd
from pentrace.testing.render import DEFAULT_SESSION_ID, render_shards

__all__ = ["crash_points", "cut", "session_commands", "split_lines", "trace_records"]

COMPACTION_PROMPT: Final = "Summarize the conversation so far inside [summary]...[/summary]."
# A little of everything a JSON writer must escape or may pass raw: quotes,
# backslashes, control characters, U+2028, astral characters.
_TEXT: Final = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)


class _Builder:
    """Mutable state of one generated session: counters and unanswered calls."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.commands: list[cmd.Command] = []
        self.serial = 0
        self.calls = 0
        self.children = 0
        self.session_tokens = cmd.TokenCounts()

    def label(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix} #{self.serial} {self.draw(_TEXT)}"

    def usage(self) -> None:
        cache_read = self.draw(st.integers(0, 5000))
        cache_write = self.draw(st.integers(0, 500))
        output = self.draw(st.integers(0, 2000))
        total = cache_read + cache_write + output
        request = cmd.TokenCounts(cache_read, cache_write, output, total)
        self.session_tokens = self.session_tokens + request
        self.commands.append(cmd.TokenUsage(self.session_tokens, request))

    def step(self, subagents: bool, open_calls: list[str]) -> None:
        kinds = ["text", "thinking", "tool"] + (["subagent"] if subagents else [])
        kind = self.draw(st.sampled_from(kinds))
        if kind == "text":
            self.commands.append(cmd.AssistantText(self.label("reply")))
        elif kind == "thinking":
            self.commands.append(cmd.Thinking(self.label("thought")))
        elif kind == "subagent":
            self.children += 1
            self.commands.append(
                cmd.SubagentPointer(f"session-2026-07-18-11-11-00-{self.children:08x}")
            )
        else:
            self.calls += 1
            call_id = f"call_{self.calls}"
            name = self.draw(st.sampled_from(("exec_command", "read_file")))
            self.commands.append(cmd.ToolCall(call_id, name, '{"cmd":"printf hi"}'))
            if self.draw(st.booleans()):
                decision = self.draw(st.sampled_from(("allow", "allow", "deny", "forbidden")))
                self.commands.append(cmd.Approval(call_id, decision))
            if self.draw(st.booleans()):
                self.commands.append(cmd.ToolOutput(call_id, self.label("output")))
            else:
                open_calls.append(call_id)

    def round(self, *, first: bool, last: bool, open_tail: bool, subagents: bool) -> None:
        for _ in range(self.draw(st.integers(1 if first else 0, 2))):
            self.commands.append(cmd.UserInput(self.label("input")))
        self.commands.append(cmd.BeginRequest())
        open_calls: list[str] = []
        for _ in range(self.draw(st.integers(0, 4))):
            self.step(subagents, open_calls)
        ending = self.draw(st.sampled_from(("end", "end", "end", "abort", "open")))
        if ending == "open" and last and open_tail:
            return
        if ending == "abort":
            self.commands.extend((cmd.Abort(), cmd.EndRequest("aborted")))
            status = "aborted"
        else:
            status = self.draw(st.sampled_from(("completed",) * 4 + cmd.STOP_STATUSES[1:]))
            self.commands.append(cmd.EndRequest(status))
        if status == "completed":
            for call_id in open_calls:
                if self.draw(st.booleans()):
                    self.commands.append(cmd.ToolOutput(call_id, self.label("late output")))
        if self.draw(st.booleans()):
            self.usage()

    def compaction(self, *, last: bool, open_tail: bool) -> None:
        reason = self.draw(st.sampled_from(("context", "turns", "manual")))
        mode = self.draw(st.sampled_from(("summarize", "summarize", "discard")))
        self.commands.append(cmd.CompactionBegin(reason, mode))
        if last and open_tail and self.draw(st.booleans()):
            return
        status = "completed"
        if mode == "summarize":
            self.commands.extend((cmd.UserInput(COMPACTION_PROMPT), cmd.BeginRequest()))
            summary = self.label("summary")
            self.commands.append(cmd.AssistantText(f"[summary]{summary}[/summary]"))
            status = self.draw(st.sampled_from(("completed", "completed", "failed")))
            self.commands.append(cmd.EndRequest(status))
            if self.draw(st.booleans()):
                self.usage()
        self.commands.append(cmd.CompactionEnd(reason, mode, status))


@st.composite
def session_commands(
    draw: st.DrawFn,
    *,
    max_episodes: int = 6,
    compactions: bool = True,
    subagents: bool = True,
    open_tail: bool = True,
) -> list[cmd.Command]:
    """A legal command sequence for one session (see the module docstring for the model).

    ``max_episodes`` bounds the rounds and compactions after ``StartSession``;
    ``compactions`` / ``subagents`` switch those episodes on; ``open_tail``
    lets the last episode stop mid-request, as a crashed harness leaves it.
    """
    builder = _Builder(draw)
    builder.commands.append(cmd.StartSession())
    episodes = draw(st.integers(1, max_episodes))
    for number in range(episodes):
        last = number == episodes - 1
        use_compaction = compactions and number > 0 and draw(st.integers(0, 4)) == 0
        if use_compaction:
            builder.compaction(last=last, open_tail=open_tail)
        else:
            builder.round(first=number == 0, last=last, open_tail=open_tail, subagents=subagents)
    return builder.commands


def split_lines(data: bytes) -> list[bytes]:
    """Split file content after each ``\\n`` (kept); a torn last line has no ``\\n``.

    Only ``\\n`` separates lines, as in PenguinHarness (never ``splitlines``).
    """
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def cut(lines: list[bytes], offset: int) -> list[bytes]:
    """The lines left when the file made of ``lines`` is truncated at byte ``offset``."""
    return split_lines(b"".join(lines)[:offset])


def crash_points(data: bytes) -> st.SearchStrategy[int]:
    """Byte offsets at which to truncate ``data`` (0 and ``len(data)`` included).

    Half the draws land next to a line end (one byte before, on, or after a
    ``\\n``), where off-by-one bugs in torn-tail handling live; the rest are
    uniform.
    """
    size = len(data)
    near = sorted(
        {
            spot
            for index, byte in enumerate(data)
            if byte == 0x0A
            for spot in (index - 1, index, index + 1)
            if 0 <= spot <= size
        }
        | {0, size}
    )
    return st.one_of(st.integers(0, size), st.sampled_from(near))


@st.composite
def trace_records(
    draw: st.DrawFn,
    *,
    crashed: bool = False,
    session_id: str = DEFAULT_SESSION_ID,
    max_episodes: int = 6,
    compactions: bool = True,
    subagents: bool = True,
) -> list[bytes]:
    """The lines of a legal session's latest shard, each ending in ``\\n``.

    ``b"".join(lines)`` is the file.  With ``crashed=True`` the file is cut at
    a drawn :func:`crash_points` offset, so the last line may be torn (no
    ``\\n``) and the open tail of the session is kept.
    """
    commands = draw(
        session_commands(
            max_episodes=max_episodes,
            compactions=compactions,
            subagents=subagents,
            open_tail=crashed,
        )
    )
    lines = [line + b"\n" for line in render_shards(commands, session_id=session_id)[-1]]
    if not crashed:
        return lines
    return cut(lines, draw(crash_points(b"".join(lines))))
