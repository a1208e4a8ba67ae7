"""Model ids through every surface: fit, count, assemble, the CLI and the gateway."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import clear_caches, fit, load_catalog
from ctxbudget.assembly._assemble import assemble
from ctxbudget.assembly._policy import get_policy
from ctxbudget.catalog.catalog import FLOOR_WINDOW_TOKENS, parse_catalog
from ctxbudget.cli import main
from ctxbudget.errors import BudgetExceeded, PriceUnknown, UnknownModelError
from ctxbudget.fitting import count

from .fake_upstream import FAKE_MODELS, gateway_over_fake
from .test_assemble import POLICY, request

WORDS = " ".join(f"w{n}" for n in range(600))


def _chat(turns: int) -> dict[str, Any]:
    messages = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}: {WORDS}"} for n in range(turns)
    ]
    return {"model": "gpt-5", "messages": [*messages, {"role": "user", "content": "And now?"}]}


def test_a_gpt5_request_never_exceeds_its_input_cap() -> None:
    body = _chat(300)
    assert count(body, model="gpt-5")["tokens"] > 300_000
    result = fit(body, model="gpt-5")
    report = result.report
    assert (report.context_window, report.max_input_tokens) == (400_000, 272_000)
    assert report.available_tokens == 272_000
    independent = count(result.request, model="gpt-5")["tokens"]
    assert independent <= 272_000 and report.tokens_after <= 272_000
    assert result.request["messages"][-1]["content"] == "And now?"


def test_dated_ids_are_budgeted_and_reported_as_their_model() -> None:
    report = fit(_chat(2), model="gpt-4o-2024-08-06").report
    assert (report.context_window, report.catalog_id, report.window_rule) == (128_000, "gpt-4o", "alias")
    assert report.resolution == ("alias gpt-4o-2024-08-06 -> gpt-4o",)


def test_unknown_model_fails_unless_the_floor_is_asked_for() -> None:
    with pytest.raises(UnknownModelError, match="gtp-4o"):
        fit(_chat(2), model="gtp-4o")
    with pytest.raises(UnknownModelError):
        count(_chat(2), model="gtp-4o")
    floored = fit(_chat(40), model="gtp-4o", unknown_model="floor").report
    assert (floored.context_window, floored.window_rule) == (FLOOR_WINDOW_TOKENS, "floor")
    assert floored.tokens_after <= FLOOR_WINDOW_TOKENS - floored.reserve_output_tokens
    assert any("gtp-4o" in w for w in floored.warnings)


def test_count_reports_the_window_and_whether_it_fits() -> None:
    counted = count(_chat(2), model="gpt-5-2025-08-07")
    assert (counted["catalog_id"], counted["context_window"], counted["max_input_tokens"]) == (
        "gpt-5",
        400_000,
        272_000,
    )
    assert counted["fits"] is True


def test_assemble_fails_closed_when_the_envelope_cannot_fit_the_model() -> None:
    legal = get_policy("legal-review")
    with pytest.raises(BudgetExceeded, match="has a window of 8,192 tokens") as caught:
        assemble(request(), policy=legal, model="gpt-4")
    assert caught.value.required_tokens == legal.envelope_tokens


def _unpriced_catalog(tmp_path: Path) -> Path:
    path = tmp_path / "unpriced.toml"
    path.write_text(
        'schema_version = 1\n[[models]]\nid = "house-llm"\nprovider = "me"\ncontext_window = 64000\n'
    )
    return path


def test_unknown_prices_are_never_zero(tmp_path: Path) -> None:
    catalog = load_catalog([_unpriced_catalog(tmp_path)])
    with pytest.raises(PriceUnknown, match="price of 'house-llm' is unknown"):
        assemble(request(), policy=POLICY, model="house-llm", catalog=catalog, cost_ceiling_usd=1.0)
    no_ceiling = dataclasses.replace(POLICY, cost_ceiling_usd=None)
    report = assemble(request(), policy=no_ceiling, model="house-llm", catalog=catalog).report.to_dict()
    assert report["cost_usd"] is None and "house-llm" in report["cost_note"]


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_cli_unknown_model_is_one_line_exit_2_and_floor_on_request(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(_chat(2)))
    failed = _cli("fit", str(path), "--model", "gtp-4o")
    assert failed.exit_code == 2
    assert failed.output.count("\n") == 1 and "closest: gpt-4o" in failed.output
    floored = _cli("fit", str(path), "--model", "gtp-4o", "--unknown-model", "floor", "--json")
    assert floored.exit_code == 0
    assert json.loads(floored.stdout)["report"]["context_window"] == FLOOR_WINDOW_TOKENS


def test_cli_assemble_envelope_and_price_exits(tmp_path: Path) -> None:
    context = tmp_path / "context.json"
    context.write_text(json.dumps(request()))
    too_small = _cli("assemble", str(context), "--policy", "legal-review", "--model", "gpt-4")
    assert too_small.exit_code == 3 and "window" in too_small.output
    catalog = str(_unpriced_catalog(tmp_path))
    unpriced = _cli(
        "assemble", str(context), "--model", "house-llm", "--catalog", catalog, "--cost-ceiling", "0.5"
    )
    assert unpriced.exit_code == 4 and "unknown" in unpriced.output


def test_models_lists_whole_ids_filtered_and_resolves() -> None:
    listed = _cli("models", "gpt-5")
    assert listed.exit_code == 0
    ids = [line.split()[0] for line in listed.output.splitlines()[1:]]
    assert "gpt-5" in ids and all("gpt-5" in i for i in ids)
    longest = max(ids, key=len)
    assert any(line.startswith(longest + " ") for line in listed.output.splitlines())  # never cut
    globbed = _cli("models", "claude-*-4-5")
    assert {line.split()[0] for line in globbed.output.splitlines()[1:]} >= {"claude-sonnet-4-5"}
    resolved = _cli("models", "resolve", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "--json")
    payload = json.loads(resolved.output)
    assert payload["provider"] == "aws" and payload["path"][0] == "scoped bedrock id -> aws"
    unknown = _cli("models", "resolve", "gtp-4o")
    assert unknown.exit_code == 2 and "closest" in unknown.output


def test_gateway_answers_unknown_models_and_unknown_prices_in_the_provider_shape(tmp_path: Path) -> None:
    with gateway_over_fake(tmp_path / "g.db") as (fake, url):
        with pytest.raises(anthropic.BadRequestError) as claude:
            anthropic.Anthropic(base_url=url, api_key="k", max_retries=0).messages.create(
                model="claude-sonet-4-5", max_tokens=10, messages=[{"role": "user", "content": "x"}]
            )
        assert "unknown model" in str(claude.value) and "claude-sonnet-4-5" in str(claude.value)
        # the hint names what the gateway's operator can do (a budget header never lifts an
        # unknown id), not Python options
        assert "serve --catalog FILE" in str(claude.value) and "serve --unknown-model floor" in str(
            claude.value
        )
        assert "X-Ctxbudget-Max-Context-Tokens" not in str(claude.value) and "=" not in str(claude.value)
        with pytest.raises(openai.BadRequestError, match="unknown model"):
            openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0).chat.completions.create(
                model="gtp-4o", messages=[{"role": "user", "content": "x"}]
            )
        assert fake.received == []
    catalogs = (str(FAKE_MODELS), str(_unpriced_catalog(tmp_path)))
    with gateway_over_fake(tmp_path / "p.db", cost_ceiling_usd=1.0, catalog_paths=catalogs) as (fake, url):
        with pytest.raises(openai.BadRequestError, match="price of 'house-llm' is unknown"):
            openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0).chat.completions.create(
                model="house-llm", messages=[{"role": "user", "content": "x"}]
            )
        assert fake.received == []
    with gateway_over_fake(tmp_path / "f.db", unknown_model="floor") as (fake, url):
        reply = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0).chat.completions.create(
            model="gtp-4o", messages=[{"role": "user", "content": "hi"}]
        )
        assert reply.choices[0].message.content


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from([(5_000, 1.1), (9_000, 1.1), (5_000, 1.6), (12_000, 1.3)]), min_size=2, max_size=8
    )
)
def test_memoised_fits_follow_the_catalog_content(choices: list[tuple[int, float]]) -> None:
    """Catalogs built and freed in turn (ids may be reused) never get each other's memoised fit."""
    body = _chat(30)
    for window, factor in choices:
        entry = f'[[models]]\nid = "m"\nprovider = "p"\ncontext_window = {window}\nmax_output_tokens = 500\n'
        entry += f'tokenizer = {{ encoding = "o200k_base", exact = false, safety_factor = {factor} }}\n'
        catalog = parse_catalog("schema_version = 1\n" + entry, "t")
        memoised = fit(body, model="m", catalog=catalog)  # may come from the memo
        assert (memoised.report.context_window, memoised.report.safety_factor) == (window, factor)
        del catalog
    clear_caches()
    fresh = fit(body, model="m", catalog=parse_catalog("schema_version = 1\n" + entry, "t"))
    assert memoised.request == fresh.request
    assert memoised.report.to_dict() == fresh.report.to_dict()
