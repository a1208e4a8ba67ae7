"""Catalog values: frozen dataclasses the core works with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["CacheRules", "Family", "ModelSpec", "Prices", "TokenizerSpec", "WindowResolution"]


@dataclass(frozen=True, kw_only=True)
class TokenizerSpec:
    """Which encoding counts a model, whether that count is exact, and the estimate's factor."""

    encoding: str
    exact: bool
    safety_factor: float = 1.0


@dataclass(frozen=True, kw_only=True)
class Prices:
    """Prices in USD per million tokens."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float


@dataclass(frozen=True, kw_only=True)
class CacheRules:
    """How the provider caches prompts: explicit breakpoints, automatic prefixes, or none."""

    mode: Literal["explicit", "automatic", "none"]
    min_cacheable_tokens: int
    max_breakpoints: int


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """One catalog entry; ``sources`` says where each value came from."""

    id: str
    provider: str
    kind: Literal["chat", "embedding", "vision"]
    context_window: int
    max_output_tokens: int
    tokenizer: TokenizerSpec
    prices: Prices
    cache: CacheRules
    sources: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Family:
    """Tokenizer estimate for every id starting with ``prefix``."""

    prefix: str
    tokenizer: TokenizerSpec
    source: str = ""


WindowRule = Literal["explicit", "exact", "scoped", "alias", "floor"]


@dataclass(frozen=True, kw_only=True)
class WindowResolution:
    """The context window chosen for a model id, the rule that chose it, and any warning."""

    model_id: str
    context_window: int
    rule: WindowRule
    spec: ModelSpec | None
    warning: str | None = None
