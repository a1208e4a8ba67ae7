"""A deposition-style record generated from our own templates (deterministic, ours to ship).

Used by the bundled simulation scenario and the examples (``examples/deposition.py`` builds the fit
demo from these pieces, ``examples/legal_context.py`` prints the legal context): a legal playbook,
transcript pages with ``page:line`` numbering, exhibits ``EX-01``..``EX-40`` and issue tags.
"""

from __future__ import annotations

import random
from typing import Any

WITNESSES = ["Dana Whitfield", "Marcus Ortega", "Priya Raman", "Leo Brandt"]
TOPICS = [
    ("the warranty on the Model K press", "BreachOfWarranty"),
    ("the March 2021 delivery schedule", "LateDelivery"),
    ("the inspection report for lot 44", "Inspection"),
    ("the change order signed in June", "ChangeOrder"),
    ("the emails with the supplier in Ohio", "Notice"),
    ("the maintenance logs for line 3", "Maintenance"),
]
QUESTIONS = [
    "Did you review {topic} before the meeting on the {day}th?",
    "Who else was present when {topic} was discussed?",
    "Can you identify Exhibit EX-{ex:02d} for the record?",
    "What did you understand {topic} to require of the seller?",
    "Was there any written notice about {topic} before the claim was filed?",
    "Is it your testimony that nobody at the plant raised {topic} with you?",
]
ANSWERS = [
    "Yes. I reviewed it with Mr. Hale, and we flagged two items on page {page} of Exhibit EX-{ex:02d}.",
    "I don't recall the exact date. It was sometime after the U.S. shipment cleared, maybe the {day}th.",
    "That is the inspection summary. My initials are on the second page, next to the lot number.",
    "My understanding was that the seller had to repair or replace within 30 days. That's what Sec. 7.2 says.",
    "No. The first written notice I saw was the letter of March {day}, which is Exhibit EX-{ex:02d}.",
    "Objection, form. You can answer. -- I told Ms. Okafor about it twice, once by phone and once in person.",
]
RULES = [
    "Cite testimony as page:line, for example 47:12-48:3, and exhibits by their EX number.",
    "Treat an admission against interest as key testimony and quote it verbatim.",
    "Under Fed. R. Civ. P. 32(a), a deposition may be used against a party who was present or represented.",
    "Distinguish the witness's personal knowledge from what the witness was told by others.",
    "Flag every answer given after an objection to form, and note whether the objection was cured.",
    "For warranty claims, identify the express terms, the notice given, and any disclaimer under U.C.C. 2-316.",
    "Summaries of background events must keep dates and amounts exactly as stated in the record.",
    "Never characterize testimony as evasive; describe what the witness said and did not say.",
]


def playbook(rng: random.Random) -> str:
    lines = [
        "You are LegalReview Assistant v2.1, reviewing deposition transcripts for a commercial dispute.",
        "",
    ]
    for clause in range(1, 41):
        lines.append(f"Clause {clause}. Standard definition and review rule.")
        for _ in range(12):
            lines.append(
                rng.choice(RULES) + f" This applies to clause {clause} and to every related exhibit."
            )
        lines.append("")
    return "\n".join(lines)


def transcript_pages(rng: random.Random, pages: int) -> list[str]:
    out = []
    for page in range(1, pages + 1):
        witness = WITNESSES[(page // 30) % len(WITNESSES)]
        lines = [f"DEPOSITION OF {witness.upper()} -- PAGE {page}"]
        for line in range(1, 26, 2):
            topic, _ = rng.choice(TOPICS)
            fields = {
                "topic": topic,
                "day": rng.randint(2, 28),
                "ex": rng.randint(1, 40),
                "page": rng.randint(1, 9),
            }
            lines.append(f"{page}:{line:02d} Q. " + rng.choice(QUESTIONS).format(**fields))
            lines.append(f"{page}:{line + 1:02d} A. " + rng.choice(ANSWERS).format(**fields))
        out.append("\n".join(lines))
    return out


def evidence(pages: list[str]) -> list[dict[str, Any]]:
    """Key testimony passages (six Q/A lines each) as protected evidence with page:line citations."""
    items: list[dict[str, Any]] = []
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


def build_legal_context() -> dict[str, Any]:
    """The tiered request of the legal review agent (``legal-review``): ~14,600 estimated pinned
    tokens, 10 protected testimony passages, ~95,000 estimated tokens of transcript background,
    a short conversation and the current question."""
    rng = random.Random(20261129)
    book = playbook(rng)
    book = "\n".join(book.split("\n")[: len(book.split("\n")) * 7 // 10])
    pages = transcript_pages(rng, 105)
    items: list[dict[str, Any]] = [{"id": "playbook", "tier": "pinned", "kind": "playbook", "text": book}]
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
