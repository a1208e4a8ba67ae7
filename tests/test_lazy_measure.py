"""Counting only what a fit's decisions need: the lower bound, the window-by-window counts, and
fits that come out the same whether everything is counted or not."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import clear_caches, count, fit, get_encoding
from ctxbudget.formats import FORMATS
from ctxbudget.items import Rendering, Segment
from ctxbudget.lazy_measure import LazyMeasurement
from ctxbudget.measure import measure
from ctxbudget.tokens.bounds import SHORT_TEXT, at_least_ceiling, tokens_at_least
from ctxbudget.tokens.encoding import _HARD_BOUNDARY, last_boundary

pieces = st.sampled_from(
    [
        "the",
        "Witness",
        "said",
        "No.",
        "123456",
        "U.S.C.",
        "日本語",
        "🙂",
        "é",
        " ",
        "  ",
        "   ",
        "\n",
        "\r\n",
        "\t",
        "\u00a0",
        "\u3000",
        "\x1c",
        "-",
        "/",
        "-\n/",
        "'s",
        "'LL",
        "a/b",
        "(",
        ")",
        "...",
    ]
)
texts = st.lists(pieces, max_size=60).map("".join)
ascii_texts = st.lists(
    st.sampled_from(["word", " ", "  ", "\n", "\t", "\r", "\x0b", "\x0c", "x.", "7"]), max_size=60
).map("".join)
ENCODINGS = ("o200k_base", "cl100k_base")


@pytest.mark.parametrize("name", ENCODINGS)
@settings(max_examples=150, deadline=None)
@given(before=texts, text=texts | ascii_texts, after=texts)
def test_the_bound_never_exceeds_the_tokens_starting_in_the_text(
    name: str, before: str, text: str, after: str
) -> None:
    encoding = get_encoding(name)
    segments = tuple(Segment(t, o) for t, o in ((before, "before"), (text, "text"), (after, "after")) if t)
    if not text:
        assert tokens_at_least(text) == 0
        return
    counted = measure(Rendering(chunks=(segments,)), encoding).by_owner["text"]
    assert tokens_at_least(text) <= counted


@settings(max_examples=300, deadline=None)
@given(texts | ascii_texts)
def test_the_bounds_ceiling_is_never_below_the_bound(text: str) -> None:
    ceiling = at_least_ceiling(text)
    assert ceiling is None or ceiling >= tokens_at_least(text)
    assert (ceiling is None) == (len(text) >= SHORT_TEXT and not text.isascii())


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("blank", ["\n", "\t", "\r", "\x0b", "\x0c"])
def test_a_space_after_a_blank_is_no_boundary_in_the_bound(name: str, blank: str) -> None:
    """A space after a blank starts no token there: counted as one, the bound of a run of blanks
    and spaces went over its tokens."""
    encoding = get_encoding(name)
    for text in ((blank + " ") * 60, "x" + (blank + " ") * 60, (" " + blank) * 60):
        segments = (Segment("x.", "before"), Segment(text, "text"), Segment("y", "after"))
        counted = measure(Rendering(chunks=(segments,)), encoding).by_owner["text"]
        assert tokens_at_least(text) <= counted


def test_the_bound_is_close_on_prose() -> None:
    prose = "The witness said that the notice of the defect was sent on March 3, 2021. " * 40
    tokens = len(get_encoding("o200k_base").encode(prose))
    assert 0.6 * tokens <= tokens_at_least(prose) <= tokens
    assert tokens_at_least("x" * (SHORT_TEXT - 1)) == 0


owners = st.sampled_from(["markup", ("documents", 0), ("documents", 1), ("history", 0), ("system", 0)])


@st.composite
def renderings(draw: Any) -> Rendering:
    chunks = draw(
        st.lists(
            st.lists(st.tuples(texts, owners, st.booleans()), min_size=1, max_size=8).map(
                lambda segs: tuple(Segment(t, o, content=c and not isinstance(o, str)) for t, o, c in segs)
            ),
            min_size=1,
            max_size=4,
        )
    )
    constants = draw(st.lists(st.tuples(owners, st.integers(0, 9)), max_size=3))
    return Rendering(chunks=tuple(chunks), constants=tuple(constants))


@settings(max_examples=150, deadline=None)
@given(renderings(), st.sampled_from(ENCODINGS), st.integers(0, 200), st.randoms(use_true_random=False))
def test_lazy_counts_equal_a_whole_measure_in_any_order(
    rendering: Rendering, name: str, lazy_min_chars: int, rng: Any
) -> None:
    encoding = get_encoding(name)
    clear_caches()
    whole = measure(rendering, encoding)
    lazy = LazyMeasurement(rendering, encoding, lazy_min_chars=lazy_min_chars)
    keys = sorted(
        {s.owner for chunk in rendering.chunks for s in chunk} | {o for o, _ in rendering.constants}, key=str
    )
    rng.shuffle(keys)
    for owner in keys:
        assert lazy.at_least(owner) <= whole.by_owner.get(owner, 0)
        if isinstance(owner, tuple):
            span, expected = lazy.span(owner), whole.spans.get(owner)
            assert (span.tokens if span else 0) == (expected.tokens if expected else 0)
            assert lazy.framing(owner) == whole.by_owner.get(owner, 0) - (expected.tokens if expected else 0)
        assert lazy.cost(owner) == whole.by_owner.get(owner, 0)
        assert lazy.reported(owner) == (whole.by_owner.get(owner, 0), True)
    assert lazy.count_all() == whole.total
    assert lazy.fixed_parts() == whole.fixed_parts()


@settings(max_examples=150, deadline=None)
@given(renderings(), st.sampled_from(ENCODINGS), st.integers(0, 200), st.randoms(use_true_random=False))
def test_counting_all_after_some_owners_agrees_with_a_whole_measure(
    rendering: Rendering, name: str, lazy_min_chars: int, rng: Any
) -> None:
    """Some owners counted (window by window), then all: a chunk mostly not looked into is then
    counted whole, and its counts agree with the windows' and a whole measure's either way."""
    encoding = get_encoding(name)
    clear_caches()
    whole = measure(rendering, encoding)
    lazy = LazyMeasurement(rendering, encoding, lazy_min_chars=lazy_min_chars)
    keys = sorted({s.owner for chunk in rendering.chunks for s in chunk}, key=str)
    rng.shuffle(keys)
    first = keys[: rng.randint(0, len(keys))]
    for owner in first:
        assert lazy.cost(owner) == whole.by_owner.get(owner, 0)
    assert lazy.count_all() == whole.total
    for owner in keys:
        assert lazy.cost(owner) == whole.by_owner.get(owner, 0)


def test_a_long_chunk_looked_into_for_one_item_is_counted_whole_when_all_is_counted() -> None:
    """A question's 50,000 short documents render as one chunk; the question alone counted first
    (window by window), counting all of it went on window by window: 150,000 windows, 10x the time
    of counting the body. Mostly not looked into, it is now encoded whole, with the same counts."""
    body = {
        "questions": [{"text": "Which document names the notice?"}],
        "documents": [{"page_content": f"document {i} says little", "score": i / 3000} for i in range(3000)],
    }
    fitted = fit(body, model="gpt-4o", max_context_tokens=2000)
    counted = fit(body, model="gpt-4o", max_context_tokens=2000, count_all=True)
    assert fitted.request == counted.request
    assert fitted.report.to_dict()["tokens_before"] == count(body, model="gpt-4o")["tokens"]
    encoding = get_encoding("o200k_base")
    rendering = FORMATS["question"].render(body)
    lazy = LazyMeasurement(rendering, encoding)
    assert lazy._windowed == [True]
    lazy.cost(("query", 0))  # the question's window alone
    assert lazy.count_all() == measure(rendering, encoding).total
    assert lazy._windowed == [False]


@settings(max_examples=150, deadline=None)
@given(renderings(), st.sampled_from(ENCODINGS), st.randoms(use_true_random=False))
def test_the_reported_total_is_each_owners_reading_summed_whatever_was_asked_before(
    rendering: Rendering, name: str, rng: Any
) -> None:
    """The total a report gives (read at once when every owner's count or bound is known, else
    owner by owner) is the sum of each owner's count when counted and bound when not."""
    encoding = get_encoding(name)
    clear_caches()
    lazy = LazyMeasurement(rendering, encoding)
    keys = sorted(
        {s.owner for chunk in rendering.chunks for s in chunk} | {o for o, _ in rendering.constants}, key=str
    )
    rng.shuffle(keys)
    for owner in keys[: rng.randint(0, len(keys))]:  # some bounded, some counted, some not asked
        asked = rng.choice([[lazy.at_least], [lazy.cost], [lazy.at_least, lazy.cost]])
        for ask in asked:  # bounded, then counted: the count is what is reported
            ask(owner)
    first = lazy.reported_total()  # owners not asked for yet: read owner by owner
    fresh = LazyMeasurement(rendering, encoding)  # the definition, owner by owner
    expected = sum(fresh.cost(o) if lazy.reported(o)[1] else fresh.at_least(o) for o in keys)
    assert first == lazy.reported_total() == expected  # the second: every owner known, read at once


@settings(max_examples=300, deadline=None)
@given(renderings(), st.sampled_from(ENCODINGS), st.integers(0, 400), st.integers(0, 200))
def test_the_bound_decision_is_the_sum_of_the_bounds(
    rendering: Rendering, name: str, limit: int, lazy_min_chars: int
) -> None:
    """``bound_exceeds`` reads ceilings first; its answer is still whether the bounds sum past
    ``limit`` (constants included: a ceiling without them would count everything needlessly)."""
    lazy = LazyMeasurement(rendering, get_encoding(name), lazy_min_chars=lazy_min_chars)
    keys = {s.owner for chunk in rendering.chunks for s in chunk} | {o for o, _ in rendering.constants}
    bounds = sum(LazyMeasurement(rendering, get_encoding(name)).at_least(owner) for owner in keys)
    assert lazy.bound_exceeds(limit) == (bounds > limit)


@settings(max_examples=200, deadline=None)
@given(renderings(), st.sampled_from(ENCODINGS), st.integers(0, 400), st.data())
def test_owners_counted_first_stand_in_the_bound_by_their_counts(
    rendering: Rendering, name: str, limit: int, data: st.DataObject
) -> None:
    """What a fit counts either way (the query, the newest message) is counted before the bound is
    read, and its count stands for its bound: the answer is whether those counts and the others'
    bounds sum past ``limit``."""
    keys = sorted(
        {s.owner for chunk in rendering.chunks for s in chunk} | {o for o, _ in rendering.constants}, key=repr
    )
    counted = data.draw(st.lists(st.sampled_from(keys), unique=True)) if keys else []
    lazy = LazyMeasurement(rendering, get_encoding(name))
    fresh = LazyMeasurement(rendering, get_encoding(name))
    expected = sum(fresh.cost(o) if o in counted else fresh.at_least(o) for o in keys)
    assert lazy.bound_exceeds(limit, counted) == (expected > limit)
    assert all(lazy.reported(o) == (fresh.cost(o), True) for o in counted)


documents = st.lists(
    st.lists(
        st.sampled_from(["Deposition", "of", "the", "witness", "on", "notice.", "EX-12", "\n", "日本"]),
        min_size=5,
        max_size=400,
    ).map(" ".join),
    min_size=1,
    max_size=30,
)


@settings(max_examples=40, deadline=None)
@given(documents, st.integers(300, 6000), st.sampled_from(["question", "openai"]))
def test_a_fit_decides_the_same_whether_or_not_everything_is_counted(
    docs: list[str], window: int, shape: str
) -> None:
    if shape == "question":
        request: dict[str, Any] = {
            "questions": [{"text": "When was notice of the defect given?"}],
            "documents": [{"page_content": d, "score": 1 - i / 100} for i, d in enumerate(docs)],
        }
    else:
        turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": d} for i, d in enumerate(docs)]
        request = {
            "messages": [
                {"role": "system", "content": "Be brief."},
                *turns,
                {"role": "user", "content": "When?"},
            ]
        }
    assert_lazy_is_exact(request, max_context_tokens=window + 4096)


def assert_lazy_is_exact(request: dict[str, Any], model: str = "gpt-4o", **options: Any) -> None:
    """The fit of ``request`` decides and sends the same with and without ``count_all`` (or
    refuses alike); an uncounted item's ``tokens_before`` is a lower bound of the exact one."""
    results: list[Any] = []
    for count_all in (False, True):
        clear_caches()
        try:
            results.append(fit(request, model=model, count_all=count_all, **options))
        except Exception as exc:  # the same refusal either way
            results.append(type(exc).__name__)
    lazy, full = results
    if isinstance(lazy, str) or isinstance(full, str):
        assert lazy == full
        return
    assert lazy.request == full.request
    assert [(i.path, i.action, i.tokens_after) for i in lazy.report.items] == [
        (i.path, i.action, i.tokens_after) for i in full.report.items
    ]
    assert lazy.report.tokens_after == full.report.tokens_after
    for mine, exact in zip(lazy.report.items, full.report.items, strict=True):
        assert (
            mine.tokens_before == exact.tokens_before
            if mine.counted
            else mine.tokens_before <= exact.tokens_before
        )
    assert lazy.report.uncounted_items == sum(not i.counted for i in lazy.report.items)
    assert full.report.uncounted_items == 0
    assert lazy.report.tokens_before <= full.report.tokens_before


_WORDS = [
    "notice",
    "was",
    "given",
    "March",
    "3.",
    "EX-4",
    "the",
    "\n\n",
    "?",
    "Mr.",
    "日本語",
    "。",
    "🙂",
    "e\u0301",
]


def _words(n: int, seed: int) -> str:
    return " ".join(_WORDS[(i * i * 7 + i * seed + seed) % len(_WORDS)] for i in range(n))


def test_the_history_handed_the_documents_budget_takes_what_it_needs_however_counted() -> None:
    # The document is over its share and dropped, and its budget handed on to the history: the
    # history's need had been read as a partial sum of bounds, only until it was over its first
    # share, and that sum (which depended on what was counted) capped what it was handed. With
    # count_all the newest message was cut though it fitted whole (weak bounds: CJK, emoji).
    request = {
        "questions": [{"text": "When was notice given?"}],
        "documents": [{"page_content": _words(350, 1)}],
        "history": [
            {"role": "user", "content": _words(350, 2)},
            {"role": "assistant", "content": _words(450, 3)},
        ],
    }
    for window in (1300, 1400, 1500):
        assert_lazy_is_exact(request, model="claude-sonnet-4-5", max_context_tokens=window)
    kept = fit(request, model="claude-sonnet-4-5", max_context_tokens=1400, count_all=True).report.items
    assert [(i.path, i.action) for i in kept if i.component == "history"][-1] == ("$.history[1]", "kept")


def test_documents_that_cannot_fit_are_dropped_uncounted() -> None:
    docs = [
        f"Passage {i} of the deposition: the witness described exhibit EX-{i} at length. " * 40
        for i in range(40)
    ]
    request = {
        "questions": [{"text": "Which exhibit was described?"}],
        "documents": [{"page_content": d, "score": 1 - i / 100} for i, d in enumerate(docs)],
    }
    clear_caches()
    report = fit(request, model="gpt-4o", max_context_tokens=8000, reserve_output_tokens=4096).report
    dropped = [i for i in report.items if i.component == "documents" and i.action == "dropped"]
    assert dropped and report.uncounted_items > 0
    assert all(not i.counted and "needs at least" in i.reason for i in dropped if i.tokens_before > 0)
    assert all(i.counted for i in report.items if i.action != "dropped")
    exact = fit(
        request, model="gpt-4o", max_context_tokens=8000, reserve_output_tokens=4096, count_all=True
    ).report
    assert exact.uncounted_items == 0 and exact.tokens_before > report.tokens_before
    assert all("needs at least" not in i.reason for i in exact.items)


@settings(max_examples=300, deadline=None)
@given(texts, st.data())
def test_the_last_boundary_is_the_last_hard_boundary_within_reach(text: str, data: Any) -> None:
    at = data.draw(st.integers(0, len(text)))
    reach = data.draw(st.integers(1, 80))
    expected = [m.start() for m in _HARD_BOUNDARY.finditer(text, max(1, at - reach), at + 1)]
    found = last_boundary(text, at, reach)
    assert last_boundary("ab\n", 3, 10) == 0  # no boundary at the end of a text
    if expected:
        assert found == expected[-1]
    else:
        assert found == (0 if at - reach <= 0 else None)


role_words = st.builds(
    lambda words, times: (" ".join(words) + "\n") * times,
    st.lists(
        st.sampled_from(
            ["The", "reviewer", "must", "cite", "page:line.", "Never", "guess.", "47:12", "日本"]
        ),
        min_size=5,
        max_size=30,
    ),
    st.integers(150, 600),
)


@settings(max_examples=25, deadline=None)
@given(
    role_words,
    documents,
    st.integers(300, 20_000),
    st.dictionaries(st.sampled_from(["system", "documents", "history", "query"]), st.integers(0, 100)),
)
def test_a_long_role_cut_from_its_head_decides_as_a_whole_count(
    role: str, docs: list[str], window: int, budget: dict[str, int]
) -> None:
    # A role of 20,000-90,000 characters is bounded to allocate and cut from a window over its
    # head; everything else must come out as when every text is counted.
    request = {
        "role": role,
        "questions": [{"text": "When was notice of the defect given?"}],
        "documents": [{"page_content": d} for d in docs],
        "history": [{"role": "user", "content": d[:300]} for d in docs[:4]],
    }
    assert_lazy_is_exact(request, max_context_tokens=window + 4096, budget=budget)
