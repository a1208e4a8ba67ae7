"""Simulation scenarios: the bundled 10-turn deposition review, and scenario files.

A scenario is ``{"name", "policy", "model", "base": {"items": [...]}, "turns": [...]}``; each turn
has a ``question``, ``tags``, ``tool_calls`` and ``tool_results`` (each with ``name`` and
``arguments`` / ``content``), and optionally the ``answer`` (turns without one are answered by
the deterministic stand-in model) and ``idle_seconds``, the time the user is away before it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..cost import MAX_AMOUNT
from ..formats.wire import validate_body
from ..session.store import name_problem
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
    # Seconds the user is away before this turn (after the previous answer): the cache may expire.
    idle_seconds: float = 0.0


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
    idle_seconds: float = Field(default=0.0, ge=0, strict=True)  # a number: not true, not "45"

    @field_validator("idle_seconds")
    @classmethod
    def _idle(cls, seconds: float) -> float:
        if not seconds < MAX_AMOUNT:  # refused here, at its place, not by the session's clock
            raise ValueError("must be below 1e18 seconds")
        return seconds

    @field_validator("question")
    @classmethod
    def _asked(cls, question: str) -> str:
        if not question.strip():  # refused here, at its place, not by the turn's assembly
            raise ValueError("the question is empty")
        return question


class _Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    policy: str = "legal-review"
    model: str = "claude-sonnet-4-5"
    base: dict[str, Any]
    turns: list[_Turn] = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _named(cls, name: str) -> str:
        problem = name_problem(name)
        if problem is not None:  # refused here, at its place, not by the session it starts
            raise ValueError(f"the session name {problem}")
        return name


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
                idle_seconds=t.idle_seconds,
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


# Seconds away before each turn of the bundled scenario: a reviewer reads each answer for 45 s,
# steps away for 20 minutes before turn 6 (the 5-minute entries expire, the playbook's hour does
# not) and for 90 minutes before turn 9 (everything expires).
BUNDLED_IDLE_SECONDS = {6: 20 * 60.0, 9: 90 * 60.0}
THINK_SECONDS = 45.0


def bundled_scenario() -> Scenario:
    """The bundled deposition review: a 15,000-token playbook, ~95,000 tokens of transcript with
    protected testimony, and 10 scripted turns with tool calls and results (claude estimates),
    with idle gaps before turns 6 and 9."""
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
                idle_seconds=0.0 if n == 0 else BUNDLED_IDLE_SECONDS.get(n + 1, THINK_SECONDS),
            )
        )
    return Scenario(
        name="deposition-review",
        policy="legal-review",
        model="claude-sonnet-4-5",
        base={"items": items},
        turns=tuple(turns),
    )
