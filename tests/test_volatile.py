"""INV-CTX-01's volatile detector: written forms of dates, times, ids; no false alarms on legal text."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import volatile
from ctxbudget.assembly._policy import get_policy
from ctxbudget.simulation.deposition import build_legal_context
from ctxbudget.volatile import (
    _READ_AS_WRITTEN,
    _SCANNERS,
    _STARTS,
    PATTERNS,
    VolatileMatch,
    VolatileRules,
    _candidates,
    _spaced,
    find_volatile,
)

VOLATILE = [
    # one for each word an id, case, time or now-word pattern opens with (found with str.find)
    "x-trace-id: 88af1",
    "req_id=4711",
    "sessid 8812",
    "span id 9",
    "run-id 4711",
    "Correlation ID abc123",
    "conversation_id: c-77",
    "message id 5",
    "msgid 12",
    "case no. 2024-117",
    "Docket 24-117",
    "Matter # 2024-117",
    "claim id 88231",
    "Civil Action No. 1:24-cv-00117",
    "generated: 10:05",
    "Updated 10:05",
    "last updated: September 16",
    "as of 10:05",
    "local_time = 10:05",
    "today's date is September 16",
    "SEPTEMBER 16, 2026",  # capitals, as in court captions and forms
    "filed SEP 16, 2026",
    "Date: 16-Sep-2026",
    "16SEP2026",
    "2026-Sep-16",
    "Generated 2026-09-16T10:32:11Z for this request.",
    "as of 2026-09-16 10:32",
    "Today is 2026-09-16.",
    "Date: 09/16/2026",
    "Date: 9/16/26",
    "Datum: 16.09.2026",
    "le 16/09/2026",
    "16 September 2026",
    "September 16, 2026",
    "Sept. 16, 2026",
    "Sep 16 2026",
    "Tue Sep 16 2026",
    "Tuesday, September 16, 2026",
    "Tue, 16 Sep 2026 10:32:11 GMT",
    "the 16th of September 2026",
    "It is 10:32 now.",
    "Meeting at 9:05 today",
    # a time word's colon or "is" before minutes that could be a transcript line (28 or less)
    "Current time: 10:05",
    "The time is 10:05",
    "Local time: 09:12",
    "Request time: 10:05",
    "Time: 10:05",  # a header opening a line, as "Date:" is
    "Current date and time: 10:05",
    "notes\n- Time: 10:05",
    "current-time: 10:05",
    "10:32 a.m.",
    "3:15 PM",
    "14:05 UTC",
    "10:32:11",
    "Build stamp 10:32:11Z.",  # a Z after the seconds passed INV-CTX-01
    "23:59",
    "Case ID: CV-2026-0412",
    "Docket No. 1:24-cv-01234",
    "case number 2026-CV-0412",
    "Matter #A-2291",
    "CV-2026-0412",
    "1:24-cv-01234",
    "snapshot 20260916103211",
    "20260916T103211",
    "X-Amz-Date: 20260916T103211Z",  # with its Z, the word start after it was not there
    "snapshot 20260916T103211+0200",
    "nonce 9f86d081884c7d659a2feaa0c55ad015",
    "etag a3f5c9e2b7d14f6088aa",
    "X-Request-ID abc123",
    "request_id=req_8f2k1",
    "trace-id: 4bf92f3577b34da6",
    "session id: s-20931",
    "Correlation-ID 77ab-991",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "unix 1758018731",
    "ts=1758018731000",
    "msg_id: m_9912",
    "sent @ 10:12",
    "this 16th day of September, 2026",
    "16-09-2026",
    "09-16-2026",
    "2026/09/16",
    "16/9/26",
    "2026年9月16日",
    # in a sentence, with no space before it (each passed INV-CTX-01), full-width, Korean
    "今日は2026年9月16日です。",
    "今天是2026年9月16日。",
    "本日は２０２６年９月１６日です。",
    "오늘은 2026년 9월 16일입니다.",
    # glued to an unspaced script's letters, as those write a value in a sentence (each passed)
    "今日は2026-09-16です。",
    "会议于2026-09-16举行",
    "時刻は10:32:11です",
    "ID是550e8400-e29b-41d4-a716-446655440000的请求",
    "时间戳1726480331秒",
    "생성 시각2026-09-16T10:32:11Z입니다",
    # in full-width forms, and in the digits of other scripts (each passed)
    "今日は２０２６－０９－１６です",
    "Date：Sep 16",
    "Current time：3pm",
    "session_id：abc123def456",
    "التاريخ: ١٦/٠٩/٢٠٢٦",
    "दिनांक १६/०९/२०२६",
    # month names in German, French and Spanish (each passed INV-CTX-01)
    "Heute ist der 16. September 2026.",
    "Stand: 3. Dezember 2026",
    "Nous sommes le 1er décembre 2026.",
    "Hoy es 3 de diciembre de 2026.",
    "Datum: 3. März 2026",
    "Civil Action No. 24-cv-1234",
    "Docket 24-1234",
    "No. 24-cv-01234-ABC",
    "Tuesday, September 16",
    # lower-case month names, fractional seconds with Z
    "march 6, 2026",
    "6 march 2026",
    "notice sent on september 16th, 2026 by mail",
    "the 16th of september 2026",
    "sept. 16, 2026",
    "Generated 2026-09-16T10:32:11.123Z for this request.",
    # dotted year first, month name first with dashes, a word processor's dashes, an ISO time
    # alone (each passed INV-CTX-01)
    "Effective 2026.09.16 for this matter.",
    "Updated Sep-16-2026.",
    "updated sep-16-2026",
    "Updated 2026\u201309\u201316.",
    "Updated 2026\u201109\u201116.",
    "Build stamp T10:32:11Z.",
    # a date without its year, an hour with its a.m. or p.m., after a word saying it is now's (a
    # daily "Today is ..." line passed session new and failed a later day's turn instead)
    "Today is September 16.",
    "Today: 16 September",
    "Current date: the 16th of September",
    "TODAY: Sep 16",
    "Date: Sep 16",
    "Today\u2019s date: September 16",
    "As of September 16",
    "Current time: 3pm",
    "The time is 3 P.M.",
    # a key and its value quoted, as a JSON or YAML template writes them (each passed INV-CTX-01)
    '{"request_id": "a8f3"}',
    '"sessionId": "xyz9"',
    "trace_id: 'abc7'",
    '{"current_time": "10:05"}',
    "current_time: 10:05",
    'Current time: "10:05"',
    '"updated": "10:05"',
    '{"today": "December 3"}',
    'current_date: "Dec 3"',
]

LEGITIMATE = [
    "Hearing time: 10:00",  # a bare "time" before a colon is as often a fixed one (a review)
    "Deposition start time: 9:15",
    "Turnaround time is 2:00 hours",
    "Cite testimony as page:line, for example 47:12-48:3.",
    "See 47:12.",
    "at 12:05-12:20 the witness said",
    "Tr. 10:32",
    "page 10:32",
    "Dep. 23:45",
    "See 5:01-5:06 and 95:13.",
    "Exhibit EX-04 and EX-12",
    "Under Fed. R. Civ. P. 32(a), a deposition may be used",
    "Fed. R. Evid. 801(d)(2)",
    "U.C.C. 2-316",
    "Sec. 7.2 of the agreement",
    "28 U.S.C. § 1332",
    "42 U.S.C. 1983",
    "Rule 12(b)(6)",
    "Clause 40. Standard definition and review rule.",
    "Cal. Civ. Code § 1542",
    "within 30 days",
    "Exhibit 12-A",
    "Bates ACME-000123",
    "ISO 9001",
    "version 2.1",
    "LegalReview Assistant v2.1",
    "lot 44",
    "the March 2021 delivery schedule",
    "the change order signed in June",
    "section 2-207",
    "17 C.F.R. § 240.10b-5",
    "paragraph 3.1.4",
    "45 days after delivery",
    "Model K press",
    "line 3",
    "Article 9",
    "$1,250,000.00",
    "10:1 ratio",
    "Form 10-K",
    "1:1 mapping",
    "Matthew 5:9",
    "the 2019 agreement",
    "EX-40",
    "Restatement (Second) of Contracts § 90",
    "Q. and A. lines",
    "objection to form",
    "SHA-256",
    "Tr. at 9:14",
    "Smith Dep. at 12:15",
    "id. at 12:15",
    "the case no 30(b)(6) designee",
    "File No. 333-12345",
    "Bates DEF 1600000123",
    "Section 10.09.2020",
    "Section 2026.09.16",
    "release 2024.1.3 of the tool",
    "T10 of the schedule",
    "May the parties agree to vary it?",
    "Section 3. May the parties agree",
    "within 10 months of notice",
    "an Amendment 3 PMS form",
    # a date without its year or an hour alone is as often a fixed one, or no date at all
    "Tax returns are due April 15.",
    "The fiscal year ends June 30.",
    "the Dec 31 deadline applies each year",
    "Clause 4 May not be assigned.",
    "Schedule 2 MAY apply",
    "August 12 members attended the meeting.",
    "Item 3 PM review is scheduled.",
    "Office hours are 9am to 5pm daily.",
    "Meetings are held at 2 p.m. on Tuesdays.",
    "Sept 16th",
    "Start time: 9am",
    "Due date: April 15",
    "Effective date June 1 of each year",
    "Closing time 5pm",
    "Time 10 AM slot",
    "as of today, April 15 is the deadline",
    "Starting today, May 1 deliveries begin",
    "scale 1:50",
    "a 1:50 scale model",  # the word after it too (a time)
    "mix at a 1:30 ratio",
    "1:40-scale drawings",
    "the plan is drawn at 1:50 scale",  # "at" before it too (it read as "at 1:50")
    "printed at 1:20 Scale",
    "mixed at 1:30 ratio",
    "Rule 26(a)(1)",
    "§ 2-207",
    "in march the parties met",
    "the march 2026 delivery schedule",
    "the buyer may 30 days after notice give",
    "the seller may, by march 2026, deliver",
    "Exhibit 12",
    "2026-0412",
    "No. 2026-0412",
    "max_context_tokens",
    "section_4_2_a",
    "exhibit_2026_0412_final",
    "doc_12345678901234567",
    "the defined term Effective_Date",
    # stable ids a playbook may name (an API's generated ids are not told apart from them)
    "price_1MoBy5LkdIwHu7ixZhnattbh",
    "asst_abc123DEF456ghi789",
    "lookup_customerAccount2Details",
    "第12026年",
    "平成3年の改正",
    "第3条规定",
    "第３条",
    "価格は１，５００円です",
    "المادة ٣",
    "価格は1,500円です",
    "见第47:12页",  # page:line, as in English
    # an English word glued to a run of CJK letters: the run is no whitespace for the pattern's
    # \s* to cross to a digit further on (each was flagged as an id, a case number or a time)
    "请在日志中记录session id的前8位",
    "每个请求的request id都不同第2步",
    "案件case number在第1234页",
    "会议安排at之后10:15",
    "Art. 3 Abs. 2 DSGVO",
    "im März 2026 geschlossen",
    "en diciembre de 2026",
    # a key quoted with no id, time or date after it
    '{"request_id": {"type": "string"}}',
    '"session_id": "the caller\'s session id"',
    '{"time": "10:05"}',
    '"current_time": "the hour now, as HH:MM"',
]


@pytest.mark.parametrize("text", VOLATILE)
def test_volatile_values_are_found(text: str) -> None:
    assert find_volatile(text) is not None, text


@pytest.mark.parametrize("text", LEGITIMATE)
def test_legal_text_is_not_volatile(text: str) -> None:
    assert find_volatile(text) is None, (text, find_volatile(text))


def test_the_bundled_playbook_has_no_false_positive() -> None:
    pinned = [i["text"] for i in build_legal_context()["items"] if i.get("tier") == "pinned"]
    assert pinned and all(find_volatile(text) is None for text in pinned)


def test_policy_patterns_and_allow_list() -> None:
    rules = VolatileRules(patterns=(("ticket", r"\bTKT-\d+\b"),), allow=(r"Effective 2026-01-01",))
    assert find_volatile("see TKT-991", rules) is not None
    assert find_volatile("Effective 2026-01-01 the rule applies.", rules) is None
    assert find_volatile("Effective 2026-01-01 and updated 2026-09-16", rules) is not None
    assert get_policy("legal-review").volatile == VolatileRules()
    times = VolatileRules(allow=(r"9:00 a\.m\.",))  # a match overlapping an allowed span is allowed
    assert find_volatile("Hearings begin at 9:00 a.m. sharp.", times) is None
    assert find_volatile("Hearings begin at 9:00 a.m., updated 10:45 p.m.", times) is not None


def _by_finditer(text: str, rules: VolatileRules) -> VolatileMatch | None:
    """find_volatile as first written: every pattern's finditer over the whole text."""
    allowed = [m.span() for regex in rules.allow for m in re.finditer(regex, text)]
    found = None
    # the built-in patterns read an unspaced script's letters as spaces (but the one written in them)
    read = [text if name in _READ_AS_WRITTEN else _spaced(text) for name in _STARTS]
    own = [(k, re.compile(r)) for k, r in rules.patterns]
    for (kind, pattern), seen in zip([*PATTERNS, *own], [*read, *(text for _ in own)], strict=True):
        for match in pattern.finditer(seen):
            if not any(match.start() < b and a < match.end() for a, b in allowed):
                if found is None or match.start() < found.start:
                    value = text[match.start() : match.end()].strip()
                    found = VolatileMatch(kind, value, match.start(), match.end())
                break
    return found


# Pieces of volatile and legitimate text, and characters that match case aside (ſ, K, İ) or
# are digits beyond ASCII, so that matches start, overlap and abut in every way.
PIECES = st.sampled_from(
    [
        *VOLATILE,
        *LEGITIMATE,
        " ",
        "\n",
        "ſession id 7",
        "Kase",
        "İ",
        "٣",
        "@ 10:45",
        "x@9:31",
        "-",
        ":",
        "§",
        "は",
        "年",
        "的请求",
        "２",
        "：",
        "١",
    ]
)
# the last two open with an unbounded repeat: searched a run at a time (regexes.TextSearch)
_ONE_ALLOWED = [r"\d{4}", r"10:\d\d", r"[A-Z]{2}-", r"at \d", r"\w+:\d", r"\S+ 2", r"\d", r"(?=\d)"]
# none, one, or several (their spans overlap, touch, repeat, and are empty: joined as they are read)
ALLOW = st.lists(st.sampled_from(_ONE_ALLOWED), max_size=4).map(tuple)


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(PIECES, max_size=6), allow=ALLOW)
def test_scanning_finds_what_finditer_finds(pieces: list[str], allow: tuple[str, ...]) -> None:
    text = "".join(pieces)
    rules = VolatileRules(allow=allow)
    assert find_volatile.__wrapped__(text, rules) == _by_finditer(text, rules)


def test_an_allow_list_repeating_a_pattern_keeps_one_span_a_place() -> None:
    """A policy listing ``a`` 2,000 times held 2,000 spans at each "a" of the playbook (1.2 GB,
    8 s): a pattern given twice is read once, and a span matched again is kept once."""
    from ctxbudget.volatile import _allowed

    text = "a playbook as of today, and a date: 2026-12-05 at 10:00. " * 50
    allowed = _allowed(text, ("a",) * 2000 + ("[a]", "(?:a)"))
    assert len(allowed._starts) == text.count("a")
    rules = VolatileRules(allow=("a",) * 2000 + (r"\d{4}-\d\d-\d\d",))
    assert find_volatile.__wrapped__(text, rules) == _by_finditer(text, rules)


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(PIECES, max_size=6))
def test_every_match_start_is_a_candidate(pieces: list[str]) -> None:
    text = "".join(pieces)
    for (_, pattern), name in zip(PATTERNS, _STARTS, strict=True):
        starts = {m.start() for at in range(len(text) + 1) if (m := pattern.match(text, at))}
        assert starts <= set(_candidates(name, text))


# The words the time and now-word patterns open with, in any case and glued in every way.
OPENINGS = st.sampled_from(
    [
        "Today",
        "today's date",
        "TODAY",
        "Current date",
        "current_date",
        "CURRENT TIME",
        "current_time",
        "local_time",
        "Local time",
        "Date",
        "DATE",
        "date today",
        "As of",
        "as OF",
        "Updated",
        "LAST UPDATED",
        "generated",
        "Generated",
        "at",
        "AT",
        "At",
        "the time is",
        "The Time Is",
        "time now",
        "Time is now",
        "time",
        "Time",
        "@",
        "T10:32:11Z",
        "T09:00:00",
        "Tr. ",
        "Dep. ",
        "request ",
        "server_",
        "x",
        "_",
        "1",
        ":",
        " ",
        "\n",
        "\n- ",
        '"',
        "'",
        "=",
        " is ",
        "10:05",
        "3pm",
        "9:31",
        "2026-09-16",
        "September 16",
        "16 September",
        "12:30:45.5",
        "1:50 scale",
        "X-Request-ID",
        "request_id",
        "req-id",
        "Session ID",
        "sessid",
        "trace id",
        "SPAN_ID",
        "run-id",
        "Correlation ID",
        "conversation_id",
        "message id",
        "msgid",
        "Case No.",
        "case number",
        "DOCKET",
        "Docket No. ",
        "matter #",
        "Claim ID",
        "Civil Action No. ",
        "12-cv-3456",
        "AB-12",
        "4711",
        "# ",
    ]
)


def _each_match_start_is_a_candidate(text: str, scanners: set[str]) -> None:
    """Every place a pattern of ``scanners`` matches (in the text as the patterns read it) is a
    candidate of its scanner, and the check finds what every pattern's ``finditer`` finds."""
    seen = _spaced(text)
    for (_, pattern), name in zip(PATTERNS, _STARTS, strict=True):
        if name in scanners:
            starts = {m.start() for at in range(len(seen) + 1) if (m := pattern.match(seen, at))}
            assert starts <= set(_candidates(name, seen)), name
    assert find_volatile.__wrapped__(text, VolatileRules()) == _by_finditer(text, VolatileRules())


@settings(max_examples=500, deadline=None)
@given(pieces=st.lists(OPENINGS, max_size=8))
def test_every_match_start_of_a_word_opened_pattern_is_a_candidate(pieces: list[str]) -> None:
    """In ASCII text the time, now-word, id and case scanners look for their opening words with
    ``str.find``: every place one of their patterns matches is still a candidate."""
    _each_match_start_is_a_candidate("".join(pieces), {"time word", "now word", "id word", "case word"})


# Hex digits in runs of every length around a nonce's 16, glued to word characters or not, and
# the UUID's groups and hyphens in and out of shape.
HEX_PIECES = st.sampled_from(
    [
        "deadbeef",
        "0123456789abcdef",
        "DEADBEEF",
        "a1b2",
        "9",
        "f",
        "-",
        "--",
        "_",
        "g",
        "x",
        " ",
        "\n",
        "a1b2c3d4-e5f6-7a8b-9c0d-e1f2a3b4c5d6",
        "A1B2C3D4-",
        "e5f6-",
        "e1f2a3b4c5d6",
        "=",
        ".",
    ]
)


@settings(max_examples=500, deadline=None)
@given(pieces=st.lists(HEX_PIECES, max_size=10))
def test_every_match_start_of_a_hex_shaped_pattern_is_a_candidate(pieces: list[str]) -> None:
    """In ASCII text the UUID and nonce scanners look for their shapes in the text with its hex
    digits marked: every place one of their patterns matches is still a candidate."""
    _each_match_start_is_a_candidate("".join(pieces), {"uuid", "hex"})


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("id a1b2c3d4-e5f6-7a8b-9c0d-e1f2a3b4c5d6 here", "UUID"),
        ("nonce 9f86d081884c7d659a2feaa0c55ad015 set", "hex nonce"),
        ("g9f86d081884c7d659a2feaa0 glued to a word", None),
        ("deadbeefdeadbeefdeadbeef without a digit", None),
    ],
)
def test_hex_shaped_values_are_found_where_they_stand_alone(text: str, kind: str | None) -> None:
    found = find_volatile.__wrapped__(text, VolatileRules())
    assert (found.kind if found else None) == kind


# Digits in runs of every length the patterns read, with the separators, suffixes, words and
# month names (three languages, three cases) that may follow them, and digits beyond ASCII.
DATED_PIECES = st.sampled_from(
    [
        "1",
        "12",
        "31",
        "2026",
        "20260916",
        "1726480331",
        "9",
        "0",
        ":",
        "-",
        "/",
        ".",
        ",",
        " ",
        "  ",
        "\n",
        "er",
        "de ",
        "Dezember",
        "décembre",
        "diciembre",
        "Sep",
        "SEP",
        "sept",
        "March",
        "march",
        "may",
        "Mon",
        "Monday",
        "Tue",
        "st",
        "th",
        "of ",
        "day ",
        "days",
        "cv",
        "x",
        "T",
        "Z",
        "am",
        "UTC",
        "at ",
        "\u2013",
        "\u2011",
        "١",
        "ſ",
        "Section ",
        "§ ",
        "page ",
        "a",
    ]
)


@settings(max_examples=800, deadline=None)
@given(pieces=st.lists(DATED_PIECES, max_size=10))
def test_every_match_start_of_a_dated_pattern_is_a_candidate(pieces: list[str]) -> None:
    """The digit and date-word scanners check what their patterns open with before trying them
    (``_PRECHECKS``): every place one of their patterns matches is still a candidate."""
    _each_match_start_is_a_candidate("".join(pieces), {"digit", "date word", "digit or date word"})


def test_each_finder_tried_at_its_words_is_a_finder_of_its_scanner() -> None:
    """A finder named by the class it opens with: a rewording of the finder would otherwise turn
    the shortcut off in silence (the finder then scanned for again)."""
    for first in volatile._TRIED_AT:
        assert any(p.pattern.startswith(first) for p in volatile._finders("date word", True)), first


MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September"]
MONTHS += ["October", "November", "December", "Sept"]


@pytest.mark.parametrize("month", [*MONTHS, *map(str.upper, MONTHS), *map(str.lower, MONTHS)])
@pytest.mark.parametrize("form", ["Signed {} 16, 2026.", "Signed 16 {} 2026.", "Due Monday, {} 16, 2026"])
def test_a_date_with_each_months_name_in_each_case_is_found(month: str, form: str) -> None:
    text = form.format(month)
    found = find_volatile.__wrapped__(text, VolatileRules())
    assert found is not None and found.kind == "date" and month in found.value
    assert found == _by_finditer(text, VolatileRules())


def test_scanning_finds_what_finditer_finds_on_the_bundled_request() -> None:
    for item in build_legal_context()["items"]:
        assert find_volatile.__wrapped__(item["text"], VolatileRules()) == _by_finditer(
            item["text"], VolatileRules()
        )


def test_case_aside_scanners_hold_every_character_that_matches() -> None:
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    for letters, scanned in [("xrstcm", "id word"), ("cdm", "case word"), ("atug", "time word")]:
        matching = set(re.findall(f"(?i)[{letters}]", every))
        apart = " ".join(sorted(matching))  # each at a word start
        assert matching == {c for s in _SCANNERS[scanned] for c in s.findall(apart)} - {"@"}


def test_a_run_of_id_words_without_a_digit_is_read_once() -> None:
    # Each "session-id" of the run read the rest of it looking for a digit (160 kB took 13.7 s).
    text = "session-id-" * 100_000  # 1.1 MB: read once, under a second; from each word, hours
    assert find_volatile(text) is None
    found = find_volatile(text + "7 is the one")
    assert found is not None and found.kind == "request or session id" and found.value.endswith("-7")


def test_a_match_of_no_characters_is_no_volatile_value() -> None:
    """A zero-width pattern the policy's check cannot see (a lookahead for what its probe lacks)
    found a volatile value '' at characters 0-0 of every text holding QQQ."""
    rules = VolatileRules(patterns=(("ticket", "(?=QQQ)"),))
    assert find_volatile("Rules QQQ apply.", rules) is None
    assert find_volatile("Rules QQQ apply.", VolatileRules(patterns=(("ticket", "QQQ"),))) is not None


def test_the_built_in_patterns_pass_the_check_a_policys_patterns_must_pass() -> None:
    """A first "current time" pattern ended in \\s*[:,]?\\s*: on "The time is" and 20,000 blanks,
    18.5 s. The case-number patterns repeat a group whose separator its class does not match
    (linear), which the conservative nested-repeat rule refuses in a policy: listed apart."""
    from ctxbudget.regexes import NESTED_REPEAT_HINT, slow_pattern_hint
    from ctxbudget.volatile import _PATTERN_SOURCES

    for kind, pattern in _PATTERN_SOURCES:
        hint = slow_pattern_hint(pattern, long_texts=True)
        assert hint is None or (kind == "case or docket number" and hint == NESTED_REPEAT_HINT), (
            kind,
            pattern,
        )
