"""The legal spec end to end: Block 3 (the ledger) sent and bounded, Block 4 bounded, INV-CTX-01
fail-closed, verified supersede, issue-tag selection, cache expiry, and the reducer's cut."""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import math
import re
import struct
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import BudgetExceeded, InvalidRequestError
from ctxbudget.assembly._assemble import assemble
from ctxbudget.assembly._policy import get_policy
from ctxbudget.assembly._render import block_texts
from ctxbudget.cli import main
from ctxbudget.errors import PinnedPrefixChanged, SupersedeUnverified, UnknownModelError
from ctxbudget.session import Session, SQLiteStore, ToolResult, Turn
from ctxbudget.session.folding import exhibit_key
from ctxbudget.session.ledger import fold_entries, fold_ledger, ledger_blocks, reduce_turn, render_ledger
from ctxbudget.simulation.deposition import build_legal_context
from ctxbudget.simulation.runner import SimulationResult, run_simulation
from ctxbudget.simulation.scenario import bundled_scenario
from ctxbudget.trim.sentences import iter_sentence_ends

from .fake_upstream import gateway_over_fake

POLICY = get_policy("legal-review")
MODEL = "claude-sonnet-4-5"


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> tuple[SimulationResult, list[Any]]:
    store = tmp_path_factory.mktemp("legal") / "sim.db"
    result = run_simulation(bundled_scenario(), store_path=str(store))
    return result, SQLiteStore(str(store)).turns("deposition-review")


def _ledger_text(body: dict[str, Any]) -> str:
    """The ledger's blocks (from its header to the end of the system blocks), joined by lines."""
    texts = [b["text"] for b in body["system"]]
    start = next(n for n, t in enumerate(texts) if t.startswith("Session state ledger"))
    return "\n".join(texts[start:])


def _sent(body: dict[str, Any] | str) -> str:
    return "\n".join(block_texts(body))


def test_from_the_first_compaction_every_body_holds_the_ledger_and_the_two_recent_turns_whole(
    played: tuple[SimulationResult, list[Any]],
) -> None:
    result, turns = played
    first = next(n for n, row in enumerate(result.turns, 1) if row["compaction"])
    assert first < len(turns)
    for n in range(first, len(turns) + 1):
        body = result.requests[n - 1]
        sent = _sent(body)
        assert isinstance(body, dict)
        ledger = _ledger_text(body)  # Block 3: the last system blocks, after the cached tiers
        assert '"cited_exhibits"' in ledger and ledger.count("Session state ledger") == 1
        for recent in turns[max(0, n - 3) : n - 1]:
            for _, text in recent.raw_texts():
                assert text in sent, (n, recent.index)
        report = turns[n - 1].report
        assert report["ledger"]["tokens"] > 0 and report["ledger"]["tokens"] <= 5000


def _conclusion_sentences(answer: str) -> list[str]:
    out, start = [], 0
    for end in [*iter_sentence_ends(answer), len(answer)]:
        sentence = answer[start:end].strip()
        start = end
        if sentence.lower().startswith(("therefore", "thus", "in conclusion")):
            out.append(sentence)
    return out


def test_the_reducer_cuts_85_percent_and_keeps_every_finding(
    played: tuple[SimulationResult, list[Any]],
) -> None:
    result, turns = played
    steps = [row["compaction"] for row in result.turns if row["compaction"]]
    assert steps and all(step["reduction"] >= 0.85 for step in steps)
    compacted = {t for step in steps for t in step["turns"]}
    ledger_text = _ledger_text(result.requests[-1])
    entries = {json.loads(line)["turn"]: line for line in ledger_text.split("\n")[1:]}
    for turn in (t for t in turns if t.index in compacted):
        line = entries[turn.index]
        texts = [turn.question, turn.answer, *(r.content for r in turn.tool_results)]
        for exhibit in {x for t in texts for x in re.findall(r"EX-\d+", t)}:
            assert f'"{exhibit}"' in line, (turn.index, exhibit)
        for tag in turn.tags:
            assert f'"{tag}"' in line
        for tool in turn.tool_results:
            status = json.loads(tool.content)["status"]
            assert f"{tool.name} {status}" in line
        for sentence in _conclusion_sentences(turn.answer):
            assert json.dumps(sentence, ensure_ascii=False) in line


def _entry(n: int, issue: str, exhibits: list[str]) -> dict[str, Any]:
    return {
        "turn": n,
        "issue": issue,
        "cited_exhibits": exhibits,
        "citations": [f"{n}:01"],
        "status": "CONFIRMED" if n % 3 else "DISPUTED",
        "tools": ["search CONFIRMED"],
        "conclusions": [f"Therefore issue {issue} stands on turn {n}."],
    }


def _fake_count(text: str) -> int:
    """A fake tokenizer for the fold's algorithm: one token per 4 characters."""
    return (len(text) + 3) // 4


def _measure(blocks: list[str]) -> int:
    return sum(_fake_count(b) for b in blocks)


class _FakeCounting:
    """Blocks counted by :func:`_fake_count`, reported as counted."""

    @staticmethod
    def raw(text: str) -> int:
        return _fake_count(text)

    @staticmethod
    def scale(raw_tokens: int) -> int:
        return raw_tokens


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["Notice", "Warranty", "Delivery", "Inspection"]), st.integers(1, 60)),
        min_size=1,
        max_size=60,
    ),
    st.integers(300, 2000),
)
def test_the_ledger_folds_under_its_ceiling_in_steps_and_loses_no_exhibit(
    shape: list[tuple[str, int]], ceiling: int
) -> None:
    entries = [_entry(n, issue, [f"EX-{x:02d}"]) for n, (issue, x) in enumerate(shape, 1)]
    try:
        shown = fold_ledger(entries, ceiling, _FakeCounting())
    except BudgetExceeded:
        return
    blocks = ledger_blocks(shown)
    assert _measure(blocks) <= ceiling  # measured block by block, as the assembly counts it
    assert shown == fold_ledger(entries, ceiling, _FakeCounting())  # a function of the entries alone
    counted = {e["issue"] for e in shown if e.get("more_exhibits")}  # unlisted past a fold's cap
    for entry in entries:
        assert f'"{entry["cited_exhibits"][0]}"' in "\n".join(blocks) or entry["issue"] in counted
    # appending leaves the blocks before the new entry as they were, except at a fold step
    changes = 0
    before = ledger_blocks(fold_ledger(entries[:1], ceiling, _FakeCounting()))
    for n in range(2, len(entries) + 1):
        after = ledger_blocks(fold_ledger(entries[:n], ceiling, _FakeCounting()))
        changes += after[: len(before)] != before
        before = after
    folds = sum(1 for e in shown if "turns" in e)
    assert changes <= max(1, len(entries) // 3)
    assert folds or changes == 0


def test_a_fold_of_many_issues_citing_many_exhibits_gets_back_under_its_mark() -> None:
    """Ten issues, each turn citing twelve exhibits: folded whole, the ledger stayed over 60% of
    its ceiling (each issue listed 60 exhibits), so the next entry or two took it over again and
    every fold rewrote it, every four turns. Each issue now lists fewer (counted past the cap)."""
    entries = [_entry(n, f"Issue{n % 10}", [f"EX-{n * 3 + k}" for k in range(12)]) for n in range(1, 121)]
    ceiling = 2_500  # ten issues of 60 exhibits folded: 1,754 tokens, over its 60%
    shown = fold_ledger(entries, ceiling, _FakeCounting())
    folded = [e for e in shown if "turns" in e]
    assert folded and all(len(e["cited_exhibits"]) < 60 and e["more_exhibits"] for e in folded)
    header = ledger_blocks(folded)[0]
    assert _fake_count(header) <= 0.6 * ceiling
    assert shown == _replayed(entries, ceiling, _measure)  # the fold's definition, from scratch
    before, rewrites = ledger_blocks(fold_ledger(entries[:60], ceiling, _FakeCounting())), 0
    for n in range(61, len(entries) + 1):
        after = ledger_blocks(fold_ledger(entries[:n], ceiling, _FakeCounting()))
        rewrites += after[: len(before)] != before
        before = after
    assert rewrites <= 6  # a fold in every ten turns at most (every fourth before)


def test_the_ledger_renders_the_same_bytes_whatever_the_key_order() -> None:
    entry = _entry(3, "Notice", ["EX-01"])
    shuffled = dict(sorted(entry.items()))  # as a store gives it back
    assert ledger_blocks([entry]) == ledger_blocks([shuffled])


def _request(extra: list[dict[str, Any]] | None = None, question: str | None = None) -> dict[str, Any]:
    body = build_legal_context()
    items = [i for i in body["items"] if i.get("kind") != "question"]
    items += extra or []
    items.append(
        {"id": "question", "kind": "question", "text": question or "When was notice given? Cite page:line."}
    )
    return {"items": items}


def test_block_4_cuts_tool_returns_with_the_question_in_mind_and_never_the_question() -> None:
    lines = [
        f"{p}:{n:02d} A. The shipment of lot {p * 100 + n} was routine."
        for p in range(1, 80)
        for n in range(1, 26)
    ]
    lines[1200] = "48:01 A. Written notice of the warranty defect went out by certified mail on March 3."
    result_item = {"id": "result-0", "kind": "tool_result", "text": "\n".join(lines)}
    result = assemble(
        _request([result_item], "When was written notice of the warranty defect given?"),
        policy=POLICY,
        model=MODEL,
    )
    block4 = result.report.to_dict()["current_turn"]
    assert block4["ceiling_tokens"] == 2000 and block4["tokens"] <= 2000
    item = next(i for i in block4["items"] if i["id"] == "result-0")
    assert item["action"] == "compacted" and item["tokens_before"] > 12_000
    sent = _sent(result.request)
    assert "48:01 A. Written notice of the warranty defect went out by certified mail on March 3." in sent
    assert "When was written notice of the warranty defect given?" in sent
    with pytest.raises(BudgetExceeded, match="the question") as info:
        assemble(_request(question="Why? " * 1500), policy=POLICY, model=MODEL)
    assert any("question (never cut)" in part for part in info.value.parts)


def test_the_cli_exits_3_naming_the_question(tmp_path: Path) -> None:
    path = tmp_path / "long.json"
    path.write_text(json.dumps(_request(question="Why? " * 1500)))
    run = CliRunner().invoke(main, ["assemble", "--model", MODEL, str(path)])
    assert run.exit_code == 3 and "question (never cut)" in run.output


def test_a_ledger_over_its_ceiling_fails_closed() -> None:
    ledger = {"id": "ledger", "tier": "volatile", "kind": "ledger", "text": "x " * 12_000}
    with pytest.raises(BudgetExceeded, match=r"ledger \(Block 3\)"):
        assemble(_request([ledger]), policy=POLICY, model=MODEL)


def _superseding(**fields: Any) -> dict[str, Any]:
    item = {"id": "EV-01b", "tier": "critical", "kind": "evidence", "supersedes": "EV-01"}
    item.update(fields)
    return item


def _insert_after_evidence(item: dict[str, Any]) -> dict[str, Any]:
    body = _request()
    at = max(n for n, i in enumerate(body["items"]) if i.get("tier") == "critical") + 1
    body["items"].insert(at, item)
    return body


def test_supersede_needs_a_cited_quote_verified_against_the_transcript() -> None:
    pages = {i["id"]: i["text"] for i in build_legal_context()["items"] if i["id"].startswith("page-")}
    line_a, line_b = pages["page-9"].split("\n")[3:5]
    quote = f"{line_a}\n{line_b}"
    cite = f"{line_a.split(' ')[0]}-{line_b.split(' ')[0]}"
    ok = assemble(_insert_after_evidence(_superseding(text=quote, citation=cite)), policy=POLICY, model=MODEL)
    actions = {i["id"]: i for t in ok.report.to_dict()["tiers"] for i in t["items"]}
    assert actions["EV-01"]["action"] == "superseded" and "verified" in actions["EV-01"]["reason"]
    with pytest.raises(SupersedeUnverified, match="do not hold its text verbatim"):
        assemble(
            _insert_after_evidence(_superseding(text="A. I never received any notice.", citation=cite)),
            policy=POLICY,
            model=MODEL,
        )
    with pytest.raises(SupersedeUnverified, match="not in the transcript"):
        assemble(
            _insert_after_evidence(_superseding(text=quote, citation="999:01-999:02")),
            policy=POLICY,
            model=MODEL,
        )
    with pytest.raises(InvalidRequestError, match="'EV-77', which is not an item of tier 'critical'"):
        assemble(
            _insert_after_evidence(_superseding(text=quote, citation=cite, supersedes="EV-77")),
            policy=POLICY,
            model=MODEL,
        )
    with pytest.raises(SupersedeUnverified, match="not protected evidence with a citation"):
        assemble(_insert_after_evidence(_superseding(text=quote)), policy=POLICY, model=MODEL)


def test_issue_tags_select_tier_1_and_the_report_says_why() -> None:
    body = _request()
    body["issue_tags"] = ["Notice"]
    report = assemble(body, policy=POLICY, model=MODEL).report.to_dict()
    critical = next(t for t in report["tiers"] if t["name"] == "critical")
    tags = {i["id"]: i["tags"] for i in build_legal_context()["items"] if i.get("tier") == "critical"}
    for item in critical["items"]:
        selected = "Notice" in tags[item["id"]]
        assert (item["action"] == "kept") == selected, item
        if not selected:
            assert item["action"] == "not_selected" and "issue tags Notice" in item["reason"]


def test_an_empty_issue_tags_list_selects_by_nothing() -> None:
    """issue_tags: [] left every tagged protected item not_selected, with no warning."""
    body = _request()
    body["issue_tags"] = []
    critical = next(
        t
        for t in assemble(body, policy=POLICY, model=MODEL).report.to_dict()["tiers"]
        if t["name"] == "critical"
    )
    assert critical["items"] and all(item["action"] == "kept" for item in critical["items"])


def test_idle_periods_expire_the_predicted_cache_by_ttl() -> None:
    first = assemble(_request(), policy=POLICY, model=MODEL).report.to_dict()
    reads = {
        idle: assemble(
            _request(), policy=POLICY, model=MODEL, previous=first, idle_seconds=idle
        ).report.to_dict()["cache"]
        for idle in (60, 20 * 60, 90 * 60)
    }
    pinned = next(b["prefix_tokens"] for b in first["breakpoints"] if b["ttl"] == "1h")
    assert reads[60]["read_tokens"] > pinned  # everything cached is read
    assert reads[20 * 60]["read_tokens"] == pinned  # the 5-minute entries expired, the hour's lives
    assert reads[90 * 60]["read_tokens"] == 0


def test_the_cli_refuses_a_changed_pinned_prefix_with_exit_5(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(_request()))
    changed = _request()
    changed["items"][0]["text"] = changed["items"][0]["text"].replace("v2.1", "v2.2", 1)
    second.write_text(json.dumps(changed))
    prev = tmp_path / "prev.json"
    prev.write_text(CliRunner().invoke(main, ["assemble", "--model", MODEL, "--json", str(first)]).output)
    refused = CliRunner().invoke(main, ["assemble", "--model", MODEL, "--previous", str(prev), str(second)])
    assert refused.exit_code == 5 and "INV-CTX-01" in refused.output and "'v2.2'" in refused.output
    assert "--allow-prefix-change" in refused.output
    allowed = CliRunner().invoke(
        main,
        [
            "assemble",
            "--model",
            MODEL,
            "--previous",
            str(prev),
            "--allow-prefix-change",
            "--json",
            str(second),
        ],
    )
    assert allowed.exit_code == 0, allowed.output


def test_policy_mode_refuses_a_changed_pinned_prefix_with_409_unless_allowed(tmp_path: Path) -> None:
    headers = {"X-Ctxbudget-Policy": "legal-review", "X-Ctxbudget-Session": "case-7"}
    ask = [{"role": "user", "content": "When was notice given?"}]
    with gateway_over_fake(tmp_path / "g.db", allowed_policies=("legal-review",)) as (fake, url):

        def send(system: str, **extra: str) -> httpx.Response:
            body = {"model": "claude-sonnet-4-6", "max_tokens": 50, "system": system, "messages": ask}
            return httpx.post(url + "/v1/messages", json=body, headers={**headers, **extra})

        assert send("Playbook v1. Cite page:line.").status_code == 200
        refused = send("Playbook v2. Cite page:line.")
        message = refused.json()["error"]["message"]
        assert (
            refused.status_code == 409
            and "INV-CTX-01" in message
            and "X-Ctxbudget-Allow-Prefix-Change" in message
        )
        assert len(fake.received) == 1  # nothing was sent
        allowed = send("Playbook v2. Cite page:line.", **{"X-Ctxbudget-Allow-Prefix-Change": "true"})
        assert allowed.status_code == 200 and len(fake.received) == 2
    # a restarted gateway reads the session's last turn from the store: the invariant still holds
    with gateway_over_fake(tmp_path / "g.db", allowed_policies=("legal-review",)) as (fake, url):
        assert send("Playbook v3. Cite page:line.").status_code == 409
        assert send("Playbook v2. Cite page:line.").status_code == 200


def test_a_turn_the_upstream_failed_is_not_the_next_turns_baseline(tmp_path: Path) -> None:
    headers = {"X-Ctxbudget-Policy": "legal-review", "X-Ctxbudget-Session": "case-8"}
    ask = [{"role": "user", "content": "When was notice given?"}]
    catalog = tmp_path / "priced.toml"  # the failing model, priced and large enough for the policy
    catalog.write_text(
        'schema_version = 1\n[[models]]\nid = "fault-503"\nprovider = "anthropic"\n'
        "context_window = 200000\nprices = {input = 3.0, output = 15.0}\n"
    )
    with gateway_over_fake(
        tmp_path / "f.db", allowed_policies=("legal-review",), catalog_paths=(str(catalog),)
    ) as (_, url):

        def send(system: str, model: str = "claude-sonnet-4-6", **extra: str) -> httpx.Response:
            body = {"model": model, "max_tokens": 50, "system": system, "messages": ask}
            return httpx.post(url + "/v1/messages", json=body, headers={**headers, **extra})

        assert send("Playbook A.").status_code == 200
        failed = send("Playbook B.", "fault-503", **{"X-Ctxbudget-Allow-Prefix-Change": "true"})
        assert failed.status_code == 503
        assert send("Playbook A.").status_code == 200  # A is still the last answered turn


def test_the_simulation_is_billed_through_the_gateway_and_idle_gaps_expire_the_cache(
    played: tuple[SimulationResult, list[Any]],
) -> None:
    result, turns = played
    rows = result.turns
    assert all(r["billed"] for r in rows)
    pinned = rows[0]["tiers"]["pinned"]
    assert rows[5]["idle_seconds"] == 1200 and rows[8]["idle_seconds"] == 5400
    # after 20 minutes only the playbook's 1-hour entry is read; after 90 minutes nothing is
    assert abs(rows[5]["billed"]["cache_read_tokens"] - pinned) <= 0.01 * pinned
    assert rows[8]["billed"]["cache_read_tokens"] == 0
    for row in rows:  # the prediction knows the gaps too: billed and predicted agree within 1%
        predicted, billed = row["cache_read_tokens"], row["billed"]["cache_read_tokens"]
        assert abs(predicted - billed) <= 0.01 * max(1, billed)
    # a turn that appends to the ledger still reads the ledger of the turn before from the cache
    grown = [
        n for n in range(1, len(rows)) if 0 < rows[n - 1]["tiers"]["ledger"] < rows[n]["tiers"]["ledger"]
    ]
    fresh = [n for n in grown if rows[n]["idle_seconds"] < 300]
    assert fresh and all(
        rows[n]["billed"]["cache_read_tokens"] > rows[0]["billed"]["cache_write_tokens"] for n in fresh
    )
    summary = result.summary["billed"]
    assert summary["p95_end_to_end_ms"] > 0 and summary["latency_target_ms"] == 4500
    assert 0 < summary["cache_hit_ratio"] < 1 and summary["max_cost_usd"] <= 0.45
    assert turns[0].figures().source == "provider"


def _verify(text: str, citation: str) -> Any:
    return assemble(
        _insert_after_evidence(_superseding(text=text, citation=citation)), policy=POLICY, model=MODEL
    )


def test_supersede_cannot_be_slipped_past_the_check() -> None:
    pages = {i["id"]: i["text"] for i in build_legal_context()["items"] if i["id"].startswith("page-")}
    lines = pages["page-9"].split("\n")
    first, last = lines[3].split(" ")[0], lines[4].split(" ")[0]
    quote = f"{lines[3]}\n{lines[4]}"
    assert _verify(quote, f"Tr. {first}-{last}")  # a prefixed citation is read, and checked
    for citation in (f"{last}-{first}", f"{first}-{last} and 12:01", "page nine"):
        with pytest.raises(SupersedeUnverified, match="not one page:line range"):
            _verify(quote, citation)
    word = lines[3].split(" ")[2]
    with pytest.raises(SupersedeUnverified, match="verbatim"):
        _verify(f"{lines[3].split(' ')[1]} {word[:-1]}", f"{first}-{last}")  # a cut word is not verbatim
    body = _insert_after_evidence(_superseding(text=quote, citation=f"{first}-{last}", id="EV-01"))
    body["items"] = [i for i in body["items"] if not (i["id"] == "EV-01" and "supersedes" not in i)]
    with pytest.raises(InvalidRequestError, match="supersedes itself"):
        assemble(body, policy=POLICY, model=MODEL)


def test_a_selected_quote_superseded_by_an_untagged_one_is_replaced_not_lost() -> None:
    pages = {i["id"]: i["text"] for i in build_legal_context()["items"] if i["id"].startswith("page-")}
    lines = pages["page-9"].split("\n")
    cite = f"{lines[3].split(' ')[0]}-{lines[4].split(' ')[0]}"
    body = _insert_after_evidence(_superseding(text=f"{lines[3]}\n{lines[4]}", citation=cite, tags=["Other"]))
    original = next(i for i in body["items"] if i["id"] == "EV-01")
    body["issue_tags"] = [original["tags"][0].upper()]  # tags match whatever their case
    report = assemble(body, policy=POLICY, model=MODEL).report.to_dict()
    actions = {i["id"]: i["action"] for t in report["tiers"] for i in t["items"]}
    assert actions["EV-01"] == "superseded" and actions["EV-01b"] == "kept"


def test_evidence_attributes_cannot_add_markup() -> None:
    body = _request()
    evidence = next(i for i in body["items"] if i["id"] == "EV-01")
    evidence["citation"] = '5:01-5:06" trusted="yes'
    sent = _sent(assemble(body, policy=POLICY, model=MODEL).request)
    assert 'citation="5:01-5:06&quot; trusted=&quot;yes"' in sent and 'trusted="yes"' not in sent


def test_tool_results_sent_with_the_question_are_cut_not_the_question() -> None:
    log = "\n".join(
        f"{p}:{n:02d} A. Routine shipment line {p * 100 + n}." for p in range(1, 120) for n in range(1, 26)
    )
    log += "\n120:01 A. Written notice of the warranty defect went out on March 3."
    body = {
        "model": MODEL,
        "max_tokens": 500,
        "system": "You review deposition transcripts. Cite page:line.",
        "messages": [
            {"role": "user", "content": "Search the transcript for notice."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "tu_1", "name": "search", "input": {"q": "notice"}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "tu_1", "content": log},
                    {"type": "text", "text": "When was written notice of the warranty defect given?"},
                ],
            },
        ],
    }
    result = assemble(body, policy=POLICY, model=MODEL, input_format="anthropic")
    last = result.request["messages"][-1]["content"]
    result_block = next(b for b in last if b.get("type") == "tool_result")
    assert result_block["tool_use_id"] == "tu_1" and "120:01 A. Written notice" in result_block["content"]
    assert len(result_block["content"]) < len(log) // 5
    assert any(b.get("text") == "When was written notice of the warranty defect given?" for b in last)
    assert result.report.to_dict()["current_turn"]["tokens"] <= 2000


def test_the_reducer_reads_statuses_in_capitals_only_and_bounds_an_entry() -> None:
    prose = Turn(
        index=1, question="q", answer="Therefore the delivery status was disputed. The status quo ante holds."
    )
    assert reduce_turn(prose)["status"] is None
    assert reduce_turn(Turn(index=2, question="q", answer="Status: DISPUTED."))["status"] == "DISPUTED"
    cites = " ".join(f"EX-{n} at {n}:01" for n in range(1, 1500))
    entry = reduce_turn(Turn(index=3, question="q", answer=f"Therefore {cites}."))
    assert len(entry["cited_exhibits"]) == 40 and entry["more_exhibits"] == 1459
    assert len(entry["citations"]) == 16 and len(entry["conclusions"][0]) <= 402
    assert _fake_count(render_ledger([entry])) < 1000


def test_a_turn_recorded_without_an_answer_is_compacted_not_lost(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"))
    base = {
        "items": [i for i in build_legal_context()["items"] if i.get("kind") not in ("history", "question")]
    }
    session = Session.create(store, "m", policy="legal-review", model=MODEL, base=base)
    big = ToolResult(name="search", content="Notice was discussed at length. " * 900)
    session.record(session.prepare("Q1: was notice given?", tool_results=[big], tags=["Notice"]), "")
    prepared = session.prepare("Q2: and the delivery?")
    session.record(prepared, "Therefore late (EX-06). Status: CONFIRMED.")
    third = session.prepare("Q3: anything else?")
    sent = _sent(third.assembly.request)
    ledger_turns = {e["turn"] for e in session.ledger} | {e["turn"] for e in third.new_entries}
    for turn in session.turns:
        whole = all(text in sent for _, text in turn.raw_texts())
        assert whole or turn.index in ledger_turns, turn.index


def test_bad_inputs_fail_with_their_cause(tmp_path: Path) -> None:
    scenario = tmp_path / "empty.json"
    scenario.write_text(json.dumps({"name": "x", "base": {"items": []}, "turns": []}))
    run = CliRunner().invoke(main, ["simulate", str(scenario)])
    assert run.exit_code == 2 and "turns" in run.output
    with pytest.raises(InvalidRequestError, match="not the report of an assembly"):
        assemble(_request(), policy=POLICY, model=MODEL, previous=_request())


@pytest.mark.parametrize(
    ("change", "kind"),
    [
        (lambda t: t + "\nClause 41. A new rule.", "appended text"),
        (lambda t: t.replace("\n", "\r\n", 3), "whitespace (line endings or spaces)"),
        (lambda t: t.replace("v2.1", "v2.2", 1), "value"),
        (lambda t: t + "\n", "whitespace (line endings or spaces)"),  # appended: said 'appended text'
        (lambda t: t.replace(" ", "", 1), "whitespace (line endings or spaces)"),  # a space taken out
    ],
)
def test_a_changed_prefix_says_what_kind_of_change_it_was(change: Any, kind: str) -> None:
    first = assemble(_request(), policy=POLICY, model=MODEL)
    body = _request()
    body["items"][0]["text"] = change(body["items"][0]["text"])
    with pytest.raises(PinnedPrefixChanged) as info:
        assemble(body, policy=POLICY, model=MODEL, previous=first.report.to_dict())
    assert info.value.volatile is not None and info.value.volatile[0] == kind
    assert info.value.before != info.value.after  # the two lines shown differ where the texts do
    if kind.startswith("whitespace"):
        assert info.value.volatile[1] and not info.value.volatile[1].strip()  # the blanks themselves


def test_a_changed_prefix_on_a_long_line_is_shown_where_it_differs() -> None:
    body = _request()
    text = body["items"][0]["text"]
    long_line = "Rule: " + "keep the record exact and cite it; " * 20 + "version 7."
    body["items"][0]["text"] = text + "\n" + long_line
    second = assemble(body, policy=POLICY, model=MODEL)
    changed = _request()
    changed["items"][0]["text"] = text + "\n" + long_line.replace("version 7.", "version 8.")
    with pytest.raises(PinnedPrefixChanged) as info:
        assemble(changed, policy=POLICY, model=MODEL, previous=second.report.to_dict())
    assert "version 7." in info.value.before and "version 8." in info.value.after
    assert info.value.before.startswith("…") and len(info.value.before) <= 161


def test_a_tier_must_be_a_name_or_an_index_not_a_boolean() -> None:
    body = _request()
    body["items"][1]["tier"] = True
    with pytest.raises(InvalidRequestError, match=r"items\[1\]\.tier"):
        assemble(body, policy=POLICY, model=MODEL)


def _png(width: int, height: int) -> str:
    header = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height)
    return base64.b64encode(header + b"\x08\x02\x00\x00\x00" + b"\x00" * 4).decode()


def test_images_in_the_current_turn_count_against_block_4() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _png(800, 600)}}
    log = "\n".join(f"1:{n:02d} A. Routine line {n}." for n in range(1, 26)) * 20
    body = {
        "model": MODEL,
        "max_tokens": 100,
        "system": "Review the record.",
        "messages": [
            {"role": "user", "content": "Look at the exhibits."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "fetch", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [image, {"type": "text", "text": log}],
                    },
                    {"type": "text", "text": "What do the exhibits show?"},
                ],
            },
        ],
    }
    report = assemble(body, policy=POLICY, model=MODEL, input_format="anthropic").report.to_dict()
    block4 = report["current_turn"]
    assert block4["tokens"] <= 2000 and block4["tokens"] > report["current_turn_tokens"]  # the image counts
    body["messages"][-1]["content"][0]["content"] = [image] * 20 + [{"type": "text", "text": log}]
    with pytest.raises(BudgetExceeded, match="images and other media") as info:
        assemble(body, policy=POLICY, model=MODEL, input_format="anthropic")
    assert abs(sum(info.value.parts.values()) - info.value.required_tokens) <= len(info.value.parts)


def test_a_session_checks_its_model_and_keeps_its_policy_file_wherever_it_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"))
    with pytest.raises(UnknownModelError):
        Session.create(store, "x", policy="legal-review", model="no-such-model-9", base={"items": []})
    (tmp_path / "p.toml").write_text(
        (Path(__file__).parents[1] / "src/ctxbudget/policies/legal-review.toml").read_text()
    )
    monkeypatch.chdir(tmp_path)
    Session.create(store, "y", policy="p.toml", model=MODEL, base={"items": []})
    monkeypatch.chdir(Path(__file__).parent)
    assert Session(store, "y").policy.name == "legal-review"


def test_a_long_session_reopened_every_turn_keeps_its_ledger_under_the_ceiling_and_in_the_cache(
    tmp_path: Path,
) -> None:
    store_path = str(tmp_path / "long.db")
    playbook = "".join(f"Rule {n}: cite testimony as page:line and exhibits by number. " for n in range(700))
    base = {"items": [{"id": "playbook", "tier": "pinned", "kind": "playbook", "text": playbook}]}
    Session.create(SQLiteStore(store_path), "long", policy="legal-review", model=MODEL, base=base)
    tags = ["Notice", "Warranty", "Delivery", "Inspection", "ChangeOrder", "Maintenance"]
    reads = []
    for n in range(1, 61):
        session = Session(SQLiteStore(store_path), "long")  # as `session add` does, every turn
        tag = tags[n % len(tags)]
        result = ToolResult(
            name="search",
            content=json.dumps(
                {"status": "FOUND", "matches": [f"{n}:0{k} A. EX-{n % 40:02d} noted." for k in range(1, 9)]}
            ),
        )
        prepared = session.prepare(f"Turn {n}: what about {tag}?", tool_results=[result], tags=[tag])
        report = prepared.assembly.report.to_dict()
        assert report["ledger"]["tokens"] <= 5000
        reads.append((report["cache"]["read_tokens"], bool(prepared.compaction)))
        answer = (
            f"Therefore {tag} is supported by EX-{n % 40:02d} at {n}:02-{n}:05. " * 3 + "Status: CONFIRMED."
        )
        session.record(prepared, answer)
    # a turn that did not compact reads at least what the turn before it read
    steady = [b for (a, _), (b, compacted) in itertools.pairwise(reads) if not compacted and b < a]
    assert len(steady) <= len(reads) // 10


def test_a_citation_that_names_a_witness_is_checked_in_that_witness_transcript() -> None:
    smith = "DEPOSITION OF ANNA SMITH\n47:12 A. I mailed the notice on March 3.\n47:13 A. By certified mail."
    jones = "DEPOSITION OF BEN JONES\n47:12 A. I never saw any notice.\n47:13 A. Nobody told me."
    body = _request()
    body["items"] = [i for i in body["items"] if not i["id"].startswith("page-")]
    at = max(n for n, i in enumerate(body["items"]) if i.get("tier") == "critical") + 1
    body["items"][at:at] = [
        {"id": "smith", "tier": "contextual", "kind": "document", "text": smith},
        {"id": "jones", "tier": "contextual", "kind": "document", "text": jones},
    ]

    def supersede(text: str, citation: str) -> Any:
        trial = json.loads(json.dumps(body))
        trial["items"].insert(at, _superseding(text=text, citation=citation))
        return assemble(trial, policy=POLICY, model=MODEL)

    assert supersede("47:13 A. Nobody told me.", "Jones Dep. at 47:13")
    with pytest.raises(SupersedeUnverified):
        supersede("47:12 A. I mailed the notice on March 3.", "Jones Dep. at 47:12")  # Smith's words
    assert supersede("47:12 A. I mailed the notice on March 3.", "Smith Dep. at 47:12")


def test_empty_items_make_no_empty_blocks() -> None:
    body = {
        "items": [
            {"id": "p", "tier": "pinned", "kind": "playbook", "text": ""},
            {"id": "l", "tier": "volatile", "kind": "ledger", "text": "  "},
            {"id": "q", "kind": "question", "text": "When?"},
        ]
    }
    request = assemble(body, policy=POLICY, model=MODEL).request
    assert "system" not in request and request["messages"][0]["content"][0]["text"] == "When?"


def _replayed(entries: list[dict[str, Any]], ceiling: int, measure: Any) -> list[dict[str, Any]]:
    """The fold as first written (the definition): every step re-folds the folded entries and
    re-measures every block."""

    def shown(folded: int, upto: int) -> list[dict[str, Any]]:
        return _folded_plainly(entries[:folded], cap) + [dict(e) for e in entries[folded:upto]]

    folded, cap = 0, 60
    for upto in range(1, len(entries) + 1):
        if measure(ledger_blocks(shown(folded, upto))) <= ceiling:
            continue
        while folded < upto and measure(ledger_blocks(shown(folded, upto))) > ceiling * 0.6:
            folded += 1
        while measure(ledger_blocks(shown(folded, upto))) > ceiling * 0.6 and cap > 8:
            cap = max(8, cap // 2)  # every entry folded and still over: fewer exhibits listed
    return shown(folded, len(entries))


def _folded_plainly(entries: list[dict[str, Any]], cap: int = 60) -> list[dict[str, Any]]:
    groups: dict[Any, list[dict[str, Any]]] = {}
    for entry in entries:
        groups.setdefault(entry.get("issue"), []).append(entry)
    out = []
    for issue, group in groups.items():
        exhibits = sorted(dict.fromkeys(x for e in group for x in e["cited_exhibits"]), key=exhibit_key)
        more = sum(int(e.get("more_exhibits") or 0) for e in group) + max(0, len(exhibits) - cap)
        recency: dict[str, None] = {}
        for x in (x for e in group for x in e["cited_exhibits"]):
            recency.pop(x, None)
            recency[x] = None
        recent = set(list(recency)[-cap:])  # the most recently cited, laid out in exhibit order
        exhibits = [x for x in exhibits if x in recent]
        statuses = [e["status"] for e in group if e.get("status")]
        conclusions = [c for e in group for c in e.get("conclusions", [])]
        entry = {"turns": [group[0]["turn"], group[-1]["turn"]], "issue": issue}
        entry |= {"cited_exhibits": exhibits, "more_exhibits": more or None}
        entry |= {"status": statuses[-1] if statuses else None, "conclusions": conclusions[-1:]}
        out.append({k: v for k, v in entry.items() if v is not None or k != "more_exhibits"})
    return out


class _ScaledCounting(_FakeCounting):
    @staticmethod
    def scale(raw_tokens: int) -> int:
        return math.ceil(raw_tokens * 1.3 - 1e-9)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["Notice", "Warranty", None]),
            st.lists(st.sampled_from(["EX-1", "EX-02", "EX-10", "EX-2", "A-7", "EX-10b"]), max_size=3),
            st.sampled_from([None, "", "CONFIRMED"]),
            st.integers(0, 2),
            st.booleans(),
        ),
        min_size=1,
        max_size=40,
    ),
    st.integers(200, 1500),
)
def test_the_fold_replayed_as_it_goes_is_the_fold_replayed_from_scratch(
    shape: list[tuple[Any, list[str], Any, int, bool]], ceiling: int
) -> None:
    # Replayed from scratch at every step, 400 compacted turns cost 0.7 s of each turn.
    entries = [
        {"turn": n, "issue": issue, "cited_exhibits": exhibits, "status": status}
        | ({"more_exhibits": more} if more else {})
        | {"conclusions": [f"Therefore {n}."] if concluded else []}
        for n, (issue, exhibits, status, more, concluded) in enumerate(shape, 1)
    ]
    assert fold_entries(entries) == _folded_plainly(entries)
    counting = _ScaledCounting()
    expected = _replayed(entries, ceiling, lambda blocks: counting.scale(sum(map(counting.raw, blocks))))
    try:
        assert fold_ledger(entries, ceiling, counting) == expected
    except BudgetExceeded:
        assert counting.scale(sum(map(counting.raw, ledger_blocks(expected)))) > ceiling


def test_the_ledger_sits_after_the_stable_tiers_before_one_left_uncached() -> None:
    """A policy that leaves its question-ranked background uncached: the ledger came after that
    block, and its breakpoint wrote the background (new every question) each turn, never read."""
    policy = dataclasses.replace(
        get_policy("legal-review"),
        tiers=tuple(
            dataclasses.replace(t, cached=False, compact_query="question") if t.name == "contextual" else t
            for t in get_policy("legal-review").tiers
        ),
    )
    ledger = {"id": "ledger-1", "tier": "volatile", "kind": "ledger", "text": '{"turn":1,"issue":"Notice"}'}

    def asked(question: str) -> dict[str, Any]:
        body = build_legal_context()
        items = [i for i in body["items"] if i.get("kind") != "question"]
        return {"items": [*items, ledger, {"id": "q", "kind": "question", "text": question}]}

    first = assemble(asked("When was notice given?"), policy=policy, model="claude-sonnet-4-5")
    second = assemble(
        asked("Did the inspection find a breach?"),
        policy=policy,
        model="claude-sonnet-4-5",
        previous=first.report,
    )
    points = {b.tier: b.status for b in second.report.breakpoints}
    assert "contextual" not in points and points["pinned"] == points["ledger"] == "read"
    texts = [b["text"] for b in second.request["system"]]
    assert texts.index(next(t for t in texts if t.startswith('{"turn"'))) < len(texts) - 1  # before it


def test_with_no_tier_cached_the_ledger_follows_the_system_tiers() -> None:
    policy = get_policy("legal-review")
    policy = dataclasses.replace(
        policy, tiers=tuple(dataclasses.replace(t, cached=False) for t in policy.tiers)
    )
    body = build_legal_context()
    items = [i for i in body["items"] if i.get("kind") != "question"]
    ledger = {"id": "ledger-1", "tier": "volatile", "kind": "ledger", "text": '{"turn":1,"issue":"Notice"}'}
    asked = {"items": [*items, ledger, {"id": "q", "kind": "question", "text": "When was notice given?"}]}
    texts = [b["text"] for b in assemble(asked, policy=policy, model="claude-sonnet-4-5").request["system"]]
    assert not texts[0].startswith('{"turn"') and texts[-1].startswith('{"turn"')  # the playbook first
