"""Fitting real agent traffic: defaults taken from the body, protected prompts, clean CLI output."""

from __future__ import annotations

import base64
import itertools
import json
import random
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxbudget import BudgetExceeded, InvalidRequestError, assemble, fit
from ctxbudget.cli import main
from ctxbudget.fitting import count
from ctxbudget.items import GAP
from ctxbudget.trim.messages import question_spans

from .test_agent_properties import check_anthropic_rules

WORDS = " ".join(f"w{n}" for n in range(400))


def _chat(turns: int, **extra: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are careful. " * 200}]
    messages += [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}: {WORDS}"} for n in range(turns)
    ]
    return {"model": "gpt-4o", "messages": [*messages, {"role": "user", "content": "And now?"}], **extra}


def _write(tmp_path: Path, body: object) -> str:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(body))
    return str(path)


def test_the_body_gives_the_model_and_the_output_reserve(tmp_path: Path) -> None:
    body = _chat(4, max_tokens=1000)
    result = fit(body, model="gpt-4o", max_context_tokens=3000)
    assert result.report.reserve_output_tokens == 1000
    assert fit(_chat(4, max_completion_tokens=700), model="gpt-4o").report.reserve_output_tokens == 700
    cli = CliRunner().invoke(main, ["fit", _write(tmp_path, body), "--max-context-tokens", "3000", "--json"])
    assert cli.exit_code == 0, cli.output
    report = json.loads(cli.stdout)["report"]
    assert (report["model"], report["reserve_output_tokens"]) == ("gpt-4o", 1000)
    counted = CliRunner().invoke(main, ["count", _write(tmp_path, body)])
    assert counted.exit_code == 0 and "tokens" in counted.output


def test_no_model_anywhere_is_a_usage_error(tmp_path: Path) -> None:
    body = _chat(1)
    del body["model"]
    result = CliRunner().invoke(main, ["count", _write(tmp_path, body)])
    assert result.exit_code == 2 and "--model" in result.output


@pytest.mark.parametrize("bad", [-5, True, "1000", 1.5])
def test_a_bad_body_max_tokens_names_its_path(bad: object) -> None:
    with pytest.raises(Exception, match=r"\$\.max_tokens") as caught:
        fit(_chat(1, max_tokens=bad), model="gpt-4o")
    assert type(caught.value).__name__ == "InvalidRequestError"


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("stream", "yes"),
        ("stream", 1),
        ("stream", []),
        ("n", -1),
        ("n", 0),
        ("n", "3"),
        ("n", 2.5),
        ("n", True),
    ],
)
def test_a_stream_or_n_no_provider_takes_is_refused_at_its_path(field: str, bad: object) -> None:
    """A gateway answered ``"stream": "yes"`` as a stream and priced ``"n": -1`` as one reply; the
    provider refuses both. The fit, the count and the assembly (which carries them) say where."""
    body = _chat(1, **{field: bad})
    calls = [
        lambda: fit(body, model="gpt-4o"),
        lambda: count(body, model="gpt-4o"),
        lambda: assemble(body, policy="legal-review", model="gpt-4o", output_format="openai"),
    ]
    for call in calls:
        with pytest.raises(InvalidRequestError, match=rf"\$\.{field}: must be"):
            call()


@pytest.mark.parametrize(("field", "good"), [("stream", True), ("stream", False), ("n", 3), ("n", 3.0)])
def test_a_stream_or_n_a_provider_takes_is_fitted(field: str, good: object) -> None:
    body = _chat(1, **{field: good})
    assert fit(body, model="gpt-4o").request == body
    assert count(body, model="gpt-4o")["tokens"] > 0


def test_fields_named_stream_or_n_are_checked_only_where_a_provider_reads_them() -> None:
    """A question body's fields pass through as they are; an Anthropic or Responses body has no
    ``n`` (the provider says so of an unknown field); a body assembled into another format leaves
    both behind."""
    question = {"questions": [{"text": "When?"}], "n": 0, "stream": "yes"}
    assert fit(question, model="gpt-4o").request == question
    anthropic_body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 10,
        "n": 0,
        "messages": [{"role": "user", "content": "Hi"}],
    }
    assert fit(anthropic_body, model="claude-sonnet-4-5").request == anthropic_body
    with pytest.raises(InvalidRequestError, match=r"\$\.stream"):
        fit({**anthropic_body, "stream": "yes"}, model="claude-sonnet-4-5")
    responses_body = {"model": "gpt-4o", "input": "Hi", "stream": 1}
    with pytest.raises(InvalidRequestError, match=r"\$\.stream"):
        count(responses_body, model="gpt-4o")
    elsewhere = assemble(_chat(1, n=0), policy="legal-review", model="claude-sonnet-4-5")
    assert "n" not in elsewhere.request  # not carried into an Anthropic body: not checked


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_system_prompts_are_protected_unless_budgeted(fmt: str) -> None:
    body = _chat(20)
    if fmt == "anthropic":
        body = {
            "model": "claude-sonnet-4-5",
            "system": body["messages"][0]["content"],
            "messages": body["messages"][1:],
        }
    lean = [m for m in body["messages"] if m["role"] == "system"] + body["messages"][-1:]
    system_tokens = count({**body, "messages": lean}, model=body["model"])["tokens"]
    window = system_tokens + 300
    kept = fit(body, model=body["model"], max_context_tokens=window, reserve_output_tokens=0)
    system_items = [i for i in kept.report.items if i.component == "system"]
    assert system_items and all(i.action == "kept" for i in system_items)
    trimmed = fit(
        body, model=body["model"], max_context_tokens=window, reserve_output_tokens=0, budget={"system": 20}
    )
    assert any(i.action != "kept" for i in trimmed.report.items if i.component == "system")
    with pytest.raises(BudgetExceeded, match=r"system \$\."):
        fit(body, model=body["model"], max_context_tokens=system_tokens // 2, reserve_output_tokens=0)


@pytest.mark.parametrize(
    "spec", ["system=ten", "system=nan", "systm=10", "system", "history=150", "query=-1"]
)
def test_a_malformed_budget_is_exit_2(tmp_path: Path, spec: str) -> None:
    result = CliRunner().invoke(main, ["fit", _write(tmp_path, _chat(2)), "--budget", spec])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "budget" in result.output


@pytest.mark.parametrize("spec", ["", " ", ","])
def test_a_budget_spec_with_no_entry_is_a_usage_error(tmp_path: Path, spec: str) -> None:
    # it ran the fit at the default percentages, as if --budget had not been given
    result = CliRunner().invoke(main, ["fit", _write(tmp_path, _chat(2)), "--budget", spec])
    assert result.exit_code == 2, result.output
    assert "--budget" in result.output and "names no component" in result.output


def test_warnings_go_to_stderr_and_body_prints_only_the_request(tmp_path: Path) -> None:
    path = _write(tmp_path, _chat(30))
    args = [
        "fit",
        path,
        "--max-context-tokens",
        "4000",
        "--reserve-output-tokens",
        "0",
        "--budget",
        "history=20,documents=0",
    ]
    table = CliRunner().invoke(main, args)
    assert table.exit_code == 0, table.output
    assert "warning" not in table.stdout and "warning" in table.stderr
    body = CliRunner().invoke(main, [*args, "--body"])
    sent = json.loads(body.stdout)
    assert set(sent) == {"model", "messages"} and sent["messages"][-1]["content"] == "And now?"
    assert count(sent, model="gpt-4o")["tokens"] <= 4000
    both = CliRunner().invoke(main, [*args, "--body", "--json"])
    assert both.exit_code == 2


def _tool_loop(first_result: str, second_result: str) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "notice"}'}}
    call2 = {"id": "c2", "type": "function", "function": {"name": "fetch", "arguments": '{"id": 7}'}}
    return {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are careful."},
            {"role": "user", "content": "When was notice given? Look it up."},
            {"role": "assistant", "content": None, "tool_calls": [call, call2]},
            {"role": "tool", "tool_call_id": "c1", "content": first_result},
            {"role": "tool", "tool_call_id": "c2", "content": second_result},
        ],
    }


def test_a_large_tool_group_is_cut_inside_whichever_result_is_large() -> None:
    big = "The record shows many things. " * 4000  # about 28k tokens
    for body in (_tool_loop(big, "short"), _tool_loop("short", big)):
        result = fit(body, model="gpt-4o", max_context_tokens=12_000, reserve_output_tokens=0)
        sent = result.request["messages"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
        assert "short" in {m["content"] for m in sent if m["role"] == "tool"}
        assert sent[1]["content"] == "When was notice given? Look it up."  # the query, whole
        assert count(result.request, model="gpt-4o")["tokens"] <= 12_000


def test_a_request_ending_in_tool_results_keeps_its_question() -> None:
    history = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"old turn {n}: {WORDS}"}
        for n in range(40)
    ]
    body = _tool_loop("result one " * 50, "result two " * 50)
    body["messages"] = body["messages"][:1] + history + body["messages"][1:]
    result = fit(body, model="gpt-4o", max_context_tokens=8000, reserve_output_tokens=0)
    sent = result.request["messages"]
    assert {"role": "user", "content": "When was notice given? Look it up."} in sent
    assert sent[-2:] == body["messages"][-2:]  # the newest tool group, whole
    assert any("Earlier conversation summarized" in str(m.get("content")) for m in sent)
    query = [i for i in result.report.items if i.component == "query"]
    assert query and query[0].path == "$.messages[41]" and query[0].action == "kept"


def test_cannot_fit_lists_the_parts_that_need_the_tokens_with_their_paths() -> None:
    body = _tool_loop("x", "y")
    body["messages"][2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"q": WORDS * 5})
    with pytest.raises(BudgetExceeded) as caught:
        fit(body, model="gpt-4o", max_context_tokens=1000, reserve_output_tokens=0)
    parts = caught.value.parts
    assert parts["history $.messages[2] (apart from its text)"] > 1000
    assert sum(parts.values()) == caught.value.required_tokens


def test_earlier_thinking_is_not_counted_and_the_current_loop_keeps_its_own() -> None:
    thinking = {"type": "thinking", "thinking": WORDS, "signature": "sig=="}
    earlier = {"role": "assistant", "content": [thinking, {"type": "text", "text": "Earlier answer."}]}
    loop = [
        {
            "role": "assistant",
            "content": [thinking, {"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "found"}]},
    ]
    body = {
        "model": "claude-sonnet-4-5",
        "messages": [
            {"role": "user", "content": "Hi"},
            earlier,
            {"role": "user", "content": "Look it up."},
            *loop,
        ],
    }
    plain = {
        **body,
        "messages": [
            body["messages"][0],
            {**earlier, "content": earlier["content"][1:]},
            *body["messages"][2:],
        ],
    }
    assert (
        count(body, model="claude-sonnet-4-5")["tokens"] == count(plain, model="claude-sonnet-4-5")["tokens"]
    )
    without_loop_thinking = {
        **body,
        "messages": [*body["messages"][:3], {**loop[0], "content": loop[0]["content"][1:]}, loop[1]],
    }
    assert (
        count(body, model="claude-sonnet-4-5")["tokens"]
        > count(without_loop_thinking, model="claude-sonnet-4-5")["tokens"]
    )


def test_an_anthropic_cut_never_starts_with_an_assistant_message() -> None:
    messages: list[dict[str, Any]] = []
    for n in range(12):
        messages.append({"role": "user", "content": f"question {n}: {WORDS}"})
        messages.append({"role": "assistant", "content": f"answer {n}: {WORDS}"})
    messages.append({"role": "user", "content": "Look it up."})
    body = {"model": "claude-sonnet-4-5", "messages": messages}
    for window in (1500, 3000, 6000):
        sent = fit(
            body, model="claude-sonnet-4-5", max_context_tokens=window, reserve_output_tokens=0
        ).request
        roles = [m["role"] for m in sent["messages"]]
        assert roles[0] == "user" and all(a != b for a, b in itertools.pairwise(roles))
        assert sent["messages"][-1]["content"] == "Look it up."


def _context_with_evidence() -> str:
    filler = [
        f"Paragraph {n} discusses shipping schedules, invoices and routine matters of lot {n}."
        for n in range(120)
    ]
    filler[70] = "The warranty notice was mailed on March 3 by certified letter to the buyer's office."
    return "\n\n".join(filler)


def test_a_long_user_message_keeps_its_question_and_the_matching_passages() -> None:
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": _context_with_evidence() + "\n\nWhen was the warranty notice mailed?"}
        ],
    }
    result = fit(body, model="gpt-4o", max_context_tokens=600, reserve_output_tokens=0)
    sent = result.request["messages"][0]["content"]
    assert sent.endswith("When was the warranty notice mailed?")
    assert "mailed on March 3 by certified letter" in sent
    assert "[…]" in sent and count(result.request, model="gpt-4o")["tokens"] <= 600
    query = next(i for i in result.report.items if i.component == "query")
    assert query.action == "truncated" and query.tokens_after <= 600


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_long_tool_result_keeps_what_the_question_asks_about(fmt: str) -> None:
    question = "When was the warranty notice mailed?"
    if fmt == "openai":
        body = _tool_loop(_context_with_evidence(), "short")
        body["messages"][1]["content"] = question
    else:
        body = {
            "model": "claude-sonnet-4-5",
            "messages": [
                {"role": "user", "content": question},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": _context_with_evidence()}
                    ],
                },
            ],
        }
    result = fit(body, model=body["model"], max_context_tokens=900, reserve_output_tokens=0)
    assert "mailed on March 3 by certified letter" in json.dumps(result.request)
    assert count(result.request, model=body["model"])["tokens"] <= 900


@pytest.mark.parametrize(
    ("shape", "question"),
    [
        (
            "{context}\n\nQuestion: When was the warranty notice mailed?\n\nAnswer concisely and cite the passage.",
            "Question: When was the warranty notice mailed?\n\nAnswer concisely and cite the passage.",
        ),
        (
            "Question: When was the warranty notice mailed?\n\nContext:\n{context}",
            "Question: When was the warranty notice mailed?",
        ),
    ],
)
def test_common_rag_shapes_keep_their_question(shape: str, question: str) -> None:
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": shape.format(context=_context_with_evidence())}],
    }
    sent = fit(body, model="gpt-4o", max_context_tokens=700, reserve_output_tokens=0).request["messages"][0][
        "content"
    ]
    assert question in sent
    assert "mailed on March 3 by certified letter" in sent


def test_the_question_is_kept_before_any_history_text() -> None:
    body = _tool_loop("Project notes and unrelated chatter. " * 300, "short")
    body["messages"][1]["content"] = (
        "Using the transcript the tool returned, what did the team decide about the XML format?"
    )
    for window in (80, 100, 120):
        sent = fit(body, model="gpt-4o", max_context_tokens=window, reserve_output_tokens=0).request[
            "messages"
        ]
        assert sent[1]["content"] == body["messages"][1]["content"], window


def test_an_older_long_message_is_cut_into_the_room_left_not_dropped() -> None:
    body = _tool_loop(_context_with_evidence(), "ok")
    body["messages"][1]["content"] = "When was the warranty notice mailed?"
    body["messages"] += [
        {"role": "assistant", "content": "I have the record."},
        {"role": "user", "content": "Please answer now."},
    ]
    result = fit(body, model="gpt-4o", max_context_tokens=2500, reserve_output_tokens=0)
    assert "mailed on March 3 by certified letter" in json.dumps(result.request)
    assert result.report.tokens_after > 1500  # the room is used, not left empty


def test_several_text_parts_are_read_as_one_text_and_cut_each_in_its_place() -> None:
    parts = [
        {"type": "text", "text": "Here is the record."},
        {"type": "text", "text": _context_with_evidence()},
        {"type": "text", "text": _context_with_evidence().replace("lot", "batch")},
        {"type": "text", "text": "When was the warranty notice mailed?"},
    ]
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": parts}]}
    result = fit(body, model="gpt-4o", max_context_tokens=900, reserve_output_tokens=0)
    content = result.request["messages"][0]["content"]
    assert [p["text"] for p in content[::3]] == [parts[0]["text"], parts[3]["text"]]
    assert all("[…]" in p["text"] and "mailed on March 3" in p["text"] for p in content[1:3])
    assert count(result.request, model="gpt-4o")["tokens"] <= 900


def test_anthropic_text_documents_are_trimmable() -> None:
    document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": _context_with_evidence() * 3},
    }
    body = {
        "model": "claude-sonnet-4-5",
        "messages": [
            {
                "role": "user",
                "content": [document, {"type": "text", "text": "When was the warranty notice mailed?"}],
            }
        ],
    }
    result = fit(body, model="claude-sonnet-4-5", max_context_tokens=3000, reserve_output_tokens=0)
    blocks = result.request["messages"][0]["content"]
    assert blocks[0]["type"] == "document" and "[…]" in blocks[0]["source"]["data"]
    assert blocks[1]["text"] == "When was the warranty notice mailed?"


def test_a_tool_group_is_cut_to_a_common_level_not_by_emptying_the_largest() -> None:
    body = _tool_loop("alpha beta gamma. " * 1500, "delta epsilon zeta. " * 400)
    sent = fit(body, model="gpt-4o", max_context_tokens=2000, reserve_output_tokens=0).request["messages"]
    sizes = [count({"model": "gpt-4o", "messages": [m]}, model="gpt-4o")["tokens"] for m in sent[3:]]
    assert min(sizes) > 300 and abs(sizes[0] - sizes[1]) < 200


@pytest.mark.parametrize("spec", ["system=10,system=20", "system=1_0", "system=١٠"])
def test_budget_values_are_plain_numbers_given_once(tmp_path: Path, spec: str) -> None:
    result = CliRunner().invoke(main, ["fit", _write(tmp_path, _chat(2)), "--budget", spec])
    assert result.exit_code == 2, result.output


def test_the_first_unit_is_cut_into_the_room_left_in_an_agent_loop() -> None:
    first = {"id": "a", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}
    second = {"id": "b", "type": "function", "function": {"name": "check", "arguments": "{}"}}
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "When was the warranty notice mailed?"},
            {"role": "assistant", "content": None, "tool_calls": [first]},
            {"role": "tool", "tool_call_id": "a", "content": _context_with_evidence() * 3},
            {"role": "assistant", "content": None, "tool_calls": [second]},
            {"role": "tool", "tool_call_id": "b", "content": "ok"},
        ],
    }
    result = fit(body, model="gpt-4o", max_context_tokens=3000, reserve_output_tokens=0)
    assert result.report.tokens_after > 2500
    assert "mailed on March 3 by certified letter" in json.dumps(result.request)


def test_text_parts_are_not_joined_across_an_image_and_keep_their_breakpoint() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    blocks = [
        {"type": "text", "text": _context_with_evidence(), "cache_control": {"type": "ephemeral"}},
        image,
        {"type": "text", "text": _context_with_evidence().replace("lot", "batch")},
        {
            "type": "text",
            "text": "When was the warranty notice mailed?",
            "cache_control": {"type": "ephemeral"},
        },
    ]
    body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": blocks}]}
    sent = fit(body, model="claude-sonnet-4-5", max_context_tokens=5000, reserve_output_tokens=0).request
    content = sent["messages"][0]["content"]
    assert [b["type"] for b in content][:2] == ["text", "image"]  # the image stays where it was
    assert sum("cache_control" in b for b in content) == 2
    assert content[-1]["text"].endswith("When was the warranty notice mailed?")


def test_parallel_tool_results_in_one_message_are_each_cut_in_place() -> None:
    """An Anthropic user turn answers three parallel tool calls: every tool_result's text may be
    cut (largest first, to a common level), not only the longest, so the group fits."""
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    filler = "Paragraph on routine shipping matters of the quarter.\n\n" * 400
    evidence = _context_with_evidence()
    results = [
        {"type": "tool_result", "tool_use_id": "a", "content": filler},
        {"type": "tool_result", "tool_use_id": "b", "content": [image, {"type": "text", "text": evidence}]},
        {"type": "tool_result", "tool_use_id": "c", "content": [{"type": "text", "text": filler}]},
    ]
    uses = [{"type": "tool_use", "id": i, "name": "fetch", "input": {"n": i}} for i in "abc"]
    body = {
        "model": "claude-sonnet-4-5",
        "messages": [
            {"role": "user", "content": "When was the warranty notice mailed?"},
            {"role": "assistant", "content": uses},
            {"role": "user", "content": results},
        ],
    }
    result = fit(body, model="claude-sonnet-4-5", max_context_tokens=4000, reserve_output_tokens=0)
    sent = result.request["messages"]
    assert sent[:2] == body["messages"][:2]
    cut = sent[2]["content"]
    assert [b["tool_use_id"] for b in cut] == ["a", "b", "c"] and cut[1]["content"][0] == image
    texts = [cut[0]["content"], cut[1]["content"][1]["text"], cut[2]["content"][0]["text"]]
    assert all("[…]" in t and len(t) > 500 for t in texts)  # each cut, none emptied
    assert "mailed on March 3 by certified letter" in texts[1]
    assert count(result.request, model="claude-sonnet-4-5")["tokens"] <= 4000


def test_the_question_is_not_split_at_an_abbreviation() -> None:
    text = (
        "filler words " * 400
        + "The hearing was on Monday. Did Hon. Smith rule on the motion before the deadline?"
    )
    assert [text[a:b] for a, b in question_spans(text)] == [
        "Did Hon. Smith rule on the motion before the deadline?"
    ]


def _claude(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "messages": messages}


def test_a_result_without_content_leaves_the_other_results_in_place() -> None:
    uses = [{"type": "tool_use", "id": i, "name": "t", "input": {}} for i in "abc"]
    results = [
        {"type": "tool_result", "tool_use_id": "a", "is_error": True},
        {"type": "tool_result", "tool_use_id": "b", "content": "routine filler text. " * 800},
        {"type": "tool_result", "tool_use_id": "c", "content": "Tool c says: the answer is 42."},
    ]
    body = _claude(
        [
            {"role": "user", "content": "What did tool c return?"},
            {"role": "assistant", "content": uses},
            {"role": "user", "content": results},
        ]
    )
    sent = fit(body, model="claude-sonnet-4-5", max_context_tokens=2000, reserve_output_tokens=0).request
    out = sent["messages"][2]["content"]
    assert out[0] == results[0] and out[2] == results[2]
    assert out[1]["content"].startswith("routine filler") and "[…]" in out[1]["content"]


def test_a_user_turn_with_results_and_a_question_is_the_query() -> None:
    body = _claude(
        [
            {"role": "user", "content": "Please look up the deployment notes."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "notes", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": _context_with_evidence() * 4},
                    {"type": "text", "text": "Question: when was the warranty notice mailed?"},
                ],
            },
        ]
    )
    result = fit(body, model="claude-sonnet-4-5", max_context_tokens=1500, reserve_output_tokens=0)
    assert [i.component for i in result.report.items][-1] == "query"
    last = result.request["messages"][-1]["content"]
    assert last[1]["text"] == "Question: when was the warranty notice mailed?"
    assert "mailed on March 3" in last[0]["content"]


def test_a_question_between_a_greeting_and_a_pasted_document_is_kept() -> None:
    text = "Hi, I need help with a review.\n\nWhen was the warranty notice mailed?\n\nHere it is:\n\n"
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": text + _context_with_evidence() * 3}]}
    sent = fit(body, model="gpt-4o", max_context_tokens=800, reserve_output_tokens=0).request
    content = sent["messages"][0]["content"]
    assert "When was the warranty notice mailed?" in content and "mailed on March 3" in content


def test_two_assistant_turns_answered_by_one_user_turn_stay_one_unit() -> None:
    body = _claude(
        [
            {"role": "user", "content": "Run both checks. " + "context " * 400},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "b", "name": "t", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "a ok " * 300},
                    {"type": "tool_result", "tool_use_id": "b", "content": "b ok " * 300},
                ],
            },
            {"role": "assistant", "content": "Both done."},
            {"role": "user", "content": "Question: what did both checks say?"},
        ]
    )
    for window in (300, 600, 1000):  # each cuts something
        result = fit(body, model="claude-sonnet-4-5", max_context_tokens=window, reserve_output_tokens=0)
        assert not result.report.passed_through
        sent = result.request
        check_anthropic_rules(sent)
        blocks = [b for m in sent["messages"] if isinstance(m["content"], list) for b in m["content"]]
        assert all(b["text"] for b in blocks if b["type"] == "text"), "no empty text block"


def test_format_detection_follows_the_body_not_only_the_model_id() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}}
    openai_shaped = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [image]}]}
    assert count(openai_shaped, model="claude-sonnet-4-5")["format"] == "openai"
    hosted = {
        "model": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert count(hosted, model="claude-sonnet-4-5")["format"] == "anthropic"


def test_tools_in_chat_completions_shape_make_a_body_with_a_claude_id_an_openai_one() -> None:
    """An agent's first turn through LiteLLM has no OpenAI marker but its tools: it was read as a
    Messages body (the function tools counted as Anthropic ones, 407 tokens for 410)."""
    messages = [{"role": "user", "content": "hello"}]
    function = {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}
    for tool in (
        {"type": "function", "function": function},
        {"type": "custom", "custom": {"name": "run_sql"}},
    ):
        body = {"model": "claude-sonnet-4-5", "messages": messages, "tools": [tool]}
        detected = count(body, model="claude-sonnet-4-5")
        assert detected["format"] == "openai"
        assert detected["tokens"] == count(body, model="claude-sonnet-4-5", input_format="openai")["tokens"]
    # Anthropic's own tools stay Anthropic: a custom tool (typed or not) and a server tool
    for tool in (
        {"name": "lookup", "input_schema": {"type": "object"}},
        {"type": "custom", "name": "lookup", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        {"type": "text_editor_20250124", "name": "str_replace_editor"},
    ):
        body = {"model": "claude-sonnet-4-5", "messages": messages, "tools": [tool]}
        assert count(body, model="claude-sonnet-4-5")["format"] == "anthropic"
    forced = {
        "model": "claude-sonnet-4-5",
        "messages": messages,
        "tools": [{"type": "function", "function": function}],
    }
    with pytest.raises(InvalidRequestError, match=r"\$\.tools\[0\]\.type: an OpenAI function tool"):
        count(forced, model="claude-sonnet-4-5", input_format="anthropic")


def test_legacy_function_calls_are_counted() -> None:
    call = {"name": "f", "arguments": json.dumps({"blob": "word " * 2000})}
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "function_call": call},
            {"role": "function", "name": "f", "content": "ok"},
            {"role": "user", "content": "next?"},
        ],
    }
    assert count(body, model="gpt-4o")["tokens"] > 2000


def test_the_placeholder_after_the_question_is_not_a_user_turn() -> None:
    calls = []
    for n in range(6):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        calls += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": "log line. " * 300},
        ]
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Question: what failed?"}, *calls]}
    sent = fit(body, model="gpt-4o", max_context_tokens=2500, reserve_output_tokens=0).request["messages"]
    users = [m for m in sent if m["role"] == "user"]
    assert users == [body["messages"][0]]


def test_kept_passages_that_touch_keep_the_text_between_them() -> None:
    from ctxbudget.trim.messages import _joined

    text = "alpha line\nbeta line\n\ngamma line"
    assert _joined(text, [(0, 10), (11, 20), (22, 32)], 0, len(text)) == (text, ((0, 0, len(text)),))
    made, copied = _joined(text, [(0, 10), (22, 32)], 0, len(text))
    assert made == "alpha line\n[…]\ngamma line"
    assert copied == ((0, 0, 10), (len(made) - 10, 22, 10))  # where each kept line is, here and there


def test_a_long_single_paragraph_that_opens_by_asking_keeps_its_question() -> None:
    """Found by a hostile run: "What is clause 4? <the contract as one paragraph>" lost its
    question (the last sentence was taken for it); a question at the end still wins."""
    from ctxbudget.trim.messages import question_spans

    context = "Context sentence about the lease and its notice terms. " * 200
    opening = "Hello. What is clause 4? " + context
    assert [opening[a:b] for a, b in question_spans(opening)] == ["Hello. What is clause 4?"]
    ending = "What is clause 2? " + context + "So what is clause 4?"
    assert [ending[a:b] for a, b in question_spans(ending)] == ["So what is clause 4?"]
    body = {"model": "gpt-4o", "max_tokens": 100, "messages": [{"role": "user", "content": opening}]}
    kept = fit(body, model="gpt-4o", max_context_tokens=1500).request["messages"][-1]["content"]
    assert kept.startswith("Hello. What is clause 4?")


def test_a_custom_tool_call_is_counted_and_stays_with_its_result() -> None:
    tools = [
        {
            "type": "custom",
            "custom": {"name": "run_sql", "description": "raw SQL", "format": {"type": "text"}},
        }
    ]
    messages: list[dict[str, Any]] = []
    for n in range(15):
        messages += [
            {"role": "user", "content": f"question {n} " + "lorem ipsum " * 300},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"call_{n}", "type": "custom", "custom": {"name": "run_sql", "input": "SELECT 1"}}
                ],
            },
            {"role": "tool", "tool_call_id": f"call_{n}", "content": f"rows {n}"},
        ]
    messages.append({"role": "user", "content": "And now?"})
    body = {"model": "gpt-5", "tools": tools, "messages": messages}
    counted = count(body, model="gpt-5")
    assert any("custom tool run_sql" in p for p in counted["estimated_parts"])
    result = fit(body, model="gpt-5", max_context_tokens=6000)
    sent = result.request["messages"]
    calls = [m["tool_calls"][0]["id"] for m in sent if m.get("tool_calls")]
    results = [m["tool_call_id"] for m in sent if m.get("role") == "tool"]
    assert calls == results and 0 < len(calls) < 15
    with pytest.raises(InvalidRequestError, match=r"tool_calls\[0\]: a custom tool call needs"):
        count(
            {"messages": [{"role": "assistant", "tool_calls": [{"id": "x", "type": "custom"}]}]},
            model="gpt-5",
        )


def _paragraphs(n: int) -> list[str]:
    return [f"Paragraph {i}: shipment {i} arrived late on day {i} by the carrier log. " * 3 for i in range(n)]


@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-5"])
def test_a_message_of_many_text_parts_keeps_about_its_budget(model: str) -> None:
    paragraphs = _paragraphs(20)
    parts = {
        "model": model,
        "messages": [{"role": "user", "content": [{"type": "text", "text": p} for p in paragraphs]}],
    }
    need = count(parts, model=model)["tokens"]
    result = fit(parts, model=model, max_context_tokens=need // 2, reserve_output_tokens=0)
    assert result.report.tokens_after >= 0.8 * result.report.available_tokens  # not "[…]" in every part
    kept = [p["text"] for p in result.request["messages"][0]["content"]]
    assert kept[-1] == paragraphs[-1]  # the last part is where the message ends
    assert sum(text in paragraphs for text in kept) >= 5  # whole parts, not slivers of each


def test_an_older_message_of_many_parts_keeps_the_part_the_question_asks_about() -> None:
    paragraphs = _paragraphs(20)
    messages = [
        {"role": "user", "content": [{"type": "text", "text": p} for p in paragraphs]},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Which shipment arrived on day 7?"},
    ]
    need = count({"messages": messages}, model="gpt-4o")["tokens"]
    result = fit(
        {"messages": messages}, model="gpt-4o", max_context_tokens=need // 2, reserve_output_tokens=0
    )
    kept = [p["text"] for p in result.request["messages"][0]["content"]]
    assert paragraphs[7] in kept and result.report.tokens_after >= 0.8 * result.report.available_tokens


def test_thousands_of_tiny_parts_keep_whole_parts_up_to_the_budget() -> None:
    parts = [{"type": "text", "text": f"part {i} of the pasted log. "} for i in range(3000)]
    body = {"messages": [{"role": "user", "content": parts}]}
    need = count(body, model="gpt-4o")["tokens"]
    result = fit(body, model="gpt-4o", max_context_tokens=need // 2, reserve_output_tokens=0)
    kept = [p["text"] for p in result.request["messages"][0]["content"] if p["text"] != "[…]"]
    assert result.report.tokens_after >= 0.9 * result.report.available_tokens
    assert all(text.startswith("part ") and text.endswith("log. ") for text in kept)  # whole ones


def test_a_run_of_parts_cut_to_nothing_leaves_one_marker() -> None:
    # A marker a part: 400 short parts cost 400 tokens of markers whatever the budget, and a
    # budget of 150 was refused as too large.
    parts = [{"type": "text", "text": f"part {i} of the record"} for i in range(400)]
    body = {"messages": [{"role": "user", "content": parts}]}
    result = fit(body, model="gpt-4o", max_context_tokens=150, reserve_output_tokens=0)
    kept = [p["text"] for p in result.request["messages"][0]["content"]]
    # the first part is kept as the message's instruction (no part asks), then one marker
    assert kept[:2] == ["part 0 of the record", "[…]"] and kept.count("[…]") == 1
    assert kept[-1] == "part 399 of the record"
    assert len(kept) > 10 and result.report.tokens_after <= 150


def test_parts_of_one_long_sentence_each_keep_words_of_their_own() -> None:
    parts = [f"Item {i}: " + " ".join(f"w{j}x{i}" for j in range(60)) for i in range(20)]
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": p} for p in parts]}]}
    need = count(body, model="gpt-4o")["tokens"]
    result = fit(body, model="gpt-4o", max_context_tokens=int(need * 0.6), reserve_output_tokens=0)
    kept = [p["text"] for p in result.request["messages"][0]["content"]]
    cut = [text for text in kept if text not in parts and text != "[…]"]
    assert len(cut) >= 10  # every part keeps words of its own, not a marker alone
    for text in cut:
        original = parts[int(text.split(":")[0].removeprefix("Item "))]
        assert all(piece.strip() in original for piece in text.split("[…]"))  # verbatim pieces


@pytest.mark.parametrize(
    "body",
    [
        {
            "messages": [
                {"role": "user", "content": "Which shipment arrived late on day 1234? Give its number."}
            ]
        },
        {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "Which shipment was late?"}]},
        {"input": "Which shipment arrived late on day 1234? Give its number."},
    ],
)
def test_a_question_that_cannot_fit_whole_is_an_error_naming_it(body: dict[str, Any]) -> None:
    with pytest.raises(BudgetExceeded, match=r"\(its question\)"):
        fit(body, model="gpt-4o", max_context_tokens=10, reserve_output_tokens=0)
    emptied = fit(body, model="gpt-4o", max_context_tokens=10, reserve_output_tokens=0, on_overflow="empty")
    assert any("question needs" in w for w in emptied.report.warnings)


def test_a_message_that_asks_nothing_is_still_cut_from_its_end() -> None:
    body = {
        "messages": [{"role": "user", "content": "Summarise the log below.\n\n" + "the log went on. " * 400}]
    }
    result = fit(body, model="gpt-4o", max_context_tokens=200, reserve_output_tokens=0)
    assert result.report.tokens_after <= 200 and result.request["messages"][0]["content"]


def test_a_part_too_long_for_any_passage_keeps_its_head_cut_at_a_word() -> None:
    # one sentence of 250 characters a part: no passage of it is as small as each part's room
    parts = [f"Item {i}: " + " ".join(f"w{j}x{i}" for j in range(42)) for i in range(10)]
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": p} for p in parts]}]}
    need = count(body, model="gpt-4o")["tokens"]
    result = fit(body, model="gpt-4o", max_context_tokens=need // 2, reserve_output_tokens=0)
    kept = [p["text"] for p in result.request["messages"][0]["content"]]
    assert kept[0] == parts[0]  # no part asks: the first, short, is kept whole as the instruction
    for original, text in zip(parts[1:-1], kept[1:-1], strict=True):
        head = text.removesuffix("\n[…]")
        word = head.rstrip()  # a passage cut hard keeps the space it was cut after
        assert text.endswith("[…]") and original.startswith(head) and original[len(word)] == " "
    assert result.report.tokens_after >= 0.9 * result.report.available_tokens


def test_a_tool_result_whose_only_space_is_near_its_start_keeps_its_room() -> None:
    """ "Result: <a base64 screenshot>" was cut back to its one space, "Result:", leaving most of
    its room unused: a cut ends after a word only when that keeps most of what fits."""
    blob = "Result: " + "".join(chr(65 + (i * 7919) % 26) for i in range(60_000))
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "When was the notice given?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": blob}]},
        ],
    }
    # a room under the smallest passage: the result keeps its head
    result = fit(body, model="claude-sonnet-4-5", max_context_tokens=60, reserve_output_tokens=0)
    kept = result.request["messages"][-1]["content"][0]["content"]
    assert kept.startswith("Result: ") and len(kept.removesuffix("\n[…]")) > 30
    assert result.report.tokens_after >= 0.8 * result.report.available_tokens


def _agent_history() -> dict[str, Any]:
    """Eight turns of three tool calls each, then a final turn whose two results are long."""
    rng = random.Random(1)  # seeded: the same text in every run
    words = "the witness said notice was given on march third by letter to the buyer".split()  # noqa: SIM905

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    for t in range(8):
        calls = [
            {"id": f"c{t}{k}", "type": "function", "function": {"name": "s", "arguments": "{}"}}
            for k in range(3)
        ]
        messages += [
            {"role": "user", "content": f"Turn {t}: {text(300)} What happened?"},
            {"role": "assistant", "content": None, "tool_calls": calls},
        ]
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": text(800)} for c in calls]
        messages.append({"role": "assistant", "content": text(200)})
    final = [
        {"id": f"f{k}", "type": "function", "function": {"name": "s", "arguments": "{}"}} for k in range(2)
    ]
    messages += [
        {"role": "user", "content": "Final: when was notice given?"},
        {"role": "assistant", "content": "Let me search.", "tool_calls": final},
    ]
    messages += [{"role": "tool", "tool_call_id": c["id"], "content": text(3000)} for c in final]
    return {"messages": messages}


@pytest.mark.parametrize("window", [1500, 2000, 2500, 3000, 4000, 6000])
def test_older_messages_never_vanish_without_the_placeholder(window: int) -> None:
    result = fit(_agent_history(), model="gpt-4o", max_context_tokens=window, reserve_output_tokens=0)
    summarized = [
        i for i in result.report.items if i.action in ("summarized", "dropped") and i.component == "history"
    ]
    sent = [m.get("content") for m in result.request["messages"]]
    assert summarized and any(
        isinstance(c, str) and c.startswith("[Earlier conversation summarized") for c in sent
    )
    assert result.report.tokens_after <= window


def test_an_error_result_is_never_cut_to_empty_content() -> None:
    """The Messages API refuses an `is_error` tool result with empty content: cut to nothing it
    keeps the gap marker, as a string or as a list emptied of its text blocks."""
    from ctxbudget.formats.chat import with_content_text

    listed = {
        "type": "tool_result",
        "tool_use_id": "t2",
        "is_error": True,
        "content": [{"type": "text", "text": "x"}],
    }
    message = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": "denied " * 50},
            listed,
        ],
    }
    cut = with_content_text(message, "", ("", ""))
    assert [block["content"] for block in cut["content"]] == ["[…]", "[…]"]
    fine = {**message, "content": [{**message["content"][0], "is_error": False}]}
    assert with_content_text(fine, "", ("",))["content"][0]["content"] == ""  # may be empty: no marker
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    body = {
        "messages": [
            {"role": "user", "content": "Open both configs: what port does the app use?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "read", "input": {}},
                    {"type": "tool_use", "id": "t2", "name": "shot", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": "denied. " * 600,
                    },
                    {"type": "tool_result", "tool_use_id": "t2", "content": [image]},
                ],
            },
        ]
    }
    for window in range(300, 2_000, 50):
        try:
            sent = fit(
                body, model="claude-sonnet-4-5", max_context_tokens=window, reserve_output_tokens=0
            ).request
        except BudgetExceeded:
            continue
        results = [b for m in sent["messages"] if isinstance(m["content"], list) for b in m["content"]]
        assert all(b.get("content") not in ("", []) for b in results if b.get("is_error")), window


def test_a_prefill_cut_keeps_its_end() -> None:
    """The last message, an assistant's after the question, is a prefill the model continues from
    its last word: cut, it keeps its end (it kept the passages matching the question, ending "[…]")."""
    plan = "".join(f"Step {i}: read the config file carefully and note every port.\n\n" for i in range(120))
    body = {
        "messages": [
            {"role": "user", "content": "Which port does the service use? Think step by step."},
            {"role": "assistant", "content": plan + "Having checked all of that, my conclusion is that"},
        ]
    }
    for window in (400, 800, 1_600):
        result = fit(body, model="claude-sonnet-4-5", max_context_tokens=window, reserve_output_tokens=100)
        prefill = result.request["messages"][-1]["content"]
        assert prefill.endswith("my conclusion is that") and prefill.startswith("[…]"), window
        assert result.report.tokens_after <= window - 100


def test_a_result_whose_call_was_left_out_keeps_its_image_and_error() -> None:
    """The query turn answers a call whose assistant turn is summarized away: the result becomes
    blocks of the turn (the API refuses it unpaired), its screenshot and its error kept."""
    header = struct.pack(">IIBBBBB", 400, 300, 8, 2, 0, 0, 0)  # a 400 x 300 PNG: about 160 tokens
    png = (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", 13)
        + b"IHDR"
        + header
        + struct.pack(">I", zlib.crc32(b"IHDR" + header))
    )
    data = base64.b64encode(png).decode()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    body = {
        "messages": [
            {"role": "user", "content": "Check the login page against the spec."},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "I will take a screenshot of the login page. " * 200},
                    {"type": "tool_use", "id": "shot", "name": "screenshot", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "shot",
                        "is_error": True,
                        "cache_control": {"type": "ephemeral"},
                        "content": [{"type": "text", "text": "Rendered with warnings."}, image],
                    },
                    {"type": "text", "text": "Is the button in this screenshot the right colour?"},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "css", "name": "read_css", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "css", "content": "b { color: red } " * 300}
                ],
            },
        ]
    }
    sent = fit(body, model="claude-sonnet-4-5", max_context_tokens=1_000, reserve_output_tokens=200).request
    turn = next(m for m in sent["messages"] if "right colour" in json.dumps(m))
    texts = [b.get("text", "") for b in turn["content"]]
    at = next(i for i, t in enumerate(texts) if t.startswith("[result of tool call shot, an error]"))
    assert texts[at].startswith("[result of tool call shot, an error]\nRendered with warnings.")
    assert turn["content"][at + 1] == {**image, "cache_control": {"type": "ephemeral"}}
    # where it stood: after the task (the turn it merged into), before the question it came with
    assert "Check the login page" in texts[0] and "right colour" in texts[-1]
    assert not any(b.get("type") == "tool_result" for b in turn["content"])


def test_a_harness_note_beside_tool_results_is_not_the_users_question() -> None:
    """Claude Code adds "<system-reminder>...</system-reminder>" text blocks to the turns that
    return tool results: those turns do not ask, so the user's question stays the query (it was
    summarized away as history); a turn with no result asks whatever its text looks like."""
    out = "file contents line; nothing interesting here. " * 400
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Set up the repo."},
        {"role": "assistant", "content": "Done. " * 200},
        {"role": "user", "content": "Now: why does `make test` fail on the parser module?"},
    ]
    for k in range(5):
        call = {"type": "tool_use", "id": f"t{k}", "name": "read", "input": {"n": k}}
        note = {
            "type": "text",
            "text": '<system-reminder kind="todo">The TODO list is empty.</system-reminder>',
        }
        messages += [
            {"role": "assistant", "content": [{"type": "text", "text": f"Reading file {k}."}, call]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{k}", "content": out}, note],
            },
        ]
    report = fit({"messages": messages}, model="claude-sonnet-4-5", max_context_tokens=4_000).report
    assert [i.path for i in report.items if i.component == "query"] == ["$.messages[2]"]
    tagged = [
        *messages,
        {"role": "user", "content": [{"type": "text", "text": "<task>Fix the parser.</task>"}]},
    ]
    report = fit({"messages": tagged}, model="claude-sonnet-4-5", max_context_tokens=8_000).report
    assert [i.path for i in report.items if i.component == "query"] == [f"$.messages[{len(tagged) - 1}]"]


@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-5"])
def test_an_instruction_before_pasted_text_is_kept(model: str) -> None:
    """With no paragraph asking, the message's short first paragraph is its instruction for what
    was pasted after it: kept whole with the last paragraph, at any budget the message is cut to."""
    lines = [
        f"2024-05-0{n % 9 + 1} node-{n % 40} ERROR disk full on /data{n % 9}; retrying in {n % 60}s"
        for n in range(600)
    ]
    instruction = "Summarize the following incident log in three bullet points for the on-call handover."
    text = instruction + "\n\n" + "\n\n".join(lines)
    assert [text[a:b] for a, b in question_spans(text)] == [instruction, lines[-1]]
    body = {"messages": [{"role": "user", "content": text}]}
    for window in (600, 2_000, 8_000):
        sent = fit(body, model=model, max_context_tokens=window, reserve_output_tokens=200).request
        content = json.dumps(sent["messages"])
        assert json.dumps(instruction)[1:-1] in content and json.dumps(lines[-1])[1:-1] in content, window
    paragraph = "Some pasted paragraph that is long. " * 20  # over 500 characters: not an instruction
    longer = paragraph + text
    assert [longer[a:b] for a, b in question_spans(longer)] == [lines[-1]]


def test_the_last_paragraph_of_a_query_that_does_not_ask_is_kept_before_its_first() -> None:
    """A query that does not ask keeps its short first paragraph and its last one (usually the
    instruction): when they do not fit together, the last is kept first and the head of the first
    takes the room left. The first paragraph alone was kept at some budgets, the instruction
    dropped, and at a larger budget kept again."""
    words = [
        " ".join(f"{w}{n}" for n in range(k)) + "." for w, k in (("log", 40), ("entry", 60), ("line", 30))
    ]
    instruction = "Please summarize the log above in three short bullet points for the team"
    text = "\n\n".join([*words, instruction])
    assert [text[a:b] for a, b in question_spans(text)] == [words[0], instruction]
    body = {"messages": [{"role": "user", "content": text}]}
    shortest = 0
    for window in range(24, 140):
        content = fit(body, model="gpt-4o", max_context_tokens=window, reserve_output_tokens=0).request[
            "messages"
        ][0]["content"]
        assert content.endswith("\n" + instruction), window
        assert all(part.strip("\n") in text for part in content.split(GAP.strip())), window
        assert len(content) >= shortest, window  # more room never keeps less
        shortest = len(content)


def test_an_instruction_before_text_with_no_sentence_end_is_kept() -> None:
    """Minified JSON has no closing paragraph or sentence short enough to be a question: the
    instruction before it is kept all the same."""
    instruction = "List the ids of the failed orders in this API response."
    pasted = json.dumps(
        [{"id": n, "status": "failed" if n % 7 == 0 else "ok", "note": "x" * 40} for n in range(800)]
    )
    text = instruction + "\n\n" + pasted
    assert [text[a:b] for a, b in question_spans(text)] == [instruction]
    sent = fit(
        {"messages": [{"role": "user", "content": text}]}, model="gpt-4o", max_context_tokens=4_000
    ).request
    assert sent["messages"][0]["content"].startswith(instruction + "\n")


def test_parallel_tool_results_sharing_a_small_room_are_none_emptied() -> None:
    # An older tool group cut into the room left (at least 128 tokens) shares it among its
    # results: a level under a passage kept nothing of the largest ("" reads as a tool that
    # returned nothing) while the smallest kept the rest.
    n_calls = 5
    calls = [
        {"id": f"c{n}", "type": "function", "function": {"name": "search", "arguments": "{}"}}
        for n in range(n_calls)
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find the notice records."}]
    messages.append({"role": "assistant", "content": None, "tool_calls": calls})
    messages += [
        {
            "role": "tool",
            "tool_call_id": f"c{n}",
            "content": " ".join(f"record {n} item {i} sent" for i in range(60 + 40 * n)),
        }
        for n in range(n_calls)
    ]
    messages += [
        {"role": "assistant", "content": "Searching again."},
        {"role": "user", "content": "recap " * 150 + "\n\nWhen was the notice sent?"},
    ]
    cut, emptied = 0, []
    for window in range(300, 420, 4):
        body = {"model": "gpt-4o", "messages": messages}
        result = fit(body, model="gpt-4o", max_context_tokens=window, reserve_output_tokens=0)
        sent = [m for m in result.request["messages"] if m.get("role") == "tool"]
        cut += bool(sent)
        emptied += [(window, m["tool_call_id"]) for m in sent if not m["content"].strip()]
    assert cut and not emptied


def test_a_server_tool_call_and_its_result_in_the_next_message_stay_together() -> None:
    # A long turn that paused (pause_turn) and was sent back as two assistant messages: the
    # search's call ends the first, its result opens the second. Dropping the first kept a result
    # with no call, which the Messages API refuses.
    call = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "cdn outages"},
    }
    found = {
        "type": "web_search_result",
        "url": "https://example.com/a",
        "title": "Outages",
        "encrypted_content": "x" * 400,
    }
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [found]}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Research the outage history. " + WORDS},
        {"role": "assistant", "content": [{"type": "text", "text": "Searching. " + WORDS * 3}, call]},
        {"role": "assistant", "content": [result, {"type": "text", "text": "Found: " + WORDS * 2}]},
    ]
    for n in range(4):
        messages += [
            {"role": "user", "content": f"Follow-up {n}. " + WORDS},
            {"role": "assistant", "content": WORDS * 2},
        ]
    messages.append({"role": "user", "content": "Which outage was the longest?"})
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages}
    total = count(body, model="claude-sonnet-4-5")["tokens"]
    for window in range(total // 3, total, max(1, total // 12)):
        sent = fit(
            body, model="claude-sonnet-4-5", max_context_tokens=window, reserve_output_tokens=0
        ).request
        for message in sent["messages"]:
            blocks = message["content"] if isinstance(message["content"], list) else []
            uses = {b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "server_tool_use"}
            results = {
                b.get("tool_use_id")
                for b in blocks
                if isinstance(b, dict) and b.get("type") == "web_search_tool_result"
            }
            assert results <= uses, (window, message)
        check_anthropic_rules(sent)


def test_interleaved_thinking_keeps_its_place_when_two_assistant_messages_merge() -> None:
    think = [{"type": "thinking", "thinking": f"Plan {n}.", "signature": f"sig{n}"} for n in range(2)]
    call = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
    use = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}
    loop: list[dict[str, Any]] = [
        {"role": "user", "content": "Look it up and check the record."},
        {"role": "assistant", "content": [think[0], call]},
        {"role": "assistant", "content": [result, think[1], {"type": "text", "text": "Checking."}, use]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
    ]
    history = [{"role": r, "content": WORDS * 3} for _ in range(6) for r in ("user", "assistant")]
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 2000,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [*history, *loop],
    }
    sent = fit(body, model="claude-sonnet-4-5", max_context_tokens=3000, reserve_output_tokens=0).request
    merged = [m for m in sent["messages"] if m["role"] == "assistant" and isinstance(m["content"], list)][-1]
    kinds = [b["type"] for b in merged["content"]]
    # as the API merges the two: each block where the model wrote it, thinking still first
    assert kinds == ["thinking", "server_tool_use", "web_search_tool_result", "thinking", "text", "tool_use"]


def test_results_whose_call_was_cut_stay_after_the_task_and_before_their_question() -> None:
    """Merging user turns puts tool results first, as the API combines them; results whose call
    was cut (made text) went first too, ahead of the task, the summary note and the question."""
    filler = "alpha beta gamma delta epsilon zeta eta theta. " * 300
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Task: fix the failing test in the repo."}]
    for turn in range(6):
        given = {"diff": filler * 4} if turn == 4 else {}  # the question's calls: too large to keep
        calls = [{"type": "tool_use", "id": f"t{turn}_{k}", "name": "read", "input": given} for k in range(3)]
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"reply {turn}"}, *calls]})
        results: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": f"t{turn}_{k}", "content": filler * (1 + k)}
            for k in range(3)
        ]
        if turn == 4:
            results.append({"type": "text", "text": "Also: what is the status of the build?"})
        messages.append({"role": "user", "content": results})
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "system": "You are an agent.",
        "messages": messages,
    }
    sent = fit(body, model="claude-sonnet-4-5", max_context_tokens=30_000).request["messages"]
    first = [b.get("text", b.get("type")) for b in sent[0]["content"]]
    assert first[0].startswith("Task:") and first[-1].startswith("Also:"), first
    assert any(t.startswith("[result of tool call t4_") for t in first[1:-1]), first


def _agent_after_question(api: str, steps: int) -> dict[str, Any]:
    """An earlier exchange, the question, then ``steps`` tool calls with their results."""
    result = "row data, checked " * 150
    ask = "Now, what is the status of all ten items?"
    if api == "anthropic":
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "Earlier task: say hi."},
            {"role": "assistant", "content": "hi"},
            {"role": "user", "content": ask},
        ]
        for n in range(steps):
            messages += [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": f"c{n}", "name": "look", "input": {"n": n}}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": f"c{n}", "content": f"{n}: {result}"}],
                },
            ]
        return {"model": "claude-sonnet-4-5", "max_tokens": 300, "messages": messages}
    messages = [
        {"role": "system", "content": "Agent."},
        {"role": "user", "content": "Earlier task: say hi."},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": ask},
    ]
    for n in range(steps):
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "look", "arguments": json.dumps({"n": n})},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": f"{n}: {result}"},
        ]
    return {"model": "gpt-4o", "max_tokens": 300, "messages": messages}


def _pieces(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each message's texts and tool calls in order, as (role, text or "CALL")."""
    out = []
    for message in messages:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        out += [(message["role"], b["text"]) for b in blocks if b.get("type") == "text" and b["text"]]
        calls = [b for b in blocks if b.get("type") == "tool_use"] + (message.get("tool_calls") or [])
        out += [(message["role"], "CALL")] * len(calls)
    return out


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_tool_steps_dropped_after_the_question_are_noted_after_it(api: str) -> None:
    # Steps c0..c7 taken after the question were summarized with the earlier answer by one
    # placeholder before the question: the model read its first step as c8, as if it had not yet
    # looked anything up for this question.
    body = _agent_after_question(api, 10)
    result = fit(body, model=body["model"], max_context_tokens=3000)
    pieces = _pieces(result.request["messages"])
    ask = next(n for n, (_, text) in enumerate(pieces) if text.startswith("Now, what is the status"))
    notes = {n: text for n, (_, text) in enumerate(pieces) if text.startswith("[Earlier conversation")}
    summarized = sum(i.action == "summarized" for i in result.report.items)
    assert notes == {
        ask - 1: "[Earlier conversation summarized: 1 messages omitted]",  # the earlier answer
        ask + 1: f"[Earlier conversation summarized: {summarized - 1} messages omitted]",  # the first steps
    }
    assert summarized > 3
    assert pieces[ask + 1][0] == "assistant" and pieces[ask + 2] == ("assistant", "CALL")
    if api == "anthropic":
        check_anthropic_rules(result.request)


def test_the_placeholder_is_priced_as_the_plain_message_it_is() -> None:
    # Every history message carried server-tool results or documents, and the least framed one
    # priced the placeholder (860 tokens): the newest step's texts were cut to nothing for room
    # the placeholder then did not get either, with 560 tokens left unused.
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Research the topic. What is the latest status?"}
    ]
    for n in range(12):
        found = {
            "type": "web_search_result",
            "url": f"https://example.com/{n}",
            "title": f"R{n}",
            "encrypted_content": "EnC" * 300,
        }
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Searching {n}."},
                    {
                        "type": "server_tool_use",
                        "id": f"srvtoolu_{n}",
                        "name": "web_search",
                        "input": {"query": f"t {n}"},
                    },
                    {"type": "web_search_tool_result", "tool_use_id": f"srvtoolu_{n}", "content": [found]},
                    {"type": "text", "text": f"Found things {n}. " * 30},
                    {"type": "tool_use", "id": f"toolu_{n}", "name": "lookup", "input": {"n": n}},
                ],
            }
        )
        document = {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "Body. " * 200},
        }
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{n}",
                        "content": [{"type": "text", "text": "Passage ✓. " * 200}, document],
                    }
                ],
            }
        )
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1000, "messages": messages}
    result = fit(body, model="claude-sonnet-4-5", max_context_tokens=4000)
    newest = result.request["messages"][1]["content"]
    texts = [b["text"] for b in newest if b["type"] == "text"]
    assert texts[0].startswith("[Earlier conversation summarized: 22 messages omitted]")
    assert texts[1:] == ["Searching 11.", "Found things 11. " * 30]  # the step's own texts, whole
    assert result.report.tokens_after <= result.report.available_tokens
    check_anthropic_rules(result.request)


def _earlier_then_steps(api: str) -> dict[str, Any]:
    """Three earlier exchanges, the question, then two tool steps with long results."""
    earlier = [
        m
        for k in range(3)
        for m in (
            {"role": "user", "content": f"Earlier task {k}: say hi. " * 20},
            {"role": "assistant", "content": f"hi {k} " * 20},
        )
    ]
    ask = {"role": "user", "content": "Now, what is the status of all ten items?"}
    result = "row data, checked " * 150
    if api == "anthropic":
        steps = [
            m
            for n in range(2)
            for m in (
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": f"c{n}", "name": "look", "input": {"n": n}}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": f"c{n}", "content": f"{n}: {result}"}],
                },
            )
        ]
        return {
            "model": "claude-sonnet-4-5",
            "max_tokens": 300,
            "system": "Agent.",
            "messages": [*earlier, ask, *steps],
        }
    call = {"type": "function", "function": {"name": "look", "arguments": "{}"}}
    steps = [
        m
        for n in range(2)
        for m in (
            {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{n}", **call}]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": f"{n}: {result}"},
        )
    ]
    system = {"role": "system", "content": "Agent."}
    return {"model": "gpt-4o", "max_tokens": 300, "messages": [system, *earlier, ask, *steps]}


@pytest.mark.parametrize(("api", "budgets"), [("openai", range(951, 975)), ("anthropic", range(1142, 1160))])
def test_the_room_of_both_placeholders_is_held_or_one_kept(api: str, budgets: range) -> None:
    # The selection held room for one placeholder where two were written either side of the
    # question: the verified plan, a placeholder's width smaller, had room for none and dropped
    # every earlier message without a trace (a band one placeholder wide; below it there is room
    # for no placeholder at all, as before).
    body = _earlier_then_steps(api)
    for budget in budgets:
        result = fit(body, model=body["model"], max_context_tokens=budget)
        gone = [i for i in result.report.items if i.action in ("dropped", "summarized")]
        notes = json.dumps(result.request).count("[Earlier conversation summarized")
        no_room = all(i.reason.startswith("older message; no room") for i in gone)
        assert notes or not gone, (budget, no_room)


def test_a_query_kept_by_its_end_begins_at_a_word() -> None:
    """A query with no ask, cut to its end, keeps whole words: "I really like Hopelessly Devoted
    to You ..." was kept as "lessly Devoted to You ..." (the end's cut fell inside a word)."""
    query = "I really like Hopelessly Devoted to You and Let's Get Physical"
    body = {
        "messages": [
            {
                "role": "system",
                "content": "You are a careful, helpful assistant. Answer honestly and concisely.",
            },
            {"role": "user", "content": "What are some good songs by Olivia Newton-John?"},
            {"role": "assistant", "content": "Some of her best known songs are Physical and Xanadu."},
            {"role": "user", "content": query},
        ]
    }
    split = {"system": 10, "query": 15, "documents": 50, "history": 25}
    fitted = fit(body, model="gpt-4o", max_context_tokens=30, budget=split).request
    kept = fitted["messages"][-1]["content"].removeprefix("[…]\n")
    assert kept != query and query.endswith(kept)
    assert query[len(query) - len(kept) - 1] == " ", kept


def _parallel_calls_loop(seed: int, steps: int) -> dict[str, Any]:
    """An agent's Claude tool loop: one to three parallel calls a step, results of 5 to 200 words'
    worth, and now and then a follow-up asked beside the results (the query then stands mid-loop)."""
    pick = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Read the whole record please. " + "task detail " * pick.randint(5, 50)}
    ]
    for n in range(steps):
        ids = [f"t{n}_{j}" for j in range(pick.randint(1, 3))]
        text = {"type": "text", "text": f"step {n} " + "thinking " * pick.randint(0, 60)}
        uses = [{"type": "tool_use", "id": i, "name": "read", "input": {"page": n}} for i in ids]
        results = [
            {"type": "tool_result", "tool_use_id": i, "content": "page text " * pick.randint(5, 200)}
            for i in ids
        ]
        messages += [{"role": "assistant", "content": [text, *uses]}, {"role": "user", "content": results}]
        if pick.random() < 0.2:
            messages[-1]["content"].append({"type": "text", "text": "also consider this"})
    schema = {"type": "object", "properties": {"page": {"type": "integer"}}}
    tool = {"name": "read", "description": "read a page", "input_schema": schema}
    return {"max_tokens": 300, "system": "You are careful.", "tools": [tool], "messages": messages}


def test_a_budget_between_two_that_fit_is_not_refused() -> None:
    """A plan the verification's take-backs all left as it was (they went to history that had
    slack: a unit dropped whole, not cut) ran out of rounds over by a token or two: a 20-step
    loop fitted at 1,790 and 1,810 tokens was refused at 1,800 ("needs 1,501 tokens but only
    1,499 are available"), a gateway's agent refused mid-session."""
    body = _parallel_calls_loop(3, 20)
    for budget in (1790, 1800, 1810, 2620, 2630, 2640):
        report = fit(body, model="claude-sonnet-4-5", max_context_tokens=budget).report
        assert report.tokens_after <= report.available_tokens


def test_a_query_that_does_not_ask_gives_way_to_boundary_effects() -> None:
    """The claim of a query whose paragraphs do not ask (no ``?``, no label) was held whole
    through verification as an asking question's is: when its cut's markers went over, no round
    could take anything back, and a request that fits at smaller budgets was refused at larger
    ones, over by a token or two ("needs 22 tokens but only 20 are available")."""
    words = lambda n, w: " ".join(f"{w}{i}" for i in range(n)) + "."  # noqa: E731
    query = "\n\n".join(
        [
            words(40, "log"),
            words(60, "entry"),
            words(30, "line"),
            "Please summarize the log above for the team",
        ]
    )
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": words(300, "old")},
            {"role": "assistant", "content": words(300, "ans")},
            {"role": "user", "content": query},
        ],
    }
    for budget in range(20, 130):
        report = fit(body, model="gpt-4o", max_context_tokens=budget, reserve_output_tokens=0).report
        assert report.tokens_after <= report.available_tokens


def test_a_query_that_does_not_ask_is_not_cut_to_a_marker_below_the_edge() -> None:
    """Below the edge where the bisection gives way, a pool smaller than a query that does not ask
    cut it to a marker alone and that was sent ("[…]" at 389-391 tokens), while the bisection
    refused the marker at 392, and 393 kept "Smith lorem": refused at a budget between two that
    fit. A query is kept in part or refused, at every budget."""
    words = lambda n, w: " ".join(f"{w}{i}" for i in range(n)) + "."  # noqa: E731
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": words(30, "old")},
            {"role": "assistant", "content": words(30, "ans")},
            {
                "role": "user",
                "content": words(5, "entry") + "\n\nList the dates mentioned record Smith lorem",
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t0", "name": "lookup", "input": {"q": "x"}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t0", "content": words(50, "res")}],
            },
        ],
    }
    fitted = False
    for budget in range(380, 420):
        try:
            sent = fit(body, model="claude-sonnet-4-5", max_context_tokens=budget, reserve_output_tokens=0)
        except BudgetExceeded:
            assert not fitted, budget  # refused at a budget above one that fits
            continue
        fitted = True
        assert sent.request["messages"][-3]["content"].replace("[…]", "").strip(), budget
