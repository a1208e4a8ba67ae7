"""Fitting a draft to the envelope: each tier within its ceiling as rendered, the whole body
within the prompt limit (the envelope less the output reserve). The rolling window gives way
first, then the compact tier; tiers that may not shrink fail closed with :class:`BudgetExceeded`
naming them."""

from __future__ import annotations

from ..errors import TIER_HINT, BudgetExceeded
from ._draft import CURRENT, LEDGER, Draft, Setup, draft

__all__ = ["MAX_ROUNDS", "fit_envelope"]

MAX_ROUNDS = 12


def _tier_excess(setup: Setup, current: Draft, targets: dict[int, int]) -> bool:
    """Lower the target of a shrinkable tier whose rendered block is over its ceiling (True if one
    was); a tier that may not shrink and is over its ceiling once rendered fails closed. A block
    over a target lowered below the ceiling (by the prompt limit or the cost) is not over: those
    are checked on their own, and a compaction whose markers always take a few tokens over its
    target chased it down for every round and never converged."""
    for tier in setup.policy.tiers:
        used = current.raw_of(tier.name)
        if used <= max(targets[tier.index], setup.counter.unscale(tier.ceiling_tokens)):
            continue
        if tier.eviction in ("never", "protected"):
            scale = setup.counter.scale
            raise BudgetExceeded(
                available_tokens=tier.ceiling_tokens,
                required_tokens=scale(used),
                parts={f"tier {tier.index} {tier.name} ({tier.eviction}), as rendered": scale(used)},
                hint=TIER_HINT,
            )
        if targets[tier.index] > 0:
            targets[tier.index] = max(0, targets[tier.index] - (used - targets[tier.index]) - 1)
            return True
    return False


def _shrink(setup: Setup, current: Draft, targets: dict[int, int], limit: int) -> None:
    """Lower the target of the first rolling, else compact, tier by the body's excess over
    ``limit``; with none left to lower, fail closed naming what each part uses."""
    excess = current.total_raw - limit
    for eviction in ("rolling", "compact"):
        for tier in setup.policy.tiers:
            if tier.eviction == eviction and targets[tier.index] > 0:
                # from what the tier uses, not its target: a target above the use frees nothing
                used = current.raw_of(tier.name)
                targets[tier.index] = max(0, min(targets[tier.index], used) - excess - 1)
                return
    labels = {t.name: f"tier {t.index} {t.name} ({t.eviction})" for t in setup.policy.tiers}
    labels |= {LEDGER: "ledger (Block 3)", CURRENT: "current turn (Block 4)"}
    fixed = {label: setup.counter.scale(current.raw_of(name)) for name, label in labels.items()}
    fixed["the request's tool definitions and fields"] = setup.counter.scale(setup.carried_raw_tokens)
    required = setup.counter.scale(current.total_raw + setup.carried_raw_tokens)
    # what no block holds (the messages' framing around them), so that the parts add up to the need
    fixed["the body's framing around the blocks"] = max(0, required - sum(fixed.values()))
    raise BudgetExceeded(
        available_tokens=setup.policy.prompt_tokens,
        required_tokens=max(required, sum(fixed.values())),
        parts={k: v for k, v in fixed.items() if v},
        hint=TIER_HINT,
    )


def fit_envelope(setup: Setup, targets: dict[int, int]) -> Draft:
    """Draft at ``targets`` (raw tokens per tier index, lowered in place) until the draft fits its
    tiers' ceilings and the prompt limit; at most :data:`MAX_ROUNDS` drafts."""
    # the body and the carried fields are scaled as one total, as a count of the assembled body is
    limit = setup.counter.unscale(setup.policy.prompt_tokens) - setup.carried_raw_tokens
    for _ in range(MAX_ROUNDS):
        current = draft(setup, targets)
        if _tier_excess(setup, current, targets):
            continue
        if current.total_raw <= limit:
            return current
        _shrink(setup, current, targets, limit)
    raise BudgetExceeded(
        available_tokens=setup.policy.prompt_tokens,
        required_tokens=setup.counter.scale(current.total_raw),
        parts={"assembly did not converge": setup.counter.scale(current.total_raw)},
        hint=TIER_HINT,
        needs=f"after {MAX_ROUNDS} drafts the assembly still needs",
    )
