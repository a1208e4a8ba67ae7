"""Play a scenario through sessions, assembly and the gateway, turn by turn, and measure it.

Per turn: tokens per tier, predicted cache writes, reads and uncached input, cost, ceiling status,
assembly latency, evidence kept verbatim, compaction; and, sent through the real gateway to a fake
upstream that bills and times like Anthropic (:mod:`.billing`) on a virtual clock with the
scenario's idle gaps, the billed cache reads and writes, the billed cost and the modelled
end-to-end latency. The same turns are also priced for two
baselines with the catalog's real prices: raw full injection (everything, every turn, no cache)
and naive truncation of the same context to its first 16,000 tokens (no cache).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from ..assembly import block_texts, load_policy
from ..catalog.catalog import Catalog, load_catalog
from ..cost import price_turn
from ..errors import ConfigError, CtxBudgetError, InvalidRequestError
from ..gateway.config import GatewayConfig
from ..gateway.routes import create_app
from ..gateway.service import Gateway
from ..session.session import Session
from ..session.store import SQLiteStore
from .billing import BillingUpstream, LatencyModel
from .figures import baselines, naive_keeps, strategies, summary
from .scenario import Scenario
from .standin import stand_in_answer

__all__ = ["SimulationResult", "run_simulation"]


@dataclass(frozen=True)
class SimulationResult:
    """One object per turn, the summary, the strategy comparison, and each turn's request body."""

    turns: list[dict[str, Any]]
    summary: dict[str, Any]
    strategies: list[dict[str, Any]]
    requests: list[dict[str, Any] | str] = field(default_factory=list)


def _item_text(item: Mapping[str, Any]) -> str:
    """An item's text, given as ``text`` or as ``content`` text blocks."""
    if isinstance(item.get("text"), str):
        return str(item["text"])
    blocks = item.get("content") or []
    return "\n".join(str(b.get("text", "")) for b in blocks if isinstance(b, Mapping))


def _evidence(scenario: Scenario) -> list[str]:
    return [_item_text(i) for i in scenario.base.get("items", []) if i.get("kind") == "evidence"]


def _blocks_of(report: dict[str, Any]) -> dict[str, int]:
    """Tokens per tier in body order: the ledger (Block 3) stands before the rolling tier."""
    out: dict[str, int] = {}
    for tier in report["tiers"]:
        if tier["eviction"] == "rolling":
            out["ledger"] = report["ledger"]["tokens"]
        out[tier["name"]] = tier["tokens"]
    out.setdefault("ledger", report["ledger"]["tokens"])
    return out


def _turn_row(
    n: int, report: dict[str, Any], latency_ms: float, verbatim: float, compaction: Any
) -> dict[str, Any]:
    cache = report["cache"]
    return {
        "turn": n,
        "input_tokens": report["tokens"],
        "tiers": _blocks_of(report),
        "current_turn_tokens": report["current_turn_tokens"],
        "cache_write_tokens": cache["write_tokens"],
        "cache_read_tokens": cache["read_tokens"],
        "uncached_tokens": cache["uncached_tokens"],
        "cost_usd": report["cost_usd"],
        "within_ceiling": report["cost_ceiling_usd"] is None
        or report["cost_usd"] <= report["cost_ceiling_usd"],
        "assembly_ms": round(latency_ms, 2),
        "evidence_verbatim_ratio": verbatim,
        "compaction": compaction,
    }


@dataclass
class _Wire:
    """The gateway in front of the billing upstream, in process: an ASGI client, the fake."""

    client: httpx.AsyncClient
    upstream: BillingUpstream
    gateway: Gateway

    async def bill(
        self,
        body: dict[str, Any],
        name: str,
        answer: str,
        session: Session,
        assembly_ms: float,
        clock: Callable[[], float],
    ) -> dict[str, Any]:
        """Send one turn through the gateway; what it was billed, and how long it took end to end
        (the measured assembly and gateway time plus the modelled upstream time)."""
        self.upstream.answer = answer
        hop = clock()
        session_header = {"X-Ctxbudget-Session": quote(name, safe="")}  # a header value is ASCII
        response = await self.client.post("/v1/messages", json=body, headers=session_header)
        if response.status_code != 200:
            raise ConfigError(f"the gateway answered {response.status_code}: {response.text[:300]}")
        local_ms = assembly_ms + (clock() - hop) * 1000
        bill = self.upstream.bills[-1]
        self.upstream.now += bill.total_ms / 1000  # the clock moves on by the reply's time
        return {
            **_billed_cost(session, response.json()["usage"]),
            "first_token_ms": round(bill.first_token_ms, 1),
            "end_to_end_ms": round(local_ms + bill.total_ms, 1),
            "reply_seconds": bill.total_ms / 1000,
        }


def _wire(folder: str, catalog_paths: tuple[str, ...], session: Session, latency: LatencyModel) -> _Wire:
    spec = session.catalog.get_model(session.meta.model)
    upstream = BillingUpstream(counter=session.counter, rules=spec.cache, latency=latency)
    config = GatewayConfig(
        store_path=str(Path(folder) / "gateway.db"),
        anthropic_upstream="http://billing-upstream.invalid",
        catalog_paths=catalog_paths,
        # The assembly plans the turn's breakpoints itself (its predictions are what is checked).
        conversation_cache=False,
    )
    app = create_app(config, httpx.MockTransport(upstream.handle))
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway.local")
    return _Wire(client, upstream, app.state.gateway)


def _billed_cost(session: Session, usage: Mapping[str, Any]) -> dict[str, Any]:
    prices = session.catalog.get_model(session.meta.model).prices
    creation = usage.get("cache_creation") or {}
    hour = int(creation.get("ephemeral_1h_input_tokens", 0))
    write = int(usage.get("cache_creation_input_tokens", 0))
    read = int(usage.get("cache_read_input_tokens", 0))
    uncached = int(usage.get("input_tokens", 0))
    cost = (
        price_turn(
            prices,
            uncached_tokens=uncached,
            write_5m_tokens=write - hour,
            write_1h_tokens=hour,
            read_tokens=read,
            output_tokens=int(usage.get("output_tokens", 0)),
        ).total_usd
        if prices
        else None
    )
    return {
        "input_tokens": uncached + write + read,
        "cache_read_tokens": read,
        "cache_write_tokens": write,
        "cache_write_1h_tokens": hour,
        "uncached_tokens": uncached,
        "output_tokens": int(usage.get("output_tokens", 0)),
        "cost_usd": round(cost, 6) if cost is not None else None,
    }


def _check_own_names(scenario: Scenario, catalog: Catalog, model: str | None, policy: str | None) -> None:
    """The scenario's own model and policy (not the caller's options), refused at their place
    (``$.model``, ``$.policy``), where the error named neither the place nor, through the CLI,
    the file."""
    own = (
        ("$.policy", policy, scenario.policy, load_policy),
        ("$.model", model, scenario.model, catalog.get_model),
    )
    for place, given, named, check in own:
        if given is None:
            try:
                check(named)
            except (ConfigError, InvalidRequestError) as exc:
                raise InvalidRequestError(str(exc), place) from None


def run_simulation(
    scenario: Scenario,
    *,
    model: str | None = None,
    policy: str | None = None,
    store_path: str = ":memory:",
    catalog: Catalog | None = None,
    catalog_paths: tuple[str, ...] = (),
    clock: Callable[[], float] = time.perf_counter,
    latency: LatencyModel | None = None,
) -> SimulationResult:
    """Play every turn of ``scenario``: assembled by a session, sent through the gateway to a fake
    upstream that bills and times like Anthropic (models that cache with explicit breakpoints;
    others are predicted only). Returns per-turn rows, the summary, the comparison and the bodies."""
    catalog = catalog or load_catalog(catalog_paths)
    _check_own_names(scenario, catalog, model, policy)
    store = SQLiteStore(store_path)
    try:
        session = Session.create(
            store,
            scenario.name,
            policy=policy or scenario.policy,
            model=model or scenario.model,
            base=scenario.base,
            catalog=catalog,
        )
    except InvalidRequestError as exc:  # named in the scenario: its base ($.messages -> $.base.messages)
        raise InvalidRequestError(exc.reason, "$.base" + exc.path.removeprefix("$")) from None
    billed = session.catalog.get_model(session.meta.model).cache.mode == "explicit"
    with tempfile.TemporaryDirectory(prefix="ctxbudget-sim-") as folder:
        wire = _wire(folder, catalog_paths, session, latency or LatencyModel()) if billed else None
        try:
            result = asyncio.run(_play(scenario, session, wire, clock))
        finally:
            store.close()
            if wire:
                wire.gateway.store.close()
    return result


def _estimated_usage(report: dict[str, Any], output_tokens: int) -> dict[str, Any]:
    """A turn's usage as predicted by its report (the billed usage is added when there is one)."""
    return {
        "estimated": True,
        "input_tokens": report["tokens"],
        "cache_read_tokens": report["cache"]["read_tokens"],
        "cache_write_tokens": report["cache"]["write_tokens"],
        "output_tokens": output_tokens,
    }


def _verbatim_share(body: dict[str, Any] | str, evidence: list[str]) -> float:
    rendered = "\n".join(block_texts(body))
    return sum(1 for e in evidence if e in rendered) / len(evidence) if evidence else 1.0


async def _play(
    scenario: Scenario, session: Session, wire: _Wire | None, clock: Callable[[], float]
) -> SimulationResult:
    evidence = _evidence(scenario)
    output_tokens = load_policy(session.meta.policy).expected_output_tokens
    rows: list[dict[str, Any]] = []
    bodies: list[dict[str, Any] | str] = []
    compared: list[tuple[float, float, int, int, float]] = []
    # Seconds from the previous call's use of the cache to this call: its reply time, then the gap.
    reply_seconds = 0.0
    # Bodies in the provider's own format (an OpenAI model gets Chat Completions bodies).
    provider = session.catalog.get_model(session.meta.model).provider
    for n, scripted in enumerate(scenario.turns, 1):
        if wire:
            wire.upstream.now += scripted.idle_seconds
        started = clock()
        try:
            prepared = session.prepare(
                scripted.question,
                tool_calls=scripted.tool_calls,
                tool_results=scripted.tool_results,
                tags=scripted.tags,
                output_format="openai" if provider == "openai" else "anthropic",
                idle_seconds=reply_seconds + scripted.idle_seconds if n > 1 else None,
            )
        except CtxBudgetError as exc:  # the turn's place in the scenario, for its file's error
            exc.add_note(f"$.turns[{n - 1}]")
            raise
        latency = (clock() - started) * 1000
        body = prepared.assembly.request
        bodies.append(body)
        answer = (
            scripted.answer
            if scripted.answer is not None
            else stand_in_answer(scripted.question, scripted.tags, scripted.tool_results, evidence)
        )
        report = prepared.assembly.report.to_dict()
        usage = _estimated_usage(report, output_tokens)
        billing: dict[str, Any] | None = None
        if wire and isinstance(body, dict):
            billing = await wire.bill(body, scenario.name, answer, session, latency, clock)
            usage["actual"] = {
                k: billing[k] for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd")
            }
            reply_seconds = billing["reply_seconds"]
        turn = session.record(prepared, answer, usage=usage)
        row = _turn_row(n, report, latency, _verbatim_share(body, evidence), turn.report.get("compaction"))
        rows.append({**row, "idle_seconds": scripted.idle_seconds if n > 1 else 0.0, "billed": billing})
        context = [_item_text(i) for i in prepared.request["items"]]
        compared.append(
            (*baselines(session, context, output_tokens), naive_keeps(session, context, evidence))
        )
    if wire:
        await wire.client.aclose()
        await wire.gateway.client.aclose()
    return SimulationResult(rows, summary(rows), strategies(rows, compared, evidence), bodies)
