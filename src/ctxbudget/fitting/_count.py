"""Counting a rendered request (:func:`count`): what the ``count`` command and the gateway's
counts need, and nothing of the trimming pipeline (a count of a small body imports no
``ctxbudget.trim`` strategy, :mod:`ctxbudget.lazy_measure` or report module). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..catalog.catalog import Catalog, UnknownModel
from ..cost import check_amount
from ..errors import InvalidRequestError
from ..formats import resolve_format
from ..formats.tool_prompt import with_tool_prompt
from ..gcpause import collector_paused
from ..items import Item, Rendering
from ..measure import measure_total
from ..tokens.encoding import long_blank_run
from ._options import (
    above_output_cap,
    body_reserve_field,
    catalog_of,
    check_chat_model,
    check_request,
    input_format_of,
    within_output_cap,
)

__all__ = ["count", "estimated_parts", "untokenizable_located"]


def count(
    request: Mapping[str, Any],
    *,
    model: str,
    input_format: str | None = None,
    catalog: Catalog | None = None,
    unknown_model: UnknownModel = "error",
    max_context_tokens: int = 0,
    safety_factor: float | None = None,
    format: str | None = None,
    reserve_output_tokens: int | None = None,
) -> dict[str, Any]:
    """Tokens of the rendered request: ``{"tokens", "exact", "encoding", "model", "safety_factor",
    "format", "catalog_id", "window_rule", "context_window", "max_input_tokens",
    "reserve_output_tokens", "available_tokens", "fits", "warnings"}`` (``warnings``: how the
    window was chosen when that needs saying, such as an unknown id budgeted at the floor).

    ``fits`` says whether the tokens are within ``available_tokens``: the window less the reply
    the body asks for (``reserve_output_tokens``: its ``max_tokens`` or the like, 0 when it asks
    for none; the option, when given, in its place, as :func:`fit` takes it: ``fit`` with no
    reserve holds back min(4,096, the model's output cap, a quarter of the window) when the body
    asks for none: that figure, its report's ``reserve_output_tokens``, asks whether such a fit
    would leave the body whole), and never
    above the input cap, as :func:`fit` reckons it. An id the catalog cannot resolve raises
    :class:`UnknownModelError` unless ``unknown_model="floor"``. The options mean what they
    mean for :func:`fit`.
    """
    input_format = input_format_of(input_format, format)
    check_amount("reserve_output_tokens", reserve_output_tokens, whole=True)
    check_request(request)
    asked, field = body_reserve_field(request)  # validated here too: a bad max_tokens is a bad request
    checked = catalog_of(catalog)
    resolution = checked.resolve_window(model, max_context_tokens, unknown_model=unknown_model)
    check_chat_model(resolution)
    # the model writes no more than its cap; a reserve given as an option is a budget: it stands
    if reserve_output_tokens is None:
        reply = within_output_cap(resolution, asked or 0, field)
    else:
        reply = reserve_output_tokens
    fmt = resolve_format(request, input_format, model)
    counter = checked.counter_for(model, safety_factor)
    with collector_paused():
        items, rendering = fmt.parse_and_render(request)
        model_id = resolution.catalog_id or model
        rendering = with_tool_prompt(rendering, request, model_id, counter.safety_factor)
        with untokenizable_located(items):
            total = measure_total(rendering, counter.encoding)
        estimated = estimated_parts(items, rendering)
    # what the provider takes with the reply the body asks for, as a fit reckons it (a body of
    # 49,180 tokens asking for 1,000 more in a 49,500 window "fit", and the provider refuses it)
    available = max(0, min(resolution.context_window - reply, resolution.input_limit))
    return {
        "tokens": counter.scale(total),
        "exact": counter.exact and not estimated,
        "estimated_parts": list(estimated),
        "encoding": counter.encoding_name,
        "safety_factor": counter.safety_factor,
        "model": model,
        "format": fmt.name,
        "catalog_id": resolution.catalog_id,
        "window_rule": resolution.rule,
        "context_window": resolution.context_window,
        "max_input_tokens": resolution.max_input_tokens,
        "reserve_output_tokens": reply,
        "available_tokens": available,
        "fits": counter.scale(total) <= available,
        "warnings": [w for w in (resolution.warning, above_output_cap(resolution, asked or 0, field)) if w],
    }


@contextmanager
def untokenizable_located(items: tuple[Item, ...]) -> Iterator[None]:
    """A text the tokenizer refuses (a run of 400,000 blanks), raised where nothing says whose
    text it was, is named by the item that holds it (``$.messages[2]``, not ``$``)."""
    try:
        yield
    except InvalidRequestError as exc:
        if exc.path not in ("", "$"):
            raise
        holder = next((item for item in items if long_blank_run(item.text)), None)
        if holder is None:
            raise
        raise InvalidRequestError(exc.reason, holder.path) from None


def estimated_parts(items: tuple[Item, ...], rendering: Rendering) -> tuple[str, ...]:
    """The rendering's estimated parts, each named by its item's JSON path."""
    if not rendering.estimated:  # most requests: no map of every item's path to build
        return ()
    paths = {item.key: item.path for item in items}
    return tuple(
        f"{paths.get(owner, owner) if isinstance(owner, tuple) else owner}: {how}"
        for owner, how in rendering.estimated
    )
