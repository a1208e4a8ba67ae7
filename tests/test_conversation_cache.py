"""Cache-aware conversations: histories cut in steps that later turns hold, rolling breakpoints,
and a 30-turn conversation through the gateway billed by a fake that caches like the provider."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import ConfigError, InvalidRequestError, assemble, count, fit
from ctxbudget.catalog.catalog import load_catalog
from ctxbudget.conversation import client_marks, conversation_blocks, mark_conversation, predict_conversation
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


# ---- the history cut in steps (library) ---------------------------------------------------------
def _talk(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for n in range(1, turns + 1):
        messages.append({"role": "user", "content": f"Question {n}: {QUESTION}"})
        messages.append({"role": "assistant", "content": f"Answer {n}: {ANSWER}"})
    return messages


def _steps(turns: int, budget: int, low_water: float = 2 / 3) -> list[Any]:
    """The fits of a conversation's turns, each given the previous turn's cut back as JSON."""
    results, cut = [], None
    for n in range(1, turns + 1):
        body = {"model": MODEL, "max_tokens": 1024, "system": SYSTEM, "messages": _talk(n)[:-1]}
        result = fit(body, model=MODEL, max_context_tokens=budget, low_water=low_water, previous_cut=cut)
        cut = json.loads(json.dumps(result.report.to_dict()))["history_cut"]  # as a stored report gives it
        results.append(result)
    return results


def test_a_cut_is_held_while_what_follows_it_fits_then_cut_again_to_the_low_water_mark() -> None:
    results = _steps(30, 24_000)
    cuts = [r.report.history_cut for r in results]
    assert cuts[0] is None and cuts[-1] is not None
    changes = [n for n in range(1, 30) if cuts[n] != cuts[n - 1]]
    assert 2 <= len(changes) <= 8  # cut in steps, not every turn
    for r in results:
        assert r.report.tokens_after <= 24_000 - 1024
    for n in changes:
        history = results[n].report.budgets["history"]
        kept = sum(i.tokens_after for i in results[n].report.items if i.component == "history")
        assert kept <= history * 2 / 3 + 200 and history > 0  # back to the low-water mark
    for n in range(1, 30):
        if n not in changes and cuts[n] is not None:  # held: what was sent is a prefix of what is sent
            before, after = results[n - 1].request["messages"], results[n].request["messages"]
            assert after[: len(before) - 1] == before[:-1]
    for r in results:  # a kept run begins with a user turn, right after the placeholder
        texts = [
            b["text"] if isinstance(b, dict) else b
            for m in r.request["messages"]
            for b in (m["content"] if isinstance(m["content"], list) else [m["content"]])
        ]
        if r.report.history_cut is not None:
            after = next(i for i, t in enumerate(texts) if "Earlier conversation summarized" in t) + 1
            assert texts[after].startswith("Question")


def test_a_cut_from_another_conversation_is_not_held() -> None:
    results = _steps(20, 24_000)
    cut = results[-1].report.history_cut
    assert cut is not None
    other = _talk(20)[:-1]
    other[0] = {"role": "user", "content": "A different first question. " + QUESTION}
    body = {"model": MODEL, "max_tokens": 1024, "system": SYSTEM, "messages": other}
    fresh = fit(body, model=MODEL, max_context_tokens=24_000, low_water=2 / 3)
    given = fit(body, model=MODEL, max_context_tokens=24_000, low_water=2 / 3, previous_cut=cut)
    assert given.request == fresh.request  # the digest differs: a new cut, as if none was given


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"low_water": 0}, "low_water"),
        ({"low_water": 1.5}, "low_water"),
        ({"low_water": "2/3"}, "low_water"),
        ({"low_water": True}, "low_water"),
        ({"previous_cut": {"index": 3, "sha256": "ab"}}, "only with low_water"),
        ({"low_water": 0.5, "previous_cut": 3}, "history_cut"),
        ({"low_water": 0.5, "previous_cut": {"index": -1, "sha256": "ab"}}, "history_cut"),
    ],
)
def test_bad_step_options_are_config_errors(options: dict[str, Any], message: str) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(ConfigError, match=message):
        fit(body, model=MODEL, **options)


# ---- rolling breakpoints ------------------------------------------------------------------------
def _marks(body: dict[str, Any]) -> Any:
    catalog = load_catalog()
    return mark_conversation(
        body, model=MODEL, rules=catalog.get_model(MODEL).cache, counter=catalog.counter_for(MODEL)
    )


def _marked(body: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [w for w, b in conversation_blocks(body) if "cache_control" in b]


def test_breakpoints_end_the_newest_message_the_previous_turn_and_the_system_prompt() -> None:
    body = {"model": MODEL, "system": SYSTEM, "messages": _talk(3)[:-1]}
    plan = _marks(body)
    assert sorted(m.by for m in plan.marks) == ["newest message", "previous turn", "system prompt"]
    assert _marked(plan.body) == [("system", 0), ("message", 2, 0), ("message", 4, 0)]
    assert body["messages"][4]["content"] == _talk(3)[4]["content"]  # the client's body is not changed
    unmarked_body = {
        **plan.body,
        "messages": [
            {**m, "content": m["content"][0]["text"]} if isinstance(m["content"], list) else m
            for m in plan.body["messages"]
        ],
    }
    assert unmarked_body["messages"] == body["messages"]


def test_the_clients_marks_are_kept_and_count_against_the_limit() -> None:
    messages = _talk(3)[:-1]
    marked = [
        {"type": "text", "text": m["content"], "cache_control": {"type": "ephemeral"}} for m in messages[:3]
    ]
    body = {
        "model": MODEL,
        "system": SYSTEM,
        "messages": [{**m, "content": [b]} for m, b in zip(messages, marked, strict=False)] + messages[3:],
    }
    plan = _marks(body)
    assert len(_marked(plan.body)) == 4  # three of the client's, one of ours (the newest message)
    assert [m.by for m in plan.marks].count("client") == 3
    assert ("message", 4, 0) in _marked(plan.body)


def test_no_mark_before_a_clients_one_hour_mark_nor_under_the_minimum_nor_on_thinking() -> None:
    hour = {"type": "ephemeral", "ttl": "1h"}
    body = {
        "model": MODEL,
        "system": [{"type": "text", "text": SYSTEM}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": QUESTION, "cache_control": hour}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "...", "signature": "s"}]},
            {"role": "user", "content": "Short?"},
        ],
    }
    plan = _marks(body)
    assert ("system", 0) not in _marked(plan.body)  # it would come before the 1-hour mark
    assert ("message", 2, 0) in _marked(plan.body)
    short = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}
    assert _marks(short).marks == () and _marked(_marks(short).body) == []  # under 1,024 tokens


def test_thinking_of_earlier_turns_is_no_part_of_a_predicted_prefix() -> None:
    # The API strips an earlier turn's thinking (the fit does not count it): counted as its JSON,
    # signature and all, it made the predicted cache reads twice the request's size.
    thinking = {"type": "thinking", "thinking": WORDS * 20, "signature": "EqQB" + "s" * 400}
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "notice"}}

    def body(reply: list[dict[str, Any]], then: Any) -> dict[str, Any]:
        messages = [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": reply},
            {"role": "user", "content": then},
        ]
        return {"model": MODEL, "system": SYSTEM, "messages": messages}

    answer = {"type": "text", "text": ANSWER}
    earlier, plain = _marks(body([thinking, answer], "And then?")), _marks(body([answer], "And then?"))
    assert earlier.tokens[-1] == plain.tokens[-1]
    result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "found"}]
    # in the current tool loop (after the latest user turn) it goes back to the model: it counts
    loop, bare = _marks(body([thinking, tool_use], result)), _marks(body([tool_use], result))
    assert loop.tokens[-1] > bare.tokens[-1]


def _png_data_url(payload_bytes: int) -> str:
    """A data URL of a 512x512 PNG header followed by ``payload_bytes`` of filler."""
    import base64
    import struct

    header = (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", 13)
        + b"IHDR"
        + struct.pack(">IIBBBBB", 512, 512, 8, 2, 0, 0, 0)
    )
    return "data:image/png;base64," + base64.b64encode(header + b"\0" * 4 + b"\x07" * payload_bytes).decode()


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_inline_image_is_predicted_at_its_tokens_not_its_base64(api: str) -> None:
    """An OpenAI image part counted as its JSON text (the base64 tokenized: 1.3M tokens for a
    1.5 MB PNG) made the predicted cache read 19x the request, priced a turn over the ceiling at
    the read rate and let it through, and tokenized the base64 on every turn (seconds of CPU)."""
    url = _png_data_url(300_000)
    if api == "chat":
        part = {"type": "image_url", "image_url": {"url": url}}
        body: dict[str, Any] = {
            "model": "gpt-5",
            "messages": [{"role": "user", "content": [part, {"type": "text", "text": "What is it?"}]}],
        }
    else:
        part = {"type": "input_image", "image_url": url}
        message = {"role": "user", "content": [part, {"type": "input_text", "text": "What is it?"}]}
        body = {"model": "gpt-5", "input": [message]}
    catalog = load_catalog()
    plan = mark_conversation(
        body, model="gpt-5", rules=catalog.get_model("gpt-5").cache, counter=catalog.counter_for("gpt-5")
    )
    counted = count(body, model="gpt-5")["tokens"]
    assert 200 < plan.tokens[-1] <= counted + 20  # the image's tile estimate (255-773), no base64


def test_a_prediction_equals_what_the_caching_fake_bills_turn_after_turn() -> None:
    catalog = load_catalog()
    counter, rules = catalog.counter_for(MODEL), catalog.get_model(MODEL).cache
    upstream = BillingUpstream(counter=counter, rules=rules)
    alive: tuple[str, ...] = ()
    for turns in range(1, 12):
        body = {"model": MODEL, "system": SYSTEM, "messages": _talk(turns)[:-1]}
        plan = mark_conversation(body, model=MODEL, rules=rules, counter=counter)
        predicted, alive = predict_conversation(plan, alive, rules.mode)
        bill = upstream.bill(plan.body)
        assert (predicted.read_tokens, predicted.write_tokens) == (
            bill.cache_read_input_tokens,
            bill.cache_write_5m_tokens,
        )


def test_openai_conversations_keep_their_prefix_without_marks(tmp_path: Path) -> None:
    """Automatic caching needs no marks: the held cut keeps what was sent a prefix of what is
    sent next, and the predicted read grows from it."""
    received: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        received.append(json.loads(request.content))
        message = {"role": "assistant", "content": ANSWER}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        return httpx.Response(
            200,
            json={
                "id": "c",
                "object": "chat.completion",
                "model": "gpt-4o",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": usage,
            },
        )

    config = GatewayConfig(store_path=str(tmp_path / "o.db"), openai_upstream="http://openai.invalid")
    app = create_app(config, httpx.MockTransport(answer))

    async def run() -> list[httpx.Response]:
        out, messages = [], [{"role": "system", "content": SYSTEM}]
        headers = {"X-Ctxbudget-Session": "oa", "X-Ctxbudget-Max-Context-Tokens": "24000"}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://g") as client:
            for n in range(1, 21):
                messages.append({"role": "user", "content": f"Question {n}: {QUESTION}"})
                body = {"model": "gpt-4o", "max_tokens": 1024, "messages": messages}
                response = await client.post("/v1/chat/completions", json=body, headers=headers)
                assert response.status_code == 200, response.text
                out.append(response)
                messages.append({"role": "assistant", "content": ANSWER})
        app.state.gateway.close()
        return out

    responses = asyncio.run(run())
    assert not any("cache_control" in json.dumps(b) for b in received)
    prefixed = sum(
        received[n]["messages"][: len(received[n - 1]["messages"])] == received[n - 1]["messages"]
        for n in range(1, 20)
    )
    assert prefixed >= 15  # all but the turns that cut
    reads = [int(r.headers["x-ctxbudget-cache-read-predicted"]) for r in responses]
    assert reads[0] == 0 and sum(r > 0 for r in reads[1:]) >= 15


# ---- what hostile traffic showed ----------------------------------------------------------------
def test_an_agent_loop_is_predicted_as_it_is_billed(tmp_path: Path) -> None:
    """Tool calls and results are counted as the fit counts them, by the gateway and the fake."""
    catalog = load_catalog()
    upstream = BillingUpstream(counter=catalog.counter_for(MODEL), rules=catalog.get_model(MODEL).cache)
    app = create_app(
        GatewayConfig(store_path=str(tmp_path / "a.db"), anthropic_upstream="http://billing.invalid"),
        httpx.MockTransport(upstream.handle),
    )
    tools = [{"name": "lookup", "description": "Look up.", "input_schema": {"type": "object"}}]

    async def run() -> list[httpx.Response]:
        out, messages = [], [{"role": "user", "content": "Task: " + QUESTION}]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://g") as client:
            for step in range(6):
                body = {
                    "model": MODEL,
                    "max_tokens": 1024,
                    "system": SYSTEM,
                    "tools": tools,
                    "messages": messages,
                }
                response = await client.post(
                    "/v1/messages", json=body, headers={"X-Ctxbudget-Session": "agent"}
                )
                assert response.status_code == 200, response.text
                out.append(response)
                calls = [
                    {"type": "tool_use", "id": f"t{step}_{k}", "name": "lookup", "input": {"q": f"item {k}"}}
                    for k in range(12)
                ]
                results = [
                    {"type": "tool_result", "tool_use_id": c["id"], "content": f"result {k} " + WORDS}
                    for k, c in enumerate(calls)
                ]
                messages += [{"role": "assistant", "content": calls}, {"role": "user", "content": results}]
        app.state.gateway.close()
        return out

    for response, bill in zip(asyncio.run(run()), upstream.bills, strict=True):
        assert int(response.headers["x-ctxbudget-cache-read-predicted"]) == bill.cache_read_input_tokens
        assert int(response.headers["x-ctxbudget-cache-write-predicted"]) == bill.cache_write_5m_tokens


def test_a_top_level_mark_counts_against_the_limit_and_a_null_mark_is_none() -> None:
    messages = _talk(3)[:-1]
    three = [
        {**m, "content": [{"type": "text", "text": m["content"], "cache_control": {"type": "ephemeral"}}]}
        for m in messages[:3]
    ]
    top = {
        "model": MODEL,
        "system": SYSTEM,
        "cache_control": {"type": "ephemeral"},
        "messages": three + messages[3:],
    }
    plan = _marks(top)
    assert len(_marked(plan.body)) == 3 and len(plan.marks) == 4  # three marks and the top-level one
    null = [
        {**m, "content": [{"type": "text", "text": m["content"], "cache_control": None}]} for m in messages
    ]
    plan = _marks({"model": MODEL, "system": SYSTEM, "messages": null})
    assert sorted(m.by for m in plan.marks) == ["newest message", "previous turn", "system prompt"]


def test_responses_conversations_are_predicted_too(tmp_path: Path) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
        output = [
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
            }
        ]
        return httpx.Response(
            200,
            json={
                "id": "r",
                "object": "response",
                "status": "completed",
                "model": "gpt-4o",
                "output": output,
                "usage": usage,
            },
        )

    app = create_app(
        GatewayConfig(store_path=str(tmp_path / "r.db"), openai_upstream="http://openai.invalid"),
        httpx.MockTransport(answer),
    )

    async def run() -> list[int]:
        reads, items = [], []
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://g") as client:
            for n in range(1, 8):
                items.append({"role": "user", "content": f"Question {n}: {QUESTION}"})
                body = {"model": "gpt-4o", "instructions": SYSTEM, "input": items}
                response = await client.post("/v1/responses", json=body, headers={"X-Ctxbudget-Session": "r"})
                assert response.status_code == 200, response.text
                reads.append(int(response.headers["x-ctxbudget-cache-read-predicted"]))
                items.append({"role": "assistant", "content": ANSWER})
        app.state.gateway.close()
        return reads

    reads = asyncio.run(run())
    assert reads[0] == 0 and all(r > 0 for r in reads[1:])


@pytest.mark.parametrize("low_water", [0, 5, float("nan"), True])
def test_a_bad_low_water_is_refused_when_the_gateway_is_configured(low_water: Any) -> None:
    with pytest.raises(ConfigError, match="low_water"):
        GatewayConfig(low_water=low_water)


def test_fit_places_the_breakpoints_when_asked() -> None:
    body = {"model": MODEL, "max_tokens": 1024, "system": SYSTEM, "messages": _talk(3)[:-1]}
    marked = fit(body, model=MODEL, cache_breakpoints=True).request
    assert _marked(marked) == [("system", 0), ("message", 2, 0), ("message", 4, 0)]
    assert _marked(fit(body, model=MODEL).request) == []
    chat = {"model": "gpt-4o", "messages": [{"role": "system", "content": SYSTEM}, *_talk(3)[:-1]]}
    assert "cache_control" not in json.dumps(fit(chat, model="gpt-4o", cache_breakpoints=True).request)


def test_a_stored_state_that_is_no_cut_is_ignored() -> None:
    from ctxbudget.gateway.caching import state_of

    for bad in ({"index": "3", "sha256": "x"}, {"index": -1, "sha256": "x"}, {"index": 2}, [1, 2], "cut"):
        state = state_of({"conversation": {"history_cut": bad, "alive": ["a", 3]}})
        assert state is not None and state.history_cut is None and state.alive == ("a",)


def _nested_marks_body(n: int) -> dict[str, Any]:
    """A conversation whose tool results carry the client's marks on their inner blocks."""
    messages: list[dict[str, Any]] = []
    for i in range(n):
        inner = [{"type": "text", "text": "result " * 300, "cache_control": {"type": "ephemeral"}}]
        messages += [
            {"role": "user", "content": f"question {i} " + "word " * 300},
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "s", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": inner}]},
            {"role": "assistant", "content": "noted " * 50},
        ]
    messages.append({"role": "user", "content": "And now?"})
    return {"model": "claude-sonnet-4-5", "system": "Playbook. " * 600, "messages": messages}


@pytest.mark.parametrize("nested", [1, 3, 4])
def test_marks_inside_tool_results_count_toward_the_limit_of_four(nested: int) -> None:
    body = _nested_marks_body(nested)
    assert client_marks(body) == nested
    fitted = fit(body, model="claude-sonnet-4-5", cache_breakpoints=True).request
    assert client_marks(fitted) == 4  # the rolling ones fill what the client's leave
    assembled = assemble(body, policy="legal-review", model="claude-sonnet-4-5").request
    assert client_marks(assembled) <= 4  # the plan's alone: the client's inner marks removed


@pytest.mark.parametrize("mark", [{}, {"type": "bogus"}, {"type": "ephemeral", "ttl": "2h"}, "ephemeral"])
def test_a_cache_mark_the_api_refuses_is_refused_naming_its_place(mark: Any) -> None:
    text = {"type": "text", "text": "hi", "cache_control": mark}
    places = [
        (
            {"messages": [{"role": "user", "content": [text]}]},
            r"\$\.messages\[0\]\.content\[0\]\.cache_control",
        ),
        (
            {"system": [text], "messages": [{"role": "user", "content": "hi"}]},
            r"\$\.system\[0\]\.cache_control",
        ),
        (
            {
                "tools": [{"name": "f", "input_schema": {}, "cache_control": mark}],
                "messages": [{"role": "user", "content": "hi"}],
            },
            r"\$\.tools\[0\]\.cache_control",
        ),
    ]
    for body, where in places:
        with pytest.raises(InvalidRequestError, match=where):
            count(body, model="claude-sonnet-4-5", input_format="anthropic")


def test_a_pasted_document_larger_than_any_step_is_cut_not_dropped() -> None:
    # Whole units only, the step cut replaced a 39k-token document by the placeholder: 32 tokens
    # of a 32,000-token budget were sent, turn after turn. It is cut down to the low-water mark.
    document = "The lease term runs five years and the rent escalates annually. " * 3000
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": document},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "Summarise the lease?"},
        ],
    }
    result = fit(body, model="gpt-4o", max_context_tokens=32000, reserve_output_tokens=0, low_water=2 / 3)
    assert 0.6 * 32000 < result.report.tokens_after <= 32000
    assert result.report.items[0].action == "truncated"


@pytest.mark.parametrize("where", ["tool result", "pasted first"])
def test_a_unit_too_large_for_any_step_is_cut_once_and_held(where: str) -> None:
    """A tool result (or a pasted document) over any step's room was cut into the room left on
    every turn, shorter as the conversation grew: the prefix moved at it on every turn, and the
    cache missed some 16,000 tokens a turn. It is cut down at a step, against the question then,
    and the turns after send it byte for byte, until the next step."""
    question = "What did the witness say about delivery? "
    answer = {"role": "assistant", "content": "The record shows it. " * 40}
    record = "12:04 A. The delivery was late. " * 3000
    if where == "tool result":
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": question * 30},
            answer,
            {"role": "user", "content": question},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": record}]},
            answer,
        ]
    else:
        messages = [{"role": "user", "content": record + question}, answer]
    cut, sent, moved = None, [], 0
    for turn in range(10):
        messages = [*messages, {"role": "user", "content": f"Turn {turn}: {question * 20}"}]
        body = {"model": MODEL, "max_tokens": 1024, "system": SYSTEM, "messages": messages}
        result = fit(body, model=MODEL, max_context_tokens=24000, low_water=2 / 3, previous_cut=cut)
        assert result.report.tokens_after <= result.report.available_tokens
        assert count(result.request, model=MODEL)["tokens"] == result.report.tokens_after
        now = result.request["messages"]
        moved += bool(sent) and json.dumps(now[: len(sent) - 1]) != json.dumps(sent[:-1])
        cut, sent = result.report.history_cut, now
        messages = [*messages, answer]
    assert cut is not None and cut.budget is not None  # the unit is kept, cut down
    assert moved <= 2  # a step now and then, not every turn (it moved on all 9 before)


def test_no_mark_of_ours_goes_before_a_clients_hour_mark_inside_a_tool_result() -> None:
    """The Messages API wants every 1-hour mark before any 5-minute one: a client's 1-hour mark on
    a block inside a tool result holds ours back as one on a top-level block does."""
    doc = "Reference manual paragraph about the service configuration. " * 300
    hour = {"type": "ephemeral", "ttl": "1h"}
    body = {
        "system": "You are an SRE assistant. " * 200,
        "messages": [
            {"role": "user", "content": "Read the manual. " + doc},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": doc, "cache_control": hour}],
                    },
                    {"type": "text", "text": "Which port does the service use?"},
                ],
            },
        ],
    }
    sent = fit(body, model="claude-sonnet-4-5", cache_breakpoints=True).request
    order = re.findall(r'"cache_control": \{"type": "ephemeral"(, "ttl": "1h")?\}', json.dumps(sent))
    assert order and order[0] == ', "ttl": "1h"' and all(o == "" for o in order[1:])
    assert sent["system"] == body["system"]  # no 5-minute mark on the system prompt before it


def test_marks_inside_a_documents_own_content_and_a_search_result_count() -> None:
    """A document whose source is content blocks, and a search result inside a tool result, may
    carry marks: they count toward the limit of 4, and a 1-hour one holds ours back."""
    hour = {"type": "ephemeral", "ttl": "1h"}
    document = {
        "type": "document",
        "source": {
            "type": "content",
            "content": [{"type": "text", "text": "Manual. " * 900, "cache_control": hour}],
        },
    }
    search = {
        "type": "search_result",
        "source": "https://example.com",
        "title": "t",
        "content": [{"type": "text", "text": "found"}],
        "cache_control": hour,
    }
    body = {
        "system": "You are an SRE assistant. " * 200,
        "messages": [
            {"role": "user", "content": [document, {"type": "text", "text": "Read it."}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [search]}]},
        ],
    }
    assert client_marks(body) == 2
    sent = fit(body, model="claude-sonnet-4-5", cache_breakpoints=True).request
    order = re.findall(r'"cache_control": \{"type": "ephemeral"(, "ttl": "1h")?\}', json.dumps(sent))
    assert order == [', "ttl": "1h"', ', "ttl": "1h"']  # nothing of ours before the client's hour marks


def _fetched(text: str, mark: bool) -> list[dict[str, Any]]:
    """A web fetch: its server tool call and its result, whose document is one object."""
    document: dict[str, Any] = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": text},
    }
    if mark:
        document["cache_control"] = {"type": "ephemeral"}
    result = {"type": "web_fetch_result", "url": "https://example.com/status", "content": document}
    return [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_fetch",
            "input": {"url": "https://example.com/status"},
        },
        {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_1", "content": result},
    ]


def test_marks_inside_a_block_held_as_an_object_count_against_the_limit() -> None:
    mark = {"type": "ephemeral"}
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "You are an SRE. " * 400, "cache_control": mark}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Fetch it. " * 400, "cache_control": mark}],
            },
            {
                "role": "assistant",
                "content": [*_fetched("status ok " * 600, True), {"type": "text", "text": "Done."}],
            },
            {
                "role": "user",
                "content": [{"type": "text", "text": "Summarize. " * 400, "cache_control": mark}],
            },
            {"role": "assistant", "content": "The incident was brief. " * 100},
            {"role": "user", "content": "What should change in the runbook?"},
        ],
    }
    assert client_marks(body) == 4  # the fetched document's mark is found
    sent = fit(body, model="claude-sonnet-4-5", max_context_tokens=200_000, cache_breakpoints=True).request
    assert client_marks(sent) == 4  # none added past the limit


def test_assemble_leaves_no_client_mark_however_deep() -> None:
    results = [
        {
            "type": "tool_result",
            "tool_use_id": f"toolu_{n}",
            "content": [
                {
                    "type": "search_result",
                    "source": f"https://kb/{n}",
                    "title": f"Doc {n}",
                    "content": [
                        {
                            "type": "text",
                            "text": "Notice was given. " * 50,
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                }
            ],
        }
        for n in range(4)
    ]
    calls = [
        {"type": "tool_use", "id": f"toolu_{n}", "name": "search", "input": {"q": "notice"}} for n in range(4)
    ]
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": "Review the record. " * 400,
        "messages": [
            {"role": "user", "content": "Search the knowledge base."},
            {"role": "assistant", "content": calls},
            {"role": "user", "content": results},
            {"role": "assistant", "content": "Found four documents."},
            {"role": "user", "content": "Was notice given?"},
        ],
    }
    sent = assemble(body, policy="legal-review", model="claude-sonnet-4-5").request
    assert isinstance(sent, dict) and client_marks(sent) <= 4


def test_a_held_cut_keeps_the_first_unit_as_it_did_when_the_budget_moves() -> None:
    """Whether the first unit is kept was decided by its size against the history's budget, which
    moves with the rest of the request: a longer question on the next turn dropped a first
    message the held cut had kept, and the cached prefix changed though the cut was "held"."""
    from ctxbudget.items import HistoryCut, Item
    from ctxbudget.trim.steps import Steps, cut_of, step_cut

    units = [[Item(component="history", index=i, path=f"$.h[{i}]", text=f"m{i}")] for i in range(8)]
    costs = [1900, 300, 300, 300, 300, 300, 300, 300]
    first_turn = step_cut(units, costs, 12_000, 15, Steps(low_water=0.5))
    assert first_turn is not None and first_turn.keep_first  # 1,915 <= 3,000
    previous = cut_of(units, first_turn.start, first_turn.keep_first)
    assert HistoryCut.of(previous.to_dict()) == previous  # as a report gives it back
    # the next turn's history budget is smaller (a longer question): the size rule alone says no
    held = step_cut(units, costs, 7_000, 15, Steps(low_water=0.5, previous=HistoryCut.of(previous.to_dict())))
    assert held is not None and held.held and held.keep_first and held.start == first_turn.start
    # a cut from a report written before the rule was recorded: the size rule, as before
    unrecorded = HistoryCut(previous.index, previous.sha256)
    assert not step_cut(units, costs, 7_000, 15, Steps(low_water=0.5, previous=unrecorded)).keep_first  # type: ignore[union-attr]


def test_a_cut_down_first_message_is_held_only_by_its_own_conversation() -> None:
    """A cut that keeps the first message cut down covered no message in its digest: another
    conversation (another pasted document, the same session) held it, and its document was cut
    against the first conversation's question."""

    def body(document: str, question: str) -> dict[str, Any]:
        messages = [{"role": "user", "content": document}, {"role": "assistant", "content": "Read."}]
        return {"model": "gpt-4o", "messages": [*messages, {"role": "user", "content": question}]}

    lease = "".join(
        f"The {w}{i} provision of the lease sets the rent review. " for i in range(900) for w in ["kilo"]
    )
    shipping = "".join(
        f"The {w}{i} provision of the contract sets the delivery date. " for i in range(900) for w in ["echo"]
    )
    first = fit(
        body(lease, "What does the kilo123 provision say?"),
        model="gpt-4o",
        max_context_tokens=9000,
        low_water=2 / 3,
    )
    cut = first.report.history_cut
    assert cut is not None and cut.index == 0 and cut.budget is not None
    other = fit(
        body(shipping, "What does the echo4 provision say?"),
        model="gpt-4o",
        max_context_tokens=9000,
        low_water=2 / 3,
        previous_cut=cut,
    )
    assert (
        other.report.history_cut is not None
        and other.report.history_cut.query == "What does the echo4 provision say?"
    )
    assert "echo4 provision" in json.dumps(other.request)


def test_a_cut_down_unit_s_size_and_question_go_back_and_forth_with_the_cut() -> None:
    from ctxbudget.items import HistoryCut, Item
    from ctxbudget.trim.steps import Steps, cut_of, step_cut

    units = [[Item(component="history", index=i, path=f"$.h[{i}]", text=f"m{i}")] for i in range(6)]
    costs = [100, 300, 9_000, 300, 300, 300]  # unit 2 is over any cut's room (6,000 at 0.5)
    cut = step_cut(units, costs, 12_000, 15, Steps(low_water=0.5), "When was it sent?")
    assert cut is not None and (cut.start, cut.budget, cut.query) == (
        2,
        6_000 - 115 - 900,
        "When was it sent?",
    )
    given = cut_of(units, cut.start, cut.keep_first, cut.budget, cut.query)
    assert HistoryCut.of(given.to_dict()) == given
    held = step_cut(units, costs, 8_000, 15, Steps(low_water=0.5, previous=given), "Another question?")
    assert held is not None and held.held and (held.budget, held.query) == (given.budget, given.query)
    for broken in ({"budget": 0}, {"budget": "9"}, {"budget": 10, "query": 5}, {"budget": True, "query": ""}):
        assert HistoryCut.of({"index": 2, "sha256": "d" * 64, **broken}) is None


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(alphabet='ab"\\é:1', max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet="abc", max_size=2), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(first=_JSON_VALUES, second=_JSON_VALUES)
def test_two_blocks_prefix_hash_alike_exactly_when_their_json_is_the_same(first: Any, second: Any) -> None:
    """Blocks that are not text are hashed as their values, not as their JSON text (an 8 MB image
    took 46 ms of every turn): still equal exactly when the JSON is, key order aside."""
    one = _hash_of({"type": "image", "source": first})
    other = _hash_of({"type": "image", "source": second})
    same = json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert (one == other) is same


def _hash_of(block: dict[str, Any]) -> str:
    import hashlib

    from ctxbudget.conversation import _hash_block

    digest = hashlib.sha256()
    _hash_block(digest, "user", block)
    return digest.hexdigest()


def test_a_text_block_and_a_value_never_hash_alike() -> None:
    text = {"type": "text", "text": "v"}
    assert _hash_of(text) != _hash_of({"type": "image", "source": "v"})
    assert _hash_of(text) == _hash_of({"type": "text", "text": "v", "cache_control": {"type": "ephemeral"}})


def _timed_turns(
    store: Path, upstream: BillingUpstream, waits: list[float], ceiling: float | None = None, **config: Any
) -> list[httpx.Response]:
    """One turn per wait (seconds on the upstream's clock, which is the gateway's too, before
    each), the same conversation each time, through a gateway over ``store``."""
    app = create_app(
        GatewayConfig(store_path=str(store), anthropic_upstream="http://billing.invalid", **config),
        httpx.MockTransport(upstream.handle),
        clock=lambda: upstream.now,
    )
    headers = {"X-Ctxbudget-Session": "idle"}
    if ceiling is not None:
        headers["X-Ctxbudget-Cost-Ceiling"] = str(ceiling)

    async def run() -> list[httpx.Response]:
        answers = []
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway.local") as client:
            for n, wait in enumerate(waits):
                upstream.now += wait
                body = {
                    "model": MODEL,
                    "max_tokens": 100,
                    "system": SYSTEM,
                    "messages": [{"role": "user", "content": f"Q{n}"}],
                }
                answers.append(await client.post("/v1/messages", json=body, headers=headers))
        app.state.gateway.close()
        return answers

    return asyncio.run(run())


def _billing() -> BillingUpstream:
    catalog = load_catalog()
    return BillingUpstream(
        counter=catalog.counter_for(MODEL), rules=catalog.get_model(MODEL).cache, answer="ok"
    )


def test_a_turn_after_the_cache_expired_is_predicted_as_the_provider_bills_it(tmp_path: Path) -> None:
    """The prediction took the previous turn's prefixes as cached however long ago it was sent: a
    turn 330 s later was priced as a cache read (12x under its bill) and let past a ceiling."""
    upstream = _billing()
    answers = _timed_turns(tmp_path / "c.db", upstream, [0, 60, 330, 10])
    reads = [int(a.headers["x-ctxbudget-cache-read-predicted"]) for a in answers]
    writes = [int(a.headers["x-ctxbudget-cache-write-predicted"]) for a in answers]
    assert reads == [b.cache_read_input_tokens for b in upstream.bills]
    assert writes == [b.cache_write_5m_tokens for b in upstream.bills]
    assert reads[1] > 0 and reads[2] == 0 and writes[2] > 0 and reads[3] > 0


def test_a_ceiling_holds_for_the_writes_when_the_caches_age_is_not_known(tmp_path: Path) -> None:
    """After a restart the gateway cannot tell how long ago the previous turn was sent: it still
    predicts a read, and a ceiling holds for the turn with that read written instead."""
    store = tmp_path / "c.db"
    _timed_turns(store, _billing(), [0])
    (read_assumed,) = _timed_turns(store, _billing(), [5])
    assert int(read_assumed.headers["x-ctxbudget-cache-read-predicted"]) > 0
    cost = float(read_assumed.headers["x-ctxbudget-estimated-cost-usd"])
    (refused,) = _timed_turns(store, _billing(), [5], ceiling=cost * 1.5)
    assert refused.status_code == 400 and "cost_ceiling" in refused.text
    assert "did not send the session's previous turn" in refused.json()["error"]["message"]
    (passed,) = _timed_turns(store, _billing(), [5], ceiling=cost * 10)
    assert passed.status_code == 200 and int(passed.headers["x-ctxbudget-cache-read-predicted"]) > 0


def test_policy_mode_holds_a_ceiling_for_the_writes_when_the_caches_age_is_not_known(tmp_path: Path) -> None:
    store = tmp_path / "p.db"
    _timed_turns(store, _billing(), [0], policy="legal-review")
    (read_assumed,) = _timed_turns(store, _billing(), [5], policy="legal-review")
    cost = float(read_assumed.headers["x-ctxbudget-estimated-cost-usd"])
    (refused,) = _timed_turns(store, _billing(), [5], ceiling=cost * 1.5, policy="legal-review")
    assert refused.status_code == 400, refused.text
    assert "did not send the session's previous turn" in refused.json()["error"]["message"]
    (passed,) = _timed_turns(store, _billing(), [5], ceiling=cost * 20, policy="legal-review")
    assert passed.status_code == 200
    assert float(passed.headers["x-ctxbudget-estimated-cost-usd"]) == cost  # the prediction: a read


def test_policy_mode_prices_a_turn_after_the_cache_expired_as_written(tmp_path: Path) -> None:
    """legal-review's pinned tier is cached for an hour: read 400 s on, written again after it."""
    upstream = _billing()
    answers = _timed_turns(tmp_path / "p.db", upstream, [0, 60, 400, 3700], policy="legal-review")
    assert [a.status_code for a in answers] == [200] * 4
    costs = [float(a.headers["x-ctxbudget-estimated-cost-usd"]) for a in answers]
    assert costs[1] < costs[0] and costs[2] < costs[0] and costs[3] > costs[2]
    read = [b.cache_read_input_tokens for b in upstream.bills]
    assert read[1] > 0 and read[2] > 0 and read[3] == 0


def _openai_policy_turn(store: Path, ceiling: float | None = None) -> httpx.Response:
    """One Chat Completions turn asking for 4 replies, in policy mode, through a new gateway over
    ``store`` (a new process: it did not send the session's previous turn)."""

    def answer(request: httpx.Request) -> httpx.Response:
        replies = json.loads(request.content).get("n", 1)
        choices = [
            {"index": i, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
            for i in range(replies)
        ]
        usage = {"prompt_tokens": 10, "completion_tokens": replies, "total_tokens": 10 + replies}
        return httpx.Response(
            200, json={"id": "c", "object": "chat.completion", "choices": choices, "usage": usage}
        )

    config = GatewayConfig(store_path=str(store), openai_upstream="http://up.invalid", policy="legal-review")
    app = create_app(config, httpx.MockTransport(answer))
    headers = {"X-Ctxbudget-Session": "replies"}
    if ceiling is not None:
        headers["X-Ctxbudget-Cost-Ceiling"] = str(ceiling)
    body = {
        "model": "gpt-4o",
        "n": 4,
        "max_tokens": 1500,
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "When was notice given?"},
        ],
    }

    async def run() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://g") as client:
            return await client.post("/v1/chat/completions", json=body, headers=headers)

    try:
        return asyncio.run(run())
    finally:
        app.state.gateway.close()


def test_policy_mode_holds_a_ceiling_for_the_writes_of_every_reply_asked_for(tmp_path: Path) -> None:
    """With its reads written instead, the turn was priced with one reply of the 4 asked for
    (``n``): a turn whose every reply the assembly prices, over the ceiling that way, was sent."""
    store = tmp_path / "n.db"
    first = _openai_policy_turn(store)  # nothing cached before it: all its input is uncached
    assumed = _openai_policy_turn(store)  # a read assumed (the previous turn's age is not known)
    assert int(assumed.headers["x-ctxbudget-cache-read-predicted"]) > 0
    written = float(first.headers["x-ctxbudget-estimated-cost-usd"])  # gpt-4o writes at the input price
    read = float(assumed.headers["x-ctxbudget-estimated-cost-usd"])
    assert read < written
    refused = _openai_policy_turn(store, ceiling=round((read + written) / 2, 6))
    assert refused.status_code == 400, refused.text
    assert "did not send the session's previous turn" in refused.json()["error"]["message"]
    assert _openai_policy_turn(store, ceiling=written).status_code == 200


def _unfollowed_turn(
    tmp_path: Path, ttl: str, ceiling: float | None
) -> tuple[BillingUpstream, httpx.Response]:
    """One Anthropic turn with the client's own mark on a long system prompt, through a gateway
    without conversation caching."""
    upstream = _billing()
    config = GatewayConfig(
        store_path=str(tmp_path / f"{ttl}-{ceiling}.db"),
        anthropic_upstream="http://billing.invalid",
        conversation_cache=False,
    )
    app = create_app(config, httpx.MockTransport(upstream.handle))
    headers = {"X-Ctxbudget-Session": "marked"}
    if ceiling is not None:
        headers["X-Ctxbudget-Cost-Ceiling"] = str(ceiling)
    mark = {"type": "ephemeral", "ttl": ttl}
    body = {
        "model": MODEL,
        "max_tokens": 100,
        "system": [{"type": "text", "text": SYSTEM * 10, "cache_control": mark}],
        "messages": [{"role": "user", "content": "When was notice given?"}],
    }

    async def run() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://g") as client:
            return await client.post("/v1/messages", json=body, headers=headers)

    try:
        return upstream, asyncio.run(run())
    finally:
        app.state.gateway.close()


@pytest.mark.parametrize("ttl", ["5m", "1h"])
def test_without_conversation_caching_a_ceiling_holds_for_what_the_marks_write(
    tmp_path: Path, ttl: str
) -> None:
    """With conversation caching off, the turn was priced as uncached input: a client's one-hour
    mark on a 54,000-token system prompt was billed twice the estimate the ceiling let through."""
    prices = load_catalog().get_model(MODEL).prices
    assert prices is not None and prices.cache_write_1h is not None and prices.cache_write_5m is not None
    upstream, answer = _unfollowed_turn(tmp_path, ttl, None)
    (bill,) = upstream.bills
    written = bill.cache_write_1h_tokens if ttl == "1h" else bill.cache_write_5m_tokens
    assert written > 30_000
    rate = prices.cache_write_1h if ttl == "1h" else prices.cache_write_5m
    billed = (written * rate + bill.input_tokens * prices.input + 100 * prices.output) / 1e6
    estimate = float(answer.headers["x-ctxbudget-estimated-cost-usd"])
    assert estimate < billed
    upstream, refused = _unfollowed_turn(tmp_path, ttl, round((estimate + billed) / 2, 6))
    assert refused.status_code == 400, refused.text
    assert "priced as written" in refused.json()["error"]["message"] and upstream.bills == []
    upstream, passed = _unfollowed_turn(tmp_path, ttl, round(billed * 1.02, 6))
    assert passed.status_code == 200 and len(upstream.bills) == 1


def _first_automatic_turn(tmp_path: Path, write_price: float) -> httpx.Response:
    """The gateway's answer to a first chat turn for a user catalog's model that caches
    automatically, $2 a million of input, ``write_price`` a million written (the upstream faked)."""
    catalog = tmp_path / "mine.toml"
    catalog.write_text(
        'schema_version = 1\n[[models]]\nid = "house-auto"\nprovider = "house"\ncontext_window = 200000\n'
        'tokenizer = "o200k_exact"\n'
        f"prices = {{ input = 2.0, output = 10.0, cache_write_5m = {write_price}, cache_read = 0.2 }}\n"
        'cache = { mode = "automatic", min_cacheable_tokens = 1024, max_breakpoints = 0 }\n'
    )

    def answer(request: httpx.Request) -> httpx.Response:
        message = {"role": "assistant", "content": "ok"}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        choices = [{"index": 0, "message": message, "finish_reason": "stop"}]
        return httpx.Response(
            200, json={"id": "c", "object": "chat.completion", "choices": choices, "usage": usage}
        )

    config = GatewayConfig(
        store_path=str(tmp_path / "w.db"), openai_upstream="http://up.invalid", catalog_paths=(str(catalog),)
    )
    app = create_app(config, httpx.MockTransport(answer))
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "When was notice given?"}]
    body = {"model": "house-auto", "max_tokens": 100, "messages": messages}

    async def run() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://g") as client:
            return await client.post("/v1/chat/completions", json=body, headers={"X-Ctxbudget-Session": "w"})

    try:
        return asyncio.run(run())
    finally:
        app.state.gateway.close()


def test_automatic_caching_prices_its_writes_at_the_models_write_price(tmp_path: Path) -> None:
    """A model that caches automatically and charges for the writes (OpenAI's gpt-6-sol: $2.50
    a million written against $2 of input) was estimated with every written token at the input
    price: the prediction said nothing was written."""
    first = _first_automatic_turn(tmp_path, 2.5)
    tokens = int(first.headers["x-ctxbudget-tokens-after"])
    written = int(first.headers["x-ctxbudget-cache-write-predicted"])
    assert tokens - 16 <= written <= tokens  # a first turn writes its whole prompt
    expected = (written * 2.5 + (tokens - written) * 2.0 + 100 * 10.0) / 1e6
    assert float(first.headers["x-ctxbudget-estimated-cost-usd"]) == pytest.approx(expected, abs=1e-5)


def test_automatic_caching_prices_its_writes_never_below_the_input_price(tmp_path: Path) -> None:
    """A catalog's write price below the input price is a storage charge alone (OpenRouter's
    Gemini 2.5 Flash: $0.0833 against $0.30 of input): the predicted writes priced at it put a
    first turn's estimate at a third of what it was before, and of what is billed."""
    first = _first_automatic_turn(tmp_path, 0.5)
    tokens = int(first.headers["x-ctxbudget-tokens-after"])
    assert int(first.headers["x-ctxbudget-cache-write-predicted"]) > 1024
    expected = (tokens * 2.0 + 100 * 10.0) / 1e6  # every token at least at the input price
    assert float(first.headers["x-ctxbudget-estimated-cost-usd"]) == pytest.approx(expected, abs=1e-5)


def test_reads_written_instead_are_priced_by_the_ttl_of_the_mark_that_read_them() -> None:
    """Every read was priced at the 5-minute write price, a one-hour mark's too (37% under)."""
    from ctxbudget.gateway.caching import reads_written

    cache = {
        "read_tokens": 100,
        "read_1h_tokens": 60,
        "write_tokens": 10,
        "write_1h_tokens": 0,
        "uncached_tokens": 5,
    }
    written = reads_written(cache)
    assert written["read_tokens"] == 0 and written["write_tokens"] == 110 and written["write_1h_tokens"] == 60
    assert written["uncached_tokens"] == 5 and reads_written({**cache, "read_tokens": 0}) == {
        **cache,
        "read_tokens": 0,
    }


def test_a_read_by_a_clients_one_hour_mark_is_predicted_as_such() -> None:
    from ctxbudget.gateway.caching import ConversationState, cache_turn

    catalog = load_catalog()
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]

    def turn(previous: ConversationState | None, question: str) -> Any:
        body = {
            "model": MODEL,
            "max_tokens": 100,
            "system": system,
            "messages": [{"role": "user", "content": question}],
        }
        counter = catalog.counter_for(MODEL)
        return cache_turn(
            body,
            model=MODEL,
            spec=catalog.get_model(MODEL),
            counter=counter,
            history_cut=None,
            previous=previous,
            marks=True,
        )

    first = turn(None, "Q1")
    state = ConversationState(
        None, tuple(first.state["alive"]), tuple(first.state["alive_1h"]), idle_seconds=1200.0
    )
    second = turn(state, "Q2")  # 20 minutes on: only the one-hour entry is held
    assert (
        second.predicted["read_tokens"] > 0
        and second.predicted["read_1h_tokens"] == second.predicted["read_tokens"]
    )
    gone = turn(ConversationState(None, state.alive, state.alive_1h, idle_seconds=4000.0), "Q2")
    assert gone.predicted["read_tokens"] == 0


def test_a_responses_items_role_is_part_of_its_prefix() -> None:
    from ctxbudget.conversation import _prefixes, conversation_blocks

    counter = load_catalog().counter_for("gpt-4o")

    def hashes(role: str) -> list[str]:
        body = {"model": "gpt-4o", "input": [{"role": role, "content": "ok"}]}
        return _prefixes("gpt-4o", [b for _, b in conversation_blocks(body)], counter)[0]

    assert hashes("user") != hashes("assistant")
