"""A gateway turn keeps its tool calls and results (``gateway/tools.py``): the calls read from the
answer, whole or streamed, in each API's own shapes, and the results the request sends back. An
agent loop's turns were stored with an empty answer and neither."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ctxbudget.gateway import GatewayConfig, create_app
from ctxbudget.gateway.providers import ANTHROPIC, OPENAI, RESPONSES, StreamState
from ctxbudget.gateway.tools import answered_calls, sent_results
from ctxbudget.session import SQLiteStore, ToolCall, ToolResult

from .fake_upstream import Served, anthropic_client, openai_client

LOOKUP = ToolCall(name="lookup", arguments='{"q":"item 7"}')


def _sse(events: list[dict[str, Any]], named: bool) -> bytes:
    out = b""
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        out += f"{head}data: {json.dumps(event)}\n\n".encode()
    return out + (b"" if named else b"data: [DONE]\n\n")


def _streamed(provider: Any, data: bytes, piece: int = 7) -> tuple[ToolCall, ...]:
    state = StreamState(provider)
    for start in range(0, len(data), piece):  # events split anywhere, as a network splits them
        state.feed(data[start : start + piece])
    state.flush()
    return state.calls.calls()


OPENAI_CHUNKS = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]},
    {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": ""},
                        }
                    ]
                },
            }
        ]
    },
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"q":'}}]}}]},
    {
        "choices": [
            {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"item 7"}'}}]}}
        ]
    },
    {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 1,
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "stop", "arguments": "{}"},
                        }
                    ]
                },
            }
        ]
    },
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
]
ANTHROPIC_EVENTS = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude-sonnet-4-5",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 9, "output_tokens": 1},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Looking."}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"q":'},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '"item 7"}'},
    },
    {"type": "content_block_stop", "index": 1},
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "tool_use", "id": "t2", "name": "stop", "input": {}},
    },
    {"type": "content_block_stop", "index": 2},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 20}},
    {"type": "message_stop"},
]
RESPONSE = {
    "status": "completed",
    "output": [
        {"type": "reasoning", "id": "r1", "summary": []},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q":"item 7"}'},
        {"type": "function_call", "call_id": "c2", "name": "stop", "arguments": "{}"},
    ],
    "usage": {"input_tokens": 9, "output_tokens": 3},
}
BOTH = (LOOKUP, ToolCall(name="stop", arguments="{}"))


def test_the_calls_of_a_whole_answer_are_read_in_each_apis_shape() -> None:
    chat = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q":"item 7"}'},
                        },
                        {"id": "c2", "type": "function", "function": {"name": "stop", "arguments": "{}"}},
                    ],
                },
            }
        ]
    }
    messages = {
        "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": "item 7"}},
            {"type": "tool_use", "id": "t2", "name": "stop", "input": {}},
        ]
    }
    assert answered_calls("openai", chat) == BOTH
    assert answered_calls("anthropic", messages) == BOTH
    assert answered_calls("responses", RESPONSE) == BOTH
    assert answered_calls("openai", {"choices": []}) == () == answered_calls("anthropic", [1])


def test_the_calls_of_a_stream_are_gathered_from_its_pieces() -> None:
    assert _streamed(OPENAI, _sse(OPENAI_CHUNKS, named=False)) == BOTH
    assert _streamed(ANTHROPIC, _sse(ANTHROPIC_EVENTS, named=True)) == BOTH
    completed = [
        {"type": "response.output_text.delta", "delta": "x"},
        {"type": "response.completed", "response": RESPONSE},
    ]
    assert _streamed(RESPONSES, _sse(completed, named=True)) == BOTH


def test_the_results_a_request_sends_back_are_its_last_turns_named_by_their_calls() -> None:
    chat = [
        {"role": "user", "content": "Status?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "old", "type": "function", "function": {"name": "old", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "old", "content": "earlier"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "stop", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "item 7: shipped"}]},
        {"role": "tool", "tool_call_id": "c2", "content": "ok"},
    ]
    assert sent_results("openai", chat) == (
        ToolResult(name="lookup", content="item 7: shipped"),
        ToolResult(name="stop", content="ok"),
    )
    anthropic = [
        {"role": "user", "content": "Status?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "shipped"},
                {"type": "tool_result", "tool_use_id": "gone", "content": "no such item", "is_error": True},
            ],
        },
    ]
    assert sent_results("anthropic", anthropic) == (
        ToolResult(name="lookup", content="shipped"),
        ToolResult(name="gone", content="no such item", status="error"),  # its call is not in the request
    )
    items = [
        {"role": "user", "content": "Status?"},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "shipped"},
    ]
    assert sent_results("responses", items) == (ToolResult(name="lookup", content="shipped"),)
    assert sent_results("openai", chat[:1]) == () == sent_results("anthropic", anthropic[:2])


def _agent_upstream() -> Starlette:
    """An upstream whose model answers every request with the two calls (whole or streamed)."""

    async def chat(request: Request) -> Response:
        body = await request.json()
        if body.get("stream"):
            chunks = _sse(OPENAI_CHUNKS, named=False)
            return StreamingResponse(_once(chunks), media_type="text/event-stream")
        calls = [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"item 7"}'}},
            {"id": "c2", "type": "function", "function": {"name": "stop", "arguments": "{}"}},
        ]
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        usage = {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}
        return JSONResponse(
            {
                "id": "x",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                "usage": usage,
            }
        )

    async def messages(request: Request) -> Response:
        return StreamingResponse(_once(_sse(ANTHROPIC_EVENTS, named=True)), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/messages", messages, methods=["POST"]),
        ]
    )


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


@contextmanager
def _gateway(store: Path) -> Iterator[str]:
    with Served(_agent_upstream()) as upstream:
        config = GatewayConfig(
            anthropic_upstream=upstream.url, openai_upstream=upstream.url, store_path=str(store)
        )
        with Served(create_app(config)) as gateway:
            yield gateway.url


def test_an_agent_loops_turns_are_stored_with_their_calls_and_results(tmp_path: Path) -> None:
    with _gateway(tmp_path / "s.db") as url:
        client = openai_client(url, **{"X-Ctxbudget-Session": "agent"})
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Status of item 7?"}]
        answer = client.chat.completions.create(model="gpt-4o", messages=messages)
        calls = answer.choices[0].message.tool_calls
        messages += [{"role": "assistant", "content": None, "tool_calls": [c.model_dump() for c in calls]}]
        messages += [
            {"role": "tool", "tool_call_id": c.id, "content": f"{c.function.name}: done"} for c in calls
        ]
        list(client.chat.completions.create(model="gpt-4o", messages=messages, stream=True))
        with anthropic_client(url, **{"X-Ctxbudget-Session": "claude"}).messages.stream(
            model="claude-sonnet-4-5", max_tokens=100, messages=[{"role": "user", "content": "Status?"}]
        ) as stream:
            stream.until_done()
    store = SQLiteStore(str(tmp_path / "s.db"), mode="read")
    first, second = store.turns("agent")
    assert first.tool_calls == BOTH and first.tool_results == () and first.answer == ""
    assert second.tool_calls == BOTH
    assert second.tool_results == (
        ToolResult(name="lookup", content="lookup: done"),
        ToolResult(name="stop", content="stop: done"),
    )
    (claude,) = store.turns("claude")
    assert claude.tool_calls == BOTH and claude.answer == "Looking."


def test_streamed_calls_come_in_the_providers_order_and_none_is_lost() -> None:
    # A stream that sends index 1 before index 0 was stored reversed; a call whose name never came
    # was dropped, arguments and all; an Anthropic call's input was kept as its pieces spelled it.
    def piece(index: int, **function: str) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "function": function}]}}]}

    chunks = [
        piece(1, name="stop", arguments="{}"),
        piece(0, name="lookup", arguments='{"q":'),
        piece(0, arguments='"item 7"}'),
        piece(2, arguments="{}"),
    ]
    assert _streamed(OPENAI, _sse(chunks, named=False)) == (
        LOOKUP,
        ToolCall(name="stop", arguments="{}"),
        ToolCall(name="", arguments="{}"),
    )
    spaced = [
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"q": '},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '"item 7"}'},
        },
    ]
    assert (
        _streamed(ANTHROPIC, _sse(spaced, named=True))
        == (LOOKUP,)
        == answered_calls(
            "anthropic",
            {"content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": "item 7"}}]},
        )
    )


def test_an_odd_index_from_an_upstream_is_kept_not_a_failure_mid_stream() -> None:
    odd = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": [1], "function": {"name": "x", "arguments": "{}"}}]},
                }
            ]
        }
    ]
    assert _streamed(OPENAI, _sse(odd, named=False)) == (ToolCall(name="x", arguments="{}"),)


def test_streamed_calls_without_an_index_are_told_apart_by_their_ids_and_names() -> None:
    # An OpenAI-compatible server that leaves out each tool-call delta's `index`: parallel calls
    # were one, the first's name with every call's arguments run together ('{"a":1}{"b":2}').
    def piece(**call: Any) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}

    chunks = [
        piece(id="c1", type="function", function={"name": "lookup", "arguments": '{"q":'}),
        piece(function={"arguments": '"item 7"}'}),  # neither an id nor a name: the last call's
        piece(id="c2", type="function", function={"name": "lookup", "arguments": "{}"}),  # a new id
        piece(id="c2", function={"arguments": ""}),  # its id again: the same call
        piece(function={"name": "stop", "arguments": "{}"}),  # a new name
    ]
    assert _streamed(OPENAI, _sse(chunks, named=False)) == (
        LOOKUP,
        ToolCall(name="lookup", arguments="{}"),
        ToolCall(name="stop", arguments="{}"),
    )
    first = piece(id="c1", type="function", function={"name": "", "arguments": ""})  # named later
    named = piece(function={"name": "lookup", "arguments": '{"q":"item 7"}'})
    assert _streamed(OPENAI, _sse([first, named], named=False)) == (LOOKUP,)


def test_streamed_calls_without_an_index_go_back_to_a_call_by_its_id() -> None:
    # Parallel calls' pieces interleaved, each carrying its call's id (no index): a piece whose id
    # was an earlier call's, not the last one's, started a call of its own, nameless, so two
    # calls were stored as four, each with half its arguments.
    def piece(**call: Any) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}

    chunks = [
        piece(id="c1", type="function", function={"name": "lookup", "arguments": '{"q":'}),
        piece(id="c2", type="function", function={"name": "stop", "arguments": "{"}),
        piece(id="c1", function={"arguments": '"item 7"}'}),
        piece(id="c2", function={"arguments": "}"}),
    ]
    assert _streamed(OPENAI, _sse(chunks, named=False)) == (LOOKUP, ToolCall(name="stop", arguments="{}"))


def _reference_calls(pieces: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """What StreamedCalls makes of OpenAI tool-call pieces, read the plain way: a piece without an
    index goes to the first call (in the order calls came) holding its id, else to the last call
    unless its id or name is another's, else to a new call after the highest number."""
    order: list[Any] = []
    names: dict[Any, str] = {}
    ids: dict[Any, str] = {}
    pieces_of: dict[Any, list[str]] = {}
    last: Any = None
    for piece in pieces:
        ident, name = piece.get("id") or "", piece["function"].get("name") or ""
        if "index" in piece:
            position = piece["index"]
        elif ident and (known := [p for p in order if ids.get(p) == ident]):
            position = known[0]
        elif last is not None and ident in ("", ids[last] or ident) and name in ("", names[last] or name):
            position = last
        else:
            position = max((p for p in names if isinstance(p, int)), default=-1) + 1
        if position not in order:
            order.append(position)
        names[position] = names.get(position) or name
        ids[position] = ids.get(position) or ident
        pieces_of.setdefault(position, []).append(piece["function"].get("arguments") or "")
        last = position
    return [(names[p], "".join(pieces_of[p])) for p in sorted(names)]


_PIECE = st.fixed_dictionaries(
    {
        "function": st.fixed_dictionaries(
            {},
            optional={
                "name": st.sampled_from(["", "f", "g"]),
                "arguments": st.sampled_from(["", "{", "}", "1"]),
            },
        )
    },
    optional={"index": st.integers(min_value=-2, max_value=3), "id": st.sampled_from(["", "a", "b"])},
)


@example(  # an id a second call had first, then the first call: a piece of that id is the first's
    [
        {"index": 0, "function": {"name": "f", "arguments": ""}},
        {"index": 1, "id": "a", "function": {"name": "g", "arguments": ""}},
        {"index": 0, "id": "a", "function": {"arguments": "{"}},
        {"id": "a", "function": {"arguments": "}"}},
    ]
)
@example(  # a new call after one numbered below 0 is numbered after it
    [
        {"index": -2, "id": "a", "function": {"name": "f", "arguments": "1"}},
        {"id": "b", "function": {"name": "g", "arguments": "2"}},
        {"index": 0, "id": "b", "function": {"name": "g", "arguments": "3"}},
    ]
)
@settings(max_examples=400)
@given(st.lists(_PIECE, max_size=12))
def test_streamed_calls_match_the_plain_reading_of_their_pieces(pieces: list[dict[str, Any]]) -> None:
    """The calls are found by a map of ids and the highest number (a look through every call for
    each piece without an index took quadratic time); they are the ones the plain reading finds,
    an id shared by two calls and negative numbers included."""
    from ctxbudget.gateway.tools import StreamedCalls

    calls = StreamedCalls()
    for piece in pieces:
        calls.openai({"tool_calls": [piece]})
    assert [(c.name, c.arguments) for c in calls.calls()] == _reference_calls(pieces)
