"""Turns are committed by one writer thread, off the event loop: a client gets its answer only once
the turn is stored, in the order answered; a store that cannot take a turn withholds the answer
(503), refuses the next requests before anything is sent, and is reported by /healthz and
/metrics until it serves again."""

from __future__ import annotations

import re
import sqlite3
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from ctxbudget.errors import StoreError, StoreUnavailable
from ctxbudget.gateway.writer import TurnWriter
from ctxbudget.session import SQLiteStore

from .fake_upstream import anthropic_client, gateway_over_fake, openai_client


def test_the_writer_commits_in_the_order_handed_over_and_flush_waits_for_all() -> None:
    writer = TurnWriter()
    done: list[int] = []

    def commit(n: int) -> None:
        time.sleep(0.002 * (n % 3))  # uneven commits cannot overtake one another
        done.append(n)

    futures = [writer.submit("one session", lambda n=n: commit(n)) for n in range(30)]
    writer.flush()
    assert done == list(range(30)) and all(f.done() for f in futures)
    writer.close()


def test_a_session_whose_commit_waits_holds_up_only_its_own_lane() -> None:
    """One session's commit blocks (its lock held elsewhere): the other sessions' commits, on
    other lanes, are done meanwhile; flush waits for the blocked one too."""
    writer = TurnWriter(lanes=4)
    release = threading.Event()
    blocked = writer.submit("victim", release.wait)
    lane_of = {key: zlib.crc32(key.encode()) % 4 for key in (f"s{n}" for n in range(40))}
    victim_lane = zlib.crc32(b"victim") % 4
    others = [writer.submit(key, lambda: True) for key, lane in lane_of.items() if lane != victim_lane]
    assert all(f.result(timeout=5) for f in others) and not blocked.done()
    release.set()
    writer.flush()
    assert blocked.done()
    writer.close()


def test_answers_wait_for_their_turn_to_be_stored(tmp_path: Path) -> None:
    """Another writer holds the store's lock while a session is answered three times (streamed and
    not): no answer arrives before the lock is released, and the three turns are stored, numbered
    in the order answered, before the gateway even shuts down."""
    store = tmp_path / "w.db"
    SQLiteStore(store).close()
    holder = sqlite3.connect(store, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    released = threading.Event()
    questions = ["first question", "second question", "third question"]
    with gateway_over_fake(store, store_busy_timeout_seconds=30) as (_, url):
        claude = anthropic_client(url, **{"X-Ctxbudget-Session": "w"})
        gpt = openai_client(url, **{"X-Ctxbudget-Session": "w"})
        threading.Timer(0.3, lambda: (released.set(), holder.execute("COMMIT"))).start()
        reply = claude.messages.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": questions[0]}]
        )
        assert released.is_set() and reply.content[0].text == "echo: first question"
        chunks = gpt.chat.completions.create(
            model="gpt-4o", stream=True, messages=[{"role": "user", "content": questions[1]}]
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).startswith("echo")
        gpt.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": questions[2]}])
        turns = SQLiteStore(store, mode="read").turns("w")  # stored before each answer
    assert [(t.index, t.question) for t in turns] == list(enumerate(questions, 1))
    assert all(t.usage.get("actual") for t in turns)


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_that_leaves_while_its_commit_waits_gets_no_stored_turn(
    tmp_path: Path, stream: bool
) -> None:
    """Another process holds the store's lock past the client's timeout: the turn its SDK never
    received was stored when the lock came, and the SDK's retry stored it a second time."""
    store = tmp_path / "w.db"
    SQLiteStore(store).close()
    holder = sqlite3.connect(store, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    with gateway_over_fake(store, store_busy_timeout_seconds=30) as (_, url):
        claude = anthropic.Anthropic(
            base_url=url,
            api_key="k",
            max_retries=0,
            timeout=0.5,
            default_headers={"X-Ctxbudget-Session": "w"},
        )
        question = [{"role": "user", "content": "one question"}]
        with pytest.raises(Exception) as timed_out:  # the SDK's, or mid-stream its transport's
            if stream:
                with claude.messages.stream(model="claude-sonnet-4-6", max_tokens=10, messages=question) as s:
                    s.get_final_message()
            else:
                claude.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=question)
        assert "Timeout" in type(timed_out.value).__name__
        time.sleep(0.5)  # the gateway sees the client gone
        holder.execute("COMMIT")
        time.sleep(0.5)  # the waiting commit takes the lock
        fresh = anthropic_client(url, **{"X-Ctxbudget-Session": "w"})
        fresh.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=question)  # the retry
        turns = SQLiteStore(store, mode="read").turns("w")
    assert [t.question for t in turns] == ["one question"]


class SwitchedStore:
    """A real SQLite store behind a switch: while ``down``, every operation fails as an unreachable
    server's would (a fake of the store interface, not of the gateway)."""

    def __init__(self, path: Path) -> None:
        self.inner = SQLiteStore(path)
        self.down = False

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                self._fail()
            return attribute(*args, **kwargs)

        return call

    def _fail(self) -> None:
        raise StoreUnavailableForTest("switched", "is unreachable: connection refused", "start it")


class StoreUnavailableForTest(StoreError):
    """What the switched store raises while down."""


def _ask(client: Any, text: str) -> Any:
    return client.messages.create(
        model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": text}]
    )


def test_a_store_that_fails_withholds_the_answer_and_refuses_until_it_serves(tmp_path: Path) -> None:
    store = SwitchedStore(tmp_path / "s.db")
    with gateway_over_fake(tmp_path / "unused.db", session_store=store) as (fake, url):
        claude = anthropic_client(url, **{"X-Ctxbudget-Session": "s"})
        _ask(claude, "stored")
        store.down = True
        with pytest.raises(anthropic.APIStatusError) as withheld:
            _ask(claude, "answered upstream, not stored")
        sent = len(fake.received)
        with pytest.raises(anthropic.APIStatusError) as refused:
            _ask(claude, "never sent")
        health = httpx.get(url + "/healthz")
        metrics_down = httpx.get(url + "/metrics").text
        store.down = False
        assert _healthy_within(url, 5.0)  # round trips at most once a second
        _ask(claude, "stored again")
        metrics_up = httpx.get(url + "/metrics").text
    assert withheld.value.status_code == 503 and "withheld" in withheld.value.message
    assert refused.value.status_code == 503 and "nothing was sent" in refused.value.message
    assert len(fake.received) == sent + 1  # the refused request never reached the upstream
    assert health.status_code == 503 and "unreachable" in health.json()["store"]
    assert "ctxbudget_store_up 0.0" in metrics_down and "ctxbudget_store_up 1.0" in metrics_up
    assert [t.question for t in store.inner.turns("s")] == ["stored", "stored again"]


def test_a_stream_whose_turn_cannot_be_stored_ends_with_an_error_event(tmp_path: Path) -> None:
    store = SwitchedStore(tmp_path / "s.db")
    with gateway_over_fake(tmp_path / "unused.db", session_store=store) as (_, url):
        gpt = openai_client(url, **{"X-Ctxbudget-Session": "s"})
        gpt.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "first"}])
        store.down = True  # after the session's first turn: the store fails at the commit
        with pytest.raises(openai.APIError, match="not stored"):
            for _ in gpt.chat.completions.create(
                model="gpt-4o", stream=True, messages=[{"role": "user", "content": "hi"}]
            ):
                pass


def _healthy_within(url: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if httpx.get(url + "/healthz").json() == {"status": "ok", "store": "ok"}:
            return True
        time.sleep(0.1)
    return False


def test_failing_open_answers_while_the_store_is_down_and_stores_again_once_it_serves(
    tmp_path: Path,
) -> None:
    """The first failed commit marks the store down; later turns are answered without being
    handed to it (no wait for its timeout); /healthz stays 200 naming the failure; once a
    background round trip succeeds, turns are stored again."""
    store = SwitchedStore(tmp_path / "s.db")
    with gateway_over_fake(tmp_path / "unused.db", session_store=store, store_fail_open=True) as (_, url):
        claude = anthropic_client(url, **{"X-Ctxbudget-Session": "s"})
        store.down = True
        assert _ask(claude, "one").content[0].text == "echo: one"
        assert _ask(claude, "two").content[0].text == "echo: two"
        health = httpx.get(url + "/healthz")
        metrics = httpx.get(url + "/metrics").text
        store.down = False
        _ask(claude, "three")  # its turn skipped, but it sets off a round trip
        assert _healthy_within(url, 5.0)
        _ask(claude, "four")
    assert [t.question for t in store.inner.turns("s")] == ["four"]
    assert health.status_code == 200 and "failing open" in health.json()["store"]
    assert 'ctxbudget_record_failures_total{error="StoreUnavailableForTest"} 1.0' in metrics
    assert 'ctxbudget_record_failures_total{error="StoreUnavailable"} 1.0' in metrics


def test_a_store_read_that_fails_while_preparing_is_a_503_and_nothing_is_sent(tmp_path: Path) -> None:
    """Policy mode reads the session's previous turn from the store before sending: a store that
    fails there is the store's 503, not a bad request, and later requests are refused at once."""
    store = SwitchedStore(tmp_path / "s.db")
    with gateway_over_fake(tmp_path / "unused.db", session_store=store, policy="legal-review") as (fake, url):
        claude = anthropic_client(url, **{"X-Ctxbudget-Session": "p"})
        _ask(claude, "first")
        store.down = True
        sent = len(fake.received)
        refusals = []
        for question in ("second", "third"):
            with pytest.raises(anthropic.APIStatusError) as refused:
                _ask(claude, question)
            refusals.append(refused.value)
        assert len(fake.received) == sent
    assert [r.status_code for r in refusals] == [503, 503]
    assert all("nothing was sent" in r.message for r in refusals)


class HangingStore:
    """A real SQLite store whose turn counts wait for ``release`` while ``hang`` is set: a store
    server that stops answering (a fake of the store interface, not of the gateway)."""

    def __init__(self, path: Path) -> None:
        self.inner = SQLiteStore(path)
        self.hang = threading.Event()
        self.release = threading.Event()
        self.waiting = threading.Event()

    def count_turns(self, name: str) -> int:
        if self.hang.is_set():
            self.waiting.set()
            self.release.wait(30)
        return self.inner.count_turns(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_store_server_that_hangs_holds_up_only_the_requests_reading_it(tmp_path: Path) -> None:
    store = HangingStore(tmp_path / "s.db")
    with gateway_over_fake(tmp_path / "unused.db", session_store=store) as (_, url):
        small = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        store.hang.set()
        answers: list[int] = []
        stuck = threading.Thread(
            target=lambda: answers.append(
                httpx.post(
                    url + "/v1/chat/completions", json=small, headers={"X-Ctxbudget-Session": "s"}, timeout=60
                ).status_code
            )
        )
        stuck.start()
        try:
            assert store.waiting.wait(10)  # the request is in the store's read
            health = httpx.get(url + "/healthz", timeout=10)  # the event loop still serves
            metrics = httpx.get(url + "/metrics", timeout=10)
            assert stuck.is_alive()
        finally:
            store.release.set()
            stuck.join(timeout=30)
    assert health.status_code == 200 and metrics.status_code == 200
    assert answers == [200]


def test_after_a_commit_failed_the_store_serves_again_only_once_it_takes_a_write() -> None:
    # A read answers while another process holds an SQLite file's lock: after a commit timed out,
    # a read clearing the failure let requests go upstream (billed) for their commit to fail again.
    from ctxbudget.gateway.metrics import Metrics
    from ctxbudget.gateway.storehealth import StoreHealth

    locked = [True]
    pings: list[str] = []

    def ping() -> None:
        pings.append("read")

    def ping_write() -> None:
        pings.append("write")
        if locked[0]:
            raise StoreError("s.db", "is locked by another process", "wait")

    health = StoreHealth(Metrics(), ping, "s.db", ping_write)
    health.failed(StoreError("s.db", "is locked by another process", "wait"), "commit")
    assert health._round_trip() is not None and not health.up
    locked[0] = False
    assert health._round_trip() is None and health.up
    assert health._round_trip() is None  # once it serves, a read is enough again
    assert pings == ["write", "write", "read"]


def test_a_failure_after_a_passed_check_is_not_answered_by_that_check() -> None:
    """/healthz said "ok" for its cached round trip after a commit found the store file removed,
    and the next request went upstream (billed) for its answer to be withheld."""
    import asyncio

    from ctxbudget.gateway.metrics import Metrics
    from ctxbudget.gateway.storehealth import StoreHealth

    removed = [False]

    def ping() -> None:
        if removed[0]:
            raise StoreError("s.db", "was removed or replaced while it was open", "put it back")

    async def run() -> tuple[StoreError | None, StoreError | None]:
        health = StoreHealth(Metrics(), ping, "s.db")
        before = await health.probe()
        removed[0] = True
        health.failed(
            StoreError("s.db", "was removed or replaced while it was open", "put it back"), "commit"
        )
        return before, await health.probe()

    before, after = asyncio.run(run())
    assert before is None and after is not None and "removed" in str(after)


def test_a_round_trip_is_not_queued_behind_the_worker_pool() -> None:
    """With the worker pool (which fits large bodies) busy, the store's round trip waited behind
    it past PROBE_WAIT and /healthz answered 503 'did not answer' for a store that served."""
    import asyncio
    import threading

    import anyio.to_thread
    from starlette.concurrency import run_in_threadpool

    from ctxbudget.gateway.metrics import Metrics
    from ctxbudget.gateway.storehealth import StoreHealth

    release = threading.Event()

    async def run() -> StoreError | None:
        health = StoreHealth(Metrics(), lambda: None, "s.db")
        tokens = int(anyio.to_thread.current_default_thread_limiter().total_tokens)
        busy = [asyncio.ensure_future(run_in_threadpool(release.wait, 30)) for _ in range(tokens)]
        await asyncio.sleep(0.05)  # every worker taken
        try:
            return await health.probe()
        finally:
            release.set()
            await asyncio.gather(*busy)

    assert asyncio.run(run()) is None


class SlowlyUnreachableStore(SwitchedStore):
    """While down, each operation waits out a connection timeout (0.5 s) and then fails as an
    unreachable server's does."""

    def _fail(self) -> None:
        time.sleep(0.5)
        raise StoreUnavailable("pg", "is unreachable: connection timed out", "start it")


def test_commits_queued_behind_one_that_found_the_store_unreachable_fail_at_once(tmp_path: Path) -> None:
    import asyncio

    store = SlowlyUnreachableStore(tmp_path / "s.db")
    with gateway_over_fake(tmp_path / "unused.db", session_store=store) as (_, url):
        body = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}],
        }
        headers = {"x-ctxbudget-session": "one-lane", "anthropic-version": "2023-06-01"}

        async def six() -> list[int]:
            async with httpx.AsyncClient(timeout=30) as client:
                sent = [client.post(url + "/v1/messages", json=body, headers=headers) for _ in range(6)]
                return [r.status_code for r in await asyncio.gather(*sent)]

        store.down = True
        statuses = asyncio.run(six())
        metrics = httpx.get(url + "/metrics").text
        store.down = False
        assert _healthy_within(url, 5.0)
        after = httpx.post(url + "/v1/messages", json=body, headers=headers)
    assert statuses == [503] * 6  # withheld, or refused once the store was known down
    # not each waiting out the timeout in turn in the session's lane (six tries, 3 s and more):
    # the commits tried are the ones timed
    tried = re.search(r"ctxbudget_store_commit_seconds_count (\d+)", metrics)
    assert tried is not None and int(tried.group(1)) <= 2, metrics
    assert after.status_code == 200  # served again once the store answers


def test_a_new_sessions_turn_is_refused_before_it_is_sent_when_the_store_cannot_be_read(
    tmp_path: Path,
) -> None:
    """Whose a named session is (the gateway's, or a policy's) is read before its first turn is
    sent: a store that fails that read cannot take the turn either, so nothing is sent (503)."""
    store = SwitchedStore(tmp_path / "s.db")
    with gateway_over_fake(tmp_path / "unused.db", session_store=store) as (fake, url):
        store.down = True
        with pytest.raises(openai.APIStatusError) as refused:
            openai_client(url, **{"X-Ctxbudget-Session": "new-1"}).chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
    assert refused.value.status_code == 503 and "nothing was sent" in refused.value.message
    assert fake.received == []
