"""Invariants swept over budgets and random inputs."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import count, fit

MODEL = "gpt-4o"
words = st.sampled_from(
    ["Mr.", "witness", "said", "No.", "12", "U.S.C.", "日本", "🙂", "<|endoftext|>", "the", "."]
)
texts = st.lists(words, min_size=0, max_size=60).map(" ".join)
sentences = st.lists(texts, min_size=1, max_size=6).map(lambda s: ". ".join(s))


@st.composite
def question_requests(draw: Any) -> dict[str, Any]:
    return {
        "role": draw(sentences),
        "questions": [{"text": draw(sentences), "embedding": [0.1]} for _ in range(draw(st.integers(1, 2)))],
        "documents": [
            {
                "page_content": draw(sentences),
                **({"score": draw(st.floats(0, 1))} if draw(st.booleans()) else {}),
            }
            for _ in range(draw(st.integers(0, 6)))
        ],
        "history": [
            {"role": draw(st.sampled_from(["user", "assistant"])), "content": draw(sentences)}
            for _ in range(draw(st.integers(0, 8)))
        ],
    }


@st.composite
def chat_requests(draw: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": draw(sentences)}]
    for i in range(draw(st.integers(0, 5))):
        messages.append({"role": "user", "content": draw(sentences)})
        if draw(st.booleans()):
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": draw(sentences)})
        messages.append({"role": "assistant", "content": draw(sentences)})
    messages.append({"role": "user", "content": draw(sentences)})
    return {"model": MODEL, "messages": messages}


COMMON = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@COMMON
@given(question_requests(), st.integers(60, 900))
def test_question_fit_invariants(body: dict[str, Any], window: int) -> None:
    snapshot = copy.deepcopy(body)
    try:
        result = fit(body, model=MODEL, max_context_tokens=window, reserve_output_tokens=0)
    except Exception as exc:  # only the documented fail-closed outcome is allowed
        assert type(exc).__name__ == "BudgetExceeded"
        return
    assert body == snapshot
    tokens = count(result.request, model=MODEL)["tokens"]
    assert tokens <= window
    assert result.report.tokens_after == tokens
    if count(body, model=MODEL)["tokens"] <= window:
        assert json.dumps(result.request) == json.dumps(body)
    assert "\ufffd" not in json.dumps(result.request, ensure_ascii=False).replace("\ufffd", "") or (
        "\ufffd" in json.dumps(body, ensure_ascii=False)
    )
    again = fit(body, model=MODEL, max_context_tokens=window, reserve_output_tokens=0)
    assert json.dumps(again.request) == json.dumps(result.request)
    assert again.report == result.report


@COMMON
@given(chat_requests(), st.integers(40, 600))
def test_chat_fit_invariants(body: dict[str, Any], window: int) -> None:
    snapshot = copy.deepcopy(body)
    try:
        result = fit(body, model=MODEL, max_context_tokens=window, reserve_output_tokens=0)
    except Exception as exc:
        assert type(exc).__name__ == "BudgetExceeded"
        return
    assert body == snapshot
    out = result.request["messages"]
    assert count(result.request, model=MODEL)["tokens"] <= window
    calls = {c["id"] for m in out for c in m.get("tool_calls") or []}
    answered = {m["tool_call_id"] for m in out if m["role"] == "tool"}
    assert calls == answered
    for text in (m.get("content") or "" for m in out):
        assert "\ufffd" not in text
