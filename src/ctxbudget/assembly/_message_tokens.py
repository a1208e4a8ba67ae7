"""One provider message's tokens as its format counts it alone, and a message's framing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..formats import FORMATS
from ..measure import measure_total
from ..tokens.encoding import Encoding

__all__ = ["framing_raw", "message_raw"]


def message_raw(fmt: str, message: Mapping[str, Any], encoding: Encoding) -> int:
    """Raw tokens of one provider message as format ``fmt`` renders it alone (it was parsed and
    checked with its request: rendered as trusted), its framing included."""
    body = {"model": "m", "max_tokens": 1, "messages": [message]}
    return measure_total(FORMATS[fmt].render(body, trusted=True), encoding)


_FRAMING: dict[tuple[str, str, str], int] = {}


def framing_raw(fmt: str, role: str, encoding: Encoding) -> int:
    """Raw tokens of an empty message of ``role``: a message's framing, by format and encoding
    (remembered: a tool loop's every kept message asks for it)."""
    key = (fmt, role, encoding.name)
    found = _FRAMING.get(key)
    if found is None:  # two threads may both count it: the same number
        found = _FRAMING[key] = message_raw(fmt, {"role": role, "content": ""}, encoding)
    return found
