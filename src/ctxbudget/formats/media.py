"""Token estimates for what is not text: images and documents, by the providers' published rules.

OpenAI (vision guide, GPT-4o-class models): ``detail: low`` costs 85 tokens; ``high`` (and
``auto``, counted as high to err high) scales the image to fit 2048x2048, then its shortest side
to 768, and costs 85 + 170 per 512-pixel tile. Anthropic (vision docs): an image is scaled to at
most 1568 pixels on its long edge and about 1.15 megapixels, then costs width x height / 750
tokens. A PDF document costs text and an image per page; Anthropic quotes 1,500-3,000 tokens a
page, so a page is estimated at 3,000. Image sizes are read from the image header when the image
is inline (base64); an image given by URL or file id has no size here (no network), so the
largest the rule allows is assumed. Every figure from this module is an estimate and is reported
as one.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Estimate",
    "anthropic_block_estimate",
    "anthropic_document_tokens",
    "anthropic_image_tokens",
    "document_notes",
    "image_size",
    "inline_bytes",
    "inline_image_size",
    "openai_image_tokens",
    "pdf_pages",
    "pdf_tokens",
]

OPENAI_LOW = 85
OPENAI_BASE, OPENAI_TILE = 85, 170
OPENAI_MAX_TILES = 8  # 2048 x 768 after scaling: 4 x 2 tiles
ANTHROPIC_MAX_EDGE, ANTHROPIC_MAX_PIXELS = 1568, 1_150_000
ANTHROPIC_MAX_IMAGE = math.ceil(ANTHROPIC_MAX_PIXELS / 750)
PDF_PAGE_TOKENS = 3_000
# A data URL's head: a media type (or none) and parameters (``;charset=utf-8``, ``;name=a.png``)
# before ``;base64,``, in any case (RFC 2397).
_DATA_URL = re.compile(r"data:[^,]*;base64,", re.IGNORECASE)
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
_PDF_COUNT = re.compile(rb"/Count\s+(\d+)")


@dataclass(frozen=True)
class Estimate:
    """Tokens for one non-text part and how they were reckoned."""

    tokens: int
    how: str


def inline_bytes(data: object) -> bytes | None:
    """The bytes of a base64 payload or ``data:`` URL, or None (a URL, a file id, bad base64)."""
    if not isinstance(data, str):
        return None
    return _decoded(data[_payload_start(data) :])


def inline_image_size(data: object) -> tuple[int, int] | None:
    """The width and height of the image a base64 payload or ``data:`` URL holds, or None.

    Read from the payload's head when the header is there (a PNG's, GIF's or WebP's first bytes;
    a JPEG's frame header after its EXIF and colour profile), else from all of it: decoding a
    20 MB payload whole to read its first bytes took 80 ms of every fit and every gateway turn that
    carries it. A payload whose head holds the header but whose tail is not valid base64 is read
    by its head (it was sized as unknown: the provider refuses it either way)."""
    if not isinstance(data, str):
        return None
    start = _payload_start(data)
    if len(data) - start > IMAGE_HEAD_CHARS:
        head = _decoded(data[start : start + IMAGE_HEAD_CHARS])
        size = image_size(head) if head else None
        if size is not None:
            return size
    whole = _decoded(data[start:])
    return image_size(whole) if whole else None


# Base64 characters of a payload's head read for an image's header: 192 kB of bytes, a multiple
# of four characters (a quantum is never cut, unless the payload holds line breaks: it is then
# read whole).
IMAGE_HEAD_CHARS = 1 << 18


def _payload_start(data: str) -> int:
    """Where a ``data:`` URL's base64 begins (0 for a bare payload)."""
    found = _DATA_URL.match(data) if data[:5].lower() == "data:" else None
    return found.end() if found else 0


def _decoded(payload: str) -> bytes | None:
    try:
        return base64.b64decode(payload, validate=False)
    except (binascii.Error, ValueError):
        return None


def _png(data: bytes) -> tuple[int, int] | None:
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    return None


def _gif(data: bytes) -> tuple[int, int] | None:
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    return None


def _webp(data: bytes) -> tuple[int, int] | None:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP" or len(data) < 30:
        return None
    kind = data[12:16]
    if kind == b"VP8X":
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if kind == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if kind == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


def _jpeg(data: bytes) -> tuple[int, int] | None:
    if data[:2] != b"\xff\xd8":
        return None
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    return None


def image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG, JPEG, GIF or WebP header, or None."""
    for reader in (_png, _jpeg, _gif, _webp):
        size = reader(data)
        if size is not None and size[0] > 0 and size[1] > 0:
            return size
    return None


def openai_image_tokens(detail: object, size: tuple[int, int] | None) -> Estimate:
    """OpenAI's tile rule for GPT-4o-class models."""
    if detail == "low":
        return Estimate(OPENAI_LOW, "image, detail low: 85 tokens")
    label = "high" if detail == "high" else f"{detail or 'auto'} (counted as high)"
    if size is None:
        tokens = OPENAI_BASE + OPENAI_TILE * OPENAI_MAX_TILES
        return Estimate(tokens, f"image, detail {label}, size unknown: the most tiles the rule allows")
    fit = min(1.0, 2048 / max(size))
    shortest = min(1.0, 768 / (min(size) * fit))
    width, height = (side * fit * shortest for side in size)
    tiles = math.ceil(width / 512) * math.ceil(height / 512)
    return Estimate(
        OPENAI_BASE + OPENAI_TILE * tiles, f"image, detail {label}, {size[0]}x{size[1]}: {tiles} tiles"
    )


def anthropic_image_tokens(size: tuple[int, int] | None) -> Estimate:
    """Anthropic's area rule: width x height / 750 after the provider's resizing."""
    if size is None:
        return Estimate(ANTHROPIC_MAX_IMAGE, "image, size unknown: the largest the rule allows")
    width, height = size
    scale = min(1.0, ANTHROPIC_MAX_EDGE / max(width, height))
    scale = min(scale, math.sqrt(ANTHROPIC_MAX_PIXELS / (width * height)))
    tokens = math.ceil(width * scale * (height * scale) / 750)
    return Estimate(max(tokens, 1), f"image, {size[0]}x{size[1]}: width x height / 750")


def pdf_pages(data: bytes) -> int | None:
    """Pages of a PDF, or None when it is not a PDF: the page objects counted, or the page tree's
    largest ``/Count`` when that is more (page objects may sit in compressed object streams)."""
    if not data.startswith(b"%PDF"):
        return None
    counts = [int(n) for n in _PDF_COUNT.findall(data) if len(n) <= 6]
    return max([len(_PDF_PAGE.findall(data)), *counts, 1])


def pdf_tokens(data: bytes | None, where: str) -> Estimate:
    """A PDF at 3,000 tokens a page; one page, with a note, when it cannot be read here."""
    pages = pdf_pages(data) if data is not None else None
    if pages is None and data is not None:  # sent inline, but its pages cannot be read
        return Estimate(
            PDF_PAGE_TOKENS,
            "inline document whose pages cannot be read here (not a PDF, or damaged): counted as one page "
            "of 3,000 tokens",
        )
    if pages is None:
        return Estimate(
            PDF_PAGE_TOKENS,
            f"{where}, pages unknown: counted as one page of 3,000 tokens (send it inline for a per-page estimate)",
        )
    return Estimate(pages * PDF_PAGE_TOKENS, f"PDF, {pages} page(s) at 3,000 tokens a page")


def anthropic_document_tokens(source: object) -> Estimate | None:
    """A PDF document block's estimate; None for a text document (its text is counted instead)."""
    if not isinstance(source, dict) or source.get("type") in ("text", "content"):
        return None
    data = inline_bytes(source.get("data")) if source.get("type") == "base64" else None
    return pdf_tokens(data, "document by URL or file")


def anthropic_block_estimate(block: Mapping[str, Any]) -> Estimate | None:
    """An Anthropic image block by the area rule, a PDF document block by its pages; None for any
    other block (a text document is counted as text)."""
    source = block.get("source")
    if block.get("type") == "image":
        return anthropic_image_tokens(
            inline_image_size(source.get("data")) if isinstance(source, dict) else None
        )
    if block.get("type") == "document":
        return anthropic_document_tokens(source)
    return None


def document_notes(block: Mapping[str, Any]) -> list[str]:
    """An Anthropic document block's ``title`` and ``context``: the provider passes both to the
    model (only not as citable content), so they are counted as text, never trimmed."""
    if block.get("type") != "document":
        return []
    return [block[key] for key in ("title", "context") if isinstance(block.get(key), str)]
