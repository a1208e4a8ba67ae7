"""Fitting one request into a model's window: measure, allocate, trim, verify. Pure: no I/O.

What is measured is what will be sent: the whole rendered request, including parts that are
counted but never trimmed. A request that fits passes through unchanged. Otherwise the four
components get budgets from their percentages (unused budget flows to those still short), each
is trimmed by its strategy, and the result is verified with one exact count of what will be
sent; if boundary effects push it over, the pool shrinks by the excess and the plan is redone.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from ..catalog.catalog import Catalog, UnknownModel, bundled_catalog
from ..catalog.values import WindowResolution
from ..errors import BudgetExceeded, ConfigError, InvalidRequestError
from ..formats import detect_format, get_format
from ..formats.jsonvalue import check_json_value
from ..items import (
    COMPONENTS,
    PIECE_SEP,
    PLACEHOLDER_TEMPLATE,
    Component,
    Cut,
    Decision,
    Item,
    ItemKey,
    Plan,
    Rendering,
    RequestFormat,
)
from ..measure import Measurement, measure, measure_total
from ..tokens.counter import TokenCounter, clear_count_cache
from ..tokens.registry import registry_version
from ..trim.documents import OutputOrder, ScoreOrder, select_documents
from ..trim.extract import clear_sentence_cache
from ..trim.history import select_history, units_of
from ..trim.messages import cut_message, question_of, question_spans
from ..trim.passages import PassageScorer
from ..trim.shares import proportional_shares
from ..trim.split import split_documents
from ..trim.text import PiecesSpan, TextSpan, truncate_text
from ..volatile import find_volatile
from ._budget import BudgetSplit, allocate
from ._memo import FitMemo, freeze, thaw
from ._report import FitReport, ItemReport

__all__ = ["BODY_OUTPUT_FIELDS", "FitResult", "clear_caches", "count", "fit"]

OnOverflow = Literal["error", "empty"]
MAX_VERIFY_ROUNDS = 6
DEFAULT_RESERVE_OUTPUT_TOKENS = 4096


@dataclass(frozen=True)
class FitResult:
    """The fitted request (same format as given) and the report of every decision."""

    request: dict[str, Any]
    report: FitReport


@dataclass
class _Context:
    fmt: RequestFormat
    counter: TokenCounter
    items: tuple[Item, ...]
    measured: Measurement
    split: BudgetSplit
    score_order: ScoreOrder
    document_order: OutputOrder
    split_documents: bool = False
    passage_scorer: PassageScorer | None = None
    warnings: list[str] = field(default_factory=list)
    estimated: tuple[str, ...] = ()

    def cost(self, item: Item) -> int:
        return self.measured.by_owner.get(item.key, 0)

    def framing(self, item: Item) -> int:
        span = self.measured.spans.get(item.key)
        return self.cost(item) - (span.tokens if span else 0)

    def protected(self, item: Item) -> bool:
        """System prompts are kept whole unless the caller budgets ``system``."""
        return item.component == "system" and self.split.protect_system

    @cached_property
    def question(self) -> str:
        """What the latest user turn asks: relevance for cutting other messages (found once a
        fit, not once for every message cut)."""
        return " ".join(question_of(i.text) for i in self.of("query"))

    def always_kept(self) -> list[Item]:
        """Items that are never dropped: the query and the newest history unit (a message, or a
        tool call with its results)."""
        history = self.of("history")
        return self.of("query") + (units_of(history)[-1] if history else [])

    def untrimmable(self) -> dict[str, int]:
        """Raw tokens that no trimming can remove, by part: framing, tools, protected prompts,
        and what is not text in the items that are always kept (roles, tool calls, images)."""
        parts = dict(self.measured.fixed_parts())
        for item in self.items:
            if self.protected(item) and self.cost(item):
                parts[f"{item.component} {item.path}"] = self.cost(item)
        for item in self.always_kept():
            if self.framing(item):
                parts[f"{item.component} {item.path} (not text)"] = self.framing(item)
        return parts

    def question_tokens(self, item: Item) -> int:
        """Tokens of the question a chat query asks: kept before any other text is."""
        span = self.measured.spans.get(item.key)
        if item.component != "query" or self.fmt.name == "question" or span is None:
            return 0
        count = span.char_counter(item.text)
        return sum(count(a, b) for a, b in question_spans(item.text))

    def first_claim(self) -> int:
        """Tokens the query's question takes from the pool before any component is budgeted."""
        return sum(self.question_tokens(i) for i in self.of("query"))

    def of(self, component: Component) -> list[Item]:
        return [i for i in self.items if i.component == component]


BODY_OUTPUT_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def _body_reserve(request: Mapping[str, Any]) -> int | None:
    """The reply size the body asks for (Anthropic ``max_tokens``, OpenAI ``max_completion_tokens``
    or ``max_tokens``, Responses ``max_output_tokens``): the default output reserve."""
    for name in BODY_OUTPUT_FIELDS:
        value = request.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidRequestError(f"must be a whole number of tokens >= 0, got {value!r}", f"$.{name}")
        return value
    return None


def _reserve(resolution: WindowResolution, reserve_output_tokens: int | None) -> int:
    if reserve_output_tokens is not None:
        if reserve_output_tokens < 0:
            raise ConfigError(f"reserve_output_tokens must be >= 0, got {reserve_output_tokens}")
        return reserve_output_tokens
    cap = resolution.spec.max_output_tokens if resolution.spec else None
    return min(DEFAULT_RESERVE_OUTPUT_TOKENS, cap or DEFAULT_RESERVE_OUTPUT_TOKENS)


def _available(resolution: WindowResolution, reserve: int) -> int:
    """Input tokens that may be sent: the window less the reply, and never above an input cap."""
    available = resolution.context_window - reserve
    if available <= 0:
        raise ConfigError(
            f"reserve_output_tokens ({reserve:,}) leaves nothing of the {resolution.context_window:,}-token window"
        )
    if resolution.max_input_tokens is not None:
        available = min(available, resolution.max_input_tokens)
    return available


def _truncate(ctx: _Context, item: Item, budget: int) -> Cut:
    """The item's text cut so the whole item costs at most ``budget`` (framing included). The
    seed's question format cuts at a sentence boundary from the head; chat messages keep their
    question and the passages that match it, each of their texts in its place
    (:mod:`ctxbudget.trim.messages`)."""
    span = ctx.measured.spans.get(item.key)
    if span is None:
        return Cut(item.text, (), ctx.cost(item))
    if isinstance(span, TextSpan) and ctx.fmt.name == "question":
        text, tokens = truncate_text(item.text, span, budget - ctx.framing(item))
        return Cut(text, (), ctx.framing(item) + tokens)
    bounds = span.bounds if isinstance(span, PiecesSpan) else ()
    pieces = cut_message(
        item.text,
        span,
        budget - ctx.framing(item),
        ctx.question,
        count_text=ctx.counter.raw,
        keep_question=item.component == "query",
        scorer=ctx.passage_scorer,
        bounds=bounds,
    )
    text = PIECE_SEP.join(pieces)
    if text == item.text:
        return Cut(text, (), ctx.cost(item))
    tokens = ctx.framing(item) + sum(ctx.counter.raw(p) for p in pieces)
    return Cut(text, pieces if bounds else (), tokens)


def _shared_texts(
    ctx: _Context, component: Component, budget: int, droppable: bool
) -> dict[ItemKey, Decision]:
    items = ctx.of(component)
    shares = proportional_shares(budget, [ctx.cost(i) for i in items])
    decisions: dict[ItemKey, Decision] = {}
    for item, share in zip(items, shares, strict=True):
        if share >= ctx.cost(item):
            decisions[item.key] = Decision("kept", f"fits its {component} share")
            continue
        cut = _truncate(ctx, item, share)
        if not cut.text.strip() and droppable:
            decisions[item.key] = Decision("dropped", f"no room in the {component} share ({share} tokens)")
        else:
            reason = f"cut to its {component} share of {share} tokens"
            decisions[item.key] = Decision("truncated", reason, cut.text, cut.tokens, cut.pieces)
    return decisions


def _placeholder_cost(ctx: _Context, history: list[Item]) -> int:
    text = PLACEHOLDER_TEMPLATE.format(omitted=len(history))
    return ctx.counter.raw(text) + max((ctx.framing(m) for m in history), default=0)


def _plan(ctx: _Context, budgets: Mapping[Component, int]) -> Plan:
    decisions: dict[ItemKey, Decision] = {}
    zero = {c for c in COMPONENTS if ctx.split.percentages[c] == 0}
    shared: tuple[tuple[Component, bool], ...] = (("system", True), ("query", False))
    for component, droppable in shared:
        if component == "system" and ctx.split.protect_system:
            decisions |= {
                i.key: Decision("kept", "system prompts are protected (budget system=N to trim them)")
                for i in ctx.of("system")
            }
            continue
        decisions |= _shared_texts(ctx, component, 0 if component in zero else budgets[component], droppable)
    docs = ctx.of("documents")
    query = " ".join(i.text for i in ctx.of("query"))
    selection = select_documents(
        docs,
        {d.index: ctx.cost(d) for d in docs},
        0 if "documents" in zero else budgets["documents"],
        query=query,
        score_order=ctx.score_order,
        output_order=ctx.document_order,
    )
    decisions |= {("documents", i): d for i, d in selection.decisions.items()}
    order = selection.order
    slices: dict[int, tuple[tuple[int, int, str], ...]] = {}
    if ctx.split_documents and "documents" not in zero:
        left = budgets["documents"] - sum(ctx.cost(d) for d in docs if d.index in selection.order)
        slices, split_decisions = split_documents(
            [d for d in docs if d.index not in order],
            left,
            query,
            cost=ctx.cost,
            framing=ctx.framing,
            span_of=ctx.measured.spans.get,
            scorer=ctx.passage_scorer,
        )
        decisions |= split_decisions
        order = order + tuple(slices)
    history = ctx.of("history")
    if not history:
        return Plan(decisions, order, document_slices=slices)
    if "history" in zero:
        decisions |= {m.key: Decision("dropped", "history budget is 0%") for m in history}
        return Plan(decisions, order, document_slices=slices)
    chosen = select_history(
        history,
        {m.index: ctx.cost(m) for m in history},
        budgets["history"],
        placeholder_cost=_placeholder_cost(ctx, history),
        shrink=lambda m, b: _truncate(ctx, m, b),
        fixed={m.index: ctx.framing(m) for m in history},
    )
    decisions |= {("history", i): d for i, d in chosen.decisions.items()}
    return Plan(decisions, order, chosen.placeholder_after, chosen.omitted, document_slices=slices)


def _empty_plan(ctx: _Context) -> Plan:
    decisions: dict[ItemKey, Decision] = {}
    for item in ctx.items:
        if item.component == "query":
            decisions[item.key] = Decision("truncated", "on_overflow=empty: emptied", "")
        else:
            decisions[item.key] = Decision("dropped", "on_overflow=empty: emptied")
    return Plan(decisions, ())


def _item_reports(ctx: _Context, plan: Plan) -> tuple[ItemReport, ...]:
    reports = []
    for item in ctx.items:
        decision = plan.decisions.get(item.key) or Decision("kept", "fits")
        before = ctx.cost(item)
        after = before if decision.action == "kept" else 0
        if decision.tokens is not None:
            after = decision.tokens
        elif decision.action == "truncated" and decision.text is not None:
            span = ctx.measured.spans.get(item.key)
            if ctx.fmt.name == "question" and isinstance(span, TextSpan):  # a prefix: read its count
                content = span.prefix_tokens(len(decision.text.encode("utf-8")))
            else:  # a cut chat message is not a prefix: count it
                content = sum(ctx.counter.raw(p) for p in decision.pieces or (decision.text,))
            after = ctx.framing(item) + content
        reports.append(
            ItemReport(
                component=item.component,
                index=item.index,
                path=item.path,
                action=decision.action,
                tokens_before=ctx.counter.scale(before),
                tokens_after=ctx.counter.scale(after),
                reason=decision.reason,
            )
        )
    return tuple(reports)


def _fixed_or_fail(ctx: _Context, available_raw: int, available: int, on_overflow: OnOverflow) -> int:
    fixed = ctx.untrimmable()
    fixed_raw = sum(fixed.values())
    if fixed_raw <= available_raw:
        return fixed_raw
    if on_overflow == "error":
        raise BudgetExceeded(
            available_tokens=available,
            required_tokens=ctx.counter.scale(fixed_raw),
            parts={k: ctx.counter.scale(v) for k, v in fixed.items()},
        )
    ctx.warnings.append(
        f"the parts that cannot be trimmed need {ctx.counter.scale(fixed_raw):,} tokens, more than the "
        f"{available:,} available: all four components were emptied (on_overflow=empty) and the request still does not fit"
    )
    return fixed_raw


def _trim(
    ctx: _Context, request: Mapping[str, Any], available_raw: int, pool: int, on_empty: bool
) -> tuple[dict[str, Any], Plan, dict[Component, int], int]:
    needs = {c: sum(ctx.cost(i) for i in ctx.of(c) if not ctx.protected(i)) for c in COMPONENTS}
    budgets: dict[Component, int] = dict.fromkeys(COMPONENTS, 0)
    kept = ctx.always_kept()
    kept_framing = {c: sum(ctx.framing(i) for i in kept if i.component == c) for c in COMPONENTS}
    needs = {c: needs[c] - kept_framing[c] for c in COMPONENTS}
    question = ctx.first_claim()
    needs["query"] = max(0, needs["query"] - question)
    # The question is kept whole before any other text (as far as the pool allows); what the
    # verification takes back comes from the rest first, and from the question only after it.
    claim = min(question, max(0, pool))
    pool -= claim

    def attempt(rest: int, kept_claim: int) -> tuple[dict[str, Any], Plan, dict[Component, int], int]:
        shares = allocate(max(0, rest), ctx.split, needs)
        budgets = {c: shares[c] + kept_framing[c] + (kept_claim if c == "query" else 0) for c in COMPONENTS}
        plan = _empty_plan(ctx) if on_empty else _plan(ctx, budgets)
        out = ctx.fmt.apply(request, ctx.items, plan)
        return (
            out,
            plan,
            budgets,
            measure_total(ctx.fmt.render(out), ctx.counter.encoding, ctx.measured.sources),
        )

    for round_ in range(MAX_VERIFY_ROUNDS):
        kept_claim = max(0, claim + min(0, pool))
        out, plan, budgets, after = attempt(pool, kept_claim)
        if after <= available_raw or on_empty:
            if kept_claim < claim and not on_empty:
                # The question gave way to boundary effects that its own cut removed: with the
                # room the plan left, try it whole again.
                again = attempt(0, min(claim, kept_claim + available_raw - after))
                if again[3] <= available_raw:
                    return again
            return out, plan, budgets, after
        # Boundary effects (a marker, a placeholder, a cut's rounding) went over: take back the
        # excess, more each round, so the plan converges instead of failing near the line.
        pool -= (after - available_raw) * (round_ + 1)
    fixed = ctx.untrimmable()
    parts = {k: ctx.counter.scale(v) for k, v in fixed.items()}
    parts["text the plan still kept"] = max(0, ctx.counter.scale(after) - sum(parts.values()))
    raise BudgetExceeded(
        available_tokens=ctx.counter.scale(available_raw),
        required_tokens=sum(parts.values()),
        parts=parts,
    )


_MEMO = FitMemo()


def clear_caches(*, counts: bool = True, fits: bool = True) -> None:
    """Forget cached token counts and/or remembered fits (benchmarks use it to time cold fits)."""
    if counts:
        clear_count_cache()
        clear_sentence_cache()
        find_volatile.cache_clear()
    if fits:
        _MEMO.clear()


@dataclass(frozen=True, kw_only=True)
class FitOptions:
    """How one fit is made: frozen and hashable, so it is part of the memo's key as it is. The
    budget's values are kept in their frozen image (:func:`ctxbudget.memo.freeze`)."""

    model: str
    max_context_tokens: int = 0
    reserve_output_tokens: int | None = None
    budget: tuple[tuple[str, Hashable], ...] = ()
    input_format: str | None = None
    on_overflow: OnOverflow = "error"
    score_order: ScoreOrder = "desc"
    document_order: OutputOrder = "ranked"
    split_documents: bool = False
    safety_factor: float | None = None

    def budget_mapping(self) -> dict[str, Any] | None:
        """The budget as given (None when none was)."""
        return {k: thaw(v) for k, v in self.budget} or None


def fit(
    request: Mapping[str, Any],
    *,
    model: str,
    max_context_tokens: int = 0,
    reserve_output_tokens: int | None = None,
    budget: Mapping[str, Any] | None = None,
    input_format: str | None = None,
    on_overflow: OnOverflow = "error",
    score_order: ScoreOrder = "desc",
    document_order: OutputOrder = "ranked",
    split_documents: bool = False,
    passage_scorer: PassageScorer | None = None,
    catalog: Catalog | None = None,
    unknown_model: UnknownModel = "error",
    safety_factor: float | None = None,
    format: str | None = None,
) -> FitResult:
    """Fit ``request`` into ``model``'s window; returns the fitted request and the report.

    - ``model``: a model id the catalog resolves (dated ids and provider prefixes too).
    - ``max_context_tokens``: a budget below the model's window (0: the window).
    - ``reserve_output_tokens``: tokens kept for the reply; by default the body's own
      ``max_tokens`` / ``max_completion_tokens`` / ``max_output_tokens``, else min(4,096, the
      model's output cap).
    - ``budget``: percentages per component (``system``, ``question``, ``documents``, ``history``).
    - ``input_format``: the request's format (detected when None): ``question``, ``openai``,
      ``anthropic``, ``gemini``, ...; the fitted request has the same format. ``format`` is its
      former name, still accepted.
    - ``on_overflow``: ``"error"`` raises :class:`BudgetExceeded` when the parts that cannot be
      trimmed alone exceed the window; ``"empty"`` returns what fits with a warning.
    - ``score_order`` / ``document_order``: how documents are ranked and laid out.
    - ``split_documents``: keep the passages of long documents that match the question;
      ``passage_scorer`` (:class:`ctxbudget.trim.passages.PassageScorer`, such as
      :class:`ctxbudget.semantic.EmbeddingScorer`) adds semantic similarity to BM25 there.
    - ``catalog``: models and prices (default: the bundled catalog).
    - ``unknown_model``: ``"error"`` raises :class:`UnknownModelError` for an id the catalog
      cannot resolve; ``"floor"`` budgets it at the seed node's 8,191 tokens with a warning.
    - ``safety_factor``: for a model counted by an estimate, the factor to scale it by (a
      calibrated one, instead of the catalog's); an exact count has none.

    Raises :class:`InvalidRequestError` for a malformed body and :class:`ConfigError` for bad
    options. The input is never mutated; the same request and options give the same bytes.
    """
    input_format = _input_format(input_format, format)
    _check_options(
        on_overflow=on_overflow,
        score_order=score_order,
        document_order=document_order,
        reserve_output_tokens=reserve_output_tokens,
        budget=budget,
        passage_scorer=passage_scorer,
    )
    if passage_scorer is not None and not split_documents:
        raise ConfigError("passage_scorer is used only when split_documents=True; set both or neither")
    _check_request(request)
    catalog = _catalog(catalog)
    resolution = catalog.resolve_window(model, max_context_tokens, unknown_model=unknown_model)
    body_reserve = _body_reserve(request)  # validated even when an explicit reserve overrides it
    options = FitOptions(
        model=model,
        max_context_tokens=max_context_tokens,
        reserve_output_tokens=body_reserve if reserve_output_tokens is None else reserve_output_tokens,
        budget=tuple((k, freeze(v)) for k, v in (budget or {}).items()),
        input_format=input_format,
        on_overflow=on_overflow,
        score_order=score_order,
        document_order=document_order,
        split_documents=split_documents,
        safety_factor=safety_factor,
    )
    return _remembered_fit(request, options, resolution, catalog, passage_scorer)


def _remembered_fit(
    request: Mapping[str, Any],
    options: FitOptions,
    resolution: WindowResolution,
    catalog: Catalog,
    scorer: PassageScorer | None,
) -> FitResult:
    """A fit, from the memo when the same request and options were fitted before (by content).
    A scorer is the caller's object (it may be unhashable, and its answers are its own): fits that
    use one are not remembered; the scorer can remember its embeddings itself."""
    key = (
        freeze(dict(request)),
        options,
        _catalog_key(catalog, options, resolution),
        registry_version(),
    )
    remembered = _MEMO.get(key) if scorer is None else None
    if remembered is not None:
        return FitResult(*remembered)
    result = _fit(request, options, resolution, catalog, scorer)
    if scorer is None:
        _MEMO.put(key, result.request, result.report)
    return result


def estimated_parts(items: tuple[Item, ...], rendering: Rendering) -> tuple[str, ...]:
    """The rendering's estimated parts, each named by its item's JSON path."""
    paths = {item.key: item.path for item in items}
    return tuple(
        f"{paths.get(owner, owner) if isinstance(owner, tuple) else owner}: {how}"
        for owner, how in rendering.estimated
    )


_CHOICES = {
    "on_overflow": ("error", "empty"),
    "score_order": ("desc", "asc"),
    "document_order": ("ranked", "original"),
}


def _check_options(**options: Any) -> None:
    """The options' types and values, so that a bad one is a ConfigError naming it."""
    for name, allowed in _CHOICES.items():
        if options[name] not in allowed:
            raise ConfigError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {options[name]!r}")
    reserve = options["reserve_output_tokens"]
    if reserve is not None and (isinstance(reserve, bool) or not isinstance(reserve, int)):
        raise ConfigError(f"reserve_output_tokens must be a whole number of tokens or None, got {reserve!r}")
    budget = options["budget"]
    if budget is not None and (
        not isinstance(budget, Mapping) or not all(isinstance(k, str) for k in budget)
    ):
        raise ConfigError(f"budget must map component names to percentages, got {budget!r:.80}")
    scorer = options["passage_scorer"]
    if scorer is not None and not callable(scorer):
        raise ConfigError(
            f"passage_scorer must be callable (query, passages) -> scores, got {type(scorer).__name__}"
        )


def _input_format(input_format: str | None, former: str | None) -> str | None:
    """``input_format``, or ``format`` (its former name); both given must agree."""
    if former is not None and input_format is not None and former != input_format:
        raise ConfigError(f"input_format={input_format!r} and format={former!r} disagree; give one")
    return input_format if input_format is not None else former


def _check_request(request: object) -> None:
    if not isinstance(request, Mapping):
        raise InvalidRequestError(f"the request body must be a JSON object, got {type(request).__name__}")
    check_json_value(dict(request))


def _catalog(given: object) -> Catalog:
    if given is None:
        return bundled_catalog()
    if not isinstance(given, Catalog):
        raise ConfigError(
            f"catalog must be a Catalog (ctxbudget.load_catalog(paths)), got {type(given).__name__}"
        )
    return given


def _catalog_key(catalog: Catalog, options: FitOptions, resolution: WindowResolution) -> Hashable:
    """Everything a fit takes from the catalog, by content: the resolution and the tokenizer."""
    spec = resolution.spec
    return (
        resolution.context_window,
        resolution.max_input_tokens,
        resolution.rule,
        resolution.path,
        resolution.warning,
        spec.max_output_tokens if spec else None,
        catalog.tokenizer_for(options.model, options.safety_factor),
    )


def _fit(
    request: Mapping[str, Any],
    options: FitOptions,
    resolution: WindowResolution,
    catalog: Catalog,
    passage_scorer: PassageScorer | None,
) -> FitResult:
    model = options.model
    reserve = _reserve(resolution, options.reserve_output_tokens)
    available = _available(resolution, reserve)
    fmt = get_format(options.input_format) if options.input_format else detect_format(request)
    counter = catalog.counter_for(model, options.safety_factor)
    items, rendering = fmt.parse_and_render(request)
    measured = measure(rendering, counter.encoding)
    # As chat users expect (LangChain's include_system), a chat body's system and developer
    # messages are not trimmed unless budgeted; the seed's question format budgets its role.
    split = BudgetSplit.from_mapping(options.budget_mapping(), protect_system=fmt.name != "question")
    ctx = _Context(
        fmt,
        counter,
        items,
        measured,
        split,
        options.score_order,
        options.document_order,
        options.split_documents,
        passage_scorer,
    )
    ctx.estimated = estimated_parts(items, rendering)
    if resolution.warning:
        ctx.warnings.append(resolution.warning)
    available_raw = counter.unscale(available)
    if measured.total <= available_raw:
        out: dict[str, Any] = copy.deepcopy(dict(request))
        return FitResult(
            out, _report(ctx, model, resolution, reserve, available, Plan({}), {}, measured.total, True)
        )
    ctx.warnings.extend(split.warnings)
    fixed_raw = _fixed_or_fail(ctx, available_raw, available, options.on_overflow)
    out, plan, budgets, after = _trim(
        ctx, request, available_raw, available_raw - fixed_raw, fixed_raw > available_raw
    )
    return FitResult(out, _report(ctx, model, resolution, reserve, available, plan, budgets, after, False))


def _report(
    ctx: _Context,
    model: str,
    resolution: WindowResolution,
    reserve: int,
    available: int,
    plan: Plan,
    budgets: Mapping[Component, int],
    after_raw: int,
    passed_through: bool,
) -> FitReport:
    counter = ctx.counter
    items = _item_reports(ctx, plan)
    before = counter.scale(ctx.measured.total)
    after = counter.scale(after_raw)
    fixed = ctx.measured.fixed_parts()
    return FitReport(
        model=model,
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
        reserve_output_tokens=reserve,
        available_tokens=available,
        overhead_tokens=counter.scale(sum(fixed.values())),
        overhead_parts={k: counter.scale(v) for k, v in sorted(fixed.items())},
        budgets={c: counter.scale(budgets[c]) for c in budgets},
        tokens_before=before,
        tokens_after=after,
        tokens_saved=before - after,
        passed_through=passed_through,
        components_truncated=tuple(
            c for c in COMPONENTS if any(i.component == c and i.action != "kept" for i in items)
        ),
        warnings=tuple(dict.fromkeys(ctx.warnings)),
        items=items,
    )


def count(
    request: Mapping[str, Any],
    *,
    model: str,
    input_format: str | None = None,
    catalog: Catalog | None = None,
    unknown_model: UnknownModel = "error",
    max_context_tokens: int = 0,
    safety_factor: float | None = None,
    format: str | None = None,
) -> dict[str, Any]:
    """Tokens of the rendered request: ``{"tokens", "exact", "encoding", "model", "safety_factor",
    "format", "catalog_id", "window_rule", "context_window", "max_input_tokens", "fits"}``.

    ``fits`` says whether the tokens are within the model's input limit (the window, or the input
    cap below it; the output reserve is not counted here). An id the catalog cannot resolve raises
    :class:`UnknownModelError` unless ``unknown_model="floor"``. The options mean what they
    mean for :func:`fit`.
    """
    input_format = _input_format(input_format, format)
    _check_request(request)
    _body_reserve(request)  # validated here too: a bad max_tokens is a bad request
    catalog = _catalog(catalog)
    resolution = catalog.resolve_window(model, max_context_tokens, unknown_model=unknown_model)
    fmt = get_format(input_format) if input_format else detect_format(request)
    counter = catalog.counter_for(model, safety_factor)
    items, rendering = fmt.parse_and_render(request)
    total = measure_total(rendering, counter.encoding)
    estimated = estimated_parts(items, rendering)
    return {
        "tokens": counter.scale(total),
        "exact": counter.exact and not estimated,
        "estimated_parts": list(estimated),
        "encoding": counter.encoding_name,
        "safety_factor": counter.safety_factor,
        "model": model,
        "format": fmt.name,
        "catalog_id": resolution.catalog_id,
        "window_rule": resolution.rule,
        "context_window": resolution.context_window,
        "max_input_tokens": resolution.max_input_tokens,
        "fits": counter.scale(total) <= resolution.input_limit,
    }
