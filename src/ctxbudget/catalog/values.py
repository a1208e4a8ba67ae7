"""Catalog values: frozen dataclasses the core works with."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "FALLBACK_TOKENIZER",
    "MAX_WINDOW_TOKENS",
    "NO_CACHE",
    "CacheRules",
    "Family",
    "LongContextPrices",
    "ModelSpec",
    "Prices",
    "ResolutionRule",
    "TokenizerSpec",
    "WindowResolution",
    "family_tokenizer",
]

# The largest window a catalog entry, or a window given for a request, may have.
MAX_WINDOW_TOKENS = 1_000_000_000


def input_limit(context_window: int, max_input_tokens: int | None) -> int:
    """The window, or the input cap when the provider sets one below it."""
    return context_window if max_input_tokens is None else min(context_window, max_input_tokens)


@dataclass(frozen=True, kw_only=True)
class TokenizerSpec:
    """Which encoding counts a model, whether that count is exact, and the estimate's factor."""

    encoding: str
    exact: bool
    safety_factor: float = 1.0


@dataclass(frozen=True, kw_only=True)
class Prices:
    """Prices in USD per million tokens; a cache price is None where the provider publishes none.
    ``long_context``: the prices of a request whose input is over its ``above_tokens`` (Claude
    Sonnet 4.5 and Gemini 2.5 Pro past 200,000 tokens), which apply to all of its tokens."""

    input: float
    output: float
    cache_write_5m: float | None = None
    cache_write_1h: float | None = None
    cache_read: float | None = None
    long_context: LongContextPrices | None = None

    def for_input(self, input_tokens: int) -> Prices:
        """The prices a request of ``input_tokens`` input tokens is billed at."""
        above = self.long_context
        return above.prices if above is not None and input_tokens > above.above_tokens else self


@dataclass(frozen=True, kw_only=True)
class LongContextPrices:
    """The prices of a request over ``above_tokens`` input tokens, for every token of it."""

    above_tokens: int
    prices: Prices


@dataclass(frozen=True, kw_only=True)
class CacheRules:
    """How the provider caches prompts: explicit breakpoints, automatic prefixes, or none."""

    mode: Literal["explicit", "automatic", "none"]
    min_cacheable_tokens: int
    max_breakpoints: int


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """One catalog entry; ``sources`` says where each value came from.

    ``max_input_tokens`` is set where the provider accepts fewer input tokens than the window
    (gpt-5: a 400,000-token window, at most 272,000 in). ``prices`` is None where no price is
    published; ``max_output_tokens`` is None where no output cap is.
    """

    id: str
    provider: str
    kind: Literal["chat", "embedding", "vision"]
    context_window: int
    max_output_tokens: int | None
    tokenizer: TokenizerSpec
    prices: Prices | None
    cache: CacheRules
    max_input_tokens: int | None = None
    deprecated: str | None = None
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def input_limit(self) -> int:
        """The most input tokens the provider accepts: the window, or the input cap below it."""
        return input_limit(self.context_window, self.max_input_tokens)


@dataclass(frozen=True, kw_only=True)
class Family:
    """Tokenizer estimate for every id containing ``prefix`` that has no entry of its own."""

    prefix: str
    tokenizer: TokenizerSpec
    source: str = ""


ResolutionRule = Literal[
    "explicit", "exact", "alias", "scoped", "fine-tuned", "snapshot", "match", "family", "floor"
]


@dataclass(frozen=True, kw_only=True)
class WindowResolution:
    """The window chosen for a model id, the rule that chose it, the path taken, and any warning.

    ``max_input_tokens`` is the provider's input cap when it is below the window, else None.
    ``path`` lists each step from the id as sent to the catalog entry (``scoped bedrock/ -> aws``,
    ``snapshot -20250929``, ``exact claude-sonnet-4-5``).
    """

    model_id: str
    context_window: int
    rule: ResolutionRule
    spec: ModelSpec | None
    max_input_tokens: int | None = None
    path: tuple[str, ...] = ()
    warning: str | None = None

    @property
    def catalog_id(self) -> str | None:
        """The catalog id the resolution landed on (None for the floor or an unknown id)."""
        return self.spec.id if self.spec else None

    @property
    def input_limit(self) -> int:
        """The most input tokens to send: the window, or the input cap when it is smaller."""
        return input_limit(self.context_window, self.max_input_tokens)


# The tokenizer of a model no entry, family or default names: o200k scaled by 1.3, an estimate.
FALLBACK_TOKENIZER = TokenizerSpec(encoding="o200k_base", exact=False, safety_factor=1.3)
# A model whose provider publishes no prompt caching.
NO_CACHE = CacheRules(mode="none", min_cacheable_tokens=0, max_breakpoints=0)


def family_tokenizer(families: Iterable[Family], name: str) -> TokenizerSpec | None:
    """The tokenizer of the first family whose prefix is in ``name`` (a lowercased id)."""
    for family in families:
        if family.prefix.lower() in name:
            return family.tokenizer
    return None
