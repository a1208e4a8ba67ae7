from __future__ import annotations

import itertools
import re

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import fit, get_encoding, render_question
from ctxbudget.trim.passages import (
    Passage,
    PassageWeights,
    Region,
    asks_about_the_document,
    asks_for_summary,
    content_query,
    passage_tokens,
    select_regions,
    split_passages,
)
from ctxbudget.trim.passages._grown import grown_regions
from ctxbudget.trim.passages._passage import citation_of, reads_as_chat_log, reads_as_lines, users_turns
from ctxbudget.trim.passages._query import first_person_query, quoted_query
from ctxbudget.trim.passages._score import _cites, passage_scores, reads_as_references
from ctxbudget.trim.passages._windows import _best_window, _edge_weighted_mass, _next_taken, _run_from, _Sums

TRANSCRIPT = "".join(
    f"Speaker {'AB'[n % 2]}: turn {n} about {'the budget and costs' if 40 <= n < 48 else 'weather and lunch'} "
    f"with some filler words to make it longer.\n"
    for n in range(120)
)
NUMBERED = "".join(f"{p}:{line:02d} Q. Question {p}-{line}?\n" for p in range(1, 6) for line in range(1, 26))
CONTRACT = "\n\n".join(
    f"{n}. Clause {n}. The receiving party shall keep the information confidential." for n in range(1, 30)
)


def _count(text: str):  # a fake tokenizer for algorithm tests: four characters a token
    return lambda a, b: max(1, (b - a) // 4)


def test_passages_cover_the_text_exactly_and_respect_the_cap() -> None:
    for text in (TRANSCRIPT, NUMBERED, CONTRACT):
        passages = split_passages(text, _count(text), max_tokens=64)
        assert passages[0].start == 0 and passages[-1].end == len(text)
        assert all(a.end == b.start for a, b in itertools.pairwise(passages))
        assert all((p.end - p.start) // 4 <= 64 + 40 for p in passages)


def test_citations_are_page_line_ranges_when_numbered() -> None:
    passages = split_passages(NUMBERED, _count(NUMBERED), max_tokens=64)
    assert passages[0].citation.startswith("1:01-")
    assert split_passages(CONTRACT, _count(CONTRACT))[0].citation.startswith("chars 0-")


def test_selection_keeps_the_relevant_stretch_verbatim_in_order() -> None:
    passages = split_passages(TRANSCRIPT, _count(TRANSCRIPT), max_tokens=40)
    costs = [max(1, (p.end - p.start) // 4) for p in passages]
    regions = select_regions(
        TRANSCRIPT, passages, costs, 200, query="What was said about the budget and costs?"
    )
    kept = "".join(TRANSCRIPT[r.start : r.end] for r in regions)
    assert all(f"turn {n} about the budget" in kept for n in range(40, 48))
    assert [r.start for r in regions] == sorted(r.start for r in regions)
    assert sum(costs[i] for r in regions for i in r.passages) <= 200


def test_question_framing_words_do_not_steer_the_search() -> None:
    assert content_query("Summarize the discussion about the XML format") == "xml format"
    assert content_query("What did they say?") == "What did they say?"


def test_review_request_framing_does_not_outweigh_its_subject() -> None:
    clauses = [f"{n}. The Supplier delivers the goods listed in Schedule {n} on time." for n in range(1, 30)]
    clauses[5] = (
        "6. Spare parts and related parts are reviewed monthly; parts related to wear are reviewed "
        "again and related records of parts are reviewed by the buyer."
    )
    clauses[20] = "21. Governing Law. This contract is subject to the governing law of the State of New York."
    text = "\n\n".join(clauses)
    count = lambda a, b: len(text[a:b]) // 4 + 1  # noqa: E731
    passages = split_passages(text, count, 40)
    costs = [count(p.start, p.end) for p in passages]
    question = (
        'Highlight the parts (if any) of this contract related to "Governing Law" that should be '
        "reviewed by a lawyer."
    )
    regions = select_regions(text, passages, costs, 40, query=question)
    kept = "".join(text[r.start : r.end] for r in regions)
    assert "Governing Law" in kept


def test_fit_splits_an_over_long_document_into_cited_verbatim_passages() -> None:
    request = {
        "questions": [{"text": "What about the budget and costs?"}],
        "documents": [{"page_content": TRANSCRIPT, "metadata": {"source": "meeting"}}],
    }
    result = fit(
        request, model="gpt-4o", max_context_tokens=600, reserve_output_tokens=0, split_documents=True
    )
    docs = result.request["documents"]
    assert docs and all(d["metadata"]["source"] == "meeting" for d in docs)
    for doc in docs:
        a, b = doc["metadata"]["offsets"]
        assert TRANSCRIPT[a:b] == doc["page_content"]
        assert doc["metadata"]["citation"]
    assert "turn 44 about the budget and costs" in render_question(result.request)
    report = result.report
    (item,) = [i for i in report.items if i.component == "documents"]
    sent = sum(len(d["page_content"]) for d in docs) // 4  # about four characters a token here
    assert item.action == "truncated" and sent // 2 < item.tokens_after <= report.tokens_after
    without = fit(request, model="gpt-4o", max_context_tokens=600, reserve_output_tokens=0)
    assert without.request["documents"] == []  # the seed's behaviour: an over-long document is dropped whole


lines = st.lists(
    st.sampled_from(
        ["Speaker A: budget talk.", "B: lunch.", "12:01 Q. What?", "", "Plain paragraph text here."]
    )
    | st.text(max_size=60),
    max_size=60,
).map("\n".join)


@settings(max_examples=150, deadline=None)
@given(lines, st.integers(8, 200), st.integers(0, 400))
def test_passages_and_regions_invariants(text: str, cap: int, budget: int) -> None:
    passages = split_passages(text, _count(text), max_tokens=cap)
    if text:
        assert passages[0].start == 0 and passages[-1].end == len(text)
    assert all(a.end == b.start for a, b in itertools.pairwise(passages))
    costs = [max(1, (p.end - p.start) // 4) for p in passages]
    regions = select_regions(text, passages, costs, budget, query="budget talk", region_cost=3)
    assert sum(costs[i] for r in regions for i in r.passages) + 3 * len(regions) <= budget
    assert all(a.end <= b.start for a, b in itertools.pairwise(regions))
    for region in regions:
        assert (
            region.start == passages[region.passages[0]].start
            and region.end == passages[region.passages[-1]].end
        )


def test_several_over_long_documents_are_split_in_one_fit() -> None:
    other = TRANSCRIPT.replace("budget and costs", "hiring and salaries")
    request = {
        "questions": [{"text": "What about the budget and costs, and hiring and salaries?"}],
        "documents": [{"page_content": TRANSCRIPT}, {"page_content": other}],
    }
    result = fit(
        request, model="gpt-4o", max_context_tokens=1400, reserve_output_tokens=0, split_documents=True
    )
    sources = {d["metadata"]["passage_of"] for d in result.request["documents"]}
    assert sources == {0, 1}
    rendered = render_question(result.request)
    assert (
        "turn 44 about the budget and costs" in rendered
        and "turn 44 about the hiring and salaries" in rendered
    )


def test_edge_weighting_keeps_the_best_passage_off_the_window_edge() -> None:
    scores = [0.3, 0.3, 0.3, 0.3, 1.0, 0.1, 0.1, 0.1, 0.0, 0.0]
    costs = [1] * len(scores)
    plain = _best_window(scores, costs, 5, set(), PassageWeights(edge_weight=1.0, cut_penalty=0.0))
    weighted = _best_window(scores, costs, 5, set(), PassageWeights(cut_penalty=0.0))
    assert plain == (0, 4)  # the most mass, with the best passage at the very end
    assert weighted == (1, 5)  # the best passage has context after it too


def test_a_window_prefers_evidence_it_can_hold_whole_to_cutting_a_longer_stretch() -> None:
    scores = [0.5, 0.5, 0.5, 0.5, 0.5, 0.0, 0.45, 0.45, 0.45, 0.0]
    costs = [1] * len(scores)
    assert _best_window(scores, costs, 3, set(), PassageWeights(cut_penalty=0.0)) == (0, 2)
    assert _best_window(scores, costs, 3, set(), PassageWeights()) == (6, 8)


@given(
    st.lists(st.tuples(st.floats(0, 5), st.integers(1, 9)), min_size=1, max_size=25),
    st.integers(1, 40),
    st.sets(st.integers(0, 24), max_size=6),
)
def test_plain_window_is_the_heaviest_run_that_fits(
    pairs: list[tuple[float, int]], cap: int, taken: set[int]
) -> None:
    scores, costs = [p[0] for p in pairs], [p[1] for p in pairs]
    found = _best_window(scores, costs, cap, taken, PassageWeights(edge_weight=1.0, cut_penalty=0.0))
    runs = [
        (a, b)
        for a in range(len(costs))
        for b in range(a, len(costs))
        if sum(costs[a : b + 1]) <= cap and not taken & set(range(a, b + 1))
    ]
    if not runs:
        assert found is None
        return
    assert found in runs
    best = max(sum(scores[a : b + 1]) for a, b in runs)
    assert sum(scores[found[0] : found[1] + 1]) >= best - 1e-9
    weighted = _best_window(scores, costs, cap, taken, PassageWeights())
    assert weighted in runs


def test_a_query_that_matches_nothing_keeps_the_head() -> None:
    passages = split_passages(TRANSCRIPT, _count(TRANSCRIPT), max_tokens=40)
    costs = [_count(TRANSCRIPT)(p.start, p.end) for p in passages]
    regions = select_regions(TRANSCRIPT, passages, costs, 200, query="zebra quantum", region_cost=3)
    assert len(regions) == 1
    assert regions[0].start == 0
    assert sum(costs[i] for i in regions[0].passages) <= 197 < sum(costs[: len(regions[0].passages) + 1])


def test_one_strong_match_outweighs_many_passing_mentions() -> None:
    def line(n: int) -> str:
        if n == 70:
            return f"Speaker A: turn {n}: the quarterly revenue forecast was cut, the forecast is lower.\n"
        if 10 <= n < 30:
            return f"Speaker B: turn {n}: revenue came up again in passing, then lunch plans.\n"
        return f"Speaker C: turn {n}: weather and lunch and some filler words here.\n"

    text = "".join(line(n) for n in range(100))
    passages = split_passages(text, _count(text), max_tokens=40)
    costs = [_count(text)(p.start, p.end) for p in passages]

    def kept(weights: PassageWeights) -> str:
        regions = select_regions(
            text, passages, costs, 300, query="What was the quarterly revenue forecast?", weights=weights
        )
        return "".join(text[r.start : r.end] for r in regions)

    assert "turn 70:" in kept(PassageWeights(hedge_shares=()))
    plain = kept(PassageWeights(sharpness=1.0, hedge_shares=(), rescue_strong=False))  # summed as is
    assert "turn 70:" not in plain and "turn 20: revenue" in plain


def _two_exchanges(n: int) -> str:
    """A meeting where the pricing question comes up in two short exchanges far apart, between
    stretches that mention pricing in passing."""
    if n in (20, 21, 80, 81):
        return (
            f"Speaker A: turn {n}: the unit price of the remote is set at twelve euros, unit price agreed.\n"
        )
    if 30 <= n < 60:
        return f"Speaker B: turn {n}: price came up in passing before the lunch break, and the colours.\n"
    return f"Speaker C: turn {n}: weather and lunch and some filler words here.\n"


def test_a_specific_question_keeps_evidence_in_two_places_when_one_window_cannot() -> None:
    text = "".join(_two_exchanges(n) for n in range(100))
    passages = split_passages(text, _count(text), max_tokens=40)
    costs = [_count(text)(p.start, p.end) for p in passages]

    def kept(query: str, weights: PassageWeights) -> str:
        regions = select_regions(text, passages, costs, 500, query=query, weights=weights)
        assert sum(costs[i] for r in regions for i in r.passages) <= 500
        return "".join(text[r.start : r.end] for r in regions)

    question = "What unit price was agreed for the remote?"
    first, last = (
        next(i for i, p in enumerate(passages) if t in text[p.start : p.end])
        for t in ("turn 20:", "turn 81:")
    )
    assert sum(costs[first : last + 1]) > 500  # no single window of the budget reaches both exchanges
    hedged = kept(question, PassageWeights())
    assert "turn 20:" in hedged and "turn 80:" in hedged
    single = kept(question, PassageWeights(hedge_shares=(), rescue_strong=False))
    assert ("turn 20:" in single) != ("turn 80:" in single)
    summary = kept("Summarize the discussion of the unit price of the remote.", PassageWeights())
    assert ("turn 20:" in summary) != ("turn 80:" in summary)


def test_summary_questions_are_recognised() -> None:
    assert asks_for_summary("Summarize the discussion about the budget")
    assert asks_for_summary("Give an overview of the pricing talk")
    assert not asks_for_summary("What did the professor say about the budget?")


def test_a_small_budget_still_gets_passages_it_can_hold() -> None:
    request = {
        "questions": [{"text": "What about the budget and costs?"}],
        "documents": [{"page_content": TRANSCRIPT}],
    }
    result = fit(
        request, model="gpt-4o", max_context_tokens=160, reserve_output_tokens=0, split_documents=True
    )
    kept = "".join(d["page_content"] for d in result.request["documents"])
    assert "about the budget and costs with" in kept and result.report.tokens_after <= 160
    assert passage_tokens(8000) == 256 and passage_tokens(400) == 100 and passage_tokens(40) == 32


def _paragraphs(texts: list[str]) -> tuple[str, list[Passage]]:
    """One text of paragraphs, each a passage."""
    text, passages = "", []
    for i, body in enumerate(texts):
        start = len(text)
        text += body + "\n\n"
        passages.append(Passage(start, start + len(body), f"p{i}"))
    return text, passages


def test_a_strong_passage_outside_the_window_is_kept_by_trimming_the_windows_weak_edges() -> None:
    filler = "The committee met and talked about the schedule for the coming quarter."
    texts = [filler] * 40
    texts[5] = "To reset the remote control, hold the power button for ten seconds."
    texts[6] = texts[7] = "The remote control ships with two batteries and a strap."
    texts[30] = "A reset of the remote control also clears its pairing with the television."
    text, passages = _paragraphs(texts)
    costs = [20] * len(passages)
    # windows (as in a transcript), the rescue alone, not the hedged windows
    no_hedging = PassageWeights(hedge_shares=(), prose_regions=False)
    windows_only = PassageWeights(hedge_shares=(), rescue_strong=False, prose_regions=False)

    def reset_question(weights: PassageWeights) -> list[Region]:
        query = "How do I reset the remote control?"
        return select_regions(text, passages, costs, 200, query=query, region_cost=4, weights=weights)

    regions = reset_question(no_hedging)
    kept = {i for region in regions for i in region.passages}
    assert {5, 30} <= kept  # the isolated answer is kept beside the window
    alone_window = reset_question(windows_only)
    assert 30 not in {i for region in alone_window for i in region.passages}  # what the rescue adds
    assert sum(costs[i] for i in kept) + 4 * len(regions) <= 200
    alone = select_regions(
        text, passages, costs, 200, query="schedule quarter", region_cost=4, weights=no_hedging
    )
    assert len(alone) == 1  # relevance everywhere alike: one window, nothing to rescue


def test_in_prose_regions_grow_around_each_answer_and_keep_context() -> None:
    filler = "Chapter notes on installing the stand and cleaning the screen with a dry cloth."
    texts = [filler] * 60
    texts[8] = "To reset the remote control, hold the power button for ten seconds."
    texts[45] = "Pairing the remote control again: point it at the television and hold Return."
    text, passages = _paragraphs(texts)
    assert not reads_as_lines(text)
    costs = [20] * len(passages)
    question = "How do I reset or pair the remote control?"
    regions = select_regions(text, passages, costs, 160, query=question, region_cost=4)
    kept = {i for region in regions for i in region.passages}
    assert {8, 45} <= kept and len(regions) == 2  # both answers, apart
    assert sum(costs[i] for i in kept) + 4 * len(regions) <= 160
    assert len(kept) > 2  # what is left of the budget is context around them
    windows = PassageWeights(prose_regions=False, rescue_strong=False, hedge_shares=())
    single = select_regions(text, passages, costs, 160, query=question, region_cost=4, weights=windows)
    assert len(single) == 1  # windows alone keep one stretch


def test_transcripts_and_numbered_records_read_as_lines() -> None:
    assert reads_as_lines("Anna: We should ship.\nBen: Not before QA.\nAnna: Fine.\n")
    assert reads_as_lines("12:1 Q. Did you send it?\n12:2 A. Yes.\n")
    assert reads_as_lines("  12:1  Q. Did you send it?\n\t12:2  A. Yes.\n")  # indented, as printed
    prose = "The parties agree as follows.\nEach keeps the other's secrets.\nNo licence is granted.\n"
    assert not reads_as_lines(prose + "Section 2: Term. This lasts a year.\n")


# The plain definitions the fast line-start searches must agree with.
_SPEAKER_LINES = re.compile(r"^[^\s:][^\n:]{0,40}:\s", re.MULTILINE)
_PAGE_LINES = re.compile(r"^[ \t]*(\d{1,4}:\d{1,3})\s", re.MULTILINE)
line_pieces = st.sampled_from(
    [
        "\n",
        "\r\n",
        "\r",
        " ",
        ":",
        "Anna:",
        "Anna: ",
        "Ben:\n",
        "12:3 ",
        "  12:3 ",
        "\t1:2 ",
        "12:34\n",
        "1:2",
        "x",
        "Q.",
        "\t",
        "\x0b",
    ]
)
lined_texts = st.lists(line_pieces | st.text(max_size=6), max_size=40).map("".join)


@settings(max_examples=500, deadline=None)
@given(lined_texts)
def test_line_starts_are_found_as_the_multiline_patterns_find_them(text: str) -> None:
    lines = len(text.splitlines())
    plain = len(_SPEAKER_LINES.findall(text)) + len(_PAGE_LINES.findall(text))
    assert reads_as_lines(text) == (plain > lines * 0.3)


@settings(max_examples=500, deadline=None)
@given(lined_texts, st.integers(0, 60), st.integers(0, 60))
def test_citations_read_the_page_line_marks_of_the_slice(text: str, a: int, b: int) -> None:
    # the marks of the lines the slice holds, and of the line it starts in when it starts inside one
    start, end = sorted((min(a, len(text)), min(b, len(text))))
    line = text.rfind("\n", 0, start) + 1
    lead = re.match(r"[ \t]*(\d{1,4}:\d{1,3})\s", text[line:end])
    marks = ([lead.group(1)] if lead else []) + re.findall(
        r"\n(?=[ \t]*(\d{1,4}:\d{1,3})\s)", text[start:end]
    )
    expected = (
        (marks[0] if len(marks) == 1 else f"{marks[0]}-{marks[-1]}") if marks else f"chars {start}-{end}"
    )
    assert citation_of(text, start, end) == expected


def test_a_question_about_the_document_keeps_its_head_in_prose() -> None:
    # An encyclopedia page: the lead says who composed the song; sections far below repeat the
    # question's words (critics wrote, charts), and they fill the budget before the lead's turn.
    lead = "Yesterday (1965)\nComposed by Paul McCartney and recorded at Abbey Road in June."
    texts = [lead] + [f"In part {n} the recording sessions and the studio notes." for n in range(1, 30)]
    texts += [
        f"In part {n} critics wrote the song Yesterday would chart in {1936 + n}." for n in range(30, 45)
    ]
    text, passages = _paragraphs(texts)
    costs = [10] + [20] * (len(passages) - 1)  # the lead: within 5% of a 300-token budget
    question = "Who wrote the song Yesterday and when did it chart?"
    assert asks_about_the_document(question, text) and not reads_as_lines(text)
    never = PassageWeights(head_share=0.0)
    plain = select_regions(text, passages, costs, 300, query=question, weights=never)
    assert 0 not in {i for r in plain for i in r.passages}  # relevance alone leaves the lead out
    kept = select_regions(text, passages, costs, 300, query=question)
    assert 0 in {i for r in kept for i in r.passages}
    assert sum(costs[i] for r in kept for i in r.passages) <= 300


def test_which_questions_are_about_the_document() -> None:
    contract = "DISTRIBUTION AGREEMENT\nThis Agreement is made between Acme Inc. and Beta LLC."
    review = 'Highlight the parts (if any) of this contract related to "Parties" that should be reviewed.'
    assert asks_about_the_document(review, contract)  # names the document itself
    assert asks_about_the_document("Who signed the distribution deal?", contract)  # a title word
    manual = "Quick Guides\nYou can learn quickly how to use the remote."
    assert not asks_about_the_document("How do I pair the remote with the TV?", manual)
    assert not asks_about_the_document("What is in the guides?", "")  # no title at all


@settings(max_examples=300, deadline=None)
@given(
    passages=st.lists(st.tuples(st.floats(0, 20), st.integers(0, 300)), min_size=1, max_size=400),
    cap=st.integers(-5, 30_000),
    taken=st.sets(st.integers(0, 399), max_size=20),
    edges=st.tuples(st.floats(0, 1), st.floats(0, 0.75)),
)
def test_window_sums_give_what_walking_every_window_gives(
    passages: list[tuple[float, int]], cap: int, taken: set[int], edges: tuple[float, float]
) -> None:
    # Each window was walked passage by passage (quadratic in a long document and a large budget):
    # its extent from prefix sums is the walked one, and its mass the same up to rounding.
    scores, costs = [s for s, _ in passages], [c for _, c in passages]
    weights = PassageWeights(edge_weight=edges[0], edge_margin=edges[1])
    sums, stops = _Sums(scores, costs), _next_taken(len(costs), taken)
    for left in (n for n in range(len(costs)) if n not in taken):
        last, cost = _run_from(left, costs, cap, taken)
        assert sums.last_within(left, cap, stops[left]) == last
        if last >= left:
            walked = _edge_weighted_mass(scores[left : last + 1], costs[left : last + 1], cost, weights)
            assert abs(sums.weighted(left, last, weights) - walked) <= 1e-9 * max(1.0, sum(scores))


def test_a_passage_that_starts_inside_a_numbered_line_is_cited_from_that_line() -> None:
    # a long answer is cut at a sentence end: the piece holding the evidence starts inside 50:3
    answer = "The crew inspected the pallets. " * 40 + "The forklift punctured the reservoir."
    text = f"50:2 Q. What happened?\n50:3 A. {answer}\n50:4 Q. Anything else?\n"
    start = text.index("The forklift")
    assert citation_of(text, start, text.index("Anything")) == "50:3-50:4"  # not 50:4 alone
    assert citation_of(text, start, start + 20) == "50:3"  # not "chars ..."


def test_a_line_start_is_looked_for_only_a_line_s_length_back() -> None:
    """Each passage of a text without newlines searched back to its start: quadratic (a 40 MB
    line took 21 s). A numbered line is short; a stretch far inside a longer one is cited by
    characters."""
    text = "12:3 A. " + "word " * 2_000
    near, far = text.index("word", 4_000), text.index("word", 9_000)
    assert citation_of(text, near, near + 20) == "12:3"
    assert citation_of(text, far, far + 20) == f"chars {far}-{far + 20}"


def _chat_log() -> str:
    sessions = []
    for n in range(1, 61):
        if n in (8, 22, 36):  # near misses, apart: a cat, but not its name
            turns = ["User: My cat keeps scratching the sofa. How do I stop a cat scratching it?"]
        elif n == 50:  # the fact asked about, said once
            turns = ["User: By the way, our cat is named Miso, after the soup."]
        else:
            turns = [f"User: Can you suggest a recipe for dinner number {n}?"]
        turns.append("Assistant: Sure, here is an idea for you to try tonight.")
        sessions.append(f"Session {n} — 2023/01/{n % 28 + 1:02d}\n\n" + "\n".join(turns))
    return "\n\n".join(sessions) + "\n"


def test_a_chat_log_is_read_for_the_users_single_statements_not_one_stretch() -> None:
    """A log of conversations with an assistant is selected as prose is: the fact a question asks
    about is one of the user's turns; one window over the densest stretch of near misses lost it."""
    log = _chat_log()
    assert reads_as_lines(log) and reads_as_chat_log(log)
    assert not reads_as_chat_log(TRANSCRIPT)  # a meeting's speakers are people
    meeting = log.replace("User:", "User Interface:").replace("Assistant:", "Marketing:")
    assert not reads_as_chat_log(meeting)
    passages = split_passages(log, _count(log), max_tokens=40)
    costs = [max(1, (p.end - p.start) // 4) for p in passages]
    regions = select_regions(log, passages, costs, 160, query="What is my cat's name?")
    kept = "".join(log[r.start : r.end] for r in regions)
    assert "our cat is named Miso" in kept


def _laptop_log() -> str:
    sessions = []
    for n in range(1, 41):
        if n in (5, 17, 29):  # near misses: the question's words, of no one in particular
            turns = ["User: Which laptop should a student buy? Is a laptop worth it to buy in 2023?"]
        elif n == 33:  # the fact asked about, in other words than the question's
            turns = ["User: My new Dell XPS 13 cost me $1,275 and the battery already seems worse."]
        else:
            turns = [f"User: Can you suggest a recipe for dinner number {n}?"]
        turns.append("Assistant: Sure, here is an idea for you to try tonight.")
        sessions.append(f"Session {n} — 2023/02/{n % 28 + 1:02d}\n\n" + "\n".join(turns))
    return "\n\n".join(sessions) + "\n"


def test_in_a_chat_log_a_first_person_question_finds_what_the_user_said_of_themselves() -> None:
    """ "Which laptop did I buy?" shares no content word with "My new Dell XPS 13 cost me ...":
    in a log of the user's conversations its first-person words point at what the user said of
    themselves, and the passages are taken best first, alone, so more places are read. With the
    question's content words alone the near misses and their neighbours took the budget."""
    log = _laptop_log()
    passages = split_passages(log, _count(log), max_tokens=40)
    costs = [max(1, (p.end - p.start) // 4) for p in passages]

    def kept(weights: PassageWeights) -> str:
        regions = select_regions(log, passages, costs, 170, query="Which laptop did I buy?", weights=weights)
        return "".join(log[r.start : r.end] for r in regions)

    assert "My new Dell XPS 13" in kept(PassageWeights())
    assert "My new Dell XPS 13" not in kept(PassageWeights(first_person=0.0))
    assert kept(PassageWeights()).count("Which laptop should a student buy?") == 3  # still kept


def test_only_the_users_turns_speak_for_the_user() -> None:
    """In a chat log "I" is the user in the user's turns and the assistant in its own: the
    assistant's lines are blanked (same offsets), a user's turn runs on over its unlabelled lines
    and a label that is not a chat role, and text before the first label is no one's."""
    log = (
        "Session 1\n"
        "User: My cat is Miso.\nshe is two\nNote: I feed her twice\n"
        "Assistant: I see. I can help.\nmore from me\n"
        "Human: our flat is small\n"
    )
    blanked = users_turns(log)
    assert len(blanked) == len(log)
    kept = [line.strip() for line in blanked.splitlines() if line.strip()]
    assert kept == [
        "User: My cat is Miso.",
        "she is two",
        "Note: I feed her twice",
        "Human: our flat is small",
    ]
    assert first_person_query("Which laptop did I buy?") == "i me my mine myself"
    assert first_person_query("Where did we move to?") == "we us our ours ourselves"
    assert first_person_query("Who wrote the report?") == ""


def test_the_phrase_a_question_quotes_outweighs_its_templates_words() -> None:
    """A clause-review question is a template around a quoted subject: the template's details
    ("order size", "buy", "counterparty") matched a purchasing clause more often than the subject
    matched its own clause, which the quoted words now lift above it."""
    clauses = [
        "Orders. Buyer may buy goods from the counterparty by purchase order of any size.",
        *(f"Clause {n}. Notices are given in writing to the address of record." for n in range(2, 8)),
        "Minimum Commitment. Buyer commits to a minimum of 500 units in each calendar quarter.",
        *(f"Clause {n}. Notices are given in writing to the address of record." for n in range(9, 15)),
    ]
    text = "\n\n".join(clauses) + "\n"
    passages = split_passages(text, _count(text), max_tokens=24)
    question = (
        'Highlight the parts (if any) of this contract related to "Minimum Commitment" that should be '
        "reviewed by a lawyer. Details: Is there a minimum order size that one party must buy from "
        "the counterparty?"
    )
    assert quoted_query(question) == "minimum commitment"
    assert quoted_query("Was gilt für „Mindestmenge“ und «prix» und 「東京」?") == "mindestmenge prix 東京"
    assert quoted_query("Er sagte “nein“ “ja“ “doch“") == ""  # a German closing mark opens nothing
    assert quoted_query('Is the 13" model lighter than the 15" one?') == ""  # inches
    assert quoted_query('What does print("hello") show?') == "hello"
    assert quoted_query('什么是"最低采购量"?') == "最低采购量"  # straight quotes right after CJK
    assert quoted_query('"Force Majeure"とは何ですか') == "force majeure"

    def best(weights: PassageWeights) -> str:
        scores = passage_scores(text, passages, question, (), weights)
        top = max(range(len(passages)), key=scores.__getitem__)
        return text[passages[top].start : passages[top].end]

    assert best(PassageWeights()).startswith("Minimum Commitment.")
    assert best(PassageWeights(quoted=0.0)).startswith("Orders.")


def test_passages_taken_alone_are_the_best_ones_without_their_neighbours() -> None:
    """Regions grown around a seed take its neighbours; taken alone, the budget goes to the next
    best passages wherever they are, down to those with no relevance at all."""
    relevance = [0.0, 0.9, 0.6, 0.0, 1.0, 0.5, 0.0, 0.8]
    costs = [10] * len(relevance)
    weights = PassageWeights()
    assert grown_regions(relevance, costs, 40, 0, weights, alone=True) == [(1, 1), (2, 2), (4, 4), (7, 7)]
    assert grown_regions(relevance, costs, 40, 0, weights) == [(1, 1), (2, 2), (4, 4), (5, 5)]
    assert grown_regions([0.0, 0.0, 1.0], [10] * 3, 30, 0, weights, alone=True) == [(0, 0), (1, 1), (2, 2)]


def _o200k(text: str):
    encoding = get_encoding("o200k_base").tiktoken  # type: ignore[attr-defined]
    return lambda a, b: len(encoding.encode_ordinary(text[a:b]))


@pytest.mark.parametrize(
    "text",
    [
        "የዋስትና ማስታወቂያ መጋቢት ሦስት ቀን ተሰጥቷል። " * 300,  # Amharic: a token a character or more
        "🇺🇸🇯🇵" * 2000,
        "a\n" * 3000,
    ],
)
def test_a_dense_script_is_cut_into_passages_a_budget_can_hold(text: str) -> None:
    """Passages were sized in characters only: at a token a character or more every passage was
    larger than the budget, and a fit kept nothing of the document."""
    count = _o200k(text)
    passages = split_passages(text, count, max_tokens=64)
    assert passages[0].start == 0 and passages[-1].end == len(text)
    assert all(a.end == b.start for a, b in itertools.pairwise(passages))
    assert max(count(p.start, p.end) for p in passages) <= 2 * 64
    request = {"questions": [{"text": "When was notice given?"}], "documents": [{"page_content": text}]}
    result = fit(
        request, model="gpt-4o", max_context_tokens=1000, reserve_output_tokens=0, split_documents=True
    )
    assert result.request["documents"], result.report.items[-1].reason
    assert result.report.tokens_after > 500


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["word ", "👨‍👩‍👧‍👦", "🇺🇸", "a\u0301\u0302", "\r\n", ". ", "ไทย", "x"]),
            st.integers(1, 300),
        ),
        min_size=1,
        max_size=6,
    ),
    st.integers(32, 80),
)
def test_passages_never_start_or_end_inside_a_character(runs: list[tuple[str, int]], cap: int) -> None:
    """Runs of one piece: a long stretch with no space or sentence end is cut hard, and was cut
    at a code point (a flag halved, an accent or the rest of an emoji sequence cut off, CR from LF)."""
    text = "".join(piece * n for piece, n in runs)
    clusters = {m.end() for m in regex.finditer(r"\X", text)} | {0}
    passages = split_passages(text, _o200k(text), max_tokens=cap)
    assert passages[-1].end == len(text)
    assert all(p.start in clusters and p.end in clusters for p in passages)


def test_a_split_documents_own_citation_and_offsets_are_kept_beside_the_passages() -> None:
    text = "The warranty notice was given on March 3. " * 500
    own = {"source": "deposition.pdf", "citation": "Smith v. Jones, p. 4", "offsets": [120, 9000]}
    request = {
        "questions": [{"text": "When was the warranty notice given?"}],
        "documents": [{"page_content": text, "metadata": own}],
    }
    result = fit(
        request, model="gpt-4o", max_context_tokens=500, reserve_output_tokens=0, split_documents=True
    )
    for document in result.request["documents"]:
        meta = document["metadata"]
        start, end = meta["offsets"]
        assert text[start:end] == document["page_content"] and meta["citation"].startswith("chars ")
        assert meta["document_citation"] == "Smith v. Jones, p. 4" and meta["document_offsets"] == [120, 9000]
        assert meta["source"] == "deposition.pdf"


@pytest.mark.parametrize("lead", ["", "\n\n    ", "\t"])
def test_a_passage_s_character_citation_counts_from_the_document_as_its_offsets_do(lead: str) -> None:
    """A document opening with blanks was cited from its text without them: ``chars 11451-12230``
    beside offsets ``[11457, 12236]``, the citation reading other text (the report's reason too)."""
    text = (
        lead
        + " ".join(f"Filler sentence {i} says nothing." for i in range(300))
        + " Notice went out March 3."
    )
    request = {"questions": [{"text": "When did the notice go out?"}], "documents": [{"page_content": text}]}
    result = fit(
        request, model="gpt-4o", max_context_tokens=200, reserve_output_tokens=0, split_documents=True
    )
    cited = []
    for document in result.request["documents"]:
        start, end = document["metadata"]["offsets"]
        assert document["metadata"]["citation"] == f"chars {start}-{end}"
        assert text[start:end] == document["page_content"]
        cited.append(document["metadata"]["citation"])
    (line,) = [i for i in result.report.items if i.component == "documents"]
    assert cited and all(c in line.reason for c in cited)


def test_a_dense_run_beside_words_leaves_the_words_in_whole_passages() -> None:
    """A unit cut again for its dense run (flags) cut its plain words too, by the run's density:
    passages of 4-8 tokens, some starting mid-word."""
    text = "🇺🇸" * 300 + " " + " ".join(["alpha", "bravo", "charlie", "delta", "echo"] * 120)
    count = _o200k(text)
    words = [p for p in split_passages(text, count, max_tokens=64) if p.start > 600]
    assert not [p for p in words if text[p.start - 1].isalpha() and text[p.start].isalpha()]
    assert sum(count(p.start, p.end) < 32 for p in words) <= 1  # the run's last piece at most


def test_a_dense_unit_cut_again_keeps_a_space_with_its_combining_mark() -> None:
    text = "".join("ሀሁሂሃሄህሆ" * 3 + " \u0301" for _ in range(60))  # one paragraph, no sentence end
    clusters = {m.end() for m in regex.finditer(r"\X", text)} | {0}
    passages = split_passages(text, _o200k(text), max_tokens=64)
    assert len(passages) > 1 and all(p.start in clusters and p.end in clusters for p in passages)


def test_a_passage_split_again_keeps_the_documents_own_citation() -> None:
    text = "The warranty notice was given on March 3. " * 500
    first = fit(
        {
            "questions": [{"text": "When was the warranty notice given?"}],
            "documents": [{"page_content": text, "metadata": {"citation": "Smith v. Jones, p. 4"}}],
        },
        model="gpt-4o",
        max_context_tokens=6000,
        reserve_output_tokens=0,
        split_documents=True,
    )
    again = fit(
        {
            "questions": [{"text": "When was the warranty notice given?"}],
            "documents": first.request["documents"],
        },
        model="gpt-4o",
        max_context_tokens=400,
        reserve_output_tokens=0,
        split_documents=True,
    )
    assert again.request["documents"]
    assert {d["metadata"]["document_citation"] for d in again.request["documents"]} == {
        "Smith v. Jones, p. 4"
    }


def test_a_reference_list_naming_the_subject_does_not_outrank_the_evidence() -> None:
    """An encyclopedia page's references name its subject in every line: the region grown from
    them ran through the whole list before the one sentence that answers was seeded."""
    filler = "The town grew slowly over the following decades as trade moved along the river.\n\n"
    evidence = "The Ford Bridge appears in the 1959 film On the Statistics of Crop Yields.\n\n"
    references = "".join(
        f"^ Perry, Ravi ({1950 + i}). The Ford Bridge on film, part {i}. Sandfeld: Academic. p. {i + 3}. "
        f"ISBN 978-5-783-{i:05d}-7. Retrieved 1 May 2017.\n"
        for i in range(120)
    )
    text = "The Ford Bridge is a bridge over the Inn.\n\n" + filler * 40 + evidence + filler * 40 + references
    passages = split_passages(text, _count(text), max_tokens=256)
    costs = [max(1, (p.end - p.start) // 4) for p in passages]
    query = "what film was filmed at the ford bridge"
    regions = select_regions(text, passages, costs, 600, query=query)
    assert any(evidence.strip() in text[r.start : r.end] for r in regions)
    plain = select_regions(
        text, passages, costs, 600, query=query, weights=PassageWeights(reference_list=1.0)
    )
    assert not any(evidence.strip() in text[r.start : r.end] for r in plain)  # the list's own weight
    listed = [p for p in passages if p.start >= text.index("^ Perry")]
    assert all(reads_as_references(text, p.start, p.end) for p in listed[:-1])
    assert not any(
        reads_as_references(text, p.start, p.end) for p in passages if p.end <= text.index("^ Perry")
    )


@pytest.mark.parametrize(
    "text",
    [
        "Filmography\n- The Quiet Harbour (1952), as the ferryman\n- North of the Inn (1961), lead role\n"
        "- Winter Accounts (1964), supporting role\n",
        "| Quarter | Revenue |\n|---|---|\n| Q1 (2023) | 4.1M |\n| Q2 (2023) | 4.8M |\n",
        "Manchester office: (0161) 496 0000\nLeeds office: (0113) 496 0000\nBristol office: (0117) 496 0000\n",
        "server.listen(8080)\nretry.backoff(1000)\nbuf = bytearray(4096)\n",
        "1. Rent is set out in Schedule 2, p. 14.\n2. Interest accrues under the Late Payment Act (1998).\n"
        "3. This lease is governed by the Landlord and Tenant Act (1954).\n",
        "Warming is reached by 2040 (IPCC 2018), as Smith et al. found.\n\nJones et al. give the series.\n",
        "Install from https://example.com/cli and run init.\nLog in at https://example.com/login.\n",
    ],
)
def test_lists_of_films_tables_clauses_and_code_are_not_reference_lists(text: str) -> None:
    assert not reads_as_references(text, 0, len(text))


CITING_LINES = st.sampled_from(
    [
        "",
        "   ",
        "Smith, J. (2019). A study. doi 10.1/x",
        "Jones et al. (2004) pp. 3",
        "Vol. 2 et al.",
        "pp.",
        "7 and (1999) more",
        "The tenant gave notice of the defect on the third day of the month.",
        "A line of prose " * 30,
        "ISBN",
        "arXivist et al.",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(CITING_LINES, max_size=12), st.integers(0, 20), st.integers(0, 20))
def test_a_passage_reads_as_references_by_its_lines(lines: list[str], lead: int, trail: int) -> None:
    """The definition: two lines at least, short on average (blank lines counted), three in five
    short and citing (a strong mark, or two kinds of weak ones, in the line)."""
    text = "x" * lead + "\n".join(lines) + "y" * trail
    start, end = lead, lead + len("\n".join(lines))
    piece = text[start:end]
    kept = [line for line in piece.split("\n") if line.strip()]
    cited = sum(1 for line in kept if len(line) <= 300 and _cites(line))
    expected = (
        piece.count("\n") >= 1
        and end - start <= 300 * (piece.count("\n") + 1)
        and len(kept) >= 2
        and cited >= 0.6 * len(kept)
    )
    assert reads_as_references(text, start, end) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        CITING_LINES
        | st.sampled_from(["doi", "(2019)", "pp. 4", "vol. 3", "xdoi", "(1999"])
        | st.text(max_size=20),
        max_size=5,
    )
)
def test_a_line_cites_by_a_strong_mark_or_two_kinds_of_weak_ones(parts: list[str]) -> None:
    """:func:`_cites` as its marks define it (each weak mark looked for by what it holds first)."""
    line = " ".join(parts)
    strong = re.search(r"\b(?:doi|DOI|ISBN|Retrieved|arXiv)\b", line)
    weak = [r"\bet al\.", r"\((?:1[5-9]|20)\d\d[a-z]?\)", r"\bpp\.\s*\d", r"\b[Vv]ol\.\s*\d"]
    assert _cites(line) == (strong is not None or sum(1 for w in weak if re.search(w, line)) >= 2)


def _paragraph_units(text: str) -> list[tuple[int, int]]:
    """The definition: the text split at its paragraph breaks, each blank piece after a unit joined
    to it (a text that opens with blank lines has them as a unit of their own)."""
    units: list[tuple[int, int]] = []
    position = 0
    for piece in re.split(r"(\n\s*\n)", text):
        if units and not piece.strip():
            units[-1] = (units[-1][0], units[-1][1] + len(piece))
        elif piece:
            units.append((position, position + len(piece)))
        position += len(piece)
    return units


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["a", "b. ", "\n", "\n\n", " \n \n", "\t", "\r\n", "\u2028", "\x0c", "\u3000", "x" * 40]
        ),
        max_size=40,
    ).map("".join)
)
def test_prose_units_are_its_paragraphs_read_by_where_they_break(text: str) -> None:
    """Paragraphs are read by their breaks' places (no copy of the text made): the same units as
    the text split into strings."""
    from ctxbudget.trim.passages._passage import _units

    if not reads_as_lines(text):
        assert _units(text) == _paragraph_units(text)
