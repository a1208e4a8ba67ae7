"""The decision report of a fit: frozen values, their JSON-ready rendering (``to_dict``), and
building one from a fit's context and outcome. A report is built once and never changed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from ..items import COMPONENTS, Decision, HistoryCut, Item, Plan
from ..trim.text import TextSpan

if TYPE_CHECKING:  # the report is built from them; they do not depend on it
    from ._context import FitContext
    from ._verify import Fitted

__all__ = ["FitReport", "ItemReport", "ReadOnlyCounts", "build_report"]

_new = object.__new__


class ReadOnlyCounts(Mapping[str, int]):
    """Token counts by name that no caller can change (the memo hands one report to every later
    fit of the same request). Compares equal to the same counts in a dict; copies and pickles."""

    __slots__ = ("_counts",)

    def __init__(self, counts: Mapping[str, int]) -> None:
        self._counts = dict(counts)

    def __getitem__(self, name: str) -> int:
        return self._counts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._counts)

    def __len__(self) -> int:
        return len(self._counts)

    def __repr__(self) -> str:
        return repr(self._counts)

    def __reduce__(self) -> tuple[type[ReadOnlyCounts], tuple[dict[str, int]]]:
        return type(self), (self._counts,)


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
    # False: the item was never tokenized (its bound alone showed it cannot fit) and
    # ``tokens_before`` is that lower bound.
    counted: bool = True

    @classmethod
    def of(
        cls,
        component: str,
        index: int,
        path: str,
        action: str,
        tokens_before: int,
        tokens_after: int,
        reason: str,
        counted: bool,
    ) -> ItemReport:
        """The report line as ``ItemReport(...)`` makes it, without the keyword ``__init__`` that
        sets each field of a frozen dataclass through ``object.__setattr__``: 1.2 against 3.4 us,
        a line an item (2,000 for a long history, two thirds of its report's time). The suite
        checks it sets every field the dataclass has."""
        made = _new(cls)
        made.__dict__.update(
            component=component,
            index=index,
            path=path,
            action=action,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            reason=reason,
            counted=counted,
        )
        return made


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
    # Items never tokenized because their lower bound showed they cannot fit (``counted`` False
    # in ``items``); when above 0, ``tokens_before`` and ``tokens_saved`` are lower bounds.
    uncounted_items: int = 0
    # The history cut in steps (``low_water``): where its kept run begins, for the next turn's
    # ``previous_cut``; None when it was not cut that way.
    history_cut: HistoryCut | None = None

    def __post_init__(self) -> None:
        # Every other field is immutable already (frozen values, tuples, strings, numbers).
        for name in ("overhead_parts", "budgets"):
            object.__setattr__(self, name, ReadOnlyCounts(getattr(self, name)))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with snake_case keys (lists, not tuples)."""
        # Built field by field: dataclasses.asdict deep-copies every value and was most of the
        # cost of a small fit.
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["components_truncated"] = list(self.components_truncated)
        out["warnings"] = list(self.warnings)
        out["resolution"] = list(self.resolution)
        out["estimated_parts"] = list(self.estimated_parts)
        # each line's fields read from its attributes by name (``fields`` a line was most of a
        # 2,000-line report's 2.4 ms)
        out["items"] = [{n: d[n] for n in _line_fields(i)} for i, d in ((i, vars(i)) for i in self.items)]
        out["budgets"] = dict(self.budgets)
        out["overhead_parts"] = dict(self.overhead_parts)
        out["history_cut"] = self.history_cut.to_dict() if self.history_cut else None
        return out


_LINE_FIELDS = tuple(f.name for f in fields(ItemReport))


def _line_fields(line: ItemReport) -> tuple[str, ...]:
    """The field names of a report line (a subclass's own too)."""
    return _LINE_FIELDS if type(line) is ItemReport else tuple(f.name for f in fields(line))


def build_report(ctx: FitContext, fitted: Fitted) -> FitReport:
    """The report of one fit: its room, its counts before and after (scaled as reported), its
    budgets, every item's decision and the warnings gathered."""
    counter = ctx.counter
    resolution = ctx.window.resolution
    items = _item_reports(ctx, fitted.plan)
    touched = {i.component for i in items if i.action != "kept"}
    before = counter.scale(ctx.measured.reported_total())
    after = counter.scale(fitted.tokens_raw)
    fixed = ctx.measured.fixed_parts()
    return FitReport(
        model=ctx.options.model,
        format=ctx.fmt.name,
        encoding=counter.encoding_name,
        exact=counter.exact and not ctx.estimated,
        estimated_parts=ctx.estimated,
        safety_factor=counter.safety_factor,
        context_window=resolution.context_window,
        window_rule=resolution.rule,
        catalog_id=resolution.catalog_id,
        resolution=resolution.path,
        max_input_tokens=resolution.max_input_tokens,
        reserve_output_tokens=ctx.window.reserve_output_tokens,
        available_tokens=ctx.window.available_tokens,
        overhead_tokens=counter.scale(sum(fixed.values())),
        overhead_parts={k: counter.scale(v) for k, v in sorted(fixed.items())},
        budgets={c: counter.scale(fitted.budgets[c]) for c in fitted.budgets},
        tokens_before=before,
        tokens_after=after,
        tokens_saved=before - after,
        passed_through=fitted.passed_through,
        components_truncated=tuple(c for c in COMPONENTS if c in touched),
        warnings=tuple(dict.fromkeys(ctx.warnings)),
        items=items,
        uncounted_items=sum(not i.counted for i in items),
        history_cut=fitted.plan.history_cut,
    )


def _item_reports(ctx: FitContext, plan: Plan) -> tuple[ItemReport, ...]:
    """Each item's decision with its tokens before and after (scaled as reported)."""
    reports = []
    counter = ctx.counter
    # a line per item of a long history: names bound once, outside the loop (an exact count is
    # reported unscaled: no call for it)
    scale = None if counter.exact or counter.safety_factor == 1.0 else counter.scale
    reported = ctx.measured.reported
    decisions, kept, line, gone = plan.decisions, _KEPT, ItemReport.of, _GONE
    for item in ctx.items:
        key = item.key
        decision = decisions.get(key) or kept
        # first: it may count the item; a dropped item costs nothing after (most of a long history:
        # read here, without the call)
        after = (
            0 if decision.action in gone and decision.tokens is None else tokens_after(ctx, item, decision)
        )
        before, counted = reported(key)
        if scale is not None:
            before, after = scale(before), scale(after)
        reports.append(
            line(
                item.component,
                item.index,
                item.path,
                decision.action,
                before,
                after,
                decision.reason,
                counted,
            )
        )
    return tuple(reports)


_GONE = frozenset({"dropped", "summarized"})
_KEPT = Decision("kept", "fits")


def tokens_after(ctx: FitContext, item: Item, decision: Decision | None) -> int:
    """The item's raw tokens after its decision (None: kept): as counted by the cut, read from the
    measured prefix of a question-format text, or counted again for a cut chat message; 0 for one
    dropped or summarized."""
    decision = decision or _KEPT
    if decision.tokens is not None:
        return decision.tokens
    if decision.action == "truncated" and decision.text is not None:
        span = ctx.span(item.key)
        if ctx.fmt.name == "question" and isinstance(span, TextSpan):  # a prefix: read its count
            content = span.prefix_tokens(len(decision.text.encode("utf-8")))
        else:  # a cut chat message is not a prefix: count it
            content = sum(ctx.counter.raw(p) for p in decision.pieces or (decision.text,))
        return ctx.framing(item) + content
    return ctx.measured.cost(item.key) if decision.action == "kept" else 0
