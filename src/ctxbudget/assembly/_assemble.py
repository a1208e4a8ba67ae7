"""Tiered assembly: items + policy -> the request to send and a report of every decision. Pure.

Layout follows priority: pinned prefix, protected evidence, compacted background (system blocks,
one per tier), rolling history, then the current question and tool returns (messages). Each tier
stays within its ceiling; the rendered request stays within the envelope after the output
reserve (the rolling window gives way first, then the compact tier; tiers that may not shrink
fail closed). Breakpoints are planned at the ends of cached tiers, the next call's cache reads and
writes predicted from the previous turn's prefix hashes, the turn priced, and the invariants
checked on the rendered body before it is returned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..cache import (
    TTL_SECONDS,
    Block,
    Breakpoint,
    CachePrediction,
    plan_breakpoints,
    predict_cache,
    prefix_hashes,
)
from ..catalog.catalog import Catalog, bundled_catalog
from ..catalog.values import ModelSpec
from ..cost import TurnCost, price_turn, price_unknown_note
from ..errors import (
    TIER_HINT,
    BudgetExceeded,
    ConfigError,
    CostCeilingExceeded,
    InvalidRequestError,
    InvariantViolation,
    PinnedPrefixChanged,
    PriceUnknown,
    VolatileValueError,
)
from ..formats import FORMATS
from ..items import JOINER
from ..measure import measure_total
from ..tokens.counter import TokenCounter
from ..trim.passages import PassageScorer
from ..volatile import find_volatile
from ._current_turn import bound_current
from ._policy import Policy
from ._render import OutputFormat, block_texts, render_blocks
from ._report import AssemblyReport, BlockReport, BreakpointReport, CacheReport, DecisionReport, TierReport
from ._request import ContextItem, ContextRequest, parse_context_request
from ._tiers import ItemDecision, TierSelection, render_item, select_ledger, select_tier

__all__ = ["AssemblyResult", "assemble"]

MAX_ROUNDS = 12
LEDGER = "ledger"
CURRENT = "current"


@dataclass(frozen=True)
class AssemblyResult:
    """The body to send (a dict, or a string for ``text``) and the JSON-ready report."""

    request: dict[str, Any] | str
    report: AssemblyReport


@dataclass(frozen=True)
class _Setup:
    policy: Policy
    spec: ModelSpec
    counter: TokenCounter
    request: ContextRequest
    fmt: OutputFormat
    model: str
    query: str
    tags_query: str
    prompt_cache_key: str | None
    ledger: tuple[ContextItem, ...]
    current: tuple[ContextItem, ...]
    current_decisions: tuple[ItemDecision, ...]
    passage_scorer: PassageScorer | None = None
    allow_prefix_change: bool = False


@dataclass(frozen=True)
class _Draft:
    selections: tuple[TierSelection, ...]
    blocks: tuple[Block, ...]
    body: dict[str, Any] | str
    total_raw: int
    block_raw: tuple[int, ...]

    def raw_of(self, tier: str) -> int:
        """Raw tokens of the blocks of ``tier`` (a tier name, the ledger or the current turn)."""
        return sum(n for b, n in zip(self.blocks, self.block_raw, strict=True) if b.tier == tier)


def _check_pinned(request: ContextRequest, policy: Policy) -> None:
    for tier in policy.tiers:
        if tier.eviction != "never":
            continue
        for item in request.in_tier(tier):
            found = find_volatile(item.text, policy.volatile)
            if found:
                raise VolatileValueError(
                    item_id=item.id,
                    kind=found.kind,
                    value=found.value,
                    span=(found.start, found.end),
                    path=f"{item.path}.text",
                )


def _source(item: ContextItem, fmt: str) -> Mapping[str, Any] | None:
    """The provider message an item stands for, when the output is in its format."""
    return item.source if item.source_format == fmt else None


def _blocks(
    selections: Sequence[TierSelection],
    ledger_items: Sequence[ContextItem],
    current: Sequence[ContextItem],
    fmt: str,
) -> tuple[Block, ...]:
    """Blocks 1-2 and the compacted background (a system block per cached tier), Block 3 (the
    ledger: append-only, cached, after the stable tiers so compacting only adds bytes after them),
    then the recent turns and Block 4 (the current turn) as messages."""
    system: list[Block] = []
    ledger = [
        Block(region="system", role="system", text=i.text, tier=LEDGER, cached=True)
        for i in ledger_items
        if i.text.strip()
    ]
    messages: list[Block] = []
    for sel in selections:
        tier = sel.tier
        if tier.eviction != "rolling":
            text = JOINER.join(render_item(i, t) for i, t in sel.texts if t.strip())
            if text:  # no empty system block (the Messages API refuses one)
                system.append(
                    Block(
                        region="system",
                        role="system",
                        text=text,
                        tier=tier.name,
                        cached=tier.cached,
                        ttl=tier.cache_ttl,
                    )
                )
            continue
        for item, text in sel.texts:
            source = _source(item, fmt) if text == item.text else None
            if source is None and not text.strip():
                continue  # no empty or blank text block (the Messages API refuses one)
            messages.append(
                Block(
                    region="message",
                    role=item.role,
                    text=text,
                    tier=tier.name,
                    cached=tier.cached,
                    ttl=tier.cache_ttl,
                    message=source,
                )
            )
    messages += [
        Block(region="message", role=i.role, text=i.text, tier=CURRENT, cached=False, message=_source(i, fmt))
        for i in current
        if i.text.strip() or _source(i, fmt) is not None
    ]
    return (*system, *ledger, *messages)


def _render(setup: _Setup, blocks: Sequence[Block], points: Sequence[Breakpoint]) -> dict[str, Any] | str:
    return render_blocks(
        blocks,
        points,
        setup.fmt,
        model=setup.model,
        max_tokens=setup.policy.max_output_tokens,
        prompt_cache_key=setup.prompt_cache_key,
    )


def _measure(setup: _Setup, body: dict[str, Any] | str) -> int:
    encoding = setup.counter.encoding
    if isinstance(body, str):
        return setup.counter.raw(body)
    return measure_total(FORMATS[setup.fmt].render(body), encoding)


def _draft(setup: _Setup, targets: Mapping[int, int]) -> _Draft:
    selections = tuple(
        select_tier(
            t, setup.request, setup.counter, targets, setup.query, setup.tags_query, setup.passage_scorer
        )
        for t in setup.policy.tiers
    )
    blocks = _blocks(selections, setup.ledger, setup.current, setup.fmt)
    body = _render(setup, blocks, ())
    return _Draft(
        selections, blocks, body, _measure(setup, body), tuple(setup.counter.raw(b.text) for b in blocks)
    )


def _tier_excess(setup: _Setup, draft: _Draft, targets: dict[int, int]) -> bool:
    """Lower the target of a shrinkable tier whose rendered block is over it (True if one was);
    a tier that may not shrink and is over its ceiling once rendered fails closed."""
    for tier in setup.policy.tiers:
        used = draft.raw_of(tier.name)
        if used <= targets[tier.index]:
            continue
        if tier.eviction in ("never", "protected"):
            scale = setup.counter.scale
            raise BudgetExceeded(
                available_tokens=tier.ceiling_tokens,
                required_tokens=scale(used),
                parts={f"tier {tier.index} {tier.name} ({tier.eviction}), as rendered": scale(used)},
                hint=TIER_HINT,
            )
        if targets[tier.index] > 0:
            targets[tier.index] = max(0, targets[tier.index] - (used - targets[tier.index]) - 1)
            return True
    return False


def _shrink(setup: _Setup, draft: _Draft, targets: dict[int, int], limit: int) -> None:
    excess = draft.total_raw - limit
    for eviction in ("rolling", "compact"):
        for tier in setup.policy.tiers:
            if tier.eviction == eviction and targets[tier.index] > 0:
                # from what the tier uses, not its target: a target above the use frees nothing
                used = draft.raw_of(tier.name)
                targets[tier.index] = max(0, min(targets[tier.index], used) - excess - 1)
                return
    labels = {t.name: f"tier {t.index} {t.name} ({t.eviction})" for t in setup.policy.tiers}
    labels |= {LEDGER: "ledger (Block 3)", CURRENT: "current turn (Block 4)"}
    fixed = {label: setup.counter.scale(draft.raw_of(name)) for name, label in labels.items()}
    raise BudgetExceeded(
        available_tokens=setup.policy.prompt_tokens,
        required_tokens=setup.counter.scale(draft.total_raw),
        parts={k: v for k, v in fixed.items() if v},
        hint=TIER_HINT,
    )


def _fit_envelope(setup: _Setup, targets: dict[int, int]) -> _Draft:
    limit = setup.counter.unscale(setup.policy.prompt_tokens)
    for _ in range(MAX_ROUNDS):
        draft = _draft(setup, targets)
        if _tier_excess(setup, draft, targets):
            continue
        if draft.total_raw <= limit:
            return draft
        _shrink(setup, draft, targets, limit)
    raise BudgetExceeded(
        available_tokens=setup.policy.prompt_tokens,
        required_tokens=setup.counter.scale(draft.total_raw),
        parts={"assembly did not converge": setup.counter.scale(draft.total_raw)},
        hint=TIER_HINT,
    )


def _prefix_raw(draft: _Draft) -> list[int]:
    running, out = 0, []
    for tokens in draft.block_raw:
        running += tokens
        out.append(running)
    return out


@dataclass(frozen=True)
class _Priced:
    draft: _Draft
    breakpoints: tuple[Breakpoint, ...]
    prediction: CachePrediction
    cost: TurnCost | None  # None where the model has no published price
    body: dict[str, Any] | str
    warnings: tuple[str, ...]
    total_tokens: int


def _price(setup: _Setup, draft: _Draft, previous_hashes: frozenset[str], output_tokens: int) -> _Priced:
    scale = setup.counter.scale
    hashes = prefix_hashes(setup.model, draft.blocks)
    prefix = [scale(n) for n in _prefix_raw(draft)]
    points, warnings = plan_breakpoints(draft.blocks, prefix, hashes, setup.spec.cache)
    body = _render(setup, draft.blocks, points)
    total = scale(_measure(setup, body))
    prediction = predict_cache(points, total, previous_hashes, setup.spec.cache.mode, hashes, prefix)
    cost = (
        price_turn(
            setup.spec.prices,
            uncached_tokens=prediction.uncached_tokens,
            write_5m_tokens=prediction.write_5m_tokens,
            write_1h_tokens=prediction.write_1h_tokens,
            read_tokens=prediction.read_tokens,
            output_tokens=output_tokens,
        )
        if setup.spec.prices is not None
        else None
    )
    return _Priced(draft, tuple(points), prediction, cost, body, tuple(warnings), total)


def _within_ceiling(
    setup: _Setup,
    targets: dict[int, int],
    previous_hashes: frozenset[str],
    output_tokens: int,
    ceiling: float | None,
) -> tuple[_Priced, list[str]]:
    degraded: list[str] = []
    while True:
        priced = _price(setup, _fit_envelope(setup, targets), previous_hashes, output_tokens)
        if ceiling is None:
            return priced, degraded
        if priced.cost is None:
            raise PriceUnknown(model_id=setup.model, ceiling_usd=ceiling)
        if priced.cost.total_usd <= ceiling:
            return priced, degraded
        compact = [t for t in setup.policy.tiers if t.eviction == "compact" and targets[t.index] > 0]
        if "compact" not in setup.policy.degrade or not compact:
            raise CostCeilingExceeded(
                estimate_usd=priced.cost.total_usd,
                ceiling_usd=ceiling,
                detail=f"{priced.prediction.uncached_tokens:,} uncached, {priced.prediction.write_tokens:,} written, "
                f"{priced.prediction.read_tokens:,} read, {output_tokens:,} output tokens expected",
            )
        tier = compact[0]
        targets[tier.index] //= 2
        degraded.append(
            f"cost ${priced.cost.total_usd:.4f} over ${ceiling:.4f}: compacted {tier.name} to {targets[tier.index]} tokens"
        )


def _check_evidence(priced: _Priced) -> None:
    rendered = block_texts(priced.body)
    for sel in priced.draft.selections:
        if sel.tier.eviction != "protected":
            continue
        for item, text in sel.texts:
            if text.strip() and not any(text in r for r in rendered):
                raise InvariantViolation(
                    f"INV-CTX-03: protected item {item.id!r} is not verbatim in the rendered request"
                )


def _first_difference(a: str, b: str) -> int:
    """The first differing character of ``a`` and ``b`` (the shorter one's length if none)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _prefix_changed(setup: _Setup, old: str, new: str) -> PinnedPrefixChanged:
    """INV-CTX-01's error: the first differing byte and line, and the likely volatile value."""
    at = _first_difference(old, new)
    line = new[:at].count("\n") + 1
    before = old.split("\n")[line - 1] if line <= old.count("\n") + 1 else ""
    after = new.split("\n")[line - 1]
    return PinnedPrefixChanged(
        offset=len(new[:at].encode("utf-8")),
        line=line,
        before=before[:160],
        after=after[:160],
        volatile=_what_changed(setup, old, new, before, after),
    )


def _what_changed(setup: _Setup, old: str, new: str, before: str, after: str) -> tuple[str, str] | None:
    """The kind and text of the change: text appended or removed at the end, whitespace only (line
    endings, trailing spaces), or the changed value on the line (its volatile kind if known)."""
    if new.startswith(old):
        return ("appended text", new[len(old) :].strip()[:80])
    if old.startswith(new):
        return ("removed text", old[len(new) :].strip()[:80])
    if "".join(old.split()) == "".join(new.split()):
        return ("whitespace (line endings or spaces)", repr(after[_first_difference(before, after) :][:20]))
    changed = _changed_value(before, after)
    if not changed:
        return None
    found = find_volatile(changed, setup.policy.volatile)
    return (found.kind if found else "value", changed)


def _changed_value(before: str, after: str) -> str:
    """The words of ``after`` that differ from ``before`` (common head and tail removed, widened
    to whole words): what most likely changes from turn to turn."""
    head = _first_difference(before, after)
    tail = 0
    while tail < min(len(before), len(after)) - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    start, end = head, len(after) - tail
    while start > 0 and not after[start - 1].isspace():
        start -= 1
    while end < len(after) and not after[end].isspace():
        end += 1
    return after[start:end].strip().strip(",.;:!?()[]{}\"'")[:80]


def _pinned_check(setup: _Setup, priced: _Priced, previous: Mapping[str, Any] | None) -> tuple[str, str]:
    """The pinned prefix's hash and INV-CTX-01's status; a change from the previous turn fails
    closed unless the caller allows it (a new playbook version)."""
    pinned = "".join(b.text for b in priced.draft.blocks if b.tier in _never_names(priced))
    digest = prefix_hashes(
        "", [Block(region="system", role="system", text=pinned, tier="pinned", cached=True)]
    )[0]
    if not previous or "pinned_prefix_sha256" not in previous:
        return digest, "no previous turn to compare"
    if previous.get("pinned_prefix_sha256") == digest:
        return digest, "pinned prefix byte-identical to the previous turn"
    error = _prefix_changed(setup, str(previous.get("pinned_prefix_text", "")), pinned)
    if not setup.allow_prefix_change:
        raise error
    return digest, f"pinned prefix changed from the previous turn at byte {error.offset} (allowed)"


def _never_names(priced: _Priced) -> set[str]:
    return {sel.tier.name for sel in priced.draft.selections if sel.tier.eviction == "never"}


def _block_tokens(setup: _Setup, draft: _Draft, tier: str) -> int:
    return setup.counter.scale(draft.raw_of(tier))


def _decision(setup: _Setup, d: ItemDecision) -> DecisionReport:
    """A decision in raw tokens, as the report gives it (scaled)."""
    scale = setup.counter.scale
    return dataclasses.replace(d, tokens_before=scale(d.tokens_before), tokens_after=scale(d.tokens_after))


def _ledger_decisions(setup: _Setup) -> tuple[ItemDecision, ...]:
    raw = setup.counter.raw
    return tuple(
        ItemDecision(
            id=i.id,
            action="kept",
            tokens_before=raw(i.text),
            tokens_after=raw(i.text),
            reason="ledger (Block 3): whole, after the cached tiers",
        )
        for i in setup.ledger
    )


def _section(
    setup: _Setup, draft: _Draft, tier: str, ceiling: int | None, decisions: Sequence[ItemDecision]
) -> BlockReport:
    """Block 3 or Block 4 in the report: its tokens as rendered (with the current turn's images and
    other media, which its items' figures include), its ceiling, its items."""
    text = draft.raw_of(tier)
    media = sum(d.tokens_after for d in decisions) - text if tier == CURRENT else 0
    return BlockReport(
        tokens=setup.counter.scale(text + max(0, media)),
        ceiling_tokens=ceiling,
        items=tuple(_decision(setup, d) for d in decisions),
    )


def _tier_reports(setup: _Setup, draft: _Draft) -> tuple[TierReport, ...]:
    return tuple(
        TierReport(
            index=sel.tier.index,
            name=sel.tier.name,
            eviction=sel.tier.eviction,
            ceiling_tokens=sel.tier.ceiling_tokens,
            tokens=_block_tokens(setup, draft, sel.tier.name),
            cached=sel.tier.cached,
            items=tuple(_decision(setup, d) for d in sel.decisions),
        )
        for sel in draft.selections
    )


def _breakpoint_reports(priced: _Priced) -> tuple[BreakpointReport, ...]:
    prediction = priced.prediction
    return tuple(
        BreakpointReport(
            block=p.block,
            tier=p.tier,
            ttl=p.ttl,
            prefix_tokens=p.prefix_tokens,
            prefix_sha256=p.prefix_sha256,
            explicit=p.explicit,
            status=status,
            read_tokens=span[0],
            write_tokens=span[1],
        )
        for p, status, span in zip(
            priced.breakpoints, prediction.statuses, prediction.per_breakpoint, strict=True
        )
    )


def _cache_report(prediction: CachePrediction) -> CacheReport:
    return CacheReport(
        write_tokens=prediction.write_tokens,
        write_5m_tokens=prediction.write_5m_tokens,
        write_1h_tokens=prediction.write_1h_tokens,
        read_tokens=prediction.read_tokens,
        uncached_tokens=prediction.uncached_tokens,
    )


def _report(
    setup: _Setup,
    priced: _Priced,
    degraded: list[str],
    previous: Mapping[str, Any] | None,
    output_tokens: int,
    ceiling: float | None,
) -> AssemblyReport:
    draft, policy, counter = priced.draft, setup.policy, setup.counter
    pinned_sha, pinned_status = _pinned_check(setup, priced, previous)
    total = priced.total_tokens
    return AssemblyReport(
        model=setup.model,
        policy=policy.name,
        format=setup.fmt,
        encoding=counter.encoding_name,
        exact=counter.exact,
        safety_factor=counter.safety_factor,
        envelope_tokens=policy.envelope_tokens,
        reserve_output_tokens=policy.reserve_output_tokens,
        prompt_limit_tokens=policy.prompt_tokens,
        tokens=total,
        tiers=_tier_reports(setup, draft),
        ledger=_section(setup, draft, LEDGER, policy.ledger_ceiling_tokens, _ledger_decisions(setup)),
        current_turn=_section(
            setup, draft, CURRENT, policy.current_turn_ceiling_tokens, setup.current_decisions
        ),
        current_turn_tokens=_block_tokens(setup, draft, CURRENT),
        breakpoints=_breakpoint_reports(priced),
        cache=_cache_report(priced.prediction),
        expected_output_tokens=output_tokens,
        cost_usd=round(priced.cost.total_usd, 6) if priced.cost else None,
        cost=priced.cost.to_dict() if priced.cost else None,
        cost_note=None if priced.cost else price_unknown_note(setup.spec.id),
        cost_ceiling_usd=ceiling,
        invariants={
            "INV-CTX-01": f"no volatile values in pinned tiers; {pinned_status}",
            "INV-CTX-02": f"{total:,} <= {policy.prompt_tokens:,} tokens",
            "INV-CTX-03": "every protected item is verbatim in the rendered request",
        },
        pinned_prefix_sha256=pinned_sha,
        pinned_prefix_text="".join(b.text for b in draft.blocks if b.tier in _never_names(priced)),
        degraded=tuple(degraded),
        warnings=tuple(priced.warnings),
    )


def _live_hashes(previous: Mapping[str, Any] | None, idle_seconds: float | None) -> frozenset[str]:
    """The previous turn's cached prefixes still alive after ``idle_seconds`` (None: all): an
    entry lives its TTL from its last use, and the previous turn used every one of its breakpoints."""
    points = (previous or {}).get("breakpoints", [])
    if not isinstance(points, list) or not all(
        isinstance(b, Mapping) and isinstance(b.get("prefix_sha256"), str) for b in points
    ):
        raise InvalidRequestError(
            "previous.breakpoints must be a list of objects with a prefix_sha256 string (an assemble report's)",
            "$.breakpoints",
        )
    return frozenset(
        b["prefix_sha256"]
        for b in points
        if idle_seconds is None or idle_seconds <= TTL_SECONDS.get(str(b.get("ttl", "5m")), 300.0)
    )


def _check_envelope(policy: Policy, spec: ModelSpec, model: str) -> None:
    """Fail closed when the policy's envelope cannot fit the model (window, or input cap)."""
    checks = (
        (
            spec.context_window,
            policy.envelope_tokens,
            "envelope",
            f"has a {spec.context_window:,}-token window",
        ),
        (
            spec.input_limit,
            policy.prompt_tokens,
            "prompt (envelope less output reserve)",
            f"accepts at most {spec.input_limit:,} input tokens",
        ),
    )
    for limit, required, part, fact in checks:
        if required > limit:
            raise BudgetExceeded(
                available_tokens=limit,
                required_tokens=required,
                parts={f"policy {policy.name!r} {part}": required},
                hint=f"{model!r} ({spec.id}) {fact}; choose a model with a larger window, "
                "or lower the policy's envelope_tokens",
            )


def _setup(
    request: Mapping[str, Any],
    policy: Policy,
    model: str,
    fmt: OutputFormat,
    counter: TokenCounter,
    catalog: Catalog,
    input_format: str | None,
    prompt_cache_key: str | None,
    passage_scorer: PassageScorer | None,
    allow_prefix_change: bool,
) -> _Setup:
    if fmt not in ("anthropic", "openai", "text"):
        raise ConfigError(f"output format must be anthropic, openai or text, got {fmt!r}")
    spec = catalog.get_model(model)
    _check_envelope(policy, spec, model)
    parsed = parse_context_request(request, policy, input_format)
    _check_pinned(parsed, policy)
    tags = " ".join(dict.fromkeys(t for i in parsed.items for t in i.tags))
    query = " ".join([i.text for i in parsed.current] + [tags])
    for item in parsed.current:
        if item.kind == "question" and not item.text.strip() and item.source is None:
            raise InvalidRequestError("the question is empty", f"{item.path}.text")
    current, decisions = bound_current(parsed.current, counter, policy.current_turn_ceiling_tokens, query)
    return _Setup(
        policy=policy,
        spec=spec,
        counter=counter,
        request=parsed,
        fmt=fmt,
        model=model,
        query=query,
        tags_query=tags,
        prompt_cache_key=prompt_cache_key,
        ledger=select_ledger(parsed, counter, policy.ledger_ceiling_tokens),
        current=current,
        current_decisions=decisions,
        passage_scorer=passage_scorer,
        allow_prefix_change=allow_prefix_change,
    )


def assemble(
    request: Mapping[str, Any],
    *,
    policy: Policy,
    model: str,
    output_format: OutputFormat = "anthropic",
    previous: Mapping[str, Any] | AssemblyReport | None = None,
    cost_ceiling_usd: float | None = None,
    expected_output_tokens: int | None = None,
    prompt_cache_key: str | None = None,
    input_format: str | None = None,
    catalog: Catalog | None = None,
    passage_scorer: PassageScorer | None = None,
    allow_prefix_change: bool = False,
    idle_seconds: float | None = None,
    safety_factor: float | None = None,
    format: OutputFormat | None = None,
) -> AssemblyResult:
    """Assemble a tiered request under ``policy`` for ``model``; returns the body and the report.

    - ``request``: ``{"items": [...]}`` (docs/assembly.md), or a question, OpenAI or Anthropic body.
    - ``policy``: tiers, envelope, block ceilings and cost ceiling (:func:`ctxbudget.get_policy`).
    - ``model``: a model id of the catalog (the turn is priced with its prices).
    - ``output_format``: the body to build: ``"anthropic"`` (cache marks at the breakpoints),
      ``"openai"`` or ``"text"``. ``format`` is its former name, still accepted.
    - ``previous``: the previous turn's report (an :class:`AssemblyReport`, its dict, or
      ``{"report": ...}`` as ``assemble --json`` writes it): its prefix hashes predict cache reads,
      and its pinned prefix is the one this turn's must equal.
    - ``cost_ceiling_usd`` / ``expected_output_tokens``: override the policy's.
    - ``prompt_cache_key``: OpenAI's ``prompt_cache_key`` to set.
    - ``input_format``: the request's format (detected when None).
    - ``catalog``: models and prices (default: the bundled catalog).
    - ``passage_scorer``: adds semantic similarity to BM25 in compact tiers with
      ``compact_method = "passages"`` (docs/retention.md).
    - ``allow_prefix_change``: the pinned prefix may differ from ``previous``'s (a new playbook
      version); otherwise that is :class:`PinnedPrefixChanged`.
    - ``idle_seconds``: time since the previous turn: its cache entries expire in the prediction
      after 5 minutes or 1 hour from their last use.
    - ``safety_factor``: for a model counted by an estimate, the factor to scale it by (a
      calibrated one, instead of the catalog's); an exact count has none.

    Raises :class:`VolatileValueError` or :class:`SupersedeUnverified` (bad input),
    :class:`BudgetExceeded` (cannot fit, naming the tier or block), :class:`CostCeilingExceeded`,
    :class:`PinnedPrefixChanged` and :class:`InvariantViolation`; nothing is returned for sending
    then.
    """
    if format is not None and format != output_format and output_format != "anthropic":
        raise ConfigError(f"output_format={output_format!r} and format={format!r} disagree; give one")
    setup = _setup(
        request,
        policy,
        model,
        format or output_format,
        (catalog or bundled_catalog()).counter_for(model, safety_factor),
        catalog or bundled_catalog(),
        input_format,
        prompt_cache_key,
        passage_scorer,
        allow_prefix_change,
    )
    if isinstance(previous, AssemblyReport):
        previous = previous.to_dict()
    if previous is not None and not isinstance(previous, Mapping):
        raise InvalidRequestError("previous must be the previous turn's report (a JSON object)", "")
    previous_report = previous.get("report", previous) if previous else None
    if isinstance(previous_report, AssemblyReport):
        previous_report = previous_report.to_dict()
    if previous_report is not None and not isinstance(previous_report, Mapping):
        raise InvalidRequestError("is not a report object", "$.report")
    if previous_report is not None and not {"breakpoints", "pinned_prefix_sha256"} & set(previous_report):
        raise InvalidRequestError(
            "previous is not the report of an assembly (it has neither breakpoints nor "
            "pinned_prefix_sha256): pass the previous turn's `assemble --json` output",
            "$",
        )
    previous_hashes = _live_hashes(previous_report, idle_seconds)
    output_tokens = (
        policy.expected_output_tokens if expected_output_tokens is None else expected_output_tokens
    )
    ceiling = policy.cost_ceiling_usd if cost_ceiling_usd is None else cost_ceiling_usd
    targets = {t.index: setup.counter.unscale(t.ceiling_tokens) for t in policy.tiers}
    priced, degraded = _within_ceiling(setup, targets, previous_hashes, output_tokens, ceiling)
    _check_evidence(priced)
    report = _report(setup, priced, degraded, previous_report, output_tokens, ceiling)
    if report.tokens > policy.prompt_tokens:
        raise InvariantViolation(f"INV-CTX-02: {report.tokens:,} tokens exceed {policy.prompt_tokens:,}")
    return AssemblyResult(priced.body, report)
