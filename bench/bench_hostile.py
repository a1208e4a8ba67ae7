"""Hostile input shapes, timed at two sizes: the growth from n to 4n (linear: about 4x).

Each shape once took quadratic time or worse through a public entry point (found by a helper
session hunting for denial-of-service inputs; the fixes are in the commit log). Each row times one
call at size n and at 4n in this process (best of three, after a warm-up at a tiny size) and
prints the growth: about 4x is linear, 16x quadratic. A row over 8x is flagged. The sizes keep
every row under a second when linear; the old code took from 10 s to hours at the larger size.

    python bench/bench_hostile.py           # every shape
    python bench/bench_hostile.py volatile  # the shapes whose name holds the word
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

from benchcli import bench_parser

import ctxbudget
from ctxbudget import BudgetExceeded
from ctxbudget.session.ledger import fold_ledger
from ctxbudget.volatile import VolatileRules, find_volatile

POLICY, CLAUDE = "legal-review", "claude-sonnet-4-5"
QUESTION = {"id": "q", "kind": "question", "text": "Was the letter sent?"}
PINNED = {"id": "p", "tier": "pinned", "kind": "playbook", "text": "Be careful."}


def _assemble(items: list[dict[str, Any]]) -> Callable[[], Any]:
    def run() -> Any:
        try:
            return ctxbudget.assemble({"items": items}, policy=POLICY, model=CLAUDE)
        except BudgetExceeded:
            return None  # an over-ceiling tier is refused: the time to refuse is what is measured

    return run


def dots(n: int) -> Callable[[], Any]:
    """A run of sentence-end marks not followed by whitespace, in a message cut to fit."""
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Look: " + "." * n + " Done?"}]}
    return lambda: ctxbudget.fit(body, model="gpt-4o", max_context_tokens=1500, reserve_output_tokens=0)


def _scan(text: str, rules: VolatileRules | None = None) -> Callable[[], Any]:
    """The volatile-value scan of a pinned text (what assembly and the gateway's policy mode run
    on the pinned tier; called directly, as a pinned tier that large is over its ceiling), its
    content cache bypassed."""
    return lambda: find_volatile.__wrapped__(text, rules)


def volatile_ids(n: int) -> Callable[[], Any]:
    """A pinned playbook of id words with no digit ("session-id-session-id-...")."""
    return _scan("session-id-" * (n // 11))


def system_blocks(n: int) -> Callable[[], Any]:
    """An Anthropic system prompt of many tiny text blocks."""
    system = [{"type": "text", "text": "Be careful."} for _ in range(n // 40)]
    body = {"model": CLAUDE, "system": system, "messages": [{"role": "user", "content": "Hi"}]}
    return lambda: ctxbudget.count(body, model=CLAUDE)


def message_parts(n: int) -> Callable[[], Any]:
    """One OpenAI message of many tiny text parts, cut to fit."""
    parts = [{"type": "text", "text": "part of the record"} for _ in range(n // 40)]
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": parts}]}
    return lambda: ctxbudget.fit(body, model="gpt-4o", max_context_tokens=1000, reserve_output_tokens=0)


def blank_lines(n: int) -> Callable[[], Any]:
    """A document of blank lines next to a superseding quote (line labels read per line)."""
    evidence = {"tier": "critical", "kind": "evidence"}
    return _assemble(
        [
            PINNED,
            {**evidence, "id": "e0", "text": "The letter was sent.", "citation": "1:1"},
            {
                **evidence,
                "id": "e1",
                "text": "The letter was not sent.",
                "citation": "1:2",
                "supersedes": "e0",
            },
            {"id": "d", "tier": "contextual", "kind": "document", "text": " \n" * (n // 2) + "x"},
            QUESTION,
        ]
    )


def supersede_chain(n: int) -> Callable[[], Any]:
    """A chain of superseding quotes over a numbered transcript (both grow with n)."""
    lines = n // 60
    doc = "\n".join(
        f"{1 + k // 25}:{1 + k % 25} Q. Did you see it? A. The letter was sent." for k in range(lines)
    )
    chain = [
        {
            "id": f"e{i}",
            "tier": "critical",
            "kind": "evidence",
            "text": "The letter was sent.",
            "citation": "1:1",
        }
        | ({"supersedes": f"e{i - 1}"} if i else {})
        for i in range(lines // 10)
    ]
    return _assemble(
        [PINNED, *chain, {"id": "d", "tier": "contextual", "kind": "document", "text": doc}, QUESTION]
    )


def protected_tier(n: int) -> Callable[[], Any]:
    """A protected tier of many small quotes over its ceiling (refused)."""
    quotes = [
        {
            "id": f"e{i}",
            "tier": "critical",
            "kind": "evidence",
            "citation": "1:1",
            "text": f"The witness said word{i}.",
        }
        for i in range(n // 40)
    ]
    return _assemble([PINNED, *quotes, QUESTION])


def allowed_values(n: int) -> Callable[[], Any]:
    """A playbook repeating a value on the policy's allow list."""
    return _scan(
        "See Matter 2024-0117 for the terms. " * (n // 36), VolatileRules(allow=(r"Matter 2024-\d+",))
    )


def question_words(n: int, suffix: str = "") -> Callable[[], Any]:
    """A question of many distinct words over a long document (question format)."""
    words = [f"term{k}{suffix}" for k in range(n // 250)]
    body = {
        "questions": [{"text": " ".join(words)}],
        "documents": [{"page_content": " ".join(words[k % len(words)] + " filler" for k in range(n // 12))}],
    }
    return lambda: ctxbudget.fit(body, model="gpt-4o", max_context_tokens=4000, split_documents=True)


def long_window(n: int) -> Callable[[], Any]:
    """A long transcript cut to half of itself with passages (windows of thousands of passages)."""
    text = "\n".join(
        f"SPEAKER {k % 7}: we talked about the delivery schedule and item {k}." for k in range(n // 70)
    )
    body = {
        "questions": [{"text": "What about the delivery schedule?"}],
        "documents": [{"page_content": text}],
    }
    budget = max(2000, n // 8)  # about half of the text's tokens
    return lambda: ctxbudget.fit(body, model="gpt-4.1", max_context_tokens=budget, split_documents=True)


def ledger_turns(n: int) -> Callable[[], Any]:
    """A session's ledger of many compacted turns, folded under its ceiling (every turn does it)."""
    counter = ctxbudget.load_catalog().counter_for(CLAUDE)
    entries = [
        {
            "turn": i,
            "issue": f"Issue{i % 5}",
            "cited_exhibits": [f"EX-{i:02d}"],
            "citations": [f"{i % 90 + 1}:1"],
        }
        | {"status": "CONFIRMED", "tools": ["search FOUND"], "conclusions": [f"Therefore EX-{i:02d} holds."]}
        for i in range(1, n // 250 + 2)
    ]
    return lambda: fold_ledger(entries, 5000, counter)


def flags(n: int) -> Callable[[], Any]:
    """A run of flags (regional indicators, which pair from their run's start) in an earlier message
    cut to fit."""
    messages = [
        {"role": "user", "content": "\U0001f1eb\U0001f1f7" * (n // 2)},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "Which flags?"},
    ]
    body = {"model": "gpt-4o", "messages": messages}
    return lambda: ctxbudget.fit(body, model="gpt-4o", max_context_tokens=2000, reserve_output_tokens=0)


def grouped_results(n: int) -> Callable[[], Any]:
    """A rolling tier's turn of many messages and its tool call, then many results with no group
    (each result once looked through the whole turn for its call)."""
    count = n // 8
    items: list[dict[str, Any]] = [PINNED]
    items += [
        {"id": f"h{i}", "tier": "volatile", "kind": "history", "role": "user", "text": f"m {i}", "group": "t"}
        for i in range(count)
    ]
    items.append({"id": "call", "tier": "volatile", "kind": "tool_call", "text": "lookup(x)", "group": "t"})
    items += [
        {"id": f"r{i}", "tier": "volatile", "kind": "tool_result", "text": f"r {i}"} for i in range(count)
    ]
    return _assemble([*items, QUESTION])


def unnumbered_calls(n: int) -> Callable[[], Any]:
    """A streamed OpenAI answer of many tool calls whose pieces carry no ``index`` (each piece's
    call was once looked for among every call before it)."""
    from ctxbudget.gateway.providers import OPENAI, StreamState

    def chunk(i: int) -> bytes:
        call = {"id": f"c{i}", "function": {"name": "lookup", "arguments": "{}"}}
        return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}).encode()

    stream = b"\n\n".join(chunk(i) for i in range(n // 16)) + b"\n\ndata: [DONE]\n\n"

    def run() -> Any:
        state = StreamState(OPENAI)
        state.feed(stream)
        return state.calls.calls()

    return run


SHAPES: dict[str, tuple[Callable[[int], Callable[[], Any]], int]] = {
    "sentence ends: a run of dots": (dots, 100_000),
    "graphemes: a run of flags in a message cut": (flags, 40_000),
    "volatile: id words with no digit": (volatile_ids, 100_000),
    "anthropic: tiny system blocks": (system_blocks, 300_000),
    "openai: tiny text parts": (message_parts, 150_000),
    "assembly: blank lines by a superseding quote": (blank_lines, 60_000),
    "assembly: a chain of superseding quotes": (supersede_chain, 150_000),
    "assembly: protected tier over its ceiling": (protected_tier, 100_000),
    "assembly: a turn's tool results with no group": (grouped_results, 16_000),
    "volatile: allowed values repeated": (allowed_values, 100_000),
    "bm25: a question of many words": (question_words, 300_000),
    "bm25: a question of many words, not ASCII": (lambda n: question_words(n, "é"), 300_000),
    "passages: windows of a long transcript": (long_window, 400_000),
    "sessions: the ledger of many compacted turns": (ledger_turns, 100_000),
    "gateway: streamed tool calls with no index": (unnumbered_calls, 100_000),
}


def best_seconds(action: Callable[[], Any], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        ctxbudget.clear_caches()  # remembered fits and counts would answer the repeats
        started = time.perf_counter()
        with contextlib.suppress(BudgetExceeded):  # refused as too large: the time to decide so counts
            action()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("words", nargs="*", help="run only the shapes whose name holds one of these words")
    wanted = parser.parse_args().words
    print(f"{'shape':48} {'n':>9} {'at n':>9} {'at 4n':>9} {'growth':>7}")
    for name, (shape, size) in SHAPES.items():
        if wanted and not any(word in name for word in wanted):
            continue
        best_seconds(shape(2_000), 1)  # warm-up: imports, compiled patterns, the catalog
        small, large = best_seconds(shape(size)), best_seconds(shape(4 * size))
        growth = large / small
        flag = "  << superlinear" if growth > 8 else ""
        print(f"{name:48} {size:9,} {small * 1000:7.1f}ms {large * 1000:7.1f}ms {growth:6.1f}x{flag}")


if __name__ == "__main__":
    main()
