"""Fit benchmarks, each printed as a ratio to a floor measured in the same run.

Floor: one tiktoken encode of the example's full rendered text (every token must be seen once).
Timed: a cold fit of the example (count cache cleared), a warm fit of the same request, a fit of
a 2,000-message chat history, 200 small RAG requests, a question over one 100,000-token document
cut into passages (against one encode of the document, in the same rounds), and LangChain's
``trim_messages`` on the same history at the same budget (bench-only dependency).

    python bench/bench_fit.py build/example.json
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchcli import bench_parser
from documents import document
from histories import MODEL, chat_history

from ctxbudget import clear_caches, fit, get_encoding, render_question

WINDOW = 32_000
REPEATS = 15


def median_seconds(
    action: Callable[[], Any], *, before: Callable[[], None] | None = None, repeats: int = REPEATS
) -> float:
    samples = []
    for _ in range(repeats):
        if before:
            before()
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def rag_requests(n: int) -> list[dict[str, Any]]:
    return [
        {
            "questions": [{"text": f"Question {i}: when was notice of defect {i} given?"}],
            "documents": [
                {"page_content": f"Retrieved passage {j} for request {i}. " * 30, "score": 0.9 - j / 100}
                for j in range(10)
            ],
        }
        for i in range(n)
    ]


def one_document(tk: Any) -> tuple[float, float]:
    """A question over one 100,000-token document, fit cold to 8,000 tokens (the document cut into
    passages), and one tiktoken encode of the document: medians of alternating samples."""
    text = document(100_000)
    body = {
        "questions": [{"text": "What notice of the roof defect did the tenant give the landlord, and when?"}],
        "documents": [{"page_content": text}],
    }
    fits, encodes = [], []
    for _ in range(REPEATS):
        encodes.append(median_seconds(lambda: tk.encode_ordinary(text), repeats=1))
        fits.append(
            median_seconds(
                lambda: fit(body, model=MODEL, max_context_tokens=8_000, split_documents=True),
                before=clear_caches,
                repeats=1,
            )
        )
    return statistics.median(fits), statistics.median(encodes)


def langchain_trim(body: dict[str, Any], budget: int) -> Callable[[], Any] | None:
    try:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, trim_messages
    except ImportError:
        return None
    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    messages = [kinds[m["role"]](content=m["content"]) for m in body["messages"]]
    # A plain tiktoken counter, as a LangChain user writes it: no content cache (ctxbudget's own
    # encoding would answer every repeat run from its cache, timing LangChain warm).
    plain = get_encoding("o200k_base").tiktoken  # type: ignore[attr-defined]

    def counter(msgs: list[Any]) -> int:
        return sum(3 + len(plain.encode_ordinary(str(m.content))) for m in msgs) + 3

    return lambda: trim_messages(
        messages,
        max_tokens=budget,
        token_counter=counter,
        strategy="last",
        include_system=True,
        start_on="human",
    )


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument(
        "request", nargs="?", default="build/example.json", help="the example (make build/example.json)"
    )
    path = Path(parser.parse_args().request)
    example = json.loads(path.read_text("utf-8"))
    encoding = get_encoding("o200k_base")
    text = render_question(example)
    tk = encoding.tiktoken  # type: ignore[attr-defined]
    floor = median_seconds(lambda: tk.encode_ordinary(text))
    tokens = len(tk.encode_ordinary(text))

    def fit_example() -> Any:
        return fit(example, model=MODEL, max_context_tokens=WINDOW)

    def fit_counting_all() -> Any:
        return fit(example, model=MODEL, max_context_tokens=WINDOW, count_all=True)

    # The floor, the two-thread encode and the cold fits alternate, so all see the same machine load.
    floor_samples, threaded_samples, cold_samples, all_samples = [], [], [], []
    for _ in range(REPEATS):
        floor_samples.append(median_seconds(lambda: tk.encode_ordinary(text), repeats=1))
        threaded_samples.append(median_seconds(lambda: encoding.token_lengths(text), repeats=1))
        cold_samples.append(median_seconds(fit_example, before=clear_caches, repeats=1))
        all_samples.append(median_seconds(fit_counting_all, before=clear_caches, repeats=1))
    floor = statistics.median(floor_samples)
    threaded = statistics.median(threaded_samples)
    cold = statistics.median(cold_samples)
    cold_all = statistics.median(all_samples)
    fit_example()
    warm = median_seconds(fit_example)
    counts_only = median_seconds(fit_example, before=lambda: clear_caches(counts=False))
    history = chat_history(2000)
    history_budget = 8_000
    hist = median_seconds(
        lambda: fit(history, model=MODEL, max_context_tokens=history_budget, reserve_output_tokens=0),
        before=clear_caches,
    )
    rags = rag_requests(200)
    rag = median_seconds(
        lambda: [fit(r, model=MODEL, max_context_tokens=2_000, reserve_output_tokens=0) for r in rags],
        before=clear_caches,
    )
    # What any exact fit of these requests must at least do: encode every document once.
    rag_encode = median_seconds(
        lambda: [tk.encode_ordinary(d["page_content"]) for r in rags for d in r["documents"]]
    )
    lone, lone_floor = one_document(tk)
    rows = [
        ("floor: one tiktoken encode of the example", floor, f"{tokens:,} tokens"),
        ("  two-thread encode with token lengths", threaded, "a cold fit's first step; see below"),
        ("cold fit of the example (target <= 1.0x)", cold, "counts what decisions need"),
        ("  cold fit, count_all=True", cold_all, "every text counted"),
        ("warm fit of the example (target <= 0.05x)", warm, "same request again: fit memo"),
        ("  warm, fit memo cleared, counts cached", counts_only, "every step but tokenizing"),
        ("2,000-message history fit (cold)", hist, f"budget {history_budget:,}"),
        ("200 RAG request fits (cold)", rag, f"10 docs each; {rag / rag_encode:.2f}x the row below"),
        ("  one tiktoken encode of each of their documents", rag_encode, "2,000 documents, 542,000 tokens"),
        ("a question over one document, fit to 8,000", lone, f"{lone / lone_floor:.2f}x the row below"),
        ("  one tiktoken encode of the document", lone_floor, "100,000 tokens, cut into passages"),
    ]
    lc = langchain_trim(history, history_budget)
    if lc is not None:
        rows.append(
            ("LangChain trim_messages, same history/budget", median_seconds(lc), "bench-only dependency")
        )
    else:
        rows.append(
            ("LangChain trim_messages", float("nan"), "langchain-core not installed: pip install '.[bench]'")
        )
    print(f"{'benchmark':48} {'median ms':>10} {'x floor':>8}  note")
    for name, seconds, note in rows:
        print(f"{name:48} {seconds * 1000:10.2f} {seconds / floor:8.3f}  {note}")
    print(
        f"ctxbudget history fit vs LangChain trim_messages, in this process (ctxbudget cold, LangChain "
        f"after its first call): {hist / rows[-1][1]:.2f}x; bench_history.py compares fresh processes"
        if lc
        else ""
    )
    if threaded > 0.95 * floor:
        print(
            "note: the two-thread encode is no faster than one thread in this run (single-core boost "
            "or a busy second core): the machine state in which counting everything cannot be under 1x"
        )


if __name__ == "__main__":
    main()
