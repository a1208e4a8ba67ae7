"""What differs between the two provider APIs: paths, request format, error shapes, SSE parsing."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ANTHROPIC", "OPENAI", "Provider", "StreamState"]

ProviderName = Literal["anthropic", "openai"]

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    413: "request_too_large",
    502: "api_error",
    503: "overloaded_error",
    504: "api_error",
}


@dataclass(frozen=True)
class Provider:
    """One upstream API."""

    name: ProviderName
    path: str

    def error_body(self, status: int, message: str, code: str) -> dict[str, Any]:
        """An error in this provider's own shape, so SDKs raise their usual exceptions."""
        if self.name == "anthropic":
            return {
                "type": "error",
                "error": {"type": _ANTHROPIC_ERROR_TYPES.get(status, "api_error"), "message": message},
            }
        kind = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def stream_error(self, message: str) -> bytes:
        """An SSE event that tells a streaming client the upstream failed mid-stream."""
        body = json.dumps(self.error_body(502, message, "upstream_disconnected"))
        return (
            f"event: error\ndata: {body}\n\n" if self.name == "anthropic" else f"data: {body}\n\n"
        ).encode()

    def response_text(self, payload: Mapping[str, Any]) -> str:
        """The assistant text of a non-streamed response."""
        if self.name == "anthropic":
            return "".join(b.get("text", "") for b in payload.get("content", []) if isinstance(b, dict))
        choices = payload.get("choices") or [{}]
        return str((choices[0].get("message") or {}).get("content") or "")


ANTHROPIC = Provider("anthropic", "/v1/messages")
OPENAI = Provider("openai", "/v1/chat/completions")


@dataclass
class StreamState:
    """Server-sent events parsed as they pass through: the text and the usage, for the record."""

    provider: Provider
    buffer: str = ""
    text: list[str] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    finished: bool = False

    def feed(self, chunk: bytes) -> None:
        """Consume raw bytes; complete events are parsed, partial ones wait for more."""
        self.buffer += chunk.decode("utf-8", "replace")
        while "\n\n" in self.buffer:
            event, self.buffer = self.buffer.split("\n\n", 1)
            for line in event.splitlines():
                if line.startswith("data:"):
                    self._data(line[5:].strip())

    def _data(self, data: str) -> None:
        if data == "[DONE]":
            self.finished = True
            return
        try:
            event = json.loads(data)
        except ValueError:
            return
        if self.provider.name == "anthropic":
            self._anthropic(event)
        else:
            self._openai(event)

    def _anthropic(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self.usage.update((event.get("message") or {}).get("usage") or {})
        elif kind == "content_block_delta":
            self.text.append(str((event.get("delta") or {}).get("text", "")))
        elif kind == "message_delta":
            self.usage.update(event.get("usage") or {})
        elif kind == "message_stop":
            self.finished = True

    def _openai(self, event: Mapping[str, Any]) -> None:
        for choice in event.get("choices") or []:
            self.text.append(str((choice.get("delta") or {}).get("content") or ""))
        if event.get("usage"):
            self.usage.update(event["usage"])
