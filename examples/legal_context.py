"""Build the bundled tiered context request for the legal review agent (policy ``legal-review``).

A ~11,000-token playbook (pinned; about 14,500 Claude tokens by the labelled estimate), key
testimony passages as protected evidence with page:line citations, the deposition transcript
(about 95,000 Claude tokens) as background for the compact tier, a short conversation, and the
current question. Deterministic: built from ``examples/deposition.py``'s generator.

    python examples/legal_context.py > build/legal_context.json
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from deposition import TOPICS, playbook, transcript_pages


def evidence(pages: list[str]) -> list[dict[str, object]]:
    items = []
    for n, page_number in enumerate(range(5, 105, 10)):
        lines = pages[page_number - 1].split("\n")[1:7]
        first, last = lines[0].split(" ", 1)[0], lines[-1].split(" ", 1)[0]
        items.append(
            {
                "id": f"EV-{n + 1:02d}",
                "tier": "critical",
                "kind": "evidence",
                "text": "\n".join(lines),
                "citation": f"{first}-{last}",
                "tags": [TOPICS[n % len(TOPICS)][1]],
            }
        )
    return items


def build() -> dict[str, object]:
    rng = random.Random(20261129)
    book = playbook(rng)
    book = "\n".join(book.split("\n")[: len(book.split("\n")) * 7 // 10])
    pages = transcript_pages(rng, 105)
    items: list[dict[str, object]] = [{"id": "playbook", "tier": "pinned", "kind": "playbook", "text": book}]
    items += evidence(pages)
    items += [
        {
            "id": f"page-{i + 1}",
            "tier": "contextual",
            "kind": "document",
            "text": text,
            "citation": f"page {i + 1}",
        }
        for i, text in enumerate(pages)
    ]
    for turn in range(1, 5):
        topic, tag = TOPICS[turn % len(TOPICS)]
        items.append(
            {
                "id": f"turn-{turn}-q",
                "tier": "volatile",
                "kind": "history",
                "role": "user",
                "text": f"What does the record say about {topic}?",
            }
        )
        items.append(
            {
                "id": f"turn-{turn}-a",
                "tier": "volatile",
                "kind": "history",
                "role": "assistant",
                "text": f"On {topic}, the witness confirmed receipt of Exhibit EX-{turn * 3:02d} ({tag}).",
            }
        )
    items.append(
        {
            "id": "question",
            "kind": "question",
            "text": "Which testimony shows written notice of the warranty defect before the claim? Cite page:line.",
        }
    )
    return {"items": items}


if __name__ == "__main__":
    json.dump(build(), sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")
