"""The render items ``pentrace replay`` and the Session page draw from: one kind per record,
tool calls holding their approvals and output, what a call drew folded where it stands."""

from __future__ import annotations

from typing import Any, get_args

from pentrace.domain.records import TraceRecord
from pentrace.projections.replay import (
    Formatter,
    ItemKind,
    ReplayItem,
    as_text,
    build_render_items,
    build_replay,
    draw,
)
from tests.image_samples import data_url, image_bytes

PNG = data_url(image_bytes("PNG"), "image/png")


def _items(*envelopes: dict[str, Any]) -> list[ReplayItem]:
    return build_replay(
        (0, TraceRecord.from_value(envelope, line))
        for line, envelope in enumerate(envelopes, start=1)
    )


def _msg(ptype: str, role: str = "assistant", **fields: Any) -> dict[str, Any]:
    return {"type": "model_msg", "payload": {"type": ptype, "role": role, **fields}}


def _event(ptype: str, **fields: Any) -> dict[str, Any]:
    return {"type": "event_msg", "payload": {"type": ptype, **fields}}


META = {"type": "session_meta", "payload": {"session_id": "s", "provider": "p", "model_id": "m"}}


def test_each_record_gets_the_kind_both_readers_draw_it_as() -> None:
    items = _items(
        META,
        _msg("text", role="user", text="hi"),
        _event("request_begin"),
        _msg("thinking", thinking="hmm"),
        _msg("inline_thinking", data="hm"),
        _msg("tool_call", tool_call_id="c1", name="ls", arguments="{}"),
        _msg("image_url", role="user", image_url=PNG),
        _msg("inline_data", data="aGk=", mime_type="text/plain"),
        _msg("inline_data", data=PNG.partition(",")[2], mime_type="image/png"),
        _msg("partial_text"),
        _event("request_end", status="error", error_message="boom"),
        _event("request_begin"),
        _event("request_end", status="completed"),
        _event("token_usage"),
        META,
        {"type": "odd"},
    )
    kinds = [entry.kind for entry in build_render_items(items)]
    assert kinds == [
        "session", "text", "round_edge", "thinking", "thinking", "tool_call", "image",
        "inline_data", "image", "message", "request_failed", "round_edge", "round_edge",
        "event", "shard", "record",
    ]  # fmt: skip


def test_a_call_holds_its_approvals_and_output_and_they_are_folded_where_they_stand() -> None:
    items = _items(
        _msg("tool_call", tool_call_id="c1", name="shot"),
        _event("approval_decision", tool_call_id="c1", decision="allow"),
        _msg("tool_call_output", role="tool", tool_call_id="c1", output="ok", images=[PNG]),
        _msg("tool_call_output", role="tool", tool_call_id="c1", output="again"),
        _msg("tool_call", tool_call_id="c2"),
    )
    call, approval, output, second, lonely = build_render_items(items)
    assert call.approvals == (approval,)
    assert call.output is output
    assert [image.index for image in output.images] == [0]
    assert (approval.folded, output.folded) == (True, True)
    # Only the first output pairs; the second stands alone, and c2 has no answer at all.
    assert (second.kind, second.folded) == ("tool_output", False)
    assert (lonely.approvals, lonely.output) == ((), None)


def test_an_output_before_its_call_is_drawn_where_it_stands_and_in_the_call() -> None:
    items = _items(
        _msg("tool_call_output", role="tool", tool_call_id="c1", output="early"),
        _msg("tool_call", tool_call_id="c1"),
    )
    output, call = build_render_items(items)
    assert call.output is output
    assert not output.folded


def test_the_readers_payloads_decide_what_is_drawn() -> None:
    items = _items(_msg("image_url", role="user", image_url=PNG))
    assert build_render_items(items)[0].kind == "image"
    # The page passes redacted payloads: what they hold is what is classified.
    shown = build_render_items(items, [{"type": "image_url", "image_url": None}])
    assert shown[0].kind == "message"
    assert build_render_items(items, ["not a dict"])[0].payload == {}


def test_payload_values_read_as_text_the_same_way_everywhere() -> None:
    # As the JSON the trace holds, never a Python repr ("True", "['x']" before issue #31).
    assert [as_text(v) for v in ("a", None, 5, 1.5, True, ["x"], {"k": 1})] == [
        "a", "", "5", "1.5", "true", '["x"]', '{"k":1}',
    ]  # fmt: skip
    entry = build_render_items(_items(_msg("thinking", data=7)))[0]
    assert (entry.thinking, entry.text("missing")) == ("7", "")


class _Names:
    """A formatter that names the method it was asked for."""

    def __getattr__(self, name: str) -> Any:
        return lambda entry: f"{name}@{entry.position}"


def test_draw_asks_the_method_named_by_the_kind_and_nothing_for_a_round_edge() -> None:
    entries = build_render_items(
        _items(_event("request_begin"), _msg("text", text="t"), _event("request_end", status="x"))
    )
    drawn = [draw(entry, _Names()) for entry in entries]
    assert drawn == [None, "text@2", "request_failed@3"]


def test_every_kind_but_the_round_edge_is_a_formatter_method() -> None:
    methods = {name for name in dir(Formatter) if not name.startswith("_")}
    assert methods == set(get_args(ItemKind)) - {"round_edge"}


def test_a_session_meta_naming_another_model_inside_a_shard_is_a_model_change() -> None:
    """An imported session learns its model from its first answer (ADR 0094): inside a
    shard, a session_meta naming another model is an event, not a new context."""
    unknown = {"type": "session_meta", "payload": {"session_id": "s", "model_id": "unknown"}}
    items = _items(unknown, _msg("text", role="user", text="hi"), META, _event("request_begin"))

    kinds = [entry.kind for entry in build_render_items(items)]

    assert kinds == ["session", "text", "event", "round_edge"]
