"""The decision report of a fit: frozen values and their JSON-ready rendering (``to_dict``).
A report is built once and never changed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["FitReport", "ItemReport"]


@dataclass(frozen=True, kw_only=True)
class ItemReport:
    """What happened to one item and why."""

    component: str
    index: int
    path: str
    action: str
    tokens_before: int
    tokens_after: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class FitReport:
    """Every decision of one fit; ``exact`` is False whenever any count is an estimate (a tokenizer
    estimate, or an image or document counted by a stated rule: see ``estimated_parts``)."""

    model: str
    format: str
    encoding: str
    exact: bool
    safety_factor: float
    context_window: int
    window_rule: str
    catalog_id: str | None
    resolution: tuple[str, ...]
    max_input_tokens: int | None
    reserve_output_tokens: int
    available_tokens: int
    overhead_tokens: int
    overhead_parts: Mapping[str, int]
    budgets: Mapping[str, int]
    tokens_before: int
    tokens_after: int
    tokens_saved: int
    passed_through: bool
    components_truncated: tuple[str, ...]
    warnings: tuple[str, ...]
    items: tuple[ItemReport, ...]
    # Parts counted by a stated estimate (images, documents), each with its JSON path and rule.
    estimated_parts: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with snake_case keys (lists, not tuples)."""
        # Built field by field: dataclasses.asdict deep-copies every value and was most of the
        # cost of a small fit.
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["components_truncated"] = list(self.components_truncated)
        out["warnings"] = list(self.warnings)
        out["resolution"] = list(self.resolution)
        out["estimated_parts"] = list(self.estimated_parts)
        out["items"] = [{f.name: getattr(i, f.name) for f in fields(i)} for i in self.items]
        out["budgets"] = dict(self.budgets)
        out["overhead_parts"] = dict(self.overhead_parts)
        return out
