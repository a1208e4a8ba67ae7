"""A small, lazy, cached registry of encodings, and the model-id -> encoding mapping.

Built-in encodings register through the same :func:`register_encoding` a plug-in would use.
Mapping a model name to an encoding name loads no vocabulary; :func:`get_encoding` builds an
encoding on first use and keeps it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..errors import ConfigError, UnknownEncodingError
from .bundled import load_bundled_encoding
from .encoding import Encoding

__all__ = [
    "bare_model_id",
    "encoding_name_for_model",
    "get_encoding",
    "list_encodings",
    "register_encoding",
    "registry_version",
    "when_replaced",
]

_FACTORIES: dict[str, Callable[[], Encoding]] = {}
_LOADED: dict[str, Encoding] = {}
_LOCK = threading.Lock()
_VERSION = [0]
_ON_REPLACED: list[Callable[[], None]] = []


def registry_version() -> int:
    """Bumped whenever an encoding is (re)registered, so caches of results can tell."""
    return _VERSION[0]


def when_replaced(forget: Callable[[], None]) -> None:
    """Call ``forget`` whenever a registered name is registered again: a cache keyed by an
    encoding's name (counts, sentence profiles) holds the replaced encoding's answers."""
    _ON_REPLACED.append(forget)


def register_encoding(name: str, factory: Callable[[], Encoding]) -> None:
    """Register ``factory`` to build encoding ``name`` on first use (replaces an earlier one,
    and every cached count made with it)."""
    if not isinstance(name, str) or not name or not callable(factory):
        raise ConfigError("register_encoding takes a name (a non-empty string) and a factory (a callable)")
    with _LOCK:
        replaced = name in _FACTORIES
        _FACTORIES[name] = factory
        _LOADED.pop(name, None)
        _VERSION[0] += 1
    if replaced:
        for forget in _ON_REPLACED:
            forget()


def list_encodings() -> list[str]:
    """Names of every registered encoding, sorted."""
    return sorted(_FACTORIES)


def get_encoding(name: str) -> Encoding:
    """The encoding ``name``, built once and cached; raises :class:`UnknownEncodingError`."""
    loaded = _LOADED.get(name) if isinstance(name, str) else None
    if loaded is not None:
        return loaded
    if not isinstance(name, str):
        raise ConfigError(f"an encoding name is a string, got {type(name).__name__}")
    with _LOCK:
        if name not in _LOADED:
            factory = _FACTORIES.get(name)
            if factory is None:
                raise UnknownEncodingError(name, sorted(_FACTORIES))
            built = factory()
            if not isinstance(getattr(built, "name", None), str) or not callable(
                getattr(built, "encode", None)
            ):
                raise ConfigError(
                    f"the factory registered for encoding {name!r} returned {type(built).__name__}, not an encoding"
                )
            if built.name != name:  # counts are cached by the encoding's own name
                raise ConfigError(
                    f"encoding registered as {name!r} calls itself {built.name!r}; the names must match"
                )
            _LOADED[name] = built
        return _LOADED[name]


# Exact names first, then prefixes (longest first), as OpenAI names its models.
_EXACT_MODEL_ENCODINGS = {
    "gpt-4": "cl100k_base",
    "gpt-4-turbo": "cl100k_base",
    "gpt-latest": "o200k_base",
    "gpt-mini-latest": "o200k_base",
    # the embedding models (an embedding input is a text: count_text counts it as billed)
    "text-embedding-ada-002": "cl100k_base",
    "text-embedding-3-small": "cl100k_base",
    "text-embedding-3-large": "cl100k_base",
    # the completion models still served
    "davinci-002": "cl100k_base",
    "babbage-002": "cl100k_base",
}
_PREFIX_MODEL_ENCODINGS = (
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-4o", "o200k_base"),
    ("gpt-4-", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-5", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
)


def bare_model_id(model_id: str) -> str:
    """``openai/gpt-5`` -> ``gpt-5``: the name after the last ``/``."""
    return model_id.rsplit("/", 1)[-1]


def encoding_name_for_model(model_id: str) -> str | None:
    """The OpenAI encoding that counts ``model_id`` exactly, or None for non-OpenAI models.

    A provider-scoped id (``openai/gpt-5``, ``azure/gpt-4o``) maps like its bare name.
    """
    name = bare_model_id(model_id.strip()).lower()
    if name in _EXACT_MODEL_ENCODINGS:
        return _EXACT_MODEL_ENCODINGS[name]
    for prefix, encoding in _PREFIX_MODEL_ENCODINGS:
        if name.startswith(prefix):
            return encoding
    return None


def _bundled_factory(name: str) -> Callable[[], Encoding]:
    return lambda: load_bundled_encoding(name)


for _name in ("o200k_base", "cl100k_base"):
    register_encoding(_name, _bundled_factory(_name))
