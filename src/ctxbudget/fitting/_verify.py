"""Trimming a request that does not fit, and verifying the result: what cannot be trimmed must fit
first; the pool left is allocated to the components (:mod:`._budget`), planned (:mod:`._plan`),
applied, and checked with one exact count of what will be sent. If boundary effects push it
over, the pool shrinks by the excess and the plan is redone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import BudgetExceeded
from ..items import COMPONENTS, GAP, Component, Plan
from ..measure import measure_total
from ._budget import allocate, budget_ceiling
from ._context import FitContext
from ._plan import empty_plan, make_plan
from ._report import tokens_after

__all__ = ["MAX_VERIFY_ROUNDS", "Fitted", "trim_to_window"]

MAX_VERIFY_ROUNDS = 6


@dataclass(frozen=True)
class Fitted:
    """A fit's outcome: the request to send, the plan that made it, the component budgets it was
    planned with, and the raw tokens of what will be sent (``passed_through``: sent unchanged)."""

    request: dict[str, Any]
    plan: Plan
    budgets: Mapping[Component, int]
    tokens_raw: int
    passed_through: bool = False


@dataclass(frozen=True)
class _Demand:
    """What each component asks of the pool: its trimmable raw tokens, the framing of its items
    that are always kept (given on top of its share), and the query's question (claimed first)."""

    needs: Mapping[Component, int]
    kept_framing: Mapping[Component, int]
    question: int


def trim_to_window(ctx: FitContext, request: Mapping[str, Any]) -> Fitted:
    """The request trimmed to the fit's available tokens (raises :class:`BudgetExceeded` when even
    the parts that cannot be trimmed do not fit, unless ``on_overflow="empty"``)."""
    ctx.warnings.extend(ctx.split.warnings)
    fixed_raw = _fixed_or_fail(ctx)
    return _trim(ctx, request, ctx.available_raw - fixed_raw, on_empty=fixed_raw > ctx.available_raw)


def _fixed_or_fail(ctx: FitContext) -> int:
    """Raw tokens no trimming removes; over the available tokens, an error or a warning."""
    fixed = ctx.untrimmable()
    fixed_raw = sum(fixed.values())
    available = ctx.window.available_tokens
    if fixed_raw <= ctx.available_raw:
        _question_fits_or_fail(ctx, fixed, fixed_raw)
        return fixed_raw
    if ctx.options.on_overflow == "error":
        parts = {k: ctx.counter.scale(v) for k, v in fixed.items()}
        # each part rounded up on its own, as the report gives it: the total is their sum
        raise BudgetExceeded(available_tokens=available, required_tokens=sum(parts.values()), parts=parts)
    ctx.warnings.append(
        f"the parts that cannot be trimmed need {ctx.counter.scale(fixed_raw):,} tokens, more than the "
        f"{available:,} available: {_EMPTIED}"
    )
    return fixed_raw


def _question_fits_or_fail(ctx: FitContext, fixed: dict[str, int], fixed_raw: int) -> None:
    """The question a chat query asks is kept whole: when it cannot fit beside the parts no
    trimming removes, an error naming it (it was cut to its end, even to nothing, before), or
    with ``on_overflow="empty"`` a warning that it was cut."""
    question = ctx.protected_question()
    need = fixed_raw + sum(question.values())
    if need <= ctx.available_raw:
        return
    if ctx.options.on_overflow == "error":
        parts = {k: ctx.counter.scale(v) for k, v in {**fixed, **question}.items()}
        raise BudgetExceeded(
            available_tokens=ctx.window.available_tokens, required_tokens=sum(parts.values()), parts=parts
        )
    ctx.warnings.append(
        f"the question needs {ctx.counter.scale(need - fixed_raw):,} tokens beside the parts that cannot "
        f"be trimmed, more than the {ctx.window.available_tokens:,} available: it was cut "
        '(on_overflow="empty")'
    )


def _demand(ctx: FitContext, pool: int) -> _Demand:
    """Each component's need: its trimmable tokens less what is kept anyway (the always-kept
    items' framing, and the query's question, which is claimed before any budget).

    A component whose bound alone is over the most the allocation could ever give it
    (:func:`._budget.budget_ceiling`, from the other components' bounds) is given that bound: the
    allocation is the same, and nothing of it is counted to allocate."""
    kept = ctx.always_kept()
    kept_framing = {c: sum(ctx.framing(i) for i in kept if i.component == c) for c in COMPONENTS}
    question = ctx.first_claim()
    query = max(0, _need(ctx, "query", pool) - kept_framing["query"] - question)
    others = [c for c in COMPONENTS if c != "query"]
    at_least: dict[Component, int] = {"query": query}
    at_least |= {c: _bound(ctx, c, pool + kept_framing[c]) - kept_framing[c] for c in others}
    needs: dict[Component, int] = {"query": query}
    for c in others:
        over = min(pool, budget_ceiling(pool, ctx.split, at_least, c)) + kept_framing[c]
        needs[c] = _need(ctx, c, over) - kept_framing[c]
    return _Demand(needs, kept_framing, question)


def _bound(ctx: FitContext, component: Component, cap: int) -> int:
    """A lower bound of the component's trimmable tokens, read only until it is over ``cap``."""
    bound = 0
    for item in ctx.trimmable(component):
        bound += ctx.at_least(item)
        if bound > cap:
            break
    return bound


def _need(ctx: FitContext, component: Component, over: int) -> int:
    """The component's trimmable tokens, or a bound of them (a partial sum) when that is above
    ``over``."""
    if component == "query":  # always kept, and its question is taken off its need
        return sum(map(ctx.cost, ctx.trimmable(component)))
    bound = _bound(ctx, component, over)  # bounds are read only until they are over
    return bound if bound > over else sum(map(ctx.cost, ctx.trimmable(component)))


def _trim(ctx: FitContext, request: Mapping[str, Any], pool: int, *, on_empty: bool) -> Fitted:
    """Plan within ``pool`` tokens and verify, taking back any excess, for a few rounds at most."""
    available_raw = ctx.available_raw
    demand = _demand(ctx, max(0, pool))
    # The question is kept whole before any other text (as far as the pool allows); what the
    # verification takes back comes from the rest first, and from the question only after it.
    claim = min(demand.question, max(0, pool))
    pool -= claim

    def attempt(
        rest: int, kept_claim: int, needs: Mapping[Component, int] = demand.needs, emptied: bool = on_empty
    ) -> Fitted:
        shares = allocate(max(0, rest), ctx.split, needs)
        budgets = {
            c: shares[c] + demand.kept_framing[c] + (kept_claim if c == "query" else 0) for c in COMPONENTS
        }
        plan = empty_plan(ctx) if emptied else make_plan(ctx, budgets)
        out = ctx.fmt.apply(request, ctx.items, plan)
        return Fitted(
            out,
            plan,
            budgets,
            measure_total(ctx.rendered(out), ctx.counter.encoding, ctx.measured.sources),
        )

    def settled(fitted: Fitted, pool: int, kept_claim: int) -> Fitted:
        """A plan that fits, with the room it left handed back where that keeps more."""
        if on_empty and fitted.tokens_raw > available_raw:
            _still_over_emptied(ctx, fitted.tokens_raw)
        if kept_claim < claim and not on_empty:
            # The question gave way to boundary effects that its own cut removed: with the
            # room the plan left, try it whole again.
            again = attempt(0, min(claim, kept_claim + available_raw - fitted.tokens_raw))
            if again.tokens_raw <= available_raw:
                return again
        needs = None if on_empty else _handed_on(ctx, fitted, demand, pool)
        if needs is not None:
            refilled = attempt(pool, kept_claim, needs)
            if fitted.tokens_raw < refilled.tokens_raw <= available_raw:
                return refilled
        return fitted

    def rounds(pool: int, floor: int) -> tuple[Fitted, bool]:
        """Plan and verify with the question's claim kept down to ``floor`` at least: the plan
        that fits (True), or the last one when the rounds ran out (False)."""
        taken = 0  # what the last round took back
        for round_ in range(2 * MAX_VERIFY_ROUNDS):
            kept_claim = max(floor, claim + min(0, pool))
            fitted = attempt(pool, kept_claim)
            if fitted.tokens_raw <= available_raw or on_empty:
                return settled(fitted, pool, kept_claim), True
            # Boundary effects (a marker, a placeholder, a cut's rounding) went over: take back the
            # excess, more each round, so the plan converges instead of failing near the line. Past
            # the usual rounds, twice as much each round: a plan they all left as it was had slack
            # where they took back (a unit dropped whole, not cut), and a request that fits at
            # budgets either side of this one was refused, over by a token.
            over = fitted.tokens_raw - available_raw
            taken = over * (round_ + 1) if round_ < MAX_VERIFY_ROUNDS else taken * 2
            pool -= taken
        return fitted, False

    keep_whole = ctx.options.on_overflow == "error"  # the question stays whole, or the fit refuses
    fitted, fits = rounds(pool, claim if keep_whole else 0)
    if fits and (not keep_whole or _keeps_its_question(ctx, fitted.plan)):
        return fitted
    whole = min(claim, sum(ctx.protected_question().values()))
    if keep_whole and whole < claim:
        # A question that does not ask (no "?", no label) is cut when the pool is smaller than it:
        # at the edge it gives way too, as little as will fit, as long as some of it is kept (never
        # to a marker alone); a request that fits at a smaller budget was refused at a larger one.
        given = _most_of_the_claim(lambda kept: attempt(0, kept), whole, claim, available_raw)
        if given is not None and _keeps_its_question(ctx, given[1].plan):
            return settled(given[1], 0, given[0])
    if ctx.options.on_overflow == "empty":  # as asked: every component emptied, with a warning
        ctx.warnings.append(
            f"no plan got the request under the {ctx.window.available_tokens:,} tokens available: {_EMPTIED}"
        )
        emptied = attempt(0, 0, emptied=True)
        if emptied.tokens_raw > available_raw:
            _still_over_emptied(ctx, emptied.tokens_raw)
        return emptied
    if fitted.tokens_raw <= available_raw:
        # it fits only with the question cut to a marker (a pool smaller than the question): the
        # smallest request that keeps the question is the one to name
        fitted = attempt(0, demand.question)
    raise _still_over(ctx, max(fitted.tokens_raw, available_raw + 1))


_EMPTIED = 'all four components were emptied (on_overflow="empty")'


def _most_of_the_claim(
    attempt: Callable[[int], Fitted], low: int, high: int, available_raw: int
) -> tuple[int, Fitted] | None:
    """The largest claim of the question below ``high`` (``low`` at least) whose plan, with
    nothing else of the pool, fits, and that plan (by bisection: a smaller claim sends less)."""
    best = None
    while low < high:
        middle = (low + high) // 2
        fitted = attempt(middle)
        if fitted.tokens_raw <= available_raw:
            best, low = (middle, fitted), middle + 1
        else:
            high = middle
    return best


def _keeps_its_question(ctx: FitContext, plan: Plan) -> bool:
    """Whether every query text with a question keeps some of it (not only markers) when it held
    more than markers."""
    return all(
        plan.text_of(item).replace(GAP.strip(), "").strip()
        for item in ctx.of("query")
        if ctx.question_tokens(item) and item.text.replace(GAP.strip(), "").strip()
    )


def _still_over_emptied(ctx: FitContext, tokens_raw: int) -> None:
    """The warning that the components were emptied, told that the emptied request still does
    not fit: one warning naming the cost, as the seed gives (a second one repeated the first)."""
    still = (
        f"; the emptied request still needs {ctx.counter.scale(tokens_raw):,} tokens, more than the "
        f"{ctx.window.available_tokens:,} available: it does not fit"
    )
    for at in range(len(ctx.warnings) - 1, -1, -1):
        if ctx.warnings[at].endswith(_EMPTIED):
            ctx.warnings[at] += still
            return
    ctx.warnings.append(still.removeprefix("; "))


# Budget a plan leaves unused below this, or below this share of the available tokens, is not
# worth another plan (a cold fit of the 114k-token example: 136 tokens more for a quarter more time).
MIN_HANDED_ON = 64
MIN_HANDED_ON_SHARE = 0.02


def _handed_on(ctx: FitContext, fitted: Fitted, demand: _Demand, pool: int) -> dict[Component, int] | None:
    """Needs that hand on the budget the documents' plan left unused (they are taken whole: the
    next one larger than what is left) to another component still short of its need, or None
    when there is none worth a plan. Documents alone give: the history's use holds its
    placeholder, which no item's line shows, and handed on it would lose a message to it.

    A need read as a bound was read only until it was over the share the first allocation could
    give; handed more, the component could take more than that bound, which then capped it (and
    where a partial sum stopped depended on what was counted, so ``count_all`` kept more or less
    history). The needs are read again until they are over the whole ``pool``, which no share is."""
    short = [
        c
        for c in COMPONENTS
        if ctx.split.percentages[c] > 0 and demand.needs[c] + demand.kept_framing[c] > fitted.budgets[c]
    ]
    if "documents" not in short or len(short) < 2:  # one to give and one to take (read nothing more)
        return None
    used = sum(tokens_after(ctx, d, fitted.plan.decisions.get(d.key)) for d in ctx.of("documents"))
    if fitted.budgets["documents"] - used < max(MIN_HANDED_ON, ctx.available_raw * MIN_HANDED_ON_SHARE):
        return None
    framing = demand.kept_framing
    needs: dict[Component, int] = {
        c: _need(ctx, c, max(0, pool) + framing[c]) - framing[c] for c in short if c in ("system", "history")
    }
    return {**demand.needs, **needs, "documents": max(0, used - framing["documents"])}


def _still_over(ctx: FitContext, after_raw: int) -> BudgetExceeded:
    """The error when verification rounds ran out: the untrimmable parts and the kept text."""
    parts = {k: ctx.counter.scale(v) for k, v in ctx.untrimmable().items()}
    parts["text the plan still kept"] = max(0, ctx.counter.scale(after_raw) - sum(parts.values()))
    return BudgetExceeded(
        available_tokens=ctx.counter.scale(ctx.available_raw),
        required_tokens=sum(parts.values()),
        parts=parts,
        # what the plan kept is not untrimmable: the smallest request it made, with the newest
        # turn kept and the placeholder its order needs, is over
        needs="the smallest request the plan could make needs",
    )
