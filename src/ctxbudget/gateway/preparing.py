"""Preparing a request before it is sent: fitted into its model's window, or assembled by a policy.

Every request is fitted into its model's window (with the client's ``max_tokens`` held back for
the reply), its history cut in steps that the session's next turns hold, an Anthropic body given
rolling cache breakpoints (:mod:`.caching`), and the turn is priced and refused above the ceiling
before anything is sent. In policy
mode the chat body is mapped onto the policy's tiers and assembled against the session's previous
turn; what the assembly does not render but the provider bills (tool definitions) is counted in.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..assembly import AssemblyResult, Policy, assemble, within_output_cap
from ..catalog.catalog import Catalog
from ..catalog.values import ModelSpec
from ..cost import replies_asked, reply_tokens_asked
from ..errors import BudgetExceeded, CostCeilingExceeded, CtxBudgetError, StoreError, usd
from ..fitting import BODY_OUTPUT_FIELDS, FitResult, fit
from ..fitting import count as fit_count
from ..formats.jsonvalue import json_kind
from ..session.store import SessionStore
from .bodies import (
    capped_output,
    filled_output,
    with_system_breakpoint,
    without_tool_marks,
)
from .caching import ConversationState, cache_turn, marks_written, reads_written
from .calibration import Calibration
from .memory import SessionKinds, TurnMemory
from .metrics import Metrics
from .prepared import Baseline, Prepared, build_prepared, for_next_turn
from .pricing import (
    MARKS_WRITTEN,
    UNKNOWN_AGE,
    beta_window_warnings,
    ceiling_refusal,
    estimate_usd,
    long_context,
    window_budget,
)
from .providers import Provider
from .refusals import NO_RETRY, Refusal, refusal_as, refusal_for, unknown_model
from .settings import RequestSettings
from .usage import covered_by_estimate

__all__ = ["Preparer"]


@dataclass(frozen=True)
class ToolDefinitions:
    """What the assembly does not render but the provider reads and bills (tool definitions):
    the request's tokens as sent, those beyond the assembly's count, the request's tokens as
    reported (the assembly's count when nothing is beyond it), and the turn's cost with them
    priced in."""

    sent_tokens: int
    extra_tokens: int
    tokens_after: int
    cost_usd: float | None


def _refusal(exc: CtxBudgetError, provider: Provider, *, narrowed: bool = True) -> Refusal:
    """The library's refusal as ``provider``'s client is told it: the reply size named by the
    body's own field (``max_output_tokens`` in a Responses body); ``narrowed``: whether a budget
    below the model's window was in force."""
    refusal = refusal_for(exc, provider.name, narrowed=narrowed)
    if provider.input_format != "responses":
        return refusal
    # the library's reserve, named max_tokens for the chat APIs; a body's own $.max_tokens stays
    message = re.sub(r"(?<!\$\.)\bmax_tokens\b", "max_output_tokens", str(refusal))
    return Refusal(refusal.status, message, refusal.code, refusal.headers, counted=refusal.counted)


def _told_of(before: Mapping[str, Any] | None, exc: CtxBudgetError) -> dict[str, str]:
    """What a policy-mode refusal tells the client about its request, as far as it is known: the
    request as sent, counted, and the cost estimate a ceiling refused."""
    told = {} if before is None else {"x-ctxbudget-tokens-before": str(before["tokens"])}
    if isinstance(exc, CostCeilingExceeded) and exc.estimate_usd is not None:
        told["x-ctxbudget-estimated-cost-usd"] = f"{exc.estimate_usd:.6f}"
    return told


def _about_size(exc: CtxBudgetError) -> bool:
    """A refusal of a request's size or cost, which its count explains (X-Ctxbudget-Tokens-Before)."""
    return isinstance(exc, BudgetExceeded | CostCeilingExceeded)


def model_of(body: Mapping[str, Any]) -> str:
    """The body's model id: a 400 when it has none, or one that is not a string of text."""
    model = body.get("model")
    if model is None or model == "":
        raise Refusal(400, "`model` is required", "invalid_request")
    if not isinstance(model, str):
        raise Refusal(
            400, f"`model` must be a string (a model id), got {json_kind(model)}", "invalid_request"
        )
    if not model.strip():  # the library refuses it too, as a misuse: here it is the body's
        raise Refusal(400, f"`model` is required (it is blank: {model!r})", "invalid_request")
    return model


class Preparer:
    """Fits or assembles requests: the catalog, calibrated factors, policies, and the previous
    turn of each policy-mode session (bounded in memory, else read from the store)."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        calibration: Calibration,
        metrics: Metrics,
        policies: Mapping[str, Policy],
        store: SessionStore,
        memory: TurnMemory,
        kinds: SessionKinds,
        unknown_model: Literal["error", "floor"],
        low_water: float | None = None,
        server_ceiling: bool = False,
    ) -> None:
        self.catalog = catalog
        self.calibration = calibration
        self.metrics = metrics
        self.policies = policies
        self.store = store
        self.memory = memory
        self.kinds = kinds
        self.unknown_model = unknown_model
        self.low_water = low_water  # None: no conversation caching (the system prompt's mark only)
        self.server_ceiling = server_ceiling  # the server set --cost-ceiling: it replaces a policy's

    def model_for(
        self, model: str, factor: float | None = None, *, assembled: bool = False
    ) -> tuple[ModelSpec | None, float | None]:
        """``model``'s catalog entry and the safety factor its estimate is scaled by: the
        calibrated one, or ``factor`` (from an exact count of this request); None when the count
        is exact or the id is unknown (the catalog's own factor then).

        An id the catalog cannot resolve is refused (400, ``unknown_model``) unless the gateway
        runs with ``unknown_model="floor"`` and the body is fitted: a policy's assembly
        (``assembled``) needs the model's entry (its window holds the envelope, its prices the
        turn), and under the floor it was refused as bad input, the floor named nowhere.
        """
        spec = self.catalog.find_model(model)
        if spec is None and (self.unknown_model != "floor" or assembled):
            error = self.catalog.unknown(model)
            raise unknown_model(error, assembled=assembled) from error
        tokenizer = self.catalog.tokenizer_for(model)
        if tokenizer.exact or spec is None:
            return spec, None
        return spec, factor or self.calibration.factor(spec.id, tokenizer.safety_factor)

    def count_tokens(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The count_tokens answer for an Anthropic body (calibrated estimate where not exact)."""
        model = model_of(body)
        factor = self.model_for(model)[1]
        return fit_count(
            body,
            model=model,
            input_format="anthropic",
            catalog=self.catalog,
            safety_factor=factor,
            unknown_model=self.unknown_model,
        )

    def prepare(
        self,
        provider: Provider,
        body: dict[str, Any],
        session: str,
        settings: RequestSettings,
        exact_factor: float | None = None,
    ) -> Prepared:
        """Fit (or, with a policy, assemble) the body; a refusal decision is counted."""
        try:
            model = model_of(body)
            if settings.policy is not None and provider.input_format == "responses":
                message = (
                    "ctxbudget: policy mode assembles Messages and Chat Completions bodies; "
                    "send this request to /v1/chat/completions, or without a policy"
                )
                raise Refusal(400, message, "invalid_request")
            self._recordable(session)
            if settings.policy is not None:
                return self._assemble(provider, body, session, model, settings)
            return self._fit(provider, body, session, model, settings, exact_factor)
        except Refusal as refusal:
            if refusal.counted:
                self.metrics.decisions.labels("refused").inc()
            raise

    def _recordable(self, session: str) -> None:
        """Refused before it is sent: a turn for a session that ``session new`` started under a
        policy (:class:`.memory.SessionKinds`), where its answer could not be recorded."""
        policy = self.kinds.foreign_policy(session)
        if policy is not None:
            message = (
                f"ctxbudget: session {session!r} was started by `session new` under the policy "
                f"{policy!r}: its turns are added by `session add`, and the gateway records the chat "
                f"turns it answers in sessions of its own; name another session in X-Ctxbudget-Session. "
                "Nothing was sent upstream"
            )
            raise Refusal(409, message, "session_conflict", NO_RETRY)

    # ---- fit ---------------------------------------------------------------------------------
    def _fit(
        self,
        provider: Provider,
        body: dict[str, Any],
        session: str,
        model: str,
        settings: RequestSettings,
        exact_factor: float | None,
    ) -> Prepared:
        """Fit the body into its window and hold it to the ceiling; with ``exact_factor`` (the
        provider's count of it over its proxy count) the estimate for this request is the exact one."""
        prepared_at = self.memory.clock()  # the provider's cache entries of this turn age from here
        spec, factor = self.model_for(model, exact_factor)
        previous = self.memory.previous_conversation(session) if self.low_water else None
        budget = window_budget(spec, settings)
        result = self._fitted(provider, body, model, factor, budget, previous)
        self.metrics.decisions.labels("passed_through" if result.report.passed_through else "trimmed").inc()
        counted_by = "upstream" if exact_factor is not None else "estimate"
        report = {**result.report.to_dict(), "counted_by": counted_by}
        if long_context(spec, settings):
            report["warnings"] = beta_window_warnings(report["warnings"], budget, spec)
        out, state = self._cached(provider, result.request, report, (model, spec), previous)
        next_turn = (f"fit\x00{session}", state) if state is not None else None
        reserve = result.report.reserve_output_tokens * replies_asked(body)  # n replies, each priced
        # tokens_after holds the tool-use system prompt Anthropic adds (and bills) to a body with tools
        estimate = estimate_usd(spec, report["tokens_after"], reserve, report.get("cache"))
        checked, why = estimate, ""
        unknown_age = previous is not None and previous.idle_seconds is None
        if unknown_age and report.get("cache"):  # a read this process cannot vouch for: priced as written
            checked = estimate_usd(spec, report["tokens_after"], reserve, reads_written(report["cache"]))
            why = UNKNOWN_AGE
        elif (
            self.low_water is None and provider.name == "anthropic" and settings.cost_ceiling_usd is not None
        ):
            # no prediction: what the body's marks cache is priced as written (never below its bill)
            counter = self.catalog.counter_for(model)
            written = marks_written(out, model=model, spec=spec, counter=counter)
            if written:
                checked, why = estimate_usd(spec, report["tokens_after"], reserve, written), MARKS_WRITTEN
        refusal = ceiling_refusal(
            model,
            provider.name,
            checked,
            settings.cost_ceiling_usd,
            why if checked != estimate else "",
        )
        if refusal is not None:
            told = build_prepared(
                body,
                out,
                session,
                report,
                estimate,
                spec,
                calibrate=False,
                input_format=provider.input_format,
            )
            raise refusal.with_headers(told.headers())
        # an exact count is not the estimate's error: it does not calibrate
        covered = covered_by_estimate(body, report.get("estimated_parts")) and exact_factor is None
        return build_prepared(
            body,
            out,
            session,
            report,
            estimate,
            spec,
            calibrate=covered,
            input_format=provider.input_format,
            next_turn=next_turn,
            prepared_at=prepared_at,
        )

    def _cached(
        self,
        provider: Provider,
        fitted: dict[str, Any],
        report: dict[str, Any],
        model: tuple[str, ModelSpec | None],
        previous: ConversationState | None,
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The body to send and the state for the session's next turn: with conversation caching,
        rolling breakpoints and the turn's predicted cache use (in the report); without, an
        Anthropic system prompt's breakpoint alone."""
        if self.low_water is None:
            return self._with_breakpoint(provider, fitted, report, model[1]), None
        # Predictions count with the catalog's estimate, not the calibrated factor: the same
        # turn is predicted the same whatever the gateway learned since.
        counter = self.catalog.counter_for(model[0])
        turn = cache_turn(
            fitted,
            model=model[0],
            spec=model[1],
            counter=counter,
            history_cut=report.get("history_cut"),
            previous=previous,
            marks=provider.name == "anthropic",
        )
        report["cache"] = turn.predicted
        report["conversation"] = turn.state
        return turn.body, turn.state

    def _fitted(
        self,
        provider: Provider,
        body: dict[str, Any],
        model: str,
        factor: float | None,
        budget: int,
        previous: ConversationState | None = None,
    ) -> FitResult:
        """The library's fit of ``body`` (its history cut in steps with conversation caching);
        its refusal in the provider's terms."""
        try:
            return fit(
                body,
                model=model,
                input_format=provider.input_format,
                catalog=self.catalog,
                safety_factor=factor,
                max_context_tokens=budget,
                unknown_model=self.unknown_model,
                count_all=True,  # the headers, the log and the exact-count refit read tokens_before
                low_water=self.low_water,
                previous_cut=previous.history_cut if previous else None,
            )
        except StoreError:
            raise  # the store, not the request: the route answers 503
        except CtxBudgetError as exc:
            told = _told_of(self._counted(provider, body, factor) if _about_size(exc) else None, exc)
            raise _refusal(exc, provider, narrowed=budget > 0).with_headers(told) from exc

    def _counted(
        self, provider: Provider, body: Mapping[str, Any], factor: float | None
    ) -> dict[str, Any] | None:
        """The body's count for a refusal's headers, or None when it cannot be counted."""
        try:
            return self._count(provider, body, factor)
        except CtxBudgetError:
            return None

    @staticmethod
    def _with_breakpoint(
        provider: Provider, body: dict[str, Any], report: Mapping[str, Any], spec: ModelSpec | None
    ) -> dict[str, Any]:
        """An Anthropic body's cacheable system prompt marked for caching (see
        :func:`~.bodies.with_system_breakpoint`); other bodies as fitted."""
        if provider.name != "anthropic":
            return body
        system_tokens = sum(i["tokens_after"] for i in report["items"] if i["component"] == "system")
        return with_system_breakpoint(body, system_tokens, spec)

    def depends_on_estimate(self, provider: Provider, prepared: Prepared, count_with_upstream: bool) -> bool:
        """Whether an exact count could change the fit: a Claude estimate that was cut though
        the request fits without the estimate's safety factor."""
        report = prepared.report
        if not count_with_upstream or provider.name != "anthropic" or report["exact"]:
            return False
        if report.get("passed_through", True) or report.get("counted_by") != "estimate":
            return False
        return prepared.proxy_before + prepared.overhead_tokens <= int(report["available_tokens"])

    # ---- assembly ----------------------------------------------------------------------------
    def _assemble(
        self, provider: Provider, body: dict[str, Any], session: str, model: str, settings: RequestSettings
    ) -> Prepared:
        """Map the chat body onto the policy's tiers, assemble, and keep every other field. The
        request's token budget narrows the policy's envelope, a client's ceiling only lowers the
        policy's, and the reply the client asks for is priced (at most the policy's output)."""
        assert settings.policy is not None
        spec, factor = self.model_for(model, assembled=True)
        policy = self._policy(settings, spec)
        capped = None
        if spec is not None:  # a reply above the model's output cap is refused by the provider
            policy, capped = within_output_cap(policy, spec)
        asked = reply_tokens_asked(body)
        capped_to = policy.max_output_tokens  # the policy's reply, held to the model's cap
        if 0 < asked < policy.max_output_tokens:  # the reply sent is the client's: its room is held
            policy = dataclasses.replace(policy, max_output_tokens=asked)
        # the server's --cost-ceiling replaces the policy's (as assemble --cost-ceiling does); a
        # client's header only lowers whichever stands (settings holds it, narrowed)
        policy_ceiling = None if self.server_ceiling else policy.cost_ceiling_usd
        ceilings = [c for c in (settings.cost_ceiling_usd, policy_ceiling) if c is not None]
        prepared_at = self.memory.clock()
        previous, turns, idle = self.memory.previous_turn(settings.policy, session)
        before, result = self._assembled(
            provider, body, model, settings, policy, factor, ceilings, (previous, idle)
        )
        assembled = result.request
        assert isinstance(assembled, dict)
        keys = ("system", "messages") if provider.name == "anthropic" else ("messages",)
        out = capped_output({**body, **{k: assembled[k] for k in keys if k in assembled}}, policy)
        if not reply_tokens_asked(body):  # no reply size asked for: the policy's cap, as it is priced
            for name in (k for k in BODY_OUTPUT_FIELDS if k in assembled):
                out = filled_output(out, name, policy.max_output_tokens)
        out = without_tool_marks(out)  # the plan owns the breakpoints (1h marks must come first)
        # so also of the client's top-level mark (automatic caching: a mark on the last block, a
        # 1-hour one after the plan's 5-minute marks, which the API refuses), as assemble() drops it
        out.pop("cache_control", None)
        assembly = result.report.to_dict()
        tools = self._tool_definitions(provider, out, assembly, spec, factor)
        self._check_tool_definitions(provider, tools, policy, ceilings)
        if previous is not None and idle is None and ceilings:  # reads this process cannot vouch for
            _check_reads_written(provider, assembly, tools, spec, min(ceilings), replies_asked(out))
        report = {
            **assembly,
            "cost_usd": tools.cost_usd,
            "tokens_after": tools.tokens_after,
            "tokens_before": before["tokens"],
            "passed_through": False,  # re-rendered into tiers, always
            "trimmed": _cut_anything(assembly),
        }
        if capped and not 0 < asked < capped_to:  # the reply sent is the capped one, not the client's
            report["warnings"] = [*assembly["warnings"], capped]
        self.metrics.decisions.labels("assembled").inc()
        covered = covered_by_estimate(body, before.get("estimated_parts"))
        next_turn = (f"{settings.policy}\x00{session}", for_next_turn(assembly))
        return build_prepared(
            body,
            out,
            session,
            report,
            report["cost_usd"],
            spec,
            calibrate=covered,
            input_format=provider.input_format,
            next_turn=next_turn,
            baseline=None if turns is None else Baseline(turns, settings.allow_prefix_change),
            prepared_at=prepared_at,
        )

    def _policy(self, settings: RequestSettings, spec: ModelSpec | None) -> Policy:
        """The request's policy, its envelope narrowed to the request's token budget."""
        assert settings.policy is not None
        policy = self.policies[settings.policy]
        budget = window_budget(spec, settings)
        if budget:
            policy = dataclasses.replace(policy, envelope_tokens=min(policy.envelope_tokens, budget))
        return policy

    def _assembled(
        self,
        provider: Provider,
        body: dict[str, Any],
        model: str,
        settings: RequestSettings,
        policy: Policy,
        factor: float | None,
        ceilings: list[float],
        previous: tuple[Mapping[str, Any] | None, float | None],
    ) -> tuple[dict[str, Any], AssemblyResult]:
        """The client's body counted, and the library's assembly of it after the session's
        previous turn (its report, and the seconds since it was prepared: None where this process
        did not prepare it, and its cache entries are then taken to be alive); a refusal in the
        provider's terms."""
        assert settings.policy is not None
        output = reply_tokens_asked(body)
        before: dict[str, Any] | None = None
        try:
            before = self._count(provider, body, factor)
            result = assemble(
                body,
                policy=policy,
                model=model,
                output_format=provider.name,
                input_format=provider.name,
                previous=previous[0],
                idle_seconds=previous[1],
                catalog=self.catalog,
                safety_factor=factor,
                cost_ceiling_usd=min(ceilings) if ceilings else None,
                expected_output_tokens=min(output, policy.max_output_tokens) if output else None,
                allow_prefix_change=settings.allow_prefix_change,
            )
        except StoreError:
            raise  # the store, not the request: the route answers 503
        except CtxBudgetError as exc:
            raise _refusal(exc, provider).with_headers(_told_of(before, exc)) from exc
        return before, result

    def _count(self, provider: Provider, body: Mapping[str, Any], factor: float | None) -> dict[str, Any]:
        """The library's count of a body in the provider's format (an unknown id at the floor)."""
        return fit_count(
            body,
            model=str(body.get("model", "")),
            input_format=provider.input_format,
            catalog=self.catalog,
            safety_factor=factor,
            unknown_model="floor",
        )

    def _tool_definitions(
        self,
        provider: Provider,
        out: dict[str, Any],
        assembly: Mapping[str, Any],
        spec: ModelSpec | None,
        factor: float | None,
    ) -> ToolDefinitions:
        """What the provider reads beyond the assembly's count, and the turn's cost with it priced in."""
        sent = int(self._count(provider, out, factor)["tokens"])
        extra = max(0, sent - int(assembly["tokens"]))
        cost = assembly.get("cost_usd")
        added = estimate_usd(spec, extra, 0) if extra else None
        if added is not None and cost is not None:
            cost = round(cost + added, 6)
        return ToolDefinitions(sent, extra, sent if extra else int(assembly["tokens"]), cost)

    @staticmethod
    def _check_tool_definitions(
        provider: Provider, tools: ToolDefinitions, policy: Policy, ceilings: list[float]
    ) -> None:
        """Refuse an assembled request its tool definitions take past the policy's prompt limit or
        the ceiling."""
        if not tools.extra_tokens:
            return
        if tools.sent_tokens > policy.prompt_tokens:
            message = (
                f"ctxbudget: the assembled request with its tool definitions needs {tools.sent_tokens:,} "
                f"tokens, more than the {policy.prompt_tokens:,} the policy {policy.name!r} allows; "
                "shorten the tools"
            )
            raise refusal_as(BudgetExceeded, provider.name, message)
        if ceilings and tools.cost_usd is not None and tools.cost_usd > min(ceilings):
            message = (
                f"ctxbudget: estimated cost {usd(tools.cost_usd)} with the tool definitions is above the "
                f"ceiling {usd(min(ceilings))}; nothing was sent"
            )
            raise refusal_as(CostCeilingExceeded, provider.name, message)


def _cut_anything(assembly: Mapping[str, Any]) -> bool:
    """Whether the assembly dropped, compacted or cut any item (``X-Ctxbudget-Trimmed``)."""
    items = [i for t in assembly["tiers"] for i in t["items"]]
    items += [i for block in ("ledger", "current_turn") for i in assembly[block]["items"]]
    return any(i["action"] != "kept" for i in items)


def _check_reads_written(
    provider: Provider,
    assembly: Mapping[str, Any],
    tools: ToolDefinitions,
    spec: ModelSpec | None,
    ceiling: float,
    replies: int = 1,
) -> None:
    """Refuse an assembled turn whose predicted cache reads, written instead, take it past the
    ceiling: the session's previous turn was not prepared by this process, so the provider may no
    longer hold what they read. The turn as sent is priced, its tool definitions and each of its
    ``replies`` (OpenAI's ``n``, as the assembly prices them) included."""
    cache = assembly.get("cache") or {}
    if not cache.get("read_tokens") or assembly.get("cost_usd") is None or tools.cost_usd is None:
        return
    hour = sum(b["read_tokens"] for b in assembly.get("breakpoints", ()) if b.get("ttl") == "1h")
    figures = {**cache, "read_1h_tokens": hour}
    output = int(assembly["expected_output_tokens"]) * replies
    written = estimate_usd(spec, int(assembly["tokens"]), output, reads_written(figures))
    if written is None:
        return
    cost = round(written + (tools.cost_usd - float(assembly["cost_usd"])), 6)  # as the library rounds it
    refusal = ceiling_refusal(str(assembly["model"]), provider.name, cost, ceiling, UNKNOWN_AGE)
    if refusal is not None:
        raise refusal
