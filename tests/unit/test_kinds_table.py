"""The kinds table is the one list of record kinds: every other table agrees with it."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import get_args

from pentrace.domain import kinds
from pentrace.domain import omnimessage as om
from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime.mapping import EVENT_TYPES, MODEL_MESSAGE_TYPES, event_type_for
from pentrace.domain.runtime.scope import event_category
from pentrace.domain.session import events as ev
from pentrace.domain.session.aggregate import COMMANDS, Session
from pentrace.testing import commands as cmd
from pentrace.testing.render import payload_for

_DOCS = Path(__file__).resolve().parents[2] / "docs"
# Event classes that stand for a position or a foreign line, not for one payload type.
_NOT_A_KIND = {ev.SessionStarted, ev.TraceOpened, ev.ShardOpened, ev.RecordAppended}


def test_every_payload_struct_has_exactly_one_row_with_its_own_tag_and_envelope() -> None:
    structs = [*get_args(om.ModelPayload), *get_args(om.EventPayload)]
    rows = {kind.payload: kind for kind in kinds.KINDS}
    assert sorted(rows, key=str) == sorted(structs, key=str)
    assert len(rows) == len(kinds.KINDS)
    for struct, kind in rows.items():
        assert struct.__struct_config__.tag == kind.tag
        model = struct in (*om.COMPLETE_MODEL_TYPES, *om.PARTIAL_TYPES)
        assert kind.envelope == ("model_msg" if model else "event_msg")


def test_every_event_class_of_a_kind_has_exactly_one_row() -> None:
    recorded = [kind.event for kind in kinds.KINDS if kind.event is not ev.RecordAppended]
    assert len(recorded) == len(set(recorded))
    assert set(recorded) == set(ev.EVENT_CLASSES) - _NOT_A_KIND


def test_a_record_of_each_kind_maps_to_the_rows_event_class_and_runtime_type() -> None:
    for kind in kinds.KINDS:
        for status, expected in [(None, kind.runtime_type), *kind.statuses]:
            extra = "" if status is None else f',"status":"{status}"'
            payload = f'{{"type":"{kind.tag}"{extra}}}'
            line = f'{{"timestamp":"t","type":"{kind.envelope}","payload":{payload}}}'
            record = TraceRecord(line.encode())
            assert kinds.kind_of(record) == kind
            assert kinds.event_class_for(record, 5) is kind.event
            assert ev.event_class_for(record, 5) is kind.event
            assert event_type_for(record, 5) == expected
            assert expected in kind.runtime_types


def test_the_runtime_tables_are_the_kinds_table_and_the_docs_list_every_row() -> None:
    assert {**MODEL_MESSAGE_TYPES, **EVENT_TYPES}.keys() <= {k.tag for k in kinds.KINDS}
    text = (_DOCS / "runtime-events.md").read_text(encoding="utf-8")
    for kind in kinds.KINDS:
        for runtime_type in kind.runtime_types:
            category = kind.category or event_category(runtime_type, {"type": kind.tag})
            row = (
                rf"\| `{kind.envelope}` `{kind.tag}` \|[^\n]*"
                rf"\| `{re.escape(runtime_type)}` \| `{category}` \|"
            )
            assert re.search(row, text), (kind.tag, runtime_type, category)


def test_every_public_session_method_taking_now_is_a_command_the_handle_offers() -> None:
    taking_now = {
        name
        for name, member in vars(Session).items()
        if inspect.isfunction(member)
        and not name.startswith("_")
        and "now" in inspect.signature(member).parameters
    }
    assert taking_now == set(COMMANDS)
    assert {name for name, closes in COMMANDS.items() if closes} == {
        "end_request",
        "end_compaction",
    }


def test_every_testing_command_renders_a_record_of_a_kind_in_the_table() -> None:
    samples: dict[type, cmd.Command] = {
        cmd.UserInput: cmd.UserInput("hi"),
        cmd.BeginRequest: cmd.BeginRequest(),
        cmd.AssistantText: cmd.AssistantText("hello"),
        cmd.Thinking: cmd.Thinking("hm"),
        cmd.ToolCall: cmd.ToolCall("c1", "exec_command", "{}"),
        cmd.Approval: cmd.Approval("c1", "allow"),
        cmd.ToolOutput: cmd.ToolOutput("c1", "ok"),
        cmd.Abort: cmd.Abort(),
        cmd.EndRequest: cmd.EndRequest(),
        cmd.TokenUsage: cmd.TokenUsage(cmd.TokenCounts(), cmd.TokenCounts()),
        cmd.CompactionBegin: cmd.CompactionBegin(),
        cmd.CompactionEnd: cmd.CompactionEnd(),
        cmd.SubagentPointer: cmd.SubagentPointer("child"),
    }
    assert set(samples) == set(get_args(cmd.Command)) - {cmd.StartSession}
    for command in samples.values():
        envelope, payload = payload_for(command)
        assert envelope in ("model_msg", "event_msg")
        assert payload["type"] in kinds.by_envelope(envelope)
