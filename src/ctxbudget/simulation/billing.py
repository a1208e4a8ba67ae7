"""A fake Anthropic Messages upstream that bills and times like the provider, on a virtual clock.

It answers ``POST /v1/messages`` as an ``httpx`` transport (no socket), so the simulation can put
the real gateway in front of it. Caching follows Anthropic's published rules:

- a ``cache_control`` mark on a block caches the prefix up to and including it (tools, then
  system, then messages), if that prefix reaches the model's minimum cacheable length;
- a lookup from each breakpoint walks back at most 20 blocks for a prefix cached before; the
  longest one found is read (``cache_read_input_tokens``) and its lifetime refreshed;
- what lies between the read prefix and the last breakpoint is written
  (``cache_creation_input_tokens``, split by TTL in ``cache_creation``), each entry living 5
  minutes or 1 hour from its last use; the rest is ``input_tokens``.

Tokens are counted with ctxbudget's own count for the model (there is no local Claude tokenizer),
block by block as :func:`ctxbudget.conversation.count_block` does, so billed and predicted figures
differ only by what the cache does, not by counting.

Latency is a model, not a measurement (:class:`LatencyModel`): time to first token grows with the
input the provider must process (uncached and written tokens, and, far less, read ones), then a
fixed time per output token. The clock is virtual: the simulation moves it (idle gaps, think time,
the modelled latency), so expiry is deterministic.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..cache import LOOKBACK_BLOCKS, TTL_SECONDS
from ..catalog.values import CacheRules
from ..conversation import BLOCK_FRAMING_TOKENS, count_block, is_mark
from ..tokens.counter import TokenCounter

__all__ = ["Bill", "BillingUpstream", "LatencyModel"]


@dataclass(frozen=True, kw_only=True)
class LatencyModel:
    """Parameters of the modelled provider latency (milliseconds)."""

    base_ms: float = 600.0  # time to first token of a tiny prompt
    per_processed_token_ms: float = 0.06  # uncached and written input (about 16,700 tokens/s)
    per_read_token_ms: float = 0.006  # input read from the cache (ten times faster)
    per_output_token_ms: float = 12.0  # about 83 output tokens/s

    def first_token_ms(self, processed: int, read: int) -> float:
        """Time to first token for ``processed`` uncached or written and ``read`` cached tokens."""
        return self.base_ms + processed * self.per_processed_token_ms + read * self.per_read_token_ms

    def total_ms(self, processed: int, read: int, output: int) -> float:
        """Time to the last token."""
        return self.first_token_ms(processed, read) + output * self.per_output_token_ms


@dataclass(frozen=True, kw_only=True)
class Bill:
    """What one call was billed (the provider's usage fields) and how long it took (modelled)."""

    input_tokens: int
    cache_read_input_tokens: int
    cache_write_5m_tokens: int
    cache_write_1h_tokens: int
    output_tokens: int
    first_token_ms: float
    total_ms: float

    def usage(self) -> dict[str, Any]:
        """The ``usage`` object of a Messages response."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_write_5m_tokens + self.cache_write_1h_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.cache_write_5m_tokens,
                "ephemeral_1h_input_tokens": self.cache_write_1h_tokens,
            },
            "output_tokens": self.output_tokens,
        }


def _blocks(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Content blocks in the provider's caching order: tools, system, then each message's blocks
    (a string content is one text block)."""
    out: list[dict[str, Any]] = [dict(t) for t in body.get("tools") or [] if isinstance(t, Mapping)]
    system = body.get("system")
    if isinstance(system, str):
        out.append({"type": "text", "text": system})
    elif isinstance(system, list):
        out += [dict(b) for b in system if isinstance(b, Mapping)]
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        out += [{**dict(b), "_role": message.get("role")} for b in blocks if isinstance(b, Mapping)]
    return out


def _text(block: Mapping[str, Any]) -> str:
    if block.get("type") == "text":
        return str(block.get("text", ""))
    return json.dumps({k: v for k, v in block.items() if k not in ("cache_control", "_role")}, sort_keys=True)


def _ttl(block: Mapping[str, Any], body: Mapping[str, Any]) -> str:
    mark = block.get("cache_control") if is_mark(block.get("cache_control")) else body.get("cache_control")
    return "1h" if isinstance(mark, Mapping) and mark.get("ttl") == "1h" else "5m"


@dataclass
class BillingUpstream:
    """The fake provider: its cache (prefix hash -> expiry on the virtual clock), its bills."""

    counter: TokenCounter
    rules: CacheRules
    latency: LatencyModel = field(default_factory=LatencyModel)
    now: float = 0.0
    answer: str = ""
    bills: list[Bill] = field(default_factory=list)
    _cache: dict[str, tuple[float, str]] = field(default_factory=dict)

    def _prefixes(self, model: str, blocks: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[int]]:
        digest = hashlib.sha256(model.encode("utf-8"))
        hashes, tokens, running = [], [], 0
        for block in blocks:
            text = _text(block)
            digest.update(json.dumps([block.get("_role"), text]).encode("utf-8"))
            hashes.append(digest.copy().hexdigest())
            running += count_block(block, self.counter) + BLOCK_FRAMING_TOKENS
            tokens.append(running)
        return hashes, tokens

    def _alive(self, digest: str) -> bool:
        entry = self._cache.get(digest)
        return entry is not None and entry[0] >= self.now

    def bill(self, body: Mapping[str, Any]) -> Bill:
        """Bill one request and update the cache."""
        blocks = _blocks(body)
        hashes, tokens = self._prefixes(str(body.get("model", "")), blocks)
        total = tokens[-1] if tokens else 0
        marks = [i for i, b in enumerate(blocks) if is_mark(b.get("cache_control"))]
        if is_mark(body.get("cache_control")) and blocks and len(blocks) - 1 not in marks:
            marks.append(len(blocks) - 1)  # a top-level mark: the last block is marked
        marks = marks[: self.rules.max_breakpoints]
        read_at = -1
        for mark in marks:
            for j in range(mark, max(-1, mark - LOOKBACK_BLOCKS - 1), -1):
                if self._alive(hashes[j]):
                    read_at = max(read_at, j)
                    break
        read = tokens[read_at] if read_at >= 0 else 0
        if read_at >= 0:  # a hit refreshes the entry's lifetime
            ttl = self._cache[hashes[read_at]][1]
            self._cache[hashes[read_at]] = (self.now + TTL_SECONDS[ttl], ttl)
        writes = {"5m": 0, "1h": 0}
        covered = read
        for mark in marks:
            if tokens[mark] <= covered or tokens[mark] < self.rules.min_cacheable_tokens:
                continue
            ttl = _ttl(blocks[mark], body)
            writes[ttl] += tokens[mark] - covered
            covered = tokens[mark]
            self._cache[hashes[mark]] = (self.now + TTL_SECONDS[ttl], ttl)
        uncached = total - covered
        cap = body.get("max_tokens")
        output = self.counter.count(self.answer)
        output = (
            min(output, cap) if isinstance(cap, int) and cap > 0 else output
        )  # the reply stops at the cap
        processed = uncached + writes["5m"] + writes["1h"]
        bill = Bill(
            input_tokens=uncached,
            cache_read_input_tokens=read,
            cache_write_5m_tokens=writes["5m"],
            cache_write_1h_tokens=writes["1h"],
            output_tokens=output,
            first_token_ms=self.latency.first_token_ms(processed, read),
            total_ms=self.latency.total_ms(processed, read, output),
        )
        self.bills.append(bill)
        return bill

    def handle(self, request: httpx.Request) -> httpx.Response:
        """The Messages endpoint as an ``httpx.MockTransport`` handler."""
        if request.method != "POST" or not request.url.path.endswith("/v1/messages"):
            return httpx.Response(
                404, json={"type": "error", "error": {"type": "not_found_error", "message": "no route"}}
            )
        body = json.loads(request.content)
        bill = self.bill(body)
        return httpx.Response(
            200,
            json={
                "id": f"msg_sim_{len(self.bills):04d}",
                "type": "message",
                "role": "assistant",
                "model": body.get("model"),
                "content": [{"type": "text", "text": self.answer}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": bill.usage(),
            },
        )
