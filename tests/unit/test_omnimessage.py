"""The OmniMessage schema writes and reads trace lines exactly as PenguinHarness does."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import msgspec
import pytest

from pentrace.domain import omnimessage as om
from pentrace.domain.records import decode_line
from pentrace.errors import EnvelopeFormatError, UsageError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "penguin_harness"
CURRENT_FIXTURES = sorted(p for p in FIXTURES.glob("*.jsonl") if not p.name.startswith("legacy"))
TS = "2026-07-18T03:10:22.531Z"


def _fixture_lines(paths: list[Path]) -> list[bytes]:
    return [line for path in paths for line in path.read_bytes().split(b"\n") if line]


def _line(envelope: om.Envelope) -> str:
    return om.encode_envelope(envelope).decode()


def _retyped(envelope: om.Envelope) -> om.Envelope:
    """The same values rebuilt as new Structs, so nothing remembers its bytes."""
    payload = envelope.payload
    fresh = payload if isinstance(payload, om.UnknownPayload) else msgspec.structs.replace(payload)
    return msgspec.structs.replace(envelope, payload=fresh)


# --- exact encoding shapes ---------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (
            om.text_message("user", "Create hello.txt"),
            '{"type":"text","role":"user","text":"Create hello.txt","stop_reason":"completed"}',
        ),
        (
            om.thinking_message("hm", fidelity={"signature": "c2ln"}),
            '{"type":"thinking","role":"assistant","thinking":"hm","stop_reason":"completed",'
            '"fidelity":{"signature":"c2ln"}}',
        ),
        (
            om.tool_call_message("exec_command", '{"cmd":"ls"}', "call_0"),
            '{"type":"tool_call","role":"assistant","name":"exec_command",'
            '"arguments":"{\\"cmd\\":\\"ls\\"}","tool_call_id":"call_0","stop_reason":"completed"}',
        ),
        (
            om.tool_call_output_message(
                "[no output]", "call_0", images=["data:image/png;base64,AA=="]
            ),
            '{"type":"tool_call_output","role":"user","output":"[no output]",'
            '"images":["data:image/png;base64,AA=="],"tool_call_id":"call_0","stop_reason":"completed"}',
        ),
        (
            om.tool_call_output_message("x", "call_1", stop_reason="aborted"),
            '{"type":"tool_call_output","role":"user","output":"x","tool_call_id":"call_1",'
            '"stop_reason":"aborted"}',
        ),
        (
            om.image_url_message("https://example.com/a.png"),
            '{"type":"image_url","role":"user","image_url":"https://example.com/a.png",'
            '"stop_reason":"completed"}',
        ),
        (
            om.inline_data_message("user", "AAE=", "application/pdf"),
            '{"type":"inline_data","role":"user","data":"AAE=","mime_type":"application/pdf",'
            '"stop_reason":"completed"}',
        ),
        (
            om.inline_thinking_message("AAE=", "application/octet-stream", fidelity={"id": "rs_1"}),
            '{"type":"inline_thinking","role":"assistant","data":"AAE=",'
            '"mime_type":"application/octet-stream","stop_reason":"completed","fidelity":{"id":"rs_1"}}',
        ),
        (om.RequestBegin(), '{"type":"request_begin"}'),
        (
            om.RequestEnd(status="timeout", error_message="slow", attempt=1, retry_in_ms=2000),
            '{"type":"request_end","status":"timeout","error_message":"slow","attempt":1,'
            '"retry_in_ms":2000}',
        ),
        (om.abort(), '{"type":"abort","reason":null}'),
        (om.Abort(), '{"type":"abort"}'),
        (
            om.ApprovalDecision(decision="forbidden", tool_call_id="c"),
            '{"type":"approval_decision","decision":"forbidden","tool_call_id":"c"}',
        ),
        (
            om.TokenUsage(session=om.TokenCounts(total=5), request=om.TokenCounts(output=2)),
            '{"type":"token_usage","session":{"cache_read":0,"cache_write":0,"output":0,"total":5},'
            '"request":{"cache_read":0,"cache_write":0,"output":2,"total":0}}',
        ),
        (
            om.CompactionBegin(reason="context", mode="summarize", context=1000, turns=3),
            '{"type":"compaction_begin","reason":"context","mode":"summarize","context":1000,"turns":3}',
        ),
        (
            om.CompactionEnd(
                reason="manual", mode="discard", status="failed", attempt=2, error_message="e"
            ),
            '{"type":"compaction_end","reason":"manual","mode":"discard","status":"failed",'
            '"attempt":2,"error_message":"e"}',
        ),
        (
            om.GoalFinished(outcome="complete", rounds=2, tokens_used=10),
            '{"type":"goal_finished","outcome":"complete","rounds":2,"tokens_used":10}',
        ),
        (om.Subagent(session_id="child"), '{"type":"subagent","session_id":"child"}'),
        (
            om.ToolListReady(
                tools=(
                    om.ToolDefinition(
                        name="a", description="d", parameters=om.Raw(b'{"type": "object"}')
                    ),
                    om.ToolDefinition(name="b", description="e"),
                )
            ),
            '{"type":"tool_list_ready","tools":[{"name":"a","description":"d",'
            '"parameters":{"type": "object"}},{"name":"b","description":"e"}]}',
        ),
        (om.McpConnectBegin(servers=("gh",)), '{"type":"mcp_connect_begin","servers":["gh"]}'),
        (
            om.McpConnectEnd(
                status="failed",
                results=(
                    om.McpServerResult(
                        server="gh", transport="http", status="completed", duration_ms=4.5, tools=2
                    ),
                    om.McpServerResult(
                        server="fs", transport="stdio", status="failed", duration_ms=9, error="x"
                    ),
                ),
            ),
            '{"type":"mcp_connect_end","status":"failed","results":[{"server":"gh","transport":"http",'
            '"status":"completed","duration_ms":4.5,"tools":2},{"server":"fs","transport":"stdio",'
            '"status":"failed","duration_ms":9,"error":"x"}]}',
        ),
        (
            om.SessionMeta(
                session_id="s",
                provider="p",
                model_id="m",
                model_context_window="128k",
                system_prompt="sp",
                agent_state="/a",
                workspace="/w",
                source="subagent",
            ),
            '{"session_id":"s","provider":"p","model_id":"m","model_context_window":"128k",'
            '"system_prompt":"sp","agent_state":"/a","workspace":"/w","source":"subagent"}',
        ),
    ],
)
def test_each_payload_encodes_in_penguin_harness_key_order(
    payload: om.Payload, expected: str
) -> None:
    envelope = om.make_envelope(TS, payload)
    assert (
        _line(envelope) == f'{{"timestamp":"{TS}","type":"{envelope.type}","payload":{expected}}}'
    )


def test_origin_comes_last_and_is_omitted_when_unset() -> None:
    with_origin = om.make_envelope(TS, om.RequestBegin(), origin=["outer", "inner"])
    assert _line(with_origin).endswith(',"origin":["outer","inner"]}')
    assert "origin" not in _line(om.make_envelope(TS, om.RequestBegin()))


def test_empty_fidelity_and_empty_images_are_not_written() -> None:
    assert "fidelity" not in _line(
        om.make_envelope(TS, om.text_message("assistant", "x", fidelity={}))
    )
    assert "images" not in _line(
        om.make_envelope(TS, om.tool_call_output_message("x", "c", images=[]))
    )


def test_a_raw_fidelity_is_written_byte_for_byte() -> None:
    raw = om.Raw(b'{ "b" :1 ,"a":"\\u00e9"}')
    line = _line(om.make_envelope(TS, om.text_message("assistant", "x", fidelity=raw)))
    assert line.endswith(',"fidelity":{ "b" :1 ,"a":"\\u00e9"}}}')


# --- decoding every payload type ------------------------------------------------


@pytest.mark.parametrize("line", _fixture_lines(CURRENT_FIXTURES), ids=lambda b: b[30:90].decode())
def test_penguin_harness_lines_decode_and_reencode_identically(line: bytes) -> None:
    envelope = om.decode_envelope(line)
    assert not isinstance(envelope.payload, om.UnknownPayload)
    assert om.encode_envelope(envelope) == line
    # Rebuilt from typed values alone, the line still comes out identical, so
    # our field order and string escaping are PenguinHarness's.
    assert om.encode_envelope(_retyped(envelope)) == line


def test_fixture_lines_are_exactly_what_javascript_json_stringify_writes(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed; the fixtures' JavaScript shape cannot be checked")
    script = (
        "const fs=require('fs');let bad=0;"
        "for(const f of process.argv.slice(1)){"
        "for(const l of fs.readFileSync(f,'utf8').split('\\n')){"
        "if(l&&JSON.stringify(JSON.parse(l))!==l){bad++;console.log(f)}}}process.exit(bad?1:0)"
    )
    result = subprocess.run(
        [node, "-e", script, *map(str, CURRENT_FIXTURES)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout


def test_every_known_payload_type_appears_in_the_fixtures() -> None:
    seen = {type(om.decode_envelope(line).payload) for line in _fixture_lines(CURRENT_FIXTURES)}
    expected = {om.SessionMeta, *om.COMPLETE_MODEL_TYPES, *om.EVENT_TYPES}
    assert expected <= seen


@pytest.mark.parametrize(
    ("payload", "cls"),
    [
        (
            '{"type":"partial_text","role":"assistant","event_type":"delta","text":"he"}',
            om.PartialText,
        ),
        (
            '{"type":"partial_thinking","role":"assistant","event_type":"start","thinking":""}',
            om.PartialThinking,
        ),
        (
            '{"type":"partial_tool_call","role":"assistant","event_type":"delta","name":"f",'
            '"arguments":"{\\"a","tool_call_id":"c","stop_reason":"completed"}',
            om.PartialToolCall,
        ),
        (
            '{"type":"partial_tool_call_output","role":"user","event_type":"stop","output":"",'
            '"images":["data:,"],"tool_call_id":"c","stop_reason":"completed"}',
            om.PartialToolCallOutput,
        ),
    ],
)
def test_partials_decode_and_are_refused_by_the_recordable_predicate(
    payload: str, cls: type
) -> None:
    line = f'{{"timestamp":"{TS}","type":"model_msg","payload":{payload}}}'.encode()
    envelope = om.decode_envelope(line)
    assert isinstance(envelope.payload, cls)
    assert om.is_partial(envelope.payload)
    assert not om.is_recordable(envelope)
    assert om.encode_envelope(_retyped(envelope)) == line


def test_complete_messages_are_recordable_unless_they_carry_an_origin() -> None:
    text = om.text_message("assistant", "x")
    assert not om.is_partial(text)
    assert om.is_recordable(om.make_envelope(TS, text))
    assert not om.is_recordable(om.make_envelope(TS, text, origin=["child"]))


def test_payload_type_and_envelope_type_are_derived_from_the_class() -> None:
    assert om.payload_type(om.RequestEnd(status="completed")) == "request_end"
    assert (
        om.payload_type(om.PartialText(role="assistant", event_type="delta", text=""))
        == "partial_text"
    )
    assert om.envelope_type_for(om.Subagent(session_id="s")) == "event_msg"
    assert om.envelope_type_for(om.image_url_message("u")) == "model_msg"
    meta = om.decode_envelope(_fixture_lines(CURRENT_FIXTURES)[0]).payload
    assert (om.payload_type(meta), om.envelope_type_for(meta)) == (None, "session_meta")


# --- legacy, unknown and odd input ------------------------------------------------


def test_legacy_session_meta_fields_are_accepted_but_never_emitted() -> None:
    line = (FIXTURES / "legacy_meta.jsonl").read_bytes().split(b"\n")[0]
    envelope = om.decode_envelope(line)
    out = om.encode_envelope(envelope)
    original = json.loads(line)
    for key in om.LEGACY_META_KEYS:
        del original["payload"][key]
    assert out == json.dumps(original, separators=(",", ":"), ensure_ascii=False).encode()
    assert b'"tools"' not in out
    assert b'"thinking_level"' not in out


def test_a_string_value_that_looks_like_a_legacy_key_is_kept() -> None:
    line = (
        b'{"timestamp":"t","type":"session_meta","payload":{"session_id":"s","provider":"p",'
        b'"model_id":"m","model_context_window":1,"system_prompt":"tools","agent_state":"a",'
        b'"workspace":"w"}}'
    )
    assert om.encode_envelope(om.decode_envelope(line)) == line


def test_unknown_fields_survive_in_payload_and_envelope() -> None:
    line = (
        b'{"timestamp":"t","version":2,"type":"event_msg","payload":{"type":"approval_decision",'
        b'"decision":"deny","policy_rule":"no-rm","tool_call_id":"c"}}'
    )
    envelope = om.decode_envelope(line)
    assert envelope.payload == om.ApprovalDecision(decision="deny", tool_call_id="c")
    assert om.encode_envelope(envelope) == line
    rewrapped = om.encode_envelope(msgspec.structs.replace(envelope, origin=("child",)))
    assert b'"policy_rule":"no-rm"' in rewrapped


def test_unknown_payload_and_envelope_types_are_kept_whole() -> None:
    lines = [
        b'{"timestamp":"t","type":"event_msg","payload":{"type":"budget_warning","left":1.50}}',
        b'{"timestamp":"t","type":"model_msg","payload":{"type":"audio","data":"AA=="}}',
        b'{"timestamp":"t","type":"ui_msg","payload":[1, 2]}',
    ]
    for line in lines:
        envelope = om.decode_envelope(line)
        assert isinstance(envelope.payload, om.UnknownPayload)
        assert om.encode_envelope(envelope) == line
        assert om.encode_envelope(msgspec.structs.replace(envelope)) == line
    assert om.decode_envelope(lines[0]).payload.payload_type == "budget_warning"  # type: ignore[union-attr]
    assert om.payload_type(om.decode_envelope(lines[2]).payload) is None


def test_numbers_keep_their_spelling_and_their_python_type() -> None:
    line = (
        b'{"timestamp":"t","type":"event_msg","payload":{"type":"token_usage",'
        b'"session":{"cache_read":10.0,"cache_write":123456789012345678901234567890,"output":1e3,'
        b'"total":-0},"request":{"cache_read":0,"cache_write":0,"output":0,"total":0}}}'
    )
    envelope = om.decode_envelope(line)
    assert om.encode_envelope(envelope) == line
    session = envelope.payload.session  # type: ignore[union-attr]
    assert isinstance(session.cache_read, float)
    assert session.cache_write == 123456789012345678901234567890
    retyped = om.encode_envelope(_retyped(envelope))
    assert b'"cache_read":10.0,' in retyped
    assert b'"cache_write":123456789012345678901234567890,' in retyped


def test_a_line_with_surrounding_whitespace_reencodes_without_it() -> None:
    envelope = om.decode_envelope(
        b'  {"timestamp":"t","type":"event_msg","payload":{"type":"request_begin"}}\r\n'
    )
    assert (
        om.encode_envelope(envelope)
        == b'{"timestamp":"t","type":"event_msg","payload":{"type":"request_begin"}}'
    )


def test_changing_a_decoded_payload_emits_the_change() -> None:
    line = _fixture_lines(CURRENT_FIXTURES)[1]
    envelope = om.decode_envelope(line)
    changed = msgspec.structs.replace(
        envelope, payload=msgspec.structs.replace(envelope.payload, text="[redacted]")
    )
    out = json.loads(om.encode_envelope(changed))
    assert out["payload"]["text"] == "[redacted]"
    assert out == {
        **json.loads(line),
        "payload": {**json.loads(line)["payload"], "text": "[redacted]"},
    }


def test_decoded_and_built_envelopes_compare_equal() -> None:
    built = om.make_envelope(TS, om.tool_call_output_message("[no output]", "call_0"))
    assert om.decode_envelope(om.encode_envelope(built)) == built


def test_envelope_from_record_decodes_a_parsed_trace_line() -> None:
    line = _fixture_lines(CURRENT_FIXTURES)[3]
    record = decode_line(b"  " + line + b"\t", 4)
    assert record is not None
    assert om.encode_envelope(om.envelope_from_record(record)) == line


# --- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            b'{"timestamp":1,"type":"event_msg","payload":{}}',
            r"Expected `str`, got `int` - at `\$.timestamp`",
        ),
        (b'{"timestamp":"t","type":"event_msg"}', r"missing required field `payload`"),
        (
            b'{"timestamp":"t","type":"model_msg","payload":{"type":"text","role":"user","text":5}}',
            r"Expected `str`, got `int` - at `\$.payload.text`",
        ),
        (
            b'{"timestamp":"t","type":"event_msg","payload":{"type":"token_usage","session":{"total":"x"},'
            b'"request":{}}}',
            r"at `\$.payload.session.total`",
        ),
        (
            b'{"timestamp":"t","type":"model_msg","payload":7}',
            r"Expected `object`, got `int` - at `\$.payload`",
        ),
        (
            b'{"timestamp":"t","type":"model_msg","payload":{"role":"user"}}',
            r"field `type` - at `\$.payload`",
        ),
        (
            b'{"timestamp":"t","type":"session_meta","payload":{"session_id":"s"}}',
            r"at `\$.payload`",
        ),
        (b"[1]", r"Expected `object`, got `array` - at `\$`"),
    ],
)
def test_shape_errors_name_the_field_path(line: bytes, message: str) -> None:
    with pytest.raises(EnvelopeFormatError, match=message):
        om.decode_envelope(line)


def test_errors_name_where_the_line_came_from() -> None:
    record = decode_line(
        b'{"timestamp":"t","type":"event_msg","payload":{"type":"request_end"}}', 12
    )
    assert record is not None
    with pytest.raises(
        EnvelopeFormatError, match=r"^line 12: .*`status` - at `\$.payload`"
    ) as caught:
        om.envelope_from_record(record)
    assert caught.value.hint


def test_invalid_json_is_reported_without_echoing_the_line() -> None:
    with pytest.raises(EnvelopeFormatError, match="invalid JSON") as caught:
        om.decode_envelope(
            b'{"timestamp":"t","type":"model_msg","payload":{"text":"s3cret"', where="a.jsonl:3: "
        )
    assert str(caught.value).startswith("a.jsonl:3: ")
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize("text", [b"NaN", b"Infinity"])
def test_non_strict_json_constants_are_invalid_json(text: bytes) -> None:
    line = (
        b'{"timestamp":"t","type":"event_msg","payload":{"type":"goal_finished","rounds":'
        + text
        + b"}}"
    )
    with pytest.raises(EnvelopeFormatError, match="found invalid JSON"):
        om.decode_envelope(line)


def test_a_lone_surrogate_is_reported_as_valid_json_that_typing_cannot_hold() -> None:
    line = (
        b'{"timestamp":"t","type":"model_msg",'
        b'"payload":{"type":"text","role":"user","text":"\\ud800"}}'
    )
    with pytest.raises(EnvelopeFormatError, match="valid JSON but holds a lone surrogate"):
        om.decode_envelope(line)
    record = decode_line(line)
    assert record is not None
    assert record.payload()["text"] == "\ud800"


def test_an_envelope_whose_type_contradicts_its_payload_cannot_be_encoded() -> None:
    wrong = om.Envelope(timestamp=TS, type="model_msg", payload=om.RequestBegin())
    with pytest.raises(EnvelopeFormatError, match="RequestBegin belongs in 'event_msg'"):
        om.encode_envelope(wrong)


def test_make_envelope_refuses_an_unknown_payload() -> None:
    with pytest.raises(UsageError, match="UnknownPayload"):
        om.make_envelope(TS, om.UnknownPayload(raw=om.Raw(b"{}")))


# --- values ---------------------------------------------------------------------------


def test_token_counts_add_field_wise() -> None:
    total = om.TokenCounts(cache_read=1, cache_write=2, output=3, total=6) + om.TokenCounts(
        cache_read=10, cache_write=20, output=30, total=60.5
    )
    assert total == om.TokenCounts(cache_read=11, cache_write=22, output=33, total=66.5)
    assert om.TokenCounts() + om.TokenCounts() == om.TokenCounts()
    with pytest.raises(TypeError):
        om.TokenCounts() + 1  # type: ignore[operator]


def test_payloads_are_immutable() -> None:
    payload = om.text_message("user", "x")
    with pytest.raises(AttributeError):
        payload.text = "y"  # type: ignore[misc]


def test_format_timestamp_writes_utc_milliseconds_like_javascript() -> None:
    moment = datetime(2026, 7, 18, 11, 10, 22, 531999, tzinfo=timezone(timedelta(hours=8)))
    assert om.format_timestamp(moment) == "2026-07-18T03:10:22.531Z"
    assert (
        om.format_timestamp(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05.000Z"
    )
    assert om.parse_timestamp("2026-07-18T03:10:22.531Z") == datetime(
        2026, 7, 18, 3, 10, 22, 531000, tzinfo=UTC
    )


def test_format_timestamp_refuses_naive_datetimes() -> None:
    with pytest.raises(UsageError, match="timezone-aware"):
        om.format_timestamp(datetime(2026, 1, 1))


def test_parse_timestamp_refuses_garbage() -> None:
    with pytest.raises(UsageError, match="ISO 8601"):
        om.parse_timestamp("yesterday")


def test_the_json_schema_covers_every_recordable_payload() -> None:
    schema = om.envelope_json_schema()
    names = set(schema["$defs"])
    assert {
        "SessionMeta",
        "Text",
        "ToolCall",
        "TokenUsage",
        "McpConnectEnd",
        "TokenCounts",
    } <= names
    assert not {"PartialText", "PartialToolCall"} & names
    kinds = [variant["properties"]["type"]["const"] for variant in schema["oneOf"]]
    assert kinds == ["session_meta", "model_msg", "event_msg"]
    assert schema["$defs"]["Text"]["required"] == ["type", "role", "text"]
    assert schema["$defs"]["Thinking"]["properties"]["fidelity"]["type"] == "object"


def test_the_json_schema_accepts_penguin_harness_lines_and_rejects_bad_ones() -> None:
    validator = jsonschema.Draft202012Validator(om.envelope_json_schema())
    validator.check_schema(validator.schema)
    for line in _fixture_lines(CURRENT_FIXTURES):
        validator.validate(json.loads(line))
    bad = [
        {"timestamp": TS, "type": "model_msg", "payload": {"type": "text", "role": "user"}},
        {
            "timestamp": TS,
            "type": "event_msg",
            "payload": {"type": "text", "role": "u", "text": ""},
        },
        {"timestamp": TS, "type": "model_msg", "payload": {"type": "partial_text", "text": ""}},
        {"timestamp": TS, "type": "session_meta", "payload": {"session_id": "s"}},
        {"type": "event_msg", "payload": {"type": "request_begin"}},
    ]
    for value in bad:
        assert not validator.is_valid(value), value


# --- the format document ------------------------------------------------------------

TRACE_FORMAT_DOC = Path(__file__).parent.parent.parent / "docs" / "trace-format.md"


def _doc_blocks(language: str) -> list[str]:
    """Code blocks of one language in the document's "Example" section."""
    text = TRACE_FORMAT_DOC.read_text(encoding="utf-8")
    text = text.split("\n## Example\n", 1)[1].split("\n## ", 1)[0]
    fence = f"```{language}\n"
    return [part.split("```", 1)[0] for part in text.split(fence)[1:]]


def test_the_python_example_in_trace_format_md_runs() -> None:
    blocks = _doc_blocks("python")
    assert blocks
    for block in blocks:
        exec(compile(block, str(TRACE_FORMAT_DOC), "exec"), {})  # noqa: S102 - our own docs


def test_the_example_trace_in_trace_format_md_is_valid_and_round_trips() -> None:
    (block,) = _doc_blocks("json")
    lines = [line.encode() for line in block.splitlines()]
    for line in lines:
        envelope = om.decode_envelope(line)
        assert not isinstance(envelope.payload, om.UnknownPayload)
        assert om.is_recordable(envelope)
        assert om.encode_envelope(_retyped(envelope)) == line


def test_a_legacy_key_spelled_with_escapes_is_still_dropped() -> None:
    line = (
        b'{"timestamp":"t","type":"session_meta","payload":{"session_id":"s","provider":"p",'
        b'"model_id":"m","model_context_window":1,"system_prompt":"","t\\u006fols":[],'
        b'"agent_state":"a","workspace":"w"}}'
    )
    assert b"ools" not in om.encode_envelope(om.decode_envelope(line))


def test_a_session_meta_payload_that_is_not_an_object_is_a_shape_error() -> None:
    with pytest.raises(EnvelopeFormatError, match=r"got `int` - at `\$.payload`"):
        om.decode_envelope(b'{"timestamp":"t","type":"session_meta","payload":5}')
