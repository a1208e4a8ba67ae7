"""Comparing the cached prefixes of two rendered requests (``ctxbudget verify-prefix``)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidRequestError, PrefixChanged

__all__ = ["PrefixComparison", "cached_prefix", "compare_prefixes"]


@dataclass(frozen=True)
class PrefixComparison:
    """Both prefixes' sizes and hashes; ``offset`` is the first differing byte, or None."""

    bytes_a: int
    bytes_b: int
    sha256_a: str
    sha256_b: str
    offset: int | None


def _body(document: Any) -> Any:
    return document["request"] if isinstance(document, Mapping) and "request" in document else document


def cached_prefix(document: Any) -> str:
    """The text a provider would cache: system blocks up to the last ``cache_control`` mark (all
    system blocks when there is none), an OpenAI system message, or a plain-text body's text."""
    body = _body(document)
    if isinstance(body, str):
        return body
    if not isinstance(body, Mapping):
        raise InvalidRequestError("expected a request body or an assemble --json output", "$")
    if isinstance(body.get("system"), list):
        blocks = [b for b in body["system"] if isinstance(b, Mapping)]
        marked = [i for i, b in enumerate(blocks) if "cache_control" in b]
        upto = marked[-1] + 1 if marked else len(blocks)
        return "\x00".join(str(b.get("text", "")) for b in blocks[:upto])
    if isinstance(body.get("system"), str):
        return str(body["system"])
    messages = body.get("messages") or []
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages[:1]):
        raise InvalidRequestError("messages must be a list of message objects", "$.messages")
    if messages and messages[0].get("role") in ("system", "developer"):
        content = messages[0].get("content")
        if isinstance(content, list):
            return "\x00".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        return str(content)
    return ""


def compare_prefixes(a: Any, b: Any, *, strict: bool = True) -> PrefixComparison:
    """Compare the cached prefixes of ``a`` and ``b``; with ``strict`` a difference raises
    :class:`PrefixChanged` naming the first differing byte."""
    pa, pb = cached_prefix(a).encode("utf-8"), cached_prefix(b).encode("utf-8")
    offset = next((i for i, (x, y) in enumerate(zip(pa, pb, strict=False)) if x != y), None)
    if offset is None and len(pa) != len(pb):
        offset = min(len(pa), len(pb))
    result = PrefixComparison(
        len(pa), len(pb), hashlib.sha256(pa).hexdigest(), hashlib.sha256(pb).hexdigest(), offset
    )
    if strict and offset is not None:
        raise PrefixChanged(
            breakpoint=0,
            offset=offset,
            before=pa[offset : offset + 40].decode("utf-8", "replace"),
            after=pb[offset : offset + 40].decode("utf-8", "replace"),
        )
    return result
