"""Conversation caching in the gateway's fit mode: the history cut in steps that later turns hold,
rolling breakpoints on Anthropic bodies, and each turn's predicted cache read and write.

What a session's next turn needs is kept in the stored turn's report, under ``conversation``: the
history cut (``history_cut``: index and digest, given back to ``fit(previous_cut=...)``) and the
prefixes the provider is taken to hold (``alive``: their hashes, newest first; ``alive_1h``: those
a one-hour mark wrote). They are taken to be held only as long as the provider keeps them: five
minutes after the previous turn was sent (an hour for one-hour marks), by the gateway's own clock.
Where this process did not send the previous turn (after a restart, or another replica did) it
cannot tell: the prediction takes them to be held, and a cost ceiling is checked against the
turn's price with them written instead (``reads_written``; a read priced where the cache had
expired let a turn 12x over the ceiling through). The report's
``cache`` says what this turn is predicted to read and write (also sent as response headers); the
stored usage says what the provider billed, and ``ctxbudget session show`` puts them side by side.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..cache import TTL_SECONDS
from ..catalog.values import ModelSpec
from ..conversation import MAX_ALIVE, client_marks, mark_conversation, predict_conversation
from ..items import HistoryCut
from ..tokens.counter import TokenCounter

__all__ = ["ConversationState", "TurnCache", "cache_turn", "marks_written", "reads_written", "state_of"]


@dataclass(frozen=True)
class ConversationState:
    """What the previous turn of a session left for this one; ``idle_seconds``: the time since it
    was sent (None: not known here)."""

    history_cut: Mapping[str, Any] | None = None
    alive: tuple[str, ...] = ()
    alive_1h: tuple[str, ...] = ()
    idle_seconds: float | None = None

    def cached(self) -> tuple[str, ...]:
        """The prefixes the provider still holds: all within five minutes, those of one-hour
        marks within the hour, none after it; all when the time is not known."""
        idle = self.idle_seconds
        if idle is None:
            return self.alive
        if idle > TTL_SECONDS["1h"]:
            return ()
        return self.alive if idle <= TTL_SECONDS["5m"] else self.alive_1h


@dataclass(frozen=True)
class TurnCache:
    """One turn's body to send (marked), its predicted cache use, and the state for the next."""

    body: dict[str, Any]
    predicted: dict[str, Any]
    state: dict[str, Any]


def state_of(report: Mapping[str, Any], idle_seconds: float | None = None) -> ConversationState | None:
    """The state a stored turn's report left (None: it left none), ``idle_seconds`` after it was
    sent (None: not known)."""
    found = report.get("conversation")
    if not isinstance(found, Mapping):
        return None
    cut = found.get("history_cut")
    return ConversationState(
        cut if HistoryCut.of(cut) else None,  # a stored value that is no cut is ignored, never refused
        _hashes(found.get("alive")),
        _hashes(found.get("alive_1h")),
        idle_seconds,
    )


def _hashes(listed: Any) -> tuple[str, ...]:
    return tuple(a for a in listed if isinstance(a, str)) if isinstance(listed, list) else ()


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
    state: dict[str, Any] = {
        "history_cut": dict(history_cut) if history_cut else None,
        "alive": [],
        "alive_1h": [],
    }
    if spec is None or spec.cache.mode == "none" or (spec.cache.mode == "explicit" and not marks):
        return TurnCache(body, {}, state)  # nothing is cached (explicit caching needs the marks)
    rules = spec.cache
    plan = mark_conversation(body, model=model, rules=rules, counter=counter)
    cached = previous.cached() if previous else ()
    prediction, alive = predict_conversation(plan, cached, rules.mode)
    state["alive"] = list(alive)
    held_1h = previous.alive_1h if previous and cached else ()
    written_1h = [m.prefix_sha256 for m in reversed(plan.marks) if m.ttl == "1h"]
    state["alive_1h"] = list(dict.fromkeys([*written_1h, *held_1h]))[:MAX_ALIVE]
    hourly = [m.ttl == "1h" for m in plan.marks]
    predicted = {
        "read_tokens": prediction.read_tokens,
        "read_1h_tokens": sum(
            read for (read, _), hour in zip(prediction.per_breakpoint, hourly, strict=False) if hour
        ),
        "write_tokens": prediction.write_tokens,
        "write_1h_tokens": prediction.write_1h_tokens,
        "uncached_tokens": prediction.uncached_tokens,
        "breakpoints": [{"block": m.block, "by": m.by, "prefix_tokens": m.prefix_tokens} for m in plan.marks],
    }
    return TurnCache(plan.body, predicted, state)


def marks_written(
    body: Mapping[str, Any], *, model: str, spec: ModelSpec | None, counter: TokenCounter
) -> dict[str, Any]:
    """The cache use of an Anthropic ``body`` sent without conversation caching, were every prefix
    its own marks cache written (the client's, and the system prompt's the gateway adds), at each
    mark's TTL: what a cost ceiling holds to, as nothing then follows what the provider holds (a
    write is dearer than a read or uncached input; priced as uncached, a turn writing a one-hour
    prefix was let past a ceiling at half its bill). Empty where the model caches no marks."""
    if spec is None or spec.cache.mode != "explicit":
        return {}
    # no room for a mark of the gateway's own: the body's marks only
    rules = dataclasses.replace(
        spec.cache, max_breakpoints=min(spec.cache.max_breakpoints, client_marks(body))
    )
    plan = mark_conversation(body, model=model, rules=rules, counter=counter)
    prediction, _ = predict_conversation(plan, (), rules.mode)
    return {
        "read_tokens": 0,
        "read_1h_tokens": 0,
        "write_tokens": prediction.write_tokens,
        "write_1h_tokens": prediction.write_1h_tokens,
        "uncached_tokens": prediction.uncached_tokens,
    }


def reads_written(cache: Mapping[str, Any]) -> dict[str, Any]:
    """A turn's predicted cache use with its reads written instead (the provider no longer holds
    what they read), each at the write price of the mark it was read by (``read_1h_tokens``: those
    read by one-hour marks)."""
    read = cache.get("read_tokens")
    if not isinstance(read, int) or read <= 0:
        return dict(cache)
    hour = cache.get("read_1h_tokens")
    hour = min(read, hour) if isinstance(hour, int) and hour > 0 else 0
    written_1h = cache.get("write_1h_tokens")
    return {
        **cache,
        "read_tokens": 0,
        "read_1h_tokens": 0,
        "write_tokens": int(cache.get("write_tokens", 0)) + read,
        "write_1h_tokens": (written_1h if isinstance(written_1h, int) else 0) + hour,
    }
