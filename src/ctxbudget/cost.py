"""Pricing one turn from catalog prices: cache writes (5 min, 1 h), cache reads, uncached input, output.

Where a provider publishes no cache price, the turn is priced without a discount or a premium we
cannot source: an unpublished cache read costs the input price, an unpublished 5-minute write the
input price, and an unpublished 1-hour write the 5-minute one. A model with no prices at all has
no cost: callers report ``cost_usd: null`` and refuse a turn that a ceiling must check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .catalog.values import Prices
from .errors import ConfigError
from .formats import BODY_OUTPUT_FIELDS

__all__ = [
    "CacheFigures",
    "TurnCost",
    "check_amount",
    "price_cached",
    "price_turn",
    "price_unknown_note",
    "replies_asked",
    "reply_tokens_asked",
]


def check_amount(name: str, value: object, *, whole: bool = False) -> None:
    """An option that is an amount (a ceiling in USD, seconds, tokens): a finite number of at
    least 0 (a whole number when ``whole``) or None, else a ConfigError naming it."""
    if value is None:
        return
    kinds = int if whole else int | float
    if isinstance(value, bool) or not isinstance(value, kinds) or not 0 <= value < MAX_AMOUNT:
        what = "a whole number" if whole else "a number"
        shown = f"{value!r:.40}" + ("..." if len(repr(value)) > 40 else "")
        raise ConfigError(f"{name} must be {what} of at least 0 and below 1e18, got {shown}")


# Above any real amount, and below float's range (an int of 400 digits passed, then overflowed
# float() as a bare OverflowError).
MAX_AMOUNT = 10**18


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
    """The cost of a turn with these token counts at ``prices`` (its long-context prices when
    its input is over their threshold: every token of the request at those)."""
    prices = prices.for_input(uncached_tokens + write_5m_tokens + write_1h_tokens + read_tokens)
    # a write is billed at least as the input it caches: a catalog's write price below the input
    # price is a storage charge alone (OpenRouter's Gemini 2.5 Flash: $0.0833 of storage for five
    # minutes beside $0.30 of input), and an automatic cache's predicted writes priced at it put a
    # first turn's estimate at a third of what was billed, under the ceiling that holds to it
    write_5m = prices.input if prices.cache_write_5m is None else max(prices.cache_write_5m, prices.input)
    write_1h = write_5m if prices.cache_write_1h is None else max(prices.cache_write_1h, prices.input)
    read = prices.input if prices.cache_read is None else prices.cache_read
    return TurnCost(
        uncached_input_usd=uncached_tokens * prices.input * PER_TOKEN,
        cache_write_5m_usd=write_5m_tokens * write_5m * PER_TOKEN,
        cache_write_1h_usd=write_1h_tokens * write_1h * PER_TOKEN,
        cache_read_usd=read_tokens * read * PER_TOKEN,
        output_usd=output_tokens * prices.output * PER_TOKEN,
    )


class CacheFigures(Protocol):
    """A turn's input as the cache bills it: a prediction, or the report of one."""

    @property
    def uncached_tokens(self) -> int: ...

    @property
    def write_5m_tokens(self) -> int: ...

    @property
    def write_1h_tokens(self) -> int: ...

    @property
    def read_tokens(self) -> int: ...


def price_cached(prices: Prices | None, figures: CacheFigures, output_tokens: int) -> TurnCost | None:
    """The turn priced from its cache figures and ``output_tokens`` (None without prices)."""
    if prices is None:
        return None
    return price_turn(
        prices,
        uncached_tokens=figures.uncached_tokens,
        write_5m_tokens=figures.write_5m_tokens,
        write_1h_tokens=figures.write_1h_tokens,
        read_tokens=figures.read_tokens,
        output_tokens=output_tokens,
    )


def price_unknown_note(model_id: str) -> str:
    """Why a turn has no cost figure."""
    return f"no published price for {model_id!r} in the catalog: cost_usd is null"


def replies_asked(body: Mapping[str, Any]) -> int:
    """How many replies a body asks for (OpenAI's ``n``; each one is billed): a whole number above
    1, written ``10`` or ``10.0``; else 1 (``10.0`` was priced as one reply)."""
    n = body.get("n")
    if isinstance(n, float) and n.is_integer() and n <= 1_000_000:
        n = int(n)
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 1 else 1


def reply_tokens_asked(body: Mapping[str, Any]) -> int:
    """The reply size a body asks for (0 when it does not say): the largest of the fields it gives
    (``max_tokens`` beside ``max_completion_tokens``: a server may honour either), each a positive
    whole number (see :func:`ctxbudget.fitting.body_reserve`, which also refuses a bad one)."""
    values = [body.get(name) for name in BODY_OUTPUT_FIELDS]
    return max((v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0), default=0)
