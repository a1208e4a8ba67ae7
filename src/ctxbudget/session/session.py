"""Sessions: turns that remember, compacted into the ledger by rule, assembled turn after turn.

Each turn starts from the session's stable base items (playbook, evidence, background), adds the
ledger of compacted turns and the raw recent turns, then the current question and tool results,
and is assembled under the session's policy. Compaction triggers when raw history passes the
policy's trigger (or no longer fits the rolling tier); it then compacts recorded turns older
than the newest ``keep_recent_turns`` down to the low-water mark, several at once, so the ledger
(and the cached prefix before it) changes in steps rather than every turn.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..assembly import (
    AssemblyReport,
    AssemblyResult,
    OutputFormat,
    Policy,
    assemble,
    check_envelope,
    list_policies,
    load_policy,
)
from ..catalog.catalog import Catalog, bundled_catalog
from ..errors import BudgetExceeded, ConfigError, InvalidRequestError, PriceUnknown
from ..formats.jsonvalue import check_json_value, json_kind
from ..items import MESSAGE_FRAMING_TOKENS
from .checks import check_base_items, rolling_tier
from .ledger import LedgerRules, fold_ledger, ledger_blocks, reduce_turn, render_entries
from .store import SessionMeta, SessionStore, as_stored, name_problem
from .turns import ToolCall, ToolResult, Turn

__all__ = ["Compaction", "PreparedTurn", "Session"]

# What a session reads of its base: the standing items, and what every turn carries of it.
BASE_FIELDS = ("items", "confirm_evict", "issue_tags")
# The fields that carry a chat or question body's text: a refused base is named by one of them.
_CONTENT = ("messages", "system", "input", "instructions", "questions", "documents", "history", "role")


@dataclass(frozen=True, kw_only=True)
class Compaction:
    """One compaction step: which turns, and their tokens before and after."""

    turns: tuple[int, ...]
    tokens_before: int
    tokens_after: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the reduction ratio."""
        cut = 1 - self.tokens_after / self.tokens_before if self.tokens_before else 0.0
        return {
            "turns": list(self.turns),
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "reduction": round(cut, 4),
        }


@dataclass(frozen=True, kw_only=True)
class PreparedTurn:
    """A turn assembled and ready to send, with the ledger entries it will add when recorded."""

    index: int
    question: str
    tool_calls: tuple[ToolCall, ...]
    tool_results: tuple[ToolResult, ...]
    tags: tuple[str, ...]
    assembly: AssemblyResult
    new_entries: tuple[dict[str, Any], ...] = ()
    compaction: Compaction | None = None
    request: Mapping[str, Any] = field(default_factory=dict)


_TURN_ITEM = re.compile(r"^turn-(\d+)-\d+$")  # the id of a raw turn's message (see _request)


def _ledger_items(shown: Sequence[Mapping[str, Any]], tier: str) -> list[dict[str, Any]]:
    """The ledger as items, one per block (:func:`ledger_blocks`): the header with the folded
    entries, then one per compacted turn; each becomes its own block, so a turn that appends
    entries leaves the earlier blocks (and the prefix hash at their end) as they were."""
    blocks = ledger_blocks(shown)
    turns = [e["turn"] for e in shown if "turns" not in e]
    items = [{"id": "ledger", "tier": tier, "kind": "ledger", "text": blocks[0]}]
    items += [
        {"id": f"ledger-turn-{n}", "tier": tier, "kind": "ledger", "text": text}
        for n, text in zip(turns, blocks[1:], strict=True)
    ]
    return items


def _rolled_off_turns(report: AssemblyReport) -> list[int]:
    """Indexes of the raw turns (``turn-N-k`` items) the rolling window let go of."""
    found = (
        _TURN_ITEM.match(item.id)
        for tier in report.tiers
        for item in tier.items
        if item.action == "rolled_off"
    )
    return [int(match.group(1)) for match in found if match]


_Attempt = tuple[list[dict[str, Any]], "Compaction | None", dict[str, Any], AssemblyResult]


def _assembled_keeping_every_turn(attempt: Callable[[bool, int | None], _Attempt]) -> _Attempt:
    """Assemble; over the envelope, compact as far as possible and assemble again; when the rolling
    window let a raw turn go, compact through it and assemble again, until none goes (the new
    ledger entries take room, and the window may then let a newer turn go: no turn is lost)."""
    try:
        done = attempt(False, None)
    except BudgetExceeded:
        done = attempt(True, None)
    through = 0
    while rolled := [n for n in _rolled_off_turns(done[3].report) if n > through]:
        through = max(rolled)  # rises each time: at most one assembly a turn
        done = attempt(False, through)
    return done


def _check_turn(
    question: object, tool_calls: object, tool_results: object, tags: object, allow_prefix_change: object
) -> None:
    """The turn's arguments have their types (a ConfigError naming the one that does not)."""
    if not isinstance(question, str):
        raise ConfigError(f"question must be a string, got {type(question).__name__}")
    for name, given, kind in (
        ("tool_calls", tool_calls, ToolCall),
        ("tool_results", tool_results, ToolResult),
    ):
        if not _all_of(given, kind):
            raise ConfigError(f"{name} must be a list of ctxbudget.{kind.__name__} values, got {given!r:.80}")
    if not _all_of(tags, str):
        raise ConfigError(f"tags must be a list of strings, got {tags!r:.80}")
    # the tags reach no assembly, which refuses a question's lone surrogate: one ended the store's
    # write in a UnicodeEncodeError
    check_json_value(list(tags) if isinstance(tags, list | tuple) else tags, "tags")
    if not isinstance(allow_prefix_change, bool):
        raise ConfigError(f"allow_prefix_change must be True or False, got {allow_prefix_change!r}")


def _all_of(given: object, kind: type) -> bool:
    """Whether ``given`` is a list or tuple of ``kind`` values (a string is not a list of them)."""
    return isinstance(given, list | tuple) and all(isinstance(value, kind) for value in given)


class Session:
    """A named, stored conversation under a policy."""

    def __init__(
        self,
        store: SessionStore,
        name: str,
        *,
        catalog: Catalog | None = None,
        rules: LedgerRules | None = None,
    ) -> None:
        self._open(store, store.meta(name), catalog=catalog, rules=rules)

    def _open(
        self, store: SessionStore, meta: SessionMeta, *, catalog: Catalog | None, rules: LedgerRules | None
    ) -> None:
        """Open the session ``meta`` describes (as ``store`` holds it)."""
        self.store = store
        self.meta = meta
        name = meta.name
        if self.meta.recorded_by_gateway:
            raise ConfigError(
                f"session {name!r} was recorded by the gateway: its turns are the chat bodies the gateway "
                "fitted or assembled, which `session show` and `session export` read; it is not a session "
                "of a policy that can go on here (start one with `session new`)"
            )
        self.policy: Policy = load_policy(self.meta.policy)
        self.catalog = catalog or bundled_catalog()
        self.rules = rules or LedgerRules()
        self.counter = self.catalog.counter_for(self.meta.model)
        self._reload()

    def _reload(self) -> None:
        """Read the turns and the ledger from the store (another writer may have added to them)."""
        self._turns = self.store.turns(self.meta.name)
        self._ledger = self.store.ledger(self.meta.name)
        self._previous: Mapping[str, Any] | None = self._turns[-1].report if self._turns else None

    @classmethod
    def create(
        cls,
        store: SessionStore,
        name: str,
        *,
        policy: str,
        model: str,
        base: Mapping[str, Any],
        catalog: Catalog | None = None,
    ) -> Session:
        """Create and open a session whose turns start from ``base`` (a ``{"items": [...]}`` body).
        The model must be in the catalog; a policy file is stored by its absolute path, so the
        session opens from any directory."""
        meta = cls.checked_meta(name, policy=policy, model=model, base=base, catalog=catalog)
        stored = store.create(meta)
        if not isinstance(stored, SessionMeta) or cls.__init__ is not Session.__init__:
            # a store of the protocol before create returned what it stored, or a subclass whose
            # own __init__ must run: the session is read back, as it was before
            return cls(store, name, catalog=catalog)
        session = cls.__new__(cls)
        # opened on the metadata the store wrote, not read back (its base parsed from the text
        # stored, as a reopened session reads it: 0.56 -> 0.29 ms for the bundled scenario's)
        session._open(store, stored, catalog=catalog, rules=None)
        return session

    @staticmethod
    def checked_meta(
        name: str, *, policy: str, model: str, base: Mapping[str, Any], catalog: Catalog | None = None
    ) -> SessionMeta:
        """What :meth:`create` stores, checked without a store (a command checks before it opens
        one: a refused session left an empty store file behind)."""
        problem = name_problem(name) if isinstance(name, str) else "is not a string"
        if problem is not None:
            raise ConfigError(f"session name {name!r:.60} {problem}")
        if not isinstance(base, Mapping) or not isinstance(base.get("items", []), list):
            raise InvalidRequestError('the base must be a JSON object like {"items": [...]}')
        unread = sorted(str(k) for k in base if k not in BASE_FIELDS)
        if unread:  # a chat or question body: its system prompt and messages would reach no turn
            raise InvalidRequestError(
                f'a session base is {{"items": [...]}} (with confirm_evict, issue_tags); '
                f"{', '.join(unread)} would not be read: give the standing text as items (tier, kind, text)",
                f"$.{next((k for k in _CONTENT if k in unread), unread[0])}",  # its content first
            )
        checked = load_policy(policy)
        rolling_tier(checked)  # the turns' history goes there: a policy without one fails now, not every turn
        # a model whose window cannot hold the policy's envelope, or that has no price under the
        # policy's ceiling, fails now, not at every turn
        spec = (catalog or bundled_catalog()).get_model(model)
        check_envelope(checked, spec, model)
        if checked.cost_ceiling_usd is not None and spec.prices is None:
            raise PriceUnknown(model_id=model, ceiling_usd=checked.cost_ceiling_usd)
        check_base_items(base.get("items", []))
        # the base must be items an assembly accepts (tiers, kinds, ids), no date in its pinned
        # tier, and within its tiers' ceilings and the envelope (a 36,000-token playbook under a
        # 15,000-token pinned tier): each would fail every turn, so the base is assembled once
        # now, with an empty question and no reply priced (a turn may expect a shorter reply than
        # the policy's default: the input alone is what every turn pays at least)
        question = {"id": "__question__", "kind": "question", "text": "?"}
        carried = {k: v for k, v in base.items() if k != "items"}
        assemble(
            {**carried, "items": [*base.get("items", []), question]},
            policy=checked,
            model=model,
            catalog=catalog,
            input_format="context",
            expected_output_tokens=0,
        )
        if policy not in list_policies() and Path(policy).exists():
            policy = str(Path(policy).resolve())
        return SessionMeta(name=name, policy=policy, model=model, base=dict(base))

    @property
    def turns(self) -> list[Turn]:
        """Turns recorded so far."""
        return list(self._turns)

    @property
    def ledger(self) -> list[dict[str, Any]]:
        """Ledger entries so far (append-only)."""
        return list(self._ledger)

    def _rolling_tier(self) -> str:
        return rolling_tier(self.policy).name

    def _raw_tokens(self, turn: Turn) -> int:
        framed = sum(self.counter.raw(text) + MESSAGE_FRAMING_TOKENS for _, text in turn.raw_texts())
        return self.counter.scale(framed)

    def _compact(
        self, *, forced: bool = False, through: int | None = None
    ) -> tuple[list[dict[str, Any]], Compaction | None]:
        """Compaction when raw history passes the trigger (or ``forced``: the request was over the
        envelope): recorded turns (with or without an answer) older than the newest
        ``keep_recent_turns``, down to the low water. ``through``: every turn up to that index too (the rolling window could
        not hold them whole, and a turn is never left neither raw nor in the ledger)."""
        rules = self.policy.compaction
        compacted = {e["turn"] for e in self._ledger}
        raw = [t for t in self._turns if t.index not in compacted]
        rolling = rolling_tier(self.policy)
        trigger = min(rules.history_trigger_tokens, rolling.ceiling_tokens)
        sizes = {t.index: self._raw_tokens(t) for t in raw}
        if sum(sizes.values()) <= trigger and not forced and through is None:
            return [], None
        low_water = 0 if forced else int(trigger * rules.low_water_ratio)
        eligible = raw[: max(0, len(raw) - rules.keep_recent_turns)]
        if through is not None:
            eligible = [t for t in raw if t.index <= through or t in eligible]
            low_water = min(low_water, sum(sizes[t.index] for t in raw if t.index > through))
        chosen: list[Turn] = []
        remaining = sum(sizes.values())
        for turn in eligible:
            if remaining <= low_water:
                break
            chosen.append(turn)
            remaining -= sizes[turn.index]
        entries = [reduce_turn(t, self.rules) for t in chosen]
        if not entries:
            return [], None
        after = self.counter.count(render_entries(entries))
        step = Compaction(
            turns=tuple(t.index for t in chosen),
            tokens_before=sum(sizes[t.index] for t in chosen),
            tokens_after=after,
        )
        return entries, step

    def _request(
        self,
        entries: Sequence[dict[str, Any]],
        question: str,
        calls: Sequence[ToolCall],
        results: Sequence[ToolResult],
    ) -> dict[str, Any]:
        tier = self._rolling_tier()
        items = [dict(i) for i in self.meta.base.get("items", [])]
        if entries:
            shown = fold_ledger(entries, self.policy.ledger_ceiling_tokens, self.counter)
            items += _ledger_items(shown, tier)
        compacted = {e["turn"] for e in entries}
        for turn in self._turns:
            if turn.index in compacted:
                continue
            for n, (role, text) in enumerate(turn.raw_texts()):
                items.append(
                    {
                        "id": f"turn-{turn.index}-{n}",
                        "tier": tier,
                        "kind": "history",
                        "role": role,
                        "text": text,
                        "group": f"turn-{turn.index}",
                    }
                )
        items.append({"id": "question", "kind": "question", "text": question})
        items += [
            {"id": f"call-{n}", "kind": "tool_call", "text": f"[tool call {c.name}] {c.arguments}"}
            for n, c in enumerate(calls)
        ]
        items += [
            {"id": f"result-{n}", "kind": "tool_result", "text": f"[tool result {r.name}] {r.content}"}
            for n, r in enumerate(results)
        ]
        request: dict[str, Any] = {"items": items}
        for carried in BASE_FIELDS[1:]:  # the base's, every turn
            if isinstance(self.meta.base.get(carried), list):
                request[carried] = list(self.meta.base[carried])
        return request

    def prepare(
        self,
        question: str,
        *,
        tool_calls: Sequence[ToolCall] = (),
        tool_results: Sequence[ToolResult] = (),
        tags: Sequence[str] = (),
        output_format: OutputFormat | None = None,
        expected_output_tokens: int | None = None,
        allow_prefix_change: bool = False,
        idle_seconds: float | None = None,
        format: OutputFormat | None = None,
    ) -> PreparedTurn:
        """Compact if due, then assemble the next turn (nothing is stored until :meth:`record`).

        Over the envelope, or with a raw turn the rolling window cannot hold whole, compaction
        runs and the turn is assembled once more, so every past turn is raw and whole or in the
        ledger. The other options mean what they mean for :func:`ctxbudget.assemble`."""
        _check_turn(question, tool_calls, tool_results, tags, allow_prefix_change)

        def attempt(forced: bool, through: int | None = None) -> _Attempt:
            new_entries, step = self._compact(forced=forced, through=through)
            request = self._request(self._ledger + new_entries, question, tool_calls, tool_results)
            result = assemble(
                request,
                policy=self.policy,
                model=self.meta.model,
                output_format=output_format,
                format=format,
                previous=self._previous,
                expected_output_tokens=expected_output_tokens,
                catalog=self.catalog,
                allow_prefix_change=allow_prefix_change,
                idle_seconds=idle_seconds,
            )
            return new_entries, step, request, result

        new_entries, step, request, result = _assembled_keeping_every_turn(attempt)
        return PreparedTurn(
            index=len(self._turns) + 1,
            question=question,
            tool_calls=tuple(tool_calls),
            tool_results=tuple(tool_results),
            tags=tuple(tags),
            assembly=result,
            new_entries=tuple(new_entries),
            compaction=step,
            request=request,
        )

    def add(
        self, question: str, *, answer: str = "", usage: Mapping[str, Any] | None = None, **options: Any
    ) -> tuple[PreparedTurn, Turn]:
        """:meth:`prepare` (with ``options``) and :meth:`record` as one step under the store's lock
        for the session, the session read again inside it: writers in several processes adding to
        one session each assemble on every turn before theirs, and none is rejected for a turn
        number another took (what :meth:`record` alone does when the session moved on)."""
        with self.store.serialized(self.meta.name):
            self._reload()
            prepared = self.prepare(question, **options)
            return prepared, self.record(prepared, answer, usage)

    def record(self, prepared: PreparedTurn, answer: str, usage: Mapping[str, Any] | None = None) -> Turn:
        """Store the turn (with its report and usage) and the ledger entries it added, atomically.
        An answer that is not text, or a usage that is not a JSON object of token counts and
        finite numbers, is refused before anything is stored."""
        usage = _checked_usage(answer, usage)
        report = prepared.assembly.report.to_dict()
        if prepared.compaction:
            cache = report["cache"]
            report["compaction"] = {
                **prepared.compaction.to_dict(),
                # The ledger sits after the stable prefix: that prefix is still read from cache;
                # the ledger and what follows it are written once, then read on later turns.
                "cache_effect": {"read_tokens": cache["read_tokens"], "write_tokens": cache["write_tokens"]},
            }
        turn = Turn(
            index=prepared.index,
            question=prepared.question,
            answer=answer,
            tool_calls=prepared.tool_calls,
            tool_results=prepared.tool_results,
            tags=prepared.tags,
            report=as_stored(report),
            usage=as_stored(usage),
        )
        entries = [as_stored(e) for e in prepared.new_entries]
        self.store.append_turn(self.meta.name, turn, entries)
        self._turns.append(turn)
        self._ledger += entries
        self._previous = turn.report
        return turn


def _checked_usage(answer: object, usage: object) -> dict[str, Any]:
    """The usage to store, once ``answer`` is text and ``usage`` a JSON object whose ``*_tokens``
    (and ``actual``'s) are counts or null: a NaN was stored and exported as ``NaN`` (not JSON), a list's repr stored as the
    answer, a string usage ended in a ValueError."""
    if not isinstance(answer, str):
        raise ConfigError(f"answer must be the reply's text (a string), got {json_kind(answer)}")
    check_json_value(answer, "answer")  # a lone surrogate (half an emoji) is no UTF-8 to store
    if usage is None:
        return {}
    if not isinstance(usage, Mapping):
        raise ConfigError(f"usage must be a JSON object of token counts, got {json_kind(usage)}")
    checked = dict(usage)
    check_json_value(checked, "usage")  # keys are strings; numbers finite; nothing but JSON
    actual = checked.get("actual")  # the shape a gateway stores: {"estimated": ..., "actual": ...}
    for path, counts in (("usage", checked), ("usage.actual", actual if isinstance(actual, Mapping) else {})):
        for key, value in counts.items():
            # None: an SDK's usage leaves out what it did not bill (cache_creation_input_tokens)
            if key.endswith("_tokens") and value is not None and (type(value) is not int or value < 0):
                raise InvalidRequestError(
                    f"a token count is a whole number >= 0, got {value!r:.40}", f"{path}.{key}"
                )
    return checked
