"""Measuring renderings: batch offset lookups and the spliced exact count of a cut-down request."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import fit, get_encoding, render_question
from ctxbudget.fitting._memo import freeze, thaw
from ctxbudget.items import PIECE_SEP, Rendering, Segment
from ctxbudget.measure import MIN_REUSE_CHARS, measure, measure_total
from ctxbudget.trim.text import PiecesSpan

words = st.sampled_from(
    [
        "the",
        "witness",
        "said",
        "No.",
        "12",
        "U.S.C.",
        "日本",
        "🙂",
        " ",
        "\n",
        "\r\n",
        "  A.",
        "Q.",
        "'s",
        "/",
    ]
)
phrases = st.lists(words, max_size=120).map(" ".join)
long_texts = st.lists(words, min_size=80, max_size=200).map(" ".join)


@settings(max_examples=80, deadline=None)
@given(st.lists(long_texts | phrases, min_size=1, max_size=6), st.data())
def test_spliced_count_equals_a_full_encode(sources: list[str], data: Any) -> None:
    encoding = get_encoding("o200k_base")
    original = Rendering(
        chunks=(tuple(Segment(t, ("documents", i), content=True) for i, t in enumerate(sources)),)
    )
    measured = measure(original, encoding)
    # A cut-down request: some source segments (reordered, repeated) with new glue between them.
    picks = data.draw(st.lists(st.sampled_from(sources) | phrases, max_size=8))
    segments = tuple(Segment(t, "markup") for t in picks)
    text = "".join(picks)
    spliced = measure_total(
        Rendering(chunks=(segments,), constants=(("framing", 3),)), encoding, measured.sources
    )
    assert spliced == len(encoding.tiktoken.encode_ordinary(text)) + 3
    assert any(len(t) >= MIN_REUSE_CHARS for t in sources) == bool(measured.sources)


def test_fitted_report_counts_what_is_sent() -> None:
    docs = [
        {
            "page_content": f"Exhibit {i}: " + "the witness said that the notice was sent. " * (30 + i),
            "score": i / 10,
        }
        for i in range(8)
    ]
    body = {
        "role": "You review depositions.",
        "questions": [{"text": "When was notice sent?"}],
        "documents": docs,
    }
    result = fit(body, model="gpt-4o", max_context_tokens=2_000, reserve_output_tokens=0)
    sent = render_question(result.request)
    assert result.report.tokens_after == len(get_encoding("o200k_base").tiktoken.encode_ordinary(sent))
    assert result.report.tokens_after <= 2_000


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_thaw_rebuilds_what_was_frozen(value: Any) -> None:
    again = thaw(freeze(value))
    assert json.dumps(again, sort_keys=False) == json.dumps(value, sort_keys=False)
    assert freeze(again) == freeze(value) or "NaN" in json.dumps(value)


class CharEncoding:
    """A fake plug-in encoding: one token per character, no proven boundaries."""

    name = "chars"
    proven_boundaries = False

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def token_lengths(self, text: str) -> bytes:
        return bytes(len(c.encode("utf-8")) for c in text)


def test_a_plugin_encoding_is_measured_by_its_own_tokens() -> None:
    from ctxbudget import Encoding

    encoding = CharEncoding()
    assert isinstance(encoding, Encoding)
    texts = ["déjà vu " * 40, "日本語 " * 70, "plain words " * 30]
    rendering = Rendering(
        chunks=(tuple(Segment(t, ("documents", i), content=True) for i, t in enumerate(texts)),)
    )
    measured = measure(rendering, encoding)
    assert measured.by_owner == {("documents", i): len(t) for i, t in enumerate(texts)}
    assert measured.spans[("documents", 1)].tokens == len(texts[1])
    reordered = Rendering(chunks=((Segment(texts[2], "markup"), Segment(texts[0], "markup")),))
    assert measure_total(reordered, encoding, measured.sources) == len(texts[2]) + len(texts[0])


@given(st.lists(st.integers(1, 255), max_size=400), st.data())
def test_offsets_match_a_running_sum_of_token_lengths(lengths: list[int], data: Any) -> None:
    from itertools import accumulate

    from ctxbudget.tokens.counter import ChunkAnalysis

    analysis = ChunkAnalysis("x" * sum(lengths), bytes(lengths))
    starts = [0, *accumulate(lengths)][:-1]
    offsets = sorted(data.draw(st.lists(st.integers(-3, sum(lengths) + 3), max_size=30)))
    expected = [sum(1 for s in starts if s < o) for o in offsets]
    assert [analysis.tokens_starting_before(o) for o in offsets] == expected


def test_a_registered_plugin_encoding_counts_a_fit_end_to_end(tmp_path: Any) -> None:
    from ctxbudget import ConfigError, load_catalog, register_encoding

    register_encoding("chars-misnamed", CharEncoding)
    with pytest.raises(ConfigError, match="calls itself 'chars'"):
        get_encoding("chars-misnamed")
    register_encoding("chars", CharEncoding)
    path = tmp_path / "mine.toml"
    path.write_text(
        """schema_version = 1
[[models]]
id = "char-llm"
provider = "self-hosted"
context_window = 600
max_output_tokens = 100
tokenizer = { encoding = "chars", exact = true }
prices = { input = 0, output = 0, cache_write_5m = 0, cache_write_1h = 0, cache_read = 0 }
cache = { mode = "none", min_cacheable_tokens = 0, max_breakpoints = 0 }
""",
        "utf-8",
    )
    body = {
        "questions": [{"text": "When was the notice sent?"}],
        "documents": [
            {"page_content": f"Exhibit {i}: the notice was sent on day {i}. " * 6} for i in range(6)
        ],
    }
    result = fit(body, model="char-llm", catalog=load_catalog([path]), reserve_output_tokens=0)
    assert result.report.encoding == "chars"
    assert result.report.tokens_after == len(render_question(result.request)) <= 600
    assert result.report.tokens_before == len(render_question(body))


@settings(max_examples=60, deadline=None)
@given(st.lists(phrases, min_size=2, max_size=5).filter(any), st.data())
def test_an_item_in_several_pieces_is_counted_piece_by_piece(pieces: list[str], data: Any) -> None:
    """A message with several texts (tool results, text blocks) gets one span over its pieces:
    read as one text joined by PIECE_SEP, each range counted from its own pieces' encodes."""
    encoding = get_encoding("o200k_base")
    owner = ("history", 0)
    chunks = tuple((Segment(p, owner, content=True),) for p in pieces)
    span = measure(Rendering(chunks=chunks), encoding).spans[owner]
    joined = PIECE_SEP.join(pieces)
    assert isinstance(span, PiecesSpan)
    assert [joined[a:b] for a, b in span.bounds] == pieces
    assert span.tokens == sum(len(encoding.encode(p)) for p in pieces)
    count = span.char_counter(joined)
    for (a, b), piece in zip(span.bounds, pieces, strict=True):
        assert count(a, b) == len(encoding.encode(piece))
    start = data.draw(st.integers(0, len(joined)))
    end = data.draw(st.integers(start, len(joined)))
    middle = data.draw(st.integers(start, end))
    assert count(start, middle) + count(middle, end) <= count(start, end) + len(pieces)
    assert count(0, len(joined)) == span.tokens
