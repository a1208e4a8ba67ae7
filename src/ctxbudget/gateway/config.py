"""Gateway configuration, resolved once at the edge (explicit option > environment > default)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..trim.steps import DEFAULT_LOW_WATER

__all__ = ["KEEP_ALIVE_SECONDS", "UPSTREAM_IDLE_SECONDS", "GatewayConfig"]

# A connection kept open between requests is closed by one side when idle: a request sent on it as
# the other side closes it fails (a read error, a 502 here). So the gateway keeps its clients'
# connections longer than their pools do (the SDKs' httpx pools drop them after 5 s, aiohttp
# after 15), and drops its own to an upstream sooner than common servers close them (uvicorn,
# behind vLLM and LiteLLM proxies, and Node after 5 s): each side lets go first where it should.
KEEP_ALIVE_SECONDS = 75
UPSTREAM_IDLE_SECONDS = 4.0


MAX_BODY_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class GatewayConfig:
    """Where to listen, where to forward (fixed: never taken from a request), and the limits."""

    host: str = "127.0.0.1"
    port: int = 8787
    anthropic_upstream: str = "https://api.anthropic.com"
    openai_upstream: str = "https://api.openai.com"
    # An SQLite file, or a postgresql:// URL shared by replicas (docs/deploy.md).
    store_path: str = "sessions.db"
    # How long a turn's write waits for another writer's lock on the store.
    store_busy_timeout_seconds: float = 30.0
    # A store that cannot take a turn: False answers 503 (nothing sent, or the answer withheld);
    # True sends and answers anyway, the turn unrecorded (logged and counted).
    store_fail_open: bool = False
    cost_ceiling_usd: float | None = None
    # The largest body read (413 above it). Below the providers' own (Anthropic's Messages API
    # takes 32 MB) on purpose: a fit holds 4-5x an image's bytes, 9x a text's, and up to 60x for a
    # body of many short messages (30 MB of them: 1.9 GB, 30 s), and requests run at once. Raise
    # it for clients that send large images or PDFs, with the memory that takes.
    max_body_bytes: int = MAX_BODY_BYTES
    timeout_seconds: float = 600.0
    catalog_paths: tuple[str, ...] = ()
    # "error": an id the catalog cannot resolve is answered 400; "floor": budgeted at 8,191 tokens.
    unknown_model: Literal["error", "floor"] = "error"
    # With a tiered policy, chat bodies are mapped onto its tiers and assembled instead of fitted.
    policy: str | None = None
    # A token budget below the model's window for every request (0: the window).
    max_context_tokens: int = 0
    # Policies a client may pick per request with X-Ctxbudget-Policy.
    allowed_policies: tuple[str, ...] = ()
    # Ask the provider's count_tokens endpoint when a fit decision depends on a Claude estimate.
    count_with_upstream: bool = False
    # Conversation caching in fit mode (docs/caching.md): the history cut in steps to this share
    # of its budget and held while it fits, and rolling breakpoints on Anthropic bodies.
    conversation_cache: bool = True
    low_water: float = DEFAULT_LOW_WATER
    # Sessions whose state (previous report, lock) is held in memory; the oldest are forgotten.
    max_sessions_in_memory: int = 4096
    # Any other /v1/ path (models, embeddings, files, batches, a background response's retrieval)
    # sent to the upstream as it came, unfitted and unpriced (:mod:`.passthrough`); else a 404.
    pass_through: bool = False
    # Encode o200k_base and cl100k_base with quicktok (same ids, a third of tiktoken's time on a
    # large body) when it is installed: loaded at start-up, about 1 s and 117 MB (tokens/fast.py),
    # so off by default (a worker answers within 1 s of its start: bench_startup.py).
    fast_tokenizer: bool = False

    def __post_init__(self) -> None:
        """Every option checked where it is given (the in-process transport builds one from its
        caller's arguments): a NaN ceiling compared False with every cost and let everything
        through, a string one failed at the first request, a string of catalog paths was read a
        character at a time."""
        if not _number(self.low_water) or not 0 < self.low_water <= 1:
            raise ConfigError(
                f"low_water must be a share of the history budget, above 0 and at most 1, got {self.low_water!r}"
            )
        if self.cost_ceiling_usd is not None and not (
            _number(self.cost_ceiling_usd) and self.cost_ceiling_usd >= 0
        ):
            raise ConfigError(
                f"cost_ceiling_usd must be a number of dollars, at least 0, got {self.cost_ceiling_usd!r}"
            )
        counts = {"max_context_tokens": self.max_context_tokens, "max_body_bytes": self.max_body_bytes}
        for name, value in counts.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be a whole number, at least 0, got {value!r}")
        if not _number(self.timeout_seconds) or self.timeout_seconds <= 0:
            raise ConfigError(
                f"timeout_seconds must be a number of seconds above 0, got {self.timeout_seconds!r}"
            )
        if self.unknown_model not in ("error", "floor"):
            raise ConfigError(f'unknown_model must be "error" or "floor", got {self.unknown_model!r}')
        paths = self.catalog_paths
        if isinstance(paths, str | os.PathLike) or not all(isinstance(p, str | os.PathLike) for p in paths):
            raise ConfigError(f"catalog_paths must be a tuple of file paths, got {self.catalog_paths!r}")
        object.__setattr__(self, "catalog_paths", tuple(os.fspath(p) for p in paths))  # Path objects too
        for name in ("anthropic_upstream", "openai_upstream"):
            _check_upstream(name, getattr(self, name))


def _check_upstream(name: str, url: object) -> None:
    """An upstream is an http(s) URL with a host (``notaurl`` or ``ftp://x`` started the gateway, and
    every request then failed with a 502)."""
    parsed = urlsplit(url) if isinstance(url, str) else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(
            f"{name} must be an http:// or https:// URL with a host (https://api.example.com), got {url!r:.80}"
        )


def _number(value: object) -> bool:
    """A finite int or float, not a bool."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
