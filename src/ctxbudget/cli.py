"""The ``ctxbudget`` command: thin commands that parse, call one library function, print.

Exit codes: 0 ok; 2 bad input or usage (one line: what and where); 3 cannot fit.
Configuration: an explicit option > environment (``CTXBUDGET_CATALOG``) > default.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from .assemble import assemble
from .budget import parse_budget_spec
from .catalog.catalog import load_catalog
from .errors import BudgetExceeded, CostCeilingExceeded, CtxBudgetError, InvariantViolation, PrefixChanged
from .fitting import count, fit
from .policy import list_policies, load_policy
from .prefix import compare_prefixes
from .report import FitReport

EXIT_DIFFERS = 1
EXIT_USAGE = 2
EXIT_CANNOT_FIT = 3
EXIT_COST = 4
F = TypeVar("F", bound=Callable[..., Any])


def _fail(message: str, code: int) -> None:
    click.echo(f"ctxbudget: {message}", err=True)
    sys.exit(code)


def _read_json(source: str) -> Any:
    try:
        text = sys.stdin.read() if source == "-" else open(source, encoding="utf-8").read()  # noqa: SIM115
    except OSError as exc:
        _fail(f"cannot read {source}: {exc.strerror}", EXIT_USAGE)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        _fail(f"{source}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", EXIT_USAGE)


def _run(action: Callable[[], None]) -> None:
    try:
        action()
    except BudgetExceeded as exc:
        _fail(str(exc), EXIT_CANNOT_FIT)
    except CostCeilingExceeded as exc:
        _fail(str(exc), EXIT_COST)
    except (PrefixChanged, InvariantViolation) as exc:
        _fail(str(exc), EXIT_DIFFERS)
    except CtxBudgetError as exc:
        _fail(str(exc), EXIT_USAGE)


CATALOG_OPTION = click.option(
    "--catalog",
    "catalogs",
    multiple=True,
    envvar="CTXBUDGET_CATALOG",
    metavar="FILE",
    help="Extra catalog TOML adding or overriding models (repeatable; env CTXBUDGET_CATALOG).",
)
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def _common(func: F) -> F:
    options = [
        CATALOG_OPTION,
        click.option(
            "--format",
            "format_",
            type=click.Choice(["question", "openai", "anthropic"]),
            help="Request format (detected when omitted).",
        ),
        JSON_OPTION,
        click.option(
            "--model", required=True, help="Model id, e.g. gpt-5, claude-sonnet-4-5, openai/gpt-4o."
        ),
        click.argument("source", default="-", metavar="[FILE|-]"),
    ]
    for option in options:
        func = option(func)
    return func


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ctxbudget")
def main() -> None:
    """Fit LLM requests into a token budget, exactly and deterministically, offline."""


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
) -> None:
    """Fit a request (JSON file or stdin) into the model's window and print the result."""
    request = _read_json(source)

    def action() -> None:
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


@main.command("policies")
@JSON_OPTION
def policies_command(as_json: bool) -> None:
    """List the bundled assembly policies and their tiers."""

    def action() -> None:
        rows: list[dict[str, Any]] = []
        for name in list_policies():
            policy = load_policy(name)
            tiers = [
                {
                    "index": t.index,
                    "name": t.name,
                    "ceiling_tokens": t.ceiling_tokens,
                    "eviction": t.eviction,
                    "cached": t.cached,
                    "cache_ttl": t.cache_ttl,
                }
                for t in policy.tiers
            ]
            rows.append(
                {
                    "name": policy.name,
                    "description": policy.description,
                    "envelope_tokens": policy.envelope_tokens,
                    "reserve_output_tokens": policy.reserve_output_tokens,
                    "cost_ceiling_usd": policy.cost_ceiling_usd,
                    "tiers": tiers,
                }
            )
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

    _run(action)


@main.command("assemble")
@CATALOG_OPTION
@JSON_OPTION
@click.option("--model", required=True, help="Model id (must be in the catalog: the turn is priced).")
@click.option(
    "--policy",
    "policy_ref",
    default="legal-review",
    show_default=True,
    metavar="NAME|FILE",
    help="A bundled policy name or a policy TOML file.",
)
@click.option(
    "--format",
    "format_",
    type=click.Choice(["anthropic", "openai", "text"]),
    default="anthropic",
    show_default=True,
    help="Body to render.",
)
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
    type=click.FloatRange(min=0, min_open=True),
    metavar="USD",
    help="Per-turn ceiling [default: the policy's].",
)
@click.option(
    "--expected-output-tokens",
    type=click.IntRange(min=0),
    metavar="N",
    help="Output tokens to price [default: the policy's].",
)
@click.option("--prompt-cache-key", metavar="KEY", help="OpenAI prompt_cache_key to set.")
@click.argument("source", default="-", metavar="[FILE|-]")
def assemble_command(
    source: str,
    model: str,
    policy_ref: str,
    format_: str,
    input_format: str | None,
    previous: str | None,
    cost_ceiling: float | None,
    expected_output_tokens: int | None,
    prompt_cache_key: str | None,
    catalogs: tuple[str, ...],
    as_json: bool,
) -> None:
    """Assemble a tiered request: the body to send on stdout, the report (tiers, breakpoints,
    predicted cache reads and writes, cost, invariants) on stderr, or both as JSON with --json.

    Exit codes: 2 bad input (a volatile value in a pinned tier is bad input), 3 cannot fit,
    4 over the cost ceiling."""
    request = _read_json(source)
    prior = _read_json(previous) if previous else None

    def action() -> None:
        result = assemble(
            request,
            policy=load_policy(policy_ref),
            model=model,
            format=format_,  # type: ignore[arg-type]
            previous=prior,
            cost_ceiling_usd=cost_ceiling,
            expected_output_tokens=expected_output_tokens,
            prompt_cache_key=prompt_cache_key,
            input_format=input_format,
            catalog=load_catalog(catalogs),
        )
        if as_json:
            click.echo(json.dumps({"request": result.request, "report": result.report}, ensure_ascii=False))
            return
        body = (
            result.request
            if isinstance(result.request, str)
            else json.dumps(result.request, ensure_ascii=False)
        )
        click.echo(body)
        _print_assembly(result.report)

    _run(action)


def _print_assembly(report: dict[str, Any]) -> None:
    out = Console(stderr=True)
    label = "exact" if report["exact"] else f"ESTIMATE x{report['safety_factor']:g}"
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
        f"cost ${report['cost_usd']:.4f}"
        + (f" (ceiling ${report['cost_ceiling_usd']:.2f})" if report["cost_ceiling_usd"] else "")
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
    """Check that two requests (bodies or `assemble --json` outputs) share a byte-identical cached
    prefix. Exit 0 when identical, 1 with the first differing byte when not."""
    a, b = _read_json(first), _read_json(second)

    def action() -> None:
        result = compare_prefixes(a, b, strict=not as_json)
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "identical": result.offset is None,
                        "offset": result.offset,
                        "bytes": [result.bytes_a, result.bytes_b],
                        "sha256": [result.sha256_a, result.sha256_b],
                    }
                )
            )
            if result.offset is not None:
                sys.exit(EXIT_DIFFERS)
        else:
            click.echo(f"cached prefixes identical: {result.bytes_a:,} bytes, sha256 {result.sha256_a}")

    _run(action)


@main.command("simulate")
@click.argument(
    "scenario", required=False, type=click.Path(exists=True, dir_okay=False), metavar="[SCENARIO]"
)
@click.option(
    "--model", default=None, help="Model id [default: the scenario's, claude-sonnet-4-5 for the bundled one]."
)
@click.option(
    "--policy", "policy_ref", default=None, metavar="NAME|FILE", help="Policy [default: the scenario's]."
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Write DIR/turns.json, DIR/summary.json and DIR/chart.png.",
)
@click.option(
    "--store",
    "store_path",
    default=":memory:",
    show_default=True,
    metavar="FILE",
    help="SQLite file for the simulated session.",
)
@JSON_OPTION
def simulate_command(
    scenario: str | None,
    model: str | None,
    policy_ref: str | None,
    out_dir: str | None,
    store_path: str,
    as_json: bool,
) -> None:
    """Replay a scenario (default: the bundled 10-turn deposition review) through sessions and
    assembly; print per-turn tokens, cache, cost and latency, the summary, and the comparison with
    raw injection and naive truncation."""
    from .simulation.report import write_outputs
    from .simulation.runner import run_simulation
    from .simulation.scenario import bundled_scenario, parse_scenario

    def action() -> None:
        plan = parse_scenario(_read_json(scenario)) if scenario else bundled_scenario()
        result = run_simulation(plan, model=model, policy=policy_ref, store_path=store_path)
        written = write_outputs(result, out_dir) if out_dir else []
        if as_json:
            payload = {"turns": result.turns, "summary": result.summary, "strategies": result.strategies}
            click.echo(json.dumps(payload))
            return
        _print_simulation(result)
        for path in written:
            click.echo(f"wrote {path}")

    _run(action)


def _print_simulation(result: Any) -> None:
    console = Console(width=150)
    table = Table(
        "turn",
        "input",
        "pinned",
        "critical",
        "contextual",
        "volatile",
        "cache read",
        "written",
        "uncached",
        "cost $",
        "ceiling",
        "ms",
    )
    for t in result.turns:
        tiers = list(t["tiers"].values()) + [0] * 4
        table.add_row(
            str(t["turn"]),
            f"{t['input_tokens']:,}",
            *(f"{v:,}" for v in tiers[:4]),
            f"{t['cache_read_tokens']:,}",
            f"{t['cache_write_tokens']:,}",
            f"{t['uncached_tokens']:,}",
            f"{t['cost_usd']:.4f}",
            "ok" if t["within_ceiling"] else "OVER",
            f"{t['assembly_ms']:.0f}",
        )
    console.print(table)
    s = result.summary
    console.print(
        f"turns 2..{s['turns']}: {s['cache_hit_ratio']:.1%} of input tokens read from cache; cost mean ${s['mean_cost_usd']:.4f}, "
        f"max ${s['max_cost_usd']:.4f}, {s['turns_over_ceiling']} over the ceiling; p95 assembly {s['p95_assembly_ms']:.0f} ms; "
        f"evidence verbatim {s['evidence_verbatim_ratio']:.0%}; max input {s['max_input_tokens']:,} tokens"
    )
    for c in s["compactions"]:
        console.print(
            f"compaction of turns {c['turns']}: {c['tokens_before']:,} -> {c['tokens_after']:,} tokens ({c['reduction']:.0%} cut)"
        )
    compare = Table("strategy", "mean input", "mean $/turn", "max $/turn", "evidence kept", "cache")
    for row in result.strategies:
        compare.add_row(
            row["strategy"],
            f"{row['mean_input_tokens']:,}",
            f"{row['mean_cost_usd']:.4f}",
            f"{row['max_cost_usd']:.4f}",
            f"{row['evidence_kept']:.0%}",
            row["cache"],
        )
    console.print(compare)


STORE_OPTION = click.option(
    "--store",
    "store_path",
    default="sessions.db",
    show_default=True,
    envvar="CTXBUDGET_STORE",
    metavar="FILE",
    help="SQLite session store (env CTXBUDGET_STORE).",
)


@main.group("session")
def session_group() -> None:
    """Work with stored sessions: new, add, show, list, export."""


@session_group.command("new")
@click.argument("name")
@click.option(
    "--base",
    "base_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    metavar="FILE",
    help='The stable items every turn starts from ({"items": [...]}, e.g. playbook and evidence).',
)
@click.option("--policy", "policy_ref", default="legal-review", show_default=True, metavar="NAME|FILE")
@click.option("--model", required=True, help="Model id (in the catalog).")
@STORE_OPTION
def session_new(name: str, base_file: str, policy_ref: str, model: str, store_path: str) -> None:
    """Create a session."""
    from .session import Session, SQLiteStore

    base = _read_json(base_file)

    def action() -> None:
        Session.create(SQLiteStore(store_path), name, policy=policy_ref, model=model, base=base)
        click.echo(f"created session {name!r} in {store_path}")

    _run(action)


@session_group.command("add")
@click.argument("name")
@click.option("--question", required=True, help="The user's question for this turn.")
@click.option("--answer", default="", help="The model's answer, when known (recorded with the turn).")
@click.option(
    "--tool-result", "tool_results", multiple=True, metavar="NAME=CONTENT", help="A tool result (repeatable)."
)
@click.option("--tag", "tags", multiple=True, help="An issue tag for this turn (repeatable).")
@click.option(
    "--format",
    "format_",
    type=click.Choice(["anthropic", "openai", "text"]),
    default="anthropic",
    show_default=True,
)
@STORE_OPTION
@JSON_OPTION
def session_add(
    name: str,
    question: str,
    answer: str,
    tool_results: tuple[str, ...],
    tags: tuple[str, ...],
    format_: str,
    store_path: str,
    as_json: bool,
) -> None:
    """Assemble the next turn of a session, print it, and record the turn (compacting when due)."""
    from .session import Session, SQLiteStore, ToolResult

    def action() -> None:
        results = []
        for spec in tool_results:
            tool, sep, content = spec.partition("=")
            if not sep:
                raise click.BadParameter(f"{spec!r} is not NAME=CONTENT", param_hint="--tool-result")
            results.append(ToolResult(name=tool, content=content))
        session = Session(SQLiteStore(store_path), name)
        prepared = session.prepare(question, tool_results=results, tags=tags, format=format_)
        turn = session.record(prepared, answer)
        if as_json:
            click.echo(
                json.dumps({"request": prepared.assembly.request, "report": turn.report}, ensure_ascii=False)
            )
        else:
            body = prepared.assembly.request
            click.echo(body if isinstance(body, str) else json.dumps(body, ensure_ascii=False))
            _print_assembly(dict(turn.report))

    _run(action)


@session_group.command("list")
@STORE_OPTION
def session_list(store_path: str) -> None:
    """List the sessions in the store."""
    from .session import SQLiteStore

    def action() -> None:
        for name in SQLiteStore(store_path).names():
            click.echo(name)

    _run(action)


@session_group.command("show")
@click.argument("name")
@STORE_OPTION
def session_show(name: str, store_path: str) -> None:
    """Show a session's turns (tokens, cache, cost) and its ledger."""
    from .session import SQLiteStore

    def action() -> None:
        store = SQLiteStore(store_path)
        meta = store.meta(name)
        click.echo(f"session {name}: policy {meta.policy}, model {meta.model}")
        for turn in store.turns(name):
            report = turn.report
            cache = report.get("cache", {})
            click.echo(
                f"turn {turn.index}: {report.get('tokens', 0):,} tokens, read {cache.get('read_tokens', 0):,}, "
                f"written {cache.get('write_tokens', 0):,}, ${report.get('cost_usd', 0):.4f} - {turn.question[:60]}"
            )
        for entry in store.ledger(name):
            click.echo("ledger " + json.dumps(entry, ensure_ascii=False))

    _run(action)


@session_group.command("export")
@click.argument("name")
@STORE_OPTION
def session_export(name: str, store_path: str) -> None:
    """Print a session as JSON: metadata, turns (with reports and usage) and ledger."""
    from .session import SQLiteStore

    def action() -> None:
        store = SQLiteStore(store_path)
        meta = store.meta(name)
        click.echo(
            json.dumps(
                {
                    "name": name,
                    "policy": meta.policy,
                    "model": meta.model,
                    "base": meta.base,
                    "turns": [t.to_dict() for t in store.turns(name)],
                    "ledger": store.ledger(name),
                },
                ensure_ascii=False,
            )
        )

    _run(action)


@main.command("serve")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Interface to bind (loopback by default)."
)
@click.option("--port", default=8787, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--policy",
    "policy_ref",
    default=None,
    metavar="NAME|FILE",
    help="Take the per-request cost ceiling from this policy.",
)
@click.option(
    "--cost-ceiling",
    type=click.FloatRange(min=0, min_open=True),
    metavar="USD",
    help="Refuse requests estimated above this cost (overrides --policy's).",
)
@STORE_OPTION
@click.option(
    "--anthropic-upstream",
    default="https://api.anthropic.com",
    show_default=True,
    envvar="CTXBUDGET_ANTHROPIC_UPSTREAM",
    metavar="URL",
    help="Where /v1/messages is forwarded (fixed; never taken from a request).",
)
@click.option(
    "--openai-upstream",
    default="https://api.openai.com",
    show_default=True,
    envvar="CTXBUDGET_OPENAI_UPSTREAM",
    metavar="URL",
    help="Where /v1/chat/completions is forwarded.",
)
@click.option("--max-body-bytes", default=8 * 1024 * 1024, show_default=True, type=click.IntRange(min=1024))
@click.option(
    "--timeout",
    "timeout_seconds",
    default=600.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Upstream timeout in seconds.",
)
@CATALOG_OPTION
def serve_command(
    host: str,
    port: int,
    policy_ref: str | None,
    cost_ceiling: float | None,
    store_path: str,
    anthropic_upstream: str,
    openai_upstream: str,
    max_body_bytes: int,
    timeout_seconds: float,
    catalogs: tuple[str, ...],
) -> None:
    """Serve the Anthropic- and OpenAI-compatible gateway: point an SDK's base URL at it."""
    import logging

    try:
        import uvicorn

        from .gateway import GatewayConfig, create_app
    except ImportError:
        _fail("the gateway needs its extra: pip install 'ctxbudget[gateway]'", EXIT_USAGE)

    def action() -> None:
        ceiling = (
            cost_ceiling
            if cost_ceiling is not None
            else (load_policy(policy_ref).cost_ceiling_usd if policy_ref else None)
        )
        config = GatewayConfig(
            host=host,
            port=port,
            anthropic_upstream=anthropic_upstream,
            openai_upstream=openai_upstream,
            store_path=store_path,
            cost_ceiling_usd=ceiling,
            max_body_bytes=max_body_bytes,
            timeout_seconds=timeout_seconds,
            catalog_paths=catalogs,
            policy=policy_ref,
        )
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        click.echo(
            f"ctxbudget gateway on http://{host}:{port} -> anthropic {anthropic_upstream}, openai {openai_upstream}"
        )
        uvicorn.run(create_app(config), host=host, port=port, log_level="warning")

    _run(action)
