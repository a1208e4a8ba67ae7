"""OpenAI Responses bodies: ``{"model", "instructions", "input", "tools", "max_output_tokens", ...}``.

``input`` is a string (the user's turn) or a list of items. The components are those of a chat
body: ``instructions`` and the system and developer messages of the list are the system prompt
(never trimmed unless budgeted), the latest user message is the query, every other item is
history. A ``function_call`` and its ``function_call_output`` (same ``call_id``) are one unit,
kept or dropped together, and a ``reasoning`` item goes with the item after it. A string input
stays a string.

``previous_response_id`` passes through untouched: the conversation it points to is stored by
OpenAI, outside the request, so it can be neither counted nor trimmed; a body that names one is
counted as an estimate that says so. How items are counted: :mod:`.responses_items`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import field_validator, model_validator

from ..items import Component, Item, ItemKey, Owner, Plan, Rendering, Segment
from .chat import apply_history, split_messages
from .detection import is_responses
from .openai import REPLY_PRIMING, function_tool_chunks
from .openai_wire import FunctionParameters
from .responses_items import (
    STORED_CONVERSATION,
    TOKENS_PER_ITEM,
    call_groups,
    continues_stored,
    is_message,
    item_chunks,
    item_text,
    part_estimate,
    with_item_text,
)
from .wire import OpenModel, validate_body

__all__ = ["ResponsesFormat"]

Layout = list[tuple[Component, int, int]]
INSTRUCTIONS: ItemKey = ("system", 0)
FRAMING_ESTIMATE = "the Chat Completions recipe (OpenAI publishes none for the Responses API)"


class _Part(OpenModel):
    type: str
    text: str | None = None

    @model_validator(mode="after")
    def _text_has_text(self) -> _Part:
        if self.type in ("input_text", "output_text") and self.text is None:
            raise ValueError(f"an {self.type} part needs a string `text`")
        return self


class _InputItem(OpenModel):
    type: str | None = None
    role: Literal["user", "assistant", "system", "developer"] | None = None
    content: str | list[_Part] | None = None
    call_id: str | None = None
    name: str | None = None
    # a function call's arguments are a string; other calls' (a tool_search_call's) may be objects
    arguments: Any = None
    # a function call's output is text or parts; other calls' outputs are their own (a
    # computer_call_output's screenshot, a shell_call_output's list of stdout/stderr objects)
    output: Any = None
    summary: list[dict[str, Any]] | None = None  # a reasoning item's

    @model_validator(mode="after")
    def _complete(self) -> _InputItem:
        reference = (
            self.type is None
            and self.role is None
            and self.content is None
            and "id" in (self.model_extra or {})
        )
        if self.type in (None, "message") and (self.role is None or self.content is None) and not reference:
            raise ValueError("a message needs a `role` and a `content` (an item reference, an `id`)")
        if self.type == "function_call" and (self.call_id is None or self.name is None):
            raise ValueError("a function_call needs a `call_id` and a `name`")
        if self.type == "function_call" and not isinstance(self.arguments, str | None):
            raise ValueError("a function_call's `arguments` is a string")
        if self.type == "function_call_output":
            _check_function_output(self.call_id, self.output)
        return self


def _check_function_output(call_id: str | None, output: Any) -> None:
    """A function call's output: its call, and text or a list of parts."""
    if call_id is None or output is None:
        raise ValueError("a function_call_output needs a `call_id` and an `output`")
    if isinstance(output, list):
        for i, part in enumerate(output):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise ValueError(f"a function_call_output's `output[{i}]` is a part with a string `type`")
            if part["type"] in ("input_text", "output_text") and not isinstance(part.get("text"), str):
                raise ValueError(
                    f"a function_call_output's `output[{i}]`, an {part['type']} part, needs a string `text`"
                )
    elif not isinstance(output, str):
        raise ValueError("a function_call_output's `output` is a string or a list of parts")


class _Tool(OpenModel):
    type: str
    name: str | None = None
    description: str | None = None
    parameters: FunctionParameters | None = None


class _Body(OpenModel):
    # absent when a stored prompt (``prompt``) or a previous response supplies the input
    input: str | list[_InputItem] | None = None
    instructions: str | list[dict[str, Any]] | None = None
    tools: list[_Tool] | None = None
    previous_response_id: str | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _string_or_items(cls, value: Any) -> Any:
        if not isinstance(value, str | list):
            raise ValueError("must be a string or a list of items")
        return value

    @model_validator(mode="after")
    def _has_input(self) -> _Body:
        if (
            self.input is None
            and not (self.model_extra or {}).get("prompt")
            and not self.previous_response_id
        ):
            raise ValueError(
                "a body needs an `input`, unless a stored `prompt` or `previous_response_id` supplies it"
            )
        return self


def _is_system(item: Mapping[str, Any]) -> bool:
    return is_message(item) and item.get("role") in ("system", "developer")


def _is_query(item: Mapping[str, Any]) -> bool:
    return is_message(item) and item.get("role") == "user"


def _input_items(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The input as a list of items: a string input is one user message."""
    given = request.get("input")
    if given is None:  # a stored prompt supplies it
        return []
    return [{"role": "user", "content": given}] if isinstance(given, str) else list(given)


def _has_instructions(request: Mapping[str, Any]) -> bool:
    return isinstance(request.get("instructions"), str) and bool(request["instructions"])


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _tool_chunks(
    request: Mapping[str, Any], estimated: list[tuple[Owner, str]]
) -> tuple[list[Any], int, int]:
    """Function tools by the cookbook's recipe; built-in tools (web search, file search, ...) as
    their JSON text, an estimate: the provider adds instructions of its own for them."""
    tools = [t for t in request.get("tools") or [] if isinstance(t, dict)]
    functions = [{"function": t} for t in tools if t.get("type") == "function"]
    chunks, constant = function_tool_chunks(functions, estimated)
    for tool in tools:
        if tool.get("type") != "function":
            chunks.append((Segment(_json(tool), "tools"),))
            estimated.append(("tools", f"built-in tool {tool.get('type')!s}: counted as its JSON text"))
    return chunks, constant, len(functions)


def _read_fields(request: Mapping[str, Any], estimated: list[tuple[Owner, str]]) -> tuple[list[Any], int]:
    """What else is read as input: a structured-output format, instructions given as items, and
    the stored conversation of ``previous_response_id`` (named, not counted)."""
    chunks: list[Any] = []
    text = request.get("text")
    form = text.get("format") if isinstance(text, dict) else None
    if isinstance(form, dict) and form.get("type") == "json_schema":
        chunks.append((Segment(_json(form), "text.format"),))
        # as Chat Completions' response_format: how the schema is rendered is not published
        estimated.append(("text.format", "json_schema: counted as its JSON text"))
    if isinstance(request.get("instructions"), list):
        chunks.append((Segment(_json(request["instructions"]), "instructions"),))
    for field in STORED_CONVERSATION:
        if request.get(field):
            how = "the stored conversation it continues is outside the request: not counted"
            estimated.append((field, how))
    prompt = request.get("prompt")
    images = 0
    if isinstance(prompt, dict):
        variables, images = _prompt_variables(prompt.get("variables"), estimated)
        chunks += variables
        how = (
            "the stored prompt template is outside the request: not counted (its variables are, as JSON text)"
        )
        estimated.append(("prompt", how))
    return chunks, images


def _prompt_variables(variables: Any, estimated: list[tuple[Owner, str]]) -> tuple[list[Any], int]:
    """A stored prompt's variables as their JSON text, but an image variable (an ``input_image``
    part) by OpenAI's tile rule, its base64 not being what is billed: the text's chunks, and the
    images' tokens."""
    if not variables:
        return [], 0
    images = {
        name: part
        for name, part in (variables.items() if isinstance(variables, dict) else [])
        if isinstance(part, dict) and part.get("type") == "input_image"
    }
    rest = {k: v for k, v in variables.items() if k not in images} if images else variables
    tokens = 0
    for name, part in images.items():
        estimate = part_estimate(part)
        tokens += estimate.tokens
        estimated.append(("prompt", f"variable {name}: {estimate.how}: {estimate.tokens:,} tokens"))
    return ([(Segment(_json(rest), "prompt"),)] if rest else []), tokens


class ResponsesFormat:
    """Responses API: ``{"model", "instructions", "input": str | [...], "tools": [...]}``."""

    name = "responses"

    def detect(self, request: Mapping[str, Any]) -> bool:
        """An ``input`` body (a string or a list) with no chat ``messages`` (:func:`.detection.is_responses`)."""
        return is_responses(request)

    def _layout(
        self, request: Mapping[str, Any], *, validate: bool = True
    ) -> tuple[list[dict[str, Any]], Layout, list[int]]:
        """The input items, their components (the system indexes after the instructions'), groups."""
        if validate:
            validate_body(_Body, request)
        items = _input_items(request)
        layout = split_messages(items, is_system=_is_system, is_query=_is_query)
        if _has_instructions(request):
            layout = [(c, i + 1 if c == "system" else i, p) for c, i, p in layout]
        return items, layout, call_groups(items, continues=continues_stored(request))

    def parse(self, request: Mapping[str, Any]) -> tuple[Item, ...]:
        """Items: the instructions, the input's system messages, history, the latest user message."""
        items, layout, groups = self._layout(request)
        return self._items(request, items, layout, groups)

    @staticmethod
    def _items(
        request: Mapping[str, Any], items: list[dict[str, Any]], layout: Layout, groups: list[int]
    ) -> tuple[Item, ...]:
        out: list[Item] = []
        if _has_instructions(request):
            out.append(Item(component="system", index=0, path="$.instructions", text=request["instructions"]))
        single = isinstance(request.get("input"), str)
        for component, index, position in layout:
            item = items[position]
            out.append(
                Item(
                    component=component,
                    index=index,
                    path="$.input" if single else f"$.input[{position}]",
                    text=item_text(item),
                    role=str(item.get("role") or item.get("type") or ""),
                    group=groups[position],
                )
            )
        return tuple(out)

    def parse_and_render(self, request: Mapping[str, Any]) -> tuple[tuple[Item, ...], Rendering]:
        """:meth:`parse` and :meth:`render` with one validation."""
        items, layout, groups = self._layout(request)
        return self._items(request, items, layout, groups), self._render(request, items, layout)

    def render(self, request: Mapping[str, Any], *, trusted: bool = False) -> Rendering:
        """Each item's texts tokenized separately, with per-item framing (see the module docstring)."""
        items, layout, _ = self._layout(request, validate=not trusted)
        return self._render(request, items, layout)

    @staticmethod
    def _render(request: Mapping[str, Any], items: list[dict[str, Any]], layout: Layout) -> Rendering:
        # OpenAI publishes no counting recipe for the Responses API: its items are framed by the
        # Chat Completions one, so no Responses count is called exact (docs/responses.md).
        chunks: list[tuple[Segment, ...]] = []
        constants: list[tuple[Owner, int]] = [("framing", REPLY_PRIMING)]
        estimated: list[tuple[Owner, str]] = [("framing", FRAMING_ESTIMATE)]
        if _has_instructions(request):  # read as a developer message ahead of the input
            chunks += [
                (Segment("developer", INSTRUCTIONS),),
                (Segment(request["instructions"], INSTRUCTIONS, True),),
            ]
            constants.append((INSTRUCTIONS, TOKENS_PER_ITEM))
        for component, index, position in layout:
            item_chunks_, constant = item_chunks(items[position], (component, index), estimated)
            chunks += item_chunks_
            constants.append(((component, index), constant))
        tool_chunks, tool_constant, functions = _tool_chunks(request, estimated)
        read, images = _read_fields(request, estimated)
        chunks += tool_chunks + read
        if tool_constant:
            constants.append(("tools", tool_constant))
        if images:
            constants.append(("prompt", images))
        return Rendering(
            chunks=tuple(chunks),
            constants=tuple(constants),
            estimated=tuple(estimated),
            functions=(("tools", functions),) if functions else (),
        )

    def apply(self, request: Mapping[str, Any], items: tuple[Item, ...], plan: Plan) -> dict[str, Any]:
        """New body with trimmed input (a string input stays a string) and, when budgeted, trimmed
        instructions; every other field (``previous_response_id`` too) passes through untouched."""
        inputs, layout, _ = self._layout(request, validate=False)
        out = copy.copy(dict(request))
        if _has_instructions(request) and INSTRUCTIONS in plan.decisions:
            instructions = next(i for i in items if i.key == INSTRUCTIONS)
            if plan.kept(INSTRUCTIONS):
                out["instructions"] = plan.text_of(instructions)
            else:
                del out["instructions"]
        kept = apply_history(inputs, layout, items, plan, with_item_text)
        if isinstance(request.get("input"), str):
            out["input"] = str(kept[0].get("content", "")) if kept else ""
        elif "input" in request:
            out["input"] = kept
        return out
