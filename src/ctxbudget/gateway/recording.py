"""Recording an answered turn: metrics, the calibration of estimate factors, and the stored turn.

Each completed turn is stored with its report and the provider's usage, normalized; estimate
factors are calibrated from that usage. Metrics change before the answer is sent; the stored
turn and the calibration are committed by the store's writer (:mod:`.writer`), and the answer
waits for that commit: a turn the client was answered is stored, so a replica killed the next moment, or the
replica that serves the session's next turn, finds it. The commit's future holds the
:class:`~ctxbudget.errors.StoreError` that kept the turn out of the store (None once stored): the
gateway then withholds the answer (503) unless it was told to fail open. A turn the store refuses
once it is answered is not stored either, and withheld (409, :class:`TurnRefused`): a policy-mode
turn whose session stored another pinned prefix meanwhile, or one whose session ``session new``
took meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ..catalog.catalog import Catalog
from ..catalog.values import ModelSpec
from ..errors import ConfigError, StoreError, StoreUnavailable
from ..session.store import GATEWAY_RECORDED, SessionMeta, SessionStore
from ..session.turns import ToolCall, Turn
from .calibration import Calibration
from .memory import SessionKinds, latest_read
from .metrics import Metrics
from .prepared import Prepared
from .pricing import actual_cost_usd, rounded
from .providers import Provider
from .usage import Usage, normalize_usage
from .writer import TurnWriter

__all__ = [
    "ClientLeft",
    "Commit",
    "PrefixRace",
    "Recorder",
    "SessionTaken",
    "TurnRefused",
    "model_label",
    "storable",
]

logger = logging.getLogger(__name__)


def storable(text: str) -> str:
    """An answer's text as it can be stored (UTF-8): a surrogate pair split across two streamed
    pieces joined into its character, a lone surrogate (valid JSON escape, ``"\\ud83d"``, in a
    reply cut mid-emoji) as U+FFFD. Such an answer reached the client and was never stored."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def model_label(spec: ModelSpec | None) -> str:
    """The metrics label of a model: its catalog id, or "other" (clients choose ids freely)."""
    return spec.id if spec is not None else "other"


class TurnRefused(Exception):
    """What the store found, once a turn was answered, that keeps it out (the answer is withheld:
    a 409 ``code``)."""

    code = "conflict"


class PrefixRace(TurnRefused):
    """A policy-mode turn whose session stored, while it was answered, a turn with another pinned
    prefix (two sent at once, each assembled before the other was stored): it is not stored."""

    code = "prefix_changed"

    def __init__(self, session: str) -> None:
        super().__init__(
            f"INV-CTX-01: while this turn of session {session!r} was answered, another turn of it "
            "was stored with a different pinned prefix (the two were sent at once, each checked "
            "against none of the other); this one was not stored and its answer is withheld. Send a "
            "session's turns one at a time; for a new playbook version, allow the change "
            "(X-Ctxbudget-Allow-Prefix-Change: true)"
        )


class SessionTaken(TurnRefused):
    """The turn's session was started by ``session new`` while the turn was answered: a policy's
    session gets no chat turn (the one it was checked against before it was sent was not there)."""

    code = "session_conflict"

    def __init__(self, session: str, policy: str) -> None:
        super().__init__(
            f"session {session!r} was started by `session new` under the policy {policy!r} while "
            "this turn was answered: its turns are added by `session add`; this turn was not stored "
            "and its answer is withheld. Name another session in X-Ctxbudget-Session"
        )


class ClientLeft(TurnRefused):
    """The client left (an SDK's timeout) while the turn's commit waited for the store's lock: it
    is not stored, as a turn whose answer was not received never is (the client's retry is the
    turn, and was stored twice)."""

    code = "client_disconnected"

    def __init__(self, session: str) -> None:
        super().__init__(f"session {session!r}: the client left while its turn waited to be stored")


@dataclass(frozen=True)
class Commit:
    """What became of a turn handed to the writer: the index the store gave it (None when it
    was not stored), and the store's failure that kept it out (None otherwise)."""

    index: int | None = None
    failure: StoreError | None = None
    refused: TurnRefused | None = None


class Recorder:
    """Records answered turns into the store, the metrics and the calibration."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        store: SessionStore,
        calibration: Calibration,
        metrics: Metrics,
        writer: TurnWriter,
        kinds: SessionKinds,
        reached_since: Callable[[float], bool] = lambda _at: True,
    ) -> None:
        self.catalog = catalog
        self.store = store
        self.calibration = calibration
        self.metrics = metrics
        self.writer = writer
        self.kinds = kinds  # whose each session is: the gateway's own, or a policy's
        self.reached_since = reached_since  # whether the store served after a (monotonic) time
        # when a commit last found the store's server unreachable, and what it raised
        self._unreached: tuple[float, StoreUnavailable] | None = None

    def record(
        self,
        provider: Provider,
        prepared: Prepared,
        answer: str,
        raw_usage: Any,
        calls: tuple[ToolCall, ...] = (),
        *,
        store: bool = True,
        abandoned: threading.Event | None = None,
    ) -> Future[Commit] | None:
        """Metrics now, and the turn (and its calibration) handed to the writer: its commit's future
        (see the module docstring; None when the usage could not even be read, or when not to
        ``store`` it: a store known to be down, failing open). Never raises: a failure to record
        is logged and counted. Once ``abandoned`` is set (the client left) a commit that has not
        taken the store's lock yet stores nothing (:class:`ClientLeft`)."""
        try:
            answer = storable(answer)
            calls = tuple(ToolCall(name=storable(c.name), arguments=storable(c.arguments)) for c in calls)
            usage = normalize_usage(provider.input_format, raw_usage)
            self._observe(prepared, usage)
            if not store:
                self._failed(prepared, StoreUnavailable(self.store.location, "is down", "failing open"))
                return None
            return self.writer.submit(
                prepared.session, lambda: self._commit(prepared, answer, calls, usage, abandoned)
            )
        except Exception as exc:  # the answer was given: recording must not take it back
            self._failed(prepared, exc)
            return None

    def _commit(
        self,
        prepared: Prepared,
        answer: str,
        calls: tuple[ToolCall, ...],
        usage: Usage | None,
        abandoned: threading.Event | None = None,
    ) -> Commit:
        """The stored turn, in the writer's thread, and then its calibration. A failure of the
        store is logged, counted and returned; any other failure is logged and counted, and the
        answer stands. Once a commit found the store's server unreachable, the commits queued
        behind it fail at once until the store is found serving again (``reached_since``, the
        gateway's health check): each waited out the connection timeout in turn (55 s for the
        eleventh)."""
        unreached = self._unreached
        if unreached is not None and not self.reached_since(unreached[0]):
            self._failed(prepared, unreached[1])
            return Commit(failure=unreached[1])
        try:
            with self.metrics.store_commit_seconds.time():
                index: int | None = self._store_turn(prepared, answer, calls, usage, abandoned)
        except StoreError as exc:
            if isinstance(exc, StoreUnavailable):
                self._unreached = (time.monotonic(), exc)
            self._failed(prepared, exc)
            return Commit(failure=exc)
        except ClientLeft as left:  # no failure: nobody waits for this answer
            logger.warning("%s: it is not stored", left)
            return Commit(refused=left)
        except TurnRefused as refused:
            self._failed(prepared, refused)
            return Commit(refused=refused)
        except Exception as exc:
            index = None
            self._failed(prepared, exc)
        self._unreached = None  # the store took it (or failed otherwise): reached
        try:  # a calibration that fails is logged and counted, the answer stands
            if not prepared.report["exact"]:  # factors serve only the models counted by estimate
                if usage:
                    self._calibrate(prepared, usage, model_label(prepared.spec))
                self.calibration.refresh()  # and what the other replicas learned
        except Exception as exc:
            self._failed(prepared, exc)
        return Commit(index=index)

    def _failed(self, prepared: Prepared, exc: Exception) -> None:
        """A turn that could not be recorded: counted by error type and logged."""
        self.metrics.record_failures.labels(type(exc).__name__).inc()
        logger.error(
            "session=%s could not record the turn: %s: %s", prepared.session, type(exc).__name__, exc
        )

    def _store_turn(
        self,
        prepared: Prepared,
        answer: str,
        calls: tuple[ToolCall, ...],
        usage: Usage | None,
        abandoned: threading.Event | None = None,
    ) -> int:
        """Append the turn to its session (created by its first turn), numbered by the store:
        the index it was given. A policy-mode turn is counted, checked and appended holding the
        session's lock in the store: another replica sharing it stores no turn in between. So is
        a turn whose client may leave (``abandoned``), which is looked at once the lock is held."""
        if prepared.baseline is None and abandoned is None:
            return self._append(prepared, answer, calls, usage)
        try:
            with self.store.serialized(prepared.session):
                if abandoned is not None and abandoned.is_set():
                    raise ClientLeft(prepared.session)
                return self._append(prepared, answer, calls, usage)
        except BaseException:
            self.kinds.forget(prepared.session)  # the session this block created is gone with it
            raise

    def _append(
        self, prepared: Prepared, answer: str, calls: tuple[ToolCall, ...], usage: Usage | None
    ) -> int:
        """:meth:`_store_turn`'s reads and writes."""
        index = self.store.count_turns(prepared.session) + 1
        if prepared.baseline is not None and index - 1 != prepared.baseline.turns:
            self._check_prefix(prepared)  # stored since its assembly: by a turn sent beside it?
        if index == 1:
            # The first turn creates the session (a concurrent request may have created it already).
            with contextlib.suppress(ConfigError):
                self.store.create(
                    SessionMeta(name=prepared.session, policy=GATEWAY_RECORDED, model=prepared.model, base={})
                )
        # checked before the turn was sent, unless the store could not say then, or `session new`
        # took the name since: a policy's session never gets a chat turn
        policy = self.kinds.foreign_policy(prepared.session)
        if policy is not None:
            raise SessionTaken(prepared.session, policy)
        turn = Turn(
            index=index,
            question=prepared.question,
            answer=answer,
            tool_calls=calls,
            tool_results=prepared.tool_results,
            report=prepared.report,
            usage=self._usage_record(prepared, usage),
        )
        # numbered by the store inside its transaction: concurrent turns of a session never collide
        return self.store.append_turn(prepared.session, turn, [], next_index=True).index

    def _check_prefix(self, prepared: Prepared) -> None:
        """Raise :class:`PrefixRace` when the session's last stored turn, under the same policy,
        has another pinned prefix than ``prepared`` (unless the prefix may change): what its
        assembly would have refused had that turn been stored first."""
        assert prepared.baseline is not None
        if prepared.baseline.may_change:
            return
        now = prepared.report

        def pinned(report: Mapping[str, Any]) -> Any:  # the prefix of a turn under this policy
            return report.get("pinned_prefix_sha256") if report.get("policy") == now.get("policy") else None

        last = self.store.last_turn(prepared.session)
        before = pinned(last.report) if last is not None else None
        if last is not None and before is None:  # a turn under another policy, or in fit mode
            before = latest_read(self.store, prepared.session, pinned)[1]
        if before is not None and before != now.get("pinned_prefix_sha256"):
            raise PrefixRace(prepared.session)

    def _usage_record(self, prepared: Prepared, usage: Usage | None) -> dict[str, Any]:
        """The stored usage: the estimate, and what the provider billed when it said."""
        estimated = {
            "input_tokens": prepared.report["tokens_after"],
            "cost_usd": prepared.estimate_usd,
            "exact": prepared.report["exact"],
        }
        if not usage:
            return {"estimated": estimated}
        actual = {**usage.to_dict(), "cost_usd": rounded(actual_cost_usd(prepared.spec, usage))}
        return {"estimated": estimated, "actual": actual}

    def _observe(self, prepared: Prepared, usage: Usage | None) -> None:
        """The turn's tokens and cost in the metrics."""
        model = model_label(prepared.spec)
        if prepared.estimate_usd is not None:
            self.metrics.cost_estimated.labels(model).inc(prepared.estimate_usd)
        if not usage:
            return
        self.metrics.tokens_in.labels(model).inc(usage.input_tokens)
        self.metrics.tokens_out.labels(model).inc(usage.output_tokens)
        self.metrics.cache_read.labels(model).inc(usage.cache_read_tokens)
        self.metrics.cache_write.labels(model).inc(usage.cache_write_tokens)
        actual = actual_cost_usd(prepared.spec, usage)
        if actual is not None:
            self.metrics.cost_actual.labels(model).inc(actual)

    def _calibrate(self, prepared: Prepared, usage: Usage, model: str) -> None:
        """Learn the model's estimate factor from billed input the estimate stands for (in the
        writer's thread: with a store, it is a write of its own)."""
        if prepared.report["exact"] or not prepared.calibrate or prepared.spec is None:
            return
        default = self.catalog.tokenizer_for(prepared.model).safety_factor
        billed = usage.input_tokens - prepared.overhead_tokens  # what the estimate stands for
        observed = self.calibration.observed(prepared.spec.id, prepared.proxy_tokens, billed, default)
        if observed.ignored:
            self.metrics.calibration_ignored.labels(model).inc()
        self.metrics.safety_factor.labels(model).set(observed.factor)
