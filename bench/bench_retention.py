"""Evidence retention on real question-answering data (make bench-retention).

For each probe of ../shared/data/retention: a `question` request with the probe's question and its
document, fitted with split_documents at 4k, 8k and 16k tokens (gpt-4o, exact counts, no reply
reserve). A probe is retained when every gold span is still verbatim in the rendered prompt.
Three baselines are measured in the same run on the same probes and budgets: head-only and
tail-only truncation of the document, and "chunks" (:func:`chunks_baseline`: plain BM25 over
256-token line-aligned chunks, packed best-first after 10% of the budget for the document's head).
Skips with a message when the data folder is absent.

    python bench/bench_retention.py [--limit N] [--data DIR] [--semantic] [--gold]

--semantic adds a column for the optional semantic scorer (ctxbudget.semantic, the 'semantic'
extra), measured in the same run; passage embeddings are remembered across a document's probes
and budgets, so its time per fit is the amortised cost.

--gold adds a diagnostic column: the same fit with a passage scorer that knows the answer (1 for
passages that overlap a gold span, 0 elsewhere, added to BM25 as any scorer is). It shows how much
of what is lost is ranking rather than selection: what a perfect semantic scorer would keep.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchcli import bench_parser

from ctxbudget import ConfigError, fit, get_encoding, render_question
from ctxbudget.trim.bm25 import bm25_scores
from ctxbudget.trim.passages import PassageScorer

BUDGETS = (4000, 8000, 16000)
MODEL = "gpt-4o"


def load(folder: Path) -> tuple[dict[str, str], list[dict[str, Any]]]:
    docs = {}
    with (folder / "docs.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            docs[doc["doc_id"]] = doc["text"]
    with (folder / "probes.jsonl").open(encoding="utf-8") as handle:
        probes = [json.loads(line) for line in handle]
    return docs, probes


def overhead(question: str) -> int:
    """Tokens of the prompt around the document (markup, question)."""
    enc = get_encoding("o200k_base")
    empty = render_question({"questions": [{"text": question}], "documents": [{"page_content": "x"}]})
    return len(enc.encode(empty))


def head_tail(text: str, budget: int) -> tuple[str, str]:
    enc = get_encoding("o200k_base").tiktoken  # type: ignore[attr-defined]
    tokens = enc.encode_ordinary(text)
    return enc.decode(tokens[:budget]), enc.decode(tokens[-budget:] if budget else [])


CHUNK_TOKENS = 256
HEAD_SHARE = 0.10


def chunks_baseline(text: str, question: str, budget: int) -> str:
    """The plain baseline: the document cut into line-aligned chunks of about 256 tokens, the
    first 10% of the budget kept as the document's head, then chunks by BM25 against the question,
    best first while they fit, laid out in document order."""
    enc = get_encoding("o200k_base").tiktoken  # type: ignore[attr-defined]
    chunks, current, size = [], [], 0
    for line in text.splitlines(keepends=True):
        cost = len(enc.encode_ordinary(line))
        if current and size + cost > CHUNK_TOKENS:
            chunks.append("".join(current))
            current, size = [], 0
        current.append(line)
        size += cost
    if current:
        chunks.append("".join(current))
    costs = [len(enc.encode_ordinary(c)) for c in chunks]
    kept, used = set(), 0
    for i, cost in enumerate(costs):  # the head: whole chunks within 10% of the budget
        if used + cost > HEAD_SHARE * budget:
            break
        kept.add(i)
        used += cost
    scores = bm25_scores(question, chunks)
    for i in sorted(range(len(chunks)), key=lambda i: (-scores[i], i)):
        if i not in kept and used + costs[i] <= budget:
            kept.add(i)
            used += costs[i]
    return "".join(chunks[i] for i in sorted(kept))


def retained(spans: list[list[int]], text: str, output: str) -> bool:
    return all(text[a:b] in output for a, b in spans)


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument(
        "--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "retention")
    )
    parser.add_argument("--limit", type=int, default=0, help="probes per dataset (0: all)")
    parser.add_argument("--semantic", action="store_true", help="also measure the semantic scorer")
    parser.add_argument(
        "--gold", action="store_true", help="also measure a scorer that knows the gold passages"
    )
    args = parser.parse_args()
    folder = Path(args.data)
    if not (folder / "probes.jsonl").exists():
        print(f"skipped: no retention data at {folder} (it is not part of the repository)")
        return
    docs, probes = load(folder)
    scorers: dict[str, PassageScorer | None] = {"ctxbudget": None}
    if args.semantic and (scorer := semantic_scorer()) is not None:
        scorers["semantic"] = scorer
    counts: dict[tuple[str, int, str], int] = defaultdict(int)
    totals: dict[str, int] = defaultdict(int)
    seconds: dict[tuple[str, str], float] = defaultdict(float)
    floor: dict[str, float] = defaultdict(float)
    tk = get_encoding("o200k_base").tiktoken  # type: ignore[attr-defined]
    per_dataset: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for probe in probes:
        per_dataset[probe["dataset"]].append(probe)
    for dataset, items in sorted(per_dataset.items()):
        chosen = items[: args.limit] if args.limit else items
        for n, probe in enumerate(chosen, 1):
            text = docs[probe["doc_id"]]
            totals[dataset] += 1
            request = {"questions": [{"text": probe["question"]}], "documents": [{"page_content": text}]}
            around = overhead(probe["question"])
            started = time.perf_counter()
            tk.encode_ordinary(text)
            floor[dataset] += 3 * (time.perf_counter() - started)  # one tokenization pass, per budget
            gold = {"gold": GoldScorer(text, probe["spans"])} if args.gold else {}
            for budget in BUDGETS:
                for column, scorer in {**scorers, **gold}.items():
                    started = time.perf_counter()
                    result = fit(
                        request,
                        model=MODEL,
                        max_context_tokens=budget,
                        reserve_output_tokens=0,
                        split_documents=True,
                        passage_scorer=scorer,
                    )
                    seconds[(dataset, column)] += time.perf_counter() - started
                    counts[(dataset, budget, column)] += retained(
                        probe["spans"], text, render_question(result.request)
                    )
                head, tail = head_tail(text, max(0, budget - around))
                counts[(dataset, budget, "head")] += retained(probe["spans"], text, head)
                counts[(dataset, budget, "tail")] += retained(probe["spans"], text, tail)
                chunked = chunks_baseline(text, probe["question"], max(0, budget - around))
                counts[(dataset, budget, "chunks")] += retained(probe["spans"], text, chunked)
            if n % 100 == 0:
                print(f"  {dataset}: {n}/{len(chosen)} probes", file=sys.stderr)
    columns = [*scorers, *(["gold"] if args.gold else [])]
    names = {
        "ctxbudget": "ctxbudget",
        "semantic": "+semantic",
        "gold": "+gold",
        "head": "head-only",
        "tail": "tail-only",
        "chunks": "chunks",
    }
    print(
        f"{'dataset':14} {'budget':>7} "
        + " ".join(f"{names[c]:>10}" for c in [*columns, "head", "tail", "chunks"])
        + "  probes"
    )
    for dataset in sorted(totals):
        for budget in BUDGETS:
            row = [
                counts[(dataset, budget, k)] / totals[dataset] for k in [*columns, "head", "tail", "chunks"]
            ]
            print(
                f"{dataset:14} {budget:>7,} "
                + " ".join(f"{r:>10.1%}" for r in row)
                + f" {totals[dataset]:>7}"
            )
        for column in scorers:
            spent = seconds[(dataset, column)]
            print(
                f"{dataset:14} {names[column]} fit time per document and budget: "
                f"{spent / (3 * totals[dataset]) * 1000:.1f} ms = "
                f"{spent / floor[dataset]:.1f}x one tokenization pass of the document"
            )


class GoldScorer:
    """A passage scorer that knows the answer: 1.0 for a passage overlapping a gold span, else 0.0.

    Passages are verbatim slices in document order, so each is found after the one before it.
    """

    def __init__(self, text: str, spans: list[list[int]]) -> None:
        self.text, self.spans = text, spans

    def __call__(self, query: str, passages: Sequence[str]) -> list[float]:
        scores, position = [], 0
        for passage in passages:
            start = self.text.index(passage, position)
            end = position = start + len(passage)
            scores.append(1.0 if any(a < end and start < b for a, b in self.spans) else 0.0)
        return scores


def semantic_scorer() -> PassageScorer | None:
    """The shipped semantic scorer, or None (with a message) when its extra is not installed."""
    from ctxbudget.semantic import EmbeddingScorer

    try:
        return EmbeddingScorer().load()
    except ConfigError as exc:
        print(f"semantic column skipped: {exc}")
        return None


if __name__ == "__main__":
    main()
