"""Regenerate src/ctxbudget/catalog/models.toml (dev time only; run with `make catalog`).

Windows and prices come from genai-prices (installed from the registry as the `catalog` extra);
output caps, cache rules, tokenizers, aliases and the values where we deliberately differ come
from scripts/catalog_facts.toml. Each model records where each value came from. The runtime
never imports genai-prices.
"""

from __future__ import annotations

import importlib.metadata
import sys
import tomllib
from decimal import Decimal
from pathlib import Path
from typing import Any

import tomli_w
from genai_prices import data_snapshot

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "scripts" / "catalog_facts.toml"
OUT = ROOT / "src" / "ctxbudget" / "catalog" / "models.toml"


def _number(value: Any) -> float | None:
    """A genai-prices price (Decimal or tiered) -> float of its base tier."""
    if value is None:
        return None
    if isinstance(value, Decimal):
        return float(value)
    base = getattr(value, "base", None)
    return float(base) if base is not None else None


def _current_price(model: Any) -> Any:
    prices = model.prices
    if isinstance(prices, list):
        return prices[-1].prices
    return prices


def _genai_model(snapshot: Any, provider: str, model_id: str) -> Any | None:
    for p in snapshot.providers:
        if p.id == provider:
            for m in p.models:
                if m.id == model_id:
                    return m
    return None


def _prices(facts: dict[str, Any], genai: Any | None, genai_label: str) -> tuple[dict[str, float], str]:
    if "prices" in facts:
        given = facts["prices"]
        inp, out = float(given["input"]), float(given["output"])
        return {
            "input": inp,
            "output": out,
            "cache_write_5m": inp,
            "cache_write_1h": inp,
            "cache_read": inp,
        }, facts["prices_source"]
    if genai is None:
        sys.exit(f"no prices for {facts}: add them to catalog_facts.toml")
    price = _current_price(genai)
    inp = _number(price.input_mtok) or 0.0
    out = _number(price.output_mtok) or 0.0
    read = _number(price.cache_read_mtok)
    write5 = _number(price.cache_write_mtok)
    write1h = _number(getattr(price, "cache_write_1h_mtok", None))
    return {
        "input": inp,
        "output": out,
        # No write premium where the provider lists none (OpenAI, Gemini implicit caching).
        "cache_write_5m": write5 if write5 is not None else inp,
        "cache_write_1h": write1h if write1h is not None else (write5 if write5 is not None else inp),
        "cache_read": read if read is not None else inp,
    }, f"{genai_label} (base tier)"


def build_model(
    model_id: str, facts: dict[str, Any], shared: dict[str, Any], genai: Any, label: str
) -> dict[str, Any]:
    sources = shared["sources"]
    found = _genai_model(genai, facts["provider"], model_id)
    window = facts.get("context_window") or (found.context_window if found else None)
    if not window:
        sys.exit(f"{model_id}: no context window in genai-prices; add one to catalog_facts.toml")
    window_source = facts.get("context_window_source", label)
    prices, prices_source = _prices(facts, found, label)
    cache = dict(shared["caches"][facts["cache"]])
    cache_source = cache.pop("source")
    tokenizer = shared["tokenizers"][facts["tokenizer"]]

    def resolve(text: str) -> str:
        key = text.split(" ", 1)[0].split(":", 1)[0]
        return text.replace(key, sources[key], 1) if key in sources else text

    return {
        "id": model_id,
        "provider": facts["provider"],
        "kind": "chat",
        "context_window": int(window),
        "max_output_tokens": int(facts["max_output_tokens"]),
        "tokenizer": tokenizer,
        "prices": prices,
        "cache": cache,
        "sources": {
            "context_window": resolve(window_source),
            "max_output_tokens": resolve(
                facts.get("max_output_tokens_source", f"{facts['provider']}_models")
            ),
            "prices": resolve(prices_source),
            "cache": resolve(cache_source),
            "tokenizer": resolve("estimate") if not tokenizer["exact"] else "tiktoken encoding, exact",
        },
    }


def main() -> None:
    shared = tomllib.loads(FACTS.read_text("utf-8"))
    snapshot = data_snapshot.get_snapshot()
    label = f"genai-prices {importlib.metadata.version('genai-prices')}"
    models = [build_model(mid, f, shared, snapshot, label) for mid, f in shared["models"].items()]
    document = {
        "schema_version": 1,
        "generated_from": f"{label} + scripts/catalog_facts.toml",
        "default_tokenizer": shared["default_tokenizer"],
        "families": [
            {**f, "source": shared["sources"].get(f["source"], f["source"])} for f in shared["families"]
        ],
        "aliases": shared["aliases"],
        "models": models,
    }
    header = (
        "# Generated by scripts/gen_catalog.py (make catalog). Edit scripts/catalog_facts.toml instead.\n"
    )
    OUT.write_text(header + tomli_w.dumps(document), "utf-8")
    print(f"wrote {len(models)} models to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
