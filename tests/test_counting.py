"""count_text and encoding_for_model: a model's tokens for a plain text, as tiktoken users count
them, in agreement with the library's count of a whole request."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ctxbudget
from ctxbudget.errors import ConfigError

TEXTS = ("hello", "Où est la gare ? 日本語のテキスト 🎉 — naïve café", "a " * 500, "<|endoftext|> is text")
EXACT = ("gpt-4o", "gpt-4o-2024-08-06", "gpt-4", "gpt-5", "o3-mini", "openai/gpt-4.1")
ESTIMATED = ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929", "gemini-2.5-pro")


def _in_a_chat(text: str, model: str) -> int:
    """The text's share of a one-message chat body, as ctxbudget.count measures the body."""

    def tokens(content: str) -> int:
        body = {"model": model, "messages": [{"role": "user", "content": content}]}
        return int(ctxbudget.count(body, model=model)["tokens"])

    return tokens(text) - tokens("")


@pytest.mark.parametrize("model", EXACT)
@pytest.mark.parametrize("text", TEXTS)
def test_exact_counts_agree_with_the_count_of_a_request(model: str, text: str) -> None:
    assert ctxbudget.count_text(text, model=model) == _in_a_chat(text, model)


@pytest.mark.parametrize("model", EXACT)
def test_exact_counts_are_tiktokens_own(model: str) -> None:
    encoding = ctxbudget.encoding_for_model(model)
    reference = encoding.encoding.tiktoken  # type: ignore[attr-defined]
    assert encoding.exact and encoding.safety_factor == 1.0
    for text in TEXTS:
        assert ctxbudget.count_text(text, model=model) == len(reference.encode_ordinary(text))
        assert encoding.encode(text) == reference.encode_ordinary(text)


def test_each_model_gets_its_own_encoding() -> None:
    assert ctxbudget.encoding_for_model("gpt-4o-2024-08-06").name == "o200k_base"
    assert ctxbudget.encoding_for_model("gpt-4").name == "cl100k_base"
    assert ctxbudget.encoding_for_model("gpt-4o-2024-08-06").catalog_id == "gpt-4o"
    assert ctxbudget.count_text("hello world", model="gpt-4") == 2


@pytest.mark.parametrize("model", ESTIMATED)
def test_a_model_without_a_tokenizer_is_an_estimate_with_its_safety_factor(model: str) -> None:
    encoding = ctxbudget.encoding_for_model(model)
    assert not encoding.exact and encoding.safety_factor > 1.0
    for text in TEXTS:
        proxy = len(encoding.encode(text))
        assert ctxbudget.count_text(text, model=model) == math.ceil(proxy * encoding.safety_factor - 1e-9)
        # The request's count scales the whole body once: the text's share differs by rounding only.
        assert abs(ctxbudget.count_text(text, model=model) - _in_a_chat(text, model)) <= 1
    assert ctxbudget.count({"model": model, "messages": [{"role": "user", "content": "hi"}]}, model=model)[
        "safety_factor"
    ] == pytest.approx(encoding.safety_factor)


def test_empty_text_is_zero_tokens() -> None:
    for model in (*EXACT, *ESTIMATED):
        assert ctxbudget.count_text("", model=model) == 0


def test_encode_and_decode_round_trip_non_ascii_text() -> None:
    for model in ("gpt-4o", "gpt-4", "claude-sonnet-4-5"):
        encoding = ctxbudget.encoding_for_model(model)
        for text in TEXTS:
            assert encoding.decode(encoding.encode(text)) == text
            assert sum(encoding.token_lengths(text)) == len(text.encode("utf-8"))


def test_the_model_encoding_is_an_encoding() -> None:
    encoding = ctxbudget.encoding_for_model("gpt-4o")
    assert isinstance(encoding, ctxbudget.Encoding)
    assert encoding.proven_boundaries


def test_an_unknown_model_is_an_error_naming_the_closest_ids() -> None:
    with pytest.raises(ctxbudget.UnknownModelError, match="closest: gpt-4o-mini") as caught:
        ctxbudget.count_text("hello", model="gpt-4oo-mini")
    assert caught.value.model_id == "gpt-4oo-mini"
    with pytest.raises(ctxbudget.UnknownModelError, match="user catalog"):
        ctxbudget.encoding_for_model("no-such-model")


def test_bad_arguments_are_misuse_errors() -> None:
    with pytest.raises(ctxbudget.InvalidRequestError, match="text must be a string"):
        ctxbudget.count_text(b"hello", model="gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(ctxbudget.ConfigError, match="model must be a string"):
        ctxbudget.encoding_for_model(None)  # type: ignore[arg-type]
    with pytest.raises(ctxbudget.ConfigError, match="catalog must be a Catalog"):
        ctxbudget.count_text("hello", model="gpt-4o", catalog={})  # type: ignore[arg-type]


HOUSE = """
schema_version = 1
[[models]]
id = "house-llm"
provider = "self-hosted"
context_window = 32768
tokenizer = { encoding = "o200k_base", exact = false, safety_factor = 1.2 }
match = { starts_with = "house-llm-" }
"""


def test_a_user_catalog_counts_its_own_models(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text(HOUSE, "utf-8")
    catalog = ctxbudget.load_catalog(tmp_path / "mine.toml")
    encoding = ctxbudget.encoding_for_model("house-llm-2026-01", catalog=catalog)
    assert (encoding.catalog_id, encoding.exact, encoding.safety_factor) == ("house-llm", False, 1.2)
    text = "a" + " a" * 99  # 100 tokens of o200k_base
    assert ctxbudget.count_text(text, model="house-llm-2026-01", catalog=catalog) == math.ceil(100 * 1.2)
    with pytest.raises(ctxbudget.UnknownModelError):
        ctxbudget.count_text(text, model="house-llm-2026-01")  # not in the bundled catalog


class _Letters:
    """A plug-in encoding with no decode: a token a character (all ASCII here)."""

    name = "letters"
    proven_boundaries = False

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def token_lengths(self, text: str) -> bytes:
        return bytes(len(c.encode("utf-8")) for c in text)


def _counted_with(encoding: str, folder: Path) -> ctxbudget.Catalog:
    """A user catalog whose house-llm counts exactly with ``encoding``."""
    (folder / "mine.toml").write_text(
        HOUSE.replace(
            'encoding = "o200k_base", exact = false, safety_factor = 1.2',
            f'encoding = "{encoding}", exact = true',
        ),
        "utf-8",
    )
    return ctxbudget.load_catalog(folder / "mine.toml")


def test_a_plug_in_encoding_counts_and_says_it_cannot_decode(tmp_path: Path) -> None:
    ctxbudget.register_encoding("letters", _Letters)
    catalog = _counted_with("letters", tmp_path)
    encoding = ctxbudget.encoding_for_model("house-llm", catalog=catalog)
    assert encoding.exact and encoding.name == "letters"
    assert ctxbudget.count_text("hello", model="house-llm", catalog=catalog) == 5
    with pytest.raises(ctxbudget.ConfigError, match="'letters' has no decode"):
        encoding.decode([104])


def test_count_text_and_decode_refuse_what_they_cannot_read() -> None:
    from ctxbudget.errors import InvalidRequestError

    with pytest.raises(InvalidRequestError, match="lone surrogate"):
        ctxbudget.count_text("a\ud800b", model="gpt-4o")
    encoding = ctxbudget.encoding_for_model("gpt-4o")
    for read in (encoding.encode, encoding.token_lengths):  # as count does, not U+FFFD's tokens
        with pytest.raises(InvalidRequestError, match="lone surrogate"):
            read("a\ud800b")
    for tokens in ([10**9], [-1]):
        with pytest.raises(InvalidRequestError, match="not token ids of o200k_base"):
            ctxbudget.encoding_for_model("gpt-4o").decode(tokens)


def test_a_count_imports_none_of_the_trimming_pipeline() -> None:
    code = (
        "import sys, ctxbudget\n"
        "body = {'messages': [{'role': 'user', 'content': 'hello there'}]}\n"
        "assert ctxbudget.count(body, model='gpt-4o')['tokens'] > 0\n"
        "heavy = [m for m in sys.modules if m.startswith(('ctxbudget.trim.', 'ctxbudget.fitting._fit',"
        " 'ctxbudget.lazy_measure', 'tiktoken'))]\n"
        "assert heavy == ['ctxbudget.trim.text'], heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


class _Versioned(_Letters):
    name = "versioned"


class _Words(_Versioned):
    """The same name's second version: a token a run of non-blanks or blanks."""

    def encode(self, text: str) -> list[int]:
        return [len(m) for m in re.findall(r"\S+|\s+", text)]

    def token_lengths(self, text: str) -> bytes:
        return bytes(min(255, len(m.encode("utf-8"))) for m in re.findall(r"\S+|\s+", text))


def test_an_encoding_registered_again_counts_with_the_new_one(tmp_path: Path) -> None:
    """Counts, sentence profiles and fits cached under the name are the old encoding's: all of
    them are forgotten when the name is registered again."""
    ctxbudget.register_encoding("versioned", _Versioned)
    catalog = _counted_with("versioned", tmp_path)
    text = "the letter of March 3 gave notice"
    body = {"messages": [{"role": "user", "content": text}]}
    assert ctxbudget.count_text(text, model="house-llm", catalog=catalog) == len(text)
    before = ctxbudget.count(body, model="house-llm", catalog=catalog)["tokens"]
    ctxbudget.register_encoding("versioned", _Words)
    assert ctxbudget.count_text(text, model="house-llm", catalog=catalog) == len(re.findall(r"\S+|\s+", text))
    assert before == 3 + len("user") + len(text) + 3  # framing, the role, the text, reply priming
    assert ctxbudget.count(body, model="house-llm", catalog=catalog)["tokens"] == 3 + 1 + 13 + 3


def test_what_the_published_recipe_does_not_cover_is_counted_and_labelled_an_estimate() -> None:
    from ctxbudget import count

    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    deep = {"type": "string", "description": "a nested field the model reads " * 40}
    nested = {"type": "object", "properties": {"cfg": {"type": "object", "properties": {"deep": deep}}}}
    flat = {"type": "object", "properties": {"cfg": {"type": "object"}}}

    def tool(parameters: dict[str, Any], description: Any = "Look up.") -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": "f", "description": description, "parameters": parameters},
        }

    shallow = count({**chat, "tools": [tool(flat)]}, model="gpt-4o")
    deeper = count({**chat, "tools": [tool(nested)]}, model="gpt-4o")
    assert shallow["exact"] and not deeper["exact"]
    assert deeper["tokens"] - shallow["tokens"] > 200  # the nested description is counted, not left out
    assert any("nested parameter schemas" in p for p in deeper["estimated_parts"])
    arrays = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}}
    assert count({**chat, "tools": [tool(arrays)]}, model="gpt-4o")[
        "exact"
    ]  # a plain item type: the recipe's
    # a null description is no description (it was counted as the text "None")
    assert (
        count({**chat, "tools": [tool(flat, None)]}, model="gpt-4o")["tokens"]
        == count({**chat, "tools": [tool(flat, "")]}, model="gpt-4o")["tokens"]
    )
    schema = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}
    for extra in ({"response_format": schema}, {"prediction": {"type": "content", "content": "draft"}}):
        assert not count({**chat, **extra}, model="gpt-4o")["exact"]


def test_a_boolean_subschema_in_a_tools_properties_is_accepted() -> None:
    from ctxbudget import count

    for api in ("chat", "responses"):
        parameters = {
            "type": "object",
            "properties": {"anything": True, "nothing": False, "q": {"type": "string"}},
        }
        if api == "chat":
            body: dict[str, Any] = {
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"name": "f", "parameters": parameters}}],
            }
        else:
            body = {
                "model": "gpt-4o",
                "input": "hi",
                "tools": [{"type": "function", "name": "f", "parameters": parameters}],
            }
        assert count(body, model="gpt-4o")["tokens"] > 0  # JSON Schema's true / false: valid, not refused


_WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def test_a_claude_request_with_tools_holds_the_tool_use_system_prompt_the_provider_adds() -> None:
    """Anthropic adds 346 tokens of system prompt to a request with tools (313 when a tool is
    forced): they take room, are billed and are in its own count_tokens."""
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    plain = ctxbudget.count({"messages": messages}, model="claude-sonnet-4-5")["tokens"]
    auto = ctxbudget.count({"messages": messages, "tools": [_WEATHER]}, model="claude-sonnet-4-5-20250929")
    forced = {"messages": messages, "tools": [_WEATHER], "tool_choice": {"type": "any"}}
    assert auto["tokens"] - plain > 346  # the prompt, and the tool's own definition
    assert auto["tokens"] - ctxbudget.count(forced, model="claude-sonnet-4-5")["tokens"] in (32, 33, 34)
    report = ctxbudget.fit({"messages": messages, "tools": [_WEATHER]}, model="claude-sonnet-4-5").report
    assert report.overhead_parts["tool-use system prompt"] == 346  # the fewest proxy tokens (it read 348)
    forced_report = ctxbudget.fit(forced, model="claude-sonnet-4-5").report
    assert forced_report.overhead_parts["tool-use system prompt"] == 314  # 313 is no whole number of them
    openai_tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    chat = ctxbudget.fit({"messages": messages, "tools": [openai_tool]}, model="gpt-4o").report
    assert "tool-use system prompt" not in chat.overhead_parts  # OpenAI adds none


def test_the_tool_use_system_prompt_takes_room_from_the_history() -> None:
    history = [
        {"role": "user", "content": "Summarize the lease. " * 60},
        {"role": "assistant", "content": "The lease runs from March. " * 60},
        {"role": "user", "content": "And the deposit?"},
    ]
    body = {"max_tokens": 50, "messages": history, "tools": [_WEATHER]}
    without_prompt = ctxbudget.count({"messages": history}, model="claude-sonnet-4-5")["tokens"] + 60
    result = ctxbudget.fit(body, model="claude-sonnet-4-5", max_context_tokens=without_prompt + 50)
    assert result.report.tokens_after <= result.report.available_tokens  # the prompt included
    assert not result.report.passed_through  # it fit only without the 346 tokens


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_a_tool_forced_in_an_openai_body_for_claude_takes_the_forced_prompt(choice: Any) -> None:
    """Through an OpenAI-compatible endpoint, "required" or a named function forces a tool as
    Anthropic's any or tool do: the 313-token prompt, not 346."""
    from ctxbudget.formats.tool_prompt import tool_prompt_tokens

    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    assert tool_prompt_tokens("claude-sonnet-4-5", {"tools": [tool], "tool_choice": choice}) == 313
    assert tool_prompt_tokens("claude-sonnet-4-5", {"tools": [tool], "tool_choice": "auto"}) == 346


def test_schema_parts_the_recipe_does_not_read_are_counted_and_labelled_in_every_format() -> None:
    """A tool's parameters given as anyOf its branches counted 54 tokens, exact (the ~150 tokens
    of branches left out); a Responses text.format schema was counted but labelled exact."""
    branches = [
        {
            "type": "object",
            "properties": {"flight": {"type": "string", "description": "Flight number to book"}},
        },
        {"type": "object", "properties": {"hotel": {"type": "string", "description": "Hotel name and city"}}},
    ]
    tool = {"type": "function", "function": {"name": "book", "parameters": {"anyOf": branches}}}
    plain = {"type": "function", "function": {"name": "book", "parameters": {"type": "object"}}}
    messages = [{"role": "user", "content": "Book it."}]
    union = ctxbudget.count({"messages": messages, "tools": [tool]}, model="gpt-4o")
    assert (
        union["tokens"]
        > ctxbudget.count({"messages": messages, "tools": [plain]}, model="gpt-4o")["tokens"] + 30
    )
    assert not union["exact"] and any("book" in p for p in union["estimated_parts"])
    form = {
        "type": "json_schema",
        "name": "answer",
        "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
    }
    responses = ctxbudget.count({"input": "Hi", "text": {"format": form}}, model="gpt-4o")
    assert not responses["exact"] and any("json_schema" in p for p in responses["estimated_parts"])


@pytest.mark.parametrize(
    "body",
    [
        {"model": "text-embedding-3-small", "input": "hello"},  # read as Responses: 8 tokens, "exact"
        {"messages": [{"role": "user", "content": "hello"}]},
        {"question": "hello", "documents": ["a"]},
    ],
)
def test_an_embedding_model_is_not_counted_or_fitted_as_chat(body: dict[str, object]) -> None:
    for call in (ctxbudget.count, ctxbudget.fit):
        with pytest.raises(
            ctxbudget.ConfigError, match=r"text-embedding-3-small is an embedding model.*count_text"
        ):
            call(body, model="text-embedding-3-small")


@pytest.mark.parametrize("model", ["gpt-oss-120b", "groq/openai/gpt-oss-120b", "openai.gpt-oss-20b-1:0"])
def test_gpt_oss_is_an_estimate(model: str) -> None:
    """gpt-oss is served in the harmony format, whose chat template (a system message, tools
    rendered its own way) a Chat Completions count does not reproduce: it was labelled exact."""
    body = {"messages": [{"role": "user", "content": "hello"}]}
    counted = ctxbudget.count(body, model=model)
    assert counted["exact"] is False and counted["safety_factor"] > 1
    assert not ctxbudget.encoding_for_model(model).exact


def test_a_part_of_no_rule_in_an_openai_message_counts_its_json_text() -> None:
    """LangChain passes a Claude message's blocks through in OpenAI messages: an 18,000-token
    thinking or document block was counted at 85 tokens, as an unknown image is."""
    thinking = {"type": "thinking", "thinking": "word " * 2_000, "signature": "sig"}
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, thinking]}]}
    counted = ctxbudget.count(body, model="gpt-4o", input_format="openai")  # (detected: anthropic)
    assert counted["tokens"] > 2_000 and not counted["exact"]
    assert counted["estimated_parts"] == ["$.messages[0]: content[1]: thinking: counted as its JSON text"]
    # an Anthropic image block by Anthropic's rule (largest when its size is unknown), not 85
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    body = {"messages": [{"role": "user", "content": [image]}]}
    assert ctxbudget.count(body, model="gpt-4o", input_format="openai")["tokens"] > 1_500


def test_fits_leaves_room_for_the_reply_the_body_asks_for() -> None:
    """A body that fits the window only without its own max_tokens "fit", and the provider refuses
    it (prompt plus max_tokens over the window), as fit reckons it."""
    body = {"messages": [{"role": "user", "content": "word " * 900}], "max_tokens": 200}
    tokens = ctxbudget.count({"messages": body["messages"]}, model="gpt-4o")["tokens"]
    within = ctxbudget.count(body, model="gpt-4o", max_context_tokens=tokens + 200)
    assert within["fits"] and within["available_tokens"] == tokens and within["reserve_output_tokens"] == 200
    over = ctxbudget.count(body, model="gpt-4o", max_context_tokens=tokens + 199)
    assert not over["fits"] and over["available_tokens"] == tokens - 1
    # an explicit window under gpt-5's input cap is what bounds it, and what the CLI names
    capped = ctxbudget.count({"messages": body["messages"]}, model="gpt-5", max_context_tokens=100)
    assert capped["available_tokens"] == 100 and capped["max_input_tokens"] == 272_000


def test_a_reserve_given_to_count_stands_in_for_the_bodys() -> None:
    """count with reserve_output_tokens answers whether fit with that reserve keeps the body whole
    (fit holds back 4,096 by default, where count read only the body's max_tokens); the option
    stands as fit's does, above the model's output cap too, and a bad one is a ConfigError."""
    body = {"messages": [{"role": "user", "content": "word " * 900}], "max_tokens": 200}
    tokens = ctxbudget.count({"messages": body["messages"]}, model="gpt-4o")["tokens"]
    window = tokens + 1_000
    assert ctxbudget.count(body, model="gpt-4o", max_context_tokens=window)["fits"]
    held = ctxbudget.count(body, model="gpt-4o", max_context_tokens=window, reserve_output_tokens=4_096)
    assert not held["fits"] and held["reserve_output_tokens"] == 4_096 and held["available_tokens"] == 0
    fitted = ctxbudget.fit(body, model="gpt-4o", max_context_tokens=window, reserve_output_tokens=1_000)
    counted = ctxbudget.count(body, model="gpt-4o", max_context_tokens=window, reserve_output_tokens=1_000)
    assert counted["fits"] and fitted.report.passed_through  # the two agree at the edge
    over = ctxbudget.count(body, model="gpt-4o", max_context_tokens=window, reserve_output_tokens=1_001)
    assert (
        not over["fits"]
        and not ctxbudget.fit(
            body, model="gpt-4o", max_context_tokens=window, reserve_output_tokens=1_001
        ).report.passed_through
    )
    # above gpt-4o's 16,384-token output cap: a budget, not what is sent, so it stands
    big = ctxbudget.count(body, model="gpt-4o", reserve_output_tokens=100_000)
    assert big["reserve_output_tokens"] == 100_000 and big["available_tokens"] == 28_000
    for bad in (-1, 1.5, True, "4096"):
        with pytest.raises(ConfigError, match="reserve_output_tokens"):
            ctxbudget.count(body, model="gpt-4o", reserve_output_tokens=bad)  # type: ignore[arg-type]


def test_an_openai_messages_tool_calls_are_labelled_an_estimate() -> None:
    """Their names and arguments are counted; the framing of a call is not published: the count
    says it is an estimate there (and only there)."""
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "EX-4"}'}}
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "Find EX-4."},
            {"role": "assistant", "content": None, "tool_calls": [call, {**call, "id": "c2"}]},
            {"role": "tool", "tool_call_id": "c1", "content": "EX-4: the notice letter."},
            {"role": "tool", "tool_call_id": "c2", "content": "EX-4: the notice letter."},
        ],
    }
    report = ctxbudget.fit(body, model="gpt-4o").report
    assert report.exact is False
    assert report.estimated_parts == (
        "$.messages[1]: 2 tool call(s): names and arguments counted; the framing of a call is not published",
    )
    plain = {"model": "gpt-4o", "messages": body["messages"][:1]}
    assert ctxbudget.fit(plain, model="gpt-4o").report.exact is True
