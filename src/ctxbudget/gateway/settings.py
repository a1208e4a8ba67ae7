"""Per-request budgets a client may set with headers, within what the server allows.

``X-Ctxbudget-Max-Context-Tokens`` budgets the request below the model's window (never above it:
the window is the provider's limit); ``X-Ctxbudget-Cost-Ceiling`` may only lower the server's
ceiling; ``X-Ctxbudget-Policy`` picks one of the policies the server allows (``serve
--allow-policy``); ``X-Ctxbudget-Allow-Prefix-Change: true`` lets a policy-mode session's pinned
prefix differ from its previous turn's (a new playbook; otherwise 409, INV-CTX-01). A malformed
value is refused (400) naming the header, and so is one of them sent twice with different values,
or an ``X-Ctxbudget-`` header that is none of them (a misspelling); no such header is ever
forwarded upstream.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from .config import GatewayConfig

__all__ = ["HEADER_PREFIX", "SESSION_HEADER", "RequestSettings", "SettingsError", "request_settings"]

HEADER_PREFIX = "x-ctxbudget-"
SESSION_HEADER = "x-ctxbudget-session"  # the session a request belongs to (else derived from it)
MAX_CONTEXT_HEADER = "x-ctxbudget-max-context-tokens"
COST_CEILING_HEADER = "x-ctxbudget-cost-ceiling"
POLICY_HEADER = "x-ctxbudget-policy"
ALLOW_PREFIX_CHANGE_HEADER = "x-ctxbudget-allow-prefix-change"


class SettingsError(ValueError):
    """A ctxbudget header the gateway cannot honour."""


@dataclass(frozen=True)
class RequestSettings:
    """What one request is budgeted with: a token budget (0: the model's window), a cost ceiling
    (None: none), and the policy to assemble with (None: fit)."""

    max_context_tokens: int = 0
    cost_ceiling_usd: float | None = None
    policy: str | None = None
    # The client turned on Anthropic's 1M-token context beta (``anthropic-beta: context-1m-...``).
    long_context: bool = False
    # Policy mode: the pinned prefix may differ from the session's previous turn (a new playbook).
    allow_prefix_change: bool = False


# Larger than any window: a client's number over it narrows nothing the model's window does not.
_MAX_TOKENS_HEADER_VALUE = 10**12


def _tokens(value: str) -> int:
    text = value.strip()
    digits = text.lstrip("0")
    if not text.isascii() or not text.isdigit() or not digits:
        raise SettingsError(
            f"{MAX_CONTEXT_HEADER} must be a whole number of tokens > 0, got {_shown(value, 40)!r}"
        )
    return int(digits) if len(digits) <= 12 else _MAX_TOKENS_HEADER_VALUE


def _shown(value: str, limit: int) -> str:
    """A header's value as the client wrote it, for a message: the server hands it over as
    Latin-1, its bytes are UTF-8 (``légal``, not ``lÃ©gal``)."""
    return value.encode("latin-1", errors="replace").decode("utf-8", errors="replace")[:limit]


def _ceiling(value: str, server: float | None) -> float:
    try:  # a plain decimal number ("0_1", which float reads as 1, is not one)
        ceiling = float(value) if len(value) <= 40 and "_" not in value else math.nan
    except ValueError:
        ceiling = math.nan
    if not math.isfinite(ceiling) or ceiling <= 0:
        raise SettingsError(
            f"{COST_CEILING_HEADER} must be a positive number of USD, got {_shown(value, 40)!r}"
        )
    return ceiling if server is None else min(ceiling, server)


_OWN_HEADERS = (
    SESSION_HEADER,
    MAX_CONTEXT_HEADER,
    COST_CEILING_HEADER,
    POLICY_HEADER,
    ALLOW_PREFIX_CHANGE_HEADER,
)


def _check_own_headers(headers: Mapping[str, str]) -> None:
    """A ctxbudget header sent twice with different values is refused: which one the client
    meant cannot be told, and taking either could lift a limit it set with the other. So is one
    the gateway does not know: a misspelled ceiling would otherwise leave the request with none."""
    unknown = sorted({k.lower() for k in headers if k.lower().startswith(HEADER_PREFIX)} - set(_OWN_HEADERS))
    if unknown:
        raise SettingsError(
            f"{_shown(unknown[0], 80)} is not a ctxbudget header; the request headers are {', '.join(_OWN_HEADERS)}"
        )
    if not hasattr(headers, "getlist"):
        return
    for name in _OWN_HEADERS:
        values = list(dict.fromkeys(headers.getlist(name)))
        if len(values) > 1:
            shown = ", ".join(repr(_shown(v, 40)) for v in values[:3])
            raise SettingsError(
                f"{name} was sent {len(values)} times with different values ({shown}); send it once"
            )


def request_settings(
    config: GatewayConfig, headers: Mapping[str, str], policy_names: Mapping[str, str] | None = None
) -> RequestSettings:
    """The settings for one request: the server's, narrowed by the client's headers (each of
    them sent once, or repeated with one value). ``policy_names`` maps the ``name`` of each policy
    the server allows to what the server was given for it (a bundled name, or a file's path):
    clients name a policy by its name, and never learn a path (default: the names given)."""
    _check_own_headers(headers)
    tokens = config.max_context_tokens or 0
    if (given := headers.get(MAX_CONTEXT_HEADER)) is not None:
        asked = _tokens(given)
        tokens = min(asked, tokens) if tokens else asked
    ceiling = config.cost_ceiling_usd
    if (given := headers.get(COST_CEILING_HEADER)) is not None:
        ceiling = _ceiling(given, ceiling)
    policy = config.policy
    if (given := headers.get(POLICY_HEADER)) is not None:
        names = {p: p for p in config.allowed_policies} if policy_names is None else policy_names
        if given not in names:
            allowed = ", ".join(sorted(names)) or "none (serve --allow-policy NAME)"
            raise SettingsError(
                f"{POLICY_HEADER}: policy {_shown(given, 80)!r} is not allowed here; allowed: {allowed}"
            )
        policy = names[given]
    betas = (
        headers.getlist("anthropic-beta")
        if hasattr(headers, "getlist")
        else [headers.get("anthropic-beta", "")]
    )
    long_context = any("context-1m" in str(b) for b in betas)
    return RequestSettings(
        tokens, ceiling, policy, long_context, _flag(headers.get(ALLOW_PREFIX_CHANGE_HEADER))
    )


def _flag(value: str | None) -> bool:
    if value is None:
        return False
    text = value.strip().lower()
    if text in ("1", "true", "yes"):
        return True
    if text in ("0", "false", "no"):
        return False
    raise SettingsError(
        f"{ALLOW_PREFIX_CHANGE_HEADER} must be true or false (or 1 / 0, yes / no), got {_shown(value, 40)!r}"
    )
