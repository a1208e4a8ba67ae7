"""What differs between the two provider APIs: paths, request format, error shapes, SSE parsing."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ANTHROPIC", "OPENAI", "Provider", "StreamState"]

ProviderName = Literal["anthropic", "openai"]

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    502: "api_error",
    503: "overloaded_error",
    504: "api_error",
    529: "overloaded_error",
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
        kind = (
            "rate_limit_error"
            if status == 429
            else "invalid_request_error"
            if status < 500
            else "server_error"
        )
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


_EVENT_END = re.compile(r"\r\n\r\n|\n\n|\r\r")


@dataclass
class StreamState:
    """Server-sent events parsed as they pass through: the text and the usage, for the record.

    With ``hold_usage``, events go out whole and a usage-only OpenAI chunk (``choices: []`` with
    ``usage``) is held back: the gateway asked for it, the client did not."""

    provider: Provider
    hold_usage: bool = False
    buffer: str = ""
    text: list[str] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    finished: bool = False
    _decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace")
    )

    def feed(self, chunk: bytes) -> bytes:
        """Consume raw bytes; complete events are parsed, partial ones wait for more. Returns the
        bytes to pass to the client now."""
        self.buffer += self._decoder.decode(chunk)  # a character split across chunks waits
        out: list[str] = []
        while (end := _EVENT_END.search(self.buffer)) is not None:
            event, self.buffer = self.buffer[: end.start()], self.buffer[end.end() :]
            if self._event(event) or not self.hold_usage:
                out.append(event + "\n\n")
        return chunk if not self.hold_usage else "".join(out).encode("utf-8")

    def flush(self) -> bytes:
        """What is left at the end of the stream (an event without its blank line)."""
        rest = self.buffer + self._decoder.decode(b"", final=True)
        self.buffer = ""
        if not rest.strip():
            return b""
        keep = self._event(rest)
        return rest.encode("utf-8") if self.hold_usage and keep else b""

    def _event(self, event: str) -> bool:
        """Parse one event; False when it is a usage-only chunk to hold back."""
        keep = True
        for line in event.splitlines():
            if line.startswith("data:"):
                keep = self._data(line[5:].strip()) and keep
        return keep

    def _data(self, data: str) -> bool:
        if data == "[DONE]":
            self.finished = True
            return True
        try:
            event = json.loads(data)
        except ValueError:
            return True
        if not isinstance(event, dict):
            return True
        if self.provider.name == "anthropic":
            self._anthropic(event)
            return True
        return self._openai(event)

    def _anthropic(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            usage = (event.get("message") or {}).get("usage")
            self.usage.update(usage if isinstance(usage, dict) else {})
        elif kind == "content_block_delta":
            self.text.append(str((event.get("delta") or {}).get("text", "")))
        elif kind == "message_delta":
            usage = event.get("usage")
            self.usage.update(usage if isinstance(usage, dict) else {})
        elif kind == "message_stop":
            self.finished = True

    def _openai(self, event: Mapping[str, Any]) -> bool:
        choices = event.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if isinstance(choice, dict):
                self.text.append(str((choice.get("delta") or {}).get("content") or ""))
        if isinstance(event.get("usage"), dict):
            self.usage.update(event["usage"])
            return bool(choices)  # a usage-only chunk
        return True
