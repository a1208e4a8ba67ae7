"""Provider usage normalized to one shape.

Anthropic's ``input_tokens`` excludes cached tokens (``cache_creation_input_tokens`` and
``cache_read_input_tokens`` come on top); OpenAI's ``prompt_tokens`` includes them
(``prompt_tokens_details.cached_tokens``), and so does the Responses API's ``input_tokens``
(``input_tokens_details.cached_tokens``, with ``output_tokens``). Normalized: total input, read,
written, output.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..formats.openai import CALL_FRAMING_ESTIMATE
from ..formats.responses import FRAMING_ESTIMATE

__all__ = ["Usage", "covered_by_estimate", "normalize_usage"]


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Tokens as the provider billed them."""

    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int
    cache_write_1h_tokens: int = 0  # of the writes, those cached for an hour (billed at 2x input)

    @property
    def uncached_tokens(self) -> int:
        """Input neither read from nor written to the cache (never below 0, whatever the usage says)."""
        return max(0, self.input_tokens - self.cache_read_tokens - self.cache_write_tokens)

    def to_dict(self) -> dict[str, int]:
        """JSON-ready."""
        return {
            "input_tokens": self.input_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "output_tokens": self.output_tokens,
            "cache_write_1h_tokens": self.cache_write_1h_tokens,
        }


# More tokens than any request can hold (the largest windows are about 10 million): a usage
# figure above it is a broken or hostile answer, whose one figure would make the token and cost
# counters infinite (1e308) until the gateway restarts.
MAX_BILLED_TOKENS = 1_000_000_000


def _int(value: Any) -> int:
    """A token count as billed: a whole, finite, non-negative number of at most
    :data:`MAX_BILLED_TOKENS` (anything else is 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return 0  # NaN, infinities, and 2.5: no count of tokens (5.0 is 5)
    return max(0, int(value)) if value <= MAX_BILLED_TOKENS else 0


def normalize_usage(api: str, usage: Any) -> Usage | None:
    """One shape for every API (``anthropic``, ``openai`` for Chat Completions, ``responses``);
    None when the response carried no usage (or not an object). A count that is not a whole
    non-negative number (NaN, a string, -5), or is past any window (1e308), is read as 0."""
    if not usage or not isinstance(usage, Mapping):
        return None
    if api == "anthropic":
        read = _int(usage.get("cache_read_input_tokens"))
        write = _int(usage.get("cache_creation_input_tokens"))
        creation = usage.get("cache_creation")
        hour = _int(creation.get("ephemeral_1h_input_tokens")) if isinstance(creation, Mapping) else 0
        return Usage(
            input_tokens=_int(usage.get("input_tokens")) + read + write,
            cache_read_tokens=read,
            cache_write_tokens=write,
            output_tokens=_int(usage.get("output_tokens")),
            cache_write_1h_tokens=min(hour, write),
        )
    names = ("input_tokens", "input_tokens_details", "output_tokens")
    if api != "responses":
        names = ("prompt_tokens", "prompt_tokens_details", "completion_tokens")
    details = usage.get(names[1])
    details = details if isinstance(details, Mapping) else {}
    prompt = _int(usage.get(names[0]))
    return Usage(
        input_tokens=prompt,
        cache_read_tokens=min(prompt, _int(details.get("cached_tokens"))),
        cache_write_tokens=0,
        output_tokens=_int(usage.get(names[2])),
    )


def covered_by_estimate(request: Mapping[str, Any], estimated_parts: Any) -> bool:
    """Whether the billed input is what the estimate counts: no part counted by a rule of thumb
    (images, PDFs) and no server tool (web search, code execution: billed inputs of their own).
    A Responses body's framing and a chat message's tool calls, labelled estimates for want of a
    published recipe for their framing, are counted all the same: they do not keep a model's
    calibration from learning (an agent's traffic never calibrated)."""
    if not all(_framing_only(str(part)) for part in estimated_parts or ()):
        return False
    tools = request.get("tools") or []
    return not any(
        isinstance(t, Mapping) and t.get("type") not in (None, "custom", "function") for t in tools
    )


def _framing_only(part: str) -> bool:
    """Whether an estimated part is text counted exactly but framed by an unpublished recipe."""
    return part.startswith(f"framing: {FRAMING_ESTIMATE}") or part.endswith(f": {CALL_FRAMING_ESTIMATE}")
