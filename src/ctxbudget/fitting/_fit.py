"""The entry point :func:`fit` (one request into a model's window, with every decision in a
report) and the memo of whole fits; :func:`count` is in :mod:`._count`. Pure: no I/O.

What is measured is what will be sent: the whole rendered request, including parts that are
counted but never trimmed. A request that fits passes through unchanged; otherwise it is trimmed
and verified (:mod:`._verify`). Both end in one report (:mod:`._report`).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, overload

from ..catalog.catalog import Catalog, UnknownModel
from ..errors import ConfigError
from ..formats.jsonvalue import JsonShape
from ..formats.responses_items import answer_key, continues_stored, stored_answers
from ..gcpause import collector_paused
from ..items import HistoryCut, Plan
from ..memo import fit_memo
from ..tokens.counter import clear_count_cache
from ..tokens.registry import registry_version
from ..trim.documents import OutputOrder, ScoreOrder
from ..trim.extract import clear_sentence_cache
from ..trim.passages import PassageScorer
from ..volatile import find_volatile
from ._context import FitContext, open_context
from ._count import untokenizable_located
from ._memo import FitMemo, content_key, freeze, thaw
from ._options import (
    FitOptions,
    FitSetup,
    OnOverflow,
    body_reserve_field,
    catalog_of,
    check_chat_model,
    check_options,
    check_request,
    check_steps,
    input_format_of,
)
from ._report import FitReport, build_report
from ._verify import Fitted, trim_to_window

__all__ = ["FitResult", "clear_caches", "fit"]


class ReportOnce:
    """A fit's report, built by ``build`` on the first :meth:`get` (under a lock: one build when
    threads read it at once), or given built (:meth:`done`). ``items``: how many items the fit's
    state it holds until then describes (what a memo entry of it weighs)."""

    __slots__ = ("_build", "_built", "_lock", "items")

    def __init__(self, build: Callable[[], FitReport], items: int = 0) -> None:
        self._build: Callable[[], FitReport] | None = build
        self._built: Any = _UNBUILT
        self._lock = threading.Lock()
        self.items = items

    @classmethod
    def done(cls, report: Any) -> ReportOnce:
        made = cls(_never)
        made._build, made._built = None, report
        return made

    @property
    def built(self) -> bool:
        return self._built is not _UNBUILT

    def get(self) -> FitReport:
        built = self._built
        if built is _UNBUILT:
            with self._lock:
                if self._built is _UNBUILT:
                    assert self._build is not None  # set until it is built
                    self._built = self._build()
                    self._build = None  # the fit's state let go
                built = self._built
        return built  # type: ignore[no-any-return]  # a report once built


_UNBUILT = object()


def _never() -> FitReport:
    raise AssertionError("a built report is never built again")


class _BuiltWhenRead:
    """The ``report`` field of :class:`FitResult`: kept in the instance's ``__dict__`` as a
    :class:`ReportOnce` under the field's own name, read as its report (built then)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, result: None, owner: type | None = None) -> _BuiltWhenRead: ...

    @overload
    def __get__(self, result: FitResult, owner: type | None = None) -> FitReport: ...

    def __get__(self, result: FitResult | None, owner: type | None = None) -> FitReport | _BuiltWhenRead:
        once: ReportOnce | None = None if result is None else result.__dict__.get(self._name)
        if once is None:  # the dataclass's field has no default; an instance not made yet has none
            raise AttributeError(self._name)
        return once.get()  # __set__ keeps every value as a ReportOnce

    def __set__(self, result: FitResult, report: FitReport | ReportOnce) -> None:
        result.__dict__[self._name] = report if isinstance(report, ReportOnce) else ReportOnce.done(report)


@dataclass(frozen=True)
class FitResult:
    """The fitted request (same format as given) and the report of every decision.

    The report of a fit of many items (:data:`DEFERRED_REPORT_ITEMS`) is built when it is first
    read (``result.report``), from what the fit decided and counted, which nothing changes after
    the fit: it is the same whenever it is read, and built once (the fit's state is let go then).
    A caller that sends the fitted request and never reads the report does not pay for it: a line
    an item, with the lower bound of each item dropped uncounted, 5 ms of a 2,000-message
    history's 23 ms fit. A smaller fit's report is built with it. A frozen dataclass as before
    (fields, ``replace``, equality, ``repr`` read the report; subclasses too); it copies and
    pickles with its report built (and reads a pickle of the dataclass before this one).
    """

    request: dict[str, Any]
    report: FitReport = _BuiltWhenRead()  # type: ignore[assignment]  # a descriptor (above)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "report": self.report}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)  # the report through its descriptor


_MEMO = FitMemo()
# What an unread report's fit state weighs in the memo for each item, as characters.
UNREAD_CHARS_PER_ITEM = 1_000
# A fit of fewer items builds its report at once. A report costs about 2.5 us an item; its fit's
# state, held until it is read, costs more than that where results are kept: 200 RAG fits of 11
# items each, kept in a list with their reports unread, took 1.06-1.11x as long as with each
# report built at once (the state of 200 fits alive), while a 2,000-message history's report
# (5 ms) built when read still gains kept 20 to a list (0.965x).
DEFERRED_REPORT_ITEMS = 256


def clear_caches(*, counts: bool = True, fits: bool = True) -> None:
    """Forget cached token counts and/or remembered fits (benchmarks use it to time cold fits)."""
    if counts:
        clear_count_cache()
        clear_sentence_cache()
        find_volatile.cache_clear()
    if fits:
        _MEMO.clear()


def fit(
    request: Mapping[str, Any],
    *,
    model: str,
    max_context_tokens: int = 0,
    reserve_output_tokens: int | None = None,
    budget: Mapping[str, Any] | None = None,
    input_format: str | None = None,
    on_overflow: OnOverflow = "error",
    score_order: ScoreOrder = "desc",
    document_order: OutputOrder = "ranked",
    split_documents: bool = False,
    passage_scorer: PassageScorer | None = None,
    catalog: Catalog | None = None,
    unknown_model: UnknownModel = "error",
    safety_factor: float | None = None,
    format: str | None = None,
    count_all: bool = False,
    low_water: float | None = None,
    previous_cut: HistoryCut | Mapping[str, Any] | None = None,
    cache_breakpoints: bool = False,
) -> FitResult:
    """Fit ``request`` into ``model``'s window; returns the fitted request and the report.

    - ``model``: a model id the catalog resolves (dated ids and provider prefixes too).
    - ``max_context_tokens``: a budget below the model's window (0: the window).
    - ``reserve_output_tokens``: tokens kept for the reply; by default the body's own
      ``max_tokens`` / ``max_completion_tokens`` / ``max_output_tokens``, else min(4,096, the
      model's output cap, a quarter of the window).
    - ``budget``: percentages per component (``system``, ``query``, ``documents``, ``history``).
    - ``input_format``: the request's format (detected when None): ``question``, ``openai``,
      ``anthropic``, ``responses``; the fitted request has the same format. ``format`` is its
      former name, still accepted.
    - ``on_overflow``: ``"error"`` raises :class:`BudgetExceeded` when the parts that cannot be
      trimmed alone exceed the window; ``"empty"`` returns what fits with a warning.
    - ``score_order`` / ``document_order``: how documents are ranked and laid out.
    - ``split_documents``: keep the passages of long documents that match the question;
      ``passage_scorer`` (:class:`ctxbudget.trim.passages.PassageScorer`, such as
      :class:`ctxbudget.semantic.EmbeddingScorer`) adds semantic similarity to BM25 there.
    - ``catalog``: models and prices (default: the bundled catalog).
    - ``unknown_model``: ``"error"`` raises :class:`UnknownModelError` for an id the catalog
      cannot resolve; ``"floor"`` budgets it at the seed node's 8,191 tokens with a warning.
    - ``safety_factor``: for a model counted by an estimate, the factor to scale it by (a
      calibrated one, instead of the catalog's); an exact count has none.
    - ``count_all``: tokenize every text. By default a text whose cheap lower bound already shows
      that it cannot fit is dropped uncounted: its report item has ``counted=False`` and that
      bound as ``tokens_before``, and the report's ``uncounted_items`` says how many (its
      ``tokens_before`` is then a lower bound). Decisions and the fitted request are the same.
    - ``low_water``: cut the history in steps that later turns can hold, so the kept prefix stays
      byte-identical for a provider's prompt cache: when over its budget, the history is cut back
      to this share of it (2/3 is a good value) on whole turns (a unit larger than that kept cut
      down, the same on every turn that holds the cut); ``previous_cut`` (the previous turn's
      ``report.history_cut``) is held while what follows it fits.
    - ``cache_breakpoints``: an Anthropic body gets rolling cache breakpoints next to the client's
      own (the newest message, the previous turn's last message, the system prompt; see
      docs/caching.md), where the model caches explicitly.

    Raises :class:`InvalidRequestError` for a malformed body and :class:`ConfigError` for bad
    options. The input is never mutated; the same request and options give the same bytes.
    """
    input_format = input_format_of(input_format, format)
    check_options(
        on_overflow=on_overflow,
        score_order=score_order,
        document_order=document_order,
        reserve_output_tokens=reserve_output_tokens,
        budget=budget,
        passage_scorer=passage_scorer,
        split_documents=split_documents,
        safety_factor=safety_factor,
        count_all=count_all,
        cache_breakpoints=cache_breakpoints,
    )
    held = check_steps(low_water, previous_cut)
    shape = check_request(request)
    checked = catalog_of(catalog)
    resolution = checked.resolve_window(model, max_context_tokens, unknown_model=unknown_model)
    check_chat_model(resolution)
    body, field = body_reserve_field(request)  # validated even when an explicit reserve overrides it
    options = FitOptions(
        model=model,
        max_context_tokens=max_context_tokens,
        reserve_output_tokens=body if reserve_output_tokens is None else reserve_output_tokens,
        reserve_source="reserve_output_tokens=" if reserve_output_tokens is not None else field,
        budget=tuple((k, freeze(v)) for k, v in (budget or {}).items()),
        input_format=input_format,
        on_overflow=on_overflow,
        score_order=score_order,
        document_order=document_order,
        split_documents=split_documents,
        safety_factor=safety_factor,
        count_all=count_all,
        low_water=low_water,
        previous_cut=held,
        cache_breakpoints=cache_breakpoints,
    )
    return _remembered_fit(request, shape, FitSetup(options, checked, resolution, passage_scorer))


def _remembered_fit(request: Mapping[str, Any], shape: JsonShape, setup: FitSetup) -> FitResult:
    """A fit, from the memo when the same request and options were fitted before (by content).
    A scorer is the caller's object (it may be unhashable, and its answers are its own): fits that
    use one are not remembered; the scorer can remember its embeddings itself."""
    with collector_paused():  # see ctxbudget.gcpause: a third of a long history's fit otherwise
        key = (content_key(dict(request), shape), setup.options, _catalog_key(setup), registry_version())
        remembered = _MEMO.get(key) if setup.passage_scorer is None else None
        if remembered is not None:
            return FitResult(*remembered)
        with fit_memo():
            request_out, report = _fit(request, setup)
        # The answer shares nothing with the caller's request (fields passed through, messages
        # kept whole), as a memo hit shares nothing: changing one never changes the other. The
        # memo and the answer share the report (built once, by whichever reads it first).
        frozen = freeze(request_out)
        if setup.passage_scorer is None:
            # an unread report holds the fit's state: weighed by its items as characters (tracemalloc:
            # about 1 kB an item for a long history, where its report read is about 0.5 kB)
            held = 0 if report.built else UNREAD_CHARS_PER_ITEM * report.items
            _MEMO.put(key, frozen, report, shape.chars + held)
        return FitResult(thaw(frozen), report)  # type: ignore[arg-type]  # kept as it is (_BuiltWhenRead)


def _catalog_key(setup: FitSetup) -> Hashable:
    """Everything a fit takes from the catalog, by content: the resolution and the tokenizer."""
    resolution = setup.resolution
    spec = resolution.spec
    return (
        resolution.context_window,
        resolution.max_input_tokens,
        resolution.rule,
        resolution.path,
        resolution.warning,
        spec.max_output_tokens if spec else None,
        spec.cache if spec else None,  # the breakpoints cache_breakpoints marks
        spec.id if spec else None,
        setup.catalog.tokenizer_for(setup.options.model, setup.options.safety_factor),
    )


def _fit(request: Mapping[str, Any], setup: FitSetup) -> tuple[dict[str, Any], ReportOnce]:
    """One fit: measured once; passed through when it fits, else trimmed and verified. Its
    request, and its report: built now for a fit of few items, else when first read."""
    ctx = open_context(request, setup)
    with untokenizable_located(ctx.items):
        fitted, request_out = _fit_in(ctx, request, setup)
    # what the report reads of the outcome: not its request (the caller's messages, when passed through)
    decided = dataclasses.replace(fitted, request={})
    report = ReportOnce(functools.partial(_report_of, ctx, decided), len(ctx.items))
    if len(ctx.items) < DEFERRED_REPORT_ITEMS:
        report.get()  # built now, and the fit's state let go (see DEFERRED_REPORT_ITEMS)
    return request_out, report


def _report_of(ctx: FitContext, fitted: Fitted) -> FitReport:
    """The report of a fit, as :func:`_fit` would have built it at its end (nothing changes the
    context after it): with the collector paused and a refused text named, as in the fit."""
    with collector_paused(), untokenizable_located(ctx.items):
        return build_report(ctx, fitted)


def _fit_in(ctx: FitContext, request: Mapping[str, Any], setup: FitSetup) -> tuple[Fitted, dict[str, Any]]:
    """The fit of a measured context (see :func:`_fit`): its decisions and the request to send."""
    measured = ctx.measured
    # Everything is counted when asked to, or when the bound does not show the request is over;
    # otherwise each count is left to the decision that needs it. What is always kept (the query,
    # the newest message) is counted either way: its count stands for its bound.
    total = None
    if setup.options.count_all or not measured.bound_exceeds(
        ctx.available_raw, [item.key for item in ctx.always_kept()]
    ):
        total = measured.count_all()
    if total is not None and total <= ctx.available_raw:
        fitted = Fitted(dict(request), Plan({}), {}, total, passed_through=True)  # copied by the caller
    else:
        fitted = trim_to_window(ctx, request)
        _something_left(fitted.request, setup.options)
        _stored_calls_answered(request, fitted.request, setup.options, ctx.warnings)
    return fitted, _marked(fitted.request, ctx, setup)


def _stored_calls_answered(
    request: Mapping[str, Any], fitted: Mapping[str, Any], options: FitOptions, warnings: list[str]
) -> None:
    """A Responses body that continues a stored response keeps every output answering that
    response's calls (:func:`~ctxbudget.formats.responses_items.stored_answers`; the API refuses a
    stored call left unanswered): a budget that dropped one is an error naming it, or, when the
    caller asked for emptying, a warning naming it (the body was sent on without a word)."""
    given, sent = request.get("input"), fitted.get("input")
    if not continues_stored(request) or not isinstance(given, list) or not isinstance(sent, list):
        return
    kept = {answer_key(i) for i in sent if isinstance(i, dict)}
    missing = [key for key in stored_answers([i for i in given if isinstance(i, dict)]) if key not in kept]
    if not missing:
        return
    dropped = (
        f"the budget drops the output of {', '.join(k[1] for k in missing)}, which answers a call of "
        "the stored response (previous_response_id, conversation)"
    )
    if options.on_overflow == "empty":
        warnings.append(
            f'{dropped}: the API refuses the body while that call is unanswered (on_overflow="empty")'
        )
        return
    raise ConfigError(f"{dropped}: give history a share that holds it, or a larger window")


def _something_left(fitted: Mapping[str, Any], options: FitOptions) -> None:
    """A chat body trimmed to no message at all is no request (the providers refuse it): an
    error naming the budget that emptied it, unless the caller asked for emptying."""
    if options.on_overflow == "empty" or not isinstance(fitted.get("messages"), list) or fitted["messages"]:
        return
    given = options.budget_mapping() or {}
    zero = ", ".join(f"{k}={v}" for k, v in given.items() if not (isinstance(v, int | float) and v > 0))
    raise ConfigError(
        "the budget leaves no message to send"
        + (f" (budget {zero})" if zero else "")
        + ": give the components this request has a share above 0"
    )


def _marked(request: dict[str, Any], ctx: FitContext, setup: FitSetup) -> dict[str, Any]:
    """With ``cache_breakpoints``, an Anthropic body for a model that caches explicitly gets the
    rolling breakpoints of :func:`ctxbudget.conversation.mark_conversation` (marks change no
    token count)."""
    spec = setup.resolution.spec
    if not setup.options.cache_breakpoints or ctx.fmt.name != "anthropic" or spec is None:
        return request
    if spec.cache.mode != "explicit":
        return request
    from ..conversation import mark_conversation

    counter = setup.catalog.counter_for(setup.options.model)
    return mark_conversation(request, model=setup.options.model, rules=spec.cache, counter=counter).body
