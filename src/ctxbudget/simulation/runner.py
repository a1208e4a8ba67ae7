"""Play a scenario through sessions and assembly, turn by turn, and measure it.

Per turn: tokens per tier, predicted cache writes, reads and uncached input, cost, ceiling status,
assembly latency, evidence kept verbatim, compaction. The same turns are also priced for two
baselines with the catalog's real prices: raw full injection (everything, every turn, no cache)
and naive truncation of the same context to its first 16,000 tokens (no cache).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..catalog.catalog import Catalog, bundled_catalog
from ..cost import price_turn
from ..errors import ConfigError
from ..formats.tiered import block_texts
from ..policy import load_policy
from ..session.session import Session
from ..session.store import SQLiteStore
from .scenario import Scenario
from .standin import stand_in_answer

__all__ = ["SimulationResult", "run_simulation"]

NAIVE_TRUNCATION_TOKENS = 16_000


@dataclass(frozen=True)
class SimulationResult:
    """One object per turn, the summary, the strategy comparison, and each turn's request body."""

    turns: list[dict[str, Any]]
    summary: dict[str, Any]
    strategies: list[dict[str, Any]]
    requests: list[dict[str, Any] | str] = field(default_factory=list)


def _evidence(scenario: Scenario) -> list[str]:
    return [i["text"] for i in scenario.base.get("items", []) if i.get("kind") == "evidence"]


def _turn_row(
    n: int, report: dict[str, Any], latency_ms: float, verbatim: float, compaction: Any
) -> dict[str, Any]:
    cache = report["cache"]
    return {
        "turn": n,
        "input_tokens": report["tokens"],
        "tiers": {t["name"]: t["tokens"] for t in report["tiers"]},
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


def _baselines(
    session: Session, scenario_texts: list[str], output_tokens: int
) -> tuple[float, float, int, int]:
    """Raw injection and naive 16k truncation of the same context: (raw cost, naive cost, raw tokens, naive tokens)."""
    counter = session.counter
    raw_tokens = counter.scale(sum(counter.raw(t) for t in scenario_texts))
    naive_tokens = min(raw_tokens, NAIVE_TRUNCATION_TOKENS)
    prices = session.catalog.get_model(session.meta.model).prices
    if prices is None:
        raise ConfigError(
            f"the simulation compares costs, but {session.meta.model!r} has no price in the catalog; "
            "choose a priced model or add its prices with --catalog"
        )

    def cost(tokens: int) -> float:
        return price_turn(
            prices,
            uncached_tokens=tokens,
            write_5m_tokens=0,
            write_1h_tokens=0,
            read_tokens=0,
            output_tokens=output_tokens,
        ).total_usd

    return cost(raw_tokens), cost(naive_tokens), raw_tokens, naive_tokens


def _naive_keeps(session: Session, texts: list[str], evidence: list[str]) -> float:
    """Share of evidence items that survive keeping only the first 16,000 tokens of the context."""
    budget = session.counter.unscale(NAIVE_TRUNCATION_TOKENS)
    kept, used = [], 0
    for text in texts:
        cost = session.counter.raw(text)
        if used + cost > budget:
            break
        kept.append(text)
        used += cost
    joined = "\n".join(kept)
    return sum(1 for e in evidence if e in joined) / len(evidence) if evidence else 1.0


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)] if ordered else 0.0


def run_simulation(
    scenario: Scenario,
    *,
    model: str | None = None,
    policy: str | None = None,
    store_path: str = ":memory:",
    catalog: Catalog | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> SimulationResult:
    """Play every turn of ``scenario``; returns per-turn rows, the summary and the comparison."""
    catalog = catalog or bundled_catalog()
    store = SQLiteStore(store_path)
    session = Session.create(
        store,
        scenario.name,
        policy=policy or scenario.policy,
        model=model or scenario.model,
        base=scenario.base,
        catalog=catalog,
    )
    evidence = _evidence(scenario)
    output_tokens = load_policy(session.meta.policy).expected_output_tokens
    rows: list[dict[str, Any]] = []
    bodies: list[dict[str, Any] | str] = []
    compared: list[tuple[float, float, int, int, float]] = []
    for n, scripted in enumerate(scenario.turns, 1):
        started = clock()
        prepared = session.prepare(
            scripted.question,
            tool_calls=scripted.tool_calls,
            tool_results=scripted.tool_results,
            tags=scripted.tags,
        )
        latency = (clock() - started) * 1000
        bodies.append(prepared.assembly.request)
        rendered = "\n".join(block_texts(prepared.assembly.request))
        verbatim = sum(1 for e in evidence if e in rendered) / len(evidence) if evidence else 1.0
        answer = scripted.answer or stand_in_answer(
            scripted.question, scripted.tags, scripted.tool_results, evidence
        )
        report = prepared.assembly.report
        turn = session.record(
            prepared,
            answer,
            usage={
                "estimated": True,
                "input_tokens": report["tokens"],
                "cache_read_tokens": report["cache"]["read_tokens"],
                "cache_write_tokens": report["cache"]["write_tokens"],
                "output_tokens": output_tokens,
            },
        )
        rows.append(_turn_row(n, report, latency, verbatim, turn.report.get("compaction")))
        context = [i["text"] for i in prepared.request["items"]]
        compared.append(
            (*_baselines(session, context, output_tokens), _naive_keeps(session, context, evidence))
        )
    store.close()
    return SimulationResult(rows, _summary(rows), _strategies(rows, compared, evidence), bodies)


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    later = rows[1:]
    read = sum(r["cache_read_tokens"] for r in later)
    total = sum(r["input_tokens"] for r in later)
    costs = [r["cost_usd"] for r in rows]
    return {
        "turns": len(rows),
        "cache_hit_ratio": round(read / total, 4) if total else 0.0,
        "mean_cost_usd": round(sum(costs) / len(costs), 6) if costs else 0.0,
        "max_cost_usd": max(costs, default=0.0),
        "turns_over_ceiling": sum(1 for r in rows if not r["within_ceiling"]),
        "p95_assembly_ms": _percentile([r["assembly_ms"] for r in rows], 0.95),
        "evidence_verbatim_ratio": min((r["evidence_verbatim_ratio"] for r in rows), default=1.0),
        "max_input_tokens": max((r["input_tokens"] for r in rows), default=0),
        "compactions": [r["compaction"] for r in rows if r["compaction"]],
    }


def _strategies(
    rows: list[dict[str, Any]], compared: list[tuple[float, float, int, int, float]], evidence: list[str]
) -> list[dict[str, Any]]:
    n = len(rows) or 1
    return [
        {
            "strategy": "raw full injection",
            "mean_input_tokens": round(sum(c[2] for c in compared) / n),
            "mean_cost_usd": round(sum(c[0] for c in compared) / n, 6),
            "max_cost_usd": round(max(c[0] for c in compared), 6),
            "cache": "none",
            "evidence_kept": 1.0,
        },
        {
            "strategy": f"naive truncation to {NAIVE_TRUNCATION_TOKENS:,}",
            "mean_input_tokens": round(sum(c[3] for c in compared) / n),
            "mean_cost_usd": round(sum(c[1] for c in compared) / n, 6),
            "max_cost_usd": round(max(c[1] for c in compared), 6),
            "cache": "none",
            "evidence_kept": round(min(c[4] for c in compared), 4),
        },
        {
            "strategy": "ctxbudget policy",
            "mean_input_tokens": round(sum(r["input_tokens"] for r in rows) / n),
            "mean_cost_usd": round(sum(r["cost_usd"] for r in rows) / n, 6),
            "max_cost_usd": round(max(r["cost_usd"] for r in rows), 6),
            "cache": "prefix + ledger + conversation",
            "evidence_kept": min(r["evidence_verbatim_ratio"] for r in rows),
        },
    ]
