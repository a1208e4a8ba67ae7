"""The catalog file's wire shape (pydantic, strict).

User catalogs (TOML or JSON) are validated against it when loaded; the bundled file is validated
against it by the test suite and at generation, so start-up does not pay for it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from .values import MAX_WINDOW_TOKENS


class _Strict(BaseModel):
    # no NaN or Infinity: a price of `inf` made costs NaN and reports that are not strict JSON
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)


# A model id or alias a client can send: no blank or control character (the resolver gives such
# an id nothing, so an entry named so could never be reached).
ModelName = Annotated[str, Field(min_length=1, pattern=r"^[^\s\x00-\x1f\x7f]+$")]


class _TokenizerEntry(_Strict):
    encoding: str
    exact: bool
    safety_factor: float = Field(default=1.0, ge=1.0, le=3.0)

    @model_validator(mode="after")
    def _factor_only_for_estimates(self) -> _TokenizerEntry:
        if self.exact and self.safety_factor != 1.0:
            raise ValueError(
                f"safety_factor {self.safety_factor} is given for an exact tokenizer, which counts "
                "as the provider does; drop it, or set exact = false for an estimate"
            )
        return self


class LongContextEntry(_Strict):
    """The prices of a request whose input is over ``above_tokens``, for every token of it."""

    above_tokens: StrictInt = Field(gt=0)
    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write_5m: float | None = Field(default=None, ge=0)
    cache_write_1h: float | None = Field(default=None, ge=0)
    cache_read: float | None = Field(default=None, ge=0)


class PricesEntry(_Strict):
    """USD per million tokens; a cache price left out (or null) is not published."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write_5m: float | None = Field(default=None, ge=0)
    cache_write_1h: float | None = Field(default=None, ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    long_context: LongContextEntry | None = None


class CacheEntry(_Strict):
    mode: Literal["explicit", "automatic", "none"]
    min_cacheable_tokens: StrictInt = Field(ge=0)
    max_breakpoints: StrictInt = Field(ge=0)


_NO_CACHE = CacheEntry(mode="none", min_cacheable_tokens=0, max_breakpoints=0)


class ModelEntry(_Strict):
    id: ModelName
    provider: str = Field(min_length=1)
    kind: Literal["chat", "embedding", "vision"] = "chat"
    # No model's window is near a billion tokens: a larger figure is a typo (1e23 was accepted)
    context_window: StrictInt = Field(gt=0, le=MAX_WINDOW_TOKENS)
    max_input_tokens: StrictInt | None = Field(default=None, gt=0)
    max_output_tokens: StrictInt | None = Field(default=None, gt=0)
    # A name from the file's `tokenizers` table, or the tokenizer itself.
    tokenizer: str | _TokenizerEntry | None = None
    prices: PricesEntry | None = None
    cache: CacheEntry = _NO_CACHE
    aliases: list[ModelName] = Field(default_factory=list)
    match: dict[str, Any] | None = None
    deprecated: str | None = None
    sources: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _caps_within_window(self) -> ModelEntry:
        if self.max_input_tokens is not None and self.max_input_tokens > self.context_window:
            raise ValueError(
                f"max_input_tokens ({self.max_input_tokens}) is above context_window ({self.context_window}); "
                "give it only where the provider caps input below the window"
            )
        if self.max_output_tokens is not None and self.max_output_tokens > self.context_window:
            raise ValueError(
                f"max_output_tokens ({self.max_output_tokens}) is above context_window ({self.context_window}): "
                "a reply is held in the window with its prompt"
            )
        return self


class AliasEntry(_Strict):
    alias: ModelName
    target: ModelName


class FamilyEntry(_Strict):
    """Tokenizer estimate for ids that contain ``prefix`` and have no entry of their own."""

    prefix: str = Field(min_length=1)
    tokenizer: str | _TokenizerEntry
    source: str = ""


class ProviderEntry(_Strict):
    """Which unscoped ids belong to a provider (its entries and rules are then tried first)."""

    id: str = Field(min_length=1)
    model_match: dict[str, Any]


class CatalogFile(_Strict):
    schema_version: Literal[1]
    generated_from: str = ""
    sources: dict[str, str] = Field(default_factory=dict)
    tokenizers: dict[str, _TokenizerEntry] = Field(default_factory=dict)
    default_tokenizer: str | _TokenizerEntry | None = None
    families: list[FamilyEntry] = Field(default_factory=list)
    scopes: dict[str, str] = Field(default_factory=dict)
    providers: list[ProviderEntry] = Field(default_factory=list)
    aliases: list[AliasEntry] = Field(default_factory=list)
    models: list[ModelEntry] = Field(default_factory=list)
