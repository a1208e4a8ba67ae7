"""Simulation scenarios: the bundled 10-turn deposition review, and scenario files.

A scenario is ``{"name", "policy", "model", "base": {"items": [...]}, "turns": [...]}``; each turn
has a ``question``, ``tags``, ``tool_calls`` and ``tool_results`` (each with ``name`` and
``arguments`` / ``content``), and optionally the ``answer``; turns without one are answered by
the deterministic stand-in model.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..formats.wire import validate_body
from ..session.turns import ToolCall, ToolResult
from .deposition import TOPICS, build_legal_context, transcript_pages

__all__ = ["Scenario", "ScriptedTurn", "bundled_scenario", "parse_scenario"]


@dataclass(frozen=True, kw_only=True)
class ScriptedTurn:
    """One scripted turn of a scenario."""

    question: str
    tags: tuple[str, ...]
    tool_calls: tuple[ToolCall, ...]
    tool_results: tuple[ToolResult, ...]
    answer: str | None = None


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """Stable base items plus the turns to play."""

    name: str
    policy: str
    model: str
    base: Mapping[str, Any]
    turns: tuple[ScriptedTurn, ...]


class _Call(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    arguments: str = ""


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    content: str
    status: str | None = None


class _Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str
    tags: list[str] = []
    tool_calls: list[_Call] = []
    tool_results: list[_Result] = []
    answer: str | None = None


class _Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    policy: str = "legal-review"
    model: str = "claude-sonnet-4-5"
    base: dict[str, Any]
    turns: list[_Turn]


def parse_scenario(body: Mapping[str, Any]) -> Scenario:
    """Validate a scenario body (errors name the JSON path)."""
    parsed = validate_body(_Scenario, body)
    return Scenario(
        name=parsed.name,
        policy=parsed.policy,
        model=parsed.model,
        base=parsed.base,
        turns=tuple(
            ScriptedTurn(
                question=t.question,
                tags=tuple(t.tags),
                tool_calls=tuple(ToolCall(name=c.name, arguments=c.arguments) for c in t.tool_calls),
                tool_results=tuple(
                    ToolResult(name=r.name, content=r.content, status=r.status) for r in t.tool_results
                ),
                answer=t.answer,
            )
            for t in parsed.turns
        ),
    )


QUESTIONS = [
    "What does the witness say about {topic}? Cite page:line.",
    "Was written notice about {topic} given before the claim? Which exhibits show it?",
    "Summarize the testimony on {topic} and flag any objection to form.",
    "Which exhibits support our position on {topic}, and where are they discussed?",
    "Is there an admission against interest regarding {topic}?",
]


def _tool_results(rng: random.Random, pages: list[str], topic: str) -> tuple[ToolResult, ...]:
    hits = []
    for page in rng.sample(range(len(pages)), 8):
        lines = pages[page].split("\n")[1:]
        hits += [line for line in lines if topic.split()[-1] in line][:4] or lines[:3]
    # A realistic search log: every hit with its full line, as an agent's tool returns it.
    search = json.dumps({"status": "CONFIRMED", "query": topic, "matches": hits[:24]}, ensure_ascii=False)
    exhibit = rng.randint(1, 40)
    record = json.dumps(
        {
            "status": "FOUND",
            "exhibit": f"EX-{exhibit:02d}",
            "description": f"Letter concerning {topic}, produced by the seller.",
        }
    )
    return (
        ToolResult(name="search_transcript", content=search),
        ToolResult(name="get_exhibit", content=record),
    )


def bundled_scenario() -> Scenario:
    """The bundled deposition review: a 15,000-token playbook, ~95,000 tokens of transcript with
    protected testimony, and 10 scripted turns with tool calls and results (claude estimates)."""
    base = build_legal_context()
    items = [i for i in base["items"] if i.get("kind") not in ("history", "question")]
    rng = random.Random(42)
    pages = transcript_pages(random.Random(20261129), 105)
    turns = []
    for n in range(10):
        topic, tag = TOPICS[n % len(TOPICS)]
        question = QUESTIONS[n % len(QUESTIONS)].format(topic=topic)
        calls = (
            ToolCall(name="search_transcript", arguments=json.dumps({"query": topic})),
            ToolCall(name="get_exhibit", arguments=json.dumps({"topic": topic})),
        )
        turns.append(
            ScriptedTurn(
                question=question,
                tags=(tag,),
                tool_calls=calls,
                tool_results=_tool_results(rng, pages, topic),
            )
        )
    return Scenario(
        name="deposition-review",
        policy="legal-review",
        model="claude-sonnet-4-5",
        base={"items": items},
        turns=tuple(turns),
    )
