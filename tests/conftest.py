from __future__ import annotations

from typing import Any

import pytest

from ctxbudget.tokens import get_encoding


@pytest.fixture(scope="session")
def o200k() -> Any:
    return get_encoding("o200k_base")


def question(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"role": "", "questions": [], "documents": [], "history": []}
    body.update(fields)
    return body
