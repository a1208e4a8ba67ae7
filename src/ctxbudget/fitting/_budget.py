"""Budget policy for fitting: the four component percentages and their allocation.

Percentages are clamped to 0..100 (NaN and junk become 0, with a warning); a sum above 100 is
scaled back proportionally; a sum below 90 is honoured with a warning. Allocation hands each
component ``floor(pool * pct / 100)``, then gives whatever a component leaves unused to the
components that still need more, in proportion to their percentages, deterministically.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..items import COMPONENTS, Component

__all__ = ["DEFAULT_PERCENTAGES", "BudgetSplit", "allocate", "parse_budget_spec"]

DEFAULT_PERCENTAGES: dict[Component, float] = {
    "system": 10.0,
    "query": 15.0,
    "documents": 50.0,
    "history": 25.0,
}


@dataclass(frozen=True, kw_only=True)
class BudgetSplit:
    """Normalized percentages per component, and the warnings normalizing produced."""

    percentages: Mapping[Component, float]
    warnings: tuple[str, ...] = ()
    # Chat system and developer prompts are kept whole unless the caller budgets ``system``.
    protect_system: bool = False

    @classmethod
    def from_mapping(
        cls, raw: Mapping[str, Any] | None, *, protect_system: bool = False, asks_question: bool = False
    ) -> BudgetSplit:
        """Normalize user percentages (missing components take their defaults). With
        ``protect_system``, the system component is kept whole unless ``raw`` budgets it; with
        ``asks_question`` (a chat body), a query at 0% keeps the question it asks (claimed before
        any share, never cut), and the warning says so."""
        raw = dict(raw or {})
        unknown = sorted(set(raw) - set(COMPONENTS))
        if unknown:
            raise ConfigError(
                f"unknown budget component(s) {', '.join(unknown)}; use {', '.join(COMPONENTS)}"
            )
        warnings: list[str] = []
        pcts: dict[Component, float] = {}
        for name in COMPONENTS:
            pcts[name] = _clamp(name, raw.get(name, DEFAULT_PERCENTAGES[name]), warnings)
        total = sum(pcts.values())
        if total > 100:
            pcts = {k: v * 100.0 / total for k, v in pcts.items()}
            warnings.append(f"budget percentages sum to {total:g}%; scaled back proportionally to 100%")
        elif total < 90:
            warnings.append(
                f"budget percentages sum to {total:g}% (< 90%): part of the window is left unused"
            )
        for name in COMPONENTS:
            if pcts[name] == 0 and name == "query" and asks_question:
                warnings.append(
                    "query budget is 0%: when the request is over budget, the query keeps only the "
                    "question it asks (never cut), and the rest of it is removed"
                )
            elif pcts[name] == 0:
                warnings.append(
                    f"{name} budget is 0%: when the request is over budget, every {name} item is removed"
                )
        return cls(
            percentages=pcts, warnings=tuple(warnings), protect_system=protect_system and "system" not in raw
        )


def _clamp(name: str, value: Any, warnings: list[str]) -> float:
    try:
        if isinstance(value, bool):  # True is 1 to float(), not a percentage
            raise TypeError
        number = float(value)
    except OverflowError:  # an int past float's range: beyond 0..100 all the same
        number = math.inf if value > 0 else -math.inf
    except (TypeError, ValueError):
        warnings.append(f"{name} budget {value!r} is not a number; using 0%")
        return 0.0
    if math.isnan(number):
        warnings.append(f"{name} budget is NaN; using 0%")
        return 0.0
    if number < 0 or number > 100:
        clamped = min(100.0, max(0.0, number))
        warnings.append(f"{name} budget {number:g}% is outside 0..100; clamped to {clamped:g}%")
        return clamped
    return number


_PERCENT = re.compile(r"\d+(\.\d+)?|\.\d+", re.ASCII)


def parse_budget_spec(spec: str) -> dict[str, float]:
    """``"system=10,query=15"`` -> ``{"system": 10.0, "query": 15.0}``; a malformed entry (not
    NAME=PERCENT, an unknown name, a value that is not a number from 0 to 100) is a ConfigError."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, sep, value = (x.strip() for x in part.partition("="))
        if not sep:
            raise ConfigError(f"budget entry {part!r} is not NAME=PERCENT (e.g. documents=50)")
        if name not in COMPONENTS:
            raise ConfigError(
                f"budget entry {part!r}: unknown component {name!r}; use {', '.join(COMPONENTS)}"
            )
        if name in out:
            raise ConfigError(f"budget entry {part!r}: {name} is given twice")
        if not _PERCENT.fullmatch(value.removeprefix("-")):
            raise ConfigError(f"budget entry {part!r}: {value!r} is not a number (a percent, 0 to 100)")
        number = float(value)
        if not 0 <= number <= 100:  # also refuses NaN
            raise ConfigError(f"budget entry {part!r}: {value} is not a percent from 0 to 100")
        out[name] = number
    return out


def _proportional(amount: int, weights: Mapping[Component, float]) -> dict[Component, int]:
    total = sum(weights.values())
    if amount <= 0 or total <= 0:
        return dict.fromkeys(weights, 0)
    shares = {k: math.floor(amount * w / total) for k, w in weights.items()}
    left = amount - sum(shares.values())
    for k in sorted(weights, key=lambda k: (-weights[k], COMPONENTS.index(k))):
        if left <= 0:
            break
        shares[k] += 1
        left -= 1
    return shares


def allocate(pool: int, split: BudgetSplit, needs: Mapping[Component, int]) -> dict[Component, int]:
    """Token budget per component: percentages first, then unused budget to those still short.

    The honoured pool is ``pool * sum(percentages) / 100`` (a sum below 100 leaves the rest
    unused, as asked). Rounding remainders and whatever a component does not need go to the
    components that need more and have a percentage above 0, in proportion to it, capped at
    their need; repeated until nothing is left to give or nobody is short.
    """
    pcts = split.percentages
    pool = max(0, pool)
    budgets: dict[Component, int] = {c: math.floor(pool * pcts[c] / 100.0) for c in COMPONENTS}
    spare = math.floor(pool * sum(pcts.values()) / 100.0 + 1e-9) - sum(budgets.values())
    for _ in range(len(COMPONENTS) + 1):
        for c in COMPONENTS:
            excess = max(0, budgets[c] - needs.get(c, 0))
            budgets[c] -= excess
            spare += excess
        short = {c: pcts[c] for c in COMPONENTS if pcts[c] > 0 and needs.get(c, 0) > budgets[c]}
        if spare <= 0 or not short:
            break
        for c, extra in _proportional(spare, short).items():
            budgets[c] += extra
        spare = 0
    return budgets


# Floors of a smaller pool's shares can give a component a few tokens more than the ceiling of a
# larger one: a token a component, and one more, covers them.
_CEILING_SLACK = len(COMPONENTS) + 1


def budget_ceiling(
    pool: int, split: BudgetSplit, at_least: Mapping[Component, int], component: Component
) -> int:
    """The most :func:`allocate` can give ``component`` from ``pool`` or any smaller pool, whatever
    the needs, when each other component needs at least ``at_least`` of it: the budgets sum to at
    most the honoured pool, and each other component keeps at least the smaller of its need and
    its percentage share (a budget starts at the share and is cut only to the need).

    A component whose need is above this is short in every round of the allocation and gives
    nothing back, whatever its need: its exact need does not change any budget, so a lower bound
    over the ceiling stands in for it (the fit then counts nothing of it to allocate)."""
    pcts = split.percentages
    pool = max(0, pool)
    honoured = math.floor(pool * sum(pcts.values()) / 100.0 + 1e-9)
    kept = sum(
        min(max(0, at_least.get(c, 0)), math.floor(pool * pcts[c] / 100.0))
        for c in COMPONENTS
        if c != component
    )
    return max(0, honoured - kept) + _CEILING_SLACK
