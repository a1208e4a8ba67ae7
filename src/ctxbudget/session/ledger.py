"""Deterministic compaction of old turns into a JSON state ledger (no model call).

Each completed turn reduces to one entry such as::

    {"turn": 2, "issue": "BreachOfWarranty", "cited_exhibits": ["EX-04", "EX-12"],
     "citations": ["47:12-48:3"], "status": "CONFIRMED", "tools": ["search_transcript CONFIRMED"],
     "conclusions": ["The record shows written notice on March 3 (EX-04)."]}

Exhibit ids (from the question, the answer and the tool results) and ``page:line`` citations (the
ones the answer makes) are found by configurable patterns; tool statuses come from the tool
results; issue tags from the turn (``issues`` lists them when there are several); conclusions
are sentences of the answer kept verbatim by rule (a conclusion marker, not filler addressed to
the user, not a bare status line), never paraphrased. Raw tool logs, their line numbers and
conversational filler are pruned. Entries validate against :data:`LEDGER_SCHEMA`.

When the rendered ledger would pass its ceiling, :func:`fold_ledger` folds the oldest entries
into one entry per issue (turn range, exhibits united, the last status and conclusion), in
steps down to a low-water mark, so its bytes change rarely.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import InvalidRequestError
from ..trim.sentences import iter_sentence_ends
from ..validation import first_error
from .folding import Counting, exhibit_key, fold_entries
from .folding import fold_ledger as fold_entries_under
from .turns import Turn

__all__ = [
    "LEDGER_SCHEMA",
    "LedgerRules",
    "fold_entries",
    "fold_ledger",
    "ledger_blocks",
    "reduce_turn",
    "render_entries",
    "render_ledger",
    "validate_entry",
]


@dataclass(frozen=True, kw_only=True)
class LedgerRules:
    """What the reducer extracts; every pattern is configurable."""

    # EX-04, Ex-05, a sub-exhibit EX-4.1 and a lettered one EX-12A, each whole (EX-4.1 was read as
    # EX-4, another exhibit, and EX-12A not at all); a sentence's full stop is not a sub-number.
    # Also as briefs write them: "Exhibit 11", "Ex. 4", "Exh. 4", "Exhibit B" (recorded EX-11, EX-4,
    # EX-B) and a party's or a joint exhibit, PX-101, DX-12, JX-3 (the ledger dropped all of them)
    exhibit_pattern: str = (
        r"\b(?:(?:EX|Ex|[PDJ]X)-\d+(?:\.\d+)*[A-Za-z]?\b"
        r"|(?:Exhibit|EXHIBIT|Exh\.|Ex\.)[ \t]?(?:(?:No|NO)\.?[ \t]?)?\d+(?:\.\d+)*[A-Za-z]?\b"
        r"|(?:Exhibit|EXHIBIT)[ \t](?!(?:NO|TO|OF|IN|IS|AN|AS|AT|BY|ON|OR|IT|IF|BE|SO|UP|US|WE)\b|[EPDJ]X-)"
        r"[A-Z]{1,2}(?:-\d+)?\b(?![-\d]))"
    )
    # a range's dash may be an en dash, with a space either side ("47:12 – 48:3"): one citation,
    # written 47:12-48:3 in the entry
    citation_pattern: str = r"\b\d{1,4}:\d{1,2}(?:[ \t]?[-\u2013][ \t]?\d{1,4}(?::\d{1,2})?)?\b"
    # "Status: CONFIRMED", "status - DENIED", "Status: NOT CONFIRMED": the word in any case, the
    # value in capitals, with a qualifier before it when it has one (NOT, PARTIALLY, UNDER, ...),
    # never the acronym after it ("CONFIRMED NDA signed" is CONFIRMED)
    status_pattern: str = (
        r"(?i:\bstatus\b)\W{0,3}\s*((?:(?:NOT|PARTIALLY|PARTLY|STILL|UNDER|IN|NO|AWAITING|NEEDS) )?"
        r"[A-Z][A-Z_]{2,})\b"
    )
    conclusion_markers: tuple[str, ...] = (
        "conclusion",
        "therefore",
        "thus",
        "establishes",
        "confirms",
        "shows",
        "status:",
        "finding",
    )
    max_conclusions: int = 3
    # One turn's entry stays bounded whatever the turn: at most this many exhibits (the rest are
    # counted in ``more_exhibits``), citations, characters per conclusion, tools, issue tags, and
    # characters per tag or tool label (a 30,000-character --tag made every entry it folded into
    # too large for the ledger's ceiling: the session failed every turn after).
    max_exhibits: int = 40
    max_citations: int = 16
    max_conclusion_chars: int = 400
    max_tools: int = 20
    max_issues: int = 8
    max_label_chars: int = 80
    # Conversational filler: a sentence holding one of these is not a conclusion.
    filler: tuple[str, ...] = (
        "here is",
        "here's",
        "let me know",
        "happy to",
        "would you like",
        "i can ",
        "i'll ",
        "feel free",
        "hope this",
    )


class LedgerEntry(BaseModel):
    """The wire shape of one ledger entry (its JSON schema is :data:`LEDGER_SCHEMA`)."""

    model_config = ConfigDict(extra="forbid")
    turn: int = Field(ge=1)
    issue: str | None
    # Every issue tag of the turn, when it has more than one (else ``issue`` says it all).
    issues: list[str] | None = None
    cited_exhibits: list[str]
    # Exhibits beyond ``LedgerRules.max_exhibits`` (counted, not listed).
    more_exhibits: int | None = Field(default=None, ge=1)
    citations: list[str]
    status: str | None
    # "name STATUS" per tool result (the name alone when the tool reported no status).
    tools: list[str]
    conclusions: list[str]


LEDGER_SCHEMA: dict[str, Any] = LedgerEntry.model_json_schema()
_OPTIONAL = ("issues", "more_exhibits")


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _tool_status(result_content: str, given: str | None, rules: LedgerRules) -> str | None:
    if given:
        return given.upper()
    try:
        found = _json_status(json.loads(result_content), rules)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        found = None
    if found is not None:
        return found.upper()
    match = re.search(rules.status_pattern, result_content)
    return match.group(1).upper() if match else None


def _json_status(value: Any, rules: LedgerRules) -> str | None:
    """A JSON result's status: its top-level ``status`` string, else the first nested one (in
    document order, an object's own before its members') that is a status word as the pattern
    reads one (``{"result": {"status": "CONFIRMED"}}`` with ``json.dumps``' own spacing, which the
    pattern did not read); a nested record's ``"status": "filed"`` is not the tool's."""
    if isinstance(value, dict) and isinstance(value.get("status"), str) and value["status"].strip():
        return str(value["status"]).strip()
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            status = item.get("status")
            if isinstance(status, str) and _status_word(status, rules):
                return status.strip()
            pending.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            pending.extend(reversed(item))
    return None


def _status_word(value: str, rules: LedgerRules) -> bool:
    """Whether ``value`` is, whole, a status as the status pattern reads one after "status:"."""
    found = re.match(rules.status_pattern, f"status: {value.strip()}")
    return found is not None and found.group(1) == value.strip()


def _is_conclusion(sentence: str, rules: LedgerRules) -> bool:
    """A sentence with a conclusion marker that is neither filler addressed to the user nor only
    a status line (the status has its own field)."""
    lowered = sentence.lower()
    if not _phrases(tuple(rules.conclusion_markers), inflected=True).search(lowered):
        return False
    if _phrases(tuple(rules.filler)).search(lowered):
        return False
    status = re.search(rules.status_pattern, sentence)
    return not (status and len(sentence) - len(status.group(0)) < 8)


# A heading alone: at most three words and a colon, Markdown's marks around them or not
# ("Findings:", "**Key conclusions:**", "## Findings:").
_HEADING = re.compile(r"[^\w]*\w+(?:[ \t]+\w+){0,2}[*_`]*[ \t]*:[^\w]*")


def _dashed(citation: str) -> str:
    """A citation as the entry writes it: a range's dash a hyphen, without spaces."""
    return re.sub(r"[ \t]*[-\u2013][ \t]*", "-", citation)


@functools.lru_cache(maxsize=32)
def _phrases(phrases: tuple[str, ...], inflected: bool = False) -> re.Pattern[str]:
    """Any of ``phrases`` starting a word (``there is`` does not hold "here is", nor ``Levi can``
    "i can", nor "enthusiastic" "thus"), and ending one unless ``inflected`` (a marker's own
    endings: "findings", "conclusions"); a phrase's own punctuation is matched as written."""
    words = [re.escape(p.strip()) for p in phrases if p.strip()]
    end = r"\w*" if inflected else r"(?!\w)"
    return re.compile(r"(?<!\w)(?:" + "|".join(words) + r")" + end if words else r"(?!)")  # none: never


def _conclusions(answer: str, rules: LedgerRules) -> list[str]:
    """The answer's conclusion sentences (:func:`_is_conclusion`); under a heading with a marker
    ("Conclusion:"), the sentence it heads too, whatever its words."""
    out: list[str] = []
    start, headed = 0, False
    markers = _phrases(tuple(rules.conclusion_markers), inflected=True)
    for end in [*iter_sentence_ends(answer), len(answer)]:
        sentence = answer[start:end].strip()
        start = end
        if not sentence:
            continue
        if _HEADING.fullmatch(sentence):  # a "Status:" heading's line is the status field's
            headed = markers.search(sentence.lower()) is not None and "status" not in sentence.lower()
            continue
        if _is_conclusion(sentence, rules) or (
            headed and not _phrases(tuple(rules.filler)).search(sentence.lower())
        ):
            out.append(sentence)
        headed = False
    return _unique(out)[: rules.max_conclusions]


def reduce_turn(turn: Turn, rules: LedgerRules = LedgerRules()) -> dict[str, Any]:
    """The ledger entry of one completed turn (deterministic: same turn, same entry)."""
    # over the cap, the exhibits the answer cites are kept first, then the question's, then those
    # the tool logs only mention (EX-01..EX-60 listed by a search must not push out the answer's)
    texts = [turn.answer, turn.question, *(r.content for r in turn.tool_results)]
    # one exhibit however its id is cased (Ex-05 and EX-05), written as the record writes ids
    exhibits = _unique(exhibit_id(m) for t in texts for m in re.findall(rules.exhibit_pattern, t))
    kept = sorted(exhibits[: rules.max_exhibits], key=exhibit_key)
    # What the answer cites; the raw tool logs' line numbers are pruned with the logs.
    citations = _unique(_dashed(c) for c in re.findall(rules.citation_pattern, turn.answer))
    statuses_of = [_tool_status(r.content, r.status, rules) for r in turn.tool_results]
    tools = [
        f"{_label(r.name, rules.max_label_chars)} {st}" if st else _label(r.name, rules.max_label_chars)
        for r, st in zip(turn.tool_results, statuses_of, strict=True)
    ]
    tags = list(dict.fromkeys(_label(tag, rules.max_label_chars) for tag in turn.tags))[: rules.max_issues]
    statuses = [st for st in statuses_of if st]
    answer_status = re.search(rules.status_pattern, turn.answer)
    status = answer_status.group(1).upper() if answer_status else (statuses[-1] if statuses else None)
    entry = {
        "turn": turn.index,
        "issue": tags[0] if tags else None,
        "issues": tags if len(tags) > 1 else None,
        "cited_exhibits": kept,
        "more_exhibits": max(0, len(exhibits) - rules.max_exhibits) or None,
        "citations": citations[: rules.max_citations],
        "status": status,
        "tools": tools[: rules.max_tools],
        "conclusions": [_capped(c, rules.max_conclusion_chars) for c in _conclusions(turn.answer, rules)],
    }
    return validate_entry(entry)


# How a brief writes an exhibit ("Exhibit 11", "Ex. 4", "Exh. 4"): the record writes EX-11.
_WRITTEN_EXHIBIT = re.compile(r"(?i)(?:exhibit|exh\.|ex\.)[ \t]?(?:no\.?[ \t]?(?=\d))?")


def exhibit_id(found: str) -> str:
    """An exhibit as the record writes it: upper case, and "Exhibit 11" or "Ex. 4" as EX-11, EX-4
    (one exhibit however it is written or cased)."""
    return (
        _WRITTEN_EXHIBIT.sub("EX-", found, count=1).upper()
        if _WRITTEN_EXHIBIT.match(found)
        else found.upper()
    )


def _label(text: str, limit: int) -> str:
    """A tag or tool name as an entry holds it: whole up to ``limit`` characters, else its start
    and a digest of the whole, so that two long labels with one start stay two (folding groups
    entries by their issue label)."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{text[: limit - 11].rstrip()}… #{digest}"


def _capped(text: str, limit: int) -> str:
    """``text``, or its start (to a word) and an ellipsis, ``limit`` characters at most in all."""
    if len(text) <= limit:
        return text
    room = limit - 2  # for " …"
    cut = text.rfind(" ", 0, room)
    return text[: cut if cut > room // 2 else room].rstrip() + " …"


def validate_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Validate one entry against the schema; the error names the field."""
    try:
        checked = LedgerEntry.model_validate(entry).model_dump()
        return {k: v for k, v in checked.items() if v is not None or k not in _OPTIONAL}
    except ValidationError as exc:
        path, message, _ = first_error(exc)
        raise InvalidRequestError(f"ledger entry: {message}", path) from exc


LEDGER_HEADER = "Session state ledger (one JSON object per compacted turn, or per issue for folded turns):"


# The order of an entry's keys as rendered, whatever order a store gives them back in: the same
# entries always give the same bytes (a reopened session reads its ledger from the cache).
KEY_ORDER = (
    "turn",
    "turns",
    "issue",
    "issues",
    "cited_exhibits",
    "more_exhibits",
    "citations",
    "status",
    "tools",
    "conclusions",
)


def _ordered(entry: Mapping[str, Any]) -> dict[str, Any]:
    known = {k: entry[k] for k in KEY_ORDER if k in entry}
    return known | {k: entry[k] for k in sorted(entry) if k not in known}


def render_entries(entries: Iterable[Mapping[str, Any]]) -> str:
    """Entries as lines of compact JSON, oldest first, keys in :data:`KEY_ORDER`."""
    return "\n".join(json.dumps(_ordered(e), ensure_ascii=False, separators=(",", ":")) for e in entries)


def render_ledger(entries: Iterable[Mapping[str, Any]]) -> str:
    """The ledger as the model reads it: a header, then one compact JSON object per line, oldest
    first. Appending an entry only adds a line, so the bytes before it never change."""
    return LEDGER_HEADER + "\n" + render_entries(entries)


def ledger_blocks(shown: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ledger as the blocks it is sent in: the header with the folded entries, then one block
    per compacted turn (appending entries leaves the earlier blocks, and their cache, as they were)."""
    folded = [e for e in shown if "turns" in e]
    return [render_ledger(folded).rstrip("\n")] + [render_entries([e]) for e in shown if "turns" not in e]


def fold_ledger(
    entries: Sequence[Mapping[str, Any]],
    ceiling: int | None,
    counting: Counting,
    low_water: float = 0.6,
) -> list[dict[str, Any]]:
    """The entries as rendered under ``ceiling`` tokens (None: all, as they are), their blocks
    (:func:`ledger_blocks`) counted as the assembly counts them: see
    :func:`.folding.fold_ledger`."""
    return fold_entries_under(entries, ceiling, counting, ledger_blocks, low_water)
