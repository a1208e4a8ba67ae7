"""Counting a rendered request (:func:`count`): what the ``count`` command and the gateway's
counts need, and nothing of the trimming pipeline (a count of a small body imports no
``ctxbudget.trim`` strategy, :mod:`ctxbudget.lazy_measure` or report module). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..catalog.catalog import Catalog, UnknownModel
from ..formats import resolve_format
from ..gcpause import collector_paused
from ..items import Item, Rendering
from ..measure import measure_total
from ._options import body_reserve, catalog_of, check_request, input_format_of

__all__ = ["count", "estimated_parts"]


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
) -> dict[str, Any]:
    """Tokens of the rendered request: ``{"tokens", "exact", "encoding", "model", "safety_factor",
    "format", "catalog_id", "window_rule", "context_window", "max_input_tokens", "fits",
    "warnings"}`` (``warnings``: how the window was chosen when that needs saying, such as an
    unknown id budgeted at the floor).

    ``fits`` says whether the tokens are within the model's input limit (the window, or the input
    cap below it; the output reserve is not counted here). An id the catalog cannot resolve raises
    :class:`UnknownModelError` unless ``unknown_model="floor"``. The options mean what they
    mean for :func:`fit`.
    """
    input_format = input_format_of(input_format, format)
    check_request(request)
    body_reserve(request)  # validated here too: a bad max_tokens is a bad request
    checked = catalog_of(catalog)
    resolution = checked.resolve_window(model, max_context_tokens, unknown_model=unknown_model)
    fmt = resolve_format(request, input_format)
    counter = checked.counter_for(model, safety_factor)
    with collector_paused():
        items, rendering = fmt.parse_and_render(request)
        total = measure_total(rendering, counter.encoding)
        estimated = estimated_parts(items, rendering)
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
        "fits": counter.scale(total) <= resolution.input_limit,
        "warnings": [resolution.warning] if resolution.warning else [],
    }


def estimated_parts(items: tuple[Item, ...], rendering: Rendering) -> tuple[str, ...]:
    """The rendering's estimated parts, each named by its item's JSON path."""
    paths = {item.key: item.path for item in items}
    return tuple(
        f"{paths.get(owner, owner) if isinstance(owner, tuple) else owner}: {how}"
        for owner, how in rendering.estimated
    )
