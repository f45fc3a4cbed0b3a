"""Recall and false-positive rate of the redaction policy, for ``docs/redaction.md``.

Run ``python -m benchmarks.redaction_quality``; it prints the Markdown tables
the document shows.  Recall: every credential of the provider corpus
(``tests/fixtures/redaction_providers.json``) and every positive of the older
corpus, each placed in user text, in JSON-encoded tool arguments and in tool
output, counts as found when its secret part is gone from the redacted JSON.
False positives: generated benign values (git SHAs, UUIDs, sha256 digests,
base64 image data, token counts, file paths, code, benign key names) and whole
realistic trace records (``benchmarks._corpus``) count as lost when redaction
changes them at all.  Deterministic for a seed.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from benchmarks._corpus import generate_records
from pentrace.domain.records import decode_line
from pentrace.domain.redaction import redact

_FIXTURES = Path(__file__).parent.parent / "tests" / "fixtures"
_CONTEXTS: dict[str, Callable[[str], Any]] = {
    "user text": lambda s: {"role": "user", "text": f"use this: {s} thanks"},
    "tool arguments": lambda s: {"arguments": json.dumps({"cmd": f"curl -d '{s}' https://x"})},
    "tool output": lambda s: {"output": f"line 1\n{s}\nline 3"},
}
_CODE = (
    "def count_tokens(text: str) -> int:\n    return len(tokenizer.encode(text))",
    "const session = await auth.getSession({ cache: true });",
    "if (user.isAuthenticated) { redirect(nextUrl); }",
    "for key, value in sorted(config.items()):\n    print(key, value)",
    "SELECT id, author FROM posts WHERE secretary_id = ? ORDER BY created_at",
    "passage = corpus.passages[index]  # the passage the reader sees",
)
_NAMES = (
    "secretary", "tokens", "token_usage", "max_tokens", "tokenizer", "primary_key", "author",
    "passage", "input_tokens", "cache_read_tokens", "output_tokens", "total_tokens", "keyboard",
    "token_type", "credential_id", "key_id", "session_id", "sort_key", "public_key", "bypass",
    "cookies_enabled", "cookie_domain", "jwt_required", "oauth_provider", "authored_by",
    "token_count", "keys",
)  # fmt: skip


def _encoded(value: Any) -> str:
    return msgspec.json.encode(value).decode("utf-8")


def _positives() -> Iterator[tuple[str, str, str]]:
    """``(provider, whole text, secret part)`` for both corpora."""
    providers = json.loads((_FIXTURES / "redaction_providers.json").read_text("utf-8"))
    for case in providers["cases"]:
        whole = "".join(case["parts"])
        part = case["parts"][case["secret_part"]] if "secret_part" in case else whole
        yield case["provider"], whole, part
    older = json.loads((_FIXTURES / "redaction_corpus.json").read_text("utf-8"))
    for case in older["positives"]:
        if case["kind"] == "value" and isinstance(case["input"], str):
            for secret in case["secrets"]:
                yield "older corpus (W12)", case["input"], secret


def recall() -> tuple[dict[str, list[int]], list[str]]:
    """Per provider ``[found, tried]``, and the misses (provider, context)."""
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    misses: list[str] = []
    for provider, whole, secret in _positives():
        for context, build in _CONTEXTS.items():
            found = secret not in _encoded(redact(build(whole)).value)
            table[provider][0] += found
            table[provider][1] += 1
            if not found:
                misses.append(f"{provider} in {context}")
    return table, misses


def benign(seed: int, count: int) -> dict[str, list[Any]]:
    """Generated benign values by category, ``count`` of each."""
    rng = random.Random(seed)
    hexdigits = "0123456789abcdef"
    return {
        "git SHAs": ["commit " + "".join(rng.choices(hexdigits, k=40)) for _ in range(count)],
        "UUIDs": [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(count)],
        "sha256 digests": [
            "sha256:" + hashlib.sha256(rng.randbytes(16)).hexdigest() for _ in range(count)
        ],
        "base64 image data": [
            "data:image/png;base64,"
            + base64.b64encode(rng.randbytes(rng.randint(60, 3000))).decode()
            for _ in range(count)
        ],
        "token counts": [
            {name: rng.randint(0, 200_000) for name in rng.sample(_NAMES[:12], 5)}
            for _ in range(count)
        ],
        "file paths": [
            f"/home/{rng.choice(('ada', 'dev'))}/src/{rng.choice(_NAMES)}/{rng.randint(1, 99)}.py"
            for _ in range(count)
        ],
        "code": [rng.choice(_CODE) for _ in range(count)],
        "benign key names": [{name: f"value {rng.randint(0, 9)}"} for name in _NAMES],
    }


def false_positives(seed: int, count: int, records: int) -> dict[str, tuple[int, int]]:
    """Per category ``(changed, tried)``."""
    out: dict[str, tuple[int, int]] = {}
    for category, values in benign(seed, count).items():
        changed = sum(redact(value).value != value for value in values)
        out[category] = (changed, len(values))
    decoded = map(decode_line, generate_records(records, seed))
    payloads = [record.payload() for record in decoded if record is not None]
    changed = sum(redact(payload).value != payload for payload in payloads if payload)
    out["realistic trace records"] = (changed, sum(1 for payload in payloads if payload))
    return out


def main(argv: list[str] | None = None) -> None:
    """Print the recall and false-positive tables as Markdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--count", type=int, default=1000, help="benign values per category")
    parser.add_argument("--records", type=int, default=20_000, help="realistic records")
    args = parser.parse_args(argv)
    table, misses = recall()
    found = sum(row[0] for row in table.values())
    tried = sum(row[1] for row in table.values())
    print(f"Recall: {found}/{tried} = {found / tried:.1%} (each credential in 3 places)\n")
    print("| provider | found | tried |\n| --- | ---: | ---: |")
    for provider, (hits, total) in sorted(table.items()):
        print(f"| {provider} | {hits} | {total} |")
    if misses:
        print("\nMissed: " + "; ".join(misses))
    rates = false_positives(args.seed, args.count, args.records)
    lost = sum(changed for changed, _ in rates.values())
    total = sum(tried for _, tried in rates.values())
    print(f"\nFalse positives: {lost}/{total} = {lost / total:.2%} of benign values changed\n")
    print("| benign data | changed | tried |\n| --- | ---: | ---: |")
    for category, (changed, tried) in rates.items():
        print(f"| {category} | {changed} | {tried} |")


if __name__ == "__main__":
    main()
