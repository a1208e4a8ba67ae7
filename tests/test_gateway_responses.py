"""POST /v1/responses: the official OpenAI SDK's Responses calls through the gateway to the local
fake upstream, streamed and not, fitted, recorded, and refused in OpenAI's shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from ctxbudget.gateway.providers import RESPONSES, StreamState
from ctxbudget.gateway.usage import normalize_usage
from ctxbudget.session import SQLiteStore

from .fake_upstream import FakeUpstream, gateway_over_fake, openai_client

INSTRUCTIONS = "You are a careful legal assistant. " * 200
WORD = "lorem ipsum dolor sit amet "


def _history(turns: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for n in range(turns):
        items += [
            {"role": "user", "content": f"question {n} " + WORD * 200},
            {"type": "function_call", "call_id": f"call_{n}", "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"call_{n}", "output": WORD * 200},
            {"role": "assistant", "content": [{"type": "output_text", "text": WORD * 50}]},
        ]
    return [*items, {"role": "user", "content": [{"type": "input_text", "text": "And now?"}]}]


def test_sdk_non_streaming_is_fitted_forwarded_and_recorded(stack: tuple[FakeUpstream, str, Path]) -> None:
    fake, url, store = stack
    client = openai_client(url, **{"X-Ctxbudget-Session": "resp"})
    first = client.responses.create(model="gpt-4o", instructions=INSTRUCTIONS, input="Hello there")
    assert first.output_text == "echo: Hello there"
    raw = client.responses.with_raw_response.create(
        model="gpt-4o", instructions=INSTRUCTIONS, input="Hello again", previous_response_id="resp_1"
    )
    again = raw.parse()
    assert again.usage is not None and again.usage.input_tokens_details.cached_tokens > 0
    assert raw.headers["x-ctxbudget-session"] == "resp" and raw.headers["x-ctxbudget-trimmed"] == "false"
    assert fake.paths[-1] == "/v1/responses"
    assert fake.received[-1]["previous_response_id"] == "resp_1"  # untouched
    assert "stream_options" not in fake.received[-1]
    turns = SQLiteStore(store).turns("resp")
    assert [t.question for t in turns] == ["Hello there", "Hello again"]
    assert turns[1].answer == "echo: Hello again"
    actual = turns[1].usage["actual"]
    assert actual["input_tokens"] == again.usage.input_tokens
    assert actual["cache_read_tokens"] == again.usage.input_tokens_details.cached_tokens > 0
    assert actual["output_tokens"] == 5


def test_sdk_streaming_is_relayed_and_recorded_when_it_completes(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    fake, url, store = stack
    client = openai_client(url, **{"X-Ctxbudget-Session": "stream"})
    events = list(client.responses.create(model="gpt-4o", input=_history(2), stream=True))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "echo: And now?"
    assert events[-1].type == "response.completed"
    assert "stream_options" not in fake.received[-1]  # a Responses stream ends with its usage
    with client.responses.stream(model="gpt-4o", input="Stream please") as stream:
        final = stream.get_final_response()
    assert final.output_text == "echo: Stream please"
    turns = SQLiteStore(store).turns("stream")
    assert [t.answer for t in turns] == ["echo: And now?", "echo: Stream please"]
    assert turns[0].usage["actual"]["output_tokens"] == 5


def test_a_long_input_is_trimmed_with_calls_and_outputs_whole(stack: tuple[FakeUpstream, str, Path]) -> None:
    fake, url, _ = stack
    client = openai_client(url, **{"X-Ctxbudget-Max-Context-Tokens": "3000"})
    raw = client.responses.with_raw_response.create(model="gpt-4o", input=_history(12), max_output_tokens=200)
    assert raw.parse().output_text == "echo: And now?"
    assert raw.headers["x-ctxbudget-trimmed"] == "true"
    assert int(raw.headers["x-ctxbudget-tokens-after"]) < int(raw.headers["x-ctxbudget-tokens-before"])
    sent = fake.received[-1]["input"]
    calls = [i["call_id"] for i in sent if i.get("type") == "function_call"]
    assert calls == [i["call_id"] for i in sent if i.get("type") == "function_call_output"]
    assert len(sent) < len(_history(12))


def test_refusals_and_upstream_errors_come_in_openai_shape(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "r.db", allowed_policies=("legal-review",)) as (_, url):
        client = openai_client(url, **{"X-Ctxbudget-Max-Context-Tokens": "300"})
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(
                model="gpt-4o", instructions=INSTRUCTIONS, input="hi", max_output_tokens=10
            )
        assert refused.value.code == "context_length_exceeded"
        with pytest.raises(openai.RateLimitError):
            openai_client(url).responses.create(model="fault-429", input="hi")
        policy = openai_client(url, **{"X-Ctxbudget-Policy": "legal-review"})
        with pytest.raises(openai.BadRequestError) as no_policy:
            policy.responses.create(model="gpt-4o", input="hi")
        assert "/v1/chat/completions" in no_policy.value.message
        with pytest.raises(openai.BadRequestError) as malformed:
            openai_client(url).responses.create(model="gpt-4o", input=[{"type": "function_call"}])  # type: ignore[list-item]
        assert "$.input[0]" in malformed.value.message
        misnamed = httpx.post(
            url + "/v1/responses", json={"model": "gpt-4o", "input": "hi", "max_tokens": "5"}
        )
        assert "$.max_tokens: must be a whole number" in misnamed.json()["error"]["message"]  # its own field
        unrouted = httpx.get(url + "/v1/responses/resp_1")
    assert unrouted.status_code == 404 and "POST /v1/responses" in unrouted.json()["error"]["message"]


def test_a_background_response_is_refused_before_it_is_sent(stack: tuple[FakeUpstream, str, Path]) -> None:
    # It would run and bill upstream, and nothing could collect it: retrieval is not served here.
    fake, url, _ = stack
    sent = len(fake.received)
    with pytest.raises(openai.BadRequestError) as refused:
        openai_client(url).responses.create(model="gpt-4o", input="hi", background=True)
    assert "background" in refused.value.message and "GET /v1/responses/{id}" in refused.value.message
    assert refused.value.response.headers["x-ctxbudget-session"].startswith(
        "auto-"
    )  # every answer to a body read
    assert len(fake.received) == sent
    openai_client(url).responses.create(model="gpt-4o", input="hi", background=False)
    assert len(fake.received) == sent + 1


def test_a_dropped_stream_ends_with_an_error_the_sdk_raises(stack: tuple[FakeUpstream, str, Path]) -> None:
    _, url, _ = stack
    with pytest.raises(openai.APIError):
        list(openai_client(url).responses.create(model="fault-disconnect", input="hi", stream=True))
    # dropped only after response.completed: the client has the whole answer, and no error
    events = list(openai_client(url).responses.create(model="fault-drop-after-end", input="hi", stream=True))
    assert events[-1].type == "response.completed"


def test_responses_usage_and_stream_events_are_read_in_their_own_shape() -> None:
    usage = normalize_usage(
        "responses", {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 100}, "output_tokens": 9}
    )
    assert usage is not None and (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (
        120,
        100,
        9,
    )
    state = StreamState(RESPONSES)
    completed = (
        b'{"type": "response.completed", "response": {"usage": {"input_tokens": 4, "output_tokens": 2}}}'
    )
    passed = state.feed(
        b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", "delta": "Hi"}\n\n'
        b"event: response.completed\ndata: " + completed + b"\n\n"
    )
    assert passed.count(b"event:") == 2  # every event goes to the client as it came
    assert state.finished and "".join(state.text) == "Hi" and state.usage["input_tokens"] == 4
    assert (
        RESPONSES.response_text(
            {
                "output": [
                    {"type": "reasoning"},
                    {
                        "type": "message",
                        "content": [
                            {"type": "output_text", "text": "a"},
                            {"type": "refusal", "refusal": "no"},
                            {"type": "output_text", "text": "b"},
                        ],
                    },
                ]
            }
        )
        == "ab"
    )


def test_a_turn_the_upstream_failed_is_passed_on_and_not_stored(
    stack: tuple[FakeUpstream, str, Path],
) -> None:
    """A Responses answer with status failed (200, no output) was stored as an answered turn, priced
    at its estimate and made the session's next baseline; streamed, response.failed ended the turn."""
    _, url, store = stack
    client = openai_client(url, **{"X-Ctxbudget-Session": "failing"})
    failed = client.responses.create(model="fault-failed", input="When was notice given?")
    assert failed.status == "failed" and failed.error is not None  # the client has it as it came
    events = list(client.responses.create(model="fault-failed", input="When?", stream=True))
    assert events[-1].type == "response.failed"  # the upstream's own event, with no error added after it
    client.responses.create(model="gpt-4o", input="When was notice given?")
    assert [t.index for t in SQLiteStore(store).turns("failing")] == [1]  # the answered one alone
