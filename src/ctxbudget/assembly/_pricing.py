"""Pricing a fitted draft and holding it under the cost ceiling: breakpoints planned at the ends of
cached tiers, the next call's cache reads and writes predicted from the previous turn's prefix
hashes, the turn priced; over the ceiling, the compact tier is halved while the policy allows
(``degrade``), else :class:`CostCeilingExceeded`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..cache import Breakpoint, CachePrediction, plan_breakpoints, predict_cache, prefix_hashes
from ..catalog.values import CacheRules
from ..cost import TurnCost, price_cached
from ..errors import CostCeilingExceeded, PriceUnknown, usd
from ._draft import Draft, Setup, measure, render
from ._envelope import fit_envelope
from ._render import content_width, takes_mark
from ._report import CacheReport

__all__ = ["Priced", "within_ceiling"]


@dataclass(frozen=True)
class Priced:
    """A fitted draft with its breakpoints, the body rendered with them, its cache prediction and
    cost, the planner's warnings and the body's tokens."""

    draft: Draft
    breakpoints: tuple[Breakpoint, ...]
    prediction: CachePrediction
    cost: TurnCost | None  # None where the model has no published price
    body: dict[str, Any] | str
    warnings: tuple[str, ...]
    total_tokens: int
    total_raw: int  # before scaling: what the carried fields' raw tokens add to (_carried.py)


def _prefix_raw(draft: Draft) -> list[int]:
    """Raw tokens of the prefix ending with each block."""
    running, out = 0, []
    for tokens in draft.block_raw:
        running += tokens
        out.append(running)
    return out


def _price(setup: Setup, draft: Draft, previous_hashes: frozenset[str], output_tokens: int) -> Priced:
    """Plan the breakpoints of ``draft``, render it with them, predict its cache use and price it."""
    scale = setup.counter.scale
    hashes = prefix_hashes(setup.model + setup.cache_seed, draft.blocks, setup.message_seed)
    prefix = [scale(n) for n in _prefix_raw(draft)]
    rules, warnings = _cache_rules(setup)
    # Tool definitions ahead of the blocks count toward the minimum where the body marks its
    # breakpoints (Anthropic); automatic caching rounds the blocks' own prefix, which they miss.
    ahead = scale(setup.carried_raw_tokens) if rules.mode == "explicit" else 0
    points, planned = plan_breakpoints(draft.blocks, prefix, hashes, rules, ahead=ahead, markable=takes_mark)
    warnings += planned
    body = render(setup, draft.blocks, points)
    raw = measure(setup, body)
    widths = [content_width(b) for b in draft.blocks]  # the provider looks back over content blocks
    prediction = predict_cache(points, scale(raw), previous_hashes, rules.mode, hashes, prefix, widths)
    cost = price_cached(setup.spec.prices, prediction, output_tokens)
    return Priced(draft, tuple(points), prediction, cost, body, tuple(warnings), scale(raw), raw)


def _cache_rules(setup: Setup) -> tuple[CacheRules, list[str]]:
    """The model's cache rules as the body can use them: a model that caches only at explicit
    marks caches nothing from a body that cannot carry them (the openai and text formats)."""
    rules = setup.spec.cache
    if rules.mode != "explicit" or setup.fmt == "anthropic":
        return rules, []
    note = (
        f"{setup.spec.id} caches only at cache_control marks, which the {setup.fmt} body does not carry: "
        "nothing is predicted cached (assemble the anthropic format to use the breakpoints)"
    )
    return dataclasses.replace(rules, mode="none"), [note]


def within_ceiling(
    setup: Setup,
    targets: dict[int, int],
    previous_hashes: frozenset[str],
    output_tokens: int,
    ceiling: float | None,
) -> tuple[Priced, list[str]]:
    """Fit and price the request until it costs at most ``ceiling`` (None: any cost), halving the
    first compact tier's target each time the policy lets it degrade; returns what was degraded.
    Before the first halving, the request with every compact tier empty is priced: when even that
    is over the ceiling, the refusal comes from it at once (a 950 kB request was drafted 12 times,
    3 s, to find that no halving could do)."""
    degraded: list[str] = []
    halved: dict[str, None] = {}  # the tiers degraded, in order
    floor_tried = False
    drafted: Priced | None = None  # the floor's draft, when it is the one to refuse
    while True:
        if drafted is None:
            drafted = _price(setup, fit_envelope(setup, targets), previous_hashes, output_tokens)
        priced, drafted = drafted, None
        if ceiling is None:
            return priced, degraded
        if priced.cost is None:
            raise PriceUnknown(model_id=setup.model, ceiling_usd=ceiling)
        cache, whole = _turn_cost(setup, priced, output_tokens)
        if round(whole, 6) <= ceiling:  # the cost as reported (to the micro-dollar)
            return priced, degraded + _degraded_to(setup, priced, whole, list(halved))
        compact = [t for t in setup.policy.tiers if t.eviction == "compact" and targets[t.index] > 0]
        if "compact" not in setup.policy.degrade or not compact:
            replies = f" x {setup.carried_replies} replies" if setup.carried_replies > 1 else ""
            tools = carried_extra(setup, priced) if setup.carried_raw_tokens else 0
            raise CostCeilingExceeded(
                estimate_usd=whole,
                ceiling_usd=ceiling,
                detail=f"{cache.uncached_tokens:,} uncached, {cache.write_tokens:,} written, "
                f"{cache.read_tokens:,} read, {output_tokens:,} output tokens expected{replies}"
                + (f"; the request's tool definitions and fields are {tools:,} of them" if tools else ""),
            )
        if not floor_tried:
            floor_tried = True
            floor = {**targets, **{t.index: 0 for t in compact}}
            priced_floor = _price(setup, fit_envelope(setup, floor), previous_hashes, output_tokens)
            if round(_turn_cost(setup, priced_floor, output_tokens)[1], 6) > ceiling:
                targets.update(floor)  # refused next round, by the figure of the cheapest request
                drafted = priced_floor
                continue
        tier = compact[0]
        targets[tier.index] //= 2
        halved[tier.name] = None
        degraded.append(
            f"cost {usd(whole)} over {usd(ceiling)}: {tier.name}'s target halved to "
            f"{setup.counter.scale(targets[tier.index]):,} tokens"  # the targets are raw tokens
        )


def _turn_cost(setup: Setup, priced: Priced, output_tokens: int) -> tuple[CacheReport, float]:
    """The cache figures and the whole turn's cost, the request's tool definitions and replies
    with it: the figure a refusal gives and the loop compares (a review: $0.1104 refused,
    $0.1134 accepted)."""
    cache, turn = whole_turn(setup, priced, output_tokens)
    if turn is not None:
        return cache, turn.total_usd
    assert priced.cost is not None  # a price unknown is refused before
    return cache, priced.cost.total_usd


def cache_totals(prediction: CachePrediction) -> CacheReport:
    """The prediction's totals of cache writes, reads and uncached tokens."""
    return CacheReport(
        write_tokens=prediction.write_tokens,
        write_5m_tokens=prediction.write_5m_tokens,
        write_1h_tokens=prediction.write_1h_tokens,
        read_tokens=prediction.read_tokens,
        uncached_tokens=prediction.uncached_tokens,
    )


def carried_rate(setup: Setup, priced: Priced) -> str:
    """How the provider bills what precedes the first cached block (a chat body's tool
    definitions): as that block is billed, a read or a write at its TTL; uncached when nothing
    is cached."""
    if setup.spec.cache.mode == "none" or not priced.breakpoints:
        return "uncached"
    read = priced.prediction.statuses[0] == "read"
    return "read" if read else f"write_{priced.breakpoints[0].ttl}"


def with_tokens_at(cache: CacheReport, rate: str, tokens: int) -> CacheReport:
    """The cache figures with ``tokens`` more input billed at ``rate``."""
    if rate == "uncached":
        return dataclasses.replace(cache, uncached_tokens=cache.uncached_tokens + tokens)
    if rate == "read":
        return dataclasses.replace(cache, read_tokens=cache.read_tokens + tokens)
    ttl = "write_1h_tokens" if rate == "write_1h" else "write_5m_tokens"
    return dataclasses.replace(
        cache, write_tokens=cache.write_tokens + tokens, **{ttl: getattr(cache, ttl) + tokens}
    )


def carried_extra(setup: Setup, priced: Priced) -> int:
    """The tokens a chat body's carried fields add to the priced body: its raw tokens and theirs
    scaled once, as a count of the assembled body scales its total (two figures rounded up
    apart drifted from it by one either way)."""
    return setup.counter.scale(priced.total_raw + setup.carried_raw_tokens) - priced.total_tokens


def whole_turn(setup: Setup, priced: Priced, output_tokens: int) -> tuple[CacheReport, TurnCost | None]:
    """The turn's cache figures and cost with the request's carried fields (tool definitions,
    each of ``n`` replies): what the report states and the ceiling holds to."""
    cache = cache_totals(priced.prediction)
    if not setup.carried_raw_tokens and setup.carried_replies == 1:
        return cache, priced.cost
    cache = with_tokens_at(cache, carried_rate(setup, priced), carried_extra(setup, priced))
    return cache, price_cached(setup.spec.prices, cache, output_tokens * setup.carried_replies)


def _degraded_to(setup: Setup, priced: Priced, whole: float, tiers: list[str]) -> list[str]:
    """What the degraded ``tiers`` hold in the body priced under the ceiling (a target is a limit:
    a tier whose items could not be cut to it holds less, down to nothing)."""
    if not tiers or priced.cost is None:
        return []
    held = ", ".join(f"{name} {setup.counter.scale(priced.draft.raw_of(name)):,}" for name in tiers)
    return [f"under the ceiling at {usd(whole)} with {held} tokens"]
