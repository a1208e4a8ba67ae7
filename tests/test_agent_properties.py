"""Properties of fits over agent-shaped OpenAI requests (tool groups of random sizes, requests
that end in tool results, questions in the middle), checked by independent counts."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import BudgetExceeded, count, fit

WORD = "lorem ipsum dolor sit amet "


def _group(draw: st.DrawFn, tag: str) -> list[dict[str, Any]]:
    calls = draw(st.integers(1, 3))
    ids = [f"{tag}-{n}" for n in range(calls)]
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": '{"q": 1}'}} for i in ids
        ],
    }
    results = [{"role": "tool", "tool_call_id": i, "content": WORD * draw(st.integers(0, 1500))} for i in ids]
    return [assistant, *results]


@st.composite
def agent_requests(draw: st.DrawFn) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": WORD * draw(st.integers(1, 60))})
    for turn in range(draw(st.integers(0, 6))):
        messages.append({"role": "user", "content": WORD * draw(st.integers(1, 300))})
        if draw(st.booleans()):
            messages += _group(draw, f"old{turn}")
        messages.append({"role": "assistant", "content": WORD * draw(st.integers(1, 300))})
    messages.append({"role": "user", "content": "QUESTION " + WORD * draw(st.integers(0, 200))})
    for loop in range(draw(st.integers(0, 3))):
        messages += _group(draw, f"now{loop}")
    return {"model": "gpt-4o", "messages": messages}


def _minimal(body: dict[str, Any]) -> dict[str, Any]:
    """What no fit may cut: system prompts, the question and the newest tool group, texts emptied
    but for the system."""
    messages = body["messages"]
    system = [m for m in messages if m["role"] == "system"]
    question = max(i for i, m in enumerate(messages) if m["role"] == "user")
    tail = messages[question + 1 :]
    newest = tail[max((i for i, m in enumerate(tail) if m.get("tool_calls")), default=0) :] if tail else []
    if not tail and question > len(system):
        newest = [messages[question - 1]] if messages[question - 1].get("role") != "tool" else []
    emptied = [
        {**m, "content": "" if m["content"] is not None else None} for m in [messages[question], *newest]
    ]
    return {"model": "gpt-4o", "messages": system + emptied}


def _groups_whole(messages: list[dict[str, Any]]) -> bool:
    called = {c["id"] for m in messages for c in m.get("tool_calls") or []}
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    return called == answered


@settings(max_examples=120, deadline=None)
@given(agent_requests(), st.integers(500, 50_000))
def test_agent_fits(body: dict[str, Any], window: int) -> None:
    floor = count(_minimal(body), model="gpt-4o")["tokens"]
    try:
        result = fit(body, model="gpt-4o", max_context_tokens=window, reserve_output_tokens=0)
    except BudgetExceeded:
        assert floor + 64 > window, f"refused though the untrimmable parts need {floor} of {window}"
        return
    sent = result.request["messages"]
    assert count(result.request, model="gpt-4o")["tokens"] <= window
    assert _groups_whole(sent)
    assert any(m["role"] == "user" and str(m["content"]).startswith("QUESTION") for m in sent)
    assert [m for m in sent if m["role"] == "system"] == [
        m for m in body["messages"] if m["role"] == "system"
    ]
