from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import BudgetExceeded, ConfigError, CostCeilingExceeded
from ctxbudget.assembly._assemble import assemble
from ctxbudget.assembly._policy import get_policy, list_policies, parse_policy
from ctxbudget.assembly._prefix import compare_prefixes
from ctxbudget.errors import InvalidRequestError, PinnedPrefixChanged, PrefixChanged, VolatileValueError, usd

GOLDEN = Path(__file__).parent / "golden"
SMALL = """
name = "small"
envelope_tokens = 700
reserve_output_tokens = 50
expected_output_tokens = 100
cost_ceiling_usd = 1.0
degrade = ["compact"]
[[tiers]]
name = "pinned"
ceiling_tokens = 200
eviction = "never"
cached = true
cache_ttl = "1h"
[[tiers]]
name = "critical"
ceiling_tokens = 150
eviction = "protected"
cached = true
[[tiers]]
name = "contextual"
ceiling_tokens = 120
eviction = "compact"
cached = true
[[tiers]]
name = "volatile"
ceiling_tokens = 100
eviction = "rolling"
"""
POLICY = parse_policy(SMALL, "test")
SENTENCE = "The shipment of lot {n} arrived late and the buyer complained in writing. "


def request(**overrides: Any) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"id": "rules", "tier": "pinned", "kind": "playbook", "text": "Cite page:line such as 47:12. " * 8},
        {
            "id": "EV-1",
            "tier": "critical",
            "kind": "evidence",
            "text": "Q. Did you send notice?\nA. Yes, on the 3rd.",
            "citation": "12:4-12:5",
            "tags": ["Notice"],
        },
        {
            "id": "bg",
            "tier": "contextual",
            "kind": "document",
            "text": "".join(SENTENCE.format(n=n) for n in range(40))
            + "Warranty notice was mailed by certified letter.",
        },
        {
            "id": "h1",
            "tier": "volatile",
            "kind": "history",
            "role": "user",
            "text": "What about the warranty?",
        },
        {
            "id": "h2",
            "tier": "volatile",
            "kind": "history",
            "role": "assistant",
            "text": "The warranty runs 12 months.",
        },
        {"id": "q", "kind": "question", "text": "When was warranty notice mailed?"},
    ]
    body: dict[str, Any] = {"items": items}
    body.update(overrides)
    return body


def run(body: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    kwargs.setdefault("policy", POLICY)
    kwargs.setdefault("model", "gpt-4o")
    return assemble(body or request(), **kwargs)


def test_bundled_legal_review_policy_reproduces_the_seed() -> None:
    assert "legal-review" in list_policies()
    policy = get_policy("legal-review")
    assert [(t.name, t.ceiling_tokens, t.eviction) for t in policy.tiers] == [
        ("pinned", 15000, "never"),
        ("critical", 10000, "protected"),
        ("contextual", 4000, "compact"),
        ("volatile", 3000, "rolling"),
    ]
    assert policy.envelope_tokens == 32000 and policy.cost_ceiling_usd == 0.45


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Generated at 2026-11-29T10:15:00Z for you.", "timestamp"),
        ("Today is 2026-11-29.", "date"),
        ("Today is November 29, 2026.", "date"),
        ("request_id: abc123 follows", "request or session id"),
        ("trace 123e4567-e89b-12d3-a456-426614174000 here", "UUID"),
        ("Logged at 10:15:02 sharp", "time"),
    ],
)
def test_volatile_values_in_a_pinned_tier_are_refused_with_their_span(text: str, kind: str) -> None:
    body = request()
    body["items"][0]["text"] = "Stable rules. " + text
    with pytest.raises(VolatileValueError) as info:
        run(body)
    assert info.value.kind == kind
    start, end = info.value.span
    assert ("Stable rules. " + text)[start:end] == info.value.value
    assert info.value.path == "$.items[0].text"


def test_page_line_citations_are_not_volatile_and_volatile_text_is_fine_elsewhere() -> None:
    body = request()
    body["items"][3]["text"] = "Session id: 42 at 2026-11-29T10:15:00Z"
    run(body)


def test_fail_closed_when_tiers_that_may_not_shrink_exceed_the_envelope() -> None:
    body = request()
    body["items"][-1]["text"] = "Please answer. " * 200
    with pytest.raises(BudgetExceeded) as info:
        run(body)
    assert "current turn (Block 4)" in info.value.parts


def _cacheable() -> dict[str, Any]:
    body = request()
    body["items"][0]["text"] = "".join(f"Rule {n}: cite page:line and exhibit numbers. " for n in range(300))
    return body


def test_breakpoints_and_cache_prediction_across_turns() -> None:
    first = run(_cacheable(), model="claude-sonnet-4-5", policy=get_policy("legal-review"))
    report = first.report.to_dict()
    assert 1 <= len(report["breakpoints"]) <= 4
    assert report["breakpoints"][0]["ttl"] == "1h"
    assert first.request["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert report["cache"]["read_tokens"] == 0
    second = run(_cacheable(), model="claude-sonnet-4-5", policy=get_policy("legal-review"), previous=report)
    assert second.report.to_dict()["cache"]["write_tokens"] == 0
    assert second.report.to_dict()["cache"]["read_tokens"] == report["cache"]["write_tokens"]
    assert second.report.to_dict()["cost_usd"] < report["cost_usd"]


def test_no_breakpoint_below_the_minimum_cacheable_length() -> None:
    report = run(model="claude-haiku-4-5", policy=get_policy("legal-review")).report.to_dict()
    assert report["breakpoints"] == []  # the whole prompt is far below Haiku 4.5's 4,096-token minimum
    assert any("minimum cacheable" in w for w in report["warnings"])


def test_cost_is_priced_from_the_catalog() -> None:
    result = run(model="claude-sonnet-4-5", policy=get_policy("legal-review"), expected_output_tokens=1000)
    cache, cost = result.report.to_dict()["cache"], result.report.to_dict()["cost"]
    expected = (
        cache["uncached_tokens"] * 3
        + cache["write_5m_tokens"] * 3.75
        + cache["write_1h_tokens"] * 6
        + cache["read_tokens"] * 0.3
        + 1000 * 15
    ) / 1e6
    assert cost["total_usd"] == pytest.approx(expected, abs=1e-6)


def test_cost_ceiling_refuses_or_degrades() -> None:
    with pytest.raises(CostCeilingExceeded, match="ceiling"):
        run(model="gpt-4", cost_ceiling_usd=0.001, expected_output_tokens=100)
    full = run(model="gpt-4o", expected_output_tokens=100).report.to_dict()["cost_usd"]
    ceiling = full - 30 * 2.5e-6  # 30 input tokens below the undegraded estimate
    cheap = run(model="gpt-4o", cost_ceiling_usd=ceiling, expected_output_tokens=100)
    assert cheap.report.to_dict()["degraded"] and cheap.report.to_dict()["cost_usd"] <= ceiling
    # the last line says what the degraded tier holds as sent (a target is a limit, not a size)
    held = {t.name: t.tokens for t in cheap.report.tiers}
    last = cheap.report.degraded[-1]
    assert last.startswith(f"under the ceiling at {usd(cheap.report.cost_usd)} with ")
    assert any(f"{name} {tokens:,} tokens" in last for name, tokens in held.items())
    # a halved target is told in the tokens every other figure is (a claude estimate: scaled)
    claude = run(model="claude-sonnet-4-5", expected_output_tokens=100).report
    ceilings = {t.name: t.ceiling_tokens for t in claude.tiers}
    halved = run(
        model="claude-sonnet-4-5", cost_ceiling_usd=claude.cost_usd - 1e-4, expected_output_tokens=100
    )
    first = halved.report.degraded[0]
    name, told = first.split(": ")[1].split("'s target halved to ")
    assert abs(int(told.removesuffix(" tokens").replace(",", "")) - ceilings[name] // 2) <= 1, first


def test_a_ceiling_below_the_cheapest_request_is_refused_by_its_figure() -> None:
    # with every compact tier empty the request is still over: refused at once (it was halved
    # to 0 first), by the figure of that cheapest request, as before
    full = run(model="gpt-4o", expected_output_tokens=100).report.cost_usd
    with pytest.raises(CostCeilingExceeded) as refused:
        run(model="gpt-4o", cost_ceiling_usd=1e-6, expected_output_tokens=100)
    assert 1e-6 < refused.value.estimate_usd < full
    empty = request()
    empty["items"] = [i for i in empty["items"] if i.get("tier") != "contextual"]
    assert (
        refused.value.estimate_usd == run(empty, model="gpt-4o", expected_output_tokens=100).report.cost_usd
    )


def test_pinned_prefix_is_byte_identical_across_turns_of_a_session() -> None:
    first = run()
    body = request()
    body["items"][-1]["text"] = "A different question this turn?"
    body["items"][3]["text"] = "A different earlier message."
    second = run(body, previous=first.report.to_dict())
    assert "byte-identical" in second.report.to_dict()["invariants"]["INV-CTX-01"]
    compare_prefixes(first.request, second.request)


def test_a_changed_pinned_prefix_fails_closed_unless_allowed() -> None:
    first = run()
    body = request()
    body["items"][0]["text"] = body["items"][0]["text"].replace("Cite", "Quote", 1)
    with pytest.raises(PinnedPrefixChanged, match="byte 0, line 1") as info:
        run(body, previous=first.report.to_dict())
    assert info.value.offset == 0 and info.value.after.startswith("Quote")
    second = run(body, previous=first.report.to_dict(), allow_prefix_change=True)
    assert (
        "changed from the previous turn at byte 0 (allowed)"
        in second.report.to_dict()["invariants"]["INV-CTX-01"]
    )
    assert (
        "byte-identical" in run(previous=first.report.to_dict()).report.to_dict()["invariants"]["INV-CTX-01"]
    )


def test_a_changed_prefix_names_the_value_that_changed() -> None:
    body = request()
    text = body["items"][0]["text"]
    body["items"][0]["text"] = "Build 4411 of the playbook.\n" + text
    first = run(body)
    body["items"][0]["text"] = "Build 4412 of the playbook.\n" + text
    with pytest.raises(PinnedPrefixChanged, match="'4412'") as info:
        run(body, previous=first.report.to_dict())
    assert info.value.line == 1 and info.value.volatile == ("value", "4412")


def test_other_formats_map_onto_tiers() -> None:
    body = {
        "role": "Be exact.",
        "documents": [{"page_content": SENTENCE.format(n=1) * 3}],
        "history": [{"role": "user", "content": "hi"}],
        "questions": [{"text": "When?"}],
    }
    report = run(body).report.to_dict()
    assert [t["name"] for t in report["tiers"] if t["tokens"]] == ["pinned", "contextual", "volatile"]


def test_the_default_anthropic_body_for_an_openai_model_is_said_in_the_report() -> None:
    """The body is Anthropic's unless asked otherwise, whatever the model: for gpt-4o it carries
    system blocks and cache marks OpenAI refuses. Said when the format was not asked for."""

    def noted(**kwargs: Any) -> bool:
        return any("Anthropic's format (the default)" in w for w in run(**kwargs).report.warnings)

    assert noted(model="gpt-4o") and noted(model="deepseek-chat")
    assert not noted(model="gpt-4o", output_format="openai")
    assert not noted(model="gpt-4o", output_format="anthropic")  # asked for: as asked
    assert not noted(model="claude-sonnet-4-5")


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "text"])
def test_golden_rendered_bodies(fmt: str) -> None:
    result = run(format=fmt, prompt_cache_key="matter-42" if fmt == "openai" else None)
    rendered = (
        result.request
        if isinstance(result.request, str)
        else json.dumps(result.request, indent=1, ensure_ascii=False)
    )
    golden = GOLDEN / f"assembled_{fmt}.{'txt' if fmt == 'text' else 'json'}"
    assert rendered == golden.read_text("utf-8")


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("cost_ceiling_usd", float("nan")),
        ("cost_ceiling_usd", -1.0),
        ("cost_ceiling_usd", "0.3"),
        ("expected_output_tokens", -100_000),
        ("expected_output_tokens", 1.5),
        ("idle_seconds", "5"),
        ("idle_seconds", float("inf")),
        ("policy", 7),
    ],
)
def test_options_of_the_wrong_kind_are_config_errors_naming_them(option: str, value: object) -> None:
    with pytest.raises(ConfigError, match=option):
        run(**{option: value})


def test_a_policy_may_be_named() -> None:
    assert (
        run(policy="legal-review", model="claude-sonnet-4-5").report
        == assemble(request(), policy=get_policy("legal-review"), model="claude-sonnet-4-5").report
    )


def test_a_model_resolved_by_a_guess_is_said_in_the_report() -> None:
    """An id the catalog only matches by a family's longest id is priced and held to the ceiling
    with that entry: the report says so, as a fit's does."""
    guessed = run(model="gpt-4o-house").report
    assert any("budgeting it as 'gpt-4o'" in w for w in guessed.warnings), guessed.warnings
    assert not any("not in the catalog" in w for w in run(model="gpt-4o").report.warnings)


def test_a_ceiling_equal_to_the_reported_cost_is_not_exceeded() -> None:
    """The ceiling is held to the cost as reported (to the micro-dollar): the float sum's last
    bits (0.13304300000000002 against 0.133043) degraded a tier or refused the call."""
    cost = run(expected_output_tokens=100).report.cost_usd
    assert cost is not None
    at = run(cost_ceiling_usd=cost, expected_output_tokens=100).report
    assert at.cost_usd == cost and not at.degraded


def test_a_clients_top_level_cache_mark_is_not_carried_beside_the_policys() -> None:
    """The policy places (and prices) the breakpoints: an Anthropic body's automatic-caching mark
    would add one the prediction does not know, as a carried tool's marks would."""
    body = {
        "system": "Be exact.",
        "cache_control": {"type": "ephemeral"},
        "tools": [
            {"name": "search", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [{"role": "user", "content": "When was notice given?"}],
    }
    sent = run(body, model="claude-sonnet-4-5").request
    assert "cache_control" not in sent and "cache_control" not in sent["tools"][0]


@pytest.mark.parametrize("fmt", ["openai", "text"])
def test_a_body_without_marks_predicts_no_cache_for_a_model_that_caches_only_at_marks(fmt: str) -> None:
    """Claude caches at cache_control marks only: an openai or text body cannot carry them, so
    neither breakpoints nor cache reads and writes are predicted or priced, and the report says why."""
    policy = get_policy("legal-review")
    first = run(_cacheable(), model="claude-sonnet-4-5", policy=policy, format=fmt).report
    assert not first.breakpoints and first.to_dict()["cache"]["write_tokens"] == 0
    assert any("caches only at cache_control marks" in w for w in first.warnings)
    second = run(_cacheable(), model="claude-sonnet-4-5", policy=policy, format=fmt, previous=first.to_dict())
    assert second.report.to_dict()["cache"]["read_tokens"] == 0


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (
            {"questions": [{"text": ""}], "documents": [{"page_content": "The letter went out."}]},
            "$.questions[0].text",
        ),
        (
            {
                "system": "Rules. Generated 2026-09-16T10:32:11Z",
                "messages": [{"role": "user", "content": "Q?"}],
            },
            "$.system:",
        ),
        (
            {
                "messages": [
                    {"role": "system", "content": "Rules. Built 2026-09-16T10:32:11Z"},
                    {"role": "user", "content": "Q?"},
                ]
            },
            "$.messages[0].content",
        ),
    ],
)
def test_errors_on_question_and_chat_bodies_name_the_field_given(body: dict[str, Any], where: str) -> None:
    """An assembled question or chat body's errors name its own fields, not the item list it is
    read into (the gateway sends them to clients): `$.system`, not `$.items[0].text`."""
    from ctxbudget import InvalidRequestError

    with pytest.raises(InvalidRequestError) as raised:
        assemble(body, policy="legal-review", model="claude-sonnet-4-5")
    assert str(raised.value).startswith(where) and "$.items" not in str(raised.value)


def test_text_moved_between_two_pinned_tiers_is_a_changed_prefix() -> None:
    # The provider caches blocks: the same text split at another place is another prefix, though
    # the pinned text read as one string is the same.
    tiers = SMALL.replace(
        'name = "critical"', 'name = "pinned2"\neviction = "never"\n[[tiers]]\nname = "critical"', 1
    )
    policy = parse_policy(
        tiers.replace(
            'name = "pinned2"\neviction = "never"\n[[tiers]]',
            'name = "pinned2"\nceiling_tokens = 100\neviction = "never"\ncached = true\n[[tiers]]',
            1,
        ),
        "two",
    )
    question = {"id": "q", "kind": "question", "text": "When was notice given?"}

    def pinned(first: str, second: str, **options: Any) -> Any:
        items = [
            {"id": "a", "tier": "pinned", "kind": "playbook", "text": first},
            {"id": "b", "tier": "pinned2", "kind": "playbook", "text": second},
            question,
        ]
        return assemble({"items": items}, policy=policy, model="claude-sonnet-4-5", **options)

    first = pinned("Cite page and line. Keep it short. ", "Quote exhibits in full.")
    assert len(first.request["system"]) >= 2
    with pytest.raises(PinnedPrefixChanged):
        pinned(
            "Cite page and line. ", "Keep it short. Quote exhibits in full.", previous=first.report.to_dict()
        )
    same = pinned(
        "Cite page and line. Keep it short. ", "Quote exhibits in full.", previous=first.report.to_dict()
    )
    assert "byte-identical" in same.report.to_dict()["invariants"]["INV-CTX-01"]


@pytest.mark.parametrize(("window", "refused"), [(5_000, False), (4_300, True)])
def test_a_prompt_and_the_reply_it_asks_for_must_fit_the_window_together(
    tmp_path: Path, window: int, refused: bool
) -> None:
    # the small policy's prompt (~300 tokens) with its default 4,096-token reply
    from ctxbudget import load_catalog

    path = tmp_path / "tiny.toml"
    path.write_text(
        f'schema_version = 1\n[[models]]\nid = "tiny-llm"\nprovider = "me"\ncontext_window = {window}\n'
        "prices = { input = 1, output = 2 }\n"
    )
    if not refused:
        result = run(model="tiny-llm", catalog=load_catalog([path]))
        assert result.report.tokens + result.request["max_tokens"] <= window
        return
    with pytest.raises(BudgetExceeded) as caught:
        run(model="tiny-llm", catalog=load_catalog([path]))
    assert caught.value.parts["the reply it asks for (max_tokens)"] == 4096  # not sent to be refused
    assert caught.value.required_tokens > window == caught.value.available_tokens


def test_a_previous_report_whose_hash_is_not_its_texts_is_refused_as_such() -> None:
    from ctxbudget import InvalidRequestError

    previous = run().report.to_dict()
    damaged = {**previous, "pinned_prefix_sha256": "0" * 64}
    # not blamed on the playbook ("differs at byte N", the same lines before and after)
    with pytest.raises(InvalidRequestError, match=r"pinned_prefix_sha256: the previous report does not hold"):
        run(previous=damaged)
    assert run(previous=previous).report.pinned_prefix_sha256 == previous["pinned_prefix_sha256"]


@pytest.mark.parametrize("hash_", [None, 7, "absent"])
def test_a_previous_report_without_its_prefix_hash_is_refused_not_taken_for_a_first_turn(
    hash_: object,
) -> None:
    """A report with its breakpoints but no ``pinned_prefix_sha256`` string was read as no previous
    turn: INV-CTX-01 passed a changed playbook (a helper's fuzzing)."""
    from ctxbudget import InvalidRequestError

    previous = run().report.to_dict()
    damaged = {k: v for k, v in previous.items() if k != "pinned_prefix_sha256"}
    if hash_ != "absent":
        damaged["pinned_prefix_sha256"] = hash_
    with pytest.raises(InvalidRequestError, match=r"pinned_prefix_sha256: the previous report has no"):
        run(previous=damaged)
    with pytest.raises(InvalidRequestError, match=r"pinned_prefix_sha256: the previous report has no"):
        run(previous={"report": damaged})  # as `assemble --json` writes it


def test_a_prefix_for_another_model_is_not_read_from_the_cache() -> None:
    """verify-prefix said the cached prefixes of two models were identical: a provider caches per model."""
    system = [{"type": "text", "text": "Cite the record. " * 200, "cache_control": {"type": "ephemeral"}}]
    a = {"model": "claude-sonnet-4-5", "system": system, "messages": [{"role": "user", "content": "q"}]}
    b = {**a, "model": "claude-haiku-4-5"}
    with pytest.raises(PrefixChanged, match="'model claude-sonnet-4-5' became 'model claude-haiku-4-5'"):
        compare_prefixes(a, b)
    assert compare_prefixes(a, b, strict=False).offset == 0
    assert compare_prefixes(a, {**a}).offset is None
    unnamed = {k: v for k, v in a.items() if k != "model"}  # a body that names no model: bytes alone
    assert compare_prefixes(unnamed, b).offset is None


def test_a_responses_body_s_prefix_is_its_tools_instructions_and_leading_system_items() -> None:
    """verify-prefix refused a Responses body as "not a request body"; its cached prefix is its
    tools, its instructions and the system and developer messages its input opens with."""
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    a = {
        "model": "gpt-4o",
        "tools": tools,
        "instructions": "Cite the record.",
        "input": [
            {"role": "developer", "content": "Answer briefly."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "When?"}]},
        ],
    }
    asked_again = {**a, "input": [a["input"][0], {"role": "user", "content": "Where?"}]}
    assert compare_prefixes(a, asked_again).offset is None  # only the conversation differs
    for changed in (
        {**a, "instructions": "Cite the page."},
        {**a, "input": [{"role": "developer", "content": "Answer fully."}, a["input"][1]]},
        {**a, "tools": [{**tools[0], "name": "find"}]},
    ):
        assert compare_prefixes(a, changed, strict=False).offset is not None
    written_out = {  # the same input in the API's other spellings: its full item and a text part
        **a,
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "Answer briefly."}],
            },
            a["input"][1],
        ],
    }
    assert compare_prefixes(a, written_out).offset is None
    plain = {"model": "gpt-4o", "instructions": "Cite the record.", "input": "When?"}
    assert compare_prefixes(plain, {**plain, "input": "Where?"}).offset is None
    with pytest.raises(InvalidRequestError, match="instructions are a string"):
        compare_prefixes({"input": "x", "instructions": 5}, plain)


def test_a_chat_body_assembled_into_another_format_is_told_what_it_loses() -> None:
    """An OpenAI agent body assembled for Anthropic lost its tool definitions (its call went as
    text), and nothing said so."""
    body = {
        "model": "gpt-4o",
        "tools": [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}],
        "tool_choice": "auto",
        "messages": [
            {"role": "system", "content": "You review deposition records."},
            {"role": "user", "content": "When was notice given?"},
        ],
    }
    other = assemble(body, policy="legal-review", model="claude-sonnet-4-5", output_format="anthropic")
    assert "tools" not in other.request
    told = [w for w in other.report.warnings if w.startswith("not carried")]
    assert told == [
        "not carried into the anthropic body: tool_choice, tools (the request is in the openai format; "
        "its tool calls and results, if any, go as text): assemble the openai format to keep them"
    ]
    own = assemble(body, policy="legal-review", model="claude-sonnet-4-5", output_format="openai")
    assert "tools" in own.request and not any(w.startswith("not carried") for w in own.report.warnings)


def test_a_chat_body_of_system_messages_alone_is_told_in_chat_words() -> None:
    """It was told to "end the items with the question (kind "question")": an items body's words."""
    body = {"model": "gpt-4o", "messages": [{"role": "system", "content": "You review records."}]}
    with pytest.raises(InvalidRequestError, match=r"\$\.messages: no user message to send") as told:
        assemble(body, policy="legal-review", model="claude-sonnet-4-5", output_format="openai")
    assert "items" not in str(told.value)


def test_a_superseding_item_kept_for_the_one_it_replaces_says_so() -> None:
    """An item kept in the place of a selected one it supersedes was said to match the issue tags
    when its own did not."""
    record = "47:12 Q. Did you send the notice?\n47:13 A. Yes, I sent it on March 3."
    items = [
        {"id": "p", "tier": "pinned", "kind": "playbook", "text": "Cite page:line. " * 50},
        {
            "id": "E1",
            "tier": "critical",
            "kind": "evidence",
            "text": "A. I never sent notice.",
            "tags": ["Notice"],
        },
        {
            "id": "E2",
            "tier": "critical",
            "kind": "evidence",
            "text": "A. Yes, I sent it on March 3.",
            "citation": "47:13",
            "supersedes": "E1",
            "tags": ["Other"],
        },
        {
            "id": "E3",
            "tier": "critical",
            "kind": "evidence",
            "text": "A. The notice went out.",
            "tags": ["Notice"],
        },
        {"id": "tr", "tier": "contextual", "kind": "document", "text": record},
        {"id": "q", "kind": "question", "text": "When was notice given?"},
    ]
    report = assemble(
        {"items": items, "issue_tags": ["Notice"]}, policy="legal-review", model="claude-sonnet-4-5"
    ).report
    reasons = {d.id: d.reason for t in report.tiers if t.name == "critical" for d in t.items}
    assert reasons["E2"] == "protected, verbatim, in the place of E1, which the issue tags select"
    assert reasons["E3"] == "protected, verbatim, tags match the issue tags"
