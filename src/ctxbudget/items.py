"""The shape every request format is reduced to, so one fitter serves them all.

A format parses its body into :class:`Item` values (the four budgeted components), renders a
body into a :class:`Rendering` (the exact text the provider will tokenize, split into segments
that each belong to an item or to a named fixed part), and rebuilds a body from a :class:`Plan`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

__all__ = [
    "COMPONENTS",
    "GAP",
    "JOINER",
    "JOINER_TOKENS",
    "MESSAGE_FRAMING_TOKENS",
    "PIECE_SEP",
    "PLACEHOLDER_TEMPLATE",
    "Component",
    "Cut",
    "Decision",
    "Item",
    "ItemKey",
    "Plan",
    "Rendering",
    "RequestFormat",
    "Segment",
]

Component = Literal["system", "query", "documents", "history"]
COMPONENTS: tuple[Component, ...] = ("system", "query", "documents", "history")
ItemKey = tuple[Component, int]
Owner = ItemKey | str
_new = object.__new__
PLACEHOLDER_TEMPLATE = "[Earlier conversation summarized: {omitted} messages omitted]"
# Where a cut left text out of a message, between the passages that were kept.
GAP = "\n[…]\n"
# A message with several texts (tool results, text blocks) is read as one text, its pieces joined
# by this; each piece is cut in its own place.
PIECE_SEP = "\n\n"
# Kept regions, and the items of one system block, are joined by a blank line: the tokens it costs
# (two newlines merge into one token in most encodings; two is the safe bound).
JOINER = "\n\n"
JOINER_TOKENS = 2
# What one chat message costs beyond its text when a budget is planned before rendering (role and
# delimiters; the rendered request is then measured exactly).
MESSAGE_FRAMING_TOKENS = 4


@dataclass(frozen=True, kw_only=True)
class Item:
    """One budgeted unit: the system prompt, a query entry, a document or a history message."""

    component: Component
    index: int
    path: str
    text: str
    role: str = ""
    score: float | None = None
    group: int = -1
    # Where ``text`` starts in the field it was read from (a document's leading blanks, which its
    # text leaves out): passages' character citations count from the field, as their offsets do.
    offset: int = 0
    # (component, index): how plans and renderings refer to the item. Read for every decision and
    # report line, so built with the item (a cached property's first read cost twice as much).
    key: ItemKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (self.component, self.index))

    @classmethod
    def of_message(
        cls, component: Component, index: int, path: str, text: str, role: str, group: int
    ) -> Item:
        """The item of a chat message, made as ``Item(...)`` makes it, without the keyword
        ``__init__`` that sets each field of a frozen dataclass through ``object.__setattr__``:
        1.2 against 3.4 us, one item a message (2,000 for a long history). The suite checks it
        sets every field the dataclass has."""
        made = _new(cls)
        made.__dict__.update(
            component=component,
            index=index,
            path=path,
            text=text,
            role=role,
            score=None,
            group=group,
            offset=0,
            key=(component, index),
        )
        return made


class Segment(NamedTuple):
    """A piece of rendered text; ``content`` marks the item's trimmable text itself. A named
    tuple: a rendering makes two a chat message (4,000 for a 2,000-message history), at about half
    a frozen dataclass's cost (0.17 against 0.31 us)."""

    text: str
    owner: Owner
    content: bool = False


# OpenAI's function-definition recipe (the cookbook's ``num_tokens_for_tools``) opens each function
# with 7 tokens for o200k models and 10 for cl100k ones (gpt-4, gpt-3.5-turbo): what a rendering's
# ``functions`` add, by encoding, to the 7 its constants hold.
FUNCTION_INIT_EXTRA = {"cl100k_base": 3}


@dataclass(frozen=True)
class Rendering:
    """What the provider tokenizes: chunks encoded independently, plus fixed framing tokens."""

    chunks: tuple[tuple[Segment, ...], ...]
    constants: tuple[tuple[Owner, int], ...] = ()
    # Parts counted by an estimate rather than a tokenizer (images, documents): (owner, how).
    estimated: tuple[tuple[Owner, str], ...] = ()
    # Function definitions by owner, whose opening constant depends on the encoding.
    functions: tuple[tuple[Owner, int], ...] = ()

    def constants_for(self, encoding_name: str) -> tuple[tuple[Owner, int], ...]:
        """The fixed tokens under ``encoding_name``: :attr:`constants`, and the functions'
        opening tokens beyond the 7 they hold (:data:`FUNCTION_INIT_EXTRA`)."""
        extra = FUNCTION_INIT_EXTRA.get(encoding_name, 0)
        if not extra or not self.functions:
            return self.constants
        return (*self.constants, *((owner, n * extra) for owner, n in self.functions))


Action = Literal["kept", "truncated", "dropped", "summarized"]


@dataclass(frozen=True)
class Decision:
    """What happens to one item; ``text`` is the new text when truncated; ``tokens`` what the
    item still costs when the decision knows it better than ``text`` can say (a document split
    into passages: the passages and their framing, as its budget charged them); ``pieces`` the
    new text of each of a message's texts when it has several (a tool_result per tool call)."""

    action: Action
    reason: str
    text: str | None = None
    tokens: int | None = None
    pieces: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cut:
    """An item's text after a cut: as one text, piece by piece when it has several (else ()), and
    what the item costs after (framing included)."""

    text: str
    pieces: tuple[str, ...]
    tokens: int


@dataclass(frozen=True)
class HistoryCut:
    """Where a history cut in steps keeps its messages from: the index of the first history
    message kept after the placeholder, and the sha256 of every message before it (so a cut is
    held only for the same conversation)."""

    index: int
    sha256: str
    # Whether the history's first unit is kept before the placeholder (None: not said, as in a
    # cut written before this was recorded): a held cut keeps it as it was, whatever the budget.
    first_kept: bool | None = None
    # A kept run that opens with a unit too large for any cut's room (a tool result, a pasted
    # document): the tokens that unit is cut to, and the question it was cut against, so that
    # the turns holding the cut cut it the same (None: the run's units are whole).
    budget: int | None = None
    query: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """As a report gives it (and as ``fit(previous_cut=...)`` takes it back)."""
        out: dict[str, Any] = {"index": self.index, "sha256": self.sha256}
        if self.first_kept is not None:
            out["first_kept"] = self.first_kept
        if self.budget is not None:
            out |= {"budget": self.budget, "query": self.query or ""}
        return out

    @classmethod
    def of(cls, value: Any) -> HistoryCut | None:
        """``value`` as a cut: a :class:`HistoryCut`, or a report's ``history_cut`` (a
        non-negative int ``index`` and a str ``sha256``, and with a ``budget``, a positive int, its
        ``query``, a str); None for anything else."""
        if isinstance(value, HistoryCut):
            return value
        if not isinstance(value, Mapping):
            return None
        index, digest, first = value.get("index"), value.get("sha256"), value.get("first_kept")
        if type(index) is not int or index < 0 or not isinstance(digest, str):
            return None
        budget, query = value.get("budget"), value.get("query")
        if budget is not None and (type(budget) is not int or budget <= 0 or not isinstance(query, str)):
            return None  # a cut unit whose size or question is not one: no cut to hold
        return cls(index, digest, first if isinstance(first, bool) else None, budget, query)


@dataclass(frozen=True)
class Plan:
    """Decisions for every item, the output order of kept documents, and the history placeholder."""

    decisions: Mapping[ItemKey, Decision]
    document_order: tuple[int, ...] = ()
    placeholder_after: int | None = None
    placeholder_omitted: int = 0
    # A history cut in steps (see ``trim.steps``): where the kept run begins, for the next turn.
    history_cut: HistoryCut | None = None
    # Documents split into passages: index -> verbatim regions (start, end, citation) of its text.
    document_slices: Mapping[int, tuple[tuple[int, int, str], ...]] = field(default_factory=dict)

    def kept(self, key: ItemKey) -> bool:
        """Whether the item survives (kept or truncated)."""
        decision = self.decisions.get(key)
        return decision is None or decision.action in ("kept", "truncated")

    def text_of(self, item: Item) -> str:
        """The item's text after the plan."""
        decision = self.decisions.get(item.key)
        return decision.text if decision is not None and decision.text is not None else item.text

    def pieces_of(self, item: Item) -> tuple[str, ...]:
        """The new text of each of the item's pieces when a cut set them one by one, else ()."""
        decision = self.decisions.get(item.key)
        return decision.pieces if decision is not None else ()


class RequestFormat(Protocol):
    """A request shape at the boundary: detect, parse, render, rebuild."""

    name: str

    def detect(self, request: Mapping[str, Any]) -> bool:
        """Whether ``request`` looks like this format."""
        ...

    def parse(self, request: Mapping[str, Any]) -> tuple[Item, ...]:
        """Validate ``request`` and list its budgeted items; raises InvalidRequestError."""
        ...

    def render(self, request: Mapping[str, Any], *, trusted: bool = False) -> Rendering:
        """The exact text the provider will tokenize, owned segment by segment. ``trusted``: the
        body is one this format built (a fitted request), so its shape need not be validated again."""
        ...

    def parse_and_render(self, request: Mapping[str, Any]) -> tuple[tuple[Item, ...], Rendering]:
        """Both at once (a format may validate only once)."""
        ...

    def apply(self, request: Mapping[str, Any], items: tuple[Item, ...], plan: Plan) -> dict[str, Any]:
        """A new request with the plan applied; the input is not mutated; unknown fields stay."""
        ...
