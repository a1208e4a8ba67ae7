"""The boundary's JSON check: the fast walk for plain values never accepts what the full walk
refuses, and errors name the path whichever walk saw the value first."""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import InvalidRequestError, fit
from ctxbudget.fitting._memo import content_key, freeze
from ctxbudget.formats import jsonvalue
from ctxbudget.formats.jsonvalue import (
    MAX_DEPTH,
    RepeatedKey,
    _check_with_paths,
    check_json_value,
    decode_json,
    unique_keys,
)


class Label(str):
    """A str subclass: valid JSON, but not what json.loads returns."""


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and infinities included: both walks must refuse them
    st.text(),  # lone surrogates included
    st.text(max_size=3).map(Label),
)
keys = st.one_of(st.text(max_size=4), st.integers(0, 3))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(keys, inner, max_size=4),
    ),
    max_leaves=30,
)


def _string_chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(len(k) + _string_chars(v) for k, v in value.items())
    return sum(_string_chars(v) for v in value) if isinstance(value, (list, tuple)) else 0


def _refused(value: Any) -> str | None:
    try:
        _check_with_paths(value, "$")
    except InvalidRequestError as exc:
        return str(exc)
    return None


@settings(max_examples=400, deadline=None)
@given(values)
def test_the_check_agrees_with_the_full_walk(value: Any) -> None:
    expected = _refused(value)
    if expected is not None:
        with pytest.raises(InvalidRequestError) as raised:
            check_json_value(value)
        assert str(raised.value) == expected
        return
    shape = check_json_value(value)
    if shape.plain:
        assert shape.chars == _string_chars(value)


@settings(max_examples=200, deadline=None)
@given(values)
def test_what_json_decoding_returns_takes_the_fast_walk(value: Any) -> None:
    if _refused(value) is not None:
        return
    decoded = json.loads(json.dumps(value))
    # a float of 2**63 or more may be an integer a 64-bit reader took for a float: not plain
    assert check_json_value(decoded).plain != _has_huge_float(decoded)


def _has_huge_float(value: Any) -> bool:
    if isinstance(value, float):
        return abs(value) >= 2.0**63
    if isinstance(value, dict):
        return any(_has_huge_float(v) for v in value.values())
    return isinstance(value, list) and any(_has_huge_float(v) for v in value)


def _typed(value: Any) -> Any:
    """``value`` with each scalar's type beside it (1 and 1.0 and True compare equal)."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


@settings(max_examples=300, deadline=None)
@given(values, st.sampled_from([{}, {"ensure_ascii": False}, {"indent": 1}]))
def test_decoding_reads_what_json_reads_type_for_type(value: Any, options: dict[str, Any]) -> None:
    if _refused(value) is not None:
        return
    data = json.dumps(value, **options).encode("utf-8")
    assert _typed(decode_json(data, "body")) == _typed(json.loads(data))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"a": 18446744073709551616}', 18446744073709551616),  # past 64 bits: still an integer
        (b'{"a": -9223372036854775809}', -9223372036854775809),
        (b'{"a": 9223372036854775807}', 9223372036854775807),
        (b'{"a": 1e19}', 1e19),
        (b'{"a": 1e-400}', 0.0),
    ],
)
def test_numbers_are_read_as_json_reads_them(data: bytes, expected: Any) -> None:
    read = decode_json(data, "body")["a"]
    assert read == expected and type(read) is type(expected)


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b'{"a": NaN}', "NaN is not a JSON number"),
        (b'{"a": 1e400}', "Infinity"),
        (b'{"a": "\\ud800"}', "lone surrogate"),
        (b'{"a": "\xff"}', "not UTF-8 text at byte 7"),
        (b'{"a": "caf\xe9"}', "at byte 10 .*if it is Latin-1 or Windows-1252.*iconv -f WINDOWS-1252"),
        (
            b'{"a": 1} y',
            "^body: not valid JSON at line 1 column 10 \\(byte 9\\): Extra data$",
        ),  # no encoding hint
        (b'{"a": 1} x', "not valid JSON at line 1 column 10"),
        (b"[" * 1100 + b"]" * 1100, "nested deeper than 100 levels"),
        (b"[" * 500 + b"]" * 500, "nested deeper than 100 levels"),
        (b"", "body: is empty"),  # was "Expecting value at line 1 column 1"
        (b" \n\t", "body: is empty"),
        ('{"a": 1}'.encode("utf-16"), "not UTF-8 text at byte 0 .*looks like UTF-16.*iconv"),
        ('{"a": 1}'.encode("utf-16-le"), "not valid JSON .*looks like UTF-16"),
        ('{"a": 1}'.encode("utf-32"), "looks like UTF-32.*iconv -f UTF-32"),  # was named UTF-16
        ('{"a": 1}'.encode("utf-32-le"), "looks like UTF-32"),
        ('{"a": 1}'.encode("utf-32-be"), "looks like UTF-32"),
        ('{"a": 1}'.encode("utf-16-be"), "looks like UTF-16"),
        (b"\0" * 64, "not valid JSON(?!.*looks like)"),  # NULs alone are no text of either
    ],
)
def test_what_cannot_be_read_is_said_as_before(data: bytes, said: str) -> None:
    with pytest.raises(InvalidRequestError, match=said):
        decode_json(data, "body")


@pytest.mark.parametrize(
    ("data", "said"),
    [
        # the offset counts bytes: three characters of three bytes each, and a byte-order mark
        ('{"a": "日本語"} x'.encode(), r"line 1 column 14 \(byte 19\): Extra data"),
        (b'\xef\xbb\xbf{"a": x}', r"line 1 column 7 \(byte 9\): Expecting value"),
        # the reader's messages that end in "at" (it names the place apart) are whole sentences
        (b'{"a": "col1\tcol2"}', r"\(byte 11\): a control character inside a string \(a raw tab"),
        (b'{"a": "abc', r"\(byte 6\): a string that is not closed"),
        (b'{"a": "x\\qy"}', "an invalid escape in a string"),
        (b'{"a": "\\u12"}', r"an invalid \\u escape"),
    ],
)
def test_a_syntax_error_names_its_byte_and_its_cause(data: bytes, said: str) -> None:
    with pytest.raises(InvalidRequestError, match=said) as raised:
        decode_json(data, "body")
    assert not str(raised.value).endswith(" at")


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (b'{"m": [{"a": 1}, {"b": 1, "b": 2}]}', "$.m[1]: the key 'b' is given twice"),
        (b'{"m": [{"a": 1}, {"b": [0, NaN]}]}', r"\$.m\[1\].b\[1\]: NaN is not a JSON number"),
        (b'{"m": -Infinity}', "$.m: -Infinity is not a JSON number"),
        # a NaN met before the object that repeats a key closes: the NaN is named, not the object
        (b'{"n": 1, "n": 2, "m": NaN}', "$.m: NaN is not a JSON number"),
    ],
)
def test_a_repeated_key_or_a_constant_is_named_by_its_path(data: bytes, path: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        decode_json(data, "body", refuse_repeats=True)
    assert re.search(re.escape(path) if "\\" not in path else path, str(raised.value))
    assert str(raised.value).startswith("body: $.m")


def test_a_byte_order_mark_is_read_past() -> None:
    assert decode_json(b'\xef\xbb\xbf{"a": 1}', "body") == {"a": 1}


def test_depth_is_refused_past_the_limit_by_both_walks() -> None:
    deep: Any = "x"
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(InvalidRequestError, match="nested deeper"):
        check_json_value({"a": deep})
    shallow: Any = "x"
    for _ in range(MAX_DEPTH - 1):
        shallow = [shallow]
    assert check_json_value({"a": shallow}).plain


@pytest.mark.parametrize("writer", ["orjson", "json"])
def test_the_memo_key_tells_apart_what_the_fit_tells_apart(
    writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if writer == "json":  # as without the gateway extra
        monkeypatch.setattr(jsonvalue, "orjson", None)
    else:
        pytest.importorskip("orjson")
    bodies: list[dict[str, Any]] = [
        {"x": 0.0},
        {"x": -0.0},
        {"x": 0},
        {"x": False},
        {"x": [1]},
        {"x": (1,)},
        {"x": "a", "y": "b"},
        {"y": "b", "x": "a"},
        {"x": Label("a")},
        {"x": "a"},
        {"x": 2**64},  # past orjson's 64 bits: written by json
        {"x": 2**64 + 1},
        {"x": float(2**53)},
        {"x": 2**53},
        {"x": "\u00e9"},
        {"x": "e\u0301"},
    ]
    found = {content_key(b, check_json_value(b)) for b in bodies}
    assert len(found) == len(bodies)
    assert {content_key(b, check_json_value(b)) for b in copy.deepcopy(bodies)} == found
    large = {"x": "y" * 300_000}
    assert content_key(large, check_json_value(large)) == freeze(large)


def test_a_fit_remembered_by_its_text_is_the_same_fit() -> None:
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": f"turn {n} " * 40} for n in range(60)],
        "temperature": -0.0,
    }
    first = fit(body, model="gpt-4o", max_context_tokens=1_000, reserve_output_tokens=0)
    again = fit(
        json.loads(json.dumps(body)), model="gpt-4o", max_context_tokens=1_000, reserve_output_tokens=0
    )
    assert again.request == first.request and again.report == first.report
    assert math.copysign(1.0, again.request["temperature"]) == -1.0


def test_the_first_value_that_is_not_json_is_the_one_named() -> None:
    """The walk named the last of them: Document objects at documents[0] and [2] were reported at
    documents[2], and a bad question text behind a bad document."""

    class Document:
        pass

    with pytest.raises(InvalidRequestError) as refused:
        check_json_value({"questions": [{"text": Document()}], "documents": [Document(), "ok", Document()]})
    assert refused.value.path == "$.questions[0].text"
    with pytest.raises(InvalidRequestError) as refused:
        check_json_value({"documents": [Document(), "ok", Document()]})
    assert refused.value.path == "$.documents[0]"


def test_a_tuple_is_named_a_tuple_not_an_array() -> None:
    """ "expected a list of messages, got an array" contradicted itself for a Python tuple."""
    with pytest.raises(InvalidRequestError, match=r"got a tuple \(give a list\)"):
        fit({"messages": ({"role": "user", "content": "hi"},)}, model="gpt-4o")


class _Pairs(list[tuple[str, Any]]):
    """An object as written: its keys in order, a key possibly given twice."""


# Keys from few characters, so that repeats are common; quotes, colons and backslashes make the
# escaped quotes followed by a colon that look like a key's end.
_key_text = st.text(alphabet='a"\\: ', max_size=3)
_written = st.recursive(
    st.one_of(st.integers(-5, 5), st.text(alphabet='x"\\: ', max_size=4), st.none()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.lists(st.tuples(_key_text, inner), max_size=4).map(_Pairs)
    ),
    max_leaves=12,
)


def _text(value: Any, space: str) -> str:
    if isinstance(value, _Pairs):
        return "{" + ",".join(f"{json.dumps(k)}{space}:{space}{_text(v, space)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_text(v, space) for v in value) + "]"
    return json.dumps(value)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_key_text, _written), max_size=4).map(_Pairs), st.sampled_from(["", " ", "\n\t"]))
def test_a_repeated_key_is_refused_exactly_when_the_strict_reader_refuses_it(value: Any, space: str) -> None:
    # The fast reader keeps the last of a repeated key in silence: its keys are held against the
    # text's key marks, and the strict reader decides when they differ.
    data = _text(value, space).encode("utf-8")
    try:
        expected: Any = json.loads(data, object_pairs_hook=unique_keys)
    except RepeatedKey as exc:
        with pytest.raises(InvalidRequestError) as told:
            decode_json(data, "body", refuse_repeats=True)
        said = str(told.value)  # the object's JSON path between them
        assert said.startswith("body: $") and said.endswith(f": {exc}")
        return
    assert decode_json(data, "body", refuse_repeats=True) == expected


def test_an_agent_bodys_escaped_quotes_leave_it_on_the_fast_reader() -> None:
    # A tool call's arguments are JSON in a string ("{\"n\": 0}"): each escaped quote before a
    # colon made a mark, so every agent body was read again by the strict reader (3x slower).
    from ctxbudget.formats.jsonvalue import _key_marks

    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "look", "arguments": json.dumps({"n": 0, "q": "a: b"})},
    }
    body = {"model": "gpt-4o", "messages": [{"role": "assistant", "content": None, "tool_calls": [call]}]}
    data = json.dumps(body).encode()
    assert b'\\":' in data and _key_marks(data) == check_json_value(body).keys
    escaped_backslash = json.dumps({"a": 'x\\": y'}).encode()  # an escaped backslash: counted as marks
    assert _key_marks(escaped_backslash) > check_json_value(json.loads(escaped_backslash)).keys


def _json_text(value: Any, sort_keys: bool) -> str:
    """The text every writer of compact JSON must give: json's, characters unescaped."""
    return json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, separators=(",", ":"))


_plain_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@pytest.fixture(params=["orjson", "json"])
def writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """compact_json with orjson (the gateway extra) or without it; the values orjson wrote."""
    written: list[Any] = []
    if request.param == "json":
        monkeypatch.setattr(jsonvalue, "orjson", None)
        return written
    orjson = pytest.importorskip("orjson")

    class Recording:  # orjson itself, with what it was asked to write kept
        JSONEncodeError = orjson.JSONEncodeError
        OPT_SORT_KEYS = orjson.OPT_SORT_KEYS

        @staticmethod
        def dumps(value: Any, option: int = 0) -> bytes:
            written.append(value)
            return bytes(orjson.dumps(value, option=option))

    monkeypatch.setattr(jsonvalue, "orjson", Recording)
    return written


# the fixture only chooses the writer: one choice serves every example
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_plain_values, sort_keys=st.booleans())
def test_compact_json_is_jsons_text_whichever_writer(writer: list[Any], value: Any, sort_keys: bool) -> None:
    assert jsonvalue.compact_json(value, sort_keys=sort_keys) == _json_text(value, sort_keys)


def test_every_code_point_is_written_as_json_writes_it(writer: list[Any]) -> None:
    # every character but the lone surrogates, in keys (sorted by code point) and in strings
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    chunks = ["".join(points[i : i + 4096]) for i in range(0, len(points), 4096)]
    value = {c[::-1] + str(n): [c, c[:1]] for n, c in enumerate(chunks)} | {
        c[:1] + "k": c[-1:] for c in chunks
    }
    for sort_keys in (False, True):
        assert jsonvalue.compact_json(value, sort_keys=sort_keys) == _json_text(value, sort_keys)


def test_every_ascii_character_is_written_by_orjson_as_json_writes_it(writer: list[Any]) -> None:
    # text beyond ASCII is left to json (see compact_json): these are what orjson writes
    ascii_text = "".join(chr(c) for c in range(128))
    value = {ascii_text: [ascii_text, *ascii_text]} | {c + "k": c for c in ascii_text}
    for sort_keys in (False, True):
        assert jsonvalue.compact_json(value, sort_keys=sort_keys) == _json_text(value, sort_keys)
    assert len(writer) == (2 if jsonvalue.orjson is not None else 0)


def test_orjson_writes_only_what_it_writes_as_json_does(writer: list[Any]) -> None:
    pytest.importorskip("orjson")
    if jsonvalue.orjson is None:
        pytest.skip("the json writer alone")
    left_to_json: list[Any] = [
        {"t": 0.5},  # a float: orjson writes 1e-05 as 0.00001
        {"t": [1, {"x": 1e-05}]},
        {"n": 2**64},  # past orjson's 64 bits
        {"k": (1, 2)},  # a tuple
        {"s": Label("a")},  # a str subclass
        {1: "a"},  # a key that is not a string
        {"s": "caf\u00e9"},  # text beyond ASCII: orjson would keep a UTF-8 copy in the string
        {"caf\u00e9": "s"},
        {"many": [None] * jsonvalue.FAST_WRITE_ITEMS},  # many small parts: the check costs what it saves
        {"large": "x" * (jsonvalue.FAST_WRITE_BYTES // 15)},  # orjson would reserve past the bound
    ]
    for value in left_to_json:
        assert jsonvalue.compact_json(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert writer == [{"n": 2**64}]  # tried, refused, then written by json
    base = {"items": [{"id": "a", "text": "x " * 50, "n": 2**63 - 1, "b": None, "ok": True}]}
    assert jsonvalue.compact_json(base, sort_keys=True) == _json_text(base, True)
    assert writer[-1] is base


@pytest.mark.parametrize(
    "value",
    [
        {"messages": [{"role": "user", "content": "lorem ipsum " * 200_000}]},  # one long text
        {"model": "m", "prompt": [31337] * 200_000},  # many elements: orjson reserves 34x for them
        [None] * 200_000,
        ["\x00" * 100_000],  # escapes: six characters written for one
        {"messages": [{"role": "user", "content": "\u6587\u5b57" * 150_000}]},  # CJK: 3 bytes each
        ["\U0001f600" * 250_000],  # 4 bytes each
    ],
    ids=["text", "integers", "nulls", "escapes", "cjk", "emoji"],
)
def test_a_large_value_is_written_within_a_few_times_its_size(value: Any) -> None:
    # orjson reserves 14-15 bytes a byte of text and 166-260 an element as it writes: a gateway's
    # 1,000,000-token body peaked at 15x its size, a 1 MB array of nulls at 34x
    import tracemalloc

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        text = jsonvalue.compact_json(value)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert text == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    # json: 2-4x (the text and its parts), 6x for emoji (written escaped first, then again)
    assert peak < 8 * len(text.encode("utf-8"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.dictionaries(st.text(), _plain_values, max_size=5), sort_keys=st.booleans())
def test_an_object_written_a_key_at_a_time_is_jsons_text(
    writer: list[Any], monkeypatch: pytest.MonkeyPatch, value: dict[str, Any], sort_keys: bool
) -> None:
    monkeypatch.setattr(jsonvalue, "COMPOSED_CHARS", 1)  # every object holding a string is composed
    assert jsonvalue.compact_json(value, sort_keys=sort_keys) == _json_text(value, sort_keys)


def test_a_long_string_beside_a_float_is_written_by_orjson(writer: list[Any]) -> None:
    question = "When was notice given? " * (jsonvalue.COMPOSED_CHARS // 20)
    turn = {"question": question, "answer": "caf\u00e9 \x00", "index": 3, "usage": {"cost_usd": 1e-05}}
    for sort_keys in (False, True):
        assert jsonvalue.compact_json(turn, sort_keys=sort_keys) == _json_text(turn, sort_keys)
    if jsonvalue.orjson is not None:  # the question written by orjson, the float left to json
        assert question in writer and not any(isinstance(w, dict) and "usage" in w for w in writer)
