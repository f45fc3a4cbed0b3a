"""A realistic, deterministic trace corpus for benchmarks.

``generate_records(n, seed)`` yields ``n`` OmniMessage envelope lines (bytes,
without the newline) shaped like a real agent session: ``session_meta`` and
``tool_list_ready`` first, then requests made of user text, thinking with an
opaque fidelity signature, assistant text, tool calls with approvals and tool
outputs of very different sizes (a few bytes up to the 16,000-character cap),
``request_end`` and ``token_usage``.  Some text is non-ASCII.  About 200k
records make a file of about 77 MB, the size DESIGN.md's floor figures use.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["generate_records", "write_trace"]

_WORDS = (
    *("the", "file", "config", "test", "build", "error", "module", "function", "return"),
    *("value", "agent", "session", "trace", "request", "tool", "output", "python", "import"),
    *("class", "def", "self", "path", "line", "read", "write", "update", "check", "run"),
    *("install", "package", "version", "result", "status", "commit", "branch", "merge"),
)
_NON_ASCII = ("naïve café", "日本語のテキスト", "emoji ✅ 🚀", "Grüße", "привет мир")
_CODE = (
    '    if {0} == "{1}":',
    "\tself.{0} = {0}_{1}  # type: ignore",
    '        raise ValueError(f"bad {0}: {{value!r}}")',
    "C:\\Users\\dev\\{0}\\file_{1}.py:12: warning",
    '  File "/usr/lib/python3.11/{0}.py", line {1}, in <module>',
    '{{"{0}": {1}, "ok": true}}',
    "-rw-r--r-- 1 u u {1} Jul 18 11:10 {0}.txt",
)
_TOOLS = ("exec_command", "read_file", "write_file", "search", "list_dir")
_OUTPUT_CAP = 16000
_encode = msgspec.json.encode


def _text(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choices(_WORDS, k=words))
    if rng.random() < 0.08:
        text += " " + rng.choice(_NON_ASCII)
    return text


def _output(rng: random.Random) -> str:
    # Tool output sizes are heavy-tailed: mostly small, sometimes near the cap.
    size = min(int(rng.lognormvariate(6.15, 1.3)), _OUTPUT_CAP)
    lines: list[str] = []
    total = 0
    while total < size:
        # Real tool output is largely source code and logs: indentation, quotes, backslashes.
        if rng.random() < 0.5:
            line = rng.choice(_CODE).format(rng.choice(_WORDS), rng.randint(0, 999))
        else:
            line = _text(rng, rng.randint(3, 14))
        lines.append(line)
        total += len(line) + 1
    text = "\n".join(lines)[:size]
    if size == _OUTPUT_CAP:
        text += "\n[output truncated: exceeded 16000 chars]"
    return text


def _envelope(when: datetime, kind: str, payload: dict[str, Any]) -> bytes:
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    return _encode({"timestamp": stamp, "type": kind, "payload": payload})


def _request(rng: random.Random, call_no: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """The (type, payload) pairs of one request, in trace order."""
    yield "model_msg", {"type": "text", "role": "user", "text": _text(rng, rng.randint(4, 40))}
    yield "event_msg", {"type": "request_begin"}
    if rng.random() < 0.6:
        signature = base64.b64encode(rng.randbytes(rng.randint(48, 400))).decode()
        yield (
            "model_msg",
            {
                "type": "thinking",
                "role": "assistant",
                "thinking": _text(rng, rng.randint(10, 80)),
                "fidelity": {"signature": signature},
            },
        )
    for _ in range(rng.choice((0, 1, 1, 2, 3))):
        call_id = f"call_{call_no}"
        call_no += 1
        tool = rng.choice(_TOOLS)
        arguments = _encode({"cmd": _text(rng, rng.randint(2, 12))}).decode()
        yield (
            "model_msg",
            {
                "type": "tool_call",
                "role": "assistant",
                "name": tool,
                "arguments": arguments,
                "tool_call_id": call_id,
            },
        )
        approval = {"type": "approval_decision", "decision": "allow", "tool_call_id": call_id}
        yield "event_msg", approval
        output = {"type": "tool_call_output", "role": "user", "output": _output(rng)}
        yield "model_msg", {**output, "tool_call_id": call_id}
    reply = {"type": "text", "role": "assistant", "text": _text(rng, rng.randint(5, 60))}
    yield "model_msg", reply
    status = "failed" if rng.random() < 0.1 else "completed"
    yield "event_msg", {"type": "request_end", "status": status}
    used = rng.randint(500, 9000)
    counts = {"cache_read": used // 2, "cache_write": used // 4, "output": used // 8, "total": used}
    yield "event_msg", {"type": "token_usage", "session": counts, "request": counts}


def generate_records(n: int, seed: int = 0) -> Iterator[bytes]:
    """Yield ``n`` realistic trace lines (JSON envelopes, no newline), the same for a seed."""
    rng = random.Random(seed)
    when = datetime(2026, 7, 18, 3, 10, 22, tzinfo=UTC)
    session_id = f"session-2026-07-18-11-10-22-{rng.getrandbits(32):08x}"
    head: list[tuple[str, dict[str, Any]]] = [
        (
            "session_meta",
            {
                "session_id": session_id,
                "provider": "deepseek",
                "model_id": "deepseek-v4-pro",
                "model_context_window": 1000000,
                "system_prompt": _text(rng, 300),
                "agent_state": "/home/u/.penguin/data/proj/agents/agent/agent_state",
                "workspace": "/home/u/work",
            },
        ),
        (
            "event_msg",
            {
                "type": "tool_list_ready",
                "tools": [{"name": t, "description": _text(rng, 20)} for t in _TOOLS],
            },
        ),
    ]
    produced = 0
    call_no = 0
    while produced < n:
        batch = head if produced == 0 else list(_request(rng, call_no))
        call_no += len(batch)
        for kind, payload in batch:
            if produced >= n:
                return
            when += timedelta(milliseconds=rng.randint(5, 4000))
            yield _envelope(when, kind, payload)
            produced += 1


def write_trace(path: Path, n: int, seed: int = 0) -> int:
    """Write ``n`` generated records to ``path`` as JSONL; return the number of bytes written."""
    written = 0
    with path.open("wb") as out:
        for line in generate_records(n, seed):
            written += out.write(line + b"\n")
    return written
