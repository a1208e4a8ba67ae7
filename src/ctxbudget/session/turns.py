"""Turn values: what one exchange of a session holds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolCall", "ToolResult", "Turn", "TurnFigures"]


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
class TurnFigures:
    """What a turn took: input tokens, cache reads and writes, cost, and where the figures come
    from ("provider": the usage the provider billed; "estimate": ctxbudget's own, before sending)."""

    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float | None
    source: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "input_tokens": self.input_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cost_usd": self.cost_usd,
            "source": self.source,
        }


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


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

    def figures(self) -> TurnFigures:
        """The provider's billed usage when the turn has it (gateway turns), else the estimate of
        the report (an assembly's tokens and cache prediction, or a fit's tokens after)."""
        actual = self.usage.get("actual")
        if isinstance(actual, Mapping):
            return TurnFigures(
                input_tokens=int(_number(actual.get("input_tokens")) or 0),
                cache_read_tokens=int(_number(actual.get("cache_read_tokens")) or 0),
                cache_write_tokens=int(_number(actual.get("cache_write_tokens")) or 0),
                cost_usd=_number(actual.get("cost_usd")),
                source="provider",
            )
        report, estimated = self.report, self.usage.get("estimated")
        found = report.get("cache")
        cache: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        cost = report.get("cost_usd")
        if cost is None and isinstance(estimated, Mapping):
            cost = estimated.get("cost_usd")
        return TurnFigures(
            input_tokens=int(_number(report.get("tokens", report.get("tokens_after"))) or 0),
            cache_read_tokens=int(_number(cache.get("read_tokens")) or 0),
            cache_write_tokens=int(_number(cache.get("write_tokens")) or 0),
            cost_usd=_number(cost),
            source="estimate",
        )

    def predicted_cache(self) -> tuple[int, int] | None:
        """The cache read and write the turn's report predicted (None: it predicted none)."""
        cache = self.report.get("cache")
        if not isinstance(cache, Mapping) or "read_tokens" not in cache:
            return None
        return int(_number(cache.get("read_tokens")) or 0), int(_number(cache.get("write_tokens")) or 0)

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
