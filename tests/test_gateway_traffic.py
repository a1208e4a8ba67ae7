"""The gateway on real traffic: budgets clients set, faults passed through, calibration that one
answer cannot poison, bounded state (official SDKs against the local fake upstream)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import get_policy
from ctxbudget.errors import InvalidRequestError
from ctxbudget.gateway.bodies import capped_output, encoded, named_session, session_id
from ctxbudget.gateway.calibration import Calibration
from ctxbudget.gateway.prepared import WARNINGS_HEADER_CHARS, warnings_header
from ctxbudget.gateway.providers import ANTHROPIC, OPENAI, RESPONSES
from ctxbudget.gateway.refusals import Refusal
from ctxbudget.gateway.upstream import UpstreamCounter
from ctxbudget.gateway.usage import normalize_usage
from ctxbudget.session import SQLiteStore

from .fake_upstream import FakeUpstream, Served, anthropic_client, gateway_over_fake, openai_client, unmarked

LONG = "The lease was signed in March and the deposit was paid in April. " * 400


_anthropic, _openai = anthropic_client, openai_client


def _ask(text: str = "When was the lease signed?") -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def test_a_client_budgets_its_request_and_is_told_what_happened(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    fake, url, _ = stack
    client = _anthropic(url, **{"X-Ctxbudget-Session": "budgeted", "X-Ctxbudget-Max-Context-Tokens": "2000"})
    raw = client.messages.with_raw_response.create(
        model="claude-sonnet-4-6", max_tokens=200, messages=_ask(LONG + " When was the lease signed?")
    )
    headers = raw.headers
    assert headers["x-ctxbudget-trimmed"] == "true" and headers["x-ctxbudget-session"] == "budgeted"
    assert int(headers["x-ctxbudget-tokens-before"]) > 2000 >= int(headers["x-ctxbudget-tokens-after"])
    assert float(headers["x-ctxbudget-estimated-cost-usd"]) > 0
    assert len(fake.received[-1]["messages"][0]["content"]) < len(LONG)
    assert not any(k.startswith("x-ctxbudget") for k in fake.headers[-1])  # never forwarded
    small = client.messages.with_raw_response.create(
        model="claude-sonnet-4-6", max_tokens=20, messages=_ask()
    )
    assert small.headers["x-ctxbudget-trimmed"] == "false"


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("X-Ctxbudget-Max-Context-Tokens", "lots"),
        ("X-Ctxbudget-Max-Context-Tokens", "-5"),
        ("X-Ctxbudget-Cost-Ceiling", "nan"),
        ("X-Ctxbudget-Cost-Ceiling", "0"),
        ("X-Ctxbudget-Cost-Ceiling", "0_1"),  # float() reads it as 1
        ("X-Ctxbudget-Policy", "legal-review"),  # not allowed by this server
        ("X-Ctxbudget-Cost-Cieling", "0.01"),  # not a header of the table
    ],
)
def test_a_bad_ctxbudget_header_is_a_400_naming_it(
    stack: tuple[FakeUpstream, str, Path], header: str, value: str
) -> None:
    fake, url, _ = stack
    with pytest.raises(anthropic.BadRequestError, match=header.lower()):
        _anthropic(url, **{header: value}).messages.create(
            model="claude-sonnet-4-6", max_tokens=20, messages=_ask()
        )
    assert fake.received == []
    # count_tokens too (it answered 200 to any of them)
    counted = httpx.post(
        url + "/v1/messages/count_tokens",
        json={"model": "claude-sonnet-4-6", "messages": _ask()},
        headers={header: value},
    )
    assert counted.status_code == 400 and header.lower() in counted.text.lower()


def test_a_client_cost_ceiling_only_lowers_the_servers(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "c.db", cost_ceiling_usd=0.1) as (fake, url):
        low = _anthropic(url, **{"X-Ctxbudget-Cost-Ceiling": "0.000001"})
        with pytest.raises(anthropic.BadRequestError, match="ceiling"):
            low.messages.create(model="claude-sonnet-4-6", max_tokens=20, messages=_ask())
        high = _anthropic(url, **{"X-Ctxbudget-Cost-Ceiling": "1000"})
        with pytest.raises(anthropic.BadRequestError, match="ceiling"):  # still the server's 0.1
            high.messages.create(model="claude-sonnet-4-6", max_tokens=20_000, messages=_ask())
        assert fake.received == []


def test_the_server_budget_applies_to_every_request(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "s.db", max_context_tokens=1500) as (fake, url):
        reply = _openai(url).chat.completions.with_raw_response.create(
            model="gpt-4o", max_tokens=100, messages=_ask(LONG + " When?")
        )
        assert int(reply.headers["x-ctxbudget-tokens-after"]) <= 1500
        assert len(fake.received[-1]["messages"][0]["content"]) < len(LONG)


def test_upstream_status_codes_and_headers_pass_through(stack: tuple[FakeUpstream, str, Path]) -> None:
    _, url, _ = stack
    client = _anthropic(url)
    with pytest.raises(anthropic.RateLimitError) as limited:
        client.messages.create(model="fault-429", max_tokens=10, messages=_ask())
    response = limited.value.response
    assert response.status_code == 429 and response.headers["retry-after"] == "7"
    assert response.headers["request-id"] == "req_fake_1"
    assert response.headers["x-ratelimit-remaining-requests"] == "0"
    for model, status in (("fault-503", 503), ("fault-529", 529), ("fault-500", 500)):
        with pytest.raises(anthropic.APIStatusError) as failed:
            client.messages.create(model=model, max_tokens=10, messages=_ask())
        assert failed.value.status_code == status, model
    with pytest.raises(anthropic.InternalServerError) as plain:
        client.messages.create(model="fault-plain-500", max_tokens=10, messages=_ask())
    body = plain.value.response.json()  # not text: the provider's error shape
    assert body["type"] == "error" and "Internal Server Error" in body["error"]["message"]


def test_an_upstream_redirect_is_a_502_naming_it_and_no_turn_is_stored(tmp_path: Path) -> None:
    """A 3xx was passed on without its Location (nothing could follow it) and stored as a turn."""
    with gateway_over_fake(tmp_path / "r.db") as (_fake, url):
        client = anthropic_client(url, **{"X-Ctxbudget-Session": "moved"})
        for _ in range(2):
            with pytest.raises(anthropic.APIStatusError) as moved:
                client.messages.create(model="fault-redirect", max_tokens=10, messages=_ask())
            assert moved.value.status_code == 502
            message = moved.value.response.json()["error"]["message"]
            assert "307" in message and "https://api.example.com/v1/messages" in message
            assert "--anthropic-upstream" in message
        metrics = httpx.get(url + "/metrics").text
    assert 'ctxbudget_upstream_errors_total{kind="redirect"} 2.0' in metrics
    assert SQLiteStore(tmp_path / "r.db").count_turns("moved") == 0


def test_an_answer_cut_mid_emoji_is_stored(tmp_path: Path) -> None:
    """A lone surrogate escape in the answer's text (valid JSON) reached the client and was never
    stored: the store could not encode it."""
    with gateway_over_fake(tmp_path / "e.db") as (_fake, url):
        client = anthropic_client(url, **{"X-Ctxbudget-Session": "emoji"})
        reply = client.messages.create(model="fault-lone-surrogate", max_tokens=10, messages=_ask())
        metrics = httpx.get(url + "/metrics").text
    assert reply.content[0].text == "cut emoji \ud83d here"  # type: ignore[union-attr]
    (turn,) = SQLiteStore(tmp_path / "e.db").turns("emoji")
    assert turn.answer == "cut emoji \ufffd here"
    assert "ctxbudget_record_failures_total{" not in metrics


def test_a_broken_upstream_answer_is_a_502_and_a_given_answer_always_arrives(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    _fake, url, store = stack
    with pytest.raises(anthropic.APIStatusError) as bad:
        _anthropic(url).messages.create(model="fault-badjson", max_tokens=10, messages=_ask())
    assert bad.value.status_code == 502 and bad.value.response.json()["type"] == "error"
    with pytest.raises(anthropic.APIStatusError) as html:  # a portal answering 200 in HTML
        _anthropic(url).messages.create(model="fault-html-200", max_tokens=10, messages=_ask())
    assert html.value.status_code == 502 and html.value.response.json()["type"] == "error"
    assert html.value.response.headers["content-type"] == "application/json"  # not the portal's
    listed = httpx.post(
        url + "/v1/messages", json={"model": "fault-list", "max_tokens": 5, "messages": _ask()}
    )
    assert listed.status_code == 200 and listed.json() == [1, 2, 3]
    client = _anthropic(url, **{"X-Ctxbudget-Session": "nan"})
    answer = client.messages.create(model="fault-nan-usage", max_tokens=10, messages=_ask())
    assert answer.content[0].text == "fine"
    turns = SQLiteStore(store).turns("nan")
    assert len(turns) == 1 and turns[0].usage["actual"]["input_tokens"] == 0


def test_an_answer_that_answers_nothing_is_passed_on_and_not_stored(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    """A 200 whose body is an error (either provider's shape), null or an empty object, and a
    stream that errs mid-way, holds data no SDK reads, or is only ``[DONE]``: passed on as they
    came, and no turn stored (each was a turn with an empty answer, and the SDK's retry a second;
    an event of bytes that are not UTF-8 was read replaced, and stored as answered)."""
    _fake, url, store = stack
    cases = [
        (
            "/v1/messages",
            "fault-error-200",
            {"type": "error", "error": {"type": "overloaded_error", "message": "x"}},
        ),
        (
            "/v1/chat/completions",
            "fault-openai-error-200",
            {"error": {"message": "oops", "type": "server_error"}},
        ),
        ("/v1/responses", "fault-openai-error-200", {"error": {"message": "oops", "type": "server_error"}}),
        ("/v1/messages", "fault-null-200", None),
        ("/v1/chat/completions", "fault-object-200", {}),
    ]
    for n, (path, model, expected) in enumerate(cases):
        body: dict[str, Any] = {"model": model, "max_tokens": 5}
        body |= {"input": "When?"} if path == "/v1/responses" else {"messages": _ask()}
        answered = httpx.post(url + path, json=body, headers={"x-ctxbudget-session": f"none-{n}"})
        assert (answered.status_code, answered.json()) == (200, expected)
    mid = _anthropic(url, **{"X-Ctxbudget-Session": "none-mid"})
    with (
        pytest.raises(anthropic.APIStatusError, match="Overloaded"),
        mid.messages.stream(model="fault-error-mid-stream", max_tokens=10, messages=_ask()) as stream,
    ):
        stream.get_final_message()
    chat = openai_client(url, **{"X-Ctxbudget-Session": "none-garbled"})
    with pytest.raises(ValueError):  # the SDK's own JSON error
        list(chat.chat.completions.create(model="fault-garbled-chunk", stream=True, messages=_ask()))
    latin1 = httpx.post(  # read to its end (an SDK raises at the event and leaves: stored or not by timing)
        url + "/v1/messages",
        json={"model": "fault-latin1-chunk", "max_tokens": 10, "stream": True, "messages": _ask()},
        headers={"x-ctxbudget-session": "none-latin1"},
    )
    assert latin1.status_code == 200 and b'"text": "caf\xe9"' in latin1.content  # as it came
    comment = httpx.post(
        url + "/v1/chat/completions",
        json={"model": "fault-latin1-comment", "stream": True, "messages": _ask()},
        headers={"x-ctxbudget-session": "none-latin1-comment"},
    )
    assert comment.status_code == 200 and comment.content.startswith(b": keep-alive \xff\n\n")
    done = httpx.post(
        url + "/v1/chat/completions",
        json={"model": "fault-done-only", "stream": True, "messages": _ask()},
        headers={"x-ctxbudget-session": "none-done"},
    )
    assert done.status_code == 200 and done.content == b"data: [DONE]\n\n"  # as it came
    assert not [name for name in SQLiteStore(store).names() if name.startswith("none")]


def test_failures_before_sending_are_400s_in_the_provider_shape(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    fake, url, _ = stack
    cases = [
        b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "\\ud800"}]}',
        b'{"model": "gpt-4o", "messages": ' + b"[" * 3000 + b"]" * 3000 + b"}",
        b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}], "t": NaN}',
        json.dumps(
            {
                "model": "claude-sonnet-4-6",
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "a", "content": ["x"]}],
                    }
                ],
            }
        ).encode(),
    ]
    cases += [  # a stream answered as one and n replies priced by them: the provider refuses these
        json.dumps({"model": "gpt-4o", "stream": "yes", "messages": _ask()}).encode(),
        json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 5, "stream": 1, "messages": _ask()}).encode(),
        json.dumps({"model": "gpt-4o", "n": -1, "messages": _ask()}).encode(),
        json.dumps({"model": "gpt-4o", "n": "3", "messages": _ask()}).encode(),
    ]
    for data in cases:
        route = "/v1/messages" if b"claude" in data else "/v1/chat/completions"
        response = httpx.post(url + route, content=data, headers={"content-type": "application/json"})
        assert response.status_code == 400, (data[:60], response.text)
        assert response.json()["error"]["type"] == "invalid_request_error"
    assert fake.received == []
    odd_key = httpx.post(
        url + "/v1/messages",
        json={"model": "claude-sonnet-4-6", "max_tokens": 5, "messages": _ask()},
        headers={"x-api-key": "sk-\u00e9t\u00e9".encode()},
    )
    assert odd_key.status_code in (200, 400) and odd_key.json().get("type") in ("message", "error")


def test_openai_code_for_a_request_that_cannot_fit(stack: tuple[FakeUpstream, str, Path]) -> None:
    _, url, _ = stack
    client = _openai(url, **{"X-Ctxbudget-Max-Context-Tokens": "300"})
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="gpt-4o", max_tokens=10, messages=[{"role": "system", "content": LONG}, *_ask()]
        )
    assert refused.value.code == "context_length_exceeded"
    # names the gateway's headers and settings, not the fit command's flags
    assert "X-Ctxbudget-Max-Context-Tokens" in refused.value.message
    assert (
        "--reserve-output-tokens" not in refused.value.message
        and "--on-overflow" not in refused.value.message
    )
    # with no budget below the model's window, raising one is not offered: it cannot help
    whole = "word " * 140_000  # over gpt-4o's 128,000 tokens
    with pytest.raises(openai.BadRequestError) as at_window:
        _openai(url).chat.completions.create(
            model="gpt-4o", max_tokens=10, messages=[{"role": "system", "content": whole}, *_ask()]
        )
    assert at_window.value.code == "context_length_exceeded"
    assert (
        "Max-Context-Tokens" not in at_window.value.message
        and "already the model's window" in at_window.value.message
    )


def test_upstream_urls_work_with_or_without_v1(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "v.db") as (fake, url):
        fake.gateway.config = type(fake.gateway.config)(
            **{
                **fake.gateway.config.__dict__,
                "openai_upstream": fake.gateway.config.openai_upstream + "/v1/",
            }
        )
        reply = _openai(url).chat.completions.create(model="gpt-4o", max_tokens=5, messages=_ask())
        assert reply.choices[0].message.content.startswith("echo")


def test_openai_streams_record_usage_the_client_did_not_ask_for(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    fake, url, store = stack
    chunks = list(
        _openai(url, **{"X-Ctxbudget-Session": "stream"}).chat.completions.create(
            model="gpt-4o", max_tokens=5, stream=True, messages=_ask()
        )
    )
    assert fake.received[-1]["stream_options"] == {"include_usage": True}
    assert all(c.usage is None for c in chunks) and chunks[-1].choices  # no extra chunk for the client
    assert SQLiteStore(store).turns("stream")[0].usage["actual"]["input_tokens"] > 0


def test_a_stream_refused_for_the_usage_the_gateway_asked_for_is_sent_as_the_client_sent_it(
    tmp_path: Path,
) -> None:
    # Azure OpenAI before its 2024-09-01 API versions refuses stream_options: every stream through
    # the gateway was a 400 where the client's own request was served.
    with gateway_over_fake(tmp_path / "s.db") as (fake, url):
        client = _openai(url, **{"X-Ctxbudget-Session": "azure"})
        for _ in range(2):
            chunks = list(
                client.chat.completions.create(
                    model="fault-no-stream-options", max_tokens=5, stream=True, messages=_ask()
                )
            )
            assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).startswith("echo")
            assert "stream_options" not in fake.received[-1]
        assert len(fake.received) == 4  # each stream asked once, then sent without: no process-wide switch
        turns = SQLiteStore(tmp_path / "s.db").turns("azure")
        assert len(turns) == 2 and "actual" not in turns[0].usage  # stored, its usage unknown
        own = {"include_usage": False}  # the client's own stream_options: its 400 is its answer
        with pytest.raises(openai.BadRequestError, match="stream_options"):
            list(
                client.chat.completions.create(
                    model="fault-no-stream-options",
                    stream=True,
                    stream_options=own,
                    messages=_ask(),  # type: ignore[arg-type]
                )
            )
        assert len(fake.received) == 5
        usage_kept = list(client.chat.completions.create(model="gpt-4o", stream=True, messages=_ask()))
        assert usage_kept and fake.received[-1]["stream_options"] == {"include_usage": True}
    with gateway_over_fake(tmp_path / "t.db") as (fake, url):  # another 400 is the client's answer
        with pytest.raises(openai.BadRequestError, match="bad request"):
            list(_openai(url).chat.completions.create(model="fault-400", stream=True, messages=_ask()))
        assert len(fake.received) == 1 and fake.received[0]["stream_options"] == {"include_usage": True}


def test_one_poisoned_answer_cannot_lock_a_model_out(stack: tuple[FakeUpstream, str, Path]) -> None:
    _, url, _ = stack
    client = _anthropic(url)
    client.messages.create(model="poison-usage", max_tokens=10, messages=_ask())  # bills 1e9 tokens
    # a request of about 5,700 estimated tokens in this model's 8,000: refused or cut if poisoned
    raw = client.messages.with_raw_response.create(
        model="poison-usage", max_tokens=10, messages=_ask(LONG[:20_000])
    )
    assert raw.headers["x-ctxbudget-trimmed"] == "false"
    metrics = httpx.get(url + "/metrics").text
    assert 'ctxbudget_calibration_ignored_total{model="fault-500"} 2.0' in metrics  # both billed 1e9


def test_calibration_stays_in_its_band_and_comes_back_down() -> None:
    calibration = Calibration(window=3)
    assert calibration.observe("m", 100, 10**9, default=1.3) == 1.3  # outside the band: ignored
    assert calibration.ignored == 1
    assert calibration.observe("m", 100, 200, default=1.3) == 1.625  # a bounded step up
    for _ in range(3):
        factor = calibration.observe("m", 100, 110, default=1.3)
    assert factor == 1.3  # back to the catalog's, never below it


def test_usage_that_is_not_a_count_is_read_as_zero() -> None:
    usage = normalize_usage(
        "anthropic", {"input_tokens": float("nan"), "output_tokens": "7", "cache_read_input_tokens": -4}
    )
    assert usage is not None and set(usage.to_dict().values()) == {0}
    assert normalize_usage("openai", [1, 2]) is None
    # more cached than prompted: nothing uncached, never a negative cost
    odd = normalize_usage("openai", {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 50}})
    assert odd is not None and odd.uncached_tokens == 0 and odd.cache_read_tokens == 10


def test_one_hour_cache_writes_are_read_from_the_usage() -> None:
    usage = normalize_usage(
        "anthropic",
        {
            "input_tokens": 10,
            "cache_creation_input_tokens": 3000,
            "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000},
            "output_tokens": 5,
        },
    )
    assert usage is not None and (usage.cache_write_tokens, usage.cache_write_1h_tokens) == (3000, 2000)


def test_a_null_usage_field_later_in_a_stream_keeps_the_earlier_value() -> None:
    from ctxbudget.gateway.providers import ANTHROPIC, StreamState

    state = StreamState(ANTHROPIC)
    start = {
        "type": "message_start",
        "message": {"usage": {"input_tokens": 1200, "cache_read_input_tokens": 30}},
    }
    delta = {"type": "message_delta", "usage": {"output_tokens": 9, "input_tokens": None}}
    for event in (start, delta, {"type": "message_stop"}):
        state.feed(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
    assert state.usage == {"input_tokens": 1200, "cache_read_input_tokens": 30, "output_tokens": 9}


def test_metrics_and_session_state_stay_bounded(tmp_path: Path) -> None:
    options = {"unknown_model": "floor", "max_sessions_in_memory": 5, "allowed_policies": ("legal-review",)}
    with gateway_over_fake(tmp_path / "b.db", **options) as (fake, url):
        client = _anthropic(url)
        for n in range(12):
            client.with_options(default_headers={"X-Ctxbudget-Session": f"s{n}"}).messages.create(
                model=f"made-up-model-{n}", max_tokens=5, messages=_ask()
            )
            policy = {"X-Ctxbudget-Session": f"p{n}", "X-Ctxbudget-Policy": "legal-review"}
            client.with_options(default_headers=policy).messages.create(
                model="claude-sonnet-4-6", max_tokens=5, messages=_ask()
            )
        metrics = httpx.get(url + "/metrics").text
        assert "made-up-model" not in metrics and 'model="other"' in metrics
        assert len(fake.gateway.memory.previous) == 5  # the sessions' previous turns, bounded


def test_the_tool_use_system_prompt_is_not_read_as_estimate_error() -> None:
    from ctxbudget.formats.tool_prompt import tool_prompt_tokens
    from ctxbudget.gateway.usage import covered_by_estimate

    tool = {"name": "lookup", "input_schema": {"type": "object"}}
    body: dict[str, Any] = {"model": "claude-sonnet-4-6", "tools": [tool], "messages": _ask()}
    assert tool_prompt_tokens("claude-sonnet-4-6", body) == 346
    assert tool_prompt_tokens("claude-sonnet-4-6", {**body, "tool_choice": {"type": "any"}}) == 313
    assert tool_prompt_tokens("claude-3-opus-20240229", body) == 530
    assert tool_prompt_tokens("gpt-4o", body) == 0 and tool_prompt_tokens("claude-sonnet-4-6", _ask()[0]) == 0
    server_tool = {"type": "web_search_20250305", "name": "web_search"}
    assert covered_by_estimate(body, []) and not covered_by_estimate({**body, "tools": [server_tool]}, [])
    assert not covered_by_estimate(body, ["$.messages[0].content[1]: image"])


def test_session_commands_report_gateway_turns_with_the_providers_usage(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    from click.testing import CliRunner

    from ctxbudget.cli import main

    _fake, url, store = stack
    reply = _anthropic(url, **{"X-Ctxbudget-Session": "billed"}).messages.create(
        model="claude-sonnet-4-6", max_tokens=20, messages=_ask()
    )
    billed = reply.usage.input_tokens
    runner = CliRunner()
    shown = runner.invoke(main, ["session", "show", "billed", "--store", str(store)]).output
    assert f"turn 1: {billed:,} tokens" in shown and "(provider)" in shown and "$0.0000" not in shown
    listed = runner.invoke(main, ["session", "list", "--store", str(store)]).output
    assert f"billed\t1 turn\t{billed:,} input tokens" in listed
    exported = json.loads(runner.invoke(main, ["session", "export", "billed", "--store", str(store)]).output)
    figures = exported["turns"][0]["figures"]
    assert figures["source"] == "provider" and figures["input_tokens"] == billed and figures["cost_usd"] > 0


def test_count_with_upstream_decides_only_what_the_estimate_cannot(tmp_path: Path) -> None:
    body = {"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": _ask(LONG[:6_000] + " When?")}
    with gateway_over_fake(tmp_path / "n.db", count_with_upstream=True) as (fake, url):
        estimate = httpx.post(url + "/v1/messages/count_tokens", json=body).json()["input_tokens"]
        exact = len(json.dumps({k: body[k] for k in ("model", "messages")})) // 4
        proxy = estimate / 1.3
        # a budget the request fits by the exact count but not by the estimate's margin
        budget = (max(exact, round(proxy)) + estimate) // 2 + 10
        assert max(exact, proxy) + 10 < budget < estimate + 10
        client = _anthropic(url, **{"X-Ctxbudget-Max-Context-Tokens": str(budget)})
        first = client.messages.with_raw_response.create(**body)
        assert first.headers["x-ctxbudget-trimmed"] == "false" and len(fake.counted) == 1
        assert unmarked(fake.received[-1]["messages"]) == body["messages"]  # sent whole
        client.messages.create(**body)
        assert len(fake.counted) == 1  # remembered by content
        small = client.messages.with_raw_response.create(**{**body, "messages": _ask()})
        assert small.headers["x-ctxbudget-trimmed"] == "false" and len(fake.counted) == 1  # not asked
        fake.count_fails = True
        other = {**body, "messages": _ask(LONG[:6_000] + " Why?")}
        cut = client.messages.with_raw_response.create(**other)
        assert cut.headers["x-ctxbudget-trimmed"] == "true"  # the estimate stands on failure


@pytest.mark.parametrize("wait", [3.0, 0.2])
def test_a_locked_store_delays_the_answer_or_withholds_it(tmp_path: Path, wait: float) -> None:
    """Another writer holds the store's lock for a second: with a busy timeout longer than that the
    answer waits for its turn to be stored; with a shorter one the answer is withheld (503, the
    failure counted), and once the lock is gone the same request is answered and stored."""
    import sqlite3
    import threading

    store = tmp_path / "locked.db"
    with gateway_over_fake(store, store_busy_timeout_seconds=wait) as (_, url):
        holder = sqlite3.connect(store, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")
        released = threading.Event()
        release = threading.Timer(1.0, lambda: (holder.execute("COMMIT"), released.set()))
        client = _anthropic(url, **{"X-Ctxbudget-Session": "locked"})
        if wait > 1.0:
            release.start()
            reply = client.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=_ask())
            assert released.is_set() and reply.content[0].text.startswith("echo")
        else:
            # held until the answer is withheld (a timer could free it before a slow machine's
            # request reached the store, and the answer then came)
            with pytest.raises(anthropic.APIStatusError) as refused:
                client.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=_ask())
            assert refused.value.status_code == 503 and "withheld" in str(refused.value)
            holder.execute("COMMIT")
            deadline = time.monotonic() + 5  # the store is tried again once a second
            while httpx.get(url + "/healthz").status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.1)
            client.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=_ask())
        metrics = httpx.get(url + "/metrics").text
    assert len(SQLiteStore(store).turns("locked")) == 1
    failures = 'ctxbudget_record_failures_total{error="StoreError"} 1.0' in metrics
    assert failures == (wait < 1.0) and "ctxbudget_store_up 1.0" in metrics


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_streams_are_parsed_by_the_eventsource_rules_and_passed_byte_for_byte(newline: bytes) -> None:
    from ctxbudget.gateway.providers import OPENAI, StreamState

    def event(*data: str) -> bytes:
        return b"".join(b"data: " + d.encode() + newline for d in data) + newline

    chunk = {"choices": [{"index": 0, "delta": {"content": "h\u00e9llo"}}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}
    text = json.dumps(chunk)
    cut = text.index("[")  # between two JSON tokens, where the joining newline is whitespace
    stream = (
        event(text[:cut], text[cut:])  # one event, its data on two lines: joined by a newline
        + event(json.dumps(usage))
        + event("[DONE]")
        + b": keep-alive"
        + newline
        + newline  # after the end: a bare CR's last line ends at the close
    )
    for hold in (False, True):
        state = StreamState(OPENAI, hold_usage=hold)
        # fed a byte at a time: events, lines, CRLFs and characters split across chunks
        sent = b"".join(state.feed(stream[i : i + 1]) for i in range(len(stream))) + state.flush()
        assert state.finished and state.usage["prompt_tokens"] == 9
        assert "".join(state.text) == "h\u00e9llo"
        expected = stream if not hold else stream.replace(event(json.dumps(usage)), b"")
        assert sent == expected


def test_a_stream_asked_for_usage_by_the_gateway_reaches_the_client_without_its_null_usage() -> None:
    # OpenAI adds "usage": null to every chunk of a stream that asks for usage: with the gateway's
    # ask, the client got a key its request never asked for (a raw parser reads it as present).
    from ctxbudget.gateway.providers import OPENAI, StreamState

    quoted = '{"choices":[{"index":0,"delta":{"content":"say \\"usage\\":null,"}}],"usage":null}'
    stream = (
        b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}\n\n'
        b'data: {"usage": null, "id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        + b"data: "
        + quoted.encode()
        + b"\n\n"
        b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}\n\n'
        b"data: [DONE]\n\n"
    )
    held = StreamState(OPENAI, hold_usage=True)
    sent = held.feed(stream) + held.flush()
    events = [json.loads(line[6:]) for line in sent.split(b"\n") if line.startswith(b"data: {")]
    assert [("usage" in e) for e in events] == [False, False, False]
    assert events[2]["choices"][0]["delta"]["content"] == 'say "usage":null,'  # text is text
    assert held.usage["prompt_tokens"] == 9 and "".join(held.text).startswith("hi")
    asked = StreamState(OPENAI)  # the client asked for it: its stream as it came
    assert asked.feed(stream) + asked.flush() == stream


def test_a_stream_not_labelled_as_events_is_looked_at_by_its_first_line_not_read_whole() -> None:
    # Read whole before it was relayed, a text/plain stream reached its client only at its end.
    from ctxbudget.gateway.answers import opening

    async def first_then_wait() -> Any:
        pending = asyncio.Event()
        yield b"data: {}"
        yield b"\n\n"
        await pending.wait()  # the rest of the answer, not come yet
        yield b"never"

    async def look() -> bytes:
        head, rest = await opening(httpx.Response(200, content=first_then_wait()))
        await rest.aclose()  # type: ignore[attr-defined]
        return head

    assert asyncio.run(asyncio.wait_for(look(), timeout=10)) == b"data: {}\n\n"


def test_a_budget_header_cannot_lift_an_unknown_model_above_the_floor(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "f.db", unknown_model="floor") as (_, url):
        client = _openai(url, **{"X-Ctxbudget-Max-Context-Tokens": "1000000000"})
        raw = client.chat.completions.with_raw_response.create(
            model="my-local-llama", max_tokens=10, messages=_ask(LONG * 3)
        )
        assert int(raw.headers["x-ctxbudget-tokens-after"]) <= 8191


def test_an_unknown_model_under_a_policy_is_refused_as_unknown_whatever_the_floor(tmp_path: Path) -> None:
    """A policy assembles only for a model the catalog knows; under the floor the refusal was an
    ``invalid_request`` that named the catalog and not why the floor did not apply."""
    with gateway_over_fake(tmp_path / "f.db", unknown_model="floor", allowed_policies=("legal-review",)) as (
        fake,
        url,
    ):
        client = _openai(url, **{"X-Ctxbudget-Policy": "legal-review"})
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model="my-local-llama", max_tokens=10, messages=_ask())
        assert refused.value.code == "unknown_model"
        assert "a policy assembles only for a model the catalog knows" in refused.value.message
        assert fake.received == []


def test_policy_mode_honours_the_request_budget_the_ceiling_and_the_reply_size(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "p.db", allowed_policies=("legal-review",)) as (fake, url):
        policy = {"X-Ctxbudget-Policy": "legal-review"}
        raised = _anthropic(url, **policy, **{"X-Ctxbudget-Cost-Ceiling": "1000"})
        with pytest.raises(anthropic.BadRequestError, match=r"ceiling \$0\.45"):  # the policy's stands
            # ~14k pinned tokens written for an hour at Opus prices, plus the expected reply
            system = LONG * 2
            raised.messages.create(model="claude-opus-4-1", max_tokens=4000, system=system, messages=_ask())
        tight = _anthropic(url, **policy, **{"X-Ctxbudget-Max-Context-Tokens": "600"})
        with pytest.raises(anthropic.BadRequestError):
            tight.messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=_ask(LONG))
        assert fake.received == []
        body = {"model": "claude-sonnet-4-6", "max_tokens": 50_000, "messages": _ask()}
        httpx.post(url + "/v1/messages", json=body, headers=policy).raise_for_status()
        assert fake.received[-1]["max_tokens"] == 4096  # capped at the policy's max_output_tokens
        # a thinking budget is part of the reply: lowered with it, in the client's proportion
        thinking = {**body, "max_tokens": 16_000, "thinking": {"type": "enabled", "budget_tokens": 8_000}}
        httpx.post(url + "/v1/messages", json=thinking, headers=policy).raise_for_status()
        sent = fake.received[-1]
        assert sent["max_tokens"] == 4096 and sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        thinking["thinking"] = {"type": "enabled", "budget_tokens": 15_999}
        httpx.post(url + "/v1/messages", json=thinking, headers=policy).raise_for_status()
        assert fake.received[-1]["thinking"]["budget_tokens"] == 4095  # always below max_tokens


def test_policy_mode_refuses_thinking_its_reply_size_cannot_hold() -> None:
    policy = dataclasses.replace(get_policy("legal-review"), max_output_tokens=1000)
    body = {"max_tokens": 8000, "thinking": {"type": "enabled", "budget_tokens": 4000}}
    with pytest.raises(Refusal, match="no room for extended thinking") as refused:
        capped_output(body, policy)
    assert refused.value.status == 400
    kept = {"max_tokens": 8000, "thinking": {"type": "enabled", "budget_tokens": 500}}
    assert capped_output(kept, policy)["thinking"] == kept["thinking"]  # already below the cap
    assert "the policy's max_output_tokens" in str(refused.value)


def test_policy_mode_names_the_requests_own_reply_size_when_it_leaves_no_room_for_thinking(
    tmp_path: Path,
) -> None:
    # The 300 was the client's max_tokens: "(the policy's max_output_tokens)" sent the user to the policy.
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 300,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "When was notice given?"}],
    }
    headers = {"anthropic-version": "2023-06-01", "X-Ctxbudget-Policy": "legal-review"}
    with gateway_over_fake(tmp_path / "t.db", allowed_policies=("legal-review",)) as (fake, url):
        answer = httpx.post(url + "/v1/messages", json=body, headers=headers, timeout=30)
    assert answer.status_code == 400 and not fake.received
    assert "the reply of 300 tokens (the request's max_tokens)" in answer.json()["error"]["message"]


def test_a_refusal_after_the_body_was_read_names_its_session_and_figures(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "r.db", cost_ceiling_usd=0.000001) as (_, url):
        client = _anthropic(url, **{"X-Ctxbudget-Session": "refused"})
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=_ask())
        headers = refused.value.response.headers
        assert (
            headers["x-ctxbudget-session"] == "refused"
            and float(headers["x-ctxbudget-estimated-cost-usd"]) > 0
        )


@pytest.mark.parametrize("content", [b'{"model": "gpt-4o", "messages": [', b"[1, 2]", b'{"max_tokens": NaN}'])
def test_a_body_that_cannot_be_read_is_refused_naming_the_session_its_header_names(
    stack: tuple[FakeUpstream, str, Path], content: bytes
) -> None:
    """The docs say every answer once the request was read names its session: a truncated body,
    an array or a NaN got a 400 without it."""
    _, url, _ = stack
    headers = {"content-type": "application/json", "X-Ctxbudget-Session": "matter-42"}
    refused = httpx.post(url + "/v1/chat/completions", content=content, headers=headers)
    assert refused.status_code == 400 and refused.headers["x-ctxbudget-session"] == "matter-42"


@pytest.mark.parametrize(
    ("path", "content", "key"),
    [
        (
            "/v1/chat/completions",
            b'{"model":"gpt-4o","messages":[{"role":"user","content":"the long question"}],'
            b'"messages":[{"role":"user","content":"second"}]}',
            "messages",
        ),
        ("/v1/chat/completions", b'{"model":"gpt-4o","model" : "gpt-4","messages":[]}', "model"),
        ("/v1/responses", b'{"model":"gpt-4o","input":"hi","input":"bye"}', "input"),
    ],
)
def test_a_key_given_twice_is_refused_as_the_cli_refuses_it(
    stack: tuple[FakeUpstream, str, Path], path: str, content: bytes, key: str
) -> None:
    # JSON keeps the last: the first messages were sent nowhere and no report said so, where the
    # CLI refuses the same body.
    fake, url, _ = stack
    headers = {"content-type": "application/json", "X-Ctxbudget-Session": "twice"}
    refused = httpx.post(url + path, content=content, headers=headers)
    assert refused.status_code == 400 and not fake.received
    assert f"the key '{key}' is given twice in one object" in refused.json()["error"]["message"]
    escaped = b'{"model":"gpt-4o","messages":[{"role":"user","content":"a \\": b"}]}'  # a mark, no key
    assert httpx.post(url + "/v1/chat/completions", content=escaped, headers=headers).status_code == 200


def test_calibration_is_per_catalog_entry_and_one_answer_in_twenty_does_not_pin_it(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    calibration = Calibration()
    for n in range(60):
        factor = calibration.observe("m", 100, 250 if n % 20 == 0 else 120, default=1.3)
    assert factor == 1.3
    _, url, _ = stack
    client = _anthropic(url)
    for n in range(5):
        client.messages.create(model=f"claude-sonnet-4-6-{n}", max_tokens=5, messages=_ask())
    gateway_state = stack[0].gateway.calibration.snapshot()
    assert list(gateway_state) == ["claude-sonnet-4-6"]


def test_unrouted_paths_answer_in_the_provider_shape(stack: tuple[FakeUpstream, str, Path]) -> None:
    _, url, _ = stack
    with pytest.raises(openai.NotFoundError):
        _openai(url).models.list()
    missing = httpx.post(url + "/v1/messages/batches", json={})
    assert missing.status_code == 404 and missing.json()["type"] == "error"
    models = httpx.get(url + "/v1/models")  # what OpenAI-compatible tools ask at start-up
    assert models.status_code == 404 and models.json()["error"]["code"] == "not_found"
    asked = httpx.get(url + "/v1/models", headers={"anthropic-version": "2023-06-01"})
    assert asked.status_code == 404 and asked.json()["type"] == "error"  # Anthropic's SDK asked
    for method in ("OPTIONS", "TRACE"):  # methods the router itself refuses: 405, in the API's shape
        answer = httpx.request(method, url + "/v1/messages")
        assert answer.status_code == 405 and answer.headers["allow"] == "POST", method
        assert answer.json()["type"] == "error" and "POST /v1/messages" in answer.json()["error"]["message"]
    assert httpx.get(url + "/v1/messages").json()["type"] == "error"
    chat = httpx.request("OPTIONS", url + "/v1/chat/completions")
    assert chat.status_code == 405 and chat.json()["error"]["code"] == "method_not_allowed"


def test_repeated_headers_and_the_query_string_reach_the_upstream(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    fake, url, _ = stack
    body = {"model": "claude-sonnet-4-6", "max_tokens": 5, "messages": _ask()}
    headers = [("anthropic-beta", "a-2025"), ("anthropic-beta", "b-2025"), ("x-api-key", "k")]
    httpx.post(url + "/v1/messages?beta=true", json=body, headers=headers).raise_for_status()
    assert fake.betas[-1] == ["a-2025", "b-2025"]
    assert fake.paths[-1] == "/v1/messages?beta=true"


def test_billed_fields_outside_messages_are_counted_and_n_replies_priced(tmp_path: Path) -> None:
    schema = {"name": "s", "schema": {"type": "object", "description": "field " * 3000}}
    with gateway_over_fake(tmp_path / "o.db", max_context_tokens=2000, cost_ceiling_usd=0.5) as (fake, url):
        client = _openai(url)
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(
                model="gpt-4o",
                max_tokens=10,
                messages=_ask(),
                response_format={"type": "json_schema", "json_schema": schema},  # type: ignore[typeddict-item]
            )
        with pytest.raises(openai.BadRequestError, match="ceiling"):
            client.chat.completions.create(model="gpt-4o", max_tokens=1500, n=128, messages=_ask())
        assert fake.received == []


def test_policy_mode_counts_the_tool_definitions(tmp_path: Path) -> None:
    tools = [
        {"name": f"t{n}", "description": "tool " * 2000, "input_schema": {"type": "object"}}
        for n in range(20)
    ]
    with gateway_over_fake(tmp_path / "t.db", policy="legal-review") as (fake, url):
        with pytest.raises(anthropic.BadRequestError, match="tool definitions"):
            _anthropic(url).messages.create(
                model="claude-sonnet-4-6",
                max_tokens=100,
                messages=_ask(),
                tools=tools,  # type: ignore[arg-type]
            )
        assert fake.received == []


def test_a_stream_cut_mid_event_ends_in_an_error_the_sdk_raises(tmp_path: Path) -> None:
    from ctxbudget.gateway.providers import OPENAI, StreamState

    state = StreamState(OPENAI)
    first = b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'
    sent = state.feed(first + b'data: {"choices": [{"index": 0, "del')
    assert sent == first and state.flush() == b""  # the cut-off event never reaches the client


def test_a_done_after_a_messages_or_responses_end_leaves_it_whole() -> None:
    """A ``data: [DONE]`` after a Messages or Responses stream's end (compatible servers add it,
    in the end's chunk or after): the answer is whole; only a chat stream of no choice at all is
    no answer. A Responses stream so ended was taken for one that answered nothing."""
    from ctxbudget.gateway.providers import ANTHROPIC, OPENAI, RESPONSES, StreamState

    completed = {"type": "response.completed", "response": {"output": [], "usage": {"input_tokens": 3}}}
    ends = {
        ANTHROPIC: b'event: message_stop\ndata: {"type": "message_stop"}\n\n',
        RESPONSES: b"event: response.completed\ndata: " + json.dumps(completed).encode() + b"\n\n",
    }
    for provider, end in ends.items():
        for chunks in ([end + b"data: [DONE]\n\n"], [end, b"data: [DONE]\n\n"]):
            state = StreamState(provider)
            for chunk in chunks:
                state.feed(chunk)
            state.flush()
            assert state.finished and not state.failed, (provider.input_format, chunks)
    alone = StreamState(OPENAI)
    alone.feed(b"data: [DONE]\n\n")
    assert not alone.finished and alone.failed


def test_a_chat_stream_is_whole_at_a_clean_close_once_every_choice_finished() -> None:
    from ctxbudget.gateway.providers import OPENAI, StreamState

    def chunk(index: int, finish: str | None) -> bytes:
        choice = {"index": index, "delta": {"content": "x"}, "finish_reason": finish}
        return b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n"

    state = StreamState(OPENAI)
    state.feed(chunk(0, None) + chunk(1, None) + chunk(0, "stop"))
    assert state.flush() == b"" and not state.finished  # choice 1 never finished: cut short
    state = StreamState(OPENAI)
    state.feed(chunk(0, None) + chunk(1, "stop") + chunk(0, "length"))
    cut = b'data: {"choices": [], "usage": {"prompt'
    assert state.feed(cut) == b"" and state.flush() == b"" and state.finished  # a cut event is not passed
    state = StreamState(OPENAI)
    state.feed(chunk(0, None))
    last = chunk(0, "stop").removesuffix(b"\n\n")  # the finishing event, closed before its blank line
    assert state.feed(last) == b"" and state.flush() == last and state.finished  # passed, as it is stored
    state = StreamState(OPENAI)
    state.feed(b'data: {"choices": [], "usage": {"prompt_tokens": 3}}\n\n')
    assert state.flush() == b"" and not state.finished  # no choice at all: no answer


def test_a_chat_stream_with_an_error_after_its_finish_is_not_whole() -> None:
    from ctxbudget.gateway.providers import OPENAI, StreamState

    done = b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}\n\n'
    error = b'data: {"error": {"message": "boom"}}'
    for tail in (b"\n\n", b"\n\ndata: [DONE]\n\n"):  # closed cleanly, or with [DONE] (vLLM's way)
        state = StreamState(OPENAI)
        state.feed(done)
        assert state.feed(error + tail).startswith(error) and state.flush() == b""
        assert state.failed and not state.finished  # the upstream's error: no answer to store
    state = StreamState(OPENAI)
    state.feed(done)
    assert state.feed(error) == b"" and state.flush() == error  # its last event, unended: passed on
    assert state.failed and not state.finished


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


_ENDED_STREAMS = {  # an answer, its end event, then what an odd upstream sends after the end
    "anthropic": (
        _event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}})
        + _event({"type": "message_delta", "usage": {"output_tokens": 2}})
        + _event({"type": "message_stop"}),
        _event({"type": "error", "error": {"type": "api_error", "message": "late"}}),
    ),
    "openai": (
        _event({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]})
        + b"data: [DONE]\n\n",
        _event({"error": {"message": "late"}}),
    ),
    "responses": (
        _event({"type": "response.output_text.delta", "delta": "hi"})
        + _event({"type": "response.completed", "response": {"output": [], "usage": {"input_tokens": 1}}}),
        _event({"type": "response.output_text.delta", "delta": " EXTRA"}),
    ),
}


@given(st.sampled_from(sorted(_ENDED_STREAMS)), st.lists(st.integers(min_value=1, max_value=400), max_size=8))
def test_what_follows_a_stream_s_end_changes_nothing_of_the_turn_however_it_is_cut(
    name: str, cuts: list[int]
) -> None:
    """An error event (or a stray delta) after the end event, in the end's chunk, made the turn
    unstored (or its text longer); in a later chunk, it was stored as answered: the record
    depended on how the network cut the bytes. The client has the same bytes either way."""
    from ctxbudget.gateway.providers import StreamState

    provider = {"anthropic": ANTHROPIC, "openai": OPENAI, "responses": RESPONSES}[name]
    answer, after = _ENDED_STREAMS[name]
    stream = answer + after
    state, sent, at = StreamState(provider), b"", 0
    for cut in sorted({min(c, len(stream)) for c in cuts}):
        sent += state.feed(stream[at:cut])
        at = cut
    sent += state.feed(stream[at:]) + state.flush()
    assert sent == stream
    assert state.finished and "".join(state.text) == "hi"


def test_an_event_cut_off_at_the_close_is_neither_sent_nor_stored() -> None:
    """The last event of a chat stream with every choice finished, closed before its blank line,
    was dropped from what the client got, but its text was stored with the turn."""
    from ctxbudget.gateway.providers import StreamState

    state = StreamState(OPENAI)
    state.feed(_event({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}))
    tail = _event({"choices": [{"index": 0, "delta": {"content": " TAIL"}, "finish_reason": "stop"}]})
    assert state.feed(tail.removesuffix(b"\n\n")) == b"" and state.flush() == b""
    assert state.finished and "".join(state.text) == "hi"
    asked = StreamState(OPENAI, hold_usage=True)  # the gateway's own ask for usage: its record's
    asked.feed(_event({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}))
    usage = _event({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 2}})
    assert asked.feed(usage.removesuffix(b"\n\n")) == b"" and asked.flush() == b""
    assert asked.finished and asked.usage == {"prompt_tokens": 11, "completion_tokens": 2}


def test_usage_the_gateway_asked_for_is_held_back_after_the_end_too() -> None:
    """A usage-only chunk after ``[DONE]`` (compatible servers vary) reached the client, which had
    not asked for usage, once events after the end were passed on as they came."""
    from ctxbudget.gateway.providers import StreamState

    state = StreamState(OPENAI, hold_usage=True)
    answer = _event({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]})
    usage = _event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
    sent = state.feed(answer + b"data: [DONE]\n\n" + usage) + state.flush()
    assert sent == answer + b"data: [DONE]\n\n" and state.finished


def test_a_responses_answer_of_odd_content_is_read_as_no_text() -> None:
    """A message item whose ``content`` was a number was a TypeError while the answer was read: a
    502 in place of the answer the upstream gave."""
    for content in (5, True, 1.5, None, "text"):
        payload = {"output": [{"type": "message", "content": content}], "usage": {"input_tokens": 1}}
        assert RESPONSES.response_text(payload) == ""


def test_the_one_million_context_beta_widens_a_claude_window(stack: tuple[FakeUpstream, str, Path]) -> None:
    _, url, _ = stack
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": _ask(LONG * 60)}  # ~290k tokens
    plain = httpx.post(url + "/v1/messages", json=body, headers={"x-api-key": "k"})
    assert plain.headers["x-ctxbudget-trimmed"] == "true"
    beta = {"x-api-key": "k", "anthropic-beta": "context-1m-2025-08-07"}
    wide = httpx.post(url + "/v1/messages", json=body, headers=beta)
    assert wide.headers["x-ctxbudget-trimmed"] == "false"
    # the window is the beta's, not one the client gave over the model's: nothing to warn of
    assert "x-ctxbudget-warnings" not in wide.headers
    narrowed = httpx.post(
        url + "/v1/messages", json=body, headers={**beta, "x-ctxbudget-max-context-tokens": "900000"}
    )
    assert (
        narrowed.headers["x-ctxbudget-trimmed"] == "false" and "x-ctxbudget-warnings" not in narrowed.headers
    )
    # a Claude model the catalog prices nothing above its window for: the beta may not be granted
    haiku = httpx.post(url + "/v1/messages", json={**body, "model": "claude-3-haiku-20240307"}, headers=beta)
    told = haiku.headers["x-ctxbudget-warnings"]
    assert "1M-context beta (anthropic-beta) widened the window to 1,000,000 tokens" in told
    assert "claude-3-haiku" in told and "X-Ctxbudget-Max-Context-Tokens" not in told


def test_session_names_are_taken_as_sent_or_refused_never_cut(tmp_path: Path) -> None:
    """A UTF-8 name is stored and echoed as the client wrote it; a name over 200 characters, one
    that is not UTF-8 and one with a control character are refused (400), and nothing is sent."""
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    store = tmp_path / "names.db"
    with gateway_over_fake(store) as (fake, url):

        def post(name: bytes) -> httpx.Response:
            return httpx.post(url + "/v1/chat/completions", json=body, headers={"x-ctxbudget-session": name})

        unicode_name = "ü-日本語-🙂"
        ok = post(unicode_name.encode("utf-8"))
        # a Unicode space inside a name is a character of it; one at its start or end (which HTTP
        # does not strip, as it strips ASCII blanks) is refused: it prints as the name without it
        spaced = ["matter-42", "matter\u300042", "matter\u00a042"]
        answers = [post(name.encode("utf-8")) for name in spaced]
        edges = [post("matter-42\u3000".encode()), post("\u00a0matter-42".encode())]
        refused = [post(b"A" * 200 + b"-alice"), post(b"\xff\xfe-bad"), post(b"tab\there")]
        refused += [post("\u3000".encode()), post("a\u2028b".encode())]  # blank; a line break
        refused.append(post(b""))  # present but empty: refused, not taken for no name
        refused.append(post("matter-\u202e24".encode()))  # logged, it reads "matter-42"
        assert len(fake.received) == 4
    assert ok.status_code == 200 and ok.headers["x-ctxbudget-session"] == unicode_name
    assert [a.headers["x-ctxbudget-session"] for a in answers] == spaced
    assert [r.status_code for r in refused] == [400] * 7
    assert [r.status_code for r in edges] == [400, 400]
    assert "begins or ends with a blank" in edges[0].json()["error"]["message"]
    assert "bidirectional control" in refused[-1].json()["error"]["message"]
    assert "206 characters long" in refused[0].json()["error"]["message"]
    with pytest.raises(InvalidRequestError, match="is empty"):  # blanks only (clients cannot send it)
        named_session(" \t ")
    assert sorted(SQLiteStore(store).names()) == sorted([unicode_name, *spaced])


def test_a_stuck_count_endpoint_is_not_waited_for_longer_than_a_count_takes() -> None:
    async def ask() -> int | None:
        async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await asyncio.sleep(30)  # reads the request, never answers

        server = await asyncio.start_server(stall, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server, httpx.AsyncClient(timeout=600) as client:
            counter = UpstreamCounter(
                client, f"http://127.0.0.1:{port}/v1/messages/count_tokens", timeout=0.2
            )
            return await counter.count({"model": "m", "messages": []}, [], proxy_tokens=10)

    async def bounded() -> None:
        async with httpx.AsyncClient(timeout=0.05) as client:  # never above the client's own
            assert UpstreamCounter(client, "http://upstream.invalid").timeout == 0.05

    started = time.monotonic()
    assert asyncio.run(ask()) is None  # the estimate stands
    assert time.monotonic() - started < 10  # far from the stalled endpoint's 30 s
    asyncio.run(bounded())


def test_a_ctxbudget_header_sent_twice_must_say_one_thing(stack: tuple[FakeUpstream, str, Path]) -> None:
    fake, url, _ = stack
    body = {"model": "gpt-4o", "max_tokens": 5, "messages": _ask()}
    sent = len(fake.received)
    twice = [("x-ctxbudget-max-context-tokens", "100000"), ("x-ctxbudget-max-context-tokens", "60")]
    refused = httpx.post(url + "/v1/chat/completions", json=body, headers=twice)
    assert refused.status_code == 400 and "sent 2 times with different values" in refused.text
    ceilings = [("x-ctxbudget-cost-ceiling", "5"), ("x-ctxbudget-cost-ceiling", "0.001")]
    assert httpx.post(url + "/v1/chat/completions", json=body, headers=ceilings).status_code == 400
    policies = [("x-ctxbudget-policy", "l\u00e9gal".encode()), ("x-ctxbudget-policy", b"other")]
    named = httpx.post(url + "/v1/chat/completions", json=body, headers=policies)
    assert named.status_code == 400 and "'l\u00e9gal', 'other'" in named.json()["error"]["message"], (
        named.text
    )
    assert len(fake.received) == sent  # nothing was sent
    misspelled = {"X-Ctxbudget-Cost-Ceiling-Usd": "0.0000001"}  # not the ceiling's header: refused
    answer = httpx.post(url + "/v1/chat/completions", json=body, headers=misspelled)
    assert (
        answer.status_code == 400 and "x-ctxbudget-cost-ceiling-usd is not a ctxbudget header" in answer.text
    )
    assert len(fake.received) == sent  # nothing was sent
    same = [("x-ctxbudget-max-context-tokens", "5000"), ("x-ctxbudget-max-context-tokens", "5000")]
    assert httpx.post(url + "/v1/chat/completions", json=body, headers=same).status_code == 200


def test_policy_mode_prices_every_reply_and_caps_a_reply_the_client_left_open(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "n.db", allowed_policies=("legal-review",)) as (fake, url):
        policy = {"X-Ctxbudget-Policy": "legal-review"}
        ask = [{"role": "system", "content": "Review contracts."}, {"role": "user", "content": "Q?"}]
        many = {"model": "gpt-4o", "max_tokens": 4096, "n": 50, "messages": ask}  # 50 x 4,096 out
        refused = httpx.post(url + "/v1/chat/completions", json=many, headers=policy)
        assert refused.status_code == 400 and "ceiling" in refused.text and fake.received == []
        open_reply = {"model": "gpt-4o", "messages": ask}
        answer = httpx.post(url + "/v1/chat/completions", json=open_reply, headers=policy)
        assert answer.status_code == 200 and answer.headers["x-ctxbudget-trimmed"] == "false"  # all kept
        assert fake.received[-1]["max_completion_tokens"] == 4096  # the policy's, as it was priced
        turns = [
            {"role": r, "content": f"turn {n} " + "word " * 400}
            for n in range(30)
            for r in ("user", "assistant")
        ]
        long = {"model": "gpt-4o", "messages": [*ask[:1], *turns, ask[1]]}
        cut = httpx.post(
            url + "/v1/chat/completions", json=long, headers={**policy, "X-Ctxbudget-Session": "long"}
        )
        assert cut.status_code == 200 and cut.headers["x-ctxbudget-trimmed"] == "true"


def test_policy_mode_keeps_a_thinking_budget_below_the_reply_it_fills_in(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "t.db", allowed_policies=("legal-review",)) as (fake, url):
        body = {
            "model": "claude-sonnet-4-6",
            "messages": _ask(),
            "thinking": {"type": "enabled", "budget_tokens": 20_000},
        }
        httpx.post(
            url + "/v1/messages", json=body, headers={"X-Ctxbudget-Policy": "legal-review"}
        ).raise_for_status()
        sent = fake.received[-1]
        assert sent["max_tokens"] == 4096 and sent["thinking"]["budget_tokens"] == 4095


def test_a_streamed_answer_of_several_replies_is_recorded_as_its_first() -> None:
    from ctxbudget.gateway.providers import OPENAI, StreamState

    state = StreamState(OPENAI)
    for index, text in ((0, "Notice was "), (1, "Damages are "), (0, "given."), (1, "due.")):
        state.feed(
            f'data: {{"choices": [{{"index": {index}, "delta": {{"content": "{text}"}}}}]}}\n\n'.encode()
        )
    assert "".join(state.text) == "Notice was given."  # as the whole answer's choices[0]


def test_a_derived_session_tells_conversations_apart_by_their_system_messages() -> None:
    # A Chat Completions or Responses system prompt is a message: two apps whose conversations
    # open with the same "Hello" were one session (and in policy mode the second was refused).
    def chat(system: str, *later: dict[str, str]) -> dict[str, Any]:
        opening = [{"role": "system", "content": system}, {"role": "user", "content": "Hello"}]
        return {"model": "gpt-4o", "messages": [*opening, *later]}

    later = ({"role": "assistant", "content": "Hi."}, {"role": "user", "content": "Next?"})
    assert session_id(None, OPENAI, chat("You are a lawyer.")) != session_id(
        None, OPENAI, chat("You are a chef.")
    )
    assert session_id(None, OPENAI, chat("You are a lawyer.")) == session_id(
        None, OPENAI, chat("You are a lawyer.", *later)
    )
    developer = [{"role": "developer", "content": "Be terse."}, {"role": "user", "content": "Hello"}]
    other = [{"role": "developer", "content": "Be verbose."}, {"role": "user", "content": "Hello"}]
    body = {"model": "gpt-4o", "input": developer}
    assert session_id(None, RESPONSES, body) != session_id(None, RESPONSES, {**body, "input": other})
    anthropic_body = {
        "model": "claude-sonnet-4-5",
        "system": "You are a lawyer.",
        "messages": chat("x")["messages"][1:],
    }
    assert session_id(None, ANTHROPIC, anthropic_body) != session_id(
        None, ANTHROPIC, {**anthropic_body, "system": "Chef."}
    )


def test_a_derived_session_holds_while_the_client_moves_its_cache_marks() -> None:
    # Anthropic clients mark their newest message each turn (turning it into text blocks): the
    # first user message, marked in turn 1 and a plain string in turn 2, derived two sessions.
    mark = {"type": "ephemeral"}
    turn_1 = [
        {"role": "user", "content": [{"type": "text", "text": "Review the lease.", "cache_control": mark}]}
    ]
    turn_2 = [
        {"role": "user", "content": "Review the lease."},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": [{"type": "text", "text": "And the notice?", "cache_control": mark}]},
    ]
    system = [{"type": "text", "text": "You are a lawyer.", "cache_control": mark}]
    first = {"model": "claude-sonnet-4-5", "system": system, "messages": turn_1}
    later = {"model": "claude-sonnet-4-5", "system": "You are a lawyer.", "messages": turn_2}
    assert session_id(None, ANTHROPIC, first) == session_id(None, ANTHROPIC, later)
    other = {**later, "messages": [{"role": "user", "content": "Review the deed."}]}
    assert session_id(None, ANTHROPIC, other) != session_id(None, ANTHROPIC, later)


@pytest.mark.parametrize(
    ("sent", "tokens"),
    [("99999999999999", 10**12), ("000120", 120), (" 5000 ", 5000), ("1" + "0" * 400, 10**12)],
)
def test_a_token_header_larger_than_any_window_narrows_nothing(sent: str, tokens: int) -> None:
    """A whole number over 12 digits is a budget over any window (the model's then stands), not
    "not a whole number"; zero and non-numbers are still refused."""
    from starlette.datastructures import Headers

    from ctxbudget.gateway import GatewayConfig
    from ctxbudget.gateway.settings import SettingsError, request_settings

    asked = request_settings(GatewayConfig(), Headers({"x-ctxbudget-max-context-tokens": sent}))
    assert asked.max_context_tokens == tokens
    for bad in ("0", "000", "-5", "1e6", "", "\u00b2"):  # "²" is a digit to str.isdigit
        with pytest.raises(SettingsError, match="whole number of tokens > 0"):
            request_settings(GatewayConfig(), Headers({"x-ctxbudget-max-context-tokens": bad}))


def test_an_anthropic_client_is_told_the_refusals_code() -> None:
    """Anthropic's error shape has no code: the gateway's (prefix_changed, ...) stands beside the
    type, and a client error it has no type for is an invalid request, not a server's api_error."""
    from ctxbudget.gateway.providers import ANTHROPIC

    body = ANTHROPIC.error_body(409, "the pinned prefix changed", "prefix_changed")
    assert body == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "ctxbudget: the pinned prefix changed",  # the gateway's, not Anthropic's
            "code": "prefix_changed",
        },
    }
    assert ANTHROPIC.error_body(500, "boom", "internal")["error"]["type"] == "api_error"
    # said once, when the message already names ctxbudget
    assert ANTHROPIC.error_body(400, "ctxbudget: no", "x")["error"]["message"] == "ctxbudget: no"


def test_a_compressed_body_is_refused_and_the_sent_body_is_labelled_json(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    """A body in a content coding is 415 (it was read as text: 'not UTF-8 at byte 1'); the body
    sent upstream is the gateway's own JSON, labelled so whatever the client's label said."""
    import gzip

    fake, url, _ = stack
    body = json.dumps({"model": "gpt-4o", "max_tokens": 5, "messages": _ask()}).encode()
    packed = httpx.post(
        url + "/v1/chat/completions",
        content=gzip.compress(body),
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )
    assert packed.status_code == 415 and "Content-Encoding 'gzip'" in packed.text and not fake.received
    plain = httpx.post(url + "/v1/chat/completions", content=body, headers={"content-type": "text/plain"})
    assert plain.status_code == 200 and fake.headers[-1]["content-type"] == "application/json"
    # every Content-Encoding header counts: the second of two was not read (a gzip body was then
    # "invalid_json: not UTF-8 text at byte 1", a plain one sent as if unlabelled)
    twice = [
        ("content-type", "application/json"),
        ("content-encoding", "identity"),
        ("content-encoding", "gzip"),
    ]
    for content in (gzip.compress(body), body):
        refused = httpx.post(url + "/v1/chat/completions", content=content, headers=twice)
        assert refused.status_code == 415 and "Content-Encoding 'gzip'" in refused.text
    assert len(fake.received) == 1


def test_a_request_body_that_stalls_is_refused_not_waited_on_for_ever() -> None:
    from ctxbudget.gateway.intake import timely
    from ctxbudget.gateway.refusals import Refusal

    async def stalls() -> Any:
        yield b'{"model": '
        await asyncio.sleep(30)  # headers and half a body, then nothing
        yield b'"gpt-4o"}'

    async def read(idle: float) -> list[bytes]:
        return [chunk async for chunk in timely(stalls(), idle)]

    with pytest.raises(Refusal) as info:
        asyncio.run(read(0.05))
    assert info.value.status == 408 and "stalled" in str(info.value)

    async def steady() -> Any:
        for part in (b"a", b"b"):
            yield part

    async def read_all() -> list[bytes]:
        return [chunk async for chunk in timely(steady(), 0.05)]

    assert asyncio.run(read_all()) == [b"a", b"b"]


def test_headers_the_clients_connection_header_names_are_not_passed_upstream() -> None:
    from ctxbudget.gateway.upstream import forwarded_headers

    given = [
        ("Connection", "keep-alive, X-Hop"),
        ("x-hop", "this connection only"),
        ("anthropic-beta", "a"),
        ("anthropic-beta", "b"),
        ("x-api-key", "k"),
        ("Proxy-Authorization", "Basic cHJveHk6c2VjcmV0"),  # the proxy's in front: never the provider's
        ("Expect", "100-continue"),
    ]
    sent = [(k.decode(), v.decode()) for k, v in forwarded_headers(given)]
    assert not {k.lower() for k, _ in sent} & {"proxy-authorization", "expect"}
    assert ("x-hop", "this connection only") not in sent and not any(
        k.lower() == "connection" for k, _ in sent
    )
    assert [v for k, v in sent if k == "anthropic-beta"] == ["a", "b"] and ("x-api-key", "k") in sent


def test_a_header_value_outside_ascii_reaches_the_upstream_as_sent(tmp_path: Path) -> None:
    """``X-Title: Café`` (OpenRouter's app name) was refused: 400, UnicodeEncodeError while send."""
    with gateway_over_fake(tmp_path / "h.db") as (fake, url):
        for value in ("Café".encode(), "Zürich".encode("latin-1")):
            answer = httpx.post(
                url + "/v1/chat/completions",
                json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
                headers=[(b"x-title", value)],
            )
            assert answer.status_code == 200, answer.text
            assert fake.headers[-1]["x-title"].encode("latin-1") == value  # the server reads Latin-1


def test_policy_mode_drops_the_clients_top_level_cache_mark(tmp_path: Path) -> None:
    # The plan owns the breakpoints: a client's top-level mark (automatic caching, on the last
    # block) kept beside them made three marks, a 1-hour one after a 5-minute one with ttl 1h,
    # which the Messages API refuses.
    from ctxbudget.conversation import client_marks
    from ctxbudget.gateway.config import GatewayConfig
    from ctxbudget.gateway.service import Gateway
    from ctxbudget.gateway.settings import RequestSettings

    gateway = Gateway(GatewayConfig(store_path=str(tmp_path / "s.db"), policy="legal-review"))
    messages: list[dict[str, Any]] = []
    for n in range(3):
        messages += [
            {"role": "user", "content": f"Question {n}: what did the witness say about delivery? " * 20},
            {"role": "assistant", "content": f"Answer {n}: the witness said delivery was late. " * 20},
        ]
    messages.append({"role": "user", "content": "Was notice given?"})
    for mark in ({"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}):
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1000,
            "system": "Cite testimony by page and line. " * 700,
            "messages": messages,
            "cache_control": mark,
        }
        sent = gateway.prepare(ANTHROPIC, body, "s", RequestSettings(0, None, "legal-review")).body
        assert "cache_control" not in sent and client_marks(sent) == len(
            [b for b in sent["system"] if "cache_control" in b]
        ) + sum(
            "cache_control" in b
            for m in sent["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
        )
    gateway.close()


def test_the_fit_modes_estimate_prices_the_predicted_cache_writes(tmp_path: Path) -> None:
    # A first turn writes its whole prefix to the cache (1.25x the input price, 2x for an hour):
    # pricing all input at the input rate let a turn 24% dearer through the ceiling.
    from ctxbudget.gateway.config import GatewayConfig
    from ctxbudget.gateway.service import Gateway
    from ctxbudget.gateway.settings import RequestSettings

    gateway = Gateway(GatewayConfig(store_path=str(tmp_path / "s.db")))
    for ttl in (None, "1h"):
        block: dict[str, Any] = {"type": "text", "text": "Cite the record carefully and in full. " * 2000}
        if ttl:
            block["cache_control"] = {"type": "ephemeral", "ttl": ttl}
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1000,
            "system": [block],
            "messages": [{"role": "user", "content": "Was notice given?"}],
        }
        prepared = gateway.prepare(ANTHROPIC, body, f"first-{ttl}", RequestSettings(0, None))
        cache, tokens = prepared.report["cache"], prepared.report["tokens_after"]
        assert cache["write_tokens"] > 0.9 * tokens  # a first turn: its prefix is written
        at_input_rate = (tokens * 3.0 + 1000 * 15.0) / 1e6
        hour, minutes = cache["write_1h_tokens"], cache["write_tokens"] - cache["write_1h_tokens"]
        assert (hour > 0.9 * tokens) == (ttl == "1h")  # the client's 1-hour mark keeps its prefix an hour
        uncached = tokens - cache["write_tokens"]
        written = (hour * 6.0 + minutes * 3.75 + uncached * 3.0 + 1000 * 15.0) / 1e6
        assert prepared.estimate_usd is not None and prepared.estimate_usd >= written - 1e-6
        with pytest.raises(Refusal):  # a ceiling the write premium is over refuses before sending
            gateway.prepare(
                ANTHROPIC, body, f"ceiling-{ttl}", RequestSettings(0, (at_input_rate + written) / 2)
            )
    gateway.close()


def test_the_estimate_prices_the_tool_use_system_prompt_anthropic_adds(tmp_path: Path) -> None:
    from ctxbudget.gateway.config import GatewayConfig
    from ctxbudget.gateway.service import Gateway
    from ctxbudget.gateway.settings import RequestSettings

    gateway = Gateway(GatewayConfig(store_path=str(tmp_path / "s.db"), conversation_cache=False))
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "Look up the notice date."}],
    }
    tool = {"name": "search", "description": "Search the record.", "input_schema": {"type": "object"}}
    plain = gateway.prepare(ANTHROPIC, body, "t", RequestSettings(0, None))
    with_tool = gateway.prepare(ANTHROPIC, {**body, "tools": [tool]}, "t", RequestSettings(0, None))
    added = with_tool.report["tokens_after"] - plain.report["tokens_after"]
    prompt = with_tool.report["overhead_parts"]["tool-use system prompt"]
    assert 346 <= prompt <= 348 and added > prompt  # the prompt Anthropic adds, and the tool itself
    assert plain.estimate_usd is not None and with_tool.estimate_usd is not None
    # both counted, so both priced, at $3 per million
    assert with_tool.estimate_usd - plain.estimate_usd == pytest.approx(added * 3e-6)
    gateway.close()


def test_the_tool_use_system_prompt_is_counted_and_the_providers_count_is_read_without_it(
    tmp_path: Path,
) -> None:
    tool = {"name": "lookup", "description": "Look up the record.", "input_schema": {"type": "object"}}
    body = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 10,
        "tools": [tool],
        "messages": _ask(LONG[:6_000] + " When?"),
    }
    with gateway_over_fake(tmp_path / "t.db", count_with_upstream=True) as (fake, url):
        counted = httpx.post(url + "/v1/messages/count_tokens", json=body).json()["input_tokens"]
        without = httpx.post(url + "/v1/messages/count_tokens", json={**body, "tools": []}).json()
        assert counted - without["input_tokens"] > 346  # the prompt Anthropic adds, as its own count holds
        # a budget the request fits by the provider's count (prompt included) but not by the margin
        exact = len(json.dumps({k: body[k] for k in ("model", "tools", "messages")})) // 4 + 346
        budget = (exact + counted) // 2 + 10
        assert exact + 10 < budget < counted + 10
        client = _anthropic(url, **{"X-Ctxbudget-Max-Context-Tokens": str(budget)})
        sent = client.messages.with_raw_response.create(**body)
        # the factor was read from the provider's count less the prompt: the body fits, sent whole
        assert sent.headers["x-ctxbudget-trimmed"] == "false" and len(fake.counted) == 1
        assert int(sent.headers["x-ctxbudget-tokens-after"]) <= budget - 10


def test_the_calibrated_proxy_count_leaves_the_tool_use_system_prompt_aside_in_fit_and_policy_mode(
    tmp_path: Path,
) -> None:
    """Calibration compares the provider's input less the prompt with the proxy count: the proxy
    count must leave the prompt aside too, in both modes (a policy's report names no parts)."""
    import ctxbudget
    from ctxbudget.gateway.config import GatewayConfig
    from ctxbudget.gateway.service import Gateway
    from ctxbudget.gateway.settings import RequestSettings

    gateway = Gateway(GatewayConfig(store_path=str(tmp_path / "s.db"), policy="legal-review"))
    tool = {"name": "search", "description": "Search the record.", "input_schema": {"type": "object"}}
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "tools": [tool],
        "system": "Cite testimony by page and line.",
        "messages": [{"role": "user", "content": "When was notice given? " * 30}],
    }
    for policy in (None, "legal-review"):
        prepared = gateway.prepare(ANTHROPIC, body, f"p-{policy}", RequestSettings(0, None, policy))
        sent = ctxbudget.count(prepared.body, model="claude-sonnet-4-5", safety_factor=1.0)["tokens"]
        assert prepared.overhead_tokens == 346
        assert abs(prepared.proxy_tokens - (sent - 346)) <= 1, policy  # the sent body's proxy tokens
    gateway.close()


@pytest.mark.parametrize("url", ["notaurl", "ftp://x/y", "", "http://", "https:///v1"])
def test_an_upstream_that_is_not_an_http_url_is_refused_at_start(url: str) -> None:
    # the gateway started, and every request then failed with a 502 (UnsupportedProtocol)
    from ctxbudget.errors import ConfigError
    from ctxbudget.gateway.config import GatewayConfig

    for name in ("anthropic_upstream", "openai_upstream"):
        with pytest.raises(ConfigError, match=f"{name} must be an http:// or https:// URL with a host"):
            GatewayConfig(**{name: url})


@pytest.mark.parametrize(("server_ceiling", "sent"), [(None, False), (5.0, True)])
def test_the_servers_cost_ceiling_replaces_the_policys(
    tmp_path: Path, server_ceiling: float | None, sent: bool
) -> None:
    # serve --cost-ceiling says "(overrides --policy's)": it was the lower of the two that stood
    from ctxbudget.errors import CostCeilingExceeded
    from ctxbudget.gateway.config import GatewayConfig
    from ctxbudget.gateway.service import Gateway
    from ctxbudget.gateway.settings import RequestSettings

    config = GatewayConfig(
        store_path=str(tmp_path / "s.db"), policy="legal-review", cost_ceiling_usd=server_ceiling
    )
    gateway = Gateway(config)
    rules = " ".join(f"Rule {i}: the reviewer must cite the page and line of every fact." for i in range(700))
    body = {"model": "claude-opus-4-1", "system": rules, "max_tokens": 4000, "messages": _ask()}
    settings = RequestSettings(0, server_ceiling, "legal-review")
    if sent:  # about $0.74, over legal-review's $0.45 and under the server's $5
        prepared = gateway.prepare(ANTHROPIC, body, "opus", settings)
        assert prepared.estimate_usd is not None and 0.45 < prepared.estimate_usd < 5
    else:
        with pytest.raises(Exception, match=r"ceiling \$0\.45") as refused:
            gateway.prepare(ANTHROPIC, body, "opus", settings)
        assert "cost" in str(refused.value).lower() or isinstance(refused.value, CostCeilingExceeded)
    gateway.close()


def test_a_body_with_another_apis_fields_is_told_in_the_gateways_words(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    fake, url, _ = stack
    body = {"model": "gpt-4o", "system": "Be brief.", "messages": _ask()}  # Anthropic's system
    refused = httpx.post(url + "/v1/chat/completions", json=body)
    message = refused.json()["error"]["message"]
    assert refused.status_code == 400 and "`system` is not read by the openai format" in message
    assert "input_format=" not in message  # a library argument no HTTP client can give
    assert fake.received == []


def test_a_refused_header_value_is_shown_as_the_client_wrote_it(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    _, url, _ = stack
    body = {"model": "gpt-4o", "messages": _ask()}
    for header in ("X-Ctxbudget-Policy", "X-Ctxbudget-Cost-Ceiling"):
        refused = httpx.post(url + "/v1/chat/completions", json=body, headers={header: "légal".encode()})
        message = refused.json()["error"]["message"]
        assert refused.status_code == 400 and "'légal'" in message and "Ã" not in message, message


def test_a_policy_the_server_allows_from_a_file_is_named_by_its_name(tmp_path: Path) -> None:
    # clients had to send the server's file path, and the refusal listed it
    text = (Path(__file__).resolve().parent.parent / "src/ctxbudget/policies/legal-review.toml").read_text()
    path = tmp_path / "house.toml"
    path.write_text(text.replace('name = "legal-review"', 'name = "house-review"', 1))
    with gateway_over_fake(tmp_path / "h.db", allowed_policies=(str(path),)) as (_, url):
        body = {"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": _ask()}
        named = httpx.post(url + "/v1/messages", json=body, headers={"X-Ctxbudget-Policy": "house-review"})
        other = httpx.post(url + "/v1/messages", json=body, headers={"X-Ctxbudget-Policy": "mine"})
    assert named.status_code == 200, named.text
    assert other.status_code == 400 and other.json()["error"]["message"].endswith("allowed: house-review")


def test_a_policy_mode_refusal_tells_what_is_known_of_the_request(tmp_path: Path) -> None:
    rules = " ".join(f"Rule {i}: the reviewer must cite the page and line of every fact." for i in range(700))
    body = {"model": "claude-opus-4-1", "system": rules, "max_tokens": 4000, "messages": _ask()}
    with gateway_over_fake(tmp_path / "p.db", policy="legal-review") as (fake, url):
        refused = httpx.post(url + "/v1/messages", json=body)
    assert refused.status_code == 400 and "above the ceiling" in refused.text and not fake.received
    # as a fit-mode refusal does (it said only its session): the request counted, the estimate
    assert int(refused.headers["x-ctxbudget-tokens-before"]) > 10_000
    assert float(refused.headers["x-ctxbudget-estimated-cost-usd"]) > 0.45


def test_an_upstream_header_in_utf8_is_passed_back_byte_for_byte(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    """A passed-back header whose value is UTF-8 ("1分") was decoded as text the answer could not
    write: the client got a 502 for a 200 that was already stored (its retry billed twice), a 429
    lost its status and retry-after, and a stream left its upstream connection open."""
    _fake, url, store = stack
    client = _anthropic(url, **{"X-Ctxbudget-Session": "utf8"})
    answer = client.messages.with_raw_response.create(
        model="fault-utf8-header", max_tokens=10, messages=_ask()
    )
    assert answer.status_code == 200
    assert (b"x-ratelimit-reset-requests", "1分".encode()) in answer.http_response.headers.raw
    assert len(SQLiteStore(store).turns("utf8")) == 1
    with pytest.raises(anthropic.RateLimitError) as limited:
        client.messages.create(model="fault-utf8-header-429", max_tokens=10, messages=_ask())
    assert limited.value.response.headers["retry-after"] == "7"


def test_an_upstream_answer_nested_past_pythons_reach_still_reaches_the_client(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    """Valid JSON nested 100,000 deep raised a RecursionError the answer did not catch: a 200
    became a 502 and a 429 a 502 without its retry-after."""
    _fake, url, _store = stack
    body = {"model": "fault-deep-json", "max_tokens": 5, "messages": _ask()}
    whole = httpx.post(url + "/v1/messages", json=body, timeout=30)
    assert whole.status_code == 200 and whole.content.count(b"[") == 100_000
    limited = httpx.post(url + "/v1/messages", json={**body, "model": "fault-deep-429"}, timeout=30)
    assert limited.status_code == 429 and limited.headers["retry-after"] == "7"


def test_policy_mode_holds_room_for_the_reply_the_client_asks_for_not_the_policys_cap(tmp_path: Path) -> None:
    """gpt-4's 8,192 tokens held a ~4,100-token assembled prompt and the 1,000-token reply asked
    for, but the reply's room was checked at the policy's max_output_tokens (4,096): refused."""
    system = "You review depositions. " + " ".join(f"Rule {i}: cite the page and line." for i in range(120))
    messages = [{"role": "system", "content": system}]
    for i in range(40):
        messages += [
            {"role": "user", "content": f"q{i} " + "testimony " * 200},
            {"role": "assistant", "content": f"a{i} " + "analysis " * 200},
        ]
    messages.append({"role": "user", "content": "When was notice given?"})
    headers = {
        "X-Ctxbudget-Policy": "legal-review",
        "X-Ctxbudget-Session": "reply-room",
        "X-Ctxbudget-Max-Context-Tokens": "8192",
    }
    with gateway_over_fake(tmp_path / "r.db", allowed_policies=("legal-review",)) as (fake, url):
        answer = httpx.post(
            url + "/v1/chat/completions",
            json={"model": "gpt-4", "max_tokens": 1000, "messages": messages},
            headers=headers,
            timeout=30,
        )
    assert answer.status_code == 200, answer.text
    assert fake.received[-1]["max_tokens"] == 1000
    assert int(answer.headers["x-ctxbudget-tokens-after"]) + 1000 <= 8192


def test_a_fit_mode_refusal_of_a_requests_size_tells_its_count(stack: tuple[FakeUpstream, str, Path]) -> None:
    """Policy mode's "cannot fit" carried X-Ctxbudget-Tokens-Before; fit mode's did not."""
    _fake, url, _store = stack
    body = {
        "model": "gpt-4o",
        "max_tokens": 100,
        "messages": [{"role": "system", "content": LONG * 3}, {"role": "user", "content": "When?"}],
    }
    refused = httpx.post(
        url + "/v1/chat/completions", json=body, headers={"X-Ctxbudget-Max-Context-Tokens": "600"}
    )
    assert refused.status_code == 400 and "cannot fit" in refused.json()["error"]["message"]
    assert int(refused.headers["x-ctxbudget-tokens-before"]) > 600


def test_policy_mode_holds_a_reply_to_the_models_output_cap(tmp_path: Path) -> None:
    """A policy allowing 100,000 output tokens let a client's 50,000 through to gpt-4o, whose
    output cap is 16,384: the provider refuses such a body."""
    text = (Path(__file__).resolve().parent.parent / "src/ctxbudget/policies/legal-review.toml").read_text()
    path = tmp_path / "wide.toml"
    path.write_text(
        text.replace('name = "legal-review"', 'name = "wide"\nmax_output_tokens = 100000', 1).replace(
            "envelope_tokens = 32000", "envelope_tokens = 120000", 1
        )
    )
    with gateway_over_fake(tmp_path / "w.db", allowed_policies=(str(path),)) as (fake, url):
        body = {"model": "gpt-4o", "max_tokens": 50_000, "messages": [{"role": "user", "content": "When?"}]}
        headers = {"X-Ctxbudget-Policy": "wide", "X-Ctxbudget-Session": "wide-1"}
        answer = httpx.post(url + "/v1/chat/completions", json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        assert fake.received[-1]["max_tokens"] == 16_384
        small = {**body, "max_tokens": 500}  # the client's own smaller reply: nothing capped
        httpx.post(
            url + "/v1/chat/completions", json=small, headers={**headers, "X-Ctxbudget-Session": "wide-2"}
        )
    # the turn's report says why (as assemble's does)
    (turn,) = SQLiteStore(tmp_path / "w.db").turns("wide-1")
    assert any("above gpt-4o's output cap (16,384)" in w for w in turn.report["warnings"]), turn.report
    (asked,) = SQLiteStore(tmp_path / "w.db").turns("wide-2")
    assert not any("output cap" in w for w in asked.report["warnings"]), asked.report


def test_a_reply_as_large_as_the_budget_is_a_request_too_large(tmp_path: Path) -> None:
    """Claude Code asks 32,000 reply tokens: under a 20,000-token header every request was refused
    as bad input (invalid_request), where a client falls back on context_length_exceeded, and
    told of a "20,000-token window" that was the header's budget."""
    with gateway_over_fake(tmp_path / "b.db") as (fake, url):
        body = {"model": "gpt-4o", "max_tokens": 16_000, "messages": [{"role": "user", "content": "hi"}]}
        refused = httpx.post(
            url + "/v1/chat/completions", json=body, headers={"X-Ctxbudget-Max-Context-Tokens": "12000"}
        )
        claude = {**body, "model": "claude-sonnet-4-6", "max_tokens": 32_000}
        anthropic_refused = httpx.post(
            url + "/v1/messages", json=claude, headers={"X-Ctxbudget-Max-Context-Tokens": "20000"}
        )
    error = refused.json()["error"]
    assert refused.status_code == 400 and error["code"] == "context_length_exceeded"
    assert "16,000 tokens ($.max_tokens) leaves nothing of the 12,000-token budget" in error["message"]
    assert (
        "12,000-token budget (X-Ctxbudget-Max-Context-Tokens, or serve --max-context-tokens)"
        in error["message"]
    )
    assert "lower max_tokens" in error["message"]
    assert anthropic_refused.status_code == 400
    assert anthropic_refused.json()["error"]["type"] == "invalid_request_error"
    assert fake.received == []


def test_the_reports_warnings_are_told_in_a_header(tmp_path: Path) -> None:
    """A reply asked above the model's output cap was warned in the stored report only: the client
    that sent it never saw why its prompt was budgeted for less."""
    with gateway_over_fake(tmp_path / "w.db") as (_fake, url):
        body = {"model": "gpt-4o", "max_tokens": 50_000, "messages": [{"role": "user", "content": "When?"}]}
        capped = httpx.post(url + "/v1/chat/completions", json=body)
        plain = httpx.post(url + "/v1/chat/completions", json={**body, "max_tokens": 500})
        unknown = httpx.post(url + "/v1/chat/completions", json={**body, "model": "gpt-4o-mini-house"})
    assert capped.status_code == 200
    assert "above gpt-4o's output limit of 16,384" in capped.headers["x-ctxbudget-warnings"]
    assert "x-ctxbudget-warnings" not in plain.headers
    told = unknown.headers["x-ctxbudget-warnings"]
    assert "gpt-4o-mini" in told and "--catalog FILE" in told and "load_catalog" not in told


@given(st.lists(st.text(max_size=800), min_size=1, max_size=4))
def test_a_warnings_header_is_always_a_value_a_header_can_carry(warnings: list[str]) -> None:
    value = warnings_header(warnings)
    assert len(value) <= WARNINGS_HEADER_CHARS
    assert all(" " <= c <= "~" for c in value)
    httpx.Headers({"x-ctxbudget-warnings": value})  # a client sends and reads it as it is


_json_values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text()
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=25,
)


def _typed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


@given(st.dictionaries(st.text(max_size=6), _json_values, max_size=5))
def test_the_bytes_sent_upstream_read_back_as_the_body_type_for_type(body: dict[str, Any]) -> None:
    try:
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return  # a lone surrogate: refused at the boundary, never sent
    sent = encoded(body)
    assert _typed(json.loads(sent)) == _typed(body)
    # one writer whatever the body: json's own compact, unescaped text
    assert sent == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def test_the_bytes_sent_upstream_are_compact_utf8_and_hold_any_integer() -> None:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Größe: 東京"}], "seed": 2**70}
    sent = encoded(body)
    assert "Größe: 東京".encode() in sent and b'"seed":1180591620717411303424' in sent
    assert json.loads(sent) == body


def test_a_body_sent_on_unchanged_is_sent_as_the_clients_own_bytes(tmp_path: Path) -> None:
    """A body the fit passes through whole went upstream as its JSON written again (1.1 ms for a
    524 kB body): now as the client's bytes (its spacing, key order and escapes). A body trimmed,
    or given something (a stream's usage), is written; a byte-order mark is not sent upstream."""
    given = b'{ "messages": [{"role": "user", "content": "caf\\u00e9?"}],\n  "model": "gpt-4o" }'
    stream = b'{"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    history = [{"role": "user", "content": f"turn {n}: " + "notice was late. " * 40} for n in range(30)]
    long = json.dumps({"model": "gpt-4o", "messages": history}, indent=1).encode()
    plain = {"content-type": "application/json"}
    with gateway_over_fake(tmp_path / "b.db") as (fake, url):
        for content in (given, b"\xef\xbb\xbf" + given, stream, long):
            extra = {"x-ctxbudget-max-context-tokens": "2000"} if content is long else {}
            answer = httpx.post(url + "/v1/chat/completions", content=content, headers={**plain, **extra})
            assert answer.status_code == 200, answer.text
    as_given, unmarked_bom, streamed, trimmed = fake.raw
    assert as_given == given
    assert unmarked_bom == encoded(json.loads(given)) and fake.received[1] == json.loads(given)
    assert b'"stream_options":{"include_usage":true}' in streamed
    assert trimmed == encoded(fake.received[3]) and len(fake.received[3]["messages"]) < len(history)


def test_a_changed_prefix_is_refused_once_not_retried_by_the_sdk(tmp_path: Path) -> None:
    """The 409 prefix_changed is the same on every try; the SDKs retry a 409 twice, with back-off,
    unless told not to: three refused round trips for one call."""
    import httpx2

    sent: list[str] = []
    client = openai.OpenAI(
        base_url="http://placeholder/v1",
        api_key="k",
        max_retries=2,
        http_client=httpx2.Client(event_hooks={"request": [lambda request: sent.append(request.url.path)]}),
    )
    ask = [{"role": "user", "content": "When was notice given?"}]
    with gateway_over_fake(tmp_path / "p.db", allowed_policies=("legal-review",)) as (_, url):
        client = client.with_options(base_url=url + "/v1")
        headers = {"X-Ctxbudget-Policy": "legal-review", "X-Ctxbudget-Session": "prefix-once"}
        system = {"role": "system", "content": "You review contracts."}
        client.chat.completions.create(model="gpt-4o", messages=[system, *ask], extra_headers=headers)
        sent.clear()
        changed = {"role": "system", "content": "You review leases."}
        with pytest.raises(openai.ConflictError) as refused:
            client.chat.completions.create(model="gpt-4o", messages=[changed, *ask], extra_headers=headers)
    assert refused.value.response.headers["x-should-retry"] == "false" and len(sent) == 1


def test_the_question_of_an_anthropic_tool_loop_turn_is_its_users_not_blank() -> None:
    """A user message of tool results alone answers tool calls: the turn was stored with the
    question " " (the results' missing texts joined)."""
    from ctxbudget.gateway.bodies import last_user_text

    body = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "When was notice given?"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "s", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "EX-04"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "EX-05"},
                ],
            },
        ]
    }
    assert last_user_text(body) == "When was notice given?"
    image_only = {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}
    assert last_user_text(image_only) == ""  # a question without text is not an earlier one's


@pytest.mark.parametrize(
    ("base", "path", "url"),
    [
        ("https://api.openai.com", "/v1/chat/completions", "https://api.openai.com/v1/chat/completions"),
        ("https://api.openai.com/v1/", "/v1/chat/completions", "https://api.openai.com/v1/chat/completions"),
        # OPENAI_BASE_URL style with another path: Gemini's (was .../v1beta/openai/v1/..., a 404)
        (
            "https://g.example/v1beta/openai/",
            "/v1/chat/completions",
            "https://g.example/v1beta/openai/chat/completions",
        ),
        (
            "https://a.example/openai/deployments/d",
            "/v1/models",
            "https://a.example/openai/deployments/d/models",
        ),
    ],
)
def test_an_openai_base_is_read_as_openai_base_url_is(base: str, path: str, url: str) -> None:
    from ctxbudget.gateway.config import GatewayConfig
    from ctxbudget.gateway.upstream import upstream_at

    assert upstream_at(GatewayConfig(openai_upstream=base), OPENAI, path) == url
    anthropic_base = GatewayConfig(anthropic_upstream="https://x.example/v1")
    assert upstream_at(anthropic_base, ANTHROPIC, "/v1/messages") == "https://x.example/v1/messages"


def test_a_base_with_a_query_keeps_it_after_the_path(tmp_path: Path) -> None:
    """Azure's deployment base holds ?api-version=: the path was joined after the query
    (``.../d?api-version=2024-10-21/chat/completions``, every request a 404)."""
    from ctxbudget.gateway.config import GatewayConfig
    from ctxbudget.gateway.upstream import upstream_at

    azure = GatewayConfig(openai_upstream="https://a.example/openai/deployments/d?api-version=2024-10-21")
    assert upstream_at(azure, OPENAI, "/v1/chat/completions") == (
        "https://a.example/openai/deployments/d/chat/completions?api-version=2024-10-21"
    )
    tagged = GatewayConfig(anthropic_upstream="https://x.example/?team=a#frag")
    assert upstream_at(tagged, ANTHROPIC, "/v1/messages", "beta=true") == (
        "https://x.example/v1/messages?team=a&beta=true"
    )
    with Served(FakeUpstream().app) as upstream:
        base = upstream.url + "/openai/deployments/d?api-version=2024-10-21"
        with gateway_over_fake(tmp_path / "q.db", openai_upstream=base) as (_fake, url):
            answer = httpx.post(
                url + "/v1/chat/completions",
                json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
            )
    assert answer.status_code == 200, answer.text


def test_a_stream_the_client_leaves_mid_way_is_logged_as_its_499(tmp_path: Path, caplog: Any) -> None:
    """A stream's access line is written as it begins ("streamed"); a client that leaves mid-way
    got no 499 line at all (the docs promised one): a warning line says it, and no turn is stored."""
    body = {"model": "slow-stream", "max_tokens": 10, "stream": True, "messages": _ask()}
    headers = {"anthropic-version": "2023-06-01", "X-Ctxbudget-Session": "left-mid-stream"}
    store = tmp_path / "mid.db"
    with (
        caplog.at_level(logging.WARNING, logger="ctxbudget.gateway"),
        gateway_over_fake(store) as (_fake, url),
    ):
        with httpx.stream("POST", url + "/v1/messages", json=body, headers=headers) as response:
            next(response.iter_raw())  # the first events, then the client is gone
        deadline = time.monotonic() + 30
        while "outcome=client_disconnected" not in caplog.text:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert "left-mid-stream" not in SQLiteStore(store).names()
    line = next(r.getMessage() for r in caplog.records if "outcome=client_disconnected" in r.getMessage())
    assert line.startswith("session=left-mid-stream status=499 outcome=client_disconnected")


def test_a_non_streamed_answer_the_client_left_before_is_not_stored(tmp_path: Path) -> None:
    """An SDK that timed out and retried had each abandoned try stored as an answered turn
    (three turns for one question nobody was answered), where a stream left half-way stores none."""
    body = {"model": "fault-timeout", "max_tokens": 10, "messages": _ask()}  # the upstream takes 3 s
    headers = {"anthropic-version": "2023-06-01", "X-Ctxbudget-Session": "left-early"}
    store = tmp_path / "left.db"
    with gateway_over_fake(store, timeout_seconds=10) as (fake, url):
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url + "/v1/messages", json=body, headers=headers, timeout=1)
        deadline = time.monotonic() + 30
        while 'route="/v1/messages"' not in httpx.get(url + "/metrics").text:  # until it was handled
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert 'outcome="client_disconnected"' in httpx.get(url + "/metrics").text
        assert "left-early" not in SQLiteStore(store).names()
        while not fake.slow_ends:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        # the upstream call was given up with the client (the provider stops, and bills no more)
        assert fake.slow_ends == [True]
        answered = httpx.post(url + "/v1/messages", json=body, headers=headers, timeout=10)
        assert answered.status_code == 200 and len(SQLiteStore(store).turns("left-early")) == 1


def test_a_client_that_leaves_while_the_answers_body_is_awaited_has_the_call_closed(tmp_path: Path) -> None:
    """An upstream that sends its headers at once (a proxy keeping a long call alive) was read to
    its end after the client had left: only the wait for the headers was given up."""
    import socket
    from urllib.parse import urlsplit

    content = json.dumps({"model": "fault-early-headers", "max_tokens": 10, "messages": _ask()}).encode()
    with gateway_over_fake(tmp_path / "e.db", timeout_seconds=10) as (fake, url):
        where = urlsplit(url)
        # The client leaves once the upstream has the request (a client timing out after 1 s left
        # before the gateway had sent it, on a loaded machine: the test then waited in vain).
        client = socket.create_connection((where.hostname, where.port))
        client.sendall(
            b"POST /v1/messages HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
            b"anthropic-version: 2023-06-01\r\nX-Ctxbudget-Session: early\r\n"
            + f"Content-Length: {len(content)}\r\n\r\n".encode()
            + content
        )
        deadline = time.monotonic() + 30
        while not fake.received:
            assert time.monotonic() < deadline, "the request never reached the upstream"
            time.sleep(0.05)
        client.close()  # before the upstream's body, due 3 s after its headers
        while not fake.slow_ends:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    assert fake.slow_ends == [True]  # the gateway left before the body was done


def test_a_responses_framing_label_does_not_keep_calibration_from_learning() -> None:
    """Labelling the Responses framing an estimate turned calibration off for every /v1/responses
    request (any estimated part did)."""
    from ctxbudget.formats.responses import FRAMING_ESTIMATE
    from ctxbudget.gateway.usage import covered_by_estimate

    framing = [f"framing: {FRAMING_ESTIMATE}"]
    assert covered_by_estimate({"input": "hi"}, framing)
    assert not covered_by_estimate({"input": "hi"}, [*framing, "$.input[0]: content[1]: image: 765 tokens"])


def test_a_chat_messages_tool_calls_do_not_keep_calibration_from_learning() -> None:
    """Labelling tool calls' framing an estimate turned calibration off for every agent's traffic."""
    from ctxbudget import fit
    from ctxbudget.gateway.usage import covered_by_estimate

    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    body = {
        "messages": [
            {"role": "user", "content": "Find EX-4."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "EX-4: the notice letter."},
        ]
    }
    parts = fit(body, model="gemini-2.5-pro").report.estimated_parts
    assert parts and covered_by_estimate(body, parts)
    assert not covered_by_estimate(body, [*parts, "$.messages[0]: content[1]: image: 765 tokens"])


def test_an_upstream_that_closes_without_answering_is_told_as_such(tmp_path: Path) -> None:
    """It was told "upstream unreachable": the upstream was reached, took the request and closed."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def hang_up() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    base = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        with gateway_over_fake(tmp_path / "c.db", openai_upstream=base) as (_fake, url):
            answer = httpx.post(
                url + "/v1/chat/completions",
                json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
            )
    finally:
        listener.close()
    assert answer.status_code == 502
    told = answer.json()["error"]["message"]
    # closed after reading the request's head: a clean close, or a reset when its body was unread
    assert re.search(
        r"upstream gave no HTTP answer \((Server disconnected without sending a response|it reset the connection)",
        told,
    ), told


def test_a_stopped_gateway_leaves_its_store_whole_in_one_file(tmp_path: Path) -> None:
    """The checkpoint thread's connection was never closed: after a clean stop the newest turns
    were still in the write-ahead log beside the file (a copy of the file alone had 8 of 12)."""
    import threading

    before = {t for t in threading.enumerate() if t.name == "ctxbudget-checkpoint"}
    with gateway_over_fake(tmp_path / "w.db") as (fake, url):
        for n in range(10):
            body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"{n} " + LONG * 3}]}
            answer = httpx.post(url + "/v1/chat/completions", json=body, headers={"X-Ctxbudget-Session": "w"})
            assert answer.status_code == 200
    fake.gateway.close()  # what the app's lifespan does at shutdown (these tests serve without it)
    assert not (tmp_path / "w.db-wal").exists()
    assert SQLiteStore(tmp_path / "w.db").count_turns("w") == 10
    after = {t for t in threading.enumerate() if t.name == "ctxbudget-checkpoint"}
    assert after <= before  # this gateway's checkpoint thread stopped with it


def test_a_policy_mode_refusal_gives_no_advice_only_the_library_can_take(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "p.db", allowed_policies=("legal-review",)) as (fake, url):
        refused = httpx.post(
            url + "/v1/chat/completions",
            json={"model": "gpt-4o", "messages": [{"role": "system", "content": "You review records."}]},
            headers={"X-Ctxbudget-Policy": "legal-review"},
        )
    told = refused.json()["error"]["message"]
    assert refused.status_code == 400 and "no user message to send as the current turn" in told
    assert "output format" not in told and "items" not in told and fake.received == []


def test_a_cookie_one_clients_answer_set_is_never_sent_with_another_clients_request(tmp_path: Path) -> None:
    """The gateway's upstream client is shared by every client: a cookie an upstream set in one
    answer (Cloudflare's __cf_bm and _cfuvid come with OpenAI's) was kept and sent upstream with
    every later request, whoever sent it. A client's own Cookie header goes upstream with its own
    request only."""
    from ctxbudget.gateway import GatewayConfig, create_app

    cookies_upstream: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        cookies_upstream.append(request.headers.get("cookie"))
        body = {
            "id": "c",
            "object": "chat.completion",
            "model": "gpt-4o",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        }
        set_cookies = [
            ("set-cookie", "__cf_bm=alice; Path=/; Domain=api.example.com"),
            ("set-cookie", "_cfuvid=a"),
        ]
        return httpx.Response(200, json=body, headers=set_cookies)

    config = GatewayConfig(store_path=str(tmp_path / "c.db"), openai_upstream="https://api.example.com")
    app = create_app(config, httpx.MockTransport(answer))

    async def run() -> list[httpx.Response]:
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://g") as client:
            alice = await client.post(
                "/v1/chat/completions", json=body, headers={"authorization": "Bearer a"}
            )
            bob = await client.post("/v1/chat/completions", json=body, headers={"authorization": "Bearer b"})
            own = await client.post("/v1/chat/completions", json=body, headers={"cookie": "mine=1"})
        app.state.gateway.close()
        return [alice, bob, own]

    alice, bob, own = asyncio.run(run())
    assert [r.status_code for r in (alice, bob, own)] == [200, 200, 200]
    assert cookies_upstream == [None, None, "mine=1"]


def test_a_request_with_hundreds_of_headers_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """Each upstream call read the client's headers back once per header (httpx's cookie
    handling): 8,000 headers held the event loop for seconds. Over 256 is a 431, nothing sent,
    on the fitted routes and the pass-through alike."""
    from ctxbudget.gateway.upstream import MAX_REQUEST_HEADERS

    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}

    def many(n: int) -> list[tuple[str, str]]:
        return [(f"x-trace-{i}", "1") for i in range(n)]

    with gateway_over_fake(tmp_path / "h.db", pass_through=True) as (fake, url):
        refused = httpx.post(url + "/v1/chat/completions", json=body, headers=many(MAX_REQUEST_HEADERS))
        passed = httpx.get(url + "/v1/models", headers=many(MAX_REQUEST_HEADERS))
        taken = httpx.post(url + "/v1/chat/completions", json=body, headers=many(200))
    assert refused.status_code == 431 and passed.status_code == 431
    assert "at most 256 are accepted" in refused.json()["error"]["message"]
    assert taken.status_code == 200 and len(fake.received) == 1 and fake.paths == ["/v1/chat/completions"]


def _answers_with(handler: Any, tmp_path: Path, **options: Any) -> tuple[Any, Path]:
    """A gateway (an ASGI app) whose upstream is ``handler`` (an httpx MockTransport's), with its
    store file."""
    from ctxbudget.gateway import GatewayConfig, create_app

    store = tmp_path / "t.db"
    config = GatewayConfig(store_path=str(store), anthropic_upstream="https://api.example.com", **options)
    return create_app(config, httpx.MockTransport(handler)), store


def _post_messages(app: Any, session: str, **extra: Any) -> httpx.Response:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "hi"}],
        **extra,
    }
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01", "X-Ctxbudget-Session": session}

    async def run() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://g") as client:
            answer = await client.post("/v1/messages", json=body, headers=headers)
        app.state.gateway.close()
        return answer

    return asyncio.run(run())


def test_a_session_that_session_new_takes_while_its_turn_is_answered_gets_no_answer(tmp_path: Path) -> None:
    """The turn was checked before it was sent (no such session yet); `session new` took the name
    while it was answered, and the commit refused it, but the client got its 200 with nothing
    stored. The answer is withheld: 409 session_conflict."""
    from ctxbudget.session import Session

    message = {"id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5"}
    store: list[Path] = []

    def answer(request: httpx.Request) -> httpx.Response:
        Session.create(
            SQLiteStore(store[0]), "taken", policy="legal-review", model="claude-sonnet-4-5", base={}
        )
        content = [{"type": "text", "text": "ok"}]
        usage = {"input_tokens": 5, "output_tokens": 1}
        return httpx.Response(
            200, json={**message, "content": content, "stop_reason": "end_turn", "usage": usage}
        )

    app, path = _answers_with(answer, tmp_path)
    store.append(path)
    taken = _post_messages(app, "taken")
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "session_conflict", taken.text
    assert "was started by `session new`" in taken.json()["error"]["message"]
    assert SQLiteStore(path).turns("taken") == []


def test_a_tool_call_cut_mid_emoji_is_stored_as_the_answer_text_is(tmp_path: Path) -> None:
    """A lone surrogate (a valid JSON escape: a reply cut mid-emoji) in a tool call's name or
    arguments failed the store's UTF-8: the client got its 200 and the turn was not stored. It is
    stored with U+FFFD in its place, as an answer's text is."""
    raw = (
        '{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":'
        '[{"type":"tool_use","id":"t1","name":"search\\ud83d","input":{"q":"cut \\ud83d"}}],'
        '"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":3}}'
    )

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=raw.encode(), headers={"content-type": "application/json"})

    app, store = _answers_with(answer, tmp_path)
    assert _post_messages(app, "cut").status_code == 200
    (turn,) = SQLiteStore(store).turns("cut")
    assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("search\ufffd", {"q": "cut \ufffd"})
    ]


class _CutBody(httpx.AsyncByteStream):
    """An upstream body that gives its first bytes and then fails as ``fault`` says (a read that
    timed out, a connection dropped)."""

    def __init__(self, fault: Exception, head: bytes) -> None:
        self.fault, self.head = fault, head

    async def __aiter__(self) -> Any:
        yield self.head
        raise self.fault


@pytest.mark.parametrize(
    ("status", "kind", "fault", "told", "code"),
    [
        (429, "application/json", httpx.ReadTimeout("stalled"), 504, "upstream_timeout"),
        (503, "application/json", httpx.RemoteProtocolError("peer closed"), 502, "upstream_disconnected"),
        (200, "text/plain", httpx.ReadTimeout("stalled"), 504, "upstream_timeout"),  # a stream's first line
        (200, "text/plain", httpx.RemoteProtocolError("peer closed"), 502, "upstream_disconnected"),
    ],
)
def test_an_upstream_answer_that_stalls_or_is_cut_off_before_it_is_read_is_a_504_or_502(
    tmp_path: Path, status: int, kind: str, fault: Exception, told: int, code: str
) -> None:
    """An error answer (429, 503) whose body stalled past --timeout or was cut off, or a stream
    labelled text/plain that did so before its first line, was an internal error: 502 "ctxbudget:
    ReadTimeout while answer", logged with a traceback, counted in ctxbudget_internal_errors_total,
    the upstream's retry-after lost. It is the upstream's fault, as for any other answer: a 504 or
    502 with the upstream's retry headers, counted as an upstream error."""
    headers = {"content-type": kind, "retry-after": "3", "request-id": "req_1"}

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers, stream=_CutBody(fault, b'{"type": "err'))

    app, store = _answers_with(answer, tmp_path)
    with Served(app) as served:
        client = _anthropic(served.url)
        with pytest.raises(anthropic.APIStatusError) as raised:
            client.messages.create(
                model="claude-sonnet-4-5", max_tokens=50, messages=_ask(), stream=kind == "text/plain"
            )
        metrics = httpx.get(served.url + "/metrics").text
    app.state.gateway.close()
    answered = raised.value.response
    assert answered.status_code == told and answered.json()["error"]["code"] == code
    assert answered.headers["retry-after"] == "3" and answered.headers["request-id"] == "req_1"
    assert "ctxbudget_internal_errors_total{" not in metrics
    assert SQLiteStore(store).names() == []


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_passed_through_call_is_given_up_when_its_client_leaves(tmp_path: Path, method: str) -> None:
    """A client that left a pass-through (an SDK's timeout on an embedding, an image, a file) left
    the upstream call running until it answered: billed, then dropped, while the SDK's retry
    started a second one. It is closed with its client, as a fitted route's is."""
    import socket
    from urllib.parse import urlsplit

    content = b'{"input": "x"}' if method == "POST" else b""
    with gateway_over_fake(tmp_path / "p.db", pass_through=True, timeout_seconds=60) as (fake, url):
        where = urlsplit(url)
        client = socket.create_connection((where.hostname, where.port))
        client.sendall(
            f"{method} /v1/slow HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n".encode()
            + (f"Content-Length: {len(content)}\r\n".encode() if content else b"")
            + b"\r\n"
            + content
        )
        deadline = time.monotonic() + 30
        while "/v1/slow" not in fake.paths:
            assert time.monotonic() < deadline, "the request never reached the upstream"
            time.sleep(0.05)
        client.close()  # before the upstream answers
        while not fake.slow_ends:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        metrics = httpx.get(url + "/metrics").text
    assert fake.slow_ends == [True]  # the gateway closed the upstream call with its client
    assert 'outcome="client_disconnected",route="/v1/* passed through"' in metrics


def test_without_conversation_caching_the_system_mark_skips_an_empty_text_block(tmp_path: Path) -> None:
    """The API refuses ``cache_control`` on an empty text block: the system prompt's mark goes on
    its last block with text."""
    from ctxbudget.gateway.config import GatewayConfig
    from ctxbudget.gateway.service import Gateway
    from ctxbudget.gateway.settings import RequestSettings

    gateway = Gateway(GatewayConfig(store_path=str(tmp_path / "s.db"), conversation_cache=False))
    prompt = "You are a careful legal assistant. Cite the record. " * 300
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": [{"type": "text", "text": prompt}, {"type": "text", "text": ""}],
        "messages": [{"role": "user", "content": "When was notice given?"}],
    }
    sent = gateway.prepare(ANTHROPIC, body, "t", RequestSettings(0, None)).body
    assert sent["system"] == [
        {"type": "text", "text": prompt, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": ""},
    ]
    gateway.close()
