from __future__ import annotations

import json

import pytest

from ctxbudget import InvalidRequestError
from ctxbudget.session import (
    LEDGER_SCHEMA,
    LedgerRules,
    ToolResult,
    Turn,
    reduce_turn,
    render_ledger,
    validate_entry,
)

ANSWER = (
    "Sure, happy to help. The witness discussed the press at 47:12-48:3 and 52:4. "
    "Exhibits EX-12 and EX-04 were shown. Therefore the record shows notice was given on March 3. "
    "Status: CONFIRMED. Let me know if you need anything else."
)


@pytest.mark.parametrize(
    ("turn", "expected"),
    [
        (
            Turn(
                index=2,
                question="Notice?",
                answer=ANSWER,
                tags=("BreachOfWarranty",),
                tool_results=(
                    ToolResult(name="search", content='{"status": "found", "matches": ["12:01 Q. EX-07"]}'),
                ),
            ),
            {
                "turn": 2,
                "issue": "BreachOfWarranty",
                "cited_exhibits": ["EX-04", "EX-07", "EX-12"],
                # the answer's citations; the tool log's line numbers are pruned with it
                "citations": ["47:12-48:3", "52:4"],
                "status": "CONFIRMED",
                "tools": ["search FOUND"],
                # a bare status line is the status field, not a conclusion
                "conclusions": ["Therefore the record shows notice was given on March 3."],
            },
        ),
        (
            Turn(
                index=3,
                question="q",
                answer="No idea yet.",
                tool_results=(ToolResult(name="lookup", content="result text, status: PENDING review"),),
            ),
            {
                "turn": 3,
                "issue": None,
                "cited_exhibits": [],
                "citations": [],
                "status": "PENDING",
                "tools": ["lookup PENDING"],
                "conclusions": [],
            },
        ),
        (
            Turn(
                index=4,
                question="q",
                answer="ok",
                tool_results=(ToolResult(name="t", content="x", status="denied"),),
            ),
            {"status": "DENIED", "tools": ["t DENIED"]},
        ),
    ],
)
def test_reducer_extracts_by_rule(turn: Turn, expected: dict[str, object]) -> None:
    entry = reduce_turn(turn)
    for key, value in expected.items():
        assert entry[key] == value, key


def test_conclusions_are_verbatim_sentences_and_filler_is_pruned() -> None:
    entry = reduce_turn(Turn(index=1, question="q", answer=ANSWER))
    for sentence in entry["conclusions"]:
        assert sentence in ANSWER
    assert not any("happy to help" in s or "Let me know" in s for s in entry["conclusions"])


def test_exhibits_as_briefs_write_them_and_record_abbreviations_are_kept() -> None:
    """The ledger dropped "Exhibit 11", "Ex. 4" and PX-101, and cut the conclusion at "Tr." (a
    sentence end): the finding after it was lost from every later prompt."""
    answer = (
        "Therefore the testimony at Tr. 47:12-48:3 is dispositive: the buyer had notice "
        "(Exhibit 11; Ex. 4; Exh. 7b; PX-101; DX-12; Exhibit B; Exhibit EX-33). Status: CONFIRMED."
    )
    entry = reduce_turn(Turn(index=1, question="q", answer=answer))
    assert entry["cited_exhibits"] == ["DX-12", "EX-4", "EX-7B", "EX-11", "EX-33", "EX-B", "PX-101"]
    assert entry["conclusions"] == [answer.removesuffix(" Status: CONFIRMED.")]
    written = "PLAINTIFF'S EXHIBIT NO. 12, EXHIBIT TO DECLARATION, Exhibit 4.1, Exhibit A-1, Exhibit A."
    assert reduce_turn(Turn(index=1, question=written, answer=""))["cited_exhibits"] == [
        "EX-4.1",
        "EX-12",
        "EX-A",
        "EX-A-1",
    ]  # no "EX-NO" or "EX-TO", and a sub-exhibit whole (a review)
    said = "Smith Dep. 12:3 and Jones Decl. 4 show it. Therefore notice was given."
    assert reduce_turn(Turn(index=1, question="q", answer=said))["conclusions"] == [
        "Therefore notice was given."
    ]


def test_patterns_are_configurable() -> None:
    rules = LedgerRules(exhibit_pattern=r"\bPX\d+\b")
    entry = reduce_turn(Turn(index=1, question="See PX7 and EX-1", answer=""), rules)
    assert entry["cited_exhibits"] == ["PX7"]


def test_entries_validate_against_the_schema() -> None:
    assert LEDGER_SCHEMA["title"] == "LedgerEntry"
    assert set(LEDGER_SCHEMA["required"]) >= {"turn", "cited_exhibits", "status", "conclusions"}
    with pytest.raises(InvalidRequestError, match="cited_exhibits"):
        validate_entry(
            {
                "turn": 1,
                "issue": None,
                "issues": [],
                "cited_exhibits": "EX-1",
                "citations": [],
                "status": None,
                "tools": [],
                "conclusions": [],
            }
        )


def test_reducer_is_deterministic_and_the_rendering_append_only() -> None:
    turns = [Turn(index=i, question=f"q{i}", answer=ANSWER) for i in range(1, 4)]
    first = [reduce_turn(t) for t in turns]
    assert first == [reduce_turn(t) for t in turns]
    assert json.dumps(first) == json.dumps([reduce_turn(t) for t in turns])
    assert render_ledger(first).startswith(render_ledger(first[:2]))


def test_over_the_exhibit_cap_the_answers_exhibits_are_kept_before_those_a_tool_log_lists() -> None:
    listing = " ".join(f"EX-{n:02d}" for n in range(1, 61))
    turn = Turn(
        index=1,
        question="Which exhibit shows the notice? Compare EX-90.",
        answer="The notice is EX-117.",
        tool_results=(ToolResult(name="search", content=f"matches: {listing}"),),
    )
    entry = reduce_turn(turn)
    kept = entry["cited_exhibits"]
    assert len(kept) == 40 and entry["more_exhibits"] == 22
    assert {"EX-117", "EX-90"} <= set(kept)  # the answer's and the question's, not pushed out
    assert kept == sorted(kept, key=lambda e: int(e.split("-")[1]))  # laid out in exhibit order


def test_an_entry_stays_bounded_whatever_its_tags_and_tool_names() -> None:
    """A 30,000-character --tag (or tool name) went into the entry whole: every entry folded with
    it was over the ledger's ceiling, and the session failed every turn after its compaction."""
    huge = "Notice" * 5_000
    turn = Turn(
        index=1,
        question="Was notice given?",
        answer="Therefore yes (EX-04).",
        tool_results=(ToolResult(name="lookup" * 5_000, content="status: CONFIRMED"),),
        tags=(huge, *(f"Issue{n}" for n in range(20))),
    )
    entry = reduce_turn(turn)
    assert len(entry["issue"]) <= 80 and entry["issue"].startswith("Notice") and "… #" in entry["issue"]
    assert len(entry["issues"]) == 8 and entry["issues"][1:] == [f"Issue{n}" for n in range(7)]
    assert all(len(tool) <= 80 + len(" CONFIRMED") for tool in entry["tools"])
    assert entry["tools"][0].endswith(" CONFIRMED")  # the status is kept after a long name
    assert len(json.dumps(entry)) < 2_000
    # two long tags with one start stay two issues (folding groups entries by their issue)
    start = "Whether the supplier breached the notice provision of section 4.2 of the master agreement by "
    late, bad = (
        reduce_turn(Turn(index=n, question="?", answer="Yes.", tags=(start + end,)))["issue"]
        for n, end in ((2, "late delivery"), (3, "defective goods"))
    )
    assert late != bad and late.startswith(start[:60]) and bad.startswith(start[:60])


@pytest.mark.parametrize(
    "answer",
    [
        "Therefore there is written notice on March 3 (EX-04).",  # "there is" holds "here is"
        "The record shows that Levi can be charged with notice (EX-04).",  # "Levi can" holds "i can "
    ],
)
def test_a_conclusion_is_not_filler_for_a_phrase_inside_its_words(answer: str) -> None:
    entry = reduce_turn(Turn(index=1, question="Was notice given?", answer=answer, tags=("Notice",)))
    assert entry["conclusions"] == [answer]


def test_filler_and_markers_are_whole_words() -> None:
    filler = "Here is what the record shows (EX-04)."
    assert reduce_turn(Turn(index=1, question="Q?", answer=filler))["conclusions"] == []
    # "enthusiastic" holds "thus", which is a marker only as a word
    plain = "The witness was enthusiastic about the lot (EX-04)."
    assert reduce_turn(Turn(index=1, question="Q?", answer=plain))["conclusions"] == []


@pytest.mark.parametrize("written", ["47:12-48:3", "47:12\u201348:3", "47:12 - 48:3", "47:12 \u2013 48:3"])
def test_a_range_with_an_en_dash_or_spaces_is_one_citation(written: str) -> None:
    """An en-dash range was two citations of unrelated single lines (47:12 and 48:3)."""
    answer = f"Therefore the record shows notice at {written} (EX-04)."
    assert reduce_turn(Turn(index=1, question="Q?", answer=answer))["citations"] == ["47:12-48:3"]


def test_a_turn_on_two_issues_folds_into_both() -> None:
    """Folding kept a two-issue turn under its first issue only: the second, with its
    conclusion, left the prompt."""
    from ctxbudget.session.folding import fold_entries

    both = reduce_turn(
        Turn(
            index=1,
            question="q",
            answer="Therefore the record shows breach (EX-04).",
            tags=("Notice", "Breach"),
        )
    )
    notice = reduce_turn(
        Turn(index=2, question="q", answer="Therefore notice was given (EX-05).", tags=("Notice",))
    )
    folded = {e["issue"]: e for e in fold_entries([both, notice])}
    assert folded["Notice"]["turns"] == [1, 2] and folded["Notice"]["cited_exhibits"] == ["EX-04", "EX-05"]
    assert folded["Breach"]["turns"] == [1, 1]
    assert folded["Breach"]["conclusions"] == ["Therefore the record shows breach (EX-04)."]


def test_markers_keep_their_own_endings_and_rules_may_be_lists() -> None:
    """Whole-word markers lost "findings" and "conclusions"; a citation's range took a bullet on
    the next line ("47:12\\n- 3 exhibits" read 47:12-3); rules given as lists raised TypeError."""
    for answer in ("Our findings: the lease was terminated (EX-04).", "The conclusions are clear (EX-04)."):
        assert reduce_turn(Turn(index=1, question="Q?", answer=answer))["conclusions"] == [answer]
    bullet = "Therefore Smith admitted notice at 47:12\n- 3 exhibits (EX-1) corroborate it."
    assert reduce_turn(Turn(index=1, question="Q?", answer=bullet))["citations"] == ["47:12"]
    rules = LedgerRules(conclusion_markers=["therefore", "we find"])  # type: ignore[arg-type]
    answer = "We find the lease was breached."
    assert reduce_turn(Turn(index=1, question="Q?", answer=answer), rules)["conclusions"] == [answer]


@pytest.mark.parametrize(
    ("answer", "exhibits", "status"),
    [
        (
            "Therefore notice was given in EX-4.1 and EX-12A, not EX-4. Status: NOT CONFIRMED.",
            ["EX-4", "EX-4.1", "EX-12A"],  # EX-4.1 was read as EX-4, EX-12A not at all
            "NOT CONFIRMED",  # was NOT
        ),
        (
            "Therefore Ex-05, EX-05 and EX-06 show notice. Status: PARTIALLY CONFIRMED.",
            ["EX-05", "EX-06"],  # one exhibit however it is cased
            "PARTIALLY CONFIRMED",
        ),
        ("Thus EX-12 shows it. Status: CONFIRMED BY EX-12.", ["EX-12"], "CONFIRMED"),
        ("Thus EX-12 shows it. Status: CONFIRMED NDA signed.", ["EX-12"], "CONFIRMED"),  # not the acronym
        ("Thus EX-12 shows it. Status: UNDER REVIEW.", ["EX-12"], "UNDER REVIEW"),
    ],
)
def test_exhibits_and_statuses_are_read_whole(answer: str, exhibits: list[str], status: str) -> None:
    entry = reduce_turn(Turn(index=1, question="Was notice given?", answer=answer, tags=("Notice",)))
    assert entry["cited_exhibits"] == exhibits
    assert entry["status"] == status


def test_a_folded_issue_keeps_its_most_recently_cited_exhibits() -> None:
    """Past 60 exhibits a folded entry kept the lowest-numbered: a long issue's newest exhibits
    (EX-61 to EX-100) left the prompt while EX-1 stayed. Now the 60 cited last, in exhibit order,
    an exhibit cited again counting as recent; the rest counted."""
    from ctxbudget.session.folding import fold_entries

    entries = [
        {"turn": n, "issue": "Notice", "cited_exhibits": [f"EX-{n}"], "status": None, "conclusions": []}
        for n in range(1, 101)
    ]
    entries.append(
        {"turn": 101, "issue": "Notice", "cited_exhibits": ["EX-3"], "status": None, "conclusions": []}
    )
    (folded,) = fold_entries(entries)
    assert folded["cited_exhibits"] == ["EX-3", *(f"EX-{n}" for n in range(42, 101))]
    assert folded["more_exhibits"] == 40 and folded["turns"] == [1, 101]


@pytest.mark.parametrize(
    "content",
    [
        '{"result": {"status": "CONFIRMED"}}',  # json.dumps' own spacing: the pattern missed it
        '{"result":{"status":"CONFIRMED"}}',
        '[{"hits": 2, "status": "CONFIRMED"}]',
        '{"status": 200, "body": {"status": "CONFIRMED"}}',  # not a word: the nested one
        # a nested record's own status ("filed") is not the tool's; nor a phrase
        '{"hits": [{"doc": "EX-4", "status": "filed"}], "result": {"status": "CONFIRMED"}}',
        '{"request": {"status": "ok"}, "finding": "status: CONFIRMED"}',
    ],
)
def test_a_tool_status_is_read_from_json_at_any_depth_and_spacing(content: str) -> None:
    entry = reduce_turn(
        Turn(index=1, question="q", tool_results=(ToolResult(name="search", content=content),))
    )
    assert entry["tools"] == ["search CONFIRMED"] and entry["status"] == "CONFIRMED"


def test_a_nested_record_status_or_phrase_is_not_a_tools_status() -> None:
    for content in (
        '[{"doc": "EX-1", "status": "active"}]',
        '{"data": [{"status": "Superseded, see notes"}]}',
    ):
        entry = reduce_turn(
            Turn(index=1, question="q", tool_results=(ToolResult(name="s", content=content),))
        )
        assert entry["tools"] == ["s"] and entry["status"] is None


def test_tags_are_told_apart_before_they_are_capped() -> None:
    entry = reduce_turn(Turn(index=1, question="q", tags=("Notice",) * 8 + ("Delay",)))
    assert entry["issue"] == "Notice" and entry["issues"] == ["Notice", "Delay"]


def test_a_long_conclusion_is_capped_at_its_limit_with_its_ellipsis() -> None:
    for filler in ("y" * 1_000, "word " * 200):
        conclusions = reduce_turn(Turn(index=1, question="q", answer=f"Therefore {filler}."))["conclusions"]
        assert len(conclusions[0]) <= LedgerRules().max_conclusion_chars and conclusions[0].endswith(" …")


def test_a_heading_alone_is_no_conclusion() -> None:
    answer = "Findings:\n- EX-1 shows notice\n- EX-2 shows delay\nTherefore notice was late"
    conclusions = reduce_turn(Turn(index=1, question="q", answer=answer))["conclusions"]
    assert conclusions == ["- EX-1 shows notice", "- EX-2 shows delay", "Therefore notice was late"]
    assert reduce_turn(Turn(index=1, question="q", answer="Conclusion: notice was late."))["conclusions"]
    marked = answer.replace("Findings:", "**Findings:**")
    assert reduce_turn(Turn(index=1, question="q", answer=marked))["conclusions"] == conclusions
    headed = reduce_turn(Turn(index=1, question="q", answer="Conclusion:\nNotice was late (EX-4)."))
    assert headed["conclusions"] == ["Notice was late (EX-4)."]  # the sentence the heading heads
    status = reduce_turn(Turn(index=1, question="q", answer="Status:\nCONFIRMED"))
    assert status["status"] == "CONFIRMED" and status["conclusions"] == []  # the status field's line
