"""A chat body's own fields in its assembled body.

The assembly builds a body's messages (and Anthropic's ``system``) from its tiers. What else a
chat body says (``tools``, ``tool_choice``, ``temperature``, ``metadata``, ``thinking``, ...) is
carried into the assembled body when it goes out in the format it came in, so an agent can go on
calling its tools. The provider reads tool definitions as input, ahead of everything it caches:
they are counted, priced as the first cached block is (a read or a write; uncached when nothing is
cached), folded into the prefix hashes (:func:`cache_seed`), and held to the prompt limit and the
cost ceiling.
Their cache marks are dropped (the plan owns the breakpoints), and a thinking budget is kept
below the policy's reply size (:func:`thinking_within`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ..cost import replies_asked, reply_tokens_asked
from ..errors import BudgetExceeded, CostCeilingExceeded, InvalidRequestError, usd
from ..formats import check_reply_fields, detect_format, get_format
from ..formats.anthropic_rules import without_cache_marks
from ..formats.tool_prompt import with_tool_prompt
from ..measure import measure_total
from ..tokens.counter import TokenCounter
from ._draft import Setup
from ._pricing import Priced, carried_extra, carried_rate, whole_turn
from ._report import AssemblyReport

__all__ = [
    "MIN_THINKING_TOKENS",
    "cache_seed",
    "carried_fields",
    "carried_raw_tokens",
    "carried_replies",
    "carried_tools",
    "message_seed",
    "positive",
    "thinking_within",
    "tools_digest",
]

# What the assembly builds, by the format the body goes out in (the reply size is the policy's).
_REPLY = ("max_tokens", "max_completion_tokens", "max_output_tokens")
# An Anthropic body's top-level cache_control (automatic caching) is not carried: the policy owns
# the breakpoints (as a carried tool's marks are taken off), and the prediction prices its own.
_BUILT = {"openai": ("messages", *_REPLY), "anthropic": ("system", "messages", "cache_control", *_REPLY)}
# Anthropic's extended thinking: a budget of at least this many tokens, below ``max_tokens``.
MIN_THINKING_TOKENS = 1024
# A body that holds nothing else: the carried fields' tokens are what they add to it.
_MINIMAL: dict[str, Any] = {"messages": [{"role": "user", "content": "x"}]}


def carried_fields(
    request: Mapping[str, Any],
    input_format: str | None,
    setup: Setup,
    priced: Priced,
    report: AssemblyReport,
    ceiling: float | None,
) -> tuple[dict[str, Any] | str, AssemblyReport]:
    """The priced body with the chat request's fields the assembly does not build, and ``report``
    with their tokens and cost (raises :class:`BudgetExceeded` past the prompt limit and
    :class:`CostCeilingExceeded` past ``ceiling``)."""
    body = priced.body
    if not isinstance(body, dict):
        return body, report
    if not _in_own_format(request, input_format, setup.fmt):
        return body, _with_lost(request, input_format, setup.fmt, body, report)
    carried = {k: v for k, v in _own_fields(request, setup.fmt).items() if k not in body}
    if not carried:
        return body, report
    reply = reply_tokens_asked(body) or None
    out = {**body, **carried}
    if reply is not None:
        asked = positive(request.get("max_tokens"))
        out = thinking_within(out, asked, reply, policy_cap=asked != reply)
    return out, _with_extra(setup, priced, report, sorted(carried), ceiling)


def _with_lost(
    request: Mapping[str, Any],
    input_format: str | None,
    fmt: str,
    body: Mapping[str, Any],
    report: AssemblyReport,
) -> AssemblyReport:
    """``report`` warned of what a chat body assembled into another format does not carry: its
    tool definitions and other fields (an OpenAI body's tools were dropped from its Anthropic
    body, its calls sent as text, and nothing said so)."""
    source = input_format or ("context" if "items" in request else detect_format(request).name)
    if source not in _BUILT:
        return report
    lost = sorted(k for k in request if k not in _BUILT[source] and k not in body)
    if not lost:
        return report
    note = (
        f"not carried into the {fmt} body: {', '.join(lost)} (the request is in the {source} format; its "
        f"tool calls and results, if any, go as text): assemble the {source} format to keep them"
    )
    return dataclasses.replace(report, warnings=(*report.warnings, note))


def _own_fields(request: Mapping[str, Any], fmt: str) -> dict[str, Any]:
    """The chat request's fields the assembly does not build, as they are sent: its tools without
    their cache marks (the policy owns the breakpoints)."""
    carried = {k: v for k, v in request.items() if k not in _BUILT[fmt]}
    if isinstance(carried.get("tools"), list):
        carried["tools"] = without_cache_marks(carried["tools"])
    return carried


def _in_own_format(request: Mapping[str, Any], input_format: str | None, fmt: str) -> bool:
    """Whether ``request`` is a chat body going out in its own format (``fmt``)."""
    source = input_format or ("context" if "items" in request else detect_format(request).name)
    return source == fmt and fmt in _BUILT


def carried_tools(request: Mapping[str, Any], input_format: str | None, fmt: str) -> list[Any]:
    """The tool definitions a chat body carries into its assembled body (none in another format)."""
    tools = request.get("tools")
    return tools if isinstance(tools, list) and _in_own_format(request, input_format, fmt) else []


def tools_digest(request: Mapping[str, Any], seed: str) -> str:
    """The digest of the tool definitions a chat body carries in its own format ("" when it
    carries none), read off its :func:`cache_seed` (which hashes them): what the provider caches
    ahead of the system prompt (the tool choice is not: changing it, as agents do from turn to
    turn, leaves the tools' and the system prompt's cache whole)."""
    tools = request.get("tools")
    return seed.rpartition(" ")[2] if seed and isinstance(tools, list) and tools else ""


def cache_seed(request: Mapping[str, Any], input_format: str | None, fmt: str) -> str:
    """What a chat body carried in its own format puts ahead of the cached blocks: its tool
    definitions (Anthropic caches tools first; changing them misses the whole cache), as a
    digest ("" when none)."""
    if "tools" not in request or not _in_own_format(request, input_format, fmt):
        return ""
    tools = request["tools"]
    ahead = {"tools": without_cache_marks(tools) if isinstance(tools, list) else tools}
    text = json.dumps(ahead, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return "\x00tools " + hashlib.sha256(text.encode("utf-8")).hexdigest()


def message_seed(request: Mapping[str, Any], input_format: str | None, fmt: str) -> str:
    """A chat body's tool choice ("" when none): changing it misses the messages' cache only,
    not the tools' or the system prompt's (Anthropic's caching rules), so it is folded into the
    prefix hashes from the first message block on (it was folded into every one: a changed
    choice was priced as writing the whole prefix again)."""
    if "tool_choice" not in request or not _in_own_format(request, input_format, fmt):
        return ""
    return json.dumps({"tool_choice": request["tool_choice"]}, ensure_ascii=False, sort_keys=True)


def _rendered_raw(fmt: str, counter: TokenCounter, body: Mapping[str, Any], model: str) -> int:
    """Raw tokens of a small body as a count renders it: its tool definitions and read fields,
    and the tool-use system prompt as the proxy tokens a count holds it as."""
    rendering = with_tool_prompt(get_format(fmt).render(body), body, model, counter.safety_factor)
    return measure_total(rendering, counter.encoding)


def carried_raw_tokens(
    request: Mapping[str, Any], input_format: str | None, fmt: str, counter: TokenCounter, model: str
) -> int:
    """The raw tokens a chat body's own fields (tool definitions, a response format) add to its
    assembled body, with the tool-use system prompt the provider adds for its tools: room the
    tiers leave them, so that the rolling tier gives way to them first, and what
    :func:`carried_fields` counts and prices (0 unless the body goes out in its own format). Raw,
    as the rendering adds them: the body's figure is their sum scaled once, which is what
    :func:`ctxbudget.count` says of the assembled body."""
    if not _in_own_format(request, input_format, fmt):
        return 0
    carried = _own_fields(request, fmt)
    if not carried:
        return 0
    fields = _rendered_raw(fmt, counter, {**_MINIMAL, **carried}, model)
    return max(0, fields - _rendered_raw(fmt, counter, _MINIMAL, model))


def _with_extra(
    setup: Setup, priced: Priced, report: AssemblyReport, names: list[str], ceiling: float | None
) -> AssemblyReport:
    """The report with the carried fields' tokens and replies counted and priced
    (:func:`._pricing.whole_turn`: the extra input at the rate of what precedes the first cached
    block, each reply at the expected output); its cache figures, cost breakdown and INV-CTX-02
    line with them; checked against the limits."""
    extra, replies = carried_extra(setup, priced), setup.carried_replies
    tokens = report.tokens + extra
    if tokens > setup.policy.prompt_tokens:
        raise BudgetExceeded(
            available_tokens=setup.policy.prompt_tokens,
            required_tokens=tokens,
            parts={"assembled tiers": report.tokens, "the request's tool definitions and fields": extra},
            hint="send fewer or shorter tool definitions, or raise the policy's envelope",
        )
    cache, turn = whole_turn(setup, priced, report.expected_output_tokens)
    cost = round(turn.total_usd, 6) if turn is not None and report.cost_usd is not None else report.cost_usd
    if ceiling is not None and cost is not None and cost > ceiling:
        raise CostCeilingExceeded(
            estimate_usd=cost, ceiling_usd=ceiling, detail=f"with the request's tool definitions, {usd(cost)}"
        )
    rate = carried_rate(setup, priced)
    note = (
        f"carried from the request: {', '.join(names)} ({extra:,} tokens counted and priced as "
        f"{rate.replace('_', ' ')} input"
    )
    note += f"; {replies} replies priced)" if replies > 1 else ")"
    invariants = {**report.invariants, "INV-CTX-02": f"{tokens:,} <= {setup.policy.prompt_tokens:,} tokens"}
    return dataclasses.replace(
        report,
        tokens=tokens,
        cache=cache,
        cost_usd=cost,
        cost=turn.to_dict() if turn is not None and report.cost is not None else report.cost,
        invariants=invariants,
        warnings=(*report.warnings, note),
    )


def carried_replies(request: Mapping[str, Any], input_format: str | None, fmt: str) -> int:
    """The replies a chat body going out in its own format asks for (OpenAI's ``n``), each billed;
    its ``stream`` and ``n``, which go with it, checked (:func:`.formats.check_reply_fields`)."""
    if not _in_own_format(request, input_format, fmt):
        return 1
    check_reply_fields(request, fmt)
    return replies_asked(_own_fields(request, fmt))


def thinking_within(
    body: dict[str, Any], asked: int | None, cap: int, *, policy_cap: bool = True
) -> dict[str, Any]:
    """``body`` whose Anthropic thinking budget, set for a reply of ``asked`` tokens, fits a reply
    of ``cap`` (the policy's ``max_output_tokens``, else the request's own ``max_tokens``):
    lowered in the client's proportion (at least 1,024, always below ``cap``: the API refuses a
    budget at or above ``max_tokens``), or an :class:`InvalidRequestError` when ``cap`` cannot
    hold the least budget."""
    thinking = body.get("thinking")
    budget = positive(thinking.get("budget_tokens")) if isinstance(thinking, dict) else None
    if not isinstance(thinking, dict) or budget is None or budget < cap:
        return body
    if cap <= MIN_THINKING_TOKENS:
        source, larger = (
            ("the policy's max_output_tokens", "use a policy with a larger max_output_tokens")
            if policy_cap
            else ("the request's max_tokens", f"ask for a reply of more than {MIN_THINKING_TOKENS:,} tokens")
        )
        raise InvalidRequestError(
            f"the reply of {cap:,} tokens ({source}) leaves no room for extended thinking, which "
            f"needs a budget of at least {MIN_THINKING_TOKENS:,} below max_tokens; turn thinking off "
            f"or {larger}",
            "$.thinking.budget_tokens",
        )
    share = budget * cap // asked if asked is not None and asked > cap else cap - 1
    return {**body, "thinking": {**thinking, "budget_tokens": max(MIN_THINKING_TOKENS, min(share, cap - 1))}}


def positive(value: object) -> int | None:
    """``value`` when it is a positive whole number (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
