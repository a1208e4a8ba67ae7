"""Assembling chat bodies with a tiered policy keeps provider messages as they were: tool calls with
their results (whole groups in the rolling tier), images, thinking blocks, every field."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings

from ctxbudget import assemble
from ctxbudget.assembly._policy import load_policy
from ctxbudget.errors import CtxBudgetError
from ctxbudget.items import GAP

from .test_agent_properties import _groups_whole, agent_requests, anthropic_requests, check_anthropic_rules

POLICY = load_policy("legal-review")


def _as_sent(original: dict[str, Any], sent: dict[str, Any]) -> bool:
    """``sent`` is ``original``, or (a tool result cut to the current turn's ceiling) the same
    message whose text is verbatim passages of the original's."""
    if sent == original:
        return True
    if original.get("role") != "tool" or {k: v for k, v in sent.items() if k != "content"} != {
        k: v for k, v in original.items() if k != "content"
    }:
        return False
    return all(
        part.strip() in original["content"] for part in sent["content"].split(GAP.strip()) if part.strip()
    )


def _loop_after_question(messages: list[dict[str, Any]], sent: list[dict[str, Any]]) -> None:
    """The messages after the question are sent after it, in order, as they were (a tool result
    over Block 4's ceiling keeps verbatim passages of its text)."""
    question = max(i for i, m in enumerate(messages) if m["role"] == "user" and isinstance(m["content"], str))
    tail = messages[question + 1 :]
    if tail:
        assert all(_as_sent(o, m) for o, m in zip(tail, sent[-len(tail) :], strict=True))


@settings(max_examples=40, deadline=None)
@given(agent_requests())
def test_openai_tool_groups_survive_assembly_whole(body: dict[str, Any]) -> None:
    try:
        result = assemble(body, policy=POLICY, model="gpt-4o", format="openai", input_format="openai")
    except CtxBudgetError:
        return
    sent = result.request["messages"]
    assert _groups_whole(sent)
    kept = [m for m in sent if m.get("tool_calls") or m["role"] == "tool"]
    assert all(any(_as_sent(o, m) for o in body["messages"]) for m in kept)  # sent as they were
    _loop_after_question(body["messages"], sent)


@settings(max_examples=40, deadline=None)
@given(anthropic_requests())
def test_anthropic_assembly_keeps_the_api_rules_and_the_current_loop(body: dict[str, Any]) -> None:
    try:
        result = assemble(
            body, policy=POLICY, model="claude-sonnet-4-5", format="anthropic", input_format="anthropic"
        )
    except CtxBudgetError:
        return
    check_anthropic_rules(result.request)
    question = max(i for i, m in enumerate(body["messages"]) if isinstance(m["content"], str))
    loop = body["messages"][question + 1 :]
    thinking = [b for m in loop for b in m["content"] if b.get("type") == "thinking"]
    sent_blocks = [
        b for m in result.request["messages"] if isinstance(m["content"], list) for b in m["content"]
    ]
    assert all(b in sent_blocks for b in thinking)


def test_a_chat_body_keeps_its_images_and_fields_when_assembled() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}}
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You review contracts."},
            {"role": "user", "content": "Here is the scan.", "name": "paralegal"},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": [{"type": "text", "text": "What does it say?"}, image]},
        ],
    }
    sent = assemble(body, policy=POLICY, model="gpt-4o", format="openai", input_format="openai").request
    assert sent["messages"][-1] == body["messages"][-1]
    assert {"role": "user", "content": "Here is the scan.", "name": "paralegal"} in sent["messages"]
