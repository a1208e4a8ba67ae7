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
        f"{setup.spec.id} caches only at cache_control marks, which a {setup.fmt} body does not carry: "
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
    first compact tier's target each time the policy lets it degrade; returns what was degraded."""
    degraded: list[str] = []
    halved: dict[str, None] = {}  # the tiers degraded, in order
    while True:
        priced = _price(setup, fit_envelope(setup, targets), previous_hashes, output_tokens)
        if ceiling is None:
            return priced, degraded
        if priced.cost is None:
            raise PriceUnknown(model_id=setup.model, ceiling_usd=ceiling)
        if round(priced.cost.total_usd, 6) <= ceiling:  # the cost as reported (to the micro-dollar)
            return priced, degraded + _degraded_to(setup, priced, list(halved))
        compact = [t for t in setup.policy.tiers if t.eviction == "compact" and targets[t.index] > 0]
        if "compact" not in setup.policy.degrade or not compact:
            # the request's tool definitions are priced after this (carried_fields): said, so the
            # figure is not taken for the whole turn's (a review: $0.1104 refused, $0.1134 accepted)
            carried = setup.carried_raw_tokens
            raise CostCeilingExceeded(
                estimate_usd=priced.cost.total_usd,
                ceiling_usd=ceiling,
                detail=f"{priced.prediction.uncached_tokens:,} uncached, {priced.prediction.write_tokens:,} written, "
                f"{priced.prediction.read_tokens:,} read, {output_tokens:,} output tokens expected"
                + (
                    f"; before the request's tool definitions and fields (about {setup.counter.scale(carried):,} "
                    "tokens), which cost more"
                    if carried
                    else ""
                ),
            )
        tier = compact[0]
        targets[tier.index] //= 2
        halved[tier.name] = None
        degraded.append(
            f"cost {usd(priced.cost.total_usd)} over {usd(ceiling)}: {tier.name}'s target halved to "
            f"{setup.counter.scale(targets[tier.index]):,} tokens"  # the targets are raw tokens
        )


def _degraded_to(setup: Setup, priced: Priced, tiers: list[str]) -> list[str]:
    """What the degraded ``tiers`` hold in the body priced under the ceiling (a target is a limit:
    a tier whose items could not be cut to it holds less, down to nothing)."""
    if not tiers or priced.cost is None:
        return []
    held = ", ".join(f"{name} {setup.counter.scale(priced.draft.raw_of(name)):,}" for name in tiers)
    return [f"under the ceiling at {usd(priced.cost.total_usd)} with {held} tokens"]
