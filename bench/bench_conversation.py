"""A 30-turn conversation through the gateway, billed by a fake provider that caches as Anthropic
does (breakpoint prefixes, a 1,024-token minimum, a 20-block lookback), one strategy per row.

The conversation: a 3,900-token system prompt, user turns of about 900 tokens, answers of about
600; the client resends its whole history each turn and marks nothing. Each strategy is priced
with claude-sonnet-4-5's prices (input $3, cache write $3.75, cache read $0.30 per million):

- no breakpoints, no budget (the bodies as the client sends them, straight to the provider);
- the gateway without conversation caching (`serve --no-conversation-cache`: the system prompt's
  breakpoint only), under a 24,000-token budget;
- trimming to fit every turn (`--low-water 1`: the oldest messages go as soon as the history is
  over), with rolling breakpoints;
- ctxbudget's default: the history cut in steps to 2/3 of its budget and the cut held, with
  rolling breakpoints;
- rolling breakpoints with no budget at all (every turn sends the whole conversation).

Then the same conversation with a record of about 27,000 tokens pasted into its second question
(more than any cut of the 24,000-token budget keeps): trimmed to fit every turn, and ctxbudget's
default (the record cut down once, at a step, and held).

    python bench/bench_conversation.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
from benchcli import bench_parser

from ctxbudget.catalog.catalog import load_catalog
from ctxbudget.gateway import GatewayConfig, create_app
from ctxbudget.simulation.billing import Bill, BillingUpstream

MODEL = "claude-sonnet-4-5"
TURNS = 30
BUDGET = 24_000
WORDS = "The deposition covered the delivery schedule, the notice letter and exhibit EX-12 in detail. "
SYSTEM = "You are a careful legal assistant. " + WORDS * 230
QUESTION = WORDS * 53
ANSWER = WORDS * 35
RECORD = "12:04 A. The delivery was late, and the notice letter said so. " * 2000  # ~27,000 tokens


def _upstream() -> BillingUpstream:
    catalog = load_catalog()
    return BillingUpstream(
        counter=catalog.counter_for(MODEL), rules=catalog.get_model(MODEL).cache, answer=ANSWER
    )


def _body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 1024, "system": SYSTEM, "messages": list(messages)}


def direct() -> list[Bill]:
    """The client's bodies billed as sent: no breakpoints, no budget."""
    upstream, messages = _upstream(), []
    for n in range(1, TURNS + 1):
        messages.append({"role": "user", "content": f"Question {n}: {QUESTION}"})
        upstream.bill(_body(messages))
        messages.append({"role": "assistant", "content": ANSWER})
    return upstream.bills


def _question(n: int, pasted: bool) -> str:
    """Turn ``n``'s question (the second carries the record when ``pasted``)."""
    return f"Question {n}: {RECORD if pasted and n == 2 else ''}{QUESTION}"


def through_gateway(budget: int, pasted: bool = False, **config: Any) -> list[Bill]:
    """The conversation through the gateway (fit mode) with ``config`` (``pasted``: a record in
    the second question)."""
    upstream = _upstream()
    with tempfile.TemporaryDirectory() as folder:
        options = {"store_path": str(Path(folder) / "b.db"), "anthropic_upstream": "http://billing.invalid"}
        app = create_app(GatewayConfig(**options, **config), httpx.MockTransport(upstream.handle))
        headers = {"X-Ctxbudget-Session": "bench"}
        if budget:
            headers["X-Ctxbudget-Max-Context-Tokens"] = str(budget)

        async def run() -> None:
            messages: list[dict[str, Any]] = []
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gateway.local") as client:
                for n in range(1, TURNS + 1):
                    messages.append({"role": "user", "content": _question(n, pasted)})
                    response = await client.post("/v1/messages", json=_body(messages), headers=headers)
                    response.raise_for_status()
                    messages.append({"role": "assistant", "content": response.json()["content"][0]["text"]})

        asyncio.run(run())
        app.state.gateway.close()
    return upstream.bills


def figures(bills: list[Bill]) -> tuple[float, float, float]:
    """Share of turns 2-30's input read from the cache, input cost in USD, tokens a turn."""
    prices = load_catalog().get_model(MODEL).prices
    assert prices is not None and prices.cache_read is not None and prices.cache_write_5m is not None
    later = bills[1:]
    sent = [b.input_tokens + b.cache_read_input_tokens + b.cache_write_5m_tokens for b in later]
    cost = sum(
        b.input_tokens * prices.input
        + b.cache_read_input_tokens * prices.cache_read
        + b.cache_write_5m_tokens * prices.cache_write_5m
        for b in bills
    )
    return sum(b.cache_read_input_tokens for b in later) / sum(sent), cost / 1e6, sum(sent) / len(sent)


def main() -> None:
    bench_parser(__doc__).parse_args()
    rows = [
        ("no breakpoints, no budget", direct()),
        ("gateway, --no-conversation-cache, 24k", through_gateway(BUDGET, conversation_cache=False)),
        ("trim to fit every turn (--low-water 1), 24k", through_gateway(BUDGET, low_water=1.0)),
        ("ctxbudget default (steps to 2/3), 24k", through_gateway(BUDGET)),
        ("rolling breakpoints, no budget", through_gateway(0)),
    ]
    baseline = figures(rows[0][1])[1]
    print(
        f"{TURNS} turns, billed by a fake that caches like Anthropic (input only; claude-sonnet-4-5 prices)"
    )
    _table(rows, baseline)
    pasted = [
        ("trim to fit every turn (--low-water 1), 24k", through_gateway(BUDGET, True, low_water=1.0)),
        ("ctxbudget default (steps to 2/3), 24k", through_gateway(BUDGET, True)),
    ]
    print("the same, a ~27,000-token record pasted into the second question (x: the first table's none)")
    _table(pasted, baseline)


def _table(rows: list[tuple[str, list[Bill]]], baseline: float) -> None:
    print(f"{'strategy':46} {'read 2-30':>9} {'input $':>8} {'x none':>7} {'tokens/turn':>12}")
    for name, bills in rows:
        read, cost, tokens = figures(bills)
        print(f"{name:46} {read:9.1%} {cost:8.2f} {cost / baseline:7.2f} {tokens:12,.0f}")


if __name__ == "__main__":
    sys.exit(main())
