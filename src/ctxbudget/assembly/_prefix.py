"""Comparing the cached prefixes of two rendered requests (``ctxbudget verify-prefix``).

A prefix is what the provider caches ahead of the conversation, in its order: the tool
definitions, then the system prompt (Anthropic: its blocks up to the last ``cache_control`` mark;
OpenAI: the leading system and developer messages; Responses: the instructions, then the system
and developer messages the input opens with). Each part ends with a NUL byte, so a block
that grew is a difference (a breakpoint sits at a block's end: the longer block is another entry),
while a request that only adds parts after the first's prefix still reads it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidRequestError, PrefixChanged

__all__ = ["PrefixComparison", "cached_prefix", "compare_prefixes"]

_END = "\x00"  # after each part: the boundaries a breakpoint may sit at


@dataclass(frozen=True)
class PrefixComparison:
    """Both prefixes' sizes and hashes; ``offset`` is the first differing byte, or None when the
    second request's prefix starts with the first's (the same, or grown by parts after it)."""

    bytes_a: int
    bytes_b: int
    sha256_a: str
    sha256_b: str
    offset: int | None
    models: tuple[str | None, str | None] = (None, None)  # each request's model, when it names one

    @property
    def grown(self) -> bool:
        """Whether the second prefix holds the first and parts after it."""
        return self.offset is None and self.bytes_b > self.bytes_a


def _body(document: Any) -> Any:
    """The request: the document itself, or an ``assemble --json`` output's ``request``."""
    if isinstance(document, Mapping) and "request" in document:
        if not isinstance(document["request"], Mapping | str):  # a body, or a text rendering
            raise InvalidRequestError(
                "an assemble --json output's request is a body (an object) or a text", "$.request"
            )
        return document["request"]
    if isinstance(document, Mapping) and not {"system", "messages", "tools", "instructions", "input"} & set(
        document
    ):
        raise InvalidRequestError(
            "is not a request body (no system, messages, instructions, input or tools) nor an "
            "assemble --json output",
            "$",
        )
    return document


def _part(value: Any) -> str:
    """A part's text: a text block's (or a Responses text part's) text, anything else (a tool, an
    image, a message's role and name) as its JSON in the order given, without its cache mark
    (moving a mark changes no cached byte; reordering a tool schema's keys changes what the
    provider renders, and was reported as identical when keys were sorted)."""
    if isinstance(value, Mapping):
        # a text block, or a Responses input's text part (its string content written out)
        if set(value) - {"cache_control"} == {"type", "text"} and value.get("type") in ("text", "input_text"):
            return str(value["text"]) if isinstance(value["text"], str) else _json(value["text"])
        value = {k: v for k, v in value.items() if k != "cache_control"}
    elif isinstance(value, str):
        return value
    return _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _tools(body: Mapping[str, Any]) -> list[Any]:
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise InvalidRequestError("tools must be a list of tool definitions", "$.tools")
    return tools


def _system_parts(body: Mapping[str, Any]) -> list[Any]:
    """The system prompt's parts as the provider caches them."""
    system = body.get("system")
    if isinstance(system, list):
        blocks = list(system)
        for n, block in enumerate(blocks):
            if not isinstance(block, Mapping):
                raise InvalidRequestError("a system block is a JSON object", f"$.system[{n}]")
        marked = [i for i, b in enumerate(blocks) if "cache_control" in b]
        return blocks[: marked[-1] + 1 if marked else len(blocks)]
    if isinstance(system, str):
        return [system]
    if system is not None:
        raise InvalidRequestError("the system prompt is a string or a list of blocks", "$.system")
    if "messages" not in body and {"instructions", "input"} & set(body):
        return _responses_parts(body)
    messages = body.get("messages") or []
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        raise InvalidRequestError("messages must be a list of message objects", "$.messages")
    return _leading_system(messages)


def _responses_parts(body: Mapping[str, Any]) -> list[Any]:
    """A Responses body's system prompt as the provider caches it: its ``instructions`` (a string,
    or a list of input items), then its leading system and developer input messages."""
    instructions = body.get("instructions")
    if isinstance(instructions, list):
        parts: list[Any] = list(instructions)
    elif instructions is None or isinstance(instructions, str):
        parts = [instructions] if instructions else []
    else:
        raise InvalidRequestError("instructions are a string or a list of input items", "$.instructions")
    given = body.get("input")
    if isinstance(given, list):
        if not all(isinstance(item, Mapping) for item in given):
            raise InvalidRequestError("input must be a string or a list of item objects", "$.input")
        parts += _leading_system(given)
    return parts


def _leading_system(messages: list[Any]) -> list[Any]:
    """The parts of the leading system and developer messages (a Responses input's items too: up
    to its first item of another type or role): each one's role and name, then its content (a
    string, or its parts)."""
    parts: list[Any] = []
    for message in messages:
        if message.get("type", "message") != "message" or message.get("role") not in ("system", "developer"):
            break
        # its role and name are rendered ahead of its text (a developer message is not a system
        # one); a Responses item's "type": "message" is what an item without a type is too
        parts.append({k: v for k, v in message.items() if k != "content" and (k, v) != ("type", "message")})
        content = message.get("content")
        parts += (
            [p for p in content if isinstance(p, Mapping)] if isinstance(content, list) else [str(content)]
        )
    return parts


def cached_prefix(document: Any) -> str:
    """The text a provider would cache ahead of the conversation (see the module's docstring); a
    plain-text document is its own prefix."""
    body = _body(document)
    if isinstance(body, str):
        return body
    if not isinstance(body, Mapping):
        raise InvalidRequestError("expected a request body or an assemble --json output", "$")
    return "".join(_part(p) + _END for p in [*_tools(body), *_system_parts(body)])


def compare_prefixes(a: Any, b: Any, *, strict: bool = True) -> PrefixComparison:
    """Compare the cached prefixes of ``a`` and ``b``: the same when ``b``'s starts with ``a``'s
    (``b`` reads what ``a`` cached) and both are for one model (when both name theirs: a provider
    caches per model; another model differs at byte 0). With ``strict`` a difference raises
    :class:`PrefixChanged` naming the first differing byte."""
    # a lone surrogate (a JSON escape of half a pair) is compared as the bytes it stands for
    pa, pb = (cached_prefix(d).encode("utf-8", "surrogatepass") for d in (a, b))
    offset = next((i for i, (x, y) in enumerate(zip(pa, pb, strict=False)) if x != y), None)
    if offset is None and len(pb) < len(pa):
        offset = len(pb)
    models = (_model(a), _model(b))
    other_model = None not in models and models[0] != models[1]
    if other_model:  # a provider caches a prefix for one model: another reads none of it
        offset = 0
    result = PrefixComparison(
        len(pa), len(pb), hashlib.sha256(pa).hexdigest(), hashlib.sha256(pb).hexdigest(), offset, models
    )
    if strict and offset is not None:
        raise PrefixChanged(
            breakpoint=0,
            offset=offset,
            before=f"model {models[0]}" if other_model else _shown(pa, offset),
            after=f"model {models[1]}" if other_model else _shown(pb, offset),
        )
    return result


def _model(document: Any) -> str | None:
    """The model a request is for (its body's ``model``, or an ``assemble --json`` output's
    report's), or None when it names none."""
    if not isinstance(document, Mapping):
        return None
    body = document.get("request") if "request" in document else document
    found = body.get("model") if isinstance(body, Mapping) else None
    if found is None and isinstance(document.get("report"), Mapping):
        found = document["report"].get("model")
    return found if isinstance(found, str) else None


def _shown(prefix: bytes, offset: int) -> str:
    """What a prefix holds from ``offset`` to the end of its part, at most 40 bytes."""
    return prefix[offset : offset + 40].decode("utf-8", "replace").split(_END)[0]
