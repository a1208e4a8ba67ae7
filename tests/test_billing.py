"""The billing upstream caches like the provider: minimum length, 20-block lookback, TTLs."""

from __future__ import annotations

import json
from typing import Any

import httpx

from ctxbudget.catalog.values import CacheRules
from ctxbudget.simulation.billing import BillingUpstream, LatencyModel
from ctxbudget.tokens.counter import TokenCounter
from ctxbudget.tokens.registry import get_encoding

RULES = CacheRules(mode="explicit", min_cacheable_tokens=1024, max_breakpoints=4)
WORDS = "alpha beta gamma delta " * 300  # about 1,200 tokens


def _upstream() -> BillingUpstream:
    counter = TokenCounter(get_encoding("o200k_base"), True, 1.0)
    return BillingUpstream(counter=counter, rules=RULES, latency=LatencyModel())


def _body(system_ttl: str = "1h", turns: int = 1, mark_last: bool = True) -> dict[str, Any]:
    mark: dict[str, str] = {"type": "ephemeral", "ttl": "1h"} if system_ttl == "1h" else {"type": "ephemeral"}
    messages = []
    for n in range(turns):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"question {n} " + WORDS}]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {n}"}]})
    messages.append({"role": "user", "content": [{"type": "text", "text": "last question"}]})
    if mark_last:
        messages[-2]["content"][0]["cache_control"] = {"type": "ephemeral"}
    return {
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": WORDS, "cache_control": mark}],
        "messages": messages,
    }


def test_writes_then_reads_and_splits_the_ttls() -> None:
    upstream = _upstream()
    first = upstream.bill(_body())
    assert first.cache_read_input_tokens == 0 and first.cache_write_1h_tokens > 1024
    assert first.cache_write_5m_tokens > 1024 and first.input_tokens > 0
    upstream.now += 60
    second = upstream.bill(_body(turns=2))
    assert second.cache_read_input_tokens == first.cache_write_1h_tokens + first.cache_write_5m_tokens
    assert second.cache_write_1h_tokens == 0


def test_entries_expire_by_their_ttl_from_their_last_use() -> None:
    upstream = _upstream()
    written = upstream.bill(_body())
    upstream.now += 20 * 60  # the 5-minute entry is gone, the hour's lives
    after_gap = upstream.bill(_body())
    assert after_gap.cache_read_input_tokens == written.cache_write_1h_tokens
    upstream.now += 61 * 60
    assert upstream.bill(_body()).cache_read_input_tokens == 0


def test_prefixes_below_the_minimum_are_not_cached() -> None:
    upstream = _upstream()
    body = {
        "model": "m",
        "system": [{"type": "text", "text": "short", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert upstream.bill(body).cache_write_5m_tokens == 0
    assert upstream.bill(body).cache_read_input_tokens == 0


def test_the_lookback_stops_after_20_blocks() -> None:
    def read_from_system(turns: int) -> int:
        upstream = _upstream()
        upstream.bill(_body(system_ttl="5m", turns=1, mark_last=False))  # caches the system block
        later = _body(system_ttl="5m", turns=turns)
        later["system"][0].pop("cache_control")  # only the conversation's mark is left
        return upstream.bill(later).cache_read_input_tokens

    assert read_from_system(9) > 1024  # the mark sits 18 blocks after the system block
    assert read_from_system(12) == 0  # 24 blocks: beyond the lookback


def test_it_answers_the_messages_api_with_usage() -> None:
    upstream = _upstream()
    upstream.answer = "Therefore notice was given."
    client = httpx.Client(transport=httpx.MockTransport(upstream.handle), base_url="http://up")
    response = client.post("/v1/messages", json=_body())
    usage = response.json()["usage"]
    assert set(usage) >= {
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "cache_creation",
    }
    assert response.json()["content"][0]["text"] == upstream.answer
    assert client.post("/v1/other", content=json.dumps({})).status_code == 404


def test_the_reply_is_billed_up_to_max_tokens() -> None:
    upstream = _upstream()
    upstream.answer = "word " * 500
    body = _body()
    body["max_tokens"] = 50
    assert upstream.bill(body).output_tokens == 50
