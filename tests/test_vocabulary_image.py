"""The vocabulary image: written once, read back the same, and never trusted when damaged."""

from __future__ import annotations

import hashlib
import marshal
from pathlib import Path

import pytest

from ctxbudget.tokens.bundled import (
    IMAGE_SHA256,
    VOCABULARY_SHA256,
    _parse_tokens,
    _read_vocabulary,
    load_bundled_encoding,
)
from ctxbudget.tokens.image import MAGIC, image_payload, read_image, write_image

NAME = "cl100k_base"
PINNED = VOCABULARY_SHA256[NAME]
DIGEST = IMAGE_SHA256[NAME]
TEXT = "Notice was given on 3 March — late, said the witness. 日本語 🙂"


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CTXBUDGET_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_a_built_encoding_leaves_an_image_that_builds_the_same_encoding(cache: Path) -> None:
    first = load_bundled_encoding(NAME)
    images = list(cache.glob(f"{NAME}-*.ranks"))
    assert len(images) == 1
    assert read_image(NAME, PINNED, DIGEST) == _parse_tokens(NAME, _read_vocabulary(NAME))
    second = load_bundled_encoding(NAME)  # from the image
    assert second.encode(TEXT) == first.encode(TEXT) and second.decode(second.encode(TEXT)) == TEXT


def _first_format(data: bytes) -> bytes:
    """The same vocabulary as the first image format wrote it: a marshalled token -> rank dict."""
    header = MAGIC + PINNED.encode() + b"\n"
    tokens = marshal.loads(data[len(header) :])
    payload = marshal.dumps({token: rank for rank, token in enumerate(tokens)})
    return b"ctxbudget-vocab-1\n" + PINNED.encode() + b"\n" + hashlib.sha256(payload).digest() + payload


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign", "empty", "first format"])
def test_a_damaged_image_is_ignored_and_written_again(cache: Path, damage: str) -> None:
    load_bundled_encoding(NAME)
    (image,) = cache.glob(f"{NAME}-*.ranks")
    data = image.read_bytes()
    damaged = {
        "flip": data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:],
        "truncate": data[: len(data) // 2],
        "foreign": data.replace(PINNED.encode(), VOCABULARY_SHA256["o200k_base"].encode()),
        "empty": b"",
        "first format": _first_format(data),
    }[damage]
    image.write_bytes(damaged)
    assert read_image(NAME, PINNED, DIGEST) is None
    rebuilt = load_bundled_encoding(NAME)
    assert rebuilt.decode(rebuilt.encode(TEXT)) == TEXT
    assert image.read_bytes() == data  # written again from the bundled data


def test_the_cache_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXBUDGET_CACHE_DIR", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    write_image(NAME, PINNED, (b"a",))
    assert read_image(NAME, PINNED, DIGEST) is None and not any(tmp_path.rglob("*.ranks"))


def test_an_unwritable_cache_is_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("CTXBUDGET_CACHE_DIR", str(blocker / "cache"))
    encoding = load_bundled_encoding(NAME)
    assert encoding.decode(encoding.encode(TEXT)) == TEXT


@pytest.mark.parametrize("name", sorted(VOCABULARY_SHA256))
def test_the_pinned_payload_digests_are_the_bundled_vocabularies(name: str) -> None:
    payload = image_payload(_parse_tokens(name, _read_vocabulary(name)))
    assert hashlib.sha256(payload).hexdigest() == IMAGE_SHA256[name]
    assert payload == marshal.dumps(marshal.loads(payload), 2)  # the same bytes again: no references


def _forged(tokens: tuple[bytes, ...], kind: str) -> object:
    """A wrong payload of each kind (the file around it is well formed)."""
    return {
        "ints": tuple(range(10)),
        "empty": (),
        "strs": tuple(t.decode("latin-1") for t in tokens),
        "list": list(tokens),
        "short": tokens[:1000],
        "duplicate": (*tokens[:-1], tokens[0]),
        "long token": (*tokens[:-1], b"x" * 300),
        "swapped": (*tokens[:1000], tokens[1001], tokens[1000], *tokens[1002:]),
        "replaced": (*tokens[:1000], b"not a token", *tokens[1001:]),
        "nested": (*tokens[:-1], (b"a",)),
    }[kind]


@pytest.mark.parametrize(
    "kind",
    ["ints", "empty", "strs", "list", "short", "duplicate", "long token", "swapped", "replaced", "nested"],
)
def test_an_image_with_a_self_consistent_sha256_but_wrong_tokens_is_rebuilt(cache: Path, kind: str) -> None:
    expected = load_bundled_encoding(NAME).encode(TEXT)
    (image,) = cache.glob(f"{NAME}-*.ranks")
    data = image.read_bytes()
    header = MAGIC + PINNED.encode() + b"\n"
    tokens = _parse_tokens(NAME, _read_vocabulary(NAME))
    payload = marshal.dumps(_forged(tokens, kind))
    # The payload alone after the header, and with its own sha256 recorded before it.
    for forged in (header + payload, header + hashlib.sha256(payload).digest() + payload):
        image.write_bytes(forged)
        rebuilt = load_bundled_encoding(NAME)
        assert rebuilt.encode(TEXT) == expected
        assert image.read_bytes() == data  # written again from the bundled data


def test_an_image_that_cannot_be_put_in_place_leaves_no_temporary_file(cache: Path) -> None:
    (cache / f"{NAME}-{PINNED[:16]}.ranks").mkdir()  # a folder where the image goes
    for _ in range(3):
        encoding = load_bundled_encoding(NAME)
        assert encoding.decode(encoding.encode(TEXT)) == TEXT
    assert [p.name for p in cache.iterdir()] == [f"{NAME}-{PINNED[:16]}.ranks"]
