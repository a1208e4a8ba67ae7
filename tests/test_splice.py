"""A cut text's count read from its source's encode (``trim.text.spliced_lengths``): the token
lengths it gives are the ones an encode of the cut text gives, whatever the texts hold, and where
it cannot tell them it says so (None) instead of guessing."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import clear_caches, fit, get_encoding
from ctxbudget.items import GAP
from ctxbudget.tokens.counter import analyze, cached_analysis, remember
from ctxbudget.trim.messages import _joined, cut_message
from ctxbudget.trim.text import TextSpan, spliced_lengths

ENCODINGS = ("o200k_base", "cl100k_base")
pieces = st.sampled_from(
    [
        "the",
        " Witness",
        " said",
        " No.",
        " 123456",
        "日本語",
        "🙂",
        "é",
        " ",
        "  ",
        "\n",
        "\n\n",
        "\r\n",
        "\t",
        "\u00a0",
        "\x1c",
        "-",
        "/",
        "-\n/",
        "'s",
        " (",
        ")",
        "...",
        "?",
    ]
)
texts = st.lists(pieces, min_size=1, max_size=80).map("".join)
glues = st.sampled_from(["", GAP, GAP.lstrip("\n"), GAP.rstrip("\n"), " ", "\n", "x", "…", "'"])


@st.composite
def made_of(draw: Any, source: str) -> tuple[str, tuple[tuple[int, int, int], ...]]:
    """A text of stretches of ``source``, in order and apart, between glue strings."""
    cuts = sorted(set(draw(st.lists(st.integers(0, len(source)), max_size=8))))
    stretches = [(a, b) for a, b in zip(cuts[::2], cuts[1::2], strict=False) if a < b]
    made, copied = draw(glues), []
    for a, b in stretches:
        copied.append((len(made), a, b - a))
        made += source[a:b] + draw(glues)
    return made, tuple(copied)


@pytest.mark.parametrize("name", ENCODINGS)
@settings(max_examples=200, deadline=None)
@given(data=st.data(), source=texts, before=st.sampled_from(["", "x", " ", "\n", "Intro. "]))
def test_spliced_lengths_are_the_encoded_ones(name: str, data: Any, source: str, before: str) -> None:
    """Read from the source's encode (alone, or inside a longer text as a message is in its
    chunk), the cut text's lengths equal its own encode's, token by token."""
    encoding = get_encoding(name)
    made, copied = data.draw(made_of(source))
    chunk = before + source + " after"
    start = len(before.encode("utf-8"))
    span = TextSpan(analyze(encoding, chunk), start, start + len(source.encode("utf-8")))
    found = spliced_lengths(encoding, made, copied, source, span)
    if found is not None:
        assert found == encoding.token_lengths(made)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), source=texts)
def test_a_stretch_that_is_not_the_source_is_not_read(data: Any, source: str) -> None:
    """A stretch that does not hold the source's characters there gives None, not a count."""
    encoding = get_encoding("o200k_base")
    made, copied = data.draw(made_of(source))
    if not copied:
        return
    at, origin, length = copied[-1]
    changed = made[:at] + "Z" + made[at + 1 :]
    if changed[at : at + length] == source[origin : origin + length]:
        return
    span = TextSpan(analyze(encoding, source), 0, len(source.encode("utf-8")))
    assert spliced_lengths(encoding, changed, copied, source, span) is None


@settings(max_examples=150, deadline=None)
@given(
    source=texts,
    regions=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)), max_size=6),
)
def test_a_joined_cut_says_where_it_copies_its_text(source: str, regions: list[tuple[int, int]]) -> None:
    """Each stretch a cut says it copies is the source's text there; the stretches are in order
    and apart; and the cut's lengths read from them are its encoded ones."""
    regions = [(min(a, b, len(source)), min(max(a, b), len(source))) for a, b in regions]
    made, copied = _joined(source, regions, 0, len(source))
    ends = [0]
    for at, origin, length in copied:
        assert made[at : at + length] == source[origin : origin + length]
        assert at >= ends[-1]
        ends.append(at + length)
    encoding = get_encoding("o200k_base")
    span = TextSpan(analyze(encoding, source), 0, len(source.encode("utf-8")))
    found = spliced_lengths(encoding, made, copied, source, span)
    if found is not None:
        assert found == encoding.token_lengths(made)


def test_a_long_cut_is_read_and_not_encoded_again() -> None:
    """A 30,000-word message cut to a tenth: its count is read from its own encode (most of the
    text between hard boundaries) and kept, and a fresh encode of what is sent agrees."""
    encoding = get_encoding("o200k_base")
    words = [
        "the",
        "notice",
        "of",
        "defect",
        "was",
        "given",
        "on",
        "March",
        "14",
        "by",
        "the",
        "tenant",
        "to",
        "the",
        "landlord",
    ]
    source = "\n\n".join(
        " ".join(words[(i * 7 + j) % len(words)] for j in range(30)) + "." for i in range(1_000)
    )
    clear_caches()
    span = TextSpan(analyze(encoding, source), 0, len(source))
    ((made, copied),) = cut_message(
        source,
        span,
        span.tokens // 10,
        "notice of defect",
        count_text=lambda t: len(encoding.encode(t)),
        keep_question=False,
    )
    assert copied and made != source
    lengths = spliced_lengths(encoding, made, copied, source, span)
    assert lengths == encoding.token_lengths(made)
    assert sum(map(len, (made[a : a + n] for a, _, n in copied))) > 0.9 * len(made)  # most of it read
    remember(encoding, made, lengths)
    assert cached_analysis(encoding, made) is not None


def test_lengths_that_do_not_add_up_are_not_kept() -> None:
    """``remember`` keeps only lengths that sum to the text's size."""
    encoding = get_encoding("o200k_base")
    clear_caches()
    remember(encoding, "hello world", b"\x05\x05")  # 10 bytes of 11
    assert cached_analysis(encoding, "hello world") is None


@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-5"])
def test_a_fit_that_cuts_a_long_message_counts_what_it_sends(model: str) -> None:
    """The fitted message's tokens, as the report gives them, are its text's encoded ones plus its
    framing: the count read from the source is the count of what is sent."""
    words = [
        "witness",
        "exhibit",
        "deposition",
        "notice",
        "defect",
        "landlord",
        "tenant",
        "inspection",
        "report",
    ]
    document = "\n\n".join(" ".join(words[(i + j) % len(words)] for j in range(40)) + "." for i in range(800))
    body = {
        "model": model,
        "messages": [{"role": "user", "content": document + "\n\nWhen was notice given?"}],
    }
    clear_caches()
    result = fit(body, model=model, max_context_tokens=8_000, reserve_output_tokens=0)
    sent = result.request["messages"][-1]["content"]
    line = next(i for i in result.report.items if i.component == "query")
    assert line.action == "truncated"
    clear_caches()  # the text sent, counted again by an encode of its own
    again = fit(
        {**body, "messages": [{"role": "user", "content": sent}]}, model=model, max_context_tokens=10**6
    )
    exact = next(i for i in again.report.items if i.component == "query").tokens_before
    assert line.tokens_after == exact


def test_a_message_of_several_long_blocks_cut_counts_what_it_sends() -> None:
    """Each text block of a message is its own piece, read from its own encode: the cut message's
    tokens are those of the blocks sent, counted again by an encode of their own."""
    words = ["notice", "defect", "exhibit", "roof", "repair", "payment", "clause", "witness", "March"]

    def block(seed: int) -> str:
        return "\n\n".join(
            " ".join(words[(seed + i * j) % len(words)] for j in range(35)) + "." for i in range(300)
        )

    content = [{"type": "text", "text": block(1)}, {"type": "text", "text": block(2)}]
    content.append({"type": "text", "text": "When was notice of the defect given?"})
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": content}],
    }
    clear_caches()
    result = fit(body, model="claude-sonnet-4-5", max_context_tokens=6_000, reserve_output_tokens=0)
    line = next(i for i in result.report.items if i.component == "query")
    sent = result.request["messages"][-1]["content"]
    assert line.action == "truncated" and len(sent) == 3 and sent[0]["text"] != content[0]["text"]
    clear_caches()
    again = fit({**body, "messages": [{"role": "user", "content": sent}]}, model="claude-sonnet-4-5")
    assert line.tokens_after == next(i for i in again.report.items if i.component == "query").tokens_before
