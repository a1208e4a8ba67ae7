"""ctxbudget.integrations.langchain: LangChain messages fitted with the library's own counting and
trimming rules, returned as the same objects, whole, in order."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    convert_to_openai_messages,
)

import ctxbudget
from ctxbudget.integrations.langchain import fit_messages, trim_messages

SRC = Path(__file__).resolve().parent.parent / "src"
LONG = "The quarterly report covers revenue, hiring and the office move. " * 30


def _tool_turn(call_id: str, result: str) -> list[BaseMessage]:
    call = {"name": "search", "args": {"q": call_id}, "id": call_id}
    return [AIMessage("", tool_calls=[call]), ToolMessage(result, tool_call_id=call_id)]


def _conversation() -> list[BaseMessage]:
    return [
        SystemMessage("You are a careful analyst."),
        HumanMessage("What changed this quarter? " + LONG),
        AIMessage("Revenue grew. " + LONG),
        HumanMessage("Look up the hiring numbers."),
        AIMessage(
            "",
            tool_calls=[
                {"name": "search", "args": {"q": "hiring"}, "id": "c1"},
                {"name": "search", "args": {"q": "office"}, "id": "c2"},
            ],
        ),
        ToolMessage("Hiring: 42 engineers. " + LONG, tool_call_id="c1"),
        ToolMessage("Office: moved in May.", tool_call_id="c2"),
        AIMessage("They hired 42 engineers. " + LONG),
        HumanMessage("And the office?"),
    ]


def _tokens(messages: Sequence[BaseMessage], model: str) -> int:
    """The library's count of the messages as an OpenAI chat body."""
    body = {"model": model, "messages": convert_to_openai_messages(list(messages))}
    return int(ctxbudget.count(body, model=model, input_format="openai")["tokens"])


def _is_subsequence(kept: Sequence[BaseMessage], given: Sequence[BaseMessage]) -> bool:
    positions = [next(i for i, m in enumerate(given) if m is k) for k in kept]
    return positions == sorted(set(positions))


def _tool_groups_whole(kept: Sequence[BaseMessage], given: Sequence[BaseMessage]) -> bool:
    """Every tool call kept has all its results kept, and every result kept has its call."""
    ids = {id(m) for m in kept}
    for call in (m for m in given if isinstance(m, AIMessage) and m.tool_calls):
        results = [
            m
            for m in given
            if isinstance(m, ToolMessage) and m.tool_call_id in {c["id"] for c in call.tool_calls}
        ]
        if len({id(call) in ids, *(id(r) in ids for r in results)}) > 1:
            return False
    return True


def test_messages_that_fit_are_returned_as_given() -> None:
    messages = _conversation()
    kept = trim_messages(messages, model="gpt-4o", max_tokens=100_000)
    assert kept == messages and all(a is b for a, b in zip(kept, messages, strict=True))


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-2024-08-06", "gpt-4", "claude-sonnet-4-5"])
@pytest.mark.parametrize("max_tokens", [1200, 900, 700])
def test_the_budget_is_respected_with_the_same_objects_in_order(model: str, max_tokens: int) -> None:
    messages = _conversation()
    fitted = fit_messages(messages, model=model, max_tokens=max_tokens)
    kept = fitted.messages
    assert _tokens(kept, model) <= max_tokens
    assert fitted.report.tokens_after == _tokens(kept, model)
    assert fitted.report.tokens_before == _tokens(messages, model) > max_tokens
    assert _is_subsequence(kept, messages) and _tool_groups_whole(kept, messages)
    assert [messages[i] for i in fitted.report.kept] == kept
    assert (
        set(fitted.report.dropped)
        == set(fitted.report.reasons)
        == set(range(len(messages))) - set(fitted.report.kept)
    )
    # The system prompt, the latest human message and the newest message are always kept, whole;
    # for Claude the newest message only with its human turn (its conversation opens on one)
    assert kept[0] is messages[0] and kept[-1] is messages[-1]
    if model.startswith("claude"):
        assert next(m for m in kept if m.type != "system").type == "human"
    else:
        assert kept[-2] is messages[-2]
    # a Claude model's count is an estimate; an OpenAI model's too, for the framing of its tool calls alone
    assert fitted.report.exact is False
    if model.startswith("gpt"):
        assert fitted.report.fit.estimated_parts and all(
            "tool call(s): names and arguments counted" in part for part in fitted.report.fit.estimated_parts
        )


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"])
def test_a_claude_conversation_opens_on_a_human_message(model: str) -> None:
    """Claude's API refuses a conversation whose first message is the assistant's: an AI message
    (or a tool-call unit) whose human turn the fit left out was kept first."""
    messages = [
        SystemMessage("Be brief."),
        HumanMessage("Tell me about the lease. " + LONG),
        AIMessage("The lease runs to 2027."),
        HumanMessage("And the deposit?"),
    ]
    fitted = fit_messages(messages, model=model, max_tokens=120)
    assert fitted.messages == [messages[0], messages[3]]
    assert "opens with a human message" in fitted.report.reasons[2]
    assert fitted.report.tokens_after == _tokens(fitted.messages, model) <= 120
    # OpenAI takes an assistant message first: kept there, as before
    assert fit_messages(messages, model="gpt-4o", max_tokens=120).messages == [messages[0], *messages[2:]]
    agent = [
        SystemMessage("Use the tools."),
        HumanMessage("Old question. " + LONG),
        AIMessage("", tool_calls=[{"name": "look", "args": {}, "id": "c1"}]),
        ToolMessage("found it", tool_call_id="c1"),
        HumanMessage("New question?"),
        AIMessage("", tool_calls=[{"name": "look", "args": {}, "id": "c2"}]),
        ToolMessage("found more", tool_call_id="c2"),
    ]
    kept = fit_messages(agent, model=model, max_tokens=200).messages
    assert kept == [agent[0], *agent[4:]]  # the older call and its result went with their question


def test_a_claude_conversation_opens_on_a_human_message_of_any_class() -> None:
    """A human message is told by its role, not its ``type``: a HumanMessageChunk's type is
    "HumanMessageChunk", a ChatMessage's "chat"; read by type, the latest human message was dropped
    and only the system message was left."""
    for human in (
        HumanMessageChunk(content="And the deposit?"),
        ChatMessage(role="user", content="And the deposit?"),
    ):
        messages = [SystemMessage("Be brief."), HumanMessage("Tell me. " + LONG), AIMessage("Done."), human]
        kept = fit_messages(messages, model="claude-sonnet-4-5", max_tokens=120).messages
        assert kept == [messages[0], messages[3]]
        whole = fit_messages(messages, model="claude-sonnet-4-5", max_tokens=100_000).messages
        assert whole == messages
    system = [SystemMessageChunk(content="Be brief."), ChatMessage(role="system", content="Cite.")]
    messages = [*system, AIMessageChunk(content="Hello."), HumanMessage("Hi")]
    assert fit_messages(messages, model="claude-sonnet-4-5", max_tokens=100_000).messages == [
        *system,
        messages[3],
    ]
    # no human message at all: nothing to open on, so nothing is dropped for it
    alone = [SystemMessage("Be brief."), AIMessage("Hello.")]
    assert fit_messages(alone, model="claude-sonnet-4-5", max_tokens=100_000).messages == alone


def test_a_tool_call_and_its_results_are_dropped_together() -> None:
    messages = _conversation()
    fitted = fit_messages(messages, model="gpt-4o", max_tokens=800)
    assert {4, 5, 6} <= set(fitted.report.dropped)
    assert "tool-call unit" in fitted.report.reasons[6]
    assert not any(isinstance(m, ToolMessage) for m in fitted.messages)


def test_the_newest_tool_turn_is_kept_whole() -> None:
    messages = [
        SystemMessage("Answer from the tools."),
        HumanMessage("Old question. " + LONG),
        AIMessage("Old answer. " + LONG),
        HumanMessage("What is the weather in Paris?"),
        *_tool_turn("w1", "Paris: 18 C, light rain."),
    ]
    kept = trim_messages(messages, model="gpt-4o", max_tokens=200)
    assert kept == [messages[0], messages[3], messages[4], messages[5]]


def test_a_system_prompt_too_large_alone_is_refused() -> None:
    messages = [SystemMessage(LONG * 3), HumanMessage("Hi")]
    with pytest.raises(ctxbudget.BudgetExceeded, match=r"messages\[0\]") as caught:
        trim_messages(messages, model="gpt-4o", max_tokens=500)
    assert caught.value.available_tokens == 500 and caught.value.required_tokens > 500
    assert str(caught.value).endswith(
        "shorten them, or give max_tokens= a larger value"
    )  # not "raise max_tokens="


def test_a_refusal_of_the_fit_names_the_messages_given_and_what_they_need_whole() -> None:
    """When the fit refused (the system prompt over the budget), its parts were its own
    ("query messages[1] (apart from its text)") and the need left out the question's text, which
    this integration never cuts: 1,092 where the two messages take 1,575."""
    question = "Please compare every figure in the report. " * 60 + "What changed?"
    messages = [SystemMessage(LONG * 3), HumanMessage(question)]
    with pytest.raises(ctxbudget.BudgetExceeded) as caught:
        trim_messages(messages, model="gpt-4o", max_tokens=500)
    body = {"messages": [{"role": "system", "content": LONG * 3}, {"role": "user", "content": question}]}
    assert caught.value.required_tokens == ctxbudget.count(body, model="gpt-4o")["tokens"]
    assert set(caught.value.parts) == {"messages[0] (system)", "messages[1] (user)", "framing"}
    assert sum(caught.value.parts.values()) == caught.value.required_tokens


def test_a_refusal_for_an_estimated_model_has_parts_that_add_up_to_its_need() -> None:
    """Under Claude's x1.3 estimate each message's count rounds up: the parts came to 91 for a
    need of 90."""
    messages = [SystemMessage("sys"), HumanMessage("hi " * 50), AIMessage("ok " * 50), HumanMessage("q?")]
    with pytest.raises(ctxbudget.BudgetExceeded) as caught:
        trim_messages(messages, model="claude-sonnet-4-5", max_tokens=60)
    assert sum(caught.value.parts.values()) == caught.value.required_tokens
    assert all(tokens > 0 for tokens in caught.value.parts.values())


def test_a_last_human_message_too_large_whole_is_refused_not_cut() -> None:
    messages = [SystemMessage("Be brief."), AIMessage("Hello."), HumanMessage(LONG * 2)]
    with pytest.raises(ctxbudget.BudgetExceeded) as caught:
        trim_messages(messages, model="gpt-4o", max_tokens=600)
    assert any("messages[2]" in part for part in caught.value.parts)


def test_the_last_human_message_is_kept_whole_even_when_the_fit_would_cut_it() -> None:
    """The fit cuts a long question to its share; here it is sent whole, and older messages make
    room for it (the oldest first)."""
    messages = [
        SystemMessage("Be brief."),
        *[HumanMessage(LONG) for _ in range(4)],
        AIMessage("Noted."),
        HumanMessage(LONG * 2 + "Why?"),
    ]
    fitted = fit_messages(messages, model="gpt-4o", max_tokens=1000)
    query = next(i for i in fitted.report.fit.items if i.path == "$.messages[6]")
    assert query.action == "truncated"  # what the fit alone would have sent
    assert fitted.messages == [messages[0], messages[5], messages[6]]
    assert fitted.report.reasons[1] == "dropped to keep the messages that are always kept whole"
    assert _tokens(fitted.messages, "gpt-4o") == fitted.report.tokens_after <= 1000


def test_a_long_question_makes_room_by_the_fewest_oldest_messages() -> None:
    # Found by bisection (one drop and a recount at a time was quadratic): as few of the oldest
    # units go as bring the request within the budget, so one more back would not fit.
    messages: list[BaseMessage] = [SystemMessage("Be brief.")]
    for n in range(300):
        messages += [HumanMessage(f"Question {n}?"), AIMessage(f"Answer {n}: notice was given. " * 3)]
    messages.append(HumanMessage("Why? " + "Consider the whole record carefully. " * 600))
    fitted = fit_messages(messages, model="gpt-4o", max_tokens=6000)
    assert fitted.report.tokens_after <= 6000 and fitted.messages[-1] is messages[-1]
    first_kept = fitted.messages[1]
    back = messages.index(first_kept) - 2  # the newest unit dropped: its question and answer
    assert fitted.report.reasons[back] == "dropped to keep the messages that are always kept whole"
    assert _tokens([messages[0], *messages[back:]], "gpt-4o") > 6000


def test_an_unknown_model_is_told_the_way_out_this_function_takes() -> None:
    # The fit took the id (max_tokens is its window), then a count refused it with advice
    # (max_context_tokens=, unknown_model="floor") that this function does not take.
    with pytest.raises(ctxbudget.UnknownModelError) as refused:
        fit_messages([HumanMessage("Hi")], model="gpt-4oo", max_tokens=100)
    assert "closest: gpt-4o" in str(refused.value) and "catalog=load_catalog(FILE)" in str(refused.value)
    assert "unknown_model" not in str(refused.value) and "max_context_tokens" not in str(refused.value)


def test_bad_input_is_a_misuse_error() -> None:
    with pytest.raises(ctxbudget.InvalidRequestError, match=r"messages\[1\]"):
        trim_messages([HumanMessage("hi"), {"role": "user", "content": "x"}], model="gpt-4o", max_tokens=100)  # type: ignore[list-item]
    with pytest.raises(ctxbudget.InvalidRequestError, match="no messages"):
        trim_messages([], model="gpt-4o", max_tokens=100)
    for bad in (0, -5, True, 1.5):
        with pytest.raises(ctxbudget.ConfigError, match="max_tokens"):
            trim_messages([HumanMessage("hi")], model="gpt-4o", max_tokens=bad)  # type: ignore[arg-type]
    with pytest.raises(ctxbudget.UnknownModelError, match="closest"):
        trim_messages([HumanMessage("hi")], model="gpt-4oo", max_tokens=100)
    with pytest.raises(ctxbudget.UnknownModelError, match=r"SPACE \(U\+0020\): model ids hold no spaces"):
        trim_messages([HumanMessage("hi")], model="gpt 4o", max_tokens=100)


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC)},
        check=False,
    )


def test_importing_ctxbudget_does_not_import_langchain() -> None:
    done = _python("import sys, ctxbudget; print('langchain_core' in sys.modules)")
    assert done.stdout.strip() == "False", done.stderr


def test_without_langchain_core_the_import_says_what_to_install() -> None:
    done = _python(
        "import sys; sys.modules['langchain_core'] = None; sys.modules['langchain_core.messages'] = None\n"
        "import ctxbudget.integrations.langchain"
    )
    assert done.returncode != 0
    assert "ImportError: ctxbudget.integrations.langchain needs langchain-core" in done.stderr
    assert "pip install 'ctxbudget[langchain]'" in done.stderr


@st.composite
def _conversations(draw: Any) -> list[BaseMessage]:
    """A system prompt, then turns: human messages, answers and tool turns of random sizes."""
    words = st.integers(min_value=0, max_value=120).map(lambda n: " ".join(["word"] * n))
    messages: list[BaseMessage] = [SystemMessage("Be precise.")] if draw(st.booleans()) else []
    for turn in range(draw(st.integers(min_value=1, max_value=8))):
        kind = draw(st.sampled_from(["human", "ai", "tool"]))
        text = draw(words)
        if kind == "human":
            messages.append(HumanMessage(text or "?"))
        elif kind == "ai":
            messages.append(AIMessage(text))
        else:
            messages.extend(_tool_turn(f"t{turn}", text))
    messages.append(HumanMessage(draw(words) + " and then?"))
    return messages


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=_conversations(), max_tokens=st.integers(min_value=20, max_value=600))
def test_property_the_output_is_an_ordered_subsequence_with_tool_groups_whole(
    messages: list[BaseMessage], max_tokens: int
) -> None:
    try:
        kept = trim_messages(messages, model="gpt-4o", max_tokens=max_tokens)
    except ctxbudget.BudgetExceeded as refused:
        assert refused.required_tokens > max_tokens
        return
    assert _is_subsequence(kept, messages) and _tool_groups_whole(kept, messages)
    assert _tokens(kept, "gpt-4o") <= max_tokens
    assert kept[-1] is messages[-1]
    assert all(m in kept for m in messages if isinstance(m, SystemMessage))


def test_a_chat_prompt_templates_output_is_fitted_in_a_chain() -> None:
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda

    prompt = ChatPromptTemplate.from_messages([("system", "Be brief."), ("human", "{question}")])
    chain = prompt | RunnableLambda(lambda m: trim_messages(m, model="gpt-4o", max_tokens=8000))
    kept = chain.invoke({"question": "When was notice given?"})
    assert [type(m).__name__ for m in kept] == ["SystemMessage", "HumanMessage"]
    assert kept[1].content == "When was notice given?"


def test_a_budget_over_the_models_window_is_held_to_the_window() -> None:
    # A million tokens asked of a 128k model: what is kept must still be sendable.
    history: list[BaseMessage] = [SystemMessage("You are a careful analyst.")]
    for n in range(300):
        history += [HumanMessage(f"Question {n}: " + LONG * 2), AIMessage(f"Answer {n}: " + LONG * 2)]
    history.append(HumanMessage("What changed?"))
    report = fit_messages(history, model="gpt-4o", max_tokens=1_000_000).report
    assert report.max_tokens == 1_000_000 and report.available_tokens == 128_000
    assert report.tokens_before > 128_000 >= report.tokens_after and report.dropped


def _tool_results_as_human(result: str) -> list[BaseMessage]:
    calls = [{"name": "search", "args": {"q": q * 400}, "id": f"t{q}"} for q in "ab"]
    blocks = [{"type": "tool_result", "tool_use_id": f"t{q}", "content": f"{q} {result}"} for q in "ab"]
    return [AIMessage("", tool_calls=calls), HumanMessage(blocks)]  # the human one becomes 2 tool messages


@pytest.mark.parametrize(("system", "result"), [("You are careful. " * 200, "r"), ("You are careful.", LONG)])
def test_a_refusal_names_the_messages_given_and_its_parts_add_up(system: str, result: str) -> None:
    # the fit's refusal (the system prompt), and the one for the kept messages whole (the results)
    messages = [
        SystemMessage(system),
        HumanMessage("Find it."),
        *_tool_results_as_human(result),
    ]
    with pytest.raises(ctxbudget.BudgetExceeded) as refused:
        fit_messages(messages, model="gpt-4o", max_tokens=300)
    parts = refused.value.parts
    assert sum(parts.values()) == refused.value.required_tokens  # none lost, none counted twice
    assert all(re.match(r"(\w+ )?messages\[[0-3]\]", p) or p == "framing" for p in parts), parts


def test_a_bad_message_is_named_by_its_index_in_the_list_given() -> None:
    from langchain_core.messages import ChatMessage

    messages = [*_tool_results_as_human("r"), ChatMessage(role="critic", content="no"), HumanMessage("q?")]
    with pytest.raises(ctxbudget.InvalidRequestError) as refused:
        fit_messages(messages, model="gpt-4o", max_tokens=1000)
    assert refused.value.path == "messages[2].role"  # not the converted body's $.messages[4]


def test_a_bad_block_is_named_at_its_index_in_the_message_given() -> None:
    """A HumanMessage's tool results become tool messages: the bad block, content[3] of the message
    given, was named content[1] (its index in the converted user message), with a class name."""
    messages = [
        HumanMessage("q"),
        AIMessage(
            content=[
                {"type": "tool_use", "id": "t1", "name": "s", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "s", "input": {}},
            ],
            tool_calls=[{"name": "s", "args": {}, "id": "t1"}, {"name": "s", "args": {}, "id": "t2"}],
        ),
        HumanMessage(
            content=[
                {"type": "tool_result", "tool_use_id": "t1", "content": "a"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "b"},
                {"type": "text", "text": "and"},
                {"type": "image_url", "image_url": "not-a-dict"},
            ]
        ),
    ]
    with pytest.raises(ctxbudget.InvalidRequestError) as refused:
        fit_messages(messages, model="gpt-4o", max_tokens=1000)
    assert refused.value.path == "messages[2].content[3].image_url"
    assert "instance of" not in str(refused.value)
