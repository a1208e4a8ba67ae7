"""OpenAI Responses bodies through fit and count: string and item inputs, instructions, tool
pairs, previous_response_id, and the properties every fit of one keeps."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import BudgetExceeded, ConfigError, InvalidRequestError, count, fit, get_encoding
from ctxbudget.cli import main

WORD = "lorem ipsum dolor sit amet "
EXAMPLES = int(os.environ.get("CTXBUDGET_FUZZ_EXAMPLES", "60"))
ENC = get_encoding("o200k_base")


def _tokens(*texts: str) -> int:
    return sum(len(ENC.encode(t)) for t in texts)


def _turn(n: int, size: int = 300) -> list[dict[str, Any]]:
    """A past turn: a question, a function call and its output, an answer."""
    return [
        {"role": "user", "content": f"question {n} " + WORD * size},
        {"type": "function_call", "call_id": f"call_{n}", "name": "lookup", "arguments": '{"q": 1}'},
        {"type": "function_call_output", "call_id": f"call_{n}", "output": f"result {n} " + WORD * size},
        {"role": "assistant", "content": [{"type": "output_text", "text": f"answer {n} " + WORD * size}]},
    ]


def _long_body(turns: int = 20) -> dict[str, Any]:
    items = [item for n in range(turns) for item in _turn(n)]
    items.append({"role": "user", "content": [{"type": "input_text", "text": "What is the final answer?"}]})
    return {"model": "gpt-4o", "instructions": "Answer briefly.", "input": items, "max_output_tokens": 500}


def test_string_input_is_counted_like_a_chat_message_and_detected() -> None:
    body = {"model": "gpt-4o", "instructions": "Be brief.", "input": "Hello there"}
    result = count(body, model="gpt-4o")
    # reply priming 3; the instructions as a developer message; the input as a user message
    expected = 3 + (3 + _tokens("developer", "Be brief.")) + (3 + _tokens("user", "Hello there"))
    assert result["tokens"] == expected
    assert result["format"] == "responses"
    # no Responses recipe is published: the count is the Chat Completions one, labelled so
    assert result["exact"] is False
    assert result["estimated_parts"] == [
        "framing: the Chat Completions recipe (OpenAI publishes none for the Responses API)"
    ]


def test_string_input_that_fits_passes_through_and_one_too_long_stays_a_string() -> None:
    body = {"model": "gpt-4o", "input": "Summarize: " + WORD * 50, "max_output_tokens": 100}
    assert fit(body, model="gpt-4o").request == body
    long = {"model": "gpt-4o", "input": WORD * 3000 + "What does it say?", "max_output_tokens": 100}
    result = fit(long, model="gpt-4o", max_context_tokens=2000)
    assert isinstance(result.request["input"], str)
    assert result.request["input"].endswith("What does it say?")  # the question is kept, as in chat
    assert result.report.tokens_after <= result.report.available_tokens
    assert [i.path for i in result.report.items] == ["$.input"]


def test_history_is_dropped_oldest_first_keeping_the_last_user_turn_and_pairs_whole() -> None:
    body = _long_body()
    result = fit(body, model="gpt-4o", max_context_tokens=8000)
    sent = result.request["input"]
    assert sent[-1] == body["input"][-1]  # the latest user turn
    assert result.report.tokens_after <= result.report.available_tokens
    calls = {i["call_id"] for i in sent if i.get("type") == "function_call"}
    outputs = {i["call_id"] for i in sent if i.get("type") == "function_call_output"}
    assert calls == outputs and calls  # every call kept with its output
    kept_turns = sorted(int(c.removeprefix("call_")) for c in calls)
    assert kept_turns == list(range(kept_turns[0], 20))  # the newest turns, oldest dropped
    assert any("summarized" in str(i.get("content")) for i in sent)  # the placeholder says so
    assert result.request["max_output_tokens"] == 500
    assert result.report.reserve_output_tokens == 500  # max_output_tokens is the reply reserve
    assert body == _long_body()  # the input is not mutated


def test_instructions_and_developer_messages_are_never_trimmed() -> None:
    body = _long_body()
    body["instructions"] = "Rules. " + WORD * 400
    body["input"].insert(0, {"role": "developer", "content": "Cite sources. " + WORD * 100})
    result = fit(body, model="gpt-4o", max_context_tokens=9000)
    assert result.request["instructions"] == body["instructions"]
    assert result.request["input"][0] == body["input"][0]
    systems = [i for i in result.report.items if i.component == "system"]
    assert [i.path for i in systems] == ["$.instructions", "$.input[0]"]
    assert all(i.action == "kept" for i in systems)


def test_previous_response_id_passes_through_and_is_named_as_not_counted() -> None:
    body = {**_long_body(), "previous_response_id": "resp_abc123", "store": True}
    result = fit(body, model="gpt-4o", max_context_tokens=8000)
    assert result.request["previous_response_id"] == "resp_abc123" and result.request["store"] is True
    assert not result.report.exact
    assert any(p.startswith("previous_response_id:") for p in result.report.estimated_parts)
    counted = count({"model": "gpt-4o", "input": "hi", "previous_response_id": "resp_1"}, model="gpt-4o")
    assert counted["exact"] is False


def test_report_names_every_item_by_its_path() -> None:
    result = fit(_long_body(3), model="gpt-4o")
    report = result.report.to_dict()
    assert report["format"] == "responses" and report["passed_through"]
    assert [i["path"] for i in report["items"]] == ["$.instructions", *(f"$.input[{n}]" for n in range(13))]
    assert report["items"][-1]["component"] == "query"


def test_reasoning_goes_with_the_call_it_led_to() -> None:
    items: list[dict[str, Any]] = []
    for n in range(12):
        items += [
            {"role": "user", "content": f"q{n} " + WORD * 200},
            {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": "think"}]},
            *_turn(n)[1:],
        ]
    items.append({"role": "user", "content": "Now?"})
    result = fit({"model": "gpt-4o", "input": items}, model="gpt-4o", max_context_tokens=8000)
    sent = result.request["input"]
    for position, item in enumerate(sent):
        if item.get("type") == "reasoning":
            assert sent[position + 1]["type"] == "function_call"
        if item.get("type") == "function_call":
            assert sent[position - 1]["type"] == "reasoning"


def test_untrimmable_parts_that_do_not_fit_raise_budget_exceeded() -> None:
    body = {"model": "gpt-4o", "instructions": WORD * 3000, "input": "hi", "max_output_tokens": 100}
    with pytest.raises(BudgetExceeded) as raised:
        fit(body, model="gpt-4o", max_context_tokens=2000)
    assert "instructions" in str(raised.value)


def test_malformed_items_are_refused_with_their_path() -> None:
    with pytest.raises(InvalidRequestError) as raised:
        fit({"model": "gpt-4o", "input": [{"type": "function_call", "name": "f"}]}, model="gpt-4o")
    assert "$.input[0]" in str(raised.value)
    with pytest.raises(InvalidRequestError):
        count({"model": "gpt-4o", "input": 5}, model="gpt-4o", input_format="responses")


def test_cli_counts_and_fits_a_responses_body(tmp_path: Path) -> None:
    path = tmp_path / "body.json"
    path.write_text(json.dumps(_long_body(3)), "utf-8")
    counted = CliRunner().invoke(main, ["count", str(path), "--format", "responses", "--json"])
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.output)["format"] == "responses"
    fitted = CliRunner().invoke(
        main, ["fit", str(path), "--format", "responses", "--max-context-tokens", "2500"]
    )
    assert fitted.exit_code == 0, fitted.output


@st.composite
def responses_bodies(draw: st.DrawFn) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(0, 6))):
        items.append({"role": "user", "content": f"u{turn} " + WORD * draw(st.integers(1, 300))})
        for call in range(draw(st.integers(0, 2))):
            call_id = f"c{turn}-{call}"
            if draw(st.booleans()):
                items.append({"type": "reasoning", "id": f"rs{call_id}", "summary": []})
            items.append({"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"})
            output = WORD * draw(st.integers(0, 800))
            items.append({"type": "function_call_output", "call_id": call_id, "output": output})
        items.append({"role": "assistant", "content": [{"type": "output_text", "text": WORD * 100}]})
    items.append({"role": "user", "content": "QUESTION " + WORD * draw(st.integers(0, 100))})
    body: dict[str, Any] = {"model": "gpt-4o", "input": items, "max_output_tokens": 200}
    if draw(st.booleans()):
        body["instructions"] = "Be exact. " + WORD * draw(st.integers(0, 50))
    return body


def _is_subsequence(kept: list[dict[str, Any]], given: list[dict[str, Any]]) -> bool:
    """Every kept item (a placeholder aside) stands for one given item, in order (its texts may be cut)."""
    ids = iter(json.dumps({k: v for k, v in g.items() if k not in ("content", "output")}) for g in given)
    for item in kept:
        if "summarized" in str(item.get("content")) and "[Earlier conversation" in str(item.get("content")):
            continue
        key = json.dumps({k: v for k, v in item.items() if k not in ("content", "output")})
        if not any(key == candidate for candidate in ids):
            return False
    return True


@settings(max_examples=EXAMPLES, deadline=None)
@given(responses_bodies(), st.integers(1500, 12000))
def test_fits_keep_order_pairs_and_the_budget(body: dict[str, Any], window: int) -> None:
    try:
        result = fit(body, model="gpt-4o", max_context_tokens=window)
    except BudgetExceeded:
        return
    sent = result.request["input"]
    assert _is_subsequence(sent, body["input"])
    calls = [i["call_id"] for i in sent if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in sent if i.get("type") == "function_call_output"]
    assert calls == outputs  # pairs whole, in order
    question, kept = body["input"][-1]["content"], sent[-1]["content"]
    # the question is kept whole, or (too long for the window, as in the chat format) its end
    assert kept == question or (kept.startswith("[…]\n") and question.endswith(kept.removeprefix("[…]\n")))
    tokens = count(result.request, model="gpt-4o")["tokens"]
    assert tokens == result.report.tokens_after <= result.report.available_tokens


@pytest.mark.parametrize("value", [42, None, {"role": "user", "content": "hi"}])
def test_an_input_that_is_neither_a_string_nor_a_list_says_what_it_must_be(value: Any) -> None:
    with pytest.raises(InvalidRequestError, match=r"\$\.input: must be a string or a list of items"):
        fit({"model": "gpt-4o", "input": value}, model="gpt-4o", format="responses")


def _computer_turn(n: int) -> list[dict[str, Any]]:
    """A computer-use step: a question, the model's computer call, its screenshot output."""
    screenshot = {"type": "computer_screenshot", "image_url": "data:image/png;base64,iVBORw0KGgo="}
    return [
        {"role": "user", "content": f"step {n} " + WORD * 300},
        {"type": "computer_call", "id": f"cu_{n}", "call_id": f"c{n}", "action": {"type": "screenshot"}},
        {"type": "computer_call_output", "call_id": f"c{n}", "output": screenshot},
    ]


def test_every_kind_of_call_stays_with_its_output_and_a_screenshot_is_priced_as_an_image() -> None:
    items = [item for n in range(12) for item in _computer_turn(n)]
    items.append({"role": "user", "content": "Where are we?"})
    result = fit({"model": "gpt-4o", "input": items}, model="gpt-4o", max_context_tokens=9000)
    sent = result.request["input"]
    calls = [i["call_id"] for i in sent if i.get("type") == "computer_call"]
    outputs = [i["call_id"] for i in sent if i.get("type") == "computer_call_output"]
    assert calls == outputs and 0 < len(calls) < 12  # trimmed, and no call without its output
    screenshot = [p for p in result.report.estimated_parts if "computer_call_output: image" in p]
    assert screenshot  # priced by the image rule, not as its base64 text


def test_a_stored_prompt_may_supply_the_input() -> None:
    body = {"model": "gpt-4o", "prompt": {"id": "pmpt_1", "variables": {"city": "Paris"}}}
    counted = count(body, model="gpt-4o")
    assert counted["format"] == "responses" and counted["exact"] is False
    assert counted["tokens"] >= _tokens(json.dumps({"city": "Paris"}, separators=(",", ":")))
    result = fit(body, model="gpt-4o")
    assert result.request == body and "input" not in result.request
    with pytest.raises(InvalidRequestError, match="needs an `input`"):
        count({"model": "gpt-4o", "tools": []}, model="gpt-4o", input_format="responses")


def test_a_function_call_output_is_text_or_parts_not_an_object() -> None:
    items = [{"type": "function_call_output", "call_id": "c1", "output": {"type": "computer_screenshot"}}]
    with pytest.raises(InvalidRequestError, match=r"\$\.input\[0\].*string or a list of parts"):
        count({"model": "gpt-4o", "input": [*items, {"role": "user", "content": "hi"}]}, model="gpt-4o")


def test_a_custom_tool_output_is_cut_like_a_function_output() -> None:
    for kind, call in (("function_call", {"arguments": "{}"}), ("custom_tool_call", {"input": "notice"})):
        body = {
            "model": "gpt-4o",
            "input": [
                {"role": "user", "content": "Search the record."},
                {"type": kind, "call_id": "c1", "name": "grep", **call},
                {"type": f"{kind}_output", "call_id": "c1", "output": "line of the log " * 800},
            ],
        }
        result = fit(body, model="gpt-4o", max_context_tokens=1500, reserve_output_tokens=0)
        output = result.request["input"][-1]["output"]
        assert result.report.tokens_after <= 1500 and 0 < len(output) < len(body["input"][-1]["output"]), kind


def test_an_mcp_approval_stays_with_the_request_it_answers() -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "Ask the wiki."},
        {
            "type": "mcp_approval_request",
            "id": "mcpr_1",
            "server_label": "wiki",
            "name": "ask",
            "arguments": "{}",
        },
        {"role": "assistant", "content": [{"type": "output_text", "text": "An aside. " * 600}]},
        {"role": "user", "content": "approve it " * 300},
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
        {"role": "user", "content": "And then?"},
    ]
    for window in (400, 900, 1500, 3000):
        sent = fit({"model": "gpt-4o", "input": items}, model="gpt-4o", max_context_tokens=window).request[
            "input"
        ]
        kinds = [i.get("type") for i in sent]
        assert ("mcp_approval_response" in kinds) == ("mcp_approval_request" in kinds), window


def test_outputs_answering_a_stored_response_are_cut_never_dropped() -> None:
    """With previous_response_id the calls are in the stored response, not in the input: an output
    dropped would leave its call unanswered, which the API refuses."""
    outputs = [
        {"type": "function_call_output", "call_id": f"call_{c}", "output": f"Clause {c} says notice. " * 300}
        for c in "ab"
    ]
    body = {
        "model": "gpt-4o",
        "previous_response_id": "resp_1",
        "input": [*outputs, {"role": "user", "content": "So?"}],
    }
    result = fit(body, model="gpt-4o", max_context_tokens=2500, reserve_output_tokens=0)
    sent = [i.get("call_id") for i in result.request["input"] if i.get("type") == "function_call_output"]
    assert sent == ["call_a", "call_b"] and result.report.tokens_after <= 2500
    standalone = fit(
        {**body, "previous_response_id": None},
        model="gpt-4o",
        max_context_tokens=2500,
        reserve_output_tokens=0,
    )
    assert result.report.tokens_after > 0 and standalone.report.tokens_after <= 2500


def test_a_budget_that_drops_a_stored_calls_output_is_an_error() -> None:
    output = {"type": "function_call_output", "call_id": "call_a", "output": "Clause 4 says notice. " * 200}
    body = {
        "model": "gpt-4o",
        "previous_response_id": "resp_1",
        "input": [output, {"role": "user", "content": "So?"}],
    }
    with pytest.raises(ConfigError, match="drops the output of call_a"):
        fit(body, model="gpt-4o", max_context_tokens=1500, budget={"history": 0})
    # asked for emptying: sent on as asked, but not without a word (it was silent)
    emptied = fit(body, model="gpt-4o", max_context_tokens=1500, budget={"history": 0}, on_overflow="empty")
    assert all(i.get("call_id") != "call_a" for i in emptied.request["input"])
    assert any("drops the output of call_a" in w for w in emptied.report.warnings)


def test_a_reasoning_item_goes_with_every_call_of_its_response() -> None:
    """The API refuses a call sent back without the reasoning that led to it: a preamble message
    may stand between them, and parallel calls may each be listed with its output."""
    from ctxbudget.formats.responses_items import call_groups

    def call(n: str) -> dict[str, Any]:
        return {"type": "function_call", "id": f"fc_{n}", "call_id": f"c_{n}", "name": "f", "arguments": "{}"}

    def output(n: str) -> dict[str, Any]:
        return {"type": "function_call_output", "call_id": f"c_{n}", "output": "x"}

    ask = {"role": "user", "content": "go"}
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    preamble = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Let me look."}],
    }
    for items in (
        [ask, reasoning, preamble, call("a"), output("a")],
        [ask, reasoning, call("a"), output("a"), call("b"), output("b")],
    ):
        groups = call_groups(items)
        assert len(set(groups[1:])) == 1 and groups[0] != groups[1], items
    later = call_groups(
        [ask, reasoning, call("a"), output("a"), {"role": "user", "content": "and?"}, call("b")]
    )
    assert later[5] != later[1]  # a new turn's call is not that response's


def test_a_local_shell_output_names_its_call_by_id() -> None:
    from ctxbudget.formats.responses_items import call_groups

    shell = {
        "type": "local_shell_call",
        "id": "lsh_1",
        "call_id": "call_1",
        "action": {"type": "exec"},
        "status": "completed",
    }
    answer = {"type": "local_shell_call_output", "id": "call_1", "output": "ok"}
    groups = call_groups([{"role": "user", "content": "ls"}, shell, answer])
    assert groups[1] == groups[2]


def test_input_items_of_newer_tools_are_taken_as_the_sdk_types_them() -> None:
    """A shell_call_output's output objects have no type, an item reference may be its id alone,
    and a tool_search_call's arguments are an object: all valid input, fitted and sent; only a
    function call's own fields are held to a function call's shape."""
    items = [
        {"type": "shell_call", "call_id": "s1", "action": {"commands": ["ls"]}, "status": "completed"},
        {
            "type": "shell_call_output",
            "call_id": "s1",
            "output": [{"stdout": "a\nb", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
        },
        {"id": "msg_123"},
        {"type": "tool_search_call", "call_id": "t1", "arguments": {"query": "files"}, "status": "completed"},
        {"role": "user", "content": "What is in the folder?"},
    ]
    assert fit({"input": items}, model="gpt-4o").request["input"] == items
    bad = {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 1}}]}
    with pytest.raises(InvalidRequestError, match="function_call's `arguments` is a string"):
        fit(bad, model="gpt-4o")
    part = {"input": [{"type": "function_call_output", "call_id": "c", "output": [{"text": "x"}]}]}
    with pytest.raises(InvalidRequestError, match=r"`output\[0\]` is a part with a string `type`"):
        fit(part, model="gpt-4o")


def test_a_stored_calls_output_is_kept_without_pinning_the_whole_history() -> None:
    # The output answering the stored response's call opens the input: it alone is pinned. It was
    # grouped with everything after it, so all 122 items were kept and 88 of them emptied.
    long = "The quarterly figures for the northern region grew steadily. " * 40
    items: list[dict[str, Any]] = [{"type": "function_call_output", "call_id": "call_stored", "output": "ok"}]
    for n in range(30):
        items += [
            {"role": "user", "content": f"Question {n}: {long}"},
            {"type": "function_call", "call_id": f"c{n}", "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{n}", "output": long},
            {"role": "assistant", "content": f"Answer {n}: {long}"},
        ]
    items.append({"role": "user", "content": "Which region grew?"})
    body = {"model": "gpt-4.1", "previous_response_id": "resp_abc", "input": items}
    sent = fit(body, model="gpt-4.1", max_context_tokens=5000, reserve_output_tokens=0).request["input"]
    assert sent[0] == items[0]  # the stored call stays answered
    assert (
        len(sent) < 20 and sent[-1] == items[-1] and sent[-2] == items[-2]
    )  # older turns go, the newest stay whole
    assert not [i for i in sent if i.get("output") == "" or i.get("content") == ""]


def test_a_stored_calls_outputs_are_kept_before_the_newest_turn_when_both_do_not_fit() -> None:
    # The outputs and the question fit (1,622 tokens of 2,400); the newest older turn beside them
    # does not: it gives way, not the outputs (the fit was refused as if they had to go).
    clause = "Clause text about notice and delivery and cure periods. " * 80
    items: list[dict[str, Any]] = [
        {"type": "function_call_output", "call_id": f"call_prev{n}", "output": f"prev{n} {clause}"}
        for n in (1, 2)
    ]
    for n in range(4):
        items += [
            {"role": "user", "content": f"Q{n} {clause}"},
            {"role": "assistant", "content": [{"type": "output_text", "text": f"A{n} {clause}"}]},
        ]
    items.append({"role": "user", "content": "which clause?"})
    body = {"model": "gpt-4o", "previous_response_id": "resp_1", "input": items, "max_output_tokens": 100}
    result = fit(body, model="gpt-4o", max_context_tokens=2500)
    sent = result.request["input"]
    assert sent[:2] == items[:2] and sent[-1] == items[-1]  # the stored calls answered, the question
    assert result.report.tokens_after <= result.report.available_tokens
    reasons = {i.path: i.reason for i in result.report.items if i.component == "history"}
    assert reasons["$.input[0]"].startswith("answers a call of the stored response")


@pytest.mark.parametrize("conversation", ["conv_123", {"id": "conv_123"}])
def test_a_stored_conversation_is_named_and_its_calls_output_kept(conversation: Any) -> None:
    long = "The quarterly figures for the northern region grew steadily. " * 60
    items: list[dict[str, Any]] = [{"type": "function_call_output", "call_id": "call_stored", "output": long}]
    items += [{"role": "user", "content": f"Question {n}: {long}"} for n in range(6)]
    body = {"model": "gpt-4.1", "conversation": conversation, "input": items}
    counted = count(body, model="gpt-4.1")
    assert not counted["exact"] and any(p.startswith("conversation:") for p in counted["estimated_parts"])
    sent = fit(body, model="gpt-4.1", max_context_tokens=3000, reserve_output_tokens=0).request["input"]
    assert sent[0]["type"] == "function_call_output" and sent[0]["call_id"] == "call_stored"


def _png(width: int, height: int, payload: int) -> str:
    """A PNG's base64: its signature and header (the size a reader takes), then filler bytes."""
    import base64
    import struct
    import zlib

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    chunk = (
        struct.pack(">I", len(header)) + b"IHDR" + header + struct.pack(">I", zlib.crc32(b"IHDR" + header))
    )
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + chunk + bytes(range(256)) * (payload // 256)).decode()


def test_a_generated_image_or_an_image_variable_is_counted_as_an_image_not_as_base64() -> None:
    image = _png(1024, 1024, 600_000)
    generated = {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": image}
    follow = {
        "model": "gpt-4.1",
        "input": [
            {"role": "user", "content": "Draw a cat."},
            generated,
            {"role": "user", "content": "Make it blue."},
        ],
    }
    counted = count(follow, model="gpt-4.1")
    assert counted["tokens"] < 2_000 and not counted["exact"]  # 765 by the tile rule, not ~500,000
    assert any("image_generation_call" in p and "765 tokens" in p for p in counted["estimated_parts"])
    fit(follow, model="gpt-4.1", max_context_tokens=8_000)  # the follow-up fits
    variables = {
        "img": {"type": "input_image", "image_url": "data:image/png;base64," + image},
        "tone": "warm",
    }
    stored = {"model": "gpt-4.1", "prompt": {"id": "pmpt_1", "variables": variables}, "input": "Go."}
    assert count(stored, model="gpt-4.1")["tokens"] < 2_000


def test_a_body_that_only_continues_a_stored_response_is_read_as_responses() -> None:
    """{"model", "previous_response_id"} sends no new turn; it was refused as "cannot tell the
    request format", where `input_format="responses"` took it."""
    body = {"model": "gpt-4o", "previous_response_id": "resp_1"}
    assert count(body, model="gpt-4o")["format"] == "responses"
    assert fit(body, model="gpt-4o").request == body


@pytest.mark.parametrize(
    ("body", "where", "said"),
    [
        ({"messages": "hello"}, "$.messages", "expected a list of messages, got a string"),
        ({"input": 5}, "$.input", "expected a string or a list of items, got a number"),
    ],
)
def test_content_of_the_wrong_type_is_named_at_its_field(body: dict[str, Any], where: str, said: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        count(body, model="gpt-4o")
    assert str(caught.value).startswith(f"{where}: {said}")


def test_an_output_whose_call_is_given_by_item_reference_stays_with_it() -> None:
    """Calls and reasoning given back as item_reference (stored items, by id) were not paired:
    a fit kept the output for call_10 without the reference to fc_10 (the API refuses it), a call
    without the reference to its reasoning, and with previous_response_id every such output was
    taken for an answer to the stored response, making the whole history one unit."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "Find the failing module."}]
    for n in range(12):
        items += [
            {"type": "item_reference", "id": f"rs_{n}"},
            {"type": "item_reference", "id": f"fc_{n}"},
            {
                "type": "function_call_output",
                "call_id": f"call_{n}",
                "output": f"log {n}: " + "ok line " * 300,
            },
        ]
    items.append({"role": "user", "content": "Which module failed?"})
    for continued in ({}, {"previous_response_id": "resp_1"}):
        body = {"model": "gpt-4o", "input": items, **continued}
        sent = fit(body, model="gpt-4o", max_context_tokens=3000).request["input"]
        for n, item in enumerate(sent):
            if item.get("type") == "function_call_output":
                assert sent[n - 2 : n] == [
                    {"type": "item_reference", "id": "rs_" + item["call_id"][5:]},
                    {"type": "item_reference", "id": "fc_" + item["call_id"][5:]},
                ]
        assert 0 < sum(i.get("type") == "function_call_output" for i in sent) < 12  # older units dropped
