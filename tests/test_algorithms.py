"""Pure trimming and allocation algorithms, on hand-made costs (no tokenizer involved)."""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxbudget.fitting._budget import BudgetSplit, allocate, budget_ceiling
from ctxbudget.items import Cut, Item
from ctxbudget.trim import bm25
from ctxbudget.trim.bm25 import bm25_from_profile, bm25_scores, term_profile
from ctxbudget.trim.history import newest_unit, select_history, units_of
from ctxbudget.trim.shares import proportional_shares, shares_keeping_short


def _messages(n: int, groups: dict[int, int] | None = None) -> list[Item]:
    groups = groups or {}
    return [
        Item(component="history", index=i, path=f"h{i}", text=f"m{i}", group=groups.get(i, i))
        for i in range(n)
    ]


@given(st.lists(st.integers(-2, 3), min_size=1, max_size=12))
@example([1, 1, -1, -1])  # messages of no group are a unit each, even next to each other
@example([0, 0, 0])
def test_the_newest_unit_read_from_the_end_is_the_grouping_last(groups: list[int]) -> None:
    messages = _messages(len(groups), dict(enumerate(groups)))
    assert newest_unit(messages) == units_of(messages)[-1]


def _no_truncation(item: Item, budget: int) -> Cut:
    raise AssertionError("nothing should be truncated here")


@given(
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 2_000)), min_size=1, max_size=5),
    st.integers(0, 6_000),
)
def test_a_unit_is_cut_by_its_text_never_below_what_no_cut_removes(
    sizes: list[tuple[int, int]], budget: int
) -> None:
    """The newest unit (a tool group) shrinks its texts by a common level: a message whose tokens
    are mostly fixed (thinking, tool calls) does not take the cut meant for a text."""
    fixed = {i: f for i, (f, _) in enumerate(sizes)}
    costs = {i: f + t for i, (f, t) in enumerate(sizes)}
    messages = _messages(len(sizes), groups=dict.fromkeys(range(len(sizes)), 0))

    def shrink(item: Item, tokens: int) -> Cut:  # a fake cut: a text of exactly what is left
        assert tokens >= fixed[item.index], "asked to cut into what no cut removes"
        return Cut("x", (), tokens)

    chosen = select_history(messages, costs, budget, placeholder_cost=0, shrink=shrink, fixed=fixed)
    if sum(fixed.values()) <= budget:
        assert chosen.tokens <= budget
        kept_text = [chosen.decisions[i].action for i in costs]
        assert "dropped" not in kept_text and "summarized" not in kept_text


def test_history_that_fits_its_budget_exactly_is_kept_whole() -> None:
    messages = _messages(6)
    chosen = select_history(
        messages, dict.fromkeys(range(6), 10), 60, placeholder_cost=5, shrink=_no_truncation
    )
    assert {d.action for d in chosen.decisions.values()} == {"kept"}
    assert chosen.placeholder_after is None


def test_history_keeps_first_and_recent_and_counts_the_omitted() -> None:
    messages = _messages(10)
    chosen = select_history(
        messages, dict.fromkeys(range(10), 10), 45, placeholder_cost=5, shrink=_no_truncation
    )
    kept = [i for i, d in sorted(chosen.decisions.items()) if d.action == "kept"]
    assert kept == [0, 7, 8, 9]
    assert chosen.omitted == 6 and chosen.placeholder_after == 0
    assert chosen.tokens <= 45


def test_a_tool_group_is_kept_or_dropped_whole() -> None:
    messages = _messages(6, groups={2: 1, 3: 1})  # 1,2,3 are a tool call and its results
    chosen = select_history(
        messages, dict.fromkeys(range(6), 10), 35, placeholder_cost=0, shrink=_no_truncation
    )
    actions = {i: d.action for i, d in chosen.decisions.items()}
    assert len({actions[1], actions[2], actions[3]}) == 1


@given(st.integers(0, 10_000), st.lists(st.integers(0, 5_000), max_size=8))
def test_shares_never_exceed_the_budget_or_an_entry(budget: int, sizes: list[int]) -> None:
    shares = proportional_shares(budget, sizes)
    assert sum(shares) <= max(budget, 0) or sum(sizes) <= budget
    assert all(0 <= s <= size for s, size in zip(shares, sizes, strict=True))
    if sum(sizes) > budget > 0:
        assert sum(shares) == budget


@given(st.integers(0, 10_000), st.lists(st.integers(0, 5_000), max_size=8))
def test_shares_keeping_short_spend_the_budget_and_keep_short_entries_whole(
    budget: int, sizes: list[int]
) -> None:
    shares = shares_keeping_short(budget, sizes)
    assert all(0 <= s <= size for s, size in zip(shares, sizes, strict=True))
    if sum(sizes) <= budget:
        assert shares == sizes
        return
    assert sum(shares) == max(budget, 0)
    # an entry no larger than an equal share of the budget is never cut
    assert all(s == size for s, size in zip(shares, sizes, strict=True) if size * len(sizes) <= budget)
    # the entries cut share what the whole ones leave in proportion to their sizes
    cut = [i for i, (s, size) in enumerate(zip(shares, sizes, strict=True)) if s < size]
    left = budget - sum(size for s, size in zip(shares, sizes, strict=True) if s == size and size)
    assert [shares[i] for i in cut] == proportional_shares(left, [sizes[i] for i in cut])


@given(
    st.integers(0, 100_000),
    st.dictionaries(st.sampled_from(["system", "query", "documents", "history"]), st.integers(0, 60_000)),
)
def test_allocation_stays_within_the_pool_and_gives_unused_budget_away(
    pool: int, needs: dict[str, int]
) -> None:
    split = BudgetSplit.from_mapping(None)
    budgets = allocate(pool, split, needs)  # type: ignore[arg-type]
    assert sum(budgets.values()) <= pool
    if sum(needs.values()) <= pool:
        assert all(budgets[c] >= needs.get(c, 0) for c in budgets)


components = st.sampled_from(["system", "query", "documents", "history"])
percentages = st.dictionaries(components, st.integers(0, 100), min_size=1)


@given(
    st.integers(0, 100_000),
    st.integers(0, 100_000),
    percentages,
    st.dictionaries(components, st.integers(0, 60_000)),
    st.dictionaries(components, st.integers(0, 10_000)),
    components,
    st.integers(1, 200_000),
)
def test_a_need_over_its_ceiling_never_changes_an_allocation(
    pool: int,
    smaller: int,
    pcts: dict[str, int],
    needs: dict[str, int],
    under: dict[str, int],
    component: str,
    above: int,
) -> None:
    split = BudgetSplit.from_mapping(pcts)
    # What the fit knows of the other needs: lower bounds of them.
    at_least = {c: max(0, needs.get(c, 0) - under.get(c, 0)) for c in needs}
    ceiling = budget_ceiling(pool, split, at_least, component)  # type: ignore[arg-type]
    for p in (pool, min(pool, smaller)):  # the first pool, and any smaller one a later round uses
        budgets = allocate(p, split, needs)  # type: ignore[arg-type]
        assert budgets[component] <= ceiling  # type: ignore[index]
        if needs.get(component, 0) > ceiling:
            # any other need over the ceiling gives the same budgets
            other = {**needs, component: ceiling + above}
            assert allocate(p, split, other) == budgets  # type: ignore[arg-type]


def test_bm25_scores_are_the_same_floats_whatever_the_hash_seed() -> None:
    # A score sums over the query's terms; summed in a set's order, the last bits changed with
    # the process's hash seed (and so could a near tie between passages).
    script = (
        "from ctxbudget.trim.bm25 import bm25_scores;"
        "w=[f'w{i}' for i in range(30)];"
        "p=[' '.join(w[(i*7+k)%30] for k in range(1+i%9))*(1+i%4) for i in range(40)];"
        "print([repr(s) for s in bm25_scores(' '.join(w), p)])"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in (1, 2, 3, 4)
    }
    assert len(outputs) == 1


ascii_words = st.sampled_from(["alpha", "Beta", "beta_2", "x", "42", "gamma-ray", "o'neil", "a.b", "DELTA"])
passage_text = st.lists(ascii_words, max_size=12).map(" ".join) | st.text(
    alphabet=st.characters(max_codepoint=0x7F), max_size=40
)


@given(st.lists(passage_text, max_size=8), st.lists(ascii_words, max_size=5).map(" ".join))
def test_bm25_read_in_c_gives_the_floats_of_the_word_counters(passages: list[str], query: str) -> None:
    expected = bm25_from_profile(query, *term_profile(passages)) if passages else []
    assert [repr(float(s)) for s in bm25_scores(query, passages)] == [repr(float(s)) for s in expected]


TERM_WORDS = st.sampled_from(["notice", "letter", "not", "no", "ice", "sent", "x1", "a_b", "é"])


@given(
    words=st.lists(TERM_WORDS, max_size=60),
    glue=st.lists(st.sampled_from([" ", "-", ".", "'", "__", "\n"]), min_size=1),
    wanted=st.lists(TERM_WORDS, unique=True),
)
def test_one_pass_over_the_words_finds_what_a_search_per_term_finds(
    words: list[str], glue: list[str], wanted: list[str]
) -> None:
    # Past MANY_TERMS terms the words are read once; both ways must find the same places.
    text = "".join(w + glue[n % len(glue)] for n, w in enumerate(words)).lower()
    if not text.isascii():
        return
    ascii_wanted = [w for w in wanted if w.isascii()]
    assert sorted(bm25._words_among(text, frozenset(ascii_wanted))) == sorted(
        bm25._each_term(text, ascii_wanted)
    )


SENTENCE_WORDS = st.sampled_from(["notice", "Notice", "not", "ice", "aaaa", "aa", "x1", "a_b", "the", "é"])


@settings(max_examples=300, deadline=None)
@given(
    sentences=st.lists(st.lists(SENTENCE_WORDS, max_size=12).map(" ".join), max_size=12),
    wanted=st.lists(SENTENCE_WORDS.map(str.lower), unique=True, max_size=6)
    | st.lists(st.text(alphabet="abcx1", min_size=1, max_size=3), unique=True, min_size=33, max_size=40),
)
def test_bm25_of_a_text_read_with_numpy_gives_the_floats_of_its_hits(
    sentences: list[str], wanted: list[str]
) -> None:
    """With numpy loaded, the scores of a text's spans are read per term at once: the same floats
    as from the hits one at a time (a search per term, terms repeating themselves, and past
    MANY_TERMS terms the pass over the words)."""
    pytest.importorskip("numpy")
    text = " ".join(sentences).lower()
    if not text.isascii():
        return
    starts = list(itertools.accumulate((len(s) + 1 for s in sentences[:-1]), initial=0)) if sentences else []
    lengths = bm25.span_word_counts(bm25.word_mask(text), starts, [*starts[1:], len(text)][: len(starts)])
    expected = bm25.bm25_from_hits(wanted, bm25.ascii_term_hits(text, wanted, starts), lengths)
    assert [repr(s) for s in bm25.bm25_of_text(text, wanted, starts, lengths)] == [repr(s) for s in expected]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sentences=st.lists(st.lists(SENTENCE_WORDS, max_size=12).map(" ".join), min_size=1, max_size=12),
    gaps=st.lists(st.integers(0, 6), min_size=12, max_size=12),
    query=st.lists(SENTENCE_WORDS, max_size=8).map(" ".join)
    | st.lists(st.text(alphabet="abcx1", min_size=1, max_size=3), min_size=33, max_size=40).map(" ".join),
)
def test_span_scores_read_with_numpy_are_the_floats_of_their_hits(
    sentences: list[str], gaps: list[int], query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spans with text between them (a passage's gap, whose terms count for neither): with numpy
    loaded the same floats as read hit by hit."""
    numpy = pytest.importorskip("numpy")
    text, spans = "", []
    for sentence, gap in zip(sentences, gaps, strict=False):
        text += "notice the " * gap  # query words between spans
        spans.append((len(text), len(text) + len(sentence)))
        text += sentence + " "
    monkeypatch.setattr(bm25, "loaded_numpy", lambda: None)
    expected = bm25.bm25_span_scores(query, text, spans)
    monkeypatch.setattr(bm25, "loaded_numpy", lambda: numpy)
    assert [repr(s) for s in bm25.bm25_span_scores(query, text, spans)] == [repr(s) for s in expected]


@pytest.mark.parametrize(
    ("text", "spans"),
    [
        ("01 01", [(0, 2), (5, 5), (2, 5)]),  # out of order
        ("a b a", [(0, 3), (2, 5)]),  # overlapping
        ("a b", [(0, 1), (2, 2**63)]),  # past the text (and past numpy's integers)
        ("a b", [(0, 10**20)]),
    ],
)
def test_span_scores_of_spans_out_of_their_contract_do_not_hang_on_numpy(
    text: str, spans: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spans that are not in order, apart and inside the text are a caller's mistake: they score
    as the reading hit by hit scores them, whether numpy is loaded or not (no OverflowError)."""
    numpy = pytest.importorskip("numpy")
    query = text.split()[0]
    monkeypatch.setattr(bm25, "loaded_numpy", lambda: None)
    expected = bm25.bm25_span_scores(query, text, spans)
    monkeypatch.setattr(bm25, "loaded_numpy", lambda: numpy)
    assert [repr(s) for s in bm25.bm25_span_scores(query, text, spans)] == [repr(s) for s in expected]


def test_bm25_of_the_bundled_transcript_read_with_numpy_gives_the_floats_of_its_hits() -> None:
    pytest.importorskip("numpy")
    from ctxbudget.simulation.deposition import build_legal_context

    pages = [i["text"] for i in build_legal_context()["items"] if i.get("tier") == "contextual"]
    text = " ".join(pages).lower()
    starts = list(itertools.accumulate((len(p) + 1 for p in pages[:-1]), initial=0))
    spans = list(zip(starts, [*starts[1:], len(text)], strict=True))
    lengths = bm25.span_word_counts(bm25.word_mask(text), starts, [b for _, b in spans])
    for query in ["notice of the defect", "Inspection Maintenance ChangeOrder", "the a of to and in"]:
        wanted = bm25.query_terms(query)
        expected = bm25.bm25_from_hits(wanted, bm25.ascii_term_hits(text, wanted, starts), lengths)
        assert [repr(s) for s in bm25.bm25_of_text(text, wanted, starts, lengths)] == [
            repr(s) for s in expected
        ]


def test_bm25_scores_do_not_hang_on_how_the_interpreter_sums_floats(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sum`` of floats is compensated from Python 3.12 on: the scores add their shares in turn
    instead, so they are the same floats on every interpreter (here: ``sum`` made exact)."""
    from ctxbudget.simulation.deposition import build_legal_context

    pages = [i["text"] for i in build_legal_context()["items"] if i.get("tier") == "contextual"]
    query = "notice inspection maintenance of the defect before the claim"
    before = bm25_scores(query, pages)
    monkeypatch.setattr(bm25, "sum", math.fsum, raising=False)
    assert [repr(s) for s in bm25_scores(query, pages)] == [repr(s) for s in before]
    assert [repr(s) for s in bm25_from_profile(query, *term_profile(pages))] == [repr(s) for s in before]


def test_a_percentage_given_as_a_boolean_is_junk_not_one_percent() -> None:
    split = BudgetSplit.from_mapping({"system": True, "history": False})
    assert split.percentages["system"] == 0 and split.percentages["history"] == 0
    assert any("system budget True is not a number" in w for w in split.warnings)


_CLUSTERED = st.text(
    alphabet=st.sampled_from(
        [
            "a",
            "e",
            " ",
            "\u0301",
            "\u200d",
            "👨",
            "👩",
            "\ufe0f",
            "ก",
            "\u0e49",
            "\u0e39",
            "🇫",
            "🇷",
            "\r",
            "\n",
            "é",
        ]
    ),
    max_size=40,
)


@given(_CLUSTERED, st.integers(0, 40))
def test_a_cut_moved_to_a_grapheme_boundary_never_splits_a_character(text: str, at: int) -> None:
    import regex

    from ctxbudget.trim.text import grapheme_ceil, grapheme_floor

    at = min(at, len(text))
    boundaries = {0, *(m.end() for m in regex.finditer(r"\X", text, flags=regex.DOTALL))}
    floor, ceil = grapheme_floor(text, at), grapheme_ceil(text, at)
    assert floor in boundaries and ceil in boundaries
    assert floor <= at <= ceil and (at in boundaries) == (floor == at == ceil)


@given(
    st.lists(
        st.sampled_from(["\U0001f1eb", "\U0001f1f7", "\u0600", "\u0301", "\u200d", "a", " ", "👨"]),
        max_size=60,
    ),
    st.integers(0, 60),
)
def test_a_cut_in_a_run_of_flags_moves_to_the_nearest_boundaries(chars: list[str], at: int) -> None:
    """Regional indicators pair from their run's start (read once a run, not by ``\\X`` from the
    cut): the floor and the ceiling are the nearest boundaries ``regex`` finds, prepended marks
    (U+0600) and accents after a flag included."""
    import regex

    from ctxbudget.trim.text import grapheme_ceil, grapheme_floor

    text = "".join(chars)
    at = min(at, len(text))
    boundaries = {0, *(m.end() for m in regex.finditer(r"\X", text, flags=regex.DOTALL))}
    assert grapheme_floor(text, at) == max(b for b in boundaries if b <= at)
    assert grapheme_ceil(text, at) == min(b for b in boundaries if b >= at)


def test_a_long_run_of_flags_is_cut_between_flags() -> None:
    from ctxbudget.trim.text import grapheme_ceil, grapheme_floor

    text = "x" + "\U0001f1eb\U0001f1f7" * 50_000
    for at in (2, 3, 99_999, 100_000, 100_001):
        assert grapheme_floor(text, at) == at - (at - 1) % 2 and grapheme_ceil(text, at) == at + (at - 1) % 2


def test_a_character_longer_than_the_window_read_around_a_cut_is_found_whole() -> None:
    """Two hundred accents on one letter: the cut's window was inside the cluster."""
    from ctxbudget.trim.text import grapheme_ceil, grapheme_floor

    text = "x" * 100 + "a" + "\u0301" * 300 + "b"
    assert {grapheme_floor(text, at) for at in range(101, 401)} == {100}
    assert {grapheme_ceil(text, at) for at in range(101, 401)} == {401}


def test_a_question_formats_role_cut_keeps_accents_emoji_and_thai_marks_whole() -> None:
    """NFD "Café" was cut to "Cafe", a family emoji to a dangling joiner, a Thai consonant from its vowel."""
    import unicodedata

    from ctxbudget import fit

    texts = (
        "Cafe\u0301" * 3000,
        "👨\u200d👩\u200d👧\u200d👦" * 2000,
        "ผู้ซื้อได้ส่งหนังสือแจ้งเตือนเรื่องสินค้าที่ชำรุด" * 200,
    )
    for text in texts:
        for window in range(300, 700, 37):
            kept = fit(
                {"questions": [{"text": "Q?"}], "role": text}, model="gpt-4o", max_context_tokens=window
            )
            out = kept.request["role"]
            after = text[len(out) : len(out) + 1]
            assert text.startswith(out) and not out.endswith("\u200d")
            assert not after or not (
                unicodedata.combining(after) or unicodedata.category(after) in ("Mn", "Mc")
            )


# Mostly ASCII, as text read the ASCII way is (a capital sigma, an "İ" or a text mostly beyond
# ASCII is read by the counters, the reference itself)
wide_words = st.sampled_from(
    ["alpha", "Beta", "x", "notice", "café", "CAFÉ", "naïve", "Straße"]
) | st.sampled_from(
    ["İstanbul", "ΣΟΦΙΑ", "σοφία", "東京", "人口は", "gpt4東京", "٣٤", "e\u0301", "ﬁle", "Ǆemal"]
)
wide_glue = st.sampled_from([" ", " ", " ", "\n", "—", "’", "\u00a0", "-", "…", "🙂", ""])


@given(
    st.lists(st.lists(st.tuples(wide_words, wide_glue), max_size=8), max_size=6),
    st.lists(wide_words, max_size=4).map(" ".join),
)
def test_bm25_of_text_beyond_ascii_gives_the_floats_of_the_word_counters(
    passages: list[list[tuple[str, str]]], query: str
) -> None:
    """Text with a curly quote, an accent or another script is read in C as ASCII text is (a mask
    of the same length), unless lower-casing moves its offsets (a capital sigma, "İ"): the same
    floats as counting each passage's words either way."""
    texts = ["".join(word + glue for word, glue in passage) for passage in passages]
    expected = bm25_from_profile(query, *term_profile(texts)) if texts else []
    assert [repr(float(s)) for s in bm25_scores(query, texts)] == [repr(float(s)) for s in expected]


@given(
    st.lists(st.tuples(wide_words, wide_glue), max_size=24),
    st.lists(st.integers(min_value=0, max_value=400), max_size=8),
    st.lists(wide_words | st.sampled_from(["a" * 20, "alpha" * 5]), max_size=4).map(" ".join),
)
@example(pieces=[("x", " ")], cuts=[0, 0, 0, 3], query="x")  # spans (0, 0) and (0, 1)
@example(pieces=[("café", " ")], cuts=[0, 0, 0, 9], query="café")
def test_bm25_of_spans_gives_the_reference_floats_whatever_the_spans(
    pieces: list[tuple[str, str]], cuts: list[int], query: str
) -> None:
    """Spans anywhere, empty ones too (one where a word starts was counted as a word), and terms
    longer than the literal search takes (found by the pass over the words): the same floats, as
    repr shows them (an int 0 is not 0.0), as each slice's word counters give. Even cuts fall
    between a word and its glue (a span that cuts a word is read by the counters themselves)."""
    text, edges = "", [0]
    for word, glue in pieces:
        text += word
        edges.append(len(text))
        text += glue
        edges.append(len(text))
    bounds = sorted(edges[c % len(edges)] if c % 2 == 0 else min(c // 2, len(text)) for c in cuts)
    spans = list(zip(bounds[::2], bounds[1::2], strict=False))
    expected = bm25_from_profile(query, *term_profile([text[a:b] for a, b in spans])) if spans else []
    assert [repr(s) for s in bm25.bm25_span_scores(query, text, spans)] == [repr(s) for s in expected]


def test_a_term_that_repeats_itself_is_found_where_it_stands_alone_inside_runs_of_it() -> None:
    """A term that repeats itself ("aaaa", "hahaha") is found by one pass over the words (a
    literal search stopped at every place inside a run of it): inside a run only where it stands
    alone. A run of underscores in a question is a blank, no term."""
    term = "a" * 20
    assert bm25.repeats_itself(term) and bm25.repeats_itself("hahaha") and bm25.repeats_itself("abab")
    assert not any(
        bm25.repeats_itself(t) for t in ("banana", "max_output_tokens", "telecommunications", "aa")
    )
    text = f"{'a' * 500} {term} x {term}{'a'} {term}"
    spans = [(0, 500), (501, 501 + len(term)), (502 + len(term), len(text))]
    hits = bm25.term_hits(text, [term, "x"], [a for a, _ in spans], [b for _, b in spans])
    assert hits == {1: {term: 1}, 2: {"x": 1, term: 1}}
    assert bm25.query_terms("Sign here: ________ on ____ _x_") == ("sign", "here", "on", "_x_")
