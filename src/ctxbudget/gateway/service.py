"""The gateway service: what the routes ask of it, over the preparer, the recorder and the upstream.

The service owns the shared state (configuration, catalog, store, calibration, metrics, the HTTP
client, the bounded per-session memory) and hands each part to the role that uses it:
:mod:`.preparing` fits or assembles requests, :mod:`.upstream` sends them to the configured
provider (never one named by the request) with the client's own headers, and :mod:`.recording`
stores each answered turn and calibrates estimate factors from the provider's usage.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx

from ..assembly import Policy, load_policy
from ..catalog.catalog import load_catalog
from ..errors import ConfigError, StoreError
from ..loaded import load_numpy
from ..session import connect_store
from ..session.store import SessionStore
from ..session.turns import ToolCall
from .calibration import Calibration
from .config import UPSTREAM_IDLE_SECONDS, GatewayConfig
from .memory import SessionKinds, TurnMemory
from .metrics import Metrics
from .prepared import Prepared
from .preparing import Preparer
from .providers import ANTHROPIC, Provider
from .recording import Commit, Recorder
from .refusals import NO_RETRY, Refusal
from .settings import RequestSettings, request_settings
from .storehealth import StoreHealth, refusal
from .upstream import KeepNoCookies, Upstream, upstream_at, upstream_url
from .writer import TurnWriter, committed

__all__ = ["Gateway"]


class Gateway:
    """State shared by the handlers: catalog, store, calibration, metrics, the upstream client;
    every handler asks it through a method."""

    def __init__(
        self,
        config: GatewayConfig,
        transport: httpx.AsyncBaseTransport | None = None,
        store: SessionStore | None = None,
        *,
        records: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``records``: answered turns are stored (the served gateway); without, each session's
        previous turn is only remembered (:class:`.memory.TurnMemory`: the in-process transport)."""
        self.config = config
        # Its requests' token lengths and passage scores are read with numpy (the gateway extra
        # installs it) when the process has it: loaded once, here, not on a request.
        load_numpy()
        self.catalog = load_catalog(config.catalog_paths)
        names = {config.policy, *config.allowed_policies} - {None}
        self.policies: dict[str, Policy] = {str(n): load_policy(str(n)) for n in sorted(names, key=str)}
        # what a client names an allowed policy by (its name, not a file's path on this server)
        self.policy_names = {self.policies[p].name: p for p in config.allowed_policies}
        if len(self.policy_names) < len(set(config.allowed_policies)):
            raise ConfigError("two allowed policies have one name: a client could not tell them apart")
        # its answers wait for their commits: none of them waits for a checkpoint of the file too
        self.store = store or connect_store(
            config.store_path,
            busy_timeout_seconds=config.store_busy_timeout_seconds,
            background_checkpoints=True,
        )
        self._own_store = store is None  # opened here: closed by close()
        self.calibration = Calibration(store=self.store)
        try:
            self.calibration.refresh()  # what earlier runs and the other replicas learned
        except BaseException:
            self._close_store()
            raise
        self.writer = TurnWriter()
        self.metrics = Metrics()
        # a store that can tell whether it takes a write now (an SQLite file) says so after a commit failed
        ping_write = getattr(self.store, "ping_write", None)
        self.health = StoreHealth(self.metrics, self.store.ping, self.store.location, ping_write)
        timeout = httpx.Timeout(config.timeout_seconds, connect=min(10.0, config.timeout_seconds))
        # No cap on connections: a pool of httpx's default 100 queued the 101st concurrent request
        # here until --timeout, then blamed the upstream; the provider's rate limits are the cap.
        limits = httpx.Limits(
            max_connections=None, max_keepalive_connections=100, keepalive_expiry=UPSTREAM_IDLE_SECONDS
        )
        # Every client's requests share this one: a cookie an upstream set in one client's answer
        # (Cloudflare's __cf_bm and _cfuvid, on every OpenAI answer) was kept and sent with every
        # other client's requests. The gateway keeps none; a client's own Cookie header still goes.
        self.client = httpx.AsyncClient(
            timeout=timeout, transport=transport, limits=limits, cookies=KeepNoCookies()
        )
        # Per-session state (the previous turn's) is bounded: the oldest sessions are forgotten.
        self.memory = TurnMemory(
            self.store, config.max_sessions_in_memory, lambda: self.health.up, stored=records, clock=clock
        )
        self.kinds = SessionKinds(
            self.store,
            config.max_sessions_in_memory,
            lambda: self.health.up,
            fail_open=config.store_fail_open,
        )
        self._ids = itertools.count(1)
        self.upstream = Upstream(
            self.client, self.metrics, upstream_at(config, ANTHROPIC, ANTHROPIC.path + "/count_tokens")
        )
        self.preparer = Preparer(
            catalog=self.catalog,
            calibration=self.calibration,
            metrics=self.metrics,
            policies=self.policies,
            store=self.store,
            memory=self.memory,
            kinds=self.kinds,
            unknown_model=config.unknown_model,
            low_water=config.low_water if config.conversation_cache else None,
            server_ceiling=config.cost_ceiling_usd is not None,
        )
        self.recorder = Recorder(
            catalog=self.catalog,
            store=self.store,
            calibration=self.calibration,
            metrics=self.metrics,
            writer=self.writer,
            kinds=self.kinds,
            reached_since=lambda at: self.health.reached_at > at,
        )

    # ---- reading requests --------------------------------------------------------------------
    def body_limit(self) -> int:
        """The largest request body accepted, in bytes."""
        return self.config.max_body_bytes

    def settings_for(self, headers: Mapping[str, str]) -> RequestSettings:
        """The request's budgets: the server's, narrowed by the client's headers."""
        return request_settings(self.config, headers, self.policy_names)

    def next_request_id(self) -> int:
        """A number for the log line of each request."""
        return next(self._ids)

    # ---- preparing ---------------------------------------------------------------------------
    def count_tokens(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The count_tokens answer for an Anthropic body (calibrated estimate where not exact)."""
        return self.preparer.count_tokens(body)

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
        return self.preparer.prepare(provider, body, session, settings, exact_factor)

    def depends_on_estimate(self, provider: Provider, prepared: Prepared) -> bool:
        """Whether an exact count could change the fit: a Claude estimate that was cut though
        the request fits without the estimate's safety factor."""
        return self.preparer.depends_on_estimate(provider, prepared, self.config.count_with_upstream)

    # ---- the upstream ------------------------------------------------------------------------
    def upstream_url(self, provider: Provider) -> str:
        """The upstream URL of ``provider``'s API (from the configuration as it stands)."""
        return upstream_url(self.config, provider)

    async def exact_count(
        self, body: Mapping[str, Any], headers: list[tuple[bytes, bytes]], proxy: int
    ) -> int | None:
        """The upstream's own count of ``body`` (``--count-with-upstream``), or None."""
        return await self.upstream.counter.count(body, headers, proxy)

    async def send(
        self, provider: Provider, content: bytes, headers: list[tuple[bytes, bytes]], query: str = ""
    ) -> httpx.Response:
        """Forward ``content`` (the rendered JSON body) to the provider's upstream (streamed); a
        timeout or an unreachable upstream is a :class:`~.refusals.Refusal` (504, 502), counted."""
        url = upstream_url(self.config, provider, query)  # e.g. the SDK's ?beta=true
        return await self.upstream.send(url, content, headers)

    async def forward(
        self,
        method: str,
        url: str,
        headers: list[tuple[bytes, bytes]],
        content: bytes | AsyncIterator[bytes],
    ) -> httpx.Response:
        """A request passed through as it came (:mod:`.passthrough`), its answer streamed."""
        return await self.upstream.send(url, content, headers, method)

    def upstream_at(self, provider: Provider, path: str, query: str = "") -> str:
        """The URL of ``path`` (with ``query``) at ``provider``'s upstream (from the configuration
        as it stands)."""
        return upstream_at(self.config, provider, path, query)

    async def read_answer(self, response: httpx.Response) -> bytes:
        """The upstream's whole answer (a fault while reading is a counted refusal)."""
        return await self.upstream.read(response)

    def unread(self, response: httpx.Response, exc: httpx.HTTPError) -> Refusal:
        """A failure while reading the upstream's answer: a counted refusal (504, 502)."""
        return self.upstream.unread(response, exc)

    def upstream_fault(
        self, response: httpx.Response, status: int, kind: str, message: str, code: str
    ) -> Refusal:
        """An upstream fault after it answered: counted, and told with the upstream's own headers."""
        return self.upstream.fault(response, status, kind, message, code)

    # ---- the store --------------------------------------------------------------------------
    async def store_ready(self) -> None:
        """Before a request is sent upstream: once the store has failed, a round trip to it (see
        :mod:`.storehealth`), and a 503 while it still fails; failing open, the round trip goes
        on in the background and the request is sent."""
        if self.health.up:
            return
        if self.config.store_fail_open:
            self.health.kick()
            return
        failure = await self.health.probe()
        if failure is not None:
            raise refusal(failure, answered=False)

    async def check_store(self) -> StoreError | None:
        """A round trip to the store (``/healthz``): its failure, or None."""
        return await self.health.probe()

    def store_failed(self, exc: StoreError) -> Refusal:
        """A store read that failed while preparing a request: noted, and the client's 503."""
        self.health.failed(exc, "read")
        return refusal(exc, answered=False)

    # ---- recording and metrics ---------------------------------------------------------------
    async def answered(
        self,
        provider: Provider,
        prepared: Prepared,
        answer: str,
        raw_usage: Any,
        calls: tuple[ToolCall, ...] = (),
        abandoned: threading.Event | None = None,
    ) -> None:
        """Before the client gets an answer: metrics, the turn and its calibration stored
        (awaited without holding up the event loop), and only then the turn made the next one's
        baseline. A turn the store could not take is a :class:`~.refusals.Refusal` (503: the
        answer is withheld) unless the gateway fails open; failing open while the store is down,
        the turn is not handed to it at all (logged and counted). A turn the store refused once
        answered (:class:`~.recording.TurnRefused`) is a 409. ``abandoned``: once set (the client
        left meanwhile), a commit still waiting for the store's lock stores nothing."""
        skip = self.config.store_fail_open and not self.health.up
        future = self.recorder.record(
            provider, prepared, answer, raw_usage, calls, store=not skip, abandoned=abandoned
        )
        commit = await committed(future) if future is not None else Commit()
        if commit.refused is not None:  # told whatever the store's failure mode: the store is fine
            raise Refusal(409, f"ctxbudget: {commit.refused}", commit.refused.code, NO_RETRY)
        if commit.failure is not None:
            self.health.failed(commit.failure, "commit")
            if not self.config.store_fail_open:
                raise refusal(commit.failure, answered=True)
        elif future is not None:
            self.health.recovered()
        self.memory.remember(prepared, commit.index)  # only an answered turn is the next one's baseline

    def close(self) -> None:
        """At shutdown: commit every turn handed over, stop the writer, and close the store it
        opened (its last connection checkpoints the write-ahead log into the file)."""
        self.writer.close()
        self._close_store()

    def _close_store(self) -> None:
        if self._own_store:
            self.store.close()

    def note_upstream_error(self, kind: str) -> None:
        """Count an upstream fault of ``kind``."""
        self.upstream.note_error(kind)

    def note_internal_error(self, stage: str) -> None:
        """Count an unexpected error at ``stage`` (answered as a 400, never a bare 500)."""
        self.metrics.internal_errors.labels(stage).inc()

    def note_request(self, path: str, outcome: str) -> None:
        """Count a request by path and outcome."""
        self.metrics.requests.labels(path, outcome).inc()

    def metrics_text(self) -> bytes:
        """The Prometheus text of the gateway's metrics."""
        return self.metrics.render()
