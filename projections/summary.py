"""Compaction summary extraction, as PenguinHarness resume rebuilds it.

When a trace ends with a completed ``summarize`` compaction, resume does not
replay the file: it rebuilds the summary the model wrote and hands it to the
next run as a ``[context_summary]`` user text.  The functions here are the pure
string work behind that (see ``docs/resume.md``); the fold decides when they
apply.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any, Final

from pentrace.domain.records import JS_WHITESPACE, TraceRecord

__all__ = [
    "CONTEXT_SUMMARY_CLOSE",
    "CONTEXT_SUMMARY_OPEN",
    "context_summary_text",
    "extract_summary",
    "js_string",
    "js_truthy",
    "request_text",
]

CONTEXT_SUMMARY_OPEN: Final = "[context_summary]"
CONTEXT_SUMMARY_CLOSE: Final = "[/context_summary]"

# Non-greedy blocks across lines; the square form is current, the angle form legacy.
_SQUARE_BLOCK: Final = re.compile(r"\[summary\](.*?)\[/summary\]", re.DOTALL)
_ANGLE_BLOCK: Final = re.compile(r"<summary>(.*?)</summary>", re.DOTALL)
_SQUARE_TAG: Final = re.compile(r"\[/?summary\]")
_ANGLE_TAG: Final = re.compile(r"</?summary>")


def js_truthy(value: Any) -> bool:
    """Truthiness as JavaScript sees a JSON value: ``{}`` and ``[]`` are true, ``NaN`` false."""
    if value is None or value is False:
        return False
    if isinstance(value, str):
        return value != ""
    if isinstance(value, int | float):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    return True


def js_string(value: Any) -> str:
    """The string JavaScript's ``+`` concatenation makes of a JSON value.

    Only reached for text payloads that are not strings (never written by
    PenguinHarness); numbers use Python's shortest repr, which agrees with
    JavaScript except for exponents below ``1e-6``.
    """
    if isinstance(value, str):
        return value
    if value is True or value is False:
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    if isinstance(value, list):
        return ",".join("" if item is None else js_string(item) for item in value)
    return "[object Object]"


def _strip_lone_tags(text: str) -> str:
    return _ANGLE_TAG.sub("", _SQUARE_TAG.sub("", text))


def extract_summary(text: str) -> str:
    """The summary inside a compaction reply, or ``""`` when there is none.

    1. The first ``[summary]...[/summary]`` block (non-greedy) whose inside,
       with stray summary tags of either form removed and JS-trimmed, is not
       empty.
    2. Otherwise the same over ``<summary>...</summary>``: the square form
       wins even when an angle block comes first.
    3. Otherwise the whole text with square blocks, lone square tags, angle
       blocks and lone angle tags removed, in that order, then trimmed - which
       covers untagged replies and a body written after an empty block.
    """
    for pattern in (_SQUARE_BLOCK, _ANGLE_BLOCK):
        for match in pattern.finditer(text):
            inside = _strip_lone_tags(match.group(1)).strip(JS_WHITESPACE)
            if inside:
                return inside
    rest = _SQUARE_BLOCK.sub("", text)
    rest = _SQUARE_TAG.sub("", rest)
    rest = _ANGLE_BLOCK.sub("", rest)
    rest = _ANGLE_TAG.sub("", rest)
    return rest.strip(JS_WHITESPACE)


def context_summary_text(summary: str) -> str:
    """Wrap a summary the way it is fed to the next context."""
    return f"{CONTEXT_SUMMARY_OPEN}\n{summary}\n{CONTEXT_SUMMARY_CLOSE}"


def request_text(outputs: Iterable[TraceRecord]) -> str:
    """The assistant text of one request: truthy ``text`` of assistant ``text`` messages.

    Only these few records are decoded; everything else is judged by its header.
    """
    parts: list[str] = []
    for record in outputs:
        if record.ptype == "text" and record.role == "assistant":
            text = record.payload().get("text")
            if js_truthy(text):
                parts.append(js_string(text))
    return "".join(parts)
