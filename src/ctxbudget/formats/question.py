"""The seed's Question shape and its prompt rendering, reproduced exactly.

Rendering (CRLF = ``\\r\\n``): parts joined by CRLF, in this order, empty sections omitted:
the role followed by CRLF (so a blank line); ``### System Instructions:`` (the JSON-format
instruction first when ``expectJson``); ``### Examples:``; ``### Conversation History:``
(``    role: content``); ``### Context:``; ``### Documents:`` (``    Document i) Content: ...``);
``### Ultimate Goal:``; ``### Current Task:``; and a final empty part, so the text ends with CRLF.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import StrictBool, ValidationInfo, field_validator

from ..errors import InvalidRequestError
from ..items import PLACEHOLDER_TEMPLATE, Item, ItemKey, Owner, Plan, Rendering, Segment
from .detection import is_question
from .jsonvalue import check_json_value, json_kind
from .wire import OpenModel, validate_body

__all__ = ["QuestionFormat"]

CRLF = "\r\n"
JSON_INSTRUCTION = (
    "- Respond **only** with a fenced, valid JSON structure.\r\n"
    "- Properly escape all quotes within content strings.\r\n"
    "- No additional text, comments, or explanations.\r\n"
    "- Ensure your answer is strictly valid JSON format.\r\n"
    "- Double check the JSON response to ensure it is valid.\r\n"
    "- Enclose the json with ```json and ``` tags."
)


class _QuestionText(OpenModel):
    text: str


class _Document(OpenModel):
    page_content: str
    score: float | None = None
    metadata: dict[str, Any] | None = None  # copied onto each passage of a split document

    @field_validator("score", mode="before")
    @classmethod
    def _a_number(cls, score: Any) -> Any:
        """A number as JSON writes it: true or "0.95" read as one ranked a document first."""
        if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
            raise ValueError(f"a score is a number, got {json_kind(score)}")
        return score


class _History(OpenModel):
    role: str
    content: str


class _Instruction(OpenModel):
    subtitle: str
    instructions: str


class _Example(OpenModel):
    given: str
    result: str


class _Question(OpenModel):
    role: str = ""
    questions: list[_QuestionText] = []
    documents: list[_Document] = []
    history: list[_History] = []
    instructions: list[_Instruction] = []
    examples: list[_Example] = []
    context: list[str] = []
    goals: list[str] = []
    expectJson: StrictBool = False  # "yes" turned the JSON instruction on

    @field_validator("*", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any, info: ValidationInfo) -> Any:
        """The seed's Question declares these fields optional and renders a null as empty (its
        model_dump sends them as null): so do we."""
        if value is None and info.field_name is not None:
            return copy.copy(cls.model_fields[info.field_name].default)
        return value


def _section(header: str, body: list[list[Segment]], label: Owner) -> list[Segment]:
    """Header line, body lines, a blank line; joined by CRLF (CRLF owned by the line before)."""
    segments = [Segment(header, label)]
    for line in body:
        segments.append(Segment(CRLF, line[0].owner if line else label))
        segments.extend(line)
    segments.append(Segment(CRLF, label))
    return segments


def _instruction_lines(q: _Question) -> list[list[Segment]]:
    entries = [("JSON Response Format", JSON_INSTRUCTION)] if q.expectJson else []
    entries += [(i.subtitle, i.instructions) for i in q.instructions]
    lines: list[list[Segment]] = []
    for n, (subtitle, text) in enumerate(entries, 1):
        lines.append([Segment(f"    {n}) **{subtitle.strip()}**:", "instructions")])
        lines += [
            [Segment(f"        {ln.strip()}", "instructions")] for ln in text.splitlines() if ln.strip()
        ]
        lines.append([])
    return lines


def _example_lines(q: _Question) -> list[list[Segment]]:
    begin, end = ("```json" + CRLF, CRLF + "```") if q.expectJson else ("", "")
    lines: list[list[Segment]] = []
    for n, ex in enumerate(q.examples, 1):
        lines.append([Segment(f"    Example {n}", "examples")])
        lines.append([Segment(f"        **Given**: {ex.given.strip()}", "examples")])
        lines.append([Segment(f"        **Expected output**: {begin}{ex.result.strip()}{end}", "examples")])
    return lines


def _owned_line(prefix: str, text: str, owner: Owner) -> list[Segment]:
    return [Segment(prefix, owner), Segment(text, owner, content=True)]


def _render_parts(q: _Question) -> list[list[Segment]]:
    parts: list[list[Segment]] = []
    if q.role:
        parts.append([Segment(q.role, ("system", 0), content=True), Segment(CRLF, ("system", 0))])
    if instructions := _instruction_lines(q):
        # Each instruction already ends with its blank line, so the section adds none of its own.
        parts.append(_section("### System Instructions:", instructions, "instructions")[:-1])
    if q.examples:
        parts.append(_section("### Examples:", _example_lines(q), "examples"))
    if q.history:
        lines = [_owned_line(f"    {h.role}: ", h.content, ("history", i)) for i, h in enumerate(q.history)]
        parts.append(_section("### Conversation History:", lines, "markup"))
    if q.context:
        lines = []
        for n, ctx in enumerate(q.context, 1):
            lines += [[Segment(f"    {n}) {ctx.strip()}", "context")], []]
        parts.append(_section("### Context:", lines, "context"))
    if q.documents:
        lines = [
            _owned_line(f"    Document {n}) Content: ", d.page_content.strip(), ("documents", n - 1))
            for n, d in enumerate(q.documents, 1)
        ]
        parts.append(_section("### Documents:", lines, "markup"))
    if q.goals:
        lines = [[Segment(f"    {n}) {g.strip()}", "goals")] for n, g in enumerate(q.goals, 1)]
        parts.append(_section("### Ultimate Goal:", lines, "goals"))
    if q.questions:
        lines = [_owned_line("    ", t.text, ("query", i)) for i, t in enumerate(q.questions)]
        parts.append(_section("### Current Task:", lines, "markup"))
    parts.append([])
    return parts


def render_text(request: Mapping[str, Any]) -> str:
    """The seed engine's prompt text for a Question body, checked as :func:`ctxbudget.fit` checks
    it: a JSON object of JSON values (no lone surrogate, no NaN) with no field of another format
    (a chat body rendered as nothing)."""
    from . import resolve_format  # the package imports this module

    if not isinstance(request, Mapping):
        raise InvalidRequestError(f"the request body must be a JSON object, got {json_kind(request)}")
    check_json_value(request if type(request) is dict else dict(request))
    fmt = resolve_format(request, "question")
    return "".join(s.text for chunk in fmt.render(request).chunks for s in chunk)


def _documents_out(document: Mapping[str, Any], index: int, plan: Plan) -> list[dict[str, Any]]:
    """The document itself, or its selected passages: verbatim slices with offsets and citation."""
    regions = plan.document_slices.get(index)
    if regions is None:
        return [copy.deepcopy(dict(document))]
    text = str(document["page_content"])
    lead = len(text) - len(text.lstrip())
    out = []
    own = _callers_own(document.get("metadata") or {})
    for start, end, citation in regions:
        entry = copy.deepcopy(dict(document))
        entry["page_content"] = text[lead + start : lead + end]
        entry["metadata"] = {
            **(document.get("metadata") or {}),
            **own,
            "offsets": [lead + start, lead + end],
            "citation": citation,
            "passage_of": index,
        }
        out.append(entry)
    return out


def _callers_own(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The caller's own ``citation`` and ``offsets`` of a split document (a retriever's "Smith v.
    Jones, p. 4"), kept as ``document_citation`` and ``document_offsets``: a passage's own take
    those names, and the caller's were lost."""
    own = {}
    for key in ("citation", "offsets"):
        if f"document_{key}" in metadata:  # a passage split again: the document's is already kept
            own[f"document_{key}"] = copy.deepcopy(metadata[f"document_{key}"])
        elif key in metadata and "passage_of" not in metadata:
            own[f"document_{key}"] = copy.deepcopy(metadata[key])
    return own


class QuestionFormat:
    """``{"role", "questions", "documents", "history", "instructions", ...}`` -> one prompt text."""

    name = "question"

    def detect(self, request: Mapping[str, Any]) -> bool:
        """A body with ``questions`` or ``documents`` and no chat ``messages`` (:func:`.detection.is_question`)."""
        return is_question(request)

    def parse(self, request: Mapping[str, Any]) -> tuple[Item, ...]:
        """Items: the role, each question text, each document, each history message."""
        return self._items(validate_body(_Question, request))

    def parse_and_render(self, request: Mapping[str, Any]) -> tuple[tuple[Item, ...], Rendering]:
        """:meth:`parse` and :meth:`render` with one validation."""
        q = validate_body(_Question, request)
        return self._items(q), self._rendering(q)

    @staticmethod
    def _items(q: _Question) -> tuple[Item, ...]:
        items: list[Item] = []
        if q.role:
            items.append(Item(component="system", index=0, path="$.role", text=q.role))
        items += [
            Item(component="query", index=i, path=f"$.questions[{i}].text", text=t.text)
            for i, t in enumerate(q.questions)
        ]
        items += [
            Item(
                component="documents",
                index=i,
                path=f"$.documents[{i}]",
                text=d.page_content.strip(),
                score=d.score,
                offset=len(d.page_content) - len(d.page_content.lstrip()),
            )
            for i, d in enumerate(q.documents)
        ]
        items += [
            Item(component="history", index=i, path=f"$.history[{i}]", text=h.content, role=h.role)
            for i, h in enumerate(q.history)
        ]
        return tuple(items)

    def render(self, request: Mapping[str, Any], *, trusted: bool = False) -> Rendering:
        """One chunk: the whole prompt text is tokenized as one string (validated even when
        ``trusted``: rendering reads the validated model)."""
        return self._rendering(validate_body(_Question, request))

    @staticmethod
    def _rendering(q: _Question) -> Rendering:
        segments: list[Segment] = []
        for n, part in enumerate(_render_parts(q)):
            if n:
                segments.append(Segment(CRLF, "markup"))
            segments.extend(part)
        return Rendering(chunks=(tuple(segments),))

    def apply(self, request: Mapping[str, Any], items: tuple[Item, ...], plan: Plan) -> dict[str, Any]:
        """New body: truncated role/questions, selected documents, trimmed history."""
        out = dict(request)
        by_key = {item.key: item for item in items}
        if ("system", 0) in by_key:
            out["role"] = plan.text_of(by_key[("system", 0)]) if plan.kept(("system", 0)) else ""
        if request.get("questions") is not None:
            out["questions"] = [
                {**entry, "text": plan.text_of(by_key[("query", i)])}
                for i, entry in enumerate(request["questions"])
            ]
        if request.get("documents") is not None:
            out["documents"] = [
                d for i in plan.document_order for d in _documents_out(request["documents"][i], i, plan)
            ]
        if request.get("history") is not None:
            out["history"] = self._history(request["history"], by_key, plan)
        return out

    @staticmethod
    def _history(history: list[dict[str, Any]], by_key: dict[Any, Item], plan: Plan) -> list[dict[str, Any]]:
        kept: list[dict[str, Any]] = []
        placeholder = {
            "role": "user",
            "content": PLACEHOLDER_TEMPLATE.format(omitted=plan.placeholder_omitted),
        }
        if plan.placeholder_after == -1:
            kept.append(placeholder)
        for i, message in enumerate(history):
            key: ItemKey = ("history", i)
            if plan.kept(key):
                kept.append({**message, "content": plan.text_of(by_key[key])})
            if plan.placeholder_after == i:
                kept.append(placeholder)
        return kept
