"""Fitting real agent traffic: defaults taken from the body, protected prompts, clean CLI output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxbudget import BudgetExceeded, fit
from ctxbudget.cli import main
from ctxbudget.fitting import count

WORDS = " ".join(f"w{n}" for n in range(400))


def _chat(turns: int, **extra: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are careful. " * 200}]
    messages += [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}: {WORDS}"} for n in range(turns)
    ]
    return {"model": "gpt-4o", "messages": [*messages, {"role": "user", "content": "And now?"}], **extra}


def _write(tmp_path: Path, body: object) -> str:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(body))
    return str(path)


def test_the_body_gives_the_model_and_the_output_reserve(tmp_path: Path) -> None:
    body = _chat(4, max_tokens=1000)
    result = fit(body, model="gpt-4o", max_context_tokens=3000)
    assert result.report.reserve_output_tokens == 1000
    assert fit(_chat(4, max_completion_tokens=700), model="gpt-4o").report.reserve_output_tokens == 700
    cli = CliRunner().invoke(main, ["fit", _write(tmp_path, body), "--max-context-tokens", "3000", "--json"])
    assert cli.exit_code == 0, cli.output
    report = json.loads(cli.stdout)["report"]
    assert (report["model"], report["reserve_output_tokens"]) == ("gpt-4o", 1000)
    counted = CliRunner().invoke(main, ["count", _write(tmp_path, body)])
    assert counted.exit_code == 0 and "tokens" in counted.output


def test_no_model_anywhere_is_a_usage_error(tmp_path: Path) -> None:
    body = _chat(1)
    del body["model"]
    result = CliRunner().invoke(main, ["count", _write(tmp_path, body)])
    assert result.exit_code == 2 and "--model" in result.output


@pytest.mark.parametrize("bad", [-5, True, "1000", 1.5])
def test_a_bad_body_max_tokens_names_its_path(bad: object) -> None:
    with pytest.raises(Exception, match=r"\$\.max_tokens") as caught:
        fit(_chat(1, max_tokens=bad), model="gpt-4o")
    assert type(caught.value).__name__ == "InvalidRequestError"


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_system_prompts_are_protected_unless_budgeted(fmt: str) -> None:
    body = _chat(20)
    if fmt == "anthropic":
        body = {
            "model": "claude-sonnet-4-5",
            "system": body["messages"][0]["content"],
            "messages": body["messages"][1:],
        }
    lean = [m for m in body["messages"] if m["role"] == "system"] + body["messages"][-1:]
    system_tokens = count({**body, "messages": lean}, model=body["model"])["tokens"]
    window = system_tokens + 300
    kept = fit(body, model=body["model"], max_context_tokens=window, reserve_output_tokens=0)
    system_items = [i for i in kept.report.items if i.component == "system"]
    assert system_items and all(i.action == "kept" for i in system_items)
    trimmed = fit(
        body, model=body["model"], max_context_tokens=window, reserve_output_tokens=0, budget={"system": 20}
    )
    assert any(i.action != "kept" for i in trimmed.report.items if i.component == "system")
    with pytest.raises(BudgetExceeded, match=r"system \$\."):
        fit(body, model=body["model"], max_context_tokens=system_tokens // 2, reserve_output_tokens=0)


@pytest.mark.parametrize(
    "spec", ["system=ten", "system=nan", "systm=10", "system", "history=150", "query=-1"]
)
def test_a_malformed_budget_is_exit_2(tmp_path: Path, spec: str) -> None:
    result = CliRunner().invoke(main, ["fit", _write(tmp_path, _chat(2)), "--budget", spec])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "budget" in result.output


def test_warnings_go_to_stderr_and_body_prints_only_the_request(tmp_path: Path) -> None:
    path = _write(tmp_path, _chat(30))
    args = [
        "fit",
        path,
        "--max-context-tokens",
        "4000",
        "--reserve-output-tokens",
        "0",
        "--budget",
        "history=20,documents=0",
    ]
    table = CliRunner().invoke(main, args)
    assert table.exit_code == 0, table.output
    assert "warning" not in table.stdout and "warning" in table.stderr
    body = CliRunner().invoke(main, [*args, "--body"])
    sent = json.loads(body.stdout)
    assert set(sent) == {"model", "messages"} and sent["messages"][-1]["content"] == "And now?"
    assert count(sent, model="gpt-4o")["tokens"] <= 4000
    both = CliRunner().invoke(main, [*args, "--body", "--json"])
    assert both.exit_code == 2
