"""The signature property: whatever a legal session does and wherever it crashes, resume is legal.

A Hypothesis state machine drives the real Session aggregate through an
eventsourcing application whose persistence module is the trace store, in a
temporary data root.  Between commands it saves (one save per command or one
per batch), restarts cleanly, or crashes: the unsaved events are lost and the
latest shard is truncated at any byte.  After every restart it resumes from
the latest shard and checks:

1. history holds committed rounds only (it equals the model's, see resume_model.py);
2. every tool call in history + carry-over is answered exactly once, after it,
   with no orphan outputs;
3. resuming is idempotent (and writes nothing the second time);
4. resume, continue, resume gives what one fold over the whole shard gives;
5. the token counters equal the last surviving token_usage;
6. no placeholder ever reaches the disk (the files hold exactly the saved lines);
7. folding in one batch equals folding in many (reading in 7-byte chunks;
   the aggregate rebuilt in one go equals the one built event by event).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from pentrace import testing as pt
from pentrace.domain.records import TraceRecord
from pentrace.domain.session.aggregate import Session
from pentrace.errors import ResumeError
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.durability import Durability
from pentrace.infrastructure.trace.reader import read_shard
from pentrace.projections.resume import ResumeResult, resume_trace
from pentrace.projections.synthetic import INTERRUPTED_OUTPUT, SyntheticRecord
from pentrace.testing import commands as c
from pentrace.testing.render import DEFAULT_SESSION_ID, DEFAULT_START
from tests.property.resume_model import (
    Expected,
    check_pairing,
    expected_resume,
    shown_messages,
    surviving_records,
)
from tests.support import BOUNDED_PROPERTY

PROJECT, AGENT, SID = "proj", "agent", DEFAULT_SESSION_ID
STATUSES = st.sampled_from(("completed",) * 3 + c.STOP_STATUSES[1:])
COUNTERS = ("started", "shard_index", "requests", "turns", "open_request", "open_calls",
            "unanswered", "compaction", "rotation_pending")  # fmt: skip


def _canon(result: ResumeResult) -> tuple[Any, ...]:
    def raws(messages: list[TraceRecord]) -> tuple[bytes, ...]:
        return tuple(m.raw for m in messages)

    summary = result.pending_summary.raw if result.pending_summary is not None else None
    meta = result.meta.raw if result.meta is not None else None
    return (
        raws(result.history), raws(result.carry_over), result.context_closed, summary,
        json.dumps(result.session_tokens), result.last_request_total, result.session_turns,
        raws(result.render_messages), meta, result.dangling_compaction,
    )  # fmt: skip


class ResumeLegality(RuleBasedStateMachine):
    """Random legal commands, saves, restarts and crashes against the real aggregate."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="pentrace-legality-"))
        self.root = DataRoot(self.tmp / "data")
        self.workspace = self.tmp / "work"
        self.workspace.mkdir()
        self.clock = 0
        self.app = self._open()
        self.session: Session | None = None
        # After resume forgets a request left open (nothing is written), the live aggregate
        # has no open request while a rebuild from the trace still sees one, until the next begin.
        self.abandoned = False
        self.files: list[bytearray] = []  # the model of each shard's bytes, in index order
        self.serial = 0
        self.tokens = c.TokenCounts()
        self.last_resume: tuple[Any, ...] | None = None

    # ------------------------------------------------------------ plumbing

    def _open(self) -> SessionApplication:
        return SessionApplication(
            self.root, PROJECT, AGENT, durability=Durability.NONE, clock=self._now
        )

    def _now(self) -> datetime:
        return pt.command_time(DEFAULT_START, self.clock)

    def _do(self, command: c.Command, save: bool = True) -> None:
        self.clock += 1
        now = pt.command_time(DEFAULT_START, self.clock)
        if isinstance(command, c.StartSession):
            command = c.StartSession(workspace=str(self.workspace))
            self.session = pt.start_session(command, session_id=SID, now=now)
        else:
            assert self.session is not None
            pt.apply_command(self.session, command, now=now)
        if save:
            self._save()

    def _save(self) -> None:
        if self.session is None:
            return
        lines = [event.line for event in self.session.pending_events]  # type: ignore[attr-defined]
        first = self.session.version - len(lines) + 1
        self.app.save(self.session)
        self._extend_model(lines, first)

    def _extend_model(self, lines: list[bytes], first: int) -> None:
        for position, line in enumerate(lines, start=first):
            record = TraceRecord(line)
            # The next begin drops a forgotten request; so does a completed compaction.
            if record.ptype == "request_begin" or (
                record.ptype == "compaction_end" and record.status == "completed"
            ):
                self.abandoned = False
            # A session_meta after position 1 opens the next shard (rotation).
            if not self.files or (position > 1 and record.kind == "session_meta"):
                self.files.append(bytearray())
            shard = self.files[-1]
            if shard and not shard.endswith(b"\n"):
                shard += b"\n"  # the writer heals a torn tail before the next record
            shard += line + b"\n"

    def _label(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix} #{self.serial}"

    def _restart(self) -> None:
        """Drop the in-memory aggregate, reopen the application, resume from the trace."""
        self.app.close()
        self.app = self._open()
        if not sum(len(surviving_records(bytes(f))) for f in self.files):
            self.session = None  # even session_meta was lost: there is no session
            return
        latest = surviving_records(bytes(self.files[-1]))
        if not latest or latest[0][1].get("type") != "session_meta":
            # The latest shard lost its copied session_meta: resume must refuse, clearly.
            with pytest.raises(ResumeError, match=f"session {SID}"):
                self.app.resume_session(SID)
            self.session = self._rebuild()
            return
        self._resume_and_check()

    def _rebuild(self) -> Session:
        session: object = self.app.repository.get(SID)
        assert isinstance(session, Session)
        return session

    def _shard_paths(self) -> list[Path]:
        return [shard.path for shard in self.root.find_shards(PROJECT, AGENT, SID)]

    # --------------------------------------------------------------- rules

    @initialize()
    def start_session(self) -> None:
        self._do(c.StartSession())

    @precondition(lambda self: self.session is None)
    @rule()
    def start_again(self) -> None:
        """A crash that lost even the first line leaves no session: the harness starts anew."""
        self._do(c.StartSession())

    @precondition(lambda self: self.session is not None and not self.session.open_request)
    @rule(
        calls=st.lists(st.sampled_from(("inside", "after", "never")), max_size=3),
        status=STATUSES,
        usage=st.booleans(),
    )
    def whole_round(self, calls: list[str], status: str, usage: bool) -> None:
        """One round as a harness writes it: input, request, tool calls, reply, end, usage."""
        self._do(c.UserInput(self._label("input")), save=False)
        self._do(c.BeginRequest(), save=False)
        after = []
        for when in calls:
            call_id = f"call_{self._label('c').split('#')[1]}"
            self._do(c.ToolCall(call_id, "read_file", '{"path":"a"}'), save=False)
            if when == "inside":
                self._do(c.ToolOutput(call_id, self._label("output")), save=False)
            elif when == "after":
                after.append(call_id)
        self._do(c.AssistantText(self._label("reply")), save=False)
        self._do(c.EndRequest(status), save=status == "completed" and not after)
        for call_id in after if status == "completed" else ():
            self._do(c.ToolOutput(call_id, self._label("late output")))
        if usage:
            self.token_usage(output=len(calls) * 7, cache=3)

    @precondition(lambda self: self.session is not None)
    @rule(save=st.booleans())
    def user_input(self, save: bool) -> None:
        self._do(c.UserInput(self._label("input")), save)

    @precondition(lambda self: self.session is not None and not self.session.open_request)
    @rule()
    def begin_request(self) -> None:
        self._do(c.BeginRequest())

    @precondition(lambda self: self.session is not None and self.session.open_request)
    @rule(thinking=st.booleans(), save=st.booleans())
    def assistant_message(self, thinking: bool, save: bool) -> None:
        self._do(c.Thinking(self._label("thought")) if thinking else c.AssistantText(
            self._label("reply")), save)  # fmt: skip

    @precondition(lambda self: self.session is not None and self.session.open_request)
    @rule(decision=st.sampled_from((None, "allow", "deny", "forbidden")), save=st.booleans())
    def tool_call(self, decision: str | None, save: bool) -> None:
        call_id = f"call_{self._label('c').split('#')[1]}"
        self._do(c.ToolCall(call_id, "exec_command", '{"cmd":"ls"}'), save)
        if decision is not None:
            self._do(c.Approval(call_id, decision), save)

    @precondition(lambda self: self.session is not None and bool(self.session.awaiting_output()))
    @rule(data=st.data(), save=st.booleans())
    def tool_output(self, data: st.DataObject, save: bool) -> None:
        assert self.session is not None
        call_id = data.draw(st.sampled_from(self.session.awaiting_output()))
        self._do(c.ToolOutput(call_id, self._label("output")), save)

    @precondition(lambda self: self.session is not None and self.session.open_request)
    @rule(status=STATUSES, aborted=st.booleans())
    def end_request(self, status: str, aborted: bool) -> None:
        if aborted:
            self._do(c.Abort())
        self._do(c.EndRequest("aborted" if aborted else status))

    @precondition(lambda self: self.session is not None)
    @rule(output=st.integers(0, 900), cache=st.integers(0, 90))
    def token_usage(self, output: int, cache: int) -> None:
        request = c.TokenCounts(cache, 0, output, cache + output)
        self.tokens = self.tokens + request
        self._do(c.TokenUsage(self.tokens, request))

    @precondition(lambda self: self.session is not None)
    @rule()
    def subagent(self) -> None:
        self._do(c.SubagentPointer(f"session-2026-07-18-11-11-00-{self.serial:08x}"))

    @precondition(
        lambda self: (
            self.session is not None
            and not self.session.open_request
            and self.session.compaction is None
        )
    )
    @rule(mode=st.sampled_from(("summarize", "discard")), status=STATUSES, finish=st.booleans())
    def compaction(self, mode: str, status: str, finish: bool) -> None:
        self._do(c.CompactionBegin("context", mode))
        if mode == "summarize":
            self._do(c.UserInput("Summarize the conversation so far."))
            self._do(c.BeginRequest())
            self._do(c.AssistantText(f"[summary]{self._label('summary')}[/summary]"))
            self._do(c.EndRequest(status))
        if finish:
            self._do(
                c.CompactionEnd("context", mode, status if mode == "summarize" else "completed")
            )

    @precondition(lambda self: self.session is not None)
    @rule()
    def clean_restart(self) -> None:
        self._save()
        self._restart()

    @precondition(lambda self: self.files)
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        """The process dies: unsaved events are lost and the latest shard is cut at any byte."""
        self.app.close()
        path = self._shard_paths()[-1]
        offset = data.draw(pt.crash_points(path.read_bytes()), label="crash offset")
        pt.truncate_file(path, offset)
        del self.files[-1][offset:]
        self._restart()

    # ---------------------------------------------------------- invariants

    def _resume(self) -> ResumeResult:
        return resume_trace(read_shard(self._shard_paths()[-1]))

    def _verify(self, result: ResumeResult) -> None:
        """Invariants 1, 2 and 5: the model's rounds, strict pairing, the counters."""
        self._check_against_model(result, expected_resume(bytes(self.files[-1])))
        check_pairing(result.history + result.carry_over)
        placeholders = sum(isinstance(m, SyntheticRecord) for m in result.history)
        event(f"history: {min(len(result.history), 5)}+ messages")
        event(f"history: {min(placeholders, 2)}+ placeholders")
        event(f"context closed: {result.context_closed}")

    def _resume_and_check(self) -> None:
        """Resume with the application; check the result, what it wrote, and idempotence."""
        before = [p.read_bytes() for p in self._shard_paths()]
        dangling = expected_resume(bytes(self.files[-1])).dangling
        resumed = self.app.resume_session(SID)
        self.session = resumed.handle.session
        self.abandoned = True
        self.clock += 1
        after = [p.read_bytes() for p in self._shard_paths()]
        if dangling is None:
            assert after == before  # resume writes nothing else
        else:
            # Only a dangling compaction makes resume write: one failed compaction_end.
            assert after[:-1] == before[:-1]
            assert after[-1].startswith(before[-1])
            added = after[-1][len(before[-1]) :].lstrip(b"\n").splitlines()
            assert len(added) == 1
            closing = TraceRecord(added[0])
            assert (closing.ptype, closing.status) == ("compaction_end", "failed")
            self._extend_model(added, self.session.version)
        result = resumed.result
        self._verify(result)
        assert result.dangling_compaction is None
        again = self.app.resume_session(SID)
        assert _canon(again.result) == _canon(result)  # 3: idempotent
        assert [p.read_bytes() for p in self._shard_paths()] == after
        self.session = again.handle.session
        chunked = resume_trace(read_shard(self._shard_paths()[-1], chunk_size=7))
        assert _canon(chunked) == _canon(result)  # 7: many small reads, one fold
        self.last_resume = _canon(result)

    @invariant()
    def resume_is_legal_at_every_step(self) -> None:
        """1, 2, 5 after every step, as if the process died right now."""
        if self.files and self._shard_paths():
            self._verify(self._resume())

    def _check_against_model(self, result: ResumeResult, expected: Expected) -> None:
        assert result.context_closed == expected.closed
        assert shown_messages(result.history) == expected.history  # 1: committed rounds only
        assert shown_messages(result.carry_over) == expected.carry_over
        assert result.session_turns == expected.turns
        assert result.session_tokens == expected.tokens  # 5: counters = last token_usage
        assert result.last_request_total == expected.last_request_total
        assert result.dangling_compaction == expected.dangling
        if expected.closed and expected.summary is not None:
            assert result.pending_summary is not None
            text = result.pending_summary.payload()["text"]
            assert text == f"[context_summary]\n{expected.summary}\n[/context_summary]"
        else:
            assert result.pending_summary is None

    @invariant()
    def the_disk_holds_exactly_the_saved_lines(self) -> None:
        """6: no placeholder (nor anything else unsaved) ever reaches the disk."""
        paths = self._shard_paths()
        assert [p.read_bytes() for p in paths] == [bytes(f) for f in self.files]
        for path in paths:
            assert INTERRUPTED_OUTPUT.encode() not in path.read_bytes()
            assert b"[context_summary]" not in path.read_bytes()

    @invariant()
    def a_rebuilt_aggregate_equals_the_live_one(self) -> None:
        """7: the aggregate folded from the trace in one go equals the one built event by event."""
        if self.session is None or self.session.pending_events:
            return
        rebuilt = self._rebuild()
        for name in COUNTERS:
            if self.abandoned and name in ("open_request", "open_calls"):
                continue
            assert getattr(rebuilt, name) == getattr(self.session, name), name
        assert rebuilt.version == self.session.version

    @invariant()
    def resume_continue_resume_equals_one_fold(self) -> None:
        """4: after continuing a resumed session, resuming equals one fold over the shard."""
        if self.last_resume is None or not self._shard_paths():
            return
        records = [TraceRecord(line) for line, _ in surviving_records(bytes(self.files[-1]))]
        assert _canon(self._resume()) == _canon(resume_trace(records))

    def teardown(self) -> None:
        self.app.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


ResumeLegality.TestCase.settings = settings(
    BOUNDED_PROPERTY,
    max_examples=40,
    stateful_step_count=40,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestResumeLegality = ResumeLegality.TestCase
