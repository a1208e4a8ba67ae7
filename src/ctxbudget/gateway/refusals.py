"""What the client is told when the gateway answers a request itself, and the one table that maps
the library's errors to an HTTP status and an error code per provider.

The library never chooses statuses (see :mod:`ctxbudget.errors`); this module does, for the
gateway. A refusal the gateway decides itself on a condition the library names (a request too
large once its tool definitions are counted, a turn above the ceiling) takes its status and code
from the same row, with its own message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import (
    BudgetExceeded,
    CostCeilingExceeded,
    CtxBudgetError,
    PinnedPrefixChanged,
    PriceUnknown,
    ReplyLeavesNothing,
    UnknownModelError,
    reworded,
)

__all__ = [
    "AT_WINDOW_HINT",
    "GATEWAY_HINT",
    "LIBRARY_ERRORS",
    "Refusal",
    "Rule",
    "price_unknown",
    "refusal_as",
    "refusal_for",
    "unknown_model",
]

# Hints in refusals name the gateway's settings and headers, not CLI flags.
GATEWAY_HINT = (
    "shorten them, raise X-Ctxbudget-Max-Context-Tokens (or serve --max-context-tokens) up to the "
    "model's window, or lower max_tokens"
)
# With no budget narrowing the model's window, raising one cannot help.
AT_WINDOW_HINT = "shorten them, or lower max_tokens (the budget is already the model's window)"
PREFIX_HINT = "header X-Ctxbudget-Allow-Prefix-Change: true"
# The library's hints name its options; through the gateway the same things are set by a header
# (the client) or by a flag of ``ctxbudget serve`` (the operator).
GATEWAY_OPTIONS = (
    ("max_context_tokens=", "header X-Ctxbudget-Max-Context-Tokens"),
    ("cost_ceiling_usd=", "serve --cost-ceiling"),
    ("allow_prefix_change=True", PREFIX_HINT),
    ('unknown_model="floor"', "serve --unknown-model floor"),
    ("catalog=load_catalog(FILE)", "serve --catalog FILE"),
    # the route names the body's format: there is nothing to name
    (", or name the body's format with input_format=", " (this route's API)"),
    # the gateway sends a provider body: a text rendering is the library's
    (', or render with output format "text"', ""),
)
NOTHING_SENT = "; nothing was sent"


class Refusal(Exception):
    """A request answered by the gateway itself, in the provider's error shape.

    ``counted`` says whether it is a refusal decision (counted in the decisions metric) rather
    than bad input."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str,
        headers: Mapping[str, str] | None = None,
        *,
        counted: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.headers = dict(headers or {})  # what the client is told about its request
        self.counted = counted

    def with_headers(self, headers: Mapping[str, str]) -> Refusal:
        """The same refusal, telling the client ``headers`` about its request."""
        return Refusal(self.status, str(self), self.code, {**self.headers, **headers}, counted=self.counted)


# The OpenAI and Anthropic SDKs retry 408, 409, 429 and 5xx unless the answer says not to.
NO_RETRY = {"x-should-retry": "false"}


def _same(code: str) -> Mapping[str, str]:
    """One code for both providers."""
    return {"anthropic": code, "openai": code}


@dataclass(frozen=True)
class Rule:
    """How one kind of library error is answered: status, code per provider, and the message."""

    error: type[CtxBudgetError]
    status: int
    codes: Mapping[str, str]  # by provider name
    hint: str | None = None  # passed to the error's ``with_hint`` (it names the way to allow it)
    tail: str = ""  # added to the message
    counted: bool = True  # a refusal decision, not bad input
    renamed: Mapping[str, str] = field(default_factory=dict)  # library words -> the client's

    @property
    def headers(self) -> Mapping[str, str]:
        """What the answer says beside its body: a 409 is one the SDKs retry (twice, with back-off)
        unless told not to, and the same request would be refused again."""
        return NO_RETRY if self.status == 409 else {}

    def code(self, provider: str) -> str:
        """The error code ``provider``'s clients expect."""
        return self.codes[provider]


# Codes that name what was found: a model id the catalog cannot resolve (the gateway's own check,
# unless it runs with unknown_model="floor" and fits the body: a policy's assembly needs the
# model's entry whatever the floor), and a ceiling on a model without a price (the gateway's own
# check or a pipeline's PriceUnknown, by its row).
UNKNOWN_MODEL_CODE = "unknown_model"
PRICE_UNKNOWN_CODE = "price_unknown"


# Library errors as the client is told them. The first row whose class the error is an instance
# of applies, so a subclass comes before its base; the last row catches every other error.
LIBRARY_ERRORS: tuple[Rule, ...] = (
    # What must be sent cannot fit the window: each provider's own code for a too-large request.
    Rule(
        BudgetExceeded,
        400,
        {"anthropic": "context_too_large", "openai": "context_length_exceeded"},
        hint=GATEWAY_HINT,
    ),
    # The session's pinned prefix changed: told the header that allows it.
    Rule(PinnedPrefixChanged, 409, _same("prefix_changed"), hint=PREFIX_HINT, tail=NOTHING_SENT),
    # A ceiling on a model without a price: it cannot be checked (its message says nothing was sent).
    Rule(PriceUnknown, 400, _same(PRICE_UNKNOWN_CODE)),
    # Above the cost ceiling.
    Rule(CostCeilingExceeded, 400, _same("cost_ceiling_exceeded"), tail=NOTHING_SENT),
    # A reply asked as large as the budget (Claude Code's 32,000 under a 20,000-token header): too
    # large a request, as the provider says of one (a client that falls back on it does here too).
    Rule(
        ReplyLeavesNothing,
        400,
        {"anthropic": "context_too_large", "openai": "context_length_exceeded"},
        tail="; lower max_tokens, or raise X-Ctxbudget-Max-Context-Tokens (or serve --max-context-tokens)",
        # the budget may be the client's header or the server's: both are named, not one
        renamed={
            "reserve_output_tokens": "max_tokens",
            "budget (max_context_tokens=)": "budget (X-Ctxbudget-Max-Context-Tokens, or serve --max-context-tokens)",
        },
    ),
    # Anything else is bad input; the library's reserve_output_tokens is the client's max_tokens.
    Rule(
        CtxBudgetError,
        400,
        _same("invalid_request"),
        counted=False,
        renamed={"reserve_output_tokens": "max_tokens"},
    ),
)


def rule_for(kind: type[CtxBudgetError]) -> Rule:
    """The first row of :data:`LIBRARY_ERRORS` that an error of class ``kind`` falls under."""
    return next(rule for rule in LIBRARY_ERRORS if issubclass(kind, rule.error))


def _message(exc: CtxBudgetError, rule: Rule, hint: str | None = None) -> str:
    """The library's message as the client reads it: hinted (``hint`` in the rule's place when
    given), its words renamed, with the tail."""
    if rule.hint is not None and isinstance(exc, (BudgetExceeded, PinnedPrefixChanged)):
        text = exc.with_hint(hint or rule.hint)
    else:
        text = str(exc)
    return f"ctxbudget: {with_settings(reworded(text, rule.renamed.items()))}{rule.tail}"


def with_settings(message: str) -> str:
    """A library message as the gateway tells it: each option named by its header or serve flag."""
    return reworded(message, GATEWAY_OPTIONS)


def refusal_for(exc: CtxBudgetError, provider: str, *, narrowed: bool = True) -> Refusal:
    """What the client is told when the library refuses its request (its row of the table);
    ``narrowed``: whether a budget below the model's window was in force (else raising one is
    not offered)."""
    rule = rule_for(type(exc))
    hint = None if narrowed else AT_WINDOW_HINT
    return Refusal(
        rule.status, _message(exc, rule, hint), rule.code(provider), rule.headers, counted=rule.counted
    )


def refusal_as(kind: type[CtxBudgetError], provider: str, message: str) -> Refusal:
    """A refusal the gateway decides itself on a condition the library names as ``kind``: that
    row's status and code, with the gateway's own ``message``."""
    rule = rule_for(kind)
    return Refusal(rule.status, message, rule.code(provider), rule.headers, counted=rule.counted)


def unknown_model(error: UnknownModelError, *, assembled: bool = False) -> Refusal:
    """The gateway's own refusal of a model id the catalog cannot resolve (bad input, not counted):
    what the operator can do about it (a budget header never lifts an unknown id; the floor does
    not lift one a policy assembles for: ``assembled``)."""
    hint = (
        "a policy assembles only for a model the catalog knows (its window and prices), whatever "
        "--unknown-model says: add it in a catalog (serve --catalog FILE)"
        if assembled
        else "add it in a catalog (serve --catalog FILE), or budget unknown ids at the 8,191-token "
        "floor (serve --unknown-model floor)"
    )
    return Refusal(400, f"ctxbudget: {error.summary}; {hint}", UNKNOWN_MODEL_CODE)


def price_unknown(model: str, ceiling_usd: float) -> Refusal:
    """The gateway's own refusal of a turn it cannot price under a ceiling."""
    message = f"ctxbudget: {with_settings(str(PriceUnknown(model_id=model, ceiling_usd=ceiling_usd)))}"
    return Refusal(400, message, PRICE_UNKNOWN_CODE, counted=True)
