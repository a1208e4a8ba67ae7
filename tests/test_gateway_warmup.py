"""The gateway's start-up: what its first request would pay is paid before any request comes."""

from __future__ import annotations

import gc
import importlib
import json
import logging
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest
from starlette.testclient import TestClient

from ctxbudget import load_catalog, register_encoding
from ctxbudget.gateway import GatewayConfig, create_app, warmup
from ctxbudget.gateway.warmup import BUNDLED_DEFAULT, FIRST_CALL_MODULES, warmed_encodings


class _Counted:
    """A plug-in encoding that tells how often it was built and what it was asked to count."""

    builds: ClassVar[int] = 0
    texts: ClassVar[list[str]] = []

    name = "warm-test"
    proven_boundaries = False

    def __init__(self) -> None:
        type(self).builds += 1

    def encode(self, text: str) -> list[int]:
        type(self).texts.append(text)
        return list(text.encode())

    def token_lengths(self, text: str) -> bytes:
        type(self).texts.append(text)
        return bytes([1] * len(text.encode()))


def _catalog(folder: Path, encoding: str) -> str:
    """A user catalog whose models without a tokenizer of their own count with ``encoding``."""
    path = folder / "house.toml"
    path.write_text(
        "schema_version = 1\n"
        f'default_tokenizer = {{ encoding = "{encoding}", exact = false, safety_factor = 1.1 }}\n'
        '[[models]]\nid = "house-llm"\nprovider = "self-hosted"\ncontext_window = 32768\n',
        "utf-8",
    )
    return str(path)


class PanicException(BaseException):
    """What a Rust tokenizer raises when it panics (pyo3's, by its name: not an Exception)."""


def test_start_up_builds_and_uses_the_catalogs_default_encoding(tmp_path: Path) -> None:
    _Counted.builds, _Counted.texts = 0, []
    register_encoding("warm-test", _Counted)
    config = GatewayConfig(
        store_path=str(tmp_path / "g.db"), catalog_paths=(_catalog(tmp_path, "warm-test"),)
    )
    app = create_app(config)
    assert _Counted.builds == 0  # made, not started: nothing built yet
    with TestClient(app):
        assert _Counted.builds == 1  # before any request
        assert _Counted.texts  # and counted once
    with TestClient(create_app(config)):  # built once a process
        assert _Counted.builds == 1


def test_the_bundled_models_encoding_is_warmed_beside_a_user_catalogs_default(tmp_path: Path) -> None:
    """A user catalog joins the bundled one: its default counts its own models, and the bundled
    models still count with theirs."""
    register_encoding("warm-test", _Counted)
    catalog = load_catalog(_catalog(tmp_path, "warm-test"))
    assert warmed_encodings(catalog) == ["warm-test", BUNDLED_DEFAULT]
    assert catalog.tokenizer_for("gpt-4o").encoding == BUNDLED_DEFAULT
    assert warmed_encodings(load_catalog(_catalog(tmp_path, BUNDLED_DEFAULT))) == [BUNDLED_DEFAULT]


def _broken() -> Any:
    raise RuntimeError("the vocabulary file is missing")


class _Panicking(_Counted):
    name = "warm-panics"

    def token_lengths(self, text: str) -> bytes:
        raise PanicException("called `Option::unwrap()` on a `None` value")


@pytest.mark.parametrize(
    ("name", "factory", "logged"),
    [
        ("warm-broken", _broken, "'warm-broken': RuntimeError: the vocabulary file is missing"),
        ("warm-panics", _Panicking, "'warm-panics': PanicException: called `Option::unwrap()`"),
    ],
)
def test_an_encoding_that_fails_to_build_or_panics_is_logged_and_the_gateway_starts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, factory: Any, logged: str
) -> None:
    register_encoding(name, factory)
    config = GatewayConfig(store_path=str(tmp_path / "g.db"), catalog_paths=(_catalog(tmp_path, name),))
    with (
        caplog.at_level(logging.WARNING, "ctxbudget.gateway.warmup"),
        TestClient(create_app(config)) as client,
    ):
        assert client.get("/healthz").status_code == 200
    assert f"could not warm the encoding {logged}" in caplog.text


def test_a_tokenizer_whose_build_hangs_holds_up_the_start_only_so_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()

    def hanging() -> Any:
        release.wait(30)
        raise RuntimeError("gave up")

    register_encoding("warm-hangs", hanging)
    monkeypatch.setattr(warmup, "WARM_UP_SECONDS", 0.2)
    config = GatewayConfig(
        store_path=str(tmp_path / "g.db"), catalog_paths=(_catalog(tmp_path, "warm-hangs"),)
    )
    try:
        with (
            caplog.at_level(logging.WARNING, "ctxbudget.gateway.warmup"),
            TestClient(create_app(config)) as client,
        ):
            assert not release.is_set()  # started while the build still hangs
            assert client.get("/healthz").status_code == 200
        assert "the warm-up (building the tokenizers warm-hangs, o200k_base) took over 0.2 s" in caplog.text
    finally:
        release.set()


def test_a_plug_in_tokenizer_that_panics_on_a_request_is_answered_in_the_providers_shape(
    tmp_path: Path,
) -> None:
    class PanicsOnAWord(_Counted):
        name = "warm-word-panics"

        def token_lengths(self, text: str) -> bytes:
            if "explode" in text:
                raise PanicException("index out of bounds")
            return super().token_lengths(text)

    register_encoding("warm-word-panics", PanicsOnAWord)
    config = GatewayConfig(
        store_path=str(tmp_path / "g.db"), catalog_paths=(_catalog(tmp_path, "warm-word-panics"),)
    )
    body = {"model": "house-llm", "max_tokens": 10, "messages": [{"role": "user", "content": "explode"}]}
    with TestClient(create_app(config)) as client:
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            answer = client.post(
                path, json=body, headers={"x-api-key": "k", "anthropic-version": "2023-06-01"}
            )
            assert answer.status_code == 400, (path, answer.text)
            assert answer.json()["type"] == "error"
            assert "PanicException" in answer.json()["error"]["message"]
        assert client.get("/healthz").status_code == 200  # and it serves on


def test_the_modules_warmed_are_those_an_async_client_loads_at_its_first_call() -> None:
    """In a fresh interpreter, every module :data:`FIRST_CALL_MODULES` names is loaded by an
    ``httpx.AsyncClient``'s first request and not before: a version that loads others fails here,
    so the list is looked at again."""
    script = textwrap.dedent(
        """
        import asyncio, http.server, json, sys, threading
        import httpx

        class Ok(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
            def log_message(self, *args):
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Ok)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        client = httpx.AsyncClient()
        before = set(sys.modules)

        async def first():
            (await client.get(f"http://127.0.0.1:{server.server_port}/")).raise_for_status()
            await client.aclose()

        asyncio.run(first())
        print(json.dumps(sorted(set(sys.modules) - before)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(json.loads(done.stdout))
    assert set(FIRST_CALL_MODULES) <= loaded
    for name in FIRST_CALL_MODULES:
        importlib.import_module(name)


def test_only_a_server_that_owns_its_process_freezes_the_heap(tmp_path: Path) -> None:
    before = gc.get_freeze_count()
    try:
        with TestClient(create_app(GatewayConfig(store_path=str(tmp_path / "a.db")))) as client:
            assert client.get("/healthz").status_code == 200
        assert gc.get_freeze_count() == before  # an app embedded in another's process
        with TestClient(create_app(GatewayConfig(store_path=str(tmp_path / "b.db")), freeze_heap=True)):
            assert gc.get_freeze_count() > before  # `ctxbudget serve`
    finally:
        gc.unfreeze()
