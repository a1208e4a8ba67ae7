"""The catalog file's wire shape (pydantic, strict): validated once at load, then turned into values."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TokenizerEntry(_Strict):
    encoding: str
    exact: bool
    safety_factor: float = Field(default=1.0, ge=1.0, le=3.0)


class PricesEntry(_Strict):
    """USD per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write_5m: float = Field(ge=0)
    cache_write_1h: float = Field(ge=0)
    cache_read: float = Field(ge=0)


class CacheEntry(_Strict):
    mode: Literal["explicit", "automatic", "none"]
    min_cacheable_tokens: int = Field(ge=0)
    max_breakpoints: int = Field(ge=0)


class ModelEntry(_Strict):
    id: str = Field(min_length=1)
    provider: str = Field(min_length=1)
    kind: Literal["chat", "embedding", "vision"] = "chat"
    context_window: int = Field(gt=0)
    max_output_tokens: int = Field(gt=0)
    tokenizer: TokenizerEntry
    prices: PricesEntry
    cache: CacheEntry
    sources: dict[str, str] = Field(default_factory=dict)


class AliasEntry(_Strict):
    alias: str = Field(min_length=1)
    target: str = Field(min_length=1)


class FamilyEntry(_Strict):
    """Tokenizer estimate for ids that start with ``prefix`` and have no entry of their own."""

    prefix: str = Field(min_length=1)
    tokenizer: TokenizerEntry
    source: str = ""


class CatalogFile(_Strict):
    schema_version: Literal[1]
    generated_from: str = ""
    default_tokenizer: TokenizerEntry | None = None
    families: list[FamilyEntry] = Field(default_factory=list)
    aliases: list[AliasEntry] = Field(default_factory=list)
    models: list[ModelEntry] = Field(default_factory=list)
