from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbudget import InvalidRequestError, fit, render_question

GOLDEN = Path(__file__).parent / "golden"
CRLF = "\r\n"


def test_rendering_matches_the_seed_engine_by_hand() -> None:
    body = {
        "role": "You are a paralegal.",
        "questions": [{"text": "What notice was given?"}],
        "documents": [{"page_content": "  Letter of March 3.  ", "score": 0.9}],
        "history": [{"role": "user", "content": "hi"}],
        "instructions": [{"subtitle": " Cite ", "instructions": "Use page:line.\n\n  Be brief. "}],
        "examples": [{"given": " Q ", "result": " A "}],
        "context": [" ctx one "],
        "goals": [" win "],
    }
    expected = CRLF.join(
        [
            "You are a paralegal." + CRLF,
            CRLF.join(
                [
                    "### System Instructions:",
                    "    1) **Cite**:",
                    "        Use page:line.",
                    "        Be brief.",
                    "",
                ]
            ),
            CRLF.join(
                [
                    "### Examples:",
                    "    Example 1",
                    "        **Given**: Q",
                    "        **Expected output**: A",
                    "",
                ]
            ),
            CRLF.join(["### Conversation History:", "    user: hi", ""]),
            CRLF.join(["### Context:", "    1) ctx one", "", ""]),
            CRLF.join(["### Documents:", "    Document 1) Content: Letter of March 3.", ""]),
            CRLF.join(["### Ultimate Goal:", "    1) win", ""]),
            CRLF.join(["### Current Task:", "    What notice was given?", ""]),
            "",
        ]
    )
    assert render_question(body) == expected
    assert expected.endswith(CRLF)


def test_expect_json_puts_the_json_instruction_first_and_fences_examples() -> None:
    text = render_question(
        {
            "expectJson": True,
            "instructions": [{"subtitle": "Mine", "instructions": "x"}],
            "examples": [{"given": "g", "result": "{}"}],
            "questions": [{"text": "q"}],
        }
    )
    assert text.index("1) **JSON Response Format**") < text.index("2) **Mine**")
    assert "**Expected output**: ```json\r\n{}\r\n```" in text


def test_empty_sections_are_omitted() -> None:
    assert render_question({"questions": [{"text": "only"}]}) == "### Current Task:\r\n    only\r\n\r\n"


def test_golden_full_request() -> None:
    body = json.loads((GOLDEN / "question_full.json").read_text("utf-8"))
    assert render_question(body).encode("utf-8") == (GOLDEN / "question_full.txt").read_bytes()


def test_the_seeds_optional_fields_given_as_null_read_as_empty() -> None:
    # The seed engine's Question declares them optional and its getPrompt() renders None as empty;
    # a pipeline that serialises the model sends them as null.
    import ctxbudget

    fields = ("role", "expectJson", "instructions", "history", "examples", "context", "goals", "documents")
    plain = {"questions": [{"text": "When was notice given?"}]}
    nulled = {**dict.fromkeys(fields), **plain}
    assert ctxbudget.render_question(nulled) == ctxbudget.render_question(plain)
    fitted = ctxbudget.fit(nulled, model="gpt-4o", max_context_tokens=8000)
    assert fitted.request == nulled and fitted.report.passed_through
    cut = ctxbudget.fit({**nulled, "role": "Be exact. " * 4000}, model="gpt-4o", max_context_tokens=2000)
    assert cut.request["documents"] is None and cut.report.tokens_after <= 2000


def test_render_question_checks_the_body_as_fit_does() -> None:
    with pytest.raises(InvalidRequestError, match="`messages` is not read by the question format"):
        render_question({"messages": [{"role": "user", "content": "What is due?"}]})  # was ""
    with pytest.raises(InvalidRequestError, match=r"\$\.questions\[0\]\.text: .*lone surrogate"):
        render_question({"questions": [{"text": "a\ud800"}]})  # text no provider can be sent


@pytest.mark.parametrize(("field", "value"), [("score", True), ("score", "0.95"), ("expectJson", "yes")])
def test_a_score_or_a_flag_is_taken_as_json_writes_it(field: str, value: object) -> None:
    """A score of true or "0.95" was read as a number (and ranked its document first), an
    expectJson of "yes" as true."""
    document: dict[str, object] = {"page_content": "a"}
    body: dict[str, object] = {"questions": [{"text": "q"}], "documents": [document]}
    (document if field == "score" else body)[field] = value
    with pytest.raises(InvalidRequestError, match=field):
        fit(body, model="gpt-4o")


def test_a_short_question_after_a_long_pasted_one_is_kept_whole() -> None:
    pasted = "The supplier shipped lot 44 late and the buyer wrote about it. " * 300
    body = {
        "questions": [
            {"text": "Read this correspondence: " + pasted},
            {"text": "Who signed the notice letter?"},
        ],
        "documents": [
            {"page_content": "Exhibit EX-17 is the notice letter of March 9, signed by Ms. Okafor."}
        ],
    }
    result = fit(body, model="gpt-4o", max_context_tokens=4000)
    assert result.request["questions"][1]["text"] == "Who signed the notice letter?"  # was "Who signed"
    first = result.report.items[0]
    assert first.action == "truncated" and result.report.tokens_after <= 4000
