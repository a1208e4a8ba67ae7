"""Prompt-cache planning: prefix hashes, breakpoint placement, and what the next call will cost.

Anthropic caches explicitly: at most ``max_breakpoints`` ``cache_control`` marks, each caching the
whole prefix up to it, and only when that prefix reaches the model's minimum cacheable length (below
it the provider caches nothing and says nothing). Each breakpoint is looked up on its own, and a
lookup walks back at most 20 content blocks from it for a prefix cached before (so what one turn
reads of the last turn's entries depends on how far its marks moved: :func:`predict_cache`);
1-hour entries must come before 5-minute ones. OpenAI and Gemini cache automatically once the prompt reaches their
minimum, in 128-token steps (OpenAI); the planner then puts the stable content first and reports
the implicit boundary at its end.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .catalog.values import CacheRules

__all__ = [
    "TTL_SECONDS",
    "Block",
    "Breakpoint",
    "CachePrediction",
    "plan_breakpoints",
    "predict_cache",
    "prefix_hashes",
    "read_block",
]

LOOKBACK_BLOCKS = 20
AUTOMATIC_STEP = 128
TTL = Literal["5m", "1h"]
# How long an entry lives after its last use (Anthropic: 5 minutes, or 1 hour at the higher write price).
TTL_SECONDS: dict[str, float] = {"5m": 300.0, "1h": 3600.0}


@dataclass(frozen=True, kw_only=True)
class Block:
    """One content block of an assembled request, in order."""

    region: Literal["system", "message"]
    role: str
    text: str
    tier: str
    cached: bool
    ttl: TTL = "5m"
    # A provider message sent as it was (a kept message of a chat body: tool calls, images, ...).
    message: Mapping[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True, kw_only=True)
class Breakpoint:
    """A cache boundary after ``block``: the prefix's tokens and its hash."""

    block: int
    tier: str
    ttl: TTL
    prefix_tokens: int
    prefix_sha256: str
    explicit: bool


@dataclass(frozen=True, kw_only=True)
class CachePrediction:
    """Tokens the call will read from cache, write to it (by TTL), and send uncached."""

    read_tokens: int
    write_5m_tokens: int
    write_1h_tokens: int
    uncached_tokens: int
    statuses: tuple[str, ...]
    per_breakpoint: tuple[tuple[int, int], ...] = ()  # (read, written) tokens of each span
    read_sha256: str | None = None  # the cached prefix read (its lifetime starts again)

    @property
    def write_tokens(self) -> int:
        """All tokens written to the cache."""
        return self.write_5m_tokens + self.write_1h_tokens


def prefix_hashes(model: str, blocks: Sequence[Block], message_seed: str = "") -> list[str]:
    """sha256 of everything up to and including each block (model, roles and text, in order);
    ``message_seed`` is folded in at the first message block: what changes the messages' cache
    and not the system prompt's (Anthropic's tool choice)."""
    digest = hashlib.sha256(json.dumps({"model": model}, sort_keys=True).encode("utf-8"))
    out = []
    seeded = not message_seed
    for block in blocks:
        if not seeded and block.region == "message":
            digest.update(message_seed.encode("utf-8"))
            seeded = True
        parts: list[Any] = [block.region, block.role, block.text]
        if block.message is not None:
            parts.append(block.message)
        digest.update(json.dumps(parts, ensure_ascii=False, sort_keys=True).encode("utf-8"))
        out.append(digest.copy().hexdigest())
    return out


def _region_ends(blocks: Sequence[Block], markable: Callable[[Block], bool]) -> list[int]:
    """Last block of each cached tier (the stable regions) that can carry a mark, in order: a
    message of thinking blocks alone takes none (a reply cut off at max_tokens while thinking),
    and a breakpoint planned there was priced and predicted but never sent."""
    ends = []
    last: int | None = None  # the region's last block that takes a mark so far
    for i, block in enumerate(blocks):
        if block.cached and markable(block):
            last = i
        following = blocks[i + 1] if i + 1 < len(blocks) else None
        last_of_tier = following is None or (following.tier, following.cached) != (block.tier, block.cached)
        if last_of_tier:
            if block.cached and last is not None:
                ends.append(last)
            last = None
    return ends


def plan_breakpoints(
    blocks: Sequence[Block],
    prefix_tokens: Sequence[int],
    hashes: Sequence[str],
    rules: CacheRules,
    ahead: int = 0,
    markable: Callable[[Block], bool] = lambda block: True,
) -> tuple[list[Breakpoint], list[str]]:
    """Breakpoints at the ends of stable regions that the provider will cache, and warnings.

    ``ahead``: tokens the provider caches before the blocks (a request's tool definitions, which
    Anthropic puts first): they count toward the minimum cacheable length, not to the blocks'
    prefixes (30,000 tokens of tools ahead of a short system prompt were never marked, so never
    cached, and the warning said the prefix was under the minimum)."""
    warnings: list[str] = []
    regions = _region_ends(blocks, markable)
    ends = [i for i in regions if prefix_tokens[i] + ahead >= rules.min_cacheable_tokens]
    skipped = [blocks[i].tier for i in regions if i not in ends]
    if skipped and rules.mode != "none":
        warnings.append(
            f"no cache breakpoint after {', '.join(skipped)}: the prefix there is below the model's "
            f"minimum cacheable length of {rules.min_cacheable_tokens:,} tokens, so the provider would cache nothing"
        )
    if rules.mode == "none" or not ends:
        return [], warnings
    # Automatic caching (OpenAI) needs no marks: every stable region's end is a prefix the
    # provider may find again, so each is planned (none is rendered) and the next turn can read
    # the longest one that still matches, say the pinned prefix after the rolling tier moved on.
    if rules.mode != "automatic" and len(ends) > rules.max_breakpoints:
        # Keep the earliest (the longest-lived, often the 1-hour one) and the latest ones: later
        # content changes more often (an appended ledger, the conversation), so a breakpoint there
        # lets the next turn read up to it; an earlier stable region is covered by a later mark.
        later = rules.max_breakpoints - 1  # after the earliest (ends[-0:] would be all of them)
        kept = ends[:1] + (ends[-later:] if later > 0 else [])
        unmarked = [blocks[i].tier for i in ends if i not in kept]
        warnings.append(
            f"no cache breakpoint after {', '.join(unmarked)}: {len(ends)} cached regions, and the model "
            f"takes at most {rules.max_breakpoints} breakpoint{'s' if rules.max_breakpoints != 1 else ''} "
            "(a later breakpoint's prefix holds them, "
            "so they are read only when everything up to it is unchanged)"
        )
        ends = kept
    points = [
        Breakpoint(
            block=i,
            tier=blocks[i].tier,
            ttl=blocks[i].ttl,
            prefix_tokens=prefix_tokens[i],
            prefix_sha256=hashes[i],
            explicit=rules.mode == "explicit",
        )
        for i in ends
    ]
    return _hours_first(points, warnings), warnings


def _hours_first(points: list[Breakpoint], warnings: list[str]) -> list[Breakpoint]:
    """``points`` with every 5-minute breakpoint before a 1-hour one made a 1-hour one: the
    Messages API refuses a 1-hour mark after a 5-minute mark (a ledger, cached 5 minutes, between
    tiers a policy caches for an hour), and the later mark keeps that prefix an hour anyway."""
    out: list[Breakpoint] = []
    later_hour = False
    for point in reversed(points):
        if point.ttl == "1h":
            later_hour = True
        elif later_hour:
            warnings.append(
                f"the breakpoint after {point.tier} is written for 1 hour, not 5 minutes: a 1-hour "
                "breakpoint follows it, and the API takes 1-hour marks first"
            )
            point = dataclasses.replace(point, ttl="1h")
        out.append(point)
    return out[::-1]


def read_block(
    ends: Sequence[int],
    previous_hashes: frozenset[str],
    block_hashes: Sequence[str],
    reach: int | None = LOOKBACK_BLOCKS,
    widths: Sequence[int] | None = None,
) -> int:
    """The last block of the longest prefix cached before that a lookup from one of ``ends``
    finds, walking back at most ``reach`` content blocks (None: to the start); -1 when none is
    found. ``widths``: the content blocks each block is sent as (a kept message of three tool
    calls is three; default one each): the provider's lookback counts those."""
    best = -1
    for end in ends:
        walked = 0
        for j in range(end, -1, -1):
            if reach is not None and walked > reach:
                break
            if block_hashes[j] in previous_hashes:
                best = max(best, j)
                break
            walked += widths[j] if widths is not None else 1
    return best


def _read_prefix(
    breakpoints: Sequence[Breakpoint],
    previous_hashes: frozenset[str],
    block_hashes: Sequence[str] | None,
    block_tokens: Sequence[int] | None,
    reach: int | None = LOOKBACK_BLOCKS,
    widths: Sequence[int] | None = None,
) -> tuple[int, str | None]:
    """The longest prefix the provider finds cached, its tokens and hash: from each breakpoint it
    looks back up to ``reach`` blocks (Anthropic: 20; automatic caching: to the start) for a
    prefix cached before (with no block data: the breakpoints only)."""
    if block_hashes is None or block_tokens is None:
        found = [p for p in breakpoints if p.prefix_sha256 in previous_hashes]
        best = max(found, key=lambda p: p.prefix_tokens, default=None)
        return (best.prefix_tokens, best.prefix_sha256) if best else (0, None)
    at = read_block([p.block for p in breakpoints], previous_hashes, block_hashes, reach, widths)
    return (block_tokens[at], block_hashes[at]) if at >= 0 else (0, None)


def predict_cache(
    breakpoints: Sequence[Breakpoint],
    total_tokens: int,
    previous_hashes: frozenset[str],
    mode: str,
    block_hashes: Sequence[str] | None = None,
    block_tokens: Sequence[int] | None = None,
    widths: Sequence[int] | None = None,
) -> CachePrediction:
    """Reads the longest previously cached prefix; writes the rest up to the last breakpoint (at
    each span's TTL); everything after it is sent uncached (``widths``: see :func:`read_block`)."""
    reach = None if mode == "automatic" else LOOKBACK_BLOCKS
    read, read_sha256 = _read_prefix(breakpoints, previous_hashes, block_hashes, block_tokens, reach, widths)
    if mode == "automatic" and read:
        read = read // AUTOMATIC_STEP * AUTOMATIC_STEP
    writes = {"5m": 0, "1h": 0}
    statuses: list[str] = []
    spans: list[tuple[int, int]] = []
    covered, start = read, 0
    for point in breakpoints:
        span_read = max(0, min(point.prefix_tokens, read) - start)
        if point.prefix_tokens <= read:
            statuses.append("read")
            spans.append((span_read, 0))
        else:
            writes[point.ttl] += point.prefix_tokens - covered
            spans.append((span_read, point.prefix_tokens - covered))
            covered = point.prefix_tokens
            statuses.append("write")
        start = point.prefix_tokens
    last = breakpoints[-1].prefix_tokens if breakpoints else 0
    return CachePrediction(
        read_tokens=read,
        write_5m_tokens=writes["5m"],
        write_1h_tokens=writes["1h"],
        uncached_tokens=total_tokens - max(last, read),
        statuses=tuple(statuses),
        per_breakpoint=tuple(spans),
        read_sha256=read_sha256 if read else None,
    )
