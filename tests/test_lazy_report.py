"""A long fit's report is built when it is first read (a short fit's with it): the same report
whenever that is, built once; and ``FitResult`` stays the frozen dataclass it was."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import threading
import typing
import weakref
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import FitReport, FitResult, ItemReport, clear_caches, fit

MODEL = "gpt-4o"


def _history(lengths: list[int], question: str = "What was agreed about the deposit?") -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful assistant."}]
    for n, length in enumerate(lengths):
        words = " ".join(f"word{(n * 7 + k) % 13} clause {k}." for k in range(length))
        messages.append({"role": "user" if n % 2 == 0 else "assistant", "content": f"Turn {n}: {words}"})
    messages.append({"role": "user", "content": question})
    return {"messages": messages}


def _other_work() -> None:
    """Fits and cache clears between a fit and the read of its report."""
    clear_caches()
    fit(_history([30, 5, 60]), model=MODEL, max_context_tokens=300, reserve_output_tokens=0)
    clear_caches(fits=False)


@settings(max_examples=25, deadline=None)
@given(
    # enough messages for the report to be built when read (DEFERRED_REPORT_ITEMS)
    lengths=st.lists(st.integers(min_value=0, max_value=60), min_size=255, max_size=300),
    budget=st.integers(min_value=60, max_value=3000),
    count_all=st.booleans(),
)
def test_a_report_read_late_is_the_report_read_at_once(
    lengths: list[int], budget: int, count_all: bool
) -> None:
    body = _history(lengths)
    options = {
        "model": MODEL,
        "max_context_tokens": budget,
        "reserve_output_tokens": 0,
        "count_all": count_all,
    }
    clear_caches()
    try:
        late = fit(body, **options)
    except Exception as exc:  # a budget under what is always kept: refused at once, never later
        clear_caches()
        with pytest.raises(type(exc)):
            fit(body, **options)
        return
    _other_work()
    clear_caches()
    at_once = fit(body, **options).report.to_dict()
    assert late.report.to_dict() == at_once


def test_a_cut_message_and_dropped_ones_are_reported_alike_late() -> None:
    """A trimmed history with a message cut to its passages and messages dropped uncounted (281
    messages: its report built when read)."""
    body = _history([400, 3, 3, 3] * 70 + [900])
    options = {"model": MODEL, "max_context_tokens": 3000, "reserve_output_tokens": 0}
    clear_caches()
    late = fit(body, **options)
    _other_work()
    clear_caches()
    at_once = fit(body, **options).report
    report = late.report
    assert report == at_once
    assert report.uncounted_items > 0 and "truncated" in {item.action for item in report.items}


def test_threads_reading_an_unread_report_get_one_report() -> None:
    clear_caches()
    result = fit(_history([50] * 300), model=MODEL, max_context_tokens=2000, reserve_output_tokens=0)
    start = threading.Barrier(8)
    seen: list[object] = []

    def read() -> None:
        start.wait()
        seen.append(result.report)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8 and all(report is seen[0] for report in seen)


def test_a_remembered_fit_shares_its_report() -> None:
    clear_caches()
    body = _history([40] * 50)
    first = fit(body, model=MODEL, max_context_tokens=800, reserve_output_tokens=0)
    second = fit(body, model=MODEL, max_context_tokens=800, reserve_output_tokens=0)
    assert second.request == first.request and second.request is not first.request
    assert second.report is first.report


def test_a_result_is_immutable_compares_copies_and_pickles_with_its_report() -> None:
    clear_caches()
    result = fit(_history([40] * 50), model=MODEL, max_context_tokens=800, reserve_output_tokens=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.request = {}  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.report = result.report  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del result.request
    for other in (copy.deepcopy(result), pickle.loads(pickle.dumps(result)), copy.copy(result)):
        assert type(other) is FitResult and other == result and other.report == result.report
    changed = dataclasses.replace(result.report, warnings=("other",))
    assert result != dataclasses.replace(result, report=changed)
    assert dataclasses.replace(result, report=changed).report is changed
    assert result != FitResult({}, result.report)
    assert "report=FitReport(" in repr(result)
    with pytest.raises(TypeError):
        hash(result)


def test_a_result_is_the_dataclass_it_was() -> None:
    """Fields, ``asdict``, ``replace``, pattern matching and weak references, as before the report
    was built when read; a report given built (or None) is the one read."""
    clear_caches()
    result = fit(_history([40] * 50), model=MODEL, max_context_tokens=800, reserve_output_tokens=0)
    assert [f.name for f in dataclasses.fields(result)] == ["request", "report"]
    items = tuple(dataclasses.asdict(i) for i in result.report.items)
    assert dataclasses.asdict(result)["report"]["items"] == items
    match result:
        case FitResult(request, report):
            assert request is result.request and report is result.report
    assert weakref.ref(result)() is result
    assert FitResult({"a": 1}, None).report is None  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        FitResult({"a": 1})  # type: ignore[call-arg]


def test_an_unread_report_weighs_on_the_memo_by_its_items() -> None:
    """Until it is read, a report holds its fit's state (about 1 kB an item): the memo weighs the
    fit by its items too. Two 20,000-message histories' characters fit the memo together; their
    unread reports' states do not, so the first is let go when the second is remembered."""
    clear_caches()
    first, second = _history([1] * 20_000), _history([2] * 20_000, question="And the rent?")
    options: dict[str, Any] = {"model": MODEL, "max_context_tokens": 900, "reserve_output_tokens": 0}
    kept = fit(first, **options)
    assert fit(first, **options).report is kept.report  # remembered
    fit(second, **options)
    assert fit(first, **options).report is not kept.report  # let go, fitted again
    assert fit(first, **options).report == kept.report


@dataclasses.dataclass(frozen=True)
class Tagged(FitResult):
    """A caller's subclass with a field of its own."""

    tag: int = 0


def test_a_subclass_a_former_pickle_and_an_unmade_result_behave_as_a_dataclass_does() -> None:
    """Copies and pickles keep a subclass and its fields; a result pickled when the report was a
    plain field (its state: the request and the report) reads back; an instance not made yet has
    no report (``hasattr`` False), as a dataclass's has no field."""
    clear_caches()
    result = fit(_history([40] * 300), model=MODEL, max_context_tokens=1500, reserve_output_tokens=0)
    tagged = Tagged(result.request, result.report, 5)
    for other in (pickle.loads(pickle.dumps(tagged)), copy.copy(tagged), copy.deepcopy(tagged)):
        assert type(other) is Tagged and other.tag == 5 and other.report == result.report
    former = FitResult.__new__(FitResult)
    assert not hasattr(former, "report")
    former.__setstate__({"request": result.request, "report": result.report})
    assert former == result and sorted(vars(former)) == ["report", "request"]
    assert typing.get_type_hints(FitResult)["report"] is FitReport


def test_a_report_line_of_a_subclass_gives_its_own_fields_too() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Noted(ItemReport):
        note: str = "extra"

    clear_caches()
    report = fit(_history([40] * 20), model=MODEL, max_context_tokens=800, reserve_output_tokens=0).report
    line = Noted(**dataclasses.asdict(report.items[0]))
    lines = dataclasses.replace(report, items=(line, *report.items[1:])).to_dict()["items"]
    assert lines[0] == {**report.to_dict()["items"][0], "note": "extra"}
    assert lines[1:] == report.to_dict()["items"][1:]
