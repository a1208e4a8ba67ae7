"""quicktok as the bundled encodings' engine: the same ids as tiktoken, or never attached."""

from __future__ import annotations

import copy
import functools
import random
import re
import threading
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import (
    ConfigError,
    VolatileValueError,
    assemble,
    clear_caches,
    fit,
    get_encoding,
    register_encoding,
)
from ctxbudget.simulation.deposition import build_legal_context
from ctxbudget.tokens import counter, crew
from ctxbudget.tokens.bundled import bundled_tokens
from ctxbudget.tokens.counter import AHEAD_MIN_CHARS, analyze, cached_analysis, clear_count_cache, count_ahead
from ctxbudget.tokens.encoding import PIECE_CHARS, TiktokenEncoding
from ctxbudget.tokens.fast import (
    FAST_ENCODINGS,
    FastEngine,
    check_engine,
    use_fast_tokenizer,
    use_fast_tokenizers,
)

quicktok = pytest.importorskip("quicktok")


@pytest.fixture(autouse=True)
def back_to_tiktoken() -> Iterator[None]:
    """Every test starts and ends with the process's encodings on tiktoken."""
    _tiktoken_again()
    yield
    _tiktoken_again()


def _tiktoken_again() -> None:
    for name in FAST_ENCODINGS:
        use_fast_tokenizer(name, enabled=False)
    clear_caches()


@functools.cache
def _checked(name: str) -> FastEngine:
    return check_engine(name, quicktok.get_encoding(name), _bundled(name))


def _bundled(name: str) -> TiktokenEncoding:
    encoding = get_encoding(name)
    assert isinstance(encoding, TiktokenEncoding)
    return encoding


# Characters at the split patterns' edges: letters of both cases, marks, digits of several
# scripts, newline kinds, exotic whitespace, CJK, emoji parts, apostrophes of contractions.
ALPHABET = [
    *"aAzZ09 '\n\r\t.,;:!?-_/\\\"()[]{}<>|@#$%^&*~`+=",
    *"éßñüİıſ\u0301\u200b\u00a0\u3000日本語ア한😀👍🏽\u2028\x85\x1c\x0b\x0c’–§¶٣६Ⅻ½ǅʰـ\ufeff",
    "'s",
    "'T",
    "'ll",
    "'RE",
    " \n",
    " \r\n",
    "   ",
    "\n\n",
    "\U00031350",  # CJK Extension H (Unicode 15)
    "\U00011f04",  # Kawi (Unicode 15)
]
tricky_texts = st.lists(st.sampled_from(ALPHABET), max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200) | tricky_texts)
def test_quicktok_gives_tiktokens_ids(text: str) -> None:
    for name in FAST_ENCODINGS:
        reference = _bundled(name).tiktoken
        engine = _checked(name)
        ids, lengths, expected = engine.encode(text), engine.lengths(text), reference.encode_ordinary(text)
        assert ids is None or ids == expected
        assert lengths is None or lengths == bytes(
            len(reference.decode_single_token_bytes(i)) for i in expected
        )
        if text.isascii():
            assert ids is not None and lengths is not None  # only text beyond ASCII is left to tiktoken


CONTEXTS = [
    ".{c}a",
    "{c}.a",
    "a{c}",
    " {c}",
    "1{c}",
    "{c}'s",
    "\n{c}",
    "{c} x",
    "A{c}b",
    "a{c}B",
    "{c}{c}",
    "'{c}",
]


@pytest.mark.parametrize("name", FAST_ENCODINGS)
def test_an_attached_engine_gives_tiktokens_ids_around_sampled_code_points(name: str) -> None:
    """Code points in the contexts the split patterns tell apart (all 1,112,064 were compared
    before adopting quicktok; a stride keeps the suite quick), one text per code point: a text
    that holds one quicktok would read otherwise (a letter of Unicode 17.0) goes to tiktoken."""
    encoding = _bundled(name)
    reference = encoding.tiktoken
    use_fast_tokenizer(name)
    points = [*range(0x80, 0x110000, 97), 0x88F, 0x11DB3, 0x323B0, 0x1E6C0, 0x16EA0, 0xD800]
    for c in map(chr, points):
        text = "\x00".join(f.format(c=c) for f in CONTEXTS)
        assert encoding.encode(text) == reference.encode_ordinary(text), hex(ord(c))


def test_only_text_quicktok_reads_as_tiktoken_does_is_given_to_it() -> None:
    engine = _checked("o200k_base")
    for taken in ["plain ASCII", "naïve 日本語 😀 Ѐ"]:
        assert engine.encode(taken) is not None
    for left in [".\U00011db3a", "CJK J \U000323b0", "\u088f", "lone \ud800"]:  # Unicode 17.0, a surrogate
        assert engine.encode(left) is None


@pytest.mark.parametrize("name", FAST_ENCODINGS)
def test_an_attached_engine_encodes_as_tiktoken_also_long_texts_in_pieces(name: str) -> None:
    rng = random.Random(5)
    words = ["lease", "Tenant", "12", "30.5", "日本語", "naïve", "\n", "\n\n", "—", "'s", "  "]
    text = " ".join(rng.choice(words) for _ in range(2 * PIECE_CHARS // 4))  # over two pieces
    encoding = _bundled(name)
    expected_ids = encoding.tiktoken.encode_ordinary(text)
    assert use_fast_tokenizer(name) is True and encoding.engine == "quicktok"
    assert encoding.encode(text) == expected_ids
    assert encoding.token_lengths(text) == bytes(
        len(t) for t in map(bundled_tokens(name).__getitem__, expected_ids)
    )
    assert encoding.encode("Hi there") == encoding.tiktoken.encode_ordinary("Hi there")


def test_a_lone_surrogate_is_encoded_by_tiktoken_as_before() -> None:
    """quicktok refuses a text that is not UTF-8; tiktoken reads a lone surrogate as U+FFFD."""
    encoding = _bundled("o200k_base")
    text = "before \ud800 after"
    expected = encoding.tiktoken.encode_ordinary(text)
    use_fast_tokenizer("o200k_base")
    assert encoding.encode(text) == expected
    assert len(encoding.token_lengths(text)) == len(expected)


def test_a_fit_is_the_same_whichever_engine_counts() -> None:
    rng = random.Random(11)
    words = [
        "the",
        "deposit",
        "was",
        "paid",
        "on",
        "March",
        "3",
        "and",
        "returned",
        "late",
        "however",
        "the",
        "court",
        "found",
    ]
    document = ". ".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(6000))
    request = {
        "messages": [
            {"role": "system", "content": "Answer from the record."},
            {"role": "user", "content": document + "\n\nWhen was the deposit returned?"},
        ]
    }
    before = fit(request, model="gpt-4o", max_context_tokens=20_000)
    clear_count_cache()
    assert use_fast_tokenizers() == FAST_ENCODINGS
    after = fit(request, model="gpt-4o", max_context_tokens=20_000)
    assert after.request == before.request
    assert after.report.to_dict() == before.report.to_dict()


def test_a_pickle_made_before_the_engine_existed_still_counts() -> None:
    encoding = _bundled("cl100k_base")
    old = dict(encoding.__getstate__())
    del old["_fast"], old["_bundled"]
    restored = TiktokenEncoding.__new__(TiktokenEncoding)
    restored.__setstate__(old)
    assert restored.engine == "tiktoken" and not restored.bundled
    assert restored.encode("an old pickle") == encoding.encode("an old pickle")


def test_going_back_to_tiktoken_and_copies_keep_counting() -> None:
    encoding = _bundled("cl100k_base")
    use_fast_tokenizer("cl100k_base")
    copied = copy.deepcopy(encoding)  # the engine is not copied: the copy counts with tiktoken
    assert copied.engine == "tiktoken" and copied.encode("a copy") == encoding.encode("a copy")
    assert use_fast_tokenizer("cl100k_base", enabled=False) is False
    assert encoding.engine == "tiktoken"


def test_an_encoding_quicktok_does_not_cover_is_refused() -> None:
    with pytest.raises(ConfigError, match="no fast tokenizer for 'p50k_base'"):
        use_fast_tokenizer("p50k_base")


def test_an_encoding_registered_under_a_bundled_name_with_another_vocabulary_is_refused() -> None:
    bundled = _bundled("cl100k_base")
    other = TiktokenEncoding(bundled.tiktoken, [*bundled.byte_lengths[:-1], 1], name="cl100k_base")
    with pytest.raises(ConfigError, match="does not hold the bundled vocabulary"):
        check_engine("cl100k_base", quicktok.get_encoding("cl100k_base"), other)


class _Engine:
    """quicktok's interface over a vocabulary and a split that a test alters."""

    def __init__(self, tokens: list[bytes], encode: Any) -> None:
        self._tokens = tokens
        self._encode = encode

    def decode_single_token_bytes(self, rank: int) -> bytes:
        return self._tokens[rank]

    def encode_ordinary(self, text: str) -> list[int]:
        return list(self._encode(text))

    def encode_batch(self, texts: list[str], threads: int) -> tuple[Any, Any]:
        import numpy

        ids = [self._encode(text) for text in texts]
        ends = numpy.cumsum([0, *map(len, ids)])
        return numpy.array([i for one in ids for i in one], dtype=numpy.uint32), ends


def test_an_engine_with_another_vocabulary_is_never_attached() -> None:
    encoding = _bundled("o200k_base")
    tokens = list(bundled_tokens("o200k_base"))
    tokens[500], tokens[501] = tokens[501], tokens[500]
    with pytest.raises(ConfigError, match="differs from the bundled one at rank 500"):
        check_engine("o200k_base", _Engine(tokens, encoding.tiktoken.encode_ordinary), encoding)
    with pytest.raises(ConfigError, match="smaller than the bundled one"):
        check_engine("o200k_base", _Engine(tokens[:1000], encoding.tiktoken.encode_ordinary), encoding)
    assert encoding.engine == "tiktoken"


def test_an_engine_that_splits_otherwise_is_never_attached() -> None:
    encoding = _bundled("o200k_base")
    tokens = list(bundled_tokens("o200k_base"))

    def split_otherwise(text: str) -> list[int]:
        ids = encoding.tiktoken.encode_ordinary(text)
        return ids if "'s" not in text else [*ids, 0]

    with pytest.raises(ConfigError, match=r"splits .* differently from tiktoken"):
        check_engine("o200k_base", _Engine(tokens, split_otherwise), encoding)
    check_engine(
        "o200k_base", _Engine(tokens, encoding.tiktoken.encode_ordinary), encoding
    )  # the same: no error


def test_the_gateway_loads_it_at_start_up_only_when_asked(tmp_path: Any) -> None:
    from starlette.testclient import TestClient

    from ctxbudget.gateway import GatewayConfig, create_app

    for fast, engine in ((False, "tiktoken"), (True, "quicktok")):
        config = GatewayConfig(store_path=str(tmp_path / f"{fast}.db"), fast_tokenizer=fast)
        with TestClient(create_app(config)) as client:
            assert client.get("/healthz").status_code == 200
            assert get_encoding("o200k_base").engine == engine  # type: ignore[attr-defined]
            assert get_encoding("cl100k_base").engine == engine  # type: ignore[attr-defined]


class _Newer:
    """Unicode tables as an interpreter that knows Unicode 17.0 reads them: its letters assigned."""

    def category(self, character: str, /) -> str:
        point = ord(character)
        if point == 0x88F or 0x11DB0 <= point <= 0x11DDB or 0x323B0 <= point <= 0x33479:
            return "Lo"
        return unicodedata.category(character)


@pytest.mark.parametrize("name", FAST_ENCODINGS)
def test_an_interpreter_that_knows_letters_tiktoken_does_not_gets_no_quicktok(name: str) -> None:
    """Its routing would send Unicode 17.0's letters to quicktok, which reads them as letters
    where tiktoken does not: the probes find it and the engine is refused."""
    with pytest.raises(ConfigError, match="differently from tiktoken"):
        check_engine(name, quicktok.get_encoding(name), _bundled(name), _Newer())


class _Recording:
    """quicktok's engine, noting the texts it is given."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.texts: list[str] = []
        self.batches: list[list[str]] = []
        self.fail: Exception | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def encode_ordinary(self, text: str) -> list[int]:
        self.texts.append(text)
        return list(self._engine.encode_ordinary(text))

    def encode_batch(self, texts: list[str], threads: int) -> Any:
        if self.fail is not None:
            raise self.fail
        self.texts.extend(texts)
        self.batches.append(list(texts))
        return self._engine.encode_batch(texts, threads)


def test_an_attached_engine_is_what_encodes_and_measures_what_it_takes() -> None:
    encoding = _bundled("o200k_base")
    recording = _Recording(quicktok.get_encoding("o200k_base"))
    encoding.attach_fast(check_engine("o200k_base", recording, encoding))
    recording.texts.clear()
    taken, left = "Notice was given on March 3. " * 40, "Tolong Siki \U00011db3.a and more"
    assert encoding.encode(taken) == encoding.tiktoken.encode_ordinary(taken)
    assert len(encoding.token_lengths(taken + "x")) == len(encoding.tiktoken.encode_ordinary(taken + "x"))
    assert recording.texts == [taken, taken + "x"]
    assert encoding.encode(left) == encoding.tiktoken.encode_ordinary(left)
    assert encoding.token_lengths(left) == bytes(
        len(encoding.tiktoken.decode_single_token_bytes(i)) for i in encoding.tiktoken.encode_ordinary(left)
    )
    assert recording.texts == [taken, taken + "x"]  # left to tiktoken


def _recorded(name: str) -> _Recording:
    """The bundled encoding ``name`` with quicktok attached through a recording engine."""
    encoding = _bundled(name)
    recording = _Recording(quicktok.get_encoding(name))
    encoding.attach_fast(check_engine(name, recording, encoding))
    recording.texts.clear()
    recording.batches.clear()
    return recording


def _tiktoken_lengths(encoding: TiktokenEncoding, text: str) -> bytes:
    tk = encoding.tiktoken
    return bytes(len(tk.decode_single_token_bytes(i)) for i in tk.encode_ordinary(text))


LONG = "The witness was shown Exhibit 12 and said she had not seen it before. " * 1000


def test_counting_ahead_caches_in_one_call_what_counting_would() -> None:
    encoding = _bundled("o200k_base")
    recording = _recorded("o200k_base")
    left = "Tolong Siki \U00011db3.a and more"  # unassigned to this Python: tiktoken's
    blank = "x" + " " * 400_001 + "y"  # refused by tiktoken's check, which raises
    short = "Asked and answered."
    count_ahead(encoding, [LONG, left, "", LONG, short, blank]).wait()
    assert recording.batches == [[LONG, short]]
    for text in (LONG, short):
        found = cached_analysis(encoding, text)
        assert found is not None and found.lengths == _tiktoken_lengths(encoding, text)
    assert cached_analysis(encoding, left) is None
    assert cached_analysis(encoding, blank) is None


def test_nothing_is_counted_ahead_for_little_text_or_twice() -> None:
    encoding = _bundled("o200k_base")
    recording = _recorded("o200k_base")
    little = "Asked and answered. " * (AHEAD_MIN_CHARS // 20 - 1)
    count_ahead(encoding, [little]).wait()
    assert recording.batches == [] and cached_analysis(encoding, little) is None
    count_ahead(encoding, [LONG]).wait()
    count_ahead(encoding, [LONG, little]).wait()  # what is cached is not counted again
    assert recording.batches == [[LONG]]


def test_an_engine_failing_ahead_leaves_the_texts_to_the_count_that_needs_them() -> None:
    encoding = _bundled("o200k_base")
    recording = _recorded("o200k_base")
    recording.fail = KeyError("broken engine")
    count_ahead(encoding, [LONG]).wait()  # the thread's failure is not raised here
    assert cached_analysis(encoding, LONG) is None
    with pytest.raises(KeyError, match="broken engine"):  # but where the text is counted
        encoding.token_lengths(LONG)
    recording.fail = None
    assert len(encoding.token_lengths(LONG)) == len(encoding.tiktoken.encode_ordinary(LONG))


def test_a_check_failing_while_texts_are_counted_ahead_is_the_error_raised() -> None:
    """The pinned playbook's date is the error, not the engine's failure on the texts counted
    meanwhile (raised from the thread, it replaced the check's error)."""
    request = build_legal_context()
    request["items"][0] = {
        **request["items"][0],
        "text": "Updated 2026-09-16. " + request["items"][0]["text"],
    }
    _recorded("o200k_base").fail = MemoryError("bad_alloc")
    with pytest.raises(VolatileValueError, match="2026-09-16"):
        assemble(request, policy="legal-review", model="claude-sonnet-4-5")


def test_nothing_is_counted_ahead_where_no_thread_starts_or_past_half_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoding = _bundled("o200k_base")
    recording = _recorded("o200k_base")

    class NoThread(threading.Thread):
        def start(self) -> None:
            raise RuntimeError("can't start new thread")

    with monkeypatch.context() as patched:
        patched.setattr(crew, "_CREW", crew._Crew())  # no thread kept yet
        patched.setattr(threading, "Thread", NoThread)
        count_ahead(encoding, [LONG]).wait()
        assert recording.batches == []
        request = build_legal_context()
        result = assemble(request, policy="legal-review", model="claude-sonnet-4-5")
    playbook = request["items"][0]["text"]
    assert [playbook] in recording.batches and result.report.tokens > 0  # counted alone, when needed
    clear_caches()
    recording.texts.clear()
    monkeypatch.setattr(counter._CACHE, "max_weight", 2 * len(LONG) - 2)  # LONG is over half of it
    count_ahead(encoding, [LONG]).wait()
    assert recording.texts == [] and cached_analysis(encoding, LONG) is None


def test_an_assembly_counted_ahead_is_the_same() -> None:
    request = build_legal_context()
    before = assemble(request, policy="legal-review", model="claude-sonnet-4-5")
    clear_caches()
    recording = _recorded("o200k_base")
    after = assemble(request, policy="legal-review", model="claude-sonnet-4-5")
    texts = list(dict.fromkeys(i["text"] for i in request["items"] if i["text"]))
    evidence = [i for i in request["items"] if i["kind"] == "evidence"]  # the protected tier's
    # every text, then each piece of evidence as it reads in the prompt
    assert recording.batches[0][: len(texts)] == texts
    assert recording.batches[0][len(texts) :] == [
        f'<evidence id="{i["id"]}" citation="{i["citation"]}">\n{i["text"]}\n</evidence>' for i in evidence
    ]
    assert after.request == before.request
    assert after.report.to_dict() == before.report.to_dict()


@pytest.fixture
def registered_again() -> Iterator[None]:
    """A test that registers o200k_base again gets the bundled one back afterwards."""
    original = _bundled("o200k_base")
    yield
    register_encoding("o200k_base", lambda: original)


class _Held(_Recording):
    """quicktok's engine, its batch held until the test lets it go (an encode that takes long)."""

    def __init__(self, engine: Any) -> None:
        super().__init__(engine)
        self.go, self.inside = threading.Event(), threading.Event()
        self.go.set()  # held only once the test clears it

    def encode_batch(self, texts: list[str], threads: int) -> Any:
        self.inside.set()
        self.go.wait(10)
        return super().encode_batch(texts, threads)


class _BlankWords:
    """A plug-in named o200k_base: a token each run of non-blanks or of blanks."""

    name = "o200k_base"
    proven_boundaries = False

    def encode(self, text: str) -> list[int]:
        return [0] * len(re.findall(r"\S+|\s+", text))

    def token_lengths(self, text: str) -> bytes:
        return bytes(min(255, len(m.encode("utf-8"))) for m in re.findall(r"\S+|\s+", text))


def test_counts_made_ahead_for_an_encoding_replaced_meanwhile_are_not_kept(registered_again: None) -> None:
    old = _bundled("o200k_base")
    held = _Held(quicktok.get_encoding("o200k_base"))
    old.attach_fast(check_engine("o200k_base", held, old))
    held.go.clear()
    held.inside.clear()
    ahead = count_ahead(old, [LONG])
    assert held.inside.wait(10)
    register_encoding("o200k_base", _BlankWords)  # the count cache is cleared now
    held.go.set()
    ahead.wait()  # the thread's counts were the replaced encoding's: not kept
    new = get_encoding("o200k_base")
    assert analyze(new, LONG).tokens == len(new.encode(LONG))


def test_an_encoding_registered_again_keeps_its_own_ids(registered_again: None) -> None:
    """A replacement named o200k_base with the bundled tokens, and so the same length table, but
    two of them ranked otherwise: it encodes "importtime`);" in 6 tokens, quicktok in 4."""
    import tiktoken

    base = _bundled("o200k_base").tiktoken
    ranks = dict(base._mergeable_ranks)
    ranks[b"or"], ranks[b"?|"] = ranks[b"?|"], ranks[b"or"]
    custom = tiktoken.Encoding(
        name="o200k_base", pat_str=base._pat_str, mergeable_ranks=ranks, special_tokens={}
    )
    lengths = _bundled("o200k_base").byte_lengths
    register_encoding("o200k_base", lambda: TiktokenEncoding(custom, lengths, proven_boundaries=True))
    replacement = get_encoding("o200k_base")
    text = "importtime`);"
    expected = custom.encode_ordinary(text)
    assert len(expected) == 6 and len(base.encode_ordinary(text)) == 4
    with pytest.raises(ConfigError, match="'o200k_base' is not the bundled one"):
        use_fast_tokenizer("o200k_base")
    assert replacement.engine == "tiktoken" and replacement.encode(text) == expected  # type: ignore[attr-defined]
    assert use_fast_tokenizer("o200k_base", enabled=False) is False  # nothing to detach: no error
    assert use_fast_tokenizers() == ("cl100k_base",)  # the replacement keeps its own tokenizer


def test_the_gateway_starts_beside_a_plug_in_registered_as_a_bundled_name(
    tmp_path: Any, registered_again: None
) -> None:
    from starlette.testclient import TestClient

    from ctxbudget.gateway import GatewayConfig, create_app

    class Plugin:
        name = "o200k_base"
        proven_boundaries = False

        def encode(self, text: str) -> list[int]:
            return list(text.encode())

        def token_lengths(self, text: str) -> bytes:
            return bytes([1] * len(text.encode()))

    register_encoding("o200k_base", Plugin)
    config = GatewayConfig(store_path=str(tmp_path / "g.db"), fast_tokenizer=True)
    with TestClient(create_app(config)) as client:
        assert client.get("/healthz").status_code == 200
        assert isinstance(get_encoding("o200k_base"), Plugin)
        assert get_encoding("cl100k_base").engine == "quicktok"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: use_fast_tokenizer("o200k_base", enabled="false"), "enabled must be True or False"),
        (lambda: use_fast_tokenizers("o200k_base"), "a list of encoding names"),
        (lambda: use_fast_tokenizers(None), "a list of encoding names"),
        (lambda: use_fast_tokenizers(["o200k_base", "p50k_base"]), "no fast tokenizer for 'p50k_base'"),
    ],
)
def test_wrong_arguments_are_named(call: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        call()
    assert all(_bundled(name).engine == "tiktoken" for name in FAST_ENCODINGS)  # none attached


def test_what_is_not_text_is_refused_whichever_engine_encodes() -> None:
    """tiktoken refuses bytes; quicktok would encode them (their UTF-8 read as a text)."""
    encoding = _bundled("o200k_base")
    use_fast_tokenizer("o200k_base")
    for wrong in (b"abc", bytearray(b"abc"), ["a"]):
        with pytest.raises(TypeError):
            encoding.encode(wrong)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            encoding.token_lengths(wrong)  # type: ignore[arg-type]


def test_astral_text_is_routed_without_a_copy_of_each_character() -> None:
    """Characters beyond the BMP are tested by one class from the first on: a list of them held
    about 65 bytes each (177 MB over 2.75 million emoji)."""
    import tracemalloc

    engine = _checked("o200k_base")
    text = "😀👍🏽🇫🇷👨‍👩‍👧 x" * 20_000
    tracemalloc.start()
    try:
        assert engine._takes(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200_000
    assert not engine._takes(text + "\U000323b0") and engine._takes("plain text")
    for point in [*range(0x10000, 0x110000, 7), 0xFFFFD, 0xFFFFE, 0x10FFFD, 0x10FFFF, 0x2A6DF, 0x2A6E0]:
        character = chr(point)  # exactly those this interpreter calls unassigned are left
        assert engine._takes(f"a{character}b") == (unicodedata.category(character) != "Cn"), hex(point)


def test_serve_told_to_use_it_without_quicktok_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Checked before the banner and the sockets: exit 2 and the extra to install."""
    import sys

    from click.testing import CliRunner

    from ctxbudget.cli import main

    monkeypatch.setitem(sys.modules, "quicktok", None)  # as if not installed
    result = CliRunner().invoke(main, ["serve", "--fast-tokenizer", "--store", str(tmp_path / "s.db")])
    assert result.exit_code == 2
    assert "needs quicktok: pip install 'ctxbudget[fast]'" in result.output
    assert "gateway on" not in result.output
