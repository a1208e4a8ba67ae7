"""The gateway's state and logic: fitting, pricing, forwarding and recording (handlers in routes.py).

Every request is fitted into its model's window (with the client's ``max_tokens`` held back for
the reply), an Anthropic system prompt long enough to cache gets a breakpoint when the client set
none, the turn is priced and refused above the ceiling before anything is sent, and the request is
forwarded to the configured upstream (never one named by the request) with the client's own
headers. Answers stream through as they arrive. Each completed turn is stored with its report and
the provider's usage, normalized; estimate factors are calibrated from that usage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..assembly import Policy, assemble, load_policy
from ..catalog.catalog import FLOOR_WINDOW_TOKENS, load_catalog
from ..catalog.values import ModelSpec
from ..cost import price_turn
from ..errors import (
    BudgetExceeded,
    ConfigError,
    CostCeilingExceeded,
    CtxBudgetError,
    PinnedPrefixChanged,
    PriceUnknown,
    UnknownModelError,
)
from ..fitting import BODY_OUTPUT_FIELDS, fit
from ..fitting import count as fit_count
from ..formats.anthropic import without_cache_marks
from ..session.store import SessionMeta, SQLiteStore
from ..session.turns import Turn
from .config import GatewayConfig
from .counting import UpstreamCounter
from .metrics import Metrics
from .providers import ANTHROPIC, Provider
from .settings import RequestSettings, request_settings
from .usage import Calibration, Usage, covered_by_estimate, normalize_usage, tool_prompt_tokens

__all__ = ["Gateway", "Prepared", "Refusal"]

logger = logging.getLogger(__name__)
SESSION_HEADER = "x-ctxbudget-session"
DROPPED_HEADERS = {
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "accept-encoding",
}
# Upstream headers a client relies on (rate limits, retry advice, request ids), passed back as given.
PASSED_BACK_HEADERS = ("content-type", "request-id", "x-request-id", "retry-after", "x-should-retry")
PASSED_BACK_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-", "retry-after-")


def passed_back(headers: Mapping[str, str]) -> dict[str, str]:
    """The upstream headers the client gets back."""
    return {
        k: v
        for k, v in headers.items()
        if k.lower() in PASSED_BACK_HEADERS or k.lower().startswith(PASSED_BACK_PREFIXES)
    }


# Anthropic's 1M-token context beta (the provider decides which models take it).
LONG_CONTEXT_TOKENS = 1_000_000
# Hints in refusals name the gateway's settings and headers, not CLI flags.
GATEWAY_HINT = (
    "shorten them, raise X-Ctxbudget-Max-Context-Tokens (or serve --max-context-tokens) up to the "
    "model's window, or lower max_tokens"
)


class Refusal(Exception):
    """A request answered by the gateway itself, in the provider's error shape."""

    def __init__(
        self, status: int, message: str, code: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.headers = dict(headers or {})  # what the client is told about its request


def _too_large_code(provider: str) -> str:
    """The error code of a request too large for its window, as the provider codes it."""
    return "context_length_exceeded" if provider == "openai" else "context_too_large"


def _too_large(exc: BudgetExceeded, provider: str) -> Refusal:
    """A request whose untrimmable parts exceed its budget."""
    return Refusal(400, f"ctxbudget: {exc.with_hint(GATEWAY_HINT)}", _too_large_code(provider))


# Library errors as the client is told them: status, code, and what the message adds; the first
# row an error is an instance of applies (a too-large request is coded per provider, below).
_REFUSALS: tuple[tuple[type[CtxBudgetError], int, str, str], ...] = (
    (
        PinnedPrefixChanged,
        409,
        "prefix_changed",
        "; nothing was sent",
    ),
    (CostCeilingExceeded, 400, "cost_ceiling_exceeded", "; nothing was sent"),  # PriceUnknown too
)


def refusal_for(exc: CtxBudgetError, provider: str) -> Refusal:
    """What the client is told when the library refuses its request: a row of :data:`_REFUSALS`,
    a too-large request in the provider's code, else bad input (400, ``invalid_request``, the
    library's ``reserve_output_tokens`` named as the client's ``max_tokens``)."""
    if isinstance(exc, BudgetExceeded):
        return _too_large(exc, provider)
    for kind, status, code, tail in _REFUSALS:
        if isinstance(exc, kind):
            message = (
                exc.with_hint("header X-Ctxbudget-Allow-Prefix-Change: true")
                if isinstance(exc, PinnedPrefixChanged)
                else str(exc)
            )
            return Refusal(status, f"ctxbudget: {message}{tail}", code)
    message = str(exc).replace("reserve_output_tokens", "max_tokens")
    return Refusal(400, f"ctxbudget: {message}", "invalid_request")


class _Bounded(OrderedDict[str, Any]):
    """A dict that forgets its least recently stored keys beyond ``limit``."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: str, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


@dataclass(frozen=True)
class Prepared:
    """A fitted request ready to forward, with what is needed to record it afterwards."""

    body: dict[str, Any]
    model: str
    session: str
    question: str
    report: dict[str, Any]
    estimate_usd: float | None
    proxy_tokens: int
    spec: ModelSpec | None
    calibrate: bool = True  # the billed input is what the estimate counts (see usage.covered_by_estimate)
    overhead_tokens: int = 0  # billed on top by the provider (Anthropic's tool-use system prompt)
    # Policy mode: what the session's next turn is compared with, kept once this turn is answered.
    next_turn: tuple[str, dict[str, Any]] | None = None

    @property
    def proxy_before(self) -> int:
        """The request as sent by the client, in proxy-encoding tokens (the estimate without its
        safety factor)."""
        return round(float(self.report["tokens_before"]) / (self.report["safety_factor"] or 1.0))

    def headers(self) -> dict[str, str]:
        """What the client is told about its request."""
        report = self.report
        out = {
            "x-ctxbudget-session": self.session,
            "x-ctxbudget-tokens-before": str(report["tokens_before"]),
            "x-ctxbudget-tokens-after": str(report["tokens_after"]),
            "x-ctxbudget-trimmed": "false" if report.get("passed_through", False) else "true",
        }
        if self.estimate_usd is not None:
            out["x-ctxbudget-estimated-cost-usd"] = f"{self.estimate_usd:.6f}"
        return out


def _last_user_text(body: Mapping[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return " ".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))
    return ""


def _session_id(request: Request, provider: Provider, body: Mapping[str, Any]) -> str:
    given = request.headers.get(SESSION_HEADER)
    if given:
        return given[:200]
    messages = body.get("messages") or []
    first_user = next((m for m in messages if isinstance(m, dict) and m.get("role") == "user"), {})
    stable = json.dumps(
        [provider.name, body.get("model"), body.get("system"), first_user], sort_keys=True, default=str
    )
    return "auto-" + hashlib.sha256(stable.encode("utf-8")).hexdigest()[:16]


def _has_cache_control(value: Any) -> bool:
    """Whether the client marked any cache breakpoint (a ``cache_control`` key, not text mentioning one)."""
    if isinstance(value, Mapping):
        return "cache_control" in value or any(_has_cache_control(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_cache_control(v) for v in value)
    return False


def _with_system_breakpoint(body: dict[str, Any], tokens: int, spec: ModelSpec | None) -> dict[str, Any]:
    """Mark the end of a cacheable system prompt when the client marked nothing itself."""
    system = body.get("system")
    if spec is None or spec.cache.mode != "explicit" or not system or _has_cache_control(body):
        return body
    if tokens < spec.cache.min_cacheable_tokens:
        return body
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": system}] if isinstance(system, str) else [dict(b) for b in system]
    )
    blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
    return {**body, "system": blocks}


def _prepared(
    body: Mapping[str, Any],
    out: dict[str, Any],
    session: str,
    report: dict[str, Any],
    estimate_usd: float | None,
    spec: ModelSpec | None,
    *,
    calibrate: bool,
) -> Prepared:
    """What is forwarded and recorded for a fitted or assembled body."""
    exact = report["exact"]
    proxy = 0 if exact else round(report["tokens_after"] / (report["safety_factor"] or 1.0))
    model = str(body["model"])
    return Prepared(
        out,
        model,
        session,
        _last_user_text(body),
        report,
        estimate_usd,
        proxy,
        spec,
        calibrate=calibrate,
        overhead_tokens=tool_prompt_tokens(model, body),
    )


def _asked_output(body: Mapping[str, Any]) -> int:
    """The reply size the client asks for (0 when it does not say)."""
    for name in BODY_OUTPUT_FIELDS:
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def _capped_output(body: dict[str, Any], policy: Policy) -> dict[str, Any]:
    """A reply size above the policy's ``max_output_tokens`` is lowered to it: the policy prices
    and budgets the reply."""
    for name in BODY_OUTPUT_FIELDS:
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > policy.max_output_tokens:
            body = {**body, name: policy.max_output_tokens}
    return body


def _for_next_turn(report: Mapping[str, Any]) -> dict[str, Any]:
    """What the next turn's assembly reads from this one: the breakpoints' prefix hashes and the
    pinned prefix (not the whole report: sessions held in memory stay small)."""
    return {
        "breakpoints": [{"prefix_sha256": b["prefix_sha256"]} for b in report.get("breakpoints", [])],
        "pinned_prefix_sha256": report.get("pinned_prefix_sha256"),
        "pinned_prefix_text": report.get("pinned_prefix_text", ""),
    }


def _without_tool_marks(body: dict[str, Any]) -> dict[str, Any]:
    """Tool definitions without the client's cache marks."""
    tools = body.get("tools")
    if not isinstance(tools, list) or not any(isinstance(t, dict) and "cache_control" in t for t in tools):
        return body
    return {**body, "tools": without_cache_marks(tools)}


def _rounded(usd: float | None) -> float | None:
    return None if usd is None else round(usd, 6)


class Gateway:
    """State shared by the handlers: catalog, store, calibration, metrics, the upstream client."""

    def __init__(self, config: GatewayConfig, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self.catalog = load_catalog(config.catalog_paths)
        self.store = SQLiteStore(config.store_path, busy_timeout_seconds=config.store_busy_timeout_seconds)
        self.calibration = Calibration()
        self.metrics = Metrics()
        timeout = httpx.Timeout(config.timeout_seconds, connect=min(10.0, config.timeout_seconds))
        self.client = httpx.AsyncClient(timeout=timeout, transport=transport)
        # Per-session state (policy mode's previous turn) is bounded: the oldest sessions are forgotten.
        self._previous = _Bounded(config.max_sessions_in_memory)
        names = {config.policy, *config.allowed_policies} - {None}
        self.policies: dict[str, Policy] = {str(n): load_policy(str(n)) for n in sorted(names, key=str)}
        self._ids = itertools.count(1)
        self.counter = UpstreamCounter(self.client, self.upstream(ANTHROPIC) + "/count_tokens")

    # ---- what the routes ask of the service ---------------------------------------------------
    def body_limit(self) -> int:
        """The largest request body accepted, in bytes."""
        return self.config.max_body_bytes

    def settings_for(self, headers: Mapping[str, str]) -> RequestSettings:
        """The request's budgets: the server's, narrowed by the client's headers."""
        return request_settings(self.config, headers)

    def count_tokens(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The count_tokens answer for an Anthropic body (calibrated estimate where not exact)."""
        model = str(body.get("model", ""))
        factor = self.model_for(model)[1]
        return fit_count(
            body,
            model=model,
            input_format="anthropic",
            catalog=self.catalog,
            safety_factor=factor,
            unknown_model=self.config.unknown_model,
        )

    async def exact_count(
        self, body: Mapping[str, Any], headers: list[tuple[str, str]], proxy: int
    ) -> int | None:
        """The upstream's own count of ``body`` (``--count-with-upstream``), or None."""
        return await self.counter.count(body, headers, proxy)

    async def send(
        self, provider: Provider, body: Mapping[str, Any], headers: list[tuple[str, str]], query: str = ""
    ) -> httpx.Response:
        """Forward ``body`` to the provider's upstream (streamed); a timeout or an unreachable
        upstream is a :class:`Refusal` (504, 502), counted."""
        url = self.upstream(provider) + (f"?{query}" if query else "")  # e.g. the SDK's ?beta=true
        request = self.client.build_request(
            "POST", url, headers=headers, content=json.dumps(body).encode("utf-8")
        )
        try:
            return await self.client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            self.note_upstream_error("timeout")
            raise Refusal(504, f"upstream timed out: {type(exc).__name__}", "upstream_timeout") from exc
        except httpx.HTTPError as exc:
            self.note_upstream_error("connection")
            raise Refusal(502, f"upstream unreachable: {type(exc).__name__}", "upstream_unreachable") from exc

    def note_upstream_error(self, kind: str) -> None:
        """Count an upstream fault of ``kind``."""
        self.metrics.upstream_errors.labels(kind).inc()

    def note_internal_error(self, stage: str) -> None:
        """Count an unexpected error at ``stage`` (answered as a 400, never a bare 500)."""
        self.metrics.internal_errors.labels(stage).inc()

    def note_request(self, path: str, outcome: str) -> None:
        """Count a request by path and outcome."""
        self.metrics.requests.labels(path, outcome).inc()

    def metrics_text(self) -> bytes:
        """The Prometheus text of the gateway's metrics."""
        return self.metrics.render()

    def next_request_id(self) -> int:
        """A number for the log line of each request."""
        return next(self._ids)

    def upstream(self, provider: Provider) -> str:
        """The upstream URL: the base given with or without its ``/v1``, then the API's path."""
        base = self.config.anthropic_upstream if provider.name == "anthropic" else self.config.openai_upstream
        return base.rstrip("/").removesuffix("/v1") + provider.path

    def model_label(self, spec: ModelSpec | None) -> str:
        """The metrics label of a model: its catalog id, or "other" (clients choose ids freely)."""
        return spec.id if spec is not None else "other"

    # ---- preparing -------------------------------------------------------------------------
    def model_for(self, model: str, factor: float | None = None) -> tuple[ModelSpec | None, float | None]:
        """``model``'s catalog entry and the safety factor its estimate is scaled by: the
        calibrated one, or ``factor`` (from an exact count of this request); None when the count
        is exact or the id is unknown (the catalog's own factor then).

        An id the catalog cannot resolve is refused (400, ``unknown_model``) unless the gateway
        runs with ``unknown_model="floor"``.
        """
        spec = self.catalog.find_model(model)
        if spec is None and self.config.unknown_model != "floor":
            error = UnknownModelError(model, self.catalog.closest(model))
            raise Refusal(400, f"ctxbudget: {error}", "unknown_model") from error
        tokenizer = self.catalog.tokenizer_for(model)
        if tokenizer.exact or spec is None:
            return spec, None
        return spec, factor or self.calibration.factor(spec.id, tokenizer.safety_factor)

    def _refused(self, exc: CtxBudgetError, provider: Provider) -> Refusal:
        """A library error as the client is told it (:func:`refusal_for`), counted when it is a
        refusal rather than bad input."""
        refusal = refusal_for(exc, provider.name)
        if refusal.code != "invalid_request":
            self.metrics.decisions.labels("refused").inc()
        return refusal

    def _assemble(
        self, provider: Provider, body: dict[str, Any], session: str, model: str, settings: RequestSettings
    ) -> Prepared:
        """Map the chat body onto the policy's tiers, assemble, and keep every other field. The
        request's token budget narrows the policy's envelope, a client's ceiling only lowers the
        policy's, and the reply the client asks for is priced (at most the policy's output)."""
        assert settings.policy is not None
        spec, factor = self.model_for(model)
        policy = self.policies[settings.policy]
        budget = self._budget(spec, settings)
        if budget:
            policy = dataclasses.replace(policy, envelope_tokens=min(policy.envelope_tokens, budget))
        ceilings = [c for c in (settings.cost_ceiling_usd, policy.cost_ceiling_usd) if c is not None]
        output = _asked_output(body)
        try:
            before = fit_count(
                body,
                model=model,
                input_format=provider.name,
                catalog=self.catalog,
                safety_factor=factor,
                unknown_model="floor",
            )
            result = assemble(
                body,
                policy=policy,
                model=model,
                output_format=provider.name,
                input_format=provider.name,
                previous=self._previous_turn(settings.policy, session),
                catalog=self.catalog,
                safety_factor=factor,
                cost_ceiling_usd=min(ceilings) if ceilings else None,
                expected_output_tokens=min(output, policy.max_output_tokens) if output else None,
                allow_prefix_change=settings.allow_prefix_change,
            )
        except CtxBudgetError as exc:
            raise self._refused(exc, provider) from exc
        assembled = result.request
        assert isinstance(assembled, dict)
        keys = ("system", "messages") if provider.name == "anthropic" else ("messages",)
        out = _capped_output({**body, **{k: assembled[k] for k in keys if k in assembled}}, policy)
        out = _without_tool_marks(out)  # the plan owns the breakpoints (1h marks must come first)
        assembly = result.report.to_dict()
        report = {
            **assembly,
            "tokens_after": result.report.tokens,
            "tokens_before": before["tokens"],
            "passed_through": False,
        }
        self._count_unassembled(provider, out, report, policy, spec, factor, ceilings)
        self.metrics.decisions.labels("assembled").inc()
        covered = covered_by_estimate(body, before.get("estimated_parts"))
        prepared = _prepared(body, out, session, report, report["cost_usd"], spec, calibrate=covered)
        next_turn = (f"{settings.policy}\x00{session}", _for_next_turn(assembly))
        return dataclasses.replace(prepared, next_turn=next_turn)

    def _previous_turn(self, policy: str, session: str) -> Mapping[str, Any] | None:
        """The session's previous answered turn under ``policy``: from memory, else from the store
        (after a restart, or once the session has left the bounded memory)."""
        key = f"{policy}\x00{session}"
        found = self._previous.get(key)
        if found is not None:
            return found  # type: ignore[no-any-return]
        last = self.store.last_turn(session)
        if last is None or last.report.get("policy") != policy or "pinned_prefix_sha256" not in last.report:
            return None
        state = _for_next_turn(last.report)
        self._previous.put(key, state)
        return state

    def _count_unassembled(
        self,
        provider: Provider,
        out: dict[str, Any],
        report: dict[str, Any],
        policy: Policy,
        spec: ModelSpec | None,
        factor: float | None,
        ceilings: list[float],
    ) -> None:
        """What the assembly does not render but the provider reads and bills (tool definitions)
        is counted into the request and priced; past the envelope or the ceiling it is refused."""
        model = str(out.get("model", ""))
        sent = fit_count(
            out,
            model=model,
            input_format=provider.name,
            catalog=self.catalog,
            safety_factor=factor,
            unknown_model="floor",
        )["tokens"]
        extra = sent - int(report["tokens"])
        if extra <= 0:
            return
        report["tokens_after"] = sent
        added = self._estimate(spec, extra, 0)
        if added is not None and report.get("cost_usd") is not None:
            report["cost_usd"] = round(report["cost_usd"] + added, 6)
        if sent > policy.prompt_tokens:
            self.metrics.decisions.labels("refused").inc()
            raise Refusal(
                400,
                f"ctxbudget: the assembled request with its tool definitions needs {sent:,} tokens, more than "
                f"the {policy.prompt_tokens:,} the policy {policy.name!r} allows; shorten the tools",
                _too_large_code(provider.name),
            )
        if ceilings and report.get("cost_usd") is not None and report["cost_usd"] > min(ceilings):
            self.metrics.decisions.labels("refused").inc()
            raise Refusal(
                400,
                f"ctxbudget: estimated cost ${report['cost_usd']:.4f} with the tool definitions is above the "
                f"ceiling ${min(ceilings):.4f}; nothing was sent",
                "cost_ceiling_exceeded",
            )

    def prepare(
        self,
        provider: Provider,
        body: dict[str, Any],
        session: str,
        settings: RequestSettings | None = None,
        exact_factor: float | None = None,
    ) -> Prepared:
        """Fit (or assemble) the body; with ``exact_factor`` (the provider's count of it over its
        proxy count) the estimate for this request is the exact one."""
        settings = settings or RequestSettings(
            self.config.max_context_tokens, self.config.cost_ceiling_usd, self.config.policy
        )
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise Refusal(400, "`model` is required", "invalid_request")
        if settings.policy is not None:
            return self._assemble(provider, body, session, model, settings)
        spec, factor = self.model_for(model, exact_factor)
        try:
            result = fit(
                body,
                model=model,
                input_format=provider.name,
                catalog=self.catalog,
                safety_factor=factor,
                max_context_tokens=self._budget(spec, settings),
                unknown_model=self.config.unknown_model,
            )
        except CtxBudgetError as exc:
            raise self._refused(exc, provider) from exc
        report = result.report.to_dict()
        self.metrics.decisions.labels("passed_through" if result.report.passed_through else "trimmed").inc()
        system_tokens = sum(i["tokens_after"] for i in report["items"] if i["component"] == "system")
        out = (
            _with_system_breakpoint(result.request, system_tokens, spec)
            if provider.name == "anthropic"
            else result.request
        )
        reserve = result.report.reserve_output_tokens
        n = body.get("n")
        choices = n if isinstance(n, int) and not isinstance(n, bool) and n > 1 else 1
        estimate = self._estimate(spec, report["tokens_after"], reserve * choices)  # n replies, each priced
        try:
            self._check_ceiling(model, estimate, settings.cost_ceiling_usd)
        except Refusal as refusal:
            refusal.headers = _prepared(body, out, session, report, estimate, spec, calibrate=False).headers()
            raise
        report["counted_by"] = "upstream" if exact_factor is not None else "estimate"
        # an exact count is not the estimate's error: it does not calibrate
        covered = covered_by_estimate(body, report.get("estimated_parts")) and exact_factor is None
        return _prepared(body, out, session, report, estimate, spec, calibrate=covered)

    def depends_on_estimate(self, provider: Provider, prepared: Prepared) -> bool:
        """Whether an exact count could change the fit: a Claude estimate that was cut though
        the request fits without the estimate's safety factor."""
        report = prepared.report
        if not self.config.count_with_upstream or provider.name != "anthropic" or report["exact"]:
            return False
        if report.get("passed_through", True) or report.get("counted_by") != "estimate":
            return False
        return prepared.proxy_before <= int(report["available_tokens"])

    @staticmethod
    def _budget(spec: ModelSpec | None, settings: RequestSettings) -> int:
        """The request's window: the client's or server's budget, never above the model's own
        (a Claude model's is 1M tokens when the client turned on the 1M-context beta)."""
        window = spec.context_window if spec else FLOOR_WINDOW_TOKENS  # an unknown id: the floor
        if settings.long_context and spec is not None and "claude" in spec.id:
            window = max(window, LONG_CONTEXT_TOKENS)
            return min(settings.max_context_tokens or window, window)
        return min(settings.max_context_tokens, window) if settings.max_context_tokens else 0

    def _check_ceiling(self, model: str, estimate: float | None, ceiling: float | None) -> None:
        if ceiling is None:
            return
        if estimate is None:
            self.metrics.decisions.labels("refused").inc()
            raise Refusal(
                400, f"ctxbudget: {PriceUnknown(model_id=model, ceiling_usd=ceiling)}", "price_unknown"
            )
        if estimate > ceiling:
            self.metrics.decisions.labels("refused").inc()
            raise Refusal(
                400,
                f"ctxbudget: estimated cost ${estimate:.4f} is above the ceiling ${ceiling:.4f} per "
                "request; nothing was sent (X-Ctxbudget-Cost-Ceiling may only lower the server's)",
                "cost_ceiling_exceeded",
            )

    @staticmethod
    def _estimate(spec: ModelSpec | None, input_tokens: int, output_tokens: int) -> float | None:
        if spec is None or spec.prices is None:
            return None
        return price_turn(
            spec.prices,
            uncached_tokens=input_tokens,
            write_5m_tokens=0,
            write_1h_tokens=0,
            read_tokens=0,
            output_tokens=output_tokens,
        ).total_usd

    # ---- recording -------------------------------------------------------------------------
    def _actual_cost(self, spec: ModelSpec | None, usage: Usage) -> float | None:
        if spec is None or spec.prices is None:
            return None
        return price_turn(
            spec.prices,
            uncached_tokens=usage.uncached_tokens,
            write_5m_tokens=usage.cache_write_tokens - usage.cache_write_1h_tokens,
            write_1h_tokens=usage.cache_write_1h_tokens,
            read_tokens=usage.cache_read_tokens,
            output_tokens=usage.output_tokens,
        ).total_usd

    def _store_turn(self, prepared: Prepared, answer: str, usage: Usage | None) -> None:
        index = self.store.count_turns(prepared.session) + 1
        if index == 1:
            # The first turn creates the session (a concurrent request may have created it already).
            with contextlib.suppress(ConfigError):
                self.store.create(
                    SessionMeta(name=prepared.session, policy="gateway", model=prepared.model, base={})
                )
        usage_record = {
            "estimated": {
                "input_tokens": prepared.report["tokens_after"],
                "cost_usd": prepared.estimate_usd,
                "exact": prepared.report["exact"],
            }
        }
        if usage:
            usage_record["actual"] = {
                **usage.to_dict(),
                "cost_usd": _rounded(self._actual_cost(prepared.spec, usage)),
            }
        turn = Turn(
            index=index, question=prepared.question, answer=answer, report=prepared.report, usage=usage_record
        )
        # numbered by the store inside its transaction: concurrent turns of a session never collide
        self.store.append_turn(prepared.session, turn, [], next_index=True)

    async def record(self, provider: Provider, prepared: Prepared, answer: str, raw_usage: Any) -> None:
        """Metrics, calibration and the stored turn for an answer the client got. Never raises: a
        failure to record is logged and counted, the answer stands."""
        if prepared.next_turn is not None:  # only an answered turn is the next one's baseline
            self._previous.put(*prepared.next_turn)
        try:
            usage = normalize_usage(provider.name, raw_usage)
            self._observe(prepared, usage)
            await run_in_threadpool(self._store_turn, prepared, answer, usage)
        except Exception as exc:  # the answer was given: recording must not take it back
            self.metrics.record_failures.labels(type(exc).__name__).inc()
            logger.error(
                "session=%s could not record the turn: %s: %s", prepared.session, type(exc).__name__, exc
            )

    def _observe(self, prepared: Prepared, usage: Usage | None) -> None:
        model = self.model_label(prepared.spec)
        if prepared.estimate_usd is not None:
            self.metrics.cost_estimated.labels(model).inc(prepared.estimate_usd)
        if not usage:
            return
        self.metrics.tokens_in.labels(model).inc(usage.input_tokens)
        self.metrics.tokens_out.labels(model).inc(usage.output_tokens)
        self.metrics.cache_read.labels(model).inc(usage.cache_read_tokens)
        self.metrics.cache_write.labels(model).inc(usage.cache_write_tokens)
        actual = self._actual_cost(prepared.spec, usage)
        if actual is not None:
            self.metrics.cost_actual.labels(model).inc(actual)
        if prepared.report["exact"] or not prepared.calibrate or prepared.spec is None:
            return
        default = self.catalog.tokenizer_for(prepared.model).safety_factor
        billed = usage.input_tokens - prepared.overhead_tokens  # what the estimate stands for
        ignored = self.calibration.ignored
        factor = self.calibration.observe(prepared.spec.id, prepared.proxy_tokens, billed, default)
        if self.calibration.ignored > ignored:
            self.metrics.calibration_ignored.labels(model).inc()
        self.metrics.safety_factor.labels(model).set(factor)
