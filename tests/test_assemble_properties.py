"""Invariants of tiered assembly under random tier contents and ceilings."""

from __future__ import annotations

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
