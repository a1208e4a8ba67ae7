from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxbudget.tokens import get_encoding

from .fake_upstream import FakeUpstream, gateway_over_fake


@pytest.fixture(scope="session")
def o200k() -> Any:
    return get_encoding("o200k_base")


def question(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"role": "", "questions": [], "documents": [], "history": []}
    body.update(fields)
    return body


@pytest.fixture()
def stack(tmp_path: Path) -> Iterator[tuple[FakeUpstream, str, Path]]:
    """A fake upstream, a gateway in front of it (1 s upstream timeout), and the gateway's store."""
    store = tmp_path / "gw.db"
    with gateway_over_fake(store, timeout_seconds=1.0) as (fake, url):
        yield fake, url, store
