"""The cold analytics build (``infrastructure/analytics/cold/``, the fast path) leaves exactly the
read models its reference leaves: the projection runner catching up from a ledger synced from the
same traces.  Generated data roots (hypothesis) with hostile values: secrets where names go, lone
surrogates in tool names, arguments, call ids and texts, odd timestamps and counts, blank, ``{}``
and foreign lines, torn tails.  Every built-in projection, SQLite read models.

After the cold build, the same database caught up from the ledger must not change (each record
counted once: the trace marks of ADR 0050).  Some drawn records the mapping cannot take (the
failure a lone surrogate in a tool call's arguments was): the cold build leaves each out as one
finding and goes on with the session, as the ledger leaves a gap there (ADR 0102)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pentrace.domain.runtime import SessionEvents
from pentrace.errors import LedgerError
from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.builtin.sessions import SessionActivity
from pentrace.infrastructure.analytics.builtin.tokens import TokenUse
from pentrace.infrastructure.analytics.builtin.tools import ToolCalls
from pentrace.infrastructure.analytics.cold import cold_build
from pentrace.infrastructure.analytics.examples import dump
from pentrace.infrastructure.analytics.runner import catch_up
from pentrace.infrastructure.ledger.rows import MAPPING_ERRORS, encoded_row
from pentrace.infrastructure.storage.layout import iter_sessions
from pentrace.infrastructure.trace.reader import read_session
from pentrace.testing.files import write_shards
from tests.integration.ledger_backends import mapping_fails_for
from tests.integration.test_analytics_bulk_fold import _record as token_record
from tests.property.test_event_mapping_header import SECRETS
from tests.support import sync_ledger

BUILTINS: tuple[type[AnalyticsProjection], ...] = (TokenUse, ToolCalls, SessionActivity)
_STAMPS = ("2026-11-30T08:00:01.250Z", "2026-12-01T01:30:00+02:00", "nonsense", None)
_odd = st.sampled_from(
    ["read_file", "\udc00", "x\ud800y", SECRETS[0], "", "exec_command", "\x00nul"]
)
_values = _odd | st.none() | st.integers(-2, 2) | st.just(["list"]) | st.just({"k": "\udc00"})


@st.composite
def _activity_record(draw: st.DrawFn) -> bytes:
    """A record the tools and sessions projections read, its fields hostile."""
    stamp = draw(st.sampled_from(_STAMPS))
    value: dict[str, Any] = {} if stamp is None else {"timestamp": stamp}
    kind = draw(st.sampled_from(["call", "output", "approval", "end", "compact", "goal", "sub"]))
    call_id = draw(st.sampled_from(["c1", "c2", "\udc00", "c1"]) | _values)
    if kind == "call":
        payload: dict[str, Any] = {
            "type": "tool_call",
            "role": "assistant",
            "name": draw(_values),
            "arguments": draw(st.sampled_from(['{"k":"\\udc00"}', "{}", "not json"]) | _values),
            "tool_call_id": call_id,
        }
        value.update(type="model_msg", payload=payload)
    elif kind == "output":
        payload = {"type": "tool_call_output", "role": "user", "tool_call_id": call_id}
        payload["output"] = draw(_values)
        if draw(st.booleans()):
            payload["stop_reason"] = draw(st.sampled_from(["failed", "aborted", "timeout"]))
        value.update(type="model_msg", payload=payload)
    elif kind == "approval":
        decision = draw(st.sampled_from(["allow", "deny", "forbidden"]) | _values)
        payload = {"type": "approval_decision", "tool_call_id": call_id, "decision": decision}
        value.update(type="event_msg", payload=payload)
    elif kind == "end":
        status = draw(st.sampled_from(["completed", "failed", "aborted"]) | _values)
        attempt = draw(st.none() | st.integers(0, 3) | st.just(True))
        value.update(
            type="event_msg", payload={"type": "request_end", "status": status, "attempt": attempt}
        )
    elif kind == "compact":
        which = draw(st.sampled_from(["compaction_begin", "compaction_end"]))
        payload = {"type": which, "mode": draw(_values), "status": draw(_values)}
        payload["context"] = draw(st.integers(-1, 10**6) | st.just(2**70) | _values)
        value.update(type="event_msg", payload=payload)
    elif kind == "goal":
        value.update(type="event_msg", payload={"type": "goal_finished", "outcome": draw(_values)})
    else:
        payload = {"type": "subagent", "child_session_id": draw(_values)}
        value.update(type="event_msg", payload=payload)
    # ASCII JSON: a lone surrogate is written as its escape, as other writers do.
    return json.dumps(value, separators=(",", ":")).encode()


_lines = st.lists(
    token_record(0) | _activity_record() | st.sampled_from([b"", b"{}", b"[]", b"null"]),
    max_size=16,
)
_layouts = st.lists(
    st.tuples(
        st.sampled_from(["acme", "token"]),
        st.sampled_from(["coder", "password", f"a-{SECRETS[2]}"]),
        st.sampled_from(["s1", "s2"]),
        _lines,
        st.booleans(),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda item: item[:3],
)


def _dumps(root: Path, env: dict[str, str]) -> dict[str, Any]:
    return {each.name: dump(each, root, env) for each in BUILTINS}


def _refused(root: Path) -> set[tuple[str, str, str, int]]:
    """The records the ledger's exact path refuses: (project, agent, session, position)."""
    found = set()
    for ref in iter_sessions(root):
        mapper = SessionEvents(ref.key)
        for position, record in enumerate(read_session(ref.shards), start=1):
            try:
                encoded_row(mapper.encoded(position, record), 0)
            except (LedgerError, *MAPPING_ERRORS):
                found.add((*ref.key, position))
    return found


def test_a_cold_build_equals_the_runner_over_the_ledger(tmp_path: Path) -> None:
    count = iter(range(1_000_000))

    @settings(
        max_examples=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        layout=_layouts,
        failing=st.sets(st.sampled_from(["s1", "s2"]), max_size=2),
        at=st.integers(1, 12),
    )
    def check(
        layout: list[tuple[str, str, str, list[bytes], bool]], failing: set[str], at: int
    ) -> None:
        with patch.object(SessionEvents, "screened", mapping_fails_for({(s, at) for s in failing})):
            compare(layout, failing, at)

    def compare(
        layout: list[tuple[str, str, str, list[bytes], bool]], failing: set[str], at: int
    ) -> None:
        root = tmp_path / f"root-{next(count)}"
        for project, agent, session_id, lines, torn in layout:
            [path] = write_shards(root, project, agent, session_id, [lines])
            if torn:
                with path.open("ab") as handle:
                    handle.write(b'{"timestamp":"2026-11-30T08:00:00Z","type":"event_msg","pa')
        refused = _refused(root)
        cold_env = {"PENTRACE_ANALYTICS_URL": f"sqlite:///{root / 'cold.db'}"}
        reference = {"PENTRACE_ANALYTICS_URL": f"sqlite:///{root / 'runner.db'}"}
        for each in BUILTINS:
            report = cold_build(each, data_root=root, env=cold_env)
            assert report is not None
            for finding in report.failures:  # one per record left out, naming it
                assert (finding.project, finding.agent, finding.session_id, finding.position) in (
                    refused
                )
                assert finding.path is not None
                assert finding.line is not None
        cold = _dumps(root, cold_env)
        sync_ledger(root, reference)
        for each in BUILTINS:
            catch_up(each, data_root=root, env=reference)
            catch_up(each, data_root=root, env=cold_env)  # the marks: nothing counted twice
        assert _dumps(root, reference) == cold
        assert _dumps(root, cold_env) == cold

    check()
