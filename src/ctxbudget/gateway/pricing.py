"""A request's window and price, and the cost ceiling it is held to before anything is sent."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..catalog.catalog import FLOOR_WINDOW_TOKENS, over_the_model
from ..catalog.values import ModelSpec
from ..cost import price_turn
from ..errors import CostCeilingExceeded, usd
from .refusals import Refusal, price_unknown, refusal_as
from .settings import RequestSettings
from .usage import Usage

__all__ = [
    "LONG_CONTEXT_TOKENS",
    "MARKS_WRITTEN",
    "UNKNOWN_AGE",
    "actual_cost_usd",
    "beta_window_warnings",
    "ceiling_refusal",
    "estimate_usd",
    "long_context",
    "rounded",
    "window_budget",
]

# Anthropic's 1M-token context beta (the provider decides which models take it).
LONG_CONTEXT_TOKENS = 1_000_000


def long_context(spec: ModelSpec | None, settings: RequestSettings) -> bool:
    """Whether the client's 1M-context beta widens the model's window (a Claude model)."""
    return settings.long_context and spec is not None and "claude" in spec.id


def beta_window_warnings(warnings: list[str], budget: int, spec: ModelSpec | None) -> list[str]:
    """A fit's warnings when the client's 1M-context beta widened its window: the catalog's
    warning that the window given is over the model's is not the client's doing (no window was
    given), so it goes; for a model the catalog prices no tier above its window (the providers
    price the beta's long requests), one saying the provider may not grant the beta takes its
    place."""
    told = over_the_model(budget, spec)
    if told is None or told not in warnings or spec is None:
        return warnings
    kept = [w for w in warnings if w != told]
    if spec.prices is not None and spec.prices.long_context is not None:
        return kept
    return [
        *kept,
        f"the 1M-context beta (anthropic-beta) widened the window to {budget:,} tokens, over "
        f"{spec.id}'s {spec.context_window:,}-token window in the catalog, which prices no request "
        "above it for this model: the provider refuses a longer one unless it grants the beta to it",
    ]


def window_budget(spec: ModelSpec | None, settings: RequestSettings) -> int:
    """The request's window: the client's or server's budget, never above the model's own
    (a Claude model's is 1M tokens when the client turned on the 1M-context beta); 0 when no
    budget narrows the model's window."""
    window = spec.context_window if spec else FLOOR_WINDOW_TOKENS  # an unknown id: the floor
    if long_context(spec, settings):
        window = max(window, LONG_CONTEXT_TOKENS)
        return min(settings.max_context_tokens or window, window)
    return min(settings.max_context_tokens, window) if settings.max_context_tokens else 0


def estimate_usd(
    spec: ModelSpec | None, input_tokens: int, output_tokens: int, cache: Mapping[str, Any] | None = None
) -> float | None:
    """The estimated price of a turn; None without a known price. With ``cache`` (the turn's
    predicted cache use: ``read_tokens``, ``write_tokens``, ``write_1h_tokens``, ``uncached_tokens``)
    the input is split as predicted, writes at the write price (Anthropic: 1.25x, 2x for an hour)
    and reads at the read price; the prediction's shares are applied to ``input_tokens`` (which
    may count with a calibrated factor the prediction does not use). Without, all input uncached."""
    if spec is None or spec.prices is None:
        return None
    read, write_5m, write_1h = _predicted_shares(input_tokens, cache or {})
    return price_turn(
        spec.prices,
        uncached_tokens=input_tokens - read - write_5m - write_1h,
        write_5m_tokens=write_5m,
        write_1h_tokens=write_1h,
        read_tokens=read,
        output_tokens=output_tokens,
    ).total_usd


def _predicted_shares(input_tokens: int, cache: Mapping[str, Any]) -> tuple[int, int, int]:
    """The predicted read, 5-minute and 1-hour write tokens, scaled to ``input_tokens``."""
    figures = [cache.get(k) for k in ("read_tokens", "write_tokens", "write_1h_tokens", "uncached_tokens")]
    if not all(isinstance(f, int) and f >= 0 for f in figures):
        return 0, 0, 0
    read, write, hour, uncached = (int(f) for f in figures)  # type: ignore[arg-type]
    total = read + write + uncached
    if total <= 0:
        return 0, 0, 0
    share = input_tokens / total
    read_in = math.floor(read * share)
    write_in = min(input_tokens - read_in, math.ceil(write * share))  # the dearer side rounds up
    hour_in = min(write_in, math.ceil(min(hour, write) * share))
    return read_in, write_in - hour_in, hour_in


def actual_cost_usd(spec: ModelSpec | None, usage: Usage) -> float | None:
    """The price of the usage the provider billed; None without a known price."""
    if spec is None or spec.prices is None:
        return None
    return price_turn(
        spec.prices,
        uncached_tokens=usage.uncached_tokens,
        write_5m_tokens=usage.cache_write_tokens - usage.cache_write_1h_tokens,
        write_1h_tokens=usage.cache_write_1h_tokens,
        read_tokens=usage.cache_read_tokens,
        output_tokens=usage.output_tokens,
    ).total_usd


def rounded(usd: float | None) -> float | None:
    """A price to the micro-dollar, as stored."""
    return None if usd is None else round(usd, 6)


# Why a turn was priced with its cache reads written instead (gateway/caching.py).
UNKNOWN_AGE = (
    "its predicted cache reads priced as writes: this gateway process did not send the session's "
    "previous turn (a restart, or another replica did), so it cannot tell whether the provider "
    "still holds that turn's cache"
)


# Why a turn sent without conversation caching was priced with its marked prefixes written.
MARKS_WRITTEN = (
    "its cache marks' prefixes priced as written: without conversation caching the gateway does not "
    "follow what the provider holds, and a write costs more than the input it caches"
)


def ceiling_refusal(
    model: str, provider: str, estimate: float | None, ceiling: float | None, why: str = ""
) -> Refusal | None:
    """The refusal of a fitted turn priced above the ceiling (or not priced under one); None when
    the turn may be sent. ``why``: how the estimate was priced, when not as predicted."""
    if ceiling is None:
        return None
    if estimate is None:
        return price_unknown(model, ceiling)
    if estimate > ceiling:
        message = (
            f"ctxbudget: estimated cost {usd(estimate)} is above the ceiling {usd(ceiling)} per "
            f"request{f' ({why})' if why else ''}; nothing was sent (X-Ctxbudget-Cost-Ceiling may only "
            "lower the server's)"
        )
        return refusal_as(CostCeilingExceeded, provider, message)
    return None
