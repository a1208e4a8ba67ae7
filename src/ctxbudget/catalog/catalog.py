"""The model catalog: loading (the bundled file, user overrides) and the window rules over it.

Window resolution, in order: an explicit ``max_context_tokens`` > 0; then the id by the rules of
:mod:`ctxbudget.catalog.resolve` (exact, alias, scoped, snapshot, match rule, family). An id that
resolves to nothing is an :class:`~ctxbudget.errors.UnknownModelError` naming the closest ids,
unless the caller asks for the seed node's floor (``unknown_model="floor"``: 8,191 tokens, with a
warning). A provider's input cap below the window (``max_input_tokens``) travels with the window.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from ..config_files import read_config_text
from ..errors import ConfigError, UnknownModelError
from ..tokens.counter import TokenCounter
from ..tokens.registry import get_encoding
from .entries import Deferred, ModelEntries, SpecsById
from .matching import compile_clause
from .resolve import ID_BLANKS, Found, Index, Matcher, find, id_problem, plain_lookalike
from .values import (
    FALLBACK_TOKENIZER,
    MAX_WINDOW_TOKENS,
    Family,
    ModelSpec,
    TokenizerSpec,
    WindowResolution,
    family_tokenizer,
)

__all__ = [
    "FLOOR_WINDOW_TOKENS",
    "MAX_SAFETY_FACTOR",
    "Catalog",
    "UnknownModel",
    "bundled_catalog",
    "catalog_of",
    "check_safety_factor",
    "load_catalog",
    "over_the_model",
]

logger = logging.getLogger(__name__)
# A library's log records go where the application sends them, never to stderr on their own
# (logging's last-resort handler): what they say is in the reports' warnings too.
logging.getLogger("ctxbudget").addHandler(logging.NullHandler())

UnknownModel = Literal["error", "floor"]
# The seed node's budget for a model it does not know (context-optimizer-node.md).
FLOOR_WINDOW_TOKENS = 8191
_WARNED_UNKNOWN: set[str] = set()


# A factor scales an estimate of a real tokenizer's count: the bundled ones are 1.0-1.3, and a
# calibrated one stays near them. Far above is a mistake (and a count past any integer's range).
MAX_SAFETY_FACTOR = 100.0


def check_safety_factor(value: object) -> float:
    """A safety factor as given by a caller: a number above 0 and at most
    :data:`MAX_SAFETY_FACTOR`, else a ConfigError."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_SAFETY_FACTOR:
        raise ConfigError(
            f"safety_factor must be a number above 0 and at most {MAX_SAFETY_FACTOR:g}, got {value!r}"
        )
    return float(value)


@dataclass(frozen=True, eq=False)
class Catalog:
    """Models, aliases, scopes and tokenizer families, with the resolution rules over them.

    ``models`` are in priority order: where several providers list one id, the first wins unless
    the client names a scope. ``aliases`` maps an alias to ``(target id, provider or None)``.
    """

    models: ModelEntries
    aliases: Mapping[str, tuple[tuple[str, str | None], ...]] = field(default_factory=dict)
    families: tuple[Family, ...] = ()
    scopes: Mapping[str, str] = field(default_factory=dict)
    matches: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    owners: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    default_tokenizer: TokenizerSpec = FALLBACK_TOKENIZER
    _found: dict[str, Found | None] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.models, ModelEntries):  # specs given built (tests, callers)
            object.__setattr__(self, "models", ModelEntries.of(self.models))

    @cached_property
    def _index(self) -> Index:
        return Index(
            by_id=SpecsById(self.models),
            aliases=Deferred(lambda: {k.lower(): v for k, v in self.aliases.items()}),
            matchers=lambda: self._compiled,  # compiled at the first id that needs a match rule
            scopes={k.lower(): v for k, v in self.scopes.items()},
            owner=self._owner,
        )

    def _owner(self, name: str) -> str | None:
        for provider, predicate in self._owner_rules:
            if predicate(name):
                return provider
        return None

    # A catalog's rules were checked for slow patterns when its file was read (``checked``).
    @cached_property
    def _owner_rules(self) -> Sequence[tuple[str, Callable[[str], bool]]]:
        return [(p, compile_clause(c, f"providers.{p}.model_match", checked=True)) for p, c in self.owners]

    @cached_property
    def _compiled(self) -> Sequence[Matcher]:
        by_key = {key: i for i, key in reversed(list(enumerate(self.models.keys)))}
        return [
            Matcher(
                key[0],
                functools.partial(self.models.__getitem__, by_key[key]),
                compile_clause(clause, f"{key[0]}/{key[1]}.match", checked=True),
            )
            for key, clause in self.matches.items()
            if key in by_key
        ]

    def _lookup(self, model_id: str) -> Found | None:
        key = _model_key(model_id)
        found: Found | None = self._found.get(key, _NOT_LOOKED_UP)
        if found is _NOT_LOOKED_UP:
            if len(self._found) >= _MAX_REMEMBERED:  # ids are client input: bound what is kept
                self._found.clear()
            # kept here, not read back: another thread may clear the memo in between (a KeyError)
            found = self._found[key] = find(self._index, key)
        return found

    def models_named(self, model_id: str) -> Sequence[ModelSpec]:
        """The entries whose id is ``model_id`` (case aside), in the catalog's order; no rule."""
        return self._index.by_id.get(model_id.lower(), ())

    def resolution_rule(self, model_id: str) -> str | None:
        """The rule ``model_id`` resolves by (its farthest step: exact, alias, snapshot, ...), or None."""
        found = self._lookup(model_id)
        return found.rule if found else None

    def find_model(self, model_id: str) -> ModelSpec | None:
        """The entry ``model_id`` resolves to, or None."""
        found = self._lookup(model_id)
        return found.spec if found else None

    def get_model(self, model_id: str) -> ModelSpec:
        """Like :meth:`find_model`, but raises :class:`UnknownModelError` naming the closest ids."""
        spec = self.find_model(model_id)
        if spec is None:
            raise self.unknown(model_id, windowed=False)
        return spec

    def closest(self, model_id: str, n: int = 3) -> list[str]:
        """The catalog ids and aliases that look most like ``model_id`` (read as plain ASCII:
        ``ｇｐｔ-４ｏ`` or ``gpt‑4o`` with a non-breaking hyphen looks like gpt-4o)."""
        import difflib  # only an unknown id needs it

        names = sorted({model_id for _, model_id in self.models.keys} | set(self.aliases))
        looks = plain_lookalike(model_id).strip().lower()  # may be blank: zero-width characters only
        return difflib.get_close_matches(looks[:64], names, n=n, cutoff=0.6)

    def unknown(self, model_id: str, *, windowed: bool = True) -> UnknownModelError:
        """The error for an id no rule resolves: the ids closest to it, and what is wrong with it
        when something is (too long, a space, a character that only looks like ASCII)."""
        return UnknownModelError(
            model_id, self.closest(model_id), windowed=windowed, problem=id_problem(model_id)
        )

    def resolve_window(
        self, model_id: str, max_context_tokens: int = 0, *, unknown_model: UnknownModel = "error"
    ) -> WindowResolution:
        """Choose the window (and input cap) for ``model_id`` by the documented rules."""
        _check_window_options(max_context_tokens, unknown_model)
        found = self._lookup(model_id)
        spec = found.spec if found else None
        cap = spec.max_input_tokens if spec else None
        if max_context_tokens > 0:
            path = ("explicit", *(found.path if found else ()))
            return WindowResolution(
                model_id=model_id,
                context_window=max_context_tokens,
                rule="explicit",
                spec=spec,
                max_input_tokens=cap,
                path=path,
                warning=over_the_model(max_context_tokens, spec),
            )
        if found is not None:
            return WindowResolution(
                model_id=model_id,
                context_window=found.spec.context_window,
                rule=found.rule,
                spec=found.spec,
                max_input_tokens=cap,
                path=found.path,
                warning=_family_warning(model_id, found, self._owner),
            )
        if unknown_model != "floor":
            raise self.unknown(model_id)
        return _floor(model_id)

    def tokenizer_for(self, model_id: str, safety_factor: float | None = None) -> TokenizerSpec:
        """The entry's tokenizer, else a family estimate by the id's name, else the default.

        ``safety_factor`` replaces an estimate's factor (a calibrated one, as the gateway learns
        from the provider's counts); an exact tokenizer has none to replace.
        """
        factor = None if safety_factor is None else check_safety_factor(safety_factor)
        spec = self.find_model(model_id)
        found = spec.tokenizer if spec is not None else None
        tokenizer = found or family_tokenizer(self.families, _model_key(model_id)) or self.default_tokenizer
        if factor is None or tokenizer.exact:
            return tokenizer
        return dataclasses.replace(tokenizer, safety_factor=factor)

    def counter_for(self, model_id: str, safety_factor: float | None = None) -> TokenCounter:
        """The counter of ``model_id``'s tokens (see :meth:`tokenizer_for`)."""
        tokenizer = self.tokenizer_for(model_id, safety_factor)
        return TokenCounter(get_encoding(tokenizer.encoding), tokenizer.exact, tokenizer.safety_factor)

    def merged(self, override: Catalog) -> Catalog:
        """This catalog with ``override``'s entries first; an override id replaces every same id."""
        replaced = {model_id.lower() for _, model_id in override.models.keys}
        kept = [i for i, (_, model_id) in enumerate(self.models.keys) if model_id.lower() not in replaced]
        families = {f.prefix: f for f in (*override.families, *self.families)}
        return Catalog(
            models=ModelEntries.joined([(override.models, range(len(override.models))), (self.models, kept)]),
            aliases={**self.aliases, **override.aliases},
            families=tuple(families.values()),
            scopes={**self.scopes, **override.scopes},
            matches={
                **override.matches,
                **{k: v for k, v in self.matches.items() if k[1].lower() not in replaced},
            },
            owners=override.owners + self.owners,
            default_tokenizer=override.default_tokenizer
            if override.default_tokenizer is not FALLBACK_TOKENIZER
            else self.default_tokenizer,
        )


_MAX_REMEMBERED = 4096
_NOT_LOOKED_UP: Any = object()  # the memo's "not there" (None is a lookup's answer: unknown)


def _model_key(model_id: object) -> str:
    if not isinstance(model_id, str):
        raise ConfigError(f"a model id is a string, got {type(model_id).__name__} {model_id!r:.60}")
    key = model_id.strip(ID_BLANKS).lower()
    if not key:  # not an unknown id: the floor must not budget a model no one named
        raise ConfigError(f"the model id is blank ({model_id!r}): name the model the request is for")
    return key


def _check_window_options(max_context_tokens: object, unknown_model: object) -> None:
    """A window given is a whole number of tokens from 0 (the catalog's) to the largest a catalog
    entry may have (a window of 10^23 tokens was honoured with a warning, where a catalog refuses
    one over a billion); the unknown-model rule one of the two."""
    if (
        isinstance(max_context_tokens, bool)
        or not isinstance(max_context_tokens, int)
        or not 0 <= max_context_tokens <= MAX_WINDOW_TOKENS
    ):
        raise ConfigError(
            f"max_context_tokens must be a whole number of tokens from 0 (0: from the catalog) to "
            f"{MAX_WINDOW_TOKENS:,}, got {max_context_tokens!r:.40}"
        )
    if unknown_model not in ("error", "floor"):
        raise ConfigError(f"unknown_model must be 'error' or 'floor', got {unknown_model!r}")


def _family_warning(model_id: str, found: Found, owner: Callable[[str], str | None]) -> str | None:
    """What to say of a resolution by family, or of a scoped id read as another host's entry."""
    if found.rule != "family":
        return _other_host_warning(model_id, found, owner)
    return (
        f"model {model_id!r} is not in the catalog; budgeting it as {found.spec.id!r}, the longest "
        "catalog id or alias it starts with (its window and prices); add it with catalog=load_catalog(FILE) if "
        "that is wrong"
    )


_SCOPED_TO = re.compile(r"scoped (?:\S+/|bedrock id) -> (?P<provider>\S+)$")


def _other_host_warning(model_id: str, found: Found, owner: Callable[[str], str | None]) -> str | None:
    """A warning when an id scoped to one provider (``openrouter/...``) is budgeted with a third
    host's entry because the named one has none: its window may match, its prices need not. The
    model's maker's own entry (``azure/gpt-4o`` read as OpenAI's gpt-4o) is what hosts follow."""
    scoped = _SCOPED_TO.match(found.path[0]) if found.path else None
    spec = found.spec
    if scoped is None or spec.provider in (scoped["provider"], owner(spec.id.lower())):
        return None
    return (
        f"model {model_id!r}: {scoped['provider']} has no entry for it in the catalog; budgeting it "
        f"with {found.spec.provider}'s entry {found.spec.id!r} (its window and prices); add it with "
        "catalog=load_catalog(FILE) if that is wrong"
    )


def _floor(model_id: str) -> WindowResolution:
    warning = (
        f"unknown model {model_id!r}: budgeting against the {FLOOR_WINDOW_TOKENS:,}-token floor "
        '(unknown_model="floor"); set max_context_tokens= or add the model with catalog=load_catalog(FILE)'
    )
    if model_id not in _WARNED_UNKNOWN:
        _WARNED_UNKNOWN.add(model_id)
        logger.warning(warning)
    return WindowResolution(
        model_id=model_id,
        context_window=FLOOR_WINDOW_TOKENS,
        rule="floor",
        spec=None,
        path=("floor",),
        warning=warning,
    )


def over_the_model(max_context_tokens: int, spec: ModelSpec | None) -> str | None:
    """A warning when an explicit window is larger than the catalog's for the model: honoured
    (the catalog may be behind the provider), but said, since the provider refuses a request over
    its real limit; for a model with an input limit, which still holds the request, that it does.
    A window at most the model's own is no mistake (gpt-5's 400,000 tokens, over its 272,000-token
    input limit, was warned of)."""
    if spec is None or max_context_tokens <= spec.context_window:
        return None
    given = f"the window given, {max_context_tokens:,} tokens (max_context_tokens=), is over {spec.id}'s "
    if spec.max_input_tokens:  # the input limit still holds the request (gpt-5's real 400k window: none)
        return (
            f"{given}{spec.context_window:,}-token window in the catalog; the request is held to its "
            f"{spec.max_input_tokens:,}-token input limit (a user catalog sets other limits)"
        )
    return (
        f"{given}{spec.context_window:,}-token window in the catalog: the provider refuses a request "
        "over its limit, unless it grants a larger one (as Anthropic's 1M-token context beta does)"
    )


def parse_catalog(text: str, source: str, base: Catalog | None = None) -> Catalog:
    """Parse and validate a user catalog (TOML, or JSON by a ``.json`` name); errors name
    ``source`` and the field path. An entry with no tokenizer that replaces an entry of ``base``
    (the catalog it will be merged onto) counts with that entry's tokenizer."""
    from .files import validated

    return validated(text, source, base)


_BUNDLED: Catalog | None = None


def bundled_text() -> str:
    """The bundled catalog file's text (``models.json``, generated by ``make catalog``): read
    beside this module when the package is a folder (``importlib.resources`` imports its zip
    readers first: 2-3 ms of a process's first fit or count), else as a package resource."""
    try:
        return Path(__file__).with_name("models.json").read_text("utf-8")
    except OSError:  # installed in a zip archive
        return (importlib.resources.files("ctxbudget.catalog") / "models.json").read_text("utf-8")


def bundled_document() -> dict[str, Any]:
    """The bundled catalog document, its models read on use: by its index when the package is a
    folder (:func:`~.bundled.read_bundled`), else from the text read whole."""
    from .bundled import read_bundled, read_document

    here = Path(__file__)
    document = read_bundled(here.with_name("models.json"), here.with_name("models.index.json"))
    return document if document is not None else read_document(bundled_text())


def bundled_catalog() -> Catalog:
    """The catalog shipped with ctxbudget, loaded once (validated by the test suite, not here)."""
    global _BUNDLED
    if _BUNDLED is None:
        from ..gcpause import collector_paused
        from .files import build_catalog

        # It lives as long as the process: the collector would only traverse it and whatever the
        # caller holds, find nothing, and go on (a 2,000-message history's first fit: 27.0 -> 26.0 ms).
        with collector_paused():
            _BUNDLED = build_catalog(bundled_document(), "bundled catalog models.json")
    return _BUNDLED


def load_catalog(paths: Iterable[str | Path] = ()) -> Catalog:
    """The bundled catalog with each user catalog file in ``paths`` applied on top, in order
    (one path may be given alone)."""
    from .files import check_merge

    if isinstance(paths, (str, Path)):
        paths = [paths]
    elif not isinstance(paths, Iterable) or isinstance(paths, Mapping | bytes):
        raise ConfigError(f"catalog paths are a path or a list of paths, got {type(paths).__name__}")
    catalog = bundled_catalog()
    for path in paths:
        if not isinstance(path, (str, Path)):
            raise ConfigError(f"a catalog path is a string or a Path, got {type(path).__name__}")
        override = parse_catalog(read_config_text(path, "catalog"), str(path), catalog)
        merged = catalog.merged(override)
        check_merge(merged, override, str(path))
        catalog = merged
    return catalog


def catalog_of(given: object) -> Catalog:
    """The catalog given (checked to be one), or the bundled catalog when none was."""
    if given is None:
        return bundled_catalog()
    if not isinstance(given, Catalog):
        raise ConfigError(
            f"catalog must be a Catalog (ctxbudget.load_catalog(paths)), got {type(given).__name__}"
        )
    return given
