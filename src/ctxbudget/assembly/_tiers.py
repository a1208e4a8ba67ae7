"""Per-tier selection under the policy's rules, in raw encoding tokens.

- ``never``: everything stays, byte for byte; over its ceiling is a hard failure.
- ``protected``: verbatim; an item leaves only when a newer item ``supersedes`` it (a cited quote,
  verified against the transcript when the request holds it) or the request confirms its
  eviction (``confirm_evict``); otherwise over the ceiling fails closed. With the request's
  ``issue_tags``, tagged items whose tags are not among them are not selected.
- ``compact``: over its target, reduced by deterministic extractive compaction.
- ``rolling``: the most recent items that fit (a group, such as a turn, leaves whole; a tool call
  stays with the result after it). The ledger is not a rolling item: it is Block 3.
"""

from __future__ import annotations

import html
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import TIER_HINT, BudgetExceeded, InvalidRequestError, SupersedeUnverified
from ..items import JOINER, JOINER_TOKENS, MESSAGE_FRAMING_TOKENS
from ..tokens.counter import TokenCounter, analyze, count_together
from ..trim.extract import extract_sentences
from ..trim.passages import (
    PassageScorer,
    Region,
    passage_tokens,
    ranking,
    select_regions,
    split_passages,
)
from ..trim.profile import sentence_profile
from ..trim.text import TextSpan
from ._policy import Tier
from ._quotes import Sources, cited_lines, parse_citation, quote_verified
from ._report import DecisionReport
from ._request import ContextItem, ContextRequest

__all__ = ["ItemDecision", "TierSelection", "render_item", "select_ledger", "select_tier"]


# What happened to one item, and why: the report's value, holding raw encoding tokens here (the
# report scales them).
ItemDecision = DecisionReport


@dataclass(frozen=True, kw_only=True)
class TierSelection:
    """The texts a tier contributes (in order) and a decision per item."""

    tier: Tier
    texts: tuple[tuple[ContextItem, str], ...]
    decisions: tuple[ItemDecision, ...]


def render_item(item: ContextItem, text: str) -> str:
    """How an item reads in the prompt: evidence carries its id and citation around verbatim text
    (the attributes escaped, so an id or citation cannot add markup; the text stays verbatim)."""
    if item.kind == "evidence":
        citation = f' citation="{html.escape(item.citation)}"' if item.citation else ""
        return f'<evidence id="{html.escape(item.id)}"{citation}>\n{text}\n</evidence>'
    return text


def rendered_to_count(request: ContextRequest, tiers: Sequence[Tier]) -> list[str]:
    """What a protected tier counts of its items beyond their texts: each piece of evidence as it
    reads in the prompt (:func:`render_item`), known from the request alone, so that it may be
    counted ahead with the texts (counted one by one once the tier was selected, the legal
    example's ten took about 0.5 ms of the assembly's thread)."""
    return [
        render_item(item, item.text)
        for tier in tiers
        if tier.eviction == "protected"
        for item in request.in_tier(tier)
        if item.kind == "evidence"
    ]


_BLANK = "blank: nothing to send, no block is made for it"


def _kept(item: ContextItem, tokens: int, reason: str) -> ItemDecision:
    if not item.text.strip():  # the renderers make no block of blanks: nothing of it is sent
        return _gone(item, tokens, "dropped", _BLANK)
    return ItemDecision(id=item.id, action="kept", tokens_before=tokens, tokens_after=tokens, reason=reason)


def _gone(item: ContextItem, tokens: int, action: str, reason: str) -> ItemDecision:
    return ItemDecision(id=item.id, action=action, tokens_before=tokens, tokens_after=0, reason=reason)


def _available(tier: Tier, counter: TokenCounter, limit: int) -> int:
    """A refusal's available tokens: the tier's ceiling as the policy wrote it when ``limit`` (raw
    tokens) is all of it (scaled back, 4,000 under a x1.3 estimate read 3,999), else ``limit``."""
    return tier.ceiling_tokens if limit >= counter.unscale(tier.ceiling_tokens) else counter.scale(limit)


def _never(tier: Tier, items: list[ContextItem], counter: TokenCounter, limit: int) -> TierSelection:
    cost = counter.raw
    total = sum(cost(i.text) for i in items)
    if total > limit:
        raise BudgetExceeded(
            available_tokens=_available(tier, counter, limit),
            required_tokens=counter.scale(total),
            parts={f"tier {tier.index} {tier.name} (never evicted)": counter.scale(total)},
            hint=TIER_HINT,
        )
    return TierSelection(
        tier=tier,
        texts=tuple((i, i.text) for i in items),
        decisions=tuple(_kept(i, cost(i.text), "pinned") for i in items),
    )


def _check_supersede(item: ContextItem, tier: Tier, sources: Sources) -> str | None:
    """A superseding item must be protected evidence with a citation; where the cited transcript
    is in the request, the cited lines must hold its text verbatim. Otherwise fail closed. Returns
    how the quote was checked (for the report), or None when the request holds no numbered
    transcript to check it against: then nothing is evicted (the spec evicts protected evidence
    only for a verified quote; an unchecked one replaced it, and the report said so)."""
    where = f"{item.path}.supersedes"
    if item.kind != "evidence" or not item.citation:
        raise SupersedeUnverified(
            f"{item.id!r} supersedes {item.supersedes!r} but is not protected evidence with a citation "
            f"(kind {item.kind!r}, citation {item.citation!r}): a protected quote is replaced only by a cited one",
            where,
        )
    if not item.text.strip():  # it would take the quote's place with nothing
        raise SupersedeUnverified(
            f"{item.id!r} supersedes {item.supersedes!r} but quotes nothing (its text is blank): "
            "a protected quote is replaced only by a quote",
            where,
        )
    if not sources.any_numbered():
        return None
    cited = parse_citation(item.citation)
    if cited is None:
        raise SupersedeUnverified(
            f"{item.id!r} supersedes {item.supersedes!r}, but its citation {item.citation!r} is not one "
            "page:line range (such as 47:12-48:3) to check against the transcript given, so nothing is evicted",
            where,
        )
    texts = cited_lines(sources.named(item.citation), cited)
    if not any(quote_verified(item.text, text) for text in texts):
        found = "do not hold its text verbatim" if texts else "are not in the transcript given"
        raise SupersedeUnverified(
            f"{item.id!r} supersedes {item.supersedes!r} in tier {tier.name!r}, but the lines it cites "
            f"({item.citation}) {found}: the superseding quote is not verified, so nothing is evicted",
            where,
        )
    return f"quote verified at {item.citation}"


def _tags_match(item: ContextItem, tags: frozenset[str]) -> bool:
    """Whether one of the item's tags is among ``tags``, case aside."""
    wanted = {t.casefold() for t in tags}
    return any(t.casefold() in wanted for t in item.tags)


def _not_selected(items: list[ContextItem], tags: frozenset[str] | None) -> set[str]:
    """Ids of tagged items with no tag among the case's issue tags (case aside; untagged items
    always stay). An item that supersedes a selected one takes its place, selected too."""
    if tags is None:
        return set()
    out = {i.id for i in items if i.tags and not _tags_match(i, tags)}
    replaced = {i.id: i.supersedes for i in items if i.supersedes}
    changed = True
    while changed:  # along supersede chains: the newest quote of a selected one is selected
        changed = False
        for new, old in replaced.items():
            if new in out and old not in out:
                out.discard(new)
                changed = True
    return out


def _check_order(items: list[ContextItem], tier: Tier) -> None:
    """Each ``supersedes`` names an older item of the same tier, not itself."""
    position = {i.id: i.position for i in items}
    for item in items:
        where = f"{item.path}.supersedes"
        if not item.supersedes:
            continue
        if item.supersedes == item.id:
            raise InvalidRequestError(f"{item.id!r} supersedes itself", where)
        if item.supersedes not in position:
            raise InvalidRequestError(
                f"{item.id!r} supersedes {item.supersedes!r}, which is not an item of tier {tier.name!r}",
                where,
            )
        if position[item.supersedes] > item.position:
            raise InvalidRequestError(
                f"{item.id!r} supersedes {item.supersedes!r}, which comes after it: only a newer item may supersede",
                where,
            )


def _superseded(
    tier: Tier, items: list[ContextItem], request: ContextRequest, cost: Callable[[str], int]
) -> tuple[set[str], list[ItemDecision], dict[str, str]]:
    """The items replaced by a verified newer quote, and their decisions; and the reasons the items
    whose newer quote could not be checked are kept for."""
    _check_order(items, tier)
    sources = Sources([i.text for i in request.items if i.kind == "document"])
    checks = {i.supersedes: (i.id, _check_supersede(i, tier, sources)) for i in items if i.supersedes}
    verified = {old: (new, how) for old, (new, how) in checks.items() if how is not None}
    decisions = [
        _gone(i, cost(i.text), "superseded", f"superseded by {verified[i.id][0]} ({verified[i.id][1]})")
        for i in items
        if i.id in verified
    ]
    unchecked = {
        old: f"protected, verbatim; kept beside {new}, which supersedes it citing {_citation_of(items, new)}: "
        "no numbered transcript in the request verifies its quote"
        for old, (new, how) in checks.items()
        if how is None
    }
    return set(verified), decisions, unchecked


def _unselected(
    items: list[ContextItem], request: ContextRequest, gone: set[str], cost: Callable[[str], int]
) -> tuple[set[str], list[ItemDecision]]:
    """The items the case's issue tags leave out, and their decisions."""
    unselected = _not_selected(items, request.issue_tags) - gone
    wanted = ", ".join(sorted(request.issue_tags or ()))
    decisions = [
        _gone(
            i, cost(i.text), "not_selected", f"tags {', '.join(i.tags)} are not among the issue tags {wanted}"
        )
        for i in items
        if i.id in unselected
    ]
    return unselected, decisions


def _protected(
    tier: Tier, items: list[ContextItem], counter: TokenCounter, limit: int, request: ContextRequest
) -> TierSelection:
    cost = counter.raw
    superseded, decisions, unchecked = _superseded(tier, items, request, cost)
    unselected, left_out = _unselected(items, request, superseded, cost)
    decisions += left_out
    kept = [i for i in items if i.id not in superseded and i.id not in unselected]
    # Each item rendered and counted once (the tier was, again for every item it evicted).
    costs = {i.id: cost(render_item(i, i.text)) for i in kept}
    total, confirmed, evicted = sum(costs.values()), set(request.confirm_evict), set()
    for item in kept:
        if total <= limit:
            break
        if item.id in confirmed:
            evicted.add(item.id)
            total -= costs[item.id]
            decisions.append(_gone(item, cost(item.text), "dropped", "eviction confirmed by the request"))
    kept = [i for i in kept if i.id not in evicted]
    if total > limit:
        label = f"tier {tier.index} {tier.name} (protected: give `supersedes` or `confirm_evict`)"
        raise BudgetExceeded(
            available_tokens=_available(tier, counter, limit),
            required_tokens=counter.scale(total),
            parts={label: counter.scale(total)},
            hint=TIER_HINT,
        )
    kept_ids = {i.id for i in kept}  # an unverified supersede's older quote, unless evicted
    decisions += [
        _kept(
            i,
            cost(i.text),
            unchecked.get(i.id) or _kept_reason(i, request.issue_tags, beside=i.supersedes in kept_ids),
        )
        for i in kept
    ]
    return TierSelection(tier=tier, texts=tuple((i, i.text) for i in kept), decisions=tuple(decisions))


def _citation_of(items: list[ContextItem], item_id: str) -> str:
    """The citation of the item ``item_id`` among ``items``."""
    return next((str(i.citation) for i in items if i.id == item_id), "")


def _kept_reason(item: ContextItem, issue_tags: frozenset[str] | None, beside: bool = False) -> str:
    """Why a protected item is kept: verbatim, and selected by its tags, or in the place of the
    selected item it supersedes (it was said to match the issue tags when its own did not);
    ``beside`` it when that item stays too (its quote was not verified)."""
    if issue_tags is None or not item.tags:
        return "protected, verbatim"
    if _tags_match(item, issue_tags):
        return "protected, verbatim, tags match the issue tags"
    where = "beside" if beside else "in the place of"
    return f"protected, verbatim, {where} {item.supersedes}, which the issue tags select"


def _compact(
    tier: Tier,
    items: list[ContextItem],
    counter: TokenCounter,
    target: int,
    query: str,
    against: str,
    scorer: PassageScorer | None,
) -> TierSelection:
    costs = {i.id: counter.raw(i.text) for i in items}
    # what keeping any of an item adds: its joiner, and an evidence item's wrapper (its id and
    # citation); charged for the items kept, not reserved for all (150 short items under a
    # 300-token ceiling kept none)
    openings = [
        JOINER_TOKENS + (counter.raw(render_item(i, "")) if i.kind == "evidence" else 0) for i in items
    ]
    if sum(costs.values()) + sum(openings) <= target:
        return TierSelection(
            tier=tier,
            texts=tuple((i, i.text) for i in items),
            decisions=tuple(_kept(i, costs[i.id], "within the tier's ceiling") for i in items),
        )
    if tier.compact_method == "passages":
        return _compact_passages(tier, items, counter, target, query, against, costs, openings, scorer)
    extract = extract_sentences([i.text for i in items], target, query, counter, openings)
    count_together(counter.encoding, extract.texts)  # each is counted below
    texts: list[tuple[ContextItem, str]] = []
    decisions = []
    for item, text, kept, opening in zip(items, extract.texts, extract.kept_each, openings, strict=True):
        if text:
            texts.append((item, text))
            decisions.append(
                ItemDecision(
                    id=item.id,
                    action="compacted",
                    tokens_before=costs[item.id],
                    tokens_after=counter.raw(text),
                    reason=f"extractive: kept {kept} verbatim sentence(s) ranked by BM25 against {against}",
                )
            )
        else:
            reason = _unkept(item.text, opening, target, counter)
            decisions.append(_gone(item, costs[item.id], "dropped", reason))
    return TierSelection(tier=tier, texts=tuple(texts), decisions=tuple(decisions))


def _unkept(text: str, opening: int, target: int, counter: TokenCounter) -> str:
    """Why extraction kept nothing of ``text``: it is blank, its shortest sentence alone is over
    the tier's budget, or each of its sentences, at its turn in rank order, was over what the
    sentences taken before it left (a sentence ranked below may still have fit)."""
    if not text.strip():
        return _BLANK
    shortest = min(sentence_profile(counter.encoding_name, text).costs) + 1 + opening
    if shortest > target:
        return (
            f"no sentence of it fits the tier's budget of {counter.scale(target):,} tokens alone "
            f"(its shortest needs {counter.scale(shortest):,})"
        )
    return "its sentences did not fit what the higher-ranked ones left of the tier's budget"


def tags_ranking(request: ContextRequest) -> tuple[str, str]:
    """What ``compact_query = "tags"`` ranks against, and how a report says so: the request's
    ``issue_tags`` when any are given (an empty list selects by nothing), else the tags of the
    items outside rolling tiers and the current turn. Those stay from turn to turn, so the
    compacted block does too (a history message's or a question's tags changed it)."""
    if request.issue_tags:
        return " ".join(sorted(request.issue_tags)), "the request's issue tags alone"
    held = (i for i in request.items if i.tier is not None and i.tier.eviction != "rolling")
    return " ".join(
        dict.fromkeys(t for i in held for t in i.tags)
    ), "the tags of the items outside rolling tiers alone"


def _ranked_against(tier: Tier, request: ContextRequest) -> str:
    """What a compact tier's text was ranked against, as its ``compact_query`` says."""
    return tags_ranking(request)[1] if tier.compact_query == "tags" else "the question and tags"


def _compact_passages(
    tier: Tier,
    items: list[ContextItem],
    counter: TokenCounter,
    target: int,
    query: str,
    against: str,
    costs: dict[str, int],
    openings: list[int],
    scorer: PassageScorer | None = None,
) -> TierSelection:
    """Verbatim passage windows over the tier's items, best relevance first, in document order;
    each item sends its own part of them (in its own wrapper: a window over two items put the
    second's text inside the first's ``<evidence>``). A passage costs its tokens and the wrappers
    of the evidence items it overlaps, so a wrapper is paid by what keeps any of its item, not
    reserved for all (30 short evidence items under a 300-token ceiling kept none). An item kept
    by several passages pays for each, though its wrapper is sent once: when that leaves part of
    the budget unspent, the windows are chosen once more with the budget raised by what is
    unspent, and kept when what they cost is within the budget (a 208-token citation under a
    500-token ceiling: 326 -> 441 tokens sent)."""
    joined = JOINER.join(i.text for i in items)
    analysis = analyze(counter.encoding, joined, ends=True)
    count = TextSpan(analysis, 0, analysis.size).char_counter(joined)
    bounds, position = [], 0
    for item in items:
        bounds.append((position, position + len(item.text)))
        position += len(item.text) + len(JOINER)
    starts = [a for a, _ in bounds]
    wrappers = [o - JOINER_TOKENS for o in openings]
    passages = split_passages(joined, count, passage_tokens(target))
    passage_costs = [
        count(p.start, p.end) + sum(wrappers[bisect_right(starts, p.start) - 1 : bisect_left(starts, p.end)])
        for p in passages
    ]

    def chosen(budget: int) -> tuple[list[str], int]:
        """The items' parts of the windows chosen within ``budget``, and what they cost: the
        windows, their joiners and the wrappers of the items they keep, each wrapper once."""
        regions = select_regions(
            joined, passages, passage_costs, budget, query=query, region_cost=JOINER_TOKENS, scorer=scorer
        )
        parts = [_item_part(joined, a, b, regions) for a, b in bounds]
        spent = sum(count(r.start, r.end) + JOINER_TOKENS for r in regions)
        return parts, spent + sum(w for w, part in zip(wrappers, parts, strict=True) if part)

    kept, spent = chosen(target)
    if 0 < spent < target:  # a wrapper paid by each of its item's passages is rendered once
        more, more_spent = chosen(2 * target - spent)
        if more_spent <= target:
            kept = more
    count_together(counter.encoding, [k for k in kept if k])  # each is counted below
    texts: list[tuple[ContextItem, str]] = []
    decisions = []
    for item, part in zip(items, kept, strict=True):
        if part:
            texts.append((item, part))
            decisions.append(
                _kept(item, costs[item.id], "passages: the selected windows cover all of it")
                if part == item.text  # sent whole, not compacted
                else ItemDecision(
                    id=item.id,
                    action="compacted",
                    tokens_before=costs[item.id],
                    tokens_after=counter.raw(part),
                    reason=f"passages: kept verbatim window(s) ranked by {ranking(scorer)} against {against}",
                )
            )
        elif not item.text.strip():
            decisions.append(_gone(item, costs[item.id], "dropped", _BLANK))
        else:
            decisions.append(_gone(item, costs[item.id], "dropped", "outside the selected passage windows"))
    return TierSelection(tier=tier, texts=tuple(texts), decisions=tuple(decisions))


def _indentation(blanks: str) -> str:
    """What of leading ``blanks`` follows their last line break (any ``str.splitlines`` knows:
    CR alone, U+2028 too): the first kept line's indentation."""
    last = (blanks.splitlines(keepends=True) or [""])[-1]
    return last if last.splitlines() == [last] else ""


def _item_part(joined: str, start: int, end: int, regions: Sequence[Region]) -> str:
    """The item's text at ``joined[start:end]`` within the chosen windows, each piece without
    blank edges (trailing blanks; leading blank lines, indentation kept), joined as windows are."""
    pieces = []
    for region in regions:
        a, b = max(start, region.start), min(end, region.end)
        if a < b:
            piece = joined[a:b].rstrip()
            body = piece.lstrip()
            lead = piece[: len(piece) - len(body)]
            pieces.append(_indentation(lead) + body)
    return JOINER.join(p for p in pieces if p)


def _units(items: list[ContextItem]) -> list[list[ContextItem]]:
    """What leaves together: a group's items (a turn) with whatever stands between its first and
    its last, and a tool call with the results after it. A group was joined only where its items
    stood side by side, and a result only to a unit that opened with its call: a turn's call and
    an ungrouped result after it, or a group with a note between its items, were parted (the call
    rolled off and its result sent alone)."""
    last_of = {item.group: n for n, item in enumerate(items) if item.group is not None}
    units: list[list[ContextItem]] = []
    reach = -1  # the last index the open unit holds (its groups' last items)
    calls = False  # whether the open unit holds a tool call
    for n, item in enumerate(items):
        if units and (n <= reach or (item.kind == "tool_result" and calls)):
            units[-1].append(item)
        else:
            units.append([item])
            calls = False
        calls = calls or item.kind == "tool_call"
        if item.group is not None:
            reach = max(reach, last_of[item.group])
    return units


def _rolling(tier: Tier, items: list[ContextItem], counter: TokenCounter, target: int) -> TierSelection:
    """The most recent raw turns that fit ``target`` raw tokens (the ledger is Block 3, selected by
    :func:`select_ledger`): a suffix of the conversation, so it ends at the first turn, newest
    first, that does not fit, and each turn dropped is told which reason is its own. A chat body's
    opening user message (an agent's task) is kept ahead of them when it takes at most half the
    window, as a fit keeps a history's first message: it was rolled off first, and the agent went
    on without its task."""
    cost = counter.raw
    items = [i for i in items if i.kind != "ledger"]
    units = _units(items)

    def unit_cost(unit: list[ContextItem]) -> int:
        return sum(cost(i.text) + MESSAGE_FRAMING_TOKENS for i in unit)

    # at most half the window, as a fit keeps a history's first message: a task of 2,600 tokens in
    # a 3,000-token window rolled off every recent step, the latest tool result too
    opening = units[0] if units and _opens_a_chat(units[0]) and unit_cost(units[0]) <= target // 2 else None
    keep: list[list[ContextItem]] = []
    used = unit_cost(opening) if opening else 0
    stopped: tuple[list[ContextItem], int] | None = None  # the turn that did not fit, and its cost
    for unit in reversed(units[1:] if opening else units):
        needed = unit_cost(unit)
        if used + needed > target:
            stopped = (unit, needed)
            break
        keep.insert(0, unit)
        used += needed
    opening_ids = {i.id for i in opening} if opening else set()
    kept_ids = opening_ids | {i.id for unit in keep for i in unit}
    over_ids = {i.id for i in stopped[0]} if stopped else set()
    over = _over_the_window(tier, counter, target, target - used, stopped[1]) if stopped else ""
    decisions = [
        _kept(i, cost(i.text), "the conversation's opening message (its task); fits the rolling window")
        if i.id in opening_ids
        else _kept(i, cost(i.text), "recent; fits the rolling window")
        if i.id in kept_ids
        else _gone(i, cost(i.text), "rolled_off", over)
        if i.id in over_ids
        else _gone(i, cost(i.text), "rolled_off", "older than a turn that did not fit the rolling window")
        for i in items
    ]
    return TierSelection(
        tier=tier, texts=tuple((i, i.text) for i in items if i.id in kept_ids), decisions=tuple(decisions)
    )


def _opens_a_chat(unit: list[ContextItem]) -> bool:
    """Whether ``unit`` is a chat body's opening user message (not a tool result)."""
    first = unit[0]
    return len(unit) == 1 and first.source is not None and first.role == "user" and first.kind == "history"


def _over_the_window(tier: Tier, counter: TokenCounter, target: int, left: int, need: int) -> str:
    """Why the rolling window's newest turn that did not fit went: what it needed and what was
    left of the tier's room (``target``, raw), and the envelope when it lowered that room."""
    lowered = (
        f" (its ceiling of {tier.ceiling_tokens:,} lowered to fit the envelope)"
        if target < counter.unscale(tier.ceiling_tokens)
        else ""
    )
    return (
        f"over the rolling window: its turn needs {counter.scale(need):,} tokens, {counter.scale(left):,} "
        f"of the tier's {counter.scale(target):,}{lowered} are left after the newer turns"
    )


def select_ledger(
    request: ContextRequest, counter: TokenCounter, ceiling: int | None
) -> tuple[ContextItem, ...]:
    """The ledger items (Block 3), whole: never cut here (a session folds its ledger under the
    ceiling); over ``ceiling`` (scaled tokens) fails closed."""
    ledger = tuple(i for i in request.items if i.kind == "ledger")
    if ceiling is None:
        return ledger
    total = counter.count_all(i.text for i in ledger)
    if total > ceiling:
        raise BudgetExceeded(
            available_tokens=ceiling,
            required_tokens=total,
            parts={"ledger (Block 3)": total},
            hint="the ledger is never cut: a session folds its oldest entries per issue to stay under "
            "the policy's ledger_ceiling_tokens; shorten the ledger item or raise that ceiling",
        )
    return ledger


def compact_query(tier: Tier, query: str, tags_query: str) -> str:
    """What a compact tier's items are ranked against: the tags' query or the request's."""
    return tags_query if tier.compact_query == "tags" else query


def select_tier(
    tier: Tier,
    request: ContextRequest,
    counter: TokenCounter,
    targets: Mapping[int, int],
    query: str,
    tags_query: str = "",
    scorer: PassageScorer | None = None,
) -> TierSelection:
    """Apply ``tier``'s eviction rule to its items within ``targets[tier.index]`` raw tokens."""
    items = request.in_tier(tier)
    limit = targets[tier.index]
    if tier.eviction == "never":
        return _never(tier, items, counter, limit)
    if tier.eviction == "protected":
        return _protected(tier, items, counter, limit, request)
    if tier.eviction == "compact":
        query_for = compact_query(tier, query, tags_query)
        return _compact(tier, items, counter, limit, query_for, _ranked_against(tier, request), scorer)
    return _rolling(tier, items, counter, limit)
