"""Edges found by fuzzing the assembly, sessions and the simulation: each fails closed with a
clear error, or gives a body the provider accepts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxbudget import BudgetExceeded, CtxBudgetError, InvalidRequestError
from ctxbudget.assembly._assemble import assemble
from ctxbudget.assembly._policy import get_policy
from ctxbudget.cli import main
from ctxbudget.session import Session, SQLiteStore, ToolResult

from .test_agent_properties import check_anthropic_rules

POLICY = get_policy("legal-review")
WORD = "lorem ipsum dolor sit amet "


def _chat(last_user: list[dict[str, Any]], call_text: str) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": "Review the record.",
        "messages": [
            {"role": "user", "content": "Look it up."},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": call_text},
                    {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "notice"}},
                ],
            },
            {"role": "user", "content": last_user},
        ],
    }


def test_a_call_answered_in_the_question_message_is_never_separated_from_its_result() -> None:
    last = [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Notice went out on March 3."},
        {"type": "text", "text": "And what does that mean?"},
    ]
    body = assemble(
        _chat(last, "Searching."), policy=POLICY, model="claude-sonnet-4-5", input_format="anthropic"
    )
    check_anthropic_rules(body.request)
    with pytest.raises(BudgetExceeded, match="tool calls"):  # a huge call cannot be cut: fail closed
        assemble(_chat(last, WORD * 800), policy=POLICY, model="claude-sonnet-4-5", input_format="anthropic")


def test_block_4_counts_what_is_sent_between_pieces() -> None:
    parts = [{"type": "text", "text": "a"} for _ in range(2000)]
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": parts}]}
    with pytest.raises(BudgetExceeded, match=r"current turn \(Block 4\)"):
        assemble(body, policy=POLICY, model="gpt-4o", format="openai", input_format="openai")


def test_no_blank_text_block_is_sent_and_an_empty_question_is_refused() -> None:
    items: list[dict[str, Any]] = [
        {"id": "h1", "tier": "volatile", "kind": "history", "role": "user", "text": " \n "},
        {"id": "h2", "tier": "volatile", "kind": "history", "role": "assistant", "text": ""},
        {"id": "q", "kind": "question", "text": "When?"},
    ]
    sent = assemble({"items": items}, policy=POLICY, model="claude-sonnet-4-5").request
    assert all(b["text"].strip() for m in sent["messages"] for b in m["content"])
    items[-1]["text"] = "  "
    with pytest.raises(InvalidRequestError, match="the question is empty"):
        assemble({"items": items}, policy=POLICY, model="claude-sonnet-4-5")


def test_the_envelope_gives_way_from_what_a_tier_uses_not_its_target() -> None:
    pinned = "Rule: cite page:line. " * 2500
    items: list[dict[str, Any]] = [{"id": "p", "tier": "pinned", "kind": "playbook", "text": pinned}]
    items += [
        {"id": f"e{n}", "tier": "critical", "kind": "evidence", "text": f"{n}:01 A. Yes. " * 190}
        for n in range(5)
    ]
    items += [{"id": f"d{n}", "tier": "contextual", "kind": "document", "text": WORD * 300} for n in range(8)]
    items += [
        {"id": f"h{n}", "tier": "volatile", "kind": "history", "role": "user", "text": WORD * 30}
        for n in range(6)
    ]
    items.append({"id": "q", "kind": "question", "text": "When was notice given?"})
    try:
        report = assemble({"items": items}, policy=POLICY, model="gpt-4o").report
    except BudgetExceeded as exc:
        assert "did not converge" not in str(exc)
        return
    assert report.tokens <= 32000


@pytest.mark.parametrize(
    "previous",
    [{"breakpoints": None}, {"breakpoints": "abc"}, {"breakpoints": [{"x": 1}]}, {"breakpoints": ["a"]}],
)
def test_a_malformed_previous_report_is_bad_input(previous: dict[str, Any]) -> None:
    body = {"items": [{"id": "q", "kind": "question", "text": "When?"}]}
    report = assemble(body, policy=POLICY, model="gpt-4o").report.to_dict()
    older = {k: v for k, v in report.items() if k != "cache_entries"}  # its breakpoints are read
    with pytest.raises(InvalidRequestError, match="breakpoints"):  # the previous turn's, but these
        assemble(body, policy=POLICY, model="gpt-4o", previous={**older, **previous})
    with pytest.raises(InvalidRequestError, match="pinned_prefix_sha256"):  # no hash: not a report's
        assemble(body, policy=POLICY, model="gpt-4o", previous=previous)


@pytest.mark.parametrize(("key", "value"), [("tools_sha256", 123), ("pinned_prefix_text", ["a"])])
def test_a_previous_report_field_of_the_wrong_kind_is_bad_input(key: str, value: object) -> None:
    """A ``tools_sha256`` of 123 was read as tool definitions that changed (exit 5, a playbook
    change), not as the damaged report it is (exit 2)."""
    body = {"items": [{"id": "q", "kind": "question", "text": "When?"}]}
    report = assemble(body, policy=POLICY, model="gpt-4o").report.to_dict()
    with pytest.raises(InvalidRequestError, match=rf"{key} is not a string") as caught:
        assemble(body, policy=POLICY, model="gpt-4o", previous={**report, key: value})
    assert caught.value.path == f"$.{key}"


@pytest.mark.parametrize("previous", [{}, {"report": {}}, {"report": None}])
def test_an_empty_previous_report_is_bad_input_not_a_first_turn(previous: dict[str, Any]) -> None:
    # A file holding {} (a truncated write, the wrong file) would otherwise predict a first turn
    # and skip INV-CTX-01's comparison without a word.
    body = {"items": [{"id": "q", "kind": "question", "text": "When?"}]}
    with pytest.raises(InvalidRequestError, match="previous"):
        assemble(body, policy=POLICY, model="gpt-4o", previous=previous)


def test_a_deeply_nested_tool_result_does_not_break_a_session(tmp_path: Path) -> None:
    session = Session.create(
        SQLiteStore(str(tmp_path / "s.db")), "n", policy="legal-review", model="gpt-4o", base={}
    )
    nested = "[" * 5000 + "]" * 5000
    for n in range(8):
        prepared = session.prepare(f"Question {n}?", tool_results=[ToolResult(name="t", content=nested)])
        session.record(prepared, "Therefore it holds. Status: CONFIRMED.")
    assert session.ledger  # compacted, and still taking turns


def test_a_session_base_is_checked_when_the_session_is_created(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "b.db"))
    with pytest.raises(CtxBudgetError, match=r"items\[0\]"):
        Session.create(store, "b", policy="legal-review", model="gpt-4o", base={"items": [5]})
    chat = {"system": "Cite page:line.", "messages": [{"role": "user", "content": "Earlier question"}]}
    # named by its content, not by the first field in order (an agent body read "$.max_tokens")
    agent = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]}
    cases = (
        (chat, r"\$\.messages"),
        ({"items": [], "documents": []}, r"\$\.documents"),
        (agent, r"\$\.messages"),
    )
    for base, field in cases:
        with pytest.raises(InvalidRequestError, match=field + ".* would not be read"):
            Session.create(store, "c", policy="legal-review", model="gpt-4o", base=base)
    assert store.names() == []  # nothing was created
    Session.create(store, "d", policy="legal-review", model="gpt-4o", base={})  # no standing items


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("café review", '{"status": "FOUND"}'),
        ("r", "[]"),
        ("r", '{"matches": 7}'),
        ("r", "[" * 3000 + "]" * 3000),
    ],
)
def test_odd_scenarios_simulate_or_fail_clearly(tmp_path: Path, name: str, content: str) -> None:
    scenario = {
        "name": name,
        "base": {
            "items": [
                {
                    "id": "e",
                    "tier": "critical",
                    "kind": "evidence",
                    "content": [{"type": "text", "text": "1:01 A. Yes."}],
                }
            ]
        },
        "turns": [{"question": "Notice?", "tool_results": [{"name": "search", "content": content}]}],
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps(scenario))
    run = CliRunner().invoke(main, ["simulate", str(path), "--json"])
    assert run.exit_code == 0, run.output
    assert json.loads(run.output)["summary"]["evidence_verbatim_ratio"] == 1.0


def test_items_with_no_current_turn_are_refused_for_a_chat_body_and_rendered_as_text() -> None:
    policy = get_policy("legal-review")
    items = {"items": [{"id": "a", "kind": "playbook", "tier": "pinned", "text": "Rule one."}]}
    for body in ({"items": []}, items):
        with pytest.raises(InvalidRequestError, match=r"\$\.items: there is no current turn"):
            assemble(body, policy=policy, model="claude-sonnet-4-5")
    assert "Rule one." in str(
        assemble(items, policy=policy, model="claude-sonnet-4-5", output_format="text").request
    )


def test_an_envelope_above_the_models_window_is_told_as_the_policys_not_as_what_was_assembled() -> None:
    # The parts assembled were a few tokens: "the parts that cannot be trimmed need 32,000 tokens"
    # named the policy's envelope as if the request needed it.
    body = {"items": [{"id": "q", "kind": "question", "text": "When?"}]}
    with pytest.raises(BudgetExceeded) as told:
        assemble(body, policy="legal-review", model="gpt-4")
    message = str(told.value)
    assert message.startswith(
        "cannot fit: the policy's envelope is 32,000 tokens but only 8,192 are available"
    )
    assert "'gpt-4' (gpt-4) has a window of 8,192 tokens" in message and "need" not in message


def test_confirm_evict_of_an_id_no_item_has_is_refused() -> None:
    body = {
        "items": [{"id": "q", "kind": "question", "text": "When?"}],
        "confirm_evict": ["EV-99"],
    }
    with pytest.raises(InvalidRequestError, match=r"\$\.confirm_evict: names no item of the request: EV-99"):
        assemble(body, policy="legal-review", model="claude-sonnet-4-5")


def test_an_out_folder_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    scenario = {"name": "r", "base": {"items": []}, "turns": [{"question": "Notice?"}]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(scenario))
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    run = CliRunner().invoke(main, ["simulate", str(path), "--out", str(blocked / "sub")])
    assert (
        run.exit_code == 2
        and run.stderr.startswith("ctxbudget: cannot use ")
        and "Traceback" not in run.output
    )
    assert run.stderr.count("\n") == 1


def test_a_policy_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    policy = tmp_path / "latin.toml"
    policy.write_bytes("name = 'caf\u00e9'\n".encode("latin-1"))
    body = tmp_path / "b.json"
    body.write_text(json.dumps({"items": [{"id": "q", "kind": "question", "text": "When?"}]}))
    run = CliRunner().invoke(
        main, ["assemble", str(body), "--policy", str(policy), "--model", "claude-sonnet-4-5"]
    )
    assert run.exit_code == 2 and "is not UTF-8 text" in run.stderr


@pytest.mark.parametrize(
    "body",
    [
        {"model": "gpt-4o", "input": "When was notice given?"},
        {"model": "gpt-4o", "input": [{"role": "user", "content": "When?"}]},
    ],
)
def test_a_responses_body_is_refused_by_assemble_naming_what_it_takes(
    tmp_path: Path, body: dict[str, Any]
) -> None:
    with pytest.raises(
        InvalidRequestError, match="Chat Completions or Messages body; this is a responses body"
    ):
        assemble(body, policy=POLICY, model="gpt-4o")
    path = tmp_path / "r.json"
    path.write_text(json.dumps(body))
    result = CliRunner().invoke(
        main, ["assemble", str(path), "--policy", "legal-review", "--model", "gpt-4o"]
    )
    assert result.exit_code == 2 and "responses body" in result.output and "Traceback" not in result.output
    with pytest.raises(InvalidRequestError, match=r"\$\.items"):
        assemble({"x": 1}, policy=POLICY, model="gpt-4o", input_format="context")


def test_a_chat_body_of_a_prefill_alone_names_its_messages() -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [{"role": "assistant", "content": "Sure,"}],
    }
    with pytest.raises(InvalidRequestError, match=r"^\$\.messages: no user message"):
        assemble(body, policy=POLICY, model="claude-sonnet-4-5")


def test_a_tool_result_of_search_results_counts_against_its_tier() -> None:
    found = {
        "type": "search_result",
        "source": "https://kb/1",
        "title": "Notice",
        "content": [{"type": "text", "text": "The notice was mailed on March 3 by certified letter. " * 150}],
    }
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Search the knowledge base."}]
    for n in range(5):
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "search", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": [found]}],
            },
        ]
    messages += [
        {"role": "assistant", "content": "Found them."},
        {"role": "user", "content": "Was notice given?"},
    ]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "system": "Review.", "messages": messages}
    before = json.dumps(body)
    report = assemble(body, policy=POLICY, model="claude-sonnet-4-5").report.to_dict()
    assert json.dumps(body) == before  # the caller's body is left as it was
    rolling = next(t for t in report["tiers"] if t["name"] == "volatile")
    assert rolling["tokens"] <= rolling["ceiling_tokens"]
    results = [i for i in rolling["items"] if i["action"] == "kept" and i["tokens_before"] > 0]
    assert max(i["tokens_before"] for i in results) > 1000  # a result's search results are its tokens, not 0


def test_a_compaction_that_always_takes_a_little_over_its_target_still_converges() -> None:
    """A contextual document of short fragments compacted to ~46 tokens over whatever target it
    was given; each round lowered the target by that much and compared the block with it again,
    and after 12 rounds the assembly refused a 3,600-token request in a 32,000-token envelope
    ("assembly did not converge")."""
    import random

    rng = random.Random(0)
    pool = ["the", "witness", "said", "notice", "was", "given", "café", "日本語", "😀", "?", ".", "\n"]
    text = " ".join(rng.choice(pool) for _ in range(4000))
    request = {
        "items": [
            {"id": "page-1", "tier": "contextual", "kind": "document", "text": text},
            {"id": "q", "kind": "question", "text": "Was notice given (EX-04)?"},
        ]
    }
    policy = get_policy("legal-review")
    report = assemble(request, policy=policy, model="gpt-4o").report
    contextual = next(t for t in policy.tiers if t.name == "contextual")
    assert report.tokens <= policy.prompt_tokens
    assert report.to_dict()["tiers"][contextual.index]["tokens"] <= contextual.ceiling_tokens


def test_a_blank_item_of_a_tier_kept_verbatim_is_reported_as_not_sent() -> None:
    """A pinned or critical item of blanks alone was reported "kept ... protected, verbatim" and
    INV-CTX-03 passed, but no body carried it (the renderers make no block of blanks)."""
    items = [
        {"id": "rules", "tier": "pinned", "kind": "playbook", "text": "\t\n\n"},
        {"id": "EV-0", "tier": "critical", "kind": "evidence", "text": "\t\n\n", "citation": "10:4-10:5"},
        {
            "id": "EV-1",
            "tier": "critical",
            "kind": "evidence",
            "text": "Q. Did you?\nA. Yes.",
            "citation": "11:4",
        },
        {"id": "q", "kind": "question", "text": "When?"},
    ]
    report = assemble({"items": items}, policy=get_policy("legal-review"), model="gpt-4o").report.to_dict()
    decisions = {i["id"]: i for t in report["tiers"] for i in t["items"]}
    for blank in ("rules", "EV-0"):
        assert decisions[blank]["action"] == "dropped" and decisions[blank]["tokens_after"] == 0
        assert decisions[blank]["reason"].startswith("blank")
    assert decisions["EV-1"]["action"] == "kept"


def test_a_session_base_with_a_volatile_value_in_a_pinned_item_is_refused_at_creation(tmp_path: Path) -> None:
    """`session new` took a playbook holding a date, and every turn after it was refused."""
    from ctxbudget import VolatileValueError

    store = SQLiteStore(str(tmp_path / "v.db"))
    base = {
        "items": [
            {"id": "pb", "tier": "pinned", "kind": "playbook", "text": "Effective 2026-03-04 at 10:45 am."}
        ]
    }
    with pytest.raises(VolatileValueError):
        Session.create(store, "v", policy="legal-review", model="gpt-4o", base=base)
    assert store.names() == []


def test_a_policys_reply_above_the_models_output_cap_is_held_to_the_cap(tmp_path: Path) -> None:
    """A policy's max_output_tokens of 100,000 went out as max_completion_tokens to gpt-4o, whose
    output cap is 16,384: the provider refuses such a body."""
    from ctxbudget.assembly._policy import parse_policy

    policy = parse_policy(
        'name = "big"\nenvelope_tokens = 120000\nmax_output_tokens = 100000\n'
        '[[tiers]]\nname = "chat"\nceiling_tokens = 500\neviction = "rolling"\n',
        "big.toml",
    )
    request = {"items": [{"id": "q", "kind": "question", "text": "When?"}]}
    result = assemble(request, policy=policy, model="gpt-4o", output_format="openai")
    assert result.request["max_completion_tokens"] == 16_384
    assert any("output cap (16,384)" in w for w in result.report.to_dict()["warnings"])
    # and the reply is priced as it can be: 50,000 expected tokens made a turn of $0.50 refused
    # against a ceiling of $0.30 that its at most 16,384 tokens cannot pass
    priced = assemble(
        request, policy=policy, model="gpt-4o", output_format="openai", expected_output_tokens=50_000
    )
    assert priced.report.expected_output_tokens == 16_384


@pytest.mark.parametrize("eviction", ["protected", "never"])
def test_a_tier_over_its_ceiling_says_the_ceiling_the_policy_wrote(eviction: str) -> None:
    """Under Claude's x1.3 estimate a 4,000-token ceiling read "only 3,999 are available"."""
    from ctxbudget.assembly._policy import parse_policy

    policy = parse_policy(
        f'name = "p"\nenvelope_tokens = 32000\n[[tiers]]\nname = "critical"\nceiling_tokens = 4000\neviction = "{eviction}"\n',
        "p.toml",
    )
    evidence = "Q. Did you get notice?\nA. Yes. " * 300
    request = {
        "items": [
            {"id": "EV-1", "tier": "critical", "kind": "evidence", "text": evidence, "citation": "1:1"},
            {"id": "q", "kind": "question", "text": "hi"},
        ]
    }
    with pytest.raises(BudgetExceeded) as refused:
        assemble(request, policy=policy, model="claude-sonnet-4-5")
    assert refused.value.available_tokens == 4000 and "only 4,000 are available" in str(refused.value)


@pytest.mark.parametrize("tier", [1.0, True])
def test_a_tier_given_as_a_float_or_a_boolean_is_told_what_a_tier_is(tier: object) -> None:
    """It was told "Input should be a valid string", though an index is a tier too."""
    request = {"items": [{"id": "a", "tier": tier, "kind": "evidence", "text": "x"}]}
    with pytest.raises(
        InvalidRequestError, match=r"\$\.items\[0\]\.tier: a tier is a name or a whole-number index"
    ):
        assemble(request, policy="legal-review", model="claude-sonnet-4-5")


def test_the_parts_a_body_cannot_fit_add_up_to_its_need() -> None:
    """The parts listed were 7 tokens short of the total: the framing around the blocks is a part."""
    from ctxbudget.assembly._policy import parse_policy

    tiers = "".join(
        f'[[tiers]]\nname = "{name}"\nceiling_tokens = 20000\neviction = "{eviction}"\n'
        for name, eviction in (("pinned", "never"), ("critical", "protected"))
    )
    policy = parse_policy(f'name = "p"\nenvelope_tokens = 1000\n{tiers}', "p.toml")
    request = {
        "items": [
            {"id": "P", "tier": "pinned", "kind": "playbook", "text": "Clause 1. Cite page:line. " * 300},
            {"id": "EV-1", "tier": "critical", "kind": "evidence", "text": "Q. Notice?\nA. Yes. " * 100},
            {"id": "q", "kind": "question", "text": "Was notice given?"},
        ]
    }
    with pytest.raises(BudgetExceeded) as refused:
        assemble(request, policy=policy, model="claude-sonnet-4-5")
    assert sum(refused.value.parts.values()) == refused.value.required_tokens > 1000


def test_confirm_evict_of_an_item_no_confirmation_holds_is_a_report_warning() -> None:
    # Only a protected item waits for a confirmation: naming a pinned, compact, rolling or
    # current-turn item changed nothing and said nothing.
    body = {
        "items": [
            {"id": "pb", "kind": "playbook", "tier": "pinned", "text": "Rule one."},
            {
                "id": "EV-1",
                "kind": "evidence",
                "tier": "critical",
                "text": "Sent March 3.",
                "citation": "p. 4",
            },
            {"id": "d", "kind": "document", "tier": "contextual", "text": "Background."},
            {"id": "q", "kind": "question", "text": "When?"},
        ],
        "confirm_evict": ["pb", "q", "EV-1", "d"],
    }
    warnings = assemble(body, policy="legal-review", model="claude-sonnet-4-5").report.warnings
    told = [w for w in warnings if w.startswith("confirm_evict")]
    assert told == [
        "confirm_evict names 'pb', in tier 0 pinned (eviction: never): only a protected tier's items "
        "wait for a confirmation to leave, so it changed nothing",
        "confirm_evict names 'd', in tier 2 contextual (eviction: compact): only a protected tier's items "
        "wait for a confirmation to leave, so it changed nothing",
        "confirm_evict names 'q', in the current turn, which is never evicted: only a protected tier's "
        "items wait for a confirmation to leave, so it changed nothing",
    ]


def test_an_item_without_a_tier_is_refused_with_its_kind_read_right() -> None:
    body = {
        "items": [{"id": "e", "kind": "evidence", "text": "x"}, {"id": "q", "kind": "question", "text": "?"}]
    }
    with pytest.raises(InvalidRequestError, match=r"\$\.items\[0\]\.tier: an evidence item needs a tier"):
        assemble(body, policy="legal-review", model="claude-sonnet-4-5")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"name": ""}, r"s\.json: \$\.name: the session name is empty or blank"),
        (
            {"turns": [{"question": "A?"}, {"question": "B?", "idle_seconds": 1e300}]},
            r"s\.json: \$\.turns\[1\]\.idle_seconds: must be below 1e18 seconds",
        ),
    ],
)
def test_a_scenario_value_refused_later_is_named_at_its_place(
    tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    # Both were one line without the file or the path: "session name '' is empty or blank",
    # "idle_seconds must be ... got 1e+300".
    scenario = {"name": "r", "base": {"items": []}, "turns": [{"question": "Notice?"}], **change}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(scenario))
    run = CliRunner().invoke(main, ["simulate", str(path)])
    assert run.exit_code == 2 and re.search(said, run.stderr), run.stderr


def test_a_number_past_a_doubles_range_is_told_as_such(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(
        '{"questions": [{"text": "When?"}], "documents": [{"page_content": "x", "score": 1e400}]}'
    )
    run = CliRunner().invoke(main, ["fit", str(path), "--model", "gpt-4o"])
    assert run.exit_code == 2 and "such as 1e400, reads as one" in run.stderr


def test_no_cache_mark_lands_on_an_empty_text_block() -> None:
    """A kept message that ends in an empty text block (an image pasted with no text) is marked
    on its last block that takes a mark: the API refuses ``cache_control`` on empty text."""
    words = "The deposition covered the delivery schedule and exhibit EX-12. "
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": words * 300,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": words * 5}, {"type": "text", "text": ""}]},
            {"role": "assistant", "content": words * 3000},  # over the rolling tier: left out
            {"role": "user", "content": "And then?"},
        ],
    }
    request = assemble(body, policy=POLICY, model="claude-sonnet-4-5").request
    blocks = [b for m in request["messages"] if isinstance(m["content"], list) for b in m["content"]]
    marked = [b for b in blocks if "cache_control" in b]
    assert marked and all(b["text"] for b in marked)
    assert {"type": "text", "text": ""} in blocks  # the client's block is sent as it was
