"""The tokenizer plug point: what ctxbudget needs from an encoding, and the tiktoken adapter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Encoding", "TiktokenEncoding"]


@runtime_checkable
class Encoding(Protocol):
    """A byte-level tokenizer: text in, token ids out, and each token's length in bytes.

    Byte lengths let the fitter place every token at a byte offset of the text it came from,
    so one encode of a rendered request yields the cost of each part and the cost of any prefix.
    """

    @property
    def name(self) -> str:
        """The encoding's registered name, such as ``o200k_base``."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; text that looks like a special token is ordinary text."""
        ...

    def token_byte_length(self, token: int) -> int:
        """Length in UTF-8 bytes of one token."""
        ...

    def byte_lengths(self) -> Sequence[int]:
        """A table indexed by token id giving each token's byte length."""
        ...


class TiktokenEncoding:
    """An :class:`Encoding` backed by a real ``tiktoken.Encoding``."""

    def __init__(self, encoding: Any, byte_lengths: Sequence[int]) -> None:
        self._encoding = encoding
        self._byte_lengths = byte_lengths

    @property
    def name(self) -> str:
        """The tiktoken encoding name."""
        return str(self._encoding.name)

    @property
    def tiktoken(self) -> Any:
        """The underlying ``tiktoken.Encoding`` (for callers that need its full API)."""
        return self._encoding

    def encode(self, text: str) -> list[int]:
        """Encode with ``encode_ordinary``: special-token text is counted, never raised on."""
        tokens: list[int] = self._encoding.encode_ordinary(text)
        return tokens

    def token_byte_length(self, token: int) -> int:
        """Byte length of ``token`` from the vocabulary table."""
        return self._byte_lengths[token]

    def byte_lengths(self) -> Sequence[int]:
        """The vocabulary's byte-length table."""
        return self._byte_lengths
