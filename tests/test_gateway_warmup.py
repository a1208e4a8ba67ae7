"""The gateway's start-up: what its first request would pay is paid before any request comes."""

from __future__ import annotations

import gc
import importlib
import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import pytest
from starlette.testclient import TestClient

from ctxbudget import register_encoding
from ctxbudget.gateway import GatewayConfig, create_app
from ctxbudget.gateway.warmup import FIRST_CALL_MODULES


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


def test_an_encoding_that_cannot_be_built_is_logged_and_the_gateway_starts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> Any:
        raise RuntimeError("the vocabulary file is missing")

    register_encoding("warm-broken", broken)
    config = GatewayConfig(
        store_path=str(tmp_path / "g.db"), catalog_paths=(_catalog(tmp_path, "warm-broken"),)
    )
    with (
        caplog.at_level(logging.WARNING, "ctxbudget.gateway.warmup"),
        TestClient(create_app(config)) as client,
    ):
        assert client.get("/healthz").status_code == 200
    assert (
        "could not warm the encoding 'warm-broken': RuntimeError: the vocabulary file is missing"
        in caplog.text
    )


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
