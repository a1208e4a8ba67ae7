"""What differs between the provider APIs (Anthropic Messages, OpenAI Chat Completions and
Responses): paths, request format, error shapes, answer text, SSE parsing."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .tools import StreamedCalls

__all__ = ["ANTHROPIC", "OPENAI", "RESPONSES", "Provider", "StreamState", "failed_answer"]

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


_OURS = "ctxbudget: "  # what every error the gateway (not the upstream) tells begins with


@dataclass(frozen=True)
class Provider:
    """One upstream API: the provider (its errors, its upstream, its refusal codes), the path,
    and the request format of its bodies."""

    name: ProviderName
    path: str
    input_format: str

    def error_body(self, status: int, message: str, code: str) -> dict[str, Any]:
        """An error in this provider's own shape, so SDKs raise their usual exceptions; its message
        says it is ctxbudget's (``ctxbudget: ...``): "request body must be a JSON object" read as
        the provider's own words, and a client could not tell where to look."""
        message = message if message.startswith(_OURS) else _OURS + message
        if self.name == "anthropic":  # its shape has no code: given beside the type, as ours
            kind = _ANTHROPIC_ERROR_TYPES.get(status) or (
                "invalid_request_error" if status < 500 else "api_error"
            )
            return {"type": "error", "error": {"type": kind, "message": message, "code": code}}
        kind = (
            "rate_limit_error"
            if status == 429
            else "invalid_request_error"
            if status < 500
            else "server_error"
        )
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def stream_error(self, message: str, status: int = 502, code: str = "upstream_disconnected") -> bytes:
        """An SSE event that tells a streaming client the stream failed (by default: the upstream
        mid-stream)."""
        body = json.dumps(self.error_body(status, message, code))
        return (
            f"event: error\ndata: {body}\n\n" if self.name == "anthropic" else f"data: {body}\n\n"
        ).encode()

    def response_text(self, payload: Any) -> str:
        """The assistant text of a non-streamed response ("" for a shape it does not know: the
        answer is the client's either way, this is only what the session records)."""
        if not isinstance(payload, Mapping):
            return ""
        if self.input_format == "responses":
            return _responses_text(payload)
        if self.name == "anthropic":
            content = payload.get("content")
            blocks = content if isinstance(content, list) else []
            return "".join(str(b.get("text") or "") for b in blocks if isinstance(b, dict))
        choices = payload.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        return str(message.get("content") or "") if isinstance(message, dict) else ""


ANTHROPIC = Provider("anthropic", "/v1/messages", "anthropic")
OPENAI = Provider("openai", "/v1/chat/completions", "openai")
RESPONSES = Provider("openai", "/v1/responses", "responses")

# The events that end a Responses stream with its answer (each carries the response, with its
# usage); ``response.failed`` ends it without one (an answered turn is not stored for it).
_RESPONSES_ENDS = ("response.completed", "response.incomplete")


# The field a whole answer holds its reply in, by request format: a body without it is no answer.
_ANSWER_FIELDS = {"anthropic": "content", "openai": "choices", "responses": "output"}


def failed_answer(provider: Provider, payload: Any) -> bool:
    """Whether a whole answer holds no answered turn to store: a Responses body with status
    ``failed`` (the API answers 200 with it); an error body answered with 200 (Anthropic's
    ``type: error``, an OpenAI-style ``error`` object); or no object with the reply's own list
    (``content``, ``choices``, ``output``): ``null``, ``42``, ``{}``. Each was stored as a turn
    with an empty answer, which the client's SDK read as a failure (and its retry as a second)."""
    if not isinstance(payload, dict):
        return True
    if provider.input_format == "responses" and payload.get("status") == "failed":
        return True
    if payload.get("type") == "error" or isinstance(payload.get("error"), dict):
        return True
    reply = _ANSWER_FIELDS.get(provider.input_format)
    return reply is not None and not isinstance(payload.get(reply), list)


def _responses_text(response: Mapping[str, Any]) -> str:
    """The ``output_text`` parts of a Responses answer's message items, joined."""
    output = response.get("output")
    items = output if isinstance(output, list) else []
    return "".join(
        str(part.get("text") or "")
        for item in items
        if isinstance(item, dict) and item.get("type") == "message"
        for part in _list(item.get("content"))  # 5 for content was a TypeError: a 502
        if isinstance(part, dict) and part.get("type") == "output_text"
    )


def _list(value: Any) -> list[Any]:
    """``value`` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def _utf8(line: bytes) -> bool:
    """Whether ``line`` is UTF-8 text."""
    if line.isascii():
        return True
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _payload(lines: list[bytes]) -> bytes | None:
    """An event's data: its ``data:`` lines' values joined by line breaks (None: it has none)."""
    data = [line[5:] for line in lines if line.startswith(b"data:")]
    return b"\n".join(d[1:] if d.startswith(b" ") else d for d in data) if data else None


def _usage_only(payload: bytes | None) -> bool:
    """Whether an event's data is a Chat Completions chunk of usage alone (no choices)."""
    try:
        event = json.loads(payload) if payload is not None else None
    except (ValueError, RecursionError):
        return False
    return isinstance(event, dict) and isinstance(event.get("usage"), dict) and not event.get("choices")


# SSE lines end with CRLF, LF or CR; an event ends at a blank line (the EventSource rules).
_LINE_END = re.compile(rb"\r\n|\n|\r")


# A chunk's `"usage": null`, which OpenAI adds to every chunk of a stream that asks for usage: a
# key at an object's top level (inside a string its quotes are escaped: `\"usage\"` does not match).
_NULL_USAGE = re.compile(rb',\s*"usage"\s*:\s*null(?=\s*[,}])|"usage"\s*:\s*null\s*,')


@dataclass
class StreamState:
    """Server-sent events parsed as they pass through, by the EventSource rules (any line ending;
    several ``data:`` lines of one event joined by a newline): the text and the usage, for the
    record. Events go to the client whole, byte for byte, as soon as their blank line arrives.

    With ``hold_usage``, a usage-only OpenAI chunk
    (``choices: []`` with ``usage``) is held back: the gateway asked for it, the client did not."""

    provider: Provider
    hold_usage: bool = False
    text: list[str] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    calls: StreamedCalls = field(default_factory=StreamedCalls)  # the tool calls, for the record
    ended: bool = False  # the stream's end came (an end event, ``[DONE]``, every choice finished)
    failed: bool = False  # the upstream sent its own error event (the client has it)
    broken: bool = False  # an event the client's SDK cannot read (data that is not JSON)
    _pending: bytearray = field(default_factory=bytearray)  # bytes not yet passed on or dropped
    _start: int = 0  # where in them the current event starts
    _scan: int = 0  # where the next line starts
    _seen: int = 0  # how far they were searched for a line end: each byte is searched once
    _lines: list[bytes] = field(default_factory=list)
    # A Chat Completions stream's choices (by index) and which have no finish_reason yet.
    _choices: set[int] = field(default_factory=set)
    _open: set[int] = field(default_factory=set)

    @property
    def finished(self) -> bool:
        """Whether the stream ended with its answer: its end came, and no error or data the
        client's SDK cannot read came before or after it (the SDK raised on those)."""
        return self.ended and not (self.failed or self.broken)

    def feed(self, chunk: bytes) -> bytes:
        """Consume raw bytes; complete events are parsed, partial ones wait for more. Returns the
        bytes to pass to the client now. Linear in the bytes fed, however an event is chunked
        (a 32 MB event took 32 s when every chunk rescanned and recopied the event so far)."""
        self._pending += chunk
        return self._consume(final=False)

    def _consume(self, *, final: bool) -> bytes:
        """Parse the complete lines pending; the events they complete are returned to pass on.
        A CR ending the bytes waits for the next (it may be half a CRLF) unless ``final``."""
        out = bytearray()
        while (end := _LINE_END.search(self._pending, max(self._scan, self._seen))) is not None:
            if not final and end.group() == b"\r" and end.end() == len(self._pending):
                self._seen = end.start()  # a CR at the end may be the first half of a CRLF
                break
            line = bytes(self._pending[self._scan : end.start()])
            self._scan = self._seen = end.end()
            if line:
                self._lines.append(line)
                continue
            if self._event(self._lines) or not self.hold_usage:
                event = self._pending[self._start : self._scan]
                # with the gateway's ask for usage, each chunk's "usage": null goes with it
                out += _NULL_USAGE.sub(b"", event) if self.hold_usage else event
            self._start, self._lines = self._scan, []
        else:
            self._seen = len(self._pending)
        self._drop_passed()
        return bytes(out)

    def _drop_passed(self) -> None:
        """Forget the events already passed on or dropped (once a feed: no copy per event)."""
        if self._start:
            del self._pending[: self._start]
            self._scan -= self._start
            self._seen -= self._start
            self._start = 0

    def flush(self) -> bytes:
        """What is left when the upstream closed: an event without its blank line goes out if
        it ended the stream; a cut-off event is dropped (the client gets an error event instead of
        half an event it cannot parse)."""
        out = self._consume(final=True)  # a CR held as half a CRLF ended its line after all
        rest, lines = bytes(self._pending), [*self._lines, bytes(self._pending[self._scan :])]
        self._pending, self._scan, self._seen, self._lines = bytearray(), 0, 0, []
        if not rest.strip():
            self._closed()
            return out + rest
        # read on a copy: the record takes what the event holds only if the client gets it (or it
        # is the usage the gateway asked for), as the client reads no event cut off (its text and
        # usage were stored, and the client had neither)
        trial = copy.deepcopy(self, {id(self.provider): self.provider})
        keep = trial._event([line for line in lines if line])
        trial.broken = self.broken  # a cut-off event is dropped, not read by the client
        # this last event ended it (the upstream's error among them: the client is told)
        by_it = (
            (trial.finished and not self.finished)
            or (trial._chosen() and not self._chosen())
            or (trial.failed and not self.failed)
        )
        passed = by_it and keep
        if passed or (not keep and self.hold_usage):
            self.__dict__.update(trial.__dict__)
        self._closed()
        if self.hold_usage:
            rest = _NULL_USAGE.sub(b"", rest)
        return out + (rest if passed else b"")

    def _closed(self) -> None:
        """At the upstream's clean close: a Chat Completions stream whose every choice has its
        finish_reason is a whole answer without ``data: [DONE]`` (some compatible servers leave it
        out; the OpenAI SDK reads such a stream as complete), unless the upstream's error came in it
        (:attr:`finished`)."""
        if self._chosen():
            self.ended = True

    def _chosen(self) -> bool:
        """Whether every choice of a Chat Completions stream has its finish_reason."""
        return bool(self._choices) and not self._open

    def _event(self, lines: list[bytes]) -> bool:
        """Parse one event; False when it is a usage-only chunk to hold back. A line of it that is
        not UTF-8 (its data, a comment, its name) is one the client's SDK fails on (both SDKs
        decode every line): no answer came, as for data that is not JSON, and a non-streamed answer
        of such bytes is a 502 (its data read with the bad bytes replaced was stored as answered)."""
        if self.ended:  # after the end the turn is stored at: whatever follows changes nothing of
            # the record (it was told apart by how TCP cut it), and reaches the client but for the
            # usage the gateway asked for
            return not (self.hold_usage and _usage_only(_payload(lines)))
        if not all(map(_utf8, lines)):
            self.broken = True
            return True
        payload = _payload(lines)
        return True if payload is None else self._data(payload.decode("utf-8").strip())

    def _data(self, data: str) -> bool:
        if not data:  # an empty data line (a keep-alive): nothing to read
            return True
        if data == "[DONE]":  # after the upstream's own error (vLLM sends both): no answer
            if self.provider.input_format == "openai" and not self._choices:
                self.failed = True  # nor in a chat stream of no choice at all: nothing was answered
            self.ended = True
            return True
        try:
            event = json.loads(data)
        except (ValueError, RecursionError):  # not JSON, or nested past what Python reads:
            self.broken = True  # the client's SDK fails on it: no answer came, whatever follows
            return True
        if not isinstance(event, dict):
            return True
        if event.get("type") == "error" or isinstance(event.get("error"), dict):
            self.failed = True  # Anthropic's `error` event, or an OpenAI-style error object
            return True
        if self.provider.name == "anthropic":
            self._anthropic(event)
            return True
        if self.provider.input_format == "responses":
            self._responses(event)
            return True
        return self._openai(event)

    def _anthropic(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self._usage(_dict(_dict(event.get("message")).get("usage")))
        elif kind == "content_block_delta":
            self.text.append(str(_dict(event.get("delta")).get("text") or ""))
            self.calls.anthropic(event)
        elif kind == "content_block_start":
            self.calls.anthropic(event)
        elif kind == "message_delta":
            self._usage(_dict(event.get("usage")))
        elif kind == "message_stop":
            self.ended = True

    def _responses(self, event: Mapping[str, Any]) -> None:
        """Responses events: text deltas, and the end, whose response carries the usage."""
        kind = event.get("type")
        if kind == "response.output_text.delta":
            self.text.append(str(event.get("delta") or ""))
        elif kind in _RESPONSES_ENDS:
            self._usage(_dict(_dict(event.get("response")).get("usage")))
            self.calls.responses(_dict(event.get("response")))
            self.ended = True
        elif kind == "response.failed":  # the upstream's own failure event (the client has it)
            self.failed = True

    def _openai(self, event: Mapping[str, Any]) -> bool:
        choices = event.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            index = _dict(choice).get("index", 0)
            if isinstance(index, int):
                self._choices.add(index)
                (self._open.discard if _dict(choice).get("finish_reason") else self._open.add)(index)
            if index == 0:  # the turn is the first reply, as when not streamed
                delta = _dict(_dict(choice).get("delta"))
                self.text.append(str(delta.get("content") or ""))
                self.calls.openai(delta)
        if isinstance(event.get("usage"), dict):
            self._usage(event["usage"])
            return bool(choices)  # a usage-only chunk
        return True

    def _usage(self, usage: Mapping[str, Any]) -> None:
        """Usage so far; a later event's null field (allowed in a message_delta) keeps the value."""
        self.usage.update({k: v for k, v in usage.items() if v is not None})


def _dict(value: Any) -> Mapping[str, Any]:
    """``value`` when it is an object, else an empty one: a stream's events are read, never trusted."""
    return value if isinstance(value, Mapping) else {}
