from __future__ import annotations

import copy
import json
import pickle
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxbudget
from ctxbudget import BudgetExceeded, ConfigError, InvalidRequestError, count, fit
from ctxbudget.fitting._budget import parse_budget_spec
from ctxbudget.trim.bm25 import bm25_scores, terms
from ctxbudget.trim.sentences import sentence_ends

from .conftest import question

MODEL = "gpt-4o"
SENT = "The witness described the shipment in detail. "


def _fits(result_request: dict, window: int, reserve: int, fmt: str | None = None) -> bool:
    return count(result_request, model=MODEL, format=fmt)["tokens"] <= window - reserve


def test_a_request_that_fits_passes_through_byte_identical() -> None:
    body = question(
        role="Be brief.",
        questions=[{"text": "Hi?", "embedding": [1.0]}],
        documents=[{"page_content": "b", "score": 0.1}, {"page_content": "a", "score": 0.9}],
    )
    result = fit(body, model=MODEL)
    assert json.dumps(result.request) == json.dumps(body)
    assert result.report.passed_through is True
    assert result.report.tokens_before == result.report.tokens_after


def test_fitted_request_is_within_the_window_and_report_is_complete() -> None:
    body = question(
        role=SENT * 200,
        questions=[{"text": "What happened to the shipment?"}],
        documents=[{"page_content": SENT * (10 + i), "score": i / 10} for i in range(10)],
        history=[
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}. " + SENT * 5}
            for i in range(20)
        ],
    )
    result = fit(body, model=MODEL, max_context_tokens=3000, reserve_output_tokens=500)
    assert _fits(result.request, 3000, 500)
    report = result.report.to_dict()
    for key in [
        "model",
        "encoding",
        "exact",
        "context_window",
        "reserve_output_tokens",
        "overhead_tokens",
        "budgets",
        "tokens_before",
        "tokens_after",
        "tokens_saved",
        "passed_through",
        "components_truncated",
        "warnings",
        "items",
    ]:
        assert key in report
    assert report["tokens_after"] == count(result.request, model=MODEL)["tokens"]
    assert {i["action"] for i in report["items"]} <= {"kept", "truncated", "dropped", "summarized"}
    assert len(report["items"]) == 1 + 1 + 10 + 20


def test_documents_ranked_by_score_greedy_skipping_and_deduplicated() -> None:
    big = "Long. " * 400
    docs = [
        {"page_content": "low", "score": 0.1, "metadata": {"id": 1}},
        {"page_content": big, "score": 0.99, "metadata": {"id": 2}},
        {"page_content": "high", "score": 0.9, "metadata": {"id": 3}},
        {"page_content": "high", "score": 0.8, "metadata": {"id": 4}},
        {"page_content": "unscored"},
    ]
    body = question(questions=[{"text": "q"}], documents=docs, history=[])
    result = fit(
        body,
        model=MODEL,
        max_context_tokens=300,
        reserve_output_tokens=0,
        budget={"system": 0, "query": 10, "documents": 90, "history": 0},
    )
    ids = [d.get("metadata", {}).get("id") for d in result.request["documents"]]
    assert ids == [3, 1, None]  # big skipped (does not fit), duplicate dropped, unscored last
    reasons = {
        i["index"]: i["reason"] for i in result.report.to_dict()["items"] if i["component"] == "documents"
    }
    assert "duplicate" in reasons[3]
    asc = fit(
        body,
        model=MODEL,
        max_context_tokens=300,
        reserve_output_tokens=0,
        score_order="asc",
        budget={"system": 0, "query": 10, "documents": 90, "history": 0},
    )
    assert next(d.get("metadata", {}).get("id") for d in asc.request["documents"]) == 1
    original = fit(
        body,
        model=MODEL,
        max_context_tokens=300,
        reserve_output_tokens=0,
        document_order="original",
        budget={"system": 0, "query": 10, "documents": 90, "history": 0},
    )
    assert [d.get("metadata", {}).get("id") for d in original.request["documents"]] == [1, 3, None]


def test_original_order_holds_the_passages_of_a_split_document_where_it_was_sent() -> None:
    """The passages of a document split to fit were put after every whole document, in either
    order (a helper's fuzzing): ``original`` now keeps each kept document where it was sent."""
    long = " ".join(
        f"Sentence {i} is about {'the notice letter' if i == 40 else 'filler'} here." for i in range(200)
    )
    body = question(
        questions=[{"text": "When was notice given?"}],
        documents=[
            {"page_content": "Doc A talks about notice briefly.", "metadata": {"i": 0}, "score": 0.9},
            {"page_content": long, "metadata": {"i": 1}, "score": 0.8},
            {"page_content": "Doc C mentions something else.", "metadata": {"i": 2}, "score": 0.7},
        ],
    )
    kept = {}
    for order in ("original", "ranked"):
        result = fit(
            body,
            model=MODEL,
            max_context_tokens=900,
            reserve_output_tokens=0,
            document_order=order,
            split_documents=True,
        )
        kept[order] = [d["metadata"]["i"] for d in result.request["documents"]]
        assert "the notice letter" in result.request["documents"][kept[order].index(1)]["page_content"]
    assert kept == {"original": [0, 1, 2], "ranked": [0, 2, 1]}  # ranked: the whole ones, then the split


def test_bm25_ranks_unscored_documents_against_the_query() -> None:
    filler = [{"page_content": f"Unrelated note {i} about catering and parking. " * 20} for i in range(6)]
    target = {"page_content": "The warranty notice letter was sent on March 3 by certified mail."}
    body = question(
        questions=[{"text": "When was the warranty notice letter sent?"}], documents=[*filler, target]
    )
    result = fit(body, model=MODEL, max_context_tokens=400, reserve_output_tokens=0)
    assert result.request["documents"][0] == target


def test_history_keeps_first_and_latest_with_placeholder() -> None:
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + SENT * 8}
        for i in range(30)
    ]
    body = question(questions=[{"text": "next?"}], history=history)
    result = fit(body, model=MODEL, max_context_tokens=1500, reserve_output_tokens=0)
    out = result.request["history"]
    assert out[0] == history[0]
    assert out[-1] == history[-1]
    placeholder = out[1]["content"]
    assert placeholder.startswith("[Earlier conversation summarized: ") and placeholder.endswith(
        "messages omitted]"
    )
    omitted = int(placeholder.split(": ")[1].split()[0])
    assert omitted == len(history) - (len(out) - 1)


@pytest.mark.parametrize("low_water", [None, 2 / 3])
def test_images_in_dropped_turns_do_not_shrink_what_is_kept(low_water: float | None) -> None:
    # The placeholder was priced as framed as the most framed message: a dropped turn's images
    # (thousands of estimated tokens) were charged to it, and the kept turns shrank with them.
    image = {"type": "image_url", "image_url": {"url": "https://example.com/scan.png", "detail": "high"}}

    def chat(images: int) -> dict[str, object]:
        messages: list[dict[str, object]] = []
        for n in range(8):
            text = {"type": "text", "text": f"Turn {n}: " + SENT * 12}
            pictures = [image] * images if n < 4 else []  # only the oldest turns carry scans
            messages += [
                {"role": "user", "content": [text, *pictures]},
                {"role": "assistant", "content": f"Answer {n}: " + SENT * 6},
            ]
        return {"model": "gpt-4o", "messages": [*messages, {"role": "user", "content": "And now?"}]}

    def kept(images: int) -> list[object]:
        result = fit(
            chat(images),
            model="gpt-4o",
            max_context_tokens=2500,
            reserve_output_tokens=0,
            low_water=low_water,
        )
        return [m for m in result.request["messages"] if "Turn 0" not in json.dumps(m)][-6:]

    assert kept(images=6) == kept(images=0)


def test_latest_message_is_kept_and_truncated_when_it_must_be() -> None:
    history = [{"role": "user", "content": "first"}, {"role": "assistant", "content": SENT * 300}]
    body = question(questions=[{"text": "q"}], history=history)
    result = fit(body, model=MODEL, max_context_tokens=600, reserve_output_tokens=0)
    latest = result.request["history"][-1]["content"]
    assert 0 < len(latest) < len(history[-1]["content"])
    assert history[-1]["content"].startswith(latest)


def test_openai_tool_call_is_never_separated_from_its_result() -> None:
    messages = [{"role": "system", "content": "sys"}]
    for i in range(12):
        messages.append({"role": "user", "content": f"question {i} " + SENT * 6})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": json.dumps({"q": i})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "result " + SENT * 6})
        messages.append({"role": "assistant", "content": "answer " + SENT * 3})
    messages.append({"role": "user", "content": "final question"})
    body = {"model": MODEL, "messages": messages}
    for window in (700, 1000, 1500, 2500):
        out = fit(body, model=MODEL, max_context_tokens=window, reserve_output_tokens=0).request["messages"]
        calls = {c["id"] for m in out for c in m.get("tool_calls") or []}
        results = {m["tool_call_id"] for m in out if m["role"] == "tool"}
        assert calls == results
        assert out[-1] == messages[-1]
        assert _fits({"messages": out}, window, 0, "openai")


def test_anthropic_blocks_and_cache_control_pass_through() -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": [{"type": "text", "text": SENT * 100, "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "old " + SENT * 50}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r " + SENT * 50}],
            },
            {"role": "assistant", "content": "ok"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "now?", "cache_control": {"type": "ephemeral"}}],
            },
        ],
        "metadata": {"user_id": "u"},
    }
    result = fit(body, model="claude-sonnet-4-5", max_context_tokens=1200, reserve_output_tokens=0)
    out = result.request
    assert result.report.exact is False and result.report.safety_factor > 1
    assert out["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert out["messages"][-1] == body["messages"][-1]
    assert out["metadata"] == body["metadata"]
    uses = {
        b["id"]
        for m in out["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    }
    results = {
        b["tool_use_id"]
        for m in out["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    }
    assert uses == results


def test_queries_share_their_budget_and_keep_embedding_fields() -> None:
    questions = [
        {"text": SENT * 40, "embedding_model": "m", "embedding": [0.5]},
        {"text": SENT * 10, "embedding_model": "m", "embedding": [0.25]},
    ]
    body = question(questions=questions)
    result = fit(
        body,
        model=MODEL,
        max_context_tokens=200,
        reserve_output_tokens=0,
        budget={"system": 0, "query": 100, "documents": 0, "history": 0},
    )
    out = result.request["questions"]
    assert [q["embedding"] for q in out] == [[0.5], [0.25]]
    assert len(out[0]["text"]) > len(out[1]["text"]) > 0


def test_cannot_fit_fails_closed_naming_the_parts() -> None:
    body = question(questions=[{"text": "q"}], goals=["goal " * 500])
    with pytest.raises(BudgetExceeded) as info:
        fit(body, model=MODEL, max_context_tokens=200, reserve_output_tokens=0)
    assert "goals" in info.value.parts
    emptied = fit(body, model=MODEL, max_context_tokens=200, reserve_output_tokens=0, on_overflow="empty")
    assert any("emptied" in w for w in emptied.report.warnings)


def test_budget_percentages_are_clamped_and_warned() -> None:
    body = question(role=SENT * 100, questions=[{"text": "q"}])
    result = fit(
        body,
        model=MODEL,
        max_context_tokens=300,
        reserve_output_tokens=0,
        budget={"query": float("nan"), "documents": 250, "history": -5},
    )
    warnings = " ".join(result.report.warnings)
    assert "NaN" in warnings and "clamped" in warnings  # a share that is no number is refused (below)


def test_unused_budget_is_redistributed() -> None:
    body = question(role=SENT * 200, questions=[{"text": "q"}])
    result = fit(body, model=MODEL, max_context_tokens=2000, reserve_output_tokens=0)
    system = next(i for i in result.report.items if i.component == "system")
    assert system.tokens_after > 0.5 * 2000  # far above its 10% share: the others left theirs unused


def test_input_is_never_mutated() -> None:
    body = question(
        role=SENT * 100,
        questions=[{"text": "q", "embedding": [1.0]}],
        documents=[{"page_content": SENT * 20, "score": 0.5, "metadata": {"k": [1]}}],
        history=[{"role": "user", "content": SENT * 20}] * 3,
    )
    snapshot = copy.deepcopy(body)
    fit(body, model=MODEL, max_context_tokens=500, reserve_output_tokens=0)
    assert body == snapshot


def test_invalid_request_names_the_json_path() -> None:
    with pytest.raises(InvalidRequestError) as info:
        fit({"questions": [{"text": "q"}], "documents": [{"page_content": 5}]}, model=MODEL)
    assert info.value.path == "$.documents[0].page_content"


LONG_CHAT = {"messages": [{"role": "user", "content": "word " * 2000}], "input": "hi"}


@pytest.mark.parametrize(
    ("body", "input_format", "fields"),
    [
        (LONG_CHAT, "question", "`messages`, `input` are not read by the question format"),
        (LONG_CHAT, "responses", "`messages` is not read by the responses format"),
        (LONG_CHAT, "openai", "`input` is not read by the openai format"),
        (LONG_CHAT, None, "`input` is not read by the openai format the body was detected as"),
        ({"messages": [{"role": "user", "content": "hi"}], "input": "word " * 2000}, None, "`input`"),
        (
            {"input": "hi", "questions": [{"text": "q"}]},
            None,
            "`questions` is not read by the responses",
        ),
        ({"questions": [{"text": "q"}], "system": "s"}, None, "`system` is not read by the question format"),
        (
            {"messages": [{"role": "user", "content": "hi"}]},
            "question",
            "`messages` is not read by the question",
        ),
    ],
)
def test_content_in_fields_of_another_format_is_refused(
    body: dict, input_format: str | None, fields: str
) -> None:
    for call in (fit, count):
        with pytest.raises(InvalidRequestError, match=re.escape(fields)):
            call(body, model=MODEL, input_format=input_format)


def test_a_chat_body_may_carry_extras_that_openai_compatible_servers_read() -> None:
    """vLLM reads ``documents`` on a chat body (RAG chat templates): not held against it."""
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "documents": [{"text": "d"}]}
    assert fit(body, model=MODEL).report.passed_through


def test_fields_without_content_of_another_format_pass() -> None:
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 10,
        "metadata": {"user": "u"},
        "stream": False,
        "input": None,
        "documents": [],
        "instructions": "",
    }
    assert count(body, model=MODEL)["format"] == "openai"
    assert fit(body, model=MODEL).report.passed_through
    assert (
        count({"input": "hi", "instructions": "be brief", "tools": []}, model=MODEL)["format"] == "responses"
    )
    assert count({"questions": [{"text": "q"}], "instructions": []}, model=MODEL)["format"] == "question"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mr. Smith sued. The court agreed.", ["Mr. Smith sued.", " The court agreed."]),
        ("See 42 U.S.C. § 1983 here. Next one.", ["See 42 U.S.C. § 1983 here.", " Next one."]),
        ("Under Fed. R. Civ. P. 26 it applies. Done.", ["Under Fed. R. Civ. P. 26 it applies.", " Done."]),
        ("Case No. 12 was filed. Then more.", ["Case No. 12 was filed.", " Then more."]),
        ("第一句。第二句！第三句？", ["第一句。", "第二句！", "第三句？"]),
        # scripts with their own full stops: Hindi's danda, Arabic's question mark, Urdu's stop
        ("यह समाप्त हुआ। सूचना दी गई।", ["यह समाप्त हुआ।", " सूचना दी गई।"]),
        ("متى تم الإرسال؟ في مارس؟", ["متى تم الإرسال؟", " في مارس؟"]),
        ("نوٹس دیا گیا۔ اطلاع ملی۔", ["نوٹس دیا گیا۔", " اطلاع ملی۔"]),
        ("قال: «هل وصل؟» ثم سكت.", ["قال: «هل وصل؟»", " ثم سكت."]),  # the closing guillemet stays
        ('कहा "दिया गया।" फिर गया।', ['कहा "दिया गया।"', " फिर गया।"]),
        ('他走了。"你好，"她说。', ["他走了。", '"你好，"她说。']),  # a straight quote opening the next
        ("See Def.'s Mot. The motion is denied.", ["See Def.'s Mot.", " The motion is denied."]),
        # a record's and German legal abbreviations end no sentence
        (
            "See Tr. 47:12 and Smith Dep. 3:4 here. Next.",
            ["See Tr. 47:12 and Smith Dep. 3:4 here.", " Next."],
        ),
        (
            "Vgl. § 5 Nr. 3 BGB, bzw. Ziff. 4 gilt. Das ist so.",
            ["Vgl. § 5 Nr. 3 BGB, bzw. Ziff. 4 gilt.", " Das ist so."],
        ),
        ("The ruling was a gem. The court agreed.", ["The ruling was a gem.", " The court agreed."]),
        # a German ordinal or a citation's number ends no sentence ("am 3." and "März 2026 ..."
        # were two), a year or a number after an English word still does
        (
            "Der Vertrag wurde am 3. März 2026 unterzeichnet. Der 2. Senat folgte. Ende.",
            ["Der Vertrag wurde am 3. März 2026 unterzeichnet.", " Der 2. Senat folgte.", " Ende."],
        ),
        (
            "Gemäß § 3 Abs. 2 BGB, Rn. 12. Berlin, 1. Okt. 2025 gilt. Fin.",
            ["Gemäß § 3 Abs. 2 BGB, Rn. 12.", " Berlin, 1. Okt. 2025 gilt.", " Fin."],
        ),
        (
            "It was 2019. The court agreed. See page 3. Then abs. The end.",
            ["It was 2019.", " The court agreed.", " See page 3.", " Then abs.", " The end."],
        ),
        (
            "L'art. 1240 s'applique. Según núm. 3 vale. Fin.",
            ["L'art. 1240 s'applique.", " Según núm. 3 vale.", " Fin."],
        ),
        ("As Def. Mot. at 4 argues. Next.", ["As Def. Mot. at 4 argues.", " Next."]),
        ("line one\nline two", ["line one", "\nline two"]),
    ],
)
def test_sentence_boundaries(text: str, expected: list[str]) -> None:
    ends = sentence_ends(text)
    pieces, start = [], 0
    for end in [*ends, len(text)] if not ends or ends[-1] != len(text) else ends:
        pieces.append(text[start:end])
        start = end
    assert [p for p in pieces if p] == expected


def test_system_prompt_truncates_on_a_sentence_boundary() -> None:
    role = "".join(f"Rule {i}: Mr. Hale cites Fed. R. Civ. P. {i}. " for i in range(200))
    result = fit(
        question(role=role, questions=[{"text": "q"}]),
        model=MODEL,
        max_context_tokens=400,
        reserve_output_tokens=0,
    )
    kept = result.request["role"]
    assert role.startswith(kept) and kept.endswith(".") and kept.split()[-1][:-1].isdigit()


def test_token_level_cut_never_splits_a_character() -> None:
    role = "日本語の長い文" * 400  # one sentence, no boundary
    result = fit(
        question(role=role, questions=[{"text": "q"}]),
        model=MODEL,
        max_context_tokens=300,
        reserve_output_tokens=0,
    )
    kept = result.request["role"]
    assert kept and role.startswith(kept) and "\ufffd" not in kept


COOKBOOK_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English.",
    },
    {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client deliverable.",
    },
]


@pytest.mark.parametrize(("model", "published"), [("gpt-4", 129), ("gpt-3.5-turbo", 129), ("gpt-4o", 124)])
def test_openai_counts_match_the_published_recipe(model: str, published: int) -> None:
    # OpenAI's cookbook ("How to count tokens with tiktoken") reports these API prompt_tokens.
    assert count({"messages": COOKBOOK_MESSAGES}, model=model)["tokens"] == published


def test_the_memo_tells_minus_zero_from_zero() -> None:
    """-0.0 equals 0.0 but is written differently: a fit of one never answers for the other."""
    first = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}], "temperature": 0.0}
    second = {**first, "temperature": -0.0}
    assert json.dumps(fit(first, model="gpt-4o").request["temperature"]) == "0.0"
    assert json.dumps(fit(second, model="gpt-4o").request["temperature"]) == "-0.0"


def test_a_remembered_report_cannot_be_changed_by_a_caller() -> None:
    """The memo hands one report to every later fit of the same request: its mappings are read-only."""
    body = question(
        role="Be precise. " * 50,
        questions=[{"text": "What happened?"}],
        documents=[{"page_content": "Doc text. " * 400, "score": 0.5}],
    )
    first = fit(body, model=MODEL, max_context_tokens=4096 + 600, reserve_output_tokens=4096)
    budgets, parts = dict(first.report.budgets), dict(first.report.overhead_parts)
    assert budgets and parts and not first.report.passed_through
    for mapping in (first.report.budgets, first.report.overhead_parts):
        with pytest.raises(TypeError):
            mapping["documents"] = -1  # type: ignore[index]
        with pytest.raises(AttributeError):
            mapping.clear()  # type: ignore[attr-defined]
    second = fit(body, model=MODEL, max_context_tokens=4096 + 600, reserve_output_tokens=4096)
    assert second.report.budgets == budgets and second.report.overhead_parts == parts
    plain = second.report.to_dict()
    assert type(plain["budgets"]) is dict and type(plain["overhead_parts"]) is dict
    assert json.loads(json.dumps(plain))["budgets"] == budgets
    assert copy.deepcopy(second.report) == second.report == pickle.loads(pickle.dumps(second.report))


def test_the_default_reply_reserve_leaves_a_small_window_room_for_the_input() -> None:
    body = {"messages": [{"role": "user", "content": "hello"}]}
    small = fit(body, model="gpt-4o", max_context_tokens=4096)  # a 4,096-token model
    assert small.report.reserve_output_tokens == 1024 and small.report.available_tokens == 3072
    assert fit(body, model="gpt-4o", max_context_tokens=32_000).report.reserve_output_tokens == 4096


@pytest.mark.parametrize(
    ("extra", "source"),
    # the body's field is held to gpt-4o's 16,384-token output cap; the option stands as given
    [
        ({"max_tokens": 200_000}, r"16,384 tokens \(\$\.max_tokens\)"),
        ({}, r"200,000 tokens \(reserve_output_tokens=\)"),
    ],
)
def test_a_reserve_that_leaves_nothing_names_where_it_came_from(extra: dict[str, int], source: str) -> None:
    body = {"messages": [{"role": "user", "content": "hello"}], **extra}
    reserve = None if extra else 200_000
    with pytest.raises(ConfigError, match=rf"{source} leaves nothing"):
        fit(body, model="gpt-4o", max_context_tokens=16_000, reserve_output_tokens=reserve)


def test_a_malformed_body_is_told_before_a_reserve_that_leaves_nothing() -> None:
    with pytest.raises(InvalidRequestError):
        fit({"messages": [{"role": "robot", "content": "hi"}]}, model="gpt-4o", reserve_output_tokens=10**6)


def test_emptying_what_cannot_fit_says_whether_the_emptied_request_fits() -> None:
    body = {
        "messages": [{"role": "system", "content": "Be helpful. " * 2000}, {"role": "user", "content": "hi"}]
    }
    emptied = fit(body, model="gpt-4o", max_context_tokens=5000, reserve_output_tokens=0, on_overflow="empty")
    assert emptied.report.tokens_after <= 5000
    assert not any("does not fit" in w for w in emptied.report.warnings)
    assert any("all four components were emptied" in w for w in emptied.report.warnings)
    # what no emptying removes is over: one warning says both, as the seed warns once
    seed = {"role": "Be helpful.", "questions": [{"text": "When?"}], "context": ["ctx " * 400]}
    over = fit(seed, model="gpt-4o", max_context_tokens=400, on_overflow="empty").report.warnings
    assert (
        len(over) == 1
        and "all four components were emptied" in over[0]
        and over[0].endswith("it does not fit")
    )


def test_a_negative_budget_share_is_not_a_percent() -> None:
    with pytest.raises(ConfigError, match="-5 is not a percent from 0 to 100"):
        parse_budget_spec("system=-5")


@pytest.mark.parametrize("share", ["10", "ten", True, None, [10]])
def test_a_budget_share_that_is_not_a_number_is_refused_naming_it(share: object) -> None:
    # "10" was read as 10% in silence, True as 0% with a warning
    body = {"messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(
        ConfigError, match=rf"budget\['system'\] must be a number .*got {re.escape(repr(share))}"
    ):
        fit(body, model="gpt-4o", budget={"system": share})


def test_a_budget_share_of_any_real_number_type_is_taken() -> None:
    from fractions import Fraction

    class Share(float):  # numpy's float64 is one: a float subclass
        pass

    body = {"messages": [{"role": "user", "content": "hi"}]}
    for share in (Share(12.5), Fraction(1, 2)):  # accepted before shares were checked
        assert fit(body, model="gpt-4o", budget={"system": share}).report.passed_through


def test_a_budget_that_would_leave_no_message_is_an_error() -> None:
    body = {"messages": [{"role": "system", "content": "Be brief. " * 100}]}
    with pytest.raises(ConfigError, match=r"leaves no message to send \(budget system=0\)"):
        fit(body, model="gpt-4o", max_context_tokens=200, reserve_output_tokens=0, budget={"system": 0})
    emptied = fit(
        body,
        model="gpt-4o",
        max_context_tokens=200,
        reserve_output_tokens=0,
        budget={"system": 0},
        on_overflow="empty",
    )
    assert emptied.request["messages"] == []  # asked for: the seed's emptying, with its warning


def _chat_of(api: str, question: str) -> dict[str, Any]:
    """An old exchange, then a user turn that pastes a log before its question, as ``api`` sends it."""
    turns = [
        ("user", "hello " * 300),
        ("assistant", "ans " * 300),
        ("user", "Log: " + "a line. " * 200 + question),
    ]
    if api == "responses":
        return {"model": "gpt-4o", "input": [{"role": r, "content": t} for r, t in turns]}
    return {"model": "gpt-4o", "max_tokens": 100, "messages": [{"role": r, "content": t} for r, t in turns]}


@pytest.mark.parametrize("api", ["openai", "anthropic", "responses"])
def test_a_chat_query_at_0_percent_keeps_its_question_alone(api: str) -> None:
    """A chat query budgeted 0% keeps the question it asks (claimed before any share, never cut) and
    nothing else of it: emptied, the fit was refused at every window ("needs 376 tokens but only
    375 are available"), though the question alone fits; the warning says what is kept."""
    question = "\n\nWhich line failed?"
    model = "claude-sonnet-4-5" if api == "anthropic" else "gpt-4o"
    for window in range(150, 850, 100):
        body = _chat_of(api, question)
        result = fit(body, model=model, max_context_tokens=window, budget={"query": 0}, input_format=api)
        report = result.report.to_dict()
        assert report["tokens_after"] <= report["available_tokens"]
        sent = result.request["input" if api == "responses" else "messages"][-1]["content"]
        assert sent.endswith(question.strip()) and "a line." not in sent
        assert (
            "query budget is 0%: when the request is over budget, the query keeps only the question"
            in " ".join(report["warnings"])
        )
    questions = {
        "questions": [{"text": "When was notice given? " * 40}],
        "documents": [{"page_content": "x " * 900}],
    }
    emptied = fit(questions, model="gpt-4o", max_context_tokens=300, budget={"query": 0})
    assert emptied.request["questions"] == [{"text": ""}]  # the seed's question format: emptied, as warned
    assert "every query item is removed" in " ".join(emptied.report.warnings)


def test_an_explicit_window_over_the_models_is_honoured_with_a_warning() -> None:
    """The catalog may be behind the provider, so the given window stands; but a request the
    provider would refuse is never passed as fitting in silence."""
    body = {"messages": [{"role": "user", "content": "word " * 2000}]}
    over = fit(body, model="gpt-4o", max_context_tokens=1_000_000).report
    assert over.context_window == 1_000_000 and over.passed_through
    assert any("over gpt-4o's 128,000-token window" in w for w in over.warnings)
    assert not fit(body, model="gpt-4o", max_context_tokens=128_000).report.warnings
    counted = count(body, model="gpt-4o", max_context_tokens=1_000_000)
    assert any("128,000-token window" in w for w in counted["warnings"])


def test_a_window_within_the_models_own_is_no_mistake_though_over_its_input_limit() -> None:
    """gpt-5's real window is 400,000 tokens, its input limit 272,000: giving the window (the spec
    says to) was warned of as over the limit, though the limit holds the request all the same."""
    body = {"messages": [{"role": "user", "content": "hello"}]}
    for window in (300_000, 400_000):
        report = fit(body, model="gpt-5", max_context_tokens=window).report
        assert report.available_tokens == 272_000 and not report.warnings
    over = fit(body, model="gpt-5", max_context_tokens=500_000).report
    assert over.available_tokens == 272_000
    assert list(over.warnings) == [
        "the window given, 500,000 tokens (max_context_tokens=), is over gpt-5's 400,000-token window "
        "in the catalog; the request is held to its 272,000-token input limit (a user catalog sets other limits)"
    ]


def test_a_reply_asked_above_the_models_output_cap_is_warned() -> None:
    """The provider refuses a max_tokens over the model's cap however well the input fits: count
    and fit said it fits with no word. A reserve given as an option is a budget, not sent."""
    body = {"max_tokens": 100_000, "messages": [{"role": "user", "content": "hello there"}]}
    counted = count(body, model="claude-sonnet-4-5")
    assert any("$.max_tokens asks for 100,000" in w and "64,000" in w for w in counted["warnings"])
    fitted = fit(body, model="claude-sonnet-4-5").report
    assert any("output limit of 64,000" in w for w in fitted.warnings)
    assert not count({**body, "max_tokens": 64_000}, model="claude-sonnet-4-5")["warnings"]
    assert not fit(
        body | {"max_tokens": 100}, model="claude-sonnet-4-5", reserve_output_tokens=100_000
    ).report.warnings
    # the reply is reserved at the cap, all the model can write: the prompt is not cut to make
    # room for 199,000 tokens the provider would refuse all the same (cut to 994 tokens)
    long = {"max_tokens": 199_000, "messages": [{"role": "user", "content": "word " * 100_000}]}
    kept = fit(long, model="claude-sonnet-4-5").report
    assert kept.reserve_output_tokens == 64_000 and kept.tokens_after > 100_000
    assert count(long, model="claude-sonnet-4-5")["available_tokens"] == 200_000 - 64_000


def test_a_fits_answer_shares_nothing_with_the_callers_request() -> None:
    """Cold or from the memo alike: changing the answer never changes the request given, so the
    same request fitted again gives the same answer."""
    tool = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}
    body = {
        "model": "gpt-4o",
        "tools": [tool],
        "messages": [{"role": "user", "content": f"question {n}? " + "word " * 300} for n in range(12)],
    }
    given = json.dumps(body)
    for _ in range(2):  # the first fit, then the memo's
        result = fit(body, model="gpt-4o", max_context_tokens=1_500)
        assert not result.report.passed_through
        result.request["tools"][0]["function"]["strict"] = True
        result.request["messages"][-1]["content"] = "changed"
        assert json.dumps(body) == given
    whole = fit(body, model="gpt-4o")  # passed through
    whole.request["tools"].append({"type": "function"})
    assert json.dumps(body) == given


def test_the_fit_memo_tells_catalogs_apart_by_their_cache_rules(tmp_path: Path) -> None:
    """The same body fitted with cache_breakpoints under a catalog where the model does not cache
    gets no marks, even right after a fit under the bundled catalog gave it some."""
    user = tmp_path / "nocache.toml"
    user.write_text(
        'schema_version = 1\n[[models]]\nid = "claude-sonnet-4-5"\nprovider = "anthropic"\n'
        "context_window = 200000\nmax_output_tokens = 64000\n"
        'cache = { mode = "none", min_cacheable_tokens = 0, max_breakpoints = 0 }\n'
    )
    turns = [{"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n} " * 400} for n in range(5)]
    body = {"system": "Be brief. " * 300, "messages": turns}

    def marks(request: dict[str, Any]) -> int:
        return json.dumps(request).count("cache_control")

    bundled = fit(body, model="claude-sonnet-4-5", cache_breakpoints=True)
    assert marks(bundled.request) > 0
    plain = fit(body, model="claude-sonnet-4-5", cache_breakpoints=True, catalog=ctxbudget.load_catalog(user))
    assert marks(plain.request) == 0


@pytest.mark.parametrize(
    ("model", "encoding", "func_init"), [("gpt-4o", "o200k_base", 7), ("gpt-4", "cl100k_base", 10)]
)
def test_tool_definitions_count_by_the_recipe_for_the_models_encoding(
    model: str, encoding: str, func_init: int
) -> None:
    """The cookbook's tool recipe opens each function with 7 tokens for o200k models and 10 for
    cl100k ones (gpt-4 and gpt-3.5-turbo were 3 short a tool)."""
    tokens = ctxbudget.get_encoding(encoding).encode  # tiktoken's own (tests/test_tokens.py)
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": "Reads a file.",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string", "description": "The path."}},
                },
            },
        }
        for i in range(5)
    ]
    messages = [{"role": "user", "content": "What is in /etc/hosts?"}]
    recipe = 12 + sum(
        func_init + len(tokens(f"tool_{i}:Reads a file")) + 3 + 3 + len(tokens("path:string:The path"))
        for i in range(5)
    )
    with_tools = count({"messages": messages, "tools": tools}, model=model)["tokens"]
    assert with_tools - count({"messages": messages}, model=model)["tokens"] == recipe
    responses = {
        "input": "What is in /etc/hosts?",
        "tools": [{**t["function"], "type": "function"} for t in tools],
    }
    assert (
        count(responses, model=model)["tokens"]
        - count({"input": "What is in /etc/hosts?"}, model=model)["tokens"]
        == recipe
    )


def test_reasons_give_tokens_as_the_report_does_for_a_model_counted_by_estimate() -> None:
    # Claude is counted by estimate (x1.3): a reason in raw counts said "share of 1497 tokens"
    # beside a budget of 1,947 and tokens_after of 1,932.
    import re

    body = {
        "role": "Follow the house rules. " * 600,
        "documents": [{"page_content": f"Document {n}. " + "notice was given " * 300} for n in range(6)],
        "questions": [{"text": "When was notice given?"}],
    }
    budget = {"system": 10, "query": 15, "documents": 50, "history": 25}
    report = fit(body, model="claude-sonnet-4-5", max_context_tokens=8000, budget=budget).report.to_dict()
    for item in report["items"]:
        figures = [int(n) for n in re.findall(r"(\d+) tokens", item["reason"])]
        if item["action"] == "truncated":
            assert figures == [report["budgets"][item["component"]]], item
        if item["action"] == "dropped" and "needs" in item["reason"]:
            assert figures[0] >= item["tokens_before"] - 1, item  # as reported, not the raw count


def test_an_int_past_floats_range_is_a_budget_clamped_or_an_option_refused() -> None:
    """A percentage or an amount of 400 digits raised a bare OverflowError from float()."""
    body = {
        "messages": [{"role": "user", "content": "hello " * 50}, {"role": "user", "content": "What now?"}]
    }
    report = fit(body, model="gpt-4o", max_context_tokens=80, budget={"history": 10**400}).report
    assert "history budget inf% is outside 0..100; clamped to 100%" in report.warnings
    request = {"items": [{"id": "q", "kind": "question", "text": "What?"}]}
    with pytest.raises(ConfigError, match="expected_output_tokens must be a whole number"):
        ctxbudget.assemble(
            request, policy="legal-review", model="claude-sonnet-4-5", expected_output_tokens=10**400
        )


def test_a_second_copy_of_a_document_is_never_sent_even_when_the_first_is_split() -> None:
    """With split_documents, two copies of a long document were both split and both sent: the
    duplicate rule held only when the first copy was kept whole."""
    doc = " ".join(f"Sentence {i} says the contract required delivery within {i} days." for i in range(300))
    body = question(
        questions=[{"text": "When was delivery required?"}],
        documents=[
            {"page_content": doc, "score": 0.9},
            {"page_content": "A note.", "score": 0.5},
            {"page_content": doc, "score": 0.9},
        ],
    )
    for split in (False, True):
        report = fit(body, model="gpt-4o", max_context_tokens=4000, split_documents=split).report
        second = next(i for i in report.items if i.component == "documents" and i.index == 2)
        assert (second.action, second.reason) == ("dropped", "duplicate of a document ranked before it")


@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-5", "gemini-2.5-pro"])
def test_a_refusals_parts_add_up_to_what_it_needs_for_an_estimate_too(model: str) -> None:
    """Each part of a Claude or Gemini count is rounded up on its own: they added up to 341 where
    the refusal said it needed 340."""
    body = {
        "messages": [
            {"role": "system", "content": "You are a careful analyst. " * 40},
            {"role": "developer", "content": "Cite the record."},
            {"role": "user", "content": "hi"},
        ]
    }
    with pytest.raises(BudgetExceeded) as refused:
        fit(body, model=model, max_context_tokens=100, reserve_output_tokens=0)
    assert sum(refused.value.parts.values()) == refused.value.required_tokens


def test_a_plain_body_fitted_for_a_claude_model_is_read_as_a_messages_body() -> None:
    """A body naming no model, fitted with model="claude-...", was read as Chat Completions: its cut
    could open with an assistant turn or put two user turns together, which Messages refuses."""
    messages = [
        {"role": "user", "content": "First question about the contract. " * 40},
        {"role": "assistant", "content": "An answer about the contract. " * 40},
        {"role": "user", "content": "And the notice?"},
    ]
    fitted = fit(
        {"messages": messages}, model="claude-sonnet-4-5", max_context_tokens=300, reserve_output_tokens=0
    )
    assert fitted.report.format == "anthropic"
    assert (
        fit(
            {"messages": messages}, model="gpt-4o", max_context_tokens=300, reserve_output_tokens=0
        ).report.format
        == "openai"
    )


def test_a_plan_that_cannot_get_under_the_window_does_not_call_its_kept_text_untrimmable() -> None:
    """When verification rounds ran out, the refusal read "the parts that cannot be trimmed need
    49 tokens" and listed "text the plan still kept" among them."""
    body = {
        "model": "claude-sonnet-4-5",
        "messages": [
            {"role": "user", "content": "hi there, some earlier question about the contract"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "witness March why? cafe said witness third the was. What happened?"},
        ],
    }
    with pytest.raises(BudgetExceeded) as refused:
        fit(body, model="claude-sonnet-4-5", max_context_tokens=40, reserve_output_tokens=0)
    assert "text the plan still kept" in refused.value.parts
    assert str(refused.value).startswith("cannot fit: the smallest request the plan could make needs")


def test_budget_whole_documents_leave_unused_goes_to_a_component_still_cut() -> None:
    """Documents are taken whole: the one after the first did not fit, and 1,432 tokens of their
    budget went unused while the system prompt was cut to 492 tokens (1,563 of 3,000 sent)."""
    body = question(
        role="Rule: cite the record. " * 800,
        questions=[{"text": "When was notice given?"}],
        documents=[
            {"page_content": "The notice went out in March. " * 150, "score": 0.9},
            {"page_content": "Background on the parties. " * 400, "score": 0.8},
        ],
    )
    report = fit(body, model="gpt-4o", max_context_tokens=3000, reserve_output_tokens=0).report
    used = {c: sum(i.tokens_after for i in report.items if i.component == c) for c in ("system", "documents")}
    assert report.tokens_after >= 2900 and used["system"] > 1800
    assert report.budgets["documents"] == used["documents"]  # what it left was handed on
    assert [i.action for i in report.items if i.component == "documents"] == ["kept", "dropped"]


def test_on_overflow_empty_empties_when_no_plan_gets_under_the_window() -> None:
    """When verification ran out of rounds (the smallest plan still over), on_overflow="empty"
    raised BudgetExceeded anyway, whose message suggested on_overflow="empty"."""
    body = {
        "max_tokens": 51,
        "messages": [
            {"role": "user", "content": "the"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t0", "name": "f", "input": {"q": ""}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0", "content": "the"}]},
            {"role": "assistant", "content": "the"},
            {"role": "user", "content": "the"},
        ],
        "tools": [
            {
                "name": "f",
                "description": "d",
                "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
            }
        ],
    }
    with pytest.raises(BudgetExceeded, match="the smallest request the plan could make needs"):
        fit(body, model="gpt-4o", max_context_tokens=100)
    emptied = fit(body, model="gpt-4o", max_context_tokens=100, on_overflow="empty")
    assert emptied.report.tokens_after <= emptied.report.available_tokens
    assert any("all four components were emptied" in w for w in emptied.report.warnings)


def test_a_body_giving_two_reply_sizes_is_reserved_at_the_larger() -> None:
    body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 10, "max_completion_tokens": 5_000}
    report = fit(body, model="gpt-4o").report
    assert report.reserve_output_tokens == 5_000
    with pytest.raises(InvalidRequestError, match=r"\$\.max_completion_tokens"):
        fit({**body, "max_completion_tokens": 1.5}, model="gpt-4o")  # each field is checked


@pytest.mark.parametrize("blank", ["\n" * 100_000, " \n" * 50_000, "\t" * 100_000])
@pytest.mark.parametrize("api", ["openai", "responses", "anthropic"])
def test_a_long_blank_run_beside_the_question_is_left_out_not_kept_whole(blank: str, api: str) -> None:
    """Whitespace beside a kept region was kept byte for byte, however long: 100,000 line breaks
    before a question were kept whole, and a body that fits once they go was refused as over."""
    text = blank + "What is clause 7?"
    model = "claude-sonnet-4-5" if api == "anthropic" else "gpt-4o"
    body: dict[str, Any] = {"model": model, "max_tokens": 10}
    body.update({"input": text} if api == "responses" else {"messages": [{"role": "user", "content": text}]})
    result = fit(body, model=model, max_context_tokens=4_000)
    sent = result.request["input"] if api == "responses" else result.request["messages"][0]["content"]
    assert sent.endswith("What is clause 7?") and len(sent) < 40 and "[…]" in sent
    assert result.report.tokens_after < 40
    # a blank run after a kept text is left out too (the question's own paragraph follows it)
    after = "Intro about clause 7.\t" + "\t" * 100_000 + "\n\nWhat is clause 7?"
    tail = fit(
        {"model": "gpt-4o", "messages": [{"role": "user", "content": after}]},
        model="gpt-4o",
        max_context_tokens=4_000,
    )
    assert tail.request["messages"][0]["content"] == "Intro about clause 7.\n[…]\nWhat is clause 7?"


@pytest.mark.parametrize(
    ("text", "regions", "joined"),
    [
        (
            "A" * 10 + "\n\n\n" + "B" * 10 + "C" * 50,
            [(0, 10), (13, 23)],
            "A" * 10 + "\n\n\n" + "B" * 10 + "\n[…]",
        ),
        ("A" * 10 + " " * 64 + "B" * 10, [(0, 10), (74, 84)], "A" * 10 + " " * 64 + "B" * 10),  # as it was
        ("A" * 10 + " " * 65 + "B" * 10, [(0, 10), (75, 85)], "A" * 10 + "\n[…]\n" + "B" * 10),
        ("A" * 10 + " " * 100 + "B" * 10, [(0, 40), (80, 120)], "A" * 10 + "\n[…]\n" + "B" * 10),  # straddled
        (" " * 100 + "Q?", [(50, 102)], "[…]\nQ?"),  # a region begun halfway into a run
        ("Q?" + "\t" * 100, [(0, 60)], "Q?\n[…]"),
        ("x" * 10 + " " * 200 + "y" * 10, [(0, 220)], "x" * 10 + " " * 200 + "y" * 10),  # inside: layout
        (" " * 100, [(0, 100)], ""),
    ],
)
def test_blank_runs_beside_kept_regions(text: str, regions: list[tuple[int, int]], joined: str) -> None:
    """Kept regions are joined by the whitespace between them as it was, up to 64 characters; a
    longer run at a region's edge (measured whole, wherever the region begins) is left out with a
    marker; a run inside a region, text on both sides, is the region's own layout and stays."""
    from ctxbudget.trim.messages import _joined

    made, copied = _joined(text, regions, 0, len(text))
    assert made == joined
    assert all(made[at : at + n] == text[origin : origin + n] for at, origin, n in copied)


@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-5"])
def test_a_question_ending_in_one_overlong_character_keeps_its_head(model: str) -> None:
    """Its end is kept (where an ask is), at a character's bounds: a letter with 20,000 accents
    is one character over the room, and the whole question was emptied, "Summarize this: " too."""
    body = {
        "model": model,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "Summarize this: e" + "\u0301" * 20_000}],
    }
    result = fit(body, model=model, max_context_tokens=4000)
    content = result.request["messages"][0]["content"]
    assert content.startswith("Summarize this:") and result.report.tokens_after <= 4000


def _the_answer_is_ranked_first(question: str, weather: str, answer: str, budget: int) -> None:
    """BM25 gives the weather 0 and the answer more; a fit of both keeps the answer alone."""
    scores = bm25_scores(question, [weather * 15, answer * 15])
    assert scores[0] == 0.0 and scores[1] > 0.0
    body = {
        "questions": [{"text": question}],
        "documents": [{"page_content": weather * 15}, {"page_content": answer * 15}],
    }
    fitted = fit(body, model="gpt-4o", max_context_tokens=budget)
    assert [d["page_content"] for d in fitted.request["documents"]] == [answer * 15]


@pytest.mark.parametrize(
    ("question", "weather", "answer"),
    [
        ("东京的人口是多少？", "今天天气很好，我们在公园散步。", "东京的人口大约是一千四百万。"),
        (
            "東京の人口は何人ですか？",
            "今日は天気が良いので公園で散歩をしました。",
            "東京の人口は約千四百万人です。",
        ),
    ],
)
def test_text_without_spaces_between_words_is_ranked_by_its_bigrams(
    question: str, weather: str, answer: str
) -> None:
    """A run of Chinese or Japanese was one term that no document held: every score 0, and the
    weather kept before the answer. Its bigrams are its terms, in a span and in a slice alike."""
    assert terms("东京的人口 gpt4東京") == [
        *("东", "东京", "京", "京的", "的", "的人", "人", "人口", "口"),
        *("gpt4", "東", "東京", "京"),
    ]
    _the_answer_is_ranked_first(question, weather, answer, 400)


@pytest.mark.parametrize(
    ("question", "weather", "answer"),
    [
        (
            "猫吃什么？",
            "今天天气很好，阳光明媚，适合出去散步。",
            "猫是一种小型的肉食性哺乳动物，常被人类饲养。",
        ),
        (
            "猫について教えて",
            "今日は天気が良いので散歩に行きます。",
            "猫は小型の肉食哺乳類で、ペットとして飼われています。",
        ),
    ],
)
def test_a_one_character_chinese_or_japanese_word_is_a_term(question: str, weather: str, answer: str) -> None:
    """A word of one Han character (猫, 税, 法) inside a run was in no bigram the document held
    beside other characters (猫吃 against 猫是; 猫に against 猫は, a particle after it): every score
    0, and the weather kept before the answer. A run's Han characters are terms of their own too."""
    assert terms("猫吃") == ["猫", "猫吃", "吃"] and terms("猫は") == ["猫", "猫は"]
    _the_answer_is_ranked_first(question, weather, answer, 500)


def _runs_at_region_ends(text: str, start: int, end: int, lo: int, hi: int) -> list[tuple[int, int]]:
    """The definition: every blank run over 64 characters of the window around the region
    (``text[lo:hi]`` within 65 characters of it), read by one scan; those holding the region's
    first or last character are cut off its ends."""
    if start >= end:
        return []
    parts, pos = [], start
    for run in re.compile(r"\s{65,}").finditer(text, max(lo, start - 65), min(hi, end + 65)):
        a, b = run.span()
        if b <= start or a >= end or start < a < b < end:  # apart from the region, or inside it
            continue
        if a > pos:
            parts.append((pos, a))
        pos = max(pos, b)
    if pos < end:
        parts.append((pos, end))
    return parts


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from(["a", "b.", " ", "\n", "\t", "\u3000", "\x1c", " " * 70, "\n" * 66, " " * 5000]),
        min_size=1,
        max_size=30,
    ).map("".join),
    st.data(),
)
def test_blank_runs_are_cut_off_a_region_where_a_scan_finds_them(text: str, data: st.DataObject) -> None:
    """Only the runs at a region's ends are looked for: the same parts as a scan for every run."""
    from ctxbudget.trim.messages import _between_long_blanks

    lo = data.draw(st.integers(0, len(text)))
    hi = data.draw(st.integers(lo, len(text)))
    start = data.draw(st.integers(lo, hi))
    end = data.draw(st.integers(start, hi))
    assert _between_long_blanks(text, start, end, lo, hi) == _runs_at_region_ends(text, start, end, lo, hi)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(min_value=5, max_value=2000), min_size=1, max_size=4),
    st.lists(st.integers(min_value=1, max_value=1500), min_size=1, max_size=3),
    st.booleans(),
    st.integers(min_value=300, max_value=6000),
)
def test_a_dropped_documents_reason_says_at_least_only_of_a_bound(
    documents: list[int], history: list[int], asks: bool, budget: int
) -> None:
    """A document dropped because its lower bound is over the room says "needs at least N"; one
    already counted (its bound is its count: the allocation counted it) says "needs N", as its
    report line is counted."""
    words = [
        "the",
        "tenant",
        "gave",
        "notice",
        "of",
        "the",
        "roof",
        "defect",
        "in",
        "March",
        "and",
        "the",
        "landlord",
        "replied",
    ]

    def text(n: int, shift: int) -> str:
        return " ".join(words[(k + shift) % len(words)] for k in range(n))

    body = question(
        role="Answer from the documents.",
        questions=[{"text": "When was notice of the roof defect given?"}] if asks else [],
        documents=[{"page_content": text(n, n)} for n in documents],
        history=[{"role": "user", "content": text(n, 3 * n)} for n in history],
    )
    result = fit(body, model="gpt-5", max_context_tokens=budget, reserve_output_tokens=0, on_overflow="empty")
    for item in result.report.items:
        if item.action == "dropped" and "needs at least" in item.reason:
            assert not item.counted
        elif item.action == "dropped" and "; needs " in item.reason:
            assert item.counted and f"needs {item.tokens_before} tokens" in item.reason


def test_one_document_is_ranked_first_and_several_by_bm25() -> None:
    """Ranking one document needs no score (its text, megabytes perhaps, is not read for it); the
    report names BM25 either way, and several documents are ordered by it."""
    from ctxbudget.items import Item
    from ctxbudget.trim.documents import rank_documents

    lone = Item(component="documents", index=0, path="$.documents[0]", text="nothing about it " * 50)
    assert rank_documents([lone], "lease defect notice", "desc") == ([lone], "bm25 against the query")
    apt = Item(
        component="documents", index=1, path="$.documents[1]", text="the lease defect notice was given"
    )
    ranked, named = rank_documents([lone, apt], "lease defect notice", "desc")
    assert [d.index for d in ranked] == [1, 0] and named == "bm25 against the query"


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 2_000_000), st.sampled_from(["the lease defect notice", "nothing", "lease " * 40]))
def test_a_lone_document_to_split_shares_the_whole_budget(budget: int, text: str) -> None:
    """One document over the budget takes all of it, whatever its relevance (its text is not
    read for a share: a share by relevance, ``budget * w / w``, was a token short once in about
    18 budgets, by float rounding); several share it by relevance."""
    from ctxbudget.items import Item
    from ctxbudget.trim.split import _shares

    lone = Item(component="documents", index=0, path="$.documents[0]", text=text)
    assert _shares([lone], budget, "lease defect notice") == [(lone, budget)]
    other = Item(component="documents", index=1, path="$.documents[1]", text="unrelated words")
    shares = dict((d.index, s) for d, s in _shares([lone, other], budget, "lease defect notice"))
    assert sum(shares.values()) <= budget and (shares[0] >= shares[1] or "lease" not in text)
