"""One draft of a tiered request: what an assembly is built from (:class:`Setup`), the tiers'
selections laid out as blocks in priority order, rendered to the output format and measured.

Layout follows priority: pinned prefix, protected evidence, compacted background (system blocks,
one per tier), the ledger (Block 3), rolling history, then the current question and tool returns
(Block 4, messages).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..cache import Block, Breakpoint
from ..catalog.values import ModelSpec
from ..formats import FORMATS
from ..formats.anthropic_rules import THINKING
from ..items import JOINER
from ..measure import measure_total
from ..tokens.counter import TokenCounter
from ..trim.passages import PassageScorer
from ._message_tokens import framing_raw, message_raw
from ._policy import CURRENT, LEDGER, Policy
from ._render import OutputFormat, render_blocks
from ._request import ContextItem, ContextRequest
from ._tiers import ItemDecision, TierSelection, render_item, select_tier

__all__ = ["CURRENT", "LEDGER", "Draft", "Setup", "draft", "measure", "render"]


@dataclass(frozen=True)
class Setup:
    """The fixed inputs of one assembly: the parsed request, its policy, model and counter, the
    query the tiers rank by, and Blocks 3 and 4 (bounded once, before any draft)."""

    policy: Policy
    spec: ModelSpec
    counter: TokenCounter
    request: ContextRequest
    fmt: OutputFormat
    model: str
    query: str
    tags_query: str
    prompt_cache_key: str | None
    ledger: tuple[ContextItem, ...]
    current: tuple[ContextItem, ...]
    current_decisions: tuple[ItemDecision, ...]
    passage_scorer: PassageScorer | None = None
    allow_prefix_change: bool = False
    # What the provider caches ahead of the blocks (a chat body's tool definitions), folded into
    # every prefix hash: new tools are a new prefix, never predicted as read.
    cache_seed: str = ""
    # What is folded into the prefix hashes from the first message block on (the tool choice).
    message_seed: str = ""
    # The digest of the tool definitions carried ahead of the pinned prefix ("" when none).
    tools_digest: str = ""
    # Said in the report: the model was resolved by a guess (a family's longest id).
    model_warning: str | None = None
    # A chat body's own fields carried into its assembled body (tools): room the tiers leave them,
    # in raw tokens, added to the body's raw tokens before the one scaling a count makes.
    carried_raw_tokens: int = 0
    # The replies a chat body asks for (OpenAI's n), each billed at the expected output.
    carried_replies: int = 1


@dataclass(frozen=True)
class Draft:
    """The tiers selected at one set of targets, as blocks, rendered without breakpoints, with the
    body's raw tokens and each block's."""

    selections: tuple[TierSelection, ...]
    blocks: tuple[Block, ...]
    body: dict[str, Any] | str
    total_raw: int
    block_raw: tuple[int, ...]

    def raw_of(self, tier: str) -> int:
        """Raw tokens of the blocks of ``tier`` (a tier name, the ledger or the current turn)."""
        return sum(n for b, n in zip(self.blocks, self.block_raw, strict=True) if b.tier == tier)


def _source(item: ContextItem, fmt: str) -> Mapping[str, Any] | None:
    """The provider message an item stands for, when the output is in its format."""
    return item.source if item.source_format == fmt else None


def _system_block(sel: TierSelection) -> Block | None:
    """A non-rolling tier as one system block (None when empty: the Messages API refuses one)."""
    tier = sel.tier
    text = JOINER.join(render_item(i, t) for i, t in sel.texts if t.strip())
    if not text:
        return None
    return Block(
        region="system", role="system", text=text, tier=tier.name, cached=tier.cached, ttl=tier.cache_ttl
    )


def _message_blocks(sel: TierSelection, fmt: str) -> list[Block]:
    """A rolling tier as messages: an item unchanged keeps its provider message; no empty or blank
    text block (the Messages API refuses one)."""
    tier, blocks = sel.tier, []
    for item, text in sel.texts:
        source = _source(item, fmt) if text == item.text else None
        if source is None and not text.strip():
            continue
        blocks.append(
            Block(
                region="message",
                role=item.role,
                text=text,
                tier=tier.name,
                cached=tier.cached,
                ttl=tier.cache_ttl,
                message=source,
            )
        )
    return blocks


def _blocks(
    selections: Sequence[TierSelection],
    ledger_items: Sequence[ContextItem],
    current: Sequence[ContextItem],
    fmt: str,
) -> tuple[Block, ...]:
    """Blocks 1-2 and the compacted background (a system block per cached tier), Block 3 (the
    ledger: append-only, cached, after the stable tiers so compacting only adds bytes after them),
    then the recent turns and Block 4 (the current turn) as messages."""
    system: list[Block] = []
    messages: list[Block] = []
    for sel in selections:
        if sel.tier.eviction == "rolling":
            messages += _message_blocks(sel, fmt)
        elif (block := _system_block(sel)) is not None:
            system.append(block)
    ledger = [
        Block(region="system", role="system", text=i.text, tier=LEDGER, cached=True)
        for i in ledger_items
        if i.text.strip()
    ]
    messages += [
        Block(region="message", role=i.role, text=i.text, tier=CURRENT, cached=False, message=_source(i, fmt))
        for i in current
        if i.text.strip() or _source(i, fmt) is not None
    ]
    # after the stable tiers, before a tier the policy leaves uncached (its text changes with the
    # question): after it, the ledger's breakpoint wrote that text every turn and never read it
    stable = next((n for n, block in enumerate(system) if not block.cached), len(system)) or len(system)
    return (*system[:stable], *ledger, *system[stable:], *messages)


def render(setup: Setup, blocks: Sequence[Block], points: Sequence[Breakpoint]) -> dict[str, Any] | str:
    """The body of ``blocks`` in the setup's output format, cache marks at ``points``."""
    return render_blocks(
        blocks,
        points,
        setup.fmt,
        model=setup.model,
        max_tokens=setup.policy.max_output_tokens,
        prompt_cache_key=setup.prompt_cache_key,
    )


def measure(setup: Setup, body: dict[str, Any] | str) -> int:
    """Raw tokens of a rendered body (a text body counted as is). The body is the assembly's own,
    rendered as trusted: its texts are the request's, checked when it was parsed, and a message
    sent as it was was checked with its body (validating it again took 0.1 ms a call, two calls
    an assembly: a tenth of the next turn's time)."""
    encoding = setup.counter.encoding
    if isinstance(body, str):
        return setup.counter.raw(body)
    return measure_total(FORMATS[setup.fmt].render(body, trusted=True), encoding)


def draft(setup: Setup, targets: Mapping[int, int]) -> Draft:
    """Select every tier at its raw-token target, lay the blocks out, render and measure them."""
    selections = tuple(
        select_tier(
            t, setup.request, setup.counter, targets, setup.query, setup.tags_query, setup.passage_scorer
        )
        for t in setup.policy.tiers
    )
    blocks = _blocks(selections, setup.ledger, setup.current, setup.fmt)
    body = render(setup, blocks, ())
    return Draft(selections, blocks, body, measure(setup, body), tuple(_block_raw(setup, b) for b in blocks))


def _block_raw(setup: Setup, block: Block) -> int:
    """Raw tokens of a block as the body sends it: its text, or a provider message sent as it was
    with more than text in it (tool calls and results, images) as its format counts the message,
    less a message's framing. Its item's text (a tool call written as its JSON) counts otherwise:
    summed up to a breakpoint, a history of tool steps gave a prefix longer than the whole body,
    and the prediction sent a negative count uncached, priced below zero. A history message's
    thinking is left out, as the body's count leaves out thinking before the latest user turn."""
    message = block.message
    if message is None or setup.fmt not in FORMATS or _text_alone(message):
        return setup.counter.raw(block.text)
    sent = message if block.tier == CURRENT else _without_thinking(message)
    encoding, role = setup.counter.encoding, str(message.get("role", "user"))
    return max(0, message_raw(setup.fmt, sent, encoding) - framing_raw(setup.fmt, role, encoding))


def _text_alone(message: Mapping[str, Any]) -> bool:
    """Whether a message is its role, an optional name and text (counted as its item's text)."""
    content = message.get("content")
    text = isinstance(content, str) or (
        isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content)
    )
    return text and set(message) <= {"role", "content", "name"}


def _without_thinking(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """``message`` without its thinking blocks (a history turn's: not counted where it is sent)."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    kept = [p for p in content if not (isinstance(p, dict) and p.get("type") in THINKING)]
    return message if len(kept) == len(content) else {**message, "content": kept}
