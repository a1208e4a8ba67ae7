from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbudget import ConfigError, count, load_catalog
from ctxbudget.catalog.catalog import FLOOR_WINDOW_TOKENS, bundled_catalog, bundled_text, parse_catalog
from ctxbudget.catalog.files import check_rules
from ctxbudget.catalog.schema import CatalogFile
from ctxbudget.errors import UnknownModelError

# Ids as clients send them -> (catalog id, provider, window, input cap). Windows and caps as the
# providers' model pages publish them (Anthropic models overview, OpenAI model pages, Google's
# Gemini models page, AWS Bedrock model ids, Vertex AI model versions), read 2026-11.
REAL_IDS: list[tuple[str, str, str, int, int | None]] = [
    # Anthropic: bare, dated, -latest, aliases, Vertex @ dates, the LiteLLM-style scope
    ("claude-sonnet-4-5", "claude-sonnet-4-5", "anthropic", 200_000, None),
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5", "anthropic", 200_000, None),
    ("claude-opus-4-1-20250805", "claude-opus-4-1", "anthropic", 200_000, None),
    ("claude-haiku-4-5-20251001", "claude-haiku-4-5", "anthropic", 200_000, None),
    ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet-20241022", "anthropic", 200_000, None),
    ("claude-3-7-sonnet-latest", "claude-3-7-sonnet-latest", "anthropic", 200_000, None),
    ("claude-3-7-sonnet-20250219", "claude-3-7-sonnet-latest", "anthropic", 200_000, None),
    ("claude-3-opus-20240229", "claude-3-opus-latest", "anthropic", 200_000, None),
    ("claude-3-5-haiku-20241022", "claude-3-5-haiku-latest", "anthropic", 200_000, None),
    ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5", "anthropic", 200_000, None),
    ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5", "anthropic", 200_000, None),
    ("anthropic/claude-opus-4-1-20250805", "claude-opus-4-1", "anthropic", 200_000, None),
    ("claude-sonnet", "claude-sonnet-4-6", "anthropic", 200_000, None),
    # the seed's family aliases: gemini-pro is the Pro family, not the retired 32k Gemini 1.0 Pro
    ("gemini-pro", "gemini-2.5-pro", "google", 1_048_576, None),
    ("gemini-flash", "gemini-2.5-flash", "google", 1_048_576, None),
    ("CLAUDE-SONNET-4-5", "claude-sonnet-4-5", "anthropic", 200_000, None),
    ("claude-3-5-sonnet-latest", "claude-3-5-sonnet", "anthropic", 200_000, None),
    ("claude-2.0", "claude-2.0", "anthropic", 100_000, None),  # claude-2.1 doubled it
    ("claude-2.1", "claude-2", "anthropic", 200_000, None),
    # Vertex AI
    ("vertex_ai/claude-sonnet-4-5@20250929", "claude-sonnet-4-5", "google", 200_000, None),
    ("vertex_ai/gemini-2.5-pro", "gemini-2.5-pro", "google", 1_048_576, None),
    # AWS Bedrock: vendor ids, region prefixes, the bedrock/ scope
    (
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        "regional.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "aws",
        200_000,
        None,
    ),
    (
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "regional.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "aws",
        200_000,
        None,
    ),
    (
        "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "aws",
        200_000,
        None,
    ),
    (
        "bedrock/us.anthropic.claude-3-5-sonnet-20241022-v2:0",
        "regional.anthropic.claude-3-5-sonnet-20241022-v2:0",
        "aws",
        200_000,
        None,
    ),
    ("meta.llama3-1-70b-instruct-v1:0", "meta.llama3-1-70b-instruct-v1:0", "aws", 128_000, None),
    # OpenAI: bare, dated, scoped, Azure, case
    ("gpt-5", "gpt-5", "openai", 400_000, 272_000),
    ("gpt-5-2025-08-07", "gpt-5", "openai", 400_000, 272_000),
    ("gpt-5-mini-2025-08-07", "gpt-5-mini", "openai", 400_000, 272_000),
    ("openai/gpt-5", "gpt-5", "openai", 400_000, 272_000),
    ("gpt-5-chat-latest", "gpt-5-chat-latest", "openai", 128_000, None),
    ("gpt-5-pro", "gpt-5-pro", "openai", 400_000, 128_000),
    ("gpt-4o", "gpt-4o", "openai", 128_000, None),
    ("gpt-4o-2024-08-06", "gpt-4o", "openai", 128_000, None),
    ("gpt-4o-2024-05-13", "gpt-4o-2024-05-13", "openai", 128_000, None),
    ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", "openai", 128_000, None),
    ("azure/gpt-4o", "gpt-4o", "openai", 128_000, None),
    ("GPT-4o", "gpt-4o", "openai", 128_000, None),
    ("gpt-4.1", "gpt-4.1", "openai", 1_047_576, None),
    ("gpt-4.1-mini", "gpt-4.1-mini", "openai", 1_047_576, None),
    ("gpt-4", "gpt-4", "openai", 8_192, None),
    ("gpt-4-0613", "gpt-4", "openai", 8_192, None),
    ("gpt-4-turbo-2024-04-09", "gpt-4-turbo", "openai", 128_000, None),
    ("gpt-3.5-turbo", "gpt-3.5-turbo", "openai", 16_385, None),
    ("gpt-3.5-turbo-0613", "gpt-3.5-turbo-0613", "openai", 4_096, None),  # the 16k was its own model
    ("gpt-4o-audio-preview-2024-12-17", "gpt-4o-audio-preview", "openai", 128_000, None),
    ("gpt-4o-mini-audio-preview", "gpt-4o-mini-audio-preview", "openai", 128_000, None),
    ("o1-2024-12-17", "o1", "openai", 200_000, None),
    ("o3-mini-2025-01-31", "o3-mini", "openai", 200_000, None),
    ("o4-mini-2025-04-16", "o4-mini", "openai", 200_000, None),
    # Google
    ("gemini-2.5-flash", "gemini-2.5-flash", "google", 1_048_576, None),
    ("gemini/gemini-2.5-flash", "gemini-2.5-flash", "google", 1_048_576, None),
    ("models/gemini-2.5-pro", "gemini-2.5-pro", "google", 1_048_576, None),
    ("gemini-2.0-flash-001", "gemini-2.0-flash", "google", 1_048_576, None),
    # xAI, Mistral, Cohere, DeepSeek
    ("grok-3-latest", "grok-3", "x-ai", 131_072, None),
    ("xai/grok-3", "grok-3", "x-ai", 131_072, None),
    ("mistral-medium-2505", "mistral-medium-2505", "mistral", 128_000, None),
    ("command-r-plus", "command-r-plus", "cohere", 128_000, None),
    ("command-r-plus-04-2024", "command-r-plus", "cohere", 128_000, None),
    ("deepseek/deepseek-reasoner", "deepseek-reasoner", "deepseek", 64_000, None),
    # OpenRouter: its own ids, with or without its scope
    ("openrouter/openai/gpt-4o", "openai/gpt-4o", "openrouter", 128_000, None),
    ("openai/gpt-4o-mini", "gpt-4o-mini", "openai", 128_000, None),
    ("deepseek/deepseek-chat", "deepseek-chat", "deepseek", 64_000, None),
    ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5", "anthropic", 200_000, None),
    ("claude-haiku-4.5", "claude-haiku-4-5", "anthropic", 200_000, None),
    ("o3-2025-04-16", "o3", "openai", 200_000, None),
    ("mistral-large-2407", "mistral-large-2407", "mistral", 128_000, None),
    ("anthropic/claude-haiku-4-5-20251001", "claude-haiku-4-5", "anthropic", 200_000, None),
]


@pytest.mark.parametrize(("sent", "catalog_id", "provider", "window", "cap"), REAL_IDS)
def test_real_ids_resolve(sent: str, catalog_id: str, provider: str, window: int, cap: int | None) -> None:
    resolution = bundled_catalog().resolve_window(sent)
    assert resolution.spec is not None
    assert (resolution.catalog_id, resolution.spec.provider) == (catalog_id, provider)
    assert (resolution.context_window, resolution.max_input_tokens) == (window, cap)
    assert resolution.path and resolution.warning is None


def test_the_table_is_large_and_varied() -> None:
    assert len(REAL_IDS) >= 40
    rules = {bundled_catalog().resolve_window(sent).rule for sent, *_ in REAL_IDS}
    assert {"exact", "alias", "scoped", "snapshot", "match"} <= rules


def test_the_path_names_each_step() -> None:
    resolution = bundled_catalog().resolve_window("bedrock/us.anthropic.claude-3-5-sonnet-20241022-v2:0")
    assert resolution.rule == "match"
    assert resolution.path[0] == "scoped bedrock/ -> aws"
    dated = bundled_catalog().resolve_window("cohere/command-r-plus-04-2024")
    assert dated.path == ("scoped cohere/ -> cohere", "snapshot -04-2024", "exact command-r-plus")
    assert dated.rule == "snapshot"


def test_a_scope_chooses_the_provider_entry() -> None:
    catalog = bundled_catalog()
    assert catalog.resolve_window("claude-sonnet-4-5").spec.provider == "anthropic"  # type: ignore[union-attr]
    assert catalog.resolve_window("vertex_ai/claude-sonnet-4-5").spec.provider == "google"  # type: ignore[union-attr]


def test_a_providers_own_name_is_a_scope() -> None:
    """A provider's name as `ctxbudget models` prints it scopes an id to that provider's entry:
    `github-copilot/gpt-4o` was an unknown scope, read as OpenAI's gpt-4o without Copilot's
    64,000-token input cap, while `github_copilot/gpt-4o` had it."""
    catalog = bundled_catalog()
    for provider in set(catalog.scopes.values()):
        assert catalog.scopes.get(provider) == provider, provider
    copilot = catalog.resolve_window("github-copilot/gpt-4o")
    assert (copilot.spec.provider, copilot.input_limit) == ("github-copilot", 64_000)  # type: ignore[union-attr]


def test_unknown_id_is_an_error_naming_the_closest_ids_and_the_ways_out() -> None:
    with pytest.raises(UnknownModelError) as caught:
        bundled_catalog().resolve_window("gtp-4o")
    assert "gpt-4o" in caught.value.closest
    message = str(caught.value)
    assert "'gtp-4o'" in message and "max_context_tokens=" in message and "load_catalog" in message
    assert "--" not in message  # the library names its options; the CLI names its flags
    assert isinstance(caught.value, ConfigError)


def test_floor_on_request() -> None:
    floor = bundled_catalog().resolve_window("no-such-model-xyz", unknown_model="floor")
    assert (floor.rule, floor.context_window, floor.spec) == ("floor", FLOOR_WINDOW_TOKENS, None)
    assert floor.warning is not None and "no-such-model-xyz" in floor.warning


def test_explicit_window_wins_and_keeps_the_input_cap() -> None:
    catalog = bundled_catalog()
    explicit = catalog.resolve_window("gpt-5", 390_000)
    assert (explicit.rule, explicit.context_window, explicit.input_limit) == ("explicit", 390_000, 272_000)
    unknown = catalog.resolve_window("house-llm", 32_000)
    assert (unknown.rule, unknown.context_window, unknown.spec) == ("explicit", 32_000, None)


def test_family_rule_lands_on_the_longest_catalog_id_with_a_warning() -> None:
    resolution = bundled_catalog().resolve_window("llama-3.3-70b-versatile")
    assert (resolution.rule, resolution.catalog_id) == ("family", "llama-3.3-70b")
    assert resolution.warning is not None and "llama-3.3-70b" in resolution.warning


@pytest.mark.parametrize(
    ("sent", "model"),
    [
        ("gpt-5-pro-2025-10-06-x", "gpt-5-pro"),  # by its dated alias (was gpt-5: 12x cheaper)
        ("gpt-4o-mini-2024-07-18-batch", "gpt-4o-mini"),  # was gpt-4o
        ("o3-mini-2025-01-31-high", "o3-mini"),  # was o3
        ("gpt-4o-mini:free", "gpt-4o-mini"),  # a `:` variant (was gpt-4o)
        ("gpt-4o-mini-2024-07-18:free", "gpt-4o-mini"),
    ],
)
def test_family_is_the_longest_id_or_alias_the_id_starts_with(sent: str, model: str) -> None:
    resolution = bundled_catalog().resolve_window(sent)
    assert (resolution.rule, resolution.catalog_id) == ("family", model)
    assert resolution.warning is not None and repr(model) in resolution.warning


@pytest.mark.parametrize(
    "sent",
    [
        "gpt-4.5-preview",
        "gpt-5.7",
        "gpt-4o-transcribe",
        "gpt-4o-mini-tts",
        "gpt-4o-mini:search",  # a kind after a `:` as after a `-`
        "gpt-4o-mini-tts:free",
        "/gpt-4o",
        "azure//gpt-4o",
        "gpt-4o@@",
    ],
)
def test_family_never_crosses_a_version_or_a_kind(sent: str) -> None:
    with pytest.raises(UnknownModelError):
        bundled_catalog().resolve_window(sent)


@pytest.mark.parametrize("sent", ["x-" * 50_000, "gpt-4o\nanything", "gpt 4o", "claude-" + "3-" * 400])
def test_ids_no_client_sends_are_unknown_at_once(sent: str) -> None:
    with pytest.raises(UnknownModelError):
        bundled_catalog().resolve_window(sent)


@pytest.mark.parametrize("bad", [None, 123, 1.5, True, b"gpt-4o", ["gpt-4o"]])
def test_a_model_id_that_is_not_a_string_is_a_config_error(bad: object) -> None:
    with pytest.raises(ConfigError, match="a model id is a string"):
        bundled_catalog().resolve_window(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("blank", ["", " ", "\t\n"])
def test_a_blank_model_id_is_a_config_error_even_with_the_floor(blank: str) -> None:
    with pytest.raises(ConfigError, match="model id is blank"):
        bundled_catalog().resolve_window(blank, unknown_model="floor")


@pytest.mark.parametrize("bad", [-1, 1.5, "8000", None, True, float("inf")])
def test_a_bad_explicit_window_is_a_config_error(bad: object) -> None:
    with pytest.raises(ConfigError, match="max_context_tokens"):
        bundled_catalog().resolve_window("gpt-4o", bad)  # type: ignore[arg-type]


def test_every_bundled_match_rule_passes_the_checks_a_user_catalog_s_rules_pass() -> None:
    """A catalog compiles its rules without the slow-pattern check (run when its file is read):
    the bundled file's rules are held to it here."""
    check_rules(json.loads(bundled_text()), "bundled")


def test_bundled_catalog_validates_and_every_value_has_a_source() -> None:
    raw = json.loads(bundled_text())
    CatalogFile.model_validate(raw)
    known = set(raw["sources"])
    providers = {m["provider"] for m in raw["models"]}
    assert len(raw["models"]) > 1000
    assert {
        "openai",
        "anthropic",
        "google",
        "mistral",
        "deepseek",
        "x-ai",
        "cohere",
        "aws",
        "azure",
    } <= providers
    for model in raw["models"]:
        assert {"context_window", "tokenizer", "cache"} <= set(model["sources"]), model["id"]
        for field, source in model["sources"].items():
            assert source.split(" ", 1)[0].split(":", 1)[0] in known, (model["id"], field, source)
        if "prices" in model:
            assert "prices" in model["sources"], model["id"]


def test_claude_3_5_sonnet_is_priced_and_marked_retired() -> None:
    spec = bundled_catalog().get_model("claude-3-5-sonnet-20241022")
    assert spec.prices is not None
    assert (spec.prices.input, spec.prices.output, spec.prices.cache_read) == (3.0, 15.0, 0.3)
    assert spec.deprecated == "2025-10-22"


def test_a_price_by_hour_of_day_is_the_highest_of_the_day() -> None:
    """DeepSeek's off-peak discount (16:30-00:30 UTC) was the catalog's price: a ceiling checked
    at it approved requests that cost twice as much in the other 16 hours."""
    catalog = bundled_catalog()
    for model_id, standard in (("deepseek-chat", (0.27, 1.1)), ("deepseek-reasoner", (0.55, 2.19))):
        prices = catalog.get_model(model_id).prices
        assert prices is not None and (prices.input, prices.output) == standard
        assert "highest of its prices by hour" in catalog.get_model(model_id).sources["prices"]


@pytest.mark.parametrize(
    ("sent", "window", "prices"),
    [
        # the 0301 snapshot resolved by its date to gpt-3.5-turbo: 16,385 tokens, four times its own
        ("gpt-3.5-turbo-0301", 4_096, (1.5, 2.0)),
        # Google's id for Flash-8B matched the gemini-1.5-flash rule, priced twice as much
        ("gemini-1.5-flash-8b", 1_000_000, (0.0375, 0.15)),
        ("gemini-1.5-flash-8b-001", 1_000_000, (0.0375, 0.15)),
        ("models/gemini-1.5-flash-8b", 1_000_000, (0.0375, 0.15)),  # the rule matched the scoped id first
    ],
)
def test_retired_snapshots_have_their_own_window_and_prices(
    sent: str, window: int, prices: tuple[float, float]
) -> None:
    spec = bundled_catalog().get_model(sent)
    assert spec.context_window == window and spec.prices is not None
    assert (spec.prices.input, spec.prices.output) == prices


def test_an_input_cap_belongs_to_the_model_on_every_host() -> None:
    """OpenRouter's gpt-5-pro kept gpt-5's 272,000 (OpenAI's cap is 128,000), and Bedrock's
    regional ids had no cap where the global ones had 922,000."""
    catalog = bundled_catalog()
    limits = {m: catalog.resolve_window(m).input_limit for m in ("gpt-5-pro", "openrouter/openai/gpt-5-pro")}
    assert set(limits.values()) == {128_000}
    for host in ("global", "us", "eu"):
        assert catalog.resolve_window(f"{host}.openai.gpt-5.6-luna").input_limit == 922_000
    assert catalog.resolve_window("gpt-4o").input_limit == 128_000  # not a reseller's own 64,000


@pytest.mark.parametrize(
    "sent",
    ["gpt-5.1-chat", "gpt-5-1-chat-latest", "gpt-5.1-chat-latest", "azure/gpt-5.1-chat", "gpt-5.2-chat"],
)
def test_a_chat_variant_has_its_own_window_in_every_spelling(sent: str) -> None:
    """genai-prices groups gpt-5.1-chat with gpt-5.1 for its price: the spellings without
    `-latest` or with a dash for the dot were budgeted at the reasoning model's 400,000 tokens."""
    spec = bundled_catalog().get_model(sent)
    assert spec.id.endswith("-chat-latest")
    assert (spec.context_window, spec.max_output_tokens) == (128_000, 16_384)


@pytest.mark.parametrize(
    ("sent", "cap"),
    [
        ("claude-opus-4-1", 32_000),
        ("eu.anthropic.claude-opus-4-1-20250805-v1:0", 32_000),  # dated on Bedrock, undated first-party
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", 64_000),  # the global id had it, us. had none
        ("anthropic.claude-3-5-haiku-20241022-v1:0", 8_192),
        ("claude-3-opus-20240229", 4_096),
        ("us.anthropic.claude-3-haiku-20240307-v1:0", 4_096),
        ("chatgpt-4o-latest", 16_384),
        ("openrouter/openai/gpt-4o", 16_384),
    ],
)
def test_an_output_cap_belongs_to_the_model_on_every_host(sent: str, cap: int) -> None:
    assert bundled_catalog().get_model(sent).max_output_tokens == cap


def test_an_output_cap_comes_from_the_models_maker_whatever_window_a_host_gives_it() -> None:
    """Bedrock lists Claude Sonnet 4.6 with a 1M-token window (Anthropic's entry: 200,000): keyed
    by window, it took Google's host entry's cap or none; an id no provider rule claims (Gemma)
    takes a first party's."""
    catalog = bundled_catalog()
    maker = catalog.get_model("claude-sonnet-4-6").max_output_tokens
    assert maker is not None
    for host in ("us.anthropic.claude-sonnet-4-6-v1:0", "global.anthropic.claude-sonnet-4-6-v1:0"):
        assert catalog.get_model(host).max_output_tokens == maker
    assert catalog.get_model("openrouter/google/gemma-4-31b-it").max_output_tokens is not None


def test_a_scoped_id_read_as_another_providers_entry_is_warned() -> None:
    """`openrouter/meta-llama/llama-3.3-70b-instruct` was budgeted with a Hugging Face host's
    entry and prices in silence; OpenRouter's own entries and Bedrock's stay quiet."""
    catalog = bundled_catalog()
    other = catalog.resolve_window("openrouter/meta-llama/llama-3.3-70b-instruct")
    assert other.spec is not None and other.spec.provider != "openrouter"
    assert other.warning and "openrouter has no entry for it" in other.warning
    for quiet in (
        "openrouter/openai/gpt-4o",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "deepseek/deepseek-chat",
    ):
        assert catalog.resolve_window(quiet).warning is None, quiet


@pytest.mark.parametrize(("sent", "window"), [("gpt-3.5-turbo-instruct", 4_096), ("gpt-4-32k", 32_768)])
def test_older_openai_models_have_the_window_openai_gives(sent: str, window: int) -> None:
    """The sources list 16,385 for the instruct model (the chat model's) and 32,000 for gpt-4-32k."""
    assert bundled_catalog().get_model(sent).context_window == window


def _entry(model_id: str, window: int, prices: bool = True) -> str:
    priced = (
        "prices = { input = 1, output = 2, cache_write_5m = 1.25, cache_write_1h = 2, cache_read = 0.1 }\n"
    )
    return f"""
[[models]]
id = "{model_id}"
provider = "test"
context_window = {window}
max_output_tokens = {min(1000, window)}
tokenizer = {{ encoding = "o200k_base", exact = false, safety_factor = 1.2 }}
{priced if prices else ""}cache = {{ mode = "none", min_cacheable_tokens = 0, max_breakpoints = 0 }}
"""


def test_user_catalog_adds_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text("schema_version = 1\n" + _entry("gpt-4o", 1234) + _entry("house-model", 4321))
    catalog = load_catalog([path])
    assert catalog.resolve_window("gpt-4o").context_window == 1234
    assert catalog.resolve_window("gpt-4o-2024-08-06").context_window == 1234  # the alias follows
    upper = tmp_path / "upper.toml"
    upper.write_text("schema_version = 1\n" + _entry("GPT-4O", 2345))
    assert load_catalog(upper).resolve_window("gpt-4o-2024-08-06").context_window == 2345
    assert catalog.resolve_window("house-model").context_window == 4321
    assert catalog.tokenizer_for("house-model").safety_factor == 1.2


def test_an_override_without_a_tokenizer_counts_as_the_entry_it_replaces(tmp_path: Path) -> None:
    """Overriding gpt-4o's window must not turn its exact count into the x1.3 default estimate,
    nor overriding a dated id of it (an alias in the bundled catalog)."""
    entries = [
        ("GPT-4o", "openai"),
        ("gpt-4.1-2025-04-14", "openai"),
        ("gemini-2.5-pro", "house"),
        ("gpt-4o-house", "self"),
    ]
    path = tmp_path / "mine.toml"
    path.write_text(
        "schema_version = 1\n"
        + "".join(f'[[models]]\nid = "{i}"\nprovider = "{p}"\ncontext_window = 64000\n' for i, p in entries)
    )
    catalog = load_catalog(path)
    bundled = bundled_catalog()
    assert catalog.get_model("gpt-4o").tokenizer == bundled.get_model("gpt-4o").tokenizer
    assert catalog.get_model("gpt-4o").tokenizer.exact
    assert catalog.get_model("gpt-4.1-2025-04-14").tokenizer == bundled.get_model("gpt-4.1").tokenizer
    assert catalog.get_model("gemini-2.5-pro").tokenizer == bundled.get_model("gemini-2.5-pro").tokenizer
    # a new id replaces nothing: the family or the default estimate, as before
    assert catalog.get_model("gpt-4o-house").tokenizer == catalog.default_tokenizer
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello there"}]}
    mine, theirs = count(body, model="gpt-4o", catalog=catalog), count(body, model="gpt-4o")
    assert (mine["tokens"], mine["exact"]) == (theirs["tokens"], True)


def test_a_known_id_of_another_provider_counts_by_the_files_own_rules(tmp_path: Path) -> None:
    """A self-hosted model under a known id is not that entry: the file's default tokenizer (or
    its families) count it, never the bundled entry's exact tokenizer (a review of the above)."""
    path = tmp_path / "mine.toml"
    path.write_text(
        "schema_version = 1\n"
        'default_tokenizer = { encoding = "cl100k_base", exact = false, safety_factor = 1.1 }\n'
        '[[models]]\nid = "gpt-4o"\nprovider = "my-vllm"\ncontext_window = 32000\n'
    )
    spec = load_catalog(path).get_model("gpt-4o")
    assert spec.provider == "my-vllm"
    assert (spec.tokenizer.encoding, spec.tokenizer.exact, spec.tokenizer.safety_factor) == (
        "cl100k_base",
        False,
        1.1,
    )
    # the same provider's override keeps the exact tokenizer whatever the file's default (a review)
    path.write_text(path.read_text().replace('"my-vllm"', '"openai"'))
    assert load_catalog(path).get_model("gpt-4o").tokenizer == bundled_catalog().get_model("gpt-4o").tokenizer
    # the file's own family for the id comes first
    family = '[[families]]\nprefix = "gpt-4o"\ntokenizer = { encoding = "cl100k_base", exact = false, safety_factor = 1.2 }\n'
    path.write_text(path.read_text().replace("[[models]]", family + "[[models]]", 1))
    assert load_catalog(path).get_model("gpt-4o").tokenizer.safety_factor == 1.2


def test_user_catalogs_apply_in_order_the_last_first(tmp_path: Path) -> None:
    """As docs/catalog.md says: a later file's entries and rules win; in a file, the first rule."""

    def entry(model_id: str, prefix: str, window: int) -> str:
        return (
            f'[[models]]\nid = "{model_id}"\nprovider = "self-hosted"\ncontext_window = {window}\n'
            f'match = {{ starts_with = "{prefix}" }}\n'
        )

    wide, narrow = entry("house-llm", "house-", 32768), entry("house-mini", "house-m", 16384)
    (tmp_path / "a.toml").write_text("schema_version = 1\n" + wide)
    (tmp_path / "b.toml").write_text("schema_version = 1\n" + narrow)
    (tmp_path / "ab.toml").write_text("schema_version = 1\n" + wide + narrow)
    a, b, ab = (tmp_path / n for n in ("a.toml", "b.toml", "ab.toml"))
    assert load_catalog([a, b]).resolve_window("house-mini-x").spec.id == "house-mini"
    assert load_catalog([b, a]).resolve_window("house-mini-x").spec.id == "house-llm"
    assert load_catalog([ab]).resolve_window("house-mini-x").spec.id == "house-llm"


def test_user_catalog_may_be_json_with_match_rules(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    entry = {"id": "house", "provider": "me", "context_window": 5000, "match": {"starts_with": "house-"}}
    path.write_text(json.dumps({"schema_version": 1, "models": [entry]}))
    catalog = load_catalog([path])
    assert catalog.resolve_window("house-v2").catalog_id == "house"
    assert catalog.get_model("house").prices is None


def test_invalid_catalog_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        "schema_version = 1\n" + _entry("x", 100).replace("context_window = 100", "context_window = -5")
    )
    with pytest.raises(ConfigError, match=r"bad.toml: \$\.models\[0\]\.context_window"):
        load_catalog([path])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe\x00", "not UTF-8"),
        (
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"match": {"regex": "("}}]}',
            "does not compile",
        ),
        (  # a client's model id is matched against it: (a+)+$ on 'a' * 40 + '!' runs for minutes
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"match": {"or": [{"equals": "y"}, {"regex": "(a+)+$"}]}}]}',
            r"\$\.models\[0\]\.match.* repeats a repetition",
        ),
        (  # an optional part repeated: ^(h?h?)*x$ on 22 h's ran for 18 s
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"match": {"regex": "^(h?h?)*x$"}}]}',
            r"\$\.models\[0\]\.match.* repeats a repetition, alternatives or an optional part",
        ),
        (  # alternatives repeated
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"match": {"regex": "^(h|h)*x$"}}]}',
            r"\$\.models\[0\]\.match.* repeats a repetition",
        ),
        (  # a typo's window: no model's is near a billion tokens
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", '
            b'"context_window": 100000000000000000000000}]}',
            r"\$\.models\[0\]\.context_window: Input should be less than or equal to 1000000000",
        ),
        (  # an empty "and" holds for every id: any typo resolved to this model
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"match": {"and": []}}]}',
            r"\$\.models\[0\]\.match: and is an empty list, which would match every model id",
        ),
        (
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"match": {"or": [{"equals": "y"}, {"or": []}]}}]}',
            r"match\.or\[1\]: or is an empty list, which would match no model id",
        ),
        (
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"tokenizer": "nope"}]}',
            "unknown tokenizer 'nope'",
        ),
        (  # costs of NaN and reports that are not strict JSON
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"prices": {"input": 1, "output": Infinity}}]}',
            r"\$\.models\[0\]\.prices\.output: Input should be a finite number",
        ),
        (  # read as a number by validation, then used as the string it is: a traceback at `models`
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"prices": {"input": "0.5", "output": 1}}]}',
            r"\$\.models\[0\]\.prices\.input: Input should be a valid number",
        ),
        (  # validated as false, then used as the string "false": a true value
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"tokenizer": {"encoding": "o200k_base", "exact": "false"}}]}',
            r"\$\.models\[0\]\.tokenizer\.exact: Input should be a valid boolean",
        ),
        (  # not the POSIX class it looks like: Python warned (FutureWarning) on stderr, then matched a set
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"match": {"regex": "^house[[:digit:]]+"}}]}',
            r"\$\.models\[0\]\.match: match regex .* is ambiguous to Python \(Possible nested set",
        ),
        (  # found in every id: any typo, and every id without an entry, resolved to this model
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"match": {"regex": ".*"}}]}',
            r"\$\.models\[0\]\.match: the rule matches any id, which would resolve every model id",
        ),
        (  # ".+" is found in every id that is not empty, as every real id is
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"match": {"or": [{"equals": "y"}, {"regex": ".+"}]}}]}',
            r"\$\.models\[0\]\.match: the rule matches any id",
        ),
        (  # JSON keeps the last of a repeated key: the window would silently be 5
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 9, '
            b'"context_window": 5}]}',
            "the key 'context_window' is given twice",
        ),
        (  # the resolver gives an id with a blank nothing: the entry could never be reached
            b'{"schema_version": 1, "models": [{"id": "my model", "provider": "p", "context_window": 5}]}',
            r"\$\.models\[0\]\.id",
        ),
        (
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"aliases": [""]}]}',
            r"\$\.models\[0\]\.aliases\[0\]",
        ),
        (  # ids resolve ignoring case: the second could never be reached
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5}, '
            b'{"id": "X", "provider": "p", "context_window": 9}]}',
            r"\$\.models\[1\]: id 'X' of provider 'p' is also \$\.models\[0\]",
        ),
        (  # a reply is held in the window with its prompt
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"max_output_tokens": 9}]}',
            r"\$\.models\[0\]: max_output_tokens \(9\) is above context_window \(5\)",
        ),
        (  # an exact tokenizer's factor would be ignored
            b'{"schema_version": 1, "models": [{"id": "x", "provider": "p", "context_window": 5, '
            b'"tokenizer": {"encoding": "o200k_base", "exact": true, "safety_factor": 1.5}}]}',
            r"\$\.models\[0\]\.tokenizer: safety_factor 1.5 is given for an exact tokenizer",
        ),
    ],
)
def test_broken_user_catalogs_are_config_errors(tmp_path: Path, content: bytes, message: str) -> None:
    """Each names the file; rule errors also the JSON path."""
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        load_catalog([path])


def test_a_user_catalog_names_the_bundled_tokenizers(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        'schema_version = 1\n[[models]]\nid = "house"\nprovider = "me"\ncontext_window = 1000\n'
        'tokenizer = "claude_estimate"\n'
    )
    assert load_catalog([path]).get_model("house").tokenizer.safety_factor == 1.3
    path.write_text(path.read_text().replace('"claude_estimate"', '{ encoding = "o200k_base" }'))
    with pytest.raises(ConfigError, match=r"\$\.models\[0\]\.tokenizer\.exact: Field required"):
        load_catalog([path])  # the path is the file's, with no class name of the schema in it


def test_tokenizers_are_honest() -> None:
    catalog = bundled_catalog()
    assert catalog.tokenizer_for("gpt-5").exact is True
    assert catalog.tokenizer_for("azure/gpt-4o").exact is True
    claude = catalog.tokenizer_for("claude-sonnet-4-5")
    assert claude.exact is False and claude.safety_factor > 1
    assert catalog.tokenizer_for("anthropic.claude-sonnet-4-5-20250929-v1:0").exact is False
    assert catalog.tokenizer_for("unknown-vendor-llm").exact is False


def test_resolution_is_cheap_after_the_first() -> None:
    catalog = parse_catalog("schema_version = 1\n" + _entry("m", 100, prices=False), "t")
    assert catalog.find_model("m-20250101") is catalog.find_model("m-20250101")


def test_a_calibrated_factor_replaces_only_an_estimates_factor() -> None:
    catalog = bundled_catalog()
    claude = catalog.tokenizer_for("claude-sonnet-4-5-20250929")
    assert not claude.exact and claude.safety_factor == 1.3
    calibrated = catalog.tokenizer_for("claude-sonnet-4-5-20250929", 1.7)
    assert (calibrated.encoding, calibrated.exact, calibrated.safety_factor) == (claude.encoding, False, 1.7)
    assert catalog.counter_for("claude-sonnet-4-5", 1.7).safety_factor == 1.7
    assert catalog.tokenizer_for("gpt-4o", 1.7) == catalog.tokenizer_for("gpt-4o")  # exact: nothing to scale
    assert catalog.tokenizer_for("claude-sonnet-4-5") == claude  # the catalog itself is unchanged
    for bad in (0, -1.0, float("nan"), float("inf"), 1e308, 101, True, "1.2", [1]):
        with pytest.raises(ConfigError, match="safety_factor"):
            catalog.tokenizer_for("claude-sonnet-4-5", bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="safety_factor"):
            catalog.tokenizer_for("gpt-4o", bad)  # type: ignore[arg-type]  # checked even when unused


def test_fit_and_count_scale_an_estimate_by_the_factor_given() -> None:
    from ctxbudget import count, fit

    body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "word " * 400}]}
    plain = count(body, model="claude-sonnet-4-5")
    doubled = count(body, model="claude-sonnet-4-5", safety_factor=2.6)
    assert doubled["safety_factor"] == 2.6 and doubled["tokens"] > plain["tokens"] * 1.9
    fitted = fit(
        body, model="claude-sonnet-4-5", max_context_tokens=800, reserve_output_tokens=100, safety_factor=2.6
    )
    assert fitted.report.safety_factor == 2.6
    assert fit(
        body, model="claude-sonnet-4-5", max_context_tokens=800, reserve_output_tokens=100
    ).report.passed_through
    assert not fitted.report.passed_through  # the same body no longer fits once scaled by 2.6


def test_the_docs_give_the_catalog_size_by_provider() -> None:
    """docs/catalog.md's table is checked against the data, so a regeneration cannot leave it stale."""
    import collections

    text = (Path(__file__).resolve().parent.parent / "docs" / "catalog.md").read_text("utf-8")
    counts = collections.Counter(m.provider for m in bundled_catalog().models)
    assert f"{len(bundled_catalog().models):,} models" in text
    table = text.split("| provider | models |", 1)[1].split("\n\n", 1)[0]
    shown: dict[str, int] = {}
    rest: tuple[int, int] | None = None
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for name, number in ((cells[0], cells[1]), (cells[3], cells[4])):
            if " more " in name:
                rest = (int(name.split()[0]), int(number))
            elif name:
                shown[name.split(" (")[0]] = int(number)
    assert {k: counts[k] for k in shown} == shown
    assert rest == (len(counts) - len(shown), sum(v for k, v in counts.items() if k not in shown))


@pytest.mark.parametrize(
    ("sent", "base"),
    [
        ("ft:gpt-4o-mini-2024-07-18:my-org:custom-suffix:9xYz", "gpt-4o-mini"),
        ("ft:gpt-4.1-2025-04-14:acme::BCDE12", "gpt-4.1"),
        ("ft:gpt-4o:org", "gpt-4o"),
        ("openai/ft:gpt-4o-mini:org::abc", "gpt-4o-mini"),  # scoped: "cannot resolve"
        ("azure/ft:gpt-4o-mini-2024-07-18:org:name:id", "gpt-4o-mini"),
    ],
)
def test_a_fine_tuned_id_has_its_base_window_and_tokenizer_but_not_its_prices(sent: str, base: str) -> None:
    catalog = bundled_catalog()
    tuned, plain = catalog.resolve_window(sent), catalog.resolve_window(base)
    assert tuned.rule == "fine-tuned" and tuned.path[0].startswith("fine-tuned ")
    assert (tuned.context_window, tuned.max_input_tokens) == (plain.context_window, plain.max_input_tokens)
    assert tuned.spec is not None and plain.spec is not None and tuned.spec.id == plain.spec.id
    assert tuned.spec.tokenizer == plain.spec.tokenizer and plain.spec.prices is not None
    assert tuned.spec.prices is None  # billed at its own rates, which the catalog does not list
    assert catalog.resolve_window(base).spec.prices is not None  # the base keeps its own


def test_a_fine_tuned_id_of_an_unknown_base_is_unknown() -> None:
    with pytest.raises(UnknownModelError):
        bundled_catalog().resolve_window("ft:not-a-model-at-all:org::x")


def test_an_alias_given_to_two_models_of_one_provider_is_refused(tmp_path: Path) -> None:
    """The second model could never be reached by it: the first won, silently."""
    from ctxbudget import load_catalog

    path = tmp_path / "dup.toml"
    models = "".join(
        f'[[models]]\nid = "{i}"\nprovider = "me"\ncontext_window = 5000\naliases = ["same"]\n'
        for i in ("m1", "m2")
    )
    path.write_text("schema_version = 1\n" + models)
    with pytest.raises(
        ConfigError, match=r"alias 'same' is given to more than one model of provider 'me' \(m1, m2\)"
    ):
        load_catalog(path)


def test_a_user_entry_with_no_tokenizer_falls_in_the_bundled_family_of_its_id(tmp_path: Path) -> None:
    """docs/catalog.md: the tokenizer defaults to the family estimate for the id; a user file's
    gemini-house counted at the default estimate (x1.3), not Gemini's (x1.15)."""
    from ctxbudget import load_catalog

    path = tmp_path / "family.toml"
    path.write_text(
        'schema_version = 1\n[[models]]\nid = "gemini-house"\nprovider = "me"\ncontext_window = 100000\n'
    )
    catalog = load_catalog(path)
    bundled = load_catalog()
    assert catalog.get_model("gemini-house").tokenizer == bundled.get_model("gemini-2.5-pro").tokenizer


@pytest.mark.parametrize(
    ("sent", "said"),
    [
        ("gpt\u20114o", "character 4 is NON-BREAKING HYPHEN (U+2011)"),
        ("  gpt\u20114o", "character 6 is NON-BREAKING HYPHEN"),  # counted in the id as sent
        ("gpt 4o", "character 4 is SPACE (U+0020): model ids hold no spaces"),
        ("\uff47\uff50\uff54-\uff14\uff4f", "FULLWIDTH LATIN SMALL LETTER G"),
        ("gpt-4o\u200b", "ZERO WIDTH SPACE"),
        ("x-" * 200, "longer than the 256 characters"),
        # control characters Python's str.strip() takes for blanks: refused, not stripped
        ("gpt-4o\x1f", "character 7 is U+001F: model ids hold no spaces or control characters"),
        ("\x1cgpt-4o", "character 1 is U+001C:"),
        ("gpt-4o\x85", "character 7 is U+0085: model ids are plain ASCII"),
    ],
)
def test_an_unknown_id_says_what_is_wrong_with_it_and_what_it_looks_like(sent: str, said: str) -> None:
    with pytest.raises(UnknownModelError) as raised:
        bundled_catalog().resolve_window(sent)
    assert said in str(raised.value)
    if "x-" not in sent:
        assert raised.value.closest[0] == "gpt-4o"  # read as the ASCII it looks like
    assert len(str(raised.value)) < 500


def test_an_id_of_invisible_characters_only_is_unknown_and_named() -> None:
    with pytest.raises(UnknownModelError, match="ZERO WIDTH SPACE"):
        bundled_catalog().resolve_window("\u200b")


@pytest.mark.parametrize(
    "sent", ["gpt-4o-2024-13-45", "gpt-4o-2024-02-30", "gpt-4o-9999-99-99", "gpt-4o-19990101"]
)
def test_a_snapshot_suffix_that_is_no_date_is_not_read_as_a_snapshot(sent: str) -> None:
    with pytest.raises(UnknownModelError) as raised:
        bundled_catalog().resolve_window(sent)
    assert f"its snapshot suffix -{sent.split('-', 2)[2]} is not a date" in str(raised.value)


@pytest.mark.parametrize(
    ("sent", "suffix"),
    [
        # genai-prices' match rules (claude-sonnet-4-5*, gemini-2.5-pro*) read every one of these
        ("claude-sonnet-4-5-20251399", "-20251399"),
        ("claude-3-5-sonnet-20240230", "-20240230"),
        ("gemini-2.5-pro-2025-13-45", "-2025-13-45"),
        ("anthropic.claude-sonnet-4-5-20251399-v1:0", "-20251399"),  # before Bedrock's version
        ("claude-sonnet-4-5@20251399", "@20251399"),  # Vertex
        ("anthropic/claude-opus-4-1-20250899", "-20250899"),
    ],
)
def test_an_impossible_date_is_no_snapshot_by_any_rule(sent: str, suffix: str) -> None:
    with pytest.raises(UnknownModelError) as raised:
        bundled_catalog().resolve_window(sent)
    assert f"its snapshot suffix {suffix} is not a date" in str(raised.value)


@pytest.mark.parametrize(
    ("sent", "model"),
    [
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5@001", "claude-sonnet-4-5"),  # a Vertex version, not a date
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
    ],
)
def test_a_real_date_before_another_suffix_still_resolves(sent: str, model: str) -> None:
    resolution = bundled_catalog().resolve_window(sent)
    assert resolution.spec is not None and model in resolution.spec.id


@pytest.mark.parametrize(
    ("sent", "model"),
    [
        ("gpt-4o-2024-02-29", "gpt-4o"),  # a leap day
        ("gpt-4o-2026-12-31", "gpt-4o"),  # a snapshot newer than the catalog
        ("claude-opus-4-1-20991231", "claude-opus-4-1"),
        ("cohere/command-r-plus-13-2024", "command-r-plus"),  # month-year suffixes are not dates checked
    ],
)
def test_a_dated_snapshot_of_a_real_date_resolves_to_its_model(sent: str, model: str) -> None:
    resolution = bundled_catalog().resolve_window(sent)
    assert resolution.spec is not None and resolution.spec.id == model


@pytest.mark.parametrize("suffix", ["-latest", "-20250101", "-2025-01-01"])
def test_a_snapshot_suffix_never_moves_an_id_to_another_entry(suffix: str) -> None:
    """Every bundled id, given a snapshot suffix, lands on the entry the id itself lands on
    (unless the catalog lists the suffixed id as an entry of its own: ``gpt-5-chat-latest``).
    A scoped id's match rule read 694 such ids as another entry, 219 of them with a larger window:
    ``deepseek/deepseek-r1-distill-llama-70b-20250101`` as DeepSeek's 64,000-token reasoner where
    the id itself is OpenRouter's 8,192-token entry."""
    catalog = bundled_catalog()
    ids = {spec.id for spec in catalog.models}
    moved = []
    for model in sorted(ids - {i.removesuffix(suffix) for i in ids if i.endswith(suffix)}):
        base, found = catalog.find_model(model), catalog.find_model(model + suffix)
        if base is not None and found is not None and (found.provider, found.id) != (base.provider, base.id):
            moved.append((model + suffix, f"{found.provider}/{found.id}", f"{base.provider}/{base.id}"))
    assert not moved, moved[:10]


def test_models_resolve_says_what_is_wrong_with_an_unknown_id(capsys: pytest.CaptureFixture[str]) -> None:
    from ctxbudget.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["models", "resolve", "gpt-4o-2024-13-45"])
    assert exited.value.code == 2
    assert "its snapshot suffix -2024-13-45 is not a date" in capsys.readouterr().err


def test_a_catalog_file_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + ("schema_version = 1\n" + _entry("house-model", 4321)).encode("utf-8"))
    assert load_catalog([path]).resolve_window("house-model").context_window == 4321


@pytest.mark.parametrize("window", [-1, 10**9 + 1, 10**23, True, 2.5])
def test_a_window_given_beyond_any_catalog_s_is_refused(window: object) -> None:
    """A window of 10^23 tokens was honoured with a warning, where a catalog refuses an entry's
    over a billion; the largest is taken, as a catalog takes it."""
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(ConfigError, match="max_context_tokens must be a whole number of tokens from 0"):
        count(body, model="gpt-4o", max_context_tokens=window)
    assert count(body, model="gpt-4o", max_context_tokens=10**9)["tokens"] > 0
