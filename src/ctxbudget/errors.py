"""The whole ctxbudget exception tree.

::

    CtxBudgetError                 base of everything ctxbudget raises
    ├── ConfigError                misuse: bad options, policy or catalog file
    │   ├── UnknownEncodingError   an encoding name nothing registered
    │   └── UnknownModelError      a model id the catalog cannot resolve
    ├── InvalidRequestError        misuse: the request body is malformed (carries a JSON path)
    │   └── VolatileValueError     a timestamp, date, id or UUID inside a pinned tier
    ├── BudgetExceeded             outcome: what must be sent cannot fit the window or a tier
    ├── CostCeilingExceeded        outcome: the turn's estimated cost is above the ceiling
    │   └── PriceUnknown           outcome: a ceiling is set but the model has no known price
    ├── PrefixChanged              outcome: a cached prefix differs from the previous turn's
    ├── StoreError                 the session store: missing, locked, damaged, full, refused, ...
    │   └── StoreUnavailable       the store's server cannot be reached (refused, timed out, gone)
    └── InvariantViolation         outcome: a rendered request broke an invariant (never sent)

Misuse errors say what was wrong and where; outcome errors carry the numbers. Hints name the
library's options (``max_context_tokens=``); the CLI shows its flags in their place. Exit codes and
HTTP statuses are chosen only at the edges (CLI, gateway), never here. Third-party exceptions
are wrapped with ``raise ... from exc`` at the boundary where they enter.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from typing import Any, Self

__all__ = [
    "BudgetExceeded",
    "ConfigError",
    "CostCeilingExceeded",
    "CtxBudgetError",
    "InvalidRequestError",
    "InvariantViolation",
    "PinnedPrefixChanged",
    "PrefixChanged",
    "PriceUnknown",
    "ReplyLeavesNothing",
    "StoreError",
    "StoreUnavailable",
    "SupersedeUnverified",
    "UnknownEncodingError",
    "UnknownModelError",
    "VolatileValueError",
    "reworded",
    "usd",
]


def reworded(message: str, words: Iterable[tuple[str, str]]) -> str:
    """``message`` with each library term of ``words`` replaced by an edge's own word for it (a
    CLI flag, a header, a client's field), in order."""
    for term, edge_word in words:
        message = message.replace(term, edge_word)
    return message


class CtxBudgetError(Exception):
    """Base class of every error ctxbudget raises on purpose.

    Each keeps the arguments it was made with, so that it pickles and copies as it was made (an
    error raised in a worker process reaches its pool): an error made with keywords, or with
    arguments other than its message, could not be made again from its message alone."""

    _made_with: tuple[tuple[Any, ...], dict[str, Any]]

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        made = super().__new__(cls, *args)
        made._made_with = (args, kwargs)
        return made

    def __reduce__(self) -> tuple[Any, ...]:
        args, kwargs = self._made_with
        return (functools.partial(type(self), **kwargs), args, self.__dict__)


class ConfigError(CtxBudgetError):
    """An option, policy or catalog value is invalid; the message names it and the fix."""


class ReplyLeavesNothing(ConfigError):
    """The reply's reserve (a body's ``max_tokens``, or ``reserve_output_tokens=``) takes the whole
    window, or the budget below it: nothing is left for the prompt. A misuse of the options, and
    also a request that cannot fit (the gateway answers it as a provider answers one too long)."""

    def __init__(self, reserve: int, source: str, window: int, budgeted: bool) -> None:
        self.reserve = reserve
        self.window = window
        given = f" ({source})" if source else ""
        room = f"{window:,}-token budget (max_context_tokens=)" if budgeted else f"{window:,}-token window"
        super().__init__(f"the output reserve of {reserve:,} tokens{given} leaves nothing of the {room}")


def unreadable_file(source: str, exc: RecursionError | ValueError) -> ConfigError:
    """A policy or catalog file whose document a parser cannot hold: nested too deeply, or an
    integer too long for Python's int (each was a traceback); one line naming the file."""
    if isinstance(exc, RecursionError):
        return ConfigError(f"{source}: nested too deeply to read")
    return ConfigError(f"{source}: a number too long to read ({str(exc).split(';')[0]})")


class UnknownEncodingError(ConfigError):
    """An encoding name that no registered tokenizer provides."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown encoding {name!r}; registered encodings: {', '.join(known)}")


class UnknownModelError(ConfigError):
    """A model id that no catalog rule resolves; ``closest`` lists the ids that look like it.

    ``windowed`` says whether the caller could also give the model's window or budget it at the
    floor (a fit or a count can; an assembly prices the model, so it needs the catalog entry)."""

    def __init__(
        self, model_id: str, closest: list[str], *, windowed: bool = True, problem: str = ""
    ) -> None:
        self.model_id = model_id
        self.closest = closest
        self.problem = problem
        near = f" (closest: {', '.join(closest)})" if closest else ""
        why = f" ({problem})" if problem else ""
        shown = (
            repr(model_id) if len(model_id) <= 80 else f"{model_id[:60]!r}... ({len(model_id):,} characters)"
        )
        self.summary = f"unknown model {shown}{why}{near}"
        catalog = "add it in a user catalog (catalog=load_catalog(FILE))"  # the CLI: --catalog FILE
        hint = (
            f"give its window (max_context_tokens=), {catalog}, or budget it at the 8,191-token "
            'floor (unknown_model="floor")'
            if windowed
            else catalog
        )
        super().__init__(f"{self.summary}; {hint}")


class InvalidRequestError(CtxBudgetError):
    """The request body is malformed. ``path`` is the JSON path of the offending value."""

    def __init__(self, message: str, path: str = "$") -> None:
        self.path = path
        self.reason = message
        super().__init__(f"{path}: {message}" if path else message)


class BudgetExceeded(CtxBudgetError):
    """Parts that cannot be trimmed do not fit the tokens available.

    ``parts`` maps each untrimmable part to its token cost, so the caller can see what to
    shorten upstream.
    """

    FIT_HINT = (
        "shorten them upstream, raise max_context_tokens=, lower reserve_output_tokens=, "
        'or pass on_overflow="empty"'
    )

    def __init__(
        self,
        *,
        available_tokens: int,
        required_tokens: int,
        parts: Mapping[str, int],
        hint: str = FIT_HINT,
        needs: str = "the parts that cannot be trimmed need",
    ) -> None:
        self.available_tokens = available_tokens
        self.required_tokens = required_tokens
        self.hint = hint
        self.parts = dict(parts)
        ranked = sorted(self.parts.items(), key=lambda kv: (-kv[1], kv[0]))
        listing = ", ".join(f"{name} {tokens:,}" for name, tokens in ranked[:8])
        if len(ranked) > 8:
            rest = ranked[8:]
            listing += f", and {len(rest)} more parts ({sum(t for _, t in rest):,} tokens)"
        self.summary = (
            f"cannot fit: {needs} {required_tokens:,} tokens "
            f"but only {available_tokens:,} are available ({listing})"
        )
        super().__init__(f"{self.summary}; {hint}")

    def with_hint(self, hint: str) -> str:
        """The message with another hint in place of the fit's own (the gateway names its
        settings); a hint of another kind (a tier's, a policy's envelope) is kept."""
        return f"{self.summary}; {hint if self.hint == self.FIT_HINT else self.hint}"


class VolatileValueError(InvalidRequestError):
    """A volatile value (timestamp, date, request/session id, UUID) in a pinned tier.

    It would change the cached prefix every turn; ``span`` is its character range in the item.
    """

    def __init__(
        self,
        *,
        item_id: str,
        kind: str,
        value: str,
        span: tuple[int, int],
        path: str,
        what: str = "pinned item",
        remedy: str = "move it to an uncached tier or the question",
    ) -> None:
        self.item_id = item_id
        self.kind = kind
        self.value = value
        self.span = span
        super().__init__(
            f"{what} {item_id!r} contains a volatile {kind} {value!r} at characters {span[0]}-{span[1]}: "
            f"it would change the cached prefix every turn; {remedy}",
            path,
        )


class SupersedeUnverified(InvalidRequestError):
    """An item supersedes protected evidence without a verified quote (nothing is evicted)."""


TIER_HINT = (
    "shorten the pinned or protected items or the question, let protected items go with `supersedes` "
    "or `confirm_evict`, or raise the policy's ceilings or envelope"
)


def usd(amount: float) -> str:
    """An amount in USD for a message: to four decimals, or to a smaller amount's first three
    digits (a ceiling of $0.000001 is not "$0.0000"), trailing zeros dropped down to two decimals
    ("$0.45", "$0.001": it was "$0.4500" and "$0.00100"); below a millionth of a dollar in powers
    of ten (a ceiling of 1e-300 was written with 300 zeros)."""
    if not math.isfinite(amount):
        return f"${amount}"
    if amount != 0 and abs(amount) < 1e-6:
        return f"${amount:.3g}"
    decimals = 4 if amount == 0 or abs(amount) >= 0.01 else 2 - math.floor(math.log10(abs(amount)))
    whole, _, fraction = f"{amount:.{decimals}f}".partition(".")
    return f"${whole}.{fraction.rstrip('0'):0<2}"


class CostCeilingExceeded(CtxBudgetError):
    """The estimated cost of the turn is above the ceiling (nothing is sent)."""

    def __init__(self, *, estimate_usd: float, ceiling_usd: float, detail: str = "") -> None:
        self.estimate_usd: float | None = estimate_usd
        self.ceiling_usd = ceiling_usd
        super().__init__(
            f"estimated cost {usd(estimate_usd)} is above the ceiling {usd(ceiling_usd)} per turn"
            + (f" ({detail})" if detail else "")
        )


class PriceUnknown(CostCeilingExceeded):
    """A cost ceiling is set but the model has no known price, so the turn cannot be checked."""

    def __init__(self, *, model_id: str, ceiling_usd: float) -> None:
        self.model_id = model_id
        self.estimate_usd = None
        self.ceiling_usd = ceiling_usd
        CtxBudgetError.__init__(
            self,
            f"the price of {model_id!r} is unknown, so the {usd(ceiling_usd)} cost ceiling cannot be "
            "checked; nothing was sent (add the model's prices in a user catalog, or use no ceiling: "
            "a policy without cost_ceiling_usd and no cost_ceiling_usd=)",
        )


class PrefixChanged(CtxBudgetError):
    """A cached prefix differs from the previous turn's; ``offset`` is the first differing byte."""

    def __init__(self, *, breakpoint: int, offset: int, before: str, after: str) -> None:
        self.breakpoint = breakpoint
        self.offset = offset
        super().__init__(
            f"cached prefix {breakpoint} differs from the previous turn's at byte {offset}: "
            f"{before!r} became {after!r}"
        )


class PinnedPrefixChanged(CtxBudgetError):
    """INV-CTX-01: the pinned prefix differs from the previous turn's (nothing is sent).

    ``line`` is the first differing line (1-based) and ``volatile`` the value that changed on it
    (its kind, "value" when the detector does not recognise it, and its text)."""

    def __init__(
        self, *, offset: int, line: int, before: str, after: str, volatile: tuple[str, str] | None
    ) -> None:
        self.offset = offset
        self.line = line
        self.before = before
        self.after = after
        self.volatile = volatile
        likely = (
            f"; the likely cause is the changing {volatile[0]} {volatile[1]!r}: if it changes from turn "
            "to turn, move it out of the pinned tier"
            if volatile
            else ""
        )
        self.summary = (
            f"INV-CTX-01: the pinned prefix differs from the previous turn's at byte {offset}, line {line}: "
            f"{before!r} became {after!r}{likely}. The cached prefix must stay byte-identical across turns"
        )
        super().__init__(self.with_hint("allow_prefix_change=True"))

    def with_hint(self, allow: str) -> str:
        """The message naming how this caller allows the change (a CLI flag, a header)."""
        return f"{self.summary}; for a new playbook version, allow the change ({allow})"


class StoreError(CtxBudgetError):
    """The session store cannot be used: its file or database is missing, locked by another
    process, not a store (or one of a newer version), read-only, full, damaged, or refuses the
    credentials. Neither misuse of an option nor an outcome of a request: the store is what must
    change, so ``hint`` says how. ``path`` is the file, or the server's URL without its password."""

    def __init__(self, path: str, cause: str, hint: str) -> None:
        self.path = path
        self.cause = cause
        self.hint = hint
        super().__init__(f"session store {path!r} {cause}; {hint}")


class StoreUnavailable(StoreError):
    """The session store's server cannot be reached: the connection was refused or timed out, no
    pooled connection came free in time, or the server went away mid-request. Unlike its parent,
    the store itself may be fine: retrying later can succeed."""


class InvariantViolation(CtxBudgetError):
    """An assembled request broke an invariant; it is never returned for sending."""
