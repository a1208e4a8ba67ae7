"""A gateway turn's tool calls and tool results, for the stored turn (``session show`` and
``session export`` are the audit trail of what an agent did): the calls the model answered with,
read from its answer (whole or streamed), and the results the client sent back with the request,
read from its last turn. Only what the store records; the bodies pass through unchanged.

An agent loop's turns were stored with an empty answer and no calls or results: the trail showed
the same question again and again, and nothing of what was called or returned.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..formats.jsonvalue import compact_json
from ..session.turns import ToolCall, ToolResult

__all__ = ["StreamedCalls", "answered_calls", "sent_results"]


def answered_calls(input_format: str, payload: Any) -> tuple[ToolCall, ...]:
    """The tool calls of a whole answer, in order (none for a shape this does not know)."""
    if not isinstance(payload, Mapping):
        return ()
    if input_format == "responses":
        return _responses_calls(payload.get("output"))
    if input_format == "anthropic":
        return tuple(_tool_use(b) for b in _dicts(payload.get("content")) if b.get("type") == "tool_use")
    choices = _dicts(payload.get("choices"))
    message = _dict(choices[0].get("message")) if choices else {}
    return tuple(_function(_dict(c.get("function"))) for c in _dicts(message.get("tool_calls")))


@dataclass
class StreamedCalls:
    """Tool calls gathered from a stream's events: each call's name and its arguments' pieces, by
    the position the provider gives it (an OpenAI chunk's ``index``, or without one its ``id`` and
    name, an Anthropic content block's ``index``); a Responses stream's calls come whole with its final response."""

    names: dict[Any, str] = field(default_factory=dict)
    pieces: dict[Any, list[str]] = field(default_factory=dict)
    whole: tuple[ToolCall, ...] = ()
    # An Anthropic call whose input came whole with its start, or never (``{}``, as unstreamed).
    given: dict[Any, str] = field(default_factory=dict)
    # An OpenAI call's id, and the call the last piece went to: for pieces that come without an index.
    ids: dict[Any, str] = field(default_factory=dict)
    last: Any = None
    # Each id's first call (in the order calls came), and the highest numbered call: read for each
    # piece without an index (looked for among every call, 8,000 calls of such pieces took 3 s, and
    # their time grew as its square)
    by_id: dict[str, Any] = field(default_factory=dict)
    top: int | None = None
    _rank: dict[Any, int] = field(default_factory=dict)  # each call's place in the order calls came

    def openai(self, delta: Mapping[str, Any]) -> None:
        """An OpenAI chunk's ``delta``: its tool-call pieces."""
        for call in _dicts(delta.get("tool_calls")):
            function, ident = _dict(call.get("function")), _text(call.get("id"))
            name = _text(function.get("name"))
            index = call.get("index")
            position = _position(index) if index is not None else self._unnumbered(ident, name)
            self._named(position, self.names.get(position) or name)  # the first given
            self._identified(position, ident)
            self.pieces.setdefault(position, []).append(_text(function.get("arguments")))
            self.last = position

    def _identified(self, position: Any, ident: str) -> None:
        """The call at ``position`` given ``ident`` (its first id stays): an id's call is the first
        of the calls that came with it, in the order the calls came."""
        self._rank.setdefault(position, len(self._rank))
        if self.ids.get(position):
            return
        self.ids[position] = ident
        known = self.by_id.get(ident)
        if ident and (known is None or self._rank[position] < self._rank[known]):
            self.by_id[ident] = position

    def _named(self, position: Any, name: str) -> None:
        """The call at ``position`` named ``name`` (the highest numbered call kept)."""
        self.names[position] = name
        if isinstance(position, int) and (self.top is None or position > self.top):
            self.top = position

    def _unnumbered(self, ident: str, name: str) -> Any:
        """The position of an OpenAI call piece without an ``index`` (some compatible servers leave
        it out): the last call's, unless it carries another id or another name than that call's,
        which starts the next call (parallel calls were one, their arguments run together). A
        piece with an earlier call's id goes to that call (pieces of parallel calls interleaved)."""
        known = self.by_id.get(ident) if ident else None
        if known is not None:
            return known
        last = self.last
        if (
            last is not None
            and ident in ("", self.ids[last] or ident)
            and name in ("", self.names[last] or name)
        ):
            return last
        return 0 if self.top is None else self.top + 1

    def anthropic(self, event: Mapping[str, Any]) -> None:
        """An Anthropic ``content_block_start`` or ``content_block_delta`` event."""
        position = _position(event.get("index", 0))
        block = _dict(event.get("content_block"))
        if event.get("type") == "content_block_start" and block.get("type") == "tool_use":
            self._named(position, _text(block.get("name")))
            given = block.get("input")
            self.given[position] = compact_json(given if isinstance(given, dict) else {})
            self.pieces[position] = []
        delta = _dict(event.get("delta"))
        if position in self.names and delta.get("type") == "input_json_delta":
            self.pieces[position].append(_text(delta.get("partial_json")))

    def responses(self, response: Mapping[str, Any]) -> None:
        """A Responses stream's final ``response``: its calls, whole."""
        self.whole = _responses_calls(response.get("output"))

    def calls(self) -> tuple[ToolCall, ...]:
        """The calls gathered, in the order the provider numbered them (a call whose name never
        came is kept, nameless). An Anthropic call's input is written as a whole answer's is
        (compact JSON), not as its pieces spelled it."""
        if self.whole:
            return self.whole
        ordered = sorted(self.names, key=lambda p: (not isinstance(p, int), p if isinstance(p, int) else 0))
        return tuple(ToolCall(name=self.names[p], arguments=self._arguments(p)) for p in ordered)

    def _arguments(self, position: Any) -> str:
        joined = "".join(self.pieces.get(position, ()))
        if position not in self.given:  # an OpenAI call: its arguments are a string, kept as sent
            return joined
        if not joined:
            return self.given[position]
        try:
            return compact_json(json.loads(joined))
        except (ValueError, RecursionError):  # cut off: what came, as it came
            return joined


def sent_results(input_format: str, messages: Sequence[Any]) -> tuple[ToolResult, ...]:
    """The tool results the request's last turn sends back (after the model's latest message),
    each named by the call it answers when the request holds that call just before them. A
    request that sends none costs a look at its last message (every request comes here)."""
    items = [m for m in messages[-_LOOK_BACK:] if isinstance(m, Mapping)]
    if input_format == "anthropic":
        last = items[-1] if items else {}
        blocks = _dicts(last.get("content")) if last.get("role") == "user" else []
        results = [b for b in blocks if b.get("type") == "tool_result"]
        names = _call_names(items[-2:-1]) if results else {}
        return tuple(
            ToolResult(
                name=names.get(_text(b.get("tool_use_id")), _text(b.get("tool_use_id"))),
                content=_content(b.get("content")),
                status="error" if b.get("is_error") is True else None,
            )
            for b in results
        )
    kind = "function_call_output" if input_format == "responses" else None
    trailing: list[Mapping[str, Any]] = []
    for item in reversed(items):
        if (item.get("type") == kind) if kind else (item.get("role") == "tool"):
            trailing.append(item)
        else:
            break
    if not trailing:
        return ()
    names = _call_names(items[: len(items) - len(trailing)])
    key, text = ("call_id", "output") if kind else ("tool_call_id", "content")
    return tuple(
        ToolResult(name=names.get(_text(r.get(key)), _text(r.get(key))), content=_content(r.get(text)))
        for r in reversed(trailing)
    )


# How far back from the end a request is read for its last turn's results and their calls: a
# model's parallel calls and their results (a 2,000-message body was walked whole every request).
_LOOK_BACK = 256


def _position(value: Any) -> int | str:
    """A call's position as a key: its number, or what an odd upstream sent written out (a list
    for an index was a TypeError in the middle of a relayed stream)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else repr(value)


def _call_names(items: list[Mapping[str, Any]]) -> dict[str, str]:
    """Each call id of the request's calls, with the tool's name (all three formats)."""
    names: dict[str, str] = {}
    for item in items:
        if item.get("type") == "function_call":
            names[_text(item.get("call_id"))] = _text(item.get("name"))
        for call in _dicts(item.get("tool_calls")):
            names[_text(call.get("id"))] = _text(_dict(call.get("function")).get("name"))
        for block in _dicts(item.get("content")):
            if block.get("type") == "tool_use":
                names[_text(block.get("id"))] = _text(block.get("name"))
    return names


def _responses_calls(output: Any) -> tuple[ToolCall, ...]:
    return tuple(
        ToolCall(name=_text(i.get("name")), arguments=_text(i.get("arguments")))
        for i in _dicts(output)
        if i.get("type") == "function_call"
    )


def _tool_use(block: Mapping[str, Any]) -> ToolCall:
    given = block.get("input")
    return ToolCall(name=_text(block.get("name")), arguments=compact_json(given) if given is not None else "")


def _function(function: Mapping[str, Any]) -> ToolCall:
    return ToolCall(name=_text(function.get("name")), arguments=_text(function.get("arguments")))


def _content(value: Any) -> str:
    """A result's text: a string, or its text parts joined (images and other parts are left out)."""
    if isinstance(value, str):
        return value
    return "\n".join(_text(p.get("text")) for p in _dicts(value) if isinstance(p.get("text"), str))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
