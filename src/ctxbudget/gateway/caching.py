"""Conversation caching in the gateway's fit mode: the history cut in steps that later turns hold,
rolling breakpoints on Anthropic bodies, and each turn's predicted cache read and write.

What a session's next turn needs is kept in the stored turn's report, under ``conversation``: the
history cut (``history_cut``: index and digest, given back to ``fit(previous_cut=...)``) and the
prefixes the provider is taken to hold (``alive``: their hashes, newest first). The report's
``cache`` says what this turn is predicted to read and write (also sent as response headers); the
stored usage says what the provider billed, and ``ctxbudget session show`` puts them side by side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..catalog.values import ModelSpec
from ..conversation import mark_conversation, predict_conversation
from ..items import HistoryCut
from ..tokens.counter import TokenCounter

__all__ = ["ConversationState", "TurnCache", "cache_turn", "state_of"]


@dataclass(frozen=True)
class ConversationState:
    """What the previous turn of a session left for this one."""

    history_cut: Mapping[str, Any] | None = None
    alive: tuple[str, ...] = ()


@dataclass(frozen=True)
class TurnCache:
    """One turn's body to send (marked), its predicted cache use, and the state for the next."""

    body: dict[str, Any]
    predicted: dict[str, Any]
    state: dict[str, Any]


def state_of(report: Mapping[str, Any]) -> ConversationState | None:
    """The state a stored turn's report left (None: it left none)."""
    found = report.get("conversation")
    if not isinstance(found, Mapping):
        return None
    cut = found.get("history_cut")
    alive = found.get("alive")
    return ConversationState(
        cut if HistoryCut.of(cut) else None,  # a stored value that is no cut is ignored, never refused
        tuple(a for a in alive if isinstance(a, str)) if isinstance(alive, list) else (),
    )


def cache_turn(
    body: dict[str, Any],
    *,
    model: str,
    spec: ModelSpec | None,
    counter: TokenCounter,
    history_cut: Mapping[str, Any] | None,
    previous: ConversationState | None,
    marks: bool,
) -> TurnCache:
    """The fitted ``body`` with conversation breakpoints where the model caches explicitly and
    ``marks`` says the body can carry them (an Anthropic body), what it is predicted to read and
    write, and the state for the next turn."""
    state: dict[str, Any] = {"history_cut": dict(history_cut) if history_cut else None, "alive": []}
    if spec is None or spec.cache.mode == "none" or (spec.cache.mode == "explicit" and not marks):
        return TurnCache(body, {}, state)  # nothing is cached (explicit caching needs the marks)
    rules = spec.cache
    plan = mark_conversation(body, model=model, rules=rules, counter=counter)
    prediction, alive = predict_conversation(plan, previous.alive if previous else (), rules.mode)
    state["alive"] = list(alive)
    predicted = {
        "read_tokens": prediction.read_tokens,
        "write_tokens": prediction.write_tokens,
        "write_1h_tokens": prediction.write_1h_tokens,
        "uncached_tokens": prediction.uncached_tokens,
        "breakpoints": [{"block": m.block, "by": m.by, "prefix_tokens": m.prefix_tokens} for m in plan.marks],
    }
    return TurnCache(plan.body, predicted, state)
