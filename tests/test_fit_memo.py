"""What a fit reads from its question is remembered for that fit alone (ctxbudget.memo)."""

from __future__ import annotations

import gc
import threading
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from ctxbudget import clear_caches, fit
from ctxbudget.memo import _ACTIVE, fit_memo, per_fit, per_fit_by_identity


def _counting() -> tuple[list[str], Callable[[str], str]]:
    calls: list[str] = []

    @per_fit
    def upper(text: str) -> str:
        calls.append(text)
        return text.upper()

    return calls, upper


def test_a_function_is_read_once_a_fit_and_again_in_the_next() -> None:
    calls, upper = _counting()
    with fit_memo():
        assert upper("question") == upper("question") == "QUESTION"
        with fit_memo():  # a fit inside an assembly shares the assembly's memo
            upper("question")
    assert calls == ["question"]
    with fit_memo():
        upper("question")
    upper("question")
    upper("question")
    assert calls == ["question"] * 4  # a new memo, then none: read each time


def test_by_identity_a_different_text_of_the_same_id_is_read_again() -> None:
    seen: list[int] = []

    @per_fit_by_identity
    def size(text: str) -> int:
        seen.append(len(text))
        return len(text)

    with fit_memo():
        first = "x" * 1000
        assert size(first) == size(first) == 1000
        second = "y" * 2000
        assert size(second) == 2000
    assert seen == [1000, 2000]


def test_nothing_is_held_after_a_fit_or_seen_by_another_thread() -> None:
    """A 2 MB question's terms stayed in module caches after its fit (50 MB each); the memo goes
    with the fit, and another thread never sees an open one."""
    question = " ".join(f"term{i}x" for i in range(150_000))
    request = {"questions": [{"text": question}], "documents": [{"page_content": "term1x text " * 4000}]}
    small = {"questions": [{"text": "term1x?"}], "documents": [{"page_content": "term1x text " * 4000}]}
    fit(small, model="gpt-4o", max_context_tokens=8000, reserve_output_tokens=0, split_documents=True)
    gc.collect()  # the tokenizer and the catalog loaded by a first fit are not what is measured
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fit(request, model="gpt-4o", max_context_tokens=8000, reserve_output_tokens=0, split_documents=True)
        clear_caches()  # remembered fits and counts hold the request itself: not what is measured
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 4 * len(question), f"{held:,} bytes held after the fit"
    assert _ACTIVE.get() is None
    seen: list[object] = []
    with fit_memo():
        worker = threading.Thread(target=lambda: seen.append(_ACTIVE.get()))
        worker.start()
        worker.join()
    assert seen == [None]


def test_remembered_fits_are_bounded_by_the_characters_of_their_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server fitting distinct large requests: the memo kept 32 of them whatever their size
    (their strings, after the callers let them go: 32 requests of 5 MB held 160 MB). It keeps
    MEMO_CHARS characters of requests (16 million; 400,000 here)."""
    from ctxbudget.fitting import _fit

    monkeypatch.setattr(_fit._MEMO._kept, "max_weight", 400_000)
    long = "The letter went out on March 3, notice was given. " * 2_000
    fit({"messages": [{"role": "user", "content": long}]}, model="gpt-4o", max_context_tokens=128_000)
    clear_caches()  # the encoder is built: what follows is what the caches keep
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(30):  # 30 distinct requests of 100 kB: 3 million characters
            text = f"Request {n}. {long}"
            fit({"messages": [{"role": "user", "content": text}]}, model="gpt-4o", max_context_tokens=128_000)
        clear_caches(fits=False)  # the count cache has its own bound (tokens)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        clear_caches()
    assert held < 1_500_000, f"{held:,} bytes held by 30 remembered fits of 100 kB"


def test_a_list_changed_inside_an_open_memo_is_laid_out_again() -> None:
    """A fit's parse and apply share an OpenAI body's layout by the messages list's identity; a
    caller's own open memo outlives a change to the list, which must be read as it now is."""
    from ctxbudget import count

    messages: list[dict[str, Any]] = [{"role": "user", "content": "hello there"}]
    body = {"messages": messages}
    alone = count({"messages": [messages[0], {"role": "assistant", "content": "word " * 40}]}, model="gpt-4o")
    with fit_memo():
        first = count(body, model="gpt-4o")["tokens"]
        messages.append({"role": "assistant", "content": "word " * 40})
        assert count(body, model="gpt-4o")["tokens"] == alone["tokens"] > first
