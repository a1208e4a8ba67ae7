"""Building a :class:`Catalog` from a catalog document: tokenizers by name, model entries, aliases,
and the checks that name the file and the JSON path of what is wrong (a match rule that does not
compile, an unknown encoding, an alias that points nowhere)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError, unreadable_file
from ..formats.jsonvalue import RepeatedKey, unique_keys
from ..tokens.registry import list_encodings
from .bundled import entry_heads, entry_keys
from .catalog import Catalog
from .entries import Deferred, ModelEntries
from .matching import ANY_IDS, compile_clause
from .values import (
    FALLBACK_TOKENIZER,
    NO_CACHE,
    CacheRules,
    Family,
    LongContextPrices,
    ModelSpec,
    Prices,
    TokenizerSpec,
    family_tokenizer,
)

__all__ = ["build_catalog", "check_merge", "validated"]


def build_catalog(
    raw: Mapping[str, Any],
    source: str,
    named: Mapping[str, Mapping[str, Any]] | None = None,
    families: Sequence[Mapping[str, Any]] = (),
    base: Catalog | None = None,
) -> Catalog:
    """The catalog a document describes (validated already, or the trusted bundled file);
    ``named``: tokenizers its entries may name besides its own table's (the bundled ones);
    ``families``: the families its entries' ids fall in after its own (the bundled ones);
    ``base``: the catalog it will override, whose entry of an id gives the tokenizer of an entry
    with that id and none of its own."""
    return _Builder(raw, source, named or {}, families, base).build()


class _Builder:
    """Turns a catalog document (already validated, or trusted) into a :class:`Catalog`."""

    def __init__(
        self,
        raw: Mapping[str, Any],
        source: str,
        named: Mapping[str, Mapping[str, Any]],
        families: Sequence[Mapping[str, Any]] = (),
        base: Catalog | None = None,
    ) -> None:
        self.raw = raw
        self.source = source
        self.base = base
        table = {**named, **(raw.get("tokenizers") or {})}  # the file's own names first
        self.tokenizers = {k: _tokenizer_value(v) for k, v in table.items()}
        self.families = tuple(
            Family(prefix=f["prefix"], tokenizer=self.tokenizer(f["tokenizer"], "families"))
            for f in [*(raw.get("families") or []), *families]
        )
        self.own_families = self.families[: len(raw.get("families") or [])]
        default = raw.get("default_tokenizer")
        self.own_default = self.tokenizer(default, "default_tokenizer") if default else None
        self.default = self.own_default or FALLBACK_TOKENIZER

    def tokenizer(self, given: str | Mapping[str, Any], where: str) -> TokenizerSpec:
        if not isinstance(given, str):
            return _tokenizer_value(given)
        if given not in self.tokenizers:
            known = ", ".join(sorted(self.tokenizers)) or "none"
            raise ConfigError(
                f"{self.source}: {where}: unknown tokenizer {given!r}; the names it may use: {known}"
            )
        return self.tokenizers[given]

    def model(self, entry: Mapping[str, Any], position: int) -> ModelSpec:
        given = entry.get("tokenizer")
        name = str(entry["id"]).lower()
        tokenizer = (
            self.tokenizer(given, f"$.models[{position}].tokenizer")
            if given is not None
            else family_tokenizer(self.own_families, name)
            or self.replaced_tokenizer(name, entry["provider"])
            or self.own_default
            or family_tokenizer(self.families, name)
            or self.default
        )
        prices = entry.get("prices")
        cache = entry.get("cache")
        return ModelSpec(
            id=entry["id"],
            provider=entry["provider"],
            kind=entry.get("kind", "chat"),
            context_window=int(entry["context_window"]),
            max_input_tokens=entry.get("max_input_tokens"),
            max_output_tokens=entry.get("max_output_tokens"),
            tokenizer=tokenizer,
            prices=_prices_value(prices) if prices else None,
            cache=CacheRules(**cache) if cache else NO_CACHE,
            deprecated=entry.get("deprecated"),
            sources=dict(entry.get("sources") or {}),
        )

    def replaced_tokenizer(self, name: str, provider: str) -> TokenizerSpec | None:
        """The tokenizer of the base catalog's entry of the same provider that id ``name`` is (its
        id, an alias such as a dated snapshot, or a snapshot of it): an entry that overrides
        gpt-4o's window counted it at the default x1.3 estimate where the bundled entry counts it
        exactly. Another provider's model under a known id (a self-hosted ``gpt-4o``) is not
        counted as that entry (the file's own families and default come first, then the bundled
        families, as before)."""
        if self.base is None:
            return None
        own = [spec for spec in self.base.models_named(name) if spec.provider == provider]
        if own:
            return own[0].tokenizer
        found = self.base.find_model(name)
        if found is None or found.provider != provider:
            return None
        return found.tokenizer if self.base.resolution_rule(name) in _SAME_MODEL_RULES else None

    def build(self) -> Catalog:
        entries = self.raw.get("models") or []
        models = ModelEntries(entry_keys(entries), lambda i: self.model(entries[i], i))
        return Catalog(
            models=models,
            aliases=Deferred(lambda: self._aliases(entries)),
            families=self.families,
            scopes=dict(self.raw.get("scopes") or {}),
            matches=Deferred(lambda: {(h.provider, h.id): h.match for h in entry_heads(entries) if h.match}),
            owners=tuple((p["id"], p["model_match"]) for p in self.raw.get("providers") or []),
            default_tokenizer=self.default,
        )

    def _aliases(self, entries: Sequence[Mapping[str, Any]]) -> dict[str, tuple[tuple[str, str | None], ...]]:
        """The entries' own aliases, then the document's table (an alias there names one target)."""
        aliases: dict[str, list[tuple[str, str | None]]] = {}
        for head in entry_heads(entries):
            for alias in head.aliases or ():
                aliases.setdefault(alias, []).append((head.id, head.provider))
        for given in self.raw.get("aliases") or []:
            aliases[given["alias"]] = [(given["target"], None)]
        return {k: tuple(v) for k, v in aliases.items()}


# How an id names a model it is (not one it only resembles: a match rule, a family).
_SAME_MODEL_RULES = frozenset({"exact", "alias", "snapshot", "scoped"})


def _prices_value(given: Mapping[str, Any]) -> Prices:
    above = given.get("long_context")
    flat = {k: v for k, v in given.items() if k != "long_context"}
    if not above:
        return Prices(**flat)
    over = Prices(**{k: v for k, v in above.items() if k != "above_tokens"})
    return Prices(**flat, long_context=LongContextPrices(above_tokens=above["above_tokens"], prices=over))


def _tokenizer_value(given: Mapping[str, Any]) -> TokenizerSpec:
    exact = bool(given["exact"])
    factor = 1.0 if exact else float(given.get("safety_factor", 1.0))
    return TokenizerSpec(encoding=given["encoding"], exact=exact, safety_factor=factor)


def _decode(text: str, source: str) -> Any:
    """A catalog file's document: JSON by a ``.json`` name, else TOML (errors name ``source``;
    nesting too deep or a number too long for Python's int were tracebacks)."""
    import tomllib  # only a user's catalog reaches here (the bundled one is read on its own)

    kind = "JSON" if source.lower().endswith(".json") else "TOML"
    # a byte-order mark (Windows editors write one) is read past, as a JSON body's is
    text = text.removeprefix("\ufeff")
    try:
        return json.loads(text, object_pairs_hook=unique_keys) if kind == "JSON" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{source}: not valid {kind}: {exc}") from exc
    except RepeatedKey as exc:  # TOML refuses them itself
        raise ConfigError(f"{source}: the key {exc.key!r} is given twice in one object") from None
    except (RecursionError, ValueError) as exc:  # nesting too deep, an integer of thousands of digits
        raise unreadable_file(source, exc) from exc


def _check_ids(raw: Mapping[str, Any], source: str) -> None:
    """No two entries of one provider share an id (ids resolve ignoring case): the second could
    never be reached."""
    seen: dict[tuple[str, str], int] = {}
    for i, entry in enumerate(raw.get("models") or []):
        key = (entry["provider"], entry["id"].lower())
        if key in seen:
            raise ConfigError(
                f"{source}: $.models[{i}]: id {entry['id']!r} of provider {entry['provider']!r} is also "
                f"$.models[{seen[key]}] (ids are matched ignoring case); give each model one entry"
            )
        seen[key] = i


def check_rules(raw: Mapping[str, Any], source: str) -> None:
    """Every match rule compiles and is not slow on a long id; errors name the file and the JSON
    path (a :class:`Catalog` compiles its rules without that check: see ``compile_clause``)."""
    for i, entry in enumerate(raw.get("models") or []):
        if entry.get("match") is not None:
            where = f"{source}: $.models[{i}].match"
            if all(map(compile_clause(entry["match"], where), ANY_IDS)):  # {"regex": ".*"}
                raise ConfigError(
                    f"{where}: the rule matches any id, which would resolve every model id to this model"
                )
    for i, entry in enumerate(raw.get("providers") or []):
        compile_clause(entry["model_match"], f"{source}: $.providers[{i}].model_match")


def _check_encodings(catalog: Catalog, source: str) -> None:
    known = list_encodings()
    named = [(f"$.models[{i}] {m.id!r}", m.tokenizer.encoding) for i, m in enumerate(catalog.models)]
    named += [(f"family {f.prefix!r}", f.tokenizer.encoding) for f in catalog.families]
    named.append(("default_tokenizer", catalog.default_tokenizer.encoding))
    for where, encoding in named:
        if encoding not in known:
            raise ConfigError(
                f"{source}: {where}: unknown encoding {encoding!r}; registered encodings: {', '.join(known)}"
            )


def check_merge(merged: Catalog, override: Catalog, source: str) -> None:
    """What only the merged catalog can tell: aliases that point nowhere or hide behind an id,
    scopes that name no provider."""
    ids = {model_id.lower() for _, model_id in merged.models.keys}
    for alias, targets in override.aliases.items():
        _one_target_a_provider(alias, targets, source)
        if alias.lower() in ids:
            raise ConfigError(
                f"{source}: alias {alias!r} is also a model id, and the exact id always wins; rename the alias"
            )
        for target, _ in targets:
            if target.lower() not in ids:
                raise ConfigError(f"{source}: alias {alias!r} points to {target!r}, which no catalog lists")
    providers = {provider for provider, _ in merged.models.keys}
    for scope, provider in override.scopes.items():
        if provider not in providers:
            raise ConfigError(f"{source}: scope {scope!r} names provider {provider!r}, which has no models")


def _one_target_a_provider(alias: str, targets: Sequence[tuple[str, str | None]], source: str) -> None:
    """An alias names one model of a provider (of several providers it may: a scoped id picks
    one); two of one provider would leave one of them never reached, silently."""
    by_provider: dict[str | None, set[str]] = {}
    for target, provider in targets:
        by_provider.setdefault(provider, set()).add(target)
    for provider, named in by_provider.items():
        if len({n.lower() for n in named}) > 1:
            raise ConfigError(
                f"{source}: alias {alias!r} is given to more than one model of provider {provider!r} "
                f"({', '.join(sorted(named))}); give it to one"
            )


def _bundled_tables() -> tuple[Mapping[str, Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The bundled catalog's named tokenizers (``o200k_exact``, ``claude_estimate``, ...), which
    a user catalog's entries may name, and its families, which a user entry with no tokenizer of
    its own falls in (``gemini-house`` counts as Gemini, not at the default estimate)."""
    from .catalog import bundled_document

    document = bundled_document()
    return document.get("tokenizers") or {}, list(document.get("families") or [])


def validated(text: str, source: str, base: Catalog | None = None) -> Catalog:
    """A user catalog's text parsed, validated and built; errors name ``source`` and the path.
    An entry without a tokenizer that replaces one of ``base`` takes that one's."""
    from pydantic import ValidationError

    from ..validation import first_error
    from .schema import CatalogFile

    raw = _decode(text, source)
    try:
        CatalogFile.model_validate(raw)
    except ValidationError as exc:
        path, message, _ = first_error(exc)
        raise ConfigError(f"{source}: {path}: {message}") from exc
    _check_ids(raw, source)
    check_rules(raw, source)
    catalog = build_catalog(raw, source, *_bundled_tables(), base=base)
    _check_encodings(catalog, source)
    return catalog
