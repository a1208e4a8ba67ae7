"""A model's encoding, as tiktoken users reach for it: :func:`encoding_for_model` and
:func:`count_text`.

The model id is resolved by the catalog (dated ids, provider prefixes and aliases, as
:func:`ctxbudget.count` takes them) and counted by the encoding the catalog names for it. A model
with a public tokenizer (OpenAI's) is counted exactly. A model without one (Claude, Gemini) is
counted by a proxy encoding scaled by the catalog's safety factor and rounded up: an estimate,
which :attr:`ModelEncoding.exact` says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..errors import ConfigError, InvalidRequestError
from ..formats.jsonvalue import check_json_value
from ..tokens.counter import TokenCounter
from ..tokens.encoding import Encoding
from .catalog import Catalog, catalog_of

__all__ = ["ModelEncoding", "count_text", "encoding_for_model"]


@runtime_checkable
class _Decoder(Protocol):
    def decode(self, tokens: Sequence[int]) -> str: ...


@dataclass(frozen=True, kw_only=True)
class ModelEncoding:
    """The encoding that counts ``model``: an :class:`~ctxbudget.Encoding` (``encode``,
    ``token_lengths``), with ``decode`` and :meth:`count`, and whether its count is exact.

    ``exact`` is False for a model with no public tokenizer: ``encoding`` is then a proxy,
    :meth:`count` is ``ceil(len(encode(text)) * safety_factor)``, and the token ids are the
    proxy's, not the model's.
    """

    model: str
    catalog_id: str
    encoding: Encoding
    exact: bool
    safety_factor: float = 1.0

    @property
    def name(self) -> str:
        """The (exact or proxy) encoding's name, such as ``o200k_base``."""
        return self.encoding.name

    @property
    def proven_boundaries(self) -> bool:
        """As the underlying encoding's (see :class:`~ctxbudget.Encoding`)."""
        return self.encoding.proven_boundaries

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token text (``<|endoftext|>``) is ordinary text. A text
        that is not a string, or that holds a lone surrogate (not UTF-8: no provider can be sent
        it), is refused as :meth:`count` refuses it (tiktoken would encode U+FFFD instead)."""
        return self.encoding.encode(_checked_text(text))

    def token_lengths(self, text: str) -> bytes:
        """The byte length of each token of ``text``, one byte a token (checked as :meth:`encode`)."""
        return self.encoding.token_lengths(_checked_text(text))

    def decode(self, tokens: Sequence[int]) -> str:
        """The text of ``tokens`` (raises :class:`ConfigError` when the encoding cannot decode)."""
        if not isinstance(self.encoding, _Decoder):
            raise ConfigError(f"encoding {self.name!r} has no decode; register one that has")
        try:
            return self.encoding.decode(tokens)
        except (KeyError, OverflowError, TypeError, ValueError) as exc:
            raise InvalidRequestError(
                f"not token ids of {self.name} (each an int in its vocabulary): {type(exc).__name__}: {exc}",
                "tokens",
            ) from exc

    def count(self, text: str) -> int:
        """Tokens of ``text`` for the model: exact, or the estimate when ``exact`` is False."""
        return TokenCounter(self.encoding, self.exact, self.safety_factor).count(_checked_text(text))


def _checked_text(text: object) -> str:
    """``text`` if it is a string a provider can be sent (an :class:`InvalidRequestError` if not)."""
    if not isinstance(text, str):
        raise InvalidRequestError(f"text must be a string, got {type(text).__name__}")
    check_json_value(text, "text")  # a lone surrogate: a clear error, not UnicodeEncodeError
    return text


def encoding_for_model(model: str, *, catalog: Catalog | None = None) -> ModelEncoding:
    """The encoding that counts ``model`` (an id as clients send it: ``gpt-4o-2024-08-06``,
    ``openai/gpt-5``, ``claude-sonnet-4-5``).

    Raises :class:`UnknownModelError`, naming the closest ids, for an id the catalog cannot
    resolve. ``catalog``: models and tokenizers (default: the bundled catalog).
    """
    checked = catalog_of(catalog)
    if not isinstance(model, str):
        raise ConfigError(f"model must be a string, got {type(model).__name__}")
    spec = checked.find_model(model)
    if spec is None:
        raise checked.unknown(model, windowed=False)
    counter = checked.counter_for(model)
    return ModelEncoding(
        model=model,
        catalog_id=spec.id,
        encoding=counter.encoding,
        exact=counter.exact,
        safety_factor=counter.safety_factor,
    )


def count_text(text: str, *, model: str, catalog: Catalog | None = None) -> int:
    """Tokens of ``text`` for ``model``: exact for a model with a public tokenizer, else the
    catalog's estimate (``encoding_for_model(model).exact`` tells which).

    Only the text is counted, not the framing a chat message adds (roles, separators): count a
    whole request with :func:`ctxbudget.count`.
    """
    return encoding_for_model(model, catalog=catalog).count(text)
