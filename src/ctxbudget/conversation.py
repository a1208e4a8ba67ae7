"""Prompt caching for ordinary conversations: breakpoints that roll with the conversation, and
what each turn will read from the cache and write to it.

Anthropic caches a prefix only where a ``cache_control`` mark ends it (at most 4 marks; a lookup
from a mark walks back at most 20 blocks for a prefix cached before; a prefix under the model's
minimum length is not cached). A conversation that repeats its history every turn reads that
history back when :func:`mark_conversation` marks, on top of the client's own marks:

1. the end of the newest message (what the next turn will find),
2. the end of the message that ended the previous request (the one before the latest assistant
   reply: what the previous turn cached; a direct hit however many blocks were added since),
3. the end of the system prompt (read even after the history was cut).

OpenAI and other providers that cache automatically need no marks: the longest prefix seen
before is read, in steps of 128 tokens. Either way the prefix must stay byte-identical, which is
what cutting the history in steps (:mod:`ctxbudget.trim.steps`) gives.

:func:`predict_conversation` prices one turn against the prefixes the previous turns left in the
cache (their hashes, ``alive``), as the provider would bill it. Blocks are counted with the
model's counter plus :data:`BLOCK_FRAMING_TOKENS` each (an estimate: providers do not publish
their framing), and the clock is not read: an entry is taken to be alive, as it is when turns come
within the cache's lifetime (5 minutes, or an hour).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .cache import AUTOMATIC_STEP, LOOKBACK_BLOCKS, Breakpoint, CachePrediction, predict_cache, read_block
from .catalog.values import CacheRules
from .formats.anthropic import block_tokens, latest_user_turn
from .formats.anthropic_rules import THINKING, nested_blocks
from .formats.openai import chat_part_estimate
from .formats.responses_items import item_chunks
from .tokens.counter import TokenCounter

__all__ = [
    "BLOCK_FRAMING_TOKENS",
    "MAX_ALIVE",
    "ConversationCache",
    "Mark",
    "conversation_blocks",
    "count_block",
    "is_mark",
    "mark_conversation",
    "predict_conversation",
]

BLOCK_FRAMING_TOKENS = 3
# The prefixes a session remembers as cached (newest first): enough for every mark of the last
# few turns.
MAX_ALIVE = 12
_UNMARKABLE = ("thinking", "redacted_thinking")
# A block's keys that only this module reads; ``_stripped``: a thinking block of an earlier turn.
_STRIPPED = {"_stripped": True}
_NOT_SENT = ("cache_control", "_role", "_stripped", "_item")
# An OpenAI chat message's parts that are counted by their rule (chat_part_estimate), as the fit
# counts them: their JSON text holds the base64 of the image, file or audio.
_CHAT_MEDIA = frozenset({"image_url", "input_audio", "file"})
Where = tuple[Any, ...]  # ("tools", i) | ("system", i) | ("message", m, b)


@dataclass(frozen=True)
class Mark:
    """A breakpoint: the block it ends (in the provider's order), who placed it, and its prefix."""

    block: int
    by: str  # "client", "newest message", "previous turn", "system prompt", "automatic"
    prefix_tokens: int
    prefix_sha256: str
    ttl: str = "5m"


@dataclass(frozen=True)
class ConversationCache:
    """One turn's cache plan: the body to send (marked), its marks, and each block's prefix."""

    body: dict[str, Any]
    marks: tuple[Mark, ...]
    hashes: tuple[str, ...]
    tokens: tuple[int, ...]


def conversation_blocks(body: Mapping[str, Any]) -> list[tuple[Where, Mapping[str, Any]]]:
    """The body's content blocks in the provider's caching order (tools, system, messages), each
    with where it sits; a string system or content is one text block."""
    out: list[tuple[Where, Mapping[str, Any]]] = []
    for i, tool in enumerate(body.get("tools") or []):
        if isinstance(tool, Mapping):
            out.append((("tools", i), tool))
    system = body.get("system")
    if isinstance(system, str) and system:
        out.append((("system", 0), {"type": "text", "text": system}))
    elif isinstance(system, list):
        out += [(("system", i), b) for i, b in enumerate(system) if isinstance(b, Mapping)]
    out += _responses_blocks(body)
    messages = body.get("messages") or []
    latest = latest_user_turn(messages) if isinstance(messages, list) else None
    for m, message in enumerate(messages):
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            out.append((("message", m, 0), {"type": "text", "text": content, "_role": message.get("role")}))
        elif isinstance(content, list):
            role, earlier = message.get("role"), latest is not None and m < latest
            out += [
                (
                    ("message", m, b),
                    {**x, "_role": role, **_STRIPPED}
                    if earlier and x.get("type") in THINKING
                    else {**x, "_role": role},
                )
                for b, x in enumerate(content)
                if isinstance(x, Mapping)
            ]
    return out


def _responses_blocks(body: Mapping[str, Any]) -> list[tuple[Where, Mapping[str, Any]]]:
    """A Responses body's ``instructions`` and ``input`` items, each one block (never marked:
    those providers cache automatically)."""
    out: list[tuple[Where, Mapping[str, Any]]] = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        out.append((("instructions", 0), {"type": "text", "text": body["instructions"]}))
    given = body.get("input")
    items = [{"role": "user", "content": given}] if isinstance(given, str) else given
    for i, item in enumerate(items if isinstance(items, list) else []):
        if isinstance(item, Mapping):
            content = item.get("content")
            if isinstance(content, str):  # its role hashed with it (a user's "ok" is not an assistant's)
                block = {"type": "input_item", "text": content, "_item": item, "_role": item.get("role")}
                out.append((("input", i), block))
            else:  # hashed as the item itself (_hash_block), counted by its parts' rules
                out.append((("input", i), {"type": "input_item", "_item": item}))
    return out


def _block_text(block: Mapping[str, Any]) -> str:
    """What a block no other rule of :func:`count_block` counts (a tool definition) is counted by:
    its JSON (message content and Responses items are counted by their own rules, and prefixes
    are hashed by :func:`_hash_block`)."""
    return json.dumps({k: v for k, v in block.items() if k not in _NOT_SENT}, sort_keys=True)


def _prefixes(
    model: str, blocks: Sequence[Mapping[str, Any]], counter: TokenCounter
) -> tuple[list[str], list[int]]:
    """Each block's prefix: its hash (model, roles and texts, marks left out) and its tokens."""
    digest = hashlib.sha256(model.encode("utf-8"))
    hashes, tokens, running = [], [], 0
    for block in blocks:
        _hash_block(digest, block.get("_role"), block)
        hashes.append(digest.copy().hexdigest())
        running += 0 if block.get("_stripped") else count_block(block, counter) + BLOCK_FRAMING_TOKENS
        tokens.append(running)
    return hashes, tokens


def _hash_block(digest: Any, role: Any, block: Mapping[str, Any]) -> None:
    """Adds one block to a prefix's hash: its role and text, each after its length, so no two
    sequences of blocks hash alike. The text goes in as its UTF-8 bytes, not inside a JSON
    string: escaping a 500 kB document took about 1 ms of every turn that carries it. A block
    that is not text (an image, a tool call, a Responses item with parts) goes in as its values,
    each after its kind and length (:func:`_hash_value`), where its JSON was written first: an
    8 MB base64 image took 46 ms of every turn that carries it, now 7 ms."""
    label = "" if role is None else "=" + str(role)  # no role is not the role ""
    text = block.get("text")
    if block.get("type") in ("text", "input_item") and isinstance(text, str):
        data = text.encode("utf-8", "surrogatepass")
        digest.update(f"{len(label)}:{label}{len(data)}:".encode("utf-8", "surrogatepass"))
        digest.update(data)
        return
    digest.update(f"{len(label)}:{label}v".encode("utf-8", "surrogatepass"))  # a value, not a length
    item = block.get("_item")
    _hash_value(
        digest, item if isinstance(item, Mapping) else {k: v for k, v in block.items() if k not in _NOT_SENT}
    )


def _hash_value(digest: Any, value: Any) -> None:
    """A JSON value into ``digest``: each string and scalar after its kind and length, each object
    and array after its size, an object's keys sorted, so no two values add the same bytes."""
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        digest.update(f"s{len(data)}:".encode())
        digest.update(data)
    elif isinstance(value, Mapping):
        digest.update(f"d{len(value)}:".encode())
        for key in sorted(value, key=str):
            _hash_value(digest, str(key))
            _hash_value(digest, value[key])
    elif isinstance(value, (list, tuple)):
        digest.update(f"l{len(value)}:".encode())
        for part in value:
            _hash_value(digest, part)
    else:
        data = json.dumps(value).encode()
        digest.update(f"j{len(data)}:".encode())
        digest.update(data)


def count_block(block: Mapping[str, Any], counter: TokenCounter) -> int:
    """A block's tokens (without :data:`BLOCK_FRAMING_TOKENS`): a message's content block as the
    fit counts it (tool calls by their name and input, images and PDFs by the provider's rule);
    anything else (a tool definition, a Responses item) by its text; a thinking block of an earlier
    turn, which the API strips, by nothing."""
    if block.get("_stripped"):
        return 0
    item = block.get("_item")
    if isinstance(item, Mapping):  # a Responses item: its texts, an image or file by its rule
        chunks, constant = item_chunks(item, "input", [])
        return constant + sum(counter.count(segment.text) for chunk in chunks for segment in chunk)
    if block.get("type") in _CHAT_MEDIA:  # an OpenAI image, file or audio part, not its base64
        estimate = chat_part_estimate(block)
        if estimate is not None:
            return estimate.tokens
    if "_role" in block or block.get("type") in ("text", "image", "document"):
        return block_tokens({k: v for k, v in block.items() if k != "_role"}, counter.count)
    return counter.count(_block_text(block))


def is_mark(value: Any) -> bool:
    """Whether a ``cache_control`` value is a breakpoint (``null`` is none)."""
    return isinstance(value, Mapping)


def _markable(block: Mapping[str, Any]) -> bool:
    if block.get("type") in _UNMARKABLE:
        return False
    return block.get("type") != "text" or bool(block.get("text"))


def _last_markable(blocks: list[tuple[Where, Mapping[str, Any]]], message: int | None = None) -> int | None:
    """The last block that may carry a mark: of message ``message``, or of the whole body."""
    found = None
    for n, (where, block) in enumerate(blocks):
        if (message is None or (where[0] == "message" and where[1] == message)) and _markable(block):
            found = n
    return found


def _candidates(
    body: Mapping[str, Any], blocks: list[tuple[Where, Mapping[str, Any]]]
) -> list[tuple[int, str]]:
    """Where this module would mark, in priority order (see the module docstring)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    out: list[tuple[int, str]] = []
    newest = _last_markable(blocks, len(messages) - 1) if messages else None
    if newest is not None:
        out.append((newest, "newest message"))
    replies = [m for m in range(len(messages) - 1) if messages[m].get("role") == "assistant"]
    if replies and replies[-1] >= 1:
        previous = _last_markable(blocks, replies[-1] - 1)
        if previous is not None:
            out.append((previous, "previous turn"))
    system = [n for n, (where, block) in enumerate(blocks) if where[0] == "system" and _markable(block)]
    if system:
        out.append((system[-1], "system prompt"))
    return out


def mark_conversation(
    body: Mapping[str, Any], *, model: str, rules: CacheRules, counter: TokenCounter
) -> ConversationCache:
    """``body`` (an Anthropic Messages body) with breakpoints for a conversation added to the
    client's own, within the provider's limit and only where the prefix reaches the model's
    minimum cacheable length. For automatic caching the body is unchanged and its one implicit
    boundary, the end of the prompt, is reported; with no caching there are no marks."""
    blocks = conversation_blocks(body)
    hashes, tokens = _prefixes(model, [b for _, b in blocks], counter)
    if rules.mode == "none" or not blocks:
        return ConversationCache(dict(body), (), tuple(hashes), tuple(tokens))
    if rules.mode == "automatic":
        last = len(blocks) - 1
        marks: tuple[Mark, ...] = (
            (Mark(last, "automatic", tokens[last], hashes[last]),)
            if tokens[last] >= rules.min_cacheable_tokens
            else ()
        )
        return ConversationCache(dict(body), marks, tuple(hashes), tuple(tokens))
    client = {n: _ttl(block.get("cache_control")) for n, (_, block) in enumerate(blocks)}
    client = {n: ttl for n, ttl in client.items() if ttl}
    automatic = _last_markable(blocks) if is_mark(body.get("cache_control")) else None
    if automatic is not None:  # a top-level mark: the provider marks the last block itself
        client.setdefault(automatic, _ttl(body.get("cache_control")))
    chosen = dict.fromkeys(client, "client")
    # Our marks live 5 minutes, and 1-hour marks must come before 5-minute ones. The limit counts
    # every mark the client placed, those inside a tool result's blocks too.
    after = max((n for n, ttl in client.items() if ttl == "1h"), default=-1)
    after = max([after, *(n for n, (_, block) in enumerate(blocks) if _holds_an_hour(block))])
    room = rules.max_breakpoints - client_marks(body)
    for n, by in _candidates(body, blocks):
        if room <= 0:
            break
        if n not in chosen and n > after and tokens[n] >= rules.min_cacheable_tokens:
            chosen[n] = by
            room -= 1
    ours = [n for n, by in chosen.items() if by != "client"]
    marked = _with_marks(body, [blocks[n][0] for n in ours])
    marks = tuple(  # the marks that cache something (a client's mark may be under the minimum)
        Mark(n, chosen[n], tokens[n], hashes[n], client.get(n) or "5m")
        for n in sorted(chosen)
        if tokens[n] >= rules.min_cacheable_tokens
    )
    return ConversationCache(marked, marks, tuple(hashes), tuple(tokens))


def client_marks(body: Mapping[str, Any]) -> int:
    """How many cache breakpoints the body already has, wherever they are: the top level (the
    provider then marks the last block), tools, system blocks, message blocks, and the blocks
    inside a tool result."""
    found = int(is_mark(body.get("cache_control")))
    for part in (body.get("tools"), body.get("system"), body.get("messages")):
        found += sum(1 for _ in _marks_in(part))
    return found


def _marks_in(value: Any) -> Iterator[str]:
    """The lifetime of every cache mark in ``value`` and the blocks it holds, however deep
    (:func:`~.formats.anthropic_rules.nested_blocks`)."""
    return (_ttl(b.get("cache_control")) for b in nested_blocks(value) if is_mark(b.get("cache_control")))


def _holds_an_hour(block: Mapping[str, Any]) -> bool:
    """Whether a 1-hour mark sits inside the block (on a block of a tool result's content, of a
    document's, of a search result's in a tool result, ...)."""
    return "1h" in _marks_in({**block, "cache_control": None})


def _ttl(mark: Any) -> str:
    """A ``cache_control`` value's lifetime ("" when it is no mark)."""
    if not isinstance(mark, Mapping):
        return ""
    return "1h" if mark.get("ttl") == "1h" else "5m"


def _with_marks(body: Mapping[str, Any], places: list[Where]) -> dict[str, Any]:
    """A copy of ``body`` with an ephemeral mark at each place (a string system or content
    becomes one text block to carry it)."""
    out = dict(body)
    if not places:
        return out
    out["messages"] = list(out.get("messages") or [])
    for where in places:
        if where[0] == "system":
            system = out["system"]
            blocks = (
                [{"type": "text", "text": system}] if isinstance(system, str) else copy.copy(list(system))
            )
            blocks[where[1]] = {**blocks[where[1]], "cache_control": {"type": "ephemeral"}}
            out["system"] = blocks
        elif where[0] == "message":
            message = dict(out["messages"][where[1]])
            content = message["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
            blocks[where[2]] = {**blocks[where[2]], "cache_control": {"type": "ephemeral"}}
            message["content"] = blocks
            out["messages"][where[1]] = message
    return out


def predict_conversation(
    plan: ConversationCache, alive: Sequence[str], mode: str
) -> tuple[CachePrediction, tuple[str, ...]]:
    """What this turn reads and writes, given the prefixes earlier turns left cached (``alive``,
    newest first), and the prefixes cached after it (for the next turn)."""
    points = [
        Breakpoint(
            block=m.block,
            tier=m.by,
            ttl="1h" if m.ttl == "1h" else "5m",
            prefix_tokens=m.prefix_tokens,
            prefix_sha256=m.prefix_sha256,
            explicit=mode == "explicit",
        )
        for m in plan.marks
    ]
    total = plan.tokens[-1] if plan.tokens else 0
    known = frozenset(alive)
    if mode == "automatic":
        prediction = _automatic(plan, known, total)
    else:
        prediction = predict_cache(points, total, known, mode, plan.hashes, plan.tokens)
    # What this turn wrote, and the prefix it read (a read renews the entry), come first.
    fresh = [m.prefix_sha256 for m in reversed(plan.marks)] + _read_hash(plan, known, mode)
    kept = tuple(dict.fromkeys([*fresh, *alive]))[:MAX_ALIVE]
    return prediction, kept


def _read_hash(plan: ConversationCache, alive: frozenset[str], mode: str) -> list[str]:
    """The hash of the prefix a turn reads: the longest alive one found from a mark (walking back
    at most 20 blocks, or without limit for automatic caching)."""
    reach = None if mode == "automatic" else LOOKBACK_BLOCKS
    found = read_block([m.block for m in plan.marks], alive, plan.hashes, reach)
    return [plan.hashes[found]] if found >= 0 else []


def _automatic(plan: ConversationCache, alive: frozenset[str], total: int) -> CachePrediction:
    """Automatic caching: the longest prefix seen before (any block), in 128-token steps; the
    whole prompt is written for the next turn (at the catalog's write price: the input price
    where the provider charges no premium, as OpenAI did before GPT-5.6; priced as uncached
    input, the writes of a model that charges one, such as gpt-6-sol's $2.50 against $2, were
    under the estimate a ceiling holds to)."""
    found = read_block([len(plan.hashes) - 1], alive, plan.hashes, None) if plan.hashes else -1
    read = plan.tokens[found] // AUTOMATIC_STEP * AUTOMATIC_STEP if found >= 0 else 0
    written = max(0, plan.marks[-1].prefix_tokens - read) if plan.marks else 0
    return CachePrediction(
        read_tokens=read,
        write_5m_tokens=written,
        write_1h_tokens=0,
        uncached_tokens=total - read - written,
        statuses=("read" if read else "write",) if plan.marks else (),
        per_breakpoint=((read, written),) if plan.marks else (),
    )
