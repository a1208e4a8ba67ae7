"""Provider usage normalized to one shape, and the per-model calibration of estimate factors.

Anthropic's ``input_tokens`` excludes cached tokens (``cache_creation_input_tokens`` and
``cache_read_input_tokens`` come on top); OpenAI's ``prompt_tokens`` includes them
(``prompt_tokens_details.cached_tokens``). Normalized: total input, read, written, output.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Calibration", "Usage", "covered_by_estimate", "normalize_usage", "tool_prompt_tokens"]


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


def _int(value: Any) -> int:
    """A token count as billed: a whole, finite, non-negative number (anything else is 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return max(0, int(value))


def normalize_usage(provider: str, usage: Any) -> Usage | None:
    """One shape for both providers; None when the response carried no usage (or not an object).
    A count that is not a whole non-negative number (NaN, a string, -5) is read as 0."""
    if not usage or not isinstance(usage, Mapping):
        return None
    if provider == "anthropic":
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
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    prompt = _int(usage.get("prompt_tokens"))
    return Usage(
        input_tokens=prompt,
        cache_read_tokens=min(prompt, _int(details.get("cached_tokens"))),
        cache_write_tokens=0,
        output_tokens=_int(usage.get("completion_tokens")),
    )


# Anthropic bills a tool-use system prompt on top of the request whenever ``tools`` are given
# (docs.anthropic.com, "Tool use: pricing and tokens"): (model prefix, auto/none, any/tool).
TOOL_PROMPT_TOKENS: tuple[tuple[str, int, int], ...] = (
    ("claude-3-opus", 530, 281),
    ("claude-3-sonnet", 159, 235),
    ("claude-3-haiku", 264, 340),
    ("claude-3-5-haiku", 264, 340),
    ("claude", 346, 313),  # Claude 3.5 Sonnet, 3.7 Sonnet and every Claude 4 model
)


def tool_prompt_tokens(model: str, request: Mapping[str, Any]) -> int:
    """Tokens of the tool-use system prompt the provider adds to an Anthropic request."""
    if not request.get("tools") or not model.startswith("claude"):
        return 0
    choice = request.get("tool_choice")
    forced = isinstance(choice, Mapping) and choice.get("type") in ("any", "tool")
    for prefix, auto, forced_tokens in TOOL_PROMPT_TOKENS:
        if model.startswith(prefix):
            return forced_tokens if forced else auto
    return 0


def covered_by_estimate(request: Mapping[str, Any], estimated_parts: Any) -> bool:
    """Whether the billed input is what the estimate counts: no part counted by a rule of thumb
    (images, PDFs) and no server tool (web search, code execution: billed inputs of their own)."""
    if estimated_parts:
        return False
    tools = request.get("tools") or []
    return not any(
        isinstance(t, Mapping) and t.get("type") not in (None, "custom", "function") for t in tools
    )


class Calibration:
    """Safety factors learned from observed usage, per catalog entry, within bounds that answers
    cannot break.

    A factor stays between the catalog's (``default``) and ``ceiling`` times it. An observed
    ratio above that band is not a calibration but input the estimate does not cover (a server
    tool, a poisoned or broken usage): it is ignored and counted. Otherwise the factor is the 90th
    percentile of the last ``window`` ratios (so one answer in ten that bills more, such as a
    request whose server-side input the estimate cannot see, does not pin it), rising at most
    ``step`` times per answer, and never below ``default``: it comes back down with the requests
    it still lets through.
    """

    def __init__(self, window: int = 20, ceiling: float = 2.0, step: float = 1.25) -> None:
        self.window = window
        self.ceiling = ceiling
        self.step = step
        self.ignored = 0
        self._ratios: dict[str, deque[float]] = {}
        self._factors: dict[str, float] = {}
        self._lock = threading.Lock()

    def factor(self, key: str, default: float) -> float:
        """The calibrated factor for a catalog entry (``default`` until something was observed)."""
        return self._factors.get(key, default)

    def observe(self, key: str, proxy_tokens: int, actual_tokens: int, default: float) -> float:
        """Record one request (proxy-encoding tokens vs billed tokens); returns the new factor."""
        if proxy_tokens <= 0 or actual_tokens <= 0:
            return self.factor(key, default)
        ratio = actual_tokens / proxy_tokens
        with self._lock:
            if ratio > default * self.ceiling:
                self.ignored += 1
                return self._factors.get(key, default)
            seen = self._ratios.setdefault(key, deque(maxlen=self.window))
            seen.append(ratio)
            ordered = sorted(seen)
            target = ordered[math.ceil(0.9 * len(ordered)) - 1]  # nearest-rank 90th percentile
            current = self._factors.get(key, default)
            factor = max(default, min(target, current * self.step))
            self._factors[key] = round(factor, 4)
            return self._factors[key]

    def snapshot(self) -> dict[str, float]:
        """Every calibrated factor."""
        with self._lock:
            return dict(self._factors)
