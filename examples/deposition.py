"""Print the bundled fit example: a deposition-style review request of about 114,000 tokens.

python examples/deposition.py > build/example.json
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from ctxbudget.simulation.deposition import TOPICS, playbook, transcript_pages


def build_fit_example() -> dict[str, Any]:
    """The ~114,000-token ``question`` request that ``make demo`` fits into 32,000 tokens."""
    rng = random.Random(20261129)
    pages = transcript_pages(rng, 128)
    documents = [
        {
            "page_content": text,
            "score": round(0.95 - 0.0015 * i - rng.random() * 0.01, 4),
            "metadata": {"source": "deposition", "page": i + 1},
        }
        for i, text in enumerate(pages)
    ]
    for n, (topic, tag) in enumerate(TOPICS):
        memo = " ".join(
            f"Memo {n + 1}: the record on {topic} shows a disputed timeline ({tag})." for _ in range(40)
        )
        documents.append(
            {"page_content": memo, "score": 0.91 - n * 0.01, "metadata": {"source": "memo", "tag": tag}}
        )
    history = []
    for turn in range(1, 13):
        topic, tag = TOPICS[turn % len(TOPICS)]
        history.append({"role": "user", "content": f"Turn {turn}: what does the record say about {topic}?"})
        history.append(
            {
                "role": "assistant",
                "content": " ".join(
                    f"On {topic}, the witness testified at {rng.randint(1, 300)}:{rng.randint(1, 25):02d} that "
                    f"Exhibit EX-{rng.randint(1, 40):02d} was received. Status: CONFIRMED ({tag})."
                    for _ in range(12)
                ),
            }
        )
    return {
        "role": playbook(rng),
        "questions": [
            {
                "text": "Which testimony supports the claim that written notice of the warranty defect "
                "was given before the claim was filed? Cite page:line and exhibits.",
                "embedding_model": "text-embedding-3-small",
                "embedding": [],
            }
        ],
        "documents": documents,
        "history": history,
        "instructions": [{"subtitle": "Citations", "instructions": "Cite page:line and exhibit numbers."}],
        "goals": ["Prepare the notice section of the summary judgment brief."],
        "expectJson": False,
    }


if __name__ == "__main__":
    json.dump(build_fit_example(), sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")
