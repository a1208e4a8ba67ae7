"""Images and documents are counted by the providers' published rules and reported as estimates."""

from __future__ import annotations

import base64
import re
import struct
import zlib

import pytest

from ctxbudget import count, fit
from ctxbudget.errors import InvalidRequestError
from ctxbudget.formats.media import (
    IMAGE_HEAD_CHARS,
    anthropic_image_tokens,
    image_size,
    inline_bytes,
    inline_image_size,
    openai_image_tokens,
    pdf_pages,
)


def _png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk))


def _jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def _gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00"


@pytest.mark.parametrize("make", [_png, _jpeg, _gif])
def test_image_sizes_come_from_the_header(make: object) -> None:
    assert image_size(make(1234, 567)) == (1234, 567)  # type: ignore[operator]
    assert image_size(b"not an image") is None


def _jpeg_late_frame(width: int, height: int, before: int) -> bytes:
    """A JPEG whose frame header follows ``before`` bytes of APP1 segments (EXIF, a profile)."""
    segments = b"".join(
        b"\xff\xe1" + struct.pack(">H", 65_000) + b"\x00" * 64_998 for _ in range(before // 65_002 + 1)
    )
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + segments + sof + b"\xff\xd9"


@pytest.mark.parametrize(
    "image",
    [
        _png(1234, 567) + b"\x07" * 600_000,
        _gif(20, 30) + b"\x00" * 300_000,
        _jpeg(640, 480) + b"\x00" * 300_000,
        _jpeg_late_frame(800, 600, before=400_000),  # the header past the head: read whole
        _jpeg_late_frame(800, 600, before=10) + b"\x00" * 300_000,
        b"not an image" * 40_000,
    ],
)
@pytest.mark.parametrize("form", ["data url", "bare", "line breaks"])
def test_an_inline_image_is_sized_as_its_whole_bytes_are(image: bytes, form: str) -> None:
    """The size read from a payload's head is the size its decoded bytes give (a 20 MB payload
    was decoded whole, 80 ms, to read a header in its first bytes)."""
    encoded = base64.b64encode(image).decode()
    if form == "line breaks":  # MIME base64: a quantum may straddle the head's end
        encoded = "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
    payload = "data:image/png;base64," + encoded if form == "data url" else encoded
    assert len(payload) > IMAGE_HEAD_CHARS
    whole = inline_bytes(payload)
    assert whole == image
    assert inline_image_size(payload) == image_size(whole)


def test_an_image_is_sized_from_its_head_without_decoding_the_rest() -> None:
    """The head holds the header: the size is read there, even when the tail would not decode
    (one character too many: the whole payload has no bytes)."""
    payload = base64.b64encode(_png(1234, 567) + b"\x07" * 600_000).decode() + "A"
    assert inline_bytes(payload) is None
    assert inline_image_size(payload) == (1234, 567)


@pytest.mark.parametrize(
    "head",
    [
        "data:image/png;base64,",
        "DATA:image/png;BASE64,",
        "data:image/png;charset=utf-8;base64,",
        "data:;base64,",
    ],
)
def test_data_urls_with_parameters_or_in_capitals_are_read(head: str) -> None:
    """RFC 2397 allows parameters before ;base64 and either case: such an image was priced at
    the largest size the rule allows."""
    assert inline_image_size(head + base64.b64encode(_png(10, 20)).decode()) == (10, 20)


def test_an_image_payload_that_is_not_base64_has_no_size() -> None:
    assert inline_image_size("data:image/png;base64,%%%=") is None
    assert inline_image_size("https://example.com/a.png") is None
    assert inline_image_size(None) is None
    short = base64.b64encode(_png(10, 20)).decode()
    assert inline_image_size(short) == (10, 20) and inline_image_size(short[:-3]) is None  # cut short


@pytest.mark.parametrize(
    ("detail", "size", "tokens"),
    [
        ("low", (4000, 4000), 85),
        ("high", (1024, 1024), 765),  # OpenAI's worked example: 768 x 768, 4 tiles
        ("high", (2048, 4096), 1105),  # OpenAI's worked example: 768 x 1536, 6 tiles
        ("auto", (300, 200), 255),  # small images are not scaled up: one tile
        ("high", None, 85 + 170 * 8),  # size unknown: the most tiles the rule allows
    ],
)
def test_openai_tile_rule(detail: str, size: tuple[int, int] | None, tokens: int) -> None:
    assert openai_image_tokens(detail, size).tokens == tokens


def test_anthropic_area_rule() -> None:
    assert anthropic_image_tokens((1000, 1000)).tokens == 1334
    assert anthropic_image_tokens((200, 200)).tokens == 54
    large = anthropic_image_tokens((4000, 3000)).tokens  # resized to about 1.15 megapixels
    assert 1500 <= large <= 1534
    assert anthropic_image_tokens(None).tokens == 1534


def _pdf(pages: int, padding: int = 0) -> bytes:
    body = b"%PDF-1.7\n" + b"1 0 obj << /Type /Pages /Count %d >> endobj\n" % pages
    body += b"".join(b"%d 0 obj << /Type /Page /Parent 1 0 R >> endobj\n" % (n + 2) for n in range(pages))
    return body + b"%" + b"x" * padding + b"\n%EOF"


def test_pdf_pages_and_document_blocks() -> None:
    assert pdf_pages(_pdf(3)) == 3
    assert pdf_pages(b"plain text") is None
    pdf = base64.b64encode(_pdf(2, padding=500_000)).decode()  # a 0.5 MB PDF of two pages
    body = {
        "model": "claude-sonnet-4-5",
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": pdf},
                    },
                    {"type": "text", "text": "Summarize it."},
                ],
            }
        ],
    }
    counted = count(body, model="claude-sonnet-4-5")
    assert 6_000 <= counted["tokens"] <= 6_000 * 1.3 + 100  # two pages at 3,000, times the estimate factor
    assert counted["exact"] is False
    assert any("$.messages[0]" in p and "2 page(s)" in p for p in counted["estimated_parts"])


def test_openai_images_make_the_totals_estimates_and_name_their_path() -> None:
    image = "data:image/png;base64," + base64.b64encode(_png(1024, 1024)).decode()
    body = {
        "model": "gpt-4o",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": image, "detail": "high"}},
                ],
            }
        ],
    }
    low = {
        **body,
        "messages": [
            {
                **body["messages"][0],
                "content": [
                    body["messages"][0]["content"][0],
                    {"type": "image_url", "image_url": {"url": image, "detail": "low"}},
                ],
            }
        ],
    }
    counted = count(body, model="gpt-4o")
    assert counted["tokens"] - count(low, model="gpt-4o")["tokens"] == 765 - 85
    assert counted["exact"] is False and counted["estimated_parts"] == [
        "$.messages[0]: content[1]: image, detail high, 1024x1024: 4 tiles: 765 tokens"
    ]
    report = fit(body, model="gpt-4o").report
    assert report.exact is False and report.estimated_parts
    assert (
        count({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, model="gpt-4o")["exact"]
        is True
    )


def test_openai_file_parts_and_compressed_page_trees() -> None:
    pdf = b"%PDF-1.7\n1 0 obj << /Type /Pages /Count 40 /Kids [2 0 R] >> endobj\n2 0 obj << /Type /ObjStm >>\n%%EOF"
    assert pdf_pages(pdf) == 40
    data = "data:application/pdf;base64," + base64.b64encode(pdf).decode()
    body = {
        "model": "gpt-4o",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "file", "file": {"file_data": data, "filename": "a.pdf"}},
                    {"type": "text", "text": "Summarize."},
                ],
            }
        ],
    }
    counted = count(body, model="gpt-4o")
    assert counted["tokens"] >= 40 * 3000 and counted["exact"] is False


def test_an_inline_document_that_is_not_a_pdf_is_not_told_to_be_sent_inline() -> None:
    """Its estimate said "document by URL or file ... (send it inline for a per-page estimate)" of
    a document sent inline, whose bytes were no PDF."""
    garbage = base64.b64encode(b"this is not a pdf at all").decode()
    block = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": garbage},
    }
    body = {
        "model": "claude-sonnet-4-5",
        "messages": [{"role": "user", "content": [block, {"type": "text", "text": "Hi"}]}],
    }
    parts = count(body, model="claude-sonnet-4-5")["estimated_parts"]
    assert any("inline document whose pages cannot be read here" in p for p in parts), parts
    assert not any("send it inline" in p for p in parts)


@pytest.mark.parametrize(
    "source",
    [
        {"type": "text", "media_type": "text/plain", "data": "The letter went out on March 3."},
        {"type": "content", "content": [{"type": "text", "text": "The letter went out on March 3."}]},
        {"type": "base64", "media_type": "application/pdf", "data": base64.b64encode(_pdf(1)).decode()},
        {"type": "url", "url": "https://example.com/letter.pdf"},
    ],
)
def test_a_documents_title_and_context_are_counted(source: dict[str, object]) -> None:
    """Anthropic passes a document's `title` and `context` to the model (its citations guide:
    `context` is the place for a document's metadata, as text or stringified JSON); they were not
    counted at all, so 500 words of metadata cost nothing and a fit could overflow the window."""
    metadata = "custodian: records office; " * 100

    def tokens(**fields: str) -> int:
        document = {"type": "document", "source": source, **fields}
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": [document, {"type": "text", "text": "When?"}]}],
        }
        return int(count(body, model="claude-sonnet-4-5")["tokens"])

    bare = tokens()
    assert tokens(title="Letter of notice") > bare
    assert tokens(context=metadata) >= bare + 500


def test_a_pdf_documents_title_and_context_are_counted_in_an_openai_message_too() -> None:
    """An Anthropic PDF document passed through in an OpenAI message (as LangChain passes a
    Claude message's blocks) is counted by Anthropic's page rule; its context was left out."""
    pdf = base64.b64encode(_pdf(1)).decode()
    document = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": pdf},
    }

    def tokens(block: dict[str, object]) -> int:
        body = {"messages": [{"role": "user", "content": [block, {"type": "text", "text": "When?"}]}]}
        return int(count(body, model="gpt-4o", input_format="openai")["tokens"])

    assert tokens({**document, "context": "custodian: records office; " * 100}) >= tokens(document) + 500


@pytest.mark.parametrize("field", ["title", "context"])
def test_a_document_whose_title_or_context_is_not_a_string_is_refused_naming_it(field: str) -> None:
    """Anthropic refuses a document whose `title` or `context` is not a string; it was accepted
    (and left out of the count)."""
    source = {"type": "text", "media_type": "text/plain", "data": "The letter went out on March 3."}
    document = {"type": "document", "source": source, field: 5}
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": [document]}],
    }
    with pytest.raises(InvalidRequestError, match=re.escape(f"$.messages[0].content[0].{field}: ")):
        count(body, model="claude-sonnet-4-5")
    count(
        {**body, "messages": [{"role": "user", "content": [{**document, field: None}]}]},
        model="claude-sonnet-4-5",
    )


def test_a_block_without_its_source_is_named_with_its_article() -> None:
    for kind, named in (("document", "a document block"), ("image", "an image block")):
        body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [{"type": kind}]}]}
        with pytest.raises(InvalidRequestError, match=f"{named} needs a `source` object"):
            count(body, model="claude-sonnet-4-5")
