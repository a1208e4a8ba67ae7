"""What each session's next turn is compared with: the state its previous answered turn left,
held in bounded memory and checked against the store (the truth: replicas share it).

Policy mode keeps the previous assembly's state (prefix hashes, the ledger's digest); fit mode
keeps what conversation caching needs (the history cut and the prefixes taken to be cached).
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError, StoreError
from ..session.store import GATEWAY_RECORDED, SessionStore
from ..session.turns import Turn
from .caching import ConversationState, state_of
from .prepared import Prepared, for_next_turn

__all__ = ["Bounded", "SessionKinds", "TurnMemory", "latest_read"]


class Bounded(OrderedDict[str, Any]):
    """A dict that forgets its least recently stored keys beyond ``limit``."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: str, value: Any) -> None:
        """Store ``value`` as the most recent, forgetting the oldest beyond the limit."""
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


class TurnMemory:
    """Each session's previous turn state, by mode: in memory while the store agrees. Unless
    ``stored`` (nothing is recorded: the in-process transport), the memory alone: a session's next
    turn then holds its history cut and finds its cached prefixes, as through the gateway.

    The memory also holds when (by ``clock``, monotonic seconds) each remembered turn was
    prepared, so a turn knows how long the provider has held its session's cache entries; a turn
    read back from the store has no such time (it is not stored: no clock reading is an output)."""

    def __init__(
        self,
        store: SessionStore,
        limit: int,
        store_up: Callable[[], bool] = lambda: True,
        *,
        stored: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.previous = Bounded(limit)
        self.store_up = store_up
        self.stored = stored
        self.clock = clock

    def previous_turn(
        self, policy: str, session: str
    ) -> tuple[Mapping[str, Any] | None, int | None, float | None]:
        """The session's previous answered turn under ``policy`` (see :meth:`_previous_state`),
        how many turns the store held (None where nothing is stored: a commit that finds more
        checks the prefix again, :class:`~.prepared.Baseline`), and the seconds since that turn
        was prepared (None: not by this process)."""

        def read(report: Mapping[str, Any]) -> Any:
            ok = report.get("policy") == policy and "pinned_prefix_sha256" in report
            return for_next_turn(report) if ok else None

        return self._previous_state(f"{policy}\x00{session}", session, read, scan=True)

    def previous_conversation(self, session: str) -> ConversationState | None:
        """What the session's previous fit-mode turn left for conversation caching, and the
        seconds since it was prepared. Only an optimization: while the store is down, or when
        reading it fails, what this replica remembers stands, unchecked (else there is none)."""
        key = f"fit\x00{session}"
        found, idle = None, None
        checked = False
        if self.store_up():
            with contextlib.suppress(StoreError):
                found, _, idle = self._previous_state(key, session, lambda r: r.get("conversation"))
                checked = True
        if not checked and (remembered := self.previous.get(key)) is not None:
            found, idle = remembered[1], self._since(remembered[2])
        return state_of({"conversation": found}, idle) if isinstance(found, Mapping) else None

    def _previous_state(
        self, key: str, session: str, read: Callable[[Mapping[str, Any]], Any], *, scan: bool = False
    ) -> tuple[Any, int | None, float | None]:
        """The state the session's previous answered turn left (``read`` from its report), and
        the store's count of the session's turns (None where nothing is stored). The
        store is the truth (another replica may have answered the session since): the memory
        holds the state of the turn the store numbered, and serves it while the store's count of
        the session's turns is that number; otherwise the store's last turn is read (after a
        restart, once the session left the bounded memory, or when another replica answered it).
        Every answered turn was committed before its answer, so the count is current. With
        ``scan``, when the last turn holds nothing ``read`` reads (a turn in between under another
        policy, or in fit mode), the latest one that does is the state (:func:`latest_read`)."""
        found = self.previous.get(key)
        if not self.stored:
            return (found[1], None, self._since(found[2])) if found is not None else (None, None, None)
        count = self.store.count_turns(session)
        if found is not None and found[0] == count:
            return found[1], count, self._since(found[2])
        last = self.store.last_turn(session) if count else None
        state = read(last.report) if last is not None else None
        if last is not None and state is None and scan:
            last, state = latest_read(self.store, session, read)
        if last is None or state is None:
            return None, count, None
        self.previous.put(key, (last.index, state, None))
        return state, count, None

    def _since(self, at: float | None) -> float | None:
        return None if at is None else max(0.0, self.clock() - at)

    def remember(self, prepared: Prepared, index: int | None) -> None:
        """Keep an answered turn's state, stored as turn ``index``, as its session's next
        baseline (a turn not stored is not remembered: the store's last turn stands; where nothing
        is stored, every answered turn is)."""
        if prepared.next_turn is not None and (index is not None or not self.stored):
            key, state = prepared.next_turn
            self.previous.put(key, (index, state, prepared.prepared_at))


def latest_read(
    store: SessionStore, session: str, read: Callable[[Mapping[str, Any]], Any]
) -> tuple[Turn | None, Any]:
    """The latest turn of ``session`` whose report ``read`` reads, and what it reads (None and
    None: no such turn). Read back from the newest, only when the last turn holds nothing for it."""
    for turn in reversed(store.turns(session)):
        state = read(turn.report)
        if state is not None:
            return turn, state
    return None, None


class SessionKinds:
    """Whose each named session is: the gateway's own (created by the first turn it recorded), or
    one that ``session new`` started under a policy, whose turns ``session add`` appends. The
    gateway records no chat turn in the latter: a turn it appended there broke the session's next
    ``session add``. A session's kind never changes (sessions are not deleted), so each name is
    read from the store once; a name not in the store yet is read again next time."""

    def __init__(
        self,
        store: SessionStore,
        limit: int,
        store_up: Callable[[], bool] = lambda: True,
        *,
        fail_open: bool = False,
    ) -> None:
        self.store = store
        self.kinds = Bounded(limit)  # name -> the policy it was created under
        self.store_up = store_up
        self.fail_open = fail_open

    def foreign_policy(self, session: str) -> str | None:
        """The policy ``session`` was started under when it is not the gateway's; None when it is,
        or when there is no such session yet. A read that fails raises its :class:`StoreError`
        (the turn could not be recorded either: refused before it is sent), unless the gateway
        fails open; a store known to be down is not asked."""
        policy = self.kinds.get(session)
        if policy is None and self.store_up():
            try:
                policy = _policy_of(self.store, session)
            except StoreError:
                if not self.fail_open:
                    raise
            if policy is not None:
                self.kinds.put(session, policy)
        return policy if policy is not None and policy != GATEWAY_RECORDED else None

    def forget(self, session: str) -> None:
        """Read ``session``'s kind from the store again next time: what was read inside a
        transaction that then rolled back (the session it created with it) is not the store's."""
        self.kinds.pop(session, None)


def _policy_of(store: SessionStore, session: str) -> str | None:
    """The store's :meth:`~ctxbudget.session.store.SessionStore.policy_of`; a store written before
    it had one is read by its ``meta`` (None: no such session)."""
    read = getattr(store, "policy_of", None)
    if read is not None:
        found: str | None = read(session)
        return found
    try:
        return store.meta(session).policy
    except ConfigError:
        return None
