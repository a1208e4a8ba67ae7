"""Turn values: what one exchange of a session holds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolCall", "ToolResult", "Turn"]


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """A tool the model called, with its arguments as sent."""

    name: str
    arguments: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """What a tool returned (``status`` when the tool reported one)."""

    name: str
    content: str
    status: str | None = None


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One turn: the question, tool calls and results, the answer, and what the turn cost."""

    index: int
    question: str
    answer: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    tags: tuple[str, ...] = ()
    report: Mapping[str, Any] = field(default_factory=dict)
    usage: Mapping[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """A turn pair is complete once it has an answer."""
        return bool(self.answer)

    def raw_texts(self) -> list[tuple[str, str]]:
        """(role, text) of the turn as raw history: question, tool calls, tool results, answer."""
        texts = [("user", self.question)]
        texts += [("assistant", f"[tool call {c.name}] {c.arguments}") for c in self.tool_calls]
        texts += [("user", f"[tool result {r.name}] {r.content}") for r in self.tool_results]
        if self.answer:
            texts.append(("assistant", self.answer))
        return texts

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for export and storage)."""
        return {
            "index": self.index,
            "question": self.question,
            "answer": self.answer,
            "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in self.tool_calls],
            "tool_results": [
                {"name": r.name, "content": r.content, "status": r.status} for r in self.tool_results
            ],
            "tags": list(self.tags),
            "report": dict(self.report),
            "usage": dict(self.usage),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Turn:
        """Inverse of :meth:`to_dict`."""
        return cls(
            index=int(data["index"]),
            question=str(data["question"]),
            answer=str(data.get("answer", "")),
            tool_calls=tuple(ToolCall(**c) for c in data.get("tool_calls", [])),
            tool_results=tuple(ToolResult(**r) for r in data.get("tool_results", [])),
            tags=tuple(data.get("tags", [])),
            report=dict(data.get("report", {})),
            usage=dict(data.get("usage", {})),
        )
