"""OpenAI Chat Completions bodies, counted as OpenAI bills them.

Per OpenAI's published recipe (the cookbook's ``num_tokens_from_messages``): each message costs
3 tokens of framing plus its role and content, a ``name`` costs its tokens plus 1, and every
reply is primed with 3 tokens. Tool definitions follow the cookbook's function-counting recipe.
Tool calls in assistant messages are counted as their function name and argument text. Image
parts follow OpenAI's published tile rule (:mod:`ctxbudget.formats.media`) and are reported as
estimates; other non-text parts are counted at the low-detail rate (85 tokens), also estimated.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from ..items import Item, Owner, Plan, Rendering, Segment
from ..memo import per_fit_by_identity
from .chat import (
    apply_history,
    content_text,
    items_from_messages,
    plain_chat,
    split_messages,
    text_part_indexes,
    with_content_text,
)
from .detection import is_openai
from .media import (
    Estimate,
    anthropic_block_estimate,
    document_notes,
    inline_bytes,
    inline_image_size,
    openai_image_tokens,
    pdf_tokens,
)

__all__ = ["OpenAIFormat", "function_tool_chunks"]

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
# An assistant message's tool calls: their names and arguments are counted, the tokens the API
# frames each call with are not (OpenAI publishes no recipe for them), so the count is an estimate.
CALL_FRAMING_ESTIMATE = "names and arguments counted; the framing of a call is not published"
IMAGE_LOW_DETAIL = 85
# Cookbook function-definition recipe constants (o200k models; cl100k models use 10 for FUNC_INIT:
# the rendering's `functions` carry the difference, see items.FUNCTION_INIT_EXTRA).
FUNC_INIT, PROP_INIT, PROP_KEY, ENUM_INIT, ENUM_ITEM, FUNC_END = 7, 3, 3, -3, 3, 12
# A tool or function message names the call it answers (a field the shortcut does not vouch for).
_ROLES = frozenset({"system", "developer", "user", "assistant"})
_PLAIN_KEYS = frozenset({"role", "content", "name"})
_TYPED_FIELDS = ("tools", "functions", "prediction")  # the body's fields its model reads
_new = tuple.__new__


def _validate(request: Mapping[str, Any]) -> None:
    """The body checked against its model (:mod:`.openai_wire`), unless it is plain chat that the
    model is sure to accept (:func:`.chat.plain_chat`)."""
    if plain_chat(request, _ROLES, _PLAIN_KEYS) and all(request.get(f) is None for f in _TYPED_FIELDS):
        return
    from .openai_wire import Body
    from .wire import validate_body

    validate_body(Body, request)


def message_text(message: Mapping[str, Any]) -> str:
    """The trimmable text of a message: its string content, or its last text part."""
    return content_text(message.get("content"))


def _calls_or_results(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any message makes a call or answers one (else each is a group of its own: a long
    chat is read once, in a tenth of the grouping's time)."""
    for message in messages:
        if "tool_calls" in message or "function_call" in message:
            return True
        if message.get("role") in ("tool", "function"):
            return True
    return False


def _tool_groups(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """A group per message; a call and its results share one, and so does everything from the
    message with the call to its result."""
    groups = list(range(len(messages)))
    if not _calls_or_results(messages):
        return groups
    owner_of_call: dict[str, int] = {}
    for i, message in enumerate(messages):
        for call in message.get("tool_calls") or []:
            owner_of_call[str(call.get("id"))] = i
        legacy = message.get("function_call")  # the deprecated form: answered by a "function" message
        if isinstance(legacy, dict):
            owner_of_call[f"function:{legacy.get('name')}"] = i
        key = str(message.get("tool_call_id")) if message.get("role") == "tool" else None
        if message.get("role") == "function":
            key = f"function:{message.get('name')}"
        if key in owner_of_call:
            first = owner_of_call[key]
            groups[first : i + 1] = [groups[first]] * (i + 1 - first)
    return groups


def _is_system(message: Mapping[str, Any]) -> bool:
    return message.get("role") in ("system", "developer")


def _is_query(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "user"


def chat_part_estimate(part: Mapping[str, Any]) -> Estimate | None:
    """A non-text content part by its rule: an image by OpenAI's tile rule, a file by its pages,
    audio at the low rate; an Anthropic image or PDF block (passed through in an OpenAI message,
    as LangChain passes a Claude message's blocks) by Anthropic's rules. None for a part of no
    rule (a thinking, document or search-result block...): its JSON text is counted instead (at
    85 tokens each, an 18,000-token thinking block was counted 85)."""
    kind = part.get("type")
    image = part.get("image_url")
    if kind == "image_url" and isinstance(image, dict):
        return openai_image_tokens(image.get("detail"), inline_image_size(image.get("url")))
    file = part.get("file")
    if kind == "file" and isinstance(file, dict):  # a PDF: its text and a page image each
        return pdf_tokens(inline_bytes(file.get("file_data")), "file by id")
    if isinstance(part.get("source"), dict) and (block := anthropic_block_estimate(part)) is not None:
        return block
    if kind in ("input_audio", "image_url", "file"):
        return Estimate(IMAGE_LOW_DETAIL, f"{kind}: counted at 85 tokens")
    return None


def _kind(part: Any) -> str:
    return str(part.get("type", "part")) if isinstance(part, dict) else type(part).__name__


def _part_text(part: Any) -> str:
    """A part of no rule as its JSON text, less its cache mark."""
    kept = {k: v for k, v in part.items() if k != "cache_control"} if isinstance(part, dict) else part
    return json.dumps(kept, ensure_ascii=False, separators=(",", ":"))


def _message_chunks(
    message: Mapping[str, Any], owner: Owner, estimated: list[tuple[Owner, str]]
) -> tuple[list[tuple[Segment, ...]], int]:
    content = message.get("content")
    if type(content) is str and len(message) == 2:  # role and text alone: most of a long chat
        # made as Segment(...) makes them, by tuple.__new__: 0.14 against 0.30 us each, two a
        # message (the suite holds them equal)
        role = _new(Segment, (str(message["role"]), owner, False))
        return [(role,), (_new(Segment, (content, owner, True)),)], TOKENS_PER_MESSAGE
    chunks: list[tuple[Segment, ...]] = [(Segment(str(message["role"]), owner),)]
    constant = TOKENS_PER_MESSAGE
    if isinstance(content, str):
        chunks.append((Segment(content, owner, content=True),))
    elif isinstance(content, list):
        texts = text_part_indexes(content)
        for i, part in enumerate(content):
            if i in texts:  # each text part is a piece of the message's trimmable text
                text = part.get("text")
                chunks.append((Segment(str(text or ""), owner, content=isinstance(text, str)),))
            elif isinstance(part, dict) and part.get("type") == "refusal":  # read as text, not cut
                chunks.append((Segment(str(part.get("refusal") or ""), owner),))
            elif (estimate := chat_part_estimate(part) if isinstance(part, dict) else None) is not None:
                constant += estimate.tokens
                estimated.append((owner, f"content[{i}]: {estimate.how}: {estimate.tokens:,} tokens"))
                chunks += [(Segment(note, owner),) for note in document_notes(part)]
            else:
                chunks.append((Segment(_part_text(part), owner),))
                estimated.append((owner, f"content[{i}]: {_kind(part)}: counted as its JSON text"))
    if message.get("name"):
        chunks.append((Segment(str(message["name"]), owner),))
        constant += TOKENS_PER_NAME
    legacy = message.get("function_call")  # the deprecated single function call
    calls = [
        *(message.get("tool_calls") or []),
        *([{"function": legacy}] if isinstance(legacy, dict) else []),
    ]
    for call in calls:
        custom = call.get("custom") if call.get("type") == "custom" else None
        function = custom if isinstance(custom, dict) else call.get("function") or {}
        chunks.append((Segment(str(function.get("name", "")), owner),))
        chunks.append((Segment(str(function.get("input" if custom else "arguments", "")), owner),))
    if calls:  # names and arguments are counted exactly; how the API frames a call is not published
        estimated.append((owner, f"{len(calls)} tool call(s): {CALL_FRAMING_ESTIMATE}"))
    return chunks, constant


# Schema keys under a property that the published recipe does not read (it reads each top-level
# property's type, description and enum): counted as their JSON text, an estimate.
_NESTED = ("properties", "items", "anyOf", "oneOf", "allOf", "additionalProperties", "$ref")


def _text(value: Any) -> str:
    """A schema string as the recipe reads it (a null description or type is empty, not "None")."""
    return "" if value is None else str(value)


# What makes a nested schema more than a type or two (``items: {"type": "string"}`` is a few
# tokens the recipe's rounding covers): text the model reads, or structure that holds some.
_WORDED = frozenset(
    {"description", "enum", "properties", "anyOf", "oneOf", "allOf", "$ref", "const", "title"}
)


def _worded(value: Any) -> bool:
    """Whether a schema part holds any of :data:`_WORDED`, however deep."""
    if isinstance(value, dict):
        return any(k in _WORDED or _worded(v) for k, v in value.items())
    return isinstance(value, list) and any(_worded(v) for v in value)


def function_tool_chunks(
    tools: list[dict[str, Any]], estimated: list[tuple[Owner, str]] | None = None
) -> tuple[list[tuple[Segment, ...]], int]:
    """Function definitions by the cookbook's recipe; nested parameter schemas (which OpenAI
    sends to the model, and the recipe leaves out) as their JSON text, named in ``estimated``."""
    chunks: list[tuple[Segment, ...]] = []
    constant = 0
    for tool in tools:
        function = tool.get("function") or tool.get("custom") or {}  # a custom tool: name, description
        constant += FUNC_INIT
        description = _text(function.get("description")).removesuffix(".")
        chunks.append((Segment(f"{_text(function.get('name'))}:{description}", "tools"),))
        parameters = function.get("parameters") or {}
        properties = parameters.get("properties") or {}
        if properties:
            constant += PROP_INIT
        for key, spec in properties.items():
            constant += PROP_KEY
            enum = spec.get("enum") if isinstance(spec, dict) else None  # null: no enum
            for value in enum if isinstance(enum, list) else []:
                constant += ENUM_ITEM
                chunks.append((Segment(str(value), "tools"),))
            if isinstance(enum, list):
                constant += ENUM_INIT
            kind = _text(spec.get("type")) if isinstance(spec, dict) else ""
            desc = _text(spec.get("description")).removesuffix(".") if isinstance(spec, dict) else ""
            chunks.append((Segment(f"{key}:{kind}:{desc}", "tools"),))
        chunks += _nested_schemas(function, parameters, properties, estimated)
    if tools:
        constant += FUNC_END
    return chunks, constant


_TOP_LEVEL_PARTS = ("$defs", "definitions", "anyOf", "oneOf", "allOf", "$ref")


def _nested_schemas(
    function: Mapping[str, Any],
    parameters: Mapping[str, Any],
    properties: Mapping[str, Any],
    estimated: list[tuple[Owner, str]] | None,
) -> list[tuple[Segment, ...]]:
    """A function's schema parts the recipe does not read, as one JSON text (none: no chunk)."""
    nested = {
        key: parts
        for key, spec in properties.items()
        if isinstance(spec, dict) and _worded(parts := {k: spec[k] for k in _NESTED if k in spec})
    }
    # the schema's own top-level parts the recipe does not read either: definitions, and a
    # union of shapes (a `book` tool whose parameters are anyOf its branches counted 54 of ~210)
    nested |= {k: parameters[k] for k in _TOP_LEVEL_PARTS if k in parameters}
    if not nested:
        return []
    if estimated is not None:
        how = "nested parameter schemas counted as their JSON text (the published recipe reads top-level properties)"
        estimated.append(("tools", f"function {_text(function.get('name'))}: {how}"))
    return [(Segment(json.dumps(nested, ensure_ascii=False, separators=(",", ":")), "tools"),)]


def _custom_tool_formats(
    tools: list[dict[str, Any]], estimated: list[tuple[Owner, str]]
) -> list[tuple[Segment, ...]]:
    """A custom (freeform) tool's input format (a grammar, say), counted as its JSON text: an
    estimate, since how the provider renders custom tools is not published."""
    chunks: list[tuple[Segment, ...]] = []
    for tool in tools:
        custom = tool.get("custom") if tool.get("type") == "custom" else None
        if isinstance(custom, dict):
            form = custom.get("format")
            if form is not None:
                chunks.append(
                    (Segment(json.dumps(form, ensure_ascii=False, separators=(",", ":")), "tools"),)
                )
            estimated.append(
                ("tools", f"custom tool {custom.get('name')!s}: counted as its name, description and format")
            )
    return chunks


def _read_fields(request: Mapping[str, Any], estimated: list[tuple[Owner, str]]) -> list[tuple[Segment, ...]]:
    """Other fields the model reads and the provider bills: a structured-output schema and
    predicted output, counted as their text and never trimmed; both estimates (named in
    ``estimated``): how the schema is rendered is not published, and a prediction's tokens that
    are not used are billed as output, not input."""
    chunks: list[tuple[Segment, ...]] = []
    response_format = request.get("response_format")
    schema = response_format.get("json_schema") if isinstance(response_format, dict) else None
    if schema is not None:
        chunks.append(
            (Segment(json.dumps(schema, ensure_ascii=False, separators=(",", ":")), "response_format"),)
        )
        estimated.append(("response_format", "json_schema: counted as its JSON text"))
    prediction = request.get("prediction")
    content = prediction.get("content") if isinstance(prediction, dict) else None
    texts = (
        [content]
        if isinstance(content, str)
        else [p.get("text") for p in content or [] if isinstance(p, dict)]
    )
    predicted = [(Segment(t, "prediction"),) for t in texts if isinstance(t, str) and t]
    if predicted:
        estimated.append(("prediction", "predicted output: counted as input text"))
    chunks += predicted
    return chunks


def _laid_out(messages: Sequence[Any]) -> tuple[list[tuple[Any, int, int]], list[int]]:
    """The messages' components (:func:`.chat.split_messages`) and tool groups, shared by a fit's
    parse and its plan's apply (:func:`_remembered_layout`) while the list holds the same messages
    (a caller's own open memo may outlive a list's changes)."""
    held, layout, groups = _remembered_layout(messages)
    if len(held) == len(messages) and all(map(operator.is_, held, messages)):
        return layout, groups
    return _layout_of(messages)


def _layout_of(messages: Sequence[Any]) -> tuple[list[tuple[Any, int, int]], list[int]]:
    return split_messages(messages, is_system=_is_system, is_query=_is_query), _tool_groups(messages)


@per_fit_by_identity  # a fit lays its request out to parse it, and again to apply its plan
def _remembered_layout(messages: Sequence[Any]) -> tuple[list[Any], list[tuple[Any, int, int]], list[int]]:
    """:func:`_layout_of`, with the messages it was read from (held: their identities stay theirs)."""
    return [*messages], *_layout_of(messages)


class OpenAIFormat:
    """Chat Completions: ``{"model", "messages": [...], "tools": [...]}``."""

    name = "openai"

    def detect(self, request: Mapping[str, Any]) -> bool:
        """A ``messages`` body (:func:`.detection.is_openai`)."""
        return is_openai(request)

    def _layout(
        self, request: Mapping[str, Any], *, validate: bool = True
    ) -> tuple[list[Any], list[tuple[Any, int, int]], list[int]]:
        if validate:
            _validate(request)  # for its errors; the raw messages are used as given
        return list(request["messages"]), *_laid_out(request["messages"])

    def parse(self, request: Mapping[str, Any]) -> tuple[Item, ...]:
        """Items: leading system/developer messages, history, the final user message."""
        messages, layout, groups = self._layout(request)
        return items_from_messages(messages, layout, message_text, groups)

    def parse_and_render(self, request: Mapping[str, Any]) -> tuple[tuple[Item, ...], Rendering]:
        """:meth:`parse` and :meth:`render` with one validation."""
        messages, layout, groups = self._layout(request)
        return items_from_messages(messages, layout, message_text, groups), self._render(
            request, messages, layout
        )

    def render(self, request: Mapping[str, Any], *, trusted: bool = False) -> Rendering:
        """Each message's role and content are tokenized separately, as the API does."""
        messages, layout, _ = self._layout(request, validate=not trusted)
        return self._render(request, messages, layout)

    @staticmethod
    def _render(
        request: Mapping[str, Any], messages: list[Any], layout: list[tuple[Any, int, int]]
    ) -> Rendering:
        chunks: list[tuple[Segment, ...]] = []
        constants: list[tuple[Owner, int]] = [("framing", REPLY_PRIMING)]
        estimated: list[tuple[Owner, str]] = []
        for component, index, position in layout:
            message_chunks, constant = _message_chunks(messages[position], (component, index), estimated)
            chunks += message_chunks
            constants.append(((component, index), constant))
        tools = [t for t in request.get("tools") or [] if isinstance(t, dict)]
        # the deprecated `functions` are definitions too, read like tools
        tools += [
            {"function": f}
            for f in request.get("functions") or []
            if isinstance(f, dict) and isinstance(f.get("parameters") or {}, dict)
        ]
        tool_chunks, tool_constant = function_tool_chunks(tools, estimated)
        chunks += tool_chunks + _custom_tool_formats(tools, estimated) + _read_fields(request, estimated)
        if tool_constant:
            constants.append(("tools", tool_constant))
        functions = (("tools", len(tools)),) if tools else ()  # each opened by FUNC_INIT
        return Rendering(
            chunks=tuple(chunks), constants=tuple(constants), estimated=tuple(estimated), functions=functions
        )

    def apply(self, request: Mapping[str, Any], items: tuple[Item, ...], plan: Plan) -> dict[str, Any]:
        """New body with trimmed messages; every other field passes through untouched."""
        _, layout, _ = self._layout(request, validate=False)
        out = dict(request)
        out["messages"] = apply_history(request["messages"], layout, items, plan, with_content_text)
        return out
