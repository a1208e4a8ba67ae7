"""No input ends in a traceback: generated bad inputs through the CLI and the library.

The CLI must answer each with exit 2 and one line on stderr; the library must raise only
ctxbudget errors. Inputs are generated deterministically (a seeded generator plus hypothesis).
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import CtxBudgetError, InvalidRequestError, assemble, count, count_text, fit, render_question
from ctxbudget.cli import main

VALID: list[dict[str, Any]] = [
    {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Look it up."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "result " * 50},
        ],
    },
    {
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": "Look it up."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x " * 40}]},
        ],
    },
    {"questions": [{"text": "When?"}], "documents": [{"page_content": "On March 3.", "score": 0.5}]},
]
ODD_VALUES: list[Any] = [None, True, -1, 0, 1.5, 10**30, "", "x", [], {}, [1, "a"], {"a": None}, ["x"]]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out += _paths(child, (*path, i))
    return out


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    out = copy.deepcopy(value)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return out


def _mutations(seed: int, n: int) -> list[Any]:
    """Valid bodies with one value replaced by an odd one, anywhere."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        body = rng.choice(VALID)
        path = rng.choice(_paths(body))
        out.append(_replaced(body, path, rng.choice(ODD_VALUES)))
    return out


BAD_BYTES: list[bytes] = [
    b"",
    b"{",
    b"[1,2]",
    b'"str"',
    b"42",
    b"null",
    b"\xff\xfe{\x00}\x00",
    "{}".encode("utf-16"),
    bytes(range(256)),
    b'{"messages": [{"role": "user", "content": "\\ud800"}]}',
    b'{"messages": [{"role": "user", "content": "x"}], "t": NaN}',
    b'{"messages": [{"role": "user", "content": "x"}], "t": -Infinity}',
    b'{"x": ' + b"9" * 5000 + b"}",
    b"[" * 500 + b"]" * 500,
    b'{"messages": ' + b"[" * 300 + b"]" * 300 + b"}",
    b'{"messages": "hi"}',
    b'{"messages": [{"role": "robot", "content": "x"}]}',
    b'{"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [{"type": "tool_result", '
    b'"tool_use_id": "a", "content": ["x"]}]}]}',
    b'{"questions": "x", "documents": []}',
    b'{"max_tokens": -3, "messages": [{"role": "user", "content": "x"}]}',
    b'{"messages": []}',
    b'{"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}',
    b'{"messages": [{"role": "user", "content": [{"type": "text", "text": null}]}]}',
    b'{"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [{"type": "text"}]}]}',
    b'{"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [{"type": "document", '
    b'"source": {"type": "text", "media_type": "text/plain"}}]}]}',
    b'{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "http://x"}]}]}',
    b'{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": "x"}]}',
    b'{"messages": [{"role": "user", "content": "x"}], "tools": [{"function": {"name": "f", '
    b'"parameters": {"properties": {"a": {"enum": 5}}}}}]}',
    b'{"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", '
    b'"content": [{"type": "thinking", "thinking": 5, "signature": null}]}]}',
    b'{"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [{"type": "image", '
    b'"source": "abc"}]}]}',
]


def _cli_inputs() -> list[bytes]:
    mutated = [json.dumps(m).encode() for m in _mutations(1, 400)]
    return BAD_BYTES + mutated


@pytest.mark.parametrize("command", ["fit", "count"])
def test_the_cli_never_shows_a_traceback(tmp_path: Path, command: str) -> None:
    runner = CliRunner()
    path = tmp_path / "body.json"
    failures: list[str] = []
    exits: dict[int, int] = {}
    for data in _cli_inputs():
        path.write_bytes(data)
        result = runner.invoke(main, [command, str(path), "--model", "gpt-4o", "--max-context-tokens", "600"])
        exits[result.exit_code] = exits.get(result.exit_code, 0) + 1
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            failures.append(f"{data[:80]!r}: {type(result.exception).__name__}: {result.exception}")
        elif result.exit_code not in (0, 2, 3):
            failures.append(f"{data[:80]!r}: exit {result.exit_code}: {result.output[:200]}")
        elif result.exit_code != 0 and (result.stderr.count("\n") != 1 or result.stdout):
            failures.append(f"{data[:80]!r}: not one line on stderr: {result.output[:300]!r}")
    assert not failures, "\n".join(failures[:10])
    assert exits.get(2, 0) >= len(BAD_BYTES)  # every hand-written bad input, at least, is refused


def test_hand_written_bad_inputs_are_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "body.json"
    for data in BAD_BYTES:
        path.write_bytes(data)
        result = CliRunner().invoke(main, ["fit", str(path), "--model", "gpt-4o"])
        assert result.exit_code == 2, (data[:60], result.output)


@pytest.mark.parametrize(
    "args",
    [
        ["fit", "--bogus"],
        ["nosuch"],
        ["fit", "-", "--format", "xml"],
        ["fit", "-", "--max-context-tokens", "-4"],
        ["models", "resolve"],
        ["assemble", "-", "--model", "gpt-4o", "--previous", "{list}"],
    ],
)
def test_usage_errors_are_one_line(args: list[str], tmp_path: Path) -> None:
    if "{list}" in args:
        listed = tmp_path / "list.json"
        listed.write_text("[1, 2]")
        args = [str(listed) if a == "{list}" else a for a in args]
    result = CliRunner().invoke(main, args, input="{}")
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("ctxbudget: ")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(len(VALID))), st.data())
def test_the_library_raises_only_its_own_errors(which: int, data: st.DataObject) -> None:
    body = VALID[which]
    path = data.draw(st.sampled_from(_paths(body)))
    mutated = _replaced(body, path, data.draw(json_values))
    model = "claude-sonnet-4-5" if which == 1 else "gpt-4o"
    for call in (
        lambda: fit(mutated, model=model, max_context_tokens=400, reserve_output_tokens=0),
        lambda: count(mutated, model=model),
    ):
        with contextlib.suppress(CtxBudgetError):
            call()


_CHAT = [{"role": "user", "content": "When?"}]


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (
            {
                "model": "gpt-4o",
                "input": "x",
                "tools": [{"type": "function", "name": "f", "parameters": 1.5}],
            },
            r"\$\.tools\[0\]\.parameters",
        ),
        ({"messages": _CHAT, "functions": 42}, r"\$\.functions"),
        (
            {"messages": _CHAT, "functions": [{"name": "f", "parameters": {"properties": [1]}}]},
            r"\$\.functions\[0\]",
        ),
        ({"messages": _CHAT, "prediction": {"type": "content", "content": True}}, r"\$\.prediction\.content"),
        ({"messages": _CHAT, "tools": [{"type": "custom", "custom": "run_sql"}]}, r"\$\.tools\[0\]\.custom"),
        (
            {"input": [{"type": "reasoning", "summary": 5}, {"role": "user", "content": "When?"}]},
            r"\$\.input\[0\]\.summary",
        ),
        (
            {"messages": _CHAT, "metadata": {"n": 10**4300}},
            r"\$\.metadata\.n: a number with more than 4,300 digits",
        ),
        (
            {"questions": [{"text": "When?"}], "documents": [{"page_content": "x", "metadata": "a.pdf"}]},
            r"\$\.documents\[0\]\.metadata",
        ),
        (
            {
                "model": "claude-sonnet-4-5",
                "messages": [
                    *_CHAT,
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": ["x"], "name": "f", "input": {}}],
                    },
                ],
            },
            r"\$\.messages\[1\]\.content\[0\]\.id",
        ),
        # a result that names no call: a fit kept it apart from its call and sent it orphaned
        (
            {"messages": [*_CHAT, {"role": "tool", "content": "x"}]},
            r"\$\.messages\[1\]: a tool message needs its `tool_call_id`",
        ),
        (
            {"messages": [*_CHAT, {"role": "function", "content": "x"}]},
            r"\$\.messages\[1\]: a function message needs its `name`",
        ),
        (
            {
                "model": "claude-sonnet-4-5",
                "messages": [
                    *_CHAT,
                    {"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]},
                ],
            },
            r"\$\.messages\[1\]\.content\[0\]: a tool_use block needs its `id`",
        ),
        (
            {
                "model": "claude-sonnet-4-5",
                "messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}],
            },
            r"\$\.messages\[0\]\.content\[0\]: a tool_result block needs its `tool_use_id`",
        ),
        ({"model": "claude-sonnet-4-5", "messages": _CHAT, "tools": [{}]}, r"\$\.tools\[0\]\.name"),
        (
            {"model": "claude-sonnet-4-5", "messages": _CHAT, "tools": [{"name": 5, "input_schema": {}}]},
            r"\$\.tools\[0\]\.name",
        ),
        (
            {"model": "claude-sonnet-4-5", "messages": _CHAT, "tools": [{"name": "x", "input_schema": "y"}]},
            r"\$\.tools\[0\]\.input_schema",
        ),
        (
            {
                "model": "claude-sonnet-4-5",
                "messages": _CHAT,
                "tools": [{"type": "bash_20250124", "name": 5}],
            },
            r"\$\.tools\[0\]\.name",
        ),
    ],
)
def test_shapes_the_formats_do_not_read_whole_are_refused_naming_the_field(
    body: dict[str, Any], where: str
) -> None:
    for call in (
        lambda: count(body, model="gpt-4o"),
        lambda: fit(body, model="gpt-4o", max_context_tokens=8000),
    ):
        with pytest.raises(InvalidRequestError, match=where):
            call()


@pytest.mark.parametrize(
    "body",
    [
        {"questions": ["When?"]},
        {"questions": 42},
        {"documents": 42},
        {"questions": [], "history": {"text": 5}},
        {"items": [{"id": "q", "kind": "question", "text": "When \ud800?"}]},
        {"messages": [{"role": "user", "content": "\ud800"}]},
        {"items": [{"id": "q", "kind": "question", "text": "When?"}], "n": 10**4300},
    ],
)
def test_assemble_refuses_what_fit_refuses(body: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequestError):
        assemble(body, policy="legal-review", model="claude-sonnet-4-5")


def test_a_null_enum_is_no_enum() -> None:
    tool = {
        "type": "function",
        "name": "f",
        "parameters": {"properties": {"q": {"type": "string", "enum": None}}},
    }
    plain = {"type": "function", "name": "f", "parameters": {"properties": {"q": {"type": "string"}}}}
    with_null = count({"model": "gpt-4o", "input": "x", "tools": [tool]}, model="gpt-4o")["tokens"]
    assert with_null == count({"model": "gpt-4o", "input": "x", "tools": [plain]}, model="gpt-4o")["tokens"]


def _returns_none() -> Any:
    return None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: fit({"questions": [{"text": "q"}]}, model="gpt-4o", split_documents="false"),
            "split_documents",
        ),
        (lambda: fit({"questions": [{"text": "q"}]}, model="gpt-4o", split_documents=[]), "split_documents"),
        (lambda: assemble(_ITEMS, policy="legal-review", model="gpt-4o", catalog="x"), "catalog must be"),
        (
            lambda: assemble(_ITEMS, policy="legal-review", model="gpt-4o", prompt_cache_key=float("nan")),
            "prompt_cache_key",
        ),
        (
            lambda: assemble(_ITEMS, policy="legal-review", model="gpt-4o", allow_prefix_change="yes"),
            "allow_prefix",
        ),
        (lambda: __import__("ctxbudget").load_policy(None), "policy is"),
        (lambda: __import__("ctxbudget").connect_store(5), "store is"),
        (lambda: __import__("ctxbudget").load_catalog(1), "catalog paths"),
        (lambda: __import__("ctxbudget").get_encoding(["a"]), "encoding name"),
        (lambda: _registered_none(), "not an encoding"),
        # in JSON's words, as the body was sent (not "got NoneType")
        (lambda: fit(None, model="gpt-4o"), "must be a JSON object, got null$"),  # type: ignore[arg-type]
        (lambda: fit([], model="gpt-4o"), "must be a JSON object, got an array$"),  # type: ignore[arg-type]
        (lambda: render_question("q"), "must be a JSON object, got a string$"),  # type: ignore[arg-type]
        (lambda: assemble([], policy="legal-review", model="gpt-4o"), "JSON object, got an array$"),  # type: ignore[arg-type]
        (lambda: assemble(None, policy="legal-review", model="gpt-4o"), "JSON object, got null$"),  # type: ignore[arg-type]
    ],
)
def test_public_functions_refuse_arguments_of_the_wrong_type(call: Any, message: str) -> None:
    with pytest.raises(CtxBudgetError, match=message):
        call()


_ITEMS = {"items": [{"id": "q", "kind": "question", "text": "When?"}]}


def _registered_none() -> Any:
    import ctxbudget

    ctxbudget.register_encoding("test-returns-none", _returns_none)
    return ctxbudget.get_encoding("test-returns-none")


def test_a_text_the_tokenizer_refuses_is_named_by_its_field() -> None:
    # about 400,000 blanks in a row overflow tiktoken's regex stack: refused, and where it is said
    blank = "a" + " " * 400_001 + "b"
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": blank},
    ]
    body = {"model": "gpt-4o", "messages": messages}
    for call in (
        lambda: count(body, model="gpt-4o"),
        lambda: fit(body, model="gpt-4o", max_context_tokens=2000),
    ):
        with pytest.raises(InvalidRequestError, match="cannot be tokenized") as info:
            call()
        assert info.value.path == "$.messages[2]"
    with pytest.raises(InvalidRequestError, match="cannot be tokenized") as plain:
        count_text(blank, model="gpt-4o")
    assert plain.value.path == "" and not str(plain.value).startswith("$")  # a text: no JSON to point in


def test_every_error_pickles_and_copies_as_it_was_made(tmp_path: Path) -> None:
    """An error made with keywords, or with arguments other than its message, could not be made
    again from its message: a fit raising one in a worker process failed in the pool instead."""
    import copy
    import pickle

    from ctxbudget.errors import ReplyLeavesNothing, StoreError

    caught: list[Exception] = []
    for attempt in (
        lambda: fit(
            {
                "messages": [
                    {"role": "system", "content": "a word " * 2000},
                    {"role": "user", "content": "hi"},
                ]
            },
            model="gpt-4o",
            max_context_tokens=500,
            reserve_output_tokens=0,
        ),
        lambda: fit({"messages": []}, model="gpt-4oo"),
        lambda: fit(
            {"messages": [{"role": "user", "content": "hi"}]},
            model="gpt-4o",
            max_context_tokens=100,
            reserve_output_tokens=200,
        ),
        lambda: fit({"messages": [{"role": "robot", "content": "hi"}]}, model="gpt-4o"),
    ):
        try:
            attempt()
        except CtxBudgetError as exc:
            caught.append(exc)
    caught += [StoreError(str(tmp_path), "is busy", "retry"), ReplyLeavesNothing(5, "x", 10, True)]
    assert len(caught) == 6
    for error in caught:
        for again in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
            assert type(again) is type(error) and str(again) == str(error)
            assert vars(again) == vars(error)
