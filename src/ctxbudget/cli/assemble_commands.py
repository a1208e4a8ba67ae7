"""Tiered assembly commands: policies, assemble, verify-prefix."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import click

from ..assembly import assemble, cached_prefix, compare_prefixes, list_policies, load_policy
from ..catalog.catalog import load_catalog
from ..errors import InvalidRequestError, usd
from .base import (
    ALLOW_PREFIX_CHANGE_OPTION,
    ASSEMBLE_FLAGS,
    BODY_FORMAT_OPTION,
    CATALOG_OPTION,
    EXIT_DIFFERS,
    EXIT_USAGE,
    IDLE_SECONDS_OPTION,
    JSON_OPTION,
    USD,
    accuracy,
    echo_body,
    echo_warnings,
    fail,
    main,
    policy_option,
    priced,
    read_json,
    run_action,
    skip_collection_at_exit,
    table_console,
    utf8_out,
)


@main.command("policies")
@JSON_OPTION
def policies_command(as_json: bool) -> None:
    """List the bundled assembly policies and their tiers."""

    def action() -> None:
        # every setting of each policy (the ledger's and the current turn's ceilings, the output
        # priced, compaction, volatile patterns): they decide exit 3 and 4 as much as the tiers do
        rows: list[dict[str, Any]] = [dataclasses.asdict(load_policy(name)) for name in list_policies()]
        if as_json:
            click.echo(json.dumps(rows, indent=2))
            return
        for row in rows:
            click.echo(f"{row['name']}: {row['description']}")
            for t in row["tiers"]:
                cached = f"cached {t['cache_ttl']}" if t["cached"] else "not cached"
                click.echo(
                    f"  tier {t['index']} {t['name']:<12} {t['ceiling_tokens']:>7,} tokens  {t['eviction']:<9} {cached}"
                )

    run_action(action)


@main.command("assemble")
@CATALOG_OPTION
@JSON_OPTION
@click.option("--model", required=True, help="Model id (must be in the catalog: the turn is priced).")
@policy_option("")
@BODY_FORMAT_OPTION
@click.option(
    "--input-format",
    type=click.Choice(["context", "question", "openai", "anthropic"]),
    help="Request format (detected when omitted).",
)
@click.option(
    "--previous",
    type=click.Path(exists=True, dir_okay=False),
    metavar="PREV.json",
    help="The previous turn's `assemble --json` output: predicts cache reads.",
)
@click.option(
    "--cost-ceiling",
    type=USD,
    metavar="USD",
    help="Per-turn ceiling [default: the policy's].",
)
@click.option(
    "--expected-output-tokens",
    type=click.IntRange(min=0),
    metavar="N",
    help="Output tokens to price [default: the policy's].",
)
@click.option(
    "--prompt-cache-key",
    metavar="KEY",
    callback=lambda _ctx, _param, key: _non_empty(key),
    help="OpenAI prompt_cache_key to set (with --format openai: the only body that carries it).",
)
@ALLOW_PREFIX_CHANGE_OPTION
@IDLE_SECONDS_OPTION
@click.argument("source", default="-", metavar="[FILE|-]")
def assemble_command(
    source: str,
    model: str,
    policy_ref: str,
    format_: str | None,
    input_format: str | None,
    previous: str | None,
    cost_ceiling: float | None,
    expected_output_tokens: int | None,
    prompt_cache_key: str | None,
    allow_prefix_change: bool,
    idle_seconds: float | None,
    catalogs: tuple[str, ...],
    as_json: bool,
) -> None:
    """Assemble a tiered request: the body to send on stdout, the report (tiers, breakpoints,
    predicted cache reads and writes, cost, invariants) on stderr, or both as JSON with --json.

    Exit codes: 1 an invariant broke (the message names it), 2 bad input (a volatile value in a
    pinned tier is bad input), 3 cannot fit (a tier, the ledger or the current turn over its
    ceiling), 4 over the cost ceiling, 5 the pinned prefix differs from --previous's (INV-CTX-01;
    --allow-prefix-change for a new playbook)."""
    skip_collection_at_exit()  # the heap's teardown took 115-138 ms after the legal example's output
    _check_assemble_flags(
        format_=format_, prompt_cache_key=prompt_cache_key, idle_seconds=idle_seconds, previous=previous
    )
    request = read_json(source)
    prior = read_json(previous) if previous else None
    if previous and prior is None:  # null is "no previous turn" to the library: INV-CTX-01 unchecked
        fail(
            f"{previous}: $: expected the previous turn's `assemble --json` output, got null "
            "(without a previous turn, leave --previous out)",
            EXIT_USAGE,
        )

    def action() -> None:
        result = assemble(
            request,
            policy=load_policy(policy_ref),
            model=model,
            output_format=format_,  # type: ignore[arg-type]
            previous=prior,
            cost_ceiling_usd=cost_ceiling,
            expected_output_tokens=expected_output_tokens,
            prompt_cache_key=prompt_cache_key,
            input_format=input_format,
            allow_prefix_change=allow_prefix_change,
            idle_seconds=idle_seconds,
            catalog=load_catalog(catalogs),
        )
        if as_json:
            echo_warnings(result.report.warnings)  # as fit does: stdout holds only the JSON
            report = result.report.to_dict()
            click.echo(json.dumps({"request": result.request, "report": report}, ensure_ascii=not utf8_out()))
            return
        echo_body(result.request)
        print_assembly(result.report.to_dict())

    run_action(action, ASSEMBLE_FLAGS)


def _check_assemble_flags(
    *, format_: str | None, prompt_cache_key: str | None, idle_seconds: float | None, previous: str | None
) -> None:
    """Flags that mean nothing without another are a usage error, before any input is read (they
    were ignored: no key in an Anthropic body, no expiry without a previous turn to expire)."""
    if prompt_cache_key is not None and format_ != "openai":
        raise click.UsageError(
            "--prompt-cache-key is written only into an OpenAI body: it needs --format openai"
        )
    if idle_seconds is not None and previous is None:
        raise click.UsageError("--idle-seconds says how long ago the previous turn was: it needs --previous")


def print_assembly(report: dict[str, Any]) -> None:
    from rich.table import Table  # only the table needs rich (70 ms of a start: --json never loads it)

    out = table_console(stderr=True)
    label = accuracy(report["exact"], report["safety_factor"])
    out.print(
        f"{report['model']} ({label}) policy {report['policy']}: {report['tokens']:,} of "
        f"{report['prompt_limit_tokens']:,} tokens"
    )
    table = Table("tier", "eviction", "ceiling", "tokens", "items kept", "changed")
    for t in report["tiers"]:
        kept = sum(1 for i in t["items"] if i["action"] in ("kept", "compacted"))
        changed = sum(1 for i in t["items"] if i["action"] != "kept")
        table.add_row(
            f"{t['index']} {t['name']}",
            t["eviction"],
            f"{t['ceiling_tokens']:,}",
            f"{t['tokens']:,}",
            str(kept),
            str(changed),
        )
    out.print(table)
    for b in report["breakpoints"]:
        out.print(
            f"breakpoint after block {b['block']} ({b['tier']}, {b['ttl']}): {b['prefix_tokens']:,} tokens, {b['status']}"
        )
    cache = report["cache"]
    out.print(
        f"cache: read {cache['read_tokens']:,}, write {cache['write_tokens']:,}, uncached {cache['uncached_tokens']:,}; "
        f"cost {priced(report['cost_usd'])}"
        + (f" (ceiling {usd(report['cost_ceiling_usd'])})" if report["cost_ceiling_usd"] else "")
    )
    for name, status in report["invariants"].items():
        out.print(f"{name}: {status}")
    for line in report["degraded"] + report["warnings"]:
        out.print(f"[yellow]note:[/] {line}")


@main.command("verify-prefix")
@JSON_OPTION
@click.argument("first", type=click.Path(exists=True, dir_okay=False), metavar="A.json")
@click.argument("second", type=click.Path(exists=True, dir_okay=False), metavar="B.json")
def verify_prefix_command(first: str, second: str, as_json: bool) -> None:
    """Check that B reads the cached prefix of A (bodies or `assemble --json` outputs): tool
    definitions and system prompt, byte-identical, or grown by parts after A's. Exit 0 when B
    reads it, 1 with the first differing byte when not."""
    a, b = read_json(first), read_json(second)
    for source, document in ((first, a), (second, b)):
        _check_prefix_document(source, document)

    def action() -> None:
        result = compare_prefixes(a, b, strict=not as_json)
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "identical": result.offset is None,
                        "grown": result.grown,
                        "offset": result.offset,
                        "bytes": [result.bytes_a, result.bytes_b],
                        "sha256": [result.sha256_a, result.sha256_b],
                        "models": list(result.models),
                    }
                )
            )
            if result.offset is not None:
                sys.exit(EXIT_DIFFERS)
        elif result.grown:
            click.echo(
                f"B's cached prefix starts with A's {result.bytes_a:,} bytes (sha256 {result.sha256_a}) "
                f"and grows to {result.bytes_b:,}"
            )
        else:
            click.echo(f"cached prefixes identical: {result.bytes_a:,} bytes, sha256 {result.sha256_a}")

    run_action(action)


def _non_empty(value: str | None) -> str | None:
    """An option's text, refused when empty (the library's error names its own argument)."""
    if value == "":
        raise click.BadParameter("must not be empty")
    return value


def _check_prefix_document(source: str, document: Any) -> None:
    """Exit 2 naming the file when ``document`` is neither a body nor an `assemble --json` output
    (the comparison's own error could not say which of the two it was)."""
    try:
        cached_prefix(document)
    except InvalidRequestError as exc:
        fail(f"{source}: {exc}", EXIT_USAGE)
