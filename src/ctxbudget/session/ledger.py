"""Deterministic compaction of old turns into a JSON state ledger (no model call).

Each completed turn reduces to one entry such as::

    {"turn": 2, "issue": "BreachOfWarranty", "issues": ["BreachOfWarranty"],
     "cited_exhibits": ["EX-04", "EX-12"], "citations": ["47:12-48:3"], "status": "CONFIRMED",
     "tools": [{"name": "search_transcript", "status": "CONFIRMED"}],
     "conclusions": ["The record shows written notice on March 3 (EX-04)."]}

Exhibit ids and ``page:line`` citations are found by configurable patterns; tool statuses come
from the tool results; issue tags from the turn; conclusions are sentences of the answer kept
verbatim by rule (a conclusion marker), never paraphrased. Raw tool logs and conversational
filler are pruned. Entries validate against :data:`LEDGER_SCHEMA`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import InvalidRequestError
from ..trim.sentences import iter_sentence_ends
from ..validation import first_error
from .turns import Turn

__all__ = ["LEDGER_SCHEMA", "LedgerRules", "reduce_turn", "render_ledger", "validate_entry"]


@dataclass(frozen=True, kw_only=True)
class LedgerRules:
    """What the reducer extracts; every pattern is configurable."""

    exhibit_pattern: str = r"\bEX-\d+\b"
    citation_pattern: str = r"\b\d{1,4}:\d{1,2}(?:-\d{1,4}(?::\d{1,2})?)?\b"
    status_pattern: str = r"(?i)\bstatus\b\W{0,3}\s*([A-Z][A-Z_]{2,})"
    conclusion_markers: tuple[str, ...] = (
        "conclusion",
        "therefore",
        "thus",
        "establishes",
        "confirms",
        "shows",
        "status:",
        "finding",
    )
    max_conclusions: int = 3


class _Tool(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    status: str | None


class LedgerEntry(BaseModel):
    """The wire shape of one ledger entry (its JSON schema is :data:`LEDGER_SCHEMA`)."""

    model_config = ConfigDict(extra="forbid")
    turn: int = Field(ge=1)
    issue: str | None
    issues: list[str]
    cited_exhibits: list[str]
    citations: list[str]
    status: str | None
    tools: list[_Tool]
    conclusions: list[str]


LEDGER_SCHEMA: dict[str, Any] = LedgerEntry.model_json_schema()


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _exhibit_key(exhibit: str) -> tuple[str, int]:
    digits = re.findall(r"\d+", exhibit)
    return (re.sub(r"\d+", "", exhibit), int(digits[-1]) if digits else 0)


def _tool_status(result_content: str, given: str | None, rules: LedgerRules) -> str | None:
    if given:
        return given.upper()
    try:
        parsed = json.loads(result_content)
        if isinstance(parsed, dict) and isinstance(parsed.get("status"), str):
            return str(parsed["status"]).upper()
    except ValueError:
        pass
    match = re.search(rules.status_pattern, result_content)
    return match.group(1).upper() if match else None


def _conclusions(answer: str, rules: LedgerRules) -> list[str]:
    out: list[str] = []
    start = 0
    for end in [*iter_sentence_ends(answer), len(answer)]:
        sentence = answer[start:end].strip()
        start = end
        if sentence and any(marker in sentence.lower() for marker in rules.conclusion_markers):
            out.append(sentence)
    return _unique(out)[: rules.max_conclusions]


def reduce_turn(turn: Turn, rules: LedgerRules = LedgerRules()) -> dict[str, Any]:
    """The ledger entry of one completed turn (deterministic: same turn, same entry)."""
    texts = [turn.question, turn.answer, *(r.content for r in turn.tool_results)]
    exhibits = sorted(
        _unique(m for t in texts for m in re.findall(rules.exhibit_pattern, t)), key=_exhibit_key
    )
    citations = _unique(
        m
        for t in (turn.answer, *(r.content for r in turn.tool_results))
        for m in re.findall(rules.citation_pattern, t)
    )
    tools = [{"name": r.name, "status": _tool_status(r.content, r.status, rules)} for r in turn.tool_results]
    statuses = [t["status"] for t in tools if t["status"]]
    answer_status = re.search(rules.status_pattern, turn.answer)
    status = answer_status.group(1).upper() if answer_status else (statuses[-1] if statuses else None)
    entry = {
        "turn": turn.index,
        "issue": turn.tags[0] if turn.tags else None,
        "issues": list(turn.tags),
        "cited_exhibits": exhibits,
        "citations": citations,
        "status": status,
        "tools": tools,
        "conclusions": _conclusions(turn.answer, rules),
    }
    return validate_entry(entry)


def validate_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Validate one entry against the schema; the error names the field."""
    try:
        return LedgerEntry.model_validate(entry).model_dump()
    except ValidationError as exc:
        path, message, _ = first_error(exc)
        raise InvalidRequestError(f"ledger entry: {message}", path) from exc


def render_ledger(entries: Iterable[Mapping[str, Any]]) -> str:
    """The ledger as the model reads it: one compact JSON object per line, oldest first.

    Appending an entry only adds a line, so the bytes before it never change."""
    lines = [json.dumps(dict(e), ensure_ascii=False, separators=(",", ":"), sort_keys=False) for e in entries]
    return "Session state ledger (one JSON object per compacted turn):\n" + "\n".join(lines)
