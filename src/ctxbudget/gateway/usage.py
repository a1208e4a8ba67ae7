"""Provider usage normalized to one shape, and the per-model calibration of estimate factors.

Anthropic's ``input_tokens`` excludes cached tokens (``cache_creation_input_tokens`` and
``cache_read_input_tokens`` come on top); OpenAI's ``prompt_tokens`` includes them
(``prompt_tokens_details.cached_tokens``). Normalized: total input, read, written, output.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Calibration", "Usage", "normalize_usage"]


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Tokens as the provider billed them."""

    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int

    @property
    def uncached_tokens(self) -> int:
        """Input neither read from nor written to the cache."""
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens

    def to_dict(self) -> dict[str, int]:
        """JSON-ready."""
        return {
            "input_tokens": self.input_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "output_tokens": self.output_tokens,
        }


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def normalize_usage(provider: str, usage: Mapping[str, Any] | None) -> Usage | None:
    """One shape for both providers; None when the response carried no usage."""
    if not usage:
        return None
    if provider == "anthropic":
        read = _int(usage.get("cache_read_input_tokens"))
        write = _int(usage.get("cache_creation_input_tokens"))
        return Usage(
            input_tokens=_int(usage.get("input_tokens")) + read + write,
            cache_read_tokens=read,
            cache_write_tokens=write,
            output_tokens=_int(usage.get("output_tokens")),
        )
    details = usage.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=_int(usage.get("prompt_tokens")),
        cache_read_tokens=_int(details.get("cached_tokens")),
        cache_write_tokens=0,
        output_tokens=_int(usage.get("completion_tokens")),
    )


class Calibration:
    """Safety factors learned from observed usage, per model.

    The factor rises at once when a request needed more than estimated; it falls only with
    evidence - after ``window`` observations all below it - and then only to the highest ratio
    observed in that window, never below what was seen.
    """

    def __init__(self, window: int = 20) -> None:
        self.window = window
        self._ratios: dict[str, deque[float]] = {}
        self._factors: dict[str, float] = {}
        self._lock = threading.Lock()

    def factor(self, model: str, default: float) -> float:
        """The calibrated factor for ``model`` (``default`` until something was observed)."""
        return self._factors.get(model, default)

    def observe(self, model: str, proxy_tokens: int, actual_tokens: int, default: float) -> float:
        """Record one request (proxy-encoding tokens vs billed tokens); returns the new factor."""
        if proxy_tokens <= 0 or actual_tokens <= 0:
            return self.factor(model, default)
        ratio = actual_tokens / proxy_tokens
        with self._lock:
            seen = self._ratios.setdefault(model, deque(maxlen=self.window))
            seen.append(ratio)
            current = self._factors.get(model, default)
            if ratio > current:
                current = ratio
            elif len(seen) == self.window and max(seen) < current:
                current = max(seen)
            self._factors[model] = round(current, 4)
            return self._factors[model]

    def snapshot(self) -> dict[str, float]:
        """Every calibrated factor."""
        with self._lock:
            return dict(self._factors)
