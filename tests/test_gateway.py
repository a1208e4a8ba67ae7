"""The gateway between the official SDKs and a local fake upstream (real HTTP on loopback)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import anthropic
import click
import httpx
import openai
import pytest

from ctxbudget import StoreError
from ctxbudget.session import SQLiteStore

from .fake_upstream import (
    FAKE_MODELS,
    FakeUpstream,
    Served,
    anthropic_client,
    gateway_over_fake,
    openai_client,
)

SYSTEM = "You are a careful legal assistant. " * 200


_anthropic, _openai = anthropic_client, openai_client


def test_anthropic_sdk_non_streaming_multi_turn_session(stack: tuple[FakeUpstream, str, Path]) -> None:
    fake, url, store = stack
    client = _anthropic(url, **{"X-Ctxbudget-Session": "case-1"})
    messages: list[dict[str, Any]] = [{"role": "user", "content": "When was notice given?"}]
    first = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=300, system=SYSTEM, messages=messages
    )
    assert first.content[0].text.startswith("echo: When was notice")
    assert (
        first.usage.cache_creation_input_tokens > 0
    )  # the gateway planned a breakpoint on the long system prompt
    messages += [
        {"role": "assistant", "content": first.content[0].text},
        {"role": "user", "content": "And EX-04?"},
    ]
    second = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=300, system=SYSTEM, messages=messages
    )
    assert second.usage.cache_read_input_tokens > 0
    assert any("sk-ant-test-key" in value for value in fake.headers[0].values())  # the client's key, as sent
    assert "anthropic-version" in fake.headers[0]
    assert "x-ctxbudget-session" not in fake.headers[0]
    turns = SQLiteStore(store).turns("case-1")
    assert [t.index for t in turns] == [1, 2]
    assert turns[1].usage["actual"]["cache_read_tokens"] == second.usage.cache_read_input_tokens
    assert turns[1].usage["estimated"]["exact"] is False


def test_client_cache_control_survives_the_trip(stack: tuple[FakeUpstream, str, Path]) -> None:
    fake, url, _ = stack
    system = [{"type": "text", "text": "short rules", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    _anthropic(url).messages.create(
        model="claude-sonnet-4-6",
        max_tokens=50,
        system=system,  # type: ignore[arg-type]
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            }
        ],
    )
    sent = fake.received[-1]
    assert sent["system"] == system
    assert sent["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}


def test_anthropic_sdk_streaming(stack: tuple[FakeUpstream, str, Path]) -> None:
    _fake, url, store = stack
    with _anthropic(url, **{"X-Ctxbudget-Session": "s"}).messages.stream(
        model="claude-sonnet-4-6", max_tokens=100, messages=[{"role": "user", "content": "Stream please"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "echo: Stream please"
    assert final.usage.output_tokens == 7
    assert SQLiteStore(store).turns("s")[0].answer == "echo: Stream please"


def test_openai_sdk_non_streaming_and_streaming(stack: tuple[FakeUpstream, str, Path]) -> None:
    fake, url, store = stack
    client = _openai(url, **{"X-Ctxbudget-Session": "oa"})
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hello there"}]
    reply = client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "echo: Hello there"
    again = client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    assert again.usage is not None and again.usage.prompt_tokens_details.cached_tokens > 0  # type: ignore[union-attr]
    chunks = client.chat.completions.create(
        model="gpt-4o",
        messages=messages,
        stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True},
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == "echo: Hello there"
    assert fake.headers[0]["authorization"] == "Bearer sk-test-key"
    usage = SQLiteStore(store).turns("oa")[1].usage["actual"]
    assert usage["cache_read_tokens"] > 0 and usage["input_tokens"] >= usage["cache_read_tokens"]


def test_count_tokens_is_answered_locally(stack: tuple[FakeUpstream, str, Path]) -> None:
    fake, url, _ = stack
    result = _anthropic(url).messages.count_tokens(
        model="claude-sonnet-4-6", messages=[{"role": "user", "content": "count me"}]
    )
    assert result.input_tokens > 0
    raw = httpx.post(
        url + "/v1/messages/count_tokens",
        json={"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "x"}]},
    ).json()
    assert raw["exact"] is False and raw["safety_factor"] > 1
    modelless = httpx.post(
        url + "/v1/messages/count_tokens", json={"messages": [{"role": "user", "content": "x"}]}
    )
    assert modelless.status_code == 400 and "`model` is required" in modelless.json()["error"]["message"]
    for route in ("/v1/messages/count_tokens", "/v1/messages"):  # given, but not as a string
        numbered = httpx.post(
            url + route, json={"model": 5, "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
        )
        assert (
            numbered.status_code == 400
            and "`model` must be a string (a model id), got a number" in numbered.text
        )
        for blank in (" ", "\t", "\u3000"):  # was a ConfigError down the internal-error path
            told = httpx.post(
                url + route,
                json={"model": blank, "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
            )
            assert told.status_code == 400 and "`model` is required (it is blank" in told.text, told.text
    assert "ctxbudget_internal_errors_total{" not in httpx.get(url + "/metrics").text
    for route in ("/v1/messages/count_tokens", "/v1/messages"):  # a session name every route refuses
        for name in ("m" * 300, "a\tb"):
            body = {
                "model": "claude-sonnet-4-6",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "x"}],
            }
            named = httpx.post(url + route, json=body, headers={"X-Ctxbudget-Session": name})
            assert named.status_code == 400 and "X-Ctxbudget-Session" in named.json()["error"]["message"]
    assert fake.received == []
    # counted by outcome, refusals too, and naming its session, as every route's answer
    session = {"X-Ctxbudget-Session": "matter-7"}
    counted = httpx.post(
        url + "/v1/messages/count_tokens",
        json={"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "x"}]},
        headers=session,
    )
    unknown = httpx.post(
        url + "/v1/messages/count_tokens",
        json={"model": "no-such-model-xyz", "messages": [{"role": "user", "content": "x"}]},
        headers=session,
    )
    assert counted.headers["x-ctxbudget-session"] == "matter-7" == unknown.headers["x-ctxbudget-session"]
    metrics = httpx.get(url + "/metrics").text
    route = 'route="/v1/messages/count_tokens"'
    assert f'ctxbudget_requests_total{{outcome="unknown_model",{route}}} 1.0' in metrics
    assert f'ctxbudget_requests_total{{outcome="invalid_request",{route}}}' in metrics  # the model-less ones


def test_cost_ceiling_refuses_before_sending(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "c.db", cost_ceiling_usd=0.001) as (fake, url):
        with pytest.raises(anthropic.BadRequestError) as info:
            _anthropic(url).messages.create(
                model="claude-sonnet-4-6",
                max_tokens=4000,
                messages=[{"role": "user", "content": "expensive"}],
            )
        assert "ceiling" in str(info.value) and "the ceiling $0.001 per" in str(info.value)
        with pytest.raises(openai.BadRequestError, match="ceiling"):
            _openai(url).chat.completions.create(
                model="gpt-4", max_tokens=4000, messages=[{"role": "user", "content": "x"}]
            )
    assert fake.received == []


def test_upstream_faults_reach_the_client_in_the_provider_shape(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    _, url, store = stack
    client = _anthropic(url, **{"X-Ctxbudget-Session": "faults"})
    with pytest.raises(anthropic.APIStatusError) as server_error:
        client.messages.create(model="fault-500", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert server_error.value.status_code == 500 and "boom" in str(server_error.value)  # as the upstream said
    with pytest.raises(anthropic.APIStatusError) as timeout:
        client.messages.create(
            model="fault-timeout", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert timeout.value.status_code == 504
    with (
        pytest.raises(anthropic.APIError, match="dropped"),
        client.messages.stream(
            model="fault-disconnect", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        ) as stream,
    ):
        "".join(stream.text_stream)
    with pytest.raises(openai.APIError):
        for _ in _openai(url).chat.completions.create(
            model="fault-disconnect", stream=True, messages=[{"role": "user", "content": "x"}]
        ):
            pass
    with (  # a stream that stalls past the timeout is a timeout, not a drop (in metrics too)
        pytest.raises(anthropic.APIError, match="stalled past the gateway's timeout"),
        client.messages.stream(
            model="fault-stall-stream", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        ) as stream,
    ):
        "".join(stream.text_stream)
    assert 'ctxbudget_upstream_errors_total{kind="timeout"} 2.0' in httpx.get(url + "/metrics").text
    assert "faults" not in SQLiteStore(store).names()  # nothing half-recorded


def test_the_upstreams_own_error_event_ends_the_stream_alone(
    stack: tuple[FakeUpstream, str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    # Anthropic ends a failing stream with an `error` event: passed on, and not followed by a
    # second error of the gateway's saying the stream was cut off.
    _, url, store = stack
    body = {
        "model": "fault-error-event",
        "max_tokens": 10,
        "stream": True,
        "messages": [{"role": "user", "content": "x"}],
    }
    headers = {"anthropic-version": "2023-06-01", "X-Ctxbudget-Session": "error-event"}
    with httpx.stream("POST", url + "/v1/messages", json=body, headers=headers) as answer:
        events = [line for line in answer.iter_lines() if line.startswith("event:")]
    metrics = httpx.get(url + "/metrics").text
    assert events.count("event: error") == 1 and events[-1] == "event: error"
    assert 'kind="stream_error"' in metrics and 'kind="truncated_stream"' not in metrics
    assert "error-event" not in SQLiteStore(store).names()  # an answer that failed is not a turn
    # the access line says "streamed" when the stream begins: its end is logged on its own
    ended = [r.getMessage() for r in caplog.records if "stream ended without its answer" in r.getMessage()]
    assert ended == ["session=error-event stream ended without its answer: stream_error"]


def test_an_error_after_every_choice_finished_is_no_answered_turn(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    # A Chat Completions stream whose choices all had their finish_reason, then the upstream's
    # error chunk and a clean close (no [DONE]), was stored as an answered turn.
    _, url, store = stack
    body = {
        "model": "fault-error-after-finish",
        "stream": True,
        "messages": [{"role": "user", "content": "x"}],
    }
    with httpx.stream(
        "POST", url + "/v1/chat/completions", json=body, headers={"X-Ctxbudget-Session": "late-error"}
    ) as answer:
        lines = [line for line in answer.iter_lines() if line.startswith("data:")]
    assert [line for line in lines if '"error"' in line] == [lines[-1]]  # the upstream's, alone
    assert "boom" in lines[-1]
    metrics = httpx.get(url + "/metrics").text
    assert 'kind="stream_error"' in metrics and 'kind="truncated_stream"' not in metrics
    assert "late-error" not in SQLiteStore(store).names()


def test_a_json_answer_to_a_stream_request_reaches_the_client(stack: tuple[FakeUpstream, str, Path]) -> None:
    # An upstream that ignores `stream` answers JSON: read as events, the answer was dropped for
    # an error event saying the stream closed before it finished.
    _, url, store = stack
    body = {"model": "fault-ignores-stream", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    answer = httpx.post(
        url + "/v1/chat/completions", json=body, headers={"X-Ctxbudget-Session": "json-stream"}
    )
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    assert answer.json()["choices"][0]["message"]["content"] == "echo: hi"
    assert [t.question for t in SQLiteStore(store).turns("json-stream")] == ["hi"]


def test_a_page_answered_to_a_stream_request_is_a_502_naming_it(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    # A captive portal's page with status 200 was relayed as events: the client got a 200 stream
    # ending in "upstream closed the stream before it finished", which named the network.
    _, url, store = stack
    chat = {"model": "fault-html-200", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    answer = httpx.post(url + "/v1/chat/completions", json=chat, headers={"X-Ctxbudget-Session": "portal"})
    assert answer.status_code == 502
    message = answer.json()["error"]["message"]
    assert "text/html to a streamed request" in message and "captive portal" in message
    messages = {**chat, "max_tokens": 10}
    headers = {"anthropic-version": "2023-06-01", "X-Ctxbudget-Session": "portal"}
    answer = httpx.post(url + "/v1/messages", json=messages, headers=headers)
    assert answer.status_code == 502 and answer.json()["type"] == "error"
    assert 'kind="not_events"' in httpx.get(url + "/metrics").text
    assert "portal" not in SQLiteStore(store).names()


def test_a_stream_labelled_plain_text_is_relayed_as_events(stack: tuple[FakeUpstream, str, Path]) -> None:
    _, url, store = stack
    body = {"model": "fault-plain-events", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.stream(
        "POST", url + "/v1/chat/completions", json=body, headers={"X-Ctxbudget-Session": "plain"}
    ) as answer:
        lines = [line for line in answer.iter_lines() if line.startswith("data:")]
    assert answer.status_code == 200 and lines[-1] == "data: [DONE]"
    assert [t.answer for t in SQLiteStore(store).turns("plain")] == ["echo: hi"]


def test_a_chat_stream_whose_choices_all_finished_is_whole_without_done(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    """A Chat Completions stream that ends cleanly after every choice's finish_reason (and the
    usage chunk) but without ``data: [DONE]`` is a whole answer, as the OpenAI SDK reads it: relayed
    and stored, not ended with an error event; one closed before a finish_reason still is one."""
    _, url, store = stack
    client = _openai(url, **{"X-Ctxbudget-Session": "no-done"})
    chunks = list(
        client.chat.completions.create(
            model="fault-no-done", stream=True, messages=[{"role": "user", "content": "hi"}]
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "echo: hi"
    assert chunks[-1].choices == [] or chunks[-1].choices[0].finish_reason == "stop"
    turns = SQLiteStore(store).turns("no-done")
    assert [t.answer for t in turns] == ["echo: hi"] and turns[0].usage["actual"]["input_tokens"] > 0
    with pytest.raises(openai.APIError, match="before it finished"):
        for _ in _openai(url, **{"X-Ctxbudget-Session": "no-finish"}).chat.completions.create(
            model="fault-no-finish", stream=True, messages=[{"role": "user", "content": "hi"}]
        ):
            pass
    assert "no-finish" not in SQLiteStore(store).names()


def test_a_connection_dropped_after_the_streams_end_is_no_error(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    # The whole answer went out (and was stored): an error event after message_stop made the SDK
    # raise and throw it away, and the client's retry was billed and stored again.
    _, url, store = stack
    client = _anthropic(url, **{"X-Ctxbudget-Session": "dropped-late"})
    with client.messages.stream(
        model="fault-drop-after-end", max_tokens=10, messages=[{"role": "user", "content": "late drop"}]
    ) as stream:
        text = "".join(stream.text_stream)
    assert text == "echo: late drop"
    assert len(SQLiteStore(store).turns("dropped-late")) == 1


def test_body_limit_health_and_metrics(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "m.db", max_body_bytes=2000) as (fake, url):
        big = {"model": "gpt-4o", "messages": [{"role": "user", "content": "x" * 5000}]}
        too_big = httpx.post(url + "/v1/chat/completions", json=big)
        assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "request_too_large"
        # the gateway's own limit, named so (a client read the provider's 413 in it), and how to raise it
        said = too_big.json()["error"]["message"]
        assert (
            said.startswith("ctxbudget: ")
            and "gateway's 2,000-byte limit" in said
            and "--max-body-bytes" in said
        )
        assert httpx.get(url + "/healthz").json() == {"status": "ok", "store": "ok"}
        httpx.post(
            url + "/v1/chat/completions",
            json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        )
        metrics = httpx.get(url + "/metrics").text
    assert 'ctxbudget_requests_total{outcome="request_too_large",route="/v1/chat/completions"} 1.0' in metrics
    assert "ctxbudget_input_tokens_total" in metrics and "ctxbudget_fit_decisions_total" in metrics
    assert json.loads(json.dumps(fake.received))[-1]["messages"][0]["content"] == "hi"


def test_with_a_tiered_policy_requests_are_assembled(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "p.db", policy="legal-review") as (fake, url):
        client = _anthropic(url, **{"X-Ctxbudget-Session": "tiered"})
        reply = client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=200,
            system=SYSTEM,
            metadata={"user_id": "u-1"},
            messages=[{"role": "user", "content": "Was notice given?"}],
        )
        assert reply.content[0].text == "echo: Was notice given?"
        with pytest.raises(anthropic.BadRequestError, match="volatile"):
            client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=200,
                system=SYSTEM + " Today is 2026-11-30.",
                messages=[{"role": "user", "content": "x"}],
            )
    sent = fake.received[0]
    assert sent["metadata"] == {"user_id": "u-1"}  # fields the assembly does not own pass through
    assert sent["system"][0]["cache_control"] == {
        "type": "ephemeral",
        "ttl": "1h",
    }  # the pinned tier, cached 1 h
    assert len(fake.received) == 1  # the refused request never reached the upstream


def test_a_policy_sessions_new_tool_definitions_are_refused_as_a_prefix_change(tmp_path: Path) -> None:
    """The provider caches tools ahead of the playbook: new ones write the whole cached prefix
    again, which the next turn passed as byte-identical (a hunt of the legal spec)."""
    tool = {"name": "search", "description": "Search the transcript.", "input_schema": {"type": "object"}}
    with gateway_over_fake(tmp_path / "t.db", policy="legal-review") as (_fake, url):
        client = _anthropic(url, **{"X-Ctxbudget-Session": "tools"})

        def ask(description: str) -> None:
            client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=200,
                system=SYSTEM,
                tools=[{**tool, "description": description}],
                messages=[{"role": "user", "content": "Was notice given?"}],
            )

        ask("Search the transcript.")
        ask("Search the transcript.")  # the same tools: no change
        with pytest.raises(anthropic.APIStatusError) as refused:
            ask("Search the transcript by keyword.")
    assert refused.value.status_code == 409 and "tool definitions sha256:" in str(refused.value)


def _crowd_catalog(folder: Path) -> tuple[str, str]:
    """The fake's control models and ``crowd-2`` (answered once two are in flight) with a window
    and prices a policy can assemble for."""
    (folder / "crowd.toml").write_text(
        'schema_version = 1\n[[models]]\nid = "crowd-2"\nprovider = "anthropic"\n'
        "context_window = 200000\nmax_output_tokens = 8192\nprices = { input = 3.0, output = 15.0 }\n",
        "utf-8",
    )
    return (str(FAKE_MODELS), str(folder / "crowd.toml"))


async def _at_once(urls: list[str], session: str, playbooks: tuple[str, str]) -> list[httpx.Response]:
    """Two first turns of ``session`` with these system prompts, sent together (the n-th to the
    n-th gateway of ``urls``, cycling): the fake answers once both are in flight, so each is
    assembled before the other is stored."""
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01", "X-Ctxbudget-Session": session}

    async def post(url: str, playbook: str) -> httpx.Response:
        body = {
            "model": "crowd-2",
            "max_tokens": 50,
            "system": playbook * 20,
            "messages": [{"role": "user", "content": "Was notice given?"}],
        }
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            return await client.post("/v1/messages", json=body, headers=headers)

    return list(await asyncio.gather(*(post(urls[n % len(urls)], p) for n, p in enumerate(playbooks))))


def test_turns_of_a_policy_session_sent_at_once_never_store_two_pinned_prefixes(tmp_path: Path) -> None:
    """Two first turns of one session, sent at once with different playbooks, were each checked
    against no previous turn, and both were answered and stored: the session then held two pinned
    prefixes. The commit checks again once another turn was stored since the assembly: the second
    is a 409 (its answer withheld, not stored). The same playbook twice at once is no change."""
    catalogs = _crowd_catalog(tmp_path)
    with gateway_over_fake(tmp_path / "race.db", policy="legal-review", catalog_paths=catalogs) as (
        fake,
        url,
    ):
        raced = asyncio.run(_at_once([url], "race", ("Playbook A: notices. ", "Playbook B: warranties. ")))
        fake.arrived, fake.gathered = 0, None
        same = asyncio.run(_at_once([url], "same", ("Playbook A: notices. ", "Playbook A: notices. ")))
    assert sorted(r.status_code for r in raced) == [200, 409]
    lost = next(r for r in raced if r.status_code == 409)
    assert "another turn of it was stored with a different pinned prefix" in lost.text
    assert lost.headers["x-should-retry"] == "false"
    store = SQLiteStore(tmp_path / "race.db")
    assert len({t.report["pinned_prefix_sha256"] for t in store.turns("race")}) == 1
    assert len(store.turns("race")) == 1
    assert [r.status_code for r in same] == [200, 200] and len(store.turns("same")) == 2


def test_two_replicas_sharing_a_store_never_store_two_pinned_prefixes_of_a_session(tmp_path: Path) -> None:
    """The same two turns, one to each of two gateways sharing one store: each replica commits its
    own turns in order, so the check holds only if it is made under the session's lock in the
    store (both stored two prefixes in five runs of six when it was not)."""
    from ctxbudget.gateway import GatewayConfig, create_app

    fake = FakeUpstream()
    with Served(fake.app) as upstream:
        options = {
            "anthropic_upstream": upstream.url,
            "openai_upstream": upstream.url,
            "policy": "legal-review",
            "catalog_paths": _crowd_catalog(tmp_path),
            "store_path": str(tmp_path / "shared.db"),
        }
        apps = [create_app(GatewayConfig(**options)) for _ in range(2)]
        with Served(apps[0]) as first, Served(apps[1]) as second:
            raced = asyncio.run(
                _at_once(
                    [first.url, second.url], "race", ("Playbook A: notices. ", "Playbook B: warranties. ")
                )
            )
    assert sorted(r.status_code for r in raced) == [200, 409]
    turns = SQLiteStore(tmp_path / "shared.db").turns("race")
    assert len(turns) == 1


def test_a_policy_turn_whose_commit_failed_leaves_no_session_kind_behind(tmp_path: Path) -> None:
    """A policy-mode first turn creates its session in the transaction that stores it. When the
    append failed, the creation was rolled back with it, but the gateway remembered the name as a
    session of its own: once `session new` took the name, a chat turn naming it was stored there
    (200) where it is refused (409 session_conflict)."""
    from ctxbudget.session import Session

    class FailsOnce(SQLiteStore):
        failed = False

        def append_turn(self, *args: Any, **kwargs: Any) -> Any:
            if not self.failed:
                self.failed = True
                raise StoreError(self.path, "disk I/O error", "retry")
            return super().append_turn(*args, **kwargs)

    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 50,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": "Was notice given?"}],
    }
    store = tmp_path / "k.db"
    with gateway_over_fake(store, FailsOnce(store), policy="legal-review") as (_fake, url):
        headers = {"x-api-key": "k", "anthropic-version": "2023-06-01", "X-Ctxbudget-Session": "s1"}
        first = httpx.post(url + "/v1/messages", json=body, headers=headers, timeout=30)
        assert first.status_code == 503 and SQLiteStore(store).names() == []
        Session.create(SQLiteStore(store), "s1", policy="legal-review", model="claude-sonnet-4-5", base={})
        deadline = time.monotonic() + 10
        while httpx.get(url + "/healthz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        chat = httpx.post(url + "/v1/messages", json=body, headers=headers, timeout=30)
    assert chat.status_code == 409 and chat.json()["error"]["code"] == "session_conflict", chat.text
    assert SQLiteStore(store).turns("s1") == []


def test_a_turn_in_between_in_fit_mode_does_not_reset_a_policys_pinned_prefix(tmp_path: Path) -> None:
    """The baseline was the session's last turn: a turn in between in fit mode (no
    X-Ctxbudget-Policy) held no pinned prefix, and the next legal-review turn with another
    playbook was answered and stored. The baseline is the last turn under the same policy."""
    with gateway_over_fake(tmp_path / "hop.db", allowed_policies=("legal-review",)) as (_fake, url):

        def send(system: str, policy: str | None) -> int:
            headers = {"x-api-key": "k", "anthropic-version": "2023-06-01", "X-Ctxbudget-Session": "hop"}
            if policy:
                headers["X-Ctxbudget-Policy"] = policy
            body = {
                "model": "claude-sonnet-4-5",
                "max_tokens": 50,
                "system": system * 20,
                "messages": [{"role": "user", "content": "Was notice given?"}],
            }
            return httpx.post(url + "/v1/messages", json=body, headers=headers, timeout=30).status_code

        statuses = [
            send("Playbook A. ", "legal-review"),
            send("Playbook B. ", "legal-review"),
            send("Unrelated. ", None),
            send("Playbook B. ", "legal-review"),
            send("Playbook A. ", "legal-review"),
        ]
    assert statuses == [200, 409, 200, 409, 200]
    stored = SQLiteStore(tmp_path / "hop.db").turns("hop")
    assert len({t.report["pinned_prefix_sha256"] for t in stored if t.report.get("policy")}) == 1


def test_usage_is_normalized_and_calibration_rises_fast_and_falls_on_evidence() -> None:
    from ctxbudget.gateway.calibration import Calibration
    from ctxbudget.gateway.usage import normalize_usage

    anthropic_usage = normalize_usage(
        "anthropic",
        {
            "input_tokens": 10,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 5,
            "output_tokens": 3,
        },
    )
    openai_usage = normalize_usage(
        "openai",
        {"prompt_tokens": 115, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 100}},
    )
    assert anthropic_usage is not None and openai_usage is not None
    assert (anthropic_usage.input_tokens, anthropic_usage.uncached_tokens) == (115, 10)
    assert (openai_usage.input_tokens, openai_usage.cache_read_tokens, openai_usage.uncached_tokens) == (
        115,
        100,
        15,
    )
    # a figure past any window (a broken or hostile answer) is no count: it would make the
    # gateway's token and cost counters infinite
    for absurd in (1e308, 10**30):
        poisoned = normalize_usage("openai", {"prompt_tokens": absurd, "completion_tokens": 2})
        assert poisoned is not None and (poisoned.input_tokens, poisoned.output_tokens) == (0, 2)
    # a fraction is no count either (the docs said 0, it was read as 2); a whole float is its int
    halves = normalize_usage("anthropic", {"input_tokens": 5.0, "output_tokens": 2.5})
    assert halves is not None and (halves.input_tokens, halves.output_tokens) == (5, 0)
    calibration = Calibration(window=3)
    assert calibration.observe("m", 100, 140, default=1.2) == 1.4  # rises at once (within a step)
    assert calibration.observe("m", 100, 110, default=1.2) == 1.4
    assert calibration.observe("m", 100, 112, default=1.2) == 1.4  # the window still holds 1.4
    # three below it: falls to the highest seen, never below the catalog's factor
    assert calibration.observe("m", 100, 125, default=1.2) == 1.25


def test_streams_are_relayed_as_they_arrive(stack: tuple[FakeUpstream, str, Path]) -> None:
    _, url, _ = stack
    body = {
        "model": "slow-stream",
        "max_tokens": 20,
        "stream": True,
        "messages": [{"role": "user", "content": "slow"}],
    }
    arrivals: list[tuple[float, bytes]] = []
    started = time.monotonic()
    with httpx.stream("POST", url + "/v1/messages", json=body, timeout=10) as response:
        for chunk in response.iter_raw():
            arrivals.append((time.monotonic() - started, chunk))
    first_delta = next(t for t, c in arrivals if b"content_block_delta" in c)
    assert (
        arrivals[-1][0] - first_delta >= 0.8
    )  # the first text came out while the upstream was still writing


def test_text_that_mentions_cache_control_does_not_stop_the_planned_breakpoint() -> None:
    from ctxbudget.gateway.bodies import has_cache_control as _has_cache_control

    assert _has_cache_control(
        {"system": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]}
    )
    assert not _has_cache_control({"messages": [{"role": "user", "content": "what is cache_control?"}]})


def test_the_refusal_table_keeps_a_policys_hint_and_names_an_unknown_price() -> None:
    from ctxbudget.errors import BudgetExceeded, PriceUnknown
    from ctxbudget.gateway.refusals import refusal_for

    fit_error = BudgetExceeded(available_tokens=10, required_tokens=20, parts={"system": 20})
    envelope = BudgetExceeded(
        available_tokens=8192, required_tokens=32000, parts={"envelope": 32000}, hint="lower the envelope"
    )
    assert "X-Ctxbudget-Max-Context-Tokens" in str(refusal_for(fit_error, "anthropic"))
    told = refusal_for(envelope, "openai")
    assert str(told).endswith("; lower the envelope") and told.code == "context_length_exceeded"
    unpriced = refusal_for(PriceUnknown(model_id="house-llm", ceiling_usd=0.5), "anthropic")
    assert unpriced.code == "price_unknown" and str(unpriced).count("nothing was sent") == 1
    assert "serve --cost-ceiling" in str(unpriced)


def test_concurrent_requests_are_not_queued_behind_a_pool_limit(tmp_path: Path) -> None:
    # httpx's default pool forwards 100 requests at a time: the 101st waited in the gateway and
    # was answered "upstream timed out: PoolTimeout" though the upstream never saw it.
    crowd = 120

    async def send_all(url: str) -> list[int]:
        limits = httpx.Limits(max_connections=None)
        async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as client:
            body = {"model": f"crowd-{crowd}", "messages": [{"role": "user", "content": "hi"}]}
            answers = await asyncio.gather(
                *(client.post("/v1/chat/completions", json=body) for _ in range(crowd))
            )
        return [answer.status_code for answer in answers]

    with gateway_over_fake(tmp_path / "crowd.db") as (fake, url):
        assert asyncio.run(send_all(url)) == [200] * crowd
    assert fake.arrived == crowd


def test_other_paths_are_a_404_unless_passed_through(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "off.db") as (fake, url):
        off = httpx.get(url + "/v1/models")
        assert off.status_code == 404 and "--pass-through" in off.json()["error"]["message"]
        with pytest.raises(openai.BadRequestError, match="background"):
            _openai(url).responses.create(model="gpt-4o", input="hi", background=True)
    assert fake.paths == []


def test_pass_through_sends_other_paths_upstream_as_they_came(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "on.db", pass_through=True) as (fake, url):
        client = _openai(url, **{"X-Ctxbudget-Session": "s"})
        assert [m.id for m in client.models.list()] == ["gpt-4o"]
        assert client.embeddings.create(model="e", input="hi").data[0].embedding == [0.5, 0.25]
        started = client.responses.create(model="gpt-4o", input="hi", background=True)
        assert client.responses.retrieve(started.id).output_text == "done in the background"
        payload = bytes(range(256)) * 4096  # 1 MB, not UTF-8: streamed through as it is
        echoed = httpx.put(
            url + "/v1/files/a%2Fb?purpose=x&x=1", content=payload, headers={"authorization": "Bearer k"}
        )
        missing = httpx.delete(url + "/v1/things/missing")
        packed = httpx.get(url + "/v1/gzip")
        metrics = httpx.get(url + "/metrics").text
    assert echoed.json() == {
        "method": "PUT",
        "path": "/v1/files/a%2Fb",  # as sent, not decoded
        "query": "purpose=x&x=1",
        "sha256": hashlib.sha256(payload).hexdigest(),
    }
    assert echoed.headers.get_list("set-cookie") == ["a=1", "b=2"]
    sent = fake.headers[fake.paths.index("/v1/files/a%2Fb?purpose=x&x=1")]
    assert sent["authorization"] == "Bearer k" and sent["content-length"] == str(len(payload))
    listed = fake.headers[fake.paths.index("/v1/models")]
    assert "transfer-encoding" not in listed and listed.get("content-length", "0") == "0"  # a GET has no body
    assert not any(k.startswith("x-ctxbudget") for h in fake.headers for k in h)
    assert missing.status_code == 404 and missing.json()["method"] == "DELETE"
    assert packed.json() == {"packed": True} and packed.headers["content-encoding"] == "gzip"
    assert 'route="/v1/* passed through"' in metrics


def test_pass_through_keeps_bytes_apis_and_paths_apart(tmp_path: Path) -> None:
    anthropic_elsewhere = {"anthropic_upstream": "http://127.0.0.1:9/unused"}
    with gateway_over_fake(tmp_path / "p.db", pass_through=True) as (fake, url):
        # by the client's headers, not the path: OpenAI's threads have /messages in theirs
        thread = httpx.get(url + "/v1/threads/t1/messages", headers={"authorization": "Bearer sk-o"})
        sneaky = httpx.post(url + "/v1/x/%2e%2e/chat/completions", json={"model": "gpt-4o", "messages": []})
        with httpx.stream("GET", url + "/v1/cut") as cut, pytest.raises(httpx.RemoteProtocolError):
            cut.read()  # cut off upstream: cut off here, never ended as if whole
        odd = httpx.get(url + "/v1/echo", headers={"x-title": "café".encode()})
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        spellings = [
            "/v1/chat/completions/",
            "/v1//chat/completions",
            "/v1/chat//completions",
            "/v1/chat/completions;x",
            "/v1/messages/",
            "/v1/responses/",
            "/v1/chat/%2Fcompletions",
            "/v1/Chat/Completions",
            "/v1/MESSAGES",
            # what a server may trim, drop or read as a slash (a hunt sent them unfitted)
            "/v1/chat/completions.json",
            "/v1/chat/completions%20",
            "/v1/chat/completions%00",
            "/v1/chat/completions%5C",
            "/v1/messages%23x",
            "/v1/chat/completions%3Fa=1",
            "/v1/chat%5Ccompletions",
        ]
        respelled = {path: httpx.post(url + path, json=body) for path in spellings}
        listed = httpx.get(url + "/v1/chat/completions", params={"limit": 2})  # OpenAI's stored completions
    assert listed.status_code == 200 and "/v1/chat/completions?limit=2" in fake.paths  # a GET is not fitted
    assert thread.status_code == 200 and "/v1/threads/t1/messages" in fake.paths
    for path, answer in respelled.items():  # a fitted API by another spelling never goes unfitted
        assert answer.status_code == 400 and "names the fitted" in answer.json()["error"]["message"], path
    assert sneaky.status_code == 400 and "'..' segment" in sneaky.json()["error"]["message"]
    assert [p for p in fake.paths if "chat" in p] == ["/v1/chat/completions?limit=2"]
    assert odd.status_code == 200 and odd.headers.get_list("date") == odd.headers.get_list("date")[:1]
    assert odd.headers.raw.count((b"content-disposition", 'attachment; filename="文件.pdf"'.encode())) == 1
    assert [k for k, _ in odd.headers.raw].count(b"server") <= 1
    with gateway_over_fake(tmp_path / "a.db", pass_through=True, **anthropic_elsewhere) as (fake, url):
        models = httpx.get(url + "/v1/models", headers={"anthropic-version": "2023-06-01"})
    assert models.status_code == 502 and fake.paths == []  # sent to the Anthropic upstream (down)


def test_a_passed_through_body_that_stalls_is_refused_not_waited_on(tmp_path: Path, monkeypatch: Any) -> None:
    import socket

    import ctxbudget.gateway.intake as intake

    monkeypatch.setattr(intake, "BODY_IDLE_SECONDS", 0.5)
    with gateway_over_fake(tmp_path / "s.db", pass_through=True) as (_, url):
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            head = f"POST /v1/files HTTP/1.1\r\nHost: {host}\r\nContent-Length: 100\r\n\r\n"
            conn.sendall(head.encode() + b"ten bytes.")  # then nothing: it held the upstream for ever
            started = time.monotonic()
            answer = conn.recv(4096).decode("latin-1")
        assert answer.startswith("HTTP/1.1 408") and "stalled" in answer
        assert time.monotonic() - started < 9


def test_a_passed_through_request_has_its_log_line(tmp_path: Path, caplog: Any) -> None:
    import logging

    with (
        caplog.at_level(logging.INFO, logger="ctxbudget.gateway"),
        gateway_over_fake(tmp_path / "l.db", pass_through=True) as (_, url),
    ):
        answer = httpx.get(url + "/v1/threads/t1/messages", headers={"authorization": "Bearer sk-o"})
    lines = [
        r.getMessage()
        for r in caplog.records
        if "passed_through=GET /v1/threads/t1/messages" in r.getMessage()
    ]
    assert answer.status_code == 200 and len(lines) == 1  # only httpx's own line was there
    assert "status=200 outcome=ok" in lines[0]


def test_the_served_gateway_never_logs_an_upstream_url_with_its_query(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """httpx's INFO line names each upstream URL whole: a client's `?api-key=sk-...` was logged."""
    import logging

    from ctxbudget.cli.serve_command import configure_logging

    configure_logging()
    with caplog.at_level(logging.INFO):
        logging.getLogger("httpx").info(
            'HTTP Request: POST http://u/v1/chat/completions?api-key=sk-SECRET "200"'
        )
        logging.getLogger("ctxbudget.gateway").info("request=1 status=200")
    assert "sk-SECRET" not in caplog.text and "request=1" in caplog.text


def test_a_session_started_by_session_new_is_not_given_chat_turns(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    from ctxbudget.session import Session

    fake, url, store = stack
    Session.create(SQLiteStore(store), "matter-7", policy="legal-review", model="claude-sonnet-4-5", base={})
    client = _anthropic(url, **{"X-Ctxbudget-Session": "matter-7"})
    with pytest.raises(anthropic.ConflictError) as info:  # 409, told not to retry: sent once
        client.messages.create(
            model="claude-sonnet-4-6", max_tokens=50, messages=[{"role": "user", "content": "When?"}]
        )
    assert "`session new`" in info.value.message and "legal-review" in info.value.message
    assert info.value.response.headers["x-should-retry"] == "false"
    assert fake.received == []  # refused before it was sent
    # the policy's session goes on as it was, and a session of the gateway's own still records
    _, turn = Session(SQLiteStore(store), "matter-7").add("Was notice given?", answer="Yes.")
    assert turn.index == 1
    _anthropic(url, **{"X-Ctxbudget-Session": "chat-7"}).messages.create(
        model="claude-sonnet-4-6", max_tokens=50, messages=[{"role": "user", "content": "When?"}]
    )
    assert [t.index for t in SQLiteStore(store).turns("chat-7")] == [1]
    assert [t.question for t in SQLiteStore(store).turns("matter-7")] == ["Was notice given?"]


def test_session_kinds_read_a_name_until_it_exists_then_remember_it(tmp_path: Path) -> None:
    from ctxbudget.gateway.memory import SessionKinds
    from ctxbudget.session import Session, SessionMeta
    from ctxbudget.session.store import GATEWAY_RECORDED

    store = SQLiteStore(tmp_path / "k.db")
    up = [True]
    kinds = SessionKinds(store, 8, lambda: up[0])
    assert kinds.foreign_policy("matter-7") is None  # no such session yet: read again next time
    Session.create(store, "matter-7", policy="legal-review", model="claude-sonnet-4-5", base={})
    assert kinds.foreign_policy("matter-7") == "legal-review"  # `session new` took the name since
    store.create(SessionMeta(name="chat-1", policy=GATEWAY_RECORDED, model="gpt-4o", base={}))
    assert kinds.foreign_policy("chat-1") is None
    up[0] = False  # a store known to be down is not asked; what was read stands
    Session.create(store, "matter-8", policy="legal-review", model="claude-sonnet-4-5", base={})
    assert kinds.foreign_policy("matter-7") == "legal-review" and kinds.foreign_policy("matter-8") is None

    class Unreachable:  # a store server that stopped (a fake of the store interface)
        def policy_of(self, name: str) -> str | None:
            raise StoreError("postgresql://db/x", "is unreachable: connection refused", "start it")

    # a read that fails refuses the turn before it is sent (its commit would fail too), unless failing open
    with pytest.raises(StoreError):
        SessionKinds(Unreachable(), 8).foreign_policy("new-9")  # type: ignore[arg-type]
    assert SessionKinds(Unreachable(), 8, fail_open=True).foreign_policy("new-9") is None  # type: ignore[arg-type]

    class Older:  # a store written before policy_of: read by its meta
        def __init__(self) -> None:
            self.inner = store

        def meta(self, name: str) -> Any:
            return self.inner.meta(name)

    older = SessionKinds(Older(), 8)  # type: ignore[arg-type]
    assert older.foreign_policy("matter-8") == "legal-review" and older.foreign_policy("none-yet") is None


def test_a_ceiling_prices_the_largest_reply_field_and_every_reply(tmp_path: Path) -> None:
    """A body that gives max_tokens and max_completion_tokens is priced at the larger (a server may
    honour either), and n = 10.0 is ten replies."""
    with gateway_over_fake(tmp_path / "c.db", cost_ceiling_usd=0.05) as (fake, url):
        client = _openai(url)
        messages = [{"role": "user", "content": "x"}]
        with pytest.raises(openai.BadRequestError, match="ceiling"):
            client.chat.completions.create(
                model="gpt-4o", messages=messages, max_tokens=10, max_completion_tokens=100_000
            )
        with pytest.raises(openai.BadRequestError, match="ceiling"):
            client.chat.completions.create(
                model="gpt-4o", messages=messages, max_tokens=1_000, extra_body={"n": 10.0}
            )
        assert fake.received == []
        client.chat.completions.create(model="gpt-4o", messages=messages, max_tokens=1_000)  # one reply fits
        assert len(fake.received) == 1
    with gateway_over_fake(tmp_path / "p.db", cost_ceiling_usd=0.05, allowed_policies=("legal-review",)) as (
        fake,
        url,
    ):
        policy = _openai(url, **{"X-Ctxbudget-Policy": "legal-review"})  # priced by the assembly
        for n in (10, 10.0):
            with pytest.raises(openai.BadRequestError, match="ceiling"):
                policy.chat.completions.create(
                    model="gpt-4o", messages=messages, max_tokens=1_500, extra_body={"n": n}
                )
        assert fake.received == []


def test_a_refused_requests_log_line_names_its_session_and_tokens(tmp_path: Path, caplog: Any) -> None:
    """The answer to a ceiling refusal names the session and the tokens; its log line said
    session=- tokens=-."""
    import logging

    with (
        caplog.at_level(logging.INFO, logger="ctxbudget.gateway"),
        gateway_over_fake(tmp_path / "l.db", cost_ceiling_usd=0.001) as (_, url),
    ):
        headers = {"anthropic-version": "2023-06-01", "X-Ctxbudget-Session": "case-9"}
        body = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 4000,
            "messages": [{"role": "user", "content": "x"}],
        }
        answer = httpx.post(url + "/v1/messages", json=body, headers=headers)
    lines = [r.getMessage() for r in caplog.records if "outcome=cost_ceiling_exceeded" in r.getMessage()]
    assert answer.status_code == 400 and len(lines) == 1
    tokens = f"{answer.headers['x-ctxbudget-tokens-before']}->{answer.headers['x-ctxbudget-tokens-after']}"
    assert "session=case-9 " in lines[0] and f"tokens={tokens} " in lines[0]


def test_serve_and_the_config_share_the_body_limit() -> None:
    """serve's --max-body-bytes default is GatewayConfig's (written twice: serve imports the
    gateway only when it serves)."""
    from ctxbudget.cli import main
    from ctxbudget.gateway import GatewayConfig

    serve = main.get_command(click.Context(main), "serve")
    assert serve is not None
    option = next(p for p in serve.params if p.name == "max_body_bytes")
    assert option.default == GatewayConfig().max_body_bytes


def test_a_gateway_loads_numpy_at_its_start_and_runs_without_it(tmp_path: Path) -> None:
    """Its requests' token lengths and passage scores are read with numpy when it is installed:
    loaded with the app, not on a request; a process without numpy serves all the same."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "if sys.argv[1] == 'blocked': sys.modules['numpy'] = None\n"
        "from ctxbudget.gateway import GatewayConfig, create_app\n"
        "assert 'numpy' not in sys.modules or sys.modules['numpy'] is None\n"
        "create_app(GatewayConfig(openai_upstream='http://127.0.0.1:9', store_path=sys.argv[2]))\n"
        "print(sys.modules.get('numpy') is not None)\n"
    )
    for case, expected in (("installed", "True"), ("blocked", "False")):
        shown = subprocess.run(
            [sys.executable, "-c", script, case, str(tmp_path / f"{case}.db")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert shown == [expected]
