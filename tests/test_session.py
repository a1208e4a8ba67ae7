from __future__ import annotations

import itertools
import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxbudget import BudgetExceeded, ConfigError, CtxBudgetError, count
from ctxbudget.cli import main
from ctxbudget.session import Session, SQLiteStore, ToolCall, ToolResult
from ctxbudget.simulation.runner import run_simulation
from ctxbudget.simulation.scenario import parse_scenario
from ctxbudget.simulation.summary import write_outputs

POLICY = """
name = "mini"
envelope_tokens = 6000
expected_output_tokens = 200
cost_ceiling_usd = 0.45
[compaction]
history_trigger_tokens = 900
low_water_ratio = 0.4
keep_recent_turns = 2
[[tiers]]
name = "pinned"
ceiling_tokens = 2500
eviction = "never"
cached = true
cache_ttl = "1h"
[[tiers]]
name = "critical"
ceiling_tokens = 600
eviction = "protected"
cached = true
[[tiers]]
name = "contextual"
ceiling_tokens = 500
eviction = "compact"
cached = true
compact_query = "tags"
[[tiers]]
name = "volatile"
ceiling_tokens = 1200
eviction = "rolling"
cached = true
"""
EVIDENCE = [
    "12:01 Q. Did you send notice?\n12:02 A. Yes, by certified mail on March 3.",
    "40:10 A. The press failed twice.",
]


def _base() -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {
            "id": "playbook",
            "tier": "pinned",
            "kind": "playbook",
            "text": "".join(f"Rule {n}: cite page:line and exhibits. " for n in range(150)),
        },
    ]
    items += [
        {"id": f"EV-{n}", "tier": "critical", "kind": "evidence", "text": t, "tags": ["Notice"]}
        for n, t in enumerate(EVIDENCE)
    ]
    items += [
        {
            "id": f"page-{n}",
            "tier": "contextual",
            "kind": "document",
            "text": " ".join(
                f"{n}:{line:02d} The witness discussed notice and delivery of lot {line}."
                for line in range(1, 25)
            ),
        }
        for n in range(6)
    ]
    return {"items": items}


def _scenario(policy_path: str, turns: int = 7) -> dict[str, Any]:
    return {
        "name": "mini",
        "policy": policy_path,
        "model": "claude-sonnet-4-5",
        "base": _base(),
        "turns": [
            {
                "question": f"Question {n}: what about notice?",
                "tags": ["Notice"],
                "tool_calls": [{"name": "search", "arguments": '{"q": "notice"}'}],
                "tool_results": [
                    {
                        "name": "search",
                        "content": json.dumps(
                            {
                                "status": "CONFIRMED",
                                "matches": [
                                    f"{n}:0{k} A. Notice went out with EX-0{k}. " * 6 for k in range(1, 4)
                                ],
                            }
                        ),
                    }
                ],
            }
            for n in range(1, turns + 1)
        ],
    }


def _policy(tmp_path: Path) -> str:
    path = tmp_path / "mini.toml"
    path.write_text(POLICY)
    return str(path)


def test_a_created_session_holds_its_base_as_stored_not_the_callers_object(tmp_path: Path) -> None:
    """A new session is opened on what the store wrote (not read back): its base must still be
    the stored copy, so a caller that changes its base after creating the session changes neither
    this session's turns nor what a reopened one reads."""
    base = _base()
    store = SQLiteStore(tmp_path / "s.db")
    created = Session.create(store, "m", policy=_policy(tmp_path), model="claude-sonnet-4-5", base=base)
    reopened = Session(store, "m")
    assert created.meta == reopened.meta == store.meta("m")
    assert created.meta.base == base and created.meta.base is not base
    base["items"][0]["text"] = "changed"
    base["items"].append({"id": "late", "tier": "contextual", "kind": "document", "text": "late"})
    assert created.meta == store.meta("m")
    turn = created.prepare("What about notice?", tags=["Notice"])
    ids = [item["id"] for item in turn.request["items"]]
    assert "late" not in ids and turn.request["items"][0]["text"] != "changed"
    assert turn.request == reopened.prepare("What about notice?", tags=["Notice"]).request


def test_a_subclass_and_a_store_whose_create_returns_nothing_still_create_sessions(tmp_path: Path) -> None:
    """Creating opens the session on what the store returns; a subclass's own __init__ still
    runs, and a store written to the protocol before create returned anything reads it back."""

    class Tracked(Session):
        def __init__(self, store: Any, name: str, **options: Any) -> None:
            super().__init__(store, name, **options)
            self.audit: list[str] = []

    class OldStore(SQLiteStore):
        def create(self, meta: Any) -> None:  # type: ignore[override]
            super().create(meta)

    made = Tracked.create(
        SQLiteStore(tmp_path / "a.db"), "m", policy=_policy(tmp_path), model="claude-sonnet-4-5", base=_base()
    )
    assert made.audit == []
    old = OldStore(tmp_path / "b.db")
    session = Session.create(old, "m", policy=_policy(tmp_path), model="claude-sonnet-4-5", base=_base())
    assert session.meta == old.meta("m")


def test_short_simulation_keeps_its_invariants(tmp_path: Path) -> None:
    scenario = parse_scenario(_scenario(_policy(tmp_path)))
    result = run_simulation(scenario, store_path=str(tmp_path / "sim.db"))
    rows = result.turns
    assert all(r["input_tokens"] <= 6000 for r in rows)
    assert all(r["evidence_verbatim_ratio"] == 1.0 for r in rows)
    assert rows[0]["cache_read_tokens"] == 0
    assert all(r["cache_read_tokens"] > 0 for r in rows[1:])
    assert result.summary["cache_hit_ratio"] > 0.5
    compactions = [r["turn"] for r in rows if r["compaction"]]
    assert compactions and len(compactions) < len(rows) - 2  # in steps, not every turn
    store = SQLiteStore(tmp_path / "sim.db")
    ledger = store.ledger("mini")
    assert [e["turn"] for e in ledger] == sorted(e["turn"] for e in ledger)
    requests = tmp_path / "out" / "requests"
    requests.mkdir(parents=True)
    for left in ("turn-99.json", "turn-100.json", "notes.json"):  # an earlier run's, and the user's
        (requests / left).write_text("{}")
    written = write_outputs(result, tmp_path / "out")
    names = [p.name for p in written]
    on_disk = sorted(p.name for p in requests.iterdir())
    assert on_disk == sorted(["notes.json", *(f"turn-{n:02d}.json" for n in range(1, len(rows) + 1))])
    assert names == ["turns.json", "summary.json", "chart.png"] + [
        f"turn-{n:02d}.json" for n in range(1, len(rows) + 1)
    ]
    sent = json.loads((tmp_path / "out" / "requests" / "turn-03.json").read_text())
    assert sent == result.requests[2] and sent["system"][0]["cache_control"]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    for key in [
        "cache_hit_ratio",
        "mean_cost_usd",
        "max_cost_usd",
        "p95_assembly_ms",
        "evidence_verbatim_ratio",
        "max_input_tokens",
    ]:
        assert key in summary
    assert (tmp_path / "out" / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compaction_appends_to_the_ledger_and_keeps_the_prefix_before_it(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    session = Session.create(store, "s", policy=_policy(tmp_path), model="claude-sonnet-4-5", base=_base())
    snapshots: list[list[dict[str, Any]]] = []
    bodies = []
    for n in range(1, 8):
        result = ToolResult(name="search", content=f"EX-0{n % 9} notice at 1{n}:02. " * 40)
        prepared = session.prepare(f"What about notice {n}?", tool_results=[result], tags=["Notice"])
        bodies.append(prepared.assembly.request)
        assert count(prepared.assembly.request, model="claude-sonnet-4-5")["tokens"] <= 6000
        session.record(prepared, f"Therefore notice {n} is shown by EX-0{n % 9}. Status: CONFIRMED.")
        snapshots.append(session.ledger)
    for earlier, later in itertools.pairwise(snapshots):
        assert later[: len(earlier)] == earlier  # append-only
    assert snapshots[-1], "compaction happened"
    stable = [[block["text"] for block in b["system"][:3]] for b in bodies]
    assert all(s == stable[0] for s in stable)  # pinned, evidence, background: byte-identical every turn
    reopened = Session(SQLiteStore(tmp_path / "s.db"), "s")
    assert [t.index for t in reopened.turns] == list(range(1, 8)) and reopened.ledger == snapshots[-1]
    # the same bytes, key order included, in the process that added the turns and in one that reopened them
    assert json.dumps(reopened.ledger) == json.dumps(session.ledger)
    assert [json.dumps(t.report) for t in reopened.turns] == [json.dumps(t.report) for t in session.turns]


def test_cli_simulate_with_a_scenario_file(tmp_path: Path) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(_scenario(_policy(tmp_path), turns=3)))
    result = CliRunner().invoke(main, ["simulate", str(path), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert len(payload["turns"]) == 3 and {s["strategy"] for s in payload["strategies"]} >= {
        "ctxbudget policy"
    }


def test_cli_session_commands(tmp_path: Path) -> None:
    runner = CliRunner()
    base = tmp_path / "base.json"
    base.write_text(json.dumps(_base()))
    store = str(tmp_path / "cli.db")
    policy = _policy(tmp_path)
    assert (
        runner.invoke(
            main,
            [
                "session",
                "new",
                "c",
                "--base",
                str(base),
                "--model",
                "gpt-4o",
                "--policy",
                policy,
                "--store",
                store,
            ],
        ).exit_code
        == 0
    )
    added = runner.invoke(
        main,
        [
            "session",
            "add",
            "c",
            "--question",
            "Notice?",
            "--answer",
            "Status: CONFIRMED.",
            "--tool-result",
            "search=EX-04 at 12:01",
            "--store",
            store,
            "--json",
        ],
    )
    assert added.exit_code == 0, added.output
    assert json.loads(added.output)["report"]["tokens"] > 0
    listed = runner.invoke(main, ["session", "list", "--store", store]).output.strip().split("\t")
    assert listed[:2] == ["c", "1 turn"] and listed[3].startswith("$")
    exported = json.loads(runner.invoke(main, ["session", "export", "c", "--store", store]).output)
    assert exported["turns"][0]["question"] == "Notice?"
    assert "turn 1" in runner.invoke(main, ["session", "show", "c", "--store", store]).output
    missing = runner.invoke(main, ["session", "show", "nope", "--store", store])
    assert missing.exit_code == 2 and "sessions: c" in missing.output
    for spec in ("=EX-04", " =EX-04"):  # a result of no tool is refused, not recorded
        nameless = runner.invoke(
            main, ["session", "add", "c", "--question", "Q?", "--tool-result", spec, "--store", store]
        )
        assert nameless.exit_code == 2 and "names no tool" in nameless.output
    listed = runner.invoke(main, ["session", "list", "--store", store]).output
    assert listed.startswith("c\t1 turn\t")
    rows = json.loads(runner.invoke(main, ["session", "list", "--store", store, "--json"]).output)
    assert [(r["name"], r["turns"], r["unpriced_turns"]) for r in rows] == [("c", 1, 0)]
    assert rows[0]["input_tokens"] == exported["turns"][0]["figures"]["input_tokens"] > 0
    assert rows[0]["cost_usd"] == exported["turns"][0]["figures"]["cost_usd"] > 0
    shown = json.loads(runner.invoke(main, ["session", "show", "c", "--store", store, "--json"]).output)
    assert shown["name"] == "c" and shown["model"] == exported["model"]
    assert [t["question"] for t in shown["turns"]] == ["Notice?"]
    assert shown["turns"][0]["input_tokens"] == rows[0]["input_tokens"]
    assert shown["ledger"] == exported["ledger"]
    # a question's line break is shown escaped: printed, it read as another turn's line
    forged = "first line\nturn 99: 1 tokens, read 0\u202e"
    added = runner.invoke(main, ["session", "add", "c", "--question", forged, "--store", store])
    assert added.exit_code == 0, added.output
    lines = runner.invoke(main, ["session", "show", "c", "--store", store]).output.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("turn ")] == ["turn 1", "turn 2"]
    assert lines[-1].endswith("- first line\\nturn 99: 1 tokens, read 0\\u202e")


def test_a_turn_with_arguments_of_the_wrong_type_is_a_config_error(tmp_path: Path) -> None:
    import pytest

    from ctxbudget import ConfigError

    store = SQLiteStore(tmp_path / "s.db")
    session = Session.create(store, "s", policy=_policy(tmp_path), model="claude-sonnet-4-5", base=_base())
    wrong: list[dict[str, Any]] = [
        {"tool_results": [{"name": "x", "content": "y"}]},
        {"tool_calls": "search"},
        {"tags": "Notice"},
        {"allow_prefix_change": "no"},
    ]
    for arguments in wrong:
        with pytest.raises(ConfigError, match=next(iter(arguments))):
            session.prepare("Was notice given?", **arguments)
    assert store.turns("s") == []  # nothing was recorded


def test_a_session_needs_a_name_and_a_turn_a_question(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    for blank in ("", "   "):
        with pytest.raises(ConfigError, match="empty or blank"):
            Session.create(store, blank, policy=_policy(tmp_path), model="claude-sonnet-4-5", base=_base())
    assert store.names() == []
    Session.create(store, "s", policy=_policy(tmp_path), model="claude-sonnet-4-5", base=_base())
    added = CliRunner().invoke(
        main, ["session", "add", "s", "--question", " ", "--store", str(tmp_path / "s.db")]
    )
    assert added.exit_code == 2 and "--question" in added.output and "$.items" not in added.output


def test_session_names_the_gateway_refuses_are_refused_here_too(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    for bad in ("tab\there", "two\nlines", "x" * 201, "a\u2028b"):
        with pytest.raises(ConfigError, match="session name"):
            Session.create(store, bad, policy=_policy(tmp_path), model="claude-sonnet-4-5", base=_base())
    assert store.names() == []


HOUSE_CATALOG = """schema_version = 1
[[models]]
id = "house-llm"
provider = "self-hosted"
context_window = 32768
max_output_tokens = 4096
tokenizer = { encoding = "o200k_base", exact = false, safety_factor = 1.2 }
prices = { input = 0.5, output = 1.5 }
cache = { mode = "none", min_cacheable_tokens = 0, max_breakpoints = 0 }
"""


def test_session_commands_take_a_user_catalog(tmp_path: Path) -> None:
    # Their error said to add the model in a user catalog, and none of them took one.
    mine = tmp_path / "mine.toml"
    mine.write_text(HOUSE_CATALOG)
    base = tmp_path / "base.json"
    base.write_text('{"items": []}')
    store = str(tmp_path / "s.db")
    runner = CliRunner()
    common = ["--store", store]
    created = runner.invoke(
        main,
        ["session", "new", "h", "--base", str(base), "--model", "house-llm", *common],
        env={"CTXBUDGET_CATALOG": str(mine)},
    )
    assert created.exit_code == 0, created.output
    added = runner.invoke(
        main, ["session", "add", "h", "--question", "When?", "--catalog", str(mine), *common]
    )
    assert added.exit_code == 0, added.output
    refused = runner.invoke(
        main, ["session", "add", "h", "--question", "And?", *common], env={"CTXBUDGET_CATALOG": ""}
    )
    assert refused.exit_code == 2 and "unknown model 'house-llm'" in refused.stderr


@pytest.mark.parametrize(
    ("missing", "args", "extra"),
    [("httpx", [], "ctxbudget[gateway]"), ("matplotlib", ["--out", "{out}"], "ctxbudget[chart]")],
)
def test_cli_simulate_without_its_extra_says_which_before_running(
    tmp_path: Path, missing: str, args: list[str], extra: str
) -> None:
    out = tmp_path / "sim"
    program = (
        f"import sys; sys.modules[{missing!r}] = None\n"  # as if not installed: its import fails
        "from ctxbudget.cli import main\n"
        f"main({[a.format(out=out) for a in ['simulate', *args]]!r}, prog_name='ctxbudget')\n"
    )
    ran = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert ran.returncode == 2, ran.stderr
    assert extra in ran.stderr and "Traceback" not in ran.stderr
    assert not out.exists()  # nothing half-written


def test_a_session_whose_model_cannot_hold_the_policy_is_refused_when_created(tmp_path: Path) -> None:
    """gpt-4's 8,192-token window cannot hold legal-review's envelope: said at creation (exit 3),
    not at every turn after it."""
    store = SQLiteStore(tmp_path / "s.db")
    with pytest.raises(BudgetExceeded, match="gpt-4"):
        Session.create(store, "small", policy="legal-review", model="gpt-4", base=_base())
    assert store.names() == []


def test_a_session_under_a_policy_without_a_rolling_tier_is_refused_when_created(tmp_path: Path) -> None:
    policy = tmp_path / "norolling.toml"
    policy.write_text(
        'name = "norolling"\nenvelope_tokens = 32000\nreserve_output_tokens = 0\nexpected_output_tokens = 100\n'
        '[[tiers]]\nname = "pinned"\nceiling_tokens = 15000\neviction = "never"\ncached = true\n'
    )
    store = SQLiteStore(tmp_path / "s.db")
    base = {"items": [{"id": "p", "tier": "pinned", "kind": "playbook", "text": "Rules of review."}]}
    with pytest.raises(ConfigError, match="has no rolling tier"):
        Session.create(store, "nr", policy=str(policy), model="claude-sonnet-4-5", base=base)
    assert store.names() == []


TIGHT_POLICY = """name = "tight"
envelope_tokens = 5200
reserve_output_tokens = 0
expected_output_tokens = 300
cost_ceiling_usd = 0.45
degrade = ["compact"]
ledger_ceiling_tokens = 1500
current_turn_ceiling_tokens = 800
[compaction]
history_trigger_tokens = 3000
low_water_ratio = 0.5
keep_recent_turns = 1
[[tiers]]
name = "pinned"
ceiling_tokens = 3000
eviction = "never"
cached = true
cache_ttl = "1h"
[[tiers]]
name = "critical"
ceiling_tokens = 1500
eviction = "protected"
cached = true
cache_ttl = "5m"
[[tiers]]
name = "contextual"
ceiling_tokens = 800
eviction = "compact"
cached = true
cache_ttl = "5m"
compact_query = "tags"
[[tiers]]
name = "volatile"
ceiling_tokens = 1500
eviction = "rolling"
cached = true
cache_ttl = "5m"
"""
ISSUES = ["Notice", "LateDelivery", "Inspection", "ChangeOrder", "BreachOfWarranty", "Maintenance"]


def _tight_base(rng: random.Random) -> dict[str, Any]:
    play = " ".join(
        f"Rule {i}: a party must give written notice of any defect within the period set by clause {i}."
        for i in range(90)
    )
    items: list[dict[str, Any]] = [{"id": "playbook", "tier": "pinned", "kind": "playbook", "text": play}]
    for k in range(4):
        text = f"Q. Did you receive exhibit EX-{k}?\nA. Yes, I received it in person on the loading dock {k}."
        items.append(
            {
                "id": f"EV-{k}",
                "tier": "critical",
                "kind": "evidence",
                "citation": f"{10 + k}:1-{10 + k}:5",
                "text": text,
                "tags": [rng.choice(ISSUES)],
            }
        )
    for k in range(6):
        text = " ".join(
            f"Background sentence {j} about {rng.choice(ISSUES)} and shipment {k}." for j in range(40)
        )
        items.append({"id": f"page-{k}", "tier": "contextual", "kind": "document", "text": text})
    return {"items": items}


def test_every_past_turn_stays_raw_or_in_the_ledger_when_the_new_ledger_takes_room(tmp_path: Path) -> None:
    """Compacting the turns the rolling window let go adds ledger entries, which take room: the
    window may then let a newer turn go, which is compacted in its turn (turn 5 was lost)."""
    words = "notice warranty defect witness delivery é 日本 🙂 Therefore shows confirms Status: CONFIRMED DENIED EX-7 12:3-14:2"
    words_list = words.split()
    rng = random.Random(14)

    def said(n: int) -> str:
        return " ".join(rng.choice(words_list) for _ in range(n))

    (tmp_path / "tight.toml").write_text(TIGHT_POLICY)
    store = SQLiteStore(tmp_path / "s.db")
    session = Session.create(
        store, "s", policy=str(tmp_path / "tight.toml"), model="claude-sonnet-4-5", base=_tight_base(rng)
    )
    for n in range(1, 7):
        tags = rng.sample([*ISSUES, f"X{rng.randint(0, 3)}"], rng.choice([0, 1, 1, 2]))
        question = f"Turn {n}: " + said(rng.choice([3, 30, 200]))
        k = rng.choice([0, 0, 1, 3])
        calls = [ToolCall(name=f"tool{j}", arguments=said(3)) for j in range(k)]
        results = [
            ToolResult(
                name=f"tool{j}", content=said(rng.choice([5, 100, 900])), status=rng.choice([None, "FOUND"])
            )
            for j in range(k)
        ]
        answer = rng.choice(["", said(rng.choice([5, 60, 600])) + ". Therefore " + said(20) + "."])
        prepared = session.prepare(question, tool_calls=calls, tool_results=results, tags=tags)
        in_ledger = {e["turn"] for e in session.ledger} | {e["turn"] for e in prepared.new_entries}
        kept = {i.id for tier in prepared.assembly.report.tiers for i in tier.items if i.action == "kept"}
        for past in range(1, n):
            assert past in in_ledger or any(x.startswith(f"turn-{past}-") for x in kept), (n, past)
        session.record(prepared, answer)


def test_a_base_that_would_fail_every_turn_is_refused_when_created(tmp_path: Path) -> None:
    """Found at creation, not turn after turn: an id the session gives its turns' items, a
    question of the base's own, or a model with no price under the policy's cost ceiling."""
    from ctxbudget import InvalidRequestError, PriceUnknown

    store = SQLiteStore(tmp_path / "s.db")
    playbook = {"id": "p", "tier": "pinned", "kind": "playbook", "text": "Rules of review."}
    for extra, match in (
        ({"id": "turn-1-0", "tier": "pinned", "kind": "playbook", "text": "x"}, "one the session gives"),
        # the ledger's header: turns ran until the first compaction, then failed ("ids must be unique")
        (
            {"id": "ledger", "tier": "contextual", "kind": "document", "text": "The general ledger."},
            "one the session gives",
        ),
        ({"id": "q", "kind": "question", "text": "Why?"}, "not a question"),
    ):
        with pytest.raises(InvalidRequestError, match=match):
            Session.create(
                store,
                "s",
                policy="legal-review",
                model="claude-sonnet-4-5",
                base={"items": [playbook, extra]},
            )
    with pytest.raises(PriceUnknown):
        Session.create(store, "s", policy="legal-review", model="gemma-4-31b-it", base={"items": [playbook]})
    # a playbook over the pinned tier's ceiling: every turn failed with exit 3, the session created
    huge = {**playbook, "text": "Rule of review number one applies. " * 5_000}
    with pytest.raises(BudgetExceeded, match="pinned"):
        Session.create(store, "s", policy="legal-review", model="claude-sonnet-4-5", base={"items": [huge]})
    assert store.names() == []
    session = Session.create(
        store,
        "s",
        policy="legal-review",
        model="claude-sonnet-4-5",
        base={"items": [playbook], "confirm_evict": ["p"]},
    )
    assert session.prepare("Was notice given?").request["confirm_evict"] == ["p"]  # the base's, every turn


def test_a_base_with_a_ledger_item_is_refused_when_created(tmp_path: Path) -> None:
    """A ledger item of the base shares Block 3 with the session's own ledger, which folds under
    the policy's ceiling without it: created (it was under the ceiling alone), the session then
    failed every turn from the one its entries took Block 3 over (exit 3, at turn 18 of questions on
    nine issues under this policy)."""
    from ctxbudget import InvalidRequestError

    policy = tmp_path / "ledger.toml"
    policy.write_text(POLICY.replace("[compaction]", "ledger_ceiling_tokens = 1500\n[compaction]"))

    notes = {
        "id": "prior-notes",
        "tier": "volatile",
        "kind": "ledger",
        "text": "Prior matter notes: " + " ".join(f"EX-{i} was reviewed." for i in range(150)),
    }
    store = SQLiteStore(tmp_path / "s.db")
    with pytest.raises(
        InvalidRequestError, match=r"\$\.items\[1\]\.kind: a base holds standing items, not a ledger"
    ):
        Session.create(
            store,
            "s",
            policy=str(policy),
            model="claude-sonnet-4-5",
            base={"items": [_base()["items"][0], notes]},
        )
    assert store.names() == []


def test_session_add_whose_output_cannot_be_written_says_the_turn_was_stored(tmp_path: Path) -> None:
    """The turn is stored before its body is printed: a full disk under stdout said only "cannot
    write the output to stdout" (exit 2), and the command run again stored the turn twice."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    store_path = tmp_path / "s.db"
    store = SQLiteStore(store_path)
    Session.create(store, "s", policy=_policy(tmp_path), model="claude-sonnet-4-5", base=_base())
    store.close()
    src = str(Path(__file__).resolve().parents[1] / "src")
    for n, mode in enumerate(([], ["--json"]), 1):
        with open("/dev/full", "wb") as full:
            args = ["session", "add", "s", "--question", "Why?", "--store", str(store_path), *mode]
            done = subprocess.run(
                [sys.executable, "-m", "ctxbudget", *args],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": src},
            )
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(
            "ctxbudget: cannot write the output to stdout: No space left on device;"
        )
        assert f"turn {n} of session 's' was stored all the same: do not add it again" in done.stderr
        assert done.stderr.count("\n") == 1
    assert [t.index for t in SQLiteStore(store_path, mode="read").turns("s")] == [1, 2]


def test_a_session_the_gateway_recorded_is_read_not_continued(tmp_path: Path) -> None:
    from ctxbudget.session import SessionMeta, Turn
    from ctxbudget.session.store import GATEWAY_RECORDED

    path = tmp_path / "gw.db"
    store = SQLiteStore(path)
    store.create(SessionMeta(name="chat-1", policy=GATEWAY_RECORDED, model="claude-sonnet-4-5", base={}))
    store.append_turn("chat-1", Turn(index=1, question="When?", answer="March."), [])
    store.close()
    shown = CliRunner().invoke(main, ["session", "show", "chat-1", "--store", str(path)])
    assert shown.exit_code == 0 and "session chat-1: recorded by the gateway" in shown.output
    added = CliRunner().invoke(main, ["session", "add", "chat-1", "--store", str(path), "--question", "x"])
    assert (
        added.exit_code == 2 and "recorded by the gateway" in added.output
    )  # not "unknown policy 'gateway'"
    with pytest.raises(ConfigError, match="recorded by the gateway"):
        Session(SQLiteStore(path), "chat-1")


def test_session_add_takes_the_time_since_the_previous_turn(tmp_path: Path) -> None:
    """Without it a turn after six idle minutes was priced as reading both 5-minute tiers."""
    base = tmp_path / "base.json"
    items = [
        {"id": "p", "tier": "pinned", "kind": "playbook", "text": "Clause 1. Cite page:line. " * 800},
        {
            "id": "EV-1",
            "tier": "critical",
            "kind": "evidence",
            "text": "Q. Notice?\nA. Yes. " * 300,
            "citation": "1:1",
        },
    ]
    base.write_text(json.dumps({"items": items}))
    runner = CliRunner()

    def second_turn(*idle: str) -> dict[str, Any]:
        store = str(tmp_path / f"idle{len(idle)}.db")
        new = ["session", "new", "s", "--base", str(base), "--model", "claude-sonnet-4-5", "--store", store]
        assert runner.invoke(main, new).exit_code == 0
        add = ["session", "add", "s", "--store", store, "--json", "--question"]
        assert runner.invoke(main, [*add, "Was notice given?"]).exit_code == 0
        added = runner.invoke(main, [*add, "When?", *idle])
        assert added.exit_code == 0, added.output
        report: dict[str, Any] = json.loads(added.output)["report"]
        return report

    warm, idle = second_turn(), second_turn("--idle-seconds", "370")
    pinned = next(b for b in warm["breakpoints"] if b["tier"] == "pinned")
    assert warm["cache"]["read_tokens"] > pinned["prefix_tokens"]  # both tiers read
    assert idle["cache"]["read_tokens"] == pinned["prefix_tokens"]  # the playbook's hour alone
    assert idle["cost_usd"] > warm["cost_usd"]
    bad = runner.invoke(
        main,
        [
            "session",
            "add",
            "s",
            "--store",
            str(tmp_path / "idle0.db"),
            "--question",
            "q",
            "--idle-seconds",
            "-1",
        ],
    )
    assert bad.exit_code == 2 and "--idle-seconds" in bad.output


@pytest.mark.parametrize(
    ("answer", "usage", "said"),
    [
        ("ok", {"input_tokens": math.nan}, r"usage\.input_tokens"),
        ("ok", {"input_tokens": -5}, r"usage\.input_tokens.*whole number >= 0"),
        ("ok", {"input_tokens": 1.5}, r"usage\.input_tokens.*whole number >= 0"),
        ("ok", "x", "usage must be a JSON object of token counts, got a string"),
        ("ok", {"x": object()}, r"object is not a JSON value"),
        (["not", "text"], None, "answer must be the reply's text"),
        (5, None, "answer must be the reply's text"),
        # half an emoji (a reply cut mid-pair): a UnicodeEncodeError from the store's write
        ("cut \ud83d", None, r"^answer: a string with a lone surrogate"),
    ],
)
def test_a_turns_answer_and_usage_are_checked_before_anything_is_stored(
    tmp_path: Path, answer: Any, usage: Any, said: str
) -> None:
    """A NaN usage was stored and exported as NaN (not JSON); a list's repr was stored as the answer."""
    store = SQLiteStore(tmp_path / "s.db")
    session = Session.create(store, "s", policy=_policy(tmp_path), model="claude-sonnet-4-5", base=_base())
    with pytest.raises(CtxBudgetError, match=said):
        session.add("When was notice given?", answer=answer, usage=usage)
    assert store.count_turns("s") == 0
    session.add("When was notice given?", answer="On March 3.", usage={"input_tokens": 10, "cost_usd": 0.5})
    # an SDK's usage as it dumps it: what was not billed is null
    billed = {"input_tokens": 10, "output_tokens": 3, "cache_creation_input_tokens": None}
    session.add("And the second notice?", answer="On April 2.", usage=billed)
    assert store.count_turns("s") == 2
    with pytest.raises(CtxBudgetError, match=r"usage\.actual\.input_tokens"):
        session.add("And a third?", answer="No.", usage={"actual": {"input_tokens": -5}})
    with pytest.raises(CtxBudgetError, match=r"^tags\[1\]: a string with a lone surrogate"):
        session.add("And a fourth?", answer="No.", tags=["Notice", "Not\udce9ce"])
    assert store.count_turns("s") == 2


def test_a_long_sessions_turns_keep_every_prefix_they_mark_cached(tmp_path: Path) -> None:
    """Of the cached prefixes carried from turn to turn (at most 32) the kept ones were those whose
    hashes sorted first when no idle time was given: from turn 30 a turn's own prefixes were
    dropped, and later turns predicted the unchanged pinned playbook a miss (a 1-hour write of it,
    five times the turn's cost, refused over a ceiling it never neared)."""
    from ctxbudget.simulation.scenario import bundled_scenario

    store = SQLiteStore(tmp_path / "s.db")
    base = dict(bundled_scenario().base)
    session = Session.create(store, "long", policy="legal-review", model="claude-sonnet-4-5", base=base)
    pinned_reads = []
    for n in range(1, 41):
        _, turn = session.add(
            f"Turn {n}: what does the record show on issue {n % 6}?",
            answer=f"Therefore the record shows EX-{n:02d}. Status: CONFIRMED.",
            tags=[f"Issue{n % 6}"],
        )
        report = turn.report
        kept = {entry["prefix_sha256"] for entry in report["cache_entries"]}
        assert {b["prefix_sha256"] for b in report["breakpoints"]} <= kept, n
        pinned_reads.append(report["cache"]["read_tokens"] >= report["breakpoints"][0]["prefix_tokens"])
    assert all(pinned_reads[1:])  # after the first turn, the pinned playbook is read every turn


def test_a_session_new_refused_leaves_no_store_behind(tmp_path: Path) -> None:
    """A base of the wrong shape or an unknown model was refused after the store was opened: an
    empty store file stayed, and `session list` on it printed nothing, exit 0."""
    (tmp_path / "chat.json").write_text('{"questions": [{"text": "When?"}]}', "utf-8")
    (tmp_path / "base.json").write_text('{"items": []}', "utf-8")
    runner = CliRunner()
    for base, model in (("chat.json", "claude-sonnet-4-5"), ("base.json", "nope-9")):
        store = tmp_path / f"{model}.db"
        args = [
            "session",
            "new",
            "m",
            "--base",
            str(tmp_path / base),
            "--model",
            model,
            "--store",
            str(store),
        ]
        refused = runner.invoke(main, args)
        assert refused.exit_code == 2, refused.output
        assert not store.exists()
    made = runner.invoke(
        main,
        [
            "session",
            "new",
            "m",
            "--base",
            str(tmp_path / "base.json"),
            "--model",
            "claude-sonnet-4-5",
            "--store",
            str(tmp_path / "ok.db"),
        ],
    )
    assert made.exit_code == 0 and (tmp_path / "ok.db").exists(), made.output


def test_creation_prices_no_reply_a_turn_may_expect_a_shorter_one(tmp_path: Path) -> None:
    """The trial assembly at creation priced the policy's default reply (1,500 tokens): a session
    whose turns expect 100 and cost $0.080 was refused as over a $0.085 ceiling."""
    policy = tmp_path / "tight.toml"
    policy.write_text(
        'name = "tight"\nenvelope_tokens = 32000\nexpected_output_tokens = 1500\ncost_ceiling_usd = 0.085\n'
        '[[tiers]]\nname = "pinned"\nceiling_tokens = 15000\neviction = "never"\ncached = true\ncache_ttl = "1h"\n'
        '[[tiers]]\nname = "volatile"\nceiling_tokens = 8000\neviction = "rolling"\ncached = true\n'
    )
    text = "Rule of review number one applies to every exhibit. " * 1000
    base = {"items": [{"id": "p", "tier": "pinned", "kind": "playbook", "text": text}]}
    session = Session.create(
        SQLiteStore(tmp_path / "s.db"), "s", policy=str(policy), model="claude-sonnet-4-5", base=base
    )
    prepared, _ = session.add("Was notice given?", answer="Yes.", expected_output_tokens=100)
    cost = prepared.assembly.report.cost_usd
    assert cost is not None and cost <= 0.085
