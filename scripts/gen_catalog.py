"""Regenerate src/ctxbudget/catalog/models.json (dev time only; run with `make catalog`).

Sources, in the order they win:
1. scripts/catalog_facts.toml: curated values where we deliberately differ, models that no source
   carries, aliases, scopes, tokenizer families and cache rules;
2. genai-prices (installed as the `catalog` extra): every model with a context window, its prices
   (base tier, the price in force on the generation date) and its match rules;
3. litellm's model data file, read from the litellm wheel as data (the package is never
   imported): input caps below the window, output caps, minimum cacheable lengths, model kinds
   and deprecation dates. `make catalog` downloads the pinned wheel with pip.

Each model records the source of each value. The runtime never imports genai-prices or litellm.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import re
import sys
import tomllib
import zipfile
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from genai_prices import data_snapshot

from ctxbudget.catalog.matching import compile_clause
from ctxbudget.tokens.registry import encoding_name_for_model

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "scripts" / "catalog_facts.toml"
OUT = ROOT / "src" / "ctxbudget" / "catalog" / "models.json"
LITELLM_DATA = "litellm/model_prices_and_context_window_backup.json"

# Kinds we budget; anything else (speech, transcription, image or video generation, rerank) is left out.
_NOT_CHAT = re.compile(
    r"(^|[-_./:])(tts|transcribe|whisper|dall-e|gpt-image|imagen|image-generation|rerank|moderation"
    r"|sonic|veo|sora|lyria|audio-preview|realtime|live|native-audio|speech|aura|canvas|reel)([-_./:@]|$)",
    re.IGNORECASE,
)
_EMBEDDING = re.compile(r"embed", re.IGNORECASE)
_LITELLM_CHAT = {"chat", "responses", "completion", None}


def _number(value: Any) -> float | None:
    """A genai-prices price (Decimal or tiered) -> float of its base tier."""
    if value is None:
        return None
    if isinstance(value, Decimal):
        return float(value)
    base = getattr(value, "base", None)
    return float(base) if base is not None else None


def _price_in_force(model: Any, today: datetime.date) -> Any:
    """The price in force ``today``: the latest of those without a constraint or started by then,
    and, where the source prices hours of the day apart (DeepSeek's off-peak discount, its peak
    surcharge), the highest of them: the catalog has one price, and a cost ceiling checked at
    the cheap hour's price would approve a request that costs twice as much at another hour."""
    prices = model.prices
    if not isinstance(prices, list):
        return prices
    current = None
    for conditional in prices:
        start = getattr(conditional.constraint, "start_date", None)
        if conditional.constraint is None or (start is not None and start <= today):
            current = conditional.prices
    hourly = [c.prices for c in prices if _by_hour(c.constraint)]
    return (
        max([current, *hourly], key=lambda p: _number(getattr(p, "input_mtok", None)) or 0.0)
        if hourly
        else current
    )


def _by_hour(constraint: Any) -> bool:
    """A price for some hours of each day (genai-prices' time-of-day constraint)."""
    return constraint is not None and getattr(constraint, "start_time", None) is not None


def _hourly(model: Any) -> bool:
    return isinstance(model.prices, list) and any(_by_hour(c.constraint) for c in model.prices)


def _prices(model: Any, today: datetime.date, automatic_cache: bool) -> dict[str, Any] | None:
    price = _price_in_force(model, today)
    if price is None:
        return None
    inp, out = _number(price.input_mtok), _number(price.output_mtok)
    if inp is None or out is None:
        return None
    write5 = _number(price.cache_write_mtok)
    write1h = _number(getattr(price, "cache_write_1h_mtok", None))
    if write5 is None and automatic_cache:
        write5 = inp  # automatic caching has no write premium (OpenAI, Gemini implicit, DeepSeek)
    prices: dict[str, Any] = {
        "input": inp,
        "output": out,
        "cache_write_5m": write5,
        "cache_write_1h": write1h,
        "cache_read": _number(price.cache_read_mtok),
    }
    above = _long_context(price, automatic_cache)
    if above is not None:
        prices["long_context"] = above
    return prices


def _tier(value: Any) -> tuple[int, float] | None:
    """A tiered genai-prices price's first tier above its base: (start tokens, price)."""
    tiers = getattr(value, "tiers", None) or []
    return (int(tiers[0].start), float(tiers[0].price)) if tiers else None


def _long_context(price: Any, automatic_cache: bool) -> dict[str, Any] | None:
    """The prices above a request size, where the source tiers them by input tokens (Claude
    Sonnet 4.5, Gemini 2.5 Pro: every token of a request over 200,000 at the higher price)."""
    fields = {
        "input": price.input_mtok,
        "output": price.output_mtok,
        "cache_write_5m": price.cache_write_mtok,
        "cache_write_1h": getattr(price, "cache_write_1h_mtok", None),
        "cache_read": price.cache_read_mtok,
    }
    tiers = {k: _tier(v) for k, v in fields.items()}
    starts = {t[0] for t in tiers.values() if t is not None}
    if not starts:
        return None
    out: dict[str, Any] = {"above_tokens": min(starts)}
    for key, value in fields.items():
        tier = tiers[key]
        out[key] = tier[1] if tier is not None else _number(value)
    if out["cache_write_5m"] is None and automatic_cache:
        out["cache_write_5m"] = out["input"]
    return out


def _fill_cache_prices(prices: dict[str, Any], model_id: str, facts: dict[str, Any]) -> bool:
    """Cache prices a provider sets as multiples of the input price (Anthropic: 1.25x for a
    5-minute write, 2x for a 1-hour write, 0.1x for a read), where the source left them out."""
    filled = False
    for rule in facts.get("cache_price_rules", []):
        if rule["contains"] not in model_id.lower():
            continue
        for key in ("cache_write_5m", "cache_write_1h", "cache_read"):
            if prices.get(key) is None and prices["input"] is not None:
                prices[key] = round(float(prices["input"]) * rule[key], 6)
                filled = True
    return filled


def _clause(clause: Any) -> dict[str, Any]:
    """A genai-prices match clause as plain data (evaluated by ctxbudget.catalog.matching)."""
    for key in ("equals", "starts_with", "ends_with", "contains", "regex"):
        if hasattr(clause, key):
            return {key: getattr(clause, key)}
    if hasattr(clause, "or_"):
        return {"or": [_clause(c) for c in clause.or_]}
    if hasattr(clause, "and_"):
        return {"and": [_clause(c) for c in clause.and_]}
    sys.exit(f"unknown genai-prices clause {clause!r}")


def _equals(clause: dict[str, Any]) -> list[str]:
    if "equals" in clause:
        return [clause["equals"]]
    if "or" in clause:
        return [v for c in clause["or"] for v in _equals(c)]
    return []


def _without_equals(clause: dict[str, Any]) -> dict[str, Any] | None:
    """The clause with its plain `equals` branches taken out (they become aliases)."""
    if "equals" in clause:
        return None
    if "or" in clause:
        rest = [c for c in (_without_equals(c) for c in clause["or"]) if c is not None]
        return None if not rest else rest[0] if len(rest) == 1 else {"or": rest}
    return clause


def _litellm_index(wheel: Path) -> dict[str, dict[str, Any]]:
    with zipfile.ZipFile(wheel) as archive:
        raw = json.loads(archive.read(LITELLM_DATA))
    return {k.lower(): v for k, v in raw.items() if isinstance(v, dict)}


def _litellm_entry(
    litellm: dict[str, dict[str, Any]], provider: str, model: Any, facts: dict[str, Any]
) -> dict[str, Any] | None:
    """litellm's entry for the model: under its id, else under the literal ids of its match rule."""
    scopes = facts["litellm_scopes"].get(provider, [])
    names = [model.id, *(_equals(_clause(model.match)) if model.match is not None else [])]
    for name in names:
        for key in [f"{s}/{name}" for s in scopes] + [name]:
            found = litellm.get(key.lower())
            if found is not None:
                return found
    return None


def _kind(model_id: str, lite: dict[str, Any] | None) -> str | None:
    mode = lite.get("mode") if lite else None
    if _EMBEDDING.search(model_id) or mode == "embedding":
        return "embedding"
    if _NOT_CHAT.search(model_id) or mode not in _LITELLM_CHAT:
        return None
    return "chat"


def _tokenizer(model_id: str, facts: dict[str, Any]) -> tuple[str, str]:
    """A named tokenizer from the facts and its source: OpenAI's own mapping, else a family estimate."""
    bare = re.sub(r"^(?:[\w-]+/)+|^(?:[a-z-]+\.)?openai\.", "", model_id.lower())
    encoding = encoding_name_for_model(bare)
    if encoding is not None:
        return encoding.split("_")[0] + "_exact", "tiktoken_mapping"
    for family in facts["families"]:
        if family["prefix"] in bare:
            return family["tokenizer"], "harmony" if family["tokenizer"] == "harmony_estimate" else "estimate"
    return "default_estimate", "estimate"


def _curated_minimum(model_id: str, facts: dict[str, Any]) -> tuple[int, str] | None:
    """A documented minimum cacheable length for ``model_id`` from the facts, if any."""
    for rule in facts.get("cache_minimums", []):
        if rule["contains"] in model_id.lower():
            return int(rule["min_cacheable_tokens"]), str(rule["source"])
    return None


def _cache(
    model_id: str, prices: dict[str, Any] | None, lite: dict[str, Any] | None, facts: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    minimum = lite.get("prompt_cache_min_tokens") if lite else None
    if "claude" in model_id.lower():
        explicit_min = int(minimum) if minimum else 1024
        source = "litellm" if minimum else "anthropic_caching (default minimum)"
        curated = None if minimum else _curated_minimum(model_id, facts)
        if curated is not None:
            explicit_min, source = curated
        return {"mode": "explicit", "min_cacheable_tokens": explicit_min, "max_breakpoints": 4}, source
    if prices is not None and prices.get("cache_read") is not None:
        source = "litellm" if minimum else "automatic_caching (default minimum)"
        return {
            "mode": "automatic",
            "min_cacheable_tokens": int(minimum) if minimum else 1024,
            "max_breakpoints": 0,
        }, source
    return {"mode": "none", "min_cacheable_tokens": 0, "max_breakpoints": 0}, "no_cache_price"


def build_model(
    provider: str,
    model: Any,
    facts: dict[str, Any],
    litellm: dict[str, dict[str, Any]],
    today: datetime.date,
    curated_window: int | None = None,
) -> dict[str, Any] | None:
    """One catalog entry from genai-prices + litellm, or None when it is not a model we budget."""
    lite = _litellm_entry(litellm, provider, model, facts)
    kind = _kind(model.id, lite)
    lite_window = lite.get("max_input_tokens") if lite else None
    window = curated_window or model.context_window or lite_window
    if kind is None or not isinstance(window, int) or window <= 0:
        return None
    window_source = (
        "genai-prices" if model.context_window else "litellm (max_input_tokens; genai-prices has none)"
    )
    cache_read_published = _number(getattr(_price_in_force(model, today), "cache_read_mtok", None))
    prices = _prices(
        model, today, automatic_cache="claude" not in model.id and cache_read_published is not None
    )
    prices_source = (
        "genai-prices (the highest of its prices by hour of day)" if _hourly(model) else "genai-prices"
    )
    if prices is not None and _fill_cache_prices(prices, model.id, facts):
        prices_source = "genai-prices + cache_price_rules"
    cache, cache_source = _cache(model.id, prices, lite, facts)
    tokenizer, tokenizer_source = _tokenizer(model.id, facts)
    max_input = lite.get("max_input_tokens") if lite else None
    max_output = lite.get("max_output_tokens") if lite else None
    clause = _clause(model.match) if model.match is not None else None
    entry: dict[str, Any] = {
        "id": model.id,
        "provider": provider,
        "kind": kind,
        "context_window": window,
        "max_input_tokens": int(max_input) if isinstance(max_input, int) and 0 < max_input < window else None,
        "max_output_tokens": int(max_output) if isinstance(max_output, int) and max_output > 0 else None,
        "tokenizer": tokenizer,
        "prices": prices,
        "cache": cache,
        "aliases": sorted({a for a in (_equals(clause) if clause else []) if a != model.id}),
        "match": _without_equals(clause) if clause else None,
        "deprecated": (lite or {}).get("deprecation_date") or ("deprecated" if model.deprecated else None),
        "sources": {
            "context_window": window_source,
            "max_input_tokens": "litellm" if entry_cap(max_input, window) else None,
            "max_output_tokens": "litellm" if isinstance(max_output, int) else None,
            "prices": prices_source if prices else None,
            "cache": cache_source,
            "tokenizer": tokenizer_source,
            "match": "genai-prices" if clause else None,
        },
    }
    if max_output is not None and entry["max_output_tokens"] and entry["max_output_tokens"] > window:
        entry["max_output_tokens"] = window
    entry["sources"] = {k: v for k, v in entry["sources"].items() if v is not None}
    return {k: v for k, v in entry.items() if v not in (None, [])}


def entry_cap(max_input: Any, window: int) -> bool:
    """Whether litellm's input limit is a real cap below the window (else it is the window itself)."""
    return isinstance(max_input, int) and 0 < max_input < window


def apply_facts(entry: dict[str, Any] | None, facts: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """Curated values win; a curated model no source carries is built from them alone."""
    out = dict(entry or {"id": given["id"], "kind": "chat", "aliases": []})
    sources = dict(out.get("sources", {}))
    out["provider"] = given["provider"]
    for key in ("context_window", "max_input_tokens", "max_output_tokens", "deprecated"):
        if key in given:
            out[key] = given[key]
            sources[key] = given.get(f"{key}_source", "curated")
    if "tokenizer" in given:
        out["tokenizer"] = given["tokenizer"]
        sources["tokenizer"] = "estimate" if "estimate" in given["tokenizer"] else "tiktoken_mapping"
    if "cache" in given:
        rules = dict(facts["caches"][given["cache"]])
        sources["cache"] = rules.pop("source")
        out["cache"] = rules
    if "prices" in given:
        out["prices"] = dict(given["prices"])
        sources["prices"] = given["prices_source"]
    for key in ("context_window", "provider", "tokenizer", "prices", "cache"):
        if key not in out:
            sys.exit(f"{given['id']}: no {key} from any source; add it to catalog_facts.toml")
    out["sources"] = sources
    return out


def _without_dead_aliases(models: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The models less the aliases that are their own provider's ids: the exact id always wins
    (genai-prices matches gpt-4o-2024-05-13 under gpt-4o, which has an entry of its own at other
    prices), so such an alias never applies, and `models` would list it as if it did."""
    own = {(m["provider"], m["id"].lower()) for m in models}
    for model in models:
        if model.get("aliases"):
            model["aliases"] = [a for a in model["aliases"] if (model["provider"], a.lower()) not in own]
            if not model["aliases"]:
                del model["aliases"]
    return models


def _without_replaced(models: list[dict[str, Any]], facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The models less those a family alias of the facts replaces (``replaces = true``: a
    retired model listed under the family's name, such as Gemini 1.0 Pro as ``gemini-pro``), and
    that name taken out of other entries' aliases."""
    replaced = {a["alias"].lower() for a in facts["aliases"] if a.get("replaces")}
    kept = [m for m in models if m["id"].lower() not in replaced]
    for model in kept:
        if "aliases" in model:
            model["aliases"] = [a for a in model["aliases"] if a.lower() not in replaced]
    return kept


def _split_aliases(
    models: list[dict[str, Any]], litellm: dict[str, dict[str, Any]], facts: dict[str, Any]
) -> list[dict[str, Any]]:
    """An alias that litellm lists with a smaller window than its group's (gpt-5-chat-latest:
    128,000 under gpt-5's 400,000) becomes an entry of its own with that window: a snapshot or
    variant grouped for its price may not share the newest model's window."""
    out: list[dict[str, Any]] = []
    for entry in models:
        out.append(entry)
        scopes = facts["litellm_scopes"].get(entry["provider"], [])
        kept: list[str] = []
        split: list[dict[str, Any]] = []
        for alias in entry.get("aliases", []):
            lite = next(
                (litellm[k] for k in [*(f"{s}/{alias}" for s in scopes), alias] if k in litellm), None
            )
            window = lite.get("max_input_tokens") if lite else None
            limit = entry.get("max_input_tokens") or entry["context_window"]
            if not isinstance(window, int) or not 0 < window < limit:
                kept.append(alias)
                continue
            variant = {k: v for k, v in entry.items() if k not in ("aliases", "match", "max_input_tokens")}
            variant.update(id=alias, context_window=window)
            output = lite.get("max_output_tokens") if lite else None
            if isinstance(output, int) and 0 < output <= window:
                variant["max_output_tokens"] = output
            sources = {k: v for k, v in entry["sources"].items() if k not in ("match", "max_input_tokens")}
            variant["sources"] = sources | {
                "context_window": f"litellm (max_input_tokens of {alias}; genai-prices groups it with {entry['id']})",
                "max_output_tokens": "litellm",
            }
            out.append(variant)
            split.append(variant)
        kept = _to_variants(kept, split)
        if kept:
            entry["aliases"] = kept
        else:
            entry.pop("aliases", None)
    return out


def _spelling(model_id: str) -> str:
    """An id as its spellings share it: lower case, a dot written as a dash, no ``-latest``
    (``gpt-5-1-chat-latest``, ``gpt-5.1-chat`` and ``gpt-5.1-chat-latest`` are one)."""
    return model_id.lower().replace(".", "-").removesuffix("-latest")


def _to_variants(aliases: list[str], variants: list[dict[str, Any]]) -> list[str]:
    """``aliases`` less those that spell a variant split off their group: each moves to its
    variant (``gpt-5.1-chat`` is gpt-5.1-chat-latest's 128,000-token window, not gpt-5.1's)."""
    by_spelling = {_spelling(v["id"]): v for v in variants}
    kept = []
    for alias in aliases:
        variant = by_spelling.get(_spelling(alias))
        if variant is None:
            kept.append(alias)
        else:
            variant.setdefault("aliases", []).append(alias)
    return kept


def _apply_input_cap_rules(models: list[dict[str, Any]], facts: dict[str, Any]) -> None:
    """Provider rules for input caps, such as OpenAI's GPT-5 family: input = window - max output."""
    for rule in facts.get("input_cap_rules", []):
        for entry in models:
            bare = re.sub(r"^(?:[\w-]+/)+|^(?:[a-z-]+\.)?openai\.", "", entry["id"].lower())
            if not bare.startswith(rule["prefix"]) or entry["context_window"] != rule["context_window"]:
                continue
            if "max_input_tokens" in entry:
                continue
            output = entry.get("max_output_tokens") or rule["default_max_output_tokens"]
            entry["max_input_tokens"] = entry["context_window"] - output
            entry["sources"]["max_input_tokens"] = rule["source"]


def _inherit_input_caps(models: list[dict[str, Any]], facts: dict[str, Any]) -> None:
    """An entry for a first-party model served elsewhere (OpenRouter's `openai/gpt-5-pro`) that
    lists the same window takes the first party's input cap when it has none or a larger one, and
    a provider's entries for one model under several hosts (Bedrock's regional and global
    `openai.gpt-5.6-luna`) share the smallest cap among them: the cap belongs to the model (a
    reseller copying gpt-5's 272,000 for gpt-5-pro, whose cap is 128,000, let a fit send what the
    model refuses). A reseller's own smaller cap (GitHub Copilot's 64,000 for gpt-4o) stays its own."""
    first_party = {"openai", "anthropic", "google", "mistral", "deepseek", "x-ai", "cohere"}
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for entry in models:
        groups.setdefault((_unscoped(entry["id"]), entry["context_window"]), []).append(entry)
    for group in groups.values():
        own = [e for e in group if e["provider"] in first_party and e.get("max_input_tokens")]
        if own:
            _lower_caps(group, min(own, key=lambda e: e["max_input_tokens"]))
        for provider in {e["provider"] for e in group} - first_party:
            hosted = [e for e in group if e["provider"] == provider]
            capped = [e for e in hosted if e.get("max_input_tokens")]
            if capped:
                _lower_caps(hosted, min(capped, key=lambda e: e["max_input_tokens"]))


def _inherit_output_caps(models: list[dict[str, Any]], maker: Callable[[str], str | None]) -> None:
    """An entry with no output cap takes the one its model has under another entry: its maker's,
    or the smallest of its own provider's other hosts. Bedrock's `us.` and `eu.` ids of a Claude
    model had none where its `global.` id and Anthropic's own had 64,000, so a fit let through a
    reply size the model refuses: the cap belongs to the model, whatever window a host gives it
    (Bedrock's 1M-token Claude 4.6). A snapshot is its own model: a dated id is matched to its
    maker's dated name when it has one, else to the undated name (Anthropic lists Bedrock's
    claude-opus-4-1-20250805 as claude-opus-4-1). The maker is the provider whose rule claims
    the id (Google's entry of a Claude model is a host's); an id no rule claims (Gemma) takes a
    first party's entry."""
    first_party = {"openai", "anthropic", "google", "mistral", "deepseek", "x-ai", "cohere"}
    groups: dict[str, list[dict[str, Any]]] = {}
    for entry in models:
        groups.setdefault(_bare(entry["id"]), []).append(entry)
    named: dict[str, list[dict[str, Any]]] = {}  # the makers' ids and aliases
    for entry in models:
        claimed = maker(_bare(entry["id"]))
        if entry["provider"] == claimed or (claimed is None and entry["provider"] in first_party):
            names = {_bare(n) for n in (entry["id"], *entry.get("aliases", []))}
            for name in names | {n.removesuffix("-latest") for n in names}:  # claude-3-5-haiku-latest
                named.setdefault(name, []).append(entry)
    for bare, group in groups.items():
        own = named.get(bare) or named.get(_undated(bare), [])
        capped = [e for e in own if e.get("max_output_tokens")]
        if capped:
            _give_output_cap(group, min(capped, key=lambda e: e["max_output_tokens"]))
        for provider in {e["provider"] for e in group} - {e["provider"] for e in own}:
            hosted = [e for e in group if e["provider"] == provider]
            capped = [e for e in hosted if e.get("max_output_tokens")]
            if capped:
                _give_output_cap(hosted, min(capped, key=lambda e: e["max_output_tokens"]))


def _give_output_cap(entries: list[dict[str, Any]], origin: dict[str, Any]) -> None:
    """Give each of ``entries`` without an output cap ``origin``'s (a host's own cap stays)."""
    source = origin["sources"].get("max_output_tokens", "curated")
    for entry in entries:
        # a host's smaller window holds no larger a reply: its own limit is unknown, not the maker's
        if not entry.get("max_output_tokens") and origin["max_output_tokens"] <= entry["context_window"]:
            entry["max_output_tokens"] = origin["max_output_tokens"]
            entry["sources"]["max_output_tokens"] = f"{source} (as {origin['id']})"


def _bare(model_id: str) -> str:
    """A model id without its host's scope, region and provider prefixes (``openrouter/openai/``,
    ``us.anthropic.``, ``vertex_ai/``) or Bedrock's version suffix (``-v1:0``); its snapshot date
    stays (:func:`_undated` takes it off)."""
    return re.sub(r"-v\d+(?::\d+)?$", "", _unscoped(model_id))


def _unscoped(model_id: str) -> str:
    """A model id, lower case, without its host's scope, region and provider prefixes."""
    return re.sub(r"^(?:[\w-]+/)+|^(?:[a-z-]+\.)?[a-z]+\.", "", model_id.lower())


def _undated(bare: str) -> str:
    """A bare id without its snapshot date (``-20250929``, ``@20250929``)."""
    return re.sub(r"[-@]\d{8}$", "", bare)


def _lower_caps(entries: list[dict[str, Any]], origin: dict[str, Any]) -> None:
    """Give each of ``entries`` without a cap, or with a larger one, ``origin``'s cap."""
    cap = origin["max_input_tokens"]
    for entry in entries:
        if entry is not origin and entry.get("max_input_tokens", cap + 1) > cap:
            entry["max_input_tokens"] = cap
            entry["sources"]["max_input_tokens"] = (
                f"curated: inherited from {origin['provider']}/{origin['id']}"
            )


def build(litellm_wheel: Path) -> dict[str, Any]:
    """The whole catalog document."""
    facts = tomllib.loads(FACTS.read_text("utf-8"))
    snapshot = data_snapshot.get_snapshot()
    litellm = _litellm_index(litellm_wheel)
    today = datetime.date.today()
    order = {p: i for i, p in enumerate(facts["provider_order"])}
    providers = sorted(snapshot.providers, key=lambda p: (order.get(p.id, len(order)), p.id))
    curated = {(m["provider"], m["id"]): m for m in facts["models"]}
    models: list[dict[str, Any]] = []
    for provider in providers:
        for model in provider.models:
            given = curated.pop((provider.id, model.id), None)
            window = given.get("context_window") if given else None
            entry = build_model(provider.id, model, facts, litellm, today, window)
            if given is not None:
                entry = apply_facts(entry, facts, given)
            if entry is not None:
                models.append(entry)
    models.extend(apply_facts(None, facts, given) for given in curated.values())
    models = _split_aliases(models, litellm, facts)
    _apply_input_cap_rules(models, facts)
    _inherit_input_caps(models, facts)
    makers = [(p.id, compile_clause(_clause(p.model_match))) for p in providers if p.model_match is not None]
    _inherit_output_caps(models, lambda bare: next((p for p, rule in makers if rule(bare)), None))
    models = _without_dead_aliases(_without_replaced(models, facts))
    ids = {m["id"].lower() for m in models}
    for alias in facts["aliases"]:
        if alias["alias"].lower() in ids:
            sys.exit(f"alias {alias['alias']!r} is also a model id (the exact id would win): drop it")
    genai_version = importlib.metadata.version("genai-prices")
    sources = {
        "genai-prices": f"genai-prices {genai_version} data snapshot (github.com/pydantic/genai-prices); "
        f"prices: base tier, in force on {today.isoformat()}",
        "litellm": f"litellm {facts['litellm_version']} model_prices_and_context_window.json, read as data",
        "tiktoken_mapping": "OpenAI's model-to-encoding mapping (tiktoken), exact",
        **facts["sources"],
    }
    return {
        "schema_version": 1,
        "generated_from": f"genai-prices {genai_version} + litellm {facts['litellm_version']} data "
        "+ scripts/catalog_facts.toml",
        "sources": sources,
        "tokenizers": facts["tokenizers"],
        "default_tokenizer": "default_estimate",
        "families": facts["families"],
        "scopes": facts["scopes"],
        # genai-prices' rules for which provider an unscoped id belongs to (claude -> anthropic).
        "providers": [
            {"id": p.id, "model_match": _clause(p.model_match)}
            for p in providers
            if p.model_match is not None
        ],
        "aliases": [{"alias": a["alias"], "target": a["target"]} for a in facts["aliases"]],
        "models": models,
    }


# What resolution reads of an entry, first on its line: ctxbudget reads these off the front of
# each line and parses the rest of an entry only when its model is used (catalog/bundled.py).
_FIRST_KEYS = ("id", "provider", "aliases", "match")


def _keys_first(model: dict[str, Any]) -> dict[str, Any]:
    first = {k: model[k] for k in _FIRST_KEYS if k in model}
    return {**first, **{k: v for k, v in model.items() if k not in first}}


def dump(document: dict[str, Any]) -> str:
    """JSON with one model per line, so a review diff shows one line per changed model, and the
    models last, each line starting with the keys resolution reads (``_FIRST_KEYS``)."""
    head = {k: v for k, v in document.items() if k != "models"}
    text = json.dumps(head, indent=1, ensure_ascii=False)[:-2]
    lines = [
        json.dumps(_keys_first(m), ensure_ascii=False, separators=(",", ":")) for m in document["models"]
    ]
    return text + ',\n "models": [\n' + ",\n".join(lines) + "\n ]\n}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "litellm_wheel", type=Path, help="the pinned litellm wheel (downloaded by make catalog)"
    )
    args = parser.parse_args()
    facts_version = tomllib.loads(FACTS.read_text("utf-8"))["litellm_version"]
    if f"litellm-{facts_version}-" not in args.litellm_wheel.name:
        sys.exit(
            f"{args.litellm_wheel.name} is not litellm {facts_version} (catalog_facts.toml's litellm_version)"
        )
    document = build(args.litellm_wheel)
    OUT.write_text(dump(document), "utf-8", newline="")  # LF on every system: the index reads its bytes
    print(f"wrote {len(document['models'])} models to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
