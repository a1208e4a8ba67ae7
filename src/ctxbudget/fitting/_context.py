"""The context of one fit: the room it has (:class:`Window`: the window less the reply) and what
it measured (:class:`FitContext`: the parsed items, their token costs, the budget split), with the
arithmetic every later step reads from them. Built once per fit, before anything is cut.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..catalog.values import WindowResolution
from ..errors import ConfigError, ReplyLeavesNothing
from ..formats import resolve_format
from ..formats.responses_items import opens_with_stored_answers
from ..formats.tool_prompt import with_tool_prompt
from ..items import Component, Item, ItemKey, Rendering, RequestFormat
from ..lazy_measure import LazyMeasurement
from ..tokens.counter import TokenCounter
from ..trim.history import newest_unit
from ..trim.messages import asks_a_question, question_of, question_spans
from ..trim.passages import PassageScorer
from ..trim.text import Span
from ._budget import BudgetSplit
from ._count import estimated_parts
from ._options import FitOptions, FitSetup, above_output_cap, within_output_cap

__all__ = ["DEFAULT_RESERVE_OUTPUT_TOKENS", "FitContext", "Window", "open_context"]

DEFAULT_RESERVE_OUTPUT_TOKENS = 4096


@dataclass(frozen=True)
class Window:
    """The room of one fit: the resolved window, the tokens kept for the reply, and the input
    tokens that may be sent (the window less the reply, never above an input cap)."""

    resolution: WindowResolution
    reserve_output_tokens: int
    available_tokens: int

    @classmethod
    def of(cls, resolution: WindowResolution, reserve_output_tokens: int | None, source: str = "") -> Window:
        """The room left by ``reserve_output_tokens`` (None: the default reserve), given by
        ``source`` (the option, the body's field; "" for the default), which errors name."""
        reserve = within_output_cap(resolution, _reserve(resolution, reserve_output_tokens), source)
        return cls(resolution, reserve, _available(resolution, reserve, source))


def _reserve(resolution: WindowResolution, reserve_output_tokens: int | None) -> int:
    """The reply reserve asked for, else min(4,096, the model's output cap, a quarter of the
    window): a 4,096-token model keeps three quarters of its window for the input."""
    if reserve_output_tokens is not None:
        if reserve_output_tokens < 0:
            raise ConfigError(f"reserve_output_tokens must be >= 0, got {reserve_output_tokens}")
        return reserve_output_tokens
    cap = resolution.spec.max_output_tokens if resolution.spec else None
    quarter = resolution.context_window // 4
    return min(DEFAULT_RESERVE_OUTPUT_TOKENS, cap or DEFAULT_RESERVE_OUTPUT_TOKENS, quarter)


def _available(resolution: WindowResolution, reserve: int, source: str) -> int:
    """Input tokens that may be sent: the window less the reply, and never above an input cap."""
    available = resolution.context_window - reserve
    if available <= 0:
        budgeted = resolution.rule == "explicit"
        raise ReplyLeavesNothing(reserve, source, resolution.context_window, budgeted)
    if resolution.max_input_tokens is not None:
        available = min(available, resolution.max_input_tokens)
    return available


@dataclass
class FitContext:
    """One fit's request as measured, its options and room, and the warnings it gathers."""

    fmt: RequestFormat
    counter: TokenCounter
    items: tuple[Item, ...]
    measured: LazyMeasurement
    split: BudgetSplit
    options: FitOptions
    window: Window
    passage_scorer: PassageScorer | None = None
    warnings: list[str] = field(default_factory=list)
    estimated: tuple[str, ...] = ()
    # The history's first unit is kept before any other (a Responses body's outputs answering the
    # stored response's calls: the API refuses a stored call left unanswered).
    first_unit_required: bool = False

    @cached_property
    def available_raw(self) -> int:
        """The available tokens in raw encoding tokens (what counts are compared with)."""
        return self.counter.unscale(self.window.available_tokens)

    def cost(self, item: Item) -> int:
        """The item's raw tokens in the rendered request (its framing included), counted exactly
        (now, if they were not yet)."""
        return self.measured.cost(item.key)

    def at_least(self, item: Item) -> int:
        """A lower bound of :meth:`cost` that tokenizes nothing: for decisions that only need to
        know that an item cannot fit."""
        return self.measured.at_least(item.key)

    def framing(self, item: Item) -> int:
        """The item's raw tokens that are not its text (roles, markers, tool calls, images)."""
        return self.measured.framing(item.key)

    def span(self, key: ItemKey) -> Span | None:
        """Where the item's text sits in what was encoded (None: it has no text)."""
        return self.measured.span(key)

    def protected(self, item: Item) -> bool:
        """System prompts are kept whole unless the caller budgets ``system``."""
        return item.component == "system" and self.split.protect_system

    def trimmable(self, component: Component) -> list[Item]:
        """The component's items that are not :meth:`protected` (a new list)."""
        return [] if component == "system" and self.split.protect_system else self.of(component)

    @cached_property
    def question(self) -> str:
        """What the latest user turn asks: relevance for cutting other messages (found once a
        fit, not once for every message cut)."""
        return " ".join(question_of(i.text) for i in self.of("query"))

    def always_kept(self) -> list[Item]:
        """Items that are never dropped: the query and the newest history unit (a message, or a
        tool call with its results)."""
        history = self.of("history")
        return self.of("query") + (newest_unit(history) if history else [])

    def untrimmable(self) -> dict[str, int]:
        """Raw tokens that no trimming can remove, by part: framing, tools, protected prompts,
        and what is not text in the items that are always kept (roles, tool calls, images)."""
        parts = dict(self.measured.fixed_parts())
        for item in self._by_component.get("system", ()):  # only system prompts are protected
            if self.protected(item) and self.cost(item):
                parts[f"{item.component} {item.path}"] = self.cost(item)
        for item in self.always_kept():
            if self.framing(item):
                parts[f"{item.component} {item.path} (apart from its text)"] = self.framing(item)
        return parts

    def question_tokens(self, item: Item) -> int:
        """Tokens of the question a chat query asks: kept before any other text is."""
        span = self.span(item.key)
        if item.component != "query" or self.fmt.name == "question" or span is None:
            return 0
        count = span.char_counter(item.text)
        return sum(count(a, b) for a, b in question_spans(item.text))

    def protected_question(self) -> dict[str, int]:
        """The raw tokens of each question a chat query asks (a ``?`` or a label), by part: what
        no cut may shorten (the seed's question format truncates its question instead)."""
        return {
            f"{item.component} {item.path} (its question)": tokens
            for item in self.of("query")
            if (tokens := self.question_tokens(item)) and asks_a_question(item.text)
        }

    def first_claim(self) -> int:
        """Tokens the query's question takes from the pool before any component is budgeted."""
        return sum(self.question_tokens(i) for i in self.of("query"))

    def of(self, component: Component) -> list[Item]:
        """The items of ``component``, in request order (a new list: callers may change it)."""
        return list(self._by_component.get(component, ()))

    def rendered(self, body: Mapping[str, Any]) -> Rendering:
        """A fitted ``body`` as the provider reads it: its rendering, with the tool-use system
        prompt the provider adds to it (as :func:`open_context` measured the request)."""
        model_id = self.window.resolution.catalog_id or self.options.model
        return with_tool_prompt(
            self.fmt.render(body, trusted=True), body, model_id, self.counter.safety_factor
        )

    @cached_property
    def _by_component(self) -> dict[Component, list[Item]]:
        """The items by component, sorted once (a fit asks for them about 20 times: each pass
        read every item of a 2,000-message history)."""
        grouped: dict[Component, list[Item]] = {}
        for item in self.items:
            grouped.setdefault(item.component, []).append(item)
        return grouped


def open_context(request: Mapping[str, Any], setup: FitSetup) -> FitContext:
    """Resolve the room, parse and render the request, measure it once, and split the budget."""
    options = setup.options
    fmt = resolve_format(request, options.input_format, options.model)
    counter = setup.catalog.counter_for(options.model, options.safety_factor)
    items, rendering = fmt.parse_and_render(request)  # a malformed body first, then the room
    window = Window.of(setup.resolution, options.reserve_output_tokens, options.reserve_source)
    model_id = setup.resolution.catalog_id or options.model  # the catalog's id names the family
    rendering = with_tool_prompt(rendering, request, model_id, counter.safety_factor)
    measured = LazyMeasurement(rendering, counter.encoding)
    # As chat users expect (LangChain's include_system), a chat body's system and developer
    # messages are not trimmed unless budgeted; the seed's question format budgets its role.
    chat = fmt.name != "question"
    split = BudgetSplit.from_mapping(options.budget_mapping(), protect_system=chat, asks_question=chat)
    ctx = FitContext(
        fmt,
        counter,
        items,
        measured,
        split,
        options,
        window,
        setup.passage_scorer,
        estimated=estimated_parts(items, rendering),
        first_unit_required=fmt.name == "responses" and opens_with_stored_answers(request),
    )
    if setup.resolution.warning:
        ctx.warnings.append(setup.resolution.warning)
    asked = options.reserve_output_tokens or 0  # as the body asked it (the window's is held to the cap)
    above = above_output_cap(setup.resolution, asked, options.reserve_source)
    if above:
        ctx.warnings.append(above)
    return ctx
