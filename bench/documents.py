"""A generated document for the benchmarks: deterministic prose of a given number of tokens."""

from __future__ import annotations

import random

from ctxbudget import get_encoding

# The vocabulary of the generated document (split into words where it is used).
VOCABULARY = (
    "the lease deposit tenant landlord notice of defect was given on March April exhibit witness "
    "counsel deposition page line agreement clause payment roof repair inspection report dated "
    "signed delivered received stated that it would be 12 30 2019 2020 under section 4.2 and "
    "however therefore the parties agreed court order damages claim warranty breach"
)


def document(tokens: int, seed: int = 7) -> str:
    """Deterministic prose of about ``tokens`` o200k tokens (sentences, paragraphs, numbers)."""
    rng = random.Random(seed)
    words = VOCABULARY.split(" ")
    encoding = get_encoding("o200k_base").tiktoken  # type: ignore[attr-defined]
    paragraphs: list[str] = []
    count = 0
    while count < tokens:
        sentences = [
            " ".join(rng.choice(words) for _ in range(rng.randint(6, 24))).capitalize() + "."
            for _ in range(rng.randint(3, 8))
        ]
        paragraph = " ".join(sentences)
        paragraphs.append(paragraph)
        count += len(encoding.encode_ordinary(paragraph)) + 1
    return "\n\n".join(paragraphs)
