"""The per-model calibration of estimate factors, kept in the session store so every replica
fits with the same factors.

A factor stays between the catalog's (``default``) and ``ceiling`` times it. An observed ratio
above that band is not a calibration but input the estimate does not cover (a server tool, a
poisoned or broken usage): it is ignored and counted. Otherwise the factor is the 90th percentile
of the last ``window`` ratios (so one answer in ten that bills more, such as a request whose
server-side input the estimate cannot see, does not pin it), rising at most ``step`` times per
answer, and never below ``default``: it comes back down with the requests it still lets through.

With a store, each observation is one read-modify-write of the model's state in the store (the
store's row or write lock orders replicas' observations), made by the store's writer thread, and
the factors in memory are a cache of the store's: loaded at start-up, and read again after each
stored turn of a model counted by estimate (:meth:`Calibration.refresh`), so what one replica
learned its neighbours fit with from their next such turn on. A request is never held up by a store read
on the event loop. Without a store (a library user's own gateway object, tests) the state lives
in memory only.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Calibration", "CalibrationStore", "Observed"]

State = Mapping[str, Any]  # {"ratios": [the last window's ratios], "factor": the factor}


class CalibrationStore(Protocol):
    """What the calibration needs of a store."""

    def calibration_update(self, key: str, update: Callable[[State | None], State]) -> State: ...

    def calibration_states(self) -> dict[str, State]: ...


@dataclass(frozen=True)
class Observed:
    """One observation's outcome: the factor after it, and whether the ratio was ignored."""

    factor: float
    ignored: bool


class Calibration:
    """Safety factors learned from observed usage, per catalog entry (see the module docstring)."""

    def __init__(
        self,
        window: int = 20,
        ceiling: float = 2.0,
        step: float = 1.25,
        store: CalibrationStore | None = None,
    ) -> None:
        self.window = window
        self.ceiling = ceiling
        self.step = step
        self.store = store
        self.ignored = 0
        self._states: dict[str, State] = {}
        self._lock = threading.Lock()

    def factor(self, key: str, default: float) -> float:
        """The calibrated factor for a catalog entry (``default`` until something was observed)."""
        state = self._states.get(key)
        return float(state["factor"]) if state else default

    def refresh(self) -> None:
        """Read every factor again from the store (nothing without one)."""
        if self.store is not None:
            states = self.store.calibration_states()
            with self._lock:
                self._states = dict(states)

    def observe(self, key: str, proxy_tokens: int, actual_tokens: int, default: float) -> float:
        """Record one request (proxy-encoding tokens vs billed tokens); returns the new factor."""
        return self.observed(key, proxy_tokens, actual_tokens, default).factor

    def observed(self, key: str, proxy_tokens: int, actual_tokens: int, default: float) -> Observed:
        """Record one request; the factor after it and whether it was ignored."""
        if proxy_tokens <= 0 or actual_tokens <= 0:
            return Observed(self.factor(key, default), ignored=False)
        ratio = actual_tokens / proxy_tokens
        if ratio > default * self.ceiling:
            with self._lock:
                self.ignored += 1
            return Observed(self.factor(key, default), ignored=True)

        def update(state: State | None) -> State:
            return self._next(state, ratio, default)

        if self.store is not None:
            state = self.store.calibration_update(key, update)
            with self._lock:
                self._states[key] = state
            return Observed(float(state["factor"]), ignored=False)
        with self._lock:
            self._states[key] = update(self._states.get(key))
            return Observed(float(self._states[key]["factor"]), ignored=False)

    def _next(self, state: State | None, ratio: float, default: float) -> State:
        """The state after ``ratio`` is observed."""
        ratios = [*(state["ratios"] if state else []), ratio][-self.window :]
        ordered = sorted(ratios)
        target = ordered[math.ceil(0.9 * len(ordered)) - 1]  # nearest-rank 90th percentile
        current = float(state["factor"]) if state else default
        factor = max(default, min(target, current * self.step))
        return {"ratios": ratios, "factor": round(factor, 4)}

    def snapshot(self) -> dict[str, float]:
        """Every calibrated factor (as cached)."""
        with self._lock:
            return {key: float(state["factor"]) for key, state in self._states.items()}
