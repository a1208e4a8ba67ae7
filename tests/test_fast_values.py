"""The fast constructors of the values a long history makes one of a message (``Item.of_message``,
``ItemReport.of``) and an assembly one of an item (``ContextItem.of``): each makes what the
dataclass's own constructor makes, field for field, so a field added to the dataclass and not to
the fast path fails here instead of going missing."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ctxbudget.assembly import get_policy
from ctxbudget.assembly._request import ContextItem
from ctxbudget.fitting._report import ItemReport
from ctxbudget.items import Item

components = st.sampled_from(["system", "query", "documents", "history"])


@given(
    components,
    st.integers(0, 10**6),
    st.text(max_size=8),
    st.text(max_size=8),
    st.text(max_size=5),
    st.integers(-1, 9),
)
def test_an_item_of_a_message_is_the_item_its_constructor_makes(
    component: str, index: int, path: str, text: str, role: str, group: int
) -> None:
    fast = Item.of_message(component, index, path, text, role, group)  # type: ignore[arg-type]
    made = Item(component=component, index=index, path=path, text=text, role=role, group=group)  # type: ignore[arg-type]
    assert vars(fast) == vars(made) and fast == made and repr(fast) == repr(made)
    assert {f.name for f in dataclasses.fields(Item)} == set(vars(fast))
    assert pickle.loads(pickle.dumps(fast)) == made and hash(fast) == hash(made)


@given(
    st.text(max_size=8),
    st.integers(0, 10**6),
    st.text(max_size=8),
    st.sampled_from(["kept", "dropped", "truncated", "summarized"]),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.text(max_size=8),
    st.booleans(),
)
def test_a_report_line_is_the_line_its_constructor_makes(
    component: str, index: int, path: str, action: str, before: int, after: int, reason: str, counted: bool
) -> None:
    fast = ItemReport.of(component, index, path, action, before, after, reason, counted)
    made = ItemReport(
        component=component,
        index=index,
        path=path,
        action=action,
        tokens_before=before,
        tokens_after=after,
        reason=reason,
        counted=counted,
    )
    assert vars(fast) == vars(made) and fast == made and repr(fast) == repr(made)
    assert {f.name for f in dataclasses.fields(ItemReport)} == set(vars(fast))
    assert pickle.loads(pickle.dumps(fast)) == made


maybe_text = st.none() | st.text(max_size=6)


@given(
    st.text(max_size=6),
    st.sampled_from([None, *get_policy("legal-review").tiers]),
    st.text(max_size=6),
    st.text(max_size=8),
    st.integers(0, 10**6),
    st.text(max_size=6),
    st.none() | st.floats(allow_nan=False),
    st.lists(st.text(max_size=4), max_size=3).map(tuple),
    maybe_text,
    maybe_text,
    maybe_text,
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.none() | st.tuples(st.text(max_size=6), st.text(max_size=6)),
)
def test_a_context_item_is_the_item_its_constructor_makes(
    id: str,
    tier: Any,
    kind: str,
    text: str,
    position: int,
    role: str,
    score: float | None,
    tags: tuple[str, ...],
    citation: str | None,
    supersedes: str | None,
    group: str | None,
    metadata: dict[str, int],
    origin: tuple[str, str] | None,
) -> None:
    fast = ContextItem.of(
        id, tier, kind, text, position, role, score, tags, citation, supersedes, group, metadata, origin
    )
    made = ContextItem(
        id=id,
        tier=tier,
        kind=kind,
        text=text,
        position=position,
        role=role,
        score=score,
        tags=tags,
        citation=citation,
        supersedes=supersedes,
        group=group,
        metadata=metadata,
        origin=origin,
    )
    assert vars(fast) == vars(made) and fast == made and repr(fast) == repr(made)
    assert {f.name for f in dataclasses.fields(ContextItem)} == set(vars(fast))
    assert pickle.loads(pickle.dumps(fast)) == made


def test_the_fast_values_stay_frozen() -> None:
    item = Item.of_message("history", 0, "$.messages[0]", "hi", "user", -1)
    line = ItemReport.of("history", 0, "$.messages[0]", "kept", 1, 1, "fits", True)
    context = ContextItem.of("EV-01", None, "question", "?", 0, "user", None, (), None, None, None, {}, None)
    for value in (item, line, context):
        try:
            setattr(value, "position" if value is context else "index", 5)
        except dataclasses.FrozenInstanceError:
            continue
        raise AssertionError(f"{type(value).__name__} took an assignment")
