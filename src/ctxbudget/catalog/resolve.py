"""Resolving a model id as clients send it to one catalog entry, in a documented order.

1. exact id (case-insensitive); where several providers list it, the first in the catalog's
   provider order (first-party before resellers), unless a scope names the provider;
2. alias (the catalog's own, and the literal ids in genai-prices' match rules, such as
   ``gpt-4o-2024-08-06`` for ``gpt-4o``);
3. provider-scoped: ``openai/``, ``anthropic/``, ``bedrock/``, ``vertex_ai/``, ``azure/``,
   ``openrouter/`` and the other scopes in the catalog, and Bedrock's own ids
   (``us.anthropic.claude-sonnet-4-5-20250929-v1:0``); the named provider's ids, aliases and
   match rules come first, then the rest of the id is resolved by these same rules. An unscoped
   id belongs to the provider whose provider rule it matches (``claude-*`` -> anthropic,
   ``gpt-*`` -> openai, ``gemini-*`` -> google): that provider's ids, aliases and match rules;
4. dated or versioned snapshot: ``-YYYYMMDD``, ``-YYYY-MM-DD``, ``@20250929`` (Vertex) (dates of 2000-2099),
   ``-latest``, ``-v1:0`` / ``:0`` (Bedrock), ``-0613`` / ``-001`` / ``-09-2025`` are taken off;
5. genai-prices' match rules (``starts_with``, ``contains``, ``regex``), in provider order;
6. family: the longest catalog id or alias (or a dated one) that starts the id at a separator
   (``gpt-4o-mini-foo`` and ``gpt-4o-mini:free`` -> ``gpt-4o-mini``), with a warning.
An id whose dated suffix is no date (``claude-sonnet-4-5-20251399``) is only an exact id or alias:
no rule after those reads it.
An OpenAI fine-tuned id (``ft:gpt-4o-mini-2024-07-18:org:name:id``) resolves as its base model by
these rules: the base's window, input cap and tokenizer, but no prices (a fine-tuned model is
billed at its own rates, which the catalog does not list).
Each step is recorded, so a report can name the rule and the path.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .values import ModelSpec, ResolutionRule

__all__ = ["ID_BLANKS", "MAX_ID_CHARS", "Found", "Index", "Matcher", "find", "id_problem", "plain_lookalike"]

# How far a rule strays from the id as sent; a path is labelled by its farthest step.
_SEVERITY: dict[ResolutionRule, int] = {
    "exact": 0,
    "alias": 1,
    "scoped": 2,
    "fine-tuned": 2,
    "snapshot": 3,
    "match": 4,
    "family": 5,
}
_SNAPSHOTS = tuple(
    re.compile(p)
    for p in (
        r"@[^@/]+$",
        r"-(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})$",
        r"-(?P<y>\d{4})(?P<m>\d{2})(?P<d>\d{2})$",
        r"-latest$",
        r"-v\d+(?::\d+)?$",
        r":\d+$",
        r"-\d{2}-\d{4}$",
        r"-\d{3,4}$",
    )
)
_BEDROCK = re.compile(
    r"^(?:(?:us|eu|apac|ap|jp|au|ca|us-gov|global|regional)\.)?"
    r"(?:anthropic|amazon|meta|mistral|cohere|ai21|deepseek|openai|qwen|google|nvidia|writer|moonshotai"
    r"|zai|minimax|twelvelabs)\.(?P<rest>[^/]+)$"
)
_OTHER_KINDS = re.compile(
    r"(^|[-:])(tts|transcribe|realtime|audio|image|embed\w*|moderation|whisper|speech|search)([-:]|$)"
)
_UNPRINTABLE = re.compile(r"[\s\x00-\x1f\x7f]")
# The blanks around an id that are not part of it (``"GPT-4o "`` is gpt-4o): ASCII's own. Python's
# ``str.strip()`` also takes U+001C-U+001F and U+0085 for blanks: control characters, refused.
ID_BLANKS = " \t\n\r\x0b\x0c"
_FINE_TUNED = re.compile(r"^ft:(?P<base>[^:]+)(?::|$)")
_MAX_DEPTH = 8
MAX_ID_CHARS = 256


class Matcher(NamedTuple):
    """A model's match rule: ``spec`` builds the model's entry, read only when the rule matches."""

    provider: str
    spec: Callable[[], ModelSpec]
    predicate: Callable[[str], bool]


@dataclass(frozen=True)
class Index:
    """What the rules look things up in (built once per catalog, lower-cased keys)."""

    by_id: Mapping[str, Sequence[ModelSpec]]
    aliases: Mapping[str, Sequence[tuple[str, str | None]]]  # alias -> (target id, provider or None)
    matchers: Callable[[], Sequence[Matcher]]
    scopes: Mapping[str, str]
    owner: Callable[[str], str | None]  # the provider an unscoped id belongs to, by provider rules


@dataclass(frozen=True)
class Found:
    """The entry an id resolved to, the headline rule and every step of the path."""

    spec: ModelSpec
    rule: ResolutionRule
    path: tuple[str, ...]


def _pick(entries: Sequence[ModelSpec], provider: str | None) -> ModelSpec | None:
    if not entries:
        return None
    if provider is not None:
        for entry in entries:
            if entry.provider == provider:
                return entry
    return entries[0]


def _step(rule: ResolutionRule, detail: str, spec: ModelSpec) -> Found:
    return Found(spec, rule, (f"{rule} {detail}",))


def _then(rule: ResolutionRule, detail: str, inner: Found, spec: ModelSpec | None = None) -> Found:
    headline = rule if _SEVERITY[rule] >= _SEVERITY[inner.rule] else inner.rule  # a tie: the outer
    return Found(spec or inner.spec, headline, (f"{rule} {detail}", *inner.path))


def _exact(index: Index, name: str, provider: str | None, strict: bool = False) -> Found | None:
    entries = index.by_id.get(name, ())
    if strict:
        entries = [e for e in entries if e.provider == provider]
    spec = _pick(entries, provider)
    return _step("exact", spec.id, spec) if spec else None


def _alias(index: Index, name: str, provider: str | None, strict: bool = False) -> Found | None:
    # strict: the provider's own aliases, and the catalog's (no provider) that name its model
    targets = [t for t in index.aliases.get(name, ()) if not strict or t[1] in (provider, None)]
    ordered = sorted(targets, key=lambda t: t[1] != provider) if provider else targets
    for target, owner in ordered:
        spec = _pick(index.by_id.get(target.lower(), ()), owner or provider)
        if spec is not None and not (strict and spec.provider != provider):
            return _step("alias", f"{name} -> {spec.id}", spec)
    return None


def _match(index: Index, name: str, provider: str | None, strict: bool = False) -> Found | None:
    matchers = index.matchers()
    if provider is not None:
        own = [m for m in matchers if m.provider == provider]
        matchers = own if strict else [*own, *matchers]
    for matcher in matchers:
        if matcher.predicate(name):
            spec = matcher.spec()
            return _step("match", f"rule of {spec.provider}/{spec.id}", spec)
    return None


def _own(index: Index, provider: str, *names: str) -> Found | None:
    """The provider's own reading of ``names`` (a scoped id, then the id without its scope):
    its ids and aliases, the same after taking a snapshot suffix off, then its match rules (a
    rule matching the scoped id does not come before an alias of the id without its scope)."""
    for name in names:
        found = _exact(index, name, provider, True) or _alias(index, name, provider, True)
        if found is not None:
            return found
    for name in names:
        if (inner := _stripped(index, name, provider, True)) is not None:
            return inner
    return next((m for name in names if (m := _match(index, name, provider, True))), None)


def _scope(index: Index, name: str) -> tuple[str | None, str, str] | None:
    """(provider, rest of the id, label) for a scoped id, else None."""
    head, slash, rest = name.partition("/")
    if slash and head and rest:
        provider = index.scopes.get(head)
        return provider, rest, f"{head}/ -> {provider}" if provider else f"{head}/ (unknown scope)"
    bedrock = _BEDROCK.match(name)
    if bedrock and "aws" in index.scopes.values():
        return "aws", bedrock["rest"], "bedrock id -> aws"
    return None


def _prefer(own: Found | None, direct: Found | None) -> Found | None:
    """A scoped id that is also another provider's own id (OpenRouter lists ``deepseek/deepseek-chat``):
    the reading with the smaller input limit, so neither provider's limit is exceeded; the
    named provider's on a tie."""
    if own is None or direct is None or direct.spec.provider == own.spec.provider:
        return own or direct
    return direct if direct.spec.input_limit < own.spec.input_limit else own


def _scoped(
    index: Index, scope: tuple[str | None, str, str], name: str, direct: Found | None, depth: int
) -> Found | None:
    provider, rest, label = scope
    own = _own(index, provider, name, rest) if provider else None
    if own is None and (provider is not None or direct is None):
        own = _find(index, rest, provider, depth + 1)
    return _prefer(_then("scoped", label, own) if own else None, direct)


def _owned(index: Index, name: str) -> Found | None:
    """An unscoped id read by the provider its name belongs to (``claude-*`` -> anthropic)."""
    owner = index.owner(name)
    own = _own(index, owner, name) if owner else None
    return _then("scoped", f"-> {owner} (its provider rule)", own) if own else None


_VERTEX_DATE = re.compile(r"@(?P<y>\d{4})(?P<m>\d{2})(?P<d>\d{2})")


def _snapshot_suffixes(name: str) -> Iterator[re.Match[str]]:
    """The snapshot suffixes ``name`` ends with, in the rules' order. A dated one (``-YYYY-MM-DD``,
    ``-YYYYMMDD``) only when its date is one: ``gpt-4o-2024-13-45`` is no snapshot of gpt-4o (the
    provider refuses it), and was read as one."""
    for pattern in _SNAPSHOTS:
        suffix = pattern.search(name)
        if suffix is not None and suffix.start() > 0 and _calendar_date(suffix):
            yield suffix


def _calendar_date(suffix: re.Match[str]) -> bool:
    """Whether a suffix's year, month and day make a date of 2000-2099 (True: not a dated one)."""
    parts = suffix.groupdict()
    if not parts:  # Vertex's @YYYYMMDD is a date too; its other versions (@001, @latest) are not
        vertex = _VERTEX_DATE.fullmatch(suffix.group())
        if vertex is None:
            return True
        parts = vertex.groupdict()
    try:
        datetime.date(int(parts["y"]), int(parts["m"]), int(parts["d"]))
    except ValueError:
        return False
    return parts["y"].startswith("20")


def _not_a_date(name: str) -> str:
    """A dated snapshot suffix that is no date, ``name``'s last or one before a snapshot suffix
    taken off (``-20251399`` of ``anthropic.claude-sonnet-4-5-20251399-v1:0``), or ""."""
    for current in (name, *(rest for rest, _ in _strip_steps(name))):
        for pattern in _SNAPSHOTS:
            suffix = pattern.search(current)
            if suffix is not None and suffix.start() > 0 and not _calendar_date(suffix):
                return suffix.group()
    return ""


def _snapshot(index: Index, name: str, provider: str | None, depth: int) -> Found | None:
    for suffix in _snapshot_suffixes(name):
        inner = _find(index, name[: suffix.start()], provider, depth + 1)
        if inner is not None:
            return _then("snapshot", suffix.group(0), inner)
    return None


def _family(index: Index, name: str, provider: str | None) -> Found | None:
    """The longest catalog id or alias that starts ``name`` before a ``-`` or ``:`` and a word
    (not a version number, not a different kind of model such as ``-tts`` or ``-transcribe``):
    ``gpt-5-pro-2025-10-06-x`` is read as ``gpt-5-pro`` by its dated alias, and
    ``gpt-4o-mini:free`` as ``gpt-4o-mini`` (both were read as their shorter base, gpt-5 and gpt-4o,
    at other windows, caps and prices)."""
    for cut in reversed([m.start() for m in re.finditer("[-:]", name)]):
        suffix = name[cut + 1 :]
        if not suffix or suffix[0].isdigit() or _OTHER_KINDS.search(suffix):
            continue
        head = name[:cut]
        spec = _pick(index.by_id.get(head, ()), provider)
        if spec is not None:
            return _step("family", f"{name} starts with {spec.id}", spec)
        inner = _alias(index, head, provider) or _stripped(index, head, provider)
        if inner is not None:
            return _then("family", f"{name} starts with {head}", inner)
    return None


def _stripped(index: Index, name: str, provider: str | None, strict: bool = False) -> Found | None:
    """``name``'s id or alias once its snapshot suffixes are taken off (``-2025-10-06``); with
    ``strict``, the provider's own only."""
    for stripped, suffix in _strip_steps(name):
        inner = _exact(index, stripped, provider, strict) or _alias(index, stripped, provider, strict)
        if inner is not None:
            return _then("snapshot", suffix, inner)
    return None


def _find(index: Index, name: str, provider: str | None, depth: int) -> Found | None:
    if depth > _MAX_DEPTH or not name:
        return None
    direct = _exact(index, name, provider) or _alias(index, name, provider)
    scope = _scope(index, name)
    if scope is not None:
        # a snapshot of a scoped id that is itself an id (OpenRouter's ``deepseek/deepseek-r1-distill-
        # llama-70b``, 8,192 tokens) is read as that id is: the scope's match rule read its dated
        # form as DeepSeek's 64,000-token reasoner, and the request was cut to that window
        direct = direct or _stripped(index, name, provider)
        found = _scoped(index, scope, name, direct, depth)
    else:
        owned = _owned(index, name) if provider is None else None
        found = direct if owned is None or (direct and owned.spec is direct.spec) else owned
    if found is None:
        found = _snapshot(index, name, provider, depth)
    if found is None and depth == 0:
        found = _match(index, name, provider) or _family(index, name, provider)
    return found


def find(index: Index, model_id: str) -> Found | None:
    """The entry ``model_id`` resolves to by the rules above, or None (also for an id that no
    client sends: longer than 256 characters, or with spaces or control characters in it)."""
    name = model_id.strip(ID_BLANKS).lower()
    if len(name) > MAX_ID_CHARS or _UNPRINTABLE.search(name):
        return None
    if _not_a_date(name):
        # No provider serves it (OpenAI's and Anthropic's refuse such an id): a catalog's match
        # rule (``claude-sonnet-4-5*``) or a family read claude-sonnet-4-5-20251399 as a model.
        return _exact(index, name, None) or _alias(index, name, None)
    tuned = _fine_tuned_base(name)
    if tuned is not None:
        base = find(index, tuned)
        if base is None:
            return None
        unpriced = dataclasses.replace(base.spec, prices=None)
        return _then("fine-tuned", f"{name} -> {tuned} (its own prices: unknown)", base, unpriced)
    found = _find(index, name, None, 0)
    if found is not None:
        return found
    # Match rules and family prefixes also apply to the id with its scope and snapshot taken off.
    scope = _scope(index, name)
    provider, rest = (scope[0], scope[1]) if scope else (None, name)
    for candidate in dict.fromkeys((rest, *(s for s, _ in _strip_steps(rest)))):
        found = _match(index, candidate, provider) or _family(index, candidate, provider)
        if found is not None:
            return _then("scoped", scope[2], found) if scope else found
    return None


# Characters that stand for ASCII in pasted ids: dashes and minus signs, and invisible ones.
_LOOKALIKES = str.maketrans(
    {
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys("\u200b\u200c\u200d\u2060\ufeff", ""),
    }
)


def plain_lookalike(model_id: str) -> str:
    """``model_id`` as the ASCII it looks like (NFKC: fullwidth letters; dashes; no zero-width
    characters), for the ids an unknown one is compared with."""
    return unicodedata.normalize("NFKC", model_id).translate(_LOOKALIKES)


def id_problem(model_id: str) -> str:
    """What makes ``model_id`` one no client sends, or "" (an unknown id may be merely new)."""
    name = model_id.strip(ID_BLANKS)
    if len(name) > MAX_ID_CHARS:
        return f"longer than the {MAX_ID_CHARS} characters a model id can have"
    odd = _UNPRINTABLE.search(name) or re.search(r"[^\x20-\x7e]", name)
    if odd is None:
        undated = _not_a_date(name)
        return f"its snapshot suffix {undated} is not a date of 2000-2099" if undated else ""
    char = odd.group()
    named = unicodedata.name(char, "")
    at = odd.start() + 1 + len(model_id) - len(model_id.lstrip(ID_BLANKS))  # counted in the id as sent
    rule = "model ids are plain ASCII" if char > "\x7f" else "model ids hold no spaces or control characters"
    code = f"U+{ord(char):04X}"
    return f"character {at} is {f'{named} ({code})' if named else code}: {rule}"


def _fine_tuned_base(name: str) -> str | None:
    """The base model of a fine-tuned id (``ft:gpt-4o-mini:org::abc`` -> ``gpt-4o-mini``), its
    scope kept (``azure/ft:gpt-4o-mini:org::abc`` -> ``azure/gpt-4o-mini``); None for another id."""
    head, slash, rest = name.partition("/")
    tuned = _FINE_TUNED.match(rest if slash else name)
    if tuned is None:
        return None
    return f"{head}/{tuned['base']}" if slash else tuned["base"]


def _strip_steps(name: str) -> list[tuple[str, str]]:
    """``name`` with snapshot suffixes taken off one after another: (what is left, what was taken)."""
    out: list[tuple[str, str]] = []
    current = name
    while True:
        suffix = next(_snapshot_suffixes(current), None)
        if suffix is None:
            return out
        current = current[: suffix.start()]
        out.append((current, name[len(current) :]))
