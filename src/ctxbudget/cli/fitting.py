"""Commands over single requests: fit, count, models."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..budget import parse_budget_spec
from ..catalog.catalog import load_catalog
from ..fitting import count, fit
from ..report import FitReport
from .base import (
    CATALOG_OPTION,
    JSON_OPTION,
    _common,
    _read_json,
    _run,
    main,
)


@main.command("fit")
@_common
@click.option(
    "--max-context-tokens",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Explicit window in tokens (0: resolve from the catalog).",
)
@click.option(
    "--reserve-output-tokens",
    type=click.IntRange(min=0),
    default=None,
    help="Tokens held back for the reply [default: min(4096, model max output)].",
)
@click.option(
    "--budget",
    "budget_spec",
    default="",
    metavar="SPEC",
    help="Percentages, e.g. system=10,query=15,documents=50,history=25.",
)
@click.option(
    "--on-overflow",
    type=click.Choice(["error", "empty"]),
    default="error",
    show_default=True,
    help="When untrimmable parts alone exceed the window: fail (exit 3) or empty all components.",
)
@click.option(
    "--score-order",
    type=click.Choice(["desc", "asc"]),
    default="desc",
    show_default=True,
    help="Document scores: desc for similarities, asc for distances.",
)
@click.option(
    "--split-documents",
    is_flag=True,
    help="Split an over-long document into passages and keep the ones that match the query.",
)
@click.option(
    "--semantic",
    is_flag=True,
    help="With --split-documents: add a local embedding model's similarity to BM25 "
    "(needs the extra: pip install 'ctxbudget[semantic]').",
)
@click.option(
    "--document-order",
    type=click.Choice(["ranked", "original"]),
    default="ranked",
    show_default=True,
    help="Order of kept documents in the output.",
)
def fit_command(
    source: str,
    model: str,
    as_json: bool,
    format_: str | None,
    catalogs: tuple[str, ...],
    max_context_tokens: int,
    reserve_output_tokens: int | None,
    budget_spec: str,
    on_overflow: str,
    score_order: str,
    document_order: str,
    split_documents: bool,
    semantic: bool,
) -> None:
    """Fit a request (JSON file or stdin) into the model's window and print the result."""
    if semantic and not split_documents:
        raise click.UsageError("--semantic scores passages: it needs --split-documents")
    request = _read_json(source)

    def action() -> None:
        scorer = None
        if semantic:
            from ..semantic import EmbeddingScorer  # the extra is imported only when asked for

            scorer = EmbeddingScorer().load()
        result = fit(
            request,
            model=model,
            max_context_tokens=max_context_tokens,
            reserve_output_tokens=reserve_output_tokens,
            budget=parse_budget_spec(budget_spec),
            format=format_,
            on_overflow=on_overflow,  # type: ignore[arg-type]
            score_order=score_order,  # type: ignore[arg-type]
            document_order=document_order,  # type: ignore[arg-type]
            split_documents=split_documents,
            passage_scorer=scorer,
            catalog=load_catalog(catalogs),
        )
        if as_json:
            click.echo(
                json.dumps({"request": result.request, "report": result.report.to_dict()}, ensure_ascii=False)
            )
        else:
            _print_report(result.report)

    _run(action)


@main.command("count")
@_common
def count_command(
    source: str, model: str, as_json: bool, format_: str | None, catalogs: tuple[str, ...]
) -> None:
    """Print the token count of the rendered request (exact, or a labelled estimate)."""
    request = _read_json(source)

    def action() -> None:
        result = count(request, model=model, format=format_, catalog=load_catalog(catalogs))
        if as_json:
            click.echo(json.dumps(result))
        else:
            label = "exact" if result["exact"] else f"estimate (x{result['safety_factor']:g} safety factor)"
            click.echo(f"{result['tokens']} tokens ({result['encoding']}, {label})")

    _run(action)


@main.command("models")
@JSON_OPTION
@CATALOG_OPTION
def models_command(as_json: bool, catalogs: tuple[str, ...]) -> None:
    """List the model catalog: windows, output caps, tokenizers, prices, cache rules."""

    def action() -> None:
        catalog = load_catalog(catalogs)
        if as_json:
            rows = [_model_row(m) for m in catalog.models]
            click.echo(json.dumps({"models": rows, "aliases": dict(catalog.aliases)}, indent=2))
            return
        table = Table("model", "provider", "window", "max out", "tokenizer", "in $/M", "out $/M", "cache")
        for m in catalog.models:
            tok = m.tokenizer.encoding + ("" if m.tokenizer.exact else f" ~x{m.tokenizer.safety_factor:g}")
            table.add_row(
                m.id,
                m.provider,
                f"{m.context_window:,}",
                f"{m.max_output_tokens:,}",
                tok,
                f"{m.prices.input:g}",
                f"{m.prices.output:g}",
                f"{m.cache.mode} >={m.cache.min_cacheable_tokens}",
            )
        Console().print(table)
        for alias, target in sorted(catalog.aliases.items()):
            click.echo(f"alias {alias} -> {target}")

    _run(action)


def _model_row(m: Any) -> dict[str, Any]:
    from dataclasses import asdict

    row = asdict(m)
    row["sources"] = dict(m.sources)
    return row


def _print_report(report: FitReport) -> None:
    console = Console()
    label = "exact" if report.exact else f"ESTIMATE x{report.safety_factor:g}"
    click.echo(
        f"{report.model} ({report.encoding}, {label}): window {report.context_window:,} ({report.window_rule}), "
        f"reserve {report.reserve_output_tokens:,}, available {report.available_tokens:,}"
    )
    status = "passed through unchanged" if report.passed_through else "trimmed"
    click.echo(
        f"tokens {report.tokens_before:,} -> {report.tokens_after:,} (saved {report.tokens_saved:,}); {status}; "
        f"untrimmable overhead {report.overhead_tokens:,}"
    )
    table = Table("component", "budget", "before", "after", "kept", "truncated", "dropped", "summarized")
    for component in ("system", "query", "documents", "history"):
        rows = [i for i in report.items if i.component == component]
        if not rows:
            continue
        actions = [i.action for i in rows]
        table.add_row(
            component,
            f"{report.budgets.get(component, 0):,}" if report.budgets else "-",
            f"{sum(i.tokens_before for i in rows):,}",
            f"{sum(i.tokens_after for i in rows):,}",
            *(str(actions.count(a)) for a in ("kept", "truncated", "dropped", "summarized")),
        )
    console.print(table)
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
