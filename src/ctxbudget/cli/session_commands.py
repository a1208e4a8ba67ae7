"""Session and simulation commands: session new/add/show/list/export, simulate."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from ..errors import CtxBudgetError, InvalidRequestError
from .assemble_commands import print_assembly
from .base import (
    ALLOW_PREFIX_CHANGE_OPTION,
    BODY_FORMAT_OPTION,
    CATALOG_OPTION,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    IDLE_SECONDS_OPTION,
    JSON_OPTION,
    STORE_OPTION,
    OutputError,
    echo_body,
    exit_code,
    fail,
    main,
    policy_option,
    priced,
    read_json,
    run_action,
    session_name_argument,
    skip_collection_at_exit,
    table_console,
    utf8_out,
)

if TYPE_CHECKING:
    from rich.table import Table

    from ..session import PreparedTurn, SessionStore, Turn


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
    help="Write DIR/turns.json, DIR/summary.json, DIR/chart.png and DIR/requests/turn-NN.json.",
)
@click.option(
    "--store",
    "store_path",
    default=":memory:",
    show_default=True,
    metavar="FILE",
    help="SQLite file for the simulated session.",
)
@CATALOG_OPTION
@JSON_OPTION
def simulate_command(
    scenario: str | None,
    model: str | None,
    policy_ref: str | None,
    out_dir: str | None,
    store_path: str,
    catalogs: tuple[str, ...],
    as_json: bool,
) -> None:
    """Replay a scenario (default: the bundled 10-turn deposition review, with idle gaps) through
    sessions, assembly and the gateway to a fake upstream that bills like Anthropic; print per-turn
    tokens, predicted and billed cache and cost, modelled latency, the summary, and the comparison
    with raw injection and naive truncation.

    SCENARIO is a JSON file: name, base ({"items": [...]}), optional policy and model, and turns,
    each a question with optional tags, tool_calls, tool_results, answer and idle_seconds
    (docs/sessions.md, "The simulation")."""
    try:
        from ..simulation.runner import run_simulation
    except ImportError:  # its turns go through the gateway
        fail(
            "simulate sends its turns through the gateway, which needs its extra: pip install 'ctxbudget[gateway]' "
            "(in a source checkout: pip install -e '.[gateway,chart]')",
            EXIT_USAGE,
        )
    from ..simulation.scenario import bundled_scenario, parse_scenario
    from ..simulation.summary import check_chart, write_outputs

    if "://" in store_path:  # a server's URL (its password in it, maybe): never echoed
        fail(
            "--store: the simulation keeps its session in an SQLite file; give a file, not a URL", EXIT_USAGE
        )

    def action() -> None:
        if out_dir:
            check_chart()  # before the run, not after it
        try:
            plan = parse_scenario(read_json(scenario)) if scenario else bundled_scenario()
            result = run_simulation(
                plan, model=model, policy=policy_ref, store_path=store_path, catalog_paths=catalogs
            )
        except InvalidRequestError as exc:  # a scenario's error names its file
            fail(f"{scenario}: {exc}" if scenario else str(exc), EXIT_USAGE)
        except CtxBudgetError as exc:  # a turn's (cannot fit, over the ceiling): its file and place
            places = [note for note in getattr(exc, "__notes__", ()) if note.startswith("$.")]
            if not scenario or not places:
                raise
            fail(f"{scenario}: {places[0]}: {exc}", exit_code(exc))
        written = write_outputs(result, out_dir) if out_dir else []
        if as_json:
            payload = {"turns": result.turns, "summary": result.summary, "strategies": result.strategies}
            click.echo(json.dumps(payload))
            return
        _print_simulation(result)
        for path in written:
            click.echo(f"wrote {path}")

    run_action(action)


def _pair(predicted: str, billed: dict[str, Any] | None, key: str, form: str) -> str:
    """``predicted / billed`` ("-" where the turn was not billed)."""
    value = billed.get(key) if billed else None
    return f"{predicted} / {'-' if value is None else format(value, form)}"


_TURN_COLUMNS = (
    "turn",
    "idle s",
    "input",
    "pinned",
    "critical",
    "contextual",
    "ledger",
    "volatile",
    "read pred/billed",
    "written pred/billed",
    "cost $ pred/billed",
    "e2e ms",
)


def _turn_table(turns: list[dict[str, Any]]) -> Table:
    """One row per turn: tokens by block, predicted / billed cache and cost, latency."""
    from rich.table import Table  # rich only where a table is printed (70 ms of a start)

    table = Table(*_TURN_COLUMNS)
    for t in turns:
        tiers, billed = t["tiers"], t["billed"]
        table.add_row(
            str(t["turn"]),
            f"{t['idle_seconds']:.0f}",
            f"{t['input_tokens']:,}",
            *(
                f"{tiers.get(name, 0):,}"
                for name in ("pinned", "critical", "contextual", "ledger", "volatile")
            ),
            _pair(f"{t['cache_read_tokens']:,}", billed, "cache_read_tokens", ","),
            _pair(f"{t['cache_write_tokens']:,}", billed, "cache_write_tokens", ","),
            _pair(f"{t['cost_usd']:.4f}", billed, "cost_usd", ".4f"),
            f"{billed['end_to_end_ms']:,.0f}" if billed else "-",
        )
    return table


def _later_turns(turns: int) -> str:
    """The turns a cache share is of: the second on (a single turn has none to read)."""
    return {1: "no turn after the first", 2: "turn 2"}.get(turns, f"turns 2..{turns}")


def _summary_lines(s: dict[str, Any]) -> list[str]:
    """The predicted and billed summary, and each compaction."""
    lines = [
        f"predicted: {_later_turns(s['turns'])} read {s['cache_hit_ratio']:.1%} of input from cache; cost mean "
        f"{priced(s['mean_cost_usd'])}, max {priced(s['max_cost_usd'])}, {s['turns_over_ceiling']} over the ceiling; "
        f"p95 assembly {s['p95_assembly_ms']:.0f} ms; evidence verbatim {s['evidence_verbatim_ratio']:.0%}; "
        f"max input {s['max_input_tokens']:,} tokens"
    ]
    b = s["billed"]
    if not b:
        lines.append(
            "billed: not simulated (the billing upstream models explicit-breakpoint caching, Anthropic's)"
        )
    else:
        verdict = "within" if b["latency_within_target"] else "OVER"
        lines.append(
            f"billed (fake Anthropic upstream through the gateway): {_later_turns(s['turns'])} read "
            f"{b['cache_hit_ratio']:.1%} from cache; cost mean {priced(b['mean_cost_usd'])}, max {priced(b['max_cost_usd'])}; "
            f"p95 end-to-end {b['p95_end_to_end_ms']:,.0f} ms ({verdict} the {b['latency_target_ms']:,.0f} ms target, "
            "modelled latency: docs/sessions.md)"
        )
    lines += [
        f"compaction of turns {c['turns']}: {c['tokens_before']:,} -> {c['tokens_after']:,} tokens ({c['reduction']:.0%} cut)"
        for c in s["compactions"]
    ]
    return lines


def _strategy_table(strategies: list[dict[str, Any]]) -> Table:
    from rich.table import Table

    compare = Table("strategy", "mean input", "mean $/turn", "max $/turn", "evidence kept", "cache")
    for row in strategies:
        compare.add_row(
            row["strategy"],
            f"{row['mean_input_tokens']:,}",
            f"{row['mean_cost_usd']:.4f}",
            f"{row['max_cost_usd']:.4f}",
            f"{row['evidence_kept']:.0%}",
            row["cache"],
        )
    return compare


def _print_simulation(result: Any) -> None:
    console = table_console()
    console.print(_turn_table(result.turns))
    for line in _summary_lines(result.summary):
        console.print(line)
    console.print(_strategy_table(result.strategies))


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
@policy_option(": the tiers, ceilings and caching every turn is assembled by, read again at each turn")
@click.option("--model", required=True, help="Model id (in the catalog).")
@STORE_OPTION
@CATALOG_OPTION
def session_new(
    name: str, base_file: str, policy_ref: str, model: str, store_path: str, catalogs: tuple[str, ...]
) -> None:
    """Create a session (its model from the catalog: the bundled one, with --catalog's files)."""
    from ..catalog.catalog import load_catalog
    from ..session import Session, connect_store

    base = read_json(base_file)

    def action() -> None:
        # checked before the store is opened: a session refused left an empty store file behind
        meta = Session.checked_meta(
            name, policy=policy_ref, model=model, base=base, catalog=load_catalog(catalogs)
        )
        store = connect_store(store_path)
        try:
            store.create(meta)
        finally:
            store.close()
        skip_collection_at_exit()
        click.echo(f"created session {name!r} in {store.location}")

    run_action(action)


@session_group.command("add")
@session_name_argument
@click.option("--question", required=True, help="The user's question for this turn.")
@click.option("--answer", default="", help="The model's answer, when known (recorded with the turn).")
@click.option(
    "--tool-result", "tool_results", multiple=True, metavar="NAME=CONTENT", help="A tool result (repeatable)."
)
@click.option("--tag", "tags", multiple=True, help="An issue tag for this turn (repeatable).")
@ALLOW_PREFIX_CHANGE_OPTION
@IDLE_SECONDS_OPTION
@BODY_FORMAT_OPTION
@STORE_OPTION
@CATALOG_OPTION
@JSON_OPTION
def session_add(
    name: str,
    question: str,
    answer: str,
    tool_results: tuple[str, ...],
    tags: tuple[str, ...],
    format_: str | None,
    store_path: str,
    catalogs: tuple[str, ...],
    as_json: bool,
    allow_prefix_change: bool,
    idle_seconds: float | None,
) -> None:
    """Assemble the next turn of a session, print it, and record the turn (compacting when due)."""
    from pathlib import Path

    from ..catalog.catalog import load_catalog
    from ..errors import StoreError
    from ..session import Session, ToolResult, connect_store

    def action() -> None:
        if not question.strip():
            raise click.BadParameter("the question is empty", param_hint="--question")
        results = []
        for spec in tool_results:
            tool, sep, content = spec.partition("=")
            if not sep:
                raise click.BadParameter(f"{spec!r} is not NAME=CONTENT", param_hint="--tool-result")
            if not tool.strip():
                raise click.BadParameter(f"{spec!r} names no tool (NAME=CONTENT)", param_hint="--tool-result")
            results.append(ToolResult(name=tool, content=content))
        if "://" not in store_path and Path(store_path).is_file() and not Path(store_path).stat().st_size:
            # an empty file holds no session, and a failed add would leave the schema in it
            raise StoreError(store_path, "is empty (no session was ever stored in it)", "check the path")
        store = connect_store(store_path, mode="write")
        stored: int | None = None  # the turn's index once it is stored
        try:
            try:
                session = Session(store, name, catalog=load_catalog(catalogs))
                known = len(session.turns)  # read as the session was opened
                try:
                    prepared, turn = session.add(
                        question,
                        answer=answer,
                        tool_results=results,
                        tags=tags,
                        output_format=format_,
                        allow_prefix_change=allow_prefix_change,
                        idle_seconds=idle_seconds,
                    )
                except KeyboardInterrupt:
                    stored = _stored_meanwhile(store, name, known, question)
                    raise
                stored = turn.index
            finally:
                store.close()
            skip_collection_at_exit()  # closed above: the heap's teardown took 105-134 ms after a turn
            _print_added(prepared, turn, name, as_json)
        except KeyboardInterrupt:
            if stored is None:
                raise
            # told only "aborted", the user added the turn again and stored it twice
            fail(
                f"interrupted once turn {stored} of session {name!r} was stored: do not add it again "
                "(`session show` lists it)",
                EXIT_INTERRUPTED,
            )

    run_action(action)


def _stored_meanwhile(store: SessionStore, name: str, known: int, question: str) -> int | None:
    """The index of the turn this command stored, when Ctrl-C came as its commit ended (Python
    raises the interrupt once SQLite's COMMIT returns: the turn was stored, the command said
    "aborted"): the session's last turn, stored after the ``known`` ones, asking ``question``."""
    last = store.last_turn(name)
    return last.index if last is not None and last.index > known and last.question == question else None


def _print_added(prepared: PreparedTurn, turn: Turn, name: str, as_json: bool) -> None:
    """The stored turn's body and report (JSON), or its body and the report's table."""
    try:
        if as_json:
            click.echo(
                json.dumps(
                    {"request": prepared.assembly.request, "report": turn.report},
                    ensure_ascii=not utf8_out(),
                )
            )
        else:
            echo_body(prepared.assembly.request)
    except OutputError as exc:
        # the turn is stored: told only "cannot write the output", the command was run again
        # and stored the turn twice
        fail(
            f"cannot write the output to stdout: {exc.strerror or exc}; turn {turn.index} of session "
            f"{name!r} was stored all the same: do not add it again (`session show` lists it)",
            EXIT_USAGE,
        )
    if not as_json:
        print_assembly(dict(turn.report))


@session_group.command("list")
@STORE_OPTION
@JSON_OPTION
def session_list(store_path: str, as_json: bool) -> None:
    """List the sessions in the store: turns, input tokens and cost of each."""
    from ..session import connect_store

    def action() -> None:
        store = connect_store(store_path, mode="read")
        rows = []
        for name in store.names():
            figures = [t.figures() for t in store.turns(name)]
            costs = [f.cost_usd for f in figures if f.cost_usd is not None]
            rows.append(
                {
                    "name": name,
                    "turns": len(figures),
                    "input_tokens": sum(f.input_tokens for f in figures),
                    "cost_usd": sum(costs) if costs else None,
                    "unpriced_turns": len(figures) - len(costs),
                }
            )
        if as_json:
            click.echo(json.dumps(rows, ensure_ascii=not utf8_out()))
        for row in [] if as_json else rows:
            click.echo(
                f"{row['name']}\t{_turns(row['turns'])}\t{row['input_tokens']:,} input tokens\t{_cost_of(row)}"
            )

    run_action(action)


@session_group.command("show")
@session_name_argument
@STORE_OPTION
@JSON_OPTION
def session_show(name: str, store_path: str, as_json: bool) -> None:
    """Show a session's turns (tokens, cache, cost) and its ledger (`session export` prints the
    turns' reports as well)."""
    from ..session import connect_store

    def action() -> None:
        store = connect_store(store_path, mode="read")
        meta = store.meta(name)
        turns = [(turn, turn.figures()) for turn in store.turns(name)]
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "name": name,
                        "policy": meta.policy,
                        "model": meta.model,
                        "recorded_by_gateway": meta.recorded_by_gateway,
                        "turns": [
                            {
                                "index": t.index,
                                "question": t.question,
                                **f.to_dict(),
                                "predicted_cache": list(t.predicted_cache() or ()) or None,
                            }
                            for t, f in turns
                        ],
                        "ledger": store.ledger(name),
                    },
                    ensure_ascii=not utf8_out(),
                )
            )
            return
        made = "recorded by the gateway" if meta.recorded_by_gateway else f"policy {meta.policy}"
        click.echo(f"session {name}: {made}, model {meta.model}")
        for turn, f in turns:
            predicted = turn.predicted_cache()
            against = (
                f" (predicted read {predicted[0]:,}, written {predicted[1]:,})"
                if predicted and f.source == "provider"
                else ""
            )
            click.echo(
                f"turn {turn.index}: {f.input_tokens:,} tokens, read {f.cache_read_tokens:,}, "
                f"written {f.cache_write_tokens:,}{against}, {priced(f.cost_usd)} ({f.source}) - "
                f"{_one_line(turn.question[:60])}"
            )
        for entry in store.ledger(name):
            click.echo("ledger " + json.dumps(entry, ensure_ascii=not utf8_out()))

    run_action(action)


@session_group.command("export")
@session_name_argument
@STORE_OPTION
def session_export(name: str, store_path: str) -> None:
    """Print a session as JSON: metadata, turns (with reports and usage) and ledger."""
    from ..session import connect_store

    def action() -> None:
        store = connect_store(store_path, mode="read")
        meta = store.meta(name)
        click.echo(
            json.dumps(
                {
                    "name": name,
                    "policy": meta.policy,
                    "model": meta.model,
                    "base": meta.base,
                    "turns": [{**t.to_dict(), "figures": t.figures().to_dict()} for t in store.turns(name)],
                    "ledger": store.ledger(name),
                },
                ensure_ascii=not utf8_out(),
            )
        )

    run_action(action)


def _turns(n: object) -> str:
    """``n`` turns, in words ("1 turn", "2 turns")."""
    return f"{n} turn{'' if n == 1 else 's'}"


def _cost_of(row: dict[str, Any]) -> str:
    """A session's cost as listed: never $0 for turns whose price is unknown."""
    cost, unknown = row["cost_usd"], row["unpriced_turns"]
    if cost is None:  # no turn priced; a session with no turns cost nothing
        return priced(0.0 if not row["turns"] else None)
    return priced(cost) + (f" (and {_turns(unknown)} of unknown price)" if unknown else "")


def _one_line(text: str) -> str:
    """``text`` on one line as printed: a character that does not print (a line break, a tab, a
    bidirectional control) written as its escape. A question is any client's text: a line break
    in it printed a line of its own, which read as another turn."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
