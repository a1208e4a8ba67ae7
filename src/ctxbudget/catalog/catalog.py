"""The model catalog: loading (bundled file, user overrides) and resolution rules.

Window resolution, in order: an explicit ``max_context_tokens`` > 0; the exact id; a scoped
id's bare name (``openai/gpt-5`` -> ``gpt-5``), or for a bare id the scoped entries that carry
it when they all agree (an unscoped entry always wins); an alias; else the conservative floor,
the smallest chat-model window in the catalog, with one warning per unknown id. Where one id
appears more than once with different windows, the smaller window is used.
"""

from __future__ import annotations

import importlib.resources
import logging
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ..errors import ConfigError
from ..tokens.registry import bare_model_id, encoding_name_for_model
from ..validation import first_error
from .schema import CatalogFile, ModelEntry, TokenizerEntry
from .values import CacheRules, Family, ModelSpec, Prices, TokenizerSpec, WindowResolution, WindowRule

__all__ = ["Catalog", "load_catalog"]

logger = logging.getLogger(__name__)

_FALLBACK_TOKENIZER = TokenizerSpec(encoding="o200k_base", exact=False, safety_factor=1.3)
_WARNED_UNKNOWN: set[str] = set()


def _tokenizer(entry: TokenizerEntry) -> TokenizerSpec:
    factor = 1.0 if entry.exact else entry.safety_factor
    return TokenizerSpec(encoding=entry.encoding, exact=entry.exact, safety_factor=factor)


def _model(entry: ModelEntry) -> ModelSpec:
    return ModelSpec(
        id=entry.id,
        provider=entry.provider,
        kind=entry.kind,
        context_window=entry.context_window,
        max_output_tokens=entry.max_output_tokens,
        tokenizer=_tokenizer(entry.tokenizer),
        prices=Prices(**entry.prices.model_dump()),
        cache=CacheRules(**entry.cache.model_dump()),
        sources=dict(entry.sources),
    )


@dataclass(frozen=True)
class Catalog:
    """Models, aliases and tokenizer families, with the resolution rules over them."""

    models: tuple[ModelSpec, ...]
    aliases: Mapping[str, str] = field(default_factory=dict)
    families: tuple[Family, ...] = ()
    default_tokenizer: TokenizerSpec = _FALLBACK_TOKENIZER

    def _entries(self, model_id: str) -> list[ModelSpec]:
        return [m for m in self.models if m.id == model_id]

    @staticmethod
    def _smallest(entries: list[ModelSpec]) -> ModelSpec:
        return min(entries, key=lambda m: m.context_window)

    def _scoped_agreeing(self, bare: str) -> ModelSpec | None:
        scoped = [m for m in self.models if "/" in m.id and bare_model_id(m.id) == bare]
        if scoped and len({m.context_window for m in scoped}) == 1:
            return scoped[0]
        return None

    def _lookup(self, model_id: str) -> tuple[ModelSpec, WindowRule] | None:
        exact = self._entries(model_id)
        if exact:
            return self._smallest(exact), "exact"
        bare = bare_model_id(model_id)
        if bare != model_id and self._entries(bare):
            return self._smallest(self._entries(bare)), "scoped"
        agreeing = self._scoped_agreeing(bare)
        if agreeing is not None:
            return agreeing, "scoped"
        for name in (model_id, bare):
            target = self.aliases.get(name)
            if target is not None and self._entries(target):
                return self._smallest(self._entries(target)), "alias"
        return None

    def find_model(self, model_id: str) -> ModelSpec | None:
        """The entry ``model_id`` resolves to (exact, scoped, alias), or None."""
        found = self._lookup(model_id.strip())
        return found[0] if found else None

    def get_model(self, model_id: str) -> ModelSpec:
        """Like :meth:`find_model`, but raises :class:`ConfigError` naming known ids."""
        spec = self.find_model(model_id)
        if spec is None:
            known = ", ".join(sorted({m.id for m in self.models} | set(self.aliases)))
            raise ConfigError(f"unknown model {model_id!r}; the catalog knows: {known}")
        return spec

    def floor_window(self) -> int:
        """The smallest chat-model window in the catalog: the budget for unknown ids."""
        chats = [m.context_window for m in self.models if m.kind == "chat"]
        if not chats:
            raise ConfigError("the catalog has no chat models, so unknown ids have no floor window")
        return min(chats)

    def resolve_window(self, model_id: str, max_context_tokens: int = 0) -> WindowResolution:
        """Choose the context window for ``model_id`` by the documented rules."""
        found = self._lookup(model_id.strip())
        spec = found[0] if found else None
        if max_context_tokens > 0:
            return WindowResolution(
                model_id=model_id, context_window=max_context_tokens, rule="explicit", spec=spec
            )
        if found is not None:
            return WindowResolution(
                model_id=model_id, context_window=found[0].context_window, rule=found[1], spec=found[0]
            )
        floor = self.floor_window()
        warning = (
            f"unknown model {model_id!r}: budgeting against the smallest chat window in the catalog "
            f"({floor:,} tokens); set --max-context-tokens or add the model with --catalog"
        )
        if model_id not in _WARNED_UNKNOWN:
            _WARNED_UNKNOWN.add(model_id)
            logger.warning(warning)
        return WindowResolution(
            model_id=model_id, context_window=floor, rule="floor", spec=None, warning=warning
        )

    def tokenizer_for(self, model_id: str) -> TokenizerSpec:
        """The catalog's tokenizer for the id, else OpenAI's mapping, else a family estimate."""
        spec = self.find_model(model_id)
        if spec is not None:
            return spec.tokenizer
        openai_encoding = encoding_name_for_model(model_id)
        if openai_encoding is not None:
            return TokenizerSpec(encoding=openai_encoding, exact=True)
        bare = bare_model_id(model_id.strip()).lower()
        for family in sorted(self.families, key=lambda f: -len(f.prefix)):
            if bare.startswith(family.prefix):
                return family.tokenizer
        return self.default_tokenizer

    def merged(self, override: Catalog) -> Catalog:
        """This catalog with ``override``'s models, aliases and families replacing same-named ones."""
        replaced = {m.id for m in override.models}
        families = {f.prefix: f for f in (*self.families, *override.families)}
        return Catalog(
            models=tuple(m for m in self.models if m.id not in replaced) + override.models,
            aliases={**self.aliases, **override.aliases},
            families=tuple(families.values()),
            default_tokenizer=override.default_tokenizer
            if override.default_tokenizer is not _FALLBACK_TOKENIZER
            else self.default_tokenizer,
        )


def parse_catalog(text: str, source: str) -> Catalog:
    """Parse and validate catalog TOML ``text``; errors name ``source`` and the field path."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    try:
        parsed = CatalogFile.model_validate(raw)
    except ValidationError as exc:
        path, message, _ = first_error(exc)
        raise ConfigError(f"{source}: {path}: {message}") from exc
    default = _tokenizer(parsed.default_tokenizer) if parsed.default_tokenizer else _FALLBACK_TOKENIZER
    return Catalog(
        models=tuple(_model(m) for m in parsed.models),
        aliases={a.alias: a.target for a in parsed.aliases},
        families=tuple(
            Family(prefix=f.prefix, tokenizer=_tokenizer(f.tokenizer), source=f.source)
            for f in parsed.families
        ),
        default_tokenizer=default,
    )


_BUNDLED: Catalog | None = None


def bundled_catalog() -> Catalog:
    """The catalog shipped with ctxbudget (loaded once)."""
    global _BUNDLED
    if _BUNDLED is None:
        text = (importlib.resources.files("ctxbudget.catalog") / "models.toml").read_text("utf-8")
        _BUNDLED = parse_catalog(text, "bundled catalog models.toml")
    return _BUNDLED


def load_catalog(paths: Iterable[str | Path] = ()) -> Catalog:
    """The bundled catalog with each user catalog file in ``paths`` applied on top, in order."""
    catalog = bundled_catalog()
    for path in paths:
        try:
            text = Path(path).read_text("utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read catalog file {str(path)!r}: {exc.strerror}") from exc
        catalog = catalog.merged(parse_catalog(text, str(path)))
    return catalog
