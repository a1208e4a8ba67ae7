"""Cutting a long chat message with the question in mind, not from the head.

A user message that carries context and a question keeps the question whole: the question is
the short paragraph near its end that asks (it has a ``?`` or a label such as ``Question:``) with
whatever instructions follow it, or, when the message asks near its start (``Question: ...``
then ``Context: ...``, or a greeting, the question, then a pasted document), that paragraph; with
no such paragraph, a last sentence that asks, else opening sentences that ask ("What is clause 4?
<the contract, as one long paragraph>"), else its last paragraph or last sentence, with its first
paragraph when that is short (an instruction for what was pasted after it; when both do not
fit, the last is kept, then the first one's head). From the rest, and from any other long message (a tool result), the passages that match
the question best are kept, verbatim, in their order, with a marker where text was left out. The
selection is the one ``split_documents`` uses for documents
(:func:`ctxbudget.trim.passages.select_regions`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence

from ..items import GAP
from ..memo import per_fit_by_identity
from .bm25 import bm25_span_scores
from .passages import (
    MIN_PASSAGE_TOKENS,
    PassageScorer,
    content_query,
    passage_tokens,
    select_regions,
    split_passages,
)
from .sentences import iter_sentence_ends
from .shares import water_level
from .text import WORD_BOUNDARY_KEEP, Copied, Span, grapheme_ceil, grapheme_floor, has_text

__all__ = ["GAP", "asks_a_question", "cut_message", "question_of", "question_spans"]

_PARAGRAPH = re.compile(r"\n\s*\n")
_LABEL = re.compile(r"^\s*(question|query|q|task|ask)\s*[:.)-]", re.IGNORECASE)
_MAX_QUESTION_CHARS = 2000
# A first paragraph this short, with no paragraph asking, is kept as the instruction for what
# follows it ("Summarize the following incident log in three bullet points:").
_MAX_INSTRUCTION_CHARS = 500
# The least room a cut keeps a head in (a few words beside their marker); less keeps nothing.
MIN_HEAD_TOKENS = 8


def _paragraphs(text: str) -> list[tuple[int, int]]:
    """The text's paragraphs that hold more than whitespace (searched in place: no slice of a
    500 kB message is copied to see whether it is blank)."""
    spans, start = [], 0
    for gap in _PARAGRAPH.finditer(text):
        if has_text(text, start, gap.start()):
            spans.append((start, gap.start()))
        start = gap.end()
    if has_text(text, start, len(text)):
        spans.append((start, len(text.rstrip())))
    return spans


def _asks(text: str, strongly: bool) -> bool:
    """Whether a paragraph asks: it contains a ``?`` or opens with a label; ``strongly``: it ends
    with its ``?`` or opens with a label (a question, not a passage that quotes one)."""
    if _LABEL.match(text):
        return True
    stripped = text.rstrip()
    return stripped.endswith(("?", "？")) if strongly else "?" in stripped or "？" in stripped


def question_spans(text: str) -> list[tuple[int, int]]:
    """The character ranges that hold the message's question (see the module docstring)."""
    return list(_remembered_question_spans(text))


@per_fit_by_identity
def _remembered_question_spans(text: str) -> tuple[tuple[int, int], ...]:
    """:func:`_question_spans`, remembered for the fit (:mod:`ctxbudget.memo`): a fit asks it of one
    message up to five times (its query, its protected tokens, whether it asks, its cut), and
    each answer scanned the whole text for paragraphs (3 ms a time for a 500 kB message)."""
    return tuple(_question_spans(text))


def _question_spans(text: str) -> list[tuple[int, int]]:
    """:func:`question_spans`, read from the text."""
    paragraphs = _paragraphs(text)
    if not paragraphs:
        return []
    end = paragraphs[-1][1]
    tail = [p for p in paragraphs if end - p[0] <= _MAX_QUESTION_CHARS]
    # Near its start: "Question: ..." then the context, or a greeting, the question, then a
    # pasted document ("Here is the contract: ...").
    head = [p for p in paragraphs[:-1] if p[0] < _MAX_QUESTION_CHARS and p[1] - p[0] <= _MAX_QUESTION_CHARS]
    # A paragraph that is a question beats one that merely holds a "?"; the end beats the start.
    for strongly in (True, False):
        asking = [p for p in tail if _asks(text[p[0] : p[1]], strongly)]
        if asking:
            return [(asking[0][0], end)]
        opening = [p for p in head if _asks(text[p[0] : p[1]], strongly)]
        if opening:
            return [opening[0]]
    last = _last_sentence(text, paragraphs[-1][0], end)
    if last and _asks(text[last[0][0] : end], strongly=True):
        return last
    # A long first paragraph that opens by asking ("What is clause 4? <the contract>...").
    opening = _opening_question(text, paragraphs[0])
    if opening:
        return opening
    # No paragraph asks: the request is the text around what was pasted, an instruction before it
    # ("Summarize the following log:") as well as the last paragraph or sentence after it.
    ending = [(tail[-1][0], end)] if tail else last  # last: empty when nothing is short enough
    lead = paragraphs[0]
    instruction = len(paragraphs) > 1 and lead[1] - lead[0] <= _MAX_INSTRUCTION_CHARS
    if instruction and (not ending or lead[1] < ending[0][0]):  # kept with no ending found too
        return [lead, *ending]
    return ending


def _last_sentence(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The last sentence of the paragraph at ``start`` (abbreviation-aware: "Hon. Smith" is not
    two sentences), when it is short enough to be the question."""
    last = 0
    window = max(start, end - _MAX_QUESTION_CHARS - 1)
    for last in iter_sentence_ends(text, window, end - 1):  # noqa: B007 - the last one is wanted
        pass
    if not last:
        return []
    rest = text[last:end]
    return [(last + len(rest) - len(rest.lstrip()), end)]


def _opening_question(text: str, paragraph: tuple[int, int]) -> list[tuple[int, int]]:
    """The opening sentences of ``paragraph`` up to the first that ends asking, when they are
    short enough to be the question."""
    start, stop = paragraph
    limit = min(stop, start + _MAX_QUESTION_CHARS)
    for cut in iter_sentence_ends(text, start, limit):
        opening = text[start:cut].rstrip()
        if opening.endswith(("?", "？")):
            return [(start, start + len(opening))]
    return []


def _first_paragraph(text: str, start: int, end: int) -> tuple[int, int]:
    """The paragraph ``text[start:end]`` opens with."""
    gap = _PARAGRAPH.search(text, start, end)
    return (start, gap.start()) if gap else (start, end)


def asks_a_question(text: str) -> bool:
    """Whether the message's question (:func:`question_spans`) asks: it holds a ``?`` or opens
    with a label. A message that only ends (a pasted text, an instruction) has none to protect."""
    return any(_asks(text[a:b], strongly=False) for a, b in question_spans(text))


def question_of(text: str) -> str:
    """The question a message asks (its question paragraphs, joined)."""
    return " ".join(text[a:b].strip() for a, b in question_spans(text))


def cut_message(
    text: str,
    span: Span,
    budget: int,
    query: str,
    *,
    count_text: Callable[[str], int],
    keep_question: bool,
    scorer: PassageScorer | None = None,
    bounds: Sequence[tuple[int, int]] = (),
    keep_end: bool = False,
) -> tuple[tuple[str, tuple[Copied, ...]], ...]:
    """``text`` within about ``budget`` tokens: its question kept when ``keep_question``, then the
    passages that best match ``query`` (the question itself for the message that asks it). With
    ``keep_end`` its longest end instead: a prefill, which the model continues from its last word.

    ``bounds`` says where each of the message's pieces (its tool results or text blocks) sits in
    ``text`` (default: one piece, the whole text); the room is shared among them by a common
    level (the largest cut first) and the new text of each piece is returned, in order, with the
    stretches of ``text`` it copies (:data:`~.text.Copied`: where they are in the piece and in
    ``text``), for its count to reuse ``text``'s."""
    bounds = tuple(bounds) or ((0, len(text)),)
    if budget <= 0:
        return (("", ()),) * len(bounds)
    if span.tokens <= budget:
        return tuple((text[a:b], ((0, a, b - a),)) for a, b in bounds)
    count = span.char_counter(text)
    gap = count_text(GAP)
    kept = question_spans(text) if keep_question else []
    kept_tokens = sum(count(a, b) for a, b in kept)
    lead = None
    if kept and kept_tokens > budget:
        if len(kept) > 1:
            # an instruction before what was pasted and the ending after it, too long together: the
            # ending first (the ask is usually there) with the marker before it, the instruction's
            # head in the room left (the instruction alone dropped the ask at some budgets)
            lead, kept = kept[0], kept[1:]
            kept_tokens = count(*kept[0]) + gap
        else:  # the ask with what follows it is too long: the ask alone
            kept = [_first_paragraph(text, *kept[0])]
            kept_tokens = count(*kept[0])
    if keep_end:
        regions = [_keep_end(text, 0, count, budget - gap)]
    elif keep_question and (not kept or kept_tokens > budget):
        # no question to tell apart, or the question alone is too long: keep the end, where an ask
        # is; its head when the end is one character too long for the room (a letter with 20,000
        # accents emptied the whole question, "Summarize this: " and all)
        start = kept[-1][0] if kept else 0
        regions = [_keep_end(text, start, count, budget - gap)]
        if regions[0][0] == regions[0][1]:
            regions = [_keep_head(text, start, len(text), count, budget - gap)]
    elif lead is not None:
        head = _keep_head(text, *lead, count, budget - kept_tokens)
        regions = [head, *kept] if budget - kept_tokens >= MIN_HEAD_TOKENS else kept
    else:
        if kept:
            query = " ".join(text[a:b] for a, b in kept) or query
        stretches = _within(_between(text, kept), bounds)
        regions = sorted(kept + _select(text, stretches, budget - kept_tokens, query, count, scorer, gap))
    # A piece with nothing kept is "" (it costs nothing; the format says where a marker must stand).
    return tuple(
        _joined(text, near, a, b) for (a, b), near in zip(bounds, _per_piece(regions, bounds), strict=True)
    )


def _between(text: str, kept: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The stretches of ``text`` outside the kept ranges."""
    stretches, start = [], 0
    for a, b in sorted(kept):
        if a > start:
            stretches.append((start, a))
        start = max(start, b)
    if start < len(text):
        stretches.append((start, len(text)))
    return [(a, b) for a, b in stretches if text[a:b].strip()]


def _within(stretches: list[tuple[int, int]], bounds: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The stretches split at the pieces' bounds (a passage never spans two pieces). Both are in
    order and apart, so each stretch looks only at the bounds it overlaps (a message of 4,000 text
    blocks took 14 s when every stretch was tried against every bound)."""
    out: list[tuple[int, int]] = []
    for (a, b), near in zip(stretches, _per_piece(bounds, stretches), strict=True):
        out += [(max(a, lo), min(b, hi)) for lo, hi in near if max(a, lo) < min(b, hi)]
    return out


def _per_piece(
    ranges: Sequence[tuple[int, int]], pieces: Sequence[tuple[int, int]]
) -> list[list[tuple[int, int]]]:
    """For each of ``pieces``, the ``ranges`` that overlap it (both in order, each apart)."""
    ends = [end for _, end in ranges]
    out = []
    for lo, hi in pieces:
        near, n = [], bisect_right(ends, lo)  # the first range that ends after ``lo``
        while n < len(ranges) and ranges[n][0] < hi:
            near.append(ranges[n])
            n += 1
        out.append(near)
    return out


def _select(
    text: str,
    stretches: list[tuple[int, int]],
    budget: int,
    query: str,
    count: Callable[[int, int], int],
    scorer: PassageScorer | None,
    gap: int,
) -> list[tuple[int, int]]:
    """Kept regions within ``budget``: the stretches share it by a common level; those above it
    keep their passages that best match ``query`` (a marker where text was left out). When that
    level is below a passage (many small pieces: 4,000 text blocks of a pasted log), cutting
    each would keep a few words of every one: whole stretches are kept instead, best match
    first (:func:`_whole_stretches`). One stretch keeps its head in a room under a passage."""
    costs = [count(a, b) for a, b in stretches]
    level = water_level(costs, budget)
    if len(stretches) > 1 and level - gap < MIN_PASSAGE_TOKENS and max(costs, default=0) > level:
        return _whole_stretches(text, stretches, costs, budget, query)
    regions: list[tuple[int, int]] = []
    for (a, b), cost in zip(stretches, costs, strict=True):
        if cost <= level:
            regions.append((a, b))
        elif level > gap and text[a:b].strip():
            regions += _passages_of(text, a, b, level, query, count, scorer, gap)
    return regions


def _whole_stretches(
    text: str, stretches: list[tuple[int, int]], costs: list[int], budget: int, query: str
) -> list[tuple[int, int]]:
    """Whole stretches within ``budget``, those that best match ``query`` first (ties: the later
    one, nearer the question), in text order."""
    scores = bm25_span_scores(content_query(query), text, stretches)
    kept, left = [], budget
    for n in sorted(range(len(stretches)), key=lambda i: (-scores[i], -i)):
        if costs[n] <= left:
            kept.append(stretches[n])
            left -= costs[n]
    return sorted(kept)


def _passages_of(
    text: str,
    a: int,
    b: int,
    budget: int,
    query: str,
    count: Callable[[int, int], int],
    scorer: PassageScorer | None,
    gap: int,
) -> list[tuple[int, int]]:
    """The passages of ``text[a:b]`` that best match ``query``, within ``budget`` (selected in
    that stretch alone: a message of many pieces is not scanned whole for each of them)."""
    stretch = text[a:b]
    passages = split_passages(stretch, lambda i, j: count(a + i, a + j), passage_tokens(budget))
    costs = [count(a + p.start, a + p.end) for p in passages]
    chosen = select_regions(stretch, passages, costs, budget, query=query, region_cost=gap, scorer=scorer)
    if not chosen and budget - gap >= MIN_HEAD_TOKENS:
        # no passage is as small as the room (one long sentence, or a room under a passage: a tool
        # result whose group shares a small room): its head, cut at a word. Only a room too small
        # for a few words keeps nothing (an emptied tool result reads as one that returned nothing).
        head = _keep_head(text, a, b, count, budget - gap)
        return [head] if head[1] > head[0] else []
    return [(a + r.start, a + r.end) for r in chosen]


def _keep_head(
    text: str, start: int, end: int, count: Callable[[int, int], int], budget: int
) -> tuple[int, int]:
    """The longest start of ``text[start:end]`` within ``budget`` tokens, ending after a word
    when one ends in its last part (:data:`~.text.WORD_BOUNDARY_KEEP`, as a system prompt's cut:
    "Result: <a base64 screenshot>" was kept as "Result:", most of its room left unused)."""
    low, high = start, end
    while low < high:
        mid = (low + high + 1) // 2
        if count(start, mid) <= budget:
            low = mid
        else:
            high = mid - 1
    space = text.rfind(" ", start, low)
    near = space > start and space - start >= WORD_BOUNDARY_KEEP * (low - start)
    return (start, space if near and low < end else max(start, grapheme_floor(text, low)))


def _joined(text: str, regions: list[tuple[int, int]], lo: int, hi: int) -> tuple[str, tuple[Copied, ...]]:
    """The regions that lie in ``text[lo:hi]`` (one piece), in order, clipped to it, with a
    marker wherever text between or around them was left out; regions that touch, or are apart
    only by a little whitespace (:data:`MAX_JOINED_BLANK`), are joined by the text between them,
    as it was (the piece as it was if nothing was left out). A longer blank run is left out as
    text is: 100,000 line breaks before a question were kept whole, and a body that fits once
    they go was refused as over its budget. With the piece, the stretches of ``text`` it copies
    (:data:`~.text.Copied`), for its count to reuse ``text``'s (:func:`~.text.spliced_lengths`)."""
    out, last, cut = "", lo, False
    copied: list[Copied] = []
    pieces = [
        p for a, b in sorted(regions) for p in _between_long_blanks(text, max(a, lo), min(b, hi), lo, hi)
    ]
    for start, end in pieces:
        start = max(start, last)
        if start >= end or not has_text(text, start, end):
            continue
        if _left_out(text, last, start):  # searched in place: the gap may be most of a long text
            cut = True
            stripped = out.rstrip("\n")
            copied = _clipped(copied, len(stripped))
            out = stripped + GAP if out else GAP.lstrip("\n")
            kept = text[start:end].lstrip("\n")
            copied.append((len(out), end - len(kept), len(kept)))
            out += kept
        else:
            copied.append((len(out), last, end - last))
            out += text[last:start] + text[start:end]
        last = end
    if _left_out(text, last, hi):
        if not out:
            return "", ()
        out = out.rstrip("\n")
        return out + GAP.rstrip("\n"), tuple(_clipped(copied, len(out)))
    return (out, tuple(copied)) if cut else (text[lo:hi], ((0, lo, hi - lo),))


def _clipped(copied: list[Copied], size: int) -> list[Copied]:
    """The stretches as the first ``size`` characters of the text they are copied into hold them
    (its end stripped of line breaks)."""
    return [(at, origin, min(length, size - at)) for at, origin, length in copied if at < size]


# Whitespace between kept regions (or before the first, after the last) that is kept as it is:
# a few blank lines or an indent; a longer run is layout no reader needs, at up to a token a
# character or two.
MAX_JOINED_BLANK = 64


def _between_long_blanks(text: str, start: int, end: int, lo: int, hi: int) -> list[tuple[int, int]]:
    r"""The region ``text[start:end]`` less a blank run longer than :data:`MAX_JOINED_BLANK` at
    either of its ends, the whole run measured (it may begin before the region or end after it,
    within ``text[lo:hi]``): a question after 100,000 tabs was kept with as many of them as its
    room held, and a region that began halfway into a run kept its half. A run inside the region,
    text on both sides of it, is kept as it is (a table's or a program's layout is evidence).

    Only the runs that hold the region's first or last character are looked for: a search for
    every long run of a cut document's half (``\s{65,}``, tried at each of its characters) took
    1.5 ms of each region of 260 kB."""
    if start >= end:
        return []
    reach = MAX_JOINED_BLANK + 1  # a run overlapping the region is longer than this inside the window
    low, high = max(lo, start - reach), min(hi, end + reach)
    parts, pos = [], start
    for a, b in _end_runs(text, start, end, low, high):
        if a > pos:
            parts.append((pos, a))
        pos = max(pos, b)
    if pos < end:
        parts.append((pos, end))
    return parts


def _end_runs(text: str, start: int, end: int, low: int, high: int) -> list[tuple[int, int]]:
    """The blank runs of ``text[low:high]`` longer than :data:`MAX_JOINED_BLANK` that hold the
    character at ``start`` or at ``end - 1``, in order (one, when a run holds both)."""
    runs = []
    if text[start].isspace():
        run = _blank_run(text, start, low, high)
        if run[1] - run[0] > MAX_JOINED_BLANK:
            runs.append(run)
    if text[end - 1].isspace() and not (runs and runs[0][1] >= end):
        run = _blank_run(text, end - 1, low, high)
        if run[1] - run[0] > MAX_JOINED_BLANK:
            runs.append(run)
    return runs


def _blank_run(text: str, at: int, low: int, high: int) -> tuple[int, int]:
    r"""The run of whitespace of ``text[low:high]`` that holds ``at`` (a whitespace character):
    read back a slice at a time (``rstrip`` strips what ``\s`` matches: ``str.isspace``), and on
    by one match."""
    first = at
    while first > low:
        piece = text[max(low, first - _BACK_STEP) : first]
        kept = len(piece.rstrip())
        if kept:
            first -= len(piece) - kept
            break
        first -= len(piece)
    return first, _BLANKS.match(text, at, high).end()  # type: ignore[union-attr]  # ``at`` is blank


_BACK_STEP = 4096
_BLANKS = re.compile(r"\s+")


def _left_out(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]``, outside the kept regions, is left out (with a marker): it
    holds text, or more whitespace than :data:`MAX_JOINED_BLANK`."""
    return end - start > MAX_JOINED_BLANK or has_text(text, start, end)


def _keep_end(text: str, start: int, count: Callable[[int, int], int], budget: int) -> tuple[int, int]:
    """The longest end of ``text[start:]`` within ``budget`` tokens (a question ends with its ask),
    beginning at a word when one begins in its first part (:data:`~.text.WORD_BOUNDARY_KEEP`, as
    a head's cut ends after one): "I really like Hopelessly Devoted to You" was kept as "lessly
    Devoted to You"."""
    low, high = start, len(text)
    while low < high:
        mid = (low + high) // 2
        if count(mid, len(text)) <= budget:
            high = mid
        else:
            low = mid + 1
    end = len(text)
    if low > start and not text[low - 1].isspace():  # it begins inside a word
        space = _next_space(text, low, end)
        if space is not None and end - (space + 1) >= WORD_BOUNDARY_KEEP * (end - low):
            return space + 1, end
    return grapheme_ceil(text, low), end


def _next_space(text: str, start: int, end: int) -> int | None:
    """Where the first whitespace of ``text[start:end]`` stands, else None."""
    found = _SPACE.search(text, start, end)
    return found.start() if found else None


_SPACE = re.compile(r"\s")
