"""Plain chat bodies skip their pydantic model (``formats.chat.plain_chat``): the shortcut must
never accept a body the model refuses, and a plain body's fit must not import pydantic at all."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import InvalidRequestError
from ctxbudget.formats import anthropic, anthropic_wire, openai, openai_wire
from ctxbudget.formats.wire import validate_body
from ctxbudget.items import Segment


class Label(str):
    """A str subclass: equal to a role, but not what the shortcut vouches for."""


roles = st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", "bot", ""])
values = st.one_of(
    st.none(),
    st.text(max_size=3),
    st.integers(),
    st.booleans(),
    st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=3)}), max_size=2),
    st.just([{"type": "text"}]),  # a text part without its text
    st.just([{"type": "image"}]),  # an image without its source
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=1),
    st.text(max_size=3).map(Label),
)
keys = st.sampled_from(["role", "content", "name", "tool_calls", "tool_call_id", "refusal", "x"])
plain = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"]), "content": st.text(max_size=3)},
    optional={"name": st.text(max_size=3)},
)
fields = st.sampled_from(["system", "tools", "functions", "prediction", "cache_control", "model"])


@st.composite
def bodies(draw: st.DrawFn) -> Any:
    """A plain chat body, then a few changes of the kinds that take it past the shortcut: a field
    dropped, given another value or added, in a message or in the body, or a message replaced."""
    listed: list[Any] = draw(st.lists(plain, min_size=1, max_size=3))
    body: dict[str, Any] = {"messages": listed}
    for _ in range(draw(st.integers(0, 2))):
        change = draw(st.sampled_from(["drop", "set", "message", "field", "messages"]))
        message = draw(st.sampled_from(listed))
        if change == "drop" and isinstance(message, dict) and message:
            message.pop(draw(st.sampled_from(sorted(message))))
        elif change == "set" and isinstance(message, dict):
            message[draw(keys)] = draw(st.one_of(values, roles))
        elif change == "message":
            listed[0] = draw(st.one_of(st.dictionaries(keys, values, max_size=3), st.text(max_size=2)))
        elif change == "field":
            body[draw(fields)] = draw(st.one_of(values, st.just({"type": "ephemeral"})))
        elif change == "messages":
            body["messages"] = draw(values)
    return body


def _refused(check: Any, body: dict[str, Any]) -> str | None:
    try:
        check(body)
    except InvalidRequestError as exc:
        return str(exc)
    return None


@settings(max_examples=600, deadline=None)
@given(bodies())
def test_the_shortcut_refuses_exactly_what_the_model_refuses(body: dict[str, Any]) -> None:
    for module, wire in ((openai, openai_wire), (anthropic, anthropic_wire)):
        expected = _refused(lambda b, wire=wire: validate_body(wire.Body, b), body)
        assert _refused(module._validate, body) == expected, (module.__name__, body)


@pytest.mark.parametrize(
    ("body", "refused_at"),
    [
        (
            {"messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]},
            "$.messages[1].role",
        ),
        ({"messages": [{"role": "user", "content": 7}]}, "$.messages[0].content"),
        ({"messages": []}, "$.messages"),
    ],
)
def test_a_body_the_shortcut_does_not_vouch_for_gets_the_models_error(
    body: dict[str, Any], refused_at: str
) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        openai._validate(body)
    assert refused_at in str(raised.value)


def test_a_plain_chat_fit_does_not_import_pydantic() -> None:
    program = (
        "import sys\n"
        "from ctxbudget import fit\n"
        "chat = [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'Hi there. ' * 40}]\n"
        "fit({'messages': chat}, model='gpt-4o', max_context_tokens=60)\n"
        "fit({'system': 'Be brief.', 'messages': chat[1:]}, model='claude-sonnet-4-5', max_context_tokens=60)\n"
        "plain = 'pydantic' in sys.modules\n"
        "fit({'messages': [{'role': 'user', 'content': [{'type': 'text', 'text': 'x'}]}]}, model='gpt-4o')\n"
        "print(plain, 'pydantic' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


@given(
    st.lists(
        st.tuples(st.sampled_from(["system", "user", "assistant", "developer"]), st.text(max_size=40)),
        min_size=1,
        max_size=6,
    )
)
def test_a_message_of_role_and_text_renders_as_the_general_reading_does(
    messages: list[tuple[str, str]],
) -> None:
    """The shortcut for a message of role and text alone makes its segments by ``tuple.__new__``:
    the rendering must be the one the general reading makes (here asked of the same messages
    with an empty name, which adds nothing), segment for segment, each a Segment."""
    plain = {"messages": [{"role": r, "content": t} for r, t in messages]}
    named = {"messages": [{"role": r, "content": t, "name": ""} for r, t in messages]}
    fmt = openai.OpenAIFormat()
    fast, general = fmt.render(plain), fmt.render(named)
    assert fast == general
    assert all(type(s) is Segment for chunk in fast.chunks for s in chunk)
    assert [s._asdict() for c in fast.chunks for s in c] == [s._asdict() for c in general.chunks for s in c]
