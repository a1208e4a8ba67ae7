from __future__ import annotations

from pathlib import Path

import pytest

from ctxbudget import ConfigError, load_catalog
from ctxbudget.catalog.catalog import bundled_catalog, parse_catalog

REQUIRED = [
    "gpt-5",
    "gpt-5-mini",
    "gpt-5-nano",
    "gpt-5.4",
    "gpt-4.1",
    "gpt-4o",
    "gpt-4o-mini",
    "gpt-4",
    "o3",
    "o4-mini",
    "claude-opus-4-6",
    "claude-sonnet-4-6",
    "claude-sonnet-4-5",
    "claude-haiku-4-5",
    "gemini-3.1-pro-preview",
    "models/gemini-3.1-pro-preview",
    "gemini-2.5-pro",
    "gemini-2.5-flash",
    "codestral-latest",
    "mistral-medium-2505",
    "claude-sonnet",
    "claude-opus",
    "claude-haiku",
    "gemini-pro",
    "gemini-flash",
]


@pytest.mark.parametrize("model", REQUIRED)
def test_catalog_covers_required_models_with_sources(model: str) -> None:
    spec = bundled_catalog().get_model(model)
    assert spec.context_window > 0 and spec.max_output_tokens > 0
    assert {"context_window", "prices", "cache", "tokenizer"} <= set(spec.sources)


def test_resolution_order() -> None:
    catalog = bundled_catalog()
    assert catalog.resolve_window("gpt-4o", 5000).rule == "explicit"
    assert catalog.resolve_window("gpt-4o").rule == "exact"
    scoped = catalog.resolve_window("openai/gpt-5")
    assert (scoped.rule, scoped.context_window) == ("scoped", catalog.get_model("gpt-5").context_window)
    assert catalog.resolve_window("claude-sonnet").rule == "alias"
    floor = catalog.resolve_window("no-such-model-xyz")
    assert floor.rule == "floor"
    assert floor.context_window == min(m.context_window for m in catalog.models if m.kind == "chat")
    assert floor.warning is not None and "no-such-model-xyz" in floor.warning


def _entry(model_id: str, window: int) -> str:
    return f"""
[[models]]
id = "{model_id}"
provider = "test"
context_window = {window}
max_output_tokens = 1000
tokenizer = {{ encoding = "o200k_base", exact = false, safety_factor = 1.2 }}
prices = {{ input = 1, output = 2, cache_write_5m = 1.25, cache_write_1h = 2, cache_read = 0.1 }}
cache = {{ mode = "none", min_cacheable_tokens = 0, max_breakpoints = 0 }}
"""


def test_scoped_entries_resolve_a_bare_name_only_when_they_agree() -> None:
    agree = parse_catalog("schema_version = 1\n" + _entry("a/m1", 5000) + _entry("b/m1", 5000), "t")
    assert agree.resolve_window("m1").context_window == 5000
    disagree = parse_catalog("schema_version = 1\n" + _entry("a/m2", 5000) + _entry("b/m2", 9000), "t")
    assert disagree.resolve_window("m2").rule == "floor"
    unscoped_wins = parse_catalog("schema_version = 1\n" + _entry("a/m3", 5000) + _entry("m3", 7000), "t")
    assert unscoped_wins.resolve_window("m3").context_window == 7000


def test_conflicting_windows_for_one_id_resolve_to_the_smaller() -> None:
    catalog = parse_catalog("schema_version = 1\n" + _entry("dup", 9000) + _entry("dup", 4000), "t")
    assert catalog.resolve_window("dup").context_window == 4000


def test_user_catalog_adds_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text("schema_version = 1\n" + _entry("gpt-4o", 1234) + _entry("house-model", 4321))
    catalog = load_catalog([path])
    assert catalog.resolve_window("gpt-4o").context_window == 1234
    assert catalog.resolve_window("house-model").context_window == 4321
    assert catalog.tokenizer_for("house-model").safety_factor == 1.2


def test_invalid_catalog_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        "schema_version = 1\n" + _entry("x", 100).replace("context_window = 100", "context_window = -5")
    )
    with pytest.raises(ConfigError, match=r"bad.toml: \$\.models\[0\]\.context_window"):
        load_catalog([path])


def test_tokenizers_are_honest() -> None:
    catalog = bundled_catalog()
    assert catalog.tokenizer_for("gpt-5").exact is True
    claude = catalog.tokenizer_for("claude-sonnet-4-5")
    assert claude.exact is False and claude.safety_factor > 1
    assert catalog.tokenizer_for("anthropic/claude-3-7-sonnet").exact is False
    assert catalog.tokenizer_for("unknown-vendor-llm").exact is False
