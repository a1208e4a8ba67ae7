"""The entry point of a tiered assembly: items + policy -> the request to send and a report of
every decision. Pure.

:func:`assemble` checks the call's options and the request (the model's window, the pinned tiers'
items, an empty question), bounds Blocks 3 and 4 once (:class:`Setup`), reads the previous turn's
report, fits and prices the request under the envelope and the cost ceiling, then checks the
invariants on the rendered body (protected evidence verbatim, the pinned prefix unchanged, the
prompt limit) before it returns the body and its report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..catalog.catalog import Catalog, catalog_of
from ..catalog.values import ModelSpec
from ..cost import check_amount
from ..errors import BudgetExceeded, ConfigError, InvariantViolation
from ..formats import BODY_OUTPUT_FIELDS
from ..gcpause import collector_paused
from ..memo import fit_memo
from ..tokens.counter import TokenCounter, count_ahead
from ..trim.extract import extract_ahead
from ..trim.passages import PassageScorer
from ._carried import (
    cache_seed,
    carried_fields,
    carried_raw_tokens,
    carried_replies,
    carried_tools,
    message_seed,
    tools_digest,
)
from ._current_turn import bound_current
from ._draft import Setup
from ._pinned import check_carried_tools, check_pinned_items, check_pinned_prefix
from ._policy import Policy, load_policy
from ._previous import live_entries, read_previous
from ._pricing import Priced, within_ceiling
from ._question import check_question
from ._render import OutputFormat, block_texts
from ._report import AssemblyReport
from ._reporting import build_report
from ._request import ContextRequest, parse_context_request
from ._tiers import compact_query, rendered_to_count, select_ledger, tags_ranking

__all__ = ["AssemblyResult", "assemble", "check_envelope"]


@dataclass(frozen=True)
class AssemblyResult:
    """The body to send (a dict, or a string for ``text``) and the JSON-ready report."""

    request: dict[str, Any] | str
    report: AssemblyReport


def _output_format(output_format: OutputFormat | None, former: OutputFormat | None) -> OutputFormat:
    """The format to build: ``output_format``, or ``format`` (its former name), else Anthropic's;
    the two given and disagreeing is a :class:`ConfigError`."""
    if former is not None and output_format is not None and former != output_format:
        raise ConfigError(f"output_format={output_format!r} and format={former!r} disagree; give one")
    chosen = output_format if output_format is not None else former
    return chosen if chosen is not None else "anthropic"


def _format_warning(fmt: OutputFormat, spec: ModelSpec | None, defaulted: bool) -> str | None:
    """A warning when the default body, Anthropic's, is built for a model that is not Claude
    (OpenAI, Azure, OpenRouter, DeepSeek, xAI, Mistral: their APIs read OpenAI's body, and
    Anthropic's system blocks and cache marks are refused there)."""
    if not defaulted or fmt != "anthropic" or spec is None:
        return None
    if spec.provider == "anthropic" or "claude" in spec.id.lower():
        return None
    return (
        f"the body is in Anthropic's format (the default) but {spec.id} ({spec.provider}) is not a "
        "Claude model: build it with output_format='openai' (assemble --format openai) for an "
        "OpenAI-compatible API"
    )


def _policy_of(policy: object) -> Policy:
    """The policy given, or the bundled or file policy a name points to."""
    if isinstance(policy, str):
        return load_policy(policy)
    if not isinstance(policy, Policy):
        raise ConfigError(f"policy must be a Policy or a policy name, got {type(policy).__name__}")
    return policy


def within_output_cap(policy: Policy, spec: ModelSpec) -> tuple[Policy, str | None]:
    """The policy with its reply no larger than the model's output cap (the provider refuses a
    ``max_tokens`` above it: 100,000 was sent to gpt-4o, whose cap is 16,384), and the warning
    saying so."""
    cap = spec.max_output_tokens
    if cap is None or policy.max_output_tokens <= cap:
        return policy, None
    warning = (
        f"the policy's max_output_tokens ({policy.max_output_tokens:,}) is above {spec.id}'s output cap "
        f"({cap:,}): the body asks for {cap:,}"
    )
    return dataclasses.replace(policy, max_output_tokens=cap), warning


def check_envelope(policy: Policy, spec: ModelSpec, model: str) -> None:
    """Fail closed when the policy's envelope cannot fit the model (window, or input cap)."""
    checks = (
        (
            spec.context_window,
            policy.envelope_tokens,
            "envelope",
            "",
            f"has a window of {spec.context_window:,} tokens",
        ),
        (
            spec.input_limit,
            policy.prompt_tokens,
            "prompt",
            " (envelope less output reserve)",
            f"accepts at most {spec.input_limit:,} input tokens",
        ),
    )
    for limit, required, part, told, fact in checks:
        if required > limit:
            raise BudgetExceeded(
                available_tokens=limit,
                required_tokens=required,
                parts={f"policy {policy.name!r} {part}{told}": required},
                hint=f"{model!r} ({spec.id}) {fact}; choose a model with a larger window, "
                "or lower the policy's envelope_tokens",
                # the policy's budget, not what was assembled ("the parts ... need" told a user
                # whose assembly was 20,702 tokens that it needed 32,000)
                needs=f"the policy's {part} is",
            )


def _extract_ahead(
    parsed: ContextRequest,
    policy: Policy,
    counter: TokenCounter,
    queries: tuple[str, str],
    go_on: Callable[[], bool],
) -> None:
    """:func:`.extract_ahead` for each tier compacted by sentences, while ``go_on()`` (``queries``:
    the request's and the tags')."""
    for tier in policy.tiers:
        if tier.eviction == "compact" and tier.compact_method == "sentences":
            texts = [item.text for item in parsed.in_tier(tier)]
            extract_ahead(counter.encoding_name, texts, compact_query(tier, *queries), go_on)


def _queries(parsed: ContextRequest) -> tuple[str, str]:
    """What the tiers rank by: the current turn's text with every item's tags; and, for
    ``compact_query = "tags"``, what :func:`.tags_ranking` says."""
    tags = " ".join(dict.fromkeys(t for i in parsed.items for t in i.tags))
    return " ".join([i.text for i in parsed.current] + [tags]), tags_ranking(parsed)[0]


def _setup(
    request: Mapping[str, Any],
    policy: Policy,
    *,
    model: str,
    fmt: OutputFormat,
    catalog: Catalog,
    counter: TokenCounter,
    input_format: str | None,
    prompt_cache_key: str | None,
    passage_scorer: PassageScorer | None,
    allow_prefix_change: bool,
    defaulted: bool = False,
) -> Setup:
    """Check the format, the model's window and the request, and bound Blocks 3 and 4
    (``defaulted``: the format was not asked for)."""
    if fmt not in ("anthropic", "openai", "text"):
        raise ConfigError(f"output format must be anthropic, openai or text, got {fmt!r}")
    spec = catalog.get_model(model)  # its error names only what an assembly can take (a catalog)
    check_envelope(policy, spec, model)
    policy, capped = within_output_cap(policy, spec)
    parsed = parse_context_request(request, policy, input_format)
    # every item is counted below: with quicktok attached, on a thread while the checks' regexes
    # hold the GIL here (the legal example's cold assembly: 23.7 -> 22.3 ms in alternating pairs)
    ahead = count_ahead(
        counter.encoding, [*(item.text for item in parsed.items), *rendered_to_count(parsed, policy.tiers)]
    )
    try:
        check_pinned_items(parsed, policy)
        check_carried_tools(carried_tools(request, input_format, fmt), policy)
        check_question(parsed, fmt, request)
        query, tags = _queries(parsed)
        # then, while the thread still counts (tiktoken's count of the legal example outlasts the
        # checks by some 14 ms), what the compact tiers' extractions read from their texts alone
        _extract_ahead(parsed, policy, counter, (query, tags), ahead.running)
    except BaseException:  # a check's error is raised now; the thread's counts are not kept
        ahead.abandon()
        raise
    ahead.wait()
    current, decisions = bound_current(parsed.current, counter, policy.current_turn_ceiling_tokens, query)
    seed = cache_seed(request, input_format, fmt)  # the tools hashed once, for both
    return Setup(
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
        model_warning="; ".join(
            w
            for w in (catalog.resolve_window(model).warning, capped, _format_warning(fmt, spec, defaulted))
            if w
        )
        or None,
        carried_raw_tokens=carried_raw_tokens(
            request, input_format, fmt, counter, spec.id if spec else model
        ),
        carried_replies=carried_replies(request, input_format, fmt),
        cache_seed=seed,
        message_seed=message_seed(request, input_format, fmt),
        tools_digest=tools_digest(request, seed),
    )


def _check_evidence(priced: Priced) -> None:
    """INV-CTX-03: every protected item's text is verbatim in the rendered body."""
    rendered = block_texts(priced.body)
    for sel in priced.draft.selections:
        if sel.tier.eviction != "protected":
            continue
        for item, text in sel.texts:
            if text.strip() and not any(text in r for r in rendered):
                raise InvariantViolation(
                    f"INV-CTX-03: protected item {item.id!r} is not verbatim in the rendered request"
                )


def _check_prompt_limit(report: AssemblyReport, policy: Policy) -> None:
    """INV-CTX-02: the rendered body is within the prompt limit."""
    if report.tokens > policy.prompt_tokens:
        raise InvariantViolation(f"INV-CTX-02: {report.tokens:,} tokens exceed {policy.prompt_tokens:,}")


def _check_reply_room(body: Any, report: AssemblyReport, setup: Setup) -> None:
    """The prompt and the reply the body asks for fit the model's window (the provider refuses a
    body whose input and ``max_tokens`` exceed it): fail closed naming both, not send it."""
    asked = next((body[k] for k in BODY_OUTPUT_FIELDS if isinstance(body, dict) and k in body), None)
    if not isinstance(asked, int) or report.tokens + asked <= setup.spec.context_window:
        return
    raise BudgetExceeded(
        available_tokens=setup.spec.context_window,
        required_tokens=report.tokens + asked,
        parts={"the assembled prompt": report.tokens, "the reply it asks for (max_tokens)": asked},
        hint=f"{setup.model!r} has a window of {setup.spec.context_window:,} tokens for both; lower the "
        "policy's max_output_tokens, raise its reserve_output_tokens so that the prompt leaves the "
        "reply its room, or choose a model with a larger window",
    )


def _check_arguments(prompt_cache_key: object, allow_prefix_change: object) -> None:
    """The options whose wrong type would fail later, or go into the body as given."""
    if prompt_cache_key is not None and (not isinstance(prompt_cache_key, str) or not prompt_cache_key):
        raise ConfigError(f"prompt_cache_key must be a non-empty string, got {prompt_cache_key!r:.60}")
    if not isinstance(allow_prefix_change, bool):
        raise ConfigError(f"allow_prefix_change must be True or False, got {allow_prefix_change!r:.60}")


def assemble(
    request: Mapping[str, Any],
    *,
    policy: Policy | str,
    model: str,
    output_format: OutputFormat | None = None,
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
    - ``policy``: tiers, envelope, block ceilings and cost ceiling (:func:`ctxbudget.get_policy`),
      or a policy's name or file (:func:`ctxbudget.load_policy`).
    - ``model``: a model id of the catalog (the turn is priced with its prices).
    - ``output_format``: the body to build: ``"anthropic"`` (the default; cache marks at the
      breakpoints), ``"openai"`` or ``"text"``. ``format`` is its former name, still accepted.
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
    fmt = _output_format(output_format, format)
    policy = _policy_of(policy)
    check_amount("cost_ceiling_usd", cost_ceiling_usd)
    check_amount("expected_output_tokens", expected_output_tokens, whole=True)
    check_amount("idle_seconds", idle_seconds)
    _check_arguments(prompt_cache_key, allow_prefix_change)
    # The collector would only traverse what the assembly keeps alive until it returns
    # (ctxbudget.gcpause): 6 collections, ~4 ms of a cold legal assembly (63 -> 59 ms).
    with collector_paused(), fit_memo():  # fit_memo: what the assembly reads from its question
        catalog = catalog_of(catalog)  # the bundled one, or a ConfigError for what is not a Catalog
        setup = _setup(
            request,
            policy,
            model=model,
            fmt=fmt,
            catalog=catalog,
            counter=catalog.counter_for(model, safety_factor),
            input_format=input_format,
            prompt_cache_key=prompt_cache_key,
            passage_scorer=passage_scorer,
            allow_prefix_change=allow_prefix_change,
            defaulted=output_format is None and format is None,
        )
        previous_report = read_previous(previous)
        alive = live_entries(previous_report, idle_seconds)
        previous_hashes = frozenset(alive)
        output_tokens = min(  # no more than the body lets the reply be (the model's cap holds it)
            policy.expected_output_tokens if expected_output_tokens is None else expected_output_tokens,
            setup.policy.max_output_tokens,
        )
        ceiling = policy.cost_ceiling_usd if cost_ceiling_usd is None else cost_ceiling_usd
        targets = {t.index: setup.counter.unscale(t.ceiling_tokens) for t in policy.tiers}
        priced, degraded = within_ceiling(setup, targets, previous_hashes, output_tokens, ceiling)
        _check_evidence(priced)
        pinned = check_pinned_prefix(setup, priced.draft, previous_report)
        report = build_report(setup, priced, pinned, degraded, output_tokens, ceiling, alive)
        body, report = carried_fields(request, input_format, setup, priced, report, ceiling)
        _check_prompt_limit(report, policy)
        _check_reply_room(body, report, setup)
        return AssemblyResult(body, report)
