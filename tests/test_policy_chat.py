"""Assembling chat bodies with a tiered policy keeps provider messages as they were: tool calls with
their results (whole groups in the rolling tier), images, thinking blocks, every field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from ctxbudget import assemble
from ctxbudget.assembly._policy import load_policy, parse_policy
from ctxbudget.errors import BudgetExceeded, CostCeilingExceeded, CtxBudgetError, PinnedPrefixChanged
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


def _agent_body(tools: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "system": "You are an agent.",
        "messages": [
            {"role": "user", "content": "When was notice given?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "March 3."}],
            },
        ],
        "tools": tools,
        **fields,
    }


def _tool(description: str, **extra: Any) -> dict[str, Any]:
    return {"name": "search", "description": description, "input_schema": {"type": "object"}, **extra}


def test_tools_ahead_of_a_short_system_prompt_count_toward_the_cacheable_minimum() -> None:
    """Anthropic caches the tool definitions first: 30,000 tokens of them ahead of a one-line
    system prompt were never marked (the blocks alone were under the 1,024-token minimum), so
    every turn paid for them uncached, and the warning said the prefix was too short."""
    tools = [
        {**_tool("Looks up records of the deposition and exhibits. " * 40), "name": f"t{i}"}
        for i in range(60)
    ]
    first = assemble(_agent_body(tools), policy=POLICY, model="claude-sonnet-4-5")
    assert "cache_control" in str(first.request["system"])
    assert first.report.cache.write_tokens > 25_000 and first.report.cache.read_tokens == 0
    assert not any("minimum cacheable" in w for w in first.report.warnings)
    again = assemble(_agent_body(tools), policy=POLICY, model="claude-sonnet-4-5", previous=first.report)
    assert again.report.cache.read_tokens > 25_000 and again.report.cache.write_tokens == 0
    assert again.report.cost_usd is not None and first.report.cost_usd is not None
    assert again.report.cost_usd < first.report.cost_usd / 3
    # automatic caching (OpenAI) rounds the blocks' own prefix: the tools do not make it one
    openai_tools = [
        {
            "type": "function",
            "function": {"name": f"t{i}", "description": "Looks up records. " * 80, "parameters": {}},
        }
        for i in range(60)
    ]
    chat = {
        "model": "gpt-4.1",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why?"}],
    }
    automatic = assemble(
        {**chat, "tools": openai_tools}, policy=POLICY, model="gpt-4.1", output_format="openai"
    )
    assert automatic.report.breakpoints == () and automatic.report.cache.write_tokens == 0
    # without them the same short prompt is under the minimum: no mark, and the warning says so
    short = assemble(_agent_body([_tool("Search.")]), policy=POLICY, model="claude-sonnet-4-5")
    assert "cache_control" not in str(short.request.get("system"))
    assert any("minimum cacheable" in w for w in short.report.warnings)


def test_a_chat_body_keeps_its_tools_and_settings_which_are_counted_and_priced() -> None:
    plain = assemble(_agent_body([_tool("Search.")]), policy=POLICY, model="claude-sonnet-4-5")
    marked = [_tool("Search the record. " * 800, cache_control={"type": "ephemeral"})]
    body = _agent_body(marked, tool_choice={"type": "auto"}, temperature=0, max_tokens=99)
    result = assemble(body, policy=POLICY, model="claude-sonnet-4-5")
    sent = result.request
    assert sent["tool_choice"] == {"type": "auto"} and sent["temperature"] == 0
    assert sent["tools"] == [_tool("Search the record. " * 800)]  # the plan owns the cache marks
    assert sent["max_tokens"] == plain.request["max_tokens"]  # the reply size stays the policy's
    assert result.report.tokens >= plain.report.tokens + 3000  # the definitions are counted
    assert result.report.cost_usd is not None and plain.report.cost_usd is not None
    assert result.report.cost_usd > plain.report.cost_usd
    assert any("carried from the request" in w and "tools" in w for w in result.report.warnings)
    # and in the report's figures, which add up: the cache prediction, the cost breakdown, INV-CTX-02
    report = result.report
    assert (
        report.cache.uncached_tokens + report.cache.write_tokens + report.cache.read_tokens == report.tokens
    )
    assert report.cost is not None and report.cost["total_usd"] == report.cost_usd
    assert report.invariants["INV-CTX-02"].startswith(f"{report.tokens:,} <=")
    other = assemble(body, policy=POLICY, model="claude-sonnet-4-5", output_format="openai")
    assert "tools" not in other.request  # another format's tools are not carried


def test_tools_past_the_prompt_limit_or_the_ceiling_are_refused() -> None:
    huge = _agent_body([_tool("Search the record. " * 40_000)])
    with pytest.raises(BudgetExceeded, match="tool definitions"):
        assemble(huge, policy=POLICY, model="claude-sonnet-4-5")
    costly = _agent_body([_tool("Search the record. " * 2_000)])
    with pytest.raises(CostCeilingExceeded, match="tool definitions"):
        assemble(costly, policy=POLICY, model="claude-sonnet-4-5", cost_ceiling_usd=0.03)
    # far over the ceiling: the refusal's figure is the whole turn's, the tools in it, as the
    # same body is accepted at (it was the tiers' alone, below it; a review)
    playbook = {**costly, "system": "Playbook rule: cite the record. " * 1_000}
    accepted = assemble(playbook, policy=POLICY, model="claude-sonnet-4-5").report.cost_usd
    with pytest.raises(
        CostCeilingExceeded, match=r"the request's tool definitions and fields are [\d,]+ of them"
    ) as refused:
        assemble(playbook, policy=POLICY, model="claude-sonnet-4-5", cost_ceiling_usd=0.001)
    assert accepted is not None and round(refused.value.estimate_usd or 0, 6) == accepted


def test_a_claude_body_with_tools_is_held_to_the_limit_by_its_own_count() -> None:
    """Its tools and tool-use prompt were scaled and rounded up apart from the body: the report
    said 399 of a body its count makes 400, and INV-CTX-02 passed it at an envelope of 399."""
    from ctxbudget import count

    tools = [
        {"name": "lookup", "description": "d", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search"},
    ]
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": "hello",
        "messages": [{"role": "user", "content": "hello"}],
        "tools": tools,
    }
    tiers = (
        '[[tiers]]\nname = "pinned"\nceiling_tokens = 3000\neviction = "never"\ncached = true\n'
        'cache_ttl = "1h"\n[[tiers]]\nname = "roll"\nceiling_tokens = 1000\neviction = "rolling"\n'
    )

    def policy(envelope: int) -> Any:
        return parse_policy(
            f'name = "p"\nenvelope_tokens = {envelope}\nreserve_output_tokens = 0\n{tiers}', "p"
        )

    needed = count(body, model="claude-sonnet-4-5")["tokens"]
    with pytest.raises(BudgetExceeded, match=f"need {needed} tokens but only {needed - 1}"):
        assemble(body, policy=policy(needed - 1), model="claude-sonnet-4-5")
    for envelope in (needed, needed + 600):
        result = assemble(body, policy=policy(envelope), model="claude-sonnet-4-5")
        assert result.report.tokens == count(result.request, model="claude-sonnet-4-5")["tokens"] == needed
        assert result.report.invariants["INV-CTX-02"] == f"{needed} <= {envelope:,} tokens"


def test_a_thinking_budget_stays_below_the_policys_reply_size() -> None:
    body = _agent_body([], max_tokens=16_000, thinking={"type": "enabled", "budget_tokens": 8_000})
    sent = assemble(body, policy=POLICY, model="claude-sonnet-4-5").request
    assert sent["thinking"]["budget_tokens"] < sent["max_tokens"]
    assert sent["thinking"]["budget_tokens"] == 8_000 * sent["max_tokens"] // 16_000


def test_every_reply_a_chat_body_asks_for_is_priced() -> None:
    ask = [{"role": "system", "content": "Review contracts."}, {"role": "user", "content": "Q?"}]
    one = assemble(
        {"model": "gpt-4o", "messages": ask}, policy=POLICY, model="gpt-4o", output_format="openai"
    )
    three = assemble(
        {"model": "gpt-4o", "n": 3, "messages": ask}, policy=POLICY, model="gpt-4o", output_format="openai"
    )
    assert one.report.cost_usd is not None and three.report.cost_usd is not None
    assert three.request["n"] == 3 and three.report.cost_usd > one.report.cost_usd
    assert any("3 replies priced" in w for w in three.report.warnings)


def test_new_tool_definitions_are_a_new_cached_prefix() -> None:
    playbook = "Playbook rule: cite the record. " * 300  # a pinned prefix long enough to cache
    body = {**_agent_body([_tool("Search the record. " * 300)]), "system": playbook}
    first = assemble(body, policy=POLICY, model="claude-sonnet-4-5")
    same = assemble(body, policy=POLICY, model="claude-sonnet-4-5", previous=first.report)
    assert same.report.cache.read_tokens > 0  # the same tools: the prefix is read
    changed = {**_agent_body([_tool("Look the record up. " * 300)]), "system": playbook}
    # The provider caches tools ahead of the playbook: new ones write the whole prefix again,
    # which INV-CTX-01 refuses as it refuses a playbook edit (it passed them as byte-identical).
    with pytest.raises(PinnedPrefixChanged, match="line 1: 'tool definitions sha256:") as refused:
        assemble(changed, policy=POLICY, model="claude-sonnet-4-5", previous=first.report)
    assert refused.value.volatile is None  # no volatile value to blame: the definitions changed
    other = assemble(
        changed, policy=POLICY, model="claude-sonnet-4-5", previous=first.report, allow_prefix_change=True
    )
    assert other.report.cache.read_tokens == 0  # allowed: a miss, priced as a write
    assert other.report.pinned_prefix_sha256 == first.report.pinned_prefix_sha256  # the playbook held
    assert other.report.tools_sha256 != first.report.tools_sha256
    assert "the tool definitions changed (allowed)" in other.report.invariants["INV-CTX-01"]
    read_cost, write_cost = same.report.cost_usd, other.report.cost_usd
    assert read_cost is not None and write_cost is not None and read_cost < write_cost
    # the tool choice is no part of it: agents change it from turn to turn (a review)
    chosen = assemble(
        {**body, "tool_choice": {"type": "auto"}},
        policy=POLICY,
        model="claude-sonnet-4-5",
        previous=first.report,
    )
    assert chosen.report.tools_sha256 == first.report.tools_sha256
    # and misses the messages' cache only: the tools and the playbook are read (a review: it was
    # folded into every prefix hash, and priced as writing them all again)
    assert chosen.report.cache.read_tokens >= same.report.cache.read_tokens - 50
    assert chosen.report.cache.write_tokens < 100
    # tools taken away, or added to a session that had none: each a new cached prefix
    bare = {k: v for k, v in body.items() if k != "tools"}
    with pytest.raises(PinnedPrefixChanged, match="became 'no tool definitions'") as removed:
        assemble(bare, policy=POLICY, model="claude-sonnet-4-5", previous=first.report)
    assert removed.value.volatile is None
    without = assemble(bare, policy=POLICY, model="claude-sonnet-4-5")
    with pytest.raises(PinnedPrefixChanged, match="'no tool definitions' became 'tool definitions sha256:"):
        assemble(body, policy=POLICY, model="claude-sonnet-4-5", previous=without.report)


def test_a_report_from_before_tools_were_held_is_not_compared_for_them() -> None:
    """A session stored by a version whose reports had no tools_sha256: its next turn, the same
    body, is not refused for tools it cannot tell (a review)."""
    body = {**_agent_body([_tool("Search the record.")]), "system": "Playbook rule: cite the record. " * 300}
    before = assemble(body, policy=POLICY, model="claude-sonnet-4-5").report.to_dict()
    del before["tools_sha256"]
    again = assemble(body, policy=POLICY, model="claude-sonnet-4-5", previous=before).report
    assert again.invariants["INV-CTX-01"].endswith("byte-identical to the previous turn")


@pytest.mark.parametrize(
    "call",
    [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "custom", "custom": {"name": "sql", "input": "SELECT 1 " * 3000}}
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "s",
                    "name": "web_search",
                    "input": {"query": "notice " * 3000},
                }
            ],
        },
    ],
)
def test_every_kind_of_call_counts_toward_its_tier(call: dict[str, Any]) -> None:
    openai = "tool_calls" in call
    messages = [{"role": "user", "content": "Look it up."}, call, {"role": "user", "content": "And?"}]
    if openai:
        messages.insert(2, {"role": "tool", "tool_call_id": "c", "content": "ok"})
    body = {"model": "gpt-4o" if openai else "claude-sonnet-4-5", "messages": messages}
    report = assemble(
        body, policy=POLICY, model="claude-sonnet-4-5", output_format="openai" if openai else "anthropic"
    ).report
    volatile = report.tier("volatile")
    assert volatile.tokens <= volatile.ceiling_tokens  # the long call rolled off, not counted as nothing
    assert any(i.tokens_before > 3000 for i in volatile.items)


def test_the_rolling_history_gives_way_to_the_requests_tool_definitions() -> None:
    """Tools that take the assembled tiers over the prompt limit make the history give way first
    (INV-CTX-02), as any other excess does: the call was refused with droppable history left."""
    rules = "".join(
        f"Rule {i}: notice of a defect must be given in writing within ten days of discovery. "
        for i in range(600)
    )
    history: list[dict[str, Any]] = []
    for i in range(10):
        history.append(
            {"role": "user", "content": f"Question {i} about the delivery schedule? " + "detail " * 100}
        )
        history.append(
            {"role": "assistant", "content": f"Answer {i}: the witness confirmed receipt. " + "more " * 100}
        )
    tool = {"type": "object", "properties": {"q": {"type": "string"}}}
    tools = [
        {
            "name": f"tool_{k}",
            "description": "Searches the deposition transcript for a phrase. " * 20,
            "input_schema": tool,
        }
        for k in range(60)
    ]
    body = {
        "tools": tools,
        "system": rules,
        "messages": [*history, {"role": "user", "content": "Was notice given?"}],
    }
    result = assemble(body, policy=POLICY, model="claude-sonnet-4-5")
    assert result.report.tokens <= POLICY.prompt_tokens
    assert any(i.action == "rolled_off" for t in result.report.tiers for i in t.items)


def test_a_volatile_value_in_a_carried_tool_definition_is_refused() -> None:
    """The provider caches tool definitions ahead of the pinned tiers: a timestamp there moves
    the whole cached prefix every turn, as one in the system prompt would (INV-CTX-01)."""
    from ctxbudget import VolatileValueError

    stamped = _agent_body([_tool("Search the record. Index built 2026-09-16T10:32:11Z.")])
    with pytest.raises(VolatileValueError, match=r"tool definition 'search' contains a volatile timestamp"):
        assemble(stamped, policy=POLICY, model="claude-sonnet-4-5")
    assemble(stamped, policy=POLICY, model="claude-sonnet-4-5", output_format="openai")  # not carried there


def _tool_loop_body(task: str, steps: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for i in range(steps):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "search", "input": {"q": f"q{i}"}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "result " * 300}],
            }
        )
    messages.append({"role": "user", "content": "Also check the termination clause."})
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "system": "You are an agent.",
        "messages": messages,
    }


def test_an_agents_opening_task_is_kept_ahead_of_its_recent_steps() -> None:
    """The rolling tier kept a suffix of the conversation: forty tool steps rolled the task off,
    and the agent went on from "[The conversation so far continues below.]"."""
    body = _tool_loop_body("TASK: audit the contract for notice clauses.", 40)
    result = assemble(body, policy=POLICY, model="claude-sonnet-4-5")
    sent = result.request["messages"]
    assert sent[0] == body["messages"][0]  # the task, as it was
    assert "Also check the termination clause." in str(sent[-1]["content"])
    assert len(sent) < len(body["messages"])  # older steps rolled off between them
    check_anthropic_rules(result.request)
    reasons = [
        i["reason"] for t in result.report.to_dict()["tiers"] for i in t["items"] if i["id"] == "history-0"
    ]
    assert reasons and "opening message" in reasons[0]


def test_an_opening_message_over_the_rolling_window_rolls_off_as_before() -> None:
    body = _tool_loop_body("TASK: " + "read this first. " * 6000, 3)
    result = assemble(body, policy=POLICY, model="claude-sonnet-4-5")
    assert result.request["messages"][0] != body["messages"][0]


def test_an_opening_task_over_half_the_rolling_window_leaves_it_to_the_recent_steps() -> None:
    """A task of 2,600 tokens in a 3,000-token window rolled off every recent step, the latest
    tool result too: it is kept only when it takes at most half the window, as a fit keeps it."""
    body = _tool_loop_body("TASK: " + "read this first. " * 650, 6)
    result = assemble(body, policy=POLICY, model="claude-sonnet-4-5")
    sent = result.request["messages"]
    assert sent[0] != body["messages"][0] and len(sent) > 2


def test_a_current_user_message_with_nothing_to_send_is_an_empty_question() -> None:
    """Blank text and no other part: refused at its path in every output format (as Anthropic, its
    empty text was left out and the body ended with the previous assistant turn, which the model
    would continue); a message of an image or of tool results alone is sent."""
    history = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"}]
    for blank in ("", "   ", [{"type": "text", "text": " "}]):
        body = {"model": "gpt-4o", "messages": [*history, {"role": "user", "content": blank}]}
        for fmt in ("anthropic", "openai"):
            with pytest.raises(CtxBudgetError, match=r"\$\.messages\[2\]\.content: the question is empty"):
                assemble(body, policy="legal-review", model="claude-sonnet-4-5", output_format=fmt)
    image = {"type": "image_url", "image_url": {"url": "https://example.com/scan.png"}}
    pictured = {"model": "gpt-4o", "messages": [*history, {"role": "user", "content": [image]}]}
    sent = assemble(pictured, policy="legal-review", model="gpt-4o", output_format="openai").request
    assert sent["messages"][-1] == {"role": "user", "content": [image]}
    call = {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}
    answered = {"type": "tool_result", "tool_use_id": "t1", "content": "42"}
    loop = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "look it up"},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [answered]},
        ],
    }
    sent = assemble(loop, policy="legal-review", model="claude-sonnet-4-5", output_format="anthropic").request
    assert sent["messages"][-1]["content"][-1] == answered
    # a user message just before it is one turn with it (Anthropic joins them): its question
    asked = {"model": "gpt-4o", "messages": [*history, {"role": "user", "content": "What is X?"}]}
    asked["messages"].append({"role": "user", "content": ""})
    for fmt in ("anthropic", "openai"):
        sent = assemble(asked, policy="legal-review", model="claude-sonnet-4-5", output_format=fmt).request
        assert "What is X?" in str(sent["messages"][-2:])
    # an image sent only in its own format: another format would get no question at all
    png = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    shown = {"role": "user", "content": [{"type": "text", "text": " "}, {"type": "image", "source": png}]}
    claude = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [*history, shown]}
    kept = assemble(claude, policy="legal-review", model="claude-sonnet-4-5", output_format="anthropic")
    assert kept.request["messages"][-1]["content"][-1]["type"] == "image"
    with pytest.raises(CtxBudgetError, match=r"no text, and its other parts .* render it as anthropic"):
        assemble(claude, policy="legal-review", model="claude-sonnet-4-5", output_format="openai")


@pytest.mark.parametrize("steps", [3, 8, 20])
def test_a_tool_loops_cached_prefix_is_within_the_body_and_nothing_is_sent_below_zero(steps: int) -> None:
    """A breakpoint's prefix summed the tool steps' item texts (a call written as its JSON), more
    tokens than the body counts them: past the whole body, the prediction sent -19 tokens
    uncached at 8 steps, priced below zero."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find every page about notice."}]
    for k in range(steps):
        call = {"type": "tool_use", "id": f"toolu_{k}", "name": "read_page", "input": {"page": k}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": f"Page {k}: a delivery."}
        messages += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    messages += [{"role": "assistant", "content": "Read."}, {"role": "user", "content": "Which page first?"}]
    system = "You are a careful research agent. Use the tools to read the record. " * 150
    body = {"model": "claude-sonnet-4-5", "max_tokens": 2000, "system": system, "messages": messages}
    report = assemble(body, policy="legal-review", model="claude-sonnet-4-5").report.to_dict()
    cache, points = report["cache"], report["breakpoints"]
    assert all(p["prefix_tokens"] <= report["tokens"] for p in points)
    assert cache["uncached_tokens"] >= 0 and report["cost"]["uncached_input_usd"] >= 0
    assert cache["read_tokens"] + cache["write_tokens"] + cache["uncached_tokens"] == report["tokens"]


def _marks(value: Any) -> int:
    if isinstance(value, dict):
        return int("cache_control" in value) + sum(_marks(v) for v in value.values())
    return sum(_marks(v) for v in value) if isinstance(value, list) else 0


def _legal_chat(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A Claude body of ``messages`` under a system prompt long enough to be cached."""
    system = "You are a careful legal assistant. Cite the record precisely. " * 250
    return {"model": "claude-sonnet-4-5", "max_tokens": 4096, "system": system, "messages": messages}


def _thought(repeats: int) -> dict[str, Any]:
    return {"type": "thinking", "thinking": "Looking at the inspection pages. " * repeats, "signature": "s"}


def test_a_history_ending_in_thinking_alone_is_marked_where_a_mark_can_go() -> None:
    """A reply cut off while thinking is a message of a thinking block alone, which takes no mark:
    the breakpoint planned on it was priced and predicted (a write, then a read) but never sent."""
    body = _legal_chat(
        [
            {"role": "user", "content": "Summarize the deposition of the site manager. " * 150},
            {"role": "assistant", "content": [{"type": "text", "text": "Delivery dates were late. " * 150}]},
            {"role": "user", "content": "And the inspection?"},
            {"role": "assistant", "content": [_thought(40)]},
            {"role": "user", "content": "Which page shows notice?"},
        ]
    )
    first = assemble(body, policy="legal-review", model="claude-sonnet-4-5")
    second = assemble(body, policy="legal-review", model="claude-sonnet-4-5", previous=first.report)
    for result in (first, second):
        assert _marks(result.request) == len(result.report.breakpoints) == 2
    assert second.report.to_dict()["cache"]["read_tokens"] == second.report.breakpoints[-1].prefix_tokens


def test_the_cache_lookback_is_counted_in_content_blocks_of_kept_messages() -> None:
    """An agent's steps kept as they were hold several content blocks each (three tool calls, three
    results): the provider's lookup walks back 20 content blocks, and turn 2's history mark, 26
    blocks past turn 1's, cannot find it; it was predicted read (10 assembly blocks back)."""
    policy = parse_policy(
        'name = "agent"\nenvelope_tokens = 100000\nexpected_output_tokens = 500\n'
        '[[tiers]]\nname = "pinned"\nceiling_tokens = 20000\neviction = "never"\ncached = true\n'
        'cache_ttl = "1h"\n[[tiers]]\nname = "history"\nceiling_tokens = 60000\neviction = "rolling"\n'
        "cached = true\n",
        "agent.toml",
    )

    def step(k: int) -> list[dict[str, Any]]:
        ids = [f"toolu_{k}_{j}" for j in range(3)]
        calls = [
            {"type": "tool_use", "id": i, "name": "read_page", "input": {"page": n}}
            for n, i in enumerate(ids)
        ]
        results = [
            {"type": "tool_result", "tool_use_id": i, "content": f"Page {n}: a delivery. " * 30}
            for n, i in enumerate(ids)
        ]
        return [{"role": "assistant", "content": calls}, {"role": "user", "content": results}]

    opening = [{"role": "user", "content": "Find every page where notice is discussed. " * 20}]
    turn1 = [
        *opening,
        *step(0),
        {"role": "assistant", "content": "Read."},
        {"role": "user", "content": "Which?"},
    ]
    turn2 = [*turn1, *step(1), *step(2), *step(3), *step(4)]
    turn2 += [{"role": "assistant", "content": "Read."}, {"role": "user", "content": "So which page?"}]
    system = "You are a careful research agent. Use the tools to read the record. " * 150

    def body(messages: list[dict[str, Any]]) -> dict[str, Any]:
        return {"model": "claude-sonnet-4-5", "max_tokens": 2000, "system": system, "messages": messages}

    first = assemble(body(turn1), policy=policy, model="claude-sonnet-4-5")
    second = assemble(body(turn2), policy=policy, model="claude-sonnet-4-5", previous=first.report)
    pinned, history = second.report.breakpoints
    assert second.report.to_dict()["cache"]["read_tokens"] == pinned.prefix_tokens  # the pinned prefix only
    assert history.prefix_tokens > pinned.prefix_tokens


def _within_the_body(report: dict[str, Any]) -> None:
    cache = report["cache"]
    assert all(p["prefix_tokens"] <= report["tokens"] for p in report["breakpoints"])
    assert cache["uncached_tokens"] >= 0 and report["cost"]["uncached_input_usd"] >= 0


def test_a_history_turns_thinking_is_not_counted_in_its_block() -> None:
    """The body leaves out thinking before the latest user turn; a kept message rendered alone
    counted it (a review): a breakpoint past the body, and history rolled off for tokens not sent."""
    body = _legal_chat(
        [
            {"role": "user", "content": "Summarize the deposition of the site manager. " * 20},
            {
                "role": "assistant",
                "content": [_thought(400), {"type": "text", "text": "Delivery was late. " * 20}],
            },
            {"role": "user", "content": "Which page shows notice?"},
        ]
    )
    result = assemble(body, policy="legal-review", model="claude-sonnet-4-5")
    _within_the_body(result.report.to_dict())
    assert len(result.request["messages"]) == 3  # both history messages kept


def test_an_openai_tool_loops_cached_prefix_is_within_the_body() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful research agent. Use the tools. " * 150},
        {"role": "user", "content": "Find every page about notice."},
    ]
    for k in range(60):
        call = {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": "read_page", "arguments": f'{{"page": {k}}}'},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{k}", "content": f"Page {k}: a delivery."},
        ]
    messages += [{"role": "assistant", "content": "Read."}, {"role": "user", "content": "Which page first?"}]
    body = {"model": "gpt-4o", "messages": messages}
    _within_the_body(
        assemble(body, policy="legal-review", model="gpt-4o", output_format="openai").report.to_dict()
    )
