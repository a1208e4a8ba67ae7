"""Three gateway replicas (separate `ctxbudget serve` processes) on one PostgreSQL store: 30 policy-mode
sessions of 6 turns, each turn sent to the next replica, one replica killed (SIGKILL) half-way.
Every answered turn is stored once, in order, and the cache reads each turn was predicted are the
ones a single replica predicts for the same conversations."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from typing import Any

import anthropic
import httpx

from ctxbudget.session import connect_store

from .fake_upstream import FAKE_MODELS, FakeUpstream, Served, free_port

SESSIONS = 30
TURNS = 6
SYSTEM = "You review leases for a careful legal team; answer from the record. " * 150


@contextmanager
def replica(store: str, upstream: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """One `ctxbudget serve` process on a free loopback port: (its URL, the process)."""
    port = free_port()
    command = [sys.executable, "-m", "ctxbudget", "serve", "--port", str(port), "--store", store]
    command += ["--anthropic-upstream", upstream, "--policy", "legal-review", "--catalog", str(FAKE_MODELS)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_healthy(url, process)
        yield url, process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=20)
        assert process.stderr is not None
        process.stderr.close()


def _wait_until_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            assert process.stderr is not None
            raise AssertionError(f"replica exited: {process.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"replica at {url} never became healthy")


def _turn(url: str, session: int, messages: list[dict[str, Any]]) -> str:
    client = anthropic.Anthropic(
        base_url=url,
        api_key="k",
        max_retries=0,
        default_headers={"X-Ctxbudget-Session": f"s{session}"},
    )
    with client:
        reply = client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=50,
            system=SYSTEM,
            messages=messages,  # type: ignore[arg-type]
        )
    return reply.content[0].text  # type: ignore[union-attr]


def _conversations(
    urls: list[str], alive: list[bool], halfway: threading.Barrier | None
) -> dict[int, list[str]]:
    """Drive every session (ten at a time); turn t of session s goes to replica (s + t) mod n, or
    the next live one. Returns each session's questions as answered."""
    answered: dict[int, list[str]] = {}

    def run(session: int) -> None:
        messages: list[dict[str, Any]] = []
        answered[session] = []
        for turn in range(TURNS):
            if halfway is not None and turn == TURNS // 2:
                halfway.wait()
            question = f"Session {session}, question {turn}: which clause governs notice?"
            messages.append({"role": "user", "content": question})
            start = (session + turn) % len(urls)
            url = next(
                urls[(start + k) % len(urls)] for k in range(len(urls)) if alive[(start + k) % len(urls)]
            )
            messages.append({"role": "assistant", "content": _turn(url, session, messages)})
            answered[session].append(question)

    with ThreadPoolExecutor(max_workers=10) as pool:
        list(pool.map(run, range(SESSIONS)))
    return answered


def _stored(store: str) -> dict[int, list[tuple[int, str, int]]]:
    """Each session's stored turns: (index, question, predicted cache-read tokens)."""
    opened = connect_store(store, mode="read")
    try:
        return {
            n: [(t.index, t.question, int(t.report["cache"]["read_tokens"])) for t in opened.turns(f"s{n}")]
            for n in range(SESSIONS)
        }
    finally:
        opened.close()


def test_three_replicas_one_killed_store_each_answered_turn_once_in_order(postgres_server: Any) -> None:
    fake = FakeUpstream()
    shared, alone = postgres_server.database(), postgres_server.database()
    with Served(fake.app) as upstream, ExitStack() as stack:
        replicas = [stack.enter_context(replica(shared, upstream.url)) for _ in range(3)]
        urls = [url for url, _ in replicas]
        alive = [True, True, True]
        # Ten sessions run at once, so the barrier trips for each ten; the second time is half-way.
        trips = iter(range(SESSIONS // 10))
        halfway = threading.Barrier(10, action=lambda: next(trips) == 1 and _kill(replicas[1][1], alive, 1))
        answered = _conversations(urls, alive, halfway)
        single_url, _ = stack.enter_context(replica(alone, upstream.url))
        _conversations([single_url], [True], None)
    stored, single = _stored(shared), _stored(alone)
    assert not alive[1]
    for n in range(SESSIONS):
        assert [(i, q) for i, q, _ in stored[n]] == list(enumerate(answered[n], 1))
    assert sum(len(turns) for turns in stored.values()) == SESSIONS * TURNS
    assert stored == single  # the same predicted cache reads as one replica's
    assert any(read > 0 for turns in stored.values() for _, _, read in turns[1:])


def _kill(process: subprocess.Popen[bytes], alive: list[bool], index: int) -> None:
    """SIGKILL replica ``index``; from now on its turns go to the next live replica."""
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=20)
    alive[index] = False
