"""Pricing a turn: each part at its own rate, missing cache rates falling back as documented."""

from __future__ import annotations

import pytest

from ctxbudget.catalog.values import Prices
from ctxbudget.cost import price_turn
from ctxbudget.errors import CostCeilingExceeded, usd

SONNET = Prices(input=3.0, output=15.0, cache_write_5m=3.75, cache_write_1h=6.0, cache_read=0.30)


def test_each_part_is_priced_at_its_rate() -> None:
    cost = price_turn(
        SONNET,
        uncached_tokens=1_000,
        write_5m_tokens=2_000,
        write_1h_tokens=15_000,
        read_tokens=20_000,
        output_tokens=1_500,
    )
    # by hand: 1,000 x $3 + 2,000 x $3.75 + 15,000 x $6 + 20,000 x $0.30 + 1,500 x $15, per million
    assert cost.to_dict() == {
        "uncached_input_usd": 0.003,
        "cache_write_5m_usd": 0.0075,
        "cache_write_1h_usd": 0.09,
        "cache_read_usd": 0.006,
        "output_usd": 0.0225,
        "total_usd": 0.129,
    }


def test_missing_cache_rates_fall_back_to_the_input_rate_and_the_5_minute_write() -> None:
    plain = Prices(input=2.0, output=8.0, cache_write_5m=None, cache_write_1h=None, cache_read=None)
    cost = price_turn(
        plain,
        uncached_tokens=0,
        write_5m_tokens=1_000_000,
        write_1h_tokens=1_000_000,
        read_tokens=1_000_000,
        output_tokens=0,
    )
    assert (cost.cache_write_5m_usd, cost.cache_write_1h_usd, cost.cache_read_usd) == pytest.approx(
        (2.0, 2.0, 2.0)
    )


def test_a_turn_with_no_tokens_costs_nothing() -> None:
    zero = price_turn(
        SONNET, uncached_tokens=0, write_5m_tokens=0, write_1h_tokens=0, read_tokens=0, output_tokens=0
    )
    assert zero.total_usd == 0.0


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (0.133, "$0.133"),
        (0.01, "$0.01"),
        (12.5, "$12.50"),
        (0.45, "$0.45"),
        (0.0289, "$0.0289"),
        (0.0099, "$0.0099"),
        (0.001, "$0.001"),  # it was "$0.00100": trailing zeros read as digits
        (0.00123, "$0.00123"),
        (0.0099999, "$0.01"),
        (0.0, "$0.00"),
        (1e-6, "$0.000001"),
        (2.5e-9, "$2.5e-09"),
        (1e-300, "$1e-300"),
    ],
)
def test_a_small_amount_in_a_message_keeps_its_first_digits(amount: float, shown: str) -> None:
    assert usd(amount) == shown
    message = str(CostCeilingExceeded(estimate_usd=amount * 2, ceiling_usd=amount))
    assert f"ceiling {shown} per turn" in message


def test_a_request_over_the_long_context_threshold_is_priced_at_its_prices_in_full() -> None:
    from ctxbudget.catalog.catalog import bundled_catalog
    from ctxbudget.catalog.values import LongContextPrices

    over = Prices(input=6.0, output=22.5, cache_write_5m=7.5, cache_write_1h=12.0, cache_read=0.6)
    long = LongContextPrices(above_tokens=200_000, prices=over)
    tiered = Prices(
        input=3.0, output=15.0, cache_write_5m=3.75, cache_write_1h=6.0, cache_read=0.3, long_context=long
    )

    def cost(uncached: int, read: int = 0) -> float:
        turn = price_turn(
            tiered,
            uncached_tokens=uncached,
            write_5m_tokens=0,
            write_1h_tokens=0,
            read_tokens=read,
            output_tokens=1_000,
        )
        return turn.total_usd

    assert cost(200_000) == pytest.approx(200_000 * 3e-6 + 1_000 * 15e-6)  # at the threshold: base
    # over it (reads count toward the size), every token at the long-context prices
    assert cost(150_000, read=60_000) == pytest.approx(150_000 * 6e-6 + 60_000 * 0.6e-6 + 1_000 * 22.5e-6)
    sonnet = bundled_catalog().get_model("claude-sonnet-4-5").prices
    assert (
        sonnet is not None and sonnet.long_context is not None and sonnet.long_context.above_tokens == 200_000
    )
