"""INV-CTX-01, the pinned prefix: no volatile value in a ``never`` tier's items (checked on the
input), and the rendered pinned prefix byte-identical to the previous turn's unless the caller
allows a change (a new playbook version). A change fails closed with :class:`PinnedPrefixChanged`
naming the first differing byte and line and what most likely changed."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..cache import Block, prefix_hashes
from ..errors import InvalidRequestError, PinnedPrefixChanged, VolatileValueError
from ..volatile import find_volatile
from ._draft import Draft, Setup
from ._policy import Policy
from ._request import ContextRequest

__all__ = ["PinnedPrefix", "check_carried_tools", "check_pinned_items", "check_pinned_prefix"]


@dataclass(frozen=True)
class PinnedPrefix:
    """The pinned prefix as rendered, its hash, and INV-CTX-01's status against the previous turn."""

    text: str
    sha256: str
    status: str


def check_pinned_items(request: ContextRequest, policy: Policy) -> None:
    """Fail closed on the first volatile value (a date, an id, ...) in an item of a pinned tier."""
    for tier in policy.tiers:
        if tier.eviction != "never":
            continue
        for item in request.in_tier(tier):
            found = find_volatile(item.text, policy.volatile)
            if found:
                raise VolatileValueError(
                    item_id=item.id,
                    kind=found.kind,
                    value=found.value,
                    span=(found.start, found.end),
                    path=item.text_path,
                )


def check_carried_tools(tools: Sequence[Any], policy: Policy) -> None:
    """Fail closed on a volatile value in the tool definitions a chat body carries: the provider
    caches them ahead of the pinned tiers (Anthropic's prefix opens with its tools), so a value
    that changes there moves the whole cached prefix (INV-CTX-01)."""
    for n, tool in enumerate(tools):
        text = json.dumps(tool, ensure_ascii=False, sort_keys=True)
        found = find_volatile(text, policy.volatile)
        if found:
            raise VolatileValueError(
                item_id=str(tool.get("name", n)) if isinstance(tool, Mapping) else str(n),
                kind=found.kind,
                value=found.value,
                span=(found.start, found.end),
                path=f"$.tools[{n}]",
                what="tool definition",
                remedy="keep tool definitions the same every turn (a value that changes goes in the question)",
            )


def _first_difference(a: str, b: str) -> int:
    """The first differing character of ``a`` and ``b`` (the shorter one's length if none)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _prefix_changed(setup: Setup, old: str, new: str) -> PinnedPrefixChanged:
    """INV-CTX-01's error: the first differing byte and line, and the likely volatile value."""
    at = _first_difference(old, new)
    line = new[:at].count("\n") + 1
    before = old.split("\n")[line - 1] if line <= old.count("\n") + 1 else ""
    after = new.split("\n")[line - 1]
    start = new.rfind("\n", 0, at) + 1  # the line's start, in both texts (they agree up to ``at``)
    if before == after:  # the change is in the line's ending (a newline added or taken off): shown
        before, after = old[start : at + 2], new[start : at + 2]
    return PinnedPrefixChanged(
        offset=len(new[:at].encode("utf-8")),
        line=line,
        before=_around(before, at - start),
        after=_around(after, at - start),
        volatile=_what_changed(setup, old, new, before, after),
    )


def _around(line: str, at: int, width: int = 160) -> str:
    """``line`` as an error shows it: whole up to ``width`` characters, else the ``width`` around
    character ``at`` (where it differs), an ellipsis for what is left out before it."""
    if len(line) <= width:
        return line
    start = max(0, min(at - width // 3, len(line) - width))
    return ("…" if start else "") + line[start : start + width]


def _what_changed(setup: Setup, old: str, new: str, before: str, after: str) -> tuple[str, str] | None:
    """The kind and text of the change: text appended or removed at the end, whitespace only (line
    endings, trailing spaces), or the changed value on the line (its volatile kind if known)."""
    if "".join(old.split()) == "".join(new.split()):
        return ("whitespace (line endings or spaces)", _whitespace_change(old, new))
    if new.startswith(old):
        return ("appended text", new[len(old) :].strip()[:80])
    if old.startswith(new):
        return ("removed text", old[len(new) :].strip()[:80])
    changed = _changed_value(before, after)
    if not changed:
        return None
    found = find_volatile(changed, setup.policy.volatile)
    return (found.kind if found else "value", changed)


def _whitespace_change(old: str, new: str) -> str:
    """The whitespace that differs, from the first difference: the longer of the two texts' runs
    of blanks there (a space taken out: the old one's; a CR added: the new one's ``\\r\\n``)."""
    at = _first_difference(old, new)

    def blanks(text: str) -> str:
        rest = text[at : at + 20]
        return rest[: len(rest) - len(rest.lstrip())]

    return max(blanks(new), blanks(old), key=len)


def _changed_value(before: str, after: str) -> str:
    """The words of ``after`` that differ from ``before`` (common head and tail removed, widened
    to whole words): what most likely changes from turn to turn."""
    head = _first_difference(before, after)
    tail = 0
    while tail < min(len(before), len(after)) - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    start, end = head, len(after) - tail
    while start > 0 and not after[start - 1].isspace():
        start -= 1
    while end < len(after) and not after[end].isspace():
        end += 1
    return after[start:end].strip().strip(",.;:!?()[]{}\"'")[:80]


# Between two blocks of the pinned prefix: the provider caches blocks, so the same text split at
# another place is another prefix. One block (a policy's single pinned tier) reads as its text.
BLOCK_END = "\x00"


def _pinned_text(draft: Draft) -> str:
    """The text of the ``never`` tiers' blocks, in order, NUL between blocks: the pinned prefix."""
    never = {sel.tier.name for sel in draft.selections if sel.tier.eviction == "never"}
    return BLOCK_END.join(b.text for b in draft.blocks if b.tier in never)


def _pinned_digest(pinned: str) -> str:
    """The pinned prefix's hash, as the breakpoints' prefix hashes are made."""
    return prefix_hashes(
        "", [Block(region="system", role="system", text=pinned, tier="pinned", cached=True)]
    )[0]


def _tools_changed(setup: Setup, previous: Mapping[str, Any]) -> PinnedPrefixChanged | None:
    """INV-CTX-01's error when the tool definitions differ from the previous turn's (added,
    changed or taken away): the provider caches them ahead of the pinned prefix, so new ones write
    it all again, which passed as byte-identical. A report from before ``tools_sha256`` was kept
    (no such key) is not compared: its session's tools are taken as they are."""
    if "tools_sha256" not in previous:
        return None
    before, now = previous.get("tools_sha256") or "", setup.tools_digest
    if before == now:
        return None

    def line(digest: str) -> str:
        return f"tool definitions sha256:{digest}" if digest else "no tool definitions"

    return PinnedPrefixChanged(offset=0, line=1, before=line(before), after=line(now), volatile=None)


def check_pinned_prefix(setup: Setup, draft: Draft, previous: Mapping[str, Any] | None) -> PinnedPrefix:
    """The pinned prefix's hash and INV-CTX-01's status; a change from the previous turn fails
    closed unless the caller allows it (a new playbook version)."""
    pinned = _pinned_text(draft)
    digest = _pinned_digest(pinned)
    if previous is None:  # a previous report holds its hash (:func:`._previous.read_previous`)
        return PinnedPrefix(pinned, digest, "no previous turn to compare")
    tools = _tools_changed(setup, previous)
    if tools is not None and not setup.allow_prefix_change:
        raise tools
    allowed = "; the tool definitions changed (allowed)" if tools is not None else ""
    if previous.get("pinned_prefix_sha256") == digest:
        return PinnedPrefix(pinned, digest, "pinned prefix byte-identical to the previous turn" + allowed)
    before = previous.get("pinned_prefix_text")
    if isinstance(before, str) and _pinned_digest(before) != previous.get("pinned_prefix_sha256"):
        raise InvalidRequestError(
            "the previous report does not hold together: its pinned_prefix_sha256 is not the hash of "
            "its pinned_prefix_text (edited or damaged), so no change of the prefix can be told from "
            "it; pass the report the previous turn printed",
            "$.pinned_prefix_sha256",
        )
    error = _prefix_changed(setup, str(before or ""), pinned)
    if not setup.allow_prefix_change:
        raise error
    return PinnedPrefix(
        pinned,
        digest,
        f"pinned prefix changed from the previous turn at byte {error.offset} (allowed){allowed}",
    )
