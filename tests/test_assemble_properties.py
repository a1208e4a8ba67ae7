"""Invariants of tiered assembly under random tier contents and ceilings."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import BudgetExceeded, CostCeilingExceeded, count
from ctxbudget.assembly._assemble import assemble
from ctxbudget.assembly._policy import parse_policy
from ctxbudget.assembly._prefix import compare_prefixes
from ctxbudget.catalog.catalog import bundled_catalog

words = st.sampled_from(
    ["notice", "warranty", "Mr.", "EX-04", "12:4", "the", "press", "failed", "日本", "sent", "."]
)
sentences = st.lists(words, min_size=1, max_size=25).map(" ".join)
texts = st.lists(sentences, min_size=1, max_size=5).map(". ".join)


def policy_text(ceilings: list[int], envelope: int) -> str:
    names = [
        ("pinned", "never", "true", "1h"),
        ("critical", "protected", "true", "5m"),
        ("contextual", "compact", "true", "5m"),
        ("volatile", "rolling", "false", "5m"),
    ]
    tiers = "".join(
        f'[[tiers]]\nname = "{n}"\nceiling_tokens = {c}\neviction = "{e}"\ncached = {cached}\ncache_ttl = "{ttl}"\n'
        for (n, e, cached, ttl), c in zip(names, ceilings, strict=True)
    )
    return f'name = "p"\nenvelope_tokens = {envelope}\nreserve_output_tokens = 10\n{tiers}'


@st.composite
def cases(draw: Any) -> tuple[dict[str, Any], str]:
    items: list[dict[str, Any]] = [{"id": "pin", "tier": "pinned", "kind": "playbook", "text": draw(texts)}]
    for n in range(draw(st.integers(0, 3))):
        items.append({"id": f"ev{n}", "tier": "critical", "kind": "evidence", "text": draw(texts)})
    for n in range(draw(st.integers(0, 3))):
        items.append({"id": f"bg{n}", "tier": "contextual", "kind": "document", "text": draw(texts)})
    for n in range(draw(st.integers(0, 4))):
        items.append(
            {
                "id": f"h{n}",
                "tier": "volatile",
                "kind": "history",
                "role": draw(st.sampled_from(["user", "assistant"])),
                "text": draw(texts),
            }
        )
    items.append({"id": "q", "kind": "question", "text": draw(sentences)})
    ceilings = [draw(st.integers(20, 400)) for _ in range(4)]
    return {"items": items}, policy_text(ceilings, draw(st.integers(100, 1500)))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.sampled_from(["gpt-4o", "claude-sonnet-4-5"]))
def test_envelope_evidence_and_breakpoints(case: tuple[dict[str, Any], str], model: str) -> None:
    body, text = case
    policy = parse_policy(text, "p")
    try:
        result = assemble(body, policy=policy, model=model)
    except (BudgetExceeded, CostCeilingExceeded):
        return  # fail closed is allowed; silently cutting is not
    report = result.report.to_dict()
    assert count(result.request, model=model)["tokens"] <= policy.prompt_tokens
    rendered = json.dumps(result.request, ensure_ascii=False)
    kept = {
        i["id"]
        for t in report["tiers"]
        if t["eviction"] == "protected"
        for i in t["items"]
        if i["action"] == "kept"
    }
    for item in body["items"]:
        if item["id"] in kept or item.get("tier") == "pinned":
            assert json.dumps(item["text"], ensure_ascii=False)[1:-1] in rendered
    assert len(report["breakpoints"]) <= 4
    minimum = bundled_catalog().get_model(model).cache.min_cacheable_tokens
    for point in report["breakpoints"]:
        assert point["prefix_tokens"] >= minimum
    for tier in report["tiers"]:
        assert tier["tokens"] <= tier["ceiling_tokens"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), sentences, sentences)
def test_pinned_bytes_never_change_between_two_assemblies_of_a_session(
    case: tuple[dict[str, Any], str], question: str, message: str
) -> None:
    body, text = case
    policy = parse_policy(text, "p")
    try:
        first = assemble(body, policy=policy, model="gpt-4o")
        later = json.loads(json.dumps(body))
        later["items"][-1]["text"] = question
        later["items"].insert(-1, {"id": "new", "tier": "volatile", "kind": "history", "text": message})
        second = assemble(later, policy=policy, model="gpt-4o")
    except (BudgetExceeded, CostCeilingExceeded):
        return
    assert first.request["system"][0]["text"] == second.request["system"][0]["text"]
    assert first.report.to_dict()["pinned_prefix_sha256"] == second.report.to_dict()["pinned_prefix_sha256"]
    compare_prefixes({"system": first.request["system"][:1]}, {"system": second.request["system"][:1]})


_CHAT_POLICY = """name = "p"
envelope_tokens = {envelope}
reserve_output_tokens = 0
expected_output_tokens = 200
[[tiers]]
name = "pinned"
ceiling_tokens = 3000
eviction = "never"
cached = true
cache_ttl = "1h"
[[tiers]]
name = "roll"
ceiling_tokens = 1000
eviction = "rolling"
"""


@st.composite
def tools(draw: Any, shape: str) -> list[dict[str, Any]]:
    """Tool definitions in ``shape`` (anthropic or openai): functions with drawn descriptions and
    properties, and in Anthropic's shape its server tool too."""
    out: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 3))):
        properties = {
            f"p{k}": {"type": "string", "description": draw(sentences)}
            for k in range(draw(st.integers(0, 2)))
        }
        schema = {"type": "object", "properties": properties}
        description = draw(sentences)
        if shape == "anthropic":
            out.append({"name": f"tool_{n}", "description": description, "input_schema": schema})
        else:
            out.append(
                {
                    "type": "function",
                    "function": {"name": f"tool_{n}", "description": description, "parameters": schema},
                }
            )
    if shape == "anthropic" and draw(st.booleans()):
        out.append({"type": "web_search_20250305", "name": "web_search", "max_uses": draw(st.integers(1, 5))})
    return out


@st.composite
def chat_cases(draw: Any) -> tuple[dict[str, Any], str, str]:
    """A chat body with tools (its model, its format) and a policy whose envelope is drawn near
    what it needs, so that some land on the prompt limit."""
    model, shape = draw(
        st.sampled_from(
            [("claude-sonnet-4-5", "anthropic"), ("claude-sonnet-4-5", "openai"), ("gpt-4o", "openai")]
        )
    )
    system = draw(texts)
    history = [
        {"role": role, "content": draw(texts)}
        for _, role in zip(range(draw(st.integers(0, 2)) * 2), itertools.cycle(("user", "assistant")))
    ]
    messages = [*history, {"role": "user", "content": draw(sentences)}]
    body: dict[str, Any] = {"model": model, "max_tokens": 1024, "tools": draw(tools(shape))}
    if shape == "anthropic":
        body |= {"system": system, "messages": messages}
        choices: list[Any] = [None, {"type": "auto"}, {"type": "any"}]
    else:
        body["messages"] = [{"role": "system", "content": system}, *messages]
        choices = [None, "auto", "required"]
    choice = draw(st.sampled_from(choices))
    if choice is not None:
        body["tool_choice"] = choice
    needed = count(body, model=model)["tokens"]
    envelope = needed + draw(st.integers(-3, 40))
    return body, shape, _CHAT_POLICY.format(envelope=envelope)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chat_cases())
def test_an_assembly_with_tools_reports_what_a_count_of_its_body_says(
    case: tuple[dict[str, Any], str, str],
) -> None:
    """A Claude body with tools reported a figure one off its own count either way (the tools'
    tokens and the tool-use prompt were scaled and rounded apart from the body's), and passed
    INV-CTX-02 one token over the limit."""
    body, shape, text = case
    policy = parse_policy(text, "p")
    try:
        result = assemble(body, policy=policy, model=body["model"], output_format=shape)
    except BudgetExceeded:
        return
    counted = count(result.request, model=body["model"])
    assert counted["format"] == shape
    assert result.report.tokens == counted["tokens"] <= policy.prompt_tokens
    assert (
        result.report.to_dict()["invariants"]["INV-CTX-02"]
        == f"{counted['tokens']:,} <= {policy.prompt_tokens:,} tokens"
    )
