"""The tokenizer plug point: what ctxbudget needs from an encoding, and the tiktoken adapter."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, runtime_checkable

__all__ = ["Encoding", "TiktokenEncoding", "split_point"]

PARALLEL_MIN_CHARS = 50_000
# In o200k_base and cl100k_base no pre-token contains a newline followed by a character that is
# neither whitespace nor "/": every alternative of both split patterns either excludes newlines,
# is whitespace only, or ends with a run of newlines (and, in o200k, "/"). BPE merges never cross
# pre-tokens, so such a position is a token boundary and the halves can be encoded apart.
_HARD_BOUNDARY = re.compile(r"\n(?=[^\s/])")
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ctxbudget-encode")
        return _POOL


def split_point(text: str) -> int | None:
    """An offset near the middle of ``text`` just after a newline that starts a hard boundary."""
    middle = len(text) // 2
    match = _HARD_BOUNDARY.search(text, middle)
    if match is None:
        return None
    cut = match.start() + 1
    return cut if cut < len(text) else None


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
        """Encode with ``encode_ordinary``: special-token text is counted, never raised on.

        A long text is cut at a hard boundary (see :func:`split_point`) and its two halves are
        encoded on two threads (tiktoken releases the GIL); the result is identical.
        """
        cut = split_point(text) if len(text) >= PARALLEL_MIN_CHARS else None
        if cut is None:
            tokens: list[int] = self._encoding.encode_ordinary(text)
            return tokens
        head, tail = _pool().map(self._encoding.encode_ordinary, (text[:cut], text[cut:]))
        head.extend(tail)
        result: list[int] = head
        return result

    def token_byte_length(self, token: int) -> int:
        """Byte length of ``token`` from the vocabulary table."""
        return self._byte_lengths[token]

    def byte_lengths(self) -> Sequence[int]:
        """The vocabulary's byte-length table."""
        return self._byte_lengths
