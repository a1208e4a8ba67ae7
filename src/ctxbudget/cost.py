"""Pricing one turn from catalog prices: cache writes (5 min, 1 h), cache reads, uncached input, output."""

from __future__ import annotations

from dataclasses import dataclass

from .catalog.values import Prices

__all__ = ["TurnCost", "price_turn"]

PER_TOKEN = 1e-6  # catalog prices are USD per million tokens


@dataclass(frozen=True, kw_only=True)
class TurnCost:
    """USD per part of the turn and in total."""

    uncached_input_usd: float
    cache_write_5m_usd: float
    cache_write_1h_usd: float
    cache_read_usd: float
    output_usd: float

    @property
    def total_usd(self) -> float:
        """The whole turn."""
        return (
            self.uncached_input_usd
            + self.cache_write_5m_usd
            + self.cache_write_1h_usd
            + self.cache_read_usd
            + self.output_usd
        )

    def to_dict(self) -> dict[str, float]:
        """Rounded to 1e-6 USD, with the total."""
        parts = {
            "uncached_input_usd": self.uncached_input_usd,
            "cache_write_5m_usd": self.cache_write_5m_usd,
            "cache_write_1h_usd": self.cache_write_1h_usd,
            "cache_read_usd": self.cache_read_usd,
            "output_usd": self.output_usd,
            "total_usd": self.total_usd,
        }
        return {k: round(v, 6) for k, v in parts.items()}


def price_turn(
    prices: Prices,
    *,
    uncached_tokens: int,
    write_5m_tokens: int,
    write_1h_tokens: int,
    read_tokens: int,
    output_tokens: int,
) -> TurnCost:
    """The cost of a turn with these token counts at ``prices``."""
    return TurnCost(
        uncached_input_usd=uncached_tokens * prices.input * PER_TOKEN,
        cache_write_5m_usd=write_5m_tokens * prices.cache_write_5m * PER_TOKEN,
        cache_write_1h_usd=write_1h_tokens * prices.cache_write_1h * PER_TOKEN,
        cache_read_usd=read_tokens * prices.cache_read * PER_TOKEN,
        output_usd=output_tokens * prices.output * PER_TOKEN,
    )
