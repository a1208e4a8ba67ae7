"""Turns are committed off the answer's path: answers never wait for the store, every answered
turn is still stored, in the order answered, and a shutting-down gateway commits what it accepted."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from ctxbudget.gateway.writer import TurnWriter
from ctxbudget.session import SQLiteStore

from .fake_upstream import anthropic_client, gateway_over_fake, openai_client


def test_the_writer_commits_in_the_order_handed_over_and_flush_waits_for_all() -> None:
    writer = TurnWriter()
    done: list[int] = []

    def commit(n: int) -> None:
        time.sleep(0.002 * (n % 3))  # uneven commits cannot overtake one another
        done.append(n)

    futures = [writer.submit(lambda n=n: commit(n)) for n in range(30)]
    writer.flush()
    assert done == list(range(30)) and all(f.done() for f in futures)
    writer.close()


def test_answers_arrive_while_the_store_is_locked_and_shutdown_commits_them(tmp_path: Path) -> None:
    """Another writer holds the store's lock while a session is answered three times (streamed and
    not): every answer arrives before any commit could happen; the lock is released only as the
    gateway shuts down, and the three turns are stored, numbered in the order answered."""
    store = tmp_path / "w.db"
    SQLiteStore(store).close()
    holder = sqlite3.connect(store, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    questions = ["first question", "second question", "third question"]
    with gateway_over_fake(store, store_busy_timeout_seconds=30) as (_, url):
        claude = anthropic_client(url, **{"X-Ctxbudget-Session": "w"})
        gpt = openai_client(url, **{"X-Ctxbudget-Session": "w"})
        reply = claude.messages.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": questions[0]}]
        )
        assert reply.content[0].text == "echo: first question"
        chunks = gpt.chat.completions.create(
            model="gpt-4o", stream=True, messages=[{"role": "user", "content": questions[1]}]
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).startswith("echo")
        gpt.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": questions[2]}])
        assert SQLiteStore(store).names() == []  # answered, nothing committed yet
        threading.Timer(0.3, lambda: holder.execute("COMMIT")).start()  # released during shutdown
    turns = SQLiteStore(store).turns("w")
    assert [(t.index, t.question) for t in turns] == list(enumerate(questions, 1))
    assert all(t.usage.get("actual") for t in turns)
