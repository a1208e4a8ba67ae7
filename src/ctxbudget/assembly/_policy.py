"""Assembly policies: tiers in priority order, the envelope, the output reserve, the cost ceiling.

A policy is a frozen value. Files (TOML) are validated at the boundary with pydantic and errors
name the file and the field. Bundled policies live in ``ctxbudget/policies/*.toml`` and are
listed by :func:`list_policies`.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..config_files import read_config_text
from ..errors import ConfigError, unreadable_file
from ..regexes import parse_warning, slow_pattern_hint
from ..validation import first_error
from ..volatile import VolatileRules

__all__ = [
    "CompactionRules",
    "Policy",
    "Tier",
    "VolatileRules",
    "get_policy",
    "list_policies",
    "load_policy",
    "parse_policy",
]

Eviction = Literal["never", "protected", "compact", "rolling"]
CacheTTL = Literal["5m", "1h"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Tier:
    """One priority tier: a hard token ceiling and how its items may leave."""

    index: int
    name: str
    ceiling_tokens: int
    eviction: Eviction
    cached: bool
    cache_ttl: CacheTTL = "5m"
    # What compaction ranks against: the current question and the tags (changes every turn), or
    # the tags alone (stable across turns, so the compacted block stays in the cache).
    compact_query: Literal["question", "tags"] = "question"
    # How the compact tier reduces: verbatim sentences, or verbatim passage windows (trim/passages).
    compact_method: Literal["sentences", "passages"] = "sentences"


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactionRules:
    """When sessions compact old turns into the ledger, and how far (hysteresis)."""

    history_trigger_tokens: int = 8000
    low_water_ratio: float = 0.5
    keep_recent_turns: int = 2


@dataclass(frozen=True, kw_only=True, slots=True)
class Policy:
    """Tiers in priority order plus the envelope, output reserve and cost ceiling."""

    name: str
    description: str
    tiers: tuple[Tier, ...]
    envelope_tokens: int
    reserve_output_tokens: int
    expected_output_tokens: int
    cost_ceiling_usd: float | None
    max_output_tokens: int = 4096
    degrade: tuple[Literal["compact"], ...] = ()
    compaction: CompactionRules = CompactionRules()
    # Block 3: the compacted ledger, rendered after the cached tiers (None: bounded by the envelope).
    ledger_ceiling_tokens: int | None = None
    # Block 4: the current turn (question, tool calls and results); tool results are cut to fit.
    current_turn_ceiling_tokens: int | None = None
    volatile: VolatileRules = VolatileRules()  # noqa: RUF009 - a frozen value

    @property
    def prompt_tokens(self) -> int:
        """What the rendered prompt may use: the envelope after the output reserve."""
        return self.envelope_tokens - self.reserve_output_tokens

    def first_tier(self, eviction: str) -> Tier | None:
        """The first tier of an eviction kind ("rolling": where a conversation's history goes)."""
        return next((tier for tier in self.tiers if tier.eviction == eviction), None)

    def get_tier(self, ref: str | int) -> Tier:
        """A tier by name or index, a name first (a tier named "0" is that tier, not tier 0); the
        error lists the tiers."""
        named = next((tier for tier in self.tiers if ref == tier.name), None)
        if named is not None:
            return named
        for tier in self.tiers:
            if ref == tier.index or (isinstance(ref, str) and ref == str(tier.index)):
                return tier
        names = ", ".join(f"{t.index}={t.name}" for t in self.tiers)
        raise ConfigError(f"policy {self.name!r} has no tier {ref!r}; its tiers are {names}")


# A policy's values as written: ``ceiling_tokens = true`` became a 1-token ceiling, "15000" and
# 32000.0 passed as numbers, and an infinite cost ceiling printed as JSON's non-standard Infinity.
_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


# The most tokens a policy's budget, ceiling or reply may name: no model's window is near a
# billion tokens, so a number past it is a typo (a 4,001-digit envelope printed 11 kB of digits,
# twice, in the line that said it could not fit).
MAX_POLICY_TOKENS = 1_000_000_000


# The names the ledger's block (Block 3) and the current turn's (Block 4) are accounted under
# beside the tiers' (assembly._draft): no tier may take them.
LEDGER = "ledger"
CURRENT = "current"
RESERVED_TIER_NAMES = frozenset({LEDGER, CURRENT})


class _TierFile(BaseModel):
    model_config = _STRICT
    name: str = Field(min_length=1)
    ceiling_tokens: int = Field(ge=0, le=MAX_POLICY_TOKENS)
    eviction: Eviction
    cached: bool = False
    cache_ttl: CacheTTL = "5m"
    compact_query: Literal["question", "tags"] = "question"
    compact_method: Literal["sentences", "passages"] = "sentences"


class _CompactionFile(BaseModel):
    model_config = _STRICT
    history_trigger_tokens: int = Field(default=8000, gt=0, le=MAX_POLICY_TOKENS)
    low_water_ratio: float = Field(default=0.5, gt=0, lt=1)
    keep_recent_turns: int = Field(default=2, ge=0)


# Where a pattern that matches no characters shows it: words, digits, blanks, punctuation.
_ZERO_WIDTH_PROBE = "Aa Zz 09 _x-y.\n\t:/'\"é日 EX-04 2024-01-01T10:00:00Z "


def _checked_regex(regex: str) -> str:
    _compiled(regex)
    return regex


def _compiled(regex: str) -> None:
    if warned := parse_warning(regex):
        raise ValueError(f"the regular expression {regex!r} is ambiguous to Python ({warned}); escape it")
    try:
        pattern = re.compile(regex)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression {regex!r}: {exc}") from exc
    # checked before the probe below runs it: (.*){1,10}z took 52 s on the probe's 55 characters
    if hint := slow_pattern_hint(regex, long_texts=True):  # searched over whole pinned texts
        raise ValueError(f"the regular expression '{regex}' {hint}")
    if pattern.fullmatch("") or any(m.end() == m.start() for m in pattern.finditer(_ZERO_WIDTH_PROBE)):
        # it would find a volatile value of no characters (every place of every text, or at each
        # word boundary, as \b does)
        raise ValueError(f"the regular expression {regex!r} matches the empty text")


class _PatternFile(BaseModel):
    model_config = _STRICT
    kind: str = Field(min_length=1)
    regex: str = Field(min_length=1)

    @model_validator(mode="after")
    def _compiles(self) -> _PatternFile:
        _compiled(self.regex)
        return self


class _VolatileFile(BaseModel):
    model_config = _STRICT
    patterns: list[_PatternFile] = []
    # each checked on its own, so an error names its place ($.volatile.allow[1])
    allow: list[Annotated[str, AfterValidator(_checked_regex)]] = []


class _PolicyFile(BaseModel):
    model_config = _STRICT
    name: str = Field(min_length=1)
    description: str = ""
    envelope_tokens: int = Field(gt=0, le=MAX_POLICY_TOKENS)
    reserve_output_tokens: int = Field(default=0, ge=0, le=MAX_POLICY_TOKENS)
    expected_output_tokens: int = Field(default=1000, ge=0, le=MAX_POLICY_TOKENS)
    cost_ceiling_usd: float | None = Field(default=None, gt=0)
    max_output_tokens: int = Field(default=4096, gt=0, le=MAX_POLICY_TOKENS)
    degrade: list[Literal["compact"]] = []
    compaction: _CompactionFile = _CompactionFile()
    ledger_ceiling_tokens: int | None = Field(default=None, gt=0, le=MAX_POLICY_TOKENS)
    current_turn_ceiling_tokens: int | None = Field(default=None, gt=0, le=MAX_POLICY_TOKENS)
    volatile: _VolatileFile = _VolatileFile()
    tiers: list[_TierFile] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> _PolicyFile:
        if not self.name.strip() or not self.name.isprintable():
            raise ValueError(f"name must be printable text, not blank, got {self.name!r:.60}")
        names = [t.name for t in self.tiers]
        if len(set(names)) != len(names):
            raise ValueError(f"tier names must be unique, got {names}")
        reserved = sorted(set(names) & RESERVED_TIER_NAMES)
        if reserved:  # the ledger's and the current turn's blocks are accounted under these names
            raise ValueError(
                f"{', '.join(reserved)} names a block of every assembly, not a tier; name the tier otherwise"
            )
        if self.reserve_output_tokens >= self.envelope_tokens:
            raise ValueError("reserve_output_tokens must be smaller than envelope_tokens")
        pinned = [t.eviction == "never" for t in self.tiers]
        if pinned != sorted(pinned, reverse=True):  # INV-CTX-01 holds the first bytes of the prompt
            raise ValueError(
                "never-evicted (pinned) tiers must come before all others: the pinned prefix is the "
                "prompt's first bytes, and a tier before it that changes moves every byte after it"
            )
        cached = [t.cached for t in self.tiers]
        if cached != sorted(cached, reverse=True):
            raise ValueError("cached tiers must come before uncached ones: the cached prefix is contiguous")
        ttls = [t.cache_ttl for t in self.tiers if t.cached]
        if ttls != sorted(ttls, key=lambda ttl: ttl != "1h"):
            raise ValueError("1h-cached tiers must come before 5m-cached ones (provider rule)")
        return self


def _load_text(text: str, source: str) -> object:
    """The document of a policy file; nesting too deep for the parser, or a number too long for
    Python's int, is an error naming the file (they were tracebacks)."""
    yaml_file = source.lower().endswith((".yaml", ".yml"))
    # a byte-order mark (Windows editors write one) is read past, as a JSON body's is
    text = text.removeprefix("\ufeff")
    if yaml_file:  # PyYAML is imported for a YAML policy only (20 ms of a command's start)
        from ._policy_yaml import load_yaml

        return load_yaml(text, source)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    except (RecursionError, ValueError) as exc:  # nesting too deep, an integer of thousands of digits
        raise unreadable_file(source, exc) from exc


def parse_policy(text: str, source: str) -> Policy:
    """Validate policy ``text`` (YAML when ``source`` ends in .yaml/.yml, else TOML); errors name
    ``source`` and the field path."""
    raw = _load_text(text, source)
    if not isinstance(raw, dict):  # pydantic would name its own class (_PolicyFile)
        kinds = {list: "a list", str: "a text", bool: "a boolean", int: "a number", float: "a number"}
        found = "nothing" if raw is None else kinds.get(type(raw), f"a {type(raw).__name__}")
        raise ConfigError(
            f"{source}: a policy is a table of settings (name, envelope_tokens, tiers, ...), got {found}"
        )
    try:
        parsed = _PolicyFile.model_validate(raw)
    except ValidationError as exc:
        path, message, _ = first_error(exc)
        raise ConfigError(f"{source}: {path}: {message}") from exc
    except RecursionError as exc:
        raise unreadable_file(source, exc) from exc
    return Policy(
        name=parsed.name,
        description=parsed.description,
        tiers=tuple(
            Tier(
                index=i,
                name=t.name,
                ceiling_tokens=t.ceiling_tokens,
                eviction=t.eviction,
                cached=t.cached,
                cache_ttl=t.cache_ttl,
                compact_query=t.compact_query,
                compact_method=t.compact_method,
            )
            for i, t in enumerate(parsed.tiers)
        ),
        envelope_tokens=parsed.envelope_tokens,
        reserve_output_tokens=parsed.reserve_output_tokens,
        expected_output_tokens=parsed.expected_output_tokens,
        cost_ceiling_usd=parsed.cost_ceiling_usd,
        max_output_tokens=parsed.max_output_tokens,
        degrade=tuple(parsed.degrade),
        compaction=CompactionRules(**parsed.compaction.model_dump()),
        ledger_ceiling_tokens=parsed.ledger_ceiling_tokens,
        current_turn_ceiling_tokens=parsed.current_turn_ceiling_tokens,
        volatile=VolatileRules(
            patterns=tuple((p.kind, p.regex) for p in parsed.volatile.patterns),
            allow=tuple(parsed.volatile.allow),
        ),
    )


def list_policies() -> list[str]:
    """Names of the bundled policies."""
    return list(_bundled_names())


@functools.cache  # the package's files: read once a process, as its modules are
def _bundled_names() -> tuple[str, ...]:
    folder = importlib.resources.files("ctxbudget.policies")
    return tuple(sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml")))


def get_policy(name: str) -> Policy:
    """A bundled policy by name; the error lists the bundled ones. Parsed once a process (a
    frozen value, shared; two threads asking first at once may each parse it: equal values): a
    session's creation read and validated it twice, 0.8 ms each."""
    if name not in _bundled_names():
        raise ConfigError(f"unknown policy {name!r}; bundled: {', '.join(list_policies())} (or pass a file)")
    return _bundled_policy(name)


@functools.cache
def _bundled_policy(name: str) -> Policy:
    text = (importlib.resources.files("ctxbudget.policies") / f"{name}.toml").read_text("utf-8")
    return parse_policy(text, f"bundled policy {name}")


def load_policy(ref: str) -> Policy:
    """A bundled policy name, or the path of a policy file (TOML, or YAML by extension). A
    bundled name is the bundled policy whatever the current folder holds (a folder or file named
    ``legal-review`` there made every assembly and session of that policy fail or change);
    a file of that name is read by a path (``./legal-review``)."""
    if isinstance(ref, Path):
        ref = str(ref)
    if not isinstance(ref, str) or not ref:
        raise ConfigError(f"a policy is a bundled name or a file's path, got {ref!r:.60}")
    path = Path(ref)
    if ref.lower().endswith((".toml", ".yaml", ".yml")) or (path.exists() and ref not in list_policies()):
        return parse_policy(read_config_text(path, "policy"), ref)
    return get_policy(ref)
