"""The items of a Responses ``input`` list: their trimmable texts, their rebuilding, their tokens.

A message's texts are its string ``content`` or its ``input_text`` / ``output_text`` parts; a
``function_call_output``'s texts are its string ``output`` or its text parts. Those are what a fit
may cut; everything else an item carries (roles, call names and arguments, images, reasoning) is
counted and kept as it is.

Counting follows the Chat Completions recipe (:mod:`ctxbudget.formats.openai`), which OpenAI has
not published for the Responses API: each item costs :data:`TOKENS_PER_ITEM` tokens of framing
plus its texts (a message: its role and contents; a function call: its name and arguments; a
function call's output: its output). A reasoning item's summary is counted as text and its
encrypted content, which cannot be read here, is named as an estimate; any other item type
(``item_reference``, a built-in tool's call, ...) is counted as its JSON text, also an estimate.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..items import GAP, PIECE_SEP, Owner, Segment
from .media import Estimate, inline_bytes, inline_image_size, openai_image_tokens, pdf_tokens

__all__ = [
    "MESSAGE_TYPES",
    "STORED_CONVERSATION",
    "TOKENS_PER_ITEM",
    "call_groups",
    "continues_stored",
    "is_message",
    "item_chunks",
    "item_text",
    "opens_with_stored_answers",
    "part_estimate",
    "with_item_text",
]

TOKENS_PER_ITEM = 3
PART_LOW_RATE = 85
MESSAGE_TYPES = (None, "message")
TEXT_PARTS = ("input_text", "output_text", "text")

Location = tuple[str | int, ...]


def is_message(item: Mapping[str, Any]) -> bool:
    """A message item: ``{"role", "content"}`` with no type, or of type ``message``."""
    return item.get("type") in MESSAGE_TYPES and "role" in item


def _part_texts(parts: Any, field: str) -> list[tuple[Location, str]]:
    if isinstance(parts, str):
        return [((field,), parts)]
    if not isinstance(parts, list):
        return []
    return [
        ((field, i, "text"), part["text"])
        for i, part in enumerate(parts)
        if isinstance(part, dict) and part.get("type") in TEXT_PARTS and isinstance(part.get("text"), str)
    ]


# Outputs read as text (cut like a message's text): a function's, and a custom (freeform) tool's.
_OUTPUTS_OF_TEXT = ("function_call_output", "custom_tool_call_output")


def text_locations(item: Mapping[str, Any]) -> list[tuple[Location, str]]:
    """Every trimmable text of an input item, in order, with where it sits in the item."""
    if is_message(item):
        return _part_texts(item.get("content"), "content")
    if item.get("type") in _OUTPUTS_OF_TEXT:
        return _part_texts(item.get("output"), "output")
    return []


def item_text(item: Mapping[str, Any]) -> str:
    """The item's trimmable text: its pieces joined by :data:`PIECE_SEP` (``""`` if none)."""
    return PIECE_SEP.join(text for _, text in text_locations(item))


def with_item_text(item: Mapping[str, Any], text: str, pieces: tuple[str, ...] = ()) -> dict[str, Any]:
    """A deep copy of ``item`` whose texts are ``pieces`` (one per location); without them,
    ``text`` goes to the first location and any other is emptied. A text part cut to nothing says
    that it was cut; a string content may be empty."""
    out = copy.deepcopy(dict(item))
    found = text_locations(out)
    if len(pieces) != len(found):
        pieces = (text,) + ("",) * (len(found) - 1) if found else ()
    for (location, original), piece in zip(found, pieces, strict=True):
        if not piece and original and len(location) > 1:
            piece = GAP.strip()
        if len(location) == 1:
            out[str(location[0])] = piece
        else:
            out[str(location[0])][location[1]]["text"] = piece
    return out


def answer_key(item: Mapping[str, Any]) -> tuple[str, str] | None:
    """What an item answers, when it is an answer: an ``X_call_output``'s kind and ``call_id``, an
    ``mcp_approval_response``'s request id; None for any other item."""
    kind = str(item.get("type") or "")
    if kind == "mcp_approval_response":
        return kind, str(item.get("approval_request_id"))
    if kind.endswith("_call_output"):
        return kind, _called(item)
    return None


def _called(output: Mapping[str, Any]) -> str:
    """The call an ``X_call_output`` answers: its ``call_id``, or its ``id`` where the output
    names its call so (a ``local_shell_call_output``)."""
    return str(output.get("call_id") if "call_id" in output else output.get("id"))


# The fields that continue a conversation the provider stores: its items are not in the body.
STORED_CONVERSATION = ("previous_response_id", "conversation")


def continues_stored(request: Mapping[str, Any]) -> bool:
    """Whether the body continues a stored response or conversation (``previous_response_id``,
    or the Conversations API's ``conversation``, an id or ``{"id": ...}``)."""
    return any(request.get(field) for field in STORED_CONVERSATION)


def stored_answers(items: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The answers among ``items`` to calls that are not among them (with ``previous_response_id``,
    the stored response's calls), by :func:`answer_key`."""
    _, answered = _paired(items)
    return [key for i, item in enumerate(items) if i not in answered and (key := answer_key(item))]


def opens_with_stored_answers(request: Mapping[str, Any]) -> bool:
    """Whether a body that continues a stored response opens its input (system and developer
    messages aside) with outputs answering that response's calls: the history's first unit
    (:func:`call_groups`), which a fit keeps before any other (the API refuses the call unanswered)."""
    given = request.get("input")
    if not continues_stored(request) or not isinstance(given, list):
        return False
    items = [i for i in given if isinstance(i, Mapping)]
    first = next((i for i in items if i.get("role") not in ("system", "developer")), None)
    return first is not None and answer_key(first) in set(stored_answers(items))


def call_groups(items: Sequence[Mapping[str, Any]], *, continues: bool = False) -> list[int]:
    """A group per item; a call and its output (``function_call`` and ``function_call_output``,
    and so every ``X_call`` and ``X_call_output`` of the same kind and ``call_id``: computer,
    custom tool, local shell, ...) share one with everything between them, as do an
    ``mcp_approval_request`` and the ``mcp_approval_response`` naming its id, and a ``reasoning``
    item shares the group of the item after it and of every call of its response up to the next
    turn (the API refuses a call sent back without the reasoning that led to it, or an output or
    approval without what it answers).

    A body that ``continues`` a stored response (``previous_response_id``) may answer that
    response's calls: the outputs or approvals whose calls are not in the input (they open it)
    are one unit, the history's first, which the trimming keeps before older turns (it may cut
    their text; a fit that would drop them is refused: the stored call would be unanswered).
    Grouping them with everything after them kept the whole history as one unit, its newest
    turns emptied to spare the oldest."""
    groups, answered = _paired(items)
    if continues:
        orphans = [i for i in range(len(items)) if i not in answered and answer_key(items[i])]
        if orphans:
            first, last = orphans[0], orphans[-1]
            groups[first : last + 1] = [groups[first]] * (last + 1 - first)
    return groups


def _paired(items: Sequence[Mapping[str, Any]]) -> tuple[list[int], set[int]]:
    """Each item's group by the pairing rules of :func:`call_groups`, and the answers paired."""
    groups = list(range(len(items)))
    answered: set[int] = set()
    owner_of_call: dict[tuple[str, str], int] = {}
    reasoning: int | None = None  # the reasoning item of the response whose output is being read
    reference: int | None = None  # the first of the item references this turn's outputs may answer
    for i, item in enumerate(items):
        if i and _joins_the_next(items[i - 1], item):
            groups[i] = groups[i - 1]
        kind = str(item.get("type") or "")
        reasoning = _reasoning_after(reasoning, i, item, kind)
        reference = _reference_after(reference, i, items)
        if reasoning is not None and kind.endswith("_call"):  # a call of that response: with it
            groups[reasoning : i + 1] = [groups[reasoning]] * (i + 1 - reasoning)
        if kind == "mcp_approval_request":  # answered by an mcp_approval_response naming its id
            owner_of_call["mcp_approval", str(item.get("id"))] = i
        elif (
            kind == "mcp_approval_response"
            and ("mcp_approval", str(item.get("approval_request_id"))) in owner_of_call
        ):
            first = owner_of_call["mcp_approval", str(item.get("approval_request_id"))]
            groups[first : i + 1] = [groups[first]] * (i + 1 - first)
            answered.add(i)
        if kind.endswith("_call") and "call_id" in item:
            owner_of_call[kind, str(item.get("call_id"))] = i
        elif kind.endswith("_call_output"):
            key = (kind[: -len("_output")], _called(item))
            call = owner_of_call.get(key, reference)  # its call in the input, else by reference
            if call is not None:
                groups[call : i + 1] = [groups[call]] * (i + 1 - call)
                answered.add(i)
    return groups, answered


def _joins_the_next(before: Mapping[str, Any], item: Mapping[str, Any]) -> bool:
    """A reasoning item, or an ``item_reference`` (a stored item given by id: a reasoning item or
    a call, whose id says nothing of its call_id), goes with the item after it, unless that opens
    a new turn."""
    kind = before.get("type")
    return kind == "reasoning" or (kind == "item_reference" and "role" not in item)


def _reference_after(reference: int | None, i: int, items: Sequence[Mapping[str, Any]]) -> int | None:
    """The first of the latest run of ``item_reference`` items (stored items given by id: whose
    call_id they stand for is not known here), until a message opens a new turn: an output whose
    call is not in the input but follows such a run answers a call of the run (the API pairs them
    by the stored item), not a stored response's call."""
    item = items[i]
    if item.get("type") == "item_reference":
        return reference if i and items[i - 1].get("type") == "item_reference" else i
    if item.get("role") in ("user", "system", "developer"):
        return None
    return reference


def _reasoning_after(reasoning: int | None, i: int, item: Mapping[str, Any], kind: str) -> int | None:
    """The reasoning item whose response item ``i`` may belong to: a reasoning item opens one, a
    message that is not the assistant's (a new turn) closes it. The API refuses any call of that
    response sent back without it: a preamble message may stand between them, and parallel calls
    may be listed each with its output."""
    if kind == "reasoning":
        return i
    if item.get("role") in ("user", "system", "developer"):
        return None
    return reasoning


def part_estimate(part: Mapping[str, Any]) -> Estimate:
    """A non-text part: an image by OpenAI's tile rule, a file as PDF pages, else the low rate."""
    kind = part.get("type")
    if kind == "input_image":
        return openai_image_tokens(part.get("detail"), inline_image_size(part.get("image_url")))
    if kind == "input_file":
        return pdf_tokens(inline_bytes(part.get("file_data")), "file by id or URL")
    return Estimate(PART_LOW_RATE, f"{kind or 'part'!s}: counted at {PART_LOW_RATE} tokens")


def _parts_chunks(
    parts: Any, field: str, owner: Owner, estimated: list[tuple[Owner, str]]
) -> tuple[list[tuple[Segment, ...]], int]:
    if isinstance(parts, str):
        return [(Segment(parts, owner, content=True),)], 0
    chunks: list[tuple[Segment, ...]] = []
    constant = 0
    for i, part in enumerate(parts if isinstance(parts, list) else []):
        if not isinstance(part, dict):
            continue
        if part.get("type") in TEXT_PARTS and isinstance(part.get("text"), str):
            chunks.append((Segment(part["text"], owner, content=True),))
        elif part.get("type") == "refusal":  # read as text, never cut
            chunks.append((Segment(str(part.get("refusal") or ""), owner),))
        else:
            estimate = part_estimate(part)
            constant += estimate.tokens
            estimated.append((owner, f"{field}[{i}]: {estimate.how}: {estimate.tokens:,} tokens"))
    return chunks, constant


def item_chunks(
    item: Mapping[str, Any], owner: Owner, estimated: list[tuple[Owner, str]]
) -> tuple[list[tuple[Segment, ...]], int]:
    """The texts one input item puts before the model, and its tokens that are not text."""
    kind = item.get("type")
    if is_message(item):
        chunks, constant = _parts_chunks(item.get("content"), "content", owner, estimated)
        return [(Segment(str(item["role"]), owner),), *chunks], constant + TOKENS_PER_ITEM
    if kind == "function_call":
        name, arguments = str(item.get("name", "")), str(item.get("arguments", ""))
        return [(Segment(name, owner),), (Segment(arguments, owner),)], TOKENS_PER_ITEM
    if kind in _OUTPUTS_OF_TEXT:
        chunks, constant = _parts_chunks(item.get("output"), "output", owner, estimated)
        return chunks, constant + TOKENS_PER_ITEM
    output = item.get("output")
    if kind == "computer_call_output" and isinstance(output, dict) and "image_url" in output:
        # a screenshot is billed as an image, not as its base64 text
        estimate = part_estimate({"type": "input_image", "image_url": output.get("image_url")})
        estimated.append((owner, f"computer_call_output: {estimate.how}: {estimate.tokens:,} tokens"))
        return [], TOKENS_PER_ITEM + estimate.tokens
    if kind == "image_generation_call" and isinstance(item.get("result"), str):
        # the generated image sent back: billed as an image (its size read from its header), not
        # as base64 text (a 1.3 MB PNG counted 910,000 tokens and refused the follow-up)
        image = "data:image/png;base64," + str(item["result"])
        estimate = part_estimate({"type": "input_image", "image_url": image})
        rest = {k: v for k, v in item.items() if k not in ("id", "result")}
        estimated.append((owner, f"image_generation_call: {estimate.how}: {estimate.tokens:,} tokens"))
        text = json.dumps(rest, ensure_ascii=False, separators=(",", ":"))
        return [(Segment(text, owner),)], TOKENS_PER_ITEM + estimate.tokens
    if kind == "reasoning":
        summary = item.get("summary")
        texts = [str(s.get("text", "")) for s in summary or [] if isinstance(s, dict)]
        if item.get("encrypted_content"):
            estimated.append((owner, "reasoning: its encrypted content cannot be read here: not counted"))
        return [(Segment(text, owner),) for text in texts if text], TOKENS_PER_ITEM
    shown = {k: v for k, v in item.items() if k != "id"}
    estimated.append((owner, f"{kind or 'item'!s}: counted as its JSON text"))
    return [(Segment(json.dumps(shown, ensure_ascii=False, separators=(",", ":")), owner),)], TOKENS_PER_ITEM
