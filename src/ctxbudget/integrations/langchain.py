"""LangChain messages fitted into a token budget by ctxbudget's own counting and trimming rules.

:func:`trim_messages` takes and returns a list of ``langchain_core`` messages; :func:`fit_messages`
returns the same list with a :class:`MessagesReport`. The messages are converted to an OpenAI chat
body (one message may become more than one, as ``convert_to_openai_messages`` makes it), fitted by
:func:`ctxbudget.fit`, and the messages it kept are returned: the original objects, unchanged, in
order. A message is never cut: one the fit would cut is dropped whole, and a tool call with its
results is kept or dropped as one unit. The system messages, the latest human message and the
newest message or tool-call unit are always kept (as the fit keeps them); when they cannot fit
whole, :class:`ctxbudget.BudgetExceeded` is raised. For a Claude model the kept messages open on a
human message (system messages aside), as its API requires.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

try:
    from langchain_core.messages import BaseMessage, convert_to_openai_messages
    from langchain_core.prompt_values import PromptValue
except ImportError as exc:  # the optional extra is not installed
    raise ImportError(
        "ctxbudget.integrations.langchain needs langchain-core: pip install 'ctxbudget[langchain]'"
    ) from exc

from ..catalog.catalog import Catalog, catalog_of
from ..errors import BudgetExceeded, ConfigError, InvalidRequestError, UnknownModelError
from ..fitting import FitReport, ItemReport, count, fit
from ..formats import get_format
from ..items import Item

__all__ = ["FittedMessages", "MessagesReport", "fit_messages", "trim_messages"]

HINT = "shorten them, or give max_tokens= a larger value"


@dataclass(frozen=True, kw_only=True)
class MessagesReport:
    """What a fit of LangChain messages kept and dropped, by index in the list given.

    ``tokens_before`` / ``tokens_after`` count the whole request (framing included) as
    :func:`ctxbudget.count` does; ``exact`` is False when that count is an estimate (a model with
    no public tokenizer, or tool calls, whose framing OpenAI does not publish). ``available_tokens`` is ``max_tokens``, or the model's window (its input
    cap when it has one) when lower: a request over it could not be sent. ``reasons`` says why
    each dropped message was dropped; ``fit`` is the underlying fit's own report (its paths index
    the converted OpenAI messages).
    """

    model: str
    encoding: str
    exact: bool
    max_tokens: int
    available_tokens: int
    tokens_before: int
    tokens_after: int
    kept: tuple[int, ...]
    dropped: tuple[int, ...]
    reasons: Mapping[int, str]
    fit: FitReport


@dataclass(frozen=True)
class FittedMessages:
    """The kept messages (the objects given, in order) and the report."""

    messages: list[BaseMessage]
    report: MessagesReport


@dataclass(frozen=True)
class _Chat:
    """The messages as an OpenAI chat body: each converted message's owner (its index in the list
    given), the units kept or dropped together, and the units that are always kept."""

    model: str
    converted: tuple[dict[str, Any], ...]
    owner: tuple[int, ...]
    units: tuple[tuple[int, ...], ...]
    always: frozenset[tuple[int, ...]]
    # for each converted message whose content is a list: the index in the given message's content
    # of each of its parts (a HumanMessage's tool results become tool messages, the rest a user one)
    parts: tuple[tuple[int, ...] | None, ...] = ()

    def body(self, keep: set[int] | None = None) -> dict[str, Any]:
        """The chat body of the messages in ``keep`` (all when None)."""
        chosen = [m for m, i in zip(self.converted, self.owner, strict=True) if keep is None or i in keep]
        return {"model": self.model, "messages": chosen}


def trim_messages(
    messages: Sequence[BaseMessage] | PromptValue,
    *,
    model: str,
    max_tokens: int,
    catalog: Catalog | None = None,
) -> list[BaseMessage]:
    """The messages that fit ``max_tokens`` for ``model`` (see :func:`fit_messages`)."""
    return fit_messages(messages, model=model, max_tokens=max_tokens, catalog=catalog).messages


def fit_messages(
    messages: Sequence[BaseMessage] | PromptValue,
    *,
    model: str,
    max_tokens: int,
    catalog: Catalog | None = None,
) -> FittedMessages:
    """Fit ``messages`` into ``max_tokens`` input tokens of ``model``; returns the kept messages
    (the same objects, unchanged, in order) and a :class:`MessagesReport`.

    - ``messages``: LangChain messages, or a prompt value (a chat prompt template's output).
    - ``model``: an id the catalog resolves (dated ids and provider prefixes too); an unknown id
      raises :class:`ctxbudget.UnknownModelError`.
    - ``max_tokens``: the input budget, the whole request counted (roles, tool calls, images).
    - ``catalog``: models and tokenizers (default: the bundled catalog).

    Raises :class:`ctxbudget.BudgetExceeded` when the messages that are always kept (system, the
    latest human message, the newest message or tool-call unit) cannot fit whole.
    """
    # the model's window (or input cap) bounds the budget, as the transports and the gateway do: a
    # request over it cannot be sent (its whole window, since no output is reserved here)
    limit = min(_check_max_tokens(max_tokens), _check_model(model, catalog))
    if isinstance(messages, PromptValue):  # what a prompt template hands on in a chain
        messages = messages.to_messages()
    chat = _chat_of(messages, model)
    try:
        fitted = fit(
            chat.body(),
            model=model,
            max_context_tokens=limit,
            reserve_output_tokens=0,
            input_format="openai",
            catalog=catalog,
            count_all=True,  # tokens_before counts the whole request, as documented
        )
    except BudgetExceeded as exc:  # what is always kept is sent whole here: counted whole, as _within does
        kept = {i for unit in chat.always for i in unit}
        raise _too_large(chat, kept, _tokens(chat, kept, catalog), exc.available_tokens, catalog) from None
    except InvalidRequestError as exc:  # named by the message given, not the converted one
        raise InvalidRequestError(exc.reason, _given_path(exc.path, chat)) from None
    report = fitted.report
    keep, reasons = _kept_by_fit(chat, report)
    keep = _within(chat, keep, reasons, report.available_tokens, catalog)
    if _is_claude(model, catalog):
        keep = _opening_on_human(messages, chat, keep, reasons)
    return FittedMessages(
        [m for i, m in enumerate(messages) if i in keep],
        MessagesReport(
            model=model,
            encoding=report.encoding,
            exact=report.exact,
            max_tokens=max_tokens,
            available_tokens=report.available_tokens,
            tokens_before=report.tokens_before,
            tokens_after=_tokens(chat, keep, catalog),
            kept=tuple(sorted(keep)),
            dropped=tuple(i for i in range(len(messages)) if i not in keep),
            reasons={i: reasons[i] for i in sorted(reasons) if i not in keep},
            fit=report,
        ),
    )


def _check_model(model: str, catalog: Catalog | None) -> int:
    """The model's input limit (its window, or its input cap below it). An id the catalog cannot
    resolve is refused before anything is fitted, with the way out this function takes (a
    catalog: it has no window or floor option to give)."""
    try:
        return catalog_of(catalog).resolve_window(model).input_limit
    except UnknownModelError as exc:
        raise UnknownModelError(exc.model_id, exc.closest, windowed=False, problem=exc.problem) from None


def _check_max_tokens(max_tokens: object) -> int:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ConfigError(f"max_tokens must be a positive int, got {max_tokens!r}")
    return max_tokens


def _chat_of(messages: Sequence[BaseMessage], model: str) -> _Chat:
    """The messages converted (checked to be LangChain messages), with their units."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidRequestError(f"messages must be a list of BaseMessage, got {type(messages).__name__}")
    if not messages:
        raise InvalidRequestError("there are no messages to fit", "messages")
    converted: list[dict[str, Any]] = []
    owner: list[int] = []
    parts: list[tuple[int, ...] | None] = []
    for i, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            raise InvalidRequestError(
                f"expected a langchain_core BaseMessage, got {type(message).__name__}", f"messages[{i}]"
            )
        try:
            dicts = convert_to_openai_messages([message])
        except (ValueError, TypeError, KeyError) as exc:
            raise InvalidRequestError(f"cannot convert the message: {exc}", f"messages[{i}]") from exc
        if not dicts:
            raise InvalidRequestError("the message converts to no chat message", f"messages[{i}]")
        converted.extend(dicts)
        owner.extend([i] * len(dicts))
        parts.extend(_given_parts(message, d) for d in dicts)
    chat = _Chat(model, tuple(converted), tuple(owner), (), frozenset(), tuple(parts))
    try:
        items = get_format("openai").parse(chat.body())
    except InvalidRequestError as exc:  # named by the message given, not the converted one
        raise InvalidRequestError(exc.reason, _given_path(exc.path, chat)) from None
    units = _units(items, chat.owner)
    return _Chat(model, chat.converted, chat.owner, units, _always(items, chat.owner, units), chat.parts)


def _position(item: Item) -> int:
    """The converted message an item is (its path is ``$.messages[j]``)."""
    return int(item.path.rsplit("[", 1)[1].rstrip("]"))


def _units(items: Sequence[Item], owner: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Original messages kept or dropped together: a tool call with its results (the fit's groups
    span the messages from the call to its last result), and the messages one original became."""
    spans: dict[int, tuple[int, int]] = {}
    for item in items:
        i = owner[_position(item)]
        low, high = spans.get(item.group, (i, i))
        spans[item.group] = (min(low, i), max(high, i))
    units: list[list[int]] = []
    for low, high in sorted(spans.values()):
        if units and low <= units[-1][-1]:
            units[-1].extend(range(units[-1][-1] + 1, high + 1))
        else:
            units.append(list(range(low, high + 1)))
    return tuple(tuple(u) for u in units)


def _always(
    items: Sequence[Item], owner: Sequence[int], units: Sequence[tuple[int, ...]]
) -> frozenset[tuple[int, ...]]:
    """The units the fit always keeps: system messages, the query, the newest history unit."""
    history = [it for it in items if it.component == "history"]
    newest = {it.group for it in history[-1:]}
    needed = {
        owner[_position(it)]
        for it in items
        if it.component in ("system", "query") or (it.component == "history" and it.group in newest)
    }
    return frozenset(u for u in units if needed & set(u))


def _kept_by_fit(chat: _Chat, report: FitReport) -> tuple[set[int], dict[int, str]]:
    """The units the fit kept whole, and why each other message was dropped."""
    decided = {_path_index(i.path): i for i in report.items}
    keep: set[int] = set()
    reasons: dict[int, str] = {}
    positions: dict[int, list[int]] = {}
    for j, i in enumerate(chat.owner):
        positions.setdefault(i, []).append(j)
    for unit in chat.units:
        changed = [decided[j] for i in unit for j in positions[i] if j in decided]
        changed = [d for d in changed if d.action != "kept"]
        if unit in chat.always or not changed:
            keep.update(unit)
            continue
        cut = next((d for d in changed if d.action == "truncated"), None)
        why = f"the fit cuts it ({cut.reason}): dropped whole" if cut else _left_out(changed[0])
        reasons.update(dict.fromkeys(unit, why if len(unit) == 1 else f"{why}, with its tool-call unit"))
    return keep, reasons


def _is_claude(model: str, catalog: Catalog | None) -> bool:
    """Whether ``model`` is a Claude model (Anthropic's, or a host's: Bedrock, Vertex)."""
    spec = catalog_of(catalog).resolve_window(model).spec
    return spec is not None and (spec.provider == "anthropic" or "claude" in spec.id.lower())


_OPENS_ON_HUMAN = (
    "Claude's conversation opens with a human message (the API refuses one whose first message is "
    "the assistant's): dropped with the older messages the fit left out"
)


def _opening_on_human(
    messages: Sequence[BaseMessage], chat: _Chat, keep: set[int], reasons: dict[int, str]
) -> set[int]:
    """``keep`` less the units that would open the conversation before its first human message
    (system messages aside: Claude takes them apart): an AI message, or a tool call with its
    results, whose human turn the fit left out, even the newest history unit, which is otherwise
    always kept. LangChain's own ``trim_messages`` has ``start_on="human"`` for this; a Claude
    model always needs it."""
    # told by the roles a message converts to, not its ``type``: a HumanMessageChunk's is
    # "HumanMessageChunk", a ChatMessage's "chat" (role "user" or "system"); read by ``type``, the
    # latest human message was dropped and only the system messages were left
    roles: dict[int, list[str]] = {}  # one pass: asked of each message, _roles read them all (n^2)
    for converted, owner in zip(chat.converted, chat.owner, strict=True):
        roles.setdefault(owner, []).append(converted["role"])
    kept = set(keep)
    opening = [u for u in chat.units if kept & set(u) and not all(_is_system(roles[i]) for i in u)]
    if not any(_is_human(messages[u[0]], roles[u[0]]) for u in opening):
        return kept  # no human message to open on: nothing dropped for it (the newest stays)
    for unit in opening:
        if _is_human(messages[unit[0]], roles[unit[0]]):
            break
        kept -= set(unit)
        reasons.update(dict.fromkeys(unit, _OPENS_ON_HUMAN))
    return kept


def _is_system(roles: Sequence[str]) -> bool:
    return all(role in ("system", "developer") for role in roles)


def _is_human(message: BaseMessage, roles: Sequence[str]) -> bool:
    return message.type == "human" or "user" in roles


def _left_out(decision: ItemReport) -> str:
    if decision.action == "summarized":  # the fit's placeholder is not added to LangChain messages
        return "the fit leaves out the middle of the history"
    return f"the fit drops it ({decision.reason})"


def _path_index(path: str) -> int:
    match = re.fullmatch(r"\$\.messages\[(\d+)\]", path)
    return int(match.group(1)) if match else -1


def _tokens(chat: _Chat, keep: set[int], catalog: Catalog | None) -> int:
    body = chat.body(keep)
    if not body["messages"]:
        return 0
    return int(count(body, model=chat.model, input_format="openai", catalog=catalog)["tokens"])


def _within(
    chat: _Chat, keep: set[int], reasons: dict[int, str], limit: int, catalog: Catalog | None
) -> set[int]:
    """``keep`` counted; while over ``limit`` (the always-kept messages were cut by the fit and are
    now whole), the oldest units that may go are dropped: as few as bring it within ``limit``,
    found by bisection (a body's count only falls as messages go; dropping one unit at a time
    and recounting after each was quadratic: 8,000 messages took 15 s). Raises when only the
    always-kept ones are left and still over."""
    optional = [u for u in chat.units if keep & set(u) and u not in chat.always]

    def without(units: int) -> set[int]:
        return keep.difference(*(set(u) for u in optional[:units]))

    tokens = _tokens(chat, keep, catalog)
    if tokens <= limit:
        return set(keep)
    least = _tokens(chat, without(len(optional)), catalog)
    if least > limit:
        raise _too_large(chat, without(len(optional)), least, limit, catalog)
    low, high = 1, len(optional)  # dropping ``high`` units is within the limit, ``low - 1`` is not
    while low < high:
        middle = (low + high) // 2
        if _tokens(chat, without(middle), catalog) <= limit:
            high = middle
        else:
            low = middle + 1
    for unit in optional[:high]:
        reasons.update(dict.fromkeys(unit, "dropped to keep the messages that are always kept whole"))
    return without(high)


def _too_large(
    chat: _Chat, keep: set[int], tokens: int, limit: int, catalog: Catalog | None
) -> BudgetExceeded:
    """The refusal: each message kept by its share of ``tokens`` (named by the roles it converts
    to), and the body's own framing once, so that the parts add up to ``tokens``."""
    alone = {i: _tokens(chat, {i}, catalog) for i in sorted(keep)}
    # each body counted alone carries the reply priming once more than they do together
    priming = (sum(alone.values()) - tokens) // (len(alone) - 1) if len(alone) > 1 else 0
    parts = {f"messages[{i}] ({_roles(chat, i)})": n - priming for i, n in alone.items()}
    # the body's own framing once, and what an estimate's rounding of each count leaves: the
    # parts add up to ``tokens`` (a Claude refusal's parts came to 91 for a need of 90)
    framing = tokens - sum(parts.values())
    if framing < 0:  # rounding over the priming: taken off the largest message's share
        largest = max(parts, key=lambda name: parts[name])
        parts[largest] += framing
    elif framing:
        parts["framing"] = framing
    return BudgetExceeded(available_tokens=limit, required_tokens=tokens, parts=parts, hint=HINT)


def _roles(chat: _Chat, index: int) -> str:
    """The roles the message given at ``index`` became (a human message holding tool results
    becomes tool messages and a user message)."""
    roles = [m["role"] for m, i in zip(chat.converted, chat.owner, strict=True) if i == index]
    return "+".join(dict.fromkeys(roles))


def _given_parts(message: BaseMessage, converted: Mapping[str, Any]) -> tuple[int, ...] | None:
    """Where each part of ``converted``'s content list stands in ``message``'s content: its parts
    that are not tool calls or results, in order (None when they do not line up one to one)."""
    given, content = message.content, converted.get("content")
    if not (isinstance(given, list) and isinstance(content, list)):
        return None
    kept = tuple(
        i
        for i, p in enumerate(given)
        if not (isinstance(p, dict) and p.get("type") in ("tool_result", "tool_use"))
    )
    return kept if len(kept) == len(content) else None


def _given_path(path: str, chat: _Chat) -> str:
    """A JSON path into the converted body (``$.messages[4].content[1]``) as the message given it
    names (``messages[2].content[3]``: a block's index in the content given, when it is known)."""
    found = re.match(r"\$\.messages\[(\d+)\]\.content\[(\d+)\]", path)
    if found and int(found.group(1)) < len(chat.parts):
        known = chat.parts[int(found.group(1))]
        part = int(found.group(2))
        if known is not None and part < len(known):
            path = f"{path[: found.start(2)]}{known[part]}{path[found.end(2) :]}"
    return re.sub(r"\$\.messages\[(\d+)\]", lambda m: f"messages[{chat.owner[int(m.group(1))]}]", path)
