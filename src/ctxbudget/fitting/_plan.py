"""Planning one fit: given each component's budget, a decision for every item (kept, cut,
dropped or summarized), the documents' output order and the history's placeholder.

System and query texts share their budgets in proportion to their sizes; documents are chosen
whole by relevance and, when asked, the long ones left out are split into their best passages;
the history keeps its first and newest messages and summarizes the middle
(:mod:`ctxbudget.trim`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from ..items import COMPONENTS, PIECE_SEP, PLACEHOLDER_TEMPLATE, Component, Cut, Decision, Item, ItemKey, Plan
from ..measure import measure_total
from ..tokens.counter import cached_analysis, remember
from ..trim.documents import select_documents
from ..trim.history import select_history
from ..trim.messages import cut_message
from ..trim.shares import shares_keeping_short
from ..trim.split import split_documents
from ..trim.steps import Steps
from ..trim.text import Copied, PiecesSpan, TextSpan, spliced_lengths, truncate_text
from ._context import FitContext

__all__ = ["ItemCosts", "empty_plan", "make_plan"]

Budgets = Mapping[Component, int]
Slices = dict[int, tuple[tuple[int, int, str], ...]]


class ItemCosts(Mapping[int, int]):
    """Items' counts by index, each read when it is looked up (a count may tokenize the item:
    what a decision never looks up is never counted)."""

    def __init__(self, items: Mapping[int, Item], read: Callable[[Item], int]) -> None:
        self._items = items  # by index (:func:`_by_index`: one table for a component's readings)
        self._read = read

    def __getitem__(self, index: int) -> int:
        return self._read(self._items[index])

    def __iter__(self) -> Iterator[int]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True)
class _DocumentPlan:
    """The documents' decisions, their output order, and the passages kept of split ones."""

    decisions: dict[ItemKey, Decision]
    order: tuple[int, ...]
    slices: Slices


def make_plan(ctx: FitContext, budgets: Budgets) -> Plan:
    """Every item's decision within ``budgets`` (a component budgeted 0% gets nothing, but for a
    chat query's question: claimed before any share, it is the query's whole budget then)."""
    zero = {c for c in COMPONENTS if ctx.split.percentages[c] == 0}
    given: dict[Component, int] = {c: 0 if c in zero else budgets[c] for c in COMPONENTS}
    if "query" in zero and ctx.first_claim():
        # a 0% share is 0 and nothing is handed on to it (allocate): the claim and the framing are
        # left, and the question kept (emptied, the fit refused a request it could make, "needs
        # 376 tokens but only 375 are available")
        given["query"] = budgets["query"]
    decisions = _plan_system(ctx, given["system"]) | _shared_texts(ctx, "query", given["query"], False)
    documents = _plan_documents(ctx, given["documents"], split="documents" not in zero)
    decisions |= documents.decisions
    history = ctx.of("history")
    if not history:
        return Plan(decisions, documents.order, document_slices=documents.slices)
    if "history" in zero:
        decisions |= {m.key: Decision("dropped", "history budget is 0%") for m in history}
        return Plan(decisions, documents.order, document_slices=documents.slices)
    indexed = _by_index(history)
    chosen = select_history(
        history,
        ItemCosts(indexed, ctx.cost),
        budgets["history"],
        placeholder_cost=_placeholder_cost(ctx, history),
        shrink=lambda m, b: _truncate(ctx, m, b),
        fixed=ItemCosts(indexed, ctx.framing),
        at_least=_bounds(ctx, indexed),
        steps=_steps(ctx),
        first_required=ctx.first_unit_required,
        after_question=_after_question(ctx),
        shrink_against=lambda m, b, q: _truncate(ctx, m, b, q),
        query=ctx.question,
    )
    decisions |= {("history", i): d for i, d in chosen.decisions.items()}
    return Plan(
        decisions,
        documents.order,
        chosen.placeholder_after,
        chosen.omitted,
        document_slices=documents.slices,
        history_cut=chosen.cut,
    )


def _after_question(ctx: FitContext) -> int | None:
    """The index of the first history message after the question, when history comes before it
    too (an agent's steps after the question): what the history omits there takes a placeholder
    of its own (``formats.chat``)."""
    asked, before = False, False
    for item in ctx.items:
        if item.component == "query":
            asked = True
        elif item.component == "history":
            if asked and before:
                return item.index
            before = before or not asked
    return None


def _steps(ctx: FitContext) -> Steps | None:
    """Cutting the history in steps, when asked (``low_water``), from the previous turn's cut."""
    low_water = ctx.options.low_water
    return None if low_water is None else Steps(low_water, ctx.options.previous_cut)


def _by_index(items: list[Item]) -> dict[int, Item]:
    """A component's items by their index."""
    return {item.index: item for item in items}


def _bounds(ctx: FitContext, items: Mapping[int, Item]) -> ItemCosts | None:
    """The items' lower bounds, for decisions that can skip counting what cannot fit (None once
    everything is counted: then decisions read, and their reasons give, exact counts)."""
    return None if ctx.measured.all_counted() else ItemCosts(items, ctx.at_least)


def empty_plan(ctx: FitContext) -> Plan:
    """Every item emptied (``on_overflow="empty"``): the query's text cleared, the rest dropped."""
    decisions: dict[ItemKey, Decision] = {}
    for item in ctx.items:
        if item.component == "query":
            decisions[item.key] = Decision("truncated", "on_overflow=empty: emptied", "")
        else:
            decisions[item.key] = Decision("dropped", "on_overflow=empty: emptied")
    return Plan(decisions, ())


def _plan_system(ctx: FitContext, budget: int) -> dict[ItemKey, Decision]:
    """System prompts kept whole when protected, else sharing ``budget`` (and droppable)."""
    if ctx.split.protect_system:
        return {
            i.key: Decision("kept", "system prompts are protected (budget system=N to trim them)")
            for i in ctx.of("system")
        }
    return _shared_texts(ctx, "system", budget, True)


def _plan_documents(ctx: FitContext, budget: int, *, split: bool) -> _DocumentPlan:
    """Whole documents chosen by relevance to the query, then (when ``split_documents`` is on and
    ``split``) the best passages of long ones left out, in what the chosen ones leave."""
    docs = ctx.of("documents")
    indexed = _by_index(docs)
    query = " ".join(i.text for i in ctx.of("query"))
    selection = select_documents(
        docs,
        ItemCosts(indexed, ctx.cost),
        budget,
        query=query,
        score_order=ctx.options.score_order,
        output_order=ctx.options.document_order,
        # Documents left out are split into passages, and counted for that: no bounds then.
        at_least=None if ctx.options.split_documents and split else _bounds(ctx, indexed),
        shown=ctx.counter.scale,
        counted=lambda index: ctx.measured.reported(indexed[index].key)[1],
    )
    decisions: dict[ItemKey, Decision] = {("documents", i): d for i, d in selection.decisions.items()}
    if not (ctx.options.split_documents and split):
        return _DocumentPlan(decisions, selection.order, {})
    slices, split_decisions = split_documents(
        [d for d in docs if d.index not in selection.order and d.index not in selection.duplicates],
        budget - sum(ctx.cost(d) for d in docs if d.index in selection.order),
        query,
        cost=ctx.cost,
        framing=ctx.framing,
        span_of=ctx.span,
        scorer=ctx.passage_scorer,
    )
    order = selection.order + tuple(slices)  # the passages of split ones after the whole ones, by rank
    if ctx.options.document_order == "original":  # or every kept document where it was sent
        order = tuple(sorted(order))
    return _DocumentPlan(decisions | split_decisions, order, slices)


def _shared_texts(
    ctx: FitContext, component: Component, budget: int, droppable: bool
) -> dict[ItemKey, Decision]:
    """The component's texts sharing ``budget`` (short ones kept whole, the others in proportion
    to their costs: :func:`~ctxbudget.trim.shares.shares_keeping_short`), each cut to its share
    (and dropped, when ``droppable``, if nothing of it is left)."""
    items = ctx.of(component)
    # One text takes the whole budget: when its bound is over it, it is cut without a count.
    alone = len(items) == 1 and ctx.at_least(items[0]) > budget
    shares = [budget] if alone else shares_keeping_short(budget, [ctx.cost(i) for i in items])
    decisions: dict[ItemKey, Decision] = {}
    for item, share in zip(items, shares, strict=True):
        if not alone and share >= ctx.cost(item):
            decisions[item.key] = Decision("kept", f"fits its {component} share")
            continue
        cut = _truncate(ctx, item, share)
        if not cut.text.strip() and droppable:
            shown = ctx.counter.scale(share)  # as the report gives tokens
            decisions[item.key] = Decision("dropped", f"no room in the {component} share ({shown} tokens)")
        else:
            reason = f"cut to its {component} share of {ctx.counter.scale(share)} tokens"
            decisions[item.key] = Decision("truncated", reason, cut.text, cut.tokens, cut.pieces)
    return decisions


def _truncate(ctx: FitContext, item: Item, budget: int, question: str | None = None) -> Cut:
    """The item's text cut so the whole item costs at most ``budget`` (framing included). The
    seed's question format cuts at a sentence boundary from the head; chat messages keep their
    question and the passages that match it (``question``, else the one asked now), each of their
    texts in its place (:mod:`ctxbudget.trim.messages`)."""
    if ctx.fmt.name == "question" and ctx.at_least(item) > budget:
        room = budget - ctx.framing(item)
        head = ctx.measured.head_span(item.key, room)
        if head is not None:  # a window over the text's start: the rest is never counted
            text, tokens = truncate_text(item.text, head, room)
            return Cut(text, (), budget - room + tokens)
    span = ctx.span(item.key)
    if span is None:
        return Cut(item.text, (), ctx.cost(item))
    if isinstance(span, TextSpan) and ctx.fmt.name == "question":
        text, tokens = truncate_text(item.text, span, budget - ctx.framing(item))
        return Cut(text, (), ctx.framing(item) + tokens)
    bounds = span.bounds if isinstance(span, PiecesSpan) else ()
    cut = cut_message(
        item.text,
        span,
        budget - ctx.framing(item),
        ctx.question if question is None else question,
        count_text=ctx.counter.raw,
        keep_question=item.component == "query",
        scorer=ctx.passage_scorer,
        bounds=bounds,
        keep_end=_is_prefill(ctx, item),
    )
    pieces = tuple(piece for piece, _ in cut)
    text = PIECE_SEP.join(pieces)
    if text == item.text:
        return Cut(text, (), ctx.cost(item))
    sources = span.pieces if isinstance(span, PiecesSpan) else (span,)
    for (piece, copied), (a, b), source in zip(cut, bounds or ((0, len(item.text)),), sources, strict=True):
        if source is not None:
            _count_from_source(ctx, piece, copied, item.text, a, b, source)
    tokens = ctx.framing(item) + sum(ctx.counter.raw(p) for p in pieces)
    return Cut(text, pieces if bounds else (), tokens)


def _count_from_source(
    ctx: FitContext, piece: str, copied: tuple[Copied, ...], text: str, a: int, b: int, span: TextSpan
) -> None:
    """The count of a piece cut from ``text[a:b]`` (the text ``span`` places), read where it
    copies that text from its own encode (:func:`~ctxbudget.trim.text.spliced_lengths`) and kept
    for the count that follows; nothing when it is counted already or cannot be read so (then it
    is encoded)."""
    encoding = ctx.counter.encoding
    if cached_analysis(encoding, piece) is None:
        within = tuple((at, origin - a, length) for at, origin, length in copied)
        lengths = spliced_lengths(encoding, piece, within, text[a:b], span)
        if lengths is not None:
            remember(encoding, piece, lengths)


def _is_prefill(ctx: FitContext, item: Item) -> bool:
    """The chat's last message, an assistant's after the question: a prefill, which the model
    continues from its end (cut, it keeps its end, not the passages that match the question)."""
    return item is ctx.items[-1] and item.component == "history" and item.role == "assistant"


def _placeholder_cost(ctx: FitContext, history: list[Item]) -> int:
    """Raw tokens of the summary placeholder: its text, framed as a plain message of the role it
    takes (a user turn before the question, an assistant note after it). In a chat body that is
    measured: the placeholder of each role rendered alone as the format renders a message
    (:func:`_plain_message_cost`). Elsewhere (the question format's history, plain role and
    content pairs) a message's framing only grows with what it carries, so the least framed
    history message of a role bounds a plain one's; the most framed of all is the bound when
    neither role is in the history. (The least framed message bounded it in chat bodies too: an
    agent's history, every message a tool call or a result with documents, priced the
    placeholder at 860 tokens, and the newest step's texts were cut to nothing for room the
    placeholder then did not even get.)"""
    text = PLACEHOLDER_TEMPLATE.format(omitted=len(history))
    listed = _MESSAGE_LISTS.get(ctx.fmt.name)
    if listed is not None:
        return _plain_message_cost(ctx, listed, text)
    least: dict[str, int] = {}
    for message in history:
        if message.role in ("user", "assistant"):
            framing = ctx.framing(message)
            least[message.role] = min(framing, least.get(message.role, framing))
    if least:
        return ctx.counter.raw(text) + max(least.values())
    return ctx.counter.raw(text) + max((ctx.framing(m) for m in history), default=0)


# The field a chat format's messages are in.
_MESSAGE_LISTS = {"openai": "messages", "anthropic": "messages", "responses": "input"}


def _plain_message_cost(ctx: FitContext, listed: str, text: str) -> int:
    """Raw tokens a plain message holding ``text`` adds to a body of the format, as a user turn or
    an assistant note, whichever costs more: a body of that message alone less an empty one (read
    once), each measured as sent."""
    encoding, sources = ctx.counter.encoding, ctx.measured.sources
    empty = measure_total(ctx.rendered({listed: []}), encoding, sources)
    alone = (
        measure_total(ctx.rendered({listed: [{"role": role, "content": text}]}), encoding, sources)
        for role in ("user", "assistant")
    )
    return max(alone) - empty
