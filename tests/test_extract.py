"""Extractive compaction: the profiled, remembered extraction equals a naive one written from the
definition (split, count each sentence, BM25 over every sentence's terms), cold or cached, and
``clear_caches`` empties what it remembers."""

from __future__ import annotations

import itertools
import re
import sys
import tracemalloc
from collections import Counter

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import clear_caches, get_encoding, register_encoding
from ctxbudget.simulation.deposition import build_legal_context
from ctxbudget.tokens.counter import TokenCounter, analyze, clear_count_cache
from ctxbudget.trim import extract, profile, sentences
from ctxbudget.trim.bm25 import bm25_scores, terms
from ctxbudget.trim.extract import Extract, extract_sentences
from ctxbudget.trim.profile import sentence_profile, sentence_spans
from ctxbudget.trim.sentences import _END, sentence_ends

COUNTER = TokenCounter(get_encoding("o200k_base"), exact=True)

WORDS = ["Mr.", "Hale", "No.", "12", "U.S.", "shipment", "notice", "Q.", "A.", "It", "was", "late"]
WORDS += ["inspection", "Ünïcode", "İstanbul", "ΣΟΦΙΑΣ", "naïve", "x_y", "3:15", "!", "?", "...", "§"]
PIECES = st.sampled_from([*WORDS, " ", "  ", "\n", ". ", "? ", '." ', "\t", "。", "(J. Doe)"])
TEXTS = st.lists(st.lists(PIECES, max_size=60).map("".join), min_size=1, max_size=5)


def _naive_spans(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for end in [*sentence_ends(text), len(text)]:
        piece = text[start:end]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            spans.append((start + lead, start + len(piece.rstrip())))
        start = end
    return spans


def _naive(texts: list[str], budget: int, query: str, openings: list[int] | None = None) -> Extract:
    """The extraction by definition: each sentence encoded alone costs what starts inside it, and
    a text's first kept sentence also costs the text's opening."""
    opening = openings or [0] * len(texts)
    enc = get_encoding("o200k_base").tiktoken  # type: ignore[attr-defined]
    candidates = []
    for s, text in enumerate(texts):
        starts, offset = [], 0
        for token in enc.decode_tokens_bytes(enc.encode_ordinary(text)):
            starts.append(offset)
            offset += len(token)
        data = text.encode("utf-8")
        for a, b in _naive_spans(text):
            lo, hi = len(text[:a].encode("utf-8")), len(text[:b].encode("utf-8"))
            candidates.append((s, a, b, sum(1 for x in starts if lo <= x < hi and x < len(data))))
    scores = bm25_scores(query, [texts[s][a:b] for s, a, b, _ in candidates])
    chosen, used, opened = set(), 0, set()
    for i in sorted(range(len(candidates)), key=lambda i: (-scores[i], i)):
        s = candidates[i][0]
        cost = candidates[i][3] + 1 + (0 if s in opened else opening[s])
        if used + cost <= budget:
            chosen.add(i)
            opened.add(s)
            used += cost
    kept: list[list[str]] = [[] for _ in texts]
    for i in sorted(chosen):
        s, a, b, _ = candidates[i]
        kept[s].append(texts[s][a:b])
    each = tuple(len(k) for k in kept)
    return Extract(tuple("\n".join(k) for k in kept), used, len(chosen), len(candidates), each)


@settings(max_examples=300, deadline=None)
@given(texts=TEXTS, budget=st.integers(0, 120), query=st.lists(PIECES, max_size=8).map("".join))
def test_extraction_equals_the_naive_definition_cold_and_cached(
    texts: list[str], budget: int, query: str
) -> None:
    clear_caches()
    cold = extract_sentences(texts, budget, query, COUNTER)
    assert cold == _naive(texts, budget, query)
    assert extract_sentences(list(texts), budget, query, COUNTER) == cold  # remembered
    extract._MEMO.clear()
    assert extract_sentences(texts, budget, query, COUNTER) == cold  # from cached profiles


@settings(max_examples=200, deadline=None)
@given(
    texts=TEXTS,
    budget=st.integers(0, 120),
    query=st.lists(PIECES, max_size=8).map("".join),
    data=st.data(),
)
def test_extraction_with_openings_equals_the_naive_definition(
    texts: list[str], budget: int, query: str, data: st.DataObject
) -> None:
    openings = data.draw(st.lists(st.integers(0, 30), min_size=len(texts), max_size=len(texts)))
    clear_caches()
    got = extract_sentences(texts, budget, query, COUNTER, openings)
    assert got == _naive(texts, budget, query, openings)
    assert got.tokens <= budget
    # another set of openings is another extraction, not the remembered one
    assert extract_sentences(texts, budget, query, COUNTER) == _naive(texts, budget, query)


def test_many_short_sources_share_a_small_budget() -> None:
    """Each source's opening is charged only when some of it is kept: 150 sources whose openings
    alone exceed the budget still share it (reserving every opening up front kept none)."""
    texts = [f"Exhibit {n} records the shipment notice. It was late." for n in range(150)]
    got = extract_sentences(texts, 300, "shipment notice late", COUNTER, [8] * 150)
    kept = [t for t in got.texts if t]
    assert 0 < len(kept) < 150
    assert got.tokens <= 300
    assert got == _naive(texts, 300, "shipment notice late", [8] * 150)


def _costs_apart(texts: list[str]) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """Each text's sentence costs read together (:func:`profile._costs_each`), and one text at a time."""
    encoding = get_encoding("o200k_base")
    analyses = [analyze(encoding, t) for t in texts]
    bounds = [profile.sentence_bounds(t) for t in texts]
    return profile._costs_each(analyses, bounds), [
        profile._costs(a, *b) for a, b in zip(analyses, bounds, strict=True)
    ]


def _costs_by_definition(text: str, lengths: bytes) -> tuple[int, ...]:
    """Each sentence's tokens: those whose first byte (the running sum of the lengths before
    them) is inside the sentence's bytes."""
    firsts = list(itertools.accumulate(lengths, initial=0))[:-1]
    costs = []
    for a, b in zip(*profile.sentence_bounds(text), strict=True):
        lo, hi = len(text[:a].encode("utf-8")), len(text[:b].encode("utf-8"))
        costs.append(sum(1 for x in firsts if lo <= x < hi))
    return tuple(costs)


@settings(max_examples=300, deadline=None)
@given(texts=TEXTS)
def test_sentence_costs_are_the_tokens_starting_in_each_sentence(texts: list[str]) -> None:
    """ASCII texts are costed from a mask of their tokens' first bytes, others by running sums:
    both are the definition."""
    encoding = get_encoding("o200k_base")
    for text in [*texts, "".join(t for t in texts if t.isascii())]:
        analysis = analyze(encoding, text)
        got = profile._costs(analysis, *profile.sentence_bounds(text))
        assert got == _costs_by_definition(text, analysis.lengths)


class _EmptyBeforeDotted:
    """A plug-in: a token a run of non-blanks or blanks, and before each word that ends with a dot
    a token of no bytes (it marks nothing in a mask of first bytes, yet starts in its sentence)."""

    name = "empty-before-dotted"
    proven_boundaries = False

    def encode(self, text: str) -> list[int]:
        return list(self.token_lengths(text))

    def token_lengths(self, text: str) -> bytes:
        pieces = re.findall(r"\S+|\s+", text)
        return bytes(n for m in pieces for n in ((0, len(m)) if m.endswith(".") else (len(m),)))


def test_a_plug_ins_tokens_of_no_bytes_are_costed_where_they_start() -> None:
    register_encoding("empty-before-dotted", _EmptyBeforeDotted)
    text = "Alpha beta. Gamma delta epsilon. Zeta."
    analysis = analyze(get_encoding("empty-before-dotted"), text)
    assert 0 in analysis.lengths
    got = profile._costs(analysis, *profile.sentence_bounds(text))
    assert got == _costs_by_definition(text, analysis.lengths) == (4, 6, 2)


@settings(max_examples=300, deadline=None)
@given(texts=TEXTS)
def test_sentence_costs_read_together_are_each_texts_own(texts: list[str]) -> None:
    pytest.importorskip("numpy")  # loaded: the ASCII texts' costs are read by one lookup
    together, apart = _costs_apart([t for t in texts if t])
    assert together == apart


class _CappedWords:
    """A plug-in: a token a run of non-blanks or blanks, its length capped at a byte's 255 (so
    the lengths of a text with a longer word do not sum to its size)."""

    name = "capped-words"
    proven_boundaries = False

    def encode(self, text: str) -> list[int]:
        return [len(m) for m in re.findall(r"\S+|\s+", text)]

    def token_lengths(self, text: str) -> bytes:
        return bytes(min(255, len(m.encode("utf-8"))) for m in re.findall(r"\S+|\s+", text))


def test_sentence_costs_read_together_hold_to_each_texts_own_tokens() -> None:
    """The texts after one whose lengths fall short of its size were costed from the wrong
    tokens (0 tokens a sentence), and an extraction then kept 12 tokens for a budget of 4."""
    pytest.importorskip("numpy")
    register_encoding("capped-words", _CappedWords)
    encoding = get_encoding("capped-words")
    texts = ["x" * 300 + " end. Short one.", "Alpha beta gamma. Delta epsilon. Zeta."]
    analyses = [analyze(encoding, t) for t in texts]
    bounds = [profile.sentence_bounds(t) for t in texts]
    apart = [profile._costs(a, *b) for a, b in zip(analyses, bounds, strict=True)]
    assert profile._costs_each(analyses, bounds) == apart == [(7, 0), (5, 3, 1)]


def test_sentence_costs_without_numpy_loaded_are_read_a_text_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # as in a process that never imported it
    texts = ["Mr. Hale was late. It was. ", "Ünïcode text. Next one!", "A. No.\nQ. Why?", "x"]
    together, apart = _costs_apart(texts)
    assert together == apart


def test_spans_are_the_trimmed_sentences() -> None:
    text = "  Mr. Hale arrived.  It was late!\n\nQ. Did you see it?\nA. No.  "
    assert list(sentence_spans(text)) == _naive_spans(text)


def test_clear_caches_empties_profiles_and_remembered_extractions() -> None:
    extract_sentences(["Mr. Hale was late. The shipment was late too."], 5, "late", COUNTER)
    assert extract._MEMO and len(profile._PROFILES)
    clear_caches()
    assert not extract._MEMO
    assert len(profile._PROFILES) == 0


def test_cached_profiles_are_bounded_by_the_characters_they_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server profiling distinct documents: the cache held 1,024 profiles (and 4,096 sentence
    splits) whatever their size, each with its text and a lower-cased copy: 1 MB documents grew
    it towards gigabytes. It holds PROFILE_CHARS characters of text (8 million; 200,000 here)."""
    monkeypatch.setattr(profile._PROFILES, "max_weight", 200_000)
    page = "The letter went out on March 3. Notice was given to the buyer in writing.\n" * 500
    sentence_profile("o200k_base", page)
    clear_caches()  # the encoder is built: what follows is what the caches keep
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(50):  # 50 distinct documents of 37 kB: 1.9 million characters
            sentence_profile("o200k_base", f"Document {n}.\n{page}")
        clear_count_cache()  # the count cache has its own bound (tokens)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        clear_caches()
    assert held < 2_000_000, f"{held:,} bytes held by the profiles of 1.9 million characters"


def test_remembered_extractions_are_bounded_by_the_characters_they_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each remembered extraction's key holds its source texts: 32 of them were kept whatever
    their size (32 compact tiers of distinct multi-megabyte transcripts). They are bounded by the
    characters of their texts too (16 million; 200,000 here)."""
    monkeypatch.setattr(extract._MEMO, "max_weight", 200_000)
    counter = TokenCounter(get_encoding("o200k_base"), exact=True)
    page = "The letter went out on March 3. Notice was given to the buyer in writing.\n" * 500
    extract_sentences([page], 50, "notice", counter)
    clear_caches()  # the encoder is built: what follows is what the caches keep
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(30):  # 30 distinct transcripts of 37 kB: 1.1 million characters
            extract_sentences([f"Page {n}.\n{page}"], 50, "notice", counter)
            profile.clear_profile_cache()  # its own bound (characters), tested above
            clear_count_cache()  # its own bound (tokens)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        clear_caches()
    assert held < 600_000, f"{held:,} bytes held by extractions of 1.1 million characters"


@settings(max_examples=300, deadline=None)
@given(text=st.lists(PIECES, max_size=80).map("".join), query=st.lists(PIECES, max_size=8).map("".join))
def test_a_profile_counts_each_sentence_as_bm25_reads_it(text: str, query: str) -> None:
    profile = sentence_profile("o200k_base", text)
    words = [terms(text[a:b]) for a, b in zip(profile.starts, profile.ends, strict=True)]
    assert list(profile.lengths) == [len(w) for w in words]
    query_terms = set(terms(query))
    expected = {i: {t: Counter(w)[t] for t in query_terms if t in w} for i, w in enumerate(words)}
    assert profile.hits(query_terms) == {i: c for i, c in expected.items() if c}


# The sentence-end pattern as first written: a repeat or a newline, tried at every position.
PLAIN_END = re.compile(rf"[.!?]+[\"'”’)\]]*(?=\s)|[{sentences.WIDE_ENDS}]+{sentences.WIDE_CLOSING}|\n")
END_PIECES = st.sampled_from([*".!?。！？\n \t\"'”’)]」』»x\u0964\u061f\u06d4", "Mr", "a b"])


@settings(max_examples=500, deadline=None)
@given(text=st.lists(END_PIECES, max_size=30).map("".join), data=st.data())
def test_the_sentence_end_pattern_finds_what_the_plain_one_finds(text: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(text)))
    stop = data.draw(st.integers(start, len(text)))
    found = [(m.span(), m.group()) for m in sentences._end_matches(_END, text, start, stop)]
    assert found == [(m.span(), m.group()) for m in PLAIN_END.finditer(text, start, stop)]


def _plain_sentence_ends(text: str, start: int) -> list[int]:
    """Sentence ends from ``start`` by the rule read in Python at every candidate (the definition)."""
    first_visible, last, ends = len(text) - len(text.lstrip()), start, []
    for match in PLAIN_END.finditer(text, start):
        begin, end = match.span()
        if text[begin] == "\n":
            end = begin
        elif text[begin] in ".!?" and not sentences._is_end(text, begin, end):
            continue
        else:  # past what extends the end's last character (a mark on 。): the next cluster boundary
            end = _cluster_end(text, end)
        if end > first_visible and end > last:
            last = end
            ends.append(end)
    return ends


def _cluster_end(text: str, at: int) -> int:
    """The first grapheme-cluster boundary at or after ``at`` (``regex``'s ``\\X``)."""
    return next((m.end() for m in regex.finditer(r"\X", text) if m.end() >= at), len(text)) if at else 0


CLUSTER_PIECES = st.sampled_from(
    [
        *"。！？.?!\n \u0964",
        "\u0301",
        "\u200d",
        "\u200c",
        "\ufe0f",
        "\U0001f3fb",
        "a",
        "é",
        "x\u0301",
        "🏳",
        "\r\n",
        "\u0e33",  # Thai SARA AM, a letter by its category that extends a cluster
        "\u0eb3",
        "\uff9e",  # halfwidth katakana voiced sound mark
        "\u0e01",
        "\u0915\u093f",
    ]
)


@settings(max_examples=500, deadline=None)
@given(text=st.lists(CLUSTER_PIECES, max_size=30).map("".join), data=st.data())
def test_no_sentence_starts_or_ends_inside_a_user_perceived_character(text: str, data: st.DataObject) -> None:
    """A mark, a joiner, a selector or a modifier after an end mark (一。́) belongs to its cluster,
    and one on the blank before a sentence to the blank: no sentence end or span edge falls inside
    one (a line's end stands at its newline, inside a CR LF, and its span ends before the CR)."""
    boundaries = {m.end() for m in regex.finditer(r"\X", text)} | {0}
    start = data.draw(st.integers(0, len(text)))
    for end in [
        *sentences._settled_ends(text, start),
        *sentences.iter_sentence_ends(text, start, len(text) // 2),
    ]:
        assert end in boundaries or text[end] == "\n", (text, end)
    for a, b in sentence_spans(text):
        assert a in boundaries and b in boundaries, (text, a, b)


# Abbreviations in either case, after a space or not, words of every length around the longest
# abbreviation, characters that fold or are lower case beyond ASCII, closers, runs and spaces.
SETTLED_EXTRA = ["mr.", "MR.", "messrs.", "Approx.", "abcdef.", "abcdefg.", "ſec.", "é.", "(Mr.", '"Sec.']
SETTLED_EXTRA += [
    "1.",
    "?!",
    "...",
    ".)",
    '."',
    " ",
    "  ",
    "\n",
    ". ",
    "? ",
    "\t",
    "。",
    "！",
    "」",
    "\u2003",
]
SETTLED_EXTRA += ["\x0b", "a", "ü", "Z", " é"]
SETTLED_EXTRA += ["U.S.", "u.c.c.", "A.B.C.D.E.", "a.", "25th.", "4th", "1a.", "(U.S.", "9", "Th."]
SETTLED_EXTRA += ["3.", "12.", " März", " Okt.", " 2025", " der", "(Rn.", " Abs.", " 2", "L'art.", " Ärger"]
SETTLED_PIECES = st.sampled_from([*WORDS, *SETTLED_EXTRA])


@settings(max_examples=1500, deadline=None)
@given(text=st.lists(SETTLED_PIECES, max_size=40).map("".join), data=st.data())
def test_the_settled_sentence_ends_are_the_plain_rules(text: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(text)))
    assert sentences._settled_ends(text, start) == _plain_sentence_ends(text, start)
    assert list(sentences.iter_sentence_ends(text, start)) == _plain_sentence_ends(text, start)


# Dotted abbreviations and words of letters after digits, whole and in parts, after a space, a
# bracket, a quote or a letter, and what may follow them.
DOTTED_PIECES = st.sampled_from(
    [
        *["U.S.", "(U.S.", '"U.S.', "u.c.c.", "A.B.C.D.E.", "A.B.C.D.E.F.", "U.", "S.", "s.", "a.", "ab."],
        *["x", "9", "25th.", "4th", "th.", "1a.", "5rn.", "12.", " ", "  ", "\n", " Next", " next", " 2"],
        *["(", ".", "é."],
    ]
)


@settings(max_examples=1500, deadline=None)
@given(text=st.lists(DOTTED_PIECES, max_size=12).map("".join), data=st.data())
def test_the_settled_ends_after_dotted_and_numbered_words_are_the_plain_rules(
    text: str, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(text)))
    assert sentences._settled_ends(text, start) == _plain_sentence_ends(text, start)


def test_every_short_run_of_dotted_and_numbered_words_ends_as_the_plain_rules_say() -> None:
    """Every text of up to three of these pieces between each lead and tail (17,568 texts)."""
    middles = ["U.", "S.", "9.", "ab.", "25th.", "th.", "x", "(", '"', "a.", "5rn."]
    for count in range(4):
        for middle in itertools.product(middles, repeat=count):
            for lead, tail in itertools.product([" ", "", "x"], [" Next", " next", "\n", ""]):
                text = lead + "".join(middle) + tail
                assert sentences._settled_ends(text, 0) == _plain_sentence_ends(text, 0), text


def test_the_settled_sentence_ends_on_the_bundled_request() -> None:
    for item in build_legal_context()["items"]:
        assert sentence_ends(item["text"]) == _plain_sentence_ends(item["text"], 0)


@pytest.mark.parametrize("run", [".", "!?", ".)"])
def test_a_long_run_of_end_marks_is_read_once(run: str) -> None:
    # Tried at each of its characters, a run not followed by whitespace was read to its end from
    # every one: 300,000 characters took minutes. Read once, it finishes at once (no end in it).
    text = run * 150_000 + "x"
    assert sentence_ends(text) == []
    assert list(sentences.iter_sentence_ends(text, 5, len(text) - 2)) == []
    assert sentences.last_sentence_end(text + " Next.", len(text) - 2) == 0
    assert sentence_ends(text[:-1] + " Next") == [len(text) - 1]


LONG_WORDS = st.sampled_from(["notice", "warranty", "x" * 700, "Q.", "It", "was", "late.", "§"])
LONG_GAPS = st.sampled_from([" ", "  ", "\n", "\t", " \n "])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(LONG_WORDS, LONG_GAPS), min_size=1, max_size=900).map(
        lambda pairs: "".join(w + g for w, g in pairs)
    )
)
def test_long_sentences_are_cut_at_whitespace_and_nothing_is_lost(text: str) -> None:
    spans = sentence_spans(text)
    whole = _naive_spans(text)  # the sentences before any cut
    edges = {a for a, _ in whole} | {b for _, b in whole}
    assert "".join(text.split()) == "".join("".join(text[a:b].split()) for a, b in spans)
    assert all(a < b and text[a:b] == text[a:b].strip() for a, b in spans)
    assert all(b1 <= a2 for (_, b1), (a2, _) in itertools.pairwise(spans))
    for a, b in spans:
        for edge, beside in ((a, a - 1), (b, b)):
            assert edge in edges or text[beside].isspace()  # a cut never splits a word
        if b not in edges:  # a cut piece: as long as allowed, or no whitespace to cut at before
            room = text[a:].encode("utf-8")[: profile.LONG_SENTENCE_BYTES].decode("utf-8", "ignore")
            assert len(text[a:b].encode("utf-8")) <= profile.LONG_SENTENCE_BYTES or not any(
                c.isspace() for c in room
            )
    short = [s for s in whole if len(text[s[0] : s[1]].encode("utf-8")) <= profile.LONG_SENTENCE_BYTES]
    assert short == [s for s in spans if s in short]  # short sentences stay whole


def test_a_text_without_sentence_ends_is_extracted_in_pieces() -> None:
    # one 14,000-character run-on sentence (a table, OCR output) was a single unit, dropped
    # whole from any budget below its cost
    rows = [f"row {n} shipment {n * 7} notice pending" for n in range(400)]
    text = " | ".join(rows)
    got = extract_sentences([text], 1_000, "shipment notice", COUNTER)
    assert 0 < got.sentences_kept < got.sentences_total
    assert 0 < got.tokens <= 1_000
    for piece in got.texts[0].split("\n"):
        assert piece in text and len(piece.encode("utf-8")) <= profile.LONG_SENTENCE_BYTES


def test_unspaced_script_without_sentence_ends_is_cut_at_the_length() -> None:
    text = "通知は書面で送られました" * 600  # 21,600 bytes, no space, no full stop
    spans = sentence_spans(text)
    sizes = [len(text[a:b].encode("utf-8")) for a, b in spans]
    assert all(profile.LONG_SENTENCE_BYTES - 3 < n <= profile.LONG_SENTENCE_BYTES for n in sizes[:-1])
    assert "".join(text[a:b] for a, b in spans) == text
    got = extract_sentences([text], 1_000, "通知", COUNTER)
    assert 0 < got.sentences_kept < len(spans) and got.tokens <= 1_000


@pytest.mark.parametrize(
    "text",
    [
        "a" + "e\u0301" * 1000,  # e and a combining acute accent: 3 bytes a character
        "\U0001f468\u200d\U0001f469\u200d\U0001f467" * 200,  # a family emoji, joined by ZWJs
        "ก่" * 1500,  # Thai: a consonant and its tone mark
        "a" + "\u0301" * 3000 + "b" * 10,  # one character over the size stays whole
    ],
)
def test_unspaced_pieces_are_never_cut_inside_a_character(text: str) -> None:
    clusters = {m.start() for m in regex.finditer(r"\X", text)} | {len(text)}
    spans = sentence_spans(text)
    assert "".join(text[a:b] for a, b in spans) == text
    assert all(a in clusters and b in clusters for a, b in spans)
