"""A bounded load test on loopback: 50 concurrent sessions, 300 requests, nothing lost."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

from ctxbudget.session import SQLiteStore

from .fake_upstream import gateway_over_fake

SESSIONS = 50
TURNS = 6


async def _session(client: httpx.AsyncClient, url: str, n: int) -> list[bool]:
    ok = []
    messages: list[dict[str, str]] = []
    for turn in range(TURNS):
        messages.append({"role": "user", "content": f"session {n} turn {turn}"})
        body = {"model": "gpt-4o", "messages": messages}
        response = await client.post(
            url + "/v1/chat/completions",
            json=body,
            headers={"x-ctxbudget-session": f"load-{n}", "authorization": "Bearer k"},
        )
        text = response.json()["choices"][0]["message"]["content"] if response.status_code == 200 else ""
        ok.append(text == f"echo: session {n} turn {turn}")
        messages.append({"role": "assistant", "content": text})
    return ok


def test_fifty_concurrent_sessions_lose_nothing(tmp_path: Path) -> None:
    store = tmp_path / "load.db"
    with gateway_over_fake(store) as (_, url):

        async def run() -> list[list[bool]]:
            limits = httpx.Limits(max_connections=SESSIONS)
            async with httpx.AsyncClient(timeout=30, limits=limits) as client:
                return await asyncio.wait_for(
                    asyncio.gather(*(_session(client, url, n) for n in range(SESSIONS))),
                    timeout=120,
                )

        started = time.monotonic()
        results = asyncio.run(run())
        assert time.monotonic() - started < 120
    assert all(all(r) for r in results)
    reopened = SQLiteStore(store)
    assert len([n for n in reopened.names() if n.startswith("load-")]) == SESSIONS
    for n in range(SESSIONS):
        turns = reopened.turns(f"load-{n}")
        assert [t.index for t in turns] == list(range(1, TURNS + 1))
        assert [t.question for t in turns] == [f"session {n} turn {k}" for k in range(TURNS)]
