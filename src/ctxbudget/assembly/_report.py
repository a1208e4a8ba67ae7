"""The decision report of a tiered assembly: frozen values and their JSON-ready rendering
(``to_dict``). A report is built once and never changed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = [
    "AssemblyReport",
    "BlockReport",
    "BreakpointReport",
    "CacheReport",
    "DecisionReport",
    "TierReport",
]


def _plain(value: Any) -> Any:
    """A report value as JSON-ready data: reports become dicts (fields in order), tuples lists."""
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, kw_only=True)
class DecisionReport:
    """What happened to one item of an assembly, its tokens before and after, and why."""

    id: str
    action: str
    tokens_before: int
    tokens_after: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class TierReport:
    """One tier as assembled: its rule, ceiling, tokens as rendered, and its items."""

    index: int
    name: str
    eviction: str
    ceiling_tokens: int
    tokens: int
    cached: bool
    items: tuple[DecisionReport, ...]


@dataclass(frozen=True, kw_only=True)
class BlockReport:
    """Block 3 (the ledger) or Block 4 (the current turn): tokens as rendered (the current turn's
    with its images and other media), the ceiling (None: bounded by the envelope), the items."""

    tokens: int
    ceiling_tokens: int | None
    items: tuple[DecisionReport, ...]


@dataclass(frozen=True, kw_only=True)
class BreakpointReport:
    """A cache boundary: where, its TTL, the prefix's tokens and hash, and what the call does there."""

    block: int
    tier: str
    ttl: str
    prefix_tokens: int
    prefix_sha256: str
    explicit: bool
    status: str
    read_tokens: int
    write_tokens: int


@dataclass(frozen=True, kw_only=True)
class CacheEntryReport:
    """A prefix the provider holds cached after the call (as predicted): its TTL, and the seconds
    since its last use (0: the call reads or writes it; the next turn's ``idle_seconds`` add up)."""

    prefix_sha256: str
    ttl: str
    age_seconds: float


@dataclass(frozen=True, kw_only=True)
class CacheReport:
    """Tokens the call is predicted to write to the cache (by TTL), read from it, and send uncached."""

    write_tokens: int
    write_5m_tokens: int
    write_1h_tokens: int
    read_tokens: int
    uncached_tokens: int


@dataclass(frozen=True, kw_only=True)
class AssemblyReport:
    """Every decision of one tiered assembly, its cache plan and prediction, cost and invariants.

    ``to_dict`` is the JSON of ``assemble --json`` (the same keys, in the same order); the
    previous turn's dict is what the next assembly reads (``previous=``)."""

    model: str
    policy: str
    format: str
    encoding: str
    exact: bool
    safety_factor: float
    envelope_tokens: int
    reserve_output_tokens: int
    prompt_limit_tokens: int
    tokens: int
    tiers: tuple[TierReport, ...]
    ledger: BlockReport
    current_turn: BlockReport
    current_turn_tokens: int
    breakpoints: tuple[BreakpointReport, ...]
    cache: CacheReport
    cache_entries: tuple[CacheEntryReport, ...]
    expected_output_tokens: int
    cost_usd: float | None
    cost: Mapping[str, Any] | None
    cost_note: str | None
    cost_ceiling_usd: float | None
    invariants: Mapping[str, str]
    pinned_prefix_sha256: str
    pinned_prefix_text: str
    # The digest of the tool definitions carried ahead of the pinned prefix (None: none), which
    # the next turn's INV-CTX-01 holds to.
    tools_sha256: str | None
    degraded: tuple[str, ...]
    warnings: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (lists, not tuples)."""
        out: dict[str, Any] = _plain(self)
        return out

    def tier(self, name: str) -> TierReport:
        """A tier's report by name (KeyError naming the tiers when there is none)."""
        for tier in self.tiers:
            if tier.name == name:
                return tier
        raise KeyError(f"no tier {name!r}; the tiers are {', '.join(t.name for t in self.tiers)}")
