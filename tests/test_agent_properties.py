"""Properties of fits over agent-shaped OpenAI requests (tool groups of random sizes, requests
that end in tool results, questions in the middle), checked by independent counts."""

from __future__ import annotations

import itertools
import os
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import BudgetExceeded, count, fit
from ctxbudget.trim.messages import question_spans

WORD = "lorem ipsum dolor sit amet "
# The suite runs 120 examples of each; a fuzz run sets more: CTXBUDGET_FUZZ_EXAMPLES=1000.
EXAMPLES = int(os.environ.get("CTXBUDGET_FUZZ_EXAMPLES", "120"))


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
    """What no fit may cut: system prompts, the question's ask and the newest tool group, texts
    emptied but for the system and the ask."""
    messages = body["messages"]
    system = [m for m in messages if m["role"] == "system"]
    question = max(i for i, m in enumerate(messages) if m["role"] == "user")
    tail = messages[question + 1 :]
    newest = tail[max((i for i, m in enumerate(tail) if m.get("tool_calls")), default=0) :] if tail else []
    if not tail and question > len(system):
        newest = [messages[question - 1]] if messages[question - 1].get("role") != "tool" else []
    emptied = [{**m, "content": "" if m["content"] is not None else None} for m in newest]
    return {"model": "gpt-4o", "messages": [*system, _ask(messages[question]), *emptied]}


def _ask(message: dict[str, Any]) -> dict[str, Any]:
    """The message with only its question (what a fit keeps whole, or refuses)."""
    text = message["content"]
    return {**message, "content": "".join(text[a:b] for a, b in question_spans(text))}


def _groups_whole(messages: list[dict[str, Any]]) -> bool:
    called = {c["id"] for m in messages for c in m.get("tool_calls") or []}
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    return called == answered


@settings(max_examples=EXAMPLES, deadline=None)
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
    question = next(m["content"] for m in body["messages"] if str(m["content"]).startswith("QUESTION"))
    # the question is kept: whole, or cut to its passages and its end (where the ask is)
    assert any(
        m["role"] == "user" and str(m["content"]).rstrip().endswith(question.rstrip()[-40:]) for m in sent
    )
    assert [m for m in sent if m["role"] == "system"] == [
        m for m in body["messages"] if m["role"] == "system"
    ]


# ---- Anthropic: the Messages API's rules, checked on every output -------------------------------
def check_anthropic_rules(body: dict[str, Any]) -> None:
    """Starts with a user message; roles alternate; every tool_use is answered by a tool_result in
    the next message and every tool_result answers the tool_use just before it."""
    messages = body["messages"]
    assert messages and messages[0]["role"] == "user", "must start with a user message"
    for before, after in itertools.pairwise(messages):
        assert before["role"] != after["role"], "roles must alternate"
    for i, message in enumerate(messages):
        blocks = message["content"] if isinstance(message["content"], list) else []
        uses = {b["id"] for b in blocks if b.get("type") == "tool_use"}
        if uses:
            following = messages[i + 1]["content"] if i + 1 < len(messages) else []
            answered = {
                b["tool_use_id"] for b in following if isinstance(b, dict) and b.get("type") == "tool_result"
            }
            assert uses <= answered or i == len(messages) - 1, "tool_use without its tool_result"
        results = {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}
        if results:
            previous = messages[i - 1]["content"] if i else []
            asked = {b["id"] for b in previous if isinstance(b, dict) and b.get("type") == "tool_use"}
            assert results <= asked, "tool_result without its tool_use just before"
            kinds = [b.get("type") for b in blocks]
            assert kinds[: len(results)] == ["tool_result"] * len(results), "tool results come first"
        for block in blocks:
            inner = block.get("content") if block.get("type") == "tool_result" else None
            for text_block in [block, *(inner if isinstance(inner, list) else [])]:
                if text_block.get("type") == "text":
                    assert text_block["text"], "the API refuses an empty text block"


def _emptied(block: dict[str, Any]) -> dict[str, Any]:
    if block.get("type") == "text":
        return {**block, "text": ""}
    if block.get("type") == "tool_result" and "content" in block:
        inner = block["content"]
        return {**block, "content": "" if isinstance(inner, str) else [_emptied(b) for b in inner]}
    return block


def _anthropic_floor(body: dict[str, Any]) -> tuple[int, int]:
    """Tokens no fit can cut (the system prompt, the question's ask: a fit keeps it whole or
    refuses, and the newest unit with its texts emptied), and how many texts those messages have."""
    messages = body["messages"]
    question = max(i for i, m in enumerate(messages) if isinstance(m["content"], str))
    tail = messages[question + 1 :]
    thinking = any(b.get("type") == "thinking" for m in tail for b in m["content"])
    newest = tail if thinking else tail[-2:]
    kept = [_ask(messages[question])] + [
        {**m, "content": [_emptied(b) for b in m["content"]]} for m in newest
    ]
    minimal = {**body, "messages": kept}
    texts = sum(1 for m in newest for b in m["content"] if b.get("type") in ("text", "tool_result"))
    return count(minimal, model="claude-sonnet-4-5")["tokens"], texts + 1


def _thinking(n: int) -> dict[str, Any]:
    return {"type": "thinking", "thinking": f"step {n}: " + WORD * 80, "signature": f"sig-{n}-" + "A" * 40}


@st.composite
def anthropic_requests(draw: st.DrawFn) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    n = 0

    def tool_round(thinking: bool) -> None:
        """An assistant turn with one to three parallel tool calls, and a user turn with their
        results (strings or text sub-blocks, of random sizes)."""
        nonlocal n
        n += 1
        ids = [f"t{n}-{k}" for k in range(draw(st.integers(1, 3)))]
        content: list[dict[str, Any]] = [_thinking(n)] if thinking else []
        content += [{"type": "tool_use", "id": i, "name": "lookup", "input": {"q": n}} for i in ids]
        messages.append({"role": "assistant", "content": content})
        results = []
        for i in ids:
            text = WORD * draw(st.integers(0, 1200))
            shape = draw(st.sampled_from(["string", "blocks", "none"]))
            if shape == "none":  # an error result with no content at all
                results.append({"type": "tool_result", "tool_use_id": i, "is_error": True})
                continue
            # the API refuses an empty text block, so a generated one has a word at least
            inner: Any = text if shape == "string" else [{"type": "text", "text": text or WORD}]
            results.append({"type": "tool_result", "tool_use_id": i, "content": inner})
        messages.append({"role": "user", "content": results})

    thinking = draw(st.booleans())
    for _ in range(draw(st.integers(0, 5))):
        messages.append({"role": "user", "content": WORD * draw(st.integers(1, 200))})
        for _ in range(draw(st.integers(0, 2))):
            tool_round(thinking)
        messages.append(
            {
                "role": "assistant",
                "content": [
                    *([_thinking(0)] if thinking else []),
                    {"type": "text", "text": WORD * draw(st.integers(1, 200))},
                ],
            }
        )
    messages.append({"role": "user", "content": "QUESTION " + WORD * draw(st.integers(0, 50))})
    for _ in range(draw(st.integers(0, 4))):
        tool_round(thinking)
    return {"model": "claude-sonnet-4-5", "system": "Be careful. " * 20, "messages": messages}


@settings(max_examples=EXAMPLES, deadline=None)
@given(anthropic_requests(), st.integers(2_000, 40_000))
def test_anthropic_agent_fits_keep_the_api_rules(body: dict[str, Any], window: int) -> None:
    floor, pieces = _anthropic_floor(body)
    try:
        result = fit(body, model="claude-sonnet-4-5", max_context_tokens=window, reserve_output_tokens=0)
    except BudgetExceeded as exc:
        # every emptied text may carry a cut marker: a few tokens each
        assert floor + 64 + 6 * pieces > window, f"refused ({exc}) though the untrimmable parts need {floor}"
        return
    sent = result.request
    check_anthropic_rules(sent)
    assert count(sent, model="claude-sonnet-4-5")["tokens"] <= window
    question = max(
        i
        for i, m in enumerate(body["messages"])
        if isinstance(m["content"], str) and m["content"].startswith("QUESTION")
    )
    asked = body["messages"][question]["content"]
    assert any(
        b.get("text", "").rstrip().endswith(asked.rstrip()[-40:])
        for m in sent["messages"]
        if m["role"] == "user"
        for b in (m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}])
    ), "the question is kept"
    loop = body["messages"][question + 1 :]
    thinking_now = [b for m in loop for b in m["content"] if b.get("type") == "thinking"]
    thinking_sent = [
        b
        for m in sent["messages"]
        for b in m["content"]
        if isinstance(m["content"], list) and b.get("type") == "thinking"
    ]
    assert all(b in thinking_sent for b in thinking_now), (
        "the current loop's thinking blocks go back unchanged"
    )


def test_a_question_at_the_edge_of_the_room_is_kept_or_refused_never_cut_to_a_marker() -> None:
    # found by the fuzzer: with the room one token above what must stay, the verification took
    # its excess from the question and sent "[…]" in its place
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": WORD * 30},
        {"role": "assistant", "content": [_thinking(0), {"type": "text", "text": WORD * 20}]},
        {"role": "user", "content": "QUESTION "},
    ]
    for n, calls in enumerate((3, 1, 3, 1), 1):
        ids = [f"t{n}-{k}" for k in range(calls)]
        uses = [{"type": "tool_use", "id": i, "name": "lookup", "input": {"q": n}} for i in ids]
        messages.append({"role": "assistant", "content": [_thinking(n), *uses]})
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": i, "content": ""} for i in ids],
            }
        )
    body = {"model": "claude-sonnet-4-5", "system": "Be careful. " * 20, "messages": messages}
    floor, _ = _anthropic_floor(body)
    for window in range(floor - 3, floor + 40):
        try:
            sent = fit(
                body, model="claude-sonnet-4-5", max_context_tokens=window, reserve_output_tokens=0
            ).request
        except BudgetExceeded:
            continue
        asked = [
            block.get("text") if isinstance(block, dict) else None
            for m in sent["messages"]
            if m["role"] == "user"
            for block in (m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}])
        ]
        assert "QUESTION " in asked, window  # whole (a placeholder before it joins its turn)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.text(alphabet="ab?\n .Q:", max_size=80), min_size=1, max_size=6))
def test_question_spans_remembered_answer_is_the_read_one(texts: list[str]) -> None:
    """The remembered answer (the same message asked again) is what reading it gives, and a
    caller's change to a returned list does not reach the next caller."""
    from ctxbudget.trim.messages import _question_spans

    for text in [*texts, *texts[::-1], texts[0]]:
        first = question_spans(text)
        assert first == _question_spans(text)
        first.append((-1, -1))
        assert question_spans(text) == _question_spans(text)


_BLOCKS = st.sampled_from(
    [
        {"type": "tool_result", "tool_use_id": "a", "content": "1"},
        {"type": "tool_result", "tool_use_id": "b", "content": "2"},
        {"type": "text", "text": "see"},
        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
        {"type": "thinking", "thinking": "t", "signature": "s"},
        {"type": "redacted_thinking", "data": "d"},
        {"type": "tool_use", "id": "a", "name": "f", "input": {}},
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["user", "assistant"]), st.lists(_BLOCKS, max_size=8), st.lists(_BLOCKS, max_size=8))
def test_turns_merged_put_their_leading_kind_first_each_group_in_its_order(
    role: str, first: list[dict[str, Any]], second: list[dict[str, Any]]
) -> None:
    """Two turns of one role merged as the API combines them: a user turn's tool results first, an
    assistant turn's thinking first (unless it opens with thinking: then as written), each group in
    its order, equal blocks given twice both kept (blocks are parted, not compared)."""
    from ctxbudget.formats.anthropic_rules import THINKING, merged_turns

    blocks = first + second
    kinds = ("tool_result",) if role == "user" else THINKING
    merged = merged_turns({"role": role, "content": first}, {"role": role, "content": second})["content"]
    if role == "assistant" and blocks and blocks[0]["type"] in THINKING:
        assert merged == blocks
    else:
        assert merged == [b for b in blocks if b["type"] in kinds] + [
            b for b in blocks if b["type"] not in kinds
        ]
