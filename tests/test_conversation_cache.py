"""Cache-aware conversations: histories cut in steps that later turns hold, rolling breakpoints,
and a 30-turn conversation through the gateway billed by a fake that caches like the provider."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from ctxbudget.catalog.catalog import load_catalog
from ctxbudget.gateway import GatewayConfig, create_app
from ctxbudget.simulation.billing import BillingUpstream

MODEL = "claude-sonnet-4-5"
WORDS = "The deposition covered the delivery schedule, the notice letter and exhibit EX-12 in detail. "
SYSTEM = "You are a careful legal assistant. " + WORDS * 230  # about 3,900 tokens
QUESTION = WORDS * 53  # about 900 tokens
ANSWER = WORDS * 35  # about 600 tokens


def converse(
    tmp_path: Path, turns: int, budget: int, **config: Any
) -> tuple[BillingUpstream, list[httpx.Response]]:
    """``turns`` turns of one conversation through the gateway (fit mode, a ``budget``-token
    window), the client resending its whole history each turn and marking nothing."""
    catalog = load_catalog()
    upstream = BillingUpstream(
        counter=catalog.counter_for(MODEL), rules=catalog.get_model(MODEL).cache, answer=ANSWER
    )
    options = {"store_path": str(tmp_path / "c.db"), "anthropic_upstream": "http://billing.invalid", **config}
    app = create_app(GatewayConfig(**options), httpx.MockTransport(upstream.handle))

    async def run() -> list[httpx.Response]:
        answers = []
        messages: list[dict[str, Any]] = []
        headers = {"X-Ctxbudget-Session": "talk", "X-Ctxbudget-Max-Context-Tokens": str(budget)}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway.local") as client:
            for n in range(1, turns + 1):
                messages.append({"role": "user", "content": f"Question {n}: {QUESTION}"})
                body = {"model": MODEL, "max_tokens": 1024, "system": SYSTEM, "messages": messages}
                response = await client.post("/v1/messages", json=body, headers=headers)
                assert response.status_code == 200, response.text
                answers.append(response)
                messages.append({"role": "assistant", "content": response.json()["content"][0]["text"]})
        app.state.gateway.close()
        return answers

    return upstream, asyncio.run(run())


def read_share(upstream: BillingUpstream, first: int = 1) -> float:
    bills = upstream.bills[first:]
    read = sum(b.cache_read_input_tokens for b in bills)
    return read / sum(b.input_tokens + b.cache_read_input_tokens + b.cache_write_5m_tokens for b in bills)


def test_thirty_turns_under_a_budget_read_most_of_their_input_from_the_cache(tmp_path: Path) -> None:
    upstream, answers = converse(tmp_path, 30, 24_000)
    assert all(int(a.headers["x-ctxbudget-tokens-after"]) <= 24_000 - 1024 for a in answers)
    assert read_share(upstream) >= 0.80  # turns 2-30
    # what each turn was told it would read and write is what it was billed
    for answer, bill in zip(answers, upstream.bills, strict=True):
        predicted = int(answer.headers["x-ctxbudget-cache-read-predicted"])
        assert abs(predicted - bill.cache_read_input_tokens) <= 0.01 * max(1, bill.cache_read_input_tokens)
        written = int(answer.headers["x-ctxbudget-cache-write-predicted"])
        assert abs(written - bill.cache_write_5m_tokens) <= 0.01 * max(1, bill.cache_write_5m_tokens)


def test_without_conversation_caching_the_same_turns_read_little(tmp_path: Path) -> None:
    upstream, answers = converse(tmp_path, 12, 24_000, conversation_cache=False)
    assert read_share(upstream) < 0.5
    assert "x-ctxbudget-cache-read-predicted" not in answers[-1].headers
