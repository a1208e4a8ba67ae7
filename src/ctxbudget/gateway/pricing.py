"""A request's window and price, and the cost ceiling it is held to before anything is sent."""

from __future__ import annotations

from ..catalog.catalog import FLOOR_WINDOW_TOKENS
from ..catalog.values import ModelSpec
from ..cost import price_turn
from ..errors import CostCeilingExceeded, usd
from .refusals import Refusal, price_unknown, refusal_as
from .settings import RequestSettings
from .usage import Usage

__all__ = [
    "LONG_CONTEXT_TOKENS",
    "actual_cost_usd",
    "ceiling_refusal",
    "estimate_usd",
    "rounded",
    "window_budget",
]

# Anthropic's 1M-token context beta (the provider decides which models take it).
LONG_CONTEXT_TOKENS = 1_000_000


def window_budget(spec: ModelSpec | None, settings: RequestSettings) -> int:
    """The request's window: the client's or server's budget, never above the model's own
    (a Claude model's is 1M tokens when the client turned on the 1M-context beta); 0 when no
    budget narrows the model's window."""
    window = spec.context_window if spec else FLOOR_WINDOW_TOKENS  # an unknown id: the floor
    if settings.long_context and spec is not None and "claude" in spec.id:
        window = max(window, LONG_CONTEXT_TOKENS)
        return min(settings.max_context_tokens or window, window)
    return min(settings.max_context_tokens, window) if settings.max_context_tokens else 0


def estimate_usd(spec: ModelSpec | None, input_tokens: int, output_tokens: int) -> float | None:
    """The estimated price of a turn, all input uncached; None without a known price."""
    if spec is None or spec.prices is None:
        return None
    return price_turn(
        spec.prices,
        uncached_tokens=input_tokens,
        write_5m_tokens=0,
        write_1h_tokens=0,
        read_tokens=0,
        output_tokens=output_tokens,
    ).total_usd


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


def ceiling_refusal(
    model: str, provider: str, estimate: float | None, ceiling: float | None
) -> Refusal | None:
    """The refusal of a fitted turn priced above the ceiling (or not priced under one); None when
    the turn may be sent."""
    if ceiling is None:
        return None
    if estimate is None:
        return price_unknown(model, ceiling)
    if estimate > ceiling:
        message = (
            f"ctxbudget: estimated cost {usd(estimate)} is above the ceiling {usd(ceiling)} per "
            "request; nothing was sent (X-Ctxbudget-Cost-Ceiling may only lower the server's)"
        )
        return refusal_as(CostCeilingExceeded, provider, message)
    return None
