"""Percent-encoding of names, for stream slugs and session keys.

Every character outside a caller's safe set becomes the ``%XX`` escapes of its
UTF-8 bytes (lone surrogates included, through ``surrogatepass``), so two
different names never encode alike and none encodes to nothing.
"""

from __future__ import annotations

__all__ = ["percent_encode"]


def percent_encode(text: str, safe: frozenset[str]) -> str:
    """``text`` with every character not in ``safe`` replaced by its ``%XX`` escapes."""
    if all(char in safe for char in text):
        return text
    return "".join(
        char
        if char in safe
        else "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
        for char in text
    )
